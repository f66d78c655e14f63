//! `identity:`: how a request's credentials map to a tenant and a tier (JWT, API keys, mTLS),
//! and the headers that carry them.

use super::common::Check;
use super::tls;
use crate::config::model::{
    ApiKeyEntry, ApiKeySettings, IdentitySettings, JwtKeySettings, JwtSettings, KeySource,
};
use crate::config::raw::{RawIdentity, RawJwt};
use std::collections::BTreeSet;

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
    if j.keys.is_empty() {
        c.err("identity.jwt.keys", "needs at least one key");
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
    JwtSettings {
        issuer: j.issuer.clone(),
        audience: j.audience.clone(),
        leeway_s,
        tenant_claim: j.tenant_claim.clone().unwrap_or_else(|| "sub".into()),
        tier_claim: j.tier_claim.clone(),
        keys,
    }
}
