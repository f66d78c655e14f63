//! `identity:`: how a request's credentials map to a tenant and a tier (JWT, API keys, mTLS),
//! and the headers that carry them.

use super::common::Check;
use super::tls;
use crate::config::model::{
    ApiKeyEntry, ApiKeySettings, IdentitySettings, JwksSource, JwtIssuerSettings, JwtKeySettings,
    JwtSettings, KeySource,
};
use crate::config::raw::{RawIdentity, RawJwt, RawJwtIssuer};
use std::collections::BTreeSet;
use std::time::Duration;

/// `identity:` → settings. `tier_ref` checks (and reports) each tier named at a path.
pub(super) fn settings(
    c: &mut Check,
    raw: Option<&RawIdentity>,
    tier_ref: &mut impl FnMut(&mut Check, &str, &str),
) -> IdentitySettings {
    let header = |c: &mut Check, path: &str, v: Option<&String>, default: &'static str| {
        v.and_then(|n| c.header_name(path, n))
            .unwrap_or_else(|| http::HeaderName::from_static(default))
    };
    let tenant_header = header(
        c,
        "identity.tenant_header",
        raw.and_then(|r| r.tenant_header.as_ref()),
        "x-tollgate-tenant",
    );
    let tier_header = header(
        c,
        "identity.tier_header",
        raw.and_then(|r| r.tier_header.as_ref()),
        "x-tollgate-tier",
    );
    let Some(raw) = raw else {
        return IdentitySettings {
            jwt: None,
            api_keys: None,
            default_tier: None,
            tenant_header,
            tier_header,
            forward_credentials: false,
            mtls: None,
        };
    };
    if let Some(t) = &raw.default_tier {
        tier_ref(c, "identity.default_tier", t);
    }
    let jwt = raw.jwt.as_ref().map(|j| jwt_settings(c, j));
    let api_keys = raw.api_keys.as_ref().map(|a| {
        let mut seen = BTreeSet::new();
        let mut keys = Vec::new();
        for (i, k) in a.keys.iter().enumerate() {
            let path = format!("identity.api_keys.keys[{i}]");
            let mut digest = [0u8; 32];
            if k.sha256.len() != 64 || hex::decode_to_slice(&k.sha256, &mut digest).is_err() {
                c.err(
                    format!("{path}.sha256"),
                    "must be 64 hex digits (the SHA-256 of the key; see `tollgate hash-key`)",
                );
            } else if !seen.insert(digest) {
                c.err(format!("{path}.sha256"), "duplicate key digest");
            }
            c.tenant_id(&format!("{path}.tenant"), &k.tenant);
            if let Some(t) = &k.tier {
                tier_ref(c, &format!("{path}.tier"), t);
            }
            keys.push(ApiKeyEntry {
                sha256: digest,
                tenant: k.tenant.clone(),
                tier: k.tier.clone(),
            });
        }
        ApiKeySettings {
            header: header(
                c,
                "identity.api_keys.header",
                a.header.as_ref(),
                "x-api-key",
            ),
            keys,
        }
    });
    IdentitySettings {
        jwt,
        api_keys,
        default_tier: raw.default_tier.clone(),
        tenant_header,
        tier_header,
        forward_credentials: raw.forward_credentials.unwrap_or(false),
        mtls: raw.mtls.as_ref().and_then(|m| tls::mtls(c, m)),
    }
}

/// `identity.jwt`: at least one key, unique `kid`s, each key pinned to one algorithm and its
/// source of key material.
fn jwt_settings(c: &mut Check, j: &RawJwt) -> JwtSettings {
    use jsonwebtoken::Algorithm as A;
    let mut keys = Vec::new();
    let mut kids = BTreeSet::new();
    if j.keys.is_empty() && j.issuers.is_empty() {
        c.err("identity.jwt.keys", "needs at least one key (or `issuers`)");
    }
    for (i, k) in j.keys.iter().enumerate() {
        let path = format!("identity.jwt.keys[{i}]");
        if let Some(kid) = &k.kid {
            if !kids.insert(kid.clone()) {
                c.err(format!("{path}.kid"), format!("duplicate kid \"{kid}\""));
            }
        }
        let alg = match k.algorithm.as_str() {
            "HS256" => A::HS256,
            "HS384" => A::HS384,
            "HS512" => A::HS512,
            "RS256" => A::RS256,
            "RS384" => A::RS384,
            "RS512" => A::RS512,
            "PS256" => A::PS256,
            "PS384" => A::PS384,
            "PS512" => A::PS512,
            "ES256" => A::ES256,
            "ES384" => A::ES384,
            "EdDSA" => A::EdDSA,
            other => {
                c.err(
                    format!("{path}.algorithm"),
                    format!("\"{other}\" is not supported (HS256/384/512, RS256/384/512, PS256/384/512, ES256/384, EdDSA)"),
                );
                continue;
            }
        };
        let hmac = matches!(alg, A::HS256 | A::HS384 | A::HS512);
        let source = match (&k.secret_env, &k.secret_file, &k.public_key_file) {
            (Some(env), None, None) if hmac => KeySource::SecretEnv(env.clone()),
            (None, Some(file), None) if hmac => KeySource::SecretFile(file.clone()),
            (None, None, Some(file)) if !hmac => KeySource::PublicKeyFile(file.clone()),
            _ if hmac => {
                c.err(
                    &path,
                    "an HS* key needs exactly one of secret_env or secret_file",
                );
                continue;
            }
            _ => {
                c.err(
                    &path,
                    "an RS/PS/ES/EdDSA key needs public_key_file (and nothing else)",
                );
                continue;
            }
        };
        keys.push(JwtKeySettings {
            kid: k.kid.clone(),
            algorithm: alg,
            source,
        });
    }
    let (leeway, leeway_path) = c.duration_in(
        "identity.jwt",
        ("leeway", j.leeway.as_deref()),
        ("leeway_s", j.leeway_s),
        1000,
    );
    let leeway_s = match leeway {
        Some(v) if v < 0 => {
            c.err(leeway_path, format!("must not be negative (got {v})"));
            0
        }
        Some(v) => v as u64,
        None => 30,
    };
    let tenant_claim = j.tenant_claim.clone().unwrap_or_else(|| "sub".into());
    let mut seen = BTreeSet::new();
    let mut issuers = Vec::new();
    for (i, raw) in j.issuers.iter().enumerate() {
        let path = format!("identity.jwt.issuers[{i}]");
        if !seen.insert(raw.issuer.clone()) {
            c.err(
                format!("{path}.issuer"),
                format!("duplicate issuer \"{}\"", raw.issuer),
            );
        }
        if j.issuer.as_deref() == Some(raw.issuer.as_str()) {
            c.err(
                format!("{path}.issuer"),
                "is also identity.jwt.issuer (the static keys' issuer): tokens of one issuer are verified either by its JWKS or by the static keys",
            );
        }
        if let Some(s) = issuer_settings(c, &path, raw, &tenant_claim, j.tier_claim.as_ref()) {
            issuers.push(s);
        }
    }
    JwtSettings {
        issuer: j.issuer.clone(),
        audience: j.audience.clone(),
        leeway_s,
        tenant_claim,
        tier_claim: j.tier_claim.clone(),
        keys,
        issuers,
    }
}

