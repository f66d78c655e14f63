use super::*;
use ::http::HeaderValue;

fn head(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (n, v) in pairs {
        h.append(*n, HeaderValue::from_static(v));
    }
    h
}

#[test]
fn json_media_types_are_recognised() {
    for ct in [
        "application/json",
        "Application/JSON; charset=utf-8",
        "application/vnd.api+json",
    ] {
        assert!(is_json(ct.as_bytes()), "{ct}");
    }
    for ct in [
        "text/plain",
        "application/jsonx",
        "+json",
        "multipart/form-data",
    ] {
        assert!(!is_json(ct.as_bytes()), "{ct}");
    }
}

#[test]
fn only_a_json_body_of_known_length_within_the_limit_is_readable() {
    let json = ("content-type", "application/json");
    assert!(readable(&head(&[json, ("content-length", "100")]), 100));
    assert!(!readable(&head(&[json, ("content-length", "101")]), 100));
    assert!(!readable(&head(&[json, ("content-length", "0")]), 100));
    assert!(!readable(&head(&[json]), 100));
    assert!(!readable(
        &head(&[
            json,
            ("content-length", "10"),
            ("transfer-encoding", "chunked")
        ]),
        100
    ));
    assert!(!readable(
        &head(&[("content-type", "text/plain"), ("content-length", "10")]),
        100
    ));
}

#[test]
fn the_top_level_field_is_read_as_a_non_negative_integer() {
    let body = br#"{"model":"m","max_tokens":250,"nested":{"max_tokens":9}}"#;
    assert_eq!(top_level_count(body, "max_tokens"), Some(250));
    assert_eq!(
        top_level_count(br#"{"max_tokens":0}"#, "max_tokens"),
        Some(0)
    );
    for bad in [
        &br#"{"max_tokens":-1}"#[..],
        br#"{"max_tokens":1.5}"#,
        br#"{"max_tokens":1e3}"#,
        br#"{"max_tokens":"250"}"#,
        br#"{"max_tokens":null}"#,
        br#"{"nested":{"max_tokens":9}}"#,
        br#"[{"max_tokens":9}]"#,
        br#"{"max_tokens":250"#,
        b"",
    ] {
        assert_eq!(
            top_level_count(bad, "max_tokens"),
            None,
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn a_streamed_request_is_asked_for_its_usage() {
    let with = |b: &[u8]| with_include_usage(b).map(|v| String::from_utf8(v).unwrap());
    let parsed = |s: &str| serde_json::from_str::<serde_json::Value>(s).unwrap();
    // Inserted first, every byte of the client's body kept.
    let body = br#" {"model":"m","stream":true,"n":1.50}"#;
    assert_eq!(
        with(body).as_deref(),
        Some(r#" {"stream_options":{"include_usage":true},"model":"m","stream":true,"n":1.50}"#)
    );
    // stream_options without include_usage, or with it false: set, other options kept.
    for body in [
        &br#"{"stream":true,"stream_options":{"x":1}}"#[..],
        br#"{"stream":true,"stream_options":{"x":1,"include_usage":false}}"#,
    ] {
        let v = parsed(&with(body).unwrap());
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["stream_options"]["x"], 1);
        assert_eq!(v["stream"], true);
    }
    let v = parsed(&with(br#"{"stream":true,"stream_options":null}"#).unwrap());
    assert_eq!(v["stream_options"]["include_usage"], true);
    // Nothing to change.
    for body in [
        &br#"{"stream":true,"stream_options":{"include_usage":true}}"#[..],
        br#"{"stream":false}"#,
        br#"{"stream":"true"}"#,
        br#"{"model":"m"}"#,
        br#"[{"stream":true}]"#,
        br#"{"stream":true"#,
        b"",
    ] {
        assert_eq!(with(body), None, "{}", String::from_utf8_lossy(body));
    }
}

#[test]
fn counts_at_dotted_paths() {
    let path = |p: &str| p.split('.').map(str::to_string).collect::<Vec<_>>();
    let body = br#"{"batch":[1,2,3],"n":7,"o":{"size":12,"neg":-1,"f":2.5,"s":"4","z":null},"big":99999999999999999999999}"#;
    assert_eq!(count_at(body, &path("batch.length")), Stated::Count(3));
    assert_eq!(count_at(body, &path("n")), Stated::Count(7));
    assert_eq!(count_at(body, &path("o.size")), Stated::Count(12));
    assert_eq!(count_at(body, &path("batch.1")), Stated::Count(2));
    assert_eq!(count_at(body, &path("big")), Stated::Count(u64::MAX));
    for bad in ["o.neg", "o.f", "o.s", "o", "batch", "n.x", "batch.x"] {
        assert_eq!(count_at(body, &path(bad)), Stated::Malformed, "{bad}");
    }
    for absent in ["missing", "o.z", "o.missing", "batch.9", "o.z.deeper"] {
        assert_eq!(count_at(body, &path(absent)), Stated::Absent, "{absent}");
    }
    assert_eq!(count_at(b"not json", &path("n")), Stated::Malformed);
    assert_eq!(count_at(b"", &path("n")), Stated::Malformed);
}

#[test]
fn decimal_counts() {
    assert_eq!(decimal_count(b" 42\t"), Stated::Count(42));
    assert_eq!(decimal_count(b"0"), Stated::Count(0));
    assert_eq!(
        decimal_count(b"99999999999999999999999"),
        Stated::Count(u64::MAX)
    );
    for bad in [&b""[..], b"-1", b"+1", b"1.5", b"0x10", b"abc", b"1 2"] {
        assert_eq!(decimal_count(bad), Stated::Malformed, "{bad:?}");
    }
}
