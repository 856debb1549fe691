//! What `serve`'s `/api/state` shows of the ROS 2 layer, and node names on the agent's side.
//!
//! 1. Chains: the thesis's simple robotic application as ros2_tracing event
//!    streams (sensor_1 → filter on pc1, /image over the wire, msg_driven →
//!    actuator on pc2), assembled as the agent does and sent as two agents'
//!    batches (trace items on the agent→serve stream beside the samples).
//!    Oracles: the instants the test chose (every layer and the chain's
//!    end-to-end latency is a difference of two of them) and the offline
//!    correlator fed the same items directly.
//! 2. Node names: the agent's own loop on a real ROS 2 capture (rmw_cyclonedds
//!    talker/listener, ../shared/captures) sends topic rows naming the nodes
//!    (from ros_discovery_info) that `/api/state` carries, and its Prometheus
//!    registry exposes them as `ddscope_topic_node_info`. Oracle: the offline
//!    topics analysis of the same file (itself checked against tshark).

use ddscope_core::discovery::TopicNames;
use ddscope_core::events::TrafficType;
use ddscope_core::latency::{Correlator, CorrelatorConfig, Item};
use ddscope_core::ros2::{AssembleConfig, Assembler, TraceItem};
use ddscope_core::samples::SampleRecord;
use ddscope_core::source::{CaptureReader, PacketSource, Poll};
use ddscope_sysstat::system::SystemSource;
use ddscope_export::{ExportOptions, Exporters};
use ddscope_monitor::agent::{self, AgentCapture, AgentConfig};
use ddscope_monitor::agent::capture::CaptureCounters;
use ddscope_monitor::stream::protocol::{Batch, StreamItem};
use ddscope_monitor::server::{Central, Server, ServeConfig};
use ddscope_monitor::agent::upstream::Upstream;
use ddscope_trace::{EventContext, EventTime, Gid, Record, Ros2Event};
use ddscope_wire::{EntityId, Guid, GuidPrefix};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

const MS: i64 = 1_000_000;
const US: i64 = 1_000;
const T0: i64 = 1_700_000_000_000_000_000;
const N: i64 = 20;

fn gid(proc_: u8, key: u8) -> (Gid, Guid) {
    let mut g = [0u8; 24];
    g[..12].copy_from_slice(&[1, 0x10, 0, proc_, 0, 0, 0, 0, 0, 0, 0, 1]);
    g[12..16].copy_from_slice(&[0, 0, key, 3]);
    let mut p = [0u8; 12];
    p.copy_from_slice(&g[..12]);
    (Gid(g), Guid::new(GuidPrefix(p), EntityId([0, 0, key, 3])))
}

#[derive(Default)]
struct Host {
    recs: Vec<Record>,
}

