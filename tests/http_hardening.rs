//! Issue 11, HTTP side: request-target normalisation (fault 1), Pingora's own parser errors
//! (fault 4), HTTP limits (header size/count, body size, slow clients) and `tollgate check`
//! warnings. Raw targets go over a raw TCP socket so that nothing on the client side rewrites them.

mod common;

use common::*;
use std::time::Duration;

const KEY: &str = "h11-admin-key";

/// `/admin` needs an API key and goes to backend `admin`; everything else is anonymous and goes to
/// backend `pub`. `extra` is appended at the top level (e.g. a `server:` section).
fn two_route_config(admin: &Backend, public: &Backend, extra: &str) -> String {
    format!(
        "listen: [\"{{listen}}\"]\n\
         admin: {{ listen: \"{{admin}}\" }}\n\
         {extra}\
         identity:\n  api_keys:\n    keys:\n\
         \x20     - {{ sha256: \"{}\", tenant: \"ops\" }}\n\
         upstreams:\n\
         \x20 admin: {{ backends: [\"{}\"] }}\n\
         \x20 pub: {{ backends: [\"{}\"] }}\n\
         routes:\n\
         \x20 - {{ path_prefix: \"/admin\", upstream: admin, auth: required }}\n\
         \x20 - {{ path_prefix: \"/\", upstream: pub, auth: none }}\n",
        sha256_hex(KEY),
        admin.addr(),
        public.addr(),
    )
}

fn send(gw: &Gateway, target: &str, headers: &[(&str, &str)]) -> HttpReply {
    http_request_with_headers(
        gw.listen_addr(),
        "GET",
        target,
        headers,
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("GET {target}: {e}"))
}

fn json(reply: &HttpReply) -> serde_json::Value {
    serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", reply.body))
}

/// Fault 1 as reported: every spelling of `/admin/users` is refused without credentials (401),
/// and the backend never sees any of them.
#[test]
fn issue_11_spellings_of_a_protected_path_do_not_bypass_auth() {
    let admin = Backend::start("admin");
    let public = Backend::start("pub");
    let gw = Gateway::start(&two_route_config(&admin, &public, ""));
    for target in [
        "/public/../admin/users",
        "/./admin/users",
        "//admin/users",
        "/%61dmin/users",
        "/public/%2e%2e/admin/users",
    ] {
        let r = send(&gw, target, &[]);
        assert_eq!(r.status, 401, "{target}: {r:?}");
        assert_eq!(
            r.header("content-type"),
            Some("application/problem+json"),
            "{target}"
        );
    }
    assert_eq!(admin.stats().requests, 0);
    assert_eq!(public.stats().requests, 0);
}

