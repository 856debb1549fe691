//! The Zenoh 1.x wire protocol (protocol version 0x09, as eclipse-zenoh's
//! `zenoh-protocol`/`zenoh-codec` 1.0–1.10 write it), the Zenoh 0.11 one
//! (protocol version 0x08, zenoh-codec 0.11.0-dev: what rmw_zenoh_cpp of 2024
//! speaks; [`Proto`] picks the layouts) and rmw_zenoh's ROS 2 conventions on
//! top of them, as zero-copy views: no I/O, no state, no allocation while
//! parsing, and no panic on any input — every read that would run past the
//! end returns [`codec::ZError::Truncated`].
//!
//! - [`codec`]: variable-length integers, slices, extensions, Zenoh ids;
//! - [`transport`]: the messages of a batch (Init, Open, Close, KeepAlive,
//!   Frame, Fragment, Join, OAM);
//! - [`network`]: Push, Declare, Interest, Request, Response, ResponseFinal,
//!   OAM, and the Put/Del/Query/Reply/Err they carry;
//! - [`rmw`]: rmw_zenoh's data key expressions, sample attachments,
//!   liveliness tokens and gids;
//! - [`emit`]: writers for tests and generated traffic.
//!
//! Stateful work — TCP reassembly, sessions, key-expression declarations,
//! defragmentation — lives in `ddscope-core` (`zenoh` module).

pub mod codec;
pub mod emit;
pub mod network;
pub mod rmw;
pub mod transport;

pub use codec::{Proto, Reader, ZError, ZResult, ZenohId};

/// Zenoh's default port (routers listen on it; rmw_zenoh's router `tcp/[::]:7447`).
pub const DEFAULT_PORT: u16 = 7447;
/// Zenoh's multicast scouting port.
pub const SCOUTING_PORT: u16 = 7446;
/// Marker in the `vendor_id` column of events decoded from Zenoh. RTPS
/// vendor ids are OMG-assigned (0x01xx); Zenoh has none, so ddscope uses
/// this value, which no RTPS vendor holds.
pub const VENDOR_MARKER: u16 = 0x5a00;
