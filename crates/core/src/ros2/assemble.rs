//! From ros2_tracing events to publishes and takes.
//!
//! One host's trace is a time-ordered stream of `ros2:*` events from all its
//! ROS 2 processes and threads. A publish is `rclcpp_publish` → `rcl_publish`
//! → `rmw_publish` on one thread, linked by the message pointer; a take is
//! `rmw_take` (taken = 1) → `rcl_take` → `rclcpp_take` → `callback_start` →
//! `callback_end` of the subscription's callback on that thread. A publish
//! made on a thread between the `callback_start` and `callback_end` of a
//! subscription callback is caused by the sample that callback took (the
//! link of an end-to-end chain).
//!
//! Handles resolve through [`EntityTable`]: publisher handle → rmw handle →
//! gid (its first 16 bytes are the DDS writer GUID) → topic and node;
//! subscription → reader GUID, topic, node; callback → subscription.
//!
//! Everything keyed by threads and handles is a capped [`BoundedMap`] that
//! evicts the least recently seen entry first and counts it
//! ([`AssembleStats`]). A thread's open publish, take or callback older than
//! `max_open_ns` is closed with what it has (counted), so a thread that died
//! mid-callback cannot hold the watermark back.

use crate::bounded::BoundedMap;
use ddscope_trace::{CallbackOwner, EntityTable, Record, Ros2Event};
use ddscope_wire::{EntityId, Guid, GuidPrefix};
use serde::Serialize;
use std::sync::Arc;

/// A take's identity within one trace: the n-th take the assembler emitted.
pub type TakeSeq = u64;

/// One publish, assembled from one thread's rclcpp/rcl/rmw publish events.
#[derive(Debug, Clone)]
pub struct PublishRec {
    pub vpid: i64,
    pub vtid: i64,
    /// The DDS writer GUID (the gid's first 16 bytes), when the trace declared the publisher.
    pub writer: Option<Guid>,
    pub topic: Option<Arc<str>>,
    /// `/namespace/name` of the node that owns the publisher.
    pub node: Option<Arc<str>>,
    /// `rclcpp_publish`, on the trace clock (ns from origin); `None` for a publish made through rcl directly.
    pub rclcpp_ts: Option<i64>,
    pub rmw_ts: i64,
    /// `rmw_publish.timestamp` (Jazzy on): the sample's source timestamp.
    pub source_ts: Option<i64>,
    /// This is the publisher's n-th publish (1-based) since its init, when the trace saw its init.
    pub order: Option<u64>,
    /// The take whose subscription callback made this publish.
    pub cause: Option<TakeSeq>,
}

/// One sample taken by a subscription, with the callback that processed it.
#[derive(Debug, Clone)]
pub struct TakeRec {
    pub seq: TakeSeq,
    pub vpid: i64,
    pub vtid: i64,
    pub reader: Option<Guid>,
    pub topic: Option<Arc<str>>,
    pub node: Option<Arc<str>>,
    /// `rmw_take.source_timestamp`: the sample's source timestamp (the writer's clock).
    pub source_ts: i64,
    pub rmw_take_ts: i64,
    pub callback_start_ts: Option<i64>,
    pub callback_end_ts: Option<i64>,
}

/// What a trace contributes to the correlation.
#[derive(Debug, Clone)]
pub enum TraceItem {
    Publish(PublishRec),
    Take(TakeRec),
    /// Every publish and take that started before this time (trace clock) has been handed over.
    Watermark(i64),
    End,
}

/// Caps of the assembler's tables.
#[derive(Debug, Clone, Copy)]
pub struct AssembleConfig {
    /// Threads with open state.
    pub max_threads: usize,
    /// Publishers whose publishes are counted (for the publish-order join).
    pub max_publishers: usize,
    /// A publish, take or callback open longer than this is closed with what it has.
    pub max_open_ns: i64,
}

impl Default for AssembleConfig {
    fn default() -> Self {
        AssembleConfig { max_threads: 1 << 14, max_publishers: 1 << 16, max_open_ns: 5_000_000_000 }
    }
}

/// Counters of the assembly: what was built and what could not be.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AssembleStats {
    pub publishes: u64,
    pub takes: u64,
    /// `rmw_take` with taken = 0 (the executor found nothing).
    pub empty_takes: u64,
    /// Publishes whose publisher (and so writer GUID and topic) the trace never declared:
    /// the trace started after the publisher was created.
    pub publishes_unknown_publisher: u64,
    /// Of those, distinct publishers.
    pub unknown_publishers: u64,
    /// Takes whose subscription the trace never declared.
    pub takes_unknown_subscription: u64,
    /// Publishes without a publish order (publisher init not seen, or its counter evicted):
    /// they cannot be joined by publish order (Humble).
    pub publishes_without_order: u64,
    /// Publish/take/callback states closed because they stayed open longer than `max_open_ns`
    /// or the thread's state was evicted.
    pub open_expired: u64,
    /// An `rmw_publish` whose message matched no open `rclcpp_publish`/`rcl_publish` on its thread.
    pub rmw_publish_unmatched: u64,
    /// Taken samples whose callback never started on that thread (taken and dropped, or another callback ran).
    pub takes_without_callback: u64,
    pub threads_evicted: u64,
    pub publishers_evicted: u64,
    /// Events of init type or others that the assembly did not need.
    pub events: u64,
}

