//! Identity stage, black-box (docs/DESIGN.md section 1, stage 3): JWTs (pinned algorithms, claims,
//! leeway) and API keys → tenant and tier.
//!
//! Every rejected credential is checked the same way: the status (401 with
//! `WWW-Authenticate: Bearer error="invalid_token"`, 400 for duplicate key headers, 403 for an
//! unknown tier), a problem+json body that does not echo the credential, nothing at the backend
//! and not a single Redis call or key. Then a valid token on the same gateway is admitted, so a
//! rejection cannot come from a broken config. Each test owns its `redis-server`, backend and
//! gateway; tokens are signed with the fixture keys in `tests/fixtures/keys/`.

mod common;

use common::*;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const ISSUER: &str = "https://idp.tollgate.test";
const AUDIENCE: &str = "api.tollgate.test";
const HS_SECRET: &str = "identity-test-hmac-secret-7f3a9c1e5b";
const API_KEY: &str = "tg_live_identity_test_key_0123456789";
const INVALID_TOKEN: &str = "Bearer error=\"invalid_token\"";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/keys")
        .join(name)
}

fn read_fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

/// Unpadded base64url (RFC 4648 §5), for hand-crafted tokens.
fn b64url(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

/// Plausible claims for `sub`: right issuer and audience, valid for ten minutes.
fn claims(sub: &str) -> Value {
    let now = now_s();
    json!({ "sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now - 5, "exp": now + 600 })
}

/// `claims(sub)` with `extra` merged in (a `null` value removes the claim).
fn claims_with(sub: &str, extra: Value) -> Value {
    let mut c = claims(sub);
    for (k, v) in extra.as_object().expect("object") {
        if v.is_null() {
            c.as_object_mut().unwrap().remove(k);
        } else {
            c[k] = v.clone();
        }
    }
    c
}

fn sign(header: Header, claims: &Value, key: &EncodingKey) -> String {
    jsonwebtoken::encode(&header, claims, key).expect("encode")
}

fn header(alg: Algorithm, kid: Option<&str>) -> Header {
    let mut h = Header::new(alg);
    h.kid = kid.map(str::to_string);
    h
}

/// RS256 with the fixture private key whose public half is configured as kid `k1`.
fn rs256(kid: Option<&str>, claims: &Value) -> String {
    let key = EncodingKey::from_rsa_pem(&read_fixture("rsa2048.key.pem")).expect("RSA key");
    sign(header(Algorithm::RS256, kid), claims, &key)
}

/// HS256 with `secret`.
fn hs256(kid: Option<&str>, secret: &[u8], claims: &Value) -> String {
    let key = EncodingKey::from_secret(secret).expect("HMAC key");
    sign(header(Algorithm::HS256, kid), claims, &key)
}

/// A valid token for `sub` (RS256, kid k1).
fn valid(sub: &str) -> String {
    rs256(Some("k1"), &claims(sub))
}

/// `<header JSON>.<claims>.<signature>` with a hand-written header and a raw signature segment.
fn unsigned(header_json: &str, claims: &Value, signature: &str) -> String {
    format!(
        "{}.{}.{signature}",
        b64url(header_json.as_bytes()),
        b64url(claims.to_string().as_bytes())
    )
}

// ---------------------------------------------------------------------------------------------
// The rig
// ---------------------------------------------------------------------------------------------

/// Knobs of one gateway config.
struct Opts {
    leeway_s: u64,
    /// `edge:` flow mapping, if any.
    edge: Option<&'static str>,
    /// Tier T's bucket.
    tier: &'static str,
    /// HS key from `secret_env` instead of `secret_file`.
    secret_env: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            leeway_s: 30,
            edge: None,
            tier: "{ limit: 1, per: 1d, burst: 3 }",
            secret_env: false,
        }
    }
}

struct Rig {
    redis: RedisServer,
    backend: Backend,
    gw: Gateway,
    http: reqwest::Client,
    _secrets: tempfile::TempDir,
}

impl Rig {
    fn start(o: Opts) -> Rig {
        let redis = RedisServer::start();
        let backend = Backend::start("echo");
        let secrets = tempfile::tempdir().expect("temp dir");
        let secret_file = secrets.path().join("hs256.secret");
        std::fs::write(&secret_file, format!("{HS_SECRET}\n")).expect("write secret");
        let hs_source = if o.secret_env {
            "secret_env: \"TOLLGATE_TEST_HS_SECRET\"".to_string()
        } else {
            format!("secret_file: \"{}\"", secret_file.display())
        };
        let jwt = format!(
            "{{ issuer: \"{ISSUER}\", audience: \"{AUDIENCE}\", leeway_s: {leeway}, \
             tier_claim: tier, keys: [\
             {{ kid: k1, algorithm: RS256, public_key_file: \"{rsa_pub}\" }}, \
             {{ kid: h1, algorithm: HS256, {hs_source} }}] }}",
            leeway = o.leeway_s,
            rsa_pub = fixture("rsa2048.pub.pem").display(),
        );
        let mut config = GatewayConfig::echo(&backend.addr(), "required")
            .redis(&redis.url(), STRICT_REDIS)
            .tier("T", o.tier)
            .tier("gold", "{ limit: 1, per: 1d, burst: 7 }")
            .default_tier("T")
            .jwt(&jwt)
            .api_key_header("\"X-Api-Key\"")
            .api_key_with(API_KEY, "keyed", None);
        if let Some(edge) = o.edge {
            config = config.edge(edge);
        }
        let yaml = config.yaml();
        let gw = if o.secret_env {
            Gateway::start_with_env(&yaml, &[("TOLLGATE_TEST_HS_SECRET", HS_SECRET)])
        } else {
            Gateway::start(&yaml)
        };
        Rig {
            redis,
            backend,
            gw,
            http: client(),
            _secrets: secrets,
        }
    }

    /// GET / with `Authorization: Bearer <token>`.
    async fn bearer(&self, token: &str) -> Reply {
        let resp = self
            .http
            .get(self.gw.url("/"))
            .header("authorization", format!("Bearer {token}"))
            .send()
            .await
            .expect("GET with bearer");
        Reply::read(resp).await
    }

    /// GET / with each `(name, value)` header appended.
    async fn with_headers(&self, headers: &[(&str, &str)]) -> Reply {
        let mut req = self.http.get(self.gw.url("/"));
        for (n, v) in headers {
            req = req.header(*n, *v);
        }
        Reply::read(req.send().await.expect("GET")).await
    }

    /// Asserts that nothing got past the identity stage: no backend request, no Redis call, no
    /// Redis key.
    fn assert_nothing_spent(&self) {
        assert_eq!(
            self.backend.stats().requests,
            0,
            "the backend saw a request"
        );
        assert_eq!(
            self.redis.keys("*"),
            Vec::<String>::new(),
            "a Redis key was written"
        );
        assert_eq!(
            self.redis.command_calls("evalsha") + self.redis.command_calls("eval"),
            0,
            "Redis was called"
        );
    }

    /// The control: a valid token for a fresh subject is admitted on this gateway.
    async fn assert_valid_token_admitted(&self) {
        let r = self.bearer(&valid("control")).await;
        assert_eq!(r.status, 200, "a valid token is admitted: {r:?}");
        let v: Value = serde_json::from_str(&r.body).expect("echo JSON");
        assert_eq!(v["headers"]["x-tollgate-tenant"], "control", "{v}");
    }
}

#[derive(Debug)]
struct Reply {
    status: u16,
    www_authenticate: Vec<String>,
    content_type: String,
    ratelimit: Option<String>,
    body: String,
}

impl Reply {
    async fn read(resp: reqwest::Response) -> Reply {
        let status = resp.status().as_u16();
        let www_authenticate = resp
            .headers()
            .get_all("www-authenticate")
            .iter()
            .map(|v| v.to_str().unwrap_or("<non-ascii>").to_string())
            .collect();
        let content_type = header_str(&resp, "content-type").unwrap_or_default();
        let ratelimit = header_str(&resp, "ratelimit");
        let body = resp.text().await.unwrap_or_default();
        Reply {
            status,
            www_authenticate,
            content_type,
            ratelimit,
            body,
        }
    }

    /// `r` of the `RateLimit` header.
    fn remaining(&self) -> u64 {
        let v = self.ratelimit.as_deref().expect("RateLimit header");
        v.split(';')
            .find_map(|p| p.trim().strip_prefix("r="))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no r= in {v:?}"))
    }

    /// Asserts a problem+json answer with `status` and (for 401s) the invalid_token challenge,
    /// whose body contains none of `secrets` (the token, or its longer segments). Returns the
    /// problem.
    fn assert_rejected(&self, status: u16, secrets: &[&str]) -> Value {
        assert_eq!(self.status, status, "{self:?}");
        assert!(
            self.content_type.starts_with("application/problem+json"),
            "{self:?}"
        );
        let p = problem(&self.body);
        assert_eq!(p["status"].as_u64(), Some(status as u64), "{p}");
        if status == 401 {
            assert_eq!(self.www_authenticate, [INVALID_TOKEN], "{self:?}");
        } else {
            assert!(self.www_authenticate.is_empty(), "{self:?}");
        }
        for secret in secrets {
            for part in std::iter::once(*secret).chain(secret.split('.')) {
                if part.len() >= 16 {
                    assert!(
                        !self.body.contains(part),
                        "the problem body echoes the credential: {}",
                        self.body
                    );
                }
            }
        }
        assert!(
            self.ratelimit.is_none(),
            "quota headers on an identity failure"
        );
        p
    }
}

/// The whole negative check for one bearer token: `status`, nothing spent, then the control.
async fn rejects_bearer(token: &str, status: u16) -> Value {
    let rig = Rig::start(Opts::default());
    let r = rig.bearer(token).await;
    let p = r.assert_rejected(status, &[token]);
    rig.assert_nothing_spent();
    rig.assert_valid_token_admitted().await;
    p
}

/// `rejects_bearer` for a 401 whose detail contains `reason`.
async fn token_is_401(token: &str, reason: &str) {
    let p = rejects_bearer(token, 401).await;
    let detail = p["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(reason),
        "detail {detail:?} should say {reason:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// C07: unsigned and forged tokens
// ---------------------------------------------------------------------------------------------

/// C07: `{"alg":"none"}` with plausible claims and an empty signature → 401 with the
/// invalid_token challenge; the backend sees nothing and no Redis key exists for its subject.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c07_alg_none_is_401_and_spends_nothing() {
    let token = unsigned(
        r#"{"alg":"none","typ":"JWT"}"#,
        &claims_with("victim", json!({ "tier": "gold" })),
        "",
    );
    token_is_401(&token, "algorithm not allowed").await;
}

/// C07: `alg: "None"` → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c07_alg_none_capitalised_is_401() {
    let token = unsigned(r#"{"alg":"None","typ":"JWT"}"#, &claims("victim"), "");
    token_is_401(&token, "algorithm not allowed").await;
}

/// C07: `alg: "NONE"` → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c07_alg_none_upper_case_is_401() {
    let token = unsigned(r#"{"alg":"NONE","typ":"JWT"}"#, &claims("victim"), "");
    token_is_401(&token, "algorithm not allowed").await;
}

/// C07: a header without `alg` → 401 (with a kid of a real key, and a signature-looking part).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c07_missing_alg_is_401() {
    let token = unsigned(
        r#"{"typ":"JWT","kid":"k1"}"#,
        &claims("victim"),
        "c2lnbmF0dXJlLXRoYXQtaXMtbm90LWNoZWNrZWQ",
    );
    token_is_401(&token, "algorithm not allowed").await;
}

/// C07: HS256 signed with a secret other than the configured one → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c07_hs256_with_wrong_secret_is_401() {
    let token = hs256(
        Some("h1"),
        b"not-the-configured-secret-000000",
        &claims("victim"),
    );
    token_is_401(&token, "signature invalid").await;
}

