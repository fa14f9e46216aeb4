//! Unit tests of `listing.rs` (kept apart: the file is long enough).

use super::*;
use FileType::*;
use std::collections::BTreeMap;

fn listing(items: &[(&str, FileType)]) -> Listing {
    let mut l = Listing::default();
    for (n, t) in items {
        l.insert(OsStr::new(n), *t);
    }
    l
}

fn model(l: &Listing) -> BTreeMap<OsString, FileType> {
    l.iter().map(|(n, t)| (n.to_os_string(), t)).collect()
}
fn fresh(items: &[(&str, FileType)]) -> Vec<(OsString, FileType)> {
    items.iter().map(|(n, t)| (OsString::from(n), *t)).collect()
}

#[test]
fn diff_basic() {
    let old = listing(&[("a", File), ("b", Dir), ("c", File), ("e", Symlink)]);
    let new = fresh(&[("e", Symlink), ("d", File), ("b", File), ("a", File)]);
    assert_eq!(
        diff(&old, new),
        vec![
            EntryDiff::Retyped("b".into(), Dir, File),
            EntryDiff::Removed("c".into(), File),
            EntryDiff::Added("d".into(), File),
        ]
    );
}

#[test]
fn diff_empty_sides() {
    assert_eq!(diff(&listing(&[]), vec![]), vec![]);
    assert_eq!(
        diff(&listing(&[]), fresh(&[("x", Dir)])),
        vec![EntryDiff::Added("x".into(), Dir)]
    );
    assert_eq!(
        diff(&listing(&[("x", Dir)]), vec![]),
        vec![EntryDiff::Removed("x".into(), Dir)]
    );
}

#[test]
fn diff_duplicates_in_fresh_listing_count_once() {
    let out = diff(&listing(&[]), fresh(&[("x", File), ("x", File)]));
    assert_eq!(out, vec![EntryDiff::Added("x".into(), File)]);
}

const TYPES: [FileType; 4] = [File, Dir, Symlink, Other];

/// A seeded xorshift generator.
fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
    move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    }
}

/// Random listings: applying the diff to the old listing gives the new.
#[test]
fn diff_applied_gives_fresh_listing() {
    let mut rnd = xorshift(0x9e3779b97f4a7c15u64);
    for _ in 0..500 {
        let mut old = BTreeMap::new();
        let mut new = Vec::new();
        for i in 0..(rnd() % 20) {
            if !rnd().is_multiple_of(3) {
                old.insert(OsString::from(format!("n{i}")), TYPES[(rnd() % 4) as usize]);
            }
            if !rnd().is_multiple_of(3) {
                new.push((OsString::from(format!("n{i}")), TYPES[(rnd() % 4) as usize]));
            }
        }
        let mut applied = old.clone();
        let indexed = Listing::default().tap_extend(old.clone());
        for d in diff(&indexed, new.clone()) {
            match d {
                EntryDiff::Added(n, t) => assert!(applied.insert(n, t).is_none()),
                EntryDiff::Removed(n, _) => assert!(applied.remove(&n).is_some()),
                EntryDiff::Retyped(n, o, t) => {
                    assert_ne!(o, t);
                    assert_eq!(applied.insert(n, t), Some(o));
                }
            }
        }
        let want: BTreeMap<_, _> = new.into_iter().collect();
        assert_eq!(applied, want);
    }
}

impl Listing {
    fn tap_extend(mut self, m: BTreeMap<OsString, FileType>) -> Listing {
        self.extend_new(m.into_iter().collect());
        self
    }
}

/// A name of `len` bytes from a number; some are not UTF-8 (on Unix).
fn name(i: u64, len: usize) -> OsString {
    let mut b = format!("n{i}").into_bytes();
    #[cfg(unix)]
    if i.is_multiple_of(7) {
        b.push(0xff);
    }
    while b.len() < len {
        b.push(b'a' + (i % 26) as u8);
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        OsString::from_vec(b)
    }
    #[cfg(not(unix))]
    OsString::from(String::from_utf8(b).unwrap())
}

