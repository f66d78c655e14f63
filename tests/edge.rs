//! The edge limiter, black-box: which address a request is keyed by (TCP peer, `X-Forwarded-For`
//! behind trusted proxies, IPv6 /64 aggregation, IPv4-mapped IPv6), exemptions, the shape of its
//! rejections, that a request it rejects costs nothing downstream (backend, Redis, tenant
//! tokens), and that its memory stays bounded under a flood of distinct addresses.
//!
//! Every edge bucket here has burst 3 and practically no refill (`limit: 1, per: 1d`), so counts
//! are exact whatever the machine's speed. Loopback addresses stand in for the network:
//! 127.0.0.2 is the trusted proxy, other 127.0.0.x addresses are outside clients.

mod common;

use common::*;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";
const TRUSTED: &str = "127.0.0.2";

/// A gateway config: one echo upstream behind a catch-all route with `auth`, and the edge
/// limiter `{ limit: 1, per: 1d, burst: 3, <edge> }` (`edge`: further inline mapping entries).
fn config(backend: &str, edge: &str, auth: &str) -> GatewayConfig {
    GatewayConfig::echo(backend, auth).edge(&format!("{{ limit: 1, per: 1d, burst: 3, {edge} }}"))
}

/// Sends `n` GETs from `from` with the `X-Forwarded-For` values `xff(i)` (None: no header) and
/// returns the statuses.
async fn statuses(
    gw: &Gateway,
    from: &str,
    n: usize,
    xff: impl Fn(usize) -> Option<String>,
) -> Vec<u16> {
    let http = client_from(ip(from));
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut req = http.get(gw.url("/edge"));
        if let Some(v) = xff(i) {
            req = req.header("x-forwarded-for", v);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET from {from}: {e}"));
        out.push(resp.status().as_u16());
    }
    out
}

fn admitted_then_limited(admitted: usize, limited: usize) -> Vec<u16> {
    let mut v = vec![200; admitted];
    v.extend(std::iter::repeat_n(429, limited));
    v
}

