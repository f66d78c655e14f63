//! Micro-benchmarks of the pure functions on the request path, through the library API.
//!
//! ```text
//! cargo bench --bench hot_paths                       # everything
//! cargo bench --bench hot_paths -- jwt                # one group (criterion filter)
//! cargo bench --bench hot_paths -- --quick            # short, less precise
//! ```
//!
//! Config-shaped inputs (identity, routes) are built with `tollgate::config::parse` from YAML, like
//! the gateway does, so these benches follow the config contract rather than struct internals.
//! Test keys come from `tests/fixtures/keys/` (test-only keys, see the README there).

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use http::{HeaderMap, HeaderValue};
use ipnet::IpNet;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use std::net::IpAddr;
use tollgate::config::Config;
use tollgate::http::client_ip::client_ip;
use tollgate::identity::{hash_key, Authenticator};
use tollgate::limit::algorithm::{self, Algorithm as LimitAlgorithm};
use tollgate::limit::token_bucket::{decide, TokenBucketState};
use tollgate::limit::Rate;
use tollgate::routing::Router;

/// A fixed unix time for token validation (2023-11-14T22:13:20Z).
const NOW: u64 = 1_700_000_000;
const API_KEY: &str = "bench-api-key-0042";

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/keys/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn read_fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn parse(yaml: &str) -> Config {
    tollgate::config::parse(yaml).unwrap_or_else(|e| {
        panic!(
            "bench config rejected:\n{}",
            e.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

/// Identity config: one JWT key per algorithm family, and `n_keys` API keys (one is `API_KEY`).
fn identity_config(n_keys: usize) -> Config {
    let mut keys = String::new();
    for i in 0..n_keys {
        let key = if i == n_keys / 2 {
            API_KEY.to_string()
        } else {
            format!("other-key-{i}")
        };
        keys.push_str(&format!(
            "      - {{ sha256: \"{}\", tenant: \"t{i}\", tier: free }}\n",
            hash_key(&key)
        ));
    }
    parse(&format!(
        r#"
listen: ["127.0.0.1:8080"]
identity:
  jwt:
    leeway_s: 30
    tenant_claim: tenant
    tier_claim: tier
    keys:
      - {{ kid: hs, algorithm: HS256, secret_file: "{hs}" }}
      - {{ kid: rs, algorithm: RS256, public_key_file: "{rs}" }}
      - {{ kid: ps, algorithm: PS256, public_key_file: "{rs}" }}
      - {{ kid: es, algorithm: ES256, public_key_file: "{es}" }}
      - {{ kid: ed, algorithm: EdDSA, public_key_file: "{ed}" }}
  api_keys:
    header: X-API-Key
    keys:
{keys}
  default_tier: free
redis: {{ url: "redis://127.0.0.1:6379/0" }}
tiers:
  free: {{ limit: 60, per: 1m, burst: 10 }}
  pro: {{ limit: 1000, per: 1m, burst: 100 }}
upstreams:
  u: {{ backends: ["127.0.0.1:9001"] }}
routes:
  - {{ path_prefix: "/", upstream: u }}
"#,
        hs = fixture("hs.secret"),
        rs = fixture("rsa2048.pub.pem"),
        es = fixture("ec-p256.pub.pem"),
        ed = fixture("ed25519.pub.pem"),
    ))
}

fn authenticator(cfg: &Config) -> Authenticator {
    Authenticator::build(&cfg.identity, &cfg.tiers, &cfg.tenants)
        .unwrap_or_else(|e| panic!("authenticator: {e:?}"))
}

/// A signed token for `alg` with the fixture private key of its family.
fn token(alg: Algorithm, kid: &str) -> String {
    let key = match alg {
        Algorithm::HS256 => {
            let secret = String::from_utf8(read_fixture("hs.secret")).unwrap();
            EncodingKey::from_secret(secret.trim_end_matches('\n').as_bytes()).expect("secret")
        }
        Algorithm::RS256 | Algorithm::PS256 => {
            EncodingKey::from_rsa_pem(&read_fixture("rsa2048.key.pem")).unwrap()
        }
        Algorithm::ES256 => EncodingKey::from_ec_pem(&read_fixture("ec-p256.key.pem")).unwrap(),
        Algorithm::EdDSA => EncodingKey::from_ed_pem(&read_fixture("ed25519.key.pem")).unwrap(),
        other => panic!("no fixture for {other:?}"),
    };
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_string());
    let claims = serde_json::json!({
        "sub": "user-1", "tenant": "acme", "tier": "pro",
        "iat": NOW - 10, "exp": NOW + 3600,
        "iss": "https://idp.example.com", "aud": "api.example.com",
    });
    jsonwebtoken::encode(&header, &claims, &key).expect("sign")
}

fn bench_token_bucket(c: &mut Criterion) {
    let mut g = c.benchmark_group("token_bucket::decide");
    let rate = Rate::new(1000, 60_000, 100);
    let half = TokenBucketState {
        level: 50 * 60_000,
        scale: 60_000,
        last_ms: 1_000_000,
    };
    let empty = TokenBucketState {
        level: 0,
        scale: 60_000,
        last_ms: 1_000_000,
    };
    let rescaled = TokenBucketState {
        level: 50 * 1_000,
        scale: 1_000,
        last_ms: 1_000_000,
    };
    g.bench_function("missing_state", |b| {
        b.iter(|| {
            decide(
                black_box(None),
                black_box(1_000_000),
                black_box(&rate),
                black_box(1),
            )
        })
    });
    g.bench_function("admitted_with_refill", |b| {
        b.iter(|| {
            decide(
                black_box(Some(half)),
                black_box(1_000_250),
                black_box(&rate),
                black_box(1),
            )
        })
    });
    g.bench_function("rejected", |b| {
        b.iter(|| {
            decide(
                black_box(Some(empty)),
                black_box(1_000_001),
                black_box(&rate),
                black_box(1),
            )
        })
    });
    g.bench_function("rescaled_after_reload", |b| {
        b.iter(|| {
            decide(
                black_box(Some(rescaled)),
                black_box(1_000_250),
                black_box(&rate),
                black_box(1),
            )
        })
    });
    g.finish();
}

/// Every algorithm's reference (through `limit::algorithm::decide`, as the in-memory limiters
/// call it): a steady admitted stream and a refused request on an exhausted state.
fn bench_algorithms(c: &mut Criterion) {
    let mut g = c.benchmark_group("limit::algorithm");
    let rate = Rate::new(1000, 60_000, 100);
    for alg in LimitAlgorithm::ALL {
        // Half-used state: 50 requests spread over the last few seconds.
        let mut warm = None;
        for i in 0..50 {
            algorithm::decide(alg, &mut warm, 1_000_000 + i * 60, &rate, 1, 1_000);
        }
        g.bench_function(BenchmarkId::new(alg.as_str(), "admitted"), |b| {
            b.iter_batched(
                || warm.clone(),
                |mut s| algorithm::decide(alg, &mut s, black_box(1_003_100), &rate, 1, 1_000),
                criterion::BatchSize::SmallInput,
            )
        });
        let mut full = warm.clone();
        while algorithm::decide(alg, &mut full, 1_003_100, &rate, 1, 0)
            .decision
            .admitted
        {}
        g.bench_function(BenchmarkId::new(alg.as_str(), "refused"), |b| {
            b.iter_batched(
                || full.clone(),
                |mut s| algorithm::decide(alg, &mut s, black_box(1_003_101), &rate, 1, 0),
                criterion::BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

fn bench_client_ip(c: &mut Criterion) {
    let mut g = c.benchmark_group("edge::client_ip");
    let trusted: Vec<IpNet> = ["10.0.0.0/8", "127.0.0.1/32", "2001:db8:ffff::/48"]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let proxy: IpAddr = "10.1.2.3".parse().unwrap();
    let stranger: IpAddr = "203.0.113.9".parse().unwrap();
    let cases: [(&str, IpAddr, &[&str]); 5] = [
        ("untrusted_peer", stranger, &["198.51.100.7"]),
        ("one_hop", proxy, &["198.51.100.7"]),
        (
            "three_hops",
            proxy,
            &["6.6.6.6, 198.51.100.7, 10.0.0.9, 10.0.0.8"],
        ),
        (
            "two_headers_ports",
            proxy,
            &["198.51.100.7:4711", "10.0.0.9:80"],
        ),
        ("ipv6_bracketed", proxy, &["[2001:db8:1::7]:443, 10.0.0.9"]),
    ];
    for (name, peer, xff) in cases {
        g.bench_with_input(BenchmarkId::from_parameter(name), &xff, |b, xff| {
            b.iter(|| {
                client_ip(
                    black_box(peer),
                    black_box(xff.iter().copied()),
                    black_box(&trusted),
                )
            })
        });
    }
    g.finish();
}

fn bench_jwt(c: &mut Criterion) {
    let cfg = identity_config(16);
    let auth = authenticator(&cfg);
    let mut g = c.benchmark_group("identity::jwt");
    for (alg, kid) in [
        (Algorithm::HS256, "hs"),
        (Algorithm::RS256, "rs"),
        (Algorithm::PS256, "ps"),
        (Algorithm::ES256, "es"),
        (Algorithm::EdDSA, "ed"),
    ] {
        let mut headers = HeaderMap::new();
        let value = format!("Bearer {}", token(alg, kid));
        headers.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_str(&value).unwrap(),
        );
        let id = auth
            .authenticate(&headers, NOW)
            .expect("token verifies")
            .expect("identity");
        assert_eq!(id.tenant, "acme");
        g.bench_with_input(
            BenchmarkId::from_parameter(format!("{alg:?}")),
            &headers,
            |b, h| b.iter(|| auth.authenticate(black_box(h), black_box(NOW))),
        );
    }
    g.finish();
}

fn bench_api_key(c: &mut Criterion) {
    let mut g = c.benchmark_group("identity::api_key");
    for n in [1usize, 1000] {
        let cfg = identity_config(n);
        let auth = authenticator(&cfg);
        let mut hit = HeaderMap::new();
        hit.insert("x-api-key", HeaderValue::from_static(API_KEY));
        hit.insert("user-agent", HeaderValue::from_static("wrk"));
        hit.insert("accept", HeaderValue::from_static("*/*"));
        let id = auth
            .authenticate(&hit, NOW)
            .expect("known key")
            .expect("identity");
        assert_eq!(id.tier.as_deref(), Some("free"));
        g.bench_with_input(BenchmarkId::new("hit", n), &hit, |b, h| {
            b.iter(|| auth.authenticate(black_box(h), black_box(NOW)))
        });
        let mut miss = HeaderMap::new();
        miss.insert(
            "x-api-key",
            HeaderValue::from_static("not-a-configured-key"),
        );
        g.bench_with_input(BenchmarkId::new("miss", n), &miss, |b, h| {
            b.iter(|| auth.authenticate(black_box(h), black_box(NOW)))
        });
    }
    g.finish();
}

fn bench_router(c: &mut Criterion) {
    let mut routes = String::new();
    for i in 0..20 {
        routes.push_str(&format!(
            "  - {{ host: \"svc{i}.example.com\", path_prefix: \"/v1/things{i}\", upstream: u }}\n"
        ));
    }
    let cfg = parse(&format!(
        r#"
listen: ["127.0.0.1:8080"]
upstreams:
  u: {{ backends: ["127.0.0.1:9001"] }}
routes:
  - {{ path_prefix: "/", upstream: u }}
  - {{ path_prefix: "/api", upstream: u }}
  - {{ host: "*.example.com", path_prefix: "/", upstream: u }}
  - {{ host: "*.eu.example.com", path_prefix: "/orders", upstream: u }}
  - {{ host: "api.example.com", path_prefix: "/orders", upstream: u }}
  - {{ host: "api.example.com", path_prefix: "/orders/export/", upstream: u }}
{routes}"#
    ));
    let router = Router::new(cfg.routes.clone());
    let mut g = c.benchmark_group("upstream::Router::find");
    g.bench_function(
        BenchmarkId::from_parameter(format!("{}_routes/default", cfg.routes.len())),
        |b| b.iter(|| router.find(black_box("localhost"), black_box("/"))),
    );
    g.bench_function(
        BenchmarkId::from_parameter(format!(
            "{}_routes/exact_host_longest_prefix",
            cfg.routes.len()
        )),
        |b| {
            b.iter(|| {
                router.find(
                    black_box("api.example.com"),
                    black_box("/orders/export/2024"),
                )
            })
        },
    );
    g.bench_function(
        BenchmarkId::from_parameter(format!("{}_routes/wildcard_host", cfg.routes.len())),
        |b| b.iter(|| router.find(black_box("shop.eu.example.com"), black_box("/orders/7"))),
    );
    g.bench_function(
        BenchmarkId::from_parameter(format!("{}_routes/exact_host_among_many", cfg.routes.len())),
        |b| {
            b.iter(|| {
                router.find(
                    black_box("svc7.example.com"),
                    black_box("/v1/things7/items/1"),
                )
            })
        },
    );
    g.finish();
}

/// The per-request HTTP hardening work: the request-head check done before Pingora parses the
/// head, and the request-target normalisation done before routing.
fn bench_http_hardening(c: &mut Criterion) {
    let limits = tollgate::config::HttpLimits::default();
    let head = b"GET /v1/orders/42?expand=items HTTP/1.1\r\nHost: api.example.com\r\n\
        User-Agent: bench/1.0\r\nAccept: application/json\r\nX-API-Key: bench-api-key-0042\r\n\
        X-Request-Id: 3f1c7a52-0d4e-4f8e-9a63-1b2c3d4e5f60\r\n\r\n";
    let mut g = c.benchmark_group("http");
    g.bench_function("head::check_head/typical", |b| {
        b.iter(|| tollgate::proxy::head::check_head(black_box(head), &limits))
    });
    g.bench_function("target::normalise_target/plain", |b| {
        b.iter(|| {
            tollgate::http::target::normalise_target(black_box(b"/v1/orders/42?expand=items"))
        })
    });
    g.bench_function("target::normalise_target/dots_and_escapes", |b| {
        b.iter(|| {
            tollgate::http::target::normalise_target(black_box(
                b"/public/../v1//%6Frders/./42/%2e%2E/43?x=1",
            ))
        })
    });
    g.finish();
}

criterion_group!(
    hot_paths,
    bench_http_hardening,
    bench_token_bucket,
    bench_algorithms,
    bench_client_ip,
    bench_jwt,
    bench_api_key,
    bench_router
);
criterion_main!(hot_paths);
