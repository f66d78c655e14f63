//! `admin:`: the listener of /metrics, /healthz, /readyz and the admin API, and the
//! environment variables holding the API's tokens with their scopes.

use super::common::Check;
use crate::config::raw::{RawAdmin, RawAdminScope};
use crate::config::{AdminScope, AdminTokenSettings};
use std::net::SocketAddr;

/// Longest audit name of a token.
const MAX_TOKEN_NAME: usize = 64;

/// `admin.listen`, `admin.token_env` (each `None` when absent or, for `listen`, invalid) and
/// every token: `token_env` first as a `write` token named after its variable, then `tokens`.
pub(super) fn settings(
    c: &mut Check,
    raw: Option<&RawAdmin>,
) -> (Option<SocketAddr>, Option<String>, Vec<AdminTokenSettings>) {
    let listen = raw.and_then(|a| c.socket_addr("admin.listen", &a.listen));
    let token_env = raw.and_then(|a| a.token_env.clone());
    let mut tokens = Vec::new();
    if let Some(name) = &token_env {
        match env_var_name(name) {
            Ok(()) => tokens.push(AdminTokenSettings {
                name: name.clone(),
                token_env: name.clone(),
                scope: AdminScope::Write,
            }),
            Err(why) => c.err("admin.token_env", why),
        }
    }
    let listed = raw.and_then(|a| a.tokens.as_deref()).unwrap_or_default();
    for (i, t) in listed.iter().enumerate() {
        let path = format!("admin.tokens[{i}]");
        if let Err(why) = env_var_name(&t.token_env) {
            c.err(format!("{path}.token_env"), why);
            continue;
        }
        if tokens.iter().any(|o| o.token_env == t.token_env) {
            c.err(
                format!("{path}.token_env"),
                format!("{} is already an admin token's variable", t.token_env),
            );
            continue;
        }
        let name = t.name.clone().unwrap_or_else(|| t.token_env.clone());
        let printable = name.chars().all(|ch| ch.is_ascii_graphic());
        if name.is_empty() || name.len() > MAX_TOKEN_NAME || !printable {
            let why = format!("1 to {MAX_TOKEN_NAME} printable ASCII characters, no spaces");
            c.err(format!("{path}.name"), why);
            continue;
        }
        if tokens.iter().any(|o| o.name == name) {
            c.err(
                format!("{path}.name"),
                format!("{name} names another token"),
            );
            continue;
        }
        let scope = match t.scope {
            RawAdminScope::Read => AdminScope::Read,
            RawAdminScope::Write => AdminScope::Write,
        };
        tokens.push(AdminTokenSettings {
            name,
            token_env: t.token_env.clone(),
            scope,
        });
    }
    (listen, token_env, tokens)
}

/// An environment variable name as POSIX shells accept it: `[A-Za-z_][A-Za-z0-9_]*`.
pub(super) fn env_var_name(name: &str) -> Result<(), &'static str> {
    let mut chars = name.chars();
    match chars.next() {
        None => Err("must name an environment variable, not be empty"),
        Some(c) if c.is_ascii_digit() => {
            Err("an environment variable name cannot start with a digit")
        }
        _ if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => Ok(()),
        _ => Err("an environment variable name has only letters, digits and '_'"),
    }
}
