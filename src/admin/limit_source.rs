//! Where a number of the admin views (`GET /v1/tenants/{id}`, `POST /v1/explain`) comes from:
//! the file, or a live override (docs/admin-api.md#get-v1tenantsid).

use crate::config::TenantOverride;
use serde_json::{json, Value};

/// Marks where an entry's numbers come from: `"source": "override"` and `"override"` (the
/// fields the tenant's or rule key's live override sets) when `set`, else `"source": "config"`
/// (the file: the tier, `tenants:`, the rule).
pub fn mark_source(v: &mut Value, set: Option<Value>) {
    match set {
        Some(o) => {
            v["source"] = json!("override");
            v["override"] = o;
        }
        None => v["source"] = json!("config"),
    }
}

/// The bucket fields `o` sets (`limit`, `per_ms`, `burst`); `None` when it sets none.
pub fn rate_override_json(o: &TenantOverride) -> Option<Value> {
    let fields = [("limit", o.limit), ("per_ms", o.per_ms), ("burst", o.burst)];
    let set: serde_json::Map<String, Value> = fields
        .iter()
        .filter_map(|(k, x)| x.map(|x| (k.to_string(), json!(x))))
        .collect();
    (!set.is_empty()).then_some(Value::Object(set))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_fields_set_are_marked() {
        let o = |limit, burst| TenantOverride {
            tier: None,
            limit,
            per_ms: None,
            burst,
        };
        assert_eq!(rate_override_json(&o(None, None)), None);
        assert_eq!(
            rate_override_json(&o(None, Some(5))),
            Some(json!({"burst": 5}))
        );
        let mut v = json!({"limit": 5});
        mark_source(&mut v, rate_override_json(&o(Some(5), None)));
        assert_eq!(
            v,
            json!({"limit": 5, "source": "override", "override": {"limit": 5}})
        );
        let mut v = json!({});
        mark_source(&mut v, None);
        assert_eq!(v, json!({"source": "config"}));
    }
}