/// C07: HS256 "signed" with the configured RS256 public key's PEM as the HMAC secret, naming
/// the RS256 key's kid (the classic algorithm confusion) → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c07_hs256_with_rs256_public_pem_as_secret_is_401() {
    let pem = read_fixture("rsa2048.pub.pem");
    let token = hs256(Some("k1"), &pem, &claims("victim"));
    token_is_401(&token, "algorithm not allowed").await;
}

/// C07: the same confusion without a kid: only HS256 keys are tried, and the PEM is not their
/// secret → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c07_hs256_with_rs256_public_pem_as_secret_and_no_kid_is_401() {
    let pem = read_fixture("rsa2048.pub.pem");
    let token = hs256(None, &pem, &claims("victim"));
    token_is_401(&token, "signature invalid").await;
}

/// C07: a correctly signed token naming a kid that is not configured → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c07_unknown_kid_is_401() {
    let token = rs256(Some("k9"), &claims("victim"));
    token_is_401(&token, "unknown key id").await;
}

/// C07: with an edge burst of 4, five `alg: none` requests from one address are 4 × 401 and then
/// the edge's 429; never a 5xx, nothing reaches the backend or Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c07_edge_burst_four_then_429_for_alg_none_flood() {
    let rig = Rig::start(Opts {
        edge: Some("{ limit: 1, per: 1d, burst: 4 }"),
        ..Opts::default()
    });
    let token = unsigned(r#"{"alg":"none"}"#, &claims("victim"), "");
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(rig.bearer(&token).await);
    }
    assert_eq!(
        got.iter().map(|r| r.status).collect::<Vec<_>>(),
        [401, 401, 401, 401, 429],
        "{got:?}"
    );
    for r in &got[..4] {
        r.assert_rejected(401, &[&token]);
    }
    let p = got[4].assert_rejected(429, &[&token]);
    assert_eq!(p["violated-policies"], json!(["edge"]), "{p}");
    rig.assert_nothing_spent();
    // The edge budget of this address is spent: even a valid token is now an edge 429.
    let r = rig.bearer(&valid("control")).await;
    assert_eq!(r.status, 429, "{r:?}");
    assert_eq!(rig.backend.stats().requests, 0);
}

