//! Changing a limit carries every algorithm's state over (docs/algorithms.md#changing-a-limit):
//! through a real gateway, a real `redis-server` and the echo backend, a tenant that spent its
//! burst stays refused after its limit changes, for all six algorithms, lowered or raised, by a
//! tier's numbers or by a `tenants:` override, and for calendar quotas; and the keys of a
//! lowered limit live as long as the new, slower refill needs.
//!
//! Margins: the "before" limits refill one token per minute or slower, so the few seconds the
//! test takes never refill a token; every assertion is on statuses and TTLs, never on a duration.

mod common;

use common::*;

/// The old TTL of a drained "lower" bucket (burst 3 at one token a minute): a key that still
/// expires within it was not rewritten for the new rate.
const OLD_FULL_MS: i64 = 180_000;

fn api_key(tenant: &str) -> String {
    format!("key-{tenant}-0123456789")
}

/// How a tenant's limit changes between the two configs.
#[derive(Clone, Copy, Debug)]
enum Change {
    /// The tier's numbers: `per: 60s` → `per: 1d`.
    TierLower,
    /// The tier's numbers: `per: 1d` → `per: 1h`.
    TierRaise,
    /// The tenant's `tenants:` override: `per: 60s` → `per: 1d`.
    OverrideLower,
    /// The tenant's `tenants:` override: `per: 1d` → `per: 1h`.
    OverrideRaise,
}

const CHANGES: [Change; 4] = [
    Change::TierLower,
    Change::TierRaise,
    Change::OverrideLower,
    Change::OverrideRaise,
];

impl Change {
    fn tag(self) -> &'static str {
        match self {
            Change::TierLower => "tl",
            Change::TierRaise => "tr",
            Change::OverrideLower => "ol",
            Change::OverrideRaise => "or",
        }
    }

    /// The period before (`after = false`) and after the change.
    fn per(self, after: bool) -> &'static str {
        match (self, after) {
            (Change::TierLower | Change::OverrideLower, false) => "60s",
            (Change::TierLower | Change::OverrideLower, true) => "1d",
            (Change::TierRaise | Change::OverrideRaise, false) => "1d",
            (Change::TierRaise | Change::OverrideRaise, true) => "1h",
        }
    }

    fn lowers(self) -> bool {
        matches!(self, Change::TierLower | Change::OverrideLower)
    }
}

fn tenant(change: Change, alg: &str) -> String {
    format!("{}-{alg}", change.tag())
}

/// One tier per (change, algorithm) and one tenant in each; `after` selects the changed config.
/// Override tenants sit in a tier of `per: 1h` and carry the period as a `tenants:` override.
/// One more tenant, `quota`, has a monthly quota of 5 lowered to 2.
fn config(redis: &RedisServer, backend: &Backend, after: bool) -> String {
    let mut c = GatewayConfig::echo(&backend.addr(), "required")
        .redis(&redis.url(), STRICT_REDIS)
        .api_keys_always();
    for change in CHANGES {
        for alg in ALGORITHMS {
            let name = tenant(change, alg);
            let tier = format!("T_{}_{alg}", change.tag());
            let per = match change {
                Change::TierLower | Change::TierRaise => change.per(after),
                Change::OverrideLower | Change::OverrideRaise => {
                    c = c.tenant(&name, &format!("{{ per: {} }}", change.per(after)));
                    "1h"
                }
            };
            c = c
                .tier(
                    &tier,
                    &format!("{{ limit: 1, per: {per}, burst: 3, algorithm: {alg} }}"),
                )
                .api_key(&api_key(&name), &name, &tier);
        }
    }
    let quota = if after { 2 } else { 5 };
    c.tier(
        "Q",
        &format!(
            "{{ limit: 100, per: 1s, burst: 100, quotas: [{{ limit: {quota}, period: month }}] }}"
        ),
    )
    .api_key(&api_key("quota"), "quota", "Q")
    .yaml()
}

async fn status(http: &reqwest::Client, gw: &Gateway, tenant: &str) -> u16 {
    http.get(gw.url("/"))
        .header("x-api-key", api_key(tenant))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET as {tenant}: {e}"))
        .status()
        .as_u16()
}

/// Every algorithm × (lower, raise) × (tier numbers, `tenants:` override), and a quota: a tenant
/// that spent its burst (3 admitted, the 4th refused) is refused three times in a row after
/// the reload. A lowered limit's keys (but the fixed window's, which end with the current
/// window) outlive the old limit's time to refill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_limit_never_hands_a_drained_tenant_a_fresh_burst() {
    let redis = RedisServer::start();
    let backend = Backend::start("echo");
    let gw = Gateway::start(&config(&redis, &backend, false));
    let http = client();

    let mut tenants: Vec<(Option<Change>, String)> = vec![];
    for change in CHANGES {
        for alg in ALGORITHMS {
            tenants.push((Some(change), tenant(change, alg)));
        }
    }
    for (_, t) in &tenants {
        let mut s = vec![];
        for _ in 0..4 {
            s.push(status(&http, &gw, t).await);
        }
        assert_eq!(s, [200, 200, 200, 429], "{t} before the change");
    }
    let mut q = vec![];
    for _ in 0..3 {
        q.push(status(&http, &gw, "quota").await);
    }
    assert_eq!(q, [200, 200, 200], "quota before the change");

    gw.reload_ok(&config(&redis, &backend, true)).await;

    let mut minted = vec![];
    for (change, t) in &tenants {
        let mut s = vec![];
        for _ in 0..3 {
            s.push(status(&http, &gw, t).await);
        }
        if s != [429, 429, 429] {
            minted.push(format!("{t}: {s:?}"));
        }
        let change = change.expect("a change");
        if change.lowers() && !t.ends_with("fixed_window") {
            for key in redis.keys(&format!("*{{{t}}}*")) {
                let pttl = redis.pttl(&key);
                if pttl <= OLD_FULL_MS {
                    minted.push(format!("{t}: key {key} expires in {pttl} ms"));
                }
            }
        }
    }
    if status(&http, &gw, "quota").await != 429 {
        minted.push("quota: admitted over a lowered quota".into());
    }
    assert!(
        minted.is_empty(),
        "drained tenants got tokens back after the change:\n{}",
        minted.join("\n")
    );
}
