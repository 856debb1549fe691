//! What `ddscope live` shows per topic: totals since start (from the same
//! `TopicsAnalysis` as `ddscope topics`) and current rate and bandwidth over a
//! sliding window of one-second buckets per writer. The rate is `topics`'
//! (ddscope_core::rate: per writer (n − 1) / (last − first) of its samples in
//! the window, summed over the topic's steady writers).
//!
//! Both tables are capped by [`TopicsConfig`] (writers in the analysis,
//! topics in the window), evict the least recently seen entry first and
//! count it ([`LiveStats`]): an agent watching forged traffic stays bounded.

use ddscope_core::bounded::BoundedMap;
use ddscope_core::decode::Decoder;
use ddscope_core::events::{SubmsgEvent, TrafficType};
use ddscope_core::rate::{RateKind, SampleTimes, TopicRate};
use ddscope_wire::Guid;
use std::collections::HashMap;
use ddscope_core::samples::SampleRecord;
use ddscope_core::record::{opt_u, Value};
use ddscope_core::topics::{unknown_writer, TopicRow, TopicsAnalysis, TopicsConfig, TopicsStats};
use std::collections::VecDeque;

const BUCKET_NS: i64 = 1_000_000_000;
/// Seconds the current rate is averaged over.
pub const WINDOW_S: usize = 5;

/// One writer's samples in one-second buckets: their times (for the rate) and bytes.
#[derive(Default, Clone)]
struct Buckets {
    /// (second, sample times, bytes)
    b: VecDeque<(i64, SampleTimes, u64)>,
}

impl Buckets {
    fn add(&mut self, ts: i64, bytes: u64) {
        let s = ts.div_euclid(BUCKET_NS);
        match self.b.back_mut() {
            Some(last) if last.0 == s => {
                last.1.add(ts);
                last.2 += bytes;
            }
            Some(last) if last.0 > s => {
                if let Some(x) = self.b.iter_mut().find(|x| x.0 == s) {
                    x.1.add(ts);
                    x.2 += bytes;
                }
            }
            _ => {
                let mut t = SampleTimes::default();
                t.add(ts);
                self.b.push_back((s, t, bytes));
            }
        }
        while self.b.len() > WINDOW_S + 2 {
            self.b.pop_front();
        }
    }

    /// The samples' times and bytes of the last full WINDOW_S seconds before `now`.
    fn window(&self, now: i64) -> (SampleTimes, u64) {
        let cur = now.div_euclid(BUCKET_NS);
        let (mut t, mut bytes) = (SampleTimes::default(), 0u64);
        for (s, times, b) in &self.b {
            if *s < cur && *s >= cur - WINDOW_S as i64 {
                t = t.merge(times);
                bytes += b;
            }
        }
        (t, bytes)
    }
}

/// A writer in the rate window: its topic's window key and its buckets.
#[derive(Default, Clone)]
struct WriterWindow {
    key: String,
    buckets: Buckets,
}

/// A topic's current rate (crate docs) and bandwidth.
#[derive(Clone, Copy, Debug, PartialEq)]
struct NowRate {
    hz: Option<f64>,
    kind: RateKind,
    bps: f64,
}

impl NowRate {
    const SILENT: NowRate = NowRate { hz: None, kind: RateKind::None, bps: 0.0 };
}

/// Per-topic live statistics of one capture point.
pub struct LiveTopics {
    pub analysis: TopicsAnalysis,
    /// Rate buckets per writer, least recently active first.
    window: BoundedMap<Guid, WriterWindow>,
    pub now_ns: i64,
    pub events: u64,
    /// Frame bytes captured (on the wire).
    pub bytes: u64,
    /// Only rows of this DDS domain (`--domain`); topics known from discovery
    /// alone would otherwise show other domains' rows.
    pub domain: Option<u32>,
}

impl Default for LiveTopics {
    fn default() -> Self {
        Self::new(TopicsConfig::default())
    }
}

/// What the live view had to forget to stay within its caps.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, PartialEq, Eq)]
pub struct LiveStats {
    pub topics: TopicsStats,
    /// Writers in the rate window (the name is kept from when it was per topic).
    pub window_topics: usize,
    /// Writers dropped from the rate window (least recently active first):
    /// their current rate restarts from nothing if they come back.
    pub window_topics_evicted: u64,
}

