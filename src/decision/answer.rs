//! A rate limit service call in tollgate's terms and back (pure): [`asked`] checks a
//! `RateLimitRequest` and turns it into descriptors to decide; [`response`] turns the decision
//! into a `RateLimitResponse` (docs/decision-service.md "What Envoy gets").

use super::rls::{self, Code, DescriptorStatus, RateLimitRequest, RateLimitResponse, Unit};
use crate::config::DecisionFailure;
use crate::limit::{Decision, Rate};
use crate::pipeline::descriptors::{Asked, Planned};
use crate::pipeline::tenant::Verdict;
use crate::quota::rules::{Combined, RuleOutcome};
use tonic::Status;

/// Most descriptors in one call.
pub const MAX_DESCRIPTORS: usize = 64;
/// Most entries in one descriptor.
pub const MAX_ENTRIES: usize = 16;
/// Longest entry key or value, in bytes.
pub const MAX_ENTRY_BYTES: usize = 1024;
/// Largest `hits_addend` (a descriptor's is 64-bit on the wire; the request's is 32-bit).
pub const MAX_HITS: u64 = u32::MAX as u64;

/// The descriptors of `req` to decide, each with its hits: the descriptor's `hits_addend` when
/// set, else the request's; 0 means 1 (proto3's unset value, as Envoy sends it). Errors
/// (`INVALID_ARGUMENT`, naming the fault): an empty domain, no descriptors, a descriptor
/// without entries, an empty entry key, more than [`MAX_DESCRIPTORS`] descriptors or
/// [`MAX_ENTRIES`] entries, a key or value over [`MAX_ENTRY_BYTES`], hits over [`MAX_HITS`].
pub fn asked(req: &RateLimitRequest) -> Result<Vec<Asked>, Status> {
    let bad = |m: String| Err(Status::invalid_argument(m));
    if req.domain.is_empty() {
        return bad("domain must not be empty".into());
    }
    if req.descriptors.is_empty() {
        return bad("descriptors must not be empty".into());
    }
    if req.descriptors.len() > MAX_DESCRIPTORS {
        return bad(format!(
            "{} descriptors: at most {MAX_DESCRIPTORS} in one call",
            req.descriptors.len()
        ));
    }
    let mut out = Vec::with_capacity(req.descriptors.len());
    for (i, d) in req.descriptors.iter().enumerate() {
        if d.entries.is_empty() {
            return bad(format!("descriptors[{i}] has no entries"));
        }
        if d.entries.len() > MAX_ENTRIES {
            return bad(format!(
                "descriptors[{i}] has {} entries: at most {MAX_ENTRIES}",
                d.entries.len()
            ));
        }
        for (j, e) in d.entries.iter().enumerate() {
            if e.key.is_empty() {
                return bad(format!("descriptors[{i}].entries[{j}].key is empty"));
            }
            if e.key.len() > MAX_ENTRY_BYTES || e.value.len() > MAX_ENTRY_BYTES {
                return bad(format!(
                    "descriptors[{i}].entries[{j}]: keys and values are at most {MAX_ENTRY_BYTES} bytes"
                ));
            }
        }
        let hits = d
            .hits_addend
            .map(|h| h.value)
            .filter(|h| *h > 0)
            .unwrap_or(u64::from(req.hits_addend))
            .max(1);
        if hits > MAX_HITS {
            return bad(format!(
                "descriptors[{i}].hits_addend {hits} is over {MAX_HITS}"
            ));
        }
        let entries = d
            .entries
            .iter()
            .map(|e| (e.key.clone(), e.value.clone()))
            .collect();
        out.push(Asked { entries, hits });
    }
    Ok(out)
}

