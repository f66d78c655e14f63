//! Bearer JWTs (RFC 7519, signed as JWS per RFC 7515) verified against configured keys only.
//!
//! Security properties (each has a test below):
//! - Keys come only from `identity.jwt.keys`: HMAC secrets from an environment variable or a file,
//!   public keys from PEM files, all read once in [`JwtVerifier::build`]. The token header's
//!   `kid`, `jku`, `x5u`, `x5c` and `jwk` never cause a fetch, a file read or a key choice beyond
//!   matching `kid` against the configured kids.
//! - Every key is pinned to one algorithm, and the token's `alg` must equal it. This is what
//!   defeats `alg: none` and the "HS256 signed with the RSA public key as HMAC secret" confusion.
//! - Tokens longer than [`MAX_TOKEN_BYTES`] are rejected before any decoding.
//! - `exp` is required (RFC 7519 §4.1.4) and, like `nbf` (§4.1.5), checked against the caller's
//!   clock `now_s` with `leeway_s`: valid iff `now < exp + leeway` and `nbf <= now + leeway`.
//! - `iss` (§4.1.1) and `aud` (§4.1.3), when configured, are required and must match. When no
//!   audience is configured, `aud` in a token is not checked.
//!
//! Failures are [`IdentityError::InvalidToken`] with a short reason that never contains the
//! token or any part of it.

use super::issuers::IssuerKeys;
use super::IdentityError;
use crate::config::{ConfigError, JwtIssuerSettings, JwtKeySettings, JwtSettings, KeySource};
use crate::tenant_id::TenantIdError;
use jsonwebtoken::crypto::CryptoProvider;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation};
use serde_json::{Map, Value};
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

/// Longest accepted bearer token, in bytes; longer ones are rejected before any parsing.
pub const MAX_TOKEN_BYTES: usize = 8192;

pub use crate::tenant_id::MAX_TENANT_BYTES;

/// Minimum RSA modulus size, bits (RFC 7518 §3.3 and §3.5).
const MIN_RSA_BITS: usize = 2048;

// Client-visible reasons (all `InvalidToken`).
const TOO_LARGE: &str = "token too large";
const MALFORMED: &str = "malformed token";
const ALG_NOT_ALLOWED: &str = "algorithm not allowed";
const UNKNOWN_KID: &str = "unknown key id";
const BAD_SIGNATURE: &str = "signature invalid";
const EXPIRED: &str = "token expired";
const NOT_YET_VALID: &str = "token not yet valid";
const MISSING_EXP: &str = "missing required claim \"exp\"";
const NO_TENANT: &str = "no tenant claim";

fn invalid(reason: &str) -> IdentityError {
    IdentityError::InvalidToken(reason.to_string())
}

/// One configured key with its pinned algorithm and the validation rules for it.
#[derive(Clone)]
struct VerificationKey {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
    validation: Validation,
}

/// The JWT verifier of one config snapshot: parsed keys plus claim rules, and the live key sets
/// of the JWKS issuers (shared with their refresh loops and kept across reloads).
#[derive(Clone)]
pub struct JwtVerifier {
    keys: Vec<VerificationKey>,
    issuers: Vec<Arc<IssuerKeys>>,
    leeway_s: u64,
    tenant_claim: String,
    tier_claim: Option<String>,
}

impl fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<(Option<&str>, Algorithm)> = self
            .keys
            .iter()
            .map(|k| (k.kid.as_deref(), k.alg))
            .collect();
        f.debug_struct("JwtVerifier")
            .field("keys", &keys)
            .field(
                "issuers",
                &self
                    .issuers
                    .iter()
                    .map(|i| i.settings.issuer.as_str())
                    .collect::<Vec<_>>(),
            )
            .field("leeway_s", &self.leeway_s)
            .field("tenant_claim", &self.tenant_claim)
            .field("tier_claim", &self.tier_claim)
            .finish()
    }
}

