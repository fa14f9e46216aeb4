//! Chart packages: what a `.tgz` holds and what the index lists of it.
//!
//! A package is a gzip'd tar archive with `<chart>/Chart.yaml`. Reading one
//! checks the whole archive (a gzip stream cut short fails its trailer
//! check, so a package still being written is refused, not half listed),
//! bounds what it may unpack to, and refuses YAML aliases and deep nesting
//! in the Chart.yaml (yaml-rust2's event scan, before the document is
//! read into [`ChartMeta`] by serde_norway).
//!
//! What is read is Helm's `chart.Metadata`, field for field, and checked
//! as Helm's loader checks it (`Metadata.Validate`): a version that Helm's
//! semver library parses ([`helm_version`]), a type that is `application`
//! or `library`, dependency aliases of letters, digits, `_`, `-`, no two
//! dependencies with the same name or alias; text fields have their
//! whitespace made spaces and unprintable characters dropped, as Helm does
//! (so the index lists what `helm repo index` lists). Name and version must
//! also be plain names ([`safe_name`]): they become a file name.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Component, Path};
use std::time::SystemTime;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use sha2::{Digest, Sha256};

use crate::storage::{Stamp, Time, open_in_storage, safe_name, to_time};

/// The version of the rules by which a package becomes an entry (what is
/// read, checked, sanitized, refused): bump it with any change to them,
/// and a cache of entries read by other rules is not used (the `cache`
/// module).
pub const READER: u32 = 1;

/// Packages larger than this are not read into the index.
const MAX_PACKAGE_BYTES: u64 = 256 << 20;
/// A package may unpack to at most this much (a gzip bomb is refused).
const MAX_UNPACKED_BYTES: u64 = 1 << 30;
/// A Chart.yaml larger than this is refused.
const MAX_CHART_YAML_BYTES: u64 = 1 << 20;
/// A GNU long name or link, or a pax header, may hold at most this much
/// (as in Go's archive/tar, which Helm reads packages with).
const MAX_TAR_HEADER_BYTES: u64 = 1 << 20;
/// Nesting deeper than this in a Chart.yaml is refused.
const MAX_YAML_DEPTH: usize = 64;

/// One package, as listed.
#[derive(Clone, Debug)]
pub struct ChartVersion {
    pub meta: ChartMeta,
    /// `meta.version` as Helm orders it.
    pub semver: semver::Version,
    /// The package's sha256, in hex.
    pub digest: String,
    /// Its modification time.
    pub created: SystemTime,
    /// The version of the file it was read from, when the read can vouch
    /// for it (`None`: the file changed while it was read).
    pub source: Option<Source>,
}

/// Which version of a package's file an entry was read from, and when the
/// read began: what lets a later run take the entry without reading the
/// file (the `cache` module).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    pub stamp: Stamp,
    pub read_at: Time,
}

/// A Chart.yaml, as Helm's `chart.Metadata` (`pkg/chart/v2/metadata.go`):
/// the same fields under the same names, written as Helm writes them
/// (empty ones left out; `apiVersion` `v1` when the Chart.yaml has none),
/// in the order Helm's YAML has them (alphabetical). A field given as
/// `null` reads as empty, as in Helm.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChartMeta {
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub api_version: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub app_version: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub condition: String,
    #[serde(
        default,
        deserialize_with = "no_null_items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub dependencies: Vec<Dependency>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_false"
    )]
    pub deprecated: bool,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub description: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub home: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub icon: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub keywords: Vec<String>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub kube_version: String,
    #[serde(
        default,
        deserialize_with = "no_null_items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub maintainers: Vec<Maintainer>,
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sources: Vec<String>,
    /// A string in Helm's `Metadata` (a dependency's `tags` is a list).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub tags: String,
    #[serde(
        rename = "type",
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub chart_type: String,
    #[serde(default, deserialize_with = "nullable")]
    pub version: String,
}

/// A maintainer, as Helm's `chart.Maintainer`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Maintainer {
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub email: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub url: String,
}

