//! The join of traces to wire samples, held by the correlator.
//!
//! Publishes and takes from every host's trace wait here for the window;
//! the correlator asks, when it judges a wire sample (writer, sn, source
//! timestamp), for its publish at the sender host and its take at each
//! receiver host. What no wire sample claims is joined trace to trace when
//! the publish expires: takes on the publisher's own host with the same
//! topic and source timestamp are same-host deliveries (shared memory,
//! loopback), reported as such.
//!
//! - Publish ↔ wire: by source timestamp (`rmw_publish.timestamp` = INFO_TS,
//!   Jazzy on), or by publish order (the writer's n-th publish ↔ sequence
//!   number n, Humble/Iron) when the trace saw the publisher's creation.
//!   Otherwise the writer is "too late to join": counted, never guessed.
//! - Take ↔ wire: by (receiver host, topic, source timestamp).
//! - Same host, Humble (`rmw_publish` without timestamp, sample never on the
//!   wire): the take whose `source_timestamp` is nearest after the publish's
//!   `rmw_publish` on that host and topic, before the publisher's next
//!   `rmw_publish` ([`Join::PublishTime`]); the DDS layer stamps the sample
//!   inside the write call that follows the tracepoint. One host, one clock.
//!
//! Source timestamps cross the wire as RTPS Time_t (2^-32 s fractions): the
//! value a receiver's DDS hands to `rmw_take` and the one ddscope decodes can
//! differ from the writer's nanoseconds by a rounding step, so timestamps
//! match within ±[`TS_SLACK_NS`].

use super::assemble::{PublishRec, TakeRec};
use crate::bounded::BoundedMap;
use ddscope_wire::Guid;
use rustc_hash::FxHashMap;
use serde::Serialize;
use smallvec::SmallVec;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Source timestamps equal within this many ns are the same (Time_t rounding).
pub const TS_SLACK_NS: i64 = 2;

/// Publish-time join (same host, Humble): a source timestamp up to this much
/// before `rmw_publish` still belongs to it (the trace clock's conversion to
/// CLOCK_REALTIME, a writer that stamps right before the tracepoint).
pub const PUBLISH_TIME_BEFORE_NS: i64 = 100_000;
/// Publish-time join: the latest source timestamp after `rmw_publish` that
/// belongs to it when the publisher's next publish is not known.
pub const PUBLISH_TIME_AFTER_NS: i64 = 1_000_000_000;

/// How a sample was tied to the traces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Join {
    /// By the source timestamp (INFO_TS = `rmw_publish.timestamp` / `rmw_take.source_timestamp`).
    SourceTs,
    /// By publish order: the publisher's n-th publish is the writer's sequence number n (Humble).
    PublishOrder,
    /// Same host, Humble: the take's source timestamp is the first after the publish's
    /// `rmw_publish` (within [`PUBLISH_TIME_BEFORE_NS`] before it) and before the publisher's next one.
    PublishTime,
    /// Not joined to any trace event.
    None,
}

impl Join {
    pub fn as_str(self) -> &'static str {
        match self {
            Join::SourceTs => "source_ts",
            Join::PublishOrder => "publish_order",
            Join::PublishTime => "publish_time",
            Join::None => "none",
        }
    }
}

/// How a sample went from its publisher to a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// Over the network: seen in the captures.
    Wire,
    /// On the publisher's host (shared memory, loopback): joined trace to trace.
    SameHost,
}

impl Delivery {
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Wire => "wire",
            Delivery::SameHost => "same_host",
        }
    }
}

/// A take's identity across traces: (trace index, the trace's take number).
pub type TakeId = (u32, u64);

/// A publish from a trace, on the correlator's clock (host offset applied).
#[derive(Debug, Clone)]
pub struct Publish {
    pub trace: u32,
    /// Capture index of the trace's host.
    pub host: usize,
    pub rec: PublishRec,
    /// The wire sample it was joined to, if any.
    pub wire: Option<(Guid, i64)>,
    /// `rmw_publish` of the same publisher's next publish, once the trace showed it.
    pub next_rmw_ts: Option<i64>,
    /// How it was joined to the wire, if it was.
    pub join: Option<Join>,
}

