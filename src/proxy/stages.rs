//! Adapters between a Pingora [`Session`] and the pipeline's stages, one function per stage (in
//! request order): what each stage reads from the request and the connection, and where its
//! decision goes. Each stage returns `Ok(true)` when it answered the request.

use super::ctx::Ctx;
use super::forward::X_FORWARDED_FOR;
use super::refuse::{answer_now, count, refuse, settle};
use super::{body_buffer, cost_body, reserve_body};
use crate::concurrency::claimant::claimant_of;
use crate::concurrency::slots::{Claimant, SlotLimits};
use crate::config::UsageBudget;
use crate::http::{body, client_ip, request_json};
use crate::identity::Identity;
use crate::identity::Method;
use crate::observe::metrics::METRICS;
use crate::pipeline::identity::Credentials;
use crate::pipeline::rules::Planned;
use crate::pipeline::Rejection;
use crate::pipeline::{self, Decision, Layer, Outcome};
use crate::policy::rules::RequestView;
use crate::quota::rules::RuleCall;
use crate::snapshot::{App, Snapshot};
use crate::tls::listener::ClientCert;
use pingora::http::RequestHeader;
use pingora::prelude::*;
use pingora::proxy::Session;
use pingora::ErrorType;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The client address: the peer, or with `edge.trusted_proxies` the address
/// `X-Forwarded-For` names for it ([`crate::http::client_ip`]).
pub(super) fn client_of(session: &Session, snap: &Snapshot) -> IpAddr {
    let peer = session
        .client_addr()
        .and_then(|a| a.as_inet())
        .map(|a| a.ip())
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    match &snap.config.edge {
        Some(e) if !e.trusted_proxies.is_empty() => {
            // Lossy: a non-ASCII byte makes one entry malformed, not the whole header.
            let values = session
                .req_header()
                .headers
                .get_all(&X_FORWARDED_FOR)
                .iter()
                .map(|v| String::from_utf8_lossy(v.as_bytes()))
                .collect::<Vec<_>>();
            client_ip::client_ip(peer, values.iter().map(|v| v.as_ref()), &e.trusted_proxies)
        }
        _ => client_ip::normalize(peer),
    }
}

/// Edge stage: `Ok(true)` when it answered.
pub(super) async fn edge_stage(
    app: &App,
    session: &mut Session,
    ctx: &mut Ctx,
    snap: &Snapshot,
) -> Result<bool> {
    // Blocked addresses first: refused before anything is counted for them. The clock is read
    // only when there is a block set to look in.
    if snap.blocks.is_some() {
        if let Some(r) = pipeline::live_block::ip(snap, ctx.client, unix_now_s()) {
            return refuse(session, ctx, r).await;
        }
    }
    let Some(settings) = &snap.config.edge else {
        return Ok(false);
    };
    let outcome = pipeline::edge::check(app, settings, ctx.client);
    let (status, shadow) = (snap.config.response.status, settings.mode.is_shadow());
    let decision = match pipeline::edge::judge(settings, status, outcome, shadow) {
        // Before routing: a refusal looks the route up to see whether it is a shadow route.
        Some(Decision::Reject(r)) => {
            let route = pipeline::route::peek(snap, session.req_header());
            Decision::refuse(r, route.is_some_and(|r| r.mode.is_shadow()))
        }
        Some(d) => d,
        None => return Ok(false),
    };
    settle(session, ctx, Layer::Edge, decision).await
}

/// Route stage: `Ok(true)` when it answered.
pub(super) async fn route_stage(
    session: &mut Session,
    ctx: &mut Ctx,
    snap: &Snapshot,
) -> Result<bool> {
    if let Err(r) = pipeline::route::check_method(session.req_header()) {
        return refuse(session, ctx, r).await;
    }
    let index = match pipeline::route::resolve(snap, session.req_header_mut()) {
        Ok(i) => i,
        Err(r) => return refuse(session, ctx, r).await,
    };
    ctx.route = Some(index);
    match pipeline::route::check_body(&snap.config.routes[index], session.req_header()) {
        Ok(()) => Ok(false),
        Err(r) => refuse(session, ctx, r).await,
    }
}

