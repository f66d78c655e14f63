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
    /// At least one key; kids are unique.
    pub keys: Vec<JwtKeySettings>,
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
