//! JSON Schema (draft 2020-12) of `gateway.yaml`, generated from the raw config structs in
//! [`super::raw`] with `schemars`: the same structs serde reads, so the schema cannot drift from the
//! parser. Printed by `tollgate schema` and shipped as `gateway.schema.json` for editor completion
//! (`# yaml-language-server: $schema=./gateway.schema.json` at the top of `gateway.yaml`).
//!
//! The schema checks shapes, names, enumerated values, duration syntax and simple numeric bounds.
//! Rules that span fields (a tier named by a route exists, a tenant override fits its tier, ...)
//! are `tollgate check`'s job: a file that passes the schema can still fail `check`, never the
//! reverse for the rules the schema states.

use super::raw::RawConfig;

/// Where the shipped schema says it lives (its `$id`).
pub const SCHEMA_ID: &str = "https://tollgate.dev/schema/gateway.schema.json";

/// The schema of `gateway.yaml` as a JSON value (draft 2020-12).
pub fn gateway_schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(RawConfig).to_value();
    if let Some(map) = schema.as_object_mut() {
        map.insert("$id".into(), SCHEMA_ID.into());
        map.insert("title".into(), "tollgate gateway.yaml".into());
        map.insert(
            "description".into(),
            "Config of the tollgate rate-limiting gateway (docs/DESIGN.md section 4). \
             Cross-field rules are checked by `tollgate check`."
                .into(),
        );
    }
    schema
}

/// [`gateway_schema`] as pretty-printed JSON with a trailing newline (the shipped file's bytes).
pub fn gateway_schema_text() -> String {
    let mut text = serde_json::to_string_pretty(&gateway_schema()).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests;
