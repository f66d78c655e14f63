use super::test_support::*;
use super::*;
use crate::config::{ApiKeyEntry, ApiKeySettings, FailurePolicy, JwtSettings};
use crate::limit::Rate;
use http::HeaderValue;
use jsonwebtoken::Algorithm;
use serde_json::json;
use std::net::IpAddr;

const ACME_KEY: &str = "acme-live-0123456789";
const GLOBEX_KEY: &str = "globex-live-0123456789";
const BIGCO_KEY: &str = "bigco-live-0123456789";

fn tiers(names: &[&str]) -> BTreeMap<String, Tier> {
    names
        .iter()
        .map(|n| {
            (
                n.to_string(),
                Tier {
                    name: n.to_string(),
                    rate: Rate::new(60, 60_000, 20),
                    on_failure: FailurePolicy::Local,
                    policy: Default::default(),
                    weight: 1,
                    pool: None,
                    mode: Default::default(),
                    max_in_flight: None,
                    usage: None,
                    refund_on: Default::default(),
                },
            )
        })
        .collect()
}

fn tenants() -> BTreeMap<String, TenantOverride> {
    let mut m = BTreeMap::new();
    m.insert(
        "bigco".to_string(),
        TenantOverride {
            tier: Some("enterprise".into()),
            limit: Some(50_000),
            per_ms: None,
            burst: None,
        },
    );
    m.insert(
        "limitonly".to_string(),
        TenantOverride {
            tier: None,
            limit: Some(5),
            per_ms: None,
            burst: None,
        },
    );
    m
}

fn jwt() -> JwtSettings {
    let mut s = jwt_settings(vec![
        hs_key(Some("h1"), Algorithm::HS256),
        pem_key(Some("k1"), Algorithm::RS256, RSA_PUB),
        pem_key(None, Algorithm::ES256, EC256_PUB),
        pem_key(None, Algorithm::EdDSA, ED_PUB),
    ]);
    s.tenant_claim = "tenant".into();
    s.tier_claim = Some("tier".into());
    s
}

fn api_keys() -> ApiKeySettings {
    ApiKeySettings {
        header: HeaderName::from_static("x-api-key"),
        keys: vec![
            ApiKeyEntry {
                sha256: api_key::key_digest(ACME_KEY),
                tenant: "acme".into(),
                tier: Some("pro".into()),
            },
            ApiKeyEntry {
                sha256: api_key::key_digest(GLOBEX_KEY),
                tenant: "globex".into(),
                tier: None,
            },
            ApiKeyEntry {
                sha256: api_key::key_digest(BIGCO_KEY),
                tenant: "bigco".into(),
                tier: None,
            },
        ],
    }
}

fn settings() -> IdentitySettings {
    IdentitySettings {
        jwt: Some(jwt()),
        api_keys: Some(api_keys()),
        default_tier: Some("free".into()),
        tenant_header: HeaderName::from_static("x-tollgate-tenant"),
        tier_header: HeaderName::from_static("x-tollgate-tier"),
        forward_credentials: false,
        mtls: None,
    }
}

fn auth() -> Authenticator {
    Authenticator::build(
        &settings(),
        &tiers(&["free", "pro", "enterprise"]),
        &tenants(),
    )
    .expect("build")
}

fn bearer(token: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    h
}

fn with_key(mut h: HeaderMap, key: &str) -> HeaderMap {
    h.append("x-api-key", HeaderValue::from_str(key).unwrap());
    h
}

fn token(claims: serde_json::Value) -> String {
    sign(Algorithm::HS256, Some("h1"), &claims)
}

