//! What `ddscope live` shows per topic: totals since start (from the same
//! `TopicsAnalysis` as `ddscope topics`) and current rate and bandwidth over a
//! sliding window of one-second buckets.
//!
//! Both tables are capped by [`TopicsConfig`] (writers in the analysis,
//! topics in the window), evict the least recently seen entry first and
//! count it ([`LiveStats`]): an agent watching forged traffic stays bounded.

use ddscope_core::bounded::BoundedMap;
use ddscope_core::decode::Decoder;
use ddscope_core::events::{SubmsgEvent, TrafficType};
use ddscope_core::samples::SampleRecord;
use ddscope_core::topics::{TopicRow, TopicsAnalysis, TopicsConfig, TopicsStats};
use std::collections::VecDeque;

const BUCKET_NS: i64 = 1_000_000_000;
/// Seconds the current rate is averaged over.
pub const WINDOW_S: usize = 5;

#[derive(Default, Clone)]
struct Buckets {
    /// (second, samples, bytes)
    b: VecDeque<(i64, u64, u64)>,
}

impl Buckets {
    fn add(&mut self, ts: i64, bytes: u64) {
        let s = ts.div_euclid(BUCKET_NS);
        match self.b.back_mut() {
            Some(last) if last.0 == s => {
                last.1 += 1;
                last.2 += bytes;
            }
            Some(last) if last.0 > s => {
                if let Some(x) = self.b.iter_mut().find(|x| x.0 == s) {
                    x.1 += 1;
                    x.2 += bytes;
                }
            }
            _ => self.b.push_back((s, 1, bytes)),
        }
        while self.b.len() > WINDOW_S + 2 {
            self.b.pop_front();
        }
    }

    /// Rate (Hz) and bandwidth (bit/s) over the last full WINDOW_S seconds before `now`.
    fn rates(&self, now: i64) -> (f64, f64) {
        let cur = now.div_euclid(BUCKET_NS);
        let (mut n, mut bytes) = (0u64, 0u64);
        for (s, c, b) in &self.b {
            if *s < cur && *s >= cur - WINDOW_S as i64 {
                n += c;
                bytes += b;
            }
        }
        (n as f64 / WINDOW_S as f64, bytes as f64 * 8.0 / WINDOW_S as f64)
    }
}

/// Per-topic live statistics of one capture point.
pub struct LiveTopics {
    pub analysis: TopicsAnalysis,
    /// Rate buckets per topic, least recently active first.
    window: BoundedMap<String, Buckets>,
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
    /// Topics in the rate window.
    pub window_topics: usize,
    /// Topics dropped from the rate window (least recently active first):
    /// their current rate restarts from zero if they come back.
    pub window_topics_evicted: u64,
}

