pub mod dissect;
pub mod latency;
pub mod report;
pub mod topics;
