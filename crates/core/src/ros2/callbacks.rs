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

use super::assemble::{CallbackKind, CallbackRec, PublishRec};
use crate::bounded::BoundedMap;
use crate::latency::stats::{Dist, DistSummary};
use crate::record::Value;
use serde::Serialize;
use std::sync::Arc;

/// A callback's identity: host, node, what it belongs to, its symbol.
type CallbackKey = (usize, Option<Arc<str>>, CallbackKind, Option<Arc<str>>);

#[derive(Default)]
struct CallbackStats {
    runs: u64,
    unfinished: u64,
    intra: u64,
    first: i64,
    last: i64,
    duration: Dist,
}

#[derive(Default)]
struct EdgeStats {
    count: u64,
    first: i64,
    last: i64,
    /// callback_start → rclcpp_publish (rcl_publish when rclcpp is not traced).
    node: Dist,
}

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
    pub stats: CallbackTableStats,
}

impl CallbackTable {
    pub fn new(max_entries: usize) -> CallbackTable {
        CallbackTable { callbacks: BoundedMap::new(max_entries), edges: BoundedMap::new(max_entries), stats: Default::default() }
    }

    pub fn add_callback(&mut self, host: usize, c: &CallbackRec) {
        let key = (host, c.node.clone(), c.kind.clone(), c.symbol.clone());
        let ev = &mut self.stats.callbacks_evicted;
        let e = self.callbacks.get_or_insert_with(key, CallbackStats::default, &mut |_, _| *ev += 1);
        if e.runs == 0 {
            e.first = c.start;
        }
        e.runs += 1;
        e.last = e.last.max(c.start);
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
        let ev = &mut self.stats.edges_evicted;
        let e = self.edges.get_or_insert_with((host, p.node.clone(), input, topic), EdgeStats::default, &mut |_, _| *ev += 1);
        let t = p.ts();
        if e.count == 0 {
            e.first = t;
        }
        e.count += 1;
        e.last = e.last.max(t);
        if let (Some(s), Some(a)) = (p.callback_start, at) {
            e.node.record(a.saturating_sub(s));
        }
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
                rate_hz: rate(s.runs, s.first, s.last),
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
                rate_hz: rate(s.count, s.first, s.last),
                node_time: s.node.summary(),
            })
            .collect();
        v.sort_by(|a, b| (&a.host, &a.node, &a.callback, &a.topic).cmp(&(&b.host, &b.node, &b.callback, &b.topic)));
        v
    }
}

/// `(n − 1) / (last − first)`, as `ros2 topic hz` computes a rate; `None` under two events.
fn rate(n: u64, first: i64, last: i64) -> Option<f64> {
    (n >= 2 && last > first).then(|| (n - 1) as f64 / ((last - first) as f64 / 1e9))
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
    pub rate_hz: Option<f64>,
    pub duration: DistSummary,
}

crate::record!(CallbackRow, r, let { let f = |v: f64| if r.duration.count > 0 { Value::F(v) } else { Value::Null }; }, {
    host: Str => Value::S(&r.host),
    node: Str => Value::S(&r.node),
    callback: Str => Value::S(&r.callback),
    runs: U64 => Value::U(r.runs),
    rate_hz: F64 => r.rate_hz.map_or(Value::Null, Value::F),
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
    pub rate_hz: Option<f64>,
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
    node_time_mean_ms: F64 => f(r.node_time.mean_ms),
    node_time_p99_ms: F64 => f(r.node_time.p99_ms),
});
