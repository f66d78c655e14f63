//! API keys issued through the admin API: the record kept in Redis (never the secret, only its
//! SHA-256), how a secret is made, and whether a presented digest is valid now (pure).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};

/// Every issued secret starts with this, so leaked keys are recognisable (secret scanners).
pub const SECRET_PREFIX: &str = "tg_";

/// Random bytes in a secret: 256 bits from the OS RNG.
pub const SECRET_BYTES: usize = 32;

/// A live API key's record (stored as JSON under [`crate::store::redis::keys::live_record_key`]).
/// Times are Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveKey {
    pub id: String,
    pub tenant: String,
    pub tier: String,
    pub name: String,
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<u64>,
    /// Hex SHA-256 of the current secret.
    pub digest: String,
    /// Hex SHA-256 of the secret replaced by the last rotation, valid until `previous_until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_until: Option<u64>,
    #[serde(default)]
    pub rotated_at: Option<u64>,
}

/// Why a known key does not authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    Revoked,
    Expired,
    /// A rotated-out secret past its grace period.
    GraceOver,
    /// Not one of this record's digests (a record served for another digest).
    Unknown,
}

impl LiveKey {
    /// Whether the secret of `digest_hex` authenticates at `now_s`.
    pub fn check(&self, digest_hex: &str, now_s: u64) -> Result<(), Invalid> {
        if self.revoked_at.is_some() {
            return Err(Invalid::Revoked);
        }
        if self.expires_at.is_some_and(|t| now_s >= t) {
            return Err(Invalid::Expired);
        }
        if self.digest == digest_hex {
            return Ok(());
        }
        if self.previous_digest.as_deref() == Some(digest_hex) {
            return match self.previous_until {
                Some(until) if now_s < until => Ok(()),
                _ => Err(Invalid::GraceOver),
            };
        }
        Err(Invalid::Unknown)
    }

    /// The JSON shown by the admin API (digests are not shown).
    pub fn view(&self) -> serde_json::Value {
        let t = |s: Option<u64>| s.map(crate::live::rfc3339);
        serde_json::json!({
            "id": self.id,
            "tenant": self.tenant,
            "tier": self.tier,
            "name": self.name,
            "created_at": crate::live::rfc3339(self.created_at),
            "expires_at": t(self.expires_at),
            "revoked_at": t(self.revoked_at),
            "rotated_at": t(self.rotated_at),
            "previous_secret_valid_until": t(self.previous_until),
            "status": if self.revoked_at.is_some() { "revoked" } else { "active" },
        })
    }
}

/// A new secret: [`SECRET_PREFIX`] and [`SECRET_BYTES`] random bytes from the OS RNG,
/// base64url without padding (46 characters).
pub fn new_secret() -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes).expect("the OS random number generator failed");
    format!("{SECRET_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// A new key id: `key_` and 16 hex digits from the OS RNG.
pub fn new_id() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the OS random number generator failed");
    format!("key_{}", hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> LiveKey {
        LiveKey {
            id: "key_1".into(),
            tenant: "acme".into(),
            tier: "free".into(),
            name: "ci".into(),
            created_at: 100,
            expires_at: None,
            revoked_at: None,
            digest: "new".into(),
            previous_digest: Some("old".into()),
            previous_until: Some(200),
            rotated_at: Some(150),
        }
    }

    #[test]
    fn current_and_rotated_secrets_by_time() {
        let k = key();
        assert_eq!(k.check("new", 150), Ok(()));
        assert_eq!(k.check("old", 199), Ok(()));
        assert_eq!(k.check("old", 200), Err(Invalid::GraceOver));
        assert_eq!(k.check("other", 150), Err(Invalid::Unknown));
        let mut e = key();
        e.expires_at = Some(160);
        assert_eq!(e.check("new", 160), Err(Invalid::Expired));
        let mut r = key();
        r.revoked_at = Some(120);
        assert_eq!(r.check("new", 150), Err(Invalid::Revoked));
    }

    #[test]
    fn secrets_are_long_prefixed_and_distinct() {
        let a = new_secret();
        assert!(a.starts_with("tg_") && a.len() == 46, "{a}");
        assert_ne!(a, new_secret());
        assert!(new_id().starts_with("key_"));
    }
}
