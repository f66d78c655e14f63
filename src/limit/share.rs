//! Pure arithmetic of regional budgets: static shares, demand-proportional shares with a floor,
//! and their application to a [`Rate`]. No I/O, no clock.
//!
//! All divisions round down on exact integers (u128 intermediates), and every cut value is at
//! least 1 token, so a region can always admit a request of cost 1 eventually. That "at least
//! 1" is the only way the regions' parts can add up to more than the whole: by at most one token
//! of limit and one of burst per region.

use crate::limit::{bounds, Rate};
use std::collections::BTreeMap;

/// Parts per million: the denominator of demand-proportional shares.
pub const PPM: u64 = 1_000_000;

/// The fraction `num / den` (0 < num ≤ den) of a tenant's budget that one region enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    pub num: u64,
    pub den: u64,
}

impl Share {
    /// The whole budget (no multi-region split).
    pub const WHOLE: Share = Share { num: 1, den: 1 };

    /// `floor(value × num / den)`, at least 1.
    pub fn of(&self, value: u64) -> u64 {
        let cut = value as u128 * self.num as u128 / self.den.max(1) as u128;
        u64::try_from(cut).unwrap_or(u64::MAX).max(1)
    }

    /// `rate` with its refill rate and burst cut to this share. The burst is
    /// `floor(burst × num / den)`, at least 1. The refill keeps sub-token precision: limit and
    /// period are first scaled by the largest of 1000, 100, 10 for which the cut rate still
    /// passes [`bounds::check`] (`limit × k` per `per_ms × k` is the same rate), then the limit is
    /// cut (round down, at least 1). So 18.67 tokens/s stays 18 670 per 1000 s instead of
    /// falling to 18 per second.
    pub fn apply(&self, rate: Rate) -> Rate {
        let burst = self.of(rate.burst);
        for k in [1000u64, 100, 10] {
            let (Some(limit), Some(per_ms)) =
                (rate.limit.checked_mul(k), rate.per_ms.checked_mul(k))
            else {
                continue;
            };
            let cut = Rate {
                limit: self.of(limit),
                per_ms,
                burst,
            };
            if bounds::check(&cut).is_ok() {
                return cut;
            }
        }
        Rate {
            limit: self.of(rate.limit),
            per_ms: rate.per_ms,
            burst,
        }
    }

    /// The share in parts per million, rounded down (for logs and metrics).
    pub fn ppm(&self) -> u64 {
        (self.num as u128 * PPM as u128 / self.den.max(1) as u128) as u64
    }
}

/// The static share of `region`: `shares[region] / Σ shares` (`None` if `region` is unknown).
pub fn static_share(shares: &BTreeMap<String, u64>, region: &str) -> Option<Share> {
    let num = *shares.get(region)?;
    Some(Share {
        num,
        den: shares.values().sum::<u64>().max(1),
    })
}

/// The floor every region keeps of a synced tenant's budget, in ppm: `1 / (10 × regions)`, so
/// all floors together hold 10% of the budget and an idle region can still serve a first
/// request (together with the "at least 1 token" of [`Share::of`]).
pub fn floor_ppm(regions: u64) -> u64 {
    PPM / (10 * regions.max(1))
}

/// The share of a region whose recent demand is `here` out of `total` (all regions, this one
/// included) when `regions` regions take part: `floor + (1 − regions × floor) × here / total`.
/// The shares of all regions computed from the same demands add up to at most the whole.
/// `None` when nobody asked for anything (the caller falls back to the static split).
pub fn demand_share(here: u64, total: u64, regions: u64) -> Option<Share> {
    if total == 0 {
        return None;
    }
    let here = here.min(total);
    let floor = floor_ppm(regions);
    let spread = PPM - floor * regions.max(1);
    let part = (spread as u128 * here as u128 / total as u128) as u64;
    Some(Share {
        num: floor + part,
        den: PPM,
    })
}

#[cfg(test)]
mod tests;
