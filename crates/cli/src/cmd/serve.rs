//! `ddscope serve`: the central view over all agents.

use clap::Args;
use crate::args;
use anyhow::Context as _;
use ddscope_monitor::server::{HttpLimits, ServeConfig, Server, StateCaps};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use ddscope_traffic::units::Bytes;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  ddscope serve                                   # http://127.0.0.1:8080
  ddscope serve --listen 0.0.0.0:8080 --token $TOKEN
  ddscope serve --listen 0.0.0.0:8080 --token $TOKEN --budget /image=20ms \\
      --export influx=http://127.0.0.1:8086/ddscope --export otlp=http://127.0.0.1:4318 \\
      --trace-sample every=10,late,lost
Agents send with `ddscope agent … --send-to http://HOST:8080 [--token …]`.
The dashboard (http://HOST:8080/, add ?token=… when a token is set) shows
per-topic DDS message and submessage latency over time, payload sizes, loss,
repairs, CPU and bandwidth per interface; /api/state has the same as JSON
(the flows with the most samples, --max-state-flows of them, and the totals).
Everything is built into the binary; nothing is loaded from the internet.
What serve correlates is exported (docs/export.md, What serve exports):
/metrics on --listen (with --token only with the token) has the latency
histograms per topic, sender, receiver and layer (the ROS 2 layers with live
traces, chains with --path), delivered/lost/late counters, clock offsets and
serve's own counters; --export influx=… writes one ddscope_latency point per
judged sample, --export otlp=… one trace per sample (--trace-sample). Ctrl-C
or SIGTERM flushes the push sinks and reports what they dropped.

Slow or hostile clients cannot freeze the server: headers must arrive within
--header-timeout, bodies within --body-timeout, at most --max-connections are
served at once, each agent may send --agent-rate batches per second, and a
batch is refused (wrong token, bad agent name, over the rate, too large)
before its body is read. Every body counts against a shared receive budget
while it arrives (--receive-budget) and, estimated from its bytes before it is
decoded, against a decode budget (--decode-budget); an OTLP request with more
than --otlp-max-spans spans or --otlp-max-attributes attributes is refused
before it is decoded. /api/state → server has the counters; docs/robustness.md
lists every cap.")]
pub struct ServeArgs {
    /// Address to listen on (only loopback without --token)
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Token agents and browsers must present (Authorization: Bearer …, or ?token=…)
    #[arg(long, env = "DDSCOPE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    #[command(flatten)]
    pub window: args::WindowArg,
    /// An agent silent this long no longer holds back judgement; 1s to 1h
    #[arg(long, default_value = "10s", value_parser = args::duration_between(Duration::from_secs(1), Duration::from_secs(3600)))]
    pub idle: Duration,
    /// The live incident feed ("why was it late", /api/incidents, ddscope_incidents_total): sample time judged
    /// together, as `latency --explain` judges a run (medians, budgets, verdicts); 1s to 1h. A window is judged
    /// once rows past it by --window and a second arrived, or when no row came for --idle
    #[arg(long, default_value = "10s", value_parser = args::duration_between(Duration::from_secs(1), Duration::from_secs(3600)))]
    pub explain_window: Duration,
    /// Connections served at once (more are answered 503 and closed)
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// Largest batch an agent may send (e.g. 16MiB)
    #[arg(long, default_value = "16MiB", value_parser = size_between(64 << 10, 1 << 30))]
    pub max_body: u64,
    /// Bytes of request bodies being received at once (agents' batches, OTLP over HTTP and gRPC); a request
    /// that finds no room within 2 s is answered busy (503, gRPC UNAVAILABLE)
    #[arg(long, default_value = "256MiB", value_parser = size_between(1 << 20, 64 << 30))]
    pub receive_budget: u64,
    /// Memory that requests being decoded may hold at once (inflated bodies and what they decode to, estimated
    /// from the body before decoding); a request estimated over it is refused (413, RESOURCE_EXHAUSTED)
    #[arg(long, default_value = "128MiB", value_parser = size_between(1 << 20, 64 << 30))]
    pub decode_budget: u64,
    /// Spans (or log records) in one OTLP request; more are refused before decoding
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..=100_000_000))]
    pub otlp_max_spans: u32,
    /// Attributes (and attribute array or list entries) in one OTLP request; more are refused before decoding
    #[arg(long, default_value_t = 2_000_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000_000))]
    pub otlp_max_attributes: u32,
    /// Batches per second one agent may send (bursts of ten seconds' worth are allowed)
    #[arg(long, default_value_t = 20.0, value_parser = rate_between(0.1, 100_000.0))]
    pub agent_rate: f64,
    /// Time for a request's headers to arrive; 100ms to 10m
    #[arg(long, default_value = "10s", value_parser = args::duration_between(Duration::from_millis(100), Duration::from_secs(600)))]
    pub header_timeout: Duration,
    /// Time for a request's body to arrive; 100ms to 10m
    #[arg(long, default_value = "30s", value_parser = args::duration_between(Duration::from_millis(100), Duration::from_secs(600)))]
    pub body_timeout: Duration,
    /// Latency series (topic, sender, receiver) kept; the least recently updated is evicted first
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_series: u32,
    /// Flows one /api/state answer carries (those with the most samples)
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_state_flows: u32,
    #[command(flatten)]
    pub caps: super::limit_args::LimitArgs,
    /// End-to-end chain to measure from the agents' ros2_tracing items (agent --trace-live): topics in order
    /// (/raw_image,/image,/actuator); the chains found are listed in /api/state either way
    #[arg(long, value_name = "TOPICS", value_parser = crate::args::path)]
    pub path: Option<crate::args::PathArg>,
    #[command(flatten)]
    pub scale: ScaleOutArgs,
    #[command(flatten)]
    pub export: ServeExportArgs,
}

