//! From ros2_tracing events to publishes, takes and callbacks.
//!
//! One host's trace is a time-ordered stream of `ros2:*` (and, from CARET's
//! tracer, `ros2_caret:*`) events from all its ROS 2 processes and threads.
//! The assembler follows each thread and builds:
//!
//! - **publishes**: `rclcpp_publish` → `rcl_publish` → `rmw_publish` on one
//!   thread, linked by the message pointer (rclcpp passes the same `&msg` down
//!   to rcl and rmw); CARET adds `dds_write` → (`dds_bind_addr_to_addr`) →
//!   `dds_bind_addr_to_stamp`, which names the sample's source timestamp.
//!   Jazzy's `rmw_publish` carries the source timestamp itself. On Humble and
//!   Iron the source timestamp is taken by the DDS write right *after* the
//!   `rmw_publish` tracepoint (rmw_fastrtps: `TRACEPOINT(rmw_publish, msg);
//!   data_writer_->write(...)`, rmw_cyclonedds: `TRACEPOINT(rmw_publish, msg);
//!   dds_write(...)`), so it lies between `rmw_publish` and the thread's next
//!   event: the publish carries that *window* (on the trace clock).
//! - **takes**: `rmw_take` (taken = 1) → `rcl_take` → `rclcpp_take` →
//!   `callback_start` → `callback_end` of the subscription's callback on that
//!   thread; CARET's `dispatch_subscription_callback` names the sample's source
//!   timestamp where there is no `rmw_take` (Galactic). Intra-process
//!   deliveries (`callback_start` with `is_intra_process`) are linked to their
//!   publish where the layout allows: Iron on through the ring buffer slot
//!   (`rclcpp_intra_publish` → `rclcpp_ring_buffer_enqueue(buffer, index)` …
//!   `rclcpp_ring_buffer_dequeue(buffer, index)` → `callback_start`), CARET
//!   through the message pointer (`rclcpp_intra_publish(message)` …
//!   `dispatch_intra_process_subscription_callback(message)`); Humble records
//!   no intra-process publish, so those callbacks are counted, not joined.
//! - **callbacks**: every `callback_start`/`callback_end` pair, with what it
//!   belongs to (subscription, timer, service), for callback durations.
//!
//! Publishes are resolved to a topic the way rcl and the rmw layers create
//! their entities (docs/latency.md cites the sources):
//! - a handle an `rcl_publisher_init` declared (Jazzy: the rmw handle of
//!   `rmw_publish`) → topic, node and, from `rmw_publisher_init`, the DDS GUID;
//! - rcl's `/rosout` logging publishes through a *copy* of the publisher it
//!   initialised (`rcl_publisher_init(&entry.publisher)` on a stack entry that
//!   is then copied into a hash map), so on Humble/Iron its `rcl_publish`
//!   carries a handle no `rcl_publisher_init` declared, and no `rclcpp_publish`
//!   precedes it: counted as `/rosout` logging;
//! - `rmw_publish` (or CARET's `dds_write`) with no `rcl_publish` on the thread,
//!   or of an rmw handle no `rcl_publisher_init` names, is the rmw's own
//!   `ros_discovery_info` writer (rmw_dds_common's graph cache): rmw-internal;
//! - a handle undeclared in a process whose `rcl_init` is not in the trace:
//!   the trace started after that process created it.
//!
//! Only resolved publishes and takes are handed on; every other one is counted
//! by reason ([`AssembleStats`]) and its publisher listed
//! ([`Assembler::unresolved`]), never shown as a topic.
//!
//! Everything keyed by threads, handles and pointers is a capped
//! [`BoundedMap`] that evicts the least recently used entry first and counts
//! it. A thread's open publish, take or callback older than `max_open_ns` is
//! closed with what it has (counted), so a thread that died mid-callback
//! cannot hold the watermark back.

use super::layout::LayoutSeen;
use crate::bounded::BoundedMap;
use ddscope_trace::{CallbackOwner, EntityTable, Record, Ros2Event};
use ddscope_wire::{EntityId, Guid, GuidPrefix};
use serde::Serialize;
use smallvec::SmallVec;
use std::sync::Arc;

/// A take's identity within one trace: the n-th take the assembler emitted.
pub type TakeSeq = u64;
/// A publish's identity within one trace: the n-th publish the assembler emitted.
pub type PubSeq = u64;

/// The source timestamp of a Humble/Iron publish is taken by the DDS write
/// after the `rmw_publish` tracepoint; its window is widened by this much on
/// both sides for the trace clock's conversion to CLOCK_REALTIME (LTTng
/// measures the offset once per session; on real traces the two agree within
/// a microsecond: CARET's `dds_write` → `dds_bind_addr_to_stamp` pairs show a
/// source timestamp 0.3–25 µs after the `dds_write` event).
pub const WINDOW_SLACK_NS: i64 = 10_000;
/// A publish whose thread shows no next event (the process ended) gets this
/// long for its write.
pub const WINDOW_OPEN_NS: i64 = 10_000_000;

/// The latest take of each subscription topic of a node, when a callback of
/// that node started: what the node had received (CARET's "variable passing").
pub type Inputs = SmallVec<[(Arc<str>, TakeSeq); 2]>;

/// One publish of a resolved publisher.
#[derive(Debug, Clone)]
pub struct PublishRec {
    pub seq: PubSeq,
    pub vpid: i64,
    pub vtid: i64,
    /// The rcl publisher handle (the publisher's identity within its process), when known.
    pub publisher: Option<u64>,
    /// The DDS writer GUID (the gid's first 16 bytes), when the trace declared it (`rmw_publisher_init`).
    pub writer: Option<Guid>,
    pub topic: Option<Arc<str>>,
    /// `/namespace/name` of the node that owns the publisher.
    pub node: Option<Arc<str>>,
    /// `rclcpp_publish` (or `rclcpp_intra_publish`), on the trace clock (ns from origin).
    pub rclcpp_ts: Option<i64>,
    /// `rcl_publish`.
    pub rcl_ts: Option<i64>,
    /// `rmw_publish`, else CARET's `dds_write`: where the DDS write starts. `None` on Galactic
    /// without CARET (only rclcpp/rcl) and for intra-process publishes.
    pub rmw_ts: Option<i64>,
    /// The sample's source timestamp, when the trace records it: Jazzy's
    /// `rmw_publish.timestamp`, CARET's `dds_bind_addr_to_stamp`. Writer's CLOCK_REALTIME.
    pub source_ts: Option<i64>,
    /// Humble/Iron: the source timestamp lies in this range of the trace clock
    /// (`rmw_publish` − slack … the thread's next event + slack).
    pub window: Option<(i64, i64)>,
    /// This is the publisher's n-th publish (1-based) since its init, when the trace saw its init.
    pub order: Option<u64>,
    /// The take whose subscription callback made this publish.
    pub cause: Option<TakeSeq>,
    /// The callback this publish was made in started with these latest takes in its node.
    pub inputs: Inputs,
    /// What the callback this publish was made in belongs to, and when it started.
    pub callback: Option<CallbackKind>,
    pub callback_start: Option<i64>,
    /// An intra-process publish (`rclcpp_intra_publish`).
    pub intra: bool,
}

impl PublishRec {
    /// The publish's instant for ordering: the DDS write, else rcl, else rclcpp.
    pub fn ts(&self) -> i64 {
        self.rmw_ts.or(self.rcl_ts).or(self.rclcpp_ts).unwrap_or(0)
    }
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
    /// `rmw_take.source_timestamp` (or CARET's `source_stamp`): the sample's source timestamp
    /// (the writer's clock). `None` for intra-process deliveries.
    pub source_ts: Option<i64>,
    /// `rmw_take`, else CARET's `dispatch_*_callback`, else `callback_start`.
    pub rmw_take_ts: i64,
    pub callback_start_ts: Option<i64>,
    pub callback_end_ts: Option<i64>,
    /// An intra-process delivery, and the publish it came from when the layout tells.
    pub intra: bool,
    pub intra_publish: Option<PubSeq>,
    /// The subscription's history depth (`rcl_subscription_init.queue_depth`), where a take
    /// without source timestamp is joined by replaying its queue (rmw_zenoh_cpp).
    pub queue_depth: Option<u32>,
}

