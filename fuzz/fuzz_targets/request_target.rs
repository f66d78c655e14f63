//! The request-target normaliser on arbitrary bytes: never panics; what it accepts is
//! idempotent (normalising the normal form gives it back) and free of dot segments and empty
//! segments, so routing and the backend see one spelling.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tollgate::http::target::normalise_target;

fuzz_target!(|data: &[u8]| {
    let Ok(t) = normalise_target(data) else {
        return;
    };
    assert!(t.path.starts_with('/'), "{:?}", t.path);
    assert!(t.path.is_ascii());
    for bad in ["/./", "/../", "//"] {
        assert!(!t.path.contains(bad), "{:?} contains {bad}", t.path);
    }
    assert!(
        !t.path.ends_with("/.") && !t.path.ends_with("/.."),
        "{:?}",
        t.path
    );
    let again = normalise_target(t.path.as_bytes()).expect("a normal form is accepted");
    assert_eq!(again.path, t.path, "idempotent");
});
