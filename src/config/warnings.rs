//! Things a valid config may get wrong on purpose but usually does by accident. `tollgate check`
//! prints them and startup / reload log them; none of them fails a load.
//!
//! - `edge.trusted_proxies` trusting everyone (`0.0.0.0/0`, `::/0`) or a broad range: IPv4 wider
//!   than /16 (more than 65 536 addresses, e.g. `10.0.0.0/8`), IPv6 wider than /48 (a whole site).
//!   Any client inside a trusted range chooses its own edge bucket with `X-Forwarded-For`; list the
//!   proxies actually in front of the gateway.
//! - a route with `auth: none` or `optional` that takes requests from an `auth: required` route:
//!   a longer prefix under it on the same host (`/admin/public` under `/admin`), the same or an
//!   overlapping prefix on a more specific host (exact beats `*.suffix` beats any host), or the
//!   very same prefix on a broader host to the same upstream (other `Host` values reach the
//!   protected backend without credentials).
//! - limit rules keyed only by client-chosen values, or matching routes that exist nowhere.
//! - an upstream's `tls.ca_file` holding a self-signed CA certificate that names hosts among other
//!   certificates (a CA bundle): pinned as the backend's own certificate, verification refuses
//!   it (`CaUsedAsEndEntity`). A file of such certificates only is a pin list, accepted.
//! - a limit rule keyed by values the client chooses (`header:`, `query:`) and otherwise only by
//!   `route`, `method` or `host` (no `tenant`, `client_ip` or `claim:`): a client mints new
//!   buckets by varying them.
//! - a limit rule's `match.routes` entry under no configured route's prefix and above none (on
//!   any host): no routed request has such a path, so it matches nothing.
//! - an HMAC JWT secret shorter than its hash (32 bytes for HS256, RFC 7518 section 3.2).
//! - a duration under its old name (`redis.timeout_ms: 50`), with the unit form to write
//!   instead (`timeout: 50ms`), noted by validation.

use super::{AuthMode, Config, ConfigError, HostMatch, KeyPart, LimitRule, RouteSettings};
use ipnet::IpNet;

/// Narrowest IPv4 prefix length that is not "broad" (a /16: 65 536 addresses).
pub const BROAD_IPV4_PREFIX: u8 = 16;
/// Narrowest IPv6 prefix length that is not "broad" (a /48: one site).
pub const BROAD_IPV6_PREFIX: u8 = 48;

/// Every warning for `config`, each with the field path it is about.
pub fn warnings(config: &Config) -> Vec<ConfigError> {
    let mut out = config.old_spellings.clone();
    let behind_proxies = config
        .edge
        .as_ref()
        .is_some_and(|e| !e.trusted_proxies.is_empty());
    if behind_proxies && config.server.http.max_connections_per_client > 0 {
        out.push(ConfigError::new(
            "server.max_connections_per_client",
            "counts connections per TCP peer, and with edge.trusted_proxies set the peers are \
             your proxies: every client behind one proxy shares its limit",
        ));
    }
    if let Some(edge) = &config.edge {
        for (i, net) in edge.trusted_proxies.iter().enumerate() {
            if let Some(reason) = broad_trust(net) {
                out.push(ConfigError::new(
                    format!("edge.trusted_proxies[{i}]"),
                    reason,
                ));
            }
        }
    }
    for required in config
        .routes
        .iter()
        .filter(|r| r.auth == AuthMode::Required)
    {
        for open in config
            .routes
            .iter()
            .filter(|r| r.auth != AuthMode::Required)
        {
            if let Some(how) = shadows(open, required) {
                let auth = if open.auth == AuthMode::None {
                    "none"
                } else {
                    "optional"
                };
                out.push(ConfigError::new(
                    format!("{}.auth", open.field),
                    format!(
                        "is \"{auth}\" but takes requests from {} (auth: required, path_prefix \"{}\"): {how}",
                        required.field, required.path_prefix
                    ),
                ));
            }
        }
    }
    for (i, rule) in config.limits.iter().enumerate() {
        out.extend(rule_warnings(i, rule, &config.routes));
    }
    if let Some(jwt) = &config.identity.jwt {
        for (i, k) in jwt.keys.iter().enumerate() {
            out.extend(short_hmac_secret(&format!("identity.jwt.keys[{i}]"), k));
        }
    }
    for (name, u) in &config.upstreams {
        let ca = u.tls.as_ref().and_then(|t| t.ca_file.as_deref());
        if let Some(why) = ca.and_then(self_signed_ca_that_names_hosts) {
            out.push(ConfigError::new(
                format!("upstreams.{name}.tls.ca_file"),
                why,
            ));
        }
    }
    out
}

