use super::*;
use http::HeaderValue;

fn from(source: CostSource, default: u64, min: u64, max: Option<u64>) -> CostFrom {
    CostFrom {
        source,
        default,
        min,
        max,
    }
}

fn input<'a>(headers: &'a HeaderMap, query: Option<&'a str>, body: BodyState<'a>) -> CostInput<'a> {
    CostInput {
        headers,
        query,
        declared_len: None,
        body,
    }
}

fn tokens(n: u64) -> Result<Charge, CostFault> {
    Ok(Charge {
        tokens: n,
        defaulted: None,
    })
}

fn defaulted(n: u64, reason: &'static str) -> Result<Charge, CostFault> {
    Ok(Charge {
        tokens: n,
        defaulted: Some(reason),
    })
}

#[test]
fn header_costs_are_bounded_and_defaulted() {
    let f = from(
        CostSource::Header("x-units".parse().unwrap()),
        2,
        1,
        Some(1000),
    );
    let mut h = HeaderMap::new();
    assert_eq!(
        charge(&f, &input(&h, None, BodyState::NotRead)),
        defaulted(2, "absent")
    );
    h.insert("x-units", HeaderValue::from_static("7"));
    assert_eq!(charge(&f, &input(&h, None, BodyState::NotRead)), tokens(7));
    h.insert("x-units", HeaderValue::from_static("0"));
    assert_eq!(charge(&f, &input(&h, None, BodyState::NotRead)), tokens(1));
    h.insert("x-units", HeaderValue::from_static("-5"));
    assert_eq!(
        charge(&f, &input(&h, None, BodyState::NotRead)),
        defaulted(2, "malformed")
    );
    h.insert(
        "x-units",
        HeaderValue::from_static("99999999999999999999999"),
    );
    assert_eq!(
        charge(&f, &input(&h, None, BodyState::NotRead)),
        Err(CostFault::AboveMax {
            stated: u64::MAX,
            max: 1000
        })
    );
    h.append("x-units", HeaderValue::from_static("1"));
    assert_eq!(
        charge(&f, &input(&h, None, BodyState::NotRead)),
        Err(CostFault::Repeated)
    );
}

#[test]
fn zero_is_free_only_with_min_zero() {
    let h = HeaderMap::new();
    let free = from(CostSource::Query("n".into()), 1, 0, None);
    assert_eq!(
        charge(&free, &input(&h, Some("n=0"), BodyState::NotRead)),
        tokens(0)
    );
    let paid = from(CostSource::Query("n".into()), 1, 1, None);
    assert_eq!(
        charge(&paid, &input(&h, Some("n=0"), BodyState::NotRead)),
        tokens(1)
    );
    assert_eq!(
        charge(&paid, &input(&h, Some("n=%33"), BodyState::NotRead)),
        tokens(3)
    );
    assert_eq!(
        charge(&paid, &input(&h, Some("n=1&n=2"), BodyState::NotRead)),
        Err(CostFault::Repeated)
    );
    assert_eq!(
        charge(&paid, &input(&h, Some("m=2"), BodyState::NotRead)),
        defaulted(1, "absent")
    );
}

#[test]
fn request_bytes_come_from_the_length_or_the_body() {
    let h = HeaderMap::new();
    let f = from(CostSource::RequestBytes, 1, 1, None);
    let mut i = input(&h, None, BodyState::NotRead);
    i.declared_len = Some(4096);
    assert_eq!(charge(&f, &i), tokens(4096));
    assert!(!needs_body(&f.source, Some(4096)) && needs_body(&f.source, None));
    let body = [0u8; 300];
    assert_eq!(
        charge(&f, &input(&h, None, BodyState::Whole(Some(&body)))),
        tokens(300)
    );
    assert_eq!(
        charge(&f, &input(&h, None, BodyState::Whole(None))),
        tokens(1)
    );
    assert_eq!(
        charge(&f, &input(&h, None, BodyState::TooLarge { limit: 10 })),
        Err(CostFault::LengthRequired { limit: 10 })
    );
}

#[test]
fn json_costs_read_the_body() {
    let h = HeaderMap::new();
    let f = from(
        CostSource::Json(vec!["batch".into(), "length".into()]),
        1,
        1,
        Some(100),
    );
    let body = br#"{"batch":[1,2,3,4]}"#;
    assert_eq!(
        charge(&f, &input(&h, None, BodyState::Whole(Some(body)))),
        tokens(4)
    );
    assert_eq!(
        charge(&f, &input(&h, None, BodyState::Whole(Some(b"{]")))),
        defaulted(1, "malformed")
    );
    assert_eq!(
        charge(&f, &input(&h, None, BodyState::Whole(None))),
        defaulted(1, "absent")
    );
    assert_eq!(
        charge(&f, &input(&h, None, BodyState::TooLarge { limit: 9 })),
        Err(CostFault::BodyTooLarge { limit: 9 })
    );
}

#[test]
fn refusals_say_why() {
    let r = refusal(
        CostFault::AboveMax {
            stated: 5000,
            max: 1000,
        },
        "route \"batch\"",
        &CostSource::Header("x-units".parse().unwrap()),
    );
    assert_eq!(r.problem.status, 413);
    assert!(
        r.problem.detail.contains("5000") && r.problem.detail.contains("1000"),
        "{}",
        r.problem.detail
    );
    let rate = Rate::new(10, 1000, 10);
    assert!(above_burst("free", &rate, 10).is_none());
    let r = above_burst("free", &rate, 11).unwrap();
    assert_eq!(r.problem.status, 413);
    assert!(r.retry_after.is_none());
}
