//! The stream between agents and `serve`, used by both sides: [`protocol`]
//! (batches, agent names, the JSON stream), [`otlp`] (the same feed as
//! OTLP, for scale-out) and the protobuf field reader they share.

pub mod otlp;
pub(crate) mod protobuf;
pub mod protocol;