/// The answer to a call whose buckets `planned` were decided as `combined` and judged as
/// `verdict`; `headers` are the verdict's rate-limit fields as the proxy writes them. A
/// descriptor is OVER_LIMIT when one of its enforced rules refused it (or failed closed), and
/// then so is `overall_code`; a descriptor no rule matches is OK without a limit. Each status
/// reports the descriptor's tightest enforced rule (shadow rules when it has only those), its
/// room as left by the call (a refused call debits nothing). Errors: `UNAVAILABLE` when Redis
/// could not decide a bucket and `failure` is [`DecisionFailure::Unavailable`].
pub fn response(
    planned: &Planned<'_>,
    combined: &Combined,
    verdict: &Verdict,
    headers: Vec<(&'static str, String)>,
    failure: DecisionFailure,
) -> Result<RateLimitResponse, Status> {
    let unsure = |o: &RuleOutcome| match o {
        RuleOutcome::FailedOpen | RuleOutcome::FailedClosed { .. } => true,
        RuleOutcome::Decided { degraded, .. } => *degraded,
        RuleOutcome::Unasked => false,
    };
    if failure == DecisionFailure::Unavailable && combined.rules.iter().any(unsure) {
        return Err(Status::unavailable(
            "the quota store is unavailable; the caller's failure mode decides",
        ));
    }
    let statuses = planned
        .by_descriptor
        .iter()
        .map(|mine| descriptor_status(planned, combined, mine))
        .collect();
    let mut headers = headers;
    let retry = verdict
        .decision
        .rejection()
        .and_then(|r| r.retry_after)
        .filter(|_| !combined.admitted);
    if let (Some(s), false) = (retry, headers.iter().any(|(n, _)| *n == "Retry-After")) {
        headers.push(("Retry-After", s.to_string()));
    }
    let overall = if combined.admitted {
        Code::Ok
    } else {
        Code::OverLimit
    };
    Ok(RateLimitResponse {
        overall_code: overall as i32,
        statuses,
        response_headers_to_add: headers
            .into_iter()
            .map(|(key, value)| rls::HeaderValue {
                key: key.to_string(),
                value,
            })
            .collect(),
    })
}

/// One descriptor's status from the outcomes of its buckets (`mine`: indices into `planned`).
fn descriptor_status(
    planned: &Planned<'_>,
    combined: &Combined,
    mine: &[usize],
) -> DescriptorStatus {
    let mut code = Code::Ok;
    // (shadow, remaining, rate, name, reset_s): the tightest enforced bucket, shadow ones last.
    let mut best: Option<(bool, u64, Rate, &str, u64)> = None;
    for &i in mine {
        let (a, call) = &planned.rules[i];
        let shadow = call.entry.shadow;
        let outcome = combined
            .rules
            .get(i)
            .copied()
            .unwrap_or(RuleOutcome::Unasked);
        let (remaining, reset_s) = match outcome {
            RuleOutcome::Decided { decision, .. } => {
                if !decision.admitted && !shadow {
                    code = Code::OverLimit;
                }
                room_left(&decision, call.entry.cost, combined.admitted, a.rate)
            }
            RuleOutcome::FailedClosed { retry_after_s } => {
                if !shadow {
                    code = Code::OverLimit;
                }
                (0, retry_after_s)
            }
            // Not decided: its whole bucket is the best known room.
            RuleOutcome::FailedOpen | RuleOutcome::Unasked => (a.rate.burst, 0),
        };
        let candidate = (shadow, remaining, a.rate, a.rule.name.as_str(), reset_s);
        let tighter = match &best {
            None => true,
            Some(b) => (candidate.0, candidate.1) < (b.0, b.1),
        };
        if tighter {
            best = Some(candidate);
        }
    }
    let Some((_, remaining, rate, name, reset_s)) = best else {
        return DescriptorStatus {
            code: Code::Ok as i32,
            ..Default::default()
        };
    };
    DescriptorStatus {
        code: code as i32,
        current_limit: Some(rate_limit(rate, name)),
        limit_remaining: u32::try_from(remaining).unwrap_or(u32::MAX),
        duration_until_reset: Some(rls::Duration {
            seconds: i64::try_from(reset_s).unwrap_or(i64::MAX),
            nanos: 0,
        }),
    }
}

/// The seconds one descriptor's refusing enforced buckets (`mine`: indices into `planned`)
/// ask the caller to wait: the longest of them; `None` when none of them refused.
pub fn retry_after(planned: &Planned<'_>, combined: &Combined, mine: &[usize]) -> Option<u64> {
    mine.iter()
        .filter(|&&i| !planned.rules[i].1.entry.shadow)
        .filter_map(|&i| match combined.rules.get(i) {
            // A cost over the burst is never admitted: waiting does not help, no retry.
            Some(RuleOutcome::Decided { decision, .. }) => decision.retry_after_s(),
            Some(RuleOutcome::FailedClosed { retry_after_s }) => Some(*retry_after_s),
            _ => None,
        })
        .max()
}

/// Room left in a decided bucket after the call, and seconds until it is full: as decided, or,
/// when the call was refused as a whole after this bucket admitted (its debit given back), with
/// its cost back.
fn room_left(d: &Decision, cost: u64, call_admitted: bool, rate: Rate) -> (u64, u64) {
    if d.admitted && !call_admitted {
        let back = d.remaining.saturating_add(cost).min(rate.burst);
        let reset = if back >= rate.burst { 0 } else { d.reset_s() };
        return (back, reset);
    }
    (d.remaining, d.reset_s())
}

/// A rule's rate as Envoy's `RateLimit`: `limit` per the largest unit its period divides
/// evenly (10 per 500 ms is 20 per SECOND), else per second rounded down (at least 1).
pub fn rate_limit(rate: Rate, name: &str) -> rls::RateLimit {
    const UNITS: [(Unit, u64); 7] = [
        (Unit::Second, 1_000),
        (Unit::Minute, 60_000),
        (Unit::Hour, 3_600_000),
        (Unit::Day, 86_400_000),
        (Unit::Week, 604_800_000),
        (Unit::Month, 2_592_000_000),
        (Unit::Year, 31_536_000_000),
    ];
    let exact = UNITS.iter().find(|(_, ms)| *ms == rate.per_ms).or_else(|| {
        UNITS
            .iter()
            .find(|(_, ms)| *ms >= rate.per_ms && ms % rate.per_ms.max(1) == 0)
    });
    let (unit, per_unit) = match exact {
        Some((unit, ms)) => (*unit, rate.limit.saturating_mul(ms / rate.per_ms.max(1))),
        None => (
            Unit::Second,
            (rate.limit.saturating_mul(1_000) / rate.per_ms.max(1)).max(1),
        ),
    };
    rls::RateLimit {
        requests_per_unit: u32::try_from(per_unit).unwrap_or(u32::MAX),
        unit: unit as i32,
        name: name.to_string(),
    }
}

#[cfg(test)]
mod tests;
