//! The Pingora hooks of [`Proxy`]: each hands over to the stage or step that does the work.

use super::ctx::Ctx;
use super::failure::failure_status;
use super::fields;
use super::finish::finish;
use super::forward::{forward_headers, request_id, X_REQUEST_ID};
use super::head::check_h2;
use super::refuse::{answer_now, count, refuse_head};
use super::stages::{self, backend_peer, body_stage};
use super::trace;
use crate::observe::tracing::counted;
use crate::pipeline::{Layer, Outcome};
use crate::snapshot::{App, Snapshot};
use async_trait::async_trait;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use std::sync::Arc;

/// The proxy service.
pub struct Proxy {
    pub app: Arc<App>,
}

impl Proxy {
    /// The stages in order, each after its start is marked for the span; `Ok(true)` when one
    /// answered the request.
    async fn stages(&self, session: &mut Session, ctx: &mut Ctx, snap: &Snapshot) -> Result<bool> {
        trace::stage(ctx, "edge");
        if stages::edge_stage(&self.app, session, ctx, snap).await? {
            return Ok(true);
        }
        trace::stage(ctx, "route");
        if stages::route_stage(session, ctx, snap).await? {
            return Ok(true);
        }
        trace::stage(ctx, "identity");
        if stages::identity_stage(session, ctx, snap).await? {
            return Ok(true);
        }
        trace::stage(ctx, "buffer");
        if stages::buffer_stage(session, ctx, snap).await? {
            return Ok(true);
        }
        trace::stage(ctx, "tenant");
        if stages::tenant_stage(&self.app, session, ctx, snap).await? {
            return Ok(true);
        }
        trace::stage(ctx, "slot");
        stages::slot_stage(session, ctx, snap).await
    }
}

#[async_trait]
impl ProxyHttp for Proxy {
    /// Boxed: Pingora keeps the context inside each request's future, which it builds and then
    /// moves into a box of its own per request (`async_trait`); a pointer there instead of the
    /// whole state makes that copy smaller by the state's size.
    type CTX = Box<Ctx>;

    fn new_ctx(&self) -> Box<Ctx> {
        Box::new(Ctx::new(self.app.snapshot.load_full()))
    }

    /// The stages in order; each answers the request itself when it refuses (`Ok(true)`).
    async fn request_filter(&self, session: &mut Session, ctx: &mut Box<Ctx>) -> Result<bool> {
        // One snapshot reference for all stages (each clone is a shared atomic count).
        let snap = ctx.snapshot.clone();
        (ctx.request_id, ctx.request_id_sent) = request_id(session.req_header());
        ctx.client = stages::client_of(session, &snap);
        trace::start(ctx, session.req_header());
        // HTTP/1 heads were judged by the front end before Pingora parsed them; HTTP/2 heads
        // by the same rules here, before any stage spends a token on them.
        if session.is_http2() {
            if let Some(r) = check_h2(session.req_header(), &snap.config.server.http) {
                return refuse_head(session, ctx, r).await;
            }
        }
        let answered = match trace::traced(ctx) {
            false => self.stages(session, ctx, &snap).await?,
            true => {
                let counted = counted(self.stages(session, ctx, &snap));
                let (answered, redis) = Box::pin(counted).await;
                trace::redis_used(ctx, redis);
                answered?
            }
        };
        if !answered {
            trace::stage(ctx, "upstream");
            forward_headers(session, ctx)?;
            // A body still to stream: each read waits at most `server.body_idle_timeout`.
            let downstream = session.as_downstream_mut();
            if !downstream.is_body_done() {
                downstream.set_read_timeout(Some(snap.config.server.http.body_idle_timeout));
            }
        }
        Ok(answered)
    }

