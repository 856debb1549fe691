//! The agent's follower of the host's live LTTng session (ros2_tracing):
//! a thread reads the session through lttng-relayd with `ddscope-trace`'s
//! live reader (babeltrace2's `source.ctf.lttng-live`, reconnecting when the
//! session or the relay daemon goes away), assembles publishes, takes and
//! callbacks exactly as the offline path does ([`Assembler`]) and hands them
//! to the agent loop through a bounded queue.
//!
//! The queue holds at most `max_queued` publishes and takes; what does not
//! fit is dropped and counted (never grown). Watermarks are not queued: the
//! latest one is kept beside the queue and handed over after the items it
//! covers. While the session is idle (no event for the reader), the trace
//! time is moved on to the host's CLOCK_REALTIME minus `lag_ns` (the
//! session's live timer plus the relay's delay), so `serve` can judge
//! samples without waiting for the next traced event; an item that arrives
//! older than a watermark already handed over is counted as `late`.

use ddscope_core::ros2::{AssembleConfig, AssembleStats, Assembler, TraceItem};
use ddscope_trace::{Layout, Poll, TraceReader};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How the agent follows its host's live session.
#[derive(Debug, Clone)]
pub struct TraceFollowConfig {
    /// `net://RELAYD[:PORT]/host/HOSTNAME/SESSION`.
    pub url: String,
    /// Publishes and takes queued for the agent loop; more are dropped and counted.
    pub max_queued: usize,
    /// While the session is idle, the trace watermark is CLOCK_REALTIME minus this.
    pub lag_ns: i64,
    /// The assembler's caps (`ddscope limits`, section `trace`).
    pub assemble: AssembleConfig,
}

/// What the follower did so far (the agent's counters JSON, /metrics, closing line).
#[derive(Debug, Clone, Default, Serialize)]
pub struct TraceCounters {
    pub url: String,
    /// Events read from the session, and `ros2:*` events decoded.
    pub events: u64,
    pub ros2_events: u64,
    /// Events LTTng reported lost (discard mode).
    pub discarded_events: u64,
    /// Publishes and takes handed to the agent loop.
    pub items: u64,
    /// Publishes and takes dropped because the queue was full.
    pub dropped_queue_full: u64,
    /// Publishes and takes older than a watermark already handed over (serve may have judged their samples).
    pub late: u64,
    /// Times the live reader lost the session or the relay daemon and reconnected.
    pub reconnects: u64,
    pub last_error: Option<String>,
    /// The layout of `rmw_publish` (`humble`, `jazzy` in the JSON).
    #[serde(serialize_with = "layout_name")]
    pub layout: Option<Layout>,
    pub assemble: AssembleStats,
    /// Items in the queue now.
    pub queued: usize,
    pub max_queued: usize,
}

fn layout_name<S: serde::Serializer>(l: &Option<Layout>, s: S) -> Result<S::Ok, S::Error> {
    match l {
        Some(l) => s.serialize_some(l.as_str()),
        None => s.serialize_none(),
    }
}

#[derive(Default)]
struct Shared {
    items: VecDeque<TraceItem>,
    /// The latest watermark not handed over yet.
    watermark: Option<i64>,
    /// The last watermark handed over.
    given: i64,
    counters: TraceCounters,
    ended: bool,
}

/// The queue between the reader thread and the agent loop.
#[derive(Clone)]
pub struct TraceQueue {
    shared: Arc<Mutex<Shared>>,
    cap: usize,
}

