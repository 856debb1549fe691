//! TSN modelling and configuration (work in progress by the TSN issue).
pub mod cli;
