//! Version-control locks ([`WatchOptions::vcs_settle`]): which lock file
//! of the repository holding a path exists, if one does.
//!
//! A look is a few `lstat`s: two per directory from the root up to its
//! repository's top (or to `/` outside any), and one per lock file; a
//! `.git` file (a worktree, a submodule) is read to find its git
//! directory. Nothing is cached: a repository made or moved while the
//! spec runs is found at the next look.
//!
//! [`WatchOptions::vcs_settle`]: crate::WatchOptions::vcs_settle

use std::path::{Path, PathBuf};

/// The first lock file that exists among those of the repositories
/// holding `roots` (each root's nearest `.git` or `.hg` at or above it).
pub(crate) fn vcs_lock(roots: &[PathBuf]) -> Option<PathBuf> {
    roots.iter().find_map(|r| {
        locks_of(r)
            .into_iter()
            .find(|l| std::fs::symlink_metadata(l).is_ok())
    })
}

/// The lock files of the repository holding `path`: git's
/// `index.lock`, Mercurial's `wlock` (a symlink while held, hence
/// `lstat`) and `store/lock`. None outside a repository.
fn locks_of(path: &Path) -> Vec<PathBuf> {
    for dir in path.ancestors() {
        let git = dir.join(".git");
        match std::fs::symlink_metadata(&git) {
            Ok(m) if m.is_dir() => return vec![git.join("index.lock")],
            Ok(m) if m.is_file() => {
                return git_dir_of(&git, dir)
                    .map(|g| vec![g.join("index.lock")])
                    .unwrap_or_default();
            }
            _ => {}
        }
        let hg = dir.join(".hg");
        if std::fs::symlink_metadata(&hg).is_ok_and(|m| m.is_dir()) {
            return vec![hg.join("wlock"), hg.join("store").join("lock")];
        }
    }
    Vec::new()
}

/// The git directory a `.git` file names (`gitdir: ../.git/worktrees/x`,
/// relative to the directory `top` holding it).
fn git_dir_of(file: &Path, top: &Path) -> Option<PathBuf> {
    let text = super::read_small(file, 4096)?;
    let named = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    (!named.is_empty()).then(|| top.join(named))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn the_nearest_repository_at_or_above_the_root_decides() {
        let d = tempfile::tempdir().unwrap();
        let top = d.path();
        let root = top.join("repo/src/app");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(top.join("repo/.git")).unwrap();
        assert_eq!(locks_of(&root), [top.join("repo/.git/index.lock")]);
        assert_eq!(vcs_lock(std::slice::from_ref(&root)), None);
        fs::write(top.join("repo/.git/index.lock"), "").unwrap();
        assert_eq!(
            vcs_lock(&[top.join("elsewhere"), root.clone()]),
            Some(top.join("repo/.git/index.lock"))
        );
        // The root itself, and a repository nested nearer.
        fs::create_dir_all(root.join(".hg/store")).unwrap();
        assert_eq!(
            locks_of(&root),
            [root.join(".hg/wlock"), root.join(".hg/store/lock")]
        );
        assert_eq!(vcs_lock(std::slice::from_ref(&root)), None);
        #[cfg(unix)]
        {
            // Mercurial's lock is a dangling link: it exists all the same.
            std::os::unix::fs::symlink("host:1234", root.join(".hg/wlock")).unwrap();
            assert_eq!(
                vcs_lock(std::slice::from_ref(&root)),
                Some(root.join(".hg/wlock"))
            );
        }
    }

    #[test]
    fn a_git_file_names_the_git_directory_of_a_worktree() {
        let d = tempfile::tempdir().unwrap();
        let wt = d.path().join("wt");
        let gitdir = d.path().join("main/.git/worktrees/wt");
        fs::create_dir_all(&gitdir).unwrap();
        fs::create_dir_all(wt.join("src")).unwrap();
        fs::write(wt.join(".git"), format!("gitdir: {}\n", gitdir.display())).unwrap();
        assert_eq!(locks_of(&wt.join("src")), [gitdir.join("index.lock")]);
        fs::write(wt.join(".git"), "gitdir: ../main/.git/worktrees/wt\n").unwrap();
        assert_eq!(
            locks_of(&wt),
            [wt.join("../main/.git/worktrees/wt/index.lock")]
        );
        fs::write(gitdir.join("index.lock"), "").unwrap();
        assert!(vcs_lock(&[wt]).is_some());
    }

    #[test]
    fn outside_any_repository_there_is_no_lock() {
        let d = tempfile::tempdir().unwrap();
        // The temporary directory may itself be inside a repository.
        if locks_of(d.path()).is_empty() {
            assert_eq!(vcs_lock(&[d.path().join("x")]), None);
        }
    }
}
