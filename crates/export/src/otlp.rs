//! OTLP/HTTP (protobuf) export, as the thesis's ddshark did: one span per
//! RTPS submessage (name = submessage kind, attributes = thesis Table 3.1
//! plus ddscope's extras; resource `service.name = "ddscope"`,
//! `host.name` = capture name), POSTed to `/v1/traces`; and metrics (the
//! registry's per-topic series, system metrics) POSTed to `/v1/metrics`.
//!
//! Spans of the same DDS sample share a trace id derived from (writer GUID,
//! sequence number) with a fixed hash, so the sender's and the receivers'
//! submessages of one sample land in one trace even though they come from
//! different agents — the causal link the thesis rebuilt in the database.

use crate::delivery::{Batch, Delivery, DeliveryConfig, Encoder, Http, Outcome, SinkStats, SinkStatsSnapshot, Transport};
use ddscope_sysstat::promtext::{Family, Kind};
use crate::ids::{fnv1a, sample_trace_id};
use crate::push::PushSink;
use crate::traces::{HostSpan, SampleTracer, TraceSampling, TraceStats};
use ddscope_core::events::SubmsgEvent;
use ddscope_core::latency::explain::Incident;
use ddscope_core::latency::LatencyRow;
use ddscope_core::ros2::chain::ChainRow;
use std::sync::Mutex;
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{
    metric, number_data_point, AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, ResourceSpans, ScopeSpans, Span};
use prost::Message;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct OtlpConfig {
    /// Base URL of the OTLP/HTTP receiver, e.g. `http://127.0.0.1:4318`
    /// (`/v1/traces` and `/v1/metrics` are appended).
    pub endpoint: String,
    /// `host.name` of the metrics resource (spans use their capture name).
    pub host_name: String,
    /// Extra request headers (e.g. authentication for a gateway).
    pub headers: Vec<(String, String)>,
    /// Export one span per submessage (the agent).
    pub spans: bool,
    /// Export one trace per DDS sample from correlated rows instead (`serve`; docs/export.md).
    pub sample_traces: Option<TraceSampling>,
    pub delivery: DeliveryConfig,
}

impl OtlpConfig {
    pub fn new(endpoint: &str, host_name: &str) -> Self {
        OtlpConfig {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            host_name: host_name.to_string(),
            headers: vec![],
            spans: true,
            sample_traces: None,
            delivery: DeliveryConfig::default(),
        }
    }
}

const SCOPE: &str = "ddscope";
const EP_TRACES: usize = 0;
const EP_METRICS: usize = 1;

fn kv(key: &str, v: any_value::Value) -> KeyValue {
    KeyValue { key: key.to_string(), value: Some(AnyValue { value: Some(v) }), ..Default::default() }
}
fn kv_str(key: &str, v: impl Into<String>) -> KeyValue {
    kv(key, any_value::Value::StringValue(v.into()))
}
fn kv_int(key: &str, v: i64) -> KeyValue {
    kv(key, any_value::Value::IntValue(v))
}

fn resource(host: &str) -> Resource {
    Resource {
        attributes: vec![kv_str("service.name", "ddscope"), kv_str("host.name", host), kv_str("service.version", env!("CARGO_PKG_VERSION"))],
        ..Default::default()
    }
}

fn scope() -> InstrumentationScope {
    InstrumentationScope { name: SCOPE.into(), version: env!("CARGO_PKG_VERSION").into(), ..Default::default() }
}

