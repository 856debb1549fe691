//! Sources: where frames (and trace records) come from, and the one place
//! every input is opened. A user names an input as a [`SourceSpec`] — a
//! capture file (pcap/pcapng, gzip, FIFO or stdin: [`CaptureReader`]), a live
//! interface (libpcap, opened above core by a [`LiveInterfaces`]:
//! `ddscope_monitor::agent::capture`), a ros2_tracing trace directory or a
//! live trace session ([`TraceReader`]) — and [`SourceSpec::open`] opens it.
//! Frame sources have one shape, [`PacketSource`], so the runner
//! ([`crate::pipeline`]) drives a file and an interface the same way; traces
//! go through `ros2::source` into the merge beside the captures.

pub use ddscope_pcapfile::{CaptureError, CaptureReader, CaptureSummary, InterfaceInfo, InterfaceOptions, Packet, PcapngWriter};
use ddscope_trace::{SessionNotFound, TraceError, TraceReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// An input as the user names it; each command turns its arguments into
/// these at the edge, keeping the forms users type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    /// A capture file: pcap or pcapng, gzip-compressed or not, a FIFO, or
    /// stdin as `-` (the positional inputs of `dissect`, `topics`, `latency`,
    /// `report`, `flows`, `tsn check`; the captures of a run directory).
    File(PathBuf),
    /// A live network interface with its capture settings (`live -i NAME`, `agent -i NAME`).
    Interface(InterfaceSpec),
    /// A ros2_tracing (LTTng) trace directory (`--trace HOST=DIR`, `HOST.lttng/` in a run directory).
    TraceDir(PathBuf),
    /// A live LTTng session through lttng-relayd (`agent --trace-live
    /// net://RELAYD/host/HOSTNAME/SESSION`); the reader keeps following while
    /// the session does not exist yet or has ended.
    TraceLive(String),
}

/// Where a live capture's timestamps come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tstamp {
    Host,
    Adapter,
    AdapterUnsynced,
}

/// A live interface and how to capture on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceSpec {
    pub interface: String,
    pub filter: Option<String>,
    /// 0 = whole frames.
    pub snaplen: i32,
    pub tstamp: Tstamp,
    pub buffer_mb: i32,
    /// Deliver every packet as it arrives (one wakeup per packet) instead of
    /// in blocks retired every 100 ms: faster display, more load on the host.
    pub immediate: bool,
    /// Attach the in-kernel filter (falls back to plain capture, with a
    /// note, when it cannot be loaded).
    pub kernel_filter: bool,
    /// In-kernel records: the socket receives only what must pass whole,
    /// every other frame comes as a record and is rebuilt. Falls back like
    /// `kernel_filter`.
    pub kernel_records: bool,
}

/// Opens live interfaces. Live capture (libpcap, the in-kernel filter) lives
/// above core, in `ddscope_monitor::agent::capture`, which implements this;
/// inputs that are never interfaces are opened with [`NoInterfaces`].
pub trait LiveInterfaces {
    type Capture: PacketSource;
    fn open(&self, spec: &InterfaceSpec) -> anyhow::Result<Self::Capture>;
}

/// For callers that open only files and traces.
pub struct NoInterfaces;

/// The capture of [`NoInterfaces`]: there is none.
pub enum NoCapture {}

impl PacketSource for NoCapture {
    fn poll(&mut self, _: &mut dyn FnMut(&Packet<'_>)) -> anyhow::Result<Poll> {
        match *self {}
    }
}

impl LiveInterfaces for NoInterfaces {
    type Capture = NoCapture;
    fn open(&self, spec: &InterfaceSpec) -> anyhow::Result<NoCapture> {
        anyhow::bail!("cannot capture on {}: live capture is not available here", spec.interface)
    }
}

/// An opened input (handed over once, then taken apart: its size does not matter).
#[allow(clippy::large_enum_variant)]
pub enum Opened<C> {
    /// Frames from a capture file.
    File(CaptureReader),
    /// Frames from a live interface.
    Interface(C),
    /// Records of a trace directory or a live trace session.
    Trace(TraceReader),
}

/// Why an input could not be opened (each text names the input, one line).
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error(transparent)]
    Interface(anyhow::Error),
    #[error(transparent)]
    Trace(#[from] TraceError),
}

impl SourceSpec {
    /// A trace as typed: a `net://` URL is a live session, anything else a directory.
    pub fn trace(s: &str) -> SourceSpec {
        if s.starts_with("net://") {
            SourceSpec::TraceLive(s.to_string())
        } else {
            SourceSpec::TraceDir(PathBuf::from(s))
        }
    }

