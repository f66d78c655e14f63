//! Fields that proxies set to tell the backend about the original request: `Forwarded` (RFC 7239),
//! `X-Real-IP` and the `X-Forwarded-*` family (`-Host`, `-Port`, `-Prefix`, ...). A backend
//! behind tollgate may build redirect URLs from them or log and trust them as the client's
//! address, so a client must not be able to set them. From a peer outside
//! `edge.trusted_proxies` they are dropped, as Traefik does for untrusted peers; a trusted
//! load balancer's values pass. `X-Forwarded-For` and `X-Forwarded-Proto` are not in this set:
//! tollgate writes those itself for every request.
//!
//! Pure: a name in, a verdict out.

/// True when `name` (a lower-case field name, as [`http::HeaderName`] holds it) is a
/// proxy-set field that only a trusted peer may send: `forwarded`, `x-real-ip`, or
/// `x-forwarded-<anything>` other than `-for` and `-proto`. A `_` is read as `-` (a CGI-style
/// backend reads `X_Real_IP` as `X-Real-IP`), and with a `_` even `x_forwarded_for` counts.
pub fn only_from_trusted_peers(name: &[u8]) -> bool {
    const PREFIX: &[u8] = b"x-forwarded-";
    let same = |n: &[u8], t: &[u8]| {
        n.len() == t.len()
            && n.iter()
                .zip(t)
                .all(|(&a, &b)| a == b || (a == b'_' && b == b'-'))
    };
    if same(name, b"forwarded") || same(name, b"x-real-ip") {
        return true;
    }
    if name.len() <= PREFIX.len() || !same(&name[..PREFIX.len()], PREFIX) {
        return false;
    }
    name.contains(&b'_') || !matches!(&name[PREFIX.len()..], b"for" | b"proto")
}

#[cfg(test)]
mod tests {
    use super::only_from_trusted_peers as only;

    #[test]
    fn forwarded_real_ip_and_the_x_forwarded_family() {
        for name in [
            "forwarded",
            "x-real-ip",
            "x-forwarded-host",
            "x-forwarded-port",
            "x-forwarded-prefix",
            "x-forwarded-server",
            "x-forwarded-uri",
            "x-forwarded-ssl",
            "x-forwarded-client-cert",
        ] {
            assert!(only(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn underscores_read_as_hyphens() {
        for name in [
            "x_real_ip",
            "x_forwarded_host",
            "x-forwarded_port",
            "x_forwarded_for",
        ] {
            assert!(only(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn tollgates_own_fields_and_other_names_pass() {
        for name in [
            "x-forwarded-for",
            "x-forwarded-proto",
            "x-forwarded-",
            "x-forwarded",
            "forwarded-for",
            "x-real-ips",
            "host",
            "x-request-id",
            "",
        ] {
            assert!(!only(name.as_bytes()), "{name}");
        }
    }
}