fn span_of(e: &SubmsgEvent) -> Span {
    let mut key = Vec::with_capacity(48);
    key.extend_from_slice(e.capture.as_bytes());
    key.extend_from_slice(&e.frame.to_be_bytes());
    key.extend_from_slice(&e.submsg_index.to_be_bytes());
    key.extend_from_slice(&e.ts_ns.to_be_bytes());
    key.extend_from_slice(e.dst.to_string().as_bytes());
    let mut span_id = fnv1a(3, &key).to_be_bytes();
    if span_id == [0; 8] {
        span_id[7] = 1;
    }
    let trace_id = match (e.writer_id, e.sn) {
        (Some(w), Some(sn)) if e.is_data() || matches!(e.kind, ddscope_wire::rtps::SubmsgKind::NackFrag) => sample_trace_id(&w, sn),
        _ => {
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&fnv1a(4, &key).to_be_bytes());
            id[8..].copy_from_slice(&span_id);
            id
        }
    };
    // Table 3.1 first, then ddscope's extras.
    let mut a = Vec::with_capacity(20);
    a.push(kv_str("traffic_type", e.traffic_type.as_str()));
    if let Some(t) = e.topic_name() {
        a.push(kv_str("topic_name", t));
    }
    if let Some(d) = e.domain() {
        a.push(kv_int("domain", d as i64));
    }
    if let Some(w) = e.writer_id {
        a.push(kv_str("writer_id", w.to_string()));
    }
    if let Some(sn) = e.sn {
        a.push(kv_int("sn", sn));
    }
    if let Some(f) = e.fragment_starting_num {
        a.push(kv_int("fragment_starting_num", f as i64));
    }
    if let Some(p) = e.payload_size {
        a.push(kv_int("payload_size", p as i64));
    }
    if let Some(p) = e.pcp {
        a.push(kv_int("pcp", p as i64));
    }
    a.push(kv_str("capture", &*e.capture));
    a.push(kv_str("kind", e.kind.name()));
    if let Some(t) = e.topic.as_deref() {
        a.push(kv_str("type_name", &t.type_name));
    }
    if let Some(r) = e.reader_id {
        a.push(kv_str("reader_id", r.to_string()));
    }
    a.push(kv_str("src", e.src.to_string()));
    a.push(kv_str("dst", e.dst.to_string()));
    if let Some(v) = e.vlan_id {
        a.push(kv_int("vlan_id", v as i64));
    }
    a.push(kv_int("ip_frags", e.ip_frags as i64));
    if let Some(n) = e.frags_in_submsg {
        a.push(kv_int("frags_in_submsg", n as i64));
    }
    if let Some(s) = e.sample_size {
        a.push(kv_int("sample_size", s as i64));
    }
    if let Some(t) = e.source_ts_ns {
        a.push(kv_int("source_ts_ns", t));
    }
    a.push(kv_str("vendor_id", format!("0x{:04x}", e.vendor_id)));
    a.push(kv_int("frame", e.frame as i64));
    a.push(kv_int("submsg_index", e.submsg_index as i64));
    Span {
        trace_id: trace_id.to_vec(),
        span_id: span_id.to_vec(),
        name: e.kind.name().into_owned(),
        kind: SpanKind::Internal as i32,
        // The datagram's first IP fragment to its last (equal when not fragmented).
        start_time_unix_nano: e.ip_first_ts_ns.min(e.ts_ns).max(0) as u64,
        end_time_unix_nano: e.ts_ns.max(0) as u64,
        attributes: a,
        ..Default::default()
    }
}

