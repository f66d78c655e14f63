use super::super::test_support::*;
use super::*;
use serde_json::json;

fn verifier(keys: Vec<JwtKeySettings>) -> JwtVerifier {
    JwtVerifier::build(&jwt_settings(keys)).expect("build")
}

fn all_keys() -> Vec<JwtKeySettings> {
    vec![
        hs_key(Some("h256"), Algorithm::HS256),
        hs_key(Some("h384"), Algorithm::HS384),
        hs_key(Some("h512"), Algorithm::HS512),
        pem_key(Some("rs256"), Algorithm::RS256, RSA_PUB),
        pem_key(Some("rs384"), Algorithm::RS384, RSA_PUB),
        pem_key(Some("rs512"), Algorithm::RS512, RSA_PUB),
        pem_key(Some("ps256"), Algorithm::PS256, RSA_PUB),
        pem_key(Some("ps384"), Algorithm::PS384, RSA_PUB),
        pem_key(Some("ps512"), Algorithm::PS512, RSA_PUB),
        pem_key(Some("es256"), Algorithm::ES256, EC256_PUB),
        pem_key(Some("es384"), Algorithm::ES384, EC384_PUB),
        pem_key(Some("ed"), Algorithm::EdDSA, ED_PUB),
    ]
}

fn reason_of(r: Result<TokenClaims, IdentityError>) -> String {
    match r {
        Err(IdentityError::InvalidToken(s)) => s,
        other => panic!("expected InvalidToken, got {other:?}"),
    }
}

const ALL_ALGS: [(Algorithm, &str); 12] = [
    (Algorithm::HS256, "h256"),
    (Algorithm::HS384, "h384"),
    (Algorithm::HS512, "h512"),
    (Algorithm::RS256, "rs256"),
    (Algorithm::RS384, "rs384"),
    (Algorithm::RS512, "rs512"),
    (Algorithm::PS256, "ps256"),
    (Algorithm::PS384, "ps384"),
    (Algorithm::PS512, "ps512"),
    (Algorithm::ES256, "es256"),
    (Algorithm::ES384, "es384"),
    (Algorithm::EdDSA, "ed"),
];

#[test]
fn every_algorithm_accepts_a_good_token_with_kid() {
    let v = verifier(all_keys());
    for (alg, kid) in ALL_ALGS {
        let t = sign(alg, Some(kid), &good_claims());
        let c = v
            .verify(&t, NOW)
            .unwrap_or_else(|e| panic!("{alg:?}: {e:?}"));
        assert_eq!(c.tenant, "acme", "{alg:?}");
    }
}

#[test]
fn every_algorithm_accepts_a_good_token_without_kid() {
    let v = verifier(all_keys());
    for (alg, _) in ALL_ALGS {
        let t = sign(alg, None, &good_claims());
        assert!(v.verify(&t, NOW).is_ok(), "{alg:?}");
    }
}

#[test]
fn without_kid_tries_each_key_of_the_algorithm() {
    // Two HS256 keys; the token is signed with the second one's secret.
    std::env::set_var(
        "TOLLGATE_TEST_JWT_SECRET_2",
        "another-secret-another-secret-xx",
    );
    let mut keys = vec![hs_key(None, Algorithm::HS256)];
    keys.push(JwtKeySettings {
        kid: None,
        algorithm: Algorithm::HS256,
        source: KeySource::SecretEnv("TOLLGATE_TEST_JWT_SECRET_2".into()),
    });
    let v = verifier(keys);
    let t = sign_with(
        jsonwebtoken::Header::new(Algorithm::HS256),
        &good_claims(),
        &hs_encoding_key(b"another-secret-another-secret-xx"),
    );
    assert_eq!(v.verify(&t, NOW).unwrap().tenant, "acme");
}

