//! Server certificates of one TLS listener, chosen by SNI, and the resolver that lets a reload
//! replace them without touching open connections.
//!
//! Selection (like nginx `server_name` on certificates): an exact name of a certificate's DNS
//! SANs, else a `*.suffix` wildcard SAN matching exactly one more label, else the listener's
//! first certificate (also for clients that send no SNI).

use super::pem;
use crate::config::{ConfigError, ListenTls};
use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The loaded certificates of one listener.
#[derive(Debug)]
pub struct CertSet {
    keys: Vec<Arc<CertifiedKey>>,
    /// Exact DNS name → index in `keys` (first certificate that names it wins).
    exact: HashMap<String, usize>,
    /// Wildcard suffix (`.example.com` for `*.example.com`) → index.
    wildcard: HashMap<String, usize>,
}

impl CertSet {
    /// Reads and checks every certificate/key pair of `tls` (`path` is the field path, e.g.
    /// `listen[1].tls`). Errors: unreadable or non-PEM files, no certificate, no key, a key that
    /// does not belong to its certificate or is of an unsupported type; each names its field.
    /// An expired certificate is loaded (clients decide) with a warning.
    pub fn load(path: &str, tls: &ListenTls) -> Result<CertSet, Vec<ConfigError>> {
        super::install_crypto_provider();
        let provider = rustls::crypto::ring::default_provider();
        let mut errors = Vec::new();
        let mut set = CertSet {
            keys: Vec::new(),
            exact: HashMap::new(),
            wildcard: HashMap::new(),
        };
        let now_s = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        for (j, files) in tls.certs.iter().enumerate() {
            let field = format!("{path}.certs[{j}]");
            let certs = pem::read_certs(&files.cert_file)
                .map_err(|e| errors.push(ConfigError::new(format!("{field}.cert_file"), e)));
            let key = pem::read_key(&files.key_file)
                .map_err(|e| errors.push(ConfigError::new(format!("{field}.key_file"), e)));
            let (Ok(certs), Ok(key)) = (certs, key) else {
                continue;
            };
            let info = pem::leaf_info(certs[0].as_ref());
            let certified = match CertifiedKey::from_der(certs, key, &provider) {
                Ok(k) => k,
                Err(e) => {
                    errors.push(ConfigError::new(
                        format!("{field}.key_file"),
                        format!("{} does not fit {}: {e}", files.key_file, files.cert_file),
                    ));
                    continue;
                }
            };
            if info.not_after_s < now_s {
                tracing::warn!(field = %field, file = %files.cert_file, "TLS certificate has expired; clients will refuse it");
            }
            let index = set.keys.len();
            set.keys.push(Arc::new(certified));
            for name in info.names {
                match name.strip_prefix('*') {
                    Some(suffix) if suffix.starts_with('.') => {
                        set.wildcard.entry(suffix.to_string()).or_insert(index);
                    }
                    _ => {
                        set.exact.entry(name).or_insert(index);
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(set)
        } else {
            Err(errors)
        }
    }

    /// The certificate for a client's SNI `server_name` (see the module doc for the order).
    pub fn select(&self, server_name: Option<&str>) -> Arc<CertifiedKey> {
        let by_name = server_name.and_then(|name| {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            self.exact.get(&name).copied().or_else(|| {
                let dot = name.find('.')?;
                self.wildcard.get(&name[dot..]).copied()
            })
        });
        self.keys[by_name.unwrap_or(0)].clone()
    }
}

/// rustls certificate resolver over the listener's current [`CertSet`], replaced atomically on
/// reload; a handshake in progress keeps the set it started with.
#[derive(Debug)]
pub struct SniResolver {
    current: ArcSwap<CertSet>,
}

impl SniResolver {
    pub fn new(set: Arc<CertSet>) -> Self {
        SniResolver {
            current: ArcSwap::new(set),
        }
    }

    /// Serves `set` to every handshake from now on.
    pub fn replace(&self, set: Arc<CertSet>) {
        self.current.store(set);
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load().select(hello.server_name()))
    }
}
