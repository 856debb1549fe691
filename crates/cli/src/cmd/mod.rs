pub mod dissect;
pub mod latency;
pub mod topics;
