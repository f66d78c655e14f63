//! The operator console at `/ui` (docs/admin-api.md#console): one HTML page, one script and
//! one style sheet, compiled into the binary, that call the `/v1` API with the admin token.
//!
//! The assets hold no data, so they are served without the token; every number on the page
//! comes from a `/v1` call the script makes with it (`Authorization: Bearer`, kept in the tab's
//! `sessionStorage`). Served only while the admin API is on (404 otherwise, like `/v1`), to
//! `GET` and `HEAD` (405 otherwise), with [`SECURITY_HEADERS`] on every answer under `/ui`.

use bytes::Bytes;
use http::Method;
use http_body_util::Full;
use hyper::Response;

/// The page (`/ui`, `/ui/`).
pub const INDEX_HTML: &str = include_str!("console/index.html");
/// The script (`/ui/console.js`): every page of the console.
pub const CONSOLE_JS: &str = include_str!("console/console.js");
/// The style sheet (`/ui/console.css`).
pub const CONSOLE_CSS: &str = include_str!("console/console.css");

/// The Content-Security-Policy of every `/ui` answer: only this origin's script, style, images
/// and `fetch` targets; no inline script or style, no plugin, no `<base>`, no framing.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// Headers on every answer under `/ui` (the page, its assets, their 404 and 405).
pub const SECURITY_HEADERS: &[(&str, &str)] = &[
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("Cache-Control", "no-cache"),
];

/// Whether `path` is the console's (`/ui` or under `/ui/`).
pub fn is_console(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}

/// The asset at `path` and its content type; `None`: no such asset.
pub fn asset(path: &str) -> Option<(&'static str, &'static str)> {
    match path {
        "/ui" | "/ui/" => Some(("text/html; charset=utf-8", INDEX_HTML)),
        "/ui/console.js" => Some(("text/javascript; charset=utf-8", CONSOLE_JS)),
        "/ui/console.css" => Some(("text/css; charset=utf-8", CONSOLE_CSS)),
        _ => None,
    }
}

fn with_headers(status: u16, content_type: &str, body: &'static str) -> http::response::Builder {
    let mut b = Response::builder()
        .status(status)
        .header("Content-Type", content_type)
        .header("Content-Length", body.len());
    for (k, v) in SECURITY_HEADERS {
        b = b.header(*k, *v);
    }
    b
}