/// What a verified token says about its bearer (before tier resolution).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenClaims {
    /// Claim `tenant_claim`, else `sub` (RFC 7519 §4.1.2).
    pub tenant: String,
    /// Claim `tier_claim` when configured, present and non-empty.
    pub tier: Option<String>,
    /// Every claim of the verified token (for limit rules keyed by `claim:<name>`).
    pub claims: Arc<Map<String, Value>>,
    /// The `identity.jwt.issuers[]` entry whose JWKS verified it (`None`: a static key).
    pub issuer: Option<String>,
    /// The `kid` of the key that verified it, when the key has one.
    pub kid: Option<String>,
}

impl JwtVerifier {
    /// Reads every secret and public key, once (`settings` is validated: at least one key, each
    /// pinned to an algorithm with a matching source). Errors name the field path, e.g.
    /// `identity.jwt.keys[1].public_key_file: cannot read "keys/a.pem": No such file or directory`.
    /// File paths are used as written (relative paths resolve against the working directory).
    pub fn build(settings: &JwtSettings) -> Result<JwtVerifier, Vec<ConfigError>> {
        Self::build_after(settings, None)
    }

    /// [`build`](Self::build), keeping `previous`'s live key set of every issuer whose settings
    /// are unchanged (a reload neither drops nor refetches them).
    pub fn build_after(
        settings: &JwtSettings,
        previous: Option<&JwtVerifier>,
    ) -> Result<JwtVerifier, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let mut keys = Vec::with_capacity(settings.keys.len());
        for (i, k) in settings.keys.iter().enumerate() {
            let path = format!("identity.jwt.keys[{i}]");
            match load_key(&path, k) {
                Ok(key) => keys.push(VerificationKey {
                    kid: k.kid.clone(),
                    alg: k.algorithm,
                    key,
                    validation: validation_for(k.algorithm, settings),
                }),
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let issuers = settings
            .issuers
            .iter()
            .map(|i| {
                previous
                    .and_then(|p| p.issuers.iter().find(|k| k.settings == *i))
                    .cloned()
                    .unwrap_or_else(|| IssuerKeys::new(i.clone()))
            })
            .collect();
        Ok(JwtVerifier {
            keys,
            issuers,
            leeway_s: settings.leeway_s,
            tenant_claim: settings.tenant_claim.clone(),
            tier_claim: settings.tier_claim.clone(),
        })
    }

    /// Verifies a compact JWS JWT (the text after `Bearer `) at unix time `now_s` (seconds) and
    /// extracts tenant and tier claims.
    ///
    /// Key selection: with a `kid` header, the configured key with that kid (none → "unknown key
    /// id"), whose pinned algorithm must equal the token's `alg`; without `kid`, every configured
    /// key pinned to the token's `alg` is tried in config order (none → "algorithm not allowed").
    pub fn verify(&self, token: &str, now_s: u64) -> Result<TokenClaims, IdentityError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(invalid(TOO_LARGE));
        }
        let (alg, kid) = peek_header(token)?;
        if let Some(issuer) = self.issuer_of(token) {
            return self.verify_with_issuer(issuer, token, alg, kid, now_s);
        }
        let candidates: Vec<&VerificationKey> = match &kid {
            Some(kid) => {
                let key = self
                    .keys
                    .iter()
                    .find(|k| k.kid.as_deref() == Some(kid.as_str()))
                    .ok_or_else(|| invalid(UNKNOWN_KID))?;
                if key.alg != alg {
                    return Err(invalid(ALG_NOT_ALLOWED));
                }
                vec![key]
            }
            None => self.keys.iter().filter(|k| k.alg == alg).collect(),
        };
        if candidates.is_empty() {
            return Err(invalid(ALG_NOT_ALLOWED));
        }
        let mut claims = None;
        for key in candidates {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &key.validation) {
                Ok(data) => {
                    claims = Some(data.claims);
                    break;
                }
                // Wrong key (or forged token): try the next key of the same algorithm.
                Err(e) if matches!(e.kind(), ErrorKind::InvalidSignature) => continue,
                // The signature verified (claim checks run after it) or the token is malformed:
                // trying other keys cannot change the outcome.
                Err(e) => return Err(invalid(reason(e.kind()))),
            }
        }
        let claims = claims.ok_or_else(|| invalid(BAD_SIGNATURE))?;
        self.check_times(&claims, now_s)?;
        Ok(TokenClaims {
            tenant: self.tenant(&claims, &self.tenant_claim)?,
            tier: self.tier(&claims, self.tier_claim.as_ref())?,
            claims: Arc::new(claims),
            issuer: None,
            kid,
        })
    }

    /// The live key sets of the JWKS issuers, in config order.
    pub fn issuers(&self) -> &[Arc<IssuerKeys>] {
        &self.issuers
    }

    /// The JWKS issuer named by the token's (unverified) `iss`, if any. Only routes the token:
    /// the signature and `iss` are verified against that issuer's keys afterwards.
    fn issuer_of(&self, token: &str) -> Option<&Arc<IssuerKeys>> {
        if self.issuers.is_empty() {
            return None;
        }
        let payload = b64url_decode(token.split('.').nth(1)?)?;
        let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(&payload) else {
            return None;
        };
        let iss = map.get("iss")?.as_str()?;
        self.issuers.iter().find(|i| i.settings.issuer == iss)
    }

    /// The issuer whose key set could still change this token's fate, after asking it for a
    /// refetch (coalesced and throttled, [`IssuerKeys::want_refetch`]): the token's issuer has
    /// no usable key set, or no key with the token's `kid`. `None` when the token is not for a
    /// JWKS issuer, the key is there, or a refetch is not allowed now. Call before
    /// [`verify`](Self::verify) and wait for the fetch ([`IssuerKeys::wait_fetch`]).
    pub fn awaiting_keys(&self, token: &str, now: Instant) -> Option<Arc<IssuerKeys>> {
        if token.len() > MAX_TOKEN_BYTES {
            return None;
        }
        let issuer = self.issuer_of(token)?;
        let (alg, kid) = peek_header(token).ok()?;
        if alg.family() == AlgorithmFamily::Hmac {
            return None;
        }
        let known = issuer.current(now).is_some_and(|set| match &kid {
            Some(kid) => set.keys.iter().any(|k| k.kid.as_deref() == Some(kid)),
            None => set.keys.iter().any(|k| k.algs.contains(&alg)),
        });
        (!known && issuer.want_refetch(now)).then(|| issuer.clone())
    }

    /// Verification against an issuer's JWKS: never an HS* token (a JWKS public key must not
    /// become an HMAC secret), the key's pinned algorithms must include the token's `alg`,
    /// `iss` must equal the issuer and `aud` its audience when set.
    fn verify_with_issuer(
        &self,
        issuer: &IssuerKeys,
        token: &str,
        alg: Algorithm,
        kid: Option<String>,
        now_s: u64,
    ) -> Result<TokenClaims, IdentityError> {
        let settings = &issuer.settings;
        if alg.family() == AlgorithmFamily::Hmac {
            return Err(invalid(ALG_NOT_ALLOWED));
        }
        let set = issuer
            .current(Instant::now())
            .ok_or_else(|| IdentityError::IssuerUnavailable(settings.issuer.clone()))?;
        let candidates: Vec<_> = match &kid {
            Some(kid) => {
                let key = set
                    .keys
                    .iter()
                    .find(|k| k.kid.as_deref() == Some(kid.as_str()))
                    .ok_or_else(|| invalid(UNKNOWN_KID))?;
                if !key.algs.contains(&alg) {
                    return Err(invalid(ALG_NOT_ALLOWED));
                }
                vec![key]
            }
            None => set.keys.iter().filter(|k| k.algs.contains(&alg)).collect(),
        };
        if candidates.is_empty() {
            return Err(invalid(ALG_NOT_ALLOWED));
        }
        let validation = issuer_validation(alg, settings);
        let mut verified = None;
        for key in candidates {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
                Ok(data) => {
                    verified = Some((data.claims, key.kid.clone()));
                    break;
                }
                Err(e) if matches!(e.kind(), ErrorKind::InvalidSignature) => continue,
                Err(e) => return Err(invalid(reason(e.kind()))),
            }
        }
        let (claims, kid) = verified.ok_or_else(|| invalid(BAD_SIGNATURE))?;
        self.check_times(&claims, now_s)?;
        Ok(TokenClaims {
            tenant: self.tenant(&claims, &settings.tenant_claim)?,
            tier: self.tier(&claims, settings.tier_claim.as_ref())?,
            claims: Arc::new(claims),
            issuer: Some(settings.issuer.clone()),
            kid,
        })
    }

    /// `exp` (required) and `nbf` (optional) against `now_s`, with leeway L:
    /// valid iff `now < exp + L` and `nbf <= now + L` (RFC 7519 §4.1.4, §4.1.5).
    fn check_times(&self, claims: &Map<String, Value>, now_s: u64) -> Result<(), IdentityError> {
        let now = now_s as f64;
        let leeway = self.leeway_s as f64;
        let exp = claims
            .get("exp")
            .and_then(numeric_date)
            .ok_or_else(|| invalid(MISSING_EXP))?;
        if now >= exp + leeway {
            return Err(invalid(EXPIRED));
        }
        match claims.get("nbf") {
            None | Some(Value::Null) => {}
            Some(v) => {
                let nbf = numeric_date(v).ok_or_else(|| invalid("claim \"nbf\" malformed"))?;
                if nbf > now + leeway {
                    return Err(invalid(NOT_YET_VALID));
                }
            }
        }
        Ok(())
    }

    fn tenant(
        &self,
        claims: &Map<String, Value>,
        tenant_claim: &str,
    ) -> Result<String, IdentityError> {
        let tenant = match string_claim(claims, tenant_claim)
            .map_err(|_| invalid("tenant claim is not a string"))?
        {
            Some(t) => Some(t),
            None => {
                string_claim(claims, "sub").map_err(|_| invalid("sub claim is not a string"))?
            }
        };
        let tenant = tenant
            .filter(|t| !t.is_empty())
            .ok_or_else(|| invalid(NO_TENANT))?;
        // The one validation of every tenant id (blank, padding, controls, length, reserved).
        crate::tenant_id::validate(tenant).map_err(|e| match e {
            TenantIdError::Reserved => invalid("tenant ids starting with \"ip:\" are reserved"),
            _ => invalid("tenant claim invalid"),
        })?;
        Ok(tenant.to_string())
    }

    fn tier(
        &self,
        claims: &Map<String, Value>,
        tier_claim: Option<&String>,
    ) -> Result<Option<String>, IdentityError> {
        let Some(name) = tier_claim else {
            return Ok(None);
        };
        let tier = string_claim(claims, name).map_err(|_| invalid("tier claim is not a string"))?;
        // An empty tier claim counts as absent.
        Ok(tier.filter(|t| !t.is_empty()).map(str::to_string))
    }
}