#[test]
fn alg_none_in_any_case_or_missing_is_rejected() {
    let v = verifier(all_keys());
    let good = sign(Algorithm::HS256, Some("h256"), &good_claims());
    let (_, rest) = good.split_once('.').unwrap();
    let payload = rest.split_once('.').unwrap().0;
    for header in [
        json!({"alg": "none", "typ": "JWT"}),
        json!({"alg": "None"}),
        json!({"alg": "NONE"}),
        json!({"alg": "nOnE", "kid": "h256"}),
        json!({"typ": "JWT"}),
        json!({"alg": null}),
        json!({"alg": 256}),
        json!({"alg": "HS256 "}),
        json!({"alg": "hs256"}),
        json!({"alg": "ES512"}),
    ] {
        let h = b64url(header.to_string().as_bytes());
        for sig in ["", "AAAA", rest.rsplit_once('.').unwrap().1] {
            let t = format!("{h}.{payload}.{sig}");
            assert_eq!(reason_of(v.verify(&t, NOW)), ALG_NOT_ALLOWED, "{header}");
        }
    }
}

#[test]
fn hs256_signed_with_rsa_public_pem_is_rejected() {
    let pem = read_fixture(RSA_PUB);
    let forge = |kid: Option<&str>| {
        let mut h = jsonwebtoken::Header::new(Algorithm::HS256);
        h.kid = kid.map(str::to_string);
        sign_with(h, &good_claims(), &hs_encoding_key(&pem))
    };
    // Only the RSA key is configured: no key is pinned to HS256.
    let v = verifier(vec![pem_key(Some("rs256"), Algorithm::RS256, RSA_PUB)]);
    assert_eq!(
        reason_of(v.verify(&forge(Some("rs256")), NOW)),
        ALG_NOT_ALLOWED
    );
    assert_eq!(reason_of(v.verify(&forge(None), NOW)), ALG_NOT_ALLOWED);
    // With an HS256 key configured too, the forged token fails its signature.
    let v = verifier(all_keys());
    assert_eq!(
        reason_of(v.verify(&forge(Some("rs256")), NOW)),
        ALG_NOT_ALLOWED
    );
    assert_eq!(reason_of(v.verify(&forge(None), NOW)), BAD_SIGNATURE);
}

#[test]
fn kid_must_match_a_configured_key_and_its_algorithm() {
    let v = verifier(all_keys());
    let t = sign(Algorithm::HS256, Some("nope"), &good_claims());
    assert_eq!(reason_of(v.verify(&t, NOW)), UNKNOWN_KID);
    // kid of an RS256 key on an HS256 token.
    let t = sign(Algorithm::HS256, Some("rs256"), &good_claims());
    assert_eq!(reason_of(v.verify(&t, NOW)), ALG_NOT_ALLOWED);
    // kid of the RS256 key on an RS384 token signed by the same RSA key.
    let t = sign(Algorithm::RS384, Some("rs256"), &good_claims());
    assert_eq!(reason_of(v.verify(&t, NOW)), ALG_NOT_ALLOWED);
    // Non-string kid.
    let good = sign(Algorithm::HS256, Some("h256"), &good_claims());
    let rest = good.split_once('.').unwrap().1;
    let h = b64url(json!({"alg": "HS256", "kid": 7}).to_string().as_bytes());
    assert_eq!(reason_of(v.verify(&format!("{h}.{rest}"), NOW)), MALFORMED);
}

#[test]
fn kid_jku_x5u_never_fetch_or_read() {
    let v = verifier(all_keys());
    // A path-like kid is only compared with configured kids.
    let t = sign(
        Algorithm::HS256,
        Some("../../../../etc/passwd"),
        &good_claims(),
    );
    assert_eq!(reason_of(v.verify(&t, NOW)), UNKNOWN_KID);
    let t = sign(
        Algorithm::HS256,
        Some("tests/fixtures/keys/hs.secret"),
        &good_claims(),
    );
    assert_eq!(reason_of(v.verify(&t, NOW)), UNKNOWN_KID);
    // jku/x5u pointing at an unroutable address: a good token verifies immediately with the
    // configured key (no fetch), a forged one fails on the configured key.
    let mut h = jsonwebtoken::Header::new(Algorithm::RS256);
    h.kid = Some("rs256".into());
    h.jku = Some("http://192.0.2.1:9/jwks.json".into());
    h.x5u = Some("http://192.0.2.1:9/cert.pem".into());
    let rsa = jsonwebtoken::EncodingKey::from_rsa_pem(&read_fixture(RSA_KEY)).unwrap();
    let started = std::time::Instant::now();
    assert!(v
        .verify(&sign_with(h.clone(), &good_claims(), &rsa), NOW)
        .is_ok());
    let ec = jsonwebtoken::EncodingKey::from_ec_pem(&read_fixture(EC256_KEY)).unwrap();
    h.alg = Algorithm::ES256;
    h.kid = Some("es256".into());
    let other_ec = {
        // A token signed by a P-256 key that is not configured.
        let mut forged = sign_with(h.clone(), &good_claims(), &ec);
        forged.truncate(forged.rfind('.').unwrap());
        let sig = b64url(&[7u8; 64]);
        format!("{forged}.{sig}")
    };
    assert_eq!(reason_of(v.verify(&other_ec, NOW)), BAD_SIGNATURE);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
}

