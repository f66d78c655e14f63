//! TLS termination, HTTP/2 to clients and HTTPS to backends, black-box against the real gateway,
//! real `tollgate-echo` backends (plain and HTTPS) and a real `redis-server`, with certificates
//! made at test time by a private CA (rcgen).
//!
//! Counts are exact: tiers and edge limits refill ~never (`limit: 1, per: 1h`), and waits are
//! for observable effects (a gauge, a metric, the certificate a fresh connection is shown).

mod common;
#[path = "common/tls.rs"]
mod tls_common;

use common::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tls_common::*;

/// A gateway config: the plain `{listen}` listener, one TLS listener on `tls_addr` with the
/// given `tls:` mapping body and `h2`, one upstream `echo` on `backend` and a catch-all route.
fn tls_config(tls_addr: &str, tls: &str, h2: bool, backend: &str) -> GatewayConfig {
    let tls_listener = format!("{{ addr: \"{tls_addr}\", tls: {{ {tls} }}, h2: {h2} }}");
    GatewayConfig::new()
        .listen(&["\"{listen}\"", &tls_listener])
        .upstream_with("echo", backend, "max_concurrency: 64")
        .route(CATCH_ALL)
}

/// The catch-all route of [`tls_config`].
const CATCH_ALL: &str = "{ path_prefix: \"/\", upstream: echo, auth: none }";

/// The catch-all route with `auth: required`.
const CATCH_ALL_AUTH: &str = "{ path_prefix: \"/\", upstream: echo, auth: required }";

