//! Process plumbing shared by every spawned server: binaries under test, free loopback ports,
//! temporary directories, log files, signals and reaping.

use std::collections::HashSet;
use std::fs::File;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock};

use tempfile::TempDir;

/// Path of the gateway binary under test.
pub const GATEWAY_BIN: &str = env!("CARGO_BIN_EXE_tollgate");
/// Path of the echo backend binary.
pub const ECHO_BIN: &str = env!("CARGO_BIN_EXE_tollgate-echo");

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
pub(crate) fn read_lossy(path: &Path) -> String {
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

pub(crate) fn test_dir(prefix: &str) -> TempDir {
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
pub(crate) fn log_stdio(path: &Path) -> (Stdio, Stdio) {
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

pub(crate) fn kill_child(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill(); // SIGKILL also ends a SIGSTOPped process
        let _ = c.wait();
    }
}

pub(crate) fn has_exited(child: &mut Option<Child>) -> Option<ExitStatus> {
    child.as_mut().and_then(|c| c.try_wait().ok().flatten())
}

pub(crate) fn addr_in_use(log: &str) -> bool {
    let l = log.to_ascii_lowercase();
    l.contains("address already in use") || l.contains("addrinuse") || l.contains("address in use")
}