/// Checks the layout: widths, counts, the records parsing to their
/// length, one offset per record, the sorted part sorted.
fn check_layout(l: &Listing) {
    let (n, s, recs) = (l.field(N_OFFS), l.field(SORTED), l.field(REC_BYTES));
    if l.data.is_empty() {
        return;
    }
    let w = l.w();
    assert!(FIELDS * w + recs + n * w <= l.data.len(), "room");
    let (mut at, mut live, mut dead, mut starts) = (0, 0, 0, Vec::new());
    while at < recs {
        let (_, len) = record_in(l.recs(), at);
        match byte_type(l.recs()[at]) {
            Some(_) => live += 1,
            None => dead += len,
        }
        starts.push(at);
        at += len;
    }
    assert_eq!(at, recs, "records end where counted");
    assert_eq!((live, dead), (l.len(), l.field(DEAD_BYTES)));
    let mut offs: Vec<usize> = (0..n).map(|k| l.off(k)).collect();
    assert!(
        (1..s).all(|k| l.name_at(offs[k - 1]) < l.name_at(offs[k])),
        "sorted part sorted"
    );
    offs.sort_unstable();
    assert_eq!(offs, starts, "one offset per record");
}

/// Random inserts, retypes and removes, with bulk extends between,
/// against a `BTreeMap` model: every answer and the final contents
/// agree, through tail merges, revivals, compactions and changes of
/// word width. The layout is checked every `check_every` operations.
fn run_model(seed: u64, spaces: &[u64], lens: &[usize], check_every: usize) {
    let mut rnd = xorshift(seed);
    for round in 0..24 {
        let mut l = Listing::default();
        let mut m: BTreeMap<OsString, FileType> = BTreeMap::new();
        // Small key spaces revive dead records; big ones merge tails.
        let space = spaces[round % spaces.len()];
        let ops = 3000;
        for op in 0..ops {
            let n = name(rnd() % space, lens[(rnd() % lens.len() as u64) as usize]);
            let t = TYPES[(rnd() % 4) as usize];
            match rnd() % 10 {
                0..=4 => assert_eq!(l.insert(&n, t), m.insert(n.clone(), t)),
                5..=7 => assert_eq!(l.remove(&n), m.remove(&n)),
                8 => assert_eq!(l.get(&n), m.get(&n).copied()),
                _ => {
                    let fresh: Vec<(OsString, FileType)> = (0..(rnd() % 200))
                        .map(|_| (name(rnd() % space, 12), TYPES[(rnd() % 4) as usize]))
                        .collect();
                    let mut want = Vec::new();
                    for (n, t) in &fresh {
                        if !m.contains_key(n) {
                            m.insert(n.clone(), *t);
                            want.push((n.clone(), *t));
                        }
                    }
                    let mut got = l.extend_new(fresh);
                    got.sort();
                    want.sort();
                    assert_eq!(got, want);
                }
            }
            assert_eq!(l.len(), m.len());
            if op % check_every == 0 {
                check_layout(&l);
            }
        }
        check_layout(&l);
        assert_eq!(model(&l), m, "round {round}");
        for (n, t) in &m {
            assert_eq!(l.get(n), Some(*t));
        }
        l.shrink_to_fit();
        check_layout(&l);
        assert_eq!(model(&l), m, "after shrinking, round {round}");
        assert_eq!(l.field(DEAD_BYTES), 0);
        assert_eq!(l.field(SORTED), l.field(N_OFFS));
        assert_eq!(l.data.len(), exact_len(l.field(REC_BYTES), l.len()));
    }
}

#[test]
fn listing_matches_a_map_model() {
    run_model(
        0x2545f4914f6cdd1du64,
        &[8, 100, 3000],
        &[1, 12, 130, 255],
        500,
    );
}

/// Names around the short-length limit and some too long for 2-byte
/// words alone, in small key spaces: every width, both record kinds
/// dead and revived, the layout checked every 16 operations (every one
/// for the small listings).
#[test]
fn listing_matches_a_map_model_across_widths() {
    let lens = [1, 48, 49, 50, 51, 127, 128, 3000];
    run_model(0x9e3779b97f4a7c15u64, &[4, 30, 200], &lens, 16);
    // Small enough for 1-byte words.
    run_model(0xd1b54a32d192ed03u64, &[3, 6], &[1, 2, 12, 49, 50], 1);
}

/// Every state with every kind of length field: one header byte that
/// reads back, never 255, retyped and killed with its length kept.
#[test]
fn record_headers_round_trip() {
    for n in [0usize, 1, 49, 50, 51, 127, 128, 16_383, 16_384] {
        let name = vec![b'q'; n];
        let mut d = vec![0u8; record_len(n) + 1];
        for state in 0..=DEAD {
            let len = write_record(&mut d, 1, &name, state);
            assert_eq!(len, record_len(n), "length {n}");
            assert!(d[1] < 255);
            assert_eq!(d[1] / STRIDE, state);
            assert_eq!(record_in(&d, 1), (&name[..], len));
            assert_eq!(byte_type(d[1]), TYPES.get(state as usize).copied());
            for other in 0..=DEAD {
                d[1] = with_state(d[1], other);
                assert_eq!(record_in(&d, 1), (&name[..], len));
                assert_eq!(byte_type(d[1]), TYPES.get(other as usize).copied());
            }
        }
    }
    assert_eq!(record_len(49), 1 + 49, "short: the length in the header");
    assert_eq!(record_len(50), 1 + 1 + 50, "long: escape, LEB128");
    assert_eq!(record_len(128), 1 + 2 + 128);
}

