//! What a trace tells without any join: callback durations per callback, and
//! publishes per topic and per the callback they were made in.
//!
//! Every layout has these (Galactic and Foxy traces without CARET have
//! nothing else): `callback_start` → `callback_end` per callback, and for
//! each publish the callback it was made in (a subscription callback of
//! topic X, a timer, a service) with the node's own time from
//! `callback_start` to the publish. Bounded: at most `max_entries` callbacks
//! and as many (callback, published topic) pairs, least recently updated
//! dropped first and counted.
//!
//! Rates follow the one rule of `topics` (docs/events.md, "Rates"): a rate is
//! given for a steady stream only — 5 runs or more, intervals varying no more
//! than a random stream's, not a burst followed by silence (judged against the
//! host's last traced callback or publish); `rate_kind` says which.
//!
//! The publication period of a topic on a host ([`CallbackTable::topic_period`])
//! is what judges the in time / late of samples joined trace to trace
//! (`ros2::timing`): the period of the timer every publish was made in, else the
//! mean interval of its one publisher's steady publish stream, else none (in time
//! and late left empty).

use super::assemble::{CallbackKind, CallbackRec, PublishRec};
use crate::bounded::BoundedMap;
use crate::latency::stats::{Dist, DistSummary};
use crate::rate::{RateKind, SampleTimes};
use crate::record::Value;
use serde::Serialize;
use smallvec::SmallVec;
use std::sync::Arc;

/// A callback's identity: host, node, what it belongs to, its symbol.
type CallbackKey = (usize, Option<Arc<str>>, CallbackKind, Option<Arc<str>>);

#[derive(Default)]
struct CallbackStats {
    runs: u64,
    unfinished: u64,
    intra: u64,
    /// The runs' starts.
    times: SampleTimes,
    duration: Dist,
}

#[derive(Default)]
struct EdgeStats {
    count: u64,
    times: SampleTimes,
    /// callback_start → rclcpp_publish (rcl_publish when rclcpp is not traced).
    node: Dist,
}

/// The publishes of one topic on one host.
#[derive(Default)]
struct TopicPublishes {
    n: u64,
    /// The period of the timer every publish so far was made in; `None` once one was not
    /// (or was made in a timer of another period).
    timer_ns: Option<i64>,
    /// Each publisher's publish instants: (process, rcl publisher handle, else the node).
    publishers: SmallVec<[((i64, Option<u64>, Option<Arc<str>>), SampleTimes); 1]>,
    /// More publishers than [`MAX_PUBLISHERS_FOLLOWED`]: no period from the intervals.
    overflow: bool,
}

/// Publishers of one topic on one host followed for its publication period.
const MAX_PUBLISHERS_FOLLOWED: usize = 8;

/// Counters of the tables.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CallbackTableStats {
    pub callbacks_evicted: u64,
    pub edges_evicted: u64,
}

/// Per-callback durations and per-(callback, topic) publishes, from traces.
pub struct CallbackTable {
    callbacks: BoundedMap<CallbackKey, CallbackStats>,
    /// (host, node, the callback's input: topic or "timer 100 ms", published topic).
    edges: BoundedMap<(usize, Option<Arc<str>>, Arc<str>, Arc<str>), EdgeStats>,
    /// (host, topic) → its publishes.
    topics: BoundedMap<(usize, Arc<str>), TopicPublishes>,
    /// Per host, the latest callback or publish instant seen: what a burst is judged against.
    ends: Vec<i64>,
    pub stats: CallbackTableStats,
}

impl CallbackTable {
    pub fn new(max_entries: usize) -> CallbackTable {
        CallbackTable {
            callbacks: BoundedMap::new(max_entries),
            edges: BoundedMap::new(max_entries),
            topics: BoundedMap::new(max_entries),
            ends: vec![],
            stats: Default::default(),
        }
    }

    fn seen(&mut self, host: usize, t: i64) {
        if self.ends.len() <= host {
            self.ends.resize(host + 1, i64::MIN);
        }
        self.ends[host] = self.ends[host].max(t);
    }

    /// The host's last traced callback or publish.
    fn end(&self, host: usize) -> Option<i64> {
        self.ends.get(host).copied().filter(|t| *t != i64::MIN)
    }

