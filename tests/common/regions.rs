//! Multi-region test support: a latency-injecting TCP relay (the WAN between a region and the
//! `global` store), regional gateway configs, and a paced load driver that records every answer.

//!
//! Included by a test file next to `mod common;` as `#[path = "common/regions.rs"] mod regions;`.

#![allow(dead_code)]

use crate::common::{try_get_with_key, Backend, Gateway, GatewayConfig, RedisServer, STRICT_REDIS};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// A TCP relay that delays every byte by `delay` in each direction (a WAN link) and can be cut
/// (every connection closed, new ones refused) and restored, like a network partition.
pub struct DelayRelay {
    pub port: u16,
    cut: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl DelayRelay {
    /// Relays `127.0.0.1:<port>` → `target` with `delay` added per direction.
    pub fn start(target: &str, delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind relay");
        let port = listener.local_addr().expect("addr").port();
        let relay = DelayRelay {
            port,
            cut: Arc::new(AtomicBool::new(false)),
            stop: Arc::new(AtomicBool::new(false)),
            streams: Arc::new(Mutex::new(Vec::new())),
        };
        let (cut, stop, streams) = (relay.cut.clone(), relay.stop.clone(), relay.streams.clone());
        let target = target.to_string();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop.load(Ordering::Acquire) {
                    return;
                }
                let Ok(client) = client else { continue };
                if cut.load(Ordering::Acquire) {
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&target) else {
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                {
                    let mut s = streams.lock().unwrap();
                    s.push(client.try_clone().expect("clone"));
                    s.push(server.try_clone().expect("clone"));
                }
                delayed_pipe(
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                    delay,
                );
                delayed_pipe(server, client, delay);
            }
        });
        relay
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Partition: closes every relayed connection and refuses new ones until [`restore`](Self::restore).
    pub fn cut(&self) {
        self.cut.store(true, Ordering::Release);
        for s in self.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Ends the partition.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::Release);
    }
}

/// Copies `from` → `to`, each chunk written `delay` after it was read (order kept).
fn delayed_pipe(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    std::thread::spawn(move || {
        while let Ok((due, bytes)) = rx.recv() {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}

impl Drop for DelayRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        for s in self.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

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
    pub relay: DelayRelay,
    pub gateway: Gateway,
}

/// Three regions (eu, us, ap; equal static shares) in `mode: sync` through one `global` Redis,
/// each behind a [`DelayRelay`] of 50 / 100 / 150 ms per direction.
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
                let relay = DelayRelay::start(&global.addr(), Duration::from_millis(delay));
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
