use super::*;

#[test]
fn tenant_keys_are_tagged_by_the_encoded_tenant() {
    assert_eq!(tenant_key("tg", "acme", "x"), "tg:{acme}:x");
    assert_eq!(bucket_key("tg", "acme"), "tg:{acme}:tb");
    assert_eq!(bucket_key("tg", "a{b}%"), "tg:{a%7Bb%7D%25}:tb");
    assert_eq!(bucket_key("tg", "é"), "tg:{%C3%A9}:tb");
    let suffixes = ["tb", "gcra", "fw", "swl", "swc", "lb"];
    for (alg, suffix) in Algorithm::ALL.into_iter().zip(suffixes) {
        assert_eq!(main_key("tg", "a}b", alg), format!("tg:{{a%7Db}}:{suffix}"));
    }
    assert_eq!(
        quota_key("tg", "acme", Period::Day, 1_796_083_200_000),
        "tg:{acme}:q:day:1796083200000"
    );
    assert_eq!(
        quota_key("tg", "a{b", Period::Hour, 0),
        "tg:{a%7Bb}:q:hour:0"
    );
}

#[test]
fn quota_bases_are_tagged_by_the_encoded_tenant() {
    assert_eq!(
        quota_base_key("tg", "acme", Period::Month),
        "tg:{acme}:q:month"
    );
    assert_eq!(
        quota_base_key("tg", "é", Period::Week),
        "tg:{%C3%A9}:q:week"
    );
    assert_eq!(
        quota_base_key("tg", "a{b}", Period::Day),
        "tg:{a%7Bb%7D}:q:day"
    );
}

#[test]
fn rule_keys_are_tagged_by_tenant_or_by_rule() {
    let text = rule_key_text(&[("tenant", b"acme"), ("method", b"GET")]);
    assert_eq!(text, "tenant=4.acme:method=3.GET");
    assert_eq!(
        rule_key("tg", "search", Algorithm::TokenBucket, Some("a{b"), &text),
        "tg:{a%7Bb}:r:search:tb:tenant=4.acme:method=3.GET"
    );
    let text = rule_key_text(&[("header:x-user", b"a:b}")]);
    assert_eq!(text, "header%3Ax-user=4.a%3Ab%7D");
    assert_eq!(
        rule_key("tg", "login", Algorithm::Gcra, None, &text),
        "tg:{r:login:gcra:header%3Ax-user=4.a%3Ab%7D}"
    );
}

/// No two different part lists share a key: separators, braces, `%`, binary bytes, long values
/// and the same text in another part or place all give distinct keys.
#[test]
fn rule_keys_never_alias() {
    let long = "x".repeat(10 * 1024);
    let bin: Vec<u8> = (1..=255u8).collect();
    let cases: Vec<Vec<(&str, &[u8])>> = vec![
        vec![("header:a", b"x:y")],
        vec![("header:a", b"x%3Ay")],
        vec![("header:a", b"x"), ("header:b", b"y")],
        vec![("header:a", b"x:header%3Ab=1.y")],
        vec![("header:a", b"y"), ("header:b", b"x")],
        vec![("header:a", b""), ("header:b", b"xy")],
        vec![("header:a", b"xy"), ("header:b", b"")],
        vec![("query:a", b"x")],
        vec![("header:a", b"x")],
        vec![("claim:a", b"x")],
        vec![("header:a", b"{x}")],
        vec![("header:a", b"%7Bx%7D")],
        vec![("header:a", b"x=1.y")],
        vec![("header:a", long.as_bytes())],
        vec![("header:a", &long.as_bytes()[1..])],
        vec![("header:a", &bin)],
        vec![("header:a", &bin[1..])],
        vec![("header:a", "é".as_bytes())],
        vec![("header:a", b"%C3%A9")],
    ];
    let keys: Vec<String> = cases.iter().map(|c| rule_key_text(c)).collect();
    for (i, a) in keys.iter().enumerate() {
        assert!(a.len() <= MAX_RULE_KEY_BYTES.max(71), "{a}");
        assert!(!a.contains(['{', '}']), "{a}");
        for (j, b) in keys.iter().enumerate().skip(i + 1) {
            assert_ne!(a, b, "cases {i} and {j} alias");
        }
    }
    let hashed = rule_key_text(&[("header:a", long.as_bytes())]);
    assert!(
        hashed.starts_with("sha256.") && hashed.len() == 7 + 64,
        "{hashed}"
    );
}