/// Identity stage: `Ok(true)` when it answered.
pub(super) async fn identity_stage(
    session: &mut Session,
    ctx: &mut Ctx,
    snap: &Snapshot,
) -> Result<bool> {
    let Some(route) = ctx.route(snap) else {
        return Ok(false);
    };
    if route.auth != crate::config::AuthMode::None {
        // A token of a JWKS issuer whose key is not (yet) in its set waits for the one
        // coalesced refetch, so a key rotation at the IdP never answers 401.
        if let Some(issuer) = snap.auth.awaiting_keys(&session.req_header().headers) {
            issuer.wait_fetch(issuer.settings.fetch_timeout).await;
        }
    }
    // The clock is read for what reads it: credentials (`exp`, `nbf`, live keys) and blocks;
    // an `auth: none` route, or a file's API keys, without a block set have neither.
    let live_keys = snap.live.as_ref().is_some_and(|l| l.settings.keys);
    let expiring = snap.auth.reads_clock() || live_keys;
    let timed = (route.auth != crate::config::AuthMode::None && expiring) || snap.blocks.is_some();
    let credentials = Credentials {
        headers: &session.req_header().headers,
        cert_cn: client_cert(session).map(|c| c.subject_cn.as_str()),
        client: ctx.client,
        ipv6_prefix: snap.config.ipv6_prefix(),
        now_s: if timed { unix_now_s() } else { 0 },
    };
    let live = match route.auth {
        crate::config::AuthMode::None => None,
        _ => pipeline::live_key::identify(snap, credentials.headers, credentials.now_s).await,
    };
    let decided =
        live.unwrap_or_else(|| pipeline::identity::decide(&snap.auth, route.auth, &credentials));
    match decided {
        Ok(id) => {
            if let Some(r) = pipeline::live_block::tenant(snap, &id.tenant, credentials.now_s) {
                return refuse(session, ctx, r).await;
            }
            let counted = id.method != Method::Anonymous;
            ctx.set_identity(id);
            if counted {
                count(ctx, Layer::Identity, Outcome::Admitted);
            }
            Ok(false)
        }
        Err(r) => refuse(session, ctx, r).await,
    }
}

/// The verified client certificate of the request's connection (TLS listeners with
/// `tls.client_ca_file`), if any.
fn client_cert(session: &Session) -> Option<&ClientCert> {
    session
        .digest()?
        .ssl_digest
        .as_ref()?
        .extension
        .get::<ClientCert>()
}

fn unix_now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Body buffer stage: a body that fits `server.body_buffer_bytes` is read whole before the
/// tenant and slot stages ([`body_buffer`]); `Ok(true)` when it answered (408).
pub(super) async fn buffer_stage(
    session: &mut Session,
    ctx: &mut Ctx,
    snap: &Snapshot,
) -> Result<bool> {
    match body_buffer::read(session, &snap.config.server.http, ctx.started).await {
        Ok(Ok(buffered)) => {
            ctx.body_buffer = buffered;
            Ok(false)
        }
        Ok(Err(r)) => {
            let detail = &r.problem.detail;
            tracing::warn!(request_id = %ctx.request_id(), client = %ctx.client, detail = %detail, "request body timed out");
            refuse(session, ctx, r).await
        }
        Err(e) => {
            ctx.decided = (Layer::Http, Outcome::ClientLeft);
            Err(e)
        }
    }
}

