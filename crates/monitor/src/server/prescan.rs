//! What a request will cost once decoded, found from its bytes before
//! anything is decoded (issue 23: decode under a budget).
//!
//! Wire formats amplify: an empty OTLP span is two bytes on the wire and a
//! ~250-byte `Span` once decoded, so one 16 MiB request of 8.4 million empty
//! spans took `serve` to 2.2 GB. Each body is therefore walked once without
//! allocating — the protobuf wire format of an OTLP request, the JSON of an
//! agent's batch — counting the spans (or log records), the attributes and
//! an upper bound of the heap bytes the decoded request and ddscope's own
//! items built from it will hold. The caller refuses a request over its caps
//! and reserves the estimate from the shared decode budget before decoding
//! (`http.rs`). The bound is conservative: every element of a repeated field
//! is charged twice its size (a `Vec` grows by doubling), every string its
//! length plus an allocation's overhead.

use crate::stream::protobuf::next_field;
use crate::stream::protocol::{MetricSample, StreamItem};
use opentelemetry_proto::tonic::common::v1::{AnyValue, EntityRef, KeyValue};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::trace::v1::{span, ResourceSpans, ScopeSpans, Span};
use std::mem::size_of;

/// What one request holds, counted before decoding it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Estimate {
    /// Spans (traces) or log records (logs); batch items (JSON).
    pub items: u64,
    /// Attributes (key-value pairs) and array or list entries of attribute values, anywhere in the request.
    pub attributes: u64,
    /// Upper bound of the heap bytes the decoded request and its conversion hold.
    pub bytes: u64,
}

/// Caps of one request; each refusal names the cap.
#[derive(Debug, Clone, Copy)]
pub struct RequestCaps {
    pub max_items: u64,
    pub max_attributes: u64,
    pub max_bytes: u64,
}

impl Estimate {
    /// `Err` naming the first cap the request exceeds.
    pub fn check(&self, caps: &RequestCaps, items: &str) -> Result<(), String> {
        if self.items > caps.max_items {
            return Err(format!("{} {items} in one request, more than the {} accepted", self.items, caps.max_items));
        }
        if self.attributes > caps.max_attributes {
            return Err(format!("{} attributes in one request, more than the {} accepted", self.attributes, caps.max_attributes));
        }
        if self.bytes > caps.max_bytes {
            return Err(format!("the request would take more than the {} MiB decode budget to decode", caps.max_bytes >> 20));
        }
        Ok(())
    }
}

/// An allocation's bookkeeping beside its bytes (glibc: 16 bytes, rounded up).
const ALLOC: u64 = 16;

fn string_cost(len: usize) -> u64 {
    if len == 0 {
        0
    } else {
        len as u64 + ALLOC
    }
}

/// Nesting deeper than prost's own recursion limit is refused.
const MAX_DEPTH: u32 = 100;

/// The OTLP messages whose fields allocate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum M {
    TraceRequest,
    LogsRequest,
    ResourceSpans,
    ResourceLogs,
    ScopeSpans,
    ScopeLogs,
    Resource,
    Scope,
    Span,
    Event,
    Link,
    Status,
    LogRecord,
    KeyValue,
    AnyValue,
    ArrayValue,
    KeyValueList,
    EntityRef,
}

/// What a length-delimited field is.
enum F {
    /// A sub-message; repeated ones are elements of a `Vec` (charged), singular ones live inline in their parent.
    Msg(M, bool),
    Str,
    /// An element of a repeated string field.
    RepStr,
    /// Not a field that allocates (unknown fields are skipped by prost too).
    Skip,
}

