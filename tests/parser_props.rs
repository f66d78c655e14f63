//! Stable-toolchain property tests of the parsers that see untrusted or hand-written input
//! (issue 11, "Fuzzing"): the `X-Forwarded-For` walk, JWT header/claims parsing, and the config
//! loader + validator. The same targets run for long under cargo-fuzz; here each property has a
//! fixed case budget so CI finishes in a few seconds. Pure: no network, injected clocks.

use ipnet::IpNet;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use proptest::prelude::*;
use serde_json::{Map, Value};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;
use tollgate::config::{JwtKeySettings, JwtSettings, KeySource};
use tollgate::http::client_ip::{client_ip, normalize, parse_entry};
use tollgate::identity::jwt::JwtVerifier;
use tollgate::identity::IdentityError;
use tollgate::limit::bounds;
use tollgate::tenant_id;

// ---------------------------------------------------------------------------------------------
// X-Forwarded-For
// ---------------------------------------------------------------------------------------------

/// Addresses from a few small pools, so trusted ranges are hit often.
fn address() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        (0u8..4, any::<u8>()).prop_map(|(a, b)| IpAddr::V4(Ipv4Addr::new(10, 0, a, b))),
        any::<u32>().prop_map(|v| IpAddr::V4(Ipv4Addr::from(v))),
        (0u16..4, any::<u16>())
            .prop_map(|(a, b)| IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, a, 0, 0, 0, b))),
        any::<u32>().prop_map(|v| IpAddr::V6(Ipv4Addr::from(v).to_ipv6_mapped())),
        any::<u128>().prop_map(|v| IpAddr::V6(Ipv6Addr::from(v))),
    ]
}

/// One element as a proxy (or an attacker) might write it.
fn entry() -> impl Strategy<Value = String> {
    prop_oneof![
        address().prop_map(|a| a.to_string()),
        (address(), any::<u16>()).prop_map(|(a, p)| match a {
            IpAddr::V4(v4) => format!("{v4}:{p}"),
            IpAddr::V6(v6) => format!("[{v6}]:{p}"),
        }),
        address().prop_map(|a| format!("  [{a}] ")),
        Just("unknown".to_string()),
        Just(String::new()),
        "[ -~]{0,24}",
        any::<String>(),
    ]
}

fn header_values() -> impl Strategy<Value = Vec<String>> {
    let value = prop::collection::vec(entry(), 0..6).prop_map(|e| e.join(","));
    prop::collection::vec(value, 0..4)
}

