//! `POST /v1/explain`: what the gateway would do with a request now, layer by layer, without
//! debiting anything.
//!
//! Body: `{"method": "GET", "host": "api.example.com", "path": "/orders/1?x=1",
//! "headers": {"authorization": "Bearer ..."}, "client_ip": "203.0.113.7"}` (`headers` values
//! are strings or lists of strings; `client_ip` is optional: the client address after
//! `X-Forwarded-For` resolution, needed for the edge layer and anonymous tenants; `body` is
//! optional: the request body, for a cost read from it).
//!
//! The path is normalised exactly as the proxy does ([`crate::http::target`]), the route found
//! by the snapshot's router, the identity resolved by the snapshot's authenticator (JWT or API
//! key; a client certificate cannot be explained), then each layer's decision is read without
//! debiting: the edge bucket of `client_ip` (memory), the tenant's policies (Redis, read-only
//! script, see [`crate::quota::peek`]), the upstream's concurrency slots. Costs read from the
//! request are charged by the proxy's own code ([`pipeline::cost::apply`]), refusals included. The tier's burst pool,
//! asked only when the tenant's bucket refuses, is not consulted.

use super::limit_source::mark_source;
use super::{rules_view, tenants};
use crate::concurrency::claimant::claimant_of;
use crate::config::{AuthMode, Config};
use crate::edge::EdgeOutcome;
use crate::http::client_ip;
use crate::http::request_json::REPLAY_LIMIT;
use crate::identity::{Identity, Method};
use crate::limit::Decision;
use crate::pipeline;
use crate::policy::rules::RequestView;
use crate::response::Problem;
use crate::snapshot::{App, Snapshot};
use pingora::http::RequestHeader;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// The request to explain.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExplainRequest {
    #[serde(default = "get")]
    pub method: String,
    #[serde(default)]
    pub host: String,
    pub path: String,
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderValues>,
    pub client_ip: Option<String>,
    /// The request body (UTF-8 text), for a cost read from it; none when absent.
    pub body: Option<String>,
}

fn get() -> String {
    "GET".to_string()
}

/// One header's value or values.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum HeaderValues {
    One(String),
    Many(Vec<String>),
}

fn bad_request(detail: impl Into<String>) -> Problem {
    Problem::status(400, detail)
}

/// The header map of `req`. Errors: an invalid header name or value (400).
fn header_map(req: &ExplainRequest) -> Result<http::HeaderMap, Problem> {
    let mut map = http::HeaderMap::new();
    for (name, values) in &req.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| bad_request(format!("headers: {name:?} is not a header name")))?;
        let values = match values {
            HeaderValues::One(v) => vec![v.as_str()],
            HeaderValues::Many(v) => v.iter().map(String::as_str).collect(),
        };
        for v in values {
            let value = http::HeaderValue::from_str(v)
                .map_err(|_| bad_request(format!("headers.{name}: not a valid header value")))?;
            map.append(name.clone(), value);
        }
    }
    Ok(map)
}

fn decision_json(d: &Decision) -> Value {
    json!({
        "admitted": d.admitted,
        "remaining": d.remaining,
        "retry_after_s": if d.admitted { Some(0) } else { d.retry_after_s() },
        "seconds_until_full": d.full_ms.div_ceil(1000),
    })
}

