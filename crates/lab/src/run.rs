//! `ddscope lab run`: hosts up, captures on, trace sessions on, workload
//! discovered, START, interference, STOP, trace sessions and captures off,
//! hosts down; then the captures are converted, the ground truth merged and
//! accounted for, the wire checked with `ddscope topics`, the traces read
//! against the ground truth, and `run.json` written.

use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::lttng::{self, HostSession, StopStats};
use crate::net::{self, Lab};
use crate::pcapng;
use crate::ros2;
use crate::procs::{self, in_netns, Procs};
use crate::report::{ClockReport, 
    AgentReport, CaptureReport, CaptureStats, ChannelReport, CpuReport, InterferenceReport, IperfReport, NetworkReport, NodeReport,
    RunReport, Timing, Tools, TopicChecks, TopicReport, TopicsDoc, Topology, TracingReport, TruthFile, WireCheck, ZenohRouterReport, FORMAT,
};
use crate::scenario::{self, Scenario, Tracing, Vendor};
use crate::tracecheck::{self, NodeProc};
use crate::truth;
use crate::workload::{self, NodeBins};

pub struct RunOptions {
    pub scenario: PathBuf,
    pub overrides: scenario::Overrides,
    pub out: Option<PathBuf>,
    pub gzip: bool,
    pub force: bool,
    pub quiet: bool,
    /// Start `ddscope agent -i eth0 --name HOST ARGS…` on every host before the
    /// workload (online monitoring); `{host}`, `{ip}`, `{mgmt_ip}` and
    /// `{gateway}` in ARGS are replaced per host.
    pub agent_args: Option<Vec<String>>,
    /// Add a management link from every host to the root namespace.
    pub management: bool,
}

macro_rules! say {
    ($opts:expr, $($t:tt)*) => { if !$opts.quiet { eprintln!("lab: {}", format!($($t)*)); } };
}

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

fn check_interrupt() -> Result<()> {
    if let Some(sig) = procs::interrupted() {
        bail!("interrupted by {}; everything the run started was removed", procs::signal_name(sig));
    }
    Ok(())
}

/// UTC "YYYYmmddTHHMMSS" for default output directory names.
fn utc_stamp() -> String {
    let [y, m, d, hh, mm, ss] = ddscope_traffic::text::utc_fields(now_ns() / 1_000_000_000);
    format!("{y:04}{m:02}{d:02}T{hh:02}{mm:02}{ss:02}")
}

fn first_line(cmd: &[&str]) -> Option<String> {
    let out = std::process::Command::new(cmd[0]).args(&cmd[1..]).output().ok()?;
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    s.lines().find(|l| !l.trim().is_empty()).map(|l| l.trim().to_string())
}

