//! The Pingora glue: runs the stages of [`crate::pipeline`] in order and writes their
//! responses. Thin on purpose; the decisions live in the stages.
//!
//! Order (docs/DESIGN.md section 1): edge → route → identity → tenant quota → upstream slot →
//! backend. A request rejected at one stage never reaches a later one.

mod failure;
pub mod front;
pub mod head;
mod stages;

use crate::concurrency::claimant::claimant_of;
use crate::concurrency::slots::{Claimant, SlotGuard, SlotLimits};
use crate::config::RouteSettings;
use crate::http::client_ip;
use crate::http::proxy_fields::{self, ProxyField};
use crate::http::{body, connection, lookalike, request_id};
use crate::identity::{Authenticator, Identity, Method};
use crate::observe::metrics::METRICS;
use crate::pipeline::identity::Credentials;
use crate::pipeline::{self, Decision, Layer, Outcome, Rejection};
use crate::response::{send_problem, Problem, QuotaHeaders};
use crate::snapshot::{App, Snapshot};
use crate::tls::listener::ClientCert;
use async_trait::async_trait;
use failure::failure_status;
use http::header::CONNECTION;
use http::{HeaderName, HeaderValue};
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use pingora::ErrorType;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Per-request state. Dropped after `logging` on every path, which releases the upstream slot.
pub struct Ctx {
    snapshot: Arc<Snapshot>,
    /// The request id as a header value (visible ASCII), shared by the backend request, the
    /// response, problem bodies and logs ([`Ctx::request_id`]).
    request_id: HeaderValue,
    /// The client sent exactly one `X-Request-Id`, and it is `request_id`.
    request_id_sent: bool,
    started: Instant,
    client: IpAddr,
    route: Option<usize>,
    /// Who the request is (anonymous included), once the identity stage passed.
    identity: Option<Identity>,
    /// Tenant whose bucket the tenant stage used.
    tenant: Option<String>,
    /// Tier whose bucket the tenant stage used.
    tier: Option<String>,
    quota_headers: Option<QuotaHeaders>,
    slot: Option<SlotGuard>,
    /// Layer that decided the request's fate and how (for the access log).
    decided: (Layer, Outcome),
    connect_tries: usize,
    /// Request body bytes received so far (for `routes[].max_body_bytes`).
    body_bytes: u64,
}

impl Ctx {
    /// The request id as text (always visible ASCII: a checked client id or a UUID).
    fn request_id(&self) -> &str {
        self.request_id.to_str().unwrap_or_default()
    }

