//! Integration-test harness: real processes on free loopback ports, one set per test.
//!
//! Every test owns its own `redis-server`, `tollgate-echo` backends and `tollgate` gateway, each
//! on ports nobody else in the process was handed, so tests run in parallel. Every process is
//! killed (SIGKILL) when its handle is dropped, which also happens when a test panics; a failing
//! test prints the tail of the gateway's log.
//!
//! The control methods (`stats`, `metrics`, `keys`, ...) are synchronous on purpose: they talk to
//! local processes and take milliseconds, they work from `Drop`, and they can be called from
//! `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` tests without `.await` noise.
//! Traffic under test goes through [`client`] / [`client_from`] (async reqwest).
//!
//! One file a concern: `processes` (binaries, free ports, temp dirs, signals), `redis_server`,
//! `backend` (`tollgate-echo`), `gateway` (`tollgate run` / `check`), `clients` (blocking control
//! client, reqwest clients, raw one-shot requests), `raw_conn` (hand-driven keep-alive
//! connections), `relay` (a TCP relay: re-pointed, delayed, cut), `config` (the YAML builder),
//! `fleet` (two gateways on one Redis), `metrics` (Prometheus text), `assertions` (problem bodies, echo JSON), `wait` (polling),
//! `venv` (the repository's Python venv with pinned PyPI tools).
//! `regions`, `redis_topology` and `tls` are included by the test files that need them
//! (`#[path = "common/..."]`).
//!
//! Set `TOLLGATE_KEEP_TEST_DIRS=1` to keep every temporary directory (configs and logs) after the
//! test; their paths are printed.

#![allow(dead_code)]

pub mod admin;
mod assertions;
mod backend;
mod bucket;
mod clients;
mod config;
mod fleet;
mod gateway;
mod metrics;
mod processes;
mod raw_conn;
mod redis_server;
mod relay;
mod venv;
mod wait;

// Every helper stays reachable as `common::name`, as before the split. A test file that uses none of
// a module's helpers would otherwise warn about its glob.
#[allow(unused_imports)]
pub use self::{
    assertions::*, backend::*, bucket::*, clients::*, config::*, fleet::*, gateway::*, metrics::*,
    processes::*, raw_conn::*, redis_server::*, relay::*, venv::*, wait::*,
};