/// What TLS verification will say of a backend whose own certificate is pinned in `ca_file`
/// while it is a CA certificate, when the file mixes a self-signed CA certificate that names
/// hosts (a subject alternative name: CA roots do not; `openssl req -x509` without extensions
/// makes such a certificate, `CA:TRUE`) with other certificates. A file of self-signed
/// certificates naming hosts only is a pin list ([`is_pin_list`]) and accepted as such.
/// Unreadable files are `check`'s errors, not warnings.
fn self_signed_ca_that_names_hosts(file: &str) -> Option<String> {
    let data = std::fs::read(file).ok()?;
    let ders: Vec<_> = rustls_pemfile::certs(&mut &data[..])
        .filter_map(Result::ok)
        .collect();
    let ders: Vec<&[u8]> = ders.iter().map(|d| d.as_ref()).collect();
    let found = ders.iter().any(|der| {
        let (self_signed, names_hosts, ca) = shape(der);
        ca && self_signed && names_hosts
    });
    (found && !is_pin_list(&ders)).then(|| SELF_SIGNED_CA_ADVICE.to_string())
}

/// (self-signed, names hosts, CA:TRUE) of a DER certificate; all false when it does not parse.
fn shape(der: &[u8]) -> (bool, bool, bool) {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let Ok((_, c)) = X509Certificate::from_der(der) else {
        return (false, false, false);
    };
    let self_signed = c.subject().as_raw() == c.issuer().as_raw();
    let names_hosts = matches!(c.subject_alternative_name(), Ok(Some(_)));
    (self_signed, names_hosts, c.is_ca())
}

/// Whether a `ca_file`'s certificates (DER, not empty) pin backends' own certificates: every
/// one self-signed (subject = issuer) and naming hosts (a subject alternative name), `CA:TRUE`
/// or not. Such a file is checked by exact match, not as a CA bundle (`tls::pinned`).
pub fn is_pin_list(ders: &[&[u8]]) -> bool {
    !ders.is_empty()
        && ders.iter().all(|der| {
            let (self_signed, names_hosts, _) = shape(der);
            self_signed && names_hosts
        })
}

/// The advice for a backend that presents a `CA:TRUE` certificate of its own (also in the 502
/// detail of the handshake failure, `CaUsedAsEndEntity`).
pub const SELF_SIGNED_CA_ADVICE: &str = "holds a self-signed CA certificate (basicConstraints CA:TRUE, what `openssl req -x509` makes by default) that names hosts: if it is the backend's own certificate, verification refuses it (CaUsedAsEndEntity). Give the backend a certificate with CA:FALSE (`openssl req -x509 ... -addext basicConstraints=critical,CA:FALSE -addext subjectAltName=DNS:<host>`) and pin that, or one signed by a CA in this file";

/// The warnings for limit rule `limits[i]`.
fn rule_warnings(i: usize, rule: &LimitRule, routes: &[RouteSettings]) -> Vec<ConfigError> {
    let mut out = Vec::new();
    // Who is asking is only told by tenant, client_ip or a (signed) claim; route, method and
    // host take few values.
    let identifies =
        |p: &KeyPart| matches!(p, KeyPart::Tenant | KeyPart::ClientIp | KeyPart::Claim(_));
    if rule.key.iter().any(KeyPart::client_chosen) && !rule.key.iter().any(identifies) {
        out.push(ConfigError::new(
            format!("limits[{i}].key"),
            "identifies the client only by values it chooses (header:, query:): a client can mint new buckets by varying them; add tenant or client_ip",
        ));
    }
    for (j, prefix) in rule.matcher.routes.iter().enumerate() {
        if !routes
            .iter()
            .any(|r| under(prefix, &r.path_prefix) || under(&r.path_prefix, prefix))
        {
            out.push(ConfigError::new(
                format!("limits[{i}].match.routes[{j}]"),
                format!(
                    "\"{prefix}\" is under no configured route: the rule matches no request by it"
                ),
            ));
        }
    }
    out
}

/// Why trusting `net` for `X-Forwarded-For` is risky, if it is.
fn broad_trust(net: &IpNet) -> Option<String> {
    let (len, narrowest, family) = match net {
        IpNet::V4(n) => (n.prefix_len(), BROAD_IPV4_PREFIX, "IPv4"),
        // IPv4-mapped IPv6 (::ffff:0:0/96) is IPv4 in disguise.
        IpNet::V6(n) if n.prefix_len() >= 96 && n.network().to_ipv4_mapped().is_some() => {
            (n.prefix_len() - 96, BROAD_IPV4_PREFIX, "IPv4")
        }
        IpNet::V6(n) => (n.prefix_len(), BROAD_IPV6_PREFIX, "IPv6"),
    };
    if len == 0 {
        Some(format!(
            "\"{net}\" trusts every {family} address: any client can choose its own edge bucket with X-Forwarded-For"
        ))
    } else if len < narrowest {
        Some(format!(
            "\"{net}\" is a broad range (wider than /{narrowest}): any client inside it can choose its own edge bucket with X-Forwarded-For; list only the proxies in front of the gateway"
        ))
    } else {
        None
    }
}

