use super::*;

#[test]
fn shapes_beyond_burst_up_to_max_delay_then_refuses() {
    // 10 per second (T = 100 ms), burst 2, max_delay 300 ms.
    let rate = Rate::new(10, 1_000, 2);
    let mut s = None;
    let mut delays = vec![];
    for _ in 0..6 {
        let o = decide(s, 0, &rate, 1, 300);
        if o.decision.admitted {
            delays.push(o.delay_ms);
            s = o.next;
        } else {
            assert_eq!(o.decision.retry_after_ms, 100);
            delays.push(u64::MAX);
        }
    }
    assert_eq!(delays, [0, 0, 100, 200, 300, u64::MAX]);
    // After waiting the Retry-After the request is admitted, with the longest delay.
    let o = decide(s, 100, &rate, 1, 300);
    assert!(o.decision.admitted);
    assert_eq!(o.delay_ms, 300);
}

#[test]
fn slots_never_go_backwards() {
    let rate = Rate::new(7, 1_000, 3);
    let mut s = None;
    let mut last_slot = 0;
    let mut now = 0;
    for i in 0..200u64 {
        now += (i * 37) % 90;
        let o = decide(s, now, &rate, 1 + i % 2, 2_000);
        if o.decision.admitted {
            assert!(now + o.delay_ms >= last_slot, "request {i} overtakes");
            last_slot = now + o.delay_ms;
            s = o.next;
        }
    }
}

#[test]
fn refund_gives_back_only_the_latest_reservation() {
    let rate = Rate::new(3, 1_000, 1); // T = 333⅓ ms
    let a = decide(None, 0, &rate, 1, 1_000).next.unwrap();
    let b = decide(Some(a), 0, &rate, 1, 1_000);
    assert_eq!(b.delay_ms, 334);
    let b = b.next.unwrap();
    // a is no longer the latest: its refund changes nothing.
    assert_eq!(refund(Some(b), a, &rate, 1), None);
    // b is: the state goes back exactly to a.
    assert_eq!(refund(Some(b), b, &rate, 1), Some(a));
    // and then a's refund empties the bucket (TAT 0).
    let empty = refund(Some(a), a, &rate, 1).unwrap();
    assert_eq!((empty.tat_ms, empty.rem), (0, 0));
    assert_eq!(decide(Some(empty), 0, &rate, 1, 0).decision.remaining, 0);
    assert!(decide(Some(empty), 0, &rate, 1, 0).decision.admitted);
}
