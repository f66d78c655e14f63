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
}
