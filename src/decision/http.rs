//! The decision service's HTTP face (`decision.http.listen`): `POST /v1/check` and
//! `POST /v1/report`, JSON over plaintext HTTP/1.1 served by hyper (the gRPC listener's stack),
//! for callers that are not proxies (docs/decision-service.md "Workers: the HTTP check").
//!
//! Thin like [`grpc`](super::grpc): the Bearer token (`decision.http.token_env`, compared in
//! constant time as the admin API's), the body read up to [`MAX_BODY_BYTES`] and parsed
//! ([`json::parse`]), the shared decision ([`check`](super::check), [`report`](super::report)),
//! the answer written ([`json::check_answer`]). Errors are RFC 9457 problem+json: 400 naming
//! the field, 401 without or with a wrong token (before the body counts), 404 for another
//! path or while the token variable is unset, 405 for another method, 413 for a body over the
//! limit, 503 when the quota store cannot answer what it must.
//!
//! A refused check is answered **429** with the decision as JSON and `Retry-After`; an admitted
//! one 200. Both carry the draft-11 `RateLimit-Policy` / `RateLimit` fields as headers too.
//! At most [`MAX_CONNECTIONS`] connections are served at once (more are closed at accept).

use super::json;
use super::trace::{self, Face};
use crate::config::DecisionFailure;
use crate::observe::labels::Outcome;
use crate::response::Problem;
use crate::snapshot::App;
use async_trait::async_trait;
use bytes::Bytes;
use http::Method;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Most connections served at once.
pub const MAX_CONNECTIONS: usize = 4096;
/// Largest request body, in bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The HTTP decision service.
pub struct HttpService {
    pub app: Arc<App>,
    pub listen: SocketAddr,
}

/// Which operation a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operation {
    Check,
    Report,
}

/// Answers one request from `peer` (see the module docs), in a server span when traced
/// ([`trace`]: check and report, not a refused path).
pub async fn serve(app: &App, peer: IpAddr, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = match req.uri().path() {
        "/v1/check" => "/v1/check",
        "/v1/report" => "/v1/report",
        _ => return answer(app, req, &mut trace::CallFacts::default()).await,
    };
    let span = trace::start(req.headers());
    if span.is_none() {
        return answer(app, req, &mut trace::CallFacts::default()).await;
    }
    let mut facts = trace::CallFacts {
        client: Some(peer),
        request_id: trace::request_id(req.headers()),
        ..Default::default()
    };
    let (reply, redis) = trace::run(&span, answer(app, req, &mut facts)).await;
    let status = reply.status().as_u16();
    trace::finish(span, Face::Http { path, status }, &facts, redis);
    reply
}

/// Answers one request; what it decided goes into `facts`.
async fn answer(
    app: &App,
    req: Request<Incoming>,
    facts: &mut trace::CallFacts,
) -> Response<Full<Bytes>> {
    let op = match req.uri().path() {
        "/v1/check" => Operation::Check,
        "/v1/report" => Operation::Report,
        other => {
            let p = Problem::status(
                404,
                format!("{other} is not served here (POST /v1/check, POST /v1/report)"),
            );
            return problem_reply(&p, &[]);
        }
    };
    if req.method() != Method::POST {
        let p = Problem::status(405, "this resource accepts POST only");
        return problem_reply(&p, &[("Allow", "POST")]);
    }
    let (parts, body) = req.into_parts();
    let admitted = admit(app, &parts.headers);
    // Read (up to the limit) before any answer, so the client reads it rather than a reset.
    let body = Limited::new(body, MAX_BODY_BYTES).collect().await;
    if let Err(reply) = admitted {
        return reply;
    }
    let body = match body {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            let p = Problem::status(
                413,
                format!("request bodies are limited to {MAX_BODY_BYTES} bytes"),
            );
            return problem_reply(&p, &[]);
        }
    };
    let (call, dry_run) = match json::parse(&body) {
        Ok(parsed) => parsed,
        Err(why) => return problem_reply(&Problem::status(400, why), &[]),
    };
    facts.domain = Some(call.domain.clone());
    match op {
        Operation::Check => {
            // Boxed: the decision's Redis futures are deep (see `pipeline::tenant::run`).
            match Box::pin(super::check(app, &call, DecisionFailure::Rules, dry_run)).await {
                Ok(checked) => {
                    facts.decision = Some(checked.outcome);
                    facts.policy = checked.policy.clone();
                    check_reply(&checked, dry_run)
                }
                Err(status) => problem_reply(&status_problem(&status), &[]),
            }
        }
        Operation::Report => match Box::pin(super::report(app, &call)).await {
            Ok(settled) => {
                // A report is never refused: it debits, into debt if need be.
                facts.decision = Some(Outcome::Admitted);
                json_reply(200, &json::report_answer(&settled))
            }
            Err(p) => problem_reply(&p, &[]),
        },
    }
}