/// Answers a request for the console path `path` ([`is_console`]); `api_on`: whether the admin
/// API is on (the token is configured).
pub fn answer(api_on: bool, method: &Method, path: &str) -> Response<Full<Bytes>> {
    let reply = |status: u16, content_type: &str, body: &'static str| {
        with_headers(status, content_type, body)
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .unwrap_or_default()
    };
    if !api_on {
        return reply(404, "text/plain", "not found\n");
    }
    let Some((content_type, body)) = asset(path) else {
        return reply(404, "text/plain", "not found\n");
    };
    if method != Method::GET && method != Method::HEAD {
        let mut r = reply(405, "text/plain", "the console accepts GET and HEAD only\n");
        r.headers_mut().insert(
            http::header::ALLOW,
            http::HeaderValue::from_static("GET, HEAD"),
        );
        return r;
    }
    reply(200, content_type, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header<'a>(r: &'a Response<Full<Bytes>>, name: &str) -> &'a str {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    #[test]
    fn every_answer_carries_the_security_headers() {
        for (on, method, path, status) in [
            (true, Method::GET, "/ui", 200),
            (true, Method::GET, "/ui/", 200),
            (true, Method::HEAD, "/ui/console.js", 200),
            (true, Method::GET, "/ui/console.css", 200),
            (true, Method::GET, "/ui/nothing", 404),
            (true, Method::POST, "/ui", 405),
            (false, Method::GET, "/ui", 404),
        ] {
            let r = answer(on, &method, path);
            assert_eq!(r.status(), status, "{method} {path}");
            assert_eq!(header(&r, "x-frame-options"), "DENY");
            assert_eq!(header(&r, "x-content-type-options"), "nosniff");
            assert_eq!(header(&r, "referrer-policy"), "no-referrer");
            let csp = header(&r, "content-security-policy");
            assert!(csp.starts_with("default-src 'self';"), "{csp}");
            assert!(!csp.contains("unsafe"), "{csp}");
            assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        }
        assert_eq!(
            header(&answer(true, &Method::PUT, "/ui/console.js"), "allow"),
            "GET, HEAD"
        );
    }

    #[test]
    fn only_the_console_paths_are_the_console() {
        assert!(is_console("/ui") && is_console("/ui/") && is_console("/ui/console.js"));
        assert!(!is_console("/uix") && !is_console("/v1/ui") && !is_console("/"));
        assert_eq!(
            asset("/ui/console.js").map(|a| a.0),
            Some("text/javascript; charset=utf-8")
        );
        assert_eq!(asset("/ui/../v1/config"), None);
    }

    /// The CSP forbids inline script and style: the page must have none, and the script must
    /// not write markup (`innerHTML`, `outerHTML`, `insertAdjacentHTML`, `document.write`): every
    /// value it shows goes in as text.
    #[test]
    fn the_assets_have_no_inline_code_and_the_script_writes_no_markup() {
        let html = INDEX_HTML.to_ascii_lowercase();
        assert!(
            !html.contains("<script>") && !html.contains("<style"),
            "inline code"
        );
        assert!(!html.contains(" style="), "inline style");
        let handler = html.split(" on").skip(1).any(|rest| {
            let name: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
            !name.is_empty() && rest[name.len()..].trim_start().starts_with('=')
        });
        assert!(!handler, "inline event handler");
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "no remote asset"
        );
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!CONSOLE_JS.contains(sink), "console.js uses {sink}");
        }
        assert!(!CONSOLE_JS.contains("http://") && !CONSOLE_JS.contains("https://"));
    }

    /// Every `/v1` path the script builds from a value (tenant id, key id, block type and value:
    /// a CIDR's `/`) percent-encodes it: each `+` joins a literal or an `encodeURIComponent(...)`.
    #[test]
    fn api_paths_percent_encode_every_value() {
        let built = lines_with("'/v1/");
        let built: Vec<&str> = built.into_iter().filter(|l| l.contains("' +")).collect();
        assert!(built.len() >= 10, "{built:?}");
        for line in built {
            let at = line.find("'/v1/").expect("a /v1 path");
            for part in line[at..].split(" + ").skip(1) {
                // `(cond ? '?q=' + ...`: a conditional's literal; then the value it joins.
                let part = part.trim_start_matches('(');
                let part = match part.split_once(" ? ") {
                    Some((cond, rest)) if cond.chars().all(|c| c.is_ascii_alphabetic()) => rest,
                    _ => part,
                };
                assert!(
                    part.starts_with("encodeURIComponent(") || part.starts_with('\''),
                    "a value not percent-encoded in {line}"
                );
            }
        }
    }

    /// The lines of the script that contain `needle`.
    fn lines_with(needle: &str) -> Vec<&'static str> {
        CONSOLE_JS.lines().filter(|l| l.contains(needle)).collect()
    }

    /// Values from the API or the address bar reach the page as text or attribute values only:
    /// a link's target is made by `link` or `keysHash` alone, from `#/` and percent-encoded
    /// parts (a tenant id or key name can never become a `javascript:` URL or another page's
    /// path); attributes are set by `el` alone; handlers are listeners (`onclick`, `onsubmit`),
    /// never `on*` attributes (inline code, which the CSP would block).
    #[test]
    fn values_reach_links_and_attributes_only_encoded() {
        for line in lines_with("href") {
            let l = line.trim();
            let allowed = l.starts_with("//")
                || l == "const href = '#/' + page + (arg !== undefined ? '/' + encodeURIComponent(arg) : '');"
                || l == "return el('a', { href }, label);"
                || l.contains("{ href: keysHash(");
            assert!(allowed, "a link built another way: {l}");
        }
        let keys_hash = CONSOLE_JS
            .split("function keysHash(")
            .nth(1)
            .and_then(|rest| rest.split("\n  }").next())
            .expect("keysHash");
        assert!(
            keys_hash.contains("'#/keys/' + encodeURIComponent(tenant)"),
            "{keys_hash}"
        );
        assert!(keys_hash.contains("new URLSearchParams()"), "{keys_hash}");
        let setters = lines_with("setAttribute(");
        assert_eq!(setters.len(), 2, "attributes set outside el: {setters:?}");
        assert!(setters
            .iter()
            .any(|l| l.contains("node.setAttribute(name,")));
        assert!(setters
            .iter()
            .any(|l| l.contains("a.setAttribute('class', 'current')")));
        // Every `on...:` member given to el is a listener el knows.
        for at in CONSOLE_JS.match_indices(" on").map(|(i, _)| i) {
            let before = CONSOLE_JS[..at].trim_end_matches(' ');
            if !(before.ends_with(',') || before.ends_with('{')) {
                continue;
            }
            let rest = &CONSOLE_JS[at + 3..];
            let name: String = rest.chars().take_while(char::is_ascii_lowercase).collect();
            if !name.is_empty() && rest[name.len()..].starts_with(": ") {
                assert!(
                    ["click", "submit"].contains(&name.as_str()),
                    "el(..., {{ on{name}: ... }})"
                );
            }
        }
        // A new secret goes in as the field's value (a property), shown by nothing else.
        assert_eq!(
            lines_with("secret")
                .iter()
                .filter(|l| l.contains(".value = "))
                .count(),
            1
        );
        assert!(lines_with("field.value = secret;").len() == 1);
    }
}