#[test]
fn bad_signature_is_rejected() {
    let v = verifier(all_keys());
    for (alg, kid) in ALL_ALGS {
        let t = sign(alg, Some(kid), &good_claims());
        // Change the payload: the signature no longer matches.
        let mut c = good_claims();
        c["sub"] = json!("evil");
        let other = sign(alg, Some(kid), &c);
        let forged = format!(
            "{}.{}.{}",
            t.split('.').next().unwrap(),
            other.split('.').nth(1).unwrap(),
            t.rsplit('.').next().unwrap()
        );
        assert_eq!(reason_of(v.verify(&forged, NOW)), BAD_SIGNATURE, "{alg:?}");
    }
    // HS256 signed with a different secret.
    let t = sign_with(
        jsonwebtoken::Header::new(Algorithm::HS256),
        &good_claims(),
        &hs_encoding_key(b"not-the-configured-secret"),
    );
    assert_eq!(reason_of(v.verify(&t, NOW)), BAD_SIGNATURE);
    // Signature stripped.
    let t = sign(Algorithm::HS256, Some("h256"), &good_claims());
    let stripped = format!("{}.", &t[..t.rfind('.').unwrap()]);
    assert_eq!(reason_of(v.verify(&stripped, NOW)), BAD_SIGNATURE);
}

#[test]
fn expiry_boundaries_leeway_zero() {
    let mut s = jwt_settings(vec![hs_key(None, Algorithm::HS256)]);
    s.leeway_s = 0;
    let v = JwtVerifier::build(&s).unwrap();
    let at = |exp: u64| {
        let mut c = good_claims();
        c["exp"] = json!(exp);
        v.verify(&sign(Algorithm::HS256, None, &c), NOW)
    };
    assert_eq!(reason_of(at(NOW)), EXPIRED, "exp == now must be rejected");
    assert_eq!(reason_of(at(NOW - 1)), EXPIRED);
    assert!(at(NOW + 1).is_ok());
    // Fractional NumericDate.
    let mut c = good_claims();
    c["exp"] = json!(NOW as f64 + 0.5);
    assert!(v.verify(&sign(Algorithm::HS256, None, &c), NOW).is_ok());
    c["exp"] = json!(NOW as f64 - 0.5);
    assert_eq!(
        reason_of(v.verify(&sign(Algorithm::HS256, None, &c), NOW)),
        EXPIRED
    );
}

#[test]
fn expiry_with_leeway() {
    let mut s = jwt_settings(vec![hs_key(None, Algorithm::HS256)]);
    s.leeway_s = 30;
    let v = JwtVerifier::build(&s).unwrap();
    let at = |exp: u64| {
        let mut c = good_claims();
        c["exp"] = json!(exp);
        v.verify(&sign(Algorithm::HS256, None, &c), NOW)
    };
    assert!(at(NOW - 29).is_ok());
    assert_eq!(reason_of(at(NOW - 30)), EXPIRED);
    assert_eq!(reason_of(at(NOW - 3600)), EXPIRED);
}

