//! The join of traces to each other and to wire samples, held by the correlator.
//!
//! Publishes and takes from every host's trace wait here for the window.
//! The correlator asks, when it judges a wire sample (writer, sn, source
//! timestamp), for its publish at the sender host and its take at each
//! receiver host. What no wire sample claims is joined trace to trace when the
//! publish leaves the window ([`TraceJoin::deliveries`]): takes on any traced
//! host of the same topic whose source timestamp the publish carries (or
//! brackets) — on its own host a same-host delivery (shared memory, loopback),
//! on another host a delivery over the network that no capture saw.
//!
//! How a sample is recognised (docs/latency.md, "The join"):
//! - **exact** ([`Join::SourceTs`]): the publish records the sample's source
//!   timestamp — Jazzy on (`rmw_publish.timestamp`), CARET
//!   (`dds_bind_addr_to_stamp`) — and the take (`rmw_take.source_timestamp`,
//!   CARET's `dispatch_subscription_callback.source_stamp`) or the wire
//!   (INFO_TS) carries the same value, on the same topic;
//! - **publish window** ([`Join::PublishTime`], Humble/Iron): the DDS write
//!   stamps the sample after the `rmw_publish` tracepoint and before the
//!   publishing thread's next event, so the publish whose window holds the
//!   source timestamp is the sample's — joined only when exactly one publisher
//!   of the topic has such a window (among one publisher's consecutive
//!   publishes, the latest); two publishers' windows over the same instant
//!   make the sample ambiguous: counted, never guessed;
//! - **publish order** ([`Join::PublishOrder`], Humble/Iron with captures):
//!   the writer's n-th publish is its sequence number n, when the trace saw the
//!   publisher's creation and no window decides;
//! - **intra-process** ([`Join::IntraProcess`]): the assembler linked the
//!   callback to its `rclcpp_intra_publish` (ring-buffer slot or message pointer);
//! - **take queue** ([`Join::TakeQueue`], an rmw without `rmw_*` tracepoints:
//!   rmw_zenoh_cpp): the publish is found by its window from `rcl_publish` to
//!   the thread's next event (as above); the take (`rcl_take`, no source
//!   timestamp) is found by replaying the subscription's queue: the samples
//!   captured at the subscriber's host enter a KeepLast queue (the
//!   subscription's `rcl_subscription_init.queue_depth`, else
//!   [`JoinConfig::queue_depth`]; the oldest dropped when full) in arrival
//!   order, and each take, in time order, pops the oldest sample captured
//!   before it. A take with nothing captured before it is left unjoined
//!   (counted); so is a sample no take pops.
//!
//! A publish or take whose topic the trace does not resolve never gets here
//! (the assembler counts them by reason), so a `/rosout` log or the rmw's
//! discovery writer can never claim a sample of a data topic.
//!
//! Source timestamps cross the wire as RTPS Time_t (2^-32 s fractions): the
//! value a receiver's DDS hands to `rmw_take` and the one ddscope decodes can
//! differ from the writer's nanoseconds by a rounding step, so timestamps
//! match within ±[`TS_SLACK_NS`].

use super::assemble::{PubSeq, PublishRec, TakeRec};
use crate::bounded::BoundedMap;
use ddscope_wire::Guid;
use rustc_hash::FxHashMap;
use serde::Serialize;
use smallvec::SmallVec;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Source timestamps equal within this many ns are the same (Time_t rounding).
pub const TS_SLACK_NS: i64 = 2;

/// A publish window is cut at this length (a thread that sleeps long after
/// publishing): longer windows only add chances of ambiguity.
pub const MAX_WINDOW_NS: i64 = 1_000_000_000;

/// How a sample was tied to the traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Join {
    /// By the source timestamp, recorded on both sides: exact.
    SourceTs,
    /// By publish order: the publisher's n-th publish is the writer's sequence number n (Humble, with captures).
    PublishOrder,
    /// Humble/Iron: the only publish of the topic whose window (rmw_publish … the thread's
    /// next event) holds the sample's source timestamp.
    PublishTime,
    /// Intra-process: `rclcpp_intra_publish` linked to the callback through the ring-buffer slot (Iron on)
    /// or the message pointer (CARET).
    IntraProcess,
    /// Only the take was joined, by replaying the subscription's queue (takes without source
    /// timestamp: rmw_zenoh_cpp): the oldest sample captured at its host before the take.
    TakeQueue,
    /// Not joined to any trace event.
    None,
}

impl Join {
    pub fn as_str(self) -> &'static str {
        match self {
            Join::SourceTs => "source_ts",
            Join::PublishOrder => "publish_order",
            Join::PublishTime => "publish_time",
            Join::IntraProcess => "intra_process",
            Join::TakeQueue => "take_queue",
            Join::None => "none",
        }
    }
}

/// How a sample went from its publisher to a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// Over the network: seen in the captures.
    Wire,
    /// On the publisher's host (shared memory, loopback, intra-process): joined trace to trace.
    SameHost,
    /// To another host, joined trace to trace (no capture saw it).
    Traces,
}

impl Delivery {
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Wire => "wire",
            Delivery::SameHost => "same_host",
            Delivery::Traces => "traces",
        }
    }
}

/// A take's identity across traces: (trace index, the trace's take number).
pub type TakeId = (u32, u64);

/// A publish from a trace, on the correlator's clock (host offset applied to
/// its instants; `source_ts` and `window` stay on the publisher's own clock,
/// which is the clock of the source timestamps they are compared with).
#[derive(Debug, Clone)]
pub struct Publish {
    pub trace: u32,
    /// Capture index of the trace's host.
    pub host: usize,
    pub rec: PublishRec,
    /// The wire sample it was joined to, if any.
    pub wire: Option<(Guid, i64)>,
    /// How it was joined to the wire, if it was.
    pub join: Option<Join>,
}

impl Publish {
    pub fn cause(&self) -> Option<TakeId> {
        self.rec.cause.map(|s| (self.trace, s))
    }
    /// The publisher's identity: (trace, process, rcl handle).
    fn publisher(&self) -> (u32, i64, u64) {
        (self.trace, self.rec.vpid, self.rec.publisher.unwrap_or(u64::MAX))
    }
    fn topic(&self) -> Option<&Arc<str>> {
        self.rec.topic.as_ref()
    }
}

/// A take from a trace, on the correlator's clock.
#[derive(Debug, Clone)]
pub struct Take {
    pub trace: u32,
    pub host: usize,
    pub rec: TakeRec,
    pub used: bool,
}

