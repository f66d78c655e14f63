//! Where a running config came from: the file text, its SHA-256 and the load time (admin API
//! `GET /v1/config`).

/// What a config was loaded from: SHA-256 of the file bytes, when, and the text itself.
/// Empty (default) for a config parsed from a string ([`super::parse`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConfigSource {
    /// Lower-case hex SHA-256 of the file bytes as read.
    pub sha256: String,
    /// Load time, Unix seconds (UTC).
    pub loaded_at_s: u64,
    /// The file text (shown by `GET /v1/config` with secrets redacted, never as is).
    pub text: std::sync::Arc<str>,
}

impl ConfigSource {
    /// The source record of file text `text` read now.
    pub fn of(text: &str) -> Self {
        use sha2::Digest;
        let loaded_at_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        ConfigSource {
            sha256: hex::encode(sha2::Sha256::digest(text.as_bytes())),
            loaded_at_s,
            text: text.into(),
        }
    }
}