/// A JSON answer.
fn json_reply(status: u16, body: &serde_json::Value) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("Content-Type", "application/json")
        .header("Cache-Control", "no-store")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap_or_default()
}

/// An RFC 9457 problem+json answer with `headers`.
fn problem_reply(p: &Problem, headers: &[(&str, &str)]) -> Response<Full<Bytes>> {
    let mut b = Response::builder()
        .status(p.status)
        .header("Content-Type", "application/problem+json")
        .header("Cache-Control", "no-store");
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let id = crate::http::request_id::generate();
    b.body(Full::new(p.to_body(&id))).unwrap_or_default()
}

/// 200 (allowed) or 429 (refused, with `Retry-After`), the decision's header fields as headers.
fn check_reply(checked: &super::Checked, dry_run: bool) -> Response<Full<Bytes>> {
    let body = json::check_answer(checked, dry_run);
    let allowed = body["allowed"].as_bool().unwrap_or(false);
    let mut reply = json_reply(if allowed { 200 } else { 429 }, &body);
    let headers = reply.headers_mut();
    for h in &checked.response.response_headers_to_add {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(h.key.as_bytes()),
            http::HeaderValue::from_str(&h.value),
        ) {
            headers.append(name, value);
        }
    }
    if let (Some(s), false) = (
        json::retry_after(checked),
        headers.contains_key("retry-after"),
    ) {
        headers.insert(http::header::RETRY_AFTER, s.into());
    }
    reply
}

/// A gRPC status of the shared decision as a problem: `INVALID_ARGUMENT` 400, else 503.
fn status_problem(s: &tonic::Status) -> Problem {
    let code = match s.code() {
        tonic::Code::InvalidArgument => 400,
        _ => 503,
    };
    Problem::status(code, s.message())
}

/// `Ok` when the API is on and `headers` carry its token; else the 404 (token variable unset
/// or empty) or 401 (with `WWW-Authenticate`) reply.
#[allow(clippy::result_large_err)]
fn admit(app: &App, headers: &http::HeaderMap) -> Result<(), Response<Full<Bytes>>> {
    let snap = app.snapshot.load();
    let Some(token) = &snap.decision_token else {
        let p = Problem::status(404, "the decision HTTP API is off: the variable decision.http.token_env names is unset or empty");
        return Err(problem_reply(&p, &[]));
    };
    let authorization = headers
        .get(http::header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    token.check(authorization).map_err(|denied| {
        let p = Problem::status(
            401,
            "this API needs the decision Bearer token (decision.http.token_env)",
        );
        problem_reply(
            &p,
            &[("WWW-Authenticate", denied.www_authenticate_decision())],
        )
    })
}

#[async_trait]
impl BackgroundService for HttpService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let listener = match tokio::net::TcpListener::bind(self.listen).await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(addr = %self.listen, error = %e, "decision HTTP listener failed to bind");
                return;
            }
        };
        tracing::info!(addr = %self.listen, "decision HTTP listener ready");
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        loop {
            tokio::select! {
                accepted = listener.accept() => {
                    let Ok((stream, peer)) = accepted else { continue };
                    let Ok(slot) = slots.clone().try_acquire_owned() else {
                        tracing::warn!(max = MAX_CONNECTIONS, "decision HTTP connection refused: too many connections");
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    let app = self.app.clone();
                    tokio::spawn(async move {
                        let peer = peer.ip();
                        let svc = hyper::service::service_fn(move |req| {
                            let app = app.clone();
                            async move { Ok::<_, Infallible>(serve(&app, peer, req).await) }
                        });
                        let conn = http1::Builder::new()
                            .timer(TokioTimer::new())
                            .header_read_timeout(Duration::from_secs(10))
                            .max_buf_size(64 * 1024)
                            .serve_connection(TokioIo::new(stream), svc);
                        if let Err(e) = conn.await {
                            tracing::debug!(error = %e, "decision HTTP connection ended");
                        }
                        drop(slot);
                    });
                }
                _ = shutdown.changed() => break,
            }
        }
    }
}
