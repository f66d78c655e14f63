//! Rate-limit header fields of a decision (draft-ietf-httpapi-ratelimit-headers-11:
//! `RateLimit-Policy`, `RateLimit`; the legacy `X-RateLimit-*` family; `Retry-After` as RFC 9110
//! delta-seconds). Every writer of these fields is here: the tier's policies and calendar quotas,
//! a burst pool's admission, and the marks of a leased or regional decision.

use crate::config::HeaderMode;
use crate::limit::{Decision, Rate};
use smallvec::SmallVec;
use std::ops::Range;

/// The rate-limit headers of one decision, computed once from the decision that enforced it.
#[derive(Debug, Clone)]
pub struct QuotaHeaders {
    pub policy_name: String,
    pub rate: Rate,
    pub decision: Decision,
    /// Set when the decision came from the local fallback bucket (Redis unavailable).
    pub degraded: bool,
    /// The other policies decided with it: the tier's calendar quotas (docs/DESIGN.md 4c), in
    /// config order, then the limit rules that applied (4e), in file order.
    pub quotas: Vec<QuotaReport>,
    /// A `RateLimit-Policy` item listed before this policy's (the tier's own policy when a burst
    /// pool admitted: `"pro";q=200;w=60, "pro.pool";q=1000;w=1`).
    pub listed_before: Option<String>,
}

/// Which kind of policy a [`QuotaReport`] is about (it words the problem detail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportKind {
    /// A tier's calendar quota (`<tier>.<period>`), renewed at a UTC boundary.
    CalendarQuota,
    /// A limit rule (`limits[].name`).
    Rule,
    /// A tier's usage budget (`<tier>.<usage.name>`), paid back by its refill.
    Usage,
}

/// One more policy's part of a decision (a calendar quota or a limit rule), for the headers.
#[derive(Debug, Clone)]
pub struct QuotaReport {
    /// Policy name: `<tier>.<period>` for a calendar quota, the rule's name for a rule.
    pub name: String,
    pub kind: ReportKind,
    /// Tokens per window (`q`).
    pub limit: u64,
    /// Nominal window in seconds (`w`).
    pub window_s: u64,
    pub decision: Decision,
}

/// Header fields written into one buffer: each field's name and the span of its value in the
/// text. A response takes all of its rate-limit values from that one allocation.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HeaderBlock {
    text: String,
    fields: Spans,
}