/// The edge layer for `client`, read without debiting.
fn edge_layer(app: &App, config: &Config, client: Option<IpAddr>) -> (Value, bool) {
    let Some(settings) = &config.edge else {
        return (
            json!({"layer": "edge", "decision": "skipped", "why": "no edge: section"}),
            true,
        );
    };
    let Some(client) = client else {
        let why = "no client_ip given";
        return (
            json!({"layer": "edge", "decision": "unknown", "why": why}),
            true,
        );
    };
    if settings.exempt.iter().any(|n| n.contains(&client)) {
        let why = "client is in edge.exempt";
        return (
            json!({"layer": "edge", "decision": "skipped", "why": why}),
            true,
        );
    }
    let key = client_ip::key_of(client, settings.ipv6_prefix);
    let now = app.now_ms();
    let outcome = if settings.algorithm == crate::limit::algorithm::Algorithm::TokenBucket {
        let d = app.edge_buckets.peek(&key.into(), now, &settings.rate, 1);
        if d.admitted {
            EdgeOutcome::Admitted(d)
        } else {
            EdgeOutcome::Limited(d)
        }
    } else {
        let cells = app.edge_cells(settings.max_clients);
        let o = cells.peek(&key, settings.algorithm, now, &settings.rate, 1, 0);
        if o.decision.admitted {
            EdgeOutcome::Admitted(o.decision)
        } else {
            EdgeOutcome::Limited(o.decision)
        }
    };
    let (decision, d) = match outcome {
        EdgeOutcome::Admitted(d) => ("admitted", d),
        EdgeOutcome::Limited(d) => ("limited", d),
        EdgeOutcome::Skipped => return (json!({"layer": "edge", "decision": "skipped"}), true),
    };
    let v = json!({
        "layer": "edge",
        "decision": decision,
        "client_key": key.to_string(),
        "algorithm": settings.algorithm.as_str(),
        "limit": settings.rate.limit,
        "per_ms": settings.rate.per_ms,
        "burst": settings.rate.burst,
        "numbers": decision_json(&d),
    });
    (v, d.admitted)
}

fn identity_json(id: &Identity) -> Value {
    json!({"tenant": id.tenant, "tier": id.tier, "method": id.method.as_str()})
}

/// The request head the proxy would see: method, target, `Host` and the given headers.
/// Errors: a method or target that is not a valid request line (the detail).
fn request_head(req: &ExplainRequest, headers: &http::HeaderMap) -> Result<RequestHeader, String> {
    let mut head = RequestHeader::build(req.method.as_str(), req.path.as_bytes(), None)
        .map_err(|e| format!("method or path is not a valid request line: {e}"))?;
    for (name, value) in headers {
        head.append_header(name.clone(), value.clone())
            .map_err(|e| format!("header {name}: {e}"))?;
    }
    if !req.host.is_empty() {
        head.insert_header(http::header::HOST, req.host.as_str())
            .map_err(|e| format!("host: {e}"))?;
    }
    Ok(head)
}

fn stop(layers: &mut Vec<Value>, layer: Value, outcome: Value) -> Value {
    layers.push(layer);
    outcome
}

fn unix_now_s() -> u64 {
    crate::observe::tier_fit::unix_ms() / 1000
}

/// `POST /v1/explain`. Errors: 400 for a malformed body; a Redis fault is reported inside the
/// tenant layer, not as an error.
pub async fn explain(app: &App, snap: &Snapshot, body: &[u8]) -> Result<Value, Problem> {
    let req: ExplainRequest = serde_json::from_slice(body).map_err(|e| {
        bad_request(format!(
            "body: {e} (expected {{method, host, path, headers}})"
        ))
    })?;
    let client = match &req.client_ip {
        Some(text) => Some(client_ip::normalize(
            text.parse::<IpAddr>()
                .map_err(|_| bad_request("client_ip: not an IP address"))?,
        )),
        None => None,
    };
    let headers = header_map(&req)?;
    let config = &snap.config;
    let mut layers = Vec::new();
    let outcome = run(app, snap, &req, &headers, client, &mut layers).await;
    Ok(json!({
        "request": {"method": req.method, "host": req.host, "path": req.path, "client_ip": client.map(|c| c.to_string())},
        "layers": layers,
        "outcome": outcome,
        "config_sha256": config.source.sha256,
        "debited": false,
    }))
}