#[test]
fn future_nbf_is_rejected() {
    let mut s = jwt_settings(vec![hs_key(None, Algorithm::HS256)]);
    s.leeway_s = 10;
    let v = JwtVerifier::build(&s).unwrap();
    let at = |nbf: Value| {
        let mut c = good_claims();
        c["nbf"] = nbf;
        v.verify(&sign(Algorithm::HS256, None, &c), NOW)
    };
    assert!(at(json!(NOW)).is_ok());
    assert!(at(json!(NOW + 10)).is_ok(), "nbf == now + leeway is valid");
    assert_eq!(reason_of(at(json!(NOW + 11))), NOT_YET_VALID);
    assert_eq!(reason_of(at(json!(NOW + 86400))), NOT_YET_VALID);
    assert_eq!(reason_of(at(json!("soon"))), "claim \"nbf\" malformed");
    assert!(at(Value::Null).is_ok());
}

#[test]
fn missing_or_malformed_exp_is_rejected() {
    let v = verifier(vec![hs_key(None, Algorithm::HS256)]);
    for exp in [
        None,
        Some(json!("tomorrow")),
        Some(json!(-5)),
        Some(Value::Null),
    ] {
        let mut c = good_claims();
        match &exp {
            None => {
                c.as_object_mut().unwrap().remove("exp");
            }
            Some(e) => c["exp"] = e.clone(),
        }
        let r = v.verify(&sign(Algorithm::HS256, None, &c), NOW);
        assert_eq!(reason_of(r), MISSING_EXP, "{exp:?}");
    }
}

#[test]
fn issuer_checked_when_configured() {
    let mut s = jwt_settings(vec![hs_key(None, Algorithm::HS256)]);
    s.issuer = Some("https://idp.example.com".into());
    let v = JwtVerifier::build(&s).unwrap();
    let with = |iss: Option<Value>| {
        let mut c = good_claims();
        match iss {
            Some(i) => c["iss"] = i,
            None => {
                c.as_object_mut().unwrap().remove("iss");
            }
        }
        v.verify(&sign(Algorithm::HS256, None, &c), NOW)
    };
    assert!(with(Some(json!("https://idp.example.com"))).is_ok());
    assert_eq!(
        reason_of(with(Some(json!("https://evil.example.com")))),
        "issuer not accepted"
    );
    assert_eq!(reason_of(with(None)), "missing required claim \"iss\"");
    // Not configured: any issuer is fine.
    assert_unchecked_when_not_configured("iss", json!("whoever"));
}

/// With no `issuer`/`audience` configured, a token carrying `claim: value` verifies.
fn assert_unchecked_when_not_configured(claim: &str, value: Value) {
    let v = verifier(vec![hs_key(None, Algorithm::HS256)]);
    let mut c = good_claims();
    c[claim] = value;
    assert!(v.verify(&sign(Algorithm::HS256, None, &c), NOW).is_ok());
}

#[test]
fn audience_checked_when_configured() {
    let mut s = jwt_settings(vec![hs_key(None, Algorithm::HS256)]);
    s.audience = Some("api.example.com".into());
    let v = JwtVerifier::build(&s).unwrap();
    let with = |aud: Option<Value>| {
        let mut c = good_claims();
        if let Some(a) = aud {
            c["aud"] = a;
        }
        v.verify(&sign(Algorithm::HS256, None, &c), NOW)
    };
    assert!(with(Some(json!("api.example.com"))).is_ok());
    assert!(with(Some(json!(["other", "api.example.com"]))).is_ok());
    assert_eq!(
        reason_of(with(Some(json!("other.example.com")))),
        "audience not accepted"
    );
    assert_eq!(
        reason_of(with(Some(json!(["a", "b"])))),
        "audience not accepted"
    );
    assert_eq!(reason_of(with(None)), "missing required claim \"aud\"");
    // Not configured: `aud` in the token is not checked.
    assert_unchecked_when_not_configured("aud", json!("anything"));
}

