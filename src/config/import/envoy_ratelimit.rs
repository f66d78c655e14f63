//! envoyproxy/ratelimit config files (`domain`, nested `descriptors` of `key`/`value`,
//! `rate_limit: { unit, requests_per_unit, name, replaces }`, `unlimited`, `shadow_mode`) →
//! decision-service rules (`limits[]` with `match.domain`, docs/decision-service.md) with the
//! same meaning.
//!
//! Each descriptor node with a `rate_limit` becomes one rule: `match.descriptors` is the path of
//! keys from the root to the node (a node's `value` pinned as `{ key: value }`), `key` the
//! `descriptor:<key>` parts of the path's unpinned entries (the pinned ones are constants; a
//! path of pinned entries only is keyed by its last one), and its bucket the upstream's fixed
//! window: `algorithm: fixed_window`, `limit: requests_per_unit`, `per: 1 <unit>` (a month is 30
//! days and a year 365, as upstream counts them). `shadow_mode` becomes `mode: shadow`. An
//! `unlimited` node (`unlimited: true` in its `rate_limit`, or beside it) becomes a shadow rule with the largest bucket tollgate takes: it is the most
//! specific match of its descriptors, so a less specific rule does not apply to them (as
//! upstream), and it never refuses. What has no equivalent is named in [`Imported::lost`]:
//! `replaces` (one limit cancelling another across a call's descriptors), `detailed_metric`,
//! values ending in `*` (upstream's prefix match), `requests_per_unit: 0` (refuse everything:
//! left out) and unknown fields.

use serde_json::{json, Value};
use std::collections::BTreeSet;

/// The result of an import.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The rules, as JSON values of `limits[]` items, in file order.
    pub rules: Vec<Value>,
    /// Each thing that could not be carried over, naming its file and descriptor path.
    pub lost: Vec<String>,
}

impl Imported {
    /// The rules as a `limits:` YAML document, with what was not carried over as comments first.
    pub fn yaml(&self) -> String {
        let mut out = String::new();
        for l in &self.lost {
            out.push_str(&format!("# not carried over: {l}\n"));
        }
        out.push_str("limits:\n");
        for r in &self.rules {
            out.push_str("  - ");
            out.push_str(&serde_json::to_string(r).unwrap_or_default());
            out.push('\n');
        }
        out
    }
}

/// The bucket an `unlimited` descriptor gets: the largest a fixed window takes, per second.
const UNLIMITED: u64 = 1_000_000;

/// Converts `files` (name, text), in order, into one set of rules (names unique across them).
/// Errors: a file that is not YAML or lacks a `domain`, a `rate_limit` without a known `unit`
/// or a positive `requests_per_unit`, a descriptor without `key`: the message names the file and
/// the descriptor path.
pub fn import(files: &[(String, String)]) -> Result<Imported, String> {
    let mut out = Imported {
        rules: Vec::new(),
        lost: Vec::new(),
    };
    let mut names = BTreeSet::new();
    for (file, text) in files {
        let doc: serde_yaml::Value =
            serde_yaml::from_str(text).map_err(|e| format!("{file}: not YAML: {e}"))?;
        let domain = doc
            .get("domain")
            .and_then(|d| d.as_str())
            .filter(|d| !d.is_empty())
            .ok_or_else(|| format!("{file}: `domain` is required"))?;
        lost_fields(&mut out.lost, file, "", &doc, &["domain", "descriptors"]);
        let mut ctx = Walk {
            file,
            domain,
            out: &mut out,
            names: &mut names,
        };
        for (i, d) in seq(&doc, "descriptors").iter().enumerate() {
            ctx.node(d, &[], &format!("descriptors[{i}]"))?;
        }
    }
    Ok(out)
}

/// One file being walked.
struct Walk<'a> {
    file: &'a str,
    domain: &'a str,
    out: &'a mut Imported,
    names: &'a mut BTreeSet<String>,
}

