use super::*;
use crate::config::RefundOn;
use crate::limit::Rate;

fn budget(refund_on: RefundOn) -> UsageBudget {
    UsageBudget {
        policy: "pro.tokens".into(),
        name: "tokens".into(),
        rate: Rate::new(1000, 60_000, 1000),
        reserve: 100,
        from_json: None,
        source: UsageSource::OpenAi,
        max: 500,
        refund_on,
        uncounted: 500,
        include_usage: true,
    }
}

const ALL: RefundOn = RefundOn {
    backend_5xx: true,
    upstream_unavailable: true,
    client_gone_before_response: true,
};

#[test]
fn a_reported_count_replaces_the_reserve() {
    let b = budget(ALL);
    let ok = Some(200);
    let done = Ending::Complete;
    assert_eq!(
        settlement(&b, ok, Found::Count(Count::Units(130)), done),
        (Settlement::Settled, 30)
    );
    assert_eq!(
        settlement(&b, ok, Found::Count(Count::Units(20)), done),
        (Settlement::Settled, -80)
    );
    assert_eq!(
        settlement(&b, ok, Found::Count(Count::Units(0)), done),
        (Settlement::Settled, -100)
    );
    assert_eq!(
        settlement(&b, ok, Found::Count(Count::Units(501)), done),
        (Settlement::Clamped, 400)
    );
    assert_eq!(
        settlement(&b, ok, Found::Count(Count::Huge), done),
        (Settlement::Clamped, 400)
    );
}

#[test]
fn bad_or_missing_counts_keep_the_reserve() {
    let b = budget(ALL);
    let done = Ending::Complete;
    assert_eq!(
        settlement(&b, Some(200), Found::Count(Count::Negative), done),
        (Settlement::Invalid, 0)
    );
    assert_eq!(
        settlement(&b, Some(200), Found::Count(Count::Invalid), done),
        (Settlement::Invalid, 0)
    );
    assert_eq!(
        settlement(&b, Some(200), Found::Nothing, done),
        (Settlement::Missing, 0)
    );
}

#[test]
fn refund_on_gives_the_whole_reserve_back() {
    let b = budget(ALL);
    let five = settlement(
        &b,
        Some(503),
        Found::Count(Count::Units(300)),
        Ending::Complete,
    );
    assert_eq!(five, (Settlement::Refunded, -100));
    let gone = settlement(&b, None, Found::Nothing, Ending::ClientGoneBeforeResponse);
    assert_eq!(gone, (Settlement::Refunded, -100));
    let down = settlement(&b, None, Found::Nothing, Ending::UpstreamUnavailable);
    assert_eq!(down, (Settlement::Refunded, -100));
}

#[test]
fn without_refund_on_the_reserve_stands() {
    let b = budget(RefundOn::default());
    let five = settlement(
        &b,
        Some(500),
        Found::Count(Count::Units(300)),
        Ending::Complete,
    );
    assert_eq!(five, (Settlement::Settled, 200));
    let gone = settlement(&b, None, Found::Nothing, Ending::ClientGoneBeforeResponse);
    assert_eq!(gone, (Settlement::ClientGone, 0));
    let down = settlement(&b, None, Found::Nothing, Ending::UpstreamUnavailable);
    assert_eq!(down, (Settlement::Missing, 0));
}

#[test]
fn a_cut_stream_settles_from_the_usage_seen_or_keeps_the_reserve() {
    let b = budget(ALL);
    let cut = Ending::CutMidStream;
    assert_eq!(
        settlement(&b, Some(200), Found::Count(Count::Units(40)), cut),
        (Settlement::Settled, -60)
    );
    assert_eq!(
        settlement(&b, Some(200), Found::Nothing, cut),
        (Settlement::ClientGone, 0)
    );
}

