//! The caps of every table keyed by the wire, settable in one place.
//!
//! Every analysis keeps its state in bounded tables (see docs/robustness.md);
//! their caps live in the analyses' config structs. [`Limits`] gathers them so
//! that a command can take them from a TOML file and a few overrides, and
//! print them back. The list of settable caps is declared once, in the
//! `limits!` table below: parsing, printing and the key list come from it.
//!
//! ```text
//! [samples]
//! max_open = 65536
//! max_fragment_bytes = "32MiB"
//!
//! [correlation]
//! max_flows = 4096
//! ```
//!
//! Every key is optional (unset keys keep their defaults); an unknown section
//! or key, a zero, a negative number or a value too large for its field is an
//! error naming the key.

use crate::decode::DecoderConfig;
use crate::latency::correlator::CorrelatorConfig;
use crate::ros2::chain::ChainConfig;
use crate::ros2::join::JoinConfig;
use crate::ros2::AssembleConfig;
use crate::samples::SampleConfig;
use crate::topics::TopicsConfig;
use ddscope_traffic::units::Bytes;
use std::fmt::Write as _;

/// The caps of the correlator (the rest of [`CorrelatorConfig`] is chosen per run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorrelationCaps {
    pub max_pending_samples: usize,
    pub max_pending_submessages: usize,
    pub max_writers: usize,
    pub max_flows: usize,
    pub max_flow_bytes: usize,
}

impl Default for CorrelationCaps {
    fn default() -> Self {
        let c = CorrelatorConfig::default();
        CorrelationCaps {
            max_pending_samples: c.max_pending_samples,
            max_pending_submessages: c.max_pending_submessages,
            max_writers: c.max_writers,
            max_flows: c.max_flows,
            max_flow_bytes: c.max_flow_bytes,
        }
    }
}

/// The caps of the ROS 2 layer: the trace assembler's tables, the join's
/// waiting publishes and takes, and the chain tracker's (the rest of
/// [`AssembleConfig`], [`JoinConfig`] and [`ChainConfig`] is chosen per run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceCaps {
    pub max_threads: usize,
    pub max_publishers: usize,
    pub max_publishes: usize,
    pub max_takes: usize,
    pub max_hops: usize,
    pub max_paths: usize,
}

impl Default for TraceCaps {
    fn default() -> Self {
        let (a, j, c) = (AssembleConfig::default(), JoinConfig::default(), ChainConfig::default());
        TraceCaps {
            max_threads: a.max_threads,
            max_publishers: a.max_publishers,
            max_publishes: j.max_publishes,
            max_takes: j.max_takes,
            max_hops: c.max_hops,
            max_paths: c.max_paths,
        }
    }
}

/// The caps of `serve`'s tables keyed by what agents send. The stream
/// decoder: the names agents send (in JSON batches or OTLP spans) are kept in
/// two tables shared by the items that carry them, each capped in entries and
/// bytes, and every name is cut to a length first (monitor's
/// `protocol::ItemDecoder`). Beside it: the samples judged lost (a later
/// sighting of one is late), the agents' rate-limit buckets and the samples
/// whose trace `--export otlp` remembers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamCaps {
    /// Distinct (topic, type) name pairs remembered.
    pub max_topics: usize,
    /// Memory of those names (and, separately, of the writers' entries that refer to them).
    pub max_topic_bytes: usize,
    /// Writers whose topic is remembered (a DATA_FRAG sighting names none).
    pub max_writers: usize,
    /// Longest name kept (topic, type, ROS node, network device): longer ones are cut, marked `…` and counted.
    pub max_name_bytes: usize,
    /// Samples judged lost remembered, to tell a late sighting of one (oldest forgotten first).
    pub max_lost_keys: usize,
    /// Agent names with a rate-limit bucket (least recently seen forgotten first).
    pub max_rate_entries: usize,
    /// Samples whose trace `--export otlp` made, remembered to add later receivers (oldest forgotten first).
    pub max_traced_samples: usize,
}

