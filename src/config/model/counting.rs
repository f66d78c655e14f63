//! What a request count counts (`limits[].count`, `limits[].refund_on`, `tiers.<name>.refund_on`,
//! docs/rules.md#counting-by-outcome): a rule that counts only some response statuses, and the
//! outcomes whose request count is given back.

use super::tiers::RefundOn;

/// A set of HTTP response statuses (100..=599): codes and whole classes (`5xx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatusSet {
    /// Bit `s % 64` of word `s / 64` is set when status `s` is in the set.
    bits: [u64; 10],
}

impl StatusSet {
    /// Adds status `s` (ignored outside 100..=599).
    pub fn insert(&mut self, s: u16) {
        if (100..600).contains(&s) {
            self.bits[usize::from(s / 64)] |= 1 << (s % 64);
        }
    }

    /// Adds every status of class `c` (1 to 5: `1xx` to `5xx`).
    pub fn insert_class(&mut self, c: u16) {
        for s in c * 100..c * 100 + 100 {
            self.insert(s);
        }
    }

    /// True when `s` is in the set.
    pub fn contains(&self, s: u16) -> bool {
        s < 640 && self.bits[usize::from(s / 64)] & (1 << (s % 64)) != 0
    }

    /// The set as written in `count.status`: each whole class (`"5xx"`) as its class, the
    /// other statuses as codes, in ascending order.
    pub fn spec(&self) -> Vec<Result<u16, String>> {
        let mut out = Vec::new();
        for class in 1..=5u16 {
            let range = class * 100..class * 100 + 100;
            if range.clone().all(|s| self.contains(s)) {
                out.push(Err(format!("{class}xx")));
            } else {
                out.extend(range.filter(|s| self.contains(*s)).map(Ok));
            }
        }
        out
    }

    /// True when some 5xx status is in the set.
    pub fn any_5xx(&self) -> bool {
        (500..600).any(|s| self.contains(s))
    }
}

/// How a rule's (or a tier's) request count is kept after admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counting {
    /// `count: { status: [...] }`: the request is debited at admission and given back when its
    /// response's status is not in this set (`None`: every admitted request counts).
    pub status: Option<StatusSet>,
    /// `refund_on`: the outcomes whose debit is given back.
    pub refund_on: RefundOn,
}

impl Counting {
    /// True when an admitted request may have its debit given back later, so the request
    /// keeps what it debited until it ends.
    pub fn settles(&self) -> bool {
        self.status.is_some() || self.refund_on != RefundOn::default()
    }
}

/// `limits[].block_for` (and `extend_on_refusal`): once the rule refuses a key, that key is
/// refused for this long whatever its bucket says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockFor {
    /// How long a refusal blocks the key, ms (1 s to 30 days).
    pub ms: u64,
    /// `extend_on_refusal: true`: each refusal during the block starts it again.
    pub extend_on_refusal: bool,
}
