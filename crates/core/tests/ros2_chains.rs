//! The join and chain logic on synthetic ros2_tracing event streams (the
//! thesis's simple robotic application: sensor_1 → filter on pc1, /image over
//! the wire, msg_driven → actuator on pc2), fed through the assembler into
//! the correlator beside capture items.
//!
//! Oracle: the instants the test chose for every event; each layer and the
//! chain's end-to-end latency is the difference of two of them, computed here.

use ddscope_core::discovery::TopicNames;
use ddscope_core::events::TrafficType;
use ddscope_core::latency::{Correlator, CorrelatorConfig, Item, LatencyRow};
use ddscope_core::ros2::{AssembleConfig, Assembler, ChainRow, JoinConfig, TraceItem};
use ddscope_core::samples::SampleRecord;
use ddscope_trace::{EventContext, EventTime, Gid, Record, Ros2Event};
use ddscope_wire::{EntityId, Guid, GuidPrefix};
use std::sync::Arc;

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
    /// A node with a publisher (handles derived from `pid`).
    fn node(&mut self, t: i64, pid: i64, name: &str) {
        self.ev(t, pid, pid, Ros2Event::RclNodeInit { node_handle: 1, rmw_handle: 2, node_name: name.into(), namespace: "/".into() });
    }
    fn publisher(&mut self, t: i64, pid: i64, h: u64, topic: &str, g: Gid) {
        self.ev(t, pid, pid, Ros2Event::RmwPublisherInit { rmw_publisher_handle: h + 1, gid: g });
        self.ev(t, pid, pid, Ros2Event::RclPublisherInit { publisher_handle: h, node_handle: 1, rmw_publisher_handle: h + 1, topic_name: topic.into(), queue_depth: 10 });
    }
    fn subscription(&mut self, t: i64, pid: i64, h: u64, topic: &str, cb: u64) {
        let (g, _) = gid(pid as u8, 0x40);
        self.ev(t, pid, pid, Ros2Event::RmwSubscriptionInit { rmw_subscription_handle: h + 1, gid: g });
        self.ev(t, pid, pid, Ros2Event::RclSubscriptionInit { subscription_handle: h, node_handle: 1, rmw_subscription_handle: h + 1, topic_name: topic.into(), queue_depth: 10 });
        self.ev(t, pid, pid, Ros2Event::RclcppSubscriptionInit { subscription_handle: h, subscription: h + 2 });
        self.ev(t, pid, pid, Ros2Event::RclcppSubscriptionCallbackAdded { subscription: h + 2, callback: cb });
    }
    /// rclcpp → rcl → rmw publish at t, t+1 µs, t+2 µs; returns the source timestamp.
    fn publish(&mut self, t: i64, pid: i64, tid: i64, h: u64, msg: u64, jazzy: bool) -> i64 {
        self.ev(t, pid, tid, Ros2Event::RclcppPublish { publisher_handle: None, message: msg });
        self.ev(t + US, pid, tid, Ros2Event::RclPublish { publisher_handle: h, message: msg });
        let ts = t + 2 * US;
        self.ev(ts, pid, tid, Ros2Event::RmwPublish { rmw_publisher_handle: jazzy.then_some(h + 1), message: msg, timestamp: jazzy.then_some(ts) });
        ts
    }
    fn take(&mut self, t: i64, pid: i64, tid: i64, h: u64, msg: u64, src: i64) {
        self.ev(t, pid, tid, Ros2Event::RmwTake { rmw_subscription_handle: h + 1, message: msg, source_timestamp: src, taken: 1 });
        self.ev(t + 100, pid, tid, Ros2Event::RclTake { message: msg });
        self.ev(t + 200, pid, tid, Ros2Event::RclcppTake { message: msg });
    }
    fn items(mut self, cfg: AssembleConfig) -> (Vec<TraceItem>, Assembler) {
        self.recs.sort_by_key(|r| r.time.ns_from_origin);
        let mut a = Assembler::new(cfg);
        let mut out = vec![];
        for r in &self.recs {
            a.push(r, &mut |i| out.push(i));
        }
        a.finish(&mut |i| out.push(i));
        (out, a)
    }
}

fn sample(cap: &str, w: Guid, sn: i64, first: i64, last: i64, sts: i64) -> SampleRecord {
    SampleRecord {
        capture: Arc::from(cap),
        writer_id: w,
        sn,
        topic: Some(Arc::new(TopicNames::new("rt/image", "sensor_msgs::msg::dds_::Image_"))),
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
        node: None,
    }
}