impl Default for StreamCaps {
    fn default() -> Self {
        StreamCaps {
            max_topics: 16_384,
            max_topic_bytes: 16 << 20,
            max_writers: 65_536,
            max_name_bytes: 256,
            max_lost_keys: 65_536,
            max_rate_entries: 256,
            max_traced_samples: 100_000,
        }
    }
}

/// The caps of `latency --explain` / `--budget` (incidents and their verdicts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExplainCaps {
    /// Samples kept to be judged (about 450 bytes each); later ones are counted, not judged.
    pub max_samples: usize,
    /// Flows (topic, sender, receiver) kept; samples of further flows are counted, not judged.
    pub max_flows: usize,
    /// Bins of each capture's link timeline (16 bytes each); a longer capture merges them in pairs.
    pub max_link_bins: usize,
    /// Per-process load readings kept (16 bytes each) for the CPU evidence; further ones are counted.
    pub max_load_points: usize,
    /// Processes of the per-process load kept; readings of further ones are counted.
    pub max_load_processes: usize,
}

impl Default for ExplainCaps {
    fn default() -> Self {
        let o = crate::latency::explain::ExplainOptions::default();
        ExplainCaps {
            max_samples: o.max_samples,
            max_flows: o.max_flows,
            max_link_bins: crate::pipeline::LinkLoadConfig::default().max_bins,
            max_load_points: 4 << 20,
            max_load_processes: 4096,
        }
    }
}

/// Every cap of the decode → samples → topics → correlation path.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    pub decoder: DecoderConfig,
    pub samples: SampleConfig,
    pub topics: TopicsConfig,
    pub correlation: CorrelationCaps,
    /// Caps of the any-UDP flow analysis (`flows`).
    pub flows: crate::flows::FlowConfig,
    /// Caps of the ROS 2 layer (traces joined to the wire).
    pub trace: TraceCaps,
    /// Caps of `serve`'s tables keyed by what agents send (names, lost samples, rate limits, traced samples).
    pub stream: StreamCaps,
    /// Caps of the incident analysis (`latency --explain`).
    pub explain: ExplainCaps,
    /// Caps of the timeline (`latency --timeline`, serve's `/api/timeline`).
    pub timeline: crate::timeline::TimelineConfig,
}

/// How a key's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A count of entries.
    Count,
    /// A size in bytes; also written with a unit (`"64MiB"`, `"32MB"`).
    Size,
}

/// One settable cap.
#[derive(Debug, Clone, Copy)]
pub struct LimitKey {
    pub section: &'static str,
    pub key: &'static str,
    pub kind: Kind,
    pub doc: &'static str,
}

impl LimitKey {
    /// `section.key`.
    pub fn name(&self) -> String {
        format!("{}.{}", self.section, self.key)
    }
}

/// A limits file or override that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LimitsError {
    #[error("not TOML: {0}")]
    Syntax(String),
    #[error("unknown section [{0}] (known: {1})")]
    UnknownSection(String, String),
    #[error("[{0}] is not a table")]
    NotTable(String),
    #[error("unknown key {0} (known in [{1}]: {2})")]
    UnknownKey(String, String, String),
    #[error("{0}: {1}")]
    BadValue(String, String),
}

macro_rules! limits {
    ($( $section:literal . $key:literal => $($field:ident).+ : $kind:ident, $doc:literal; )*) => {
        /// Every settable cap, in the order they are printed.
        pub const KEYS: &[LimitKey] = &[
            $( LimitKey { section: $section, key: $key, kind: Kind::$kind, doc: $doc }, )*
        ];

        impl Limits {
            /// The current value of `section.key`.
            pub fn get(&self, section: &str, key: &str) -> Option<u64> {
                match (section, key) {
                    $( ($section, $key) => Some(self.$($field).+ as u64), )*
                    _ => None,
                }
            }

            /// Sets `section.key` (`Ok(false)`: no such key).
            fn set_value(&mut self, section: &str, key: &str, v: u64) -> Result<bool, String> {
                match (section, key) {
                    $( ($section, $key) => {
                        self.$($field).+ = v.try_into().map_err(|_| format!("{v} is too large"))?;
                        Ok(true)
                    } )*
                    _ => Ok(false),
                }
            }
        }
    };
}

