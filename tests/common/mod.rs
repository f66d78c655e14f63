//! Integration-test harness: real processes on free loopback ports, one set per test.
//!
//! Every test owns its own `redis-server`, `tollgate-echo` backends and `tollgate` gateway, each
//! on ports nobody else in the process was handed, so tests run in parallel. Every process is
//! killed (SIGKILL) when its handle is dropped, which also happens when a test panics; a failing
//! test prints the tail of the gateway's log.
//!
//! The control methods (`stats`, `metrics`, `keys`, ...) are synchronous on purpose: they talk to
//! local processes and take milliseconds, they work from `Drop`, and they can be called from
//! `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` tests without `.await` noise.
//! Traffic under test goes through [`client`] / [`client_from`] (async reqwest).
//!
//! Set `TOLLGATE_KEEP_TEST_DIRS=1` to keep every temporary directory (configs and logs) after the
//! test; their paths are printed.

#![allow(dead_code)]

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tempfile::TempDir;

pub mod admin;

/// Path of the gateway binary under test.
pub const GATEWAY_BIN: &str = env!("CARGO_BIN_EXE_tollgate");
/// Path of the echo backend binary.
pub const ECHO_BIN: &str = env!("CARGO_BIN_EXE_tollgate-echo");

/// The repeating pattern of `tollgate-echo`'s `?size=N` bodies (byte `i` is `PATTERN[i % 61]`).
pub const ECHO_PATTERN: &[u8; 61] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXY";

/// The exact body `tollgate-echo` sends for `?size=len`.
pub fn echo_pattern(len: usize) -> Vec<u8> {
    ECHO_PATTERN.iter().copied().cycle().take(len).collect()
}

// ---------------------------------------------------------------------------------------------
// Ports
// ---------------------------------------------------------------------------------------------

fn handed_out() -> &'static Mutex<HashSet<u16>> {
    static PORTS: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    PORTS.get_or_init(|| Mutex::new(HashSet::new()))
}

/// Lowest port of the kernel's ephemeral range (outgoing connections take their local port there).
fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse().ok()))
        .unwrap_or(32768)
}

/// A loopback port that is free right now and was never returned before in this process.
///
/// Ports are drawn at random from below the kernel's ephemeral range, so that the thousands of
/// outgoing client connections a test makes cannot grab a port between this call and the moment
/// the server binds it (which a plain `bind(127.0.0.1:0)` port, taken from the ephemeral range,
/// is exposed to). Each candidate is checked by binding it; `bind(:0)` is the fallback.
pub fn free_port() -> u16 {
    let mut used = handed_out().lock().unwrap_or_else(|e| e.into_inner());
    let high = ephemeral_low();
    if high > 12_000 {
        for _ in 0..2_000 {
            let port: u16 = rand::random_range(10_000..high);
            if used.contains(&port) {
                continue;
            }
            if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                used.insert(port);
                return port;
            }
        }
    }
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local_addr").port();
        if used.insert(port) {
            return port;
        }
    }
}

/// `127.0.0.1:<free_port()>`.
pub fn free_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

// ---------------------------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------------------------

/// Polls `cond` every 20 ms until it holds (true) or `timeout` passes (false). Blocking.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Async [`wait_until`]: polls `cond` every 20 ms without blocking a runtime worker.
pub async fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads `value` every `period` until it returns the same thing 3 times in a row, and returns
/// that (for counters still moving after an event, e.g. queued calls draining).
pub async fn settled<T: PartialEq>(period: Duration, mut value: impl FnMut() -> T) -> T {
    let mut last = value();
    let mut stable = 0;
    while stable < 3 {
        tokio::time::sleep(period).await;
        let now = value();
        if now == last {
            stable += 1;
        } else {
            stable = 0;
            last = now;
        }
    }
    last
}

/// The last `lines` lines of a text file (lossy UTF-8), or a note that it cannot be read.
pub fn tail_file(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = strip_ansi(&String::from_utf8_lossy(&bytes));
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("<cannot read {}: {e}>", path.display()),
    }
}

