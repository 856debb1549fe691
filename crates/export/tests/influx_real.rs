//! The InfluxDB sink against a real InfluxDB 1.6.7 (Debian `influxdb`),
//! started by each test on 127.0.0.1 with a free port and a temporary
//! directory. Oracles: the database itself (what it stored, what the
//! documented InfluxQL queries in docs/queries/ compute), the Rust
//! correlator of ddscope-core on the same captures, and the synthetic
//! traffic's own construction (known delays, losses, a repair).

mod support;

use ddscope_core::decode::DecoderConfig;
use ddscope_core::discovery::TopicNames;
use ddscope_core::names::NameCap;
use ddscope_core::events::{SubmsgEvent, TrafficType};
use ddscope_core::latency::app::AppTruth;
use ddscope_core::latency::files::{correlate_files, CaptureInput, FileDecoding};
use ddscope_core::session::correlation_samples;
use ddscope_core::latency::{Correlator, CorrelatorConfig, LatencyRow, Level};
use ddscope_core::pipeline::analyse_file;
use ddscope_core::samples::SampleConfig;
use ddscope_export::influx::{InfluxConfig, InfluxSink};
use ddscope_sysstat::promtext::{Family, Kind, Sample};
use ddscope_sysstat::system::SystemSnapshot;
use ddscope_export::DeliveryConfig;
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::{EntityId, Guid, GuidPrefix};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use support::traffic::{self, T0};
use support::{influx_query, influxdb, repo_root, Server, TempDir};

const DB: &str = "ddscope_test";

fn sink_for(server: &Server, delivery: DeliveryConfig) -> InfluxSink {
    let mut cfg = InfluxConfig::new(&server.url(), DB);
    cfg.delivery = delivery;
    InfluxSink::start(cfg).expect("sink")
}

fn fast_delivery() -> DeliveryConfig {
    DeliveryConfig { batch_max_age: Duration::from_millis(100), backoff_initial: Duration::from_millis(50), backoff_max: Duration::from_millis(400), ..Default::default() }
}

/// `(tags, columns, values)` of every series in the first statement's result.
type Series = (BTreeMap<String, String>, Vec<String>, Vec<Vec<Value>>);

