//! The file watch's debounce on an injected clock.

use super::*;

const DEBOUNCE: Duration = Duration::from_millis(500);

fn at(start: Instant, ms: u64) -> Instant {
    start + Duration::from_millis(ms)
}

#[test]
fn the_first_read_is_the_baseline_and_same_content_never_reloads() {
    let (t0, mut w) = (Instant::now(), FileWatch::default());
    assert!(!w.observe(Some([1; 32]), t0, DEBOUNCE));
    assert!(!w.observe(Some([1; 32]), at(t0, 10_000), DEBOUNCE));
}

#[test]
fn a_change_reloads_once_it_stayed_the_same_for_the_debounce() {
    let (t0, mut w) = (Instant::now(), FileWatch::default());
    w.observe(Some([1; 32]), t0, DEBOUNCE);
    assert!(!w.observe(Some([2; 32]), at(t0, 100), DEBOUNCE));
    assert!(!w.observe(Some([2; 32]), at(t0, 599), DEBOUNCE));
    assert!(w.observe(Some([2; 32]), at(t0, 600), DEBOUNCE));
    // Loaded: no second reload of the same content.
    assert!(!w.observe(Some([2; 32]), at(t0, 2_000), DEBOUNCE));
}

#[test]
fn a_content_still_changing_restarts_the_debounce() {
    let (t0, mut w) = (Instant::now(), FileWatch::default());
    w.observe(Some([1; 32]), t0, DEBOUNCE);
    w.observe(Some([2; 32]), at(t0, 100), DEBOUNCE);
    assert!(!w.observe(Some([3; 32]), at(t0, 550), DEBOUNCE));
    assert!(!w.observe(Some([3; 32]), at(t0, 1_000), DEBOUNCE));
    assert!(w.observe(Some([3; 32]), at(t0, 1_050), DEBOUNCE));
}

#[test]
fn an_unreadable_moment_and_a_change_back_reload_nothing() {
    let (t0, mut w) = (Instant::now(), FileWatch::default());
    w.observe(Some([1; 32]), t0, DEBOUNCE);
    assert!(!w.observe(None, at(t0, 100), DEBOUNCE));
    w.observe(Some([2; 32]), at(t0, 200), DEBOUNCE);
    assert!(!w.observe(Some([1; 32]), at(t0, 300), DEBOUNCE));
    assert!(!w.observe(Some([1; 32]), at(t0, 5_000), DEBOUNCE));
}

#[test]
fn a_sighup_load_counts_as_loaded() {
    let (t0, mut w) = (Instant::now(), FileWatch::default());
    w.observe(Some([1; 32]), t0, DEBOUNCE);
    w.observe(Some([2; 32]), at(t0, 100), DEBOUNCE);
    w.loaded(Some([2; 32]));
    assert!(!w.observe(Some([2; 32]), at(t0, 5_000), DEBOUNCE));
}
