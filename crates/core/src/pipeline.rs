//! Reading one capture file through the decoder and the sample tracker:
//! the loop every offline command runs.

use crate::capture::{read_capture, CaptureError, CaptureSummary};
use crate::decode::{Decoder, DecoderConfig};
use crate::events::SubmsgEvent;
use crate::samples::{SampleConfig, SampleRecord, SampleStats, SampleTracker};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Everything known about a capture after reading it.
pub struct FileResult {
    pub decoder: Decoder,
    pub summary: CaptureSummary,
    pub samples: SampleStats,
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
    let summary = read_capture(path, progress, |p| {
        dec.packet(p, &mut |e| {
            on_event(e);
            tracker.on_event(e, on_sample);
        })
    })?;
    dec.finish();
    tracker.finish(on_sample);
    Ok(FileResult { decoder: dec, summary, samples: tracker.stats })
}
