//! Reading one capture file through the decoder and the sample tracker:
//! the loop every offline command runs.

use crate::capture::{read_capture, CaptureError, CaptureSummary};
use crate::decode::{Decoder, DecoderConfig};
use crate::events::SubmsgEvent;
use crate::samples::{SampleConfig, SampleRecord, SampleStats, SampleTracker};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Frames and bytes captured in one time bin (wire bandwidth over time).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct BandwidthBin {
    pub start_ns: i64,
    pub frames: u64,
    pub bytes: u64,
}

/// Width of the bandwidth bins.
pub const BANDWIDTH_BIN_NS: i64 = 100_000_000;

/// Everything known about a capture after reading it.
pub struct FileResult {
    pub decoder: Decoder,
    pub summary: CaptureSummary,
    pub samples: SampleStats,
    /// Wire bytes (frame lengths on the wire) per 100 ms, in time order of first appearance.
    pub bandwidth: Vec<BandwidthBin>,
}

/// Decodes `path` as capture point `name`: `on_event` sees every submessage,
/// `on_sample` every closed sample record.
pub fn analyse_file(
    path: &Path,
    name: &str,
    cfg: DecoderConfig,
    samples: SampleConfig,
    progress: Option<Arc<AtomicU64>>,
    on_event: &mut dyn FnMut(&SubmsgEvent),
    on_sample: &mut dyn FnMut(SampleRecord),
) -> Result<FileResult, CaptureError> {
    let mut dec = Decoder::new(name, cfg);
    let mut tracker = SampleTracker::new(samples);
    let mut bandwidth: Vec<BandwidthBin> = vec![];
    let summary = read_capture(path, progress, |p| {
        let start = p.ts_ns.div_euclid(BANDWIDTH_BIN_NS) * BANDWIDTH_BIN_NS;
        match bandwidth.last_mut() {
            Some(b) if b.start_ns == start => {
                b.frames += 1;
                b.bytes += p.orig_len as u64;
            }
            _ => match bandwidth.iter_mut().rev().take(16).find(|b| b.start_ns == start) {
                // Slightly out-of-order timestamps (several interfaces) land in their bin.
                Some(b) => {
                    b.frames += 1;
                    b.bytes += p.orig_len as u64;
                }
                None => bandwidth.push(BandwidthBin { start_ns: start, frames: 1, bytes: p.orig_len as u64 }),
            },
        }
        dec.packet(p, &mut |e| {
            on_event(e);
            tracker.on_event(e, on_sample);
        })
    })?;
    dec.finish();
    tracker.finish(on_sample);
    Ok(FileResult { decoder: dec, summary, samples: tracker.stats, bandwidth })
}
