use super::*;

#[test]
fn static_mode_records_nothing_and_uses_the_static_share() {
    let settings = MultiRegionSettings {
        region: "eu".into(),
        shares: [("eu".to_string(), 2), ("us".to_string(), 1)].into(),
        mode: RegionMode::Static,
        global_url: None,
        sync_interval: Duration::from_secs(1),
    };
    let budget = RegionBudget::new(&settings, "tollgate").unwrap();
    budget.record("acme", 5);
    assert!(budget.demand.lock().is_empty());
    assert_eq!(budget.rate_for("acme", Rate::new(30, 1000, 30)).burst, 20);
}