// ---------------------------------------------------------------------------------------------
// Claims
// ---------------------------------------------------------------------------------------------

/// `exp` two minutes ago (leeway 30 s) → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_token_is_401() {
    let token = valid_with(json!({ "exp": now_s() - 120 }));
    token_is_401(&token, "token expired").await;
}

/// `nbf` two minutes ahead (leeway 30 s) → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_yet_valid_token_is_401() {
    let token = valid_with(json!({ "nbf": now_s() + 120 }));
    token_is_401(&token, "not yet valid").await;
}

/// A token from another issuer → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_issuer_is_401() {
    let token = valid_with(json!({ "iss": "https://evil.example" }));
    token_is_401(&token, "issuer").await;
}

/// A token for another audience → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_audience_is_401() {
    let token = valid_with(json!({ "aud": "other-api.example" }));
    token_is_401(&token, "audience").await;
}

/// A token without `exp` (never expiring) → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_exp_is_401() {
    let token = valid_with(json!({ "exp": null }));
    token_is_401(&token, "exp").await;
}

/// A validly signed RS256 token (kid k1) for subject `victim` with `extra` claims merged in.
fn valid_with(extra: Value) -> String {
    rs256(Some("k1"), &claims_with("victim", extra))
}

// ---------------------------------------------------------------------------------------------
// Malformed tokens
// ---------------------------------------------------------------------------------------------

