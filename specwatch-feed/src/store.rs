//! Everything said to Redis: the keys of a feed, the Lua scripts that
//! fence the lease holder's writes, and one connection's commands. The
//! only file that speaks Redis.
//!
//! Keys, all `specwatch-feed:{NAME}:…` (the braces are Redis Cluster's
//! hash tag: one slot for a feed's keys, so that one script may touch
//! them all):
//!
//! | key | type | what |
//! |---|---|---|
//! | `lease` | string, expiring | the watcher's instance id; `SET NX PX ttl`, renewed every ttl/3 by a compare-and-`PEXPIRE` |
//! | `epoch` | string | the feed's history (16 hex digits), set with its first batch; [`Seq::instance`](specwatch::Seq::instance) of every seq |
//! | `seq` | string | the last published batch's number (the belief is at it) |
//! | `stream` | stream | the batches, entry id `N-1` for batch `N`; fields `epoch`, `instance`, `time` (ms), `changes` (codec.rs); trimmed `MAXLEN ~` |
//! | `belief` | hash | relative path -> type and metadata as published (codec.rs), at `seq` |
//! | `snapshot` | hash | the consumer's blob: `epoch`, `seq`, `data` |
//! | `looks` | stream | read-your-writes requests: `paths`, `reply` (a key), `deadline` (ms) |
//! | `reply:ID` | list, expiring | the answer to one look: `EPOCH:N` |

use std::time::{Duration, SystemTime};

use redis::{Connection, Value};

use crate::belief::Belief;
use crate::codec::{self, Entry, RelChange};

/// A feed's keys.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    prefix: String,
    pub lease: String,
    pub epoch: String,
    pub seq: String,
    pub stream: String,
    pub belief: String,
    pub snapshot: String,
    pub looks: String,
}

impl Keys {
    pub(crate) fn new(name: &str) -> Keys {
        let prefix = format!("specwatch-feed:{{{name}}}:");
        let k = |s: &str| format!("{prefix}{s}");
        Keys {
            lease: k("lease"),
            epoch: k("epoch"),
            seq: k("seq"),
            stream: k("stream"),
            belief: k("belief"),
            snapshot: k("snapshot"),
            looks: k("looks"),
            prefix,
        }
    }

    /// The list one look's answer is pushed to.
    pub(crate) fn reply(&self, id: &str) -> String {
        format!("{}reply:{id}", self.prefix)
    }
}

/// Publishes one batch, fenced: only while the lease is the caller's and
/// the epoch is the one it read (or, for a feed's first batch, there is
/// none yet: it starts the epoch, dropping whatever a lost history left),
/// and only as the number after the last. The stream entry, the belief's
/// update and the last seq are written together.
const PUBLISH: &str = r"
-- KEYS: lease epoch seq stream belief snapshot
-- ARGV: instance epoch n time changes maxlen first nsets [field value]... [removed]...
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('FENCED the lease is not ours')
end
local epoch = redis.call('GET', KEYS[2])
if ARGV[7] == '1' then
  if epoch then return redis.error_reply('FENCED the feed has an epoch already') end
  redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[6])
  redis.call('SET', KEYS[2], ARGV[2])
elseif epoch ~= ARGV[2] then
  return redis.error_reply('FENCED the epoch changed')
end
local last = tonumber(redis.call('GET', KEYS[3]) or '0')
if tonumber(ARGV[3]) ~= last + 1 then
  return redis.error_reply('FENCED not the next seq')
end
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[6], ARGV[3] .. '-1',
  'epoch', ARGV[2], 'instance', ARGV[1], 'time', ARGV[4], 'changes', ARGV[5])
local sets = 8 + 2 * tonumber(ARGV[8])
local i = 9
while i <= sets do
  local j = math.min(i + 999, sets)
  redis.call('HSET', KEYS[5], unpack(ARGV, i, j))
  i = j + 1