#[test]
fn malformed_tokens_are_rejected() {
    let v = verifier(all_keys());
    let good = sign(Algorithm::HS256, Some("h256"), &good_claims());
    let mut parts = good.split('.');
    let (h, p, s) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let cases = [
        String::new(),
        "abc".to_string(),
        "a.b".to_string(),
        format!("{h}.{p}"),
        format!("{h}.{p}.{s}.x"),
        format!("{h}.{p}.{s}.."),
        format!("!!!.{p}.{s}"),
        format!("{h}=.{p}.{s}"),
        format!("{}.{p}.{s}", b64url(b"not json")),
        format!("{}.{p}.{s}", b64url(b"[\"HS256\"]")),
        format!("{h}.%%%.{s}"),
        format!("{h}.{}.{s}", b64url(b"{\"sub\":")),
        format!("{h}.{p}.***"),
        "\u{1F600}.\u{1F600}.\u{1F600}".to_string(),
    ];
    for t in &cases {
        let r = reason_of(v.verify(t, NOW));
        assert!(
            [MALFORMED, BAD_SIGNATURE].contains(&r.as_str()),
            "{t:?} gave {r:?}"
        );
    }
    // Payload not valid base64/JSON but correctly signed: malformed, not a panic.
    for payload in [b64url(b"{\"sub\":"), b64url(b"[1,2]"), "%%%".to_string()] {
        let input = format!("{h}.{payload}");
        let key = hs_encoding_key(HS_SECRET);
        let sig = jsonwebtoken::crypto::sign(input.as_bytes(), &key, Algorithm::HS256).unwrap();
        let t = format!("{input}.{sig}");
        assert_eq!(reason_of(v.verify(&t, NOW)), MALFORMED, "{payload}");
    }
}

#[test]
fn oversize_token_is_rejected_before_parsing() {
    let v = verifier(all_keys());
    let big = "A".repeat(MAX_TOKEN_BYTES + 1);
    assert_eq!(reason_of(v.verify(&big, NOW)), TOO_LARGE);
    let exactly = "A".repeat(MAX_TOKEN_BYTES);
    assert_eq!(reason_of(v.verify(&exactly, NOW)), MALFORMED);
    // A genuinely signed but huge token is rejected by size too.
    let mut c = good_claims();
    c["pad"] = json!("x".repeat(MAX_TOKEN_BYTES));
    assert_eq!(
        reason_of(v.verify(&sign(Algorithm::HS256, None, &c), NOW)),
        TOO_LARGE
    );
}

#[test]
fn reasons_never_contain_the_token() {
    let v = verifier(all_keys());
    let mut c = good_claims();
    c["exp"] = json!(NOW - 1000);
    let mut tokens = vec![
        sign(Algorithm::HS256, Some("h256"), &c),
        sign(Algorithm::HS256, Some("zzz-secret-kid"), &good_claims()),
        "A".repeat(MAX_TOKEN_BYTES + 1),
    ];
    let t = sign(Algorithm::RS256, Some("rs256"), &good_claims());
    tokens.push(format!("{}x", t));
    for t in tokens {
        let r = reason_of(v.verify(&t, NOW));
        for part in t.split('.').filter(|p| p.len() >= 4) {
            assert!(!r.contains(part), "{r}");
        }
        assert!(!r.contains("zzz-secret-kid"));
        assert!(r.len() < 64, "{r}");
    }
}

