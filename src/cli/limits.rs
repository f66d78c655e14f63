//! `tollgate limits set|get|clear`: `/v1/tenants/{id}/limits` of the admin API
//! (docs/admin-api.md#live-limits): a tenant's limits set live, fleet-wide within
//! `store.propagation`; with `--rule NAME --key VALUE`, `/v1/rules/{rule}/keys/{key}/limits`:
//! the bucket of one key of a limit rule.

use super::client::{seconds, segment, Client, Failure};
use super::Output;
use clap::{Args, Subcommand};
use reqwest::Method;
use serde_json::{json, Map, Value};

/// Whose limits: a tenant, or one key of a limit rule.
#[derive(Args, Debug)]
pub struct Whose {
    /// The tenant id (or give --rule and --key).
    tenant: Option<String>,
    /// A limit rule's name (`limits[].name`): the override governs one key of it.
    #[arg(long, requires = "key", conflicts_with = "tenant")]
    rule: Option<String>,
    /// The key's value with --rule; repeat it for a rule keyed by several parts, in the order
    /// of its `key:`.
    #[arg(long, requires = "rule")]
    key: Vec<String>,
}

impl Whose {
    /// The admin API path and how to name it in messages. Errors: a usage failure when neither
    /// a tenant nor a rule key is given.
    fn path(&self) -> Result<(String, String), Failure> {
        match (&self.tenant, &self.rule) {
            (Some(t), None) => Ok((format!("/v1/tenants/{}/limits", segment(t)), t.clone())),
            (None, Some(r)) if !self.key.is_empty() => {
                let key: Vec<String> = self.key.iter().map(|k| segment(k)).collect();
                let path = format!("/v1/rules/{}/keys/{}/limits", segment(r), key.join(","));
                Ok((path, format!("rule {r} key {}", self.key.join(","))))
            }
            _ => Err(Failure::Usage(
                "name a tenant, or a rule key with --rule NAME --key VALUE".into(),
            )),
        }
    }
}

/// The `limits` subcommands.
#[derive(Subcommand, Debug)]
pub enum LimitsCommand {
    /// Set a tenant's (or a rule key's) limits (replaces its override; the fields not given come
    /// from the file).
    Set {
        #[command(flatten)]
        whose: Whose,
        /// Tokens per --per.
        #[arg(long)]
        limit: Option<i64>,
        /// The period of --limit (`1m`, `1h`, `1d`).
        #[arg(long)]
        per: Option<String>,
        /// Most tokens at once.
        #[arg(long)]
        burst: Option<i64>,
        /// A calendar quota limit, `PERIOD=N` (`month=200000`); repeatable. Tenants only.
        #[arg(long, value_name = "PERIOD=N")]
        quota: Vec<String>,
        /// Requests in flight at once across the fleet. Tenants only.
        #[arg(long)]
        max_in_flight: Option<i64>,
        /// The tier's usage budget: units per --usage-per. Tenants only.
        #[arg(long)]
        usage_limit: Option<i64>,
        /// The period of --usage-limit.
        #[arg(long)]
        usage_per: Option<String>,
        /// The usage budget's most units at once.
        #[arg(long)]
        usage_burst: Option<i64>,
        /// The override stops applying after this long (`1h`, `7d`, or seconds).
        #[arg(long, value_name = "DURATION")]
        expires_in: Option<String>,
    },
    /// A tenant's (or a rule key's) override in force.
    Get {
        #[command(flatten)]
        whose: Whose,
    },
    /// Remove a tenant's (or a rule key's) override (the file's limits apply again).
    Clear {
        #[command(flatten)]
        whose: Whose,
    },
}

/// The override's fields as one line (`limit 600 per 1m, burst 600, ...`).
fn summary(tenant: &str, o: &Value) -> String {
    if o.is_null() {
        return format!("{tenant}: no live override (the file's limits apply)");
    }
    let mut parts = Vec::new();
    match (&o["limit"], &o["per"]) {
        (Value::Null, Value::Null) => {}
        (l, Value::String(p)) if !l.is_null() => parts.push(format!("limit {l} per {p}")),
        (l, Value::Null) => parts.push(format!("limit {l}")),
        (_, p) => parts.push(format!("per {}", p.as_str().unwrap_or_default())),
    }
    for (name, field) in [("burst", "burst"), ("max_in_flight", "max_in_flight")] {
        if !o[field].is_null() {
            parts.push(format!("{name} {}", o[field]));
        }
    }
    if let Some(q) = o["quotas"].as_object() {
        let q: Vec<String> = q.iter().map(|(p, n)| format!("{p}={n}")).collect();
        parts.push(format!("quotas {}", q.join(" ")));
    }
    if let Some(u) = o["usage"].as_object() {
        let u: Vec<String> = u.iter().map(|(f, n)| format!("{f} {}", plain(n))).collect();
        parts.push(format!("usage {}", u.join(" ")));
    }
    if let Some(t) = o["expires_at"].as_str() {
        parts.push(format!("until {t}"));
    }
    format!("{tenant}: {}", parts.join(", "))
}

