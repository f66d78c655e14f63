//! `limits:`: limit rules keyed by request attributes (docs/DESIGN.md 4d–4e "Rules").
//!
//! Each rule's name, `match`, `key`, bucket (`limit`, `per`, `burst`, `algorithm`, `by_tier`),
//! `missing`, `mode` and `on_failure`.

use super::common::{key_path, Check};
use super::{host, policy, routes};
use crate::config::model::{FailurePolicy, KeyPart, LimitRule, Missing, RuleMatch};
use crate::config::raw::{RawDescriptorEntry, RawLimitRule, RawRuleMatch};
use crate::limit::algorithm::Algorithm;
use crate::limit::Rate;
use std::collections::{BTreeMap, BTreeSet};

/// Longest rule name accepted.
pub const MAX_RULE_NAME: usize = 40;

/// `limits:` → the rules whose every field is valid, in file order. `tier_names` are the
/// configured tiers (a rule's name must differ from them; `by_tier` must name them);
/// `default_policy` is the `on_failure` of a rule that sets none (that of `redis:`).
pub(super) fn settings(
    c: &mut Check,
    raw: &[RawLimitRule],
    tier_names: &BTreeSet<&String>,
    default_policy: FailurePolicy,
) -> Vec<LimitRule> {
    let mut names = BTreeSet::new();
    let mut rules = Vec::new();
    for (i, r) in raw.iter().enumerate() {
        let path = format!("limits[{i}]");
        rule_name(c, &path, &r.name, tier_names, &mut names);
        if let Some(rule) = rule(c, &path, r, tier_names, default_policy) {
            rules.push(rule);
        }
    }
    rules
}

/// `limits[i].name`: `[a-z0-9_-]{1,40}`, unique among rules and not a tier's name (both are
/// policy names in `RateLimit-Policy`).
fn rule_name(
    c: &mut Check,
    path: &str,
    name: &str,
    tier_names: &BTreeSet<&String>,
    seen: &mut BTreeSet<String>,
) {
    let path = format!("{path}.name");
    let allowed = |ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "_-".contains(ch);
    if name.is_empty() || name.len() > MAX_RULE_NAME || !name.chars().all(allowed) {
        c.err(
            &path,
            format!(
                "\"{name}\" is not a rule name: 1 to {MAX_RULE_NAME} lower-case letters, digits, '-' and '_' (it is sent in RateLimit-Policy)"
            ),
        );
    } else if tier_names.contains(&name.to_string()) {
        c.err(
            &path,
            format!(
                "\"{name}\" is also a tier name: tiers and rules share the RateLimit-Policy names"
            ),
        );
    } else if !seen.insert(name.to_string()) {
        c.err(&path, format!("\"{name}\" is the name of an earlier rule"));
    }
}

/// `limits[i]` at `path` without its name; `None` when a field is invalid (then reported).
fn rule(
    c: &mut Check,
    path: &str,
    r: &RawLimitRule,
    tier_names: &BTreeSet<&String>,
    default_policy: FailurePolicy,
) -> Option<LimitRule> {
    let errors_before = c.errors.len();
    let matcher = r
        .matcher
        .as_ref()
        .map(|m| rule_match(c, &format!("{path}.match"), m))
        .unwrap_or_default();
    let key = key(c, &format!("{path}.key"), &r.key);
    let algorithm = policy::algorithm(c, path, r.algorithm.as_deref());
    let max_in_flight = r
        .max_in_flight
        .and_then(|m| c.positive(&format!("{path}.max_in_flight"), m));
    let rate = match (r.max_in_flight, r.limit, &r.per) {
        (Some(_), None, None) => {
            concurrency_only(c, path, r);
            Some(Rate::new(1, 1, 1))
        }
        (Some(_), _, _) => {
            c.err(
                format!("{path}.max_in_flight"),
                "a concurrency rule takes no limit or per (write two rules for both)",
            );
            None
        }
        (None, Some(limit), Some(per)) => bucket(c, path, algorithm, limit, per, r.burst),
        (None, None, _) => {
            c.err(format!("{path}.limit"), "is required (or max_in_flight)");
            None
        }
        (None, Some(_), None) => {
            c.err(format!("{path}.per"), "is required with limit");
            None
        }
    };
    let mut by_tier = BTreeMap::new();
    for (tier, t) in r.by_tier.iter().flatten() {
        let tpath = key_path(&format!("{path}.by_tier"), tier);
        if !tier_names.contains(tier) {
            c.err(&tpath, format!("no tier named \"{tier}\""));
        }
        if let Some(rate) = bucket(c, &tpath, algorithm, t.limit, &t.per, t.burst) {
            by_tier.insert(tier.clone(), rate);
        }
    }
    let missing = match r.missing.as_deref() {
        None | Some("skip") => Missing::Skip,
        Some("refuse") => Missing::Refuse,
        Some(other) => {
            c.err(
                format!("{path}.missing"),
                format!("\"{other}\" is not a missing-key action (skip, refuse)"),
            );
            Missing::Skip
        }
    };
    let mode = c.mode(&format!("{path}.mode"), r.mode.as_deref());
    let on_failure = c.policy(
        &format!("{path}.on_failure"),
        r.on_failure.as_deref(),
        default_policy,
    );
    if matcher.domain.is_some() {
        decision_rule(c, path, r, &matcher, &key);
    } else if let Some(j) = key.iter().position(|k| matches!(k, KeyPart::Descriptor(_))) {
        c.err(
            format!("{path}.key[{j}]"),
            "a descriptor: part needs match.domain (a decision-service rule)",
        );
    }
    let usage = match (&r.usage, r.max_in_flight) {
        (Some(_), Some(_)) => {
            c.err(
                format!("{path}.usage"),
                "a concurrency rule (max_in_flight) takes no usage budget (write two rules)",
            );
            None
        }
        (Some(u), None) => super::usage::settings(c, path, &r.name, u),
        (None, _) => None,
    };
    let counting = super::counting::rule(c, path, r);
    let block_for = super::counting::block_for(c, path, r);
    let cost = super::cost::rule(
        c,
        &format!("{path}.cost"),
        r.cost.as_ref(),
        r.max_in_flight.is_some(),
    );
    (c.errors.len() == errors_before).then_some(LimitRule {
        name: r.name.clone(),
        matcher,
        key,
        rate: rate?,
        algorithm,
        by_tier,
        missing,
        mode,
        on_failure,
        max_in_flight,
        usage,
        counting,
        block_for,
        cost,
    })
}

