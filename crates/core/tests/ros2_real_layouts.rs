//! The join on event sequences as real ROS 2 processes record them (Humble
//! and Jazzy), not as a tidy generator would: every node logs to /rosout
//! right before it publishes (rcl's logging publishes through a copy of the
//! publisher it declared, so the handle is undeclared on Humble), the rmw
//! publishes `ros_discovery_info` without rcl, and its graph listener takes it
//! with no source timestamp. The join before this layer let the /rosout log
//! claim the data sample's take (it was "the publish just before").
//!
//! Oracle: the instants the test chose; each take must be joined to the data
//! publish the test made for it.

use ddscope_core::latency::{Correlator, CorrelatorConfig, LatencyRow};
use ddscope_core::ros2::{AssembleConfig, Assembler, TraceItem};
use ddscope_trace::{EventContext, EventTime, Gid, Record, Ros2Event};

const US: i64 = 1_000;
const MS: i64 = 1_000_000;
const T0: i64 = 1_700_000_000_000_000_000;
const N: i64 = 50;

struct Host {
    recs: Vec<Record>,
}

impl Host {
    fn ev(&mut self, t: i64, pid: i64, tid: i64, event: Ros2Event) {
        self.recs.push(Record { event, time: EventTime { cycles: t as u64, ns_from_origin: t }, context: EventContext { vpid: Some(pid), vtid: Some(tid), procname: None, cpu_id: None } });
    }
    fn items(mut self) -> (Vec<TraceItem>, Assembler) {
        self.recs.sort_by_key(|r| r.time.ns_from_origin);
        let mut a = Assembler::new(AssembleConfig::default());
        let mut out = vec![];
        for r in &self.recs {
            a.push(r, &mut |i| out.push(i));
        }
        a.finish(&mut |i| out.push(i));
        (out, a)
    }
}

fn gid(b: u8) -> Gid {
    let mut g = [0u8; 24];
    g[0] = 1;
    g[15] = b;
    Gid(g)
}

