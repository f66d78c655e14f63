//! Multi-region test support: a latency-injecting TCP relay (the WAN between a region and the
//! `global` store), regional gateway configs, and a paced load driver that records every answer.

//!
//! Included by a test file next to `mod common;` as `#[path = "common/regions.rs"] mod regions;`.

#![allow(dead_code)]

use crate::common::{
    try_get_with_key, Backend, Gateway, GatewayConfig, RedisServer, TcpRelay, STRICT_REDIS,
};
use std::time::{Duration, Instant};

/// The API key of tenant `tenant` in these tests.
pub fn region_key(tenant: &str) -> String {
    format!("key-{tenant}-0123456789")
}

/// A regional gateway config: API keys for `tenants` in tier `t`, the tier line `tier` (e.g.
/// `{ limit: 20, per: 1s, burst: 20 }`), `multi_region` verbatim (a flow mapping), and extra
/// top-level YAML (`tenants:` overrides).
pub fn region_yaml(
    redis_url: &str,
    backend: &str,
    tier: &str,
    tenants: &[&str],
    multi_region: &str,
    extra: &str,
) -> String {
    let mut config = GatewayConfig::echo(backend, "required")
        .redis(redis_url, STRICT_REDIS)
        .tier("t", tier)
        .section("multi_region", multi_region)
        .api_keys_always();
    for t in tenants {
        config = config.api_key(&region_key(t), t, "t");
    }
    config.raw(extra).yaml()
}

/// One answer seen by [`drive`]: when (since the driver's start) and whether it was admitted.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    pub at: Duration,
    pub admitted: bool,
}

/// Sends GETs with `key` to `url` at `per_s` requests per second for `length` (one at a time,
/// paced from `start`), and returns every answer's time since `start` and outcome. A status other
/// than 200 or 429 panics (a Redis fault would otherwise hide as a count).
pub async fn drive(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    per_s: u64,
    start: Instant,
    from: Duration,
    length: Duration,
) -> Vec<Answer> {
    let gap = Duration::from_micros(1_000_000 / per_s.max(1));
    let mut next = start + from;
    let end = start + from + length;
    let mut out = Vec::new();
    while next < end {
        tokio::time::sleep_until(next.into()).await;
        next += gap;
        let reply = try_get_with_key(http, url, Some(key))
            .await
            .unwrap_or_else(|e| panic!("request to {url}: {e}"));
        assert!(
            reply.status == 200 || reply.status == 429,
            "unexpected {} from {url}: {}",
            reply.status,
            reply.body
        );
        out.push(Answer {
            at: start.elapsed(),
            admitted: reply.status == 200,
        });
        // Behind schedule (a slow machine): do not burst to catch up.
        let now = Instant::now();
        if next < now {
            next = now;
        }
    }
    out
}

/// Admitted answers in `[from, to)`.
pub fn admitted_between(answers: &[Answer], from: Duration, to: Duration) -> u64 {
    answers
        .iter()
        .filter(|a| a.admitted && a.at >= from && a.at < to)
        .count() as u64
}

/// `multi_region.sync_interval` of [`ThreeRegions`], ms.
pub const SYNC_INTERVAL_MS: u64 = 500;
/// One-way delay between each region and `global`, ms (eu, us, ap).
pub const WAN_DELAYS_MS: [(&str, u64); 3] = [("eu", 50), ("us", 100), ("ap", 150)];

/// One region of [`ThreeRegions`]: its own Redis, its relay to `global`, its gateway.
pub struct SyncRegion {
    pub name: &'static str,
    pub redis: RedisServer,
    pub relay: TcpRelay,
    pub gateway: Gateway,
}

/// Three regions (eu, us, ap; equal static shares) in `mode: sync` through one `global` Redis,
/// each behind a [`TcpRelay`] of 50 / 100 / 150 ms per direction.
pub struct ThreeRegions {
    pub global: RedisServer,
    pub backend: Backend,
    pub regions: Vec<SyncRegion>,
}

impl ThreeRegions {
    pub fn start(tier: &str, tenants: &[&str]) -> Self {
        let global = RedisServer::start();
        let backend = Backend::start("echo");
        let regions = WAN_DELAYS_MS
            .iter()
            .map(|&(name, delay)| {
                let redis = RedisServer::start();
                let relay = TcpRelay::start_delayed(&global.addr(), Duration::from_millis(delay));
                let multi = format!(
                    "{{ region: {name}, shares: {{ eu: 1, us: 1, ap: 1 }}, mode: sync, \
                     global: {{ url: \"{}\" }}, sync_interval: {SYNC_INTERVAL_MS}ms }}",
                    relay.url()
                );
                let gateway = Gateway::start(&region_yaml(
                    &redis.url(),
                    &backend.addr(),
                    tier,
                    tenants,
                    &multi,
                    "",
                ));
                SyncRegion {
                    name,
                    redis,
                    relay,
                    gateway,
                }
            })
            .collect();
        ThreeRegions {
            global,
            backend,
            regions,
        }
    }

    /// The region named `name`.
    pub fn region(&self, name: &str) -> &SyncRegion {
        self.regions
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no region {name}"))
    }
}
