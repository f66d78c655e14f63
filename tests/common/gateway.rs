//! The `tollgate` gateway process: start, reload, signals, logs, metrics, `tollgate check`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::clients::{http_request, HttpReply};
use super::metrics::metric_value;
use super::processes::{addr_in_use, has_exited, kill_child, log_stdio, read_lossy, test_dir};
use super::processes::{free_addr, send_signal, tail_file, GATEWAY_BIN};
use super::wait::wait_until;

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

    /// The value of the series written `series`, e.g.
    /// `tollgate_requests_total{route="routes[0]",status_class="2xx"}`: the name and the label
    /// set must match (labels in any order). See also [`metric`](super::metrics::metric).
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

    /// [`reload`](Self::reload), then waits (up to 10 s) until the gateway applied it:
    /// `tollgate_config_reloads_total{result="ok"}` moved by exactly one (the new snapshot is in
    /// place by then). Panics with the log tail otherwise.
    pub async fn reload_ok(&self, new_yaml: &str) {
        const RELOADS_OK: &str = "tollgate_config_reloads_total{result=\"ok\"}";
        let before = self.metric_or_zero(RELOADS_OK);
        self.reload(new_yaml);
        let applied = super::wait::eventually(Duration::from_secs(10), || {
            self.metric_or_zero(RELOADS_OK) > before
        })
        .await;
        assert!(
            applied,
            "reload was not applied; log tail:\n{}",
            self.log_tail(20)
        );
        assert_eq!(self.metric_or_zero(RELOADS_OK), before + 1.0);
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
