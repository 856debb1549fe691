//! Correlating capture files: one runner thread per capture point, merged
//! by watermark (always reading from the capture that is furthest behind),
//! so that no capture runs ahead of the window and memory stays bounded.

use super::offset::{self, KeyTimes, OffsetEstimate};
use super::correlator::Correlator;
use super::item::Item;
use super::rows::LatencyRow;
use crate::decode::{DecodeStats, DecoderConfig};
use crate::pipeline::merge::BATCH;
use crate::pipeline::{Analysis, Bandwidth, BandwidthBin, CapturePoint, CorrelationFeed, LinkLoad, LinkLoadConfig, Merge, Merger, Progress};
use crate::samples::SampleConfig;
use crate::sink::RowSink;
use crate::ros2::{AssembleConfig, ChainRow, TraceInput, TraceItem, TraceOutcome};
use crate::source::{open_file, CaptureError, CaptureSummary, Packet};
use ddscope_trace::TraceReader;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
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
    pub bandwidth: Vec<BandwidthBin>,
    pub samples: crate::samples::SampleStats,
    /// What the link carried over time, in fine bins (with [`FileDecoding::link_load`]).
    pub link: Option<LinkLoad>,
}

/// How the capture files are decoded for correlation.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileDecoding {
    pub decoder: DecoderConfig,
    pub samples: SampleConfig,
    /// The correlation window: a trace's open publish/take/callback older than this is closed.
    pub window_ns: i64,
    /// The trace assembler's caps (its `max_open_ns` is the window when there is one).
    pub assemble: AssembleConfig,
    /// Keep each capture's link load in fine bins (`latency --explain`'s queueing evidence).
    pub link_load: Option<LinkLoadConfig>,
}

/// Runs the correlation over `inputs`; rows go to `out` as they are judged.
pub fn correlate_files(
    inputs: &[CaptureInput],
    decoding: FileDecoding,
    correlator: &mut Correlator,
    progress: &[Arc<AtomicU64>],
    out: &mut dyn RowSink<LatencyRow>,
) -> Result<Vec<CaptureOutcome>, CaptureError> {
    correlate_inputs(inputs, vec![], decoding, correlator, progress, out, &mut |_: ChainRow| {}).map(|(c, _)| c)
}

/// A batch of either kind of input, as the merge carries it.
enum In {
    Capture(Vec<Item>),
    Trace(Vec<TraceItem>),
}

impl Progress for In {
    fn progress(&self) -> (Option<i64>, bool) {
        match self {
            In::Capture(b) => b.progress(),
            In::Trace(b) => b.progress(),
        }
    }
}

enum Out {
    Capture(Result<CaptureOutcome, CaptureError>),
    Trace(Box<TraceOutcome>),
}

/// Runs the correlation over capture files and traces: one thread per
/// input, merged by watermark (the input furthest behind goes next).
/// `traces` are opened readers in the order of the correlator's traces
/// ([`Correlator::add_trace`]). Latency rows go to `out`, chain rows to `chain_out`.
pub fn correlate_inputs(
    inputs: &[CaptureInput],
    traces: Vec<(TraceInput, TraceReader)>,
    decoding: FileDecoding,
    correlator: &mut Correlator,
    progress: &[Arc<AtomicU64>],
    out: &mut dyn RowSink<LatencyRow>,
    chain_out: &mut dyn RowSink<ChainRow>,
) -> Result<(Vec<CaptureOutcome>, Vec<TraceOutcome>), CaptureError> {
    // Open every input before starting: a missing file fails the run at once.
    let mut sources = vec![];
    for (i, input) in inputs.iter().enumerate() {
        sources.push(open_file(&input.path, progress.get(i).cloned())?);
    }
    let mut merge: Merge<In, Out> = Merge::new();
    for (input, mut src) in inputs.iter().cloned().zip(sources) {
        merge.spawn(0, move |send| {
            let mut point = CapturePoint::new(&input.name, decoding.decoder, Some(decoding.samples));
            let mut feed = CorrelationFeed::new(BATCH, |items| {
                send(In::Capture(items));
            });
            let mut bandwidth = Bandwidth::default();
            let mut link = decoding.link_load.map(LinkLoad::new);
            // A file source ends on read errors (kept in its summary); it never fails a poll.
            let _ = match link.as_mut() {
                Some(l) => point.run(&mut src, &mut (&mut feed, &mut bandwidth, l), &mut || true),
                None => point.run(&mut src, &mut (&mut feed, &mut bandwidth), &mut || true),
            };
            drop(feed);
            let summary = src.into_summary();
            point.decoder.stats.note_capture(&summary);
            Out::Capture(Ok(CaptureOutcome {
                name: input.name.clone(),
                summary,
                decode: point.decoder.stats.clone(),
                diagnostics: std::mem::take(&mut point.decoder.diagnostics),
                bandwidth: bandwidth.bins,
                samples: point.tracker.map(|t| t.stats).unwrap_or_default(),
                link,
            }))
        });
    }
    let n = inputs.len();
    let trace_inputs: Vec<TraceInput> = traces.iter().map(|(t, _)| t.clone()).collect();
    for (input, reader) in traces {
        let open = if decoding.window_ns > 0 { decoding.window_ns } else { decoding.assemble.max_open_ns };
        let cfg = AssembleConfig { max_open_ns: open, ..decoding.assemble };
        merge.spawn(0, move |send| {
            let outcome = crate::ros2::source::run(&input, reader, cfg, BATCH, &mut |items| {
                send(In::Trace(items));
            });
            Out::Trace(Box::new(outcome))
        });
    }
    let mut into = Correlate {
        n,
        correlator,
        out,
        chain_out,
        outcomes: (0..n).map(|_| None).collect(),
        trace_outcomes: (0..trace_inputs.len()).map(|_| None).collect(),
        trace_inputs,
    };
    merge.run(&mut into);
    let Correlate { correlator, out, chain_out, outcomes, trace_outcomes, .. } = into;
    correlator.finish(out);
    for r in correlator.take_chain_rows() {
        chain_out.take(r);
    }
    let stopped = |c: usize| CaptureError::Format { path: inputs[c].path.clone(), detail: "decoder thread stopped".into() };
    let captures = outcomes.into_iter().enumerate().map(|(c, o)| o.unwrap_or_else(|| Err(stopped(c)))).collect::<Result<Vec<_>, _>>()?;
    Ok((captures, trace_outcomes.into_iter().flatten().collect()))
}

