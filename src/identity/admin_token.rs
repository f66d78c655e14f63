//! The admin API's Bearer token (`admin.token_env`, RFC 6750) and its constant-time check.
//!
//! The token is read from the environment variable `admin.token_env` names at every load and
//! reload of the config. The API is enabled only when that variable is set and not empty;
//! otherwise every `/v1/*` path answers 404 (a warning is logged when `token_env` is configured
//! but the variable is unset or empty).

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A non-empty admin token, kept as its SHA-256 digest. Its `Debug` never shows it.
#[derive(Clone)]
pub struct AdminToken([u8; 32]);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(***)")
    }
}

/// Why a request is not authorised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// No `Authorization: Bearer` credentials.
    Missing,
    /// Credentials that are not the token.
    Wrong,
}

impl Denied {
    /// The `WWW-Authenticate` value (RFC 6750 §3): no error code without credentials,
    /// `invalid_token` with wrong ones.
    pub fn www_authenticate(self) -> &'static str {
        match self {
            Denied::Missing => "Bearer realm=\"tollgate-admin\"",
            Denied::Wrong => "Bearer realm=\"tollgate-admin\", error=\"invalid_token\"",
        }
    }
}

impl AdminToken {
    /// The token in the variable `env_name`; `None` (API off) without a name, or when the
    /// variable is unset or empty (logged as a warning).
    pub fn load(env_name: Option<&str>) -> Option<AdminToken> {
        let name = env_name?;
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => Some(AdminToken::new(v.as_bytes())),
            _ => {
                tracing::warn!(
                    field = "admin.token_env",
                    variable = name,
                    "the admin token variable is unset or empty: the admin API (/v1) stays off"
                );
                None
            }
        }
    }

    /// A token of these bytes (tests).
    pub fn new(token: &[u8]) -> Self {
        AdminToken(Sha256::digest(token).into())
    }

    /// Checks an `Authorization` header value: scheme `Bearer` (case-insensitive), then the
    /// token compared in constant time: the SHA-256 digests of both are compared with
    /// `subtle`, so the time depends neither on where the bytes differ nor on the token's length.
    pub fn check(&self, authorization: Option<&[u8]>) -> Result<(), Denied> {
        let Some(value) = authorization else {
            return Err(Denied::Missing);
        };
        let Some(scheme) = value.get(..7) else {
            return Err(Denied::Missing);
        };
        if !scheme.eq_ignore_ascii_case(b"bearer ") {
            return Err(Denied::Missing);
        }
        let presented: [u8; 32] = Sha256::digest(value[7..].trim_ascii()).into();
        if bool::from(presented.ct_eq(&self.0)) {
            Ok(())
        } else {
            Err(Denied::Wrong)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_token_checked() {
        let t = AdminToken::new(b"s3cret");
        assert_eq!(t.check(Some(b"Bearer s3cret")), Ok(()));
        assert_eq!(t.check(Some(b"bearer  s3cret ")), Ok(()));
        assert_eq!(t.check(Some(b"Bearer s3cres")), Err(Denied::Wrong));
        assert_eq!(t.check(Some(b"Bearer s3cret2")), Err(Denied::Wrong));
        assert_eq!(t.check(Some(b"Bearer ")), Err(Denied::Wrong));
        assert_eq!(t.check(Some(b"Basic czNjcmV0")), Err(Denied::Missing));
        assert_eq!(t.check(None), Err(Denied::Missing));
        assert!(!format!("{t:?}").contains("s3cret"));
    }

    #[test]
    fn token_env_must_name_a_variable() {
        let yaml = |name: &str| {
            format!(
                "listen: [\"127.0.0.1:8080\"]\nadmin: {{ listen: \"127.0.0.1:9090\", token_env: \"{name}\" }}\n\
                 upstreams: {{ a: {{ backends: [\"127.0.0.1:9001\"] }} }}\nroutes: [{{ path_prefix: \"/\", upstream: a }}]\n"
            )
        };
        assert!(crate::config::parse_errors(&yaml("TOLLGATE_ADMIN_TOKEN")).is_empty());
        for bad in ["", "1ABC", "A-B", "A B"] {
            let errors = crate::config::parse_errors(&yaml(bad));
            assert!(
                errors.len() == 1 && errors[0].starts_with("admin.token_env: "),
                "{bad:?}: {errors:?}"
            );
        }
    }

    #[test]
    fn unset_or_empty_variable_disables() {
        assert!(AdminToken::load(None).is_none());
        assert!(AdminToken::load(Some("TOLLGATE_TEST_SURELY_UNSET_VARIABLE")).is_none());
    }
}
