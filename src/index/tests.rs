//! Unit tests of the index (`mod.rs`; kept apart: the file is long
//! enough).

use super::*;
use FileType::*;

impl Index {
    /// Test helper: renames the waited-for name of a registration.
    fn partial_mut_name(&mut self, id: DirId, sid: SpecId, root: &Path, name: &str) {
        let node = self.node_mut(id).unwrap();
        for p in node.partial.iter_mut() {
            if p.spec == sid && p.root == root {
                p.name = name.into();
            }
        }
    }
}

#[test]
fn index_ensure_lookup_remove_reuse() {
    let mut ix = Index::default();
    let (a, created) = ix.ensure(Path::new("/a"));
    assert!(created);
    assert_eq!(ix.ensure(Path::new("/a")), (a, false));
    let (b, _) = ix.ensure(Path::new("/a/b"));
    assert_ne!(a, b);
    ix.set_entry(b, OsStr::new("f"), File);
    assert_eq!(ix.entry_count(), 1);
    assert_eq!(ix.len(), 2);
    let node = ix.remove(b).unwrap();
    assert_eq!(&**node.path(), Path::new("/a/b"));
    assert!(ix.lookup(Path::new("/a/b")).is_none());
    assert!(ix.get(b).is_none());
    let (c, _) = ix.ensure(Path::new("/c"));
    assert_eq!(c, b, "freed slot is reused");
    assert_eq!(ix.ids(), vec![a, c]);
}

/// The path map keeps ids only and hashes the nodes' own paths: it must
/// find every live path and none of the removed ones through growth,
/// removals and reused slots.
#[test]
fn the_path_map_finds_every_live_path_through_growth_and_reuse() {
    let mut ix = Index::default();
    let p = |i: usize| PathBuf::from(format!("/r/{}/d{i}", i % 7));
    let ids: Vec<DirId> = (0..5_000).map(|i| ix.ensure(&p(i)).0).collect();
    for i in (0..5_000).step_by(2) {
        assert!(ix.remove(ids[i]).is_some());
    }
    // Reused slots under new paths.
    for i in 5_000..6_000 {
        ix.ensure(&p(i));
    }
    for i in 0..6_000 {
        let found = ix.lookup(&p(i));
        if i < 5_000 && i % 2 == 0 {
            assert_eq!(found, None, "{} was removed", p(i).display());
        } else {
            let id = found.unwrap_or_else(|| panic!("{} is lost", p(i).display()));
            assert_eq!(&**ix.get(id).unwrap().path(), p(i).as_path());
        }
    }
    assert_eq!(ix.len(), 3_500);
    // Equal paths spelled alike by components are one node.
    assert_eq!(ix.lookup(Path::new("/r/1/d1/")), ix.lookup(&p(1)));
}

#[test]
fn tracks_names() {
    let mut ix = Index::default();
    let (p, _) = ix.ensure(Path::new("/p"));
    assert!(!ix.get(p).unwrap().tracks(OsStr::new("x")));
    ix.add_partial(p, partial(1, "/p/x", true));
    let n = ix.get(p).unwrap();
    assert!(n.tracks(OsStr::new("x")));
    assert!(!n.tracks(OsStr::new("y")));
    assert!(!n.is_unused());
    ix.fill(p, vec![], Instant::now());
    assert!(ix.get(p).unwrap().tracks(OsStr::new("y")));
}

/// A first read in the index's form fills a blank node as `fill` does
/// (the same entries, what was added, completeness) and adds only what
/// is new to a node that already holds a name.
#[test]
fn a_listing_built_where_it_was_read_fills_as_a_list_does() {
    let list = || {
        vec![
            (OsString::from("b"), FileType::File),
            (OsString::from("a"), FileType::Dir),
            (OsString::from("b"), FileType::File),
        ]
    };
    let t = Instant::now();
    let (mut x, mut y) = (Index::default(), Index::default());
    let (xa, _) = x.ensure(Path::new("/d"));
    let (ya, _) = y.ensure(Path::new("/d"));
    let by_list = x.fill(xa, list(), t);
    let by_listing = y.fill_listing(ya, Listing::of_read(list()), t, true);
    assert_eq!(by_list, by_listing);
    assert_eq!(by_listing.len(), 2, "a name twice counts once");
    let (nx, ny) = (x.get(xa).unwrap(), y.get(ya).unwrap());
    assert_eq!(nx.entries(), ny.entries());
    assert!(ny.complete());
    assert!(
        y.fill_listing(ya, Listing::of_read(list()), t, false)
            .is_empty(),
        "nothing asked for"
    );
    // A node holding a name already: only the new ones are added.
    let (p, _) = y.ensure(Path::new("/p"));
    y.add_partial(p, partial(1, "/p/a", true));
    y.set_entry(p, OsStr::new("a"), FileType::Dir);
    let added = y.fill_listing(p, Listing::of_read(list()), t, true);
    assert_eq!(added, vec![(OsString::from("b"), FileType::File)]);
    assert_eq!(y.get(p).unwrap().entries().len(), 2);
}