/// What a callback belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallbackKind {
    Subscription { topic: Arc<str> },
    Timer { period_ns: i64 },
    Service { name: Arc<str> },
    /// No `*_callback_added` in the trace named it.
    Unknown,
}

/// One callback run.
#[derive(Debug, Clone)]
pub struct CallbackRec {
    pub vpid: i64,
    pub vtid: i64,
    pub node: Option<Arc<str>>,
    pub kind: CallbackKind,
    /// `rclcpp_callback_register`'s symbol (the user's function), if recorded.
    pub symbol: Option<Arc<str>>,
    pub start: i64,
    pub end: Option<i64>,
    pub intra: bool,
}

/// What a trace contributes to the correlation.
#[derive(Debug, Clone)]
pub enum TraceItem {
    Publish(PublishRec),
    Take(TakeRec),
    Callback(CallbackRec),
    /// Every publish and take that started before this time (trace clock) has been handed over.
    Watermark(i64),
    End,
}

impl crate::pipeline::Marked for TraceItem {
    fn mark(&self) -> crate::pipeline::Mark {
        match self {
            TraceItem::Watermark(t) => crate::pipeline::Mark::Watermark(*t),
            TraceItem::End => crate::pipeline::Mark::End,
            _ => crate::pipeline::Mark::None,
        }
    }
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
        AssembleConfig { max_threads: 1 << 14, max_publishers: 1 << 16, max_open_ns: crate::window::Window::DEFAULT.ns() }
    }
}

/// Why a publish or take was not handed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Unresolved {
    /// rcl's `/rosout` logging: `rcl_publish` of a copy of the publisher rcl initialised.
    Rosout,
    /// The rmw's own entities (`ros_discovery_info`): rmw events without rcl ones.
    RmwInternal,
    /// The handle's creation is not in the trace and neither is its process's `rcl_init`.
    TraceStartedLate,
    /// The process's `rcl_init` is in the trace but no init event declared this handle.
    Undeclared,
}

impl Unresolved {
    pub fn as_str(self) -> &'static str {
        match self {
            Unresolved::Rosout => "rosout",
            Unresolved::RmwInternal => "rmw_internal",
            Unresolved::TraceStartedLate => "trace_started_late",
            Unresolved::Undeclared => "undeclared",
        }
    }
    fn describe(self) -> &'static str {
        match self {
            Unresolved::Rosout => "rcl's /rosout logging (it publishes through a copy of the publisher it declared)",
            Unresolved::RmwInternal => "the rmw's own ros_discovery_info entities (rmw events without rcl ones)",
            Unresolved::TraceStartedLate => "the trace started after their process created them (no rcl_init of the process in the trace)",
            Unresolved::Undeclared => "handles no init event declared although their process's rcl_init is in the trace",
        }
    }
}

/// A publisher or subscription the trace does not resolve, with what is known of it.
#[derive(Debug, Clone, Serialize)]
pub struct UnresolvedEntity {
    pub what: &'static str,
    pub reason: Unresolved,
    pub vpid: i64,
    pub procname: String,
    /// The handle as recorded (rcl publisher handle, rmw handle, or 0 when the event has none).
    pub handle: String,
    /// The DDS GUID when the rmw layer declared it.
    pub gid: Option<String>,
    pub count: u64,
}

/// Counters of the assembly: what was built and what could not be.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AssembleStats {
    pub publishes: u64,
    pub takes: u64,
    pub callbacks: u64,
    /// `rmw_take` with taken = 0 (the executor found nothing).
    pub empty_takes: u64,
    /// Publishes not handed on, by reason.
    pub publishes_rosout: u64,
    pub publishes_rmw_internal: u64,
    pub publishes_trace_started_late: u64,
    pub publishes_undeclared: u64,
    /// Takes not handed on, by reason.
    pub takes_rmw_internal: u64,
    pub takes_trace_started_late: u64,
    pub takes_undeclared: u64,
    /// Takes of a resolved subscription without a source timestamp (0): not joinable.
    pub takes_without_source_ts: u64,
    /// Intra-process publishes (`rclcpp_intra_publish`) and deliveries.
    pub intra_publishes: u64,
    pub intra_takes: u64,
    /// Intra-process callbacks the layout cannot tie to a publish (Humble records no intra-process publish).
    pub intra_takes_unlinked: u64,
    /// Humble/Iron publishes whose window has no next event on the thread (closed after [`WINDOW_OPEN_NS`]).
    pub windows_open_ended: u64,
    /// CARET `dds_bind_addr_to_stamp` events that belonged to no open publish (rmw-internal writes).
    pub caret_stamps_unmatched: u64,
    /// Publishes without a publish order (publisher init not seen, or its counter evicted).
    pub publishes_without_order: u64,
    /// Publish/take/callback states closed because they stayed open longer than `max_open_ns`,
    /// the thread's state was evicted, or the trace ended (a killed process).
    pub open_expired: u64,
    /// Taken samples whose callback never started on that thread (taken and dropped — e.g. the
    /// DDS copy of an intra-process delivery —, or another callback ran).
    pub takes_without_callback: u64,
    pub threads_evicted: u64,
    pub publishers_evicted: u64,
    /// Entries evicted from the pointer tables (CARET addresses, ring-buffer slots, intra messages).
    pub links_evicted: u64,
    /// Events of init type or others that the assembly did not need.
    pub events: u64,
    /// Processes whose events stop well before the trace's end (set when the trace ended).
    pub processes_ended_early: Vec<ProcessEnd>,
}

/// A process whose events stop well before the trace's end: more than [`ENDED_EARLY_MIN_NS`]
/// and more than twice its longest silence before, while the others went on — it ended, was
/// killed (its last events possibly lost) or fell idle.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessEnd {
    pub vpid: i64,
    pub procname: String,
    /// Its last event (trace clock, ns).
    pub last_event_ns: i64,
    /// Its last event → the trace's last event.
    pub before_end_ms: f64,
    /// The longest time between two of its events before that.
    pub longest_gap_ms: f64,
}

/// A process silent this long before the trace's end at least (and twice its longest silence) ended early.
pub const ENDED_EARLY_MIN_NS: i64 = 100_000_000;

/// Processes followed for [`AssembleStats::processes_ended_early`].
const MAX_PROCESSES: usize = 4096;

/// What the trace shows of one process.
struct ProcSpan {
    procname: String,
    last: i64,
    longest_gap: i64,
}

