//! Per-upstream concurrency slots, black-box: the limit without and with a queue, queue full and
//! queue timeout, the 503 problem and its Retry-After, the metrics, the tenant token a
//! concurrency rejection keeps, and that a slot comes back on every way a request can end
//! (success, upstream error, upstream timeout, upstream refused, gateway error, client reset or
//! timeout while waiting, client reset in the middle of the response, client gone while queued).
//!
//! Concurrent requests use separate connections (reqwest opens one per concurrent request, raw
//! connections where the test must reset or half-read them). Where a request must still be in
//! flight when the next one arrives, the backend holds it for seconds and the test waits for the
//! gateway's gauges, never for a guessed duration.

mod common;

use common::*;
use std::time::Duration;

const REDUCED_CAPACITY: &str =
    "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

/// A catch-all `auth: none` route to `upstream`.
fn route_all(upstream: &str) -> String {
    route(upstream, "/")
}

/// An `auth: none` route for `prefix` to `upstream`.
fn route(upstream: &str, prefix: &str) -> String {
    format!("{{ path_prefix: \"{prefix}\", upstream: {upstream}, auth: none }}")
}

/// One upstream `echo` (`settings` appended to its mapping) behind a catch-all route.
fn single(backend: &str, settings: &str) -> String {
    GatewayConfig::new()
        .upstream_with("echo", backend, settings)
        .route(&route_all("echo"))
        .yaml()
}

fn in_flight(gw: &Gateway, upstream: &str) -> f64 {
    metric_or_zero(gw, "tollgate_upstream_in_flight", &[("upstream", upstream)])
}

fn queue_depth(gw: &Gateway, upstream: &str) -> f64 {
    metric_or_zero(
        gw,
        "tollgate_upstream_queue_depth",
        &[("upstream", upstream)],
    )
}

fn queue_waits(gw: &Gateway, upstream: &str) -> f64 {
    let name = "tollgate_upstream_queue_wait_seconds_count";
    metric_or_zero(gw, name, &[("upstream", upstream)])
}

fn rejections(gw: &Gateway, upstream: &str, reason: &str) -> f64 {
    let labels = [("upstream", upstream), ("reason", reason)];
    metric_or_zero(gw, "tollgate_upstream_rejections_total", &labels)
}

/// Waits (up to `timeout`) until the gauge `read` returns `want`; panics with the last value.
async fn wait_gauge(what: &str, timeout: Duration, want: f64, read: impl Fn() -> f64) {
    let mut last = f64::NAN;
    let ok = eventually(timeout, || {
        last = read();
        last == want
    })
    .await;
    assert!(
        ok,
        "{what}: expected {want} within {timeout:?}, last {last}"
    );
}

/// Waits until `upstream` (2 slots) has a free slot: the aborted requests before have let go of
/// theirs (a reset reaches the gateway a moment after the client sent it). 3 s: far less than
/// the 5 s a backend sleep would hold a slot that is not released on abort.
async fn free_slot(gw: &Gateway, upstream: &str) {
    let mut last = f64::NAN;
    let ok = eventually(Duration::from_secs(3), || {
        last = in_flight(gw, upstream);
        last <= 1.0
    })
    .await;
    assert!(ok, "{upstream}: both slots still held after 3 s ({last})");
}

/// What the tests look at in an answer.
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    retry_after: Option<String>,
    ratelimit: Option<String>,
    content_type: String,
    body: String,
}

async fn answer(resp: reqwest::Response) -> Answer {
    let status = resp.status().as_u16();
    let retry_after = header_str(&resp, "retry-after");
    let ratelimit = header_str(&resp, "ratelimit");
    let content_type = header_str(&resp, "content-type").unwrap_or_default();
    let body = resp.text().await.unwrap_or_default();
    Answer {
        status,
        retry_after,
        ratelimit,
        content_type,
        body,
    }
}