/// Each field's name and the byte span of its value in a [`HeaderBlock`]'s text.
pub type Spans = SmallVec<[(&'static str, Range<usize>); 6]>;

impl HeaderBlock {
    /// An empty block with room for `bytes` of values.
    pub fn with_capacity(bytes: usize) -> Self {
        HeaderBlock {
            text: String::with_capacity(bytes),
            fields: Spans::new(),
        }
    }

    /// The block of `pairs`, in order.
    pub fn from_pairs(pairs: Vec<(&'static str, String)>) -> Self {
        let mut out = HeaderBlock::with_capacity(pairs.iter().map(|(_, v)| v.len()).sum());
        for (name, value) in pairs {
            out.push(name, &value);
        }
        out
    }

    /// Appends the field `name` whose value `write` appends to the text.
    pub fn push_with(&mut self, name: &'static str, write: impl FnOnce(&mut String)) {
        let start = self.text.len();
        write(&mut self.text);
        self.fields.push((name, start..self.text.len()));
    }

    /// Appends the field `name: value`.
    pub fn push(&mut self, name: &'static str, value: &str) {
        self.push_with(name, |t| t.push_str(value));
    }

    /// Appends the field `name: <n in decimal>`.
    pub fn push_decimal(&mut self, name: &'static str, n: u64) {
        self.push_with(name, |t| t.push_str(itoa::Buffer::new().format(n)));
    }

    /// Keeps the fields whose name `keep` accepts (their values stay where they are).
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.fields.retain(|(name, _)| keep(name));
    }

    /// The fields as (name, value), in order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.fields.iter().map(|(n, r)| (*n, &self.text[r.clone()]))
    }

    /// The fields as owned (name, value) pairs, in order.
    pub fn into_pairs(self) -> Vec<(&'static str, String)> {
        self.iter().map(|(n, v)| (n, v.to_string())).collect()
    }

    /// The text of the values, and each field's name and the byte span of its value in it.
    pub fn into_parts(self) -> (String, Spans) {
        (self.text, self.fields)
    }
}

impl QuotaHeaders {
    /// Header (name, value) pairs for `mode`, including `Retry-After` on a rejection.
    ///
    /// `RateLimit-Policy: "<tier>";q=<burst>;w=<seconds to refill burst>` and
    /// `RateLimit: "<tier>";r=<remaining>;t=<seconds until full>` (draft-11); legacy
    /// `X-RateLimit-Limit` = burst, `-Remaining` = floor(tokens), `-Reset` = seconds until full.
    /// A degraded decision carries `;degraded` on the policy and `Tollgate-Degraded: redis`.
    ///
    /// With calendar quotas (docs/DESIGN.md 4c) every policy is listed in `RateLimit-Policy`
    /// (`"pro";q=200;w=12, "pro.day";q=100000;w=86400`), `RateLimit` and the legacy fields
    /// report the policy with the least room (fewest tokens left; the main limit on a tie), and
    /// `Retry-After` is the longest wait among the policies that refused.
    pub fn pairs(&self, mode: HeaderMode) -> Vec<(&'static str, String)> {
        self.pairs_in(mode, None)
    }

    /// [`pairs`](Self::pairs), with every `RateLimit-Policy` item that is `region`'s share of a
    /// budget (`multi_region:`) marked `;region="<name>"` (the tier's own policy, its calendar
    /// quotas and the limit rules; not a burst pool or a usage budget, which are not divided)
    /// and `Tollgate-Region: <name>` added for the legacy family.
    pub fn pairs_in(&self, mode: HeaderMode, region: Option<&str>) -> Vec<(&'static str, String)> {
        self.fields_in(mode, region).into_pairs()
    }

    /// [`pairs_in`](Self::pairs_in) as one [`HeaderBlock`]: every value in one buffer.
    pub fn fields_in(&self, mode: HeaderMode, region: Option<&str>) -> HeaderBlock {
        let mut out = HeaderBlock::with_capacity(64 * (2 + self.quotas.len()));
        let (name, limit, d) = self.tightest();
        let reset_s = d.reset_s();
        if matches!(mode, HeaderMode::Ietf | HeaderMode::Both) {
            out.push_with("RateLimit-Policy", |policy| {
                self.write_policy(policy, region)
            });
            out.push_with("RateLimit", |now| {
                push_item(now, name, [("r", d.remaining), ("t", reset_s)]);
            });
        }
        if matches!(mode, HeaderMode::Legacy | HeaderMode::Both) {
            out.push_decimal("X-RateLimit-Limit", limit);
            out.push_decimal("X-RateLimit-Remaining", d.remaining);
            out.push_decimal("X-RateLimit-Reset", reset_s);
        }
        if self.degraded {
            out.push("Tollgate-Degraded", "redis");
        }
        if let (Some(region), false) = (region, mode == HeaderMode::None) {
            out.push("Tollgate-Region", region);
        }
        if let Some(s) = self.retry_after_s() {
            out.push_decimal("Retry-After", s);
        }
        out
    }

    /// The `RateLimit-Policy` value: every policy's item, in order.
    fn write_policy(&self, policy: &mut String, region: Option<&str>) {
        // `listed_before` is set only when a burst pool admitted: it is the tier's own item,
        // and the main item is then the pool's (one bucket for the tier, not divided).
        if let Some(before) = &self.listed_before {
            policy.push_str(before);
            mark_region(policy, region);
            policy.push_str(", ");
        }
        let (burst, window) = (self.rate.burst, self.rate.window_s());
        push_item(policy, &self.policy_name, [("q", burst), ("w", window)]);
        if self.listed_before.is_none() {
            mark_region(policy, region);
        }
        if self.degraded {
            policy.push_str(";degraded");
        }
        for q in &self.quotas {
            policy.push_str(", ");
            push_item(policy, &q.name, [("q", q.limit), ("w", q.window_s)]);
            if q.kind != ReportKind::Usage {
                mark_region(policy, region);
            }
        }
    }

    /// (name, q, decision) of the policy with the least room left.
    fn tightest(&self) -> (&str, u64, &Decision) {
        let mut best = (self.policy_name.as_str(), self.rate.burst, &self.decision);
        for q in &self.quotas {
            if q.decision.remaining < best.2.remaining {
                best = (q.name.as_str(), q.limit, &q.decision);
            }
        }
        best
    }

    /// True when every policy admitted.
    pub fn admitted(&self) -> bool {
        self.decision.admitted && self.quotas.iter().all(|q| q.decision.admitted)
    }

    /// Names of the policies that refused (`violated-policies`).
    pub fn violated(&self) -> Vec<String> {
        let main = (!self.decision.admitted).then(|| self.policy_name.clone());
        main.into_iter()
            .chain(
                self.quotas
                    .iter()
                    .filter(|q| !q.decision.admitted)
                    .map(|q| q.name.clone()),
            )
            .collect()
    }

    /// `Retry-After` in seconds: the longest wait among refusing policies that can ever admit.
    pub fn retry_after_s(&self) -> Option<u64> {
        std::iter::once(&self.decision)
            .chain(self.quotas.iter().map(|q| &q.decision))
            .filter_map(Decision::retry_after_s)
            .max()
    }
}

impl QuotaHeaders {
    /// OpenAI's rate-limit fields for the usage budget among the policies (none without one),
    /// for clients that read them (docs/usage-cost.md#headers): `x-ratelimit-limit-tokens` (the
    /// burst), `x-ratelimit-remaining-tokens` (whole units left), `x-ratelimit-reset-tokens`
    /// (time until full, written `1m30s`, `1.5s` or `250ms`) and, when the request is refused,
    /// `retry-after-ms` (the longest wait among the refusing policies, in ms).
    pub fn openai_pairs(&self) -> Vec<(&'static str, String)> {
        let Some(u) = self.quotas.iter().find(|q| q.kind == ReportKind::Usage) else {
            return Vec::new();
        };
        let mut out = vec![
            ("x-ratelimit-limit-tokens", decimal(u.limit)),
            (
                "x-ratelimit-remaining-tokens",
                decimal(u.decision.remaining),
            ),
            ("x-ratelimit-reset-tokens", go_duration(u.decision.full_ms)),
        ];
        let wait = std::iter::once(&self.decision)
            .chain(self.quotas.iter().map(|q| &q.decision))
            .filter(|d| !d.admitted && !d.never_admissible())
            .map(|d| d.retry_after_ms)
            .max();
        if let Some(ms) = wait {
            out.push(("retry-after-ms", decimal(ms.max(1))));
        }
        out
    }

    /// Headers of a request a tier's burst pool admitted after the tier's own bucket refused:
    /// `RateLimit-Policy` lists the tier's own policy (`tier`) and then `"<tier>.pool"` (sized
    /// `pool`); `RateLimit` (and the legacy fields) report the pool, which admitted.
    pub fn pool_admitted(tier: &QuotaHeaders, pool: Rate, decision: Decision) -> QuotaHeaders {
        QuotaHeaders {
            policy_name: format!("{}.pool", tier.policy_name),
            rate: pool,
            decision,
            degraded: false,
            quotas: Vec::new(),
            listed_before: Some(format!(
                "\"{}\";q={};w={}",
                tier.policy_name,
                tier.rate.burst,
                tier.rate.window_s()
            )),
        }
    }

    /// The problem detail when the main limit admitted but another policy refused: the
    /// refusing calendar quotas and rules, with what each has left.
    pub fn quota_detail(&self, cost: u64) -> String {
        let refused = |kind| {
            self.quotas
                .iter()
                .filter(|q| !q.decision.admitted && q.kind == kind)
                .map(|q| {
                    format!(
                        "\"{}\" ({} of {} left)",
                        q.name, q.decision.remaining, q.limit
                    )
                })
                .collect::<Vec<String>>()
        };
        let (quotas, rules, usage) = (
            refused(ReportKind::CalendarQuota),
            refused(ReportKind::Rule),
            refused(ReportKind::Usage),
        );
        let mut parts = Vec::new();
        if !quotas.is_empty() {
            parts.push(format!(
                "calendar quota {} exhausted (it renews at the next UTC boundary)",
                quotas.join(", ")
            ));
        }
        if !rules.is_empty() {
            parts.push(format!("limit rule {} exhausted", rules.join(", ")));
        }
        if !usage.is_empty() {
            parts.push(format!(
                "usage budget {} exhausted (it refills continuously)",
                usage.join(", ")
            ));
        }
        format!("{}; this request costs {cost}", parts.join("; "))
    }
}

/// Header pairs of a refusal by a fleet-wide concurrency cap (`max_in_flight`) for `mode`:
/// `RateLimit-Policy: "<name>";q=<max>` (no `w`: concurrency has no time basis) and the legacy
/// `X-RateLimit-Limit: <max>`, `X-RateLimit-Remaining: 0`. `Retry-After` is the rejection's.
/// Under `multi_region:` (`region`), `max` is this region's share of the cap: the item is marked
/// `;region="<name>"` and `Tollgate-Region: <name>` is added.
pub fn concurrency_pairs(
    name: &str,
    max: u64,
    mode: HeaderMode,
    region: Option<&str>,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::with_capacity(4);
    if matches!(mode, HeaderMode::Ietf | HeaderMode::Both) {
        let mut policy = String::with_capacity(name.len() + 16);
        push_item(&mut policy, name, [("q", max)]);
        mark_region(&mut policy, region);
        out.push(("RateLimit-Policy", policy));
    }
    if matches!(mode, HeaderMode::Legacy | HeaderMode::Both) {
        out.push(("X-RateLimit-Limit", decimal(max)));
        out.push(("X-RateLimit-Remaining", "0".to_string()));
    }
    if let (Some(region), false) = (region, out.is_empty()) {
        out.push(("Tollgate-Region", region.to_string()));
    }
    out
}

/// Marks the headers of a leased decision: `;leased` on the tier's `RateLimit-Policy` and
/// `RateLimit` items (docs/DESIGN.md 4c), e.g. `"pro";q=200;w=12;leased`.
pub fn annotate_leased(pairs: &mut [(&'static str, String)], tier: &str) {
    for (name, value) in pairs.iter_mut() {
        let is_item =
            name.eq_ignore_ascii_case("RateLimit-Policy") || name.eq_ignore_ascii_case("RateLimit");
        // The value starts with the item `"<tier>";` (no allocation: this runs per response).
        let of_tier = value
            .strip_prefix('"')
            .and_then(|v| v.strip_prefix(tier))
            .is_some_and(|v| v.starts_with("\";"));
        if is_item && of_tier && !value.contains(',') {
            value.push_str(";leased");
        }
    }
}

/// Appends the extension parameter `;region="<name>"` to the item just written, when `region`
/// is set: the item is this region's share of a budget (draft-ietf-httpapi-ratelimit-headers-11
/// section 3 lets a policy item carry parameters beyond `q`, `qu`, `w`, `pk`; an sf-string value
/// is valid for any region name, which validation keeps to letters, digits, `-` and `_`).
fn mark_region(out: &mut String, region: Option<&str>) {
    if let Some(region) = region {
        out.push_str(";region=\"");
        out.push_str(region);
        out.push('"');
    }
}

/// Appends the structured-field item `"<name>";<k>=<v>;...` (draft-11: `"pro";q=200;w=12` in
/// `RateLimit-Policy`, `"pro";r=5;t=3` in `RateLimit`).
fn push_item<const N: usize>(out: &mut String, name: &str, params: [(&str, u64); N]) {
    out.push('"');
    out.push_str(name);
    out.push('"');
    for (key, value) in params {
        out.push(';');
        out.push_str(key);
        out.push('=');
        out.push_str(itoa::Buffer::new().format(value));
    }
}

/// `n` in decimal.
fn decimal(n: u64) -> String {
    itoa::Buffer::new().format(n).to_string()
}

/// A duration in ms as OpenAI writes its reset fields: `250ms` under a second, else minutes and
/// seconds with up to three decimals (`1.5s`, `1m30s`, `2h0m0s`).
pub fn go_duration(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (h, m, s) = (ms / 3_600_000, ms / 60_000 % 60, ms % 60_000);
    let secs = match s % 1000 {
        0 => format!("{}s", s / 1000),
        frac => {
            let t = format!("{}.{:03}", s / 1000, frac);
            format!("{}s", t.trim_end_matches('0'))
        }
    };
    match (h, m) {
        (0, 0) => secs,
        (0, m) => format!("{m}m{secs}"),
        (h, m) => format!("{h}h{m}m{secs}"),
    }
}
