//! Configuration: `gateway.yaml` → raw serde structs ([`raw`]) → validated [`Config`].
//!
//! Loading never panics: every problem is a [`ConfigError`] naming the field path
//! (`routes[1].upstream`) and the reason; YAML syntax errors carry line and column.

pub mod duration;
pub mod model;
pub mod raw;
mod validate;

pub use model::*;

use std::fmt;
use std::path::Path;

/// One configuration problem: where (`field path`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted field path, e.g. `tiers.free.limit` or `routes[1].upstream`; empty for the file.
    pub path: String,
    /// Human-readable reason.
    pub reason: String,
}

impl ConfigError {
    /// A problem at `path`.
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "{}: {}", self.path, self.reason)
        }
    }
}

/// Parses and validates YAML text. Errors: YAML syntax (with line and column), unknown keys,
/// wrong types, and every semantic problem found by validation.
pub fn parse(text: &str) -> Result<Config, Vec<ConfigError>> {
    let raw: raw::RawConfig = serde_yaml::from_str(text).map_err(|e| vec![yaml_error(e)])?;
    validate::validate(raw)
}

/// Reads and validates the file at `path`.
pub fn load(path: &Path) -> Result<Config, Vec<ConfigError>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![ConfigError::new(
            "",
            format!("cannot read {}: {e}", path.display()),
        )]
    })?;
    parse(&text)
}

fn yaml_error(e: serde_yaml::Error) -> ConfigError {
    // serde_yaml prefixes the field path ("routes[0]: unknown field ...") and appends the location.
    let text = e.to_string();
    match text.split_once(": ") {
        Some((path, reason))
            if !path.contains(' ') && (path.contains('.') || path.contains('[')) =>
        {
            ConfigError::new(path, reason)
        }
        _ => ConfigError::new("", format!("invalid YAML: {text}")),
    }
}
