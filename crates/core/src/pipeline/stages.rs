//! Core analyses as pipeline stages.

use super::Analysis;
use crate::events::SubmsgEvent;
use crate::samples::SampleRecord;
use crate::topics::TopicsAnalysis;

impl Analysis for TopicsAnalysis {
    fn event(&mut self, e: &SubmsgEvent) {
        self.on_event(e);
    }
    fn sample(&mut self, r: &SampleRecord) {
        self.on_sample(r);
    }
}

/// Every frame into a pcapng file (`live --write`). The first write error
/// stops writing; the caller reports it (`take_error`).
pub struct FrameWriter<W: std::io::Write> {
    pub writer: Option<crate::source::PcapngWriter<W>>,
    error: Option<std::io::Error>,
}

impl<W: std::io::Write> FrameWriter<W> {
    pub fn new(writer: Option<crate::source::PcapngWriter<W>>) -> Self {
        FrameWriter { writer, error: None }
    }

    /// The write error that stopped writing, once.
    pub fn take_error(&mut self) -> Option<std::io::Error> {
        self.error.take()
    }
}

impl<W: std::io::Write> Analysis for FrameWriter<W> {
    fn frame(&mut self, p: &crate::source::Packet<'_>) {
        if let Some(w) = self.writer.as_mut() {
            if let Err(e) = w.packet(p.ts_ns, p.data, p.orig_len) {
                self.error = Some(e);
                self.writer = None;
            }
        }
    }
}
