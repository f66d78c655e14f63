//! What a YAML or type error of `gateway.yaml` says: the field path, then the reason in plain
//! words (no Rust type names: "a whole number was expected", not `expected i64`), a hint at a
//! flow mapping left open above the error, and a duplicated key at the duplicate's own line.

use super::ConfigError;

/// The error `e` met while reading `text` into the raw config, in plain words.
pub(super) fn of(e: serde_yaml::Error, text: &str) -> ConfigError {
    // serde_yaml prefixes the field path ("routes[0]: unknown field ...") and appends the location.
    let full = e.to_string();
    let (path, reason) = match full.split_once(": ") {
        Some((path, reason)) if !path.is_empty() && !path.contains(' ') => (path, reason),
        _ => ("", full.as_str()),
    };
    let join = |field: &str| match path {
        "" => field.to_string(),
        p => format!("{p}.{field}"),
    };
    // A missing or unknown field is reported at its own path: `routes[0].upstream: is required`,
    // `edge.brust: unknown field ...`. A name may itself hold backticks: it ends where serde's
    // "`, expected" (or "`, there are") starts, or at the last backtick.
    if let Some((field, rest)) = reason
        .strip_prefix("missing field `")
        .and_then(|r| r.rsplit_once('`'))
        .filter(|(field, _)| !field.is_empty())
    {
        return ConfigError::new(join(field), format!("is required{rest}"));
    }
    if let Some((field, _)) = reason
        .strip_prefix("unknown field `")
        .and_then(|r| {
            let end = ["`, expected", "`, there are"]
                .iter()
                .find_map(|tail| r.find(tail))
                .or_else(|| r.rfind('`'))?;
            Some((&r[..end], &r[end..]))
        })
        .filter(|(field, _)| !field.is_empty())
    {
        return ConfigError::new(join(field), reason);
    }
    if let Some(key) = reason
        .strip_prefix("duplicate field `")
        .and_then(|r| r.split_once('`'))
        .map(|(key, _)| key)
    {
        return twice(&join(key), key, text, e.location());
    }
    match path {
        "" if reason.contains("expected struct RawConfig") => ConfigError::new(
            "",
            "invalid YAML: the document must be a mapping of sections (listen, upstreams, routes, ...)",
        ),
        "" => {
            let at = match e.location() {
                _ if full.contains(" line ") => String::new(),
                Some(l) => format!(" at line {} column {}", l.line(), l.column()),
                None => " (in the document as a whole)".to_string(),
            };
            ConfigError::new("", format!("invalid YAML: {}{at}", plain(&full)))
        }
        p => {
            let mut reason = plain(reason);
            if let Some(l) = e.location() {
                // Still open at the end of the error's line: its `}` is not on that line.
                if let Some(open) = open_flow_mapping(text, l.line(), usize::MAX) {
                    reason.push_str(&format!(
                        " (the flow mapping `{{` opened at line {open} is still open here: is its closing `}}` missing?)"
                    ));
                }
            }
            ConfigError::new(p, reason)
        }
    }
}

/// A key written twice in one mapping of `text`, at any depth (`tiers: { a: .., a: .. }` as
/// well as a field or a section), which serde would otherwise let the last one win for maps.
pub(super) fn duplicate_key(text: &str) -> Option<ConfigError> {
    let e = serde_yaml::from_str::<serde_yaml::Value>(text).err()?;
    let full = e.to_string();
    let (path, rest) = match full.split_once(": duplicate entry with key ") {
        Some((path, rest)) if !path.contains(' ') => (path, rest),
        _ => ("", full.strip_prefix("duplicate entry with key ")?),
    };
    let key = rest.strip_prefix('"')?.split_once('"')?.0;
    let field = match path {
        "" => key.to_string(),
        p => format!("{p}.{key}"),
    };
    Some(twice(&field, key, text, e.location()))
}

/// `field` (`key` in its mapping, which starts at `at`) is written twice.
fn twice(field: &str, key: &str, text: &str, at: Option<serde_yaml::Location>) -> ConfigError {
    let at = at.map_or((1, 1), |l| (l.line(), l.column()));
    let second =
        duplicate_line(text, key, at.0, at.1).map_or_else(String::new, |l| format!(" at line {l}"));
    ConfigError::new(
        field,
        format!("is written twice in one mapping: the second `{key}:` is{second}; YAML keys are unique, so merge the two"),
    )
}

/// `reason` without Rust type names: serde's "invalid type: X, expected Y" as "Y was expected,
/// found X", with Y and X in words, and an untagged enum's mismatch as the forms it accepts.
pub(super) fn plain(reason: &str) -> String {
    let (body, at) = match reason.rfind(" at line ") {
        Some(i) => reason.split_at(i),
        None => (reason, ""),
    };
    if let Some(name) = body.strip_prefix("data did not match any variant of untagged enum ") {
        return format!("{}{at}", accepted_forms(name.trim()));
    }
    let found_expected = ["invalid type: ", "invalid value: "]
        .iter()
        .find_map(|p| body.strip_prefix(p))
        .and_then(|r| r.rsplit_once(", expected "));
    match found_expected {
        Some((found, expected)) => {
            format!(
                "{} was expected, found {}{at}",
                expected_words(expected),
                found_words(found)
            )
        }
        None => reason.to_string(),
    }
}

