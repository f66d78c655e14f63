//! Values several sections share: the failure policy (`redis`, `tiers`) and the
//! enforce/shadow mode (`edge`, `tiers`, `routes`).

/// What the tenant stage does when Redis cannot decide (docs/DESIGN.md section 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Admit, with no quota headers.
    Open,
    /// 503 `temporary-reduced-capacity` with Retry-After.
    Closed,
    /// Decide with an in-memory bucket sized `1 / fleet_size` of the tier.
    Local,
}

impl FailurePolicy {
    /// The name as written in YAML and used as a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Open => "open",
            FailurePolicy::Closed => "closed",
            FailurePolicy::Local => "local",
        }
    }
}

/// Whether a limit is enforced or only watched (`mode`, docs/DESIGN.md 4c "Shadow").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Refusals are answered (default).
    #[default]
    Enforce,
    /// The decision is taken, debited, counted (`outcome="shadow_limited"`) and logged, its
    /// headers are sent, and the request goes on as if admitted.
    Shadow,
}

impl Mode {
    /// `enforce` or `shadow`, as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Shadow => "shadow",
        }
    }

    /// True for [`Mode::Shadow`].
    pub fn is_shadow(self) -> bool {
        self == Mode::Shadow
    }
}
