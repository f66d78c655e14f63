//! Issue 14: `redis.mode: sentinel` against a real master + replica + three sentinels
//! (`redis-server --sentinel`), two gateways and steady clients. The gateways find the master
//! through the sentinels, and follow it when the master is killed (`kill -9`) and the sentinels
//! promote the replica. Counts and statuses only; measured figures are printed (`--nocapture`).

mod common;
#[path = "common/redis_topology.rs"]
mod redis_topology;

use common::*;
use redis_topology::*;
use std::time::{Duration, Instant};

const BIG: u64 = 1_000_000;

fn sentinel_yaml(set: &SentinelSet, tenants: &[String], backend: &Backend) -> String {
    let urls: Vec<String> = set.urls().iter().map(|u| format!("\"{u}\"")).collect();
    let redis = format!(
        "mode: sentinel, urls: [{}], sentinel: {{ master: \"{}\" }}, timeout_ms: 1000",
        urls.join(", "),
        set.name
    );
    let tier = format!("  t: {{ limit: 1, per: 1d, burst: {BIG}, on_failure: closed }}\n");
    let keys: Vec<(String, &str)> = tenants.iter().map(|t| (t.clone(), "t")).collect();
    ha_gateway_yaml(&redis, &tier, &keys, &backend.addr())
}

/// Each gateway decides in Redis again (within 10 s; the time it took is what the scenario
/// printed as "decisions back in Redis").
async fn decided_by_redis_again(gws: &[Gateway; 2], tenant: &str) {
    let http = http();
    for gw in gws {
        let mut back = false;
        for _ in 0..100 {
            if ask(&http, &gw.url("/x"), tenant).await.0.by_redis() {
                back = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            back,
            "decisions never came back to Redis: {}",
            gw.log_tail(20)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_master_killed_gateways_follow_the_promoted_replica() {
    let mut set = SentinelSet::start("tollgate", 1000);
    let tenants: Vec<String> = (0..8).map(|i| format!("tenant-{i}")).collect();
    let backend = Backend::start("echo");
    let yaml = sentinel_yaml(&set, &tenants, &backend);
    let gws = [Gateway::start(&yaml), Gateway::start(&yaml)];
    let urls = vec![gws[0].url("/x"), gws[1].url("/x")];

    let warm = warm_up(&urls, &tenants).await;
    let old = set.master();
    assert_eq!(old, 0, "the sentinels name the first node master");
    let load = Load::start(urls.clone(), tenants.clone(), 4, Duration::from_millis(5));
    tokio::time::sleep(Duration::from_secs(1)).await;

    let fault_at = Instant::now();
    set.data[old].kill();
    let promoted = time_until(Duration::from_secs(60), || {
        set.master_port() == Some(set.data[1].port)
            && set.data[1].info_field("replication", "role").as_deref() == Some("master")
    })
    .expect("the sentinels promoted the replica");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let samples = load.stop().await;
    let impact = Impact::of(&samples, fault_at);
    let (over, double) = lost_and_double(&urls[0], &tenants, &warm, &samples, BIG).await;
    println!(
        "[sentinel: kill -9 of the master] requests {} | failed (policy answers) {} | broken {} \
         | decisions back in Redis {} ms after the fault | sentinels switched after {} ms | \
         over-admitted {over} tokens | double-charged {double} tokens",
        impact.requests,
        impact.failed,
        impact.broken,
        impact.back_in_redis.as_millis(),
        promoted.as_millis()
    );
    assert_eq!(
        impact.broken,
        0,
        "answers that were neither a decision nor the policy: {:?}",
        samples
            .iter()
            .filter(|s| s.verdict == Verdict::Broken)
            .take(3)
            .collect::<Vec<_>>()
    );
    // Decisions are back in Redis, on the promoted node: every bucket is there.
    for tenant in &tenants {
        let key = format!("tollgate:{{{tenant}}}:tb");
        let exists: i64 = redis::from_redis_value(set.data[1].cmd(&["EXISTS", &key])).unwrap();
        assert_eq!(exists, 1, "{key} on the promoted master");
    }
    decided_by_redis_again(&gws, &tenants[0]).await;
    for gw in &gws {
        assert!(
            gw.log()
                .contains(&format!("using master 127.0.0.1:{}", set.data[1].port)),
            "{}",
            gw.log_tail(20)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_failover_command_demotes_the_master_and_gateways_follow() {
    let set = SentinelSet::start("tollgate", 1000);
    let tenants: Vec<String> = (0..8).map(|i| format!("tenant-{i}")).collect();
    let backend = Backend::start("echo");
    let yaml = sentinel_yaml(&set, &tenants, &backend);
    let gws = [Gateway::start(&yaml), Gateway::start(&yaml)];
    let urls = vec![gws[0].url("/x"), gws[1].url("/x")];

    let warm = warm_up(&urls, &tenants).await;
    let load = Load::start(urls.clone(), tenants.clone(), 4, Duration::from_millis(5));
    tokio::time::sleep(Duration::from_secs(1)).await;

    let fault_at = Instant::now();
    set.sentinels[0].cmd(&["SENTINEL", "FAILOVER", "tollgate"]);
    let switched = time_until(Duration::from_secs(60), || {
        set.master_port() == Some(set.data[1].port)
            && set.data[0].info_field("replication", "role").as_deref() == Some("slave")
            && set.data[0]
                .info_field("replication", "master_link_status")
                .as_deref()
                == Some("up")
    })
    .expect("the sentinels switched the master");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let samples = load.stop().await;
    let impact = Impact::of(&samples, fault_at);
    let (over, double) = lost_and_double(&urls[0], &tenants, &warm, &samples, BIG).await;
    println!(
        "[sentinel: SENTINEL FAILOVER] requests {} | failed (policy answers) {} | broken {} \
         | decisions back in Redis {} ms after the command | old master demoted and synced \
         after {} ms | over-admitted {over} tokens | double-charged {double} tokens",
        impact.requests,
        impact.failed,
        impact.broken,
        impact.back_in_redis.as_millis(),
        switched.as_millis()
    );
    assert_eq!(impact.broken, 0);
    decided_by_redis_again(&gws, &tenants[0]).await;
    for gw in &gws {
        assert!(
            gw.log()
                .contains(&format!("using master 127.0.0.1:{}", set.data[1].port)),
            "{}",
            gw.log_tail(20)
        );
    }
}