impl AssembleStats {
    /// What the assembly could not use, one line per reason (empty when everything was used).
    pub fn notes(&self) -> Vec<String> {
        let mut v = vec![];
        let pubs = [
            (self.publishes_rosout, Unresolved::Rosout),
            (self.publishes_rmw_internal, Unresolved::RmwInternal),
            (self.publishes_trace_started_late, Unresolved::TraceStartedLate),
            (self.publishes_undeclared, Unresolved::Undeclared),
        ];
        for (n, r) in pubs {
            if n > 0 {
                v.push(format!("{n} publishes not joined: {}", r.describe()));
            }
        }
        let takes = [
            (self.takes_rmw_internal, Unresolved::RmwInternal),
            (self.takes_trace_started_late, Unresolved::TraceStartedLate),
            (self.takes_undeclared, Unresolved::Undeclared),
        ];
        for (n, r) in takes {
            if n > 0 {
                let how = if r == Unresolved::RmwInternal { "not joined" } else { "without topic, joined only to captured samples" };
                v.push(format!("{n} takes {how}: {}", r.describe()));
            }
        }
        if self.takes_without_source_ts > 0 {
            v.push(format!("{} takes without a source timestamp: not joined", self.takes_without_source_ts));
        }
        if self.intra_takes_unlinked > 0 {
            v.push(format!(
                "{} intra-process callbacks not joined: this layout records no intra-process publish (Humble; Iron on and CARET do)",
                self.intra_takes_unlinked
            ));
        }
        if self.open_expired > 0 {
            v.push(format!("{} publishes/takes/callbacks never finished on their thread (closed with what they had; a process killed or a trace cut)", self.open_expired));
        }
        for p in self.processes_ended_early.iter().take(8) {
            v.push(format!(
                "process {} (pid {}): its events stop {:.1} ms before the trace's end (its longest silence before that: {:.1} ms): it ended, was killed or fell idle, or its last events were lost (then what it published after that has no traced publish)",
                ddscope_traffic::text::escape_controls(&p.procname),
                p.vpid,
                p.before_end_ms,
                p.longest_gap_ms
            ));
        }
        if self.threads_evicted > 0 || self.publishers_evicted > 0 || self.links_evicted > 0 {
            v.push(format!(
                "{} threads, {} publisher counters and {} pointer links evicted (caps)",
                self.threads_evicted, self.publishers_evicted, self.links_evicted
            ));
        }
        v
    }