/// `--quota PERIOD=N` flags as the API's `quotas` object. Errors: a usage failure.
fn quotas(flags: &[String]) -> Result<Map<String, Value>, Failure> {
    let mut out = Map::new();
    for f in flags {
        let (period, n) = f.split_once('=').ok_or_else(|| {
            Failure::Usage(format!("--quota {f:?}: write PERIOD=N (month=200000)"))
        })?;
        let n: i64 = n
            .parse()
            .map_err(|_| Failure::Usage(format!("--quota {f:?}: N is not a whole number")))?;
        out.insert(period.to_string(), json!(n));
    }
    Ok(out)
}

/// A JSON value as text, a string without its quotes.
fn plain(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// Runs one `limits` subcommand.
pub async fn run(c: &Client, command: LimitsCommand) -> Result<Output, Failure> {
    match command {
        LimitsCommand::Set {
            whose,
            limit,
            per,
            burst,
            quota,
            max_in_flight,
            usage_limit,
            usage_per,
            usage_burst,
            expires_in,
        } => {
            let (path, name) = whose.path()?;
            let mut body = Map::new();
            let mut put = |k: &str, v: Option<Value>| {
                if let Some(v) = v {
                    body.insert(k.to_string(), v);
                }
            };
            put("limit", limit.map(|v| json!(v)));
            put("per", per.map(|v| json!(v)));
            put("burst", burst.map(|v| json!(v)));
            put("max_in_flight", max_in_flight.map(|v| json!(v)));
            if !quota.is_empty() {
                put("quotas", Some(Value::Object(quotas(&quota)?)));
            }
            let mut usage = Map::new();
            for (k, v) in [
                ("limit", usage_limit.map(|v| json!(v))),
                ("per", usage_per.map(|v| json!(v))),
                ("burst", usage_burst.map(|v| json!(v))),
            ] {
                if let Some(v) = v {
                    usage.insert(k.into(), v);
                }
            }
            if !usage.is_empty() {
                put("usage", Some(Value::Object(usage)));
            }
            if let Some(e) = expires_in {
                put("expires_in_s", Some(json!(seconds("--expires-in", &e)?)));
            }
            let tenant_only = ["quotas", "max_in_flight", "usage"];
            if whose.rule.is_some() {
                if let Some(f) = tenant_only.iter().find(|f| body.contains_key(**f)) {
                    let why = format!("{f}: a rule key's override sets limit, per and burst only");
                    return Err(Failure::Usage(why));
                }
            }
            let v = c
                .call(Method::PUT, &path, Some(&Value::Object(body)))
                .await?;
            let human = format!("set {}", summary(&name, &v["override"]));
            Ok(Output { json: v, human })
        }
        LimitsCommand::Get { whose } => {
            let (path, name) = whose.path()?;
            let v = c.call(Method::GET, &path, None).await?;
            let human = summary(&name, &v["override"]);
            Ok(Output { json: v, human })
        }
        LimitsCommand::Clear { whose } => {
            let (path, name) = whose.path()?;
            let v = c.call(Method::DELETE, &path, None).await?;
            let human = match v["removed"].as_bool() {
                Some(true) => format!("{name}: override removed (the file's limits apply)"),
                _ => format!("{name}: had no live override"),
            };
            Ok(Output { json: v, human })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_and_quota_flags() {
        let o = json!({"limit": 600, "per": "1m", "burst": 600, "quotas": {"month": 9}, "usage": {"burst": 50, "per": "1d"}, "expires_at": "2030-01-01T00:00:00Z"});
        assert_eq!(
            summary("acme", &o),
            "acme: limit 600 per 1m, burst 600, quotas month=9, usage burst 50 per 1d, until 2030-01-01T00:00:00Z"
        );
        assert!(summary("acme", &Value::Null).contains("no live override"));
        let q = quotas(&["month=5".into(), "day=2".into()]).unwrap();
        assert_eq!(Value::Object(q), json!({"month": 5, "day": 2}));
        assert_eq!(quotas(&["month".into()]).unwrap_err().exit_code(), 2);
    }
}

#[cfg(test)]
mod whose_tests {
    use super::*;

    fn whose(tenant: Option<&str>, rule: Option<&str>, key: &[&str]) -> Whose {
        Whose {
            tenant: tenant.map(str::to_string),
            rule: rule.map(str::to_string),
            key: key.iter().map(|k| k.to_string()).collect(),
        }
    }

    #[test]
    fn paths_of_tenants_and_rule_keys() {
        let (p, _) = whose(Some("acme"), None, &[]).path().unwrap();
        assert_eq!(p, "/v1/tenants/acme/limits");
        let (p, name) = whose(None, Some("per-user"), &["a,b", "GET"])
            .path()
            .unwrap();
        assert_eq!(p, "/v1/rules/per-user/keys/a%2Cb,GET/limits");
        assert_eq!(name, "rule per-user key a,b,GET");
        let none = whose(None, None, &[]).path().unwrap_err();
        assert_eq!(none.exit_code(), 2);
    }
}