/// Short and long records, removed (dead in place, still found by
/// name, skipped by iteration) and revived by insert and by a fresh
/// read, some long enough to need 4-byte words on their own.
#[test]
fn dead_records_of_both_kinds_revive() {
    let lens = [0usize, 1, 49, 50, 51, 300, 70_000];
    let names: Vec<OsString> = lens
        .iter()
        .map(|&n| OsString::from("z".repeat(n)))
        .collect();
    let mut l = Listing::default();
    for (i, n) in names.iter().enumerate() {
        assert_eq!(l.insert(n, TYPES[i % 4]), None);
    }
    assert_eq!(l.w(), 4);
    let recs = l.field(REC_BYTES);
    assert_eq!(recs, lens.iter().map(|&n| record_len(n)).sum::<usize>());
    // Dead: the long name too (70,000 bytes outweigh the rest, so
    // removing it compacts: remove it last).
    for (i, n) in names.iter().enumerate().rev().skip(1) {
        assert_eq!(l.remove(n), Some(TYPES[i % 4]));
        assert_eq!(l.remove(n), None, "once");
        assert_eq!(l.get(n), None);
        check_layout(&l);
    }
    assert_eq!(l.len(), 1);
    assert_eq!(l.field(REC_BYTES), recs, "dead in place");
    assert_eq!(model(&l).len(), 1, "iteration skips the dead");
    // Revived by insert (short and long) and by a fresh read.
    assert_eq!(l.insert(&names[2], Dir), None);
    assert_eq!(l.insert(&names[4], Symlink), None);
    let added = l.extend_new(vec![(names[3].clone(), Other), (names[5].clone(), File)]);
    assert_eq!(added.len(), 2);
    assert_eq!(l.field(REC_BYTES), recs, "revived in place");
    check_layout(&l);
    assert_eq!(l.get(&names[2]), Some(Dir));
    assert_eq!(l.get(&names[3]), Some(Other));
    assert_eq!(l.get(&names[4]), Some(Symlink));
    assert_eq!(l.get(&names[5]), Some(File));
    assert_eq!(l.get(&names[0]), None);
    assert_eq!(l.len(), 5);
    // The long one dead: compacted to 2-byte words.
    assert_eq!(l.remove(&names[6]), Some(TYPES[2]));
    check_layout(&l);
    assert_eq!(l.field(DEAD_BYTES), 0, "compacted");
    assert_eq!(l.w(), 2);
    assert_eq!(l.len(), 4);
    assert_eq!(l.insert(&names[6], File), None);
    assert_eq!(l.get(&names[6]), Some(File));
    check_layout(&l);
}

/// Words widen from 1 to 2 to 4 bytes as a listing grows, never before
/// the narrower ones are full, and narrow again when it shrinks.
#[test]
fn words_widen_and_narrow() {
    let mut l = Listing::default();
    let names: Vec<OsString> = (0..8_000).map(|i| name(i, 12)).collect();
    let mut widths = vec![];
    for (i, n) in names.iter().enumerate() {
        l.insert(n, File);
        let (recs, k) = (l.field(REC_BYTES), i + 1);
        let narrowest = [1, 2, 4]
            .into_iter()
            .find(|&w| FIELDS * w + recs + k * w <= width_max(w))
            .unwrap();
        assert_eq!(l.w(), narrowest, "after {k} names");
        if widths.last() != Some(&l.w()) {
            widths.push(l.w());
            check_layout(&l);
            assert!(names[..k].iter().all(|n| l.get(n) == Some(File)));
        }
    }
    assert_eq!(widths, [1, 2, 4]);
    for n in &names[100..] {
        l.remove(n);
    }
    assert_eq!(l.w(), 2, "compactions narrowed it");
    for n in &names[10..100] {
        l.remove(n);
    }
    l.shrink_to_fit();
    assert_eq!(l.w(), 1);
    assert_eq!(model(&l).len(), 10);
    check_layout(&l);
    // A first read big enough for 4-byte words is stored in them.
    let mut big = Listing::default();
    big.extend_new(names.iter().map(|n| (n.clone(), Dir)).collect());
    assert_eq!((big.w(), big.len()), (4, 8_000));
    assert_eq!(big.data.len(), exact_len(big.field(REC_BYTES), 8_000));
    check_layout(&big);
}