#[test]
fn tenant_claim_then_sub() {
    let mut s = jwt_settings(vec![hs_key(None, Algorithm::HS256)]);
    s.tenant_claim = "tenant".into();
    let v = JwtVerifier::build(&s).unwrap();
    let mut c = good_claims();
    c["tenant"] = json!("bigco");
    assert_eq!(
        v.verify(&sign(Algorithm::HS256, None, &c), NOW)
            .unwrap()
            .tenant,
        "bigco"
    );
    // Absent (or null) tenant claim: falls back to sub.
    let c = good_claims();
    assert_eq!(
        v.verify(&sign(Algorithm::HS256, None, &c), NOW)
            .unwrap()
            .tenant,
        "acme"
    );
    let mut c = good_claims();
    c["tenant"] = Value::Null;
    assert_eq!(
        v.verify(&sign(Algorithm::HS256, None, &c), NOW)
            .unwrap()
            .tenant,
        "acme"
    );
    // Neither: no tenant.
    let mut c = good_claims();
    c.as_object_mut().unwrap().remove("sub");
    assert_eq!(
        reason_of(v.verify(&sign(Algorithm::HS256, None, &c), NOW)),
        NO_TENANT
    );
    // Empty tenant counts as none.
    c["tenant"] = json!("");
    assert_eq!(
        reason_of(v.verify(&sign(Algorithm::HS256, None, &c), NOW)),
        NO_TENANT
    );
    // Non-string tenant claim is not silently replaced by sub.
    let mut c = good_claims();
    c["tenant"] = json!(42);
    assert_eq!(
        reason_of(v.verify(&sign(Algorithm::HS256, None, &c), NOW)),
        "tenant claim is not a string"
    );
    // Control characters (would corrupt the forwarded header) and oversize ids.
    let mut c = good_claims();
    c["tenant"] = json!("a\r\nx-injected: 1");
    assert_eq!(
        reason_of(v.verify(&sign(Algorithm::HS256, None, &c), NOW)),
        "tenant claim invalid"
    );
    c["tenant"] = json!("t".repeat(MAX_TENANT_BYTES + 1));
    assert_eq!(
        reason_of(v.verify(&sign(Algorithm::HS256, None, &c), NOW)),
        "tenant claim invalid"
    );
    c["tenant"] = json!("t".repeat(MAX_TENANT_BYTES));
    assert!(v.verify(&sign(Algorithm::HS256, None, &c), NOW).is_ok());
    // The anonymous namespace is reserved.
    c["tenant"] = json!("ip:127.0.0.1");
    assert_eq!(
        reason_of(v.verify(&sign(Algorithm::HS256, None, &c), NOW)),
        "tenant ids starting with \"ip:\" are reserved"
    );
}

#[test]
fn default_tenant_claim_is_sub() {
    let v = verifier(vec![hs_key(None, Algorithm::HS256)]);
    let mut c = good_claims();
    c["tenant"] = json!("ignored");
    assert_eq!(
        v.verify(&sign(Algorithm::HS256, None, &c), NOW)
            .unwrap()
            .tenant,
        "acme"
    );
}

#[test]
fn tier_claim_only_when_configured() {
    let mut c = good_claims();
    c["tier"] = json!("pro");
    let v = verifier(vec![hs_key(None, Algorithm::HS256)]);
    assert_eq!(
        v.verify(&sign(Algorithm::HS256, None, &c), NOW)
            .unwrap()
            .tier,
        None
    );
    let mut s = jwt_settings(vec![hs_key(None, Algorithm::HS256)]);
    s.tier_claim = Some("tier".into());
    let v = JwtVerifier::build(&s).unwrap();
    assert_eq!(
        v.verify(&sign(Algorithm::HS256, None, &c), NOW)
            .unwrap()
            .tier
            .as_deref(),
        Some("pro")
    );
    assert_eq!(
        v.verify(&sign(Algorithm::HS256, None, &good_claims()), NOW)
            .unwrap()
            .tier,
        None
    );
    c["tier"] = json!(["pro"]);
    assert_eq!(
        reason_of(v.verify(&sign(Algorithm::HS256, None, &c), NOW)),
        "tier claim is not a string"
    );
}

#[test]
fn secret_file_trims_one_trailing_newline() {
    assert_eq!(trim_one_newline(b"abc\n"), b"abc");
    assert_eq!(trim_one_newline(b"abc\r\n"), b"abc");
    assert_eq!(trim_one_newline(b"abc\n\n"), b"abc\n");
    assert_eq!(trim_one_newline(b"abc"), b"abc");
    // The fixture ends with "\n"; tokens signed with the trimmed secret verify.
    assert!(read_fixture(HS_SECRET_FILE).ends_with(b"\n"));
    let v = verifier(vec![hs_key(None, Algorithm::HS256)]);
    assert!(v
        .verify(&sign(Algorithm::HS256, None, &good_claims()), NOW)
        .is_ok());
    // A token signed with the untrimmed file content does not.
    let t = sign_with(
        jsonwebtoken::Header::new(Algorithm::HS256),
        &good_claims(),
        &hs_encoding_key(&read_fixture(HS_SECRET_FILE)),
    );
    assert_eq!(reason_of(v.verify(&t, NOW)), BAD_SIGNATURE);
}

