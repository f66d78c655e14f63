//! `upstreams:`: backends (resolved once, here), concurrency limits and their queue, timeouts,
//! health checks, TLS and HTTP/2.

use super::common::Check;
use super::tls;
use crate::config::model::{H2Settings, HealthCheckSettings, QueueSettings, UpstreamSettings};
use crate::config::raw::RawUpstream;
use std::collections::BTreeMap;
use std::net::ToSocketAddrs;
use std::time::Duration;

/// `upstreams:`: at least one; the valid ones by name.
pub(super) fn settings(
    c: &mut Check,
    raw: &BTreeMap<String, RawUpstream>,
) -> BTreeMap<String, UpstreamSettings> {
    if raw.is_empty() {
        c.err("upstreams", "needs at least one upstream");
    }
    let mut upstreams = BTreeMap::new();
    for (name, u) in raw {
        if let Some(settings) = upstream_settings(c, name, u) {
            upstreams.insert(name.clone(), settings);
        }
    }
    upstreams
}

/// `upstreams.<name>`.
fn upstream_settings(c: &mut Check, name: &str, u: &RawUpstream) -> Option<UpstreamSettings> {
    let path = format!("upstreams.{name}");
    if u.backends.is_empty() {
        c.err(format!("{path}.backends"), "needs at least one backend");
    }
    let mut backends = Vec::new();
    for (i, b) in u.backends.iter().enumerate() {
        // Resolved once here (blocking DNS is fine: config loading is off the request path).
        if let Some((_, rest)) = b.split_once("://") {
            let host = rest.trim_end_matches('/');
            c.err(
                format!("{path}.backends[{i}]"),
                format!("\"{b}\": drop the scheme, a backend is host:port (\"{host}\"); for HTTPS to the backends set {path}.tls"),
            );
            continue;
        }
        match b.to_socket_addrs().map(|mut a| a.next()) {
            Ok(Some(addr)) => {
                if backends.contains(&addr) {
                    c.err(
                        format!("{path}.backends[{i}]"),
                        format!("duplicate backend \"{b}\""),
                    );
                }
                backends.push(addr)
            }
            _ => c.err(
                format!("{path}.backends[{i}]"),
                format!("\"{b}\" is not a resolvable host:port"),
            ),
        }
    }
    let max_concurrency = u
        .max_concurrency
        .and_then(|v| c.positive(&format!("{path}.max_concurrency"), v))
        .map(|v| v.min(u32::MAX as u64) as u32);
    let queue = u.queue.as_ref().and_then(|q| {
        if max_concurrency.is_none() {
            c.err(format!("{path}.queue"), "needs max_concurrency");
        }
        let max = c.positive(&format!("{path}.queue.max"), q.max)?;
        let (timeout, timeout_path) = c.duration_in(
            &format!("{path}.queue"),
            ("timeout", q.timeout.as_deref()),
            ("timeout_ms", q.timeout_ms),
            1,
        );
        let Some(timeout) = timeout else {
            c.err(
                timeout_path,
                "is required (how long a request may wait, e.g. 300ms)",
            );
            return None;
        };
        let timeout = c.positive(&timeout_path, timeout)?;
        let max = max.min(u32::MAX as u64) as u32;
        let per_tenant = c.opt_positive(
            &format!("{path}.queue.max_per_tenant"),
            q.max_per_tenant,
            u64::from(max),
        );
        if per_tenant > u64::from(max) {
            c.err(
                format!("{path}.queue.max_per_tenant"),
                format!("must not exceed queue.max ({max}), got {per_tenant}"),
            );
        }
        Some(QueueSettings {
            max,
            timeout: Duration::from_millis(timeout),
            fair: q.fair.unwrap_or(false),
            max_per_tenant: per_tenant.min(u64::from(max)) as u32,
        })
    });
    let max_concurrency_per_tenant = u
        .max_concurrency_per_tenant
        .and_then(|v| c.positive(&format!("{path}.max_concurrency_per_tenant"), v))
        .map(|v| v.min(u32::MAX as u64) as u32);
    if max_concurrency_per_tenant.is_some() && max_concurrency.is_none() {
        c.err(
            format!("{path}.max_concurrency_per_tenant"),
            "needs max_concurrency",
        );
    }
    let health_check = u.health_check.as_ref().map(|h| {
        let p = h.path.clone().unwrap_or_else(|| "/healthz".into());
        if !p.starts_with('/') {
            c.err(format!("{path}.health_check.path"), "must start with /");
        }
        let (interval, interval_path) = c.duration_in(
            &format!("{path}.health_check"),
            ("interval", h.interval.as_deref()),
            ("interval_s", h.interval_s),
            1000,
        );
        HealthCheckSettings {
            path: p,
            interval: Duration::from_secs(c.opt_positive(&interval_path, interval, 5)),
        }
    });
    let (retry_after, retry_after_path) = c.duration_in(
        &path,
        ("retry_after", u.retry_after.as_deref()),
        ("retry_after_s", u.retry_after_s),
        1000,
    );
    let (connect, connect_path) = c.duration_in(
        &path,
        ("connect_timeout", u.connect_timeout.as_deref()),
        ("connect_timeout_ms", u.connect_timeout_ms),
        1,
    );
    let (read, read_path) = c.duration_in(
        &path,
        ("read_timeout", u.read_timeout.as_deref()),
        ("read_timeout_ms", u.read_timeout_ms),
        1,
    );
    Some(UpstreamSettings {
        name: name.to_string(),
        backends,
        max_concurrency,
        max_concurrency_per_tenant,
        queue,
        retry_after_s: c.opt_positive(&retry_after_path, retry_after, 1),
        connect_timeout: Duration::from_millis(c.opt_positive(&connect_path, connect, 1_000)),
        read_timeout: Duration::from_millis(c.opt_positive(&read_path, read, 30_000)),
        health_check,
        h2: h2_settings(c, &path, u),
        tls: u
            .tls
            .as_ref()
            .map(|t| tls::upstream_tls(c, &path, t, &u.backends)),
    })
}

/// `h2` and `h2_max_streams` of `upstreams.<name>` at `path`: `h2_max_streams` is 1 to 1000 and
/// needs `h2: true`.
fn h2_settings(c: &mut Check, path: &str, u: &RawUpstream) -> Option<H2Settings> {
    let streams_path = format!("{path}.h2_max_streams");
    if u.h2 != Some(true) {
        if u.h2_max_streams.is_some() {
            c.err(streams_path, "needs h2: true");
        }
        return None;
    }
    let max_streams = c.opt_positive_at_most(&streams_path, u.h2_max_streams, 100, 1000);
    Some(H2Settings {
        max_streams: max_streams as usize,
    })
}
