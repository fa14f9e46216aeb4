//! Chart packages built for the tests (gzip'd tar archives with a
//! Chart.yaml) and what the tests read back: Helm indexes, snapshots of
//! directory trees.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;
use sha2::{Digest, Sha256};
use yaml_rust2::YamlLoader;

/// A gzip'd tar archive of `files`.
pub(crate) fn tgz(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    for (path, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(1_700_000_000);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, path, &data[..]).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

/// A package whose Chart.yaml is `chart_yaml`, under `dir/`.
pub(crate) fn package(dir: &str, chart_yaml: &str) -> Vec<u8> {
    tgz(&[
        (format!("{dir}/Chart.yaml"), chart_yaml.as_bytes().to_vec()),
        (format!("{dir}/values.yaml"), b"replicas: 1\n".to_vec()),
        (
            format!("{dir}/templates/configmap.yaml"),
            b"kind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n".to_vec(),
        ),
    ])
}

/// A valid chart package.
pub(crate) fn chart(name: &str, version: &str) -> Vec<u8> {
    package(
        name,
        &format!("apiVersion: v2\nname: {name}\nversion: {version}\ndescription: chart {name}\n"),
    )
}

/// A provenance file for `name` `version` as `helm package --sign` makes
/// one (its signature is not checked by the server, so a made-up one does).
pub(crate) fn prov(name: &str, version: &str) -> Vec<u8> {
    format!(
        "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\napiVersion: v2\n\
         description: chart {name}\nname: {name}\nversion: {version}\n\n...\nfiles:\n  \
         {name}-{version}.tgz: sha256:0000\n-----BEGIN PGP SIGNATURE-----\n\n\
         wsBcBAEBCgAQBQJ{name}\n-----END PGP SIGNATURE-----\n"
    )
    .into_bytes()
}

/// A valid chart package holding `noise` bytes that do not compress (so
/// that the package is about that large).
pub(crate) fn padded_chart(name: &str, version: &str, noise: usize) -> Vec<u8> {
    let mut blob = Vec::with_capacity(noise + 8);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while blob.len() < noise {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        blob.extend_from_slice(&x.to_le_bytes());
    }
    tgz(&[
        (
            format!("{name}/Chart.yaml"),
            format!("apiVersion: v2\nname: {name}\nversion: {version}\n").into_bytes(),
        ),
        (format!("{name}/blob.bin"), blob),
    ])
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One listed version.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Listed {
    pub(crate) digest: String,
    pub(crate) urls: Vec<String>,
    pub(crate) created: String,
}

/// An index: (name, version) -> what it lists.
pub(crate) type Listing = BTreeMap<(String, String), Listed>;

pub(crate) fn nv(name: &str, version: &str) -> (String, String) {
    (name.to_owned(), version.to_owned())
}

/// Parses a Helm index.yaml, checking its shape.
pub(crate) fn parse_index(text: &str) -> Result<Listing, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| e.to_string())?;
    let doc = docs.first().ok_or("empty document")?;
    if doc["apiVersion"].as_str() != Some("v1") {
        return Err("apiVersion is not v1".into());
    }
    doc["generated"].as_str().ok_or("no generated")?;
    let entries = doc["entries"].as_hash().ok_or("entries is not a mapping")?;
    let mut listing = Listing::new();
    for (name, versions) in entries {
        let name = name.as_str().ok_or("chart name is not a string")?;
        for v in versions.as_vec().ok_or("versions are not a list")? {
            let field = |k: &str| {
                v[k].as_str()
                    .map(str::to_owned)
                    .ok_or(format!("{name}: no {k}"))
            };
            if field("name")? != name {
                return Err(format!("{name}: entry named {:?}", field("name")));
            }
            let urls = v["urls"]
                .as_vec()
                .ok_or(format!("{name}: no urls"))?
                .iter()
                .map(|u| u.as_str().map(str::to_owned).ok_or("url is not a string"))
                .collect::<Result<Vec<_>, _>>()?;
            let listed = Listed {
                digest: field("digest")?,
                urls,
                created: field("created")?,
            };
            listing.insert(nv(name, &field("version")?), listed);
        }
    }
    Ok(listing)
}

/// Every path below `dir` (links not followed) with its content (files),
/// link target (links) or nothing (directories).
pub(crate) fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let v = if m.file_type().is_symlink() {
                std::fs::read_link(&p)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes()
            } else if m.is_dir() {
                todo.push(p.clone());
                b"<dir>".to_vec()
            } else {
                std::fs::read(&p).unwrap()
            };
            out.insert(p, v);
        }
    }
    out
}

pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