/// Converts Prometheus-style families into OTLP metrics: counters →
/// cumulative monotonic sums, gauges and untyped → gauges, histograms →
/// explicit-bucket histograms. Summaries are skipped (ddscope has none).
pub fn families_to_metrics(fams: &[Family], start_ns: i64, ts_ns: i64) -> Vec<Metric> {
    let attrs = |labels: &[(String, String)]| -> Vec<KeyValue> { labels.iter().filter(|(k, _)| k != "le").map(|(k, v)| kv_str(k, v.as_str())).collect() };
    let mut out = vec![];
    for f in fams {
        let point = |labels: &[(String, String)], v: f64| NumberDataPoint {
            attributes: attrs(labels),
            start_time_unix_nano: start_ns.max(0) as u64,
            time_unix_nano: ts_ns.max(0) as u64,
            value: Some(number_data_point::Value::AsDouble(v)),
            ..Default::default()
        };
        let data = match f.kind {
            Kind::Counter => metric::Data::Sum(Sum {
                data_points: f.samples.iter().map(|s| point(&s.labels, s.value)).collect(),
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            }),
            Kind::Gauge | Kind::Untyped => metric::Data::Gauge(Gauge { data_points: f.samples.iter().map(|s| point(&s.labels, s.value)).collect() }),
            Kind::Histogram => {
                // Group _bucket/_sum/_count by label set (without le).
                // (cumulative buckets (le, count), sum, count) per label set.
                type Parts = (Vec<(f64, f64)>, f64, f64);
                let mut groups: BTreeMap<Vec<(String, String)>, Parts> = BTreeMap::new();
                for s in &f.samples {
                    let key: Vec<(String, String)> = s.labels.iter().filter(|(k, _)| k != "le").cloned().collect();
                    let g = groups.entry(key).or_insert((vec![], 0.0, 0.0));
                    if s.name.ends_with("_bucket") {
                        let le = s.label("le").map(|l| if l == "+Inf" { f64::INFINITY } else { l.parse().unwrap_or(f64::NAN) }).unwrap_or(f64::NAN);
                        if !le.is_nan() {
                            g.0.push((le, s.value));
                        }
                    } else if s.name.ends_with("_sum") {
                        g.1 = s.value;
                    } else if s.name.ends_with("_count") {
                        g.2 = s.value;
                    }
                }
                let data_points = groups
                    .into_iter()
                    .map(|(labels, (mut buckets, sum, count))| {
                        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
                        let bounds: Vec<f64> = buckets.iter().filter(|b| b.0.is_finite()).map(|b| b.0).collect();
                        let mut counts = vec![];
                        let mut prev = 0.0;
                        for (_, cum) in &buckets {
                            counts.push((cum - prev).max(0.0) as u64);
                            prev = *cum;
                        }
                        if buckets.last().is_none_or(|b| b.0.is_finite()) {
                            // No +Inf bucket given: the rest of the count overflows.
                            counts.push((count - prev).max(0.0) as u64);
                        }
                        HistogramDataPoint {
                            attributes: attrs(&labels),
                            start_time_unix_nano: start_ns.max(0) as u64,
                            time_unix_nano: ts_ns.max(0) as u64,
                            count: count as u64,
                            sum: Some(sum),
                            bucket_counts: counts,
                            explicit_bounds: bounds,
                            ..Default::default()
                        }
                    })
                    .collect();
                metric::Data::Histogram(Histogram { data_points, aggregation_temporality: AggregationTemporality::Cumulative as i32 })
            }
            Kind::Summary => continue,
        };
        out.push(Metric { name: f.name.clone(), description: f.help.clone(), unit: unit_of(&f.name).into(), data: Some(data), ..Default::default() });
    }
    out
}

/// UCUM unit from the Prometheus name suffix.
fn unit_of(name: &str) -> &'static str {
    let base = name.strip_suffix("_total").unwrap_or(name);
    if base.ends_with("_seconds") {
        "s"
    } else if base.ends_with("_bytes") {
        "By"
    } else {
        "1"
    }
}

pub(crate) struct OtlpEncoder {
    /// Spans per capture (one resource each).
    spans: BTreeMap<Arc<str>, Vec<Span>>,
    span_count: u64,
    span_bytes: usize,
    /// Sealed metric requests waiting for the next seal.
    metrics: Vec<Batch>,
    host: String,
}

impl OtlpEncoder {
    fn add_host_spans(&mut self, spans: Vec<HostSpan>) -> u64 {
        let n = spans.len() as u64;
        for (host, s) in spans {
            self.span_bytes += s.encoded_len() + 4;
            self.spans.entry(host).or_default().push(s);
        }
        self.span_count += n;
        n
    }

    fn add_span(&mut self, e: &SubmsgEvent) -> u64 {
        let s = span_of(e);
        self.span_bytes += s.encoded_len() + 4;
        self.spans.entry(e.capture.clone()).or_default().push(s);
        self.span_count += 1;
        1
    }

