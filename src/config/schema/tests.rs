use super::*;

#[test]
fn schema_is_draft_2020_12_and_closed() {
    let s = gateway_schema();
    assert_eq!(
        s["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "{s}"
    );
    assert_eq!(s["additionalProperties"], false);
    let required = s["required"].as_array().unwrap();
    for field in ["listen", "upstreams", "routes"] {
        assert!(required.iter().any(|r| r == field), "{field} not required");
    }
}

#[test]
fn enumerated_values_and_durations_are_stated() {
    let text = gateway_schema_text();
    for word in [
        "sliding_window_counter",
        "leaky_bucket",
        "subject_cn",
        "EdDSA",
    ] {
        assert!(text.contains(word), "{word} missing from the schema");
    }
    assert!(text.contains("^[0-9]+(ms|s|m|h|d)$"));
}
