use super::*;

fn find<'a>(kv: &'a [KeyValue], key: &str) -> Option<&'a opentelemetry::Value> {
    kv.iter().find(|k| k.key.as_str() == key).map(|k| &k.value)
}

#[test]
fn a_refusal_names_its_layer_policy_and_tier() {
    let f = SpanFacts {
        method: "GET",
        route: Some(("/api", "api")),
        status: 429,
        client: Some("10.0.0.7".parse().unwrap()),
        decision: Some(Outcome::Limited),
        refused_by: Some(Layer::Tenant),
        policy: Some("free"),
        tenant: Some("acme"),
        tier: Some("free"),
        redis: RedisUse {
            calls: 1,
            coalesced: false,
        },
        ..SpanFacts::default()
    };
    let kv = attributes(&f, true);
    assert_eq!(find(&kv, "tollgate.decision").unwrap().as_str(), "limited");
    assert_eq!(find(&kv, "tollgate.refused_by").unwrap().as_str(), "tenant");
    assert_eq!(find(&kv, "tollgate.policy").unwrap().as_str(), "free");
    assert_eq!(find(&kv, "tollgate.tenant").unwrap().as_str(), "acme");
    assert_eq!(find(&kv, "tollgate.tier").unwrap().as_str(), "free");
    assert_eq!(find(&kv, "http.route").unwrap().as_str(), "/api");
    assert_eq!(find(&kv, "client.address").unwrap().as_str(), "10.0.0.7");
    assert_eq!(
        find(&kv, "http.response.status_code"),
        Some(&opentelemetry::Value::I64(429))
    );
    assert_eq!(
        find(&kv, "tollgate.redis_calls"),
        Some(&opentelemetry::Value::I64(1))
    );
    assert!(find(&kv, "tollgate.failure_policy").is_none());
    assert_eq!(span_name(&f), "GET /api");
}

#[test]
fn the_tenant_can_be_left_out() {
    let f = SpanFacts {
        method: "GET",
        tenant: Some("acme"),
        ..SpanFacts::default()
    };
    assert!(find(&attributes(&f, false), "tollgate.tenant").is_none());
    assert_eq!(span_name(&f), "GET");
}

#[test]
fn a_failure_policy_decision_names_the_policy() {
    let f = SpanFacts {
        method: "POST",
        decision: Some(Outcome::FailedOpen),
        ..SpanFacts::default()
    };
    let kv = attributes(&f, true);
    assert_eq!(
        find(&kv, "tollgate.failure_policy").unwrap().as_str(),
        "open"
    );
    assert!(find(&kv, "tollgate.refused_by").is_none());
    assert_eq!(failure_policy(Outcome::Fallback), Some("local"));
    assert_eq!(failure_policy(Outcome::FailedClosed), Some("closed"));
}

#[tokio::test]
async fn redis_calls_are_counted_only_inside_counted() {
    note_redis_call(true); // outside: ignored
    let ((), used) = counted(async {
        note_redis_call(true);
        tokio::task::yield_now().await;
        note_redis_call(true);
        note_redis_call(false);
    })
    .await;
    assert_eq!(
        used,
        RedisUse {
            calls: 2,
            coalesced: true
        }
    );
}