/// GET `url` with the given headers, as a task (so many run at once).
fn spawn_get(
    http: &reqwest::Client,
    url: String,
    headers: &[(&str, &str)],
) -> tokio::task::JoinHandle<Answer> {
    let mut req = http.get(&url);
    for (n, v) in headers {
        req = req.header(*n, *v);
    }
    tokio::spawn(async move {
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        answer(resp).await
    })
}

/// Sends all `urls` at once (one connection each) and returns the answers in order.
async fn get_all(http: &reqwest::Client, urls: Vec<String>) -> Vec<Answer> {
    let tasks: Vec<_> = urls.into_iter().map(|u| spawn_get(http, u, &[])).collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("request task"));
    }
    out
}

fn count(answers: &[Answer], status: u16) -> usize {
    answers.iter().filter(|a| a.status == status).count()
}

/// Asserts `a` is the concurrency 503: problem+json `temporary-reduced-capacity`, Retry-After.
fn assert_capacity_problem(a: &Answer, retry_after: &str) -> serde_json::Value {
    assert_eq!(a.status, 503, "{a:?}");
    assert!(
        a.content_type.starts_with("application/problem+json"),
        "{a:?}"
    );
    assert_eq!(a.retry_after.as_deref(), Some(retry_after), "{a:?}");
    let v = problem(&a.body);
    assert_eq!(v["type"], REDUCED_CAPACITY, "{v}");
    assert_eq!(v["status"], 503, "{v}");
    v
}

/// Item 13, no queue: 2 slots, 10 concurrent requests → 2 × 200 and 8 × 503 problems with the
/// default Retry-After 1; `retry_after_s` changes it. Item 11: the gauges and counters move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_upstream_rejects_with_503_problem_and_retry_after() {
    let backend = Backend::start("full");
    let yaml = GatewayConfig::new()
        .upstream_with("echo", &backend.addr(), "max_concurrency: 2")
        .upstream_with(
            "custom",
            &backend.addr(),
            "max_concurrency: 1, retry_after_s: 7",
        )
        .route(&route("custom", "/custom"))
        .route(&route_all("echo"))
        .yaml();
    let gw = Gateway::start(&yaml);
    let http = client();
    assert_eq!(in_flight(&gw, "echo"), 0.0);

    // The two admitted requests hold their slots for 3 s: far longer than the other eight need
    // to arrive, however slow the machine.
    let slow: Vec<String> = (0..10)
        .map(|i| gw.url(&format!("/slow/{i}?delay_ms=3000")))
        .collect();
    let tasks: Vec<_> = slow.into_iter().map(|u| spawn_get(&http, u, &[])).collect();
    // While the two are held: the gauge says 2, and eight were turned away as `full`.
    wait_gauge("rejections full", Duration::from_secs(10), 8.0, || {
        rejections(&gw, "echo", "full")
    })
    .await;
    assert_eq!(in_flight(&gw, "echo"), 2.0);
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    assert_eq!(count(&answers, 200), 2, "{answers:?}");
    assert_eq!(count(&answers, 503), 8, "{answers:?}");
    for a in answers.iter().filter(|a| a.status == 503) {
        let v = assert_capacity_problem(a, "1");
        assert!(
            v["detail"].as_str().unwrap_or_default().contains("echo"),
            "{v}"
        );
    }
    let stats = backend.stats();
    assert_eq!(stats.requests, 2);
    assert_eq!(stats.peak_in_flight, 2);
    wait_gauge("in flight", Duration::from_secs(5), 0.0, || {
        in_flight(&gw, "echo")
    })
    .await;
    assert_eq!(rejections(&gw, "echo", "queue_full"), 0.0);
    assert_eq!(rejections(&gw, "echo", "queue_timeout"), 0.0);
    assert_eq!(queue_waits(&gw, "echo"), 0.0, "no queue, no waits");
    // The upstream layer's decisions: 2 slots granted, 8 refused.
    let decisions = |outcome: &str| {
        let labels = [("layer", "upstream"), ("outcome", outcome), ("tier", "-")];
        metric_or_zero(&gw, "tollgate_decisions_total", &labels)
    };
    assert_eq!((decisions("admitted"), decisions("limited")), (2.0, 8.0));

    // retry_after_s is configurable per upstream.
    let holder = spawn_get(&http, gw.url("/custom?delay_ms=2000"), &[]);
    wait_gauge("custom in flight", Duration::from_secs(10), 1.0, || {
        in_flight(&gw, "custom")
    })
    .await;
    let a = answer(http.get(gw.url("/custom")).send().await.unwrap()).await;
    assert_capacity_problem(&a, "7");
    assert_eq!(holder.await.unwrap().status, 200);
    assert_eq!(rejections(&gw, "custom", "full"), 1.0);
}

