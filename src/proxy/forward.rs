//! Backend header hygiene: what the admitted request carries to the upstream. Tollgate sets
//! `X-Forwarded-For`/`-Proto`, `X-Request-Id` and the identity headers, removes the proxy-set
//! fields a client may not send and the lookalikes of the names it owns, and keeps those names out
//! of the client's `Connection` header.

use super::ctx::Ctx;
use super::fields::{self, Fields};
use crate::http::client_ip;
use crate::http::proxy_fields::{self, ProxyField};
use crate::http::{connection, lookalike, request_id};
use crate::identity::Authenticator;
use http::header::CONNECTION;
use http::{HeaderName, HeaderValue};
use pingora::http::RequestHeader;
use pingora::prelude::*;
use pingora::proxy::Session;

/// True when the request came over TLS.
fn is_tls(session: &Session) -> bool {
    session.digest().is_some_and(|d| d.ssl_digest.is_some())
}

pub(super) const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub(super) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// The request id ([`crate::http::request_id`]): the client's one valid `X-Request-Id`, else a
/// new UUID v4, as a header value (the client's is shared, not copied); and whether it is the
/// client's (then the backend request already carries exactly it and needs no rewrite).
pub(super) fn request_id(req: &RequestHeader) -> (HeaderValue, bool) {
    let sent = req.headers.get_all(&X_REQUEST_ID);
    if request_id::accepted(sent.iter().map(HeaderValue::as_bytes)).is_some() {
        if let Some(value) = sent.iter().next() {
            return (value.clone(), true);
        }
    }
    // Straight from the stack into the value's one allocation, which its copies (the backend
    // request's, the response's) share: a copied buffer would be allocated again at the first
    // copy, to be shared from then on.
    let mut buf = [0u8; request_id::LENGTH];
    request_id::generate_into(&mut buf);
    let value = HeaderValue::from_maybe_shared(bytes::Bytes::from_owner(buf))
        .expect("a UUID is a valid header value");
    (value, false)
}

/// Rewrites the admitted request's headers for the backend: identity headers
/// ([`crate::identity::Authenticator::forward`]), `X-Forwarded-For` (the client's list, then the
/// peer), `X-Forwarded-Proto` and `X-Request-Id`; and drops those names from the client's
/// `Connection` header, which would otherwise make Pingora remove them again
/// ([`crate::http::connection`]).
///
/// Done on the downstream request once it is admitted, not in `upstream_request_filter`, so
/// each attempt's copy of the head carries the result; through [`fields::edit_request`] (room
/// for the added fields at once, names in lower case unless `server.preserve_header_case`).
pub(super) fn forward_headers(session: &mut Session, ctx: &Ctx) -> Result<()> {
    let proto = if is_tls(session) { "https" } else { "http" };
    let peer = session
        .client_addr()
        .and_then(|a| a.as_inet())
        .map(|a| client_ip::normalize(a.ip()));
    let trusted = match (&ctx.snapshot.config.edge, peer) {
        (Some(edge), Some(peer)) => client_ip::is_trusted(peer, &edge.trusted_proxies),
        _ => false,
    };
    let forward = ctx.snapshot.auth.forward(ctx.identity.as_ref());
    let preserve_case = ctx.snapshot.config.server.http.preserve_header_case;
    // The client's own request id stays as it is.
    let extra =
        set_for_backend(&[]).count() - usize::from(ctx.request_id_sent) + forward.insert.len();
    fields::edit_request(session.req_header_mut(), preserve_case, extra, |req| {
        // One look at the client's names for every rule below, not a lookup per name; each rule
        // that applies looks again.
        let seen = Seen::of(
            req.map(),
            &forward.remove,
            forward.insert.iter().map(|(n, _)| *n),
        );
        if seen.stripped {
            for name in &forward.remove {
                req.remove(name);
            }
        }
        for (name, value) in forward.insert {
            req.insert(name.clone(), fields::value(value)?)?;
        }
        // X-Forwarded-For in one allocation: every field the client sent, byte for byte and in
        // order (as one list, RFC 9110 5.3, the same list the edge stage read), then the peer.
        // Sized exactly, so that the value takes the buffer over as it is (a buffer with room
        // to spare would cost the value a second allocation).
        let peer = peer.map(client_ip::IpText::of);
        let sent = seen
            .forwarded_for
            .then(|| req.map().get_all(&X_FORWARDED_FOR));
        let sent = || sent.iter().flat_map(|all| all.iter());
        let len = sent().map(|v| v.len() + 2).sum::<usize>()
            + peer.as_ref().map_or(0, |p| p.as_bytes().len());
        let mut xff = Vec::with_capacity(len);
        for v in sent() {
            xff.extend_from_slice(v.as_bytes());
            xff.extend_from_slice(b", ");
        }
        match &peer {
            Some(peer) => xff.extend_from_slice(peer.as_bytes()),
            None => xff.truncate(xff.len().saturating_sub(2)),
        }
        if !xff.is_empty() {
            req.insert(X_FORWARDED_FOR, fields::value(xff)?)?;
        }
        req.insert(X_FORWARDED_PROTO, HeaderValue::from_static(proto))?;
        if !ctx.request_id_sent {
            req.insert(X_REQUEST_ID, ctx.request_id.clone())?;
        }
        if seen.underscore {
            drop_lookalikes(req, &ctx.snapshot.auth);
        }
        if seen.proxy_field {
            drop_proxy_fields(req, trusted);
        }
        if !seen.connection {
            return Ok(());
        }
        keep_owned_headers(req, ctx.snapshot.auth.strip_headers())
    })
}