fn random_v4() -> String {
    let a: u32 = rand::random();
    Ipv4Addr::from(a).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c06_xff_cannot_choose_the_bucket() {
    let backend = Backend::start("c06");
    let yaml = config(
        &backend.addr(),
        "trusted_proxies: [\"127.0.0.2/32\", \"10.0.0.0/8\"]",
        "none",
    )
    .yaml();
    let gw = Gateway::start(&yaml);

    // 1. An untrusted client cannot pick a fresh bucket per request with the header.
    let got = statuses(&gw, "127.0.0.3", 10, |_| Some(random_v4())).await;
    assert_eq!(got, admitted_then_limited(3, 7), "untrusted, random XFF");

    // 2. Through the trusted peer the key is the right-most untrusted entry; the random left
    //    part (client-controlled) changes nothing.
    let got = statuses(&gw, TRUSTED, 10, |_| {
        Some(format!("{}, 198.51.100.7", random_v4()))
    })
    .await;
    assert_eq!(got, admitted_then_limited(3, 7), "trusted, <random>, .7");

    // 3. Two trusted hops: 10.0.0.3 is trusted too, so the key is 198.51.100.8 ...
    let got = statuses(&gw, TRUSTED, 4, |_| {
        Some(format!("{}, 198.51.100.8, 10.0.0.3", random_v4()))
    })
    .await;
    assert_eq!(got, admitted_then_limited(3, 1), "two trusted hops");
    // ... which is the same bucket as 198.51.100.8 arriving through one hop.
    let got = statuses(&gw, TRUSTED, 1, |_| Some("198.51.100.8".into())).await;
    assert_eq!(got, vec![429], "198.51.100.8 directly shares the bucket");

    // 4. An outsider claiming to be 198.51.100.9 spends only its own bucket ...
    let got = statuses(&gw, "127.0.0.4", 10, |_| Some("198.51.100.9".into())).await;
    assert_eq!(got, admitted_then_limited(3, 7), "outsider claiming .9");
    // ... and the real 198.51.100.9 behind the trusted proxy still has its full burst.
    let got = statuses(&gw, TRUSTED, 4, |_| Some("198.51.100.9".into())).await;
    assert_eq!(
        got,
        admitted_then_limited(3, 1),
        "real .9 through the proxy"
    );

    // 5. An unparsable entry: no 5xx, and the documented fallback key (the last good address
    //    walking from the right, here the trusted peer itself) is used. Show it by sharing the
    //    peer's own bucket: two plain requests from the peer, then the garbage header takes the
    //    third token and is limited next, and so is the peer without the header.
    let got = statuses(&gw, TRUSTED, 2, |_| None).await;
    assert_eq!(got, vec![200, 200], "trusted peer's own bucket");
    let got = statuses(&gw, TRUSTED, 3, |_| Some("198.51.100.12, garbage".into())).await;
    assert_eq!(
        got,
        vec![200, 429, 429],
        "garbage entry falls back to the peer"
    );
    let got = statuses(&gw, TRUSTED, 1, |_| None).await;
    assert_eq!(got, vec![429], "the peer's bucket is the one spent");
    // 198.51.100.12 itself was never charged.
    let got = statuses(&gw, TRUSTED, 1, |_| Some("198.51.100.12".into())).await;
    assert_eq!(got, vec![200], "198.51.100.12 untouched");
    // Other malformed shapes never produce a 5xx either.
    for bad in [
        "",
        ",,,",
        "unknown",
        "[::1",
        "1.2.3.4:notaport",
        "999.1.1.1, ::zz",
    ] {
        let got = statuses(&gw, TRUSTED, 1, |_| Some(bad.to_string())).await;
        assert!(got[0] < 500, "XFF {bad:?} gave {got:?}");
    }

    // Only admitted requests reached the backend: 3 + 3 + 3 + 3 + 3 + 2 + 1 + 1 = 19.
    assert_eq!(backend.stats().requests, 19);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_peer_is_keyed_by_its_own_address_and_proxied_clients_are_separate() {
    let backend = Backend::start("keys");
    let yaml = config(
        &backend.addr(),
        "trusted_proxies: [\"127.0.0.2/32\"]",
        "none",
    )
    .yaml();
    let gw = Gateway::start(&yaml);

    // An untrusted peer claiming 1.2.3.4 is keyed by its own address.
    let got = statuses(&gw, "127.0.0.3", 4, |_| Some("1.2.3.4".into())).await;
    assert_eq!(got, admitted_then_limited(3, 1));
    let got = statuses(&gw, "127.0.0.3", 1, |_| None).await;
    assert_eq!(got, vec![429], "same peer without the header: same bucket");
    // 1.2.3.4 was never charged: through the trusted proxy it has its whole burst.
    let got = statuses(&gw, TRUSTED, 4, |_| Some("1.2.3.4".into())).await;
    assert_eq!(got, admitted_then_limited(3, 1));

    // Two clients behind the trusted proxy: separate buckets.
    let got = statuses(&gw, TRUSTED, 4, |_| Some("198.51.100.21".into())).await;
    assert_eq!(got, admitted_then_limited(3, 1), "client .21");
    let got = statuses(&gw, TRUSTED, 4, |_| Some("198.51.100.22".into())).await;
    assert_eq!(got, admitted_then_limited(3, 1), "client .22");

    // A spoofed left-most entry behind the trusted proxy changes nothing: still .21's bucket,
    // and the spoofed address is not charged.
    let got = statuses(&gw, TRUSTED, 3, |i| {
        Some(format!("203.0.113.{}, 198.51.100.21", i + 1))
    })
    .await;
    assert_eq!(got, vec![429; 3], "spoofed left part, exhausted .21");
    let got = statuses(&gw, TRUSTED, 1, |_| Some("203.0.113.1".into())).await;
    assert_eq!(got, vec![200], "the spoofed address was not charged");
    // Several header instances are one list (RFC 9110): the right-most untrusted entry counts.
    let http = client_from(ip(TRUSTED));
    let resp = http
        .get(gw.url("/edge"))
        .header("x-forwarded-for", "198.51.100.23")
        .header("x-forwarded-for", "198.51.100.22")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429, "keyed by the last instance (.22)");

    // The trusted proxy's own address was never charged by its clients.
    let got = statuses(&gw, TRUSTED, 4, |_| None).await;
    assert_eq!(got, admitted_then_limited(3, 1), "proxy's own bucket");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv6_clients_share_one_bucket_per_64_and_mapped_ipv4_is_ipv4() {
    let backend = Backend::start("v6");
    // A second, dual-stack listener (where the host has one): IPv4 clients connecting to it
    // appear as ::ffff:127.0.0.x.
    let dual_stack = std::fs::read_to_string("/proc/sys/net/ipv6/bindv6only")
        .is_ok_and(|v| v.trim() == "0")
        && std::net::TcpListener::bind("[::]:0").is_ok();
    let base = config(
        &backend.addr(),
        "trusted_proxies: [\"127.0.0.2/32\"]",
        "none",
    );
    let mut last_err = String::new();
    let mut started = None;
    for _attempt in 0..3 {
        let v6_port = free_port();
        let yaml = if dual_stack {
            let v6 = format!("\"[::]:{v6_port}\"");
            base.clone().listen(&["\"{listen}\"", &v6]).yaml()
        } else {
            base.yaml()
        };
        match Gateway::try_start(&yaml) {
            Ok(gw) => {
                started = Some((gw, v6_port));
                break;
            }
            Err(e) => last_err = e, // [::]:port taken on another address: try another port
        }
    }
    let (gw, v6_port) = started.unwrap_or_else(|| panic!("{last_err}"));

    // Ten addresses of one /64 are one client.
    let got = statuses(&gw, TRUSTED, 10, |i| Some(format!("2001:db8::{:x}", i + 1))).await;
    assert_eq!(got, admitted_then_limited(3, 7), "2001:db8::1 .. ::a");
    // Also when written differently (full form, brackets and port).
    let got = statuses(&gw, TRUSTED, 2, |i| {
        Some(
            [
                "2001:0db8:0000:0000:ffff:ffff:ffff:ffff",
                "[2001:db8::beef]:443",
            ][i]
                .to_string(),
        )
    })
    .await;
    assert_eq!(got, vec![429, 429], "other spellings of the same /64");
    // The neighbouring /64 is another client.
    let got = statuses(&gw, TRUSTED, 4, |_| Some("2001:db8:0:1::1".into())).await;
    assert_eq!(got, admitted_then_limited(3, 1), "2001:db8:0:1::/64");

    // IPv4-mapped IPv6 and IPv4 are one client (via the header) ...
    let got = statuses(&gw, TRUSTED, 2, |_| Some("::ffff:198.51.100.30".into())).await;
    assert_eq!(got, vec![200, 200]);
    let got = statuses(&gw, TRUSTED, 2, |_| Some("198.51.100.30".into())).await;
    assert_eq!(got, vec![200, 429], "::ffff:198.51.100.30 = 198.51.100.30");
    let got = statuses(&gw, TRUSTED, 1, |_| {
        Some("[::ffff:198.51.100.30]:8080".into())
    })
    .await;
    assert_eq!(got, vec![429]);

    if !dual_stack {
        eprintln!("no dual-stack IPv6 socket on this host: mapped TCP peers not tested");
        return;
    }
    // ... and as the TCP peer: 127.0.0.1 through the dual-stack listener is ::ffff:127.0.0.1.
    let v6_addr = format!("127.0.0.1:{v6_port}");
    let mut seen = Vec::new();
    for i in 0..4 {
        let addr = if i % 2 == 0 {
            gw.listen_addr().to_string()
        } else {
            v6_addr.clone()
        };
        let mut conn = RawConn::connect(&addr, Some(ip("127.0.0.1")))
            .await
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        let reply = conn.request("GET", "/edge", &[]).await.unwrap();
        seen.push(reply.status);
    }
    assert_eq!(seen, vec![200, 200, 200, 429], "v4 and mapped peer share");
    // The mapped peer is also matched against trusted_proxies as IPv4 (127.0.0.2/32).
    let mut conn = RawConn::connect(&v6_addr, Some(ip(TRUSTED))).await.unwrap();
    for expected in [200, 200, 200, 429] {
        let reply = conn
            .request("GET", "/edge", &[("X-Forwarded-For", "198.51.100.31")])
            .await
            .unwrap();
        assert_eq!(reply.status, expected, "mapped trusted peer forwards .31");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exempt_addresses_are_never_limited() {
    let backend = Backend::start("exempt");
    let yaml = config(
        &backend.addr(),
        "trusted_proxies: [\"127.0.0.2/32\"], \
         exempt: [\"127.0.0.4/32\", \"198.51.100.48/29\", \"2001:db8:e::/48\"]",
        "none",
    )
    .yaml();
    let gw = Gateway::start(&yaml);

    let got = statuses(&gw, "127.0.0.4", 12, |_| None).await;
    assert_eq!(got, vec![200; 12], "exempt peer");
    // Exempt peers are not trusted proxies: their header is ignored, they stay exempt.
    let got = statuses(&gw, "127.0.0.4", 4, |_| Some("198.51.100.1".into())).await;
    assert_eq!(got, vec![200; 4], "exempt peer with a header");
    // Exempt clients behind the trusted proxy, IPv4 and IPv6 (and IPv4-mapped).
    let got = statuses(&gw, TRUSTED, 12, |i| {
        Some(format!("198.51.100.{}", 48 + (i % 8)))
    })
    .await;
    assert_eq!(got, vec![200; 12], "exempt /29 behind the proxy");
    let got = statuses(&gw, TRUSTED, 6, |_| Some("::ffff:198.51.100.50".into())).await;
    assert_eq!(got, vec![200; 6], "mapped exempt address");
    let got = statuses(&gw, TRUSTED, 6, |i| Some(format!("2001:db8:e:{i}::1"))).await;
    assert_eq!(got, vec![200; 6], "exempt /48");
    // Neighbours are limited as usual.
    let got = statuses(&gw, "127.0.0.5", 4, |_| None).await;
    assert_eq!(got, admitted_then_limited(3, 1), "non-exempt peer");
    let got = statuses(&gw, TRUSTED, 4, |_| Some("198.51.100.56".into())).await;
    assert_eq!(got, admitted_then_limited(3, 1), "just outside the /29");

    assert_eq!(backend.stats().requests, 12 + 4 + 12 + 6 + 6 + 3 + 3);
    // Exempt requests are not tracked: only the two limited clients are.
    let tracked = gw.metric("tollgate_edge_tracked_clients").unwrap();
    assert_eq!(tracked, 2.0);
}

/// An entry that is not ASCII (obs-text bytes, allowed in a header value) is one malformed entry
/// like any other: the walk from the right stops at the last good address before it. It must not
/// make the whole header disappear (which would key the client as the proxy itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_ascii_xff_entry_is_one_malformed_entry() {
    let backend = Backend::start("obs-text");
    let yaml = config(
        &backend.addr(),
        "trusted_proxies: [\"127.0.0.2/32\", \"10.0.0.0/8\"]",
        "none",
    )
    .yaml();
    let gw = Gateway::start(&yaml);
    let mut conn = RawConn::connect(gw.listen_addr(), Some(ip(TRUSTED)))
        .await
        .unwrap();
    let mut got = Vec::new();
    for _ in 0..4 {
        // A proxy that merges into one line: "<client's value>, <address it saw>".
        let reply = conn
            .request(
                "GET",
                "/edge",
                &[("X-Forwarded-For", "caf\u{e9}, 198.51.100.40, 10.0.0.9")],
            )
            .await
            .unwrap();
        got.push(reply.status);
    }
    assert_eq!(got, admitted_then_limited(3, 1), "keyed by 198.51.100.40");
    let got = statuses(&gw, TRUSTED, 1, |_| Some("198.51.100.40".into())).await;
    assert_eq!(got, vec![429], "same bucket as 198.51.100.40");
    let got = statuses(&gw, TRUSTED, 4, |_| None).await;
    assert_eq!(
        got,
        admitted_then_limited(3, 1),
        "the proxy's own bucket untouched"
    );
}

/// The tenant's remaining tokens from `RateLimit: "T";r=<n>;t=<s>`.
fn remaining(resp: &reqwest::Response) -> u64 {
    let v = header_str(resp, "ratelimit").expect("RateLimit header on an admitted request");
    v.split(';')
        .find_map(|p| p.trim().strip_prefix("r="))
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no r= in RateLimit {v:?}"))
}

/// Items 12 and 14: an edge rejection is a 429 problem naming the `edge` policy with a
/// Retry-After, and it reaches neither the backend nor Redis nor the tenant's bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_rejection_names_the_edge_policy_and_spends_nothing_downstream() {
    let redis = RedisServer::start();
    let backend = Backend::start("spend");
    let yaml = config(&backend.addr(), "max_clients: 1000", "required")
        .redis(&redis.url(), "timeout_ms: 2000")
        .api_key("k1-secret", "acme", "T")
        .api_key("k2-secret", "beta", "T")
        .tier("T", "{ limit: 1, per: 1d, burst: 10 }")
        .yaml();
    let gw = Gateway::start(&yaml);
    let a = client_from(ip("127.0.0.2"));
    let b = client_from(ip("127.0.0.3"));
    let send = |http: &reqwest::Client, key: &str| {
        http.get(gw.url("/spend"))
            .header("x-api-key", key.to_string())
            .send()
    };

    // Address A spends its edge burst with k1 (tenant acme: 9, 8, 7 left).
    for expected in [9, 8, 7] {
        let resp = send(&a, "k1-secret").await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(remaining(&resp), expected);
    }

    // From now on A is limited at the edge, whatever key it sends.
    for key in [
        "k2-secret",
        "k2-secret",
        "k1-secret",
        "k1-secret",
        "k2-secret",
    ] {
        let resp = send(&a, key).await.unwrap();
        let retry_after = header_str(&resp, "retry-after").expect("Retry-After on edge 429");
        assert!(
            header_str(&resp, "ratelimit").is_none(),
            "an edge rejection never passed the tenant stage"
        );
        let v = expect_problem(resp, 429).await;
        assert_eq!(v["type"], QUOTA_EXCEEDED, "{v}");
        assert_eq!(v["violated-policies"], serde_json::json!(["edge"]), "{v}");
        // One token per day: the wait for the next one is most of a day, never 0.
        let secs: u64 = retry_after.parse().expect("Retry-After is delta-seconds");
        assert!(
            (80_000..=86_400).contains(&secs),
            "Retry-After {secs} for a 1/day refill"
        );
    }
    // Nothing of that reached the backend or Redis: beta has no key at all.
    assert_eq!(backend.stats().requests, 3);
    assert!(redis.keys("*{beta}*").is_empty(), "{:?}", redis.keys("*"));
    assert_eq!(redis.keys("*{acme}*").len(), 1, "{:?}", redis.keys("*"));

    // Item 14: the edge rejections consumed no tenant token: acme's next admitted request (from
    // another address) leaves 6, and beta's first leaves 9.
    let resp = send(&b, "k1-secret").await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(remaining(&resp), 6);
    let resp = send(&b, "k2-secret").await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(remaining(&resp), 9);
    assert_eq!(backend.stats().requests, 5);
    let labels = [("layer", "edge"), ("outcome", "limited"), ("tier", "-")];
    let limited = metric_or_zero(&gw, "tollgate_decisions_total", &labels);
    assert_eq!(limited, 5.0);
}

/// Flood size: 200 000 distinct client addresses (40 × `max_clients`).
const FLOOD: u32 = 200_000;
const MAX_CLIENTS: u32 = 5_000;
const WORKERS: u32 = 32;
/// Every worker interleaves one request from the hot abuser per this many flood requests.
const HOT_EVERY: u32 = 50;

/// Memory stays bounded under a flood of distinct addresses, and a hot abuser in the middle of
/// the flood is never evicted into a fresh burst.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_of_distinct_clients_stays_bounded_and_hot_abuser_stays_limited() {
    let backend = Backend::start("flood");
    // Only /api is routed: flood requests admitted by the edge end as cheap 404s (the edge runs
    // before routing), so the flood costs the backend nothing.
    let yaml = GatewayConfig::new()
        .edge(&format!(
            "{{ limit: 1, per: 1d, burst: 3, trusted_proxies: [\"127.0.0.2/32\"], \
             max_clients: {MAX_CLIENTS} }}"
        ))
        .section("observability", "{ access_log: false }")
        .upstream("echo", &backend.addr())
        .route("{ path_prefix: \"/api\", upstream: echo, auth: none }")
        .yaml();
    let gw = Gateway::start(&yaml);
    let addr = gw.listen_addr().to_string();
    let hot_admitted = Arc::new(AtomicU64::new(0));
    let hot_limited = Arc::new(AtomicU64::new(0));
    let started = Instant::now();

    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let addr = addr.clone();
        let hot_admitted = hot_admitted.clone();
        let hot_limited = hot_limited.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = RawConn::connect(&addr, Some(ip(TRUSTED))).await.unwrap();
            let mut i = w;
            let mut n = 0u32;
            while i < FLOOD {
                // 100.64.0.0/10: 4 M distinct, untrusted addresses.
                let client = Ipv4Addr::from(0x6440_0000 + i).to_string();
                let reply = conn
                    .request("GET", "/flood", &[("X-Forwarded-For", &client)])
                    .await
                    .unwrap_or_else(|e| panic!("flood request {i}: {e}"));
                assert_eq!(
                    reply.status, 404,
                    "a new address is admitted: {}",
                    reply.body
                );
                if reply.header("connection") == Some("close") {
                    conn = RawConn::connect(&addr, Some(ip(TRUSTED))).await.unwrap();
                }
                n += 1;
                if n.is_multiple_of(HOT_EVERY) {
                    let reply = conn
                        .request("GET", "/flood", &[("X-Forwarded-For", "198.51.100.66")])
                        .await
                        .unwrap();
                    match reply.status {
                        429 => hot_limited.fetch_add(1, Ordering::Relaxed),
                        404 => hot_admitted.fetch_add(1, Ordering::Relaxed),
                        s => panic!("hot abuser got {s}: {}", reply.body),
                    };
                    if reply.header("connection") == Some("close") {
                        conn = RawConn::connect(&addr, Some(ip(TRUSTED))).await.unwrap();
                    }
                }
                i += WORKERS;
            }
        }));
    }
    for t in tasks {
        t.await.expect("flood worker");
    }
    let elapsed = started.elapsed();
    eprintln!("flood of {FLOOD} addresses took {elapsed:?}");

    let tracked = gw.metric("tollgate_edge_tracked_clients").unwrap();
    let evictions = gw.metric("tollgate_edge_evictions_total").unwrap();
    assert!(
        tracked <= MAX_CLIENTS as f64,
        "tracked {tracked} > max_clients {MAX_CLIENTS}"
    );
    assert!(
        tracked >= MAX_CLIENTS as f64 * 0.5,
        "the store is mostly full after the flood: {tracked}"
    );
    // Every distinct address (the flood and the abuser) is either still tracked or was evicted.
    assert!(evictions > 0.0);
    assert_eq!(
        evictions + tracked,
        (FLOOD + 1) as f64,
        "evictions {evictions} + tracked {tracked}"
    );
    let hot_total = (FLOOD / WORKERS / HOT_EVERY) * WORKERS;
    assert_eq!(
        hot_admitted.load(Ordering::Relaxed),
        3,
        "the abuser gets its burst once, never again (limited {} of ~{hot_total})",
        hot_limited.load(Ordering::Relaxed)
    );
    // Still limited after the flood.
    let mut conn = RawConn::connect(&addr, Some(ip(TRUSTED))).await.unwrap();
    let reply = conn
        .request("GET", "/api", &[("X-Forwarded-For", "198.51.100.66")])
        .await
        .unwrap();
    assert_eq!(reply.status, 429);
    assert_eq!(backend.stats().requests, 0);
}
