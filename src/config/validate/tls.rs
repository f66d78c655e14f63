//! Validation of the TLS and HTTP/2 settings: `listen` entries, `upstreams.<name>.tls` and
//! `identity.mtls` (docs/DESIGN.md 4b). File contents (certificates, keys, CAs) are read and
//! parsed when the snapshot is built (`crate::tls`), so `tollgate check` reports them too.

use super::Check;
use crate::config::model::*;
use crate::config::raw::{RawListen, RawListenTls, RawMtls, RawUpstreamTls};

/// `listen:`: plain `"ip:port"` strings or `{ addr, tls, h2 }`; addresses must be unique.
pub(super) fn listen_settings(c: &mut Check, raw: &[RawListen]) -> Vec<ListenSettings> {
    let mut out: Vec<ListenSettings> = Vec::new();
    for (i, entry) in raw.iter().enumerate() {
        let path = format!("listen[{i}]");
        let (addr_path, addr, tls, h2) = match entry {
            RawListen::Addr(a) => (path.clone(), a, None, false),
            RawListen::Full(f) => (
                format!("{path}.addr"),
                &f.addr,
                f.tls.as_ref(),
                f.h2.unwrap_or(false),
            ),
        };
        let Some(addr) = c.socket_addr(&addr_path, addr) else {
            continue;
        };
        if out.iter().any(|l| l.addr == addr) {
            c.err(&addr_path, format!("duplicate listen address {addr}"));
        }
        let tls = tls.and_then(|t| listen_tls(c, &format!("{path}.tls"), t));
        out.push(ListenSettings { addr, tls, h2 });
    }
    out
}

fn listen_tls(c: &mut Check, path: &str, t: &RawListenTls) -> Option<ListenTls> {
    let mut certs = Vec::new();
    match (&t.cert_file, &t.key_file) {
        (Some(cert), Some(key)) => certs.push(CertFiles {
            cert_file: cert.clone(),
            key_file: key.clone(),
        }),
        (Some(_), None) => c.err(format!("{path}.key_file"), "is required with cert_file"),
        (None, Some(_)) => c.err(format!("{path}.cert_file"), "is required with key_file"),
        (None, None) => {}
    }
    for pair in t.certs.iter().flatten() {
        certs.push(CertFiles {
            cert_file: pair.cert_file.clone(),
            key_file: pair.key_file.clone(),
        });
    }
    for (j, pair) in certs.iter().enumerate() {
        for (field, value) in [("cert_file", &pair.cert_file), ("key_file", &pair.key_file)] {
            if value.trim().is_empty() {
                c.err(format!("{path}.certs[{j}].{field}"), "must not be empty");
            }
        }
    }
    if certs.is_empty() {
        c.err(
            path,
            "needs a certificate: cert_file and key_file, or certs: [{ cert_file, key_file }]",
        );
        return None;
    }
    if t.client_ca_file
        .as_deref()
        .is_some_and(|f| f.trim().is_empty())
    {
        c.err(format!("{path}.client_ca_file"), "must not be empty");
    }
    Some(ListenTls {
        certs,
        client_ca_file: t.client_ca_file.clone(),
    })
}

/// `identity.mtls`.
pub(super) fn mtls(c: &mut Check, m: &RawMtls) -> Option<MtlsTenantFrom> {
    match m.tenant_from.as_str() {
        "subject_cn" => Some(MtlsTenantFrom::SubjectCn),
        other => {
            c.err(
                "identity.mtls.tenant_from",
                format!("\"{other}\" is not supported (subject_cn)"),
            );
            None
        }
    }
}

/// `identity.mtls` is only meaningful with a listener that verifies client certificates.
pub(super) fn check_mtls_listener(
    c: &mut Check,
    identity: &IdentitySettings,
    listen: &[ListenSettings],
) {
    let verifies = listen
        .iter()
        .any(|l| l.tls.as_ref().is_some_and(|t| t.client_ca_file.is_some()));
    if identity.mtls.is_some() && !verifies {
        c.err(
            "identity.mtls",
            "needs a listener with tls.client_ca_file (client certificates are only verified there)",
        );
    }
}

/// The host part of a backend written `host:port` (`[v6]:port` keeps the address only).
fn backend_host(backend: &str) -> &str {
    let host = match backend.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => backend,
    };
    host.trim_start_matches('[').trim_end_matches(']')
}

/// `upstreams.<name>.tls`. The SNI defaults to the host of the first backend as written (like
/// nginx `proxy_ssl_name`), so `backends: ["orders.internal:443"]` needs no `sni`.
pub(super) fn upstream_tls(
    c: &mut Check,
    path: &str,
    t: &RawUpstreamTls,
    backends: &[String],
) -> UpstreamTls {
    let sni = match &t.sni {
        Some(s) => s.clone(),
        None => backends
            .first()
            .map(|b| backend_host(b).to_string())
            .unwrap_or_default(),
    };
    if sni.is_empty() || sni.contains(['/', ' ', ':']) && sni.parse::<std::net::IpAddr>().is_err() {
        c.err(
            format!("{path}.tls.sni"),
            format!("\"{sni}\" is not a host name or IP address"),
        );
    }
    if t.ca_file.as_deref().is_some_and(|f| f.trim().is_empty()) {
        c.err(format!("{path}.tls.ca_file"), "must not be empty");
    }
    UpstreamTls {
        sni,
        ca_file: t.ca_file.clone(),
        verify: t.verify.unwrap_or(true),
    }
}

#[cfg(test)]
mod tests {
    use super::backend_host;

    #[test]
    fn backend_host_strips_port_and_brackets() {
        assert_eq!(backend_host("orders.internal:443"), "orders.internal");
        assert_eq!(backend_host("127.0.0.1:9001"), "127.0.0.1");
        assert_eq!(backend_host("[::1]:8443"), "::1");
        assert_eq!(backend_host("localhost"), "localhost");
    }
}