/// A header segment that is not base64url → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_base64_is_401() {
    let good = valid("victim");
    let (_, rest) = good.split_once('.').unwrap();
    let token = format!("eyJ!bGciOiJSUzI1NiJ9*.{rest}");
    token_is_401(&token, "malformed").await;
}

/// A header segment that is base64url of something that is not JSON → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_header_is_401() {
    let token = unsigned(r#"{"alg":"RS256","kid":"k1""#, &claims("victim"), "c2ln");
    token_is_401(&token, "malformed").await;
}

/// Malformed shapes → 401 each: an HS256 token whose signature is valid (made with the
/// configured secret) but whose claims segment is not JSON, and tokens with two, four or no
/// real segments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_claims_and_segment_count_are_401() {
    let rig = Rig::start(Opts::default());
    let header = b64url(br#"{"alg":"HS256","kid":"h1"}"#);
    let body = b64url(b"not json at all");
    let two_parts = format!("{header}.{body}");
    let signing_input = format!("{header}.{body}");
    let sig = {
        // HMAC-SHA256 over the signing input with the configured secret, via jsonwebtoken.
        let key = EncodingKey::from_secret(HS_SECRET.as_bytes()).unwrap();
        jsonwebtoken::crypto::sign(signing_input.as_bytes(), &key, Algorithm::HS256).unwrap()
    };
    let bad_json = format!("{signing_input}.{sig}");
    for token in [bad_json.as_str(), two_parts.as_str(), "a.b.c.d", "...", "x"] {
        let r = rig.bearer(token).await;
        r.assert_rejected(401, &[token]);
    }
    rig.assert_nothing_spent();
    rig.assert_valid_token_admitted().await;
}

