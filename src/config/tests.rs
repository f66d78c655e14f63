use super::*;

/// The smallest valid config (one upstream, one route); tests append the section they check.
pub(super) const BASE: &str = r#"
listen: ["127.0.0.1:8080"]
upstreams:
  orders: { backends: ["127.0.0.1:9001"] }
routes:
  - { path_prefix: "/", upstream: orders }
"#;

fn errors(yaml: &str) -> Vec<String> {
    parse_errors(yaml)
}

#[test]
fn minimal_config_gets_defaults() {
    let c = parse(BASE).unwrap();
    assert_eq!(c.server.threads, 2);
    assert_eq!(c.server.grace_period_s, 10);
    assert_eq!(c.response.status, 429);
    assert_eq!(c.routes[0].cost, 1);
    assert_eq!(c.routes[0].auth, AuthMode::Optional);
    assert!(c.tiers.is_empty() && c.redis.is_none() && c.edge.is_none());
}

#[test]
fn fairness_fields_are_checked_by_path() {
    let yaml = BASE.replace(
        "orders: { backends: [\"127.0.0.1:9001\"] }",
        "orders: { backends: [\"127.0.0.1:9001\"], max_concurrency_per_tenant: 2, \
         queue: { max: 4, timeout_ms: 10, fair: true, max_per_tenant: 5 } }",
    ) + "redis: { url: \"redis://127.0.0.1:6379\" }\ntiers:\n  pro: { limit: 1, per: 1s, weight: 0, pool: { limit: 5, per: 1s, max_share: 1.5 } }\n  team: { limit: 1, per: 1s, pool: { limit: 0, per: 1s } }\n";
    let e = errors(&yaml);
    for want in [
        "tiers.pro.weight: must be between 1 and 1000 (got 0)",
        "upstreams.orders.queue: needs max_concurrency",
        "upstreams.orders.queue.max_per_tenant: must not exceed queue.max (4), got 5",
        "upstreams.orders.max_concurrency_per_tenant: needs max_concurrency",
        "tiers.pro.pool.max_share: must be greater than 0 and at most 1 (got 1.5)",
        "tiers.team.pool.limit: must be greater than zero (got 0)",
    ] {
        assert!(e.contains(&want.to_string()), "{want} not in {e:?}");
    }
    let ok = BASE.replace(
        "orders: { backends: [\"127.0.0.1:9001\"] }",
        "orders: { backends: [\"127.0.0.1:9001\"], max_concurrency: 4, \
         max_concurrency_per_tenant: 2, queue: { max: 4, timeout_ms: 10, fair: true } }",
    );
    let c = parse(&ok).expect("valid");
    let u = &c.upstreams["orders"];
    assert_eq!(u.max_concurrency_per_tenant, Some(2));
    let q = u.queue.as_ref().unwrap();
    assert!(q.fair);
    assert_eq!(q.max_per_tenant, 4, "defaults to queue.max");
}

#[test]
fn h2_upstreams_and_their_stream_limit() {
    let with = |fields: &str| {
        BASE.replace(
            "orders: { backends: [\"127.0.0.1:9001\"] }",
            &format!("orders: {{ backends: [\"127.0.0.1:9001\"], {fields} }}"),
        )
    };
    let c = parse(BASE).unwrap();
    assert_eq!(c.upstreams["orders"].h2, None, "HTTP/1.1 by default");
    let c = parse(&with("h2: true")).unwrap();
    assert_eq!(
        c.upstreams["orders"].h2,
        Some(H2Settings { max_streams: 100 })
    );
    let c = parse(&with("h2: true, h2_max_streams: 8")).unwrap();
    assert_eq!(
        c.upstreams["orders"].h2,
        Some(H2Settings { max_streams: 8 })
    );
    assert_eq!(
        errors(&with("h2_max_streams: 8")),
        ["upstreams.orders.h2_max_streams: needs h2: true"]
    );
    assert_eq!(
        errors(&with("h2: true, h2_max_streams: 1001")),
        ["upstreams.orders.h2_max_streams: must be at most 1000 (got 1001)"]
    );
}

