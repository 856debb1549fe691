//! Cross-capture latency (thesis 3.2.5): the same DDS sample seen at the
//! sender's and the receivers' capture points.
//!
//! - DDS message latency: first DATA/DATA_FRAG of (writer, sn) at the sender →
//!   sample complete at the receiver; also first→first and last→last.
//! - DDS submessage latency: per (writer, sn, fragment_starting_num), first IP
//!   fragment at the sender → last IP fragment at the receiver.
//! - Application layer (with ground truth): publish → receive, split into
//!   sender stack (publish → first on wire), wire, receiver stack.
//!
//! The [`Correlator`] is streaming: captures feed it sample records and
//! DATA_FRAG sightings plus their progress (watermarks); a sample is judged
//! once every capture has moved `window` past it, so memory is bounded by
//! the window, and the same code serves files and live agents.
//!
//! Every table is also capped by [`CorrelatorConfig`] (pending samples and
//! submessages, writers, flows and the bytes of their statistics), evicts
//! its least recently seen entry first and counts it in
//! [`CorrelationStats`]: forged writers cannot make it grow without bound.
//!
//! Files by job: [`item`] (what captures hand the correlator), [`layers`]
//! (levels, statuses, layers, stacks), [`rows`] (the rows and summaries it
//! writes), [`correlator`] (the judging), [`files`] (capture files and traces
//! merged into it), [`stats`], [`offset`], [`readers`], [`app`], [`explain`] (with [`cpuload`], its CPU evidence, and [`live_explain`], the same judged per window for `serve`).
//! The names below are re-exported for other crates; files of this crate
//! import from the file that defines a name.

pub mod app;
pub mod clock;
pub mod correlator;
pub mod cpuload;
pub mod explain;
pub mod files;
pub mod item;
pub mod layers;
pub mod live_explain;
pub mod offset;
pub mod readers;
pub mod rows;
pub mod stats;

pub use correlator::{ClockTrust, CorrelationStats, Correlator, CorrelatorConfig, FlowKey, FlowStats, RosOptions, MAX_FLOW_NODES};
pub use item::{FragSighting, Item};
pub use layers::{layer_group, Layer, Level, Stack, StackPart, Status, Timing, ROS_STACK_LAYERS};
pub use rows::{FlowSummary, LatencyRow, LayerRow, RosColumns, WriterRole};
