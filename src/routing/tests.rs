use super::*;
use crate::config::AuthMode;
use crate::http::normalize_host;

fn route(host: HostMatch, prefix: &str, upstream: &str) -> RouteSettings {
    RouteSettings {
        id: upstream.into(),
        field: "routes[0]".into(),
        host,
        path_prefix: prefix.into(),
        upstream: upstream.into(),
        auth: AuthMode::None,
        cost: 1,
        cost_from: None,
        max_body_bytes: None,
        mode: crate::config::Mode::Enforce,
    }
}

fn find<'a>(r: &'a Router, host: &str, path: &str) -> Option<&'a RouteSettings> {
    r.find(host, path).unwrap().map(|i| r.route(i))
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
    assert_eq!(only.find("h", "/"), Ok(None));
}

#[test]
fn host_normalisation() {
    assert_eq!(normalize_host("API.Example.com:8080"), "api.example.com");
    assert_eq!(normalize_host("[::1]:80"), "[::1]");
    assert_eq!(normalize_host("example.com."), "example.com");
}

fn api_router() -> Router {
    Router::new(vec![
        route(HostMatch::Any, "/", "open"),
        route(HostMatch::Any, "/api", "api"),
        route(HostMatch::Any, "/api/v1", "v1"),
        route(HostMatch::Any, "/files/", "files"),
    ])
}

#[test]
fn a_semicolon_ends_a_segment_for_prefix_matching() {
    let r = api_router();
    for (path, want) in [
        ("/api;x/y", "api"),
        ("/api;x", "api"),
        ("/api;", "api"),
        ("/api;x/", "api"),
        ("/api/y;jsessionid=1", "api"),
        ("/api/v1;x", "v1"),
        ("/api/v1;x/orders;y=2", "v1"),
        ("/api/v1/orders;v=1", "v1"),
        ("/apix", "open"),
        ("/apix;y", "open"),
        ("/apix;y/v1", "open"),
        ("/ap;i", "open"),
        ("/;x", "open"),
        ("/files/a;b", "files"),
        ("/files;x", "open"),
    ] {
        assert_eq!(find(&r, "h", path).unwrap().upstream, want, "{path}");
    }
}

#[test]
fn parameters_that_change_the_route_are_refused() {
    let r = api_router();
    // Without parameters these are under /api/v1 (or /files/); as sent, under /api (or /).
    for path in [
        "/api;x/v1",
        "/api;x/v1/y",
        "/;x/api/v1",
        "/;x/api",
        "/files;x/a",
        "/api/;x/v1",
    ] {
        assert_eq!(r.find("h", path), Err(AmbiguousParameters), "{path}");
    }
    let only_v1 = Router::new(vec![route(HostMatch::Any, "/api/v1", "v1")]);
    assert_eq!(only_v1.find("h", "/api;x/v1"), Err(AmbiguousParameters));
    assert_eq!(only_v1.find("h", "/api/v1;x"), Ok(Some(0)));
    assert_eq!(only_v1.find("h", "/api;x"), Ok(None));
}

#[test]
fn paths_without_parameters() {
    for (path, bare) in [
        ("/api/y", "/api/y"),
        ("/api;x/y", "/api/y"),
        ("/api;x", "/api"),
        ("/api;x/", "/api/"),
        ("/;x/a", "/a"),
        ("/;x", "/"),
        ("/a;b;c/d;e", "/a/d"),
        ("/a;x?q=;", "/a?q=;"),
        ("/a?q=;", "/a?q=;"),
    ] {
        assert_eq!(without_parameters(path), bare, "{path}");
    }
}

/// The `route` key part names the route: its `name` when it has one, else the host and the
/// prefix, so the same prefix on two hosts is two buckets.
#[test]
fn route_key_values_name_the_route_or_its_host_and_prefix() {
    let unnamed = |host, prefix| {
        let mut r = route(host, prefix, "u");
        r.id = r.field.clone();
        r
    };
    let a = unnamed(HostMatch::Exact("a.test".into()), "/api");
    let b = unnamed(HostMatch::Exact("b.test".into()), "/api");
    let any = unnamed(HostMatch::Any, "/api");
    let wild = unnamed(HostMatch::Suffix(".example.com".into()), "/v1");
    assert_eq!(a.key_value(), "a.test/api");
    assert_eq!(b.key_value(), "b.test/api");
    assert_eq!(any.key_value(), "*/api");
    assert_eq!(wild.key_value(), "*.example.com/v1");
    let named = route(HostMatch::Exact("a.test".into()), "/api", "orders-api");
    assert_eq!(named.key_value(), "orders-api");
}