/// Whether path prefix `inner` is at or below `outer` on segment boundaries (router semantics).
fn under(inner: &str, outer: &str) -> bool {
    inner.starts_with(outer)
        && (outer.ends_with('/')
            || inner.len() == outer.len()
            || inner.as_bytes()[outer.len()] == b'/')
}

/// How specific a host match is, and whether `a` covers every host `b` matches.
fn rank(h: &HostMatch) -> u8 {
    match h {
        HostMatch::Any => 0,
        HostMatch::Suffix(_) => 1,
        HostMatch::Exact(_) => 2,
    }
}

fn covers(a: &HostMatch, b: &HostMatch) -> bool {
    match (a, b) {
        (HostMatch::Any, _) => true,
        (HostMatch::Suffix(s), HostMatch::Exact(h)) => h.len() > s.len() && h.ends_with(s),
        (HostMatch::Suffix(s), HostMatch::Suffix(t)) => t.ends_with(s.as_str()),
        (x, y) => x == y,
    }
}

/// How route `open` takes requests meant for `required`, if it does.
fn shadows(open: &RouteSettings, required: &RouteSettings) -> Option<&'static str> {
    let (o, r) = (&open.path_prefix, &required.path_prefix);
    if open.host == required.host && o != r && under(o, r) {
        return Some("a longer prefix on the same host wins");
    }
    let more_specific = covers(&required.host, &open.host)
        && rank(&open.host) > rank(&required.host)
        || matches!((&open.host, &required.host), (HostMatch::Suffix(a), HostMatch::Suffix(b)) if a.len() > b.len() && a.ends_with(b.as_str()));
    if more_specific && (under(o, r) || under(r, o)) {
        return Some("a more specific host wins over any prefix");
    }
    if o == r && open.upstream == required.upstream && covers(&open.host, &required.host) {
        return Some("the same prefix on a broader host reaches the same upstream");
    }
    None
}

