//! Stage 3, identity: credentials → [`Identity`] (tenant, tier), or a 400/401/403 rejection.
//! Anonymous requests (no credentials on an `auth: optional` route, every request on an
//! `auth: none` route) get the anonymous identity of their client.

use super::{Layer, Outcome, Rejection};
use crate::config::AuthMode;
use crate::identity::{Authenticator, Identity, IdentityError};
use crate::response::Problem;
use http::HeaderMap;
use std::net::IpAddr;

/// What the identity stage sees of a request.
#[derive(Debug, Clone, Copy)]
pub struct Credentials<'a> {
    pub headers: &'a HeaderMap,
    /// Subject CN of the verified client certificate (TLS listeners with a client CA).
    pub cert_cn: Option<&'a str>,
    /// The client IP (normalised) and the IPv6 prefix its anonymous tenant is keyed by.
    pub client: IpAddr,
    pub ipv6_prefix: u8,
    /// Unix time, seconds (JWT `exp`/`nbf`).
    pub now_s: u64,
}

/// The identity of a request on a route with `mode`: credentials are ignored on `auth: none`;
/// missing credentials are a 401 on `auth: required`, anonymous on `auth: optional`.
pub fn decide(
    auth: &Authenticator,
    mode: AuthMode,
    c: &Credentials<'_>,
) -> Result<Identity, Rejection> {
    let anonymous = || auth.anonymous(c.client, c.ipv6_prefix);
    if mode == AuthMode::None {
        return Ok(anonymous());
    }
    match auth.identify(c.headers, c.cert_cn, c.now_s) {
        Ok(Some(id)) => Ok(id),
        Ok(None) if mode == AuthMode::Required => Err(rejection(&IdentityError::Missing)),
        Ok(None) => Ok(anonymous()),
        Err(e) => Err(rejection(&e)),
    }
}

/// The response of an identity failure: its status (401 `unauthenticated` with
/// `WWW-Authenticate`, else 400/403/503 `rejected`; the 503 of an issuer without keys carries
/// `Retry-After`) and detail.
pub fn rejection(e: &IdentityError) -> Rejection {
    let problem = Problem::status(e.status(), e.detail());
    let reason = if e.status() == 401 {
        Outcome::Unauthenticated
    } else {
        Outcome::Rejected
    };
    let mut headers: Vec<(&'static str, String)> = e
        .www_authenticate()
        .map(|v| vec![("WWW-Authenticate", v.to_string())])
        .unwrap_or_default();
    if matches!(e, IdentityError::IssuerUnavailable(_)) {
        headers.push((
            "Retry-After",
            crate::identity::ISSUER_RETRY_AFTER_S.to_string(),
        ));
    }
    Rejection::new(Layer::Identity, reason, problem).with_headers(headers)
}

#[cfg(test)]
mod tests;
