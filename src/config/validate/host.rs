//! `routes[].host`: only what the router can match. Requests are routed on the `Host` (or
//! authority) lower-cased, without port and without a trailing dot
//! ([`crate::http::normalize_host`]), and compared as text: an exact host, a
//! `*.suffix` on whole labels, or any host.

use crate::config::model::HostMatch;
use std::net::Ipv6Addr;

/// The longest DNS label (RFC 1035 2.3.4).
const MAX_LABEL: usize = 63;
/// The longest DNS name, in text form without the final dot.
const MAX_NAME: usize = 253;

/// `routes[i].host` as written → how the router matches it, or why no request can match it.
pub(super) fn route_host(h: &str) -> Result<HostMatch, String> {
    if h == "*" {
        return Ok(HostMatch::Any);
    }
    if h.is_empty() {
        return Err("is empty (omit host, or write \"*\", to match any host)".into());
    }
    if h.chars().any(char::is_whitespace) {
        return Err("contains whitespace".into());
    }
    if h.contains(['/', '?', '#']) {
        return Err("contains a path or query: a route's host is only the host name (put the path in path_prefix)".into());
    }
    if let Some(inner) = h.strip_prefix('[') {
        return ipv6_literal(h, inner);
    }
    if let Some((name, port)) = h.rsplit_once(':') {
        if h.parse::<Ipv6Addr>().is_ok() {
            return Err(format!("an IPv6 address needs brackets: write \"[{h}]\""));
        }
        if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && !name.contains(':') {
            return Err(format!(
                "has a port: requests are routed on the host without its port; write \"{name}\""
            ));
        }
        return Err("':' is only allowed in a bracketed IPv6 address ([::1])".into());
    }
    let (wildcard, name) = match h.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, h),
    };
    if name.len() > 1 && name.ends_with('.') && !name.starts_with('.') {
        return Err(format!(
            "ends with '.': requests are routed on the host without its final dot; write \"{}\"",
            h.trim_end_matches('.')
        ));
    }
    if name.contains('*') || (!wildcard && h.starts_with('*')) {
        return Err(
            "a wildcard is only allowed as the whole first label (\"*.example.com\")".into(),
        );
    }
    dns_name(name)?;
    let name = name.to_ascii_lowercase();
    Ok(if wildcard {
        HostMatch::Suffix(format!(".{name}"))
    } else {
        HostMatch::Exact(name)
    })
}

/// `[v6]` (brackets kept, as in the request's host).
fn ipv6_literal(h: &str, inner: &str) -> Result<HostMatch, String> {
    let Some((addr, after)) = inner.split_once(']') else {
        return Err("has '[' without a closing ']'".into());
    };
    if !after.is_empty() {
        return Err(format!(
            "has something after the IPv6 address (a port?): requests are routed on the host without its port; write \"[{addr}]\""
        ));
    }
    if addr.parse::<Ipv6Addr>().is_err() {
        return Err(format!("\"{addr}\" inside brackets is not an IPv6 address"));
    }
    Ok(HostMatch::Exact(h.to_ascii_lowercase()))
}

/// Letters, digits, `-` and `_` in non-empty labels of at most 63 bytes (an IPv4 address is such
/// a name too).
fn dns_name(name: &str) -> Result<(), String> {
    if name.len() > MAX_NAME {
        return Err(format!("is longer than {MAX_NAME} characters"));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err("has an empty label (a leading '.', or \"..\")".into());
        }
        if label.len() > MAX_LABEL {
            return Err(format!(
                "has a label longer than {MAX_LABEL} characters (\"{label}\")"
            ));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_')))
        {
            return Err(format!(
                "contains {c:?}: a host is letters, digits, '-', '_' and '.', or an IP address"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(h: &str) -> HostMatch {
        route_host(h).unwrap_or_else(|e| panic!("{h}: {e}"))
    }

    fn why(h: &str) -> String {
        match route_host(h) {
            Ok(m) => panic!("{h} accepted as {m:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn accepts_what_the_router_matches() {
        assert_eq!(ok("*"), HostMatch::Any);
        assert_eq!(
            ok("API.Example.com"),
            HostMatch::Exact("api.example.com".into())
        );
        assert_eq!(
            ok("*.Example.com"),
            HostMatch::Suffix(".example.com".into())
        );
        assert_eq!(ok("*.local"), HostMatch::Suffix(".local".into()));
        assert_eq!(ok("gw.test"), HostMatch::Exact("gw.test".into()));
        assert_eq!(ok("localhost"), HostMatch::Exact("localhost".into()));
        assert_eq!(
            ok("my_svc-1.internal"),
            HostMatch::Exact("my_svc-1.internal".into())
        );
        assert_eq!(ok("10.0.0.1"), HostMatch::Exact("10.0.0.1".into()));
        assert_eq!(ok("[::1]"), HostMatch::Exact("[::1]".into()));
        assert_eq!(
            ok("[2001:DB8::1]"),
            HostMatch::Exact("[2001:db8::1]".into())
        );
    }

    #[test]
    fn every_accepted_exact_host_is_its_own_normal_form() {
        // What the router compares a request's host against must survive `normalize_host`.
        for h in ["api.example.com", "10.0.0.1", "[::1]", "a-b_c.d"] {
            let HostMatch::Exact(m) = ok(h) else { panic!() };
            assert_eq!(crate::http::normalize_host(&m), m);
        }
    }

    #[test]
    fn refuses_a_port_with_the_host_to_write() {
        assert!(why("admin.local:80").contains("write \"admin.local\""));
        assert!(why("admin.local:80").contains("without its port"));
        assert!(why("[::1]:8080").contains("write \"[::1]\""));
        assert!(why("10.0.0.1:443").contains("write \"10.0.0.1\""));
        assert!(why("::1").contains("write \"[::1]\""));
        assert!(why("a:b").contains("bracketed IPv6"));
        assert!(why("admin.local:").contains("bracketed IPv6"));
    }

    #[test]
    fn refuses_wildcards_other_than_one_leading_label() {
        for h in [
            "*.*.local",
            "a.*.local",
            "*foo.local",
            "foo*.local",
            "a.local.*",
            "**.a",
            "*a",
        ] {
            assert!(why(h).contains("wildcard"), "{h}: {}", why(h));
        }
        assert!(why("*.").contains("empty label"));
    }

    #[test]
    fn refuses_paths_whitespace_empty_labels_and_other_characters() {
        assert!(why("").contains("empty"));
        assert!(why("admin.local/").contains("path"));
        assert!(why("admin.local/x").contains("path"));
        assert!(why("a.local?x").contains("path"));
        assert!(why(" admin.local").contains("whitespace"));
        assert!(why("admin .local").contains("whitespace"));
        assert!(why("admin.local\t").contains("whitespace"));
        assert!(why("a..local").contains("empty label"));
        assert!(why(".local").contains("empty label"));
        assert!(why("*..local").contains("empty label"));
        assert!(why("admin.local.").contains("write \"admin.local\""));
        assert!(why("user@admin.local").contains("'@'"));
        assert!(why("ad%6Din.local").contains("'%'"));
        assert!(why("a\u{e9}.local").contains("'\u{e9}'"));
        assert!(why("[::1").contains("closing"));
        assert!(why("[1.2.3.4]").contains("not an IPv6 address"));
        assert!(why(&format!("{}.local", "a".repeat(64))).contains("label longer"));
        assert!(why(&["a"; 128].join(".")).contains("longer than 253"));
    }
}