/// `Ok(None)` when absent or null, `Err(())` when present but not a string.
fn string_claim<'a>(claims: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, ()> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(()),
    }
}

/// A NumericDate (RFC 7519 §2): seconds since the epoch, possibly fractional.
fn numeric_date(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

/// The validation of a token of the static keys: `alg` only, `iss` and `aud` when configured.
fn validation_for(alg: Algorithm, settings: &JwtSettings) -> Validation {
    validation(
        alg,
        settings.issuer.as_deref(),
        settings.audience.as_deref(),
    )
}

/// The validation of a token of a JWKS issuer: `alg` only, `iss` exactly the issuer, `aud`
/// when the issuer has an audience.
fn issuer_validation(alg: Algorithm, settings: &JwtIssuerSettings) -> Validation {
    validation(alg, Some(&settings.issuer), settings.audience.as_deref())
}

/// Accepts `alg` only and requires `exp`, plus `iss`/`aud` equal to the given values when set.
/// Times are not checked here but by `check_times`, against the injected clock.
fn validation(alg: Algorithm, issuer: Option<&str>, audience: Option<&str>) -> Validation {
    let mut v = Validation::new(alg);
    v.algorithms = vec![alg];
    v.validate_exp = false;
    v.validate_nbf = false;
    v.leeway = 0;
    let mut required = vec!["exp"];
    if let Some(iss) = issuer {
        v.set_issuer(&[iss]);
        required.push("iss");
    }
    match audience {
        Some(aud) => {
            v.set_audience(&[aud]);
            v.validate_aud = true;
            required.push("aud");
        }
        None => v.validate_aud = false,
    }
    v.set_required_spec_claims(&required);
    v
}

/// Reads the token header without trusting it: exactly three dot-separated parts, a base64url
/// JSON object header with a string `alg` naming a supported algorithm, and an optional string
/// `kid`. Anything else is `InvalidToken`.
fn peek_header(token: &str) -> Result<(Algorithm, Option<String>), IdentityError> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid(MALFORMED));
    };
    let bytes = b64url_decode(header).ok_or_else(|| invalid(MALFORMED))?;
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(&bytes) else {
        return Err(invalid(MALFORMED));
    };
    // `none`, `None`, `NONE`, missing or non-string `alg`, and anything unsupported.
    let alg = match map.get("alg") {
        Some(Value::String(s)) => s
            .parse::<Algorithm>()
            .map_err(|_| invalid(ALG_NOT_ALLOWED))?,
        _ => return Err(invalid(ALG_NOT_ALLOWED)),
    };
    let kid = match map.get("kid") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(invalid(MALFORMED)),
    };
    Ok((alg, kid))
}

