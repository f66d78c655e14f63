//! `tiers.<name>.usage` and `limits[].usage`: a budget of backend-reported units, reserved at
//! admission and settled when the response ends (docs/DESIGN.md 4d–4e "Usage cost").

use super::common::Check;
use crate::config::model::{RefundOn, UsageBudget, UsageSource};
use crate::config::raw::{RawReserve, RawUsage};
use crate::limit::bounds::MAX_UNITS;

/// Usage names that would collide with another policy of a tier or rule (`<tier>.<period>`
/// quotas, `<tier>.pool`, `<owner>.concurrency`).
const TAKEN: [&str; 6] = ["hour", "day", "week", "month", "pool", "concurrency"];

/// `<path>.usage` of the tier or limit rule named `tier` → the budget (policy
/// `<tier>.<name>`), or `None` with an error naming each bad field.
pub(super) fn settings(c: &mut Check, path: &str, tier: &str, u: &RawUsage) -> Option<UsageBudget> {
    let path = format!("{path}.usage");
    let name = u.name.clone().unwrap_or_else(|| "tokens".to_string());
    let name_ok = !name.is_empty()
        && name.len() <= 40
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !name_ok {
        c.err(
            format!("{path}.name"),
            format!("\"{name}\" is not 1 to 40 of a-z, 0-9, '_' and '-'"),
        );
    } else if TAKEN.contains(&name.as_str()) {
        c.err(
            format!("{path}.name"),
            format!("\"{name}\" would name another policy (\"{tier}.{name}\")"),
        );
    }
    let rate = c.rate(&path, u.limit, &u.per, u.burst);
    let (reserve, from_json) = match &u.reserve {
        RawReserve::Units(n) => (c.positive(&format!("{path}.reserve"), *n), None),
        RawReserve::FromJson(j) => (
            c.positive(&format!("{path}.reserve.default"), j.default),
            json_field(c, &path, &j.from_json),
        ),
    };
    let source = source(c, &path, u);
    let max = match u.max {
        None => rate.map(|r| r.burst),
        Some(m) => c.positive(&format!("{path}.max"), m),
    };
    let refund_on = refund_on(c, &path, u.refund_on.as_deref().unwrap_or_default());
    let (rate, reserve, source, max) = (rate?, reserve?, source?, max?);
    let uncounted = match u.uncounted {
        None => max,
        Some(n) if (0..=max as i64).contains(&n) => n as u64,
        Some(n) => {
            c.err(
                format!("{path}.uncounted"),
                format!("must be 0 to max ({max}), got {n}"),
            );
            return None;
        }
    };
    let include_usage = source == UsageSource::OpenAi && u.from.include_usage != Some(false);
    if reserve > rate.burst {
        c.err(
            format!("{path}.reserve"),
            format!(
                "{reserve} is more than the burst ({}): no request could ever be admitted",
                rate.burst
            ),
        );
        return None;
    }
    if max < reserve {
        c.err(
            format!("{path}.max"),
            format!("must be at least the reserve ({reserve}), got {max}"),
        );
        return None;
    }
    if u128::from(max) * u128::from(rate.per_ms) > MAX_UNITS {
        c.err(
            format!("{path}.max"),
            "max × per is too large (max 2^52 unit·ms)",
        );
        return None;
    }
    Some(UsageBudget {
        policy: format!("{tier}.{name}"),
        name,
        rate,
        reserve,
        from_json,
        source,
        max,
        refund_on,
        uncounted,
        include_usage,
    })
}

/// `usage.reserve.from_json`: the name of a top-level field of the request's JSON body.
fn json_field(c: &mut Check, path: &str, field: &str) -> Option<String> {
    if field.is_empty() || field.len() > 128 {
        c.err(
            format!("{path}.reserve.from_json"),
            "must be the name of a top-level field of the request body (1 to 128 bytes)",
        );
        return None;
    }
    Some(field.to_string())
}

/// `usage.from`: exactly one of `header` and `openai: true`.
fn source(c: &mut Check, path: &str, u: &RawUsage) -> Option<UsageSource> {
    let path = format!("{path}.from");
    if u.from.include_usage.is_some() && u.from.openai != Some(true) {
        c.err(
            format!("{path}.include_usage"),
            "applies to openai: true only",
        );
        return None;
    }
    match (&u.from.header, u.from.openai) {
        (Some(h), None | Some(false)) => c
            .header_name(&format!("{path}.header"), h)
            .map(|h| UsageSource::Header(h.as_str().to_string())),
        (None, Some(true)) => Some(UsageSource::OpenAi),
        _ => {
            c.err(path, "give exactly one of header: <name> or openai: true");
            None
        }
    }
}

/// `refund_on` at `path` (a usage budget's, a tier's or a rule's): any of `backend_5xx`, `upstream_unavailable`,
/// `client_gone_before_response`.
pub(super) fn refund_on(c: &mut Check, path: &str, items: &[String]) -> RefundOn {
    let mut r = RefundOn::default();
    for (i, item) in items.iter().enumerate() {
        match item.as_str() {
            "backend_5xx" => r.backend_5xx = true,
            "upstream_unavailable" => r.upstream_unavailable = true,
            "client_gone_before_response" => r.client_gone_before_response = true,
            other => c.err(
                format!("{path}.refund_on[{i}]"),
                format!(
                    "\"{other}\" is not one of backend_5xx, upstream_unavailable, \
                     client_gone_before_response"
                ),
            ),
        }
    }
    r
}

#[cfg(test)]
mod tests;
