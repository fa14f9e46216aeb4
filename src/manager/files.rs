//! [`Manager::files`]: what a spec sees now, read from the engine's index.

use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::{GlobBuilder, GlobMatcher};

use super::Manager;
use crate::batch::change::FileType;
use crate::engine::Msg;
use crate::error::{Error, Result};
use crate::fs;

/// How long [`Manager::files`] waits for the engine's copy at most.
const FILES_WAIT: Duration = Duration::from_secs(30);

/// `p` as `pattern` sees it: relative to the deepest root at or above it
/// (a root that is itself the entry: its name).
fn relative<'a>(p: &'a Path, roots: &[PathBuf]) -> &'a Path {
    let Some(root) = roots
        .iter()
        .filter(|r| p.starts_with(r))
        .max_by_key(|r| r.as_os_str().len())
    else {
        return p;
    };
    match p.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel,
        _ => p.file_name().map_or(p, Path::new),
    }
}

impl Manager {
    /// The entries spec `name` sees now, sorted by path, each with its
    /// type: those of the engine's index that its rules do not ignore (no
    /// walk of the disk). With `pattern`, only those whose path relative
    /// to their root matches it (a glob: `*`, `?` and `[...]` stay within
    /// a name, `**` crosses directories: `"**/*.rs"`, `"src/*.toml"`; a
    /// root that is itself a file is matched by its name).
    ///
    /// The answer reflects every call made before (apply, delete), once
    /// the engine has handled them, and the changes the engine has read:
    /// call [`sync`](Self::sync) first to include every change made
    /// before. The engine copies the spec's part of the index (some
    /// bytes per entry, on its own thread); the rules are applied, the
    /// paths built and sorted on the caller's thread. On a tree of a
    /// million files this costs about two `find`s of it (`benches/RESULTS.md`,
    /// "At scale", has the figure).
    ///
    /// ```no_run
    /// use specwatch::{Manager, WatchSpec};
    /// # fn main() -> Result<(), specwatch::Error> {
    /// let m = Manager::new()?;
    /// m.apply("src", WatchSpec::new(["/app/src"]).ignore_patterns(["target/"]))?;
    /// m.wait_watching("src", std::time::Duration::from_secs(30))?;
    /// for (path, _type) in m.files("src", Some("**/*.rs"))? {
    ///     println!("{}", path.display());
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] if no spec `name` is applied;
    /// [`Error::InvalidFilter`] if `pattern` is not a valid glob (naming
    /// the spec); [`Error::EngineBusy`] when the engine has not answered
    /// within 30 s; [`Error::Engine`] once it has stopped.
    pub fn files(&self, name: &str, pattern: Option<&str>) -> Result<Vec<(PathBuf, FileType)>> {
        let glob: Option<GlobMatcher> = pattern
            .map(|p| {
                GlobBuilder::new(p)
                    .literal_separator(true)
                    .build()
                    .map(|g| g.compile_matcher())
                    .map_err(|e| Error::InvalidFilter {
                        spec: name.to_owned(),
                        pattern: p.to_owned(),
                        reason: e.kind().to_string(),
                    })
            })
            .transpose()?;
        let (reply, answer) = crossbeam_channel::bounded(1);
        if let Err(e) = self.send(Msg::Export {
            name: name.to_owned(),
            reply,
        }) {
            self.check_alive()?;
            return Err(e);
        }
        let export = match answer.recv_timeout(FILES_WAIT) {
            Ok(Some(export)) => export,
            Ok(None) => {
                return Err(Error::NotFound {
                    spec: name.to_owned(),
                });
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                return Err(Error::EngineBusy {
                    waited_for: "the entries a spec sees",
                    timeout: FILES_WAIT,
                });
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                self.check_alive()?;
                return Err(Error::Engine {
                    message: "the engine thread stopped before answering".into(),
                    source: None,
                });
            }
        };
        let roots = self.spec(name).map(|(s, _)| s.paths).unwrap_or_default();
        // The rules, on a thread per core (each with its own copy: their
        // memo is not shared).
        let matchers = fs::workers(export.dirs.len(), || export.matcher.clone());
        let mut out: Vec<(PathBuf, FileType)> =
            fs::in_parallel(&export.dirs, matchers, |matcher, dir| {
                dir.visible(matcher)
                    .into_iter()
                    .map(|(n, t)| (dir.path.join(n), t))
                    .filter(|(p, _)| {
                        glob.as_ref()
                            .is_none_or(|g| g.is_match(relative(p, &roots)))
                    })
                    .collect::<Vec<_>>()
            })
            .into_iter()
            .flatten()
            .collect();
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_see_paths_relative_to_the_deepest_root() {
        let roots = [
            PathBuf::from("/r"),
            PathBuf::from("/r/sub"),
            PathBuf::from("/f.txt"),
        ];
        assert_eq!(
            relative(Path::new("/r/a/b.rs"), &roots),
            Path::new("a/b.rs")
        );
        assert_eq!(
            relative(Path::new("/r/sub/c.rs"), &roots),
            Path::new("c.rs")
        );
        assert_eq!(relative(Path::new("/f.txt"), &roots), Path::new("f.txt"));
        assert_eq!(relative(Path::new("/other"), &roots), Path::new("/other"));
    }
}
