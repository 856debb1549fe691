//! `ddscope lab …`: emulated multi-host lab with real DDS workloads.

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use ddscope_traffic::{Nanos, Percent};
use std::path::PathBuf;

use ddscope_lab::net::{self, Lab};
use ddscope_lab::run::{self, RunOptions};
use ddscope_lab::scenario::{self, Tracing, Vendor};
use ddscope_lab::workload::{self, NodeBins};

#[derive(Args, Debug)]
#[command(
    about = "Emulated multi-host lab with real DDS workloads",
    long_about = "Creates the scenario's hosts as network namespaces joined by veth (a bridge for more than two), runs \
real Cyclone DDS / Fast DDS workload nodes that look like ROS 2 on the wire, adds iperf3 interference, captures every \
host's interface with nanosecond timestamps and records application ground truth; with tracing, the nodes emit \
ros2_tracing's tracepoints and every host records an LTTng trace. Needs root. Scenario format and output files: \
docs/lab.md.",
    after_help = "Examples:\n  \
sudo ddscope lab run examples/lab/simple-robotic.toml --duration 5s --out /tmp/simple\n  \
sudo ddscope lab run examples/lab/simple-robotic.toml --vendor filter=fastdds \\\n      --vendor sensor=fastdds\n  \
sudo ddscope lab run examples/lab/simple-robotic.toml --tracing jazzy --duration 5s \\\n      --out /tmp/traced\n  \
ddscope lab check examples/lab/autoware-sensing.toml\n  \
sudo ddscope lab up examples/lab/simple-robotic.toml\n  \
sudo ddscope lab down --all"
)]
pub struct LabArgs {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run a scenario end to end: hosts, workload, interference, captures, ground truth, run.json
    #[command(after_help = "Examples:\n  \
sudo ddscope lab run examples/lab/simple-robotic.toml\n  \
sudo ddscope lab run examples/lab/simple-robotic.toml --load 40% --duration 10s --out /tmp/run40\n  \
sudo ddscope lab run examples/lab/simple-robotic.toml --tracing humble --out /tmp/traced\n  \
sudo ddscope lab run examples/lab/param-topologies.toml --gzip")]
    Run(RunArgs),
    /// Run a sweep: a grid of scenario variants, each repeated, into one directory with one comparison report; resumable
    #[command(after_help = "Examples:\n  \
sudo ddscope lab sweep examples/lab/vendors-sizes-sweep.toml --out /tmp/vs   # again: resumes\n  \
ddscope lab sweep examples/lab/vendors-sizes-sweep.toml --list\n  \
ddscope lab sweep examples/lab/vendors-sizes-sweep.toml --out /tmp/vs --report-only\n\n\
Writes DIR/sweep.json (cells, parameters, status of every run), DIR/runs/CELL-rN/ (one `lab run` each),\n\
DIR/report.html, DIR/sweep-table.csv (per cell: median of the repeats, spread), DIR/sweep-runs.csv and\n\
DIR/sweep-table.json. Sweep file format: docs/lab.md.")]
    Sweep(SweepArgs),
    /// Check a scenario (types, sizes, topology) without running it; no root needed
    Check(CheckArgs),
    /// Create a scenario's hosts and leave them up for manual use
    Up(UpArgs),
    /// Remove hosts left by `lab up` (or by a run that was killed)
    Down(DownArgs),
    /// List the ROS 2 message types the workload nodes can publish
    Types,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Scenario TOML file
    scenario: PathBuf,
    /// Publication time (overrides the scenario's duration), e.g. 10s, 500ms
    #[arg(long)]
    duration: Option<Nanos>,
    /// Output directory (default: lab-out/<scenario>-<UTC time>)
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run NODE on another DDS implementation: NODE=fastdds or NODE=cyclone (repeatable)
    #[arg(long = "vendor", value_name = "NODE=VENDOR")]
    vendors: Vec<String>,
    /// Offered load of every interference flow as a share of the link rate (thesis Table 4.3: 0%, 40%, 95%)
    #[arg(long)]
    load: Option<Percent>,
    /// ros2_tracing tracepoints in every node, in that ROS 2 distro's layout, and one LTTng
    /// session per host (HOST.lttng); overrides the scenario's `tracing`
    #[arg(long, value_name = "off|humble|jazzy")]
    tracing: Option<Tracing>,
    /// Write the captures gzip-compressed (HOST.pcapng.gz)
    #[arg(long)]
    gzip: bool,
    /// Reuse an output directory that already holds a run
    #[arg(long)]
    force: bool,
    /// Only the summary and errors
    #[arg(long, short)]
    quiet: bool,
    /// Also run `ddscope agent -i eth0 --name HOST ARGS` on every host, from before the workload
    /// starts until it ends ({host}, {ip}, {mgmt_ip}, {gateway} are replaced per host; {trace_live} by the host's live trace session, which makes the traced hosts' sessions live); with the Zenoh router's links captured, also on each of them (--name router-HOST); implies --management
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    agent: Option<String>,
    /// Link every host to the root namespace (mgmt0, a /30 per host) for monitoring traffic
    #[arg(long)]
    management: bool,
}

