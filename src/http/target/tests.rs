use super::*;

fn path(raw: &str) -> Result<String, TargetError> {
    normalise_target(raw.as_bytes()).map(|t| t.path)
}

#[test]
fn dot_segments_and_slashes() {
    let cases = [
        ("/", "/"),
        ("/a/b", "/a/b"),
        ("/a/./b", "/a/b"),
        ("/./a", "/a"),
        ("/a/.", "/a/"),
        ("/a/b/..", "/a/"),
        ("/a/b/../c", "/a/c"),
        ("/public/../admin/users", "/admin/users"),
        ("//admin//users", "/admin/users"),
        ("/a//", "/a/"),
        ("/a/", "/a/"),
        ("/a/..", "/"),
        ("/a/../", "/"),
        ("///", "/"),
        ("/a/.b/..c/b.", "/a/.b/..c/b."),
        ("/a/.../b", "/a/.../b"),
    ];
    for (raw, want) in cases {
        assert_eq!(path(raw).as_deref(), Ok(want), "{raw}");
    }
}

#[test]
fn escapes_decoded_or_canonicalised() {
    let cases = [
        ("/%61dmin/users", "/admin/users"),
        ("/public/%2e%2e/admin", "/admin"),
        ("/public/%2E%2E/admin", "/admin"),
        ("/public/.%2e/admin", "/admin"),
        ("/a/%2e/b", "/a/b"),
        ("/%7euser/%41%5a%30-%5F", "/~user/AZ0-_"),
        ("/a%3bb", "/a%3Bb"),
        ("/a%20b", "/a%20b"),
        ("/%25", "/%25"),
        ("/%252e%252e/x", "/%252e%252e/x"),
        ("/caf%c3%a9", "/caf%C3%A9"),
        ("/a{b}|c", "/a%7Bb%7D%7Cc"),
        ("/ä", "/%C3%A4"),
        ("/a:b@c;d=e", "/a:b@c;d=e"),
    ];
    for (raw, want) in cases {
        assert_eq!(path(raw).as_deref(), Ok(want), "{raw}");
    }
}

#[test]
fn refusals_are_typed() {
    use TargetError::*;
    let cases = [
        ("/a%2Fb", EncodedSlash),
        ("/a%2fb", EncodedSlash),
        ("/a%5Cb", EncodedBackslash),
        ("/a%5cb", EncodedBackslash),
        ("/a\\b", Backslash),
        ("/a%00", ControlCharacter),
        ("/a%0d%0a", ControlCharacter),
        ("/a%7f", ControlCharacter),
        ("/a\x01b", ControlCharacter),
        ("/a b", ControlCharacter),
        ("/a%", BadPercentEncoding),
        ("/a%4", BadPercentEncoding),
        ("/a%zz", BadPercentEncoding),
        ("/a%%41", BadPercentEncoding),
        ("/..", AboveRoot),
        ("/../a", AboveRoot),
        ("/a/../../b", AboveRoot),
        ("/%2e%2e/a", AboveRoot),
        ("/a/..;/b", DotSegmentParameters),
        ("/a/.;x/b", DotSegmentParameters),
        ("*", UnsupportedForm),
        ("example.com:443", UnsupportedForm),
        ("a/b", UnsupportedForm),
        ("ftp://h/a", UnsupportedForm),
        ("http:///a", UnsupportedForm),
    ];
    for (raw, want) in cases {
        assert_eq!(path(raw), Err(want), "{raw}");
    }
}

#[test]
fn query_is_kept_byte_for_byte() {
    let t = normalise_target(b"/a/../b?x=/../%2F&y=..#").unwrap();
    assert_eq!(t.path, "/b");
    assert_eq!(t.query.as_deref(), Some(&b"x=/../%2F&y=..#"[..]));
    assert_eq!(t.origin_form(), b"/b?x=/../%2F&y=..#");
    let t = normalise_target(b"/a?").unwrap();
    assert_eq!(t.origin_form(), b"/a?");
    assert_eq!(normalise_target(b"/a").unwrap().query, None);
}

#[test]
fn is_origin_form_agrees_with_building_it() {
    let raws: [&[u8]; 9] = [
        b"/b",
        b"/b?",
        b"/b?x=1",
        b"/a/../b?x=1",
        b"/b/",
        b"//b",
        b"/a?",
        b"http://h/b?x=1",
        b"/b%41",
    ];
    for raw in raws {
        let t = normalise_target(raw).unwrap();
        let built = t.origin_form();
        assert!(t.is_origin_form(&built), "{raw:?}");
        assert_eq!(t.is_origin_form(raw), built == raw, "{raw:?}");
    }
    let t = normalise_target(b"/b?x").unwrap();
    assert!(!t.is_origin_form(b"/b?y") && !t.is_origin_form(b"/b") && !t.is_origin_form(b"/bb?x"));
}