    fn add_metrics(&mut self, metrics: Vec<Metric>) -> u64 {
        let points: u64 = metrics
            .iter()
            .map(|m| match &m.data {
                Some(metric::Data::Sum(s)) => s.data_points.len(),
                Some(metric::Data::Gauge(g)) => g.data_points.len(),
                Some(metric::Data::Histogram(h)) => h.data_points.len(),
                _ => 0,
            } as u64)
            .sum();
        if points == 0 {
            return 0;
        }
        let req = ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(resource(&self.host)),
                scope_metrics: vec![ScopeMetrics { scope: Some(scope()), metrics, ..Default::default() }],
                ..Default::default()
            }],
        };
        self.metrics.push(Batch { body: req.encode_to_vec(), records: points, endpoint: EP_METRICS });
        points
    }
}

impl Encoder for OtlpEncoder {
    fn pending_records(&self) -> u64 {
        self.span_count + self.metrics.iter().map(|b| b.records).sum::<u64>()
    }
    fn pending_bytes(&self) -> usize {
        self.span_bytes + self.metrics.iter().map(|b| b.body.len()).sum::<usize>()
    }
    fn seal(&mut self, out: &mut Vec<Batch>) {
        out.append(&mut self.metrics);
        if self.span_count == 0 {
            return;
        }
        let req = ExportTraceServiceRequest {
            resource_spans: std::mem::take(&mut self.spans)
                .into_iter()
                .map(|(capture, spans)| ResourceSpans {
                    resource: Some(resource(&capture)),
                    scope_spans: vec![ScopeSpans { scope: Some(scope()), spans, ..Default::default() }],
                    ..Default::default()
                })
                .collect(),
        };
        out.push(Batch { body: req.encode_to_vec(), records: std::mem::take(&mut self.span_count), endpoint: EP_TRACES });
        self.span_bytes = 0;
    }
}

struct OtlpTransport {
    http: Http,
    urls: [String; 2],
    headers: Vec<(String, String)>,
}

impl Transport for OtlpTransport {
    fn send(&mut self, batch: &Batch, body: &[u8], gzip: bool) -> Outcome {
        let url = &self.urls[batch.endpoint.min(1)];
        let (status, resp) = match self.http.post(url, "application/x-protobuf", &self.headers, body, gzip) {
            Ok(x) => x,
            Err(e) => return Outcome::Retry(e),
        };
        match status {
            200..=299 => {
                // An empty body or no partial_success means everything was accepted.
                let (rejected, msg) = if batch.endpoint == EP_TRACES {
                    ExportTraceServiceResponse::decode(resp.as_slice())
                        .ok()
                        .and_then(|r| r.partial_success)
                        .map(|p| (p.rejected_spans, p.error_message))
                        .unwrap_or_default()
                } else {
                    ExportMetricsServiceResponse::decode(resp.as_slice())
                        .ok()
                        .and_then(|r| r.partial_success)
                        .map(|p| (p.rejected_data_points, p.error_message))
                        .unwrap_or_default()
                };
                if rejected > 0 {
                    Outcome::Partial(rejected as u64, format!("OTLP partial success at {url}: {rejected} rejected: {msg}"))
                } else {
                    Outcome::Delivered
                }
            }
            // The OTLP/HTTP specification's retryable codes.
            429 | 502 | 503 | 504 => Outcome::Retry(format!("OTLP HTTP {status} from {url}")),
            _ => {
                // Error bodies are google.rpc.Status protobufs; show whatever text they hold.
                let text: String = String::from_utf8_lossy(&resp).chars().filter(|c| !c.is_control()).take(300).collect();
                Outcome::Rejected(format!("OTLP HTTP {status} from {url}: {text}"))
            }
        }
    }
}

/// The OTLP sink. Every method takes `&self` and never blocks on the network.
pub struct OtlpSink {
    delivery: Delivery<OtlpEncoder>,
    spans: bool,
    /// One trace per sample from correlated rows (`serve`).
    tracer: Option<Mutex<SampleTracer>>,
    start_ns: i64,
}

