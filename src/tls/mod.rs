//! TLS termination, client certificates and HTTPS to backends, on Pingora's rustls backend
//! (ring crypto; docs/tls-http2.md#tls-backend-choice).
//!
//! - [`certs`]: server certificates chosen by SNI, swapped on reload ([`ListenerCerts`]).
//! - [`listener`]: Pingora `TlsSettings` of a listener (ALPN h2, client CA, client CN).
//! - [`upstream`]: CA, SNI and verification for HTTPS to backends, and TLS error reasons.
//! - [`pem`]: reading PEM files with errors fit for a config error.
//! - [`pinned`]: backends pinned by their own self-signed certificate (a `ca_file` of those).

pub mod certs;
pub mod listener;
pub mod pem;
pub mod pinned;
pub mod probe;
pub mod upstream;

use crate::config::{Config, ConfigError};
use certs::{CertSet, SniResolver};
use rustls::RootCertStore;
use std::sync::Arc;

/// Installs ring as rustls' process-wide crypto provider (a no-op when one is installed).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// What one TLS listener needs, loaded from its files when a snapshot is built.
pub struct ListenerTls {
    pub certs: Arc<CertSet>,
    /// Trust anchors for client certificates (`tls.client_ca_file`).
    pub client_roots: Option<Arc<RootCertStore>>,
}

/// Reads a CA bundle into a root store. Errors name the file and the problem.
pub fn read_roots(path: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in pem::read_certs(path)? {
        roots
            .add(cert)
            .map_err(|e| format!("{path}: not usable as a CA certificate: {e}"))?;
    }
    Ok(roots)
}

/// Loads the certificates and client CAs of every TLS listener of `config`, by listener index
/// (`None` for plain listeners). Errors name the field (`listen[1].tls.certs[0].key_file`).
pub fn load_listeners(config: &Config) -> Result<Vec<Option<ListenerTls>>, Vec<ConfigError>> {
    let mut errors = Vec::new();
    let mut out = Vec::new();
    for (i, listen) in config.listen.iter().enumerate() {
        let Some(tls) = &listen.tls else {
            out.push(None);
            continue;
        };
        let path = format!("listen[{i}].tls");
        let certs = CertSet::load(&path, tls).map_err(|e| errors.extend(e));
        let roots = match &tls.client_ca_file {
            None => Ok(None),
            Some(file) => read_roots(file)
                .map(|r| Some(Arc::new(r)))
                .map_err(|e| errors.push(ConfigError::new(format!("{path}.client_ca_file"), e))),
        };
        if let (Ok(certs), Ok(client_roots)) = (certs, roots) {
            out.push(Some(ListenerTls {
                certs: Arc::new(certs),
                client_roots,
            }));
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// The certificate resolvers of the running TLS listeners, by listener index. Created once at
/// start; a successful reload hands each the newly loaded certificates.
pub struct ListenerCerts {
    resolvers: Vec<Option<Arc<SniResolver>>>,
}

impl ListenerCerts {
    /// Resolvers over the certificates of `listeners` (from [`load_listeners`]).
    pub fn new(listeners: &[Option<ListenerTls>]) -> Self {
        ListenerCerts {
            resolvers: listeners
                .iter()
                .map(|l| {
                    l.as_ref()
                        .map(|l| Arc::new(SniResolver::new(l.certs.clone())))
                })
                .collect(),
        }
    }

    /// The resolver of listener `index`, if it is a TLS listener.
    pub fn resolver(&self, index: usize) -> Option<Arc<SniResolver>> {
        self.resolvers.get(index).cloned().flatten()
    }

    /// Serves the certificates of a newly built snapshot from now on.
    pub fn replace(&self, listeners: &[Option<ListenerTls>]) {
        for (resolver, loaded) in self.resolvers.iter().zip(listeners) {
            if let (Some(r), Some(l)) = (resolver, loaded) {
                r.replace(l.certs.clone());
            }
        }
    }
}
