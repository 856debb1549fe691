//! The per-host agent: live capture → decode → exporters (Prometheus,
//! InfluxDB, OTLP) and, with `--send-to`, a stream of correlation items,
//! topic tables, system metrics and counters to the central `ddscope serve`.
//! Capture never waits for the network: batches go through a bounded queue to
//! a sender thread that reconnects with backoff; what does not fit is dropped
//! and counted.

use crate::agent::capture::{CaptureCounters, LiveCapture};
use crate::stream::protocol::{Batch, MetricSample, StreamItem};
use crate::agent::upstream::{now_ns, Upstream, UpstreamLink, SINK_NAME};
use crate::agent::trace::{TraceCounters, TraceFollower};
use crate::agent::view::LiveTopics;
use ddscope_core::latency::Item;
use ddscope_core::pipeline::{CapturePoint, CorrelationFeed, DomainFilter};
use ddscope_core::window::Window;
use ddscope_core::source::PacketSource;
use std::cell::RefCell;
use ddscope_sysstat::system::SystemSource;
use ddscope_export::{CaptureHealth, Exporters};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the agent's caps evicted so far, in one line (empty when nothing).
fn evictions(dec: &ddscope_core::decode::Decoder, samples: &ddscope_core::samples::SampleStats, view: &LiveTopics) -> String {
    let parts: Vec<String> = [dec.stats.discovery.problem_line(), samples.problem_line(), view.stats().problem_line()].into_iter().flatten().collect();
    parts.join("; ")
}

/// Topic rows sent upstream per second (the busiest; `serve` shows 200 per agent).
pub const MAX_SENT_TOPIC_ROWS: usize = 200;
/// What the agent captures from: a live interface ([`LiveCapture`]) or, in
/// tests, anything else that delivers packets and counts what it lost.
pub trait AgentCapture: PacketSource {
    /// Kernel and libpcap counters since the capture opened.
    fn counters(&mut self) -> CaptureCounters;
    /// Which timestamps the capture uses, for the counters JSON.
    fn timestamp_note(&self) -> String;
}

impl AgentCapture for LiveCapture {
    fn counters(&mut self) -> CaptureCounters {
        LiveCapture::counters(self)
    }
    fn timestamp_note(&self) -> String {
        self.timestamp_note.clone()
    }
}

/// The capture time of the latest frame handed over.
struct FrameClock(i64);

impl ddscope_core::pipeline::Analysis for FrameClock {
    fn frame(&mut self, p: &ddscope_core::source::Packet<'_>) {
        self.0 = self.0.max(p.ts_ns);
    }
}

/// Items that trigger a batch before the 250 ms flush interval.
const FLUSH_ITEMS: usize = 4096;

pub struct AgentConfig {
    pub name: String,
    pub upstream: Option<Upstream>,
    /// Scale-out: the same feed as OTLP to an OpenTelemetry Collector (`Upstream::otlp`), beside or instead of `upstream`.
    pub upstream_otlp: Option<Upstream>,
    /// Where system metrics come from (`/proc` or a node_exporter URL).
    pub system: SystemSource,
    pub duration: Option<Duration>,
    /// Caps of the decoder, sample tracker and topic tables.
    pub limits: ddscope_core::limits::Limits,
    /// The host's live LTTng session (ros2_tracing), followed since [`TraceFollower::start`]
    /// (started before the agent restricts its system calls); its items go with the samples.
    pub trace: Option<TraceFollower>,
    /// Only this DDS domain's submessages and samples reach the view, the
    /// exporters and the central stream (frames and watermarks all do).
    pub domain: Option<u32>,
    /// The correlation window of the `serve` this agent feeds: an incomplete
    /// sample's record is closed after [`Window::sample_timeout_ns`] of it.
    pub window: Window,
    /// What the host's time daemons say of its clock (started before privileges are dropped).
    pub clock_sync: Option<crate::agent::clocksync::ClockSyncFollower>,
}

