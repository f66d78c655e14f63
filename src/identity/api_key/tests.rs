use super::*;
use crate::config::ApiKeyEntry;
use http::HeaderValue;

fn settings() -> ApiKeySettings {
    ApiKeySettings {
        header: HeaderName::from_static("x-api-key"),
        keys: vec![
            ApiKeyEntry {
                sha256: key_digest("acme-secret-key"),
                tenant: "acme".into(),
                tier: Some("pro".into()),
            },
            ApiKeyEntry {
                sha256: key_digest("globex-key"),
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
    let store = ApiKeyStore::new(&settings());
    assert_eq!(store.len(), 2);
    let mut h = HeaderMap::new();
    h.insert("x-api-key", HeaderValue::from_static("acme-secret-key"));
    let e = store.lookup(&h).unwrap().unwrap();
    assert_eq!(e.tenant, "acme");
    assert_eq!(e.tier.as_deref(), Some("pro"));
}

#[test]
fn miss_is_unknown_key() {
    let store = ApiKeyStore::new(&settings());
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
    let store = ApiKeyStore::new(&settings());
    let mut h = HeaderMap::new();
    h.insert("x-other", HeaderValue::from_static("acme-secret-key"));
    assert_eq!(store.lookup(&h), Ok(None));
}

#[test]
fn duplicate_header_is_rejected() {
    let store = ApiKeyStore::new(&settings());
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
    let store = ApiKeyStore::new(&settings());
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
    s.header = HeaderName::from_static("x-tenant-key");
    let store = ApiKeyStore::new(&s);
    let mut h = HeaderMap::new();
    h.insert("x-api-key", HeaderValue::from_static("globex-key"));
    assert_eq!(store.lookup(&h), Ok(None));
    h.insert("X-Tenant-Key", HeaderValue::from_static("globex-key"));
    assert_eq!(store.lookup(&h).unwrap().unwrap().tenant, "globex");
}

#[test]
fn key_value_is_case_sensitive() {
    let store = ApiKeyStore::new(&settings());
    let mut h = HeaderMap::new();
    h.insert("x-api-key", HeaderValue::from_static("ACME-SECRET-KEY"));
    assert_eq!(store.lookup(&h), Err(IdentityError::UnknownApiKey));
}

#[test]
fn debug_does_not_show_digests() {
    let store = ApiKeyStore::new(&settings());
    let dbg = format!("{store:?}");
    assert!(!dbg.contains(&hash_key("globex-key")), "{dbg}");
    assert!(
        !dbg.contains(&format!("{:?}", key_digest("globex-key"))),
        "{dbg}"
    );
    assert!(dbg.contains("keys: 2"), "{dbg}");
}
