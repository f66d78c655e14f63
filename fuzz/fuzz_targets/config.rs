//! Config parser + validator on arbitrary text: never panics; every error names a field path
//! (or the YAML position) and a reason.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(errors) = tollgate::config::parse(text) {
        assert!(
            !errors.is_empty(),
            "a refused config reports at least one error"
        );
        for e in errors {
            assert!(!e.to_string().trim().is_empty(), "an error says something");
        }
    }
});
