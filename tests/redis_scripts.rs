//! How the gateway gets its Lua scripts run on servers that do not keep or load them: a server
//! that refuses `SCRIPT LOAD` (an ACL without `script|load`, as some managed services set up)
//! and a script cache flushed under the gateway. Real `redis-server` (or Valkey, the second
//! pass of `scripts/test.sh`), backend and gateway.

mod common;
#[path = "common/redis_topology.rs"]
mod redis_topology;

use common::*;
use redis_topology::*;

/// A burst of 5 that does not refill within the test; `closed`, so any failed call is a 503.
const TIER: &str = "  t: { limit: 1, per: 1d, burst: 5, on_failure: closed }\n";

/// With `SCRIPT LOAD` forbidden to the gateway's user, every decision is still made by the
/// server (EVAL with the source after NOSCRIPT, never a failed call), exactly the burst is
/// admitted, and a `SCRIPT FLUSH` meanwhile changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_refuses_script_load_decides_every_request_by_eval() {
    const SECRET: &str = "scr1pt-Pass-7d2b";
    let redis = RedisNode::start(&[]);
    redis.cmd(&[
        "ACL",
        "SETUSER",
        "gw",
        "on",
        &format!(">{SECRET}"),
        "~tollgate:*",
        "+@all",
        "-script|load",
    ]);
    let backend = Backend::start("echo");
    let config = ha_gateway_yaml(
        &format!(
            "url: \"{}\", username_env: TG_REDIS_USER, password_env: TG_REDIS_PASSWORD, \
             timeout: 2000ms",
            redis.url()
        ),
        TIER,
        &[("acme".to_string(), "t"), ("beta".to_string(), "t")],
        &backend.addr(),
    );
    let gw = Gateway::start_with_env(
        &config,
        &[("TG_REDIS_USER", "gw"), ("TG_REDIS_PASSWORD", SECRET)],
    );
    let http = http();
    let mut seen = Vec::new();
    for tenant in ["acme", "beta"] {
        for i in 0..7 {
            if i == 3 {
                redis.cmd(&["SCRIPT", "FLUSH"]);
            }
            let (v, r) = ask(&http, &gw.url("/x"), tenant).await;
            seen.push((tenant, v));
            let want = if i < 5 {
                Verdict::RedisAdmitted
            } else {
                Verdict::RedisRejected
            };
            assert_eq!(v, want, "{tenant} request {i}: {r:?}\n{}", gw.log_tail(20));
        }
    }
    let failed_loads = redis.info("commandstats");
    assert!(
        failed_loads.contains("cmdstat_eval:"),
        "the scripts ran by EVAL: {failed_loads}"
    );
    println!("verdicts: {seen:?}");
}
