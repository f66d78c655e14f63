//! HTTPS to backends: the SNI, trust anchors and verification of `upstreams.<name>.tls`, applied
//! to every Pingora peer of the upstream (requests and health checks alike).

use super::pem;
use crate::config::warnings::SELF_SIGNED_CA_ADVICE;
use crate::config::{ConfigError, UpstreamTls};
use pingora::protocols::tls::CaType;
use pingora::upstreams::peer::HttpPeer;
use pingora::utils::tls::{parse_x509, WrappedX509};
use pingora::{Error, ErrorType};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// TLS client settings of one upstream, loaded once per snapshot.
pub struct PeerTls {
    pub sni: String,
    pub verify: bool,
    /// Private CA bundle; `None` = the system trust store (loaded by Pingora at start).
    ca: Option<Arc<CaType>>,
    /// Digest of the CA bundle, as the peer's connection-reuse group: Pingora's pool key does
    /// not include the CA, so without it a connection verified against one upstream's CA would
    /// be reused by another upstream that trusts a different CA (same address and SNI).
    trust_group: u64,
}

impl PeerTls {
    /// Loads `settings.ca_file` (`path` is the upstream's field path). Logs a warning when
    /// verification is off. Errors: unreadable or non-PEM CA file, named `<path>.tls.ca_file`.
    pub fn load(path: &str, settings: &UpstreamTls) -> Result<PeerTls, ConfigError> {
        let mut digest = std::collections::hash_map::DefaultHasher::new();
        let ca = match &settings.ca_file {
            None => None,
            Some(file) => {
                let certs = pem::read_certs(file)
                    .map_err(|e| ConfigError::new(format!("{path}.tls.ca_file"), e))?;
                certs.iter().for_each(|c| c.as_ref().hash(&mut digest));
                let wrapped: Vec<WrappedX509> = certs
                    .into_iter()
                    .map(|c| WrappedX509::new(c.as_ref().to_vec(), parse_x509))
                    .collect();
                Some(Arc::from(wrapped.into_boxed_slice()))
            }
        };
        if !settings.verify {
            tracing::warn!(
                upstream = %path,
                "{path}.tls.verify is false: backend certificates are NOT verified (anyone on the path can impersonate the backend)"
            );
        }
        Ok(PeerTls {
            sni: settings.sni.clone(),
            verify: settings.verify,
            trust_group: if ca.is_some() { digest.finish() } else { 0 },
            ca,
        })
    }

    /// Makes `peer` (created with TLS on) use this SNI, CA and verification.
    pub fn apply(&self, peer: &mut HttpPeer) {
        peer.sni = self.sni.clone();
        peer.options.verify_cert = self.verify;
        peer.options.verify_hostname = self.verify;
        peer.options.ca = self.ca.clone();
        peer.group_key = self.trust_group;
    }
}

/// When `e` is a TLS failure towards a backend, the reason for the 502 problem body, e.g.
/// `TLS handshake with the upstream failed: TLS connect() failed: invalid peer certificate:
/// UnknownIssuer, SNI: orders.internal`.
pub fn tls_failure_detail(e: &Error) -> Option<String> {
    match e.etype() {
        ErrorType::TLSHandshakeFailure | ErrorType::InvalidCert | ErrorType::HandshakeError => {
            let why = e
                .context
                .as_ref()
                .map(|c| c.as_str().to_string())
                .unwrap_or_else(|| e.etype().as_str().to_string());
            let advice = if why.contains("CaUsedAsEndEntity") {
                format!("; the backend's certificate is a CA certificate: the CA file {SELF_SIGNED_CA_ADVICE}")
            } else {
                String::new()
            };
            Some(format!(
                "TLS handshake with the upstream failed: {why}{advice}"
            ))
        }
        _ => None,
    }
}
