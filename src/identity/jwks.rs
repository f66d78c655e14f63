//! JWK Set documents (RFC 7517 §5) → verifying keys, and the refresh interval of a fetched set.
//! Pure: bytes in, keys out; no I/O, no clock.
//!
//! Only asymmetric signing keys are taken (RSA of at least 2048 bits, EC P-256/P-384, Ed25519);
//! each key is pinned to the algorithms it can verify, narrowed to its `alg` member when present
//! (RFC 7517 §4.4). Anything else in the set is skipped with a reason ([`RejectedKey`]); a bad key
//! never fails the whole set, a bad document does ([`JwksError`]).

use jsonwebtoken::crypto::CryptoProvider;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// Largest JWKS or discovery document accepted, bytes (1 MiB).
pub const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// Minimum RSA modulus size, bits (RFC 7518 §3.3).
const MIN_RSA_BITS: usize = 2048;

/// One usable key of a JWK Set.
#[derive(Clone)]
pub struct JwksKey {
    /// `kid` (RFC 7517 §4.5), when the key has one.
    pub kid: Option<String>,
    /// The token algorithms this key verifies (never HS*, never `none`).
    pub algs: Vec<Algorithm>,
    pub key: DecodingKey,
}

impl std::fmt::Debug for JwksKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwksKey")
            .field("kid", &self.kid)
            .field("algs", &self.algs)
            .finish()
    }
}

/// A key of the set that was skipped, and why (a metric label: a short fixed word).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedKey {
    pub kid: Option<String>,
    /// One of `symmetric`, `unknown_kty`, `unsupported_curve`, `weak`, `alg_mismatch`,
    /// `not_signing`, `malformed`, `duplicate_kid`.
    pub reason: &'static str,
}

/// The outcome of parsing one JWK Set document.
#[derive(Debug, Clone, Default)]
pub struct ParsedJwks {
    pub keys: Vec<JwksKey>,
    pub rejected: Vec<RejectedKey>,
}

/// Why a whole document was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    #[error("document larger than {MAX_JWKS_BYTES} bytes")]
    TooLarge,
    #[error("not a JSON object: {0}")]
    NotJson(String),
    #[error("no \"keys\" array")]
    NoKeys,
}

impl JwksError {
    /// A short metric label: `too_large`, `not_json`, `no_keys`.
    pub fn label(&self) -> &'static str {
        match self {
            JwksError::TooLarge => "too_large",
            JwksError::NotJson(_) => "not_json",
            JwksError::NoKeys => "no_keys",
        }
    }
}

/// Parses a JWK Set document. Keys sharing a `kid` are all dropped (`duplicate_kid`): which of
/// them signed a token cannot be told, and guessing would accept a key the IdP may not mean.
pub fn parse_jwks(bytes: &[u8]) -> Result<ParsedJwks, JwksError> {
    if bytes.len() > MAX_JWKS_BYTES {
        return Err(JwksError::TooLarge);
    }
    let doc: Value =
        serde_json::from_slice(bytes).map_err(|e| JwksError::NotJson(e.to_string()))?;
    let Some(Value::Array(entries)) = doc.get("keys") else {
        return Err(JwksError::NoKeys);
    };
    let mut out = ParsedJwks::default();
    for entry in entries {
        let kid = entry.get("kid").and_then(Value::as_str).map(str::to_string);
        match parse_key(entry) {
            Ok(key) => out.keys.push(key),
            Err(reason) => out.rejected.push(RejectedKey { kid, reason }),
        }
    }
    let mut count: HashMap<String, usize> = HashMap::new();
    for kid in out.keys.iter().filter_map(|k| k.kid.clone()) {
        *count.entry(kid).or_default() += 1;
    }
    out.keys.retain(|k| {
        let dup = k.kid.as_ref().is_some_and(|kid| count[kid] > 1);
        if dup {
            out.rejected.push(RejectedKey {
                kid: k.kid.clone(),
                reason: "duplicate_kid",
            });
        }
        !dup
    });
    Ok(out)
}

