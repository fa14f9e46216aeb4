//! Who may read and write: HTTP Basic credentials (one user, as
//! chartmuseum's `--basic-auth-user`/`--basic-auth-pass`), static Bearer
//! tokens (`--auth-token-file`), and per-tenant rules
//! (`--auth-rules-file`, the `access` module's format, kept current by
//! the `rules_file` module), checked apart from the HTTP layer.
//!
//! - With credentials configured, every route but `/health` needs them;
//!   `--auth-anonymous-get` opens the reads (GET, HEAD), and a rule
//!   `PREFIX read anonymous` those of its tenants. A request without
//!   them, or with wrong or malformed ones, is a 401 with a
//!   `WWW-Authenticate` challenge per scheme the server takes
//!   (`Basic realm="chart_index"`, `Bearer realm="chart_index"`; both
//!   with a rules file, which may name either at its next reload).
//! - The global credentials (`--basic-auth-*`, `--auth-token-file`) may
//!   read and write every tenant: they are rules of prefix `/`. A
//!   credential of the rules file may do what its lines say; asking for
//!   more is a 403, for a tenant that exists or not alike (the check
//!   comes before the tenant is looked up, so the answer says nothing of
//!   which tenants exist).
//! - With none, reads are open and writes are refused (403, saying how to
//!   open them) unless the server runs with `--allow-anonymous-write`:
//!   write routes are never open unless asked.
//!
//! Only the sha256 digests of the credentials are kept; a presented
//! credential is hashed and compared with [`ConstantTimeEq`] (digests of
//! equal length, every stored one compared: the time taken says nothing
//! of how much of a secret matched, nor which token). No credential, nor
//! any part of an `Authorization` header, is ever put in a message.

use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use subtle::{Choice, ConstantTimeEq};

pub use crate::access::Access;
use crate::access::{Hash, Scheme, Verdict, hash};
use crate::rules_file::RulesFile;

/// The realm of the challenges.
pub const REALM: &str = "chart_index";

/// The server's credentials and what is open without them.
#[derive(Default)]
pub struct Auth {
    /// The digests of the user and of the password.
    basic: Option<(Hash, Hash)>,
    /// The digests of the tokens.
    tokens: Vec<Hash>,
    /// `--auth-anonymous-get`: reads need no credentials.
    pub anonymous_get: bool,
    /// `--allow-anonymous-write`: with no credentials configured, writes
    /// are open.
    pub anonymous_write: bool,
    /// `--auth-rules-file`: the rules in force, swapped on reload.
    rules: Option<Arc<RulesFile>>,
}

/// A refusal: 401 (with challenges) or 403, and why, in words that quote
/// nothing the client sent.
#[derive(Debug, PartialEq, Eq)]
pub struct Denied {
    pub status: u16,
    pub reason: &'static str,
    /// The `WWW-Authenticate` values (one per scheme) of a 401.
    pub challenges: Vec<String>,
}

impl Auth {
    /// Takes `user` and `password` as Basic credentials.
    pub fn set_basic(&mut self, user: &str, password: &str) {
        self.basic = Some((hash(user.as_bytes()), hash(password.as_bytes())));
    }

