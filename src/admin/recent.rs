//! The last minutes of tenant decisions per tier, for `GET /v1/status`'s `last_minutes`: the
//! same `tollgate_decisions_total` counters `/metrics` exports, sampled at each minute's start
//! (off the request path), and each minute reported as the difference of two samples.
//!
//! Pure over an injected clock ([`Recent::sample`] and [`Recent::report`] take Unix ms and the
//! counters' totals); the process-wide sampler is [`sample_now`] / [`report_now`], which the
//! admin listener calls every second and on each status call with
//! `super::status::tenant_totals`. A minute begins at the first
//! sample taken in it, so a decision can be counted up to one sampling interval early or late;
//! the sum over the window is exact. Counters start at 0 with the process, which is the
//! baseline of the first minute sampled.

use once_cell::sync::Lazy;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// Minutes reported, the current (partial) one included.
pub const MINUTES: usize = 10;
const MINUTE_MS: u64 = 60_000;

/// The tenant-layer outcomes reported per minute (besides the total of every outcome).
pub const OUTCOMES: [&str; 4] = ["limited", "fallback", "failed_open", "failed_closed"];

/// Counter totals: (tier, outcome) → count since the process started.
pub type Totals = BTreeMap<(String, String), u64>;

/// One minute of one tier: every tenant decision, and those of each of [`OUTCOMES`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Minute {
    /// Minutes since the Unix epoch.
    pub minute: u64,
    pub decisions: u64,
    /// Counts in the order of [`OUTCOMES`].
    pub outcomes: [u64; OUTCOMES.len()],
}

/// Samples of the counters at the start of each of the last minutes.
#[derive(Debug, Default)]
pub struct Recent {
    /// (minute, totals at its first sample), oldest first, at most [`MINUTES`] + 1.
    samples: VecDeque<(u64, Totals)>,
}

impl Recent {
    /// Records `totals` as the start of the minute of `now_ms` unless that minute has a sample
    /// already (`totals` is then not called). The first sample ever starts from zero counts,
    /// so decisions before it count in its minute.
    pub fn sample(&mut self, now_ms: u64, totals: impl FnOnce() -> Totals) {
        let minute = now_ms / MINUTE_MS;
        match self.samples.back() {
            Some((m, _)) if *m >= minute => return,
            None => self.samples.push_back((minute, Totals::new())),
            Some(_) => self.samples.push_back((minute, totals())),
        }
        while self.samples.len() > MINUTES + 1 {
            self.samples.pop_front();
        }
    }

    /// The last [`MINUTES`] minutes up to the one of `now_ms`, oldest first, per tier of
    /// `tiers`: what the counters gained from each minute's sample to the next one (to
    /// `current` for the last sampled minute). A minute without its own sample counts 0.
    pub fn report(
        &self,
        now_ms: u64,
        current: &Totals,
        tiers: &[&str],
    ) -> BTreeMap<String, Vec<Minute>> {
        let now = now_ms / MINUTE_MS;
        let first = now.saturating_sub(MINUTES as u64 - 1);
        let mut out: BTreeMap<String, Vec<Minute>> = tiers
            .iter()
            .map(|t| {
                let minutes = (first..=now)
                    .map(|minute| Minute {
                        minute,
                        ..Minute::default()
                    })
                    .collect();
                (t.to_string(), minutes)
            })
            .collect();
        for (i, (minute, start)) in self.samples.iter().enumerate() {
            if *minute < first || *minute > now {
                continue;
            }
            let end = self.samples.get(i + 1).map_or(current, |(_, t)| t);
            for ((tier, outcome), n) in end {
                let Some(row) = out.get_mut(tier) else {
                    continue;
                };
                let gained = n.saturating_sub(
                    start
                        .get(&(tier.clone(), outcome.clone()))
                        .copied()
                        .unwrap_or(0),
                );
                let m = &mut row[(*minute - first) as usize];
                m.decisions += gained;
                if let Some(k) = OUTCOMES.iter().position(|o| o == outcome) {
                    m.outcomes[k] += gained;
                }
            }
        }
        out
    }
}

