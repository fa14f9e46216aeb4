//! chartmuseum's read API over one tenant's index, as JSON:
//! `GET /api/<tenant>/charts` (`{name: [version, ...]}`, paginated by
//! `offset` and `limit` over the sorted names), `.../charts/<name>`
//! (`[version, ...]`) and `.../charts/<name>/<version>` (one; `latest`:
//! the newest that is not a pre-release, as Helm's `IndexFile.Get` with
//! no version). Versions come newest first, the order of `index.yaml`.
//!
//! Each version is rendered by [`version_json`] alone, from the index's
//! entry: what the index holds of a chart reaches the API through it.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::chart::{ChartVersion, compare_versions};
use crate::index::rfc3339;

/// One chart version as Helm's `repo.ChartVersion` marshals to JSON (what
/// chartmuseum answers): the Chart.yaml fields the index holds (absent
/// ones left out, as Helm's `omitempty`; `apiVersion` `v1` when the
/// Chart.yaml has none, as in `index.yaml`), `urls` (relative to the
/// tenant, as in its `index.yaml`), `created` (RFC 3339) and `digest`.
pub fn version_json(file: &str, c: &ChartVersion) -> Value {
    let m = &c.meta;
    let mut v = Map::new();
    let mut put = |key: &str, value: Option<&str>| {
        if let Some(value) = value {
            v.insert(key.to_owned(), json!(value));
        }
    };
    put("name", Some(&m.name));
    put("version", Some(&m.version));
    put("description", m.description.as_deref());
    put("apiVersion", Some(m.api_version.as_deref().unwrap_or("v1")));
    put("appVersion", m.app_version.as_deref());
    put("type", m.chart_type.as_deref());
    v.insert("urls".into(), json!([format!("charts/{file}")]));
    v.insert("created".into(), json!(rfc3339(c.created)));
    v.insert("digest".into(), json!(c.digest));
    Value::Object(v)
}

/// Each chart's versions in `charts` (keyed by file), newest first.
fn by_name(charts: &BTreeMap<String, ChartVersion>) -> BTreeMap<&str, Vec<(&str, &ChartVersion)>> {
    let mut out: BTreeMap<&str, Vec<(&str, &ChartVersion)>> = BTreeMap::new();
    for (file, c) in charts {
        out.entry(c.meta.name.as_str())
            .or_default()
            .push((file.as_str(), c));
    }
    for versions in out.values_mut() {
        versions.sort_by(|(fa, a), (fb, b)| {
            compare_versions(&b.meta.version, &a.meta.version).then_with(|| fa.cmp(fb))
        });
    }
    out
}

fn versions_json(versions: &[(&str, &ChartVersion)]) -> Value {
    Value::Array(versions.iter().map(|(f, c)| version_json(f, c)).collect())
}

/// `offset` and `limit` of a query (chartmuseum's pagination): a
/// non-negative and a positive integer; none: every chart.
pub fn page(offset: Option<&str>, limit: Option<&str>) -> Result<(usize, Option<usize>), String> {
    let offset = match offset {
        None => 0,
        Some(o) => o
            .parse()
            .map_err(|_| format!("offset {o:?} is not a valid non-negative integer"))?,
    };
    let limit = match limit {
        None => None,
        Some(l) => Some(
            l.parse()
                .ok()
                .filter(|l| *l > 0)
                .ok_or_else(|| format!("limit {l:?} is not a valid positive integer"))?,
        ),
    };
    Ok((offset, limit))
}

/// `GET /api/<tenant>/charts`: every chart (the page of names `offset`,
/// at most `limit`) with its versions.
pub fn all_charts(
    charts: &BTreeMap<String, ChartVersion>,
    offset: usize,
    limit: Option<usize>,
) -> Value {
    let names = by_name(charts);
    let page = names.iter().skip(offset).take(limit.unwrap_or(usize::MAX));
    Value::Object(
        page.map(|(name, versions)| ((*name).to_owned(), versions_json(versions)))
            .collect(),
    )
}

/// `GET /api/<tenant>/charts/<name>`: its versions, or why not.
pub fn one_chart(charts: &BTreeMap<String, ChartVersion>, name: &str) -> Result<Value, String> {
    by_name(charts)
        .get(name)
        .map(|v| versions_json(v))
        .ok_or_else(|| format!("no chart {name:?}"))
}

/// Whether `version` is a pre-release (`1.0.0-rc.1`; build metadata after
/// `+` aside).
fn is_prerelease(version: &str) -> bool {
    version.split('+').next().unwrap_or("").contains('-')
}

