//! A usage reserve read from the request's JSON body (`reserve: { from_json: max_tokens,
//! default: 100 }`, docs/usage-cost.md#reserve-from-the-request-body) through a real gateway,
//! a real `redis-server` and the echo backend (`?echo=1` answers the request body unchanged, so
//! a test sees exactly what the backend received).
//!
//! The echoed body states no usage, so every settlement is `missing` and the reserve stands: the
//! bucket's level (read from Redis, refilled one unit a day) shows the reserve exactly.

mod common;
#[path = "common/tls.rs"]
mod tls_common;

use common::*;
use std::time::Duration;
use tls_common::h2c;

const PER_MS: i64 = 86_400_000;
const KEY: &str = "key-k1-0123456789";

/// Tier `T` with a 1000-unit usage budget whose reserve is read from `max_tokens` (default
/// 100, at most 500); `listen` is the listener item, `server` the `server:` flow map.
fn config(redis: &RedisServer, backend: &Backend, listen: &str, server: &str) -> String {
    GatewayConfig::echo(&backend.addr(), "required")
        .listen(&[listen])
        .server(server)
        .redis(&redis.url(), "timeout_ms: 2000, on_failure: closed")
        .tier(
            "T",
            "{ limit: 1, per: 1h, burst: 1000, usage: { limit: 1, per: 1d, burst: 1000, \
             max: 500, from: { openai: true }, \
             reserve: { from_json: max_tokens, default: 100 } } }",
        )
        .api_keys_always()
        .api_key(KEY, "k1", "T")
        .yaml()
}

fn start(listen: &str, server: &str) -> (RedisServer, Backend, Gateway) {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = Gateway::start(&config(&redis, &backend, listen, server));
    (redis, backend, gw)
}

const SERVER: &str = "{ threads: 2, grace_period_s: 1 }";

/// Whole units in k1's usage bucket (`None`: the key is absent, the bucket full).
fn level(redis: &RedisServer) -> Option<i64> {
    let l: Option<String> = common::key_field(&mut redis.conn(), "tollgate:{k1}:u:tokens", "l");
    l.map(|l| l.parse::<i64>().expect("level").div_euclid(PER_MS))
}

/// Waits until `n` settlements kept the reserve (`missing`), then reads the level.
async fn level_after(gw: &Gateway, redis: &RedisServer, n: f64) -> Option<i64> {
    let series = "tollgate_usage_settlements_total{tier=\"T\",outcome=\"missing\"}";
    let done = eventually(Duration::from_secs(10), || gw.metric_or_zero(series) >= n).await;
    assert!(done, "settlements: {}", gw.metric_or_zero(series));
    level(redis)
}

/// POSTs `body` as JSON to the echo path; returns (status, body received back).
async fn post(gw: &Gateway, body: &str) -> (u16, String) {
    let r = client()
        .post(gw.url("/echo?echo=1"))
        .header("x-api-key", KEY)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("send");
    let status = r.status().as_u16();
    (status, r.text().await.expect("body"))
}

