//! `tollgate blocks add|list|remove`: `/v1/blocks` of the admin API
//! (docs/admin-api.md#blocks).

use super::client::{seconds, segment, Client, Failure};
use super::{table, text, Output};
use clap::{Subcommand, ValueEnum};
use reqwest::Method;
use serde_json::{json, Value};

/// What a block applies to.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum BlockType {
    /// An address or CIDR network (IPv4 or IPv6), refused at the edge.
    Ip,
    /// A tenant id.
    Tenant,
    /// A live API key's id (`key_...`).
    Key,
}

impl BlockType {
    fn as_str(self) -> &'static str {
        match self {
            BlockType::Ip => "ip",
            BlockType::Tenant => "tenant",
            BlockType::Key => "key",
        }
    }
}

/// The `blocks` subcommands.
#[derive(Subcommand, Debug)]
pub enum BlocksCommand {
    /// Block an address or network, a tenant or a key (replaces a block of the same value).
    Add {
        #[arg(value_enum)]
        r#type: BlockType,
        /// `203.0.113.7`, `198.51.100.0/24`, `2001:db8::/32`, a tenant id or a key id.
        value: String,
        /// Why (shown in the refusal and the list).
        #[arg(long)]
        reason: String,
        /// Ends after this long (`15m`, `1h`, `7d`, or seconds); default: until removed.
        #[arg(long = "for", value_name = "DURATION")]
        duration: Option<String>,
    },
    /// The blocks in force.
    List {
        /// Only blocks of this type.
        #[arg(long = "type", value_enum)]
        r#type: Option<BlockType>,
    },
    /// Remove a block.
    Remove {
        #[arg(value_enum)]
        r#type: BlockType,
        value: String,
    },
}

fn path(t: BlockType, value: &str) -> String {
    format!("/v1/blocks/{}/{}", t.as_str(), segment(value))
}

fn describe(b: &Value) -> String {
    let until = match b.get("expires_at").and_then(Value::as_str) {
        Some(t) => format!("until {t}"),
        None => "until removed".into(),
    };
    format!(
        "{} {} ({}) {until}",
        text(b, "type"),
        text(b, "value"),
        text(b, "reason")
    )
}

/// Runs one `blocks` subcommand.
pub async fn run(c: &Client, command: BlocksCommand) -> Result<Output, Failure> {
    match command {
        BlocksCommand::Add {
            r#type,
            value,
            reason,
            duration,
        } => {
            let mut body = json!({ "reason": reason });
            if let Some(d) = duration {
                body["expires_in_s"] = json!(seconds("--for", &d)?);
            }
            let v = c
                .call(Method::PUT, &path(r#type, &value), Some(&body))
                .await?;
            let human = format!("blocked {}", describe(&v));
            Ok(Output { json: v, human })
        }
        BlocksCommand::List { r#type } => {
            let p = match r#type {
                Some(t) => format!("/v1/blocks?type={}", t.as_str()),
                None => "/v1/blocks".to_string(),
            };
            let v = c.call(Method::GET, &p, None).await?;
            let rows: Vec<Vec<String>> = v["blocks"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|b| {
                            ["type", "value", "expires_at", "reason"]
                                .iter()
                                .map(|f| text(b, f))
                                .collect()
                        })
                        .collect()
                })
                .unwrap_or_default();
            let human = table(&["TYPE", "VALUE", "EXPIRES", "REASON"], &rows);
            Ok(Output { json: v, human })
        }
        BlocksCommand::Remove { r#type, value } => {
            let v = c.call(Method::DELETE, &path(r#type, &value), None).await?;
            let human = format!("removed {}", describe(&v["removed"]));
            Ok(Output { json: v, human })
        }
    }
}