/// Item 13, with a queue: 10 concurrent requests on 2 slots all get through in turn, and the
/// backend never sees more than 2 at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_lets_everyone_through_in_turn_and_never_exceeds_the_limit() {
    let backend = Backend::start("queue");
    let yaml = single(
        &backend.addr(),
        "max_concurrency: 2, queue: { max: 10, timeout_ms: 5000 }",
    );
    let gw = Gateway::start(&yaml);
    let http = client();
    // 5 rounds of 200 ms: about 1 s of the 5 s queue timeout.
    let urls = (0..10)
        .map(|i| gw.url(&format!("/q/{i}?delay_ms=200")))
        .collect();
    let answers = get_all(&http, urls).await;
    assert_eq!(count(&answers, 200), 10, "{answers:?}");
    let stats = backend.stats();
    assert_eq!(stats.requests, 10);
    assert_eq!(stats.peak_in_flight, 2);
    assert!(
        queue_waits(&gw, "echo") >= 1.0,
        "some requests waited in the queue"
    );
    assert_eq!(in_flight(&gw, "echo"), 0.0);
    assert_eq!(queue_depth(&gw, "echo"), 0.0);
    for reason in ["full", "queue_full", "queue_timeout"] {
        assert_eq!(rejections(&gw, "echo", reason), 0.0, "{reason}");
    }
}

/// Queue full → 503 at once (`queue_full`); the queued requests are served when slots free up.
/// The queue-depth gauge and the queue-wait histogram move (item 11).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_queue_rejects_and_queued_requests_are_served_later() {
    let backend = Backend::start("qfull");
    let yaml = single(
        &backend.addr(),
        "max_concurrency: 2, queue: { max: 2, timeout_ms: 20000 }",
    );
    let gw = Gateway::start(&yaml);
    let http = client();

    let holders: Vec<_> = (0..2)
        .map(|i| spawn_get(&http, gw.url(&format!("/hold/{i}?delay_ms=2500")), &[]))
        .collect();
    wait_gauge("in flight", Duration::from_secs(10), 2.0, || {
        in_flight(&gw, "echo")
    })
    .await;
    let queued: Vec<_> = (0..2)
        .map(|i| spawn_get(&http, gw.url(&format!("/queued/{i}")), &[]))
        .collect();
    wait_gauge("queue depth", Duration::from_secs(10), 2.0, || {
        queue_depth(&gw, "echo")
    })
    .await;

    let a = answer(http.get(gw.url("/overflow")).send().await.unwrap()).await;
    let v = assert_capacity_problem(&a, "1");
    assert!(
        v["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("queue_full"),
        "{v}"
    );
    assert_eq!(rejections(&gw, "echo", "queue_full"), 1.0);
    assert_eq!(queue_waits(&gw, "echo"), 0.0, "nobody finished waiting yet");

    for t in holders.into_iter().chain(queued) {
        assert_eq!(t.await.unwrap().status, 200);
    }
    assert_eq!(queue_depth(&gw, "echo"), 0.0);
    assert_eq!(queue_waits(&gw, "echo"), 2.0);
    wait_gauge("in flight", Duration::from_secs(5), 0.0, || {
        in_flight(&gw, "echo")
    })
    .await;
    let stats = backend.stats();
    assert_eq!(stats.requests, 4, "the overflow never reached the backend");
    assert_eq!(stats.peak_in_flight, 2);
}

