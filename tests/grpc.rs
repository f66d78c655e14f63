//! gRPC through tollgate, black-box, with the real `grpcio` client and server of `demo/grpc/`:
//! every refusal a gRPC client gets is a gRPC status it can act on (RESOURCE_EXHAUSTED with the
//! `RetryInfo` delay, UNAUTHENTICATED, PERMISSION_DENIED, UNAVAILABLE, UNIMPLEMENTED,
//! DEADLINE_EXCEEDED), admitted calls reach the server over h2c or TLS h2 with their metadata,
//! a streaming call is charged once, a held stream keeps its upstream slot until it is
//! cancelled, and a backend's own status and trailers pass through untouched.
//!
//! Limits are sized so that refill cannot change a count during a test (`per: 1d`).

mod common;
#[path = "common/grpc.rs"]
mod grpc_common;
#[path = "common/tls.rs"]
mod tls_common;

use common::*;
use grpc_common::{call, calls, GrpcServer, HeldCall};
use serde_json::Value;
use std::time::Duration;

const KEY: &str = "--metadata=x-api-key=key-of-acme";

/// A plaintext h2 (prior knowledge) listener.
const H2C_LISTENER: &str = "{ addr: \"{listen}\", h2: true }";

/// A real gRPC server behind a gateway with its own Redis: h2c listener, upstream `grpc` (h2) →
/// the server with extra `settings`, one route `/demo.Echo/` (API key required), tenant `acme` on
/// tier `T` sized `tier`.
struct Rig {
    _redis: RedisServer,
    server: GrpcServer,
    gw: Gateway,
}

impl Rig {
    fn start(settings: &str, tier: &str) -> Rig {
        Rig::start_with(GrpcServer::start(), settings, tier, |c| c)
    }

    /// [`start`](Self::start) with `server`, and `edit` applied to the config before it starts.
    fn start_with(
        server: GrpcServer,
        settings: &str,
        tier: &str,
        edit: impl FnOnce(GatewayConfig) -> GatewayConfig,
    ) -> Rig {
        let redis = RedisServer::start();
        let settings = match settings {
            "" => "h2: true".to_string(),
            more => format!("h2: true, {more}"),
        };
        let config = GatewayConfig::new()
            .listen(&[H2C_LISTENER])
            .redis(&redis.url(), STRICT_REDIS)
            .upstream_with("grpc", &server.addr(), &settings)
            .route("{ path_prefix: \"/demo.Echo/\", upstream: grpc, auth: required }")
            .tier("T", tier)
            .api_key("key-of-acme", "acme", "T");
        let gw = Gateway::start(&edit(config).yaml());
        Rig {
            _redis: redis,
            server,
            gw,
        }
    }

    /// The gateway's listener, `127.0.0.1:P`.
    fn target(&self) -> &str {
        self.gw.listen_addr()
    }
}

fn code(v: &Value) -> &str {
    v["code"].as_str().unwrap_or_default()
}

/// The trailing metadata `name` of a call.
fn trailer<'a>(v: &'a Value, name: &str) -> &'a str {
    v["trailing"][name].as_str().unwrap_or_default()
}

/// What the backend saw (the Unary reply: its metadata and the request).
fn seen_by_backend(v: &Value) -> Value {
    serde_json::from_str(v["replies"][0].as_str().expect("a reply")).expect("reply JSON")
}

