//! Pingora `TlsSettings` for one TLS listener: certificates from an [`SniResolver`], TLS 1.2
//! and 1.3 only (Pingora's rustls acceptor offers exactly these), ALPN `h2,http/1.1` when `h2`
//! is on, and client certificate verification with the subject CN kept for the identity stage.

use super::certs::SniResolver;
use super::pem;
use super::ListenerTls;
use async_trait::async_trait;
use pingora::listeners::tls::TlsSettings;
use pingora::listeners::TlsAccept;
use pingora::protocols::tls::TlsRef;
use rustls::server::WebPkiClientVerifier;
use std::any::Any;
use std::sync::Arc;

/// What the handshake learnt about a verified client certificate; attached to the connection's
/// `SslDigest` extension and read by the identity stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// Subject common name of the leaf certificate.
    pub subject_cn: String,
}

/// Reads the client's leaf certificate after a completed handshake (rustls has verified it
/// against `client_ca_file` by then).
struct ClientCertNames;

#[async_trait]
impl TlsAccept for ClientCertNames {
    async fn handshake_complete_callback(
        &self,
        tls: &TlsRef,
    ) -> Option<Arc<dyn Any + Send + Sync>> {
        let cn = pem::subject_cn_of_der(tls.peer_certificate_der()?)?;
        Some(Arc::new(ClientCert { subject_cn: cn }))
    }
}

/// The settings of a TLS listener. With `client_roots`, a client without a certificate signed
/// by one of them fails the handshake (like nginx `ssl_verify_client on`).
/// Errors: the client CA store cannot make a verifier (e.g. it is empty).
pub fn tls_settings(
    loaded: &ListenerTls,
    resolver: Arc<SniResolver>,
    h2: bool,
) -> Result<TlsSettings, String> {
    super::install_crypto_provider();
    let mut settings = TlsSettings::with_callbacks(Box::new(ClientCertNames))
        .map_err(|e| format!("TLS settings: {e}"))?;
    settings.set_cert_resolver(resolver);
    if let Some(roots) = &loaded.client_roots {
        let verifier = WebPkiClientVerifier::builder_with_provider(
            roots.clone(),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .map_err(|e| format!("client_ca_file: {e}"))?;
        settings.set_client_cert_verifier(verifier);
    }
    if h2 {
        settings.enable_h2();
    }
    Ok(settings)
}