/// Waiting longer than `queue.timeout_ms` → 503 (`queue_timeout`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_timeout_rejects_with_503() {
    let backend = Backend::start("qtimeout");
    let yaml = single(
        &backend.addr(),
        "max_concurrency: 1, queue: { max: 5, timeout_ms: 300 }, retry_after_s: 2",
    );
    let gw = Gateway::start(&yaml);
    let http = client();

    let holder = spawn_get(&http, gw.url("/hold?delay_ms=4000"), &[]);
    wait_gauge("in flight", Duration::from_secs(10), 1.0, || {
        in_flight(&gw, "echo")
    })
    .await;
    let answers = get_all(
        &http,
        (0..3).map(|i| gw.url(&format!("/late/{i}"))).collect(),
    )
    .await;
    for a in &answers {
        let v = assert_capacity_problem(a, "2");
        assert!(
            v["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("queue_timeout"),
            "{v}"
        );
    }
    assert_eq!(rejections(&gw, "echo", "queue_timeout"), 3.0);
    assert_eq!(queue_waits(&gw, "echo"), 3.0);
    assert_eq!(queue_depth(&gw, "echo"), 0.0);
    assert_eq!(in_flight(&gw, "echo"), 1.0, "the holder still has its slot");
    assert_eq!(holder.await.unwrap().status, 200);
    assert_eq!(backend.stats().requests, 1);
}

/// Item 10: a request rejected at the concurrency stage keeps the tenant token it spent (the
/// tenant stage runs first), and the problem detail says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_rejection_keeps_the_tenant_token_and_says_so() {
    let redis = RedisServer::start();
    let backend = Backend::start("token");
    let yaml = GatewayConfig::new()
        .redis(&redis.url(), "timeout_ms: 2000")
        .api_key("k1-secret", "acme", "T")
        .tier("T", "{ limit: 1, per: 1d, burst: 10 }")
        .upstream_with("echo", &backend.addr(), "max_concurrency: 1")
        .route("{ path_prefix: \"/\", upstream: echo, auth: required }")
        .yaml();
    let gw = Gateway::start(&yaml);
    let http = client();
    let key = [("x-api-key", "k1-secret")];

    let holder = spawn_get(&http, gw.url("/hold?delay_ms=2500"), &key);
    wait_gauge("in flight", Duration::from_secs(10), 1.0, || {
        in_flight(&gw, "echo")
    })
    .await;
    let a = spawn_get(&http, gw.url("/rejected"), &key).await.unwrap();
    let v = assert_capacity_problem(&a, "1");
    let detail = v["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("not refunded"),
        "detail says the token is kept: {detail}"
    );
    // The 503 passed the tenant stage: it carries the quota headers of that decision.
    assert!(
        a.ratelimit
            .as_deref()
            .is_some_and(|r| r.starts_with("\"T\";r=8;")),
        "{a:?}"
    );

    let held = holder.await.unwrap();
    assert_eq!(held.status, 200);
    assert!(
        held.ratelimit
            .as_deref()
            .is_some_and(|r| r.starts_with("\"T\";r=9;")),
        "{held:?}"
    );
    // The next admitted request sees both tokens gone: 7 left.
    let next = spawn_get(&http, gw.url("/next"), &key).await.unwrap();
    assert_eq!(next.status, 200);
    assert!(
        next.ratelimit
            .as_deref()
            .is_some_and(|r| r.starts_with("\"T\";r=7;")),
        "{next:?}"
    );
    assert_eq!(backend.stats().requests, 2);
    assert_eq!(rejections(&gw, "echo", "full"), 1.0);
}