    pub fn add_callback(&mut self, host: usize, c: &CallbackRec) {
        self.seen(host, c.end.unwrap_or(c.start).max(c.start));
        let key = (host, c.node.clone(), c.kind.clone(), c.symbol.clone());
        let ev = &mut self.stats.callbacks_evicted;
        let e = self.callbacks.get_or_insert_with(key, CallbackStats::default, &mut |_, _| *ev += 1);
        e.runs += 1;
        e.times.add(c.start);
        if c.intra {
            e.intra += 1;
        }
        match c.end {
            Some(end) => e.duration.record(end.saturating_sub(c.start)),
            None => e.unfinished += 1,
        }
    }

    /// A publish (instants on the correlator's clock).
    pub fn add_publish(&mut self, host: usize, p: &PublishRec) {
        let Some(topic) = p.topic.clone() else { return };
        let input: Arc<str> = match (&p.callback, p.callback_start) {
            (Some(k), Some(_)) => Arc::from(kind_text(k)),
            _ => Arc::from("(no traced callback)"),
        };
        let at = p.rclcpp_ts.or(p.rcl_ts).or(p.rmw_ts);
        let t = p.ts();
        self.seen(host, t);
        let ev = &mut self.stats.edges_evicted;
        let e = self.edges.get_or_insert_with((host, p.node.clone(), input, topic.clone()), EdgeStats::default, &mut |_, _| *ev += 1);
        e.count += 1;
        e.times.add(t);
        if let (Some(s), Some(a)) = (p.callback_start, at) {
            e.node.record(a.saturating_sub(s));
        }
        // The topic's publication period on this host: its timer's, else its publisher's intervals.
        let timer = match (&p.callback, p.callback_start) {
            (Some(CallbackKind::Timer { period_ns }), Some(_)) if *period_ns > 0 => Some(*period_ns),
            _ => None,
        };
        let ev = &mut self.stats.edges_evicted;
        let tp = self.topics.get_or_insert_with((host, topic), TopicPublishes::default, &mut |_, _| *ev += 1);
        if tp.n == 0 || tp.timer_ns != timer {
            tp.timer_ns = if tp.n == 0 { timer } else { None };
        }
        tp.n += 1;
        let who = (p.vpid, p.publisher, if p.publisher.is_some() { None } else { p.node.clone() });
        match tp.publishers.iter().position(|(w, _)| *w == who) {
            Some(i) => tp.publishers[i].1.add(t),
            None if tp.publishers.len() < MAX_PUBLISHERS_FOLLOWED => {
                let mut times = SampleTimes::default();
                times.add(t);
                tp.publishers.push((who, times));
            }
            None => tp.overflow = true,
        }
    }

    /// The publication period of `topic` on `host`, and where it comes from: `timer`, the period
    /// of the timer every publish of the topic was made in (all publishers); else `publish
    /// intervals`, the mean interval of the topic's one publisher when its publishes are a steady
    /// stream (the rate rule of `topics`, [`RateKind::Steady`]). `None` otherwise: a burst, fewer
    /// than 5 publishes, or several publishers not all in timers of one period.
    pub fn topic_period(&self, host: usize, topic: &str) -> Option<(i64, &'static str)> {
        let tp = self.topics.get(&(host, Arc::from(topic)))?;
        if let Some(p) = tp.timer_ns {
            return Some((p, "timer"));
        }
        let [(_, times)] = tp.publishers.as_slice() else { return None };
        if tp.overflow {
            return None;
        }
        let hz = times.rate_hz(self.end(host))?;
        Some(((1e9 / hz).round() as i64, "publish intervals"))
    }

    /// One row per callback, by host, node and kind.
    pub fn rows(&self, hosts: &[Arc<str>]) -> Vec<CallbackRow> {
        let mut v: Vec<CallbackRow> = self
            .callbacks
            .iter()
            .map(|((h, node, kind, symbol), s)| CallbackRow {
                host: hosts.get(*h).map(|h| h.to_string()).unwrap_or_default(),
                node: node.as_deref().unwrap_or("?").to_string(),
                callback: kind_text(kind),
                symbol: symbol.as_deref().unwrap_or("").to_string(),
                runs: s.runs,
                unfinished: s.unfinished,
                intra: s.intra,
                rate_hz: s.times.rate_hz(self.end(*h)),
                rate_kind: s.times.kind_until(self.end(*h)),
                duration: s.duration.summary(),
            })
            .collect();
        v.sort_by(|a, b| (&a.host, &a.node, &a.callback).cmp(&(&b.host, &b.node, &b.callback)));
        v
    }

