//! API keys: the key arrives in one request header (default `x-api-key`); the config stores only
//! the lower-case hex SHA-256 digest of each key, never the key itself.
//!
//! Lookup hashes the presented key (a key the thread saw recently is not hashed again,
//! [`key_digest`](super::key_digest)) and looks the 32-byte digest up in a hash map built once per
//! config snapshot. Because the map is keyed by the digest, lookup time reveals nothing useful
//! about the key, so no constant-time comparison is needed. Keys are never logged.

use super::IdentityError;
use crate::config::ApiKeySettings;
use crate::hashing::HashMap;
use http::header::{HeaderMap, HeaderName};
use std::fmt;

/// Lower-case hex SHA-256 of an API key (64 characters), as stored in
/// `identity.api_keys.keys[].sha256` and printed by `tollgate hash-key`.
///
/// `hash_key("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"`.
pub fn hash_key(key: &str) -> String {
    hex::encode(key_digest(key))
}

/// SHA-256 of an API key, as validation stores it in `ApiKeyEntry::sha256`.
pub fn key_digest(key: &str) -> [u8; 32] {
    digest(key.as_bytes())
}

/// SHA-256 of a presented key, remembered per thread for the keys clients repeat.
fn digest(key: &[u8]) -> [u8; 32] {
    super::key_digest::digest(key)
}

/// The configured API keys of one config snapshot, indexed by SHA-256 digest.
#[derive(Clone)]
pub struct ApiKeyStore {
    header: HeaderName,
    by_digest: HashMap<[u8; 32], Entry>,
}

/// What one configured key resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Tenant id (`identity.api_keys.keys[].tenant`).
    pub tenant: String,
    /// Explicit tier of this key, if configured.
    pub tier: Option<String>,
}

impl fmt::Debug for ApiKeyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKeyStore")
            .field("header", &self.header)
            .field("keys", &self.by_digest.len())
            .finish()
    }
}

impl ApiKeyStore {
    /// Indexes the configured keys by digest. `settings` is validated (a valid header name,
    /// well-formed and unique digests), so this cannot fail.
    pub fn new(settings: &ApiKeySettings) -> ApiKeyStore {
        let by_digest = settings
            .keys
            .iter()
            .map(|k| {
                let entry = Entry {
                    tenant: k.tenant.clone(),
                    tier: k.tier.clone(),
                };
                (k.sha256, entry)
            })
            .collect();
        ApiKeyStore {
            header: settings.header.clone(),
            by_digest,
        }
    }

    /// The header the key is read from (lower case).
    pub fn header(&self) -> &HeaderName {
        &self.header
    }

    /// Number of configured keys.
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// True when no key is configured.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    /// Looks up the key presented in `headers`.
    ///
    /// - `Ok(None)`: the header is absent (no API key presented);
    /// - `Ok(Some(entry))`: exactly one value whose SHA-256 matches a configured digest;
    /// - `Err(DuplicateApiKey)`: the header occurs more than once;
    /// - `Err(UnknownApiKey)`: one value that matches no digest (an empty value included).
    ///
    /// The header name is matched case-insensitively (`http::HeaderMap` stores names in lower
    /// case). The value is hashed byte for byte, without trimming.
    pub fn lookup(&self, headers: &HeaderMap) -> Result<Option<&Entry>, IdentityError> {
        let mut values = headers.get_all(&self.header).iter();
        let Some(value) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(IdentityError::DuplicateApiKey);
        }
        self.by_digest
            .get(&digest(value.as_bytes()))
            .map(Some)
            .ok_or(IdentityError::UnknownApiKey)
    }
}

#[cfg(test)]
mod tests;