impl LiveStats {
    /// What was evicted, if anything (for closing lines, /metrics, the dashboard).
    pub fn problem_line(&self) -> Option<String> {
        let mut parts: Vec<String> = self.topics.problem_line().into_iter().collect();
        if self.window_topics_evicted > 0 {
            parts.push(format!("{} writers dropped from the rate window (too many writers; least recently active first)", self.window_topics_evicted));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// One line: evictions, or that there were none.
    pub fn summary_line(&self) -> String {
        self.problem_line().map_or_else(|| "nothing evicted".to_string(), |l| format!("evicted: {l}"))
    }
}

/// One line of the live table: the topic's row of `ddscope topics` (core's
/// [`TopicRow`], the one topic-row schema) and its current rate and bandwidth.
#[derive(Clone, Debug)]
pub struct LiveRow {
    pub totals: TopicRow,
    /// [`TopicRow::label`]: its topic name, or the writer's short GUID.
    pub label: String,
    /// The rate over the last [`WINDOW_S`] s (ddscope_core::rate), null unless a writer was steady.
    pub rate_now_hz: Option<f64>,
    /// steady, bursty, few, no_samples (none in the window) or mixed.
    pub rate_now_kind: RateKind,
    pub bandwidth_now_bps: f64,
}

// The live view's columns (its JSON, which the agent sends to serve and the
// dashboard shows): the topic row's under its names, as the live table shows
// them — the label for a topic without a name, 0 rather than null without
// samples, at most MAX_ROW_NODES nodes per role (`nodes_not_shown` counts the
// rest) — then the rate window's.
ddscope_core::record!(LiveRow, r, let {
    let t = &r.totals;
    let per = |x: u64| Value::F(t.per_sample(x).unwrap_or(0.0));
}, {
    topic_name: Str => Value::S(&r.label),
    type_name: Str => Value::S(t.names.as_deref().map_or("", |n| n.type_name.as_str())),
    domain: U64 => opt_u(t.domain),
    vendors: Str => Value::Vendors(&t.vendors),
    writers: U64 => Value::U(t.writers),
    readers: U64 => Value::U(t.readers),
    samples: U64 => Value::U(t.samples),
    incomplete_samples: U64 => Value::U(t.incomplete_samples),
    bytes: U64 => Value::U(t.bytes),
    mean_sample_size: F64 => per(t.bytes),
    max_sample_size: U64 => Value::U(t.max_sample_size as u64),
    rtps_frags_per_sample: F64 => per(t.rtps_frags),
    ip_frags_per_sample: F64 => per(t.ip_frags),
    retransmitted_fragments: U64 => Value::U(t.retransmitted_fragments),
    sn_gaps: U64 => Value::U(t.sn_gaps),
    heartbeats: U64 => Value::U(t.heartbeats),
    acknacks: U64 => Value::U(t.acknacks),
    nack_frags: U64 => Value::U(t.nack_frags),
    gaps: U64 => Value::U(t.gaps),
    writer_nodes: Str => Value::Strs(&t.writer_nodes[..t.writer_nodes.len().min(MAX_ROW_NODES)]),
    reader_nodes: Str => Value::Strs(&t.reader_nodes[..t.reader_nodes.len().min(MAX_ROW_NODES)]),
    nodes_not_shown: U64 => Value::U((t.writer_nodes.len().saturating_sub(MAX_ROW_NODES) + t.reader_nodes.len().saturating_sub(MAX_ROW_NODES)) as u64),
    rate_now_hz: F64 => r.rate_now_hz.map_or(Value::Null, Value::F),
    rate_now_kind: Str => Value::S(r.rate_now_kind.as_str()),
    bandwidth_now_bps: F64 => Value::F(r.bandwidth_now_bps),
});

/// The live JSON: [`LiveRow`]'s columns.
impl serde::Serialize for LiveRow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ddscope_core::record::Serde(self).serialize(s)
    }
}

/// The rate window's key of a topic: its name, and its domain when known
/// (the same name in two domains is two topics).
fn window_key(name: &str, domain: Option<u32>) -> String {
    match domain {
        Some(d) => format!("{name}\u{0}{d}"),
        None => name.to_string(),
    }
}

/// Node names per role in one topic row of the live table.
pub const MAX_ROW_NODES: usize = 16;

impl LiveTopics {
    pub fn new(cfg: TopicsConfig) -> Self {
        LiveTopics {
            analysis: TopicsAnalysis::with_config(cfg),
            window: BoundedMap::new(cfg.max_live_topics),
            now_ns: 0,
            events: 0,
            bytes: 0,
            domain: None,
        }
    }

