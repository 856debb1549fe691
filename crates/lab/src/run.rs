//! `ddscope lab run`: hosts up, captures on, workload discovered, START,
//! interference, STOP, captures off, hosts down; then the captures are
//! converted, the ground truth merged and accounted for, the wire checked with
//! `ddscope topics`, and `run.json` written.

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::net::{self, Lab};
use crate::pcapng;
use crate::procs::{self, in_netns, Procs};
use crate::scenario::{self, Scenario, Vendor};
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
    let secs = now_ns() / 1_000_000_000;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // civil-from-days (Howard Hinnant)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!("{y:04}{m:02}{d:02}T{:02}{:02}{:02}", sod / 3600, sod % 3600 / 60, sod % 60)
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

#[derive(Debug, Default, Clone, Serialize)]
pub struct CaptureStats {
    pub captured: Option<u64>,
    pub received_by_filter: Option<u64>,
    pub dropped_by_kernel: Option<u64>,
    pub dropped_by_interface: Option<u64>,
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

pub fn run(opts: &RunOptions) -> Result<i32> {
    let started = Instant::now();
    let sc = scenario::load(&opts.scenario)?
        .resolve_with(&opts.overrides)
        .map_err(|e| anyhow!("{}: {e}", opts.scenario.display()))?;
    if !net::is_root() {
        bail!("ddscope lab run needs root to create network namespaces (run it with sudo)");
    }
    for tool in ["ip", "tc", "tcpdump"] {
        which(tool)?;
    }
    if !sc.interference.is_empty() {
        which("iperf3")?;
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
    // a previous run's files would be mistaken for this one's
    for entry in fs::read_dir(&out)? {
        let p = entry?.path();
        let n = p.file_name().unwrap_or_default().to_string_lossy().to_string();
        if n.ends_with(".pcapng") || n.ends_with(".pcapng.gz") || n.ends_with(".truth.jsonl") || n == "run.json" || n == "scenario.toml" {
            fs::remove_file(&p)?;
        }
    }
    fs::write(out.join("scenario.toml"), sc.to_toml()?)?;

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
    let down = lab.down();
    drop(lab);
    let drive = result?;
    down?;
    say!(opts, "hosts removed; analysing");

    // -------- analysis on files only --------
    let report = analyse(opts, &sc, &bins, &hosts, &out, &tmp, drive, &run_id, started)?;
    let _ = fs::remove_dir_all(&tmp);
    let failures: Vec<String> = report["failures"].as_array().unwrap().iter().map(|v| v.as_str().unwrap_or("").to_string()).collect();
    fs::write(out.join("run.json"), serde_json::to_string_pretty(&report)? + "\n")?;
    print_summary(&report);
    if !failures.is_empty() {
        let shown: Vec<&str> = failures.iter().take(4).map(|s| s.as_str()).collect();
        let more = if failures.len() > 4 { format!(" and {} more", failures.len() - 4) } else { String::new() };
        bail!("run failed: {}{more} (all in {})", shown.join("; "), out.join("run.json").display());
    }
    Ok(0)
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

struct DriveResult {
    t0: i64,
    tstop: i64,
    captures: Vec<(String, PathBuf, CaptureStats)>,
    node_exits: BTreeMap<String, Option<i32>>,
    node_summaries: BTreeMap<String, Vec<String>>,
    iperf: Vec<Value>,
    nodes: Vec<(String, String, Vendor, PathBuf)>,
    /// CPU seconds per process (user + system), from wait4.
    cpu: BTreeMap<String, Option<f64>>,
    /// Exit codes of the monitoring agents (`--agent`).
    agent_exits: BTreeMap<String, Option<i32>>,
}

#[allow(clippy::too_many_arguments)]
fn drive(opts: &RunOptions, sc: &Scenario, bins: &NodeBins, lab: &Lab, procs: &mut Procs, run_id: &str, out: &Path, tmp: &Path) -> Result<DriveResult> {
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
    }

    // 1b. monitoring agents (before the workload, so they see its discovery)
    let mut agents = vec![];
    if let Some(extra) = &opts.agent_args {
        let exe = std::env::var_os("DDSCOPE_BIN").map(PathBuf::from).unwrap_or(std::env::current_exe()?);
        let exe = exe.to_str().ok_or_else(|| anyhow!("the ddscope path is not UTF-8"))?.to_string();
        for h in &lab.hosts {
            let subst = |a: &str| {
                let (mip, gw) = h.mgmt.map(|(m, g)| (m.to_string(), g.to_string())).unwrap_or_default();
                a.replace("{host}", &h.name).replace("{ip}", &h.ip.to_string()).replace("{mgmt_ip}", &mip).replace("{gateway}", &gw)
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
        say!(opts, "agents running on {}", lab.hosts.iter().map(|h| h.name.as_str()).collect::<Vec<_>>().join(", "));
    }

    // 2. iperf3 servers
    let mut iperf_servers = vec![];
    for (k, it) in sc.interference.iter().enumerate() {
        if it.flow.rate.0 == 0 {
            continue; // 0 % load: no traffic at all
        }
        let dst = lab.host(&it.to).unwrap();
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

    // 3. workload
    let (tx, rx) = mpsc::channel::<(usize, String)>();
    let mut nodes: Vec<RunningNode> = vec![];
    for (k, n) in sc.nodes.iter().enumerate() {
        let h = lab.host(&n.host).unwrap();
        let truth_part = tmp.join(format!("truth-{}.jsonl", n.name));
        let log = out.join("logs").join(format!("{}.log", n.name));
        let prog = bins.path(n.vendor)?;
        let args = workload::node_args(sc, n, &truth_part, run_id, Some(&h.ip.to_string()))?;
        let prog = prog.to_str().ok_or_else(|| anyhow!("{}: the node path is not UTF-8", prog.display()))?;
        let mut cmd = in_netns(&h.netns, prog);
        cmd.args(&args)
            .env("CYCLONEDDS_URI", workload::cyclone_config(sc, &h.iface))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(File::create(&log)?);
        let i = procs.spawn(&format!("node {}", n.name), cmd)?;
        let stdin = procs.get(i).child.stdin.take();
        let stdout = procs.get(i).child.stdout.take().unwrap();
        let txk = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if txk.send((k, line)).is_err() {
                    break;
                }
            }
        });
        nodes.push(RunningNode { proc_idx: i, name: n.name.clone(), host: n.host.clone(), vendor: n.vendor, stdin, ready: false, truth_part, log });
    }
    drop(tx);
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
        let src = lab.host(&it.from).unwrap();
        let dst = lab.host(&it.to).unwrap();
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
        if last_note.elapsed() > Duration::from_secs(10) {
            say!(opts, "{:.0} s to go", (end - now_ns()) as f64 / 1e9);
            last_note = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(20));
    }

    // 6. STOP the workload; it flushes its ground truth and exits
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
        cpu.insert(format!("node {}", n.name), procs.get(n.proc_idx).cpu_s);
    }
    let mut iperf = vec![];
    for (k, i, path) in iperf_clients {
        let p = procs.get(i);
        if p.poll().is_none() {
            p.signal(libc::SIGINT);
        }
        p.wait_timeout(Duration::from_secs(5));
        cpu.insert(format!("iperf3 client {k}"), p.cpu_s);
        let v: Value = fs::read_to_string(&path).ok().and_then(|s| serde_json::from_str(&s).ok()).unwrap_or(Value::Null);
        iperf.push(json!({"index": k, "client": v}));
    }
    for i in iperf_servers {
        let p = procs.get(i);
        if p.poll().is_none() {
            p.signal(libc::SIGTERM);
        }
        p.wait_timeout(Duration::from_secs(3));
    }
    // 7. captures and agents off (a little later, for the last acknowledgements)
    std::thread::sleep(Duration::from_millis(200));
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
        node_summaries.insert(
            n.name.clone(),
            log.lines().filter(|l| l.contains(": published ") || l.contains(": received ")).map(|l| l.to_string()).collect(),
        );
    }
    let node_list = nodes.iter().map(|n| (n.name.clone(), n.host.clone(), n.vendor, n.truth_part.clone())).collect();
    Ok(DriveResult { t0, tstop, captures: cap_out, node_exits, node_summaries, iperf, nodes: node_list, cpu, agent_exits })
}

