//! Tier fit: does a tenant's tier still fit its traffic? Per tenant, the share of requests its
//! tier refused and the share of minutes spent at the limit, over the last hour and the last day,
//! kept in memory by each gateway instance (docs/observability.md#tier-fit).
//!
//! A minute is "at the limit" when a request in it was refused or left a policy with 0 tokens.
//! Refusals are counted from the tenant decision (main limit and calendar quotas); a request the
//! tier's burst pool then admitted still counts as refused by the tier.
//!
//! Bounded: per tenant 60 minute buckets and 24 hour buckets (a fixed ~1.4 KB), at most
//! [`MAX_TENANTS`] tenants, least recently seen evicted first. Anonymous clients (`ip:` tenants)
//! are not tracked. Pure code: the caller passes the clock (Unix ms).

use crate::store::memory::sharded::ShardedLru;
use crate::tenant_id::ANONYMOUS_PREFIX;
use once_cell::sync::Lazy;
use prometheus::{register_gauge_vec, GaugeVec};
use serde::Serialize;

/// Tenants tracked at most per instance (least recently seen evicted beyond).
pub const MAX_TENANTS: usize = 10_000;
const MINUTE_MS: u64 = 60_000;

#[derive(Debug, Clone, Copy, Default)]
struct MinuteBucket {
    /// Minutes since the Unix epoch this bucket counts (0: unused).
    minute: u64,
    requests: u32,
    refused: u32,
    at_limit: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct HourBucket {
    /// Hours since the Unix epoch (0: unused).
    hour: u64,
    requests: u32,
    refused: u32,
    minutes_at_limit: u16,
}

/// One tenant's buckets, and the tier it was last decided with.
#[derive(Debug, Clone)]
struct TenantFit {
    minutes: [MinuteBucket; 60],
    hours: [HourBucket; 24],
    tier: String,
}

impl TenantFit {
    fn new(tier: &str) -> Self {
        TenantFit {
            minutes: [MinuteBucket::default(); 60],
            hours: [HourBucket::default(); 24],
            tier: tier.to_string(),
        }
    }

    fn record(&mut self, refused: bool, at_limit: bool, now_ms: u64) {
        let minute = now_ms / MINUTE_MS;
        let hour = minute / 60;
        let m = &mut self.minutes[(minute % 60) as usize];
        if m.minute != minute {
            *m = MinuteBucket {
                minute,
                ..MinuteBucket::default()
            };
        }
        let h = &mut self.hours[(hour % 24) as usize];
        if h.hour != hour {
            *h = HourBucket {
                hour,
                ..HourBucket::default()
            };
        }
        m.requests = m.requests.saturating_add(1);
        h.requests = h.requests.saturating_add(1);
        if refused {
            m.refused = m.refused.saturating_add(1);
            h.refused = h.refused.saturating_add(1);
        }
        if at_limit && !m.at_limit {
            m.at_limit = true;
            h.minutes_at_limit = h.minutes_at_limit.saturating_add(1);
        }
    }

    fn report(&self, now_ms: u64) -> FitReport {
        let minute = now_ms / MINUTE_MS;
        let hour = minute / 60;
        let mut last_hour = Counts::default();
        for m in self.minutes.iter().filter(|m| m.minute + 60 > minute) {
            last_hour.add(m.requests, m.refused, u32::from(m.at_limit));
        }
        let mut last_day = Counts::default();
        for h in self.hours.iter().filter(|h| h.hour + 24 > hour) {
            last_day.add(h.requests, h.refused, u32::from(h.minutes_at_limit));
        }
        FitReport {
            hour: last_hour.window(60),
            day: last_day.window(24 * 60),
        }
    }

    fn last_minute(&self) -> u64 {
        self.minutes.iter().map(|m| m.minute).max().unwrap_or(0)
    }
}

#[derive(Debug, Default)]
struct Counts {
    requests: u64,
    refused: u64,
    minutes_at_limit: u64,
}

impl Counts {
    fn add(&mut self, requests: u32, refused: u32, minutes: u32) {
        self.requests += u64::from(requests);
        self.refused += u64::from(refused);
        self.minutes_at_limit += u64::from(minutes);
    }

