//! Reading PEM files: certificate chains, private keys and CA bundles. Every error is a plain
//! sentence naming the file and what is wrong, for a [`ConfigError`](crate::config::ConfigError).

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io::BufReader;
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;

/// Every `CERTIFICATE` block of `path`, in file order, each checked to be a parsable X.509
/// certificate. Errors: unreadable file, bad PEM, no certificate, a block that is not X.509.
pub fn read_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let file = std::fs::File::open(path).map_err(|e| crate::config::unreadable(path, &e))?;
    let certs = rustls_pemfile::certs(&mut BufReader::new(file))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{path} is not valid PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{path} contains no PEM CERTIFICATE"));
    }
    for (i, c) in certs.iter().enumerate() {
        X509Certificate::from_der(c.as_ref())
            .map_err(|e| format!("{path}: certificate #{} is not valid X.509: {e}", i + 1))?;
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 RSA or SEC1 EC) of `path`.
pub fn read_key(path: &str) -> Result<PrivateKeyDer<'static>, String> {
    let file = std::fs::File::open(path).map_err(|e| crate::config::unreadable(path, &e))?;
    rustls_pemfile::private_key(&mut BufReader::new(file))
        .map_err(|e| format!("{path} is not valid PEM: {e}"))?
        .ok_or_else(|| format!("{path} contains no PEM private key"))
}

/// What a leaf certificate is valid for: its DNS subject alternative names (lower case), or
/// its subject CN when it has none; and its `notAfter` as unix seconds.
pub struct LeafInfo {
    pub names: Vec<String>,
    pub not_after_s: i64,
}

/// Reads [`LeafInfo`] from a DER certificate (already checked by [`read_certs`]).
pub fn leaf_info(der: &[u8]) -> LeafInfo {
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return LeafInfo {
            names: Vec::new(),
            not_after_s: i64::MAX,
        };
    };
    let mut names: Vec<String> = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    x509_parser::extensions::GeneralName::DNSName(d) => {
                        Some(d.to_ascii_lowercase())
                    }
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    if names.is_empty() {
        names.extend(subject_cn(&cert).map(|cn| cn.to_ascii_lowercase()));
    }
    LeafInfo {
        names,
        not_after_s: cert.validity().not_after.timestamp(),
    }
}

/// The subject common name (CN) of a certificate, if it has one that is valid UTF-8.
pub fn subject_cn(cert: &X509Certificate<'_>) -> Option<String> {
    cert.subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(str::to_string)
}

/// The subject CN of a DER certificate.
pub fn subject_cn_of_der(der: &[u8]) -> Option<String> {
    X509Certificate::from_der(der)
        .ok()
        .and_then(|(_, c)| subject_cn(&c))
}
