//! The request-head rules hold the same on HTTP/1.1, h2c and h2 over TLS
//! (docs/http-hardening.md#request-head-errors): one table of heads, each sent over every
//! protocol to a gateway with an `auth: required` host route beside an open catch-all. No head
//! the router could read one way and a backend another reaches the catch-all, and the backends
//! see exactly the heads the table serves.
//!
//! HTTP/1.1 goes over a raw socket; HTTP/2 through `tests/h2/raw_h2.py` (the Python `h2`
//! package, no client-side validation), so every head is sent exactly as written.

mod common;
#[path = "common/tls.rs"]
mod tls_common;

use common::*;
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;
use tls_common::*;

const KEY: &str = "head-table-api-key";
const API: &str = "api.example.com";

/// What a head gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Served by the `api.example.com` route's backend (with the API key).
    Api,
    /// 401 from the `api.example.com` route (`auth: required`, no credential).
    Unauthenticated,
    /// Served by the catch-all route's backend.
    Public,
    /// Refused by tollgate's head checks: this status, problem+json with this `reason`.
    Problem(u16, &'static str),
    /// HTTP/2 only: refused by Pingora's own authority checks before any hook runs (a bare 400,
    /// not counted).
    Bare400,
    /// HTTP/2 only: a malformed stream the `h2` layer resets (RFC 9113 8.1.1, PROTOCOL_ERROR).
    Reset,
}

use Expect::*;

const BAD: Expect = Problem(400, "malformed");

/// One head: `:authority` (HTTP/1.1: an absolute-form target `http://<authority><path>`),
/// `Host` fields, other fields, the path; and what HTTP/1.1 and HTTP/2 each get.
struct Case {
    name: &'static str,
    authority: Option<&'static str>,
    hosts: &'static [&'static str],
    fields: Vec<(String, String)>,
    path: String,
    h1: Expect,
    h2: Expect,
}

fn case(
    name: &'static str,
    authority: Option<&'static str>,
    hosts: &'static [&'static str],
) -> Case {
    Case {
        name,
        authority,
        hosts,
        fields: Vec::new(),
        path: "/x".to_string(),
        h1: BAD,
        h2: BAD,
    }
}

impl Case {
    fn field(mut self, name: &str, value: &str) -> Case {
        self.fields.push((name.to_string(), value.to_string()));
        self
    }
    fn path(mut self, path: String) -> Case {
        self.path = path;
        self
    }
    fn expect(mut self, both: Expect) -> Case {
        (self.h1, self.h2) = (both, both);
        self
    }
    fn h2(mut self, h2: Expect) -> Case {
        self.h2 = h2;
        self
    }

