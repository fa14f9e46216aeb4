//! What requests read: immutable snapshots of the index, one per applied
//! batch, swapped in atomically.
//!
//! The thread that applies the watch's batches owns the [`Index`] (the
//! `index` module) and, after each batch, publishes a new [`Snapshot`]
//! through [`Published`] (an `arc_swap::ArcSwap`): each tenant as a
//! shared, immutable [`Tenant`], rendered there and then (its
//! `index.yaml`, gzip'd once, and chartmuseum's API listing, see the
//! `listing` module). Only the tenants the batch touched are rendered
//! again; the others are the previous snapshot's, shared. A request loads
//! the current snapshot (a few atomic operations, never a lock: the
//! publisher never waits for readers, and readers never wait for it),
//! takes what it answers from it, and keeps it only while it does: the
//! answer to one request is all of one snapshot, whose `seq` is the
//! `X-Index-Seq` it carries.
//!
//! A tenant's index entries are rendered in one place, `index::entry`
//! (its `urls`), for `index.yaml` and the API alike.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::body::Bytes;
use axum::http::{HeaderMap, header};
use flate2::Compression;
use flate2::write::GzEncoder;

use crate::chart::ChartVersion;
use crate::index::{Charts, Index, render_index};
use crate::listing::Listing;
use crate::proxy::Links;

/// A body rendered once, and its gzip'd form when that is smaller.
pub struct Rendered {
    plain: Bytes,
    gzip: Option<Bytes>,
}

impl Rendered {
    /// `plain`, and its gzip'd form (made here, once). Both are kept
    /// without spare capacity (they live until the tenant changes).
    pub fn new(plain: Bytes) -> Rendered {
        let mut gz = GzEncoder::new(Vec::with_capacity(plain.len() / 4), Compression::default());
        // Writing to a Vec cannot fail.
        let gzip = gz
            .write_all(&plain)
            .and_then(|()| gz.finish())
            .ok()
            .filter(|z| z.len() < plain.len())
            .map(|z| Bytes::from(z.into_boxed_slice()));
        Rendered { plain, gzip }
    }

    /// The body for a client that accepts gzip (`gzip`) or not: the bytes,
    /// and whether they are gzip'd.
    pub fn body(&self, gzip: bool) -> (Bytes, bool) {
        match &self.gzip {
            Some(z) if gzip => (z.clone(), true),
            _ => (self.plain.clone(), false),
        }
    }

    /// The uncompressed bytes.
    #[cfg(test)]
    pub fn plain(&self) -> &Bytes {
        &self.plain
    }
}

/// One tenant as a snapshot holds it: its packages and what is served of
/// them, rendered once.
pub struct Tenant {
    /// Its packages, keyed by file name.
    pub charts: Arc<Charts>,
    /// Its `index.yaml`.
    pub index: Rendered,
    /// chartmuseum's API listing of it.
    pub listing: Listing,
    /// `GET /api/<tenant>/charts` without a page.
    pub all: Rendered,
}

impl Tenant {
    /// Renders tenant `key`'s `charts`, their URLs as `links` make them.
    pub fn render(key: &str, charts: Arc<Charts>, links: &Links) -> Tenant {
        let yaml = render_index(&charts, links, key)
            .into_bytes()
            .into_boxed_slice();
        let index = Rendered::new(Bytes::from(yaml));
        let listing = Listing::render(&charts, &links.base(key));
        let all = Rendered::new(listing.all_charts(0, None));
        Tenant {
            charts,
            index,
            listing,
            all,
        }
    }
}

/// The index as requests see it: every tenant, as of batch `seq`.
pub struct Snapshot {
    /// The `seq` of the last change batch applied (0 before any).
    pub seq: u64,
    /// Tenants keyed by their path below the root (`""`, `org/team`).
    tenants: BTreeMap<Arc<str>, Arc<Tenant>>,
}

impl Snapshot {
    /// No tenant at all (not even the root): what is published before the
    /// first snapshot of an index.
    pub fn empty() -> Snapshot {
        Snapshot {
            seq: 0,
            tenants: BTreeMap::new(),
        }
    }

    /// Tenant `key`, if there is one.
    pub fn tenant(&self, key: &str) -> Option<&Arc<Tenant>> {
        self.tenants.get(key)
    }

    /// Every tenant, by key, in order.
    pub fn each_tenant(&self) -> impl Iterator<Item = (&str, &Arc<Tenant>)> {
        self.tenants.iter().map(|(k, t)| (&**k, t))
    }

    /// How many tenants it holds.
    #[cfg(test)]
    pub fn tenants(&self) -> usize {
        self.tenants.len()
    }

    /// Every package, keyed by its path below the root (`org/a-1.0.0.tgz`).
    pub fn packages(&self) -> impl Iterator<Item = (String, &ChartVersion)> {
        self.tenants.iter().flat_map(|(t, tenant)| {
            tenant.charts.iter().map(move |(file, c)| {
                let key = if t.is_empty() {
                    file.clone()
                } else {
                    format!("{t}/{file}")
                };
                (key, c)
            })
        })
    }