/// Strict unpadded base64url (RFC 4648 §5) as used by JWS; `None` on any invalid input
/// (padding, other alphabets, impossible lengths, non-canonical trailing bits).
fn b64url_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .ok()
}

/// Client-safe reason for a jsonwebtoken error (no token content, no key material).
fn reason(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidSignature => BAD_SIGNATURE,
        ErrorKind::InvalidAlgorithm
        | ErrorKind::InvalidAlgorithmName
        | ErrorKind::UnsupportedAlgorithm
        | ErrorKind::MissingAlgorithm => ALG_NOT_ALLOWED,
        ErrorKind::MissingRequiredClaim(c) => match c.as_str() {
            "exp" => MISSING_EXP,
            "iss" => "missing required claim \"iss\"",
            "aud" => "missing required claim \"aud\"",
            _ => "missing required claim",
        },
        ErrorKind::InvalidClaimFormat(c) => match c.as_str() {
            "iss" => "claim \"iss\" malformed",
            "aud" => "claim \"aud\" malformed",
            _ => "claim malformed",
        },
        ErrorKind::InvalidIssuer => "issuer not accepted",
        ErrorKind::InvalidAudience => "audience not accepted",
        ErrorKind::ExpiredSignature => EXPIRED,
        ErrorKind::ImmatureSignature => NOT_YET_VALID,
        ErrorKind::InvalidToken
        | ErrorKind::Base64(_)
        | ErrorKind::Json(_)
        | ErrorKind::Utf8(_) => MALFORMED,
        _ => "token rejected",
    }
}

