//! The process: server assembly ([`server`], with the proxy service made the Redis
//! connections' home in [`redis_home`]), reload on SIGHUP ([`reload`]) and the background
//! loops that act through the current snapshot ([`loops`], [`ticker`], the JWKS refresh in
//! [`jwks`], the live state's subscriber in [`live`]), and the early end of an idle graceful shutdown ([`idle_exit`]).

pub mod idle_exit;
pub mod jwks;
pub mod live;
pub mod loops;
pub mod redis_home;
pub mod reload;
pub mod server;
pub mod ticker;
pub mod trace_export;