fn claims_with(extra: serde_json::Value) -> serde_json::Value {
    let mut c = good_claims();
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

#[test]
fn authenticator_is_send_sync_clone() {
    fn check<T: Send + Sync + Clone + std::fmt::Debug>() {}
    check::<Authenticator>();
}

#[test]
fn no_credentials_is_anonymous() {
    let a = auth();
    assert_eq!(a.authenticate(&HeaderMap::new(), NOW), Ok(None));
    let mut h = HeaderMap::new();
    h.insert("x-other", HeaderValue::from_static("v"));
    assert_eq!(a.authenticate(&h, NOW), Ok(None));
}

#[test]
fn jwt_identity_with_each_key_family() {
    let a = auth();
    let c = claims_with(json!({"tenant": "acme"}));
    for (alg, kid) in [
        (Algorithm::HS256, Some("h1")),
        (Algorithm::RS256, Some("k1")),
        (Algorithm::RS256, None),
        (Algorithm::ES256, None),
        (Algorithm::EdDSA, None),
    ] {
        let id = a
            .authenticate(&bearer(&sign(alg, kid, &c)), NOW)
            .unwrap()
            .unwrap();
        let claims = id.claims.as_deref().expect("a JWT's claims are kept");
        assert_eq!(claims.get("tenant"), Some(&serde_json::json!("acme")));
        assert_eq!(
            Identity { claims: None, ..id },
            Identity {
                tenant: "acme".into(),
                tier: Some("free".into()),
                method: Method::Jwt,
                claims: None,
            },
            "{alg:?}"
        );
    }
}

#[test]
fn jwt_tier_resolution_order() {
    let a = auth();
    let id = |c| a.authenticate(&bearer(&token(c)), NOW);
    // 1. tier claim wins over the tenants map and the default.
    let r = id(claims_with(json!({"tenant": "bigco", "tier": "pro"})));
    assert_eq!(r.unwrap().unwrap().tier.as_deref(), Some("pro"));
    // 2. tenants map.
    let r = id(claims_with(json!({"tenant": "bigco"})));
    assert_eq!(r.unwrap().unwrap().tier.as_deref(), Some("enterprise"));
    // A tenants entry without tier falls through to the default.
    let r = id(claims_with(json!({"tenant": "limitonly"})));
    assert_eq!(r.unwrap().unwrap().tier.as_deref(), Some("free"));
    // 3. default tier.
    let r = id(claims_with(json!({"tenant": "acme"})));
    assert_eq!(r.unwrap().unwrap().tier.as_deref(), Some("free"));
    // Empty tier claim counts as absent.
    let r = id(claims_with(json!({"tenant": "bigco", "tier": ""})));
    assert_eq!(r.unwrap().unwrap().tier.as_deref(), Some("enterprise"));
    // Tenant falls back to sub (rule 3), and the tenants map applies to it.
    let r = id(claims_with(json!({"sub": "bigco"})));
    let got = r.unwrap().unwrap();
    assert_eq!(
        (got.tenant.as_str(), got.tier.as_deref()),
        ("bigco", Some("enterprise"))
    );
}

#[test]
fn unknown_tier_is_403() {
    let a = auth();
    let r = a.authenticate(
        &bearer(&token(claims_with(json!({"tier": "platinum"})))),
        NOW,
    );
    assert_eq!(r, Err(IdentityError::UnknownTier("platinum".into())));
    assert_eq!(r.unwrap_err().status(), 403);
}

#[test]
fn no_resolvable_tier() {
    let mut s = settings();
    s.default_tier = None;
    // Tiers exist, nothing resolves: 403 with the "<none>" marker.
    let a = Authenticator::build(&s, &tiers(&["free", "pro", "enterprise"]), &tenants()).unwrap();
    let r = a.authenticate(&bearer(&token(good_claims())), NOW);
    assert_eq!(r, Err(IdentityError::UnknownTier(NO_TIER.into())));
    let r = a.authenticate(&with_key(HeaderMap::new(), GLOBEX_KEY), NOW);
    assert_eq!(r, Err(IdentityError::UnknownTier(NO_TIER.into())));
    // ... but tenants with a tier still resolve.
    let r = a.authenticate(&with_key(HeaderMap::new(), BIGCO_KEY), NOW);
    assert_eq!(r.unwrap().unwrap().tier.as_deref(), Some("enterprise"));
    // No tiers at all: tier None.
    let a = Authenticator::build(&s, &BTreeMap::new(), &BTreeMap::new()).unwrap();
    let r = a
        .authenticate(&bearer(&token(good_claims())), NOW)
        .unwrap()
        .unwrap();
    assert_eq!((r.tenant.as_str(), r.tier), ("acme", None));
    let r = a
        .authenticate(&with_key(HeaderMap::new(), GLOBEX_KEY), NOW)
        .unwrap()
        .unwrap();
    assert_eq!(
        (r.tenant.as_str(), r.tier, r.method),
        ("globex", None, Method::ApiKey)
    );
}

#[test]
fn api_key_identity_and_tier_order() {
    let a = auth();
    let id = |k| {
        a.authenticate(&with_key(HeaderMap::new(), k), NOW)
            .unwrap()
            .unwrap()
    };
    // 1. the key's own tier.
    assert_eq!(
        id(ACME_KEY),
        Identity {
            tenant: "acme".into(),
            tier: Some("pro".into()),
            method: Method::ApiKey,
            claims: None,
        }
    );
    // 2. tenants map.
    assert_eq!(id(BIGCO_KEY).tier.as_deref(), Some("enterprise"));
    // 3. default tier.
    assert_eq!(id(GLOBEX_KEY).tier.as_deref(), Some("free"));
    // An explicit key tier beats the tenants map.
    let mut s = settings();
    s.api_keys.as_mut().unwrap().keys[2].tier = Some("pro".into());
    let a = Authenticator::build(&s, &tiers(&["free", "pro", "enterprise"]), &tenants()).unwrap();
    let r = a
        .authenticate(&with_key(HeaderMap::new(), BIGCO_KEY), NOW)
        .unwrap()
        .unwrap();
    assert_eq!(r.tier.as_deref(), Some("pro"));
}

#[test]
fn api_key_errors() {
    let a = auth();
    let r = a.authenticate(&with_key(HeaderMap::new(), "wrong"), NOW);
    assert_eq!(r, Err(IdentityError::UnknownApiKey));
    let h = with_key(with_key(HeaderMap::new(), ACME_KEY), ACME_KEY);
    assert_eq!(a.authenticate(&h, NOW), Err(IdentityError::DuplicateApiKey));
    // Case-insensitive header name.
    let mut h = HeaderMap::new();
    h.insert(
        http::header::HeaderName::from_static("x-api-key"),
        HeaderValue::from_static(ACME_KEY),
    );
    let mut upper = HeaderMap::new();
    upper.insert(
        http::header::HeaderName::from_bytes(b"X-API-Key").unwrap(),
        HeaderValue::from_static(ACME_KEY),
    );
    assert_eq!(a.authenticate(&upper, NOW), a.authenticate(&h, NOW));
    assert_eq!(a.authenticate(&upper, NOW).unwrap().unwrap().tenant, "acme");
}

#[test]
fn bearer_decides_when_both_are_present() {
    let a = auth();
    // Valid bearer + valid key of another tenant: the token's tenant.
    let h = with_key(
        bearer(&token(claims_with(json!({"tenant": "bigco"})))),
        ACME_KEY,
    );
    let id = a.authenticate(&h, NOW).unwrap().unwrap();
    assert_eq!((id.tenant.as_str(), id.method), ("bigco", Method::Jwt));
    // Invalid bearer + valid key: the token's error, the key is not a fallback.
    let h = with_key(bearer("not.a.jwt"), ACME_KEY);
    assert!(matches!(
        a.authenticate(&h, NOW),
        Err(IdentityError::InvalidToken(_))
    ));
    // Valid bearer + duplicate key headers: the key header is not looked at.
    let h = with_key(with_key(bearer(&token(good_claims())), "x"), "y");
    assert_eq!(
        a.authenticate(&h, NOW).unwrap().unwrap().method,
        Method::Jwt
    );
}

#[test]
fn non_bearer_authorization_is_ignored() {
    let a = auth();
    let mut h = HeaderMap::new();
    h.insert(
        AUTHORIZATION,
        HeaderValue::from_static("Basic YWxhZGRpbjpvcGVuc2VzYW1l"),
    );
    assert_eq!(a.authenticate(&h, NOW), Ok(None));
    let h = with_key(h, ACME_KEY);
    assert_eq!(
        a.authenticate(&h, NOW).unwrap().unwrap().method,
        Method::ApiKey
    );
    // "Bearerx" is another scheme, not Bearer.
    let mut h = HeaderMap::new();
    h.insert(AUTHORIZATION, HeaderValue::from_static("Bearerx abc"));
    assert_eq!(a.authenticate(&h, NOW), Ok(None));
    // Basic next to a valid Bearer value, in either order: two credentials, refused (a
    // backend could authenticate the Basic one while the quota charged the token's tenant).
    let basic = HeaderValue::from_static("Basic YWxhZGRpbjpvcGVuc2VzYW1l");
    let bearer_value = HeaderValue::from_str(&format!("Bearer {}", token(good_claims()))).unwrap();
    for pair in [[basic.clone(), bearer_value.clone()], [bearer_value, basic]] {
        let mut h = HeaderMap::new();
        for v in pair {
            h.append(AUTHORIZATION, v);
        }
        assert_eq!(
            a.authenticate(&h, NOW),
            Err(IdentityError::InvalidToken(
                "a bearer token next to another Authorization field".into()
            ))
        );
    }
}

#[test]
fn bearer_scheme_parsing() {
    let a = auth();
    let t = token(good_claims());
    for v in [
        format!("bearer {t}"),
        format!("BEARER {t}"),
        format!("Bearer   {t}  "),
        format!("Bearer\t{t}"),
        format!("bearer \t {t}"),
    ] {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_str(&v).unwrap());
        assert_eq!(
            a.authenticate(&h, NOW).unwrap().unwrap().tenant,
            "acme",
            "{v}"
        );
    }
    for v in ["Bearer", "Bearer ", "Bearer    "] {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_static(v));
        assert_eq!(
            a.authenticate(&h, NOW),
            Err(IdentityError::InvalidToken("missing token".into())),
            "{v:?}"
        );
    }
    let mut h = HeaderMap::new();
    h.append(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {t}")).unwrap(),
    );
    h.append(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {t}")).unwrap(),
    );
    assert_eq!(
        a.authenticate(&h, NOW),
        Err(IdentityError::InvalidToken(
            "more than one bearer token".into()
        ))
    );
    let mut h = HeaderMap::new();
    h.insert(
        AUTHORIZATION,
        HeaderValue::from_bytes(b"Bearer \xff\xfe.a.b").unwrap(),
    );
    assert!(matches!(
        a.authenticate(&h, NOW),
        Err(IdentityError::InvalidToken(_))
    ));
}

