//! The JSON shapes of the decision HTTP API (docs/decision-service.md "Workers: the HTTP
//! check", docs/decision-openapi.json), pure: a body parsed into a rate limit service call
//! (field names of `rls.proto` in snake_case), and answers turned into JSON.

use super::answer::MAX_HITS;
use super::rls::{self, Code, RateLimitRequest, Unit};
use super::Checked;
use crate::quota::usage::Settled;
use serde::Deserialize;
use serde_json::{json, Value};

/// The body of `POST /v1/check` and `POST /v1/report`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallBody {
    /// The rules' domain (`limits[].match.domain`).
    pub domain: String,
    pub descriptors: Vec<DescriptorBody>,
    /// Hits for each descriptor without its own (absent or null: 1; else at least 1).
    pub hits_addend: Option<u64>,
    /// `check` only: decide without debiting (default false).
    #[serde(default)]
    pub dry_run: bool,
}

/// One descriptor: its entries, in order, and optionally its own hits.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DescriptorBody {
    pub entries: Vec<EntryBody>,
    pub hits_addend: Option<u64>,
}

/// One descriptor entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryBody {
    pub key: String,
    pub value: String,
}

/// Parses `body` into a call and its `dry_run` flag. Errors: a message naming the field at
/// fault (`descriptors[0].entries[1].value: invalid type ...`), for a 400 problem; hits of 0 or
/// over [`MAX_HITS`] are refused here (JSON has no unset-is-zero convention to honour).
pub fn parse(body: &[u8]) -> Result<(RateLimitRequest, bool), String> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    let call: CallBody = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            format!("body: {inner}")
        } else {
            format!("{path}: {inner}")
        }
    })?;
    let hits = |field: String, h: Option<u64>| match h {
        Some(0) => Err(format!("{field}: must be at least 1")),
        Some(n) if n > MAX_HITS => Err(format!("{field}: {n} is over {MAX_HITS}")),
        other => Ok(other),
    };
    let request_hits = hits("hits_addend".into(), call.hits_addend)?.unwrap_or(1);
    let mut descriptors = Vec::with_capacity(call.descriptors.len());
    for (i, d) in call.descriptors.into_iter().enumerate() {
        let own = hits(format!("descriptors[{i}].hits_addend"), d.hits_addend)?;
        descriptors.push(rls::RateLimitDescriptor {
            entries: d
                .entries
                .into_iter()
                .map(|e| rls::Entry {
                    key: e.key,
                    value: e.value,
                })
                .collect(),
            hits_addend: own.map(|value| rls::UInt64Value { value }),
        });
    }
    let req = RateLimitRequest {
        domain: call.domain,
        descriptors,
        hits_addend: u32::try_from(request_hits).unwrap_or(u32::MAX),
    };
    Ok((req, call.dry_run))
}

fn code_name(code: i32) -> &'static str {
    match Code::try_from(code) {
        Ok(Code::Ok) => "OK",
        Ok(Code::OverLimit) => "OVER_LIMIT",
        _ => "UNKNOWN",
    }
}

fn unit_name(unit: i32) -> &'static str {
    match Unit::try_from(unit) {
        Ok(Unit::Second) => "SECOND",
        Ok(Unit::Minute) => "MINUTE",
        Ok(Unit::Hour) => "HOUR",
        Ok(Unit::Day) => "DAY",
        Ok(Unit::Week) => "WEEK",
        Ok(Unit::Month) => "MONTH",
        Ok(Unit::Year) => "YEAR",
        _ => "UNKNOWN",
    }
}

fn limit_json(l: &rls::RateLimit) -> Value {
    json!({"requests_per_unit": l.requests_per_unit, "unit": unit_name(l.unit), "name": l.name})
}