async fn echo_header(resp: reqwest::Response, name: &str) -> Option<String> {
    let v = echo_json(resp).await;
    v["headers"][name].as_str().map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls12_and_tls13_handshakes_h2_by_alpn_and_forwarded_proto() {
    let ca = Ca::new("hs");
    let cert = ca.server("gw.test", &["gw.test"]);
    let backend = Backend::start("b");
    let tls_addr = free_addr();
    // The only route needs host gw.test: an h2 request (no Host header, only :authority) is
    // routed by its authority.
    let yaml = tls_config(&tls_addr, &cert.yaml_pair(), true, &backend.addr())
        .no_routes()
        .route("{ host: gw.test, path_prefix: \"/\", upstream: echo, auth: none }")
        .yaml();
    let gw = Gateway::start(&yaml);
    let url = https_url("gw.test", &tls_addr, "/x");

    for version in [
        reqwest::tls::Version::TLS_1_2,
        reqwest::tls::Version::TLS_1_3,
    ] {
        let client = https_client(&ca, "gw.test", &tls_addr, false)
            .min_tls_version(version)
            .max_tls_version(version)
            .build()
            .unwrap();
        let resp = client.get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{version:?}");
        assert_eq!(resp.version(), reqwest::Version::HTTP_11);
        assert_eq!(
            echo_header(resp, "x-forwarded-proto").await.as_deref(),
            Some("https"),
            "{version:?}"
        );
    }

    let h2 = https_client(&ca, "gw.test", &tls_addr, true)
        .build()
        .unwrap();
    let resp = h2.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.version(),
        reqwest::Version::HTTP_2,
        "ALPN must pick h2"
    );
    let v = echo_json(resp).await;
    assert_eq!(v["headers"]["x-forwarded-proto"], "https");
    assert_eq!(v["path"], "/x");

    // The plain listener is unchanged: HTTP/1.1, X-Forwarded-Proto http.
    let resp = client()
        .get(gw.url("/x"))
        .header("host", "gw.test")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        echo_header(resp, "x-forwarded-proto").await.as_deref(),
        Some("http")
    );
    // The admin readiness probe completes a handshake: no failed-handshake error at start.
    assert!(
        !gw.log().contains("handshake error"),
        "log:\n{}",
        gw.log_tail(20)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sni_selects_the_certificate_and_unknown_names_get_the_first() {
    let ca = Ca::new("sni");
    let a = ca.server("a-cert", &["a.test"]);
    let b = ca.server("b-cert", &["b.test"]);
    let w = ca.server("wild-cert", &["*.w.test"]);
    let backend = Backend::start("b");
    let tls_addr = free_addr();
    let tls = format!(
        "certs: [{{ {} }}, {{ {} }}, {{ {} }}]",
        a.yaml_pair(),
        b.yaml_pair(),
        w.yaml_pair()
    );
    let _gw = Gateway::start(&tls_config(&tls_addr, &tls, false, &backend.addr()).yaml());

    for (host, want) in [
        ("a.test", "a-cert"),
        ("b.test", "b-cert"),
        ("x.w.test", "wild-cert"),
        ("B.TEST", "b-cert"),
    ] {
        let c = https_client(&ca, host, &tls_addr, false).build().unwrap();
        let resp = c
            .get(https_url(host, &tls_addr, "/"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{host}: {e:?}"));
        assert_eq!(resp.status(), 200, "{host}");
        assert_eq!(peer_cn(&resp).as_deref(), Some(want), "{host}");
    }
    // A name no certificate carries (and a wildcard one level too deep) gets the first one.
    for host in ["other.test", "a.b.w.test"] {
        let c = https_client(&ca, host, &tls_addr, false)
            .danger_accept_invalid_certs(true)
            .build()
            .unwrap();
        let resp = c.get(https_url(host, &tls_addr, "/")).send().await.unwrap();
        assert_eq!(peer_cn(&resp).as_deref(), Some("a-cert"), "{host}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_and_wrong_host_certificates_are_refused_by_clients() {
    let ca = Ca::new("bad");
    let good = ca.server("good", &["good.test"]);
    let expired = ca.issue("expired", &["expired.test"], Usage::Server, -1);
    let backend = Backend::start("b");
    let tls_addr = free_addr();
    let tls = format!(
        "certs: [{{ {} }}, {{ {} }}]",
        good.yaml_pair(),
        expired.yaml_pair()
    );
    let gw = Gateway::start(&tls_config(&tls_addr, &tls, false, &backend.addr()).yaml());
    assert!(
        gw.wait_for_log("has expired", Duration::from_secs(5)),
        "loading an expired certificate is logged; log:\n{}",
        gw.log_tail(20)
    );

    let get = |host: &'static str| {
        let c = https_client(&ca, host, &tls_addr, false).build().unwrap();
        let url = https_url(host, &tls_addr, "/");
        async move { c.get(url).send().await }
    };
    assert_eq!(get("good.test").await.unwrap().status(), 200);
    let err = get("expired.test").await.expect_err("expired certificate");
    assert!(format!("{err:?}").contains("Expired"), "{err:?}");
    // No certificate names wrong.test: the default (good.test) is shown and refused.
    let err = get("wrong.test").await.expect_err("wrong-host certificate");
    assert!(format!("{err:?}").contains("NotValidForName"), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_reload_under_load_fails_no_request_and_bad_files_are_rejected() {
    let ca = Ca::new("reload");
    let v1 = ca.server("v1", &["gw.test"]);
    let v2 = ca.server("v2", &["gw.test"]);
    let backend = Backend::start("b");
    let tls_addr = free_addr();
    let yaml =
        |pair: &Issued| tls_config(&tls_addr, &pair.yaml_pair(), true, &backend.addr()).yaml();
    let gw = Gateway::start(&yaml(&v1));

    // Load: 4 workers, each request on a new connection (a new handshake), until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut workers = Vec::new();
    for _ in 0..4 {
        let client = https_client(&ca, "gw.test", &tls_addr, false)
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let url = https_url("gw.test", &tls_addr, "/load");
        let (stop, ok, failures) = (stop.clone(), ok.clone(), failures.clone());
        workers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match client.get(&url).send().await {
                    Ok(r) if r.status() == 200 => drop(ok.fetch_add(1, Ordering::Relaxed)),
                    Ok(r) => failures
                        .lock()
                        .unwrap()
                        .push(format!("status {}", r.status())),
                    Err(e) => failures.lock().unwrap().push(format!("{e:?}")),
                }
            }
        }));
    }
    let fresh_cn = || async {
        let c = https_client(&ca, "gw.test", &tls_addr, false)
            .build()
            .unwrap();
        let r = c
            .get(https_url("gw.test", &tls_addr, "/"))
            .send()
            .await
            .unwrap();
        peer_cn(&r)
    };
    assert!(eventually(Duration::from_secs(10), || ok.load(Ordering::Relaxed) >= 20).await);
    assert_eq!(fresh_cn().await.as_deref(), Some("v1"));

    // Renewed certificate: swapped in on SIGHUP, for new connections.
    gw.reload(&yaml(&v2));
    let reloaded = "tollgate_config_reloads_total{result=\"ok\"}";
    assert!(
        eventually(Duration::from_secs(10), || gw.metric_or_zero(reloaded)
            >= 2.0)
        .await
    );
    assert_eq!(fresh_cn().await.as_deref(), Some("v2"));
    let before = ok.load(Ordering::Relaxed);
    assert!(
        eventually(Duration::from_secs(10), || ok.load(Ordering::Relaxed)
            >= before + 20)
        .await
    );

    // A broken certificate file is rejected like any bad config; v2 stays.
    let broken = Issued {
        cert_file: ca.write_file("broken.crt", "-----BEGIN CERTIFICATE-----\nnot base64!\n"),
        ..v2.clone()
    };
    gw.reload(&yaml(&broken));
    let rejected = "tollgate_config_reloads_total{result=\"error\"}";
    assert!(
        eventually(Duration::from_secs(10), || gw.metric_or_zero(rejected)
            >= 1.0)
        .await
    );
    assert!(
        gw.wait_for_log("listen[1].tls.certs[0].cert_file", Duration::from_secs(5)),
        "the rejection names the field; log:\n{}",
        gw.log_tail(20)
    );
    assert_eq!(fresh_cn().await.as_deref(), Some("v2"));
    let before = ok.load(Ordering::Relaxed);
    assert!(
        eventually(Duration::from_secs(10), || ok.load(Ordering::Relaxed)
            >= before + 20)
        .await
    );

    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let failures = failures.lock().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {} requests failed: {:?}",
        failures.len(),
        failures.len() as u64 + ok.load(Ordering::Relaxed),
        &failures[..failures.len().min(5)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reads_and_parses_the_certificate_files() {
    let ca = Ca::new("check");
    let a = ca.server("a", &["a.test"]);
    let b = ca.server("b", &["b.test"]);
    let base = |tls: &str| {
        format!(
            "listen:\n  - {{ addr: \"{{listen}}\", tls: {{ {tls} }} }}\n\
             upstreams:\n  echo: {{ backends: [\"127.0.0.1:9\"] }}\n\
             routes:\n  - {{ path_prefix: \"/\", upstream: echo }}\n"
        )
    };
    let ok = check_config(&base(&a.yaml_pair()));
    assert_eq!(ok.code(), Some(0), "{}", ok.all());

    let cases = [
        (
            format!(
                "cert_file: \"/nonexistent/x.crt\", key_file: \"{}\"",
                a.key_file
            ),
            "listen[0].tls.certs[0].cert_file: cannot read \"/nonexistent/x.crt\"",
        ),
        (
            format!(
                "cert_file: \"{}\", key_file: \"{}\"",
                ca.write_file("garbage.crt", "hello"),
                a.key_file
            ),
            "listen[0].tls.certs[0].cert_file:",
        ),
        (
            format!(
                "cert_file: \"{}\", key_file: \"{}\"",
                a.cert_file, b.key_file
            ),
            "listen[0].tls.certs[0].key_file:",
        ),
        (
            format!("cert_file: \"{}\"", a.cert_file),
            "listen[0].tls.key_file: is required with cert_file",
        ),
        (
            format!("{}, client_ca_file: \"/nonexistent/ca.crt\"", a.yaml_pair()),
            "listen[0].tls.client_ca_file: cannot read",
        ),
    ];
    for (tls, want) in cases {
        let out = check_config(&base(&tls));
        assert_eq!(out.code(), Some(1), "{tls}: {}", out.all());
        assert!(
            out.all().contains(want),
            "{tls}: want {want:?} in:\n{}",
            out.all()
        );
    }
}

/// 100 streams on one connection against a tier of burst 10 (refill ~0): every stream is one
/// request for the tenant bucket, exactly as on HTTP/1.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_multiplexed_streams_are_each_charged_to_the_tenant() {
    let ca = Ca::new("mux");
    let cert = ca.server("gw.test", &["gw.test"]);
    let redis = RedisServer::start();
    let backend = Backend::start("b");
    let tls_addr = free_addr();
    let key = "key-acme-0123456789";
    let warm = "key-warm-0123456789";
    // Fail closed with a generous timeout: a Redis hiccup on this busy box shows as a 503
    // instead of a silent local-fallback admission.
    let yaml = tls_config(&tls_addr, &cert.yaml_pair(), true, &backend.addr())
        .redis(&redis.url(), "timeout_ms: 2000, on_failure: closed")
        .tier("t", "{ limit: 1, per: 1h, burst: 10 }")
        .api_key(key, "acme", "t")
        .api_key(warm, "warm", "t")
        .no_routes()
        .route(CATCH_ALL_AUTH)
        .yaml();
    let gw = Gateway::start(&yaml);

    let mut h2 = h2_tls(&ca, "gw.test", &tls_addr).await;
    // Another tenant's request first, so the Redis connection is up.
    let first = h2_get(&mut h2, "https", "gw.test", "/w", &[("x-api-key", warm)]);
    assert_eq!(h2_read(first).await.0, 200);
    assert_eq!(
        h2.current_max_send_streams(),
        100,
        "the gateway announces its bound on concurrent streams"
    );
    let pending: Vec<_> = (0..100)
        .map(|i| {
            h2_get(
                &mut h2,
                "https",
                "gw.test",
                &format!("/m{i}"),
                &[("x-api-key", key)],
            )
        })
        .collect();
    let mut counts = std::collections::BTreeMap::new();
    for p in pending {
        let (status, _) = h2_read(p).await;
        *counts.entry(status).or_insert(0) += 1;
    }
    assert_eq!(
        counts,
        [(200, 10), (429, 90)].into_iter().collect(),
        "log:\n{}",
        gw.log_tail(10)
    );
    assert_eq!(backend.stats().requests, 11);
}

/// h2c (prior knowledge) on a plain listener; streams cannot get around the per-IP edge limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_streams_each_pass_the_edge_limiter() {
    let backend = Backend::start("b");
    let yaml = format!(
        "listen:\n  - {{ addr: \"{{listen}}\", h2: true }}\n\
         admin: {{ listen: \"{{admin}}\" }}\n\
         edge: {{ limit: 1, per: 1h, burst: 5 }}\n\
         upstreams:\n  echo: {{ backends: [\"{}\"] }}\n\
         routes:\n  - {{ path_prefix: \"/\", upstream: echo, auth: none }}\n",
        backend.addr()
    );
    let gw = Gateway::start(&yaml);
    let mut h2 = h2c(gw.listen_addr()).await;
    let pending: Vec<_> = (0..30)
        .map(|_| h2_get(&mut h2, "http", gw.listen_addr(), "/e", &[]))
        .collect();
    let mut ok = 0;
    let mut limited = 0;
    for p in pending {
        match h2_read(p).await.0 {
            200 => ok += 1,
            429 => limited += 1,
            s => panic!("unexpected status {s}"),
        }
    }
    assert_eq!((ok, limited), (5, 25));
    assert_eq!(backend.stats().requests, 5);
}

/// A client that resets its h2 stream while the request holds the upstream's only slot gives
/// the slot back: the in-flight gauge returns to 0 and a fresh request is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_stream_reset_releases_the_upstream_slot() {
    let ca = Ca::new("rst");
    let cert = ca.server("gw.test", &["gw.test"]);
    let backend = Backend::start("b");
    let tls_addr = free_addr();
    let yaml = tls_config(&tls_addr, &cert.yaml_pair(), true, &backend.addr())
        .upstream_with("echo", &backend.addr(), "max_concurrency: 1")
        .yaml();
    let gw = Gateway::start(&yaml);
    let gauge = "tollgate_upstream_in_flight{upstream=\"echo\"}";

    let mut h2 = h2_tls(&ca, "gw.test", &tls_addr).await;
    let slow = h2_get(&mut h2, "https", "gw.test", "/slow?delay_ms=30000", &[]);
    assert!(
        eventually(Duration::from_secs(10), || gw.metric_or_zero(gauge) == 1.0).await,
        "the slow stream holds the slot"
    );
    // The only slot is taken: another stream on the same connection is refused.
    let busy = h2_get(&mut h2, "https", "gw.test", "/busy", &[]);
    assert_eq!(h2_read(busy).await.0, 503);

    drop(slow); // RST_STREAM(CANCEL)
    let mut last = -1.0;
    let released = eventually(Duration::from_secs(10), || {
        last = gw.metric_or_zero(gauge);
        last == 0.0
    })
    .await;
    assert!(
        released,
        "slot still held after the reset (gauge {last}); log:\n{}",
        gw.log_tail(20)
    );
    assert!(eventually(Duration::from_secs(10), || backend.stats().in_flight == 0).await);
    let fresh = h2_get(&mut h2, "https", "gw.test", "/fresh", &[]);
    assert_eq!(h2_read(fresh).await.0, 200);
}

/// HTTPS to a backend whose certificate a private CA issued: verified with `ca_file`, SNI from
/// the config, health checks over the same TLS; a wrong CA or name is a 502 naming the reason;
/// `verify: false` is explicit and logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_upstream_private_ca_wrong_ca_wrong_name_and_verify_off() {
    let backend_ca = Ca::new("backend");
    let other_ca = Ca::new("other");
    let bcert = backend_ca.server("backend.test", &["backend.test"]);
    let backend = Backend::start_with_args(
        "tls",
        &["--tls-cert", &bcert.cert_file, "--tls-key", &bcert.key_file],
    );
    let addr = backend.addr();
    let (good_ca, bad_ca) = (&backend_ca.cert_file, &other_ca.cert_file);
    let tls = |sni: &str, ca: &str| format!("tls: {{ sni: {sni}, ca_file: \"{ca}\" }}");
    let mut config = GatewayConfig::new()
        .upstream_with(
            "good",
            &addr,
            &format!(
                "{}, health_check: {{ path: /healthz, interval: 1s }}",
                tls("backend.test", good_ca)
            ),
        )
        .upstream_with("wrongca", &addr, &tls("backend.test", bad_ca))
        .upstream_with("wrongname", &addr, &tls("elsewhere.test", good_ca))
        .upstream_with(
            "noverify",
            &addr,
            &format!("tls: {{ sni: backend.test, ca_file: \"{bad_ca}\", verify: false }}"),
        )
        .upstream("plain", &addr);
    for name in ["good", "wrongca", "wrongname", "noverify", "plain"] {
        config = config.route(&format!(
            "{{ path_prefix: /{name}, upstream: {name}, auth: none }}"
        ));
    }
    let yaml = config.yaml();
    let gw = Gateway::start(&yaml);
    assert!(
        gw.wait_for_log("noverify.tls.verify is false", Duration::from_secs(5)),
        "verify: false is logged as a warning; log:\n{}",
        gw.log_tail(20)
    );

    let resp = client().get(gw.url("/good")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let v = echo_json(resp).await;
    assert_eq!(v["name"], "tls");
    assert_eq!(v["headers"]["host"], format!("{}", gw.listen_addr()));

    for (path, reason) in [
        ("/wrongca", "UnknownIssuer"),
        ("/wrongname", "not valid for name"),
    ] {
        let resp = client().get(gw.url(path)).send().await.unwrap();
        let p = expect_problem(resp, 502).await;
        let detail = p["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains("TLS handshake with the upstream failed") && detail.contains(reason),
            "{path}: {p}"
        );
    }
    let resp = client().get(gw.url("/noverify")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    // Plain HTTP to a TLS backend is an upstream failure, not a success.
    let resp = client().get(gw.url("/plain")).send().await.unwrap();
    assert_eq!(resp.status(), 502);

    // Health checks of `good` speak TLS: after several rounds the backend is still healthy
    // (a plain-HTTP check would have marked it down and every request would be a 502).
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let resp = client().get(gw.url("/good")).send().await.unwrap();
    assert_eq!(resp.status(), 200, "log:\n{}", gw.log_tail(20));
}

/// With `tls.client_ca_file` and `identity.mtls`, the verified client certificate's subject CN
/// is the tenant; clients without a certificate from that CA do not get through the handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtls_client_certificate_subject_cn_is_the_tenant() {
    let server_ca = Ca::new("srv");
    let client_ca = Ca::new("clients");
    let rogue_ca = Ca::new("rogue");
    let cert = server_ca.server("gw.test", &["gw.test"]);
    let acme = client_ca.issue("acme", &[], Usage::Client, 30);
    let rogue = rogue_ca.issue("acme", &[], Usage::Client, 30);
    let backend = Backend::start("b");
    let tls_addr = free_addr();
    let tls = format!(
        "{}, client_ca_file: \"{}\"",
        cert.yaml_pair(),
        client_ca.cert_file
    );
    let yaml = tls_config(&tls_addr, &tls, true, &backend.addr())
        .identity_line("mtls: { tenant_from: subject_cn }")
        .no_routes()
        .route(CATCH_ALL_AUTH)
        .yaml();
    let _gw = Gateway::start(&yaml);
    let url = https_url("gw.test", &tls_addr, "/who");

    for h2 in [false, true] {
        let c = https_client(&server_ca, "gw.test", &tls_addr, h2)
            .identity(acme.identity())
            .build()
            .unwrap();
        let resp = c.get(&url).send().await.unwrap();
        assert_eq!(resp.status(), 200, "h2={h2}");
        let v = echo_json(resp).await;
        assert_eq!(v["headers"]["x-tollgate-tenant"], "acme", "h2={h2}: {v}");
    }
    let anonymous = https_client(&server_ca, "gw.test", &tls_addr, false)
        .build()
        .unwrap();
    assert!(
        anonymous.get(&url).send().await.is_err(),
        "no client certificate"
    );
    let impostor = https_client(&server_ca, "gw.test", &tls_addr, false)
        .identity(rogue.identity())
        .build()
        .unwrap();
    assert!(
        impostor.get(&url).send().await.is_err(),
        "certificate from another CA"
    );
    assert_eq!(backend.stats().requests, 2);
}

/// A client certificate's subject CN passes the tenant-id rules of every other source: a CN
/// `"acme "` (which the backend would see trimmed to `acme` in `X-Tollgate-Tenant`) and a CN
/// `" ip:9.9.9.9"` (an anonymous client's id once trimmed) are refused with 401 before any
/// bucket or backend, over HTTP/1.1 and h2; `acme` itself is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtls_subject_cn_goes_through_the_tenant_id_rules() {
    let server_ca = Ca::new("srv");
    let client_ca = Ca::new("clients");
    let cert = server_ca.server("gw.test", &["gw.test"]);
    let redis = RedisServer::start();
    let backend = Backend::start("b");
    let tls_addr = free_addr();
    let tls = format!(
        "{}, client_ca_file: \"{}\"",
        cert.yaml_pair(),
        client_ca.cert_file
    );
    let yaml = tls_config(&tls_addr, &tls, true, &backend.addr())
        .redis(&redis.url(), STRICT_REDIS)
        .tier("free", "{ limit: 1, per: 1d, burst: 5 }")
        .default_tier("free")
        .identity_line("mtls: { tenant_from: subject_cn }")
        .no_routes()
        .route(CATCH_ALL_AUTH)
        .yaml();
    let _gw = Gateway::start(&yaml);
    let url = https_url("gw.test", &tls_addr, "/who");
    for cn in ["acme ", " ip:9.9.9.9", "ip:9.9.9.9"] {
        let issued = client_ca.issue(cn, &[], Usage::Client, 30);
        for h2 in [false, true] {
            let c = https_client(&server_ca, "gw.test", &tls_addr, h2)
                .identity(issued.identity())
                .build()
                .unwrap();
            let resp = c.get(&url).send().await.unwrap();
            assert_eq!(resp.status(), 401, "CN {cn:?} h2={h2}");
        }
    }
    assert_eq!(
        backend.stats().requests,
        0,
        "no refused CN reached the backend"
    );
    assert!(
        redis.keys("*").is_empty(),
        "no refused CN got a bucket: {:?}",
        redis.keys("*")
    );
    let acme = client_ca.issue("acme", &[], Usage::Client, 30);
    let c = https_client(&server_ca, "gw.test", &tls_addr, false)
        .identity(acme.identity())
        .build()
        .unwrap();
    let resp = c.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let v = echo_json(resp).await;
    assert_eq!(v["headers"]["x-tollgate-tenant"], "acme", "{v}");
}

