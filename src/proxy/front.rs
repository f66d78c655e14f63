//! The HTTP/1 connection front end: reads every request head itself, bounded in time
//! (`server.header_read_timeout`, `server.keepalive_timeout`) and size (`server.max_header_bytes`,
//! `server.max_headers`), answers a head that cannot be served with problem+json (counted and
//! logged), and hands a complete head to Pingora's proxy as an already-read prefix.
//!
//! Why here: Pingora 0.9 parses the head in `HttpProxy::handle_new_request` before any
//! `ProxyHttp` hook or CTX exists, answers its own parse errors with a bare `400` (no body, no
//! request id, no hook called, nothing counted), bounds each read but not the whole head (a client
//! sending one byte a second is never timed out), and caps heads only at 1 MiB / 256 fields.
//! The prefix goes back through `ServerSession::set_pipelined_prefix`, so Pingora parses exactly
//! the bytes read here and then continues on the same stream (body included).

use super::conn_limit::{ConnectionLimits, Refused};
use super::fence::Fence;
use super::head::{check_head_and_end, HeadRefusal, HeadVerdict};
use crate::config::HttpLimits;
use crate::http::request_id;
use crate::observe::metrics::{status_class, METRICS};
use crate::pending::{self, Busy, Work};
use crate::pipeline::{Layer, Outcome};
use crate::proxy::Proxy;
use crate::response::{problem_response_bytes, Problem};
use bytes::{BufMut, BytesMut};
use pingora::apps::{HttpPersistentSettings, HttpServerApp};
use pingora::protocols::http::ServerSession;
use pingora::protocols::{Stream, ALPN};
use pingora::proxy::HttpProxy;
use pingora::server::ShutdownWatch;
use pingora_timeout::fast_timeout::fast_timeout;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Instant;

/// How long a refused connection is drained after the answer (so closing it does not reset the
/// connection before the client has read the answer), and how many bytes at most.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 1 << 20;

/// The HTTP/2 connection preface (RFC 9113 section 3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What reading one request head gave.
enum ReadHead {
    /// A complete head (possibly followed by body bytes or pipelined requests), and where its
    /// request ends ([`super::head::check_head_and_end`]).
    Head(BytesMut, Option<usize>),
    /// Refused by [`super::head::check_head`].
    Refused(HeadRefusal),
    /// The head did not arrive in time; `received` bytes of it had.
    TimedOut { received: usize },
    /// The client closed, the read failed, or the service is stopping while idle.
    Gone,
}