fn field(m: M, n: u64) -> F {
    use F::*;
    match (m, n) {
        (M::TraceRequest, 1) => Msg(M::ResourceSpans, true),
        (M::LogsRequest, 1) => Msg(M::ResourceLogs, true),
        (M::ResourceSpans, 1) | (M::ResourceLogs, 1) => Msg(M::Resource, false),
        (M::ResourceSpans, 2) => Msg(M::ScopeSpans, true),
        (M::ResourceLogs, 2) => Msg(M::ScopeLogs, true),
        (M::ResourceSpans | M::ResourceLogs | M::ScopeSpans | M::ScopeLogs, 3) => Str,
        (M::ScopeSpans | M::ScopeLogs, 1) => Msg(M::Scope, false),
        (M::ScopeSpans, 2) => Msg(M::Span, true),
        (M::ScopeLogs, 2) => Msg(M::LogRecord, true),
        (M::Resource, 1) => Msg(M::KeyValue, true),
        (M::Resource, 3) => Msg(M::EntityRef, true),
        (M::Scope, 1 | 2) => Str,
        (M::Scope, 3) => Msg(M::KeyValue, true),
        (M::Span, 1..=5) => Str,
        (M::Span, 9) => Msg(M::KeyValue, true),
        (M::Span, 11) => Msg(M::Event, true),
        (M::Span, 13) => Msg(M::Link, true),
        (M::Span, 15) => Msg(M::Status, false),
        (M::Event, 2) => Str,
        (M::Event, 3) => Msg(M::KeyValue, true),
        (M::Link, 1..=3) => Str,
        (M::Link, 4) => Msg(M::KeyValue, true),
        (M::Status, 2) => Str,
        (M::LogRecord, 3 | 9 | 10 | 12) => Str,
        (M::LogRecord, 5) => Msg(M::AnyValue, false),
        (M::LogRecord, 6) => Msg(M::KeyValue, true),
        (M::KeyValue, 1) => Str,
        (M::KeyValue, 2) => Msg(M::AnyValue, false),
        (M::AnyValue, 1 | 7) => Str,
        (M::AnyValue, 5) => Msg(M::ArrayValue, false),
        (M::AnyValue, 6) => Msg(M::KeyValueList, false),
        (M::ArrayValue, 1) => Msg(M::AnyValue, true),
        (M::KeyValueList, 1) => Msg(M::KeyValue, true),
        (M::EntityRef, 1 | 2) => Str,
        (M::EntityRef, 3 | 4) => RepStr,
        _ => Skip,
    }
}

fn size(m: M) -> u64 {
    (match m {
        M::ResourceSpans => size_of::<ResourceSpans>(),
        M::ResourceLogs => size_of::<ResourceLogs>(),
        M::ScopeSpans => size_of::<ScopeSpans>(),
        M::ScopeLogs => size_of::<ScopeLogs>(),
        M::Span => size_of::<Span>(),
        M::Event => size_of::<span::Event>(),
        M::Link => size_of::<span::Link>(),
        M::LogRecord => size_of::<LogRecord>(),
        M::KeyValue => size_of::<KeyValue>(),
        M::AnyValue => size_of::<AnyValue>(),
        M::EntityRef => size_of::<EntityRef>(),
        // Singular messages live inline in their parent.
        _ => 0,
    }) as u64
}

/// The attribute values ddscope parses as JSON (a batch record's documents): charged as the JSON they hold.
const JSON_ATTRS: [&[u8]; 3] = [b"ddscope.topics", b"ddscope.counters", b"ddscope.system"];

struct Walk<'a> {
    est: Estimate,
    caps: &'a RequestCaps,
    /// Traces are decoded one span at a time (`crate::stream::otlp::decode_traces`):
    /// only the largest span (or resource) is ever materialised whole, the
    /// items made of them are kept. Logs are decoded whole.
    streaming: bool,
    /// Kept until the request is done: the body, ddscope's items, copied strings, parsed documents.
    kept: u64,
    /// Decoded protobuf structures: of the whole request, or (streaming) of the unit being decoded.
    prost: u64,
    /// Streaming: the largest unit's structures.
    max_unit: u64,
}

impl Walk<'_> {
    fn total(&self) -> u64 {
        self.kept + if self.streaming { self.max_unit.max(self.prost) } else { self.prost }
    }
}

