//! `admin:`: the admin API's tokens and their scopes.

/// What an admin token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AdminScope {
    /// Reads only: every `GET`, and `POST /v1/explain` (which changes nothing). A write is 403.
    Read,
    /// Reads and writes (`admin.token_env` alone is this scope).
    Write,
}

impl AdminScope {
    /// The name users type (`read`, `write`).
    pub fn as_str(self) -> &'static str {
        match self {
            AdminScope::Read => "read",
            AdminScope::Write => "write",
        }
    }
}

/// One admin token: the environment variable holding it, the name the audit log shows, and
/// its scope (`admin.tokens[]`, or `admin.token_env` as a `write` token named after its variable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminTokenSettings {
    /// Shown in the audit log instead of the token (default: the variable's name).
    pub name: String,
    /// The environment variable holding the token (read at every load).
    pub token_env: String,
    pub scope: AdminScope,
}
