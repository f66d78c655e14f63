//! Prometheus metrics (prometheus 0.14, the version pingora-prometheus uses), all prefixed
//! `tollgate_` and registered in the default registry served by the admin listener.
//!
//! Tenant ids are never labels by default (unbounded cardinality); `observability.tenant_metrics`
//! opts in to a bounded per-tenant counter (first N tenants seen, the rest as `other`).

use super::labels::{Layer, Outcome};
use once_cell::sync::Lazy;
use parking_lot::Mutex;
use prometheus::{
    register_histogram_vec, register_int_counter, register_int_counter_vec, register_int_gauge,
    register_int_gauge_vec, Encoder, Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, TextEncoder,
};
use std::collections::HashSet;

/// Every metric tollgate exports.
pub struct Metrics {
    /// Requests by route (`routes[i]` or `none`) and status class (`2xx`..`5xx`).
    pub requests: IntCounterVec,
    /// Request duration in seconds, from first byte to logging, by route.
    pub request_duration: HistogramVec,
    /// Decisions by layer (edge, identity, tenant, upstream), outcome and tier (`-` when none).
    pub decisions: IntCounterVec,
    /// Tenant admissions that left less than 20% of the burst, by tier.
    pub near_limit: IntCounterVec,
    /// Redis call duration in seconds (successful and failed calls).
    pub redis_duration: HistogramVec,
    /// Redis errors by kind: timeout, connection, script, other.
    pub redis_errors: IntCounterVec,
    /// Circuit breaker state: 0 closed, 1 open, 2 half-open.
    pub breaker_state: IntGauge,
    /// Breaker transitions by target state.
    pub breaker_transitions: IntCounterVec,
    /// 1 while tenant decisions are degraded (breaker not closed), else 0.
    pub degraded: IntGauge,
    /// Config reloads by result (`ok`, `error`).
    pub reloads: IntCounterVec,
    /// Unix time of the last successful config load.
    pub last_reload: IntGauge,
    /// 1 when the last load or reload of the config succeeded, 0 when the last one was rejected.
    pub last_reload_ok: IntGauge,
    /// Client keys tracked by the edge limiter.
    pub edge_tracked: IntGauge,
    /// Edge entries evicted to respect `edge.max_clients`.
    pub edge_evictions: IntCounter,
    /// Requests in flight to each upstream (holding a slot).
    pub upstream_in_flight: IntGaugeVec,
    /// Requests waiting for a slot, per upstream.
    pub upstream_queue_depth: IntGaugeVec,
    /// Seconds spent waiting in the slot queue, per upstream.
    pub upstream_queue_wait: HistogramVec,
    /// Concurrency rejections by upstream and reason (`full`, `queue_full`, `queue_timeout`).
    pub upstream_rejections: IntCounterVec,
    /// Opt-in per-tenant decisions (bounded), by tenant and outcome.
    pub tenant_decisions: IntCounterVec,
    /// Limit rule decisions by rule (`limits[].name`) and outcome (`admitted`, `limited`,
    /// `shadow_limited`, `fallback`, `failed_open`, `failed_closed`).
    pub rule_decisions: IntCounterVec,
    /// Fleet-wide concurrency leases this instance holds in Redis now.
    pub inflight_leases: IntGauge,
    /// Fleet-wide concurrency lease events: `acquired`, `refused`, `renewed`, `expired`.
    pub inflight_events: IntCounterVec,
    /// `tollgate_redis_late_replies_total{outcome}`: script calls handed off after their timeout.
    pub redis_late_replies: IntCounterVec,
    /// Usage settlements (docs/usage-cost.md) by tier and outcome: `settled`, `clamped`,
    /// `missing`, `invalid`, `refunded`, `client_gone`, `store_failed`.
    pub usage_settlements: IntCounterVec,
    /// Request counts settled after the response (docs/rules.md#counting-by-outcome), by policy
    /// (tier or rule) and outcome: `counted` (the debit stands), `given_back`, `store_failed`.
    pub count_settlements: IntCounterVec,
    /// Costs read from the request that were charged their `default`
    /// (docs/rules.md#costs-read-from-the-request), by owner (`route:<id>`, `rule:<name>`) and
    /// reason (`absent`, `malformed`).
    pub cost_defaulted: IntCounterVec,
    /// Log lines dropped because the log sink fell behind, by log (`access`, `other`).
    pub log_dropped: IntCounterVec,
    /// `log_dropped{log="access"}`, resolved once.
    pub access_log_dropped: IntCounter,
    /// Open client connections per listener (`listen[]` address).
    pub connections_open: IntGaugeVec,
    /// Connections refused by listener and scope (`listener`, `client`).
    pub connections_refused: IntCounterVec,
    /// Request-body bytes buffered now (bodies read whole before the slot stage).
    pub body_buffer_bytes: IntGauge,
    /// Request bodies by how they were read: `buffered` (whole, before the slot stage),
    /// `streamed` (too large, no declared length, or buffering off), `buffer_full` (streamed
    /// because `server.body_buffer_total_bytes` was reached).
    pub request_bodies: IntCounterVec,
    /// JWKS fetches by issuer and result: `ok`, `timeout`, `connect` (refused, TLS), `status` (not
    /// 2xx), `redirect` (refused), `too_large`, `not_json`, `no_keys`, `invalid` (no usable key),
    /// `discovery`, `tls` (no client).
    pub jwks_fetches: IntCounterVec,
    /// Usable keys of each issuer's last good JWKS.
    pub jwks_keys: IntGaugeVec,
    /// Seconds since each issuer's last good JWKS was fetched (-1: none yet).
    pub jwks_age: IntGaugeVec,
    /// JWKS keys skipped by issuer and reason (`weak`, `symmetric`, `unknown_kty`, ...).
    pub jwks_keys_rejected: IntCounterVec,
    /// Unknown-kid refetches by issuer and result: `triggered`, `throttled`.
    pub jwks_unknown_kid_refetches: IntCounterVec,
    /// Admin API writes by operation (`tenant_reset`, `key_create`, ...) and outcome: `ok`,
    /// `refused` (a 4xx answer: bad input, unknown resource), `forbidden` (a read token),
    /// `failed` (5xx: the store did not answer).
    pub admin_writes: IntCounterVec,
    /// Keys issued through the admin API whose digest is also a key of `identity.api_keys`
    /// (the file's entry wins), as of the last check (docs/live-state.md#what-is-stored).
    pub live_keys_shadowed: IntGauge,
    tenant_seen: Mutex<HashSet<String>>,
}

