//! TLS test helpers: a private CA made at test time (rcgen), certificates it issues written to a
//! temporary directory, HTTPS/h2 clients that trust only that CA, and raw HTTP/2 connections
//! (the `h2` crate over tokio-rustls or plain TCP) for multiplexing and stream resets.
//!
//! Include it next to `mod common;` with `#[path = "common/tls.rs"] mod tls_common;`.

#![allow(dead_code)]

use bytes::Bytes;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;
use tokio::net::TcpStream;

/// A self-signed server certificate for `host` (its own trust anchor when pinned), written to
/// `dir`: `CA:TRUE` when `ca` (what `openssl req -x509` makes by default), else `CA:FALSE`.
pub fn self_signed_server(dir: &Path, host: &str, ca: bool) -> Issued {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(vec![host.to_string()]).expect("params");
    params.distinguished_name.push(DnType::CommonName, host);
    params.is_ca = if ca {
        IsCa::Ca(BasicConstraints::Unconstrained)
    } else {
        IsCa::ExplicitNoCa
    };
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.self_signed(&key).expect("self-signed");
    let stem = if ca { "self-ca" } else { "self-leaf" };
    let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
    Issued {
        cert_file: write(dir, &format!("{stem}.crt"), &cert_pem),
        key_file: write(dir, &format!("{stem}.key"), &key_pem),
        cert_pem,
        key_pem,
    }
}

/// A certificate and key written as PEM files.
#[derive(Clone, Debug)]
pub struct Issued {
    pub cert_file: String,
    pub key_file: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl Issued {
    /// `cert_file: "...", key_file: "..."` for a YAML mapping.
    pub fn yaml_pair(&self) -> String {
        format!(
            "cert_file: \"{}\", key_file: \"{}\"",
            self.cert_file, self.key_file
        )
    }

    /// reqwest client identity (certificate + key PEM).
    pub fn identity(&self) -> reqwest::Identity {
        reqwest::Identity::from_pem(format!("{}{}", self.cert_pem, self.key_pem).as_bytes())
            .expect("client identity PEM")
    }
}

/// What a leaf certificate is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    Server,
    Client,
}

/// A private certificate authority living in its own temporary directory.
pub struct Ca {
    pub dir: TempDir,
    key: KeyPair,
    cert: rcgen::Certificate,
    /// PEM of the CA certificate, also in [`Ca::cert_file`].
    pub cert_pem: String,
    pub cert_file: String,
    serial: std::sync::atomic::AtomicU64,
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path.to_string_lossy().into_owned()
}

impl Ca {
    /// A new self-signed CA named `name`.
    pub fn new(name: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("tollgate-tls-")
            .tempdir()
            .expect("temp dir");
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("self-signed CA");
        let cert_pem = cert.pem();
        let cert_file = write(dir.path(), &format!("{name}-ca.crt"), &cert_pem);
        Ca {
            dir,
            key,
            cert,
            cert_pem,
            cert_file,
            serial: std::sync::atomic::AtomicU64::new(1),
        }
    }

    /// A leaf certificate for `names` (DNS names or IP addresses as SANs) with subject CN `cn`,
    /// valid from a day ago for `valid_days` days (negative: already expired).
    pub fn issue(&self, cn: &str, names: &[&str], usage: Usage, valid_days: i64) -> Issued {
        let key = KeyPair::generate().expect("leaf key");
        let sans: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(sans).expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.is_ca = IsCa::NoCa;
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        let now = time_now();
        params.not_before = now - rcgen_days(if valid_days < 0 { -valid_days + 2 } else { 1 });
        params.not_after = now + rcgen_days(valid_days);
        let n = self
            .serial
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        params.serial_number = Some(rcgen::SerialNumber::from(n));
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("sign leaf");
        let stem = format!("{}-{n}", cn.replace(['*', '/', ' '], "_"));
        let cert_pem = cert.pem();
        let key_pem = key.serialize_pem();
        Issued {
            cert_file: write(self.dir.path(), &format!("{stem}.crt"), &cert_pem),
            key_file: write(self.dir.path(), &format!("{stem}.key"), &key_pem),
            cert_pem,
            key_pem,
        }
    }

