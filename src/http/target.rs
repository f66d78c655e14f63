//! Request-target normalisation: the one spelling of a path that routing, auth, cost, limits and
//! the backend all see (docs/DESIGN.md 4c "Request target").
//!
//! Pure: bytes in, a normalised target or a typed refusal out. Rules, applied to the path only
//! (the query string is kept byte for byte):
//!
//! 1. Form: origin-form (`/p?q`) or absolute-form (`http[s]://authority/p?q`, RFC 9112 3.2.2; the
//!    authority is returned for Host routing, an empty path becomes `/`). Anything else
//!    (`*`, authority-form, relative paths) is refused.
//! 2. Percent-escapes (RFC 3986 2.1): `%XY` needs two hex digits. An escaped unreserved character
//!    (`A-Z a-z 0-9 - . _ ~`, RFC 3986 2.3) is decoded; an escaped `/` or `\` is refused (it would
//!    change the segment structure for some backends but not for others), an escaped control
//!    character (`%00`-`%1F`, `%7F`) is refused; every other escape is kept with upper-case hex
//!    (RFC 3986 6.2.2.1). Nothing is decoded twice: `%252e` stays `%252e` (`%25` then `2e`).
//! 3. Raw bytes: `\` and control characters (incl. space and DEL) are refused; bytes outside the
//!    RFC 3986 `pchar` set (e.g. non-ASCII UTF-8, `{`, `|`) are percent-encoded.
//! 4. Segments (RFC 3986 5.2.4 "remove_dot_segments"): empty segments (`//`) and `.` are dropped,
//!    `..` removes the previous segment; `..` with nothing left to remove (climbing above `/`) is
//!    refused. A `.`/`..` segment carrying `;` parameters (`..;x`, which Tomcat-like backends treat
//!    as `..`) is refused. A trailing `/`, and the directory meaning of a final `.`/`..`
//!    (`/a/b/..` → `/a/`), are kept.
//!
//! The output is idempotent (`normalise(normalise(x)) == normalise(x)`) and never contains `//`,
//! `/./` or `/../`.

use std::fmt;

/// Why a request target was refused (400). `as_str` is the stable log / metric reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetError {
    /// Not origin-form or http(s) absolute-form (e.g. `*`, `host:443`, `a/b`).
    UnsupportedForm,
    /// `%` not followed by two hex digits.
    BadPercentEncoding,
    /// `%2F`: an encoded `/` inside a segment.
    EncodedSlash,
    /// `%5C`: an encoded `\`.
    EncodedBackslash,
    /// A raw `\` (Windows-style separator on some backends).
    Backslash,
    /// NUL, another control character, space or DEL, raw or percent-encoded.
    ControlCharacter,
    /// `..` with no segment left to remove.
    AboveRoot,
    /// A `.` or `..` segment with `;` parameters (`/..;/`).
    DotSegmentParameters,
    /// `;` parameters that change the route (found by the router, not here:
    /// [`crate::routing::AmbiguousParameters`]).
    AmbiguousParameters,
}

impl TargetError {
    /// Stable short reason (log field, problem detail prefix).
    pub fn as_str(self) -> &'static str {
        match self {
            TargetError::UnsupportedForm => "unsupported_form",
            TargetError::BadPercentEncoding => "bad_percent_encoding",
            TargetError::EncodedSlash => "encoded_slash",
            TargetError::EncodedBackslash => "encoded_backslash",
            TargetError::Backslash => "backslash",
            TargetError::ControlCharacter => "control_character",
            TargetError::AboveRoot => "above_root",
            TargetError::DotSegmentParameters => "dot_segment_parameters",
            TargetError::AmbiguousParameters => "ambiguous_parameters",
        }
    }

    /// A sentence for the problem+json `detail`.
    pub fn detail(self) -> &'static str {
        match self {
            TargetError::UnsupportedForm => {
                "the request target must be an absolute path (/...) or an http(s) URL"
            }
            TargetError::BadPercentEncoding => "a % in the path is not followed by two hex digits",
            TargetError::EncodedSlash => "the path contains an encoded slash (%2F)",
            TargetError::EncodedBackslash => "the path contains an encoded backslash (%5C)",
            TargetError::Backslash => "the path contains a backslash",
            TargetError::ControlCharacter => {
                "the path contains a control character (raw or percent-encoded, e.g. %00)"
            }
            TargetError::AboveRoot => "the path climbs above / with ..",
            TargetError::DotSegmentParameters => "the path has a . or .. segment with ; parameters",
            TargetError::AmbiguousParameters => {
                "the path's ; parameters change which route it takes (with and without them it is under different routes)"
            }
        }
    }
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.detail())
    }
}

/// A normalised request target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The normalised path, starting with `/`, ASCII only.
    pub path: String,
    /// The query after `?`, exactly as received (`None` when there was no `?`).
    pub query: Option<Vec<u8>>,
    /// The authority of an absolute-form target (`host[:port]`), as received.
    pub authority: Option<String>,
}

impl Target {
    /// True when `raw` already is [`Self::origin_form`] (compared without building it).
    pub fn is_origin_form(&self, raw: &[u8]) -> bool {
        let Some(rest) = raw.strip_prefix(self.path.as_bytes()) else {
            return false;
        };
        match &self.query {
            None => rest.is_empty(),
            Some(q) => rest.first() == Some(&b'?') && &rest[1..] == q.as_slice(),
        }
    }

