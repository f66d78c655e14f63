//! The process: server assembly ([`server`]), reload on SIGHUP ([`reload`]) and the background
//! loops that act through the current snapshot ([`loops`], [`ticker`], the JWKS refresh in
//! [`jwks`]).

pub mod jwks;
pub mod loops;
pub mod reload;
pub mod server;
pub mod ticker;
