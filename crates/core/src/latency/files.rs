//! Correlating capture files: one decoding thread per capture point, merged
//! by watermark (always reading from the capture that is furthest behind),
//! so that no capture runs ahead of the window and memory stays bounded.

use super::offset::{self, KeyTimes, OffsetEstimate};
use super::{Correlator, FragSighting, Item, LatencyRow};
use crate::capture::{read_capture_while, CaptureError, CaptureSummary};
use crate::decode::{DecodeStats, Decoder, DecoderConfig};
use crate::pipeline::analyse_file;
use crate::samples::SampleConfig;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub struct CaptureInput {
    pub path: PathBuf,
    pub name: String,
}

/// What each capture file held, after the run.
#[derive(Debug, Clone)]
pub struct CaptureOutcome {
    pub name: String,
    pub summary: CaptureSummary,
    pub decode: DecodeStats,
    pub diagnostics: Vec<crate::decode::Diagnostic>,
    pub bandwidth: Vec<crate::pipeline::BandwidthBin>,
    pub samples: crate::samples::SampleStats,
}

const BATCH: usize = 2048;
/// Watermarks are sent at most every 10 ms of capture time.
const WATERMARK_EVERY_NS: i64 = 10_000_000;

enum Msg {
    Items(Vec<Item>),
    Done(Result<CaptureOutcome, CaptureError>),
}

/// Runs the correlation over `inputs`; rows go to `out` as they are judged.
pub fn correlate_files(
    inputs: &[CaptureInput],
    correlator: &mut Correlator,
    progress: &[Arc<AtomicU64>],
    out: &mut dyn FnMut(LatencyRow),
) -> Result<Vec<CaptureOutcome>, CaptureError> {
    let mut receivers: Vec<Receiver<Msg>> = vec![];
    let mut handles = vec![];
    for (i, input) in inputs.iter().enumerate() {
        let (tx, rx) = sync_channel::<Msg>(8);
        receivers.push(rx);
        let input = input.clone();
        let prog = progress.get(i).cloned();
        handles.push(std::thread::spawn(move || {
            // Events and sample records interleave in capture order; the two
            // callbacks run one after the other, never at the same time.
            let batch = std::cell::RefCell::new(Vec::<Item>::with_capacity(BATCH));
            let mut last_wm = i64::MIN;
            let flush = |b: &mut Vec<Item>| {
                if !b.is_empty() {
                    let _ = tx.send(Msg::Items(std::mem::replace(b, Vec::with_capacity(BATCH))));
                }
            };
            let res = analyse_file(
                &input.path,
                &input.name,
                DecoderConfig::default(),
                SampleConfig { timeout_ns: 2_000_000_000, ..SampleConfig::default() },
                prog,
                &mut |e| {
                    let mut b = batch.borrow_mut();
                    if let Some(f) = FragSighting::of(e) {
                        b.push(Item::Frag(f));
                    }
                    if e.ts_ns.saturating_sub(last_wm) >= WATERMARK_EVERY_NS {
                        last_wm = e.ts_ns;
                        b.push(Item::Watermark(e.ts_ns));
                    }
                    if b.len() >= BATCH {
                        flush(&mut b);
                    }
                },
                &mut |r| batch.borrow_mut().push(Item::Sample(r)),
            );
            let mut b = batch.into_inner();
            b.push(Item::End);
            flush(&mut b);
            let outcome = res.map(|r| CaptureOutcome {
                name: input.name.clone(),
                summary: r.summary,
                decode: r.decoder.stats,
                diagnostics: r.decoder.diagnostics,
                bandwidth: r.bandwidth,
                samples: r.samples,
            });
            let _ = tx.send(Msg::Done(outcome));
        }));
    }
    let n = inputs.len();
    let mut wm = vec![i64::MIN; n];
    let mut ended = vec![false; n];
    let mut outcomes: Vec<Option<Result<CaptureOutcome, CaptureError>>> = (0..n).map(|_| None).collect();
    loop {
        // The capture furthest behind goes next.
        let Some(c) = (0..n).filter(|&c| outcomes[c].is_none()).min_by_key(|&c| (ended[c], wm[c])) else { break };
        match receivers[c].recv() {
            Ok(Msg::Items(items)) => {
                for it in items {
                    match &it {
                        Item::Watermark(t) => wm[c] = *t,
                        Item::End => ended[c] = true,
                        _ => {}
                    }
                    correlator.push(c, it, out);
                }
            }
            Ok(Msg::Done(r)) => outcomes[c] = Some(r),
            Err(_) => outcomes[c] = Some(Err(CaptureError::Format { path: inputs[c].path.clone(), detail: "decoder thread stopped".into() })),
        }
    }
    for h in handles {
        let _ = h.join();
    }
    correlator.finish(out);
    outcomes.into_iter().map(|o| o.expect("every capture finished")).collect()
}

/// Reads the first `span_ns` of each capture (at most `max_keys` submessages)
/// and estimates every capture's offset relative to the first one.
pub fn estimate_offsets(
    inputs: &[CaptureInput],
    span_ns: i64,
    max_keys: usize,
) -> Result<Vec<Result<OffsetEstimate, offset::OffsetError>>, CaptureError> {
    let mut keys = vec![];
    for input in inputs {
        let mut kt = KeyTimes::with_limit(max_keys);
        let mut dec = Decoder::new(&input.name, DecoderConfig::default());
        let mut start: Option<i64> = None;
        read_capture_while(&input.path, None, |p| {
            let s = *start.get_or_insert(p.ts_ns);
            dec.packet(p, &mut |e| kt.add(e));
            p.ts_ns - s < span_ns && !kt.is_full()
        })?;
        keys.push(kt);
    }
    Ok((1..keys.len()).map(|i| offset::estimate(&keys[0], &keys[i])).collect())
}
