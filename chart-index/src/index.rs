//! The index: tenants and their packages, kept from change batches alone,
//! and Helm's `index.yaml` of each tenant (written as JSON, see
//! [`render_index`]).
//!
//! A tenant is a real directory below the storage root (the root itself
//! is the tenant `""`); its packages are the readable `*.tgz` files
//! directly in it. Each change of a batch becomes an [`Op`] ([`plan`]:
//! the package is read there, before the index is locked); [`apply_batch`]
//! then applies a batch's ops under the lock and records its `seq`. The
//! first batches of the watch report every existing entry as created (its
//! initial scan), so the same code builds the index and keeps it. With a
//! restart cache, the start's batches take the entries the `cache`
//! module's verdicts give rather than reading those packages ([`Reads`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};
use std::sync::{PoisonError, RwLock};
use std::time::SystemTime;

use serde::Serialize;
use specwatch::{Change, ChangeBatch, ChangeKind, FileType};

use crate::cache::Verdicts;
use crate::chart::{ChartMeta, ChartVersion, read_package};
use crate::storage::{Stamp, resolve_dir, safe_name, stamp_in};

/// Tenants and their packages.
pub struct Index {
    /// The `seq` of the last change batch applied (0 before any).
    pub seq: u64,
    /// Tenant directories, keyed by their path below the root (`""` for
    /// the root, `org/team`); each one's packages keyed by file name.
    pub tenants: BTreeMap<String, BTreeMap<String, ChartVersion>>,
    /// The `seq` of the last batch that changed each tenant: made it, or
    /// added, replaced or removed one of its packages (see
    /// [`Index::changed`]).
    changed: HashMap<String, u64>,
}

impl Index {
    /// The index of an empty storage directory: the root tenant alone
    /// (the watch reports what is below the root, never the root itself).
    pub fn new() -> Index {
        Index {
            seq: 0,
            tenants: BTreeMap::from([(String::new(), BTreeMap::new())]),
            changed: HashMap::new(),
        }
    }

    /// The `seq` of the last batch that changed tenant `key` (0: none
    /// since the index was made): while it stays the same, so does the
    /// tenant's packages, and what is derived from them alone (its
    /// `index.yaml`) may be kept.
    pub fn changed(&self, key: &str) -> u64 {
        self.changed.get(key).copied().unwrap_or(0)
    }

    /// Tenant `key` changes in the batch being applied.
    fn touch(&mut self, key: &str) {
        self.changed.insert(key.to_owned(), self.seq);
    }

    /// Forgets the package `key`; says whether there was one.
    fn forget_package(&mut self, key: &str) -> bool {
        let (parent, file) = split_key(key);
        if let Some(charts) = self.tenants.get_mut(parent)
            && charts.remove(file).is_some()
        {
            eprintln!("index: - {key}");
            self.touch(parent);
            return true;
        }
        false
    }

    /// Every package, keyed by its path below the root (`org/a-1.0.0.tgz`).
    pub fn packages(&self) -> impl Iterator<Item = (String, &ChartVersion)> {
        self.tenants.iter().flat_map(|(t, charts)| {
            charts.iter().map(move |(file, c)| {
                let key = if t.is_empty() {
                    file.clone()
                } else {
                    format!("{t}/{file}")
                };
                (key, c)
            })
        })
    }

    /// Forgets the tenant `key` and every tenant below it; says whether
    /// they had packages.
    fn forget_tenants(&mut self, key: &str) -> bool {
        let below: Vec<String> = self
            .tenants
            .keys()
            .filter(|t| is_within(t, key))
            .cloned()
            .collect();
        let mut packages = false;
        for t in below {
            packages |= self.tenants.remove(&t).is_some_and(|c| !c.is_empty());
            self.changed.remove(&t);
        }
        packages
    }

    /// Applies `op`; says whether a package was added, replaced or
    /// removed (a tenant forgotten with its packages counts).
    fn apply(&mut self, op: Op) -> bool {
        match op {
            Op::Gone(key) => {
                let package = self.forget_package(&key);
                self.forget_tenants(&key) | package
            }
            Op::Dir(key) => {
                let package = self.forget_package(&key);
                if !self.tenants.contains_key(&key) {
                    self.touch(&key);
                    self.tenants.insert(key, BTreeMap::new());
                }
                package
            }
            Op::File { key, package } => {
                let below = self.forget_tenants(&key);
                let (parent, file) = split_key(&key);
                match (package, self.tenants.get_mut(parent)) {
                    (Some(p), Some(charts)) => {
                        eprintln!("index: + {key} ({} {})", p.meta.name, p.meta.version);
                        charts.insert(file.to_owned(), *p);
                        self.touch(parent);
                        true
                    }
                    _ => self.forget_package(&key) | below,
                }
            }
        }
    }
}

