//! `ddscope agent`: per-host capture agent for online monitoring.

use anyhow::Context;
use super::capture_args::CaptureArgs;
use clap::Args;
use ddscope_sysstat::system::SystemSource;
use ddscope_export::{ExportOptions, ExportSpec, Exporters};
use ddscope_monitor::agent::{self, AgentConfig};
use ddscope_monitor::agent::upstream::Upstream;
use ddscope_core::source::{open_interface, SourceSpec};
use ddscope_monitor::agent::capture::{Libpcap, LiveCapture};
use ddscope_monitor::agent::replay::{FileReplay, Speed};
use ddscope_monitor::agent::AgentCapture;
use ddscope_monitor::agent::clocksync::{ClockProbeConfig, ClockSyncFollower};
use ddscope_monitor::agent::privileges::{drop_privileges, restrict_syscalls};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  sudo ddscope agent -i eth0 --name pc1 --export prometheus=127.0.0.1:9464
  sudo ddscope agent -i eth0 --name pc1 --export influx=http://127.0.0.1:8086/ddscope \\
      --export otlp=http://127.0.0.1:4318
  sudo ddscope agent -i eth0 --name pc1 --send-to http://central:8080 --token $TOKEN

The agent decodes every RTPS submessage on IFACE and
  - exports per-topic metrics, capture health and system metrics (node_exporter
    names) for Prometheus, per-submessage events and per-sample records as
    InfluxDB line protocol and OTLP (see docs/export.md);
  - with --send-to, streams its sample records, DATA_FRAG sightings, topic
    table, system metrics and counters to `ddscope serve`, which correlates
    the agents (docs/online.md);
  - with --trace-live, follows the host's live ros2_tracing session (LTTng,
    through lttng-relayd) and streams its publishes, takes and callbacks
    too, so serve shows the ROS 2 layers and chains:
      sudo ddscope agent -i eth0 --name pc1 --send-to http://central:8080 \\
           --trace-live net://localhost/host/$(hostname)/ros2