/// Case C10, first part: two requests waiting on a 5 s backend are reset by their clients after
/// 200 ms; 300 ms later both slots are free again. Then a third request beyond two held slots
/// is a 503 with Retry-After.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c10_reset_clients_give_their_slots_back() {
    let backend = Backend::start("c10");
    let yaml = single(&backend.addr(), "max_concurrency: 2");
    let gw = Gateway::start(&yaml);
    let http = client();

    let mut conns = Vec::new();
    for i in 0..2 {
        let mut c = RawConn::connect(gw.listen_addr(), None).await.unwrap();
        c.send("GET", &format!("/reset/{i}?delay_ms=5000"), &[])
            .await
            .unwrap();
        conns.push(c);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Both really hold a slot before they are reset.
    wait_gauge("in flight", Duration::from_secs(10), 2.0, || {
        in_flight(&gw, "echo")
    })
    .await;
    for c in conns {
        c.reset();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let answers = get_all(&http, vec![gw.url("/fast/1"), gw.url("/fast/2")]).await;
    assert_eq!(
        answers.iter().map(|a| a.status).collect::<Vec<_>>(),
        vec![200, 200],
        "slots of reset clients are free 300 ms later; {answers:?}\nin flight now: {}",
        in_flight(&gw, "echo")
    );

    // Two held slots and a third request: 503 with Retry-After.
    let holders: Vec<_> = (0..2)
        .map(|i| spawn_get(&http, gw.url(&format!("/hold/{i}?delay_ms=5000")), &[]))
        .collect();
    wait_gauge("in flight", Duration::from_secs(10), 2.0, || {
        in_flight(&gw, "echo")
    })
    .await;
    let third = answer(http.get(gw.url("/third")).send().await.unwrap()).await;
    assert_capacity_problem(&third, "1");
    for h in &holders {
        h.abort();
    }
    wait_gauge("in flight", Duration::from_secs(3), 0.0, || {
        in_flight(&gw, "echo")
    })
    .await;
}

/// Case C10, second part, and item 9: 100 requests over each way a request can end early, then
/// every in-flight gauge is 0 and two fresh concurrent requests get both slots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c10_slots_come_back_after_every_kind_of_early_end() {
    let backend = Backend::start("paths");
    let sick = Backend::start("sick");
    let dead = free_addr(); // reserved, never bound: connections are refused
    let yaml = GatewayConfig::new()
        .section("observability", "{ access_log: false }")
        .upstream_with("slow", &backend.addr(), "max_concurrency: 2")
        .upstream_with(
            "tight",
            &backend.addr(),
            "max_concurrency: 2, read_timeout_ms: 150",
        )
        .upstream_with("dead", &dead, "max_concurrency: 2, connect_timeout_ms: 500")
        .upstream_with(
            "sick",
            &sick.addr(),
            "max_concurrency: 2, health_check: { path: \"/healthz\", interval_s: 1 }",
        )
        .route(&route("slow", "/slow"))
        .route(&route("tight", "/tight"))
        .route(&route("dead", "/dead"))
        .route(&route("sick", "/sick"))
        .yaml();
    let gw = Gateway::start(&yaml);
    sick.set_healthy(false);
    let addr = gw.listen_addr().to_string();
    const N: usize = 100;

    // 1. Client reset while waiting for the upstream: each request is reset only once the
    //    backend has it (so it certainly holds a slot).
    for i in 0..N {
        free_slot(&gw, "slow").await;
        let before = backend.stats().requests;
        let mut c = RawConn::connect(&addr, None).await.unwrap();
        c.send("GET", &format!("/slow/reset/{i}?delay_ms=5000"), &[])
            .await
            .unwrap();
        let reached = eventually(Duration::from_secs(10), || {
            backend.stats().requests > before
        })
        .await;
        assert!(reached, "reset #{i}: the request never reached the backend");
        c.reset();
    }

    // 2. Client timeout while waiting (the client gives up and closes normally).
    let impatient = client_builder()
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let mut timed_out = 0;
    for i in 0..N {
        match impatient
            .get(gw.url(&format!("/slow/timeout/{i}?delay_ms=5000")))
            .send()
            .await
        {
            Err(e) if e.is_timeout() => timed_out += 1,
            Ok(r) if r.status() == 503 => {} // the previous one not released yet: also an end
            other => panic!("client timeout #{i}: {other:?}"),
        }
    }
    assert!(timed_out >= N / 2, "only {timed_out} client timeouts");

    // 3. Client reset in the middle of a large response.
    for i in 0..N {
        free_slot(&gw, "slow").await;
        let mut c = RawConn::connect(&addr, None).await.unwrap();
        c.send("GET", &format!("/slow/body/{i}?size=20000000"), &[])
            .await
            .unwrap();
        let head = c.read_head().await.unwrap();
        assert_eq!(head.status, 200, "mid-response #{i}");
        c.read_some(4096).await.unwrap();
        c.reset();
    }

    // 4.-7. Upstream error, upstream refused, gateway read timeout, gateway error (no healthy
    //    backend). Two at a time; a request may find both slots still taken for an instant by
    //    the two before it (their answer is written before their context is dropped): a 503
    //    then, which is one more way to end.
    assert!(
        eventually(Duration::from_secs(10), || {
            http_get(&addr, "/sick/probe").ok().map(|r| r.status) == Some(502)
        })
        .await,
        "the sick backend is taken out of rotation"
    );
    let http = client();
    for (path, expected) in [
        ("/slow/error?status=500", 500),
        ("/dead/refused", 502),
        ("/tight/late?delay_ms=2000", 504),
        ("/sick/gateway-error", 502),
    ] {
        let mut got = Vec::new();
        for _ in 0..N / 2 {
            let pair = get_all(&http, vec![gw.url(path), gw.url(path)]).await;
            got.extend(pair.into_iter().map(|a| a.status));
        }
        let hits = got.iter().filter(|s| **s == expected).count();
        assert!(
            got.iter().all(|s| *s == expected || *s == 503),
            "{path}: {got:?}"
        );
        assert!(hits >= N / 2, "{path}: only {hits} × {expected}: {got:?}");
    }

    // Every gauge is back to 0 well before any 5 s backend sleep could have ended by itself.
    for upstream in ["slow", "tight", "dead", "sick"] {
        wait_gauge(
            &format!("{upstream} in flight"),
            Duration::from_secs(2),
            0.0,
            || in_flight(&gw, upstream),
        )
        .await;
    }
    // Two fresh concurrent requests get both slots (held 300 ms, so they overlap).
    let fresh = get_all(
        &http,
        vec![
            gw.url("/slow/fresh/1?delay_ms=300"),
            gw.url("/slow/fresh/2?delay_ms=300"),
        ],
    )
    .await;
    assert_eq!(count(&fresh, 200), 2, "{fresh:?}");
    // On `tight` both get a slot: an answer from the backend, or (on a machine so loaded that
    // even an immediate answer takes 150 ms) the gateway's 504, never a 503.
    let fresh = get_all(
        &http,
        vec![gw.url("/tight/fresh/1"), gw.url("/tight/fresh/2")],
    )
    .await;
    assert!(
        fresh.iter().all(|a| a.status == 200 || a.status == 504),
        "{fresh:?}"
    );
    // The dead and sick upstreams still have both slots: their answer is the 502, not a 503.
    for path in ["/dead/fresh", "/sick/fresh"] {
        let fresh = get_all(&http, vec![gw.url(path), gw.url(path)]).await;
        assert_eq!(count(&fresh, 502), 2, "{path}: {fresh:?}");
    }
}

