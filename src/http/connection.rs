//! The `Connection` request header: which header fields a client may nominate as hop-by-hop.
//!
//! Pingora 0.9 removes every field named in `Connection` from the upstream request (RFC 9110
//! 7.6.1) after the `request_filter` hook, so a client naming a field tollgate set
//! (`Connection: X-Tollgate-Tenant, X-Request-Id`) would make the backend lose it. And it refuses
//! some nominations (`Host`, `X-Forwarded-*`, pseudo-headers, malformed or too many tokens) with a
//! bare 400 at that point, after the stages charged the request. So:
//!
//! - [`nomination_problem`] mirrors Pingora's refusals on the request head, before any stage
//!   (called by `proxy::head::check_head`);
//! - [`without_owned`] drops the names of the fields tollgate sets from the token list before
//!   the request is forwarded, like nginx, which never lets a client's `Connection` remove the
//!   fields it sets itself.
//!
//! Pure: header values in, a verdict or a new value out.

/// Pingora refuses a request with this many `Connection` tokens or more.
const MAX_NOMINATIONS: usize = 10;

/// Fields Pingora refuses to see nominated (besides `:`-prefixed pseudo-header names).
const PROTECTED: [&str; 4] = [
    "host",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
];

/// The non-empty, trimmed tokens of `Connection` field values, in order.
fn tokens<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> impl Iterator<Item = &'a [u8]> {
    values
        .into_iter()
        .flat_map(|v| v.split(|&b| b == b','))
        .map(|t| t.trim_ascii())
        .filter(|t| !t.is_empty())
}

/// Whether `byte` may appear in an HTTP `token` (RFC 9110 5.6.2).
fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// Why Pingora would refuse these `Connection` field values, if it would: too many tokens, a
/// token that is not an HTTP token or names a pseudo-header, or a protected field (`Host`,
/// `X-Forwarded-For`, `X-Forwarded-Host`, `X-Forwarded-Proto`).
pub fn nomination_problem<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Option<&'static str> {
    for (i, token) in tokens(values).enumerate() {
        if i + 1 >= MAX_NOMINATIONS {
            return Some("too many Connection header tokens");
        }
        if token.starts_with(b":") || !token.iter().all(|&b| is_tchar(b)) {
            return Some("the Connection header nominates an invalid field name");
        }
        if PROTECTED
            .iter()
            .any(|p| token.eq_ignore_ascii_case(p.as_bytes()))
        {
            return Some("the Connection header nominates a protected field");
        }
    }
    None
}

/// The `Connection` value to forward when `values` nominate any of `owned` (lower-case field
/// names tollgate sets for the backend): the other tokens, in order, joined by `", "` (empty
/// when none remain, meaning no `Connection` field). `None` when nothing needs to change.
pub fn without_owned(values: &[&[u8]], owned: &[&str]) -> Option<String> {
    let is_owned = |t: &[u8]| owned.iter().any(|o| t.eq_ignore_ascii_case(o.as_bytes()));
    if !tokens(values.iter().copied()).any(is_owned) {
        return None;
    }
    let kept = tokens(values.iter().copied())
        .filter(|t| !is_owned(t))
        .map(|t| String::from_utf8_lossy(t))
        .collect::<Vec<_>>();
    Some(kept.join(", "))
}

#[cfg(test)]
mod tests;
