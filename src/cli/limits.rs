//! `tollgate limits set|get|clear`: `/v1/tenants/{id}/limits` of the admin API
//! (docs/admin-api.md#live-limits): a tenant's limits set live, fleet-wide within
//! `store.propagation`.

use super::client::{seconds, segment, Client, Failure};
use super::Output;
use clap::Subcommand;
use reqwest::Method;
use serde_json::{json, Map, Value};

/// The `limits` subcommands.
#[derive(Subcommand, Debug)]
pub enum LimitsCommand {
    /// Set a tenant's limits (replaces its override; the fields not given come from the file).
    Set {
        tenant: String,
        /// Tokens per --per.
        #[arg(long)]
        limit: Option<i64>,
        /// The period of --limit (`1m`, `1h`, `1d`).
        #[arg(long)]
        per: Option<String>,
        /// Most tokens at once.
        #[arg(long)]
        burst: Option<i64>,
        /// A calendar quota limit, `PERIOD=N` (`month=200000`); repeatable.
        #[arg(long, value_name = "PERIOD=N")]
        quota: Vec<String>,
        /// Requests in flight at once across the fleet.
        #[arg(long)]
        max_in_flight: Option<i64>,
        /// The override stops applying after this long (`1h`, `7d`, or seconds).
        #[arg(long, value_name = "DURATION")]
        expires_in: Option<String>,
    },
    /// A tenant's override in force.
    Get { tenant: String },
    /// Remove a tenant's override (the file's limits apply again).
    Clear { tenant: String },
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

fn path(tenant: &str) -> String {
    format!("/v1/tenants/{}/limits", segment(tenant))
}

/// Runs one `limits` subcommand.
pub async fn run(c: &Client, command: LimitsCommand) -> Result<Output, Failure> {
    match command {
        LimitsCommand::Set {
            tenant,
            limit,
            per,
            burst,
            quota,
            max_in_flight,
            expires_in,
        } => {
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
            if let Some(e) = expires_in {
                put("expires_in_s", Some(json!(seconds("--expires-in", &e)?)));
            }
            let v = c
                .call(Method::PUT, &path(&tenant), Some(&Value::Object(body)))
                .await?;
            let human = format!("set {}", summary(&tenant, &v["override"]));
            Ok(Output { json: v, human })
        }
        LimitsCommand::Get { tenant } => {
            let v = c.call(Method::GET, &path(&tenant), None).await?;
            let human = summary(&tenant, &v["override"]);
            Ok(Output { json: v, human })
        }
        LimitsCommand::Clear { tenant } => {
            let v = c.call(Method::DELETE, &path(&tenant), None).await?;
            let human = match v["removed"].as_bool() {
                Some(true) => format!("{tenant}: override removed (the file's limits apply)"),
                _ => format!("{tenant}: had no live override"),
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
        let o = json!({"limit": 600, "per": "1m", "burst": 600, "quotas": {"month": 9}, "expires_at": "2030-01-01T00:00:00Z"});
        assert_eq!(
            summary("acme", &o),
            "acme: limit 600 per 1m, burst 600, quotas month=9, until 2030-01-01T00:00:00Z"
        );
        assert!(summary("acme", &Value::Null).contains("no live override"));
        let q = quotas(&["month=5".into(), "day=2".into()]).unwrap();
        assert_eq!(Value::Object(q), json!({"month": 5, "day": 2}));
        assert_eq!(quotas(&["month".into()]).unwrap_err().exit_code(), 2);
    }
}
