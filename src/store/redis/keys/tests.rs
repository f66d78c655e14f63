use super::*;

#[test]
fn tenant_keys_are_tagged_by_the_encoded_tenant() {
    assert_eq!(tenant_key("tg", "acme", "x"), "tg:{acme}:x");
    assert_eq!(bucket_key("tg", "acme"), "tg:{acme}:tb");
    assert_eq!(bucket_key("tg", "a{b}%"), "tg:{a%7Bb%7D%25}:tb");
    assert_eq!(bucket_key("tg", "é"), "tg:{%C3%A9}:tb");
    let suffixes = ["tb", "gcra", "fw", "swl", "swc", "lb"];
    for (alg, suffix) in Algorithm::ALL.into_iter().zip(suffixes) {
        assert_eq!(main_key("tg", "a}b", alg), format!("tg:{{a%7Db}}:{suffix}"));
    }
    assert_eq!(
        quota_key("tg", "acme", Period::Day, 1_796_083_200_000),
        "tg:{acme}:q:day:1796083200000"
    );
    assert_eq!(
        quota_key("tg", "a{b", Period::Hour, 0),
        "tg:{a%7Bb}:q:hour:0"
    );
}

#[test]
fn policy_keys_hold_the_tenant_as_given() {
    assert_eq!(
        policy_main_key("tg", "acme", Algorithm::Gcra),
        "tg:{acme}:gcra"
    );
    assert_eq!(
        policy_main_key("tg", "a{b}", Algorithm::LeakyBucket),
        "tg:{a{b}}:lb"
    );
    assert_eq!(
        policy_quota_key("tg", "acme", Period::Month),
        "tg:{acme}:q:month"
    );
    assert_eq!(policy_quota_key("tg", "é", Period::Week), "tg:{é}:q:week");
}

#[test]
fn pool_region_and_fleet_keys() {
    assert_eq!(pool_key("tg", "gold"), "tg:{pool:gold}:tb");
    assert_eq!(share_key("tg", "gold", "acme"), "tg:{pool:gold}:share:acme");
    assert_eq!(share_key("tg", "gold", "a}b"), "tg:{pool:gold}:share:a%7Db");
    assert_eq!(region_key("tg", "acme", "eu"), "tg:{acme}:region:eu");
    assert_eq!(region_key("tg", "a{b", "us"), "tg:{a%7Bb}:region:us");
    assert_eq!(fleet_members_key("tollgate"), "tollgate:{fleet}:members");
}
