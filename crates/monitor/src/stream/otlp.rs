//! The agent's stream as OTLP, for scale-out behind an OpenTelemetry
//! Collector (docs/scale-out.md).
//!
//! Each sample sighting and DATA_FRAG sighting becomes one span whose trace
//! id is derived from the sample's identity (writer GUID, sn) with
//! [`ddscope_export::ids::sample_trace_id`], so every host's sighting of one
//! sample carries the same trace id and the Collector's load-balancing
//! exporter (`routing_key: traceID`) sends them all to the same `serve`
//! shard. Everything a shard needs to rebuild the correlator's item is in the
//! span's attributes (`dds.*`, `ddscope.*`); the span's start and end are the
//! sighting's first and last capture times.
//!
//! Everything else in an agent batch — its watermark, sequence number, the
//! items it dropped, its end, the topic table, counters and system metrics —
//! is one OTLP log record per batch (`body = "ddscope.batch"`), which the
//! Collector sends to *every* shard (a logs pipeline listing all shards'
//! exporters), so each shard's correlator knows every agent's watermark.

use crate::stream::protocol::{Batch, MetricSample, StreamFrag, StreamItem, StreamSample};
use ddscope_wire::Guid;
use bytes::Bytes;
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsPartialSuccess, ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

pub const TRACES_PATH: &str = "/v1/traces";
pub const LOGS_PATH: &str = "/v1/logs";
/// Resource attribute naming the agent (its `--name`, the capture point).
pub const AGENT_ATTR: &str = "ddscope.agent";
pub const SAMPLE_SPAN: &str = "dds.sample";
pub const FRAG_SPAN: &str = "dds.frag";
pub const BATCH_LOG: &str = "ddscope.batch";
/// Resource attribute of the sightings' spans and attribute of the batch
/// record: the agent batch's sequence number. A shard holds an agent's
/// watermark of batch k until it has a sighting of a later batch (or a
/// wall-time hold expired): docs/scale-out.md, "The hold".
pub const SEQ_ATTR: &str = "ddscope.seq";
const SCOPE: &str = "ddscope.sightings";

fn kv(key: &str, v: any_value::Value) -> KeyValue {
    KeyValue { key: key.to_string(), value: Some(AnyValue { value: Some(v) }), ..Default::default() }
}
fn s(key: &str, v: impl Into<String>) -> KeyValue {
    kv(key, any_value::Value::StringValue(v.into()))
}
fn i(key: &str, v: i64) -> KeyValue {
    kv(key, any_value::Value::IntValue(v))
}
fn bo(key: &str, v: bool) -> KeyValue {
    kv(key, any_value::Value::BoolValue(v))
}

fn resource(agent: &str) -> Resource {
    Resource {
        attributes: vec![s("service.name", "ddscope-agent"), s("service.instance.id", agent), s(AGENT_ATTR, agent)],
        ..Default::default()
    }
}

fn scope() -> InstrumentationScope {
    InstrumentationScope { name: SCOPE.into(), version: env!("CARGO_PKG_VERSION").into(), ..Default::default() }
}

