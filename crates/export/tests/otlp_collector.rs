//! The OTLP sink against a real OpenTelemetry Collector v0.150.0 (built by
//! tests/servers/build-otelcol.sh with the collector builder: OTLP receiver
//! and debug exporter), started by each test on 127.0.0.1 with a free port.
//! Oracle: the collector's own decoding of the protobuf requests, read back
//! from its debug exporter's detailed output (the contrib file exporter is
//! not available from the Go module proxy here).

mod support;

use ddscope_core::decode::DecoderConfig;
use ddscope_core::events::SubmsgEvent;
use ddscope_core::pipeline::analyse_file;
use ddscope_core::samples::SampleConfig;
use ddscope_export::ids::sample_trace_id;
use ddscope_export::otlp::{OtlpConfig, OtlpSink};
use ddscope_export::prometheus::{Registry, RegistryConfig};
use ddscope_sysstat::system::{sample_proc, SystemSource};
use ddscope_export::DeliveryConfig;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use support::{otelcol, shared_captures, wait_for, Server};

/// One span as the debug exporter printed it.
#[derive(Debug, Default, Clone)]
struct DebugSpan {
    resource: BTreeMap<String, String>,
    trace_id: String,
    name: String,
    kind: String,
    start: String,
    end: String,
    attrs: BTreeMap<String, String>,
}

/// One metric data point as the debug exporter printed it.
#[derive(Debug, Default, Clone)]
struct DebugPoint {
    resource: BTreeMap<String, String>,
    metric: String,
    data_type: String,
    monotonic: Option<String>,
    temporality: Option<String>,
    attrs: BTreeMap<String, String>,
    /// `Value`, or `Count`/`Sum` of a histogram point.
    fields: BTreeMap<String, String>,
}

/// `-> key: Type(value)` → (key, "Type(value)").
fn attr(line: &str) -> Option<(String, String)> {
    let rest = line.trim_start().strip_prefix("-> ")?;
    let (k, v) = rest.split_once(": ")?;
    Some((k.to_string(), v.trim_end().to_string()))
}

fn parse_debug(log: &str) -> (Vec<DebugSpan>, Vec<DebugPoint>) {
    let mut spans = vec![];
    let mut points: Vec<DebugPoint> = vec![];
    let mut resource = BTreeMap::new();
    #[derive(PartialEq)]
    enum At {
        None,
        Resource,
        SpanAttrs,
        Descriptor,
        PointAttrs,
    }
    let mut at = At::None;
    let mut span: Option<DebugSpan> = None;
    let (mut metric, mut dtype, mut mono, mut temp) = (String::new(), String::new(), None, None);
    let flush_span = |span: &mut Option<DebugSpan>, spans: &mut Vec<DebugSpan>| {
        if let Some(s) = span.take() {
            spans.push(s);
        }
    };
    for raw in log.lines() {
        // The first line of each batch carries the logger's prefix.
        let line = raw.rsplit('\t').next().unwrap_or(raw);
        if line.starts_with("ResourceSpans #") || line.starts_with("ResourceMetrics #") {
            flush_span(&mut span, &mut spans);
            resource = BTreeMap::new();
            at = At::None;
        } else if line == "Resource attributes:" {
            at = At::Resource;
        } else if line.starts_with("Span #") {
            flush_span(&mut span, &mut spans);
            span = Some(DebugSpan { resource: resource.clone(), ..Default::default() });
            at = At::None;
        } else if line == "Attributes:" && span.is_some() {
            at = At::SpanAttrs;
        } else if line == "Descriptor:" {
            flush_span(&mut span, &mut spans);
            at = At::Descriptor;
            mono = None;
            temp = None;
        } else if line.starts_with("NumberDataPoints #") || line.starts_with("HistogramDataPoints #") {
            points.push(DebugPoint {
                resource: resource.clone(),
                metric: metric.clone(),
                data_type: dtype.clone(),
                monotonic: mono.clone(),
                temporality: temp.clone(),
                ..Default::default()
            });
            at = At::None;
        } else if line == "Data point attributes:" {
            at = At::PointAttrs;
        } else if let Some((k, v)) = attr(line) {
            match at {
                At::Resource => {
                    resource.insert(k, v);
                }
                At::SpanAttrs => {
                    if let Some(s) = span.as_mut() {
                        s.attrs.insert(k, v);
                    }
                }
                At::Descriptor => match k.as_str() {
                    "Name" => metric = v,
                    "DataType" => dtype = v,
                    "IsMonotonic" => mono = Some(v),
                    "AggregationTemporality" => temp = Some(v),
                    _ => {}
                },
                At::PointAttrs => {
                    if let Some(p) = points.last_mut() {
                        p.attrs.insert(k, v);
                    }
                }
                At::None => {}
            }
        } else if let Some(s) = span.as_mut() {
            if let Some((k, v)) = line.trim().split_once(':') {
                let v = v.trim().to_string();
                match k.trim() {
                    "Trace ID" => s.trace_id = v,
                    "Name" => s.name = v,
                    "Kind" => s.kind = v,
                    "Start time" => s.start = v,
                    "End time" => s.end = v,
                    _ => {}
                }
            }
        } else if let Some((k, v)) = line.split_once(": ") {
            if matches!(k, "Value" | "Count" | "Sum") {
                if let Some(p) = points.last_mut() {
                    p.fields.insert(k.to_string(), v.trim().to_string());
                }
            }
        }
    }
    flush_span(&mut span, &mut spans);
    (spans, points)
}

