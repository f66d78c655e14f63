//! `reload:`: the file watch and its debounce.

use super::common::Check;
use crate::config::model::ReloadSettings;
use crate::config::raw::RawReload;
use std::time::Duration;

/// Longest `reload.debounce`: a change should not wait longer than this to apply.
const MAX_DEBOUNCE: Duration = Duration::from_secs(60);

/// `reload:`, with its defaults (no watch, 500ms debounce) when absent.
pub(super) fn settings(c: &mut Check, raw: Option<&RawReload>) -> ReloadSettings {
    let mut out = ReloadSettings::default();
    let Some(raw) = raw else {
        return out;
    };
    out.watch = raw.watch.unwrap_or(false);
    if let Some(text) = &raw.debounce {
        if let Some(d) = c.duration("reload.debounce", text) {
            if d.is_zero() || d > MAX_DEBOUNCE {
                c.err("reload.debounce", "must be between 1ms and 60s");
            } else {
                out.debounce = d;
            }
        }
    }
    out
}