/// A dependency, as Helm's `chart.Dependency`: `name` and `repository`
/// are always written (Helm's tags on them have no `omitempty`);
/// `import-values` holds strings and `{child, parent}` mappings.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Dependency {
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub alias: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub condition: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_false"
    )]
    pub enabled: bool,
    #[serde(
        rename = "import-values",
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub import_values: Vec<serde_json::Value>,
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub repository: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tags: Vec<String>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub version: String,
}

/// The part of a (deprecated) `requirements.yaml` that Helm's loader
/// takes into the metadata of a chart.
#[derive(Deserialize)]
struct Requirements {
    #[serde(default, deserialize_with = "no_null_items")]
    dependencies: Vec<Dependency>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A value, or its type's empty value for `null` (as Go reads a `null`).
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A list none of whose items is `null` (Helm refuses empty maintainers
/// and dependencies).
fn no_null_items<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Option::<Vec<Option<T>>>::deserialize(d)?
        .unwrap_or_default()
        .into_iter()
        .map(|item| item.ok_or_else(|| D::Error::custom("an entry is empty or null")))
        .collect()
}

/// A version as Helm reads it (Masterminds/semver's `NewVersion`, which
/// Helm's loader and index use): an optional `v`, one to three numbers
/// (leading zeros allowed; missing ones are 0), then SemVer's pre-release
/// and build parts. Ordered by SemVer precedence
/// ([`semver::Version::cmp_precedence`]).
pub fn helm_version(v: &str) -> Result<semver::Version, String> {
    let why = |detail: &str| {
        format!(
            "version {v:?} is not a semantic version as Helm reads it \
             (MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD], optionally after a 'v'): {detail}"
        )
    };
    let s = v.strip_prefix('v').unwrap_or(v);
    let (core, rest) = s.split_at(s.find(['-', '+']).unwrap_or(s.len()));
    let numbers: Vec<&str> = core.split('.').collect();
    if numbers.len() > 3 {
        return Err(why("more than three numbers"));
    }
    let mut parts = [0u64; 3];
    for (part, n) in parts.iter_mut().zip(&numbers) {
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return Err(why(&format!("{n:?} is not a number")));
        }
        *part = n.parse().map_err(|e| why(&format!("{n}: {e}")))?;
    }
    let [major, minor, patch] = parts;
    semver::Version::parse(&format!("{major}.{minor}.{patch}{rest}"))
        .map_err(|e| why(&e.to_string()))
}

/// Helm's `sanitizeString`: whitespace becomes a space, unprintable
/// characters go (control, format and private-use characters here: Go's
/// `unicode.IsPrint` also drops unassigned code points, which std cannot
/// tell).
fn sanitize(s: &mut String) {
    fn unprintable(c: char) -> bool {
        c.is_control()
            || matches!(c,
                '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}'
                | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}'
                | '\u{e000}'..='\u{f8ff}' | '\u{f0000}'..)
    }
    if s.chars()
        .any(|c| (c.is_whitespace() && c != ' ') || unprintable(c))
    {
        *s = s
            .chars()
            .filter_map(|c| match c {
                c if c.is_whitespace() => Some(' '),
                c if unprintable(c) => None,
                c => Some(c),
            })
            .collect();
    }
}

/// A reader that fails (rather than ends) past `left` bytes.
struct Capped<R> {
    inner: R,
    left: u64,
    what: &'static str,
}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self.left.checked_sub(n as u64).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is too large", self.what),
            )
        })?;
        Ok(n)
    }
}

/// The archive of a gzip'd package, its unpacked size capped.
fn unpack<R: Read>(package: R) -> tar::Archive<Capped<flate2::read::GzDecoder<R>>> {
    tar::Archive::new(Capped {
        inner: flate2::read::GzDecoder::new(package),
        left: MAX_UNPACKED_BYTES,
        what: "the unpacked archive",
    })
}

fn corrupt(e: io::Error) -> String {
    format!("not a valid gzip'd tar archive: {e}")
}