/// A validly signed token larger than 8 KiB → 401 (rejected before any parsing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_token_is_401() {
    let token = valid_with(json!({ "pad": "p".repeat(9_000) }));
    assert!(token.len() > 8_192);
    token_is_401(&token, "too large").await;
}

/// Two `Authorization: Bearer` headers (each a valid token) → 401: the gateway does not pick one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bearer_tokens_are_401() {
    let rig = Rig::start(Opts::default());
    let (a, b) = (valid("alice"), valid("bob"));
    let r = rig
        .with_headers(&[
            ("authorization", &format!("Bearer {a}")),
            ("authorization", &format!("Bearer {b}")),
        ])
        .await;
    r.assert_rejected(401, &[&a, &b]);
    rig.assert_nothing_spent();
    rig.assert_valid_token_admitted().await;
}

/// A valid `Authorization: Bearer` next to a `Basic` field, in either order → 401: two
/// credentials (RFC 9110 11.6.2 allows one field), and a backend could authenticate the `Basic`
/// one while the quota charged the token's tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_next_to_another_authorization_field_is_401() {
    let rig = Rig::start(Opts::default());
    let token = valid("alice");
    let bearer = format!("Bearer {token}");
    let basic = "Basic YWxhZGRpbjpvcGVuc2VzYW1l";
    for pair in [[basic, bearer.as_str()], [bearer.as_str(), basic]] {
        let r = rig
            .with_headers(&[("authorization", pair[0]), ("authorization", pair[1])])
            .await;
        r.assert_rejected(401, &[&token]);
    }
    rig.assert_nothing_spent();
    rig.assert_valid_token_admitted().await;
}

/// `Authorization: Bearer<TAB><token>` is a bearer token too: an expired one is a 401 (it was
/// taken for another scheme and forwarded unverified), a valid one is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_token_after_a_tab_is_verified() {
    let rig = Rig::start(Opts::default());
    let expired = valid_with(json!({ "exp": now_s() - 3_600 }));
    let r = rig
        .with_headers(&[("authorization", &format!("Bearer\t{expired}"))])
        .await;
    r.assert_rejected(401, &[&expired]);
    rig.assert_nothing_spent();
    let r = rig
        .with_headers(&[("authorization", &format!("Bearer\t{}", valid("alice")))])
        .await;
    assert_eq!(r.status, 200, "{r:?}");
}

/// `Authorization: Bearer` without a token → 401 invalid_token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_bearer_token_is_401() {
    let rig = Rig::start(Opts::default());
    let r = rig.with_headers(&[("authorization", "Bearer ")]).await;
    r.assert_rejected(401, &[]);
    rig.assert_nothing_spent();
    rig.assert_valid_token_admitted().await;
}

/// No credentials (or only `Basic`) on an `auth: required` route → 401 with the bare `Bearer`
/// challenge (RFC 6750 §3.1: no error code when no token was presented).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_credentials_are_401_with_a_bare_bearer_challenge() {
    let rig = Rig::start(Opts::default());
    for headers in [
        vec![],
        vec![("authorization", "Basic YWxhZGRpbjpvcGVuc2VzYW1l")],
    ] {
        let r = rig.with_headers(&headers).await;
        assert_eq!(r.status, 401, "{r:?}");
        assert_eq!(r.www_authenticate, ["Bearer"], "{r:?}");
        assert!(r.content_type.starts_with("application/problem+json"));
        assert_eq!(problem(&r.body)["status"], 401);
    }
    rig.assert_nothing_spent();
    rig.assert_valid_token_admitted().await;
}

// ---------------------------------------------------------------------------------------------
// API keys
// ---------------------------------------------------------------------------------------------