/// What the names of a request's fields hold, as far as the rules of [`forward_headers`] go,
/// found in one pass over the client's names (nothing allocated). The rules that run after the
/// fields tollgate sets see those too: the identity headers set are looked at as well, and
/// `X-Forwarded-For`/`-Proto` and `X-Request-Id` fall under none of the rules.
struct Seen {
    /// One of the names to strip ([`crate::identity::Forward::remove`]).
    stripped: bool,
    /// A name with `_` ([`drop_lookalikes`]).
    underscore: bool,
    /// A proxy-set field or a lookalike of one ([`drop_proxy_fields`]).
    proxy_field: bool,
    /// `Connection` ([`keep_owned_headers`]).
    connection: bool,
    /// `X-Forwarded-For`, the list the peer is added to (looked up only when there is one).
    forwarded_for: bool,
}

impl Seen {
    fn of<'a>(
        map: &http::HeaderMap,
        strip: &[&HeaderName],
        set: impl Iterator<Item = &'a HeaderName>,
    ) -> Seen {
        let mut seen = Seen {
            stripped: false,
            underscore: false,
            proxy_field: false,
            connection: false,
            forwarded_for: false,
        };
        for name in map.keys() {
            seen.stripped |= strip.contains(&name);
            seen.look_at(name);
        }
        for name in set {
            seen.look_at(name);
        }
        seen
    }

    fn look_at(&mut self, name: &HeaderName) {
        self.forwarded_for |= *name == X_FORWARDED_FOR;
        if *name == CONNECTION {
            self.connection = true;
            return;
        }
        let bytes = name.as_str().as_bytes();
        self.underscore |= bytes.contains(&b'_');
        self.proxy_field |= proxy_fields::classify(bytes) != ProxyField::Other;
    }
}

/// Removes the proxy-set fields a client sent ([`crate::http::proxy_fields`]): `Forwarded`,
/// `X-Real-IP`, `X-Forwarded-Host`, `X-Original-URL`, ... unless the peer is `trusted`, and their
/// `_` spellings always.
fn drop_proxy_fields(req: &mut dyn Fields, trusted: bool) {
    remove_fields(req, |name| {
        match proxy_fields::classify(name.as_str().as_bytes()) {
            ProxyField::Other => false,
            ProxyField::Field => !trusted,
            ProxyField::Lookalike => true,
        }
    });
}

/// Removes every field whose name `dropped` says so. One scan of the names, and nothing
/// allocated, when none is.
fn remove_fields(req: &mut dyn Fields, dropped: impl Fn(&HeaderName) -> bool) {
    if !req.map().keys().any(&dropped) {
        return;
    }
    let names: Vec<HeaderName> = req.map().keys().filter(|n| dropped(n)).cloned().collect();
    for name in &names {
        req.remove(name);
    }
}

/// The fields tollgate sets for the backend: `X-Forwarded-For`/`-Proto`, `X-Request-Id` and the
/// `identity` headers (tenant and tier).
fn set_for_backend(identity: &[HeaderName]) -> impl Iterator<Item = &HeaderName> {
    static FIXED: [HeaderName; 3] = [X_FORWARDED_FOR, X_FORWARDED_PROTO, X_REQUEST_ID];
    FIXED.iter().chain(identity)
}

/// Removes the client's fields whose names only look like one tollgate sets or reads
/// ([`crate::http::lookalike`]: `X_Tollgate_Tenant`, `X_Forwarded_For`, `X_Api_Key`); called
/// for a request with `_` in a name ([`Seen`]).
fn drop_lookalikes(req: &mut dyn Fields, auth: &Authenticator) {
    let owned: Vec<&str> = set_for_backend(auth.strip_headers())
        .chain(auth.api_key_header())
        .map(HeaderName::as_str)
        .collect();
    remove_fields(req, |name| {
        owned
            .iter()
            .any(|o| lookalike::reads_as(name.as_str().as_bytes(), o))
    });
}

/// Removes from `Connection` the names of the fields tollgate sets for the backend (`identity`,
/// the identity headers; `X-Forwarded-For`/`-Proto`, `X-Request-Id`), keeping its other tokens;
/// called for a request with `Connection` ([`Seen`]).
fn keep_owned_headers(req: &mut dyn Fields, identity: &[HeaderName]) -> Result<()> {
    let owned: Vec<&str> = set_for_backend(identity).map(HeaderName::as_str).collect();
    let values: Vec<&[u8]> = req
        .map()
        .get_all(CONNECTION)
        .iter()
        .map(|v| v.as_bytes())
        .collect();
    let Some(kept) = connection::without_owned(&values, &owned) else {
        return Ok(());
    };
    req.remove(&CONNECTION);
    if !kept.is_empty() {
        req.insert(CONNECTION, fields::value(kept)?)?;
    }
    Ok(())
}
