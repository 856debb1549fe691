pub mod dissect;
pub mod latency;
pub mod live;
pub mod report;
pub mod topics;