    /// The snapshot of `index`, after this one: the tenants in `touched`
    /// rendered again from `index` (or left out, those it no longer has),
    /// every other one shared with this snapshot; URLs as `links` make
    /// them.
    pub fn next(&self, index: &Index, touched: &BTreeSet<String>, links: &Links) -> Snapshot {
        let mut tenants = self.tenants.clone();
        for key in touched {
            match index.tenants.get(key) {
                Some(charts) => {
                    let tenant = Tenant::render(key, Arc::clone(charts), links);
                    tenants.insert(Arc::from(key.as_str()), Arc::new(tenant));
                }
                None => {
                    tenants.remove(key.as_str());
                }
            }
        }
        Snapshot {
            seq: index.seq,
            tenants,
        }
    }
}

/// The current snapshot: published by the thread that applies batches,
/// loaded by requests (and the restart cache's writer). Neither waits for
/// the other.
pub struct Published(ArcSwap<Snapshot>);

impl Published {
    pub fn new(first: Snapshot) -> Published {
        Published(ArcSwap::from_pointee(first))
    }

    /// The current snapshot.
    pub fn load(&self) -> Arc<Snapshot> {
        self.0.load_full()
    }

    /// Makes `next` the current snapshot: requests that start from now on
    /// see it; those under way keep the one they loaded.
    pub fn publish(&self, next: Arc<Snapshot>) {
        self.0.store(next);
    }
}

/// Whether the request's `Accept-Encoding` accepts gzip (RFC 9110
/// §12.5.3): `gzip` or `x-gzip` with a weight above 0, or, when neither
/// is named, `*` with a weight above 0. No header: no.
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut named = None;
    let mut any = None;
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let weight = parts
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(1.0, |(_, q)| q.trim().parse::<f32>().unwrap_or(0.0));
            let slot =
                if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                    &mut named
                } else if coding == "*" {
                    &mut any
                } else {
                    continue;
                };
            // The highest weight given wins where a coding comes twice.
            *slot = Some(slot.map_or(weight, |w: f32| w.max(weight)));
        }
    }
    named.or(any).is_some_and(|w| w > 0.0)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::io::Read;
    use std::sync::Arc;
    use std::sync::mpsc;
    use std::time::Duration;

    use axum::http::{HeaderMap, HeaderValue, header};

    use super::{Published, Rendered, Snapshot, accepts_gzip};
    use crate::index::Index;
    use crate::proxy::Links;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn accept_encoding_as_rfc_9110_reads_it() {
        for (values, gzip) in [
            (&[][..], false),
            (&["gzip"][..], true),
            (&["GZip"][..], true),
            (&["x-gzip"][..], true),
            (&["deflate, gzip;q=1.0, *;q=0.5"][..], true),
            (&["br", "gzip; q=0.001"][..], true),
            (&["gzip;q=0"][..], false),
            (&["gzip;q=0.000"][..], false),
            (&["identity"][..], false),
            (&["br, *"][..], true),
            (&["*;q=0"][..], false),
            (&["gzip;q=0, *"][..], false),
            (&["*", "gzip;q=0"][..], false),
            (&["gzip;q=bad"][..], false),
            (&["gzip;q=0", "gzip"][..], true),
        ] {
            assert_eq!(accepts_gzip(&headers(values)), gzip, "{values:?}");
        }
    }

    #[test]
    fn a_body_is_gzipped_once_when_that_makes_it_smaller() {
        let text = "apiVersion: v1\n".repeat(100);
        let r = Rendered::new(text.clone().into());
        let (plain, z) = r.body(false);
        assert!(!z);
        assert_eq!(plain, text.as_bytes());
        let (gz, z) = r.body(true);
        assert!(z && gz.len() < plain.len());
        let mut back = String::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_string(&mut back)
            .unwrap();
        assert_eq!(back, text);
        // A body gzip would make larger is served as it is.
        let tiny = Rendered::new("{}\n".into());
        assert_eq!(tiny.body(true), (tiny.plain().clone(), false));
    }

    /// A request holds the snapshot it loaded while the index thread
    /// publishes another: the publisher does not wait for it (it would,
    /// behind a lock the request held: here it must finish within the
    /// deadline while the old snapshot is still held), the request keeps
    /// seeing all of its own snapshot, and the next load sees the new one.
    #[test]
    fn requests_see_the_snapshot_swapped_in_and_never_wait() {
        let mut index = Index::new();
        let touched = index.take_touched();
        let first = Snapshot::empty().next(&index, &touched, &Links::default());
        let published = Arc::new(Published::new(first));
        let held = published.load();
        assert_eq!((held.seq, held.tenants()), (0, 1), "the root tenant");

        index.seq = 7;
        index.tenants.insert("org".into(), Arc::default());
        let touched = BTreeSet::from(["org".to_owned()]);
        let next = Arc::new(held.next(&index, &touched, &Links::default()));
        let (done_tx, done) = mpsc::channel();
        let p = Arc::clone(&published);
        let publisher = std::thread::spawn(move || {
            p.publish(next);
            done_tx.send(()).unwrap();
        });
        done.recv_timeout(Duration::from_secs(10))
            .expect("the publisher finished while a request held the old snapshot");
        publisher.join().unwrap();

        assert_eq!(held.seq, 0, "the request's snapshot is unchanged");
        assert!(held.tenant("org").is_none());
        let now = published.load();
        assert_eq!(now.seq, 7);
        assert!(
            now.tenant("org").is_some(),
            "the next request sees the swap"
        );
        assert!(
            Arc::ptr_eq(now.tenant("").unwrap(), held.tenant("").unwrap()),
            "an untouched tenant is shared, not rendered again"
        );
    }
}