/// FNV-1a over the sighting's identity at this agent: a span id unique per (agent, sighting).
fn span_id(agent: &str, kind: u8, trace: &[u8; 16], frag: u32) -> Vec<u8> {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for x in agent.as_bytes().iter().chain([kind].iter()).chain(trace.iter()).chain(frag.to_be_bytes().iter()) {
        h ^= *x as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h.max(1).to_be_bytes().to_vec()
}

fn trace_id(w: &str, sn: i64) -> Option<[u8; 16]> {
    Guid::parse_hex(w).map(|g| ddscope_export::ids::sample_trace_id(&g, sn))
}

fn sample_span(agent: &str, x: &StreamSample) -> Option<Span> {
    let tid = trace_id(&x.w, x.sn)?;
    let mut a = vec![s("dds.writer_guid", x.w.clone()), i("dds.sn", x.sn)];
    if let Some((t, ty)) = &x.topic {
        a.push(s("dds.topic_raw", t.clone()));
        a.push(s("dds.type_raw", ty.clone()));
    }
    a.extend([
        i("ddscope.traffic_type", x.tt as i64),
        i("ddscope.first_ip_ts_ns", x.first_ip),
        bo("ddscope.complete", x.complete),
        i("dds.sample_size", x.size as i64),
        i("ddscope.frags_expected", x.fexp as i64),
        i("ddscope.frags_seen", x.fseen as i64),
        i("ddscope.ip_frags", x.ipf as i64),
        i("ddscope.retransmitted_frags", x.retx as i64),
        i("ddscope.retransmitted_bytes", x.retx_bytes as i64),
        i("dds.vendor_id", x.vendor as i64),
    ]);
    if let Some(f) = x.fsize {
        a.push(i("dds.fragment_size", f as i64));
    }
    if let Some(p) = x.pcp {
        a.push(i("ddscope.pcp", p as i64));
    }
    if x.supp != 0 {
        a.push(i("ddscope.supplement", x.supp as i64));
    }
    if let Some(t) = x.sts {
        a.push(i("dds.source_ts_ns", t));
    }
    if let Some((from, to)) = x.z {
        // the keys' bits as OTLP's signed integers
        a.push(i("zenoh.session_from", from as i64));
        a.push(i("zenoh.session_to", to as i64));
    }
    Some(Span {
        trace_id: tid.to_vec(),
        span_id: span_id(agent, 1, &tid, 0),
        name: SAMPLE_SPAN.into(),
        kind: 1, // internal
        start_time_unix_nano: x.first as u64,
        end_time_unix_nano: x.last as u64,
        attributes: a,
        ..Default::default()
    })
}

/// The topic of each writer, learned from the agent's sample records in the
/// order they are sent: DATA_FRAG sightings carry no topic in the agent's
/// stream (one `serve` learns it from the writer's earlier records), but a
/// shard may not have seen any earlier record of the writer, so the encoder
/// names the topic on every fragment span. Bounded (least recently used
/// writers forgotten; a forgotten writer's next record names it again).
pub struct TopicMemo(ddscope_core::bounded::BoundedMap<String, (String, String)>);

impl Default for TopicMemo {
    fn default() -> Self {
        TopicMemo(ddscope_core::bounded::BoundedMap::new(crate::stream::protocol::MAX_STREAM_WRITERS))
    }
}

fn frag_span(agent: &str, f: &StreamFrag, topic: Option<&(String, String)>) -> Option<Span> {
    let tid = trace_id(&f.w, f.sn)?;
    let mut attributes = vec![s("dds.writer_guid", f.w.clone()), i("dds.sn", f.sn), i("dds.fragment_starting_num", f.frag as i64)];
    if let Some((t, ty)) = topic {
        attributes.push(s("dds.topic_raw", t.clone()));
        attributes.push(s("dds.type_raw", ty.clone()));
    }
    Some(Span {
        trace_id: tid.to_vec(),
        span_id: span_id(agent, 2, &tid, f.frag),
        name: FRAG_SPAN.into(),
        kind: 1,
        start_time_unix_nano: f.first_ip as u64,
        end_time_unix_nano: f.last as u64,
        attributes,
        ..Default::default()
    })
}

/// One agent batch as OTLP: the sightings as spans (routed by trace id) and
/// the batch's metadata with its latest watermark as one log record
/// (broadcast). Items that have no OTLP form here (ROS 2 trace items, a
/// sighting with a malformed GUID) are counted in the second value.
pub fn encode(b: &Batch, memo: &mut TopicMemo) -> (ExportTraceServiceRequest, ExportLogsServiceRequest, u64) {
    let mut spans = Vec::with_capacity(b.items.len());
    let mut watermark = None;
    let mut skipped = 0u64;
    for it in &b.items {
        let sp = match it {
            StreamItem::Sample(x) => {
                if let Some(t) = &x.topic {
                    memo.0.insert(x.w.clone(), t.clone(), &mut |_, _| {});
                }
                sample_span(&b.agent, x)
            }
            StreamItem::Frag(f) => frag_span(&b.agent, f, memo.0.get_touch(&f.w).map(|t| &*t)),
            StreamItem::Watermark { t } => {
                watermark = Some(watermark.map_or(*t, |w: i64| w.max(*t)));
                continue;
            }
            // Trace items and clock evidence travel on the JSON stream only: a shard behind the
            // Collector sees the samples routed to it, not the exchanges another shard's samples need.
            StreamItem::Publish(_) | StreamItem::Take(_) | StreamItem::TraceWatermark { .. } | StreamItem::Exchange(_) => None,
        };
        match sp {
            Some(sp) => spans.push(sp),
            None => skipped += 1,
        }
    }
    let traces = ExportTraceServiceRequest {
        resource_spans: if spans.is_empty() {
            vec![]
        } else {
            vec![ResourceSpans {
                resource: Some({
                    let mut r = resource(&b.agent);
                    r.attributes.push(i(SEQ_ATTR, b.seq as i64));
                    r
                }),
                scope_spans: vec![ScopeSpans { scope: Some(scope()), spans, ..Default::default() }],
                ..Default::default()
            }]
        },
    };
    let mut a = vec![i(SEQ_ATTR, b.seq as i64), i("ddscope.dropped_items", b.dropped_items as i64), bo("ddscope.last", b.last)];
    if let Some(w) = watermark {
        a.push(i("ddscope.watermark_ns", w));
    }
    let json = |k: &str, v: &serde_json::Value| s(k, serde_json::to_string(v).unwrap_or_default());
    if let Some(t) = &b.topics {
        a.push(json("ddscope.topics", t));
    }
    if let Some(c) = &b.counters {
        a.push(json("ddscope.counters", c));
    }
    if !b.system.is_empty() {
        a.push(s("ddscope.system", serde_json::to_string(&b.system).unwrap_or_default()));
    }
    let logs = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource(&b.agent)),
            scope_logs: vec![ScopeLogs {
                scope: Some(scope()),
                log_records: vec![LogRecord {
                    time_unix_nano: b.sent_ns as u64,
                    observed_time_unix_nano: b.sent_ns as u64,
                    body: Some(AnyValue { value: Some(any_value::Value::StringValue(BATCH_LOG.into())) }),
                    attributes: a,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    (traces, logs, skipped)
}

/// Both request bodies, protobuf-encoded, in the order they must leave.
pub fn encode_bodies(b: &Batch, memo: &mut TopicMemo) -> (Vec<u8>, Vec<u8>, u64) {
    let (t, l, skipped) = encode(b, memo);
    (t.encode_to_vec(), l.encode_to_vec(), skipped)
}

type Attrs<'a> = BTreeMap<&'a str, &'a any_value::Value>;

fn attrs(kvs: &[KeyValue]) -> Attrs<'_> {
    kvs.iter().filter_map(|k| Some((k.key.as_str(), k.value.as_ref()?.value.as_ref()?))).collect()
}

fn get_i(a: &Attrs, k: &str) -> Option<i64> {
    match a.get(k)? {
        any_value::Value::IntValue(v) => Some(*v),
        _ => None,
    }
}
fn get_s<'a>(a: &Attrs<'a>, k: &str) -> Option<&'a str> {
    match a.get(k)? {
        any_value::Value::StringValue(v) => Some(v.as_str()),
        _ => None,
    }
}
fn get_b(a: &Attrs, k: &str) -> Option<bool> {
    match a.get(k)? {
        any_value::Value::BoolValue(v) => Some(*v),
        _ => None,
    }
}

fn need_i(a: &Attrs, k: &str) -> Result<i64, String> {
    get_i(a, k).ok_or_else(|| format!("span attribute {k} missing or not an integer"))
}

/// The agent batch a group of sightings came in (0: not said).
fn seq_of(r: &Option<Resource>) -> u64 {
    let a = r.as_ref().map(|r| attrs(&r.attributes)).unwrap_or_default();
    get_i(&a, SEQ_ATTR).map_or(0, |v| v.max(0) as u64)
}

fn agent_of(r: &Option<Resource>) -> Result<String, String> {
    let a = r.as_ref().map(|r| attrs(&r.attributes)).unwrap_or_default();
    get_s(&a, AGENT_ATTR).map(str::to_string).ok_or_else(|| format!("resource attribute {AGENT_ATTR} missing"))
}

fn u32_of(v: i64, k: &str) -> Result<u32, String> {
    u32::try_from(v).map_err(|_| format!("{k} = {v} out of range"))
}

fn item_of(sp: &Span) -> Result<StreamItem, String> {
    let a = attrs(&sp.attributes);
    let w = get_s(&a, "dds.writer_guid").ok_or("span attribute dds.writer_guid missing")?.to_string();
    let sn = need_i(&a, "dds.sn")?;
    match sp.name.as_str() {
        SAMPLE_SPAN => {
            let topic = match (get_s(&a, "dds.topic_raw"), get_s(&a, "dds.type_raw")) {
                (Some(t), Some(ty)) => Some((t.to_string(), ty.to_string())),
                _ => None,
            };
            Ok(StreamItem::Sample(StreamSample {
                w,
                sn,
                topic,
                tt: u8::try_from(need_i(&a, "ddscope.traffic_type")?).map_err(|_| "ddscope.traffic_type out of range")?,
                first: sp.start_time_unix_nano as i64,
                first_ip: need_i(&a, "ddscope.first_ip_ts_ns")?,
                last: sp.end_time_unix_nano as i64,
                complete: get_b(&a, "ddscope.complete").ok_or("span attribute ddscope.complete missing")?,
                size: u32_of(need_i(&a, "dds.sample_size")?, "dds.sample_size")?,
                fsize: get_i(&a, "dds.fragment_size").map(|v| u16::try_from(v).map_err(|_| "dds.fragment_size out of range")).transpose()?,
                fexp: u32_of(need_i(&a, "ddscope.frags_expected")?, "ddscope.frags_expected")?,
                fseen: u32_of(need_i(&a, "ddscope.frags_seen")?, "ddscope.frags_seen")?,
                ipf: u32_of(need_i(&a, "ddscope.ip_frags")?, "ddscope.ip_frags")?,
                retx: u32_of(need_i(&a, "ddscope.retransmitted_frags")?, "ddscope.retransmitted_frags")?,
                retx_bytes: need_i(&a, "ddscope.retransmitted_bytes")?.max(0) as u64,
                pcp: get_i(&a, "ddscope.pcp").map(|v| u8::try_from(v).map_err(|_| "ddscope.pcp out of range")).transpose()?,
                vendor: u16::try_from(need_i(&a, "dds.vendor_id")?).map_err(|_| "dds.vendor_id out of range")?,
                supp: get_i(&a, "ddscope.supplement").map(|v| u8::try_from(v).map_err(|_| "ddscope.supplement out of range")).transpose()?.unwrap_or(0),
                sts: get_i(&a, "dds.source_ts_ns"),
                z: match (get_i(&a, "zenoh.session_from"), get_i(&a, "zenoh.session_to")) {
                    (Some(f), Some(t)) => Some((f as u64, t as u64)),
                    _ => None,
                },
            }))
        }
        FRAG_SPAN => Ok(StreamItem::Frag(StreamFrag {
            w,
            sn,
            frag: u32_of(need_i(&a, "dds.fragment_starting_num")?, "dds.fragment_starting_num")?,
            first_ip: sp.start_time_unix_nano as i64,
            last: sp.end_time_unix_nano as i64,
            topic: match (get_s(&a, "dds.topic_raw"), get_s(&a, "dds.type_raw")) {
                (Some(t), Some(ty)) => Some((t.to_string(), ty.to_string())),
                _ => None,
            },
        })),
        other => Err(format!("span {other:?} is not a ddscope sighting")),
    }
}

/// What one OTLP request decodes to: per agent, its items in request order
/// (for sightings, `seq` is the agent batch they came in, from the resource's
/// [`SEQ_ATTR`]; 0 when the sender did not say), and the spans refused with
/// the first reason.
#[derive(Debug, Default)]
pub struct DecodedSpans {
    pub batches: Vec<Batch>,
    pub bad_spans: u64,
    pub first_error: Option<String>,
}

fn data_batch(agent: String) -> Batch {
    Batch { agent, seq: 0, sent_ns: 0, items: vec![], dropped_items: 0, topics: None, system: vec![], counters: None, last: false }
}

/// Decodes an OTLP traces request one span at a time: only one span (or
/// resource) is ever materialised as protobuf structures, and only the
/// items made of them are kept, so what a request costs is its items, not
/// its spans' decoded form (an empty span is 2 bytes on the wire, a ~250-byte
/// `Span` decoded; see `crate::server::prescan`). A span that does not decode is
/// refused and counted like a foreign one; a request whose framing is broken
/// is refused whole.
pub fn decode_traces(body: &[u8]) -> Result<DecodedSpans, String> {
    use crate::stream::protobuf::next_field;
    let bad = |e: String| format!("bad OTLP traces request: {e}");
    let mut out = DecodedSpans::default();
    let note = |out: &mut DecodedSpans, e: String, n: u64| {
        out.bad_spans += n;
        out.first_error.get_or_insert(e);
    };
    let mut at = 0;
    while at < body.len() {
        let (n, wt, rs) = next_field(body, &mut at).map_err(bad)?;
        if (n, wt) != (1, 2) {
            continue;
        }
        // The resource may come after the spans; repeated occurrences merge, as prost merges them.
        let mut resource: Option<Resource> = None;
        let mut spans: Vec<&[u8]> = vec![];
        let mut a = 0;
        while a < rs.len() {
            let (n, wt, f) = next_field(rs, &mut a).map_err(bad)?;
            match (n, wt) {
                (1, 2) => resource.get_or_insert_with(Resource::default).merge(f).map_err(|e| bad(e.to_string()))?,
                (2, 2) => {
                    let mut b = 0;
                    while b < f.len() {
                        let (n, wt, sp) = next_field(f, &mut b).map_err(bad)?;
                        if (n, wt) == (2, 2) {
                            spans.push(sp);
                        }
                    }
                }
                _ => {}
            }
        }
        let agent = match agent_of(&resource) {
            Ok(a) => a,
            Err(e) => {
                note(&mut out, e, spans.len() as u64);
                continue;
            }
        };
        let mut b = data_batch(agent);
        b.seq = seq_of(&resource);
        drop(resource);
        for sp in spans {
            match Span::decode(sp) {
                Ok(sp) => match item_of(&sp) {
                    Ok(it) => b.items.push(it),
                    Err(e) => note(&mut out, e, 1),
                },
                Err(e) => note(&mut out, format!("bad span: {e}"), 1),
            }
        }
        if !b.items.is_empty() {
            out.batches.push(b);
        }
    }
    Ok(out)
}

/// The batch log records as batches (watermark, metadata); records that are
/// not ddscope's are counted in `bad_spans`.
pub fn decode_logs(req: &ExportLogsServiceRequest) -> DecodedSpans {
    let mut out = DecodedSpans::default();
    for rl in &req.resource_logs {
        let n: u64 = rl.scope_logs.iter().map(|s| s.log_records.len() as u64).sum();
        let agent = match agent_of(&rl.resource) {
            Ok(a) => a,
            Err(e) => {
                out.bad_spans += n;
                out.first_error.get_or_insert(e);
                continue;
            }
        };
        for sl in &rl.scope_logs {
            for r in &sl.log_records {
                match batch_of_log(&agent, r) {
                    Ok(b) => out.batches.push(b),
                    Err(e) => {
                        out.bad_spans += 1;
                        out.first_error.get_or_insert(e);
                    }
                }
            }
        }
    }
    out
}

fn batch_of_log(agent: &str, r: &LogRecord) -> Result<Batch, String> {
    let is_batch = matches!(r.body.as_ref().and_then(|b| b.value.as_ref()), Some(any_value::Value::StringValue(v)) if v == BATCH_LOG);
    if !is_batch {
        return Err("a log record that is not a ddscope batch".into());
    }
    let a = attrs(&r.attributes);
    let seq = need_i(&a, SEQ_ATTR)?;
    if seq < 1 {
        return Err(format!("ddscope.seq = {seq}: batches count from 1"));
    }
    let json = |k: &str| -> Result<Option<serde_json::Value>, String> {
        get_s(&a, k).map(|t| serde_json::from_str(t).map_err(|e| format!("{k}: {e}"))).transpose()
    };
    let system: Vec<MetricSample> = match get_s(&a, "ddscope.system") {
        Some(t) => serde_json::from_str(t).map_err(|e| format!("ddscope.system: {e}"))?,
        None => vec![],
    };
    Ok(Batch {
        agent: agent.to_string(),
        seq: seq as u64,
        sent_ns: r.time_unix_nano as i64,
        items: get_i(&a, "ddscope.watermark_ns").map(|t| StreamItem::Watermark { t }).into_iter().collect(),
        dropped_items: get_i(&a, "ddscope.dropped_items").unwrap_or(0).max(0) as u64,
        topics: json("ddscope.topics")?,
        system,
        counters: json("ddscope.counters")?,
        last: get_b(&a, "ddscope.last").unwrap_or(false),
    })
}

/// One agent batch record (watermark, end) a shard holds back until the
/// sightings sent before it are in (docs/scale-out.md, "The hold").
#[derive(Debug, Clone, PartialEq)]
pub struct HeldRecord {
    pub seq: u64,
    pub watermark: Option<i64>,
    pub last: bool,
    pub arrived: Instant,
}

/// What the hold of one agent did, and the pipeline skew it observed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HoldStats {
    /// Batch records held (every record is; with a zero hold it leaves at once).
    pub held: u64,
    /// Released because a sighting of a later batch of the agent arrived.
    pub released_by_spans: u64,
    /// Released because the hold expired (no later sighting came to this shard).
    pub released_by_time: u64,
    /// Folded into the next held record because the agent had the most
    /// records held at once (their watermarks take effect with the next one).
    pub evicted: u64,
    /// Sightings that arrived after their time was judged: counted, not fed.
    pub late_sightings: u64,
    /// Batches whose record and first sighting both arrived here.
    pub skew_batches: u64,
    /// First sighting minus record arrival, ms: positive when the traces
    /// pipeline is behind the logs pipeline.
    pub skew_last_ms: f64,
    pub skew_min_ms: f64,
    pub skew_max_ms: f64,
    pub skew_sum_ms: f64,
    /// Batches whose sightings came more than the window after their record.
    pub skew_over_window: u64,
    /// Sums that would have passed 2^64 − 1 when adding shards' counters (saturated there).
    pub saturated: u64,
}

