//! Edge stage: per-client-IP token buckets in process memory, before routing and identity.
//!
//! Cheap and coarse; needs no Redis. Requests rejected here never reach identity, Redis or the
//! backend. The bucket store outlives config reloads, so a reload (even one that changes the edge
//! numbers) never hands a client a fresh burst: the new `limit`/`burst` apply to the live bucket.

use crate::config::EdgeSettings;
use crate::http::client_ip;
use crate::limit::algorithm::Algorithm;
use crate::limit::Decision;
use crate::store::memory::algo_store::AlgoStore;
pub use crate::store::memory::bucket_store::{BucketStore, ClientKey};
use std::net::IpAddr;

/// Result of the edge stage for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeOutcome {
    /// No edge limiter configured, or the client is exempt.
    Skipped,
    Admitted(Decision),
    Limited(Decision),
}

/// Runs the edge limiter with its configured algorithm (`edge.algorithm`): `token_bucket` in
/// `buckets`, `gcra` in the store `cells` returns (created on first use; separate stores, so
/// switching on reload starts afresh).
pub fn check_with_algorithm<'a>(
    settings: &EdgeSettings,
    buckets: &BucketStore,
    cells: impl FnOnce() -> &'a AlgoStore<IpAddr>,
    client: IpAddr,
    now_ms: u64,
) -> EdgeOutcome {
    if settings.algorithm == Algorithm::TokenBucket {
        return check(settings, buckets, client, now_ms);
    }
    if settings.exempt.iter().any(|n| n.contains(&client)) {
        return EdgeOutcome::Skipped;
    }
    let key = client_ip::key_of(client, settings.ipv6_prefix);
    let (o, _) = cells().decide(&key, settings.algorithm, now_ms, &settings.rate, 1, 0);
    if o.decision.admitted {
        EdgeOutcome::Admitted(o.decision)
    } else {
        EdgeOutcome::Limited(o.decision)
    }
}

/// Runs the edge limiter for `client` (already normalised) at `now_ms`.
pub fn check(
    settings: &EdgeSettings,
    store: &BucketStore,
    client: IpAddr,
    now_ms: u64,
) -> EdgeOutcome {
    if settings.exempt.iter().any(|n| n.contains(&client)) {
        return EdgeOutcome::Skipped;
    }
    let key = client_ip::key_of(client, settings.ipv6_prefix);
    let d = store.check(&key.into(), now_ms, &settings.rate, 1);
    if d.admitted {
        EdgeOutcome::Admitted(d)
    } else {
        EdgeOutcome::Limited(d)
    }
}
