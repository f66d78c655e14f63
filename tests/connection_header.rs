//! The `Connection` request header cannot take away what tollgate sets for the backend: tokens
//! naming the identity headers, `X-Request-Id` (or the other fields tollgate sets) are dropped
//! before forwarding, and nominations Pingora refuses (`Host`, `X-Forwarded-*`, malformed ones)
//! are a 400 before any stage, so they spend no token. Raw requests, so nothing on the client side
//! rewrites `Connection`.

mod common;

use common::*;
use std::time::Duration;

const KEY: &str = "connection-test-key";

/// One echo backend behind an `auth: required` route; tenant `acme` in tier `T` (burst 5 a day).
fn rig() -> (RedisServer, Backend, Gateway) {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), STRICT_REDIS)
        .tier("T", "{ limit: 1, per: 1d, burst: 5 }")
        .api_key(KEY, "acme", "T")
        .yaml();
    let gw = Gateway::start(&yaml);
    (redis, backend, gw)
}

fn send(gw: &Gateway, headers: &[(&str, &str)]) -> HttpReply {
    let mut all = vec![("X-API-Key", KEY)];
    all.extend_from_slice(headers);
    http_request_with_headers(
        gw.listen_addr(),
        "GET",
        "/api/x",
        &all,
        Duration::from_secs(10),
    )
    .expect("request")
}

fn echoed(reply: &HttpReply) -> serde_json::Value {
    assert_eq!(reply.status, 200, "{reply:?}");
    serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("not JSON ({e}): {reply:?}"))
}

/// `r=` of the `RateLimit` field.
fn remaining(reply: &HttpReply) -> u64 {
    let field = reply.header("ratelimit").expect("RateLimit header");
    field
        .split(';')
        .find_map(|p| p.strip_prefix("r="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("RateLimit without r=: {field}"))
}

#[test]
fn identity_headers_and_request_id_survive_connection_nominations() {
    let (_redis, backend, gw) = rig();
    let reply = send(
        &gw,
        &[
            ("X-Request-Id", "conn-test-1"),
            (
                "Connection",
                "X-Tollgate-Tenant, X-Tollgate-Tier, X-Request-Id",
            ),
        ],
    );
    let v = echoed(&reply);
    let headers = &v["headers"];
    assert_eq!(headers["x-tollgate-tenant"], "acme", "{v}");
    assert_eq!(headers["x-tollgate-tier"], "T", "{v}");
    assert_eq!(headers["x-request-id"], "conn-test-1", "{v}");
    assert_eq!(headers["x-forwarded-proto"], "http", "{v}");
    assert!(headers["x-forwarded-for"].is_string(), "{v}");
    assert_eq!(reply.header("x-request-id"), Some("conn-test-1"));

    // Other nominations still work: a client's own hop-by-hop field is removed as asked.
    let v = echoed(&send(
        &gw,
        &[
            ("X-Private-Hop", "secret"),
            ("Connection", "x-tollgate-tier, X-Private-Hop"),
        ],
    ));
    assert!(v["headers"].get("x-private-hop").is_none(), "{v}");
    assert_eq!(v["headers"]["x-tollgate-tier"], "T", "{v}");
    assert_eq!(backend.stats().requests, 2);
}

#[test]
fn protected_nominations_are_refused_before_any_token_is_spent() {
    let (_redis, backend, gw) = rig();
    assert_eq!(remaining(&send(&gw, &[])), 4);
    for nominated in [
        "Host",
        "X-Forwarded-For",
        "x-forwarded-proto",
        ":authority",
        // Ten tokens with the helper's own `Connection: close`.
        "a, b, c, d, e, f, g, h, i",
    ] {
        let reply = send(&gw, &[("Connection", nominated)]);
        assert_eq!(reply.status, 400, "{nominated}: {reply:?}");
        assert_eq!(
            reply.header("content-type"),
            Some("application/problem+json"),
            "{nominated}"
        );
        assert!(
            reply.header("ratelimit").is_none(),
            "{nominated}: {reply:?}"
        );
    }
    // Nothing was charged by the refused requests, nothing reached the backend.
    assert_eq!(remaining(&send(&gw, &[])), 3);
    assert_eq!(backend.stats().requests, 2);
}
