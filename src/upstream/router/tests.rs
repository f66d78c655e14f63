use super::*;
use crate::config::AuthMode;

fn route(host: HostMatch, prefix: &str, upstream: &str) -> RouteSettings {
    RouteSettings {
        id: upstream.into(),
        host,
        path_prefix: prefix.into(),
        upstream: upstream.into(),
        auth: AuthMode::None,
        cost: 1,
        max_body_bytes: None,
        mode: crate::config::Mode::Enforce,
    }
}

fn find<'a>(r: &'a Router, host: &str, path: &str) -> Option<&'a RouteSettings> {
    r.find(host, path).map(|i| r.route(i))
}

fn router() -> Router {
    Router::new(vec![
        route(HostMatch::Any, "/", "default"),
        route(HostMatch::Any, "/orders", "orders"),
        route(HostMatch::Exact("api.example.com".into()), "/", "api"),
        route(HostMatch::Suffix(".example.com".into()), "/", "wild"),
        route(HostMatch::Suffix(".eu.example.com".into()), "/", "eu"),
    ])
}

#[test]
fn exact_beats_wildcard_beats_default() {
    let r = router();
    assert_eq!(find(&r, "api.example.com", "/x").unwrap().upstream, "api");
    assert_eq!(find(&r, "shop.example.com", "/x").unwrap().upstream, "wild");
    assert_eq!(find(&r, "a.eu.example.com", "/x").unwrap().upstream, "eu");
    assert_eq!(find(&r, "example.com", "/x").unwrap().upstream, "default");
}

#[test]
fn longest_prefix_on_segment_boundaries() {
    let r = router();
    assert_eq!(find(&r, "other", "/orders").unwrap().upstream, "orders");
    assert_eq!(find(&r, "other", "/orders/7").unwrap().upstream, "orders");
    assert_eq!(find(&r, "other", "/ordersx").unwrap().upstream, "default");
    let only = Router::new(vec![route(HostMatch::Any, "/orders", "o")]);
    assert!(only.find("h", "/").is_none());
}

#[test]
fn host_normalisation() {
    assert_eq!(normalize_host("API.Example.com:8080"), "api.example.com");
    assert_eq!(normalize_host("[::1]:80"), "[::1]");
    assert_eq!(normalize_host("example.com."), "example.com");
}
