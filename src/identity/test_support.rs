//! Shared by the tests of `identity` and its children: fixture keys, signing, settings.

use crate::config::{JwtKeySettings, JwtSettings, KeySource};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

/// A fixed "now" for tests (2023-11-14T22:13:20Z).
pub const NOW: u64 = 1_700_000_000;
pub const RSA_KEY: &str = "rsa2048.key.pem";
pub const RSA_PUB: &str = "rsa2048.pub.pem";
pub const EC256_KEY: &str = "ec-p256.key.pem";
pub const EC256_PUB: &str = "ec-p256.pub.pem";
pub const EC384_KEY: &str = "ec-p384.key.pem";
pub const EC384_PUB: &str = "ec-p384.pub.pem";
pub const ED_KEY: &str = "ed25519.key.pem";
pub const ED_PUB: &str = "ed25519.pub.pem";
/// File holding [`HS_SECRET`] plus one trailing newline.
pub const HS_SECRET_FILE: &str = "hs.secret";
pub const HS_SECRET: &[u8] = b"test-only-hmac-secret-0123456789abcdef";

pub fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/keys/{name}", env!("CARGO_MANIFEST_DIR"))
}

pub fn read_fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// An HS* key reading [`HS_SECRET_FILE`].
pub fn hs_key(kid: Option<&str>, algorithm: Algorithm) -> JwtKeySettings {
    JwtKeySettings {
        kid: kid.map(str::to_string),
        algorithm,
        source: KeySource::SecretFile(fixture(HS_SECRET_FILE)),
    }
}

/// A public-key entry reading fixture `name`.
pub fn pem_key(kid: Option<&str>, algorithm: Algorithm, name: &str) -> JwtKeySettings {
    JwtKeySettings {
        kid: kid.map(str::to_string),
        algorithm,
        source: KeySource::PublicKeyFile(fixture(name)),
    }
}

/// Defaults as validation produces them: no iss/aud, leeway 30, tenant claim `sub`.
pub fn jwt_settings(keys: Vec<JwtKeySettings>) -> JwtSettings {
    JwtSettings {
        issuer: None,
        audience: None,
        leeway_s: 30,
        tenant_claim: "sub".into(),
        tier_claim: None,
        keys,
        issuers: Vec::new(),
    }
}

/// `sub: acme`, valid for an hour around [`NOW`].
pub fn good_claims() -> Value {
    json!({ "sub": "acme", "iat": NOW - 10, "exp": NOW + 3600 })
}

/// Signs with the fixture private key of `alg`'s family (HS*: [`HS_SECRET`]).
pub fn sign(alg: Algorithm, kid: Option<&str>, claims: &Value) -> String {
    let key = match alg {
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => hs_encoding_key(HS_SECRET),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&read_fixture(EC256_KEY)).unwrap(),
        Algorithm::ES384 => EncodingKey::from_ec_pem(&read_fixture(EC384_KEY)).unwrap(),
        Algorithm::EdDSA => EncodingKey::from_ed_pem(&read_fixture(ED_KEY)).unwrap(),
        _ => EncodingKey::from_rsa_pem(&read_fixture(RSA_KEY)).unwrap(),
    };
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_string);
    sign_with(header, claims, &key)
}

/// An HMAC signing key for `secret`.
pub fn hs_encoding_key(secret: &[u8]) -> EncodingKey {
    EncodingKey::from_secret(secret).expect("non-empty secret")
}

pub fn sign_with(header: Header, claims: &Value, key: &EncodingKey) -> String {
    jsonwebtoken::encode(&header, claims, key).expect("encode")
}

/// Unpadded base64url, for hand-crafted tokens.
pub fn b64url(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}
