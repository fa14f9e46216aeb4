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
//! order ([`by_name`]): one serialization for both, with the same URLs
//! (`base`: see `index::entry`).
//!
//! A [`Listing`] is rendered once per change of its tenant (by the thread
//! that applies the watch's batches, see the `snapshot` module): each
//! version's JSON once, and the whole list once. An answer is then those
//! bytes, or for a page or one chart, its versions' bytes put together;
//! nothing is serialized per request. The bytes are those `serde_json`
//! writes for the same `Value` (compact, keys sorted), with a newline.

use std::collections::BTreeMap;

use axum::body::Bytes;
use serde_json::Value;

use crate::chart::ChartVersion;
use crate::index::{by_name, entry};

/// One chart version as Helm's `repo.ChartVersion` marshals to JSON (what
/// chartmuseum answers): the index's entry of package `file`.
fn version_json(base: &str, file: &str, c: &ChartVersion) -> Box<str> {
    serde_json::to_value(entry(base, file, c))
        .unwrap_or_else(|e| serde_json::json!({ "error": format!("the entry of {file}: {e}") }))
        .to_string()
        .into_boxed_str()
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

/// One version of a chart, rendered.
struct Version {
    /// As its Chart.yaml gives it.
    version: String,
    /// Not a pre-release (what `latest` may name).
    release: bool,
    /// Its JSON.
    json: Box<str>,
}

/// One chart: its name as a JSON string, and its versions newest first.
struct Chart {
    name: String,
    key: String,
    versions: Vec<Version>,
}

impl Chart {
    /// `[version, ...]`, appended to `out`.
    fn write_versions(&self, out: &mut String) {
        out.push('[');
        for (i, v) in self.versions.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&v.json);
        }
        out.push(']');
    }
}

/// chartmuseum's JSON of one tenant's index, rendered once.
pub struct Listing {
    /// Sorted by name.
    charts: Vec<Chart>,
    /// `GET /api/<tenant>/charts` without a page: every chart.
    all: Bytes,
}

impl Listing {
    /// The listing of a tenant's packages `charts` (keyed by file), their
    /// URLs below `base` (see `index::entry`).
    pub fn render(charts: &BTreeMap<String, ChartVersion>, base: &str) -> Listing {
        let charts: Vec<Chart> = by_name(charts)
            .into_iter()
            .map(|(name, versions)| Chart {
                name: name.to_owned(),
                key: Value::from(name).to_string(),
                versions: versions
                    .into_iter()
                    .map(|(f, c)| Version {
                        version: c.meta.version.clone(),
                        release: c.semver.pre.is_empty(),
                        json: version_json(base, f, c),
                    })
                    .collect(),
            })
            .collect();
        let all = Bytes::from(object(&charts).into_bytes().into_boxed_slice());
        Listing { charts, all }
    }

    /// `GET /api/<tenant>/charts`: every chart (the page of names
    /// `offset`, at most `limit`) with its versions.
    pub fn all_charts(&self, offset: usize, limit: Option<usize>) -> Bytes {
        if offset == 0 && limit.is_none_or(|l| l >= self.charts.len()) {
            return self.all.clone();
        }
        let from = offset.min(self.charts.len());
        let to = from
            .saturating_add(limit.unwrap_or(usize::MAX))
            .min(self.charts.len());
        Bytes::from(object(&self.charts[from..to]))
    }

    /// `GET /api/<tenant>/charts/<name>`: its versions, or why not.
    pub fn one_chart(&self, name: &str) -> Result<Bytes, String> {
        let chart = self.chart(name)?;
        let mut out = String::new();
        chart.write_versions(&mut out);
        out.push('\n');
        Ok(Bytes::from(out))
    }

    /// `GET /api/<tenant>/charts/<name>/<version>`: that version
    /// (`latest`: the newest that is not a pre-release), or why not.
    pub fn one_version(&self, name: &str, version: &str) -> Result<Bytes, String> {
        let chart = self.chart(name)?;
        let found = if version == "latest" {
            chart.versions.iter().find(|v| v.release)
        } else {
            chart.versions.iter().find(|v| v.version == version)
        };
        found
            .map(|v| Bytes::from(format!("{}\n", v.json)))
            .ok_or_else(|| match version {
                "latest" => format!("no chart version of {name:?} that is not a pre-release"),
                v => format!("no version {v:?} of chart {name:?}"),
            })
    }

    /// How many charts (distinct names) it lists.
    pub fn names(&self) -> usize {
        self.charts.len()
    }

    fn chart(&self, name: &str) -> Result<&Chart, String> {
        self.charts
            .binary_search_by(|c| c.name.as_str().cmp(name))
            .map(|i| &self.charts[i])
            .map_err(|_| format!("no chart {name:?}"))
    }
}

