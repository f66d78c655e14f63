//! `admin:`: the listener of /metrics, /healthz, /readyz and the admin API, and the
//! environment variable holding the API's token.

use super::common::Check;
use crate::config::raw::RawAdmin;
use std::net::SocketAddr;

/// `admin.listen` and `admin.token_env`, each `None` when absent (or, for `listen`, invalid).
pub(super) fn settings(
    c: &mut Check,
    raw: Option<&RawAdmin>,
) -> (Option<SocketAddr>, Option<String>) {
    let listen = raw.and_then(|a| c.socket_addr("admin.listen", &a.listen));
    let token_env = raw.and_then(|a| a.token_env.clone());
    if let Some(name) = &token_env {
        if let Err(why) = env_var_name(name) {
            c.err("admin.token_env", why);
        }
    }
    (listen, token_env)
}

/// An environment variable name as POSIX shells accept it: `[A-Za-z_][A-Za-z0-9_]*`.
fn env_var_name(name: &str) -> Result<(), &'static str> {
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