#[derive(Args, Debug)]
struct SweepArgs {
    /// Sweep TOML file (base scenario, matrix of scenario keys, repeats, duration)
    sweep: PathBuf,
    /// Sweep directory (default: lab-out/sweep-<name>); the same directory again resumes the sweep
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the cells and exit (no root needed)
    #[arg(long)]
    list: bool,
    /// Only (re)write the report from the runs the directory holds (no root needed)
    #[arg(long)]
    report_only: bool,
    /// Write the captures gzip-compressed
    #[arg(long)]
    gzip: bool,
    /// Only the summary and errors
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args, Debug)]
struct CheckArgs {
    scenario: PathBuf,
    #[arg(long = "vendor", value_name = "NODE=VENDOR")]
    vendors: Vec<String>,
    /// Print the resolved scenario (TOML)
    #[arg(long)]
    resolved: bool,
}

#[derive(Args, Debug)]
struct UpArgs {
    scenario: PathBuf,
}

#[derive(Args, Debug)]
struct DownArgs {
    /// Run ids printed by `lab up` (the part after "ddsl-")
    ids: Vec<String>,
    /// Every lab namespace whose creating process is gone (never a run in progress)
    #[arg(long)]
    all: bool,
}

fn parse_vendors(v: &[String]) -> Result<Vec<(String, Vendor)>> {
    v.iter()
        .map(|s| {
            let (n, vendor) = s.split_once('=').ok_or_else(|| crate::common::usage(format!("--vendor {s}: write NODE=VENDOR")))?;
            Ok((n.to_string(), vendor.parse().map_err(|e| crate::common::usage(format!("--vendor {s}: {e}")))?))
        })
        .collect()
}

/// `lab run`'s errors with their exit codes: a scenario that cannot be used (2), checks that failed (1).
fn lab_error(r: Result<i32>) -> Result<i32> {
    r.map_err(|e| match e.downcast_ref::<run::RunError>() {
        Some(run::RunError::Scenario(m)) => crate::common::input(m),
        Some(run::RunError::Checks(m)) => crate::common::verdict(m),
        None => e,
    })
}

pub fn run(args: LabArgs) -> Result<i32> {
    match args.cmd {
        Cmd::Run(a) => lab_error(run::run(&RunOptions {
            overrides: scenario::Overrides { duration: a.duration, vendors: parse_vendors(&a.vendors)?, load: a.load, tracing: a.tracing },
            scenario: a.scenario,
            out: a.out,
            gzip: a.gzip,
            force: a.force,
            quiet: a.quiet,
            agent_args: a.agent.map(|s| s.split_whitespace().map(str::to_string).collect()),
            management: a.management,
        })),
        Cmd::Sweep(a) => sweep(a),
        Cmd::Check(a) => check(a),
        Cmd::Up(a) => up(a),
        Cmd::Down(a) => down(a),
        Cmd::Types => {
            let bins = NodeBins::find()?;
            let out = std::process::Command::new(bins.path(Vendor::Cyclone)?).arg("--list-types").output()?;
            println!("{:<58} {:<10} knobs (size at n = 0 and the default m)", "type", "bytes");
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let f: Vec<&str> = line.split('\t').collect();
                if f.len() == 4 {
                    println!("{:<58} {:<10} {}", f[0], f[2].trim_start_matches("min ").trim_end_matches(" bytes"), f[3]);
                }
            }
            Ok(0)
        }
    }
}

fn sweep(a: SweepArgs) -> Result<i32> {
    use super::lab_sweep;
    use ddscope_lab::sweep::{self, Status, SweepOptions};
    let sw = sweep::load(&a.sweep).map_err(|e| crate::common::input(format!("{e:#}")))?;
    lab_sweep::check_plots(&sw).map_err(|e| crate::common::input(format!("{e:#}")))?;
    let out = a.out.clone().unwrap_or_else(|| lab_sweep::default_out(&sw));
    if a.list {
        println!("{}: {} cells x {} repeats ({} excluded), base {}", sw.name, sw.cells.len(), sw.repeats, sw.excluded, sw.scenario_file.display());
        for c in &sw.cells {
            println!("{}  {}", c.id, c.label());
        }
        return Ok(0);
    }
    if !a.report_only {
        if !net::is_root() {
            bail!("ddscope lab sweep needs root to create network namespaces (run it with sudo)");
        }
        let m = sweep::run(&sw, &mut SweepOptions { out: out.clone(), gzip: a.gzip, quiet: a.quiet, on_progress: None })?;
        eprintln!(
            "sweep: {} runs: {} done, {} failed checks (complete, reported), {} errors",
            m.cells.len() * m.repeats as usize,
            m.count(Status::Done),
            m.count(Status::Failed),
            m.count(Status::Error)
        );
    }
    if a.report_only {
        sweep::refresh_manifest(&sw, &out)?;
    }
    let r = lab_sweep::write_report(&out, a.quiet)?;
    for e in &r.analysis_errors {
        eprintln!("sweep: cannot analyse {e}");
    }
    println!("sweep: {} ({} of {} runs analysed, {} table rows)", out.join("report.html").display(), r.analysed, r.runs, r.rows);
    let m = sweep::Manifest::read(&out)?;
    Ok(if m.count(Status::Error) > 0 || !r.analysis_errors.is_empty() { 1 } else { 0 })
}