Capture never waits for an exporter or the server: queues are bounded, drops
are counted, connections are retried with backoff. Ctrl-C flushes.")]
pub struct AgentArgs {
    #[command(flatten)]
    pub capture: CaptureArgs,
    /// Replay a capture file instead of capturing (pcap/pcapng, optionally .gz): its frames are
    /// handed over when their time comes (--speed), with their own time stamps, as a live
    /// capture's would be — a recorded run on serve's dashboard
    #[arg(long, value_name = "FILE", conflicts_with_all = ["interface", "filter", "kernel_filter", "kernel_records"])]
    pub read: Option<std::path::PathBuf>,
    /// With --read: how fast, as a multiple of the pace the frames were captured at (1: as
    /// captured), or max (as fast as they are read)
    #[arg(long, value_name = "N|max", default_value = "1", value_parser = replay_speed, requires = "read")]
    pub speed: Speed,
    /// Do not ask the host's time daemons (chrony, ptp4l) what they say of its clock (by default
    /// they are asked every 10 s, and serve sets that beside what the traffic says)
    #[arg(long)]
    pub no_clock_sync: bool,
    /// chronyd's command socket (chronyc -h), when not chrony's default
    #[arg(long, value_name = "PATH")]
    pub chronyc_socket: Option<std::path::PathBuf>,
    /// ptp4l's management socket (pmc -s), when not /var/run/ptp4l
    #[arg(long, value_name = "PATH")]
    pub ptp_uds: Option<std::path::PathBuf>,
    /// The PTP domain ptp4l runs in (pmc -d)
    #[arg(long, value_name = "N")]
    pub ptp_domain: Option<u8>,
    /// Capture-point name (host name in the central view and in exports)
    #[arg(long)]
    pub name: String,
    /// Exporter: prometheus=ADDR, influx=URL, otlp=URL (repeatable)
    #[arg(long = "export", value_name = "KIND=WHERE", value_parser = export_spec)]
    pub exports: Vec<ExportSpec>,
    /// URL of the central `ddscope serve`
    #[arg(long)]
    pub send_to: Option<String>,
    // The same --window as the `serve` this agent feeds (docs/online.md): a sample still incomplete after 2/5 of it is sent as incomplete
    #[command(flatten)]
    pub window: crate::args::WindowArg,
    /// Scale-out: send the correlation feed as OTLP/HTTP to an OpenTelemetry Collector (its base URL,
    /// e.g. http://collector:4318) that routes it to `serve` shards (docs/scale-out.md); with --send-to too, both get it
    #[arg(long, value_name = "URL", conflicts_with = "trace_live")]
    pub send_otlp: Option<String>,
    /// Token for the central server and for /metrics on a non-loopback address (also from $DDSCOPE_TOKEN)
    #[arg(long, env = "DDSCOPE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Read system metrics from this node_exporter URL instead of /proc
    #[arg(long)]
    pub node_exporter: Option<String>,
    /// Also sample the load of processes of this name (comm or argv[0] file name; repeatable):
    /// CPU user/system, RSS and context switches every 200 ms, exported with a process label
    #[arg(long = "process", value_name = "NAME")]
    pub processes: Vec<String>,
    /// Only topics of this DDS domain (the writer's, else the destination port's; see
    /// docs/events.md) in the view, the exporters and the central stream; what is left
    /// out is counted on the closing line
    #[arg(long, value_parser = crate::args::domain)]
    pub domain: Option<u32>,
    /// Most processes sampled for --process (more matches are counted, not sampled)
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_processes: u64,
    /// Correlation items kept while the server is unreachable
    #[arg(long, default_value_t = 200_000)]
    pub max_queued_items: usize,
    /// Take every packet as it arrives (libpcap immediate mode) instead of in
    /// blocks retired every 100 ms: one wakeup per packet, more load on the host
    #[arg(long)]
    pub immediate: bool,
    /// CPU scheduling of the agent's threads: normal, batch (SCHED_BATCH) or
    /// idle (SCHED_IDLE: runs only when the workload leaves a core free; the
    /// capture ring absorbs the wait, overflow shows as kernel drops)
    #[arg(long, value_enum, default_value = "normal")]
    pub sched: Sched,
    #[command(flatten)]
    pub limits: super::limit_args::LimitArgs,
    /// Follow the host's live ros2_tracing session through lttng-relayd
    /// (net://localhost/host/HOSTNAME/SESSION, made with `lttng create SESSION --live`)
    /// and send its publishes, takes and callbacks to `serve` with the samples
    #[arg(long, value_name = "URL", requires = "send_to")]
    pub trace_live: Option<String>,
    /// Trace items (publishes, takes) queued between the trace reader and the sender; more are dropped and counted
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub trace_queue: u64,
    /// While the live session is idle, the trace is taken as complete up to now minus this
    /// (more than the session's live timer plus the relay's delay)
    #[arg(long, default_value = "3s", value_parser = crate::args::positive_duration)]
    pub trace_lag: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Sched {
    Normal,
    Batch,
    Idle,
}

/// Where the agent's frames come from.
enum Source {
    Live(LiveCapture),
    File(FileReplay),
}

fn replay_speed(s: &str) -> Result<Speed, String> {
    if s == "max" {
        return Ok(Speed::Max);
    }
    let v: f64 = s.trim_end_matches('x').parse().map_err(|_| format!("{s:?}: a speed is a number (1 = as captured, 2 = twice as fast) or max"))?;
    if !(v.is_finite() && (0.01..=1000.0).contains(&v)) {
        return Err(format!("{s:?}: between 0.01 and 1000 (or max)"));
    }
    Ok(Speed::Times(v))
}

fn export_spec(s: &str) -> Result<ExportSpec, String> {
    s.parse::<ExportSpec>().map_err(|e| e.to_string())
}

pub fn run(a: AgentArgs) -> anyhow::Result<i32> {
    // Before any thread is spawned, so every thread of the agent inherits them.
    ddscope_monitor::agent::privileges::clear_bounding_set()?;
    set_scheduling(a.sched)?;
    let limits = a.limits.resolve()?;
    let specs: Vec<ExportSpec> = a.exports.clone();
    let duration = a.capture.duration;
    let source = match &a.read {
        Some(f) => {
            let r = FileReplay::open(f, a.speed).map_err(crate::common::input_error)?;
            eprintln!("agent {}: replaying {}", a.name, r.timestamp_note());
            Source::File(r)
        }
        None => {
            let iface = a.capture.interface()?.to_string();
            let cap = open_interface(a.capture.spec(a.immediate), &Libpcap)?;
            eprintln!("agent {}: capturing on {iface} ({})", a.name, cap.timestamp_note);
            Source::Live(cap)
        }
    };
    let exporters = if specs.is_empty() {
        None
    } else {
        // The token guards /metrics where it listens beyond loopback (docs/export.md "Tokens"): a
        // Prometheus on the agent's own host scrapes a loopback /metrics without it.
        let beyond_loopback = specs.iter().any(|s| match s {
            ExportSpec::Prometheus(addr) => !addr.parse::<std::net::SocketAddr>().is_ok_and(|a| a.ip().is_loopback()),
            _ => false,
        });
        let metrics_token = if beyond_loopback { a.token.clone() } else { None };
        let mut opts = ExportOptions { metrics_token, ..ExportOptions::default() };
        if let Some(url) = &a.node_exporter {
            opts.system = Some(SystemSource::node_exporter(url));
        } else if !a.processes.is_empty() {
            opts.system = Some(SystemSource::proc_with_processes(&a.processes, a.max_processes as usize));
            opts.system_interval = Duration::from_millis(200);
        }
        let ex = Exporters::start(&a.name, &specs, opts).context("starting exporters")?;
        if let Some(addr) = ex.metrics_addr() {
            eprintln!("agent {}: Prometheus metrics on http://{addr}/metrics", a.name);
        }
        Some(ex)
    };
    if a.node_exporter.is_some() && !a.processes.is_empty() {
        return Err(crate::common::usage("--process samples /proc itself; it cannot be combined with --node-exporter"));
    }
    let system = match &a.node_exporter {
        Some(u) => SystemSource::node_exporter(u),
        None if !a.processes.is_empty() => SystemSource::proc_with_processes(&a.processes, a.max_processes as usize),
        None => SystemSource::proc(),
    };
    // The live trace reader connects (and babeltrace2 loads its plugins) before the system calls are restricted.
    let trace = match &a.trace_live {
        Some(url) => {
            if !matches!(SourceSpec::trace(url), SourceSpec::TraceLive(_)) {
                return Err(crate::common::usage(format!("--trace-live {url}: give the live session's URL, net://RELAYD/host/HOSTNAME/SESSION")));
            }
            let cfg = ddscope_monitor::agent::trace::TraceFollowConfig { url: url.clone(), max_queued: a.trace_queue as usize, lag_ns: a.trace_lag.as_nanos() as i64,
                assemble: limits.assembler(ddscope_core::ros2::AssembleConfig::default().max_open_ns),
            };
            let f = ddscope_monitor::agent::trace::TraceFollower::start(cfg).map_err(|e| crate::common::input(format!("--trace-live: {e}")))?;
            eprintln!("agent {}: following the live trace session {url}", a.name);
            Some(f)
        }
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let s = stop.clone();
        ctrlc::set_handler(move || s.store(true, Ordering::Relaxed)).context("installing the Ctrl-C handler")?;
    }
    // The time daemons' clients run in a child started before privileges are dropped (their
    // sockets are root's) and system calls restricted (no execve after that).
    let clock_sync = if a.no_clock_sync {
        None
    } else {
        let cfg = ClockProbeConfig { every: Duration::from_secs(10), chronyc_socket: a.chronyc_socket.clone(), ptp_uds: a.ptp_uds.clone(), ptp_domain: a.ptp_domain };
        match std::env::current_exe().and_then(|exe| ClockSyncFollower::start(&exe, &cfg)) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("agent {}: the time daemons cannot be asked ({e}): no clock claims", a.name);
                None
            }
        }
    };
    // After the exporters bound their ports (a port below 1024 needs root) and every thread exists.
    if let Some(n) = drop_privileges()? {
        eprintln!("agent {}: {n}", a.name);
    }
    eprintln!("agent {}: {}", a.name, restrict_syscalls()?);
    let cfg = AgentConfig {
        name: a.name.clone(),
        upstream: a.send_to.clone().map(|url| Upstream { url, token: a.token.clone(), max_queued_items: a.max_queued_items, otlp: false }),
        upstream_otlp: a.send_otlp.clone().map(|url| Upstream { url, token: None, max_queued_items: a.max_queued_items, otlp: true }),
        system,
        duration,
        limits,
        trace,
        domain: a.domain,
        window: a.window.window,
        clock_sync,
    };
    let name = a.name.clone();
    let (report, exporters) = match source {
        Source::Live(cap) => agent::run(cfg, cap, exporters, stop, &mut |n| eprintln!("agent {name}: {n}"))?,
        Source::File(r) => agent::run(cfg, r, exporters, stop, &mut |n| eprintln!("agent {name}: {n}"))?,
    };
    if let Some(ex) = exporters {
        for (sink, s) in ex.shutdown(Duration::from_secs(5)) {
            eprintln!(
                "agent {}: {sink}: {} records accepted, {} delivered, {} dropped (queue full), {} rejected, {} dropped at shutdown{}",
                a.name,
                s.accepted,
                s.delivered,
                s.dropped_queue_full,
                s.rejected,
                s.dropped_at_shutdown,
                s.last_error.as_deref().map(|e| format!("; last error: {e}")).unwrap_or_default()
            );
        }
    }
    eprintln!(
        "agent {}: {} frames; kernel: received {}, dropped {}, if_dropped {}; {}",
        a.name, report.frames, report.counters.received, report.counters.dropped, report.counters.if_dropped, report.decode_summary
    );
    if let Some(f) = &report.counters.filter {
        eprintln!("agent {}: {}", a.name, ddscope_monitor::agent::kfilter::closing_line(f));
    }
    if !report.evicted.is_empty() {
        eprintln!("agent {}: evicted (caps): {}", a.name, report.evicted);
    }
    if let Some(d) = a.domain {
        let (events, samples) = report.domain_left_out;
        eprintln!("agent {}: --domain {d}: left out {events} submessages and {samples} samples of other or unknown domains", a.name);
    }
    if let Some(t) = &report.trace {
        eprintln!(
            "agent {}: trace {}: {} events ({} ros2, {} lost by LTTng); {} publishes and takes sent, {} dropped (queue full), {} late, {} reconnects{}",
            a.name,
            t.url,
            t.events,
            t.ros2_events,
            t.discarded_events,
            t.items,
            t.dropped_queue_full,
            t.late,
            t.reconnects,
            t.last_error.as_deref().map(|e| format!("; last error: {e}")).unwrap_or_default()
        );
        if let Some(p) = t.assemble.problem_line() {
            eprintln!("agent {}: trace: {p}", a.name);
        }
    }
    if a.send_to.is_some() || a.send_otlp.is_some() {
        eprintln!(
            "agent {}: sent {} items to the server, dropped {}, {} failed sends, {} batches refused by the server",
            a.name, report.items_sent, report.items_dropped, report.send_failures, report.batches_refused
        );
    }
    let (stopped, more) = &report.stopped_threads;
    if !stopped.is_empty() {
        let list: Vec<String> = stopped.iter().map(|s| format!("{} ({})", s.thread, s.why)).collect();
        let more = if *more > 0 { format!(" and {more} more") } else { String::new() };
        eprintln!("agent {}: stopped because a thread ended: {}{more}", a.name, list.join(", "));
        return Ok(crate::common::exit::FAILURE);
    }
    Ok(0)
}

/// Linux scheduling policy for this thread (inherited by threads spawned later).
fn set_scheduling(policy: Sched) -> anyhow::Result<()> {
    let p = match policy {
        Sched::Normal => return Ok(()),
        Sched::Batch => libc::SCHED_BATCH,
        Sched::Idle => libc::SCHED_IDLE,
    };
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: plain syscall on the calling thread with a valid parameter block.
    if unsafe { libc::sched_setscheduler(0, p, &param) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("--sched {policy:?}: sched_setscheduler"));
    }
    Ok(())
}
