//! The process: server assembly ([`server`]), reload on SIGHUP ([`reload`]) and the background
//! loops that act through the current snapshot ([`loops`], [`ticker`]).

pub mod loops;
pub mod reload;
pub mod server;
pub mod ticker;