/// Serves one accepted connection until it closes. HTTP/2 (negotiated by ALPN, or cleartext
/// prior knowledge when `h2c` is on: the connection preface is peeked, not consumed, within
/// `header_read_timeout`) goes to Pingora unchanged: its frames carry their own limits.
///
/// A connection over a limit of `conns` is refused first: HTTP/1 gets a 503 problem+json,
/// HTTP/2 (negotiated by ALPN) is closed; the permit is held until the connection ends.
pub async fn serve(
    proxy: &Arc<HttpProxy<Proxy>>,
    limits: &HttpLimits,
    conns: &Arc<ConnectionLimits>,
    h2c: bool,
    mut stream: Stream,
    shutdown: &ShutdownWatch,
    mut stop: watch::Receiver<bool>,
) -> Option<Stream> {
    let alpn_h2 = matches!(stream.selected_alpn_proto(), Some(ALPN::H2));
    let digest = stream.get_socket_digest();
    let local = digest
        .as_ref()
        .and_then(|d| d.local_addr()?.as_inet().copied());
    let peer = digest
        .as_ref()
        .and_then(|d| d.peer_addr()?.as_inet().map(|a| a.ip()));
    let _permit = match conns.admit(local, peer) {
        Ok(permit) => permit,
        Err(why) => {
            refuse_connection(&mut stream, why, limits, alpn_h2).await;
            return None;
        }
    };
    let h2 = alpn_h2
        || (h2c && stream.get_ssl_digest().is_none() && {
            let mut preface = [0u8; H2_PREFACE.len()];
            let peek =
                tokio::time::timeout(limits.header_read_timeout, stream.try_peek(&mut preface));
            match peek.await {
                Ok(Ok(true)) => preface == *H2_PREFACE,
                Ok(Ok(false)) => false,
                // A client that sends nothing in time, or a failed read: nothing to serve.
                Ok(Err(_)) | Err(_) => return None,
            }
        });
    if h2 {
        return pingora::apps::ServerApp::process_new(proxy, stream, shutdown).await;
    }
    let keepalive_s = limits.keepalive_timeout.as_secs_f64().ceil().max(1.0) as u64;
    // Bytes of a next request held back while one is served: a whole head at most, then the
    // client waits (TCP flow control) until the answer is written.
    let max_early = limits.max_header_bytes + 8192;
    let mut previous: Option<Option<HttpPersistentSettings>> = None;
    // Bytes of pipelined requests that arrived with an earlier one (they start the next head).
    let mut pipelined = BytesMut::new();
    // Heads are read from the stream inside; Pingora reads each request through the fence.
    let mut fence = Box::new(Fence::new(stream, 0, max_early));
    loop {
        let first_wait = if previous.is_some() {
            limits.keepalive_timeout
        } else {
            limits.header_read_timeout
        };
        let reused = previous.is_some();
        let carried = std::mem::take(&mut pipelined);
        // In flight (for the idle exit) from the head's first byte to the end of the request.
        let mut busy = None;
        let read = read_head(
            fence.inner_mut(),
            limits,
            first_wait,
            reused,
            &mut stop,
            carried,
            &mut busy,
        );
        let (buf, allowance) = match read.await {
            ReadHead::Head(mut buf, end) => {
                // Pingora gets exactly this request; what follows it waits for the next turn
                // (a chunked body's or an upgrade's end is unknown here: all bytes go to
                // Pingora). The fence lets through the rest of the body and keeps what comes
                // after it.
                let allowance = end.map_or(usize::MAX, |end| {
                    if end < buf.len() {
                        pipelined = buf.split_off(end);
                    }
                    end - buf.len()
                });
                (buf, allowance)
            }
            ReadHead::Gone => return None,
            ReadHead::TimedOut { received: 0 } => return None,
            ReadHead::TimedOut { received } => {
                let refusal = HeadRefusal {
                    status: 408,
                    outcome: Outcome::HeaderTimeout,
                    detail: format!(
                        "the request head was not received within {:?} ({received} bytes arrived)",
                        limits.header_read_timeout
                    ),
                    request_id: None,
                };
                answer(fence.inner_mut(), refusal).await;
                return None;
            }
            ReadHead::Refused(refusal) => {
                answer(fence.inner_mut(), refusal).await;
                return None;
            }
        };
        fence.reset(allowance, max_early);
        let mut session = ServerSession::new_http1(fence);
        match previous.take().flatten() {
            Some(settings) => settings.apply_to_session(&mut session),
            None => session.set_keepalive(Some(keepalive_s)),
        }
        if *shutdown.borrow() {
            session.set_keepalive(None);
        }
        session.set_pipelined_prefix(buf);
        let (next, settings) = proxy.process_new_http(session, shutdown).await?.consume();
        // Pingora gives back the stream it was given: the fence, for the next request.
        fence = Fence::of(next)?;
        pipelined.unsplit(fence.take_early());
        previous = Some(settings);
    }
}

/// Reads until `buf` holds a complete head, a refusal, or time runs out. The first byte may take
/// `first_wait`; the whole head must then arrive within `header_read_timeout`, counted from accept
/// on a new connection and from its first byte on a reused one.
async fn read_head(
    stream: &mut Stream,
    limits: &HttpLimits,
    first_wait: Duration,
    reused: bool,
    stop: &mut watch::Receiver<bool>,
    carried: BytesMut,
    busy: &mut Option<Busy>,
) -> ReadHead {
    if !carried.is_empty() {
        *busy = Some(pending::busy(Work::Request));
    }
    // Pipelined bytes already received may hold the whole next head.
    if !carried.is_empty() {
        match check_head_and_end(&carried, limits) {
            (HeadVerdict::Partial, _) => {}
            (HeadVerdict::Complete(_), end) => return ReadHead::Head(carried, end),
            (HeadVerdict::Refused(r), _) => return ReadHead::Refused(r),
        }
    }
    let mut buf = if carried.is_empty() {
        BytesMut::with_capacity(4096)
    } else {
        carried
    };
    // Reads of at most 8 KiB straight into `buf` (no zeroed bounce buffer to copy from): the
    // buffer never exceeds `max_header_bytes` + 8 KiB, well under the 1 MiB Pingora accepts as
    // a prefix.
    // The clock is read only when a head needs more than one read (and once per new
    // connection): on a kept-alive connection the first read waits `first_wait`, and the
    // header deadline starts with its first byte.
    let accepted = (!reused).then(Instant::now);
    let mut deadline: Option<Instant> = None;
    loop {
        let idle = buf.is_empty();
        // Stopping while idle: bytes already received are still read (one attempt that does not
        // wait), like Pingora's biased select; only a connection with nothing pending closes.
        let stopping = idle && *stop.borrow();
        let wait = match deadline {
            _ if stopping => Duration::ZERO,
            Some(d) => d.saturating_duration_since(Instant::now()),
            None => first_wait,
        };
        let mut room = (&mut buf).limit(8192);
        let read = tokio::select! {
            biased;
            // Pingora's fast timer (as for its own reads): cheaper to arm than a Tokio timer,
            // armed only when the read does not complete at once; ~10 ms resolution.
            r = fast_timeout(wait, stream.read_buf(&mut room)) => r,
            // Changed: loop once more as `stopping`. Sender gone: the service is gone too.
            changed = stop.changed(), if idle && !stopping => match changed {
                Ok(()) => continue,
                Err(_) => return ReadHead::Gone,
            },
        };
        match read {
            Err(_) if stopping => return ReadHead::Gone,
            Err(_) => {
                return ReadHead::TimedOut {
                    received: buf.len(),
                }
            }
            Ok(Err(_)) | Ok(Ok(0)) => return ReadHead::Gone,
            Ok(Ok(_)) => {
                busy.get_or_insert_with(|| pending::busy(Work::Request));
            }
        }
        match check_head_and_end(&buf, limits) {
            (HeadVerdict::Partial, _) => {
                deadline = deadline.or_else(|| match accepted {
                    Some(at) => Some(at + first_wait),
                    None => Some(Instant::now() + limits.header_read_timeout),
                });
            }
            (HeadVerdict::Complete(_), end) => return ReadHead::Head(buf, end),
            (HeadVerdict::Refused(r), _) => return ReadHead::Refused(r),
        }
    }
}