/// An HMAC secret shorter than its hash (`HS256`: 32 bytes, `HS384`: 48, `HS512`: 64): RFC 7518
/// section 3.2 requires a key at least that size. Read as the loader reads it (a file's one
/// trailing newline trimmed); an unreadable secret is the loader's error, not a warning.
fn short_hmac_secret(path: &str, k: &super::JwtKeySettings) -> Option<ConfigError> {
    use jsonwebtoken::Algorithm::{HS256, HS384, HS512};
    let need = match k.algorithm {
        HS256 => 32,
        HS384 => 48,
        HS512 => 64,
        _ => return None,
    };
    let (field, len) = match &k.source {
        super::KeySource::SecretEnv(var) => ("secret_env", std::env::var(var).ok()?.len()),
        super::KeySource::SecretFile(file) => {
            let bytes = std::fs::read(file).ok()?;
            let trimmed = match bytes.as_slice() {
                [rest @ .., b'\r', b'\n'] | [rest @ .., b'\n'] => rest.len(),
                b => b.len(),
            };
            ("secret_file", trimmed)
        }
        super::KeySource::PublicKeyFile(_) => return None,
    };
    (len < need).then(|| {
        ConfigError::new(
            format!("{path}.{field}"),
            format!(
                "a {:?} secret of {len} bytes: RFC 7518 section 3.2 requires at least {need} (the hash size); \
                 a short secret can be guessed offline from one token (make one with: head -c {need} /dev/urandom | base64)",
                k.algorithm
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(edge: &str, routes: &str) -> Config {
        let yaml = format!(
            "listen: [\"127.0.0.1:8080\"]\n{edge}\
             identity: {{ api_keys: {{ keys: [] }} }}\n\
             upstreams:\n  a: {{ backends: [\"127.0.0.1:9001\"] }}\n  b: {{ backends: [\"127.0.0.1:9002\"] }}\n\
             routes:\n{routes}"
        );
        super::super::parse(&yaml).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn texts(c: &Config) -> Vec<String> {
        warnings(c).iter().map(|w| w.to_string()).collect()
    }

    const ONE_ROUTE: &str = "  - { path_prefix: \"/\", upstream: a }\n";

    #[test]
    fn trusted_proxy_ranges() {
        let edge =
            |list: &str| format!("edge: {{ limit: 1, per: 1s, trusted_proxies: [{list}] }}\n");
        let w = texts(&config(&edge("\"0.0.0.0/0\", \"::/0\""), ONE_ROUTE));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with("edge.trusted_proxies[0]: \"0.0.0.0/0\" trusts every IPv4 address")
        );
        assert!(w[1].starts_with("edge.trusted_proxies[1]: \"::/0\" trusts every IPv6 address"));
        let w = texts(&config(
            &edge("\"10.0.0.0/8\", \"172.16.0.0/12\", \"2001:db8::/32\", \"::ffff:0:0/96\""),
            ONE_ROUTE,
        ));
        assert_eq!(w.len(), 4, "{w:?}");
        assert!(w[0].contains("broad range (wider than /16)"), "{w:?}");
        assert!(w[2].contains("wider than /48"), "{w:?}");
        assert!(w[3].contains("trusts every IPv4 address"), "{w:?}");
        let narrow = edge("\"192.168.0.0/16\", \"10.1.2.3\", \"2001:db8:1::/48\", \"fd00::1\"");
        assert!(texts(&config(&narrow, ONE_ROUTE)).is_empty());
    }

    #[test]
    fn open_routes_shadowing_required_ones() {
        let req = "  - { path_prefix: \"/admin\", upstream: a, auth: required }\n";
        // A longer prefix under the protected one, same host.
        let w = texts(&config(
            "",
            &format!("{req}  - {{ path_prefix: \"/admin/public\", upstream: a, auth: none }}\n"),
        ));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("routes[1].auth: is \"none\" but takes requests from routes[0]"),
            "{w:?}"
        );
        // Optional counts too.
        let w = texts(&config(
            "",
            &format!("{req}  - {{ path_prefix: \"/admin/x/\", upstream: b, auth: optional }}\n"),
        ));
        assert_eq!(w.len(), 1, "{w:?}");
        // A more specific host wins whatever the prefix.
        let w = texts(&config(
            "",
            &format!("{req}  - {{ host: \"api.example.com\", path_prefix: \"/\", upstream: b, auth: none }}\n"),
        ));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("more specific host"), "{w:?}");
        // Same prefix on a broader host to the same upstream.
        let w = texts(&config(
            "",
            "  - { host: \"api.example.com\", path_prefix: \"/admin\", upstream: a, auth: required }\n  \
             - { path_prefix: \"/admin\", upstream: a, auth: none }\n",
        ));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("broader host"), "{w:?}");
    }

    #[test]
    fn limit_rules_keyed_by_client_chosen_values_or_matching_no_route() {
        let rules = |key: &str, routes: &str| {
            format!(
                "redis: {{ url: \"redis://127.0.0.1:6379\" }}\nlimits:\n  - {{ name: r, key: [{key}], limit: 1, per: 1s, match: {{ routes: [{routes}] }} }}\n"
            )
        };
        let api = "  - { path_prefix: \"/api\", upstream: a }\n";
        let w = texts(&config(&rules("\"header:x-user\", \"query:q\"", ""), api));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("limits[0].key: identifies the client only by values it chooses"),
            "{w:?}"
        );
        assert!(w[0].ends_with("add tenant or client_ip"), "{w:?}");
        let w = texts(&config(&rules("\"query:q\", method", ""), api));
        assert_eq!(w.len(), 1, "{w:?}");
        let w = texts(&config(
            &rules("tenant", "\"/api/search\", \"/ap\", \"/\""),
            api,
        ));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("limits[0].match.routes[1]: \"/ap\" is under no configured route"),
            "{w:?}"
        );
        for key in [
            "\"header:x-user\", client_ip",
            "tenant, \"query:q\"",
            "\"claim:sub\", \"header:x\"",
            "method",
        ] {
            assert_eq!(
                texts(&config(&rules(key, "\"/api\""), api)),
                Vec::<String>::new(),
                "{key}"
            );
        }
    }

    #[test]
    fn ordinary_layouts_do_not_warn() {
        // The layout: a catch-all open route and a protected prefix.
        let ok = "  - { path_prefix: \"/admin\", upstream: a, auth: required }\n  \
                  - { path_prefix: \"/\", upstream: a, auth: none }\n  \
                  - { path_prefix: \"/administrator\", upstream: b, auth: none }\n  \
                  - { host: \"api.example.com\", path_prefix: \"/orders\", upstream: a, auth: required }\n  \
                  - { host: \"api.example.com\", path_prefix: \"/public\", upstream: a, auth: none }\n";
        assert_eq!(texts(&config("", ok)), Vec::<String>::new());
    }
}
