//! `ddscope latency`: the same DDS sample at the sender's and the receivers'
//! capture points — message, submessage and application latency, loss,
//! retransmission, jitter, clock offsets.

use crate::common::{self, OutFormat, TopicFilter};
use crate::progress::Progress;
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use ddscope_core::latency::app::AppTruth;
use ddscope_core::latency::files::{correlate_files, estimate_offsets, CaptureInput, CaptureOutcome};
use ddscope_core::latency::offset::OffsetEstimate;
use ddscope_core::latency::{Correlator, CorrelatorConfig, FlowSummary, LatencyRow, LayerRow};
use ddscope_core::output::{Format, RecordWriter};
use ddscope_traffic::units::{parse_signed_nanos, Nanos};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LevelArg {
    Message,
    Submessage,
    Both,
}

#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Inputs are capture files (pcap/pcapng, optionally .gz) or lab run directories
(their HOST.pcapng[.gz] captures and HOST.truth.jsonl ground truth). Each
capture point is named after its file (pc1.pcapng -> pc1). For every writer the
capture that sees its samples first is the sender; every other capture that
sees the writer is a receiver (unicast and multicast alike).

Layers: message = first DATA/DATA_FRAG at the sender -> sample complete at the
receiver (thesis 3.2.5); first_first, last_last; submessage = per DATA_FRAG,
first IP fragment at the sender -> last IP fragment at the receiver;
application = publish -> receive (needs ground truth), split into sender_stack
(publish -> first on wire) and receiver_stack (last on wire -> receive).

Examples:
  ddscope latency pc1.pcapng pc2.pcapng
  ddscope latency out/run1 --topic /image --level both --rows image.parquet
  ddscope latency pc1.pcapng pc2.pcapng --offset pc2=+37s      # pc2 is TAI, pc1 UTC
  ddscope latency pc1.pcapng pc2.pcapng --estimate-offset
  ddscope latency pc1.pcapng pc2.pcapng --format csv -o rows.csv")]
pub struct LatencyArgs {
    /// Capture files or lab run directories (two or more capture points)
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Only topics matching (ROS 2 or DDS name; glob, repeatable)
    #[arg(long = "topic")]
    pub topics: Vec<String>,
    /// Which per-sample rows to write: message, submessage or both
    #[arg(long, value_enum, default_value = "message")]
    pub level: LevelArg,
    /// Clock offset t_o of a capture point (seed 004 Eq. 9), subtracted from its timestamps: pc2=+37s
    #[arg(long = "offset", value_name = "NAME=±DURATION")]
    pub offsets: Vec<String>,
    /// Estimate each capture's offset against the first from traffic in both directions
    #[arg(long)]
    pub estimate_offset: bool,
    /// Publication period for in time / late: auto (median interval per writer) or a duration
    #[arg(long, default_value = "auto")]
    pub period: String,
    /// How long after a sample was sent it is judged (and called lost if not complete)
    #[arg(long, default_value = "5s")]
    pub window: String,
    /// Ground-truth files (lab JSONL) besides those found in run directories
    #[arg(long = "truth")]
    pub truth: Vec<PathBuf>,
    /// table/json: summary; csv/jsonl/parquet: per-sample rows
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutFormat,
    /// Output file (default: stdout)
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Also write per-sample rows here (.csv, .jsonl or .parquet)
    #[arg(long)]
    pub rows: Option<PathBuf>,
}

/// Expands run directories into captures and ground-truth files.
pub fn expand_inputs(inputs: &[PathBuf], extra_truth: &[PathBuf]) -> anyhow::Result<(Vec<CaptureInput>, Vec<PathBuf>)> {
    let mut caps = vec![];
    let mut truth: Vec<PathBuf> = extra_truth.to_vec();
    for p in inputs {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("cannot read {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            entries.sort();
            let before = caps.len();
            for e in entries {
                let n = e.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
                if n.ends_with(".pcapng") || n.ends_with(".pcapng.gz") || n.ends_with(".pcap") || n.ends_with(".pcap.gz") {
                    caps.push(CaptureInput { name: common::capture_name(&e), path: e });
                } else if n.ends_with(".truth.jsonl") {
                    truth.push(e);
                }
            }
            if caps.len() == before {
                return Err(anyhow::Error::new(common::ExitError {
                    code: 2,
                    message: format!("{}: no capture files (*.pcapng, *.pcapng.gz, *.pcap) in this directory", p.display()),
                }));
            }
        } else {
            if !p.exists() {
                return Err(anyhow::Error::new(common::ExitError { code: 2, message: format!("cannot open {}: no such file", p.display()) }));
            }
            caps.push(CaptureInput { name: common::capture_name(p), path: p.clone() });
        }
    }
    Ok((caps, truth))
}

