//! Per-topic (or per-writer) summary of one capture point: who publishes
//! what, how often, how big, how fragmented, how much repair traffic.
//!
//! Per-writer state is capped ([`TopicsConfig::max_writers`], least recently
//! seen writer evicted first and counted in [`TopicsStats`]); rows cost
//! O(writers · log) plus one index lookup per topic for its reader count.

use crate::bounded::BoundedMap;
use crate::discovery::{Discovery, Durability, History, Liveliness, LocalPairs, QosDuration, Reliability, TopicNames};
use crate::ros_graph::EntityRole;
use crate::events::{SubmsgEvent, TrafficType};
use crate::rate::{RateKind, SampleTimes, TopicRate};
use crate::record::Value;
use crate::samples::SampleRecord;
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::Guid;
use serde::Serialize;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Caps of the per-topic analysis (and of the live view built on it).
#[derive(Debug, Clone, Copy)]
pub struct TopicsConfig {
    /// Writers with statistics; the least recently seen is evicted first
    /// ([`TopicsStats::writers_evicted`]). ~300 bytes each.
    pub max_writers: usize,
    /// Bytes the writers' statistics may hold together, their topic and
    /// type names included (counted per writer even where shared); over it
    /// the least recently seen writers are evicted first.
    pub max_writer_bytes: usize,
    /// Writers in the live view's rate window (`ddscope live`, agents); the
    /// least recently active is evicted first. ~400 bytes each.
    pub max_live_topics: usize,
}

impl Default for TopicsConfig {
    fn default() -> Self {
        TopicsConfig { max_writers: 100_000, max_writer_bytes: 64 << 20, max_live_topics: 10_000 }
    }
}

/// What the topic analysis had to forget to stay within its caps.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct TopicsStats {
    pub writers: usize,
    /// Writers whose statistics were dropped (least recently seen first; count or byte cap).
    pub writers_evicted: u64,
    /// Bytes the writers' statistics hold now.
    pub writer_bytes: usize,
    /// Samples that were counted in the dropped writers' statistics.
    pub samples_evicted: u64,
}

impl TopicsStats {
    /// What was evicted, if anything (for closing lines).
    pub fn problem_line(&self) -> Option<String> {
        (self.writers_evicted > 0).then(|| {
            format!(
                "{} writers' statistics evicted (too many writers or too many bytes of them; least recently seen first), with {} samples",
                self.writers_evicted, self.samples_evicted
            )
        })
    }

    /// One line: evictions, or that there were none.
    pub fn summary_line(&self) -> String {
        self.problem_line().map_or_else(|| "nothing evicted".to_string(), |l| format!("evicted: {l}"))
    }
}

/// Vendor ids remembered per writer (one in any real system; a forged
/// writer could claim a new one in every message).
const MAX_VENDORS_PER_WRITER: usize = 8;

#[derive(Debug, Default, Clone)]
struct WriterStats {
    topic: Option<Arc<TopicNames>>,
    traffic_type: Option<TrafficType>,
    samples: u64,
    incomplete_samples: u64,
    bytes: u64,
    min_size: Option<u32>,
    max_size: u32,
    /// Its samples' times (first DATA/DATA_FRAG of each): its rate (crate::rate).
    times: SampleTimes,
    rtps_frags: u64,
    ip_frags: u64,
    retransmitted_frags: u64,
    retransmitted_bytes: u64,
    max_sn: Option<i64>,
    sn_gaps: u64,
    heartbeats: u64,
    heartbeat_frags: u64,
    acknacks: u64,
    nack_frags: u64,
    gaps: u64,
    data_submsgs: u64,
    pcps: u8,
    vendors: Vec<u16>,
    /// Domain of the destination ports of its DATA (the fallback when discovery does not name it).
    port_domain: Option<u32>,
    /// Its node as its events name it when discovery does not (rmw_zenoh: from the liveliness token).
    node: Option<Arc<crate::ros_graph::RosNode>>,
    /// Bytes charged to the table's budget (0 until first charged).
    charged: usize,
}

impl WriterStats {
    /// Bytes held: the statistics, their table slot, the vendor list and the names.
    fn bytes(&self) -> usize {
        std::mem::size_of::<Self>() + 48 + self.vendors.capacity() * 2 + self.topic.as_ref().map_or(0, |t| t.heap_bytes())
    }
}

