//! Real Redis topologies for the failover tests: single nodes with any arguments, a TCP relay
//! that can be re-pointed (a DNS name or virtual IP moved to a new master), a Redis Cluster of
//! masters with replicas, and a master + replica + sentinels set. Every process is started on
//! free loopback ports and SIGKILLed when its handle drops.
//!
//! Used as `#[path = "common/redis_topology.rs"] mod redis_topology;` next to `mod common;`.

#![allow(dead_code)]

/// The relay moved to `common::relay`; still reachable here for the files that name it so.
#[allow(unused_imports)]
pub use crate::common::TcpRelay;
use crate::common::{free_port, redis_server_binary, tail_file, wait_until};
use redis::Value;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tempfile::TempDir;

// ---------------------------------------------------------------------------------------------
// One redis-server (or sentinel) process
// ---------------------------------------------------------------------------------------------

/// A `redis-server` with extra arguments on a free port (no persistence, no protected mode).
pub struct RedisNode {
    pub port: u16,
    args: Vec<String>,
    dir: TempDir,
    log: PathBuf,
    child: Option<Child>,
    /// Password for the control connection (`requirepass` / ACL default user), if any.
    pub password: Option<String>,
}

impl RedisNode {
    /// Starts `redis-server <args>` and waits until PING answers (10 s).
    pub fn start(args: &[&str]) -> Self {
        Self::start_on(free_port(), args)
    }

    /// A cluster node: its cluster bus port (port + 10000) must be free too.
    pub fn start_cluster_node(node_timeout_ms: u64) -> Self {
        let port = loop {
            let p = free_port();
            if p < 55_000 && TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok() {
                break p;
            }
        };
        let timeout = node_timeout_ms.to_string();
        Self::start_on(
            port,
            &[
                "--cluster-enabled",
                "yes",
                "--cluster-node-timeout",
                &timeout,
                "--cluster-config-file",
                "nodes.conf",
                // A replica promotes itself whatever its replication lag (tests measure the
                // over-admission this causes instead of hiding it).
                "--cluster-replica-validity-factor",
                "0",
                "--cluster-require-full-coverage",
                "no",
            ],
        )
    }

