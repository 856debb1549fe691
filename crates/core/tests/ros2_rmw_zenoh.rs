//! The join on event sequences as an rclcpp process on rmw_zenoh_cpp (Jazzy on) records them
//! (docs/zenoh.md, "ROS 2 traces"): `rmw_publisher_init.gid` is the entity gid (the attachment's
//! source_gid), `rmw_publish.timestamp` the source timestamp rmw_zenoh puts in the attachment,
//! `rmw_subscription_init.gid` all zeros for every subscription (rmw_zenoh gives subscriptions no
//! gid), `rmw_take.source_timestamp` the attachment's; no dds:* events.
//!
//! The shapes real processes add: two publishers of one topic in one process, a publisher whose
//! samples nobody takes, two subscriptions in one process (both gid zero). Each take must be
//! joined to exactly the publish the test made for it, by (topic, source timestamp), and the
//! zero gid must neither name a reader nor merge the two subscriptions.

use ddscope_core::latency::{Correlator, CorrelatorConfig, LatencyRow};
use ddscope_core::ros2::{AssembleConfig, Assembler, TraceItem};
use ddscope_trace::{EventContext, EventTime, Gid, Record, Ros2Event};

const US: i64 = 1_000;
const MS: i64 = 1_000_000;
const T0: i64 = 1_700_000_000_000_000_000;
const N: i64 = 20;

fn ev(recs: &mut Vec<Record>, t: i64, pid: i64, tid: i64, event: Ros2Event) {
    recs.push(Record { event, time: EventTime { cycles: t as u64, ns_from_origin: t }, context: EventContext { vpid: Some(pid), vtid: Some(tid), procname: None, cpu_id: None } });
}

/// An rmw_zenoh gid: 16 bytes of XXH3-128, the rest of the recorded storage zero.
fn zgid(b: u8) -> Gid {
    let mut g = [0u8; 24];
    for (i, x) in g.iter_mut().take(16).enumerate() {
        *x = b.wrapping_mul(31).wrapping_add(i as u8);
    }
    Gid(g)
}

