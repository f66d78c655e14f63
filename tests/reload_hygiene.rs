//! Reload hygiene (docs/redis.md#reloads): reloads by SIGHUP and by the file watch, with and
//! without a change of `redis:`, leave no Redis connection and no file descriptor behind, and a
//! reload that moves the tenant stage to another Redis hands that store's leases back there.
//! Black-box: two real `redis-server`s, the real echo backend and the real gateway. Counts, not
//! times: `CLIENT LIST` on each server and `/proc/<pid>/fd` of the gateway, each back to its
//! baseline once the reloads are done. (`bench/reload_hygiene.py` does 500 with RSS figures.)

mod common;

use common::*;
use std::time::Duration;

const KEY: &str = "key-k1-0123456789";
const RELOADS_OK: &str = "tollgate_config_reloads_total{result=\"ok\"}";

/// A watched config on `redis_url` whose tier `T` takes fleet-wide leases and token leases;
/// `variant` changes the file's content (a comment) without changing its meaning.
fn config(redis_url: &str, backend: &Backend, variant: usize, lease: &str) -> String {
    GatewayConfig::echo(&backend.addr(), "required")
        .redis(redis_url, "timeout: 2s, on_failure: closed, lease_ttl: 3s")
        .tier(
            "T",
            &format!("{{ limit: 1, per: 1d, burst: 100000, max_in_flight: 50{lease} }}"),
        )
        .api_key(KEY, "k1", "T")
        .section("reload", "{ watch: true, debounce: 50ms }")
        .raw(&format!("# variant {variant}\n"))
        .yaml()
}

/// Connections to `redis` other than the one asking.
fn clients(redis: &RedisServer) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut redis.conn())
        .expect("CLIENT LIST");
    list.lines()
        .filter(|l| !l.trim().is_empty() && !l.contains("cmd=client|list"))
        .count()
}

/// Open file descriptors of process `pid`.
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc/<pid>/fd")
        .count()
}

async fn admitted(gw: &Gateway) {
    let r = try_get_with_key(&client(), &gw.url("/x"), Some(KEY))
        .await
        .expect("GET /x");
    assert_eq!(r.status, 200, "{r:?}\n{}", gw.log_tail(20));
}

/// Writes `yaml` as the config and waits until the reload counter moved: by SIGHUP when
/// `hup`, else by the file watch alone.
async fn reload(gw: &Gateway, yaml: &str, hup: bool) {
    let before = gw.metric_or_zero(RELOADS_OK);
    if hup {
        gw.reload(yaml);
    } else {
        let tmp = gw.dir().join("gateway.yaml.tmp");
        std::fs::write(&tmp, render(yaml, gw.listen_addr(), gw.admin_addr())).expect("write");
        std::fs::rename(&tmp, gw.config_path()).expect("rename");
    }
    let done = eventually(Duration::from_secs(10), || {
        gw.metric_or_zero(RELOADS_OK) > before
    })
    .await;
    assert!(done, "reload {hup} not applied:\n{}", gw.log_tail(20));
}

/// 60 reloads, a quarter of each kind (SIGHUP or file watch, `redis:` moved between two servers
/// or not), each followed by an admitted request on the running store: at the end (back on the
/// first server) each server has exactly its baseline of connections (the first the running
/// store's, the second none) and the gateway's descriptors are back to their baseline (± 4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_leave_no_connection_or_descriptor_behind() {
    let (a, b) = (RedisServer::start(), RedisServer::start());
    let backend = Backend::start("echo");
    let gw = Gateway::start(&config(&a.url(), &backend, 0, ""));
    admitted(&gw).await;
    let (a0, b0) = (clients(&a), clients(&b));
    let fd0 = fds(gw.pid());
    assert!(a0 >= 1, "the gateway is connected to the first server");
    assert_eq!(b0, 0);
    let mut on_a = true;
    for i in 1..=60 {
        // Kinds in turn: SIGHUP + move, watch, SIGHUP, watch + move.
        let (hup, moves) = match i % 4 {
            1 => (true, true),
            2 => (false, false),
            3 => (true, false),
            _ => (false, true),
        };
        on_a ^= moves;
        let url = if on_a { a.url() } else { b.url() };
        reload(&gw, &config(&url, &backend, i, ""), hup).await;
        admitted(&gw).await;
    }
    assert!(on_a, "60 reloads end on the first server");
    let settled = eventually(Duration::from_secs(10), || {
        clients(&a) == a0 && clients(&b) == b0
    })
    .await;
    assert!(
        settled,
        "connections: first server {} (baseline {a0}), second {} (baseline {b0})",
        clients(&a),
        clients(&b)
    );
    let fd_settled = eventually(Duration::from_secs(10), || fds(gw.pid()) <= fd0 + 4).await;
    assert!(fd_settled, "descriptors {} (baseline {fd0})", fds(gw.pid()));
}

