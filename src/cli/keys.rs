//! `tollgate keys create|list|revoke|rotate`: `/v1/keys` of the admin API
//! (docs/admin-api.md#api-keys).

use super::client::{seconds, segment, Client, Failure};
use super::{table, text, Output};
use clap::Subcommand;
use reqwest::Method;
use serde_json::{json, Value};

/// The `keys` subcommands.
#[derive(Subcommand, Debug)]
pub enum KeysCommand {
    /// Issue a key; its secret is printed this once.
    Create {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        tier: String,
        /// Unique among the tenant's keys (A-Z a-z 0-9 . _ -).
        #[arg(long)]
        name: String,
        /// Expires after this long (`30d`, `12h`, or seconds).
        #[arg(long, value_name = "DURATION")]
        expires_in: Option<String>,
    },
    /// A tenant's keys, by name (every page unless --limit is given).
    List {
        #[arg(long)]
        tenant: String,
        /// At most this many (one page).
        #[arg(long)]
        limit: Option<u32>,
        /// Start after this key name.
        #[arg(long)]
        after: Option<String>,
    },
    /// Revoke a key (its secrets stop working on every instance within store.propagation).
    Revoke { id: String },
    /// A new secret for a key; the old one keeps working for the grace period.
    Rotate {
        id: String,
        /// How long the old secret keeps working (`1h`, or seconds; default none).
        #[arg(long, value_name = "DURATION")]
        grace: Option<String>,
    },
}

fn key_row(k: &Value) -> Vec<String> {
    ["name", "id", "tier", "status", "expires_at"]
        .iter()
        .map(|f| text(k, f))
        .collect()
}

/// Runs one `keys` subcommand.
pub async fn run(c: &Client, command: KeysCommand) -> Result<Output, Failure> {
    match command {
        KeysCommand::Create {
            tenant,
            tier,
            name,
            expires_in,
        } => {
            let mut body = json!({"tenant": tenant, "tier": tier, "name": name});
            if let Some(e) = expires_in {
                body["expires_in_s"] = json!(seconds("--expires-in", &e)?);
            }
            let v = c.call(Method::POST, "/v1/keys", Some(&body)).await?;
            let human = format!(
                "created {} (tenant {}, tier {}, name {})\nsecret: {}\n\
                 (the secret is not shown again: store it now)",
                text(&v, "id"),
                text(&v, "tenant"),
                text(&v, "tier"),
                text(&v, "name"),
                text(&v, "secret")
            );
            Ok(Output { json: v, human })
        }
        KeysCommand::List {
            tenant,
            limit,
            after,
        } => {
            let mut all: Vec<Value> = Vec::new();
            let mut after = after;
            let last = loop {
                let mut path = format!("/v1/keys?tenant={}", segment(&tenant));
                if let Some(l) = limit {
                    path.push_str(&format!("&limit={l}"));
                }
                if let Some(a) = &after {
                    path.push_str(&format!("&after={}", segment(a)));
                }
                let v = c.call(Method::GET, &path, None).await?;
                all.extend(v["keys"].as_array().cloned().unwrap_or_default());
                match v["next"].as_str() {
                    Some(n) if limit.is_none() => after = Some(n.to_string()),
                    _ => break v,
                }
            };
            let rows: Vec<Vec<String>> = all.iter().map(key_row).collect();
            let human = table(&["NAME", "ID", "TIER", "STATUS", "EXPIRES"], &rows);
            let json = json!({"tenant": tenant, "keys": all, "next": last["next"]});
            Ok(Output { json, human })
        }
        KeysCommand::Revoke { id } => {
            let path = format!("/v1/keys/{}", segment(&id));
            let v = c.call(Method::DELETE, &path, None).await?;
            let human = format!("revoked {} at {}", text(&v, "id"), text(&v, "revoked_at"));
            Ok(Output { json: v, human })
        }
        KeysCommand::Rotate { id, grace } => {
            let mut body = json!({});
            if let Some(g) = grace {
                body["grace_s"] = json!(seconds("--grace", &g)?);
            }
            let path = format!("/v1/keys/{}/rotate", segment(&id));
            let v = c.call(Method::POST, &path, Some(&body)).await?;
            let human = format!(
                "rotated {}\nsecret: {}\nold secret valid until: {}",
                text(&v, "id"),
                text(&v, "secret"),
                text(&v, "previous_secret_valid_until")
            );
            Ok(Output { json: v, human })
        }
    }
}
