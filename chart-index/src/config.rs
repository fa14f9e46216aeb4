//! The server's configuration: flags, environment variables and an
//! optional YAML file, read into one [`Settings`] and checked into a
//! [`Config`].
//!
//! Every setting has a long flag, an environment variable (chartmuseum's
//! name where it has one: `STORAGE_LOCAL_ROOTDIR`, `PORT`, `DEPTH`,
//! `BASIC_AUTH_USER`, ...) and a key in the file named by `--config`
//! (the flag's name without `--`). A flag wins over its variable, which
//! wins over the file, which wins over the default. `chart-index --help`
//! lists each with its variable and default.
//!
//! Errors name where the bad value came from: the flag, the variable (a
//! value clap refuses from the environment is said to come from it), or
//! the file's line and column (serde's, for a value of the wrong type, an
//! unknown key, or one of the checks below, which run while the file is
//! read).

use std::fmt;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use serde::Deserialize;
use specwatch::Backend;

use crate::access::Scheme;
use crate::api::Policy;
use crate::auth::Auth;
use crate::logging::LogSettings;
use crate::proxy::{self, Links};
use crate::routes::Rules;
use crate::rules_file::RulesFile;
use crate::tls::TlsFiles;

/// The listen address when neither `--listen` nor `--port` says.
pub const DEFAULT_HOST: &str = "0.0.0.0";
/// The port when neither `--listen` nor `--port` says.
pub const DEFAULT_PORT: u16 = 8080;
/// The poll interval when `--poll-interval` gives none.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(1000);
/// How long an upload or delete waits for the index to show it, when
/// `--sync-timeout` gives no time.
pub const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest upload when neither `--max-upload-mb` nor
/// `--max-upload-size` says, in MiB.
pub const DEFAULT_MAX_UPLOAD_MB: u64 = 16;

/// The command line: `--config` and the settings.
#[derive(Parser, Debug)]
#[command(
    name = "chart-index",
    version,
    disable_help_subcommand = true,
    about = "A Helm chart repository server (chartmuseum's API) whose index follows its \
             storage directory through specwatch change batches.",
    after_help = "Each setting is also read from the environment variable shown, and from \
                  the --config file (its key is the flag's name without --). A flag wins \
                  over its variable, which wins over the file."
)]
struct Cli {
    /// A YAML file of settings: a mapping whose keys are the flags' long
    /// names without `--` (`storage: /srv/charts`, `port: 8080`,
    /// `allow-overwrite: true`, `auth-token-file: [/etc/tokens]`).
    #[arg(long, env = "CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    settings: Settings,
    #[command(subcommand)]
    command: Option<Tool>,
}

/// What the binary does instead of serving.
#[derive(Subcommand, Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    /// Prints the CREDENTIAL field of an --auth-rules-file rule for a
    /// secret read from stdin (a token, or USER:PASSWORD for Basic), e.g.
    /// `printf '%s' "$TOKEN" | chart-index hash-credential bearer`.
    HashCredential {
        /// How clients send it: `bearer` (a token) or `basic` (user and
        /// password).
        #[arg(value_enum)]
        scheme: SchemeArg,
    },
}

/// `hash-credential`'s scheme.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum SchemeArg {
    Bearer,
    Basic,
}

