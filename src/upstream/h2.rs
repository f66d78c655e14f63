//! HTTP/2 to the backends of an upstream (`upstreams.<name>.h2`, docs/grpc.md#http2-to-backends):
//! what gRPC backends need, since a gRPC server speaks nothing else.

use crate::config::H2Settings;
use pingora::upstreams::peer::HttpPeer;

/// Makes `peer` speak HTTP/2 when `h2` is set (else leaves it on HTTP/1.1).
///
/// Pingora offers ALPN `h2` only, so a TLS backend negotiates h2 (one that picks no protocol is
/// spoken to in HTTP/1.1); a plain backend gets h2c with prior knowledge (the minimum version 2
/// leaves Pingora no HTTP/1.1 to fall back to, which it trusts as "the server speaks h2c").
/// Connections are pooled with up to `max_streams` requests multiplexed on each.
pub fn apply(peer: &mut HttpPeer, h2: Option<H2Settings>) {
    if let Some(h2) = h2 {
        peer.options.set_http_version(2, 2);
        peer.options.max_h2_streams = h2.max_streams;
    }
}
