//! Oracle: babeltrace2 itself. For real LTTng traces recorded from the lab's
//! ros2_tracing replica (Humble and Jazzy layouts, two node processes, threads
//! on several CPUs), the events ddscope-trace reads equal, event by event,
//! what babeltrace2 reads: name, raw clock value, ns from origin, cpu_id,
//! vpid, vtid, procname and every payload field (python3-bt2), and the dump
//! example's text equals `babeltrace2 --clock-gmt` line for line. The counts
//! per event name equal what ddslab-tracegen says it emitted.

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::process::Command;

use ddscope_trace::{EntityTable, Layout, Ros2Event, TraceReader};
use support::*;

fn check_distro(distro: &str) {
    let dir = tempdir();
    let session = dir.path().join("session");
    let emitted = record(&session, &[], distro, &["--messages", "400", "--processes", "2", "--miss-every", "7"]);
    assert_eq!(emitted.len(), 2, "two node processes");
    let ust = ust_trace(&session);
    let ust_s = ust.to_str().expect("utf8 path");

    // 1. every event, every field, against python3-bt2
    let theirs = bt2_events(&[ust_s]);
    let o = Command::new(dump_example()).args(["--format", "jsonl"]).arg(&session).output().expect("dump");
    assert!(o.status.success(), "dump failed: {}", String::from_utf8_lossy(&o.stderr));
    let ours: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("our json"))
        .collect();
    let expected_total: u64 = emitted.iter().map(|e| e.total).sum();
    assert_eq!(theirs.len() as u64, expected_total, "babeltrace2 reads every emitted event");
    assert_eq!(ours.len(), theirs.len(), "same number of events as babeltrace2");
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(a, b, "event #{i} differs from babeltrace2's");
    }

    // 2. the text form, against the babeltrace2 CLI
    let bt = Command::new("babeltrace2").arg("--clock-gmt").arg(&ust).output().expect("babeltrace2");
    assert!(bt.status.success());
    let o = Command::new(dump_example()).arg(&session).output().expect("dump");
    assert!(o.status.success());
    let (ours_txt, bt_txt) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&bt.stdout));
    assert_eq!(ours_txt.lines().count(), bt_txt.lines().count());
    for (a, b) in ours_txt.lines().zip(bt_txt.lines()) {
        assert_eq!(a, b);
    }

    // 3. the library: counts, processes, CPUs, threads, layout, clock
    let mut reader = TraceReader::open(&session).expect("open");
    let mut records = Vec::new();
    while let Some(r) = reader.next_record().expect("read") {
        records.push(r);
    }
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for r in &records {
        *counts.entry(r.event.name().to_string()).or_default() += 1;
    }
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for e in &emitted {
        for (k, v) in &e.events {
            *want.entry(k.clone()).or_default() += v;
        }
    }
    want.retain(|_, v| *v > 0);
    assert_eq!(counts, want, "events per name = what tracegen emitted");
    let stats = reader.stats();
    assert_eq!(stats.not_decoded(), 0);
    assert_eq!(stats.discarded_events, 0, "blocking channel: lossless");
    let pids: BTreeSet<i64> = records.iter().filter_map(|r| r.context.vpid).collect();
    assert_eq!(pids, emitted.iter().map(|e| e.pid).collect::<BTreeSet<_>>());
    let cpus: BTreeSet<u64> = records.iter().filter_map(|r| r.context.cpu_id).collect();
    assert!(cpus.len() >= ncpus().min(2), "events on {cpus:?}");
    let threads: BTreeSet<(i64, i64)> = records.iter().filter_map(|r| Some((r.context.vpid?, r.context.vtid?))).collect();
    assert_eq!(threads.len(), 6, "main, timer and executor thread per process");
    assert!(records.windows(2).all(|w| w[0].time <= w[1].time), "time-ordered across CPUs");
    let clock = reader.clock().expect("clock").clone();
    assert_eq!((clock.name.as_str(), clock.frequency, clock.origin_is_unix_epoch), ("monotonic", 1_000_000_000, true));
    for r in &records {
        let offset_ns = clock.offset_seconds * 1_000_000_000 + clock.offset_cycles as i64;
        assert_eq!(r.time.ns_from_origin, offset_ns + r.time.cycles as i64);
    }
    let layout = stats.layout.expect("rmw_publish seen");
    let version = records.iter().find_map(|r| match &r.event {
        Ros2Event::RclInit { version, .. } => Some(version.clone()),
        _ => None,
    });
    match distro {
        "humble" => {
            assert_eq!(layout, Layout::RmwPublishWithoutTimestamp);
            assert_eq!(version.as_deref(), Some("4.1.1"));
        }
        _ => {
            assert_eq!(layout, Layout::RmwPublishWithTimestamp);
            assert_eq!(version.as_deref(), Some("8.2.4"));
        }
    }

    // 4. entities: handles resolve to topics, gids and callback owners
    let mut table = EntityTable::default();
    for r in &records {
        table.observe(r);
    }
    assert_eq!(table.stats().endpoints_without_gid, 0);
    let mut published_ts: HashMap<(i64, i64), u64> = HashMap::new();
    let mut topics_published: BTreeMap<String, u64> = BTreeMap::new();
    for r in &records {
        let pid = r.context.vpid.expect("vpid");
        match &r.event {
            Ros2Event::RclPublish { publisher_handle, .. } => {
                let p = table.publisher(pid, *publisher_handle).expect("publisher declared");
                *topics_published.entry(p.topic_name.clone()).or_default() += 1;
                let gid = p.gid.expect("gid");
                let kind = gid.guid()[15];
                assert_eq!(kind, 0x03, "a writer GUID");
            }
            Ros2Event::RmwPublish { rmw_publisher_handle: Some(h), timestamp: Some(ts), .. } => {
                let p = table.publisher_by_rmw(pid, *h).expect("rmw publisher declared");
                if p.topic_name == "/raw_image" {
                    *published_ts.entry((pid, *ts)).or_default() += 1;
                }
            }
            Ros2Event::RmwTake { rmw_subscription_handle, source_timestamp, taken, .. } => {
                let s = table.subscription_by_rmw(pid, *rmw_subscription_handle).expect("subscription declared");
                assert_eq!(s.topic_name, "/raw_image");
                if distro == "jazzy" && *taken == 1 {
                    assert!(
                        published_ts.contains_key(&(pid, *source_timestamp)),
                        "a taken sample's source timestamp is its rmw_publish timestamp"
                    );
                }
            }
            Ros2Event::CallbackStart { callback, .. } => {
                assert!(table.callback_owner(pid, *callback).is_some(), "callback owner declared");
            }
            _ => {}
        }
    }
    assert_eq!(topics_published.get("/raw_image"), Some(&800));
    assert_eq!(topics_published.get("/image"), Some(&800));
}

#[test]
fn humble_layout_equals_babeltrace2() {
    check_distro("humble");
}

#[test]
fn jazzy_layout_equals_babeltrace2() {
    check_distro("jazzy");
}