impl Walk<'_> {
    fn over(&mut self) -> Result<(), String> {
        // Stop walking as soon as a cap is passed: a refused request costs one partial scan.
        self.est.bytes = self.total();
        let e = &self.est;
        if e.items > self.caps.max_items || e.attributes > self.caps.max_attributes || e.bytes > self.caps.max_bytes {
            return Err(String::new());
        }
        Ok(())
    }

    fn message(&mut self, m: M, b: &[u8], depth: u32, in_log: bool) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("messages nested more than {MAX_DEPTH} deep"));
        }
        if m == M::KeyValue {
            return self.key_value(b, depth, in_log);
        }
        let mut at = 0;
        while at < b.len() {
            let (n, wt, s) = next_field(b, &mut at)?;
            if wt != 2 {
                continue;
            }
            match field(m, n) {
                F::Msg(sub, repeated) => {
                    if repeated {
                        self.prost += 2 * size(sub);
                    }
                    match sub {
                        M::Span => {
                            self.est.items += 1;
                            // ddscope's item made of it (a sighting).
                            self.kept += 2 * size_of::<StreamItem>() as u64;
                        }
                        M::LogRecord => self.est.items += 1,
                        M::AnyValue if m == M::ArrayValue => self.est.attributes += 1,
                        _ => {}
                    }
                    self.over()?;
                    // A span or a resource is one unit of the streaming decoder: its structures live while it is converted.
                    let unit = self.streaming && matches!(sub, M::Span | M::Resource);
                    let outer = if unit { std::mem::take(&mut self.prost) } else { 0 };
                    self.message(sub, s, depth + 1, in_log || sub == M::LogRecord)?;
                    if unit {
                        self.max_unit = self.max_unit.max(self.prost);
                        self.prost = outer;
                    }
                }
                F::Str => {
                    // Decoded, and copied into ddscope's items (writer, topic and type names, …).
                    self.prost += string_cost(s.len());
                    self.kept += string_cost(s.len());
                }
                F::RepStr => self.prost += 2 * size_of::<String>() as u64 + string_cost(s.len()),
                F::Skip => {}
            }
        }
        self.over()
    }

    /// A key-value pair; the value of a batch record's JSON document is charged as that JSON.
    fn key_value(&mut self, b: &[u8], depth: u32, in_log: bool) -> Result<(), String> {
        self.est.attributes += 1;
        let mut key: &[u8] = &[];
        let mut values = vec![];
        let mut at = 0;
        while at < b.len() {
            let (n, wt, s) = next_field(b, &mut at)?;
            match (n, wt) {
                (1, 2) => {
                    key = s;
                    self.prost += string_cost(s.len());
                    self.kept += string_cost(s.len());
                }
                (2, 2) => values.push(s),
                _ => {}
            }
        }
        let json = in_log && JSON_ATTRS.contains(&key);
        for v in values {
            if json {
                // The document is a string value (field 1) of the AnyValue.
                let mut at = 0;
                while at < v.len() {
                    let (n, wt, s) = next_field(v, &mut at)?;
                    if (n, wt) == (1, 2) {
                        self.kept += json_value_cost(s);
                    }
                }
            }
            self.message(M::AnyValue, v, depth + 1, in_log)?;
        }
        self.over()
    }
}

/// Why a request is refused before decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanError {
    /// Over a cap (the reason names it).
    OverCap(String),
    /// Not a well-formed request.
    Malformed(String),
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanError::OverCap(e) | ScanError::Malformed(e) => f.write_str(e),
        }
    }
}

