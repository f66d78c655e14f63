//! The request method as every stage sees it: one spelling per method, and HEAD read as GET
//! where a limit is concerned (docs/http-hardening.md#request-method).
//!
//! Methods are case-sensitive tokens (RFC 9110 9.1), but many backends (Werkzeug/Flask, Django,
//! Rails) upper-case the method before routing, so `post` runs the backend's POST view while a
//! limit rule written for `POST` would not see it. A method with a lower-case ASCII letter is
//! therefore refused (400, as nginx does): every method a request can carry past this check is
//! one a rule can name (rule methods are upper-cased when the config is loaded).

/// Whether `method` has a lower-case ASCII letter (`post`, `Get`, `purge`): such a request is
/// refused before routing.
pub fn has_lower_case(method: &str) -> bool {
    method.bytes().any(|b| b.is_ascii_lowercase())
}

/// The method a limit sees for a request sent with `method`: `GET` for `HEAD` (RFC 9110 9.3.2:
/// the server runs the same view and only drops the body; most frameworks route HEAD to the
/// GET handler), else `method` itself.
pub fn as_limited(method: &str) -> &str {
    if method == "HEAD" {
        "GET"
    } else {
        method
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_case_letters_are_found_in_any_position() {
        for m in ["post", "Post", "pOST", "GEt", "purge", "m-search"] {
            assert!(has_lower_case(m), "{m}");
        }
        for m in ["POST", "GET", "PROPFIND", "M-SEARCH", "X_1"] {
            assert!(!has_lower_case(m), "{m}");
        }
    }

    #[test]
    fn head_is_limited_as_get() {
        assert_eq!(as_limited("HEAD"), "GET");
        assert_eq!(as_limited("GET"), "GET");
        assert_eq!(as_limited("POST"), "POST");
    }
}