/// Fleet-wide leases of `r` not expired on its clock.
fn live_leases(r: &RedisServer) -> u64 {
    let mut conn = r.conn();
    let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut conn).expect("TIME");
    let now_ms = s * 1000 + us / 1000;
    redis::cmd("ZCOUNT")
        .arg("tollgate:{k1}:inflight")
        .arg(format!("({now_ms}"))
        .arg("+inf")
        .query(&mut conn)
        .expect("ZCOUNT")
}

/// A reload that moves `redis:` to another server gives the token leases the old store holds
/// back to it (its bucket is whole again but for what was admitted), and keeps renewing there the
/// fleet-wide lease of a request still running (`lease_ttl: 3s`, the request 9 s) until it ends
/// and gives it back: the old store's fleet never sees that request's slot free while it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_to_another_redis_gives_the_old_stores_leases_back() {
    let (a, b) = (RedisServer::start(), RedisServer::start());
    let backend = Backend::start("echo");
    let lease = ", lease: { tokens: 10, max_hold: 1m }";
    let gw = Gateway::start(&config(&a.url(), &backend, 0, lease));
    admitted(&gw).await;
    // One admitted request took a lease of 10 tokens from the first server, held for a minute.
    let level = |r: &RedisServer| -> Option<i64> {
        let l: Option<String> = common::key_field(&mut r.conn(), "tollgate:{k1}:tb", "l");
        l.map(|l| l.parse::<i64>().unwrap().div_euclid(86_400_000))
    };
    assert_eq!(level(&a), Some(100_000 - 10));
    let held = |r: &RedisServer| -> u64 {
        redis::cmd("ZCARD")
            .arg("tollgate:{k1}:inflight")
            .query(&mut r.conn())
            .expect("ZCARD")
    };
    // The first request's lease is given back in the background.
    assert!(eventually(Duration::from_secs(5), || held(&a) == 0).await);
    // A slow request (its token from that lease) holds a fleet-wide lease in the first server
    // across the reload.
    let slow = {
        let url = gw.url("/slow?delay_ms=9000");
        tokio::spawn(async move { try_get_with_key(&client(), &url, Some(KEY)).await })
    };
    assert!(eventually(Duration::from_secs(5), || held(&a) == 1).await);
    reload(&gw, &config(&b.url(), &backend, 1, lease), true).await;
    admitted(&gw).await;
    assert_eq!(level(&b), Some(100_000 - 10), "a lease from the new store");
    let returned = eventually(Duration::from_secs(5), || level(&a) == Some(100_000 - 2)).await;
    assert!(
        returned,
        "first server's level {:?}: the 8 unused tokens stay out",
        level(&a)
    );
    // Longer than lease_ttl after the last renewal the new stage could have made.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        live_leases(&a),
        1,
        "the running request's lease expired in the first server"
    );
    let r = slow.await.expect("task").expect("slow request");
    assert_eq!(r.status, 200);
    assert!(
        eventually(Duration::from_secs(5), || held(&a) == 0).await,
        "the slow request's lease stays held in the first server"
    );
    assert_eq!(held(&b), 0);
}
