//! The per-host agent: live capture → decode → exporters (Prometheus,
//! InfluxDB, OTLP) and, with `--send-to`, a stream of correlation items,
//! topic tables, system metrics and counters to the central `ddscope serve`.
//! Capture never waits for the network: batches go through a bounded queue to
//! a sender thread that reconnects with backoff; what does not fit is dropped
//! and counted.

use crate::capture::{CaptureCounters, LiveCapture};
use crate::protocol::{Batch, MetricSample, WireItem};
use crate::upstream::{now_ns, Upstream, UpstreamLink, SINK_NAME};
use crate::view::LiveTopics;
use ddscope_core::decode::{Decoder, DecoderConfig};
use ddscope_core::latency::FragSighting;
use ddscope_core::samples::{SampleConfig, SampleRecord, SampleTracker};
use ddscope_export::system::SystemSource;
use ddscope_export::{CaptureHealth, Exporters};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct AgentConfig {
    pub name: String,
    pub upstream: Option<Upstream>,
    /// Where system metrics come from (`/proc` or a node_exporter URL).
    pub system: SystemSource,
    pub duration: Option<Duration>,
}

/// What the agent did, for its closing lines.
pub struct AgentReport {
    pub frames: u64,
    pub counters: CaptureCounters,
    pub decode_summary: String,
    pub items_sent: u64,
    pub items_dropped: u64,
    pub send_failures: u64,
    /// Batches the server refused (wrong token, bad name, too large).
    pub batches_refused: u64,
    pub notes: Vec<String>,
}

/// Runs the agent until `stop` is set or the duration ends.
/// A closed sample record goes to the live view, the exporters and (with a
/// central server) the next batch.
fn deliver_sample(r: &SampleRecord, view: &mut LiveTopics, exporters: Option<&Exporters>, batch: Option<&mut Vec<WireItem>>) {
    view.on_sample(r);
    if let Some(x) = exporters {
        x.on_sample(r);
    }
    if let Some(b) = batch {
        b.push(WireItem::sample(r));
    }
}

