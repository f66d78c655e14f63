//! `decision:`: the decision service's listener and its answer when Redis cannot decide.

use super::common::Check;
use crate::config::model::{DecisionFailure, DecisionSettings, GrpcDecision, HttpDecision};
use crate::config::raw::RawDecision;

/// `decision:` → its settings (a part with an invalid field is reported and left out).
pub(super) fn settings(c: &mut Check, raw: Option<&RawDecision>) -> DecisionSettings {
    let Some(raw) = raw else {
        return DecisionSettings::default();
    };
    let grpc = raw.grpc.as_ref().and_then(|g| {
        let listen = c.socket_addr("decision.grpc.listen", &g.listen);
        let on_failure = match g.on_failure.as_deref() {
            None | Some("rules") => DecisionFailure::Rules,
            Some("unavailable") => DecisionFailure::Unavailable,
            Some(other) => {
                c.err(
                    "decision.grpc.on_failure",
                    format!("\"{other}\" is not a failure answer (rules, unavailable)"),
                );
                DecisionFailure::Rules
            }
        };
        Some(GrpcDecision {
            listen: listen?,
            on_failure,
        })
    });
    let http = raw.http.as_ref().and_then(|h| {
        let listen = c.socket_addr("decision.http.listen", &h.listen);
        if let Err(why) = super::admin::env_var_name(&h.token_env) {
            c.err("decision.http.token_env", why);
            return None;
        }
        Some(HttpDecision {
            listen: listen?,
            token_env: h.token_env.clone(),
        })
    });
    DecisionSettings { grpc, http }
}