    fn route<'a>(&self, snap: &'a Snapshot) -> Option<&'a RouteSettings> {
        self.route.map(|i| &snap.config.routes[i])
    }
    fn tier_label(&self) -> &str {
        self.tier
            .as_deref()
            .or_else(|| self.identity.as_ref().and_then(|i| i.tier.as_deref()))
            .unwrap_or("-")
    }
    /// The rate-limit header pairs of the request, once the tenant stage decided, without
    /// `Retry-After`: a refusal carries its own ([`Rejection::retry_after`]), and a request that
    /// goes on (admitted, or refused in shadow mode) is not told to retry.
    fn quota_pairs(&self) -> Vec<(&'static str, String)> {
        let q = self.quota_headers.as_ref();
        let mut pairs = q.map(|q| self.snapshot.quota_pairs(q)).unwrap_or_default();
        pairs.retain(|(name, _)| *name != "Retry-After");
        pairs
    }

    /// True when the request's route runs in shadow mode (every limit layer shadows for it).
    fn shadow_route(&self) -> bool {
        self.route(&self.snapshot)
            .is_some_and(|r| r.mode.is_shadow())
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

/// True when the request came over TLS.
fn is_tls(session: &Session) -> bool {
    session.digest().is_some_and(|d| d.ssl_digest.is_some())
}

const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// The request id ([`crate::http::request_id`]): the client's one valid `X-Request-Id`, else a
/// new UUID v4, as a header value (the client's is shared, not copied); and whether it is the
/// client's (then the backend request already carries exactly it and needs no rewrite).
fn request_id(req: &RequestHeader) -> (HeaderValue, bool) {
    let sent = req.headers.get_all(&X_REQUEST_ID);
    if request_id::accepted(sent.iter().map(HeaderValue::as_bytes)).is_some() {
        if let Some(value) = sent.iter().next() {
            return (value.clone(), true);
        }
    }
    let id = request_id::generate();
    let value = HeaderValue::from_str(&id).expect("a UUID is a valid header value");
    (value, false)
}

/// Rewrites the admitted request's headers for the backend: identity headers
/// ([`crate::identity::Authenticator::forward`]), `X-Forwarded-For` (the client's list, then the
/// peer), `X-Forwarded-Proto` and `X-Request-Id`; and drops those names from the client's
/// `Connection` header, which would otherwise make Pingora remove them again
/// ([`crate::http::connection`]).
///
/// Done on the downstream request once it is admitted, not in `upstream_request_filter`: Pingora
/// parses the downstream head into a header map with room to spare, while the upstream copy it
/// makes per attempt has exactly the fields it copied, so every insert there grew (reallocated)
/// both of its maps. Each attempt's copy carries the result.
fn forward_headers(session: &mut Session, ctx: &Ctx) -> Result<()> {
    let proto = if is_tls(session) { "https" } else { "http" };
    let peer = session
        .client_addr()
        .and_then(|a| a.as_inet())
        .map(|a| client_ip::normalize(a.ip()));
    let req = session.req_header_mut();
    let forward = ctx.snapshot.auth.forward(ctx.identity.as_ref());
    for name in forward.remove {
        req.remove_header(name);
    }
    for (name, value) in forward.insert {
        req.insert_header(name.clone(), value)?;
    }
    // X-Forwarded-For in one allocation: every field the client sent, byte for byte and in
    // order (as one list, RFC 9110 5.3, the same list the edge stage read), then the peer.
    let mut xff = Vec::with_capacity(64);
    for v in req.headers.get_all(&X_FORWARDED_FOR) {
        xff.extend_from_slice(v.as_bytes());
        xff.extend_from_slice(b", ");
    }
    match peer {
        Some(peer) => client_ip::push_ip(&mut xff, peer),
        None => xff.truncate(xff.len().saturating_sub(2)),
    }
    // Names as lower-case static strings: the same bytes on the wire as a `HeaderName`, without
    // Pingora copying the name for its case-preserving map.
    if !xff.is_empty() {
        req.insert_header("x-forwarded-for", xff)?;
    }
    req.insert_header("x-forwarded-proto", HeaderValue::from_static(proto))?;
    if !ctx.request_id_sent {
        req.insert_header("x-request-id", ctx.request_id.clone())?;
    }
    drop_lookalikes(req, &ctx.snapshot.auth);
    let trusted = match (&ctx.snapshot.config.edge, peer) {
        (Some(edge), Some(peer)) => client_ip::is_trusted(peer, &edge.trusted_proxies),
        _ => false,
    };
    drop_proxy_fields(req, trusted);
    keep_owned_headers(req, ctx.snapshot.auth.strip_headers())
}

/// Removes the proxy-set fields a client sent ([`crate::http::proxy_fields`]): `Forwarded`,
/// `X-Real-IP`, `X-Forwarded-Host`, `X-Original-URL`, ... unless the peer is `trusted`, and their
/// `_` spellings always.
fn drop_proxy_fields(req: &mut RequestHeader, trusted: bool) {
    remove_fields(req, |name| {
        match proxy_fields::classify(name.as_str().as_bytes()) {
            ProxyField::Other => false,
            ProxyField::Field => !trusted,
            ProxyField::Lookalike => true,
        }
    });
}

/// Removes every field whose name `dropped` says so. One scan of the names, and nothing
/// allocated, when none is.
fn remove_fields(req: &mut RequestHeader, dropped: impl Fn(&HeaderName) -> bool) {
    if !req.headers.keys().any(&dropped) {
        return;
    }
    let names: Vec<HeaderName> = req.headers.keys().filter(|n| dropped(n)).cloned().collect();
    for name in &names {
        req.remove_header(name);
    }
}

/// The fields tollgate sets for the backend: `X-Forwarded-For`/`-Proto`, `X-Request-Id` and the
/// `identity` headers (tenant and tier).
fn set_for_backend(identity: &[HeaderName]) -> impl Iterator<Item = &HeaderName> {
    static FIXED: [HeaderName; 3] = [X_FORWARDED_FOR, X_FORWARDED_PROTO, X_REQUEST_ID];
    FIXED.iter().chain(identity)
}

/// Removes the client's fields whose names only look like one tollgate sets or reads
/// ([`crate::http::lookalike`]: `X_Tollgate_Tenant`, `X_Forwarded_For`, `X_Api_Key`). One scan
/// of the names, and nothing allocated, for a request without `_` in any name.
fn drop_lookalikes(req: &mut RequestHeader, auth: &Authenticator) {
    let has_underscore = |name: &HeaderName| name.as_str().as_bytes().contains(&b'_');
    if !req.headers.keys().any(has_underscore) {
        return;
    }
    let owned: Vec<&str> = set_for_backend(auth.strip_headers())
        .chain(auth.api_key_header())
        .map(HeaderName::as_str)
        .collect();
    remove_fields(req, |name| {
        owned
            .iter()
            .any(|o| lookalike::reads_as(name.as_str().as_bytes(), o))
    });
}

/// Removes from `Connection` the names of the fields tollgate sets for the backend (`identity`,
/// the identity headers; `X-Forwarded-For`/`-Proto`, `X-Request-Id`), keeping its other tokens.
/// Nothing is allocated for a request without `Connection`, the usual case.
fn keep_owned_headers(req: &mut RequestHeader, identity: &[HeaderName]) -> Result<()> {
    if !req.headers.contains_key(CONNECTION) {
        return Ok(());
    }
    let owned: Vec<&str> = set_for_backend(identity).map(HeaderName::as_str).collect();
    let values: Vec<&[u8]> = req
        .headers
        .get_all(CONNECTION)
        .iter()
        .map(|v| v.as_bytes())
        .collect();
    let Some(kept) = connection::without_owned(&values, &owned) else {
        return Ok(());
    };
    req.remove_header(&CONNECTION);
    if !kept.is_empty() {
        req.insert_header(CONNECTION, kept)?;
    }
    Ok(())
}

/// The proxy service.
pub struct Proxy {
    pub app: Arc<App>,
}

fn unix_now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Proxy {
    /// The one place a rejection becomes a response: records the deciding layer, counts it
    /// (`tollgate_decisions_total`, and the per-tenant counter for the tenant layer), and
    /// writes the problem with its headers and, after the tenant stage, the rate-limit headers.
    async fn refuse(&self, session: &mut Session, ctx: &mut Ctx, r: Rejection) -> Result<bool> {
        ctx.decided = (r.layer, r.reason);
        self.count(ctx, r.layer, r.reason);
        if r.reason == Outcome::BadTarget {
            tracing::warn!(
                request_id = %ctx.request_id(),
                client = %ctx.client,
                reason = %r.problem.extensions.get("reason").and_then(|v| v.as_str()).unwrap_or(""),
                target = %crate::http::log_escape(session.req_header().raw_path(), 200),
                "request target refused"
            );
        }
        let mut headers = r.response_headers();
        headers.extend(ctx.quota_pairs());
        // A client that went away cannot be answered; that is not our error.
        let _ = send_problem(session, &r.problem, ctx.request_id(), &headers).await;
        Ok(true)
    }

    /// Counts one decision of `layer` (and, for the tenant layer, the per-tenant counter).
    fn count(&self, ctx: &Ctx, layer: Layer, outcome: Outcome) {
        ctx.snapshot
            .decision_series
            .inc(layer, outcome, ctx.tier_label());
        if let (Layer::Tenant, Some(tenant)) = (layer, &ctx.tenant) {
            let bound = ctx.snapshot.config.observability.tenant_metrics;
            METRICS.tenant_decision(bound, tenant, outcome);
        }
    }

    /// Applies a stage's decision: `Ok(true)` when the request was answered. An admission is
    /// counted as `admitted` for `layer`.
    async fn settle(
        &self,
        session: &mut Session,
        ctx: &mut Ctx,
        layer: Layer,
        decision: Decision,
    ) -> Result<bool> {
        match decision {
            Decision::Admit | Decision::Delay(_) => {
                self.count(ctx, layer, Outcome::Admitted);
                Ok(false)
            }
            Decision::Reject(r) => self.refuse(session, ctx, r).await,
            Decision::ShadowReject(r) => {
                self.shadow(ctx, r);
                Ok(false)
            }
        }
    }

    /// A rejection of a layer in shadow mode: counted as `shadow_limited`, logged, not enforced
    /// (the access log shows it as the deciding layer unless a later one refuses).
    fn shadow(&self, ctx: &mut Ctx, r: Rejection) {
        ctx.decided = (r.layer, Outcome::ShadowLimited);
        self.count(ctx, r.layer, Outcome::ShadowLimited);
        tracing::info!(
            request_id = %ctx.request_id(),
            layer = r.layer.as_str(),
            would_be = r.reason.as_str(),
            status = r.problem.status,
            tenant = ctx.tenant.as_deref().unwrap_or("-"),
            client = %ctx.client,
            "shadow mode: this request would have been refused"
        );
    }

    fn client_of(&self, session: &Session, snap: &Snapshot) -> IpAddr {
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
    async fn edge_stage(
        &self,
        session: &mut Session,
        ctx: &mut Ctx,
        snap: &Snapshot,
    ) -> Result<bool> {
        let Some(settings) = &snap.config.edge else {
            return Ok(false);
        };
        let outcome = pipeline::edge::check(&self.app, settings, ctx.client);
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
        self.settle(session, ctx, Layer::Edge, decision).await
    }

    /// Route stage: `Ok(true)` when it answered.
    async fn route_stage(
        &self,
        session: &mut Session,
        ctx: &mut Ctx,
        snap: &Snapshot,
    ) -> Result<bool> {
        let index = match pipeline::route::resolve(snap, session.req_header_mut()) {
            Ok(i) => i,
            Err(r) => return self.refuse(session, ctx, r).await,
        };
        ctx.route = Some(index);
        match pipeline::route::check_body(&snap.config.routes[index], session.req_header()) {
            Ok(()) => Ok(false),
            Err(r) => self.refuse(session, ctx, r).await,
        }
    }

    /// Identity stage: `Ok(true)` when it answered.
    async fn identity_stage(
        &self,
        session: &mut Session,
        ctx: &mut Ctx,
        snap: &Snapshot,
    ) -> Result<bool> {
        let Some(route) = ctx.route(snap) else {
            return Ok(false);
        };
        let credentials = Credentials {
            headers: &session.req_header().headers,
            cert_cn: client_cert(session).map(|c| c.subject_cn.as_str()),
            client: ctx.client,
            ipv6_prefix: snap.config.ipv6_prefix(),
            now_s: unix_now_s(),
        };
        match pipeline::identity::decide(&snap.auth, route.auth, &credentials) {
            Ok(id) => {
                let counted = id.method != Method::Anonymous;
                ctx.identity = Some(id);
                if counted {
                    self.count(ctx, Layer::Identity, Outcome::Admitted);
                }
                Ok(false)
            }
            Err(r) => self.refuse(session, ctx, r).await,
        }
    }

    /// Tenant stage: `Ok(true)` when it answered.
    async fn tenant_stage(
        &self,
        session: &mut Session,
        ctx: &mut Ctx,
        snap: &Snapshot,
    ) -> Result<bool> {
        let (Some(quota), Some(identity)) = (&snap.quota, &ctx.identity) else {
            return Ok(false);
        };
        let cost = ctx.route(snap).map_or(1, |r| r.cost);
        let plan = match pipeline::tenant::plan(snap, identity, cost) {
            Ok(Some(p)) => p,
            Ok(None) => return Ok(false),
            Err(r) => return self.refuse(session, ctx, r).await,
        };
        ctx.tenant = Some(plan.tenant.clone());
        ctx.tier = Some(plan.tier.name.clone());
        let status = snap.config.response.status;
        let shadow = plan.tier.mode.is_shadow() || ctx.shadow_route();
        let fit = &self.app.tier_fit;
        let verdict = pipeline::tenant::run(quota, fit, &plan, status, shadow).await;
        ctx.quota_headers = verdict.headers;
        if let Decision::Delay(ms) = verdict.decision {
            if let Err(e) = stages::wait_for_slot(session, ms).await {
                ctx.decided = (Layer::Tenant, Outcome::ClientLeft);
                if let Some((rate, r)) = verdict.reservation {
                    quota.give_back(&plan.request(), &rate, r).await;
                }
                return Err(e);
            }
        }
        match verdict.decision {
            Decision::Admit | Decision::Delay(_) => {
                self.count(ctx, Layer::Tenant, verdict.outcome);
                if verdict.near_limit {
                    let tier = plan.tier.name.as_str();
                    METRICS.near_limit.with_label_values(&[tier]).inc();
                }
                Ok(false)
            }
            d => self.settle(session, ctx, Layer::Tenant, d).await,
        }
    }

    /// Upstream slot stage: `Ok(true)` when it answered.
    async fn slot_stage(
        &self,
        session: &mut Session,
        ctx: &mut Ctx,
        snap: &Snapshot,
    ) -> Result<bool> {
        let upstream = ctx
            .route(snap)
            .and_then(|r| snap.upstreams.get(&r.upstream));
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
        match pipeline::slot::acquire(session, slots, claimant, limits).await? {
            Ok(guard) => {
                ctx.slot = Some(guard);
                self.settle(session, ctx, Layer::Upstream, Decision::Admit)
                    .await
            }
            Err(why) => {
                let shadow = ctx.shadow_route();
                if !shadow {
                    let labels = [settings.name.as_str(), why.as_str()];
                    METRICS.upstream_rejections.with_label_values(&labels).inc();
                }
                let spent = ctx.quota_headers.is_some();
                let r = pipeline::slot::rejection(why, settings, tenant, spent);
                // Shadow: the request goes on without a slot.
                let d = Decision::refuse(r, shadow);
                self.settle(session, ctx, Layer::Upstream, d).await
            }
        }
    }
}

#[async_trait]
impl ProxyHttp for Proxy {
    type CTX = Ctx;

    fn new_ctx(&self) -> Ctx {
        Ctx {
            snapshot: self.app.snapshot.load_full(),
            request_id: HeaderValue::from_static(""),
            request_id_sent: false,
            started: Instant::now(),
            client: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            route: None,
            identity: None,
            tenant: None,
            tier: None,
            quota_headers: None,
            slot: None,
            decided: (Layer::Upstream, Outcome::Admitted),
            connect_tries: 0,
            body_bytes: 0,
        }
    }

    /// The stages in order; each answers the request itself when it refuses (`Ok(true)`).
    async fn request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> Result<bool> {
        // One snapshot reference for all stages (each clone is a shared atomic count).
        let snap = ctx.snapshot.clone();
        (ctx.request_id, ctx.request_id_sent) = request_id(session.req_header());
        ctx.client = self.client_of(session, &snap);
        let answered = self.edge_stage(session, ctx, &snap).await?
            || self.route_stage(session, ctx, &snap).await?
            || self.identity_stage(session, ctx, &snap).await?
            || self.tenant_stage(session, ctx, &snap).await?
            || self.slot_stage(session, ctx, &snap).await?;
        if !answered {
            forward_headers(session, ctx)?;
        }
        Ok(answered)
    }

    async fn upstream_peer(&self, _session: &mut Session, ctx: &mut Ctx) -> Result<Box<HttpPeer>> {
        let snap = &ctx.snapshot;
        let upstream = ctx
            .route(snap)
            .and_then(|r| snap.upstreams.get(&r.upstream))
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
        peer.options.connection_timeout = Some(s.connect_timeout);
        peer.options.total_connection_timeout = Some(s.connect_timeout);
        peer.options.read_timeout = Some(s.read_timeout);
        peer.options.write_timeout = Some(s.read_timeout);
        peer.options.idle_timeout = Some(std::time::Duration::from_secs(60));
        Ok(Box::new(peer))
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut Ctx,
        mut e: Box<Error>,
    ) -> Box<Error> {
        // Try the next backend once per backend before giving up.
        ctx.connect_tries += 1;
        let backends = ctx
            .route(&ctx.snapshot)
            .and_then(|r| ctx.snapshot.upstreams.get(&r.upstream))
            .map(|u| u.settings.backends.len())
            .unwrap_or(1);
        if ctx.connect_tries < backends {
            e.set_retry(true);
        }
        e
    }

    async fn request_body_filter(
        &self,
        _session: &mut Session,
        chunk: &mut Option<bytes::Bytes>,
        _end_of_stream: bool,
        ctx: &mut Ctx,
    ) -> Result<()> {
        let max = ctx.route(&ctx.snapshot).and_then(|r| r.max_body_bytes);
        let len = chunk.as_ref().map_or(0, |c| c.len());
        if body::streamed_too_large(&mut ctx.body_bytes, len, max) {
            let r = pipeline::route::body_too_large(max);
            ctx.decided = (r.layer, r.reason);
            self.count(ctx, r.layer, r.reason);
            tracing::warn!(request_id = %ctx.request_id(), client = %ctx.client, received = ctx.body_bytes, "request body over the route's limit; stopped reading");
            return Error::e_explain(ErrorType::HTTPStatus(r.problem.status), r.problem.detail);
        }
        Ok(())
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        upstream_response.insert_header("X-Request-Id", ctx.request_id.clone())?;
        for (name, value) in ctx.quota_pairs() {
            upstream_response.insert_header(name, value)?;
        }
        Ok(())
    }

    async fn fail_to_proxy(&self, session: &mut Session, e: &Error, ctx: &mut Ctx) -> FailToProxy {
        let (status, detail) = failure_status(e);
        if status > 0 && session.response_written().is_none() {
            if ctx.decided.0 != Layer::Http {
                ctx.decided = (Layer::Upstream, Outcome::Error);
            }
            // Pingora closes the downstream after an error: say so in the response.
            session.set_keepalive(None);
            let p = Problem::status(status, detail);
            let headers = ctx.quota_pairs();
            let _ = send_problem(session, &p, ctx.request_id(), &headers).await;
        }
        FailToProxy {
            error_code: status,
            can_reuse_downstream: false,
        }
    }

    async fn logging(&self, session: &mut Session, _e: Option<&Error>, ctx: &mut Ctx) {
        let status = session
            .response_written()
            .map(|r| r.status.as_u16())
            .unwrap_or(0);
        ctx.slot.take();
        let snap = &ctx.snapshot;
        let route = ctx.route(snap).map(|r| r.id.as_str()).unwrap_or("none");
        let elapsed = ctx.started.elapsed();
        let series = match ctx.route {
            Some(i) => snap.route_series.get(i),
            None => snap.route_series.last(),
        };
        if let Some(series) = series {
            series.observe(status, elapsed.as_secs_f64());
        }
        if snap.config.observability.access_log {
            let req = session.req_header();
            tracing::info!(
                target: crate::observe::access_log::TARGET,
                request_id = %ctx.request_id(),
                method = %req.method,
                path = %req.uri.path(),
                route,
                client = %ctx.client,
                tenant = ctx.tenant.as_deref().unwrap_or("-"),
                tier = ctx.tier_label(),
                layer = ctx.decided.0.as_str(),
                decision = ctx.decided.1.as_str(),
                status,
                duration_ms = elapsed.as_secs_f64() * 1000.0,
            );
        }
    }
}