impl Publish {
    pub fn cause(&self) -> Option<TakeId> {
        self.rec.cause.map(|s| (self.trace, s))
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
    /// Distinct (host, source timestamp) take keys waiting.
    pub max_takes: usize,
}

impl Default for JoinConfig {
    fn default() -> Self {
        JoinConfig { window_ns: 5_000_000_000, max_publishes: 1 << 18, max_takes: 1 << 18 }
    }
}

/// Counters of the join.
#[derive(Debug, Clone, Default, Serialize)]
pub struct JoinStats {
    pub publishes: u64,
    pub takes: u64,
    /// Wire samples whose publish was found, by source timestamp and by publish order.
    pub joined_source_ts: u64,
    pub joined_publish_order: u64,
    /// Wire samples sent from a host with a trace whose publish was not found.
    pub wire_without_publish: u64,
    /// Writers seen on the wire from a traced Humble host whose publisher's creation
    /// the trace did not see: their samples cannot be joined by publish order.
    pub writers_too_late: u64,
    /// Takes joined to a wire sample.
    pub takes_joined_wire: u64,
    /// Takes joined trace to trace (same host, no wire).
    pub takes_same_host: u64,
    /// Of those, joined by publish time (Humble: the publish has no source timestamp).
    pub takes_same_host_publish_time: u64,
    /// Takes that matched no wire sample and no publish.
    pub takes_unjoined: u64,
    /// Publishes no wire sample and no take claimed.
    pub publishes_unjoined: u64,
    /// Publishes judged before their window ended (too many waiting).
    pub publishes_judged_early: u64,
    /// Take keys dropped before their window ended (too many waiting).
    pub takes_evicted: u64,
    /// Samples taken by several subscriptions on one host: the row uses the first take.
    pub extra_takes: u64,
}

impl JoinStats {
    pub fn problem_line(&self) -> Option<String> {
        let mut p = vec![];
        if self.writers_too_late > 0 {
            p.push(format!(
                "{} writers: trace too late to join (Humble joins by publish order and needs the publisher's creation in the trace)",
                self.writers_too_late
            ));
        }
        if self.wire_without_publish > 0 {
            p.push(format!("{} wire samples from traced hosts without their publish in the trace", self.wire_without_publish));
        }
        if self.publishes_judged_early > 0 || self.takes_evicted > 0 {
            p.push(format!(
                "{} publishes and {} take keys dropped before their window ended (too many waiting)",
                self.publishes_judged_early, self.takes_evicted
            ));
        }
        (!p.is_empty()).then(|| p.join("; "))
    }
}

/// Publishes and takes within the window, indexed for the join.
pub struct TraceJoin {
    cfg: JoinConfig,
    next_id: u64,
    /// In arrival order.
    publishes: BoundedMap<u64, Publish>,
    pub_by_ts: FxHashMap<(usize, i64), SmallVec<[u64; 1]>>,
    pub_by_order: FxHashMap<(usize, Guid, i64), u64>,
    /// (host, source timestamp) → takes, in arrival order.
    takes: BoundedMap<(usize, i64), SmallVec<[Take; 1]>>,
    /// The keys of `takes`, ordered (the publish-time join looks up a range).
    take_keys: BTreeSet<(usize, i64)>,
    /// (host, writer) → its latest publish (to tell the previous one where the next starts).
    last_publish: BoundedMap<(usize, Guid), u64>,
    /// Writers whose samples could not be joined because the trace started too late (counted once each).
    too_late: BoundedMap<Guid, ()>,
    /// Writers whose publisher's creation a trace declared.
    declared: BoundedMap<Guid, ()>,
    pub stats: JoinStats,
}

fn unindex(by_ts: &mut FxHashMap<(usize, i64), SmallVec<[u64; 1]>>, by_order: &mut FxHashMap<(usize, Guid, i64), u64>, id: u64, p: &Publish) {
    if let Some(ts) = p.rec.source_ts {
        if let Some(v) = by_ts.get_mut(&(p.host, ts)) {
            v.retain(|x| *x != id);
            if v.is_empty() {
                by_ts.remove(&(p.host, ts));
            }
        }
    }
    if let (Some(w), Some(n)) = (p.rec.writer, p.rec.order) {
        if by_order.get(&(p.host, w, n as i64)) == Some(&id) {
            by_order.remove(&(p.host, w, n as i64));
        }
    }
}

impl TraceJoin {
    pub fn new(cfg: JoinConfig) -> TraceJoin {
        TraceJoin {
            cfg,
            next_id: 0,
            publishes: BoundedMap::new(cfg.max_publishes),
            pub_by_ts: FxHashMap::default(),
            pub_by_order: FxHashMap::default(),
            takes: BoundedMap::new(cfg.max_takes),
            take_keys: BTreeSet::new(),
            last_publish: BoundedMap::new(1 << 16),
            too_late: BoundedMap::new(1 << 16),
            declared: BoundedMap::new(1 << 16),
            stats: JoinStats::default(),
        }
    }

