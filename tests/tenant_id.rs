//! What a tenant id may be (issue 11, fault 5), black-box and table-driven over every source of
//! a tenant id: JWT `sub`, JWT tenant claim, API-key entry, `tenants:` map key, anonymous client.
//!
//! Each row asserts the status (401 `invalid_token` for a bad id in a token), the exact
//! `X-Tollgate-Tenant` the backend received (percent-encoded UTF-8), and the exact Redis keys
//! created in a real `redis-server`, whose Cluster hash tag must be exactly the encoded tenant.
//! Config sources are checked with `tollgate check`: the error names the field path.

mod common;

use common::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

const HS_SECRET: &str = "tenant-id-test-hmac-secret-0123456789";
const KEY_UMLAUT: &str = "tenant-id-key-umlaut-0123456789";
const KEY_BRACES: &str = "tenant-id-key-braces-0123456789";

fn yaml(redis: &RedisServer, backend: &Backend) -> String {
    GatewayConfig::echo(&backend.addr(), "optional")
        .redis(&redis.url(), STRICT_REDIS)
        .tier("T", "{ limit: 1, per: 1d, burst: 5 }")
        .tier("anonymous", "{ limit: 1, per: 1d, burst: 5 }")
        .tenant(&yaml_str("a}b{c"), "{ burst: 2 }")
        .tenant(&yaml_str("zürich"), "{ burst: 3 }")
        .default_tier("T")
        .jwt(
            "{ tenant_claim: tenant, \
             keys: [{ algorithm: HS256, secret_env: \"TENANT_ID_TEST_SECRET\" }] }",
        )
        .api_key_with(KEY_UMLAUT, "zürich-keys", None)
        .api_key_with(KEY_BRACES, "k}e{y", None)
        .yaml()
}

fn token(claims: Value) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut c = claims;
    c["exp"] = json!(now + 600);
    let key = EncodingKey::from_secret(HS_SECRET.as_bytes()).unwrap();
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &c, &key).unwrap()
}