fn trusted() -> impl Strategy<Value = Vec<IpNet>> {
    let nets = [
        "10.0.0.0/8",
        "10.0.1.0/24",
        "fd00::/16",
        "0.0.0.0/0",
        "::/0",
        "192.0.2.1/32",
    ];
    prop::collection::vec(0..nets.len(), 0..3)
        .prop_map(move |ix| ix.into_iter().map(|i| nets[i].parse().unwrap()).collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Never panics; the result is the (normalised) peer or one of the header's entries; an
    /// untrusted peer is always its own client address.
    #[test]
    fn forwarded_for_walk(peer in address(), values in header_values(), trusted in trusted()) {
        let got = client_ip(peer, values.iter().map(String::as_str), &trusted);
        let entries: Vec<IpAddr> = values
            .iter()
            .flat_map(|v| v.split(','))
            .filter_map(parse_entry)
            .map(normalize)
            .collect();
        prop_assert!(
            got == normalize(peer) || entries.contains(&got),
            "{got} is neither the peer {peer} nor an entry of {values:?}"
        );
        let peer_trusted = trusted.iter().any(|n| n.contains(&normalize(peer)));
        if !peer_trusted {
            prop_assert_eq!(got, normalize(peer));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// JWT
// ---------------------------------------------------------------------------------------------

const SECRET: &[u8] = b"parser-props-hmac-secret-0123456789abcdef";
const NOW: u64 = 1_800_000_000;

/// A verifier with one HS256 key (no kid), tenant claim `tenant` (falling back to `sub`), tier
/// claim `tier`, issuer and audience unchecked. Built once.
fn verifier() -> &'static JwtVerifier {
    static VERIFIER: OnceLock<JwtVerifier> = OnceLock::new();
    VERIFIER.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("tollgate-props-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("hs.secret");
        std::fs::write(&file, SECRET).unwrap();
        let settings = JwtSettings {
            issuer: None,
            audience: None,
            leeway_s: 30,
            tenant_claim: "tenant".into(),
            tier_claim: Some("tier".into()),
            keys: vec![JwtKeySettings {
                kid: None,
                algorithm: Algorithm::HS256,
                source: KeySource::SecretFile(file.display().to_string()),
            }],
            issuers: Vec::new(),
        };
        let v = JwtVerifier::build(&settings).expect("verifier");
        let _ = std::fs::remove_dir_all(&dir);
        v
    })
}

fn b64(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

/// Arbitrary JSON values, nested a little.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        (NOW - 100..NOW + 100).prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        "[ -~]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Tenant-id candidates: plain, padded, blank, control characters, reserved, long, non-ASCII,
/// braces, and arbitrary JSON.
fn tenant_like() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[ -~]{0,12}".prop_map(Value::String),
        "[ \t\u{a0}\u{3000}]{0,3}[a-z]{0,4}[ \u{a0}]{0,2}".prop_map(Value::String),
        "[a-z]{0,3}[\u{0}-\u{1f}\u{7f}-\u{9f}][a-z]{0,3}".prop_map(Value::String),
        "ip:[0-9.]{1,7}".prop_map(Value::String),
        "[a-z{}%é日]{250,260}".prop_map(Value::String),
        "[a-z{}%é日 ]{1,8}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
        json_value(),
    ]
}

/// Claims where each registered claim is absent, plausible or arbitrary; `exp` is mostly valid,
/// so that the tenant rules are reached.
fn claims() -> impl Strategy<Value = Map<String, Value>> {
    let exp = prop_oneof![
        6 => Just(Some(Value::from(NOW + 600))),
        1 => Just(None),
        1 => json_value().prop_map(Some),
    ];
    let other = || prop::option::of(json_value());
    (
        prop::option::of(tenant_like()),
        prop::option::of(tenant_like()),
        prop::option::of(tenant_like()),
        exp,
        (other(), other(), other(), other()),
    )
        .prop_map(|(sub, tenant, tier, exp, (nbf, iss, aud, iat))| {
            let named = [
                ("sub", sub),
                ("tenant", tenant),
                ("tier", tier),
                ("exp", exp),
                ("nbf", nbf),
                ("iss", iss),
                ("aud", aud),
                ("iat", iat),
            ];
            named
                .into_iter()
                .filter_map(|(n, v)| v.map(|v| (n.to_string(), v)))
                .collect()
        })
}

/// Something token-shaped: three (or another number of) dot-separated parts whose header may
/// decode to JSON, and arbitrary text.
fn token_like() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[A-Za-z0-9_.=+/-]{0,80}",
        (json_value(), json_value(), "[A-Za-z0-9_-]{0,43}").prop_map(|(h, c, s)| format!(
            "{}.{}.{s}",
            b64(h.to_string().as_bytes()),
            b64(c.to_string().as_bytes())
        )),
        (prop::collection::vec(any::<u8>(), 0..40), 1usize..6)
            .prop_map(|(bytes, n)| { vec![b64(&bytes); n].join(".") }),
        Just(format!(
            "{}.{}.",
            b64(br#"{"alg":"none"}"#),
            b64(br#"{"sub":"a"}"#)
        )),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, failure_persistence: None, ..ProptestConfig::default() })]

    /// Arbitrary text as a token: an `InvalidToken` error, never a panic, never accepted.
    #[test]
    fn arbitrary_tokens_are_rejected(token in token_like(), now in any::<u64>()) {
        let v = verifier();
        match v.verify(&token, now) {
            Err(IdentityError::InvalidToken(reason)) => prop_assert!(!reason.is_empty()),
            other => prop_assert!(false, "{token:?}: {other:?}"),
        }
    }

    /// A validly signed token with arbitrary claim values: accepted only with a tenant id that
    /// passes the one tenant-id validation, else a typed `InvalidToken`; never a panic.
    #[test]
    fn signed_tokens_with_arbitrary_claims(claims in claims()) {
        let v = verifier();
        let key = EncodingKey::from_secret(SECRET).unwrap();
        let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key).unwrap();
        match v.verify(&token, NOW) {
            Ok(c) => {
                prop_assert_eq!(tenant_id::validate(&c.tenant), Ok(()));
                let source = claims.get("tenant").filter(|t| !t.is_null()).or(claims.get("sub"));
                prop_assert_eq!(source.and_then(Value::as_str), Some(c.tenant.as_str()));
            }
            Err(IdentityError::InvalidToken(reason)) => prop_assert!(!reason.is_empty()),
            Err(other) => prop_assert!(false, "untyped error {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Config loader + validator
// ---------------------------------------------------------------------------------------------

/// Scalars an operator (or a typo) might write, as YAML text.
fn scalar() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("1".to_string()),
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("5000000000000".to_string()),
        Just("9223372036854775808".to_string()),
        Just("1e300".to_string()),
        Just("~".to_string()),
        Just("[]".to_string()),
        Just("{}".to_string()),
        Just("1d".to_string()),
        Just("0ms".to_string()),
        Just("99999999999999999999d".to_string()),
        Just("250ms".to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<String>().prop_map(|s| Value::String(s).to_string()),
        "[ -~]{0,10}".prop_map(|s| Value::String(s).to_string()),
    ]
}

/// A config built from the real sections with random values, random ids and dropped lines.
fn yaml_ish() -> impl Strategy<Value = String> {
    let line = |prefix: &'static str| scalar().prop_map(move |v| format!("{prefix}{v}"));
    let lines = (
        prop::collection::vec(scalar(), 7),
        prop::collection::vec(scalar(), 5),
        any::<String>().prop_map(|s| Value::String(s).to_string()),
        prop::collection::vec(any::<bool>(), 8),
        line("edge: "),
    );
    lines.prop_map(|(t, o, id, keep, edge)| {
        let parts = [
            "listen: [\"127.0.0.1:8080\"]".to_string(),
            "redis: { url: \"redis://127.0.0.1:6379\" }".to_string(),
            format!("tiers: {{ T: {{ limit: {}, per: {}, burst: {} }} }}", t[0], t[1], t[2]),
            format!(
                "tenants: {{ {id}: {{ limit: {}, per: {}, burst: {}, tier: {} }} }}",
                o[0], o[1], o[2], o[3]
            ),
            format!(
                "identity: {{ default_tier: T, api_keys: {{ keys: [{{ sha256: {}, tenant: {} }}] }} }}",
                t[3], t[4]
            ),
            "upstreams: { echo: { backends: [\"127.0.0.1:9001\"] } }".to_string(),
            format!("routes: [{{ path_prefix: {}, upstream: echo, cost: {} }}]", t[5], t[6]),
            edge,
        ];
        parts
            .iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|(p, _)| p.as_str())
            .collect::<Vec<_>>()
            .join("\n")
            + &format!("\n# {}\n", o[4].replace('\n', " "))
    })
}