#[test]
fn rmw_zenoh_takes_join_by_topic_and_source_timestamp() {
    let mut r = vec![];
    let t = T0 - 100 * MS;
    for (pid, name) in [(10i64, "talkers"), (20, "listeners")] {
        ev(&mut r, t, pid, pid, Ros2Event::RclInit { context_handle: 1, version: "8.2.4".into() });
        ev(&mut r, t + US, pid, pid, Ros2Event::RclNodeInit { node_handle: 0x1, rmw_handle: 0x2, node_name: name.into(), namespace: "/".into() });
    }
    // process 10: two publishers of /chatter (gids a, b) and one of /unheard that nobody takes
    for (k, (rcl, rmw, g, topic)) in [(0x100u64, 0x101u64, 0xa1u8, "/chatter"), (0x110, 0x111, 0xb2, "/chatter"), (0x120, 0x121, 0xc3, "/unheard")].into_iter().enumerate() {
        let at = t + (10 + 2 * k as i64) * US;
        ev(&mut r, at, 10, 10, Ros2Event::RmwPublisherInit { rmw_publisher_handle: rmw, gid: zgid(g) });
        ev(&mut r, at + 1, 10, 10, Ros2Event::RclPublisherInit { publisher_handle: rcl, node_handle: 0x1, rmw_publisher_handle: rmw, topic_name: topic.into(), queue_depth: 10 });
    }
    // process 20: subscriptions of /chatter and /other, both with rmw_zenoh's all-zero gid
    for (k, (rcl, rmw, topic)) in [(0x200u64, 0x201u64, "/chatter"), (0x210, 0x211, "/other")].into_iter().enumerate() {
        let at = t + (10 + 4 * k as i64) * US;
        ev(&mut r, at, 20, 20, Ros2Event::RmwSubscriptionInit { rmw_subscription_handle: rmw, gid: Gid([0u8; 24]) });
        ev(&mut r, at + 1, 20, 20, Ros2Event::RclSubscriptionInit { subscription_handle: rcl, node_handle: 0x1, rmw_subscription_handle: rmw, topic_name: topic.into(), queue_depth: 10 });
        ev(&mut r, at + 2, 20, 20, Ros2Event::RclcppSubscriptionInit { subscription_handle: rcl, subscription: rcl + 2 });
        ev(&mut r, at + 3, 20, 20, Ros2Event::RclcppSubscriptionCallbackAdded { subscription: rcl + 2, callback: rcl + 3 });
    }
    // rmw_take instant -> (rclcpp_publish instant, source timestamp) of the sample the test made it take
    let mut want = std::collections::BTreeMap::new();
    let mut made = vec![];
    for k in 0..N {
        let b = T0 + k * 10 * MS;
        // publisher a, then b, 3 µs apart on two threads; then /unheard (never taken)
        for (j, (rcl, rmw)) in [(0x100u64, 0x101u64), (0x110, 0x111), (0x120, 0x121)].into_iter().enumerate() {
            let p = b + j as i64 * 3 * US;
            let tid = 11 + j as i64;
            let msg = 0x9000 + j as u64;
            ev(&mut r, p, 10, tid, Ros2Event::RclcppPublish { publisher_handle: None, message: msg });
            ev(&mut r, p + 200, 10, tid, Ros2Event::RclPublish { publisher_handle: rcl, message: msg });
            // rmw_zenoh: source_timestamp = get_system_time_in_ns() right before the tracepoint
            let src = p + 300;
            ev(&mut r, p + 400, 10, tid, Ros2Event::RmwPublish { rmw_publisher_handle: Some(rmw), message: msg, timestamp: Some(src) });
            if j < 2 {
                made.push((p, src));
            }
        }
        // the listener takes b's sample before a's (the router delivered them so)
        for (i, &(p, src)) in made[made.len() - 2..].to_vec().iter().rev().enumerate() {
            let s = b + 500 * US + i as i64 * 50 * US;
            want.insert(s, (p, src));
            ev(&mut r, s, 20, 21, Ros2Event::RmwTake { rmw_subscription_handle: 0x201, message: 0x8000, source_timestamp: src, taken: 1 });
            ev(&mut r, s + 100, 20, 21, Ros2Event::RclTake { message: 0x8000 });
            ev(&mut r, s + 200, 20, 21, Ros2Event::RclcppTake { message: 0x8000 });
            ev(&mut r, s + US, 20, 21, Ros2Event::CallbackStart { callback: 0x203, is_intra_process: 0 });
            ev(&mut r, s + 2 * US, 20, 21, Ros2Event::CallbackEnd { callback: 0x203 });
        }
        // an empty take on /other
        ev(&mut r, b + 700 * US, 20, 21, Ros2Event::RmwTake { rmw_subscription_handle: 0x211, message: 0x8100, source_timestamp: 0, taken: 0 });
    }
    r.sort_by_key(|x| x.time.ns_from_origin);
    let mut a = Assembler::new(AssembleConfig::default());
    let mut items = vec![];
    for x in &r {
        a.push(x, &mut |i| items.push(i));
    }
    a.finish(&mut |i| items.push(i));
    // the zero gid names no reader; the writers are the gids
    let takes: Vec<_> = items.iter().filter_map(|i| if let TraceItem::Take(t) = i { Some(t) } else { None }).collect();
    assert_eq!(takes.len(), 2 * N as usize);
    assert!(takes.iter().all(|t| t.reader.is_none() && t.topic.as_deref() == Some("/chatter")));
    let writers: std::collections::BTreeSet<_> = items.iter().filter_map(|i| if let TraceItem::Publish(p) = i { p.writer } else { None }).collect();
    assert_eq!(writers.len(), 3);

    let cfg = CorrelatorConfig { captures: vec!["pc1".into()], offsets_ns: vec![0], window_ns: 1_000 * MS, ..CorrelatorConfig::default() };
    let mut c = Correlator::new(cfg, Default::default());
    c.set_ended(0, true, &mut |_| {});
    let tr = c.add_trace(0);
    let mut rows: Vec<LatencyRow> = vec![];
    for it in items {
        c.push_trace(tr, it, &mut |x| rows.push(x));
    }
    c.finish(&mut |x| rows.push(x));
    assert_eq!(rows.len(), 2 * N as usize, "{:?}", c.join_stats());
    // every row is the exact publish of its source timestamp, never a neighbour's
    for row in &rows {
        let ros = row.ros.as_deref().expect("joined");
        assert_eq!(ros.join.map(|j| j.as_str()), Some("source_ts"));
        let take = ros.rmw_take_ts_ns.unwrap();
        let (p, src) = want[&take];
        assert_eq!(ros.rclcpp_publish_ts_ns, Some(p));
        assert_eq!(ros.rmw_publish_ts_ns, Some(src + 100));
        assert_eq!(ros.ros_e2e_ns, Some(take + US - p));
        assert_eq!(ros.executor_ns, Some(US));
    }
    let j = c.join_stats().expect("join");
    // the /unheard publishes: counted as taken by no traced subscription, never joined
    assert_eq!((j.takes_same_host, j.takes_source_ts, j.takes_ambiguous, j.takes_unjoined), (2 * N as u64, 2 * N as u64, 0, 0));
    assert_eq!(j.publishes_unjoined, N as u64, "{j:?}");
}
