use super::*;

#[test]
fn a_block_lasts_its_time_and_is_kept_unless_extended() {
    let b = LocalBlocks::default();
    let t0 = Instant::now();
    let s = Duration::from_secs;
    assert_eq!(b.left("k", t0, None), Duration::ZERO);
    assert_eq!(b.block("k", t0, s(60), false), s(60));
    assert_eq!(b.left("k", t0 + s(10), None), s(50));
    // A second refusal does not move the end...
    assert_eq!(b.block("k", t0 + s(20), s(60), false), s(40));
    // ... unless extend_on_refusal says so.
    assert_eq!(b.block("k", t0 + s(30), s(60), true), s(60));
    assert_eq!(b.left("k", t0 + s(40), Some(s(60))), s(60));
    assert_eq!(b.left("k", t0 + s(100), None), s(0));
    assert_eq!(b.left("k", t0 + s(101), None), Duration::ZERO);
    assert_eq!(b.left("other", t0, None), Duration::ZERO);
}

#[test]
fn expired_blocks_make_room() {
    let b = LocalBlocks::default();
    let t0 = Instant::now();
    for i in 0..MAX_LOCAL_BLOCKS {
        b.block(&i.to_string(), t0, Duration::from_secs(1), false);
    }
    let later = t0 + Duration::from_secs(2);
    b.block("new", later, Duration::from_secs(5), false);
    assert_eq!(b.until.lock().unwrap().len(), 1);
    assert_eq!(b.left("new", later, None), Duration::from_secs(5));
}