    /// The notes in one line, if any.
    pub fn problem_line(&self) -> Option<String> {
        let n = self.notes();
        (!n.is_empty()).then(|| n.join("; "))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// rclcpp/rcl seen, waiting for the rmw layer.
    Open,
    /// `rmw_publish` (or `dds_write`) seen: waiting for CARET's stamp or the thread's next event.
    Written,
}

#[derive(Clone)]
struct OpenPublish {
    message: u64,
    /// CARET: the addresses the message was copied to (`dds_bind_addr_to_addr`).
    addrs: SmallVec<[u64; 2]>,
    rclcpp_ts: Option<i64>,
    rcl_ts: Option<i64>,
    rmw_ts: Option<i64>,
    /// The rcl handle from `rcl_publish` (or CARET's `rclcpp_publish`).
    publisher: Option<u64>,
    /// Jazzy: the rmw handle from `rmw_publish`.
    rmw_publisher: Option<u64>,
    source_ts: Option<i64>,
    start: i64,
    stage: Stage,
    /// The take of the subscription callback the publish was made in, and that callback's inputs.
    cause: Option<TakeSeq>,
    inputs: Inputs,
    callback: Option<(CallbackKind, i64)>,
    /// The publisher's count, taken when the publish reaches the DDS write (the writer's
    /// sequence number): threads publishing on one publisher finish their events out of order.
    order: Option<u64>,
}

impl OpenPublish {
    /// Whether `e` (on the same thread) continues this publish down the layers.
    fn continued_by(&self, e: &Ros2Event) -> bool {
        match e {
            Ros2Event::RclPublish { message, .. } | Ros2Event::RmwPublish { message, .. } => self.stage == Stage::Open && *message == self.message,
            Ros2Event::CaretDdsWrite { message } => *message == self.message,
            // CARET: the copies and the stamp of the write; a DDS delivery (to this process) may come in between.
            Ros2Event::CaretDdsBindAddrToAddr { .. } | Ros2Event::CaretDdsBindAddrToStamp { .. } | Ros2Event::CaretOnDataAvailable { .. } => true,
            _ => false,
        }
    }
}

struct OpenTake {
    rec: TakeRec,
    /// The subscription's rcl handle, to match the callback.
    subscription: Option<u64>,
}

struct OpenCallback {
    callback: u64,
    kind: CallbackKind,
    node: Option<Arc<str>>,
    start: i64,
    intra: bool,
    /// The take this callback processes (emitted at callback_end).
    take: Option<TakeRec>,
    inputs: Inputs,
}

#[derive(Default)]
struct ThreadState {
    publish: Option<OpenPublish>,
    take: Option<OpenTake>,
    callback: Option<OpenCallback>,
    /// The last intra-process publish on this thread (ring buffer enqueues follow it).
    last_intra: Option<PubSeq>,
    /// An intra-process message dequeued (Iron on) or dispatched (CARET) for the next callback.
    intra_link: Option<PubSeq>,
    /// The handle of the latest `rclcpp_executor_execute` (the rcl subscription, timer, … the
    /// executor runs next): names the subscription of an `rcl_take` without `rmw_take`.
    executing: Option<u64>,
}

impl ThreadState {
    fn oldest(&self) -> Option<i64> {
        [self.publish.as_ref().map(|p| p.start), self.take.as_ref().map(|t| t.rec.rmw_take_ts), self.callback.as_ref().map(|c| c.start)]
            .into_iter()
            .flatten()
            .min()
    }
    fn is_empty(&self) -> bool {
        self.publish.is_none() && self.take.is_none() && self.callback.is_none()
    }
}

// Watermarks are emitted at most this often (trace time), as for captures.
use crate::pipeline::WATERMARK_EVERY_NS;
/// Entries of the pointer tables (intra-process messages and ring-buffer slots).
const MAX_LINKS: usize = 1 << 16;
/// Unresolved publishers and subscriptions listed.
const MAX_UNRESOLVED_LISTED: usize = 64;

/// Builds [`TraceItem`]s from one trace's records (see the module documentation).
pub struct Assembler {
    cfg: AssembleConfig,
    pub entities: EntityTable,
    threads: BoundedMap<(i64, i64), ThreadState>,
    /// (vpid, rcl publisher handle) → publishes so far.
    order: BoundedMap<(i64, u64), u64>,
    /// (vpid, message) → intra-process publish (CARET links the dispatch by the message pointer).
    intra_by_message: BoundedMap<(i64, u64), PubSeq>,
    /// (vpid, ring buffer, slot) → intra-process publish (Iron on).
    intra_by_slot: BoundedMap<(i64, u64, u64), PubSeq>,
    /// (vpid, node handle) → the latest take per subscription topic whose callback ended.
    latest: BoundedMap<(i64, u64), Inputs>,
    unresolved: BoundedMap<(i64, &'static str, Unresolved, u64), UnresolvedEntity>,
    /// vpid → its name, last event and longest silence.
    procs: BoundedMap<i64, ProcSpan>,
    next_take: TakeSeq,
    next_publish: PubSeq,
    last_watermark: i64,
    now: i64,
    pub stats: AssembleStats,
    pub layout: LayoutSeen,
    /// `rmw_publish.timestamp − ns_from_origin` per publish (Jazzy): the trace clock's drift from realtime.
    pub drift: crate::latency::stats::Dist,
}

/// A take begun at `rcl_take` (no `rmw_take` in the layout): no source timestamp, not intra-process.
pub fn is_rcl_take(t: &TakeRec) -> bool {
    t.source_ts.is_none() && !t.intra
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

/// A resolved publisher or subscription: GUID, topic, node, rcl handle, node handle.
type Resolved = (Option<Guid>, Arc<str>, Option<Arc<str>>, u64, u64);

impl Assembler {
    pub fn new(cfg: AssembleConfig) -> Assembler {
        Assembler {
            cfg,
            entities: EntityTable::default(),
            threads: BoundedMap::new(cfg.max_threads),
            order: BoundedMap::new(cfg.max_publishers),
            intra_by_message: BoundedMap::new(MAX_LINKS),
            intra_by_slot: BoundedMap::new(MAX_LINKS),
            latest: BoundedMap::new(cfg.max_publishers),
            unresolved: BoundedMap::new(MAX_UNRESOLVED_LISTED),
            procs: BoundedMap::new(MAX_PROCESSES),
            next_take: 0,
            next_publish: 0,
            last_watermark: i64::MIN,
            now: i64::MIN,
            stats: AssembleStats::default(),
            layout: LayoutSeen::default(),
            drift: Default::default(),
        }
    }

    /// The publishers and subscriptions the trace did not resolve (at most 64, by first seen), with counts.
    pub fn unresolved(&self) -> Vec<UnresolvedEntity> {
        let mut v: Vec<UnresolvedEntity> = self.unresolved.values().cloned().collect();
        v.sort_by(|a, b| b.count.cmp(&a.count).then(a.vpid.cmp(&b.vpid)).then(a.handle.cmp(&b.handle)));
        v
    }

    fn resolve(&self, vpid: i64, ep: &ddscope_trace::Endpoint) -> Resolved {
        let node = self.entities.node(vpid, ep.node_handle).map(|n| node_name(&n.namespace, &n.name));
        // An all-zero gid is no gid: rmw_zenoh_cpp records zeros for every subscription (docs/zenoh.md, "ROS 2 traces")
        let gid = ep.gid.as_ref().filter(|g| g.guid() != [0u8; 16]).map(guid_of);
        (gid, Arc::from(ep.topic_name.as_str()), node, ep.handle, ep.node_handle)
    }

    fn note_unresolved(&mut self, rec: &Record, what: &'static str, reason: Unresolved, handle: u64, gid: Option<Guid>) {
        let vpid = rec.context.vpid.unwrap_or(-1);
        let key = (vpid, what, reason, handle);
        if let Some(e) = self.unresolved.get_mut(&key) {
            e.count += 1;
            return;
        }
        if self.unresolved.len() >= self.unresolved.max_entries() {
            return;
        }
        let procname = rec.context.procname.map(|p| p.to_string_lossy()).unwrap_or_default();
        let e = UnresolvedEntity {
            what,
            reason,
            vpid,
            procname,
            handle: format!("{handle:#x}"),
            gid: gid.map(|g| g.to_string()),
            count: 1,
        };
        self.unresolved.insert(key, e, &mut |_, _| {});
    }

    /// Feeds one record; finished items go to `out`.
    pub fn push(&mut self, rec: &Record, out: &mut dyn FnMut(TraceItem)) {
        let t = rec.time.ns_from_origin;
        self.now = self.now.max(t);
        let pid = rec.context.vpid.unwrap_or(-1);
        self.note_process(rec, pid, t);
        let tid = rec.context.vtid.unwrap_or(-1);
        let key = (pid, tid);
        self.note_layout(&rec.event);
        // An open publish is closed by any event of its thread that does not continue it; for a
        // Humble publish waiting after rmw_publish that event ends the window of its source timestamp.
        let ends = self.threads.get(&key).and_then(|th| th.publish.as_ref()).is_some_and(|p| !p.continued_by(&rec.event));
        if ends {
            if let Some(p) = self.threads.get_mut(&key).and_then(|th| th.publish.take()) {
                self.finish_publish(rec, p, Some(t), out);
            }
        }
        if self.entities.observe(rec) {
            if let Ros2Event::RclPublisherInit { publisher_handle, .. } = &rec.event {
                let ev = &mut self.stats.publishers_evicted;
                self.order.insert((pid, *publisher_handle), 0, &mut |_, _| *ev += 1);
            }
            if let Ros2Event::RclInit { version, .. } = &rec.event {
                if self.layout.tracetools.is_none() {
                    self.layout.tracetools = Some(version.clone());
                }
            }
            self.stats.events += 1;
            self.maybe_watermark(out);
            return;
        }
        match &rec.event {
            Ros2Event::RclcppPublish { publisher_handle, message } => {
                let mut p = self.open_publish(key, *message, t);
                p.rclcpp_ts = Some(t);
                p.publisher = *publisher_handle;
                self.thread(key, out).publish = Some(p);
            }
            Ros2Event::RclPublish { publisher_handle, message } => {
                let open = self.threads.get_mut(&key).and_then(|th| th.publish.take());
                let mut p = open.unwrap_or_else(|| self.open_publish(key, *message, t));
                p.publisher = Some(*publisher_handle);
                p.rcl_ts = Some(t);
                self.thread(key, out).publish = Some(p);
            }
            Ros2Event::RmwPublish { rmw_publisher_handle, message, timestamp } => {
                if let Some(ts) = timestamp {
                    self.drift.record(ts.saturating_sub(t));
                }
                let open = self.threads.get_mut(&key).and_then(|th| th.publish.take());
                let mut p = open.unwrap_or_else(|| self.open_publish(key, *message, t));
                p.rmw_ts = Some(t);
                p.rmw_publisher = *rmw_publisher_handle;
                p.source_ts = *timestamp;
                p.stage = Stage::Written;
                self.count_write(pid, &mut p);
                if p.source_ts.is_some() {
                    self.finish_publish(rec, p, None, out);
                } else {
                    self.thread(key, out).publish = Some(p);
                }
            }
            Ros2Event::CaretDdsWrite { message } => {
                let open = self.threads.get_mut(&key).and_then(|th| th.publish.take());
                let p = match open {
                    Some(mut p) if p.message == *message => {
                        if p.rmw_ts.is_none() {
                            p.rmw_ts = Some(t);
                            self.count_write(pid, &mut p);
                        }
                        p.stage = Stage::Written;
                        p
                    }
                    other => {
                        if let Some(p) = other {
                            self.finish_publish(rec, p, Some(t), out);
                        }
                        // dds_write without rcl_publish: the rmw's discovery-info writer.
                        let mut p = self.open_publish(key, *message, t);
                        p.rmw_ts = Some(t);
                        p.stage = Stage::Written;
                        p
                    }
                };
                self.thread(key, out).publish = Some(p);
            }
            Ros2Event::CaretDdsBindAddrToAddr { addr_from, addr_to } => {
                if let Some(p) = self.threads.get_mut(&key).and_then(|th| th.publish.as_mut()) {
                    if (p.message == *addr_from || p.addrs.contains(addr_from)) && p.addrs.len() < 8 {
                        p.addrs.push(*addr_to);
                    }
                }
            }
            Ros2Event::CaretDdsBindAddrToStamp { addr, source_stamp } => {
                let th = self.threads.get_mut(&key);
                let open = th.and_then(|th| match &th.publish {
                    Some(p) if p.stage == Stage::Written && (p.message == *addr || p.addrs.contains(addr)) => th.publish.take(),
                    _ => None,
                });
                match open {
                    Some(mut p) => {
                        p.source_ts = Some(*source_stamp);
                        self.finish_publish(rec, p, None, out);
                    }
                    None => self.stats.caret_stamps_unmatched += 1,
                }
            }
            Ros2Event::RclcppIntraPublish { publisher_handle, message } => {
                let mut p = self.open_publish(key, *message, t);
                p.rclcpp_ts = Some(t);
                p.publisher = Some(*publisher_handle);
                if let Some(seq) = self.emit_publish(rec, p, true, None, out) {
                    self.thread(key, out).last_intra = Some(seq);
                    let ev = &mut self.stats.links_evicted;
                    self.intra_by_message.insert((pid, *message), seq, &mut |_, _| *ev += 1);
                }
            }
            Ros2Event::RclcppRingBufferEnqueue { buffer, index, .. } => {
                let last = self.threads.get(&key).and_then(|th| th.last_intra);
                if let Some(seq) = last {
                    let ev = &mut self.stats.links_evicted;
                    self.intra_by_slot.insert((pid, *buffer, *index), seq, &mut |_, _| *ev += 1);
                }
                self.stats.events += 1;
            }
            Ros2Event::RclcppRingBufferDequeue { buffer, index, .. } => {
                let link = self.intra_by_slot.remove(&(pid, *buffer, *index));
                self.thread(key, out).intra_link = link;
                self.stats.events += 1;
            }
            Ros2Event::DispatchIntraProcessSubscriptionCallback { message, .. } => {
                let link = self.intra_by_message.get(&(pid, *message)).copied();
                self.thread(key, out).intra_link = link;
            }
            Ros2Event::RmwTake { rmw_subscription_handle, source_timestamp, taken, .. } => {
                if *taken == 0 {
                    self.stats.empty_takes += 1;
                } else if let Some(ep) = self.entities.subscription_by_rmw(pid, *rmw_subscription_handle) {
                    let (reader, topic, node, sub, _) = self.resolve(pid, ep);
                    if *source_timestamp == 0 {
                        self.stats.takes_without_source_ts += 1;
                    } else {
                        let rec_ = self.new_take(pid, tid, reader, topic, node, Some(*source_timestamp), t);
                        let th = self.thread(key, out);
                        if let Some(old) = th.take.replace(OpenTake { rec: rec_, subscription: Some(sub) }) {
                            self.emit_take(old.rec, out);
                        }
                    }
                } else {
                    let gid = self.entities.rmw_only_subscription(pid, *rmw_subscription_handle);
                    // rmw_cyclonedds's internal reader has no init event; its takes carry no
                    // message info (source timestamp 0), unlike every rcl subscription's.
                    let reason = if gid.is_some() || *source_timestamp == 0 {
                        Unresolved::RmwInternal
                    } else if self.entities.process_inited(pid) {
                        Unresolved::Undeclared
                    } else {
                        Unresolved::TraceStartedLate
                    };
                    match reason {
                        Unresolved::RmwInternal => self.stats.takes_rmw_internal += 1,
                        Unresolved::Undeclared => self.stats.takes_undeclared += 1,
                        _ => self.stats.takes_trace_started_late += 1,
                    }
                    self.note_unresolved(rec, "subscription", reason, *rmw_subscription_handle, gid.as_ref().map(guid_of));
                    if reason != Unresolved::RmwInternal {
                        // Without its subscription's creation the take has no topic: handed on for
                        // the wire join only (the captured sample with this source timestamp tells it).
                        let seq = self.next_take;
                        self.next_take += 1;
                        let tk = TakeRec {
                            seq,
                            vpid: pid,
                            vtid: tid,
                            reader: None,
                            topic: None,
                            node: None,
                            source_ts: Some(*source_timestamp),
                            rmw_take_ts: t,
                            callback_start_ts: None,
                            callback_end_ts: None,
                            intra: false,
                            intra_publish: None,
                            queue_depth: None,
                        };
                        let th = self.thread(key, out);
                        if let Some(old) = th.take.replace(OpenTake { rec: tk, subscription: None }) {
                            self.emit_take(old.rec, out);
                        }
                    }
                }
            }
            Ros2Event::DispatchSubscriptionCallback { callback, source_stamp, .. } => {
                // CARET: the sample's source timestamp, right before the callback (Galactic has no rmw_take).
                let has_take = self.threads.get(&key).is_some_and(|th| th.take.as_ref().is_some_and(|tk| tk.rec.source_ts == Some(*source_stamp)));
                if !has_take {
                    let sub = match self.entities.callback_owner(pid, *callback) {
                        Some(CallbackOwner::Subscription(s)) => self.entities.subscription(pid, s).map(|ep| self.resolve(pid, ep)),
                        _ => None,
                    };
                    match sub {
                        Some((reader, topic, node, sub, _)) => {
                            let rec_ = self.new_take(pid, tid, reader, topic, node, Some(*source_stamp), t);
                            let th = self.thread(key, out);
                            if let Some(old) = th.take.replace(OpenTake { rec: rec_, subscription: Some(sub) }) {
                                self.emit_take(old.rec, out);
                            }
                        }
                        None => {
                            let reason = if self.entities.process_inited(pid) { Unresolved::Undeclared } else { Unresolved::TraceStartedLate };
                            match reason {
                                Unresolved::Undeclared => self.stats.takes_undeclared += 1,
                                _ => self.stats.takes_trace_started_late += 1,
                            }
                            self.note_unresolved(rec, "subscription callback", reason, *callback, None);
                        }
                    }
                }
            }
            Ros2Event::RclcppExecutorExecute { handle } => {
                self.thread(key, out).executing = Some(*handle);
                self.stats.events += 1;
            }
            Ros2Event::RclTake { .. } if self.layout.rcl_only() => {
                // No rmw_take (rmw_zenoh_cpp): the take starts here, on the subscription the executor
                // runs; it has no source timestamp and is joined to the wire by the subscription's queue.
                let has_open = self.threads.get(&key).is_some_and(|th| th.take.as_ref().is_some_and(|tk| !is_rcl_take(&tk.rec)));
                if !has_open {
                    let exec = self.threads.get(&key).and_then(|th| th.executing);
                    match exec.and_then(|h| self.entities.subscription(pid, h)) {
                        Some(ep) => {
                            let depth = u32::try_from(ep.queue_depth).unwrap_or(u32::MAX);
                            let (reader, topic, node, sub, _) = self.resolve(pid, ep);
                            let mut rec_ = self.new_take(pid, tid, reader, topic, node, None, t);
                            rec_.queue_depth = Some(depth);
                            let th = self.thread(key, out);
                            if th.take.replace(OpenTake { rec: rec_, subscription: Some(sub) }).is_some() {
                                self.stats.empty_takes += 1;
                            }
                        }
                        None => {
                            let reason = if self.entities.process_inited(pid) { Unresolved::Undeclared } else { Unresolved::TraceStartedLate };
                            match reason {
                                Unresolved::Undeclared => self.stats.takes_undeclared += 1,
                                _ => self.stats.takes_trace_started_late += 1,
                            }
                            self.note_unresolved(rec, "subscription", reason, exec.unwrap_or(0), None);
                        }
                    }
                }
                self.stats.events += 1;
            }
            Ros2Event::CallbackStart { callback, is_intra_process } => {
                let owner = self.entities.callback_owner(pid, *callback);
                let intra = *is_intra_process != 0;
                let node_handle = self.callback_node(pid, owner);
                let kind = self.callback_kind(pid, owner);
                let cb_node = node_handle.and_then(|n| self.entities.node(pid, n)).map(|n| node_name(&n.namespace, &n.name));
                let inputs = node_handle.and_then(|n| self.latest.get(&(pid, n)).cloned()).unwrap_or_default();
                let intra_sub = match (intra, owner) {
                    (true, Some(CallbackOwner::Subscription(s))) => self.entities.subscription(pid, s).map(|ep| self.resolve(pid, ep)),
                    _ => None,
                };
                let seq_intra = intra_sub.as_ref().map(|_| self.next_take);
                if seq_intra.is_some() {
                    self.next_take += 1;
                }
                let th = self.thread(key, out);
                let mut take = None;
                if let Some(open) = th.take.take() {
                    match (owner, open.subscription) {
                        (Some(CallbackOwner::Subscription(s)), Some(sub)) if s == sub && !intra => {
                            let mut r = open.rec;
                            r.callback_start_ts = Some(t);
                            take = Some(r);
                        }
                        // A take of an undeclared subscription: the next non-intra callback of
                        // the thread whose owner is unknown too is its callback (rclcpp's order).
                        (None, None) if !intra => {
                            let mut r = open.rec;
                            r.callback_start_ts = Some(t);
                            take = Some(r);
                        }
                        _ => th.take = Some(open),
                    }
                }
                let link = th.intra_link.take();
                if let (Some((reader, topic, node, _, _)), Some(seq)) = (intra_sub, seq_intra) {
                    take = Some(TakeRec {
                        seq,
                        vpid: pid,
                        vtid: tid,
                        reader,
                        topic: Some(topic),
                        node,
                        source_ts: None,
                        rmw_take_ts: t,
                        callback_start_ts: Some(t),
                        callback_end_ts: None,
                        intra: true,
                        intra_publish: link,
                        queue_depth: None,
                    });
                }
                let prev = th.callback.replace(OpenCallback { callback: *callback, kind, node: cb_node, start: t, intra, take, inputs });
                let leftover = th.take.take();
                if let Some(p) = prev {
                    // A callback that never ended (or nested): close it with what it has.
                    self.stats.open_expired += 1;
                    self.emit_callback(rec, p, None, out);
                }
                if let Some(o) = leftover {
                    if is_rcl_take(&o.rec) {
                        // rcl_take without rmw_take fires also when nothing was taken: no callback of its own, nothing taken.
                        self.stats.empty_takes += 1;
                    } else {
                        // Taken, but another callback runs: the take had no callback of its own.
                        self.emit_take(o.rec, out);
                    }
                }
            }
            Ros2Event::CallbackEnd { callback } => {
                let th = self.thread(key, out);
                match th.callback.take() {
                    Some(c) if c.callback == *callback => self.emit_callback(rec, c, Some(t), out),
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

    /// Process `pid` has an event at `t`.
    fn note_process(&mut self, rec: &Record, pid: i64, t: i64) {
        if let Some(p) = self.procs.get_mut(&pid) {
            p.longest_gap = p.longest_gap.max(t.saturating_sub(p.last));
            p.last = p.last.max(t);
            return;
        }
        let procname = rec.context.procname.map(|p| p.to_string_lossy().to_string()).unwrap_or_default();
        self.procs.insert(pid, ProcSpan { procname, last: t, longest_gap: 0 }, &mut |_, _| {});
    }

    /// The processes whose events stop well before the trace's end ([`ProcessEnd`]).
    fn processes_ended_early(&self) -> Vec<ProcessEnd> {
        let end = self.now;
        let mut v: Vec<ProcessEnd> = self
            .procs
            .iter()
            .filter(|(_, p)| {
                let quiet = end.saturating_sub(p.last);
                quiet > ENDED_EARLY_MIN_NS && quiet > p.longest_gap.saturating_mul(2)
            })
            .map(|(pid, p)| ProcessEnd {
                vpid: *pid,
                procname: p.procname.clone(),
                last_event_ns: p.last,
                before_end_ms: end.saturating_sub(p.last) as f64 / 1e6,
                longest_gap_ms: p.longest_gap as f64 / 1e6,
            })
            .collect();
        v.sort_by(|a, b| a.last_event_ns.cmp(&b.last_event_ns).then(a.vpid.cmp(&b.vpid)));
        v
    }

    /// A new publish on thread `key`, made inside whatever callback runs there.
    fn open_publish(&self, key: (i64, i64), message: u64, t: i64) -> OpenPublish {
        let (cause, inputs, callback) = match self.threads.get(&key).and_then(|th| th.callback.as_ref()) {
            Some(c) => (c.take.as_ref().map(|tk| tk.seq), c.inputs.clone(), Some((c.kind.clone(), c.start))),
            None => (None, Inputs::new(), None),
        };
        OpenPublish {
            message,
            addrs: SmallVec::new(),
            rclcpp_ts: None,
            rcl_ts: None,
            rmw_ts: None,
            publisher: None,
            rmw_publisher: None,
            source_ts: None,
            start: t,
            stage: Stage::Open,
            cause,
            inputs,
            callback,
            order: None,
        }
    }

    /// Counts a publish of its publisher when it reaches the DDS write.
    fn count_write(&mut self, pid: i64, p: &mut OpenPublish) {
        let rcl = match (p.rmw_publisher, p.publisher) {
            (Some(h), _) => self.entities.publisher_by_rmw(pid, h).map(|e| e.handle),
            (None, Some(h)) => self.entities.publisher(pid, h).map(|e| e.handle),
            (None, None) => None,
        };
        if let Some(n) = rcl.and_then(|h| self.order.get_mut(&(pid, h))) {
            *n += 1;
            p.order = Some(*n);
        }
    }

    fn note_layout(&mut self, e: &Ros2Event) {
        let l = &mut self.layout;
        match e {
            Ros2Event::RmwPublish { timestamp, .. } => {
                l.rmw_publish += 1;
                if timestamp.is_some() {
                    l.rmw_publish_with_ts += 1;
                }
            }
            Ros2Event::RmwTake { .. } => l.rmw_take += 1,
            Ros2Event::RclPublish { .. } => l.rcl_publish += 1,
            Ros2Event::CaretDdsWrite { .. } | Ros2Event::CaretDdsBindAddrToStamp { .. } | Ros2Event::CaretDdsBindAddrToAddr { .. } | Ros2Event::CaretOnDataAvailable { .. } => {
                l.caret += 1
            }
            Ros2Event::DispatchSubscriptionCallback { .. } | Ros2Event::DispatchIntraProcessSubscriptionCallback { .. } => l.dispatch += 1,
            Ros2Event::RclcppIntraPublish { .. } => l.intra_publish += 1,
            Ros2Event::RclcppRingBufferEnqueue { .. } | Ros2Event::RclcppRingBufferDequeue { .. } => l.ring_buffer += 1,
            _ => {}
        }
    }

    fn callback_node(&self, pid: i64, owner: Option<CallbackOwner>) -> Option<u64> {
        match owner? {
            CallbackOwner::Subscription(s) => self.entities.subscription(pid, s).map(|e| e.node_handle),
            CallbackOwner::Timer(h) => self.entities.timer(pid, h).and_then(|t| t.node_handle),
            CallbackOwner::Service(h) => self.entities.service(pid, h).map(|s| s.node_handle),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn new_take(&mut self, pid: i64, tid: i64, reader: Option<Guid>, topic: Arc<str>, node: Option<Arc<str>>, source_ts: Option<i64>, t: i64) -> TakeRec {
        let seq = self.next_take;
        self.next_take += 1;
        TakeRec {
            seq,
            vpid: pid,
            vtid: tid,
            reader,
            topic: Some(topic),
            node,
            source_ts,
            rmw_take_ts: t,
            callback_start_ts: None,
            callback_end_ts: None,
            intra: false,
            intra_publish: None,
            queue_depth: None,
        }
    }

    /// Resolves and hands on a publish whose layers are complete. `next`: the time of the
    /// publishing thread's next event (the end of a Humble window).
    fn finish_publish(&mut self, rec: &Record, p: OpenPublish, next: Option<i64>, out: &mut dyn FnMut(TraceItem)) {
        self.emit_publish(rec, p, false, next, out);
    }

    fn emit_publish(&mut self, rec: &Record, p: OpenPublish, intra: bool, next: Option<i64>, out: &mut dyn FnMut(TraceItem)) -> Option<PubSeq> {
        let pid = rec.context.vpid.unwrap_or(-1);
        let tid = rec.context.vtid.unwrap_or(-1);
        // The publisher: Jazzy names the rmw handle; otherwise rcl_publish (or CARET's rclcpp_publish) named the rcl handle.
        let ep = match (p.rmw_publisher, p.publisher) {
            (Some(h), _) => self.entities.publisher_by_rmw(pid, h),
            (None, Some(h)) => self.entities.publisher(pid, h),
            (None, None) => None,
        };
        let Some(ep) = ep else {
            let (reason, handle, gid) = match (p.rmw_publisher, p.publisher) {
                (Some(h), _) if self.entities.rmw_only_publisher(pid, h).is_some() => {
                    (Unresolved::RmwInternal, h, self.entities.rmw_only_publisher(pid, h).as_ref().map(guid_of))
                }
                // rmw_publish / dds_write without rcl_publish: the rmw's own writer.
                (_, None) => (Unresolved::RmwInternal, p.rmw_publisher.unwrap_or(0), None),
                (_, Some(h)) => {
                    if !self.entities.process_inited(pid) {
                        (Unresolved::TraceStartedLate, h, None)
                    } else if p.rclcpp_ts.is_none() && self.entities.declares_rosout(pid) {
                        (Unresolved::Rosout, h, None)
                    } else {
                        (Unresolved::Undeclared, h, None)
                    }
                }
            };
            match reason {
                Unresolved::Rosout => self.stats.publishes_rosout += 1,
                Unresolved::RmwInternal => self.stats.publishes_rmw_internal += 1,
                Unresolved::TraceStartedLate => self.stats.publishes_trace_started_late += 1,
                Unresolved::Undeclared => self.stats.publishes_undeclared += 1,
            }
            let what = if reason == Unresolved::RmwInternal { "rmw publisher" } else { "publisher" };
            self.note_unresolved(rec, what, reason, handle, gid);
            // A data publisher whose creation the trace misses still names its sample's source
            // timestamp (Jazzy, CARET): handed on without topic, for the wire join only (the
            // captured sample tells writer and topic).
            if matches!(reason, Unresolved::TraceStartedLate | Unresolved::Undeclared) && p.source_ts.is_some() && !intra {
                let seq = self.next_publish;
                self.next_publish += 1;
                out(TraceItem::Publish(PublishRec {
                    seq,
                    vpid: pid,
                    vtid: tid,
                    publisher: p.publisher,
                    writer: None,
                    topic: None,
                    node: None,
                    rclcpp_ts: p.rclcpp_ts,
                    rcl_ts: p.rcl_ts,
                    rmw_ts: p.rmw_ts,
                    source_ts: p.source_ts,
                    window: None,
                    order: None,
                    cause: p.cause,
                    inputs: p.inputs,
                    callback: p.callback.as_ref().map(|c| c.0.clone()),
                    callback_start: p.callback.map(|c| c.1),
                    intra: false,
                }));
            }
            return None;
        };
        let (writer, topic, node, rcl_handle, _) = self.resolve(pid, ep);
        // The DDS writer's sequence number counts DDS writes (counted when the write started):
        // an intra-process publish is not one; a publish that never reached rmw neither.
        let order = if intra { None } else { p.order };
        if order.is_none() && !intra {
            self.stats.publishes_without_order += 1;
        }
        // No rmw event (rmw_zenoh_cpp): the rmw stamps the sample inside rmw_publish, after
        // rcl_publish and before the thread's next event.
        let rcl_window = if self.layout.rcl_only() { p.rcl_ts } else { None };
        let window = match (p.source_ts, p.rmw_ts.or(rcl_window), intra) {
            (None, Some(rmw), false) => {
                let hi = match next {
                    Some(n) => n,
                    None => {
                        self.stats.windows_open_ended += 1;
                        rmw.saturating_add(WINDOW_OPEN_NS)
                    }
                };
                Some((rmw.saturating_sub(WINDOW_SLACK_NS), hi.saturating_add(WINDOW_SLACK_NS)))
            }
            _ => None,
        };
        let (cause, inputs) = (p.cause, p.inputs);
        let (callback, callback_start) = match p.callback {
            Some((k, s)) => (Some(k), Some(s)),
            None => (None, None),
        };
        let seq = self.next_publish;
        self.next_publish += 1;
        self.stats.publishes += 1;
        if intra {
            self.stats.intra_publishes += 1;
        }
        out(TraceItem::Publish(PublishRec {
            seq,
            vpid: pid,
            vtid: tid,
            publisher: Some(rcl_handle),
            writer,
            topic: Some(topic),
            node,
            rclcpp_ts: p.rclcpp_ts,
            rcl_ts: p.rcl_ts,
            rmw_ts: p.rmw_ts,
            source_ts: p.source_ts,
            window,
            order,
            cause,
            inputs,
            callback,
            callback_start,
            intra,
        }));
        Some(seq)
    }

    fn callback_kind(&self, pid: i64, owner: Option<CallbackOwner>) -> CallbackKind {
        match owner {
            Some(CallbackOwner::Subscription(s)) => match self.entities.subscription(pid, s) {
                Some(ep) => CallbackKind::Subscription { topic: Arc::from(ep.topic_name.as_str()) },
                None => CallbackKind::Unknown,
            },
            Some(CallbackOwner::Timer(h)) => CallbackKind::Timer { period_ns: self.entities.timer(pid, h).map_or(0, |t| t.period) },
            Some(CallbackOwner::Service(h)) => match self.entities.service(pid, h) {
                Some(s) => CallbackKind::Service { name: Arc::from(s.service_name.as_str()) },
                None => CallbackKind::Unknown,
            },
            None => CallbackKind::Unknown,
        }
    }

    fn emit_callback(&mut self, rec: &Record, c: OpenCallback, end: Option<i64>, out: &mut dyn FnMut(TraceItem)) {
        let pid = rec.context.vpid.unwrap_or(-1);
        let tid = rec.context.vtid.unwrap_or(-1);
        let owner = self.entities.callback_owner(pid, c.callback);
        let node_handle = self.callback_node(pid, owner);
        if let Some(mut tk) = c.take {
            tk.callback_end_ts = end;
            if tk.intra {
                self.stats.intra_takes += 1;
                if tk.intra_publish.is_none() {
                    self.stats.intra_takes_unlinked += 1;
                }
            }
            // What the node has received: the latest take per subscription topic.
            if let (Some(n), Some(topic)) = (node_handle, tk.topic.clone()) {
                let ev = &mut self.stats.links_evicted;
                let e = self.latest.get_or_insert_with((pid, n), Inputs::new, &mut |_, _| *ev += 1);
                match e.iter().position(|(tp, _)| *tp == topic) {
                    Some(i) => e[i].1 = tk.seq,
                    None if e.len() < 8 => e.push((topic, tk.seq)),
                    None => {}
                }
            }
            self.emit_take(tk, out);
        }
        self.stats.callbacks += 1;
        let symbol = self.entities.callback_symbol(pid, c.callback).map(Arc::from);
        out(TraceItem::Callback(CallbackRec { vpid: pid, vtid: tid, node: c.node, kind: c.kind, symbol, start: c.start, end, intra: c.intra }));
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
            if let Some((k, st)) = self.threads.evict_lru() {
                self.stats.threads_evicted += 1;
                self.close_thread(k, st, out);
            }
        }
        self.threads.get_or_insert_with(key, ThreadState::default, &mut |_, _| {})
    }

    fn close_thread(&mut self, (pid, tid): (i64, i64), st: ThreadState, out: &mut dyn FnMut(TraceItem)) {
        let rec = Record {
            event: Ros2Event::CallbackEnd { callback: 0 },
            time: Default::default(),
            context: ddscope_trace::EventContext { vpid: Some(pid), vtid: Some(tid), ..Default::default() },
        };
        if let Some(p) = st.publish {
            if p.stage == Stage::Written || (p.rmw_ts.is_none() && p.rcl_ts.is_some() && self.layout.rcl_only()) {
                // Humble: no next event on the thread; the window stays open WINDOW_OPEN_NS.
                self.finish_publish(&rec, p, None, out);
            } else {
                self.stats.open_expired += 1;
            }
        }
        if let Some(o) = st.take {
            if is_rcl_take(&o.rec) {
                // rcl_take fires whether or not the rmw had a sample: without its callback it took nothing.
                self.stats.empty_takes += 1;
            } else {
                self.stats.open_expired += 1;
                self.emit_take(o.rec, out);
            }
        }
        if let Some(c) = st.callback {
            self.stats.open_expired += 1;
            self.emit_callback(&rec, c, None, out);
        }
    }

    /// The earliest start of anything still open (closing what is too old).
    fn open_floor(&mut self, out: &mut dyn FnMut(TraceItem)) -> i64 {
        let limit = self.now.saturating_sub(self.cfg.max_open_ns);
        let stale: Vec<(i64, i64)> = self.threads.iter().filter(|(_, s)| s.oldest().is_some_and(|o| o < limit)).map(|(k, _)| *k).collect();
        for k in stale {
            if let Some(st) = self.threads.remove(&k) {
                self.close_thread(k, st, out);
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
        for (k, st) in self.threads.drain_lru() {
            if !st.is_empty() {
                self.close_thread(k, st, out);
            }
        }
        self.stats.processes_ended_early = self.processes_ended_early();
        out(TraceItem::End);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ddscope_trace::{EventContext, EventTime};

    const US: i64 = 1_000;

    fn push(a: &mut Assembler, out: &mut Vec<TraceItem>, t: i64, tid: i64, event: Ros2Event) {
        let rec = Record { event, time: EventTime { cycles: t as u64, ns_from_origin: t }, context: EventContext { vpid: Some(5), vtid: Some(tid), procname: None, cpu_id: None } };
        a.push(&rec, &mut |it| out.push(it));
    }

    /// rmw_zenoh_cpp under Jazzy rcl, as a real trace records it (tests/test_lab_ros2_zenoh.py):
    /// no rmw_* event; rclcpp_publish → rcl_publish → the thread's next event; the executor's
    /// rclcpp_executor_execute(subscription) → rcl_take → rclcpp_take → callback_start → callback_end,
    /// and rcl_take → rclcpp_take without a callback when nothing was taken.
    #[test]
    fn a_trace_without_rmw_events_gives_rcl_windows_and_takes_without_source_timestamp() {
        let mut a = Assembler::new(AssembleConfig::default());
        let mut out = vec![];
        let t = 1_000_000 * US;
        push(&mut a, &mut out, t, 5, Ros2Event::RclInit { context_handle: 1, version: "8.2.2".into() });
        push(&mut a, &mut out, t + 1, 5, Ros2Event::RclNodeInit { node_handle: 0x1, rmw_handle: 0x2, node_name: "n".into(), namespace: "/".into() });
        push(&mut a, &mut out, t + 2, 5, Ros2Event::RclPublisherInit { publisher_handle: 0x100, node_handle: 0x1, rmw_publisher_handle: 0x101, topic_name: "/out".into(), queue_depth: 10 });
        push(&mut a, &mut out, t + 3, 5, Ros2Event::RclSubscriptionInit { subscription_handle: 0x200, node_handle: 0x1, rmw_subscription_handle: 0x201, topic_name: "/in".into(), queue_depth: 10 });
        push(&mut a, &mut out, t + 4, 5, Ros2Event::RclcppSubscriptionInit { subscription_handle: 0x200, subscription: 0x202 });
        push(&mut a, &mut out, t + 5, 5, Ros2Event::RclcppSubscriptionCallbackAdded { subscription: 0x202, callback: 0x203 });
        let b = t + 1000 * US;
        // an empty take, then a real one whose callback publishes
        push(&mut a, &mut out, b, 6, Ros2Event::RclcppExecutorExecute { handle: 0x200 });
        push(&mut a, &mut out, b + US, 6, Ros2Event::RclTake { message: 0x9 });
        push(&mut a, &mut out, b + 2 * US, 6, Ros2Event::RclcppTake { message: 0x9 });
        push(&mut a, &mut out, b + 10 * US, 6, Ros2Event::RclcppExecutorExecute { handle: 0x200 });
        push(&mut a, &mut out, b + 11 * US, 6, Ros2Event::RclTake { message: 0x9 });
        push(&mut a, &mut out, b + 12 * US, 6, Ros2Event::RclcppTake { message: 0x9 });
        push(&mut a, &mut out, b + 13 * US, 6, Ros2Event::CallbackStart { callback: 0x203, is_intra_process: 0 });
        push(&mut a, &mut out, b + 20 * US, 6, Ros2Event::RclcppPublish { publisher_handle: None, message: 0x77 });
        push(&mut a, &mut out, b + 21 * US, 6, Ros2Event::RclPublish { publisher_handle: 0x100, message: 0x77 });
        push(&mut a, &mut out, b + 90 * US, 6, Ros2Event::CallbackEnd { callback: 0x203 });
        a.finish(&mut |it| out.push(it));
        assert_eq!(a.layout.name().to_string(), "jazzy+ (no rmw events)");
        let pubs: Vec<&PublishRec> = out.iter().filter_map(|i| if let TraceItem::Publish(p) = i { Some(p) } else { None }).collect();
        let takes: Vec<&TakeRec> = out.iter().filter_map(|i| if let TraceItem::Take(k) = i { Some(k) } else { None }).collect();
        assert_eq!(pubs.len(), 1);
        let p = pubs[0];
        assert_eq!((p.rclcpp_ts, p.rcl_ts, p.rmw_ts, p.source_ts), (Some(b + 20 * US), Some(b + 21 * US), None, None));
        assert_eq!(p.window, Some((b + 21 * US - WINDOW_SLACK_NS, b + 90 * US + WINDOW_SLACK_NS)));
        assert_eq!(p.topic.as_deref(), Some("/out"));
        assert_eq!(takes.len(), 1, "{takes:?}");
        let k = takes[0];
        assert!(is_rcl_take(k));
        assert_eq!((k.rmw_take_ts, k.callback_start_ts, k.callback_end_ts), (b + 11 * US, Some(b + 13 * US), Some(b + 90 * US)));
        assert_eq!((k.topic.as_deref(), k.node.as_deref()), (Some("/in"), Some("/n")));
        assert_eq!(p.cause, Some(k.seq));
        assert_eq!(a.stats.empty_takes, 1);
    }

    /// The same events under Galactic rcl (tracetools 2.x) stay `galactic`, with no window and no take.
    #[test]
    fn galactic_rcl_without_rmw_events_is_unchanged() {
        let mut a = Assembler::new(AssembleConfig::default());
        let mut out = vec![];
        let t = 1_000_000 * US;
        push(&mut a, &mut out, t, 5, Ros2Event::RclInit { context_handle: 1, version: "2.3.0".into() });
        push(&mut a, &mut out, t + 2, 5, Ros2Event::RclPublisherInit { publisher_handle: 0x100, node_handle: 0x1, rmw_publisher_handle: 0x101, topic_name: "/out".into(), queue_depth: 10 });
        push(&mut a, &mut out, t + 3, 5, Ros2Event::RclSubscriptionInit { subscription_handle: 0x200, node_handle: 0x1, rmw_subscription_handle: 0x201, topic_name: "/in".into(), queue_depth: 10 });
        push(&mut a, &mut out, t + 10, 6, Ros2Event::RclcppExecutorExecute { handle: 0x200 });
        push(&mut a, &mut out, t + 11, 6, Ros2Event::RclTake { message: 0x9 });
        push(&mut a, &mut out, t + 20, 6, Ros2Event::RclPublish { publisher_handle: 0x100, message: 0x77 });
        push(&mut a, &mut out, t + 30, 6, Ros2Event::RclcppExecutorExecute { handle: 0x200 });
        a.finish(&mut |it| out.push(it));
        assert_eq!(a.layout.name().to_string(), "galactic");
        assert!(!out.iter().any(|i| matches!(i, TraceItem::Take(_))));
        assert!(out.iter().any(|i| matches!(i, TraceItem::Publish(p) if p.window.is_none())));
    }
}