/// Runs `ddscope topics CAPTURE --format json` (this very binary).
fn topics_of(capture: &Path) -> Result<Value> {
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
    Ok(serde_json::from_slice(&out.stdout)?)
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
) -> Result<Value> {
    let mut failures: Vec<String> = vec![];
    let tol = sc.fidelity.rate_tolerance.0;

    // captures -> pcapng
    let mut captures = vec![];
    let mut capture_files: BTreeMap<String, PathBuf> = BTreeMap::new();
    for (host, pcap, st) in &d.captures {
        let h = hosts.iter().find(|h| &h.name == host).unwrap();
        let name = if opts.gzip { format!("{host}.pcapng.gz") } else { format!("{host}.pcapng") };
        let dst = out.join(&name);
        let descr = format!("ddscope lab host {host} ({} {} {}), scenario {}, run {run_id}", h.netns, h.ip, h.mac, sc.name);
        let info = pcapng::InterfaceInfo {
            name: &format!("{host}/{}", h.iface),
            description: &descr,
            received: st.received_by_filter,
            dropped: st.dropped_by_kernel,
        };
        let cs = pcapng::pcap_to_pcapng(pcap, &dst, &info, opts.gzip).with_context(|| format!("capture of {host}"))?;
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
        captures.push(json!({
            "host": host, "file": name, "packets": cs.packets, "bytes": cs.bytes, "read_error": cs.read_error,
            "first_ts_ns": cs.first_ts_ns, "last_ts_ns": cs.last_ts_ns,
            "tcpdump": st, "file_bytes": fs::metadata(&dst).map(|m| m.len()).unwrap_or(0),
        }));
        capture_files.insert(host.clone(), dst);
    }

    // ground truth: one file per host
    let mut records = vec![];
    let mut truth_files = vec![];
    for h in &sc.hosts {
        let parts: Vec<PathBuf> = d.nodes.iter().filter(|n| n.1 == h.name).map(|n| n.3.clone()).collect();
        let file = format!("{}.truth.jsonl", h.name);
        let (recs, problems) = truth::merge(&parts, &out.join(&file))?;
        failures.extend(problems);
        truth_files.push(json!({"host": h.name, "file": file, "records": recs.len()}));
        records.extend(recs);
    }
    let acc = truth::account(sc, &records);
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
    for (host, code) in &d.agent_exits {
        if *code != Some(0) {
            failures.push(format!("agent on {host} exited with {code:?} (logs/agent-{host}.log)"));
        }
    }

    // the wire, per capture; a capture that lost packets (allowed by the scenario) cannot vouch for rates
    let mut wire: BTreeMap<String, Value> = BTreeMap::new();
    let mut wire_skipped = vec![];
    for (host, f) in &capture_files {
        let (_, _, st) = d.captures.iter().find(|c| &c.0 == host).unwrap();
        if st.dropped_by_kernel.unwrap_or(0) + st.dropped_by_interface.unwrap_or(0) > 0 {
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
        let flow = &ws[0].flow;
        let nom = nominal[&t.topic];
        let mut checks = serde_json::Map::new();
        // application side
        let gt_rate_ok = t.rate_hz.map(|r| ((r - nom) / nom).abs() <= tol);
        let sizes_ok = t.writers.iter().all(|w| w.sizes == vec![flow.sample_bytes.0]);
        let seq_ok = t.writers.iter().all(|w| w.seq_contiguous);
        let reliable = flow.reliability == ddscope_traffic::Reliability::Reliable;
        let delivery_ok = t.lost == 0 || !reliable || sc.fidelity.allow_loss;
        checks.insert("truth_rate_within_tolerance".into(), json!(gt_rate_ok));
        checks.insert("truth_sizes_exact".into(), json!(sizes_ok));
        checks.insert("truth_seq_contiguous".into(), json!(seq_ok));
        checks.insert("delivery".into(), json!(delivery_ok));
        if gt_rate_ok == Some(false) {
            fidelity_fail(sc, &mut failures, format!("{}: published at {:.3} Hz, nominal {nom} Hz", t.topic, t.rate_hz.unwrap()));
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
        for (host, v) in &wire {
            let local_writers: Vec<_> = ws.iter().filter(|w| &w.host == host).collect();
            let remote_readers = readers.iter().filter(|r| r.topic == t.topic && &r.host != host).count();
            let incoming = ws.iter().any(|w| &w.host != host) && readers.iter().any(|r| r.topic == t.topic && &r.host == host);
            if local_writers.is_empty() || remote_readers == 0 || incoming {
                continue; // not a sender-side view of this topic
            }
            let wire_nominal: f64 = local_writers.iter().map(|w| w.flow.rate_hz).sum();
            let published: u64 = t.writers.iter().filter(|w| &w.host == host).map(|w| w.published).sum();
            let entry = v["topics"].as_array().and_then(|a| a.iter().find(|e| e["topic_name"] == json!(t.topic)));
            let Some(e) = entry else {
                failures.push(format!("{}: not seen in the capture of {host}", t.topic));
                continue;
            };
            let rate = e["rate_hz"].as_f64();
            let rate_ok = rate.map(|r| ((r - wire_nominal) / wire_nominal).abs() <= tol);
            let size_ok = e["min_sample_size"].as_u64() == Some(flow.sample_bytes.0) && e["max_sample_size"].as_u64() == Some(flow.sample_bytes.0);
            let samples_ok = e["samples"].as_u64() == Some(published);
            let type_ok = e["type_raw"].as_str() == Some(&dds_type_name(&flow.type_name));
            if rate_ok != Some(true) {
                fidelity_fail(sc, &mut failures, format!("{} on {host}: {} Hz on the wire, nominal {wire_nominal} Hz", t.topic, rate.map(|r| format!("{r:.3}")).unwrap_or("no".into())));
            }
            if !size_ok {
                failures.push(format!(
                    "{} on {host}: sample sizes {}..{} on the wire, configured {}",
                    t.topic, e["min_sample_size"], e["max_sample_size"], flow.sample_bytes.0
                ));
            }
            if !samples_ok {
                failures.push(format!("{} on {host}: {} samples on the wire, {published} published", t.topic, e["samples"]));
            }
            if !type_ok {
                failures.push(format!("{} on {host}: type {} on the wire", t.topic, e["type_raw"]));
            }
            wire_checks.push(json!({
                "host": host, "nominal_rate_hz": wire_nominal, "rate_hz": rate, "samples": e["samples"], "published": published,
                "min_sample_size": e["min_sample_size"], "max_sample_size": e["max_sample_size"], "mean_sample_size": e["mean_sample_size"],
                "type_raw": e["type_raw"], "vendors": e["vendors"], "writers": e["writers"], "readers": e["readers"],
                "rtps_frags_per_sample": e["rtps_frags_per_sample"], "ip_frags_per_sample": e["ip_frags_per_sample"],
                "retransmitted_fragments": e["retransmitted_fragments"], "sn_gaps": e["sn_gaps"], "heartbeats": e["heartbeats"],
                "acknacks": e["acknacks"], "nack_frags": e["nack_frags"], "gaps": e["gaps"],
                "rate_ok": rate_ok, "size_ok": size_ok, "samples_ok": samples_ok, "type_ok": type_ok,
            }));
        }
        let on_wire = !wire_checks.is_empty();
        topics.push(json!({
            "topic": t.topic, "type_name": flow.type_name, "type_raw": dds_type_name(&flow.type_name),
            "sample_bytes": flow.sample_bytes.0, "reliability": flow.reliability, "history_depth": flow.history_depth,
            "nominal_rate_hz": nom, "crosses_link": on_wire, "truth": t, "wire": wire_checks, "checks": checks,
        }));
    }

    let mut nodes = vec![];
    for (name, host, vendor, _) in &d.nodes {
        nodes.push(json!({"name": name, "host": host, "vendor": vendor.as_str(), "exit_code": d.node_exits.get(name),
            "log": format!("logs/{name}.log"), "summary": d.node_summaries.get(name)}));
    }
    let mut interference = vec![];
    for (k, it) in sc.interference.iter().enumerate() {
        let client = d.iperf.iter().find(|v| v["index"] == json!(k)).map(|v| v["client"].clone()).unwrap_or(Value::Null);
        let sum = &client["end"]["sum"];
        let achieved = sum["bits_per_second"].as_f64();
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
        interference.push(json!({
            "from": it.from, "to": it.to, "load": it.load.map(|l| l.to_string()), "rate_bps": it.flow.rate.0,
            "payload_bytes": it.flow.payload_bytes.0, "pacing_ns": it.flow.pacing.0, "datagrams_per_burst": it.flow.datagrams_per_burst(),
            "achieved_bps": achieved, "below_target": below_target, "packets": sum["packets"], "lost_packets": sum["lost_packets"], "jitter_ms": sum["jitter_ms"],
            "log": format!("logs/iperf3-{k}-client.json"),
        }));
    }
    let wall = (d.tstop - d.t0) as f64 / 1e9 + sc.linger.as_secs_f64();
    let total_cpu: f64 = d.cpu.values().flatten().sum();
    let cpu_report = json!({
        "processes_s": d.cpu,
        "total_s": total_cpu,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "mean_cores_busy": total_cpu / wall.max(1e-9),
        "note": "user+system CPU of the lab's processes over the run (publication time + linger), excluding the kernel's softirq work for the link",
    });
    let tools = json!({
        "ddscope": env!("CARGO_PKG_VERSION"),
        "cyclonedds": bins.version(Vendor::Cyclone),
        "fastdds": bins.version(Vendor::Fastdds),
        "tcpdump": first_line(&["tcpdump", "--version"]),
        "iperf3": first_line(&["iperf3", "--version"]),
        "iproute2": first_line(&["ip", "-V"]),
        "kernel": fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string()),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).ok(),
    });
    Ok(json!({
        "format": "ddscope-lab-run/1",
        "ok": failures.is_empty(),
        "failures": failures,
        "scenario": sc.name,
        "scenario_file": opts.scenario.display().to_string(),
        "resolved_scenario": "scenario.toml",
        "run_id": run_id,
        "tools": tools,
        "timing": {"t0_ns": d.t0, "tstop_ns": d.tstop, "duration_s": sc.duration.as_secs_f64(), "linger_s": sc.linger.as_secs_f64(),
                   "wall_s": started.elapsed().as_secs_f64()},
        "network": {"mtu": sc.network.mtu, "rate": sc.network.rate.map(|r| r.to_string()),
                    "topology": if hosts.len() == 2 { "point-to-point" } else { "bridge" }, "hosts": hosts},
        "dds": sc.dds,
        "fidelity": sc.fidelity,
        "captures": captures,
        "truth": truth_files,
        "nodes": nodes,
        "topics": topics,
        "interference": interference,
        "agents": d.agent_exits.iter().map(|(h, c)| json!({"host": h, "exit_code": c, "log": format!("logs/agent-{h}.log")})).collect::<Vec<_>>(),
        "cpu": cpu_report,
        "unknown_receptions": acc.unknown_receptions,
        "wire_checks_skipped": wire_skipped,
    }))
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

fn print_summary(report: &Value) {
    println!(
        "{:<56} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>6}",
        "topic", "bytes", "nominal", "truth_hz", "wire_hz", "published", "received", "lost"
    );
    for t in report["topics"].as_array().unwrap() {
        let wire_hz = t["wire"].as_array().and_then(|w| w.first()).and_then(|w| w["rate_hz"].as_f64());
        println!(
            "{:<56} {:>10} {:>10.3} {:>10} {:>10} {:>9} {:>9} {:>6}",
            t["topic"].as_str().unwrap_or(""),
            t["sample_bytes"].to_string(),
            t["nominal_rate_hz"].as_f64().unwrap_or(0.0),
            t["truth"]["rate_hz"].as_f64().map(|r| format!("{r:.3}")).unwrap_or("-".into()),
            wire_hz.map(|r| format!("{r:.3}")).unwrap_or("-".into()),
            t["truth"]["published"].to_string(),
            t["truth"]["received"].to_string(),
            t["truth"]["lost"].to_string(),
        );
    }
    for c in report["captures"].as_array().unwrap() {
        println!(
            "capture {}: {} packets, {} bytes on disk, {} dropped by kernel",
            c["file"].as_str().unwrap_or(""),
            c["packets"],
            c["file_bytes"],
            c["tcpdump"]["dropped_by_kernel"]
        );
    }
    if let Some(c) = report["cpu"]["mean_cores_busy"].as_f64() {
        println!("cpu: lab processes kept {c:.2} of {} cores busy", report["cpu"]["cpus"]);
    }
    println!("{}", if report["ok"] == json!(true) { "run ok" } else { "run FAILED" });
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