/// Lines the general (non-access) log writer dropped so far, read when `/metrics` is rendered.
static OTHER_DROPPED: std::sync::OnceLock<Box<dyn Fn() -> u64 + Send + Sync>> =
    std::sync::OnceLock::new();

/// Registers where the general log writer's drop count is read (once per process; later calls
/// are ignored).
pub fn count_other_log_drops(read: impl Fn() -> u64 + Send + Sync + 'static) {
    let _ = OTHER_DROPPED.set(Box::new(read));
}

/// The process-wide metrics.
pub static METRICS: Lazy<Metrics> = Lazy::new(|| {
    let latency = vec![
        0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ];
    let log_dropped = register_int_counter_vec!(
        "tollgate_log_lines_dropped_total",
        "Log lines dropped because the log sink fell behind, by log (access, other)",
        &["log"]
    )
    .unwrap();
    Metrics {
        requests: register_int_counter_vec!(
            "tollgate_requests_total",
            "Requests by route and status class",
            &["route", "status_class"]
        )
        .unwrap(),
        request_duration: register_histogram_vec!(
            "tollgate_request_duration_seconds",
            "Request duration in seconds",
            &["route"],
            latency.clone()
        )
        .unwrap(),
        decisions: register_int_counter_vec!(
            "tollgate_decisions_total",
            "Limiter decisions by layer, outcome and tier",
            &["layer", "outcome", "tier"]
        )
        .unwrap(),
        near_limit: register_int_counter_vec!(
            "tollgate_tenant_near_limit_total",
            "Tenant admissions that left under 20% of the burst",
            &["tier"]
        )
        .unwrap(),
        redis_duration: register_histogram_vec!(
            "tollgate_redis_call_duration_seconds",
            "Redis call duration in seconds",
            &["result"],
            vec![0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25]
        )
        .unwrap(),
        redis_errors: register_int_counter_vec!(
            "tollgate_redis_errors_total",
            "Redis errors by kind",
            &["kind"]
        )
        .unwrap(),
        breaker_state: register_int_gauge!(
            "tollgate_redis_breaker_state",
            "Redis circuit breaker state: 0 closed, 1 open, 2 half-open"
        )
        .unwrap(),
        breaker_transitions: register_int_counter_vec!(
            "tollgate_redis_breaker_transitions_total",
            "Redis circuit breaker transitions by target state",
            &["to"]
        )
        .unwrap(),
        degraded: register_int_gauge!(
            "tollgate_limiter_degraded",
            "1 while tenant decisions cannot use Redis"
        )
        .unwrap(),
        reloads: register_int_counter_vec!(
            "tollgate_config_reloads_total",
            "Config reloads by result",
            &["result"]
        )
        .unwrap(),
        last_reload: register_int_gauge!(
            "tollgate_config_last_reload_success_timestamp_seconds",
            "Unix time of the last successful config load"
        )
        .unwrap(),
        last_reload_ok: register_int_gauge!(
            "tollgate_config_last_reload_successful",
            "1 when the last config (re)load succeeded, 0 when it was rejected"
        )
        .unwrap(),
        edge_tracked: register_int_gauge!(
            "tollgate_edge_tracked_clients",
            "Client keys tracked by the edge limiter"
        )
        .unwrap(),
        edge_evictions: register_int_counter!(
            "tollgate_edge_evictions_total",
            "Edge entries evicted to respect edge.max_clients"
        )
        .unwrap(),
        upstream_in_flight: register_int_gauge_vec!(
            "tollgate_upstream_in_flight",
            "Requests in flight per upstream",
            &["upstream"]
        )
        .unwrap(),
        upstream_queue_depth: register_int_gauge_vec!(
            "tollgate_upstream_queue_depth",
            "Requests waiting for an upstream slot",
            &["upstream"]
        )
        .unwrap(),
        upstream_queue_wait: register_histogram_vec!(
            "tollgate_upstream_queue_wait_seconds",
            "Seconds waited for an upstream slot",
            &["upstream"],
            latency
        )
        .unwrap(),
        upstream_rejections: register_int_counter_vec!(
            "tollgate_upstream_rejections_total",
            "Concurrency rejections by upstream and reason",
            &["upstream", "reason"]
        )
        .unwrap(),
        tenant_decisions: register_int_counter_vec!(
            "tollgate_tenant_decisions_total",
            "Per-tenant decisions (opt-in, bounded by observability.tenant_metrics)",
            &["tenant", "outcome"]
        )
        .unwrap(),
        rule_decisions: register_int_counter_vec!(
            "tollgate_rule_decisions_total",
            "Limit rule decisions by rule and outcome",
            &["rule", "outcome"]
        )
        .unwrap(),
        inflight_leases: register_int_gauge!(
            "tollgate_inflight_leases",
            "Fleet-wide concurrency leases this instance holds"
        )
        .unwrap(),
        usage_settlements: register_int_counter_vec!(
            "tollgate_usage_settlements_total",
            "Usage budget settlements by tier and outcome",
            &["tier", "outcome"]
        )
        .unwrap(),
        count_settlements: register_int_counter_vec!(
            "tollgate_count_settlements_total",
            "Request counts settled after the response, by policy and outcome",
            &["policy", "outcome"]
        )
        .unwrap(),
        cost_defaulted: register_int_counter_vec!(
            "tollgate_cost_defaulted_total",
            "Costs read from the request charged their default, by owner and reason",
            &["owner", "reason"]
        )
        .unwrap(),
        inflight_events: register_int_counter_vec!(
            "tollgate_inflight_lease_events_total",
            "Fleet-wide concurrency lease events (acquired, refused, renewed, expired, orphan_released)",
            &["event"]
        )
        .unwrap(),
        redis_late_replies: register_int_counter_vec!(
            "tollgate_redis_late_replies_total",
            "Debiting script calls that got no reply within timeout_ms, waited for in the background, by how they ended (compensated, nothing_debited, undo_failed, lost, dropped)",
            &["outcome"]
        )
        .unwrap(),
        log_dropped: log_dropped.clone(),
        access_log_dropped: log_dropped.with_label_values(&["access"]),
        connections_open: register_int_gauge_vec!(
            "tollgate_connections_open",
            "Open client connections per listener",
            &["listener"]
        )
        .unwrap(),
        connections_refused: register_int_counter_vec!(
            "tollgate_connections_refused_total",
            "Client connections refused by listener and scope (listener, client)",
            &["listener", "scope"]
        )
        .unwrap(),
        body_buffer_bytes: register_int_gauge!(
            "tollgate_request_body_buffer_bytes",
            "Request-body bytes buffered now before the upstream slot stage"
        )
        .unwrap(),
        request_bodies: register_int_counter_vec!(
            "tollgate_request_bodies_total",
            "Request bodies by how they were read (buffered, streamed, buffer_full)",
            &["how"]
        )
        .unwrap(),
        jwks_fetches: register_int_counter_vec!(
            "tollgate_jwks_fetches_total",
            "JWKS fetches by issuer and result",
            &["issuer", "result"]
        )
        .unwrap(),
        jwks_keys: register_int_gauge_vec!(
            "tollgate_jwks_keys",
            "Usable keys of the issuer's last good JWKS",
            &["issuer"]
        )
        .unwrap(),
        jwks_age: register_int_gauge_vec!(
            "tollgate_jwks_age_seconds",
            "Seconds since the issuer's last good JWKS was fetched (-1: none yet)",
            &["issuer"]
        )
        .unwrap(),
        jwks_keys_rejected: register_int_counter_vec!(
            "tollgate_jwks_keys_rejected_total",
            "JWKS keys skipped by issuer and reason",
            &["issuer", "reason"]
        )
        .unwrap(),
        jwks_unknown_kid_refetches: register_int_counter_vec!(
            "tollgate_jwks_unknown_kid_refetches_total",
            "Refetches asked for by tokens with an unknown kid, by issuer and result",
            &["issuer", "result"]
        )
        .unwrap(),
        admin_writes: register_int_counter_vec!(
            "tollgate_admin_writes_total",
            "Admin API writes by operation and outcome (ok, refused, forbidden, failed)",
            &["operation", "outcome"]
        )
        .unwrap(),
        live_keys_shadowed: register_int_gauge!(
            "tollgate_live_keys_shadowed",
            "Keys issued through the admin API whose digest is also a key in the file (the file's entry wins)"
        )
        .unwrap(),
        tenant_seen: Mutex::new(HashSet::new()),
    }
});

