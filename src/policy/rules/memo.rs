//! Limit-rule plans kept for reuse: the rules that apply to a request, their keys and their
//! script calls, built once per request fingerprint and shared by the requests that follow
//! (they depend on nothing else: [`fingerprint`](super::fingerprint)). One memo per
//! config snapshot: a reload starts empty. Bounded: at [`CAPACITY`] plans it is emptied and
//! fills again, and a fingerprint longer than [`MAX_FINGERPRINT_BYTES`] (long header or query
//! values) is not kept; a request whose plan is not kept builds its own, as without the memo.

use crate::hashing::HashMap;
use crate::quota::rules::{PreparedCalls, RuleCall};
use parking_lot::Mutex;
use std::sync::{Arc, OnceLock};

/// Most plans one memo keeps.
pub const CAPACITY: usize = 1024;

/// Longest fingerprint whose plan is kept.
pub const MAX_FINGERPRINT_BYTES: usize = 1024;

/// A plan without its request: what requests with one fingerprint are decided by.
#[derive(Debug)]
pub struct Prepared {
    /// Per applied rule, in rule order: its index in `limits:`, its encoded key text and its
    /// quota call (whose entry holds its bucket).
    pub rules: Vec<(usize, Arc<str>, RuleCall)>,
    /// The script calls deciding these rules with the tier's policies, built by the first
    /// request that needs them ([`QuotaService::decide_with_rules`](crate::quota::QuotaService::decide_with_rules)).
    pub calls: OnceLock<PreparedCalls>,
}

impl Prepared {
    /// A plan of `rules` whose calls are not built yet.
    pub fn new(rules: Vec<(usize, Arc<str>, RuleCall)>) -> Self {
        Prepared {
            rules,
            calls: OnceLock::new(),
        }
    }
}

/// Plans by fingerprint.
#[derive(Debug, Default)]
pub struct PlanMemo {
    plans: Mutex<HashMap<Box<[u8]>, Arc<Prepared>>>,
}

impl PlanMemo {
    /// The plan kept for `fingerprint`, if any.
    pub fn get(&self, fingerprint: &[u8]) -> Option<Arc<Prepared>> {
        self.plans.lock().get(fingerprint).cloned()
    }

    /// Keeps `plan` for `fingerprint` (emptying the memo first when it is full) and returns it.
    pub fn insert(&self, fingerprint: &[u8], plan: Prepared) -> Arc<Prepared> {
        let plan = Arc::new(plan);
        let mut plans = self.plans.lock();
        if plans.len() >= CAPACITY {
            plans.clear();
        }
        plans.insert(fingerprint.into(), plan.clone());
        plan
    }

    /// How many plans are kept.
    pub fn len(&self) -> usize {
        self.plans.lock().len()
    }

    /// True when no plan is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