/// The correlator fed by the merge: inputs `0..n` are captures, the rest traces.
struct Correlate<'a> {
    n: usize,
    correlator: &'a mut Correlator,
    out: &'a mut dyn RowSink<LatencyRow>,
    chain_out: &'a mut dyn RowSink<ChainRow>,
    outcomes: Vec<Option<Result<CaptureOutcome, CaptureError>>>,
    trace_outcomes: Vec<Option<TraceOutcome>>,
    trace_inputs: Vec<TraceInput>,
}

impl Merger<In, Out> for Correlate<'_> {
    fn batch(&mut self, c: usize, b: In) {
        match b {
            In::Capture(items) => {
                for it in items {
                    self.correlator.push(c, it, self.out);
                }
            }
            In::Trace(items) => {
                for it in items {
                    self.correlator.push_trace(c - self.n, it, self.out);
                }
            }
        }
        for r in self.correlator.take_chain_rows() {
            self.chain_out.take(r);
        }
    }

    fn done(&mut self, c: usize, o: Option<Out>) {
        let n = self.n;
        match o {
            Some(Out::Capture(r)) => self.outcomes[c] = Some(r),
            Some(Out::Trace(t)) => self.trace_outcomes[c - n] = Some(*t),
            // the capture's outcome stays None: an error naming the file
            None if c < n => {}
            None => {
                let t = &self.trace_inputs[c - n];
                self.trace_outcomes[c - n] = Some(TraceOutcome::failed(t, "trace reader thread stopped".into()));
                self.correlator.push_trace(c - n, TraceItem::End, self.out);
            }
        }
    }
}

/// Offset-estimation keys from the first `span_ns` of a capture: every
/// submessage up to and including the first frame past the span (or the
/// frame that filled the key table), nothing after it.
struct KeyWindow<'a> {
    keys: &'a mut KeyTimes,
    span_ns: i64,
    start: Option<i64>,
    stop_after_frame: bool,
    closed: bool,
}

impl Analysis for KeyWindow<'_> {
    fn frame(&mut self, p: &Packet<'_>) {
        if self.stop_after_frame {
            self.closed = true;
        }
        let start = *self.start.get_or_insert(p.ts_ns);
        if p.ts_ns.saturating_sub(start) >= self.span_ns {
            self.stop_after_frame = true;
        }
    }

    fn event(&mut self, e: &crate::events::SubmsgEvent) {
        if !self.closed {
            self.keys.add(e);
            if self.keys.is_full() {
                self.stop_after_frame = true;
            }
        }
    }
}

/// Reads the first `span_ns` of each capture (at most `max_keys` submessages)
/// and estimates every capture's offset relative to the first one, with its coarse offset
/// ([`offset::coarse_offset`], to pair the clock tracker's keys). The captures
/// are read on one thread each; IP fragments are skipped unread (the exchanges
/// that bound the clocks are small datagrams: a fragmented one is not needed).
pub fn estimate_offsets(
    inputs: &[CaptureInput],
    decoder: DecoderConfig,
    span_ns: i64,
    max_keys: usize,
) -> Result<Vec<(Result<OffsetEstimate, offset::OffsetError>, Option<i64>)>, CaptureError> {
    let keys: Vec<Result<KeyTimes, CaptureError>> = std::thread::scope(|s| {
        let handles: Vec<_> = inputs
            .iter()
            .map(|input| {
                s.spawn(move || -> Result<KeyTimes, CaptureError> {
                    let mut kt = KeyTimes::with_limit(max_keys);
                    let mut src = open_file(&input.path, None)?;
                    let mut point = CapturePoint::new(&input.name, decoder, None);
                    let mut window = KeyWindow { keys: &mut kt, span_ns, start: None, stop_after_frame: false, closed: false };
                    while !window.closed {
                        let poll = crate::source::PacketSource::poll(&mut src, &mut |p| {
                            if !offset::is_ip_fragment(p) {
                                point.push(p, &mut window)
                            }
                        });
                        match poll {
                            Ok(crate::source::Poll::Ended) | Err(_) => break,
                            Ok(_) => {}
                        }
                    }
                    Ok(kt)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("offset reader thread")).collect()
    });
    let keys = keys.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok((1..keys.len()).map(|i| (offset::estimate(&keys[0], &keys[i]), offset::coarse_offset(&keys[0], &keys[i]))).collect())
}