impl Walk<'_> {
    /// The descriptor node `d` under `path` (the entries above it), at `at` in the file.
    fn node(
        &mut self,
        d: &serde_yaml::Value,
        path: &[(String, Option<String>)],
        at: &str,
    ) -> Result<(), String> {
        let key = d
            .get("key")
            .and_then(scalar)
            .filter(|k| !k.is_empty())
            .ok_or_else(|| format!("{}: {at}: `key` is required", self.file))?;
        let value = d.get("value").and_then(scalar);
        let here = format!(
            "{}: {at} ({key}{})",
            self.file,
            value
                .as_deref()
                .map(|v| format!("={v}"))
                .unwrap_or_default()
        );
        if value.as_deref().is_some_and(|v| v.ends_with('*')) {
            self.out.lost.push(format!(
                "{here}: value {:?} is an upstream prefix match; tollgate matches it exactly",
                value.as_deref().unwrap_or_default()
            ));
        }
        let known = [
            "key",
            "value",
            "rate_limit",
            "descriptors",
            "shadow_mode",
            "unlimited",
            "detailed_metric",
        ];
        lost_fields(&mut self.out.lost, self.file, at, d, &known);
        if d.get("detailed_metric").and_then(|v| v.as_bool()) == Some(true) {
            self.out.lost.push(format!(
                "{here}: detailed_metric (tollgate counts every rule by name: tollgate_rule_decisions_total)"
            ));
        }
        let mut path = path.to_vec();
        path.push((key.clone(), value.clone()));
        let shadow = d.get("shadow_mode").and_then(|v| v.as_bool()) == Some(true);
        let unlimited = d.get("unlimited").and_then(|v| v.as_bool()) == Some(true);
        if let Some(rl) = d.get("rate_limit") {
            self.rule(rl, &path, shadow, unlimited, &here)?;
        } else if unlimited {
            self.push(&path, None, "", true)?;
        }
        for (i, child) in seq(d, "descriptors").iter().enumerate() {
            self.node(child, &path, &format!("{at}.descriptors[{i}]"))?;
        }
        Ok(())
    }

    /// The rule of a node's `rate_limit` (`rl`).
    fn rule(
        &mut self,
        rl: &serde_yaml::Value,
        path: &[(String, Option<String>)],
        shadow: bool,
        unlimited: bool,
        here: &str,
    ) -> Result<(), String> {
        lost_fields(
            &mut self.out.lost,
            self.file,
            here,
            rl,
            &["unit", "requests_per_unit", "name", "replaces", "unlimited"],
        );
        let unlimited = unlimited || rl.get("unlimited").and_then(|v| v.as_bool()) == Some(true);
        let name = rl.get("name").and_then(scalar).unwrap_or_default();
        if let Some(r) = rl.get("replaces").and_then(|r| r.as_sequence()) {
            let replaced: Vec<String> = r
                .iter()
                .filter_map(|x| x.get("name").and_then(scalar))
                .collect();
            self.out.lost.push(format!(
                "{here}: replaces {replaced:?} (tollgate applies every matching rule of a call; remove the replaced rules' descriptors from the call or the file)"
            ));
        }
        if unlimited {
            return self.push(path, None, &name, true);
        }
        let unit = rl
            .get("unit")
            .and_then(scalar)
            .map(|u| u.to_ascii_lowercase())
            .unwrap_or_default();
        let per = match unit.as_str() {
            "second" => "1s",
            "minute" => "1m",
            "hour" => "1h",
            "day" => "1d",
            "week" => "7d",
            "month" => "30d",
            "year" => "365d",
            other => return Err(format!("{here}: rate_limit.unit {other:?} is not second, minute, hour, day, week, month or year")),
        };
        let n = rl
            .get("requests_per_unit")
            .and_then(|n| n.as_u64())
            .ok_or_else(|| {
                format!("{here}: rate_limit.requests_per_unit must be an integer ≥ 0")
            })?;
        if n == 0 {
            self.out.lost.push(format!(
                "{here}: requests_per_unit 0 (refuse every call) has no tollgate bucket; the rule is left out, so a less specific rule applies to these descriptors"
            ));
            return Ok(());
        }
        let mut rule = self.push(path, Some((n, per)), &name, false);
        if shadow {
            if let Ok(()) = &mut rule {
                if let Some(last) = self.out.rules.last_mut() {
                    last["mode"] = json!("shadow");
                }
            }
        }
        rule
    }

    /// Adds the rule for `path` with bucket `rate` (`None`: unlimited) named `name` (or one made
    /// from the domain and path).
    fn push(
        &mut self,
        path: &[(String, Option<String>)],
        rate: Option<(u64, &str)>,
        name: &str,
        unlimited: bool,
    ) -> Result<(), String> {
        let base = if name.is_empty() {
            let mut parts = vec![self.domain.to_string()];
            for (k, v) in path {
                parts.push(k.clone());
                parts.extend(v.clone());
            }
            if unlimited {
                parts.push("unlimited".into());
            }
            parts.join("-")
        } else {
            name.to_string()
        };
        let name = self.unique(&rule_name(&base));
        let descriptors: Vec<Value> = path
            .iter()
            .map(|(k, v)| match v {
                Some(v) => json!({ k: v }),
                None => json!(k),
            })
            .collect();
        let mut key: Vec<Value> = path
            .iter()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| json!(format!("descriptor:{k}")))
            .collect();
        if key.is_empty() {
            key.push(json!(format!("descriptor:{}", path[path.len() - 1].0)));
        }
        let (limit, per) = rate.unwrap_or((UNLIMITED, "1s"));
        let mut rule = json!({
            "name": name,
            "match": { "domain": self.domain, "descriptors": descriptors },
            "key": key,
            "limit": limit,
            "per": per,
            "algorithm": "fixed_window",
        });
        if unlimited {
            rule["mode"] = json!("shadow");
        }
        self.out.rules.push(rule);
        Ok(())
    }

    /// `name`, or `name-2`, `name-3`... when taken (within the 40-byte limit).
    fn unique(&mut self, name: &str) -> String {
        let mut n = 1;
        loop {
            let candidate = match n {
                1 => name.to_string(),
                _ => {
                    let suffix = format!("-{n}");
                    let keep = name.len().min(40 - suffix.len());
                    format!("{}{suffix}", &name[..keep])
                }
            };
            if self.names.insert(candidate.clone()) {
                return candidate;
            }
            n += 1;
        }
    }
}

