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
        settlement(&b, ok, Some(Count::Units(130)), done),
        (Settlement::Settled, 30)
    );
    assert_eq!(
        settlement(&b, ok, Some(Count::Units(20)), done),
        (Settlement::Settled, -80)
    );
    assert_eq!(
        settlement(&b, ok, Some(Count::Units(0)), done),
        (Settlement::Settled, -100)
    );
    assert_eq!(
        settlement(&b, ok, Some(Count::Units(501)), done),
        (Settlement::Clamped, 400)
    );
    assert_eq!(
        settlement(&b, ok, Some(Count::Huge), done),
        (Settlement::Clamped, 400)
    );
}

#[test]
fn bad_or_missing_counts_keep_the_reserve() {
    let b = budget(ALL);
    let done = Ending::Complete;
    assert_eq!(
        settlement(&b, Some(200), Some(Count::Negative), done),
        (Settlement::Invalid, 0)
    );
    assert_eq!(
        settlement(&b, Some(200), Some(Count::Invalid), done),
        (Settlement::Invalid, 0)
    );
    assert_eq!(
        settlement(&b, Some(200), None, done),
        (Settlement::Missing, 0)
    );
}

#[test]
fn refund_on_gives_the_whole_reserve_back() {
    let b = budget(ALL);
    let five = settlement(&b, Some(503), Some(Count::Units(300)), Ending::Complete);
    assert_eq!(five, (Settlement::Refunded, -100));
    let gone = settlement(&b, None, None, Ending::ClientGoneBeforeResponse);
    assert_eq!(gone, (Settlement::Refunded, -100));
    let down = settlement(&b, None, None, Ending::UpstreamUnavailable);
    assert_eq!(down, (Settlement::Refunded, -100));
}

#[test]
fn without_refund_on_the_reserve_stands() {
    let b = budget(RefundOn::default());
    let five = settlement(&b, Some(500), Some(Count::Units(300)), Ending::Complete);
    assert_eq!(five, (Settlement::Settled, 200));
    let gone = settlement(&b, None, None, Ending::ClientGoneBeforeResponse);
    assert_eq!(gone, (Settlement::ClientGone, 0));
    let down = settlement(&b, None, None, Ending::UpstreamUnavailable);
    assert_eq!(down, (Settlement::Missing, 0));
}

#[test]
fn a_cut_stream_settles_from_the_usage_seen_or_keeps_the_reserve() {
    let b = budget(ALL);
    let cut = Ending::CutMidStream;
    assert_eq!(
        settlement(&b, Some(200), Some(Count::Units(40)), cut),
        (Settlement::Settled, -60)
    );
    assert_eq!(
        settlement(&b, Some(200), None, cut),
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
