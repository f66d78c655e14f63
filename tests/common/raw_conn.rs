//! Raw async HTTP/1.1 connections (tokio): keep-alive floods, resets, mid-response aborts.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::clients::HttpReply;

/// One HTTP/1.1 connection driven by hand: requests are written as given and answers read one at
/// a time (Content-Length or chunked bodies), so a test controls exactly when the connection is
/// reused, half-read or reset.
pub struct RawConn {
    stream: tokio::net::TcpStream,
    buf: Vec<u8>,
    host: String,
}

impl RawConn {
    /// Connects to `addr` ("127.0.0.1:P"), from the local address `from` when given (any port).
    pub async fn connect(addr: &str, from: Option<IpAddr>) -> std::io::Result<Self> {
        let target: SocketAddr = addr
            .parse()
            .map_err(|e| std::io::Error::other(format!("bad address {addr}: {e}")))?;
        let socket = if target.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        if let Some(ip) = from {
            socket.bind(SocketAddr::new(ip, 0))?;
        }
        let stream = tokio::time::timeout(Duration::from_secs(5), socket.connect(target))
            .await
            .map_err(|_| std::io::Error::other(format!("connect {addr}: timed out")))??;
        stream.set_nodelay(true)?;
        Ok(RawConn {
            stream,
            buf: Vec::new(),
            host: addr.to_string(),
        })
    }

    /// Writes `method path HTTP/1.1` with `Host`, `Content-Length: 0` and `headers`; keep-alive.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\n",
            self.host
        );
        for (name, value) in headers {
            req.push_str(&format!("{name}: {value}\r\n"));
        }
        req.push_str("\r\n");
        self.stream.write_all(req.as_bytes()).await
    }

    async fn fill(&mut self) -> std::io::Result<usize> {
        use tokio::io::AsyncReadExt;
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).await?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Reads the head of the next answer (status line and headers) and leaves the body unread.
    pub async fn read_head(&mut self) -> std::io::Result<HttpReply> {
        let end = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            if self.fill().await? == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "connection closed before an answer",
                ));
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line in {head:?}")))?;
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Ok(HttpReply {
            status,
            headers,
            body: String::new(),
        })
    }

    /// Reads one whole answer (head and body). Answers without Content-Length or chunked coding
    /// are read to the end of the connection.
    pub async fn read_reply(&mut self) -> std::io::Result<HttpReply> {
        let mut reply = self.read_head().await?;
        let chunked = reply
            .header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let length = reply
            .header("content-length")
            .and_then(|v| v.parse::<usize>().ok());
        let body = if chunked {
            loop {
                if let Some((body, used)) = dechunk_prefix(&self.buf) {
                    self.buf.drain(..used);
                    break body;
                }
                if self.fill().await? == 0 {
                    return Err(std::io::Error::other("connection closed in a chunked body"));
                }
            }
        } else if let Some(len) = length {
            while self.buf.len() < len {
                if self.fill().await? == 0 {
                    return Err(std::io::Error::other("connection closed in a body"));
                }
            }
            self.buf.drain(..len).collect()
        } else if matches!(reply.status, 100..=199 | 204 | 304) {
            Vec::new()
        } else {
            while self.fill().await? > 0 {}
            std::mem::take(&mut self.buf)
        };
        reply.body = String::from_utf8_lossy(&body).into_owned();
        Ok(reply)
    }

    /// [`send`](Self::send) then [`read_reply`](Self::read_reply).
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> std::io::Result<HttpReply> {
        self.send(method, path, headers).await?;
        self.read_reply().await
    }

    /// Reads at least `n` body bytes of an answer whose head was read with
    /// [`read_head`](Self::read_head) (fewer if the connection ends first); returns how many.
    pub async fn read_some(&mut self, n: usize) -> std::io::Result<usize> {
        while self.buf.len() < n {
            if self.fill().await? == 0 {
                break;
            }
        }
        Ok(self.buf.len())
    }

    /// Aborts the connection: `SO_LINGER` 0 and close, so the peer gets a TCP RST.
    pub fn reset(self) {
        let _ = self.stream.set_zero_linger();
        drop(self.stream);
    }

    /// Closes the connection normally (FIN).
    pub fn close(self) {
        drop(self.stream);
    }

    /// Writes `bytes` exactly as given (a hand-made head, part of a body).
    pub async fn write_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        self.stream.write_all(bytes).await
    }
}

/// Decodes a complete chunked body at the start of `data`: `(body, bytes used)`, or `None` when
/// more bytes are needed. Trailers are skipped.
fn dechunk_prefix(data: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut pos = 0;
    let mut out = Vec::new();
    loop {
        let line_end = pos + data[pos..].windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[pos..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        pos = line_end + 2;
        if size == 0 {
            // Trailers end with an empty line.
            loop {
                let end = pos + data[pos..].windows(2).position(|w| w == b"\r\n")?;
                let empty = end == pos;
                pos = end + 2;
                if empty {
                    return Some((out, pos));
                }
            }
        }
        out.extend_from_slice(data.get(pos..pos + size)?);
        pos += size;
        if data.get(pos..pos + 2)? != b"\r\n" {
            return None;
        }
        pos += 2;
    }
}