    /// One row per (callback input, published topic) of a node.
    pub fn publish_rows(&self, hosts: &[Arc<str>]) -> Vec<PublishEdgeRow> {
        let mut v: Vec<PublishEdgeRow> = self
            .edges
            .iter()
            .map(|((h, node, input, topic), s)| PublishEdgeRow {
                host: hosts.get(*h).map(|h| h.to_string()).unwrap_or_default(),
                node: node.as_deref().unwrap_or("?").to_string(),
                callback: input.to_string(),
                topic: topic.to_string(),
                publishes: s.count,
                rate_hz: s.times.rate_hz(self.end(*h)),
                rate_kind: s.times.kind_until(self.end(*h)),
                node_time: s.node.summary(),
            })
            .collect();
        v.sort_by(|a, b| (&a.host, &a.node, &a.callback, &a.topic).cmp(&(&b.host, &b.node, &b.callback, &b.topic)));
        v
    }
}

/// `subscription /topic`, `timer 100 ms`, `service /name`, `?`.
pub fn kind_text(k: &CallbackKind) -> String {
    match k {
        CallbackKind::Subscription { topic } => format!("subscription {topic}"),
        CallbackKind::Timer { period_ns } => format!("timer {} ms", *period_ns as f64 / 1e6),
        CallbackKind::Service { name } => format!("service {name}"),
        CallbackKind::Unknown => "?".to_string(),
    }
}

/// One callback's runs and durations (callback_start → callback_end).
#[derive(Debug, Clone, Serialize)]
pub struct CallbackRow {
    pub host: String,
    pub node: String,
    pub callback: String,
    pub symbol: String,
    pub runs: u64,
    /// Runs without a callback_end (a process killed, or a trace cut).
    pub unfinished: u64,
    /// Runs on intra-process messages.
    pub intra: u64,
    /// Runs per second, for a steady stream of runs only (`rate_kind`, docs/events.md "Rates").
    pub rate_hz: Option<f64>,
    pub rate_kind: RateKind,
    pub duration: DistSummary,
}

crate::record!(CallbackRow, r, let { let f = |v: f64| if r.duration.count > 0 { Value::F(v) } else { Value::Null }; }, {
    host: Str => Value::S(&r.host),
    node: Str => Value::S(&r.node),
    callback: Str => Value::S(&r.callback),
    runs: U64 => Value::U(r.runs),
    rate_hz: F64 => r.rate_hz.map_or(Value::Null, Value::F),
    rate_kind: Str => Value::S(r.rate_kind.as_str()),
    unfinished: U64 => Value::U(r.unfinished),
    mean_ms: F64 => f(r.duration.mean_ms),
    p50_ms: F64 => f(r.duration.p50_ms),
    p99_ms: F64 => f(r.duration.p99_ms),
    max_ms: F64 => f(r.duration.max_ms),
});

/// Publishes of one topic made from one kind of callback of a node.
#[derive(Debug, Clone, Serialize)]
pub struct PublishEdgeRow {
    pub host: String,
    pub node: String,
    /// The callback the publishes were made in (`subscription /a`, `timer 50 ms`), or `(no traced callback)`.
    pub callback: String,
    pub topic: String,
    pub publishes: u64,
    /// Publishes per second, for a steady stream only (`rate_kind`).
    pub rate_hz: Option<f64>,
    pub rate_kind: RateKind,
    /// callback_start → the publish (rclcpp_publish, else rcl_publish).
    pub node_time: DistSummary,
}

crate::record!(PublishEdgeRow, r, let { let f = |v: f64| if r.node_time.count > 0 { Value::F(v) } else { Value::Null }; }, {
    host: Str => Value::S(&r.host),
    node: Str => Value::S(&r.node),
    in_callback: Str => Value::S(&r.callback),
    publishes_topic: Str => Value::S(&r.topic),
    publishes: U64 => Value::U(r.publishes),
    rate_hz: F64 => r.rate_hz.map_or(Value::Null, Value::F),
    rate_kind: Str => Value::S(r.rate_kind.as_str()),
    node_time_mean_ms: F64 => f(r.node_time.mean_ms),
    node_time_p99_ms: F64 => f(r.node_time.p99_ms),
});