    /// A sentinel (`redis-server <conf> --sentinel`) watching `master` at `master_port`.
    pub fn start_sentinel(master: &str, master_port: u16, down_after_ms: u64) -> Self {
        let port = free_port();
        let dir = tempfile::Builder::new()
            .prefix("tollgate-sentinel-")
            .tempdir()
            .expect("temp dir");
        let conf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\n\
                 sentinel monitor {master} 127.0.0.1 {master_port} 2\n\
                 sentinel down-after-milliseconds {master} {down_after_ms}\n\
                 sentinel failover-timeout {master} 5000\n\
                 sentinel parallel-syncs {master} 1\n"
            ),
        )
        .expect("write sentinel.conf");
        let mut node = RedisNode {
            port,
            args: vec![conf.display().to_string(), "--sentinel".into()],
            log: dir.path().join("redis.log"),
            dir,
            child: None,
            password: None,
        };
        node.spawn_and_wait();
        node
    }

    fn start_on(port: u16, args: &[&str]) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("tollgate-rnode-")
            .tempdir()
            .expect("temp dir");
        let mut full: Vec<String> = vec![
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            "".into(),
            "--appendonly".into(),
            "no".into(),
            "--protected-mode".into(),
            "no".into(),
            // Replicas sync at once (the default waits 5 s for more replicas to join).
            "--repl-diskless-sync-delay".into(),
            "0".into(),
            "--dir".into(),
            dir.path().display().to_string(),
        ];
        full.extend(args.iter().map(|a| a.to_string()));
        let password = args
            .iter()
            .position(|a| *a == "--requirepass")
            .map(|i| args[i + 1].to_string());
        let mut node = RedisNode {
            port,
            args: full,
            log: dir.path().join("redis.log"),
            dir,
            child: None,
            password,
        };
        node.spawn_and_wait();
        node
    }

    fn spawn_and_wait(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open log");
        let binary = redis_server_binary();
        let child = Command::new(&binary)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone().expect("dup")))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {binary}: {e}"));
        self.child = Some(child);
        let up = wait_until(Duration::from_secs(10), || self.try_cmd(&["PING"]).is_ok());
        assert!(
            up,
            "redis-server on port {} did not answer PING; log:\n{}",
            self.port,
            tail_file(&self.log, 30)
        );
    }

    /// `127.0.0.1:P`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://127.0.0.1:P`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs one command on a fresh connection (2 s timeouts).
    pub fn try_cmd(&self, args: &[&str]) -> redis::RedisResult<Value> {
        let mut info = redis::IntoConnectionInfo::into_connection_info(self.url())?;
        if let Some(p) = &self.password {
            let r = info.redis_settings().clone().set_password(p);
            info = info.set_redis_settings(r);
        }
        let client = redis::Client::open(info)?;
        let mut con = client.get_connection_with_timeout(Duration::from_secs(2))?;
        con.set_read_timeout(Some(Duration::from_secs(2)))?;
        let mut c = redis::cmd(args[0]);
        for a in &args[1..] {
            c.arg(*a);
        }
        c.query(&mut con)
    }

    /// Creates ACL user `name` with password `secret`, allowed `~tollgate:*` and every command
    /// but the `extra` rules (e.g. `-script|load`).
    pub fn acl_user(&self, name: &str, secret: &str, extra: &[&str]) {
        let password = format!(">{secret}");
        let mut args = vec![
            "ACL",
            "SETUSER",
            name,
            "on",
            &password,
            "~tollgate:*",
            "+@all",
        ];
        args.extend_from_slice(extra);
        self.cmd(&args);
    }

    /// Runs one command; panics on error.
    pub fn cmd(&self, args: &[&str]) -> Value {
        self.try_cmd(args)
            .unwrap_or_else(|e| panic!("redis {}: {args:?}: {e}", self.port))
    }

    /// `INFO <section>` as text.
    pub fn info(&self, section: &str) -> String {
        match self.try_cmd(&["INFO", section]) {
            Ok(v) => redis::from_redis_value::<String>(v).unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// A field of `INFO <section>` (`role`, `master_repl_offset`, ...).
    pub fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let text = self.info(section);
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .map(|v| v.trim().to_string())
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// SIGKILL (`kill -9`).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the same process again (same port, same directory, so a cluster node keeps its
    /// nodes.conf and rejoins as what the cluster says it is).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn_and_wait();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for RedisNode {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until `replica` has processed every write `master` had made when called (its
/// replication offset reached the master's), or `timeout` passes; says whether it caught up.
/// (`WAIT` would not do: it only counts the writes of its own connection.)
pub fn wait_replica_caught_up(master: &RedisNode, replica: &RedisNode, timeout: Duration) -> bool {
    let offset = |node: &RedisNode, field: &str| {
        node.info_field("replication", field)
            .and_then(|v| v.parse::<u64>().ok())
    };
    let Some(target) = offset(master, "master_repl_offset") else {
        return false;
    };
    let start = Instant::now();
    loop {
        if offset(replica, "slave_repl_offset").is_some_and(|o| o >= target) {
            return true;
        }
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------------
// Redis Cluster
// ---------------------------------------------------------------------------------------------

/// A Redis Cluster of `masters` masters with `replicas` replicas each, created with
/// `redis-cli --cluster create`. Node timeout 1000 ms so failovers take about a second or two.
pub struct RedisCluster {
    pub nodes: Vec<RedisNode>,
}

impl RedisCluster {
    pub fn start(masters: usize, replicas: usize) -> Self {
        let n = masters * (1 + replicas);
        let nodes: Vec<RedisNode> = (0..n)
            .map(|_| RedisNode::start_cluster_node(1000))
            .collect();
        let mut args = vec!["--cluster".to_string(), "create".to_string()];
        args.extend(nodes.iter().map(|n| n.addr()));
        args.extend([
            "--cluster-replicas".into(),
            replicas.to_string(),
            "--cluster-yes".into(),
        ]);
        let out = Command::new("redis-cli")
            .args(&args)
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = RedisCluster { nodes };
        assert!(
            cluster.wait_healthy(Duration::from_secs(30)),
            "cluster never became ok with {n} nodes: {}",
            cluster.nodes[0].cluster_info()
        );
        cluster
    }

    /// Seed URLs of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url()).collect()
    }

    /// Every running node says `cluster_state:ok`, sees every slot assigned and ok, and all
    /// agree on the masters.
    pub fn wait_healthy(&self, timeout: Duration) -> bool {
        wait_until(timeout, || {
            self.nodes.iter().filter(|n| n.child.is_some()).all(|n| {
                let info = n.cluster_info();
                info.contains("cluster_state:ok") && info.contains("cluster_slots_ok:16384")
            })
        })
    }

    /// Index of the node that is master of `slot` according to a running node.
    pub fn master_of_slot(&self, slot: u16) -> usize {
        let port = self.slot_owner_port(slot).expect("slot owner");
        self.nodes
            .iter()
            .position(|n| n.port == port)
            .expect("node")
    }

    fn slot_owner_port(&self, slot: u16) -> Option<u16> {
        for n in self.nodes.iter().filter(|n| n.child.is_some()) {
            let Ok(v) = n.try_cmd(&["CLUSTER", "SLOTS"]) else {
                continue;
            };
            let Value::Array(ranges) = v else { continue };
            for r in ranges {
                let Value::Array(parts) = r else { continue };
                let num = |v: &Value| redis::from_redis_value::<i64>(v.clone()).ok();
                let (Some(lo), Some(hi)) = (num(&parts[0]), num(&parts[1])) else {
                    continue;
                };
                if (lo..=hi).contains(&(slot as i64)) {
                    if let Value::Array(master) = &parts[2] {
                        return num(&master[1]).map(|p| p as u16);
                    }
                }
            }
            return None;
        }
        None
    }

    /// Index of a replica of the master at index `master`.
    pub fn replica_of(&self, master: usize) -> usize {
        let id = self.node_id(master);
        self.nodes
            .iter()
            .position(|n| {
                n.child.is_some()
                    && n.info_field("replication", "role").as_deref() == Some("slave")
                    && n.cmd_text(&["CLUSTER", "MYID"]) != id
                    && n.replica_master_id() == Some(id.clone())
            })
            .expect("a replica of that master")
    }

    pub fn node_id(&self, i: usize) -> String {
        self.nodes[i].cmd_text(&["CLUSTER", "MYID"])
    }

    /// Indexes of the current masters (by `ROLE` of running nodes).
    pub fn masters(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| {
                self.nodes[i].child.is_some()
                    && self.nodes[i].info_field("replication", "role").as_deref() == Some("master")
            })
            .collect()
    }

    /// Runs `redis-cli --cluster <args...>` against node 0 (or the first running node).
    pub fn cli(&self, args: &[&str]) -> String {
        let seed = self
            .nodes
            .iter()
            .find(|n| n.child.is_some())
            .expect("a running node")
            .addr();
        let mut full = vec!["--cluster".to_string(), args[0].to_string(), seed];
        full.extend(args[1..].iter().map(|a| a.to_string()));
        let out = Command::new("redis-cli")
            .args(&full)
            .output()
            .expect("redis-cli --cluster");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "redis-cli {full:?} failed:\n{text}");
        text
    }
}

impl RedisNode {
    /// `CLUSTER INFO` text (empty when the node does not answer).
    pub fn cluster_info(&self) -> String {
        self.try_cmd(&["CLUSTER", "INFO"])
            .ok()
            .and_then(|v| redis::from_redis_value(v).ok())
            .unwrap_or_default()
    }

    /// A command whose reply is a string.
    pub fn cmd_text(&self, args: &[&str]) -> String {
        redis::from_redis_value(self.cmd(args)).unwrap_or_default()
    }

    /// The node id of this replica's master (from `CLUSTER NODES`, `myself,slave <id>`).
    pub fn replica_master_id(&self) -> Option<String> {
        let nodes = self.cmd_text(&["CLUSTER", "NODES"]);
        nodes.lines().find(|l| l.contains("myself")).and_then(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2)?.contains("slave")).then(|| f[3].to_string())
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Sentinel
// ---------------------------------------------------------------------------------------------

/// A master, one replica and three sentinels monitoring them as `name`.
pub struct SentinelSet {
    pub name: String,
    pub data: Vec<RedisNode>,
    pub sentinels: Vec<RedisNode>,
}

impl SentinelSet {
    /// Sentinels declare the master down after `down_after_ms` without a reply.
    pub fn start(name: &str, down_after_ms: u64) -> Self {
        Self::start_with(name, down_after_ms, 1)
    }

    /// A master with `replicas` replicas (all synced) and three sentinels; the sentinels
    /// declare the master down after `down_after_ms` without a reply.
    pub fn start_with(name: &str, down_after_ms: u64, replicas: usize) -> Self {
        let master = RedisNode::start(&[]);
        let mut data = vec![master];
        for _ in 0..replicas {
            let replica =
                RedisNode::start(&["--replicaof", "127.0.0.1", &data[0].port.to_string()]);
            assert!(
                wait_until(Duration::from_secs(10), || {
                    replica
                        .info_field("replication", "master_link_status")
                        .as_deref()
                        == Some("up")
                }),
                "replica never synced"
            );
            data.push(replica);
        }
        let sentinels: Vec<RedisNode> = (0..3)
            .map(|_| RedisNode::start_sentinel(name, data[0].port, down_after_ms))
            .collect();
        let set = SentinelSet {
            name: name.to_string(),
            data,
            sentinels,
        };
        // Every sentinel knows the replicas and the other sentinels before any failover.
        let whole = format!("slaves={replicas},sentinels=3");
        assert!(
            wait_until(Duration::from_secs(20), || {
                set.sentinels.iter().all(|s| {
                    let v = s.try_cmd(&["SENTINEL", "MASTER", name]);
                    let text = format!("{v:?}");
                    text.contains("num-slaves") && s.info("sentinel").contains(&whole)
                })
            }),
            "sentinels never saw the whole set"
        );
        set
    }

    pub fn urls(&self) -> Vec<String> {
        self.sentinels.iter().map(|s| s.url()).collect()
    }

    /// Port of the master as the first running sentinel reports it.
    pub fn master_port(&self) -> Option<u16> {
        for s in &self.sentinels {
            if let Ok(v) = s.try_cmd(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", &self.name]) {
                let parts: Vec<String> = redis::from_redis_value(v).ok()?;
                return parts.get(1)?.parse().ok();
            }
        }
        None
    }

    /// Index into `data` of the current master.
    pub fn master(&self) -> usize {
        let port = self.master_port().expect("master port");
        self.data.iter().position(|n| n.port == port).expect("node")
    }
}

/// Waits until `cond` or `timeout`, polling every 50 ms; returns the elapsed time when it held.
pub fn time_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if cond() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Gateway config and traffic for the HA tests
// ---------------------------------------------------------------------------------------------

/// The API key of `tenant` (sent in `X-API-Key`).
pub fn api_key(tenant: &str) -> String {
    format!("key-of-{tenant}")
}

/// A gateway config: `redis: { <redis> }`, the tier lines (indented two spaces), one API key per
/// `(tenant, tier)`, one echo upstream behind an `auth: required` catch-all route.
pub fn ha_gateway_yaml(redis: &str, tiers: &str, keys: &[(String, &str)], backend: &str) -> String {
    let mut config = crate::common::GatewayConfig::echo(backend, "required")
        .redis_spec(&format!("{{ {redis} }}"))
        .api_keys_always()
        .tier_lines(tiers);
    for (tenant, tier) in keys {
        config = config.api_key(&api_key(tenant), tenant, tier);
    }
    config.yaml()
}

/// How one answer was decided, from its status and headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Redis decided: admitted (200) or rejected (429), `RateLimit-Policy` without `degraded`.
    RedisAdmitted,
    RedisRejected,
    /// The local fallback bucket decided (`Tollgate-Degraded: redis`).
    LocalAdmitted,
    LocalRejected,
    /// Policy `open`: 200 without quota headers.
    FailedOpen,
    /// Policy `closed`: 503 problem+json.
    FailedClosed,
    /// Anything else (a 500, a transport error): always a test failure.
    Broken,
}

impl Verdict {
    pub fn of(r: &crate::common::Reply) -> Verdict {
        let degraded = r.header("tollgate-degraded").is_some();
        let policy = r.header("ratelimit-policy");
        match (r.status, policy.is_some(), degraded) {
            (200, true, false) => Verdict::RedisAdmitted,
            (200, true, true) => Verdict::LocalAdmitted,
            (200, false, _) => Verdict::FailedOpen,
            (429, _, false) => Verdict::RedisRejected,
            (429, _, true) => Verdict::LocalRejected,
            (503, _, _)
                if r.body.contains("temporary-reduced-capacity")
                    && r.header("retry-after").is_some() =>
            {
                Verdict::FailedClosed
            }
            _ => Verdict::Broken,
        }
    }

    pub fn by_redis(self) -> bool {
        matches!(self, Verdict::RedisAdmitted | Verdict::RedisRejected)
    }
}

/// GET `url` as `tenant`; a transport error is a `Broken` verdict with status 0.
pub async fn ask(
    http: &reqwest::Client,
    url: &str,
    tenant: &str,
) -> (Verdict, crate::common::Reply) {
    match crate::common::try_get_with_key(http, url, Some(&api_key(tenant))).await {
        Ok(r) => (Verdict::of(&r), r),
        Err(e) => (
            Verdict::Broken,
            crate::common::Reply {
                status: 0,
                headers: Default::default(),
                body: e.to_string(),
            },
        ),
    }
}

/// One answer seen by the load generator.
#[derive(Debug, Clone)]
pub struct Sample {
    pub at: Instant,
    pub tenant: usize,
    pub verdict: Verdict,
    pub status: u16,
    pub body: String,
}

/// Steady load: `clients` tasks, each looping over every tenant and alternating between the
/// gateway URLs, one request at a time with `pause` between requests, until stopped.
pub struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Vec<Sample>>>,
}

