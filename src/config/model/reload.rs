//! `reload:`: reloading on a change of the config file, besides SIGHUP.

use std::time::Duration;

/// Default of `reload.debounce`.
pub const DEFAULT_RELOAD_DEBOUNCE: Duration = Duration::from_millis(500);

/// `reload:`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReloadSettings {
    /// Reload when the file's content changes (off by default: SIGHUP only).
    pub watch: bool,
    /// A changed content is loaded once it has stayed the same this long.
    pub debounce: Duration,
}

impl Default for ReloadSettings {
    fn default() -> Self {
        ReloadSettings {
            watch: false,
            debounce: DEFAULT_RELOAD_DEBOUNCE,
        }
    }
}