/// Renewal in place: the certificate files are overwritten, the YAML is unchanged, SIGHUP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_files_renewed_in_place_are_served_after_sighup() {
    let ca = Ca::new("renew");
    let old = ca.server("old", &["gw.test"]);
    let new = ca.server("new", &["gw.test"]);
    let backend = Backend::start("b");
    let tls_addr = free_addr();
    let yaml = tls_config(&tls_addr, &old.yaml_pair(), false, &backend.addr()).yaml();
    let gw = Gateway::start(&yaml);
    let cn = || async {
        let c = https_client(&ca, "gw.test", &tls_addr, false)
            .build()
            .unwrap();
        let r = c
            .get(https_url("gw.test", &tls_addr, "/"))
            .send()
            .await
            .unwrap();
        peer_cn(&r)
    };
    assert_eq!(cn().await.as_deref(), Some("old"));
    std::fs::write(&old.cert_file, &new.cert_pem).unwrap();
    std::fs::write(&old.key_file, &new.key_pem).unwrap();
    gw.reload(&yaml);
    let reloaded = "tollgate_config_reloads_total{result=\"ok\"}";
    assert!(
        eventually(Duration::from_secs(10), || gw.metric_or_zero(reloaded)
            >= 2.0)
        .await
    );
    assert_eq!(cn().await.as_deref(), Some("new"));
}

