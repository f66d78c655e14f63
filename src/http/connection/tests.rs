use super::*;

fn problem(value: &str) -> Option<&'static str> {
    nomination_problem([value.as_bytes()])
}

#[test]
fn ordinary_nominations_pass() {
    for value in [
        "",
        "close",
        "keep-alive",
        "Keep-Alive, Upgrade",
        " , X-Private-Hop ,",
        "X-Tollgate-Tenant, X-Tollgate-Tier, X-Request-Id",
        "a, b, c, d, e, f, g, h, i",
    ] {
        assert_eq!(problem(value), None, "{value:?}");
    }
}

#[test]
fn pingoras_refusals_are_mirrored() {
    for value in [
        "Host",
        "close, HOST",
        "x-forwarded-for",
        "X-Forwarded-Host",
        "X-Forwarded-Proto",
        ":authority",
        "\"X-Forwarded-For\"",
        "a b",
        "a, b, c, d, e, f, g, h, i, j",
    ] {
        assert!(problem(value).is_some(), "{value:?}");
    }
    // Across several fields too.
    let values: [&[u8]; 2] = [b"close", b"Host"];
    assert!(nomination_problem(values).is_some());
}

#[test]
fn owned_names_are_dropped_from_the_token_list() {
    let owned = ["x-tollgate-tenant", "x-tollgate-tier", "x-request-id"];
    let strip = |values: &[&str]| {
        without_owned(
            &values.iter().map(|v| v.as_bytes()).collect::<Vec<_>>(),
            &owned,
        )
    };
    assert_eq!(strip(&["close"]), None);
    assert_eq!(strip(&["X-Private-Hop, keep-alive"]), None);
    assert_eq!(
        strip(&["X-Tollgate-Tenant, X-TOLLGATE-TIER, X-Request-Id"]),
        Some(String::new())
    );
    assert_eq!(
        strip(&["close, x-request-id", "X-Private-Hop,,x-tollgate-tier"]),
        Some("close, X-Private-Hop".to_string())
    );
}