#[test]
fn absolute_form_gives_path_and_authority() {
    let t = normalise_target(b"http://Example.com:8080/public/../admin?q=1").unwrap();
    assert_eq!(t.authority.as_deref(), Some("Example.com:8080"));
    assert_eq!(t.origin_form(), b"/admin?q=1");
    let t = normalise_target(b"HTTPS://h").unwrap();
    assert_eq!((t.path.as_str(), t.authority.as_deref()), ("/", Some("h")));
    let t = normalise_target(b"http://h?x").unwrap();
    assert_eq!(t.origin_form(), b"/?x");
    assert_eq!(
        normalise_target(b"http://h/..").unwrap_err(),
        TargetError::AboveRoot
    );
}

mod properties {
    use super::*;
    use crate::config::{AuthMode, HostMatch, RouteSettings};
    use crate::routing::Router;
    use proptest::prelude::*;

    /// Pieces that make interesting paths far more often than random bytes do.
    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("/".to_string()),
            Just(".".to_string()),
            Just("..".to_string()),
            Just("%2e".to_string()),
            Just("%2E".to_string()),
            Just("%2F".to_string()),
            Just("%5c".to_string()),
            Just("%00".to_string()),
            Just("%".to_string()),
            Just("%4".to_string()),
            Just("%61".to_string()),
            Just("%7B".to_string()),
            Just(";".to_string()),
            Just("?".to_string()),
            Just("\\".to_string()),
            Just("admin".to_string()),
            Just("a".to_string()),
            Just("é".to_string()),
            "[ -~]{1,3}",
        ]
    }

    fn path_like() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(piece(), 0..12).prop_map(|p| {
            let mut s = String::from("/");
            s.push_str(&p.concat());
            s.into_bytes()
        })
    }

    fn route(prefix: &str, i: usize) -> RouteSettings {
        RouteSettings {
            id: format!("routes[{i}]"),
            field: format!("routes[{i}]"),
            host: HostMatch::Any,
            path_prefix: prefix.to_string(),
            upstream: "u".into(),
            auth: AuthMode::None,
            cost: 1,
            cost_from: None,
            max_body_bytes: None,
            mode: crate::config::Mode::Enforce,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn never_panics_on_any_bytes(raw in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = normalise_target(&raw);
        }

        #[test]
        fn output_is_idempotent_and_has_no_dot_or_empty_segments(raw in path_like()) {
            if let Ok(t) = normalise_target(&raw) {
                let again = normalise_target(&t.origin_form()).expect("normal form is accepted");
                prop_assert_eq!(&again, &t);
                let p = &t.path;
                prop_assert!(p.starts_with('/'));
                for bad in ["/./", "/../", "//"] {
                    prop_assert!(!p.contains(bad), "{:?} in {:?}", bad, p);
                }
                prop_assert!(!p.ends_with("/.") && !p.ends_with("/.."), "{:?}", p);
                prop_assert!(p.bytes().all(|b| b.is_ascii_graphic()), "{:?}", p);
            }
        }

        #[test]
        fn accepted_path_routes_like_its_normal_form(
            raw in path_like(),
            prefixes in prop::collection::vec("/(admin|a|public|%61)?(/[a-z]{0,2})?", 1..5),
        ) {
            let mut seen = std::collections::BTreeSet::new();
            let routes: Vec<RouteSettings> = prefixes
                .iter()
                .filter(|p| seen.insert(p.to_string()))
                .enumerate()
                .map(|(i, p)| route(p, i))
                .collect();
            let router = Router::new(routes);
            if let Ok(t) = normalise_target(&raw) {
                let again = normalise_target(&t.origin_form()).unwrap();
                prop_assert_eq!(router.find("h", &t.path), router.find("h", &again.path));
            }
        }
    }
}

/// A plain path is one the rules leave exactly as it is; anything the rules change or refuse
/// (and some paths they keep) is not plain, and goes the full way.
#[test]
fn a_plain_path_is_its_own_normal_form() {
    let plain = [
        "/",
        "/a",
        "/a/",
        "/orders/1",
        "/a;x/b",
        "/;x",
        "/a.b/c..d",
        "/v1/x:y@z!$&'()*+,=~_-",
    ];
    for p in plain {
        assert_eq!(plain_path(p.as_bytes()), Some(p), "{p}");
        let t = normalise_target(p.as_bytes()).unwrap();
        assert_eq!((t.path.as_str(), t.query, t.authority), (p, None, None));
    }
    let not_plain: [&[u8]; 16] = [
        b"",
        b"a/b",
        b"//a",
        b"/a//b",
        b"/./a",
        b"/a/.",
        b"/a/..",
        b"/..;x/a",
        b"/.well-known/x",
        b"/%41",
        b"/a%2fb",
        b"/a b",
        b"/a\\b",
        b"/caf\xc3\xa9",
        b"/a{b}",
        b"/a#b",
    ];
    for p in not_plain {
        assert_eq!(plain_path(p), None, "{}", p.escape_ascii());
    }
}