impl LiveStats {
    /// What was evicted, if anything (for closing lines, /metrics, the dashboard).
    pub fn problem_line(&self) -> Option<String> {
        let mut parts: Vec<String> = self.topics.problem_line().into_iter().collect();
        if self.window_topics_evicted > 0 {
            parts.push(format!("{} topics dropped from the rate window (too many topics; least recently active first)", self.window_topics_evicted));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// One line: evictions, or that there were none.
    pub fn summary_line(&self) -> String {
        self.problem_line().map_or_else(|| "nothing evicted".to_string(), |l| format!("evicted: {l}"))
    }
}

/// One line of the live table.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LiveRow {
    #[serde(flatten)]
    pub totals: TopicRowJson,
    pub rate_now_hz: f64,
    pub bandwidth_now_bps: f64,
}

/// The totals of a topic as plain JSON-able values.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TopicRowJson {
    pub topic_name: String,
    pub type_name: String,
    /// DDS domain of the row (topics are keyed by (domain, topic)); null when unknown.
    pub domain: Option<u32>,
    pub vendors: Vec<String>,
    pub writers: u64,
    pub readers: u64,
    pub samples: u64,
    pub incomplete_samples: u64,
    pub bytes: u64,
    pub mean_sample_size: f64,
    pub max_sample_size: u32,
    pub rtps_frags_per_sample: f64,
    pub ip_frags_per_sample: f64,
    pub retransmitted_fragments: u64,
    pub sn_gaps: u64,
    pub heartbeats: u64,
    pub acknacks: u64,
    pub nack_frags: u64,
    pub gaps: u64,
    /// ROS nodes owning the topic's writers and readers (from `ros_discovery_info`), at most
    /// [`MAX_ROW_NODES`] each; `nodes_not_shown` counts the rest.
    pub writer_nodes: Vec<String>,
    pub reader_nodes: Vec<String>,
    pub nodes_not_shown: usize,
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

impl TopicRowJson {
    pub fn of(r: &TopicRow) -> Self {
        let per = |x: u64| if r.samples > 0 { x as f64 / r.samples as f64 } else { 0.0 };
        TopicRowJson {
            topic_name: r.names.as_ref().map(|n| n.topic_name.clone()).unwrap_or_else(|| match r.writer_id {
                // Discovery was not captured: name the writer by a short GUID.
                Some(w) => {
                    let g = w.to_string();
                    format!("? writer {}…{}", &g[..8], &g[24..])
                }
                None => "?".into(),
            }),
            type_name: r.names.as_ref().map(|n| n.type_name.clone()).unwrap_or_default(),
            domain: r.domain,
            vendors: r.vendors.clone(),
            writers: r.writers,
            readers: r.readers,
            samples: r.samples,
            incomplete_samples: r.incomplete_samples,
            bytes: r.bytes,
            mean_sample_size: per(r.bytes),
            max_sample_size: r.max_sample_size,
            rtps_frags_per_sample: per(r.rtps_frags),
            ip_frags_per_sample: per(r.ip_frags),
            retransmitted_fragments: r.retransmitted_fragments,
            sn_gaps: r.sn_gaps,
            heartbeats: r.heartbeats,
            acknacks: r.acknacks,
            nack_frags: r.nack_frags,
            gaps: r.gaps,
            writer_nodes: r.writer_nodes.iter().take(MAX_ROW_NODES).cloned().collect(),
            reader_nodes: r.reader_nodes.iter().take(MAX_ROW_NODES).cloned().collect(),
            nodes_not_shown: r.writer_nodes.len().saturating_sub(MAX_ROW_NODES) + r.reader_nodes.len().saturating_sub(MAX_ROW_NODES),
        }
    }
}

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
            let key = match &r.topic {
                Some(t) => window_key(&t.topic_name, t.domain),
                None => {
                    let g = r.writer_id.to_string();
                    format!("? writer {}…{}", &g[..8], &g[24..])
                }
            };
            self.window.get_or_insert_with(key, Buckets::default, &mut |_, _| {}).add(r.first_ts_ns, r.sample_size as u64);
        }
    }

    /// Rows for user topics, with the current window rates (time `now_ns`: wall clock or capture time).
    pub fn rows(&self, capture: &str, decoder: &Decoder, now_ns: i64) -> Vec<LiveRow> {
        self.topic_rows(capture, decoder)
            .iter()
            // Writers of unknown topics that only showed HEARTBEATs/ACKNACKs are noise here.
            .filter(|r| r.names.is_some() || r.samples > 0)
            .map(|r| {
                let t = TopicRowJson::of(r);
                let (rate, bw) = self.window.get(&window_key(&t.topic_name, t.domain)).map(|b| b.rates(now_ns)).unwrap_or((0.0, 0.0));
                LiveRow { totals: t, rate_now_hz: rate, bandwidth_now_bps: bw }
            })
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
        let out = rows
            .iter()
            .map(|r| {
                let t = TopicRowJson::of(r);
                let (rate, bw) = self.window.get(&window_key(&t.topic_name, t.domain)).map(|b| b.rates(now_ns)).unwrap_or((0.0, 0.0));
                LiveRow { totals: t, rate_now_hz: rate, bandwidth_now_bps: bw }
            })
            .collect();
        (out, total - total.min(max))
    }
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
            };
            v.on_sample(&r);
        }
        let s = v.stats();
        assert_eq!((s.window_topics, s.window_topics_evicted), (3, 7));
        assert_eq!((s.topics.writers, s.topics.writers_evicted), (5, 5));
        let line = s.summary_line();
        assert!(line.contains("7 topics dropped from the rate window") && line.contains("5 writers"), "{line}");
    }

    #[test]
    fn window_rate() {
        let mut b = Buckets::default();
        for i in 0..100 {
            // 10 Hz of 1000-byte samples over 10 s.
            b.add(i * 100_000_000, 1000);
        }
        let (hz, bps) = b.rates(10 * BUCKET_NS + 1);
        assert!((hz - 10.0).abs() < 1e-9, "{hz}");
        assert!((bps - 80_000.0).abs() < 1e-6, "{bps}");
    }
}