fn wait_for_text(path: &Path, needle: &str, timeout: Duration, proc_: &mut procs::Proc) -> Result<()> {
    let end = Instant::now() + timeout;
    loop {
        if fs::read_to_string(path).map(|s| s.contains(needle)).unwrap_or(false) {
            return Ok(());
        }
        if let Some(st) = proc_.poll() {
            let log = fs::read_to_string(path).unwrap_or_default();
            bail!("{} exited ({st}) before it was ready: {}", proc_.name, log.lines().last().unwrap_or("").trim());
        }
        check_interrupt()?;
        if Instant::now() > end {
            bail!("{} not ready after {:?} (see {})", proc_.name, timeout, path.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// tcpdump prints its counters on exit: "N packets captured", "N packets
/// received by filter", "N packets dropped by kernel" (and sometimes "by interface").
pub fn parse_tcpdump_stats(log: &str) -> CaptureStats {
    let mut st = CaptureStats::default();
    for line in log.lines() {
        let mut it = line.split_whitespace();
        let Some(n) = it.next().and_then(|n| n.parse::<u64>().ok()) else { continue };
        let rest: Vec<&str> = it.collect();
        match rest.as_slice() {
            ["packets", "captured"] | ["packet", "captured"] => st.captured = Some(n),
            ["packets", "received", "by", "filter"] | ["packet", "received", "by", "filter"] => st.received_by_filter = Some(n),
            ["packets", "dropped", "by", "kernel"] | ["packet", "dropped", "by", "kernel"] => st.dropped_by_kernel = Some(n),
            ["packets", "dropped", "by", "interface"] | ["packet", "dropped", "by", "interface"] => st.dropped_by_interface = Some(n),
            _ => {}
        }
    }
    st
}

struct RunningNode {
    proc_idx: usize,
    name: String,
    host: String,
    vendor: Vendor,
    stdin: Option<ChildStdin>,
    ready: bool,
    truth_part: PathBuf,
    log: PathBuf,
}

/// Why `lab run` stopped, where a caller tells the cases apart (ddscope's exit codes).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The scenario file cannot be read or is not a valid scenario.
    #[error("{0}")]
    Scenario(String),
    /// The run completed and its checks failed (run.json lists them).
    #[error("{0}")]
    Checks(String),
}

pub fn run(opts: &RunOptions) -> Result<i32> {
    let started = Instant::now();
    let sc = scenario::load(&opts.scenario)
        .and_then(|s| s.resolve_with(&opts.overrides).map_err(|e| anyhow!("{}: {e}", opts.scenario.display())))
        .map_err(|e| RunError::Scenario(format!("{e:#}")))?;
    if !net::is_root() {
        bail!("ddscope lab run needs root to create network namespaces (run it with sudo)");
    }
    for tool in ["ip", "tc", "tcpdump"] {
        which(tool)?;
    }
    if !sc.interference.is_empty() {
        which("iperf3")?;
    }
    let traced = sc.traced_hosts();
    if !traced.is_empty() {
        // the host sessions (lttng-tools), joining a host's namespaces (util-linux), the reference reader
        for tool in ["lttng", "lttng-sessiond", "nsenter", "mount", "babeltrace2"] {
            which(tool)?;
        }
    }
    let bins = NodeBins::find()?;
    workload::check_nodes(&sc, &bins).map_err(|e| anyhow!("{}: {e}", opts.scenario.display()))?;

    let out = match &opts.out {
        Some(o) => o.clone(),
        None => PathBuf::from("lab-out").join(format!("{}-{}", sc.name, utc_stamp())),
    };
    if out.join("run.json").exists() && !opts.force {
        bail!("{}: already holds a run (run.json); choose another output directory or allow overwriting it", out.display());
    }
    fs::create_dir_all(out.join("logs")).with_context(|| format!("cannot create {}", out.display()))?;
    let tmp = out.join(".tmp");
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp)?;
    let out = out.canonicalize()?;
    let tmp = tmp.canonicalize()?;
    // Raw captures and partial ground truth live here until the analysis has
    // written the run's files: whichever way the run ends (done, failed,
    // interrupted), none of it stays behind (an interrupted run once left
    // ~200 MB here while saying everything was removed).
    let _tmp_guard = RemoveOnDrop(tmp.clone());
    // a previous run's files would be mistaken for this one's
    for entry in fs::read_dir(&out)? {
        let p = entry?.path();
        let n = p.file_name().unwrap_or_default().to_string_lossy().to_string();
        if n.ends_with(".pcapng") || n.ends_with(".pcapng.gz") || n.ends_with(".truth.jsonl") || n == "run.json" || n == "scenario.toml" {
            fs::remove_file(&p)?;
        } else if n.ends_with(".lttng") && p.is_dir() {
            fs::remove_dir_all(&p).with_context(|| format!("cannot remove the old trace {}", p.display()))?;
        }
    }
    ddscope_traffic::fsio::write_atomic(&out.join("scenario.toml"), sc.to_toml()?.as_bytes()).with_context(|| format!("cannot write {}", out.join("scenario.toml").display()))?;

    procs::install_signal_handlers();
    let run_id = net::new_run_id();
    say!(opts, "{}: {} hosts, {} nodes, {} s, run {run_id} -> {}", sc.name, sc.hosts.len(), sc.nodes.len(), sc.duration.as_secs_f64(), out.display());

    // -------- everything below is undone by the guards' Drop, in reverse order --------
    let mut lab = Lab::up(&sc, &run_id)?;
    if opts.management || opts.agent_args.is_some() {
        lab.add_management()?;
    }
    let mut procs = Procs::default();
    let result = drive(opts, &sc, &bins, &lab, &mut procs, &run_id, &out, &tmp);
    procs.terminate_all(Duration::from_secs(3));
    drop(procs);
    let hosts = lab.hosts.clone();
    let ebpf = lab.ebpf_report();
    let kernel_drops = lab.kernel_drops();
    let down = lab.down();
    drop(lab);
    let drive = result?;
    down?;
    say!(opts, "hosts removed; analysing");

    // -------- analysis on files only --------
    let mut report = analyse(opts, &sc, &bins, &hosts, &out, &tmp, drive, &run_id, started)?;
    report.network.ebpf = ebpf?;
    report.network.kernel_drops = kernel_drops?;
    for d in report.network.kernel_drops.iter().filter(|d| d.dropped() > 0) {
        eprintln!(
            "lab: warning: the kernel dropped frames on {} {}: rx {} tx {} rx-overrun {} qdisc {} (run.json network.kernel_drops)",
            d.owner, d.device, d.rx_dropped, d.tx_dropped, d.rx_over_errors, d.qdisc_dropped
        );
    }
    if let Some(l) = report.network.ebpf.as_ref().and_then(|e| e.loss.as_ref()) {
        let (frames, dropped) = l.ports.iter().fold((0, 0), |a, p| (a.0 + p.frames, a.1 + p.dropped));
        say!(opts, "emulated loss: {dropped} of {frames} IPv4 frames dropped on the switch ({:.3} %; the parameters give {:.3} %)", 100.0 * dropped as f64 / frames.max(1) as f64, 100.0 * l.mean_loss);
    }
    let _ = fs::remove_dir_all(&tmp);
    ddscope_traffic::fsio::write_atomic(&out.join("run.json"), (serde_json::to_string_pretty(&report)? + "\n").as_bytes()).with_context(|| format!("cannot write {}", out.join("run.json").display()))?;
    print_summary(&report);
    let failures = &report.failures;
    if !failures.is_empty() {
        let shown: Vec<&str> = failures.iter().take(4).map(|s| s.as_str()).collect();
        let more = if failures.len() > 4 { format!(" and {} more", failures.len() - 4) } else { String::new() };
        return Err(RunError::Checks(format!("run failed: {}{more} (all in {})", shown.join("; "), out.join("run.json").display())).into());
    }
    Ok(0)
}

fn captures_name(host: &str, gzip: bool) -> String {
    if gzip {
        format!("{host}.pcapng.gz")
    } else {
        format!("{host}.pcapng")
    }
}

/// Removes a directory tree when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn which(tool: &str) -> Result<()> {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false);
    if !found {
        bail!("{tool} is not installed (scripts/setup.sh installs it)");
    }
    Ok(())
}

/// A host's trace session as the workload left it.
struct TraceRun {
    host: String,
    session: String,
    dir_name: String,
    started_ns: i64,
    /// What the tracer reported at `lttng stop`, or why stopping failed.
    stop: std::result::Result<StopStats, String>,
}

struct DriveResult {
    /// True CLOCK_REALTIME when the run's first process started: warped clocks count from it.
    clock_ref_ns: i64,
    /// What the machine's time daemons said at the start (chrony, ptp4l).
    clock_sync: Vec<std::result::Result<ddscope_sysstat::clocksync::ClockSync, String>>,
    t0: i64,
    tstop: i64,
    captures: Vec<(String, PathBuf, CaptureStats)>,
    node_exits: BTreeMap<String, Option<i32>>,
    node_summaries: BTreeMap<String, Vec<String>>,
    /// iperf3's report per interference index (None: none could be read).
    iperf: BTreeMap<usize, Option<IperfReport>>,
    nodes: Vec<(String, String, Vendor, PathBuf)>,
    /// Process id of every node.
    node_pids: BTreeMap<String, i32>,
    traces: Vec<TraceRun>,
    /// CPU seconds per process (user + system), from wait4.
    cpu: BTreeMap<String, Option<f64>>,
    /// Exit codes of the monitoring agents (`--agent`).
    agent_exits: BTreeMap<String, Option<i32>>,
    /// The per-process load series (load.csv).
    load: procs::LoadStats,
    /// The Zenoh router, when the scenario has Zenoh nodes.
    zenoh_router: Option<ZenohRouterReport>,
}

/// In `--agent`'s arguments: the host's live trace session, as `ddscope agent --trace-live` takes it.
pub const TRACE_LIVE: &str = "{trace_live}";

/// The per-process load series of a run (CSV, docs/lab.md).
pub const LOAD_FILE: &str = "load.csv";
/// Where a run with warped clocks keeps each warped host's capture on the true clock.
pub const TRUE_CLOCK_DIR: &str = "true-clock";
/// Most processes sampled (two sides of 64 nodes, tcpdump, agents and iperf3 fit).
const MAX_LOAD_PROCESSES: usize = 256;

#[allow(clippy::too_many_arguments)]
fn drive(opts: &RunOptions, sc: &Scenario, bins: &NodeBins, lab: &Lab, procs: &mut Procs, run_id: &str, out: &Path, tmp: &Path) -> Result<DriveResult> {
    // 0. warped clocks: every process of a warped host reads its clock through the preload
    let warps = sc.clock_warps();
    let clock_ref_ns = now_ns();
    let clock_sync = ddscope_sysstat::clocksync::Probe::default().read();
    if !warps.is_empty() && opts.agent_args.is_some() {
        bail!("hosts with a warped clock and --agent: an agent stamps packets with the kernel's clock, which the lab cannot warp (warp captures only: run without --agent)");
    }
    let warpclock = if warps.is_empty() { None } else { Some(bins.warpclock()?) };
    let clock_env = |host: &str| -> Vec<(&'static str, String)> {
        match (warps.get(host), &warpclock) {
            (Some(w), Some(lib)) => vec![("LD_PRELOAD", lib.display().to_string()), ("DDSLAB_CLOCK_WARP", w.env(clock_ref_ns))],
            _ => vec![],
        }
    };
    for (host, w) in &warps {
        say!(opts, "clock of {host} warped: offset {} ns, drift {} ppb, step {} ns at {} ns from the start", w.offset_ns, w.drift_ppb, w.step_ns, w.step_at_ns);
    }
    // 1. captures
    let mut captures = vec![];
    if sc.capture.enabled {
        for h in &lab.hosts {
            let pcap = tmp.join(format!("{}.pcap", h.name));
            let log = out.join("logs").join(format!("tcpdump-{}.log", h.name));
            let mut cmd = in_netns(&h.netns, "tcpdump");
            cmd.args(["-i", &h.iface, "-n", "-s", &sc.capture.snaplen.to_string(), "--time-stamp-precision=nano"])
                .args(["-B", &(sc.capture.buffer.0 / 1024).max(1).to_string(), "-Z", "root", "-w"])
                .arg(&pcap)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(File::create(&log)?);
            let i = procs.spawn(&format!("tcpdump on {}", h.name), cmd)?;
            wait_for_text(&log, "listening on", Duration::from_secs(10), procs.get(i))?;
            captures.push((h.name.clone(), i, pcap, log));
        }
        say!(opts, "capturing on {}", lab.hosts.iter().map(|h| format!("{}/{}", h.name, h.iface)).collect::<Vec<_>>().join(", "));
        // the Zenoh router's link to every host, at the switch's port towards it: so the router's
        // hop (complete on the port from the publisher's host → first byte on the port to the
        // subscriber's) is a capture point pair of its own
        let router_points = sc.zenoh_router_captures();
        if !router_points.is_empty() {
            let sw = lab.switch_ns.clone().ok_or_else(|| anyhow!("internal: Zenoh router captures but no switch"))?;
            for (i, name) in &router_points {
                let pcap = tmp.join(format!("{name}.pcap"));
                let log = out.join("logs").join(format!("tcpdump-{name}.log"));
                let mut cmd = in_netns(&sw, "tcpdump");
                cmd.args(["-i", &format!("p{i}"), "-n", "-s", &sc.capture.snaplen.to_string(), "--time-stamp-precision=nano"])
                    .args(["-B", &(sc.capture.buffer.0 / 1024).max(1).to_string(), "-Z", "root", "-w"])
                    .arg(&pcap)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(File::create(&log)?);
                let k = procs.spawn(&format!("tcpdump on {name}"), cmd)?;
                wait_for_text(&log, "listening on", Duration::from_secs(10), procs.get(k))?;
                captures.push((name.clone(), k, pcap, log));
            }
            say!(opts, "capturing the Zenoh router's links on {}", router_points.iter().map(|(i, n)| format!("switch/p{i} ({n})")).collect::<Vec<_>>().join(", "));
        }
    }

    // 1b. one LTTng session per traced host, recording before any node of the host starts
    //     (a node registers its tracepoints at start; events of an unregistered process are lost);
    //     live sessions (a relay daemon per host) when the agents follow them (`{trace_live}`)
    let live = opts.agent_args.as_ref().is_some_and(|a| a.iter().any(|a| a.contains(TRACE_LIVE)));
    let mut sessions: BTreeMap<String, HostSession> = BTreeMap::new();
    let traced = sc.traced_hosts();
    for (host, distros) in &traced {
        let h = lab.host(host).ok_or_else(|| anyhow!("internal: traced host {host} not in the lab"))?;
        let dir_name = format!("{host}.lttng");
        let log = out.join("logs").join(format!("lttng-{host}.log"));
        let s = HostSession::start(procs, h, run_id, &out.join(&dir_name), &tmp.join(format!("lttng-home-{host}")), &log, live, &clock_env(host))?;
        say!(opts, "tracing {host} ({}) into {dir_name}", distros.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(", "));
        sessions.insert(host.clone(), s);
    }

    // 1c. monitoring agents (before the workload, so they see its discovery; after the trace
    //     sessions, so an agent following its host's live session finds it)
    let mut agents = vec![];
    if let Some(extra) = &opts.agent_args {
        let exe = std::env::var_os("DDSCOPE_BIN").map(PathBuf::from).unwrap_or(std::env::current_exe()?);
        let exe = exe.to_str().ok_or_else(|| anyhow!("the ddscope path is not UTF-8"))?.to_string();
        for h in &lab.hosts {
            let trace_live = match sessions.get(&h.name).and_then(|s| s.live_url()) {
                Some(url) => url,
                None if extra.iter().any(|a| a.contains(TRACE_LIVE)) => {
                    bail!("--agent uses {TRACE_LIVE} but host {} is not traced (the scenario's `tracing`, or --tracing)", h.name)
                }
                None => String::new(),
            };
            let subst = |a: &str| {
                let (mip, gw) = h.mgmt.map(|(m, g)| (m.to_string(), g.to_string())).unwrap_or_default();
                a.replace("{host}", &h.name)
                    .replace("{ip}", &h.ip.to_string())
                    .replace("{mgmt_ip}", &mip)
                    .replace("{gateway}", &gw)
                    .replace(TRACE_LIVE, &trace_live)
            };
            let log = out.join("logs").join(format!("agent-{}.log", h.name));
            let mut cmd = in_netns(&h.netns, &exe);
            cmd.args(["agent", "-i", &h.iface, "--name", &h.name])
                .args(extra.iter().map(|a| subst(a)))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(File::create(&log)?);
            let i = procs.spawn(&format!("agent on {}", h.name), cmd)?;
            wait_for_text(&log, "capturing on", Duration::from_secs(10), procs.get(i))?;
            agents.push((h.name.clone(), i, log));
        }
        // and on the Zenoh router's links (the capture points `router-HOST`), so `serve` sees the
        // router's hop too; not with a live trace session to follow (the switch runs no node)
        let router_points = sc.zenoh_router_captures();
        if !router_points.is_empty() && !extra.iter().any(|a| a.contains(TRACE_LIVE)) {
            let sw = lab.switch_ns.clone().ok_or_else(|| anyhow!("internal: Zenoh router captures but no switch"))?;
            let (mip, gw) = lab.switch_mgmt.map(|(m, g)| (m.to_string(), g.to_string())).unwrap_or_default();
            let sip = lab.switch_ip.map(|ip| ip.to_string()).unwrap_or_default();
            for (i, name) in &router_points {
                let subst = |a: &str| a.replace("{host}", name).replace("{ip}", &sip).replace("{mgmt_ip}", &mip).replace("{gateway}", &gw);
                let log = out.join("logs").join(format!("agent-{name}.log"));
                let mut cmd = in_netns(&sw, &exe);
                cmd.args(["agent", "-i", &format!("p{i}"), "--name", name])
                    .args(extra.iter().map(|a| subst(a)))
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(File::create(&log)?);
                let k = procs.spawn(&format!("agent on {name}"), cmd)?;
                wait_for_text(&log, "capturing on", Duration::from_secs(10), procs.get(k))?;
                agents.push((name.clone(), k, log));
            }
        }
        say!(opts, "agents running on {}", agents.iter().map(|a| a.0.as_str()).collect::<Vec<_>>().join(", "));
    }

    // 2. iperf3 servers
    let mut iperf_servers = vec![];
    for (k, it) in sc.interference.iter().enumerate() {
        if it.flow.rate.0 == 0 {
            continue; // 0 % load: no traffic at all
        }
        let dst = lab.host(&it.to).ok_or_else(|| anyhow!("internal: host {} not in the lab", it.to))?;
        let port = (5201 + k).to_string();
        let log = out.join("logs").join(format!("iperf3-{k}-server.log"));
        let mut cmd = in_netns(&dst.netns, "iperf3");
        cmd.args(["-s", "-1", "-p", &port, "-B", &dst.ip.to_string(), "--forceflush"])
            .stdin(Stdio::null())
            .stdout(File::create(&log)?)
            .stderr(Stdio::null());
        let i = procs.spawn(&format!("iperf3 server on {}", it.to), cmd)?;
        wait_for_text(&log, "listening", Duration::from_secs(10), procs.get(i))?;
        iperf_servers.push(i);
    }

    // 2b. the Zenoh router (before the nodes, which connect to it at start; after the captures,
    //     so they hold every session's setup)
    let mut zenoh_router = None;
    if sc.has_zenoh() {
        let (ns, ip, runs_on) = if sc.zenoh_router_on_switch() {
            let ns = lab.switch_ns.clone().ok_or_else(|| anyhow!("internal: Zenoh router on the switch but no switch"))?;
            let ip = lab.switch_ip.ok_or_else(|| anyhow!("internal: the switch has no address for the Zenoh router"))?;
            (ns, ip, "switch".to_string())
        } else {
            let h = lab.host(&sc.zenoh.router).ok_or_else(|| anyhow!("internal: zenoh.router {} not in the lab", sc.zenoh.router))?;
            (h.netns.clone(), h.ip, h.name.clone())
        };
        let endpoint = format!("tcp/{ip}:{}", sc.zenoh.port);
        let log = out.join("logs").join("zenoh-router.log");
        let f = File::create(&log)?;
        let i = if sc.has_rmw_zenoh() {
            // the real rmw_zenoh_cpp's own router, on the bundle's Zenoh (protocol 0x08)
            let ros2 = bins.ros2()?;
            let router = ros2.zenoh_router();
            let prog = router.to_str().ok_or_else(|| anyhow!("{}: the router's path is not UTF-8", router.display()))?.to_string();
            let cfg = tmp.join("rmw_zenoh_router.json5");
            fs::write(&cfg, ros2::router_config(&ros2, sc.zenoh.port)?)?;
            let mut cmd = in_netns(&ns, &prog);
            cmd.envs(clock_env(&runs_on)).envs(ros2.env(Vendor::RmwZenoh, false)).env("ZENOH_ROUTER_CONFIG_URI", &cfg).env("ROS_LOG_DIR", out.join("logs").join("ros"));
            cmd.stdin(Stdio::piped()).stdout(f.try_clone()?).stderr(f);
            let i = procs.spawn("zenoh router", cmd)?;
            // zenoh's own log line, written at once ("Started Zenoh router" goes through a C++
            // stdout buffer to the file and may come only when the router ends)
            wait_for_text(&log, "Zenoh can be reached at", Duration::from_secs(30), procs.get(i))?;
            i
        } else {
            let prog = bins.path(Vendor::Zenoh)?;
            let prog = prog.to_str().ok_or_else(|| anyhow!("{}: the node path is not UTF-8", prog.display()))?.to_string();
            let mut cmd = in_netns(&ns, &prog);
            cmd.envs(clock_env(&runs_on));
            cmd.args(["--router", "--listen", &endpoint, "--run-id", run_id]).stdin(Stdio::piped()).stdout(f.try_clone()?).stderr(f);
            let i = procs.spawn("zenoh router", cmd)?;
            wait_for_text(&log, "READY", Duration::from_secs(15), procs.get(i))?;
            i
        };
        say!(opts, "zenoh router on {runs_on} listening on {endpoint} (nodes in {} mode)", sc.zenoh.mode.as_str());
        let stdin = procs.get(i).child.stdin.take();
        zenoh_router = Some((i, stdin, endpoint, runs_on));
    }

    // 3. workload
    let (tx, rx) = mpsc::channel::<(usize, String)>();
    let mut nodes: Vec<RunningNode> = vec![];
    let mut node_pids = BTreeMap::new();
    let facts = workload::ScenarioFacts::of(sc)?;
    // composable nodes: one process per container, started with its first member
    let mut container_procs: BTreeMap<String, (usize, PathBuf)> = BTreeMap::new();
    for (k, n) in sc.nodes.iter().enumerate() {
        let h = lab.host(&n.host).ok_or_else(|| anyhow!("internal: host {} of node {} not in the lab", n.host, n.name))?;
        let truth_of = |m: &crate::scenario::Node| tmp.join(format!("truth-{}.jsonl", m.name));
        let truth_part = truth_of(n);
        if let Some((i, log)) = n.container.as_ref().and_then(|c| container_procs.get(c)) {
            // a later member of a container already started
            node_pids.insert(n.name.clone(), procs.get(*i).pid());
            nodes.push(RunningNode { proc_idx: *i, name: n.name.clone(), host: n.host.clone(), vendor: n.vendor, stdin: None, ready: false, truth_part, log: log.clone() });
            continue;
        }
        let members: Vec<(usize, &crate::scenario::Node)> = match &n.container {
            Some(c) => sc.nodes.iter().enumerate().filter(|(_, m)| m.container.as_deref() == Some(c.as_str())).collect(),
            None => vec![(k, n)],
        };
        let log = out.join("logs").join(format!("{}.log", n.container.as_deref().unwrap_or(&n.name)));
        let prog = bins.path(n.vendor)?;
        // each node's own arguments (a container's: one --component list per member)
        let own_args = |m: &crate::scenario::Node| -> Result<Vec<String>> {
            let mut args = workload::node_args_with(&facts, sc, m, &truth_of(m), run_id, Some(&h.ip.to_string()))?;
            if m.vendor == Vendor::Zenoh {
                let (_, _, endpoint, _) = zenoh_router.as_ref().ok_or_else(|| anyhow!("internal: Zenoh node {} without a router", m.name))?;
                args.extend(workload::zenoh_args(sc, &h.ip.to_string(), endpoint));
            }
            if m.vendor.is_ros2() {
                if m.intra_process {
                    args.push("--intra-process".to_string());
                }
                if m.timers {
                    args.push("--timers".to_string());
                }
                for c in &m.call {
                    args.extend(["--call".to_string(), c.service.clone(), c.rate_hz.to_string()]);
                }
            }
            Ok(args)
        };
        let mut args = vec![];
        if n.container.is_some() {
            for (_, m) in &members {
                args.push("--component".to_string());
                args.extend(own_args(m)?);
            }
        } else {
            args = own_args(n)?;
        }
        // A real ROS 2 node: the stack's environment, its rmw, rcl's log beside the run's
        let mut ros2_env: Vec<(&str, String)> = vec![];
        if n.vendor.is_ros2() {
            let ros2 = bins.ros2()?;
            ros2_env = ros2.env(n.vendor, n.shared_memory);
            ros2_env.push(("ROS_LOG_DIR", out.join("logs").join("ros").display().to_string()));
            if n.vendor == Vendor::RmwZenoh {
                let (_, _, endpoint, _) = zenoh_router.as_ref().ok_or_else(|| anyhow!("internal: rmw_zenoh node {} without a router", n.name))?;
                let cfg = tmp.join(format!("rmw_zenoh_session-{}.json5", n.container.as_deref().unwrap_or(&n.name)));
                fs::write(&cfg, ros2::session_config(&ros2, sc.zenoh.mode, endpoint, &h.ip.to_string())?)?;
                ros2_env.push(("ZENOH_SESSION_CONFIG_URI", cfg.display().to_string()));
            }
            if n.executor == Some(crate::scenario::Executor::Multi) {
                args.extend(["--executor".to_string(), "multi".to_string()]);
            }
        }
        let prog = prog.to_str().ok_or_else(|| anyhow!("{}: the node path is not UTF-8", prog.display()))?;
        // a traced host's processes live in its session daemon's mount namespace
        let mut cmd = match sessions.get(&n.host) {
            Some(s) => s.command(prog),
            None => in_netns(&h.netns, prog),
        };
        procs::schedule(&mut cmd, &n.cpus, n.realtime);
        cmd.envs(clock_env(&n.host));
        cmd.envs(ros2_env.iter().map(|(k, v)| (*k, v.as_str())));
        cmd.args(&args)
            .env("CYCLONEDDS_URI", workload::cyclone_config(sc, &h.iface))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(File::create(&log)?);
        let i = procs.spawn(&format!("node {}", n.container.as_deref().unwrap_or(&n.name)), cmd)?;
        node_pids.insert(n.name.clone(), procs.get(i).pid());
        if let Some(c) = &n.container {
            container_procs.insert(c.clone(), (i, log.clone()));
        }
        let stdin = procs.get(i).child.stdin.take();
        let stdout = procs.get(i).child.stdout.take().ok_or_else(|| anyhow!("internal: node {} has no stdout pipe", n.name))?;
        let txk = tx.clone();
        // a container's READY is every member's
        let member_idx: Vec<usize> = members.iter().map(|(j, _)| *j).collect();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if member_idx.iter().any(|j| txk.send((*j, line.clone())).is_err()) {
                    break;
                }
            }
        });
        nodes.push(RunningNode { proc_idx: i, name: n.name.clone(), host: n.host.clone(), vendor: n.vendor, stdin, ready: false, truth_part, log });
    }
    drop(tx);
    // 3b. per-process load of every process started so far (nodes, tcpdump, agents, iperf3 servers),
    //     every capture.load_interval (200 ms by default) from discovery on, into load.csv
    let sampled: Vec<(String, i32)> = procs
        .list
        .iter()
        .filter(|p| p.status.is_none())
        .map(|p| (p.name.trim_start_matches("node ").replace([' ', ','], "_"), p.pid()))
        .collect();
    let load = procs::LoadSampler::start(&out.join(LOAD_FILE), sampled, sc.capture.load_interval.as_duration(), MAX_LOAD_PROCESSES)?;
    let ready_deadline = Instant::now() + sc.ready_timeout.as_duration() + Duration::from_secs(5);
    while nodes.iter().any(|n| !n.ready) {
        check_interrupt()?;
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok((k, line)) if line.trim() == "READY" => nodes[k].ready = true,
            Ok(_) => {}
            Err(_) => {}
        }
        for n in &nodes {
            if let Some(st) = procs.get(n.proc_idx).poll() {
                let log = fs::read_to_string(&n.log).unwrap_or_default();
                let why = log.lines().rev().find(|l| l.contains("error")).or(log.lines().last()).unwrap_or("").trim().to_string();
                bail!("node {} exited ({st}) during discovery: {why}", n.name);
            }
        }
        if Instant::now() > ready_deadline {
            let waiting: Vec<&str> = nodes.iter().filter(|n| !n.ready).map(|n| n.name.as_str()).collect();
            bail!("discovery did not complete within {}: waiting for {}", sc.ready_timeout, waiting.join(", "));
        }
    }
    say!(opts, "{} nodes discovered each other", nodes.len());

    // 4. START: a common start time a little ahead, so every node begins in phase
    std::thread::sleep(Duration::from_millis(300));
    let t0 = now_ns() + 200_000_000;
    let tstop = t0 + sc.duration.0 as i64;
    for n in &mut nodes {
        if let Some(s) = n.stdin.as_mut() {
            writeln!(s, "START {t0} {tstop}").with_context(|| format!("node {} stopped listening", n.name))?;
            s.flush()?;
        }
    }
    let mut iperf_clients = vec![];
    while now_ns() < t0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    for (k, it) in sc.interference.iter().enumerate() {
        if it.flow.rate.0 == 0 {
            continue;
        }
        let src = lab.host(&it.from).ok_or_else(|| anyhow!("internal: host {} not in the lab", it.from))?;
        let dst = lab.host(&it.to).ok_or_else(|| anyhow!("internal: host {} not in the lab", it.to))?;
        let json_path = out.join("logs").join(format!("iperf3-{k}-client.json"));
        let blocks = ((it.flow.rate.0 as f64 * sc.duration.as_secs_f64()) / (8.0 * it.flow.payload_bytes.0 as f64)).ceil() as u64;
        let mut cmd = in_netns(&src.netns, "iperf3");
        cmd.args(["-c", &dst.ip.to_string(), "-p", &(5201 + k).to_string(), "-u", "-J"])
            .args(["-l", &it.flow.payload_bytes.0.to_string(), "-b", &it.flow.rate.0.to_string()])
            .args(["--pacing-timer", &(it.flow.pacing.0 / 1000).max(1).to_string(), "-k", &blocks.max(1).to_string()])
            .stdin(Stdio::null())
            .stdout(File::create(&json_path)?)
            .stderr(Stdio::null());
        let i = procs.spawn(&format!("iperf3 client {} -> {}", it.from, it.to), cmd)?;
        iperf_clients.push((k, i, json_path));
    }
    say!(opts, "running for {} s", sc.duration.as_secs_f64());

    // 5. run until tstop + linger; a node that dies ends the run
    let end = tstop + sc.linger.0 as i64;
    let mut last_note = Instant::now();
    while now_ns() < end {
        check_interrupt()?;
        for n in &nodes {
            if let Some(st) = procs.get(n.proc_idx).poll() {
                let log = fs::read_to_string(&n.log).unwrap_or_default();
                bail!("node {} exited early ({st}): {}", n.name, log.lines().last().unwrap_or("").trim());
            }
        }
        for (name, i, _, log) in &captures {
            if let Some(st) = procs.get(*i).poll() {
                let log = fs::read_to_string(log).unwrap_or_default();
                bail!("tcpdump on {name} exited early ({st}): {}", log.lines().last().unwrap_or("").trim());
            }
        }
        for (name, i, log) in &agents {
            if let Some(st) = procs.get(*i).poll() {
                let log = fs::read_to_string(log).unwrap_or_default();
                bail!("agent on {name} exited early ({st}): {}", log.lines().last().unwrap_or("").trim());
            }
        }
        for (host, s) in &sessions {
            if let Some(st) = procs.get(s.proc_idx).poll() {
                let log = fs::read_to_string(&s.log).unwrap_or_default();
                bail!("lttng-sessiond on {host} exited early ({st}): {}", log.lines().last().unwrap_or("").trim());
            }
        }
        if let Some((i, ..)) = &zenoh_router {
            if let Some(st) = procs.get(*i).poll() {
                let log = fs::read_to_string(out.join("logs").join("zenoh-router.log")).unwrap_or_default();
                bail!("the zenoh router exited early ({st}): {}", log.lines().last().unwrap_or("").trim());
            }
        }
        if last_note.elapsed() > Duration::from_secs(10) {
            say!(opts, "{:.0} s to go", (end - now_ns()) as f64 / 1e9);
            last_note = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    // 6. STOP the workload; it flushes its ground truth and exits
    let load = load.finish();
    for n in &mut nodes {
        if let Some(mut s) = n.stdin.take() {
            let _ = writeln!(s, "STOP");
        }
    }
    let mut node_exits = BTreeMap::new();
    let mut cpu = BTreeMap::new();
    for n in &nodes {
        let st = procs.get(n.proc_idx).wait_timeout(Duration::from_secs(15));
        node_exits.insert(n.name.clone(), st.code());
        // a container's process once, by its name
        let p = procs.get(n.proc_idx);
        cpu.insert(p.name.clone(), p.cpu_s);
    }
    // 6a. the nodes are gone: the Zenoh router may go
    let zenoh_router = match zenoh_router {
        None => None,
        Some((i, stdin, endpoint, runs_on)) => {
            if let Some(mut s) = stdin {
                let _ = writeln!(s, "STOP");
            }
            let p = procs.get(i);
            if sc.has_rmw_zenoh() {
                // rmw_zenohd reads no stdin: it ends on SIGINT (exit 0), as under `ros2 run`
                p.signal(libc::SIGINT);
            }
            let st = p.wait_timeout(Duration::from_secs(10));
            cpu.insert("zenoh router".to_string(), p.cpu_s);
            Some(ZenohRouterReport {
                mode: sc.zenoh.mode.as_str().to_string(),
                runs_on,
                endpoint,
                pid: Some(p.pid()),
                exit_code: st.code(),
                log: "logs/zenoh-router.log".to_string(),
                captures: sc.zenoh_router_captures().into_iter().map(|(_, n)| n).collect(),
            })
        }
    };
    // 6b. the nodes are gone: stop the trace sessions (flushing every event to disk)
    let mut traces = vec![];
    for (host, s) in &sessions {
        let stop = s.stop(procs).map_err(|e| e.to_string());
        cpu.insert(format!("lttng-sessiond {host}"), procs.get(s.proc_idx).cpu_s);
        traces.push(TraceRun {
            host: host.clone(),
            session: s.session.clone(),
            dir_name: format!("{host}.lttng"),
            started_ns: s.started_ns,
            stop,
        });
    }
    let mut iperf = BTreeMap::new();
    for (k, i, path) in iperf_clients {
        let p = procs.get(i);
        if p.poll().is_none() {
            p.signal(libc::SIGINT);
        }
        p.wait_timeout(Duration::from_secs(5));
        cpu.insert(format!("iperf3 client {k}"), p.cpu_s);
        let report: Option<IperfReport> = fs::read_to_string(&path).ok().and_then(|s| serde_json::from_str(&s).ok());
        iperf.insert(k, report);
    }
    for i in iperf_servers {
        let p = procs.get(i);
        if p.poll().is_none() {
            p.signal(libc::SIGTERM);
        }
        p.wait_timeout(Duration::from_secs(3));
    }
    // 7. captures and agents off, a little later: for the last acknowledgements, and so that the
    // capture ring's last block holding workload frames is handed to tcpdump (libpcap's block
    // timeout is 1 s; tcpdump does not read an unfinished block when it is interrupted)
    std::thread::sleep(Duration::from_millis(if captures.is_empty() { 200 } else { 1100 }));
    let mut agent_exits = BTreeMap::new();
    for (name, i, _) in &agents {
        let p = procs.get(*i);
        p.signal(libc::SIGINT);
        let st = p.wait_timeout(Duration::from_secs(15));
        agent_exits.insert(name.clone(), st.code());
        cpu.insert(format!("agent {name}"), p.cpu_s);
    }
    let mut cap_out = vec![];
    for (name, i, pcap, log) in captures {
        let p = procs.get(i);
        p.signal(libc::SIGINT);
        p.wait_timeout(Duration::from_secs(10));
        cpu.insert(format!("tcpdump {name}"), p.cpu_s);
        let st = parse_tcpdump_stats(&fs::read_to_string(&log).unwrap_or_default());
        cap_out.push((name, pcap, st));
    }
    let mut node_summaries = BTreeMap::new();
    for n in &nodes {
        let log = fs::read_to_string(&n.log).unwrap_or_default();
        // a container's log holds every member's lines, each led by its node's name
        let mine = format!("{}: ", n.name);
        node_summaries.insert(
            n.name.clone(),
            log.lines()
                .filter(|l| l.starts_with(&mine) && (l.contains(": published ") || l.contains(": received ")))
                .map(|l| l.to_string())
                .collect(),
        );
    }
    let node_list = nodes.iter().map(|n| (n.name.clone(), n.host.clone(), n.vendor, n.truth_part.clone())).collect();
    Ok(DriveResult { clock_ref_ns, clock_sync, t0, tstop, captures: cap_out, node_exits, node_summaries, iperf, nodes: node_list, node_pids, traces, cpu, agent_exits, load, zenoh_router })
}

/// Runs `ddscope topics CAPTURE --format json` (this very binary).
fn topics_of(capture: &Path) -> Result<TopicsDoc> {
    let exe = std::env::var_os("DDSCOPE_BIN").map(PathBuf::from).unwrap_or(std::env::current_exe()?);
    let out = std::process::Command::new(&exe)
        .arg("topics")
        .arg(capture)
        .args(["--format", "json"])
        .output()
        .with_context(|| format!("cannot run {} topics", exe.display()))?;
    if !out.status.success() {
        bail!("ddscope topics {}: {}", capture.display(), String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("").trim());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| anyhow!("ddscope topics {} --format json: unexpected output: {e}", capture.display()))
}

#[allow(clippy::too_many_arguments)]
fn analyse(
    opts: &RunOptions,
    sc: &Scenario,
    bins: &NodeBins,
    hosts: &[net::HostNet],
    out: &Path,
    _tmp: &Path,
    d: DriveResult,
    run_id: &str,
    started: Instant,
) -> Result<RunReport> {
    let mut failures: Vec<String> = vec![];
    if let Some(e) = &d.load.write_error {
        failures.push(format!("{LOAD_FILE}: cannot write: {e}"));
    }
    let tol = sc.fidelity.rate_tolerance.0;

    // captures -> pcapng
    let warps = sc.clock_warps();
    let _ = fs::remove_dir_all(out.join(TRUE_CLOCK_DIR));
    let mut captures = vec![];
    let mut capture_files: BTreeMap<String, PathBuf> = BTreeMap::new();
    let router_points = sc.zenoh_router_captures();
    for (host, pcap, st) in &d.captures {
        let name = captures_name(host, opts.gzip);
        let dst = out.join(&name);
        let (descr, iface) = match hosts.iter().find(|h| &h.name == host) {
            Some(h) => (format!("ddscope lab host {host} ({} {} {}), scenario {}, run {run_id}", h.netns, h.ip, h.mac, sc.name), format!("{host}/{}", h.iface)),
            None => {
                let (i, _) = router_points.iter().find(|(_, n)| n == host).ok_or_else(|| anyhow!("internal: capture of unknown host {host}"))?;
                let to = hosts.get(*i).ok_or_else(|| anyhow!("internal: router capture {host} of no host"))?;
                (
                    format!("ddscope lab switch port p{i} towards {} ({}): the Zenoh router's link to it, scenario {}, run {run_id}", to.name, to.ip, sc.name),
                    format!("switch/p{i}"),
                )
            }
        };
        let info = pcapng::InterfaceInfo {
            name: &iface,
            description: &descr,
            received: st.received_by_filter,
            dropped: st.dropped_by_kernel,
        };
        let cs = match warps.get(host) {
            Some(w) => {
                // the host's capture as its warped clock stamps it, and beside it the true times
                // (true-clock/HOST.pcapng: the oracle a clock estimate is checked against)
                let r = d.clock_ref_ns;
                fs::create_dir_all(out.join(TRUE_CLOCK_DIR))?;
                let truth = out.join(TRUE_CLOCK_DIR).join(&name);
                pcapng::pcap_to_pcapng(pcap, &truth, &info, opts.gzip).with_context(|| format!("capture of {host} (true clock)"))?;
                pcapng::pcap_to_pcapng_at(pcap, &dst, &info, opts.gzip, &|t| w.realtime(r, t)).with_context(|| format!("capture of {host}"))?
            }
            None => pcapng::pcap_to_pcapng(pcap, &dst, &info, opts.gzip).with_context(|| format!("capture of {host}"))?,
        };
        let _ = fs::remove_file(pcap);
        let drops = st.dropped_by_kernel.unwrap_or(0) + st.dropped_by_interface.unwrap_or(0);
        if st.dropped_by_kernel.is_none() {
            failures.push(format!("capture on {host}: tcpdump reported no drop counter"));
        } else if drops > 0 && !sc.capture.allow_drops {
            failures.push(format!("capture on {host}: {drops} packets dropped by the kernel"));
        }
        if !cs.nanosecond_source {
            failures.push(format!("capture on {host}: timestamps are not nanosecond"));
        }
        if let Some(e) = &cs.read_error {
            eprintln!("lab: capture on {host}: {e} (the frames before it are kept)");
        }
        if st.undelivered_at_stop() > 0 {
            eprintln!(
                "lab: capture on {host}: {} frames were in the capture ring but not written when tcpdump stopped (after the workload's end)",
                st.undelivered_at_stop()
            );
        }
        let file_bytes = fs::metadata(&dst).map(|m| m.len()).unwrap_or(0);
        captures.push(CaptureReport::new(host, &name, &cs, st.clone(), file_bytes));
        if !router_points.iter().any(|(_, n)| n == host) {
            capture_files.insert(host.clone(), dst); // the wire checks are per host
        }
    }

    // ground truth: one file per host
    let mut records = vec![];
    let mut truth_files = vec![];
    for h in &sc.hosts {
        let parts: Vec<PathBuf> = d.nodes.iter().filter(|n| n.1 == h.name).map(|n| n.3.clone()).collect();
        let file = format!("{}.truth.jsonl", h.name);
        let (recs, problems) = truth::merge(&parts, &out.join(&file))?;
        failures.extend(problems);
        truth_files.push(TruthFile { host: h.name.clone(), file, records: recs.len() });
        records.extend(recs);
    }
    let files: Vec<(String, PathBuf)> = truth_files.iter().map(|t| (t.host.clone(), out.join(&t.file))).collect();
    let (resolved, unresolved) = truth::resolve_seq_by_stamp(&mut records, &files)?;
    if resolved > 0 {
        say!(opts, "ground truth: {resolved} receives given their sequence number by their header.stamp (rmw_cyclonedds_cpp gives none)");
    }
    if unresolved > 0 {
        failures.push(format!("ground truth: {unresolved} receives without a sequence number and no publish with their header.stamp"));
    }
    // The lab's own account of the truth on the true clock: a warped host's nodes stamped theirs
    // with its clock (the files keep what they stamped).
    let acc = if warps.is_empty() {
        truth::account(sc, &records)
    } else {
        let mut unwarped = records.clone();
        for r in unwarped.iter_mut() {
            if let Some(w) = warps.get(&r.host) {
                r.t_ns = w.true_time(d.clock_ref_ns, r.t_ns);
            }
        }
        truth::account(sc, &unwarped)
    };
    if acc.unknown_receptions > 0 {
        failures.push(format!("ground truth: {} receptions of samples nobody published", acc.unknown_receptions));
    }
    if acc.unlinked_relays > 0 {
        failures.push(format!("ground truth: {} relay publications without a received source", acc.unlinked_relays));
    }
    for (name, code) in &d.node_exits {
        if *code != Some(0) {
            failures.push(format!("node {name} exited with {code:?}"));
        }
    }
    if let Some(r) = &d.zenoh_router {
        if r.exit_code != Some(0) {
            failures.push(format!("the zenoh router exited with {:?} ({})", r.exit_code, r.log));
        }
    }
    for (host, code) in &d.agent_exits {
        if *code != Some(0) {
            failures.push(format!("agent on {host} exited with {code:?} (logs/agent-{host}.log)"));
        }
    }

    // the wire, per capture; a capture that lost packets (allowed by the scenario) cannot vouch for rates
    let mut wire: BTreeMap<String, TopicsDoc> = BTreeMap::new();
    let mut wire_skipped = vec![];
    for (host, f) in &capture_files {
        let dropped = d
            .captures
            .iter()
            .find(|c| &c.0 == host)
            .map(|(_, _, st)| st.dropped_by_kernel.unwrap_or(0) + st.dropped_by_interface.unwrap_or(0) > 0)
            .unwrap_or(false);
        if dropped {
            wire_skipped.push(format!("{host}: the capture dropped packets, wire checks skipped"));
            continue;
        }
        say!(opts, "ddscope topics {}", f.display());
        match topics_of(f) {
            Ok(v) => {
                wire.insert(host.clone(), v);
            }
            Err(e) => failures.push(format!("{e}")),
        }
    }

    let nominal = sc.nominal_rates()?;
    let writers = sc.writers();
    let readers = sc.readers();
    let mut topics = vec![];
    for t in &acc.topics {
        let ws: Vec<_> = writers.iter().filter(|w| w.flow.topic == t.topic).collect();
        let Some(first) = ws.first() else {
            failures.push(format!("{}: accounted for but no writer in the scenario", t.topic));
            continue;
        };
        let flow = &first.flow;
        let nom = nominal.get(&t.topic).copied().unwrap_or(0.0);
        // application side
        let gt_rate_ok = t.rate_hz.map(|r| ((r - nom) / nom).abs() <= tol);
        let sizes_ok = t.writers.iter().all(|w| w.sizes == vec![flow.sample_bytes.0]);
        let seq_ok = t.writers.iter().all(|w| w.seq_contiguous);
        let reliable = flow.reliability == ddscope_traffic::Reliability::Reliable;
        // An empty serialized payload goes on the wire, but Cyclone DDS and Fast DDS readers drop a
        // DATA without one (docs/lab.md): what arrives is reported, not required.
        let empty = flow.sample_bytes.0 == 0;
        if empty && t.lost > 0 {
            eprintln!(
                "lab: {}: empty payloads: {} of {} deliveries arrived (the DDS readers drop DATA without a serialized payload)",
                t.topic,
                t.expected_deliveries.saturating_sub(t.lost),
                t.expected_deliveries
            );
        }
        let delivery_ok = t.lost == 0 || !reliable || sc.fidelity.allow_loss || empty;
        let checks = TopicChecks { truth_rate_within_tolerance: gt_rate_ok, truth_sizes_exact: sizes_ok, truth_seq_contiguous: seq_ok, delivery: delivery_ok };
        if let (Some(false), Some(r)) = (gt_rate_ok, t.rate_hz) {
            fidelity_fail(sc, &mut failures, format!("{}: published at {r:.3} Hz, nominal {nom} Hz", t.topic));
        }
        if t.published == 0 {
            fidelity_fail(sc, &mut failures, format!("{}: nothing published", t.topic));
        }
        if !sizes_ok {
            failures.push(format!("{}: published sizes differ from {} bytes", t.topic, flow.sample_bytes.0));
        }
        if !seq_ok {
            failures.push(format!("{}: sequence numbers in the ground truth are not 1..n", t.topic));
        }
        if !delivery_ok {
            failures.push(format!("{}: {} of {} reliable deliveries lost", t.topic, t.lost, t.expected_deliveries));
        }
        // the wire: every capture whose host sends this topic to a remote reader
        let mut wire_checks = vec![];
        for (host, doc) in &wire {
            let local_writers: Vec<_> = ws.iter().filter(|w| &w.host == host).collect();
            let remote_readers = readers.iter().filter(|r| r.topic == t.topic && &r.host != host).count();
            let incoming = ws.iter().any(|w| &w.host != host) && readers.iter().any(|r| r.topic == t.topic && &r.host == host);
            if local_writers.is_empty() || remote_readers == 0 || incoming {
                continue; // not a sender-side view of this topic
            }
            let wire_nominal: f64 = local_writers.iter().map(|w| w.flow.rate_hz).sum();
            let published: u64 = t.writers.iter().filter(|w| &w.host == host).map(|w| w.published).sum();
            let Some(e) = doc.topics.iter().find(|e| e.topic_name.as_deref() == Some(t.topic.as_str())) else {
                failures.push(format!("{}: not seen in the capture of {host}", t.topic));
                continue;
            };
            // the wire rate of a reliable writer of empty payloads mixes in its resends: not judged
            // The rate `ddscope topics` gives (docs/events.md, "Rates"): none for a bursty stream, which fails.
            let rate_ok = if empty && reliable { Some(true) } else { e.rate_hz.map(|r| ((r - wire_nominal) / wire_nominal).abs() <= tol) };
            let size_ok = e.min_sample_size == Some(flow.sample_bytes.0) && e.max_sample_size == Some(flow.sample_bytes.0);
            // a reliable writer of empty payloads repeats them: its readers never acknowledge one
            let samples_ok = e.samples == published || (empty && reliable && e.samples >= published);
            let type_ok = e.type_raw.as_deref() == Some(dds_type_name(&flow.type_name).as_str());
            let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_else(|| "null".into());
            if rate_ok != Some(true) {
                let got = e.rate_hz.map(|r| format!("{r:.3} Hz")).unwrap_or_else(|| format!("no rate ({}, {} samples)", e.rate_kind.as_deref().unwrap_or("?"), e.samples));
                fidelity_fail(sc, &mut failures, format!("{} on {host}: {got} on the wire, nominal {wire_nominal} Hz", t.topic));
            }
            if !size_ok {
                failures.push(format!(
                    "{} on {host}: sample sizes {}..{} on the wire, configured {}",
                    t.topic,
                    opt(e.min_sample_size),
                    opt(e.max_sample_size),
                    flow.sample_bytes.0
                ));
            }
            if !samples_ok {
                failures.push(format!("{} on {host}: {} samples on the wire, {published} published", t.topic, e.samples));
            }
            if !type_ok {
                failures.push(format!("{} on {host}: type {} on the wire", t.topic, e.type_raw.as_deref().unwrap_or("null")));
            }
            wire_checks.push(WireCheck {
                host: host.clone(),
                nominal_rate_hz: wire_nominal,
                rate_hz: e.rate_hz,
                rate_kind: e.rate_kind.clone(),
                samples: e.samples,
                published,
                min_sample_size: e.min_sample_size,
                max_sample_size: e.max_sample_size,
                mean_sample_size: e.mean_sample_size,
                type_raw: e.type_raw.clone(),
                vendors: e.vendors.clone(),
                writers: e.writers,
                readers: e.readers,
                rtps_frags_per_sample: e.rtps_frags_per_sample,
                ip_frags_per_sample: e.ip_frags_per_sample,
                retransmitted_fragments: e.retransmitted_fragments,
                sn_gaps: e.sn_gaps,
                heartbeats: e.heartbeats,
                acknacks: e.acknacks,
                nack_frags: e.nack_frags,
                gaps: e.gaps,
                rate_ok,
                size_ok,
                samples_ok,
                type_ok,
            });
        }
        let on_wire = !wire_checks.is_empty();
        topics.push(TopicReport {
            topic: t.topic.clone(),
            type_name: flow.type_name.clone(),
            type_raw: dds_type_name(&flow.type_name),
            sample_bytes: flow.sample_bytes.0,
            reliability: flow.reliability,
            history_depth: flow.history_depth,
            nominal_rate_hz: nom,
            crosses_link: on_wire,
            truth: t.clone(),
            wire: wire_checks,
            checks,
        });
    }

    let mut nodes = vec![];
    for (name, host, vendor, _) in &d.nodes {
        let node = sc.nodes.iter().find(|n| &n.name == name);
        let tracing = node.map(|n| sc.tracing_of(n)).unwrap_or_default();
        let container = node.and_then(|n| n.container.clone());
        nodes.push(NodeReport {
            name: name.clone(),
            host: host.clone(),
            vendor: *vendor,
            exit_code: d.node_exits.get(name).copied().flatten(),
            log: format!("logs/{}.log", container.as_deref().unwrap_or(name)),
            container,
            summary: d.node_summaries.get(name).cloned(),
            pid: d.node_pids.get(name).copied(),
            tracing,
        });
    }
    let mut interference = vec![];
    for (k, it) in sc.interference.iter().enumerate() {
        let sum = d.iperf.get(&k).and_then(|r| r.as_ref()).map(|r| r.end.sum.clone()).unwrap_or_default();
        let achieved = sum.bits_per_second;
        // Below target is reported, not failed: iperf3 writes as fast as its socket lets it, so a
        // saturated link (the point of the 95 % level) slows it just like a machine that cannot
        // generate the load; run.json and the warning give the number.
        let below_target = achieved.map(|a| a < it.flow.rate.0 as f64 * 0.95);
        if it.flow.rate.0 > 0 {
            match achieved {
                None => failures.push(format!("interference[{k}]: iperf3 reported no result (logs/iperf3-{k}-client.json)")),
                Some(a) if below_target == Some(true) => eprintln!(
                    "lab: warning: interference[{k}]: iperf3 offered {:.0} of {:.0} Mbit/s (link saturated or machine too slow)",
                    a / 1e6,
                    it.flow.rate.0 as f64 / 1e6
                ),
                _ => {}
            }
        }
        interference.push(InterferenceReport {
            from: it.from.clone(),
            to: it.to.clone(),
            load: it.load.map(|l| l.to_string()),
            rate_bps: it.flow.rate.0,
            payload_bytes: it.flow.payload_bytes.0,
            pacing_ns: it.flow.pacing.0,
            datagrams_per_burst: it.flow.datagrams_per_burst(),
            achieved_bps: achieved,
            below_target,
            packets: sum.packets,
            lost_packets: sum.lost_packets,
            jitter_ms: sum.jitter_ms,
            log: format!("logs/iperf3-{k}-client.json"),
        });
    }

    // the traces, each against the ground truth of its host
    let tracing = if d.traces.is_empty() {
        None
    } else {
        let mut host_reports = vec![];
        for tr in &d.traces {
            let host_nodes: Vec<NodeProc> = sc
                .nodes
                .iter()
                .filter(|n| n.host == tr.host)
                .map(|n| NodeProc {
                    name: n.name.clone(),
                    pid: d.node_pids.get(&n.name).copied(),
                    tracing: sc.tracing_of(n),
                    writers: n.publish.len() + n.relay.len(),
                    readers: n.subscribe.len(),
                    vendor: n.vendor,
                })
                .collect();
            let host_records: Vec<&truth::Record> = records.iter().filter(|r| r.host == tr.host).collect();
            say!(opts, "reading the trace {}", tr.dir_name);
            let (mut rep, problems) = tracecheck::check_host(&tr.host, &tr.dir_name, &out.join(&tr.dir_name), &host_nodes, &host_records);
            rep.session = tr.session.clone();
            rep.started_ns = tr.started_ns;
            rep.distros = sc.traced_hosts().get(&tr.host).map(|s| s.iter().copied().collect()).unwrap_or_default();
            match &tr.stop {
                Ok(st) => {
                    rep.stopped_ns = Some(st.stopped_ns);
                    rep.lost_events = Some(st.lost_events);
                    rep.lost_packets = Some(st.lost_packets);
                    if st.lost_events > 0 || st.lost_packets > 0 {
                        failures.push(format!(
                            "trace of {}: the tracer lost {} events and {} packets (buffers full)",
                            tr.host, st.lost_events, st.lost_packets
                        ));
                    }
                }
                Err(e) => failures.push(format!("trace of {}: {e}", tr.host)),
            }
            failures.extend(problems);
            host_reports.push(rep);
        }
        let distros: std::collections::BTreeSet<Tracing> = sc.traced_hosts().values().flatten().copied().collect();
        Some(TracingReport {
            distros: distros.into_iter().collect(),
            channel: ChannelReport {
                name: lttng::CHANNEL.to_string(),
                events: lttng::EVENTS.to_string(),
                contexts: lttng::CONTEXTS.iter().map(|c| c.to_string()).collect(),
                mode: "discard".to_string(),
                buffers: "per-uid".to_string(),
                subbuf_size: lttng::SUBBUF_SIZE,
                num_subbuf: lttng::NUM_SUBBUF,
            },
            hosts: host_reports,
        })
    };

    let wall = (d.tstop - d.t0) as f64 / 1e9 + sc.linger.as_secs_f64();
    let total_cpu: f64 = d.cpu.values().flatten().sum();
    let cpus = std::thread::available_parallelism().map(|n| n.get()).ok();
    let cpu_report = CpuReport {
        processes_s: d.cpu.clone(),
        total_s: total_cpu,
        cpus,
        mean_cores_busy: total_cpu / wall.max(1e-9),
        note: "user+system CPU of the lab's processes over the run (publication time + linger), excluding the kernel's softirq work for the link".to_string(),
    };
    let traced = tracing.is_some();
    let tools = Tools {
        ddscope: env!("CARGO_PKG_VERSION").to_string(),
        cyclonedds: bins.version(Vendor::Cyclone),
        fastdds: bins.version(Vendor::Fastdds),
        tcpdump: first_line(&["tcpdump", "--version"]),
        iperf3: first_line(&["iperf3", "--version"]),
        iproute2: first_line(&["ip", "-V"]),
        kernel: fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string()),
        cpus,
        lttng: if traced { lttng::version() } else { None },
        babeltrace2: if traced { first_line(&["babeltrace2", "--version"]) } else { None },
        zenoh: if sc.has_zenoh() { bins.version(Vendor::Zenoh) } else { None },
    };
    Ok(RunReport {
        format: FORMAT.to_string(),
        ok: failures.is_empty(),
        failures,
        scenario: sc.name.clone(),
        scenario_file: opts.scenario.display().to_string(),
        resolved_scenario: "scenario.toml".to_string(),
        run_id: run_id.to_string(),
        tools,
        timing: Timing {
            t0_ns: d.t0,
            tstop_ns: d.tstop,
            duration_s: sc.duration.as_secs_f64(),
            linger_s: sc.linger.as_secs_f64(),
            wall_s: started.elapsed().as_secs_f64(),
        },
        network: NetworkReport {
            mtu: sc.network.mtu,
            rate: sc.network.rate.map(|r| r.to_string()),
            tbf_burst: sc.network.rate.map(|r| crate::net::tbf_burst(&sc.network, r).0),
            topology: if hosts.len() == 2 && sc.network.loss.is_none() && !sc.zenoh_router_on_switch() { Topology::PointToPoint } else { Topology::Bridge },
            hosts: hosts.to_vec(),
            ebpf: None,
            kernel_drops: vec![],
        },
        dds: sc.dds.clone(),
        fidelity: sc.fidelity.clone(),
        captures,
        truth: truth_files,
        nodes,
        topics,
        interference,
        agents: d.agent_exits.iter().map(|(h, c)| AgentReport { host: h.clone(), exit_code: *c, log: format!("logs/agent-{h}.log") }).collect(),
        cpu: cpu_report,
        unknown_receptions: acc.unknown_receptions,
        wire_checks_skipped: wire_skipped,
        tracing,
        load: Some(d.load.clone()),
        zenoh_router: d.zenoh_router.clone(),
        clock_sync: d.clock_sync.iter().filter_map(|r| r.as_ref().ok().cloned()).collect(),
        clock_sync_errors: d.clock_sync.iter().filter_map(|r| r.as_ref().err().cloned()).collect(),
        clocks: warps
            .iter()
            .map(|(h, w)| ClockReport { host: h.clone(), warp: *w, ref_ns: d.clock_ref_ns, true_clock_capture: format!("{TRUE_CLOCK_DIR}/{}", captures_name(h, opts.gzip)) })
            .collect(),
    })
}

