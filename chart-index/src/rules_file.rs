//! The access rules file (`--auth-rules-file`, the `access` module's
//! format): read at start, then read again whenever its directory
//! changes, watched by a spec of the server's own manager ([`SPEC`]).
//!
//! The directory is watched, not the file: a Kubernetes Secret (or
//! ConfigMap) mounted as a volume is a directory whose files are links
//! through `..data`, a link the kubelet replaces atomically (a new
//! timestamped directory, then `..data` renamed over); the file's own
//! link never changes. Subdirectories are left out (the timestamped
//! ones), and so is nothing else: any change in the directory reads the
//! file again, and only a text other than the one in force is parsed, so
//! a change of a neighbour costs a read. A save by rename, in place, or a
//! link swap are all seen.
//!
//! A text that cannot be used (a line that does not parse, a file that
//! cannot be read) keeps the rules in force and says why on stderr; the
//! next change tries again. It never opens access, and it does not touch
//! the server's health: the storage is served as before. Requests read
//! the rules in force without a lock ([`ArcSwap`]); a reload swaps them
//! whole, so a request sees the old rules or the new, never a mix.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use arc_swap::{ArcSwap, Guard};
use specwatch::{Event, Manager, Phase, WatchSpec};
use tracing::{info, warn};

use crate::access::{AccessRules, Hash, Scheme, credential_field, hash};
use crate::auth::Auth;

/// The name of the watch spec over the rules file's directory.
pub const SPEC: &str = "auth-rules";
/// How long starting to watch the directory may take.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// The rules file and the rules in force.
pub struct RulesFile {
    /// Absolute, links not resolved (a Secret's file is a link that
    /// changes).
    path: PathBuf,
    current: ArcSwap<AccessRules>,
    /// What the last read found; written by the thread that reloads.
    last: Mutex<Last>,
}

/// What the last read of the file found.
struct Last {
    /// The digest of the text whose rules are in force.
    in_force: Hash,
    /// Why the last read could not be used (`None`: it could).
    failing: Option<String>,
}

/// What a read of the file came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Reload {
    /// The text is the one in force (as last time).
    Unchanged,
    /// The text is the one in force again, after a read that could not be
    /// used.
    Back,
    /// New rules in force: how many.
    Reloaded(String),
    /// The rules in force stay: why the text could not be used.
    Kept(String),
}

impl RulesFile {
    /// Reads and parses the file at `path` (made absolute); the error
    /// names the file and the line.
    pub fn load(path: &Path) -> Result<RulesFile, String> {
        let path = std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let text = read(&path)?;
        RulesFile::new(path, &text)
    }

