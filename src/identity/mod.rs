//! Identity stage (docs/DESIGN.md section 1, stage 2): `Authorization: Bearer <JWT>` or an API key
//! header → [`Identity`] `(tenant, tier)`.
//!
//! An [`Authenticator`] is built once per config snapshot: secrets are read from the environment
//! or files and PEM keys are parsed there, never per request. [`Authenticator::authenticate`] is
//! pure CPU work (no I/O, no clock: the caller passes `now_s`) and never panics on client input.
//!
//! Precedence: a bearer token, when present, decides alone; the API key header is consulted only
//! when there is no bearer token. See [`Authenticator::authenticate`].
//!
//! Failures are [`IdentityError`]s that map to 400/401/403 via [`IdentityError::status`]; none of
//! them is a 500 and none reaches Redis.

pub mod api_key;
pub mod jwt;
pub mod tenant_id;

pub use api_key::hash_key;

use crate::config::{ConfigError, IdentitySettings, TenantOverride, Tier};
use http::header::{HeaderMap, AUTHORIZATION};
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub use tenant_id::ANONYMOUS_PREFIX;
/// The tier name carried by [`IdentityError::UnknownTier`] when tiers are configured but no tier
/// could be resolved for an authenticated tenant (no tier claim/key tier, no `tenants:` entry
/// with a tier, no `identity.default_tier`).
pub const NO_TIER: &str = "<none>";

/// Who made the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Tenant id: the JWT claim `tenant_claim` (else `sub`, RFC 7519 §4.1.2), or the API key's
    /// configured tenant; always valid by [`tenant_id::validate`]. Raw text: it leaves the
    /// process only through [`tenant_id::encode`] (backend header, Redis key).
    pub tenant: String,
    /// resolved tier name; None when no tier applies
    pub tier: Option<String>,
    /// "jwt" | "api_key" | "mtls"
    pub method: &'static str,
}

/// Why identity failed. Every variant maps to a status in [`IdentityError::status`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// 401: a bearer token was present but invalid; the String is a short reason safe to show a
    /// client (never contains the token), e.g. "signature invalid", "token expired",
    /// "algorithm not allowed".
    #[error("invalid bearer token: {0}")]
    InvalidToken(String),
    /// 401: an API key was presented that matches no configured digest.
    #[error("unknown API key")]
    UnknownApiKey,
    /// 401: the route requires identity and none was presented.
    #[error("this route requires a bearer token or an API key")]
    Missing,
    /// 400: more than one API key header in the request.
    #[error("more than one API key header")]
    DuplicateApiKey,
    /// 403: the resolved tier name does not exist in `tiers:` (carries the name; [`NO_TIER`]
    /// when no tier could be resolved at all).
    #[error("{}", unknown_tier_detail(.0))]
    UnknownTier(String),
}

fn unknown_tier_detail(name: &str) -> String {
    if name == NO_TIER {
        "no tier is configured for this tenant".to_string()
    } else {
        format!("tier \"{name}\" is not configured")
    }
}

impl IdentityError {
    /// HTTP status: 401 for `InvalidToken`, `UnknownApiKey`, `Missing`; 400 for
    /// `DuplicateApiKey`; 403 for `UnknownTier`.
    pub fn status(&self) -> u16 {
        match self {
            IdentityError::InvalidToken(_)
            | IdentityError::UnknownApiKey
            | IdentityError::Missing => 401,
            IdentityError::DuplicateApiKey => 400,
            IdentityError::UnknownTier(_) => 403,
        }
    }

    /// The `WWW-Authenticate` value for 401s (RFC 6750 §3), `None` for other statuses:
    /// - `Missing`: `Bearer` (no credentials were presented, so no error code, RFC 6750 §3.1);
    /// - `InvalidToken` and `UnknownApiKey`: `Bearer error="invalid_token"` (credentials were
    ///   presented and rejected; docs/DESIGN.md section 1 uses this for every identity failure).
    pub fn www_authenticate(&self) -> Option<&'static str> {
        match self {
            IdentityError::Missing => Some("Bearer"),
            IdentityError::InvalidToken(_) | IdentityError::UnknownApiKey => {
                Some("Bearer error=\"invalid_token\"")
            }
            IdentityError::DuplicateApiKey | IdentityError::UnknownTier(_) => None,
        }
    }

    /// A one-line human-readable explanation for the problem+json `detail` member. Safe to show
    /// clients: never contains a token or a key.
    pub fn detail(&self) -> String {
        self.to_string()
    }
}

