//! The Pingora glue: runs the stages in order and writes their responses. Thin on purpose; the
//! decisions live in `edge`, `identity`, `quota` and `upstream`.
//!
//! Order (docs/DESIGN.md section 1): edge → route → identity → tenant quota → upstream slot →
//! backend. A request rejected at one stage never reaches a later one.

use crate::config::{AuthMode, RouteSettings};
use crate::edge::{self, client_ip, EdgeOutcome};
use crate::http::{body, target};
use crate::identity::{tenant_id, Identity, IdentityError};
use crate::metrics::{status_class, METRICS};
use crate::policy_headers;
use crate::quota::pool_store::pool_headers;
use crate::quota::{QuotaOutcome, TenantQuota};
use crate::response::{self, send_problem, Problem, QuotaHeaders};
use crate::snapshot::{App, Snapshot};
use crate::tls::listener::ClientCert;
use crate::tls::upstream::tls_failure_detail;
use crate::upstream::claimant::claimant_of;
use crate::upstream::slots::{Claimant, SlotGuard, SlotLimits};
use async_trait::async_trait;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use pingora::ErrorType;
use serde_json::json;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Per-request state. Dropped after `logging` on every path, which releases the upstream slot.
pub struct Ctx {
    snapshot: Arc<Snapshot>,
    request_id: String,
    started: Instant,
    client: IpAddr,
    route: Option<usize>,
    identity: Option<Identity>,
    tenant: Option<String>,
    /// Tier whose bucket the tenant stage used (also set for anonymous tenants).
    tier: Option<String>,
    quota_headers: Option<QuotaHeaders>,
    slot: Option<SlotGuard>,
    /// Layer that decided the request's fate and how (for the access log).
    decided: (&'static str, &'static str),
    connect_tries: usize,
    /// Request body bytes received so far (for `routes[].max_body_bytes`).
    body_bytes: u64,
}