/// What the agent did, for its closing lines.
pub struct AgentReport {
    /// What the caps evicted (empty when nothing).
    pub evicted: String,
    pub frames: u64,
    pub counters: CaptureCounters,
    pub decode_summary: String,
    pub items_sent: u64,
    pub items_dropped: u64,
    pub send_failures: u64,
    /// Batches the server refused (wrong token, bad name, too large).
    pub batches_refused: u64,
    pub notes: Vec<String>,
    /// The live trace session's counters, when the agent followed one.
    pub trace: Option<TraceCounters>,
    /// With a domain filter: submessages and samples of other or unknown domains left out.
    pub domain_left_out: (u64, u64),
    /// Worker threads (exporters, senders, the trace reader) that ended by a
    /// panic, and how many more beyond those listed: the agent stopped then.
    pub stopped_threads: (Vec<ddscope_sysstat::workers::Stopped>, u64),
}

/// Converts a correlation item into its form on the wire to `serve` (the
/// end of the capture travels as the batch's `last` flag, not as an item).
fn stream_item(item: &Item) -> Option<StreamItem> {
    match item {
        Item::Sample(r) => Some(StreamItem::sample(r)),
        Item::Frag(f) => Some(StreamItem::frag(f)),
        Item::Watermark(t) => Some(StreamItem::Watermark { t: *t }),
        // Clock evidence for serve's clock tracker.
        Item::Exchange(x) => Some(StreamItem::exchange(x)),
        Item::End => None,
    }
}

