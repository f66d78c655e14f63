//! Converters of other tools' rate-limit configs into `limits:` YAML (`tollgate import`). Pure:
//! text in, YAML and the list of what could not be carried over out.

pub mod envoy_ratelimit;
