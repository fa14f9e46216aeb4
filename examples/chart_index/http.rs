//! A small HTTP/1.1 server: one thread per connection (at most
//! [`MAX_CONNECTIONS`], more are answered 503), one request per connection
//! (`Connection: close`).
//!
//! Hand-written so that request sizes, timeouts and refused bodies stay
//! under its control: the request line and headers are bounded
//! ([`MAX_HEAD_BYTES`], [`MAX_HEADERS`]), control characters refused, a
//! body is read only by the handler that wants it ([`read_body`], with a
//! cap, `Content-Length` or chunked), and after answering what the client
//! still sends is read and dropped for a while, so that it reads the
//! answer rather than a connection reset. Paths are split into segments
//! percent-decoded exactly once ([`segments`]).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Connections served at once; more are answered 503.
const MAX_CONNECTIONS: usize = 64;
/// The request line and headers together.
const MAX_HEAD_BYTES: u64 = 64 << 10;
/// Headers in a request.
const MAX_HEADERS: usize = 100;
/// Each read of a request waits at most this long.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Each write of an answer waits at most this long.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// After answering, what the client still sends (a refused body) is read
/// and dropped, up to these bounds, so that the answer is not lost to a
/// connection reset.
const LINGER_BYTES: u64 = 64 << 20;
const LINGER_TIME: Duration = Duration::from_secs(5);