    fn window(&self, minutes: u64) -> WindowFit {
        WindowFit {
            requests: self.requests,
            refused: self.refused,
            refused_share: if self.requests == 0 {
                0.0
            } else {
                self.refused as f64 / self.requests as f64
            },
            minutes_at_limit: self.minutes_at_limit,
            minutes_at_limit_share: self.minutes_at_limit as f64 / minutes as f64,
        }
    }
}

/// Fit over one window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct WindowFit {
    /// Tenant decisions taken by this instance in the window.
    pub requests: u64,
    /// Of which refused by the tier (main limit or a calendar quota).
    pub refused: u64,
    /// `refused / requests` (0 without requests), 0..=1.
    pub refused_share: f64,
    /// Minutes in the window in which a request was refused or left 0 tokens.
    pub minutes_at_limit: u64,
    /// `minutes_at_limit` / minutes in the window (60 or 1440), 0..=1.
    pub minutes_at_limit_share: f64,
}

/// Fit over the last hour (60 one-minute buckets, the current minute included) and the last
/// day (24 one-hour buckets, the current hour included).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct FitReport {
    pub hour: WindowFit,
    pub day: WindowFit,
}

static REFUSED_SHARE: Lazy<GaugeVec> = Lazy::new(|| {
    register_gauge_vec!(
        "tollgate_tenant_refused_share",
        "Share of a tenant's requests its tier refused, this instance, top tenants only (docs/observability.md#tier-fit)",
        &["tenant", "window"]
    )
    .expect("register tollgate_tenant_refused_share")
});

static MINUTES_AT_LIMIT_SHARE: Lazy<GaugeVec> = Lazy::new(|| {
    register_gauge_vec!(
        "tollgate_tenant_minutes_at_limit_share",
        "Share of the window's minutes a tenant spent at its limit, this instance, top tenants only",
        &["tenant", "window"]
    )
    .expect("register tollgate_tenant_minutes_at_limit_share")
});

/// The per-instance tier fit tracker.
pub struct TierFit {
    shards: ShardedLru<String, TenantFit>,
}

impl Default for TierFit {
    fn default() -> Self {
        Self::new(MAX_TENANTS)
    }
}

impl TierFit {
    /// A tracker of at most about `max_tenants` tenants.
    pub fn new(max_tenants: usize) -> Self {
        TierFit {
            shards: ShardedLru::new(max_tenants),
        }
    }

    /// Records one tenant decision by `tier` at Unix time `now_ms`: `admitted` by every policy
    /// of the tier, and `at_limit` when refused or a policy was left with 0 tokens. The tier is
    /// remembered ([`Self::tier_of`]): a JWT's tier comes from its token, not from the config.
    pub fn record(&self, tenant: &str, tier: &str, admitted: bool, at_limit: bool, now_ms: u64) {
        if tenant.starts_with(ANONYMOUS_PREFIX) {
            return;
        }
        let mut shard = self.shards.shard(tenant).lock();
        if let Some(fit) = shard.get_mut(tenant) {
            fit.record(!admitted, at_limit || !admitted, now_ms);
            if fit.tier != tier {
                fit.tier = tier.to_string();
            }
            return;
        }
        let mut fit = TenantFit::new(tier);
        fit.record(!admitted, at_limit || !admitted, now_ms);
        shard.push(tenant.to_string(), fit);
    }

    /// The tier this instance last decided `tenant` with; `None` when it has not decided it
    /// since it started (or evicted it).
    pub fn tier_of(&self, tenant: &str) -> Option<String> {
        let mut shard = self.shards.shard(tenant).lock();
        shard.get_mut(tenant).map(|f| f.tier.clone())
    }

    /// The fit of `tenant` at `now_ms`; `None` when this instance has not seen it (or evicted it).
    pub fn report(&self, tenant: &str, now_ms: u64) -> Option<FitReport> {
        let mut shard = self.shards.shard(tenant).lock();
        shard.get_mut(tenant).map(|f| f.report(now_ms))
    }

    /// Every tracked tenant seen in the last day, with its fit at `now_ms`.
    pub fn all(&self, now_ms: u64) -> Vec<(String, FitReport)> {
        let day_ago = (now_ms / MINUTE_MS).saturating_sub(24 * 60);
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            for (tenant, fit) in shard.drain_lru_first() {
                if fit.last_minute() > day_ago {
                    out.push((tenant.clone(), fit.report(now_ms)));
                }
                shard.push(tenant, fit);
            }
        }
        out
    }

    /// Sets the fit gauges to the `n` tenants with the highest refused share of each window
    /// (ties: more requests first); every other series is removed (all of them when `n` is 0:
    /// tenant ids are labels only with `observability.tenant_metrics > 0`).
    pub fn export_metrics(&self, n: usize, now_ms: u64) {
        let all = self.all(now_ms);
        REFUSED_SHARE.reset();
        MINUTES_AT_LIMIT_SHARE.reset();
        for (window, pick) in [
            (
                "hour",
                (|r: &FitReport| r.hour) as fn(&FitReport) -> WindowFit,
            ),
            ("day", |r: &FitReport| r.day),
        ] {
            for (tenant, fit) in top_n(&all, n, pick) {
                REFUSED_SHARE
                    .with_label_values(&[tenant, window])
                    .set(fit.refused_share);
                MINUTES_AT_LIMIT_SHARE
                    .with_label_values(&[tenant, window])
                    .set(fit.minutes_at_limit_share);
            }
        }
    }
}