impl HoldStats {
    fn skew(&mut self, ms: f64, window_ms: f64) {
        if self.skew_batches == 0 {
            self.skew_min_ms = ms;
            self.skew_max_ms = ms;
        }
        self.skew_batches += 1;
        self.skew_last_ms = ms;
        self.skew_min_ms = self.skew_min_ms.min(ms);
        self.skew_max_ms = self.skew_max_ms.max(ms);
        self.skew_sum_ms += ms;
        if ms > window_ms {
            self.skew_over_window += 1;
        }
    }

    /// Adds another agent's (or shard's) counters; the skew's extremes are kept.
    pub fn add(&mut self, o: &HoldStats) {
        if o.skew_batches > 0 {
            if self.skew_batches == 0 {
                self.skew_min_ms = o.skew_min_ms;
                self.skew_max_ms = o.skew_max_ms;
            }
            self.skew_min_ms = self.skew_min_ms.min(o.skew_min_ms);
            self.skew_max_ms = self.skew_max_ms.max(o.skew_max_ms);
            self.skew_last_ms = o.skew_last_ms;
        }
        // Saturating: a shard's numbers are not trusted to add up (counted in `saturated`).
        let mut n = 0u64;
        for (a, b) in [
            (&mut self.held, o.held),
            (&mut self.released_by_spans, o.released_by_spans),
            (&mut self.released_by_time, o.released_by_time),
            (&mut self.evicted, o.evicted),
            (&mut self.late_sightings, o.late_sightings),
            (&mut self.skew_batches, o.skew_batches),
            (&mut self.skew_over_window, o.skew_over_window),
        ] {
            *a = a.checked_add(b).unwrap_or_else(|| {
                n += 1;
                u64::MAX
            });
        }
        self.skew_sum_ms += o.skew_sum_ms;
        self.saturated = self.saturated.saturating_add(n);
    }