end
while i <= #ARGV do
  local j = math.min(i + 999, #ARGV)
  redis.call('HDEL', KEYS[5], unpack(ARGV, i, j))
  i = j + 1
end
redis.call('SET', KEYS[3], ARGV[3])
return last + 1
";

/// Renews the lease if it is still the caller's.
const RENEW: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
";

/// Lets go of the lease if it is still the caller's.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// Keeps the consumer's snapshot, fenced as a publish is, and only for a
/// seq of this epoch that is published.
const PUT_SNAPSHOT: &str = r"
-- KEYS: lease epoch seq snapshot   ARGV: instance epoch n data
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('FENCED the lease is not ours')
end
if redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return redis.error_reply('FENCED the epoch changed')
end
if tonumber(ARGV[3]) > tonumber(redis.call('GET', KEYS[3]) or '0') then
  return redis.error_reply('FENCED a seq not published')
end
redis.call('HSET', KEYS[4], 'epoch', ARGV[2], 'seq', ARGV[3], 'data', ARGV[4])
return 1
";

/// What went wrong with a command.
#[derive(Debug)]
pub(crate) enum Trouble {
    /// A fenced write refused: the caller is not the watcher (any more).
    Fenced(String),
    /// Redis could not be reached, or answered with an error.
    Redis(redis::RedisError),
    /// Redis holds what this feed cannot read.
    Data(String),
}

impl std::fmt::Display for Trouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trouble::Fenced(why) => write!(f, "fenced: {why}"),
            Trouble::Redis(e) => write!(f, "redis: {e}"),
            Trouble::Data(why) => write!(f, "{why}"),
        }
    }
}

impl From<redis::RedisError> for Trouble {
    fn from(e: redis::RedisError) -> Trouble {
        if e.code() == Some("FENCED") {
            let detail = e.detail().unwrap_or("").to_owned();
            return Trouble::Fenced(detail);
        }
        Trouble::Redis(e)
    }
}

impl From<codec::Undecodable> for Trouble {
    fn from(e: codec::Undecodable) -> Trouble {
        Trouble::Data(e.to_string())
    }
}

pub(crate) type Res<T> = Result<T, Trouble>;

/// The belief as Redis holds it, with the epoch and seq it is at.
pub(crate) struct Held {
    pub epoch: u64,
    pub seq: u64,
    pub belief: Belief,
}

/// One batch read from the stream.
pub(crate) struct Published {
    pub n: u64,
    pub epoch: u64,
    pub time: SystemTime,
    pub changes: Vec<RelChange>,
}

/// What a lease attempt saw (in one round trip).
pub(crate) struct Seen {
    pub got_lease: bool,
    pub epoch: Option<u64>,
    pub seq: u64,
}

/// A look request read from the `looks` stream.
pub(crate) struct LookRequest {
    pub id: String,
    pub paths: Vec<Vec<u8>>,
    pub reply: String,
    pub deadline_ms: u64,
}

/// One connection to a feed's Redis.
pub(crate) struct Store {
    con: Connection,
    pub keys: Keys,
    /// How long one command may take (an XREAD's block comes on top).
    io: Duration,
}

fn hex(epoch: u64) -> String {
    format!("{epoch:016x}")
}

fn parse_epoch(s: &str) -> Res<u64> {
    u64::from_str_radix(s, 16).map_err(|_| Trouble::Data(format!("not a feed epoch: {s:?}")))
}

fn bytes(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

fn text(v: &Value) -> Option<&str> {
    bytes(v).and_then(|b| std::str::from_utf8(b).ok())
}

/// A reply's flat list of pairs (`HGETALL`, a stream entry's fields), in
/// RESP2's array or RESP3's map.
fn pairs(v: &Value) -> Vec<(&Value, &Value)> {
    match v {
        Value::Array(items) => items.chunks_exact(2).map(|p| (&p[0], &p[1])).collect(),
        Value::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
        _ => Vec::new(),
    }
}

/// An XREAD/XRANGE reply's entries: (id, fields).
fn entries(v: &Value) -> Vec<(&str, &Value)> {
    let list = match v {
        Value::Array(a) => a.as_slice(),
        _ => return Vec::new(),
    };
    list.iter()
        .filter_map(|e| match e {
            Value::Array(x) if x.len() == 2 => Some((text(&x[0])?, &x[1])),
            _ => None,
        })
        .collect()
}

/// XREAD's reply for one stream: its entries.
fn xread_entries(v: &Value) -> Vec<(&str, &Value)> {
    match v {
        Value::Array(streams) => streams
            .iter()
            .flat_map(|s| match s {
                Value::Array(x) if x.len() == 2 => entries(&x[1]),
                _ => Vec::new(),
            })
            .collect(),
        Value::Map(m) => m.iter().flat_map(|(_, e)| entries(e)).collect(),
        _ => Vec::new(),
    }
}

fn field<'a>(fields: &'a Value, name: &str) -> Option<&'a Value> {
    pairs(fields)
        .into_iter()
        .find(|(k, _)| bytes(k) == Some(name.as_bytes()))
        .map(|(_, v)| v)
}