/// The robotic pipeline: per message k the instants below (relative to its base).
struct Scenario {
    pc1: Vec<TraceItem>,
    pc2: Vec<TraceItem>,
    cap1: Vec<Item>,
    cap2: Vec<Item>,
}

fn scenario(jazzy: bool, with_inits: bool, cfg: AssembleConfig) -> Scenario {
    let (g_raw, _) = gid(1, 1);
    let (g_img, w_img) = gid(2, 2);
    let (g_act, _) = gid(3, 3);
    let mut h1 = Host { recs: vec![] };
    let mut h2 = Host { recs: vec![] };
    let t_init = T0 - 10 * MS;
    if with_inits {
        h1.node(t_init, 100, "sensor_1");
        h1.publisher(t_init, 100, 0x1000, "/raw_image", g_raw);
        h1.node(t_init, 200, "filter");
        h1.subscription(t_init, 200, 0x2000, "/raw_image", 0x2100);
        h1.publisher(t_init, 200, 0x2200, "/image", g_img);
        h2.node(t_init, 300, "msg_driven");
        h2.subscription(t_init, 300, 0x3000, "/image", 0x3100);
        h2.publisher(t_init, 300, 0x3200, "/actuator", g_act);
        h2.node(t_init, 400, "actuator");
        h2.subscription(t_init, 400, 0x4000, "/actuator", 0x4100);
    }
    let mut cap1 = vec![];
    let mut cap2 = vec![];
    for k in 0..N {
        let t = T0 + k * 100 * MS;
        // sensor_1 (pc1): publish /raw_image.
        let ts1 = h1.publish(t, 100, 101, 0x1000, 0x9000, jazzy);
        // filter (pc1): take it, republish /image in the callback.
        h1.take(t + 50 * US, 200, 201, 0x2000, 0x9100, ts1);
        h1.ev(t + 60 * US, 200, 201, Ros2Event::CallbackStart { callback: 0x2100, is_intra_process: 0 });
        let ts2 = h1.publish(t + 70 * US, 200, 201, 0x2200, 0x9200, jazzy);
        h1.ev(t + 80 * US, 200, 201, Ros2Event::CallbackEnd { callback: 0x2100 });
        // /image on the wire: first at pc1 at +90 µs, complete at pc2 at +400 µs.
        cap1.push(Item::Sample(sample("pc1", w_img, k + 1, t + 90 * US, t + 95 * US, ts2)));
        cap2.push(Item::Sample(sample("pc2", w_img, k + 1, t + 300 * US, t + 400 * US, ts2)));
        cap1.push(Item::Watermark(t + 95 * US));
        cap2.push(Item::Watermark(t + 400 * US));
        // msg_driven (pc2): take /image, 10 ms of work, publish /actuator in the callback.
        h2.take(t + 450 * US, 300, 301, 0x3000, 0x9300, ts2);
        h2.ev(t + 460 * US, 300, 301, Ros2Event::CallbackStart { callback: 0x3100, is_intra_process: 0 });
        let ts3 = h2.publish(t + 10 * MS + 460 * US, 300, 301, 0x3200, 0x9400, jazzy);
        h2.ev(t + 10 * MS + 470 * US, 300, 301, Ros2Event::CallbackEnd { callback: 0x3100 });
        // actuator (pc2): take /actuator (same host).
        h2.take(t + 10 * MS + 500 * US, 400, 401, 0x4000, 0x9500, ts3);
        h2.ev(t + 10 * MS + 510 * US, 400, 401, Ros2Event::CallbackStart { callback: 0x4100, is_intra_process: 0 });
        h2.ev(t + 10 * MS + 520 * US, 400, 401, Ros2Event::CallbackEnd { callback: 0x4100 });
    }
    let (pc1, _) = h1.items(cfg);
    let (pc2, _) = h2.items(cfg);
    Scenario { pc1, pc2, cap1, cap2 }
}

