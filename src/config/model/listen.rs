//! `listen:`: the proxy listeners and their TLS.

use std::net::SocketAddr;

/// One entry of `listen:`.
#[derive(Debug, Clone, PartialEq)]
pub struct ListenSettings {
    pub addr: SocketAddr,
    /// TLS termination; `None` = plain TCP.
    pub tls: Option<ListenTls>,
    /// HTTP/2: via ALPN on TLS listeners, prior-knowledge h2c on plain ones.
    pub h2: bool,
}

impl ListenSettings {
    /// A plain HTTP/1.1 listener on `addr`.
    pub fn plain(addr: SocketAddr) -> Self {
        ListenSettings {
            addr,
            tls: None,
            h2: false,
        }
    }

    /// True when both open the same kind of socket (address, TLS or not, h2, client CA): what
    /// a reload cannot change. Certificate files are not part of it.
    pub fn same_socket(&self, other: &ListenSettings) -> bool {
        let ca = |l: &ListenSettings| l.tls.as_ref().map(|t| t.client_ca_file.clone());
        self.addr == other.addr && self.h2 == other.h2 && ca(self) == ca(other)
    }
}

/// `listen[i].tls`: server certificates (the first is the default when SNI matches none) and
/// optional client certificate verification.
#[derive(Debug, Clone, PartialEq)]
pub struct ListenTls {
    /// `cert_file`/`key_file` first (when given), then `certs:` in order.
    pub certs: Vec<CertFiles>,
    /// PEM CA bundle; when set, every client must present a certificate it signed (mTLS).
    pub client_ca_file: Option<String>,
}

/// A PEM certificate chain (leaf first) and its PEM private key.
#[derive(Debug, Clone, PartialEq)]
pub struct CertFiles {
    pub cert_file: String,
    pub key_file: String,
}