impl Store {
    /// Connects (within `io`), every command then bounded by `io`.
    pub(crate) fn connect(client: &redis::Client, keys: &Keys, io: Duration) -> Res<Store> {
        let con = client.get_connection_with_timeout(io)?;
        con.set_read_timeout(Some(io))?;
        con.set_write_timeout(Some(io))?;
        Ok(Store {
            con,
            keys: keys.clone(),
            io,
        })
    }

    /// The server's run id: another one is another run of the server,
    /// which may hold less than the one before (a restart from an older
    /// snapshot, or empty).
    pub(crate) fn run_id(&mut self) -> Res<String> {
        let info: String = redis::cmd("INFO").arg("server").query(&mut self.con)?;
        info.lines()
            .find_map(|l| l.strip_prefix("run_id:"))
            .map(|s| s.trim().to_owned())
            .ok_or_else(|| Trouble::Data("INFO server has no run_id".into()))
    }

    /// Tries to take the lease (`SET NX PX`), and reads the epoch and the
    /// last seq, in one round trip.
    pub(crate) fn try_lease(&mut self, me: &str, ttl: Duration) -> Res<Seen> {
        let (set, epoch, seq): (Option<String>, Option<String>, Option<u64>) = redis::pipe()
            .cmd("SET")
            .arg(&self.keys.lease)
            .arg(me)
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis() as u64)
            .cmd("GET")
            .arg(&self.keys.epoch)
            .cmd("GET")
            .arg(&self.keys.seq)
            .query(&mut self.con)?;
        Ok(Seen {
            got_lease: set.is_some(),
            epoch: epoch.as_deref().map(parse_epoch).transpose()?,
            seq: seq.unwrap_or(0),
        })
    }

    /// Renews the lease; false if it is no longer ours.
    pub(crate) fn renew(&mut self, me: &str, ttl: Duration) -> Res<bool> {
        let n: i64 = redis::Script::new(RENEW)
            .key(&self.keys.lease)
            .arg(me)
            .arg(ttl.as_millis() as u64)
            .invoke(&mut self.con)?;
        Ok(n == 1)
    }

    /// Lets go of the lease (if still ours).
    pub(crate) fn release(&mut self, me: &str) -> Res<()> {
        let _: i64 = redis::Script::new(RELEASE)
            .key(&self.keys.lease)
            .arg(me)
            .invoke(&mut self.con)?;
        Ok(())
    }

    /// The belief with its epoch and seq, read at one instant (`None`: no
    /// epoch, no feed yet).
    pub(crate) fn belief(&mut self) -> Res<Option<Held>> {
        let (epoch, seq, all): (Option<String>, Option<u64>, Value) = redis::pipe()
            .atomic()
            .cmd("GET")
            .arg(&self.keys.epoch)
            .cmd("GET")
            .arg(&self.keys.seq)
            .cmd("HGETALL")
            .arg(&self.keys.belief)
            .query(&mut self.con)?;
        let Some(epoch) = epoch else {
            return Ok(None);
        };
        let mut belief = Belief::new();
        for (k, v) in pairs(&all) {
            let (Some(k), Some(v)) = (bytes(k), bytes(v)) else {
                return Err(Trouble::Data("a belief entry that is not bytes".into()));
            };
            belief.insert(k.to_vec(), codec::decode_entry(v)?);
        }
        Ok(Some(Held {
            epoch: parse_epoch(&epoch)?,
            seq: seq.unwrap_or(0),
            belief,
        }))
    }

    /// The batches after number `after` (at most `count`), waiting up to
    /// `block` for one if there is none (`None`: not waiting).
    pub(crate) fn read_after(
        &mut self,
        after: u64,
        count: usize,
        block: Option<Duration>,
    ) -> Res<Vec<Published>> {
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT").arg(count);
        if let Some(b) = block {
            cmd.arg("BLOCK").arg(b.as_millis().max(1) as u64);
            self.con.set_read_timeout(Some(b + self.io))?;
        }
        cmd.arg("STREAMS")
            .arg(&self.keys.stream)
            .arg(format!("{after}-1"));
        let reply: Result<Value, _> = cmd.query(&mut self.con);
        if block.is_some() {
            self.con.set_read_timeout(Some(self.io))?;
        }
        let reply = reply?;
        let mut out = Vec::new();
        for (id, fields) in xread_entries(&reply) {
            let n = id
                .split_once('-')
                .and_then(|(n, _)| n.parse().ok())
                .ok_or_else(|| Trouble::Data(format!("a stream entry id {id:?}")))?;
            let epoch = field(fields, "epoch")
                .and_then(text)
                .ok_or_else(|| Trouble::Data(format!("entry {id} has no epoch")))?;
            let time = field(fields, "time")
                .and_then(text)
                .and_then(|t| t.parse::<u64>().ok())
                .map_or(SystemTime::UNIX_EPOCH, |ms| {
                    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
                });
            let changes = field(fields, "changes")
                .and_then(bytes)
                .ok_or_else(|| Trouble::Data(format!("entry {id} has no changes")))?;
            out.push(Published {
                n,
                epoch: parse_epoch(epoch)?,
                time,
                changes: codec::decode_changes(changes)?,
            });
        }
        Ok(out)
    }

    /// Publishes batch `n` of `epoch` (`first`: it starts the epoch),
    /// fenced (see `PUBLISH`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn publish(
        &mut self,
        me: &str,
        epoch: u64,
        first: bool,
        n: u64,
        time: SystemTime,
        changes: &[RelChange],
        max_len: usize,
    ) -> Res<()> {
        let mut sets: Vec<(&[u8], Vec<u8>)> = Vec::new();
        let mut removed: Vec<&[u8]> = Vec::new();
        // In order: the last change of a path is what the belief keeps.
        let mut last: std::collections::BTreeMap<&[u8], Option<Entry>> = Default::default();
        for c in changes {
            last.insert(&c.path, c.entry());
        }
        for (p, e) in last {
            match e {
                Some(e) => sets.push((p, codec::encode_entry(&e))),
                None => removed.push(p),
            }
        }
        let publish = redis::Script::new(PUBLISH);
        let mut script = publish.prepare_invoke();
        let k = &self.keys;
        script
            .key(&k.lease)
            .key(&k.epoch)
            .key(&k.seq)
            .key(&k.stream)
            .key(&k.belief)
            .key(&k.snapshot)
            .arg(me)
            .arg(hex(epoch))
            .arg(n)
            .arg(codec::millis(time))
            .arg(codec::encode_changes(changes))
            .arg(max_len)
            .arg(if first { "1" } else { "0" })
            .arg(sets.len());
        for (p, v) in &sets {
            script.arg(*p).arg(v.as_slice());
        }
        for p in removed {
            script.arg(p);
        }
        let _: i64 = script.invoke(&mut self.con)?;
        Ok(())
    }

    /// Keeps the consumer's snapshot `data` of seq `n` of `epoch`, fenced.
    pub(crate) fn put_snapshot(&mut self, me: &str, epoch: u64, n: u64, data: &[u8]) -> Res<()> {
        let k = &self.keys;
        let _: i64 = redis::Script::new(PUT_SNAPSHOT)
            .key(&k.lease)
            .key(&k.epoch)
            .key(&k.seq)
            .key(&k.snapshot)
            .arg(me)
            .arg(hex(epoch))
            .arg(n)
            .arg(data)
            .invoke(&mut self.con)?;
        Ok(())
    }

    /// The consumer's snapshot, if there is one of the current epoch:
    /// (epoch, seq, data).
    pub(crate) fn snapshot(&mut self) -> Res<Option<(u64, u64, Vec<u8>)>> {
        type Fields = (Option<String>, Option<u64>, Option<Vec<u8>>);
        let (current, snap): (Option<String>, Fields) = redis::pipe()
            .atomic()
            .cmd("GET")
            .arg(&self.keys.epoch)
            .cmd("HMGET")
            .arg(&self.keys.snapshot)
            .arg("epoch")
            .arg("seq")
            .arg("data")
            .query(&mut self.con)?;
        match (current, snap) {
            (Some(c), (Some(e), Some(n), Some(data))) if c == e => {
                Ok(Some((parse_epoch(&e)?, n, data)))
            }
            _ => Ok(None),
        }
    }

    /// Asks the watcher to look at `paths`; its answer goes to `reply`.
    pub(crate) fn ask_look(&mut self, paths: &[Vec<u8>], reply: &str, deadline_ms: u64) -> Res<()> {
        let _: String = redis::cmd("XADD")
            .arg(&self.keys.looks)
            .arg("MAXLEN")
            .arg("~")
            .arg(1000)
            .arg("*")
            .arg("paths")
            .arg(codec::encode_paths(paths))
            .arg("reply")
            .arg(reply)
            .arg("deadline")
            .arg(deadline_ms)
            .query(&mut self.con)?;
        Ok(())
    }

    /// Waits up to `timeout` for the answer at `reply`: (epoch, seq).
    pub(crate) fn wait_answer(
        &mut self,
        reply: &str,
        timeout: Duration,
    ) -> Res<Option<(u64, u64)>> {
        self.con.set_read_timeout(Some(timeout + self.io))?;
        let got: Result<Option<(String, String)>, _> = redis::cmd("BLPOP")
            .arg(reply)
            .arg(timeout.as_secs_f64().max(0.001))
            .query(&mut self.con);
        self.con.set_read_timeout(Some(self.io))?;
        let Some((_, answer)) = got? else {
            return Ok(None);
        };
        let (e, n) = answer
            .split_once(':')
            .ok_or_else(|| Trouble::Data(format!("a look's answer {answer:?}")))?;
        let n = n
            .parse()
            .map_err(|_| Trouble::Data(format!("a look's answer {answer:?}")))?;
        Ok(Some((parse_epoch(e)?, n)))
    }

    /// Answers a look: everything it found is in batches up to `n`.
    pub(crate) fn answer_look(&mut self, reply: &str, epoch: u64, n: u64) -> Res<()> {
        redis::pipe()
            .cmd("RPUSH")
            .arg(reply)
            .arg(format!("{}:{n}", hex(epoch)))
            .ignore()
            .cmd("PEXPIRE")
            .arg(reply)
            .arg(30_000)
            .ignore()
            .query::<()>(&mut self.con)?;
        Ok(())
    }

    /// The look requests after id `after` (`MS-0`: since that time),
    /// waiting up to `block` for one. One that cannot be read comes with
    /// no reply key (its asker times out).
    pub(crate) fn look_requests(&mut self, after: &str, block: Duration) -> Res<Vec<LookRequest>> {
        self.con.set_read_timeout(Some(block + self.io))?;
        let reply: Result<Value, _> = redis::cmd("XREAD")
            .arg("COUNT")
            .arg(256)
            .arg("BLOCK")
            .arg(block.as_millis().max(1) as u64)
            .arg("STREAMS")
            .arg(&self.keys.looks)
            .arg(after)
            .query(&mut self.con);
        self.con.set_read_timeout(Some(self.io))?;
        let reply = reply?;
        let mut out = Vec::new();
        for (id, fields) in xread_entries(&reply) {
            let paths = field(fields, "paths").and_then(bytes);
            let reply = field(fields, "reply").and_then(text);
            let deadline = field(fields, "deadline")
                .and_then(text)
                .and_then(|d| d.parse().ok());
            // A request that cannot be read is passed over: its asker
            // times out.
            if let (Some(p), Some(r), Some(d)) = (paths, reply, deadline)
                && let Ok(paths) = codec::decode_paths(p)
            {
                out.push(LookRequest {
                    id: id.to_owned(),
                    paths,
                    reply: r.to_owned(),
                    deadline_ms: d,
                });
            } else {
                out.push(LookRequest {
                    id: id.to_owned(),
                    paths: Vec::new(),
                    reply: String::new(),
                    deadline_ms: 0,
                });
            }
        }
        Ok(out)
    }
}
