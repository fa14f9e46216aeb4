//! The index: tenants and their packages, kept from change batches alone,
//! and Helm's `index.yaml` of each tenant (written as JSON, see
//! [`render_index`]).
//!
//! A tenant is a real directory below the storage root (the root itself
//! is the tenant `""`); its packages are the readable `*.tgz` files
//! directly in it. Each change of a batch becomes an [`Op`] ([`plan`]:
//! the package is read there); [`apply_batch`] then applies a batch's ops
//! and records its `seq`. The [`Index`] belongs to the thread that applies
//! batches alone: requests see the immutable snapshots that thread
//! publishes after each batch (the `snapshot` module), never the index
//! itself, so nothing here is locked. The
//! first batches of the watch report every existing entry as created (its
//! initial scan), so the same code builds the index and keeps it. With a
//! restart cache, the start's batches take the entries the `cache`
//! module's verdicts give rather than reading those packages ([`Reads`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;
use specwatch::{Change, ChangeBatch, ChangeKind, FileType};
use tracing::{info, warn};

use crate::cache::Verdicts;
use crate::chart::{ChartMeta, ChartVersion, read_package};
use crate::proxy::Links;
use crate::storage::{Stamp, from_time, resolve_dir, safe_name, stamp_in};

/// One tenant's packages, keyed by file name.
pub type Charts = BTreeMap<String, ChartVersion>;

/// Tenants and their packages: owned by the thread that applies the
/// watch's batches (no lock: requests read the `snapshot` module's
/// snapshots of it). Each tenant's packages are shared with the snapshot
/// last published, and copied on their next change (`Arc::make_mut`).
pub struct Index {
    /// The `seq` of the last change batch applied (0 before any).
    pub seq: u64,
    /// Tenant directories, keyed by their path below the root (`""` for
    /// the root, `org/team`).
    pub tenants: BTreeMap<String, Arc<Charts>>,
    /// The tenants changed (made, forgotten, or a package of theirs
    /// added, replaced or removed) since [`Index::take_touched`] last ran.
    touched: BTreeSet<String>,
}

impl Index {
    /// The index of an empty storage directory: the root tenant alone
    /// (the watch reports what is below the root, never the root itself),
    /// which counts as changed (nothing has been published yet).
    pub fn new() -> Index {
        Index {
            seq: 0,
            tenants: BTreeMap::from([(String::new(), Arc::default())]),
            touched: BTreeSet::from([String::new()]),
        }
    }

    /// The tenants changed since the last call: what a new snapshot must
    /// render again (or drop, those no longer in [`Index::tenants`]).
    pub fn take_touched(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.touched)
    }

    /// How many packages it holds.
    pub fn len(&self) -> usize {
        self.tenants.values().map(|c| c.len()).sum()
    }

    /// Forgets the package `key`; says whether there was one (and notes
    /// the line `index: - KEY` in `said`).
    fn forget_package(&mut self, key: &str, said: &mut Vec<String>) -> bool {
        let (parent, file) = split_key(key);
        let Some(charts) = self.tenants.get_mut(parent) else {
            return false;
        };
        if !charts.contains_key(file) {
            return false;
        }
        Arc::make_mut(charts).remove(file);
        said.push(format!("index: - {key}"));
        self.touched.insert(parent.to_owned());
        true
    }

    /// Forgets the tenant `key` and every tenant below it (found as a
    /// range of the sorted keys, not by a scan); says whether they had
    /// packages.
    fn forget_tenants(&mut self, key: &str) -> bool {
        let below: Vec<String> = within(&self.tenants, key).cloned().collect();
        let mut packages = false;
        for t in below {
            packages |= self.tenants.remove(&t).is_some_and(|c| !c.is_empty());
            self.touched.insert(t);
        }
        packages
    }

    /// Applies `op`; says whether a package was added, replaced or
    /// removed (a tenant forgotten with its packages counts), and notes in
    /// `said` the lines to log once the index's lock is released.
    fn apply(&mut self, op: Op, said: &mut Vec<String>) -> bool {
        match op {
            Op::Gone(key) => {
                let package = self.forget_package(&key, said);
                self.forget_tenants(&key) | package
            }
            Op::Dir(key) => {
                let package = self.forget_package(&key, said);
                if !self.tenants.contains_key(&key) {
                    self.touched.insert(key.clone());
                    self.tenants.insert(key, Arc::default());
                }
                package
            }
            Op::File { key, package } => {
                let below = self.forget_tenants(&key);
                let (parent, file) = split_key(&key);
                match (package, self.tenants.get_mut(parent)) {
                    (Some(p), Some(charts)) => {
                        said.push(format!(
                            "index: + {key} ({} {})",
                            p.meta.name, p.meta.version
                        ));
                        Arc::make_mut(charts).insert(file.to_owned(), *p);
                        self.touched.insert(parent.to_owned());
                        true
                    }
                    _ => self.forget_package(&key, said) | below,
                }
            }
        }
    }
}