#[test]
fn limited_calls_are_resource_exhausted_with_the_retry_delay() {
    let rig = Rig::start("", "{ limit: 1, per: 1d, burst: 3 }");
    let target = rig.target();

    // A streaming call of 5 messages is one request: charged once.
    let stream = call(target, &[KEY], &["stream", "--count", "5"]);
    assert_eq!(code(&stream), "OK", "{stream}");
    assert_eq!(stream["replies"].as_array().unwrap().len(), 5);

    let unary = calls(
        target,
        &[KEY, "--metadata=x-trace=t-1"],
        &["unary", "--n", "3"],
    );
    assert_eq!(code(&unary[0]), "OK", "{}", unary[0]);
    assert_eq!(code(&unary[1]), "OK", "{}", unary[1]);
    // Admitted calls carry the metadata the client sent, and the tenant tollgate found.
    let seen = seen_by_backend(&unary[0]);
    assert_eq!(seen["metadata"]["x-trace"], "t-1", "{seen}");
    assert_eq!(seen["metadata"]["x-tollgate-tenant"], "acme", "{seen}");
    assert_eq!(seen["request"], "hello");
    assert!(unary[1]["initial"]["ratelimit"].is_string(), "{}", unary[1]);

    let limited = &unary[2];
    assert_eq!(code(limited), "RESOURCE_EXHAUSTED", "{limited}");
    assert_eq!(limited["rich_status"], 8, "{limited}");
    assert!(limited["details"].as_str().unwrap().contains("exhausted"));
    // RetryInfo carries the wait that Retry-After gives, and the RateLimit fields are metadata.
    let retry_after: f64 = trailer(limited, "retry-after")
        .parse()
        .expect("retry-after");
    assert!(retry_after > 0.0, "{limited}");
    assert_eq!(
        limited["retry_delay_s"].as_f64(),
        Some(retry_after),
        "{limited}"
    );
    assert!(
        trailer(limited, "ratelimit").starts_with("\"T\";r=0"),
        "{limited}"
    );
    assert!(
        !trailer(limited, "ratelimit-policy").is_empty(),
        "{limited}"
    );
    assert!(!trailer(limited, "x-request-id").is_empty(), "{limited}");

    // A streaming call is refused the same way.
    let stream = call(target, &[KEY], &["stream", "--count", "5"]);
    assert_eq!(code(&stream), "RESOURCE_EXHAUSTED", "{stream}");
    assert_eq!(stream["replies"].as_array().unwrap().len(), 0);

    // Metrics count the refusals by the status they have for other clients (429), not by the
    // 200 of a trailers-only answer.
    let by_class = |class: &str| {
        let labels = [("route", "routes[0]"), ("status_class", class)];
        metric_or_zero(&rig.gw, "tollgate_requests_total", &labels)
    };
    let counted = wait_until(Duration::from_secs(30), || {
        (by_class("4xx"), by_class("2xx")) == (2.0, 3.0)
    });
    assert!(
        counted,
        "4xx: {}, 2xx: {}",
        by_class("4xx"),
        by_class("2xx")
    );
}

#[test]
fn refusals_before_the_backend_map_to_their_codes() {
    let unary_only = |c: GatewayConfig| {
        c.no_routes().route(
            "{ path_prefix: \"/demo.Echo/Unary\", upstream: grpc, auth: required, \
             max_body_bytes: 64 }",
        )
    };
    let rig = Rig::start_with(
        GrpcServer::start(),
        "",
        "{ limit: 1, per: 1d, burst: 3 }",
        unary_only,
    );
    let target = rig.target();

    let anonymous = call(target, &[], &["unary"]);
    assert_eq!(code(&anonymous), "UNAUTHENTICATED", "{anonymous}");
    assert_eq!(anonymous["rich_status"], 16);
    assert_eq!(anonymous["retry_delay_s"], Value::Null);

    // Routes match `/package.Service/Method` prefixes: Stream has none.
    let unrouted = call(target, &[KEY], &["stream", "--count", "1"]);
    assert_eq!(code(&unrouted), "UNIMPLEMENTED", "{unrouted}");

    let routed = call(target, &[KEY], &["unary"]);
    assert_eq!(code(&routed), "OK", "{routed}");

    // A request message over the route's body limit, noticed while it streams.
    let big = "x".repeat(200);
    let too_big = call(target, &[KEY], &["unary", "--request", &big]);
    assert_eq!(code(&too_big), "RESOURCE_EXHAUSTED", "{too_big}");
    assert_eq!(too_big["rich_status"], 8);
}

/// The server's view of the connection a Unary call came on.
fn peer_of(v: &Value) -> String {
    seen_by_backend(v)["peer"]
        .as_str()
        .expect("peer")
        .to_string()
}