/// Thousands of mixed requests, a quarter of them aborted one way or another, from many
/// concurrent clients against 2 slots and a short queue: afterwards nothing is in flight or
/// queued, and both slots work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_mixed_requests_leave_no_slot_behind() {
    let backend = Backend::start("mixed");
    let dead = free_addr();
    let yaml = GatewayConfig::new()
        .section("observability", "{ access_log: false }")
        .upstream_with(
            "echo",
            &backend.addr(),
            "max_concurrency: 2, queue: { max: 4, timeout_ms: 100 }, read_timeout_ms: 150",
        )
        .upstream_with("dead", &dead, "max_concurrency: 2")
        .route(&route("dead", "/dead"))
        .route(&route_all("echo"))
        .yaml();
    let gw = Gateway::start(&yaml);
    let addr = gw.listen_addr().to_string();
    const WORKERS: usize = 16;
    const PER_WORKER: usize = 150;

    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let addr = addr.clone();
        tasks.push(tokio::spawn(async move {
            let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
            for i in 0..PER_WORKER {
                let kind = (w * 7 + i) % 8;
                let mut c = RawConn::connect(&addr, None).await.unwrap();
                let path = match kind {
                    0 | 1 => "/ok".to_string(),
                    2 => "/ok?delay_ms=20".to_string(),
                    3 => "/err?status=500".to_string(),
                    4 => "/dead".to_string(),
                    5 => "/late?delay_ms=1000".to_string(), // gateway read timeout: 504
                    _ => "/abort?delay_ms=1000".to_string(),
                };
                c.send("GET", &path, &[]).await.unwrap();
                match kind {
                    6 => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        c.reset();
                    }
                    7 => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        c.close();
                    }
                    _ => {
                        let reply = c.read_reply().await.unwrap();
                        *statuses.entry(reply.status).or_default() += 1;
                    }
                }
            }
            statuses
        }));
    }
    let mut all = std::collections::BTreeMap::<u16, usize>::new();
    for t in tasks {
        for (s, n) in t.await.unwrap() {
            *all.entry(s).or_default() += n;
        }
    }
    eprintln!("mixed requests answered (aborted ones excluded): {all:?}");
    assert!(
        all.keys().all(|s| [200, 500, 502, 503, 504].contains(s)),
        "{all:?}"
    );
    assert!(all.get(&200).copied().unwrap_or(0) > 0, "{all:?}");
    for upstream in ["echo", "dead"] {
        wait_gauge(
            &format!("{upstream} in flight"),
            Duration::from_secs(5),
            0.0,
            || in_flight(&gw, upstream),
        )
        .await;
        assert_eq!(queue_depth(&gw, upstream), 0.0, "{upstream} queue");
    }
    let http = client();
    let fresh = get_all(
        &http,
        vec![gw.url("/f1?delay_ms=100"), gw.url("/f2?delay_ms=100")],
    )
    .await;
    assert_eq!(count(&fresh, 200), 2, "{fresh:?} after {all:?}");
}