#[test]
fn bearer_ignored_when_jwt_not_configured() {
    let mut s = settings();
    s.jwt = None;
    let a = Authenticator::build(&s, &tiers(&["free", "pro", "enterprise"]), &tenants()).unwrap();
    assert_eq!(a.authenticate(&bearer("anything"), NOW), Ok(None));
    let h = with_key(bearer("anything"), ACME_KEY);
    assert_eq!(a.authenticate(&h, NOW).unwrap().unwrap().tenant, "acme");
    // And API key headers are ignored when API keys are not configured.
    let mut s = settings();
    s.api_keys = None;
    let a = Authenticator::build(&s, &tiers(&["free", "pro", "enterprise"]), &tenants()).unwrap();
    assert_eq!(
        a.authenticate(&with_key(HeaderMap::new(), "zzz"), NOW),
        Ok(None)
    );
}

#[test]
fn expired_token_via_authenticate_uses_injected_clock() {
    let a = auth();
    let t = token(good_claims()); // exp = NOW + 3600, leeway 30
    assert!(a.authenticate(&bearer(&t), NOW + 3629).is_ok());
    assert_eq!(
        a.authenticate(&bearer(&t), NOW + 3630),
        Err(IdentityError::InvalidToken("token expired".into()))
    );
}

#[test]
fn status_and_www_authenticate() {
    let cases = [
        (
            IdentityError::InvalidToken("token expired".into()),
            401,
            Some("Bearer error=\"invalid_token\""),
        ),
        (
            IdentityError::UnknownApiKey,
            401,
            Some("Bearer error=\"invalid_token\""),
        ),
        (IdentityError::Missing, 401, Some("Bearer")),
        (IdentityError::DuplicateApiKey, 400, None),
        (IdentityError::UnknownTier("gold".into()), 403, None),
    ];
    for (e, status, www) in cases {
        assert_eq!(e.status(), status, "{e:?}");
        assert_eq!(e.www_authenticate(), www, "{e:?}");
        assert!(!e.detail().is_empty());
    }
    assert_eq!(
        IdentityError::InvalidToken("token expired".into()).detail(),
        "invalid bearer token: token expired"
    );
    assert_eq!(
        IdentityError::UnknownTier("gold".into()).detail(),
        "tier \"gold\" is not configured"
    );
    assert_eq!(
        IdentityError::UnknownTier(NO_TIER.into()).detail(),
        "no tier is configured for this tenant"
    );
}