fn check(a: CheckArgs) -> Result<i32> {
    let vendors = parse_vendors(&a.vendors)?;
    let sc = scenario::load(&a.scenario)
        .and_then(|s| s.resolve(None, &vendors).map_err(|e| anyhow!("{}: {e}", a.scenario.display())))
        .map_err(|e| crate::common::input(format!("{e:#}")))?;
    let bins = NodeBins::find()?;
    workload::check_nodes(&sc, &bins).map_err(|e| crate::common::input(format!("{}: {e}", a.scenario.display())))?;
    if a.resolved {
        print!("{}", sc.to_toml()?);
        return Ok(0);
    }
    println!("{}: {} hosts, {} nodes, duration {}", sc.name, sc.hosts.len(), sc.nodes.len(), sc.duration);
    let rates = sc.nominal_rates()?;
    let mut total = 0.0;
    println!("{:<60} {:>10} {:>10} {:>14}  writers -> readers", "topic", "bytes", "rate_hz", "payload bit/s");
    // Writers and readers grouped by topic once (linear in the endpoints).
    let mut by_topic: std::collections::BTreeMap<&str, (Vec<&scenario::Writer>, Vec<String>)> = Default::default();
    let writers = sc.writers();
    let readers = sc.readers();
    for w in &writers {
        by_topic.entry(w.flow.topic.as_str()).or_default().0.push(w);
    }
    for r in &readers {
        by_topic.entry(r.topic.as_str()).or_default().1.push(format!("{}@{}", r.node, r.host));
    }
    for (topic, rate) in &rates {
        let Some((ws, rs)) = by_topic.get(topic.as_str()) else { continue };
        let Some(w) = ws.first() else { continue };
        let bps = w.flow.sample_bytes.0 as f64 * 8.0 * rate;
        total += bps;
        let ws: Vec<String> = ws.iter().map(|x| format!("{}@{}", x.node, x.host)).collect();
        println!("{topic:<60} {:>10} {rate:>10} {bps:>14.0}  {} -> {}", w.flow.sample_bytes.0, ws.join(","), rs.join(","));
    }
    println!("total payload {:.1} Mbit/s", total / 1e6);
    for it in &sc.interference {
        println!("interference {} -> {}: {} in {}-byte datagrams every {}", it.from, it.to, it.flow.rate, it.flow.payload_bytes, it.flow.pacing);
    }
    for (host, distros) in sc.traced_hosts() {
        let traced: Vec<&str> = sc.nodes.iter().filter(|n| n.host == host && !sc.tracing_of(n).is_off()).map(|n| n.name.as_str()).collect();
        println!(
            "tracing {host}: {} ({}) -> {host}.lttng",
            distros.iter().map(|d| d.as_str()).collect::<Vec<_>>().join(", "),
            traced.join(", ")
        );
    }
    println!("ok");
    Ok(0)
}

fn up(a: UpArgs) -> Result<i32> {
    let sc = scenario::load(&a.scenario)
        .and_then(|s| s.resolve(None, &[]).map_err(|e| anyhow!("{}: {e}", a.scenario.display())))
        .map_err(|e| crate::common::input(format!("{e:#}")))?;
    if !net::is_root() {
        bail!("ddscope lab up needs root to create network namespaces (run it with sudo)");
    }
    let id = net::new_run_id();
    let lab = Lab::up(&sc, &id)?;
    println!("lab {id} is up ({} hosts); remove it with: ddscope lab down {id}", lab.hosts.len());
    for h in &lab.hosts {
        println!("  {:<12} {:<28} {} {}/{} {}", h.name, h.netns, h.iface, h.ip, lab.prefix_len, h.mac);
    }
    println!("run a shell on a host:   ip netns exec {} bash", lab.hosts[0].netns);
    println!("DDS configuration used by the lab's nodes:");
    println!("  export CYCLONEDDS_URI='{}'", workload::cyclone_config(&sc, net::HOST_IF));
    let _ = lab.keep();
    Ok(0)
}

fn down(a: DownArgs) -> Result<i32> {
    if !net::is_root() {
        bail!("ddscope lab down needs root to delete network namespaces (run it with sudo)");
    }
    if a.ids.is_empty() && !a.all {
        return Err(crate::common::usage("give the ids printed by `lab up`, or --all"));
    }
    let mut removed = 0;
    for (ns, _pid, alive) in net::list_lab_namespaces()? {
        let id_match = a.ids.iter().any(|id| ns.starts_with(&format!("{}{id}-", net::NS_PREFIX)));
        if id_match || (a.all && !alive) {
            net::delete_netns(&ns)?;
            println!("removed {ns}");
            removed += 1;
        } else if a.all && alive {
            println!("kept {ns} (its run is still in progress)");
        }
    }
    if removed == 0 && !a.ids.is_empty() {
        return Err(crate::common::usage(format!("no lab namespaces match {}", a.ids.join(", "))));
    }
    Ok(0)
}
