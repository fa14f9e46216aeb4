//! Backends per root: how each root of a spec is watched (the manager's
//! event backend, or polling by the engine), decided when the root is
//! attached; and what that asks of each directory: an OS watch, polling,
//! or both when specs that cover it disagree.
//!
//! The decision is stored with the spec ([`SpecTable`](super::specs)
//! writes it); the poll set and the watch table carry it out. Nothing is
//! kept here but the manager's settings ([`Backends`]).

use std::io;
use std::path::Path;
use std::time::Duration;

use super::Engine;
use super::specs::RootMode;
use super::trace;
use crate::backend::FileSystem;
use crate::index::{DirId, SpecId};
use crate::spec::Backend;
use crate::status::{BackendReason, RootStatus};

/// The manager's settings that decide a root's backend.
#[derive(Clone, Copy, Debug)]
pub(super) struct Backends {
    /// The manager's choice, for specs that make none (may be `Auto`).
    pub default: Backend,
    /// The event backend it runs (`Native`, `Portable`, or `Poll` for a
    /// manager that polls everything: every root is polled by the engine,
    /// and the backend holds no watch).
    pub running: Backend,
    /// The interval `Auto` polls shared file systems at.
    pub poll_interval: Duration,
}

impl Backends {
    /// The interval a manager that polls everything polls at (`None`: it
    /// runs an event backend).
    pub(super) fn polls_all(&self) -> Option<Duration> {
        match self.running {
            Backend::Poll { interval } => Some(interval.max(Duration::from_millis(1))),
            _ => None,
        }
    }
}

/// Decides how `root` is watched for a spec whose choice is `choice`
/// (`None`: the manager's default), given what `statfs` said of the file
/// system it is on (only asked for `Auto`). In a manager that polls
/// everything, what its backend would watch is polled at its interval.
pub(super) fn decide(
    root: &Path,
    choice: Option<Backend>,
    backends: &Backends,
    fs: impl FnOnce() -> io::Result<FileSystem>,
) -> RootMode {
    let mut mode = decide_choice(root, choice, backends, fs);
    if mode.poll.is_none() {
        mode.poll = backends.polls_all();
    }
    mode
}

fn decide_choice(
    root: &Path,
    choice: Option<Backend>,
    backends: &Backends,
    fs: impl FnOnce() -> io::Result<FileSystem>,
) -> RootMode {
    let choice = choice.unwrap_or(backends.default);
    let status = |backend, reason| RootStatus {
        path: root.to_path_buf(),
        backend,
        reason,
        unmounted_since: None,
    };
    match choice {
        Backend::Auto => match fs() {
            Ok(f) if f.remote => {
                let interval = backends.poll_interval;
                RootMode {
                    status: status(
                        Backend::Poll { interval },
                        BackendReason::Shared {
                            file_system: f.name.unwrap_or_else(|| "remote".to_owned()),
                            magic: f.magic,
                        },
                    ),
                    poll: Some(interval),
                }
            }
            Ok(f) => RootMode {
                status: status(
                    backends.running,
                    BackendReason::Local {
                        file_system: f.name,
                        magic: f.magic,
                    },
                ),
                poll: None,
            },
            Err(e) => RootMode {
                status: status(
                    backends.running,
                    BackendReason::Unknown {
                        error: e.to_string(),
                    },
                ),
                poll: None,
            },
        },
        Backend::Poll { interval } => RootMode {
            status: status(choice, BackendReason::Chosen),
            poll: Some(interval.max(Duration::from_millis(1))),
        },
        // The manager refuses a spec naming the event backend it does not
        // run; should one get here, the running backend watches it.
        _ => RootMode {
            status: status(backends.running, BackendReason::Chosen),
            poll: None,
        },
    }
}

impl Engine {
    /// Decides (with `statfs` of `existing`, the root or its nearest
    /// existing ancestor) how `root` of `sid` is watched, and records it.
    pub(super) fn decide_root(&mut self, sid: SpecId, root: &Path, existing: &Path) {
        let Some(st) = self.specs.get(sid) else {
            return;
        };
        let mode = decide(root, st.backend(), &self.backends, || {
            crate::backend::file_system(existing)
        });
        if root == existing {
            // (Which file system it is on: what tells it unmounted.)
            self.track_mount(sid, root);
        }
        if self
            .specs
            .get(sid)
            .is_some_and(|st| st.skips_same_content())
            && let Some(dev) = crate::fs::device_of(existing)
        {
            // The lane its files' hashes are read on.
            self.specs.set_device(sid, root, dev);
        }
        if self.specs.set_mode(sid, mode) {
            self.out.touch(sid);
            trace::traced! {
                if let Some(st) = self.specs.get(sid)
                    && let Some(rs) = st.root_status(root)
                {
                    trace::event!(
                        INFO,
                        spec = st.name(),
                        path = %rs.path.display(),
                        backend = %rs.backend,
                        reason = %trace::Reason(&rs.reason),
                        status = %rs,
                        "backend chosen for root"
                    );
                }
            }
        }
    }

