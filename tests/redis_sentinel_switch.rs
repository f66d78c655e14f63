//! Sentinel failovers never admit a token twice. Real masters, replicas and three sentinels
//! (`redis-server --sentinel`, small timeouts), real gateways and steady clients; each tenant has
//! a known burst and no refill (`per: 1d`), the tier fails `closed`, and traffic runs across the
//! failover and then drains every bucket until Redis refuses. A write the old master took after
//! its replica was promoted is lost with it, and the tenant gets those tokens again from the new
//! master: the 200s counted per tenant then exceed the burst. The fault is each test's own: a
//! forced `SENTINEL FAILOVER`, `kill -9` of the master, the killed master back (empty) and
//! turned into a replica, two forced failovers in a row, and a forced failover with one
//! sentinel of three down. Over-admission is printed (`--nocapture`) and must be 0.

mod common;
#[path = "common/redis_topology.rs"]
mod redis_topology;

use common::*;
use redis_topology::*;
use std::time::{Duration, Instant};

/// Tokens per tenant; refill is one token a day.
const BURST: u64 = 150;
const TENANTS: usize = 4;
/// Generous bound on every wait for the sentinels or the gateways.
const PATIENCE: Duration = Duration::from_secs(60);

fn tenants() -> Vec<String> {
    (0..TENANTS).map(|i| format!("tenant-{i}")).collect()
}

fn yaml(set: &SentinelSet, backend: &Backend) -> String {
    let urls: Vec<String> = set.urls().iter().map(|u| format!("\"{u}\"")).collect();
    let redis = format!(
        "mode: sentinel, urls: [{}], sentinel: {{ master: \"{}\" }}, timeout_ms: 1000, \
         circuit_breaker: {{ break_s: 1 }}",
        urls.join(", "),
        set.name
    );
    let tier = format!("  t: {{ limit: 1, per: 1d, burst: {BURST}, on_failure: closed }}\n");
    let keys: Vec<(String, &str)> = tenants().into_iter().map(|t| (t, "t")).collect();
    ha_gateway_yaml(&redis, &tier, &keys, &backend.addr())
}