/// Tenant stage: `Ok(true)` when it answered. With limit rules that apply to the request, the
/// tier's policies and the rules are decided together ([`pipeline::rules`]); concurrency caps
/// take their leases first ([`pipeline::inflight`]). The Redis futures are boxed (one
/// allocation next to a Redis call): nested in the proxy's request future they would exceed the
/// compiler's layout depth.
pub(super) async fn tenant_stage(
    app: &App,
    session: &mut Session,
    ctx: &mut Ctx,
    snap: &Snapshot,
) -> Result<bool> {
    let (Some(quota), Some(identity)) = (&snap.quota, &ctx.identity) else {
        return Ok(false);
    };
    let fixed = ctx.route(snap).map_or(1, |r| r.cost);
    let Planned {
        mut rules,
        mut prepared,
    } = match rules_of(session.req_header(), ctx, snap, identity, fixed) {
        Ok(r) => r,
        Err(r) => return refuse(session, ctx, r).await,
    };
    // Costs read from the request, before anything is debited (all or nothing).
    let (cost, read) = match cost_body::costs(session, ctx, snap, &mut rules).await {
        Ok(Ok(c)) => c,
        Ok(Err(r)) => return refuse(session, ctx, r).await,
        Err(e) => {
            ctx.decided = (Layer::Tenant, Outcome::ClientLeft);
            return Err(e);
        }
    };
    if read {
        prepared = None;
    }
    let plan = match pipeline::tenant::plan(snap, identity, cost) {
        Ok(p) => p,
        Err(r) => return refuse(session, ctx, r).await,
    };
    if read {
        if let Some(r) = pipeline::cost::above_any_burst(ctx.shadow_route(), plan.as_ref(), &rules)
        {
            return refuse(session, ctx, r).await;
        }
    }
    if plan.is_none() && rules.is_empty() {
        return Ok(false);
    }
    let tier_usage = plan.as_ref().and_then(|p| p.limits.usage());
    let any_usage = |f: fn(&UsageBudget) -> bool| {
        tier_usage.is_some_and(f)
            || rules
                .iter()
                .any(|(a, _)| a.rule.usage.as_ref().is_some_and(f))
    };
    let include_usage = any_usage(|u| u.include_usage);
    let wanted = include_usage || any_usage(|u| u.from_json.is_some());
    let limit = snap.config.server.http.header_read_timeout;
    let body = match reserve_body::read(session, wanted, limit).await {
        Ok(Ok(body)) => {
            if include_usage {
                let rewritten = body.as_deref().and_then(request_json::with_include_usage);
                ctx.body_rewrite = rewritten.map(bytes::Bytes::from);
            }
            body
        }
        Ok(Err(r)) => return refuse(session, ctx, r).await,
        Err(e) => {
            ctx.decided = (Layer::Tenant, Outcome::ClientLeft);
            return Err(e);
        }
    };
    ctx.tenant_staged = true;
    let status = snap.config.response.status;
    let mode = snap.config.response.headers;
    let region = snap.region.as_ref().map(|r| r.region());
    // Only a capped tier or a concurrency rule pays for a boxed future and a Redis call.
    if let Some(p) = plan.as_ref().filter(|p| p.limits.max_in_flight.is_some()) {
        match Box::pin(pipeline::inflight::take(quota, p, status, mode, region)).await {
            Ok(lease) => ctx.inflight.extend(lease),
            Err(r) => {
                let shadow = p.limits.tier.mode.is_shadow() || ctx.shadow_route();
                return settle(session, ctx, Layer::Tenant, Decision::refuse(r, shadow)).await;
            }
        }
    }
    let has_concurrency = rules.iter().any(|(a, _)| a.rule.max_in_flight.is_some());
    let (concurrency, rules): (Vec<_>, Vec<_>) = if has_concurrency {
        rules
            .into_iter()
            .partition(|(a, _)| a.rule.max_in_flight.is_some())
    } else {
        (Vec::new(), rules)
    };
    // The kept plan's calls fit only when every one of its rules is decided here.
    let prepared = prepared.filter(|_| concurrency.is_empty());
    let leases = match concurrency.is_empty() {
        true => Ok(Vec::new()),
        false => {
            Box::pin(pipeline::inflight::take_rules(
                quota,
                &snap.rule_series,
                &concurrency,
                status,
                pipeline::inflight::RefusalHeaders { mode, region },
            ))
            .await
        }
    };
    match leases {
        Ok(leases) => ctx.inflight.extend(leases),
        Err(r) => {
            let shadow = ctx.shadow_route();
            if !shadow {
                ctx.inflight.clear();
            }
            return settle(session, ctx, Layer::Tenant, Decision::refuse(r, shadow)).await;
        }
    }
    if plan.is_none() && rules.is_empty() {
        return Ok(false);
    }
    let series = &snap.rule_series;
    // Boxed only when a rule can be blocked (one allocation next to a Redis call).
    let blocked = match pipeline::block::any_blockable(&rules) {
        true => Box::pin(pipeline::block::check(quota, series, &rules, status)).await,
        false => None,
    };
    if let Some(r) = blocked {
        let shadow = ctx.shadow_route();
        if !shadow {
            ctx.inflight.clear();
        }
        return settle(session, ctx, Layer::Tenant, Decision::refuse(r, shadow)).await;
    }
    // Every usage budget reserved with the request: its tier's, then its rules'.
    let prefix = &quota.settings.key_prefix;
    let body = body.as_deref();
    let mut usage: Vec<(&str, &UsageBudget, RuleCall)> = Vec::new();
    if let Some((p, u)) = plan.as_ref().and_then(|p| Some((p, p.limits.usage()?))) {
        let tier = p.limits.tier;
        let reserve = pipeline::usage::reserve_for(u, body);
        let (shadow, on_failure) = (tier.mode.is_shadow(), tier.on_failure);
        let call = pipeline::usage::entry(prefix, p.tenant, u, reserve, shadow, on_failure);
        usage.push((tier.name.as_str(), u, call));
    }
    if !rules.is_empty() {
        let tenant = Some(identity.tenant.as_str());
        usage.extend(pipeline::rules::usage_calls(prefix, &rules, tenant, body));
    }
    let fit = &app.tier_fit;
    let mut verdict = match &plan {
        Some(p) if rules.is_empty() && usage.is_empty() && !refunds(p) => {
            let shadow = p.limits.tier.mode.is_shadow() || ctx.shadow_route();
            pipeline::tenant::run(quota, fit, p, status, shadow).await
        }
        _ => {
            let shadow = ctx.shadow_route();
            Box::pin(pipeline::rules::run(
                quota,
                &snap.rule_series,
                fit,
                plan.as_ref(),
                &rules,
                prepared.as_deref(),
                &usage.iter().map(|(_, _, call)| call).collect::<Vec<_>>(),
                status,
                shadow,
            ))
            .await
        }
    };
    if let (Decision::Reject(r), false) = (&mut verdict.decision, verdict.refused_rules.is_empty())
    {
        let refused = &verdict.refused_rules;
        Box::pin(pipeline::block::after_refusal(quota, &rules, refused, r)).await;
    }
    ctx.quota_headers = verdict.headers;
    if !verdict.debited_at.is_empty() {
        let at = &verdict.debited_at;
        ctx.settle = pipeline::settle::Settle::of(quota, plan.as_ref(), &rules, at);
    }
    for ((owner, budget, call), _) in usage
        .iter()
        .zip(&verdict.usage_reserved)
        .filter(|(_, r)| **r)
    {
        let meter = pipeline::usage::UsageMeter::new(quota.clone(), owner, budget, call);
        ctx.usage.push(meter);
    }
    if let Decision::Delay(ms) = verdict.decision {
        if let Err(e) = wait_for_slot(session, ms).await {
            ctx.decided = (Layer::Tenant, Outcome::ClientLeft);
            if let (Some((rate, r)), Some(p)) = (verdict.reservation, &plan) {
                quota.give_back(&p.request(), &rate, r).await;
            }
            return Err(e);
        }
    }
    match verdict.decision {
        Decision::Admit | Decision::Delay(_) => {
            if let (true, Some(p)) = (verdict.near_limit, &plan) {
                let tier = p.limits.tier.name.as_str();
                METRICS.near_limit.with_label_values(&[tier]).inc();
            }
            count(ctx, Layer::Tenant, verdict.outcome);
            super::trace::admitted_as(ctx, verdict.outcome);
            if verdict.outcome != Outcome::Admitted {
                // The access log names how: `failed_open`, `fallback`, `pool_admitted`.
                ctx.decided = (Layer::Tenant, verdict.outcome);
            }
            Ok(false)
        }
        d => {
            if matches!(d, Decision::Reject(_)) {
                // A refused request gives its concurrency leases back at once.
                ctx.inflight.clear();
            }
            settle(session, ctx, Layer::Tenant, d).await
        }
    }
}

