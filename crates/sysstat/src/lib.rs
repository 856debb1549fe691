//! A source, not a sink: what the host is doing beside the DDS traffic.
//! System metrics sampled from `/proc` under node_exporter's names, or
//! scraped from a node_exporter ([`system`]); the load of single processes
//! ([`procload`]); the Prometheus text format both come in ([`promtext`],
//! whose `Family` the exporters write); worker threads whose end by a panic
//! is noticed ([`workers`], the sampler's thread among them); and what the
//! host's time daemon (chrony, ptp4l) says about its clock ([`clocksync`]).
//!
//! The agent and serve feed these samples to the sinks of `ddscope-export`;
//! the lab records process load in its run directories. Neither needs the
//! decoder for it, so this crate depends on no other ddscope crate.

pub mod clocksync;
mod error;
pub mod procload;
pub mod promtext;
pub mod system;
pub mod workers;
