//! The rate limit service's gRPC listener (`decision.grpc.listen`): plaintext HTTP/2 served by
//! hyper with tollgate's own bounds, one route, `ShouldRateLimit`, through tonic's unary
//! handler and prost codec.
//!
//! Bounds (a client cannot make it hold more): [`MAX_CONNECTIONS`] connections (more are
//! closed at accept), [`MAX_STREAMS`] concurrent streams per connection (more are refused by
//! HTTP/2 with `REFUSED_STREAM`, which gRPC clients retry or report as UNAVAILABLE), request
//! messages of at most [`MAX_MESSAGE_BYTES`] (larger: `RESOURCE_EXHAUSTED`), header lists of at
//! most 16 KiB and flow-control windows of 64 KiB per stream and 1 MiB per connection.

use super::rls::{RateLimitRequest, RateLimitResponse, SHOULD_RATE_LIMIT};
use super::trace::{self, Face};
use crate::observe::tracing::RedisUse;
use crate::snapshot::App;
use async_trait::async_trait;
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use tonic::server::{Grpc, UnaryService};
use tonic::Status;
use tonic_prost::ProstCodec;

/// Most connections served at once.
pub const MAX_CONNECTIONS: usize = 4096;
/// Most concurrent streams (calls) on one connection.
pub const MAX_STREAMS: u32 = 128;
/// Largest request message, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// The gRPC decision service.
pub struct GrpcService {
    pub app: Arc<App>,
    pub listen: SocketAddr,
}

/// `ShouldRateLimit` as tonic's unary handler calls it, for one call: its span (when traced)
/// and caller.
struct Rls {
    app: Arc<App>,
    trace: Option<trace::CallTrace>,
    facts: trace::CallFacts,
}

type Answer = Result<tonic::Response<RateLimitResponse>, Status>;

impl UnaryService<RateLimitRequest> for &mut Rls {
    type Response = RateLimitResponse;
    type Future = Pin<Box<dyn Future<Output = Answer> + Send>>;

    fn call(&mut self, request: tonic::Request<RateLimitRequest>) -> Self::Future {
        let app = self.app.clone();
        let span = self.trace.take();
        let mut facts = std::mem::take(&mut self.facts);
        Box::pin(async move {
            let req = request.into_inner();
            let decided = trace::run(&span, super::should_rate_limit(&app, &req));
            let (answer, redis) = decided.await;
            if span.is_some() {
                facts.domain = Some(req.domain);
                if let Ok(c) = &answer {
                    facts.decision = Some(c.outcome);
                    facts.policy = c.policy.clone();
                }
                let code = answer.as_ref().map_or_else(|s| s.code() as i32, |_| 0);
                trace::finish(span, Face::Grpc { code }, &facts, redis);
            }
            answer.map(|c| tonic::Response::new(c.response))
        })
    }
}

/// Answers one HTTP/2 request: `ShouldRateLimit`, or `UNIMPLEMENTED` for any other path.
async fn serve(
    app: Arc<App>,
    peer: IpAddr,
    req: http::Request<Incoming>,
) -> Result<http::Response<tonic::body::Body>, Infallible> {
    if req.uri().path() != SHOULD_RATE_LIMIT {
        let what = format!("{} is not served here", req.uri().path());
        return Ok(Status::unimplemented(what).into_http());
    }
    if let Some(refusal) = not_grpc(&req) {
        return Ok(refusal);
    }
    let trace = trace::start(req.headers());
    let facts = match trace {
        Some(_) => trace::CallFacts {
            client: Some(peer),
            request_id: trace::request_id(req.headers()),
            ..Default::default()
        },
        None => trace::CallFacts::default(),
    };
    let mut grpc = Grpc::new(ProstCodec::<RateLimitResponse, RateLimitRequest>::default())
        .max_decoding_message_size(MAX_MESSAGE_BYTES);
    let mut rls = Rls { app, trace, facts };
    let reply = grpc.unary(&mut rls, req).await;
    // A call refused before the handler ran (malformed message, too large): its span ends here.
    if rls.trace.is_some() {
        let code = reply
            .headers()
            .get("grpc-status")
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(2);
        trace::finish(
            rls.trace.take(),
            Face::Grpc { code },
            &rls.facts,
            RedisUse::default(),
        );
    }
    Ok(reply)
}

/// An HTTP answer for a request that is not a gRPC call, as gRPC over HTTP/2 says
/// (PROTOCOL-HTTP2.md): 405 with `Allow: POST` for another method, 415 when the content-type
/// is not `application/grpc` (or `application/grpc+...`); `None` for a gRPC call.
fn not_grpc(req: &http::Request<Incoming>) -> Option<http::Response<tonic::body::Body>> {
    let grpc = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct == "application/grpc" || ct.starts_with("application/grpc+"));
    let status = if req.method() != http::Method::POST {
        http::StatusCode::METHOD_NOT_ALLOWED
    } else if !grpc {
        http::StatusCode::UNSUPPORTED_MEDIA_TYPE
    } else {
        return None;
    };
    let mut answer = http::Response::new(tonic::body::Body::empty());
    *answer.status_mut() = status;
    if status == http::StatusCode::METHOD_NOT_ALLOWED {
        answer
            .headers_mut()
            .insert(http::header::ALLOW, http::HeaderValue::from_static("POST"));
    }
    Some(answer)
}

/// The HTTP/2 settings of every connection (see the module's bounds).
fn builder() -> http2::Builder<TokioExecutor> {
    let mut b = http2::Builder::new(TokioExecutor::new());
    b.timer(TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(16 * 1024)
        .initial_stream_window_size(64 * 1024)
        .initial_connection_window_size(1024 * 1024)
        .max_send_buf_size(64 * 1024)
        .max_pending_accept_reset_streams(64)
        .max_local_error_reset_streams(Some(256))
        .keep_alive_interval(Some(std::time::Duration::from_secs(30)))
        .keep_alive_timeout(std::time::Duration::from_secs(20));
    b
}

#[async_trait]
impl BackgroundService for GrpcService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let listener = match tokio::net::TcpListener::bind(self.listen).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(addr = %self.listen, error = %e, "decision gRPC listener failed to bind");
                return;
            }
        };
        tracing::info!(addr = %self.listen, "decision gRPC listener ready");
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        let builder = Arc::new(builder());
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, peer)) = accepted else { continue };
                    let Ok(slot) = slots.clone().try_acquire_owned() else {
                        tracing::warn!(max = MAX_CONNECTIONS, "decision gRPC connection refused: too many connections");
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let app = self.app.clone();
                    let builder = builder.clone();
                    tokio::spawn(async move {
                        let peer = peer.ip();
                        let svc = hyper::service::service_fn(move |req| serve(app.clone(), peer, req));
                        if let Err(e) = builder.serve_connection(TokioIo::new(stream), svc).await {
                            tracing::debug!(error = %e, "decision gRPC connection ended");
                        }
                        drop(slot);
                    });
                }
                _ = shutdown.changed() => break,
            }
        }
    }
}