/// Aggregates events and sample records of one capture point.
pub struct TopicsAnalysis {
    /// Per writer, in first-seen order while nothing is evicted (rows keep that order).
    stats: BoundedMap<Guid, WriterStats>,
    /// The writer of the previous event and its slot: consecutive submessages mostly share it.
    last: Option<(Guid, u32)>,
    samples_evicted: u64,
    /// The capture point's observation window: first and last RTPS event seen.
    observed: Option<(i64, i64)>,
}

impl Default for TopicsAnalysis {
    fn default() -> Self {
        Self::with_config(TopicsConfig::default())
    }
}

impl TopicsAnalysis {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_config(cfg: TopicsConfig) -> Self {
        TopicsAnalysis {
            stats: BoundedMap::new(cfg.max_writers).with_max_weight(cfg.max_writer_bytes),
            last: None,
            samples_evicted: 0,
            observed: None,
        }
    }

    pub fn stats(&self) -> TopicsStats {
        TopicsStats {
            writers: self.stats.len(),
            writers_evicted: self.stats.evicted(),
            writer_bytes: self.stats.weight(),
            samples_evicted: self.samples_evicted,
        }
    }

    /// Charges the current writer (the one [`writer`](Self::writer) returned
    /// last) its bytes after its names or vendor list changed.
    fn reweigh_current(&mut self) {
        let Some((g, slot)) = self.last else { return };
        let Some(bytes) = self.stats.at_mut(slot, &g).map(|s| {
            s.charged = s.bytes();
            s.charged
        }) else {
            return;
        };
        let evicted = &mut self.samples_evicted;
        self.stats.set_weight_at(slot, bytes, &mut |_, s| *evicted += s.samples);
    }

    fn writer(&mut self, g: Guid) -> &mut WriterStats {
        // The last writer used is the most recent already: no lookup, no reordering.
        let hit = match self.last {
            Some((lg, slot)) => lg == g && self.stats.at_mut(slot, &g).is_some(),
            None => false,
        };
        if !hit {
            let evicted = &mut self.samples_evicted;
            self.stats.get_or_insert_with(g, WriterStats::default, &mut |_, s| *evicted += s.samples);
            self.last = self.stats.slot(&g).map(|slot| (g, slot));
        }
        let slot = self.last.map_or(u32::MAX, |l| l.1);
        self.stats.at_mut(slot, &g).expect("present: found or inserted above")
    }

    /// The observation window (first and last RTPS event's capture time), once anything was seen.
    pub fn observed(&self) -> Option<(i64, i64)> {
        self.observed
    }

    pub fn on_event(&mut self, e: &SubmsgEvent) {
        self.observed = Some(match self.observed {
            Some((f, l)) => (f.min(e.ts_ns), l.max(e.ts_ns)),
            None => (e.ts_ns, e.ts_ns),
        });
        let Some(w) = e.writer_id else { return };
        let is_writer_side = matches!(
            e.kind,
            SubmsgKind::Data | SubmsgKind::DataFrag | SubmsgKind::Heartbeat | SubmsgKind::HeartbeatFrag | SubmsgKind::Gap
        );
        let is_reader_side = matches!(e.kind, SubmsgKind::AckNack | SubmsgKind::NackFrag);
        if !is_writer_side && !is_reader_side {
            return;
        }
        let s = self.writer(w);
        let mut grew = s.charged == 0;
        if s.topic.is_none() && e.topic.is_some() {
            s.topic = e.topic.clone();
            grew = true;
        }
        s.traffic_type.get_or_insert(e.traffic_type);
        if s.node.is_none() && e.writer_node.is_some() {
            s.node = e.writer_node.clone();
        }
        match e.kind {
            SubmsgKind::Data | SubmsgKind::DataFrag => {
                s.data_submsgs += 1;
                if s.port_domain.is_none() && e.zenoh.is_none() {
                    s.port_domain = crate::discovery::domain_of_destination(&e.dst);
                }
                if let Some(p) = e.pcp {
                    s.pcps |= 1 << p;
                }
                if !s.vendors.contains(&e.vendor_id) && s.vendors.len() < MAX_VENDORS_PER_WRITER {
                    s.vendors.push(e.vendor_id);
                    grew = true;
                }
                if let Some(sn) = e.sn {
                    if let Some(m) = s.max_sn {
                        if sn > m {
                            // Numbers skipped; i128 so that a jump across the
                            // whole i64 range neither wraps nor overflows.
                            let skipped = (sn as i128 - m as i128 - 1) as u128;
                            s.sn_gaps = s.sn_gaps.saturating_add(skipped.min(u64::MAX as u128) as u64);
                        }
                    }
                    if s.max_sn.is_none_or(|m| sn > m) {
                        s.max_sn = Some(sn);
                    }
                }
            }
            SubmsgKind::Heartbeat => s.heartbeats += 1,
            SubmsgKind::HeartbeatFrag => s.heartbeat_frags += 1,
            SubmsgKind::Gap => s.gaps += 1,
            SubmsgKind::AckNack => s.acknacks += 1,
            SubmsgKind::NackFrag => s.nack_frags += 1,
            _ => {}
        }
        if grew {
            self.reweigh_current();
        }
    }