/// Runs the layers in the proxy's order, pushing each to `layers`; returns the outcome (the
/// first layer that would answer, or admission).
async fn run(
    app: &App,
    snap: &Snapshot,
    req: &ExplainRequest,
    headers: &http::HeaderMap,
    client: Option<IpAddr>,
    layers: &mut Vec<Value>,
) -> Value {
    let config = &snap.config;
    // 1. Edge.
    let (edge, passed) = edge_layer(app, config, client);
    if !passed {
        let status = config.response.status;
        let out = json!({"layer": "edge", "decision": "limited", "status": status});
        return stop(layers, edge, out);
    }
    layers.push(edge);

    // 2. Target and route: the proxy's own stage on a request head built from the body.
    let mut head = match request_head(req, headers) {
        Ok(h) => h,
        Err(detail) => {
            let l = json!({"layer": "http", "decision": "bad_target", "detail": detail});
            let out = json!({"layer": "http", "decision": "bad_target", "status": 400});
            return stop(layers, l, out);
        }
    };
    let routed = pipeline::route::check_method(&head)
        .and_then(|()| pipeline::route::resolve(snap, &mut head));
    let index = match routed {
        Ok(i) => i,
        Err(r) => {
            let mut l = json!({"layer": r.layer.as_str(), "decision": r.reason.as_str(), "status": r.problem.status});
            if let Some(reason) = r.problem.extensions.get("reason") {
                l["reason"] = reason.clone();
            }
            l["detail"] = json!(r.problem.detail);
            let out = json!({"layer": r.layer.as_str(), "decision": r.reason.as_str(), "status": r.problem.status});
            return stop(layers, l, out);
        }
    };
    let route = &config.routes[index];
    let auth = match route.auth {
        AuthMode::Required => "required",
        AuthMode::Optional => "optional",
        AuthMode::None => "none",
    };
    layers.push(json!({
        "layer": "route",
        "decision": "matched",
        "route": route.id,
        "host": head.headers.get("host").and_then(|h| h.to_str().ok()),
        "path": head.uri.path(),
        "path_prefix": route.path_prefix,
        "upstream": route.upstream,
        "auth": auth,
        "cost": route.cost,
    }));

    // 3. Identity: the proxy's own stage (anonymous identities included).
    let credentials = pipeline::identity::Credentials {
        headers,
        cert_cn: None,
        client: client.unwrap_or(IpAddr::from([0, 0, 0, 0])),
        ipv6_prefix: config.ipv6_prefix(),
        now_s: unix_now_s(),
    };
    let identity = match pipeline::identity::decide(&snap.auth, route.auth, &credentials) {
        Ok(id) => id,
        Err(r) => {
            let status = r.problem.status;
            let l = json!({"layer": "identity", "decision": r.reason.as_str(), "status": status, "detail": r.problem.detail});
            let out = json!({"layer": "identity", "decision": r.reason.as_str(), "status": status});
            return stop(layers, l, out);
        }
    };
    let anonymous_without_client = identity.method == Method::Anonymous && client.is_none();
    let decision = match (route.auth, identity.method) {
        (AuthMode::None, _) => "skipped",
        (_, Method::Anonymous) => "anonymous",
        _ => "admitted",
    };
    let mut identity_layer =
        json!({"layer": "identity", "decision": decision, "identity": identity_json(&identity)});
    if identity.method == Method::Jwt {
        // Which issuer's JWKS (null: a static key) and which key verified the token.
        if let Some((issuer, kid)) = snap.auth.jwt_verified_by(headers, credentials.now_s) {
            identity_layer["jwt"] = json!({"issuer": issuer, "kid": kid});
        }
    }
    layers.push(identity_layer);

    // 4. Tenant policies (an anonymous tenant only when `client_ip` says whose it is) and
    // the limit rules that apply, decided together.
    let client_key = client.map(|c| client_ip::key_of(c, config.ipv6_prefix()).to_string());
    let host = head
        .headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(crate::http::normalize_host)
        .unwrap_or_default();
    let route_key = route.key_value();
    let view = RequestView {
        method: head.method.as_str(),
        path: head.uri.path(),
        query: head.uri.query(),
        host: &host,
        headers,
        client_key: client_key.as_deref(),
        route: Some(&route_key),
        tenant: Some(identity.tenant.as_str()).filter(|_| !anonymous_without_client),
        tier: identity.tier.as_deref(),
        claims: identity.claims.as_deref(),
    };
    let mut rules = match pipeline::rules::plan(snap, &view, route.cost) {
        Ok(r) => r.rules,
        Err(r) => {
            let status = r.problem.status;
            let l = json!({"layer": "tenant", "decision": "rejected", "status": status, "detail": r.problem.detail});
            let out = json!({"layer": "tenant", "decision": "rejected", "status": status});
            return stop(layers, l, out);
        }
    };
    let tenant_tier = match &identity.tier {
        Some(tier) if !anonymous_without_client => Some((identity.tenant.clone(), tier.clone())),
        _ => None,
    };
    // Costs read from the request, as the proxy charges them (before anything is debited).
    let cost = match request_costs(req, headers, &head, route, &mut rules) {
        Ok(c) => c,
        Err(r) => {
            return stop(
                layers,
                refused(&r.problem, None),
                refused_outcome(&r.problem),
            )
        }
    };
    if cost.read && tenant_tier.is_some() {
        let plan = pipeline::tenant::plan(snap, &identity, cost.route)
            .ok()
            .flatten();
        let shadow = route.mode.is_shadow();
        if let Some(r) = pipeline::cost::above_any_burst(shadow, plan.as_ref(), &rules) {
            let l = refused(&r.problem, Some(cost.route));
            return stop(layers, l, refused_outcome(&r.problem));
        }
    }
    let mut tenant_admitted = true;
    let mut layer = match (&tenant_tier, &snap.quota) {
        (Some((tenant, tier)), Some(quota)) => {
            // Boxed, as the other deep Redis futures of the admin handlers.
            let body = req.body.as_deref().map(str::as_bytes);
            Box::pin(tenant_layer(
                app, snap, quota, tenant, tier, cost.route, body,
            ))
            .await
        }
        (None, _) => {
            json!({"layer": "tenant", "decision": "skipped", "why": "no tenant with a tier"})
        }
        (_, None) => {
            json!({"layer": "tenant", "decision": "skipped", "why": "no quota store configured"})
        }
    };
    if let (Some(quota), false) = (&snap.quota, rules.is_empty()) {
        let overrides = snap.rule_key_overrides();
        let explained = rules_view::explained(quota, &rules, overrides);
        let (json_rules, mut admitted) = Box::pin(explained).await;
        layer["rules"] = json!(json_rules);
        let body = req.body.as_deref().map(str::as_bytes);
        let tenant = Some(identity.tenant.as_str()).filter(|_| !anonymous_without_client);
        let usage = Box::pin(rule_usage(quota, &rules, tenant, body)).await;
        let fault = match usage {
            Ok((budgets, budgets_admit)) => {
                admitted &= budgets_admit;
                match layer["policies"].as_array_mut() {
                    Some(policies) => policies.extend(budgets),
                    None if !budgets.is_empty() => layer["policies"] = json!(budgets),
                    None => {}
                }
                None
            }
            Err(fault) => Some(fault),
        };
        if layer["decision"] == "skipped" {
            layer["decision"] = json!("admitted");
            layer.as_object_mut().map(|m| m.remove("why"));
        }
        if !admitted {
            layer["decision"] = json!("limited");
        }
        if let Some(fault) = fault {
            layer["decision"] = json!("unknown");
            layer["why"] = json!(format!("quota store fault: {}", fault.as_str()));
        }
    }
    tenant_admitted &= layer["decision"] != "limited";
    layers.push(layer);
    if !tenant_admitted {
        let status = config.response.status;
        return json!({"layer": "tenant", "decision": "limited", "status": status});
    }

    // 5. Upstream slots.
    let upstream = snap.upstreams.get(&route.upstream);
    let Some((upstream, slots)) = upstream.and_then(|u| u.slots.as_ref().map(|s| (u, s))) else {
        layers.push(
            json!({"layer": "upstream", "decision": "admitted", "why": "no max_concurrency"}),
        );
        return json!({"layer": "upstream", "decision": "admitted", "status": 200});
    };
    let (claimant, _) = claimant_of(config, &identity);
    let s = &upstream.settings;
    let in_flight = slots.in_flight();
    let held = slots.held_by(claimant);
    let max = s.max_concurrency.unwrap_or(u32::MAX);
    let tenant_full = s.max_concurrency_per_tenant.is_some_and(|m| held >= m);
    let decision = match (in_flight >= max || tenant_full, &s.queue) {
        (false, _) => "admitted",
        (true, Some(_)) => "queued",
        (true, None) => "limited",
    };
    layers.push(json!({
        "layer": "upstream",
        "decision": decision,
        "upstream": s.name,
        "in_flight": in_flight,
        "max_concurrency": s.max_concurrency,
        "held_by_tenant": held,
        "max_concurrency_per_tenant": s.max_concurrency_per_tenant,
        "waiting": slots.waiting(),
        "queue_max": s.queue.as_ref().map(|q| q.max),
    }));
    let status = if decision == "limited" { 503 } else { 200 };
    json!({"layer": "upstream", "decision": decision, "status": status})
}

