use super::*;

#[test]
fn annotate_marks_the_policy_item_and_adds_the_region_header() {
    let mut pairs = vec![
        ("RateLimit-Policy", "\"pro\";q=4;w=1".to_string()),
        ("RateLimit", "\"pro\";r=3;t=1".to_string()),
    ];
    annotate(&mut pairs, "eu");
    assert_eq!(pairs[0].1, "\"pro\";q=4;w=1;region=\"eu\"");
    assert_eq!(pairs[1].1, "\"pro\";r=3;t=1");
    assert_eq!(pairs[2], ("Tollgate-Region", "eu".to_string()));
    let mut none: Vec<(&'static str, String)> = Vec::new();
    annotate(&mut none, "eu");
    assert!(none.is_empty());
}

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