/// An API key that matches no configured digest → 401 with the challenge; the key is not echoed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_api_key_is_401() {
    let rig = Rig::start(Opts::default());
    let wrong = "tg_live_identity_test_key_9999999999";
    let r = rig.with_headers(&[("x-api-key", wrong)]).await;
    r.assert_rejected(401, &[wrong]);
    rig.assert_nothing_spent();
    let r = rig.with_headers(&[("x-api-key", API_KEY)]).await;
    assert_eq!(r.status, 200, "{r:?}");
}

/// Two API key headers (even the same valid key twice, in different name cases) → 400, no
/// challenge.
#[test]
fn duplicate_api_key_headers_are_400() {
    let rig = Rig::start(Opts::default());
    let reply = http_request_with_headers(
        rig.gw.listen_addr(),
        "GET",
        "/",
        &[("X-Api-Key", API_KEY), ("x-api-key", API_KEY)],
        Duration::from_secs(10),
    )
    .expect("request");
    assert_eq!(reply.status, 400, "{reply:?}");
    assert!(reply.header("www-authenticate").is_none(), "{reply:?}");
    assert!(reply
        .header("content-type")
        .is_some_and(|c| c.starts_with("application/problem+json")));
    assert_eq!(problem(&reply.body)["status"], 400);
    assert!(!reply.body.contains(API_KEY), "{}", reply.body);
    rig.assert_nothing_spent();
}

/// The API key header name is case-insensitive (configured as `X-Api-Key`; sent as
/// `x-api-key`, `X-API-KEY` and `x-Api-kEY`): each is admitted as tenant `keyed`.
#[test]
fn api_key_header_name_is_case_insensitive() {
    let rig = Rig::start(Opts::default());
    for (i, name) in ["x-api-key", "X-API-KEY", "x-Api-kEY"].iter().enumerate() {
        let reply = http_request_with_headers(
            rig.gw.listen_addr(),
            "GET",
            "/",
            &[(name, API_KEY)],
            Duration::from_secs(10),
        )
        .expect("request");
        assert_eq!(reply.status, 200, "{name}: {reply:?}");
        let v: Value = serde_json::from_str(&reply.body).expect("echo JSON");
        assert_eq!(v["headers"]["x-tollgate-tenant"], "keyed", "{v}");
        assert_eq!(v["headers"]["x-tollgate-tier"], "T", "{v}");
        assert!(
            reply
                .header("ratelimit")
                .is_some_and(|h| h.contains(&format!("r={}", 2 - i))),
            "{reply:?}"
        );
    }
    assert_eq!(rig.backend.stats().requests, 3);
}

// ---------------------------------------------------------------------------------------------
// Tiers
// ---------------------------------------------------------------------------------------------

/// A valid token whose tier claim names a tier that does not exist → 403, nothing spent; an
/// existing tier in the claim is used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tier_claim_naming_a_missing_tier_is_403() {
    let rig = Rig::start(Opts::default());
    let token = valid_with(json!({ "tier": "platinum" }));
    let r = rig.bearer(&token).await;
    let p = r.assert_rejected(403, &[&token]);
    assert!(
        p["detail"].as_str().is_some_and(|d| d.contains("platinum")),
        "{p}"
    );
    rig.assert_nothing_spent();
    let r = rig.bearer(&valid_with(json!({ "tier": "gold" }))).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.remaining(), 6, "tier gold (burst 7): {r:?}");
}

/// An HS256 token with the secret from `secret_env` is admitted; a wrong secret is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hs256_secret_from_environment_verifies_tokens() {
    let rig = Rig::start(Opts {
        secret_env: true,
        ..Opts::default()
    });
    let r = rig
        .bearer(&hs256(Some("h1"), HS_SECRET.as_bytes(), &claims("hs")))
        .await;
    assert_eq!((r.status, r.remaining()), (200, 2), "{r:?}");
    let r = rig
        .bearer(&hs256(
            Some("h1"),
            b"wrong-secret-wrong-secret",
            &claims("hs"),
        ))
        .await;
    assert_eq!(r.status, 401, "{r:?}");
}

// ---------------------------------------------------------------------------------------------
// C08: expiry and leeway
// ---------------------------------------------------------------------------------------------