/// The identity stage of one config snapshot.
///
/// Built once per snapshot (reads secrets from env/files and parses PEM here, never per
/// request); cheap to share behind an `Arc` (it is `Send + Sync`).
#[derive(Debug, Clone)]
pub struct Authenticator {
    jwt: Option<jwt::JwtVerifier>,
    api_keys: Option<api_key::ApiKeyStore>,
    /// Names of `tiers:`.
    tiers: BTreeSet<String>,
    /// `tenants.<id>.tier`, for tenants that set one.
    tenant_tiers: HashMap<String, String>,
    default_tier: Option<String>,
    strip: Vec<String>,
}

/// An optional part of the authenticator: the built value when configured and valid; its
/// errors go to `errors`, to be reported with all the others.
fn optional_part<T>(
    built: Option<Result<T, Vec<ConfigError>>>,
    errors: &mut Vec<ConfigError>,
) -> Option<T> {
    match built? {
        Ok(v) => Some(v),
        Err(e) => {
            errors.extend(e);
            None
        }
    }
}

impl Authenticator {
    /// Builds the stage from validated settings. Errors name the field path, e.g.
    /// `identity.jwt.keys[1].public_key_file: cannot read ...`; all problems are reported, not
    /// only the first.
    pub fn build(
        settings: &IdentitySettings,
        tiers: &BTreeMap<String, Tier>,
        tenants: &BTreeMap<String, TenantOverride>,
    ) -> Result<Authenticator, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let jwt = optional_part(
            settings.jwt.as_ref().map(jwt::JwtVerifier::build),
            &mut errors,
        );
        let api_keys = optional_part(
            settings.api_keys.as_ref().map(api_key::ApiKeyStore::build),
            &mut errors,
        );
        if !errors.is_empty() {
            return Err(errors);
        }
        let mut strip = vec![settings.tenant_header.to_ascii_lowercase()];
        let tier_header = settings.tier_header.to_ascii_lowercase();
        if !strip.contains(&tier_header) {
            strip.push(tier_header);
        }
        Ok(Authenticator {
            jwt,
            api_keys,
            tiers: tiers.keys().cloned().collect(),
            tenant_tiers: tenants
                .iter()
                .filter_map(|(id, o)| o.tier.clone().map(|t| (id.clone(), t)))
                .collect(),
            default_tier: settings.default_tier.clone(),
            strip,
        })
    }

    /// Identifies the client from request headers at unix time `now_s` (seconds; injected so
    /// tests control the clock for `exp`/`nbf`, RFC 7519 §4.1.4–4.1.5).
    ///
    /// - `Ok(None)`: no credentials presented (anonymous). The caller turns that into
    ///   [`IdentityError::Missing`] on `auth: required` routes.
    /// - `Ok(Some(identity))`: a verified JWT or a known API key, with its tier resolved.
    /// - `Err(_)`: credentials were presented and rejected, or the tier cannot be resolved.
    ///
    /// Order: `Authorization: Bearer <token>` first (scheme matched case-insensitively). **If a
    /// bearer token is present it decides alone**: an invalid token is an error even when a
    /// valid API key is also present, and the API key header is then not looked at. An
    /// `Authorization` header with another scheme (e.g. `Basic`) counts as no credentials. When
    /// `identity.jwt` is not configured, bearer tokens are ignored (they may be meant for the
    /// backend). Two `Authorization: Bearer` values are `InvalidToken`.
    ///
    /// Otherwise the API key header (`identity.api_keys.header`, case-insensitive name) is used
    /// when API keys are configured: more than one value is `DuplicateApiKey` (400), an unknown
    /// key `UnknownApiKey` (401).
    ///
    /// Tier: for JWTs the `tier_claim` (when configured and present), for API keys the key's
    /// `tier`; else `tenants.<tenant>.tier`; else `identity.default_tier`. A resolved name that is
    /// not in `tiers:` is `UnknownTier(name)` (403). When nothing resolves: `tier: None` if no
    /// tiers are configured at all, else `UnknownTier(NO_TIER)` (403), because an authenticated
    /// tenant without a tier is a config mistake the operator must see.
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
        now_s: u64,
    ) -> Result<Option<Identity>, IdentityError> {
        if let Some(verifier) = &self.jwt {
            if let Some(token) = bearer_token(headers)? {
                let claims = verifier.verify(token, now_s)?;
                let tier = self.resolve_tier(&claims.tenant, claims.tier)?;
                return Ok(Some(Identity {
                    tenant: claims.tenant,
                    tier,
                    method: "jwt",
                }));
            }
        }
        if let Some(store) = &self.api_keys {
            if let Some(entry) = store.lookup(headers)? {
                let tier = self.resolve_tier(&entry.tenant, entry.tier.clone())?;
                return Ok(Some(Identity {
                    tenant: entry.tenant.clone(),
                    tier,
                    method: "api_key",
                }));
            }
        }
        Ok(None)
    }

    /// The identity of a verified client certificate whose subject CN is `cn`
    /// (`identity.mtls: { tenant_from: subject_cn }`); the tier resolves as for an API key
    /// without a tier: `tenants.<cn>.tier`, else `identity.default_tier`.
    /// Errors: an empty CN or one starting with `ip:` (the anonymous prefix) is
    /// `InvalidToken` (401); a tier that does not resolve is `UnknownTier` (403).
    pub fn identify_client_cert(&self, cn: &str) -> Result<Identity, IdentityError> {
        if cn.is_empty() || cn.starts_with(ANONYMOUS_PREFIX) {
            return Err(IdentityError::InvalidToken(
                "client certificate subject CN is not a usable tenant id".into(),
            ));
        }
        let tier = self.resolve_tier(cn, None)?;
        Ok(Identity {
            tenant: cn.to_string(),
            tier,
            method: "mtls",
        })
    }

    /// Header names (lower case) that must be stripped from client requests before proxying:
    /// the configured tenant/tier headers (`identity.tenant_header`, `identity.tier_header`),
    /// so a client can never pose as another tenant to the backend. One entry when both are the
    /// same name.
    pub fn strip_headers(&self) -> &[String] {
        &self.strip
    }

    fn resolve_tier(
        &self,
        tenant: &str,
        explicit: Option<String>,
    ) -> Result<Option<String>, IdentityError> {
        let name = explicit
            .or_else(|| self.tenant_tiers.get(tenant).cloned())
            .or_else(|| self.default_tier.clone());
        match name {
            Some(n) if self.tiers.contains(&n) => Ok(Some(n)),
            Some(n) => Err(IdentityError::UnknownTier(n)),
            None if self.tiers.is_empty() => Ok(None),
            None => Err(IdentityError::UnknownTier(NO_TIER.to_string())),
        }
    }
}

