//! Which limit rules (`limits:`) apply to a request, and the key of each one's bucket
//! (docs/DESIGN.md 4e "Rules", "Keys"). Pure: the request is read through [`RequestView`].

use crate::config::{KeyPart, LimitRule, Missing, RuleMatch};
use crate::limit::share::Share;
use crate::limit::Rate;
use crate::routing::{host_matches, prefix_matches, without_parameters};
use crate::store::redis::keys::RuleKeyText;
use http::HeaderMap;
use percent_encoding::percent_decode;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::sync::Arc;

/// What rules read of a request, after the identity stage.
#[derive(Debug, Clone, Copy)]
pub struct RequestView<'a> {
    /// Method, as sent (`GET`).
    pub method: &'a str,
    /// The normalised path (no query).
    pub path: &'a str,
    /// The raw query (after `?`), if any.
    pub query: Option<&'a str>,
    /// Host, lower case without port (empty when none was sent).
    pub host: &'a str,
    pub headers: &'a HeaderMap,
    /// The client's key: its address, IPv6 aggregated to `edge.ipv6_prefix` (`None`: unknown,
    /// as in an admin explanation without `client_ip`).
    pub client_key: Option<&'a str>,
    /// The path prefix of the route that matched.
    pub route: Option<&'a str>,
    /// The tenant id (the identity stage's; `ip:<address>` when anonymous).
    pub tenant: Option<&'a str>,
    /// The tier, if one applies.
    pub tier: Option<&'a str>,
    /// A verified JWT's claims.
    pub claims: Option<&'a Map<String, Value>>,
}

/// A rule that applies to a request: its bucket's key and size.
#[derive(Debug, Clone)]
pub struct AppliedRule<'a> {
    pub rule: &'a LimitRule,
    /// Its position in `limits:`.
    pub index: usize,
    /// The encoded key text ([`rule_key_text`](crate::store::redis::keys::rule_key_text)).
    pub key: Arc<str>,
    /// The bucket: the rule's own or its `by_tier` size, cut to this region's share under
    /// `multi_region:`.
    pub rate: Rate,
    /// A concurrency rule's cap (`max_in_flight`), cut to the same share as `rate` under
    /// `multi_region:` (`floor(max × share)`, at least 1); `None` for a rate rule.
    pub max_in_flight: Option<u64>,
}

/// A rule with `missing: refuse` whose key part the request lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingPart {
    pub rule: String,
    /// The part as written in `key:` (`header:x-user`).
    pub part: String,
}

/// This region's share of a tenant's (`Some(tenant)`) or a shared (`None`) budget.
pub type ShareOf<'s> = dyn Fn(Option<&str>) -> Share + 's;

/// Every rule of `rules` whose `match` holds for `req`, in file order, with its key; rules
/// lacking a key part are skipped (`missing: skip`). `share` gives this region's share of a
/// tenant-keyed (`Some(tenant)`) or shared (`None`) bucket; `None` outside `multi_region:`.
/// Errors: the first rule with `missing: refuse` whose key part is absent.
pub fn applicable<'a>(
    rules: &'a [LimitRule],
    req: &RequestView<'_>,
    share: Option<&ShareOf<'_>>,
) -> Result<Vec<AppliedRule<'a>>, MissingPart> {
    let mut out = Vec::with_capacity(rules.len());
    for (index, rule) in rules
        .iter()
        .enumerate()
        .filter(|(_, r)| matches(&r.matcher, req))
    {
        let mut key = RuleKeyText::default();
        let mut lacking = None;
        for part in &rule.key {
            match value_of(part, req) {
                Some(v) => {
                    let (kind, name) = part.spec_pieces();
                    key.push(&[kind, name], &v);
                }
                None => {
                    lacking = Some(part);
                    break;
                }
            }
        }
        if let Some(part) = lacking {
            if rule.missing == Missing::Refuse {
                return Err(MissingPart {
                    rule: rule.name.clone(),
                    part: part.spec(),
                });
            }
            continue;
        }
        let mut rate = rule.rate_for(req.tier);
        let mut max_in_flight = rule.max_in_flight;
        if let Some(share) = share {
            let share = share(req.tenant.filter(|_| rule.per_tenant()));
            rate = share.apply(rate);
            max_in_flight = max_in_flight.map(|m| share.of(m));
        }
        out.push(AppliedRule {
            rule,
            index,
            key: key.finish().into(),
            rate,
            max_in_flight,
        });
    }
    Ok(out)
}