/// Everything a latency run produced (also used by `ddscope report`).
pub struct LatencyRun {
    pub correlator: Correlator,
    pub outcomes: Vec<CaptureOutcome>,
    pub estimates: Vec<(String, Result<OffsetEstimate, String>)>,
    pub offsets_ns: Vec<i64>,
    pub captures: Vec<CaptureInput>,
    pub truth: Arc<AppTruth>,
}

pub struct RunOptions {
    pub offsets: Vec<String>,
    pub estimate_offset: bool,
    pub period: String,
    pub window: String,
    pub message_rows: bool,
    pub submessage_rows: bool,
}

pub fn run_latency(
    captures: Vec<CaptureInput>,
    truth_files: &[PathBuf],
    o: &RunOptions,
    out: &mut dyn FnMut(LatencyRow),
) -> anyhow::Result<LatencyRun> {
    if captures.len() < 2 {
        bail!(
            "latency needs two or more capture points (one at the sender, one per receiver); got {}: {}",
            captures.len(),
            captures.iter().map(|c| c.path.display().to_string()).collect::<Vec<_>>().join(", ")
        );
    }
    // The same file twice, or two names for one capture point.
    for i in 0..captures.len() {
        for j in i + 1..captures.len() {
            let (a, b) = (&captures[i], &captures[j]);
            if same_file(&a.path, &b.path) {
                bail!("{} and {} are the same file: give each capture point once", a.path.display(), b.path.display());
            }
            if a.name == b.name {
                bail!("two captures are both named {:?} ({} and {}): rename one (names come from file names)", a.name, a.path.display(), b.path.display());
            }
        }
    }
    let window = o.window.parse::<Nanos>().map_err(|e| anyhow::anyhow!("--window: {e}"))?.0 as i64;
    let period = match o.period.as_str() {
        "auto" => None,
        p => Some(p.parse::<Nanos>().map_err(|e| anyhow::anyhow!("--period: {e}"))?.0 as i64),
    };
    let mut offsets = vec![0i64; captures.len()];
    let mut estimates = vec![];
    if o.estimate_offset {
        let est = estimate_offsets(&captures, 30_000_000_000, 500_000).map_err(common::input_error)?;
        for (i, e) in est.into_iter().enumerate() {
            let name = captures[i + 1].name.clone();
            match &e {
                Ok(e) => offsets[i + 1] = e.offset_ns,
                Err(err) => eprintln!("latency: cannot estimate the offset of {name} against {}: {err}; assuming 0", captures[0].name),
            }
            estimates.push((name, e.map_err(|x| x.to_string())));
        }
    }
    for spec in &o.offsets {
        let (name, dur) = spec
            .split_once('=')
            .with_context(|| format!("--offset {spec:?}: write NAME=±DURATION, e.g. pc2=+37s"))?;
        let idx = captures
            .iter()
            .position(|c| c.name == name)
            .with_context(|| format!("--offset {spec:?}: no capture point named {name:?} (have {})", names(&captures)))?;
        offsets[idx] = parse_signed_nanos(dur).map_err(|e| anyhow::anyhow!("--offset {spec:?}: {e}"))?;
    }
    let mut truth = AppTruth::default();
    for t in truth_files {
        truth.load(t)?;
    }
    let truth = Arc::new(truth);
    let cfg = CorrelatorConfig {
        captures: captures.iter().map(|c| c.name.clone()).collect(),
        offsets_ns: offsets.clone(),
        window_ns: window,
        period_ns: period,
        message_rows: o.message_rows,
        submessage_rows: o.submessage_rows,
        ..Default::default()
    };
    let mut correlator = Correlator::new(cfg, truth.clone());
    let progress: Vec<Progress> = captures.iter().map(|c| Progress::start(&c.name, common::file_size(&c.path))).collect();
    let counters: Vec<_> = progress.iter().map(|p| p.counter.clone()).collect();
    let outcomes = correlate_files(&captures, &mut correlator, &counters, out);
    for p in progress {
        p.finish();
    }
    let outcomes = outcomes.map_err(common::input_error)?;
    Ok(LatencyRun { correlator, outcomes, estimates, offsets_ns: offsets, captures, truth })
}