/// What a table case expects.
enum Want {
    /// 200 from this backend, which received exactly this path and query.
    Served(&'static str, &'static str, &'static str),
    /// 400 problem+json; nothing reaches a backend.
    Refused,
}

/// The whole kind: for every spelling, the status and the exact path (and query) the backend got.
#[test]
fn request_targets_are_normalised_or_refused_table() {
    use Want::*;
    let admin = Backend::start("admin");
    let public = Backend::start("pub");
    let gw = Gateway::start(&two_route_config(&admin, &public, ""));
    let addr = gw.listen_addr().to_string();
    let abs = |p: &str| format!("http://{addr}{p}");
    let cases: Vec<(String, Want)> = vec![
        // Dot segments in every position.
        (
            "/public/../admin/users".into(),
            Served("admin", "/admin/users", ""),
        ),
        ("/./admin/users".into(), Served("admin", "/admin/users", "")),
        ("/admin/./users".into(), Served("admin", "/admin/users", "")),
        (
            "/admin/users/.".into(),
            Served("admin", "/admin/users/", ""),
        ),
        ("/admin/users/..".into(), Served("admin", "/admin/", "")),
        ("/admin/users/../..".into(), Served("pub", "/", "")),
        ("/a/b/../../admin".into(), Served("admin", "/admin", "")),
        ("/admin/../public/x".into(), Served("pub", "/public/x", "")),
        ("/admin/.../x".into(), Served("admin", "/admin/.../x", "")),
        // Encoded dots: lower, upper and mixed case, alone and mixed with raw dots.
        (
            "/public/%2e%2e/admin/users".into(),
            Served("admin", "/admin/users", ""),
        ),
        (
            "/public/%2E%2E/admin/users".into(),
            Served("admin", "/admin/users", ""),
        ),
        (
            "/public/%2e%2E/admin/users".into(),
            Served("admin", "/admin/users", ""),
        ),
        (
            "/public/.%2e/admin/users".into(),
            Served("admin", "/admin/users", ""),
        ),
        ("/%2e/admin".into(), Served("admin", "/admin", "")),
        // Repeated slashes.
        ("//admin/users".into(), Served("admin", "/admin/users", "")),
        (
            "/admin//users//".into(),
            Served("admin", "/admin/users/", ""),
        ),
        ("///".into(), Served("pub", "/", "")),
        // Encoded unreserved characters are decoded; other escapes get upper-case hex.
        ("/%61dmin/users".into(), Served("admin", "/admin/users", "")),
        (
            "/%61%64%6D%69%6e/users".into(),
            Served("admin", "/admin/users", ""),
        ),
        (
            "/admin/%7Euser/%41%5f".into(),
            Served("admin", "/admin/~user/A_", ""),
        ),
        ("/pub/caf%c3%a9".into(), Served("pub", "/pub/caf%C3%A9", "")),
        ("/pub/a%3bb".into(), Served("pub", "/pub/a%3Bb", "")),
        (
            "/pub/%252e%252e".into(),
            Served("pub", "/pub/%252e%252e", ""),
        ),
        // The query is left alone, `..` and encoded slashes included.
        (
            "/pub/x?q=../..&r=%2F".into(),
            Served("pub", "/pub/x", "q=../..&r=%2F"),
        ),
        (
            "/public/..?next=/admin/../x".into(),
            Served("pub", "/", "next=/admin/../x"),
        ),
        (
            "/public/../admin?a=%2e%2e".into(),
            Served("admin", "/admin", "a=%2e%2e"),
        ),
        // Absolute-form: the path is normalised and forwarded in origin-form.
        (
            abs("/public/../admin/users"),
            Served("admin", "/admin/users", ""),
        ),
        (abs("/%61dmin?x=1"), Served("admin", "/admin", "x=1")),
        (abs(""), Served("pub", "/", "")),
        // Refused: encoded separators, backslashes, NUL and controls, bad escapes, climbing.
        ("/admin%2Fusers".into(), Refused),
        ("/public/..%2fadmin".into(), Refused),
        ("/a%5Cb".into(), Refused),
        ("/public/..%5cadmin".into(), Refused),
        ("/public\\..\\admin".into(), Refused),
        ("/a%00b".into(), Refused),
        ("/a%0Ab".into(), Refused),
        ("/a%7f".into(), Refused),
        ("/a%zzb".into(), Refused),
        ("/a%2".into(), Refused),
        ("/a%".into(), Refused),
        ("/..".into(), Refused),
        ("/../admin/users".into(), Refused),
        ("/public/../../admin".into(), Refused),
        ("/%2e%2e/admin".into(), Refused),
        ("/public/..;/admin/users".into(), Refused),
        ("*".into(), Refused),
        (abs("/%2e%2e/admin"), Refused),
    ];
    let mut refused = 0;
    for (target, want) in &cases {
        let before = (admin.stats().requests, public.stats().requests);
        let r = send(&gw, target, &[("X-API-Key", KEY)]);
        match want {
            Served(backend, path, query) => {
                assert_eq!(r.status, 200, "{target}: {r:?}");
                let v = json(&r);
                assert_eq!(v["name"], *backend, "{target}");
                assert_eq!(v["path"], *path, "{target}");
                assert_eq!(v["query"], *query, "{target}");
            }
            Refused => {
                refused += 1;
                assert_eq!(r.status, 400, "{target}: {r:?}");
                assert_eq!(
                    r.header("content-type"),
                    Some("application/problem+json"),
                    "{target}"
                );
                let p = problem(&r.body);
                assert_eq!(p["status"], 400, "{target}");
                assert!(p["request-id"].as_str().is_some_and(|s| !s.is_empty()));
                let after = (admin.stats().requests, public.stats().requests);
                assert_eq!(before, after, "{target} reached a backend");
            }
        }
    }
    let counted = gw
        .metric_or_zero(r#"tollgate_decisions_total{layer="http",outcome="bad_target",tier="-"}"#);
    assert_eq!(counted as usize, refused);
    assert!(
        gw.wait_for_log("reason=encoded_slash", Duration::from_secs(5)),
        "refusal reason not logged: {}",
        gw.log_tail(20)
    );
}