#[test]
fn h2_connections_to_a_backend_are_pooled_and_bounded_by_h2_max_streams() {
    // (settings, whether a call made while a stream is held shares the held stream's connection)
    for (settings, multiplexed) in [("", true), ("h2_max_streams: 1", false)] {
        let rig = Rig::start(settings, "{ limit: 1, per: 1d, burst: 100 }");
        let target = rig.target();

        let held = HeldCall::open(target, &[KEY]);
        let during = call(target, &[KEY], &["unary"]);
        assert_eq!(code(&during), "OK", "{during}");
        let same = peer_of(&during) == held.first_reply;
        assert_eq!(
            same, multiplexed,
            "{settings:?}: held on {}, {during}",
            held.first_reply
        );
        // Calls one after another reuse the pooled connection.
        let after = calls(target, &[KEY], &["unary", "--n", "2"]);
        assert_eq!(peer_of(&after[0]), peer_of(&after[1]), "{settings:?}");
        held.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_stream_keeps_its_slot_and_a_full_upstream_is_unavailable() {
    let settings = "max_concurrency: 1, retry_after_s: 2";
    let rig = Rig::start(settings, "{ limit: 1, per: 1d, burst: 100 }");
    let target = rig.target();
    let in_flight = || {
        metric_or_zero(
            &rig.gw,
            "tollgate_upstream_in_flight",
            &[("upstream", "grpc")],
        )
    };

    let held = HeldCall::open(target, &[KEY]);
    assert_eq!(in_flight(), 1.0);
    let full = call(target, &[KEY], &["unary"]);
    assert_eq!(code(&full), "UNAVAILABLE", "{full}");
    assert_eq!(full["rich_status"], 14);
    assert_eq!(full["retry_delay_s"].as_f64(), Some(2.0), "{full}");
    assert_eq!(trailer(&full, "retry-after"), "2");
    // Still held: another call is refused too.
    let again = call(target, &[KEY], &["stream", "--count", "1"]);
    assert_eq!(code(&again), "UNAVAILABLE", "{again}");

    let cancelled = held.cancel();
    assert_eq!(code(&cancelled), "CANCELLED", "{cancelled}");
    rig.server.wait_hold_ended(1);
    assert!(
        eventually(Duration::from_secs(30), || in_flight() == 0.0).await,
        "the cancelled stream's slot was not released"
    );
    let after = call(target, &[KEY], &["unary"]);
    assert_eq!(code(&after), "OK", "{after}");
}

#[test]
fn backend_statuses_pass_through_and_backend_failures_are_grpc_statuses() {
    let mut rig = Rig::start("read_timeout_ms: 1000", "{ limit: 1, per: 1d, burst: 100 }");
    let target = rig.target().to_string();
    let target = target.as_str();

    // The backend's own status, message and trailers reach the client untouched.
    let failed = call(target, &[KEY], &["fail"]);
    assert_eq!(code(&failed), "NOT_FOUND", "{failed}");
    assert_eq!(failed["details"], "no such thing");
    assert_eq!(trailer(&failed, "x-backend-trailer"), "kept", "{failed}");

    let slow = call(target, &[KEY], &["slow", "--seconds", "20"]);
    assert_eq!(code(&slow), "DEADLINE_EXCEEDED", "{slow}");
    assert_eq!(slow["rich_status"], 4);

    rig.server.stop();
    let down = call(target, &[KEY], &["unary"]);
    assert_eq!(code(&down), "UNAVAILABLE", "{down}");
    assert_eq!(down["rich_status"], 14);
}

#[test]
fn a_quota_store_down_with_on_failure_closed_is_unavailable() {
    let dead_redis = format!("redis://{}", free_addr());
    let redis_down = |c: GatewayConfig| c.redis(&dead_redis, "timeout_ms: 200, on_failure: closed");
    let rig = Rig::start_with(
        GrpcServer::start(),
        "",
        "{ limit: 1, per: 1d, burst: 3 }",
        redis_down,
    );
    let refused = call(rig.target(), &[KEY], &["unary"]);
    assert_eq!(code(&refused), "UNAVAILABLE", "{refused}");
    assert!(refused["retry_delay_s"].as_f64().is_some(), "{refused}");
}

#[test]
fn the_edge_limit_is_resource_exhausted() {
    let edge = |c: GatewayConfig| c.edge("{ limit: 1, per: 1d, burst: 1 }");
    let rig = Rig::start_with(
        GrpcServer::start(),
        "",
        "{ limit: 1, per: 1d, burst: 100 }",
        edge,
    );
    let both = calls(rig.target(), &[KEY], &["unary", "--n", "2"]);
    assert_eq!(code(&both[0]), "OK", "{}", both[0]);
    assert_eq!(code(&both[1]), "RESOURCE_EXHAUSTED", "{}", both[1]);
    assert!(both[1]["retry_delay_s"].as_f64().unwrap_or(0.0) > 0.0);
}

#[test]
fn grpc_over_a_tls_listener_to_a_tls_h2_backend() {
    let ca = tls_common::Ca::new("grpc");
    let gateway_cert = ca.server("gateway.test", &["localhost", "127.0.0.1"]);
    let backend_cert = ca.server("backend.test", &["backend.test"]);
    let server = GrpcServer::start_tls(&backend_cert.cert_file, &backend_cert.key_file);
    let tls = format!(
        "tls: {{ sni: backend.test, ca_file: \"{}\" }}",
        ca.cert_file
    );
    let listener = format!(
        "{{ addr: \"{{listen}}\", tls: {{ {} }}, h2: true }}",
        gateway_cert.yaml_pair()
    );
    let tls_listener = |c: GatewayConfig| c.listen(&[&listener]);
    let rig = Rig::start_with(
        server,
        &tls,
        "{ limit: 1, per: 1d, burst: 2 }",
        tls_listener,
    );
    let tls_opt = format!("--tls={}", ca.cert_file);
    let both = calls(rig.target(), &[KEY, &tls_opt], &["unary", "--n", "3"]);
    assert_eq!(code(&both[0]), "OK", "{}", both[0]);
    assert_eq!(
        seen_by_backend(&both[0])["metadata"]["x-forwarded-proto"],
        "https"
    );
    assert_eq!(code(&both[2]), "RESOURCE_EXHAUSTED", "{}", both[2]);
}

#[test]
fn a_token_naming_a_tier_that_does_not_exist_is_permission_denied() {
    let secrets = tempfile::tempdir().expect("temp dir");
    let secret_file = secrets.path().join("hs256.secret");
    let secret = "grpc-test-hmac-secret-0123456789abcdef";
    std::fs::write(&secret_file, secret).expect("write secret");
    let jwt = format!(
        "{{ tier_claim: tier, keys: [{{ kid: h1, algorithm: HS256, secret_file: \"{}\" }}] }}",
        secret_file.display()
    );
    let with_jwt = |c: GatewayConfig| c.jwt(&jwt);
    let rig = Rig::start_with(
        GrpcServer::start(),
        "",
        "{ limit: 1, per: 1d, burst: 3 }",
        with_jwt,
    );
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + 3600;
    let claims = serde_json::json!({ "sub": "acme", "tier": "platinum", "exp": exp });
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some("h1".to_string());
    let key = jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()).expect("HMAC key");
    let token = jsonwebtoken::encode(&header, &claims, &key).expect("token");
    let bearer = format!("--metadata=authorization=Bearer {token}");
    let denied = call(rig.target(), &[&bearer], &["unary"]);
    assert_eq!(code(&denied), "PERMISSION_DENIED", "{denied}");
    assert!(
        denied["details"].as_str().unwrap().contains("platinum"),
        "{denied}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_without_a_healthy_backend_is_unavailable() {
    // The health check's GET goes over h2c, which a plain gRPC server refuses: the backend is
    // marked unhealthy after the first round.
    let settings = "health_check: { path: \"/healthz\", interval_s: 1 }";
    let rig = Rig::start(settings, "{ limit: 1, per: 1d, burst: 1000 }");
    let mut last = Value::Null;
    let unhealthy = eventually(Duration::from_secs(30), || {
        last = call(rig.target(), &[KEY], &["unary"]);
        code(&last) == "UNAVAILABLE"
    })
    .await;
    assert!(unhealthy, "{last}");
    assert!(
        last["details"]
            .as_str()
            .unwrap()
            .contains("no healthy backend"),
        "{last}"
    );
}

/// A streaming call holds its tenant's fleet-wide concurrency lease (`max_in_flight`) for its
/// whole life: another call is RESOURCE_EXHAUSTED until it is cancelled, then the lease is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_stream_keeps_its_concurrency_lease() {
    let rig = Rig::start("", "{ limit: 1, per: 1d, burst: 100, max_in_flight: 1 }");
    let target = rig.target();
    let held = HeldCall::open(target, &[KEY]);
    let refused = call(target, &[KEY], &["unary"]);
    assert_eq!(code(&refused), "RESOURCE_EXHAUSTED", "{refused}");
    assert_eq!(
        trailer(&refused, "ratelimit-policy"),
        "\"T.concurrency\";q=1"
    );
    let cancelled = held.cancel();
    assert_eq!(code(&cancelled), "CANCELLED", "{cancelled}");
    let mut after = Value::Null;
    let back = eventually(Duration::from_secs(10), || {
        after = call(target, &[KEY], &["unary"]);
        code(&after) == "OK"
    })
    .await;
    assert!(
        back,
        "the cancelled stream's lease was not given back: {after}"
    );
}

/// A call tollgate refuses itself after taking its fleet-wide lease, its upstream slot and its
/// usage reserve (a message over the route's `max_body_bytes`, noticed while it streams to the
/// h2 backend) gives all three back at once, not when the backend's `read_timeout_ms` (60 s
/// here) ends the proxying: the next call goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_refused_mid_body_gives_its_lease_slot_and_reserve_back() {
    let tier = "{ limit: 1, per: 1d, burst: 100, max_in_flight: 1, usage: { limit: 1, \
                per: 1d, burst: 100, reserve: 100, from: { header: x-usage-tokens } } }";
    let limited = |c: GatewayConfig| {
        c.no_routes().route(
            "{ path_prefix: \"/demo.Echo/\", upstream: grpc, auth: required, \
             max_body_bytes: 64 }",
        )
    };
    let settings = "max_concurrency: 1, read_timeout_ms: 60000";
    let rig = Rig::start_with(GrpcServer::start(), settings, tier, limited);
    let target = rig.target();
    let big = "x".repeat(200);
    let too_big = call(target, &[KEY], &["unary", "--request", &big]);
    assert_eq!(code(&too_big), "RESOURCE_EXHAUSTED", "{too_big}");
    let mut after = Value::Null;
    let admitted = eventually(Duration::from_secs(10), || {
        after = call(target, &[KEY], &["unary"]);
        code(&after) == "OK"
    })
    .await;
    assert!(admitted, "still held after the refusal: {after}");
    let refunded = metric_or_zero(
        &rig.gw,
        "tollgate_usage_settlements_total",
        &[("tier", "T"), ("outcome", "refunded")],
    );
    assert_eq!(refunded, 1.0);
}

