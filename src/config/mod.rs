//! Configuration: `gateway.yaml` → raw serde structs ([`raw`]) → validated [`Config`].
//!
//! Loading never panics: every problem is a [`ConfigError`] naming the field path
//! (`routes[1].upstream`) and the reason; YAML syntax errors carry line and column.

pub mod duration;
pub mod import;
pub mod model;
pub mod raw;
pub mod schema;
pub mod source;
mod validate;

pub use validate::{live_override, live_rule_override, RawLimitOverride, RawRateOverride};
pub mod warnings;
mod yaml_error;

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
    let raw: raw::RawConfig =
        serde_yaml::from_str(text).map_err(|e| vec![yaml_error::of(e, text)])?;
    // Serde lets the last of two equal keys of a map (`tiers`, `upstreams`) win: refuse it.
    if let Some(e) = yaml_error::duplicate_key(text) {
        return Err(vec![e]);
    }
    validate::validate(raw)
}

/// The reason a file named in the config cannot be read: the error, and for a relative path
/// the directory it was resolved against (the working directory; docs/configuration.md#file-paths).
pub fn unreadable(file: &str, e: &std::io::Error) -> String {
    let relative = Path::new(file).is_relative();
    match std::env::current_dir() {
        Ok(dir) if relative => format!(
            "cannot read \"{file}\" (a relative path, resolved against the working directory {}): {e}",
            dir.display()
        ),
        _ => format!("cannot read \"{file}\": {e}"),
    }
}

/// Reads and validates the file at `path`, recording its SHA-256 and the load time in
/// [`Config::source`].
pub fn load(path: &Path) -> Result<Config, Vec<ConfigError>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![ConfigError::new(
            "",
            format!("cannot read {}: {e}", path.display()),
        )]
    })?;
    let mut config = parse(&text)?;
    config.source = ConfigSource::of(&text);
    Ok(config)
}

/// Test helper: every error [`parse`] reports for `yaml` as `path: reason` text (empty when
/// the file is valid).
#[cfg(test)]
pub(crate) fn parse_errors(yaml: &str) -> Vec<String> {
    parse(yaml)
        .err()
        .unwrap_or_default()
        .iter()
        .map(|e| e.to_string())
        .collect()
}

#[cfg(test)]
mod tests;
