//! HTTPS served by the binary itself (deployments without a TLS-terminating ingress): rustls
//! with the ring provider, HTTP/2 or HTTP/1.1 by ALPN, the certificate chain and key read from
//! PEM files and re-read when either file changes on disk (certificates renewed by cert-manager
//! or certbot are picked up without a restart; a bad replacement is logged and the previous
//! certificate stays in use).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::RwLock;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("certificate {path}: {message}")]
    Certificate { path: String, message: String },
    #[error("private key {path}: {message}")]
    Key { path: String, message: String },
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// Reads a PEM certificate chain and its private key.
pub fn load(cert_path: &Path, key_path: &Path) -> Result<CertifiedKey, TlsError> {
    let cert_err = |message: String| TlsError::Certificate {
        path: cert_path.display().to_string(),
        message,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_path)
        .map_err(|e| cert_err(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| cert_err(e.to_string()))?;
    if certs.is_empty() {
        return Err(cert_err("no certificate in the file".into()));
    }
    let key_err = |message: String| TlsError::Key {
        path: key_path.display().to_string(),
        message,
    };
    let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| key_err(e.to_string()))?;
    let signing =
        rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| key_err(e.to_string()))?;
    let certified = CertifiedKey::new(certs, signing);
    certified
        .keys_match()
        .map_err(|e| key_err(format!("does not match the certificate ({e})")))?;
    Ok(certified)
}

/// Serves the current certificate; `watch` replaces it when the files change.
#[derive(Debug)]
pub struct ReloadingCert {
    cert_path: PathBuf,
    key_path: PathBuf,
    current: RwLock<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().clone())
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

impl ReloadingCert {
    pub fn new(cert_path: &Path, key_path: &Path) -> Result<Arc<ReloadingCert>, TlsError> {
        let certified = load(cert_path, key_path)?;
        Ok(Arc::new(ReloadingCert {
            cert_path: cert_path.to_path_buf(),
            key_path: key_path.to_path_buf(),
            current: RwLock::new(Arc::new(certified)),
        }))
    }

    /// Re-reads the files when their modification times change (checked every `every`).
    pub fn watch(self: &Arc<Self>, every: Duration) {
        let this = self.clone();
        actix_rt::spawn(async move {
            let stamp = |t: &ReloadingCert| (modified(&t.cert_path), modified(&t.key_path));
            let mut seen = stamp(&this);
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let now = stamp(&this);
                if now == seen {
                    continue;
                }
                match load(&this.cert_path, &this.key_path) {
                    Ok(certified) => {
                        *this.current.write() = Arc::new(certified);
                        seen = now;
                        tracing::info!(cert = %this.cert_path.display(), "TLS certificate reloaded");
                    }
                    // A half-written pair (certificate renewed, key not yet): try again next tick.
                    Err(e) => {
                        tracing::warn!(error = %e, "TLS certificate not reloaded; the previous one stays in use")
                    }
                }
            }
        });
    }
}

/// The rustls server configuration: TLS 1.2 and 1.3, ALPN h2 then http/1.1.
pub fn server_config(cert: Arc<ReloadingCert>) -> Result<rustls::ServerConfig, TlsError> {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| TlsError::Config(e.to_string()))?
    .with_no_client_auth()
    .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