    /// Origin-form bytes for the backend: `path` plus `?query` when there was one.
    pub fn origin_form(&self) -> Vec<u8> {
        let mut out = self.path.clone().into_bytes();
        if let Some(q) = &self.query {
            out.push(b'?');
            out.extend_from_slice(q);
        }
        out
    }
}

/// Normalises a raw request target (the bytes of the request line). See the module docs.
pub fn normalise_target(raw: &[u8]) -> Result<Target, TargetError> {
    let (authority, rest) = split_form(raw)?;
    let (path, query) = match rest.iter().position(|&b| b == b'?') {
        Some(i) => (&rest[..i], Some(rest[i + 1..].to_vec())),
        None => (rest, None),
    };
    let path = if path.is_empty() { b"/" as &[u8] } else { path };
    Ok(Target {
        path: normalise_path(path)?,
        query,
        authority,
    })
}

/// `path` (an origin-form path, without its query) as text when [`normalise_target`] leaves it
/// exactly as it is, found in one pass and without building a [`Target`]: `/` then non-empty
/// segments of raw `pchar` bytes, none starting with `.`. `None` for every other path, which
/// the full rules decide (it may still be normal: `/.well-known`, `/%41`).
pub fn plain_path(path: &[u8]) -> Option<&str> {
    if path.first() != Some(&b'/') {
        return None;
    }
    let mut previous = b'/';
    for &b in &path[1..] {
        let starts_segment = previous == b'/';
        match b {
            b'/' | b'.' if starts_segment => return None,
            b'/' => {}
            b if is_pchar(b) => {}
            _ => return None,
        }
        previous = b;
    }
    // Only ASCII passed.
    std::str::from_utf8(path).ok()
}

/// Splits off an absolute-form `scheme://authority`; returns `(authority, path-and-query)`.
fn split_form(raw: &[u8]) -> Result<(Option<String>, &[u8]), TargetError> {
    if raw.first() == Some(&b'/') {
        return Ok((None, raw));
    }
    let lower: Vec<u8> = raw.iter().take(8).map(u8::to_ascii_lowercase).collect();
    let scheme_len = if lower.starts_with(b"http://") {
        7
    } else if lower.starts_with(b"https://") {
        8
    } else {
        return Err(TargetError::UnsupportedForm);
    };
    let rest = &raw[scheme_len..];
    let end = rest
        .iter()
        .position(|&b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.is_empty() || !authority.iter().all(|b| b.is_ascii_graphic()) {
        return Err(TargetError::UnsupportedForm);
    }
    let authority = String::from_utf8_lossy(authority).into_owned();
    Ok((Some(authority), &rest[end..]))
}

/// `unreserved` of RFC 3986 2.3.
pub(super) const fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// `sub-delims` of RFC 3986 2.2.
pub(super) const fn is_sub_delim(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

/// `pchar` of RFC 3986 3.3 minus `%` (handled as escapes): unreserved, sub-delims, `:`, `@`.
fn is_pchar(b: u8) -> bool {
    is_unreserved(b) || is_sub_delim(b) || matches!(b, b':' | b'@')
}

fn hex_value(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn push_escaped(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(HEX[(b >> 4) as usize] as char);
    out.push(HEX[(b & 15) as usize] as char);
}

/// Canonical spelling of one segment (escapes decoded or upper-cased), or a refusal.
fn canonical_segment(seg: &[u8]) -> Result<String, TargetError> {
    let mut out = String::with_capacity(seg.len());
    let mut i = 0;
    while i < seg.len() {
        let b = seg[i];
        if b == b'%' {
            let hi = seg.get(i + 1).copied().and_then(hex_value);
            let lo = seg.get(i + 2).copied().and_then(hex_value);
            let (Some(hi), Some(lo)) = (hi, lo) else {
                return Err(TargetError::BadPercentEncoding);
            };
            let decoded = hi << 4 | lo;
            match decoded {
                b'/' => return Err(TargetError::EncodedSlash),
                b'\\' => return Err(TargetError::EncodedBackslash),
                0..=0x1F | 0x7F => return Err(TargetError::ControlCharacter),
                d if is_unreserved(d) => out.push(d as char),
                d => push_escaped(&mut out, d),
            }
            i += 3;
            continue;
        }
        match b {
            b'\\' => return Err(TargetError::Backslash),
            0..=0x20 | 0x7F => return Err(TargetError::ControlCharacter),
            b if is_pchar(b) => out.push(b as char),
            b => push_escaped(&mut out, b),
        }
        i += 1;
    }
    Ok(out)
}

/// RFC 3986 5.2.4 over canonical segments, with `//` collapsed and climbing above `/` refused.
fn normalise_path(path: &[u8]) -> Result<String, TargetError> {
    let mut stack: Vec<String> = Vec::new();
    // A final empty, `.` or `..` segment leaves the output ending in `/` (a "directory").
    let mut trailing_slash = false;
    for raw in path.split(|&b| b == b'/').skip(1) {
        let seg = canonical_segment(raw)?;
        let bare = seg.split(';').next().unwrap_or("");
        if bare != seg && (bare == "." || bare == "..") {
            return Err(TargetError::DotSegmentParameters);
        }
        trailing_slash = matches!(seg.as_str(), "" | "." | "..");
        match seg.as_str() {
            "" | "." => {}
            ".." => {
                if stack.pop().is_none() {
                    return Err(TargetError::AboveRoot);
                }
            }
            _ => stack.push(seg),
        }
    }
    let mut out = String::with_capacity(path.len());
    for seg in &stack {
        out.push('/');
        out.push_str(seg);
    }
    if out.is_empty() || trailing_slash {
        out.push('/');
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