/// Loads one configured key; the error names `path` plus the source field.
fn load_key(path: &str, k: &JwtKeySettings) -> Result<DecodingKey, ConfigError> {
    let family = k.algorithm.family();
    let alg_name = format!("{:?}", k.algorithm);
    match (&k.source, family) {
        (KeySource::SecretEnv(var), AlgorithmFamily::Hmac) => {
            let field = format!("{path}.secret_env");
            let secret = std::env::var(var).map_err(|e| {
                let why = match e {
                    std::env::VarError::NotPresent => "is not set",
                    std::env::VarError::NotUnicode(_) => "is not valid UTF-8",
                };
                ConfigError::new(&field, format!("environment variable \"{var}\" {why}"))
            })?;
            hmac_key(
                &field,
                secret.as_bytes(),
                &format!("environment variable \"{var}\""),
            )
        }
        (KeySource::SecretFile(file), AlgorithmFamily::Hmac) => {
            let field = format!("{path}.secret_file");
            let bytes = std::fs::read(file)
                .map_err(|e| ConfigError::new(&field, crate::config::unreadable(file, &e)))?;
            hmac_key(
                &field,
                trim_one_newline(&bytes),
                &format!("file \"{file}\""),
            )
        }
        (
            KeySource::PublicKeyFile(file),
            AlgorithmFamily::Rsa | AlgorithmFamily::Ec | AlgorithmFamily::Ed,
        ) => {
            let field = format!("{path}.public_key_file");
            let pem = std::fs::read(file)
                .map_err(|e| ConfigError::new(&field, crate::config::unreadable(file, &e)))?;
            if contains(&pem, b"PRIVATE KEY") {
                return Err(ConfigError::new(
                    &field,
                    format!("\"{file}\" holds a private key; configure the public key (`openssl pkey -pubout`)"),
                ));
            }
            let parsed = match family {
                AlgorithmFamily::Rsa => DecodingKey::from_rsa_pem(&pem),
                AlgorithmFamily::Ec => DecodingKey::from_ec_pem(&pem),
                _ => DecodingKey::from_ed_pem(&pem),
            };
            let kind = match family {
                AlgorithmFamily::Rsa => "an RSA",
                AlgorithmFamily::Ec => "an EC",
                _ => "an Ed25519",
            };
            let key = parsed.map_err(|_| {
                ConfigError::new(
                    &field,
                    format!("\"{file}\" is not {kind} public key in PEM format"),
                )
            })?;
            check_key_fits(&field, file, k.algorithm, &key)?;
            Ok(key)
        }
        (KeySource::PublicKeyFile(_), _) => Err(ConfigError::new(
            path,
            format!("{alg_name} needs secret_env or secret_file, not public_key_file"),
        )),
        (_, _) => Err(ConfigError::new(
            path,
            format!("{alg_name} needs public_key_file, not an HMAC secret"),
        )),
    }
}