    /// Takes the tokens of a token file's text: one per line, blank lines
    /// and lines starting with `#` skipped, spaces around a token trimmed.
    /// A token is printable ASCII without spaces; an error names `file` and
    /// the line, never its text.
    pub fn add_tokens(&mut self, file: &Path, text: &str) -> Result<(), String> {
        let mut tokens = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let token = line.trim();
            if token.is_empty() || token.starts_with('#') {
                continue;
            }
            if !token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(format!(
                    "{} line {}: a token must be printable ASCII without spaces",
                    file.display(),
                    i + 1
                ));
            }
            tokens.push(hash(token.as_bytes()));
        }
        if tokens.is_empty() {
            return Err(format!("{} holds no token", file.display()));
        }
        self.tokens.extend(tokens);
        Ok(())
    }

    /// Takes the rules of `--auth-rules-file`.
    pub fn set_rules(&mut self, rules: Arc<RulesFile>) {
        self.rules = Some(rules);
    }

    /// The rules file, if one is configured.
    pub fn rules_file(&self) -> Option<&Arc<RulesFile>> {
        self.rules.as_ref()
    }

    /// Whether any credentials are configured (a rules file counts, even
    /// one that holds no rule now).
    pub fn has_credentials(&self) -> bool {
        self.basic.is_some() || !self.tokens.is_empty() || self.rules.is_some()
    }

    /// One line for the log: the schemes and what is open, no secret.
    pub fn describe(&self) -> String {
        let mut schemes = Vec::new();
        if self.basic.is_some() {
            schemes.push("Basic".to_owned());
        }
        if !self.tokens.is_empty() {
            let n = self.tokens.len();
            schemes.push(format!(
                "Bearer ({n} token{})",
                if n == 1 { "" } else { "s" }
            ));
        }
        if let Some(file) = &self.rules {
            schemes.push(format!(
                "rules of {} ({})",
                file.path().display(),
                file.current().describe()
            ));
        }
        if schemes.is_empty() {
            let writes = if self.anonymous_write {
                "writes open (--allow-anonymous-write)"
            } else {
                "writes refused (no credentials configured)"
            };
            return format!("no credentials; reads open, {writes}");
        }
        let reads = if self.anonymous_get {
            "reads open (--auth-anonymous-get)"
        } else {
            "reads need them"
        };
        format!("{}; writes need credentials, {reads}", schemes.join(", "))
    }

    /// Whether a request of `access` to `tenant` (a route's segments;
    /// `None` for a route of no tenant) with the `Authorization` header
    /// `header` (if any) may go on.
    pub fn check(
        &self,
        access: Access,
        tenant: Option<&[String]>,
        header: Option<&[u8]>,
    ) -> Result<(), Denied> {
        if !self.has_credentials() {
            return match access {
                Access::Write if !self.anonymous_write => Err(Denied {
                    status: 403,
                    reason: "writes are closed: this server has no credentials configured (start \
                             it with --basic-auth-user and --basic-auth-pass, or BASIC_AUTH_USER \
                             and BASIC_AUTH_PASS, or --auth-token-file or --auth-rules-file; or \
                             with --allow-anonymous-write)",
                    challenges: Vec::new(),
                }),
                _ => Ok(()),
            };
        }
        if access == Access::Read && self.anonymous_get {
            return Ok(());
        }
        let rules = self.rules.as_ref().map(|r| r.current());
        if rules.as_ref().is_some_and(|r| r.anonymous(access, tenant)) {
            return Ok(());
        }
        let Some(header) = header else {
            return Err(self.unauthorized("credentials required (an Authorization header)"));
        };
        let (scheme, secret) = self
            .presented(header)
            .map_err(|reason| self.unauthorized(reason))?;
        // The global credentials may do anything anywhere.
        let global = match scheme {
            Scheme::Basic => self.basic_matches(&secret),
            Scheme::Bearer => self.token_matches(&secret),
        };
        if global {
            return Ok(());
        }
        let verdict = rules.as_ref().map_or(Verdict::Unknown, |r| {
            r.verdict(scheme, &hash(&secret), access, tenant)
        });
        match verdict {
            Verdict::Allowed => Ok(()),
            Verdict::Forbidden => Err(Denied {
                status: 403,
                reason: match access {
                    Access::Read => "this credential may not read this tenant",
                    Access::Write => "this credential may not write to this tenant",
                },
                challenges: Vec::new(),
            }),
            Verdict::Unknown => Err(self.unauthorized(match scheme {
                Scheme::Basic => "wrong user or password",
                Scheme::Bearer => "unknown token",
            })),
        }
    }

    /// The scheme and the secret of an `Authorization` header's value (the
    /// decoded `USER:PASSWORD` of Basic, the token of Bearer), if it is
    /// well formed and of a scheme this server takes.
    fn presented(&self, header: &[u8]) -> Result<(Scheme, Vec<u8>), &'static str> {
        let text = std::str::from_utf8(header)
            .map_err(|_| "malformed Authorization header: not ASCII")?
            .trim();
        let (scheme, rest) = text.split_once(' ').unwrap_or((text, ""));
        let rest = rest.trim();
        if scheme.eq_ignore_ascii_case("basic") {
            if self.basic.is_none() && self.rules.is_none() {
                return Err("this server takes no Basic credentials (a Bearer token)");
            }
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(rest)
                .map_err(
                    |_| "malformed Authorization header: the Basic credentials are not base64",
                )?;
            if !decoded.contains(&b':') {
                return Err("malformed Authorization header: no ':' between user and password");
            }
            Ok((Scheme::Basic, decoded))
        } else if scheme.eq_ignore_ascii_case("bearer") {
            if self.tokens.is_empty() && self.rules.is_none() {
                return Err("this server takes no Bearer tokens (Basic credentials)");
            }
            if rest.is_empty() {
                return Err("malformed Authorization header: an empty Bearer token");
            }
            Ok((Scheme::Bearer, rest.as_bytes().to_vec()))
        } else {
            Err("malformed Authorization header: an unknown scheme (Basic or Bearer expected)")
        }
    }

    /// Whether `user_pass` (`USER:PASSWORD`) is the global Basic user's, in
    /// constant time.
    fn basic_matches(&self, user_pass: &[u8]) -> bool {
        let Some((user, password)) = &self.basic else {
            return false;
        };
        let colon = user_pass.iter().position(|&b| b == b':').unwrap_or(0);
        let user_ok = hash(&user_pass[..colon]).ct_eq(user);
        let password_ok = hash(&user_pass[colon + 1..]).ct_eq(password);
        bool::from(user_ok & password_ok)
    }

    /// Whether `token` is one of the global tokens, every one compared in
    /// constant time.
    fn token_matches(&self, token: &[u8]) -> bool {
        let presented = hash(token);
        let known = self
            .tokens
            .iter()
            .fold(Choice::from(0), |any, t| any | presented.ct_eq(t));
        bool::from(known)
    }

    fn unauthorized(&self, reason: &'static str) -> Denied {
        let mut challenges = Vec::new();
        if self.basic.is_some() || self.rules.is_some() {
            challenges.push(format!("Basic realm=\"{REALM}\""));
        }
        if !self.tokens.is_empty() || self.rules.is_some() {
            challenges.push(format!("Bearer realm=\"{REALM}\""));
        }
        Denied {
            status: 401,
            reason,
            challenges,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use base64::Engine as _;

    use super::{Access, Auth};
    use crate::access::{Scheme, credential_field};
    use crate::rules_file::RulesFile;

    fn basic(user_pass: &[u8]) -> Vec<u8> {
        let mut h = b"Basic ".to_vec();
        h.extend_from_slice(
            base64::engine::general_purpose::STANDARD
                .encode(user_pass)
                .as_bytes(),
        );
        h
    }

    fn both() -> Auth {
        let mut a = Auth::default();
        a.set_basic("ci", "s3cret:with colon");
        a.add_tokens(Path::new("tokens"), "# tokens\n\n  tok-one \ntok-two\n")
            .unwrap();
        a
    }

    #[test]
    fn right_credentials_pass() {
        let a = both();
        for header in [
            basic(b"ci:s3cret:with colon"),
            b"Bearer tok-one".to_vec(),
            b"bearer   tok-two ".to_vec(),
            b"BASIC Y2k6czNjcmV0OndpdGggY29sb24=".to_vec(),
        ] {
            let text = String::from_utf8_lossy(&header).into_owned();
            assert_eq!(
                a.check(Access::Write, None, Some(&header)),
                Ok(()),
                "{text}"
            );
            assert_eq!(a.check(Access::Read, None, Some(&header)), Ok(()), "{text}");
        }
    }

    #[test]
    fn wrong_missing_and_malformed_credentials_are_401_with_challenges() {
        let a = both();
        let cases: [(Option<Vec<u8>>, &str); 11] = [
            (None, "credentials required"),
            (Some(basic(b"ci:wrong")), "wrong user or password"),
            (Some(basic(b"other:s3cret:with colon")), "wrong user"),
            (Some(basic(b"ci:")), "wrong user"),
            (Some(b"Basic !!not base64!!".to_vec()), "not base64"),
            (Some(basic(b"no colon here")), "no ':'"),
            (Some(b"Bearer tok-three".to_vec()), "unknown token"),
            (Some(b"Bearer ".to_vec()), "empty Bearer token"),
            (Some(b"Digest tok-one".to_vec()), "unknown scheme"),
            (Some(b"tok-one".to_vec()), "unknown scheme"),
            (Some(b"Bearer \xff\xfe".to_vec()), "not ASCII"),
        ];
        for (header, says) in cases {
            let d = a.check(Access::Read, None, header.as_deref()).unwrap_err();
            assert_eq!(d.status, 401, "{says}");
            assert!(d.reason.contains(says), "{:?} says {says:?}", d.reason);
            assert_eq!(
                d.challenges,
                [
                    "Basic realm=\"chart_index\"",
                    "Bearer realm=\"chart_index\""
                ]
            );
        }
        // Only the scheme configured is taken.
        let mut tokens_only = Auth::default();
        tokens_only.add_tokens(Path::new("t"), "tok-one\n").unwrap();
        let d = tokens_only
            .check(Access::Write, None, Some(&basic(b"ci:s3cret:with colon")))
            .unwrap_err();
        assert!(d.reason.contains("no Basic"), "{}", d.reason);
        assert_eq!(d.challenges, ["Bearer realm=\"chart_index\""]);
    }

    #[test]
    fn what_is_open_without_credentials() {
        let mut a = both();
        assert_eq!(a.check(Access::Read, None, None).unwrap_err().status, 401);
        a.anonymous_get = true;
        assert_eq!(a.check(Access::Read, None, None), Ok(()));
        assert_eq!(a.check(Access::Write, None, None).unwrap_err().status, 401);

        // No credentials configured: reads open, writes closed unless asked.
        let mut none = Auth::default();
        assert_eq!(none.check(Access::Read, None, None), Ok(()));
        let d = none
            .check(Access::Write, None, Some(b"Bearer x"))
            .unwrap_err();
        assert_eq!(d.status, 403);
        assert!(d.reason.contains("--allow-anonymous-write"), "{}", d.reason);
        assert!(d.challenges.is_empty());
        none.anonymous_write = true;
        assert_eq!(none.check(Access::Write, None, None), Ok(()));
    }

    /// An `Auth` with the rules of `text` (no file read).
    fn with_rules(mut a: Auth, text: &str) -> Auth {
        let file = RulesFile::new(PathBuf::from("/etc/rules"), text).unwrap();
        a.set_rules(Arc::new(file));
        a
    }

    fn rules_text() -> String {
        let tok = credential_field(Scheme::Bearer, b"tok-org");
        let alice = credential_field(Scheme::Basic, b"alice:pw");
        format!("org write {tok}\norg/team read {alice}\npublic read anonymous\n")
    }

    fn t(path: &str) -> Vec<String> {
        path.split('/').map(str::to_owned).collect()
    }

    #[test]
    fn rules_scope_credentials_and_global_ones_reach_every_tenant() {
        let mut global = Auth::default();
        global.set_basic("ci", "s3cret");
        let a = with_rules(global, &rules_text());
        let check = |access, path: &str, header: Option<&[u8]>| {
            a.check(access, Some(&t(path)), header)
                .map_err(|d| (d.status, d.reason))
        };
        let ci = basic(b"ci:s3cret");
        let tok = b"Bearer tok-org".as_slice();
        let alice = basic(b"alice:pw");
        for path in ["org", "orgx", "other/deep", "public"] {
            assert_eq!(check(Access::Write, path, Some(&ci)), Ok(()), "{path}");
        }
        assert_eq!(a.check(Access::Write, None, Some(&ci)), Ok(()));

        assert_eq!(check(Access::Write, "org", Some(tok)), Ok(()));
        assert_eq!(check(Access::Write, "org/team/x", Some(tok)), Ok(()));
        assert_eq!(check(Access::Read, "org/team", Some(tok)), Ok(()));
        let not_write = Err((403, "this credential may not write to this tenant"));
        let not_read = Err((403, "this credential may not read this tenant"));
        assert_eq!(check(Access::Write, "orgx", Some(tok)), not_write);
        assert_eq!(check(Access::Read, "orgx", Some(tok)), not_read);
        assert_eq!(check(Access::Read, "", Some(tok)), not_read);
        assert_eq!(
            a.check(Access::Read, None, Some(tok)).unwrap_err().status,
            403
        );

        assert_eq!(check(Access::Read, "org/team", Some(&alice)), Ok(()));
        assert_eq!(check(Access::Write, "org/team", Some(&alice)), not_write);
        assert_eq!(check(Access::Read, "org", Some(&alice)), not_read);

        // Unknown credentials are 401s, with both challenges.
        for (header, says) in [
            (basic(b"alice:px"), "wrong user or password"),
            (basic(b"ci:pw"), "wrong user or password"),
            (b"Bearer tok-orgx".to_vec(), "unknown token"),
            (b"Bearer s3cret".to_vec(), "unknown token"),
        ] {
            let d = a
                .check(Access::Read, Some(&t("org")), Some(&header))
                .unwrap_err();
            assert_eq!((d.status, d.reason), (401, says));
            assert_eq!(d.challenges.len(), 2);
        }

        // `anonymous`: reads of its tenants, whatever is presented.
        assert_eq!(check(Access::Read, "public/x", None), Ok(()));
        assert_eq!(check(Access::Read, "public", Some(tok)), Ok(()));
        assert_eq!(check(Access::Read, "public", Some(b"Bearer wrong")), Ok(()));
        assert_eq!(check(Access::Write, "public", None).unwrap_err().0, 401);
        assert_eq!(check(Access::Write, "public", Some(tok)), not_write);
        assert_eq!(check(Access::Read, "org", None).unwrap_err().0, 401);
    }

    #[test]
    fn a_rules_file_takes_both_schemes_and_closes_what_it_does_not_open() {
        // No global credentials, and no rule: everything needs a credential
        // no one has (an empty file revokes everyone; it does not open
        // writes as "no credentials configured" would refuse them).
        let a = with_rules(Auth::default(), "# revoked\n");
        assert!(a.has_credentials());
        for access in [Access::Read, Access::Write] {
            let d = a.check(access, Some(&t("org")), None).unwrap_err();
            assert_eq!(
                (d.status, d.reason),
                (401, "credentials required (an Authorization header)")
            );
            assert_eq!(
                d.challenges,
                [
                    "Basic realm=\"chart_index\"",
                    "Bearer realm=\"chart_index\""
                ]
            );
            let d = a
                .check(access, Some(&t("org")), Some(&basic(b"alice:pw")))
                .unwrap_err();
            assert_eq!((d.status, d.reason), (401, "wrong user or password"));
        }
        // --auth-anonymous-get opens every read, the rules the rest.
        let mut a = with_rules(Auth::default(), &rules_text());
        a.anonymous_get = true;
        assert_eq!(a.check(Access::Read, Some(&t("orgx")), None), Ok(()));
        assert_eq!(a.check(Access::Read, None, None), Ok(()));
        let d = a.check(Access::Write, Some(&t("orgx")), Some(b"Bearer tok-org"));
        assert_eq!(d.unwrap_err().status, 403);
        assert_eq!(
            a.check(Access::Write, Some(&t("org")), Some(b"Bearer tok-org")),
            Ok(())
        );
        assert!(
            a.describe().starts_with(
                "rules of /etc/rules (3 rules: 1 Basic credential, 1 token, 1 anonymous read); \
                 writes need credentials, reads open"
            ),
            "{}",
            a.describe()
        );
    }

    #[test]
    fn token_files_are_checked_without_quoting_them() {
        let mut a = Auth::default();
        let e = a
            .add_tokens(Path::new("/etc/t"), "good\nbad token\n")
            .unwrap_err();
        assert_eq!(
            e,
            "/etc/t line 2: a token must be printable ASCII without spaces"
        );
        let e = a.add_tokens(Path::new("/etc/t"), "# none\n\n").unwrap_err();
        assert_eq!(e, "/etc/t holds no token");
        assert!(!a.describe().contains("good"));
    }
}