    /// The rules of `text`, as read from `path`.
    pub fn new(path: PathBuf, text: &str) -> Result<RulesFile, String> {
        let rules = AccessRules::parse(text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(RulesFile {
            path,
            current: ArcSwap::from_pointee(rules),
            last: Mutex::new(Last {
                in_force: hash(text.as_bytes()),
                failing: None,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The rules in force (no lock: a request never waits on a reload).
    pub fn current(&self) -> Guard<Arc<AccessRules>> {
        self.current.load()
    }

    /// Reads the file again and puts its rules in force, if they are new
    /// and can be used.
    pub fn reload(&self) -> Reload {
        self.take(read(&self.path))
    }

    /// Puts the rules of `text` in force, as [`RulesFile::reload`] says.
    fn take(&self, text: Result<String, String>) -> Reload {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let parsed = text.and_then(|text| {
            let digest = hash(text.as_bytes());
            if digest == last.in_force {
                return Ok(None);
            }
            AccessRules::parse(&text)
                .map(|rules| Some((digest, rules)))
                .map_err(|e| format!("{}: {e}", self.path.display()))
        });
        let failing = last.failing.take();
        match parsed {
            Ok(None) if failing.is_some() => Reload::Back,
            Ok(None) => Reload::Unchanged,
            Ok(Some((digest, rules))) => {
                let said = rules.describe();
                self.current.store(Arc::new(rules));
                last.in_force = digest;
                Reload::Reloaded(said)
            }
            // Said once: a change beside the file (a log written in its
            // directory) finds it as it was.
            Err(why) if failing.as_deref() == Some(why.as_str()) => {
                last.failing = failing;
                Reload::Unchanged
            }
            Err(why) => {
                last.failing = Some(why.clone());
                Reload::Kept(why)
            }
        }
    }

    /// The spec over the file's directory: its subdirectories left out,
    /// editors' temporary names not (the file may have any name).
    pub fn watch_spec(&self) -> WatchSpec {
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("/"));
        WatchSpec::new([dir])
            .ignore_patterns(["*/"])
            .editor_ignores(false)
    }

    /// Says on stderr what a read came to (nothing when unchanged).
    fn say(&self, reload: &Reload) {
        let path = self.path.display();
        match reload {
            Reload::Unchanged => {}
            Reload::Back => {
                info!("chart_index: auth: {path} holds the rules in force again");
            }
            Reload::Reloaded(said) => {
                info!("chart_index: auth: rules reloaded from {path}: {said}");
            }
            Reload::Kept(why) => warn!(
                "chart_index: auth: rules not reloaded: {why}; the rules in force stay until \
                 the file changes again"
            ),
        }
    }
}

/// The file's text; the error names the file.
fn read(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8 text", path.display()))
}

/// Watches the rules file of `auth`, if it has one: a spec of `manager`
/// over its directory, and a thread that reloads the file after each of
/// its batches (until the manager is dropped). Reads the file once more
/// once the watch is on, for a change made since it was first read.
pub fn watch(manager: &Manager, auth: &Auth) -> Result<(), String> {
    let Some(file) = auth.rules_file().cloned() else {
        return Ok(());
    };
    let err = |e: specwatch::Error| format!("watching the rules file {}: {e}", file.path.display());
    let events = manager.subscribe();
    manager.apply(SPEC, file.watch_spec()).map_err(err)?;
    manager.wait_watching(SPEC, START_TIMEOUT).map_err(err)?;
    file.say(&file.reload());
    std::thread::Builder::new()
        .name("auth-rules".into())
        .spawn(move || {
            let mut trouble = None;
            for ev in &events {
                match ev {
                    Event::Changes(b) if b.name == SPEC => file.say(&file.reload()),
                    Event::Status(s) if s.name == SPEC => {
                        let now = match &s.phase {
                            Phase::Degraded { reason } => Some(format!("degraded: {reason}")),
                            Phase::Failed { error } => Some(format!("failed: {error}")),
                            Phase::Watching => None,
                            _ => continue,
                        };
                        if now != trouble {
                            match &now {
                                Some(t) => warn!(
                                    "chart_index: auth: the watch of {} {t} (the rules in force \
                                     stay)",
                                    file.path.display()
                                ),
                                None => info!(
                                    "chart_index: auth: watching {} again",
                                    file.path.display()
                                ),
                            }
                            trouble = now;
                        }
                    }
                    _ => {}
                }
            }
        })
        .map_err(|e| format!("starting the rules file's thread: {e}"))?;
    Ok(())
}

/// `chart-index hash-credential basic|bearer`: prints the CREDENTIAL
/// field of a rule for the secret on stdin (a token, or `USER:PASSWORD`;
/// one trailing newline dropped), so that it never is an argument (seen
/// in `ps`) nor in the file.
pub fn hash_credential(scheme: Scheme) -> ExitCode {
    let mut stdin = std::io::stdin();
    if stdin.is_terminal() {
        let what = match scheme {
            Scheme::Basic => "USER:PASSWORD",
            Scheme::Bearer => "the token",
        };
        eprintln!("chart-index: type {what}, then Enter and Ctrl-D");
    }
    let mut secret = Vec::new();
    if let Err(e) = stdin.read_to_end(&mut secret) {
        eprintln!("chart-index: hash-credential: reading stdin: {e}");
        return ExitCode::from(2);
    }
    match secret_field(scheme, secret) {
        Ok(field) => {
            let mut out = std::io::stdout().lock();
            match writeln!(out, "{field}").and_then(|()| out.flush()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(_) => ExitCode::from(1),
            }
        }
        Err(why) => {
            eprintln!("chart-index: hash-credential: {why}");
            ExitCode::from(2)
        }
    }
}

/// The CREDENTIAL field of `secret` as read from stdin (one trailing
/// newline dropped), if it is a secret of `scheme` a client can send.
fn secret_field(scheme: Scheme, mut secret: Vec<u8>) -> Result<String, &'static str> {
    if secret.ends_with(b"\n") {
        secret.pop();
        if secret.ends_with(b"\r") {
            secret.pop();
        }
    }
    match scheme {
        Scheme::Bearer if secret.is_empty() || !secret.iter().all(u8::is_ascii_graphic) => {
            Err("a token is printable ASCII without spaces (nothing else was given on stdin?)")
        }
        Scheme::Basic if !secret.contains(&b':') => {
            Err("Basic credentials are USER:PASSWORD (no ':' in what stdin gave)")
        }
        _ => Ok(credential_field(scheme, &secret)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> RulesFile {
        RulesFile::new(PathBuf::from("/etc/chart-index/rules"), text).unwrap()
    }

    const READ_ORG: &str =
        "org read bearer:sha256:1a7674eb4ee78df7e1ac439a93c3fa8e3c945784d4dec9fd8e3011738b2f1d62\n";
    const WRITE_ORG: &str = "org write bearer:sha256:1a7674eb4ee78df7e1ac439a93c3fa8e3c945784d4dec9fd8e3011738b2f1d62\n";

    #[test]
    fn a_text_that_cannot_be_used_keeps_the_rules_in_force() {
        let f = file(READ_ORG);
        let before = f.current().clone();
        assert_eq!(f.take(Ok(READ_ORG.into())), Reload::Unchanged);
        let kept = f.take(Ok(format!("{READ_ORG}org write s3cret\n")));
        let Reload::Kept(why) = kept else {
            panic!("{kept:?}")
        };
        assert!(
            why.starts_with("/etc/chart-index/rules: line 2: the credential is none of"),
            "{why}"
        );
        assert!(!why.contains("s3cret"), "{why}");
        assert!(
            Arc::ptr_eq(&before, &f.current()),
            "the rules in force stay"
        );
        // Read again as it was (a change beside it): said once, not again.
        assert_eq!(
            f.take(Ok(format!("{READ_ORG}org write s3cret\n"))),
            Reload::Unchanged
        );
        let gone = f.take(Err("/etc/chart-index/rules: No such file".into()));
        assert_eq!(
            gone,
            Reload::Kept("/etc/chart-index/rules: No such file".into())
        );
        assert!(Arc::ptr_eq(&before, &f.current()));
        assert_eq!(
            f.take(Err("/etc/chart-index/rules: No such file".into())),
            Reload::Unchanged
        );
        // Put back as it was: said once, nothing swapped.
        assert_eq!(f.take(Ok(READ_ORG.into())), Reload::Back);
        assert_eq!(f.take(Ok(READ_ORG.into())), Reload::Unchanged);
        assert!(Arc::ptr_eq(&before, &f.current()));
    }

    #[test]
    fn new_rules_are_swapped_in_whole() {
        let f = file(READ_ORG);
        let held = f.current().clone();
        let r = f.take(Ok(WRITE_ORG.into()));
        assert_eq!(
            r,
            Reload::Reloaded("1 rule: 0 Basic credentials, 1 token, 0 anonymous reads".into())
        );
        assert_eq!(
            *held,
            AccessRules::parse(READ_ORG).unwrap(),
            "a holder keeps its rules"
        );
        assert_eq!(**f.current(), AccessRules::parse(WRITE_ORG).unwrap());
        // An empty file is rules too: nobody's (revoking everyone).
        let r = f.take(Ok("# revoked\n".into()));
        assert_eq!(
            r,
            Reload::Reloaded("0 rules: 0 Basic credentials, 0 tokens, 0 anonymous reads".into())
        );
        assert_eq!(**f.current(), AccessRules::default());
    }

    #[test]
    fn the_directory_is_watched_without_its_subdirectories() {
        let spec = file(READ_ORG).watch_spec();
        assert_eq!(spec.paths, [PathBuf::from("/etc/chart-index")]);
        assert_eq!(spec.ignore_patterns, ["*/"]);
    }

    #[test]
    fn hash_credential_takes_a_secret_a_client_can_send() {
        let tok = "bearer:sha256:1a7674eb4ee78df7e1ac439a93c3fa8e3c945784d4dec9fd8e3011738b2f1d62";
        for input in [&b"tok"[..], b"tok\n", b"tok\r\n"] {
            assert_eq!(secret_field(Scheme::Bearer, input.to_vec()).unwrap(), tok);
        }
        assert_eq!(
            secret_field(Scheme::Basic, b"alice:pw\n".to_vec()).unwrap(),
            "basic:sha256:ba87b66806fd2d0b6f5e17a98b595f34faee071778aa817fb271d06214ed24f9"
        );
        for bad in [&b""[..], b"\n", b"two words", b"tok\n\n"] {
            assert!(
                secret_field(Scheme::Bearer, bad.to_vec()).is_err(),
                "{bad:?}"
            );
        }
        assert!(secret_field(Scheme::Basic, b"alice".to_vec()).is_err());
    }
}