/// `text` as a tollgate rule name: lower case, characters outside `[a-z0-9_-]` as `-`, at most
/// 40 bytes (a longer one keeps 31 bytes and a hash of the whole).
pub fn rule_name(text: &str) -> String {
    let clean: String = text
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if clean.len() <= 40 {
        return clean;
    }
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(text.as_bytes()));
    format!("{}-{}", &clean[..31], &digest[..8])
}

/// The items of the sequence `field` of `v` (none when absent).
fn seq<'a>(v: &'a serde_yaml::Value, field: &str) -> &'a [serde_yaml::Value] {
    v.get(field)
        .and_then(|d| d.as_sequence())
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// A scalar as text (YAML reads `value: 500` as a number).
fn scalar(v: &serde_yaml::Value) -> Option<String> {
    match v {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Names every field of the mapping `v` (at `at` in `file`) not in `known`.
fn lost_fields(
    lost: &mut Vec<String>,
    file: &str,
    at: &str,
    v: &serde_yaml::Value,
    known: &[&str],
) {
    let Some(map) = v.as_mapping() else { return };
    for k in map.keys() {
        let k = scalar(k).unwrap_or_default();
        if !known.contains(&k.as_str()) {
            let at = if at.is_empty() {
                String::new()
            } else {
                format!("{at}: ")
            };
            lost.push(format!("{file}: {at}field `{k}` is not understood"));
        }
    }
}

#[cfg(test)]
mod tests;