/// C08, `leeway_s: 0`: exp 10 s ago → 401; exp 10 s ahead → 200; exp equal to now → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c08_leeway_zero_exp_in_past_and_now_are_401_future_is_200() {
    let rig = Rig::start(Opts {
        leeway_s: 0,
        ..Opts::default()
    });
    let now = now_s();
    let past = valid_with(json!({ "exp": now - 10 }));
    rig.bearer(&past).await.assert_rejected(401, &[&past]);
    // The gateway reads the clock after this line: its now is >= `now`, so exp <= now there.
    let at_now = valid_with(json!({ "exp": now_s() }));
    rig.bearer(&at_now).await.assert_rejected(401, &[&at_now]);
    rig.assert_nothing_spent();
    let r = rig
        .bearer(&valid_with(json!({ "exp": now_s() + 10 })))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
}

/// C08, `leeway_s: 30`: exp 10 s ago → 200; exp 40 s ago → 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c08_leeway_thirty_accepts_ten_seconds_late_not_forty() {
    let rig = Rig::start(Opts {
        leeway_s: 30,
        ..Opts::default()
    });
    let late40 = valid_with(json!({ "exp": now_s() - 40 }));
    rig.bearer(&late40).await.assert_rejected(401, &[&late40]);
    rig.assert_nothing_spent();
    let r = rig
        .bearer(&valid_with(json!({ "exp": now_s() - 10 })))
        .await;
    assert_eq!(r.status, 200, "{r:?}");
}

/// C08: tier T burst 3, ~no refill: 5 expired-token requests, then 3 valid ones for the same
/// subject → 5 × 401, then 200, 200, 200 with remaining 2, 1, 0 (the 401s spent nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn case_c08_expired_tokens_spend_nothing_from_the_subjects_bucket() {
    let rig = Rig::start(Opts::default());
    let expired = valid_with(json!({ "exp": now_s() - 3_600 }));
    for _ in 0..5 {
        rig.bearer(&expired).await.assert_rejected(401, &[&expired]);
    }
    rig.assert_nothing_spent();
    let mut got = Vec::new();
    for _ in 0..3 {
        let r = rig.bearer(&valid("victim")).await;
        got.push((r.status, r.remaining()));
    }
    assert_eq!(got, [(200, 2), (200, 1), (200, 0)]);
    assert_eq!(rig.redis.keys("*"), ["tollgate:{victim}:tb"]);
    let r = rig.bearer(&valid("victim")).await;
    assert_eq!(r.status, 429, "{r:?}");
}

/// Sends `GET /` with `headers` (raw, so duplicates and odd names go as written), asserts 200,
/// and returns the echo backend's JSON of what it received.
fn admitted_echo(rig: &Rig, headers: &[(&str, &str)]) -> Value {
    echo_get(rig.gw.listen_addr(), "/", headers).1
}

