//! Access rules per tenant (`--auth-rules-file`): which credential may
//! read or write which tenants. Pure: the file's text in, decisions out;
//! reading and reloading the file is the `rules_file` module's.
//!
//! # The format
//!
//! One rule per line, three fields separated by spaces or tabs:
//!
//! ```text
//! # PREFIX   ACCESS  CREDENTIAL
//! org        write   bearer:sha256:1a7674eb4ee78df7e1ac439a93c3fa8e3c945784d4dec9fd8e3011738b2f1d62
//! org/team   read    basic:sha256:ba87b66806fd2d0b6f5e17a98b595f34faee071778aa817fb271d06214ed24f9
//! public     read    anonymous
//! /          read    bearer:sha256:21745eb42f7fc7681d9dc8f3257d3dd0b299eee25917cd69f9d63c25ff6f0760   # mirror
//! ```
//!
//! - PREFIX: a tenant path (`org`, `org/team`; a leading or trailing `/`
//!   is taken off), matched by whole path segments: `org` covers `org`,
//!   `org/team` and any tenant below, never `orgx` nor the storage root's
//!   own tenant; `/` or `*` covers every tenant, the root's too.
//! - ACCESS: `read` (GET, HEAD) or `write` (uploads and deletes, and
//!   reads: `write` includes `read`).
//! - CREDENTIAL: `bearer:sha256:HEX`, the sha256 of a Bearer token;
//!   `basic:sha256:HEX`, the sha256 of `USER:PASSWORD` as Basic
//!   authentication sends them (the user, a colon, the password); or
//!   `anonymous` (`read` only): no credentials needed. HEX is 64 hex
//!   digits, either case. The file holds digests only, no secret:
//!   `chart-index hash-credential bearer|basic` prints the field for a
//!   secret read from stdin, as does `printf '%s' "$TOKEN" | sha256sum`.
//! - `#` starts a comment (a whole line, or after the fields); blank
//!   lines are skipped.
//!
//! A credential's rights are the union of its lines. A file may hold no
//! rule at all (then no credential of it is known: revoking everyone is an
//! empty file). An error names the line and the field, and never quotes
//! a field (a token pasted by mistake where its digest belongs is not
//! printed back).

use std::fmt;

use sha2::{Digest, Sha256};
use subtle::{ConditionallySelectable, ConstantTimeEq};

use crate::storage::safe_name;

/// A sha256 digest.
pub type Hash = [u8; 32];

/// The sha256 of `bytes`.
pub fn hash(bytes: &[u8]) -> Hash {
    Sha256::digest(bytes).into()
}

/// How a request presents a credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// `Authorization: Basic`: the digest of `USER:PASSWORD`.
    Basic,
    /// `Authorization: Bearer`: the digest of the token.
    Bearer,
}

impl Scheme {
    /// The name in the rules file (`basic`, `bearer`).
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Basic => "basic",
            Scheme::Bearer => "bearer",
        }
    }
}

/// The CREDENTIAL field for the secret `secret` of `scheme` (a token, or
/// `USER:PASSWORD`): `bearer:sha256:HEX`, `basic:sha256:HEX`.
pub fn credential_field(scheme: Scheme, secret: &[u8]) -> String {
    let hex: String = hash(secret).iter().map(|b| format!("{b:02x}")).collect();
    format!("{}:sha256:{hex}", scheme.name())
}

/// Whether a request reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// The tenants a rule covers.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Prefix {
    /// `/` or `*`: every tenant.
    All,
    /// A tenant path's segments: that tenant and those below it.
    Path(Vec<String>),
}

impl Prefix {
    /// Whether it covers `tenant` (a route's segments; `None`: a route of
    /// no tenant, which only `All` covers).
    fn covers(&self, tenant: Option<&[String]>) -> bool {
        match (self, tenant) {
            (Prefix::All, _) => true,
            (Prefix::Path(_), None) => false,
            (Prefix::Path(p), Some(t)) => t.len() >= p.len() && t[..p.len()] == p[..],
        }
    }
}

/// One line's grant.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Grant {
    prefix: Prefix,
    write: bool,
}

impl Grant {
    fn allows(&self, access: Access, tenant: Option<&[String]>) -> bool {
        (self.write || access == Access::Read) && self.prefix.covers(tenant)
    }
}

