//! Who may read and write: HTTP Basic credentials (one user, as
//! chartmuseum's `--basic-auth-user`/`--basic-auth-pass`) and static
//! Bearer tokens (`--auth-token-file`), checked apart from the HTTP layer.
//!
//! - With credentials configured, every route but `/health` needs them;
//!   `--auth-anonymous-get` opens the reads (GET, HEAD). A request without
//!   them, or with wrong or malformed ones, is a 401 with a
//!   `WWW-Authenticate` challenge per scheme the server takes
//!   (`Basic realm="chart_index"`, `Bearer realm="chart_index"`).
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

use base64::Engine as _;
use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

/// The realm of the challenges.
pub const REALM: &str = "chart_index";

type Hash = [u8; 32];

fn hash(bytes: &[u8]) -> Hash {
    Sha256::digest(bytes).into()
}

/// Whether a request reads (GET, HEAD) or writes (POST, DELETE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

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

    /// Whether any credentials are configured.
    pub fn has_credentials(&self) -> bool {
        self.basic.is_some() || !self.tokens.is_empty()
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

    /// Whether a request of `access` with the `Authorization` header
    /// `header` (if any) may go on.
    pub fn check(&self, access: Access, header: Option<&[u8]>) -> Result<(), Denied> {
        if !self.has_credentials() {
            return match access {
                Access::Write if !self.anonymous_write => Err(Denied {
                    status: 403,
                    reason: "writes are closed: this server has no credentials configured (start \
                             it with --basic-auth-user and --basic-auth-pass, or BASIC_AUTH_USER \
                             and BASIC_AUTH_PASS, or --auth-token-file; or with \
                             --allow-anonymous-write)",
                    challenges: Vec::new(),
                }),
                _ => Ok(()),
            };
        }
        if access == Access::Read && self.anonymous_get {
            return Ok(());
        }
        let Some(header) = header else {
            return Err(self.unauthorized("credentials required (an Authorization header)"));
        };
        self.verify(header)
            .map_err(|reason| self.unauthorized(reason))
    }

    /// Checks an `Authorization` header's value against the credentials.
    fn verify(&self, header: &[u8]) -> Result<(), &'static str> {
        let text = std::str::from_utf8(header)
            .map_err(|_| "malformed Authorization header: not ASCII")?
            .trim();
        let (scheme, rest) = text.split_once(' ').unwrap_or((text, ""));
        let rest = rest.trim();
        if scheme.eq_ignore_ascii_case("basic") {
            let Some((user, password)) = &self.basic else {
                return Err("this server takes no Basic credentials (a Bearer token)");
            };
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(rest)
                .map_err(
                    |_| "malformed Authorization header: the Basic credentials are not base64",
                )?;
            let colon = decoded
                .iter()
                .position(|&b| b == b':')
                .ok_or("malformed Authorization header: no ':' between user and password")?;
            let user_ok = hash(&decoded[..colon]).ct_eq(user);
            let password_ok = hash(&decoded[colon + 1..]).ct_eq(password);
            if bool::from(user_ok & password_ok) {
                Ok(())
            } else {
                Err("wrong user or password")
            }
        } else if scheme.eq_ignore_ascii_case("bearer") {
            if self.tokens.is_empty() {
                return Err("this server takes no Bearer tokens (Basic credentials)");
            }
            if rest.is_empty() {
                return Err("malformed Authorization header: an empty Bearer token");
            }
            let presented = hash(rest.as_bytes());
            let known = self
                .tokens
                .iter()
                .fold(Choice::from(0), |any, t| any | presented.ct_eq(t));
            if bool::from(known) {
                Ok(())
            } else {
                Err("unknown token")
            }
        } else {
            Err("malformed Authorization header: an unknown scheme (Basic or Bearer expected)")
        }
    }

    fn unauthorized(&self, reason: &'static str) -> Denied {
        let mut challenges = Vec::new();
        if self.basic.is_some() {
            challenges.push(format!("Basic realm=\"{REALM}\""));
        }
        if !self.tokens.is_empty() {
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
    use std::path::Path;

    use base64::Engine as _;

    use super::{Access, Auth};

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
            assert_eq!(a.check(Access::Write, Some(&header)), Ok(()), "{text}");
            assert_eq!(a.check(Access::Read, Some(&header)), Ok(()), "{text}");
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
            let d = a.check(Access::Read, header.as_deref()).unwrap_err();
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
            .check(Access::Write, Some(&basic(b"ci:s3cret:with colon")))
            .unwrap_err();
        assert!(d.reason.contains("no Basic"), "{}", d.reason);
        assert_eq!(d.challenges, ["Bearer realm=\"chart_index\""]);
    }

    #[test]
    fn what_is_open_without_credentials() {
        let mut a = both();
        assert_eq!(a.check(Access::Read, None).unwrap_err().status, 401);
        a.anonymous_get = true;
        assert_eq!(a.check(Access::Read, None), Ok(()));
        assert_eq!(a.check(Access::Write, None).unwrap_err().status, 401);

        // No credentials configured: reads open, writes closed unless asked.
        let mut none = Auth::default();
        assert_eq!(none.check(Access::Read, None), Ok(()));
        let d = none.check(Access::Write, Some(b"Bearer x")).unwrap_err();
        assert_eq!(d.status, 403);
        assert!(d.reason.contains("--allow-anonymous-write"), "{}", d.reason);
        assert!(d.challenges.is_empty());
        none.anonymous_write = true;
        assert_eq!(none.check(Access::Write, None), Ok(()));
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
