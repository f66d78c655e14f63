//! `tollgate-echo`: the small, real HTTP/1.1 backend used by the README demo, the integration tests
//! and the benchmark.
//!
//! ```text
//! tollgate-echo --listen 127.0.0.1:9001 [--name a] [--threads N] [--tls-cert F --tls-key F]
//! ```
//!
//! With `--tls-cert` and `--tls-key` (PEM chain and key) it speaks HTTPS (TLS 1.2/1.3, rustls)
//! instead of plain HTTP on the same port; everything else is identical.
//!
//! Once bound it prints exactly one line, `listening on <addr>`, to stdout (with `--listen
//! 127.0.0.1:0` the line carries the port the kernel chose) and then logs nothing per request.
//! Connections are kept alive (HTTP/1.1, hyper 1) and request bodies are streamed, so it is cheap
//! enough to sit behind the gateway in a load test.
//!
//! # Any path
//!
//! The whole request body is read (streamed, only its length is kept unless `echo=1`), then the
//! answer is `200 application/json`:
//!
//! ```json
//! {"name":"a","method":"GET","path":"/x","query":"a=1","headers":{"host":"…"},"body_len":0}
//! ```
//!
//! `query` is the raw query string (`""` when absent); header names are lowercase and repeated
//! headers are joined with `", "`. Query parameters change the answer and can be combined:
//!
//! | parameter    | effect                                                                        |
//! |--------------|-------------------------------------------------------------------------------|
//! | `delay_ms=N` | sleep N ms (after reading the body) before answering; counted as in flight    |
//! | `status=N`   | answer with status N instead of 200                                           |
//! | `size=N`     | answer with an N-byte `application/octet-stream` body instead of JSON         |
//! | `echo=1`     | answer with the request body bytes unchanged (wins over `size`)               |
//!
//! The `size=N` body is the repeating 61-byte [`PATTERN`]: byte `i` is `PATTERN[i % 61]` (a prime
//! period, so a dropped or duplicated block of any power-of-two size is visible to a comparison).
//!
//! # OpenAI-compatible mode
//!
//! `POST /v1/chat/completions` answers like an OpenAI chat completion, as JSON or (`"stream":
//! true`) as Server-Sent Events, stating a configurable usage (`--usage`, or the request header
//! `x-echo-usage`); see `tollgate-echo/openai.rs` for its parameters.
//!
//! # Control endpoints (never counted)
//!
//! - `GET /healthz` → `200 ok`, or `503 unhealthy` after `POST /__health?fail=1` (and 200 again
//!   after `POST /__health?fail=0`).
//! - `GET /__stats` → `{"requests": N, "in_flight": N, "peak_in_flight": N}`: every request except
//!   the four control paths. `in_flight` is decremented on every path, including a client that
//!   disconnects in the middle of a `delay_ms` sleep (a drop guard).
//! - `POST /__reset` → zeroes `requests` and sets `peak_in_flight` to the current `in_flight`
//!   (which is a live gauge and therefore not zeroed: requests still running will decrement it).

use bytes::Bytes;
use clap::Parser;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpListener;

#[path = "tollgate-echo/openai.rs"]
mod openai;

/// The repeating body of `size=N` answers (61 bytes, a prime period).
pub const PATTERN: &[u8; 61] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXY";

/// Number of whole periods in one static chunk (61 KiB) so that chunks join seamlessly.
const CHUNK_LEN: usize = PATTERN.len() * 1024;

/// The static chunk every `size=N` body is sliced from: no allocation per request.
static CHUNK: [u8; CHUNK_LEN] = {
    let mut buf = [0u8; CHUNK_LEN];
    let mut i = 0;
    while i < CHUNK_LEN {
        buf[i] = PATTERN[i % PATTERN.len()];
        i += 1;
    }
    buf
};

#[derive(Parser, Debug)]
#[command(
    name = "tollgate-echo",
    version,
    about = "Echo HTTP backend for tollgate demos and tests"
)]
struct Args {
    /// Address to listen on; port 0 picks a free port (printed on the first stdout line).
    #[arg(long, default_value = "127.0.0.1:9001")]
    listen: SocketAddr,
    /// Name reported in every JSON answer (to tell backends apart).
    #[arg(long, default_value = "echo")]
    name: String,
    /// Runtime worker threads; 0 means one per CPU.
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// PEM certificate chain: serve HTTPS (needs --tls-key).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<String>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<String>,
    /// `usage.total_tokens` stated by `/v1/chat/completions` (unless `x-echo-usage` says).
    #[arg(long, default_value = "20")]
    usage: String,
    /// Gzip `/v1/chat/completions` answers for requests whose `Accept-Encoding` lists `gzip`.
    #[arg(long)]
    gzip: bool,
}