#[test]
fn unknown_upstream_names_the_route() {
    let e = errors(&BASE.replace("upstream: orders", "upstream: ordrs"));
    assert_eq!(e, [r#"routes[0].upstream: no upstream named "ordrs""#]);
}

#[test]
fn unknown_key_is_an_error_with_its_path() {
    let e = errors(&format!(
        "{BASE}\nedge: {{ limit: 1, per: 1s, brust: 3 }}\n"
    ));
    assert_eq!(e.len(), 1);
    assert!(e[0].contains("brust"), "{e:?}");
    assert!(e[0].starts_with("edge"), "{e:?}");
}

#[test]
fn non_positive_numbers_and_bad_durations_are_each_reported() {
    let yaml = format!(
        "{BASE}\nredis: {{ url: \"redis://127.0.0.1:6379\", timeout_ms: 0 }}\ntiers:\n  free: {{ limit: -5, per: 5x }}\n"
    );
    let e = errors(&yaml);
    assert!(
        e.contains(&"redis.timeout_ms: must be greater than zero (got 0)".to_string()),
        "{e:?}"
    );
    assert!(
        e.contains(&"tiers.free.limit: must be greater than zero (got -5)".to_string()),
        "{e:?}"
    );
    assert!(
        e.iter().any(|m| m.starts_with("tiers.free.per: \"5x\"")),
        "{e:?}"
    );
}

#[test]
fn tenant_override_is_checked_merged_into_every_tier() {
    let yaml = format!(
        "{BASE}\nredis: {{ url: \"redis://h:1\" }}\ntiers:\n  fast: {{ limit: 10, per: 1s }}\n  slow: {{ limit: 1, per: 1d }}\ntenants:\n  t1: {{ tier: fast, burst: 100000000 }}\n"
    );
    // 1e8 tokens × 1 s is in range, but a tier claim can put t1 in `slow`: 1e8 × 1 d is not.
    let e = errors(&yaml);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].starts_with("tenants.t1.burst: burst × per is too large")
            && e[0].contains("tier \"slow\""),
        "{e:?}"
    );
    assert!(parse(&yaml.replace("100000000", "50000000")).is_ok());
    // A `per` override that makes a tier's own burst too large blames `per`.
    let per = yaml
        .replace("tier: fast, burst: 100000000", "per: 1d")
        .replace(
            "fast: { limit: 10, per: 1s }",
            "fast: { limit: 10, per: 1s, burst: 100000000 }",
        );
    let e = errors(&per);
    assert!(
        e.len() == 1 && e[0].starts_with("tenants.t1.per: "),
        "{e:?}"
    );
}

#[test]
fn missing_fields_are_reported_at_their_path() {
    assert_eq!(
        errors("upstreams: {}\nroutes: []\n"),
        ["listen: is required"]
    );
    let e = errors(&BASE.replace("upstream: orders }", "}"));
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with("routes[0].upstream: is required"), "{e:?}");
}

#[test]
fn yaml_syntax_error_has_line_and_column() {
    let e = errors("listen: [\n  - oops: :\n");
    assert_eq!(e.len(), 1);
    assert!(e[0].contains("line"), "{e:?}");
}

