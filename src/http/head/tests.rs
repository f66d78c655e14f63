use super::*;

fn h2<'a>(
    authority: Option<&'a str>,
    fields: &'a [(&'a str, &'a str)],
) -> Head<'a, impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone + 'a> {
    Head {
        protocol: Protocol::Http2,
        target: b"/x",
        authority: authority.map(str::as_bytes),
        fields: fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
    }
}

fn h1<'a>(
    target: &'a str,
    fields: &'a [(&'a str, &'a str)],
) -> Head<'a, impl Iterator<Item = (&'a [u8], &'a [u8])> + Clone + 'a> {
    Head {
        protocol: Protocol::Http1 { minor: 1 },
        target: target.as_bytes(),
        authority: None,
        fields: fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
    }
}

/// Header fields of a table row.
type Fields<'a> = &'a [(&'a str, &'a str)];

/// The same head on HTTP/1.1 (authority in an absolute-form target) and HTTP/2 (in
/// `:authority`) gets the same verdict.
#[test]
fn one_verdict_for_both_protocols() {
    let cases: &[(Option<&str>, Fields, bool)] = &[
        (Some("api.example.com"), &[], true),
        (None, &[("host", "api.example.com")], true),
        (
            Some("api.example.com:8443"),
            &[("host", "api.example.com:8443")],
            true,
        ),
        (Some("[::1]:80"), &[], true),
        (None, &[("host", "api.example.com/x")], false),
        (None, &[("host", "api.example.com?x")], false),
        (None, &[("host", "api.example.com#x")], false),
        (None, &[("host", "api.example.com\\x")], false),
        (None, &[("host", "[name]")], false),
        (None, &[("host", "a:80:80")], false),
        (None, &[("host", "a:123456")], false),
        (None, &[("host", "u@api.example.com")], false),
        (None, &[("host", "a"), ("Host", "a")], false),
        (Some("[name]"), &[], false),
        (Some("u@api.example.com"), &[], false),
        (Some("a:80:80"), &[], false),
        (
            Some("api.example.com"),
            &[("host", "other.example.com")],
            false,
        ),
        (
            None,
            &[("content-length", "5"), ("content-length", "6")],
            false,
        ),
        (None, &[("content-length", "-1")], false),
        (None, &[("content-length", "5, 5")], true),
    ];
    for (authority, fields, ok) in cases {
        let target = authority.map_or("/x".to_string(), |a| format!("http://{a}/x"));
        for (name, verdict) in [
            ("h2", problem(&h2(*authority, fields))),
            ("h1", problem(&h1(&target, fields))),
        ] {
            assert_eq!(
                verdict.is_none(),
                *ok,
                "{name} {authority:?} {fields:?}: {verdict:?}"
            );
            if let Some(p) = verdict {
                assert_eq!(p.fault, HeadFault::Malformed);
            }
        }
    }
}

#[test]
fn authority_syntax_on_http2() {
    // HTTP/1 cannot spell these (an absolute-form authority ends at `/`, `?` or `#`).
    for authority in ["api.example.com/x", "api.example.com?x", "a b"] {
        let p = problem(&h2(Some(authority), &[])).expect(authority);
        assert_eq!(p.detail, ":authority is not a host with an optional port");
    }
}

#[test]
fn connection_specific_fields() {
    // HTTP/1: only the nominations Pingora refuses; HTTP/2: none at all (RFC 9113 8.2.2).
    for fields in [
        &[("connection", "keep-alive")][..],
        &[("keep-alive", "timeout=5")],
        &[("proxy-connection", "close")],
        &[("transfer-encoding", "chunked")],
        &[("upgrade", "websocket")],
        &[("te", "gzip")],
    ] {
        assert!(problem(&h2(Some("a"), fields)).is_some(), "{fields:?}");
    }
    assert!(problem(&h2(Some("a"), &[("te", "trailers")])).is_none());
    assert!(problem(&h1("/", &[("connection", "keep-alive")])).is_none());
    assert!(problem(&h1("/", &[("connection", "host")])).is_some());
    assert!(problem(&h1("/", &[("transfer-encoding", "gzip")])).is_some());
}

/// The size fault of an HTTP/2 GET of `target` with `:authority: a` and `fields`, within 64
/// bytes and 2 fields.
fn size_fault(target: &[u8], fields: &[(&str, &str)]) -> Option<HeadFault> {
    let limits = HeadLimits {
        max_bytes: 64,
        max_fields: 2,
    };
    let head = Head {
        target,
        ..h2(Some("a"), fields)
    };
    h2_size_problem("GET", &head, limits).map(|p| p.fault)
}

#[test]
fn sizes_count_the_http1_spelling() {
    // "GET /x HTTP/1.1\r\n" (17) + "host: a\r\n" (9) + "\r\n" (2) = 28.
    assert_eq!(size_fault(b"/x", &[]), None);
    let value = "v".repeat(64 - 28 - "b: \r\n".len());
    assert_eq!(size_fault(b"/x", &[("b", &value)]), None);
    let over = format!("{value}v");
    assert_eq!(
        size_fault(b"/x", &[("b", &over)]),
        Some(HeadFault::HeadersTooLarge)
    );
    assert_eq!(
        size_fault(b"/x", &[("b", "1"), ("c", "2")]),
        Some(HeadFault::TooManyHeaders)
    );
    assert_eq!(size_fault(&[b'/'; 60], &[]), Some(HeadFault::UriTooLong));
    assert_eq!(HeadFault::UriTooLong.status(), 414);
    assert_eq!(HeadFault::TooManyHeaders.status(), 431);
}