/// Every setting, each `None` where it was not given: what the command
/// line and the environment gave (clap), or what the `--config` file gave
/// (serde); [`Settings::or`] layers them.
#[derive(Args, Deserialize, Debug, Default, Clone, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Settings {
    /// The storage directory: tenants are its subdirectories, charts the
    /// `*.tgz` files in them (created if missing).
    #[arg(
        long,
        visible_alias = "storage-local-rootdir",
        env = "STORAGE_LOCAL_ROOTDIR",
        value_name = "DIR"
    )]
    #[serde(alias = "storage-local-rootdir")]
    pub storage: Option<PathBuf>,
    /// The address to listen on, `HOST:PORT` (port 0: any free one); wins
    /// over --listen-host and --port.
    #[arg(long, env = "LISTEN", value_name = "HOST:PORT")]
    pub listen: Option<String>,
    /// The host (address) to listen on [default: 0.0.0.0].
    #[arg(long, env = "LISTEN_HOST", value_name = "HOST")]
    pub listen_host: Option<String>,
    /// The port to listen on [default: 8080].
    #[arg(long, env = "PORT", value_name = "PORT")]
    pub port: Option<u16>,
    /// How the watch learns of changes: auto (the OS's events, but polling
    /// on network and FUSE file systems), native, portable, or poll
    /// [default: auto].
    #[arg(long, env = "WATCH_BACKEND", value_name = "auto|native|portable|poll")]
    pub backend: Option<BackendChoice>,
    /// How often polled storage is looked at, in milliseconds
    /// [default: 1000].
    #[arg(long, env = "POLL_INTERVAL", value_name = "MS")]
    pub poll_interval: Option<Millis>,
    /// The largest package accepted by an upload, in MiB [default: 16].
    #[arg(
        long,
        env = "MAX_UPLOAD_MB",
        value_name = "MIB",
        conflicts_with = "max_upload_size"
    )]
    pub max_upload_mb: Option<u64>,
    /// The largest package accepted by an upload, in bytes (chartmuseum's
    /// flag; instead of --max-upload-mb).
    #[arg(long, env = "MAX_UPLOAD_SIZE", value_name = "BYTES")]
    pub max_upload_size: Option<u64>,
    /// How long an upload or a delete waits for the index to show it, in
    /// milliseconds (0: it answers at once) [default: 10000].
    #[arg(long, env = "SYNC_TIMEOUT", value_name = "MS")]
    pub sync_timeout: Option<u64>,
    /// A tenant is exactly this many path segments (0: the storage
    /// directory alone); without it, any number.
    #[arg(long, env = "DEPTH", value_name = "N")]
    pub depth: Option<usize>,
    /// `?force` on an upload replaces an existing version.
    #[arg(long, env = "ALLOW_OVERWRITE", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = bool_value())]
    pub allow_overwrite: Option<bool>,
    /// DELETE is not served (404, as chartmuseum answers).
    #[arg(long, env = "DISABLE_DELETE", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = bool_value())]
    pub disable_delete: Option<bool>,
    /// The user of Basic authentication (with --basic-auth-pass).
    #[arg(long, env = "BASIC_AUTH_USER", value_name = "USER")]
    pub basic_auth_user: Option<String>,
    /// The password of Basic authentication (with --basic-auth-user);
    /// better given through its variable than on the command line.
    #[arg(
        long,
        env = "BASIC_AUTH_PASS",
        value_name = "PASSWORD",
        hide_env_values = true
    )]
    pub basic_auth_pass: Option<String>,
    /// A file of Bearer tokens, one per line (`#` comments and blank lines
    /// skipped); repeatable (the variable: paths separated by commas).
    #[arg(
        long,
        env = "AUTH_TOKEN_FILE",
        value_name = "FILE",
        value_delimiter = ','
    )]
    pub auth_token_file: Option<Vec<PathBuf>>,
    /// A file of access rules per tenant, `PREFIX read|write CREDENTIAL`
    /// per line (the credential a sha256 digest: see `chart-index
    /// hash-credential --help`); reloaded when it changes.
    #[arg(long, env = "AUTH_RULES_FILE", value_name = "FILE")]
    pub auth_rules_file: Option<PathBuf>,
    /// Reads (GET, HEAD) need no credentials.
    #[arg(long, env = "AUTH_ANONYMOUS_GET", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = bool_value())]
    pub auth_anonymous_get: Option<bool>,
    /// With no credentials configured, writes are open to anyone (cannot
    /// go with credentials).
    #[arg(long, env = "ALLOW_ANONYMOUS_WRITE", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = bool_value())]
    pub allow_anonymous_write: Option<bool>,
    /// Where the restart cache is kept (not inside the storage directory;
    /// created if missing); without it, a start reads every package.
    #[arg(long, env = "CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Log lines as JSON objects, one per line (else human-readable).
    #[arg(long, env = "LOG_JSON", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = bool_value())]
    pub log_json: Option<bool>,
    /// Log debug messages too (each change batch the watch delivers, with
    /// its first paths).
    #[arg(long, env = "DEBUG", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = bool_value())]
    pub debug: Option<bool>,
    /// Log the probes' requests (/health, /ready) too.
    #[arg(long, env = "LOG_HEALTH", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = bool_value())]
    pub log_health: Option<bool>,
    /// Serve Prometheus metrics at /metrics (open to anyone, as the probes).
    #[arg(long, env = "ENABLE_METRICS", value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true", value_parser = bool_value())]
    pub enable_metrics: Option<bool>,
    /// The absolute URL the index's package URLs start with
    /// (`https://charts.example.com`): each is URL[/CONTEXT-PATH][/TENANT]/charts/FILE;
    /// without it, charts/FILE (relative to the index).
    #[arg(long, env = "CHART_URL", value_name = "URL")]
    pub chart_url: Option<String>,
    /// Serve everything (the probes and /metrics too) under this path
    /// (`/charts`), as behind a reverse proxy that forwards it whole.
    #[arg(long, env = "CONTEXT_PATH", value_name = "PATH")]
    pub context_path: Option<String>,
    /// Serve HTTPS with this certificate chain (PEM; with --tls-key);
    /// reloaded when it changes.
    #[arg(long, env = "TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
}

