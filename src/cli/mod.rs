//! The admin commands of the command line (docs/admin-api.md#command-line): `tollgate keys ...`,
//! `tollgate limits ...` and `tollgate blocks ...` talk to a running gateway's admin API through [`client`].
//!
//! Exit codes, for scripts: 0 success; 1 the API answered an error (its problem `detail` on
//! stderr); 2 a usage error; 3 the admin API could not be reached. `--json` prints the API's
//! JSON answer on stdout; without it a short human summary is printed.

pub mod blocks;
pub mod client;
pub mod keys;
pub mod limits;

use clap::Subcommand;
use client::{AdminArgs, Client, Failure};
use serde_json::Value;
use std::io::Write;
use std::process::ExitCode;

/// The admin commands (flattened into the binary's subcommands).
#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// API keys issued through the admin API: create, list, revoke, rotate.
    Keys {
        #[command(flatten)]
        admin: AdminArgs,
        #[command(subcommand)]
        command: keys::KeysCommand,
    },
    /// Blocks of an address or network, a tenant or a key: add, list, remove.
    Blocks {
        #[command(flatten)]
        admin: AdminArgs,
        #[command(subcommand)]
        command: blocks::BlocksCommand,
    },
    /// A tenant's limits set live through the admin API: set, get, clear.
    Limits {
        #[command(flatten)]
        admin: AdminArgs,
        #[command(subcommand)]
        command: limits::LimitsCommand,
    },
}

/// Runs one admin command to its exit code.
pub fn run(command: AdminCommand) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (admin, result) = match command {
        AdminCommand::Keys { admin, command } => {
            let r = runtime.block_on(async {
                let c = Client::new(&admin)?;
                keys::run(&c, command).await
            });
            (admin, r)
        }
        AdminCommand::Blocks { admin, command } => {
            let r = runtime.block_on(async {
                let c = Client::new(&admin)?;
                blocks::run(&c, command).await
            });
            (admin, r)
        }
        AdminCommand::Limits { admin, command } => {
            let r = runtime.block_on(async {
                let c = Client::new(&admin)?;
                limits::run(&c, command).await
            });
            (admin, r)
        }
    };
    finish(&admin, result)
}

/// What a command answers: the API's JSON and its human summary.
pub struct Output {
    pub json: Value,
    pub human: String,
}

/// Prints `result` and turns it into the exit code.
fn finish(admin: &AdminArgs, result: Result<Output, Failure>) -> ExitCode {
    match result {
        Ok(out) => {
            let text = if admin.json {
                out.json.to_string()
            } else {
                out.human.trim_end().to_string()
            };
            // A closed stdout (`| head`) is not the command's failure: the API call succeeded.
            if !text.is_empty() {
                let _ = writeln!(std::io::stdout().lock(), "{text}");
            }
            ExitCode::SUCCESS
        }
        Err(f) => {
            eprintln!("{}", f.message());
            ExitCode::from(f.exit_code())
        }
    }
}

/// Member `name` of `v` as text (`-` when absent or null).
pub fn text(v: &Value, name: &str) -> String {
    match v.get(name) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "-".into(),
        Some(other) => other.to_string(),
    }
}

/// Rows as a table with left-aligned columns, the header first.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}
