//! Adapters between a Pingora [`Session`] and the pipeline's stages: the waits and reads a stage
//! needs from the connection.

use pingora::prelude::*;
use pingora::proxy::Session;
use pingora::ErrorType;
use std::time::Duration;

/// Waits `delay_ms` for a `leaky_bucket` slot on a timer (never blocking a thread). While no
/// request body is pending, a client that goes away is noticed at once and the wait ends with
/// an error (the caller gives the slot back). With a body pending the wait is not interrupted.
pub async fn wait_for_slot(session: &mut Session, delay_ms: u64) -> Result<()> {
    let sleep = tokio::time::sleep(Duration::from_millis(delay_ms));
    tokio::pin!(sleep);
    let mut probe = session.as_downstream_mut().is_body_done();
    loop {
        tokio::select! {
            _ = &mut sleep => return Ok(()),
            read = session.as_downstream_mut().read_body_or_idle(true), if probe => {
                if read.is_err() {
                    return Error::e_explain(
                        ErrorType::ConnectionClosed,
                        "client left while delayed for its leaky_bucket slot",
                    )
                    .map_err(|e| e.into_down());
                }
                probe = false;
            }
        }
    }
}