/// A client that gives up while queued for a slot gives up its place: the queue shrinks at once,
/// the next client can queue, and the backend never works for the client that left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_gone_while_queued_gives_up_its_place() {
    let backend = Backend::start("qabort");
    let yaml = single(
        &backend.addr(),
        "max_concurrency: 1, queue: { max: 1, timeout_ms: 20000 }",
    );
    let gw = Gateway::start(&yaml);
    let http = client();

    let holder = spawn_get(&http, gw.url("/hold?delay_ms=3000"), &[]);
    wait_gauge("in flight", Duration::from_secs(10), 1.0, || {
        in_flight(&gw, "echo")
    })
    .await;
    let mut c = RawConn::connect(gw.listen_addr(), None).await.unwrap();
    c.send("GET", "/gone-while-queued", &[]).await.unwrap();
    wait_gauge("queue depth", Duration::from_secs(10), 1.0, || {
        queue_depth(&gw, "echo")
    })
    .await;
    c.reset();
    // The holder still runs for seconds; the queue must empty well before.
    wait_gauge("queue depth", Duration::from_secs(1), 0.0, || {
        queue_depth(&gw, "echo")
    })
    .await;
    let next = spawn_get(&http, gw.url("/next"), &[]);
    assert_eq!(holder.await.unwrap().status, 200);
    assert_eq!(
        next.await.unwrap().status,
        200,
        "the next client could queue"
    );
    assert_eq!(rejections(&gw, "echo", "queue_full"), 0.0);
    assert_eq!(
        backend.stats().requests,
        2,
        "the backend never served the client that left"
    );
}
