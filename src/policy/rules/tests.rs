use super::*;
use crate::config::{FailurePolicy, HostMatch, Mode};
use crate::limit::algorithm::Algorithm;
use http::HeaderValue;

fn rule(name: &str, matcher: RuleMatch, key: Vec<KeyPart>, missing: Missing) -> LimitRule {
    LimitRule {
        name: name.into(),
        matcher,
        key,
        rate: Rate::new(10, 1_000, 10),
        algorithm: Algorithm::TokenBucket,
        by_tier: [("free".to_string(), Rate::new(2, 1_000, 2))].into(),
        missing,
        mode: Mode::Enforce,
        on_failure: FailurePolicy::Local,
        max_in_flight: None,
        usage: None,
        counting: Default::default(),
        block_for: None,
        cost: None,
    }
}

fn view<'a>(headers: &'a HeaderMap, claims: Option<&'a Map<String, Value>>) -> RequestView<'a> {
    RequestView {
        method: "POST",
        path: "/charges/7",
        query: Some("user=a%3Ab&x=1&users=second"),
        host: "api.example.com",
        headers,
        client_key: Some("192.0.2.7"),
        route: Some("/charges"),
        tenant: Some("acme"),
        tier: Some("free"),
        claims,
    }
}

#[test]
fn every_condition_must_hold() {
    let mut headers = HeaderMap::new();
    headers.insert("x-client", HeaderValue::from_static("beta"));
    let req = view(&headers, None);
    let m = |routes: &[&str], methods: &[&str], hosts: Vec<HostMatch>, hdr: &[(&str, &str)]| {
        let m = RuleMatch {
            routes: routes.iter().map(|s| s.to_string()).collect(),
            methods: methods.iter().map(|s| s.to_string()).collect(),
            hosts,
            headers: hdr
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            ..Default::default()
        };
        matches(&m, &req)
    };
    assert!(m(&[], &[], vec![], &[]));
    assert!(m(
        &["/charges"],
        &["GET", "POST"],
        vec![],
        &[("x-client", "beta")]
    ));
    assert!(!m(&["/charge"], &[], vec![], &[]), "whole segments only");
    assert!(!m(&[], &["GET"], vec![], &[]));
    assert!(
        !m(&[], &[], vec![], &[("x-client", "Beta")]),
        "values are exact"
    );
    assert!(!m(&[], &[], vec![], &[("x-other", "beta")]));
    assert!(m(
        &[],
        &[],
        vec![HostMatch::Suffix(".example.com".into())],
        &[]
    ));
    assert!(!m(
        &[],
        &[],
        vec![HostMatch::Exact("example.com".into())],
        &[]
    ));
}

