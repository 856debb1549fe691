//! The Prometheus exposition scraped by a real Prometheus 2.42 (Debian
//! `prometheus`), started by each test on 127.0.0.1 with a free port, a
//! temporary TSDB directory and a 1 s scrape interval. Oracle: PromQL
//! evaluated by Prometheus over what it scraped, compared with the traffic
//! fed (synthetic at a known rate, or a real capture decoded by ddscope-core
//! whose per-topic counts come from `ddscope topics`' analysis).

mod support;

use ddscope_core::decode::DecoderConfig;
use ddscope_core::discovery::TopicNames;
use ddscope_core::names::NameCap;
use ddscope_core::events::{SubmsgEvent, TrafficType};
use ddscope_core::pipeline::analyse_file;
use ddscope_core::samples::{SampleConfig, SampleRecord};
use ddscope_core::topics::TopicsAnalysis;
use ddscope_export::prometheus::{MetricsServer, Registry, RegistryConfig};
use ddscope_export::CaptureHealth;
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::{EntityId, Guid, GuidPrefix};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::{http_get, http_post_form, prometheus, promql, shared_captures, wait_for, Server};

fn value(r: &Value) -> f64 {
    r["value"][1].as_str().expect("value").parse().expect("number")
}

fn by_label(res: &[Value], label: &str) -> BTreeMap<String, f64> {
    res.iter().map(|r| (r["metric"][label].as_str().unwrap_or_default().to_string(), value(r))).collect()
}

