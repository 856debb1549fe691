//! Sources: where frames come from. A capture file (pcap/pcapng, gzip, FIFO
//! or stdin — [`ddscope_pcapfile::CaptureReader`]) and a live interface
//! (`ddscope_monitor::agent::capture::LiveCapture`) have one shape, so the runner
//! ([`crate::pipeline`]) drives either the same way. A new source (a trace
//! file, a live trace) is one more implementation of [`PacketSource`].

pub use ddscope_pcapfile::{CaptureError, CaptureReader, CaptureSummary, InterfaceInfo, InterfaceOptions, Packet, PcapngWriter};

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
