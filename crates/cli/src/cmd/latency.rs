//! `ddscope latency`: the same DDS sample at the sender's and the receivers'
//! capture points — message, submessage and application latency, loss,
//! retransmission, jitter, clock offsets.

use super::limit_args::LimitArgs;
use crate::args::{self, BudgetArg, Offset, PathArg, Period, TraceArg};
use crate::common::{self, OutFormat};
use anyhow::Context;
use clap::{Args, ValueEnum};
use ddscope_core::latency::{FlowSummary, LatencyRow, LayerRow};
use ddscope_core::ros2::chain::ChainLayerRow;
use ddscope_core::ros2::ChainRow;
use ddscope_core::output::{Format, RecordWriter};
use ddscope_core::session::{self, LatencyOptions};
use ddscope_core::sink::{RowSink, Select};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LevelArg {
    Message,
    Submessage,
    Both,
}

#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Inputs are capture files (pcap/pcapng, optionally .gz) or lab run directories
(their HOST.pcapng[.gz] captures, HOST.truth.jsonl ground truth and HOST.lttng/
ros2_tracing traces). Each capture point is named after its file (pc1.pcapng ->
pc1). For every writer the capture that sees its samples first is the sender;
every other capture that sees the writer is a receiver (unicast and multicast
alike).

Layers: message = first DATA/DATA_FRAG at the sender -> sample complete at the
receiver (thesis 3.2.5); first_first = first at the sender -> first at the
receiver; last_last = complete at the sender -> complete at the receiver;
submessage = per DATA_FRAG,
first IP fragment at the sender -> last IP fragment at the receiver;
source_ts_to_wire = INFO_TS -> first on the wire at the sender (one clock);
application = publish -> receive (needs ground truth), split into sender_stack
(publish -> first on wire) and receiver_stack (last on wire -> receive).
With ros2_tracing traces (--trace HOST=DIR, `ros2 trace` on each host):
ros_publish (rclcpp_publish -> rmw_publish), dds_send (rmw_publish -> first on
the wire), message, dds_receive (complete on the wire -> rmw_take), executor
(rmw_take -> callback_start), callback (callback_start -> callback_end); they
add up to ros_e2e (rclcpp_publish -> callback_start). Same-host deliveries are
joined trace to trace (status same_host, layer dds_local). --path follows a
chain of topics through the nodes that republish them.

Examples:
  ddscope latency pc1.pcapng pc2.pcapng
  ddscope latency out/run1 --topic /image --level both --rows image.parquet
  ddscope latency pc1.pcapng pc2.pcapng --offset pc2=+37s      # pc2 is TAI, pc1 UTC
  ddscope latency pc1.pcapng pc2.pcapng --no-estimate        # clocks trusted as they are
  ddscope latency pc1.pcapng pc2.pcapng --format csv -o rows.csv
  ddscope latency pc1.pcapng pc2.pcapng --trace pc1=s1-pc1 --trace pc2=s1-pc2
  ddscope latency lab-out/run1 --path auto
  ddscope latency lab-out/run1 --path /raw_image,/image,/actuator --rows chain.csv
  ddscope latency lab-out/run1 --budget /image=12ms --explain   # why samples were late
  ddscope latency lab-out/run1 --timeline run1.json   # open in ui.perfetto.dev
  ddscope latency lab-out/run1 --budget-file budgets.txt --fail-on-incidents")]
