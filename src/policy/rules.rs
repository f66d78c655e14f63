//! Which limit rules (`limits:`) apply to a request, and the key of each one's bucket
//! (docs/DESIGN.md 4e "Rules", "Keys"). Pure: the request is read through [`RequestView`].

use crate::config::{KeyPart, LimitRule, Missing, RuleMatch};
use crate::http::method;
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
    /// The route that matched, as the `route` key part names it
    /// ([`RouteSettings::key_value`](crate::config::RouteSettings::key_value): host and prefix).
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

/// A key part a request cannot be keyed by: lacking under `missing: refuse`, or ambiguous.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingPart {
    pub rule: String,
    /// The part as written in `key:` (`header:x-user`).
    pub part: String,
    /// Why: absent, or given more than once.
    pub why: PartFault,
}

/// Why a request cannot be keyed by a part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartFault {
    /// Absent, and the rule has `missing: refuse`.
    Missing,
    /// A `query:` parameter or `header:` field given more than once: backends read the first
    /// (Go, Java, Flask) or the last (Django, PHP) value, so no single value is the one the
    /// backend acts on. Refused whatever `missing` says.
    Repeated,
}

/// A key part's value in a request: `Ok(None)` when absent, `Err` when ambiguous.
type PartValue<'r> = Result<Option<Cow<'r, [u8]>>, PartFault>;

/// This region's share of a tenant's (`Some(tenant)`) or a shared (`None`) budget.
pub type ShareOf<'s> = dyn Fn(Option<&str>) -> Share + 's;

/// Every rule of `rules` whose `match` holds for `req`, in file order, with its key; rules
/// lacking a key part are skipped (`missing: skip`). `share` gives this region's share of a
/// tenant-keyed (`Some(tenant)`) or shared (`None`) bucket; `None` outside `multi_region:`.
/// Errors: the first rule with `missing: refuse` whose key part is absent, or the first
/// matching rule keyed by a part the request gives more than once ([`PartFault::Repeated`]).
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
                Ok(Some(v)) => {
                    let (kind, name) = part.spec_pieces();
                    key.push(&[kind, name], &v);
                }
                Ok(None) => {
                    lacking = Some(part);
                    break;
                }
                Err(why) => {
                    return Err(MissingPart {
                        rule: rule.name.clone(),
                        part: part.spec(),
                        why,
                    })
                }
            }
        }
        if let Some(part) = lacking {
            if rule.missing == Missing::Refuse {
                return Err(MissingPart {
                    rule: rule.name.clone(),
                    part: part.spec(),
                    why: PartFault::Missing,
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
/// marked and ending the rule. `false` when a rule with `missing: refuse` lacks a part or a
/// part is ambiguous (that request is refused: nothing to reuse).
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
            let Ok(value) = value_of(part, req) else {
                return false;
            };
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

/// True when every condition `m` gives holds for `req`. A decision-service rule (`domain`)
/// never matches a proxied request.
pub fn matches(m: &RuleMatch, req: &RequestView<'_>) -> bool {
    if m.domain.is_some() {
        return false;
    }
    let path = without_parameters(req.path);
    let method = method::as_limited(req.method);
    (m.routes.is_empty() || m.routes.iter().any(|p| prefix_matches(p, &path)))
        && (m.methods.is_empty() || m.methods.iter().any(|x| x == req.method || x == method))
        && (m.hosts.is_empty() || m.hosts.iter().any(|h| host_matches(h, req.host)))
        && m.headers.iter().all(|(name, value)| {
            req.headers
                .get_all(name.as_str())
                .iter()
                .any(|v| v.as_bytes() == value.as_bytes())
        })
}

/// The value of key part `part` in `req`, as bytes; `Ok(None)` when the request has none,
/// `Err` when it has several ([`PartFault::Repeated`]). The method is the one limits see
/// ([`method::as_limited`]: HEAD is keyed as GET).
fn value_of<'r>(part: &KeyPart, req: &RequestView<'r>) -> PartValue<'r> {
    let text = |s: &'r str| Some(Cow::Borrowed(s.as_bytes()));
    Ok(match part {
        KeyPart::Tenant => req.tenant.and_then(text),
        KeyPart::ClientIp => req.client_key.and_then(text),
        KeyPart::Route => req.route.and_then(text),
        KeyPart::Method => text(method::as_limited(req.method)),
        KeyPart::Host => Some(req.host).filter(|h| !h.is_empty()).and_then(text),
        KeyPart::Header(name) => return header_value(req.headers, name),
        KeyPart::Claim(name) => match req.claims.and_then(|c| c.get(name)) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(Cow::Owned(s.clone().into_bytes())),
            Some(other) => Some(Cow::Owned(other.to_string().into_bytes())),
        },
        KeyPart::Query(name) => match req.query {
            Some(q) => return query_value(q, name).map(|v| v.map(Cow::Owned)),
            None => None,
        },
        // Only decision-service rules have these, and they never match a proxied request.
        KeyPart::Descriptor(_) => None,
    })
}

/// The value of header `name`; `Ok(None)` when absent, `Err` when the field is sent more than
/// once (one field whose value holds commas is one value).
fn header_value<'r>(headers: &'r HeaderMap, name: &str) -> PartValue<'r> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    match values.next() {
        None => Ok(Some(Cow::Borrowed(first.as_bytes()))),
        Some(_) => Err(PartFault::Repeated),
    }
}

/// The value of parameter `name` in `query` (`application/x-www-form-urlencoded`: `&` between
/// pairs, `+` for space, names compared after percent-decoding), percent-decoded to its exact
/// bytes (not necessarily UTF-8); `None` when absent. Errors: the parameter appears more than
/// once, whatever its values (`model=a&model=b`, `model=a&%6Dodel=a`).
pub fn query_value(query: &str, name: &str) -> Result<Option<Vec<u8>>, PartFault> {
    let decode = |s: &str| -> Vec<u8> {
        let plus: Vec<u8> = s
            .bytes()
            .map(|b| if b == b'+' { b' ' } else { b })
            .collect();
        percent_decode(&plus).collect()
    };
    let mut found = None;
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if decode(k) == name.as_bytes() {
            if found.is_some() {
                return Err(PartFault::Repeated);
            }
            found = Some(decode(v));
        }
    }
    Ok(found)
}

pub mod memo;

#[cfg(test)]
mod tests;
