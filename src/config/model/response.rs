//! `response:`: the shape of a rate-limit rejection.

/// Which rate-limit header families to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderMode {
    Ietf,
    Legacy,
    Both,
    None,
}

/// `response:`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponseSettings {
    /// Status of a tenant-quota or edge rejection (default 429).
    pub status: u16,
    pub headers: HeaderMode,
    /// `openai` in `response.headers`: a request decided with a usage budget also gets
    /// `x-ratelimit-limit-tokens`, `x-ratelimit-remaining-tokens`, `x-ratelimit-reset-tokens`
    /// and, when refused, `retry-after-ms` (docs/usage-cost.md#headers).
    pub openai: bool,
}