/// What `serve` correlates, exported (docs/export.md, "What serve exports").
#[derive(Args, Debug)]
pub struct ServeExportArgs {
    /// Export what serve correlates: prometheus=ADDR (a second /metrics besides the one on --listen),
    /// influx=http://HOST:PORT[/DB], otlp=http://HOST:PORT (one trace per sample); repeatable
    #[arg(long = "export", value_name = "KIND=WHERE", value_parser = export_spec)]
    pub exports: Vec<ddscope_export::ExportSpec>,
    /// Latency budget of a topic's layer (TOPIC[:LAYER]=DURATION, layer message by default, * for every
    /// topic): ddscope_latency_budget_seconds, ddscope_latency_over_budget_total and --trace-sample over-budget;
    /// a budget of layer message, application or ros_e2e also makes the incident feed's over-budget incidents of the
    /// flows whose end to end is that layer (wire only, ground truth, traced); repeatable
    #[arg(long = "budget", value_name = "TOPIC[:LAYER]=DURATION", value_parser = budget)]
    pub budgets: Vec<ddscope_export::Budget>,
    /// Which samples get a trace with --export otlp=…: all, none, or a comma-separated union of every=N
    /// (every N-th sequence number), late, lost, over-budget; what is left out is counted
    /// (ddscope_trace_export_total)
    #[arg(long, default_value = "all", value_name = "WHICH", value_parser = trace_sampling)]
    pub trace_sample: ddscope_export::traces::TraceSampling,
    /// Latency label sets (topic, sender, receiver) and chain hops exported; more are refused and counted
    /// (ddscope_export_dropped_series_total{kind="latency"|"chain"})
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_export_series: u32,
    /// Clock offset t_o of an agent (Bosk et al. Eq. 9), subtracted from its timestamps and its trace's:
    /// pc2=+37s; exported as ddscope_clock_offset_seconds
    #[arg(long = "offset", value_name = "NAME=±DURATION", value_parser = crate::args::offset)]
    pub offsets: Vec<crate::args::Offset>,
    /// Trust the agents' clocks: no clock tracking (by default every agent's clock is tracked against
    /// the first agent's from the traffic both see, and cross-host figures carry its error bar)
    #[arg(long)]
    pub no_estimate: bool,
    /// No metrics registry (/metrics answers 404): only to measure what the registry costs (bench/serve_export.py)
    #[arg(long, hide = true, conflicts_with = "exports")]
    pub no_metrics: bool,
}

