//! The Pingora glue: runs the stages of [`crate::pipeline`] in order and writes their
//! responses. Thin on purpose; the decisions live in the stages.
//!
//! A request, top-down (docs/DESIGN.md section 1):
//! 1. [`front`] reads the HTTP/1 head within its limits and [`head`] checks it; a head that cannot
//!    be served is answered there, before Pingora parses it.
//! 2. `hooks::request_filter` runs `stages`, one line each: edge → route → identity → body
//!    buffer ([`body_buffer`]: a small body read whole, so a slow sender holds nothing after it)
//!    → tenant quota → upstream slot. A request rejected at one stage never reaches a later one;
//!    `refuse` writes the refusal. Before all of them, [`conn_limit`] caps open connections.
//! 3. `forward` sets the admitted request's headers for the backend; `stages` picks the backend
//!    and bounds the streamed body.
//! 4. `failure` answers a request that could not be proxied; `finish` releases the upstream slot
//!    and writes the access log line.
//!
//! The per-request state is [`Ctx`].

mod body_buffer;
pub mod conn_limit;
mod cost_body;
mod ctx;
mod failure;
mod fence;
mod fields;
mod finish;
mod forward;
pub mod front;
pub mod head;
mod hooks;
mod refuse;
mod reserve_body;
mod stages;
mod trace;

pub use ctx::Ctx;
pub use hooks::Proxy;