/// The master's port as `sentinel` reports it.
fn named_by(sentinel: &RedisNode, name: &str) -> Option<u16> {
    let v = sentinel
        .try_cmd(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", name])
        .ok()?;
    let parts: Vec<String> = redis::from_redis_value(v).ok()?;
    parts.get(1)?.parse().ok()
}

/// Every running sentinel names `data[to]`, and that node says it is a master.
fn switched_to(set: &SentinelSet, to: usize) -> bool {
    let port = set.data[to].port;
    set.sentinels
        .iter()
        .filter(|s| s.pid().is_some())
        .all(|s| named_by(s, &set.name) == Some(port))
        && set.data[to].info_field("replication", "role").as_deref() == Some("master")
}

/// `sentinel` lists the node on `port` as a replica of the master on `master_port`, with its
/// link up and a replication offset.
fn replica_seen_by(sentinel: &RedisNode, name: &str, port: u16, master_port: u16) -> bool {
    let Ok(v) = sentinel.try_cmd(&["SENTINEL", "REPLICAS", name]) else {
        return false;
    };
    let replicas: Vec<std::collections::HashMap<String, String>> =
        redis::from_redis_value(v).unwrap_or_default();
    let field = |r: &std::collections::HashMap<String, String>, k: &str| r.get(k).cloned();
    replicas.iter().any(|r| {
        field(r, "port") == Some(port.to_string())
            && field(r, "master-port") == Some(master_port.to_string())
            && field(r, "master-link-status").as_deref() == Some("ok")
            && field(r, "slave-repl-offset").is_some_and(|o| o != "0")
    })
}

/// `SENTINEL FAILOVER` through `sentinel`, retried while it says a failover is still under way
/// or it sees no good replica yet (just after an earlier failover).
fn force_failover(set: &SentinelSet, sentinel: usize) {
    let s = &set.sentinels[sentinel];
    let ok = wait_until(PATIENCE, || {
        s.try_cmd(&["SENTINEL", "FAILOVER", &set.name]).is_ok()
    });
    assert!(ok, "SENTINEL FAILOVER was never accepted");
}

/// Every tenant's bucket drained through `urls` until Redis refuses it; returns the 200s seen.
async fn drain(urls: &[String]) -> Vec<u64> {
    let tasks: Vec<_> = tenants()
        .into_iter()
        .enumerate()
        .map(|(t, tenant)| {
            let urls = urls.to_vec();
            tokio::spawn(async move {
                let http = http();
                let deadline = Instant::now() + PATIENCE;
                let mut admitted = 0u64;
                for i in t.. {
                    assert!(Instant::now() < deadline, "{tenant} never refused by Redis");
                    let (v, r) = ask(&http, &urls[i % urls.len()], &tenant).await;
                    assert_ne!(v, Verdict::Broken, "{r:?}");
                    if r.status == 200 {
                        admitted += 1;
                    }
                    if v == Verdict::RedisRejected {
                        break;
                    }
                    if !v.by_redis() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                admitted
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("drain task"));
    }
    out
}

/// One scenario's gateways, traffic and account.
struct Run {
    urls: Vec<String>,
    warm: Vec<u64>,
    load: Option<Load>,
}

impl Run {
    async fn start(gws: &[&Gateway]) -> Run {
        let urls: Vec<String> = gws.iter().map(|g| g.url("/x")).collect();
        let warm = warm_up(&urls, &tenants()).await;
        let load = Load::start(urls.clone(), tenants(), 3, Duration::from_millis(10));
        // Traffic on the old master before the fault.
        tokio::time::sleep(Duration::from_millis(500)).await;
        Run {
            urls,
            warm,
            load: Some(load),
        }
    }

    /// Stops the traffic, drains every bucket (through `more` too), prints the account and
    /// asserts that no tenant got more than its burst.
    async fn account(mut self, scenario: &str, more: &[String]) {
        let samples = self.load.take().expect("load").stop().await;
        let broken: Vec<&redis_topology::Sample> = samples
            .iter()
            .filter(|s| s.verdict == Verdict::Broken)
            .collect();
        assert!(broken.is_empty(), "broken answers: {:?}", &broken[..1]);
        let mut urls = self.urls.clone();
        urls.extend_from_slice(more);
        let drained = drain(&urls).await;
        let admitted: Vec<u64> = (0..TENANTS)
            .map(|t| {
                self.warm[t]
                    + drained[t]
                    + samples
                        .iter()
                        .filter(|s| s.tenant == t && s.status == 200)
                        .count() as u64
            })
            .collect();
        let over: u64 = admitted.iter().map(|a| a.saturating_sub(BURST)).sum();
        let held = samples.iter().filter(|s| !s.verdict.by_redis()).count();
        println!(
            "[sentinel: {scenario}] requests {} | answered by the failure policy {held} | \
             admitted per tenant {admitted:?} of a burst of {BURST} | over-admitted {over} tokens",
            samples.len()
        );
        assert_eq!(over, 0, "{scenario}: admitted {admitted:?}, burst {BURST}");
    }
}

/// The tail of every sentinel's log and of every data node's, for a failed wait on the sentinels.
fn sentinel_logs(set: &SentinelSet) -> String {
    let nodes = set.sentinels.iter().map(|n| ("sentinel", n));
    let nodes = nodes.chain(set.data.iter().map(|n| ("data node", n)));
    nodes
        .map(|(what, n)| {
            let log = n.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            format!("---- {what} {} ----\n{tail}\n", n.port)
        })
        .collect()
}

/// Scenarios run one at a time: each starts five Redis processes and a gateway under load, and
/// a sentinel whose timer is starved for 2 s enters TILT for 30 s and acts on nothing.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One scenario: a master with `replicas` replicas and three sentinels, `gateways` gateways and
/// steady traffic on them; `fault` breaks things and waits until the sentinels switched (it may
/// return more gateways, started meanwhile, to drain through); then half a second more of
/// traffic, the drain and the account.
async fn scenario(
    name: &str,
    replicas: usize,
    gateways: usize,
    fault: impl FnOnce(&mut SentinelSet, &Backend) -> Vec<Gateway>,
) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut set = SentinelSet::start_with("tollgate", 1000, replicas);
    let backend = Backend::start("echo");
    let gws: Vec<Gateway> = (0..gateways)
        .map(|_| Gateway::start(&yaml(&set, &backend)))
        .collect();
    let run = Run::start(&gws.iter().collect::<Vec<_>>()).await;
    let late = fault(&mut set, &backend);
    // Traffic on the new master while the old one may still answer as a master.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let more: Vec<String> = late.iter().map(|g| g.url("/x")).collect();
    run.account(name, &more).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_failover_admits_no_token_twice() {
    scenario("SENTINEL FAILOVER", 1, 2, |set, _| {
        force_failover(set, 0);
        assert!(wait_until(PATIENCE, || switched_to(set, 1)), "no switch");
        vec![]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_master_admits_no_token_twice() {
    scenario("kill -9 of the master", 1, 1, |set, _| {
        set.data[0].kill();
        assert!(wait_until(PATIENCE, || switched_to(set, 1)), "no switch");
        vec![]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_master_back_as_a_replica_admits_no_token_twice() {
    scenario("old master back as a replica", 1, 1, |set, backend| {
        set.data[0].kill();
        assert!(wait_until(PATIENCE, || switched_to(set, 1)), "no switch");
        // Back without its data and answering as a master until the sentinels turn it into a
        // replica of the new one; a gateway started meanwhile must not pick it either.
        set.data[0].restart();
        let late = Gateway::start(&yaml(set, backend));
        // The sentinels convert it only once it has been up for 8 s (4 publish periods) and
        // none of them is in TILT; a full sync follows.
        let replica_again = wait_until(2 * PATIENCE, || {
            let old = &set.data[0];
            old.info_field("replication", "role").as_deref() == Some("slave")
                && old
                    .info_field("replication", "master_link_status")
                    .as_deref()
                    == Some("up")
        });
        assert!(
            replica_again,
            "the old master never became a replica\n{}",
            sentinel_logs(set)
        );
        vec![late]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_failovers_in_a_row_admit_no_token_twice() {
    scenario("two SENTINEL FAILOVERs in a row", 2, 1, |set, _| {
        force_failover(set, 0);
        let first = wait_until(PATIENCE, || (1..3).any(|i| switched_to(set, i)));
        assert!(first, "no first switch");
        let b = set.master();
        let c = 3 - b;
        // The other replica follows the new master, and the sentinel that leads the second
        // failover sees it do so (else it could pick the old master, which it lists as a
        // replica too, and Sentinel itself would lose the writes made since the first one).
        let follows = wait_until(PATIENCE, || {
            wait_replica_caught_up(&set.data[b], &set.data[c], Duration::from_secs(1))
                && replica_seen_by(
                    &set.sentinels[1],
                    &set.name,
                    set.data[c].port,
                    set.data[b].port,
                )
        });
        assert!(follows, "the other replica never followed the new master");
        force_failover(set, 1);
        assert!(
            wait_until(PATIENCE, || switched_to(set, c)),
            "no second switch"
        );
        vec![]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_with_one_sentinel_down_admits_no_token_twice() {
    scenario(
        "SENTINEL FAILOVER, one sentinel of three down",
        1,
        1,
        |set, _| {
            // The first sentinel the gateway lists is down; the failover is led by the last one.
            set.sentinels[0].kill();
            force_failover(set, 2);
            assert!(wait_until(PATIENCE, || switched_to(set, 1)), "no switch");
            vec![]
        },
    )
    .await;
}
