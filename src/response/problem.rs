//! RFC 9457 problem details: the body of every rejection tollgate writes.

use bytes::Bytes;
use serde::ser::{SerializeMap, Serializer};
use serde_json::{Map, Value};

/// IANA problem type for quota rejections (RFC 9457 registry).
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";
/// IANA problem type for capacity rejections (concurrency, Redis fail-closed).
pub const REDUCED_CAPACITY: &str =
    "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

/// An RFC 9457 problem detail.
#[derive(Debug, Clone)]
pub struct Problem {
    pub status: u16,
    /// Problem type URI; `about:blank` means "see the status code".
    pub type_uri: &'static str,
    pub title: &'static str,
    pub detail: String,
    /// Extension members (e.g. `violated-policies`, `policy`).
    pub extensions: Map<String, Value>,
}

impl Problem {
    /// A problem with type `about:blank` whose title is the status's reason phrase.
    pub fn status(status: u16, detail: impl Into<String>) -> Self {
        let title = http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Error");
        Problem {
            status,
            type_uri: "about:blank",
            title,
            detail: detail.into(),
            extensions: Map::new(),
        }
    }

    /// A problem of a registered type.
    pub fn typed(status: u16, type_uri: &'static str, title: &'static str, detail: String) -> Self {
        Problem {
            status,
            type_uri,
            title,
            detail,
            extensions: Map::new(),
        }
    }

    /// Adds an extension member.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.extensions.insert(key.to_string(), value);
        self
    }

    /// The JSON body: the RFC 9457 members `type`, `title`, `status`, `detail`, plus
    /// `request-id` and the extension members (an extension named like a standard member
    /// replaces it), keys in sorted order. Serialized straight from the fields: no JSON tree is
    /// built and the extensions are not copied (this runs for every rejection).
    pub fn to_body(&self, request_id: &str) -> Bytes {
        // Sorted by key, as `extensions` (a sorted map) is, so one merge keeps the order.
        let standard = [
            ("detail", Member::Str(&self.detail)),
            ("request-id", Member::Str(request_id)),
            ("status", Member::Status(self.status)),
            ("title", Member::Str(self.title)),
            ("type", Member::Str(self.type_uri)),
        ];
        let mut out = Vec::with_capacity(256);
        let mut ser = serde_json::Serializer::new(&mut out);
        let written = (|| {
            let mut map = ser.serialize_map(None)?;
            let mut ext = self.extensions.iter().peekable();
            for (key, value) in standard {
                while let Some((k, v)) = ext.next_if(|(k, _)| k.as_str() < key) {
                    map.serialize_entry(k, v)?;
                }
                if ext.peek().is_some_and(|(k, _)| k.as_str() == key) {
                    continue;
                }
                map.serialize_entry(key, &value)?;
            }
            for (k, v) in ext {
                map.serialize_entry(k, v)?;
            }
            map.end()
        })();
        match written {
            Ok(()) => Bytes::from(out),
            Err(_) => Bytes::new(),
        }
    }
}

/// A standard member's value in [`Problem::to_body`].
enum Member<'a> {
    Str(&'a str),
    Status(u16),
}

impl serde::Serialize for Member<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Member::Str(v) => s.serialize_str(v),
            Member::Status(v) => s.serialize_u16(*v),
        }
    }
}
