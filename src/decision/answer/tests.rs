use super::*;
use crate::decision::rls::{Entry, RateLimitDescriptor, UInt64Value};

fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>, hits: u32) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend: hits,
    }
}

fn descriptor(entries: &[(&str, &str)], hits: Option<u64>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        hits_addend: hits.map(|value| UInt64Value { value }),
    }
}

#[test]
fn hits_come_from_the_descriptor_then_the_request_and_zero_is_one() {
    let d = |h| descriptor(&[("k", "v")], h);
    let hits = |req: RateLimitRequest| -> Vec<u64> {
        asked(&req).unwrap().iter().map(|a| a.hits).collect()
    };
    assert_eq!(hits(request("d", vec![d(None), d(Some(7))], 0)), [1, 7]);
    assert_eq!(hits(request("d", vec![d(None), d(Some(0))], 3)), [3, 3]);
    assert_eq!(
        hits(request("d", vec![d(Some(u64::from(u32::MAX)))], 0)),
        [u64::from(u32::MAX)]
    );
}

#[test]
fn malformed_calls_are_invalid_arguments() {
    let ok = descriptor(&[("k", "v")], None);
    let code = |req: RateLimitRequest| asked(&req).unwrap_err().code();
    assert_eq!(
        code(request("", vec![ok.clone()], 0)),
        tonic::Code::InvalidArgument
    );
    assert_eq!(code(request("d", vec![], 0)), tonic::Code::InvalidArgument);
    assert_eq!(
        code(request("d", vec![descriptor(&[], None)], 0)),
        tonic::Code::InvalidArgument
    );
    assert_eq!(
        code(request("d", vec![descriptor(&[("", "v")], None)], 0)),
        tonic::Code::InvalidArgument
    );
    assert_eq!(
        code(request("d", vec![ok.clone(); MAX_DESCRIPTORS + 1], 0)),
        tonic::Code::InvalidArgument
    );
    let many: Vec<(String, String)> = (0..1000).map(|i| (format!("k{i}"), "v".into())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        code(request("d", vec![descriptor(&many, None)], 0)),
        tonic::Code::InvalidArgument
    );
    let long = "x".repeat(MAX_ENTRY_BYTES + 1);
    assert_eq!(
        code(request("d", vec![descriptor(&[("k", &long)], None)], 0)),
        tonic::Code::InvalidArgument
    );
    let huge = descriptor(&[("k", "v")], Some(MAX_HITS + 1));
    assert_eq!(
        code(request("d", vec![huge], 0)),
        tonic::Code::InvalidArgument
    );
}

#[test]
fn rates_are_written_in_the_largest_unit_their_period_divides() {
    let r = |limit, per_ms| {
        let l = rate_limit(Rate::new(limit, per_ms, limit), "r");
        (l.requests_per_unit, Unit::try_from(l.unit).unwrap())
    };
    assert_eq!(r(10, 1_000), (10, Unit::Second));
    assert_eq!(r(5, 60_000), (5, Unit::Minute));
    assert_eq!(r(10, 500), (20, Unit::Second));
    assert_eq!(r(100, 86_400_000), (100, Unit::Day));
    assert_eq!(r(3, 7_000), (3 * 86_400, Unit::Week));
}
