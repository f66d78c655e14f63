//! Concurrency limits in front of each upstream: slots per upstream and per tenant
//! ([`slots`]), the bounded fair queue for a full upstream ([`fair_queue`]) and who a slot is
//! charged to ([`claimant`]).

pub mod claimant;
pub mod fair_queue;
pub mod slots;