fn fidelity_fail(sc: &Scenario, failures: &mut Vec<String>, msg: String) {
    if sc.fidelity.enforce {
        failures.push(msg);
    } else {
        eprintln!("lab: fidelity (not enforced): {msg}");
    }
}

/// "sensor_msgs/msg/Image" -> "sensor_msgs::msg::dds_::Image_"
pub fn dds_type_name(ros: &str) -> String {
    let parts: Vec<&str> = ros.split('/').collect();
    if parts.len() == 3 {
        format!("{}::{}::dds_::{}_", parts[0], parts[1], parts[2])
    } else {
        ros.to_string()
    }
}

fn print_summary(report: &RunReport) {
    println!(
        "{:<56} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>6}",
        "topic", "bytes", "nominal", "truth_hz", "wire_hz", "published", "received", "lost"
    );
    for t in &report.topics {
        let wire_hz = t.wire.first().and_then(|w| w.rate_hz);
        println!(
            "{:<56} {:>10} {:>10.3} {:>10} {:>10} {:>9} {:>9} {:>6}",
            t.topic,
            t.sample_bytes,
            t.nominal_rate_hz,
            t.truth.rate_hz.map(|r| format!("{r:.3}")).unwrap_or("-".into()),
            wire_hz.map(|r| format!("{r:.3}")).unwrap_or("-".into()),
            t.truth.published,
            t.truth.received,
            t.truth.lost,
        );
    }
    for c in &report.captures {
        println!(
            "capture {}: {} packets, {} bytes on disk, {} dropped by kernel",
            c.file,
            c.packets,
            c.file_bytes,
            c.tcpdump.dropped_by_kernel.map(|d| d.to_string()).unwrap_or_else(|| "null".into())
        );
    }
    if let Some(tr) = &report.tracing {
        for h in &tr.hosts {
            println!(
                "trace {}: {} events of {} processes, {} lost ({})",
                h.dir,
                h.events,
                h.processes.len(),
                h.lost_events.map(|l| l.to_string()).unwrap_or_else(|| "?".into()),
                h.distros.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(", ")
            );
        }
    }
    println!(
        "cpu: lab processes kept {:.2} of {} cores busy",
        report.cpu.mean_cores_busy,
        report.cpu.cpus.map(|c| c.to_string()).unwrap_or_else(|| "?".into())
    );
    println!("{}", if report.ok { "run ok" } else { "run FAILED" });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcpdump_counters() {
        let st = parse_tcpdump_stats(
            "tcpdump: listening on eth0, link-type EN10MB (Ethernet), snapshot length 262144 bytes\n62242 packets captured\n62248 packets received by filter\n3 packets dropped by kernel\n",
        );
        assert_eq!(st.captured, Some(62242));
        assert_eq!(st.received_by_filter, Some(62248));
        assert_eq!(st.dropped_by_kernel, Some(3));
        assert_eq!(parse_tcpdump_stats("1 packet captured\n1 packet received by filter\n0 packets dropped by kernel").dropped_by_kernel, Some(0));
        assert_eq!(parse_tcpdump_stats("").dropped_by_kernel, None);
    }

    #[test]
    fn type_names() {
        assert_eq!(dds_type_name("sensor_msgs/msg/Image"), "sensor_msgs::msg::dds_::Image_");
    }

    #[test]
    fn stamps() {
        let s = utc_stamp();
        assert_eq!(s.len(), 15);
        assert_eq!(&s[8..9], "T");
    }
}
