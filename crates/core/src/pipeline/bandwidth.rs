//! Wire bandwidth over time: frames and bytes (lengths on the wire) per bin.

use super::Analysis;
use crate::source::Packet;

/// Frames and bytes captured in one time bin.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct BandwidthBin {
    pub start_ns: i64,
    pub frames: u64,
    pub bytes: u64,
}

/// Width of the bandwidth bins.
pub const BANDWIDTH_BIN_NS: i64 = 100_000_000;

/// Bins in order of first appearance. Memory is one bin per 100 ms of
/// capture time; frames whose timestamp jumps far back (several interfaces)
/// land in one of the 16 most recent bins or open a new one.
#[derive(Debug, Default)]
pub struct Bandwidth {
    pub bins: Vec<BandwidthBin>,
}

impl Analysis for Bandwidth {
    fn frame(&mut self, p: &Packet<'_>) {
        let start = p.ts_ns.div_euclid(BANDWIDTH_BIN_NS) * BANDWIDTH_BIN_NS;
        let bytes = p.orig_len as u64;
        match self.bins.iter_mut().rev().take(16).find(|b| b.start_ns == start) {
            Some(b) => {
                b.frames += 1;
                b.bytes += bytes;
            }
            None => self.bins.push(BandwidthBin { start_ns: start, frames: 1, bytes }),
        }
    }
}