    /// What directory `id` needs: an OS watch (some covering spec watches
    /// it with the running backend), and polling at which interval (some
    /// covering spec polls it).
    /// In a manager that polls everything, every covered directory is
    /// polled, and none gets an OS watch.
    ///
    /// A directory that only holds the registration of a polled root (its
    /// parent, or the nearest ancestor of a missing one) is polled for it
    /// unless it gets an OS watch anyway: then its own file system's
    /// events tell about the root's entry. (A root polled for being on a
    /// network or FUSE mount is usually the mount point, in a local
    /// directory; a poll of that directory, which holds an OS watch, runs
    /// on the engine's thread and `stat`s the mount point: on a mount
    /// that stopped answering, that held up every spec.)
    pub(super) fn wanted(&self, id: DirId) -> (bool, Option<Duration>) {
        let all = self.backends.polls_all();
        if all.is_none() && !self.specs.any_polled() {
            return (true, None);
        }
        let Some(node) = self.index.get(id) else {
            return (all.is_none(), None);
        };
        // (an OS watch wanted, polling at, some spec concerned)
        let mut want = (false, None::<Duration>, false);
        let add = |want: &mut (bool, Option<Duration>, bool), p: Option<Option<Duration>>| {
            let Some(p) = p else {
                return;
            };
            want.2 = true;
            match p.or(all) {
                Some(every) => want.1 = Some(want.1.map_or(every, |q| q.min(every))),
                None => want.0 = true,
            }
        };
        for &s in node.full() {
            add(&mut want, self.specs.poll_below(s, node.path()));
        }
        let covered_poll = want.1;
        for p in node.partial() {
            add(&mut want, self.specs.poll_of_root(p.spec, &p.root));
        }
        let (os, poll, any) = want;
        let os = os || (!any && all.is_none());
        (os, if os { covered_poll } else { poll })
    }

    /// Carries out what [`wanted`](Self::wanted) says about polling for
    /// directory `id`; returns whether it needs an OS watch.
    pub(super) fn apply_mode(&mut self, id: DirId) -> bool {
        let (os, poll) = self.wanted(id);
        match poll {
            Some(every) => self.choose_poll(id, every),
            None => self.polls.unchoose(id),
        }
        os
    }

