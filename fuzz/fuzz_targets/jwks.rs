//! The JWK Set parser on arbitrary documents: never panics, every usable key is asymmetric and
//! pinned to at least one algorithm, and no kid is held twice.
#![no_main]
use jsonwebtoken::AlgorithmFamily;
use libfuzzer_sys::fuzz_target;
use tollgate::identity::jwks::parse_jwks;

fuzz_target!(|data: &[u8]| {
    let Ok(parsed) = parse_jwks(data) else {
        return;
    };
    let mut kids = std::collections::HashSet::new();
    for key in &parsed.keys {
        assert!(!key.algs.is_empty());
        assert!(key.algs.iter().all(|a| a.family() != AlgorithmFamily::Hmac));
        if let Some(kid) = &key.kid {
            assert!(kids.insert(kid.clone()), "kid {kid} held twice");
        }
    }
});
