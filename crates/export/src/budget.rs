//! Latency budgets per topic and layer (`--budget /image=20ms`,
//! `--budget /image:ros_e2e=30ms`, `--budget '*=50ms'`), and the layers of a
//! correlated row as (layer, nanoseconds) pairs.
//!
//! One syntax serves `ddscope serve` (its `ddscope_latency_over_budget_total`
//! counters, the budget gauges, and traces sampled "over a budget") and
//! `ddscope rules` (alerting rules with the budgets as thresholds).

use ddscope_core::latency::{Layer, LatencyRow, Level};
use ddscope_traffic::units::Nanos;
use std::str::FromStr;

/// The budget of one topic's (or every topic's, `*`) latency at one layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// A topic name as ddscope shows it (`/image`), or `*` for every topic without a budget of its own.
    pub topic: String,
    pub layer: Layer,
    pub limit_ns: i64,
}

/// Layers a budget may name: everything a row or a chain measures.
pub fn budget_layers() -> impl Iterator<Item = Layer> {
    Layer::ALL.into_iter().filter(|l| *l != Layer::Node)
}

impl FromStr for Budget {
    type Err = String;
    /// `TOPIC[:LAYER]=DURATION`; the layer defaults to `message` (DDS message latency).
    fn from_str(s: &str) -> Result<Self, String> {
        let (key, dur) = s.rsplit_once('=').ok_or_else(|| format!("{s:?}: expected TOPIC[:LAYER]=DURATION, e.g. /image=20ms"))?;
        let (topic, layer) = match key.rsplit_once(':') {
            Some((t, l)) if Layer::parse(l).is_some() => (t, Layer::parse(l).expect("checked")),
            Some((_, l)) if !l.contains('/') => {
                let known: Vec<&str> = budget_layers().map(|l| l.as_str()).collect();
                return Err(format!("{s:?}: unknown layer {l:?} (one of {})", known.join(", ")));
            }
            _ => (key, Layer::Message),
        };
        if topic.is_empty() {
            return Err(format!("{s:?}: the topic is empty (a name such as /image, or * for every topic)"));
        }
        if topic.len() > 256 || topic.chars().any(char::is_control) {
            return Err(format!("{s:?}: a topic is at most 256 bytes without control characters"));
        }
        if layer == Layer::Node {
            return Err(format!("{s:?}: node is a chain layer; budget a topic's layer or chain_e2e with ddscope rules"));
        }
        let ns = dur.trim().parse::<Nanos>().map_err(|e| format!("{s:?}: {e}"))?.0;
        if ns == 0 || ns > 3_600_000_000_000 {
            return Err(format!("{s:?}: the budget must be more than 0 and at most 1h"));
        }
        Ok(Budget { topic: topic.to_string(), layer, limit_ns: ns as i64 })
    }
}

impl std::fmt::Display for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}={}", self.topic, self.layer, Nanos(self.limit_ns.max(0) as u64))
    }
}

/// A set of budgets; a topic's own budget wins over `*`.
#[derive(Debug, Clone, Default)]
pub struct Budgets {
    list: Vec<Budget>,
}

