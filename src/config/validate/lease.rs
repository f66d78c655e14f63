//! Validation of `tiers.<name>.lease` (docs/DESIGN.md 4c "Lease").

use super::common::Check;
use crate::config::raw::RawLease;
use crate::config::LeaseSettings;
use crate::limit::algorithm::Algorithm;
use crate::limit::calendar::CalendarQuota;
use crate::limit::Rate;

/// Longest `max_hold`: leased tokens are out of the shared bucket while held.
pub(super) const MAX_HOLD_MS: u64 = 60_000;

/// The lease of tier `path`: `tokens` in 1..=burst, `max_hold` in 1ms..=1m, and only on a
/// `token_bucket` tier without calendar quotas (a lease is a batch of bucket tokens; the other
/// algorithms and the quotas are decided per request in one script). Errors name the field.
pub(super) fn lease_settings(
    c: &mut Check,
    path: &str,
    raw: &RawLease,
    algorithm: Algorithm,
    quotas: &[CalendarQuota],
    rate: Option<&Rate>,
) -> Option<LeaseSettings> {
    let lpath = format!("{path}.lease");
    if algorithm != Algorithm::TokenBucket {
        c.err(
            &lpath,
            format!(
                "only applies to algorithm token_bucket (this tier uses {})",
                algorithm.as_str()
            ),
        );
        return None;
    }
    if !quotas.is_empty() {
        c.err(
            &lpath,
            "cannot be combined with quotas (they are debited per request)",
        );
        return None;
    }
    let tokens = c.positive(&format!("{lpath}.tokens"), raw.tokens)?;
    if let Some(rate) = rate {
        if tokens > rate.burst {
            c.err(
                format!("{lpath}.tokens"),
                format!(
                    "must be at most the tier's burst ({}; got {tokens})",
                    rate.burst
                ),
            );
            return None;
        }
    }
    let hold = c.duration(&format!("{lpath}.max_hold"), &raw.max_hold)?;
    let max_hold_ms = hold.as_millis() as u64;
    if max_hold_ms == 0 || max_hold_ms > MAX_HOLD_MS {
        c.err(
            format!("{lpath}.max_hold"),
            "must be between 1ms and 1m (leased tokens are out of the shared bucket while held)",
        );
        return None;
    }
    Some(LeaseSettings {
        tokens,
        max_hold_ms,
    })
}

#[cfg(test)]
mod tests;
