//! Zero-copy views over the bytes of a captured frame, and the emitters that
//! write them: link layer (Ethernet with 802.1Q/802.1ad tags, Linux cooked
//! SLL/SLL2, NULL/loopback, raw IP), IPv4/IPv6 with fragment information,
//! UDP, and RTPS (header, every standard submessage, sequence-number and
//! fragment-number sets, parameter lists, locators, CDR primitives).
//!
//! Every header has a plain-data representation with `parse` and `emit`
//! (see [`emit::Emit`]), in the manner of smoltcp's `Repr`s; parsing and
//! emitting are checked against each other by property tests
//! (`tests/roundtrip.rs`) and against tshark's dissectors
//! (`tests/tshark_oracle.rs`).
//!
//! Nothing here does I/O or keeps state, and nothing panics on hostile input:
//! every accessor that could run past the end of the buffer returns
//! [`WireError::Truncated`] instead, and so does every emitter given a
//! buffer too short. Parsing does not allocate. Stateful work (IP
//! reassembly, discovery, INFO_* context) lives in `ddscope-core`.

pub mod cdr;
pub mod checksum;
pub mod emit;
pub mod error;
pub mod guid;
pub mod ip;
pub mod link;
pub mod locator;
pub mod plist;
pub mod rtps;
pub mod tcp;
pub mod udp;

pub use emit::Emit;
pub use error::WireError;
pub use guid::{EntityId, Guid, GuidPrefix};
