//! Assertions on answers: RFC 9457 problem bodies, echo JSON, header values.

/// Parses an RFC 9457 problem body; panics with the body when it is not a JSON object with
/// `type`, `title` and `status`.
pub fn problem(resp_body: &str) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_str(resp_body)
        .unwrap_or_else(|e| panic!("problem body is not JSON ({e}): {resp_body}"));
    for field in ["type", "title", "status"] {
        assert!(
            v.get(field).is_some(),
            "problem body lacks {field:?}: {resp_body}"
        );
    }
    v
}

/// Asserts `resp` is a `status` answer with `Content-Type: application/problem+json` whose body's
/// `status` field matches, and returns the parsed body.
pub async fn expect_problem(resp: reqwest::Response, status: u16) -> serde_json::Value {
    let got = resp.status().as_u16();
    let content_type = header_str(&resp, "content-type").unwrap_or_default();
    let body = resp.text().await.expect("read problem body");
    assert_eq!(got, status, "status; body: {body}");
    assert!(
        content_type.starts_with("application/problem+json"),
        "content-type {content_type:?}; body: {body}"
    );
    let v = problem(&body);
    assert_eq!(
        v["status"].as_u64(),
        Some(status as u64),
        "problem status field: {body}"
    );
    v
}

/// A response header as an owned string (None when absent or not visible ASCII).
pub fn header_str(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Reads the JSON answer `tollgate-echo` gives for an ordinary request (asserting 200).
pub async fn echo_json(resp: reqwest::Response) -> serde_json::Value {
    let status = resp.status().as_u16();
    let body = resp.text().await.expect("read echo body");
    assert_eq!(status, 200, "echo answer status; body: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("echo body is not JSON ({e}): {body}"))
}

/// Whether `s` looks like a UUID (8-4-4-4-12 hex digits).
pub fn is_uuid_like(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}
