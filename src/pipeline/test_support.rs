//! Shared by the stage tests: a snapshot built from YAML (no network: Redis is only contacted
//! on a first decision, which these tests never make) and limiter decisions.

use crate::limit::Decision as Bucket;
use crate::snapshot::Snapshot;

/// One listener, upstream `orders` on a local address, and `rest` (routes, tiers, ...).
pub fn snapshot(rest: &str) -> Snapshot {
    let yaml = format!(
        "listen: [\"127.0.0.1:8080\"]\nupstreams:\n  orders: {{ backends: [\"127.0.0.1:9001\"], max_concurrency: 2, max_concurrency_per_tenant: 1 }}\n{rest}"
    );
    let config = crate::config::parse(&yaml).unwrap_or_else(|e| panic!("{e:?}"));
    Snapshot::build(config, None).unwrap_or_else(|e| panic!("{e:?}"))
}

/// An admitting bucket decision leaving `remaining` tokens.
pub fn admitted(remaining: u64) -> Bucket {
    Bucket {
        admitted: true,
        remaining,
        retry_after_ms: 0,
        full_ms: 1_000,
    }
}

/// A refusing bucket decision that could admit in `retry_after_ms`.
pub fn refused(retry_after_ms: u64) -> Bucket {
    Bucket {
        admitted: false,
        remaining: 0,
        retry_after_ms,
        full_ms: 60_000,
    }
}
