//! The agent's entry point ([`Exporters`]) with every sink at once, against
//! real servers (InfluxDB 1.6.7, the OpenTelemetry Collector, Prometheus'
//! exposition read over HTTP): what an agent does, from `--export` strings
//! to shutdown. Oracles: the servers' contents and the final counters.

mod support;

use ddscope_core::decode::DecoderConfig;
use ddscope_core::pipeline::analyse_file;
use ddscope_core::samples::SampleConfig;
use ddscope_core::topics::TopicsAnalysis;
use ddscope_sysstat::promtext;
use ddscope_export::{CaptureHealth, DeliveryConfig, ExportOptions, ExportSpec, Exporters};
use std::time::Duration;
use support::{http_get, influx_query, influxdb, otelcol, shared_captures, wait_for};

#[test]
fn agent_path_feeds_every_sink_and_shuts_down_cleanly() {
    let influx = influxdb();
    let collector = otelcol();
    let specs: Vec<ExportSpec> = [
        "prometheus=127.0.0.1:0".to_string(),
        format!("influx={}/agentdb", influx.url()),
        format!("otlp={}", collector.url()),
    ]
    .iter()
    .map(|s| s.parse().unwrap())
    .collect();
    let opts = ExportOptions {
        system_interval: Duration::from_millis(200),
        otlp_metrics_interval: Duration::from_millis(300),
        influx: |c| c.delivery = DeliveryConfig { batch_max_age: Duration::from_millis(100), ..Default::default() },
        otlp: |c| c.delivery = DeliveryConfig { batch_max_age: Duration::from_millis(100), ..Default::default() },
        ..Default::default()
    };
    let ex = Exporters::start("pc1", &specs, opts).expect("start");
    let metrics_url = format!("http://{}/metrics", ex.metrics_addr().expect("prometheus on"));

    let mut events = 0u64;
    let mut samples = 0u64;
    // Every sample record, corrections (repairs of samples already reported) included.
    let mut records = 0u64;
    let topics = std::cell::RefCell::new(TopicsAnalysis::new());
    let res = analyse_file(
        &shared_captures().join("cyclone-talker-listener-loopback.pcapng"),
        "pc1",
        DecoderConfig::default(),
        SampleConfig::default(),
        None,
        &mut |e| {
            ex.on_event(e);
            topics.borrow_mut().on_event(e);
            events += 1;
        },
        &mut |r| {
            ex.on_sample(&r);
            topics.borrow_mut().on_sample(&r);
            // Supplements (repairs or copies of samples already reported) are not samples.
            samples += u64::from(!r.is_supplement());
            records += 1;
        },
    )
    .unwrap();
    ex.set_capture_health(&CaptureHealth { packets_received: res.summary.frames, ..CaptureHealth::new("pc1") }.with_decode_stats(&res.decoder.stats));
    let rows = topics.borrow().rows("pc1", &res.decoder.discovery, false, &[]);
    ex.on_topic_rows(&rows, ddscope_sysstat::system::now_ns());
    assert!(events > 0 && samples > 0);

    // /metrics: DDS series, system metrics (node_exporter names), sink counters.
    let mut text = String::new();
    wait_for("system metrics on /metrics", Duration::from_secs(10), || {
        text = http_get(&metrics_url).unwrap().1;
        text.contains("node_cpu_seconds_total{")
    });
    let fams = promtext::parse(&text).expect("valid exposition");
    let get = |name: &str| fams.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("{name} missing"));
    assert_eq!(get("ddscope_submessages_total").samples.iter().map(|s| s.value).sum::<f64>(), events as f64);
    assert_eq!(get("ddscope_samples_total").samples.iter().map(|s| s.value).sum::<f64>(), samples as f64);
    assert!(get("node_network_receive_bytes_total").samples.iter().any(|s| s.label("device").is_some()));
    assert!(get("ddscope_export_records_total").samples.iter().any(|s| s.label("sink") == Some("influx")));
    assert!(get("ddscope_export_records_total").samples.iter().any(|s| s.label("sink") == Some("otlp")));

    assert!(ex.flush(Duration::from_secs(20)));
    let report = ex.shutdown(Duration::from_secs(20));
    let influx_stats = &report.iter().find(|(n, _)| *n == "influx").unwrap().1;
    let otlp_stats = &report.iter().find(|(n, _)| *n == "otlp").unwrap().1;
    for (name, s) in &report {
        assert_eq!(s.delivered, s.accepted, "{name}: {s:?}");
        assert_eq!(s.dropped_queue_full + s.rejected + s.dropped_at_shutdown, 0, "{name}: {s:?}");
    }

    // InfluxDB: every submessage, the topic rows, system metrics from the sampler.
    let count = |q: &str| -> u64 {
        let v = influx_query(&influx, "agentdb", q);
        v["results"][0]["series"][0]["values"][0][1].as_u64().unwrap_or(0)
    };
    assert_eq!(count("SELECT count(\"frame\") FROM \"ddscope_submsg\""), events);
    // ddscope_sample holds every record; supplements carry closed_by = "retransmission" or "copy".
    assert_eq!(count("SELECT count(\"sn\") FROM \"ddscope_sample\""), records);
    assert_eq!(count("SELECT count(\"samples\") FROM \"ddscope_topic\""), rows.len() as u64);
    assert!(count("SELECT count(\"value\") FROM \"node_cpu_seconds_total\" WHERE \"host\" = 'pc1'") > 0);
    assert!(count("SELECT count(\"packets_received\") FROM \"ddscope_capture\"") == 1);
    assert!(influx_stats.delivered >= events + records);

    // Collector: one span per submessage and the registry as OTLP metrics.
    let mut log = String::new();
    wait_for("every span in the collector's output", Duration::from_secs(10), || {
        log = collector.log_text();
        log.lines().filter(|l| l.starts_with("Span #")).count() as u64 >= events
    });
    assert_eq!(log.lines().filter(|l| l.starts_with("Span #")).count() as u64, events);
    assert!(log.contains("-> Name: ddscope_samples_total") && log.contains("-> Name: node_cpu_seconds_total"));
    assert!(otlp_stats.delivered > events, "spans plus metric points: {otlp_stats:?}");
}
