//! Reads the LTTng trace of one host after a run (with the project's
//! reader, `ddscope-trace`, i.e. libbabeltrace2) and holds it against the
//! ground truth of the host's nodes: the same samples published and taken,
//! the writer GUIDs as gids, the source timestamps, only the host's own
//! processes, and how far the truth's CLOCK_MONOTONIC instants lie from the
//! event times of the tracepoints they mirror.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use ddscope_trace::{Ros2Event, TraceReader};

use crate::report::{GapStats, HostTraceReport, TraceNodeCheck, TraceProcess};
use crate::scenario::Tracing;
use crate::truth::Record;

/// A node of the host, as the run started it.
#[derive(Debug, Clone)]
pub struct NodeProc {
    pub name: String,
    pub pid: Option<i32>,
    pub tracing: Tracing,
    /// Writers and readers the scenario gives it.
    pub writers: usize,
    pub readers: usize,
    /// A real ROS 2 node (rclcpp on an rmw) records what the stack records: its own publishers and
    /// subscriptions besides the scenario's (/rosout, /parameter_events), the source timestamp
    /// taken inside the rmw after the node's publish instant, and, on rmw_zenoh_cpp's snapshot,
    /// no rmw_* events at all.
    pub vendor: crate::scenario::Vendor,
}

#[derive(Default)]
struct ProcAcc {
    procname: Option<String>,
    /// `rcl_node_init` names: one node, or a container's nodes.
    nodes: Vec<String>,
    events: u64,
    pub_gids: Vec<[u8; 16]>,
    sub_gids: Vec<[u8; 16]>,
    sub_callbacks: HashSet<u64>,
    rclcpp_publish: u64,
    rclcpp_intra_publish: u64,
    rmw_publish: u64,
    rmw_publish_ts: Vec<i64>,
    taken: u64,
    empty: u64,
    take_src_ts: Vec<i64>,
    sub_callback_starts: u64,
}

/// Event times (raw CLOCK_MONOTONIC ns) of one thread, per mirrored tracepoint.
#[derive(Default)]
struct ThreadSeq {
    rclcpp_publish: Vec<i64>,
    rmw_publish: Vec<i64>,
    rmw_take: Vec<i64>,
    callback_start: Vec<i64>,
    callback_end: Vec<i64>,
}

fn hex(g: &[u8]) -> String {
    g.iter().map(|b| format!("{b:02x}")).collect()
}

