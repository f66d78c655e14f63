//! Validation of the TLS settings: `listen[].tls`, `upstreams.<name>.tls` and `identity.mtls`
//! (docs/DESIGN.md 4b). File contents (certificates, keys, CAs) are read and
//! parsed when the snapshot is built (`crate::tls`), so `tollgate check` reports them too.

use super::common::Check;
use crate::config::model::*;
use crate::config::raw::{RawListenTls, RawMtls, RawUpstreamTls};

/// `listen[i].tls` at `path`: one certificate or several (`certs`), and the optional
/// `client_ca_file`. `None` when no certificate is usable.
pub(super) fn listen_tls(c: &mut Check, path: &str, t: &RawListenTls) -> Option<ListenTls> {
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
    if certs.is_empty() && t.cert_file.is_none() && t.key_file.is_none() {
        c.err(
            path,
            "needs a certificate: cert_file and key_file, or certs: [{ cert_file, key_file }]",
        );
    }
    if certs.is_empty() {
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
    use crate::config::{parse, MtlsTenantFrom};

    const TAIL: &str = r#"
upstreams:
  orders: { backends: ["localhost:443"], tls: { ca_file: "ca.pem" } }
  plain: { backends: ["127.0.0.1:9001"] }
routes:
  - { path_prefix: "/", upstream: orders }
"#;

    fn errors(yaml: &str) -> Vec<String> {
        crate::config::parse_errors(yaml)
    }

    #[test]
    fn listen_strings_and_maps_both_parse() {
        let c = parse(&format!(
            r#"listen:
  - "127.0.0.1:8080"
  - {{ addr: "127.0.0.1:8443", tls: {{ cert_file: a.crt, key_file: a.key, certs: [{{ cert_file: b.crt, key_file: b.key }}] }}, h2: true }}
  - {{ addr: "127.0.0.1:8081", h2: true }}
{TAIL}"#
        ))
        .unwrap();
        assert_eq!(c.listen.len(), 3);
        assert!(c.listen[0].tls.is_none() && !c.listen[0].h2);
        let tls = c.listen[1].tls.as_ref().unwrap();
        assert_eq!(tls.certs.len(), 2);
        assert_eq!(tls.certs[0].cert_file, "a.crt");
        assert_eq!(tls.certs[1].key_file, "b.key");
        assert!(c.listen[1].h2);
        assert!(c.listen[2].tls.is_none() && c.listen[2].h2);
        let up = c.upstreams["orders"].tls.as_ref().unwrap();
        assert_eq!(up.sni, "localhost", "SNI defaults to the backend host");
        assert!(up.verify, "verification is on by default");
        assert!(c.upstreams["plain"].tls.is_none());
    }

    #[test]
    fn tls_mistakes_name_their_field() {
        let e = errors(&format!(
            "listen:\n  - {{ addr: \"127.0.0.1:8443\", tls: {{ cert_file: a.crt }} }}\n{TAIL}"
        ));
        assert_eq!(e, ["listen[0].tls.key_file: is required with cert_file"]);
        let e = errors(&format!(
            "listen:\n  - {{ addr: \"127.0.0.1:8443\", tls: {{}} }}\n{TAIL}"
        ));
        assert!(
            e[0].starts_with("listen[0].tls: needs a certificate"),
            "{e:?}"
        );
        let e = errors(&format!(
            "listen:\n  - {{ addr: \"127.0.0.1:8443\", tls: {{ cert_fil: a }} }}\n{TAIL}"
        ));
        assert!(
            e.len() == 1 && e[0].starts_with("listen[0].tls: unknown field `cert_fil`"),
            "{e:?}"
        );
        let e = errors(&format!(
            "listen: [\"127.0.0.1:1\", {{ addr: \"127.0.0.1:1\" }}]\n{TAIL}"
        ));
        assert_eq!(e, ["listen[1].addr: duplicate listen address 127.0.0.1:1"]);
    }

    #[test]
    fn mtls_needs_a_verifying_listener_and_a_known_source() {
        let e = errors(&format!(
            "listen: [\"127.0.0.1:1\"]\nidentity: {{ mtls: {{ tenant_from: subject_cn }} }}\n{TAIL}"
        ));
        assert_eq!(
            e,
            ["identity.mtls: needs a listener with tls.client_ca_file (client certificates are only verified there)"]
        );
        let e = errors(&format!(
            "listen: [\"127.0.0.1:1\"]\nidentity: {{ mtls: {{ tenant_from: serial }} }}\n{TAIL}"
        ));
        assert!(
            e.contains(
                &r#"identity.mtls.tenant_from: "serial" is not supported (subject_cn)"#.to_string()
            ),
            "{e:?}"
        );
        let c = parse(&format!(
            "listen: [{{ addr: \"127.0.0.1:1\", tls: {{ cert_file: a, key_file: b, client_ca_file: c }} }}]\n\
             identity: {{ mtls: {{ tenant_from: subject_cn }} }}\n{TAIL}"
        ))
        .unwrap();
        assert_eq!(c.identity.mtls, Some(MtlsTenantFrom::SubjectCn));
    }

    #[test]
    fn backend_host_strips_port_and_brackets() {
        assert_eq!(backend_host("orders.internal:443"), "orders.internal");
        assert_eq!(backend_host("127.0.0.1:9001"), "127.0.0.1");
        assert_eq!(backend_host("[::1]:8443"), "::1");
        assert_eq!(backend_host("localhost"), "localhost");
    }
}
