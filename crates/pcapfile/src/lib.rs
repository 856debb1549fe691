//! Capture files, both ways: [`CaptureReader`] streams frames out of pcap and
//! pcapng (µs/ns, several interfaces, any `if_tsresol`/`if_tsoffset`,
//! gzip-compressed, from regular files, FIFOs or stdin) with constant memory;
//! [`PcapngWriter`] writes pcapng with nanosecond timestamps and interface
//! statistics. Every part of ddscope that reads or writes a capture file uses
//! these two types.

mod read;
mod write;

pub use read::{CaptureError, CaptureReader, CaptureSummary, InterfaceInfo, Packet};
pub use write::{InterfaceOptions, PcapngWriter};