    /// The counters back from [`to_json`](Self::to_json) (a shard's summaries; missing fields are 0).
    pub fn from_json(v: &serde_json::Value) -> Self {
        let u = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
        let f = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
        let k = &v["skew"];
        HoldStats {
            held: u(&v["held"]),
            released_by_spans: u(&v["released_by_spans"]),
            released_by_time: u(&v["released_by_time"]),
            evicted: u(&v["evicted"]),
            late_sightings: u(&v["late_sightings"]),
            skew_batches: u(&k["batches"]),
            skew_last_ms: f(&k["last_ms"]),
            skew_min_ms: f(&k["min_ms"]),
            skew_max_ms: f(&k["max_ms"]),
            skew_sum_ms: f(&k["mean_ms"]) * u(&k["batches"]) as f64,
            skew_over_window: u(&k["over_window"]),
            saturated: 0,
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        let mean = if self.skew_batches > 0 { self.skew_sum_ms / self.skew_batches as f64 } else { 0.0 };
        serde_json::json!({
            "held": self.held,
            "released_by_spans": self.released_by_spans,
            "released_by_time": self.released_by_time,
            "evicted": self.evicted,
            "late_sightings": self.late_sightings,
            "skew": {
                "batches": self.skew_batches,
                "last_ms": self.skew_last_ms,
                "min_ms": self.skew_min_ms,
                "max_ms": self.skew_max_ms,
                "mean_ms": mean,
                "over_window": self.skew_over_window,
            },
        })
    }
}

/// Batch numbers remembered per agent to pair a record with its first sighting.
const SKEW_MEMORY: usize = 64;

/// A shard's hold of one agent's batch records. The traces pipeline to a
/// shard is FIFO (one consumer per exporter queue), so once a sighting of
/// the agent's batch j arrived, every sighting of batches before j has: the
/// records of batches k < j may take effect. A shard that gets no share of
/// later batches lets a record go once it has been held `hold` long.
/// At most `cap` records are held; beyond it the oldest is folded into the
/// next (its watermark takes effect later, with the next; counted).
#[derive(Debug)]
pub struct AgentHold {
    held: VecDeque<HeldRecord>,
    /// Highest batch number of the agent's sightings received.
    span_seq: u64,
    last_record_seq: u64,
    window_ms: f64,
    records_at: VecDeque<(u64, Instant)>,
    spans_at: VecDeque<(u64, Instant)>,
    pub stats: HoldStats,
}

impl AgentHold {
    pub fn new(window_ns: i64) -> Self {
        AgentHold {
            held: VecDeque::new(),
            span_seq: 0,
            last_record_seq: 0,
            window_ms: window_ns as f64 / 1e6,
            records_at: VecDeque::new(),
            spans_at: VecDeque::new(),
            stats: HoldStats::default(),
        }
    }