impl Budgets {
    /// The later of two budgets for the same topic and layer wins.
    pub fn new(list: &[Budget]) -> Self {
        let mut v: Vec<Budget> = vec![];
        for b in list {
            v.retain(|x| !(x.topic == b.topic && x.layer == b.layer));
            v.push(b.clone());
        }
        Budgets { list: v }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn list(&self) -> &[Budget] {
        &self.list
    }

    /// The budget of `topic` at `layer`, if any.
    pub fn limit(&self, topic: &str, layer: Layer) -> Option<i64> {
        let mut any = None;
        for b in &self.list {
            if b.layer == layer {
                if b.topic == topic {
                    return Some(b.limit_ns);
                }
                if b.topic == "*" {
                    any = Some(b.limit_ns);
                }
            }
        }
        any
    }

    /// Whether any layer of `row` is over its topic's budget.
    pub fn row_over(&self, topic: &str, row: &LatencyRow) -> bool {
        !self.list.is_empty() && row_layers(row).any(|(l, v)| self.limit(topic, l).is_some_and(|b| v > b))
    }
}

/// The topic of a row as ddscope shows it (and labels it): its name, or `writer GUID` when discovery did not name it.
pub fn row_topic(r: &LatencyRow) -> String {
    r.topic.as_deref().map(|t| t.topic_name.clone()).unwrap_or_else(|| format!("writer {}", r.writer_id))
}

/// Every layer a row measured, as (layer, ns): message-level rows give the
/// wire layers (message, first_first, last_last), the ground truth's
/// (sender_stack, receiver_stack, application), source_ts_to_wire and the
/// ROS 2 layers of their trace columns; submessage rows their submessage latency;
/// router rows (Zenoh) the router hop.
pub fn row_layers(r: &LatencyRow) -> impl Iterator<Item = (Layer, i64)> + '_ {
    let ros = r.ros.as_deref();
    let msg = r.level == Level::Message;
    let sub = r.level == Level::Submessage;
    let pick = move |c: bool, v: Option<i64>| if c { v } else { None };
    [
        (Layer::Message, pick(msg, r.latency_ns)),
        (Layer::FirstFirst, pick(msg, r.first_first_ns)),
        (Layer::LastLast, pick(msg, r.last_last_ns)),
        (Layer::Submessage, pick(sub, r.latency_ns)),
        (Layer::Router, pick(r.level == Level::Router, r.latency_ns)),
        (Layer::SenderStack, pick(msg, r.sender_stack_ns)),
        (Layer::ReceiverStack, pick(msg, r.receiver_stack_ns)),
        (Layer::Application, pick(msg, r.app_latency_ns)),
        (Layer::SourceTsToWire, pick(msg, r.source_ts_to_wire_ns)),
        (Layer::RosPublish, ros.and_then(|c| c.ros_publish_ns)),
        (Layer::DdsSend, ros.and_then(|c| c.dds_send_ns)),
        (Layer::DdsLocal, ros.and_then(|c| c.dds_local_ns)),
        (Layer::DdsRemote, ros.and_then(|c| c.dds_remote_ns)),
        (Layer::DdsReceive, ros.and_then(|c| c.dds_receive_ns)),
        (Layer::Executor, ros.and_then(|c| c.executor_ns)),
        (Layer::Callback, ros.and_then(|c| c.callback_ns)),
        (Layer::RosE2e, ros.and_then(|c| c.ros_e2e_ns)),
    ]
    .into_iter()
    .filter_map(|(l, v)| Some((l, v?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_with_a_default_layer_and_clear_errors() {
        let b: Budget = "/image=20ms".parse().unwrap();
        assert_eq!((b.topic.as_str(), b.layer, b.limit_ns), ("/image", Layer::Message, 20_000_000));
        let b: Budget = "/a/b:ros_e2e=1.5ms".parse().unwrap();
        assert_eq!((b.topic.as_str(), b.layer, b.limit_ns), ("/a/b", Layer::RosE2e, 1_500_000));
        assert_eq!("*=50ms".parse::<Budget>().unwrap().topic, "*");
        // A colon that is part of a topic name is not taken for a layer.
        assert_eq!("/ns:x/y=1ms".parse::<Budget>().unwrap().topic, "/ns:x/y");
        assert!("/image:bogus=1ms".parse::<Budget>().unwrap_err().contains("unknown layer"));
        assert!("/image".parse::<Budget>().unwrap_err().contains("TOPIC[:LAYER]=DURATION"));
        assert!("/image=0ms".parse::<Budget>().is_err());
        assert!("/image=2h".parse::<Budget>().is_err());
        assert!("/image:node=1ms".parse::<Budget>().is_err());
        assert_eq!("/image:dds_send=250us".parse::<Budget>().unwrap().to_string(), "/image:dds_send=250us");
    }

    #[test]
    fn a_topics_own_budget_wins_over_the_wildcard() {
        let bs = Budgets::new(&["*=50ms".parse().unwrap(), "/image=20ms".parse().unwrap(), "/image=30ms".parse().unwrap()]);
        assert_eq!(bs.limit("/image", Layer::Message), Some(30_000_000));
        assert_eq!(bs.limit("/drive", Layer::Message), Some(50_000_000));
        assert_eq!(bs.limit("/drive", Layer::RosE2e), None);
        assert_eq!(bs.list().len(), 2);
    }
}