impl Ctx {
    fn route<'a>(&self, snap: &'a Snapshot) -> Option<&'a RouteSettings> {
        self.route.map(|i| &snap.config.routes[i])
    }
    fn tier_label(&self) -> &str {
        self.tier
            .as_deref()
            .or_else(|| self.identity.as_ref().and_then(|i| i.tier.as_deref()))
            .unwrap_or("-")
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

/// The proxy service.
pub struct Proxy {
    pub app: Arc<App>,
}

fn body_limit_detail(max: Option<u64>) -> String {
    format!(
        "the request body is larger than this route's limit of {} bytes",
        max.unwrap_or(0)
    )
}

fn unix_now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Proxy {
    /// Writes a problem response and records which layer decided.
    async fn reject(
        &self,
        session: &mut Session,
        ctx: &mut Ctx,
        layer: &'static str,
        outcome: &'static str,
        problem: Problem,
        headers: Vec<(&'static str, String)>,
    ) -> Result<bool> {
        ctx.decided = (layer, outcome);
        METRICS.decision(layer, outcome, ctx.tier_label());
        // A client that went away cannot be answered; that is not our error.
        let _ = send_problem(session, &problem, &ctx.request_id, &headers).await;
        Ok(true)
    }

    /// Answers a request target that cannot be normalised safely: 400, counted, logged.
    async fn refuse_target(
        &self,
        session: &mut Session,
        ctx: &mut Ctx,
        why: target::TargetError,
    ) -> Result<bool> {
        tracing::warn!(
            request_id = %ctx.request_id,
            client = %ctx.client,
            reason = %why.as_str(),
            target = %crate::http::log_escape(session.req_header().raw_path(), 200),
            "request target refused"
        );
        let p = Problem::status(400, why.detail()).with("reason", json!(why.as_str()));
        self.reject(session, ctx, "http", "bad_target", p, vec![])
            .await
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
                    .get_all("x-forwarded-for")
                    .iter()
                    .map(|v| String::from_utf8_lossy(v.as_bytes()))
                    .collect::<Vec<_>>();
                client_ip::client_ip(peer, values.iter().map(|v| v.as_ref()), &e.trusted_proxies)
            }
            _ => client_ip::normalize(peer),
        }
    }

    fn identity_problem(e: &IdentityError) -> (Problem, Vec<(&'static str, String)>, &'static str) {
        let problem = Problem::status(e.status(), e.detail());
        let headers = e
            .www_authenticate()
            .map(|v| vec![("WWW-Authenticate", v.to_string())])
            .unwrap_or_default();
        let outcome = if e.status() == 401 {
            "unauthenticated"
        } else {
            "rejected"
        };
        (problem, headers, outcome)
    }

    /// Tenant stage. Returns `Ok(true)` when it responded.
    async fn tenant_stage(&self, session: &mut Session, ctx: &mut Ctx) -> Result<bool> {
        let snap = ctx.snapshot.clone();
        let Some(quota) = snap.quota.as_ref() else {
            return Ok(false);
        };
        let cost = ctx.route(&snap).map(|r| r.cost).unwrap_or(1);
        let (tenant, tier_name) = match &ctx.identity {
            Some(id) => match &id.tier {
                Some(t) => (id.tenant.clone(), t.clone()),
                None => return Ok(false),
            },
            None if snap.config.tiers.contains_key("anonymous") => {
                let prefix = snap
                    .config
                    .edge
                    .as_ref()
                    .map(|e| e.ipv6_prefix)
                    .unwrap_or(64);
                let key = client_ip::key_of(ctx.client, prefix);
                (
                    tenant_id::anonymous(&key.to_string()),
                    "anonymous".to_string(),
                )
            }
            None => return Ok(false),
        };
        let Some((tier, rate)) = snap.tenant_rate(&tenant, &tier_name) else {
            let p = Problem::status(403, format!("tier \"{tier_name}\" does not exist"));
            return self
                .reject(session, ctx, "identity", "rejected", p, vec![])
                .await;
        };
        ctx.tenant = Some(tenant.clone());
        ctx.tier = Some(tier.name.clone());
        // Multi-region: this region's part of the budget, main limit and calendar quotas alike
        // (docs/DESIGN.md 4c).
        let (rate, regional_policy) = match &snap.region {
            Some(region) => {
                region.record(&tenant, cost);
                let share = region.share(&tenant);
                (share.apply(rate), share.apply_quotas(&tier.policy))
            }
            None => (rate, None),
        };
        let tier_policy = regional_policy.as_ref().unwrap_or(&tier.policy);
        let request = TenantQuota {
            tenant: &tenant,
            policy: &tier.name,
            rate,
            cost,
            on_failure: tier.on_failure,
            tier_policy,
        };
        let outcome = quota.decide(&request).await;
        let bound = snap.config.observability.tenant_metrics;
        match outcome {
            QuotaOutcome::FailedOpen => {
                METRICS.decision("tenant", "failed_open", &tier.name);
                METRICS.tenant_decision(bound, &tenant, "failed_open");
                Ok(false)
            }
            QuotaOutcome::FailedClosed { retry_after_s } => {
                METRICS.tenant_decision(bound, &tenant, "failed_closed");
                let p = Problem::typed(
                    503,
                    response::REDUCED_CAPACITY,
                    "Rate limiter unavailable",
                    format!(
                        "the quota store is unavailable and tier \"{}\" fails closed; retry later",
                        tier.name
                    ),
                );
                let h = vec![("Retry-After", retry_after_s.to_string())];
                self.reject(session, ctx, "tenant", "failed_closed", p, h)
                    .await
            }
            QuotaOutcome::Decided {
                decision,
                rate,
                degraded,
                extras,
            } => {
                let headers = QuotaHeaders {
                    policy_name: tier.name.clone(),
                    rate,
                    decision,
                    degraded,
                    quotas: policy_headers::quota_reports(&tier.name, tier_policy, &extras),
                    listed_before: None,
                };
                if headers.admitted() {
                    if extras.delay_ms > 0 {
                        let waited = policy_headers::wait_for_slot(session, extras.delay_ms).await;
                        if let Err(e) = waited {
                            ctx.decided = ("tenant", "client_left");
                            if let Some(r) = extras.reservation {
                                quota.give_back(&request, &rate, r).await;
                            }
                            return Err(e);
                        }
                    }
                    let outcome = if degraded { "fallback" } else { "admitted" };
                    METRICS.decision("tenant", outcome, &tier.name);
                    METRICS.tenant_decision(bound, &tenant, outcome);
                    if decision.remaining * 5 < rate.burst {
                        METRICS.near_limit.with_label_values(&[&tier.name]).inc();
                    }
                    ctx.quota_headers = Some(headers);
                    return Ok(false);
                }
                if let (Some(pool), false) = (&tier.pool, degraded) {
                    // The tier's burst pool, asked only on this rejection path.
                    if let Ok(d) = quota.decide_pool(&tier.name, &tenant, pool, cost).await {
                        if d.admitted {
                            METRICS.decision("tenant", "pool_admitted", &tier.name);
                            METRICS.tenant_decision(bound, &tenant, "pool_admitted");
                            ctx.quota_headers = Some(pool_headers(&headers, pool, d));
                            return Ok(false);
                        }
                    }
                }
                METRICS.tenant_decision(bound, &tenant, "limited");
                let detail = if decision.admitted {
                    policy_headers::quota_detail(&headers, cost)
                } else if decision.never_admissible() {
                    format!(
                        "this request costs {cost} tokens, more than the {} tokens tier \"{}\" can ever hold",
                        rate.burst, tier.name
                    )
                } else {
                    format!(
                        "tenant quota of tier \"{}\" exhausted: {} of {} tokens left, this request costs {cost}",
                        tier.name, decision.remaining, rate.burst
                    )
                };
                let p = Problem::typed(
                    snap.config.response.status,
                    response::QUOTA_EXCEEDED,
                    "Quota exceeded",
                    detail,
                )
                .with("violated-policies", json!(headers.violated()));
                let h = snap.quota_pairs(&headers);
                self.reject(session, ctx, "tenant", "limited", p, h).await
            }
        }
    }

    /// Upstream slot stage. Returns `Ok(true)` when it responded.
    async fn slot_stage(&self, session: &mut Session, ctx: &mut Ctx) -> Result<bool> {
        let snap = ctx.snapshot.clone();
        let Some(route) = ctx.route(&snap) else {
            return Ok(false);
        };
        let Some(upstream) = snap.upstreams.get(&route.upstream) else {
            return Ok(false);
        };
        let Some(slots) = &upstream.slots else {
            return Ok(false);
        };
        let queue = upstream.settings.queue.as_ref();
        let (tenant, weight) = claimant_of(
            &snap.config,
            ctx.tenant
                .as_deref()
                .or(ctx.identity.as_ref().map(|i| i.tenant.as_str())),
            ctx.tier
                .as_deref()
                .or(ctx.identity.as_ref().and_then(|i| i.tier.as_deref())),
            ctx.client,
        );
        let limits = SlotLimits {
            queue,
            per_tenant: upstream.settings.max_concurrency_per_tenant,
        };
        let wait = slots.acquire(
            Claimant {
                tenant: &tenant,
                weight,
            },
            limits,
        );
        tokio::pin!(wait);
        // While queued, notice a client that goes away (only when no request body is pending,
        // so no body bytes are consumed here) and give its place up at once.
        let mut probe = queue.is_some() && session.as_downstream_mut().is_body_done();
        let acquired = loop {
            tokio::select! {
                r = &mut wait => break r,
                read = session.as_downstream_mut().read_body_or_idle(true), if probe => {
                    if read.is_err() {
                        return Error::e_explain(ErrorType::ConnectionClosed, "client left while queued for an upstream slot")
                            .map_err(|e| e.into_down());
                    }
                    probe = false;
                }
            }
        };
        match acquired {
            Ok(guard) => {
                METRICS.decision("upstream", "admitted", ctx.tier_label());
                ctx.slot = Some(guard);
                Ok(false)
            }
            Err(why) => {
                METRICS
                    .upstream_rejections
                    .with_label_values(&[&upstream.settings.name, why.as_str()])
                    .inc();
                let spent = if ctx.quota_headers.is_some() {
                    " The tenant token spent on this request is not refunded."
                } else {
                    ""
                };
                let p = Problem::typed(
                    503,
                    response::REDUCED_CAPACITY,
                    "Upstream at capacity",
                    crate::upstream::slots::rejection_detail(
                        why,
                        &upstream.settings,
                        &tenant,
                        spent,
                    ),
                )
                .with("capacity-scope", json!(why.scope()))
                .with("reason", json!(why.as_str()));
                let mut h = vec![("Retry-After", upstream.settings.retry_after_s.to_string())];
                if let Some(q) = &ctx.quota_headers {
                    h.extend(snap.quota_pairs(q));
                }
                self.reject(session, ctx, "upstream", "limited", p, h).await
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
            request_id: String::new(),
            started: Instant::now(),
            client: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            route: None,
            identity: None,
            tenant: None,
            tier: None,
            quota_headers: None,
            slot: None,
            decided: ("upstream", "admitted"),
            connect_tries: 0,
            body_bytes: 0,
        }
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> Result<bool> {
        let snap = ctx.snapshot.clone();
        ctx.request_id = session
            .req_header()
            .headers
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty() && v.len() <= 200)
            .map(str::to_string)
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        ctx.client = self.client_of(session, &snap);

        // 1. Edge.
        if let Some(edge_settings) = &snap.config.edge {
            let now = self.app.now_ms();
            let buckets = &self.app.edge_buckets;
            let cells = || self.app.edge_cells(edge_settings.max_clients);
            match edge::check_with_algorithm(edge_settings, buckets, cells, ctx.client, now) {
                EdgeOutcome::Skipped => {}
                EdgeOutcome::Admitted(_) => METRICS.decision("edge", "admitted", "-"),
                EdgeOutcome::Limited(d) => {
                    let p = Problem::typed(
                        snap.config.response.status,
                        response::QUOTA_EXCEEDED,
                        "Too many requests",
                        format!(
                            "per-client limit of the edge policy exceeded ({} requests burst)",
                            edge_settings.rate.burst
                        ),
                    )
                    .with("violated-policies", json!(["edge"]));
                    let h = d
                        .retry_after_s()
                        .map(|s| vec![("Retry-After", s.to_string())])
                        .unwrap_or_default();
                    return self.reject(session, ctx, "edge", "limited", p, h).await;
                }
            }
        }

        // 2. Request target (normalised or refused) and route.
        let target = match target::normalise_target(session.req_header().raw_path()) {
            Ok(t) => t,
            Err(why) => return self.refuse_target(session, ctx, why).await,
        };
        let host = crate::http::routing_host(session.req_header(), &target);
        if crate::http::apply_target(session.req_header_mut(), &target).is_err() {
            return self
                .refuse_target(session, ctx, target::TargetError::UnsupportedForm)
                .await;
        }
        let path = target.path;
        let Some(index) = snap.router.find(&host, &path) else {
            let p = Problem::status(404, "no route matches this host and path");
            return self
                .reject(session, ctx, "route", "not_found", p, vec![])
                .await;
        };
        ctx.route = Some(index);
        let auth = snap.config.routes[index].auth;
        let max_body = snap.config.routes[index].max_body_bytes;
        let declared = session.req_header().headers.get("content-length");
        if body::declared_too_large(declared.map(|v| v.as_bytes()), max_body) {
            let p = Problem::status(413, body_limit_detail(max_body));
            return self
                .reject(session, ctx, "http", "body_too_large", p, vec![])
                .await;
        }

        // 3. Identity (a verified client certificate first, when `identity.mtls` is on).
        if auth != AuthMode::None {
            let from_cert = snap
                .config
                .identity
                .mtls
                .and_then(|_| client_cert(session))
                .map(|cert| snap.auth.identify_client_cert(&cert.subject_cn));
            let identified = match from_cert {
                Some(result) => result.map(Some),
                None => snap
                    .auth
                    .authenticate(&session.req_header().headers, unix_now_s()),
            };
            match identified {
                Ok(Some(id)) => {
                    METRICS.decision("identity", "admitted", id.tier.as_deref().unwrap_or("-"));
                    ctx.identity = Some(id);
                }
                Ok(None) if auth == AuthMode::Required => {
                    let (p, h, o) = Self::identity_problem(&IdentityError::Missing);
                    return self.reject(session, ctx, "identity", o, p, h).await;
                }
                Ok(None) => {}
                Err(e) => {
                    let (p, h, o) = Self::identity_problem(&e);
                    return self.reject(session, ctx, "identity", o, p, h).await;
                }
            }
        }

        // 4. Tenant quota, 5. upstream slot.
        if self.tenant_stage(session, ctx).await? {
            return Ok(true);
        }
        self.slot_stage(session, ctx).await
    }

    async fn upstream_peer(&self, _session: &mut Session, ctx: &mut Ctx) -> Result<Box<HttpPeer>> {
        let snap = ctx.snapshot.clone();
        let upstream = ctx
            .route(&snap)
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
            ctx.decided = ("http", "body_too_large");
            METRICS.decision("http", "body_too_large", ctx.tier_label());
            tracing::warn!(request_id = %ctx.request_id, client = %ctx.client, received = ctx.body_bytes, "request body over the route's limit; stopped reading");
            return Error::e_explain(ErrorType::HTTPStatus(413), body_limit_detail(max));
        }
        Ok(())
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        let identity = &ctx.snapshot.config.identity;
        upstream_request.remove_header(identity.tenant_header.as_str());
        upstream_request.remove_header(identity.tier_header.as_str());
        if let Some(id) = &ctx.identity {
            if !identity.forward_credentials {
                match (id.method, &identity.api_keys) {
                    ("jwt", _) => drop(upstream_request.remove_header("authorization")),
                    ("api_key", Some(keys)) => {
                        drop(upstream_request.remove_header(keys.header.as_str()))
                    }
                    _ => {}
                }
            }
            // Percent-encoded UTF-8 (README "Clocks, tenant ids and config bounds").
            let tenant = tenant_id::encode(&id.tenant);
            upstream_request.insert_header(identity.tenant_header.clone(), tenant.as_ref())?;
            if let Some(tier) = &id.tier {
                upstream_request.insert_header(identity.tier_header.clone(), tier.as_str())?;
            }
        }
        let peer = session
            .client_addr()
            .and_then(|a| a.as_inet())
            .map(|a| client_ip::normalize(a.ip()).to_string())
            .unwrap_or_default();
        let xff = match upstream_request.headers.get("x-forwarded-for") {
            Some(v) => format!("{}, {peer}", String::from_utf8_lossy(v.as_bytes())),
            None => peer,
        };
        upstream_request.insert_header("X-Forwarded-For", xff)?;
        let proto = if is_tls(session) { "https" } else { "http" };
        upstream_request.insert_header("X-Forwarded-Proto", proto)?;
        upstream_request.insert_header("X-Request-Id", ctx.request_id.as_str())?;
        Ok(())
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        upstream_response.insert_header("X-Request-Id", ctx.request_id.as_str())?;
        if let Some(q) = &ctx.quota_headers {
            for (name, value) in ctx.snapshot.quota_pairs(q) {
                upstream_response.insert_header(name, value)?;
            }
        }
        Ok(())
    }

    async fn fail_to_proxy(&self, session: &mut Session, e: &Error, ctx: &mut Ctx) -> FailToProxy {
        use ErrorType::*;
        let (status, detail) = match e.etype() {
            HTTPStatus(code) => (
                *code,
                e.context
                    .as_ref()
                    .map(|c| c.as_str().to_string())
                    .unwrap_or_default(),
            ),
            ConnectTimedout | ReadTimedout | WriteTimedout | TLSHandshakeTimedout => {
                (504, "the upstream did not answer in time".to_string())
            }
            _ if e.esource() == &ErrorSource::Upstream && tls_failure_detail(e).is_some() => {
                (502, tls_failure_detail(e).unwrap_or_default())
            }
            _ => match e.esource() {
                ErrorSource::Upstream => (
                    502,
                    "the upstream could not be reached or failed".to_string(),
                ),
                ErrorSource::Downstream => match e.etype() {
                    WriteError | ReadError | ConnectionClosed => (0, String::new()),
                    _ => (400, "malformed request".to_string()),
                },
                _ => (502, "the request could not be proxied".to_string()),
            },
        };
        let status = if e.esource() == &ErrorSource::Upstream
            && matches!(
                e.etype(),
                ConnectRefused | ConnectNoRoute | ConnectError | ConnectProxyFailure
            ) {
            502
        } else {
            status
        };
        if status > 0 && session.response_written().is_none() {
            if ctx.decided.0 != "http" {
                ctx.decided = ("upstream", "error");
            }
            // Pingora closes the downstream after an error: say so in the response.
            session.set_keepalive(None);
            let p = Problem::status(status, detail);
            let headers = ctx
                .quota_headers
                .as_ref()
                .map(|q| ctx.snapshot.quota_pairs(q))
                .unwrap_or_default();
            let _ = send_problem(session, &p, &ctx.request_id, &headers).await;
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
        let class = if status == 0 {
            "none"
        } else {
            status_class(status)
        };
        METRICS.requests.with_label_values(&[route, class]).inc();
        let elapsed = ctx.started.elapsed();
        METRICS
            .request_duration
            .with_label_values(&[route])
            .observe(elapsed.as_secs_f64());
        if snap.config.observability.access_log {
            let req = session.req_header();
            tracing::info!(
                target: crate::access_log::TARGET,
                request_id = %ctx.request_id,
                method = %req.method,
                path = %req.uri.path(),
                route,
                client = %ctx.client,
                tenant = ctx.tenant.as_deref().unwrap_or("-"),
                tier = ctx.tier_label(),
                layer = ctx.decided.0,
                decision = ctx.decided.1,
                status,
                duration_ms = elapsed.as_secs_f64() * 1000.0,
            );
        }
    }
}
