//! Configuration: `gateway.yaml` → raw serde structs ([`raw`]) → validated [`Config`].
//!
//! Loading never panics: every problem is a [`ConfigError`] naming the field path
//! (`routes[1].upstream`) and the reason; YAML syntax errors carry line and column.

pub mod duration;
pub mod model;
pub mod raw;
pub mod schema;
pub mod source;
mod validate;
pub mod warnings;

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

fn yaml_error(e: serde_yaml::Error) -> ConfigError {
    // serde_yaml prefixes the field path ("routes[0]: unknown field ...") and appends the location.
    let text = e.to_string();
    let (path, reason) = match text.split_once(": ") {
        Some((path, reason)) if !path.is_empty() && !path.contains(' ') => (path, reason),
        _ => ("", text.as_str()),
    };
    let join = |field: &str| match path {
        "" => field.to_string(),
        p => format!("{p}.{field}"),
    };
    // A missing or unknown field is reported at its own path: `routes[0].upstream: is required`,
    // `edge.brust: unknown field ...`. A name may itself hold backticks: it ends where serde's
    // "`, expected" (or "`, there are") starts, or at the last backtick.
    if let Some((field, rest)) = reason
        .strip_prefix("missing field `")
        .and_then(|r| r.rsplit_once('`'))
        .filter(|(field, _)| !field.is_empty())
    {
        return ConfigError::new(join(field), format!("is required{rest}"));
    }
    if let Some((field, _)) = reason
        .strip_prefix("unknown field `")
        .and_then(|r| {
            let end = ["`, expected", "`, there are"]
                .iter()
                .find_map(|tail| r.find(tail))
                .or_else(|| r.rfind('`'))?;
            Some((&r[..end], &r[end..]))
        })
        .filter(|(field, _)| !field.is_empty())
    {
        return ConfigError::new(join(field), reason);
    }
    match path {
        "" if reason.contains("expected struct RawConfig") => ConfigError::new(
            "",
            format!("invalid YAML: the document must be a mapping of sections (listen, upstreams, routes, ...): {reason}"),
        ),
        "" => {
            let at = match e.location() {
                _ if text.contains(" line ") => String::new(),
                Some(l) => format!(" at line {} column {}", l.line(), l.column()),
                None => " (in the document as a whole)".to_string(),
            };
            ConfigError::new("", format!("invalid YAML: {text}{at}"))
        }
        p => ConfigError::new(p, reason),
    }
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