fn hmac_key(field: &str, secret: &[u8], what: &str) -> Result<DecodingKey, ConfigError> {
    if secret.is_empty() {
        return Err(ConfigError::new(field, format!("{what} is empty")));
    }
    DecodingKey::from_secret(secret)
        .map_err(|_| ConfigError::new(field, format!("{what} is not a usable secret")))
}

/// Removes one trailing `\n` (or `\r\n`), as editors and `echo` add one.
fn trim_one_newline(bytes: &[u8]) -> &[u8] {
    match bytes {
        [rest @ .., b'\r', b'\n'] => rest,
        [rest @ .., b'\n'] => rest,
        _ => bytes,
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Fails at load time instead of on every request when a public key does not fit its algorithm:
/// EC curve mismatch (ES256 needs P-256, ES384 needs P-384), a bad Ed25519 key, or an RSA key
/// that does not parse or is shorter than 2048 bits.
fn check_key_fits(
    field: &str,
    file: &str,
    alg: Algorithm,
    key: &DecodingKey,
) -> Result<(), ConfigError> {
    let Some(provider) = CryptoProvider::try_get_default() else {
        return Err(ConfigError::new(
            field,
            "no jsonwebtoken crypto provider is available",
        ));
    };
    let misfit =
        |why: &str| ConfigError::new(field, format!("\"{file}\" does not fit {alg:?}: {why}"));
    if (provider.verifier_factory)(&alg, key).is_err() {
        return Err(misfit(match alg {
            Algorithm::ES256 => "ES256 needs a P-256 key",
            Algorithm::ES384 => "ES384 needs a P-384 key",
            _ => "unusable key",
        }));
    }
    if alg.family() == AlgorithmFamily::Rsa {
        let der = key
            .try_get_as_bytes()
            .map_err(|_| misfit("unusable RSA key"))?;
        let (n, _e) = (provider.key_utils.rsa_pub_components_from_public_key)(der)
            .map_err(|_| misfit("not a valid RSA public key"))?;
        let n = match n.iter().position(|&b| b != 0) {
            Some(first) => &n[first..],
            None => &[][..],
        };
        let bits = n
            .first()
            .map_or(0, |b| (n.len() - 1) * 8 + (8 - b.leading_zeros() as usize));
        if bits < MIN_RSA_BITS {
            return Err(misfit(&format!(
                "RSA modulus is {bits} bits, at least {MIN_RSA_BITS} are required"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