#[test]
fn strip_headers_are_the_configured_identity_headers() {
    let a = auth();
    assert_eq!(a.strip_headers(), ["x-tollgate-tenant", "x-tollgate-tier"]);
    let mut s = settings();
    s.tier_header = HeaderName::from_static("x-tollgate-tenant");
    let a = Authenticator::build(&s, &tiers(&["free"]), &BTreeMap::new()).unwrap();
    assert_eq!(a.strip_headers(), ["x-tollgate-tenant"]);
}

#[test]
fn build_reports_unreadable_jwt_keys_with_their_path() {
    let mut s = settings();
    s.jwt.as_mut().unwrap().keys[1] = pem_key(Some("k1"), Algorithm::RS256, "nope.pem");
    let errs = Authenticator::build(&s, &tiers(&["free"]), &BTreeMap::new()).unwrap_err();
    let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["identity.jwt.keys[1].public_key_file"]);
    assert!(errs[0]
        .to_string()
        .starts_with("identity.jwt.keys[1].public_key_file: cannot read"));
}

#[test]
fn anonymous_is_one_tenant_per_client_key_in_the_anonymous_tier() {
    let v6 = |s: &str| s.parse::<IpAddr>().unwrap();
    let a =
        Authenticator::build(&settings(), &tiers(&["free", ANONYMOUS_TIER]), &tenants()).unwrap();
    let id = a.anonymous(v6("2001:db8:1:2:3:4:5:6"), 64);
    assert_eq!(id.tenant, "ip:2001:db8:1:2::");
    assert_eq!(id.tier.as_deref(), Some(ANONYMOUS_TIER));
    assert_eq!(id.method, Method::Anonymous);
    assert_eq!(
        a.anonymous(v6("2001:db8:1:2:ffff::1"), 64).tenant,
        id.tenant
    );
    assert_eq!(
        a.anonymous(v6("::ffff:192.0.2.7"), 64).tenant,
        "ip:192.0.2.7"
    );
    // Without an `anonymous` tier, anonymous traffic has no tenant limit.
    assert_eq!(auth().anonymous(v6("192.0.2.7"), 64).tier, None);
}