/// A backend pinned by its own self-signed certificate, the way curl and nginx take it: the
/// certificate in `ca_file` is accepted whether it says `CA:TRUE` (what `openssl req -x509`
/// makes by default) or `CA:FALSE`, after the host name check (a wrong SNI is a 502 naming it)
/// and only when the backend presents exactly that certificate (another self-signed one for
/// the same name is a 502). Health checks of such an upstream pass (and do not take it out for
/// want of a chain check). A `ca_file` that mixes such
/// a certificate with a CA bundle is verified as a bundle: `tollgate check` and the 502 explain
/// why it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_self_signed_backend_certificate_is_accepted_after_the_name_check() {
    let dir = tempfile::tempdir().unwrap();
    let ca_true = self_signed_server(dir.path(), "backend.test", true);
    let leaf = self_signed_server(dir.path(), "backend.test", false);
    let other_dir = tempfile::tempdir().unwrap();
    let impostor = self_signed_server(other_dir.path(), "backend.test", true);
    let root = Ca::new("private");
    let mixed = root.write_file(
        "mixed.pem",
        &format!(
            "{}{}",
            std::fs::read_to_string(&root.cert_file).unwrap(),
            ca_true.cert_pem
        ),
    );
    let start = |c: &Issued| {
        Backend::start_with_args(
            "tls",
            &["--tls-cert", &c.cert_file, "--tls-key", &c.key_file],
        )
    };
    let (pinned, fixed, fake) = (start(&ca_true), start(&leaf), start(&impostor));
    let tls = |sni: &str, ca: &str| format!("tls: {{ sni: {sni}, ca_file: \"{ca}\" }}");
    // Health checks where they pass (a refused handshake would take the backend out and the
    // request would not reach the TLS check this test is about).
    let checked = |sni: &str, ca: &str| {
        format!(
            "{}, health_check: {{ path: /healthz, interval: 1s }}",
            tls(sni, ca)
        )
    };
    let upstreams = [
        (
            "pinned",
            pinned.addr(),
            checked("backend.test", &ca_true.cert_file),
        ),
        (
            "fixed",
            fixed.addr(),
            checked("backend.test", &leaf.cert_file),
        ),
        (
            "wrongname",
            pinned.addr(),
            tls("elsewhere.test", &ca_true.cert_file),
        ),
        (
            "impostor",
            fake.addr(),
            tls("backend.test", &ca_true.cert_file),
        ),
        ("mixed", pinned.addr(), tls("backend.test", &mixed)),
    ];
    let mut config = GatewayConfig::new();
    for (name, addr, settings) in &upstreams {
        config = config.upstream_with(name, addr, settings).route(&format!(
            "{{ path_prefix: /{name}, upstream: {name}, auth: none }}"
        ));
    }
    let yaml = config.yaml();
    let check = check_config(&yaml);
    assert!(check.status.success(), "{}{}", check.stdout, check.stderr);
    let said = format!("{}{}", check.stdout, check.stderr);
    assert!(
        said.contains("upstreams.mixed.tls.ca_file") && said.contains("CA:FALSE"),
        "{said}"
    );
    for name in ["pinned", "fixed", "wrongname", "impostor"] {
        assert!(!said.contains(&format!("upstreams.{name}.tls")), "{said}");
    }
    let gw = Gateway::start(&yaml);
    // Several rounds of health checks, on new and on reused connections.
    for round in 0..3 {
        for path in ["/pinned", "/fixed"] {
            let resp = client().get(gw.url(path)).send().await.unwrap();
            assert_eq!(
                resp.status(),
                200,
                "{path} round {round}: {}",
                gw.log_tail(20)
            );
            assert_eq!(echo_json(resp).await["name"], "tls");
        }
        for (path, reason) in [
            ("/wrongname", "not valid for name \"elsewhere.test\""),
            ("/impostor", "none of those pinned in ca_file"),
            ("/mixed", "CaUsedAsEndEntity"),
        ] {
            let resp = client().get(gw.url(path)).send().await.unwrap();
            let p = expect_problem(resp, 502).await;
            let detail = p["detail"].as_str().unwrap_or_default();
            assert!(
                detail.contains("TLS handshake with the upstream failed")
                    && detail.contains(reason),
                "{path}: {p}"
            );
        }
        tokio::time::sleep(Duration::from_millis(1200)).await;
    }
}