    /// Publishes and take keys waiting.
    pub fn pending(&self) -> (usize, usize) {
        (self.publishes.len(), self.takes.len())
    }

    /// Adds a publish (times already on the correlator's clock). A publish the
    /// table has no room for pushes the oldest out; it goes to `expired` to be judged.
    pub fn add_publish(&mut self, p: Publish, expired: &mut dyn FnMut(Publish)) {
        self.stats.publishes += 1;
        let id = self.next_id;
        self.next_id += 1;
        if let Some(ts) = p.rec.source_ts {
            self.pub_by_ts.entry((p.host, ts)).or_default().push(id);
        }
        if let Some(w) = p.rec.writer {
            if let Some(prev) = self.last_publish.get(&(p.host, w)).copied() {
                if let Some(pp) = self.publishes.get_mut(&prev) {
                    pp.next_rmw_ts = Some(p.rec.rmw_ts);
                }
            }
            self.last_publish.insert((p.host, w), id, &mut |_, _| {});
        }
        if let (Some(w), Some(n)) = (p.rec.writer, p.rec.order) {
            self.pub_by_order.insert((p.host, w, n as i64), id);
            if n == 1 || !self.declared.contains_key(&w) {
                self.declared.insert(w, (), &mut |_, _| {});
            }
        }
        if self.publishes.len() >= self.publishes.max_entries() {
            if let Some((old, op)) = self.publishes.pop_lru() {
                self.stats.publishes_judged_early += 1;
                unindex(&mut self.pub_by_ts, &mut self.pub_by_order, old, &op);
                expired(op);
            }
        }
        self.publishes.insert(id, p, &mut |_, _| {});
    }

    pub fn add_take(&mut self, t: Take) {
        self.stats.takes += 1;
        let key = (t.host, t.rec.source_ts);
        let ev = &mut self.stats.takes_evicted;
        let keys = &mut self.take_keys;
        keys.insert(key);
        let v = self.takes.get_or_insert_keep_order(key, SmallVec::new, &mut |k, _| {
            *ev += 1;
            keys.remove(&k);
        });
        if let Some(v) = self.takes.value_at(v) {
            v.push(t);
        }
    }

    /// The publish of wire sample (writer, sn) with source timestamp
    /// `source_ts` sent from capture `sender`, if a trace has it; marks it
    /// joined. `sender_has_ts`: `None` when the sender host has no trace,
    /// else whether its trace records `rmw_publish.timestamp`. `ros_topic`:
    /// the sample is on a ROS 2 topic (`rt/…`), so a traced publish is expected.
    pub fn publish_for(
        &mut self,
        sender: usize,
        writer: Guid,
        sn: i64,
        source_ts: Option<i64>,
        sender_has_ts: Option<bool>,
        ros_topic: bool,
    ) -> Option<(Publish, Join)> {
        let has_ts = sender_has_ts?;
        let mut found: Option<(u64, Join)> = None;
        if let Some(ts) = source_ts {
            'outer: for d in slack() {
                if let Some(ids) = self.pub_by_ts.get(&(sender, ts.saturating_add(d))) {
                    for id in ids {
                        if let Some(p) = self.publishes.get(id) {
                            if p.wire.is_none() && p.rec.writer.is_none_or(|w| w == writer) {
                                found = Some((*id, Join::SourceTs));
                                break 'outer;
                            }
                        }
                    }
                }
            }
        }
        if found.is_none() && !has_ts {
            if let Some(id) = self.pub_by_order.get(&(sender, writer, sn)) {
                found = Some((*id, Join::PublishOrder));
            } else if ros_topic && !self.declared.contains_key(&writer) && !self.too_late.contains_key(&writer) {
                self.too_late.insert(writer, (), &mut |_, _| {});
                self.stats.writers_too_late += 1;
            }
        }
        let Some((id, how)) = found else {
            if ros_topic && self.declared.contains_key(&writer) {
                self.stats.wire_without_publish += 1;
            }
            return None;
        };
        match how {
            Join::SourceTs => self.stats.joined_source_ts += 1,
            Join::PublishOrder => self.stats.joined_publish_order += 1,
            Join::PublishTime | Join::None => {}
        }
        let p = self.publishes.get_mut(&id)?;
        p.wire = Some((writer, sn));
        p.join = Some(how);
        if p.rec.source_ts.is_none() {
            // Humble: the wire tells the source timestamp; same-host takes join on it.
            if let Some(ts) = source_ts {
                p.rec.source_ts = Some(ts);
                self.pub_by_ts.entry((p.host, ts)).or_default().push(id);
            }
        }
        let p = p.clone();
        Some((p, how))
    }