limits! {
    "ip_reassembly"."max_datagrams" => decoder.reassembly.max_datagrams: Count, "IP datagrams being reassembled at once (oldest dropped first)";
    "ip_reassembly"."max_bytes" => decoder.reassembly.max_bytes: Size, "memory of all datagrams being reassembled";
    "discovery"."max_participants" => decoder.discovery.max_participants: Count, "SPDP participants remembered (least recently announced forgotten first)";
    "discovery"."max_participant_bytes" => decoder.discovery.max_participant_bytes: Size, "memory of the participants (names, locator lists)";
    "discovery"."max_endpoints" => decoder.discovery.max_endpoints: Count, "SEDP writers and readers remembered (least recently announced or used forgotten first)";
    "discovery"."max_endpoint_bytes" => decoder.discovery.max_endpoint_bytes: Size, "memory of the endpoints (topic and type names, partitions, locator lists)";
    "discovery"."max_name_bytes" => decoder.discovery.max_name_bytes: Size, "longest name kept from the wire, DDS or Zenoh (SPDP/SEDP topic, type, partition, entity names; rmw_zenoh namespace, node, topic, type, QoS strings; Zenoh key expressions are cut at twice this); longer ones are cut with a marker and counted";
    "discovery"."max_fragment_sets" => decoder.max_discovery_pending: Count, "discovery samples being reassembled from DATA_FRAG at once";
    "discovery"."max_fragment_bytes" => decoder.max_discovery_bytes: Size, "memory of the discovery samples being reassembled";
    "discovery"."max_sample" => decoder.max_discovery_sample: Size, "largest discovery sample reassembled";
    "ros_graph"."max_participants" => decoder.ros_graph.max_participants: Count, "participants whose ROS nodes are remembered";
    "ros_graph"."max_entities" => decoder.ros_graph.max_entities: Count, "reader and writer gids mapped to their node";
    "ros_graph"."max_bytes" => decoder.ros_graph.max_bytes: Size, "memory of the participants' node lists";
    "zenoh"."max_streams" => decoder.zenoh.max_streams: Count, "Zenoh TCP stream directions followed at once (least recently active dropped first)";
    "zenoh"."max_stream_bytes" => decoder.zenoh.max_stream_bytes: Size, "memory of the Zenoh streams' partial batches";
    "zenoh"."max_keyexprs" => decoder.zenoh.max_keyexprs: Count, "Zenoh key expressions declared by the sessions (least recently used forgotten first)";
    "zenoh"."max_keyexpr_bytes" => decoder.zenoh.max_keyexpr_bytes: Size, "memory of the declared Zenoh key expressions";
    "zenoh"."max_fragmented" => decoder.zenoh.max_fragmented: Count, "fragmented Zenoh messages joined at once (least recently active dropped first)";
    "zenoh"."max_fragment_head" => decoder.zenoh.max_fragment_head: Size, "bytes kept of each fragmented Zenoh message (its head; the rest is counted)";
    "zenoh"."max_tokens" => decoder.zenoh.max_tokens: Count, "rmw_zenoh liveliness tokens remembered (gid to node, topic, type, QoS)";
    "zenoh"."max_token_bytes" => decoder.zenoh.max_token_bytes: Size, "memory of the remembered rmw_zenoh liveliness tokens (oldest forgotten first)";
    "zenoh"."max_sessions" => decoder.zenoh.max_sessions: Count, "Zenoh session directions whose Zenoh id and options are remembered";
    "samples"."max_open" => samples.max_samples: Count, "samples open at once (least recently active closed first, closed_by = evicted)";
    "samples"."max_destinations" => samples.max_destinations: Count, "destinations tracked per sample";
    "samples"."max_fragments" => samples.max_fragments: Count, "fragments of a sample tracked one by one";
    "samples"."max_fragment_bytes" => samples.max_fragment_bytes: Size, "memory of all fragment bitmaps";
    "topics"."max_writers" => topics.max_writers: Count, "writers with per-topic statistics (least recently seen evicted first)";
    "topics"."max_writer_bytes" => topics.max_writer_bytes: Size, "memory of the writers' statistics, their names included";
    "topics"."max_live_topics" => topics.max_live_topics: Count, "writers in the live rate window (live, agent)";
    "correlation"."max_pending_samples" => correlation.max_pending_samples: Count, "samples awaiting judgement (oldest judged early)";
    "correlation"."max_pending_submessages" => correlation.max_pending_submessages: Count, "DATA_FRAGs awaiting judgement (oldest judged early)";
    "correlation"."max_writers" => correlation.max_writers: Count, "writers remembered by the correlator";
    "correlation"."max_flows" => correlation.max_flows: Count, "flows (topic, sender, receiver) with statistics";
    "correlation"."max_flow_bytes" => correlation.max_flow_bytes: Size, "memory of all flows' latency distributions";
    "udp_flows"."max_flows" => flows.max_flows: Count, "UDP flows (5-tuples) measured across capture points (least recently active evicted first)";
    "udp_flows"."max_pending" => flows.max_pending: Count, "UDP datagrams awaiting judgement (oldest evicted first, unjudged)";
    "udp_flows"."max_reorder_span" => flows.max_reorder_span: Count, "receive positions kept per flow and capture point for reordering";
    "trace"."max_threads" => trace.max_threads: Count, "traced threads with an open publish, take or callback (least recently active closed first)";
    "trace"."max_publishers" => trace.max_publishers: Count, "publishers whose publishes are counted for the publish-order join";
    "trace"."max_publishes" => trace.max_publishes: Count, "traced publishes waiting for their wire sample (oldest judged early)";
    "trace"."max_takes" => trace.max_takes: Count, "traced takes waiting for their wire sample (oldest judged early)";
    "trace"."max_hops" => trace.max_hops: Count, "chain hops waiting for the next hop (oldest closed first)";
    "trace"."max_paths" => trace.max_paths: Count, "distinct topic chains found and measured";
    "stream"."max_topics" => stream.max_topics: Count, "serve: distinct (topic, type) names from the agents remembered (least recently used forgotten first)";
    "stream"."max_topic_bytes" => stream.max_topic_bytes: Size, "serve: memory of those names, and of the writers' entries naming them";
    "stream"."max_writers" => stream.max_writers: Count, "serve: writers whose topic is remembered for their DATA_FRAG sightings";
    "stream"."max_name_bytes" => stream.max_name_bytes: Size, "serve: longest topic, type, node or device name kept (longer ones cut, marked and counted)";
    "stream"."max_lost_keys" => stream.max_lost_keys: Count, "serve: samples judged lost remembered to tell a late sighting of one (oldest forgotten first)";
    "stream"."max_rate_entries" => stream.max_rate_entries: Count, "serve: agent names with a rate-limit bucket (least recently seen forgotten first)";
    "stream"."max_traced_samples" => stream.max_traced_samples: Count, "serve --export otlp: samples whose trace is remembered to add later receivers (oldest forgotten first)";
    "explain"."max_samples" => explain.max_samples: Count, "latency --explain/--budget: samples kept to be judged (later ones counted, not judged)";
    "explain"."max_flows" => explain.max_flows: Count, "latency --explain/--budget: flows (topic, sender, receiver) judged (samples of further flows counted, not judged)";
    "explain"."max_link_bins" => explain.max_link_bins: Count, "latency --explain/--budget: bins of each capture's link timeline, 16 bytes each (a longer capture merges them in pairs: coarser, never dropped)";
    "explain"."max_load_points" => explain.max_load_points: Count, "latency --explain/--budget: per-process load readings kept for the CPU evidence, 16 bytes each (further ones counted, not read)";
    "explain"."max_load_processes" => explain.max_load_processes: Count, "latency --explain/--budget: processes of the per-process load kept (readings of further ones counted)";
    "timeline"."max_rows" => timeline.max_rows: Count, "latency/report --timeline: rows (a sample at a receiver) drawn, about 300 bytes each (later rows counted, not drawn)";
    "timeline"."serve_rows" => timeline.serve_rows: Count, "serve /api/timeline: the latest rows kept, about 300 bytes each (the oldest forgotten first)";
}