static RECENT: Lazy<Mutex<Recent>> = Lazy::new(Default::default);

/// Samples the process's counters (`totals`: their values now) at Unix time `now_ms`
/// ([`Recent::sample`]).
pub fn sample_now(now_ms: u64, totals: impl Fn() -> Totals) {
    let mut r = RECENT.lock().unwrap_or_else(|e| e.into_inner());
    r.sample(now_ms, totals);
}

/// The process's last minutes for `tiers` at `now_ms` ([`Recent::report`]), sampling first.
pub fn report_now(
    now_ms: u64,
    totals: impl Fn() -> Totals,
    tiers: &[&str],
) -> BTreeMap<String, Vec<Minute>> {
    let mut r = RECENT.lock().unwrap_or_else(|e| e.into_inner());
    r.sample(now_ms, &totals);
    r.report(now_ms, &totals(), tiers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(list: &[(&str, &str, u64)]) -> Totals {
        list.iter()
            .map(|(t, o, n)| ((t.to_string(), o.to_string()), *n))
            .collect()
    }

    const M: u64 = MINUTE_MS;

    #[test]
    fn each_minute_is_the_difference_of_two_samples() {
        let mut r = Recent::default();
        let t0 = 1_000 * M;
        // First sample: the baseline is zero (the counters start with the process).
        r.sample(t0 + 5_000, || panic!("the first sample needs no totals"));
        r.sample(t0 + 30_000, || panic!("a minute is sampled once"));
        r.sample(t0 + M + 1_000, || {
            totals(&[("free", "admitted", 5), ("free", "limited", 2)])
        });
        r.sample(t0 + 3 * M, || {
            totals(&[
                ("free", "admitted", 6),
                ("free", "limited", 4),
                ("pro", "failed_open", 1),
            ])
        });
        let now = totals(&[
            ("free", "admitted", 6),
            ("free", "limited", 7),
            ("pro", "failed_open", 4),
            ("pro", "fallback", 2),
        ]);
        let out = r.report(t0 + 3 * M + 10_000, &now, &["free", "pro"]);
        let free = &out["free"];
        assert_eq!(free.len(), MINUTES);
        assert_eq!(free.last().unwrap().minute, 1_003);
        let at = |row: &Vec<Minute>, minute: u64| {
            row.iter().find(|m| m.minute == minute).cloned().unwrap()
        };
        assert_eq!(at(free, 1_000).decisions, 7);
        assert_eq!(at(free, 1_000).outcomes, [2, 0, 0, 0]);
        assert_eq!(at(free, 1_001).decisions, 3);
        assert_eq!(at(free, 1_001).outcomes, [2, 0, 0, 0]);
        assert_eq!(
            at(free, 1_002),
            Minute {
                minute: 1_002,
                ..Default::default()
            },
            "no sample in it"
        );
        assert_eq!(at(free, 1_003).outcomes, [3, 0, 0, 0]);
        let pro = &out["pro"];
        assert_eq!(at(pro, 1_001).outcomes, [0, 0, 1, 0]);
        assert_eq!(at(pro, 1_003).outcomes, [0, 2, 3, 0]);
        // The window's sum is the counters' total.
        let sum: u64 = free.iter().chain(pro).map(|m| m.decisions).sum();
        assert_eq!(sum, now.values().sum::<u64>());
    }

    #[test]
    fn minutes_older_than_the_window_fall_out() {
        let mut r = Recent::default();
        for i in 0..30 {
            r.sample(i * M, || totals(&[("free", "limited", i)]));
        }
        assert_eq!(r.samples.len(), MINUTES + 1);
        let out = r.report(29 * M, &totals(&[("free", "limited", 29)]), &["free"]);
        let minutes: Vec<u64> = out["free"].iter().map(|m| m.minute).collect();
        assert_eq!(minutes, (20..30).collect::<Vec<_>>());
        assert!(out["free"][..9].iter().all(|m| m.outcomes[0] == 1));
        assert_eq!(
            out["free"][9].outcomes[0], 0,
            "nothing since the current minute began"
        );
        assert!(r.report(29 * M, &Totals::new(), &[]).is_empty());
    }
}