    /// Records held now.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// A batch record arrived.
    pub fn hold(&mut self, mut r: HeldRecord, cap: usize) {
        if r.seq <= self.last_record_seq {
            // The agent restarted (its batches count from 1 again): its old batch numbers mean nothing now.
            self.span_seq = 0;
            self.records_at.clear();
            self.spans_at.clear();
        }
        self.last_record_seq = r.seq;
        match self.spans_at.iter().position(|(s, _)| *s == r.seq) {
            Some(i) => {
                let t = self.spans_at[i].1;
                self.spans_at.remove(i);
                self.stats.skew(-(r.arrived.saturating_duration_since(t).as_secs_f64() * 1e3), self.window_ms);
            }
            None => remember(&mut self.records_at, r.seq, r.arrived),
        }
        while self.held.len() >= cap.max(1) {
            let Some(old) = self.held.pop_front() else { break };
            self.stats.evicted += 1;
            let next = self.held.front_mut().unwrap_or(&mut r);
            next.watermark = next.watermark.max(old.watermark);
        }
        self.held.push_back(r);
        self.stats.held += 1;
    }

    /// Sightings of the agent's batch `seq` arrived (0: the sender did not say).
    pub fn spans(&mut self, seq: u64, now: Instant) {
        if seq <= self.span_seq {
            return;
        }
        self.span_seq = seq;
        match self.records_at.iter().position(|(s, _)| *s == seq) {
            Some(i) => {
                let t = self.records_at[i].1;
                self.records_at.remove(i);
                self.stats.skew(now.saturating_duration_since(t).as_secs_f64() * 1e3, self.window_ms);
            }
            None => remember(&mut self.spans_at, seq, now),
        }
    }

