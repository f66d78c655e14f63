//! A private `redis-server` per test.
//!
//! The server binary is `redis-server` on `PATH`, or the one `TOLLGATE_TEST_REDIS_SERVER` names
//! (e.g. Valkey's `valkey-server`, which `scripts/test.sh` runs the Redis suites against too).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::processes::{addr_in_use, has_exited, kill_child, log_stdio, read_lossy, test_dir};
use super::processes::{free_port, send_signal, tail_file};

/// The environment variable naming the Redis-compatible server binary the tests start.
pub const REDIS_SERVER_ENV: &str = "TOLLGATE_TEST_REDIS_SERVER";

/// The server binary the tests start: `$TOLLGATE_TEST_REDIS_SERVER` when set and not empty
/// (a path or a name on `PATH`, e.g. `valkey-server`), otherwise `redis-server`. Sentinels are
/// the same binary with `--sentinel`.
pub fn redis_server_binary() -> String {
    std::env::var(REDIS_SERVER_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "redis-server".to_string())
}

/// A private `redis-server` (no persistence) on a free loopback port.
pub struct RedisServer {
    port: u16,
    dir: TempDir,
    log: PathBuf,
    child: Option<Child>,
}

impl RedisServer {
    /// Spawns `redis-server` and waits (up to 10 s) until PING answers.
    pub fn start() -> Self {
        let mut last_err = String::new();
        for _attempt in 0..3 {
            let dir = test_dir("tollgate-redis-");
            let mut server = RedisServer {
                port: free_port(),
                log: dir.path().join("redis.log"),
                child: None,
                dir,
            };
            match server.spawn_and_wait() {
                Ok(()) => return server,
                Err(e) => {
                    let retry = addr_in_use(&e);
                    last_err = e;
                    drop(server); // kills the process, if any
                    if !retry {
                        break;
                    }
                }
            }
        }
        panic!("redis-server did not start: {last_err}");
    }

    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let (out, err) = log_stdio(&self.log);
        let binary = redis_server_binary();
        let child = Command::new(&binary)
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot spawn {binary}: {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = has_exited(&mut self.child) {
                return Err(format!(
                    "redis-server exited ({status}); log:\n{}",
                    tail_file(&self.log, 30)
                ));
            }
            if self.answers_as_child(Duration::from_millis(250)) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "redis-server on port {} did not answer PING within 10 s; log:\n{}",
                    self.port,
                    tail_file(&self.log, 30)
                ));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Whether the server on this port answers and is this handle's own process (its
    /// `INFO server` `process_id`): another test's server that took the port first (the free
    /// port was picked, not held) answers too, while this one is about to exit on "address in
    /// use"; a test must never go on against it (killing this handle would not stop it).
    fn answers_as_child(&self, timeout: Duration) -> bool {
        let Some(own) = self.child.as_ref().map(Child::id) else {
            return false;
        };
        let Ok(client) = redis::Client::open(self.url()) else {
            return false;
        };
        let Ok(mut con) = client.get_connection_with_timeout(timeout) else {
            return false;
        };
        let _ = con.set_read_timeout(Some(timeout));
        let Ok(info) = redis::cmd("INFO").arg("server").query::<String>(&mut con) else {
            return false;
        };
        info.lines()
            .find_map(|l| l.trim().strip_prefix("process_id:"))
            .and_then(|pid| pid.parse::<u32>().ok())
            == Some(own)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:P`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://127.0.0.1:P/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .expect("redis-server is not running")
            .id()
    }

    /// A new synchronous connection (5 s connect/read/write timeouts, so a paused server cannot
    /// hang a test forever).
    pub fn conn(&self) -> redis::Connection {
        let client = redis::Client::open(self.url()).expect("redis url");
        let con = client
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect to redis {}: {e}", self.url()));
        con.set_read_timeout(Some(Duration::from_secs(5))).ok();
        con.set_write_timeout(Some(Duration::from_secs(5))).ok();
        con
    }

    /// `KEYS pattern`, sorted.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg(pattern)
            .query(&mut self.conn())
            .expect("KEYS");
        keys.sort();
        keys
    }

    /// `PTTL key`: milliseconds, -1 without expiry, -2 when the key does not exist.
    pub fn pttl(&self, key: &str) -> i64 {
        redis::cmd("PTTL")
            .arg(key)
            .query(&mut self.conn())
            .expect("PTTL")
    }

    /// The fields of `key` as sorted pairs: a hash's (`HGETALL`), or a token bucket string's
    /// as its earlier hash fields ([`super::bucket::key_fields`]).
    pub fn hgetall(&self, key: &str) -> Vec<(String, String)> {
        super::bucket::key_fields(&mut self.conn(), key)
    }

    /// `FLUSHALL`.
    pub fn flushall(&self) {
        redis::cmd("FLUSHALL")
            .query::<()>(&mut self.conn())
            .expect("FLUSHALL");
    }

    /// How many times `cmd` (e.g. "evalsha", "script|load") ran since start or the last
    /// `CONFIG RESETSTAT`, from `INFO commandstats`; 0 when it never ran.
    pub fn command_calls(&self, cmd: &str) -> u64 {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn())
            .expect("INFO commandstats");
        parse_command_calls(&info, cmd)
    }

    /// `CONFIG RESETSTAT` (zeroes `command_calls`).
    pub fn reset_stats(&self) {
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query::<()>(&mut self.conn())
            .expect("CONFIG RESETSTAT");
    }

    /// Cuts every subscriber's connection (`CLIENT KILL TYPE pubsub`): the messages published
    /// until a subscriber reconnects reach none of them.
    pub fn kill_pubsub_clients(&self) {
        redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query::<redis::Value>(&mut self.conn())
            .expect("CLIENT KILL");
    }

    /// Whole tokens a token bucket's hash `key` holds (its level `l` over its scale `s`), or
    /// `burst` when the hash does not exist (a bucket not yet touched is full).
    pub fn bucket_level(&self, key: &str, burst: u64) -> u64 {
        let h = self.hgetall(key);
        if h.is_empty() {
            return burst;
        }
        let field = |n: &str| -> u64 {
            let v = h
                .iter()
                .find(|(f, _)| f == n)
                .unwrap_or_else(|| panic!("{n}: {h:?}"));
            v.1.parse().unwrap()
        };
        field("l") / field("s")
    }

    /// SIGKILL; the port stays reserved for [`restart`](Self::restart).
    pub fn kill(&mut self) {
        kill_child(&mut self.child);
    }

    /// SIGSTOP: connections stay open but nothing answers (a "slow" Redis).
    pub fn pause(&self) {
        assert!(send_signal(self.pid(), "STOP"), "kill -STOP redis-server");
    }

    /// SIGCONT after [`pause`](Self::pause).
    pub fn resume(&self) {
        assert!(send_signal(self.pid(), "CONT"), "kill -CONT redis-server");
    }

    /// Kills the current process (if any) and starts a new, empty one on the same port.
    pub fn restart(&mut self) {
        self.kill();
        if let Err(e) = self.spawn_and_wait() {
            kill_child(&mut self.child);
            panic!("redis-server did not restart: {e}");
        }
    }

    /// Whether the process is alive (not killed, not exited).
    pub fn is_running(&mut self) -> bool {
        if has_exited(&mut self.child).is_some() {
            // Reaped: forget the pid so no later signal can reach a process that reused it.
            self.child = None;
        }
        self.child.is_some()
    }

    pub fn log(&self) -> String {
        read_lossy(&self.log)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        kill_child(&mut self.child);
    }
}

/// `calls=` of `cmdstat_<cmd>` in `INFO commandstats` text (case-insensitive), 0 when absent.
pub fn parse_command_calls(info: &str, cmd: &str) -> u64 {
    let want = format!("cmdstat_{}:", cmd.to_ascii_lowercase());
    info.lines()
        .find_map(|line| line.trim().strip_prefix(want.as_str()))
        .and_then(|rest| {
            rest.split(',')
                .find_map(|kv| kv.strip_prefix("calls="))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}