/// Counts an OTLP traces (`logs` false) or logs request and bounds what
/// decoding it will hold. `Err` with a reason when it is malformed or over a
/// cap (the walk stops at the first cap passed).
pub fn otlp(body: &[u8], logs: bool, caps: &RequestCaps) -> Result<Estimate, ScanError> {
    let mut w = Walk { est: Estimate::default(), caps, streaming: !logs, kept: body.len() as u64, prost: 0, max_unit: 0 };
    let root = if logs { M::LogsRequest } else { M::TraceRequest };
    let what = if logs { "log records" } else { "spans" };
    match w.message(root, body, 0, false) {
        Ok(()) => w.est.check(caps, what).map(|()| w.est).map_err(ScanError::OverCap),
        Err(e) if e.is_empty() => Err(ScanError::OverCap(w.est.check(caps, what).err().unwrap_or_else(|| "over a cap".into()))),
        Err(e) => Err(ScanError::Malformed(format!("bad OTLP {} request: {e}", if logs { "logs" } else { "traces" }))),
    }
}

/// Where a JSON value sits in an agent's batch, for what decoding it costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// The batch object itself.
    Batch,
    /// `items`: each element becomes one `StreamItem` (typed: members inside cost only their strings).
    Items,
    InItem,
    /// `system`: each element a `MetricSample`, whose `labels` are pairs.
    System,
    InSystem,
    /// `topics`, `counters`: a `serde_json::Value` (every value and member costs).
    Value,
    /// A member serde ignores (an unknown key): nothing is kept.
    Ignored,
    /// A member whose key is escaped: serde may take it for any field; charged the dearest way.
    Unknown,
}

/// Heap bytes of a `serde_json::Value` element (in a `Vec`, doubled).
const VALUE: u64 = 2 * size_of::<serde_json::Value>() as u64;
/// One member of a JSON object in a `Value` (map entry: key and value, with the map's slack).
const MEMBER: u64 = 2 * (size_of::<String>() + size_of::<serde_json::Value>()) as u64;

/// Bounds the heap bytes of parsing `text` as a `serde_json::Value`.
pub fn json_value_cost(text: &[u8]) -> u64 {
    json_cost(text, Ctx::Value).bytes
}

/// Counts an agent batch (JSON) and bounds what decoding it holds.
pub fn json_batch(body: &[u8]) -> Estimate {
    json_cost(body, Ctx::Batch)
}

