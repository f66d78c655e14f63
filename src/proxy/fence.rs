//! The stream an HTTP/1 request is served on, fenced at the request's end: Pingora reads the
//! request's own body bytes through it, and nothing past them. Bytes that arrive while the
//! request is served (a pipelined next request, RFC 9112 9.3.2) are kept here for the front
//! end, which reads them as the next head once the answer is written.
//!
//! Why: while it waits for the backend, Pingora 0.9 probes the client connection for a close;
//! with HTTP/1 pipelining off (its default) a probe that reads a byte of the next request fails
//! the request being served ("Sent data after end of body"), after the backend served it and
//! the limits charged it, and its answer becomes an error. Pingora's own pipelining keeps such
//! bytes where the front end cannot see them, so the front end would never check that head.

use bytes::BytesMut;
use pingora::protocols::tls::{SslDigest, TlsRef};
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, SocketDigest, Ssl, Stream,
    TimingDigest, UniqueID, UniqueIDType, ALPN,
};
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes read per call into a stack chunk (the body's last bytes, or bytes past the request).
const CHUNK: usize = 4096;

/// A client stream that lets `allowance` more bytes through to its reader, then holds back
/// (up to `max_early` bytes) what else arrives. A close of the connection (EOF) still reaches
/// the reader, unless bytes of a next request came first: that client half-closed after
/// sending its requests and waits for their answers.
#[derive(Debug)]
pub struct Fence {
    inner: Stream,
    allowance: usize,
    early: BytesMut,
    max_early: usize,
}

impl Fence {
    /// `inner` with `allowance` bytes still to read for the current request (the rest of its
    /// `Content-Length` body; 0 when the head holds all of it).
    pub fn new(inner: Stream, allowance: usize, max_early: usize) -> Self {
        Fence {
            inner,
            allowance,
            early: BytesMut::new(),
            max_early,
        }
    }

    /// The stream inside, to read a next head from (past the fence).
    pub fn inner_mut(&mut self) -> &mut Stream {
        &mut self.inner
    }

    /// The same fence for a next request: `allowance` bytes to let through (`usize::MAX`: all of
    /// them, for a body whose end is unknown), then up to `max_early` held back. One fence
    /// serves a connection's requests in turn, rather than one allocated per request.
    pub fn reset(&mut self, allowance: usize, max_early: usize) {
        self.allowance = allowance;
        self.max_early = max_early;
    }

    /// The bytes that arrived past the request (the next one's start), taken out.
    pub fn take_early(&mut self) -> BytesMut {
        std::mem::take(&mut self.early)
    }

    /// The fence of a stream Pingora gave back (`None`: the stream is no fence).
    pub fn of(stream: Stream) -> Option<Box<Fence>> {
        stream.into_any().downcast::<Fence>().ok()
    }
}

impl AsyncRead for Fence {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.allowance >= buf.remaining() {
            // The request's body, read in place.
            let before = buf.filled().len();
            let read = Pin::new(&mut this.inner).poll_read(cx, buf);
            this.allowance -= buf.filled().len() - before;
            return read;
        }
        if this.allowance > 0 {
            // The body's last bytes: read no further than its end. The chunk is left
            // uninitialised (the reader only sees what was read): zeroing it on every poll cost
            // more than the read.
            let mut chunk = [MaybeUninit::<u8>::uninit(); CHUNK];
            let mut part = ReadBuf::uninit(&mut chunk[..this.allowance.min(CHUNK)]);
            let read = Pin::new(&mut this.inner).poll_read(cx, &mut part);
            let got = part.filled().len();
            buf.put_slice(part.filled());
            this.allowance -= got;
            return read;
        }
        // Past the request: keep what arrives for the front end.
        loop {
            if this.early.len() >= this.max_early {
                // Enough of the next request; read on once this one is answered.
                return Poll::Pending;
            }
            // Pingora's probe for a close polls here while the backend answers, mostly to
            // find nothing: an uninitialised chunk costs nothing when the read is pending.
            let mut chunk = [MaybeUninit::<u8>::uninit(); CHUNK];
            let mut part = ReadBuf::uninit(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut part) {
                Poll::Ready(Ok(())) if part.filled().is_empty() => {
                    if this.early.is_empty() {
                        return Poll::Ready(Ok(()));
                    }
                    // Half-closed after pipelining: answer what was sent.
                    this.max_early = this.early.len();
                    return Poll::Pending;
                }
                Poll::Ready(Ok(())) => this.early.extend_from_slice(part.filled()),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl AsyncWrite for Fence {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[async_trait::async_trait]
impl Shutdown for Fence {
    async fn shutdown(&mut self) {
        self.inner.shutdown().await
    }
}

impl UniqueID for Fence {
    fn id(&self) -> UniqueIDType {
        self.inner.id()
    }
}

impl Ssl for Fence {
    fn get_ssl(&self) -> Option<&TlsRef> {
        self.inner.get_ssl()
    }

    fn get_ssl_digest(&self) -> Option<Arc<SslDigest>> {
        self.inner.get_ssl_digest()
    }

    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.inner.selected_alpn_proto()
    }
}

impl GetTimingDigest for Fence {
    fn get_timing_digest(&self) -> Vec<Option<TimingDigest>> {
        self.inner.get_timing_digest()
    }

    fn get_read_pending_time(&self) -> std::time::Duration {
        self.inner.get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> std::time::Duration {
        self.inner.get_write_pending_time()
    }
}

impl GetProxyDigest for Fence {
    fn get_proxy_digest(&self) -> Option<Arc<pingora::protocols::raw_connect::ProxyDigest>> {
        self.inner.get_proxy_digest()
    }
}

impl GetSocketDigest for Fence {
    fn get_socket_digest(&self) -> Option<Arc<SocketDigest>> {
        self.inner.get_socket_digest()
    }
}

#[async_trait::async_trait]
impl Peek for Fence {}