/// What serde expected, in words.
fn expected_words(expected: &str) -> String {
    match expected {
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "a whole number".into(),
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a whole number (0 or more)".into(),
        "f32" | "f64" => "a number".into(),
        "a sequence" => "a list".into(),
        "a boolean" => "true or false".into(),
        "a map" => "a mapping".into(),
        e if e.starts_with("struct ") => "a mapping of fields".into(),
        e => e.to_string(),
    }
}

/// What serde found, in words.
fn found_words(found: &str) -> String {
    let quoted = |s: &str| s.trim_matches('`').to_string();
    if let Some(n) = found.strip_prefix("integer ") {
        let n = n.split(" as ").next().unwrap_or(n);
        return format!("the number {}", quoted(n));
    }
    if let Some(n) = found.strip_prefix("floating point ") {
        return format!("the number {}", quoted(n));
    }
    if let Some(b) = found.strip_prefix("boolean ") {
        return quoted(b);
    }
    match found {
        "map" => "a mapping".into(),
        "sequence" => "a list".into(),
        "unit value" => "nothing (null)".into(),
        f if f.starts_with("string ") => format!("the text {}", &f["string ".len()..]),
        f => f.to_string(),
    }
}

/// The forms an untagged raw enum accepts, by its name (`RawFleetSize`).
fn accepted_forms(name: &str) -> String {
    let forms = match name {
        "RawFleetSize" => "a whole number, or auto",
        "RawReserve" => "a whole number, or { from_json: <field>, default: <n> }",
        "RawHeaderModes" => {
            "one of ietf, legacy, both, none, or a list of those that may add openai"
        }
        "RawListen" => "\"ip:port\", or { addr, tls, h2 }",
        _ => "one of the forms this field accepts (see gateway.schema.json)",
    };
    format!("expected {forms}")
}

/// The line of the `{` still open at `line`:`column` (1-based; `usize::MAX`: the end of the
/// line) of `text`, if any: a flow mapping whose `}` is missing makes the next lines part of its
/// last value. Quoted text and comments are skipped.
pub(super) fn open_flow_mapping(text: &str, line: usize, column: usize) -> Option<usize> {
    let mut open: Vec<usize> = Vec::new();
    for (i, l) in text.lines().enumerate().take(line) {
        let end = if i + 1 == line {
            column.saturating_sub(1)
        } else {
            l.len()
        };
        let mut quote = None;
        let mut prev = ' ';
        for (j, c) in l.char_indices() {
            if j >= end {
                break;
            }
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '#') if prev.is_whitespace() => break,
                (None, '{') => open.push(i + 1),
                (None, '}') => {
                    open.pop();
                }
                _ => {}
            }
            prev = c;
        }
    }
    open.last().copied()
}

/// The line (1-based) of the second `key:` of the mapping starting at `line`:`column` of
/// `text`: a block mapping (keys at that column) or a flow mapping (`{` there).
pub(super) fn duplicate_line(text: &str, key: &str, line: usize, column: usize) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let first = lines.get(line.checked_sub(1)?)?;
    let starts_key = |s: &str| {
        let s = s.trim_start_matches(['"', '\'']);
        s.strip_prefix(key)
            .map(|r| r.trim_start_matches(['"', '\'']).trim_start())
            .is_some_and(|r| r.starts_with(':'))
    };
    let indent = column.saturating_sub(1);
    let mut seen = 0;
    if first.get(indent..).is_some_and(|s| s.starts_with('{')) {
        // Flow mapping: keys at depth 1, after `{` or `,`.
        let mut depth = 0;
        for (i, l) in lines.iter().enumerate().skip(line - 1) {
            let from = if i + 1 == line { indent } else { 0 };
            let l = &l[from.min(l.len())..];
            for (j, c) in l.char_indices() {
                match c {
                    '{' | '[' => depth += 1,
                    '}' | ']' => {
                        depth -= 1;
                        if depth == 0 {
                            return None;
                        }
                    }
                    _ => {}
                }
                if depth == 1 && matches!(c, '{' | ',') && starts_key(l[j + 1..].trim_start()) {
                    seen += 1;
                    if seen == 2 {
                        return Some(i + 1);
                    }
                }
            }
        }
        return None;
    }
    // Block mapping: keys at `indent`, until a line less indented.
    for (i, l) in lines.iter().enumerate().skip(line - 1) {
        let content = l.trim_start();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let at = l.len() - content.len();
        if at < indent {
            break;
        }
        if at == indent && starts_key(content) {
            seen += 1;
            if seen == 2 {
                return Some(i + 1);
            }
        }
    }
    None
}