/// A credential of the file, with the grants of each of its lines.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Known {
    scheme: Scheme,
    digest: Hash,
    grants: Vec<Grant>,
}

/// The rules of a file, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessRules {
    /// Each credential once.
    known: Vec<Known>,
    /// What needs no credential (`anonymous`, read only).
    anonymous: Vec<Grant>,
    /// The number of rule lines.
    lines: usize,
}

/// What the rules say of a presented credential.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Known, and it may.
    Allowed,
    /// Known, but not for this (403).
    Forbidden,
    /// Not in the file (401).
    Unknown,
}

/// A line of the file that cannot be used: its number and what is wrong,
/// quoting nothing of it.
#[derive(Debug, PartialEq, Eq)]
pub struct RulesError {
    pub line: usize,
    pub what: &'static str,
}

impl fmt::Display for RulesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

impl AccessRules {
    /// Parses a rules file's text (see the module's docs).
    pub fn parse(text: &str) -> Result<AccessRules, RulesError> {
        let mut rules = AccessRules::default();
        for (i, line) in text.lines().enumerate() {
            let at = |what| RulesError { line: i + 1, what };
            let mut fields = line.split_whitespace().take_while(|f| !f.starts_with('#'));
            let Some(prefix) = fields.next() else {
                continue;
            };
            let (Some(access), Some(credential)) = (fields.next(), fields.next()) else {
                return Err(at(
                    "a rule is three fields: PREFIX read|write CREDENTIAL (bearer:sha256:HEX, \
                     basic:sha256:HEX or anonymous)",
                ));
            };
            if fields.next().is_some() {
                return Err(at(
                    "more than three fields (a comment after a rule starts with ` #`)",
                ));
            }
            let prefix = parse_prefix(prefix).ok_or(at(
                "the prefix is neither a tenant path (segments of letters, digits, `.`, `_`, \
                 `-`, `+`, separated by `/`) nor `/` or `*` (every tenant)",
            ))?;
            let write = match access {
                "read" => false,
                "write" => true,
                _ => return Err(at("the access is neither `read` nor `write`")),
            };
            let grant = Grant { prefix, write };
            if credential == "anonymous" {
                if write {
                    return Err(at(
                        "`anonymous` may only read (writes need a credential, or a server \
                         without any run with --allow-anonymous-write)",
                    ));
                }
                rules.anonymous.push(grant);
            } else {
                let (scheme, digest) = parse_credential(credential).ok_or(at(
                    "the credential is none of bearer:sha256:HEX, basic:sha256:HEX (64 hex \
                     digits: the sha256 of the token, or of USER:PASSWORD) or anonymous; a \
                     secret never goes in this file: `chart-index hash-credential` prints \
                     its digest",
                ))?;
                match rules
                    .known
                    .iter_mut()
                    .find(|k| k.scheme == scheme && k.digest == digest)
                {
                    Some(k) => k.grants.push(grant),
                    None => rules.known.push(Known {
                        scheme,
                        digest,
                        grants: vec![grant],
                    }),
                }
            }
            rules.lines += 1;
        }
        Ok(rules)
    }

    /// Whether a request of `access` to `tenant` needs no credential.
    pub fn anonymous(&self, access: Access, tenant: Option<&[String]>) -> bool {
        self.anonymous.iter().any(|g| g.allows(access, tenant))
    }

    /// What the rules say of the credential whose digest is `digest`
    /// (presented as `scheme`) for `access` to `tenant`. Every credential
    /// of the scheme is compared, in constant time: the time taken says
    /// nothing of how much of a digest matched, nor which.
    pub fn verdict(
        &self,
        scheme: Scheme,
        digest: &Hash,
        access: Access,
        tenant: Option<&[String]>,
    ) -> Verdict {
        // The index of the match, plus one (0: none).
        let mut found = 0u64;
        for (i, k) in (1u64..).zip(&self.known) {
            let same = digest.ct_eq(&k.digest) & u8::from(k.scheme == scheme).ct_eq(&1);
            found.conditional_assign(&i, same);
        }
        let Some(known) = usize::try_from(found)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| self.known.get(i))
        else {
            return Verdict::Unknown;
        };
        if known.grants.iter().any(|g| g.allows(access, tenant)) {
            Verdict::Allowed
        } else {
            Verdict::Forbidden
        }
    }

    /// One phrase for the log: how many rules and credentials, no digest.
    pub fn describe(&self) -> String {
        let count = |scheme| self.known.iter().filter(|k| k.scheme == scheme).count();
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        format!(
            "{}: {}, {}, {}",
            plural(self.lines, "rule", "rules"),
            plural(
                count(Scheme::Basic),
                "Basic credential",
                "Basic credentials"
            ),
            plural(count(Scheme::Bearer), "token", "tokens"),
            plural(self.anonymous.len(), "anonymous read", "anonymous reads"),
        )
    }
}