    /// The topics analysis's rows of user topics (of [`LiveTopics::domain`] when set).
    pub fn topic_rows(&self, capture: &str, decoder: &Decoder) -> Vec<ddscope_core::topics::TopicRow> {
        let mut rows = self.analysis.rows(capture, &decoder.discovery, false, &[TrafficType::User]);
        if self.domain.is_some() {
            rows.retain(|r| r.domain == self.domain);
        }
        rows
    }

    pub fn stats(&self) -> LiveStats {
        LiveStats { topics: self.analysis.stats(), window_topics: self.window.len(), window_topics_evicted: self.window.evicted() }
    }

    /// Counts a captured frame's wire length.
    pub fn on_frame(&mut self, orig_len: u32) {
        self.bytes += orig_len as u64;
    }

    pub fn on_event(&mut self, e: &SubmsgEvent) {
        self.events += 1;
        self.now_ns = self.now_ns.max(e.ts_ns);
        self.analysis.on_event(e);
    }

    pub fn on_sample(&mut self, r: &SampleRecord) {
        self.analysis.on_sample(r);
        if r.traffic_type == TrafficType::User && !r.is_supplement() {
            let w = self.window.get_or_insert_with(r.writer_id, WriterWindow::default, &mut |_, _| {});
            if w.key.is_empty() || (r.topic.is_some() && w.key.starts_with('?')) {
                w.key = match &r.topic {
                    Some(t) => window_key(&t.topic_name, t.domain),
                    None => unknown_writer(&r.writer_id),
                };
            }
            w.buckets.add(r.first_ts_ns, r.sample_size as u64);
        }
    }

    /// Per topic window key: the current rate (its writers' samples in the window) and bandwidth.
    fn now_rates(&self, now_ns: i64) -> HashMap<&str, NowRate> {
        let mut per: HashMap<&str, (Vec<SampleTimes>, u64)> = HashMap::new();
        for (_, w) in self.window.iter() {
            let (t, bytes) = w.buckets.window(now_ns);
            let e = per.entry(w.key.as_str()).or_default();
            e.0.push(t);
            e.1 += bytes;
        }
        per.into_iter()
            .map(|(k, (times, bytes))| {
                // The window ends where the current second starts.
                let r = TopicRate::of(times.iter(), Some(now_ns.div_euclid(BUCKET_NS) * BUCKET_NS));
                (k, NowRate { hz: r.hz, kind: r.kind.unwrap_or(RateKind::None), bps: bytes as f64 * 8.0 / WINDOW_S as f64 })
            })
            .collect()
    }

    /// Rows for user topics, with the current window rates (time `now_ns`: wall clock or capture time).
    pub fn rows(&self, capture: &str, decoder: &Decoder, now_ns: i64) -> Vec<LiveRow> {
        let now = self.now_rates(now_ns);
        self.topic_rows(capture, decoder)
            .into_iter()
            // Writers of unknown topics that only showed HEARTBEATs/ACKNACKs are noise here.
            .filter(|r| r.names.is_some() || r.samples > 0)
            .map(|r| live_row(r, &now))
            .collect()
    }

    /// At most `max` rows for user topics, the busiest (most samples) first, and how many
    /// rows were left out. What the agent sends upstream every second: the full table of a
    /// link flooded with forged writers would be one row per writer.
    pub fn rows_top(&self, capture: &str, decoder: &Decoder, now_ns: i64, max: usize) -> (Vec<LiveRow>, usize) {
        let mut rows: Vec<_> = self
            .topic_rows(capture, decoder)
            .into_iter()
            .filter(|r| r.names.is_some() || r.samples > 0)
            .collect();
        let total = rows.len();
        if total > max {
            // Busiest first; among equals, named topics before writers of unknown topics.
            rows.select_nth_unstable_by(max, |a, b| b.samples.cmp(&a.samples).then(b.names.is_some().cmp(&a.names.is_some())));
            rows.truncate(max);
            rows.sort_by(|a, b| b.samples.cmp(&a.samples).then(b.names.is_some().cmp(&a.names.is_some())));
        }
        let now = self.now_rates(now_ns);
        let out = rows.into_iter().map(|r| live_row(r, &now)).collect();
        (out, total - total.min(max))
    }
}

