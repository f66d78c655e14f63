//! Stage 1, edge: the per-client-IP limiter in memory, before routing and identity.

use super::{Decision, Layer, Outcome, Rejection};
use crate::config::EdgeSettings;
use crate::edge::{self, EdgeOutcome};
use crate::response::{self, Problem};
use crate::snapshot::App;
use serde_json::json;
use std::net::IpAddr;

/// Debits `client`'s edge bucket (memory, `app`'s stores; time from `app.now_ms()`).
pub fn check(app: &App, settings: &EdgeSettings, client: IpAddr) -> EdgeOutcome {
    let cells = || app.edge_cells(settings.max_clients);
    edge::check_with_algorithm(settings, &app.edge_buckets, cells, client, app.now_ms())
}

/// The decision for an edge `outcome`: `None` when the edge did not apply (exempt client),
/// else admit, or a rejection with status `status` (`response.status`), problem type
/// `quota-exceeded`, `violated-policies: ["edge"]` and `Retry-After` when the bucket can ever
/// admit; shadowed when `shadow`.
pub fn judge(
    settings: &EdgeSettings,
    status: u16,
    outcome: EdgeOutcome,
    shadow: bool,
) -> Option<Decision> {
    match outcome {
        EdgeOutcome::Skipped => None,
        EdgeOutcome::Admitted(_) => Some(Decision::Admit),
        EdgeOutcome::Limited(d) => {
            let problem = Problem::typed(
                status,
                response::QUOTA_EXCEEDED,
                "Too many requests",
                format!(
                    "per-client limit of the edge policy exceeded ({} requests burst)",
                    settings.rate.burst
                ),
            )
            .with("violated-policies", json!(["edge"]));
            let r = Rejection::new(Layer::Edge, Outcome::Limited, problem)
                .retry_after(d.retry_after_s());
            Some(Decision::refuse(r, shadow))
        }
    }
}

#[cfg(test)]
mod tests;
