use super::*;
use serde_json::Value;
use std::collections::BTreeSet;

const METHODS: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];

fn document() -> Value {
    serde_json::from_str(OPENAPI_JSON).expect("docs/openapi.json is JSON")
}

/// `(METHOD, path)` of every operation of the document.
fn documented() -> BTreeSet<(String, String)> {
    let doc = document();
    let paths = doc["paths"].as_object().expect("paths");
    let mut out = BTreeSet::new();
    for (path, item) in paths {
        for method in item.as_object().expect("path item").keys() {
            if METHODS.contains(&method.to_ascii_uppercase().as_str()) {
                out.insert((method.to_ascii_uppercase(), path.clone()));
            }
        }
    }
    out
}

#[test]
fn the_document_lists_exactly_the_routes() {
    let doc = document();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1."));
    let routed: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p, _)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(routed, documented());
}

#[test]
fn every_operation_is_behind_the_token_and_documents_the_common_answers() {
    let doc = document();
    assert_eq!(doc["security"], serde_json::json!([{ "adminToken": [] }]));
    for (method, path) in documented() {
        let op = &doc["paths"][&path][method.to_ascii_lowercase()];
        assert!(
            op.get("security").is_none(),
            "{method} {path} overrides security"
        );
        let responses = op["responses"].as_object().expect("responses");
        for status in ["200", "401", "404", "413"] {
            assert!(
                responses.contains_key(status),
                "{method} {path}: no {status}"
            );
        }
    }
}

#[test]
fn routes_by_the_table() {
    for (method, template, endpoint) in ROUTES {
        let path = template.replace("{id}", "acme");
        let id = template.contains("{id}").then_some("acme");
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        assert_eq!(route(&m, &path), Routed::Found(*endpoint, id), "{path}");
        let allowed: Vec<&str> = ROUTES
            .iter()
            .filter(|(_, t, _)| t == template)
            .map(|(m, _, _)| *m)
            .collect();
        for other in METHODS.iter().filter(|o| !allowed.contains(o)) {
            let m = Method::from_bytes(other.as_bytes()).unwrap();
            assert_eq!(
                route(&m, &path),
                Routed::MethodNotAllowed(allowed.join(", ")),
                "{other} {path}"
            );
        }
    }
    assert_eq!(
        route(&Method::POST, "/v1/tenants//reset"),
        Routed::Found(Endpoint::TenantReset, Some(""))
    );
    for path in [
        "/v1",
        "/v1/",
        "/v1/config/",
        "/v1/tenants",
        "/v1/tenants/a/b",
        "/v1/tenants/a/reset/x",
        "/v1/openapi",
    ] {
        assert_eq!(route(&Method::GET, path), Routed::NotFound, "{path}");
    }
}

#[test]
fn tenant_segments() {
    assert_eq!(tenant_from_segment("acme").unwrap(), "acme");
    assert_eq!(tenant_from_segment("a%2Fb%20c").unwrap(), "a/b c");
    assert_eq!(tenant_from_segment("ip:10.0.0.1").unwrap(), "ip:10.0.0.1");
    for bad in ["", "%20acme", "a%0Ab", "%FF", "ip:nope"] {
        assert_eq!(tenant_from_segment(bad).unwrap_err().status, 400, "{bad}");
    }
}
