pub mod agent;
pub mod capture_args;
pub mod dissect;
pub mod latency;
pub mod live;
pub mod report;
pub mod serve;
pub mod topics;
