//! TLS for the webhook server: certificate and key from PEM files (a mounted
//! `kubernetes.io/tls` Secret: `tls.crt`, `tls.key`), reloaded when they
//! change so that cert-manager renewals need no restart.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::crypto::aws_lc_rs as provider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Loading the certificate or key failed.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The PEM could not be parsed.
    #[error("{path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The key is of an unsupported type or does not match the certificate.
    #[error("{path}: {message}")]
    Key {
        /// The key file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// Where the certificate chain and private key live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM certificate chain (leaf first), e.g. `/tls/tls.crt`.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1), e.g. `/tls/tls.key`.
    pub key: PathBuf,
}

impl TlsFiles {
    /// `tls.crt` and `tls.key` in `dir` (a mounted TLS Secret).
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Builds a certified key from PEM bytes.
pub fn certified_key_from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
    files: &TlsFiles,
) -> Result<CertifiedKey, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Pem {
            path: files.cert.clone(),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            path: files.cert.clone(),
            message: "no CERTIFICATE block found".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Pem {
        path: files.key.clone(),
        message: e.to_string(),
    })?;
    let signing_key = provider::sign::any_supported_type(&key).map_err(|e| TlsError::Key {
        path: files.key.clone(),
        message: e.to_string(),
    })?;
    let certified = CertifiedKey::new(certs, signing_key);
    certified.keys_match().map_err(|e| TlsError::Key {
        path: files.key.clone(),
        message: format!("the key does not match the certificate: {e}"),
    })?;
    Ok(certified)
}

/// Loads a certified key from the files.
pub fn load_certified_key(files: &TlsFiles) -> Result<CertifiedKey, TlsError> {
    certified_key_from_pem(&read(&files.cert)?, &read(&files.key)?, files)
}

struct Current {
    key: Arc<CertifiedKey>,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

/// Serves the current certificate; [`ReloadingCert::reload_if_changed`]
/// swaps it when the files change. A broken new pair is logged and the old
/// one kept.
pub struct ReloadingCert {
    files: TlsFiles,
    current: RwLock<Current>,
}

impl fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl ReloadingCert {
    /// Loads the files (an error here is fatal: nothing to serve).
    pub fn load(files: TlsFiles) -> Result<Arc<Self>, TlsError> {
        let cert_pem = read(&files.cert)?;
        let key_pem = read(&files.key)?;
        let key = Arc::new(certified_key_from_pem(&cert_pem, &key_pem, &files)?);
        Ok(Arc::new(Self {
            files,
            current: RwLock::new(Current {
                key,
                cert_pem,
                key_pem,
            }),
        }))
    }

    /// Re-reads the files; returns true when a new certificate was installed.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let cert_pem = read(&self.files.cert)?;
        let key_pem = read(&self.files.key)?;
        {
            let cur = self.current.read().unwrap_or_else(|e| e.into_inner());
            if cur.cert_pem == cert_pem && cur.key_pem == key_pem {
                return Ok(false);
            }
        }
        // A Secret update replaces both files at once, but a reader can see
        // the new certificate with the old key for a moment: then the pair
        // does not match and the next poll picks up the consistent pair.
        let key = Arc::new(certified_key_from_pem(&cert_pem, &key_pem, &self.files)?);
        let mut cur = self.current.write().unwrap_or_else(|e| e.into_inner());
        *cur = Current {
            key,
            cert_pem,
            key_pem,
        };
        Ok(true)
    }

    /// Polls the files every `interval` until the returned task is aborted.
    pub fn spawn_reloader(self: &Arc<Self>, interval: Duration) -> tokio::task::JoinHandle<()> {
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let this = Arc::clone(&this);
                match tokio::task::spawn_blocking(move || this.reload_if_changed()).await {
                    Ok(Ok(true)) => tracing::info!("reloaded the webhook TLS certificate"),
                    Ok(Ok(false)) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "TLS certificate reload failed; keeping the current one")
                    }
                    Err(e) => tracing::warn!(error = %e, "TLS reload task failed"),
                }
            }
        })
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.current.read().unwrap_or_else(|e| e.into_inner()).key,
        ))
    }
}

/// A rustls server configuration (TLS 1.2+, ALPN h2 and http/1.1) serving
/// `cert`.
pub fn server_config(cert: Arc<ReloadingCert>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let mut config =
        rustls::ServerConfig::builder_with_provider(Arc::new(provider::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