#[test]
fn forward_strips_identity_headers_and_sets_tenant_and_tier() {
    let a = auth();
    let h = |names: &[&str]| {
        names
            .iter()
            .map(|n| HeaderName::from_bytes(n.as_bytes()).unwrap())
            .collect::<Vec<_>>()
    };
    let jwt = a
        .authenticate(&bearer(&token(good_claims())), NOW)
        .unwrap()
        .unwrap();
    let f = a.forward(Some(&jwt));
    let removed: Vec<HeaderName> = f.remove.into_iter().cloned().collect();
    // The tenant and tier headers are set (which replaces what the client sent), not removed.
    assert_eq!(removed, h(&["authorization"]));
    let set: Vec<(&str, &str)> = f
        .insert
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        set,
        [("x-tollgate-tenant", "acme"), ("x-tollgate-tier", "free")]
    );
    let key = a
        .authenticate(&with_key(HeaderMap::new(), GLOBEX_KEY), NOW)
        .unwrap()
        .unwrap();
    let removed: Vec<HeaderName> = a.forward(Some(&key)).remove.into_iter().cloned().collect();
    assert_eq!(removed, h(&["x-api-key"]));
    // Anonymous: only the stripping; no tenant header is invented.
    let anon = a.anonymous("192.0.2.7".parse().unwrap(), 64);
    let f = a.forward(Some(&anon));
    assert_eq!(f.remove.len(), 2);
    assert!(f.insert.is_empty());
    // forward_credentials keeps the credential.
    let mut s = settings();
    s.forward_credentials = true;
    let a = Authenticator::build(&s, &tiers(&["free", "pro", "enterprise"]), &tenants()).unwrap();
    assert!(a.forward(Some(&jwt)).remove.is_empty());
    // A key without a tier: the tier header is still stripped, the tenant header set.
    let untiered = Identity {
        tier: None,
        ..key.clone()
    };
    let f = a.forward(Some(&untiered));
    let removed: Vec<HeaderName> = f.remove.into_iter().cloned().collect();
    assert_eq!(removed, h(&["x-tollgate-tier"]));
    assert_eq!(f.insert.len(), 1);
}

