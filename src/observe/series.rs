//! Metric series resolved once per config snapshot instead of once per request.
//!
//! `MetricVec::with_label_values` hashes every label, takes the vector's lock and clones the
//! series handle (three shared atomic operations) on each call; on the request path that was
//! a measurable share of tollgate's own cost in a CPU profile. Here each series a request
//! touches is looked up at most once per snapshot and kept in a [`OnceLock`]: a series appears
//! in `/metrics` only after its first use, exactly as before.

use super::labels::{Layer, Outcome};
use super::metrics::{status_class_index, METRICS, STATUS_CLASSES};
use crate::hashing::HashMap;
use prometheus::{Histogram, IntCounter};
use std::sync::OnceLock;

const CLASSES: usize = STATUS_CLASSES.len();

/// `tollgate_requests_total` and `tollgate_request_duration_seconds` of one route (`none` for
/// requests no route took).
pub struct RouteSeries {
    route: String,
    requests: [OnceLock<IntCounter>; CLASSES],
    duration: OnceLock<Histogram>,
}

impl RouteSeries {
    /// The series of route id `route`, resolved on first use.
    pub fn new(route: &str) -> Self {
        RouteSeries {
            route: route.to_string(),
            requests: Default::default(),
            duration: OnceLock::new(),
        }
    }

    /// Counts one finished request answered with `status` (0: no response was written) that
    /// took `seconds` from its first byte to logging.
    pub fn observe(&self, status: u16, seconds: f64) {
        let class = status_class_index(status);
        self.requests[class]
            .get_or_init(|| {
                let labels = [self.route.as_str(), STATUS_CLASSES[class]];
                METRICS.requests.with_label_values(&labels)
            })
            .inc();
        self.duration
            .get_or_init(|| METRICS.request_duration.with_label_values(&[&self.route]))
            .observe(seconds);
    }
}

const LAYERS: usize = Layer::ALL.len();
const OUTCOMES: usize = Outcome::ALL.len();

/// `tollgate_decisions_total{layer, outcome, tier}` for the tiers of one snapshot and `-`.
pub struct DecisionSeries {
    /// Each tier's place in `slots`.
    index: HashMap<String, usize>,
    slots: Vec<Box<[OnceLock<IntCounter>]>>,
}

impl DecisionSeries {
    /// Series for `tiers` (names) and `-` (no tier), resolved on first use.
    pub fn new<'a>(tiers: impl IntoIterator<Item = &'a String>) -> Self {
        let mut index = HashMap::default();
        let mut slots = Vec::new();
        for tier in tiers.into_iter().map(String::as_str).chain(["-"]) {
            index.insert(tier.to_string(), slots.len());
            slots.push((0..LAYERS * OUTCOMES).map(|_| OnceLock::new()).collect());
        }
        DecisionSeries { index, slots }
    }

    /// The place of `tier`'s series in this snapshot's (`None`: a tier it does not know), for
    /// [`Self::inc_at`]: a request looks its tier up once, not at every decision.
    pub fn tier_index(&self, tier: &str) -> Option<usize> {
        self.index.get(tier).copied()
    }

    /// Counts one decision of `layer` with `outcome` for `tier` (`-` when none); a tier this
    /// snapshot does not know goes through the vector directly.
    pub fn inc(&self, layer: Layer, outcome: Outcome, tier: &str) {
        self.inc_at(self.tier_index(tier), layer, outcome, tier);
    }

    /// [`Self::inc`] for the tier `tier` whose place [`Self::tier_index`] gave as `index`.
    pub fn inc_at(&self, index: Option<usize>, layer: Layer, outcome: Outcome, tier: &str) {
        match index.and_then(|i| self.slots.get(i)) {
            Some(slots) => slots[layer as usize * OUTCOMES + outcome as usize]
                .get_or_init(|| {
                    let labels = [layer.as_str(), outcome.as_str(), tier];
                    METRICS.decisions.with_label_values(&labels)
                })
                .inc(),
            None => METRICS.decision(layer, outcome, tier),
        }
    }
}

/// The outcomes of `tollgate_rule_decisions_total` a rate rule's decision counts.
pub const RULE_OUTCOMES: [&str; 7] = [
    "admitted",
    "limited",
    "shadow_limited",
    "fallback",
    "failed_open",
    "failed_closed",
    "unasked",
];

/// `tollgate_rule_decisions_total{rule, outcome}` for the rules (`limits:`) of one snapshot,
/// by their position.
pub struct RuleSeries {
    by_rule: Vec<(String, [OnceLock<IntCounter>; RULE_OUTCOMES.len()])>,
    /// Counts nothing (a decision looked at, not taken: the decision API's dry run).
    muted: bool,
}

impl RuleSeries {
    /// Series for rules named `names`, in order, resolved on first use.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let by_rule = names
            .into_iter()
            .map(|n| (n.to_string(), Default::default()))
            .collect();
        RuleSeries {
            by_rule,
            muted: false,
        }
    }

    /// Series that count nothing.
    pub fn muted() -> Self {
        RuleSeries {
            by_rule: Vec::new(),
            muted: true,
        }
    }

    /// Counts one decision of rule `index` (named `name`) with `outcome` (one of
    /// [`RULE_OUTCOMES`]; another, or a rule this snapshot does not have, goes through the
    /// vector directly).
    pub fn inc(&self, index: usize, name: &str, outcome: &str) {
        if self.muted {
            return;
        }
        let slot = RULE_OUTCOMES.iter().position(|o| *o == outcome);
        match (self.by_rule.get(index), slot) {
            (Some((n, slots)), Some(i)) if n == name => slots[i]
                .get_or_init(|| METRICS.rule_decisions.with_label_values(&[name, outcome]))
                .inc(),
            _ => METRICS
                .rule_decisions
                .with_label_values(&[name, outcome])
                .inc(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layer_and_outcome_has_its_own_slot() {
        for (i, l) in Layer::ALL.iter().enumerate() {
            assert_eq!(*l as usize, i, "{l:?}");
        }
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(*o as usize, i, "{o:?}");
        }
    }

    #[test]
    fn cached_series_count_into_the_same_vector_series() {
        let tier = "series-test-tier".to_string();
        let series = DecisionSeries::new([&tier]);
        let labels = ["tenant", "admitted", tier.as_str()];
        let before = METRICS.decisions.with_label_values(&labels).get();
        series.inc(Layer::Tenant, Outcome::Admitted, &tier);
        series.inc(Layer::Tenant, Outcome::Admitted, &tier);
        series.inc(Layer::Tenant, Outcome::Limited, &tier);
        assert_eq!(
            METRICS.decisions.with_label_values(&labels).get(),
            before + 2
        );
        let route = RouteSeries::new("series-test-route");
        route.observe(204, 0.001);
        route.observe(0, 0.001);
        let ok = METRICS
            .requests
            .with_label_values(&["series-test-route", "2xx"]);
        let none = METRICS
            .requests
            .with_label_values(&["series-test-route", "none"]);
        assert_eq!((ok.get(), none.get()), (1, 1));
    }
}
