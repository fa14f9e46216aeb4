//! The index: tenants and their packages, kept from change batches alone,
//! and Helm's `index.yaml` of each tenant.
//!
//! A tenant is a real directory below the storage root (the root itself
//! is the tenant `""`); its packages are the readable `*.tgz` files
//! directly in it. Each change of a batch becomes an [`Op`] ([`plan`]:
//! the package is read there, before the index is locked); [`apply_batch`]
//! then applies a batch's ops under the lock and records its `seq`. The
//! first batches of the watch report every existing entry as created (its
//! initial scan), so the same code builds the index and keeps it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Component, Path};
use std::sync::{PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use specwatch::{Change, ChangeBatch, ChangeKind, FileType};

use crate::chart::{ChartVersion, compare_versions, read_package};
use crate::storage::safe_name;

/// Tenants and their packages.
pub struct Index {
    /// The `seq` of the last change batch applied (0 before any).
    pub seq: u64,
    /// Tenant directories, keyed by their path below the root (`""` for
    /// the root, `org/team`); each one's packages keyed by file name.
    pub tenants: BTreeMap<String, BTreeMap<String, ChartVersion>>,
}

impl Index {
    /// The index of an empty storage directory: the root tenant alone
    /// (the watch reports what is below the root, never the root itself).
    pub fn new() -> Index {
        Index {
            seq: 0,
            tenants: BTreeMap::from([(String::new(), BTreeMap::new())]),
        }
    }

    fn forget_package(&mut self, key: &str) {
        let (parent, file) = split_key(key);
        if let Some(charts) = self.tenants.get_mut(parent)
            && charts.remove(file).is_some()
        {
            eprintln!("index: - {key}");
        }
    }

    /// Forgets the tenant `key` and every tenant below it.
    fn forget_tenants(&mut self, key: &str) {
        let below: Vec<String> = self
            .tenants
            .keys()
            .filter(|t| is_within(t, key))
            .cloned()
            .collect();
        for t in below {
            self.tenants.remove(&t);
        }
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Gone(key) => {
                self.forget_package(&key);
                self.forget_tenants(&key);
            }
            Op::Dir(key) => {
                self.forget_package(&key);
                self.tenants.entry(key).or_default();
            }
            Op::File { key, package } => {
                self.forget_tenants(&key);
                let (parent, file) = split_key(&key);
                match (package, self.tenants.get_mut(parent)) {
                    (Some(p), Some(charts)) => {
                        eprintln!("index: + {key} ({} {})", p.meta.name, p.meta.version);
                        charts.insert(file.to_owned(), p);
                    }
                    _ => self.forget_package(&key),
                }
            }
        }
    }
}

/// Applies one change batch of the storage watch: its packages are read
/// first, then the index is locked for the ops alone. Says on stderr
/// `index: seq N: K changes` once the batch is applied.
pub fn apply_batch(index: &RwLock<Index>, root: &Path, batch: &ChangeBatch) {
    let ops: Vec<Op> = batch.changes.iter().filter_map(|c| plan(root, c)).collect();
    {
        let mut index = index.write().unwrap_or_else(PoisonError::into_inner);
        for op in ops {
            index.apply(op);
        }
        index.seq = batch.seq.0;
    }
    eprintln!(
        "index: seq {}: {} changes",
        batch.seq.0,
        batch.changes.len()
    );
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
        package: Option<ChartVersion>,
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
fn plan(root: &Path, change: &Change) -> Option<Op> {
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
            let package = key.ends_with(".tgz").then(|| load(root, &key)).flatten();
            Op::File { key, package }
        }
        _ => Op::Gone(key),
    })
}

/// Reads the package at `key`, or says on stderr why not.
fn load(root: &Path, key: &str) -> Option<ChartVersion> {
    let (parent, file) = split_key(key);
    match read_package(root, &tenant_names(parent), file) {
        Ok(p) => Some(p),
        Err(reason) => {
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

/// Helm's index.yaml of one tenant. Every string is double-quoted, so no
/// version reads as a number.
pub fn render_index(charts: &BTreeMap<String, ChartVersion>) -> String {
    let mut by_name: BTreeMap<&str, Vec<(&String, &ChartVersion)>> = BTreeMap::new();
    for (file, c) in charts {
        by_name.entry(&c.meta.name).or_default().push((file, c));
    }
    let mut y = String::from("apiVersion: v1\n");
    if by_name.is_empty() {
        y.push_str("entries: {}\n");
    } else {
        y.push_str("entries:\n");
    }
    for (name, mut versions) in by_name {
        versions.sort_by(|a, b| {
            compare_versions(&b.1.meta.version, &a.1.meta.version).then_with(|| a.0.cmp(b.0))
        });
        let _ = writeln!(y, "  {}:", yaml_str(name));
        for (file, c) in versions {
            let m = &c.meta;
            let api_version = m.api_version.as_deref().unwrap_or("v1");
            let _ = writeln!(y, "  - apiVersion: {}", yaml_str(api_version));
            let url = format!("charts/{file}");
            let created = rfc3339(c.created);
            for (key, v) in [
                ("appVersion", m.app_version.as_deref()),
                ("created", Some(&created)),
                ("description", m.description.as_deref()),
                ("digest", Some(&c.digest)),
                ("name", Some(&m.name)),
                ("type", m.chart_type.as_deref()),
            ] {
                if let Some(v) = v {
                    let _ = writeln!(y, "    {key}: {}", yaml_str(v));
                }
            }
            let _ = writeln!(y, "    urls:\n    - {}", yaml_str(&url));
            let _ = writeln!(y, "    version: {}", yaml_str(&m.version));
        }
    }
    let _ = writeln!(y, "generated: {}", yaml_str(&rfc3339(SystemTime::now())));
    y
}

/// A YAML double-quoted scalar.
fn yaml_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20
                || ('\u{7f}'..='\u{9f}').contains(&c)
                || matches!(
                    c,
                    '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                ) =>
            {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// RFC 3339 in UTC, with nanoseconds.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:09}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_nanos()
    )
}