/// Refuses an archive with a GNU long name or link, or a pax header,
/// larger than [`MAX_TAR_HEADER_BYTES`]. The tar crate reads each of
/// them whole into memory: a run of zeros declared as one, which gzip
/// shrinks to a thousandth, had it allocate up to the unpacked bound
/// (1 GiB) for a package of a megabyte (seen in the tar crate's source;
/// without this check the `chart_parse` fuzz target hits its 32 MiB
/// malloc limit in tar's `read_all` within a thousand runs). Read raw,
/// entry by entry, nothing held: a pass of its own (the archive is
/// inflated twice).
fn check_tar_headers(package: impl Read) -> Result<(), String> {
    for entry in unpack(package).entries().map_err(corrupt)?.raw(true) {
        let entry = entry.map_err(corrupt)?;
        let t = entry.header().entry_type();
        let special = t.is_gnu_longname()
            || t.is_gnu_longlink()
            || t.is_pax_local_extensions()
            || t.is_pax_global_extensions();
        if special && entry.size() > MAX_TAR_HEADER_BYTES {
            return Err(format!(
                "not a valid gzip'd tar archive: a tar extension header (type {:?}) is \
                 larger than 1 MiB",
                t.as_byte() as char
            ));
        }
    }
    Ok(())
}

/// Reads a package's Chart.yaml (`<chart>/Chart.yaml`), checking that the
/// whole archive is intact (a gzip stream cut short fails its trailer check).
pub fn parse_chart(bytes: &[u8]) -> Result<(ChartMeta, semver::Version), String> {
    parse_chart_from(|| Ok(bytes))
}

/// [`parse_chart`] of the package in file `f` (read from its start, in
/// buffered reads: never held whole).
pub fn parse_chart_file(f: &std::fs::File) -> Result<(ChartMeta, semver::Version), String> {
    parse_chart_from(|| {
        let mut r = f;
        r.seek(SeekFrom::Start(0))?;
        Ok(io::BufReader::with_capacity(64 << 10, r))
    })
}

/// [`parse_chart`] of the package `open` reads from its start (each call:
/// the archive is read more than once).
fn parse_chart_from<R: Read>(
    mut open: impl FnMut() -> io::Result<R>,
) -> Result<(ChartMeta, semver::Version), String> {
    let mut magic = [0u8; 2];
    let gzip = open()
        .and_then(|mut r| r.read_exact(&mut magic))
        .is_ok_and(|()| magic == [0x1f, 0x8b]);
    if !gzip {
        return Err("not a gzip file (a chart package is a .tgz as `helm package` makes)".into());
    }
    check_tar_headers(open().map_err(corrupt)?)?;
    let mut archive = unpack(open().map_err(corrupt)?);
    let (mut chart_yaml, mut requirements) = (None, None);
    for entry in archive.entries().map_err(corrupt)? {
        let mut entry = entry.map_err(corrupt)?;
        let path = entry.path().map_err(corrupt)?;
        let names: Vec<_> = path
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect();
        let slot = match names.as_slice() {
            [Component::Normal(_), Component::Normal(file)] if *file == "Chart.yaml" => {
                &mut chart_yaml
            }
            [Component::Normal(_), Component::Normal(file)] if *file == "requirements.yaml" => {
                &mut requirements
            }
            _ => continue,
        };
        if slot.is_none() && entry.header().entry_type().is_file() {
            let file = names[1].as_os_str().to_string_lossy().into_owned();
            if entry.size() > MAX_CHART_YAML_BYTES {
                return Err(format!("{file} is larger than 1 MiB"));
            }
            let mut text = String::new();
            entry.read_to_string(&mut text).map_err(corrupt)?;
            *slot = Some(text);
        }
    }
    // Read to the end of the gzip stream: its trailer (CRC and length)
    // tells a whole package from one still being written.
    io::copy(&mut archive.into_inner(), &mut io::sink()).map_err(corrupt)?;
    let text = chart_yaml.ok_or("no Chart.yaml (as <chart>/Chart.yaml) in the package")?;
    let mut meta: ChartMeta = read_yaml("Chart.yaml", &text)?;
    // Helm's loader reads a requirements.yaml (apiVersion v1's
    // dependencies) into the metadata too.
    if let Some(text) = requirements {
        let r: Requirements = read_yaml("requirements.yaml", &text)?;
        if !r.dependencies.is_empty() {
            meta.dependencies = r.dependencies;
        }
    }
    let version = check(&mut meta).map_err(|e| format!("Chart.yaml: {e}"))?;
    Ok((meta, version))
}