/// The token of the single `Authorization: Bearer <token>` header (RFC 6750 §2.1), if any.
/// Values with another scheme are skipped. A `Bearer` value without a token, a token that is
/// not UTF-8, or more than one `Bearer` value is `InvalidToken`.
fn bearer_token(headers: &HeaderMap) -> Result<Option<&str>, IdentityError> {
    let mut found = None;
    for value in headers.get_all(AUTHORIZATION) {
        let bytes = value.as_bytes();
        let (scheme, rest) = match bytes.iter().position(|&b| b == b' ') {
            Some(i) => (&bytes[..i], &bytes[i + 1..]),
            None => (bytes, &[][..]),
        };
        if !scheme.eq_ignore_ascii_case(b"bearer") {
            continue;
        }
        if found.is_some() {
            return Err(IdentityError::InvalidToken(
                "more than one bearer token".to_string(),
            ));
        }
        let token = rest.trim_ascii();
        if token.is_empty() {
            return Err(IdentityError::InvalidToken("missing token".to_string()));
        }
        let token = std::str::from_utf8(token)
            .map_err(|_| IdentityError::InvalidToken("malformed token".to_string()))?;
        found = Some(token);
    }
    Ok(found)
}

/// Shared by the tests of this module and its children: fixture keys, signing, settings.
#[cfg(test)]
pub(crate) mod test_support {
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
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;
    use crate::config::{ApiKeyEntry, ApiKeySettings, FailurePolicy, JwtSettings};
    use crate::limit::Rate;
    use http::HeaderValue;
    use jsonwebtoken::Algorithm;
    use serde_json::json;

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
            header: "x-api-key".into(),
            keys: vec![
                ApiKeyEntry {
                    sha256: hash_key(ACME_KEY),
                    tenant: "acme".into(),
                    tier: Some("pro".into()),
                },
                ApiKeyEntry {
                    sha256: hash_key(GLOBEX_KEY),
                    tenant: "globex".into(),
                    tier: None,
                },
                ApiKeyEntry {
                    sha256: hash_key(BIGCO_KEY),
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
            tenant_header: "x-tollgate-tenant".into(),
            tier_header: "x-tollgate-tier".into(),
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
            assert_eq!(
                id,
                Identity {
                    tenant: "acme".into(),
                    tier: Some("free".into()),
                    method: "jwt"
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
        let a =
            Authenticator::build(&s, &tiers(&["free", "pro", "enterprise"]), &tenants()).unwrap();
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
            ("globex", None, "api_key")
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
                method: "api_key"
            }
        );
        // 2. tenants map.
        assert_eq!(id(BIGCO_KEY).tier.as_deref(), Some("enterprise"));
        // 3. default tier.
        assert_eq!(id(GLOBEX_KEY).tier.as_deref(), Some("free"));
        // An explicit key tier beats the tenants map.
        let mut s = settings();
        s.api_keys.as_mut().unwrap().keys[2].tier = Some("pro".into());
        let a =
            Authenticator::build(&s, &tiers(&["free", "pro", "enterprise"]), &tenants()).unwrap();
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
        assert_eq!((id.tenant.as_str(), id.method), ("bigco", "jwt"));
        // Invalid bearer + valid key: the token's error, the key is not a fallback.
        let h = with_key(bearer("not.a.jwt"), ACME_KEY);
        assert!(matches!(
            a.authenticate(&h, NOW),
            Err(IdentityError::InvalidToken(_))
        ));
        // Valid bearer + duplicate key headers: the key header is not looked at.
        let h = with_key(with_key(bearer(&token(good_claims())), "x"), "y");
        assert_eq!(a.authenticate(&h, NOW).unwrap().unwrap().method, "jwt");
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
        assert_eq!(a.authenticate(&h, NOW).unwrap().unwrap().method, "api_key");
        // "Bearerx" is another scheme, not Bearer.
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearerx abc"));
        assert_eq!(a.authenticate(&h, NOW), Ok(None));
        // Basic next to a Bearer value: the bearer is used.
        let mut h = HeaderMap::new();
        h.append(
            AUTHORIZATION,
            HeaderValue::from_static("Basic YWxhZGRpbjpvcGVuc2VzYW1l"),
        );
        h.append(
            AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {}", token(good_claims()))).unwrap(),
        );
        assert_eq!(a.authenticate(&h, NOW).unwrap().unwrap().tenant, "acme");
    }

    #[test]
    fn bearer_scheme_parsing() {
        let a = auth();
        let t = token(good_claims());
        for v in [
            format!("bearer {t}"),
            format!("BEARER {t}"),
            format!("Bearer   {t}  "),
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
        let a =
            Authenticator::build(&s, &tiers(&["free", "pro", "enterprise"]), &tenants()).unwrap();
        assert_eq!(a.authenticate(&bearer("anything"), NOW), Ok(None));
        let h = with_key(bearer("anything"), ACME_KEY);
        assert_eq!(a.authenticate(&h, NOW).unwrap().unwrap().tenant, "acme");
        // And API key headers are ignored when API keys are not configured.
        let mut s = settings();
        s.api_keys = None;
        let a =
            Authenticator::build(&s, &tiers(&["free", "pro", "enterprise"]), &tenants()).unwrap();
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
        s.tier_header = "X-Tollgate-Tenant".into();
        let a = Authenticator::build(&s, &tiers(&["free"]), &BTreeMap::new()).unwrap();
        assert_eq!(a.strip_headers(), ["x-tollgate-tenant"]);
    }

    #[test]
    fn build_collects_jwt_and_api_key_errors() {
        let mut s = settings();
        s.jwt.as_mut().unwrap().keys[1] = pem_key(Some("k1"), Algorithm::RS256, "nope.pem");
        s.api_keys.as_mut().unwrap().keys[0].sha256 = "zz".into();
        let errs = Authenticator::build(&s, &tiers(&["free"]), &BTreeMap::new()).unwrap_err();
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "identity.jwt.keys[1].public_key_file",
                "identity.api_keys.keys[0].sha256"
            ]
        );
        assert!(errs[0]
            .to_string()
            .starts_with("identity.jwt.keys[1].public_key_file: cannot read"));
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
}