/// The `n` tenants with requests in the window, highest refused share first (ties: more
/// requests, then tenant id).
fn top_n(
    all: &[(String, FitReport)],
    n: usize,
    pick: fn(&FitReport) -> WindowFit,
) -> Vec<(&str, WindowFit)> {
    let mut v: Vec<(&str, WindowFit)> = all
        .iter()
        .map(|(t, r)| (t.as_str(), pick(r)))
        .filter(|(_, w)| w.requests > 0)
        .collect();
    v.sort_by(|a, b| {
        b.1.refused_share
            .total_cmp(&a.1.refused_share)
            .then(b.1.requests.cmp(&a.1.requests))
            .then(a.0.cmp(b.0))
    });
    v.truncate(n);
    v
}

/// Unix time in ms (the clock [`TierFit`] is fed with in production).
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::sharded::SHARDS;

    const T0: u64 = 1_796_083_200_000; // 2026-12-01T00:00Z
    const MIN: u64 = 60_000;

    #[test]
    fn shares_over_the_hour_and_the_day() {
        let fit = TierFit::new(100);
        // Minute 0: 4 admitted, the last one emptying the bucket; 6 refused.
        for i in 0..4 {
            fit.record("acme", "T", true, i == 3, T0 + i * 100);
        }
        for _ in 0..6 {
            fit.record("acme", "T", false, true, T0 + 1_000);
        }
        // Minute 5: 10 admitted with room left.
        for _ in 0..10 {
            fit.record("acme", "T", true, false, T0 + 5 * MIN);
        }
        let r = fit.report("acme", T0 + 10 * MIN).unwrap();
        assert_eq!((r.hour.requests, r.hour.refused), (20, 6));
        assert_eq!(r.hour.refused_share, 0.3);
        assert_eq!(r.hour.minutes_at_limit, 1);
        assert_eq!(r.hour.minutes_at_limit_share, 1.0 / 60.0);
        assert_eq!(r.day.requests, 20);
        assert_eq!(r.day.minutes_at_limit_share, 1.0 / 1440.0);
        // An hour later the minute buckets have aged out; the day still counts them.
        let r = fit.report("acme", T0 + 66 * MIN).unwrap();
        assert_eq!(r.hour, WindowFit::default());
        assert_eq!((r.day.requests, r.day.refused), (20, 6));
        // A day later nothing is left.
        let r = fit.report("acme", T0 + 25 * 60 * MIN).unwrap();
        assert_eq!(r.day.requests, 0);
        assert!(fit.report("other", T0).is_none());
    }

    #[test]
    fn buckets_are_reused_not_summed_across_laps() {
        let fit = TierFit::new(100);
        fit.record("t", "T", false, true, T0);
        fit.record("t", "T", true, false, T0 + 60 * MIN); // same minute slot, an hour later
        let r = fit.report("t", T0 + 60 * MIN).unwrap();
        assert_eq!(
            (r.hour.requests, r.hour.refused, r.hour.minutes_at_limit),
            (1, 0, 0)
        );
        assert_eq!(
            (r.day.requests, r.day.refused, r.day.minutes_at_limit),
            (2, 1, 1)
        );
    }

    #[test]
    fn bounded_and_anonymous_clients_ignored() {
        let fit = TierFit::new(SHARDS);
        for i in 0..1_000 {
            fit.record(&format!("t{i}"), "T", true, false, T0);
        }
        assert!(fit.all(T0).len() <= SHARDS);
        fit.record("ip:10.0.0.1", "T", false, true, T0);
        assert!(fit.report("ip:10.0.0.1", T0).is_none());
    }

    #[test]
    fn top_n_orders_by_refused_share() {
        let fit = TierFit::new(100);
        fit.record("calm", "T", true, false, T0);
        fit.record("busy", "T", false, true, T0);
        fit.record("half", "T", true, false, T0);
        fit.record("half", "T", false, true, T0);
        let all = fit.all(T0);
        let top: Vec<&str> = top_n(&all, 2, |r| r.day).iter().map(|t| t.0).collect();
        assert_eq!(top, ["busy", "half"]);
    }
}
