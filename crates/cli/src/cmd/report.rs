//! `ddscope report`: one self-contained HTML file (opens offline) with
//! per-topic tables and charts — box plots per latency layer for each run side
//! by side (thesis Fig. 4.4), latency over time, CDF, payload size and
//! bandwidth over time (thesis Fig. 4.10). With ros2_tracing traces: each
//! flow's ros_e2e stacked into its ROS 2 / DDS / wire layers, the chains found,
//! and the chain given with --path stacked per hop.

use super::limit_args::LimitArgs;
use crate::args::{self, BudgetArg, NamedRun, Offset, PathArg, TraceArg};
use crate::common::{self, capture_name};
use anyhow::Context;
use clap::Args;
use ddscope_core::latency::{Level, LatencyRow};
use ddscope_core::rate::{SampleTimes, TopicRate};
use ddscope_core::ros2::ChainRow;
use ddscope_core::session::{self, LatencyOptions};
use ddscope_core::sink::{RowSink, Select, TopicSelect};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  ddscope report out/run1 --html run1.html
  ddscope report out/baseline-0 --compare load40=out/baseline-40 --compare load95=out/baseline-95 \\
      --html load.html
  ddscope report pc1.pcapng pc2.pcapng --html report.html --topic /image
  ddscope report out/traced-run --path /raw_image,/image,/actuator --html chain.html
  ddscope report out/traced-run --html run.html --timeline run.json   # run.json: ui.perfetto.dev