/// Go's `time.Time.String()` in UTC, as the debug exporter prints span times.
fn go_time(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let frac = ns.rem_euclid(1_000_000_000);
    let days = secs.div_euclid(86_400);
    let tod = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    let mut s = format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", tod / 3600, tod / 60 % 60, tod % 60);
    if frac != 0 {
        s.push_str(format!(".{frac:09}").trim_end_matches('0'));
    }
    s.push_str(" +0000 UTC");
    s
}

fn sink(server: &Server, host: &str, delivery: DeliveryConfig) -> OtlpSink {
    let mut cfg = OtlpConfig::new(&server.url(), host);
    cfg.delivery = delivery;
    OtlpSink::start(cfg).expect("sink")
}

fn fast() -> DeliveryConfig {
    DeliveryConfig { batch_max_age: Duration::from_millis(100), backoff_initial: Duration::from_millis(50), backoff_max: Duration::from_millis(400), ..Default::default() }
}

fn decode(path: &Path, name: &str) -> Vec<SubmsgEvent> {
    let mut ev = vec![];
    analyse_file(path, name, DecoderConfig::default(), SampleConfig::default(), None, &mut |e| ev.push(e.clone()), &mut |_| {}).expect("decode");
    ev
}

fn str_attr(v: &str) -> String {
    v.strip_prefix("Str(").and_then(|v| v.strip_suffix(')')).unwrap_or_else(|| panic!("not a string attribute: {v}")).to_string()
}

#[test]
fn collector_receives_one_span_per_submessage_with_the_thesis_attributes() {
    let server = otelcol();
    let events = decode(&shared_captures().join("fastdds-vlan-pcp-ipfrag.pcapng"), "pc 1");
    let sink = sink(&server, "pc 1", fast());
    sink.on_events(events.iter());
    assert!(sink.flush(Duration::from_secs(20)), "{:?}", sink.stats().snapshot());
    let st = sink.stats().snapshot();
    assert_eq!((st.delivered, st.rejected), (events.len() as u64, 0), "{st:?}");

    let mut spans = vec![];
    wait_for("the collector to print every span", Duration::from_secs(10), || {
        spans = parse_debug(&server.log_text()).0;
        spans.len() >= events.len()
    });
    assert_eq!(spans.len(), events.len(), "one span per submessage");
    let by_key: BTreeMap<(String, String), &DebugSpan> = spans.iter().map(|s| ((s.attrs["frame"].clone(), s.attrs["submsg_index"].clone()), s)).collect();
    let mut with_topic = 0;
    let mut with_pcp = 0;
    for e in &events {
        let s = by_key[&(format!("Int({})", e.frame), format!("Int({})", e.submsg_index))];
        assert_eq!(s.name, e.kind.name());
        assert_eq!(s.kind, "Internal");
        assert_eq!(str_attr(&s.resource["service.name"]), "ddscope");
        assert_eq!(str_attr(&s.resource["host.name"]), "pc 1");
        assert_eq!(str_attr(&s.attrs["traffic_type"]), e.traffic_type.as_str());
        assert_eq!(s.attrs.get("topic_name").map(|v| str_attr(v)), e.topic_name().map(str::to_string));
        assert_eq!(s.attrs.get("writer_id").map(|v| str_attr(v)), e.writer_id.map(|w| w.to_string()));
        assert_eq!(s.attrs.get("sn"), e.sn.map(|v| format!("Int({v})")).as_ref());
        assert_eq!(s.attrs.get("fragment_starting_num"), e.fragment_starting_num.map(|v| format!("Int({v})")).as_ref());
        assert_eq!(s.attrs.get("payload_size"), e.payload_size.map(|v| format!("Int({v})")).as_ref());
        assert_eq!(s.attrs.get("pcp"), e.pcp.map(|v| format!("Int({v})")).as_ref());
        assert_eq!(s.start, go_time(e.ip_first_ts_ns), "start = first IP fragment");
        assert_eq!(s.end, go_time(e.ts_ns), "end = datagram complete");
        if let (true, Some(w), Some(sn)) = (e.is_data(), e.writer_id, e.sn) {
            let want: String = sample_trace_id(&w, sn).iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(s.trace_id, want);
        }
        with_topic += e.topic.is_some() as u32;
        with_pcp += e.pcp.is_some() as u32;
    }
    assert!(with_topic > 0 && with_pcp > 0, "the capture has named topics and PCP");
    assert!(events.iter().any(|e| e.ip_first_ts_ns < e.ts_ns), "IP-fragmented datagrams give spans with a duration");
}