impl Load {
    pub fn start(urls: Vec<String>, tenants: Vec<String>, clients: usize, pause: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..clients)
            .map(|c| {
                let (urls, tenants, stop) = (urls.clone(), tenants.clone(), stop.clone());
                tokio::spawn(async move {
                    let http = crate::common::http();
                    let mut out = Vec::new();
                    let mut i = c;
                    while !stop.load(Ordering::Acquire) {
                        let tenant = i % tenants.len();
                        let url = &urls[(i / tenants.len() + c) % urls.len()];
                        let (verdict, r) = ask(&http, url, &tenants[tenant]).await;
                        out.push(Sample {
                            at: Instant::now(),
                            tenant,
                            verdict,
                            status: r.status,
                            body: if verdict == Verdict::Broken {
                                r.body
                            } else {
                                String::new()
                            },
                        });
                        i += 1;
                        tokio::time::sleep(pause).await;
                    }
                    out
                })
            })
            .collect();
        Load { stop, tasks }
    }

    /// Stops the clients and returns every sample, in time order.
    pub async fn stop(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Release);
        let mut all = Vec::new();
        for t in self.tasks {
            all.extend(t.await.expect("load task"));
        }
        all.sort_by_key(|s| s.at);
        all
    }
}

/// What a fault did to the traffic, from the samples of a [`Load`].
#[derive(Debug, Default)]
pub struct Impact {
    pub requests: usize,
    /// Answers not decided by Redis (the tier's failure policy), after the fault.
    pub failed: usize,
    /// Answers that were neither a decision nor a declared policy (500s, transport errors).
    pub broken: usize,
    /// From the fault to the last answer not decided by Redis (zero when there was none).
    pub back_in_redis: Duration,
    /// Tenants (indexes) that saw at least one answer not decided by Redis.
    pub tenants_hit: Vec<usize>,
}

