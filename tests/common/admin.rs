//! Admin API (`/v1`) helpers: a client that sends the Bearer token, and a gateway config with
//! API-key tenants, tiers and `admin.token_env`.

use super::{client, Gateway, GatewayConfig, Reply, STRICT_REDIS};
use serde_json::Value;

/// The admin token the test gateways are started with.
pub const ADMIN_TOKEN: &str = "test-admin-token-7f3a9c";
/// The variable `admin.token_env` names.
pub const ADMIN_TOKEN_ENV: &str = "TOLLGATE_TEST_ADMIN_TOKEN";

/// A JSON answer of the admin API.
#[derive(Debug)]
pub struct AdminReply {
    pub reply: Reply,
    /// The body parsed as JSON (`Null` when it is not JSON).
    pub json: Value,
}

impl AdminReply {
    pub fn status(&self) -> u16 {
        self.reply.status
    }

    pub fn content_type(&self) -> &str {
        self.reply.header("content-type").unwrap_or_default()
    }

    /// Asserts a problem+json answer with `status` and returns its body.
    pub fn expect_problem(&self, status: u16) -> &Value {
        assert_eq!(self.status(), status, "{:?}", self.reply);
        assert_eq!(
            self.content_type(),
            "application/problem+json",
            "{:?}",
            self.reply
        );
        assert_eq!(self.json["status"], status, "{:?}", self.reply);
        assert!(self.json["title"].is_string() && self.json["type"].is_string());
        &self.json
    }

    /// Asserts a 200 JSON answer and returns its body.
    pub fn expect_ok(&self) -> &Value {
        assert_eq!(self.status(), 200, "{:?}", self.reply);
        assert_eq!(self.content_type(), "application/json", "{:?}", self.reply);
        &self.json
    }
}

/// Sends `method path` to the admin listener `admin` (`127.0.0.1:P`) with `Authorization:
/// <authorization>` when given, and a JSON `body` when given.
pub async fn admin_call(
    admin: &str,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    body: Option<&Value>,
) -> AdminReply {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut req = client().request(method, format!("http://{admin}{path}"));
    if let Some(a) = authorization {
        req = req.header("authorization", a);
    }
    if let Some(b) = body {
        req = req.json(b);
    }
    let reply = Reply::read(req.send().await.expect("admin request"))
        .await
        .expect("admin reply");
    let json = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
    AdminReply { reply, json }
}

/// [`admin_call`] with the right token.
pub async fn admin(admin: &str, method: &str, path: &str, body: Option<&Value>) -> AdminReply {
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    admin_call(admin, method, path, Some(&bearer), body).await
}

/// [`admin`] that must answer 200 JSON ([`AdminReply::expect_ok`]): its body.
pub async fn admin_ok(admin_addr: &str, method: &str, path: &str, body: Option<&Value>) -> Value {
    admin(admin_addr, method, path, body)
        .await
        .expect_ok()
        .clone()
}

/// The API key of `tenant` in [`admin_yaml`] configs.
pub fn api_key_of(tenant: &str) -> String {
    format!("key-{tenant}-0123456789")
}

/// A gateway config: `tiers` (lines under `tiers:`, indented two spaces), one API key per
/// `(tenant, tier)`, a catch-all route with required identity, admin API on through
/// [`ADMIN_TOKEN_ENV`] when `token_env`, and `extra` top-level sections verbatim (an `extra`
/// with `upstreams:` or `routes:` replaces the default one-upstream, one-route layout).
pub fn admin_yaml(
    redis_url: &str,
    backend: &str,
    tiers: &str,
    tenants: &[(&str, &str)],
    token_env: bool,
    extra: &str,
) -> String {
    let mut config = GatewayConfig::new()
        .redis(redis_url, STRICT_REDIS)
        .tier_lines(tiers);
    if token_env {
        config = config.admin(&format!(
            "{{ listen: \"{{admin}}\", token_env: \"{ADMIN_TOKEN_ENV}\" }}"
        ));
    }
    for (tenant, tier) in tenants {
        config = config.api_key(&api_key_of(tenant), tenant, tier);
    }
    if !extra.contains("upstreams:") {
        config = config.upstream("echo", backend);
    }
    if !extra.contains("routes:") {
        config = config.route("{ path_prefix: \"/\", upstream: echo, auth: required }");
    }
    config.raw(extra).yaml()
}

/// A gateway started on [`admin_yaml`]`(redis_url, backend, tiers, tenants, true, extra)` with
/// [`ADMIN_TOKEN`] in [`ADMIN_TOKEN_ENV`]: the admin API on, e.g. the instance that writes live
/// state for another gateway on the same Redis.
pub fn admin_gateway(
    redis_url: &str,
    backend: &str,
    tiers: &str,
    tenants: &[(&str, &str)],
    extra: &str,
) -> Gateway {
    let yaml = admin_yaml(redis_url, backend, tiers, tenants, true, extra);
    Gateway::start_with_env(&yaml, &[(ADMIN_TOKEN_ENV, ADMIN_TOKEN)])
}
