//! Fields that proxies set to tell the backend about the original request: `Forwarded` (RFC 7239),
//! `X-Real-IP`, the `X-Forwarded-*` family (`-Host`, `-Port`, `-Prefix`, ...), the client-address
//! fields of CDNs and load balancers (`True-Client-IP`, `CF-Connecting-IP`, `X-Client-IP`, ...)
//! and the URL and host overrides of rewriting proxies (`X-Original-URL`, `X-Rewrite-URL`,
//! `X-Original-Host`, ...). A backend behind tollgate may trust them for the client's address, for
//! redirect URLs or even for the path it serves, so a client must not be able to set them. From a
//! peer outside `edge.trusted_proxies` they are dropped (Traefik does so for the `X-Forwarded-*`
//! family); a trusted load balancer's values pass. Their `_` spellings (`X_Real_IP`), which no
//! proxy sets but a CGI-style backend reads as the real name, are dropped from every peer.
//! `X-Forwarded-For` and `X-Forwarded-Proto` are not in this set: tollgate writes those itself.
//!
//! Pure: a name in, a verdict out.

/// What a client's field name is, as far as proxy-set fields go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyField {
    /// Another field: passes.
    Other,
    /// A proxy-set field: passes only from a trusted peer.
    Field,
    /// A `_` spelling of one: dropped from every peer.
    Lookalike,
}

/// The proxy-set fields other than the `X-Forwarded-*` family, lower case.
const NAMES: [&[u8]; 13] = [
    b"forwarded",
    b"x-real-ip",
    b"x-client-ip",
    b"true-client-ip",
    b"cf-connecting-ip",
    b"x-cluster-client-ip",
    b"client-ip",
    b"x-original-url",
    b"x-rewrite-url",
    b"x-original-host",
    b"x-host",
    b"front-end-https",
    b"x-url-scheme",
];

/// Classifies `name`, a lower-case field name as [`http::HeaderName`] holds it; `_` is read as
/// `-`. `x-forwarded-<anything>` counts except `x-forwarded-for` and `x-forwarded-proto` spelled
/// with hyphens.
pub fn classify(name: &[u8]) -> ProxyField {
    use super::lookalike::same_once_underscores_read as reads_as;
    const PREFIX: &[u8] = b"x-forwarded-";
    let family = name.len() > PREFIX.len()
        && reads_as(&name[..PREFIX.len()], PREFIX)
        && !matches!(name, b"x-forwarded-for" | b"x-forwarded-proto");
    if !family && !NAMES.iter().any(|n| reads_as(name, n)) {
        ProxyField::Other
    } else if name.contains(&b'_') {
        ProxyField::Lookalike
    } else {
        ProxyField::Field
    }
}

#[cfg(test)]
mod tests {
    use super::{classify, ProxyField, NAMES};

    fn all(names: &[&str], want: ProxyField) {
        for name in names {
            assert_eq!(classify(name.as_bytes()), want, "{name}");
        }
    }

    #[test]
    fn proxy_set_fields_pass_only_from_trusted_peers() {
        let family = [
            "x-forwarded-host",
            "x-forwarded-port",
            "x-forwarded-prefix",
            "x-forwarded-server",
            "x-forwarded-for-original",
        ];
        all(&family, ProxyField::Field);
        for name in NAMES {
            assert_eq!(classify(name), ProxyField::Field);
        }
    }

    #[test]
    fn underscore_spellings_are_lookalikes() {
        let names = [
            "x_real_ip",
            "x_forwarded_host",
            "x-forwarded_port",
            "x_forwarded_for",
            "x_forwarded_proto",
            "true_client_ip",
            "x_original_url",
        ];
        all(&names, ProxyField::Lookalike);
    }

    #[test]
    fn tollgates_own_fields_and_other_names_pass() {
        let names = [
            "x-forwarded-for",
            "x-forwarded-proto",
            "x-forwarded-",
            "x-forwarded",
            "forwarded-for",
            "x-real-ips",
            "via",
            "host",
            "x-request-id",
            "",
        ];
        all(&names, ProxyField::Other);
    }
}