/// The costs of the explained request ([`pipeline::cost::apply`]): its `body` is read as the
/// proxy reads one, when a cost needs it, up to the same limit.
fn request_costs(
    req: &ExplainRequest,
    headers: &http::HeaderMap,
    head: &RequestHeader,
    route: &crate::config::RouteSettings,
    rules: &mut [(
        crate::policy::rules::AppliedRule<'_>,
        crate::quota::rules::RuleCall,
    )],
) -> Result<pipeline::cost::Costs, pipeline::Rejection> {
    use pipeline::cost::{BodyState, CostInput};
    let declared_len = crate::http::body::declared_length(headers);
    let limit = route
        .max_body_bytes
        .map_or(REPLAY_LIMIT, |m| REPLAY_LIMIT.min(m as usize));
    let body = req.body.as_deref().map(str::as_bytes);
    let body = match pipeline::cost::body_wanted(Some(route), rules, declared_len) {
        false => BodyState::NotRead,
        true => {
            let len = body.map_or(0, |b| b.len() as u64);
            match declared_len.unwrap_or(len).max(len) > limit as u64 {
                true => BodyState::TooLarge { limit },
                false => BodyState::Whole(body.filter(|b| !b.is_empty())),
            }
        }
    };
    let input = CostInput {
        headers,
        query: head.uri.query(),
        declared_len,
        body,
    };
    pipeline::cost::apply(Some(route), rules, &input)
}