/// `{name: [version, ...], ...}` of `charts`, with a newline.
fn object(charts: &[Chart]) -> String {
    let mut out = String::from("{");
    for (i, c) in charts.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&c.key);
        out.push(':');
        c.write_versions(&mut out);
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::{Duration, UNIX_EPOCH};

    use flate2::Compression;
    use flate2::write::GzEncoder;
    use serde_json::{Value, json};

    use super::{Listing, page};
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

    /// The JSON of an answer's bytes, which end with a newline.
    fn value(bytes: &[u8]) -> Value {
        assert_eq!(bytes.last(), Some(&b'\n'), "ends with a newline");
        serde_json::from_slice(bytes).unwrap()
    }

    #[test]
    fn helm_chart_version_json_newest_first() {
        let l = Listing::render(&tenant(), "");
        assert_eq!(
            value(&l.one_version("b", "0.1.0").unwrap()),
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
        let a = value(&l.one_chart("a").unwrap());
        let versions: Vec<&str> = a
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["version"].as_str().unwrap())
            .collect();
        assert_eq!(versions, ["2.0.0-rc.1", "1.10.0", "1.0.0"]);
        assert_eq!(
            value(&l.one_version("a", "latest").unwrap())["version"],
            "1.10.0"
        );
        assert!(l.one_version("only-pre", "latest").is_err());
        assert_eq!(
            l.one_version("a", "9.9.9").unwrap_err(),
            "no version \"9.9.9\" of chart \"a\""
        );
        assert_eq!(l.one_chart("zz").unwrap_err(), "no chart \"zz\"");
        assert_eq!(
            l.one_version("zz", "latest").unwrap_err(),
            "no chart \"zz\""
        );
        // With --chart-url, the URL is absolute (`Links::base`).
        let absolute = Listing::render(&tenant(), "https://c.example/org/");
        assert_eq!(
            value(&absolute.one_version("b", "0.1.0").unwrap())["urls"],
            json!(["https://c.example/org/charts/b-0.1.0.tgz"])
        );
    }

    #[test]
    fn all_charts_by_pages_of_names() {
        let l = Listing::render(&tenant(), "");
        let all = value(&l.all_charts(0, None));
        let names: Vec<&String> = all.as_object().unwrap().keys().collect();
        assert_eq!(names, ["a", "b", "only-pre"]);
        let page2 = value(&l.all_charts(1, Some(1)));
        assert_eq!(page2.as_object().unwrap().len(), 1);
        assert_eq!(page2["b"][0]["version"], "0.1.0");
        assert_eq!(value(&l.all_charts(1, None)).as_object().unwrap().len(), 2);
        assert_eq!(value(&l.all_charts(0, Some(99))), all);
        assert_eq!(value(&l.all_charts(5, None)), json!({}));
        assert_eq!(
            value(&l.all_charts(usize::MAX, Some(usize::MAX))),
            json!({})
        );
        let empty = Listing::render(&BTreeMap::new(), "");
        assert_eq!(&empty.all_charts(0, None)[..], b"{}\n");
        assert_eq!(page(None, None), Ok((0, None)));
        assert_eq!(page(Some("2"), Some("5")), Ok((2, Some(5))));
        assert!(page(Some("-1"), None).unwrap_err().contains("offset"));
        assert!(page(None, Some("0")).unwrap_err().contains("limit"));
        assert!(page(None, Some("x")).unwrap_err().contains("limit"));
    }

    /// The bytes put together from each version's rendering are those
    /// serde_json writes for the whole answer as one `Value` (what the
    /// server answered when it serialized per request), names that need
    /// escaping included.
    #[test]
    fn answers_are_the_bytes_of_one_serialization() {
        let mut t = tenant();
        // Not a name an upload could have; the renderer escapes it all the same.
        let mut odd = entry("q", "1.0.0");
        odd.meta.name = "q\"\u{e9}".into();
        t.insert("q-1.0.0.tgz".into(), odd);
        let l = Listing::render(&t, "");
        let whole = |v: Value| format!("{v}\n").into_bytes();
        let all = value(&l.all_charts(0, None));
        assert_eq!(l.all_charts(0, None).to_vec(), whole(all.clone()));
        let mut first_two = all.as_object().unwrap().clone();
        first_two.retain(|k, _| k == "b" || k == "only-pre");
        assert_eq!(
            l.all_charts(1, Some(2)).to_vec(),
            whole(Value::Object(first_two))
        );
        assert_eq!(l.one_chart("a").unwrap().to_vec(), whole(all["a"].clone()));
        assert_eq!(
            l.one_version("q\"\u{e9}", "latest").unwrap().to_vec(),
            whole(all["q\"\u{e9}"][0].clone())
        );
    }
}