impl Host {
    fn ev(&mut self, t: i64, pid: i64, tid: i64, event: Ros2Event) {
        self.recs.push(Record {
            event,
            time: EventTime { cycles: t as u64, ns_from_origin: t },
            context: EventContext { vpid: Some(pid), vtid: Some(tid), procname: None, cpu_id: None },
        });
    }
    fn node(&mut self, pid: i64, name: &str) {
        self.ev(T0 - 10 * MS, pid, pid, Ros2Event::RclNodeInit { node_handle: 1, rmw_handle: 2, node_name: name.into(), namespace: "/".into() });
    }
    fn publisher(&mut self, pid: i64, h: u64, topic: &str, g: Gid) {
        let t = T0 - 10 * MS;
        self.ev(t, pid, pid, Ros2Event::RmwPublisherInit { rmw_publisher_handle: h + 1, gid: g });
        self.ev(t, pid, pid, Ros2Event::RclPublisherInit { publisher_handle: h, node_handle: 1, rmw_publisher_handle: h + 1, topic_name: topic.into(), queue_depth: 10 });
    }
    fn subscription(&mut self, pid: i64, h: u64, topic: &str, cb: u64) {
        let t = T0 - 10 * MS;
        let (g, _) = gid(pid as u8, 0x40);
        self.ev(t, pid, pid, Ros2Event::RmwSubscriptionInit { rmw_subscription_handle: h + 1, gid: g });
        self.ev(t, pid, pid, Ros2Event::RclSubscriptionInit { subscription_handle: h, node_handle: 1, rmw_subscription_handle: h + 1, topic_name: topic.into(), queue_depth: 10 });
        self.ev(t, pid, pid, Ros2Event::RclcppSubscriptionInit { subscription_handle: h, subscription: h + 2 });
        self.ev(t, pid, pid, Ros2Event::RclcppSubscriptionCallbackAdded { subscription: h + 2, callback: cb });
    }
    /// rclcpp → rcl → rmw publish at t, t+1 µs, t+2 µs (Jazzy: with its timestamp); returns the source timestamp.
    fn publish(&mut self, t: i64, pid: i64, tid: i64, h: u64, msg: u64) -> i64 {
        self.ev(t, pid, tid, Ros2Event::RclcppPublish { publisher_handle: None, message: msg });
        self.ev(t + US, pid, tid, Ros2Event::RclPublish { publisher_handle: h, message: msg });
        let ts = t + 2 * US;
        self.ev(ts, pid, tid, Ros2Event::RmwPublish { rmw_publisher_handle: Some(h + 1), message: msg, timestamp: Some(ts) });
        ts
    }
    fn take(&mut self, t: i64, pid: i64, tid: i64, h: u64, msg: u64, src: i64) {
        self.ev(t, pid, tid, Ros2Event::RmwTake { rmw_subscription_handle: h + 1, message: msg, source_timestamp: src, taken: 1 });
        self.ev(t + 100, pid, tid, Ros2Event::RclTake { message: msg });
        self.ev(t + 200, pid, tid, Ros2Event::RclcppTake { message: msg });
    }
    /// As the agent's follower does: the assembler over the records in time order.
    fn items(mut self) -> Vec<TraceItem> {
        self.recs.sort_by_key(|r| r.time.ns_from_origin);
        let mut a = Assembler::new(AssembleConfig::default());
        let mut out = vec![];
        for r in &self.recs {
            a.push(r, &mut |i| out.push(i));
        }
        a.finish(&mut |i| out.push(i));
        out
    }
}

fn sample(cap: &str, w: Guid, sn: i64, first: i64, last: i64, sts: i64) -> SampleRecord {
    SampleRecord {
        capture: Arc::from(cap),
        writer_id: w,
        sn,
        topic: Some(Arc::new(TopicNames::new("rt/image", "sensor_msgs::msg::dds_::Image_"))),
        node: None,
        traffic_type: TrafficType::User,
        first_ts_ns: first,
        first_ip_ts_ns: first,
        last_ts_ns: last,
        complete: true,
        first_frame: 1,
        last_frame: 1,
        sample_size: 100,
        fragment_size: None,
        frags_expected: 1,
        frags_seen: 1,
        submsgs: 1,
        ip_frags: 1,
        bytes: 100,
        retransmitted_frags: 0,
        retransmitted_bytes: 0,
        destinations: 1,
        nack_frags: 0,
        pcp: None,
        vendor_id: 0x0110,
        closed_by: ddscope_core::samples::ClosedBy::Complete,
        source_ts_ns: Some(sts),
        dst: None,
        zenoh_zids: None,
    }
}

fn path() -> Vec<String> {
    vec!["/raw_image".into(), "/image".into(), "/actuator".into()]
}