    /// The records that may take effect now, oldest first.
    pub fn release(&mut self, now: Instant, hold: Duration) -> Vec<HeldRecord> {
        let mut out = vec![];
        while let Some(f) = self.held.front() {
            if f.seq < self.span_seq {
                self.stats.released_by_spans += 1;
            } else if now.saturating_duration_since(f.arrived) >= hold {
                self.stats.released_by_time += 1;
            } else {
                break;
            }
            out.extend(self.held.pop_front());
        }
        out
    }
}

fn remember(q: &mut VecDeque<(u64, Instant)>, seq: u64, t: Instant) {
    if q.len() >= SKEW_MEMORY {
        q.pop_front();
    }
    q.push_back((seq, t));
}

/// Decodes a protobuf body (`kind` names it in errors).
pub fn parse<M: Message + Default>(body: &[u8], kind: &str) -> Result<M, String> {
    M::decode(body).map_err(|e| format!("bad OTLP {kind} request: {e}"))
}

/// The protobuf answer to an export, with OTLP's partial success when items were refused.
pub(crate) fn export_response(logs: bool, refused: u64, why: Option<String>) -> Bytes {
    let msg = why.unwrap_or_default();
    let v = if logs {
        ExportLogsServiceResponse {
            partial_success: (refused > 0).then(|| ExportLogsPartialSuccess { rejected_log_records: refused as i64, error_message: msg }),
        }
        .encode_to_vec()
    } else {
        ExportTraceServiceResponse {
            partial_success: (refused > 0).then(|| ExportTracePartialSuccess { rejected_spans: refused as i64, error_message: msg }),
        }
        .encode_to_vec()
    };
    Bytes::from(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Oracle: the stream items themselves; through OTLP and back nothing changes.
    #[test]
    fn batch_round_trips_through_otlp() {
        let w = "0110aaaa010203040506070800001203".to_string();
        let sample = StreamSample {
            w: w.clone(),
            sn: 42,
            topic: Some(("rt/image".into(), "sensor_msgs::msg::dds_::Image_".into())),
            tt: 1,
            first: 1_700_000_000_000_000_001,
            first_ip: 1_700_000_000_000_000_000,
            last: 1_700_000_000_000_900_000,
            complete: true,
            size: 2_764_800,
            fsize: Some(1344),
            fexp: 2058,
            fseen: 2058,
            ipf: 3,
            retx: 2,
            retx_bytes: 2688,
            pcp: Some(5),
            vendor: 0x0110,
            supp: 1,
            sts: Some(1_699_999_999_999_000_000),
            z: Some((u64::MAX - 5, 42)),
        };
        let frag = StreamFrag { w: w.clone(), sn: 42, frag: 1345, first_ip: 5, last: 9, topic: None };
        let b = Batch {
            agent: "pc1".into(),
            seq: 7,
            sent_ns: 123,
            items: vec![StreamItem::Sample(sample.clone()), StreamItem::Frag(frag.clone()), StreamItem::Watermark { t: 50 }, StreamItem::Watermark { t: 60 }],
            dropped_items: 3,
            topics: Some(serde_json::json!([{"topic_name": "/image"}])),
            system: vec![MetricSample { name: "node_load1".into(), labels: vec![], value: 0.5 }],
            counters: Some(serde_json::json!({"frames": 10})),
            last: true,
        };
        let (tb, lb, skipped) = encode_bodies(&b, &mut TopicMemo::default());
        assert_eq!(skipped, 0);
        let t: ExportTraceServiceRequest = parse(&tb, "traces").unwrap();
        let spans = &t.resource_spans[0].scope_spans[0].spans;
        assert_eq!(spans[0].trace_id, spans[1].trace_id, "a sample and its fragment share the trace id");
        let d = decode_traces(&tb).unwrap();
        assert_eq!((d.bad_spans, d.batches.len()), (0, 1));
        assert_eq!(d.batches[0].agent, "pc1");
        assert_eq!(d.batches[0].seq, 7, "the sightings name their batch");
        // The fragment is named by the sample record before it (a shard may have no earlier record of the writer).
        let named = StreamFrag { topic: sample.topic.clone(), ..frag };
        assert_eq!(d.batches[0].items, vec![StreamItem::Sample(sample), StreamItem::Frag(named)]);
        let l: ExportLogsServiceRequest = parse(&lb, "logs").unwrap();
        let d = decode_logs(&l);
        let m = &d.batches[0];
        assert_eq!((m.seq, m.sent_ns, m.dropped_items, m.last), (7, 123, 3, true));
        assert_eq!(m.items, vec![StreamItem::Watermark { t: 60 }], "the batch's latest watermark");
        assert_eq!(m.topics, b.topics);
        assert_eq!(m.counters, b.counters);
        assert_eq!(m.system, b.system);
    }

    fn rec(seq: u64, wm: i64, at: Instant) -> HeldRecord {
        HeldRecord { seq, watermark: Some(wm), last: false, arrived: at }
    }

    /// Oracle: the hold's rule (docs/scale-out.md): a record of batch k leaves once a sighting of a batch
    /// after k arrived, or once it was held `hold` long; in order.
    #[test]
    fn hold_releases_on_a_later_batch_or_after_the_hold() {
        let t0 = Instant::now();
        let hold = Duration::from_secs(10);
        let mut h = AgentHold::new(1_000_000_000);
        for k in 1..=3 {
            h.hold(rec(k, k as i64 * 100, t0), 256);
        }
        assert!(h.release(t0, hold).is_empty(), "no sighting of a later batch yet, hold not expired");
        h.spans(2, t0);
        let out = h.release(t0, hold);
        assert_eq!(out.iter().map(|r| r.seq).collect::<Vec<_>>(), [1], "a sighting of batch 2: batch 1's sightings are all in");
        h.spans(1, t0); // an older batch number changes nothing
        assert!(h.release(t0, hold).is_empty());
        assert!(h.release(t0 + hold - Duration::from_millis(1), hold).is_empty());
        let out = h.release(t0 + hold, hold);
        assert_eq!(out.iter().map(|r| (r.seq, r.watermark)).collect::<Vec<_>>(), [(2, Some(200)), (3, Some(300))]);
        assert_eq!((h.stats.held, h.stats.released_by_spans, h.stats.released_by_time, h.stats.evicted), (3, 1, 2, 0));
        assert!(h.is_empty());
        // A zero hold lets every record go at once (the hold off).
        h.hold(rec(4, 400, t0), 256);
        assert_eq!(h.release(t0, Duration::ZERO).len(), 1);
    }

    /// Oracle: the cap — at most `cap` records per agent; the oldest is folded into the next, whose
    /// watermark becomes the larger of both (never a watermark earlier than one held), and counted.
    #[test]
    fn hold_is_bounded_and_counts_evictions() {
        let t0 = Instant::now();
        let mut h = AgentHold::new(1_000_000_000);
        for k in 1..=10u64 {
            h.hold(rec(k, 1000 - k as i64, t0), 3); // watermarks out of order on purpose: the fold keeps the largest
        }
        assert_eq!(h.len(), 3);
        assert_eq!(h.stats.evicted, 7);
        let out = h.release(t0, Duration::ZERO);
        assert_eq!(out.iter().map(|r| (r.seq, r.watermark)).collect::<Vec<_>>(), [(8, Some(999)), (9, Some(991)), (10, Some(990))]);
        // A cap of one folds into the record that arrives.
        let mut h = AgentHold::new(1_000_000_000);
        h.hold(rec(1, 50, t0), 1);
        h.hold(HeldRecord { seq: 2, watermark: None, last: true, arrived: t0 }, 1);
        assert_eq!((h.len(), h.stats.evicted), (1, 1));
        assert_eq!(h.release(t0, Duration::ZERO), vec![HeldRecord { seq: 2, watermark: Some(50), last: true, arrived: t0 }]);
        // The skew memory is bounded too.
        let mut h = AgentHold::new(1_000_000_000);
        for k in 1..=1000 {
            h.hold(rec(k, 0, t0), 100_000);
        }
        assert_eq!(h.records_at.len(), SKEW_MEMORY);
    }

    /// Oracle: arrival times given by the test; skew = first sighting of a batch minus its record's arrival.
    #[test]
    fn hold_measures_the_skew_between_the_pipelines_and_survives_a_restart() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut h = AgentHold::new(1_000_000_000);
        h.hold(rec(1, 0, t0), 256);
        h.spans(1, t0 + ms(2500)); // traces 2.5 s behind: over the 1 s window
        h.spans(2, t0 + ms(2600));
        h.hold(rec(2, 0, t0 + ms(2700)), 256); // traces 100 ms ahead
        let s = &h.stats;
        assert_eq!((s.skew_batches, s.skew_over_window), (2, 1));
        assert_eq!((s.skew_max_ms, s.skew_min_ms, s.skew_last_ms), (2500.0, -100.0, -100.0));
        let back = HoldStats::from_json(&s.to_json());
        assert_eq!(back, *s);
        let mut sum = back.clone();
        sum.add(s);
        assert_eq!((sum.skew_batches, sum.skew_max_ms, sum.skew_min_ms), (4, 2500.0, -100.0));
        // The agent restarts: its batches count from 1 again; the old batch numbers release nothing.
        h.spans(50, t0);
        h.release(t0, Duration::from_secs(10));
        h.hold(rec(1, 7, t0), 256);
        assert!(h.release(t0, Duration::from_secs(10)).is_empty(), "sightings of the old run do not release the new run's records");
        h.spans(2, t0);
        assert_eq!(h.release(t0, Duration::from_secs(10)).len(), 1);
    }

    #[test]
    fn foreign_spans_are_counted_not_taken() {
        let mut t = ExportTraceServiceRequest::default();
        t.resource_spans.push(ResourceSpans {
            resource: Some(resource("pc1")),
            scope_spans: vec![ScopeSpans { spans: vec![Span { name: "GET /".into(), ..Default::default() }], ..Default::default() }],
            ..Default::default()
        });
        t.resource_spans.push(ResourceSpans {
            resource: None,
            scope_spans: vec![ScopeSpans { spans: vec![Span::default(), Span::default()], ..Default::default() }],
            ..Default::default()
        });
        let d = decode_traces(&t.encode_to_vec()).unwrap();
        assert_eq!((d.bad_spans, d.batches.len()), (3, 0));
        assert!(d.first_error.unwrap().contains("dds.writer_guid"));
        assert!(parse::<ExportTraceServiceRequest>(b"\xff\xff\xff", "traces").unwrap_err().contains("bad OTLP traces request"));
    }
}
