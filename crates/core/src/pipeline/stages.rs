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

/// Only one DDS domain reaches `inner` (`live --domain`, `agent --domain`):
/// submessages whose domain ([`SubmsgEvent::domain`]: the writer's, else the
/// announced endpoint's, else the destination port's) is another or unknown,
/// and samples of another or an unknown domain, are left out and counted.
/// Frames, datagrams and idle ticks all pass: capture counters, `--write` files and
/// watermarks stay those of the whole capture.
pub struct DomainFilter<A> {
    pub domain: Option<u32>,
    pub inner: A,
    /// Submessages left out (another domain, or none known).
    pub events_left_out: u64,
    /// Sample records left out.
    pub samples_left_out: u64,
}

impl<A> DomainFilter<A> {
    /// `domain: None` passes everything.
    pub fn new(domain: Option<u32>, inner: A) -> Self {
        DomainFilter { domain, inner, events_left_out: 0, samples_left_out: 0 }
    }
}

impl<A: Analysis> Analysis for DomainFilter<A> {
    fn frame(&mut self, p: &crate::source::Packet<'_>) {
        self.inner.frame(p)
    }
    fn datagram(&mut self, d: &super::Datagram<'_>) {
        self.inner.datagram(d)
    }
    fn wants_datagrams(&self) -> bool {
        self.inner.wants_datagrams()
    }
    fn event(&mut self, e: &SubmsgEvent) {
        if self.domain.is_none() || e.domain() == self.domain {
            self.inner.event(e)
        } else {
            self.events_left_out += 1;
        }
    }
    fn sample(&mut self, r: &SampleRecord) {
        if self.domain.is_none() || r.topic.as_ref().and_then(|t| t.domain) == self.domain {
            self.inner.sample(r)
        } else {
            self.samples_left_out += 1;
        }
    }
    fn idle(&mut self, now_ns: i64) {
        self.inner.idle(now_ns)
    }
    fn end(&mut self) {
        self.inner.end()
    }
}