fn export_spec(s: &str) -> Result<ddscope_export::ExportSpec, String> {
    s.parse()
}

fn budget(s: &str) -> Result<ddscope_export::Budget, String> {
    s.parse()
}

fn trace_sampling(s: &str) -> Result<ddscope_export::traces::TraceSampling, String> {
    s.parse()
}

/// Scale-out (docs/scale-out.md): OTLP in, shards merged.
#[derive(Args, Debug)]
pub struct ScaleOutArgs {
    /// Also accept OTLP/gRPC (the Collector's load-balancing exporter) on this address;
    /// OTLP/HTTP (/v1/traces, /v1/logs) is always accepted on --listen
    #[arg(long, value_name = "ADDR")]
    pub otlp_grpc: Option<SocketAddr>,
    /// An agent's end announced over OTLP takes effect this much later (its last sightings may still be
    /// in the Collector); 0s to 1m
    #[arg(long, default_value = "2s", value_parser = args::duration_between(Duration::ZERO, Duration::from_secs(60)))]
    pub otlp_end_grace: Duration,
    /// Shard: an agent's batch record (watermark, end) that came over OTLP takes effect once a sighting of a
    /// later batch of that agent arrived (the traces pipeline is FIFO per shard), or at the latest this long
    /// after the record came — so a traces pipeline that lags the broadcast records by up to --window plus
    /// this hold causes no false losses; 0s turns the hold off. Sightings that still come after their sample
    /// was judged are counted (/api/state → otlp_hold, per agent, with the observed skew between the two
    /// pipelines); 0s to 10m
    #[arg(long, default_value = "10s", value_parser = args::duration_between(Duration::ZERO, Duration::from_secs(600)))]
    pub otlp_hold: Duration,
    /// Shard: batch records held per agent; beyond it the oldest is folded into the next (its watermark takes
    /// effect later, with the next one; counted as otlp_hold.evicted)
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub otlp_hold_max: u32,
    /// Run as a front: poll these serve shards (http://HOST:PORT, their /api/v1/summaries) and serve their
    /// merged view on the dashboard and /api/state instead of correlating
    #[arg(long, value_name = "SHARD_URL", num_args = 1..=64)]
    pub federate: Vec<String>,
}

/// A clap parser for a byte size (`64KiB`, `16MiB`) within [min, max] bytes.
fn size_between(min: u64, max: u64) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let b = s.parse::<Bytes>().map_err(|e| e.to_string())?.0;
        if b < min || b > max {
            return Err(format!("must be between {min} and {max} bytes"));
        }
        Ok(b)
    }
}

fn rate_between(min: f64, max: f64) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let r: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number"))?;
        if !(min..=max).contains(&r) {
            return Err(format!("must be between {min} and {max}"));
        }
        Ok(r)
    }
}