fn live_row(r: TopicRow, now: &HashMap<&str, NowRate>) -> LiveRow {
    let label = r.label();
    let n = now.get(window_key(&label, r.domain).as_str()).copied().unwrap_or(NowRate::SILENT);
    LiveRow { totals: r, label, rate_now_hz: n.hz, rate_now_kind: n.kind, bandwidth_now_bps: n.bps }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Oracle: the number of distinct topics and writers the test sent.
    #[test]
    fn window_and_writers_are_capped_and_counted() {
        use ddscope_core::discovery::TopicNames;
        use ddscope_wire::{EntityId, Guid, GuidPrefix};
        use std::sync::Arc;
        let mut v = LiveTopics::new(TopicsConfig { max_writers: 5, max_live_topics: 3, ..Default::default() });
        for i in 0..10u8 {
            let mut e = SubmsgEvent::blank(Arc::from("cap"));
            e.kind = ddscope_wire::rtps::SubmsgKind::Data;
            e.traffic_type = TrafficType::User;
            e.writer_id = Some(Guid::new(GuidPrefix([i; 12]), EntityId([0, 0, 1, 3])));
            e.sn = Some(1);
            v.on_event(&e);
            let r = SampleRecord {
                capture: Arc::from("cap"),
                writer_id: e.writer_id.unwrap(),
                sn: 1,
                topic: Some(Arc::new(TopicNames::new(&format!("rt/t{i}"), "T"))),
                node: None,
                traffic_type: TrafficType::User,
                first_ts_ns: i as i64 * BUCKET_NS,
                first_ip_ts_ns: 0,
                last_ts_ns: 0,
                complete: true,
                first_frame: 1,
                last_frame: 1,
                sample_size: 10,
                fragment_size: None,
                frags_expected: 1,
                frags_seen: 1,
                submsgs: 1,
                ip_frags: 1,
                bytes: 10,
                retransmitted_frags: 0,
                retransmitted_bytes: 0,
                destinations: 1,
                nack_frags: 0,
                pcp: None,
                vendor_id: 0,
                closed_by: ddscope_core::samples::ClosedBy::Complete,
                source_ts_ns: None,
                dst: None,
                zenoh_zids: None,
            };
            v.on_sample(&r);
        }
        let s = v.stats();
        assert_eq!((s.window_topics, s.window_topics_evicted), (3, 7));
        assert_eq!((s.topics.writers, s.topics.writers_evicted), (5, 5));
        let line = s.summary_line();
        assert!(line.contains("7 writers dropped from the rate window") && line.contains("5 writers"), "{line}");
    }

    /// Oracle: the JSON the live view served before it was written from the
    /// topic row (TopicRowJson, serde-derived), by hand.
    #[test]
    fn live_json_fields_and_values() {
        use ddscope_core::discovery::TopicNames;
        use std::sync::Arc;
        let nodes = |n: usize| (0..n).map(|i| format!("/n{i:02}")).collect::<Vec<_>>();
        let unknown = TopicRow {
            writer_id: Guid::parse_hex("0110aabbccddeeff0011223300000102"),
            writers: 1,
            heartbeats: 3,
            writer_nodes: nodes(17),
            reader_nodes: nodes(18),
            ..Default::default()
        };
        let r = live_row(unknown, &HashMap::new());
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            format!(
                "{{\"topic_name\":\"? writer 0110aabb…00000102\",\"type_name\":\"\",\"domain\":null,\"vendors\":[],\"writers\":1,\"readers\":0,\
                 \"samples\":0,\"incomplete_samples\":0,\"bytes\":0,\"mean_sample_size\":0.0,\"max_sample_size\":0,\"rtps_frags_per_sample\":0.0,\
                 \"ip_frags_per_sample\":0.0,\"retransmitted_fragments\":0,\"sn_gaps\":0,\"heartbeats\":3,\"acknacks\":0,\"nack_frags\":0,\"gaps\":0,\
                 \"writer_nodes\":{w},\"reader_nodes\":{w},\"nodes_not_shown\":3,\"rate_now_hz\":null,\"rate_now_kind\":\"no_samples\",\"bandwidth_now_bps\":0.0}}",
                w = serde_json::to_string(&nodes(MAX_ROW_NODES)).unwrap()
            )
        );
        let named = TopicRow {
            names: Some(Arc::new(TopicNames::new("rt/t", "pkg::msg::dds_::T_"))),
            domain: Some(3),
            vendors: vec![0x0110],
            samples: 4,
            bytes: 4000,
            max_sample_size: 1500,
            rtps_frags: 6,
            ip_frags: 10,
            ..Default::default()
        };
        let mut now = HashMap::new();
        let key = window_key("/t", Some(3));
        now.insert(key.as_str(), NowRate { hz: Some(10.0), kind: RateKind::Steady, bps: 8000.0 });
        let v = serde_json::to_value(live_row(named, &now)).unwrap();
        assert_eq!((&v["topic_name"], &v["type_name"], &v["domain"], &v["vendors"]), (&"/t".into(), &"pkg/msg/T".into(), &3.into(), &serde_json::json!(["0x0110"])));
        assert_eq!((&v["mean_sample_size"], &v["max_sample_size"], &v["rtps_frags_per_sample"], &v["ip_frags_per_sample"]), (&1000.0.into(), &1500.into(), &1.5.into(), &2.5.into()));
        assert_eq!((&v["rate_now_hz"], &v["rate_now_kind"], &v["bandwidth_now_bps"]), (&10.0.into(), &"steady".into(), &8000.0.into()));
    }

    /// Oracle: (n − 1) / (last − first) of the samples in the window, by hand.
    #[test]
    fn window_rate() {
        let mut b = Buckets::default();
        for i in 0..100 {
            // 10 Hz of 1000-byte samples over 10 s, 3 ms of jitter.
            b.add(i * 100_000_000 + (i % 3) * 1_000_000, 1000);
        }
        // the window is seconds 5..9: samples 50..99
        let (t, bytes) = b.window(10 * BUCKET_NS + 1);
        assert_eq!(t.n, 50);
        let want = 49.0 / ((99 * 100_000_000i64) - (50 * 100_000_000i64 + 2_000_000)) as f64 * 1e9;
        assert!((t.rate_hz(None).unwrap() - want).abs() < 1e-9, "{:?}", t.rate_hz(None));
        assert_eq!(bytes * 8 / WINDOW_S as u64, 80_000);
        // a second later, with no new samples: seconds 6..10, 40 samples
        assert_eq!(b.window(11 * BUCKET_NS).0.n, 40);
        // long after: nothing in the window, no rate
        assert_eq!(b.window(30 * BUCKET_NS).0.kind(), RateKind::None);
    }

    /// Two writers of one topic add up; a bursty one does not count.
    #[test]
    fn topic_rate_sums_writers() {
        use ddscope_core::discovery::TopicNames;
        use ddscope_wire::{EntityId, GuidPrefix};
        use std::sync::Arc;
        let mut v = LiveTopics::default();
        let topic = Some(Arc::new(TopicNames::new("rt/t", "T")));
        let rec = |w: u8, ts: i64| SampleRecord {
            capture: Arc::from("cap"),
            writer_id: Guid::new(GuidPrefix([w; 12]), EntityId([0, 0, 1, 3])),
            sn: 1,
            topic: topic.clone(),
            node: None,
            traffic_type: TrafficType::User,
            first_ts_ns: ts,
            first_ip_ts_ns: ts,
            last_ts_ns: ts,
            complete: true,
            first_frame: 1,
            last_frame: 1,
            sample_size: 10,
            fragment_size: None,
            frags_expected: 1,
            frags_seen: 1,
            submsgs: 1,
            ip_frags: 1,
            bytes: 10,
            retransmitted_frags: 0,
            retransmitted_bytes: 0,
            destinations: 1,
            nack_frags: 0,
            pcp: None,
            vendor_id: 0,
            closed_by: ddscope_core::samples::ClosedBy::Complete,
            source_ts_ns: None,
            dst: None,
            zenoh_zids: None,
        };
        for i in 0..200 {
            if i < 100 {
                v.on_sample(&rec(1, i * 100_000_000)); // 10 Hz for 10 s
            }
            v.on_sample(&rec(2, i * 50_000_000 + 1)); // 20 Hz for 10 s
        }
        // the window (seconds 5..9): 49 intervals of 100 ms and 99 of 50 ms
        let r = v.now_rates(10 * BUCKET_NS + 1)["/t"];
        assert_eq!(r.kind, RateKind::Steady);
        assert!((r.hz.unwrap() - 30.0).abs() < 1e-9, "{r:?}");
        // a third writer: a burst, then silence, then two more
        for t in [5_000_000_000i64, 5_001_000_000, 5_002_000_000, 8_000_000_000, 8_001_000_000] {
            v.on_sample(&rec(3, t));
        }
        let r = v.now_rates(10 * BUCKET_NS + 1)["/t"];
        assert_eq!(r.kind, RateKind::Mixed);
        assert!((r.hz.unwrap() - 30.0).abs() < 1e-9, "{r:?}");
    }
}