#[test]
fn pool_region_and_fleet_keys() {
    assert_eq!(pool_key("tg", "gold"), "tg:{pool:gold}:tb");
    assert_eq!(share_key("tg", "gold", "acme"), "tg:{pool:gold}:share:acme");
    assert_eq!(share_key("tg", "gold", "a}b"), "tg:{pool:gold}:share:a%7Db");
    assert_eq!(region_key("tg", "acme", "eu"), "tg:{acme}:region:eu");
    assert_eq!(region_key("tg", "a{b", "us"), "tg:{a%7Bb}:region:us");
    assert_eq!(fleet_members_key("tollgate"), "tollgate:{fleet}:members");
}

/// Every key family, written with adversarial tenant ids (spelling other families' tags, their
/// separators and escapes), rule names and key values: no two different (family, arguments)
/// give the same key, and a tenant's hash tag never holds a `:` (every other family's does, or
/// is `{fleet}`).
#[test]
fn no_tenant_rule_or_value_spells_another_familys_key() {
    use std::collections::HashMap;
    let tenants = [
        "acme",
        "pool:free",
        "pool:free}:tb",
        "r:ipu:tb:client_ip=9.127.0.0.1",
        "r:ipu:u:tokens:client_ip=9.127.0.0.1",
        "c:conc:tenant=4.acme",
        "fleet",
        "free",
        "ip:127.0.0.1",
        "ip%3A127.0.0.1",
        "a:b",
        "a%3Ab",
        "acme}:tb",
        "{acme}",
        ":",
        "%",
        "tb",
        "inflight",
    ];
    let rules = ["ipu", "conc", "free", "pool"];
    let tiers = ["free", "pool", "ipu"];
    let texts = [
        rule_key_text(&[("client_ip", b"127.0.0.1")]),
        rule_key_text(&[("tenant", b"acme")]),
        rule_key_text(&[("header:x", b"a}:tb")]),
    ];
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut add = |key: String, what: String| {
        if let Some(before) = seen.insert(key.clone(), what.clone()) {
            panic!("{key} is both {before} and {what}");
        }
    };
    for t in tenants {
        for alg in Algorithm::ALL {
            add(main_key("tg", t, alg), format!("main {alg:?} of {t}"));
        }
        for p in [Period::Hour, Period::Day] {
            add(quota_key("tg", t, p, 7), format!("quota {p:?} of {t}"));
            add(
                quota_base_key("tg", t, p),
                format!("quota base {p:?} of {t}"),
            );
        }
        add(usage_key("tg", t, "tokens"), format!("usage of {t}"));
        add(inflight_key("tg", t), format!("inflight of {t}"));
        add(region_key("tg", t, "eu"), format!("region of {t}"));
        let tag = tenant_key("tg", t, "x");
        let tag = &tag["tg:{".len()..tag.len() - "}:x".len()];
        assert!(!tag.contains([':', '{', '}']), "tenant {t} has tag {tag}");
        for tier in tiers {
            add(share_key("tg", tier, t), format!("share of {t} in {tier}"));
        }
        for r in rules {
            for (i, k) in texts.iter().enumerate() {
                let alg = Algorithm::TokenBucket;
                add(
                    rule_key("tg", r, alg, Some(t), k),
                    format!("rule {r} {i} of {t}"),
                );
                let u = rule_usage_key("tg", r, alg, Some(t), k, "tokens");
                add(u, format!("rule usage {r} {i} of {t}"));
                let c = inflight_rule_key("tg", r, Some(t), k);
                add(c, format!("concurrency rule {r} {i} of {t}"));
            }
        }
    }
    for r in rules {
        for (i, k) in texts.iter().enumerate() {
            for alg in Algorithm::ALL {
                add(
                    rule_key("tg", r, alg, None, k),
                    format!("rule {r} {alg:?} {i}"),
                );
                let u = rule_usage_key("tg", r, alg, None, k, "tokens");
                add(u, format!("rule usage {r} {alg:?} {i}"));
            }
            add(
                inflight_rule_key("tg", r, None, k),
                format!("concurrency rule {r} {i}"),
            );
        }
    }
    for tier in tiers {
        add(pool_key("tg", tier), format!("pool {tier}"));
    }
    add(fleet_members_key("tg"), "fleet".into());
    // The findings this guards against, spelled out.
    assert_ne!(bucket_key("tg", "pool:free"), pool_key("tg", "free"));
    assert_eq!(bucket_key("tg", "pool:free"), "tg:{pool%3Afree}:tb");
    assert_eq!(bucket_key("tg", "ip:127.0.0.1"), "tg:{ip%3A127.0.0.1}:tb");
    assert_eq!(bucket_key("tg", "a%3Ab"), "tg:{a%253Ab}:tb");
}