    /// The first unused take at `host` of a sample with `source_ts` on `topic`; marks it used.
    pub fn take_for(&mut self, host: usize, topic: Option<&str>, source_ts: i64) -> Option<Take> {
        let mut found: Option<Take> = None;
        for d in slack() {
            let Some(v) = self.takes.get_mut(&(host, source_ts.saturating_add(d))) else { continue };
            for t in v.iter_mut().filter(|t| !t.used && topic_matches(t.rec.topic.as_deref(), topic)) {
                if found.is_none() {
                    t.used = true;
                    found = Some(t.clone());
                } else {
                    self.stats.extra_takes += 1;
                    t.used = true;
                }
            }
        }
        if found.is_some() {
            self.stats.takes_joined_wire += 1;
        }
        found
    }

    /// Every unused take at `host` of the sample with `source_ts` on `topic` (same-host deliveries); marks them used.
    pub fn same_host_takes(&mut self, host: usize, topic: Option<&str>, source_ts: i64) -> SmallVec<[Take; 1]> {
        let mut out = SmallVec::new();
        for d in slack() {
            let Some(v) = self.takes.get_mut(&(host, source_ts.saturating_add(d))) else { continue };
            for t in v.iter_mut().filter(|t| !t.used && topic_matches(t.rec.topic.as_deref(), topic)) {
                t.used = true;
                out.push(t.clone());
            }
        }
        self.stats.takes_same_host += out.len() as u64;
        out
    }

    /// Same host, Humble: the source timestamp of the sample a publish without
    /// one wrote, from the takes on its host: the first unused take on its
    /// topic stamped from [`PUBLISH_TIME_BEFORE_NS`] before its `rmw_publish`
    /// up to the publisher's next `rmw_publish` (or [`PUBLISH_TIME_AFTER_NS`]).
    pub fn source_ts_by_publish_time(&self, p: &Publish) -> Option<i64> {
        let lo = p.rec.rmw_ts.saturating_sub(PUBLISH_TIME_BEFORE_NS);
        let hi = match p.next_rmw_ts {
            Some(n) => n.saturating_sub(PUBLISH_TIME_BEFORE_NS),
            None => p.rec.rmw_ts.saturating_add(PUBLISH_TIME_AFTER_NS),
        };
        if hi <= lo {
            return None;
        }
        for k in self.take_keys.range((p.host, lo)..(p.host, hi)) {
            let Some(v) = self.takes.get(k) else { continue };
            if v.iter().any(|t| !t.used && topic_matches(t.rec.topic.as_deref(), p.rec.topic.as_deref())) {
                return Some(k.1);
            }
        }
        None
    }

    /// Publishes whose rmw_publish is at or before `horizon`, oldest first, removed.
    pub fn expire_publishes(&mut self, horizon: i64, out: &mut dyn FnMut(Publish)) {
        while self.publishes.peek_lru().is_some_and(|(_, p)| p.rec.rmw_ts <= horizon) {
            if let Some((id, p)) = self.publishes.pop_lru() {
                unindex(&mut self.pub_by_ts, &mut self.pub_by_order, id, &p);
                out(p);
            }
        }
    }