fn names(c: &[CaptureInput]) -> String {
    c.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Checks that the run found something to correlate; explains why not.
pub fn check_correlated(run: &LatencyRun) -> anyhow::Result<()> {
    if run.correlator.flows().is_empty() {
        let roles = run.correlator.writer_roles();
        let mut per_capture = String::new();
        for (i, c) in run.captures.iter().enumerate() {
            let n = run.outcomes[i].decode.rtps_messages;
            per_capture.push_str(&format!(" {} ({} RTPS messages);", c.name, n));
        }
        bail!(
            "no writer's samples were seen at two capture points, so nothing can be correlated ({} writers in all;{}): \
             are these captures of the same system at the same time, on both ends of the link?",
            roles.len(),
            per_capture.trim_end_matches(';')
        );
    }
    // All message latencies exactly zero: two captures of one point.
    for f in run.correlator.summaries() {
        if let Some((_, m)) = f.layers.iter().find(|(l, _)| l == "message") {
            if m.count >= 3 && m.min_ms == 0.0 && m.max_ms == 0.0 {
                bail!(
                    "{} and {} saw every sample of {} at exactly the same instants: they look like two copies of one capture point, not sender and receiver",
                    f.sender,
                    f.receiver,
                    f.topic
                );
            }
        }
    }
    Ok(())
}

pub fn run(a: LatencyArgs) -> anyhow::Result<i32> {
    let filter = TopicFilter::new(&a.topics)?;
    let (captures, truth) = expand_inputs(&a.inputs, &a.truth)?;
    let row_format = matches!(a.format, OutFormat::Csv | OutFormat::Jsonl | OutFormat::Parquet);
    let mut main_rows: Option<RecordWriter<LatencyRow>> = if row_format {
        Some(RecordWriter::new(a.format.into(), common::open_output(a.output.as_deref(), a.format)?, &[])?)
    } else {
        None
    };
    let mut extra_rows: Option<RecordWriter<LatencyRow>> = match &a.rows {
        Some(p) => {
            let f = match p.extension().and_then(|e| e.to_str()) {
                Some("parquet") => OutFormat::Parquet,
                Some("jsonl") => OutFormat::Jsonl,
                Some("csv") => OutFormat::Csv,
                _ => bail!("--rows {}: use a .csv, .jsonl or .parquet file name", p.display()),
            };
            Some(RecordWriter::new(Format::from(f), common::open_output(Some(p), f)?, &[])?)
        }
        None => None,
    };
    let opts = RunOptions {
        offsets: a.offsets.clone(),
        estimate_offset: a.estimate_offset,
        period: a.period.clone(),
        window: a.window.clone(),
        message_rows: a.level != LevelArg::Submessage,
        submessage_rows: a.level != LevelArg::Message,
    };
    let mut io_err: Option<std::io::Error> = None;
    let run = run_latency(captures, &truth, &opts, &mut |r| {
        if filter.is_active() && !filter.matches(r.topic.as_deref()) {
            return;
        }
        for w in [main_rows.as_mut(), extra_rows.as_mut()].into_iter().flatten() {
            if let Err(e) = w.write(&r) {
                io_err.get_or_insert(e);
            }
        }
    })?;
    if let Some(e) = io_err {
        return Err(e).context("writing rows");
    }
    for w in [main_rows, extra_rows].into_iter().flatten() {
        w.finish().context("writing rows")?;
    }
    for (i, c) in run.captures.iter().enumerate() {
        let o = &run.outcomes[i];
        eprintln!(
            "latency: {} = {}: {} frames, {} RTPS messages; {}",
            c.name,
            c.path.display(),
            o.summary.frames,
            o.decode.rtps_messages,
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
    for (name, e) in &run.estimates {
        if let Ok(e) = e {
            eprintln!(
                "latency: estimated offset of {name}: {:+.3} ms ± {:.3} ms from {} submessages seen both ways",
                e.offset_ns as f64 / 1e6,
                e.uncertainty_ns as f64 / 1e6,
                e.matched
            );
        }
    }
    check_correlated(&run)?;
    for w in run.correlator.warnings() {
        eprintln!("latency: warning: {w}");
    }
    let flows: Vec<FlowSummary> = run
        .correlator
        .summaries()
        .into_iter()
        .filter(|f| !filter.is_active() || f.names.as_deref().map_or(false, |n| filter.matches(Some(n))))
        .collect();
    if row_format {
        return Ok(0);
    }
    let mut out = common::open_output(a.output.as_deref(), a.format)?;
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
            "flows": flows,
            "correlation": run.correlator.stats,
            "warnings": run.correlator.warnings(),
        });
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
        out.flush()?;
        return Ok(0);
    }
    let layer_rows: Vec<LayerRow> = flows.iter().flat_map(|f| f.layer_rows()).collect();
    let mut w: RecordWriter<LayerRow> = RecordWriter::new(a.format.into(), out, &[])?;
    for r in &layer_rows {
        w.write(r)?;
    }
    let mut out = w.finish_into()?;
    writeln!(out)?;
    let mut w: RecordWriter<FlowSummary> = RecordWriter::new(Format::Table, out, &[])?;
    for f in &flows {
        w.write(f)?;
    }
    w.finish()?;
    Ok(0)
}