#[test]
fn collector_receives_the_registry_and_system_metrics() {
    let server = otelcol();
    let events = decode(&shared_captures().join("fastdds-vlan-pcp-ipfrag.pcapng"), "pc1");
    let registry = Registry::new(RegistryConfig::default()).unwrap();
    registry.on_events(events.iter());
    let sink = sink(&server, "pc1", fast());
    sink.export_families(&registry.families(), ddscope_sysstat::system::now_ns());
    let sys = SystemSource::proc().sample(Duration::from_secs(2)).unwrap();
    sink.export_families(&sys, ddscope_sysstat::system::now_ns());
    assert!(sink.flush(Duration::from_secs(20)));
    assert_eq!(sink.stats().snapshot().rejected, 0);

    let mut points = vec![];
    wait_for("the metrics in the collector's output", Duration::from_secs(10), || {
        points = parse_debug(&server.log_text()).1;
        points.iter().any(|p| p.metric == "node_cpu_seconds_total")
    });
    let data: Vec<&DebugPoint> = points.iter().filter(|p| p.metric == "ddscope_submessages_total").collect();
    let want_data = events.iter().filter(|e| e.kind.name() == "DATA").count() as f64;
    let got_data: f64 = data
        .iter()
        .filter(|p| p.attrs.get("kind").map(String::as_str) == Some("Str(DATA)"))
        .map(|p| p.fields["Value"].parse::<f64>().unwrap())
        .sum();
    assert_eq!(got_data, want_data);
    let p = data[0];
    assert_eq!((p.data_type.as_str(), p.monotonic.as_deref(), p.temporality.as_deref()), ("Sum", Some("true"), Some("Cumulative")));
    assert_eq!(str_attr(&p.resource["host.name"]), "pc1");
    assert_eq!(str_attr(&p.resource["service.name"]), "ddscope");
    let cpu: Vec<_> = points.iter().filter(|p| p.metric == "node_cpu_seconds_total").collect();
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    assert_eq!(cpu.len(), 8 * cores, "one point per core and mode");
    assert!(cpu.iter().all(|p| p.attrs.contains_key("cpu") && p.attrs.contains_key("mode")));
    let mem: Vec<_> = points.iter().filter(|p| p.metric == "node_memory_MemTotal_bytes").collect();
    let want_mem = sample_proc(Path::new("/proc"), false).unwrap().into_iter().find(|f| f.name == "node_memory_MemTotal_bytes").unwrap().samples[0].value;
    assert_eq!((mem[0].data_type.as_str(), mem[0].fields["Value"].parse::<f64>().unwrap()), ("Gauge", want_mem));
}

#[test]
fn collector_down_then_up_delivers_what_was_kept() {
    let mut server = otelcol();
    server.stop();
    let events = decode(&shared_captures().join("fastdds-vlan-pcp-ipfrag.pcapng"), "pc1");
    let mut sink = sink(&server, "pc1", DeliveryConfig { batch_max_records: 50, batch_max_bytes: 64 << 10, queue_max_bytes: 64 << 10, ..fast() });
    // Three passes over the capture: more than the queue holds.
    for _ in 0..3 {
        sink.on_events(events.iter());
    }
    assert!(!sink.flush(Duration::from_millis(600)), "{:?}", sink.stats().snapshot());
    let down = sink.stats().snapshot();
    assert_eq!(down.accepted, 3 * events.len() as u64);
    assert!(down.dropped_queue_full > 0 && down.failed_attempts >= 2 && !down.up, "{down:?}");
    server.restart();
    assert!(sink.flush(Duration::from_secs(20)), "{:?}", sink.stats().snapshot());
    let up = sink.stats().snapshot();
    assert!(up.up);
    assert_eq!(up.delivered + up.dropped_queue_full, up.accepted, "{up:?}");
    let mut n = 0;
    wait_for("the kept spans in the collector", Duration::from_secs(10), || {
        n = parse_debug(&server.log_text()).0.len() as u64;
        n >= up.delivered
    });
    assert_eq!(n, up.delivered);
    let fin = sink.shutdown(Duration::from_secs(5));
    assert_eq!(fin.dropped_at_shutdown, 0);
}

#[test]
fn go_time_formats_like_the_collector() {
    assert_eq!(go_time(1_700_000_000_000_000_000), "2023-11-14 22:13:20 +0000 UTC");
    assert_eq!(go_time(1_700_000_000_000_001_000), "2023-11-14 22:13:20.000001 +0000 UTC");
}
