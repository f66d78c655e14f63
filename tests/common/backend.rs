//! `tollgate-echo` backends.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use tempfile::TempDir;

use super::clients::{http_request, HttpReply};
use super::processes::{kill_child, log_stdio, read_lossy, tail_file, test_dir, ECHO_BIN};

/// The repeating pattern of `tollgate-echo`'s `?size=N` bodies (byte `i` is `PATTERN[i % 61]`).
pub const ECHO_PATTERN: &[u8; 61] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXY";

/// The exact body `tollgate-echo` sends for `?size=len`.
pub fn echo_pattern(len: usize) -> Vec<u8> {
    ECHO_PATTERN.iter().copied().cycle().take(len).collect()
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

/// A raw WebSocket endpoint on a free port (its `host:port`): answers every upgrade `101` and
/// echoes bytes until the other side closes (a gateway only relays bytes after the upgrade).
pub async fn ws_echo_backend() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut head = Vec::new();
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
                let _ = s.write_all(answer.as_bytes()).await;
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}