pub fn run(a: ServeArgs) -> anyhow::Result<i32> {
    if !a.listen.ip().is_loopback() && a.token.as_deref().is_none_or(str::is_empty) {
        return Err(crate::common::usage(format!("--listen {} is reachable from other hosts: give a --token (or listen on 127.0.0.1)", a.listen)));
    }
    let limits = HttpLimits {
        max_connections: a.max_connections as usize,
        max_body_bytes: a.max_body as usize,
        agent_rate: a.agent_rate,
        agent_burst: (a.agent_rate * 10.0).max(10.0),
        header_timeout: a.header_timeout,
        body_timeout: a.body_timeout,
        ingest_buffer_bytes: a.receive_budget as usize,
        decode_budget_bytes: a.decode_budget as usize,
        otlp_max_items: a.otlp_max_spans as usize,
        otlp_max_attributes: a.otlp_max_attributes as usize,
        ..HttpLimits::default()
    };
    let caps = StateCaps { max_series: a.max_series as usize, state_flows: a.max_state_flows as usize, ..StateCaps::default() };
    let resolved = a.caps.resolve()?;
    let cfg = ServeConfig {
        listen: a.listen,
        token: a.token.clone(),
        window_ns: a.window.window.ns(),
        idle: a.idle,
        limits,
        caps,
        correlation: resolved.correlation,
        trace: resolved.trace,
        stream: resolved.stream,
        chain_path: match a.path {
            Some(crate::args::PathArg::Topics(t)) => Some(t),
            _ => None,
        },
        otlp_grpc: a.scale.otlp_grpc,
        otlp_end_grace: a.scale.otlp_end_grace,
        otlp_hold: a.scale.otlp_hold,
        otlp_hold_max: a.scale.otlp_hold_max as usize,
        federate: a.scale.federate.clone(),
        export: a.export.exports.clone(),
        metrics: !a.export.no_metrics,
        budgets: a.export.budgets.clone(),
        trace_sampling: a.export.trace_sample.clone(),
        max_export_series: a.export.max_export_series as usize,
        timeline: resolved.timeline,
        offsets: a.export.offsets.iter().map(|o| (o.name.clone(), o.ns)).collect(),
        track_clocks: !a.export.no_estimate,
        explain: ddscope_core::latency::live_explain::LiveExplainOptions {
            window_ns: a.explain_window.as_nanos() as i64,
            explain: ddscope_core::latency::explain::ExplainOptions {
                max_samples: resolved.explain.max_samples.min(200_000),
                max_flows: resolved.explain.max_flows,
                examples: 0,
                ..Default::default()
            },
            ..Default::default()
        },
    };
    let open = a.token.as_deref().is_none_or(str::is_empty);
    let server = Server::start(cfg)?;
    let (addr, limits) = (server.addr(), server.limits());
    if open {
        eprintln!(
            "serve: WARNING: no --token: anyone who can connect to {addr} (every user and process on this host) can send \
             batches and OTLP and read /api/state; set --token or $DDSCOPE_TOKEN unless this host is yours alone"
        );
    }
    if a.scale.federate.is_empty() {
        eprintln!("serve: dashboard on http://{addr}/ ; agents send to http://{addr} (OTLP/HTTP: http://{addr}/v1/traces); Prometheus metrics on http://{addr}/metrics");
    } else {
        eprintln!("serve: merged view of {} shards on http://{addr}/", a.scale.federate.len());
    }
    if let Some(g) = server.grpc_addr() {
        eprintln!("serve: OTLP/gRPC on {g}");
    }
    if let Some(m) = server.metrics_addr() {
        eprintln!("serve: Prometheus metrics also on http://{m}/metrics");
    }
    if limits.max_connections < a.max_connections as usize {
        eprintln!("serve: at most {} connections at once (the open-file limit allows no more)", limits.max_connections);
    }
    // Ctrl-C or SIGTERM: what was judged reaches the push sinks before the process ends.
    let stop = Arc::new(AtomicBool::new(false));
    {
        let s = stop.clone();
        ctrlc::set_handler(move || s.store(true, Ordering::Relaxed)).context("installing the Ctrl-C handler")?;
    }
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    for (sink, s) in server.flush_export(Duration::from_secs(5)) {
        eprintln!(
            "serve: {sink}: {} records accepted, {} delivered, {} dropped (queue full), {} dropped batches, {} rejected, {} still queued{}",
            s.accepted,
            s.delivered,
            s.dropped_queue_full,
            s.dropped_batches,
            s.rejected,
            s.queued_records,
            s.last_error.as_deref().map(|e| format!("; last error: {e}")).unwrap_or_default()
        );
    }
    Ok(0)
}
