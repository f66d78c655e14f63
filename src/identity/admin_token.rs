//! The admin API's Bearer tokens (`admin.token_env`, `admin.tokens`, RFC 6750) and their
//! constant-time check.
//!
//! Each token is read from the environment variable its entry names at every load and reload
//! of the config. The API is enabled when at least one of those variables is set and not empty;
//! otherwise every `/v1/*` path answers 404 (a warning is logged for each configured variable
//! that is unset or empty).

use crate::config::{AdminScope, AdminTokenSettings};
use sha2::{Digest, Sha256};
use std::sync::Arc;
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

    /// [`www_authenticate`](Self::www_authenticate) for the decision API (realm
    /// `tollgate-decision`).
    pub fn www_authenticate_decision(self) -> &'static str {
        match self {
            Denied::Missing => "Bearer realm=\"tollgate-decision\"",
            Denied::Wrong => "Bearer realm=\"tollgate-decision\", error=\"invalid_token\"",
        }
    }
}

impl AdminToken {
    /// The token in the variable `env_name`; `None` (API off) without a name, or when the
    /// variable is unset or empty (logged as a warning).
    pub fn load(env_name: Option<&str>) -> Option<AdminToken> {
        Self::load_for("admin.token_env", env_name)
    }

    /// The token in the variable `env_name`, configured as `field` (named in the warning when
    /// the variable is unset or empty; then `None`).
    pub fn load_for(field: &str, env_name: Option<&str>) -> Option<AdminToken> {
        let name = env_name?;
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => Some(AdminToken::new(v.as_bytes())),
            _ => {
                tracing::warn!(
                    field,
                    variable = name,
                    "the token variable is unset or empty: its API stays off"
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

/// Who called the admin API: the token's audit name and its scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: Arc<str>,
    pub scope: AdminScope,
}

/// Every loaded admin token with its name and scope.
#[derive(Debug, Clone)]
pub struct AdminTokens(Vec<(AdminToken, Caller)>);

impl AdminTokens {
    /// The tokens of `settings` whose variables are set and not empty; `None` (API off) when
    /// none is.
    pub fn load(settings: &[AdminTokenSettings]) -> Option<AdminTokens> {
        let tokens: Vec<_> = settings
            .iter()
            .filter_map(|s| {
                let token = AdminToken::load(Some(&s.token_env))?;
                let caller = Caller {
                    name: s.name.as_str().into(),
                    scope: s.scope,
                };
                Some((token, caller))
            })
            .collect();
        (!tokens.is_empty()).then_some(AdminTokens(tokens))
    }

    /// Tokens from `(token, name, scope)` (tests).
    pub fn of(tokens: &[(&[u8], &str, AdminScope)]) -> AdminTokens {
        AdminTokens(
            tokens
                .iter()
                .map(|(t, name, scope)| {
                    let caller = Caller {
                        name: (*name).into(),
                        scope: *scope,
                    };
                    (AdminToken::new(t), caller)
                })
                .collect(),
        )
    }

    /// The caller an `Authorization` value authenticates. Every token is compared (in constant
    /// time, see [`AdminToken::check`]), so the time does not say which one matched. Errors:
    /// [`Denied::Missing`] without Bearer credentials, [`Denied::Wrong`] when no token matches.
    pub fn check(&self, authorization: Option<&[u8]>) -> Result<Caller, Denied> {
        let mut found: Option<&Caller> = None;
        let mut denied = Denied::Wrong;
        for (token, caller) in &self.0 {
            match token.check(authorization) {
                Ok(()) => found = found.or(Some(caller)),
                Err(d) => denied = d,
            }
        }
        found.cloned().ok_or(denied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_tokens_name_their_caller() {
        let t = AdminTokens::of(&[
            (b"w-token", "ops", AdminScope::Write),
            (b"r-token", "dashboard", AdminScope::Read),
        ]);
        let caller = t.check(Some(b"Bearer r-token")).unwrap();
        assert_eq!(
            (&*caller.name, caller.scope),
            ("dashboard", AdminScope::Read)
        );
        let caller = t.check(Some(b"Bearer w-token")).unwrap();
        assert_eq!((&*caller.name, caller.scope), ("ops", AdminScope::Write));
        assert_eq!(t.check(Some(b"Bearer x-token")), Err(Denied::Wrong));
        assert_eq!(t.check(None), Err(Denied::Missing));
    }

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
    fn decision_token_env_must_name_a_variable() {
        let yaml = |name: &str| {
            format!(
                "listen: [\"127.0.0.1:8080\"]\nredis: {{ url: \"redis://127.0.0.1:6379\" }}\n\
                 decision: {{ http: {{ listen: \"127.0.0.1:8082\", token_env: \"{name}\" }} }}\n\
                 upstreams: {{ a: {{ backends: [\"127.0.0.1:9001\"] }} }}\nroutes: [{{ path_prefix: \"/\", upstream: a }}]\n"
            )
        };
        assert!(crate::config::parse_errors(&yaml("TOLLGATE_DECISION_TOKEN")).is_empty());
        let errors = crate::config::parse_errors(&yaml("A-B"));
        assert!(
            errors.len() == 1 && errors[0].starts_with("decision.http.token_env: "),
            "{errors:?}"
        );
        let d = Denied::Wrong.www_authenticate_decision();
        assert_eq!(
            d,
            "Bearer realm=\"tollgate-decision\", error=\"invalid_token\""
        );
    }

    #[test]
    fn unset_or_empty_variable_disables() {
        assert!(AdminToken::load(None).is_none());
        assert!(AdminToken::load(Some("TOLLGATE_TEST_SURELY_UNSET_VARIABLE")).is_none());
    }
}