impl AssembleStats {
    /// What the assembly could not do, if anything, in one line.
    pub fn problem_line(&self) -> Option<String> {
        let mut p = vec![];
        if self.publishes_unknown_publisher > 0 {
            p.push(format!(
                "{} publishes of {} publishers whose creation is not in the trace (the trace started too late): not joined",
                self.publishes_unknown_publisher, self.unknown_publishers
            ));
        }
        if self.takes_unknown_subscription > 0 {
            p.push(format!("{} takes of subscriptions whose creation is not in the trace: not joined", self.takes_unknown_subscription));
        }
        if self.open_expired > 0 {
            p.push(format!("{} publishes/takes/callbacks never finished on their thread (closed with what they had)", self.open_expired));
        }
        if self.rmw_publish_unmatched > 0 {
            p.push(format!("{} rmw_publish without rclcpp_publish/rcl_publish of the same message on the thread", self.rmw_publish_unmatched));
        }
        if self.threads_evicted > 0 || self.publishers_evicted > 0 {
            p.push(format!("{} threads and {} publisher counters evicted (caps)", self.threads_evicted, self.publishers_evicted));
        }
        (!p.is_empty()).then(|| p.join("; "))
    }
}

#[derive(Clone, Copy)]
struct OpenPublish {
    message: u64,
    rclcpp_ts: Option<i64>,
    publisher: Option<u64>,
    start: i64,
}

struct OpenTake {
    rec: TakeRec,
    /// The subscription's rcl handle, to match the callback.
    subscription: Option<u64>,
}

struct OpenCallback {
    callback: u64,
    start: i64,
    /// The take this callback processes (emitted at callback_end).
    take: Option<TakeRec>,
}

#[derive(Default)]
struct ThreadState {
    publish: Option<OpenPublish>,
    take: Option<OpenTake>,
    callback: Option<OpenCallback>,
}

impl ThreadState {
    fn oldest(&self) -> Option<i64> {
        [self.publish.map(|p| p.start), self.take.as_ref().map(|t| t.rec.rmw_take_ts), self.callback.as_ref().map(|c| c.start)]
            .into_iter()
            .flatten()
            .min()
    }
    fn is_empty(&self) -> bool {
        self.publish.is_none() && self.take.is_none() && self.callback.is_none()
    }
}

/// Watermarks are emitted at most this often (trace time).
const WATERMARK_EVERY_NS: i64 = 10_000_000;

/// Builds [`TraceItem`]s from one trace's records (see the module documentation).
pub struct Assembler {
    cfg: AssembleConfig,
    pub entities: EntityTable,
    threads: BoundedMap<(i64, i64), ThreadState>,
    /// (vpid, rcl publisher handle) → publishes so far.
    order: BoundedMap<(i64, u64), u64>,
    unknown_publishers: BoundedMap<(i64, u64), ()>,
    next_take: TakeSeq,
    last_watermark: i64,
    now: i64,
    pub stats: AssembleStats,
    /// `rmw_publish.timestamp − ns_from_origin` per publish (Jazzy): the trace clock's drift from realtime.
    pub drift: crate::latency::stats::Dist,
}

fn guid_of(g: &ddscope_trace::Gid) -> Guid {
    let b = g.guid();
    let mut p = [0u8; 12];
    p.copy_from_slice(&b[..12]);
    Guid::new(GuidPrefix(p), EntityId([b[12], b[13], b[14], b[15]]))
}

fn node_name(ns: &str, name: &str) -> Arc<str> {
    if ns.is_empty() || ns == "/" {
        Arc::from(format!("/{name}"))
    } else {
        Arc::from(format!("{}/{name}", ns.trim_end_matches('/')))
    }
}

impl Assembler {
    pub fn new(cfg: AssembleConfig) -> Assembler {
        Assembler {
            cfg,
            entities: EntityTable::default(),
            threads: BoundedMap::new(cfg.max_threads),
            order: BoundedMap::new(cfg.max_publishers),
            unknown_publishers: BoundedMap::new(cfg.max_publishers),
            next_take: 0,
            last_watermark: i64::MIN,
            now: i64::MIN,
            stats: AssembleStats::default(),
            drift: Default::default(),
        }
    }