/// `true`/`false` (and `1`/`0`, `yes`/`no`, `on`/`off`) for a boolean
/// flag's value or variable.
fn bool_value() -> clap::builder::BoolishValueParser {
    clap::builder::BoolishValueParser::new()
}

impl Settings {
    /// Each setting from `self`, else from `other`.
    pub fn or(self, other: Settings) -> Settings {
        Settings {
            storage: self.storage.or(other.storage),
            listen: self.listen.or(other.listen),
            listen_host: self.listen_host.or(other.listen_host),
            port: self.port.or(other.port),
            backend: self.backend.or(other.backend),
            poll_interval: self.poll_interval.or(other.poll_interval),
            // One of the two: the layer that gives either gives the size.
            max_upload_mb: if self.max_upload_mb.is_some() || self.max_upload_size.is_some() {
                self.max_upload_mb
            } else {
                other.max_upload_mb
            },
            max_upload_size: if self.max_upload_mb.is_some() || self.max_upload_size.is_some() {
                self.max_upload_size
            } else {
                other.max_upload_size
            },
            sync_timeout: self.sync_timeout.or(other.sync_timeout),
            depth: self.depth.or(other.depth),
            allow_overwrite: self.allow_overwrite.or(other.allow_overwrite),
            disable_delete: self.disable_delete.or(other.disable_delete),
            basic_auth_user: self.basic_auth_user.or(other.basic_auth_user),
            basic_auth_pass: self.basic_auth_pass.or(other.basic_auth_pass),
            auth_token_file: self.auth_token_file.or(other.auth_token_file),
            auth_rules_file: self.auth_rules_file.or(other.auth_rules_file),
            auth_anonymous_get: self.auth_anonymous_get.or(other.auth_anonymous_get),
            allow_anonymous_write: self.allow_anonymous_write.or(other.allow_anonymous_write),
            cache_dir: self.cache_dir.or(other.cache_dir),
            log_json: self.log_json.or(other.log_json),
            debug: self.debug.or(other.debug),
            log_health: self.log_health.or(other.log_health),
            enable_metrics: self.enable_metrics.or(other.enable_metrics),
            chart_url: self.chart_url.or(other.chart_url),
            context_path: self.context_path.or(other.context_path),
            tls_cert: self.tls_cert.or(other.tls_cert),
            tls_key: self.tls_key.or(other.tls_key),
        }
    }
}

/// `--backend`'s value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    Auto,
    Native,
    Portable,
    Poll,
}

impl FromStr for BackendChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "native" => Ok(BackendChoice::Native),
            "portable" => Ok(BackendChoice::Portable),
            "poll" => Ok(BackendChoice::Poll),
            _ => Err(format!(
                "unknown backend {s:?} (auto, native, portable or poll)"
            )),
        }
    }
}

/// A positive number of milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Millis(NonZeroU64);

/// Checked while the file is read (a visitor, not `try_from`), so that
/// serde's error carries the line and column.
impl<'de> Deserialize<'de> for Millis {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Millis;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a positive number of milliseconds")
            }
            fn visit_u64<E: serde::de::Error>(self, ms: u64) -> Result<Millis, E> {
                NonZeroU64::new(ms)
                    .map(Millis)
                    .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Unsigned(ms), &self))
            }
            fn visit_i64<E: serde::de::Error>(self, ms: i64) -> Result<Millis, E> {
                u64::try_from(ms)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(ms), &self))
                    .and_then(|ms| self.visit_u64(ms))
            }
        }
        d.deserialize_u64(Visitor)
    }
}

impl Millis {
    pub fn duration(self) -> Duration {
        Duration::from_millis(self.0.get())
    }
}

impl FromStr for Millis {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        s.parse::<u64>()
            .ok()
            .and_then(NonZeroU64::new)
            .map(Millis)
            .ok_or_else(|| format!("not a positive number of milliseconds: {s:?}"))
    }
}