    pub fn on_sample(&mut self, r: &SampleRecord) {
        let s = self.writer(r.writer_id);
        if r.is_supplement() {
            // Another datagram of a sample already counted (repair or copy to another reader).
            s.ip_frags += r.ip_frags as u64;
            s.retransmitted_frags += r.retransmitted_frags as u64;
            s.retransmitted_bytes += r.retransmitted_bytes;
            return;
        }
        let named = s.charged == 0 || s.topic.is_none() && r.topic.is_some();
        if s.topic.is_none() && r.topic.is_some() {
            s.topic = r.topic.clone();
        }
        s.traffic_type.get_or_insert(r.traffic_type);
        s.samples += 1;
        if !r.complete {
            s.incomplete_samples += 1;
        }
        s.bytes += r.sample_size as u64;
        s.min_size = Some(s.min_size.map_or(r.sample_size, |m| m.min(r.sample_size)));
        s.max_size = s.max_size.max(r.sample_size);
        s.times.add(r.first_ts_ns);
        s.rtps_frags += if r.is_fragmented() { r.frags_expected as u64 } else { 0 };
        s.ip_frags += r.ip_frags as u64;
        s.retransmitted_frags += r.retransmitted_frags as u64;
        s.retransmitted_bytes += r.retransmitted_bytes;
        if named {
            self.reweigh_current();
        }
    }