    /// After a spec that polls came or went: every directory's watching
    /// made to match what its covering specs ask now. A directory that
    /// gets an OS watch is polled one last time after it (nothing between
    /// the two is lost); one that no longer needs its OS watch lets go of
    /// it.
    pub(super) fn refresh_modes(&mut self) {
        if !self.specs.take_modes_changed() {
            return;
        }
        for id in self.index.ids() {
            let Some(n) = self.index.get(id) else {
                continue;
            };
            if n.is_unused() {
                continue;
            }
            let path = n.path().clone();
            let full = !n.full().is_empty();
            let mut specs = n.full().to_vec();
            specs.extend(n.partial().iter().map(|p| p.spec));
            let was_polled = self.polls.contains(id);
            let (os, poll) = self.wanted(id);
            if let Some(every) = poll {
                self.choose_poll(id, every);
            }
            if os && self.lacks_watch(id) && !self.recovery.retrying(id) {
                self.watch_node(id, !full, &specs);
            }
            let watched = os && !self.lacks_watch(id);
            if watched && was_polled && poll.is_none() {
                // Watched now, whoever added the watch: a last poll (against
                // the picture it had) catches what came since the
                // previous one, then it is polled no more.
                self.poll_node(id);
                self.polls.watched(id);
            }
            if poll.is_none() {
                self.polls.unchoose(id);
            }
            if !os {
                // Not polled for want of a watch: it wants none.
                self.polls.watched(id);
                if self.watches.per_directory() && self.watches.watch_of(id).is_some() {
                    // Events still queued for the watch are about to be
                    // ignored: what they would have told is found by a
                    // re-read (ctime within the overflow margin), then the
                    // picture starts from there.
                    let since = self.recovery.overflow_since();
                    self.rescan_node(id, Some(since));
                    self.drop_watch(id, &path);
                    if self.polls.contains(id) {
                        self.sign(id);
                    }
                }
            }
        }
        self.watches.reconcile_soon();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AUTO: Backends = Backends {
        default: Backend::Auto,
        running: Backend::Native,
        poll_interval: Duration::from_secs(1),
    };

    fn fs(name: &str, magic: Option<u64>, remote: bool) -> impl FnOnce() -> io::Result<FileSystem> {
        let name = Some(name.to_owned());
        move || {
            Ok(FileSystem {
                name,
                magic,
                remote,
            })
        }
    }

    fn never() -> impl FnOnce() -> io::Result<FileSystem> {
        || panic!("statfs asked for a backend that is not Auto")
    }

    #[test]
    fn auto_polls_shared_file_systems_and_says_which() {
        let fuse = fs("fuse", Some(0x6573_5546), true);
        let m = decide(Path::new("/mnt/charts"), None, &AUTO, fuse);
        assert_eq!(m.poll, Some(Duration::from_secs(1)));
        assert_eq!(
            m.status.to_string(),
            "poll every 1s: fuse (0x65735546) at /mnt/charts"
        );
        let ext4 = fs("ext4", Some(0xEF53), false);
        let m = decide(Path::new("/src"), Some(Backend::Auto), &AUTO, ext4);
        assert_eq!(m.poll, None);
        assert_eq!(m.status.to_string(), "native: ext4 (0xef53) at /src");
    }

    /// macOS, FreeBSD and Windows name file systems without a number.
    #[test]
    fn a_file_system_known_by_name_only_is_shown_by_name() {
        let smb = fs("smbfs", None, true);
        let m = decide(Path::new("/Volumes/charts"), None, &AUTO, smb);
        assert_eq!(m.poll, Some(Duration::from_secs(1)));
        assert_eq!(
            m.status.to_string(),
            "poll every 1s: smbfs at /Volumes/charts"
        );
        let apfs = fs("apfs", None, false);
        let m = decide(Path::new("/src"), None, &AUTO, apfs);
        assert_eq!(m.status.to_string(), "native: apfs at /src");
    }

    #[test]
    fn auto_without_statfs_takes_the_event_backend() {
        let m = decide(Path::new("/x"), None, &AUTO, || {
            Err(io::Error::other("no statfs"))
        });
        assert_eq!(m.poll, None);
        assert_eq!(m.status.backend, Backend::Native);
        assert!(matches!(m.status.reason, BackendReason::Unknown { .. }));
    }

    #[test]
    fn a_chosen_backend_is_taken_without_asking_the_file_system() {
        let every = Duration::from_millis(100);
        let m = decide(
            Path::new("/x"),
            Some(Backend::Poll { interval: every }),
            &AUTO,
            never(),
        );
        assert_eq!(m.poll, Some(every));
        assert_eq!(m.status.to_string(), "poll every 100ms: chosen at /x");
        let m = decide(Path::new("/x"), Some(Backend::Native), &AUTO, never());
        assert_eq!((m.poll, m.status.backend), (None, Backend::Native));
        // The manager's default, for a spec that says nothing.
        let native = Backends {
            default: Backend::Native,
            ..AUTO
        };
        let m = decide(Path::new("/mnt"), None, &native, never());
        assert_eq!(m.poll, None, "Native chosen: not polled even on FUSE");
    }

    #[test]
    fn a_polling_manager_polls_every_root_at_its_interval() {
        let every = Duration::from_millis(20);
        let polling = Backends {
            default: Backend::Poll { interval: every },
            running: Backend::Poll { interval: every },
            poll_interval: Duration::from_secs(1),
        };
        let m = decide(Path::new("/x"), None, &polling, never());
        assert_eq!(m.poll, Some(every), "the engine polls it");
        assert_eq!(m.status.to_string(), "poll every 20ms: chosen at /x");
        // Another interval: the engine polls it at that one.
        let other = Backend::Poll {
            interval: Duration::from_millis(500),
        };
        let m = decide(Path::new("/x"), Some(other), &polling, never());
        assert_eq!(m.poll, Some(Duration::from_millis(500)));
        // `Auto` on a local file system: what the backend would watch is
        // polled at the manager's interval, and the status says which file
        // system it is; on a shared one, at the shared interval, as ever.
        let ext4 = fs("ext4", Some(0xEF53), false);
        let m = decide(Path::new("/src"), Some(Backend::Auto), &polling, ext4);
        assert_eq!(m.poll, Some(every));
        assert_eq!(
            m.status.to_string(),
            "poll every 20ms: ext4 (0xef53) at /src"
        );
        let nfs = fs("nfs", Some(0x6969), true);
        let m = decide(Path::new("/mnt"), Some(Backend::Auto), &polling, nfs);
        assert_eq!(m.poll, Some(Duration::from_secs(1)));
    }

    #[test]
    fn a_zero_interval_has_a_floor() {
        let m = decide(
            Path::new("/x"),
            Some(Backend::Poll {
                interval: Duration::ZERO,
            }),
            &AUTO,
            never(),
        );
        assert_eq!(m.poll, Some(Duration::from_millis(1)));
    }
}
