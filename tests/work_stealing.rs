//! `server.work_stealing` (issue 18): both Tokio runtime layouts serve traffic, including
//! upstream keep-alive and concurrent clients. Real backend, real gateway.

mod common;

use common::*;
use tokio::task::JoinSet;

async fn serves_with(work_stealing: bool) {
    let backend = Backend::start("echo");
    let yaml = GatewayConfig::echo(&backend.addr(), "none")
        .server(&format!(
            "{{ threads: 2, grace_period_s: 1, work_stealing: {work_stealing} }}"
        ))
        .yaml();
    let gw = Gateway::start(&yaml);
    let http = http();
    let mut set = JoinSet::new();
    for _ in 0..8 {
        let (http, url) = (http.clone(), gw.url("/ws"));
        set.spawn(async move {
            let mut ok = 0;
            for _ in 0..25 {
                let r = try_get_with_key(&http, &url, None).await.expect("request");
                ok += (r.status == 200) as usize;
            }
            ok
        });
    }
    let mut ok = 0;
    while let Some(n) = set.join_next().await {
        ok += n.expect("task");
    }
    assert_eq!(
        ok,
        200,
        "work_stealing {work_stealing}: {}",
        gw.log_tail(20)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_with_one_work_stealing_runtime() {
    serves_with(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_with_one_runtime_per_thread() {
    serves_with(false).await;
}
