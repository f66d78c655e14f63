use super::*;
use crate::config::HeaderMode;
use crate::limit::{Decision, Rate};
use serde_json::json;
use serde_json::{Map, Value};

fn headers(decision: Decision, mode: HeaderMode) -> Vec<(&'static str, String)> {
    QuotaHeaders {
        policy_name: "free".into(),
        rate: Rate::new(60, 60_000, 20),
        decision,
        degraded: false,
        quotas: vec![],
        listed_before: None,
    }
    .pairs(mode)
}

#[test]
fn every_policy_listed_tightest_reported_longest_wait() {
    let main = Decision {
        admitted: true,
        remaining: 7,
        retry_after_ms: 0,
        full_ms: 3_000,
    };
    let day = Decision {
        admitted: false,
        remaining: 0,
        retry_after_ms: 3_600_000,
        full_ms: 3_600_000,
    };
    let h = QuotaHeaders {
        policy_name: "pro".into(),
        rate: Rate::new(1000, 60_000, 200),
        decision: main,
        degraded: false,
        listed_before: None,
        quotas: vec![QuotaReport {
            name: "pro.day".into(),
            kind: ReportKind::CalendarQuota,
            limit: 100_000,
            window_s: 86_400,
            decision: day,
        }],
    };
    let p = h.pairs(HeaderMode::Both);
    assert_eq!(p[0].1, "\"pro\";q=200;w=12, \"pro.day\";q=100000;w=86400");
    assert_eq!(p[1].1, "\"pro.day\";r=0;t=3600");
    assert_eq!(p[2], ("X-RateLimit-Limit", "100000".to_string()));
    assert_eq!(p.last().unwrap(), &("Retry-After", "3600".to_string()));
    assert!(!h.admitted());
    assert_eq!(h.violated(), ["pro.day"]);
}

#[test]
fn draft11_syntax_and_retry_after() {
    let d = Decision {
        admitted: false,
        remaining: 0,
        retry_after_ms: 2_300,
        full_ms: 20_000,
    };
    let h = headers(d, HeaderMode::Ietf);
    assert_eq!(h[0], ("RateLimit-Policy", "\"free\";q=20;w=20".to_string()));
    assert_eq!(h[1], ("RateLimit", "\"free\";r=0;t=20".to_string()));
    assert_eq!(h[2], ("Retry-After", "3".to_string()));
}

#[test]
fn legacy_family_and_none() {
    let d = Decision {
        admitted: true,
        remaining: 7,
        retry_after_ms: 0,
        full_ms: 12_001,
    };
    let h = headers(d, HeaderMode::Legacy);
    assert_eq!(h.len(), 3);
    assert_eq!(h[1], ("X-RateLimit-Remaining", "7".to_string()));
    assert_eq!(h[2], ("X-RateLimit-Reset", "13".to_string()));
    assert!(headers(d, HeaderMode::None).is_empty());
}

#[test]
fn problem_body_has_rfc9457_members() {
    let p = Problem::typed(429, QUOTA_EXCEEDED, "Quota exceeded", "x".into())
        .with("violated-policies", json!(["free"]));
    let v: Value = serde_json::from_slice(&p.to_body("rid")).unwrap();
    assert_eq!(v["status"], 429);
    assert_eq!(v["type"], QUOTA_EXCEEDED);
    assert_eq!(v["violated-policies"][0], "free");
    assert_eq!(v["request-id"], "rid");
}

#[test]
fn raw_problem_response_is_framed() {
    let p = Problem::status(431, "too big");
    let bytes = problem_response_bytes(&p, "rid");
    let text = String::from_utf8(bytes).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"));
    assert!(head.contains(&format!("Content-Length: {}", body.len())));
    assert!(head.contains("Connection: close"));
    assert_eq!(problem(body)["status"], 431);
}

fn problem(body: &str) -> Value {
    serde_json::from_str(body).unwrap()
}

/// The body as a JSON tree would serialize it: the standard members, then the extensions
/// merged over them (a sorted map).
fn body_via_tree(p: &Problem, request_id: &str) -> Vec<u8> {
    let mut map = Map::new();
    map.insert("type".into(), json!(p.type_uri));
    map.insert("title".into(), json!(p.title));
    map.insert("status".into(), json!(p.status));
    map.insert("detail".into(), json!(p.detail));
    map.insert("request-id".into(), json!(request_id));
    map.extend(p.extensions.clone());
    serde_json::to_vec(&Value::Object(map)).unwrap()
}

