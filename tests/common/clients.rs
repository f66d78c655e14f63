//! HTTP clients: a minimal blocking HTTP/1.1 client for control endpoints, the reqwest clients for
//! traffic under test, and one-shot raw requests (exact header lines, arbitrary bytes).

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// One HTTP answer from [`http_request`].
#[derive(Debug, Clone)]
pub struct HttpReply {
    pub status: u16,
    /// Lowercase names, in order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpReply {
    /// First header value by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `method path` with `Connection: close` and no body to `addr` ("127.0.0.1:P") and reads
/// the answer (content-length, chunked or read-to-close). `timeout` bounds connect and each read.
pub fn http_request(
    addr: &str,
    method: &str,
    path: &str,
    timeout: Duration,
) -> std::io::Result<HttpReply> {
    http_request_with_headers(addr, method, path, &[], timeout)
}

/// [`http_request`] GET with a 2 s timeout.
pub fn http_get(addr: &str, path: &str) -> std::io::Result<HttpReply> {
    http_request(addr, "GET", path, Duration::from_secs(2))
}

pub(crate) fn parse_http_reply(raw: &[u8]) -> std::io::Result<HttpReply> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("bad status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        body = dechunk(&body).ok_or_else(|| bad("bad chunked body"))?;
    } else if let Some(len) = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
    {
        body.truncate(len);
    }
    Ok(HttpReply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

// ---------------------------------------------------------------------------------------------
// reqwest clients and response helpers
// ---------------------------------------------------------------------------------------------

/// The builder every test client starts from: no proxy from the environment, 30 s timeout.
pub fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .connect_timeout(Duration::from_secs(5))
}

/// A client for traffic under test (connects from 127.0.0.1).
pub fn client() -> reqwest::Client {
    client_builder().build().expect("build reqwest client")
}

/// A client whose connections come from `ip` (e.g. 127.0.0.2: all of 127/8 is loopback on
/// Linux), so the gateway sees a different client address.
pub fn client_from(ip: IpAddr) -> reqwest::Client {
    client_builder()
        .local_address(ip)
        .build()
        .expect("build reqwest client")
}

/// A client for "no hang" assertions: every request must complete within 10 s.
pub fn http() -> reqwest::Client {
    client_builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("build reqwest client")
}

/// [`http`] whose connections come from `ip_text` (any 127/8 address).
pub fn http_from(ip_text: &str) -> reqwest::Client {
    client_builder()
        .timeout(Duration::from_secs(10))
        .local_address(ip(ip_text))
        .build()
        .expect("build reqwest client")
}

/// One complete answer: status, headers and body text.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Reply {
    /// Reads the whole response.
    pub async fn read(resp: reqwest::Response) -> Result<Reply, reqwest::Error> {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.text().await?;
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// A header's value as text (`None` when absent or not visible ASCII).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `r=` of the `RateLimit` field; panics when absent.
    pub fn remaining(&self) -> u64 {
        let field = self
            .header("ratelimit")
            .unwrap_or_else(|| panic!("no RateLimit header: {self:?}"));
        field
            .split(';')
            .find_map(|p| p.strip_prefix("r="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("RateLimit without r=: {field}"))
    }
}

/// GET `url`, with `X-API-Key: api_key` when given, and read the whole answer.
pub async fn try_get_with_key(
    http: &reqwest::Client,
    url: &str,
    api_key: Option<&str>,
) -> Result<Reply, reqwest::Error> {
    let mut req = http.get(url);
    if let Some(k) = api_key {
        req = req.header("x-api-key", k);
    }
    Reply::read(req.send().await?).await
}

/// `"127.0.0.2"` → `IpAddr`.
pub fn ip(text: &str) -> IpAddr {
    text.parse().unwrap_or_else(|_| panic!("not an IP: {text}"))
}

// ---------------------------------------------------------------------------------------------
// Raw requests with exact header lines (appended for tests/identity.rs)
// ---------------------------------------------------------------------------------------------

/// A blocking connection to `addr` ("127.0.0.1:P"); `timeout` bounds the connect and each read
/// and write.
fn connect(addr: &str, timeout: Duration) -> std::io::Result<TcpStream> {
    let sock: SocketAddr = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("cannot resolve {addr}")))?;
    let stream = TcpStream::connect_timeout(&sock, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    Ok(stream)
}

/// Like [`http_request`] but writes `headers` byte for byte as given (name case, order and
/// repetitions preserved), e.g. to send `X-API-KEY` in upper case or a header twice.
pub fn http_request_with_headers(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> std::io::Result<HttpReply> {
    let mut stream = connect(addr, timeout)?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("Content-Length: 0\r\n\r\n");
    stream.write_all(head.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    parse_http_reply(&raw)
}

/// `GET path` with raw `headers` ([`http_request_with_headers`], 10 s timeout); asserts 200 and
/// returns the reply with the echo backend's JSON of what it received.
pub fn echo_get(
    addr: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (HttpReply, serde_json::Value) {
    let reply = http_request_with_headers(addr, "GET", path, headers, Duration::from_secs(10))
        .expect("request");
    assert_eq!(reply.status, 200, "{reply:?}");
    let echoed = serde_json::from_str(&reply.body).expect("echo JSON");
    (reply, echoed)
}

// ---------------------------------------------------------------------------------------------
// Arbitrary bytes on one connection (appended for tests/http_hardening.rs)
// ---------------------------------------------------------------------------------------------

/// Writes `bytes` exactly as given on a new connection to `addr`, then reads until the server
/// closes (or `timeout` passes between reads) and parses the answer. For malformed requests.
pub fn raw_exchange(addr: &str, bytes: &[u8], timeout: Duration) -> std::io::Result<HttpReply> {
    let mut stream = connect(addr, timeout)?;
    // The server may answer and close before every byte is written: keep what it said.
    let _ = stream.write_all(bytes);
    let mut raw = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
            Err(_) if !raw.is_empty() => break,
            Err(e) => return Err(e),
        }
    }
    parse_http_reply(&raw)
}