/// An empty listing holds no allocation, and gives it back when
/// emptied; 16 bytes inline.
#[test]
fn empty_listings_allocate_nothing() {
    let mut l = Listing::default();
    assert_eq!(l.data.len(), 0);
    assert!(l.extend_new(vec![]).is_empty());
    assert_eq!(l.data.len(), 0);
    assert_eq!(
        (l.len(), l.iter().count(), l.get(OsStr::new("a"))),
        (0, 0, None)
    );
    l.insert(OsStr::new("a"), File);
    assert_eq!(l.data.len(), exact_len(2, 1), "a first insert: exact");
    l.remove(OsStr::new("a"));
    l.shrink_to_fit();
    assert_eq!(l.data.len(), 0);
    #[cfg(target_pointer_width = "64")]
    assert_eq!(std::mem::size_of::<Listing>(), 16);
}

#[test]
#[should_panic(expected = "at most 4 GiB")]
fn records_stop_at_4_gib() {
    checked_room(u32::MAX as usize, 1);
}

/// Removing everything from a big listing compacts it: dead bytes never
/// outweigh live ones by more than the small-buffer allowance.
#[test]
fn listing_reclaims_removed_names() {
    let mut l = Listing::default();
    let names: Vec<OsString> = (0..10_000).map(|i| name(i, 20)).collect();
    for n in &names {
        l.insert(n, File);
    }
    let full = l.field(REC_BYTES);
    for n in &names[..9_990] {
        assert_eq!(l.remove(n), Some(File));
        assert!(
            l.field(DEAD_BYTES) <= l.field(REC_BYTES) / 2 + 256,
            "dead {} of {}",
            l.field(DEAD_BYTES),
            l.field(REC_BYTES)
        );
    }
    assert_eq!(l.len(), 10);
    let recs = l.field(REC_BYTES);
    assert!(recs < full / 100, "records {recs} of {full}");
    assert_eq!(l.w(), 2, "compacted: out of 4-byte words");
    l.shrink_to_fit();
    assert_eq!(l.w(), 1, "10 names of 20 bytes: 1-byte words");
    assert_eq!(l.remove(&names[0]), None);
    assert_eq!(l.get(&names[9_995]), Some(File));
}

/// A first read is stored at its exact size (no growth slack), sorted,
/// long names (an escape and two length bytes) included.
#[test]
fn a_first_fill_is_exactly_sized() {
    let mut l = Listing::default();
    let mut fresh: Vec<(OsString, FileType)> = (0..100).rev().map(|i| (name(i, 9), File)).collect();
    fresh.push((OsString::from("x".repeat(300)), Dir));
    fresh.push((name(7, 9), Dir)); // a duplicate: the first type wins
    let added = l.extend_new(fresh);
    assert_eq!(added.len(), 101);
    let recs = 100 * (1 + 9) + (1 + 2 + 300);
    assert_eq!(l.field(REC_BYTES), recs);
    // 2-byte words: 5 in the header, 101 offsets.
    assert_eq!(l.data.len(), 2 * 5 + recs + 2 * 101);
    assert_eq!(l.w(), 2);
    assert_eq!(l.field(SORTED), l.field(N_OFFS));
    assert_eq!(l.get(&name(7, 9)), Some(File));
    assert_eq!(l.get(OsStr::new(&"x".repeat(300))), Some(Dir));
    assert_eq!(l.extend_new(vec![(name(3, 9), Dir)]), []);
    assert_eq!(l.insert(&name(500, 9), File), None);
    assert_eq!(l.len(), 102);
}

/// A bulk extend keeps the table sorted, so lookups stay binary.
#[test]
fn listing_extend_sorts_once() {
    let mut l = Listing::default();
    let fresh: Vec<(OsString, FileType)> = (0..5_000).rev().map(|i| (name(i, 9), File)).collect();
    let added = l.extend_new(fresh.clone());
    assert_eq!(added.len(), 5_000);
    assert_eq!(l.field(SORTED), l.field(N_OFFS));
    assert!(
        l.extend_new(fresh).is_empty(),
        "nothing new the second time"
    );
    assert_eq!(l.len(), 5_000);
    assert!(
        (1..l.field(N_OFFS)).all(|k| l.name_at(l.off(k - 1)) < l.name_at(l.off(k))),
        "sorted table"
    );
}
