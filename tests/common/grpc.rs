//! gRPC test helpers: the real Python gRPC server and client of `demo/grpc/` (grpcio and
//! grpcio-status, pinned in `demo/grpc/requirements.txt`, installed in the repository's venv by
//! `scripts/venv.sh` on first use).
//!
//! The client prints one JSON line per call as the client sees it (`code`, `details`,
//! `retry_delay_s` from the `RetryInfo` of `grpc-status-details-bin`, `rich_status`, metadata,
//! replies); see `demo/grpc/client.py`. Include it with
//! `#[path = "common/grpc.rs"] mod grpc_common;`.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::OnceLock;
use std::time::Duration;

/// The repository root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's python, made (once per test process) by `scripts/venv.sh` with the pinned
/// requirements of `demo/grpc/requirements.txt`.
pub fn python() -> &'static str {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let venv = super::common::venv_with("demo/grpc/requirements.txt");
        format!("{}/bin/python", venv.display())
    })
}

/// Lines of a child's stdout, read on a thread.
fn lines_of(child: &mut Child) -> Receiver<String> {
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next line from `rx` starting with `prefix` (others are skipped), within 60 s.
fn next_line(rx: &Receiver<String>, prefix: &str) -> String {
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(line) if line.starts_with(prefix) => return line,
            Ok(_) => continue,
            Err(e) => panic!("no line starting with {prefix:?}: {e}"),
        }
    }
}

/// `demo/grpc/server.py` on a free port: service `demo.Echo` (Unary, Stream, Hold, Slow, Fail).
pub struct GrpcServer {
    child: Child,
    lines: Receiver<String>,
    pub port: u16,
}

impl GrpcServer {
    /// A plaintext (h2c) server.
    pub fn start() -> Self {
        Self::spawn(&[])
    }

    /// A TLS server (ALPN h2) with this certificate chain and key.
    pub fn start_tls(cert_file: &str, key_file: &str) -> Self {
        Self::spawn(&["--tls", cert_file, key_file])
    }

    fn spawn(extra: &[&str]) -> Self {
        let mut child = Command::new(python())
            .arg(root().join("demo/grpc/server.py"))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn demo/grpc/server.py");
        let lines = lines_of(&mut child);
        let line = next_line(&lines, "listening ");
        let port = line["listening ".len()..].parse().expect("port");
        GrpcServer { child, lines, port }
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Waits for the server to say that its `n`-th held call ended (`hold-ended <n>`).
    pub fn wait_hold_ended(&self, n: u32) {
        let want = format!("hold-ended {n}");
        while next_line(&self.lines, "hold-ended ") != want {}
    }

    /// Stops the server (SIGKILL).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `demo/grpc/client.py` against `target` with `opts` (`--metadata k=v`, `--tls CA`) and the
/// command `cmd` (`unary --n 3`, `stream --count 5`, `fail`, `slow --seconds 5`): one JSON
/// value per call.
pub fn calls(target: &str, opts: &[&str], cmd: &[&str]) -> Vec<Value> {
    let out = Command::new(python())
        .arg(root().join("demo/grpc/client.py"))
        .arg(target)
        .args(opts)
        .args(cmd)
        .stderr(Stdio::inherit())
        .output()
        .expect("run demo/grpc/client.py");
    assert!(out.status.success(), "client.py failed");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The one call of [`calls`].
pub fn call(target: &str, opts: &[&str], cmd: &[&str]) -> Value {
    let mut all = calls(target, opts, cmd);
    assert_eq!(all.len(), 1, "{all:?}");
    all.remove(0)
}

/// A `/demo.Echo/Hold` streaming call held open by the server until [`cancel`](Self::cancel).
pub struct HeldCall {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// The call's first message: the server's view of the connection it came on
    /// (`ipv4:127.0.0.1:<port>`).
    pub first_reply: String,
}

impl HeldCall {
    /// Opens the call and waits for its first message (the backend is holding it then).
    pub fn open(target: &str, opts: &[&str]) -> Self {
        let mut child = Command::new(python())
            .arg(root().join("demo/grpc/client.py"))
            .arg(target)
            .args(opts)
            .arg("hold")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn client.py hold");
        let stdin = child.stdin.take();
        let lines = lines_of(&mut child);
        let first: Value = serde_json::from_str(&next_line(&lines, "{")).expect("JSON line");
        assert_eq!(first["event"], "open", "held call did not open: {first}");
        HeldCall {
            child,
            stdin,
            lines,
            first_reply: first["reply"].as_str().unwrap_or_default().to_string(),
        }
    }

    /// Cancels the call from the client; returns the call as the client saw it.
    pub fn cancel(mut self) -> Value {
        let mut stdin = self.stdin.take().expect("stdin");
        writeln!(stdin, "cancel").expect("write cancel");
        let line = next_line(&self.lines, "{");
        let _ = self.child.wait();
        serde_json::from_str(&line).expect("call line")
    }
}

impl Drop for HeldCall {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
