//! A trace as a source of the one runner: read on its own thread with
//! `ddscope-trace` (streaming, one babeltrace2 message batch at a time),
//! assembled into [`TraceItem`]s and handed over in batches with watermarks.

use super::assemble::{AssembleConfig, AssembleStats, Assembler, TraceItem, UnresolvedEntity};
use super::layout::{LayoutSeen, TraceLayout};
use crate::latency::stats::DistSummary;
use crate::pipeline::Batcher;
use ddscope_trace::TraceReader;
use serde::Serialize;
use std::path::PathBuf;

/// A trace directory and the capture point (host) it belongs to.
#[derive(Debug, Clone)]
pub struct TraceInput {
    /// Capture-point name of the host (`pc1` for `--trace pc1=DIR` or `pc1.lttng/`).
    pub host: String,
    pub path: PathBuf,
}

/// What a trace held, after the run.
#[derive(Debug, Clone, Serialize)]
pub struct TraceOutcome {
    pub host: String,
    pub path: String,
    /// Events read, and `ros2:*` events decoded.
    pub events: u64,
    pub ros2_events: u64,
    /// Events read and not decoded (other providers, other ros2 events, malformed, untimed).
    pub not_decoded: u64,
    /// Events LTTng lost (discard mode): publish-order joins after a loss are not trustworthy.
    pub discarded_events: u64,
    /// Which layout the trace has (`humble/iron`, `jazzy+`, `galactic`, `…+caret`) and what it allows.
    pub layout: TraceLayout,
    pub layout_seen: LayoutSeen,
    /// How publishes and takes of this layout are joined.
    pub joins: &'static str,
    pub assemble: AssembleStats,
    /// Publishers and subscriptions the trace does not resolve (at most 64), with what is known of them.
    pub unresolved: Vec<UnresolvedEntity>,
    /// `rmw_publish.timestamp − event time` (Jazzy): how far the trace clock
    /// (CLOCK_MONOTONIC + the realtime offset at session start) is from CLOCK_REALTIME.
    pub drift: DistSummary,
    /// The read stopped here (everything before it was used).
    pub error: Option<String>,
}

impl TraceOutcome {
    /// The outcome of a trace whose reader stopped before it delivered anything.
    pub fn failed(input: &TraceInput, error: String) -> TraceOutcome {
        TraceOutcome {
            host: input.host.clone(),
            path: input.path.display().to_string(),
            events: 0,
            ros2_events: 0,
            not_decoded: 0,
            discarded_events: 0,
            layout: LayoutSeen::default().name(),
            layout_seen: LayoutSeen::default(),
            joins: LayoutSeen::default().joins(),
            assemble: Default::default(),
            unresolved: vec![],
            drift: Default::default(),
            error: Some(error),
        }
    }

    /// One line about the trace's clock against realtime (Jazzy traces only).
    pub fn drift_line(&self) -> Option<String> {
        (self.drift.count > 0).then(|| {
            format!(
                "trace clock vs CLOCK_REALTIME (rmw_publish.timestamp − event time, {} publishes): min {:+.3} µs, median {:+.3} µs, max {:+.3} µs",
                self.drift.count,
                self.drift.min_ms * 1e3,
                self.drift.p50_ms * 1e3,
                self.drift.max_ms * 1e3
            )
        })
    }
}

/// Opens the trace at `input.path` (errors name the path, one line), as
/// every input is opened: [`crate::source::SourceSpec::open`].
pub fn open(input: &TraceInput) -> Result<TraceReader, ddscope_trace::TraceError> {
    crate::source::open_trace_dir(&input.path)
}

/// Reads `reader` to its end, handing batches of `batch` items to `deliver`.
pub fn run(input: &TraceInput, mut reader: TraceReader, cfg: AssembleConfig, batch: usize, deliver: &mut dyn FnMut(Vec<TraceItem>)) -> TraceOutcome {
    let mut asm = Assembler::new(cfg);
    // the assembler places the watermarks itself (it knows which publishes are still open)
    let mut buf = Batcher::new(batch, deliver);
    let mut error = None;
    loop {
        match reader.next_record() {
            Ok(Some(rec)) => asm.push(&rec, &mut |it| buf.push(it)),
            Ok(None) => break,
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    asm.finish(&mut |it| buf.push(it));
    buf.flush();
    let st = reader.stats();
    TraceOutcome {
        host: input.host.clone(),
        path: input.path.display().to_string(),
        events: st.events,
        ros2_events: st.ros2_events,
        not_decoded: st.not_decoded(),
        discarded_events: st.discarded_events,
        layout: asm.layout.name(),
        layout_seen: asm.layout.clone(),
        joins: asm.layout.joins(),
        assemble: asm.stats.clone(),
        unresolved: asm.unresolved(),
        drift: asm.drift.summary(),
        error,
    }
}
