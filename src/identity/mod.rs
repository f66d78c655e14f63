//! Identity stage (docs/DESIGN.md section 1): `Authorization: Bearer <JWT>`, an API key
//! header or a verified client certificate → [`Identity`] `(tenant, tier, method)`.
//!
//! This module owns the tenant of every request: the anonymous tenant of a client without
//! credentials ([`Authenticator::anonymous`], tier [`ANONYMOUS_TIER`]), tier resolution, and what
//! the backend is told ([`Authenticator::forward`]: identity headers stripped from the client's
//! request, tenant and tier headers set).
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

pub mod admin_token;
pub mod api_key;
pub mod issuers;
pub mod jwks;
pub mod jwt;
pub mod key_digest;

pub use api_key::hash_key;

use crate::config::{ConfigError, IdentitySettings, TenantOverride, Tier};
use crate::http::client_ip;
use crate::tenant_id::{self, TenantIdError};
use http::header::{HeaderMap, HeaderName, AUTHORIZATION};
use smallvec::SmallVec;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

pub use crate::tenant_id::ANONYMOUS_PREFIX;
/// The tier name carried by [`IdentityError::UnknownTier`] when tiers are configured but no tier
/// could be resolved for an authenticated tenant (no tier claim/key tier, no `tenants:` entry
/// with a tier, no `identity.default_tier`).
pub const NO_TIER: &str = "<none>";
/// The tier of anonymous tenants (docs/DESIGN.md section 1, stage 3): without a tier of this
/// name, anonymous traffic has no tenant limit.
pub const ANONYMOUS_TIER: &str = "anonymous";

/// How a request was identified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `Authorization: Bearer <JWT>`.
    Jwt,
    /// The API key header.
    ApiKey,
    /// A verified TLS client certificate (`identity.mtls`).
    Mtls,
    /// No credentials: one tenant per client key (IP, IPv6 reduced to a prefix).
    Anonymous,
}

impl Method {
    /// `jwt`, `api_key`, `mtls` or `anonymous`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Jwt => "jwt",
            Method::ApiKey => "api_key",
            Method::Mtls => "mtls",
            Method::Anonymous => "anonymous",
        }
    }
}

/// Who made the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Tenant id: the JWT claim `tenant_claim` (else `sub`, RFC 7519 §4.1.2), the API key's
    /// configured tenant, the certificate's CN, or `ip:<client key>` for anonymous requests;
    /// always valid by [`tenant_id::validate`]. Raw text: it leaves the process only through
    /// [`tenant_id::encode`] (backend header, Redis key).
    pub tenant: String,
    /// Resolved tier name; `None` when no tier applies (no tiers configured, or an anonymous
    /// request without an [`ANONYMOUS_TIER`]).
    pub tier: Option<String>,
    pub method: Method,
    /// The verified JWT's claims (`None` for other methods), for rules keyed by `claim:<name>`.
    pub claims: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
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
    /// 503: the token's JWKS issuer has no usable key set yet (never fetched, or older than
    /// `stale_for`); carries the issuer. Not the client's fault: retried after
    /// [`ISSUER_RETRY_AFTER_S`].
    #[error("the keys of issuer \"{0}\" are not available yet; retry later")]
    IssuerUnavailable(String),
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
    /// `DuplicateApiKey`; 403 for `UnknownTier`; 503 for `IssuerUnavailable`.
    pub fn status(&self) -> u16 {
        match self {
            IdentityError::InvalidToken(_)
            | IdentityError::UnknownApiKey
            | IdentityError::Missing => 401,
            IdentityError::DuplicateApiKey => 400,
            IdentityError::UnknownTier(_) => 403,
            IdentityError::IssuerUnavailable(_) => 503,
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
            IdentityError::DuplicateApiKey
            | IdentityError::UnknownTier(_)
            | IdentityError::IssuerUnavailable(_) => None,
        }
    }

    /// A one-line human-readable explanation for the problem+json `detail` member. Safe to show
    /// clients: never contains a token or a key.
    pub fn detail(&self) -> String {
        self.to_string()
    }
}