    /// Rows per topic (`by_writer == false`) or per writer, for `traffic` types
    /// (all when empty). Topic names come from discovery when events lacked
    /// them; ROS node names from discovery's ROS graph (`ros_discovery_info`).
    pub fn rows(&self, capture: &str, discovery: &Discovery, by_writer: bool, traffic: &[TrafficType]) -> Vec<TopicRow> {
        // (Domain, raw topic name) → nodes of its readers: one pass over the graph's gids.
        // (and of its writers, for a topic whose samples this capture did not see: a topic local
        // to another host still names its publishers)
        let mut reader_nodes: BTreeMap<(Option<u32>, &str), Vec<String>> = BTreeMap::new();
        let mut graph_writer_nodes: BTreeMap<(Option<u32>, &str), Vec<String>> = BTreeMap::new();
        for (g, owner) in discovery.ros.entities() {
            let map = if owner.role == EntityRole::Reader { &mut reader_nodes } else { &mut graph_writer_nodes };
            if let Some(ep) = discovery.endpoint(g) {
                let v = map.entry((ep.names.domain, ep.names.topic_raw.as_str())).or_default();
                if !v.contains(&owner.node.fq_name) {
                    v.push(owner.node.fq_name.clone());
                }
            }
        }
        for v in reader_nodes.values_mut().chain(graph_writer_nodes.values_mut()) {
            v.sort();
        }
        let readers_of = |n: &TopicNames| reader_nodes.get(&(n.domain, n.topic_raw.as_str())).cloned().unwrap_or_default();
        let local = discovery.local_pairs();
        let local_of = |n: &TopicNames| local.get(&(n.domain, n.topic_raw.clone())).copied();
        // The end of this capture point's observation: only to tell a burst then silence (crate::rate).
        let observed_until = self.observed.map(|(_, l)| l);
        // Members by reference, usually one per group (inline): rows cost
        // little beyond the rows themselves even with 10^5 writers.
        type Member<'a> = (Guid, &'a WriterStats, Option<Arc<TopicNames>>);
        type Key = (Option<u32>, String, String, String);
        let mut groups: BTreeMap<Key, SmallVec<[Member<'_>; 1]>> = BTreeMap::new();
        for (g, s) in self.stats.iter() {
            // Discovery's record first: it carries the domain learned since the first event.
            let topic = discovery.endpoint(g).map(|e| e.names.clone()).or_else(|| s.topic.clone());
            let tt = s.traffic_type.unwrap_or(TrafficType::User);
            if !traffic.is_empty() && !traffic.contains(&tt) {
                continue;
            }
            if s.samples == 0 && s.data_submsgs == 0 && discovery.endpoint(g).is_none() && s.heartbeats == 0 {
                // Only ACKNACKs towards a writer we know nothing about.
                continue;
            }
            // Domain: the endpoint's (its participant's), else its participant's, else the
            // domain of the ports its DATA went to; unknown (null) otherwise.
            let domain = topic
                .as_ref()
                .and_then(|t| t.domain)
                .or_else(|| discovery.domain_of(&g.prefix))
                .or(s.port_domain);
            let key = match (&topic, by_writer) {
                (Some(t), false) => (domain, t.topic_raw.clone(), t.type_raw.clone(), String::new()),
                (Some(t), true) => (domain, t.topic_raw.clone(), t.type_raw.clone(), g.to_string()),
                (None, _) => (domain, "\u{10ffff}".into(), String::new(), g.to_string()),
            };
            groups.entry(key).or_default().push((*g, s, topic));
        }
        let mut rows = Vec::with_capacity(groups.len());
        for ((domain, _, _, writer_key), members) in groups {
            let names = members.iter().find_map(|(_, _, t)| t.clone());
            let mut row = TopicRow { capture: capture.to_string(), names: names.clone(), domain, ..Default::default() };
            let mut times: SmallVec<[&SampleTimes; 1]> = SmallVec::new();
            let mut bandwidth: Option<f64> = None;
            if by_writer || names.is_none() {
                row.writer_id = Guid::parse_hex(&writer_key);
            }
            let mut rel: Vec<Reliability> = vec![];
            let mut dur: Vec<Durability> = vec![];
            let mut hist: Vec<History> = vec![];
            let mut deadline: Vec<QosDuration> = vec![];
            let mut lifespan: Vec<QosDuration> = vec![];
            let mut liveliness: Vec<Liveliness> = vec![];
            let mut parts: Vec<String> = vec![];
            let mut vendors: Vec<u16> = vec![];
            let mut nodes: Vec<String> = vec![];
            for (g, s, _) in &members {
                row.traffic_type = s.traffic_type.unwrap_or_default();
                if let Some(n) = discovery.node_of(g).or(s.node.as_ref()) {
                    if !nodes.contains(&n.fq_name) {
                        nodes.push(n.fq_name.clone());
                    }
                }
                if let Some(ep) = discovery.endpoint(g) {
                    rel.push(ep.reliability);
                    dur.push(ep.durability);
                    if let Some(h) = ep.history {
                        hist.push(h);
                    }
                    deadline.push(ep.deadline);
                    lifespan.push(ep.lifespan);
                    liveliness.push(ep.liveliness);
                    for p in &ep.partitions {
                        if !parts.contains(p) {
                            parts.push(p.clone());
                        }
                    }
                    if let Some(v) = ep.vendor_id {
                        if !vendors.contains(&v) {
                            vendors.push(v);
                        }
                    }
                }
                for v in &s.vendors {
                    if !vendors.contains(v) {
                        vendors.push(*v);
                    }
                }
                row.writers += 1;
                row.samples += s.samples;
                row.incomplete_samples += s.incomplete_samples;
                row.bytes += s.bytes;
                row.min_sample_size = match (row.min_sample_size, s.min_size) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                row.max_sample_size = row.max_sample_size.max(s.max_size);
                row.rtps_frags += s.rtps_frags;
                row.ip_frags += s.ip_frags;
                row.retransmitted_fragments += s.retransmitted_frags;
                row.retransmitted_bytes += s.retransmitted_bytes;
                row.sn_gaps = row.sn_gaps.saturating_add(s.sn_gaps);
                row.heartbeats += s.heartbeats + s.heartbeat_frags;
                row.acknacks += s.acknacks;
                row.nack_frags += s.nack_frags;
                row.gaps += s.gaps;
                row.pcps |= s.pcps;
                if s.times.n > 0 {
                    let (f, l) = (s.times.first_ns, s.times.last_ns);
                    row.first_ts_ns = Some(row.first_ts_ns.map_or(f, |x| x.min(f)));
                    row.last_ts_ns = Some(row.last_ts_ns.map_or(l, |x| x.max(l)));
                    // Its payload rate: its sample rate times its mean size (steady writers only).
                    if let Some(hz) = s.times.rate_hz(observed_until) {
                        *bandwidth.get_or_insert(0.0) += hz * (s.bytes as f64 / s.samples.max(1) as f64) * 8.0;
                    }
                }
                times.push(&s.times);
            }
            let rate = TopicRate::of(times.iter().copied(), observed_until);
            row.rate_hz = rate.hz;
            row.rate_kind = rate.kind;
            row.bandwidth_bps = bandwidth;
            row.reliability = Qos::of(rel);
            row.durability = Qos::of(dur);
            row.history = Qos::of(hist);
            row.deadline = Qos::of(deadline);
            row.lifespan = Qos::of(lifespan);
            row.liveliness = Qos::of(liveliness);
            row.partitions = parts;
            vendors.sort();
            row.vendors = vendors;
            nodes.sort();
            if by_writer && nodes.len() == 1 {
                row.writer_node = nodes.first().cloned();
            }
            row.writer_nodes = nodes;
            if let Some(n) = &names {
                if row.writer_nodes.is_empty() && !by_writer {
                    row.writer_nodes = graph_writer_nodes.get(&(n.domain, n.topic_raw.as_str())).cloned().unwrap_or_default();
                }
                row.reader_nodes = readers_of(n);
                row.readers = discovery.readers_of(n.domain, &n.topic_raw);
                if !by_writer {
                    row.local = local_of(n);
                }
            }
            rows.push(row);
        }
        // Topics with readers but no writer traffic at this capture point.
        if !by_writer {
            let mut seen: std::collections::HashSet<(Option<u32>, String)> =
                rows.iter().filter_map(|r| r.names.as_ref().map(|n| (n.domain, n.topic_raw.clone()))).collect();
            for e in discovery.endpoints_sorted() {
                // An rmw_zenoh endpoint's "entity id" is the end of a hashed gid, not
                // an RTPS entity kind: one in four once read as builtin and was hidden.
                let zenoh = e.vendor_id == Some(ddscope_zenoh::VENDOR_MARKER);
                let tt = if !zenoh && e.guid.entity.is_builtin() { TrafficType::Builtin } else { TrafficType::User };
                if !traffic.is_empty() && !traffic.contains(&tt) {
                    continue;
                }
                if seen.insert((e.names.domain, e.names.topic_raw.clone())) {
                    let writers = discovery.writers_of(e.names.domain, &e.names.topic_raw);
                    let readers = discovery.readers_of(e.names.domain, &e.names.topic_raw);
                    rows.push(TopicRow {
                        capture: capture.to_string(),
                        names: Some(e.names.clone()),
                        domain: e.names.domain,
                        traffic_type: tt,
                        writers,
                        readers,
                        writer_nodes: graph_writer_nodes.get(&(e.names.domain, e.names.topic_raw.as_str())).cloned().unwrap_or_default(),
                        reader_nodes: readers_of(&e.names),
                        local: local_of(&e.names),
                        reliability: Some(Qos::One(e.reliability)),
                        durability: Some(Qos::One(e.durability)),
                        history: e.history.map(Qos::One),
                        deadline: Some(Qos::One(e.deadline)),
                        lifespan: Some(Qos::One(e.lifespan)),
                        liveliness: Some(Qos::One(e.liveliness)),
                        vendors: e.vendor_id.into_iter().collect(),
                        rate_kind: Some(RateKind::None),
                        ..Default::default()
                    });
                }
            }
            rows.sort_by(|a, b| {
                let ka = a.names.as_ref().map(|n| n.topic_name.clone()).unwrap_or_else(|| "\u{10ffff}".into());
                let kb = b.names.as_ref().map(|n| n.topic_name.clone()).unwrap_or_else(|| "\u{10ffff}".into());
                ka.cmp(&kb).then(a.domain.cmp(&b.domain)).then(a.writer_id.cmp(&b.writer_id))
            });
        }
        rows
    }
}

