//! The request path as stages (docs/DESIGN.md section 1): [`edge`] → [`route`] → [`identity`] →
//! [`tenant`] → [`slot`]. Each stage decides with pure functions over the config snapshot and
//! its inputs, returning a [`Decision`] or a [`Rejection`]; the I/O it needs (the in-memory edge
//! buckets, one Redis script call, waiting for a slot) is in a small `run`/`check` function
//! beside them. `crate::proxy` runs the stages in order and turns a rejection into the response
//! and its metric labels in one place.
//!
//! Adding a stage: a module here with a pure decision function and its tests (`<stage>/tests.rs`),
//! a [`Layer`] for its metrics, and one line in `Proxy::request_filter`.

pub mod block;
pub mod cost;
pub mod decision;
pub mod descriptors;
pub mod edge;
pub mod identity;
pub mod inflight;
pub mod live_block;
pub mod live_key;
pub mod route;
pub mod rules;
pub mod settle;
pub mod slot;
pub mod tenant;
#[cfg(test)]
pub(crate) mod test_support;
pub mod usage;

pub use crate::observe::labels::{Layer, Outcome};
pub use decision::{Decision, Rejection};