/// True when the tier gives request counts back (`refund_on`): decided with the rules' call,
/// which says what each debit's clock was.
fn refunds(p: &pipeline::tenant::Plan<'_>) -> bool {
    p.limits.tier.refund_on != crate::config::RefundOn::default()
}

/// The limit rules that apply to the request (none without `limits:`, at no cost).
fn rules_of<'a>(
    req: &RequestHeader,
    ctx: &Ctx,
    snap: &'a Snapshot,
    identity: &Identity,
    cost: u64,
) -> std::result::Result<Planned<'a>, Rejection> {
    if snap.config.limits.is_empty() {
        return Ok(Planned::default());
    }
    let mut client_key = Vec::with_capacity(40);
    client_ip::push_ip(
        &mut client_key,
        client_ip::key_of(ctx.client, snap.config.ipv6_prefix()),
    );
    let client_key = String::from_utf8(client_key).unwrap_or_default();
    let host = request_host(req);
    let route = ctx.route(snap).map(|r| r.key_value());
    let view = RequestView {
        method: req.method.as_str(),
        path: req.uri.path(),
        query: req.uri.query(),
        host: &host,
        headers: &req.headers,
        client_key: Some(&client_key),
        route: route.as_deref(),
        tenant: Some(identity.tenant.as_str()),
        tier: identity.tier.as_deref(),
        claims: identity.claims.as_deref(),
    };
    pipeline::rules::plan(snap, &view, cost)
}