impl Take {
    pub fn id(&self) -> TakeId {
        (self.trace, self.rec.seq)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct JoinConfig {
    pub window_ns: i64,
    /// Publishes waiting (the window's worth); the oldest is judged early beyond it.
    pub max_publishes: usize,
    /// Takes waiting.
    pub max_takes: usize,
    /// The KeepLast depth of the queue replayed for takes without source timestamp (rmw_zenoh_cpp
    /// keeps this many samples per subscription and drops the oldest) where the trace does not
    /// give the subscription's (`rcl_subscription_init.queue_depth`, 0 for KeepAll): rclcpp's
    /// default, 10.
    pub queue_depth: usize,
}

impl Default for JoinConfig {
    fn default() -> Self {
        JoinConfig { window_ns: crate::window::Window::DEFAULT.ns(), max_publishes: 1 << 18, max_takes: 1 << 18, queue_depth: DEFAULT_QUEUE_DEPTH }
    }
}

/// rclcpp's default history depth (`rclcpp::QoS(10)`, `rmw_qos_profile_default`).
pub const DEFAULT_QUEUE_DEPTH: usize = 10;

/// Subscriptions whose queues are replayed, and subscriptions listed per (host, topic).
const MAX_QUEUES: usize = 4096;
const MAX_QUEUES_PER_TOPIC: usize = 8;

/// A subscription replayed by the queue join: (receiving host, topic, trace, process, node).
type QueueKey = (usize, Arc<str>, u32, i64, Option<Arc<str>>);
/// The subscriptions of a (host, topic): (trace, process, node).
/// A subscription replaying its queue: trace, process, node, and its depth.
type QueueSub = (u32, i64, Option<Arc<str>>, usize);

/// Topics listed per reason in [`JoinStats`] (the rest is counted in the totals).
const MAX_TOPICS_LISTED: usize = 32;

/// Counters of the join.
#[derive(Debug, Clone, Default, Serialize)]
pub struct JoinStats {
    pub publishes: u64,
    pub takes: u64,
    /// Wire samples whose publish was found, by source timestamp, by publish window and by publish order.
    pub joined_source_ts: u64,
    pub joined_publish_time: u64,
    pub joined_publish_order: u64,
    /// Wire samples sent from a host with a trace whose publish was not found.
    pub wire_without_publish: u64,
    /// Of those, samples whose source timestamp fell in the windows of several publishers (ambiguous).
    pub wire_ambiguous: u64,
    /// Writers seen on the wire from a traced Humble host whose publisher's creation
    /// the trace did not see and whose samples no window matched.
    pub writers_too_late: u64,
    /// Takes joined to a wire sample.
    pub takes_joined_wire: u64,
    /// Takes joined trace to trace on the publisher's host (no wire).
    pub takes_same_host: u64,
    /// Takes joined trace to trace on another host (no capture saw the sample).
    pub takes_traces: u64,
    /// Of the trace-to-trace joins, by kind.
    pub takes_source_ts: u64,
    pub takes_publish_time: u64,
    pub takes_intra: u64,
    /// Takes whose source timestamp fell in the publish windows of several publishers of the topic.
    pub takes_ambiguous: u64,
    /// Takes that matched no wire sample and no publish.
    pub takes_unjoined: u64,
    /// Takes without source timestamp (rmw_zenoh_cpp) joined to a wire sample by the queue replay.
    pub takes_queue_joined: u64,
    /// Of the unjoined takes, those without source timestamp: no sample captured at their host
    /// before them was left in the replayed queue (a same-host delivery, or one the capture missed).
    pub takes_queue_unjoined: u64,
    pub queue_unjoined_topics: BTreeMap<String, u64>,
    /// Samples captured at a subscriber's host that the replayed queue dropped (full: KeepLast).
    pub queue_drops: u64,
    /// Takes that popped a sample already reported without its take (its take came more than the
    /// window after it): the take is used, the sample's row has no take.
    pub queue_late_takes: u64,
    /// Replayed queues evicted (cap): their next samples start from an empty queue.
    pub queues_evicted: u64,
    /// Topics of the ambiguous and unjoined takes, with counts (at most 32 each).
    pub ambiguous_topics: BTreeMap<String, u64>,
    pub unjoined_topics: BTreeMap<String, u64>,
    /// Of the unjoined takes, those taken after a traced publisher of their topic had stopped:
    /// its last traced publish came before the sample and its process showed no publish or
    /// take after the take (the process ended or was killed, or its last events were lost).
    pub takes_unjoined_publisher_ended: u64,
    /// Their topics, with counts, and the processes (trace index, pid) of the publishers that had stopped.
    pub unjoined_publisher_ended_topics: BTreeMap<String, u64>,
    pub ended_publishers: BTreeMap<String, BTreeSet<(u32, i64)>>,
    /// Publishes no wire sample and no take claimed.
    pub publishes_unjoined: u64,
    /// Publishes judged before their window ended (too many waiting).
    pub publishes_judged_early: u64,
    /// Takes dropped before their window ended (too many waiting).
    pub takes_evicted: u64,
    /// Samples taken by several subscriptions on one host: the wire row uses the first take.
    pub extra_takes: u64,
    /// Humble windows longer than [`MAX_WINDOW_NS`], cut.
    pub windows_cut: u64,
    /// `source timestamp − rmw_publish` of the samples joined by publish window: how long the
    /// DDS write took to stamp them (negative: the trace clock is behind the realtime clock).
    pub window_offsets: crate::latency::stats::DistSummary,
}

fn note_topic(m: &mut BTreeMap<String, u64>, topic: Option<&str>) {
    let t = topic.unwrap_or("?");
    if let Some(n) = m.get_mut(t) {
        *n += 1;
    } else if m.len() < MAX_TOPICS_LISTED {
        m.insert(t.to_string(), 1);
    }
}

fn topics_text(m: &BTreeMap<String, u64>) -> String {
    let mut v: Vec<(&String, &u64)> = m.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    v.iter().take(6).map(|(t, n)| format!("{t} {n}")).collect::<Vec<_>>().join(", ")
}

impl JoinStats {
    /// What the join could not do, one line each.
    pub fn notes(&self) -> Vec<String> {
        let mut p = vec![];
        if self.takes_ambiguous > 0 {
            p.push(format!(
                "{} takes ambiguous (their source timestamp lies in the publish windows of several publishers of the topic; not joined): {}",
                self.takes_ambiguous,
                topics_text(&self.ambiguous_topics)
            ));
        }
        let queue = self.takes_queue_unjoined.min(self.takes_unjoined);
        let ended = self.takes_unjoined_publisher_ended.min(self.takes_unjoined - queue);
        if queue > 0 {
            p.push(format!(
                "{queue} takes without source timestamp (rcl_take, no rmw_take: rmw_zenoh_cpp) not joined: no sample captured at their host before them was left in the subscription's replayed queue (a delivery on the publisher's own host, or one the capture missed): {}",
                topics_text(&self.queue_unjoined_topics)
            ));
        }
        if self.queue_drops > 0 || self.queue_late_takes > 0 || self.queues_evicted > 0 {
            p.push(format!(
                "take queue replay: {} samples dropped by a full queue (KeepLast), {} takes came after their sample's row was written, {} queues evicted (cap)",
                self.queue_drops, self.queue_late_takes, self.queues_evicted
            ));
        }
        if self.takes_unjoined > ended + queue {
            // The unjoined topics but for the takes explained below.
            let mut rest = self.unjoined_topics.clone();
            for (t, n) in &self.unjoined_publisher_ended_topics {
                if let Some(m) = rest.get_mut(t) {
                    *m = m.saturating_sub(*n);
                }
            }
            rest.retain(|_, n| *n > 0);
            for (t, n) in &self.queue_unjoined_topics {
                if let Some(m) = rest.get_mut(t) {
                    *m = m.saturating_sub(*n);
                }
            }
            rest.retain(|_, n| *n > 0);
            p.push(format!(
                "{} takes without a traced publish (no trace holds a publish of their topic with that source timestamp: publisher not traced, or its trace started later): {}",
                self.takes_unjoined - ended - queue,
                topics_text(&rest)
            ));
        }
        if ended > 0 {
            let procs: BTreeSet<i64> = self.ended_publishers.values().flatten().map(|(_, pid)| *pid).collect();
            let procs: Vec<String> = procs.iter().take(6).map(|p| p.to_string()).collect();
            p.push(format!(
                "{ended} takes without a traced publish, of samples stamped after the last traced publish of their topic's publisher in process {}, which has no traced publish or take after them: that process's trace stops early (killed or ended, its last events lost), not a publisher left out of the trace: {}",
                procs.join(", "),
                topics_text(&self.unjoined_publisher_ended_topics)
            ));
        }
        if self.writers_too_late > 0 {
            p.push(format!(
                "{} writers on the wire whose publishes no window matched and whose creation the trace did not see",
                self.writers_too_late
            ));
        }
        if self.wire_without_publish > 0 {
            p.push(format!(
                "{} wire samples of ROS topics from traced hosts without their publish in the trace ({} ambiguous)",
                self.wire_without_publish, self.wire_ambiguous
            ));
        }
        if self.publishes_judged_early > 0 || self.takes_evicted > 0 {
            p.push(format!(
                "{} publishes and {} takes dropped before their window ended (too many waiting)",
                self.publishes_judged_early, self.takes_evicted
            ));
        }
        p
    }

    pub fn problem_line(&self) -> Option<String> {
        let n = self.notes();
        (!n.is_empty()).then(|| n.join("; "))
    }
}

/// Publishes and takes within the window, indexed for the join.
pub struct TraceJoin {
    cfg: JoinConfig,
    next_id: u64,
    /// In arrival order.
    publishes: BoundedMap<u64, Publish>,
    /// (topic, source timestamp) → publishes that recorded it.
    pub_exact: FxHashMap<(Arc<str>, i64), SmallVec<[u64; 1]>>,
    /// (topic, window start, id) → window end: Humble/Iron publishes.
    pub_window: BTreeMap<(Arc<str>, i64, u64), i64>,
    /// Source timestamp → publishes without topic (their publisher's creation is not in the
    /// trace): joined to captured samples only.
    pub_exact_any: FxHashMap<i64, SmallVec<[u64; 1]>>,
    /// (trace, publish number) → publish (intra-process links).
    pub_seq: FxHashMap<(u32, PubSeq), u64>,
    pub_by_order: FxHashMap<(usize, Guid, i64), u64>,
    /// In arrival order.
    takes: BoundedMap<TakeId, Take>,
    /// (topic, source timestamp, take) for range lookups.
    take_by_ts: BTreeSet<(Arc<str>, i64, TakeId)>,
    /// (source timestamp, take) of takes without topic (their subscription's creation is not in
    /// the trace): joined to captured samples only.
    take_by_ts_any: BTreeSet<(i64, TakeId)>,
    /// (trace, publish number) → the intra-process takes linked to it.
    take_by_link: FxHashMap<(u32, PubSeq), SmallVec<[TakeId; 2]>>,
    /// Writers whose samples could not be joined because the trace started too late (counted once each).
    too_late: BoundedMap<Guid, ()>,
    /// Writers whose publisher's creation a trace declared.
    declared: BoundedMap<Guid, ()>,
    /// Topic → its traced publishers: (trace, process) and the first and last source timestamp
    /// of their samples (the publisher's clock; a Humble publish's window start).
    publishers_of: BoundedMap<Arc<str>, SmallVec<[PublisherSpan; 2]>>,
    /// (trace, process) → the latest instant (correlator clock) of its publishes and takes.
    active: BoundedMap<(u32, i64), i64>,
    window_offsets: crate::latency::stats::Dist,
    /// Takes without source timestamp (rmw_zenoh_cpp) not yet replayed, by subscription and time.
    queue_takes: BTreeSet<(QueueKey, i64, TakeId)>,
    /// (host, topic) → its subscriptions with such takes.
    queue_subs: BoundedMap<(usize, Arc<str>), SmallVec<[QueueSub; 2]>>,
    /// Each subscription's replayed queue: (arrival at its host's capture, arrival number), oldest first.
    queues: BoundedMap<QueueKey, std::collections::VecDeque<(i64, u64)>>,
    next_arrival: u64,
    pub stats: JoinStats,
}

fn queue_key(t: &Take) -> Option<QueueKey> {
    let topic = t.rec.topic.clone()?;
    super::assemble::is_rcl_take(&t.rec).then(|| (t.host, topic, t.trace, t.rec.vpid, t.rec.node.clone()))
}

fn unindex(j: &mut TraceJoin, id: u64, p: &Publish) {
    j.pub_seq.remove(&(p.trace, p.rec.seq));
    let Some(topic) = p.topic().cloned() else {
        if let Some(ts) = p.rec.source_ts {
            if let Some(v) = j.pub_exact_any.get_mut(&ts) {
                v.retain(|x| *x != id);
                if v.is_empty() {
                    j.pub_exact_any.remove(&ts);
                }
            }
        }
        return;
    };
    if let Some(ts) = p.rec.source_ts {
        let k = (topic.clone(), ts);
        if let Some(v) = j.pub_exact.get_mut(&k) {
            v.retain(|x| *x != id);
            if v.is_empty() {
                j.pub_exact.remove(&k);
            }
        }
    }
    if let Some((lo, _)) = p.rec.window {
        j.pub_window.remove(&(topic, lo, id));
    }
    if let (Some(w), Some(n)) = (p.rec.writer, p.rec.order) {
        if j.pub_by_order.get(&(p.host, w, n as i64)) == Some(&id) {
            j.pub_by_order.remove(&(p.host, w, n as i64));
        }
    }
}

/// One traced publisher process of a topic: its samples' source timestamps, first and last.
#[derive(Debug, Clone, Copy)]
struct PublisherSpan {
    trace: u32,
    vpid: i64,
    first: i64,
    last: i64,
}

/// Topics (and processes) whose publishers are followed for the unjoined takes' reason.
const MAX_PUBLISHER_TOPICS: usize = 4096;
const MAX_PUBLISHERS_PER_TOPIC: usize = 16;

/// What a source timestamp matches among the waiting publishes of a topic.
enum Candidates {
    None,
    One(u64, Join),
    Ambiguous,
}

impl TraceJoin {
    pub fn new(cfg: JoinConfig) -> TraceJoin {
        TraceJoin {
            cfg,
            next_id: 0,
            publishes: BoundedMap::new(cfg.max_publishes),
            pub_exact: FxHashMap::default(),
            pub_window: BTreeMap::new(),
            pub_exact_any: FxHashMap::default(),
            pub_seq: FxHashMap::default(),
            pub_by_order: FxHashMap::default(),
            takes: BoundedMap::new(cfg.max_takes),
            take_by_ts: BTreeSet::new(),
            take_by_ts_any: BTreeSet::new(),
            take_by_link: FxHashMap::default(),
            too_late: BoundedMap::new(1 << 16),
            declared: BoundedMap::new(1 << 16),
            publishers_of: BoundedMap::new(MAX_PUBLISHER_TOPICS),
            active: BoundedMap::new(MAX_PUBLISHER_TOPICS * 4),
            window_offsets: Default::default(),
            queue_takes: BTreeSet::new(),
            queue_subs: BoundedMap::new(MAX_QUEUES),
            queues: BoundedMap::new(MAX_QUEUES),
            next_arrival: 0,
            stats: JoinStats::default(),
        }
    }

    /// Publishes and takes waiting.
    pub fn pending(&self) -> (usize, usize) {
        (self.publishes.len(), self.takes.len())
    }

    /// The statistics, with the window-offset summary brought up to date.
    pub fn stats(&mut self) -> &JoinStats {
        self.stats.window_offsets = self.window_offsets.summary();
        &self.stats
    }

    /// Adds a publish (instants already on the correlator's clock). A publish the
    /// table has no room for pushes the oldest out; it goes to `expired` to be judged.
    pub fn add_publish(&mut self, mut p: Publish, expired: &mut dyn FnMut(Publish, SmallVec<[(Take, Join); 2]>)) {
        self.stats.publishes += 1;
        if self.publishes.len() >= self.publishes.max_entries() {
            if let Some((old, op)) = self.publishes.peek_lru().map(|(id, p)| (*id, p.clone())) {
                self.stats.publishes_judged_early += 1;
                let d = self.deliveries(&op);
                self.publishes.remove(&old);
                unindex(self, old, &op);
                expired(op, d);
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        if let Some((lo, hi)) = p.rec.window {
            if hi.saturating_sub(lo) > MAX_WINDOW_NS {
                self.stats.windows_cut += 1;
                p.rec.window = Some((lo, lo.saturating_add(MAX_WINDOW_NS)));
            }
        }
        self.note_active(p.trace, p.rec.vpid, p.rec.ts());
        if let (Some(topic), false) = (p.topic(), p.rec.intra) {
            let stamp = p.rec.source_ts.or(p.rec.window.map(|(lo, _)| lo.saturating_add(super::assemble::WINDOW_SLACK_NS)));
            if let Some(st) = stamp {
                let spans = self.publishers_of.get_or_insert_with(topic.clone(), SmallVec::new, &mut |_, _| {});
                match spans.iter().position(|x| x.trace == p.trace && x.vpid == p.rec.vpid) {
                    Some(i) => {
                        spans[i].first = spans[i].first.min(st);
                        spans[i].last = spans[i].last.max(st);
                    }
                    None if spans.len() < MAX_PUBLISHERS_PER_TOPIC => spans.push(PublisherSpan { trace: p.trace, vpid: p.rec.vpid, first: st, last: st }),
                    None => {}
                }
            }
        }
        if let Some(topic) = p.topic().cloned() {
            if let Some(ts) = p.rec.source_ts {
                self.pub_exact.entry((topic.clone(), ts)).or_default().push(id);
            }
            if let Some((lo, hi)) = p.rec.window {
                self.pub_window.insert((topic, lo, id), hi);
            }
        } else if let Some(ts) = p.rec.source_ts {
            self.pub_exact_any.entry(ts).or_default().push(id);
        }
        self.pub_seq.insert((p.trace, p.rec.seq), id);
        if let (Some(w), Some(n)) = (p.rec.writer, p.rec.order) {
            self.pub_by_order.insert((p.host, w, n as i64), id);
            if n == 1 || !self.declared.contains_key(&w) {
                self.declared.insert(w, (), &mut |_, _| {});
            }
        }
        self.publishes.insert(id, p, &mut |_, _| {});
    }

    /// Process `vpid` of trace `trace` published or took something at `t` (correlator clock).
    fn note_active(&mut self, trace: u32, vpid: i64, t: i64) {
        let e = self.active.get_or_insert_with((trace, vpid), || t, &mut |_, _| {});
        *e = (*e).max(t);
    }

    /// A take nothing claimed, taken after a publisher of its topic had stopped: that publisher's
    /// last traced sample came before this one, and its process did nothing traced after the take.
    /// Returns the publishers (trace, process) that had stopped.
    fn publishers_ended_before(&self, t: &Take) -> SmallVec<[(u32, i64); 1]> {
        let mut out = SmallVec::new();
        let (Some(topic), Some(ts)) = (t.rec.topic.as_ref(), t.rec.source_ts) else { return out };
        for x in self.publishers_of.get(topic).into_iter().flatten() {
            let quiet = self.active.get(&(x.trace, x.vpid)).is_none_or(|a| *a < t.rec.rmw_take_ts);
            if x.last < ts.saturating_sub(TS_SLACK_NS) && quiet {
                out.push((x.trace, x.vpid));
            }
        }
        out
    }

    pub fn add_take(&mut self, t: Take) {
        self.stats.takes += 1;
        self.note_active(t.trace, t.rec.vpid, t.rec.rmw_take_ts);
        if self.takes.len() >= self.takes.max_entries() {
            if let Some((_, old)) = self.takes.pop_lru() {
                self.stats.takes_evicted += 1;
                self.unindex_take(&old);
            }
        }
        let id = t.id();
        match (t.rec.topic.clone(), t.rec.source_ts) {
            (Some(topic), Some(ts)) => {
                self.take_by_ts.insert((topic, ts, id));
            }
            (None, Some(ts)) => {
                self.take_by_ts_any.insert((ts, id));
            }
            _ => {}
        }
        if let Some(link) = t.rec.intra_publish {
            self.take_by_link.entry((t.trace, link)).or_default().push(id);
        }
        if let Some(k) = queue_key(&t) {
            // The subscription's own depth where the trace declared it (0, KeepAll or unknown: the default).
            let depth = t.rec.queue_depth.filter(|d| *d > 0).map_or(self.cfg.queue_depth, |d| d as usize);
            let sub = (k.2, k.3, k.4.clone(), depth);
            let subs = self.queue_subs.get_or_insert_with((k.0, k.1.clone()), SmallVec::new, &mut |_, _| {});
            if !subs.iter().any(|s| (s.0, s.1, &s.2) == (sub.0, sub.1, &sub.2)) && subs.len() < MAX_QUEUES_PER_TOPIC {
                subs.push(sub);
            }
            self.queue_takes.insert((k, t.rec.rmw_take_ts, id));
        }
        self.takes.insert(id, t, &mut |_, _| {});
    }

    /// The take at `host` of a sample of `topic` captured there (complete) at `arrival` (the
    /// correlator's clock, as the takes), for takes without source timestamp: each subscription
    /// of the topic at that host replays its queue (module documentation, "take queue"). The
    /// first subscription's take is returned; marks the takes used.
    pub fn take_by_arrival(&mut self, host: usize, topic: Option<&str>, arrival: i64) -> Option<Take> {
        if self.queue_subs.is_empty() {
            return None; // no take without source timestamp (every layout but rmw_zenoh's)
        }
        let found = self.queue_pop(host, Arc::from(topic?), arrival);
        if found.is_some() {
            self.stats.takes_joined_wire += 1;
            self.stats.takes_queue_joined += 1;
        }
        found
    }

    /// The take of a sample arriving at `host` at `arrival` by the subscriptions' replayed queues
    /// ([`take_by_arrival`](Self::take_by_arrival)), uncounted.
    fn queue_pop(&mut self, host: usize, topic: Arc<str>, arrival: i64) -> Option<Take> {
        let subs = self.queue_subs.get(&(host, topic.clone()))?.clone();
        let token = self.next_arrival;
        self.next_arrival += 1;
        let mut found: Option<Take> = None;
        for (trace, vpid, node, depth) in subs {
            let k: QueueKey = (host, topic.clone(), trace, vpid, node);
            // The takes before the sample arrived pop what came before it.
            self.replay(&k, arrival, None);
            let ev = &mut self.stats.queues_evicted;
            let q = self.queues.get_or_insert_with(k.clone(), Default::default, &mut |_, _| *ev += 1);
            q.push_back((arrival, token));
            if q.len() > depth.max(1) {
                q.pop_front();
                self.stats.queue_drops += 1;
            }
            // Then the takes after it, until one pops it.
            if let Some(t) = self.replay(&k, i64::MAX, Some(token)) {
                if found.is_none() {
                    found = Some(t);
                } else {
                    self.stats.extra_takes += 1;
                }
            }
        }
        found
    }

    /// Replays subscription `k`'s takes up to `until` in time order, each popping the oldest
    /// sample of its queue captured before it; stops when sample `want` is popped (its take).
    fn replay(&mut self, k: &QueueKey, until: i64, want: Option<u64>) -> Option<Take> {
        loop {
            let from = (k.clone(), i64::MIN, (0u32, 0u64));
            let to = (k.clone(), until, (u32::MAX, u64::MAX));
            let next = self.queue_takes.range(from..=to).next().cloned();
            let (_, t, id) = next?;
            self.queue_takes.remove(&(k.clone(), t, id));
            let popped = match self.queues.get_mut(k) {
                Some(q) if q.front().is_some_and(|(a, _)| *a < t) => q.pop_front().map(|x| x.1),
                // Nothing captured before it: left unused, counted when it expires.
                _ => None,
            };
            let Some(tok) = popped else { continue };
            let Some(tk) = self.takes.get_mut(&id) else { continue };
            tk.used = true;
            if Some(tok) == want {
                return Some(tk.clone());
            }
            // A sample judged earlier, whose take came only now.
            self.stats.queue_late_takes += 1;
        }
    }

    fn unindex_take(&mut self, t: &Take) {
        if let Some(k) = queue_key(t) {
            self.queue_takes.remove(&(k, t.rec.rmw_take_ts, t.id()));
        }
        match (t.rec.topic.clone(), t.rec.source_ts) {
            (Some(topic), Some(ts)) => {
                self.take_by_ts.remove(&(topic, ts, t.id()));
            }
            (None, Some(ts)) => {
                self.take_by_ts_any.remove(&(ts, t.id()));
            }
            _ => {}
        }
        if let Some(link) = t.rec.intra_publish {
            let k = (t.trace, link);
            if let Some(v) = self.take_by_link.get_mut(&k) {
                v.retain(|x| *x != t.id());
                if v.is_empty() {
                    self.take_by_link.remove(&k);
                }
            }
        }
    }

    /// The publishes of `topic` whose recorded source timestamp or window holds `ts`,
    /// restricted by `keep`, reduced to one per publisher: among one publisher's
    /// consecutive windows (which overlap only by their slack), the latest whose
    /// `rmw_publish` is at or before `ts`, else the earliest.
    fn candidates(&self, topic: &Arc<str>, ts: i64, keep: &dyn Fn(&Publish) -> bool) -> Candidates {
        // (id, rmw_publish on the publisher's clock, how, publisher)
        let mut found: SmallVec<[(u64, i64, Join, (u32, i64, u64)); 4]> = SmallVec::new();
        for d in slack() {
            if let Some(ids) = self.pub_exact.get(&(topic.clone(), ts.saturating_add(d))) {
                for &id in ids {
                    if let Some(p) = self.publishes.get(&id).filter(|p| keep(p)) {
                        found.push((id, ts, Join::SourceTs, p.publisher()));
                    }
                }
            }
        }
        let from = (topic.clone(), ts.saturating_sub(MAX_WINDOW_NS), 0u64);
        let to = (topic.clone(), ts, u64::MAX);
        for ((_, lo, id), hi) in self.pub_window.range(from..=to) {
            if *hi >= ts {
                if let Some(p) = self.publishes.get(id).filter(|p| keep(p)) {
                    found.push((*id, lo.saturating_add(super::assemble::WINDOW_SLACK_NS), Join::PublishTime, p.publisher()));
                }
            }
        }
        let mut best: SmallVec<[(u64, i64, Join, (u32, i64, u64)); 2]> = SmallVec::new();
        for f in found {
            match best.iter_mut().find(|b| b.3 == f.3) {
                None => best.push(f),
                Some(b) => {
                    let better = match (f.1 <= ts, b.1 <= ts) {
                        (true, true) => f.1 > b.1,
                        (true, false) => true,
                        (false, true) => false,
                        (false, false) => f.1 < b.1,
                    };
                    if better {
                        *b = f;
                    }
                }
            }
        }
        match best.len() {
            0 => Candidates::None,
            1 => Candidates::One(best[0].0, best[0].2),
            _ => Candidates::Ambiguous,
        }
    }

    /// The publish of wire sample (writer, sn) of `topic` with source timestamp `source_ts`
    /// sent from capture `sender`, if a trace has it; marks it joined. `sender_traced`: the
    /// sender's host has a trace. `ros_topic`: the sample is on a ROS 2 topic (`rt/…`), so
    /// a traced publish is expected.
    pub fn publish_for(
        &mut self,
        sender: usize,
        writer: Guid,
        sn: i64,
        topic: Option<&str>,
        source_ts: Option<i64>,
        sender_traced: bool,
        ros_topic: bool,
    ) -> Option<(Publish, Join)> {
        if !sender_traced {
            return None;
        }
        let mut found: Option<(u64, Join)> = None;
        let mut ambiguous = false;
        if let (Some(ts), Some(topic)) = (source_ts, topic) {
            let topic: Arc<str> = Arc::from(topic);
            let keep = |p: &Publish| p.host == sender && p.wire.is_none() && !p.rec.intra && p.rec.writer.is_none_or(|w| w == writer);
            match self.candidates(&topic, ts, &keep) {
                Candidates::One(id, how) => found = Some((id, how)),
                Candidates::Ambiguous => ambiguous = true,
                Candidates::None => {}
            }
        }
        if found.is_none() && !ambiguous {
            // A publisher whose creation the trace misses, by its exact source timestamp.
            if let Some(ts) = source_ts {
                let mut ids: SmallVec<[u64; 1]> = SmallVec::new();
                for d in slack() {
                    for id in self.pub_exact_any.get(&ts.saturating_add(d)).into_iter().flatten() {
                        if self.publishes.get(id).is_some_and(|p| p.host == sender && p.wire.is_none()) {
                            ids.push(*id);
                        }
                    }
                }
                match ids.len() {
                    1 => found = Some((ids[0], Join::SourceTs)),
                    0 => {}
                    _ => ambiguous = true,
                }
            }
        }
        if found.is_none() {
            if let Some(id) = self.pub_by_order.get(&(sender, writer, sn)) {
                if self.publishes.get(id).is_some_and(|p| p.wire.is_none()) {
                    found = Some((*id, Join::PublishOrder));
                }
            }
        }
        let Some((id, how)) = found else {
            if ros_topic {
                self.stats.wire_without_publish += 1;
                if ambiguous {
                    self.stats.wire_ambiguous += 1;
                } else if !self.declared.contains_key(&writer) && !self.too_late.contains_key(&writer) {
                    self.too_late.insert(writer, (), &mut |_, _| {});
                    self.stats.writers_too_late += 1;
                }
            }
            return None;
        };
        match how {
            Join::SourceTs => self.stats.joined_source_ts += 1,
            Join::PublishTime => self.stats.joined_publish_time += 1,
            Join::PublishOrder => self.stats.joined_publish_order += 1,
            Join::IntraProcess | Join::TakeQueue | Join::None => {}
        }
        let p = self.publishes.get_mut(&id)?;
        p.wire = Some((writer, sn));
        p.join = Some(how);
        let p = p.clone();
        Some((p, how))
    }

    /// The first unused take at `host` of a sample with `source_ts` on `topic`; marks it used.
    pub fn take_for(&mut self, host: usize, topic: Option<&str>, source_ts: i64) -> Option<Take> {
        let (lo, hi) = (source_ts.saturating_sub(TS_SLACK_NS), source_ts.saturating_add(TS_SLACK_NS));
        let mut ids: SmallVec<[TakeId; 2]> = match topic {
            Some(topic) => {
                let topic: Arc<str> = Arc::from(topic);
                self.take_by_ts.range((topic.clone(), lo, (0u32, 0u64))..=(topic, hi, (u32::MAX, u64::MAX))).map(|k| k.2).collect()
            }
            None => SmallVec::new(),
        };
        // Takes whose subscription the trace does not name: the sample's source timestamp decides.
        ids.extend(self.take_by_ts_any.range((lo, (0u32, 0u64))..=(hi, (u32::MAX, u64::MAX))).map(|k| k.1));
        let mut found: Option<Take> = None;
        for id in ids {
            let Some(t) = self.takes.get_mut(&id) else { continue };
            if t.used || t.host != host {
                continue;
            }
            t.used = true;
            if found.is_none() {
                found = Some(t.clone());
            } else {
                self.stats.extra_takes += 1;
            }
        }
        if found.is_some() {
            self.stats.takes_joined_wire += 1;
        }
        found
    }

    /// The takes no wire sample claimed that belong to publish `p` (leaving the window now),
    /// on any traced host, with how each was joined; marks them used. A take whose source
    /// timestamp several publishers' windows hold is marked ambiguous and counted instead.
    pub fn deliveries(&mut self, p: &Publish) -> SmallVec<[(Take, Join); 2]> {
        let mut out: SmallVec<[(Take, Join); 2]> = SmallVec::new();
        let Some(topic) = p.topic().cloned() else { return out };
        let id_p = self.pub_seq.get(&(p.trace, p.rec.seq)).copied();
        // Intra-process: the takes the assembler linked to this publish.
        if let Some(ids) = self.take_by_link.remove(&(p.trace, p.rec.seq)) {
            for id in ids {
                if let Some(t) = self.takes.get_mut(&id) {
                    if !t.used {
                        t.used = true;
                        out.push((t.clone(), Join::IntraProcess));
                    }
                }
            }
        }
        let range = match (p.rec.source_ts, p.rec.window) {
            (Some(ts), _) => Some((ts.saturating_sub(TS_SLACK_NS), ts.saturating_add(TS_SLACK_NS))),
            (None, Some(w)) => Some(w),
            (None, None) => None,
        };
        // An intra-process publish has neither: its deliveries (above) are counted all the same.
        if let Some((lo, hi)) = range {
            self.deliveries_by_ts(p, &topic, id_p, lo, hi, &mut out);
        }
        // Takes without source timestamp (rmw_zenoh_cpp) on the publisher's own host: its
        // subscriptions' queues replayed with the publish as the sample's arrival (a host-local
        // sample goes to the router and back, no row measures that hop; the order is the publishes').
        if p.rec.source_ts.is_none() && !p.rec.intra && !self.queue_subs.is_empty() && self.queue_subs.contains_key(&(p.host, topic.clone())) {
            if let Some(arrival) = p.rec.rcl_ts.or(p.rec.rclcpp_ts) {
                if let Some(t) = self.queue_pop(p.host, topic.clone(), arrival) {
                    self.stats.takes_queue_joined += 1;
                    out.push((t, Join::TakeQueue));
                }
            }
        }
        for (t, how) in &out {
            if t.host == p.host {
                self.stats.takes_same_host += 1;
            } else {
                self.stats.takes_traces += 1;
            }
            match how {
                Join::SourceTs => self.stats.takes_source_ts += 1,
                Join::PublishTime => self.stats.takes_publish_time += 1,
                Join::IntraProcess => self.stats.takes_intra += 1,
                _ => {}
            }
        }
        out
    }

    /// The takes of `topic` whose source timestamp lies in `lo..=hi` that belong to publish `p`.
    fn deliveries_by_ts(&mut self, p: &Publish, topic: &Arc<str>, id_p: Option<u64>, lo: i64, hi: i64, out: &mut SmallVec<[(Take, Join); 2]>) {
        let from = (topic.clone(), lo, (0u32, 0u64));
        let to = (topic.clone(), hi, (u32::MAX, u64::MAX));
        let ids: SmallVec<[(i64, TakeId); 4]> = self.take_by_ts.range(from..=to).map(|k| (k.1, k.2)).collect();
        let mut verdict: SmallVec<[(i64, Candidates); 2]> = SmallVec::new();
        for (ts, id) in ids {
            if !self.takes.get(&id).is_some_and(|t| !t.used && !t.rec.intra) {
                continue;
            }
            // Several takes of one sample (subscriptions on several hosts) share one verdict.
            let c = match verdict.iter().position(|(v, _)| *v == ts) {
                Some(i) => match &verdict[i].1 {
                    Candidates::One(a, b) => Candidates::One(*a, *b),
                    Candidates::Ambiguous => Candidates::Ambiguous,
                    Candidates::None => Candidates::None,
                },
                None => {
                    let c = self.candidates(topic, ts, &|q: &Publish| !q.rec.intra);
                    let copy = match &c {
                        Candidates::One(a, b) => Candidates::One(*a, *b),
                        Candidates::Ambiguous => Candidates::Ambiguous,
                        Candidates::None => Candidates::None,
                    };
                    verdict.push((ts, copy));
                    c
                }
            };
            match c {
                Candidates::One(q, how) if Some(q) == id_p => {
                    if let Some(t) = self.takes.get_mut(&id) {
                        t.used = true;
                        out.push((t.clone(), how));
                    }
                    if how == Join::PublishTime {
                        // The window starts WINDOW_SLACK_NS before rmw_publish, on the publisher's trace clock.
                        if let Some((wlo, _)) = p.rec.window {
                            self.window_offsets.record(ts.saturating_sub(wlo.saturating_add(super::assemble::WINDOW_SLACK_NS)));
                        }
                    }
                }
                Candidates::One(..) => {}
                Candidates::Ambiguous => {
                    if let Some(t) = self.takes.get_mut(&id) {
                        t.used = true;
                        self.stats.takes_ambiguous += 1;
                        note_topic(&mut self.stats.ambiguous_topics, t.rec.topic.as_deref());
                    }
                }
                Candidates::None => {}
            }
        }
    }

    /// Publishes whose instant is at or before `horizon`, oldest first, removed, each with the
    /// takes it delivered trace to trace ([`deliveries`](Self::deliveries), found while it and
    /// its neighbours were still indexed).
    pub fn expire_publishes(&mut self, horizon: i64, out: &mut dyn FnMut(Publish, SmallVec<[(Take, Join); 2]>)) {
        while self.publishes.peek_lru().is_some_and(|(_, p)| p.rec.ts() <= horizon) {
            let Some((id, p)) = self.publishes.peek_lru().map(|(id, p)| (*id, p.clone())) else { break };
            let d = self.deliveries(&p);
            if let Some(p) = self.publishes.remove(&id) {
                unindex(self, id, &p);
            }
            out(p, d);
        }
    }

    /// Drops takes taken at or before `horizon`; counts those nothing claimed.
    pub fn expire_takes(&mut self, horizon: i64) {
        while self.takes.peek_lru().is_some_and(|(_, t)| t.rec.rmw_take_ts <= horizon) {
            if let Some((_, t)) = self.takes.pop_lru() {
                self.unindex_take(&t);
                // An intra-process delivery the layout cannot link, and a take without topic, were
                // counted by the assembler.
                if !t.used && !(t.rec.intra && t.rec.intra_publish.is_none()) && t.rec.topic.is_some() {
                    self.stats.takes_unjoined += 1;
                    note_topic(&mut self.stats.unjoined_topics, t.rec.topic.as_deref());
                    if super::assemble::is_rcl_take(&t.rec) {
                        self.stats.takes_queue_unjoined += 1;
                        note_topic(&mut self.stats.queue_unjoined_topics, t.rec.topic.as_deref());
                    }
                    let ended = self.publishers_ended_before(&t);
                    if !ended.is_empty() {
                        self.stats.takes_unjoined_publisher_ended += 1;
                        note_topic(&mut self.stats.unjoined_publisher_ended_topics, t.rec.topic.as_deref());
                        let topic = t.rec.topic.as_deref().unwrap_or("?");
                        if self.stats.ended_publishers.contains_key(topic) || self.stats.ended_publishers.len() < MAX_TOPICS_LISTED {
                            self.stats.ended_publishers.entry(topic.to_string()).or_default().extend(ended.iter().copied().take(8));
                        }
                    }
                }
            }
        }
    }

    /// Everything left at the end of the input.
    pub fn finish(&mut self, out: &mut dyn FnMut(Publish, SmallVec<[(Take, Join); 2]>)) {
        self.expire_publishes(i64::MAX, out);
        self.expire_takes(i64::MAX);
    }

    pub fn window_ns(&self) -> i64 {
        self.cfg.window_ns
    }
}

fn slack() -> impl Iterator<Item = i64> {
    [0i64, -1, 1, -2, 2].into_iter().filter(|d| d.abs() <= TS_SLACK_NS)
}

/// Nodes are shown as `/namespace/name`.
pub type NodeName = Arc<str>;

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    /// A take begun at rcl_take (rmw_zenoh_cpp: no source timestamp) at `t` on `topic`, host 1.
    fn take(seq: u64, t: i64, topic: &str) -> Take {
        Take {
            trace: 0,
            host: 1,
            rec: TakeRec {
                seq,
                vpid: 7,
                vtid: 8,
                reader: None,
                topic: Some(Arc::from(topic)),
                node: Some(Arc::from("/listener")),
                source_ts: None,
                rmw_take_ts: t,
                callback_start_ts: Some(t + 1_000),
                callback_end_ts: Some(t + 2_000),
                intra: false,
                intra_publish: None,
                queue_depth: None,
            },
            used: false,
        }
    }

    fn join(depth: usize, takes: &[(u64, i64)]) -> TraceJoin {
        let mut j = TraceJoin::new(JoinConfig { queue_depth: depth, ..JoinConfig::default() });
        for &(s, t) in takes {
            j.add_take(take(s, t, "/chatter"));
        }
        j
    }

    fn got(j: &mut TraceJoin, arrival: i64) -> Option<u64> {
        j.take_by_arrival(1, Some("/chatter"), arrival).map(|t| t.rec.seq)
    }

    /// Oracle: rmw_zenoh_cpp's SubscriptionData::add_new_message (KeepLast: the oldest dropped when
    /// the queue is full) and take (the oldest message), replayed by hand.
    #[test]
    fn takes_pop_the_oldest_sample_captured_before_them() {
        // one sample per take, each taken soon after it arrived
        let mut j = join(10, &[(0, 10 * MS), (1, 20 * MS), (2, 30 * MS)]);
        assert_eq!([got(&mut j, 9 * MS), got(&mut j, 19 * MS), got(&mut j, 29 * MS)], [Some(0), Some(1), Some(2)]);
        // another host or topic has no take
        assert!(j.take_by_arrival(2, Some("/chatter"), 9 * MS).is_none());
        assert!(j.take_by_arrival(1, Some("/other"), 9 * MS).is_none());
        assert_eq!((j.stats.takes_queue_joined, j.stats.queue_drops, j.stats.queue_late_takes), (3, 0, 0));

        // a backlog: three samples arrive before the first take, taken in order
        let mut j = join(10, &[(0, 10 * MS), (1, 11 * MS), (2, 12 * MS)]);
        assert_eq!([got(&mut j, MS), got(&mut j, 2 * MS), got(&mut j, 3 * MS)], [Some(0), Some(1), Some(2)]);

        // a sample the capture missed: its take finds nothing captured before it and is left
        // unjoined (counted when it expires); the next sample gets its own take, not that one
        let mut j = join(10, &[(0, 10 * MS), (1, 20 * MS)]);
        assert_eq!(got(&mut j, 19 * MS), Some(1));
        j.expire_takes(i64::MAX);
        assert_eq!((j.stats.takes_unjoined, j.stats.takes_queue_unjoined), (1, 1));
        assert_eq!(j.stats.queue_unjoined_topics.get("/chatter"), Some(&1));
        assert!(j.stats.notes().iter().any(|n| n.starts_with("1 takes without source timestamp")), "{:?}", j.stats.notes());

        // a stalled subscription (no take after them yet): a full queue (depth 2) drops the oldest;
        // the takes that come later pop the two kept, already judged without a take (late)
        let mut j = join(2, &[(0, MS)]);
        assert_eq!([got(&mut j, 2 * MS), got(&mut j, 3 * MS), got(&mut j, 4 * MS)], [None, None, None]);
        assert_eq!(j.stats.queue_drops, 1);
        j.add_take(take(1, 10 * MS, "/chatter"));
        j.add_take(take(2, 11 * MS, "/chatter"));
        j.add_take(take(3, 13 * MS, "/chatter"));
        assert_eq!(got(&mut j, 12 * MS), Some(3));
        assert_eq!((j.stats.queue_drops, j.stats.queue_late_takes), (1, 2));
        j.expire_takes(i64::MAX);
        assert_eq!((j.stats.takes_unjoined, j.stats.takes_queue_unjoined), (1, 1));
    }

    /// The subscription's depth from its rcl_subscription_init (here 2) is the queue's, not the
    /// default 10: a stalled subscription drops all but the two newest samples.
    #[test]
    fn the_traced_queue_depth_is_the_subscriptions() {
        let mut j = TraceJoin::new(JoinConfig::default());
        let mut first = take(0, MS, "/chatter");
        first.rec.queue_depth = Some(2);
        j.add_take(first);
        assert_eq!([got(&mut j, 2 * MS), got(&mut j, 3 * MS), got(&mut j, 4 * MS)], [None, None, None]);
        assert_eq!(j.stats.queue_drops, 1);
        // KeepAll (depth 0) or an untraced depth: the default
        let mut j = TraceJoin::new(JoinConfig::default());
        let mut first = take(0, MS, "/chatter");
        first.rec.queue_depth = Some(0);
        j.add_take(first);
        for a in 2..=12 {
            got(&mut j, a * MS);
        }
        assert_eq!(j.stats.queue_drops, 1);
    }

    #[test]
    fn two_subscriptions_of_a_topic_on_a_host_each_replay_their_queue() {
        let mut j = TraceJoin::new(JoinConfig::default());
        j.add_take(take(0, 10 * MS, "/chatter"));
        let mut other = take(1, 12 * MS, "/chatter");
        other.rec.vpid = 9;
        j.add_take(other);
        assert_eq!(j.take_by_arrival(1, Some("/chatter"), 5 * MS).map(|t| t.rec.seq), Some(0));
        assert_eq!(j.stats.extra_takes, 1);
        j.expire_takes(i64::MAX);
        assert_eq!(j.stats.takes_unjoined, 0);
    }
}