fn sections() -> Vec<&'static str> {
    let mut s: Vec<&'static str> = KEYS.iter().map(|k| k.section).collect();
    s.dedup();
    s
}

fn keys_of(section: &str) -> String {
    KEYS.iter().filter(|k| k.section == section).map(|k| k.key).collect::<Vec<_>>().join(", ")
}

/// Input quoted in an error: escaped, at most 200 characters of it.
fn quoted(s: &str) -> String {
    ddscope_traffic::text::excerpt(s, ddscope_traffic::text::EXCERPT_CHARS)
}

fn value(k: &LimitKey, v: &toml::Value) -> Result<u64, String> {
    let n = match v {
        toml::Value::Integer(i) => u64::try_from(*i).map_err(|_| format!("{i} is negative"))?,
        toml::Value::String(s) if k.kind == Kind::Size => {
            s.parse::<Bytes>().map_err(|e| quoted(&e.to_string()))?.0
        }
        toml::Value::String(s) => s.trim().parse::<u64>().map_err(|_| format!("{} is not a whole number", quoted(&format!("{s:?}"))))?,
        other => return Err(format!("expected a number, found {}", other.type_str())),
    };
    if n == 0 {
        return Err("must be at least 1".into());
    }
    Ok(n)
}

impl Limits {
    /// The defaults with the caps of a limits file applied.
    pub fn parse(text: &str) -> Result<Limits, LimitsError> {
        let mut l = Limits::default();
        l.apply_toml(text)?;
        Ok(l)
    }