/// (pc1 trace, pc2 trace, pc1 capture, pc2 capture)
fn scenario() -> (Vec<TraceItem>, Vec<TraceItem>, Vec<Item>, Vec<Item>) {
    let (g_raw, _) = gid(1, 1);
    let (g_img, w_img) = gid(2, 2);
    let (g_act, _) = gid(3, 3);
    let (mut h1, mut h2) = (Host::default(), Host::default());
    h1.node(100, "sensor_1");
    h1.publisher(100, 0x1000, "/raw_image", g_raw);
    h1.node(200, "filter");
    h1.subscription(200, 0x2000, "/raw_image", 0x2100);
    h1.publisher(200, 0x2200, "/image", g_img);
    h2.node(300, "msg_driven");
    h2.subscription(300, 0x3000, "/image", 0x3100);
    h2.publisher(300, 0x3200, "/actuator", g_act);
    h2.node(400, "actuator");
    h2.subscription(400, 0x4000, "/actuator", 0x4100);
    let (mut cap1, mut cap2) = (vec![], vec![]);
    for k in 0..N {
        let t = T0 + k * 100 * MS;
        let ts1 = h1.publish(t, 100, 101, 0x1000, 0x9000);
        h1.take(t + 50 * US, 200, 201, 0x2000, 0x9100, ts1);
        h1.ev(t + 60 * US, 200, 201, Ros2Event::CallbackStart { callback: 0x2100, is_intra_process: 0 });
        let ts2 = h1.publish(t + 70 * US, 200, 201, 0x2200, 0x9200);
        h1.ev(t + 80 * US, 200, 201, Ros2Event::CallbackEnd { callback: 0x2100 });
        cap1.push(Item::Sample(sample("pc1", w_img, k + 1, t + 90 * US, t + 95 * US, ts2)));
        cap2.push(Item::Sample(sample("pc2", w_img, k + 1, t + 300 * US, t + 400 * US, ts2)));
        cap1.push(Item::Watermark(t + 95 * US));
        cap2.push(Item::Watermark(t + 400 * US));
        h2.take(t + 450 * US, 300, 301, 0x3000, 0x9300, ts2);
        h2.ev(t + 460 * US, 300, 301, Ros2Event::CallbackStart { callback: 0x3100, is_intra_process: 0 });
        let ts3 = h2.publish(t + 10 * MS + 460 * US, 300, 301, 0x3200, 0x9400);
        h2.ev(t + 10 * MS + 470 * US, 300, 301, Ros2Event::CallbackEnd { callback: 0x3100 });
        h2.take(t + 10 * MS + 500 * US, 400, 401, 0x4000, 0x9500, ts3);
        h2.ev(t + 10 * MS + 510 * US, 400, 401, Ros2Event::CallbackStart { callback: 0x4100, is_intra_process: 0 });
        h2.ev(t + 10 * MS + 520 * US, 400, 401, Ros2Event::CallbackEnd { callback: 0x4100 });
    }
    (h1.items(), h2.items(), cap1, cap2)
}

fn capture_stream(items: &[Item]) -> Vec<StreamItem> {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Sample(r) => Some(StreamItem::sample(r)),
            Item::Frag(f) => Some(StreamItem::frag(f)),
            Item::Watermark(t) => Some(StreamItem::Watermark { t: *t }),
            Item::End | Item::Exchange(_) => None,
        })
        .collect()
}

fn batch(agent: &str, seq: u64, items: Vec<StreamItem>, last: bool) -> Batch {
    Batch { agent: agent.into(), seq, sent_ns: 0, items, dropped_items: 0, topics: None, system: vec![], counters: None, last }
}

