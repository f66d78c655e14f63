use super::*;
use crate::pipeline::test_support::snapshot;

fn snap() -> Snapshot {
    snapshot(
        "routes:\n  - { path_prefix: \"/\", upstream: orders }\n  - { path_prefix: \"/orders\", upstream: orders, max_body_bytes: 10 }\n  - { host: \"api.example.com\", path_prefix: \"/v1\", upstream: orders }\n",
    )
}

fn request(path: &str, host: Option<&str>) -> RequestHeader {
    let mut req = RequestHeader::build("GET", path.as_bytes(), None).unwrap();
    if let Some(h) = host {
        req.insert_header("host", h).unwrap();
    }
    req
}

#[test]
fn longest_prefix_on_the_normalised_path() {
    let s = snap();
    let mut req = request("/a/../orders//1", None);
    assert_eq!(resolve(&s, &mut req).unwrap(), 1);
    assert_eq!(
        req.uri.path(),
        "/orders/1",
        "the backend gets the normalised target"
    );
    assert_eq!(resolve(&s, &mut request("/other", None)).unwrap(), 0);
    let mut v1 = request("/v1/x", Some("api.example.com"));
    assert_eq!(resolve(&s, &mut v1).unwrap(), 2);
}

#[test]
fn unsafe_target_is_400_and_no_route_is_404() {
    let s = snap();
    let r = resolve(&s, &mut request("/orders%2f1", None)).unwrap_err();
    assert_eq!(
        (r.layer, r.reason, r.problem.status),
        (Layer::Http, Outcome::BadTarget, 400)
    );
    assert_eq!(r.problem.extensions["reason"], json!("encoded_slash"));
    let only_v1 = snapshot("routes:\n  - { path_prefix: \"/v1\", upstream: orders }\n");
    let r = resolve(&only_v1, &mut request("/v2", None)).unwrap_err();
    assert_eq!(
        (r.layer, r.reason, r.problem.status),
        (Layer::Route, Outcome::NotFound, 404)
    );
}

#[test]
fn declared_body_over_the_route_limit_is_413() {
    let s = snap();
    let route = &s.config.routes[1];
    let mut req = request("/orders", None);
    assert!(check_body(route, &req).is_ok());
    req.insert_header("content-length", "11").unwrap();
    let r = check_body(route, &req).unwrap_err();
    assert_eq!((r.reason, r.problem.status), (Outcome::BodyTooLarge, 413));
    assert!(r.problem.detail.ends_with("limit of 10 bytes"));
    req.insert_header("content-length", "10").unwrap();
    assert!(check_body(route, &req).is_ok());
    assert!(check_body(&s.config.routes[0], &req).is_ok());
}

/// A method with a lower-case letter is refused (400 `method_case`) before routing; upper-case
/// methods, standard or not, pass.
#[test]
fn lower_case_methods_are_refused() {
    for m in ["post", "Post", "gEt", "head", "purge"] {
        let req = RequestHeader::build(m, b"/", None).unwrap();
        let r = check_method(&req).unwrap_err();
        assert_eq!(
            (r.layer, r.reason, r.problem.status),
            (Layer::Http, Outcome::Malformed, 400),
            "{m}"
        );
        assert_eq!(r.problem.extensions["reason"], "method_case");
    }
    for m in ["POST", "GET", "HEAD", "PURGE", "M-SEARCH"] {
        let req = RequestHeader::build(m, b"/", None).unwrap();
        assert!(check_method(&req).is_ok(), "{m}");
    }
}