/// How a row presents itself.
enum Cred {
    Jwt(Value),
    ApiKey(&'static str),
    Anonymous,
}

struct Row {
    name: &'static str,
    cred: Cred,
    status: u16,
    /// `X-Tollgate-Tenant` at the backend (`None`: not sent, or not admitted).
    header: Option<String>,
    /// Redis keys this request creates.
    keys: Vec<String>,
    /// `q=` of `RateLimit-Policy` (shows which `tenants:` entry applied).
    burst: Option<u64>,
}

fn rows() -> Vec<Row> {
    let sub = |s: &str| Cred::Jwt(json!({ "sub": s }));
    let claim = |t: &str| Cred::Jwt(json!({ "sub": "fallback", "tenant": t }));
    let refused = |name, cred| Row {
        name,
        cred,
        status: 401,
        header: None,
        keys: vec![],
        burst: None,
    };
    vec![
        Row {
            name: "sub plain",
            cred: sub("acme"),
            status: 200,
            header: Some("acme".into()),
            keys: vec!["tollgate:{acme}:tb".into()],
            burst: Some(5),
        },
        refused("sub three spaces", sub("   ")),
        refused("sub empty", sub("")),
        refused("sub leading space", sub(" acme")),
        refused("sub trailing no-break space", sub("acme\u{a0}")),
        refused("sub tab", sub("a\tb")),
        refused("sub CR LF", sub("a\r\nx-injected: 1")),
        refused("sub DEL", sub("a\u{7f}b")),
        refused("sub reserved prefix", sub("ip:127.0.0.1")),
        refused("sub 257 bytes", sub(&"x".repeat(257))),
        Row {
            name: "sub non-ASCII",
            cred: sub("zürich"),
            status: 200,
            header: Some("z%C3%BCrich".into()),
            keys: vec!["tollgate:{z%C3%BCrich}:tb".into()],
            burst: Some(3),
        },
        Row {
            name: "sub braces",
            cred: sub("a}b{c"),
            status: 200,
            header: Some("a%7Db%7Bc".into()),
            keys: vec!["tollgate:{a%7Db%7Bc}:tb".into()],
            burst: Some(2),
        },
        Row {
            name: "sub percent sign",
            cred: sub("100%"),
            status: 200,
            header: Some("100%25".into()),
            keys: vec!["tollgate:{100%25}:tb".into()],
            burst: Some(5),
        },
        Row {
            name: "sub 256 bytes",
            cred: sub(&"y".repeat(256)),
            status: 200,
            header: Some("y".repeat(256)),
            keys: vec![format!("tollgate:{{{}}}:tb", "y".repeat(256))],
            burst: Some(5),
        },
        refused(
            "tenant claim blank (no fallback to sub)",
            claim(" \u{2028} "),
        ),
        refused("tenant claim NUL", claim("a\u{0}b")),
        refused("tenant claim C1 control", claim("a\u{85}b")),
        Row {
            name: "tenant claim non-ASCII",
            cred: claim("日本"),
            status: 200,
            header: Some("%E6%97%A5%E6%9C%AC".into()),
            keys: vec!["tollgate:{%E6%97%A5%E6%9C%AC}:tb".into()],
            burst: Some(5),
        },
        Row {
            name: "api key non-ASCII tenant",
            cred: Cred::ApiKey(KEY_UMLAUT),
            status: 200,
            header: Some("z%C3%BCrich-keys".into()),
            keys: vec!["tollgate:{z%C3%BCrich-keys}:tb".into()],
            burst: Some(5),
        },
        Row {
            name: "api key braces tenant",
            cred: Cred::ApiKey(KEY_BRACES),
            status: 200,
            header: Some("k%7De%7By".into()),
            keys: vec!["tollgate:{k%7De%7By}:tb".into()],
            burst: Some(5),
        },
        Row {
            name: "anonymous",
            cred: Cred::Anonymous,
            status: 200,
            header: None,
            keys: vec!["tollgate:{ip%3A127.0.0.1}:tb".into()],
            burst: Some(5),
        },
    ]
}

/// The Redis Cluster hash tag of `key`: between the first `{` and the first `}` after it.
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let close = key[open + 1..].find('}')? + open + 1;
    (close > open + 1).then(|| &key[open + 1..close])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_source_of_a_tenant_id_is_validated_and_encoded() {
    let redis = RedisServer::start();
    let backend = Backend::start("tenant-id");
    let gw = Gateway::start_with_env(
        &yaml(&redis, &backend),
        &[("TENANT_ID_TEST_SECRET", HS_SECRET)],
    );
    let http = client();
    let mut failures = Vec::new();
    for row in rows() {
        let before: BTreeSet<String> = redis.keys("*").into_iter().collect();
        let mut req = http.get(gw.url("/t"));
        match &row.cred {
            Cred::Jwt(c) => req = req.bearer_auth(token(c.clone())),
            Cred::ApiKey(k) => req = req.header("x-api-key", *k),
            Cred::Anonymous => {}
        }
        let r = Reply::read(req.send().await.unwrap()).await.unwrap();
        let after: BTreeSet<String> = redis.keys("*").into_iter().collect();
        let created: Vec<&String> = after.difference(&before).collect();
        let mut problems = Vec::new();
        if r.status != row.status {
            problems.push(format!("status {} (body {})", r.status, r.body));
        }
        if row.status == 401
            && r.header("www-authenticate") != Some("Bearer error=\"invalid_token\"")
        {
            problems.push(format!(
                "WWW-Authenticate {:?}",
                r.header("www-authenticate")
            ));
        }
        if r.status == 200 {
            let echo: Value = serde_json::from_str(&r.body).unwrap_or_default();
            let got = echo["headers"]["x-tollgate-tenant"].as_str();
            if got != row.header.as_deref() {
                problems.push(format!("forwarded tenant {got:?}"));
            }
            let q = r
                .header("ratelimit-policy")
                .and_then(|p| p.split(';').find_map(|f| f.strip_prefix("q=")))
                .and_then(|q| q.parse::<u64>().ok());
            if q != row.burst {
                problems.push(format!(
                    "RateLimit-Policy {:?}",
                    r.header("ratelimit-policy")
                ));
            }
        }
        if created.iter().copied().ne(row.keys.iter()) {
            problems.push(format!("Redis keys created {created:?}"));
        }
        for key in &created {
            // One well-defined tag: exactly the text between our braces, no brace inside.
            let tag = hash_tag(key).unwrap_or("");
            if format!("tollgate:{{{tag}}}:tb") != **key {
                problems.push(format!("key {key:?} has hash tag {tag:?}"));
            }
        }
        if !problems.is_empty() {
            failures.push(format!("{}: {}", row.name, problems.join("; ")));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Config sources: `tollgate check` refuses a bad tenant id with its field path.
#[test]
fn config_tenant_ids_are_checked_with_their_field_path() {
    let base = |api_tenant: &str, map_key: &str| {
        format!(
            "listen: [\"{{listen}}\"]\n\
             redis: {{ url: \"redis://127.0.0.1:1\" }}\n\
             upstreams:\n  echo: {{ backends: [\"127.0.0.1:9\"] }}\n\
             tiers:\n  T: {{ limit: 1, per: 1d }}\n\
             tenants:\n  \"{map_key}\": {{ tier: T }}\n\
             identity:\n  default_tier: T\n  api_keys:\n    keys:\n\
             \x20     - {{ sha256: \"{}\", tenant: \"{api_tenant}\" }}\n\
             routes:\n  - {{ path_prefix: \"/\", upstream: echo }}\n",
            sha256_hex("k"),
        )
    };
    let ok = check_config(&base("zürich a}b{c", "100% {x}"));
    assert_eq!(ok.code(), Some(0), "{}", ok.all());
    let long = "x".repeat(257);
    let table: &[(&str, &str, &str)] = &[
        (
            "   ",
            "ok",
            "identity.api_keys.keys[0].tenant: tenant id must not be empty or blank",
        ),
        (
            "",
            "ok",
            "identity.api_keys.keys[0].tenant: tenant id must not be empty or blank",
        ),
        (
            " acme",
            "ok",
            "identity.api_keys.keys[0].tenant: tenant id must not start or end with whitespace",
        ),
        (
            "a\\x01b",
            "ok",
            "identity.api_keys.keys[0].tenant: tenant id must not contain control characters",
        ),
        (
            "ip:10.0.0.1",
            "ok",
            "identity.api_keys.keys[0].tenant: tenant id must not start with \"ip:\"",
        ),
        (
            &long,
            "ok",
            "identity.api_keys.keys[0].tenant: tenant id must be at most 256 bytes",
        ),
        (
            "ok",
            "   ",
            "tenants[\"   \"]: tenant id must not be empty or blank",
        ),
        (
            "ok",
            "acme\\t",
            "tenants[\"acme\\t\"]: tenant id must not contain control characters",
        ),
        (
            "ok",
            "acme ",
            "tenants[\"acme \"]: tenant id must not start or end with whitespace",
        ),
        (
            "ok",
            "ip:1.2.3.4",
            "tenants.ip:1.2.3.4: tenant id must not start with \"ip:\"",
        ),
        ("ok", &long, "tenant id must be at most 256 bytes"),
    ];
    for (api_tenant, map_key, want) in table {
        let out = check_config(&base(api_tenant, map_key));
        assert_ne!(
            out.code(),
            Some(0),
            "{api_tenant:?} / {map_key:?}: {}",
            out.all()
        );
        assert!(
            out.all().contains(want),
            "{api_tenant:?} / {map_key:?}: want {want:?} in:\n{}",
            out.all()
        );
    }
}