#[test]
fn secret_from_env() {
    std::env::set_var(
        "TOLLGATE_TEST_JWT_SECRET_ENV",
        std::str::from_utf8(HS_SECRET).unwrap(),
    );
    let v = verifier(vec![JwtKeySettings {
        kid: None,
        algorithm: Algorithm::HS256,
        source: KeySource::SecretEnv("TOLLGATE_TEST_JWT_SECRET_ENV".into()),
    }]);
    assert!(v
        .verify(&sign(Algorithm::HS256, None, &good_claims()), NOW)
        .is_ok());
}

#[test]
fn build_errors_name_the_field() {
    std::env::set_var("TOLLGATE_TEST_JWT_EMPTY", "");
    std::env::remove_var("TOLLGATE_TEST_JWT_UNSET");
    let s = jwt_settings(vec![
        hs_key(None, Algorithm::HS256),
        pem_key(None, Algorithm::RS256, "does-not-exist.pem"),
        JwtKeySettings {
            kid: None,
            algorithm: Algorithm::HS256,
            source: KeySource::SecretEnv("TOLLGATE_TEST_JWT_UNSET".into()),
        },
        JwtKeySettings {
            kid: None,
            algorithm: Algorithm::HS384,
            source: KeySource::SecretEnv("TOLLGATE_TEST_JWT_EMPTY".into()),
        },
        pem_key(None, Algorithm::RS256, RSA_KEY),
        pem_key(None, Algorithm::ES256, EC384_PUB),
        pem_key(None, Algorithm::ES384, EC256_PUB),
        pem_key(None, Algorithm::RS256, EC256_PUB),
        pem_key(None, Algorithm::EdDSA, RSA_PUB),
        JwtKeySettings {
            kid: None,
            algorithm: Algorithm::HS256,
            source: KeySource::SecretFile(fixture("missing.secret")),
        },
        JwtKeySettings {
            kid: None,
            algorithm: Algorithm::RS256,
            source: KeySource::SecretEnv("X".into()),
        },
    ]);
    let errs = JwtVerifier::build(&s).unwrap_err();
    let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    let expect = [
        (
            "identity.jwt.keys[1].public_key_file",
            "does-not-exist.pem\": ",
        ),
        (
            "identity.jwt.keys[2].secret_env",
            "\"TOLLGATE_TEST_JWT_UNSET\" is not set",
        ),
        ("identity.jwt.keys[3].secret_env", "is empty"),
        ("identity.jwt.keys[4].public_key_file", "private key"),
        (
            "identity.jwt.keys[5].public_key_file",
            "ES256 needs a P-256 key",
        ),
        (
            "identity.jwt.keys[6].public_key_file",
            "ES384 needs a P-384 key",
        ),
        (
            "identity.jwt.keys[7].public_key_file",
            "is not an RSA public key",
        ),
        (
            "identity.jwt.keys[8].public_key_file",
            "is not an Ed25519 public key",
        ),
        ("identity.jwt.keys[9].secret_file", "cannot read"),
        ("identity.jwt.keys[10]", "needs public_key_file"),
    ];
    assert_eq!(errs.len(), expect.len(), "{text:#?}");
    for (e, (path, why)) in errs.iter().zip(expect) {
        assert_eq!(e.path, path, "{text:#?}");
        assert!(e.reason.contains(why), "{e}");
    }
}

#[test]
fn base64url_decoder() {
    assert_eq!(b64url_decode("").unwrap(), b"");
    assert_eq!(b64url_decode("YQ").unwrap(), b"a");
    assert_eq!(b64url_decode("YWI").unwrap(), b"ab");
    assert_eq!(b64url_decode("YWJj").unwrap(), b"abc");
    assert_eq!(b64url_decode("_-8").unwrap(), [0xff, 0xef]);
    assert!(b64url_decode("YWJjZ").is_none());
    assert!(b64url_decode("YQ==").is_none());
    assert!(b64url_decode("Y+/=").is_none());
    for n in 0..40u8 {
        let data: Vec<u8> = (0..n).map(|i| i.wrapping_mul(37)).collect();
        assert_eq!(b64url_decode(&b64url(&data)).unwrap(), data);
    }
}