/// The answer to `check`: `allowed`, `overall_code`, `dry_run`, the longest `retry_after_s`
/// of a refusal, per descriptor `code`, `current_limit`, `limit_remaining`,
/// `duration_until_reset_s` and `retry_after_s`, `response_headers_to_add` (the draft-11
/// `RateLimit-Policy` / `RateLimit` fields, `Retry-After` when refused), and `blocked` (the
/// block's type, value, reason, times) when a block refused the call.
pub fn check_answer(c: &Checked, dry_run: bool) -> Value {
    let r = &c.response;
    let statuses: Vec<Value> = r
        .statuses
        .iter()
        .zip(&c.retry_after_s)
        .map(|(s, retry)| {
            json!({
                "code": code_name(s.code),
                "current_limit": s.current_limit.as_ref().map(limit_json),
                "limit_remaining": s.current_limit.as_ref().map(|_| s.limit_remaining),
                "duration_until_reset_s": s.duration_until_reset.map(|d| d.seconds),
                "retry_after_s": retry,
            })
        })
        .collect();
    let allowed = r.overall_code == Code::Ok as i32;
    let mut body = json!({
        "allowed": allowed,
        "overall_code": code_name(r.overall_code),
        "dry_run": dry_run,
        "retry_after_s": retry_after(c),
        "statuses": statuses,
        "response_headers_to_add": r.response_headers_to_add.iter()
            .map(|h| json!({"key": h.key, "value": h.value})).collect::<Vec<_>>(),
    });
    if let Some(b) = &c.blocked {
        body["blocked"] = b.clone();
    }
    body
}

/// The call's `Retry-After` (seconds) when it was refused.
pub fn retry_after(c: &Checked) -> Option<u64> {
    if c.response.overall_code == Code::Ok as i32 {
        return None;
    }
    c.response
        .response_headers_to_add
        .iter()
        .find(|h| h.key.eq_ignore_ascii_case("retry-after"))
        .and_then(|h| h.value.parse().ok())
        .or_else(|| c.retry_after_s.iter().flatten().copied().max())
}

/// The answer to `report`: per descriptor (in the call's order) its tightest bucket after the
/// debit: `current_limit`, `limit_remaining` (whole units, negative in debt) and
/// `duration_until_reset_s`; all `null` for a descriptor no rule matches. `by_descriptor` holds,
/// per descriptor, (rule limit, settled) pairs of its buckets.
pub fn report_answer(by_descriptor: &[Vec<(rls::RateLimit, Settled)>]) -> Value {
    let statuses: Vec<Value> = by_descriptor
        .iter()
        .map(|buckets| {
            let tightest = buckets.iter().min_by_key(|(_, s)| s.level);
            json!({
                "current_limit": tightest.map(|(l, _)| limit_json(l)),
                "limit_remaining": tightest.map(|(_, s)| s.level),
                "duration_until_reset_s": tightest.map(|(_, s)| s.full_ms.div_ceil(1000)),
            })
        })
        .collect();
    json!({ "statuses": statuses })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_names_the_field_at_fault() {
        let (req, dry) = parse(br#"{"domain":"w","descriptors":[{"entries":[{"key":"t","value":"a"}],"hits_addend":3}],"hits_addend":null,"dry_run":true}"#).unwrap();
        assert!(dry);
        assert_eq!((req.domain.as_str(), req.hits_addend), ("w", 1));
        assert_eq!(req.descriptors[0].hits_addend.map(|h| h.value), Some(3));
        for (body, field) in [
            (
                r#"{"domain":"w","descriptors":[{"entries":[{"key":"t","value":1}]}]}"#,
                "descriptors[0].entries[0].value: ",
            ),
            (r#"{"descriptors":[]}"#, "body: missing field `domain`"),
            (
                r#"{"domain":"w","descriptors":[],"hits_addend":0}"#,
                "hits_addend: must be at least 1",
            ),
            (
                r#"{"domain":"w","descriptors":[{"entries":[],"hits_addend":4294967296}]}"#,
                "descriptors[0].hits_addend: 4294967296 is over",
            ),
            (
                r#"{"domain":"w","descriptors":[],"dry_run":"yes"}"#,
                "dry_run: ",
            ),
        ] {
            let e = parse(body.as_bytes()).unwrap_err();
            assert!(e.starts_with(field), "{body}: {e}");
        }
    }
}
