//! Reads ros2_tracing traces: the LTTng-UST `ros2:*` events that `ros2 trace`
//! records, as typed [`Ros2Event`]s with their time and context.
//!
//! The CTF decoding is done by libbabeltrace2, the reference reader, linked
//! from the system (docs/tracing.md). A trace directory and a live session are
//! the same reader with another source component:
//!
//! ```no_run
//! use ddscope_trace::{TraceReader, SessionNotFound};
//! # fn main() -> Result<(), ddscope_trace::TraceError> {
//! let mut reader = TraceReader::open("/root/.ros/tracing/session-1")?;
//! while let Some(rec) = reader.next_record()? {
//!     println!("{} {} {:?}", rec.time.ns_from_origin, rec.event.name(), rec.context.vtid);
//! }
//! println!("not decoded: {:?}", reader.stats().unknown_by_name);
//!
//! let live = TraceReader::open_live("net://localhost/host/robot1/session-1", SessionNotFound::Continue)?;
//! # drop(live); Ok(()) }
//! ```

mod decode;
pub mod entities;
mod error;
pub mod event;
mod ffi;
mod metadata;
mod reader;

pub use entities::{CallbackOwner, EntityLimits, EntityStats, EntityTable, Endpoint, EndpointKind, Node, ServiceEndpoint, Timer};
pub use error::TraceError;
pub use event::{EventContext, EventTime, FieldValue, Gid, ProcName, Record, Ros2Event, DECODED_EVENTS, GID_SIZE};
pub use reader::{ClockInfo, Layout, Poll, ReadStats, ReaderOptions, SessionNotFound, Source, TraceInfo, TraceReader};