/// Reads a log file as text, with ANSI colour sequences removed.
fn read_lossy(path: &Path) -> String {
    std::fs::read(path)
        .map(|b| strip_ansi(&String::from_utf8_lossy(&b)))
        .unwrap_or_default()
}

/// Removes ANSI escape sequences (`ESC [ ... letter`) from `text`.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn test_dir(prefix: &str) -> TempDir {
    let keep = std::env::var_os("TOLLGATE_KEEP_TEST_DIRS").is_some();
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .disable_cleanup(keep)
        .tempdir()
        .expect("create temp dir");
    if keep {
        eprintln!("keeping {}", dir.path().display());
    }
    dir
}

/// Opens `path` for a child's stdout and stderr (one shared file offset, so lines interleave).
/// `tollgate run -c <config>` in `dir`, stdout and stderr to `log`, `RUST_LOG=info` unless set,
/// and plain log lines (tracing-subscriber honours NO_COLOR) so tests can search them.
fn gateway_command(config: &Path, dir: &Path, log: &Path) -> Command {
    let (out, err) = log_stdio(log);
    let mut cmd = Command::new(GATEWAY_BIN);
    cmd.arg("run")
        .arg("-c")
        .arg(config)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .env("NO_COLOR", "1");
    if std::env::var_os("RUST_LOG").is_none() {
        cmd.env("RUST_LOG", "info");
    }
    cmd
}

fn log_stdio(path: &Path) -> (Stdio, Stdio) {
    let file = File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    let clone = file.try_clone().expect("dup log file");
    (Stdio::from(file), Stdio::from(clone))
}

/// Sends `kill -<sig> <pid>`; true when `kill` succeeded.
pub fn send_signal(pid: u32, sig: &str) -> bool {
    let sig = sig.trim_start_matches('-').trim_start_matches("SIG");
    Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn kill_child(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill(); // SIGKILL also ends a SIGSTOPped process
        let _ = c.wait();
    }
}

fn has_exited(child: &mut Option<Child>) -> Option<ExitStatus> {
    child.as_mut().and_then(|c| c.try_wait().ok().flatten())
}

fn addr_in_use(log: &str) -> bool {
    let l = log.to_ascii_lowercase();
    l.contains("address already in use") || l.contains("addrinuse") || l.contains("address in use")
}

/// SHA-256 hex digest, as stored in `identity.api_keys.keys[].sha256`.
pub fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

// ---------------------------------------------------------------------------------------------
// A minimal blocking HTTP/1.1 client for control endpoints (admin, echo stats, health).
// ---------------------------------------------------------------------------------------------