/// The configuration the server runs with, checked.
pub struct Config {
    pub storage: PathBuf,
    /// `HOST:PORT`.
    pub listen: String,
    /// What the spec asks for: `Auto`, `Native`, `Portable` or `Poll`.
    pub backend: Backend,
    /// `Poll`'s interval, and the manager's for what it polls otherwise
    /// (roots `Auto` finds shared; directories the OS will not watch).
    pub poll_interval: Duration,
    /// The largest upload, in bytes.
    pub max_upload: u64,
    /// How long an upload or delete waits for the index to show it.
    pub sync_timeout: Duration,
    /// Credentials, what is open, how paths are read.
    pub policy: Policy,
    /// Where the restart cache is kept (`None`: no cache).
    pub cache_dir: Option<PathBuf>,
    /// How the log is written.
    pub log: LogSettings,
    /// Whether `/metrics` is served.
    pub metrics: bool,
    /// `--chart-url`, `--context-path`.
    pub links: Links,
    /// `--tls-cert`, `--tls-key` (absolute, links not resolved: a
    /// Secret's files are links that change), checked readable.
    pub tls: Option<TlsFiles>,
}

/// Why the server cannot start with what it was given: said on stderr,
/// exit status 2.
#[derive(Debug)]
pub struct ConfigError(String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What reading the arguments came to: a configuration, or what to print
/// and how to exit (`--help` and `--version` print on stdout and exit 0).
pub enum Parsed {
    Run(Box<Config>),
    /// Print on stdout, exit 0.
    Info(String),
    /// Print on stderr, exit 2.
    Refused(String),
    /// `hash-credential`: print the field of the secret on stdin.
    HashCredential(Scheme),
}

/// The environment variables the server reads (each setting's, and
/// `CONFIG`): for tests and docs.
pub fn env_vars() -> Vec<String> {
    Cli::command()
        .get_arguments()
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .collect()
}

/// Reads the command line `args` (the program's name first), the
/// environment, and the `--config` file if one is named.
pub fn parse<I, T>(args: I) -> Parsed
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let command = Cli::command();
    let matches = match command.clone().try_get_matches_from(&args) {
        Ok(m) => m,
        Err(e) => return refusal(e, &command, &args),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => return refusal(e, &command, &args),
    };
    if let Some(Tool::HashCredential { scheme }) = cli.command {
        return Parsed::HashCredential(match scheme {
            SchemeArg::Bearer => Scheme::Bearer,
            SchemeArg::Basic => Scheme::Basic,
        });
    }
    let file = match &cli.config {
        Some(path) => match read_file(path) {
            Ok(s) => s,
            Err(e) => return Parsed::Refused(e.0),
        },
        None => Settings::default(),
    };
    match check(cli.settings.or(file), &matches) {
        Ok(c) => Parsed::Run(Box::new(c)),
        Err(e) => Parsed::Refused(e.0),
    }
}

/// What clap refused, or `--help` / `--version`. A value clap refuses
/// that came from a variable (the flag is not on the command line) is
/// said to come from it: clap's own message names the flag only.
fn refusal(e: clap::Error, command: &clap::Command, args: &[std::ffi::OsString]) -> Parsed {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => Parsed::Info(e.to_string()),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
            let message = e.to_string();
            let from_env = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::String(arg)) => env_source(command, arg, args),
                _ => None,
            };
            match from_env {
                Some(var) => Parsed::Refused(match message.strip_prefix("error: ") {
                    Some(rest) => format!("error: the environment variable {var}: {rest}"),
                    None => format!("the environment variable {var}: {message}"),
                }),
                None => Parsed::Refused(message),
            }
        }
        _ => Parsed::Refused(e.to_string()),
    }
}

/// The variable whose value clap refused for `arg` (clap's rendering,
/// `--port <PORT>`), if it came from there: the flag is not among
/// `args` and the variable is set.
fn env_source(command: &clap::Command, arg: &str, args: &[std::ffi::OsString]) -> Option<String> {
    // `--port <PORT>`, `--disable-delete[=<BOOL>]`: the name.
    let long = arg.strip_prefix("--")?.split([' ', '[', '=']).next()?;
    let a = command.get_arguments().find(|a| {
        a.get_long() == Some(long) || a.get_all_aliases().is_some_and(|al| al.contains(&long))
    })?;
    let var = a.get_env()?;
    std::env::var_os(var)?;
    let names: Vec<String> = std::iter::once(long.to_owned())
        .chain(
            a.get_all_aliases()
                .unwrap_or_default()
                .into_iter()
                .map(str::to_owned),
        )
        .collect();
    let on_command_line = args.iter().skip(1).any(|x| {
        let x = x.to_string_lossy();
        names.iter().any(|n| {
            x.strip_prefix("--")
                .and_then(|x| x.strip_prefix(n.as_str()))
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('='))
        })
    });
    (!on_command_line).then(|| var.to_string_lossy().into_owned())
}

