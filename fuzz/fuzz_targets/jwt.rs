//! JWT verification on arbitrary tokens: an `Err` (a 401), never a panic. Half of the inputs are
//! split into a header and claims JSON that are then signed with the configured key, so the claims
//! parsing behind the signature check is reached too.
#![no_main]
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use tollgate::config::{JwtKeySettings, JwtSettings, KeySource};
use tollgate::identity::jwt::JwtVerifier;

const SECRET_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/keys/hs.secret"
);

fn verifier() -> &'static JwtVerifier {
    static V: OnceLock<JwtVerifier> = OnceLock::new();
    V.get_or_init(|| {
        let settings = JwtSettings {
            issuer: Some("https://idp.example".into()),
            audience: Some("api.example".into()),
            leeway_s: 30,
            tenant_claim: "tenant".into(),
            tier_claim: Some("tier".into()),
            keys: vec![JwtKeySettings {
                kid: Some("h1".into()),
                algorithm: jsonwebtoken::Algorithm::HS256,
                source: KeySource::SecretFile(SECRET_FILE.into()),
            }],
            issuers: Vec::new(),
        };
        JwtVerifier::build(&settings).expect("fuzz verifier builds")
    })
}

/// `header.claims.signature` with arbitrary header and claims bytes, HS256-signed with the
/// verifier's key (jsonwebtoken's own signer, so even invalid JSON gets a valid signature).
fn signed(header: &[u8], claims: &[u8]) -> String {
    let secret = std::fs::read(SECRET_FILE).unwrap();
    let secret = secret.strip_suffix(b"\n").unwrap_or(&secret);
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(claims)
    );
    let key = jsonwebtoken::EncodingKey::from_secret(secret).unwrap();
    let sig =
        jsonwebtoken::crypto::sign(input.as_bytes(), &key, jsonwebtoken::Algorithm::HS256).unwrap();
    format!("{input}.{sig}")
}

fuzz_target!(|data: &[u8]| {
    let v = verifier();
    let now = 1_800_000_000;
    match data.split_first() {
        Some((0, rest)) => {
            let (header, claims) = match rest.iter().position(|&b| b == 0) {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, &b""[..]),
            };
            let _ = v.verify(&signed(header, claims), now);
        }
        _ => {
            let _ = v.verify(&String::from_utf8_lossy(data), now);
        }
    }
});