/// How the packages of the batches applied so far came into the index,
/// and, while the start's batches are applied, the restart cache's
/// verdicts on them.
#[derive(Default)]
pub struct Reads {
    /// The cache's verdicts (`None`: no cache, or the start is over).
    pub verdicts: Option<Verdicts>,
    /// Entries taken from the cache without opening the file.
    pub cached: usize,
    /// Packages read and parsed.
    pub parsed: usize,
    /// Packages read and hashed only: the cache's entry had their digest.
    pub verified: usize,
    /// Packages that could not be read (`skip` lines).
    pub unreadable: usize,
}

/// Applies one change batch of the storage watch: its packages are read
/// (or taken from `reads`' verdicts) first, then the index is locked for
/// the ops alone. Says on stderr `index: seq N: K changes` once the batch
/// is applied, and returns whether a package was added, replaced or
/// removed.
pub fn apply_batch(
    index: &RwLock<Index>,
    root: &Path,
    batch: &ChangeBatch,
    reads: &mut Reads,
) -> bool {
    let ops: Vec<Op> = batch
        .changes
        .iter()
        .filter_map(|c| plan(root, c, reads))
        .collect();
    let mut changed = false;
    {
        let mut index = index.write().unwrap_or_else(PoisonError::into_inner);
        // Set first, so that the tenants the ops change are marked with
        // this batch (no reader sees the index before the ops are done).
        index.seq = batch.seq.number();
        for op in ops {
            changed |= index.apply(op);
        }
    }
    eprintln!(
        "index: seq {}: {} changes",
        batch.seq.number(),
        batch.changes.len()
    );
    changed
}

/// The packages `batches` would read (each regular `*.tgz` file they
/// report as there), with each one's [`Stamp`] now (`None`: no longer a
/// regular file there, or its tenant no longer a real directory). Each
/// tenant directory is resolved once.
pub fn found<'a>(
    root: &Path,
    batches: impl IntoIterator<Item = &'a ChangeBatch>,
) -> Vec<(String, Option<Stamp>)> {
    let mut dirs: HashMap<String, Option<PathBuf>> = HashMap::new();
    let mut out = Vec::new();
    for c in batches.into_iter().flat_map(|b| &b.changes) {
        if c.kind == ChangeKind::Removed || c.file_type != FileType::File {
            continue;
        }
        let Some(key) = key_of(root, &c.path).filter(|k| k.ends_with(".tgz")) else {
            continue;
        };
        let (parent, file) = split_key(&key);
        let dir = dirs
            .entry(parent.to_owned())
            .or_insert_with(|| resolve_dir(root, &tenant_names(parent), false).ok());
        let stamp = dir.as_deref().and_then(|d| stamp_in(d, file));
        out.push((key, stamp));
    }
    out
}

/// `(parent, name)` of a key; the parent of a top-level name is the root `""`.
fn split_key(key: &str) -> (&str, &str) {
    key.rsplit_once('/').unwrap_or(("", key))
}

/// Whether tenant key `t` is `key` or below it.
fn is_within(t: &str, key: &str) -> bool {
    key.is_empty()
        || t == key
        || (t.len() > key.len() && t.starts_with(key) && t.as_bytes()[key.len()] == b'/')
}

/// What one change does to the index, worked out (packages read) before the
/// index is locked.
enum Op {
    /// Nothing is at this key any more (or nothing that is indexed: a
    /// symlink, a FIFO).
    Gone(String),
    /// A directory: a tenant.
    Dir(String),
    /// A regular file: a package if it is a readable `.tgz` in a tenant.
    File {
        key: String,
        package: Option<Box<ChartVersion>>,
    },
}

/// The key of `path` below `root`: its names joined with `/`, or `None`
/// when it is not below the root or has a name that no URL can reach.
fn key_of(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let mut names = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => names.push(n.to_str().filter(|n| safe_name(n))?),
            _ => return None,
        }
    }
    Some(names.join("/"))
}

/// What `change` does to the index (`None`: nothing; a name no URL can
/// reach, say).
fn plan(root: &Path, change: &Change, reads: &mut Reads) -> Option<Op> {
    let Some(key) = key_of(root, &change.path) else {
        if change.kind != ChangeKind::Removed
            && change.file_type == FileType::File
            && change.path.extension().is_some_and(|e| e == "tgz")
        {
            eprintln!(
                "skip {}: not a plain name below the storage directory",
                change.path.display()
            );
        }
        return None;
    };
    Some(match (change.kind, change.file_type) {
        (ChangeKind::Removed, _) => Op::Gone(key),
        (_, FileType::Dir) => Op::Dir(key),
        (_, FileType::File) => {
            let package = key
                .ends_with(".tgz")
                .then(|| load(root, &key, reads))
                .flatten();
            Op::File { key, package }
        }
        _ => Op::Gone(key),
    })
}

