//! What a capture point contributes to cross-capture correlation: sample
//! records, DATA_FRAG sightings and watermarks (how far the capture has
//! got), in capture order and in batches — for `latency` (one thread per
//! capture file) and for the agent (batches sent to `serve`) alike.

use super::{Analysis, Batcher};
use crate::events::SubmsgEvent;
use crate::latency::item::{FragSighting, Item};
use crate::samples::SampleRecord;

/// Watermarks are emitted at most this often in capture time.
pub const WATERMARK_EVERY_NS: i64 = 10_000_000;
/// While a live source is idle, the wall clock moves the watermark this often.
pub const IDLE_WATERMARK_EVERY_NS: i64 = 100_000_000;

/// Collects correlation items and hands full batches to `deliver`.
pub struct CorrelationFeed<F: FnMut(Vec<Item>)> {
    batcher: Batcher<Item, F>,
}

impl<F: FnMut(Vec<Item>)> CorrelationFeed<F> {
    pub fn new(batch_size: usize, deliver: F) -> Self {
        CorrelationFeed { batcher: Batcher::new(batch_size, deliver) }
    }

    /// Hands over what is collected, even if the batch is not full.
    pub fn flush(&mut self) {
        self.batcher.flush()
    }

    /// Items collected and not yet delivered.
    pub fn pending(&self) -> usize {
        self.batcher.pending()
    }

    fn push(&mut self, item: Item) {
        self.batcher.push(item)
    }

    fn watermark(&mut self, t: i64, every: i64) {
        if self.batcher.watermark_due(t, every) {
            self.push(Item::Watermark(t));
        }
    }
}

impl<F: FnMut(Vec<Item>)> Analysis for CorrelationFeed<F> {
    fn event(&mut self, e: &SubmsgEvent) {
        if let Some(f) = FragSighting::of(e) {
            self.push(Item::Frag(f));
        } else if let Some(x) = crate::latency::clock::Exchange::of(e) {
            self.push(Item::Exchange(x));
        }
        self.watermark(e.ts_ns, WATERMARK_EVERY_NS);
    }

    fn sample(&mut self, r: &SampleRecord) {
        self.push(Item::Sample(r.clone()));
    }

    fn idle(&mut self, now_ns: i64) {
        self.watermark(now_ns, IDLE_WATERMARK_EVERY_NS);
    }

    fn end(&mut self) {
        self.push(Item::End);
        self.flush();
    }
}