/// Refuses a connection over a limit: a 503 problem+json (reason `connection_limit`, member
/// `scope`) on HTTP/1, a plain close on HTTP/2. Logged at most once a second.
async fn refuse_connection(stream: &mut Stream, why: Refused, limits: &HttpLimits, h2: bool) {
    static LAST_WARN_S: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if LAST_WARN_S.swap(now_s, std::sync::atomic::Ordering::Relaxed) != now_s {
        tracing::warn!(
            scope = why.as_str(),
            "connection refused: over its connection limit"
        );
    }
    METRICS.decision(Layer::Http, Outcome::ConnectionLimit, "-");
    if h2 {
        return;
    }
    let (field, max) = match why {
        Refused::Listener => ("server.max_connections", limits.max_connections),
        Refused::Client => (
            "server.max_connections_per_client",
            limits.max_connections_per_client,
        ),
    };
    let problem = Problem::status(
        503,
        format!("too many open connections ({field}: {max}); retry later"),
    )
    .with(
        "reason",
        serde_json::json!(Outcome::ConnectionLimit.as_str()),
    )
    .with("scope", serde_json::json!(why.as_str()));
    let mut bytes = problem_response_bytes(&problem, &request_id::generate());
    insert_retry_after(&mut bytes);
    let written = tokio::time::timeout(LINGER, async {
        stream.write_all(&bytes).await?;
        stream.flush().await?;
        AsyncWriteExt::shutdown(stream).await
    })
    .await;
    if matches!(written, Ok(Ok(()))) {
        linger(stream).await;
    }
}

/// Adds `Retry-After: 1` after the status line of a response written by
/// [`problem_response_bytes`].
fn insert_retry_after(bytes: &mut Vec<u8>) {
    if let Some(end) = bytes.windows(2).position(|w| w == b"\r\n") {
        bytes.splice(end + 2..end + 2, b"Retry-After: 1\r\n".iter().copied());
    }
}

/// Writes the problem+json answer, counts and logs it, then closes the connection gracefully.
async fn answer(stream: &mut Stream, refusal: HeadRefusal) {
    let request_id = refusal
        .request_id
        .clone()
        .unwrap_or_else(request_id::generate);
    let client = stream
        .get_socket_digest()
        .and_then(|d| d.peer_addr().map(|a| a.to_string()))
        .unwrap_or_default();
    METRICS
        .requests
        .with_label_values(&["none", status_class(refusal.status)])
        .inc();
    METRICS.decision(Layer::Http, refusal.outcome, "-");
    tracing::warn!(
        request_id = %request_id,
        client = %client,
        status = refusal.status,
        reason = %refusal.outcome.as_str(),
        detail = %refusal.detail,
        "request head refused"
    );
    let problem = Problem::status(refusal.status, refusal.detail)
        .with("reason", serde_json::json!(refusal.outcome.as_str()));
    let bytes = problem_response_bytes(&problem, &request_id);
    let written = tokio::time::timeout(LINGER, async {
        stream.write_all(&bytes).await?;
        stream.flush().await?;
        AsyncWriteExt::shutdown(stream).await
    })
    .await;
    if matches!(written, Ok(Ok(()))) {
        linger(stream).await;
    }
}

/// Lingering close: reads and drops what the client still sends, for a bounded time, so that
/// closing does not reset the connection before the client has read the answer.
async fn linger(stream: &mut Stream) {
    let _ = tokio::time::timeout(LINGER, async {
        let mut sink = vec![0u8; 16 * 1024];
        let mut total = 0;
        while total < LINGER_BYTES {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    })
    .await;
}
