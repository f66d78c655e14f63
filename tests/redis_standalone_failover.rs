//! Issue 14, point 3: a standalone `redis.url` whose server stops being a writable master.
//!
//! The address the gateway uses is a TCP relay (what a DNS name or virtual IP is in
//! production): a failover promotes the replica, demotes the old master, and re-points the
//! address. Connections opened before keep talking to the old, demoted node, which answers
//! `READONLY` (or `MASTERDOWN` when it has no master link and does not serve stale data). The
//! gateway must drop that connection, reconnect through the address, and take decisions in
//! Redis again, without a restart. Tiers never refill (`limit: 1, per: 1d`), so counts are exact.
//!
//! A link that goes silent (dropped without a reset: nothing arrives, nothing closes) is the
//! other way a connection dies: the gateway replaces a connection that answered nothing for
//! 30 s.

mod common;
#[path = "common/redis_topology.rs"]
mod redis_topology;

use common::*;
use redis_topology::*;
use std::time::Duration;

const TIER: &str = "  t: { limit: 1, per: 1d, burst: 1000, on_failure: closed }\n";

/// How the old master is demoted.
#[derive(Clone, Copy, Debug)]
enum Demotion {
    /// `REPLICAOF <new master>`: answers READONLY to the script.
    ReplicaOfNewMaster,
    /// `REPLICAOF <a dead port>` with `replica-serve-stale-data no`: answers MASTERDOWN.
    ReplicaWithoutLink,
}

/// A gateway whose Redis address is `relay` (tenant `acme` in tier `t`, a `timeout_ms` bound,
/// `min_calls` so high that the breaker never opens and every request reaches Redis), after three
/// requests Redis decided: the gateway, its backend, a client and the URL to ask.
async fn gateway_behind(
    relay: &TcpRelay,
    timeout_ms: u64,
) -> (Gateway, Backend, reqwest::Client, String) {
    let backend = Backend::start("echo");
    let redis = format!(
        "url: \"{}\", timeout_ms: {timeout_ms}, circuit_breaker: {{ min_calls: 100000 }}",
        relay.url()
    );
    let keys = vec![("acme".to_string(), "t")];
    let gw = Gateway::start(&ha_gateway_yaml(&redis, TIER, &keys, &backend.addr()));
    let http = http();
    let url = gw.url("/x");
    for expected in [999, 998, 997] {
        let (v, r) = ask(&http, &url, "acme").await;
        assert_eq!(v, Verdict::RedisAdmitted, "{r:?}");
        assert_eq!(r.remaining(), expected);
    }
    (gw, backend, http, url)
}

async fn address_moved_to_promoted_replica(demotion: Demotion) {
    let old = RedisNode::start(&[]);
    let new = RedisNode::start(&["--replicaof", "127.0.0.1", &old.port.to_string()]);
    let relay = TcpRelay::start(&old.addr());
    // timeout_ms generous so that a busy machine does not turn a reconnect into a timeout.
    let (gw, _backend, http, url) = gateway_behind(&relay, 1000).await;
    assert!(
        wait_replica_caught_up(&old, &new, Duration::from_secs(10)),
        "the replica has every write"
    );

    // The failover: promote, demote, move the address.
    new.cmd(&["REPLICAOF", "NO", "ONE"]);
    match demotion {
        Demotion::ReplicaOfNewMaster => {
            old.cmd(&["REPLICAOF", "127.0.0.1", &new.port.to_string()]);
            assert!(wait_until(Duration::from_secs(10), || {
                old.info_field("replication", "master_link_status")
                    .as_deref()
                    == Some("up")
            }));
        }
        Demotion::ReplicaWithoutLink => {
            old.cmd(&["CONFIG", "SET", "replica-serve-stale-data", "no"]);
            let dead = free_port();
            old.cmd(&["REPLICAOF", "127.0.0.1", &dead.to_string()]);
        }
    }
    relay.point_to(&new.addr());

    // Every answer is Redis' decision or the tier's policy (never a 500), and decisions come back.
    let mut failed = 0;
    let mut back = None;
    for i in 0..50 {
        let (v, r) = ask(&http, &url, "acme").await;
        match v {
            Verdict::FailedClosed => failed += 1,
            Verdict::RedisAdmitted => {
                back = Some((i, r.remaining()));
                break;
            }
            other => panic!("{other:?}: {r:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (after, remaining) = back.unwrap_or_else(|| {
        panic!(
            "decisions never returned to Redis ({demotion:?}); log:\n{}",
            gw.log_tail(20)
        )
    });
    // The promoted replica had every write: the bucket continues where it was.
    assert_eq!(remaining, 996, "no token lost or minted by the failover");
    for expected in [995, 994] {
        let (v, r) = ask(&http, &url, "acme").await;
        assert_eq!(v, Verdict::RedisAdmitted, "{r:?}");
        assert_eq!(r.remaining(), expected);
    }
    println!(
        "{demotion:?}: {failed} requests answered by the failure policy before decisions \
         returned (after {after} retries)"
    );
    // The demoted node answered on the old connection; the gateway reconnected and retried
    // within the same request's budget, so no request failed.
    let reason = match demotion {
        Demotion::ReplicaOfNewMaster => "ReadOnly",
        Demotion::ReplicaWithoutLink => "MasterDown",
    };
    assert!(
        wait_until(Duration::from_secs(5), || gw
            .log()
            .lines()
            .any(|l| l.contains("reconnecting") && l.contains(reason))),
        "{}",
        gw.log_tail(20)
    );
    assert_eq!(
        failed, 0,
        "requests failed closed during a graceful failover"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readonly_old_master_is_left_for_the_promoted_replica() {
    address_moved_to_promoted_replica(Demotion::ReplicaOfNewMaster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masterdown_old_master_is_left_for_the_promoted_replica() {
    address_moved_to_promoted_replica(Demotion::ReplicaWithoutLink).await;
}

/// A black-holed connection (a NAT entry or a middlebox lost mid-connection: the gateway's
/// socket stays open, nothing comes back) is given up after 30 s without any answer, and
/// decisions return to Redis on a new connection. Before that, every request gets the tier's
/// failure policy, never a 500 or a hung request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_connection_is_replaced() {
    let node = RedisNode::start(&[]);
    let relay = TcpRelay::start(&node.addr());
    let (gw, _backend, http, url) = gateway_behind(&relay, 500).await;

    relay.black_hole();
    let started = std::time::Instant::now();
    let mut failed = 0;
    let back = loop {
        let (v, r) = ask(&http, &url, "acme").await;
        match v {
            Verdict::FailedClosed => failed += 1,
            Verdict::RedisAdmitted => break r,
            other => panic!("{other:?}: {r:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "still no Redis decision after {failed} requests; log:\n{}",
            gw.log_tail(20)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    // The calls on the dead link never reached Redis: the bucket continues where it was.
    assert_eq!(back.remaining(), 996, "{back:?}");
    assert!(failed > 0, "the black hole was never seen");
    assert!(
        gw.log()
            .lines()
            .any(|l| l.contains("answered nothing") && l.contains("reconnecting")),
        "{}",
        gw.log_tail(20)
    );
}
