//! The live key set of an issuer (throttled, coalesced refetches, stale limit, injected
//! `Instant`s) and the verifier's issuer path (HS* refused, alg pinned, 503 without keys).

use super::*;
use crate::config::{JwksSource, JwtSettings};
use crate::identity::jwks::parse_jwks;
use crate::identity::jwt::JwtVerifier;
use crate::identity::test_support::{
    b64url, good_claims, hs_encoding_key, jwt_settings, read_fixture, sign, sign_with, NOW, RSA_PUB,
};
use crate::identity::IdentityError;
use jsonwebtoken::{Algorithm, DecodingKey, Header};
use serde_json::json;

const ISS: &str = "https://idp.example/";
const S: fn(u64) -> Duration = Duration::from_secs;

fn settings() -> JwtIssuerSettings {
    JwtIssuerSettings {
        issuer: ISS.into(),
        source: JwksSource::Discovery,
        audience: Some("api".into()),
        tenant_claim: "org".into(),
        tier_claim: None,
        refresh_min: S(60),
        refresh_max: S(60),
        unknown_kid_refetch: S(10),
        stale_for: S(3600),
        fetch_timeout: S(5),
        ca_file: None,
    }
}

/// The fixture RSA key as a JWK Set entry, with `extra` members.
fn rsa_jwk(kid: &str, extra: serde_json::Value) -> serde_json::Value {
    use jsonwebtoken::crypto::CryptoProvider;
    let key = DecodingKey::from_rsa_pem(&read_fixture(RSA_PUB)).unwrap();
    let provider = CryptoProvider::try_get_default().unwrap();
    let der = key.try_get_as_bytes().unwrap();
    let (n, e) = (provider.key_utils.rsa_pub_components_from_public_key)(der).unwrap();
    let mut k = json!({"kty": "RSA", "kid": kid, "n": b64url(&n), "e": b64url(&e)});
    for (name, v) in extra.as_object().unwrap() {
        k[name] = v.clone();
    }
    k
}

fn install(issuer: &IssuerKeys, jwks: Vec<serde_json::Value>, at: Instant) {
    let parsed = parse_jwks(json!({ "keys": jwks }).to_string().as_bytes()).unwrap();
    issuer.fetch_ended(Some(parsed.keys), at);
}

fn verifier() -> JwtVerifier {
    let settings = JwtSettings {
        issuers: vec![settings()],
        ..jwt_settings(Vec::new())
    };
    JwtVerifier::build(&settings).unwrap()
}

fn claims() -> serde_json::Value {
    let mut c = good_claims();
    c["iss"] = json!(ISS);
    c["aud"] = json!("api");
    c["org"] = json!("acme-org");
    c
}

#[test]
fn unknown_kid_refetches_are_coalesced_then_throttled() {
    let keys = IssuerKeys::new(settings());
    let t0 = Instant::now();
    // The first fetch is in flight from the start: every request joins it.
    assert!(keys.want_refetch(t0));
    keys.fetch_ended(None, t0);
    assert!(keys.want_refetch(t0), "first unknown kid triggers one");
    assert!(keys.want_refetch(t0), "joins the running fetch");
    keys.fetch_ended(None, t0);
    assert!(!keys.want_refetch(t0 + S(1)), "throttled");
    assert!(!keys.want_refetch(t0 + S(9)), "throttled");
    assert!(keys.want_refetch(t0 + S(10)), "next interval");
    keys.fetch_ended(None, t0 + S(10));
    assert_eq!(keys.refetches.triggered.load(Ordering::Relaxed), 2);
    assert_eq!(keys.refetches.throttled.load(Ordering::Relaxed), 2);
}

#[test]
fn the_last_good_set_serves_until_stale_for() {
    let keys = IssuerKeys::new(settings());
    let t0 = Instant::now();
    assert!(keys.current(t0).is_none());
    install(&keys, vec![rsa_jwk("a", json!({}))], t0);
    keys.fetch_ended(None, t0 + S(60)); // a failed refresh keeps it
    assert_eq!(keys.current(t0 + S(3599)).unwrap().keys.len(), 1);
    assert!(keys.current(t0 + S(3600)).is_none());
    assert!(keys.last().is_some());
}

