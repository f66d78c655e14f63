use super::*;
use crate::identity::test_support::read_fixture;
use serde_json::json;

const S: fn(u64) -> Duration = Duration::from_secs;

/// `n` and `e` (base64url) of the 2048-bit fixture key.
fn rsa_components() -> (String, String) {
    use base64::Engine;
    let key = DecodingKey::from_rsa_pem(&read_fixture("rsa2048.pub.pem")).unwrap();
    let provider = CryptoProvider::try_get_default().unwrap();
    let der = key.try_get_as_bytes().unwrap();
    let (n, e) = (provider.key_utils.rsa_pub_components_from_public_key)(der).unwrap();
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    (b64.encode(n), b64.encode(e))
}

fn rsa_jwk(kid: &str, extra: Value) -> Value {
    let (n, e) = rsa_components();
    let mut k = json!({"kty": "RSA", "kid": kid, "n": n, "e": e});
    for (name, v) in extra.as_object().unwrap() {
        k[name] = v.clone();
    }
    k
}

fn parse(keys: Vec<Value>) -> ParsedJwks {
    parse_jwks(json!({ "keys": keys }).to_string().as_bytes()).unwrap()
}

fn reasons(p: &ParsedJwks) -> Vec<&'static str> {
    p.rejected.iter().map(|r| r.reason).collect()
}

#[test]
fn max_age_is_clamped_to_the_refresh_range() {
    let (min, max) = (S(300), S(3600));
    assert_eq!(refresh_after(Some("public, max-age=900"), min, max), S(900));
    assert_eq!(refresh_after(Some("max-age=10"), min, max), min);
    assert_eq!(refresh_after(Some("max-age=86400"), min, max), max);
    assert_eq!(refresh_after(Some("MAX-AGE=\"600\""), min, max), S(600));
    assert_eq!(refresh_after(None, min, max), min);
    assert_eq!(refresh_after(Some("max-age=900, no-cache"), min, max), min);
    assert_eq!(refresh_after(Some("no-store"), min, max), min);
    assert_eq!(refresh_after(Some("max-age=-5"), min, max), min);
    assert_eq!(refresh_after(Some("max-age=abc"), min, max), min);
    assert_eq!(refresh_after(Some(""), min, max), min);
}

#[test]
fn an_rsa_key_verifies_the_rsa_family_or_only_its_pinned_alg() {
    let p = parse(vec![
        rsa_jwk("a", json!({})),
        rsa_jwk("b", json!({"alg": "PS256", "use": "sig"})),
    ]);
    assert!(p.rejected.is_empty(), "{:?}", p.rejected);
    assert_eq!(p.keys[0].algs.len(), 6);
    assert!(p.keys[0]
        .algs
        .iter()
        .all(|a| a.family() == jsonwebtoken::AlgorithmFamily::Rsa));
    assert_eq!(p.keys[1].algs, vec![Algorithm::PS256]);
}

#[test]
fn unusable_keys_are_skipped_with_a_reason_and_the_rest_kept() {
    let p = parse(vec![
        json!({"kty": "oct", "kid": "s", "k": "c2VjcmV0"}),
        json!({"kty": "XYZ", "kid": "u"}),
        json!({"kid": "no-kty"}),
        json!({"kty": "EC", "kid": "p521", "crv": "P-521", "x": "AA", "y": "AA"}),
        json!({"kty": "OKP", "kid": "x", "crv": "X25519", "x": "AA"}),
        json!({"kty": "RSA", "kid": "weak", "n": format!("{}w", "_".repeat(170)), "e": "AQAB"}),
        json!({"kty": "RSA", "kid": "junk", "n": "!!", "e": "AQAB"}),
        rsa_jwk("hs", json!({"alg": "HS256"})),
        rsa_jwk("es", json!({"alg": "ES256"})),
        rsa_jwk("enc", json!({"use": "enc"})),
        json!("not an object"),
        rsa_jwk("good", json!({})),
    ]);
    assert_eq!(
        reasons(&p),
        vec![
            "symmetric",
            "unknown_kty",
            "unknown_kty",
            "unsupported_curve",
            "unsupported_curve",
            "weak",
            "malformed",
            "alg_mismatch",
            "alg_mismatch",
            "not_signing",
            "unknown_kty",
        ]
    );
    assert_eq!(p.keys.len(), 1);
    assert_eq!(p.keys[0].kid.as_deref(), Some("good"));
}

#[test]
fn keys_sharing_a_kid_are_all_dropped() {
    let p = parse(vec![
        rsa_jwk("d", json!({})),
        rsa_jwk("d", json!({})),
        rsa_jwk("e", json!({})),
    ]);
    assert_eq!(reasons(&p), vec!["duplicate_kid", "duplicate_kid"]);
    assert_eq!(p.keys.len(), 1);
}

#[test]
fn bad_documents_are_errors() {
    assert_eq!(parse_jwks(b"<html>").unwrap_err().label(), "not_json");
    assert_eq!(
        parse_jwks(b"{\"keys\": {}}").unwrap_err(),
        JwksError::NoKeys
    );
    assert_eq!(parse_jwks(b"[]").unwrap_err(), JwksError::NoKeys);
    let big = vec![b' '; MAX_JWKS_BYTES + 1];
    assert_eq!(parse_jwks(&big).unwrap_err(), JwksError::TooLarge);
    assert!(parse_jwks(b"{\"keys\": []}").unwrap().keys.is_empty());
}

#[test]
fn discovery_must_name_the_configured_issuer() {
    let doc = |iss: &str| json!({"issuer": iss, "jwks_uri": "https://idp/keys"}).to_string();
    assert_eq!(
        discovery_jwks_uri(doc("https://idp/").as_bytes(), "https://idp/").unwrap(),
        "https://idp/keys"
    );
    assert!(discovery_jwks_uri(doc("https://evil/").as_bytes(), "https://idp/").is_err());
    assert!(discovery_jwks_uri(b"{}", "https://idp/").is_err());
    assert_eq!(
        discovery_url("https://idp.example/"),
        "https://idp.example/.well-known/openid-configuration"
    );
}