/// The usage budgets of the applied `rules` (`limits[].usage`), as the proxy decides them after
/// the rules: each rule's budget for this request's key, its reserve read from `body`, as a
/// policy entry named `<rule>.<usage name>` with the rule's name (`"rule"`), and whether every
/// budget of a rule that is not in shadow mode would admit the request. Errors: the quota
/// store's fault.
async fn rule_usage(
    quota: &crate::quota::QuotaService,
    rules: &[(
        crate::policy::rules::AppliedRule<'_>,
        crate::quota::rules::RuleCall,
    )],
    tenant: Option<&str>,
    body: Option<&[u8]>,
) -> Result<(Vec<Value>, bool), crate::store::redis::client::RedisFault> {
    let prefix = quota.redis.key_prefix();
    let mut out = Vec::new();
    let mut admitted = true;
    for (rule, budget, call) in pipeline::rules::usage_calls(prefix, rules, tenant, body) {
        let (key, reserve) = (&call.entry.key, call.entry.cost);
        let state = tenants::usage_state_json(quota, &call.name, key, &budget.rate, reserve);
        let mut v = state.await?;
        v["rule"] = json!(rule);
        if !call.entry.shadow && v["would_admit"] == json!(false) {
            admitted = false;
        }
        mark_source(&mut v, None);
        out.push(v);
    }
    Ok((out, admitted))
}

