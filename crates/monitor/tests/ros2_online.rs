//! The ROS 2 layer online: two agents (pc1, pc2) each follow a real live
//! LTTng session through a real lttng-relayd (`TraceFollower`, what
//! `ddscope agent --trace-live` runs) while `ddslab-tracegen` (the lab's
//! ros2_tracing replica, Jazzy layout) is traced; the agents stream their
//! trace items with their capture items over HTTP to a real `serve`
//! (`Server`, what `ddscope serve` runs), whose correlator joins them.
//!
//! The captures are written for the traced samples (the publisher's gid as
//! writer GUID, the publish timestamps as INFO_TS), as in the core's
//! `ros2_trace_join` test, and replayed through the agent's capture pipeline
//! (the agent's own loop, `agent::run`, with a file instead of an interface).
//!
//! Oracles:
//!  * the offline path (`ddscope latency --trace`: `session::run_latency_traced`)
//!    on the same captures and relayd's on-disk copy of the same live session:
//!    serve's per-flow layers and chain list equal it exactly;
//!  * babeltrace2's own reading of relayd's copy (python3-bt2): every layer
//!    counts each traced message once and its extremes equal those computed
//!    from the raw events.
//! Needs root (LTTng session daemon), lttng-tools, python3-bt2 and lab/build.

use ddscope_testkit::lttng::{hostname, start_relayd};
use ddscope_core::latency::files::CaptureInput;
use ddscope_core::ros2::TraceInput;
use ddscope_core::session::{self, LatencyOptions};
use ddscope_core::source::{CaptureReader, PacketSource, Poll};
use ddscope_sysstat::system::SystemSource;
use ddscope_monitor::agent::{self, AgentCapture, AgentConfig};
use ddscope_monitor::agent::capture::CaptureCounters;
use ddscope_monitor::stream::protocol::{Batch, AGENT_HEADER, INGEST_PATH};
use ddscope_monitor::server::{Server, ServeConfig};
use ddscope_monitor::agent::trace::{TraceFollowConfig, TraceFollower};
use ddscope_monitor::agent::upstream::Upstream;
use ddscope_testkit::{sedp_endpoint, udp_frames, FrameOptions, InterfaceOptions, PcapngWriter, RtpsBuilder};
use ddscope_wire::{EntityId, Guid, GuidPrefix};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

fn tracegen() -> PathBuf {
    let p = repo().join("lab/build/ddslab-tracegen");
    assert!(p.is_file(), "{} missing: build the lab (cmake -S lab -B lab/build && cmake --build lab/build)", p.display());
    p
}

/// Total events tracegen reports it emitted (one JSON line per process).
fn emitted(stdout: &str) -> u64 {
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<Value>(l).expect("tracegen json")["total"].as_u64().expect("total"))
        .sum()
}