/// The reserve is the body's `max_tokens` (clamped to `max`, or the default when absent), and
/// the backend receives the exact body the client sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reserve_is_read_from_the_body_and_the_body_reaches_the_backend_whole() {
    let (redis, _backend, gw) = start("\"{listen}\"", SERVER);
    let body =
        r#"{"model":"echo","max_tokens":250,"messages":[{"role":"user","content":"héllo ✓"}]}"#;
    assert_eq!(post(&gw, body).await, (200, body.to_string()));
    assert_eq!(level_after(&gw, &redis, 1.0).await, Some(750));
    // Above max (500): clamped.
    let big = r#"{"max_tokens":90000}"#;
    assert_eq!(post(&gw, big).await, (200, big.to_string()));
    assert_eq!(level_after(&gw, &redis, 2.0).await, Some(250));
    // Absent, or not a non-negative integer: the default (100).
    for (i, plain) in [r#"{"model":"echo"}"#, r#"{"max_tokens":"60"}"#]
        .into_iter()
        .enumerate()
    {
        assert_eq!(post(&gw, plain).await, (200, plain.to_string()));
        let left = level_after(&gw, &redis, 3.0 + i as f64).await;
        assert_eq!(left, Some(150 - 100 * i as i64));
    }
    // 50 left: a request asking for 60 is refused, one asking for 50 admitted.
    let (status, _) = post(&gw, r#"{"max_tokens":60}"#).await;
    assert_eq!(status, 429);
    assert_eq!(post(&gw, r#"{"max_tokens":50}"#).await.0, 200);
    assert_eq!(level_after(&gw, &redis, 5.0).await, Some(0));
}

/// A body over Pingora's 64 KiB replay buffer, or one without a length (chunked), is not read
/// before the decision: it streams through unchanged and the default reserve applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_cannot_be_replayed_stream_through_with_the_default_reserve() {
    let (redis, _backend, gw) = start("\"{listen}\"", SERVER);
    let pad = "x".repeat(70_000);
    let body = format!(r#"{{"max_tokens":250,"pad":"{pad}"}}"#);
    let (status, back) = post(&gw, &body).await;
    assert_eq!(status, 200);
    assert!(back == body, "{} bytes back of {}", back.len(), body.len());
    assert_eq!(level_after(&gw, &redis, 1.0).await, Some(900));
    // Chunked: the same.
    let mut conn = RawConn::connect(gw.listen_addr(), None)
        .await
        .expect("connect");
    let json = r#"{"max_tokens":250}"#;
    let head = format!(
        "POST /echo?echo=1 HTTP/1.1\r\nHost: x\r\nx-api-key: {KEY}\r\n\
         content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n\
         {:x}\r\n{json}\r\n0\r\n\r\n",
        json.len()
    );
    conn.write_raw(head.as_bytes()).await.expect("write");
    let reply = conn.read_reply().await.expect("reply");
    assert_eq!((reply.status, reply.body.as_str()), (200, json));
    assert_eq!(level_after(&gw, &redis, 2.0).await, Some(800));
}

/// Over HTTP/2 (h2c) the body is read and replayed the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reserve_is_read_from_an_h2_request_body() {
    let (redis, _backend, gw) = start("{ addr: \"{listen}\", h2: true }", SERVER);
    let mut h2 = h2c(gw.listen_addr()).await;
    let body = r#"{"model":"echo","max_tokens":321}"#;
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("http://{}/echo?echo=1", gw.listen_addr()))
        .header("x-api-key", KEY)
        .header("content-type", "application/json")
        .header("content-length", body.len().to_string())
        .body(())
        .expect("request");
    let (resp, mut send) = h2.send_request(req, false).expect("send h2 request");
    send.send_data(bytes::Bytes::from(body), true)
        .expect("send body");
    let (status, back) = tls_common::h2_read(resp).await;
    assert_eq!((status, back.as_str()), (200, body));
    assert_eq!(level_after(&gw, &redis, 1.0).await, Some(679));
}

/// With body buffering off (else the body buffer's own timeout answers first,
/// `tests/hostile_load.rs`), a client that does not finish its body within
/// `server.header_read_timeout` gets a 408, nothing is reserved and nothing reaches the backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_finishes_is_refused_after_the_read_timeout() {
    let server = "{ threads: 2, grace_period_s: 1, header_read_timeout: 1s, body_buffer_bytes: 0 }";
    let (redis, _backend, gw) = start("\"{listen}\"", server);
    let mut conn = RawConn::connect(gw.listen_addr(), None)
        .await
        .expect("connect");
    let head = format!(
        "POST /echo?echo=1 HTTP/1.1\r\nHost: x\r\nx-api-key: {KEY}\r\n\
         content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"max_tokens\":"
    );
    conn.write_raw(head.as_bytes()).await.expect("write");
    let reply = tokio::time::timeout(Duration::from_secs(30), conn.read_reply())
        .await
        .expect("answered")
        .expect("reply");
    assert_eq!(reply.status, 408, "{}", reply.body);
    assert!(reply.body.contains("header_read_timeout"), "{}", reply.body);
    assert_eq!(level(&redis), None);
    let series = "tollgate_usage_settlements_total{tier=\"T\",outcome=\"missing\"}";
    assert_eq!(gw.metric_or_zero(series), 0.0);
}

/// `Expect: 100-continue` (RFC 9110 10.1.1): the gateway needs the body for the reserve, so it
/// sends `100 Continue` before reading it (before, the client waited its whole expect timeout,
/// or got a 408 at `header_read_timeout`); the backend is not asked for a second `100`, and
/// the reserve is the body's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_expecting_100_continue_is_told_to_send_its_body() {
    let server = "{ threads: 2, grace_period_s: 1, header_read_timeout: 2s }";
    let (redis, _backend, gw) = start("\"{listen}\"", server);
    let mut conn = RawConn::connect(gw.listen_addr(), None)
        .await
        .expect("connect");
    let body = "{\"max_tokens\":7}";
    let head = format!(
        "POST /echo?echo=1 HTTP/1.1\r\nHost: x\r\nx-api-key: {KEY}\r\nExpect: 100-continue\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    conn.write_raw(head.as_bytes()).await.expect("write");
    let interim = tokio::time::timeout(Duration::from_secs(30), conn.read_head())
        .await
        .expect("answered")
        .expect("head");
    assert_eq!(interim.status, 100, "{interim:?}");
    conn.write_raw(body.as_bytes()).await.expect("write body");
    let reply = tokio::time::timeout(Duration::from_secs(30), conn.read_reply())
        .await
        .expect("answered")
        .expect("reply");
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (200, body),
        "{reply:?}"
    );
    assert_eq!(level_after(&gw, &redis, 1.0).await, Some(993));
}