impl Impact {
    pub fn of(samples: &[Sample], fault_at: Instant) -> Impact {
        let mut impact = Impact {
            requests: samples.len(),
            ..Impact::default()
        };
        for s in samples {
            match s.verdict {
                Verdict::Broken => impact.broken += 1,
                v if v.by_redis() => {}
                _ => {
                    impact.failed += 1;
                    if !impact.tenants_hit.contains(&s.tenant) {
                        impact.tenants_hit.push(s.tenant);
                    }
                    if s.at > fault_at {
                        impact.back_in_redis = impact.back_in_redis.max(s.at - fault_at);
                    }
                }
            }
        }
        impact.tenants_hit.sort();
        impact
    }
}

/// `CLUSTER KEYSLOT <key>` asked of `node`.
pub fn keyslot(node: &RedisNode, key: &str) -> u16 {
    redis::from_redis_value::<i64>(node.cmd(&["CLUSTER", "KEYSLOT", key])).expect("slot") as u16
}

/// Every tenant decided once by Redis through each URL; returns the admitted count per tenant.
pub async fn warm_up(urls: &[String], tenants: &[String]) -> Vec<u64> {
    let http = crate::common::http();
    let mut warm = vec![0u64; tenants.len()];
    for (t, tenant) in tenants.iter().enumerate() {
        for url in urls {
            let mut decided = false;
            for _ in 0..50 {
                let (v, r) = ask(&http, url, tenant).await;
                assert!(!matches!(v, Verdict::Broken), "warm-up {r:?}");
                if v == Verdict::RedisAdmitted {
                    decided = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert!(
                decided,
                "warm-up: {tenant} never decided by Redis via {url}"
            );
            warm[t] += 1;
        }
    }
    warm
}

/// Tokens admitted by Redis that the surviving buckets do not show (over-admission: writes
/// lost with a master), and tokens they show beyond what was admitted (double charges of a
/// retried call), summed over tenants. Buckets have `burst` tokens and no refill; one more
/// request per tenant (through `url`) reads each bucket.
pub async fn lost_and_double(
    url: &str,
    tenants: &[String],
    warm: &[u64],
    samples: &[Sample],
    burst: u64,
) -> (u64, u64) {
    let http = crate::common::http();
    let (mut over, mut double) = (0u64, 0u64);
    for (t, tenant) in tenants.iter().enumerate() {
        let admitted = warm[t]
            + samples
                .iter()
                .filter(|s| s.tenant == t && s.verdict == Verdict::RedisAdmitted)
                .count() as u64;
        let mut remaining = None;
        for _ in 0..100 {
            let (v, r) = ask(&http, url, tenant).await;
            if v == Verdict::RedisAdmitted {
                remaining = Some(r.remaining());
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let remaining =
            remaining.unwrap_or_else(|| panic!("{tenant} never decided by Redis again"));
        let taken = burst - remaining - 1;
        over += admitted.saturating_sub(taken);
        double += taken.saturating_sub(admitted);
    }
    (over, double)
}