#[test]
fn keys_read_every_part_kind() {
    let mut headers = HeaderMap::new();
    headers.append("x-user", HeaderValue::from_static("u1, u2"));
    let claims: Map<String, Value> =
        serde_json::from_str(r#"{"user": "bob", "org": 42, "none": null}"#).unwrap();
    let req = view(&headers, Some(&claims));
    let key = |part: KeyPart| {
        let rules = [rule("r", RuleMatch::default(), vec![part], Missing::Skip)];
        let applied = applicable(&rules, &req, None).unwrap();
        applied.first().map(|a| a.key.to_string())
    };
    assert_eq!(key(KeyPart::Tenant).unwrap(), "tenant=4.acme");
    assert_eq!(key(KeyPart::ClientIp).unwrap(), "client_ip=9.192.0.2.7");
    assert_eq!(key(KeyPart::Route).unwrap(), "route=8.%2Fcharges");
    assert_eq!(key(KeyPart::Method).unwrap(), "method=4.POST");
    assert_eq!(key(KeyPart::Host).unwrap(), "host=15.api.example.com");
    let h = key(KeyPart::Header("x-user".into())).unwrap();
    assert_eq!(h, "header%3Ax-user=6.u1%2C%20u2");
    assert_eq!(
        key(KeyPart::Claim("user".into())).unwrap(),
        "claim%3Auser=3.bob"
    );
    assert_eq!(
        key(KeyPart::Claim("org".into())).unwrap(),
        "claim%3Aorg=2.42"
    );
    assert_eq!(
        key(KeyPart::Query("user".into())).unwrap(),
        "query%3Auser=3.a%3Ab"
    );
    assert_eq!(key(KeyPart::Claim("none".into())), None);
    assert_eq!(key(KeyPart::Claim("absent".into())), None);
    assert_eq!(key(KeyPart::Header("x-absent".into())), None);
    assert_eq!(key(KeyPart::Query("absent".into())), None);
}

#[test]
fn missing_parts_skip_or_refuse() {
    let headers = HeaderMap::new();
    let req = view(&headers, None);
    let part = || vec![KeyPart::Tenant, KeyPart::Claim("user".into())];
    let skip = [rule("a", RuleMatch::default(), part(), Missing::Skip)];
    assert!(applicable(&skip, &req, None).unwrap().is_empty());
    let refuse = [rule("b", RuleMatch::default(), part(), Missing::Refuse)];
    let err = applicable(&refuse, &req, None).unwrap_err();
    assert_eq!(
        err,
        MissingPart {
            rule: "b".into(),
            part: "claim:user".into(),
            why: PartFault::Missing,
        }
    );
}

#[test]
fn sizes_follow_the_tier_and_the_regional_share() {
    let headers = HeaderMap::new();
    let mut req = view(&headers, None);
    let rules = [
        rule(
            "a",
            RuleMatch::default(),
            vec![KeyPart::Tenant],
            Missing::Skip,
        ),
        rule(
            "b",
            RuleMatch::default(),
            vec![KeyPart::Method],
            Missing::Skip,
        ),
    ];
    let applied = applicable(&rules, &req, None).unwrap();
    assert_eq!(applied[0].rate, Rate::new(2, 1_000, 2), "by_tier.free");
    req.tier = Some("pro");
    let applied = applicable(&rules, &req, None).unwrap();
    assert_eq!(applied[0].rate, Rate::new(10, 1_000, 10), "the rule's own");
    let share = |tenant: Option<&str>| match tenant {
        Some(_) => Share::WHOLE,
        None => Share { num: 1, den: 2 },
    };
    let applied = applicable(&rules, &req, Some(&share)).unwrap();
    assert_eq!(
        applied[0].rate,
        Share::WHOLE.apply(Rate::new(10, 1_000, 10))
    );
    assert_eq!(
        applied[1].rate,
        Share { num: 1, den: 2 }.apply(Rate::new(10, 1_000, 10))
    );
}

/// The fingerprint of `req` over `rules`, or `None` when a refusing rule lacks a part.
fn print_of(rules: &[LimitRule], req: &RequestView<'_>) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    fingerprint(rules, req, &mut out).then_some(out)
}

#[test]
fn equal_fingerprints_mean_equal_plans_and_every_input_counts() {
    let by_method = RuleMatch {
        methods: vec!["POST".into()],
        ..Default::default()
    };
    let rules = vec![
        rule(
            "per-user",
            RuleMatch::default(),
            vec![KeyPart::Tenant, KeyPart::Header("x-user".into())],
            Missing::Skip,
        ),
        rule(
            "posts",
            by_method,
            vec![KeyPart::ClientIp, KeyPart::Query("user".into())],
            Missing::Skip,
        ),
        rule(
            "per-sub",
            RuleMatch::default(),
            vec![KeyPart::Claim("sub".into())],
            Missing::Skip,
        ),
    ];
    let mut headers = HeaderMap::new();
    headers.insert("x-user", HeaderValue::from_static("ann"));
    let claims: Map<String, Value> = serde_json::from_str(r#"{"sub": "u-1"}"#).unwrap();
    let base = view(&headers, Some(&claims));
    let print = print_of(&rules, &base).unwrap();
    // The same request, read again: the same bytes and the same plan.
    assert_eq!(print_of(&rules, &base).unwrap(), print);
    let plan = |req: &RequestView<'_>| {
        applicable(&rules, req, None)
            .unwrap()
            .into_iter()
            .map(|a| (a.index, a.key, a.rate))
            .collect::<Vec<_>>()
    };
    assert_eq!(plan(&base), plan(&view(&headers, Some(&claims))));
    // Each thing a plan depends on changes the fingerprint.
    let mut other_user = HeaderMap::new();
    other_user.insert("x-user", HeaderValue::from_static("bob"));
    let other_claims: Map<String, Value> = serde_json::from_str(r#"{"sub": "u-2"}"#).unwrap();
    let variants: Vec<RequestView<'_>> = vec![
        view(&other_user, Some(&claims)),
        view(&headers, Some(&other_claims)),
        view(&headers, None),
        RequestView {
            method: "GET",
            ..base
        },
        RequestView {
            client_key: Some("192.0.2.8"),
            ..base
        },
        RequestView {
            query: Some("user=b"),
            ..base
        },
        RequestView {
            tenant: Some("globex"),
            ..base
        },
        RequestView {
            tier: Some("pro"),
            ..base
        },
        RequestView { tier: None, ..base },
    ];
    for (i, v) in variants.iter().enumerate() {
        let p = print_of(&rules, v).unwrap();
        assert_ne!(p, print, "variant {i}");
        assert_eq!(print_of(&rules, v).unwrap(), p, "variant {i} twice");
    }
    // Values cannot run into each other: the same bytes split differently differ.
    let mut ab = HeaderMap::new();
    ab.insert("x-user", HeaderValue::from_static("a"));
    let split = |q| RequestView {
        query: Some(q),
        ..view(&ab, None)
    };
    let one = vec![rule(
        "two",
        RuleMatch::default(),
        vec![KeyPart::Header("x-user".into()), KeyPart::Query("q".into())],
        Missing::Skip,
    )];
    assert_ne!(print_of(&one, &split("q=bc")), {
        let mut abc = HeaderMap::new();
        abc.insert("x-user", HeaderValue::from_static("ab"));
        print_of(
            &one,
            &RequestView {
                query: Some("q=c"),
                ..view(&abc, None)
            },
        )
    });
}

#[test]
fn a_refused_request_has_no_fingerprint() {
    let headers = HeaderMap::new();
    let req = view(&headers, None);
    let skip = vec![rule(
        "u",
        RuleMatch::default(),
        vec![KeyPart::Header("x-user".into())],
        Missing::Skip,
    )];
    assert!(print_of(&skip, &req).is_some());
    let refuse = vec![rule(
        "u",
        RuleMatch::default(),
        vec![KeyPart::Header("x-user".into())],
        Missing::Refuse,
    )];
    assert_eq!(print_of(&refuse, &req), None);
    assert!(applicable(&refuse, &req, None).is_err());
}

#[test]
fn the_memo_keeps_plans_up_to_its_capacity() {
    use memo::{PlanMemo, Prepared, CAPACITY};
    let memo = PlanMemo::default();
    assert!(memo.get(b"a").is_none());
    let kept = memo.insert(b"a", Prepared::new(Vec::new()));
    assert!(std::sync::Arc::ptr_eq(&kept, &memo.get(b"a").unwrap()));
    for i in 1..CAPACITY {
        memo.insert(&i.to_le_bytes(), Prepared::new(Vec::new()));
    }
    assert_eq!(memo.len(), CAPACITY);
    // Full: emptied before the next plan is kept.
    memo.insert(b"next", Prepared::new(Vec::new()));
    assert_eq!(memo.len(), 1);
    assert!(memo.get(b"a").is_none() && memo.get(b"next").is_some());
}

/// A `query:` or `header:` part given more than once is ambiguous (backends read the first or
/// the last value): the request is refused whatever `missing` says, however the repeated name
/// is spelled, and has no fingerprint to reuse.
#[test]
fn repeated_parts_are_refused() {
    let mut twice = HeaderMap::new();
    twice.append("x-user", HeaderValue::from_static("a"));
    twice.append("x-user", HeaderValue::from_static("a"));
    let none = HeaderMap::new();
    let by = |part: KeyPart, missing| vec![rule("r", RuleMatch::default(), vec![part], missing)];
    for missing in [Missing::Skip, Missing::Refuse] {
        let header = by(KeyPart::Header("x-user".into()), missing);
        let err = applicable(&header, &view(&twice, None), None).unwrap_err();
        assert_eq!(err.why, PartFault::Repeated);
        assert_eq!(err.part, "header:x-user");
        assert_eq!(print_of(&header, &view(&twice, None)), None);
        let query = by(KeyPart::Query("model".into()), missing);
        for q in [
            "model=z1&model=gpt4",
            "model=gpt4&model=gpt4",
            "model=a&%6Dodel=b",
            "model&model=b",
            "x=1&model=a&y=2&model=",
        ] {
            let req = RequestView {
                query: Some(q),
                ..view(&none, None)
            };
            let err = applicable(&query, &req, None).unwrap_err();
            assert_eq!(
                (err.why, err.part.as_str()),
                (PartFault::Repeated, "query:model"),
                "{q}"
            );
            assert_eq!(print_of(&query, &req), None, "{q}");
        }
        // Once is fine, and other parameters may repeat.
        let req = RequestView {
            query: Some("x=1&model=gpt4&x=2"),
            ..view(&none, None)
        };
        let applied = applicable(&query, &req, None).unwrap();
        assert_eq!(&*applied[0].key, "query%3Amodel=4.gpt4");
    }
}

/// HEAD runs a backend's GET view: a rule on GET applies to it, and it is keyed as GET.
#[test]
fn head_is_limited_as_get() {
    let headers = HeaderMap::new();
    let head = RequestView {
        method: "HEAD",
        ..view(&headers, None)
    };
    let on = |methods: &[&str]| RuleMatch {
        methods: methods.iter().map(|s| s.to_string()).collect(),
        ..RuleMatch::default()
    };
    assert!(matches(&on(&["GET"]), &head));
    assert!(matches(&on(&["HEAD"]), &head));
    assert!(!matches(&on(&["POST"]), &head));
    let get = RequestView {
        method: "GET",
        ..head
    };
    assert!(
        !matches(&on(&["HEAD"]), &get),
        "a rule on HEAD alone is not one on GET"
    );
    let rules = [rule(
        "m",
        on(&["GET"]),
        vec![KeyPart::Method],
        Missing::Skip,
    )];
    let key = |req| applicable(&rules, req, None).unwrap()[0].key.to_string();
    assert_eq!(key(&head), "method=3.GET");
    assert_eq!(key(&head), key(&get));
    assert_eq!(print_of(&rules, &head), print_of(&rules, &get));
}