fn json_cost(b: &[u8], root: Ctx) -> Estimate {
    let mut est = Estimate { bytes: b.len() as u64, ..Default::default() };
    // (is an object, context of its members or elements); the key just read at the batch level.
    let mut stack: Vec<(bool, Ctx)> = vec![];
    let mut key_ctx: Option<Ctx> = None;
    let item = 2 * size_of::<StreamItem>() as u64;
    let sample = 2 * size_of::<MetricSample>() as u64;
    let pair = 2 * size_of::<(String, String)>() as u64;
    let dearest = item.max(sample).max(VALUE + MEMBER);
    // The cost of a value starting here, and the context of what it contains.
    let value = |stack: &[(bool, Ctx)], key_ctx: Option<Ctx>, est: &mut Estimate| -> Ctx {
        let Some(&(obj, ctx)) = stack.last() else { return root };
        let inner = if obj && ctx == Ctx::Batch { key_ctx.unwrap_or(Ctx::Ignored) } else { ctx };
        match (obj, inner) {
            (false, Ctx::Items) => {
                est.items += 1;
                est.bytes += item;
                Ctx::InItem
            }
            (false, Ctx::System) => {
                est.bytes += sample;
                Ctx::InSystem
            }
            (false, Ctx::InSystem) => {
                est.bytes += pair;
                Ctx::InSystem
            }
            (_, Ctx::Value) => {
                est.bytes += if obj { MEMBER } else { VALUE };
                Ctx::Value
            }
            (_, Ctx::Unknown) => {
                est.bytes += dearest;
                Ctx::Unknown
            }
            (_, c) => c,
        }
    };
    let mut i = 0;
    // Whether the string just read is an object's key (a ':' follows).
    while i < b.len() {
        let c = b[i];
        match c {
            b'"' => {
                let start = i + 1;
                let mut j = start;
                let mut escaped = false;
                while j < b.len() && b[j] != b'"' {
                    if b[j] == b'\\' {
                        escaped = true;
                        j += 1;
                    }
                    j += 1;
                }
                let s = &b[start..j.min(b.len())];
                i = j + 1;
                let mut k = i;
                while k < b.len() && b[k].is_ascii_whitespace() {
                    k += 1;
                }
                let is_key = b.get(k) == Some(&b':') && stack.last().is_some_and(|(obj, _)| *obj);
                let ctx = stack.last().map(|(_, c)| *c);
                if is_key {
                    if ctx == Some(Ctx::Batch) {
                        key_ctx = Some(match (escaped, s) {
                            (true, _) => Ctx::Unknown,
                            (_, b"items") => Ctx::Items,
                            (_, b"system") => Ctx::System,
                            (_, b"topics" | b"counters") => Ctx::Value,
                            (_, b"agent") => Ctx::InItem,
                            _ => Ctx::Ignored,
                        });
                    }
                    if !matches!(ctx, Some(Ctx::Ignored)) {
                        est.bytes += string_cost(s.len());
                    }
                    i = k + 1;
                    continue;
                }
                let inner = value(&stack, key_ctx, &mut est);
                if inner != Ctx::Ignored {
                    est.bytes += string_cost(s.len());
                }
                continue;
            }
            b'{' | b'[' => {
                let inner = value(&stack, key_ctx, &mut est);
                stack.push((c == b'{', inner));
            }
            b'}' | b']' => {
                stack.pop();
            }
            b',' | b':' => {}
            c if c.is_ascii_whitespace() => {}
            _ => {
                // A number or a literal: one value; skip to its end.
                value(&stack, key_ctx, &mut est);
                while i < b.len() && !matches!(b[i], b',' | b']' | b'}' | b':') && !b[i].is_ascii_whitespace() {
                    i += 1;
                }
                continue;
            }
        }
        i += 1;
    }
    est
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use crate::stream::otlp::SAMPLE_SPAN as SAMPLE;
    use opentelemetry_proto::tonic::common::v1::{any_value, ArrayValue};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use prost::Message;

    const CAPS: RequestCaps = RequestCaps { max_items: u64::MAX, max_attributes: u64::MAX, max_bytes: u64::MAX };

    fn kv(k: &str, v: any_value::Value) -> KeyValue {
        KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }), ..Default::default() }
    }

    /// Heap bytes the streaming decoder really holds for a traces request:
    /// the body, the items it keeps (their vectors' capacity and strings) and
    /// the largest span decoded whole — the oracle the estimate must never be under.
    fn held_traces(body: &[u8]) -> u64 {
        fn any(a: &AnyValue) -> u64 {
            match &a.value {
                Some(any_value::Value::StringValue(s)) => s.capacity() as u64,
                Some(any_value::Value::ArrayValue(x)) => x.values.capacity() as u64 * size_of::<AnyValue>() as u64 + x.values.iter().map(any).sum::<u64>(),
                _ => 0,
            }
        }
        fn span_bytes(s: &Span) -> u64 {
            (size_of::<Span>() + s.trace_id.capacity() + s.span_id.capacity() + s.name.capacity() + s.attributes.capacity() * size_of::<KeyValue>()) as u64
                + s.attributes.iter().map(|k| k.key.capacity() as u64 + k.value.as_ref().map_or(0, any)).sum::<u64>()
        }
        let d = crate::stream::otlp::decode_traces(body).unwrap();
        let items: u64 = d
            .batches
            .iter()
            .map(|b| {
                (b.items.capacity() * size_of::<StreamItem>()) as u64
                    + b.items
                        .iter()
                        .map(|i| match i {
                            StreamItem::Sample(x) => (x.w.capacity() + x.topic.as_ref().map_or(0, |(t, ty)| t.capacity() + ty.capacity())) as u64,
                            _ => 0,
                        })
                        .sum::<u64>()
            })
            .sum();
        let req = opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest::decode(body).unwrap();
        let max_span = req.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans).map(span_bytes).max().unwrap_or(0);
        body.len() as u64 + items + max_span
    }

    #[test]
    fn empty_spans_are_counted_and_their_decoded_size_bounded() {
        // The issue's request: spans of zero bytes each, two bytes on the wire.
        let n = 10_000;
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans { scope_spans: vec![ScopeSpans { spans: vec![Span::default(); n], ..Default::default() }], ..Default::default() }],
        };
        let body = req.encode_to_vec();
        let e = otlp(&body, false, &CAPS).unwrap();
        assert_eq!(e.items, n as u64);
        assert!(e.bytes >= held_traces(&body), "{} < {}", e.bytes, held_traces(&body));
        assert!(e.bytes >= 100 * body.len() as u64, "the amplification is seen: {} bytes for {} on the wire", e.bytes, body.len());
        // Over a cap: refused with the cap named, before the walk ends.
        let caps = RequestCaps { max_items: 1000, ..CAPS };
        assert_eq!(otlp(&body, false, &caps).unwrap_err(), ScanError::OverCap("1001 spans in one request, more than the 1000 accepted".into()));
        let caps = RequestCaps { max_bytes: 1 << 20, ..CAPS };
        assert!(otlp(&body, false, &caps).unwrap_err().to_string().contains("decode budget"));
    }

    #[test]
    fn real_spans_are_estimated_above_what_they_hold() {
        // Sightings as the agent sends them (the oracle: the streaming decoder's items), and one span with
        // 50 000 attributes (decoded whole on its own: the largest unit is in the estimate).
        let w = |i: usize| format!("0110aaaa{i:016x}00001203");
        let sighting = |i: usize| Span {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            name: SAMPLE.into(),
            attributes: [
                kv("dds.writer_guid", any_value::Value::StringValue(w(i))),
                kv("dds.sn", any_value::Value::IntValue(i as i64)),
                kv("dds.topic_raw", any_value::Value::StringValue(format!("rt/topic{i}"))),
                kv("dds.type_raw", any_value::Value::StringValue("std_msgs::msg::dds_::String_".into())),
                kv("ddscope.traffic_type", any_value::Value::IntValue(1)),
                kv("ddscope.first_ip_ts_ns", any_value::Value::IntValue(1)),
                kv("ddscope.complete", any_value::Value::BoolValue(true)),
                kv("dds.sample_size", any_value::Value::IntValue(100)),
                kv("ddscope.frags_expected", any_value::Value::IntValue(0)),
                kv("ddscope.frags_seen", any_value::Value::IntValue(0)),
                kv("ddscope.ip_frags", any_value::Value::IntValue(1)),
                kv("ddscope.retransmitted_frags", any_value::Value::IntValue(0)),
                kv("ddscope.retransmitted_bytes", any_value::Value::IntValue(0)),
                kv("dds.vendor_id", any_value::Value::IntValue(0x0110)),
            ]
            .into(),
            ..Default::default()
        };
        let mut spans: Vec<Span> = (0..1000).map(sighting).collect();
        let mut fat = sighting(5000);
        fat.attributes.extend((0..50_000).map(|k| kv(&format!("x{k}"), any_value::Value::StringValue("y".into()))));
        spans.push(fat);
        let resource = Resource { attributes: vec![kv(crate::stream::otlp::AGENT_ATTR, any_value::Value::StringValue("pc1".into()))], ..Default::default() };
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(resource),
                scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
                ..Default::default()
            }],
        };
        let body = req.encode_to_vec();
        let e = otlp(&body, false, &CAPS).unwrap();
        assert_eq!((e.items, e.attributes), (1001, 1001 * 14 + 50_000 + 1));
        let d = crate::stream::otlp::decode_traces(&body).unwrap();
        assert_eq!((d.batches[0].items.len(), d.bad_spans), (1001, 0), "{:?}", d.first_error);
        let held = held_traces(&body);
        assert!(e.bytes >= held, "{} < {held}", e.bytes);
        // Not absurdly above: within 4× of what the decoder holds.
        assert!(e.bytes < 4 * held, "{} vs {held}", e.bytes);
    }

    #[test]
    fn nested_attribute_values_and_json_documents_are_charged() {
        let nested = AnyValue { value: Some(any_value::Value::ArrayValue(ArrayValue { values: vec![AnyValue::default(); 5000] })) };
        let rec = LogRecord {
            attributes: vec![
                KeyValue { key: "x".into(), value: Some(nested), ..Default::default() },
                kv("ddscope.topics", any_value::Value::StringValue(format!("[{}0]", "0,".repeat(100_000)))),
            ],
            ..Default::default()
        };
        let req = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs { scope_logs: vec![ScopeLogs { log_records: vec![rec], ..Default::default() }], ..Default::default() }],
        };
        let body = req.encode_to_vec();
        let e = otlp(&body, true, &CAPS).unwrap();
        assert_eq!((e.items, e.attributes), (1, 2 + 5000));
        // 100 001 JSON numbers parsed into a Value array: at least 32 bytes each.
        assert!(e.bytes > 100_000 * 32 + 5000 * size_of::<AnyValue>() as u64, "{}", e.bytes);
        // Garbage and cut messages are refused, never read past.
        assert!(otlp(&[0x0a, 0x05, 0x12], false, &CAPS).unwrap_err().to_string().contains("runs past"));
        assert!(matches!(otlp(&[0x0b], false, &CAPS), Err(ScanError::Malformed(e)) if e.contains("groups")));
        // Nesting deeper than prost accepts.
        let mut v = AnyValue::default();
        for _ in 0..200 {
            v = AnyValue { value: Some(any_value::Value::ArrayValue(ArrayValue { values: vec![v] })) };
        }
        let deep = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                scope_logs: vec![ScopeLogs {
                    log_records: vec![LogRecord { body: Some(v), ..Default::default() }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        assert!(otlp(&deep.encode_to_vec(), true, &CAPS).unwrap_err().to_string().contains("nested"));
    }

    #[test]
    fn json_batches_are_estimated_by_where_their_values_go() {
        let wm = r#"{"k":"watermark","t":1}"#;
        let body = format!(r#"{{"agent":"pc1","seq":1,"sent_ns":0,"dropped_items":0,"items":[{}]}}"#, vec![wm; 1000].join(","));
        let e = json_batch(body.as_bytes());
        assert_eq!(e.items, 1000);
        let b: crate::stream::protocol::Batch = serde_json::from_str(&body).unwrap();
        assert!(e.bytes >= (b.items.capacity() * size_of::<StreamItem>()) as u64);
        // A topic table of numbers: a Value per number.
        let body = format!(r#"{{"agent":"pc1","seq":1,"sent_ns":0,"dropped_items":0,"items":[],"topics":[{}0]}}"#, "0,".repeat(10_000));
        assert!(json_batch(body.as_bytes()).bytes >= 10_000 * size_of::<serde_json::Value>() as u64);
        // An escaped key may be any field to serde: charged the dearest way.
        let body = format!(r#"{{"agent":"pc1","seq":1,"sent_ns":0,"dropped_items":0,"it\u0065ms":[{}]}}"#, vec![wm; 1000].join(","));
        assert!(json_batch(body.as_bytes()).bytes >= 1000 * size_of::<StreamItem>() as u64);
        // Unknown keys are ignored by serde and cost nothing but their bytes.
        let body = format!(r#"{{"agent":"pc1","junk":[{}0]}}"#, "0,".repeat(10_000));
        assert!(json_batch(body.as_bytes()).bytes < 2 * body.len() as u64);
        assert!(json_value_cost(br#"{"a":"x","b":[1,2,{"c":null}]}"#) > 0);
    }
}