#[test]
fn a_reserve_from_the_body_is_clamped_and_defaults() {
    let b = UsageBudget {
        from_json: Some("max_tokens".into()),
        ..budget(ALL)
    };
    let read = |body: &[u8]| reserve_for(&b, Some(body));
    assert_eq!(read(br#"{"max_tokens":250}"#), 250);
    // At most max (500, below the burst of 1000); at least 1.
    assert_eq!(read(br#"{"max_tokens":90000}"#), 500);
    assert_eq!(read(br#"{"max_tokens":0}"#), 1);
    // Absent, invalid, or no body read: the default.
    assert_eq!(read(br#"{"model":"m"}"#), 100);
    assert_eq!(read(br#"{"max_tokens":-3}"#), 100);
    assert_eq!(reserve_for(&b, None), 100);
    // Without from_json the body is never looked at.
    assert_eq!(
        reserve_for(&budget(ALL), Some(br#"{"max_tokens":250}"#)),
        100
    );
    // A max above the burst: clamped to the burst.
    let wide = UsageBudget { max: 5000, ..b };
    assert_eq!(reserve_for(&wide, Some(br#"{"max_tokens":90000}"#)), 1000);
}

#[test]
fn a_stream_without_a_count_is_charged_uncounted_however_it_ends() {
    let b = UsageBudget {
        uncounted: 300,
        ..budget(RefundOn::default())
    };
    for ending in [Ending::Complete, Ending::CutMidStream] {
        assert_eq!(
            settlement(&b, Some(200), Found::NothingInStream, ending),
            (Settlement::Uncounted, 200),
            "{ending:?}"
        );
    }
    // A count seen in the stream settles as usual.
    assert_eq!(
        settlement(
            &b,
            Some(200),
            Found::Count(Count::Units(40)),
            Ending::CutMidStream
        ),
        (Settlement::Settled, -60)
    );
}

#[test]
fn an_unreadable_body_is_charged_uncounted() {
    let b = budget(RefundOn::default());
    assert_eq!(
        settlement(&b, Some(200), Found::Unreadable, Ending::Complete),
        (Settlement::Unreadable, 400)
    );
}

#[test]
fn a_gateway_refusal_after_admission_always_refunds() {
    let b = budget(RefundOn::default());
    assert_eq!(
        settlement(&b, None, Found::Nothing, Ending::Refused),
        (Settlement::Refunded, -100)
    );
}

/// The body as the meter reads it: `codings` of `Content-Encoding`, fed in pieces of `piece`.
fn read_body(ct: &str, codings: &[&str], body: &[u8], piece: usize, whole: bool) -> Found {
    let mut read = BodyRead::new(Some(ct.as_bytes()), codings.iter().map(|c| c.as_bytes()));
    for chunk in body.chunks(piece) {
        read.feed(chunk);
    }
    read.finish(whole);
    read.found()
}

fn gzip(plain: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(plain).unwrap();
    e.finish().unwrap()
}

#[test]
fn a_coded_body_is_read_through_its_coding() {
    let json = br#"{"id":"x","usage":{"prompt_tokens":10,"total_tokens":400}}"#;
    let sse =
        b"data: {\"choices\":[]}\n\ndata: {\"usage\":{\"total_tokens\":400}}\n\ndata: [DONE]\n\n";
    let four_hundred = Found::Count(Count::Units(400));
    for piece in [1, 5, 1000] {
        let found = read_body("application/json", &["gzip"], &gzip(json), piece, true);
        assert_eq!(found, four_hundred);
        let found = read_body("text/event-stream", &["gzip"], &gzip(sse), piece, true);
        assert_eq!(found, four_hundred);
    }
    let plain = read_body("application/json", &["identity"], json, 3, true);
    assert_eq!(plain, four_hundred);
}

#[test]
fn a_body_that_cannot_be_decoded_is_unreadable() {
    let json = br#"{"usage":{"total_tokens":400}}"#;
    let coded = gzip(json);
    // Not in the coding it states; a coding not decoded; stacked codings; truncated.
    let ct = "application/json";
    assert_eq!(read_body(ct, &["br"], &coded, 7, true), Found::Unreadable);
    assert_eq!(
        read_body(ct, &["compress"], json, 7, true),
        Found::Unreadable
    );
    assert_eq!(
        read_body(ct, &["gzip, br"], &coded, 7, true),
        Found::Unreadable
    );
    let half = &coded[..coded.len() / 2];
    assert_eq!(read_body(ct, &["gzip"], half, 7, true), Found::Unreadable);
    // Cut short (the client left): what was decoded counts, nothing more is charged.
    assert_eq!(read_body(ct, &["gzip"], half, 7, false), Found::Nothing);
    // A stream without a count.
    let sse = gzip(b"data: {\"choices\":[]}\n\ndata: [DONE]\n\n");
    let found = read_body("text/event-stream", &["gzip"], &sse, 7, true);
    assert_eq!(found, Found::NothingInStream);
}