/// A decision-service rule (`match.domain`) at `path`: matched by descriptors only, keyed by
/// their entries only, with no parts that need a proxied request (tiers, concurrency leases,
/// usage settled after a response).
fn decision_rule(c: &mut Check, path: &str, r: &RawLimitRule, m: &RuleMatch, key: &[KeyPart]) {
    let mpath = format!("{path}.match");
    if m.descriptors.is_empty() {
        c.err(
            format!("{mpath}.descriptors"),
            "is required with domain: the descriptor entry keys the rule matches",
        );
    }
    let proxied = [
        ("routes", !m.routes.is_empty()),
        ("methods", !m.methods.is_empty()),
        ("hosts", !m.hosts.is_empty()),
        ("headers", !m.headers.is_empty()),
    ];
    for (field, _) in proxied.iter().filter(|(_, set)| *set) {
        c.err(
            format!("{mpath}.{field}"),
            "does not apply to a decision-service rule (match.domain): it sees descriptors, not requests",
        );
    }
    for (j, part) in key.iter().enumerate() {
        match part {
            KeyPart::Descriptor(k) if m.descriptors.iter().any(|(d, _)| d == k) => {}
            KeyPart::Descriptor(k) => c.err(
                format!("{path}.key[{j}]"),
                format!("\"descriptor:{k}\" is not among match.descriptors"),
            ),
            other => c.err(
                format!("{path}.key[{j}]"),
                format!(
                    "\"{}\" does not apply to a decision-service rule: key it by descriptor:<key>",
                    other.spec()
                ),
            ),
        }
    }
    let unfit = [
        ("max_in_flight", r.max_in_flight.is_some()),
        ("by_tier", r.by_tier.is_some()),
        ("usage", r.usage.is_some()),
        ("missing", r.missing.is_some()),
        // The service never sees the response, nor the request a cost would be read from.
        ("count", r.count.is_some()),
        ("refund_on", r.refund_on.is_some()),
        ("cost", r.cost.is_some()),
    ];
    for (field, _) in unfit.iter().filter(|(_, set)| *set) {
        c.err(
            format!("{path}.{field}"),
            "does not apply to a decision-service rule (match.domain)",
        );
    }
}

/// A concurrency rule (`max_in_flight`) at `path` has no bucket: `burst`, `algorithm` and
/// `by_tier` are errors.
fn concurrency_only(c: &mut Check, path: &str, r: &RawLimitRule) {
    let given = [
        ("burst", r.burst.is_some()),
        ("algorithm", r.algorithm.is_some()),
        ("by_tier", r.by_tier.is_some()),
    ];
    for (field, _) in given.iter().filter(|(_, set)| *set) {
        c.err(
            format!("{path}.{field}"),
            "does not apply to a concurrency rule (max_in_flight)",
        );
    }
}

/// A bucket at `path` (`limit`, `per`, `burst`) within the bounds of `algorithm`. Rules have no
/// `max_delay`: a `leaky_bucket` rule polices without delaying.
fn bucket(
    c: &mut Check,
    path: &str,
    algorithm: Algorithm,
    limit: i64,
    per: &str,
    burst: Option<i64>,
) -> Option<Rate> {
    let rate = c.rate(path, limit, per, burst)?;
    policy::check_bounds(c, path, algorithm, &rate, 0);
    Some(rate)
}