    /// A server certificate valid for a year.
    pub fn server(&self, cn: &str, names: &[&str]) -> Issued {
        self.issue(cn, names, Usage::Server, 365)
    }

    /// reqwest root certificate for this CA.
    pub fn root(&self) -> reqwest::Certificate {
        reqwest::Certificate::from_pem(self.cert_pem.as_bytes()).expect("CA PEM")
    }

    /// A file in this CA's directory (for broken files in reload tests).
    pub fn write_file(&self, name: &str, text: &str) -> String {
        write(self.dir.path(), name, text)
    }
}

fn time_now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

fn rcgen_days(days: i64) -> time::Duration {
    time::Duration::days(days)
}

/// An HTTPS client that trusts only `ca`, resolves `host` to `addr`, and negotiates h2 by ALPN
/// when `h2` (else HTTP/1.1 only).
pub fn https_client(ca: &Ca, host: &str, addr: &str, h2: bool) -> reqwest::ClientBuilder {
    let addr: SocketAddr = addr.parse().expect("ip:port");
    let b = reqwest::Client::builder()
        .no_proxy()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(ca.root())
        .resolve(host, addr)
        .tls_info(true)
        .timeout(Duration::from_secs(20))
        .connect_timeout(Duration::from_secs(5));
    if h2 {
        b
    } else {
        b.http1_only()
    }
}

/// `https://<host>:<port of addr><path>`.
pub fn https_url(host: &str, addr: &str, path: &str) -> String {
    let port = addr.rsplit(':').next().expect("port");
    format!("https://{host}:{port}{path}")
}

/// The subject CN of the certificate the server presented (needs `tls_info(true)`).
pub fn peer_cn(resp: &reqwest::Response) -> Option<String> {
    let info = resp.extensions().get::<reqwest::tls::TlsInfo>()?;
    let der = info.peer_certificate()?;
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?;
    Some(cn.to_string())
}

/// A raw HTTP/2 connection: the request sender of the `h2` crate.
pub type H2 = h2::client::SendRequest<Bytes>;

/// HTTP/2 over TLS (ALPN `h2`) to `addr`, trusting `ca`, with SNI `host`.
pub async fn h2_tls(ca: &Ca, host: &str, addr: &str) -> H2 {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut ca.cert_pem.as_bytes()) {
        roots.add(c.expect("CA PEM")).expect("CA root");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = rustls::pki_types::ServerName::try_from(host.to_string()).expect("server name");
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .expect("TLS handshake");
    assert_eq!(
        tls.get_ref().1.alpn_protocol(),
        Some(&b"h2"[..]),
        "the gateway must select h2 by ALPN"
    );
    h2_handshake(tls).await
}

/// Prior-knowledge HTTP/2 over plain TCP (h2c) to `addr`.
pub async fn h2c(addr: &str) -> H2 {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    h2_handshake(tcp).await
}

async fn h2_handshake<T>(io: T) -> H2
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = h2::client::handshake(io).await.expect("h2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// A GET on an h2 connection (authority `authority`, extra headers); returns the response
/// future without awaiting it, so many can be in flight on one connection.
pub fn h2_get(
    h2: &mut H2,
    scheme: &str,
    authority: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> h2::client::ResponseFuture {
    let mut req = http::Request::builder()
        .method("GET")
        .uri(format!("{scheme}://{authority}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let (resp, _) = h2
        .send_request(req.body(()).expect("request"), true)
        .expect("send h2 request");
    resp
}

/// Awaits an h2 response and reads its whole body: (status, body text).
pub async fn h2_read(resp: h2::client::ResponseFuture) -> (u16, String) {
    let resp = resp.await.expect("h2 response");
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut out = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("h2 body");
        let _ = body.flow_control().release_capacity(chunk.len());
        out.extend_from_slice(&chunk);
    }
    (status, String::from_utf8_lossy(&out).into_owned())
}