#[test]
fn chains_and_ros_layers_in_api_state_equal_the_offline_correlator() {
    let (t1, t2, c1, c2) = scenario();
    let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.window_ns = 1_000 * MS;
    cfg.chain_path = Some(path());
    let mut central = Central::new(cfg);
    // Both agents are known before they stream; each sends its trace and capture items in a few batches.
    central.ingest(batch("pc1", 1, vec![], false)).unwrap();
    central.ingest(batch("pc2", 1, vec![], false)).unwrap();
    for (agent, trace, cap) in [("pc1", &t1, &c1), ("pc2", &t2, &c2)] {
        let mut items: Vec<StreamItem> = trace.iter().filter_map(StreamItem::trace).collect();
        items.extend(capture_stream(cap));
        let half = items.len() / 2;
        let rest = items.split_off(half);
        central.ingest(batch(agent, 2, items, false)).unwrap();
        central.ingest(batch(agent, 3, rest, true)).unwrap();
    }
    let state = central.state(json!({}), &|_| 0);

    // The offline path: the same items straight into a correlator.
    let mut ros = ddscope_core::latency::RosOptions::default();
    ros.chain.path = Some(path());
    let mut c = Correlator::new(
        CorrelatorConfig { captures: vec!["pc1".into(), "pc2".into()], offsets_ns: vec![0, 0], window_ns: 1_000 * MS, message_rows: true, submessage_rows: true, ros, ..Default::default() },
        Default::default(),
    );
    let (tr1, tr2) = (c.add_trace(0), c.add_trace(1));
    for it in t1 {
        c.push_trace(tr1, it, &mut |_| {});
    }
    for it in t2 {
        c.push_trace(tr2, it, &mut |_| {});
    }
    for it in c1 {
        c.push(0, it, &mut |_| {});
    }
    for it in c2 {
        c.push(1, it, &mut |_| {});
    }
    c.finish(&mut |_| {});

    let chain = &state["ros2"]["chains"]["chain"];
    assert_eq!(*chain, serde_json::to_value(c.chains().unwrap().summary()).unwrap(), "chain summary");
    assert_eq!(chain["instances"], N, "{chain}");
    // Chosen instants: rclcpp_publish(/raw_image) at t → callback_start of actuator at t + 10.51 ms.
    for k in ["min_ms", "max_ms"] {
        assert!((chain["e2e"][k].as_f64().unwrap() - 10.51).abs() < 1e-9, "{k}: {chain}");
    }
    assert_eq!(state["ros2"]["chains"]["paths"], serde_json::to_value(c.chains().unwrap().paths()).unwrap());
    assert_eq!(state["ros2"]["chains"]["paths"][0]["topics"], json!(path()));
    assert_eq!(state["ros2"]["join"], serde_json::to_value(c.join_stats()).unwrap());

    // The wire hop /image pc1 → pc2, layer by layer (chosen instants, ms).
    let flow = state["flows"].as_array().unwrap().iter().map(|f| &f["summary"]).find(|f| f["topic"] == "/image" && f["receiver"] == "pc2").expect("flow");
    let layer = |n: &str| flow["layers"].as_array().unwrap().iter().find(|l| l[0] == n).map(|l| l[1].clone()).unwrap_or_else(|| panic!("{n} in {flow}"));
    for (n, ms) in [("ros_publish", 0.002), ("dds_send", 0.018), ("message", 0.310), ("dds_receive", 0.050), ("executor", 0.010), ("callback", 10.010), ("ros_e2e", 0.390)] {
        let l = layer(n);
        assert_eq!(l["count"], N, "{n}");
        assert!((l["max_ms"].as_f64().unwrap() - ms).abs() < 1e-9 && (l["min_ms"].as_f64().unwrap() - ms).abs() < 1e-9, "{n}: {l}");
    }
    let off = c.summaries().into_iter().find(|f| f.topic == "/image" && f.receiver == "pc2").unwrap();
    assert_eq!(flow["layers"], serde_json::to_value(&off.layers).unwrap());
    assert_eq!(state["agents"][0]["trace_items"].as_u64().map(|n| n > 0), Some(true));
}

/// An idle agent stops holding back judgement for its trace too, and resumes it when it comes back.
#[test]
fn a_silent_agents_trace_does_not_block_judgement() {
    let (t1, _, c1, c2) = scenario();
    let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.window_ns = 1_000 * MS;
    cfg.idle = Duration::from_millis(200);
    let mut central = Central::new(cfg);
    // pc1 sends its trace but only half of it (the trace watermark stops early) and then goes silent.
    let trace: Vec<StreamItem> = t1.iter().filter_map(StreamItem::trace).collect();
    let early: Vec<StreamItem> = trace.into_iter().take(20).collect();
    let mut items = early;
    items.extend(capture_stream(&c1));
    central.ingest(batch("pc1", 1, items, false)).unwrap();
    central.ingest(batch("pc2", 1, capture_stream(&c2), false)).unwrap();
    let judged = |c: &Central| c.state(json!({}), &|_| 0)["correlation"]["samples_judged"].as_u64().unwrap();
    let before = judged(&central);
    std::thread::sleep(Duration::from_millis(300));
    central.tick();
    // pc2 still runs: its watermark judges everything up to it once pc1 (capture and trace) is idle.
    central.ingest(batch("pc2", 2, vec![StreamItem::Watermark { t: T0 + 100 * N * MS + 5_000 * MS }], false)).unwrap();
    let after = judged(&central);
    assert!(after > before && after >= N as u64, "judged {before} -> {after}");
}

/// A capture file through the agent's loop (then an idle interface).
struct Replay {
    reader: CaptureReader,
    ended: bool,
    frames: u64,
}

