//! The quota stage's background loops (fleet heartbeat, lease return) share one shape: on every
//! tick, act through the *current* snapshot's quota service (a reload may have replaced it), and
//! once more when graceful shutdown starts.

use crate::pending::Owed;
use crate::quota::QuotaService;
use crate::snapshot::App;
use pingora::server::ShutdownWatch;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Runs `act(quota, false)` every `every` (missed ticks are delayed, not bunched) until
/// shutdown starts, then `act(quota, true)` once and returns. Ticks without a quota service (no
/// tiers configured) do nothing. `owed` stays counted until that final act is done, so the idle
/// exit (`runtime::idle_exit`) never cuts it short. Every tick and the final one also run
/// `retired_act` on each tenant stage a reload retired that still holds leases ([`App::retire`]).
pub async fn run_every<F, Fut, R, RFut>(
    app: &App,
    every: Duration,
    mut shutdown: ShutdownWatch,
    owed: &Owed,
    act: F,
    retired_act: R,
) where
    F: Fn(Arc<QuotaService>, bool) -> Fut,
    Fut: Future<Output = ()>,
    R: Fn(Arc<QuotaService>) -> RFut,
    RFut: Future<Output = ()>,
{
    let retired = || async {
        for q in app.retired() {
            retired_act(q).await;
        }
    };
    let _owed = owed.take();
    let current = || app.snapshot.load().quota.clone();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if let Some(q) = current() {
                    act(q, false).await;
                }
                retired().await;
            }
            _ = shutdown.changed() => {
                if *shutdown.borrow() {
                    if let Some(q) = current() {
                        act(q, true).await;
                    }
                    retired().await;
                    return;
                }
            }
        }
    }
}