/// Runs the agent until `stop` is set or the duration ends: the capture goes
/// through the runner into the live view, the exporters and (with a central
/// server) the correlation feed, whose items leave in batches every 250 ms.
pub fn run(
    mut cfg: AgentConfig,
    mut cap: impl AgentCapture,
    mut exporters: Option<Exporters>,
    stop: Arc<AtomicBool>,
    on_note: &mut dyn FnMut(&str),
) -> anyhow::Result<(AgentReport, Option<Exporters>)> {
    let samples = cfg.limits.samples_with_timeout(cfg.window.sample_timeout_ns());
    let mut point = CapturePoint::new(&cfg.name, cfg.limits.decoder, Some(samples));
    let mut view = LiveTopics::new(cfg.limits.topics);
    view.domain = cfg.domain;
    let tx_json: Option<UpstreamLink> = match &cfg.upstream {
        Some(up) => Some(UpstreamLink::start(up, &cfg.name)?),
        None => None,
    };
    let tx_otlp: Option<UpstreamLink> = match &cfg.upstream_otlp {
        Some(up) => Some(UpstreamLink::start(up, &cfg.name)?),
        None => None,
    };
    if let (Some(x), Some(link)) = (&exporters, &tx_json) {
        x.registry().register_sink(SINK_NAME, link.stats().clone());
    }
    if let (Some(x), Some(link)) = (&exporters, &tx_otlp) {
        x.registry().register_sink(crate::agent::upstream::SINK_NAME_OTLP, link.stats().clone());
    }
    // Both links get every batch; the JSON stream's `tx` below stands for "any link".
    let links: Vec<&UpstreamLink> = tx_json.iter().chain(tx_otlp.iter()).collect();
    let tx: Option<&UpstreamLink> = links.first().copied();
    let mut follower = cfg.trace.take();
    let ready: RefCell<Vec<Vec<Item>>> = RefCell::new(vec![]);
    let mut feed = tx.is_some().then(|| CorrelationFeed::new(FLUSH_ITEMS, |items| ready.borrow_mut().push(items)));
    let mut clock = FrameClock(i64::MIN);
    let mut seq = 0u64;
    let started = Instant::now();
    let mut last_flush = Instant::now();
    let mut last_system = Instant::now() - Duration::from_secs(10);
    let mut notes: Vec<String> = vec![];
    let mut topic_rows_not_sent = 0usize;
    let mut domain_left_out = (0u64, 0u64);
    // A worker thread that ended by a panic stops the agent as a stop request
    // would (what it has goes out), rather than running on without that part.
    // A replayed file that has ended stops the agent as the end of --duration would.
    let source_ended = std::cell::Cell::new(false);
    let asked_to_stop = || {
        stop.load(Ordering::Relaxed) || cfg.duration.is_some_and(|d| started.elapsed() >= d) || ddscope_sysstat::workers::any_stopped() || source_ended.get()
    };
    let mut thread_noted = false;
    // After a stop request, keep reading for a moment: in batched mode the
    // last block of packets is handed over only when it is retired (<= 100 ms).
    let mut drain_deadline = None::<Instant>;
    loop {
        if !thread_noted && ddscope_sysstat::workers::any_stopped() {
            thread_noted = true;
            for s in ddscope_sysstat::workers::stopped().0 {
                let n = format!("the {} thread stopped ({}); the agent stops", s.thread, s.why);
                on_note(&n);
                notes.push(n);
            }
        }
        let running = match (asked_to_stop(), drain_deadline) {
            (false, _) => true,
            (true, None) => {
                drain_deadline = Some(Instant::now() + Duration::from_millis(250));
                true
            }
            (true, Some(d)) => Instant::now() < d,
        };
        if running {
            let mut stage = DomainFilter::new(cfg.domain, (&mut view, &mut exporters, &mut feed, &mut clock));
            if point.step(&mut cap, &mut stage)? == ddscope_core::source::Poll::Ended {
                source_ended.set(true);
            }
            domain_left_out.0 += stage.events_left_out;
            domain_left_out.1 += stage.samples_left_out;
            // Frames that carry no RTPS (the agent's own HTTP, other traffic) move the capture's
            // watermark on too: every frame up to the latest one has been handed over, so
            // `serve` (and a trace joined there) need not wait for the next RTPS submessage.
            if let Some(f) = feed.as_mut() {
                if clock.0 > i64::MIN {
                    ddscope_core::pipeline::Analysis::idle(f, clock.0);
                }
            }
            for n in cap.take_notes() {
                on_note(&n);
                notes.push(n);
            }
        } else {
            let mut stage = DomainFilter::new(cfg.domain, (&mut view, &mut exporters, &mut feed, &mut clock));
            point.finish(&mut stage);
            domain_left_out.0 += stage.events_left_out;
            domain_left_out.1 += stage.samples_left_out;
        }
        let pending = ready.borrow().iter().map(Vec::len).sum::<usize>() + feed.as_ref().map_or(0, |f| f.pending());
        let flush_due = last_flush.elapsed() >= Duration::from_millis(250) || pending >= FLUSH_ITEMS || !running;
        if flush_due {
            last_flush = Instant::now();
            if let Some(f) = feed.as_mut() {
                f.flush();
            }
            let mut items: Vec<StreamItem> = ready.borrow_mut().drain(..).flatten().filter_map(|i| stream_item(&i)).collect();
            if let Some(f) = &mut follower {
                if !running {
                    // The last batch: what the reader assembled until now, then the end of the trace (`last`).
                    f.stop();
                }
                let mut t = vec![];
                f.queue.drain(&mut t);
                if tx.is_some() {
                    items.extend(t.iter().filter_map(StreamItem::trace));
                }
            }
            let trace_counters = follower.as_ref().map(|f| f.queue.counters());
            for n in links.iter().flat_map(|l| l.take_notes()) {
                on_note(&n);
                notes.push(n);
            }
            let counters = cap.counters();
            let dec = &point.decoder;
            let tracker_stats = point.tracker.as_ref().map(|t| t.stats.clone()).unwrap_or_default();
            let mut system: Vec<MetricSample> = vec![];
            let mut topics = None;
            if last_system.elapsed() >= Duration::from_secs(1) || !running {
                last_system = Instant::now();
                let now = now_ns();
                let (rows, not_sent) = view.rows_top(&cfg.name, dec, now, MAX_SENT_TOPIC_ROWS);
                topic_rows_not_sent = not_sent;
                topics = Some(serde_json::to_value(&rows).unwrap_or_default());
                if let Some(x) = &exporters {
                    let mut h = CaptureHealth::new(cfg.name.clone()).with_decode_stats(&dec.stats);
                    h.packets_received = counters.received;
                    h.kernel_dropped = counters.dropped;
                    h.interface_dropped = counters.if_dropped;
                    if let Some(f) = &counters.filter {
                        h.evicted.insert("kernel_filter_not_followed".into(), f.not_followed);
                        h.evicted.insert("kernel_filter_ring_full".into(), f.ring_full);
                        h.evicted.insert("kernel_filter_orphaned".into(), f.orphaned + f.evicted);
                        if f.records_mode {
                            h.evicted.insert("kernel_records_bad".into(), f.bad_records);
                            h.evicted.insert("kernel_records_merged_out_of_order".into(), f.merge_forced);
                        }
                    }
                    h.bytes = view.bytes;
                    let live = view.stats();
                    let mut h = h.with_sample_stats(&tracker_stats);
                    h.evicted.insert("topic_writers".into(), live.topics.writers_evicted);
                    h.evicted.insert("live_topics".into(), live.window_topics_evicted);
                    if let Some(c) = &trace_counters {
                        for (k, v) in [
                            ("events", c.events),
                            ("ros2_events", c.ros2_events),
                            ("discarded_events", c.discarded_events),
                            ("items", c.items),
                            ("dropped_queue_full", c.dropped_queue_full),
                            ("late", c.late),
                            ("reconnects", c.reconnects),
                        ] {
                            h.trace.insert(k.into(), v);
                        }
                    }
                    x.set_capture_health(&h);
                    let trows = view.topic_rows(&cfg.name, dec);
                    x.on_topic_rows(&trows, now);
                    let rates: Vec<ddscope_export::prometheus::TopicRate> = rows
                        .iter()
                        .map(|r| ddscope_export::prometheus::TopicRate {
                            capture: cfg.name.clone(),
                            topic: r.label.clone(),
                            domain: r.totals.domain,
                            rate_hz: r.rate_now_hz,
                            kind: r.rate_now_kind,
                        })
                        .collect();
                    x.set_topic_rates(&rates);
                    if let Some(r) = cfg.clock_sync.as_ref().and_then(|c| c.latest()) {
                        x.registry().set_families("clock_sync", crate::agent::clocksync::families(&r));
                    }
                }
                if tx.is_some() {
                    match cfg.system.sample(Duration::from_millis(500)) {
                        Ok(fams) => {
                            for f in fams {
                                for s in f.samples {
                                    system.push(MetricSample { name: s.name, labels: s.labels, value: s.value });
                                }
                            }
                        }
                        Err(e) => {
                            let n = format!("system metrics unavailable: {e}");
                            if notes.last() != Some(&n) {
                                on_note(&n);
                                notes.push(n);
                            }
                        }
                    }
                }
            }
            if !links.is_empty() {
                seq += 1;
                let b = Batch {
                    agent: cfg.name.clone(),
                    seq,
                    sent_ns: now_ns(),
                    items,
                    dropped_items: 0,
                    topics,
                    system,
                    counters: Some(json!({
                        "frames": dec.stats.frames,
                        "kernel": counters,
                        "skipped": dec.stats.summary_line(),
                        "decode": dec.stats,
                        "samples": tracker_stats,
                        "live": view.stats(),
                        "evicted": evictions(dec, &tracker_stats, &view),
                        "topic_rows_not_sent": topic_rows_not_sent,
                        "timestamps": cap.timestamp_note(),
                        "trace": trace_counters,
                        "clock_sync": cfg.clock_sync.as_ref().and_then(|c| c.latest()),
                    })),
                    last: !running,
                };
                for (i, l) in links.iter().enumerate() {
                    if i + 1 == links.len() {
                        l.send(b);
                        break;
                    }
                    l.send(b.clone());
                }
            }
        }
        if !running {
            break;
        }
    }
    drop(feed);
    drop(links);
    let mut up: ddscope_export::SinkStatsSnapshot = Default::default();
    let mut otlp_up: Option<ddscope_export::SinkStatsSnapshot> = None;
    for (mut l, is_otlp) in tx_json.into_iter().map(|l| (l, false)).chain(tx_otlp.into_iter().map(|l| (l, true))) {
        let s = l.shutdown(Duration::from_secs(5));
        for n in l.take_notes() {
            on_note(&n);
            notes.push(n);
        }
        if is_otlp {
            otlp_up = Some(s);
        } else {
            up = s;
        }
    }
    // Without the JSON stream, the OTLP link's figures are the agent's.
    if cfg.upstream.is_none() {
        up = otlp_up.unwrap_or_default();
    }
    let counters = cap.counters();
    Ok((
        AgentReport {
            frames: point.decoder.stats.frames,
            counters,
            decode_summary: point.decoder.stats.summary_line(),
            evicted: evictions(&point.decoder, &point.tracker.as_ref().map(|t| t.stats.clone()).unwrap_or_default(), &view),
            items_sent: up.delivered,
            items_dropped: up.dropped_queue_full + up.dropped_at_shutdown + up.rejected,
            send_failures: up.failed_attempts,
            batches_refused: up.refused_batches,
            notes,
            trace: follower.as_ref().map(|f| f.queue.counters()),
            domain_left_out,
            stopped_threads: ddscope_sysstat::workers::stopped(),
        },
        exporters,
    ))
}
