//! The admin API client of the command line: the base URL (`--admin-url`,
//! `TOLLGATE_ADMIN_URL`, default [`DEFAULT_ADMIN_URL`]) and Bearer token (`--token`,
//! `TOLLGATE_ADMIN_TOKEN`), one JSON request per call, and what a failure means for the exit
//! code ([`Failure::exit_code`]).

use clap::Args;
use serde_json::Value;
use std::time::Duration;

/// Where the admin API listens unless told otherwise (`admin.listen`'s usual value).
pub const DEFAULT_ADMIN_URL: &str = "http://127.0.0.1:9090";

/// How long one call may take before the API counts as unreachable.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Options every admin command takes.
#[derive(Args, Debug, Clone)]
pub struct AdminArgs {
    /// Base URL of the admin listener.
    #[arg(long, env = "TOLLGATE_ADMIN_URL", default_value = DEFAULT_ADMIN_URL, global = true)]
    pub admin_url: String,
    /// Admin Bearer token (a `read` token can list, a `write` token can change).
    #[arg(
        long,
        env = "TOLLGATE_ADMIN_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub token: Option<String>,
    /// Print the API's JSON answer on stdout instead of a short summary.
    #[arg(long, global = true)]
    pub json: bool,
}

/// Why a command failed.
#[derive(Debug)]
pub enum Failure {
    /// The API answered an error: its status and the problem's `detail`.
    Api { status: u16, detail: String },
    /// The API could not be reached (connection refused, DNS, timeout).
    Unreachable(String),
    /// The command line made no sense beyond what clap checks.
    Usage(String),
}

impl Failure {
    /// The process's exit code: 1 for an API error, 2 for a usage error, 3 when unreachable.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Api { .. } => 1,
            Failure::Usage(_) => 2,
            Failure::Unreachable(_) => 3,
        }
    }

    /// The message printed on stderr.
    pub fn message(&self) -> String {
        match self {
            Failure::Api { status, detail } => format!("error ({status}): {detail}"),
            Failure::Unreachable(why) => format!("admin API unreachable: {why}"),
            Failure::Usage(why) => format!("usage: {why}"),
        }
    }
}

/// A client of one admin API.
pub struct Client {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl Client {
    /// A client for `args`. Errors: the HTTP client could not be built (a usage failure).
    pub fn new(args: &AdminArgs) -> Result<Self, Failure> {
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .build()
            .map_err(|e| Failure::Usage(format!("cannot build the HTTP client: {e}")))?;
        Ok(Client {
            base: args.admin_url.trim_end_matches('/').to_string(),
            token: args.token.clone().filter(|t| !t.is_empty()),
            http,
        })
    }

    /// `method path` (path from `/v1`, already percent-encoded) with an optional JSON body:
    /// the answer's JSON on a 2xx, else [`Failure::Api`] with the problem's `detail` (or the
    /// body's text when it is not a problem).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, Failure> {
        let url = format!("{}{path}", self.base);
        let mut req = self.http.request(method, &url);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(b.to_string());
        }
        let resp = req
            .send()
            .await
            .map_err(|e| Failure::Unreachable(describe(&url, &e)))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| Failure::Unreachable(describe(&url, &e)))?;
        let json: Option<Value> = serde_json::from_slice(&bytes).ok();
        if (200..300).contains(&status) {
            return json.ok_or_else(|| Failure::Api {
                status,
                detail: "the answer is not JSON".into(),
            });
        }
        let detail = json
            .as_ref()
            .and_then(|v| v.get("detail"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| String::from_utf8_lossy(&bytes).trim().to_string());
        Err(Failure::Api { status, detail })
    }
}

/// A reqwest error in a line: the URL and the innermost cause (the OS error says why).
fn describe(url: &str, e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(s) = cause.source() {
        cause = s;
    }
    let kind = if e.is_timeout() {
        "timed out"
    } else {
        "cannot connect"
    };
    format!("{url}: {kind}: {cause}")
}

/// One path segment percent-encoded (everything but unreserved characters, RFC 3986 2.3).
pub fn segment(text: &str) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(text, SET).to_string()
}

/// A duration of the command line (`90s`, `15m`, `1h`, `7d`, or plain seconds) in whole
/// seconds, at least 1. Errors: a usage failure naming `flag`.
pub fn seconds(flag: &str, text: &str) -> Result<u64, Failure> {
    let d = match text.parse::<u64>() {
        Ok(s) => Duration::from_secs(s),
        Err(_) => crate::config::duration::parse_duration(text)
            .map_err(|e| Failure::Usage(format!("{flag}: {e}")))?,
    };
    match d.as_secs() {
        0 => Err(Failure::Usage(format!("{flag}: at least 1s"))),
        s => Ok(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_and_durations() {
        assert_eq!(segment("10.0.0.0/8"), "10.0.0.0%2F8");
        assert_eq!(segment("2001:db8::/32"), "2001%3Adb8%3A%3A%2F32");
        assert_eq!(seconds("--for", "90").unwrap(), 90);
        assert_eq!(seconds("--for", "2h").unwrap(), 7200);
        assert_eq!(seconds("--for", "x").unwrap_err().exit_code(), 2);
        assert_eq!(seconds("--for", "0").unwrap_err().exit_code(), 2);
    }
}