/// One JWK → a key pinned to its algorithms, or the reason it is skipped.
fn parse_key(entry: &Value) -> Result<JwksKey, &'static str> {
    match entry.get("kty").and_then(Value::as_str) {
        Some("oct") => return Err("symmetric"),
        Some("RSA" | "EC" | "OKP") => {}
        _ => return Err("unknown_kty"),
    }
    let jwk: Jwk = serde_json::from_value(entry.clone()).map_err(|_| "malformed")?;
    if matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
        return Err("not_signing");
    }
    let family: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(p) => {
            if rsa_bits(&p.n).ok_or("malformed")? < MIN_RSA_BITS {
                return Err("weak");
            }
            use Algorithm::*;
            vec![RS256, RS384, RS512, PS256, PS384, PS512]
        }
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return Err("unsupported_curve"),
        },
        AlgorithmParameters::OctetKeyPair(p) => match p.curve {
            EllipticCurve::Ed25519 => vec![Algorithm::EdDSA],
            _ => return Err("unsupported_curve"),
        },
        AlgorithmParameters::OctetKey(_) => return Err("symmetric"),
        // An EC or OKP key jsonwebtoken cannot read has a curve it does not know.
        _ if matches!(entry.get("kty").and_then(Value::as_str), Some("EC" | "OKP")) => {
            return Err("unsupported_curve")
        }
        _ => return Err("unknown_kty"),
    };
    let algs = match &jwk.common.key_algorithm {
        None => family,
        Some(pinned) => {
            let alg = token_alg(pinned).ok_or("alg_mismatch")?;
            if !family.contains(&alg) {
                return Err("alg_mismatch");
            }
            vec![alg]
        }
    };
    let key = DecodingKey::from_jwk(&jwk).map_err(|_| "malformed")?;
    // A point off the curve or a bad Ed25519 key fails here, not on every request.
    let provider = CryptoProvider::try_get_default().ok_or("malformed")?;
    if (provider.verifier_factory)(&algs[0], &key).is_err() {
        return Err("malformed");
    }
    Ok(JwksKey {
        kid: jwk.common.key_id.clone(),
        algs,
        key,
    })
}

/// The JWS algorithm a JWK `alg` names, for signature algorithms only (no HS*, no encryption).
fn token_alg(alg: &KeyAlgorithm) -> Option<Algorithm> {
    use Algorithm as A;
    Some(match alg {
        KeyAlgorithm::RS256 => A::RS256,
        KeyAlgorithm::RS384 => A::RS384,
        KeyAlgorithm::RS512 => A::RS512,
        KeyAlgorithm::PS256 => A::PS256,
        KeyAlgorithm::PS384 => A::PS384,
        KeyAlgorithm::PS512 => A::PS512,
        KeyAlgorithm::ES256 => A::ES256,
        KeyAlgorithm::ES384 => A::ES384,
        KeyAlgorithm::EdDSA => A::EdDSA,
        _ => return None,
    })
}

/// Bits of a base64url (unpadded, RFC 7518 §6.3.1.1) RSA modulus, leading zero bytes ignored.
fn rsa_bits(n: &str) -> Option<usize> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(n.trim_end_matches('='))
        .ok()?;
    let first = bytes.iter().position(|&b| b != 0)?;
    let n = &bytes[first..];
    Some((n.len() - 1) * 8 + (8 - n[0].leading_zeros() as usize))
}

/// When to refresh a fetched set: the response's `Cache-Control: max-age` (RFC 9111 §5.2.2.1)
/// clamped to `min..=max`; `min` when the header is absent, says `no-store`/`no-cache`, or has
/// no readable `max-age` (a removed key is then refused sooner rather than later).
pub fn refresh_after(cache_control: Option<&str>, min: Duration, max: Duration) -> Duration {
    let mut max_age = None;
    for directive in cache_control.unwrap_or("").split(',') {
        let directive = directive.trim();
        let (name, value) = match directive.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().trim_matches('"'))),
            None => (directive, None),
        };
        if name.eq_ignore_ascii_case("no-store") || name.eq_ignore_ascii_case("no-cache") {
            return min;
        }
        if name.eq_ignore_ascii_case("max-age") {
            max_age = value.and_then(|v| v.parse::<u64>().ok());
        }
    }
    match max_age {
        Some(s) => Duration::from_secs(s).clamp(min, max),
        None => min,
    }
}

/// The `jwks_uri` of an OpenID Connect discovery document (OpenID Connect Discovery 1.0 §3),
/// after checking that its `issuer` is exactly `issuer` (§4.3). Errors are a short reason.
pub fn discovery_jwks_uri(bytes: &[u8], issuer: &str) -> Result<String, String> {
    if bytes.len() > MAX_JWKS_BYTES {
        return Err(JwksError::TooLarge.to_string());
    }
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    match doc.get("issuer").and_then(Value::as_str) {
        Some(i) if i == issuer => {}
        Some(i) => return Err(format!("discovery names issuer \"{i}\", not \"{issuer}\"")),
        None => return Err("discovery document has no issuer".into()),
    }
    doc.get("jwks_uri")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| "discovery document has no jwks_uri".into())
}

/// The discovery URL of `issuer`: `<issuer without trailing slash>/.well-known/openid-configuration`.
pub fn discovery_url(issuer: &str) -> String {
    format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    )
}

#[cfg(test)]
mod tests;