/// A rule's penalty box (`block_for`) over gRPC: the refusal that starts it and each call during
/// it are RESOURCE_EXHAUSTED with the block's time as the retry delay.
#[test]
fn a_penalty_box_is_resource_exhausted_for_the_block() {
    // The bucket alone would say 10 minutes; the block says an hour.
    let rules = "\n  - { name: pen, key: [tenant], limit: 1, per: 10m, block_for: 1h }\n";
    let rig = Rig::start_with(
        GrpcServer::start(),
        "",
        "{ limit: 1, per: 1d, burst: 100 }",
        |c| c.section("limits", rules),
    );
    let unary = calls(rig.target(), &[KEY], &["unary", "--n", "3"]);
    assert_eq!(code(&unary[0]), "OK", "{}", unary[0]);
    for refused in &unary[1..] {
        assert_eq!(code(refused), "RESOURCE_EXHAUSTED", "{refused}");
        let delay = refused["retry_delay_s"].as_f64().expect("RetryInfo");
        assert!((3500.0..=3600.0).contains(&delay), "{refused}");
    }
    assert!(
        unary[2]["details"].as_str().unwrap().contains("blocks it"),
        "{}",
        unary[2]
    );
}

/// `count.status` over gRPC: a call's status is in its trailers and its HTTP status is 200, so
/// a rule counting 401s gives every call's count back (none is refused however many come); a
/// shadow rule counting 2xx counts each call and reports what it would refuse, but never
/// refuses.
#[test]
fn counting_by_outcome_sees_a_calls_http_status() {
    let rules = "\n  - { name: fails, key: [tenant], limit: 1, per: 1d, count: { status: [401] } }\n  - { name: watch, key: [tenant], limit: 1, per: 1d, count: { status: [\"2xx\"] }, mode: shadow }\n";
    let rig = Rig::start_with(
        GrpcServer::start(),
        "",
        "{ limit: 1, per: 1d, burst: 100 }",
        |c| c.section("limits", rules),
    );
    let unary = calls(rig.target(), &[KEY], &["unary", "--n", "4"]);
    for c in &unary {
        assert_eq!(code(c), "OK", "{c}");
    }
    let settled = |policy: &str, outcome: &str| {
        metric_or_zero(
            &rig.gw,
            "tollgate_count_settlements_total",
            &[("policy", policy), ("outcome", outcome)],
        )
    };
    assert_eq!(settled("fails", "given_back"), 4.0);
    assert_eq!(
        settled("watch", "counted"),
        1.0,
        "the one call its bucket admitted"
    );
    let decisions = |outcome: &str| {
        metric_or_zero(
            &rig.gw,
            "tollgate_rule_decisions_total",
            &[("rule", "watch"), ("outcome", outcome)],
        )
    };
    assert_eq!(decisions("shadow_limited"), 3.0);
}