/// Two processes on one host: `source` publishes /topic_a from a timer, logging right before;
/// `sink` takes it and logs in its callback. Returns the trace and the data publishes' rclcpp instants.
fn host(jazzy: bool) -> (Host, Vec<i64>) {
    let mut h = Host { recs: vec![] };
    let t = T0 - 100 * MS;
    for (pid, name) in [(10i64, "source"), (20, "sink")] {
        h.ev(t, pid, pid, Ros2Event::RclInit { context_handle: 1, version: "4.1.1".into() });
        // rcl's /rosout publisher: declared on a stack address before the node's init.
        h.ev(t + US, pid, pid, Ros2Event::RmwPublisherInit { rmw_publisher_handle: 0x51, gid: gid(0x51) });
        h.ev(t + 2 * US, pid, pid, Ros2Event::RclPublisherInit { publisher_handle: 0x7ffd_0000, node_handle: 0x1, rmw_publisher_handle: 0x51, topic_name: "/rosout".into(), queue_depth: 1000 });
        h.ev(t + 3 * US, pid, pid, Ros2Event::RclNodeInit { node_handle: 0x1, rmw_handle: 0x2, node_name: name.into(), namespace: "/".into() });
        // The rmw's ros_discovery_info writer and reader (rmw_fastrtps declares them without rcl).
        h.ev(t + 4 * US, pid, pid, Ros2Event::RmwPublisherInit { rmw_publisher_handle: 0x61, gid: gid(0x61) });
        h.ev(t + 5 * US, pid, pid, Ros2Event::RmwSubscriptionInit { rmw_subscription_handle: 0x62, gid: gid(0x62) });
        h.ev(t + 6 * US, pid, pid, Ros2Event::RmwPublish { rmw_publisher_handle: jazzy.then_some(0x61), message: 0x7ffd_1000, timestamp: jazzy.then_some(t + 6 * US) });
    }
    h.ev(t + 10 * US, 10, 10, Ros2Event::RmwPublisherInit { rmw_publisher_handle: 0x101, gid: gid(0x11) });
    h.ev(t + 11 * US, 10, 10, Ros2Event::RclPublisherInit { publisher_handle: 0x100, node_handle: 0x1, rmw_publisher_handle: 0x101, topic_name: "/topic_a".into(), queue_depth: 10 });
    h.ev(t + 12 * US, 10, 10, Ros2Event::RclTimerInit { timer_handle: 0x300, period: 10 * MS });
    h.ev(t + 13 * US, 10, 10, Ros2Event::RclcppTimerCallbackAdded { timer_handle: 0x300, callback: 0x301 });
    h.ev(t + 14 * US, 10, 10, Ros2Event::RclcppTimerLinkNode { timer_handle: 0x300, node_handle: 0x1 });
    h.ev(t + 10 * US, 20, 20, Ros2Event::RmwSubscriptionInit { rmw_subscription_handle: 0x201, gid: gid(0x21) });
    h.ev(t + 11 * US, 20, 20, Ros2Event::RclSubscriptionInit { subscription_handle: 0x200, node_handle: 0x1, rmw_subscription_handle: 0x201, topic_name: "/topic_a".into(), queue_depth: 10 });
    h.ev(t + 12 * US, 20, 20, Ros2Event::RclcppSubscriptionInit { subscription_handle: 0x200, subscription: 0x202 });
    h.ev(t + 13 * US, 20, 20, Ros2Event::RclcppSubscriptionCallbackAdded { subscription: 0x202, callback: 0x203 });
    let mut data = vec![];
    for k in 0..N {
        let b = T0 + k * 10 * MS;
        // source, timer thread 11: log (rcl_publish of a copy of the /rosout publisher), then publish.
        h.ev(b, 10, 11, Ros2Event::CallbackStart { callback: 0x301, is_intra_process: 0 });
        h.ev(b + US, 10, 11, Ros2Event::RclPublish { publisher_handle: 0x7ffd_2000, message: 0x7ffd_3000 });
        h.ev(b + 2 * US, 10, 11, Ros2Event::RmwPublish { rmw_publisher_handle: jazzy.then_some(0x51), message: 0x7ffd_3000, timestamp: jazzy.then_some(b + 2 * US) });
        let p = b + 10 * US;
        h.ev(p, 10, 11, Ros2Event::RclcppPublish { publisher_handle: None, message: 0x9000 });
        h.ev(p + US, 10, 11, Ros2Event::RclPublish { publisher_handle: 0x100, message: 0x9000 });
        h.ev(p + 2 * US, 10, 11, Ros2Event::RmwPublish { rmw_publisher_handle: jazzy.then_some(0x101), message: 0x9000, timestamp: jazzy.then_some(p + 2 * US) });
        // Humble: the DDS write stamps the sample after the tracepoint, before the thread's next event.
        let src = if jazzy { p + 2 * US } else { p + 5 * US };
        h.ev(p + 9 * US, 10, 11, Ros2Event::CallbackEnd { callback: 0x301 });
        data.push(p);
        // sink, executor thread 21: take, callback with a log.
        let s = b + 300 * US;
        h.ev(s, 20, 21, Ros2Event::RmwTake { rmw_subscription_handle: 0x201, message: 0x8000, source_timestamp: src, taken: 1 });
        h.ev(s + 100, 20, 21, Ros2Event::RclTake { message: 0x8000 });
        h.ev(s + 200, 20, 21, Ros2Event::RclcppTake { message: 0x8000 });
        h.ev(s + US, 20, 21, Ros2Event::CallbackStart { callback: 0x203, is_intra_process: 0 });
        h.ev(s + 2 * US, 20, 21, Ros2Event::RclPublish { publisher_handle: 0x7ffd_2000, message: 0x7ffd_4000 });
        h.ev(s + 3 * US, 20, 21, Ros2Event::RmwPublish { rmw_publisher_handle: jazzy.then_some(0x51), message: 0x7ffd_4000, timestamp: jazzy.then_some(s + 3 * US) });
        h.ev(s + 5 * US, 20, 21, Ros2Event::CallbackEnd { callback: 0x203 });
        // the rmw's graph listener (thread 22) takes ros_discovery_info: no source timestamp.
        h.ev(b + 500 * US, 20, 22, Ros2Event::RmwTake { rmw_subscription_handle: 0x62, message: 0x7ffd_5000, source_timestamp: 0, taken: 1 });
        h.ev(b + 501 * US, 20, 22, Ros2Event::RmwTake { rmw_subscription_handle: 0x62, message: 0x7ffd_5000, source_timestamp: 0, taken: 0 });
    }
    (h, data)
}

fn run(jazzy: bool) -> (Vec<LatencyRow>, Correlator, Assembler, Vec<i64>) {
    let (h, data) = host(jazzy);
    let (items, asm) = h.items();
    let cfg = CorrelatorConfig { captures: vec!["pc1".into()], offsets_ns: vec![0], window_ns: 1_000 * MS, ..CorrelatorConfig::default() };
    let mut c = Correlator::new(cfg, Default::default());
    c.set_ended(0, true, &mut |_| {});
    let t = c.add_trace(0);
    let mut rows = vec![];
    for it in items {
        c.push_trace(t, it, &mut |r| rows.push(r));
    }
    c.finish(&mut |r| rows.push(r));
    (rows, c, asm, data)
}