impl OtlpSink {
    pub fn start(cfg: OtlpConfig) -> Result<Self, String> {
        cfg.delivery.validate()?;
        let scheme_ok = cfg.endpoint.starts_with("http://") || (cfg.endpoint.starts_with("https://") && cfg!(feature = "tls"));
        if !scheme_ok {
            return Err(format!("{}: OTLP endpoint must be http://host:port (https needs the `tls` feature)", cfg.endpoint));
        }
        let transport = OtlpTransport {
            http: Http::new(cfg.delivery.request_timeout),
            urls: [format!("{}/v1/traces", cfg.endpoint), format!("{}/v1/metrics", cfg.endpoint)],
            headers: cfg.headers.clone(),
        };
        let enc = OtlpEncoder { spans: BTreeMap::new(), span_count: 0, span_bytes: 0, metrics: vec![], host: cfg.host_name.clone() };
        let delivery = Delivery::start(cfg.delivery.clone(), enc, transport, "otlp").map_err(|e| format!("cannot start the OTLP sender thread: {e}"))?;
        let tracer = cfg.sample_traces.clone().map(|t| Mutex::new(SampleTracer::new(t)));
        Ok(OtlpSink { delivery, spans: cfg.spans && tracer.is_none(), tracer, start_ns: ddscope_sysstat::system::now_ns() })
    }

    pub fn stats(&self) -> &Arc<SinkStats> {
        self.delivery.stats()
    }

    /// One span per submessage.
    pub fn on_event(&self, e: &SubmsgEvent) {
        if self.spans {
            self.delivery.with_encoder(|enc| (enc.add_span(e), ()));
        }
    }

    pub fn on_events<'a>(&self, es: impl IntoIterator<Item = &'a SubmsgEvent>) {
        if self.spans {
            self.delivery.add_each(es, |enc, e| enc.add_span(e));
        }
    }

    fn tracer(&self) -> Option<std::sync::MutexGuard<'_, SampleTracer>> {
        self.tracer.as_ref().map(|t| t.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The spans of one correlated row, in its sample's trace (with `sample_traces`).
    pub fn on_latency(&self, r: &LatencyRow) {
        let Some(mut t) = self.tracer() else { return };
        let mut out = vec![];
        t.on_row(r, &mut out);
        drop(t);
        if !out.is_empty() {
            self.delivery.with_encoder(|enc| (enc.add_host_spans(out), ()));
        }
    }

    /// The spans of one hop of a measured chain (with `sample_traces`): hops come in order, `last` at the chain's last.
    pub fn on_chain_row(&self, r: &ChainRow, last: bool) {
        let Some(mut t) = self.tracer() else { return };
        let mut out = vec![];
        t.on_chain_row(r, last, &mut out);
        drop(t);
        if !out.is_empty() {
            self.delivery.with_encoder(|enc| (enc.add_host_spans(out), ()));
        }
    }

    /// An `incident` span per incident `serve` judged, in its sample's trace (with `sample_traces`).
    pub fn on_incidents(&self, incidents: &[Incident]) {
        let Some(mut t) = self.tracer() else { return };
        let mut out = vec![];
        for i in incidents {
            t.on_incident(i, &mut out);
        }
        drop(t);
        if !out.is_empty() {
            self.delivery.with_encoder(|enc| (enc.add_host_spans(out), ()));
        }
    }

    /// What the sample tracer made and left out, with `sample_traces`.
    pub fn trace_stats(&self) -> Option<Arc<TraceStats>> {
        self.tracer().map(|t| t.stats.clone())
    }

    /// Exports metric families (e.g. [`crate::prometheus::Registry::families`]
    /// or a system snapshot) as one OTLP metrics request at `ts_ns`.
    pub fn export_families(&self, fams: &[Family], ts_ns: i64) {
        let metrics = families_to_metrics(fams, self.start_ns, ts_ns);
        self.delivery.with_encoder(|enc| (enc.add_metrics(metrics), ()));
    }

    pub fn flush(&self, timeout: Duration) -> bool {
        self.delivery.flush(timeout)
    }

    pub fn shutdown(&mut self, timeout: Duration) -> SinkStatsSnapshot {
        self.delivery.shutdown(timeout)
    }
}

/// `otlp=URL` is checked when the option is parsed.
pub(crate) fn check_target(url: &str) -> Result<(), String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(format!("otlp={url}: expected http://HOST:PORT (OTLP/HTTP, usually port 4318)"))
    }
}