    fn h1_bytes(&self) -> Vec<u8> {
        let target = match self.authority {
            Some(a) => format!("http://{a}{}", self.path),
            None => self.path.clone(),
        };
        let mut head = format!("GET {target} HTTP/1.1\r\n");
        for h in self.hosts {
            head.push_str(&format!("Host: {h}\r\n"));
        }
        for (n, v) in &self.fields {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str("Connection: close\r\n\r\n");
        head.into_bytes()
    }

    fn h2_block(&self, scheme: &str) -> Value {
        let mut block = vec![
            json!([":method", "GET"]),
            json!([":scheme", scheme]),
            json!([":path", self.path]),
        ];
        if let Some(a) = self.authority {
            block.push(json!([":authority", a]));
        }
        for h in self.hosts {
            block.push(json!(["host", h]));
        }
        for (n, v) in &self.fields {
            block.push(json!([n, v]));
        }
        Value::Array(block)
    }
}

fn table() -> Vec<Case> {
    let many = (0..25).fold(case("25 header fields", Some(API), &[]), |c, i| {
        c.field(&format!("x-f{i}"), "1")
    });
    vec![
        // What is served: the api route by either field, the catch-all for another host.
        case("api by authority", Some(API), &[]).expect(Unauthenticated),
        case("api by Host", None, &[API]).expect(Unauthenticated),
        case("api with its key", Some(API), &[])
            .field("x-api-key", KEY)
            .expect(Api),
        case("authority and equal Host", Some(API), &[API]).expect(Unauthenticated),
        case("another host", None, &["www.example.com"]).expect(Public),
        case("a port", None, &["www.example.com:8080"]).expect(Public),
        case("IPv6 literal", None, &["[::1]:80"]).expect(Public),
        // Host syntax: each would reach the catch-all and the backend verbatim.
        case("Host with a path", None, &["api.example.com/x"]),
        case("Host with a query", None, &["api.example.com?x"]),
        case("Host with a fragment", None, &["api.example.com#x"]),
        case("Host with a backslash", None, &["api.example.com\\x"]),
        case("Host bracketed name", None, &["[api.example.com]"]),
        case("Host two ports", None, &["api.example.com:80:80"]),
        case("Host port too long", None, &["api.example.com:123456"]),
        case("Host port not digits", None, &["api.example.com:8o"]),
        // Duplicates and userinfo: Pingora refuses these on HTTP/2 before any hook.
        case("two Host fields", None, &[API, API]).h2(Bare400),
        case("two different Host fields", None, &["www.example.com", API]).h2(Bare400),
        case("userinfo in Host", None, &["u@api.example.com"]).h2(Bare400),
        case("userinfo in authority", Some("u@api.example.com"), &[]).h2(Bare400),
        case(
            "Host differs from authority",
            Some("www.example.com"),
            &[API],
        )
        .h2(Bare400),
        // The authority's own syntax.
        case("authority bracketed name", Some("[api.example.com]"), &[]),
        case("authority two ports", Some("api.example.com:80:80"), &[]).h2(Reset),
        // Connection-specific fields: HTTP/1 refuses nominations Pingora would; HTTP/2 has none.
        case("Connection nominates Host", Some(API), &[])
            .field("connection", "host")
            .h2(Reset),
        case("TE other than trailers", None, &["www.example.com"])
            .field("te", "gzip")
            .h1(Public)
            .h2(Reset),
        case("TE trailers", None, &["www.example.com"])
            .field("te", "trailers")
            .expect(Public),
        case("upper-case field name", None, &["www.example.com"])
            .field("X-Upper", "1")
            .h1(Public)
            .h2(Reset),
        // No host at all: HTTP/1.1 routes it as hostless; Pingora refuses it on HTTP/2.
        case("neither Host nor authority", None, &[])
            .h1(Public)
            .h2(Bare400),
        // Framing.
        case("conflicting Content-Length", None, &["www.example.com"])
            .field("content-length", "0")
            .field("content-length", "1")
            .h2(Reset),
        case("Content-Length not a number", None, &["www.example.com"])
            .field("content-length", "x")
            .h2(Reset),
        // Lengths (server.max_header_bytes 2048, server.max_headers 20).
        many.expect(Problem(431, "too_many_headers")),
        case("one large field", Some(API), &[])
            .field("x-big", &"b".repeat(3000))
            .expect(Problem(431, "headers_too_large")),
        case("long request line", Some(API), &[])
            .path(format!("/{}", "p".repeat(3000)))
            .expect(Problem(414, "uri_too_long")),
    ]
}

impl Case {
    fn h1(mut self, h1: Expect) -> Case {
        self.h1 = h1;
        self
    }
}

/// The answers of `raw_h2.py` to `blocks` on `addr` (`tls`: CA file and SNI).
fn h2_answers(addr: &str, tls: Option<(&str, &str)>, blocks: &[Value]) -> Vec<Value> {
    let venv = venv_with("tests/h2/requirements.txt");
    let (host, port) = addr.rsplit_once(':').unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/h2/raw_h2.py");
    let mut cmd = Command::new(venv.join("bin/python"));
    cmd.args([script, host, port]);
    if let Some((ca, sni)) = tls {
        cmd.args(["--tls", ca, sni]);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("run raw_h2.py");
    let input = serde_json::to_vec(blocks).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().expect("raw_h2.py");
    assert!(out.status.success(), "raw_h2.py failed");
    serde_json::from_slice(&out.stdout).expect("raw_h2.py answers")
}

/// `status`, `body`, problem `reason` and whether it is problem+json with a request id, of an
/// HTTP/1 reply or an HTTP/2 answer; `None` for a reset stream.
struct Seen {
    status: Option<u16>,
    problem_reason: Option<String>,
    has_request_id: bool,
    body: String,
}

fn seen_h1(r: &HttpReply) -> Seen {
    let problem = r.header("content-type") == Some("application/problem+json");
    Seen {
        status: Some(r.status),
        problem_reason: problem
            .then(|| serde_json::from_str::<Value>(&r.body).ok())
            .flatten()
            .and_then(|v| v["reason"].as_str().map(str::to_string)),
        has_request_id: r.header("x-request-id").is_some(),
        body: r.body.clone(),
    }
}

fn seen_h2(a: &Value) -> Seen {
    let headers = &a["headers"];
    let problem = headers["content-type"] == "application/problem+json";
    let body = a["body"].as_str().unwrap_or_default().to_string();
    Seen {
        status: a["status"].as_u64().map(|s| s as u16),
        problem_reason: problem
            .then(|| serde_json::from_str::<Value>(&body).ok())
            .flatten()
            .and_then(|v| v["reason"].as_str().map(str::to_string)),
        has_request_id: headers.get("x-request-id").is_some(),
        body,
    }
}

fn check(case: &Case, protocol: &str, expect: Expect, seen: &Seen, raw: &dyn std::fmt::Debug) {
    let what = format!("{} over {protocol}: {raw:?}", case.name);
    match expect {
        Api | Public => {
            assert_eq!(seen.status, Some(200), "{what}");
            let backend = if expect == Api { "api" } else { "pub" };
            let echoed: Value = serde_json::from_str(&seen.body).unwrap_or_default();
            assert_eq!(echoed["name"], backend, "{what}");
        }
        Unauthenticated => {
            assert_eq!(seen.status, Some(401), "{what}");
            assert!(seen.has_request_id, "{what}");
        }
        Problem(status, reason) => {
            assert_eq!(seen.status, Some(status), "{what}");
            assert_eq!(seen.problem_reason.as_deref(), Some(reason), "{what}");
            assert!(seen.has_request_id, "{what}");
        }
        Bare400 => {
            assert_eq!(seen.status, Some(400), "{what}");
            assert_eq!(seen.problem_reason, None, "{what}");
        }
        Reset => assert_eq!(seen.status, None, "{what}"),
    }
}

/// Every head of the table over HTTP/1.1, h2c and h2 over TLS, each to its expected answer; the
/// backends saw exactly the served ones, and every tollgate refusal was counted.
#[test]
fn every_head_check_holds_on_http1_h2c_and_h2_over_tls() {
    let (api, public) = (Backend::start("api"), Backend::start("pub"));
    let ca = Ca::new("head-ca");
    let cert = ca.server("gw.test", &["gw.test"]);
    let tls_addr = free_addr();
    let tls_listener = format!(
        "{{ addr: \"{tls_addr}\", tls: {{ {} }}, h2: true }}",
        cert.yaml_pair()
    );
    let yaml = GatewayConfig::new()
        .server("{ threads: 2, grace_period_s: 1, max_header_bytes: 2048, max_headers: 20 }")
        .listen(&["{ addr: \"{listen}\", h2: true }", &tls_listener])
        .api_key_with(KEY, "ops", None)
        .upstream("api", &api.addr())
        .upstream("pub", &public.addr())
        .route(&format!(
            "{{ host: \"{API}\", path_prefix: \"/\", upstream: api, auth: required }}"
        ))
        .route("{ path_prefix: \"/\", upstream: pub, auth: optional }")
        .yaml();
    let gw = Gateway::start(&yaml);
    let cases = table();

    for c in &cases {
        let reply = raw_exchange(gw.listen_addr(), &c.h1_bytes(), Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{} over HTTP/1.1: {e}", c.name));
        check(c, "HTTP/1.1", c.h1, &seen_h1(&reply), &reply);
    }
    let blocks = |scheme| cases.iter().map(|c| c.h2_block(scheme)).collect::<Vec<_>>();
    let h2c = h2_answers(gw.listen_addr(), None, &blocks("http"));
    let h2tls = h2_answers(
        &tls_addr,
        Some((&ca.cert_file, "gw.test")),
        &blocks("https"),
    );
    for (protocol, answers) in [("h2c", &h2c), ("h2 over TLS", &h2tls)] {
        for (c, a) in cases.iter().zip(answers.iter()) {
            check(c, protocol, c.h2, &seen_h2(a), a);
        }
    }

    // Nothing else reached a backend; every refusal of tollgate's own was counted.
    let count = |e: Expect| {
        let per = |x: Expect| (x == e) as u64;
        cases.iter().map(|c| per(c.h1) + 2 * per(c.h2)).sum::<u64>()
    };
    assert_eq!(api.stats().requests, count(Api), "api backend");
    assert_eq!(public.stats().requests, count(Public), "catch-all backend");
    for (status, outcome) in [
        (400, "malformed"),
        (431, "too_many_headers"),
        (431, "headers_too_large"),
        (414, "uri_too_long"),
    ] {
        let labels = [("layer", "http"), ("outcome", outcome), ("tier", "-")];
        assert_eq!(
            metric_or_zero(&gw, "tollgate_decisions_total", &labels) as u64,
            count(Problem(status, outcome)),
            "{outcome}"
        );
    }
}