/// The `--config` file's settings. Its errors name the file, and serde's
/// the line and column.
pub fn read_file(path: &Path) -> Result<Settings, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError(format!("--config {}: {e}", path.display())))?;
    if text.trim().is_empty() {
        return Ok(Settings::default());
    }
    serde_norway::from_str(&text).map_err(|e| {
        // serde's message leaves out a position at the file's very start.
        let mut message = e.to_string();
        if let Some(at) = e.location()
            && !message.contains(" at line ")
        {
            message = format!("{message} at line {} column {}", at.line(), at.column());
        }
        ConfigError(format!("--config {}: {message}", path.display()))
    })
}

/// The settings, checked and with their defaults; `matches` tell a flag
/// from its variable in what is said.
fn check(s: Settings, matches: &ArgMatches) -> Result<Config, ConfigError> {
    let name = |id: &str, flag: &str| -> String {
        let env = Cli::command()
            .get_arguments()
            .find(|a| a.get_id() == id)
            .and_then(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()));
        match (matches.value_source(id), env) {
            (Some(ValueSource::EnvVariable), Some(var)) => var,
            (Some(ValueSource::CommandLine), _) => flag.to_owned(),
            (_, Some(var)) => format!("{flag} ({var}, or the config file)"),
            (_, None) => flag.to_owned(),
        }
    };
    let err = |m: String| ConfigError(m);
    let storage = s.storage.clone().ok_or_else(|| {
        err(
            "--storage (STORAGE_LOCAL_ROOTDIR, or `storage` in the config file) is required: \
             the storage directory"
                .into(),
        )
    })?;
    let listen = match (&s.listen, &s.listen_host, s.port) {
        (Some(l), _, _) => l.clone(),
        (None, host, port) => {
            let host = host.as_deref().unwrap_or(DEFAULT_HOST);
            let port = port.unwrap_or(DEFAULT_PORT);
            if host.contains(':') && !host.starts_with('[') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            }
        }
    };
    let poll_interval = s
        .poll_interval
        .map_or(DEFAULT_POLL_INTERVAL, Millis::duration);
    let backend = match s.backend.unwrap_or(BackendChoice::Auto) {
        BackendChoice::Auto => Backend::Auto,
        BackendChoice::Native => Backend::Native,
        BackendChoice::Portable => Backend::Portable,
        BackendChoice::Poll => Backend::Poll {
            interval: poll_interval,
        },
    };
    let max_upload = match (s.max_upload_mb, s.max_upload_size) {
        (_, Some(bytes)) => bytes,
        (Some(mb), None) => mb.checked_mul(1 << 20).ok_or_else(|| {
            err(format!(
                "{}: {mb} MiB is more bytes than a 64-bit number holds",
                name("max_upload_mb", "--max-upload-mb")
            ))
        })?,
        (None, None) => DEFAULT_MAX_UPLOAD_MB << 20,
    };
    let sync_timeout = s
        .sync_timeout
        .map_or(DEFAULT_SYNC_TIMEOUT, Duration::from_millis);
    let rules = Rules {
        depth: s.depth,
        delete: !s.disable_delete.unwrap_or(false),
    };
    let mut auth = Auth::default();
    auth.anonymous_get = s.auth_anonymous_get.unwrap_or(false);
    auth.anonymous_write = s.allow_anonymous_write.unwrap_or(false);
    let user = s.basic_auth_user.filter(|u| !u.is_empty());
    let password = s.basic_auth_pass.filter(|p| !p.is_empty());
    match (user, password) {
        (Some(u), Some(p)) => auth.set_basic(&u, &p),
        (None, None) => {}
        (Some(_), None) => {
            return Err(err(format!(
                "{} needs a password: --basic-auth-pass or BASIC_AUTH_PASS (not empty)",
                name("basic_auth_user", "--basic-auth-user")
            )));
        }
        (None, Some(_)) => {
            return Err(err(format!(
                "{} needs a user: --basic-auth-user or BASIC_AUTH_USER (not empty)",
                name("basic_auth_pass", "--basic-auth-pass")
            )));
        }
    }
    let token_flag = name("auth_token_file", "--auth-token-file");
    for file in s.auth_token_file.iter().flatten() {
        let text = std::fs::read_to_string(file)
            .map_err(|e| err(format!("{token_flag}: {}: {e}", file.display())))?;
        auth.add_tokens(file, &text)
            .map_err(|e| err(format!("{token_flag}: {e}")))?;
    }
    if let Some(file) = &s.auth_rules_file {
        let rules = RulesFile::load(file).map_err(|e| {
            err(format!(
                "{}: {e}",
                name("auth_rules_file", "--auth-rules-file")
            ))
        })?;
        auth.set_rules(std::sync::Arc::new(rules));
    }
    let chart_url = match &s.chart_url {
        Some(u) => Some(
            proxy::chart_url(u)
                .map_err(|e| err(format!("{}: {e}", name("chart_url", "--chart-url"))))?,
        ),
        None => None,
    };
    let context_path = match &s.context_path {
        Some(c) => proxy::context_path(c)
            .map_err(|e| err(format!("{}: {e}", name("context_path", "--context-path"))))?,
        None => None,
    };
    let tls = match (s.tls_cert, s.tls_key) {
        (Some(cert), Some(key)) => {
            let absolute = |p: PathBuf, id: &str, flag: &str| {
                std::path::absolute(&p)
                    .map_err(|e| err(format!("{}: {}: {e}", name(id, flag), p.display())))
            };
            let files = TlsFiles {
                cert: absolute(cert, "tls_cert", "--tls-cert")?,
                key: absolute(key, "tls_key", "--tls-key")?,
            };
            crate::tls::load(&files).map_err(|e| {
                err(format!(
                    "{} / {}: {e}",
                    name("tls_cert", "--tls-cert"),
                    name("tls_key", "--tls-key")
                ))
            })?;
            Some(files)
        }
        (None, None) => None,
        (Some(_), None) => {
            return Err(err(format!(
                "{} needs --tls-key (TLS_KEY)",
                name("tls_cert", "--tls-cert")
            )));
        }
        (None, Some(_)) => {
            return Err(err(format!(
                "{} needs --tls-cert (TLS_CERT)",
                name("tls_key", "--tls-key")
            )));
        }
    };
    if auth.anonymous_write && auth.has_credentials() {
        return Err(err(format!(
            "{} opens writes to anyone: it cannot go with credentials (--basic-auth-*, \
             BASIC_AUTH_*, --auth-token-file, --auth-rules-file)",
            name("allow_anonymous_write", "--allow-anonymous-write")
        )));
    }
    Ok(Config {
        storage,
        listen,
        backend,
        poll_interval,
        max_upload,
        sync_timeout,
        policy: Policy {
            auth,
            rules,
            allow_overwrite: s.allow_overwrite.unwrap_or(false),
        },
        cache_dir: s.cache_dir,
        log: LogSettings {
            json: s.log_json.unwrap_or(false),
            debug: s.debug.unwrap_or(false),
            health: s.log_health.unwrap_or(false),
        },
        metrics: s.enable_metrics.unwrap_or(false),
        links: Links {
            chart_url,
            context_path,
        },
        tls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `args` with an environment of the server's variables
    /// cleared: the test process's own must not leak in.
    fn settings(args: &[&str]) -> Result<Settings, String> {
        let cli = Cli::try_parse_from(std::iter::once("chart-index").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        Ok(cli.settings)
    }

    #[test]
    fn every_setting_has_a_variable_and_help() {
        let command = Cli::command();
        for a in command.get_arguments() {
            let id = a.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            assert!(a.get_env().is_some(), "--{id} has no environment variable");
            assert!(a.get_help().is_some(), "--{id} has no help");
        }
        let vars = env_vars();
        for chartmuseum in [
            "STORAGE_LOCAL_ROOTDIR",
            "PORT",
            "DEPTH",
            "BASIC_AUTH_USER",
            "BASIC_AUTH_PASS",
            "ALLOW_OVERWRITE",
            "DISABLE_DELETE",
            "AUTH_ANONYMOUS_GET",
            "MAX_UPLOAD_SIZE",
            "LOG_JSON",
            "LOG_HEALTH",
            "DEBUG",
            "ENABLE_METRICS",
            "CHART_URL",
            "CONTEXT_PATH",
            "TLS_CERT",
            "TLS_KEY",
        ] {
            assert!(vars.iter().any(|v| v == chartmuseum), "{chartmuseum}");
        }
    }

    #[test]
    fn file_keys_are_the_flags_names() {
        let s: Settings = serde_norway::from_str(
            "storage: /srv/charts\nport: 9000\nallow-overwrite: true\n\
             auth-token-file: [/etc/a, /etc/b]\npoll-interval: 250\nbackend: poll\n",
        )
        .unwrap();
        assert_eq!(s.storage.as_deref(), Some(Path::new("/srv/charts")));
        assert_eq!(s.port, Some(9000));
        assert_eq!(s.allow_overwrite, Some(true));
        assert_eq!(s.auth_token_file.as_ref().map(Vec::len), Some(2));
        assert_eq!(
            s.poll_interval.map(Millis::duration),
            Some(Duration::from_millis(250))
        );
        assert_eq!(s.backend, Some(BackendChoice::Poll));
        // Every flag's name is a key the file takes.
        for a in Cli::command().get_arguments() {
            let Some(long) = a.get_long() else { continue };
            if matches!(long, "help" | "version" | "config") {
                continue;
            }
            let e = serde_norway::from_str::<Settings>(&format!("{long}: [[[]]]\n"))
                .unwrap_err()
                .to_string();
            assert!(!e.contains("unknown field"), "{long}: {e}");
        }
    }

    #[test]
    fn a_bad_file_value_names_its_line() {
        let e = serde_norway::from_str::<Settings>("port: 8080\npoll-interval: 0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
        assert!(
            e.contains("expected a positive number of milliseconds"),
            "{e}"
        );
        let e = serde_norway::from_str::<Settings>("storage: /x\nprot: 1\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown field `prot`") && e.contains("line 2"),
            "{e}"
        );
        let e = serde_norway::from_str::<Settings>("backend: nfs\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("nfs") && e.contains("line 1"), "{e}");
    }

    #[test]
    fn flags_win_over_the_file() {
        let cli = settings(&["--port", "9001", "--allow-overwrite"]).unwrap();
        let file = Settings {
            port: Some(9000),
            storage: Some("/srv".into()),
            allow_overwrite: Some(false),
            disable_delete: Some(true),
            max_upload_mb: Some(4),
            ..Settings::default()
        };
        let s = cli.clone().or(file.clone());
        assert_eq!(s.port, Some(9001));
        assert_eq!(s.allow_overwrite, Some(true));
        assert_eq!(s.storage.as_deref(), Some(Path::new("/srv")));
        assert_eq!(s.disable_delete, Some(true));
        assert_eq!(s.max_upload_mb, Some(4));
        // A size given in bytes on the command line replaces the file's MiB.
        let bytes = settings(&["--max-upload-size", "1000"]).unwrap().or(file);
        assert_eq!(
            (bytes.max_upload_mb, bytes.max_upload_size),
            (None, Some(1000))
        );
    }

    #[test]
    fn booleans_take_a_value_only_after_an_equals_sign() {
        let s = settings(&["--disable-delete", "--allow-overwrite=false"]).unwrap();
        assert_eq!(s.disable_delete, Some(true));
        assert_eq!(s.allow_overwrite, Some(false));
        let e = settings(&["--disable-delete=maybe"]).unwrap_err();
        assert!(e.contains("--disable-delete"), "{e}");
    }

    #[test]
    fn the_listen_address_from_its_parts() {
        let m = Cli::command().get_matches_from(["chart-index"]);
        let listen = |s: Settings| {
            check(
                Settings {
                    storage: Some("/srv".into()),
                    ..s
                },
                &m,
            )
            .map(|c| c.listen)
            .map_err(|e| e.0)
        };
        assert_eq!(listen(Settings::default()).unwrap(), "0.0.0.0:8080");
        let port = Settings {
            port: Some(9000),
            ..Settings::default()
        };
        assert_eq!(listen(port).unwrap(), "0.0.0.0:9000");
        let host = Settings {
            listen_host: Some("::1".into()),
            port: Some(1),
            ..Settings::default()
        };
        assert_eq!(listen(host).unwrap(), "[::1]:1");
        let both = Settings {
            listen: Some("127.0.0.1:0".into()),
            port: Some(9000),
            ..Settings::default()
        };
        assert_eq!(listen(both).unwrap(), "127.0.0.1:0");
    }

    #[test]
    fn the_rules_file_is_read_at_start_naming_the_setting_and_line() {
        let d = tempfile::tempdir().unwrap();
        let good = d.path().join("rules");
        std::fs::write(&good, "# none yet\npublic read anonymous\n").unwrap();
        let bad = d.path().join("bad");
        std::fs::write(&bad, "public read anonymous\norg write tok-raw\n").unwrap();
        let m = Cli::command().get_matches_from(["chart-index"]);
        let with = |file: &Path, anonymous_write: bool| {
            check(
                Settings {
                    storage: Some("/srv".into()),
                    auth_rules_file: Some(file.to_owned()),
                    allow_anonymous_write: Some(anonymous_write),
                    ..Settings::default()
                },
                &m,
            )
        };
        let c = with(&good, false).map_err(|e| e.0).unwrap();
        let rules = c.policy.auth.rules_file().expect("the rules are taken");
        assert_eq!(rules.path(), good);
        assert!(c.policy.auth.has_credentials());
        let e = with(&bad, false).err().unwrap().0;
        assert!(
            e.starts_with(&format!(
                "--auth-rules-file (AUTH_RULES_FILE, or the config file): {}: line 2: the \
                 credential is none of",
                bad.display()
            )),
            "{e}"
        );
        assert!(!e.contains("tok-raw"), "{e}");
        let e = with(&d.path().join("missing"), false).err().unwrap().0;
        assert!(e.contains("missing: "), "{e}");
        let e = with(&good, true).err().unwrap().0;
        assert!(e.contains("--auth-rules-file"), "{e}");
        // The key in the file.
        let s: Settings = serde_norway::from_str("auth-rules-file: /etc/rules\n").unwrap();
        assert_eq!(s.auth_rules_file.as_deref(), Some(Path::new("/etc/rules")));
    }

    #[test]
    fn hash_credential_is_a_subcommand() {
        for (scheme, want) in [("bearer", Scheme::Bearer), ("basic", Scheme::Basic)] {
            let p = parse(["chart-index", "hash-credential", scheme]);
            assert!(
                matches!(p, Parsed::HashCredential(s) if s == want),
                "{scheme}"
            );
        }
        let Parsed::Refused(e) = parse(["chart-index", "hash-credential", "token"]) else {
            panic!("an unknown scheme is refused")
        };
        assert!(e.contains("bearer") && e.contains("basic"), "{e}");
        let Parsed::Info(help) = parse(["chart-index", "--help"]) else {
            panic!("--help")
        };
        assert!(
            help.contains("hash-credential") && help.contains("AUTH_RULES_FILE"),
            "{help}"
        );
    }

    #[test]
    fn observability_proxy_and_tls_settings() {
        let s = settings(&[
            "--log-json",
            "--enable-metrics",
            "--chart-url",
            "https://charts.example.com/",
            "--context-path",
            "/charts/",
        ])
        .unwrap();
        let file: Settings = serde_norway::from_str(
            "debug: true\nlog-health: true\nlog-json: false\ntls-cert: /etc/tls/tls.crt\n",
        )
        .unwrap();
        let s = s.or(file);
        assert_eq!(s.log_json, Some(true), "the flag wins over the file");
        assert_eq!((s.debug, s.log_health), (Some(true), Some(true)));
        assert_eq!(s.tls_cert.as_deref(), Some(Path::new("/etc/tls/tls.crt")));
        let m = Cli::command().get_matches_from(["chart-index"]);
        let c = check(
            Settings {
                storage: Some("/srv".into()),
                tls_cert: None,
                ..s.clone()
            },
            &m,
        )
        .map_err(|e| e.0)
        .unwrap();
        assert_eq!(
            c.log,
            LogSettings {
                json: true,
                debug: true,
                health: true
            }
        );
        assert!(c.metrics);
        assert_eq!(
            c.links,
            Links {
                chart_url: Some("https://charts.example.com".into()),
                context_path: Some("/charts".into()),
            }
        );
        // Bad values name the flag and its variable.
        let refused = |s: Settings| {
            check(
                Settings {
                    storage: Some("/srv".into()),
                    ..s
                },
                &m,
            )
            .err()
            .unwrap()
            .0
        };
        let e = refused(Settings {
            chart_url: Some("charts.example.com".into()),
            ..Settings::default()
        });
        assert!(e.contains("--chart-url (CHART_URL"), "{e}");
        let e = refused(Settings {
            context_path: Some("charts".into()),
            ..Settings::default()
        });
        assert!(e.contains("--context-path (CONTEXT_PATH"), "{e}");
        let e = refused(Settings {
            tls_cert: Some("/etc/tls/tls.crt".into()),
            ..Settings::default()
        });
        assert!(
            e.contains("--tls-cert (TLS_CERT") && e.contains("--tls-key"),
            "{e}"
        );
        let e = refused(Settings {
            tls_cert: Some("/nonexistent/tls.crt".into()),
            tls_key: Some("/nonexistent/tls.key".into()),
            ..Settings::default()
        });
        assert!(
            e.contains("/nonexistent/tls.crt") && e.contains("--tls-cert (TLS_CERT"),
            "{e}"
        );
    }

    #[test]
    fn no_storage_is_refused_naming_its_flag_variable_and_key() {
        let m = Cli::command().get_matches_from(["chart-index"]);
        let e = check(Settings::default(), &m).err().unwrap().0;
        assert!(
            e.contains("--storage")
                && e.contains("STORAGE_LOCAL_ROOTDIR")
                && e.contains("`storage`"),
            "{e}"
        );
    }
}
