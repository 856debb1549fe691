//! Emulated multi-host lab (work in progress by the lab issue).
pub mod cli;
