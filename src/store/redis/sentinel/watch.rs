//! The background tasks of a sentinel-mode connection: the asking loop ([`keep_asking`]) and
//! one subscriber to the announcements of each sentinel ([`follow`]). Both hold only a weak
//! reference to the connection and end once it is dropped (a reload that replaced `redis:`).

use super::state::channels;
use super::{Sentinel, ASK_BOUND, RECHECK_EVERY, RECHECK_HELD};
use futures_util::StreamExt;
use std::sync::Weak;
use std::time::Duration;

/// Shortest time between two asks, however often they are requested.
const ASK_GAP: Duration = Duration::from_millis(20);

/// Pause before subscribing to a sentinel again after its subscription failed or ended.
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(500);

/// How often an idle subscriber checks that its connection still exists.
const ALIVE_CHECK: Duration = Duration::from_secs(1);

/// Asks the sentinels every [`RECHECK_EVERY`] ([`RECHECK_HELD`] while calls are held or no
/// master is known), and whenever poked.
pub async fn keep_asking(weak: Weak<Sentinel>) {
    loop {
        let Some(this) = weak.upgrade() else { return };
        let wait = if this.needs_care() {
            RECHECK_HELD
        } else {
            RECHECK_EVERY
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = this.poke.notified() => {}
        }
        this.ask_and_apply().await;
        drop(this);
        tokio::time::sleep(ASK_GAP).await;
    }
}

/// Follows the announcements of sentinel `index`: subscribes, hands every message to the
/// connection, and subscribes again after a failure. Each (re)subscription asks all the
/// sentinels too, since announcements may have been missed meanwhile.
pub async fn follow(weak: Weak<Sentinel>, index: usize) {
    let mut was_following = true;
    loop {
        let Some(this) = weak.upgrade() else { return };
        let client = this.links[index].client.clone();
        let label = this.links[index].label.clone();
        drop(this);
        let subscribed = tokio::time::timeout(ASK_BOUND, async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(channels()).await?;
            Ok::<_, redis::RedisError>(pubsub.into_on_message())
        })
        .await;
        match subscribed {
            Ok(Ok(mut messages)) => {
                tracing::info!(sentinel = %label, "redis sentinel: following its announcements");
                was_following = true;
                match weak.upgrade() {
                    Some(this) => this.poke.notify_one(),
                    None => return,
                }
                loop {
                    tokio::select! {
                        msg = messages.next() => {
                            let Some(msg) = msg else { break };
                            let Some(this) = weak.upgrade() else { return };
                            let payload: String = msg.get_payload().unwrap_or_default();
                            this.announce(msg.get_channel_name(), &payload, &label);
                        }
                        _ = tokio::time::sleep(ALIVE_CHECK) => {
                            if weak.strong_count() == 0 {
                                return;
                            }
                        }
                    }
                }
                tracing::warn!(sentinel = %label, "redis sentinel: lost its announcements");
            }
            failed => {
                if was_following {
                    let error = match failed {
                        Ok(Err(e)) => e.to_string(),
                        _ => "no answer in time".to_string(),
                    };
                    tracing::warn!(sentinel = %label, error,
                        "redis sentinel: cannot follow its announcements; retrying");
                }
                was_following = false;
            }
        }
        tokio::time::sleep(RESUBSCRIBE_AFTER).await;
    }
}
