//! Blocks set through the admin API (`store.blocks`, docs/live-state.md#blocks) on the request
//! path: an address or network refused at the edge (before routing and identity), a tenant once
//! identity named it, a live key once it resolved. Each is a lookup in the instance's block set
//! in memory: no Redis call.

use super::{Layer, Outcome, Rejection};
use crate::live::blocks::Block;
use crate::response::Problem;
use crate::snapshot::Snapshot;
use serde_json::json;
use std::net::IpAddr;

/// The 403 of a request `block` refuses at `now_s`: a problem naming the block (its `type`,
/// `value`, `reason`, `expires_at`, `remaining_s`) and, when the block expires, `Retry-After`
/// its remaining seconds.
pub fn refusal(block: &Block, now_s: u64, layer: Layer) -> Rejection {
    let left = block.remaining_s(now_s);
    let until = match left {
        Some(s) => format!("for {s} more seconds"),
        None => "until it is removed".to_string(),
    };
    let detail = format!(
        "blocked: {} {} ({}) {until}",
        block.kind.as_str(),
        block.value,
        block.reason
    );
    let p = Problem::status(403, detail)
        .with("reason", json!("blocked"))
        .with("block", block.view(now_s));
    Rejection::new(layer, Outcome::Rejected, p).retry_after(left)
}

/// The refusal of client address `client` when a block in force holds it.
pub fn ip(snap: &Snapshot, client: IpAddr, now_s: u64) -> Option<Rejection> {
    let blocks = snap.blocks.as_ref()?.current();
    let b = blocks.ip(client, now_s)?;
    Some(refusal(b, now_s, Layer::Edge))
}

/// The refusal of tenant `tenant` when a block in force names it.
pub fn tenant(snap: &Snapshot, tenant: &str, now_s: u64) -> Option<Rejection> {
    let blocks = snap.blocks.as_ref()?.current();
    let b = blocks.tenant(tenant, now_s)?;
    Some(refusal(b, now_s, Layer::Identity))
}

/// The refusal of live key `id` when a block in force names it.
pub fn key(snap: &Snapshot, id: &str, now_s: u64) -> Option<Rejection> {
    let blocks = snap.blocks.as_ref()?.current();
    let b = blocks.key(id, now_s)?;
    Some(refusal(b, now_s, Layer::Identity))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::blocks::Kind;

    #[test]
    fn refusal_names_the_block_and_its_time() {
        let b = Block {
            kind: Kind::Ip,
            value: "10.0.0.0/8".into(),
            reason: "abuse".into(),
            created_at: 0,
            expires_at: Some(100),
        };
        let r = refusal(&b, 40, Layer::Edge);
        assert_eq!(r.problem.status, 403);
        assert_eq!(r.problem.extensions["block"]["remaining_s"], json!(60));
        assert_eq!(r.problem.extensions["block"]["type"], json!("ip"));
        assert!(
            r.problem.detail.contains("10.0.0.0/8 (abuse) for 60"),
            "{}",
            r.problem.detail
        );
        let headers = r.response_headers();
        assert!(
            headers.contains(&("Retry-After", "60".to_string())),
            "{headers:?}"
        );
        let forever = Block {
            expires_at: None,
            ..b
        };
        let r = refusal(&forever, 40, Layer::Edge);
        assert!(r
            .response_headers()
            .iter()
            .all(|(n, _)| *n != "Retry-After"));
    }
}