fn series(v: &Value) -> Vec<Series> {
    let r = &v["results"][0];
    assert!(r.get("error").is_none(), "query error: {r}");
    r["series"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    let tags = s["tags"].as_object().map(|o| o.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect()).unwrap_or_default();
                    let cols = s["columns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect();
                    let vals = s["values"].as_array().unwrap().iter().map(|r| r.as_array().unwrap().clone()).collect();
                    (tags, cols, vals)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn col(cols: &[String], name: &str) -> usize {
    cols.iter().position(|c| c == name).unwrap_or_else(|| panic!("no column {name} in {cols:?}"))
}

/// A documented query with its Grafana variables filled in.
fn documented(name: &str, vars: &[(&str, &str)]) -> String {
    let path = repo_root().join("docs/queries").join(name);
    let mut q = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for (k, v) in vars {
        q = q.replace(k, v);
    }
    q
}

fn user_event(capture: &Arc<str>, topic: &Arc<TopicNames>, writer: Guid, sn: i64, ts: i64, payload: u32) -> SubmsgEvent {
    let mut e = SubmsgEvent::blank(capture.clone());
    e.ts_ns = ts;
    e.ip_first_ts_ns = ts;
    e.ip_last_ts_ns = ts;
    e.kind = SubmsgKind::Data;
    e.traffic_type = TrafficType::User;
    e.writer_id = Some(writer);
    e.sn = Some(sn);
    e.payload_size = Some(payload);
    e.sample_size = Some(payload);
    e.source_ts_ns = Some(ts - 1000);
    e.topic = Some(topic.clone());
    e.pcp = Some(5);
    e
}

#[test]
fn awkward_topic_names_are_stored_exactly() {
    let server = influxdb();
    let sink = sink_for(&server, fast_delivery());
    let capture: Arc<str> = Arc::from("pc 1,a=b");
    // Spaces, commas, equals signs, quotes, backslashes (one trailing: not representable, see docs).
    // Control characters (a tab once went out as an unescaped space and
    // InfluxDB refused the line) are stored as their visible escapes.
    let names = ["/a b", "/c,d", "/e=f", "/g\"h\"", "/back\\slash", "/x, y=z \"w\"", "/tab\there", "/nl\nx\ry", "/esc\x1b[2J\x7f"];
    let stored = |n: &str| n.replace('\t', "\\t").replace('\n', "\\n").replace('\r', "\\r").replace('\x1b', "\\x1b").replace('\x7f', "\\x7f");
    let mut expected_counts = BTreeMap::new();
    for (i, name) in names.iter().enumerate() {
        let topic = Arc::new(TopicNames::from_parts(name.to_string(), "T".into(), name.to_string(), format!("pkg/msg/\"{i}\" x,y=z"), None, &mut NameCap::default()));
        let writer = Guid::new(GuidPrefix([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, i as u8]), EntityId([0, 0, 1, 3]));
        for sn in 1..=(i as i64 + 1) {
            sink.on_event(&user_event(&capture, &topic, writer, sn, T0 + sn * 1_000_000 + i as i64, 100 * sn as u32));
        }
        expected_counts.insert(stored(name), (i as u64 + 1, (1..=(i as u64 + 1)).map(|s| 100 * s).sum::<u64>()));
    }
    assert!(sink.flush(Duration::from_secs(20)), "flush timed out: {:?}", sink.stats().snapshot());
    let st = sink.stats().snapshot();
    assert_eq!(st.rejected, 0, "{st:?}");
    assert_eq!(st.delivered, st.accepted);

    let tv = influx_query(&server, DB, "SHOW TAG VALUES FROM \"ddscope_submsg\" WITH KEY = \"topic_name\"");
    let got: BTreeSet<String> = series(&tv).iter().flat_map(|(_, _, vals)| vals.iter().map(|r| r[1].as_str().unwrap().to_string())).collect();
    assert_eq!(got, names.iter().map(|s| stored(s)).collect::<BTreeSet<_>>());
    let caps = influx_query(&server, DB, "SHOW TAG VALUES FROM \"ddscope_submsg\" WITH KEY = \"capture\"");
    assert_eq!(series(&caps)[0].2[0][1], "pc 1,a=b");

    let q = influx_query(&server, DB, "SELECT count(\"payload_size\"), sum(\"payload_size\") FROM \"ddscope_submsg\" GROUP BY \"topic_name\"");
    let mut counts = BTreeMap::new();
    for (tags, cols, vals) in series(&q) {
        counts.insert(tags["topic_name"].clone(), (vals[0][col(&cols, "count")].as_u64().unwrap(), vals[0][col(&cols, "sum")].as_u64().unwrap()));
    }
    assert_eq!(counts, expected_counts);
    // String fields keep quotes, commas and equals signs.
    let q = influx_query(&server, DB, "SELECT last(\"type_name\") FROM \"ddscope_submsg\" WHERE \"topic_name\" = '/g\"h\"'");
    assert_eq!(series(&q)[0].2[0][1], "pkg/msg/\"3\" x,y=z");
    // Same series and time would overwrite in InfluxDB: every point must be there.
    let topic = Arc::new(TopicNames::new("rt/same", "T"));
    let w = Guid::new(GuidPrefix([9; 12]), EntityId([0, 0, 9, 3]));
    for sn in 1..=5 {
        sink.on_event(&user_event(&capture, &topic, w, sn, T0, 10));
    }
    assert!(sink.flush(Duration::from_secs(20)));
    let q = influx_query(&server, DB, "SELECT count(\"sn\"), min(\"ts_ns\"), max(\"ts_ns\") FROM \"ddscope_submsg\" WHERE \"topic_name\" = '/same'");
    let (_, cols, vals) = &series(&q)[0];
    assert_eq!(vals[0][col(cols, "count")], 5, "points with the same capture time must not overwrite each other");
    assert_eq!(vals[0][col(cols, "min")].as_i64(), Some(T0), "ts_ns keeps the exact capture time");
    assert_eq!(vals[0][col(cols, "max")].as_i64(), Some(T0));
}

fn decode(path: &std::path::Path, name: &str, sink: &InfluxSink) {
    analyse_file(path, name, DecoderConfig::default(), SampleConfig { timeout_ns: 2_000_000_000, ..SampleConfig::default() }, None, &mut |e| sink.on_event(e), &mut |r| {
        sink.on_sample(&r)
    })
    .expect("decode");
}

fn correlate(sender: &std::path::Path, receiver: &std::path::Path) -> Vec<LatencyRow> {
    let cfg = CorrelatorConfig {
        captures: vec!["pc1".into(), "pc2".into()],
        offsets_ns: vec![0, 0],
        window_ns: 2_000_000_000,
        period_ns: None,
        message_rows: true,
        submessage_rows: true,
        ..Default::default()
    };
    let mut c = Correlator::new(cfg, Arc::new(AppTruth::default()));
    let mut rows = vec![];
    let inputs = [CaptureInput { path: sender.into(), name: "pc1".into() }, CaptureInput { path: receiver.into(), name: "pc2".into() }];
    correlate_files(&inputs, FileDecoding { samples: correlation_samples(5_000_000_000), ..FileDecoding::default() }, &mut c, &[], &mut |r| rows.push(r)).expect("correlate");
    c.finish(&mut |r| rows.push(r));
    rows
}

#[test]
fn documented_queries_match_the_rust_correlator_and_the_construction() {
    let dir = TempDir::new("influx-latency");
    let (snd, rcv, truth) = traffic::two_captures(dir.path());
    let server = influxdb();
    let sink = sink_for(&server, fast_delivery());
    decode(&snd, "pc1", &sink);
    decode(&rcv, "pc2", &sink);
    let rows = correlate(&snd, &rcv);
    for r in &rows {
        sink.on_latency(r);
    }
    // System metrics with known counters: 125 000 B/s received on eth9.
    for (i, v) in [(1i64, 1_000f64), (2, 126_000.0), (3, 251_000.0)] {
        let fam = |name: &str, v: f64| Family { name: name.into(), help: String::new(), kind: Kind::Counter, samples: vec![Sample::new(name, vec![("device".into(), "eth9".into())], v)] };
        sink.on_system(&SystemSnapshot {
            host: "pc1".into(),
            ts_ns: T0 + i * 1_000_000_000,
            families: vec![fam("node_network_receive_bytes_total", v), fam("node_network_transmit_bytes_total", 2.0 * v)],
            errors_total: 0,
            last_error: None,
        });
    }
    assert!(sink.flush(Duration::from_secs(30)), "flush timed out: {:?}", sink.stats().snapshot());
    let st = sink.stats().snapshot();
    assert_eq!((st.rejected, st.dropped_queue_full), (0, 0), "{st:?}");
    assert_eq!(sink.data_without_source_ts(), 0, "every DATA of the synthetic traffic has INFO_TS");

    let time_filter = format!("time >= {} AND time <= {}", T0 - 1_000_000_000, T0 + 10_000_000_000);
    let vars = [("$sender", "pc1"), ("$receiver", "pc2"), ("$timeFilter", time_filter.as_str())];

    // --- DDS message latency, grouped by writer and sequence number ---
    let v = influx_query(&server, DB, &documented("message_latency.influxql", &vars));
    let mut db_msg: BTreeMap<(String, i64), Option<i64>> = BTreeMap::new();
    for (tags, cols, vals) in series(&v) {
        for row in vals {
            let sn = row[col(&cols, "sn")].as_i64().expect("sn");
            db_msg.insert((tags["writer_id"].clone(), sn), row[col(&cols, "latency_ns")].as_i64());
        }
    }
    assert_eq!(db_msg.len() as i64, traffic::IMAGE_SAMPLES + traffic::DRIVE_SAMPLES, "one row per sample");
    // Against the construction.
    for s in &truth.samples {
        let w = if s.topic == "/image" { truth.image_writer } else { truth.drive_writer };
        let want = s.receiver_complete_ns.map(|r| r - s.sender_first_ns);
        assert_eq!(db_msg[&(w.to_string(), s.sn)], want, "{} sn {}", s.topic, s.sn);
    }
    // Against the Rust correlator.
    let mut rust_msg = 0;
    for r in rows.iter().filter(|r| r.level == Level::Message) {
        rust_msg += 1;
        let db = db_msg[&(r.writer_id.to_string(), r.sn)];
        match r.status.as_str() {
            "delivered" => assert_eq!(db, r.latency_ns, "writer {} sn {}", r.writer_id, r.sn),
            "lost" => assert_eq!(db, None, "lost sample {} must have no latency", r.sn),
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!(rust_msg, db_msg.len(), "the correlator judged every sample");
    assert!(rows.iter().any(|r| r.level == Level::Message && r.sn == traffic::REPAIRED_IMAGE && r.repaired), "the repair is in the data");

    // --- DDS submessage latency, grouped by writer, sn and fragment_starting_num ---
    let v = influx_query(&server, DB, &documented("submessage_latency.influxql", &vars));
    let mut db_sub: BTreeMap<(String, i64, u32), Option<i64>> = BTreeMap::new();
    for (tags, cols, vals) in series(&v) {
        for row in vals {
            let sn = row[col(&cols, "sn")].as_i64().expect("sn");
            db_sub.insert((tags["writer_id"].clone(), sn, tags["frag"].parse().unwrap()), row[col(&cols, "latency_ns")].as_i64());
        }
    }
    let image: Vec<_> = truth.samples.iter().filter(|s| s.topic == "/image").collect();
    assert_eq!(db_sub.len(), image.iter().map(|s| s.frags.len()).sum::<usize>());
    for s in &image {
        for (frag, (s_first, r_last)) in &s.frags {
            assert_eq!(db_sub[&(truth.image_writer.to_string(), s.sn, *frag)], r_last.map(|r| r - s_first), "sn {} frag {frag}", s.sn);
        }
    }
    let rust_sub: Vec<_> = rows.iter().filter(|r| r.level == Level::Submessage).collect();
    assert!(!rust_sub.is_empty());
    for r in &rust_sub {
        assert_eq!(db_sub[&(r.writer_id.to_string(), r.sn, r.fragment_starting_num.unwrap())], r.latency_ns);
    }
    // The correlator reports only fragments seen at both ends; the database also lists the lost ones.
    assert_eq!(rust_sub.len(), db_sub.values().filter(|v| v.is_some()).count());

    // --- bandwidth per topic (sender capture), bit/s per second ---
    let v = influx_query(&server, DB, &documented("bandwidth_topic.influxql", &vars));
    let mut want: BTreeMap<(&str, i64), u64> = BTreeMap::new();
    for (t, bytes, topic) in &truth.sender_payloads {
        *want.entry((topic, t.div_euclid(1_000_000_000) * 1_000_000_000)).or_default() += bytes * 8;
    }
    let mut checked = 0;
    // User topics of the sender (discovery DATA has no topic_name tag).
    for (tags, cols, vals) in series(&v).into_iter().filter(|(t, _, _)| t["capture"] == "pc1" && !t["topic_name"].is_empty()) {
        let topic = tags["topic_name"].clone();
        for row in vals {
            let t = row[0].as_i64().unwrap();
            let got = row[col(&cols, "bits_per_second")].as_u64().unwrap_or(0);
            assert_eq!(got, want.get(&(topic.as_str(), t)).copied().unwrap_or(0), "{topic} at {t}");
            checked += 1;
        }
    }
    assert!(checked >= 2 * 3, "buckets checked: {checked}");
    assert_eq!(want.keys().map(|k| k.0).collect::<BTreeSet<_>>().len(), 2);

    // --- bandwidth per interface (system metrics) ---
    let v = influx_query(&server, DB, &documented("bandwidth_interface.influxql", &vars));
    let mut per_name: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for s in v["results"][0]["series"].as_array().expect("series") {
        assert_eq!((s["tags"]["host"].as_str(), s["tags"]["device"].as_str()), (Some("pc1"), Some("eth9")));
        per_name.insert(s["name"].as_str().unwrap().to_string(), s["values"].as_array().unwrap().iter().map(|r| r[1].as_f64().unwrap()).collect());
    }
    assert_eq!(per_name["node_network_receive_bytes_total"], vec![1_000_000.0, 1_000_000.0], "125 000 B/s in");
    assert_eq!(per_name["node_network_transmit_bytes_total"], vec![2_000_000.0, 2_000_000.0], "250 000 B/s out");

    // --- payload size over time ---
    let v = influx_query(&server, DB, &documented("payload_size.influxql", &vars));
    let mut sizes: BTreeMap<(String, String), BTreeSet<i64>> = BTreeMap::new();
    for (tags, cols, vals) in series(&v) {
        for row in vals {
            sizes.entry((tags["capture"].clone(), tags["topic_name"].clone())).or_default().insert(row[col(&cols, "sample_size_bytes")].as_i64().unwrap());
        }
    }
    assert_eq!(sizes[&("pc1".to_string(), "/image".to_string())], BTreeSet::from([traffic::IMAGE_SAMPLE as i64]));
    assert_eq!(sizes[&("pc2".to_string(), "/drive".to_string())], BTreeSet::from([traffic::DRIVE_SIZE as i64]));

    // --- the correlator's own rows (ddscope_latency) ---
    let v = influx_query(&server, DB, "SELECT count(\"sn\") FROM \"ddscope_latency\" WHERE \"level\" = 'message' GROUP BY \"topic_name\", \"status\"");
    let mut by_status = BTreeMap::new();
    for (tags, _, vals) in series(&v) {
        by_status.insert((tags["topic_name"].clone(), tags["status"].clone()), vals[0][1].as_u64().unwrap());
    }
    assert_eq!(by_status[&("/image".to_string(), "lost".to_string())], 1);
    assert_eq!(by_status[&("/drive".to_string(), "lost".to_string())], 1);
    assert_eq!(by_status[&("/drive".to_string(), "delivered".to_string())], traffic::DRIVE_SAMPLES as u64 - 1);
}

#[test]
fn outage_keeps_what_fits_counts_drops_and_reconnects() {
    let mut server = influxdb();
    server.stop();
    // At most 200 points or 100 kB per batch, 300 kB of queue while the
    // database is down: 3000 points of several hundred bytes cannot all fit.
    let delivery = DeliveryConfig {
        batch_max_records: 200,
        batch_max_bytes: 100_000,
        queue_max_bytes: 300_000,
        batch_max_age: Duration::from_millis(100),
        backoff_initial: Duration::from_millis(50),
        backoff_max: Duration::from_millis(400),
        shutdown_timeout: Duration::from_secs(20),
        ..Default::default()
    };
    let capture: Arc<str> = Arc::from("pc1");
    let topic = Arc::new(TopicNames::new("rt/outage", "std_msgs::msg::dds_::String_"));
    let w = Guid::new(GuidPrefix([7; 12]), EntityId([0, 0, 7, 3]));
    let mut cfg = InfluxConfig::new(&server.url(), DB);
    cfg.data_keys = false;
    cfg.delivery = delivery;
    let mut sink = InfluxSink::start(cfg).unwrap();
    for sn in 1..=3000 {
        sink.on_event(&user_event(&capture, &topic, w, sn, T0 + sn * 1000, 10));
    }
    assert!(!sink.flush(Duration::from_millis(500)), "nothing can be delivered while the server is down");
    let down = sink.stats().snapshot();
    assert_eq!(down.accepted, 3000);
    assert_eq!(down.delivered, 0);
    assert!(down.dropped_queue_full > 0, "the bounded queue overflowed: {down:?}");
    assert!(down.failed_attempts >= 2 && !down.up, "{down:?}");
    assert!(down.last_error.as_deref().is_some_and(|e| e.contains("127.0.0.1")), "{down:?}");
    // Backoff: a handful of attempts in half a second, not a busy loop.
    assert!(down.failed_attempts < 20, "{down:?}");

    server.restart();
    assert!(sink.flush(Duration::from_secs(20)), "{:?}", sink.stats().snapshot());
    let up = sink.stats().snapshot();
    assert!(up.up);
    assert_eq!(up.delivered + up.dropped_queue_full, 3000, "{up:?}");
    let v = influx_query(&server, DB, "SELECT count(\"sn\"), min(\"sn\"), max(\"sn\") FROM \"ddscope_submsg\"");
    let (_, cols, vals) = &series(&v)[0];
    assert_eq!(vals[0][col(cols, "count")].as_u64(), Some(up.delivered), "the database holds exactly what was delivered");
    // Drop oldest: the newest points are kept (and the first batch too when the
    // sender had taken it before the queue filled: a batch in flight is never dropped).
    assert_eq!(vals[0][col(cols, "max")].as_i64(), Some(3000), "the newest data is kept (oldest dropped)");

    // A second outage while running, then shutdown flushes what came after.
    server.stop();
    for sn in 3001..=3100 {
        sink.on_event(&user_event(&capture, &topic, w, sn, T0 + sn * 1000, 10));
    }
    std::thread::sleep(Duration::from_millis(400));
    server.restart();
    let fin = sink.shutdown(Duration::from_secs(20));
    assert_eq!(fin.delivered, up.delivered + 100, "{fin:?}");
    assert_eq!(fin.dropped_at_shutdown, 0);
    let v = influx_query(&server, DB, "SELECT count(\"sn\") FROM \"ddscope_submsg\" WHERE \"sn\" > 3000");
    assert_eq!(series(&v)[0].2[0][1], 100);
}