/// The package at `key`: the cache's entry if its verdict is to reuse
/// it, else read (only hashed if the cache's entry to verify has its
/// digest); or `None`, saying on stderr why.
fn load(root: &Path, key: &str, reads: &mut Reads) -> Option<Box<ChartVersion>> {
    let mut known = None;
    if let Some(v) = &mut reads.verdicts {
        if let Some(c) = v.reuse.remove(key) {
            reads.cached += 1;
            return Some(Box::new(c));
        }
        known = v.verify.remove(key);
    }
    let (parent, file) = split_key(key);
    match read_package(root, &tenant_names(parent), file, known.as_ref()) {
        Ok((p, parsed)) => {
            if parsed {
                reads.parsed += 1;
            } else {
                reads.verified += 1;
            }
            Some(Box::new(p))
        }
        Err(reason) => {
            reads.unreadable += 1;
            eprintln!("skip {}: {reason}", root.join(key).display());
            None
        }
    }
}

fn tenant_names(key: &str) -> Vec<&str> {
    if key.is_empty() {
        Vec::new()
    } else {
        key.split('/').collect()
    }
}

/// Helm's `repo.IndexFile`, as chartmuseum serves it: `serverInfo` (an
/// empty mapping: no context path) beside Helm's own fields.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct IndexFile<'a> {
    api_version: &'static str,
    entries: BTreeMap<&'a str, Vec<Entry<'a>>>,
    generated: String,
    server_info: BTreeMap<&'static str, &'static str>,
}

/// Helm's `repo.ChartVersion`: the Chart.yaml's fields, then the package's.
/// One package's entry in `index.yaml`, and chartmuseum's API's answer
/// for one version (the `listing` module): see [`entry`].
#[derive(Serialize)]
pub struct Entry<'a> {
    #[serde(flatten)]
    meta: &'a ChartMeta,
    created: String,
    digest: &'a str,
    urls: [String; 1],
}

/// The entry of package `file`, `c`; its URL relative to the tenant's
/// index (`charts/<file>`).
pub fn entry<'a>(file: &str, c: &'a ChartVersion) -> Entry<'a> {
    Entry {
        meta: &c.meta,
        created: rfc3339(c.created),
        digest: &c.digest,
        urls: [format!("charts/{file}")],
    }
}

/// Each chart's packages in `charts` (keyed by file), newest first
/// (SemVer precedence, as Helm sorts them; then by file name).
pub fn by_name(
    charts: &BTreeMap<String, ChartVersion>,
) -> BTreeMap<&str, Vec<(&String, &ChartVersion)>> {
    let mut out: BTreeMap<&str, Vec<(&String, &ChartVersion)>> = BTreeMap::new();
    for (file, c) in charts {
        out.entry(&c.meta.name).or_default().push((file, c));
    }
    for versions in out.values_mut() {
        versions.sort_by(|a, b| {
            b.1.semver
                .cmp_precedence(&a.1.semver)
                .then_with(|| a.0.cmp(b.0))
        });
    }
    out
}

/// Helm's index.yaml of one tenant: each chart's versions in [`by_name`]'s
/// order, each an [`entry`].
///
/// It is written as JSON, which is YAML too, and which Helm's index loader
/// reads with its JSON decoder (it tries JSON first). Helm's YAML reader
/// is YAML 1.1: a YAML serializer (serde_norway, serde_yaml_ng) leaves a
/// string such as `on`, `y` or `1_000` unquoted, which that reader takes
/// for a boolean or a number, and then Helm refuses the whole index.
pub fn render_index(charts: &BTreeMap<String, ChartVersion>) -> String {
    let entries = by_name(charts)
        .into_iter()
        .map(|(name, versions)| {
            let versions = versions.into_iter().map(|(f, c)| entry(f, c)).collect();
            (name, versions)
        })
        .collect();
    let index = IndexFile {
        api_version: "v1",
        entries,
        generated: rfc3339(SystemTime::now()),
        server_info: BTreeMap::new(),
    };
    let mut json = serde_json::to_string_pretty(&index)
        .unwrap_or_else(|e| format!("{{\"error\": \"the index: {e}\"}}"));
    json.push('\n');
    json
}

/// RFC 3339 in UTC, with as many fractional digits as needed (Go's
/// `RFC3339Nano`, which Helm writes).
fn rfc3339(t: SystemTime) -> String {
    jiff::Timestamp::try_from(t)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .to_string()
}