/// babeltrace2's reading of the trace, one JSON object per event.
fn bt2(trace: &Path) -> Vec<Value> {
    let script = repo().join("crates/trace/tests/support/bt2_jsonl.py");
    let o = Command::new("/usr/bin/python3").arg(script).arg(trace).output().expect("run bt2_jsonl.py");
    assert!(o.status.success(), "bt2_jsonl.py: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).expect("json")).collect()
}

fn i(v: &Value, k: &str) -> i64 {
    v["fields"][k].as_i64().or_else(|| v["fields"][k].as_u64().map(|x| x as i64)).unwrap_or_else(|| panic!("field {k} in {v}"))
}

/// Per message, from babeltrace2's events by their place on each thread (tracegen's fixed order).
#[derive(Default)]
struct Expected {
    /// /raw_image: rclcpp_publish, rmw_publish, and the take's source_timestamp.
    raw: Vec<(i64, i64, i64)>,
    /// The take of message k: rmw_take, callback_start, callback_end.
    take: Vec<(i64, i64, i64)>,
    raw_gid: Guid,
}

fn expected(events: &[Value]) -> Expected {
    let mut e = Expected::default();
    let mut gid_of_rmw: BTreeMap<i64, Guid> = BTreeMap::new();
    for v in events {
        match v["name"].as_str().unwrap_or("") {
            "ros2:rmw_publisher_init" => {
                let b: Vec<u8> = v["fields"]["gid"].as_array().expect("gid").iter().map(|x| x.as_u64().expect("byte") as u8).collect();
                let mut p = [0u8; 12];
                p.copy_from_slice(&b[..12]);
                gid_of_rmw.insert(i(v, "rmw_publisher_handle"), Guid::new(GuidPrefix(p), EntityId([b[12], b[13], b[14], b[15]])));
            }
            "ros2:rcl_publisher_init" if v["fields"]["topic_name"].as_str() == Some("/raw_image") => {
                e.raw_gid = gid_of_rmw[&i(v, "rmw_publisher_handle")];
            }
            _ => {}
        }
    }
    let thread = |suffix: &str| -> Vec<&Value> { events.iter().filter(|v| v["procname"].as_str().is_some_and(|p| p.ends_with(suffix))).collect() };
    let ns = |v: &Value| v["ns"].as_i64().expect("ns");
    let mut rclcpp = None;
    for v in thread("-timer") {
        match v["name"].as_str().unwrap_or("") {
            "ros2:rclcpp_publish" => rclcpp = Some(ns(v)),
            "ros2:rmw_publish" => e.raw.push((rclcpp.take().expect("rclcpp before rmw"), ns(v), 0)),
            _ => {}
        }
    }
    let (mut take, mut cbs, mut k) = (None, None, 0);
    for v in thread("-exec") {
        match v["name"].as_str().unwrap_or("") {
            "ros2:rmw_take" if i(v, "taken") == 1 => {
                take = Some(ns(v));
                e.raw[k].2 = i(v, "source_timestamp");
            }
            "ros2:callback_start" => cbs = Some(ns(v)),
            "ros2:callback_end" => {
                e.take.push((take.take().expect("take"), cbs.take().expect("cbs"), ns(v)));
                k += 1;
            }
            _ => {}
        }
    }
    e
}

/// pc1 sees sample k at 1/3 of the way from rmw_publish to the take, pc2 at 2/3.
fn write_captures(dir: &Path, e: &Expected) -> Vec<CaptureInput> {
    let a: std::net::SocketAddr = "10.0.0.1:7410".parse().unwrap();
    let b: std::net::SocketAddr = "10.0.0.2:7411".parse().unwrap();
    let w = e.raw_gid;
    let gap = |k: usize| e.take[k].0 - e.raw[k].1;
    let mut caps = vec![];
    for (name, part) in [("pc1", 1), ("pc2", 2)] {
        let path = dir.join(format!("{name}.pcapng"));
        let f = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
        let mut pw = PcapngWriter::new(f, &InterfaceOptions { linktype: 1, ..Default::default() }).expect("pcapng");
        let sedp = RtpsBuilder::new(0x0110, w.prefix)
            .data(EntityId::SEDP_PUBLICATIONS_READER, EntityId::SEDP_PUBLICATIONS_WRITER, 1, None, &sedp_endpoint(w, "rt/raw_image", "sensor_msgs::msg::dds_::Image_", true))
            .build();
        for fr in udp_frames(a, b, 1, &sedp, &FrameOptions::default()) {
            pw.packet(e.raw[0].1 - 1_000_000, &fr, fr.len() as u32).expect("write");
        }
        for (k, r) in e.raw.iter().enumerate() {
            let msg = RtpsBuilder::new(0x0110, w.prefix).info_ts(r.2).data(EntityId([0; 4]), w.entity, k as i64 + 1, None, &[0, 1, 0, 0, 1, 2, 3, 4]).build();
            for fr in udp_frames(a, b, 100 + k as u32, &msg, &FrameOptions::default()) {
                pw.packet(r.1 + part * gap(k) / 3, &fr, fr.len() as u32).expect("write");
            }
        }
        drop(pw);
        caps.push(CaptureInput { path, name: name.into() });
    }
    caps
}

/// A capture file replayed through the agent's loop, then an idle interface.
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

/// Layer summaries equal: counts and order statistics exactly; mean and standard deviation up to
/// the rounding of a sum taken in another order (online the samples arrive in batches).
fn same_layers(online: &Value, offline: &Value, what: &str) {
    let (a, b) = (online.as_array().expect("layers"), offline.as_array().expect("layers"));
    let names = |v: &Vec<Value>| v.iter().map(|l| l[0].as_str().unwrap_or("").to_string()).collect::<Vec<_>>();
    assert_eq!(names(a), names(b), "layers of {what}");
    for (x, y) in a.iter().zip(b) {
        for k in ["count", "negative", "min_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"] {
            assert_eq!(x[1][k], y[1][k], "{k} of layer {} of {what}", x[0]);
        }
        for k in ["mean_ms", "std_ms"] {
            let (u, v) = (x[1][k].as_f64().unwrap_or(f64::NAN), y[1][k].as_f64().unwrap_or(f64::NAN));
            assert!((u - v).abs() <= 1e-9 * v.abs().max(1e-6), "{k} of layer {} of {what}: {u} vs {v}", x[0]);
        }
    }
}

fn get_state(addr: std::net::SocketAddr) -> Value {
    let body = ureq::get(&format!("http://{addr}/api/state")).call().expect("GET /api/state").into_body().read_to_string().expect("body");
    serde_json::from_str(&body).expect("state json")
}

#[test]
fn agents_following_a_live_session_give_serve_the_offline_layers() {
    const N: usize = 40;
    let base = repo().join("target/tmp");
    std::fs::create_dir_all(&base).expect("target/tmp");
    let dir = tempfile::Builder::new().prefix("ros2-online-").tempdir_in(base).expect("tempdir");
    let relayd = start_relayd(&dir.path().join("relayd"));
    // One live session per host (a relay daemon serves one viewer per session): both record
    // every traced process, so pc2's trace is a copy of pc1's and pc2 "takes" what pc1 publishes.
    let sessions = [format!("ddscope-online-{}-pc1", std::process::id()), format!("ddscope-online-{}-pc2", std::process::id())];
    let url = |s: &str| format!("net://localhost:{}/host/{}/{}", relayd.viewer, hostname(), s);

    // Both agents attach before the sessions exist (as on a robot where the agent starts first).
    let follow = |s: &str| TraceFollower::start(TraceFollowConfig { url: url(s), max_queued: 100_000, lag_ns: 2_000_000_000, assemble: Default::default() }).expect("follow");
    let (f1, f2) = (follow(&sessions[0]), follow(&sessions[1]));

    // As lab/tracegen/record.sh does (and under its lock: a UST session records every traced
    // process of the machine), with two live sessions.
    let set_url = format!("net://localhost:{}:{}", relayd.ctrl, relayd.data);
    let mut script = String::from(
        "set -e; lttng list >/dev/null 2>&1 || { lttng-sessiond --daemonize --no-kernel >/dev/null 2>&1 || true; for _ in $(seq 50); do lttng list >/dev/null 2>&1 && break; sleep 0.1; done; }\n\
         exec 9>\"${TMPDIR:-/tmp}/ddscope-lttng-record.lock\"; flock 9\n",
    );
    // `--no-wait`: the destruction of a live session completes only once its viewers let go,
    // and the viewers here are this test's followers, which wait for the script (seen hanging
    // for 11 minutes on a fresh machine); `lttng stop` has already waited for the data.
    script.push_str(&format!(
        "trap 'lttng destroy --no-wait {0} >/dev/null 2>&1; lttng destroy --no-wait {1} >/dev/null 2>&1' EXIT\n",
        sessions[0], sessions[1]
    ));
    for s in &sessions {
        script.push_str(&format!(
            "lttng create {s} --live=100000 --set-url={set_url} >/dev/null\n\
             lttng enable-channel --userspace --session={s} --subbuf-size=4M --num-subbuf=8 --blocking-timeout=inf ros2 >/dev/null\n\
             lttng enable-event --userspace --session={s} --channel=ros2 'ros2:*' >/dev/null\n\
             lttng add-context --userspace --session={s} --channel=ros2 -t vpid -t vtid -t procname >/dev/null\n\
             lttng start {s} >/dev/null\n"
        ));
    }
    script.push_str(&format!("sleep 1; LTTNG_UST_ALLOW_BLOCKING=1 {} --distro jazzy --messages {N} --rate 500 --miss-every 5\n", tracegen().display()));
    for s in &sessions {
        script.push_str(&format!("lttng stop {s} >/dev/null\n"));
    }
    let rec = Command::new("bash").arg("-c").arg(&script).output().expect("bash");
    assert!(rec.status.success(), "recording: {}", String::from_utf8_lossy(&rec.stderr));
    let total = emitted(&String::from_utf8_lossy(&rec.stdout));
    assert!(total > 13 * N as u64, "tracegen emitted {total}");
    let deadline = Instant::now() + Duration::from_secs(120);
    while [&f1, &f2].iter().any(|f| f.queue.counters().events < total) {
        assert!(Instant::now() < deadline, "live read stalled: {:?} / {:?} of {total}", f1.queue.counters(), f2.queue.counters());
        std::thread::sleep(Duration::from_millis(50));
    }

    // relayd's copy of the session: babeltrace2's reading (oracle) and the offline path's input.
    let host_dir = dir.path().join("relayd").join(hostname());
    let copy_of = |session: &str| {
        std::fs::read_dir(&host_dir)
            .expect("relayd output")
            .flatten()
            .map(|e| e.path())
            .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(session)))
            .expect("relayd wrote the session")
            .join("ust/uid/0/64-bit")
    };
    let (copy, copy2) = (copy_of(&sessions[0]), copy_of(&sessions[1]));
    let e = expected(&bt2(&copy));
    assert_eq!((e.raw.len(), e.take.len()), (N, N), "tracegen's messages in babeltrace2's reading");
    // The second session read each event's clock on its own: pc2's instants, for the receiving side.
    let e2 = expected(&bt2(&copy2));
    assert_eq!((e2.take.len(), e2.raw_gid), (N, e.raw_gid));
    let caps = write_captures(dir.path(), &e);

    // serve, with both agents known before they stream (as when agents run from the start).
    let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.window_ns = 1_000_000_000;
    let chain = vec!["/raw_image".to_string(), "/image".to_string()];
    cfg.chain_path = Some(chain.clone());
    let server = Server::start(cfg).expect("serve");
    let addr = server.addr();
    for name in ["pc1", "pc2"] {
        let b = Batch { agent: name.into(), seq: 0, sent_ns: 0, items: vec![], dropped_items: 0, topics: None, system: vec![], counters: None, last: false };
        ureq::post(&format!("http://{addr}{INGEST_PATH}"))
            .header(AGENT_HEADER, name)
            .content_type("application/json")
            .send(serde_json::to_vec(&b).unwrap().as_slice())
            .expect("register agent");
    }
    let mut agents = vec![];
    for (c, f) in caps.iter().zip([f1, f2]) {
        let cap = Replay { reader: CaptureReader::open(&c.path, None).expect("open capture"), ended: false, frames: 0 };
        let cfg = AgentConfig {
            name: c.name.clone(),
            upstream: Some(Upstream { url: format!("http://{addr}"), token: None, max_queued_items: 100_000, otlp: false }),
        upstream_otlp: None,
            system: SystemSource::proc(),
            duration: Some(Duration::from_secs(2)),
            trace: Some(f),
            domain: None,
            window: ddscope_core::window::Window::DEFAULT,
            clock_sync: None,
            limits: Default::default(),
        };
        agents.push(std::thread::spawn(move || agent::run(cfg, cap, None, Arc::new(AtomicBool::new(false)), &mut |n| eprintln!("agent: {n}")).expect("agent").0));
    }
    let reports: Vec<_> = agents.into_iter().map(|h| h.join().expect("agent thread")).collect();
    for r in &reports {
        let t = r.trace.as_ref().expect("trace counters");
        assert_eq!((t.events, t.dropped_queue_full, t.discarded_events), (total, 0, 0), "{t:?}");
        assert_eq!(t.items, t.assemble.publishes + t.assemble.takes, "every publish and take sent: {t:?}");
        assert_eq!(t.assemble.publishes, 2 * N as u64, "/raw_image and /image");
        assert_eq!(r.items_dropped, 0);
    }
    let state = get_state(addr);

    // The offline path on the same captures and relayd's copies of the two sessions.
    let traces = vec![TraceInput { host: "pc1".into(), path: copy.clone() }, TraceInput { host: "pc2".into(), path: copy2.clone() }];
    let opts = LatencyOptions { window_ns: 1_000_000_000, path: Some(chain), ..LatencyOptions::default() };
    let run = session::run_latency_traced(caps.clone(), &[], traces, &opts, &[], &mut |n| eprintln!("{n}"), &mut |_| {}, &mut |_| {}).expect("offline run");
    let offline = run.correlator.summaries();
    let online: Vec<&Value> = state["flows"].as_array().expect("flows").iter().map(|f| &f["summary"]).collect();
    assert_eq!(online.len(), offline.len(), "flows: {online:?}");
    for f in &offline {
        let o = online
            .iter()
            .find(|x| x["topic"] == f.topic.as_str() && x["sender"] == f.sender.as_str() && x["receiver"] == f.receiver.as_str())
            .unwrap_or_else(|| panic!("flow {} {} -> {} not online", f.topic, f.sender, f.receiver));
        let off = serde_json::to_value(f).unwrap();
        for k in ["samples", "delivered", "lost", "incomplete"] {
            assert_eq!(o[k], off[k], "{k} of {} {} -> {}", f.topic, f.sender, f.receiver);
        }
        same_layers(&o["layers"], &off["layers"], &format!("{} {} -> {}", f.topic, f.sender, f.receiver));
    }
    // The chains found, and the join's counters, equal the offline ones.
    let paths = serde_json::to_value(run.correlator.chains().expect("chains").paths()).unwrap();
    assert_eq!(state["ros2"]["chains"]["paths"], paths);
    let summary = serde_json::to_value(run.correlator.chains().expect("chains").summary()).unwrap();
    // tracegen republishes /raw_image on /image in its callback, but nothing takes /image: the
    // chain has no complete instance here, online as offline (chains with instances: ros2_state.rs).
    assert_eq!(state["ros2"]["chains"]["chain"], summary);
    assert_eq!(state["ros2"]["join"], serde_json::to_value(run.correlator.join_stats()).unwrap());

    // babeltrace2's events: every layer of the wire flow counts each message once, with the right extremes.
    let flow = online.iter().find(|x| x["topic"] == "/raw_image" && x["sender"] == "pc1" && x["receiver"] == "pc2").expect("wire flow");
    let layer = |name: &str| -> Value {
        flow["layers"].as_array().unwrap().iter().find(|l| l[0] == name).map(|l| l[1].clone()).unwrap_or_else(|| panic!("layer {name} in {flow}"))
    };
    let ms = |ns: i64| ns as f64 / 1e6;
    let check = |name: &str, vals: Vec<i64>| {
        let l = layer(name);
        assert_eq!(l["count"], N as u64, "{name}");
        let (mn, mx) = (vals.iter().min().copied().unwrap(), vals.iter().max().copied().unwrap());
        assert!((l["min_ms"].as_f64().unwrap() - ms(mn)).abs() < 1e-6, "{name} min {l} vs {mn} ns");
        assert!((l["max_ms"].as_f64().unwrap() - ms(mx)).abs() < 1e-6, "{name} max {l} vs {mx} ns");
    };
    check("ros_publish", e.raw.iter().map(|r| r.1 - r.0).collect());
    let gap = |k: usize| e.take[k].0 - e.raw[k].1;
    check("dds_send", (0..N).map(|k| gap(k) / 3).collect());
    check("message", (0..N).map(|k| 2 * gap(k) / 3 - gap(k) / 3).collect());
    check("dds_receive", (0..N).map(|k| e2.take[k].0 - (e.raw[k].1 + 2 * gap(k) / 3)).collect());
    check("executor", e2.take.iter().map(|t| t.1 - t.0).collect());
    check("callback", e2.take.iter().map(|t| t.2 - t.1).collect());
    check("ros_e2e", e.raw.iter().zip(&e2.take).map(|(r, t)| t.1 - r.0).collect());
    assert_eq!(state["agents"][0]["trace_items"].as_u64().map(|n| n > 0), Some(true));
    drop(server);
}
