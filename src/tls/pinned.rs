//! Backends pinned by their own self-signed certificate, the way curl and nginx accept them: a
//! `ca_file` whose every certificate is self-signed and names hosts is a list of pins. The
//! backend must present exactly one of them (byte for byte, as its SHA-256), valid now and
//! naming the upstream's SNI; `CA:TRUE` or not, as `openssl req -x509` makes them.
//!
//! webpki (Pingora's rustls verifier) refuses a `CA:TRUE` certificate presented as the server's
//! own (`CaUsedAsEndEntity`) and Pingora takes no verifier of ours, so for a pin list the
//! handshake skips the chain check (the handshake signature is still verified against the
//! presented certificate's key: the backend holds that key) and [`Pins::check`] runs on the
//! connection before the first byte of a request is written.

use crate::config::warnings::is_pin_list;
use rustls::pki_types::{CertificateDer, ServerName};
use sha2::{Digest, Sha256};
use x509_parser::prelude::{FromDer, X509Certificate};

/// One pinned certificate: its DER and SHA-256.
struct Pin {
    der: CertificateDer<'static>,
    sha256: Vec<u8>,
}

/// The certificates of a `ca_file` that pins backends' own self-signed certificates.
pub struct Pins {
    pins: Vec<Pin>,
}

impl Pins {
    /// `Some` when `certs` (a `ca_file`'s, in file order) is a pin list: every one self-signed
    /// and naming hosts (a subject alternative name); `None` for a CA bundle, verified as one.
    pub fn of(certs: &[CertificateDer<'static>]) -> Option<Pins> {
        let ders: Vec<&[u8]> = certs.iter().map(|c| c.as_ref()).collect();
        is_pin_list(&ders).then(|| Pins {
            pins: certs
                .iter()
                .map(|c| Pin {
                    sha256: Sha256::digest(c.as_ref()).to_vec(),
                    der: c.clone(),
                })
                .collect(),
        })
    }

    /// Checks the certificate a backend presented, given as the SHA-256 of its DER (what the
    /// TLS digest holds): it must be one of the pins, within its validity period now, and valid
    /// for `sni` (DNS or IP subject alternative names, webpki's rules). Errors: the reason, as
    /// a sentence for the 502's detail.
    pub fn check(&self, presented_sha256: &[u8], sni: &str) -> Result<(), String> {
        let pin = self
            .pins
            .iter()
            .find(|p| p.sha256 == presented_sha256)
            .ok_or("the backend's certificate is none of those pinned in ca_file")?;
        let (_, cert) = X509Certificate::from_der(pin.der.as_ref())
            .map_err(|e| format!("the pinned certificate does not parse: {e}"))?;
        if !cert.validity().is_valid() {
            return Err("the pinned certificate is expired or not yet valid".to_string());
        }
        let name = ServerName::try_from(sni.to_string())
            .map_err(|_| format!("the SNI {sni:?} is not a host name"))?;
        let ee = webpki::EndEntityCert::try_from(&pin.der)
            .map_err(|e| format!("the pinned certificate does not parse: {e:?}"))?;
        ee.verify_is_valid_for_subject_name(&name)
            .map_err(|_| format!("the pinned certificate is not valid for name {sni:?}"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