/// `GET /api/<tenant>/charts/<name>/<version>`: that version (`latest`:
/// the newest that is not a pre-release), or why not.
pub fn one_version(
    charts: &BTreeMap<String, ChartVersion>,
    name: &str,
    version: &str,
) -> Result<Value, String> {
    let names = by_name(charts);
    let versions = names
        .get(name)
        .ok_or_else(|| format!("no chart {name:?}"))?;
    let found = if version == "latest" {
        versions
            .iter()
            .find(|(_, c)| !is_prerelease(&c.meta.version))
    } else {
        versions.iter().find(|(_, c)| c.meta.version == version)
    };
    found
        .map(|(f, c)| version_json(f, c))
        .ok_or_else(|| match version {
            "latest" => format!("no chart version of {name:?} that is not a pre-release"),
            v => format!("no version {v:?} of chart {name:?}"),
        })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::{Duration, UNIX_EPOCH};

    use flate2::Compression;
    use flate2::write::GzEncoder;
    use serde_json::json;

    use super::{all_charts, one_chart, one_version, page};
    use crate::chart::{ChartVersion, parse_chart};

    /// The index's entry of a package whose Chart.yaml is `apiVersion: v2`,
    /// `name`, `version` and a description (read by `parse_chart`, so that
    /// whatever else the entry holds is filled as for a real package).
    fn entry(name: &str, version: &str) -> ChartVersion {
        let yaml = format!(
            "apiVersion: v2\nname: {name}\nversion: {version}\ndescription: chart {name}\n"
        );
        let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
        let mut h = tar::Header::new_gnu();
        h.set_size(yaml.len() as u64);
        h.set_mode(0o644);
        tar.append_data(&mut h, format!("{name}/Chart.yaml"), yaml.as_bytes())
            .unwrap();
        let tgz = tar.into_inner().unwrap().finish().unwrap();
        ChartVersion {
            meta: parse_chart(&tgz).unwrap(),
            digest: "00ff".into(),
            created: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        }
    }

    fn tenant() -> BTreeMap<String, ChartVersion> {
        [
            ("a-1.0.0.tgz", entry("a", "1.0.0")),
            ("a-1.10.0.tgz", entry("a", "1.10.0")),
            ("a-2.0.0-rc.1.tgz", entry("a", "2.0.0-rc.1")),
            ("b-0.1.0.tgz", entry("b", "0.1.0")),
            ("only-pre-1.0.0-alpha.tgz", entry("only-pre", "1.0.0-alpha")),
        ]
        .into_iter()
        .map(|(f, c)| (f.to_owned(), c))
        .collect()
    }

    #[test]
    fn helm_chart_version_json_newest_first() {
        let t = tenant();
        assert_eq!(
            one_version(&t, "b", "0.1.0").unwrap(),
            json!({
                "name": "b",
                "version": "0.1.0",
                "description": "chart b",
                "apiVersion": "v2",
                "urls": ["charts/b-0.1.0.tgz"],
                "created": "2023-11-14T22:13:20.000000000Z",
                "digest": "00ff",
            })
        );
        let a = one_chart(&t, "a").unwrap();
        let versions: Vec<&str> = a
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["version"].as_str().unwrap())
            .collect();
        assert_eq!(versions, ["2.0.0-rc.1", "1.10.0", "1.0.0"]);
        assert_eq!(one_version(&t, "a", "latest").unwrap()["version"], "1.10.0");
        assert!(one_version(&t, "only-pre", "latest").is_err());
        assert_eq!(
            one_version(&t, "a", "9.9.9").unwrap_err(),
            "no version \"9.9.9\" of chart \"a\""
        );
        assert_eq!(one_chart(&t, "zz").unwrap_err(), "no chart \"zz\"");
    }

    #[test]
    fn all_charts_by_pages_of_names() {
        let t = tenant();
        let all = all_charts(&t, 0, None);
        let names: Vec<&String> = all.as_object().unwrap().keys().collect();
        assert_eq!(names, ["a", "b", "only-pre"]);
        let page2 = all_charts(&t, 1, Some(1));
        assert_eq!(page2.as_object().unwrap().len(), 1);
        assert_eq!(page2["b"][0]["version"], "0.1.0");
        assert_eq!(all_charts(&t, 5, None), json!({}));
        assert_eq!(page(None, None), Ok((0, None)));
        assert_eq!(page(Some("2"), Some("5")), Ok((2, Some(5))));
        assert!(page(Some("-1"), None).unwrap_err().contains("offset"));
        assert!(page(None, Some("0")).unwrap_err().contains("limit"));
        assert!(page(None, Some("x")).unwrap_err().contains("limit"));
    }
}
