//! Chart packages: what a `.tgz` holds and what the index lists of it.
//!
//! A package is a gzip'd tar archive with `<chart>/Chart.yaml`. Reading one
//! checks the whole archive (a gzip stream cut short fails its trailer
//! check, so a package still being written is refused, not half listed),
//! bounds what it may unpack to, and refuses YAML aliases and deep nesting
//! in the Chart.yaml. Name and version must be plain names
//! ([`safe_name`]): they become a file name.

use std::fmt::Write as _;
use std::io::{self, Read};
use std::path::{Component, Path};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use crate::storage::{open_in_storage, safe_name};

/// Packages larger than this are not read into the index.
const MAX_PACKAGE_BYTES: u64 = 256 << 20;
/// A package may unpack to at most this much (a gzip bomb is refused).
const MAX_UNPACKED_BYTES: u64 = 1 << 30;
/// A Chart.yaml larger than this is refused.
const MAX_CHART_YAML_BYTES: u64 = 1 << 20;
/// Nesting deeper than this in a Chart.yaml is refused.
const MAX_YAML_DEPTH: usize = 64;

/// One package, as listed.
#[derive(Clone, Debug)]
pub struct ChartVersion {
    pub meta: ChartMeta,
    /// The package's sha256, in hex.
    pub digest: String,
    /// Its modification time.
    pub created: SystemTime,
}

/// What the index takes from a Chart.yaml.
#[derive(Clone, Debug)]
pub struct ChartMeta {
    pub name: String,
    pub version: String,
    pub api_version: Option<String>,
    pub app_version: Option<String>,
    pub description: Option<String>,
    pub chart_type: Option<String>,
}

/// Semantic-version order where both parse (`v` prefix and build metadata
/// ignored, a pre-release before its release), text order otherwise.
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    fn split(v: &str) -> (&str, Option<&str>) {
        let v = v.strip_prefix('v').unwrap_or(v);
        let v = v.split_once('+').map_or(v, |(v, _)| v);
        match v.split_once('-') {
            Some((core, pre)) => (core, Some(pre)),
            None => (v, None),
        }
    }
    fn parts(a: &str, b: &str) -> Ordering {
        let mut x = a.split('.');
        let mut y = b.split('.');
        loop {
            match (x.next(), y.next()) {
                (None, None) => return Ordering::Equal,
                (None, Some(_)) => return Ordering::Less,
                (Some(_), None) => return Ordering::Greater,
                (Some(p), Some(q)) => {
                    let o = match (p.parse::<u64>(), q.parse::<u64>()) {
                        (Ok(m), Ok(n)) => m.cmp(&n),
                        (Ok(_), Err(_)) => Ordering::Less,
                        (Err(_), Ok(_)) => Ordering::Greater,
                        (Err(_), Err(_)) => p.cmp(q),
                    };
                    if o != Ordering::Equal {
                        return o;
                    }
                }
            }
        }
    }
    let (ac, ap) = split(a);
    let (bc, bp) = split(b);
    parts(ac, bc)
        .then_with(|| match (ap, bp) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(p), Some(q)) => parts(p, q),
        })
        .then_with(|| a.cmp(b))
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

/// Reads a package's Chart.yaml (`<chart>/Chart.yaml`), checking that the
/// whole archive is intact (a gzip stream cut short fails its trailer check).
pub fn parse_chart(bytes: &[u8]) -> Result<ChartMeta, String> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Err("not a gzip file (a chart package is a .tgz as `helm package` makes)".into());
    }
    let gz = Capped {
        inner: flate2::read::GzDecoder::new(bytes),
        left: MAX_UNPACKED_BYTES,
        what: "the unpacked archive",
    };
    let mut archive = tar::Archive::new(gz);
    let corrupt = |e: io::Error| format!("not a valid gzip'd tar archive: {e}");
    let mut chart_yaml = None;
    for entry in archive.entries().map_err(corrupt)? {
        let mut entry = entry.map_err(corrupt)?;
        let path = entry.path().map_err(corrupt)?;
        let names: Vec<_> = path
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect();
        if chart_yaml.is_none()
            && names.len() == 2
            && matches!(names[0], Component::Normal(_))
            && names[1] == Component::Normal("Chart.yaml".as_ref())
            && entry.header().entry_type().is_file()
        {
            if entry.size() > MAX_CHART_YAML_BYTES {
                return Err("Chart.yaml is larger than 1 MiB".into());
            }
            let mut text = String::new();
            entry.read_to_string(&mut text).map_err(corrupt)?;
            chart_yaml = Some(text);
        }
    }
    // Read to the end of the gzip stream: its trailer (CRC and length)
    // tells a whole package from one still being written.
    io::copy(&mut archive.into_inner(), &mut io::sink()).map_err(corrupt)?;
    let text = chart_yaml.ok_or("no Chart.yaml (as <chart>/Chart.yaml) in the package")?;
    chart_meta(&text)
}

fn chart_meta(text: &str) -> Result<ChartMeta, String> {
    use yaml_rust2::{Event as YamlEvent, Yaml, YamlLoader, parser::Parser};
    // Refuse aliases (exponential expansion) and deep nesting (recursive
    // drop) before building the document.
    let mut parser = Parser::new_from_str(text);
    let mut depth = 0usize;
    loop {
        let (ev, _) = parser
            .next_token()
            .map_err(|e| format!("Chart.yaml: {e}"))?;
        match ev {
            YamlEvent::StreamEnd => break,
            YamlEvent::Alias(_) => return Err("Chart.yaml: YAML aliases are not accepted".into()),
            YamlEvent::SequenceStart(..) | YamlEvent::MappingStart(..) => {
                depth += 1;
                if depth > MAX_YAML_DEPTH {
                    return Err("Chart.yaml: nested too deeply".into());
                }
            }
            YamlEvent::SequenceEnd | YamlEvent::MappingEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let docs = YamlLoader::load_from_str(text).map_err(|e| format!("Chart.yaml: {e}"))?;
    let doc = match docs.first() {
        Some(d @ Yaml::Hash(_)) => d,
        _ => return Err("Chart.yaml: not a mapping".into()),
    };
    let scalar = |key: &str| match &doc[key] {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    };
    let required = |key: &str| -> Result<String, String> {
        let v = scalar(key)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("Chart.yaml: no {key}"))?;
        if safe_name(&v) {
            Ok(v)
        } else {
            Err(format!(
                "Chart.yaml: {key} {v:?} is not accepted: use letters, digits, '.', '_', '-', \
                 '+', not starting with '.' nor containing '..'"
            ))
        }
    };
    Ok(ChartMeta {
        name: required("name")?,
        version: required("version")?,
        api_version: scalar("apiVersion"),
        app_version: scalar("appVersion"),
        description: scalar("description"),
        chart_type: scalar("type"),
    })
}

fn sha256_hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(64);
    for b in Sha256::digest(bytes).iter() {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Reads and checks the package `root/tenant.../file`.
pub fn read_package(root: &Path, tenant: &[&str], file: &str) -> Result<ChartVersion, String> {
    let (mut f, meta) = open_in_storage(root, tenant, file).map_err(|e| e.to_string())?;
    if meta.len() > MAX_PACKAGE_BYTES {
        return Err(format!("larger than {MAX_PACKAGE_BYTES} bytes"));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    Read::by_ref(&mut f)
        .take(MAX_PACKAGE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    let chart = parse_chart(&bytes)?;
    Ok(ChartVersion {
        meta: chart,
        digest: sha256_hex(&bytes),
        created: meta.modified().unwrap_or(SystemTime::now()),
    })
}