fn lock(m: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A panic on the reader thread while holding the lock leaves counters that are still counters.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TraceQueue {
    pub fn new(cap: usize) -> TraceQueue {
        let q = TraceQueue { shared: Arc::default(), cap: cap.max(1) };
        {
            let mut s = lock(&q.shared);
            s.given = i64::MIN;
            s.counters.max_queued = q.cap;
        }
        q
    }

    /// Offers one item (from the reader thread); never blocks, never grows past the cap.
    pub fn offer(&self, item: TraceItem) {
        let mut s = lock(&self.shared);
        match item {
            TraceItem::Watermark(w) => s.watermark = Some(s.watermark.map_or(w, |o| o.max(w))),
            TraceItem::End => s.ended = true,
            // Callback durations are not streamed to serve (the agent's own view has no use for them yet).
            TraceItem::Callback(_) => {}
            it => {
                let t = match &it {
                    TraceItem::Publish(p) => [p.rclcpp_ts, p.rcl_ts, p.rmw_ts].into_iter().flatten().min().unwrap_or(i64::MAX),
                    TraceItem::Take(k) => k.rmw_take_ts,
                    _ => i64::MAX,
                };
                if t < s.given {
                    s.counters.late += 1;
                }
                if s.items.len() >= self.cap {
                    s.counters.dropped_queue_full += 1;
                } else {
                    s.items.push_back(it);
                }
            }
        }
    }

    /// Takes everything queued, then the latest watermark (which covers it).
    pub fn drain(&self, out: &mut Vec<TraceItem>) {
        let mut s = lock(&self.shared);
        let n = s.items.len() as u64;
        s.counters.items += n;
        out.extend(s.items.drain(..));
        if let Some(w) = s.watermark.take() {
            if w > s.given {
                s.given = w;
                out.push(TraceItem::Watermark(w));
            }
        }
    }

    /// Items held now.
    pub fn len(&self) -> usize {
        lock(&self.shared).items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn counters(&self) -> TraceCounters {
        let s = lock(&self.shared);
        let mut c = s.counters.clone();
        c.queued = s.items.len();
        c
    }

    /// Whether the reader thread has ended (error or stop).
    pub fn ended(&self) -> bool {
        lock(&self.shared).ended
    }

    fn update(&self, f: impl FnOnce(&mut TraceCounters)) {
        f(&mut lock(&self.shared).counters)
    }
}

/// The running follower: a reader thread and its queue.
pub struct TraceFollower {
    pub queue: TraceQueue,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

fn realtime_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

impl TraceFollower {
    /// Opens the live session (errors name the URL, one line) and starts the reader thread.
    /// The reader keeps following when the session does not exist yet or ends.
    pub fn start(cfg: TraceFollowConfig) -> Result<TraceFollower, String> {
        let reader = ddscope_core::source::open_trace_live(&cfg.url).map_err(|e| e.to_string())?;
        let queue = TraceQueue::new(cfg.max_queued);
        queue.update(|c| c.url = cfg.url.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let (q, st) = (queue.clone(), stop.clone());
        let handle = ddscope_sysstat::workers::spawn("trace-live", move || follow(reader, cfg, q, st))
            .map_err(|e| format!("starting the trace reader thread: {e}"))?;
        Ok(TraceFollower { queue, stop, handle: Some(handle) })
    }

    /// Stops the reader thread; what it assembled so far stays in the queue.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for TraceFollower {
    fn drop(&mut self) {
        self.stop();
    }
}

fn follow(mut reader: TraceReader, cfg: TraceFollowConfig, q: TraceQueue, stop: Arc<AtomicBool>) {
    let mut asm = Assembler::new(cfg.assemble);
    let mut idle = Duration::from_millis(1);
    let mut n = 0u64;
    let publish_stats = |reader: &TraceReader, asm: &Assembler, q: &TraceQueue| {
        let st = reader.stats();
        q.update(|c| {
            c.events = st.events;
            c.ros2_events = st.ros2_events;
            c.discarded_events = st.discarded_events;
            c.reconnects = st.live_reconnects;
            c.last_error = st.last_live_error.clone();
            c.layout = st.layout;
            c.assemble = asm.stats.clone();
        });
    };
    while !stop.load(Ordering::Relaxed) {
        match reader.poll() {
            Ok(Poll::Record(r)) => {
                idle = Duration::from_millis(1);
                asm.push(&r, &mut |it| q.offer(it));
                n += 1;
                if n % 1024 == 0 {
                    publish_stats(&reader, &asm, &q);
                }
            }
            Ok(Poll::Again) => {
                asm.advance(realtime_ns().saturating_sub(cfg.lag_ns), &mut |it| q.offer(it));
                publish_stats(&reader, &asm, &q);
                std::thread::sleep(idle);
                idle = (idle * 2).min(Duration::from_millis(50));
            }
            Ok(Poll::End) => break,
            Err(e) => {
                q.update(|c| c.last_error = Some(e.to_string()));
                break;
            }
        }
    }
    asm.finish(&mut |it| q.offer(it));
    publish_stats(&reader, &asm, &q);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ddscope_core::ros2::TakeRec;

    fn take(seq: u64, t: i64) -> TraceItem {
        TraceItem::Take(TakeRec {
            seq,
            vpid: 1,
            vtid: 1,
            reader: None,
            topic: None,
            node: None,
            source_ts: Some(t),
            rmw_take_ts: t,
            callback_start_ts: None,
            callback_end_ts: None,
            intra: false,
            intra_publish: None,
            queue_depth: None,
        })
    }

    /// A flood beyond the cap is dropped and counted; the queue never holds more than the cap
    /// (oracle: the numbers offered and the cap).
    #[test]
    fn a_flood_is_dropped_and_counted_not_grown() {
        let q = TraceQueue::new(100);
        for i in 0..10_000 {
            q.offer(take(i, 1_000 + i as i64));
            if i % 1000 == 0 {
                q.offer(TraceItem::Watermark(i as i64));
            }
            assert!(q.len() <= 100);
        }
        let c = q.counters();
        assert_eq!((c.queued, c.dropped_queue_full, c.max_queued), (100, 9_900, 100));
        let mut out = vec![];
        q.drain(&mut out);
        assert_eq!(out.len(), 101, "the items, then the watermark");
        assert!(matches!(out[100], TraceItem::Watermark(9000)));
        assert_eq!(q.counters().items, 100);
        // An item older than the watermark handed over is late (still delivered).
        q.offer(take(1, 5));
        assert_eq!(q.counters().late, 1);
        let mut out = vec![];
        q.drain(&mut out);
        assert_eq!(out.len(), 1, "no watermark again");
    }
}