impl Metrics {
    /// Records one Redis call (a script call with its NOSCRIPT reload and connection retry)
    /// in `tollgate_redis_duration_seconds{result="ok"|"error"}`; `seconds` is its duration.
    /// The two series are resolved once, not looked up by label per call.
    pub fn redis_call(&self, ok: bool, seconds: f64) {
        static SERIES: std::sync::OnceLock<[Histogram; 2]> = std::sync::OnceLock::new();
        let [ok_series, error_series] = SERIES.get_or_init(|| {
            ["ok", "error"].map(|result| self.redis_duration.with_label_values(&[result]))
        });
        if ok { ok_series } else { error_series }.observe(seconds);
    }

    /// Counts one decision of `layer` with `outcome`, for `tier` (`-` when none).
    pub fn decision(&self, layer: Layer, outcome: Outcome, tier: &str) {
        self.decisions
            .with_label_values(&[layer.as_str(), outcome.as_str(), tier])
            .inc();
    }

    /// Counts a per-tenant decision when enabled; at most `bound` tenants get their own series.
    pub fn tenant_decision(&self, bound: usize, tenant: &str, outcome: Outcome) {
        if bound == 0 {
            return;
        }
        let label = {
            let mut seen = self.tenant_seen.lock();
            if seen.contains(tenant) || seen.len() < bound && seen.insert(tenant.to_string()) {
                tenant
            } else {
                "other"
            }
        };
        self.tenant_decisions
            .with_label_values(&[label, outcome.as_str()])
            .inc();
    }

    /// The default registry in Prometheus text format.
    pub fn render(&self) -> Vec<u8> {
        if let Some(read) = OTHER_DROPPED.get() {
            let other = self.log_dropped.with_label_values(&["other"]);
            let now = read();
            other.inc_by(now.saturating_sub(other.get()));
        }
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&prometheus::gather(), &mut out);
        out
    }
}

/// `tollgate_requests_total{class}` values: no response written (status 0), then `1xx`..`5xx`.
pub const STATUS_CLASSES: [&str; 6] = ["none", "1xx", "2xx", "3xx", "4xx", "5xx"];

/// Index into [`STATUS_CLASSES`] of `status` (0: no response was written).
pub fn status_class_index(status: u16) -> usize {
    match status {
        0 => 0,
        100..=199 => 1,
        200..=299 => 2,
        300..=399 => 3,
        400..=499 => 4,
        _ => 5,
    }
}

/// `2xx`-style class of a status code (`none` for 0: no response was written).
pub fn status_class(status: u16) -> &'static str {
    STATUS_CLASSES[status_class_index(status)]
}
