//! `identity:`: JWT, API keys and mTLS, and the headers that carry tenant and tier.

/// `identity:`.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentitySettings {
    pub jwt: Option<JwtSettings>,
    pub api_keys: Option<ApiKeySettings>,
    pub default_tier: Option<String>,
    /// Header that carries the tenant id to the backend (a valid name, lower case).
    pub tenant_header: http::HeaderName,
    /// Header that carries the tier name to the backend (a valid name, lower case).
    pub tier_header: http::HeaderName,
    /// Pass the credential that identified the request (`Authorization` / API key header) on to
    /// the backend. Default false: the backend gets the tenant and tier headers instead.
    pub forward_credentials: bool,
    /// `identity.mtls`: a verified client certificate identifies the tenant.
    pub mtls: Option<MtlsTenantFrom>,
}

/// `identity.jwt`.
#[derive(Debug, Clone, PartialEq)]
pub struct JwtSettings {
    pub issuer: Option<String>,
    pub audience: Option<String>,
    /// Clock leeway for `exp` and `nbf`, seconds.
    pub leeway_s: u64,
    pub tenant_claim: String,
    pub tier_claim: Option<String>,
    /// Keys pinned in the file; kids are unique. Empty only when `issuers` is not.
    pub keys: Vec<JwtKeySettings>,
    /// Identity providers with a JWKS; issuers are unique.
    pub issuers: Vec<JwtIssuerSettings>,
}

/// Where an issuer's JWKS (RFC 7517 §5) is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// OpenID Connect Discovery 1.0: `jwks_uri` of `<issuer>/.well-known/openid-configuration`.
    Discovery,
    /// This URL.
    Url(String),
}

/// `identity.jwt.issuers[]`: one identity provider whose signing keys come from its JWKS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtIssuerSettings {
    /// The exact `iss` claim of its tokens (RFC 7519 §4.1.1); an https URL, or http on loopback.
    pub issuer: String,
    pub source: JwksSource,
    /// Required `aud` (RFC 7519 §4.1.3) when set.
    pub audience: Option<String>,
    pub tenant_claim: String,
    pub tier_claim: Option<String>,
    /// `Cache-Control: max-age` of the JWKS response is clamped to `refresh_min..=refresh_max`.
    pub refresh_min: std::time::Duration,
    pub refresh_max: std::time::Duration,
    /// At most one refetch per this interval is triggered by tokens with an unknown `kid`.
    pub unknown_kid_refetch: std::time::Duration,
    /// The last good key set serves this long after its fetch while refreshes fail.
    pub stale_for: std::time::Duration,
    /// Bound on one fetch (connect, redirects, body).
    pub fetch_timeout: std::time::Duration,
    /// PEM CA bundle for the IdP's TLS instead of the system roots.
    pub ca_file: Option<String>,
}

/// Where a JWT verification key comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum KeySource {
    /// HMAC secret read from this environment variable.
    SecretEnv(String),
    /// HMAC secret read from this file (trailing newline trimmed).
    SecretFile(String),
    /// PEM public key file (RSA, EC or Ed25519).
    PublicKeyFile(String),
}

/// One configured JWT key, pinned to one algorithm.
#[derive(Debug, Clone, PartialEq)]
pub struct JwtKeySettings {
    pub kid: Option<String>,
    pub algorithm: jsonwebtoken::Algorithm,
    pub source: KeySource,
}

/// `identity.api_keys`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKeySettings {
    /// Header the key is read from (a valid name, lower case).
    pub header: http::HeaderName,
    /// At least one key; digests are unique.
    pub keys: Vec<ApiKeyEntry>,
}

/// One API key, stored only as the SHA-256 digest of the key.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKeyEntry {
    /// SHA-256 of the key (written in YAML as 64 hex digits).
    pub sha256: [u8; 32],
    pub tenant: String,
    pub tier: Option<String>,
}

/// `identity.mtls`: where the tenant of a verified client certificate comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MtlsTenantFrom {
    /// The certificate subject's common name (CN).
    SubjectCn,
}

/// Checks a URL tollgate fetches identity-provider documents from: `https://host[...]`, or
/// `http://` only when the host is loopback (`localhost`, `127.0.0.0/8`, `[::1]`), since keys
/// fetched in clear text could be replaced by anyone on the path. Errors are a short reason.
pub fn idp_url(url: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = url.parse().map_err(|_| format!("\"{url}\" is not a URL"))?;
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| format!("\"{url}\" has no host"))?;
    match uri.scheme_str() {
        Some("https") => Ok(uri),
        Some("http") if is_loopback_host(host) => Ok(uri),
        Some("http") => Err(format!(
            "\"{url}\": plain http is accepted only for loopback hosts; use https"
        )),
        _ => Err(format!("\"{url}\" must be an https URL")),
    }
}

/// `localhost` (RFC 6761 §6.3), an IPv4 loopback address or `[::1]`.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}
