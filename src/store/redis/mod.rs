//! The shared store: the connection to standalone, Cluster or Sentinel Redis ([`conn`], and
//! [`sentinel`] for following the sentinels), script
//! calls and their faults ([`client`]), the runtime the connections live on ([`home`]), replies that come after the timeout ([`late`]), the circuit breaker ([`breaker`]) and the guarded call
//! through it ([`guarded`]), every key string ([`keys`]) and script ([`scripts`]), and fleet
//! membership ([`membership`]).

pub mod breaker;
pub mod call_count;
pub mod client;
pub mod conn;
pub mod guarded;
pub mod home;
pub mod keys;
pub mod late;
pub mod membership;
pub mod node;
pub mod scripts;
pub mod sentinel;