fn correlate(s: Scenario, cfg: CorrelatorConfig) -> (Correlator, Vec<LatencyRow>, Vec<ChainRow>) {
    let mut c = Correlator::new(CorrelatorConfig { captures: vec!["pc1".into(), "pc2".into()], offsets_ns: vec![0, 0], window_ns: 1_000 * MS, ..cfg }, Default::default());
    let t1 = c.add_trace(0);
    let t2 = c.add_trace(1);
    let mut rows = vec![];
    for it in s.pc1 {
        c.push_trace(t1, it, &mut |r| rows.push(r));
    }
    for it in s.pc2 {
        c.push_trace(t2, it, &mut |r| rows.push(r));
    }
    for it in s.cap1 {
        c.push(0, it, &mut |r| rows.push(r));
    }
    for it in s.cap2 {
        c.push(1, it, &mut |r| rows.push(r));
    }
    c.finish(&mut |r| rows.push(r));
    let chain = c.take_chain_rows();
    (c, rows, chain)
}

fn path() -> Vec<String> {
    vec!["/raw_image".into(), "/image".into(), "/actuator".into()]
}

#[test]
fn chain_through_two_hosts_adds_up_to_its_end_to_end_latency() {
    let mut cfg = CorrelatorConfig::default();
    cfg.ros.chain.path = Some(path());
    cfg.ros.chain.rows = true;
    let (c, rows, chain) = correlate(scenario(true, true, AssembleConfig::default()), cfg);
    // Rows: /raw_image and /actuator same-host, /image over the wire with both ends traced.
    assert_eq!(rows.iter().filter(|r| r.status == "same_host").count(), 2 * N as usize);
    let img: Vec<_> = rows.iter().filter(|r| r.status == "delivered").collect();
    assert_eq!(img.len(), N as usize);
    for r in &img {
        let ros = r.ros.as_deref().expect("joined");
        assert_eq!((ros.ros_publish_ns, ros.dds_send_ns, r.latency_ns, ros.dds_receive_ns, ros.executor_ns, ros.callback_ns, ros.ros_e2e_ns),
            (Some(2 * US), Some(18 * US), Some(310 * US), Some(50 * US), Some(10 * US), Some(10 * MS + 10 * US), Some(390 * US)));
        assert_eq!(ros.sender_node.as_deref(), Some("/filter"));
        assert_eq!(ros.receiver_node.as_deref(), Some("/msg_driven"));
    }
    // The chain: N instances, end-to-end = sensor_1's rclcpp_publish -> actuator's callback_start.
    let ch = c.chains().expect("chains").summary().expect("summary");
    assert_eq!((ch.instances, ch.incomplete), (N as u64, 0));
    assert_eq!((ch.e2e.count, ch.e2e.min_ms, ch.e2e.max_ms), (N as u64, 10.51, 10.51));
    assert_eq!(chain.len(), 3 * N as usize);
    for inst in chain.chunks(3) {
        let e2e = inst[0].chain_e2e_ns.expect("e2e");
        assert_eq!(e2e, 10 * MS + 510 * US);
        // Σ hop ros_e2e + Σ node = end-to-end.
        let sum: i64 = inst.iter().map(|r| r.h.layers.ros_e2e.unwrap() + r.node_ns.unwrap_or(0)).sum();
        assert_eq!(sum, e2e);
        assert_eq!(inst.iter().map(|r| r.h.level.as_str()).collect::<Vec<_>>(), ["same_host", "wire", "same_host"]);
        assert_eq!(inst[0].h.layers.dds_local, Some(48 * US));
        assert_eq!(inst[0].node_ns, Some(10 * US));
        assert_eq!(inst[1].node_ns, Some(10 * MS));
        assert_eq!(inst[2].h.layers.dds_local, Some(38 * US));
        assert_eq!(inst[2].node_ns, None);
    }
    // --path auto finds exactly this chain (its prefixes continue, so they are not listed).
    let paths = c.chains().expect("chains").paths();
    assert_eq!(paths.len(), 1, "{paths:?}");
    assert_eq!((paths[0].topics.clone(), paths[0].count), (path(), N as u64));
}