impl PacketSource for Replay {
    fn poll(&mut self, on_packet: &mut dyn FnMut(&ddscope_core::source::Packet<'_>)) -> anyhow::Result<Poll> {
        if self.ended {
            std::thread::sleep(Duration::from_millis(10));
            return Ok(Poll::Idle);
        }
        let mut n = 0u64;
        let p = self.reader.poll(&mut |p| {
            n += 1;
            on_packet(p)
        })?;
        self.frames += n;
        if p == Poll::Ended {
            self.ended = true;
            return Ok(Poll::Idle);
        }
        Ok(p)
    }
}

impl AgentCapture for Replay {
    fn counters(&mut self) -> CaptureCounters {
        CaptureCounters { received: self.frames, ..Default::default() }
    }
    fn timestamp_note(&self) -> String {
        "capture file".into()
    }
}

fn shared_capture(name: &str) -> PathBuf {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = [std::env::var("DDSCOPE_SHARED_CAPTURES").ok().map(PathBuf::from), Some(repo.join("../shared/captures")), Some("/work/shared/captures".into())];
    let dir = candidates.into_iter().flatten().find(|d| d.join(name).is_file()).unwrap_or_else(|| panic!("{name} not found in ../shared/captures (or $DDSCOPE_SHARED_CAPTURES)"));
    dir.join(name)
}

#[test]
fn node_names_from_the_wire_reach_api_state_and_prometheus() {
    let file = shared_capture("cyclone-talker-listener-loopback.pcapng");
    // Oracle: the offline topics analysis of the same capture.
    let mut topics = ddscope_core::topics::TopicsAnalysis::new();
    let res = ddscope_core::pipeline::run_file(&file, "pc1", Default::default(), Some(Default::default()), None, &mut topics).expect("offline topics");
    let offline_rows = topics.rows("pc1", &res.decoder.discovery, false, &[TrafficType::User]);
    let want: Vec<(String, Vec<String>, Vec<String>)> =
        offline_rows.iter().filter_map(|r| r.names.as_ref().map(|n| (n.topic_name.clone(), r.writer_nodes.clone(), r.reader_nodes.clone()))).filter(|r| !r.1.is_empty() || !r.2.is_empty()).collect();
    assert!(want.iter().any(|(t, w, r)| t == "/chatter" && w == &["/talker"] && r == &["/listener"]), "{want:?}");

    let server = Server::start(ServeConfig::new("127.0.0.1:0".parse().unwrap())).expect("serve");
    let ex = Exporters::start("pc1", &["prometheus=127.0.0.1:0".parse().unwrap()], ExportOptions::default()).expect("exporters");
    let cfg = AgentConfig {
        name: "pc1".into(),
        upstream: Some(Upstream { url: format!("http://{}", server.addr()), token: None, max_queued_items: 100_000, otlp: false }),
        upstream_otlp: None,
        system: SystemSource::proc(),
        duration: Some(Duration::from_millis(1500)),
        trace: None,
        domain: None,
        window: ddscope_core::window::Window::DEFAULT,
        clock_sync: None,
        limits: Default::default(),
    };
    let cap = Replay { reader: CaptureReader::open(&file, None).expect("open"), ended: false, frames: 0 };
    let (_, ex) = agent::run(cfg, cap, Some(ex), Arc::new(AtomicBool::new(false)), &mut |n| eprintln!("agent: {n}")).expect("agent");
    let ex = ex.expect("exporters back");
    let body = ureq::get(&format!("http://{}/api/state", server.addr())).call().expect("state").into_body().read_to_string().expect("body");
    let state: Value = serde_json::from_str(&body).expect("json");
    let rows = state["agents"][0]["topics"].as_array().expect("topic rows");
    for (topic, w, r) in &want {
        let row = rows.iter().find(|x| x["topic_name"] == topic.as_str());
        // The live table shows user topics with traffic; every one of them names the offline nodes.
        if let Some(row) = row {
            assert_eq!(row["writer_nodes"], json!(w), "{topic}");
            assert_eq!(row["reader_nodes"], json!(r), "{topic}");
        }
    }
    assert!(rows.iter().any(|x| x["topic_name"] == "/chatter" && x["writer_nodes"] == json!(["/talker"])), "{rows:?}");
    let text = ex.registry().render();
    assert!(text.contains(r#"ddscope_topic_node_info{capture="pc1",topic="/chatter",role="writer",node="/talker"} 1"#), "{text}");
    assert!(text.contains(r#"ddscope_topic_node_info{capture="pc1",topic="/chatter",role="reader",node="/listener"} 1"#));
    assert!(text.contains(r#"ddscope_export_dropped_series_total{kind="topic_node"} 0"#));
    ex.shutdown(Duration::from_secs(1));
}
