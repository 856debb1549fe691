//! What a push sink is: the trait every sink of `--export KIND=TARGET`
//! implements (`influx.rs`, `otlp.rs`); the registry that starts them is
//! `exporters.rs`.

use crate::delivery::{SinkStats, SinkStatsSnapshot};
use crate::health::CaptureHealth;
use crate::traces::TraceStats;
use ddscope_core::events::SubmsgEvent;
use ddscope_core::latency::explain::Incident;
use ddscope_core::latency::LatencyRow;
use ddscope_core::ros2::chain::ChainRow;
use ddscope_core::samples::SampleRecord;
use ddscope_core::topics::TopicRow;
use ddscope_sysstat::promtext::Family;
use ddscope_sysstat::system::SystemSnapshot;
use std::sync::Arc;
use std::time::Duration;

/// A push sink of the agent: it hears what the agent sees and never blocks
/// (each sink queues and delivers on its own thread). Adding a sink is one
/// implementation of this trait in its own file plus a line in
/// [`PUSH_SINKS`](crate::PUSH_SINKS).
pub trait PushSink: Send + Sync {
    fn on_event(&self, _e: &SubmsgEvent) {}
    fn on_sample(&self, _r: &SampleRecord) {}
    fn on_latency(&self, _r: &LatencyRow) {}
    /// The incidents of a window `serve` judged ("why was it late", with their causes).
    fn on_incidents(&self, _i: &[Incident]) {}
    /// One hop row of a measured chain (`serve --path`).
    fn on_chain_row(&self, _r: &ChainRow) {}
    fn on_topic_rows(&self, _rows: &[TopicRow], _ts_ns: i64) {}
    fn on_capture_health(&self, _h: &CaptureHealth, _ts_ns: i64) {}
    fn on_system(&self, _s: &SystemSnapshot) {}
    /// True when the sink carries the registry's metrics (pushed every `metrics_interval`).
    fn wants_metrics(&self) -> bool {
        false
    }
    fn on_metrics(&self, _fams: &[Family], _ts_ns: i64) {}
    /// What a sink making one trace per sample made and left out (`ddscope_trace_export_total`).
    fn trace_stats(&self) -> Option<Arc<TraceStats>> {
        None
    }
    /// Delivery counters (registered as `ddscope_export_*{sink=…}` in /metrics).
    fn stats(&self) -> &Arc<SinkStats>;
    /// Waits up to `timeout` for the queue to drain; false if something is still queued.
    fn flush(&self, timeout: Duration) -> bool;
    /// Flushes for up to `timeout` and stops; what is left is counted as dropped.
    fn shutdown(&mut self, timeout: Duration) -> SinkStatsSnapshot;
}