    /// Drops takes taken at or before `horizon`; counts those nothing claimed.
    pub fn expire_takes(&mut self, horizon: i64) {
        while self.takes.peek_lru().is_some_and(|(_, v)| v.iter().all(|t| t.rec.rmw_take_ts <= horizon)) {
            if let Some((k, v)) = self.takes.pop_lru() {
                self.take_keys.remove(&k);
                self.stats.takes_unjoined += v.iter().filter(|t| !t.used).count() as u64;
            }
        }
    }

    /// Everything left at the end of the input.
    pub fn finish(&mut self, out: &mut dyn FnMut(Publish)) {
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

/// A take's topic (from its trace) against the sample's (from discovery or the publish); unknown matches.
fn topic_matches(take: Option<&str>, sample: Option<&str>) -> bool {
    match (take, sample) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

/// Nodes are shown as `/namespace/name`.
pub type NodeName = Arc<str>;

#[cfg(test)]
mod tests {
    use super::*;
    use ddscope_wire::{EntityId, GuidPrefix};

    const MS: i64 = 1_000_000;

    fn publish(writer: Guid, rmw_ts: i64) -> Publish {
        let rec = PublishRec { vpid: 1, vtid: 1, writer: Some(writer), topic: Some(Arc::from("/raw")), node: None, rclcpp_ts: Some(rmw_ts - 2000), rmw_ts, source_ts: None, order: None, cause: None };
        Publish { trace: 0, host: 0, rec, wire: None, next_rmw_ts: None, join: None }
    }

    fn take(seq: u64, topic: &str, source_ts: i64) -> Take {
        let rec = TakeRec { seq, vpid: 2, vtid: 2, reader: None, topic: Some(Arc::from(topic)), node: None, source_ts, rmw_take_ts: source_ts + MS, callback_start_ts: None, callback_end_ts: None };
        Take { trace: 0, host: 0, rec, used: false }
    }

    /// Humble same-host: a take belongs to the publish whose rmw_publish precedes its source
    /// timestamp (up to 100 µs the other way), never to an earlier publish past the next one.
    #[test]
    fn publish_time_join_takes_the_first_stamp_before_the_next_publish() {
        let w = Guid::new(GuidPrefix([1; 12]), EntityId([0, 0, 1, 3]));
        let mut j = TraceJoin::new(JoinConfig::default());
        let mut early = vec![];
        j.add_publish(publish(w, 100 * MS), &mut |p| early.push(p));
        j.add_publish(publish(w, 200 * MS), &mut |p| early.push(p));
        j.add_publish(publish(w, 300 * MS), &mut |p| early.push(p));
        j.add_take(take(1, "/other", 100 * MS + 10)); // another topic: never
        j.add_take(take(2, "/raw", 100 * MS - 3000)); // stamped 3 µs before the tracepoint (the lab's writer)
        j.add_take(take(3, "/raw", 300 * MS + 50_000)); // the third publish's sample; the second had no take
        let mut ps = vec![];
        j.expire_publishes(i64::MAX, &mut |p| ps.push(p));
        assert!(early.is_empty());
        assert_eq!(ps.iter().map(|p| p.next_rmw_ts).collect::<Vec<_>>(), [Some(200 * MS), Some(300 * MS), None]);
        assert_eq!(j.source_ts_by_publish_time(&ps[0]), Some(100 * MS - 3000));
        assert_eq!(j.same_host_takes(0, Some("/raw"), 100 * MS - 3000).len(), 1);
        // the second publish must not claim the third's sample (past its successor's rmw_publish)
        assert_eq!(j.source_ts_by_publish_time(&ps[1]), None);
        assert_eq!(j.source_ts_by_publish_time(&ps[2]), Some(300 * MS + 50_000));
        // a sample stamped more than 100 µs before rmw_publish is not this publish's
        let mut lone = publish(w, 500 * MS);
        j.add_take(take(4, "/raw", 500 * MS - 200_000));
        lone.next_rmw_ts = None;
        assert_eq!(j.source_ts_by_publish_time(&lone), None);
    }
}