/// The TLS acceptor for `--tls-cert`/`--tls-key`; exits with a message on a bad file.
fn tls_acceptor(cert: &str, key: &str) -> tokio_rustls::TlsAcceptor {
    let fail = |what: String| -> ! {
        eprintln!("tollgate-echo: {what}");
        std::process::exit(1);
    };
    let certs = tollgate::tls::pem::read_certs(cert).unwrap_or_else(|e| fail(e));
    let key = tollgate::tls::pem::read_key(key).unwrap_or_else(|e| fail(e));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS12, &rustls::version::TLS13])
    .unwrap_or_else(|e| fail(e.to_string()))
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap_or_else(|e| fail(format!("--tls-cert/--tls-key: {e}")));
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// Shared counters and the health switch.
struct State {
    name: String,
    requests: AtomicU64,
    in_flight: AtomicI64,
    peak_in_flight: AtomicI64,
    unhealthy: AtomicBool,
    /// `--usage`: the usage `/v1/chat/completions` states by default.
    usage: String,
    /// `--gzip`.
    gzip: bool,
}

/// Holds one unit of `in_flight` and gives it back when dropped, whichever way the request ends.
struct InFlight<'a>(&'a State);

impl<'a> InFlight<'a> {
    fn enter(state: &'a State) -> Self {
        state.requests.fetch_add(1, Ordering::Relaxed);
        let now = state.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        state.peak_in_flight.fetch_max(now, Ordering::AcqRel);
        InFlight(state)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Response body: either a list of byte chunks (JSON, echo) or `n` bytes of [`PATTERN`].
enum EchoBody {
    Chunks {
        chunks: VecDeque<Bytes>,
        remaining: u64,
    },
    Pattern {
        offset: usize,
        remaining: u64,
    },
    /// Chunks sent by a task as they come (an SSE stream); ends when the sender is dropped.
    Channel(tokio::sync::mpsc::Receiver<Bytes>),
}

impl EchoBody {
    fn full(bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        let remaining = bytes.len() as u64;
        let mut chunks = VecDeque::with_capacity(1);
        if !bytes.is_empty() {
            chunks.push_back(bytes);
        }
        EchoBody::Chunks { chunks, remaining }
    }
}

impl Body for EchoBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            EchoBody::Channel(rx) => rx.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b)))),
            EchoBody::Chunks { chunks, remaining } => {
                Poll::Ready(chunks.pop_front().map(|chunk| {
                    *remaining -= chunk.len() as u64;
                    Ok(Frame::data(chunk))
                }))
            }
            EchoBody::Pattern { offset, remaining } => {
                if *remaining == 0 {
                    return Poll::Ready(None);
                }
                let n =
                    (CHUNK_LEN - *offset).min(usize::try_from(*remaining).unwrap_or(usize::MAX));
                let chunk = Bytes::from_static(&CHUNK[*offset..*offset + n]);
                *remaining -= n as u64;
                *offset = (*offset + n) % CHUNK_LEN;
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            EchoBody::Channel(_) => false,
            EchoBody::Chunks { remaining, .. } | EchoBody::Pattern { remaining, .. } => {
                *remaining == 0
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            EchoBody::Channel(_) => SizeHint::default(),
            EchoBody::Chunks { remaining, .. } | EchoBody::Pattern { remaining, .. } => {
                SizeHint::with_exact(*remaining)
            }
        }
    }
}

/// The query parameters this server understands.
#[derive(Default)]
struct Params {
    delay_ms: u64,
    status: Option<u16>,
    size: Option<u64>,
    echo: bool,
    fail: Option<bool>,
}

fn parse_params(query: &str) -> Result<Params, String> {
    let mut p = Params::default();
    for pair in query.split('&').filter(|s| !s.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let num = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{key}: not a non-negative integer: {v:?}"))
        };
        match key {
            "delay_ms" => p.delay_ms = num(value)?,
            "status" => {
                let n = num(value)?;
                if !(100..=999).contains(&n) {
                    return Err(format!("status: out of range: {n}"));
                }
                p.status = Some(n as u16);
            }
            "size" => p.size = Some(num(value)?),
            "echo" => p.echo = !matches!(value, "0" | "false"),
            "fail" => p.fail = Some(!matches!(value, "0" | "false")),
            _ => {}
        }
    }
    Ok(p)
}