pub fn run(
    cfg: AgentConfig,
    mut cap: LiveCapture,
    exporters: Option<Exporters>,
    stop: Arc<AtomicBool>,
    on_note: &mut dyn FnMut(&str),
) -> anyhow::Result<(AgentReport, Option<Exporters>)> {
    let mut dec = Decoder::new(&cfg.name, DecoderConfig::default());
    let mut tracker = SampleTracker::new(SampleConfig::default());
    let mut view = LiveTopics::default();
    let tx: Option<UpstreamLink> = match &cfg.upstream {
        Some(up) => Some(UpstreamLink::start(up, &cfg.name)?),
        None => None,
    };
    if let (Some(x), Some(link)) = (&exporters, &tx) {
        x.registry().register_sink(SINK_NAME, link.stats().clone());
    }
    let mut items: Vec<WireItem> = Vec::with_capacity(4096);
    let mut seq = 0u64;
    let started = Instant::now();
    let mut last_flush = Instant::now();
    let mut last_system = Instant::now() - Duration::from_secs(10);
    let mut last_wm = i64::MIN;
    let mut notes: Vec<String> = vec![];
    let asked_to_stop = || stop.load(Ordering::Relaxed) || cfg.duration.is_some_and(|d| started.elapsed() >= d);
    // After a stop request, keep reading for a moment: in batched mode the
    // last block of packets is handed over only when it is retired (<= 100 ms).
    let drain_deadline = std::cell::Cell::new(None::<Instant>);
    let keep = || match (asked_to_stop(), drain_deadline.get()) {
        (false, _) => true,
        (true, None) => {
            drain_deadline.set(Some(Instant::now() + Duration::from_millis(250)));
            true
        }
        (true, Some(d)) => Instant::now() < d,
    };
    let send_batch = |items: &mut Vec<WireItem>, seq: &mut u64, extra: Batch| {
        if let Some(tx) = &tx {
            *seq += 1;
            let mut b = extra;
            b.seq = *seq;
            b.items = std::mem::take(items);
            tx.send(b);
        } else {
            items.clear();
        }
    };
    loop {
        let running = keep();
        if running {
            let got = cap.next(
                |p| {
                    view.on_frame(p.orig_len);
                    dec.packet(p, &mut |e| {
                        view.on_event(e);
                        if let Some(x) = &exporters {
                            x.on_event(e);
                        }
                        if tx.is_some() {
                            if let Some(f) = FragSighting::of(e) {
                                items.push(WireItem::frag(&f));
                            }
                            if e.ts_ns.saturating_sub(last_wm) >= 10_000_000 {
                                last_wm = e.ts_ns;
                                items.push(WireItem::Watermark { t: e.ts_ns });
                            }
                        }
                        tracker.on_event(e, &mut |r| deliver_sample(&r, &mut view, exporters.as_ref(), tx.is_some().then_some(&mut items)));
                    });
                },
                &mut |n| {
                    on_note(&n);
                    notes.push(n);
                },
                &keep,
            )?;
            if got.is_none() {
                // Quiet: move the clocks on with the wall clock.
                let now = now_ns();
                tracker.advance(now, &mut |r| deliver_sample(&r, &mut view, exporters.as_ref(), tx.is_some().then_some(&mut items)));
                if tx.is_some() && now.saturating_sub(last_wm) >= 100_000_000 {
                    last_wm = now;
                    items.push(WireItem::Watermark { t: now });
                }
            }
        } else {
            dec.finish();
            tracker.finish(&mut |r| deliver_sample(&r, &mut view, exporters.as_ref(), tx.is_some().then_some(&mut items)));
        }
        let flush_due = last_flush.elapsed() >= Duration::from_millis(250) || items.len() >= 4096 || !running;
        if flush_due {
            last_flush = Instant::now();
            for n in tx.as_ref().map(UpstreamLink::take_notes).unwrap_or_default() {
                on_note(&n);
                notes.push(n);
            }
            let counters = cap.counters();
            let mut system: Vec<MetricSample> = vec![];
            let mut topics = None;
            if last_system.elapsed() >= Duration::from_secs(1) || !running {
                last_system = Instant::now();
                let now = now_ns();
                let rows = view.rows(&cfg.name, &dec, now);
                topics = Some(serde_json::to_value(&rows).unwrap_or_default());
                if let Some(x) = &exporters {
                    let mut h = CaptureHealth::new(cfg.name.clone()).with_decode_stats(&dec.stats);
                    h.packets_received = counters.received;
                    h.kernel_dropped = counters.dropped;
                    h.interface_dropped = counters.if_dropped;
                    h.bytes = view.bytes;
                    h.evicted.insert("samples".into(), tracker.stats.evicted);
                    x.set_capture_health(&h);
                    let trows = view.analysis.rows(&cfg.name, &dec.discovery, false, &[ddscope_core::events::TrafficType::User]);
                    x.on_topic_rows(&trows, now);
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
            let extra = Batch {
                agent: cfg.name.clone(),
                seq: 0,
                sent_ns: now_ns(),
                items: vec![],
                dropped_items: 0,
                topics,
                system,
                counters: Some(json!({
                    "frames": dec.stats.frames,
                    "kernel": counters,
                    "skipped": dec.stats.summary_line(),
                    "decode": dec.stats,
                    "samples": tracker.stats,
                    "timestamps": cap.timestamp_note,
                })),
                last: !running,
            };
            send_batch(&mut items, &mut seq, extra);
        }
        if !running {
            break;
        }
    }
    let mut up = Default::default();
    if let Some(mut l) = tx {
        up = l.shutdown(Duration::from_secs(5));
        for n in l.take_notes() {
            on_note(&n);
            notes.push(n);
        }
    }
    let counters = cap.counters();
    Ok((
        AgentReport {
            frames: dec.stats.frames,
            counters,
            decode_summary: dec.stats.summary_line(),
            items_sent: up.delivered,
            items_dropped: up.dropped_queue_full + up.dropped_at_shutdown + up.rejected,
            send_failures: up.failed_attempts,
            batches_refused: up.refused_batches,
            notes,
        },
        exporters,
    ))
}