/// The request's host, lower case without port: the target's authority (HTTP/2, absolute
/// form), else `Host`; empty when neither is there.
fn request_host(req: &RequestHeader) -> std::borrow::Cow<'_, str> {
    let raw = req.uri.authority().map(|a| a.as_str()).or_else(|| {
        req.headers
            .get(http::header::HOST)
            .and_then(|h| h.to_str().ok())
    });
    raw.map(crate::http::normalize_host).unwrap_or_default()
}

/// Waits `delay_ms` for a `leaky_bucket` slot on a timer (never blocking a thread). While no
/// request body is pending, a client that goes away is noticed at once and the wait ends with
/// an error (the caller gives the slot back). With a body pending the wait is not interrupted.
async fn wait_for_slot(session: &mut Session, delay_ms: u64) -> Result<()> {
    let sleep = tokio::time::sleep(Duration::from_millis(delay_ms));
    tokio::pin!(sleep);
    let mut probe = session.as_downstream_mut().is_body_done();
    loop {
        tokio::select! {
            _ = &mut sleep => return Ok(()),
            read = session.as_downstream_mut().read_body_or_idle(true), if probe => {
                if read.is_err() {
                    return Error::e_explain(
                        ErrorType::ConnectionClosed,
                        "client left while delayed for its leaky_bucket slot",
                    )
                    .map_err(|e| e.into_down());
                }
                probe = false;
            }
        }
    }
}

/// Upstream slot stage: `Ok(true)` when it answered.
pub(super) async fn slot_stage(
    session: &mut Session,
    ctx: &mut Ctx,
    snap: &Snapshot,
) -> Result<bool> {
    let upstream = ctx.upstream(snap);
    let (Some(upstream), Some(identity)) = (upstream, &ctx.identity) else {
        return Ok(false);
    };
    let Some(slots) = &upstream.slots else {
        return Ok(false);
    };
    let settings = &upstream.settings;
    let (tenant, weight) = claimant_of(&snap.config, identity);
    let limits = SlotLimits {
        queue: settings.queue.as_ref(),
        per_tenant: settings.max_concurrency_per_tenant,
    };
    let claimant = Claimant { tenant, weight };
    let waiting = super::trace::wait_started(ctx);
    match pipeline::slot::acquire(session, slots, claimant, limits).await? {
        Ok(guard) => {
            super::trace::wait_ended(ctx, waiting);
            ctx.slot = Some(guard);
            settle(session, ctx, Layer::Upstream, Decision::Admit).await
        }
        Err(why) => {
            let shadow = ctx.shadow_route();
            if !shadow {
                let labels = [settings.name.as_str(), why.as_str()];
                METRICS.upstream_rejections.with_label_values(&labels).inc();
            }
            let spent = ctx.quota_headers.is_some();
            let r = pipeline::slot::rejection(why, settings, tenant, spent);
            super::trace::wait_ended(ctx, waiting);
            // Shadow: the request goes on without a slot.
            let d = Decision::refuse(r, shadow);
            settle(session, ctx, Layer::Upstream, d).await
        }
    }
}

/// After connecting to the backend (Pingora's `connected_to_upstream`): the upstream's TLS
/// check of the presented certificate, for backends pinned by their own certificate.
pub(super) fn check_backend_connection(
    ctx: &Ctx,
    digest: Option<&pingora::protocols::Digest>,
) -> Result<()> {
    let snap = &ctx.snapshot;
    let Some(tls) = ctx.upstream(snap).and_then(|u| u.tls.as_ref()) else {
        return Ok(());
    };
    let presented = digest
        .and_then(|d| d.ssl_digest.as_ref())
        .map(|s| s.cert_digest.as_slice());
    tls.check_connection(presented)
}