/// One QoS policy of a row's writers: the value they all have, or their
/// different values (`mixed(a,b)`, in the order of their names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Qos<T> {
    One(T),
    Mixed(Vec<T>),
}

impl<T: std::fmt::Display> Qos<T> {
    /// The policy of writers with these values (`None` without any).
    fn of(mut v: Vec<T>) -> Option<Qos<T>> {
        v.sort_by_cached_key(|x| x.to_string());
        v.dedup_by(|a, b| a.to_string() == b.to_string());
        match v.len() {
            0 => None,
            1 => v.pop().map(Qos::One),
            _ => Some(Qos::Mixed(v)),
        }
    }
}

impl<T: std::fmt::Display> std::fmt::Display for Qos<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Qos::One(x) => write!(f, "{x}"),
            Qos::Mixed(v) => {
                f.write_str("mixed(")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// One output row of `ddscope topics`.
#[derive(Debug, Clone, Default)]
pub struct TopicRow {
    pub capture: String,
    pub names: Option<Arc<TopicNames>>,
    /// DDS domain of the row's writers (null when neither discovery nor ports tell).
    pub domain: Option<u32>,
    /// Whether `rate_hz` describes the row: steady, bursty, few, none or mixed (crate::rate).
    pub rate_kind: Option<RateKind>,
    /// Set for `--by writer` rows and for writers whose topic is unknown.
    pub writer_id: Option<Guid>,
    /// `--by writer` rows: the ROS node owning the writer (fully qualified, `/ns/name`).
    pub writer_node: Option<String>,
    /// ROS nodes owning the row's writers (sorted, unique).
    pub writer_nodes: Vec<String>,
    /// ROS nodes owning readers of the topic (announced by SEDP and named by `ros_discovery_info`).
    pub reader_nodes: Vec<String>,
    pub traffic_type: TrafficType,
    /// Vendor ids of the row's writers (sorted, unique), written `0x0110`.
    pub vendors: Vec<u16>,
    pub reliability: Option<Qos<Reliability>>,
    pub durability: Option<Qos<Durability>>,
    pub history: Option<Qos<History>>,
    /// Deadline, lifespan and liveliness (with its lease) of the row's writers (SEDP, or rmw_zenoh's tokens).
    pub deadline: Option<Qos<QosDuration>>,
    pub lifespan: Option<Qos<QosDuration>>,
    pub liveliness: Option<Qos<Liveliness>>,
    pub partitions: Vec<String>,
    pub writers: u64,
    pub readers: u64,
    pub samples: u64,
    pub incomplete_samples: u64,
    pub bytes: u64,
    pub rate_hz: Option<f64>,
    pub bandwidth_bps: Option<f64>,
    pub min_sample_size: Option<u32>,
    pub max_sample_size: u32,
    pub rtps_frags: u64,
    pub ip_frags: u64,
    pub retransmitted_fragments: u64,
    pub retransmitted_bytes: u64,
    pub sn_gaps: u64,
    pub heartbeats: u64,
    pub acknacks: u64,
    pub nack_frags: u64,
    pub gaps: u64,
    pub pcps: u8,
    pub first_ts_ns: Option<i64>,
    pub last_ts_ns: Option<i64>,
    /// The topic's writer–reader pairs on one host (shared memory, loopback) or in one
    /// participant, whose samples no network capture sees (rows by topic only).
    pub local: Option<LocalPairs>,
}

crate::record!(TopicRow, r, {
    capture: Str => Value::S(&r.capture),
    topic_name: Str => r.names.as_deref().map_or(Value::Null, |n| Value::S(&n.topic_name)),
    type_name: Str => r.names.as_deref().map_or(Value::Null, |n| Value::S(&n.type_name)),
    topic_raw: Str => r.names.as_deref().map_or(Value::Null, |n| Value::S(&n.topic_raw)),
    type_raw: Str => r.names.as_deref().map_or(Value::Null, |n| Value::S(&n.type_raw)),
    writer_id: Str => r.writer_id.map_or(Value::Null, Value::Guid),
    traffic_type: Str => Value::S(r.traffic_type.as_str()),
    vendors: Str => Value::Vendors(&r.vendors),
    reliability: Str => r.reliability.as_ref().map_or(Value::Null, |q| Value::Text(q)),
    durability: Str => r.durability.as_ref().map_or(Value::Null, |q| Value::Text(q)),
    history: Str => r.history.as_ref().map_or(Value::Null, |q| Value::Text(q)),
    partitions: Str => Value::Strs(&r.partitions),
    writers: U64 => Value::U(r.writers),
    readers: U64 => Value::U(r.readers),
    samples: U64 => Value::U(r.samples),
    incomplete_samples: U64 => Value::U(r.incomplete_samples),
    bytes: U64 => Value::U(r.bytes),
    rate_hz: F64 => r.rate_hz.map_or(Value::Null, Value::F),
    bandwidth_bps: F64 => r.bandwidth_bps.map_or(Value::Null, Value::F),
    mean_sample_size: F64 => r.per_sample(r.bytes).map_or(Value::Null, Value::F),
    min_sample_size: U64 => r.min_sample_size.map_or(Value::Null, |v| Value::U(v as u64)),
    max_sample_size: U64 => if r.samples > 0 { Value::U(r.max_sample_size as u64) } else { Value::Null },
    rtps_frags_per_sample: F64 => r.per_sample(r.rtps_frags).map_or(Value::Null, Value::F),
    ip_frags_per_sample: F64 => r.per_sample(r.ip_frags).map_or(Value::Null, Value::F),
    retransmitted_fragments: U64 => Value::U(r.retransmitted_fragments),
    retransmitted_bytes: U64 => Value::U(r.retransmitted_bytes),
    sn_gaps: U64 => Value::U(r.sn_gaps),
    heartbeats: U64 => Value::U(r.heartbeats),
    acknacks: U64 => Value::U(r.acknacks),
    nack_frags: U64 => Value::U(r.nack_frags),
    gaps: U64 => Value::U(r.gaps),
    pcp: Str => Value::Pcps(r.pcps),
    first_ts_ns: I64 => r.first_ts_ns.map_or(Value::Null, Value::I),
    last_ts_ns: I64 => r.last_ts_ns.map_or(Value::Null, Value::I),
    writer_node: Str => r.writer_node.as_deref().map_or(Value::Null, Value::S),
    writer_nodes: Str => Value::Strs(&r.writer_nodes),
    reader_nodes: Str => Value::Strs(&r.reader_nodes),
    domain: U64 => r.domain.map_or(Value::Null, |d| Value::U(d as u64)),
    span_s: F64 => r.span_s().map_or(Value::Null, Value::F),
    rate_kind: Str => r.rate_kind.map_or(Value::Null, |k| Value::S(k.as_str())),
    deadline: Str => r.deadline.as_ref().map_or(Value::Null, |q| Value::Text(q)),
    lifespan: Str => r.lifespan.as_ref().map_or(Value::Null, |q| Value::Text(q)),
    liveliness: Str => r.liveliness.as_ref().map_or(Value::Null, |q| Value::Text(q)),
    same_host_pairs: U64 => Value::U(r.local.map_or(0, |l| l.pairs)),
    shared_memory_pairs: U64 => Value::U(r.local.map_or(0, |l| l.shared_memory)),
    same_participant_pairs: U64 => Value::U(r.local.map_or(0, |l| l.same_participant)),
});

impl TopicRow {
    /// First to last sample of the row's writers, in seconds.
    pub fn span_s(&self) -> Option<f64> {
        Some(self.last_ts_ns?.saturating_sub(self.first_ts_ns?) as f64 / 1e9)
    }

    /// `x` per sample, `None` when the row has no samples.
    pub fn per_sample(&self, x: u64) -> Option<f64> {
        (self.samples > 0).then(|| x as f64 / self.samples as f64)
    }

    /// The row's topic name; a writer of an unknown topic by its short GUID
    /// ([`unknown_writer`]), `?` when neither is known.
    pub fn label(&self) -> String {
        match (&self.names, self.writer_id) {
            (Some(n), _) => n.topic_name.clone(),
            (None, Some(w)) => unknown_writer(&w),
            (None, None) => "?".into(),
        }
    }
}

/// The name of a writer whose topic discovery did not tell (discovery was
/// not captured): `? writer 0110aabb…00000102`, its GUID's first and last bytes.
pub fn unknown_writer(w: &Guid) -> String {
    let g = w.to_string();
    format!("? writer {}…{}", &g[..8], &g[24..])
}