/// A PREFIX field: `/` or `*`, or a tenant path of plain names.
fn parse_prefix(field: &str) -> Option<Prefix> {
    if field == "*" || field == "/" {
        return Some(Prefix::All);
    }
    let path = field.strip_prefix('/').unwrap_or(field);
    let path = path.strip_suffix('/').unwrap_or(path);
    let segments: Vec<String> = path.split('/').map(str::to_owned).collect();
    segments
        .iter()
        .all(|s| safe_name(s))
        .then_some(Prefix::Path(segments))
}

/// A CREDENTIAL field other than `anonymous`.
fn parse_credential(field: &str) -> Option<(Scheme, Hash)> {
    let (scheme, hex) = if let Some(hex) = field.strip_prefix("bearer:sha256:") {
        (Scheme::Bearer, hex)
    } else {
        (Scheme::Basic, field.strip_prefix("basic:sha256:")?)
    };
    if hex.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (byte, pair) in digest.iter_mut().zip(hex.as_bytes().chunks(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        if !pair.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some((scheme, digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(path: &str) -> Vec<String> {
        if path.is_empty() {
            Vec::new()
        } else {
            path.split('/').map(str::to_owned).collect()
        }
    }

    /// The verdict for the token `token` on `path`.
    fn token(rules: &AccessRules, token: &str, access: Access, path: &str) -> Verdict {
        let t = tenant(path);
        rules.verdict(Scheme::Bearer, &hash(token.as_bytes()), access, Some(&t))
    }

    fn rules(lines: &[(&str, &str, &str)]) -> AccessRules {
        let text: String = lines
            .iter()
            .map(|(prefix, access, secret)| {
                let credential = match secret.split_once(' ') {
                    Some(("basic", up)) => credential_field(Scheme::Basic, up.as_bytes()),
                    _ if *secret == "anonymous" => "anonymous".into(),
                    _ => credential_field(Scheme::Bearer, secret.as_bytes()),
                };
                format!("{prefix} {access} {credential}\n")
            })
            .collect();
        AccessRules::parse(&text).unwrap()
    }

    use Access::{Read, Write};
    use Verdict::{Allowed, Forbidden, Unknown};

    #[test]
    fn prefixes_match_whole_segments() {
        let r = rules(&[("org", "write", "t-org"), ("a/b", "read", "t-ab")]);
        for (path, verdict) in [
            ("org", Allowed),
            ("org/team", Allowed),
            ("org/team/x/y", Allowed),
            ("orgx", Forbidden),
            ("or", Forbidden),
            ("org-team", Forbidden),
            ("xorg", Forbidden),
            ("other/org", Forbidden),
            ("", Forbidden),
        ] {
            assert_eq!(
                token(&r, "t-org", Write, path),
                verdict,
                "t-org on {path:?}"
            );
            assert_eq!(token(&r, "t-org", Read, path), verdict, "t-org on {path:?}");
        }
        for (path, verdict) in [
            ("a/b", Allowed),
            ("a/b/c", Allowed),
            ("a", Forbidden),
            ("a/bc", Forbidden),
            ("a/c", Forbidden),
            ("b", Forbidden),
        ] {
            assert_eq!(token(&r, "t-ab", Read, path), verdict, "t-ab on {path:?}");
        }
        // No tenant (a route of none): only an every-tenant rule covers it.
        let h = hash(b"t-org");
        assert_eq!(r.verdict(Scheme::Bearer, &h, Read, None), Forbidden);
    }

    #[test]
    fn write_includes_read_and_read_is_only_read() {
        let r = rules(&[("org", "read", "reader"), ("org/team", "write", "writer")]);
        assert_eq!(token(&r, "reader", Read, "org/team"), Allowed);
        assert_eq!(token(&r, "reader", Write, "org/team"), Forbidden);
        assert_eq!(token(&r, "reader", Write, "org"), Forbidden);
        assert_eq!(token(&r, "writer", Read, "org/team"), Allowed);
        assert_eq!(token(&r, "writer", Write, "org/team/x"), Allowed);
        // Nested tenants: a sub-tenant's credential has nothing above it.
        assert_eq!(token(&r, "writer", Read, "org"), Forbidden);
    }

    #[test]
    fn a_credentials_rights_are_the_union_of_its_lines() {
        let r = rules(&[
            ("org", "read", "t"),
            ("other", "write", "t"),
            ("org/team", "write", "t"),
        ]);
        assert_eq!(token(&r, "t", Write, "other/x"), Allowed);
        assert_eq!(token(&r, "t", Write, "org/team"), Allowed);
        assert_eq!(token(&r, "t", Write, "org"), Forbidden);
        assert_eq!(token(&r, "t", Read, "org"), Allowed);
        assert_eq!(
            r.describe(),
            "3 rules: 0 Basic credentials, 1 token, 0 anonymous reads"
        );
    }

    #[test]
    fn every_tenant_and_unknown_credentials() {
        for all in ["/", "*"] {
            let r = rules(&[(all, "read", "mirror")]);
            for path in ["", "org", "org/team", "x"] {
                assert_eq!(token(&r, "mirror", Read, path), Allowed, "{all} {path:?}");
                assert_eq!(
                    token(&r, "mirror", Write, path),
                    Forbidden,
                    "{all} {path:?}"
                );
            }
            assert_eq!(r.verdict(Scheme::Bearer, &hash(b"m"), Read, None), Unknown);
            let h = hash(b"mirror");
            assert_eq!(r.verdict(Scheme::Bearer, &h, Read, None), Allowed);
            assert_eq!(token(&r, "mirrorx", Read, "org"), Unknown);
            assert_eq!(token(&r, "", Read, "org"), Unknown);
        }
    }

    #[test]
    fn basic_and_bearer_are_told_apart() {
        let r = rules(&[
            ("org", "write", "basic alice:pw"),
            ("org", "read", "alice:pw"),
        ]);
        let t = tenant("org");
        let alice = hash(b"alice:pw");
        // The same secret as a token only reads.
        assert_eq!(r.verdict(Scheme::Basic, &alice, Write, Some(&t)), Allowed);
        assert_eq!(
            r.verdict(Scheme::Bearer, &alice, Write, Some(&t)),
            Forbidden
        );
        assert_eq!(r.verdict(Scheme::Bearer, &alice, Read, Some(&t)), Allowed);
        assert_eq!(
            r.verdict(Scheme::Basic, &hash(b"alice:px"), Read, Some(&t)),
            Unknown
        );
        let basic_only = rules(&[("org", "write", "basic bob:pw")]);
        let bob = hash(b"bob:pw");
        assert_eq!(
            basic_only.verdict(Scheme::Bearer, &bob, Read, Some(&t)),
            Unknown
        );
    }

    #[test]
    fn anonymous_reads() {
        let r = rules(&[("public", "read", "anonymous"), ("org", "write", "t")]);
        let t = |p| tenant(p);
        assert!(r.anonymous(Read, Some(&t("public"))));
        assert!(r.anonymous(Read, Some(&t("public/x"))));
        assert!(!r.anonymous(Write, Some(&t("public"))));
        assert!(!r.anonymous(Read, Some(&t("publicx"))));
        assert!(!r.anonymous(Read, Some(&t("org"))));
        assert!(!r.anonymous(Read, None));
        assert!(!AccessRules::default().anonymous(Read, Some(&t("public"))));
    }

    #[test]
    fn the_format() {
        // As `printf '%s' tok | sha256sum` and `printf '%s' alice:pw | sha256sum` print them.
        let token = credential_field(Scheme::Bearer, b"tok");
        assert_eq!(
            token,
            "bearer:sha256:1a7674eb4ee78df7e1ac439a93c3fa8e3c945784d4dec9fd8e3011738b2f1d62"
        );
        assert_eq!(
            credential_field(Scheme::Basic, b"alice:pw"),
            "basic:sha256:ba87b66806fd2d0b6f5e17a98b595f34faee071778aa817fb271d06214ed24f9"
        );
        let upper = token.replace("bearer:sha256:", "").to_uppercase();
        let text = format!(
            "# comment\n\n   \t\n/org/team/\tread   {token}   # a comment after\n\
             org/team write bearer:sha256:{upper}\n*  read anonymous #\n"
        );
        let r = AccessRules::parse(&text).unwrap();
        assert_eq!(r.lines, 3);
        assert_eq!(
            r.known.len(),
            1,
            "one credential, whatever the case of its digest"
        );
        assert_eq!(
            r.known[0].grants,
            [
                Grant {
                    prefix: Prefix::Path(tenant("org/team")),
                    write: false
                },
                Grant {
                    prefix: Prefix::Path(tenant("org/team")),
                    write: true
                }
            ]
        );
        assert_eq!(
            r.anonymous,
            [Grant {
                prefix: Prefix::All,
                write: false
            }]
        );
        // Nothing but comments: no rule, nothing known.
        let none = AccessRules::parse("# revoked\n\n").unwrap();
        assert_eq!(none, AccessRules::default());
        assert_eq!(
            none.describe(),
            "0 rules: 0 Basic credentials, 0 tokens, 0 anonymous reads"
        );
    }

    #[test]
    fn the_readmes_example_parses() {
        let readme = include_str!("../README.md");
        let part = &readme[readme.find("**Access rules per tenant**").unwrap()..];
        let start = part.find("```text\n").unwrap() + "```text\n".len();
        let example: String = part[start..start + part[start..].find("```").unwrap()]
            .lines()
            .map(|l| format!("{}\n", l.trim_start()))
            .collect();
        let r = AccessRules::parse(&example).unwrap();
        assert_eq!(
            r.describe(),
            "4 rules: 1 Basic credential, 2 tokens, 1 anonymous read"
        );
        assert_eq!(token(&r, "tok", Write, "org/x"), Allowed);
        assert_eq!(token(&r, "tok-Mirror", Read, ""), Allowed);
        let alice = hash(b"alice:pw");
        let team = tenant("org/team");
        assert_eq!(r.verdict(Scheme::Basic, &alice, Read, Some(&team)), Allowed);
    }

    #[test]
    fn errors_name_the_line_and_quote_nothing() {
        let ok = credential_field(Scheme::Basic, b"u:p");
        let cases = [
            ("org read", "three fields"),
            ("org", "three fields"),
            (&format!("org read {ok} extra"), "more than three"),
            (&format!("org readwrite {ok}"), "neither `read` nor `write`"),
            (&format!("org READ {ok}"), "neither `read` nor `write`"),
            (&format!("../etc read {ok}"), "the prefix"),
            (&format!("org//team read {ok}"), "the prefix"),
            (&format!("org/.hidden read {ok}"), "the prefix"),
            (&format!("or*g read {ok}"), "the prefix"),
            (&format!("// read {ok}"), "the prefix"),
            ("org read s3cret-token-value", "the credential"),
            ("org read bearer:s3cret-token-value", "the credential"),
            ("org read bearer:sha256:abc", "the credential"),
            (
                &format!("org read {}", ok.replace("basic:", "BASIC:")),
                "the credential",
            ),
            (
                &format!("org read {}g", &ok[..ok.len() - 1]),
                "the credential",
            ),
            (&format!("org read {ok}0"), "the credential"),
            ("org read token:sha256:00", "the credential"),
            ("org write anonymous", "`anonymous` may only read"),
        ];
        for (line, says) in cases {
            let e =
                AccessRules::parse(&format!("# first\n*  read anonymous\n{line}\n")).unwrap_err();
            assert_eq!(e.line, 3, "{line}");
            let message = e.to_string();
            assert!(message.starts_with("line 3: "), "{message}");
            assert!(message.contains(says), "{line}: {message:?} says {says:?}");
            assert!(!message.contains("s3cret"), "{message}");
        }
    }
}
