use super::*;

#[test]
fn label_values_are_the_exported_names() {
    let names: Vec<&str> = Layer::ALL.iter().map(|l| l.as_str()).collect();
    assert_eq!(
        names,
        ["http", "edge", "route", "identity", "tenant", "upstream"]
    );
    assert_eq!(Outcome::ShadowLimited.as_str(), "shadow_limited");
    assert_eq!(Outcome::PoolAdmitted.as_str(), "pool_admitted");
    assert_eq!(Outcome::HeaderTimeout.as_str(), "header_timeout");
}