/// `p` as the problem+json body the proxy would answer (without the request's `instance`).
fn problem_json(p: &Problem) -> Value {
    let mut v =
        json!({"type": p.type_uri, "title": p.title, "status": p.status, "detail": p.detail});
    for (k, x) in &p.extensions {
        v[k] = x.clone();
    }
    v
}

/// The tenant layer refusing a cost that cannot be charged (`cost`: the route's, when known).
fn refused(p: &Problem, cost: Option<u64>) -> Value {
    let mut l = json!({"layer": "tenant", "decision": "rejected", "status": p.status, "reason": p.extensions.get("reason"), "detail": p.detail, "problem": problem_json(p)});
    if let Some(c) = cost {
        l["cost"] = json!(c);
    }
    l
}

fn refused_outcome(p: &Problem) -> Value {
    json!({"layer": "tenant", "decision": "rejected", "status": p.status, "problem": problem_json(p)})
}

/// The tenant layer: every policy's state in force (the proxy's resolution, live overrides
/// included and marked) and what a request of `cost` would get: the tier's limit and quotas,
/// its usage budget's reserve (read from `body` as the proxy reads it), its concurrency cap.
async fn tenant_layer(
    app: &App,
    snap: &Snapshot,
    quota: &crate::quota::QuotaService,
    tenant: &str,
    tier: &str,
    cost: u64,
    body: Option<&[u8]>,
) -> Value {
    let live = snap.live_limits(tenant);
    let live = live.as_deref();
    let Some(limits) =
        crate::policy::resolve(&snap.config, snap.region.as_deref(), live, tenant, tier)
    else {
        return json!({"layer": "tenant", "decision": "rejected", "status": 403, "detail": format!("tier \"{tier}\" does not exist")});
    };
    let (t, rate, policy) = (limits.tier, limits.rate, limits.policy());
    let usage = match limits.usage() {
        Some(u) => {
            let reserve = crate::pipeline::usage::reserve_for(u, body);
            Some(tenants::usage_json(quota, tenant, u, reserve, live).await)
        }
        None => None,
    };
    let read = crate::quota::peek::read(&quota.redis, tenant, policy.algorithm, &policy.quotas);
    match (read.await, usage.transpose()) {
        (Ok(raw), Ok(usage)) => {
            let p = crate::quota::peek::evaluate(
                policy.algorithm,
                &raw,
                &rate,
                policy.max_delay_ms,
                &policy.quotas,
                cost,
            );
            let mut policies = tenants::policies_json(&t.name, &rate, policy, &p, live);
            policies.extend(usage);
            let in_flight =
                tenants::in_flight_json(Some(quota), tenant, limits.max_in_flight, live).await;
            let full = in_flight["held"]
                .as_u64()
                .zip(in_flight["max"].as_u64())
                .is_some_and(|(held, max)| held >= max);
            let admitted =
                p.admitted() && !full && policies.iter().all(|v| v["would_admit"] != json!(false));
            let decision = if admitted { "admitted" } else { "limited" };
            json!({
                "layer": "tenant",
                "decision": decision,
                "tenant": tenant,
                "tier": t.name,
                "cost": cost,
                "policies": policies,
                "in_flight": in_flight,
                "fit": app.tier_fit.report(tenant, raw.now_ms),
            })
        }
        (Err(fault), _) | (_, Err(fault)) => json!({
            "layer": "tenant",
            "decision": "unknown",
            "why": format!("quota store fault: {}", fault.as_str()),
            "on_failure": format!("{:?}", t.on_failure).to_lowercase(),
        }),
    }
}
