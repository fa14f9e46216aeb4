//! Micro benchmarks of the pure core: the spec differ, ignore matching, the
//! listing diff and coalescing.
//!
//! ```sh
//! cargo bench --bench core
//! ```

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use specwatch::bench_api::{Listing, Matcher, coalesce, diff, plan};
use specwatch::{ChangeKind, FileType, IgnoreRule, WatchSpec};

fn spec_differ(c: &mut Criterion) {
    let spec = |i: usize| WatchSpec::new([format!("/srv/t{i}")]);
    let current: HashMap<String, WatchSpec> =
        (0..10_000).map(|i| (format!("s{i}"), spec(i))).collect();
    // A tenth changed, a tenth gone, a tenth new.
    let desired: BTreeMap<String, WatchSpec> = (1_000..11_000)
        .map(|i| {
            let s = if i % 10 == 0 { spec(i + 1) } else { spec(i) };
            (format!("s{i}"), s)
        })
        .collect();
    c.bench_function("spec differ, 10,000 specs", |b| {
        b.iter(|| black_box(plan(&current, &desired)))
    });
}

fn ignore_matching(c: &mut Criterion) {
    let mut patterns: Vec<String> = (0..45).map(|i| format!("*.ext{i}")).collect();
    patterns.extend(
        [
            "node_modules/",
            "target/",
            "/build",
            "docs/gen/",
            "!docs/gen/keep/",
        ]
        .map(String::from),
    );
    let spec = WatchSpec::new(["/repo"]).ignore(IgnoreRule::new("/repo", patterns));
    let m = Matcher::new(&spec).unwrap();
    let paths: Vec<PathBuf> = (0..1000)
        .map(|i| PathBuf::from(format!("/repo/src/mod{}/sub{}/file{i}.rs", i % 17, i % 5)))
        .collect();
    c.bench_function("ignore matching, 1,000,000 checks x 50 rules", |b| {
        b.iter(|| {
            let mut n = 0;
            for _ in 0..1000 {
                for p in &paths {
                    n += m.is_ignored(p, false) as usize;
                }
            }
            black_box(n)
        })
    });
}

fn listing_diff(c: &mut Criterion) {
    let old = Listing::new(
        (0..100_000)
            .map(|i| (OsString::from(format!("f{i:06}")), FileType::File))
            .collect(),
    );
    let fresh: Vec<(OsString, FileType)> = (500..100_500)
        .map(|i| (OsString::from(format!("f{i:06}")), FileType::File))
        .collect();
    c.bench_function("index diff, 100,000 entries", |b| {
        b.iter(|| black_box(diff(&old, fresh.clone())))
    });
    // One by one into a directory of 100,000: the sorted table's shifts.
    let mut big = Listing::new(
        (0..100_000)
            .map(|i| (OsString::from(format!("f{i:06}")), FileType::File))
            .collect(),
    );
    let names: Vec<OsString> = (0..10_000)
        .map(|i| OsString::from(format!("g{:06}", (i * 7919) % 10_000)))
        .collect();
    c.bench_function(
        "index insert + remove 10,000 names, 100,000-entry dir",
        |b| b.iter(|| big.churn(&names)),
    );
}

fn coalescing(c: &mut Criterion) {
    let raw: Vec<(PathBuf, ChangeKind, FileType)> = (0..100_000)
        .map(|i| {
            let k = match i % 3 {
                0 => ChangeKind::Created,
                1 => ChangeKind::Modified,
                _ => ChangeKind::Removed,
            };
            (
                PathBuf::from(format!("/r/d{}/f{}", i % 100, i % 5000)),
                k,
                FileType::File,
            )
        })
        .collect();
    c.bench_function("coalescing, 100,000 raw changes", |b| {
        b.iter(|| black_box(coalesce(&raw)))
    });
}

criterion_group!(
    benches,
    spec_differ,
    ignore_matching,
    listing_diff,
    coalescing
);
criterion_main!(benches);