#[test]
fn identify_uses_the_client_certificate_only_with_mtls() {
    let a = auth();
    let none = HeaderMap::new();
    assert_eq!(a.identify(&none, Some("bigco"), NOW), Ok(None));
    let mut s = settings();
    s.mtls = Some(crate::config::MtlsTenantFrom::SubjectCn);
    let a = Authenticator::build(&s, &tiers(&["free", "pro", "enterprise"]), &tenants()).unwrap();
    let id = a.identify(&none, Some("bigco"), NOW).unwrap().unwrap();
    assert_eq!((id.tenant.as_str(), id.method), ("bigco", Method::Mtls));
    assert_eq!(a.identify(&none, None, NOW), Ok(None));
}

/// A certificate's CN passes the one tenant-id rule of every source: padded, blank, control
/// characters, too long or the anonymous `ip:` prefix are refused (401), never trimmed.
#[test]
fn a_client_certificate_cn_is_validated_like_every_tenant_id() {
    let mut s = settings();
    s.mtls = Some(crate::config::MtlsTenantFrom::SubjectCn);
    let a = Authenticator::build(&s, &tiers(&["free", "pro", "enterprise"]), &tenants()).unwrap();
    let none = HeaderMap::new();
    let long = "x".repeat(257);
    for cn in [
        "acme ",
        " acme",
        " ip:9.9.9.9",
        "ip:9.9.9.9",
        "",
        "   ",
        "ac\u{7f}me",
        "a\nb",
        long.as_str(),
    ] {
        assert!(
            matches!(
                a.identify(&none, Some(cn), NOW),
                Err(IdentityError::InvalidToken(_))
            ),
            "{cn:?}"
        );
        assert_eq!(
            a.identify(&none, Some(cn), NOW).is_err(),
            crate::tenant_id::validate(cn).is_err(),
            "{cn:?}: the same verdict as every other source"
        );
    }
    let id = a.identify(&none, Some("acme"), NOW).unwrap().unwrap();
    assert_eq!(id.tenant, "acme");
}

#[test]
fn debug_output_has_no_secrets() {
    let a = auth();
    let dbg = format!("{a:?}");
    assert!(
        !dbg.contains(std::str::from_utf8(HS_SECRET).unwrap()),
        "{dbg}"
    );
    assert!(!dbg.contains(&hash_key(ACME_KEY)), "{dbg}");
}