/// A streamed request without `stream_options.include_usage` reaches the backend with it (the
/// member inserted first, every other byte as sent, `Content-Length` following), over HTTP/1.1
/// and HTTP/2; its reserve is read from the body the client sent; a request that asks for it
/// already, or does not stream, reaches the backend unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_request_reaches_the_backend_asking_for_its_usage() {
    let (redis, _backend, gw) = start("{ addr: \"{listen}\", h2: true }", SERVER);
    let body = r#"{"model":"echo","stream":true,"max_tokens":321}"#;
    let sent = r#"{"stream_options":{"include_usage":true},"model":"echo","stream":true,"max_tokens":321}"#;
    assert_eq!(post(&gw, body).await, (200, sent.to_string()));
    assert_eq!(level_after(&gw, &redis, 1.0).await, Some(679));
    for same in [
        r#"{"stream":true,"stream_options":{"include_usage":true},"max_tokens":1}"#,
        r#"{"stream":false,"max_tokens":1}"#,
    ] {
        assert_eq!(post(&gw, same).await, (200, same.to_string()));
    }
    assert_eq!(level_after(&gw, &redis, 3.0).await, Some(677));

    let mut h2 = h2c(gw.listen_addr()).await;
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("http://{}/echo?echo=1", gw.listen_addr()))
        .header("x-api-key", KEY)
        .header("content-type", "application/json")
        .header("content-length", body.len().to_string())
        .body(())
        .expect("request");
    let (resp, mut send) = h2.send_request(req, false).expect("send h2 request");
    send.send_data(bytes::Bytes::from(body), true)
        .expect("send body");
    let (status, back) = tls_common::h2_read(resp).await;
    assert_eq!((status, back.as_str()), (200, sent));
    assert_eq!(level_after(&gw, &redis, 4.0).await, Some(356));
}

/// With body buffering on (the default), a body that stops arriving is refused by the body
/// buffer before the tenant stage: 408 `body_timeout` after `server.body_idle_timeout`, no
/// token spent and nothing reserved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buffered_body_that_stops_spends_nothing() {
    let server = "{ threads: 2, grace_period_s: 1, body_idle_timeout: 500ms }";
    let (redis, _backend, gw) = start("\"{listen}\"", server);
    let mut conn = RawConn::connect(gw.listen_addr(), None)
        .await
        .expect("connect");
    let head = format!(
        "POST /echo?echo=1 HTTP/1.1\r\nHost: x\r\nx-api-key: {KEY}\r\n\
         content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"max_tokens\":"
    );
    conn.write_raw(head.as_bytes()).await.expect("write");
    let reply = tokio::time::timeout(Duration::from_secs(30), conn.read_reply())
        .await
        .expect("answered")
        .expect("reply");
    assert_eq!(reply.status, 408, "{}", reply.body);
    assert!(reply.body.contains("body_idle_timeout"), "{}", reply.body);
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("tollgate:{k1}*")
        .query(&mut redis.conn())
        .expect("KEYS");
    assert!(
        keys.is_empty(),
        "no token spent, nothing reserved: {keys:?}"
    );
}

/// A settlement still talking to Redis when SIGTERM comes (Redis frozen as the response ends)
/// holds the exit: once Redis answers again the reserve is settled to the stated usage, then the
/// gateway exits with status 0 long before its 60 s grace period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_waits_for_a_settlement_in_flight_then_exits_early() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::echo(&backend.addr(), "required")
        .server("{ grace_period: 60s }")
        .redis(&redis.url(), "timeout_ms: 10000, on_failure: closed")
        .tier(
            "T",
            "{ limit: 1, per: 1h, burst: 1000, usage: { limit: 1, per: 1d, burst: 1000, \
             max: 500, from: { openai: true }, \
             reserve: { from_json: max_tokens, default: 100 } } }",
        )
        .api_keys_always()
        .api_key(KEY, "k1", "T")
        .yaml();
    let mut gw = Gateway::start(&yaml);
    let body = r#"{"max_tokens": 100, "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}}"#;
    let slow = {
        let url = gw.url("/echo?echo=1&delay_ms=1500");
        tokio::spawn(async move {
            client()
                .post(url)
                .header("x-api-key", KEY)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .map(|r| r.status().as_u16())
        })
    };
    assert!(eventually(Duration::from_secs(5), || backend.stats().in_flight == 1).await);
    assert_eq!(level(&redis), Some(900), "the reserve of 100 taken");
    redis.pause();
    assert_eq!(slow.await.expect("task").expect("answered"), 200);
    gw.signal("TERM");
    // Long enough for an exit that ignored the settlement to have happened.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    redis.resume();
    let status = gw
        .wait_exit(Duration::from_secs(20))
        .expect("exits once the settlement ended, before its grace period");
    assert!(status.success(), "{status:?}");
    assert_eq!(level(&redis), Some(970), "settled to the 30 units used");
}
