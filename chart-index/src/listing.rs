//! chartmuseum's read API over one tenant's index, as JSON:
//! `GET /api/<tenant>/charts` (`{name: [version, ...]}`, paginated by
//! `offset` and `limit` over the sorted names), `.../charts/<name>`
//! (`[version, ...]`) and `.../charts/<name>/<version>` (one; `latest`:
//! the newest that is not a pre-release, as Helm's `IndexFile.Get` with
//! no version). Versions come newest first, the order of `index.yaml`.
//!
//! Each version is the index's own entry ([`entry`]: Helm's
//! `repo.ChartVersion`, every Chart.yaml field the index holds, `urls`,
//! `created`, `digest`), serialized as in `index.yaml`, in the index's
//! order ([`by_name`]): one serialization for both.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::chart::ChartVersion;
use crate::index::{by_name, entry};

/// One chart version as Helm's `repo.ChartVersion` marshals to JSON (what
/// chartmuseum answers): the index's entry of package `file`.
fn version_json(file: &str, c: &ChartVersion) -> Value {
    serde_json::to_value(entry(file, c))
        .unwrap_or_else(|e| serde_json::json!({ "error": format!("the entry of {file}: {e}") }))
}

fn versions_json(versions: &[(&String, &ChartVersion)]) -> Value {
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
        versions.iter().find(|(_, c)| c.semver.pre.is_empty())
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
        let (meta, semver) = parse_chart(&tgz).unwrap();
        ChartVersion {
            meta,
            semver,
            digest: "00ff".into(),
            created: UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            source: None,
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
                "created": "2023-11-14T22:13:20Z",
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