#[test]
fn an_issuer_without_keys_is_503_and_its_tokens_are_verified_by_its_jwks() {
    let v = verifier();
    let token = sign(Algorithm::RS256, Some("a"), &claims());
    let err = v.verify(&token, NOW).unwrap_err();
    assert_eq!(err, IdentityError::IssuerUnavailable(ISS.into()));
    assert_eq!(err.status(), 503);

    install(
        &v.issuers()[0],
        vec![rsa_jwk("a", json!({}))],
        Instant::now(),
    );
    let ok = v.verify(&token, NOW).unwrap();
    assert_eq!(ok.tenant, "acme-org");
    assert_eq!(
        (ok.issuer.as_deref(), ok.kid.as_deref()),
        (Some(ISS), Some("a"))
    );
    // PS256 with the same RSA key is in the key's family.
    assert!(v
        .verify(&sign(Algorithm::PS256, Some("a"), &claims()), NOW)
        .is_ok());

    let reason = |t: &str| match v.verify(t, NOW) {
        Err(IdentityError::InvalidToken(r)) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        reason(&sign(Algorithm::RS256, Some("b"), &claims())),
        "unknown key id"
    );
    let mut wrong_aud = claims();
    wrong_aud["aud"] = json!("other");
    assert_eq!(
        reason(&sign(Algorithm::RS256, Some("a"), &wrong_aud)),
        "audience not accepted"
    );
}

#[test]
fn hs_tokens_never_meet_a_jwks_key_and_a_jwk_alg_pins_the_token_alg() {
    let v = verifier();
    install(
        &v.issuers()[0],
        vec![
            rsa_jwk("a", json!({})),
            rsa_jwk("p", json!({"alg": "RS256"})),
        ],
        Instant::now(),
    );
    let jwk = rsa_jwk("a", json!({}));
    let n = jwk["n"].as_str().unwrap().as_bytes().to_vec();
    for secret in [jwk.to_string().into_bytes(), n, read_fixture(RSA_PUB)] {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some("a".into());
        let forged = sign_with(header, &claims(), &hs_encoding_key(&secret));
        assert_eq!(
            v.verify(&forged, NOW).unwrap_err(),
            IdentityError::InvalidToken("algorithm not allowed".into())
        );
    }
    assert_eq!(
        v.verify(&sign(Algorithm::PS256, Some("p"), &claims()), NOW)
            .unwrap_err(),
        IdentityError::InvalidToken("algorithm not allowed".into())
    );
    assert!(v
        .verify(&sign(Algorithm::RS256, Some("p"), &claims()), NOW)
        .is_ok());
}

#[test]
fn awaiting_keys_names_the_issuer_only_when_a_fetch_can_help() {
    let v = verifier();
    let now = Instant::now();
    let token = sign(Algorithm::RS256, Some("a"), &claims());
    // No set yet and the first fetch in flight: wait for it.
    assert!(v.awaiting_keys(&token, now).is_some());
    install(&v.issuers()[0], vec![rsa_jwk("a", json!({}))], now);
    assert!(v.awaiting_keys(&token, now).is_none(), "known kid");
    let other = sign(Algorithm::RS256, Some("new"), &claims());
    assert!(
        v.awaiting_keys(&other, now).is_some(),
        "unknown kid: refetch"
    );
    v.issuers()[0].fetch_ended(None, now);
    assert!(v.awaiting_keys(&other, now).is_none(), "throttled");
    let mut foreign = claims();
    foreign["iss"] = json!("https://elsewhere/");
    let foreign = sign(Algorithm::RS256, Some("x"), &foreign);
    assert!(
        v.awaiting_keys(&foreign, now + S(60)).is_none(),
        "not a JWKS issuer"
    );
    let hs = sign(Algorithm::HS256, Some("x"), &claims());
    assert!(
        v.awaiting_keys(&hs, now + S(60)).is_none(),
        "HS* never fetches"
    );
}
