use super::*;

fn limits(bytes: usize, count: usize) -> HttpLimits {
    HttpLimits {
        max_header_bytes: bytes,
        max_headers: count,
        ..HttpLimits::default()
    }
}

fn verdict(head: &str) -> HeadVerdict {
    check_head(head.as_bytes(), &limits(200, 4))
}

fn refused(head: &str) -> (u16, &'static str, String) {
    match verdict(head) {
        HeadVerdict::Refused(r) => (r.status, r.outcome.as_str(), r.detail),
        other => panic!("{head:?} not refused: {other:?}"),
    }
}

#[test]
fn complete_and_partial_heads() {
    let head = "GET /a HTTP/1.1\r\nHost: h\r\n\r\nbody";
    assert_eq!(verdict(head), HeadVerdict::Complete(head.len() - 4));
    assert_eq!(verdict("GET /a HTTP/1.1\r\nHo"), HeadVerdict::Partial);
    assert_eq!(verdict(""), HeadVerdict::Partial);
    assert_eq!(
        verdict("\r\nGET / HTTP/1.1\r\n\r\n"),
        HeadVerdict::Complete(20)
    );
}

#[test]
fn limits_give_431_or_414() {
    let many = "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\n\r\n";
    assert_eq!(refused(many).0, 431);
    assert_eq!(refused(many).1, "too_many_headers");
    let big = format!("GET / HTTP/1.1\r\nA: {}\r\n\r\n", "x".repeat(300));
    assert_eq!(refused(&big).1, "headers_too_large");
    let partial_big = format!("GET / HTTP/1.1\r\nA: {}", "x".repeat(300));
    assert_eq!(refused(&partial_big).0, 431);
    let long_line = format!("GET /{}", "x".repeat(300));
    assert_eq!(refused(&long_line).0, 414);
    let long_line = format!("GET /{} HTTP/1.1\r\nHost: h\r\n\r\n", "x".repeat(300));
    assert_eq!(refused(&long_line).0, 414);
    // Exactly at the limit is fine.
    let at = format!("GET / HTTP/1.1\r\nA: {}\r\n\r\n", "x".repeat(200 - 23));
    assert_eq!(at.len(), 200);
    assert_eq!(verdict(&at), HeadVerdict::Complete(200));
}

#[test]
fn malformed_heads_are_400() {
    for head in [
        "GET /a b HTTP/1.1\r\n\r\n",
        "GET / HTTP/9.9\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
        "\x01GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: u@h\r\n\r\n",
        "GET http://a/x HTTP/1.1\r\nHost: b\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "GET / HTTP/1.1\r\nConnection: close, Host\r\n\r\n",
        "GET / HTTP/1.1\r\nConnection: \"X-Forwarded-For\"\r\n\r\n",
    ] {
        let (status, outcome, _) = refused(head);
        assert_eq!((status, outcome), (400, "malformed"), "{head:?}");
    }
}

#[test]
fn acceptable_framing() {
    for head in [
        "GET / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
        "GET / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "GET http://a/x HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET http://a/x HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nConnection: keep-alive, X-Request-Id\r\n\r\n",
    ] {
        assert!(
            matches!(verdict(head), HeadVerdict::Complete(_)),
            "{head:?}"
        );
    }
}

#[test]
fn request_id_is_kept_on_refusal() {
    match verdict("GET / HTTP/1.1\r\nX-Request-Id: r1\r\nHost: a\r\nHost: b\r\n\r\n") {
        HeadVerdict::Refused(r) => assert_eq!(r.request_id.as_deref(), Some("r1")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn host_must_be_a_host_with_an_optional_port() {
    for host in [
        "a",
        "api.example.com",
        "API.Example.com.",
        "127.0.0.1:8080",
        "[::1]",
        "[::1]:443",
        "[2001:db8::7]:80",
        "a-b_c~d:",
        "",
    ] {
        let head = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
        assert!(
            matches!(verdict(&head), HeadVerdict::Complete(_)),
            "{host:?}"
        );
    }
    for host in [
        "admin.local:80:80",
        "admin.local/x",
        "admin.local ,x",
        "admin.local?x",
        "admin.local#x",
        "[admin.local]",
        "[::1",
        "[::1]x",
        "a:8o",
        "a:123456",
        "a\\b",
        "a\"b",
    ] {
        let head = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
        let (status, outcome, detail) = refused(&head);
        assert_eq!((status, outcome), (400, "malformed"), "{host:?}");
        assert!(detail.contains("Host"), "{host:?}: {detail}");
    }
}

/// HTTP/2 heads get the HTTP/1 verdicts: `:authority` in place of an absolute-form authority.
#[test]
fn h2_heads_are_judged_by_the_same_rules() {
    let head = |uri: &str, fields: &[(&str, &str)]| {
        let mut b = http::Request::builder().method("GET").uri(uri);
        for (n, v) in fields {
            b = b.header(*n, *v);
        }
        RequestHeader::from(b.body(()).unwrap().into_parts().0)
    };
    let limits = limits(200, 4);
    assert_eq!(
        check_h2(&head("https://api.example.com/x", &[]), &limits),
        None
    );
    assert_eq!(
        check_h2(&head("/x", &[("host", "api.example.com")]), &limits),
        None
    );
    for (uri, fields) in [
        ("/x", &[("host", "api.example.com/x")][..]),
        ("/x", &[("host", "a"), ("host", "a")]),
        (
            "https://api.example.com/x",
            &[("host", "other.example.com")],
        ),
        ("https://u@api.example.com/x", &[]),
        (
            "https://a/x",
            &[("content-length", "1"), ("content-length", "2")],
        ),
        ("https://a/x", &[("connection", "close")]),
    ] {
        let r = check_h2(&head(uri, fields), &limits).unwrap_or_else(|| panic!("{uri} {fields:?}"));
        assert_eq!(
            (r.status, r.outcome.as_str()),
            (400, "malformed"),
            "{uri} {fields:?}"
        );
    }
    let many = [("a", "1"), ("b", "2"), ("c", "3"), ("d", "4"), ("e", "5")];
    let r = check_h2(&head("https://a/x", &many), &limits).unwrap();
    assert_eq!((r.status, r.outcome.as_str()), (431, "too_many_headers"));
    let long = format!("https://a/{}", "x".repeat(300));
    assert_eq!(check_h2(&head(&long, &[]), &limits).unwrap().status, 414);
}

/// The request's end comes with the verdict of its head, from the same parse: after the head,
/// after its `Content-Length` body, or unknown (chunked, upgrade); nothing for a head that is
/// not complete or is refused.
#[test]
fn a_complete_head_says_where_its_request_ends() {
    let end = |head: &str| match check_head_and_end(head.as_bytes(), &limits(200, 4)) {
        (HeadVerdict::Complete(n), end) => (Some(n), end),
        (_, end) => (None, end),
    };
    let get = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_eq!(end(get), (Some(get.len()), Some(get.len())));
    // Bytes after the head (a pipelined request) are not part of it.
    assert_eq!(
        end(&format!("{get}GET /next")),
        (Some(get.len()), Some(get.len()))
    );
    let post = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n";
    assert_eq!(end(post), (Some(post.len()), Some(post.len() + 5)));
    let chunked = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(end(chunked), (Some(chunked.len()), None));
    let upgrade = "GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n";
    assert_eq!(end(upgrade), (Some(upgrade.len()), None));
    assert_eq!(end("GET / HTTP/1.1\r\nHost: a\r\n"), (None, None));
    assert_eq!(end("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), (None, None));
}
