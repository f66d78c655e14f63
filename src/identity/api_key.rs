//! API keys: the key arrives in one request header (default `x-api-key`); the config stores only
//! the lower-case hex SHA-256 digest of each key, never the key itself.
//!
//! Lookup hashes the presented key and looks the 32-byte digest up in a hash map built once per
//! config snapshot. Because the map is keyed by the digest, lookup time reveals nothing useful
//! about the key, so no constant-time comparison is needed. Keys are never logged.

use super::IdentityError;
use crate::config::{ApiKeySettings, ConfigError};
use http::header::{HeaderMap, HeaderName};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fmt;

/// Lower-case hex SHA-256 of an API key (64 characters), as stored in
/// `identity.api_keys.keys[].sha256` and printed by `tollgate hash-key`.
///
/// `hash_key("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"`.
pub fn hash_key(key: &str) -> String {
    hex::encode(digest(key.as_bytes()))
}

fn digest(key: &[u8]) -> [u8; 32] {
    Sha256::digest(key).into()
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
    /// Builds the digest map. Errors name the field path
    /// (`identity.api_keys.keys[2].sha256: ...`).
    pub fn build(settings: &ApiKeySettings) -> Result<ApiKeyStore, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let header = match HeaderName::from_bytes(settings.header.as_bytes()) {
            Ok(h) => Some(h),
            Err(_) => {
                errors.push(ConfigError::new(
                    "identity.api_keys.header",
                    format!("\"{}\" is not a valid header name", settings.header),
                ));
                None
            }
        };
        let mut by_digest = HashMap::with_capacity(settings.keys.len());
        for (i, k) in settings.keys.iter().enumerate() {
            let path = format!("identity.api_keys.keys[{i}].sha256");
            let mut d = [0u8; 32];
            if k.sha256.len() != 64 || hex::decode_to_slice(&k.sha256, &mut d).is_err() {
                errors.push(ConfigError::new(path, "must be 64 hex digits"));
                continue;
            }
            let entry = Entry {
                tenant: k.tenant.clone(),
                tier: k.tier.clone(),
            };
            if by_digest.insert(d, entry).is_some() {
                errors.push(ConfigError::new(path, "duplicate key digest"));
            }
        }
        match header {
            Some(header) if errors.is_empty() => Ok(ApiKeyStore { header, by_digest }),
            _ => Err(errors),
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
mod tests {
    use super::*;
    use crate::config::ApiKeyEntry;
    use http::HeaderValue;

    fn settings() -> ApiKeySettings {
        ApiKeySettings {
            header: "x-api-key".into(),
            keys: vec![
                ApiKeyEntry {
                    sha256: hash_key("acme-secret-key"),
                    tenant: "acme".into(),
                    tier: Some("pro".into()),
                },
                ApiKeyEntry {
                    sha256: hash_key("globex-key"),
                    tenant: "globex".into(),
                    tier: None,
                },
            ],
        }
    }

    #[test]
    fn hash_key_known_vectors() {
        assert_eq!(
            hash_key("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hash_key(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(hash_key("abc").len(), 64);
    }

    #[test]
    fn hit_returns_entry() {
        let store = ApiKeyStore::build(&settings()).unwrap();
        assert_eq!(store.len(), 2);
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("acme-secret-key"));
        let e = store.lookup(&h).unwrap().unwrap();
        assert_eq!(e.tenant, "acme");
        assert_eq!(e.tier.as_deref(), Some("pro"));
    }

    #[test]
    fn miss_is_unknown_key() {
        let store = ApiKeyStore::build(&settings()).unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("acme-secret-kez"));
        assert_eq!(store.lookup(&h), Err(IdentityError::UnknownApiKey));
        // The digest itself is not a key.
        let digest = HeaderValue::from_str(&hash_key("acme-secret-key")).unwrap();
        h.insert("x-api-key", digest);
        assert_eq!(store.lookup(&h), Err(IdentityError::UnknownApiKey));
        // Empty value.
        h.insert("x-api-key", HeaderValue::from_static(""));
        assert_eq!(store.lookup(&h), Err(IdentityError::UnknownApiKey));
    }

    #[test]
    fn absent_header_is_none() {
        let store = ApiKeyStore::build(&settings()).unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-other", HeaderValue::from_static("acme-secret-key"));
        assert_eq!(store.lookup(&h), Ok(None));
    }

    #[test]
    fn duplicate_header_is_rejected() {
        let store = ApiKeyStore::build(&settings()).unwrap();
        let mut h = HeaderMap::new();
        h.append("x-api-key", HeaderValue::from_static("acme-secret-key"));
        h.append("X-Api-Key", HeaderValue::from_static("acme-secret-key"));
        assert_eq!(store.lookup(&h), Err(IdentityError::DuplicateApiKey));
        // Even when one of them is valid and the other is not.
        let mut h = HeaderMap::new();
        h.append("x-api-key", HeaderValue::from_static("globex-key"));
        h.append("x-api-key", HeaderValue::from_static("nope"));
        assert_eq!(store.lookup(&h), Err(IdentityError::DuplicateApiKey));
    }

    #[test]
    fn header_name_is_case_insensitive() {
        let store = ApiKeyStore::build(&settings()).unwrap();
        for name in ["X-API-KEY", "X-Api-Key", "x-api-key"] {
            let mut h = HeaderMap::new();
            h.insert(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_static("globex-key"),
            );
            assert_eq!(
                store.lookup(&h).unwrap().unwrap().tenant,
                "globex",
                "{name}"
            );
        }
    }

    #[test]
    fn custom_header_name() {
        let mut s = settings();
        s.header = "x-tenant-key".into();
        let store = ApiKeyStore::build(&s).unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("globex-key"));
        assert_eq!(store.lookup(&h), Ok(None));
        h.insert("X-Tenant-Key", HeaderValue::from_static("globex-key"));
        assert_eq!(store.lookup(&h).unwrap().unwrap().tenant, "globex");
    }

    #[test]
    fn key_value_is_case_sensitive() {
        let store = ApiKeyStore::build(&settings()).unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("ACME-SECRET-KEY"));
        assert_eq!(store.lookup(&h), Err(IdentityError::UnknownApiKey));
    }

    #[test]
    fn build_rejects_bad_and_duplicate_digests_with_paths() {
        let mut s = settings();
        s.keys.push(ApiKeyEntry {
            sha256: "xyz".into(),
            tenant: "t".into(),
            tier: None,
        });
        s.keys.push(ApiKeyEntry {
            sha256: hash_key("globex-key"),
            tenant: "t2".into(),
            tier: None,
        });
        let errs = ApiKeyStore::build(&s).unwrap_err();
        let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(errs.len(), 2, "{text:?}");
        assert_eq!(errs[0].path, "identity.api_keys.keys[2].sha256");
        assert_eq!(errs[1].path, "identity.api_keys.keys[3].sha256");
        assert!(errs[1].reason.contains("duplicate"));
    }

    #[test]
    fn debug_does_not_show_digests() {
        let store = ApiKeyStore::build(&settings()).unwrap();
        let dbg = format!("{store:?}");
        assert!(!dbg.contains(&hash_key("globex-key")), "{dbg}");
        assert!(dbg.contains("keys: 2"), "{dbg}");
    }
}
