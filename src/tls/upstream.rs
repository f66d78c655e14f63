//! HTTPS to backends: the SNI, trust anchors and verification of `upstreams.<name>.tls`, applied
//! to every Pingora peer of the upstream (requests and health checks alike).

use super::pem;
use super::pinned::Pins;
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
    /// When `ca_file` pins the backend's own self-signed certificates (and `verify` is on):
    /// the handshake skips webpki's chain check and [`PeerTls::check_connection`] matches the
    /// presented certificate against these.
    pins: Option<Arc<Pins>>,
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
        let mut pins = None;
        let ca = match &settings.ca_file {
            None => None,
            Some(file) => {
                let certs = pem::read_certs(file)
                    .map_err(|e| ConfigError::new(format!("{path}.tls.ca_file"), e))?;
                certs.iter().for_each(|c| c.as_ref().hash(&mut digest));
                pins = Pins::of(&certs).filter(|_| settings.verify).map(Arc::new);
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
            pins,
        })
    }

    /// Makes `peer` (created with TLS on) use this SNI, CA and verification. With pins, the
    /// handshake's chain and name checks are off (the handshake signature is still checked)
    /// and [`check_connection`](Self::check_connection) must pass before a request is sent.
    pub fn apply(&self, peer: &mut HttpPeer) {
        let chain_checked = self.verify && self.pins.is_none();
        peer.sni = self.sni.clone();
        peer.options.verify_cert = chain_checked;
        peer.options.verify_hostname = chain_checked;
        peer.options.ca = self.ca.clone();
        peer.group_key = self.trust_group;
    }
}

impl PeerTls {
    /// For an upstream pinned by its backends' own certificates: the presented certificate
    /// (its SHA-256 from the connection's TLS digest) must be one of the pins, valid now and
    /// for the SNI. `Ok` for any other upstream. Errors: `InvalidCert` from the upstream, its
    /// reason in the context (the 502's detail, [`tls_failure_detail`]).
    pub fn check_connection(&self, presented_sha256: Option<&[u8]>) -> pingora::Result<()> {
        let Some(pins) = &self.pins else {
            return Ok(());
        };
        let checked = match presented_sha256 {
            Some(sha) if !sha.is_empty() => pins.check(sha, &self.sni),
            _ => Err("the backend presented no certificate".to_string()),
        };
        checked.map_err(|why| {
            Error::create(
                ErrorType::InvalidCert,
                pingora::ErrorSource::Upstream,
                Some(format!("{why}, SNI: {}", self.sni).into()),
                None,
            )
        })
    }
}

/// When `e` is a TLS failure towards a backend, the reason for the 502 problem body, e.g.
/// `TLS handshake with the upstream failed: TLS connect() failed: invalid peer certificate:
/// UnknownIssuer, SNI: orders.internal`.
pub fn tls_failure_detail(e: &Error) -> Option<String> {
    match e.etype() {
        ErrorType::TLSHandshakeFailure | ErrorType::InvalidCert | ErrorType::HandshakeError => {
            // Pingora wraps a hook's error (a pinned certificate refused after connecting) in
            // one naming the peer: the reason is the innermost certificate error's.
            let mut e = e;
            while let Some(inner) = e
                .cause
                .as_deref()
                .and_then(|c| {
                    (c.downcast_ref::<Error>())
                        .or_else(|| c.downcast_ref::<Box<Error>>().map(|b| &**b))
                })
                .filter(|c| *c.etype() == ErrorType::InvalidCert)
            {
                e = inner;
            }
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
