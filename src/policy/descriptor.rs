//! Which decision-service rules (`limits[]` with `match.domain`) apply to a rate limit service
//! descriptor, and the key of each one's bucket (docs/decision-service.md "Matching"). Pure.
//!
//! A rule matches a descriptor of its domain whose entry keys are exactly the rule's
//! `match.descriptors`, in order, with each pinned value equal. Among the rules that match one
//! descriptor the most specific apply: a pinned value beats any value at the first entry where
//! they differ (envoyproxy/ratelimit's preference for `key` + `value` over `key` alone); rules
//! as specific as each other all apply.

use crate::config::{KeyPart, LimitRule};
use crate::store::redis::keys::RuleKeyText;
use std::cmp::Ordering;

/// One descriptor entry: key and value, as the caller sent them.
pub type Entry = (String, String);

/// A rule that applies to a descriptor: its position in `limits:` and its bucket's key text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescriptorRule {
    pub index: usize,
    /// The encoded key text ([`RuleKeyText`]: `descriptor%3Aremote_address=9.10.0.0.1`).
    pub key: String,
}

/// The rules of `rules` that apply to a descriptor of `domain` with `entries`, in file order.
/// Empty when none matches (the descriptor is then not limited).
pub fn applicable(rules: &[LimitRule], domain: &str, entries: &[Entry]) -> Vec<DescriptorRule> {
    let matching: Vec<(usize, &LimitRule)> = rules
        .iter()
        .enumerate()
        .filter(|(_, r)| matches(r, domain, entries))
        .collect();
    let Some(best) = matching
        .iter()
        .map(|(_, r)| pinned(r))
        .max_by(|a, b| specificity(a, b))
    else {
        return Vec::new();
    };
    matching
        .into_iter()
        .filter(|(_, r)| specificity(&pinned(r), &best) == Ordering::Equal)
        .map(|(index, rule)| DescriptorRule {
            index,
            key: key_text(rule, entries),
        })
        .collect()
}

/// True when `rule` is a rule of `domain` whose descriptor entries are `entries`' keys, in
/// order, with every pinned value equal.
pub fn matches(rule: &LimitRule, domain: &str, entries: &[Entry]) -> bool {
    let m = &rule.matcher;
    m.domain.as_deref() == Some(domain)
        && m.descriptors.len() == entries.len()
        && m.descriptors
            .iter()
            .zip(entries)
            .all(|((k, v), (ek, ev))| k == ek && v.as_ref().is_none_or(|v| v == ev))
}

/// Which of a rule's entries pin a value.
fn pinned(rule: &LimitRule) -> Vec<bool> {
    rule.matcher
        .descriptors
        .iter()
        .map(|(_, v)| v.is_some())
        .collect()
}

/// Orders pinning patterns: at the first entry where they differ, the pinned one is greater.
fn specificity(a: &[bool], b: &[bool]) -> Ordering {
    a.cmp(b)
}

/// The bucket key text of `rule` for `entries`: each `descriptor:<key>` part with the value of
/// the entry of that key.
fn key_text(rule: &LimitRule, entries: &[Entry]) -> String {
    let mut key = RuleKeyText::default();
    for part in &rule.key {
        if let KeyPart::Descriptor(name) = part {
            let value = entries
                .iter()
                .find(|(k, _)| k == name)
                .map_or("", |(_, v)| v.as_str());
            key.push(&["descriptor:", name], value.as_bytes());
        }
    }
    key.finish()
}

#[cfg(test)]
mod tests;