/// The keys of `map` that are tenant `key` or below it, in order: `key`
/// itself, then the range from `key/` up to `key0` (`0` follows `/` in
/// ASCII, so that range holds exactly the keys starting `key/`); every
/// key for the root `""`. A range of the sorted keys, not a scan.
pub fn within<'a, V>(
    map: &'a BTreeMap<String, V>,
    key: &str,
) -> impl Iterator<Item = &'a String> + 'a {
    let range = if key.is_empty() {
        map.range::<str, _>(..)
    } else {
        let (lo, hi) = (format!("{key}/"), format!("{key}0"));
        map.range::<str, _>((Bound::Included(lo.as_str()), Bound::Excluded(hi.as_str())))
    };
    let own = map
        .get_key_value(key)
        .filter(|_| !key.is_empty())
        .map(|(k, _)| k);
    own.into_iter().chain(range.map(|(k, _)| k))
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
    /// When each package read since the caller last emptied this was
    /// last changed on the storage (the newest of its file's mtime and
    /// ctime): the metrics' time from a change to the index.
    pub changed_at: Vec<SystemTime>,
}

/// Applies one change batch of the storage watch to `index`: its
/// packages are read (or taken from `reads`' verdicts), then applied.
/// Logs `index: + KEY (NAME VERSION)` and `index: - KEY` per package
/// once the batch is applied, and returns whether a package was added,
/// replaced or removed (the caller says `index: seq N: K changes` once
/// the snapshot that shows it is published).
pub fn apply_batch(index: &mut Index, root: &Path, batch: &ChangeBatch, reads: &mut Reads) -> bool {
    let ops: Vec<Op> = batch
        .changes
        .iter()
        .filter_map(|c| plan(root, c, reads))
        .collect();
    index.seq = batch.seq.number();
    let mut changed = false;
    let mut said = Vec::new();
    for op in ops {
        changed |= index.apply(op, &mut said);
    }
    for line in said {
        info!("{line}");
    }
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

/// What one change does to the index, worked out (packages read) before
/// any is applied.
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
            warn!(
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
/// digest); or `None`, logging why.
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
            if let Some(s) = &p.source {
                reads.changed_at.push(from_time(s.stamp.newest()));
            }
            Some(Box::new(p))
        }
        Err(reason) => {
            reads.unreadable += 1;
            warn!("skip {}: {reason}", root.join(key).display());
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

/// Helm's `repo.IndexFile`, as chartmuseum serves it: `serverInfo`
/// (`contextPath` with `--context-path`, else an empty mapping) beside
/// Helm's own fields.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct IndexFile<'a> {
    api_version: &'static str,
    entries: BTreeMap<&'a str, Vec<Entry<'a>>>,
    generated: String,
    server_info: BTreeMap<&'static str, &'a str>,
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

/// The entry of package `file`, `c`; its URL `charts/<file>` after
/// `base` (empty: relative to the tenant's index; else `--chart-url`'s
/// absolute prefix, see [`Links::base`]).
pub fn entry<'a>(base: &str, file: &str, c: &'a ChartVersion) -> Entry<'a> {
    Entry {
        meta: &c.meta,
        created: rfc3339(c.created),
        digest: &c.digest,
        urls: [format!("{base}charts/{file}")],
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

/// Helm's index.yaml of tenant `key`, `charts`: each chart's versions in
/// [`by_name`]'s order, each an [`entry`] linked as `links` say.
///
/// It is written as JSON, which is YAML too, and which Helm's index loader
/// reads with its JSON decoder (it tries JSON first). Helm's YAML reader
/// is YAML 1.1: a YAML serializer (serde_norway, serde_yaml_ng) leaves a
/// string such as `on`, `y` or `1_000` unquoted, which that reader takes
/// for a boolean or a number, and then Helm refuses the whole index.
pub fn render_index(charts: &BTreeMap<String, ChartVersion>, links: &Links, key: &str) -> String {
    let base = links.base(key);
    let entries = by_name(charts)
        .into_iter()
        .map(|(name, versions)| {
            let versions = versions
                .into_iter()
                .map(|(f, c)| entry(&base, f, c))
                .collect();
            (name, versions)
        })
        .collect();
    let index = IndexFile {
        api_version: "v1",
        entries,
        generated: rfc3339(SystemTime::now()),
        server_info: links
            .context_path
            .as_deref()
            .map(|c| ("contextPath", c))
            .into_iter()
            .collect(),
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::within;

    #[test]
    fn tenants_within_a_key_are_a_range_of_path_prefixes() {
        let keys = [
            "", "org", "org-x", "org.b", "org/a", "org/a/b", "org/z", "org0", "orga", "p",
        ];
        let map: BTreeMap<String, ()> = keys.iter().map(|k| ((*k).to_owned(), ())).collect();
        let of = |key: &str| within(&map, key).map(String::as_str).collect::<Vec<_>>();
        // A string prefix that is no path prefix (`org-x`, `org.b`,
        // `orga`, `org0`) is not within `org`.
        assert_eq!(of("org"), ["org", "org/a", "org/a/b", "org/z"]);
        assert_eq!(of("org/a"), ["org/a", "org/a/b"]);
        assert_eq!(of("org-x"), ["org-x"]);
        assert_eq!(of("nope"), Vec::<&str>::new());
        assert_eq!(
            of("or"),
            Vec::<&str>::new(),
            "no tenant `or`, none below it"
        );
        assert_eq!(of(""), keys, "everything is within the root");
    }
}