#[test]
fn humble_chain_joins_by_publish_window_through_the_wire() {
    let mut cfg = CorrelatorConfig::default();
    cfg.ros.chain.path = Some(path());
    let (c, rows, _) = correlate(scenario(false, true, AssembleConfig::default()), cfg);
    let img: Vec<_> = rows.iter().filter(|r| r.status == "delivered").collect();
    // The wire sample's INFO_TS lies in exactly one publish window of /image's publisher
    // (rmw_publish … the thread's next event): joined by publish window, before publish order.
    assert!(img.iter().all(|r| r.join().as_str() == "publish_time"), "{:?}", img.iter().map(|r| r.join()).collect::<Vec<_>>());
    // Humble publishes carry no timestamp: /raw_image and /actuator never cross the wire; their
    // same-host takes are joined by publish time (the take's source timestamp is the first after
    // the publish's rmw_publish and before the publisher's next one), so the chain is complete.
    let same: Vec<_> = rows.iter().filter(|r| r.status == "same_host").collect();
    assert_eq!(same.len(), 2 * N as usize);
    assert!(same.iter().all(|r| r.join().as_str() == "publish_time"));
    // the publish order gives the writer's sequence number of a same-host sample
    let sns: Vec<i64> = same.iter().filter(|r| r.topic.as_ref().is_some_and(|t| t.topic_name == "/raw_image")).map(|r| r.sn).collect();
    assert_eq!(sns, (1..=N as i64).collect::<Vec<_>>());
    let j = c.join_stats().expect("stats");
    assert_eq!((j.joined_publish_time, j.joined_publish_order), (N as u64, 0));
    assert_eq!((j.takes_same_host, j.takes_publish_time, j.takes_unjoined), (2 * N as u64, 2 * N as u64, 0));
    let ch = c.chains().unwrap().summary().unwrap();
    assert_eq!((ch.instances, ch.incomplete), (N as u64, 0));
    assert_eq!((ch.e2e.min_ms, ch.e2e.max_ms), (10.51, 10.51));
}

#[test]
fn humble_trace_started_too_late_is_reported_not_guessed() {
    let (c, rows, _) = correlate(scenario(false, false, AssembleConfig::default()), CorrelatorConfig::default());
    let img: Vec<_> = rows.iter().filter(|r| r.status == "delivered").collect();
    assert_eq!(img.len(), N as usize);
    // Takes still join by source timestamp at the receiver; the publish side does not.
    for r in &img {
        let ros = r.ros.as_deref().expect("take joined");
        assert_eq!(ros.join.map(|j| j.as_str()), Some("source_ts"));
        assert_eq!((ros.rclcpp_publish_ts_ns, ros.ros_publish_ns, ros.dds_send_ns, ros.ros_e2e_ns), (None, None, None, None));
    }
    let j = c.join_stats().expect("stats");
    assert_eq!((j.joined_publish_order, j.writers_too_late), (0, 1));
    assert!(j.problem_line().unwrap().contains("whose creation the trace did not see"), "{:?}", j.problem_line());
}

#[test]
fn open_states_and_tables_are_capped_and_counted() {
    // Two threads at most: the third open thread evicts the least recently seen one.
    let cfg = AssembleConfig { max_threads: 2, ..AssembleConfig::default() };
    let mut h = Host { recs: vec![] };
    for tid in 0..5i64 {
        h.ev(T0 + tid, 1, tid, Ros2Event::RclcppPublish { publisher_handle: None, message: tid as u64 });
    }
    let (_, a) = h.items(cfg);
    assert_eq!(a.stats.threads_evicted, 3);
    // A callback that never ends is closed after max_open_ns, so the watermark moves on.
    let cfg = AssembleConfig { max_open_ns: 50 * MS, ..AssembleConfig::default() };
    let mut h = Host { recs: vec![] };
    h.subscription(T0, 7, 0x10, "/x", 0x20);
    h.take(T0 + MS, 7, 8, 0x10, 0x30, 5);
    h.ev(T0 + 2 * MS, 7, 8, Ros2Event::CallbackStart { callback: 0x20, is_intra_process: 0 });
    for k in 0..20 {
        h.ev(T0 + 3 * MS + k * 20 * MS, 7, 9, Ros2Event::RclcppPublish { publisher_handle: None, message: 1 });
    }
    let (items, a) = h.items(cfg);
    assert!(a.stats.open_expired >= 1, "{:?}", a.stats);
    let last_wm = items.iter().filter_map(|i| if let TraceItem::Watermark(w) = i { Some(*w) } else { None }).max().unwrap();
    assert!(last_wm > T0 + 300 * MS, "watermark held back: {last_wm}");
    // The take is handed over (without its callback's end).
    assert!(items.iter().any(|i| matches!(i, TraceItem::Take(t) if t.callback_start_ts.is_some() && t.callback_end_ts.is_none())));
    // Publishes waiting for the join: beyond the cap the oldest is judged early, counted.
    let mut cfg = CorrelatorConfig::default();
    cfg.ros.join = JoinConfig { max_publishes: 4, ..JoinConfig::default() };
    let (c, _, _) = correlate(scenario(true, true, AssembleConfig::default()), cfg);
    assert!(c.join_stats().unwrap().publishes_judged_early > 0);
}