fn check(jazzy: bool) {
    let (rows, c, asm, data) = run(jazzy);
    // Every take joined to the data publish made for it, none to a log or discovery publish.
    let topic_a: Vec<_> = rows.iter().filter(|r| r.topic.as_ref().is_some_and(|t| t.topic_name == "/topic_a")).collect();
    assert_eq!(topic_a.len(), N as usize, "{:?}", c.join_stats());
    for (r, p) in topic_a.iter().zip(&data) {
        let ros = r.ros.as_deref().expect("joined");
        assert_eq!(ros.rclcpp_publish_ts_ns, Some(*p));
        assert_eq!(ros.sender_node.as_deref(), Some("/source"));
        assert_eq!(ros.join.map(|j| j.as_str()), Some(if jazzy { "source_ts" } else { "publish_time" }));
        assert_eq!(ros.ros_e2e_ns, Some(300 * US + US - 10 * US));
    }
    assert_eq!(rows.len(), N as usize, "no other row (no /rosout, no discovery)");
    let s = &asm.stats;
    if jazzy {
        // Jazzy names the rmw handle: the logs resolve to /rosout (published, taken by nobody here).
        assert_eq!((s.publishes_rosout, s.publishes, s.publishes_rmw_internal), (0, 3 * N as u64, 2));
    } else {
        assert_eq!((s.publishes_rosout, s.publishes, s.publishes_rmw_internal), (2 * N as u64, N as u64, 2));
    }
    assert_eq!((s.takes_rmw_internal, s.takes_trace_started_late, s.publishes_trace_started_late), (N as u64, 0, 0));
    assert!(s.notes().iter().all(|n| !n.contains("started after")), "{:?}", s.notes());
    let j = c.join_stats().expect("join");
    assert_eq!((j.takes_same_host, j.takes_ambiguous, j.takes_unjoined), (N as u64, 0, 0));
}

#[test]
fn humble_logs_and_discovery_never_claim_a_data_sample() {
    check(false);
}

#[test]
fn jazzy_logs_resolve_to_rosout_and_join_exactly() {
    check(true);
}

/// Two publishers of one topic whose windows hold the same source timestamp: the take is
/// counted as ambiguous, never guessed; a third publisher's sample elsewhere still joins.
#[test]
fn overlapping_windows_of_two_publishers_are_ambiguous() {
    let mut h = Host { recs: vec![] };
    let t = T0 - 100 * MS;
    for pid in [10i64, 11, 20] {
        h.ev(t, pid, pid, Ros2Event::RclInit { context_handle: 1, version: "4.1.1".into() });
        h.ev(t + US, pid, pid, Ros2Event::RclNodeInit { node_handle: 0x1, rmw_handle: 0x2, node_name: format!("n{pid}"), namespace: "/".into() });
    }
    for pid in [10i64, 11] {
        h.ev(t + 2 * US, pid, pid, Ros2Event::RclPublisherInit { publisher_handle: 0x100, node_handle: 0x1, rmw_publisher_handle: 0x101, topic_name: "/tf".into(), queue_depth: 10 });
    }
    h.ev(t + 2 * US, 20, 20, Ros2Event::RclSubscriptionInit { subscription_handle: 0x200, node_handle: 0x1, rmw_subscription_handle: 0x201, topic_name: "/tf".into(), queue_depth: 10 });
    let publish = |h: &mut Host, pid: i64, at: i64, msg: u64| {
        h.ev(at, pid, pid + 1000, Ros2Event::RclcppPublish { publisher_handle: None, message: msg });
        h.ev(at + US, pid, pid + 1000, Ros2Event::RclPublish { publisher_handle: 0x100, message: msg });
        h.ev(at + 2 * US, pid, pid + 1000, Ros2Event::RmwPublish { rmw_publisher_handle: None, message: msg, timestamp: None });
        h.ev(at + 8 * US, pid, pid + 1000, Ros2Event::CallbackEnd { callback: 0x9 });
    };
    // Both publish within 1 µs: their windows overlap around the first sample's stamp.
    publish(&mut h, 10, T0, 1);
    publish(&mut h, 11, T0 + US, 2);
    h.ev(T0 + 100 * US, 20, 21, Ros2Event::RmwTake { rmw_subscription_handle: 0x201, message: 3, source_timestamp: T0 + 4 * US, taken: 1 });
    // 10 ms later only one publishes.
    publish(&mut h, 10, T0 + 10 * MS, 4);
    h.ev(T0 + 10 * MS + 100 * US, 20, 21, Ros2Event::RmwTake { rmw_subscription_handle: 0x201, message: 5, source_timestamp: T0 + 10 * MS + 4 * US, taken: 1 });
    let (items, _) = h.items();
    let cfg = CorrelatorConfig { captures: vec!["pc1".into()], offsets_ns: vec![0], window_ns: 1_000 * MS, ..CorrelatorConfig::default() };
    let mut c = Correlator::new(cfg, Default::default());
    c.set_ended(0, true, &mut |_| {});
    let tr = c.add_trace(0);
    let mut rows = vec![];
    for it in items {
        c.push_trace(tr, it, &mut |r| rows.push(r));
    }
    c.finish(&mut |r| rows.push(r));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].ros.as_ref().and_then(|r| r.rclcpp_publish_ts_ns), Some(T0 + 10 * MS));
    let j = c.join_stats().unwrap();
    assert_eq!((j.takes_ambiguous, j.takes_same_host, j.takes_unjoined), (1, 1, 0));
    assert_eq!(j.ambiguous_topics.get("/tf"), Some(&1));
}