    /// Pingora's hook for the backend request: the span's context goes with it.
    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut Box<Ctx>,
    ) -> Result<()> {
        if let Some(body) = &ctx.body_rewrite {
            upstream_request.insert_header(http::header::CONTENT_LENGTH, body.len())?;
        }
        trace::propagate(ctx, upstream_request)
    }

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        ctx: &mut Box<Ctx>,
    ) -> Result<Box<HttpPeer>> {
        backend_peer(ctx)
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut Box<Ctx>,
        mut e: Box<Error>,
    ) -> Box<Error> {
        // Try the next backend once per backend before giving up.
        ctx.connect_tries += 1;
        let backends = ctx
            .upstream(&ctx.snapshot)
            .map(|u| u.settings.backends.len())
            .unwrap_or(1);
        if ctx.connect_tries < backends {
            e.set_retry(true);
        }
        e
    }

    /// A connection to a backend pinned by its own self-signed certificate is used only when it
    /// presented one of the pins (checked before the request's first byte, on new and reused
    /// connections alike; [`PeerTls::check_connection`](crate::tls::upstream::PeerTls::check_connection)).
    async fn connected_to_upstream(
        &self,
        _session: &mut Session,
        _reused: bool,
        _peer: &HttpPeer,
        #[cfg(unix)] _fd: std::os::unix::io::RawFd,
        #[cfg(windows)] _sock: std::os::windows::io::RawSocket,
        digest: Option<&pingora::protocols::Digest>,
        ctx: &mut Box<Ctx>,
    ) -> Result<()> {
        stages::check_backend_connection(ctx, digest)
    }

    async fn request_body_filter(
        &self,
        session: &mut Session,
        chunk: &mut Option<bytes::Bytes>,
        end_of_stream: bool,
        ctx: &mut Box<Ctx>,
    ) -> Result<()> {
        body_stage(session, ctx, chunk, end_of_stream).await
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut Box<Ctx>,
    ) -> Result<()> {
        for meter in &mut ctx.usage {
            meter.head(
                upstream_response.status.as_u16(),
                &upstream_response.headers,
            );
        }
        ctx.settle.head(upstream_response.status.as_u16()).await;
        // Every rate-limit value is a slice of one shared buffer (one allocation for all).
        let (text, pairs) = ctx.quota_fields().into_parts();
        let text = bytes::Bytes::from(text);
        let preserve_case = ctx.snapshot.config.server.http.preserve_header_case;
        // Room for Pingora's own fields after this hook too (`Connection`, `Date`): the
        // map must have room left at each of its inserts, even one that replaces a value.
        fields::edit_response(upstream_response, preserve_case, 3 + pairs.len(), |resp| {
            resp.insert(X_REQUEST_ID, ctx.request_id.clone())?;
            for (name, span) in pairs {
                resp.insert(fields::name(name)?, fields::shared_value(text.slice(span))?)?;
            }
            Ok(())
        })
    }

    /// The usage meter reads the body as it passes (never holding or changing a byte).
    fn response_body_filter(
        &self,
        _session: &mut Session,
        body: &mut Option<bytes::Bytes>,
        end_of_stream: bool,
        ctx: &mut Box<Ctx>,
    ) -> Result<Option<std::time::Duration>> {
        for meter in &mut ctx.usage {
            meter.body(body.as_deref(), end_of_stream);
        }
        Ok(None)
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut Box<Ctx>,
    ) -> FailToProxy {
        let (status, detail) = failure_status(e);
        // A 4xx of tollgate's own (a body over the limit, a body too slow) is a refusal; the
        // backend's failures are settled by `refund_on` when the request ends.
        // A downstream read timeout (the body stalled while it streamed) is the client's too.
        let refused = matches!(e.etype(), ErrorType::HTTPStatus(400..=499)) || status == 408;
        ctx.release_held(refused);
        if status > 0 && session.response_written().is_none() {
            if status == 408 && ctx.decided.0 != Layer::Http {
                // The body stopped arriving while it streamed (the HTTP/1 read timeout).
                ctx.decided = (Layer::Http, Outcome::BodyTimeout);
                count(ctx, Layer::Http, Outcome::BodyTimeout);
            } else if ctx.decided.0 != Layer::Http {
                ctx.decided = (Layer::Upstream, Outcome::Error);
            }
            let upstream = ctx.route(&ctx.snapshot).map(|r| r.upstream.clone());
            let mut problem = super::failure::upstream_problem(status, detail, upstream.as_deref());
            if ctx.decided == (Layer::Http, Outcome::BodyTimeout) {
                problem = problem.with("reason", serde_json::json!(Outcome::BodyTimeout.as_str()));
            }
            answer_now(session, ctx, &problem, refused).await;
        }
        FailToProxy {
            error_code: status,
            can_reuse_downstream: false,
        }
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut Box<Ctx>) {
        finish(session, e, ctx);
    }
}