pub struct LatencyArgs {
    /// Capture files or lab run directories (two or more capture points); none with --trace: traces alone
    #[arg(required_unless_present = "traces")]
    pub inputs: Vec<PathBuf>,
    /// Only topics matching (ROS 2 or DDS name; glob, repeatable)
    #[arg(long = "topic")]
    pub topics: Vec<String>,
    /// Only topics of this DDS domain (from SPDP/SEDP or the RTPS ports; see docs/events.md)
    #[arg(long, value_parser = crate::args::domain)]
    pub domain: Option<u32>,
    /// Which per-sample rows to write: message, submessage or both
    #[arg(long, value_enum, default_value = "message")]
    pub level: LevelArg,
    /// Clock offset t_o of a capture point (Bosk et al. Eq. 9), subtracted from its timestamps: pc2=+37s
    #[arg(long = "offset", value_name = "NAME=±DURATION", value_parser = args::offset)]
    pub offsets: Vec<Offset>,
    /// Estimating each capture's clock offset (and the sender of each writer) from the traffic's two directions is the default; kept for scripts
    #[arg(long, hide = true, conflicts_with = "no_estimate")]
    pub estimate_offset: bool,
    /// Do not estimate the clock offsets from the traffic (then the captures' clocks are taken as synchronised, or as --offset says, unchecked, and each writer's sender is the capture that saw its samples first)
    #[arg(long)]
    pub no_estimate: bool,
    /// Publication period for in time / late: auto (median interval per writer) or a duration
    #[arg(long, default_value = "auto", value_parser = args::period)]
    pub period: Period,
    #[command(flatten)]
    pub window: args::WindowArg,
    /// Ground-truth files (lab JSONL) besides those found in run directories
    #[arg(long = "truth")]
    pub truth: Vec<PathBuf>,
    /// table/json: summary; csv/jsonl/parquet: per-sample rows
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutFormat,
    /// Output file (default: stdout)
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Also write per-sample rows here (.csv, .jsonl or .parquet); with --path TOPICS, one row per hop of every chain instance
    #[arg(long)]
    pub rows: Option<PathBuf>,
    /// Also write a timeline of the run for Perfetto (ui.perfetto.dev) or chrome://tracing (Chrome JSON): per host a
    /// track per topic on the wire and per traced thread, a flow per sample across hosts (docs/timeline.md)
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// ros2_tracing (or CARET) trace of a host: HOST=DIR (HOST = its capture point), or DIR alone without captures; repeatable; run directories' HOST.lttng/ are found automatically
    #[arg(long = "trace", value_name = "HOST=DIR", value_parser = args::trace)]
    pub traces: Vec<TraceArg>,
    /// End-to-end chain through the nodes (needs traces): topics in order (/raw_image,/image,/actuator), a CARET architecture file's path (architecture.yaml[:PATH_NAME]), or auto to list the chains found
    #[arg(long, value_name = "TOPICS|FILE.yaml[:PATH]|auto", value_parser = args::path)]
    pub path: Option<PathArg>,
    /// Also print the callback tables (durations per callback, publishes per callback); always with traces alone
    #[arg(long)]
    pub callbacks: bool,
    /// Also print the per-reader table (reader fairness): each reader's latency, by UDP destination on the wire and by reader node in the ground truth (json always has it)
    #[arg(long)]
    pub readers: bool,
    /// Latency budget of the topics matching TOPIC (a glob), end to end as measured (ROS 2 traces, else ground truth, else the wire): a duration, `period` (each flow's publication period) or `p99` (each flow's own 99th percentile); repeatable. Samples over it are incidents
    #[arg(long = "budget", value_name = "TOPIC=DURATION|period|pNN", value_parser = args::budget)]
    pub budgets: Vec<BudgetArg>,
    /// Budgets from a file, one `TOPIC = DURATION` per line
    #[arg(long, value_name = "FILE")]
    pub budget_file: Option<PathBuf>,
    /// Find the incidents (over budget, lost, late, outliers, negative layers) and say for each which layer took the excess and which cause the evidence supports
    #[arg(long)]
    pub explain: bool,
    /// Judge the incidents per window of sample time as `serve`'s live feed does (its --explain-window): medians,
    /// derived budgets and verdicts per window, without the link and CPU evidence serve does not have; implies --explain
    #[arg(long, value_name = "DURATION", value_parser = args::duration_between(std::time::Duration::from_secs(1), std::time::Duration::from_secs(3600)))]
    pub explain_window: Option<std::time::Duration>,
    /// Exit with status 1 when a budget is broken (a sample over it, or lost), with a one-line summary; needs --budget or --budget-file
    #[arg(long)]
    pub fail_on_incidents: bool,
    /// The capture points' link rate (1G, 2.5G, 100M) that --explain judges a busy link against (link queueing); default: a lab run's network.rate (run.json), else each capture's busiest 1 ms
    #[arg(long, value_name = "RATE")]
    pub link_rate: Option<ddscope_traffic::units::Rate>,
    /// Per-process CPU time of a host over the run (`t_ns,process,pid,cpu_user_s,cpu_system_s,…`, as a lab run's load.csv) that --explain reads for CPU contention; repeatable; default: a lab run's load.csv
    #[arg(long = "load", value_name = "HOST=FILE", value_parser = args::trace)]
    pub load: Vec<TraceArg>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// The session's options from what the user gave.
pub fn options(offsets: &[Offset], estimate_offset: bool, period: Period, window_ns: i64, level: LevelArg) -> LatencyOptions {
    LatencyOptions {
        offsets: offsets.iter().map(|o| (o.name.clone(), o.ns)).collect(),
        estimate_offset,
        period_ns: period.ns(),
        window_ns,
        message_rows: level != LevelArg::Submessage,
        submessage_rows: level != LevelArg::Message,
        ..LatencyOptions::default()
    }
}

pub fn run(a: LatencyArgs) -> anyhow::Result<i32> {
    let select = common::topic_select(&a.topics, a.domain)?;
    let found = session::expand_run(&a.inputs, &a.truth).map_err(common::session_error)?;
    let (captures, truth) = (found.captures, found.truth);
    let traces = common::traces(found.traces, &a.traces);
    let chain_path = match &a.path {
        Some(PathArg::Topics(t)) => Some(t.clone()),
        _ => None,
    };
    if a.path.is_some() && traces.is_empty() {
        return Err(common::usage("--path needs ros2_tracing traces: give --trace HOST=DIR (or a run directory with HOST.lttng/)"));
    }
    let mut inputs: Vec<PathBuf> = a.inputs.clone();
    inputs.extend(captures.iter().map(|c| c.path.clone()));
    inputs.extend(truth.iter().cloned());
    inputs.extend(traces.iter().map(|t| t.path.clone()));
    let row_format = a.format.writes_rows();
    for o in a.output.iter().chain(&a.timeline) {
        common::check_writable(o, &inputs)?;
    }
    if a.timeline.is_some() && a.level == LevelArg::Submessage {
        return Err(common::usage("--timeline draws the message rows: give --level message or both, not submessage"));
    }
    // Per-sample rows, or with a chain one row per hop of every instance.
    let (sample_writers, chain_writers, outputs) = if chain_path.is_some() {
        let (w, o) = common::row_writers::<ChainRow>(a.format, a.output.as_deref(), a.rows.as_deref(), &inputs)?;
        (vec![], w, o)
    } else {
        let (w, o) = common::row_writers::<LatencyRow>(a.format, a.output.as_deref(), a.rows.as_deref(), &inputs)?;
        (w, vec![], o)
    };
    let mut opts = options(&a.offsets, !a.no_estimate, a.period, a.window.window.ns(), a.level);
    let limits = a.limits.resolve()?;
    super::limit_args::apply(&limits, &mut opts);
    opts.chain_rows = !chain_writers.is_empty();
    opts.path = chain_path.clone();
    let mut budgets: Vec<BudgetArg> = a.budgets.clone();
    if let Some(f) = &a.budget_file {
        budgets.extend(args::budget_file(f).map_err(|e| common::input(format!("--budget-file {e}")))?);
    }
    if a.fail_on_incidents && budgets.is_empty() {
        return Err(common::usage("--fail-on-incidents needs a budget: give --budget TOPIC=DURATION or --budget-file FILE"));
    }
    let link_rate = link_rate(a.link_rate, &a.inputs);
    let explain = a.explain || a.explain_window.is_some() || !budgets.is_empty();
    let cpu_load = if explain && a.explain_window.is_none() { cpu_load(&a.load, &a.inputs, &limits, None)? } else { None };
    let explainer = explain.then(|| {
        let opts = ddscope_core::latency::explain::ExplainOptions {
            budgets: budgets.iter().map(|b| ddscope_core::latency::explain::Budget::with_limit(&b.topic, b.limit).expect("checked when parsed")).collect(),
            max_samples: limits.explain.max_samples,
            max_flows: limits.explain.max_flows,
            link_rate_bps: link_rate.map(|r| r.0),
            link_rate_from: link_rate.map_or("", |r| r.1),
            ..Default::default()
        };
        match a.explain_window {
            None => Judge::Run(ddscope_core::latency::explain::Explainer::new(opts)),
            Some(w) => Judge::Windows(
                ddscope_core::latency::live_explain::WindowedExplainer::new(ddscope_core::latency::live_explain::LiveExplainOptions {
                    explain: opts,
                    window_ns: w.as_nanos() as i64,
                    // Offline every row of a window is in before the next window's rows: no grace is needed,
                    // and no window may be judged early (all of a run's windows may be open at once).
                    grace_ns: i64::MAX / 4,
                    max_open: usize::MAX,
                    feed: 0,
                }),
                vec![],
            ),
        }
    });
    if matches!(explainer, Some(Judge::Run(_))) {
        opts.link_load = Some(ddscope_core::pipeline::LinkLoadConfig { max_bins: limits.explain.max_link_bins, ..Default::default() });
    }
    // The rows of the selected topics go to the explainer, the timeline and the writers.
    let timeline = a.timeline.as_ref().map(|_| ddscope_core::timeline::Timeline::new(limits.timeline));
    let mut rows = Select { topics: select, next: ((explainer, timeline), sample_writers) };
    let mut chain_rows = chain_writers;
    let mut run = common::run_session("latency", captures, &truth, traces, &opts, &mut rows, &mut chain_rows)?;
    rows.finish().context("writing rows")?;
    chain_rows.finish().context("writing rows")?;
    for o in outputs {
        o.commit()?;
    }
    let Select { topics: select, next: ((explainer, timeline), _) } = rows;
    if let (Some(t), Some(path)) = (&timeline, &a.timeline) {
        common::write_timeline("latency", t, path, &inputs)?;
    }
    for (i, c) in run.captures.iter().enumerate() {
        let o = &run.outcomes[i];
        eprintln!(
            "latency: {} = {}: {} frames, {} RTPS messages{}; {}",
            c.name,
            c.path.display(),
            o.summary.frames,
            o.decode.rtps_messages,
            crate::closing::zenoh_counts(&o.decode.zenoh),
            o.decode.summary_line()
        );
        if let Some(e) = &o.summary.error {
            eprintln!("latency: {}: {e} (everything before it was analysed)", c.path.display());
        }
        if let Some(l) = o.samples.problem_line() {
            eprintln!("latency: {}: {l}", c.path.display());
        }
    }
    if let Some(l) = run.correlator.stats.problem_line() {
        eprintln!("latency: correlation: {l}");
    }
    common::print_trace_lines("latency", &run);
    common::print_clock_lines("latency", &run);
    common::print_clock_tracking_lines("latency", &run);
    session::check_correlated(&run).map_err(common::session_error)?;
    for w in run.correlator.warnings() {
        eprintln!("latency: warning: {w}");
    }
    if let Some(p) = run.correlator.readers.problem_line() {
        eprintln!("latency: warning: per-reader table: {p}");
    }
    // Flows joined trace to trace are judged in time / late against --period, else their topic's period in the traces.
    let all_flows = ddscope_core::ros2::timing::summaries(&run.correlator, a.period.ns());
    let mut known: Vec<String> = all_flows.iter().map(|f| f.topic.clone()).collect();
    let flows: Vec<FlowSummary> = all_flows.into_iter().filter(|f| select.keeps(f)).collect();
    // A budget or --topic that matches nothing judges nothing: said, and a failure with
    // --fail-on-incidents (a typo must not pass CI as "0 broken").
    let mut unmatched = vec![];
    for b in &budgets {
        let m = ddscope_core::latency::explain::Budget::with_limit(&b.topic, b.limit).expect("checked when parsed");
        if !flows.iter().any(|f| m.matches(&f.topic)) {
            unmatched.push(format!("--budget {}", ddscope_traffic::text::excerpt(&b.topic, ddscope_traffic::text::EXCERPT_CHARS)));
        }
    }
    if !a.topics.is_empty() && flows.is_empty() {
        unmatched.push(format!("--topic {}", ddscope_traffic::text::excerpt(&a.topics.join(","), ddscope_traffic::text::EXCERPT_CHARS)));
    }
    if !unmatched.is_empty() {
        known.sort();
        known.dedup();
        let shown = ddscope_traffic::text::excerpt(&known.join(", "), ddscope_traffic::text::EXCERPT_CHARS);
        for u in &unmatched {
            eprintln!("latency: warning: {u} matches no flow between these captures (topics with flows: {shown})");
        }
    }
    let reader_rows: Vec<ddscope_core::latency::readers::ReaderRow> = run
        .correlator
        .readers
        .rows(run.correlator.capture_names())
        .into_iter()
        .filter(|r| flows.iter().any(|f| f.topic == r.topic && f.sender == r.sender && f.receiver == r.receiver))
        .collect();
    let explanation = explainer.map(|j| match j {
        Judge::Run(mut e) => {
            for (c, o) in run.captures.iter().zip(run.outcomes.iter_mut()) {
                if let Some(l) = o.link.take() {
                    e.add_link(&c.name, l);
                }
            }
            if let Some(l) = cpu_load {
                e.add_cpu_load(l);
            }
            e.finish()
        }
        Judge::Windows(mut w, mut judged) => {
            judged.extend(w.flush());
            let mut x = ddscope_core::latency::explain::Explanation::merge(judged);
            x.samples_not_kept += w.stats.late_rows;
            x
        }
    });
    if let Some(c) = explanation.as_ref().and_then(|x| x.cpu_load.as_ref()) {
        if let Some(l) = cpu_load_problem(c) {
            eprintln!("latency: warning: {l}");
        }
    }
    if let Some(x) = &explanation {
        eprintln!("latency: incidents: {}", x.summary_line());
    }
    let status = match &explanation {
        Some(x) if a.fail_on_incidents && x.budget_broken > 0 => {
            eprintln!("latency: FAIL: {} samples broke their budget ({})", x.budget_broken, x.summary_line());
            1
        }
        _ if a.fail_on_incidents && !unmatched.is_empty() => {
            eprintln!("latency: FAIL: {} judged nothing ({} of {} budgets match no flow)", unmatched.join(", "), unmatched.len(), budgets.len());
            1
        }
        _ => 0,
    };
    if row_format {
        return Ok(status);
    }
    untrusted_layers_line(&flows.iter().flat_map(|f| f.layer_rows()).collect::<Vec<_>>());
    let (mut out, output) = common::open_output(a.output.as_deref(), a.format, &inputs)?;
    if a.format == OutFormat::Json {
        let doc = json!({
            "captures": run.captures.iter().zip(&run.outcomes).zip(&run.offsets_ns).map(|((c, o), off)| json!({
                "name": c.name, "path": c.path.display().to_string(), "offset_ns": off,
                "capture": o.summary, "decode": o.decode, "skipped": o.decode.summary_line(),
            })).collect::<Vec<_>>(),
            "offset_estimates": run.estimates.iter().map(|(n, e)| match e {
                Ok(e) => json!({"capture": n, "reference": run.captures[0].name, "estimate": e}),
                Err(err) => json!({"capture": n, "reference": run.captures[0].name, "error": err}),
            }).collect::<Vec<_>>(),
            "ground_truth": {"files": run.truth.files, "records": run.truth.lines},
            "writers": run.correlator.writer_roles(),
            "flows": flows.iter().map(flow_json).collect::<Vec<_>>(),
            "readers": reader_rows,
            "traces": run.traces,
            "ros2_join": run.correlator.join_stats(),
            "callbacks": run.correlator.callbacks().map(|c| c.rows(run.correlator.capture_names())),
            "publishes_per_callback": run.correlator.callbacks().map(|c| c.publish_rows(run.correlator.capture_names())),
            "chains": run.correlator.chains().map(|c| json!({"paths": c.paths(), "chain": c.summary(), "stats": c.stats})),
            "correlation": run.correlator.stats,
            "warnings": run.correlator.warnings(),
            "incidents": explanation.as_ref().map(|x| json!({
                "summary": x.summary_line(), "samples": x.samples, "samples_not_kept": x.samples_not_kept,
                "budget_broken": x.budget_broken, "by_cause": x.by_cause, "by_kind": x.by_kind, "incidents": x.incidents, "links": x.links, "cpu_load": x.cpu_load,
            })),
        });
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
        out.flush()?;
        drop(out);
        output.commit()?;
        return Ok(status);
    }
    let mut out = out;
    match (&a.path, run.correlator.chains()) {
        (Some(PathArg::Auto), Some(c)) => {
            let paths = c.paths();
            writeln!(out, "chains found (topic sequences through nodes that publish inside the callback of their input; end-to-end = first rclcpp_publish -> last callback_start):")?;
            if paths.is_empty() {
                let why = if run.correlator.join_stats().is_some_and(|j| j.takes_same_host + j.takes_traces + j.takes_joined_wire == 0) {
                    "no take was joined to its publish (see the join lines above)"
                } else {
                    "no joined sample was published inside the callback of another joined sample"
                };
                writeln!(out, "(none: {why})")?;
            } else {
                // Chains are named c1, c2, … in the table and spelled out in full above it.
                for (i, p) in paths.iter().enumerate() {
                    writeln!(out, "  c{} = {}", i + 1, p.topics.join(" -> "))?;
                }
                let rows: Vec<ChainLayerRow> = paths
                    .iter()
                    .enumerate()
                    .map(|(i, p)| ChainLayerRow {
                        chain: format!("c{}", i + 1),
                        hop: "e2e".into(),
                        topic: format!("{} hops, {} instances", p.topics.len(), p.count),
                        route: String::new(),
                        layer: None,
                        s: p.e2e,
                    })
                    .collect();
                let mut w: RecordWriter<ChainLayerRow> = RecordWriter::new(Format::Table, out, &[])?;
                for r in &rows {
                    w.write(r)?;
                }
                out = w.finish_into()?;
            }
            writeln!(out)?;
        }
        (Some(PathArg::Topics(t)), Some(c)) => {
            if let Some(s) = c.summary() {
                let via = if c.stats.instances_via_latest > 0 {
                    format!("; {} through a node's latest input instead of a publish inside the input's callback", c.stats.instances_via_latest)
                } else {
                    String::new()
                };
                writeln!(out, "chain c1 = {}: {} instances ({} without an end-to-end value{via}){}", t.join(" -> "), s.instances, s.incomplete, inputs_text(&s))?;
                let mut w: RecordWriter<ChainLayerRow> = RecordWriter::new(a.format.into(), out, &[])?;
                for mut r in s.layer_rows() {
                    r.chain = "c1".into();
                    w.write(&r)?;
                }
                out = w.finish_into()?;
                writeln!(out)?;
                if s.instances == 0 {
                    eprintln!("latency: warning: no instance of the chain {} was found (see --path auto for the chains in this run)", t.join(","));
                }
            }
        }
        _ => {}
    }
    let layer_rows: Vec<LayerRow> = flows.iter().flat_map(|f| f.layer_rows()).collect();
    let mut w: RecordWriter<LayerRow> = RecordWriter::new(a.format.into(), out, &[])?;
    for r in &layer_rows {
        w.write(r)?;
    }
    let mut out = w.finish_into()?;
    super::legend::write_layers(&mut out, layer_rows.iter().map(|r| r.layer.as_str()))?;
    writeln!(out)?;
    // Traces alone: the wire's columns (loss, repairs, jitter of the message) would all be empty.
    let trace_only = run.captures.is_empty();
    // In time / late against the topic's publication period in the traces (ros2::timing), empty where none is known.
    let flow_cols: &[&str] = if trace_only { &["topic", "sender", "receiver", "sender_nodes", "receiver_nodes", "samples", "period_ms", "in_time", "late"] } else { &[] };
    let mut w: RecordWriter<FlowSummary> = RecordWriter::new(Format::Table, out, flow_cols)?
        .empty_reason("sender_nodes", "no traces and no ROS 2 node names on the wire")
        .empty_reason("receiver_nodes", "no traces and no ROS 2 node names on the wire")
        .empty_reason("repaired_mean_ms", "no sample was repaired")
        .empty_reason("period_ms", "no publication period known (from traces: a burst, under 5 publishes, or several publishers not all in timers of one period)")
        .empty_reason("in_time", "no publication period to judge against")
        .empty_reason("late", "no publication period to judge against");
    for f in &flows {
        w.write(f)?;
    }
    let mut out = w.finish_into()?;
    if !trace_only {
        super::legend::write_flow_columns(&mut out)?;
    }
    if let (true, Some(cb)) = (trace_only || a.callbacks, run.correlator.callbacks()) {
        let names = run.correlator.capture_names();
        writeln!(out)?;
        writeln!(out, "callbacks (callback_start -> callback_end, per callback of every traced node):")?;
        let mut w: RecordWriter<ddscope_core::ros2::callbacks::CallbackRow> = RecordWriter::new(Format::Table, out, &[])?;
        for r in cb.rows(names) {
            w.write(&r)?;
        }
        out = w.finish_into()?;
        writeln!(out)?;
        writeln!(out, "publishes per callback (the callback each publish was made in; node_time = callback_start -> the publish):")?;
        let mut w: RecordWriter<ddscope_core::ros2::callbacks::PublishEdgeRow> = RecordWriter::new(Format::Table, out, &[])?;
        for r in cb.publish_rows(names) {
            w.write(&r)?;
        }
        out = w.finish_into()?;
    }
    if a.readers {
        writeln!(out)?;
        write_reader_table(&mut out, &reader_rows)?;
    }
    if let (true, Some(x)) = (a.explain || a.explain_window.is_some(), &explanation) {
        writeln!(out)?;
        write_explanation(&mut out, x)?;
    }
    out.flush()?;
    drop(out);
    output.commit()?;
    Ok(status)
}

/// A flow summary as JSON: a flow joined trace to trace whose publication period is unknown has
/// neither in time nor late (null), not every sample late.
pub fn flow_json(f: &FlowSummary) -> serde_json::Value {
    let mut v = serde_json::to_value(f).unwrap_or(serde_json::Value::Null);
    if !ddscope_core::ros2::timing::timing_known(f) {
        v["in_time"] = serde_json::Value::Null;
        v["late"] = serde_json::Value::Null;
    }
    v
}

/// What became of the measured chain's inputs (the first topic's samples taken by a node that
/// continues the path): `; of 82 inputs on /topic1: 40 reached /topic4, 41 dropped along the path
/// (41 before /topic3), 1 not carried on before the trace ended`.
pub fn inputs_text(s: &ddscope_core::ros2::ChainSummary) -> String {
    if s.inputs == 0 {
        return String::new();
    }
    let first = s.path.first().map(String::as_str).unwrap_or("?");
    let last = s.path.last().map(String::as_str).unwrap_or("?");
    let mut t = format!("; of {} inputs on {first}: {} reached {last}", s.inputs, s.inputs_complete);
    if s.dropped > 0 {
        let at: Vec<String> = s.dropped_at.iter().map(|d| format!("{} before {}", d.inputs, d.topic)).collect();
        t.push_str(&format!(", {} dropped along the path ({}: a later input went on from where each stopped)", s.dropped, at.join(", ")));
    }
    if s.unfinished > 0 {
        t.push_str(&format!(", {} not carried on before the trace ended (nor any later input from where they stopped)", s.unfinished));
    }
    t
}

/// `--explain`: incidents grouped by cause, then the worst ones with their evidence.
/// The link rate `--explain` judges a busy link against: `--link-rate`, else a lab run
/// directory's `network.rate` (run.json), else none (each capture's busiest 1 ms).
pub fn link_rate(given: Option<ddscope_traffic::units::Rate>, inputs: &[PathBuf]) -> Option<(f64, &'static str)> {
    if let Some(r) = given {
        return Some((r.0 as f64, "--link-rate"));
    }
    let [dir] = inputs else { return None };
    let text = std::fs::read_to_string(dir.join("run.json")).ok()?;
    let run: serde_json::Value = serde_json::from_str(&text).ok()?;
    let rate: ddscope_traffic::units::Rate = run["network"]["rate"].as_str()?.parse().ok()?;
    Some((rate.0 as f64, "the lab run's network.rate"))
}

/// The per-process load `--explain` reads for CPU contention: `--load HOST=FILE`
/// (every process of FILE on HOST), else a lab run directory's load.csv (each
/// node on its scenario host, `NAME_on_HOST` on HOST), else none.
/// `lab_load`: the run directory's load.csv when the caller has read it already.
pub fn cpu_load(given: &[TraceArg], inputs: &[PathBuf], limits: &ddscope_core::limits::Limits, lab_load: Option<&str>) -> anyhow::Result<Option<ddscope_core::latency::cpuload::CpuLoad>> {
    use ddscope_core::latency::cpuload::CpuLoad;
    let mut load = CpuLoad::new(limits.explain.max_load_processes, limits.explain.max_load_points);
    if !given.is_empty() {
        for g in given {
            let host = g.host.clone();
            load.read_csv(&g.dir, &move |_| Some(host.clone())).map_err(|e| common::input(format!("--load {e}")))?;
        }
        return Ok(Some(load));
    }
    let [dir] = inputs else { return Ok(None) };
    let file = dir.join(ddscope_lab::run::LOAD_FILE);
    let text = match lab_load {
        Some(t) => std::borrow::Cow::Borrowed(t),
        None if file.is_file() => std::borrow::Cow::Owned(ddscope_traffic::fsio::read_bounded_text(&file, ddscope_traffic::fsio::MAX_LOAD_BYTES, "load file")?),
        None => return Ok(None),
    };
    let host_of = lab_process_hosts(dir);
    load.add_csv(&file.display().to_string(), &text, &host_of).map_err(common::input)?;
    Ok(Some(load))
}

/// The host of each process a lab run's load.csv names: a node on its scenario host (run.json),
/// a container of composable nodes on its members' host, `NAME_on_HOST` (tcpdump, iperf3) on HOST.
pub fn lab_process_hosts(dir: &std::path::Path) -> impl Fn(&str) -> Option<String> {
    let mut hosts = std::collections::HashMap::new();
    if let Ok(run) = std::fs::read_to_string(dir.join("run.json")).map_err(|e| e.to_string()).and_then(|t| serde_json::from_str::<serde_json::Value>(&t).map_err(|e| e.to_string())) {
        for n in run["nodes"].as_array().into_iter().flatten() {
            if let (Some(name), Some(host)) = (n["name"].as_str(), n["host"].as_str()) {
                hosts.insert(name.to_string(), host.to_string());
                // composable nodes: the load file names their process by its container
                if let Some(c) = n["container"].as_str() {
                    hosts.insert(c.to_string(), host.to_string());
                }
            }
        }
    }
    move |p: &str| hosts.get(p).cloned().or_else(|| ddscope_core::latency::cpuload::host_in_name(p).map(str::to_string))
}

/// `--explain` over the whole run, or per window as `serve` judges (`--explain-window`).
enum Judge {
    Run(ddscope_core::latency::explain::Explainer),
    Windows(ddscope_core::latency::live_explain::WindowedExplainer, Vec<ddscope_core::latency::explain::Explanation>),
}

impl ddscope_core::sink::RowSink<LatencyRow> for Judge {
    fn row(&mut self, r: &LatencyRow) {
        match self {
            Judge::Run(e) => e.add(r),
            Judge::Windows(w, judged) => judged.extend(w.row(r)),
        }
    }
}

/// What of the per-process load could not be read or kept, or `None`.
pub fn cpu_load_problem(c: &ddscope_core::latency::explain::CpuLoadInfo) -> Option<String> {
    (c.bad_lines > 0 || c.not_kept > 0).then(|| {
        format!(
            "per-process load: {} line(s) not read, {} reading(s) not kept (unknown host, or over explain.max_load_points / max_load_processes){}",
            c.bad_lines,
            c.not_kept,
            c.first_problem.as_ref().map(|p| format!("; first: {p}")).unwrap_or_default()
        )
    })
}

pub fn write_explanation(out: &mut dyn Write, x: &ddscope_core::latency::explain::Explanation) -> std::io::Result<()> {
    use ddscope_core::latency::explain::Kind;
    writeln!(out, "incidents: {}", x.summary_line())?;
    if x.incidents.is_empty() {
        return Ok(());
    }
    writeln!(out, "{:18}  {:>9}  {:>11}  {:>6}  {:>10}  {:>8}  {}", "cause", "incidents", "over_budget", "lost", "excess_ms", "share_%", "layer")?;
    for c in &x.by_cause {
        writeln!(
            out,
            "{:18}  {:>9}  {:>11}  {:>6}  {:>10.3}  {:>8.1}  {}",
            c.cause.name(),
            c.incidents,
            c.over_budget,
            c.lost,
            c.excess_ms,
            c.share_of_excess_pct,
            c.layer.map_or("-", |l| l.name())
        )?;
    }
    writeln!(out, "(share_%: of the latency above each flow's median, summed over incidents; layer: where most of the cause's incidents took their excess)")?;
    if !x.links.is_empty() {
        let links: Vec<String> = x
            .links
            .iter()
            .map(|l| {
                let mut t = format!("{} in {} µs bins against {:.3} Gbit/s ({})", ddscope_traffic::text::escape_controls(&l.capture), l.bin_ns / 1000, l.rate_bps / 1e9, l.rate_from);
                if l.frames_before_start > 0 {
                    t.push_str(&format!(", {} frames before its start not counted", l.frames_before_start));
                }
                t
            })
            .collect();
        writeln!(out, "link load (link_queueing's evidence): {}", links.join("; "))?;
    }
    if let Some(c) = &x.cpu_load {
        writeln!(
            out,
            "cpu load (cpu_contention's evidence): {} reading(s) of {} every {} ms, hosts {}",
            c.lines - c.bad_lines,
            c.files.iter().map(|f| ddscope_traffic::text::escape_controls(f)).collect::<Vec<_>>().join(", "),
            c.interval_ns.map_or("-".to_string(), |i| format!("{:.1}", i as f64 / 1e6)),
            c.hosts.iter().map(|h| ddscope_traffic::text::escape_controls(h)).collect::<Vec<_>>().join(", ")
        )?;
    }
    writeln!(out, "worst incidents:")?;
    for i in x.worst(10) {
        let kinds: Vec<&str> = i.kinds.iter().map(|k| ddscope_core::latency::explain::kind_name(*k)).collect();
        let v = match (i.e2e_ns, i.typical_e2e_ns) {
            _ if i.kinds.contains(&Kind::Lost) => "lost".to_string(),
            (Some(v), Some(t)) => format!("{} {:.3} ms (median {:.3} ms)", i.e2e_measure, v as f64 / 1e6, t as f64 / 1e6),
            (Some(v), None) => format!("{} {:.3} ms", i.e2e_measure, v as f64 / 1e6),
            _ => "-".into(),
        };
        let budget = i.budget_ns.map_or(String::new(), |b| format!(", budget {:.3} ms", b as f64 / 1e6));
        let writer = if i.writer_id.is_empty() { String::new() } else { format!(" writer {}", i.writer_id) };
        writeln!(
            out,
            "  {} {}->{}{writer} sn {}: {v}{budget} [{}] -> {}: {}",
            ddscope_traffic::text::escape_controls(&i.topic),
            ddscope_traffic::text::escape_controls(&i.sender),
            ddscope_traffic::text::escape_controls(&i.receiver),
            i.sn,
            kinds.join(", "),
            i.cause.name(),
            ddscope_traffic::text::escape_controls(&i.evidence)
        )?;
    }
    Ok(())
}

/// The per-reader table: one line per reader of a flow, latency and how far behind the
/// first reader of the same sample it was (ms).
fn write_reader_table(out: &mut dyn Write, rows: &[ddscope_core::latency::readers::ReaderRow]) -> std::io::Result<()> {
    writeln!(out, "readers (wire: UDP destination at the receiver capture, one row per multicast group; truth: reader node, publish -> receive):")?;
    if rows.is_empty() {
        return writeln!(out, "(none)");
    }
    let tw = rows.iter().map(|r| r.topic.len()).max().unwrap_or(5).max(5);
    let fw = rows.iter().map(|r| r.sender.len() + r.receiver.len() + 2).max().unwrap_or(4).max(4);
    let rw = rows.iter().map(|r| r.reader.len()).max().unwrap_or(6).max(6);
    writeln!(
        out,
        "{:tw$}  {:fw$}  {:6}  {:rw$}  {:>8}  {:>9}  {:>9}  {:>9}  {:>9}  {:>11}  {:>11}",
        "topic", "flow", "source", "reader", "samples", "mean_ms", "p50_ms", "p99_ms", "max_ms", "behind_mean", "behind_max"
    )?;
    for r in rows {
        let l = &r.latency;
        writeln!(
            out,
            "{:tw$}  {:fw$}  {:6}  {:rw$}  {:>8}  {:>9.3}  {:>9.3}  {:>9.3}  {:>9.3}  {:>11.3}  {:>11.3}",
            r.topic,
            format!("{}->{}", r.sender, r.receiver),
            r.source,
            r.reader,
            r.samples,
            l.mean_ms,
            l.p50_ms,
            l.p99_ms,
            l.max_ms,
            r.behind_first.mean_ms,
            r.behind_first.max_ms
        )?;
    }
    Ok(())
}

/// One line naming the cross-host layers whose clock error bar is at least their mean: the figure
/// says nothing about the layer there (docs/latency.md, "Clocks"); the first five are named.
fn untrusted_layers_line(rows: &[LayerRow]) {
    let bad: Vec<&LayerRow> = rows.iter().filter(|r| r.untrusted()).collect();
    if bad.is_empty() {
        return;
    }
    let named: Vec<String> = bad
        .iter()
        .take(5)
        .map(|r| {
            format!(
                "{} {} → {} {} {} ± {}",
                r.topic,
                r.sender,
                r.receiver,
                r.layer.as_str(),
                common::error_bar((r.s.mean_ms * 1e6).round() as i64),
                common::error_bar(r.clock_error_ns.unwrap_or(0))
            )
        })
        .collect();
    let more = if bad.len() > 5 { format!(" and {} more", bad.len() - 5) } else { String::new() };
    eprintln!(
        "latency: {} cross-host layer(s) with a clock error bar at least their mean, not to be read as exact (clock_error_ms): {}{more}",
        bad.len(),
        named.join("; ")
    );
}
