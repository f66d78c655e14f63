use super::*;

/// Feeds `body` to a fresh scanner in pieces of `n` bytes.
fn json_in_pieces(body: &str, n: usize) -> Option<Count> {
    let mut s = JsonScan::new();
    for piece in body.as_bytes().chunks(n) {
        s.feed(piece);
    }
    s.finish();
    s.found()
}

fn sse_in_pieces(body: &str, n: usize) -> Option<Count> {
    let mut s = SseScan::new();
    for piece in body.as_bytes().chunks(n) {
        s.feed(piece);
    }
    s.finish();
    s.found()
}

const COMPLETION: &str = r#"{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"the \"usage\": {\"total_tokens\": 99} is text"}}],"usage":{"prompt_tokens":10,"completion_tokens":32,"total_tokens":42,"details":{"total_tokens":7}}}"#;

#[test]
fn a_json_body_states_its_total_in_any_pieces() {
    for n in 1..=COMPLETION.len() {
        assert_eq!(
            json_in_pieces(COMPLETION, n),
            Some(Count::Units(42)),
            "pieces of {n}"
        );
    }
}

#[test]
fn only_the_top_level_usage_counts() {
    let nested =
        r#"{"choices":[{"usage":{"total_tokens":5}}],"meta":{"usage":{"total_tokens":6}}}"#;
    assert_eq!(json_in_pieces(nested, 3), None);
    assert_eq!(json_in_pieces(r#"{"usage":null}"#, 2), None);
    assert_eq!(json_in_pieces(r#"[{"usage":{"total_tokens":5}}]"#, 2), None);
}

#[test]
fn bad_counts_are_classified() {
    for (value, want) in [
        ("-5", Count::Negative),
        ("-0.5", Count::Negative),
        ("\"12\"", Count::Invalid),
        ("null", Count::Invalid),
        ("NaN", Count::Invalid),
        ("Infinity", Count::Invalid),
        ("12.5", Count::Invalid),
        ("{\"n\":1}", Count::Invalid),
        ("[1]", Count::Invalid),
        ("12.0", Count::Units(12)),
        ("1e3", Count::Units(1000)),
        (
            "99999999999999999999999999999999999999999999999999",
            Count::Huge,
        ),
        ("18446744073709551616", Count::Huge),
        ("9007199254740993", Count::Huge),
        ("1e300", Count::Huge),
        ("0", Count::Units(0)),
    ] {
        let body = format!(r#"{{"usage":{{"total_tokens":{value}}}}}"#);
        for n in [1, 2, 5, body.len()] {
            assert_eq!(
                json_in_pieces(&body, n),
                Some(want),
                "{value} in pieces of {n}"
            );
        }
    }
}

#[test]
fn header_values_are_classified() {
    assert_eq!(classify(b" 17 "), Count::Units(17));
    assert_eq!(classify(b""), Count::Invalid);
    assert_eq!(classify(b"-3"), Count::Negative);
    assert_eq!(classify(b"abc"), Count::Invalid);
    assert_eq!(classify(b"+3"), Count::Invalid);
    assert_eq!(classify(b"nan"), Count::Invalid);
    assert_eq!(classify(b"\xff"), Count::Invalid);
    assert_eq!(classify(b"123456789012345678901234567890"), Count::Huge);
}

const STREAM: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n\
: a comment\n\
event: message\n\
data: {\"choices\":[{\"delta\":{\"content\":\"data: {\\\"usage\\\":{\\\"total_tokens\\\":1}}\"}}],\"usage\":null}\n\n\
data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":1234}}\r\n\r\n\
data: [DONE]\n\n";

#[test]
fn an_sse_stream_states_its_total_in_the_event_with_usage() {
    for n in 1..=STREAM.len() {
        assert_eq!(
            sse_in_pieces(STREAM, n),
            Some(Count::Units(1234)),
            "pieces of {n}"
        );
    }
}

#[test]
fn an_sse_stream_cut_before_its_usage_states_nothing() {
    let cut = &STREAM[..STREAM.find("data: {\"choices\":[],").unwrap() + 30];
    assert_eq!(sse_in_pieces(cut, 7), None);
    let no_usage = "data: {\"usage\":null}\n\ndata: [DONE]\n\n";
    assert_eq!(sse_in_pieces(no_usage, 4), None);
}

#[test]
fn the_last_sse_count_wins_and_bad_ones_are_reported() {
    let two =
        "data: {\"usage\":{\"total_tokens\":5}}\n\ndata: {\"usage\":{\"total_tokens\":-1}}\n\n";
    assert_eq!(sse_in_pieces(two, 3), Some(Count::Negative));
    let other_field = "id: {\"usage\":{\"total_tokens\":5}}\n\n";
    assert_eq!(sse_in_pieces(other_field, 3), None);
}

#[test]
fn the_body_scanner_is_chosen_by_content_type() {
    let sse = BodyScan::for_content_type(Some(b"Text/Event-Stream; charset=utf-8"));
    assert!(matches!(sse, BodyScan::Sse(_)));
    assert!(matches!(
        BodyScan::for_content_type(Some(b"application/json")),
        BodyScan::Json(_)
    ));
    assert!(matches!(
        BodyScan::for_content_type(None),
        BodyScan::Json(_)
    ));
}

#[test]
fn deep_documents_keep_a_bounded_state() {
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let mut s = JsonScan::new();
    s.feed(deep.as_bytes());
    s.feed(br#"{"usage":{"total_tokens":3}}"#);
    s.finish();
    assert!(s.stack.len() <= MAX_DEPTH);
    assert_eq!(s.found(), Some(Count::Units(3)));
}
