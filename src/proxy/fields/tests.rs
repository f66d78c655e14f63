use super::*;

fn wire(req: &RequestHeader) -> String {
    let mut buf = bytes::BytesMut::new();
    req.header_to_h1_wire(&mut buf);
    String::from_utf8(buf.to_vec()).unwrap()
}

fn parsed(target: &[u8]) -> RequestHeader {
    let mut req = RequestHeader::build("POST", target, Some(2)).unwrap();
    req.append_header("X-Client-Case", "a").unwrap();
    req.append_header("Accept", "b").unwrap();
    req
}

fn add(f: &mut dyn Fields) -> Result<()> {
    f.insert(
        HeaderName::from_static("x-forwarded-proto"),
        HeaderValue::from_static("http"),
    )?;
    f.insert(name("RateLimit-Policy")?, value("\"t\";q=5".to_string())?)?;
    f.remove(&HeaderName::from_static("accept"));
    Ok(())
}

#[test]
fn lower_case_edit_keeps_the_head_and_drops_only_the_case() {
    let mut req = parsed(b"/a/b?c=d");
    req.extensions_mut().insert(7u8);
    edit_request(&mut req, false, 2, add).unwrap();
    assert_eq!(req.method, http::Method::POST);
    assert_eq!(req.raw_path(), b"/a/b?c=d");
    assert_eq!(req.extensions.get::<u8>(), Some(&7));
    assert!(!req.has_case());
    let out = wire(&req);
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "ratelimit-policy: \"t\";q=5",
            "x-client-case: a",
            "x-forwarded-proto: http"
        ]
    );
}

#[test]
fn preserving_edit_keeps_each_names_case() {
    let mut req = parsed(b"/");
    edit_request(&mut req, true, 2, add).unwrap();
    assert!(req.has_case());
    let out = wire(&req);
    assert!(out.starts_with("X-Client-Case: a\r\n"), "{out}");
    assert!(!out.contains("ccept"), "{out}");
}

#[test]
fn a_target_the_uri_does_not_reproduce_is_kept_verbatim() {
    for target in [&b"http://example.com/x?y"[..], b"/caf\xc3\xa9/\xff"] {
        let mut req = parsed(target);
        let before = req.raw_path().to_vec();
        let utf8 = req.raw_path_is_utf8();
        edit_request(&mut req, false, 2, add).unwrap();
        assert_eq!(req.raw_path(), &before[..]);
        assert_eq!(req.raw_path_is_utf8(), utf8);
    }
}

#[test]
fn a_response_keeps_its_status_and_own_reason_phrase() {
    let mut resp = ResponseHeader::build(299, Some(1)).unwrap();
    resp.set_reason_phrase(Some("Fine Anyway")).unwrap();
    resp.append_header("Server", "nginx").unwrap();
    edit_response(&mut resp, false, 1, |f| {
        f.insert(name("Retry-After").unwrap(), HeaderValue::from_static("3"))
    })
    .unwrap();
    assert_eq!(resp.status.as_u16(), 299);
    assert_eq!(resp.get_reason_phrase(), Some("Fine Anyway"));
    assert_eq!(resp.headers["retry-after"], "3");
    assert_eq!(resp.headers["server"], "nginx");
    assert!(!resp.has_case());

    let mut ok = ResponseHeader::build(200, Some(1)).unwrap();
    edit_response(&mut ok, false, 0, |_| ());
    assert_eq!(ok.get_reason_phrase(), Some("OK"));
}

#[test]
fn names_of_tollgates_own_headers_are_their_lower_case() {
    for text in ["RateLimit", "X-RateLimit-Reset", "X-Made-Up"] {
        assert_eq!(name(text).unwrap().as_str(), text.to_ascii_lowercase());
    }
    assert!(name("bad name").is_err());
}
