use super::*;

#[test]
fn evicts_the_least_recently_used() {
    let mut m = SlabLru::new(3);
    for k in 1..=3 {
        assert!(m.push(k, k * 10).is_none());
    }
    assert_eq!(m.get_mut(&1), Some(&mut 10)); // 1 is now most recent
    assert_eq!(m.push(4, 40), Some((2, 20)));
    assert_eq!(m.push(5, 50), Some((3, 30)));
    assert_eq!(m.len(), 3);
    assert!(m.get_mut(&2).is_none());
    assert_eq!(m.push(1, 11), None); // replace keeps the size
    assert_eq!(m.get_mut(&1), Some(&mut 11));
    let order: Vec<i32> = m.drain_lru_first().into_iter().map(|(k, _)| k).collect();
    assert_eq!(order, [4, 5, 1]);
    assert!(m.is_empty());
}

#[test]
fn matches_a_reference_model_under_random_use() {
    let mut m = SlabLru::new(50);
    let mut model: Vec<(u32, u32)> = Vec::new(); // most recent last
    let mut seed = 1u64;
    for step in 0..20_000u32 {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let key = ((seed >> 33) % 120) as u32;
        if seed & 1 == 0 {
            let got = m.get_mut(&key).map(|v| *v);
            let pos = model.iter().position(|(k, _)| *k == key);
            let want = pos.map(|p| model.remove(p)).map(|e| {
                model.push(e);
                e.1
            });
            assert_eq!(got, want, "step {step}");
        } else {
            let evicted = m.push(key, step);
            if let Some(p) = model.iter().position(|(k, _)| *k == key) {
                model.remove(p);
                assert_eq!(evicted, None);
            } else if model.len() == 50 {
                assert_eq!(evicted, Some(model.remove(0)), "step {step}");
            }
            model.push((key, step));
        }
        assert_eq!(m.len(), model.len());
    }
}
