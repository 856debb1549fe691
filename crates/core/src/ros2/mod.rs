//! The ROS 2 layer: ros2_tracing traces (one per host, read with
//! `ddscope-trace`) joined to the wire samples of the captures.
//!
//! ```text
//! trace dir ──► TraceReader ──► Assembler ──► TraceItem (Publish, Take, Watermark)
//!                (babeltrace2)    (per thread: rclcpp → rcl → rmw publish;
//!                                  rmw_take → callback_start → callback_end)
//!                                         │
//!                                         ▼
//!      Correlator ◄── capture items (samples, watermarks), merged by time
//!         ├── TraceJoin: publish ↔ wire (source timestamp / publish window / publish order),
//!         │              take ↔ wire (receiver host, topic, source timestamp; without one —
//!         │              rmw_zenoh_cpp's rcl_take — the subscription's queue replayed),
//!         │              the rest trace to trace (same host or not: exact source
//!         │              timestamp, unique publish window, intra-process link)
//!         ├── callbacks: durations per callback (every layout, Galactic included)
//!         └── ChainTracker: publish inside a callback ← the take of that callback
//! ```
//!
//! The trace runs beside the captures in the one runner: each trace is read
//! on its own thread and the correlator takes the next batch from whichever
//! input (capture or trace) is furthest behind, exactly as for captures.

pub mod assemble;
pub mod callbacks;
pub mod caret_arch;
pub mod chain;
pub mod join;
pub mod layout;
pub mod source;
pub mod timing;

pub use assemble::{AssembleConfig, AssembleStats, Assembler, CallbackKind, CallbackRec, PublishRec, TakeRec, TraceItem, Unresolved, UnresolvedEntity};
pub use chain::{ChainConfig, ChainRow, ChainStats, ChainSummary, ChainTracker, Hop, HopLayers, PathSummary};
pub use join::{Delivery, Join, JoinConfig, JoinStats, TraceJoin};
pub use layout::{BaseLayout, LayoutSeen, TraceLayout};
pub use source::{TraceInput, TraceOutcome};