Each run (the inputs, and every --compare NAME=DIR) is correlated like
`ddscope latency`; the HTML holds its data and its chart code inline and needs
no network. Box plots: box p25-p75, line = median, whiskers p1-p99, dots =
min/max, diamond = mean. With traces (HOST.lttng/ in the run directory or
--trace HOST=DIR) each flow's ros_e2e is shown stacked into ros_publish,
dds_send / dds_local, message, dds_receive and executor (means), the chains
found are listed, and --path TOPICS stacks that chain's end-to-end latency
per hop (with each relay node's own time).")]
pub struct ReportArgs {
    /// Lab run directory, or capture files of one run; none with --trace: traces alone
    #[arg(required_unless_present = "traces")]
    pub inputs: Vec<PathBuf>,
    /// Another run to show side by side: NAME=DIR (repeatable)
    #[arg(long = "compare", value_name = "NAME=DIR", value_parser = args::named_run)]
    pub compare: Vec<NamedRun>,
    /// Output HTML file
    #[arg(long)]
    pub html: PathBuf,
    /// Also write the main run's timeline for Perfetto or chrome://tracing (as `ddscope latency --timeline`)
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
    /// Name of the main run (default: its directory name)
    #[arg(long)]
    pub name: Option<String>,
    /// Report title
    #[arg(long, default_value = "ddscope latency report")]
    pub title: String,
    /// Only topics matching (glob, repeatable)
    #[arg(long = "topic")]
    pub topics: Vec<String>,
    /// Only topics of this DDS domain
    #[arg(long, value_parser = crate::args::domain)]
    pub domain: Option<u32>,
    /// Clock offsets, as for `ddscope latency` (apply to every run)
    #[arg(long = "offset", value_name = "NAME=±DURATION", value_parser = args::offset)]
    pub offsets: Vec<Offset>,
    /// Estimating each capture's clock offset (and the sender of each writer) from the traffic's two directions is the default; kept for scripts
    #[arg(long, hide = true, conflicts_with = "no_estimate")]
    pub estimate_offset: bool,
    /// Do not estimate the clock offsets from the traffic (then the captures' clocks are taken as synchronised, or as --offset says, unchecked, and each writer's sender is the capture that saw its samples first)
    #[arg(long)]
    pub no_estimate: bool,
    #[command(flatten)]
    pub window: args::WindowArg,
    /// ros2_tracing (or CARET) trace of a host of the main run: HOST=DIR, or DIR alone without captures (run directories' HOST.lttng/ are found automatically)
    #[arg(long = "trace", value_name = "HOST=DIR", value_parser = args::trace)]
    pub traces: Vec<TraceArg>,
    /// A chain of topics to show end to end, stacked per hop (needs traces): /raw_image,/image,/actuator, or a CARET architecture file's path (architecture.yaml[:PATH_NAME])
    #[arg(long, value_name = "TOPICS|FILE.yaml[:PATH]", value_parser = args::path)]
    pub path: Option<PathArg>,
    /// Latency budget of the topics matching TOPIC (as for `ddscope latency`); the incidents section shows what broke it
    #[arg(long = "budget", value_name = "TOPIC=DURATION|period|pNN", value_parser = args::budget)]
    pub budgets: Vec<BudgetArg>,
    /// The capture points' link rate the incidents' link-queueing evidence is judged against (as for `ddscope latency`)
    #[arg(long, value_name = "RATE")]
    pub link_rate: Option<ddscope_traffic::units::Rate>,
    /// Per-process CPU time of a host (as for `ddscope latency`), the incidents' CPU-contention evidence; default: a lab run's load.csv
    #[arg(long = "load", value_name = "HOST=FILE", value_parser = args::trace)]
    pub load: Vec<TraceArg>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

const MAX_POINTS: usize = 3000;
/// Payload bytes are gathered in 10 ms bins of capture time, then summed into
/// the chart's bins ([`chart_bin_ns`]) counted from the run's first frame.
const FINE_BIN_NS: i64 = 10_000_000;
/// About this many bins per chart, whatever the run's length.
const CHART_BINS: i64 = 100;

/// Bin width for a run of `duration_ns`: about [`CHART_BINS`] bins, rounded up to
/// 1, 2 or 5 × 10^k ms (10 ms at least, so that short captures get many bins too).
fn chart_bin_ns(duration_ns: i64) -> i64 {
    let want = (duration_ns / CHART_BINS).max(FINE_BIN_NS);
    let mut step = FINE_BIN_NS;
    loop {
        for m in [1, 2, 5] {
            if step * m >= want {
                return step * m;
            }
        }
        step *= 10;
    }
}

/// Bins (start ns, bytes) as a step line in Mbit/s: each bin drawn flat over
/// its width (x in seconds since `start_ns`, never negative). `bins` maps bin
/// start times (ns, any grid) to bytes; each bin is attributed to the chart bin
/// its start falls in (bins starting before `start_ns` to the first), and empty
/// chart bins between the first and the last are drawn at zero.
fn step_series(bins: &BTreeMap<i64, u64>, start_ns: i64, width_ns: i64) -> Vec<Value> {
    let mut per: BTreeMap<i64, u64> = BTreeMap::new();
    for (&t, &b) in bins {
        *per.entry((t - start_ns).max(0) / width_ns).or_default() += b;
    }
    let (Some(&first), Some(&last)) = (per.keys().next(), per.keys().next_back()) else { return vec![] };
    let mut out = Vec::with_capacity(2 * (last - first + 1) as usize);
    for i in first..=last {
        let mbps = per.get(&i).copied().unwrap_or(0) as f64 * 8.0 / 1e6 / (width_ns as f64 / 1e9);
        let (x0, x1) = ((i * width_ns) as f64 / 1e9, ((i + 1) * width_ns) as f64 / 1e9);
        out.push(json!([x0, mbps]));
        out.push(json!([x1, mbps]));
    }
    out
}

/// Deterministic reservoir of points per flow (uniform over the run).
struct Reservoir {
    seen: u64,
    rng: u64,
    points: Vec<(i64, f64, f64)>,
}

impl Reservoir {
    fn new() -> Self {
        Reservoir { seen: 0, rng: 0x9e37_79b9_7f4a_7c15, points: Vec::new() }
    }
    fn push(&mut self, p: (i64, f64, f64)) {
        self.seen += 1;
        if self.points.len() < MAX_POINTS {
            self.points.push(p);
            return;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let j = self.rng % self.seen;
        if (j as usize) < MAX_POINTS {
            self.points[j as usize] = p;
        }
    }
}

struct RunData {
    name: String,
    doc: Value,
    start_ns: i64,
    flows: BTreeMap<FlowId, Value>,
}

/// A flow in the report: topic, DDS domain, sender, receiver.
type FlowId = (String, Option<u32>, String, String);

/// What a run's latency rows (messages of the selected topics) add to the report:
/// points over time per flow, payload bytes and sample times per flow, incidents.
struct RunRows {
    explainer: ddscope_core::latency::explain::Explainer,
    series: BTreeMap<FlowId, Reservoir>,
    ros_series: BTreeMap<FlowId, Reservoir>,
    first_row_ns: i64,
    payload: BTreeMap<FlowId, BTreeMap<i64, u64>>,
    last: Option<(ddscope_wire::Guid, i64, String)>,
    /// Per flow and writer: its samples' times at the sender, for the rate (ddscope_core::rate).
    times: BTreeMap<FlowId, BTreeMap<ddscope_wire::Guid, SampleTimes>>,
}

impl RowSink<LatencyRow> for RunRows {
    fn row(&mut self, r: &LatencyRow) {
        if r.level != Level::Message {
            return;
        }
        let topic = r.topic.as_ref().map(|t| t.topic_name.clone()).unwrap_or_else(|| format!("writer {}", r.writer_id));
        let domain = r.topic.as_ref().and_then(|t| t.domain);
        self.explainer.add(r);
        let key = (topic, domain, r.sender.to_string(), r.receiver.to_string());
        self.first_row_ns = self.first_row_ns.min(r.sender_first_ts_ns);
        if let Some(e) = r.ros.as_ref().and_then(|x| x.ros_e2e_ns) {
            self.ros_series.entry(key.clone()).or_insert_with(Reservoir::new).push((r.sender_first_ts_ns, e as f64 / 1e6, r.sample_size.unwrap_or(0) as f64));
        }
        if let Some(l) = r.latency_ns {
            self.series.entry(key.clone()).or_insert_with(Reservoir::new).push((
                r.sender_first_ts_ns,
                l as f64 / 1e6,
                r.sample_size.unwrap_or(0) as f64,
            ));
        }
        // Payload bandwidth counts each sample once per flow.
        let id = (r.writer_id, r.sn, r.receiver.to_string());
        if self.last.as_ref() != Some(&id) {
            self.times.entry(key.clone()).or_default().entry(r.writer_id).or_default().add(r.sender_first_ts_ns);
            let bin = r.sender_first_ts_ns.div_euclid(FINE_BIN_NS) * FINE_BIN_NS;
            *self.payload.entry(key).or_default().entry(bin).or_default() += r.sample_size.unwrap_or(0) as u64;
            self.last = Some(id);
        }
    }
}

/// One run correlated into the report's data; its timeline written to `timeline` when given.
fn one_run(name: &str, inputs: &[PathBuf], given_traces: &[TraceArg], a: &ReportArgs, select: &TopicSelect, timeline: Option<&std::path::Path>) -> anyhow::Result<RunData> {
    let found = session::expand_run(inputs, &[]).map_err(common::session_error)?;
    let (captures, truth) = (found.captures, found.truth);
    let traces = common::traces(found.traces, given_traces);
    if a.path.is_some() && traces.is_empty() {
        return Err(common::usage(format!("run {name}: --path needs ros2_tracing traces: give --trace HOST=DIR (or a run directory with HOST.lttng/)")));
    }
    let mut opts = LatencyOptions {
        offsets: a.offsets.iter().map(|o| (o.name.clone(), o.ns)).collect(),
        estimate_offset: !a.no_estimate,
        window_ns: a.window.window.ns(),
        path: match &a.path {
            Some(PathArg::Topics(t)) => Some(t.clone()),
            _ => None,
        },
        ..LatencyOptions::default()
    };
    let limits = a.limits.resolve()?;
    super::limit_args::apply(&limits, &mut opts);
    let link_rate = super::latency::link_rate(a.link_rate, inputs);
    // A lab run's load.csv, read once: the CPU charts and the incidents' CPU-contention evidence.
    let lab_load = match inputs {
        [dir] if dir.join(ddscope_lab::run::LOAD_FILE).is_file() => {
            let path = dir.join(ddscope_lab::run::LOAD_FILE);
            Some((ddscope_traffic::fsio::read_bounded_text(&path, ddscope_traffic::fsio::MAX_LOAD_BYTES, "load file")?, path))
        }
        _ => None,
    };
    let cpu_load = if a.budgets.is_empty() { None } else { super::latency::cpu_load(&a.load, inputs, &limits, lab_load.as_ref().map(|(t, _)| t.as_str()))? };
    // The link timelines for the incidents' queueing evidence: with budgets, when the section is shown.
    if !a.budgets.is_empty() {
        opts.link_load = Some(ddscope_core::pipeline::LinkLoadConfig { max_bins: limits.explain.max_link_bins, ..Default::default() });
    }
    let rows = RunRows {
        // Incidents and their verdicts (as `latency --explain`).
        explainer: ddscope_core::latency::explain::Explainer::new(ddscope_core::latency::explain::ExplainOptions {
            budgets: a.budgets.iter().map(|b| ddscope_core::latency::explain::Budget::with_limit(&b.topic, b.limit).expect("checked when parsed")).collect(),
            max_samples: limits.explain.max_samples,
            max_flows: limits.explain.max_flows,
            link_rate_bps: link_rate.map(|r| r.0),
            link_rate_from: link_rate.map_or("", |r| r.1),
            ..Default::default()
        }),
        series: BTreeMap::new(),
        ros_series: BTreeMap::new(),
        first_row_ns: i64::MAX,
        payload: BTreeMap::new(),
        last: None,
        times: BTreeMap::new(),
    };
    let mut all_inputs: Vec<PathBuf> = inputs.to_vec();
    all_inputs.extend(captures.iter().map(|c| c.path.clone()));
    all_inputs.extend(traces.iter().map(|t| t.path.clone()));
    let mut rows = Select { topics: select.clone(), next: (timeline.map(|_| ddscope_core::timeline::Timeline::new(limits.timeline)), rows) };
    let mut run = common::run_session("report", captures, &truth, traces, &opts, &mut rows, &mut |_: ChainRow| {})?;
    let (drawn, rows) = rows.next;
    if let (Some(t), Some(path)) = (&drawn, timeline) {
        common::write_timeline("report", t, path, &all_inputs)?;
    }
    let RunRows { mut explainer, mut series, mut ros_series, first_row_ns, mut payload, mut times, .. } = rows;
    common::print_trace_lines("report", &run);
    common::print_clock_lines("report", &run);
    common::print_clock_tracking_lines("report", &run);
    session::check_correlated(&run).map_err(common::session_error).with_context(|| format!("run {name}"))?;
    // Traces alone: the time axis starts at the first joined sample.
    let start_ns = run.outcomes.iter().filter_map(|o| o.summary.first_ts_ns).min().unwrap_or(if first_row_ns == i64::MAX { 0 } else { first_row_ns });
    let end_ns = run.outcomes.iter().filter_map(|o| o.summary.last_ts_ns).max().unwrap_or(start_ns);
    let bin_ns = chart_bin_ns(end_ns.saturating_sub(start_ns));
    let rel = |t: i64| (t - start_ns) as f64 / 1e9;
    let mut flows = BTreeMap::new();
    // Flows joined trace to trace are judged in time / late against their topic's period in the traces.
    for (s, (key, f)) in ddscope_core::ros2::timing::summaries(&run.correlator, None).into_iter().zip(run.correlator.flows()) {
        if !select.keeps(&s) {
            continue;
        }
        let names = &run.correlator.capture_names();
        let k = (key.0.clone(), key.1, names[key.2].to_string(), names[key.3].to_string());
        let mut pts = series.remove(&k).map(|r| r.points).unwrap_or_default();
        pts.sort_by_key(|p| p.0);
        let mut rpts = ros_series.remove(&k).map(|r| r.points).unwrap_or_default();
        rpts.sort_by_key(|p| p.0);
        let boxes: serde_json::Map<String, Value> =
            f.layers.iter().filter(|(_, d)| d.count() > 0).map(|(l, d)| (l.to_string(), json!(d.box_stats()))).collect();
        let pb = step_series(&payload.remove(&k).unwrap_or_default(), start_ns, bin_ns);
        let rate = TopicRate::of(times.remove(&k).unwrap_or_default().values(), Some(end_ns));
        // A flow joined trace to trace whose period is unknown: neither in time nor late (empty cells).
        let mut summary = serde_json::to_value(&s)?;
        if !ddscope_core::ros2::timing::timing_known(&s) {
            summary["in_time"] = json!("");
            summary["late"] = json!("");
        }
        flows.insert(
            k,
            json!({
                "summary": summary,
                "stack": s.ros_stack(),
                "boxes": boxes,
                "cdf": f.layers.get(&ddscope_core::latency::Layer::Message).map(|d| d.cdf(200)).unwrap_or_default(),
                "series": pts.iter().map(|p| json!([rel(p.0), p.1])).collect::<Vec<_>>(),
                "ros_series": rpts.iter().map(|p| json!([rel(p.0), p.1])).collect::<Vec<_>>(),
                "sizes": pts.iter().map(|p| json!([rel(p.0), p.2])).collect::<Vec<_>>(),
                "payload_bandwidth": pb,
                "rate": {"hz": rate.hz, "kind": rate.kind.map(|k| k.as_str())},
            }),
        );
    }
    // Chains (with traces): the ones found, and the measured one (--path) stacked per hop.
    let chains = run.correlator.chains().map(|c| {
        let measured = c.summary().zip(c.boxes()).map(|(s, (e2e_box, hop_boxes))| {
            json!({
                "path": s.path,
                "instances": s.instances,
                "incomplete": s.incomplete,
                "inputs": s.inputs,
                "inputs_complete": s.inputs_complete,
                "dropped": s.dropped,
                "unfinished": s.unfinished,
                "dropped_at": s.dropped_at,
                "e2e": s.e2e,
                "e2e_box": e2e_box,
                "stack": s.stack(),
                "hops": s.hops.iter().zip(hop_boxes).map(|(h, b)| json!({
                    "hop": h.hop, "topic": h.topic, "routes": h.routes, "levels": h.levels, "layers": h.layers,
                    "boxes": b.iter().map(|(l, bs)| (l.as_str().to_string(), json!(bs))).collect::<serde_json::Map<String, Value>>(),
                })).collect::<Vec<_>>(),
            })
        });
        json!({"paths": c.paths(), "measured": measured, "stats": c.stats})
    });
    let udp_flows = if run.captures.is_empty() {
        Value::Null
    } else {
        super::flows::report_section(inputs, &a.offsets, a.window.window.ns(), &a.limits.resolve()?, start_ns).with_context(|| format!("run {name}: UDP flows"))?
    };
    let load = match &lab_load {
        Some((text, path)) => Some(load_series(text, path, start_ns, &super::latency::lab_process_hosts(&inputs[0]))?),
        None => None,
    };
    for (c, o) in run.captures.iter().zip(run.outcomes.iter_mut()) {
        if let Some(l) = o.link.take() {
            explainer.add_link(&c.name, l);
        }
    }
    if let Some(l) = cpu_load {
        explainer.add_cpu_load(l);
    }
    let x = explainer.finish();
    if let Some(l) = x.cpu_load.as_ref().and_then(super::latency::cpu_load_problem) {
        eprintln!("report: run {name}: warning: {l}");
    }
    // The timeline: every incident's time and excess, one series per cause (capped like the latency series).
    let mut by: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for i in x.incidents.iter().take(MAX_POINTS * 4) {
        by.entry(i.cause.name()).or_default().push(json!([rel(i.sender_first_ts_ns), i.excess_ns() as f64 / 1e6]));
    }
    let timeline: Vec<Value> = by.into_iter().map(|(c, p)| json!({"name": c, "points": p})).collect();
    let incidents = json!({
        "summary": x.summary_line(),
        "budget_broken": x.budget_broken,
        "by_cause": x.by_cause,
        "worst": x.worst(25).into_iter().map(|i| json!({
            "t_s": rel(i.sender_first_ts_ns), "topic": i.topic, "sender": i.sender, "receiver": i.receiver, "sn": i.sn,
            "kinds": i.kinds.iter().map(|k| ddscope_core::latency::explain::kind_name(*k)).collect::<Vec<_>>(),
            "e2e_ms": i.e2e_ns.map(|v| v as f64 / 1e6), "measure": i.e2e_measure, "typical_ms": i.typical_e2e_ns.map(|v| v as f64 / 1e6),
            "layer": i.layer.map(|l| l.name()), "cause": i.cause.name(), "evidence": i.evidence,
        })).collect::<Vec<_>>(),
        "timeline": timeline,
    });
    eprintln!("report: run {name}: incidents: {}", x.summary_line());
    // The measured chain's inputs that did not reach its end, shown with the run's notes.
    let mut warnings = run.correlator.warnings();
    if let Some(s) = run.correlator.chains().and_then(|c| c.summary()) {
        let t = super::latency::inputs_text(&s);
        if s.dropped + s.unfinished > 0 {
            let line = format!("chain {}: {} instances{t}", s.path.join(" → "), s.instances);
            eprintln!("report: run {name}: {line}");
            warnings.push(line);
        }
    }
    let doc = json!({
        "name": name,
        "incidents": incidents,
        "udp_flows": udp_flows,
        "load": load,
        "chains": chains,
        "callbacks": run.correlator.callbacks().map(|c| c.rows(run.correlator.capture_names())),
        "publishes_per_callback": run.correlator.callbacks().map(|c| c.publish_rows(run.correlator.capture_names())),
        "traces": run.traces,
        "inputs": inputs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "captures": run.captures.iter().zip(&run.outcomes).zip(&run.offsets_ns).map(|((c, o), off)| json!({
            "name": c.name, "path": c.path.display().to_string(), "frames": o.summary.frames,
            "rtps_messages": o.decode.rtps_messages, "skipped": o.decode.summary_line(), "offset_ns": off,
        })).collect::<Vec<_>>(),
        "warnings": warnings,
        "bandwidth": run.captures.iter().zip(&run.outcomes).map(|(c, o)| json!({
            "capture": c.name,
            "points": step_series(&o.bandwidth.iter().map(|b| (b.start_ns, b.bytes)).fold(BTreeMap::new(), |mut m, (t, b)| {
                *m.entry(t).or_default() += b;
                m
            }), start_ns, bin_ns.max(ddscope_core::pipeline::BANDWIDTH_BIN_NS)),
        })).collect::<Vec<_>>(),
    });
    Ok(RunData { name: name.to_string(), doc, start_ns, flows })
}

/// Processes drawn from a lab run's load.csv (the busiest by CPU time); the rest are counted.
const MAX_LOAD_PROCESSES: usize = 12;

/// A lab run's per-process load (load.csv) as chart series on the report's time axis:
/// CPU % (user + system), RSS (MiB) and context switches per second, per process; and the CPU of
/// each host (`host_of` a process; `other` where none is known), its processes' summed per reading.
fn load_series(text: &str, path: &std::path::Path, start_ns: i64, host_of: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<Value> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or("");
    if header != ddscope_lab::procs::LOAD_CSV_HEADER && header != ddscope_lab::procs::LOAD_CSV_HEADER_V1 {
        return Err(common::input(format!("{}: line 1: not a load.csv header ({header:?})", path.display())));
    }
    let columns = header.split(',').count();
    // (process, pid) -> rows (t_ns, cpu_s, rss_bytes, ctx)
    let mut by: BTreeMap<(String, i64), Vec<(i64, f64, f64, f64)>> = BTreeMap::new();
    // A line that cannot be read is skipped, counted and the first named (the charts keep the rest).
    let (mut bad_lines, mut first_bad) = (0u64, None);
    for (i, l) in lines.enumerate() {
        let f: Vec<&str> = l.split(',').collect();
        let parsed = (|| {
            if f.len() != columns {
                return None;
            }
            let n = |k: usize| f[k].parse::<f64>().ok().filter(|v| v.is_finite());
            Some((f[0].parse::<i64>().ok()?, f[2].parse::<i64>().ok()?, n(3)? + n(4)?, n(5)?, n(6)? + n(7)?))
        })();
        match parsed {
            Some((t, pid, cpu, rss, ctx)) => by.entry((f[1].to_string(), pid)).or_default().push((t, cpu, rss, ctx)),
            None => {
                bad_lines += 1;
                first_bad.get_or_insert_with(|| format!("{}: line {}: expected {columns} columns, numeric but the process name: {l:?}", path.display(), i + 2));
            }
        }
    }
    if let Some(first) = &first_bad {
        eprintln!("report: warning: {bad_lines} line(s) of the per-process load not drawn; first: {first}");
    }
    let rel = |t: i64| (t - start_ns) as f64 / 1e9;
    // Per host: each process's CPU over each interval between its readings, summed by reading
    // (the lab reads every process once per interval: the readings of one round share a bin of the
    // median interval, at the round's last time).
    let mut intervals: Vec<i64> = by.values().flat_map(|r| r.windows(2).map(|w| w[1].0 - w[0].0)).filter(|d| *d > 0).collect();
    intervals.sort_unstable();
    let bin = intervals.get(intervals.len() / 2).copied().unwrap_or(200_000_000).max(1);
    let origin = by.values().filter_map(|r| r.first().map(|x| x.0)).min().unwrap_or(0);
    let mut hosts: BTreeMap<String, BTreeMap<i64, (i64, f64)>> = BTreeMap::new();
    for ((name, _), rows) in &by {
        let host = host_of(name).unwrap_or_else(|| "other".to_string());
        for w in rows.windows(2) {
            let dt = (w[1].0 - w[0].0) as f64 / 1e9;
            if dt > 0.0 {
                let e = hosts.entry(host.clone()).or_default().entry((w[1].0 - origin + bin / 2).div_euclid(bin)).or_insert((w[1].0, 0.0));
                e.0 = e.0.max(w[1].0);
                e.1 += (w[1].1 - w[0].1) / dt * 100.0;
            }
        }
    }
    let host_cpu: Vec<Value> =
        hosts.into_iter().map(|(h, bins)| json!({"name": h, "cpu": bins.values().map(|(t, c)| json!([rel(*t), c])).collect::<Vec<_>>()})).collect();
    let mut procs: Vec<(f64, Value)> = by
        .into_iter()
        .map(|((name, pid), rows)| {
            let total = rows.last().map(|r| r.1).unwrap_or(0.0) - rows.first().map(|r| r.1).unwrap_or(0.0);
            let mut cpu = vec![];
            let mut ctx = vec![];
            for w in rows.windows(2) {
                let dt = (w[1].0 - w[0].0) as f64 / 1e9;
                if dt > 0.0 {
                    cpu.push(json!([rel(w[1].0), (w[1].1 - w[0].1) / dt * 100.0]));
                    ctx.push(json!([rel(w[1].0), (w[1].3 - w[0].3) / dt]));
                }
            }
            let rss: Vec<Value> = rows.iter().map(|r| json!([rel(r.0), r.2 / 1048576.0])).collect();
            (total, json!({"name": format!("{name} ({pid})"), "cpu_s": total, "cpu": cpu, "rss": rss, "ctx": ctx}))
        })
        .collect();
    procs.sort_by(|a, b| b.0.total_cmp(&a.0));
    let not_drawn = procs.len().saturating_sub(MAX_LOAD_PROCESSES);
    procs.truncate(MAX_LOAD_PROCESSES);
    Ok(json!({"processes": procs.into_iter().map(|p| p.1).collect::<Vec<_>>(), "hosts": host_cpu, "not_drawn": not_drawn, "bad_lines": bad_lines}))
}

/// Escapes a JSON document for a <script> element.
fn script_safe(s: &str) -> String {
    s.replace("</", "<\\/").replace("<!--", "<\\!--")
}

pub fn run(a: ReportArgs) -> anyhow::Result<i32> {
    let select = common::topic_select(&a.topics, a.domain)?;
    let mut inputs: Vec<PathBuf> = a.inputs.clone();
    inputs.extend(a.compare.iter().map(|c| c.dir.clone()));
    common::check_writable(&a.html, &inputs)?;
    if let Some(t) = &a.timeline {
        common::check_writable(t, &inputs)?;
        if t == &a.html {
            return Err(common::usage(format!("--timeline and --html name the same file ({})", t.display())));
        }
    }
    let main_name = a.name.clone().unwrap_or_else(|| match a.inputs.as_slice() {
        [one] if one.is_dir() => one.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "run".into()),
        [one] => capture_name(one),
        [] if a.traces.len() == 1 => a.traces[0].host.clone(),
        _ => "run".into(),
    });
    let mut runs = vec![one_run(&main_name, &a.inputs, &a.traces, &a, &select, a.timeline.as_deref())?];
    for c in &a.compare {
        if runs.iter().any(|r| r.name == c.name) {
            return Err(common::usage(format!("--compare {}={}: run name {:?} is used twice", c.name, c.dir.display(), c.name)));
        }
        runs.push(one_run(&c.name, std::slice::from_ref(&c.dir), &[], &a, &select, None)?);
    }
    // Topics across runs, each with its flows per run.
    // A topic of several domains is one section per domain ("/chatter (domain 5)").
    let mut domains_of: BTreeMap<&str, std::collections::BTreeSet<Option<u32>>> = BTreeMap::new();
    for r in &runs {
        for (topic, domain, _, _) in r.flows.keys() {
            domains_of.entry(topic.as_str()).or_default().insert(*domain);
        }
    }
    let mut topics: BTreeMap<String, BTreeMap<String, Vec<Value>>> = BTreeMap::new();
    for r in &runs {
        for ((topic, domain, _, _), v) in &r.flows {
            let label = match domain {
                Some(d) if domains_of.get(topic.as_str()).is_some_and(|s| s.len() > 1) => format!("{topic} (domain {d})"),
                _ => topic.clone(),
            };
            topics.entry(label).or_default().entry(r.name.clone()).or_default().push(v.clone());
        }
    }
    let doc = json!({
        "title": a.title,
        "generated_by": format!("ddscope {}", env!("CARGO_PKG_VERSION")),
        "runs": runs.iter().map(|r| r.doc.clone()).collect::<Vec<_>>(),
        "run_starts_ns": runs.iter().map(|r| r.start_ns).collect::<Vec<_>>(),
        "topics": topics.into_iter().map(|(t, per_run)| json!({"topic": t, "runs": per_run})).collect::<Vec<_>>(),
    });
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>{css}</style></head>\n\
         <body><header><h1>{title}</h1><p>{gen} — runs: {runs}</p></header><main></main>\n\
         <script>window.DDSCOPE_REPORT = {data};</script>\n<script>{charts}</script>\n<script>{report}</script>\n</body></html>\n",
        title = html_escape(&a.title),
        css = include_str!("../../assets/report.css"),
        gen = html_escape(&format!("generated by ddscope {}", env!("CARGO_PKG_VERSION"))),
        runs = html_escape(&runs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", ")),
        data = script_safe(&serde_json::to_string(&doc)?),
        charts = ddscope_monitor::server::assets::CHARTS_JS,
        report = include_str!("../../assets/report.js"),
    );
    common::write_file(&a.html, html.as_bytes(), &inputs)?;
    let n_topics = doc["topics"].as_array().map_or(0, |t| t.len());
    eprintln!("report: wrote {} ({} runs, {} topics)", a.html.display(), runs.len(), n_topics);
    Ok(0)
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