/// `limits[i].key` at `path`: at least one part, each valid, none twice.
fn key(c: &mut Check, path: &str, raw: &[String]) -> Vec<KeyPart> {
    if raw.is_empty() {
        c.err(path, "needs at least one part (tenant, client_ip, route, method, host, header:<name>, claim:<name>, query:<name>)");
    }
    let mut parts: Vec<KeyPart> = Vec::new();
    for (j, spec) in raw.iter().enumerate() {
        let ppath = format!("{path}[{j}]");
        let Some(part) = key_part(c, &ppath, spec) else {
            continue;
        };
        if parts.contains(&part) {
            c.err(
                &ppath,
                format!("\"{}\" appears earlier in the key", part.spec()),
            );
        } else {
            parts.push(part);
        }
    }
    parts
}

/// One key part as written (`tenant`, `header:X-User`, ...), or an error naming `path`.
fn key_part(c: &mut Check, path: &str, spec: &str) -> Option<KeyPart> {
    let fixed = match spec {
        "tenant" => Some(KeyPart::Tenant),
        "client_ip" => Some(KeyPart::ClientIp),
        "route" => Some(KeyPart::Route),
        "method" => Some(KeyPart::Method),
        "host" => Some(KeyPart::Host),
        _ => None,
    };
    if fixed.is_some() {
        return fixed;
    }
    let Some((kind, name)) = spec.split_once(':') else {
        c.err(
            path,
            format!("\"{spec}\" is not a key part (tenant, client_ip, route, method, host, header:<name>, claim:<name>, query:<name>)"),
        );
        return None;
    };
    if name.is_empty() && matches!(kind, "header" | "claim" | "query" | "descriptor") {
        c.err(path, format!("\"{spec}\" needs a name after \"{kind}:\""));
        return None;
    }
    match kind {
        "header" => c
            .header_name(path, name)
            .map(|h| KeyPart::Header(h.as_str().to_string())),
        "claim" => Some(KeyPart::Claim(name.to_string())),
        "query" => Some(KeyPart::Query(name.to_string())),
        "descriptor" => Some(KeyPart::Descriptor(name.to_string())),
        _ => {
            c.err(
                path,
                format!(
                    "\"{kind}:\" is not a key part kind (header:, claim:, query:, descriptor:)"
                ),
            );
            None
        }
    }
}

/// `limits[i].match` at `path`.
fn rule_match(c: &mut Check, path: &str, m: &RawRuleMatch) -> RuleMatch {
    let mut out = RuleMatch::default();
    for (j, prefix) in m.routes.iter().flatten().enumerate() {
        routes::check_path_prefix(c, &format!("{path}.routes[{j}]"), prefix);
        out.routes.push(prefix.clone());
    }
    for (j, method) in m.methods.iter().flatten().enumerate() {
        let upper = method.to_ascii_uppercase();
        match http::Method::from_bytes(upper.as_bytes()) {
            Ok(_) => out.methods.push(upper),
            Err(_) => c.err(
                format!("{path}.methods[{j}]"),
                format!("\"{method}\" is not an HTTP method"),
            ),
        }
    }
    for (j, h) in m.hosts.iter().flatten().enumerate() {
        match host::route_host(h) {
            Ok(matcher) => out.hosts.push(matcher),
            Err(why) => c.err(
                format!("{path}.hosts[{j}]"),
                format!("\"{h}\" never matches a request: {why}"),
            ),
        }
    }
    for (name, value) in m.headers.iter().flatten() {
        let hpath = key_path(&format!("{path}.headers"), name);
        let Some(h) = c.header_name(&hpath, name) else {
            continue;
        };
        if http::HeaderValue::from_str(value).is_err() {
            c.err(
                &hpath,
                format!("{value:?} never matches a request: not a valid header value"),
            );
        } else if out.headers.iter().any(|(n, _)| n == h.as_str()) {
            c.err(
                &hpath,
                format!("\"{h}\" is listed twice (header names are case-insensitive)"),
            );
        } else {
            out.headers.push((h.as_str().to_string(), value.clone()));
        }
    }
    if let Some(domain) = &m.domain {
        if domain.is_empty() {
            c.err(format!("{path}.domain"), "must not be empty");
        }
        out.domain = Some(domain.clone());
    } else if m.descriptors.is_some() {
        c.err(
            format!("{path}.descriptors"),
            "needs domain (descriptors are matched within a rate limit service domain)",
        );
    }
    for (j, d) in m.descriptors.iter().flatten().enumerate() {
        let dpath = format!("{path}.descriptors[{j}]");
        let entry = match d {
            RawDescriptorEntry::Key(k) => Some((k.clone(), None)),
            RawDescriptorEntry::KeyValue(kv) if kv.len() == 1 => {
                kv.iter().next().map(|(k, v)| (k.clone(), Some(v.clone())))
            }
            RawDescriptorEntry::KeyValue(_) => {
                c.err(&dpath, "a pinned entry is one { key: value } pair");
                None
            }
        };
        match entry {
            Some((k, _)) if k.is_empty() => c.err(&dpath, "an entry key must not be empty"),
            Some(e) => out.descriptors.push(e),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
