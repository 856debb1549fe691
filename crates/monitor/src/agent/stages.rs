//! The online analyses as pipeline stages: the live per-topic view.

use crate::agent::view::LiveTopics;
use ddscope_core::events::SubmsgEvent;
use ddscope_core::pipeline::Analysis;
use ddscope_core::samples::SampleRecord;
use ddscope_core::source::Packet;

impl Analysis for LiveTopics {
    fn frame(&mut self, p: &Packet<'_>) {
        self.on_frame(p.orig_len);
    }
    fn event(&mut self, e: &SubmsgEvent) {
        self.on_event(e);
    }
    fn sample(&mut self, r: &SampleRecord) {
        self.on_sample(r);
    }
}