#[test]
fn problem_body_is_the_sorted_merge_of_members_and_extensions() {
    let bare = Problem::status(503, "a \"quoted\" \\ detail\n");
    let cases = [
        bare.clone(),
        // Keys sorting before, between and after the standard members.
        bare.clone()
            .with("a-first", json!(1))
            .with("policy", json!({"q": 10}))
            .with("reason", json!("redis"))
            .with("violated-policies", json!(["free", "free.day"]))
            .with("zz", json!(null)),
        // An extension named like a standard member replaces it.
        bare.clone()
            .with("status", json!("overridden"))
            .with("detail", json!(7)),
    ];
    for p in &cases {
        let body = p.to_body("rid-\u{e9}");
        assert_eq!(body.as_ref(), body_via_tree(p, "rid-\u{e9}").as_slice());
    }
}

/// `;leased` goes on the tier's policy and RateLimit items only.
#[test]
fn headers_are_marked_leased() {
    let mut pairs = vec![
        ("RateLimit-Policy", "\"pro\";q=200;w=12".to_string()),
        ("RateLimit", "\"pro\";r=150;t=3".to_string()),
        ("Retry-After", "3".to_string()),
        ("X-RateLimit-Limit", "200".to_string()),
    ];
    ratelimit::annotate_leased(&mut pairs, "pro");
    assert_eq!(pairs[0].1, "\"pro\";q=200;w=12;leased");
    assert_eq!(pairs[1].1, "\"pro\";r=150;t=3;leased");
    assert_eq!(pairs[2].1, "3");
    assert_eq!(pairs[3].1, "200");
    let mut other = vec![("RateLimit", "\"pro.pool\";r=1;t=1".to_string())];
    ratelimit::annotate_leased(&mut other, "pro");
    assert_eq!(other[0].1, "\"pro.pool\";r=1;t=1");
}

#[test]
fn every_regional_share_is_marked_and_the_region_header_added() {
    let d = Decision {
        admitted: true,
        remaining: 3,
        retry_after_ms: 0,
        full_ms: 1_000,
    };
    let report = |name: &str, kind| QuotaReport {
        name: name.into(),
        kind,
        limit: 6,
        window_s: 86_400,
        decision: d,
    };
    let h = QuotaHeaders {
        policy_name: "pro".into(),
        rate: Rate::new(4, 1_000, 4),
        decision: d,
        degraded: false,
        listed_before: None,
        quotas: vec![
            report("pro.day", ReportKind::CalendarQuota),
            report("uploads", ReportKind::Rule),
            report("pro.tokens", ReportKind::Usage),
        ],
    };
    let pairs = h.pairs_in(HeaderMode::Both, Some("eu"));
    assert_eq!(
        pairs[0].1,
        "\"pro\";q=4;w=1;region=\"eu\", \"pro.day\";q=6;w=86400;region=\"eu\", \
         \"uploads\";q=6;w=86400;region=\"eu\", \"pro.tokens\";q=6;w=86400",
        "every item that is a regional share is marked (a usage budget is not divided)"
    );
    assert_eq!(pairs[1].1, "\"pro\";r=3;t=1");
    assert!(pairs.contains(&("Tollgate-Region", "eu".to_string())));
    assert_eq!(
        h.pairs(HeaderMode::Both),
        h.pairs_in(HeaderMode::Both, None)
    );
    // A burst pool's admission: the tier's item is a share, the pool's is not.
    let pool = QuotaHeaders::pool_admitted(&h, Rate::new(10, 1_000, 10), d);
    let pairs = pool.pairs_in(HeaderMode::Ietf, Some("eu"));
    assert_eq!(
        pairs[0].1,
        "\"pro\";q=4;w=1;region=\"eu\", \"pro.pool\";q=10;w=1"
    );
    // A concurrency cap's refusal.
    let c = ratelimit::concurrency_pairs("pro.concurrency", 2, HeaderMode::Both, Some("eu"));
    assert_eq!(c[0].1, "\"pro.concurrency\";q=2;region=\"eu\"");
    assert_eq!(c.last().unwrap(), &("Tollgate-Region", "eu".to_string()));
    let c = ratelimit::concurrency_pairs("pro.concurrency", 2, HeaderMode::Ietf, None);
    assert_eq!(
        c,
        vec![("RateLimit-Policy", "\"pro.concurrency\";q=2".to_string())]
    );
}