fn text(status: StatusCode, body: &'static str) -> Response<EchoBody> {
    let mut resp = Response::new(EchoBody::full(Bytes::from_static(body.as_bytes())));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

fn json(status: StatusCode, value: &serde_json::Value) -> Response<EchoBody> {
    let body = serde_json::to_vec(value).expect("JSON values always serialize");
    let mut resp = Response::new(EchoBody::full(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn headers_json(headers: &HeaderMap) -> serde_json::Value {
    let mut map = serde_json::Map::with_capacity(headers.keys_len());
    for name in headers.keys() {
        let mut joined = String::new();
        for (i, value) in headers.get_all(name).iter().enumerate() {
            if i > 0 {
                joined.push_str(", ");
            }
            joined.push_str(&String::from_utf8_lossy(value.as_bytes()));
        }
        map.insert(name.as_str().to_owned(), serde_json::Value::String(joined));
    }
    serde_json::Value::Object(map)
}

fn stats_json(state: &State) -> serde_json::Value {
    serde_json::json!({
        "requests": state.requests.load(Ordering::Acquire),
        "in_flight": state.in_flight.load(Ordering::Acquire),
        "peak_in_flight": state.peak_in_flight.load(Ordering::Acquire),
    })
}

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<EchoBody>, Infallible> {
    let path = req.uri().path();
    let query = req.uri().query().unwrap_or("");

    // Control endpoints: not counted.
    match path {
        "/healthz" => {
            return Ok(if state.unhealthy.load(Ordering::Acquire) {
                text(StatusCode::SERVICE_UNAVAILABLE, "unhealthy\n")
            } else {
                text(StatusCode::OK, "ok\n")
            });
        }
        "/__stats" => return Ok(json(StatusCode::OK, &stats_json(&state))),
        "/__reset" if req.method() == Method::POST => {
            state.requests.store(0, Ordering::Release);
            let now = state.in_flight.load(Ordering::Acquire);
            state.peak_in_flight.store(now, Ordering::Release);
            return Ok(json(StatusCode::OK, &stats_json(&state)));
        }
        "/__health" if req.method() == Method::POST => {
            return Ok(match parse_params(query).map(|p| p.fail) {
                Ok(Some(fail)) => {
                    state.unhealthy.store(fail, Ordering::Release);
                    text(StatusCode::OK, if fail { "unhealthy\n" } else { "ok\n" })
                }
                _ => text(StatusCode::BAD_REQUEST, "use ?fail=1 or ?fail=0\n"),
            });
        }
        _ => {}
    }

    let _in_flight = InFlight::enter(&state);
    let params = match parse_params(query) {
        Ok(p) => p,
        Err(reason) => {
            let body = serde_json::json!({ "error": reason });
            return Ok(json(StatusCode::BAD_REQUEST, &body));
        }
    };
    let openai = path == "/v1/chat/completions" && req.method() == Method::POST;
    let (parts, mut body) = req.into_parts();

    // Stream the request body; keep the bytes only when they are echoed back.
    let mut body_len: u64 = 0;
    let mut kept: VecDeque<Bytes> = VecDeque::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    body_len += data.len() as u64;
                    // An echo keeps the whole body; the OpenAI mode reads at most 1 MiB of it.
                    let keep = params.echo || (openai && body_len <= 1 << 20);
                    if keep && !data.is_empty() {
                        kept.push_back(data);
                    }
                }
            }
            Err(_) => return Ok(text(StatusCode::BAD_REQUEST, "request body read failed\n")),
        }
    }

    if params.delay_ms > 0 {
        tokio::time::sleep(Duration::from_millis(params.delay_ms)).await;
    }

    let status = params
        .status
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);

    if openai {
        let body: Vec<u8> = kept.iter().flat_map(|b| b.iter().copied()).collect();
        let query = parts.uri.query().unwrap_or("");
        let ask = openai::Ask::read(&body, &parts.headers, query, &state.usage, state.gzip);
        return Ok(openai::answer(ask, status));
    }
    if params.echo {
        let mut resp = Response::new(EchoBody::Chunks {
            chunks: kept,
            remaining: body_len,
        });
        *resp.status_mut() = status;
        let content_type = parts
            .headers
            .get(header::CONTENT_TYPE)
            .cloned()
            .unwrap_or_else(|| HeaderValue::from_static("application/octet-stream"));
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, content_type);
        return Ok(resp);
    }
    if let Some(size) = params.size {
        let mut resp = Response::new(EchoBody::Pattern {
            offset: 0,
            remaining: size,
        });
        *resp.status_mut() = status;
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        return Ok(resp);
    }

    let value = serde_json::json!({
        "name": state.name,
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "query": parts.uri.query().unwrap_or(""),
        "headers": headers_json(&parts.headers),
        "body_len": body_len,
    });
    Ok(json(status, &value))
}

async fn serve(listener: TcpListener, state: Arc<State>, tls: Option<tokio_rustls::TlsAcceptor>) {
    let mut builder = http1::Builder::new();
    builder.keep_alive(true);
    let builder = Arc::new(builder);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _peer)) => stream,
            Err(_) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let builder = builder.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(state.clone(), req));
            // Errors here are client-side (resets, malformed requests, failed TLS handshakes):
            // nothing to report.
            match tls {
                Some(acceptor) => {
                    if let Ok(stream) = acceptor.accept(stream).await {
                        let _ = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }
                }
                None => {
                    let _ = builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                }
            }
        });
    }
}

fn main() {
    let args = Args::parse();
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if args.threads > 0 {
        runtime.worker_threads(args.threads);
    }
    let runtime = runtime
        .enable_all()
        .build()
        .expect("cannot start the tokio runtime");

    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls_acceptor(cert, key)),
        _ => None,
    };
    runtime.block_on(async move {
        let listener = match TcpListener::bind(args.listen).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("tollgate-echo: cannot listen on {}: {e}", args.listen);
                std::process::exit(1);
            }
        };
        let addr = listener.local_addr().expect("bound socket has an address");
        {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "listening on {addr}");
            let _ = out.flush();
        }
        let state = Arc::new(State {
            name: args.name,
            requests: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
            peak_in_flight: AtomicI64::new(0),
            unhealthy: AtomicBool::new(false),
            usage: args.usage,
            gzip: args.gzip,
        });
        serve(listener, state, tls).await;
    });
}