/// Every error names a field path, or (YAML syntax and problems of the whole document) says
/// where in the text or that it is about the document.
fn check_errors(yaml: &str) -> Result<(), TestCaseError> {
    match tollgate::config::parse(yaml) {
        Err(errors) => {
            prop_assert!(!errors.is_empty());
            for e in &errors {
                let about_document = e.reason.contains("line") || e.reason.contains("document");
                prop_assert!(
                    !e.path.is_empty() || about_document,
                    "error without a field path or location: {e:?}\n{yaml}"
                );
            }
        }
        Ok(config) => {
            // What validation accepts is in range and has valid tenant ids, merged overrides too.
            for tier in config.tiers.values() {
                prop_assert_eq!(bounds::check(&tier.rate), Ok(()));
                for (id, o) in &config.tenants {
                    prop_assert_eq!(bounds::check(&o.merged(tier.rate)), Ok(()), "{}", id);
                }
            }
            for id in config.tenants.keys() {
                prop_assert_eq!(tenant_id::validate(id), Ok(()));
            }
            for k in config.identity.api_keys.iter().flat_map(|a| &a.keys) {
                prop_assert_eq!(tenant_id::validate(&k.tenant), Ok(()));
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

    /// Structured YAML with random values: never panics; errors carry a field path; accepted
    /// configs satisfy the bounds and the tenant-id rules.
    #[test]
    fn config_loader_on_yaml_ish_input(yaml in yaml_ish()) {
        check_errors(&yaml)?;
    }

    /// Arbitrary text (and arbitrary text after a valid prefix): never panics.
    #[test]
    fn config_loader_on_arbitrary_text(text in any::<String>(), prefix in any::<bool>()) {
        let yaml = if prefix { format!("listen: [\"127.0.0.1:1\"]\n{text}") } else { text };
        check_errors(&yaml)?;
    }
}
