//! The identity stage's lookup of API keys issued through the admin API (`store.keys`,
//! docs/live-state.md): a key the file does not know is resolved by the per-instance cache, else
//! one Redis call. A key the file knows is the file's (it wins on a digest in both).

use super::{Layer, Outcome, Rejection};
use crate::identity::{Identity, IdentityError, Method};
use crate::live::Resolved;
use crate::response::Problem;
use crate::snapshot::Snapshot;
use http::HeaderMap;

/// `Retry-After` of the 503 for a key that could not be checked, seconds.
pub const UNAVAILABLE_RETRY_AFTER_S: u64 = 1;

/// The identity of the one API key presented in `headers` when it is a live key: `None` when
/// live keys are off, no single key is presented, or the file knows it (the file's stage
/// decides); an unknown, revoked or expired key is the file stage's 401; a key never seen while
/// Redis does not answer is a 503 with `Retry-After`.
pub async fn identify(
    snap: &Snapshot,
    headers: &HeaderMap,
    now_s: u64,
) -> Option<Result<Identity, Rejection>> {
    let (live, quota) = (snap.live.as_ref()?, snap.quota.as_ref()?);
    if !live.settings.keys {
        return None;
    }
    let header = snap.auth.live_key_header();
    let mut values = headers.get_all(&header).iter();
    let value = values.next()?;
    if values.next().is_some() || snap.auth.file_knows_key(headers) {
        return None;
    }
    let digest = crate::identity::key_digest::digest(value.as_bytes());
    let unknown = || {
        Some(Err(super::identity::rejection(
            &IdentityError::UnknownApiKey,
        )))
    };
    match live.resolve(&quota.redis, digest).await {
        Resolved::Found(key) => {
            if key.check(&hex::encode(digest), now_s).is_err() {
                return unknown();
            }
            if let Some(r) = super::live_block::key(snap, &key.id, now_s) {
                return Some(Err(r));
            }
            if !snap.auth.has_tier(&key.tier) {
                let e = IdentityError::UnknownTier(key.tier.clone());
                return Some(Err(super::identity::rejection(&e)));
            }
            Some(Ok(Identity {
                tenant: key.tenant.clone(),
                tier: Some(key.tier.clone()),
                method: Method::ApiKey,
                claims: None,
            }))
        }
        Resolved::Unknown => unknown(),
        Resolved::Unavailable(fault) => {
            let detail = format!(
                "the key store did not answer ({}); this API key could not be checked, retry later",
                fault.as_str()
            );
            let problem = Problem::status(503, detail);
            let retry = vec![("Retry-After", UNAVAILABLE_RETRY_AFTER_S.to_string())];
            Some(Err(Rejection::new(
                Layer::Identity,
                Outcome::Rejected,
                problem,
            )
            .with_headers(retry)))
        }
    }
}
