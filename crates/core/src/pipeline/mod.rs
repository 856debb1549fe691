//! The one runner: a [`PacketSource`] driven through decoding and sample
//! tracking into an [`Analysis`]. Every command — `dissect`, `topics`,
//! `latency`, `report`, `live`, `agent` — goes through [`CapturePoint`];
//! nothing else wires a decoder to a tracker.
//!
//! ```text
//! source ──frames──► Decoder ──events──► SampleTracker ──samples──┐
//!    │                  │                                         ▼
//!    │                  ├──────────── events ──────────────► Analysis (topics, rows, feed, exporters, …)
//!    └──── frames ──────┴─────────── datagrams ────────────►
//! ```
//!
//! A datagram is every UDP datagram the decoder completes (whole, or put
//! back together by its one IP reassembly), with each of its frames: an
//! analysis that needs IP datagrams reads them here instead of parsing and
//! reassembling frames itself.
//!
//! Analyses compose: a tuple `(A, B)` is an analysis that feeds both, and
//! `Option<A>` one that may be absent, so the hot path stays monomorphised.

mod bandwidth;
mod linkload;
mod feed;
pub mod merge;
mod stages;

pub use bandwidth::{Bandwidth, BandwidthBin, BANDWIDTH_BIN_NS};
pub use linkload::{LinkLoad, LinkLoadConfig};
pub use feed::{CorrelationFeed, IDLE_WATERMARK_EVERY_NS, WATERMARK_EVERY_NS};
pub use merge::{Batcher, Mark, Marked, Merge, Merger, Progress};
pub use stages::{DomainFilter, FrameWriter};