/// Galactic (and Foxy) without CARET: no rmw events, no source timestamp anywhere. Nothing is
/// joined; every callback's runs and durations, and what each callback published, are measured.
#[test]
fn galactic_without_caret_measures_callbacks_and_publishes() {
    use ddscope_core::ros2::callbacks::CallbackTable;
    let mut h = Host { recs: vec![] };
    let t = T0 - 100 * MS;
    h.ev(t, 10, 10, Ros2Event::RclInit { context_handle: 1, version: "2.3.0".into() });
    h.ev(t + US, 10, 10, Ros2Event::RclNodeInit { node_handle: 0x1, rmw_handle: 0x2, node_name: "relay".into(), namespace: "/".into() });
    h.ev(t + 2 * US, 10, 10, Ros2Event::RclPublisherInit { publisher_handle: 0x100, node_handle: 0x1, rmw_publisher_handle: 0x101, topic_name: "/out".into(), queue_depth: 10 });
    h.ev(t + 3 * US, 10, 10, Ros2Event::RclSubscriptionInit { subscription_handle: 0x200, node_handle: 0x1, rmw_subscription_handle: 0x201, topic_name: "/in".into(), queue_depth: 10 });
    h.ev(t + 4 * US, 10, 10, Ros2Event::RclcppSubscriptionInit { subscription_handle: 0x200, subscription: 0x202 });
    h.ev(t + 5 * US, 10, 10, Ros2Event::RclcppSubscriptionCallbackAdded { subscription: 0x202, callback: 0x203 });
    for k in 0..N {
        let b = T0 + k * 10 * MS;
        h.ev(b, 10, 11, Ros2Event::CallbackStart { callback: 0x203, is_intra_process: 0 });
        h.ev(b + 40 * US, 10, 11, Ros2Event::RclcppPublish { publisher_handle: None, message: 0x9000 });
        h.ev(b + 41 * US, 10, 11, Ros2Event::RclPublish { publisher_handle: 0x100, message: 0x9000 });
        h.ev(b + 100 * US, 10, 11, Ros2Event::CallbackEnd { callback: 0x203 });
    }
    let (items, asm) = h.items();
    assert_eq!(asm.layout.name().to_string(), "galactic");
    assert!(asm.layout.joins().starts_with("none between processes"));
    let mut cb = CallbackTable::new(64);
    for it in &items {
        match it {
            TraceItem::Callback(c) => cb.add_callback(0, c),
            TraceItem::Publish(p) => cb.add_publish(0, p),
            TraceItem::Take(_) => panic!("no take without rmw_take or CARET's dispatch"),
            _ => {}
        }
    }
    let names = [std::sync::Arc::<str>::from("pc1")];
    let rows = cb.rows(&names);
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].node.as_str(), rows[0].callback.as_str(), rows[0].runs), ("/relay", "subscription /in", N as u64));
    assert!((rows[0].duration.mean_ms - 0.1).abs() < 1e-9);
    assert!((rows[0].rate_hz.unwrap() - 100.0).abs() < 1e-6);
    let edges = cb.publish_rows(&names);
    assert_eq!(edges.len(), 1);
    assert_eq!((edges[0].callback.as_str(), edges[0].topic.as_str(), edges[0].publishes), ("subscription /in", "/out", N as u64));
    assert!((edges[0].node_time.mean_ms - 0.04).abs() < 1e-9);
}