/// Reads a YAML file of a package (`what`) into `T`, after refusing
/// aliases (exponential expansion) and deep nesting (recursive drop). A
/// leading byte order mark is dropped, as Helm does.
fn read_yaml<T: for<'de> Deserialize<'de>>(what: &str, text: &str) -> Result<T, String> {
    use yaml_rust2::{Event as YamlEvent, parser::Parser};
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut parser = Parser::new_from_str(text);
    let mut depth = 0usize;
    loop {
        let (ev, _) = parser.next_token().map_err(|e| format!("{what}: {e}"))?;
        if depth == 0 && matches!(ev, YamlEvent::SequenceStart(..) | YamlEvent::Scalar(..)) {
            return Err(format!("{what}: not a mapping"));
        }
        match ev {
            YamlEvent::StreamEnd => break,
            YamlEvent::Alias(_) => return Err(format!("{what}: YAML aliases are not accepted")),
            YamlEvent::SequenceStart(..) | YamlEvent::MappingStart(..) => {
                depth += 1;
                if depth > MAX_YAML_DEPTH {
                    return Err(format!("{what}: nested too deeply"));
                }
            }
            YamlEvent::SequenceEnd | YamlEvent::MappingEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    serde_norway::from_str(text).map_err(|e| format!("{what}: {e}"))
}

/// Checks `meta` as Helm's `Metadata.Validate` does (and that name and
/// version can be a file name), sanitizing its text as Helm does; returns
/// the version as Helm orders it.
fn check(meta: &mut ChartMeta) -> Result<semver::Version, String> {
    let m = meta;
    if m.api_version.is_empty() {
        m.api_version = "v1".into();
    }
    // Not the name: it becomes a file name, and one that Helm would have
    // to change is refused (below) rather than changed.
    for s in [
        &mut m.description,
        &mut m.home,
        &mut m.icon,
        &mut m.condition,
        &mut m.tags,
        &mut m.app_version,
        &mut m.kube_version,
    ]
    .into_iter()
    .chain(&mut m.sources)
    .chain(&mut m.keywords)
    {
        sanitize(s);
    }
    for p in &mut m.maintainers {
        for s in [&mut p.name, &mut p.email, &mut p.url] {
            sanitize(s);
        }
    }
    for d in &mut m.dependencies {
        for s in [
            &mut d.name,
            &mut d.version,
            &mut d.repository,
            &mut d.condition,
        ]
        .into_iter()
        .chain(&mut d.tags)
        {
            sanitize(s);
        }
    }
    for (key, v) in [("name", &m.name), ("version", &m.version)] {
        if v.is_empty() {
            return Err(format!("no {key}"));
        }
        if !safe_name(v) {
            return Err(format!(
                "{key} {v:?} is not accepted: use letters, digits, '.', '_', '-', \
                 '+', not starting with '.' nor containing '..'"
            ));
        }
    }
    let version = helm_version(&m.version)?;
    if !matches!(m.chart_type.as_str(), "" | "application" | "library") {
        return Err(format!(
            "type {:?} is not accepted: application or library",
            m.chart_type
        ));
    }
    let mut keys = BTreeSet::new();
    for d in &m.dependencies {
        let alias_ok = d
            .alias
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !alias_ok {
            return Err(format!(
                "dependency {:?}: alias {:?} is not accepted: use letters, digits, '_', '-'",
                d.name, d.alias
            ));
        }
        let key = if d.alias.is_empty() {
            &d.name
        } else {
            &d.alias
        };
        if !keys.insert(key) {
            return Err(format!(
                "more than one dependency with name or alias {key:?}"
            ));
        }
    }
    Ok(version)
}

/// `bytes`' sha256, in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A digest in lower-case hex.
pub fn hex(digest: &[u8]) -> String {
    let mut s = String::with_capacity(2 * digest.len());
    for b in digest {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Reads and checks the package `root/tenant.../file`, from the file in
/// 64 KiB reads, never held whole: a pass to hash it, then (unless
/// `known` matches) [`parse_chart_file`]'s passes. With `known`, an entry
/// of the same file that an earlier run read: if the bytes still have its
/// digest, its metadata is taken as it is, not parsed again (the second
/// value says whether the package was parsed).
pub fn read_package(
    root: &Path,
    tenant: &[&str],
    file: &str,
    known: Option<&ChartVersion>,
) -> Result<(ChartVersion, bool), String> {
    let read_at = to_time(SystemTime::now());
    let (f, stat) = open_in_storage(root, tenant, file).map_err(|e| e.to_string())?;
    if stat.len() > MAX_PACKAGE_BYTES {
        return Err(format!("larger than {MAX_PACKAGE_BYTES} bytes"));
    }
    let mut hash = Sha256::new();
    let mut chunk = vec![0u8; (64 << 10).min(stat.len() as usize + 1)];
    let mut size = 0u64;
    loop {
        let n = match (&f).read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.to_string()),
        };
        size += n as u64;
        if size > MAX_PACKAGE_BYTES {
            return Err(format!("larger than {MAX_PACKAGE_BYTES} bytes"));
        }
        hash.update(&chunk[..n]);
    }
    let digest = hex(&hash.finalize());
    let created = stat.modified().unwrap_or(SystemTime::now());
    let (mut c, parsed) = match known.filter(|k| k.digest == digest) {
        Some(k) => (
            ChartVersion {
                created,
                source: None,
                ..k.clone()
            },
            false,
        ),
        None => {
            let (meta, semver) = parse_chart_file(&f)?;
            let c = ChartVersion {
                meta,
                semver,
                digest,
                created,
                source: None,
            };
            (c, true)
        }
    };
    // The same before the first read and after the last: every pass read
    // that version's bytes (a write meanwhile changes the ctime, unless it
    // falls within the clock's granularity: see the `cache` module's
    // `settled`; the watch reports such a write, and the file is read
    // again).
    let stamp = Stamp::of(&stat);
    c.source = f
        .metadata()
        .is_ok_and(|after| Stamp::of(&after) == stamp)
        .then_some(Source { stamp, read_at });
    Ok((c, parsed))
}

#[cfg(test)]
mod tests {
    use super::{ChartMeta, check, helm_version, read_yaml};

    #[test]
    fn versions_as_helm_reads_them() {
        for (v, as_semver) in [
            ("1.2.3", "1.2.3"),
            ("v1.2.3", "1.2.3"),
            ("1", "1.0.0"),
            ("1.2", "1.2.0"),
            ("v2", "2.0.0"),
            ("01.02.03", "1.2.3"),
            ("1.0.0-rc.1", "1.0.0-rc.1"),
            ("1.0.0-rc-1+build.7", "1.0.0-rc-1+build.7"),
            ("1.0-alpha", "1.0.0-alpha"),
            ("1.0.0+001", "1.0.0+001"),
        ] {
            let parsed = helm_version(v).unwrap_or_else(|e| panic!("{v}: {e}"));
            assert_eq!(parsed.to_string(), as_semver, "{v}");
        }
        for v in [
            "",
            "latest",
            "1.0.0.0",
            "V1.0.0",
            "1..0",
            "1.0.0-",
            "1.0.0-01",
            "1.0.0-rc..1",
            "1.0.0+",
            "1.0.0-rc_1",
            "-1.0.0",
            "1.0.x",
            "99999999999999999999.0.0",
        ] {
            let e = helm_version(v).expect_err(v);
            assert!(
                e.contains(&format!("{v:?}")),
                "the error names the version: {e}"
            );
        }
        let order = [
            "v2.0.0",
            "1.10.0",
            "1.9.0",
            "1.0.0",
            "1.0.0-rc.2",
            "1.0.0-rc.1",
        ];
        for w in order.windows(2) {
            let (a, b) = (helm_version(w[0]).unwrap(), helm_version(w[1]).unwrap());
            assert!(a.cmp_precedence(&b).is_gt(), "{} after {}", w[0], w[1]);
        }
    }

    fn meta(yaml: &str) -> Result<ChartMeta, String> {
        let mut m: ChartMeta = read_yaml("Chart.yaml", yaml)?;
        check(&mut m).map_err(|e| format!("Chart.yaml: {e}"))?;
        Ok(m)
    }

    #[test]
    fn every_field_of_helms_metadata() {
        let m = meta(
            "\u{feff}apiVersion: v2\nname: rich\nversion: v1.2.3\nappVersion: 1.10\n\
             description: \"two\\nlines\\tand\\u200bmore\"\nhome: https://h\nicon: https://i\n\
             sources: [https://s]\nkeywords: [\"on\", \"y\", \"1_000\"]\nkubeVersion: '>=1.20'\n\
             deprecated: true\ncondition: c\ntags: t1,t2\ntype: library\n\
             annotations: {a: \"on\", b: 2}\nmaintainers:\n- {name: n, email: e, url: u}\n\
             dependencies:\n- name: base\n  version: ^1\n  repository: https://r\n  alias: b-1\n  \
             tags: [x]\n  enabled: true\n  import-values: [data, {child: c, parent: p}]\n\
             - name: other\n  repository: ~\n",
        )
        .unwrap();
        assert_eq!(m.description, "two lines andmore", "sanitized as Helm does");
        assert_eq!(m.app_version, "1.10");
        assert_eq!(m.keywords, ["on", "y", "1_000"]);
        assert_eq!(m.annotations["b"], "2");
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(
            json["dependencies"][1],
            serde_json::json!({"name": "other", "repository": ""}),
            "name and repository are always written"
        );
        assert_eq!(json["dependencies"][0]["import-values"][1]["parent"], "p");
        assert_eq!(json["maintainers"][0]["email"], "e");
        assert_eq!(json["type"], "library");
        assert_eq!(json["deprecated"], true);
        let bare = serde_json::to_value(meta("name: a\nversion: 1.0.0\nhome: ~\n").unwrap());
        assert_eq!(
            bare.unwrap(),
            serde_json::json!({"apiVersion": "v1", "name": "a", "version": "1.0.0"}),
            "empty fields are left out; apiVersion v1 when none is given"
        );
    }

    #[test]
    fn what_helm_refuses_is_refused_saying_why() {
        for (yaml, says) in [
            (
                "name: a\nversion: latest\n",
                "\"latest\" is not a semantic version",
            ),
            ("name: a\n", "no version"),
            ("version: 1.0.0\n", "no name"),
            (
                "name: a/b\nversion: 1.0.0\n",
                "name \"a/b\" is not accepted",
            ),
            ("name: a\nversion: 1.0.0\ntype: app\n", "type \"app\""),
            (
                "name: a\nversion: 1.0.0\nkeywords: k\n",
                "keywords: invalid type",
            ),
            (
                "name: a\nversion: 1.0.0\nmaintainers: [~]\n",
                "empty or null",
            ),
            (
                "name: a\nversion: 1.0.0\ndependencies:\n- {name: b, alias: \"x y\"}\n",
                "alias \"x y\"",
            ),
            (
                "name: a\nversion: 1.0.0\ndependencies: [{name: b}, {name: b}]\n",
                "more than one dependency with name or alias \"b\"",
            ),
            ("a: &x [1]\nb: *x\n", "aliases are not accepted"),
            ("- 1\n", "Chart.yaml: not a mapping"),
            ("just text\n", "Chart.yaml: not a mapping"),
        ] {
            let e = meta(yaml).expect_err(yaml);
            assert!(e.contains(says), "{yaml:?}: {e:?} should say {says:?}");
        }
        let deep = format!(
            "name: a\nversion: 1.0.0\nx: {}{}\n",
            "[".repeat(70),
            "]".repeat(70)
        );
        assert!(meta(&deep).unwrap_err().contains("nested too deeply"));
    }
}