/// `Retry-After` of an [`IdentityError::IssuerUnavailable`] answer, seconds.
pub const ISSUER_RETRY_AFTER_S: u64 = 5;

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
    /// `identity.mtls` is on: a verified client certificate identifies the tenant.
    mtls: bool,
    /// Headers a client may not set for the backend (tenant and tier headers).
    strip: Vec<HeaderName>,
    tenant_header: HeaderName,
    tier_header: HeaderName,
    /// `identity.forward_credentials`.
    forward_credentials: bool,
}

/// How the request sent to the backend changes for one identity (see
/// [`Authenticator::forward`]).
#[derive(Debug, Clone, PartialEq, Eq)]
///
/// Both lists are short (at most three names removed, two set) and kept inline: nothing is
/// allocated for them per request.
pub struct Forward<'a> {
    /// Headers removed from the client's request.
    pub remove: SmallVec<[&'a HeaderName; 3]>,
    /// Headers set (name, value); values are header-safe.
    pub insert: SmallVec<[(&'a HeaderName, String); 2]>,
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
        Self::build_after(settings, tiers, tenants, None)
    }

    /// [`build`](Self::build), keeping `previous`'s live JWKS key sets of unchanged issuers.
    pub fn build_after(
        settings: &IdentitySettings,
        tiers: &BTreeMap<String, Tier>,
        tenants: &BTreeMap<String, TenantOverride>,
        previous: Option<&Authenticator>,
    ) -> Result<Authenticator, Vec<ConfigError>> {
        // The only part that can fail: reading key files and secrets (everything else was
        // validated into `settings`).
        let jwt = settings
            .jwt
            .as_ref()
            .map(|j| jwt::JwtVerifier::build_after(j, previous.and_then(|p| p.jwt.as_ref())))
            .transpose()?;
        let api_keys = settings.api_keys.as_ref().map(api_key::ApiKeyStore::new);
        let mut strip = vec![settings.tenant_header.clone()];
        if settings.tier_header != settings.tenant_header {
            strip.push(settings.tier_header.clone());
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
            mtls: settings.mtls.is_some(),
            strip,
            tenant_header: settings.tenant_header.clone(),
            tier_header: settings.tier_header.clone(),
            forward_credentials: settings.forward_credentials,
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
    /// backend). Two `Authorization: Bearer` values, or one next to an `Authorization` field of
    /// another scheme, are `InvalidToken`.
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
                    method: Method::Jwt,
                    claims: Some(claims.claims),
                }));
            }
        }
        if let Some(store) = &self.api_keys {
            if let Some(entry) = store.lookup(headers)? {
                let tier = self.resolve_tier(&entry.tenant, entry.tier.clone())?;
                return Ok(Some(Identity {
                    tenant: entry.tenant.clone(),
                    tier,
                    method: Method::ApiKey,
                    claims: None,
                }));
            }
        }
        Ok(None)
    }

    /// The identity of a verified client certificate whose subject CN is `cn`
    /// (`identity.mtls: { tenant_from: subject_cn }`); the tier resolves as for an API key
    /// without a tier: `tenants.<cn>.tier`, else `identity.default_tier`.
    /// Errors: a CN that is not a valid tenant id by [`tenant_id::validate`] (the one rule of
    /// every source: blank, surrounding whitespace, control characters, too long, the `ip:`
    /// prefix of anonymous clients) is `InvalidToken` (401), never trimmed into another
    /// tenant's id; a tier that does not resolve is `UnknownTier` (403).
    pub fn identify_client_cert(&self, cn: &str) -> Result<Identity, IdentityError> {
        if let Err(e) = tenant_id::validate(cn) {
            let why = match e {
                TenantIdError::Reserved => "tenant ids starting with \"ip:\" are reserved",
                _ => "client certificate subject CN is not a usable tenant id",
            };
            return Err(IdentityError::InvalidToken(why.into()));
        }
        let tier = self.resolve_tier(cn, None)?;
        Ok(Identity {
            tenant: cn.to_string(),
            tier,
            method: Method::Mtls,
            claims: None,
        })
    }

    /// Identifies a request: by its verified client certificate's subject CN when
    /// `identity.mtls` is on and `cert_cn` is given, else by [`authenticate`](Self::authenticate).
    pub fn identify(
        &self,
        headers: &HeaderMap,
        cert_cn: Option<&str>,
        now_s: u64,
    ) -> Result<Option<Identity>, IdentityError> {
        match cert_cn.filter(|_| self.mtls) {
            Some(cn) => self.identify_client_cert(cn).map(Some),
            None => self.authenticate(headers, now_s),
        }
    }

    /// The API key header: `identity.api_keys.header`, else `x-api-key` (the header keys issued
    /// through the admin API arrive in too).
    pub fn live_key_header(&self) -> HeaderName {
        self.key_header().clone()
    }

    /// The API key header: `identity.api_keys.header`, else `x-api-key`.
    fn key_header(&self) -> &HeaderName {
        static DEFAULT: HeaderName = HeaderName::from_static("x-api-key");
        self.api_keys
            .as_ref()
            .map_or(&DEFAULT, api_key::ApiKeyStore::header)
    }

    /// Whether one API key is presented in `headers` and the file's keys know it (the file's
    /// entry wins over a key issued through the admin API with the same digest).
    pub fn file_knows_key(&self, headers: &HeaderMap) -> bool {
        self.api_keys
            .as_ref()
            .is_some_and(|k| matches!(k.lookup(headers), Ok(Some(_))))
    }

    /// Whether `tiers:` has a tier of this name.
    pub fn has_tier(&self, name: &str) -> bool {
        self.tiers.contains(name)
    }

    /// The anonymous identity of `client` (a normalised IP): tenant `ip:<key>` where the key is
    /// the IP, IPv6 masked to `ipv6_prefix` bits (the edge's client key), in [`ANONYMOUS_TIER`]
    /// when that tier exists, else without a tier.
    pub fn anonymous(&self, client: IpAddr, ipv6_prefix: u8) -> Identity {
        let key = client_ip::key_of(client, ipv6_prefix);
        Identity {
            tenant: tenant_id::anonymous(key),
            tier: self
                .tiers
                .contains(ANONYMOUS_TIER)
                .then(|| ANONYMOUS_TIER.to_string()),
            method: Method::Anonymous,
            claims: None,
        }
    }

    /// What changes in the request sent to the backend for `identity`: the tenant and tier
    /// headers ([`strip_headers`](Self::strip_headers)) are always removed from the client's
    /// request; for an identified request (not anonymous) the credential that identified it
    /// is removed too (unless `identity.forward_credentials`), and the tenant (percent-encoded
    /// UTF-8, [`tenant_id::encode`]) and tier headers are set.
    ///
    /// A header that is set is not also listed in `remove`: setting replaces every value the
    /// client sent under that name, so removing it first would only cost a second lookup.
    pub fn forward(&self, identity: Option<&Identity>) -> Forward<'_> {
        let Some(id) = identity.filter(|id| id.method != Method::Anonymous) else {
            return Forward {
                remove: self.strip.iter().collect(),
                insert: SmallVec::new(),
            };
        };
        let mut insert = SmallVec::new();
        insert.push((
            &self.tenant_header,
            tenant_id::encode(&id.tenant).into_owned(),
        ));
        if let Some(tier) = &id.tier {
            insert.push((&self.tier_header, tier.clone()));
        }
        let mut remove: SmallVec<[&HeaderName; 3]> = self
            .strip
            .iter()
            .filter(|name| !insert.iter().any(|(set, _)| set == name))
            .collect();
        if !self.forward_credentials {
            match id.method {
                Method::Jwt => remove.push(&AUTHORIZATION),
                // A live key (issued through the admin API) is read from the same header,
                // also when the file has no `api_keys`.
                Method::ApiKey => remove.push(self.key_header()),
                _ => {}
            }
        }
        Forward { remove, insert }
    }

    /// Header names (lower case) that must be stripped from client requests before proxying:
    /// the configured tenant/tier headers (`identity.tenant_header`, `identity.tier_header`),
    /// so a client can never pose as another tenant to the backend. One entry when both are the
    /// same name.
    pub fn strip_headers(&self) -> &[HeaderName] {
        &self.strip
    }

    /// The live key sets of the JWKS issuers (empty without `identity.jwt.issuers`).
    pub fn issuers(&self) -> &[Arc<issuers::IssuerKeys>] {
        self.jwt.as_ref().map_or(&[], |j| j.issuers())
    }

    /// The JWKS issuer a request's bearer token waits for (see
    /// [`jwt::JwtVerifier::awaiting_keys`]), now: `None` for every request that need not wait
    /// (the clock is read only for a bearer token when there are issuers).
    pub fn awaiting_keys(&self, headers: &HeaderMap) -> Option<Arc<issuers::IssuerKeys>> {
        let verifier = self.jwt.as_ref().filter(|j| !j.issuers().is_empty())?;
        let token = bearer_token(headers).ok()??;
        verifier.awaiting_keys(token, std::time::Instant::now())
    }

    /// True when identifying a request reads the clock: bearer tokens are verified (`exp`,
    /// `nbf`). API keys and client certificates do not expire here.
    pub fn reads_clock(&self) -> bool {
        self.jwt.is_some()
    }

    /// Which issuer (`None`: a static key) and which `kid` verify the request's bearer token
    /// at `now_s`, for the admin `explain`; `None` when it has no valid bearer token.
    pub fn jwt_verified_by(
        &self,
        headers: &HeaderMap,
        now_s: u64,
    ) -> Option<(Option<String>, Option<String>)> {
        let token = bearer_token(headers).ok()??;
        let claims = self.jwt.as_ref()?.verify(token, now_s).ok()?;
        Some((claims.issuer, claims.kid))
    }

    /// The API key header (`identity.api_keys.header`, lower case), when API keys are
    /// configured.
    pub fn api_key_header(&self) -> Option<&HeaderName> {
        self.api_keys.as_ref().map(api_key::ApiKeyStore::header)
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
/// Values with another scheme are skipped when no `Bearer` value is present. A `Bearer` value
/// without a token, a token that is not UTF-8, more than one `Bearer` value, or a `Bearer`
/// value next to another `Authorization` field (RFC 9110 §11.6.2 allows one: a backend could
/// authenticate the other credential while the quota charged the token's tenant) is
/// `InvalidToken`.
fn bearer_token(headers: &HeaderMap) -> Result<Option<&str>, IdentityError> {
    let mut found = None;
    let mut other_schemes = false;
    for value in headers.get_all(AUTHORIZATION) {
        let bytes = value.as_bytes();
        // The scheme ends at the first SP or HTAB: RFC 9110 11.4 allows only SP, but a backend
        // that splits on any whitespace would take `Bearer<TAB><token>` as a bearer token, so
        // tollgate does too (and verifies it) rather than forward it unverified.
        let (scheme, rest) = match bytes.iter().position(|&b| b == b' ' || b == b'\t') {
            Some(i) => (&bytes[..i], &bytes[i + 1..]),
            None => (bytes, &[][..]),
        };
        if !scheme.eq_ignore_ascii_case(b"bearer") {
            other_schemes = true;
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
    if found.is_some() && other_schemes {
        return Err(IdentityError::InvalidToken(
            "a bearer token next to another Authorization field".to_string(),
        ));
    }
    Ok(found)
}

#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