/// Checks the trace in `dir` (named `dir_name` in the report); returns the
/// report (with `error` set if the trace cannot be read) and the failures.
pub fn check_host(host: &str, dir_name: &str, dir: &Path, nodes: &[NodeProc], records: &[&Record]) -> (HostTraceReport, Vec<String>) {
    let mut rep = HostTraceReport { host: host.to_string(), dir: dir_name.to_string(), ..HostTraceReport::default() };
    let mut failures = vec![];
    let mut procs: BTreeMap<i64, ProcAcc> = BTreeMap::new();
    let mut threads: HashMap<(i64, i64), ThreadSeq> = HashMap::new();
    let read = (|| -> Result<(), ddscope_trace::TraceError> {
        let mut reader = TraceReader::open(dir)?;
        while let Some(r) = reader.next_record()? {
            *rep.by_name.entry(r.event.name().to_string()).or_default() += 1;
            let vpid = r.context.vpid.unwrap_or(-1);
            let p = procs.entry(vpid).or_default();
            p.events += 1;
            if p.procname.is_none() {
                p.procname = r.context.procname.map(|n| n.to_string_lossy());
            }
            let t = r.time.cycles as i64;
            let th = threads.entry((vpid, r.context.vtid.unwrap_or(-1))).or_default();
            match &r.event {
                Ros2Event::RclNodeInit { node_name, .. } => p.nodes.push(node_name.clone()),
                Ros2Event::RclcppIntraPublish { .. } => p.rclcpp_intra_publish += 1,
                Ros2Event::RmwPublisherInit { gid, .. } => p.pub_gids.push(gid.guid()),
                Ros2Event::RmwSubscriptionInit { gid, .. } => p.sub_gids.push(gid.guid()),
                Ros2Event::RclcppSubscriptionCallbackAdded { callback, .. } => {
                    p.sub_callbacks.insert(*callback);
                }
                Ros2Event::RclcppPublish { .. } => {
                    p.rclcpp_publish += 1;
                    th.rclcpp_publish.push(t);
                }
                Ros2Event::RmwPublish { timestamp, .. } => {
                    p.rmw_publish += 1;
                    if let Some(ts) = timestamp {
                        p.rmw_publish_ts.push(*ts);
                    }
                    th.rmw_publish.push(t);
                }
                Ros2Event::RmwTake { source_timestamp, taken, .. } => {
                    if *taken != 0 {
                        p.taken += 1;
                        p.take_src_ts.push(*source_timestamp);
                        th.rmw_take.push(t);
                    } else {
                        p.empty += 1;
                    }
                }
                Ros2Event::CallbackStart { callback, .. } if p.sub_callbacks.contains(callback) => {
                    p.sub_callback_starts += 1;
                    th.callback_start.push(t);
                }
                Ros2Event::CallbackEnd { callback } if p.sub_callbacks.contains(callback) => th.callback_end.push(t),
                _ => {}
            }
        }
        let st = reader.stats();
        rep.events = st.events;
        rep.ros2_events = st.ros2_events;
        rep.discarded_events = st.discarded_events;
        rep.discarded_packets = st.discarded_packets;
        for (name, n) in &st.unknown_by_name {
            *rep.by_name.entry(name.clone()).or_default() += n;
        }
        Ok(())
    })();
    if let Err(e) = read {
        rep.error = Some(e.to_string());
        failures.push(format!("trace of {host}: {e}"));
        return (rep, failures);
    }
    if rep.discarded_events > 0 || rep.discarded_packets > 0 {
        failures.push(format!(
            "trace of {host}: LTTng discarded {} events and {} packets (buffers full)",
            rep.discarded_events, rep.discarded_packets
        ));
    }
    rep.empty_takes = procs.values().map(|p| p.empty).sum();

    // only the host's own node processes
    let pids: BTreeMap<i64, &NodeProc> = nodes.iter().filter_map(|n| n.pid.map(|p| (p as i64, n))).collect();
    for (vpid, p) in &procs {
        rep.processes.push(TraceProcess {
            vpid: *vpid,
            procname: p.procname.clone(),
            node: (!p.nodes.is_empty()).then(|| p.nodes.join(",")),
            events: p.events,
        });
        if !pids.contains_key(vpid) {
            failures.push(format!(
                "trace of {host}: {} events of process {vpid} ({}), which is not a node of {host}",
                p.events,
                p.procname.as_deref().unwrap_or("?")
            ));
        }
    }

    let mut gaps: Vec<i64> = vec![];
    for n in nodes.iter().filter(|n| !n.tracing.is_off()) {
        let mine: Vec<&&Record> = records.iter().filter(|r| r.node == n.name).collect();
        let pubs: Vec<&&Record> = mine.iter().copied().filter(|r| r.event == "publish").collect();
        let recvs: Vec<&&Record> = mine.iter().copied().filter(|r| r.event == "receive").collect();
        let received_intra = recvs.iter().filter(|r| r.intra_process).count() as u64;
        let empty = ProcAcc::default();
        let vpid = n.pid.map(|p| p as i64);
        let p = vpid.and_then(|v| procs.get(&v)).unwrap_or(&empty);
        let mut c = TraceNodeCheck {
            node: n.name.clone(),
            pid: n.pid,
            tracing: n.tracing,
            published: pubs.len() as u64,
            received: recvs.len() as u64,
            rclcpp_publish: p.rclcpp_publish,
            rclcpp_intra_publish: p.rclcpp_intra_publish,
            rmw_publish: p.rmw_publish,
            taken: p.taken,
            received_intra,
            empty_takes: p.empty,
            subscription_callbacks: p.sub_callback_starts,
            publishers: p.pub_gids.len() as u64,
            subscriptions: p.sub_gids.len() as u64,
            ..TraceNodeCheck::default()
        };
        let mut why: Vec<String> = vec![];
        // one rcl_node_init per node; a container's process holds several
        if !p.nodes.iter().any(|x| x == &n.name) {
            why.push(format!("rcl_node_init names {:?}", p.nodes));
        }
        let real = n.vendor.is_ros2();
        // rmw_zenoh_cpp's snapshot fires no rmw_* tracepoint (rmw_publisher_init, rmw_publish, rmw_take)
        let rmw_traced = n.vendor != crate::scenario::Vendor::RmwZenoh;
        // A real node also publishes /parameter_events (rclcpp) and /rosout (rcl's logging), and its
        // TimeSource takes /parameter_events: at least the scenario's samples, not exactly them.
        let counts_off = |events: u64, truth: u64| if real { events < truth } else { events != truth };
        // rclcpp's intra-process publishes: rclcpp_intra_publish, and rclcpp_publish and rmw_publish
        // only where a subscription outside the process needs the sample too
        let intra_pubs = c.rclcpp_intra_publish;
        if counts_off(c.rclcpp_publish + intra_pubs, c.published) || (rmw_traced && counts_off(c.rmw_publish + intra_pubs, c.published)) {
            why.push(format!(
                "{} samples published, {} rclcpp_publish, {} rclcpp_intra_publish and {} rmw_publish",
                c.published, c.rclcpp_publish, intra_pubs, c.rmw_publish
            ));
        }
        if (rmw_traced && counts_off(c.taken, c.received - c.received_intra)) || counts_off(c.subscription_callbacks, c.received) {
            why.push(format!(
                "{} samples received ({} intra-process), {} taken and {} subscription callbacks",
                c.received, c.received_intra, c.taken, c.subscription_callbacks
            ));
        }
        if real {
            // the scenario's endpoints and the node's own (rclcpp: /rosout, /parameter_events)
            if rmw_traced && (c.publishers < n.writers as u64 || c.subscriptions < n.readers as u64) {
                why.push(format!(
                    "{} publishers and {} subscriptions initialised, fewer than the scenario's {} and {}",
                    c.publishers, c.subscriptions, n.writers, n.readers
                ));
            }
        } else if c.publishers != n.writers as u64 || c.subscriptions != n.readers as u64 {
            why.push(format!(
                "{} publishers and {} subscriptions initialised, the scenario has {} and {}",
                c.publishers, c.subscriptions, n.writers, n.readers
            ));
        }
        let gids: HashSet<String> = p.pub_gids.iter().map(|g| hex(g)).collect();
        let truth_writers: BTreeSet<&str> = pubs.iter().map(|r| r.writer_guid.as_str()).collect();
        c.writer_gids_ok = !rmw_traced || truth_writers.iter().all(|w| gids.contains(*w));
        if !c.writer_gids_ok {
            why.push("writer GUIDs of the ground truth missing from rmw_publisher_init".to_string());
        }
        // A real node's publish instant is its own, before the rmw takes the source timestamp.
        if n.tracing == Tracing::Jazzy && !real {
            let mut a: Vec<i64> = p.rmw_publish_ts.clone();
            let mut b: Vec<i64> = pubs.iter().map(|r| r.t_ns).collect();
            a.sort_unstable();
            b.sort_unstable();
            c.publish_timestamps_ok = Some(a == b);
            if a != b {
                why.push("rmw_publish timestamps are not the published samples' source timestamps".to_string());
            }
        }
        let mut a: Vec<i64> = p.take_src_ts.clone();
        let mut b: Vec<i64> = recvs.iter().filter_map(|r| r.source_ts_ns).collect();
        a.sort_unstable();
        b.sort_unstable();
        c.take_timestamps_ok = if real {
            // every sample the node received among the takes (others: /parameter_events)
            let have: HashSet<i64> = a.iter().copied().collect();
            !rmw_traced || b.iter().all(|t| have.contains(t))
        } else {
            a == b
        };
        if !c.take_timestamps_ok {
            why.push("rmw_take source timestamps are not the received samples'".to_string());
        }
        c.ok = why.is_empty();
        if !c.ok {
            failures.push(format!("trace of {host}: node {}: {}", n.name, why.join("; ")));
        }
        rep.nodes.push(c);

        // the truth's instants against the event times, thread by thread in order
        let Some(vpid) = vpid else { continue };
        let mut by_tid: BTreeMap<i64, (Vec<&Record>, Vec<&Record>)> = BTreeMap::new();
        for r in &pubs {
            by_tid.entry(r.tid.unwrap_or(-1)).or_default().0.push(r);
        }
        for r in &recvs {
            by_tid.entry(r.tid.unwrap_or(-1)).or_default().1.push(r);
        }
        for (tid, (tp, tr)) in by_tid {
            let Some(th) = threads.get(&(vpid, tid)) else { continue };
            let mut pair = |events: &[i64], recs: &[&Record], f: fn(&Record) -> Option<i64>| {
                let mut inst: Vec<i64> = recs.iter().filter_map(|r| f(r)).collect();
                inst.sort_unstable();
                if inst.len() == events.len() {
                    gaps.extend(events.iter().zip(&inst).map(|(e, i)| e - i));
                }
            };
            pair(&th.rclcpp_publish, &tp, |r| r.rclcpp_publish_mono_ns);
            pair(&th.rmw_publish, &tp, |r| r.rmw_publish_mono_ns);
            pair(&th.rmw_take, &tr, |r| r.rmw_take_mono_ns);
            pair(&th.callback_start, &tr, |r| r.callback_start_mono_ns);
            pair(&th.callback_end, &tr, |r| r.callback_end_mono_ns);
        }
    }
    rep.instant_gaps = GapStats::of(gaps);
    (rep, failures)
}