/// Backend stage (Pingora's `upstream_peer`): a healthy backend of the route's upstream, with
/// the upstream's TLS, HTTP version and timeouts.
pub(super) fn backend_peer(ctx: &Ctx) -> Result<Box<HttpPeer>> {
    let snap = &ctx.snapshot;
    let upstream = ctx
        .upstream(snap)
        .ok_or_else(|| Error::explain(ErrorType::HTTPStatus(502), "route without upstream"))?;
    let backend = upstream
        .pool
        .select()
        .ok_or_else(|| Error::explain(ErrorType::HTTPStatus(502), "no healthy backend"))?;
    let mut peer = HttpPeer::new(backend.addr.clone(), upstream.tls.is_some(), String::new());
    if let Some(tls) = &upstream.tls {
        tls.apply(&mut peer);
    }
    let s = &upstream.settings;
    crate::upstream::h2::apply(&mut peer, s.h2);
    peer.options.connection_timeout = Some(s.connect_timeout);
    peer.options.total_connection_timeout = Some(s.connect_timeout);
    peer.options.read_timeout = Some(s.read_timeout);
    peer.options.write_timeout = Some(s.read_timeout);
    peer.options.idle_timeout = Some(Duration::from_secs(60));
    Ok(Box::new(peer))
}

/// Body stage (Pingora's `request_body_filter`): counts the streamed body against the route's
/// `max_body_bytes`; over it, the request is refused with an error that `fail_to_proxy` answers.
/// A body the tenant stage rewrote (`stream_options.include_usage`, [`Ctx::body_rewrite`]) is
/// replaced by its new bytes here, after it was counted as the client sent it.
///
/// Towards an `h2` upstream the refusal is written here as well: Pingora's HTTP/2 upstream loop
/// (pingora-proxy `proxy_h2`) takes a body filter error for an upstream one, logs it and goes on
/// waiting for the backend's response, so `fail_to_proxy` would answer only after
/// `read_timeout_ms` (docs/grpc.md#limits-of-this-version).
///
/// A streamed body is also held to `server.body_read_timeout` from the end of its head: a chunk
/// arriving later, while the body is not complete, ends the request with 408 (the wait between
/// two reads is bounded by `server.body_idle_timeout`, set as the HTTP/1 read timeout when the
/// request is forwarded).
pub(super) async fn body_stage(
    session: &mut Session,
    ctx: &mut Ctx,
    chunk: &mut Option<bytes::Bytes>,
    end_of_stream: bool,
) -> Result<()> {
    let max = ctx.route(&ctx.snapshot).and_then(|r| r.max_body_bytes);
    let len = chunk.as_ref().map_or(0, |c| c.len());
    let limits = &ctx.snapshot.config.server.http;
    let late = !end_of_stream && ctx.started.elapsed() > limits.body_read_timeout;
    if late && ctx.decided != (Layer::Http, Outcome::BodyTimeout) {
        let p = body_buffer::timeout_problem(limits, true);
        ctx.decided = (Layer::Http, Outcome::BodyTimeout);
        count(ctx, Layer::Http, Outcome::BodyTimeout);
        tracing::warn!(request_id = %ctx.request_id(), client = %ctx.client, received = ctx.body_bytes, "request body timed out; stopped reading");
        if upstream_speaks_h2(ctx) {
            answer_now(session, ctx, &p, true).await;
        } else {
            ctx.release_held(true);
        }
        return Error::e_explain(ErrorType::HTTPStatus(408), p.detail);
    }
    let too_large = body::streamed_too_large(&mut ctx.body_bytes, len, max);
    if let (false, Some(new), Some(c)) = (too_large, &ctx.body_rewrite, chunk.as_mut()) {
        // The whole body was read for the tenant stage: it passes here as one piece.
        if !c.is_empty() {
            *c = new.clone();
        }
    }
    if too_large {
        let r = pipeline::route::body_too_large(max);
        ctx.decided = (r.layer, r.reason);
        count(ctx, r.layer, r.reason);
        tracing::warn!(request_id = %ctx.request_id(), client = %ctx.client, received = ctx.body_bytes, "request body over the route's limit; stopped reading");
        if upstream_speaks_h2(ctx) {
            answer_now(session, ctx, &r.problem, true).await;
        } else {
            ctx.release_held(true);
        }
        return Error::e_explain(ErrorType::HTTPStatus(r.problem.status), r.problem.detail);
    }
    Ok(())
}

/// True when the request's upstream has `h2: true`.
fn upstream_speaks_h2(ctx: &Ctx) -> bool {
    let snap = &ctx.snapshot;
    ctx.upstream(snap).is_some_and(|u| u.settings.h2.is_some())
}