/// The layout the memory figures rest on (issue 12): a directory's
/// node is 64 bytes, its entries and covering set outside it.
#[test]
fn a_directory_node_stays_small() {
    assert!(std::mem::size_of::<Option<DirNode>>() <= 64);
}

#[test]
fn first_reads_are_dated_to_the_millisecond() {
    let mut ix = Index::default();
    let (a, _) = ix.ensure(Path::new("/a"));
    let t0 = Instant::now();
    let ms = Duration::from_millis(1);
    assert!(!ix.first_read_after(a, t0), "not read yet");
    ix.fill(a, vec![], t0 + 10 * ms);
    assert!(ix.first_read_after(a, t0));
    assert!(ix.first_read_after(a, t0 + 9 * ms));
    assert!(!ix.first_read_after(a, t0 + 10 * ms), "same ms: not after");
    assert!(!ix.first_read_after(a, t0 + 20 * ms));
    // Later reads do not move it.
    ix.fill(a, vec![], t0 + 50 * ms);
    assert!(!ix.first_read_after(a, t0 + 20 * ms));
}

fn partial(spec: SpecId, root: &str, is_root: bool) -> Partial {
    let root = PathBuf::from(root);
    Partial {
        spec,
        name: root.file_name().unwrap().to_os_string(),
        is_root,
        root,
    }
}

/// Coverage counts follow every way a directory gains or loses a spec.
#[test]
fn covered_counts_are_kept_per_spec() {
    let mut ix = Index::default();
    let (a, _) = ix.ensure(Path::new("/a"));
    let (b, _) = ix.ensure(Path::new("/a/b"));
    assert!(ix.cover(a, 1));
    assert!(!ix.cover(a, 1), "once per directory");
    ix.cover(b, 1);
    ix.cover(b, 2);
    assert_eq!((ix.covered_dirs(1), ix.covered_dirs(2)), (2, 1));
    ix.remove(b);
    assert_eq!((ix.covered_dirs(1), ix.covered_dirs(2)), (1, 0));
    ix.cover(a, 2);
    assert_eq!(ix.detach(2), Vec::<DirId>::new(), "a is still covered by 1");
    assert_eq!(ix.covered_dirs(2), 0);
    assert_eq!(ix.detach(1), vec![a], "a is unused now");
    assert_eq!(ix.covered_dirs(1), 0);
}

/// A root is present when its parent lists it under a root
/// registration; a registration at a farther ancestor means missing.
#[test]
fn root_presence_is_derived_from_registrations() {
    let mut ix = Index::default();
    let (base, _) = ix.ensure(Path::new("/base"));
    let root = Path::new("/base/a/b");
    // Waiting at the nearest existing ancestor: missing.
    ix.add_partial(base, partial(7, "/base/a/b", false));
    ix.partial_mut_name(base, 7, root, "a");
    assert_eq!(ix.find_partial(7, root), Some(base));
    assert!(!ix.root_present(7, root));
    ix.set_entry(base, OsStr::new("a"), Dir);
    assert!(!ix.root_present(7, root), "only a step towards it");
    // Registered at its parent: present while listed there.
    assert!(ix.remove_partial(base, 7, root));
    let (a, _) = ix.ensure(Path::new("/base/a"));
    ix.add_partial(a, partial(7, "/base/a/b", true));
    assert!(!ix.root_present(7, root));
    ix.take_touched();
    ix.set_entry(a, OsStr::new("b"), Dir);
    assert!(ix.root_present(7, root));
    assert_eq!(
        ix.take_touched(),
        vec![7],
        "a root's entry touches its spec"
    );
    ix.set_entry(a, OsStr::new("other"), File);
    assert_eq!(
        ix.take_touched(),
        Vec::<SpecId>::new(),
        "other names do not"
    );
    ix.remove_entry(a, OsStr::new("b"));
    assert!(!ix.root_present(7, root));
    assert!(
        ix.root_present(7, Path::new("/")),
        "the file system root is never missing"
    );
}
