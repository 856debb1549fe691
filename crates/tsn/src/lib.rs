//! TSN modelling and configuration for ddscope.
//!
//! - [`formula`]: thesis Eq. 3.1–3.4 as written.
//! - [`frame`]: what a DDS sample or UDP datagram becomes on the wire.
//! - [`gcl`]: 802.1Qbv gate control lists with taprio semantics.
//! - [`tas`]: formula vs frame-level prediction for one message.
//! - [`sim`]: frame-level discrete-event simulator (TAS, CBS, strict priority, hops).
//! - [`scenario`]: the TOML scenario format and its translation to a simulation.
//! - [`cbs`]: CBS parameters (Bosk et al. Eq. 2–6).
//! - [`sr`]: SR classes (Bosk et al. Table 1) and verdicts.
//! - [`config`]: generated `tc`, Cyclone DDS and linuxptp configuration.
//! - [`calibrate`]: host timing and DDS layout fitted from a measured lab run.
//! - [`plan`]: a GCL proposed from measured traffic.
//! - [`check`]: captures against a configuration (PCP, gate windows, SR-class bounds).
pub mod calibrate;
pub mod cbs;
pub mod check;
pub mod config;
pub mod formula;
pub mod frame;
pub mod gcl;
pub mod plan;
pub mod scenario;
pub mod shell;
pub mod sim;
pub mod sr;
pub mod stats;
pub mod tas;
