//! TLS: `--tls-cert FILE --tls-key FILE` (`TLS_CERT`, `TLS_KEY`,
//! chartmuseum's) serve HTTPS with rustls (the `ring` provider; TLS 1.3
//! and 1.2; ALPN `http/1.1`), the certificate chain and its key read from
//! PEM files.
//!
//! **Reloaded when the files change**, without a restart: the
//! directories holding them are watched (a spec of the server's own
//! manager, [`SPEC`]; subdirectories ignored), and after each batch that
//! touches them both files are read again ([`Certs::reload`]; nothing
//! is done or said when their bytes are as last read, so that other
//! files in those directories, a log among them, cause no reloads). A
//! Kubernetes Secret mounted as a volume is a directory whose files are
//! links through `..data`, which the kubelet swaps atomically: the swap is
//! a change in that directory. A pair that cannot be used (a file half
//! written, a key that does not match the certificate: one file replaced
//! and not yet the other) keeps the old pair in service and says why; the
//! next change tries again. Handshakes that begin after a reload get the
//! new certificate; connections already made keep theirs.
//!
//! The handshake runs on the connection's own task, within the header
//! read timeout (a client that opens a connection and sends nothing holds
//! nothing else up).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use sha2::{Digest, Sha256};
use specwatch::WatchSpec;
use tokio_rustls::TlsAcceptor;

/// The name of the watch spec over the certificate's directories.
pub const SPEC: &str = "tls";

/// `--tls-cert` and `--tls-key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// rustls' `ring` provider: TLS 1.3 and 1.2 suites, X25519 and the NIST
/// curves for key exchange. rustls 0.23.48 marks it deprecated because
/// ring has no post-quantum key exchange (X25519MLKEM768, which only the
/// aws-lc-rs provider has); aws-lc-rs needs cmake and a C build for the
/// musl target, so the server stays on ring until ring or a pure-Rust
/// provider has one.
#[allow(deprecated)]
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads the certificate chain and its private key, and checks that the
/// key is the certificate's; the error names the file.
pub fn load(files: &TlsFiles) -> Result<Arc<CertifiedKey>, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("{}: {e}", files.cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "{}: no certificate (PEM `CERTIFICATE`) in it",
            files.cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| match e {
        pem::Error::NoItemsFound => format!(
            "{}: no private key (PEM `PRIVATE KEY`, `RSA PRIVATE KEY` or `EC PRIVATE KEY`) \
             in it",
            files.key.display()
        ),
        e => format!("{}: {e}", files.key.display()),
    })?;
    CertifiedKey::from_der(chain, key, &provider())
        .map(Arc::new)
        .map_err(|e| format!("{} and {}: {e}", files.cert.display(), files.key.display()))
}

/// The sha256 of the certificate's file and the key's, one after the
/// other; `None` when either cannot be read.
fn digest(files: &TlsFiles) -> Option<[u8; 32]> {
    let mut h = Sha256::new();
    for f in [&files.cert, &files.key] {
        h.update(std::fs::read(f).ok()?);
        // Each file's end marked, so that bytes moved from one to the
        // other are a change.
        h.update([0]);
    }
    Some(h.finalize().into())
}

/// The certificate in service, swapped on reload.
pub struct Certs {
    files: TlsFiles,
    current: RwLock<Arc<CertifiedKey>>,
    /// The sha256 of the files' bytes as last read (loaded or refused):
    /// a change in their directories that leaves them as they were (a
    /// log file written beside them) reads them and stops there.
    seen: Mutex<Option<[u8; 32]>>,
}

/// What [`Certs::reload`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Reload {
    /// The files are as last read: nothing to do, nothing to say.
    Unchanged,
    /// A new pair serves the next handshakes.
    Reloaded,
}

impl fmt::Debug for Certs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Certs")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl Certs {
    /// The certificate of `files`, read now.
    pub fn new(files: TlsFiles) -> Result<Arc<Certs>, String> {
        let seen = Mutex::new(digest(&files));
        let current = RwLock::new(load(&files)?);
        Ok(Arc::new(Certs {
            files,
            current,
            seen,
        }))
    }

    /// Reads the files again: when their bytes are as last read, nothing
    /// more ([`Reload::Unchanged`], whether that read was loaded or
    /// refused: a refusal is said once per content); else on success the
    /// new pair serves the next handshakes, and on failure the old one
    /// stays and the error says why.
    pub fn reload(&self) -> Result<Reload, String> {
        let now = digest(&self.files);
        {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            if *seen == now {
                return Ok(Reload::Unchanged);
            }
            *seen = now;
        }
        let new = load(&self.files)?;
        // The lock is held for the swap alone.
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = new;
        Ok(Reload::Reloaded)
    }

    /// The spec that watches the directories holding the files (their
    /// subdirectories left out: a Secret's timestamped directories).
    pub fn watch_spec(&self) -> WatchSpec {
        let dirs: Vec<&Path> = [&self.files.cert, &self.files.key]
            .into_iter()
            .map(|f| {
                f.parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new("."))
            })
            .collect();
        let mut spec = WatchSpec::new([dirs[0]]);
        if dirs[1] != dirs[0] {
            spec = spec.path(dirs[1]);
        }
        spec.ignore_patterns(["*/"])
    }

    /// The acceptor of TLS connections, with this certificate.
    pub fn acceptor(self: &Arc<Self>) -> Result<TlsAcceptor, String> {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(self) as Arc<dyn ResolvesServerCert>);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}

impl ResolvesServerCert for Certs {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.current.read().unwrap_or_else(PoisonError::into_inner),
        ))
    }
}