    fn endpoint_names(&self, vpid: i64, ep: &ddscope_trace::Endpoint) -> (Option<Guid>, Option<Arc<str>>, Option<Arc<str>>) {
        let node = self.entities.node(vpid, ep.node_handle).map(|n| node_name(&n.namespace, &n.name));
        (ep.gid.as_ref().map(guid_of), Some(Arc::from(ep.topic_name.as_str())), node)
    }

    /// Feeds one record; finished items go to `out`.
    pub fn push(&mut self, rec: &Record, out: &mut dyn FnMut(TraceItem)) {
        let t = rec.time.ns_from_origin;
        self.now = self.now.max(t);
        if self.entities.observe(rec) {
            if let Ros2Event::RclPublisherInit { publisher_handle, .. } = &rec.event {
                let pid = rec.context.vpid.unwrap_or(-1);
                let ev = &mut self.stats.publishers_evicted;
                self.order.insert((pid, *publisher_handle), 0, &mut |_, _| *ev += 1);
            }
            self.stats.events += 1;
            self.maybe_watermark(out);
            return;
        }
        let pid = rec.context.vpid.unwrap_or(-1);
        let tid = rec.context.vtid.unwrap_or(-1);
        let key = (pid, tid);
        match &rec.event {
            Ros2Event::RclcppPublish { message } => {
                // A publish still open here never reached rmw_publish (intra-process only): replaced.
                let th = self.thread(key, out);
                th.publish = Some(OpenPublish { message: *message, rclcpp_ts: Some(t), publisher: None, start: t });
            }
            Ros2Event::RclPublish { publisher_handle, message } => {
                let th = self.thread(key, out);
                match &mut th.publish {
                    Some(p) if p.message == *message => p.publisher = Some(*publisher_handle),
                    _ => th.publish = Some(OpenPublish { message: *message, rclcpp_ts: None, publisher: Some(*publisher_handle), start: t }),
                }
            }
            Ros2Event::RmwPublish { rmw_publisher_handle, message, timestamp } => {
                if let Some(ts) = timestamp {
                    self.drift.record(ts.saturating_sub(t));
                }
                let th = self.thread(key, out);
                let open = th.publish.take().filter(|p| p.message == *message);
                let cause = th.callback.as_ref().and_then(|c| c.take.as_ref().map(|tk| tk.seq));
                if open.is_none() && rmw_publisher_handle.is_none() {
                    self.stats.rmw_publish_unmatched += 1;
                }
                // The publisher: Jazzy names the rmw handle; otherwise rcl_publish named the rcl handle.
                let ep = match (rmw_publisher_handle, open.and_then(|p| p.publisher)) {
                    (Some(h), _) => self.entities.publisher_by_rmw(pid, *h),
                    (None, Some(h)) => self.entities.publisher(pid, h),
                    (None, None) => None,
                };
                let (writer, topic, node, rcl_handle) = match ep {
                    Some(ep) => {
                        let (w, tp, n) = self.endpoint_names(pid, ep);
                        (w, tp, n, Some(ep.handle))
                    }
                    None => {
                        self.stats.publishes_unknown_publisher += 1;
                        let h = rmw_publisher_handle.or(open.and_then(|p| p.publisher)).unwrap_or(0);
                        if !self.unknown_publishers.contains_key(&(pid, h)) {
                            self.stats.unknown_publishers += 1;
                            self.unknown_publishers.insert((pid, h), (), &mut |_, _| {});
                        }
                        (None, None, None, None)
                    }
                };
                let order = rcl_handle.and_then(|h| self.order.get_mut(&(pid, h))).map(|n| {
                    *n += 1;
                    *n
                });
                if order.is_none() {
                    self.stats.publishes_without_order += 1;
                }
                self.stats.publishes += 1;
                out(TraceItem::Publish(PublishRec {
                    vpid: pid,
                    vtid: tid,
                    writer,
                    topic,
                    node,
                    rclcpp_ts: open.and_then(|p| p.rclcpp_ts),
                    rmw_ts: t,
                    source_ts: *timestamp,
                    order,
                    cause,
                }));
            }
            Ros2Event::RmwTake { rmw_subscription_handle, source_timestamp, taken, .. } => {
                if *taken == 0 {
                    self.stats.empty_takes += 1;
                } else {
                    let ep = self.entities.subscription_by_rmw(pid, *rmw_subscription_handle);
                    let (reader, topic, node, sub) = match ep {
                        Some(ep) => {
                            let (w, tp, n) = self.endpoint_names(pid, ep);
                            (w, tp, n, Some(ep.handle))
                        }
                        None => {
                            self.stats.takes_unknown_subscription += 1;
                            (None, None, None, None)
                        }
                    };
                    let seq = self.next_take;
                    self.next_take += 1;
                    let take = TakeRec {
                        seq,
                        vpid: pid,
                        vtid: tid,
                        reader,
                        topic,
                        node,
                        source_ts: *source_timestamp,
                        rmw_take_ts: t,
                        callback_start_ts: None,
                        callback_end_ts: None,
                    };
                    let th = self.thread(key, out);
                    if let Some(old) = th.take.replace(OpenTake { rec: take, subscription: sub }) {
                        self.emit_take(old.rec, out);
                    }
                }
            }
            Ros2Event::CallbackStart { callback, .. } => {
                let owner = self.entities.callback_owner(pid, *callback);
                let th = self.thread(key, out);
                let mut take = None;
                if let Some(open) = th.take.take() {
                    match (owner, open.subscription) {
                        (Some(CallbackOwner::Subscription(s)), Some(sub)) if s == sub => {
                            let mut r = open.rec;
                            r.callback_start_ts = Some(t);
                            take = Some(r);
                        }
                        _ => th.take = Some(open),
                    }
                }
                let prev = th.callback.replace(OpenCallback { callback: *callback, start: t, take });
                let leftover = th.take.take();
                if let Some(p) = prev {
                    // A callback that never ended (or nested): close it with what it has.
                    self.stats.open_expired += 1;
                    if let Some(tk) = p.take {
                        self.emit_take(tk, out);
                    }
                }
                if let Some(o) = leftover {
                    // Taken, but another callback runs: the take had no callback of its own.
                    self.emit_take(o.rec, out);
                }
            }
            Ros2Event::CallbackEnd { callback } => {
                let th = self.thread(key, out);
                match th.callback.take() {
                    Some(c) if c.callback == *callback => {
                        if let Some(mut tk) = c.take {
                            tk.callback_end_ts = Some(t);
                            self.emit_take(tk, out);
                        }
                    }
                    other => th.callback = other,
                }
                if self.threads.get(&key).is_some_and(|s| s.is_empty()) {
                    self.threads.remove(&key);
                }
            }
            _ => {
                self.stats.events += 1;
            }
        }
        self.maybe_watermark(out);
    }