/// One HTTP answer from [`http_request`].
#[derive(Debug, Clone)]
pub struct HttpReply {
    pub status: u16,
    /// Lowercase names, in order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpReply {
    /// First header value by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `method path` with `Connection: close` and no body to `addr` ("127.0.0.1:P") and reads
/// the answer (content-length, chunked or read-to-close). `timeout` bounds connect and each read.
pub fn http_request(
    addr: &str,
    method: &str,
    path: &str,
    timeout: Duration,
) -> std::io::Result<HttpReply> {
    http_request_with_headers(addr, method, path, &[], timeout)
}

/// [`http_request`] GET with a 2 s timeout.
pub fn http_get(addr: &str, path: &str) -> std::io::Result<HttpReply> {
    http_request(addr, "GET", path, Duration::from_secs(2))
}

fn parse_http_reply(raw: &[u8]) -> std::io::Result<HttpReply> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("bad status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        body = dechunk(&body).ok_or_else(|| bad("bad chunked body"))?;
    } else if let Some(len) = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
    {
        body.truncate(len);
    }
    Ok(HttpReply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

// ---------------------------------------------------------------------------------------------
// reqwest clients and response helpers
// ---------------------------------------------------------------------------------------------

/// The builder every test client starts from: no proxy from the environment, 30 s timeout.
pub fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .connect_timeout(Duration::from_secs(5))
}

/// A client for traffic under test (connects from 127.0.0.1).
pub fn client() -> reqwest::Client {
    client_builder().build().expect("build reqwest client")
}

/// A client whose connections come from `ip` (e.g. 127.0.0.2: all of 127/8 is loopback on
/// Linux), so the gateway sees a different client address.
pub fn client_from(ip: IpAddr) -> reqwest::Client {
    client_builder()
        .local_address(ip)
        .build()
        .expect("build reqwest client")
}

/// A client for "no hang" assertions: every request must complete within 10 s.
pub fn http() -> reqwest::Client {
    client_builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("build reqwest client")
}

/// [`http`] whose connections come from `ip_text` (any 127/8 address).
pub fn http_from(ip_text: &str) -> reqwest::Client {
    client_builder()
        .timeout(Duration::from_secs(10))
        .local_address(ip(ip_text))
        .build()
        .expect("build reqwest client")
}

/// One complete answer: status, headers and body text.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Reply {
    /// Reads the whole response.
    pub async fn read(resp: reqwest::Response) -> Result<Reply, reqwest::Error> {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text().await?;
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// A header's value as text (`None` when absent or not visible ASCII).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `r=` of the `RateLimit` field; panics when absent.
    pub fn remaining(&self) -> u64 {
        let field = self
            .header("ratelimit")
            .unwrap_or_else(|| panic!("no RateLimit header: {self:?}"));
        field
            .split(';')
            .find_map(|p| p.strip_prefix("r="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("RateLimit without r=: {field}"))
    }
}

/// GET `url`, with `X-API-Key: api_key` when given, and read the whole answer.
pub async fn try_get_with_key(
    http: &reqwest::Client,
    url: &str,
    api_key: Option<&str>,
) -> Result<Reply, reqwest::Error> {
    let mut req = http.get(url);
    if let Some(k) = api_key {
        req = req.header("x-api-key", k);
    }
    Reply::read(req.send().await?).await
}

/// `"127.0.0.2"` → `IpAddr`.
pub fn ip(text: &str) -> IpAddr {
    text.parse().unwrap_or_else(|_| panic!("not an IP: {text}"))
}

/// Parses an RFC 9457 problem body; panics with the body when it is not a JSON object with
/// `type`, `title` and `status`.
pub fn problem(resp_body: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(resp_body)
        .unwrap_or_else(|e| panic!("problem body is not JSON ({e}): {resp_body}"));
    for field in ["type", "title", "status"] {
        assert!(
            v.get(field).is_some(),
            "problem body lacks {field:?}: {resp_body}"
        );
    }
    v
}

/// Asserts `resp` is a `status` answer with `Content-Type: application/problem+json` whose body's
/// `status` field matches, and returns the parsed body.
pub async fn expect_problem(resp: reqwest::Response, status: u16) -> serde_json::Value {
    let got = resp.status().as_u16();
    let content_type = header_str(&resp, "content-type").unwrap_or_default();
    let body = resp.text().await.expect("read problem body");
    assert_eq!(got, status, "status; body: {body}");
    assert!(
        content_type.starts_with("application/problem+json"),
        "content-type {content_type:?}; body: {body}"
    );
    let v = problem(&body);
    assert_eq!(
        v["status"].as_u64(),
        Some(status as u64),
        "problem status field: {body}"
    );
    v
}

/// A response header as an owned string (None when absent or not visible ASCII).
pub fn header_str(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Reads the JSON answer `tollgate-echo` gives for an ordinary request (asserting 200).
pub async fn echo_json(resp: reqwest::Response) -> serde_json::Value {
    let status = resp.status().as_u16();
    let body = resp.text().await.expect("read echo body");
    assert_eq!(status, 200, "echo answer status; body: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("echo body is not JSON ({e}): {body}"))
}

/// Whether `s` looks like a UUID (8-4-4-4-12 hex digits).
pub fn is_uuid_like(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

// ---------------------------------------------------------------------------------------------
// redis-server
// ---------------------------------------------------------------------------------------------

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
        let child = Command::new("redis-server")
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
            .map_err(|e| format!("cannot spawn redis-server: {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = has_exited(&mut self.child) {
                return Err(format!(
                    "redis-server exited ({status}); log:\n{}",
                    tail_file(&self.log, 30)
                ));
            }
            if self.ping(Duration::from_millis(250)) {
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

    fn ping(&self, timeout: Duration) -> bool {
        let Ok(client) = redis::Client::open(self.url()) else {
            return false;
        };
        let Ok(mut con) = client.get_connection_with_timeout(timeout) else {
            return false;
        };
        let _ = con.set_read_timeout(Some(timeout));
        redis::cmd("PING").query::<String>(&mut con).is_ok()
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

    /// `HGETALL key` as sorted pairs.
    pub fn hgetall(&self, key: &str) -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(key)
            .query(&mut self.conn())
            .expect("HGETALL");
        pairs.sort();
        pairs
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

// ---------------------------------------------------------------------------------------------
// tollgate-echo backends
// ---------------------------------------------------------------------------------------------

/// Counters of a [`Backend`] (`GET /__stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    pub requests: u64,
    pub in_flight: u64,
    pub peak_in_flight: u64,
}

/// A `tollgate-echo` process on a free loopback port.
pub struct Backend {
    name: String,
    addr: String,
    _dir: TempDir,
    log: PathBuf,
    child: Option<Child>,
}

impl Backend {
    /// Spawns `tollgate-echo --listen 127.0.0.1:0 --name <name>` and waits (up to 10 s) for its
    /// `listening on` line; the kernel picks the port, so there is no race for it.
    pub fn start(name: &str) -> Self {
        Self::start_with_args(name, &[])
    }

    /// [`start`](Self::start) with extra `tollgate-echo` arguments (e.g. `--tls-cert F`).
    pub fn start_with_args(name: &str, extra: &[&str]) -> Self {
        let dir = test_dir("tollgate-echo-");
        let log = dir.path().join("echo.log");
        let (_, err) = log_stdio(&log);
        let mut child = Command::new(ECHO_BIN)
            .args(["--listen", "127.0.0.1:0", "--name", name, "--threads", "2"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {ECHO_BIN}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = tx.send(line);
            // Keep draining so the pipe never fills; ends when the process exits.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let line = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
        let Some(addr) = line.trim().strip_prefix("listening on ").map(str::to_owned) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "tollgate-echo {name} did not report its address (got {line:?}); log:\n{}",
                tail_file(&log, 30)
            );
        };
        Backend {
            name: name.to_owned(),
            addr,
            _dir: dir,
            log,
            child: Some(child),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `127.0.0.1:P`.
    pub fn addr(&self) -> String {
        self.addr.clone()
    }

    pub fn port(&self) -> u16 {
        self.addr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port in addr")
    }

    /// `http://127.0.0.1:P<path>` (direct, bypassing the gateway).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("backend is not running").id()
    }

    fn control(&self, method: &str, path: &str) -> HttpReply {
        let reply = http_request(&self.addr, method, path, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{method} {path} on backend {}: {e}", self.name));
        assert_eq!(
            reply.status, 200,
            "{method} {path} on backend {}: {}",
            self.name, reply.body
        );
        reply
    }

    /// `GET /__stats`.
    pub fn stats(&self) -> Stats {
        parse_stats(&self.control("GET", "/__stats").body)
    }

    /// `POST /__reset`.
    pub fn reset(&self) {
        self.control("POST", "/__reset");
    }

    /// `POST /__health?fail=0|1`: what `GET /healthz` answers from now on.
    pub fn set_healthy(&self, healthy: bool) {
        let path = if healthy {
            "/__health?fail=0"
        } else {
            "/__health?fail=1"
        };
        self.control("POST", path);
    }

    /// SIGKILL: connections to its port are refused from now on.
    pub fn kill(&mut self) {
        kill_child(&mut self.child);
    }

    pub fn log(&self) -> String {
        read_lossy(&self.log)
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        kill_child(&mut self.child);
    }
}

fn parse_stats(body: &str) -> Stats {
    let v: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("stats not JSON ({e}): {body}"));
    let field = |name: &str| {
        v[name]
            .as_u64()
            .unwrap_or_else(|| panic!("stats field {name} missing or negative: {body}"))
    };
    Stats {
        requests: field("requests"),
        in_flight: field("in_flight"),
        peak_in_flight: field("peak_in_flight"),
    }
}

// ---------------------------------------------------------------------------------------------
// The gateway
// ---------------------------------------------------------------------------------------------

/// A `tollgate run -c <tempdir>/gateway.yaml` process.
///
/// The YAML may contain `{listen}` and `{admin}`, replaced by free `127.0.0.1:P` addresses that
/// stay the same across [`reload`](Self::reload)s.
pub struct Gateway {
    listen: String,
    admin: String,
    dir: TempDir,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    /// Set once [`wait_exit`](Self::wait_exit) reaped the process (its pid may be reused).
    exit_status: Option<ExitStatus>,
}

/// The result of `tollgate check`.
#[derive(Debug)]
pub struct CheckOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl CheckOutput {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// stdout followed by stderr.
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Replaces `{listen}` and `{admin}` in `yaml`.
pub fn render(yaml: &str, listen: &str, admin: &str) -> String {
    yaml.replace("{listen}", listen).replace("{admin}", admin)
}

impl Gateway {
    /// Starts the gateway and waits until `GET /healthz` on the admin listener answers 200
    /// (up to 30 s). Panics with the tail of its log when it exits early or times out.
    pub fn start(yaml: &str) -> Self {
        Self::start_with_env(yaml, &[])
    }

    /// [`start`](Self::start) with extra environment variables (e.g. a JWT `secret_env`).
    pub fn start_with_env(yaml: &str, env: &[(&str, &str)]) -> Self {
        Self::try_start_with_env(yaml, env).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`start`](Self::start) but returns the failure (with the log tail) instead of panicking.
    pub fn try_start(yaml: &str) -> Result<Self, String> {
        Self::try_start_with_env(yaml, &[])
    }

    pub fn try_start_with_env(yaml: &str, env: &[(&str, &str)]) -> Result<Self, String> {
        assert!(
            yaml.contains("{admin}"),
            "the gateway YAML needs an admin listener `admin: {{ listen: \"{{admin}}\" }}` so the \
             harness can tell when it is up"
        );
        let mut last_err = String::new();
        for _attempt in 0..3 {
            let dir = test_dir("tollgate-gw-");
            let mut gw = Gateway {
                listen: free_addr(),
                admin: free_addr(),
                config: dir.path().join("gateway.yaml"),
                log: dir.path().join("gateway.log"),
                child: None,
                exit_status: None,
                dir,
            };
            std::fs::write(&gw.config, render(yaml, &gw.listen, &gw.admin))
                .expect("write gateway.yaml");
            let mut cmd = gateway_command(&gw.config, gw.dir.path(), &gw.log);
            for (k, v) in env {
                cmd.env(k, v);
            }
            gw.child = Some(
                cmd.spawn()
                    .map_err(|e| format!("cannot spawn {GATEWAY_BIN}: {e}"))?,
            );
            match gw.wait_healthy(Duration::from_secs(30)) {
                Ok(()) => return Ok(gw),
                Err(e) => {
                    kill_child(&mut gw.child);
                    let retry = addr_in_use(&gw.log());
                    last_err = e;
                    if !retry {
                        break;
                    }
                }
            }
        }
        Err(last_err)
    }

    fn wait_healthy(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = has_exited(&mut self.child) {
                return Err(format!(
                    "gateway exited during startup ({status}); config:\n{}\nlog tail:\n{}",
                    read_lossy(&self.config),
                    tail_file(&self.log, 40)
                ));
            }
            if let Ok(reply) =
                http_request(&self.admin, "GET", "/healthz", Duration::from_millis(500))
            {
                if reply.status == 200 {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "gateway admin http://{}/healthz did not answer 200 within {timeout:?}; \
                     log tail:\n{}",
                    self.admin,
                    tail_file(&self.log, 40)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The proxy listener, `127.0.0.1:P` (what `{listen}` became).
    pub fn listen_addr(&self) -> &str {
        &self.listen
    }

    /// The admin listener, `127.0.0.1:P` (what `{admin}` became).
    pub fn admin_addr(&self) -> &str {
        &self.admin
    }

    /// `http://<listen><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.listen, path)
    }

    /// `http://<admin><path>`.
    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{}", self.admin, path)
    }

    /// Blocking GET on the admin listener.
    pub fn admin_get(&self, path: &str) -> HttpReply {
        http_request(&self.admin, "GET", path, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("GET admin {path}: {e}; log tail:\n{}", self.log_tail(20)))
    }

    /// `GET /metrics` text (asserting 200).
    pub fn metrics(&self) -> String {
        let reply = self.admin_get("/metrics");
        assert_eq!(reply.status, 200, "GET /metrics: {}", reply.body);
        reply.body
    }

    /// The value of the sample whose series text (everything before the value) is exactly
    /// `series`, e.g. `tollgate_requests_total{route="routes[0]",status_class="2xx"}` (labels in
    /// the order the exposition prints them: alphabetical for the prometheus crate).
    pub fn metric(&self, series: &str) -> Option<f64> {
        metric_value(&self.metrics(), series)
    }

    /// [`metric`](Self::metric), 0 when absent.
    pub fn metric_or_zero(&self, series: &str) -> f64 {
        self.metric(series).unwrap_or(0.0)
    }

    /// Rewrites the config file (same `{listen}`/`{admin}` addresses) and sends SIGHUP. Returns at
    /// once; wait for the effect (a metric, a log line) before relying on it.
    pub fn reload(&self, new_yaml: &str) {
        let tmp = self.dir.path().join("gateway.yaml.tmp");
        std::fs::write(&tmp, render(new_yaml, &self.listen, &self.admin))
            .expect("write gateway.yaml.tmp");
        std::fs::rename(&tmp, &self.config).expect("replace gateway.yaml");
        self.signal("HUP");
    }

    /// Sends `kill -<name>` (e.g. "TERM", "HUP", "INT", "QUIT") to the gateway. Panics when the
    /// gateway was killed or already reaped by [`wait_exit`](Self::wait_exit): its pid may belong
    /// to another process by now.
    pub fn signal(&self, name: &str) {
        assert!(
            self.exit_status.is_none(),
            "kill -{name}: the gateway already exited ({:?})",
            self.exit_status
        );
        assert!(send_signal(self.pid(), name), "kill -{name} gateway");
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("gateway is not running").id()
    }

    /// The whole log (stdout and stderr).
    pub fn log(&self) -> String {
        read_lossy(&self.log)
    }

    pub fn log_tail(&self, lines: usize) -> String {
        tail_file(&self.log, lines)
    }

    /// Polls the log until it contains `needle` (true) or `timeout` passes (false).
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        wait_until(timeout, || self.log().contains(needle))
    }

    /// Waits up to `timeout` for the process to exit and returns its status.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let child = &mut self.child;
        let mut status = None;
        wait_until(timeout, || {
            status = has_exited(child);
            status.is_some()
        });
        if status.is_some() {
            self.exit_status = status;
        }
        status
    }

    /// SIGKILL now.
    pub fn kill(&mut self) {
        kill_child(&mut self.child);
    }

    pub fn config_path(&self) -> &Path {
        &self.config
    }

    /// The gateway's temporary directory (also its working directory).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Starts `tollgate run -c <this gateway's config> --upgrade` for a zero-downtime binary
    /// upgrade, and returns at once: the new process blocks until this one, sent SIGQUIT, hands
    /// over its listening sockets. It runs in this gateway's working directory (so a relative
    /// `server.upgrade_sock` names the same socket), serves the same addresses, and logs to a
    /// file of its own ([`dir`](Self::dir) of the returned handle holds only that log).
    /// Keep this gateway alive while the new one runs: its directory holds the config file.
    pub fn start_upgrade(&self) -> Gateway {
        let dir = test_dir("tollgate-gw-upgrade-");
        let log = dir.path().join("gateway.log");
        let child = gateway_command(&self.config, self.dir.path(), &log)
            .arg("--upgrade")
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {GATEWAY_BIN} --upgrade: {e}"));
        Gateway {
            listen: self.listen.clone(),
            admin: self.admin.clone(),
            dir,
            config: self.config.clone(),
            log,
            child: Some(child),
            exit_status: None,
        }
    }

    /// Whether the process is still running (not exited, not killed).
    pub fn is_running(&mut self) -> bool {
        if self.exit_status.is_some() {
            return false;
        }
        if let Some(status) = has_exited(&mut self.child) {
            self.exit_status = Some(status);
            return false;
        }
        self.child.is_some()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        kill_child(&mut self.child);
        if std::thread::panicking() {
            eprintln!(
                "---- gateway log tail ({}) ----\n{}\n----",
                self.log.display(),
                tail_file(&self.log, 60)
            );
        }
    }
}

/// Finds the value of the sample whose series text is exactly `series` in Prometheus text.
pub fn metric_value(text: &str, series: &str) -> Option<f64> {
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let end = match line.find('{') {
            Some(_) => line.rfind('}').map(|i| i + 1)?,
            None => line.find(char::is_whitespace)?,
        };
        if &line[..end] != series {
            continue;
        }
        let value = line[end..].split_whitespace().next()?;
        return match value {
            "+Inf" => Some(f64::INFINITY),
            "-Inf" => Some(f64::NEG_INFINITY),
            v => v.parse().ok(),
        };
    }
    None
}

/// Runs `tollgate check -c <file>` on `yaml` (with `{listen}`/`{admin}` replaced by free addresses).
pub fn check_config(yaml: &str) -> CheckOutput {
    let dir = test_dir("tollgate-check-");
    let path = dir.path().join("gateway.yaml");
    std::fs::write(&path, render(yaml, &free_addr(), &free_addr())).expect("write config");
    let out = Command::new(GATEWAY_BIN)
        .arg("check")
        .arg("-c")
        .arg(&path)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run {GATEWAY_BIN} check: {e}"));
    CheckOutput {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// Raw requests with exact header lines (appended for tests/identity.rs)
// ---------------------------------------------------------------------------------------------

/// Like [`http_request`] but writes `headers` byte for byte as given (name case, order and
/// repetitions preserved), e.g. to send `X-API-KEY` in upper case or a header twice.
pub fn http_request_with_headers(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> std::io::Result<HttpReply> {
    let sock: SocketAddr = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("cannot resolve {addr}")))?;
    let mut stream = TcpStream::connect_timeout(&sock, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("Content-Length: 0\r\n\r\n");
    stream.write_all(head.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse_http_reply(&raw)
}

// ---------------------------------------------------------------------------------------------
// Raw async HTTP/1.1 connections (tokio): keep-alive floods, resets, mid-response aborts
// ---------------------------------------------------------------------------------------------

/// One HTTP/1.1 connection driven by hand: requests are written as given and answers read one at
/// a time (Content-Length or chunked bodies), so a test controls exactly when the connection is
/// reused, half-read or reset.
pub struct RawConn {
    stream: tokio::net::TcpStream,
    buf: Vec<u8>,
    host: String,
}

impl RawConn {
    /// Connects to `addr` ("127.0.0.1:P"), from the local address `from` when given (any port).
    pub async fn connect(addr: &str, from: Option<IpAddr>) -> std::io::Result<Self> {
        let target: SocketAddr = addr
            .parse()
            .map_err(|e| std::io::Error::other(format!("bad address {addr}: {e}")))?;
        let socket = if target.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        if let Some(ip) = from {
            socket.bind(SocketAddr::new(ip, 0))?;
        }
        let stream = tokio::time::timeout(Duration::from_secs(5), socket.connect(target))
            .await
            .map_err(|_| std::io::Error::other(format!("connect {addr}: timed out")))??;
        stream.set_nodelay(true)?;
        Ok(RawConn {
            stream,
            buf: Vec::new(),
            host: addr.to_string(),
        })
    }

    /// Writes `method path HTTP/1.1` with `Host`, `Content-Length: 0` and `headers`; keep-alive.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\n",
            self.host
        );
        for (name, value) in headers {
            req.push_str(&format!("{name}: {value}\r\n"));
        }
        req.push_str("\r\n");
        self.stream.write_all(req.as_bytes()).await
    }

    async fn fill(&mut self) -> std::io::Result<usize> {
        use tokio::io::AsyncReadExt;
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).await?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Reads the head of the next answer (status line and headers) and leaves the body unread.
    pub async fn read_head(&mut self) -> std::io::Result<HttpReply> {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            if self.fill().await? == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "connection closed before an answer",
                ));
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line in {head:?}")))?;
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Ok(HttpReply {
            status,
            headers,
            body: String::new(),
        })
    }

    /// Reads one whole answer (head and body). Answers without Content-Length or chunked coding
    /// are read to the end of the connection.
    pub async fn read_reply(&mut self) -> std::io::Result<HttpReply> {
        let mut reply = self.read_head().await?;
        let chunked = reply
            .header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let length = reply
            .header("content-length")
            .and_then(|v| v.parse::<usize>().ok());
        let body = if chunked {
            loop {
                if let Some((body, used)) = dechunk_prefix(&self.buf) {
                    self.buf.drain(..used);
                    break body;
                }
                if self.fill().await? == 0 {
                    return Err(std::io::Error::other("connection closed in a chunked body"));
                }
            }
        } else if let Some(len) = length {
            while self.buf.len() < len {
                if self.fill().await? == 0 {
                    return Err(std::io::Error::other("connection closed in a body"));
                }
            }
            self.buf.drain(..len).collect()
        } else if matches!(reply.status, 100..=199 | 204 | 304) {
            Vec::new()
        } else {
            while self.fill().await? > 0 {}
            std::mem::take(&mut self.buf)
        };
        reply.body = String::from_utf8_lossy(&body).into_owned();
        Ok(reply)
    }

    /// [`send`](Self::send) then [`read_reply`](Self::read_reply).
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> std::io::Result<HttpReply> {
        self.send(method, path, headers).await?;
        self.read_reply().await
    }

    /// Reads at least `n` body bytes of an answer whose head was read with
    /// [`read_head`](Self::read_head) (fewer if the connection ends first); returns how many.
    pub async fn read_some(&mut self, n: usize) -> std::io::Result<usize> {
        while self.buf.len() < n {
            if self.fill().await? == 0 {
                break;
            }
        }
        Ok(self.buf.len())
    }

    /// Aborts the connection: `SO_LINGER` 0 and close, so the peer gets a TCP RST.
    pub fn reset(self) {
        let _ = self.stream.set_zero_linger();
        drop(self.stream);
    }

    /// Closes the connection normally (FIN).
    pub fn close(self) {
        drop(self.stream);
    }

    /// Writes `bytes` exactly as given (a hand-made head, part of a body).
    pub async fn write_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        self.stream.write_all(bytes).await
    }
}

/// Decodes a complete chunked body at the start of `data`: `(body, bytes used)`, or `None` when
/// more bytes are needed. Trailers are skipped.
fn dechunk_prefix(data: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut pos = 0;
    let mut out = Vec::new();
    loop {
        let line_end = pos + data[pos..].windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[pos..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        pos = line_end + 2;
        if size == 0 {
            // Trailers end with an empty line.
            loop {
                let end = pos + data[pos..].windows(2).position(|w| w == b"\r\n")?;
                let empty = end == pos;
                pos = end + 2;
                if empty {
                    return Some((out, pos));
                }
            }
        }
        out.extend_from_slice(data.get(pos..pos + size)?);
        pos += size;
        if data.get(pos..pos + 2)? != b"\r\n" {
            return None;
        }
        pos += 2;
    }
}

// ---------------------------------------------------------------------------------------------
// Arbitrary bytes on one connection (appended for tests/http_hardening.rs)
// ---------------------------------------------------------------------------------------------

/// Writes `bytes` exactly as given on a new connection to `addr`, then reads until the server
/// closes (or `timeout` passes between reads) and parses the answer. For malformed requests.
pub fn raw_exchange(addr: &str, bytes: &[u8], timeout: Duration) -> std::io::Result<HttpReply> {
    let sock: SocketAddr = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("cannot resolve {addr}")))?;
    let mut stream = TcpStream::connect_timeout(&sock, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    // The server may answer and close before every byte is written: keep what it said.
    let _ = stream.write_all(bytes);
    let mut raw = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            Err(_) if !raw.is_empty() => break,
            Err(e) => return Err(e),
        }
    }
    parse_http_reply(&raw)
}
