use super::*;

#[test]
fn calls_beyond_the_cap_are_not_waited_for() {
    let waiting = AtomicUsize::new(0);
    assert!((0..3).all(|_| admit(&waiting, 3)));
    assert!(!admit(&waiting, 3), "a fourth while three wait");
    assert_eq!(
        waiting.load(Ordering::Relaxed),
        3,
        "a refusal counts nothing"
    );
    waiting.fetch_sub(1, Ordering::Relaxed);
    assert!(admit(&waiting, 3), "room again once one ended");
}

#[test]
fn outcome_labels() {
    let all = [
        LateOutcome::Compensated,
        LateOutcome::NothingDebited,
        LateOutcome::UndoFailed,
        LateOutcome::Lost,
        LateOutcome::Dropped,
    ];
    let labels: Vec<&str> = all.iter().map(|o| o.as_str()).collect();
    assert_eq!(
        labels,
        [
            "compensated",
            "nothing_debited",
            "undo_failed",
            "lost",
            "dropped"
        ]
    );
}