    /// Opens the input: the one place captures, interfaces and traces are
    /// opened. `progress` counts the bytes read from a capture file;
    /// interfaces are opened by `interfaces`.
    pub fn open<I: LiveInterfaces>(&self, interfaces: &I, progress: Option<Arc<AtomicU64>>) -> Result<Opened<I::Capture>, OpenError> {
        Ok(match self {
            SourceSpec::File(path) => Opened::File(CaptureReader::open(path, progress)?),
            SourceSpec::Interface(spec) => Opened::Interface(interfaces.open(spec).map_err(OpenError::Interface)?),
            SourceSpec::TraceDir(path) => Opened::Trace(TraceReader::open(path)?),
            SourceSpec::TraceLive(url) => Opened::Trace(TraceReader::open_live(url, SessionNotFound::Continue)?),
        })
    }
}

/// Opens a capture file ([`SourceSpec::File`] through [`SourceSpec::open`]).
pub fn open_file(path: &Path, progress: Option<Arc<AtomicU64>>) -> Result<CaptureReader, CaptureError> {
    match SourceSpec::File(path.to_path_buf()).open(&NoInterfaces, progress) {
        Ok(Opened::File(r)) => Ok(r),
        Err(OpenError::Capture(e)) => Err(e),
        _ => unreachable!("a capture file opens as a capture file or fails as one"),
    }
}

/// Opens a trace directory ([`SourceSpec::TraceDir`] through [`SourceSpec::open`]).
pub fn open_trace_dir(path: &Path) -> Result<TraceReader, TraceError> {
    open_trace(SourceSpec::TraceDir(path.to_path_buf()))
}

/// Opens a live trace session ([`SourceSpec::TraceLive`] through [`SourceSpec::open`]).
pub fn open_trace_live(url: &str) -> Result<TraceReader, TraceError> {
    open_trace(SourceSpec::TraceLive(url.to_string()))
}

fn open_trace(spec: SourceSpec) -> Result<TraceReader, TraceError> {
    match spec.open(&NoInterfaces, None) {
        Ok(Opened::Trace(r)) => Ok(r),
        Err(OpenError::Trace(e)) => Err(e),
        _ => unreachable!("a trace opens as a trace or fails as one"),
    }
}

/// Opens a live interface with `interfaces` ([`SourceSpec::Interface`] through [`SourceSpec::open`]).
pub fn open_interface<I: LiveInterfaces>(spec: InterfaceSpec, interfaces: &I) -> anyhow::Result<I::Capture> {
    match SourceSpec::Interface(spec).open(interfaces, None) {
        Ok(Opened::Interface(c)) => Ok(c),
        Err(OpenError::Interface(e)) => Err(e),
        _ => unreachable!("an interface opens as an interface or fails as one"),
    }
}

/// What one poll of a source produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// This many frames were handed over.
    Frames(usize),
    /// Nothing arrived for a while (live sources): time moved on without frames.
    Idle,
    /// The source has ended: nothing more will come.
    Ended,
}

/// Frames, pulled batch by batch.
pub trait PacketSource {
    /// Hands the frames that are ready (a bounded batch) to `on_packet`, or
    /// waits a short while (live sources) and reports [`Poll::Idle`].
    fn poll(&mut self, on_packet: &mut dyn FnMut(&Packet<'_>)) -> anyhow::Result<Poll>;

    /// Messages for the user that came up while polling (timestamps in use,
    /// an interface that went away and came back); drained by the caller.
    fn take_notes(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// Frames per poll of a capture file: large enough to amortise the call,
/// small enough that a consumer (a stop request, a watermark) is never far behind.
const FILE_BATCH: usize = 256;

impl PacketSource for CaptureReader {
    fn poll(&mut self, on_packet: &mut dyn FnMut(&Packet<'_>)) -> anyhow::Result<Poll> {
        let mut n = 0;
        let more = self.read(FILE_BATCH, &mut |p| {
            n += 1;
            on_packet(p)
        });
        Ok(if n > 0 { Poll::Frames(n) } else if more { Poll::Frames(0) } else { Poll::Ended })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_are_parsed_as_typed() {
        assert_eq!(SourceSpec::trace("net://localhost/host/pc1/ros2"), SourceSpec::TraceLive("net://localhost/host/pc1/ros2".into()));
        assert_eq!(SourceSpec::trace("runs/pc1.lttng"), SourceSpec::TraceDir("runs/pc1.lttng".into()));
    }

    #[test]
    fn each_kind_fails_as_its_own_kind() {
        let missing = Path::new("/nonexistent/ddscope/x.pcapng");
        assert!(matches!(open_file(missing, None), Err(CaptureError::Open { .. })));
        assert!(matches!(SourceSpec::TraceDir(missing.into()).open(&NoInterfaces, None), Err(OpenError::Trace(_))));
        let iface = InterfaceSpec {
            interface: "eth9".into(),
            filter: None,
            snaplen: 0,
            tstamp: Tstamp::Host,
            buffer_mb: 1,
            immediate: false,
            kernel_filter: false,
            kernel_records: false,
        };
        let e = open_interface(iface, &NoInterfaces).err().expect("no live capture in core");
        assert!(e.to_string().starts_with("cannot capture on eth9"), "{e}");
    }
}