/// Starts the sink of `otlp=URL` for the agent `host`: one trace per sample
/// with `sample_traces`, then `tweak` applied (`ExportOptions`'s).
pub(crate) fn start_sink(url: &str, host: &str, sample_traces: Option<TraceSampling>, tweak: fn(&mut OtlpConfig)) -> Result<Box<dyn PushSink>, String> {
    let mut cfg = OtlpConfig::new(url, host);
    cfg.sample_traces = sample_traces;
    tweak(&mut cfg);
    Ok(Box::new(OtlpSink::start(cfg)?))
}

/// Spans per submessage, and the registry's metrics every interval.
impl PushSink for OtlpSink {
    fn on_event(&self, e: &SubmsgEvent) {
        OtlpSink::on_event(self, e)
    }
    fn on_latency(&self, r: &LatencyRow) {
        OtlpSink::on_latency(self, r)
    }
    fn on_incidents(&self, i: &[Incident]) {
        OtlpSink::on_incidents(self, i)
    }
    fn on_chain_row(&self, r: &ChainRow) {
        // A chain's rows come hop by hop; the chain is its topics joined by commas.
        let last = r.hop as usize + 1 == r.chain.split(',').count();
        OtlpSink::on_chain_row(self, r, last)
    }
    fn trace_stats(&self) -> Option<Arc<TraceStats>> {
        OtlpSink::trace_stats(self)
    }
    fn wants_metrics(&self) -> bool {
        true
    }
    fn on_metrics(&self, fams: &[Family], ts_ns: i64) {
        self.export_families(fams, ts_ns)
    }
    fn stats(&self) -> &Arc<SinkStats> {
        OtlpSink::stats(self)
    }
    fn flush(&self, timeout: Duration) -> bool {
        OtlpSink::flush(self, timeout)
    }
    fn shutdown(&mut self, timeout: Duration) -> SinkStatsSnapshot {
        OtlpSink::shutdown(self, timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ddscope_wire::Guid;
    use ddscope_sysstat::promtext::Sample;

    #[test]
    fn trace_id_is_stable_and_per_sample() {
        let w = Guid::parse_hex("0110aabbccddeeff0011223300000102").unwrap();
        let a = sample_trace_id(&w, 7);
        assert_eq!(a, sample_trace_id(&w, 7));
        assert_ne!(a, sample_trace_id(&w, 8));
        // FNV-1a computed independently (Python): agents of different builds must agree.
        assert_eq!(a, [65, 200, 101, 246, 108, 44, 155, 84, 46, 57, 92, 248, 218, 120, 221, 99]);
    }

    #[test]
    fn histogram_families_become_explicit_bucket_histograms() {
        let l = |le: &str| vec![("topic".to_string(), "/a".to_string()), ("le".to_string(), le.to_string())];
        let t = vec![("topic".to_string(), "/a".to_string())];
        let f = Family {
            name: "ddscope_latency_seconds".into(),
            help: "h".into(),
            kind: Kind::Histogram,
            samples: vec![
                Sample::new("ddscope_latency_seconds_bucket", l("0.001"), 2.0),
                Sample::new("ddscope_latency_seconds_bucket", l("0.01"), 5.0),
                Sample::new("ddscope_latency_seconds_bucket", l("+Inf"), 6.0),
                Sample::new("ddscope_latency_seconds_sum", t.clone(), 0.5),
                Sample::new("ddscope_latency_seconds_count", t, 6.0),
            ],
        };
        let m = families_to_metrics(&[f], 1, 2);
        assert_eq!(m[0].unit, "s");
        let Some(metric::Data::Histogram(h)) = &m[0].data else { panic!("not a histogram") };
        let p = &h.data_points[0];
        assert_eq!(p.explicit_bounds, vec![0.001, 0.01]);
        assert_eq!(p.bucket_counts, vec![2, 3, 1]);
        assert_eq!(p.count, 6);
        assert_eq!(p.attributes.len(), 1);
    }
}
