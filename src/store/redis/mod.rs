//! The shared store: the connection to standalone, Cluster or Sentinel Redis ([`conn`]), script
//! calls and their faults ([`client`]), the circuit breaker ([`breaker`]) and fleet membership
//! ([`membership`]).

pub mod breaker;
pub mod client;
pub mod conn;
pub mod membership;