/// An answer.
pub struct Reply {
    status: u16,
    content_type: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

impl Reply {
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Reply {
        Reply {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    pub fn json(status: u16, json: String) -> Reply {
        Reply::new(status, "application/json", json + "\n")
    }

    /// A JSON error: `{"error": message}`.
    pub fn error(status: u16, message: &str) -> Reply {
        Reply::json(status, format!("{{\"error\":{}}}", json_str(message)))
    }

    /// Adds a header.
    pub fn with(mut self, name: &'static str, value: String) -> Reply {
        self.headers.push((name, value));
        self
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// A JSON string.
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Serves `listener` for ever: each request, read on a thread of its own,
/// is answered with what `handler` makes of it.
pub fn serve<H>(listener: &TcpListener, handler: H)
where
    H: Fn(&Head, &mut Conn) -> Reply + Send + Sync + 'static,
{
    let handler = Arc::new(handler);
    let open = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(stream) = stream else {
            // Out of descriptors, say: let some connections end.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::SeqCst);
            let mut s = stream;
            let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = write_reply(&mut s, &Reply::error(503, "too many connections"), false);
            continue;
        }
        let handler = Arc::clone(&handler);
        let open2 = Arc::clone(&open);
        let spawned = std::thread::Builder::new()
            .name("http".into())
            .spawn(move || {
                connection(stream, &*handler);
                open2.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// One request, one answer, then the connection closes.
fn connection(stream: TcpStream, handler: &dyn Fn(&Head, &mut Conn) -> Reply) {
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut conn = Conn {
        reader: BufReader::new(read_half),
        stream,
    };
    let (reply, head_only) = match read_head(&mut conn.reader) {
        Ok(head) => (handler(&head, &mut conn), head.method == "HEAD"),
        Err(reply) => (reply, false),
    };
    if write_reply(&mut conn.stream, &reply, head_only).is_ok() {
        linger(conn);
    }
}

/// A connection: its request is read from `reader`, its answer written
/// to `stream`.
pub struct Conn {
    reader: BufReader<TcpStream>,
    stream: TcpStream,
}

/// Closes our side, then reads and drops what the client still sends (a
/// body we refused) for a while, so that it reads our answer rather than a
/// connection reset.
fn linger(mut conn: Conn) {
    let _ = conn.stream.flush();
    let _ = conn.stream.shutdown(Shutdown::Write);
    let deadline = Instant::now() + LINGER_TIME;
    let mut left = LINGER_BYTES;
    let mut buf = [0u8; 16 << 10];
    while left > 0 {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        let _ = conn.stream.set_read_timeout(Some(deadline - now));
        match conn.reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n as u64),
        }
    }
}

fn write_reply(w: &mut TcpStream, reply: &Reply, head_only: bool) -> io::Result<()> {
    let mut h = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        reason(reply.status),
        reply.content_type,
        reply.body.len()
    );
    for (name, value) in &reply.headers {
        let _ = write!(h, "{name}: {value}\r\n");
    }
    h.push_str("\r\n");
    w.write_all(h.as_bytes())?;
    if !head_only {
        w.write_all(&reply.body)?;
    }
    w.flush()
}

/// A request's line and headers.
pub struct Head {
    pub method: String,
    /// The request target as sent (not decoded).
    pub target: String,
    /// Header names lower-cased.
    headers: Vec<(String, String)>,
}

impl Head {
    /// The values of header `name` (lower case).
    pub fn header(&self, name: &str) -> impl Iterator<Item = &str> {
        self.headers
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One line of at most `budget` bytes (CRLF or LF stripped).
fn read_line(r: &mut impl BufRead, budget: &mut u64) -> Result<String, Reply> {
    let mut line = Vec::new();
    let n = r
        .by_ref()
        .take(*budget)
        .read_until(b'\n', &mut line)
        .map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                Reply::error(408, "request timeout")
            }
            _ => Reply::error(400, &e.to_string()),
        })?;
    *budget -= n as u64;
    if line.last() != Some(&b'\n') {
        return Err(if n == 0 {
            Reply::error(400, "empty request")
        } else {
            Reply::error(431, "request line or headers too long")
        });
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if line
        .iter()
        .any(|&b| b == 0 || b == b'\r' || b == b'\n' || b == 0x7f)
    {
        return Err(Reply::error(400, "control character in the request head"));
    }
    String::from_utf8(line).map_err(|_| Reply::error(400, "request head is not UTF-8"))
}

fn read_head(r: &mut impl BufRead) -> Result<Head, Reply> {
    let mut budget = MAX_HEAD_BYTES;
    let line = read_line(r, &mut budget)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Reply::error(400, "malformed request line"));
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(Reply::error(505, "HTTP/1.0 and HTTP/1.1 only"));
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(Reply::error(400, "malformed method"));
    }
    if target.bytes().any(|b| b <= b' ') {
        return Err(Reply::error(400, "control character in the request target"));
    }
    let mut headers = Vec::new();
    loop {
        let line = read_line(r, &mut budget)?;
        if line.is_empty() {
            break;
        }
        if headers.len() == MAX_HEADERS {
            return Err(Reply::error(431, "too many headers"));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(Reply::error(400, "malformed header"));
        };
        if name.is_empty() || name.bytes().any(|b| b <= b' ') {
            return Err(Reply::error(400, "malformed header name"));
        }
        headers.push((
            name.to_ascii_lowercase(),
            value.trim_matches([' ', '\t']).to_owned(),
        ));
    }
    Ok(Head {
        method: method.to_owned(),
        target: target.to_owned(),
        headers,
    })
}

/// The request body, at most `max` bytes (413 past that, checked on the
/// declared length first and counted while reading).
pub fn read_body(head: &Head, conn: &mut Conn, max: u64) -> Result<Vec<u8>, Reply> {
    let too_large = || Reply::error(413, &format!("the package is larger than {max} bytes"));
    let chunked = match head.header("transfer-encoding").next() {
        Some(te) if te.eq_ignore_ascii_case("chunked") => true,
        Some(te) => return Err(Reply::error(501, &format!("transfer-encoding {te:?}"))),
        None => false,
    };
    let lengths: BTreeSet<&str> = head.header("content-length").collect();
    if chunked && !lengths.is_empty() || lengths.len() > 1 {
        return Err(Reply::error(400, "conflicting body lengths"));
    }
    let length = match lengths.first() {
        Some(l) if !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()) => {
            Some(l.parse::<u64>().map_err(|_| too_large())?)
        }
        Some(_) => return Err(Reply::error(400, "malformed content-length")),
        None if chunked => None,
        None => return Err(Reply::error(411, "send the package with a Content-Length")),
    };
    if length.is_some_and(|n| n > max) {
        return Err(too_large());
    }
    if head
        .header("expect")
        .any(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        let _ = conn.stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let io_error = |e: io::Error| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Reply::error(408, "request timeout"),
        _ => Reply::error(400, &format!("reading the body: {e}")),
    };
    let mut body = Vec::new();
    if let Some(n) = length {
        body.reserve(n as usize);
        conn.reader
            .by_ref()
            .take(n)
            .read_to_end(&mut body)
            .map_err(io_error)?;
        if body.len() as u64 != n {
            return Err(Reply::error(
                400,
                "the body is shorter than its content-length",
            ));
        }
        return Ok(body);
    }
    // Each chunk-size line may take 4 KiB, the trailers 64 KiB in all.
    let mut trailers = MAX_HEAD_BYTES;
    loop {
        let line = read_line(&mut conn.reader, &mut 4096)?;
        let size = line.split(';').next().unwrap_or("").trim();
        let size =
            u64::from_str_radix(size, 16).map_err(|_| Reply::error(400, "malformed chunk size"))?;
        if size == 0 {
            // Trailers, up to the empty line.
            while !read_line(&mut conn.reader, &mut trailers)?.is_empty() {}
            return Ok(body);
        }
        if size > max - body.len() as u64 {
            return Err(too_large());
        }
        let before = body.len();
        conn.reader
            .by_ref()
            .take(size)
            .read_to_end(&mut body)
            .map_err(io_error)?;
        if (body.len() - before) as u64 != size {
            return Err(Reply::error(400, "the body ends inside a chunk"));
        }
        if !read_line(&mut conn.reader, &mut 4096)?.is_empty() {
            return Err(Reply::error(400, "malformed chunk"));
        }
    }
}

/// Splits the request path into segments, each percent-decoded once. A
/// segment that decodes to something with `/`, `\`, NUL, or to `.`/`..`,
/// or that is not UTF-8, refuses the request.
pub fn segments(target: &str) -> Result<Vec<String>, Reply> {
    let path = target.split(['?', '#']).next().unwrap_or("");
    let Some(path) = path.strip_prefix('/') else {
        return Err(Reply::error(400, "the request target must be a path"));
    };
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for raw in path.split('/') {
        let mut bytes = Vec::with_capacity(raw.len());
        let mut it = raw.bytes();
        while let Some(b) = it.next() {
            if b == b'%' {
                let hex = [it.next(), it.next()];
                let v = match hex {
                    [Some(h), Some(l)] => std::str::from_utf8(&[h, l])
                        .ok()
                        .and_then(|s| u8::from_str_radix(s, 16).ok()),
                    _ => None,
                };
                bytes.push(v.ok_or_else(|| Reply::error(400, "malformed percent-encoding"))?);
            } else {
                bytes.push(b);
            }
        }
        let seg = String::from_utf8(bytes)
            .map_err(|_| Reply::error(400, "a path segment is not UTF-8"))?;
        if seg.is_empty() || seg == "." || seg == ".." || seg.contains(['/', '\\', '\0']) {
            return Err(Reply::error(
                400,
                &format!("path segment {seg:?} is not accepted"),
            ));
        }
        out.push(seg);
    }
    Ok(out)
}