/// What [`applicable`] reads of `req` for `rules`, written to `out`: two requests that write
/// the same bytes get the same rules with the same keys and sizes (outside `multi_region:`,
/// whose shares change with time). Written: the tier and the tenant, then for each rule that
/// matches its index and its key parts' values in turn, each length-prefixed, a missing part
/// marked and ending the rule. `false` when a rule with `missing: refuse` lacks a part (that
/// request is refused: nothing to reuse).
pub fn fingerprint(rules: &[LimitRule], req: &RequestView<'_>, out: &mut Vec<u8>) -> bool {
    fn put(out: &mut Vec<u8>, value: Option<&[u8]>) {
        match value {
            Some(v) => {
                out.push(1);
                out.extend_from_slice(&(v.len() as u64).to_le_bytes());
                out.extend_from_slice(v);
            }
            None => out.push(0),
        }
    }
    put(out, req.tier.map(str::as_bytes));
    put(out, req.tenant.map(str::as_bytes));
    for (i, rule) in rules.iter().enumerate() {
        if !matches(&rule.matcher, req) {
            continue;
        }
        out.extend_from_slice(&(i as u64).to_le_bytes());
        for part in &rule.key {
            let value = value_of(part, req);
            put(out, value.as_deref());
            if value.is_none() {
                if rule.missing == Missing::Refuse {
                    return false;
                }
                break;
            }
        }
    }
    true
}

/// True when every condition `m` gives holds for `req`.
pub fn matches(m: &RuleMatch, req: &RequestView<'_>) -> bool {
    let path = without_parameters(req.path);
    (m.routes.is_empty() || m.routes.iter().any(|p| prefix_matches(p, &path)))
        && (m.methods.is_empty() || m.methods.iter().any(|x| x == req.method))
        && (m.hosts.is_empty() || m.hosts.iter().any(|h| host_matches(h, req.host)))
        && m.headers.iter().all(|(name, value)| {
            req.headers
                .get_all(name.as_str())
                .iter()
                .any(|v| v.as_bytes() == value.as_bytes())
        })
}

/// The value of key part `part` in `req`, as bytes; `None` when the request has none.
fn value_of<'r>(part: &KeyPart, req: &RequestView<'r>) -> Option<Cow<'r, [u8]>> {
    let text = |s: &'r str| Some(Cow::Borrowed(s.as_bytes()));
    match part {
        KeyPart::Tenant => req.tenant.and_then(text),
        KeyPart::ClientIp => req.client_key.and_then(text),
        KeyPart::Route => req.route.and_then(text),
        KeyPart::Method => text(req.method),
        KeyPart::Host => Some(req.host).filter(|h| !h.is_empty()).and_then(text),
        KeyPart::Header(name) => header_value(req.headers, name),
        KeyPart::Claim(name) => match req.claims?.get(name)? {
            Value::Null => None,
            Value::String(s) => Some(Cow::Owned(s.clone().into_bytes())),
            other => Some(Cow::Owned(other.to_string().into_bytes())),
        },
        KeyPart::Query(name) => query_value(req.query?, name).map(Cow::Owned),
    }
}

/// Every value of header `name`, joined by `, ` (RFC 9110 5.3); `None` when absent.
fn header_value<'r>(headers: &'r HeaderMap, name: &str) -> Option<Cow<'r, [u8]>> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    let Some(second) = values.next() else {
        return Some(Cow::Borrowed(first.as_bytes()));
    };
    let mut joined = first.as_bytes().to_vec();
    for v in std::iter::once(second).chain(values) {
        joined.extend_from_slice(b", ");
        joined.extend_from_slice(v.as_bytes());
    }
    Some(Cow::Owned(joined))
}

/// The first value of parameter `name` in `query` (`application/x-www-form-urlencoded`: `&`
/// between pairs, `+` for space), percent-decoded to its exact bytes (not necessarily UTF-8);
/// `None` when absent.
fn query_value(query: &str, name: &str) -> Option<Vec<u8>> {
    let decode = |s: &str| -> Vec<u8> {
        let plus: Vec<u8> = s
            .bytes()
            .map(|b| if b == b'+' { b' ' } else { b })
            .collect();
        percent_decode(&plus).collect()
    };
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (decode(k) == name.as_bytes()).then(|| decode(v))
    })
}

pub mod memo;

#[cfg(test)]
mod tests;