use crate::decode::{DecodeSink, Decoder, DecoderConfig};
pub use crate::decode::{Datagram, DatagramFrame};
use crate::events::SubmsgEvent;
use crate::samples::{SampleConfig, SampleRecord, SampleTracker};
use crate::source::{CaptureError, CaptureSummary, Packet, PacketSource, Poll};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// A stage that consumes what one capture point produces. Every method has
/// an empty default: implement what the analysis needs.
pub trait Analysis {
    /// Every frame, before it is decoded.
    fn frame(&mut self, _p: &Packet<'_>) {}
    /// Every UDP datagram the decoder completes (whole, or reassembled from
    /// IP fragments; RTPS or not), with its frames, before its submessages.
    /// Only called when [`wants_datagrams`](Self::wants_datagrams) says so.
    fn datagram(&mut self, _d: &Datagram<'_>) {}
    /// True when `datagram` is implemented: the decoder builds datagrams
    /// only for analyses that ask (implement both).
    fn wants_datagrams(&self) -> bool {
        false
    }
    /// Every RTPS submessage.
    fn event(&mut self, _e: &SubmsgEvent) {}
    /// Every closed sample record (and supplement record).
    fn sample(&mut self, _r: &SampleRecord) {}
    /// A live source had nothing for a while; the wall clock is at `now_ns`.
    fn idle(&mut self, _now_ns: i64) {}
    /// The source ended and the decoder and tracker have been flushed.
    fn end(&mut self) {}
}

impl<A: Analysis + ?Sized> Analysis for &mut A {
    fn frame(&mut self, p: &Packet<'_>) {
        (**self).frame(p)
    }
    fn datagram(&mut self, d: &Datagram<'_>) {
        (**self).datagram(d)
    }
    fn wants_datagrams(&self) -> bool {
        (**self).wants_datagrams()
    }
    fn event(&mut self, e: &SubmsgEvent) {
        (**self).event(e)
    }
    fn sample(&mut self, r: &SampleRecord) {
        (**self).sample(r)
    }
    fn idle(&mut self, now_ns: i64) {
        (**self).idle(now_ns)
    }
    fn end(&mut self) {
        (**self).end()
    }
}

impl<A: Analysis + ?Sized> Analysis for Box<A> {
    fn frame(&mut self, p: &Packet<'_>) {
        (**self).frame(p)
    }
    fn datagram(&mut self, d: &Datagram<'_>) {
        (**self).datagram(d)
    }
    fn wants_datagrams(&self) -> bool {
        (**self).wants_datagrams()
    }
    fn event(&mut self, e: &SubmsgEvent) {
        (**self).event(e)
    }
    fn sample(&mut self, r: &SampleRecord) {
        (**self).sample(r)
    }
    fn idle(&mut self, now_ns: i64) {
        (**self).idle(now_ns)
    }
    fn end(&mut self) {
        (**self).end()
    }
}

impl<A: Analysis> Analysis for Option<A> {
    fn frame(&mut self, p: &Packet<'_>) {
        if let Some(a) = self {
            a.frame(p)
        }
    }
    fn datagram(&mut self, d: &Datagram<'_>) {
        if let Some(a) = self {
            a.datagram(d)
        }
    }
    fn wants_datagrams(&self) -> bool {
        self.as_ref().is_some_and(|a| a.wants_datagrams())
    }
    fn event(&mut self, e: &SubmsgEvent) {
        if let Some(a) = self {
            a.event(e)
        }
    }
    fn sample(&mut self, r: &SampleRecord) {
        if let Some(a) = self {
            a.sample(r)
        }
    }
    fn idle(&mut self, now_ns: i64) {
        if let Some(a) = self {
            a.idle(now_ns)
        }
    }
    fn end(&mut self) {
        if let Some(a) = self {
            a.end()
        }
    }
}

impl<A: Analysis + ?Sized> Analysis for Vec<Box<A>> {
    fn frame(&mut self, p: &Packet<'_>) {
        self.iter_mut().for_each(|a| a.frame(p))
    }
    fn datagram(&mut self, d: &Datagram<'_>) {
        self.iter_mut().for_each(|a| a.datagram(d))
    }
    fn wants_datagrams(&self) -> bool {
        self.iter().any(|a| a.wants_datagrams())
    }
    fn event(&mut self, e: &SubmsgEvent) {
        self.iter_mut().for_each(|a| a.event(e))
    }
    fn sample(&mut self, r: &SampleRecord) {
        self.iter_mut().for_each(|a| a.sample(r))
    }
    fn idle(&mut self, now_ns: i64) {
        self.iter_mut().for_each(|a| a.idle(now_ns))
    }
    fn end(&mut self) {
        self.iter_mut().for_each(|a| a.end())
    }
}

macro_rules! tuple_analysis {
    ($($name:ident . $idx:tt),+) => {
        impl<$($name: Analysis),+> Analysis for ($($name,)+) {
            fn frame(&mut self, p: &Packet<'_>) { $(self.$idx.frame(p);)+ }
            fn datagram(&mut self, d: &Datagram<'_>) { $(self.$idx.datagram(d);)+ }
            fn wants_datagrams(&self) -> bool { false $(|| self.$idx.wants_datagrams())+ }
            fn event(&mut self, e: &SubmsgEvent) { $(self.$idx.event(e);)+ }
            fn sample(&mut self, r: &SampleRecord) { $(self.$idx.sample(r);)+ }
            fn idle(&mut self, now_ns: i64) { $(self.$idx.idle(now_ns);)+ }
            fn end(&mut self) { $(self.$idx.end();)+ }
        }
    };
}
tuple_analysis!(A.0, B.1);
tuple_analysis!(A.0, B.1, C.2);
tuple_analysis!(A.0, B.1, C.2, D.3);
tuple_analysis!(A.0, B.1, C.2, D.3, E.4);

/// An analysis made of two closures: one per submessage, one per sample record.
pub struct Callbacks<E, S> {
    pub on_event: E,
    pub on_sample: S,
}

impl<E: FnMut(&SubmsgEvent), S: FnMut(&SampleRecord)> Analysis for Callbacks<E, S> {
    fn event(&mut self, e: &SubmsgEvent) {
        (self.on_event)(e)
    }
    fn sample(&mut self, r: &SampleRecord) {
        (self.on_sample)(r)
    }
}

/// Decoding state of one capture point: the decoder and (when some analysis
/// wants sample records) the sample tracker.
pub struct CapturePoint {
    pub decoder: Decoder,
    pub tracker: Option<SampleTracker>,
    ended: bool,
}

impl CapturePoint {
    /// `samples: None` skips sample tracking (no analysis wants sample records).
    pub fn new(name: &str, decoder: DecoderConfig, samples: Option<SampleConfig>) -> CapturePoint {
        CapturePoint { decoder: Decoder::new(name, decoder), tracker: samples.map(SampleTracker::new), ended: false }
    }

    pub fn name(&self) -> &Arc<str> {
        self.decoder.capture_name()
    }

    /// One frame through the decoder (and tracker) into `a`.
    #[inline]
    pub fn push<A: Analysis + ?Sized>(&mut self, p: &Packet<'_>, a: &mut A) {
        a.frame(p);
        let datagrams = a.wants_datagrams();
        self.decoder.packet_to(p, datagrams, &mut PointSink { a, tracker: &mut self.tracker });
    }

    /// Time moved on to `now_ns` without frames (live): samples whose
    /// timeouts passed are closed, and `a` hears of the idle time.
    pub fn idle<A: Analysis + ?Sized>(&mut self, now_ns: i64, a: &mut A) {
        if let Some(t) = self.tracker.as_mut() {
            t.advance(now_ns, &mut |r| a.sample(&r));
        }
        a.idle(now_ns);
    }

    /// One poll of `src` into `a`: what the source reported.
    pub fn step<S: PacketSource + ?Sized, A: Analysis + ?Sized>(&mut self, src: &mut S, a: &mut A) -> anyhow::Result<Poll> {
        let poll = src.poll(&mut |p| self.push(p, a))?;
        if poll == Poll::Idle {
            self.idle(wall_clock_ns(), a);
        }
        Ok(poll)
    }

    /// Drives `src` to its end (or until `keep_going` says stop), then finishes.
    pub fn run<S: PacketSource + ?Sized, A: Analysis + ?Sized>(
        &mut self,
        src: &mut S,
        a: &mut A,
        keep_going: &mut dyn FnMut() -> bool,
    ) -> anyhow::Result<()> {
        while keep_going() {
            if self.step(src, a)? == Poll::Ended {
                break;
            }
        }
        self.finish(a);
        Ok(())
    }

    /// The source has ended: incomplete IP datagrams and open samples are
    /// counted and closed, then `a.end()`. Idempotent.
    pub fn finish<A: Analysis + ?Sized>(&mut self, a: &mut A) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.decoder.finish();
        if let Some(t) = self.tracker.as_mut() {
            t.finish(&mut |r| a.sample(&r));
        }
        a.end();
    }
}

/// What the decoder completes, into an analysis (and events through the tracker).
struct PointSink<'a, A: ?Sized> {
    a: &'a mut A,
    tracker: &'a mut Option<SampleTracker>,
}

impl<A: Analysis + ?Sized> DecodeSink for PointSink<'_, A> {
    #[inline]
    fn datagram(&mut self, d: &Datagram<'_>) {
        self.a.datagram(d)
    }
    #[inline]
    fn event(&mut self, e: &SubmsgEvent) {
        let PointSink { a, tracker } = self;
        a.event(e);
        if let Some(t) = tracker.as_mut() {
            t.on_event(e, &mut |r| a.sample(&r));
        }
    }
}

/// Nanoseconds since the Unix epoch, by the wall clock.
pub fn wall_clock_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// Everything known about a capture file after reading it.
pub struct FileResult {
    pub decoder: Decoder,
    pub summary: CaptureSummary,
    /// The sample tracker's counters (all zero when samples were not tracked).
    pub samples: crate::samples::SampleStats,
}

/// Reads the capture file at `path` as capture point `name` into `a`
/// (`samples: None` when no sample records are wanted).
pub fn run_file<A: Analysis + ?Sized>(
    path: &Path,
    name: &str,
    decoder: DecoderConfig,
    samples: Option<SampleConfig>,
    progress: Option<Arc<AtomicU64>>,
    a: &mut A,
) -> Result<FileResult, CaptureError> {
    let mut src = crate::source::open_file(path, progress)?;
    let mut point = CapturePoint::new(name, decoder, samples);
    // A file source never fails while polling: read errors end it and are kept in its summary.
    let _ = point.run(&mut src, a, &mut || true);
    let samples = point.tracker.map(|t| t.stats).unwrap_or_default();
    let summary = src.into_summary();
    let mut decoder = point.decoder;
    decoder.stats.note_capture(&summary);
    Ok(FileResult { decoder, summary, samples })
}

/// [`run_file`] with two closures, for tests and small tools.
pub fn analyse_file(
    path: &Path,
    name: &str,
    decoder: DecoderConfig,
    samples: SampleConfig,
    progress: Option<Arc<AtomicU64>>,
    on_event: &mut dyn FnMut(&SubmsgEvent),
    on_sample: &mut dyn FnMut(SampleRecord),
) -> Result<FileResult, CaptureError> {
    let mut cb = Callbacks { on_event: |e: &SubmsgEvent| on_event(e), on_sample: |r: &SampleRecord| on_sample(r.clone()) };
    run_file(path, name, decoder, Some(samples), progress, &mut cb)
}