    /// Applies the caps a limits file sets; the others are unchanged.
    pub fn apply_toml(&mut self, text: &str) -> Result<(), LimitsError> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| LimitsError::Syntax(quoted(e.message())))?;
        for (section, body) in &table {
            if !sections().contains(&section.as_str()) {
                return Err(LimitsError::UnknownSection(quoted(section), sections().join(", ")));
            }
            let body = body.as_table().ok_or_else(|| LimitsError::NotTable(quoted(section)))?;
            for (key, v) in body {
                self.set_toml(section, key, v)?;
            }
        }
        Ok(())
    }

    fn set_toml(&mut self, section: &str, key: &str, v: &toml::Value) -> Result<(), LimitsError> {
        let k = KEYS
            .iter()
            .find(|k| k.section == section && k.key == key)
            .ok_or_else(|| LimitsError::UnknownKey(quoted(&format!("{section}.{key}")), section.to_string(), keys_of(section)))?;
        let n = value(k, v).map_err(|e| LimitsError::BadValue(k.name(), e))?;
        self.set_value(section, key, n).map_err(|e| LimitsError::BadValue(k.name(), e))?;
        Ok(())
    }

    /// Sets one cap by its `section.key` name.
    pub fn set(&mut self, name: &str, v: u64) -> Result<(), LimitsError> {
        let (section, key) = name.split_once('.').unwrap_or(("", name));
        self.set_toml(section, key, &toml::Value::Integer(i64::try_from(v).unwrap_or(i64::MAX)))
    }

    /// The caps as a limits file (every key, with its meaning), which
    /// [`Limits::parse`] reads back to the same caps.
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        let mut section = "";
        for k in KEYS {
            if k.section != section {
                if !section.is_empty() {
                    out.push('\n');
                }
                section = k.section;
                let _ = writeln!(out, "[{section}]");
            }
            let v = self.get(k.section, k.key).unwrap_or(0);
            let _ = writeln!(out, "{} = {v}  # {}{}", k.key, k.doc, if k.kind == Kind::Size { " (bytes)" } else { "" });
        }
        out
    }

    /// `base` with the correlator caps of these limits (its ROS 2 join and chains too).
    pub fn correlator(&self, mut base: CorrelatorConfig) -> CorrelatorConfig {
        let c = &self.correlation;
        let t = &self.trace;
        base.ros.join.max_publishes = t.max_publishes;
        base.ros.join.max_takes = t.max_takes;
        base.ros.chain.max_hops = t.max_hops;
        base.ros.chain.max_paths = t.max_paths;
        CorrelatorConfig {
            max_pending_samples: c.max_pending_samples,
            max_pending_submessages: c.max_pending_submessages,
            max_writers: c.max_writers,
            max_flows: c.max_flows,
            max_flow_bytes: c.max_flow_bytes,
            ..base
        }
    }

    /// The trace assembler's caps, with `max_open_ns` (chosen per run).
    pub fn assembler(&self, max_open_ns: i64) -> AssembleConfig {
        AssembleConfig { max_threads: self.trace.max_threads, max_publishers: self.trace.max_publishers, max_open_ns }
    }

    /// The sample tracker's caps with another inactivity timeout (the
    /// correlation uses a timeout derived from its window).
    pub fn samples_with_timeout(&self, timeout_ns: i64) -> SampleConfig {
        SampleConfig { timeout_ns, ..self.samples }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip_through_the_printed_file() {
        let d = Limits::default();
        let back = Limits::parse(&d.to_toml()).unwrap();
        for k in KEYS {
            assert_eq!(back.get(k.section, k.key), d.get(k.section, k.key), "{}", k.name());
        }
    }

    #[test]
    fn every_key_reaches_its_field() {
        // Setting each key to a distinct value changes exactly that key.
        for (i, k) in KEYS.iter().enumerate() {
            let mut l = Limits::default();
            let v = 1000 + i as u64;
            l.set(&k.name(), v).unwrap();
            assert_eq!(l.get(k.section, k.key), Some(v), "{}", k.name());
            let d = Limits::default();
            for o in KEYS.iter().filter(|o| o.name() != k.name()) {
                assert_eq!(l.get(o.section, o.key), d.get(o.section, o.key), "{} changed {}", k.name(), o.name());
            }
        }
        let mut l = Limits::default();
        l.set("topics.max_writers", 7).unwrap();
        assert_eq!(l.topics.max_writers, 7);
        l.set("correlation.max_flows", 9).unwrap();
        assert_eq!(l.correlator(CorrelatorConfig::default()).max_flows, 9);
    }

    #[test]
    fn sizes_take_units_and_bad_values_name_the_key() {
        let l = Limits::parse("[samples]\nmax_fragment_bytes = \"2MiB\"\nmax_open = 10\n").unwrap();
        assert_eq!(l.samples.max_fragment_bytes, 2 << 20);
        assert_eq!(l.samples.max_samples, 10);
        let e = Limits::parse("[samples]\nmax_open = 0\n").unwrap_err();
        assert_eq!(e.to_string(), "samples.max_open: must be at least 1");
        let e = Limits::parse("[samples]\nmax_open = \"2MiB\"\n").unwrap_err();
        assert!(e.to_string().starts_with("samples.max_open: "), "{e}");
        let e = Limits::parse("[samples]\nmax_fragments = 5000000000\n").unwrap_err();
        assert_eq!(e.to_string(), "samples.max_fragments: 5000000000 is too large");
        let e = Limits::parse("[samples]\nmax_open = -3\n").unwrap_err();
        assert_eq!(e.to_string(), "samples.max_open: -3 is negative");
        let e = Limits::parse("[sample]\nmax_open = 3\n").unwrap_err();
        assert!(matches!(e, LimitsError::UnknownSection(..)), "{e}");
        let e = Limits::parse("[topics]\nmax_writer = 3\n").unwrap_err();
        assert!(e.to_string().contains("topics.max_writer") && e.to_string().contains("max_writers"), "{e}");
        assert!(matches!(Limits::parse("[topics\n"), Err(LimitsError::Syntax(_))));
        assert!(matches!(Limits::parse("topics = 3\n"), Err(LimitsError::NotTable(_))));
    }
}
