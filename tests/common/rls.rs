//! The real gRPC client of Envoy's rate limit service (v3) the decision-service tests drive,
//! `tests/rls/client.py` (grpcio and protobuf, pinned in `tests/rls/requirements.txt`, installed
//! in the repository's venv by `scripts/venv.sh` on first use): one JSON command per line in,
//! one JSON answer per line out (see the script's docstring). Include it with
//! `#[path = "common/rls.rs"] mod rls;`.

#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;

/// The venv's python with the client's pinned requirements.
fn python() -> &'static str {
    static PYTHON: OnceLock<String> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let venv = crate::common::venv_with("tests/rls/requirements.txt");
        format!("{}/bin/python", venv.display())
    })
}

/// `tests/rls/client.py` on one channel to `target`, kept open across calls.
pub struct Rls {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Rls {
    pub fn connect(target: &str) -> Rls {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/rls/client.py");
        let mut child = Command::new(python())
            .arg(script)
            .arg(target)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn tests/rls/client.py");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Rls {
            child,
            stdin,
            stdout,
        }
    }

    /// Sends one command, returns its answer.
    pub fn send(&mut self, cmd: Value) -> Value {
        writeln!(self.stdin, "{cmd}").expect("write command");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read answer");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }

    /// A call in `domain` with `descriptors` (each a list of (key, value) and its hits, 0: unset).
    pub fn call(
        &mut self,
        domain: &str,
        descriptors: &[(&[(&str, &str)], u64)],
        hits: u32,
    ) -> Value {
        let ds: Vec<Value> = descriptors
            .iter()
            .map(|(entries, h)| {
                let mut d = json!({ "entries": entries });
                if *h > 0 {
                    d["hits_addend"] = json!(h);
                }
                d
            })
            .collect();
        self.send(json!({ "domain": domain, "descriptors": ds, "hits_addend": hits }))
    }
}

impl Drop for Rls {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
