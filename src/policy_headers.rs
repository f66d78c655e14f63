//! Proxy-side helpers of a tier's policies (docs/DESIGN.md 4c): the calendar quotas' header
//! reports, the rejection detail when a quota refused, and the `leaky_bucket` shaping wait.

use crate::config::TierPolicy;
use crate::quota::PolicyExtras;
use crate::response::{QuotaHeaders, QuotaReport};
use pingora::prelude::*;
use pingora::proxy::Session;
use pingora::ErrorType;
use std::time::Duration;

/// One header report per calendar quota of `policy` (tier `tier`) that was decided (none when
/// degraded); `policy` is the one that decided, so a regional cut reports its own `q`.
/// Policy names are `<tier>.<period>`; `w` is the period's nominal length in seconds.
pub fn quota_reports(tier: &str, policy: &TierPolicy, extras: &PolicyExtras) -> Vec<QuotaReport> {
    policy
        .quotas
        .iter()
        .zip(&extras.quotas)
        .map(|(q, d)| QuotaReport {
            name: format!("{tier}.{}", q.period.as_str()),
            limit: q.limit,
            window_s: q.period.nominal_s(),
            decision: *d,
        })
        .collect()
}

/// The problem detail when the main limit admitted but a calendar quota refused.
pub fn quota_detail(headers: &QuotaHeaders, cost: u64) -> String {
    let refused: Vec<String> = headers
        .quotas
        .iter()
        .filter(|q| !q.decision.admitted)
        .map(|q| {
            format!(
                "\"{}\" ({} of {} left)",
                q.name, q.decision.remaining, q.limit
            )
        })
        .collect();
    format!(
        "calendar quota {} exhausted, this request costs {cost}; it renews at the next UTC boundary",
        refused.join(", ")
    )
}

/// Waits `delay_ms` for a `leaky_bucket` slot on a timer (never blocking a thread). While no
/// request body is pending, a client that goes away is noticed at once and the wait ends with
/// an error (the caller gives the slot back). With a body pending the wait is not interrupted.
pub async fn wait_for_slot(session: &mut Session, delay_ms: u64) -> Result<()> {
    let sleep = tokio::time::sleep(Duration::from_millis(delay_ms));
    tokio::pin!(sleep);
    let mut probe = session.as_downstream_mut().is_body_done();
    loop {
        tokio::select! {
            _ = &mut sleep => return Ok(()),
            read = session.as_downstream_mut().read_body_or_idle(true), if probe => {
                if read.is_err() {
                    return Error::e_explain(
                        ErrorType::ConnectionClosed,
                        "client left while delayed for its leaky_bucket slot",
                    )
                    .map_err(|e| e.into_down());
                }
                probe = false;
            }
        }
    }
}