/// Default bounds of one issuer (docs/configuration.md#jwks-issuers).
const REFRESH_MIN: Duration = Duration::from_secs(5 * 60);
const REFRESH_MAX: Duration = Duration::from_secs(60 * 60);
const UNKNOWN_KID_REFETCH: Duration = Duration::from_secs(10);
const STALE_FOR: Duration = Duration::from_secs(24 * 60 * 60);
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest accepted fetch timeout: a stuck IdP must not hold waiting requests longer.
const MAX_FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// One `identity.jwt.issuers[]` entry: an https issuer (http on loopback only), exactly one of
/// `discovery: true` / `jwks_url`, durations with `refresh.min <= refresh.max <= stale_for`.
fn issuer_settings(
    c: &mut Check,
    path: &str,
    raw: &RawJwtIssuer,
    tenant_claim: &str,
    tier_claim: Option<&String>,
) -> Option<JwtIssuerSettings> {
    let mut ok = true;
    if let Err(e) = crate::config::idp_url(&raw.issuer) {
        c.err(format!("{path}.issuer"), e);
        ok = false;
    }
    let source = match (raw.discovery.unwrap_or(false), &raw.jwks_url) {
        (true, None) => JwksSource::Discovery,
        (false, Some(url)) => {
            if let Err(e) = crate::config::idp_url(url) {
                c.err(format!("{path}.jwks_url"), e);
                ok = false;
            }
            JwksSource::Url(url.clone())
        }
        (true, Some(_)) => {
            c.err(path, "set either `discovery: true` or `jwks_url`, not both");
            return None;
        }
        (false, None) => {
            c.err(path, "needs `discovery: true` or a `jwks_url`");
            return None;
        }
    };
    let mut dur = |c: &mut Check, field: &str, text: Option<&String>, default: Duration| match text
    {
        None => default,
        Some(t) => match c.duration(&format!("{path}.{field}"), t) {
            Some(d) => d,
            None => {
                ok = false;
                default
            }
        },
    };
    let refresh = raw.refresh.as_ref();
    let refresh_min = dur(
        c,
        "refresh.min",
        refresh.and_then(|r| r.min.as_ref()),
        REFRESH_MIN,
    );
    let refresh_max = dur(
        c,
        "refresh.max",
        refresh.and_then(|r| r.max.as_ref()),
        REFRESH_MAX,
    );
    let unknown_kid_refetch = dur(
        c,
        "unknown_kid_refetch",
        raw.unknown_kid_refetch.as_ref(),
        UNKNOWN_KID_REFETCH,
    );
    let stale_for = dur(c, "stale_for", raw.stale_for.as_ref(), STALE_FOR);
    let fetch_timeout = dur(
        c,
        "fetch_timeout",
        raw.fetch_timeout.as_ref(),
        FETCH_TIMEOUT,
    );
    if refresh_min > refresh_max {
        c.err(
            format!("{path}.refresh"),
            "min must not be greater than max",
        );
        ok = false;
    }
    if stale_for < refresh_max {
        c.err(
            format!("{path}.stale_for"),
            "must be at least refresh.max (a key set must outlive one refresh)",
        );
        ok = false;
    }
    if fetch_timeout > MAX_FETCH_TIMEOUT {
        c.err(format!("{path}.fetch_timeout"), "must be at most 30s");
        ok = false;
    }
    ok.then(|| JwtIssuerSettings {
        issuer: raw.issuer.clone(),
        source,
        audience: raw.audience.clone(),
        tenant_claim: raw
            .tenant_claim
            .clone()
            .unwrap_or_else(|| tenant_claim.to_string()),
        tier_claim: raw.tier_claim.clone().or_else(|| tier_claim.cloned()),
        refresh_min,
        refresh_max,
        unknown_kid_refetch,
        stale_for,
        fetch_timeout,
        ca_file: raw.ca_file.clone(),
    })
}