#[test]
fn tiers_need_redis_and_references_must_exist() {
    let yaml = format!(
        "{BASE}\ntiers:\n  free: {{ limit: 5, per: 1m }}\nidentity: {{ default_tier: gold }}\n"
    );
    let e = errors(&yaml);
    assert!(
        e.contains(&"redis: is required when tiers are configured".to_string()),
        "{e:?}"
    );
    assert!(
        e.contains(&r#"identity.default_tier: no tier named "gold""#.to_string()),
        "{e:?}"
    );
}

#[test]
fn duplicate_yaml_keys_are_rejected() {
    let yaml = format!(
        "{BASE}\ntiers:\n  free: {{ limit: 5, per: 1m }}\n  free: {{ limit: 6, per: 1m }}\n"
    );
    assert!(!errors(&yaml).is_empty());
}

#[test]
fn route_cost_above_every_burst_is_rejected() {
    let yaml = format!(
        "{BASE}\nredis: {{ url: \"redis://h:1\" }}\ntiers:\n  a: {{ limit: 5, per: 1m, burst: 10 }}\n  b: {{ limit: 5, per: 1m, burst: 20 }}\n"
    );
    assert!(parse(&yaml.replace("upstream: orders }", "upstream: orders, cost: 20 }")).is_ok());
    assert_eq!(
        errors(&yaml.replace("upstream: orders }", "upstream: orders, cost: 21 }")),
        ["routes[0].cost: 21 exceeds the burst of every tier (largest 20): such requests could never be admitted"]
    );
}

#[test]
fn per_longer_than_a_day_is_rejected() {
    let yaml = format!(
        "{BASE}\nredis: {{ url: \"redis://h:1\" }}\ntiers:\n  t: {{ limit: 5, per: 2d }}\n"
    );
    assert_eq!(errors(&yaml), ["tiers.t.per: must be at most 1d"]);
}

#[test]
fn route_prefix_must_be_a_normalised_path() {
    let prefix = |p: &str| BASE.replace("path_prefix: \"/\"", &format!("path_prefix: \"{p}\""));
    assert_eq!(
        errors(&prefix("/a/../%61dmin//x")),
        ["routes[0].path_prefix: \"/a/../%61dmin//x\" is not a normalised path (requests are routed on normalised paths); write \"/admin/x\""]
    );
    assert_eq!(
        errors(&prefix("/a%2Fb")),
        ["routes[0].path_prefix: the path contains an encoded slash (%2F)"]
    );
    assert!(parse(&prefix("/a/b/")).is_ok());
    assert!(parse(&prefix("/a%3Fb")).is_ok());
    assert_eq!(
        errors(&prefix("/api;v=1")),
        ["routes[0].path_prefix: contains ';': routes match the path without its ; parameters, so this never matches"]
    );
}

#[test]
fn http_limits_defaults_and_field_paths() {
    let c = parse(BASE).unwrap();
    assert_eq!(c.server.http, HttpLimits::default());
    assert_eq!(c.server.http.max_header_bytes, 65_536);
    assert_eq!(c.server.http.max_headers, 100);
    assert_eq!(c.server.http.header_read_timeout.as_secs(), 10);
    assert_eq!(c.server.http.keepalive_timeout.as_secs(), 60);
    assert_eq!(c.routes[0].max_body_bytes, None);
    let yaml = format!(
        "{}server: {{ max_header_bytes: 600000, max_headers: 300, header_read_timeout: 0s, keepalive_timeout: soon }}\n",
        BASE.replace("upstream: orders }", "upstream: orders, max_body_bytes: 0 }")
    );
    let e = errors(&yaml);
    for want in [
        "server.max_header_bytes: must be at most 524288 (got 600000)",
        "server.max_headers: must be at most 256 (got 300)",
        "server.header_read_timeout: \"0s\" must be greater than zero",
        "routes[0].max_body_bytes: must be greater than zero (got 0)",
    ] {
        assert!(e.contains(&want.to_string()), "{want} not in {e:?}");
    }
    assert!(
        e.iter()
            .any(|m| m.starts_with("server.keepalive_timeout: ")),
        "{e:?}"
    );
    let ok = format!(
        "{}server: {{ max_header_bytes: 1024, max_headers: 5, header_read_timeout: 1500ms, keepalive_timeout: 5s }}\n",
        BASE.replace("upstream: orders }", "upstream: orders, max_body_bytes: 10 }")
    );
    let c = parse(&ok).unwrap();
    assert_eq!(c.server.http.max_headers, 5);
    assert_eq!(c.server.http.header_read_timeout.as_millis(), 1500);
    assert_eq!(c.routes[0].max_body_bytes, Some(10));
}

#[test]
fn api_keys_are_validated_once_into_digests_and_header_names() {
    let key = crate::identity::hash_key("acme-key");
    let yaml = format!(
        "{BASE}identity:\n  tenant_header: \"X-Tenant\"\n  api_keys:\n    header: \"X-Key\"\n    keys:\n      - {{ sha256: \"{}\", tenant: acme }}\n",
        key.to_ascii_uppercase()
    );
    let c = parse(&yaml).unwrap();
    let keys = c.identity.api_keys.unwrap();
    assert_eq!(keys.header.as_str(), "x-key");
    assert_eq!(
        keys.keys[0].sha256,
        crate::identity::api_key::key_digest("acme-key")
    );
    assert_eq!(c.identity.tenant_header.as_str(), "x-tenant");
    assert_eq!(c.identity.tier_header.as_str(), "x-tollgate-tier");
    let bad = format!(
        "{BASE}identity:\n  tier_header: \"bad header\"\n  api_keys:\n    keys:\n      - {{ sha256: \"xyz\", tenant: a }}\n      - {{ sha256: \"{key}\", tenant: b }}\n      - {{ sha256: \"{key}\", tenant: c }}\n"
    );
    assert_eq!(
        errors(&bad),
        [
            "identity.tier_header: \"bad header\" is not a valid header name",
            "identity.api_keys.keys[0].sha256: must be 64 hex digits (the SHA-256 of the key; see `tollgate hash-key`)",
            "identity.api_keys.keys[2].sha256: duplicate key digest",
        ]
    );
}

#[test]
fn jwt_needs_at_least_one_key() {
    let yaml = format!("{BASE}identity:\n  jwt:\n    keys: []\n");
    assert_eq!(
        errors(&yaml),
        ["identity.jwt.keys: needs at least one key (or `issuers`)"]
    );
}

#[test]
fn jwks_issuers_get_defaults_and_inherit_the_claims() {
    let yaml = format!(
        "{BASE}identity:\n  jwt:\n    tenant_claim: org\n    issuers:\n      \
         - {{ issuer: \"https://idp.example/\", discovery: true }}\n      \
         - {{ issuer: \"http://127.0.0.1:8000\", jwks_url: \"http://localhost:8000/keys\", \
         tenant_claim: team, refresh: {{ min: 1s, max: 2s }}, stale_for: 2s }}\n"
    );
    let c = parse(&yaml).unwrap();
    let jwt = c.identity.jwt.unwrap();
    assert!(jwt.keys.is_empty());
    let (a, b) = (&jwt.issuers[0], &jwt.issuers[1]);
    assert_eq!(a.source, JwksSource::Discovery);
    assert_eq!(a.tenant_claim, "org");
    assert_eq!(
        (a.refresh_min, a.refresh_max, a.unknown_kid_refetch),
        (
            std::time::Duration::from_secs(300),
            std::time::Duration::from_secs(3600),
            std::time::Duration::from_secs(10)
        )
    );
    assert_eq!(a.stale_for, std::time::Duration::from_secs(86400));
    assert_eq!(
        b.source,
        JwksSource::Url("http://localhost:8000/keys".into())
    );
    assert_eq!(b.tenant_claim, "team");
}

#[test]
fn jwks_issuer_mistakes_are_reported_by_path() {
    let issuers = [
        "{ issuer: \"http://idp.example\", discovery: true }",
        "{ issuer: \"https://a.example\" }",
        "{ issuer: \"https://b.example\", discovery: true, jwks_url: \"https://b.example/k\" }",
        "{ issuer: \"https://c.example\", jwks_url: \"ftp://c.example/k\" }",
        "{ issuer: \"https://d.example\", discovery: true, refresh: { min: 2h, max: 1h } }",
        "{ issuer: \"https://e.example\", discovery: true, stale_for: 1m }",
        "{ issuer: \"https://f.example\", discovery: true, unknown_kid_refetch: 0s, fetch_timeout: 1m }",
        "{ issuer: \"https://f.example\", discovery: true }",
    ];
    let list: Vec<String> = issuers.iter().map(|i| format!("      - {i}\n")).collect();
    let yaml = format!("{BASE}identity:\n  jwt:\n    issuers:\n{}", list.concat());
    let got = errors(&yaml);
    let expect = [
        "identity.jwt.issuers[0].issuer: \"http://idp.example\": plain http is accepted only for loopback hosts; use https",
        "identity.jwt.issuers[1]: needs `discovery: true` or a `jwks_url`",
        "identity.jwt.issuers[2]: set either `discovery: true` or `jwks_url`, not both",
        "identity.jwt.issuers[3].jwks_url: \"ftp://c.example/k\" must be an https URL",
        "identity.jwt.issuers[4].refresh: min must not be greater than max",
        "identity.jwt.issuers[5].stale_for: must be at least refresh.max (a key set must outlive one refresh)",
        "identity.jwt.issuers[6].unknown_kid_refetch: \"0s\" must be greater than zero",
        "identity.jwt.issuers[6].fetch_timeout: must be at most 30s",
        "identity.jwt.issuers[7].issuer: duplicate issuer \"https://f.example\"",
    ];
    for e in expect {
        assert!(got.iter().any(|g| g == e), "missing {e:?} in {got:#?}");
    }
}

#[test]
fn a_tenant_override_period_over_a_day_is_refused_even_without_tiers() {
    let yaml = format!("{BASE}tenants:\n  t1: {{ per: 2d }}\n");
    assert_eq!(errors(&yaml), ["tenants.t1.per: must be at most 1d"]);
}

#[test]
fn mode_is_enforce_by_default_shadow_on_request_and_checked() {
    let c = parse(BASE).unwrap();
    assert_eq!(c.routes[0].mode, Mode::Enforce);
    let yaml = format!(
        "{BASE}redis: {{ url: \"redis://h:1\" }}\nedge: {{ limit: 1, per: 1s, mode: shadow }}\ntiers:\n  t: {{ limit: 1, per: 1s, mode: shadow }}\n"
    )
    .replace("upstream: orders }", "upstream: orders, mode: shadow }");
    let c = parse(&yaml).unwrap();
    assert_eq!(c.edge.unwrap().mode, Mode::Shadow);
    assert_eq!(c.tiers["t"].mode, Mode::Shadow);
    assert_eq!(c.routes[0].mode, Mode::Shadow);
    assert_eq!(
        errors(&yaml.replace("shadow", "dry_run")),
        [
            "edge.mode: \"dry_run\" is not a mode (enforce, shadow)",
            "tiers.t.mode: \"dry_run\" is not a mode (enforce, shadow)",
            "routes[0].mode: \"dry_run\" is not a mode (enforce, shadow)",
        ]
    );
}

#[test]
fn tier_names_must_be_header_safe() {
    let long = "t".repeat(65);
    for (name, path) in [
        ("\"a\\r\\nX-Evil: 1\"", r#"tiers["a\r\nX-Evil: 1"]"#),
        ("'ti\"ght'", r#"tiers["ti\"ght"]"#),
        ("\"\"", r#"tiers[""]"#),
        ("\"a b\"", r#"tiers["a b"]"#),
        ("a.day", "tiers.a.day"),
        ("\"{p}\"", r#"tiers["{p}"]"#),
        ("\"zürich\"", r#"tiers["zürich"]"#),
        (long.as_str(), &*format!("tiers.{long}")),
    ] {
        let yaml = format!(
            "{BASE}redis: {{ url: \"redis://127.0.0.1:6379\" }}\ntiers:\n  {name}: {{ limit: 1, per: 1s }}\n"
        );
        let want = format!(
            "{path}: a tier name is 1 to 64 letters, digits, '-' and '_' \
             (it is sent in RateLimit headers and X-Tollgate-Tier)"
        );
        let e = errors(&yaml);
        assert!(e.contains(&want), "{want} not in {e:?}");
    }
    let ok = format!(
        "{BASE}redis: {{ url: \"redis://127.0.0.1:6379\" }}\ntiers:\n  Pro_2-eu_west: {{ limit: 1, per: 1s }}\n  {}: {{ limit: 1, per: 1s }}\n",
        "t".repeat(64)
    );
    parse(&ok).expect("valid tier names");
}

#[test]
fn redis_timeout_is_bounded() {
    let yaml = |ms: &str| {
        format!("{BASE}redis: {{ url: \"redis://127.0.0.1:6379\", timeout_ms: {ms} }}\n")
    };
    assert_eq!(
        errors(&yaml("99999999999")),
        ["redis.timeout_ms: must be at most 60000 (got 99999999999)"]
    );
    assert_eq!(
        errors(&yaml("60001")),
        ["redis.timeout_ms: must be at most 60000 (got 60001)"]
    );
    let c = parse(&yaml("60000")).expect("the bound itself is valid");
    assert_eq!(c.redis.unwrap().timeout, std::time::Duration::from_secs(60));
}

#[test]
fn route_host_must_be_matchable() {
    let host = |h: &str| BASE.replace("{ path_prefix", &format!("{{ host: \"{h}\", path_prefix"));
    assert_eq!(
        errors(&host("admin.local:80")),
        ["routes[0].host: \"admin.local:80\" never matches a request: has a port: requests are routed on the host without its port; write \"admin.local\""]
    );
    assert_eq!(
        errors(&host("*.*.local")),
        ["routes[0].host: \"*.*.local\" never matches a request: a wildcard is only allowed as the whole first label (\"*.example.com\")"]
    );
    let c = parse(&host("*.Example.com")).unwrap();
    assert_eq!(c.routes[0].host, HostMatch::Suffix(".example.com".into()));
}

/// IPv4-mapped IPv6 networks in `trusted_proxies` and `exempt` are held as the IPv4 networks they
/// map: peers are normalised to IPv4 before matching, so the mapped form never matched.
#[test]
fn ipv4_mapped_cidrs_are_held_as_ipv4() {
    let c = parse(&format!(
        "{BASE}edge: {{ limit: 1, per: 1s, trusted_proxies: [\"::ffff:127.0.0.1\", \
         \"::ffff:10.0.0.0/104\", \"2001:db8::/32\"], exempt: [\"::ffff:192.0.2.0/120\"] }}\n"
    ))
    .unwrap();
    let edge = c.edge.unwrap();
    let trusted: Vec<String> = edge.trusted_proxies.iter().map(|n| n.to_string()).collect();
    assert_eq!(trusted, ["127.0.0.1/32", "10.0.0.0/8", "2001:db8::/32"]);
    assert_eq!(edge.exempt[0].to_string(), "192.0.2.0/24");
}

/// A field name holding backticks is still reported at its path, not as a pathless error.
#[test]
fn unknown_field_named_with_backticks_has_its_path() {
    let e = parse_errors("\"`\"(:");
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with("`: unknown field ```"), "{e:?}");
    let e = parse_errors(&format!(
        "{BASE}\nedge: {{ limit: 1, per: 1s, \"a`b\": 3 }}\n"
    ));
    assert!(
        e.iter().any(|e| e.starts_with("edge.a`b: unknown field")),
        "{e:?}"
    );
}

#[test]
fn route_names_label_routes_and_are_unique_and_plain() {
    let routes =
        |lines: &str| BASE.replace("  - { path_prefix: \"/\", upstream: orders }\n", lines);
    let c = parse(&routes(
        "  - { name: orders-api, path_prefix: \"/o\", upstream: orders }\n  - { path_prefix: \"/\", upstream: orders }\n",
    ))
    .unwrap();
    assert_eq!(
        (c.routes[0].id.as_str(), c.routes[0].field.as_str()),
        ("orders-api", "routes[0]")
    );
    assert_eq!(c.routes[1].id, "routes[1]", "the index without a name");
    assert_eq!(
        errors(&routes(
            "  - { name: a, path_prefix: \"/a\", upstream: orders }\n  - { name: a, path_prefix: \"/\", upstream: orders }\n  - { name: \"a b\", path_prefix: \"/c\", upstream: orders }\n  - { name: none, path_prefix: \"/d\", upstream: orders }\n"
        )),
        [
            "routes[1].name: \"a\" is already the name of routes[0]: route names are unique",
            "routes[2].name: \"a b\": a route name is 1 to 64 letters, digits, '.', '_' or '-'",
            "routes[3].name: \"none\" is the label of requests no route matched: choose another name",
        ]
    );
}

#[test]
fn every_duration_takes_the_unit_form_and_the_old_names_stay_aliases() {
    let upstream = |fields: &str| {
        BASE.replace(
            "orders: { backends: [\"127.0.0.1:9001\"] }",
            &format!("orders: {{ backends: [\"127.0.0.1:9001\"], {fields} }}"),
        )
    };
    let new = upstream(
        "max_concurrency: 2, queue: { max: 4, timeout: 300ms }, retry_after: 2s, \
         connect_timeout: 1500ms, read_timeout: 1m, health_check: { interval: 3s }",
    ) + "server: { grace_period: 20s, graceful_shutdown_timeout: 7s }\n\
         redis: { url: \"redis://127.0.0.1:6379\", timeout: 80ms, circuit_breaker: { window: 20s, break: 2s } }\n\
         identity: { jwt: { leeway: 45s, keys: [{ algorithm: HS256, secret_env: X }] } }\n";
    let old = upstream(
        "max_concurrency: 2, queue: { max: 4, timeout_ms: 300 }, retry_after_s: 2, \
         connect_timeout_ms: 1500, read_timeout_ms: 60000, health_check: { interval_s: 3 }",
    ) + "server: { grace_period_s: 20, graceful_shutdown_timeout_s: 7 }\n\
         redis: { url: \"redis://127.0.0.1:6379\", timeout_ms: 80, circuit_breaker: { window_s: 20, break_s: 2 } }\n\
         identity: { jwt: { leeway_s: 45, keys: [{ algorithm: HS256, secret_env: X }] } }\n";
    let (a, b) = (parse(&new).unwrap(), parse(&old).unwrap());
    assert_eq!(
        (&a.upstreams, &a.server, &a.redis, &a.identity),
        (&b.upstreams, &b.server, &b.redis, &b.identity)
    );
    let u = &a.upstreams["orders"];
    assert_eq!(
        u.queue.as_ref().unwrap().timeout,
        std::time::Duration::from_millis(300)
    );
    assert_eq!((u.retry_after_s, a.server.grace_period_s), (2, 20));
    assert!(a.old_spellings.is_empty());
    let spelled: Vec<String> = b.old_spellings.iter().map(|e| e.to_string()).collect();
    assert_eq!(spelled.len(), 11, "{spelled:?}");
    assert!(spelled.contains(
        &"upstreams.orders.queue.timeout_ms: an old spelling, still read: write timeout: 300ms \
          (every duration takes a unit: ms, s, m, h, d)"
            .to_string()
    ));
    assert!(crate::config::warnings::warnings(&b).len() >= 11);
    assert_eq!(
        errors(&upstream("max_concurrency: 2, queue: { max: 4, timeout: 300ms, timeout_ms: 300 }, retry_after: 1500ms")),
        [
            "upstreams.orders.queue.timeout: set either timeout or its old spelling timeout_ms, not both",
            "upstreams.orders.retry_after: \"1500ms\" is not a whole number of seconds",
        ]
    );
}

#[test]
fn server_threads_and_drain_times_are_bounded() {
    let yaml = |fields: &str| format!("{BASE}server: {{ {fields} }}\n");
    assert_eq!(
        errors(&yaml("threads: 99999999999")),
        ["server.threads: must be at most 1024 (got 99999999999)"]
    );
    assert_eq!(
        errors(&yaml("grace_period: 2d")),
        ["server.grace_period: must be at most 86400 (got 172800)"]
    );
    assert_eq!(
        errors(&yaml("graceful_shutdown_timeout_s: 86401")),
        ["server.graceful_shutdown_timeout_s: must be at most 86400 (got 86401)"]
    );
    let c =
        parse(&yaml("threads: 1024, grace_period: 1d")).expect("the bounds themselves are valid");
    assert_eq!((c.server.threads, c.server.grace_period_s), (1024, 86_400));
}