/// Proxy-set fields (`Forwarded`, `X-Real-IP`, `X-Forwarded-Host`/`-Port`/`-Prefix`, CDN
/// client-address and URL-override fields) reach the backend only from a peer in
/// `edge.trusted_proxies`; from any other client they are dropped. Their `_` spellings are
/// dropped from every peer. `X-Forwarded-For`/`-Proto` are tollgate's own either way.
#[test]
fn proxy_set_fields_pass_only_from_trusted_peers() {
    let fields = [
        (
            "Forwarded",
            "for=198.51.100.66;host=evil.example;proto=https",
        ),
        ("X-Real-IP", "198.51.100.66"),
        ("X-Forwarded-Host", "evil.example"),
        ("X-Forwarded-Port", "8443"),
        ("X-Forwarded-Prefix", "/admin"),
        ("True-Client-IP", "198.51.100.68"),
        ("X-Original-URL", "/admin/users"),
    ];
    let lookalikes = [("X_Real_IP", "198.51.100.67"), ("X_Original_URL", "/admin")];
    let mut headers = fields.to_vec();
    headers.extend(lookalikes);
    headers.push(("X-Api-Key", API_KEY));
    headers.push(("X-Forwarded-For", "198.51.100.66"));
    fn names<'a>(list: &'a [(&'static str, &str)]) -> impl Iterator<Item = &'static str> + 'a {
        list.iter().map(|(n, _)| *n)
    }

    // No proxy is trusted: the client's proxy-set fields are dropped.
    let rig = Rig::start(Opts::default());
    let v = admitted_echo(&rig, &headers);
    let got = assert_dropped(&v, names(&fields).chain(names(&lookalikes)));
    assert_eq!(got["x-forwarded-for"], "198.51.100.66, 127.0.0.1", "{v}");
    assert_eq!(got["x-forwarded-proto"], "http", "{v}");

    // The peer (127.0.0.1) is a trusted proxy: its fields pass unchanged, the lookalikes do not.
    let trusted = Rig::start(Opts {
        edge: Some("{ limit: 1000, per: 1s, trusted_proxies: [\"::ffff:127.0.0.1\"] }"),
        ..Opts::default()
    });
    let v = admitted_echo(&trusted, &headers);
    let got = assert_dropped(&v, names(&lookalikes));
    for (name, value) in fields {
        assert_eq!(got[&name.to_ascii_lowercase()], value, "{name}: {v}");
    }
    assert_eq!(got["x-forwarded-for"], "198.51.100.66, 127.0.0.1", "{v}");
}

/// The headers the echo backend received, after asserting none of `names` is among them.
fn assert_dropped<'v, 'n>(
    v: &'v Value,
    names: impl IntoIterator<Item = &'n str>,
) -> &'v serde_json::Map<String, Value> {
    let got = v["headers"].as_object().expect("echoed headers");
    for name in names {
        assert!(
            !got.contains_key(&name.to_ascii_lowercase()),
            "{name} reached the backend: {v}"
        );
    }
    got
}

/// A client cannot pose as another tenant or tier to the backend: tenant and tier headers it
/// sends (twice, in any case) are replaced by the identified ones, one value each, and its
/// API key is not forwarded.
#[test]
fn client_tenant_and_tier_headers_are_replaced_not_forwarded() {
    let rig = Rig::start(Opts::default());
    let spoofed = [
        ("X-Tollgate-Tenant", "evil"),
        ("x-tollgate-tenant", "evil2"),
        ("X-TOLLGATE-TIER", "enterprise"),
        ("x-tollgate-tier", "enterprise"),
    ];
    let mut headers = spoofed.to_vec();
    headers.push(("X-Api-Key", API_KEY));
    let v = admitted_echo(&rig, &headers);
    assert_eq!(v["headers"]["x-tollgate-tenant"], "keyed", "{v}");
    assert_eq!(v["headers"]["x-tollgate-tier"], "T", "{v}");
    assert!(
        v["headers"].get("x-api-key").is_none(),
        "credential forwarded: {v}"
    );
    assert_eq!(rig.backend.stats().requests, 1);
}

/// Names that only look like tollgate's once `_` is read as `-` (what a CGI-style backend does)
/// never reach the backend: tenant, tier, request id, forwarded address and API key lookalikes
/// are dropped; the real fields carry tollgate's values; another name with `_` passes.
#[test]
fn underscore_lookalikes_of_owned_headers_are_dropped() {
    let rig = Rig::start(Opts::default());
    let lookalikes = [
        ("X_Tollgate_Tenant", "evil"),
        ("x-tollgate_tier", "enterprise"),
        ("X_Request_Id", "spoofed-id"),
        ("X_Forwarded_For", "198.51.100.66"),
        ("X_Forwarded_Proto", "https"),
        ("X_Api_Key", "tg_live_not_verified_by_tollgate"),
    ];
    let mut headers = lookalikes.to_vec();
    headers.push(("X-Api-Key", API_KEY));
    headers.push(("X_Custom_Trace", "kept"));
    let v = admitted_echo(&rig, &headers);
    let got = assert_dropped(&v, lookalikes.iter().map(|(name, _)| *name));
    assert_eq!(got["x-tollgate-tenant"], "keyed", "{v}");
    assert_eq!(got["x-tollgate-tier"], "T", "{v}");
    assert_eq!(got["x-forwarded-for"], "127.0.0.1", "{v}");
    assert_eq!(got["x-forwarded-proto"], "http", "{v}");
    assert_ne!(got["x-request-id"], "spoofed-id", "{v}");
    assert_eq!(got["x_custom_trace"], "kept", "{v}");
    assert_eq!(rig.backend.stats().requests, 1);
}