fn promql_at(server: &Server, q: &str, t: f64) -> Vec<Value> {
    let (status, body) = http_post_form(&format!("{}/api/v1/query", server.url()), &[("query", q), ("time", &format!("{t:.3}"))]).expect("query");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    assert!(status == 200 && v["status"] == "success", "PromQL {q} → {body}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

fn sample(capture: &Arc<str>, topic: &Arc<TopicNames>, writer: Guid, sn: i64, ts: i64, size: u32) -> SampleRecord {
    SampleRecord {
        capture: capture.clone(),
        writer_id: writer,
        sn,
        topic: Some(topic.clone()),
        node: None,
        traffic_type: TrafficType::User,
        first_ts_ns: ts,
        first_ip_ts_ns: ts,
        last_ts_ns: ts,
        complete: true,
        first_frame: sn as u64,
        last_frame: sn as u64,
        sample_size: size,
        fragment_size: None,
        frags_expected: 1,
        frags_seen: 1,
        submsgs: 1,
        ip_frags: 1,
        bytes: size as u64,
        retransmitted_frags: 0,
        retransmitted_bytes: 0,
        destinations: 1,
        nack_frags: 0,
        pcp: Some(5),
        vendor_id: 0x0110,
        closed_by: ddscope_core::samples::ClosedBy::Complete,
        source_ts_ns: None,
        dst: None,
        zenoh_zids: None,
    }
}

fn data_event(capture: &Arc<str>, topic: &Arc<TopicNames>, writer: Guid, sn: i64, ts: i64, size: u32) -> SubmsgEvent {
    let mut e = SubmsgEvent::blank(capture.clone());
    e.ts_ns = ts;
    e.kind = SubmsgKind::Data;
    e.traffic_type = TrafficType::User;
    e.writer_id = Some(writer);
    e.sn = Some(sn);
    e.payload_size = Some(size);
    e.sample_size = Some(size);
    e.topic = Some(topic.clone());
    e.pcp = Some(5);
    e.vendor_id = 0x0110;
    e
}

fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

#[test]
fn promql_rates_equal_the_traffic_fed_at_a_known_pace() {
    let registry = Arc::new(Registry::new(RegistryConfig::default()).unwrap());
    let token = "t0ken-for-the-test";
    let server = MetricsServer::start("127.0.0.1:0", registry.clone(), Some(token)).unwrap();
    // Without the token the exporter refuses; Prometheus sends it.
    let (status, _) = http_get(&format!("http://{}/metrics", server.addr())).unwrap();
    assert_eq!(status, 401);
    let prom = prometheus(&[server.addr().to_string()], &format!("    authorization:\n      credentials: {token}\n"));

    // Prometheus applies new targets every 5 s: feed only once it scrapes.
    wait_for("the first scrape", Duration::from_secs(20), || !promql(&prom, "up{job=\"ddscope\"} == 1").is_empty());

    let capture: Arc<str> = Arc::from("pc1");
    let fast = Arc::new(TopicNames::from_parts("rt/a".into(), "T".into(), "/a".into(), "pkg/msg/A".into(), None, &mut NameCap::default()));
    // Label escaping end to end: quotes, a backslash, commas, equals signs, spaces.
    let odd_name = "/b c,d=\"e\"\\f";
    let slow = Arc::new(TopicNames::from_parts(odd_name.into(), "T".into(), odd_name.into(), "pkg/msg/B".into(), None, &mut NameCap::default()));
    let wa = Guid::new(GuidPrefix([1; 12]), EntityId([0, 0, 1, 3]));
    let wb = Guid::new(GuidPrefix([2; 12]), EntityId([0, 0, 2, 3]));

    // 20 samples/s of 1000 B on /a, 5 samples/s of 200 B on the odd topic, for 14 s.
    let tick = Duration::from_millis(50);
    let ticks = 280;
    let t_start = now_s();
    let start = Instant::now();
    let (mut na, mut nb) = (0i64, 0i64);
    for i in 0..ticks {
        let due = start + tick * i;
        if let Some(d) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        let ts = (now_s() * 1e9) as i64;
        na += 1;
        registry.on_event(&data_event(&capture, &fast, wa, na, ts, 1000));
        registry.on_sample(&sample(&capture, &fast, wa, na, ts, 1000));
        if i % 4 == 0 {
            nb += 1;
            registry.on_event(&data_event(&capture, &slow, wb, nb, ts, 200));
            registry.on_sample(&sample(&capture, &slow, wb, nb, ts, 200));
        }
    }
    let t_end = now_s();
    // Totals: exact, once Prometheus has scraped after the last sample.
    let mut last = BTreeMap::new();
    wait_for("the final scrape", Duration::from_secs(15), || {
        last = by_label(&promql(&prom, "ddscope_samples_total"), "topic");
        last.get("/a") == Some(&(na as f64)) && last.get(odd_name) == Some(&(nb as f64))
    });
    let bytes = by_label(&promql(&prom, "ddscope_payload_bytes_total"), "topic");
    assert_eq!(bytes[odd_name], nb as f64 * 200.0);
    assert_eq!(bytes["/a"], na as f64 * 1000.0);

    // Rates over a 10 s window inside the feed (Prometheus extrapolates from
    // 1 s scrapes whose timing jitters: 10 % tolerance).
    let t_mid = t_start + 12.0;
    assert!(t_mid < t_end);
    let rates = by_label(&promql_at(&prom, "rate(ddscope_samples_total[10s])", t_mid), "topic");
    assert!((rates["/a"] - 20.0).abs() <= 2.0, "rate of /a: {}", rates["/a"]);
    assert!((rates[odd_name] - 5.0).abs() <= 0.5, "rate of the odd topic: {}", rates[odd_name]);
    let bw = by_label(&promql_at(&prom, "sum by (topic) (rate(ddscope_payload_bytes_total[10s])) * 8", t_mid), "topic");
    assert!((bw["/a"] - 160_000.0).abs() <= 16_000.0, "bit/s of /a: {}", bw["/a"]);
    // Histogram of sample sizes: every /a sample in the 1024-byte bucket, none in the 256-byte one.
    let b = promql(&prom, "ddscope_sample_size_bytes_bucket{topic=\"/a\",le=\"1024\"} - ignoring(le) ddscope_sample_size_bytes_bucket{topic=\"/a\",le=\"256\"}");
    assert_eq!(value(&b[0]), na as f64);
    let labels = &promql(&prom, "ddscope_samples_total{topic=\"/a\"}")[0]["metric"];
    assert_eq!((labels["capture"].as_str(), labels["pcp"].as_str(), labels["vendor"].as_str(), labels["type"].as_str()), (Some("pc1"), Some("5"), Some("0x0110"), Some("pkg/msg/A")));
    assert_eq!(promql(&prom, "up{job=\"ddscope\"}").iter().map(value).collect::<Vec<_>>(), vec![1.0]);
}

#[test]
fn promql_totals_equal_a_decoded_real_capture() {
    let path = shared_captures().join("fastdds-vlan-pcp-ipfrag.pcapng");
    let registry = Arc::new(Registry::new(RegistryConfig::default()).unwrap());
    let topics = std::cell::RefCell::new(TopicsAnalysis::new());
    let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
    let res = analyse_file(
        &path,
        "fastdds",
        DecoderConfig::default(),
        SampleConfig::default(),
        None,
        &mut |e| {
            registry.on_event(e);
            topics.borrow_mut().on_event(e);
            *kinds.entry(e.kind.name().into_owned()).or_default() += 1;
        },
        &mut |r| {
            registry.on_sample(&r);
            topics.borrow_mut().on_sample(&r);
        },
    )
    .expect("decode");
    registry.set_capture_health(&CaptureHealth { packets_received: res.summary.frames, ..CaptureHealth::new("fastdds") }.with_decode_stats(&res.decoder.stats));
    let server = MetricsServer::start("127.0.0.1:0", registry.clone(), None).unwrap();
    let prom = prometheus(&[server.addr().to_string()], "");
    wait_for("a scrape", Duration::from_secs(15), || !promql(&prom, "ddscope_capture_packets_total").is_empty());

    let got_kinds = by_label(&promql(&prom, "sum by (kind) (ddscope_submessages_total)"), "kind");
    let want_kinds: BTreeMap<String, f64> = kinds.iter().map(|(k, v)| (k.clone(), *v as f64)).collect();
    assert_eq!(got_kinds, want_kinds);
    assert!(want_kinds.contains_key("DATA") && want_kinds.len() >= 4, "the capture has varied submessages: {want_kinds:?}");

    // Per topic: the same numbers as `ddscope topics` (TopicsAnalysis).
    let rows = topics.borrow().rows("fastdds", &res.decoder.discovery, false, &[TrafficType::User]);
    let samples = by_label(&promql(&prom, "sum by (topic) (ddscope_samples_total{traffic_type=\"user\"})"), "topic");
    let ipf = by_label(&promql(&prom, "sum by (topic) (ddscope_ip_fragments_total{traffic_type=\"user\"})"), "topic");
    let mut checked = 0;
    for r in rows.iter().filter(|r| r.samples > 0) {
        let name = r.names.as_ref().map(|n| n.topic_name.clone()).unwrap_or_default();
        assert_eq!(samples.get(&name), Some(&(r.samples as f64)), "samples of {name}");
        assert_eq!(ipf.get(&name), Some(&(r.ip_frags as f64)), "IP fragments of {name}");
        checked += 1;
    }
    assert!(checked >= 1);
    assert!(ipf.values().sum::<f64>() > samples.values().sum::<f64>(), "IP-fragmented samples are in the capture: {ipf:?} {samples:?}");
    // VLAN priority of the capture (PCP 5) is a label.
    let pcps = by_label(&promql(&prom, "sum by (pcp) (ddscope_samples_total{traffic_type=\"user\"})"), "pcp");
    assert!(pcps.contains_key("5"), "{pcps:?}");
    let frames = promql(&prom, "ddscope_capture_packets_total{capture=\"fastdds\"}");
    assert_eq!(value(&frames[0]), res.summary.frames as f64);
    assert!(!promql(&prom, "ddscope_decode_skipped_total{capture=\"fastdds\"}").is_empty());
}