    fn emit_take(&mut self, tk: TakeRec, out: &mut dyn FnMut(TraceItem)) {
        if tk.callback_start_ts.is_none() {
            self.stats.takes_without_callback += 1;
        }
        self.stats.takes += 1;
        out(TraceItem::Take(tk));
    }

    fn thread(&mut self, key: (i64, i64), out: &mut dyn FnMut(TraceItem)) -> &mut ThreadState {
        if !self.threads.contains_key(&key) && self.threads.len() >= self.threads.max_entries() {
            if let Some((_, st)) = self.threads.evict_lru() {
                self.stats.threads_evicted += 1;
                self.close_thread(st, out);
            }
        }
        self.threads.get_or_insert_with(key, ThreadState::default, &mut |_, _| {})
    }

    fn close_thread(&mut self, st: ThreadState, out: &mut dyn FnMut(TraceItem)) {
        if st.publish.is_some() {
            self.stats.open_expired += 1;
        }
        if let Some(o) = st.take {
            self.stats.open_expired += 1;
            self.emit_take(o.rec, out);
        }
        if let Some(c) = st.callback {
            self.stats.open_expired += 1;
            if let Some(tk) = c.take {
                self.emit_take(tk, out);
            }
        }
    }

    /// The earliest start of anything still open (closing what is too old).
    fn open_floor(&mut self, out: &mut dyn FnMut(TraceItem)) -> i64 {
        let limit = self.now.saturating_sub(self.cfg.max_open_ns);
        let stale: Vec<(i64, i64)> = self.threads.iter().filter(|(_, s)| s.oldest().is_some_and(|o| o < limit)).map(|(k, _)| *k).collect();
        for k in stale {
            if let Some(st) = self.threads.remove(&k) {
                self.close_thread(st, out);
            }
        }
        self.threads.values().filter_map(|s| s.oldest()).min().unwrap_or(i64::MAX)
    }

    fn maybe_watermark(&mut self, out: &mut dyn FnMut(TraceItem)) {
        if self.now.saturating_sub(self.last_watermark) >= WATERMARK_EVERY_NS {
            self.last_watermark = self.now;
            let floor = self.open_floor(out);
            out(TraceItem::Watermark(self.now.min(floor.saturating_sub(1))));
        }
    }

    /// No event until `t` (trace clock): a live source that is idle moves the
    /// watermark on, so the correlation need not wait for the next event.
    pub fn advance(&mut self, t: i64, out: &mut dyn FnMut(TraceItem)) {
        self.now = self.now.max(t);
        self.maybe_watermark(out);
    }

    /// The trace ended: whatever is still open is handed over, then `End`.
    pub fn finish(&mut self, out: &mut dyn FnMut(TraceItem)) {
        for (_, st) in self.threads.drain_lru() {
            if !st.is_empty() {
                self.close_thread(st, out);
            }
        }
        out(TraceItem::End);
    }
}
