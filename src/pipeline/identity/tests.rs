use super::*;
use crate::identity::{hash_key, Method, ANONYMOUS_TIER};
use crate::pipeline::test_support::snapshot;
use crate::snapshot::Snapshot;

fn snap() -> Snapshot {
    snapshot(&format!(
        "routes:\n  - {{ path_prefix: \"/\", upstream: orders }}\nredis: {{ url: \"redis://127.0.0.1:1\" }}\ntiers:\n  free: {{ limit: 1, per: 1h }}\n  anonymous: {{ limit: 1, per: 1h }}\nidentity:\n  default_tier: free\n  api_keys:\n    keys:\n      - {{ sha256: \"{}\", tenant: acme }}\n",
        hash_key("acme-key")
    ))
}

fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (n, v) in pairs {
        h.append(*n, http::HeaderValue::from_static(v));
    }
    h
}

fn creds(h: &HeaderMap) -> Credentials<'_> {
    Credentials {
        headers: h,
        cert_cn: None,
        client: "192.0.2.7".parse().unwrap(),
        ipv6_prefix: 64,
        now_s: 1_700_000_000,
    }
}

#[test]
fn a_known_key_identifies_its_tenant_and_tier() {
    let s = snap();
    let h = headers(&[("x-api-key", "acme-key")]);
    for mode in [AuthMode::Required, AuthMode::Optional] {
        let id = decide(&s.auth, mode, &creds(&h)).unwrap();
        assert_eq!(
            (id.tenant.as_str(), id.tier.as_deref()),
            ("acme", Some("free"))
        );
        assert_eq!(id.method, Method::ApiKey);
    }
}

#[test]
fn no_credentials_is_401_when_required_else_anonymous() {
    let s = snap();
    let none = HeaderMap::new();
    let r = decide(&s.auth, AuthMode::Required, &creds(&none)).unwrap_err();
    assert_eq!(
        (r.layer, r.reason),
        (Layer::Identity, Outcome::Unauthenticated)
    );
    assert_eq!(r.problem.status, 401);
    assert_eq!(r.headers, [("WWW-Authenticate", "Bearer".to_string())]);
    let id = decide(&s.auth, AuthMode::Optional, &creds(&none)).unwrap();
    assert_eq!(id.tenant, "ip:192.0.2.7");
    assert_eq!(
        (id.tier.as_deref(), id.method),
        (Some(ANONYMOUS_TIER), Method::Anonymous)
    );
}

#[test]
fn auth_none_ignores_even_bad_credentials() {
    let s = snap();
    let bad = headers(&[("x-api-key", "wrong")]);
    let id = decide(&s.auth, AuthMode::None, &creds(&bad)).unwrap();
    assert_eq!(id.method, Method::Anonymous);
    let r = decide(&s.auth, AuthMode::Optional, &creds(&bad)).unwrap_err();
    assert_eq!(
        (r.reason, r.problem.status),
        (Outcome::Unauthenticated, 401)
    );
    assert_eq!(
        r.headers,
        [(
            "WWW-Authenticate",
            "Bearer error=\"invalid_token\"".to_string()
        )]
    );
}

#[test]
fn duplicate_key_header_is_400_rejected_without_challenge() {
    let s = snap();
    let dup = headers(&[("x-api-key", "acme-key"), ("x-api-key", "acme-key")]);
    let r = decide(&s.auth, AuthMode::Required, &creds(&dup)).unwrap_err();
    assert_eq!((r.reason, r.problem.status), (Outcome::Rejected, 400));
    assert!(r.headers.is_empty());
}
