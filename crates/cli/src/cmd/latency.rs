//! `ddscope latency`: the same DDS sample at the sender's and the receivers'
//! capture points — message, submessage and application latency, loss,
//! retransmission, jitter, clock offsets.

use crate::args::{self, Offset, Period};
use crate::common::{self, OutFormat, TopicFilter};
use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use ddscope_core::latency::{FlowSummary, LatencyRow, LayerRow};
use ddscope_core::output::{Format, RecordWriter};
use ddscope_core::session::{self, LatencyOptions};
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
    #[arg(long = "offset", value_name = "NAME=±DURATION", value_parser = args::offset)]
    pub offsets: Vec<Offset>,
    /// Estimate each capture's offset against the first from traffic in both directions
    #[arg(long)]
    pub estimate_offset: bool,
    /// Publication period for in time / late: auto (median interval per writer) or a duration
    #[arg(long, default_value = "auto", value_parser = args::period)]
    pub period: Period,
    /// How long after a sample was sent it is judged (and called lost if not complete); 1ms to 1h
    #[arg(long, default_value = "5s", value_parser = args::window_ns)]
    pub window: i64,
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
    let filter = TopicFilter::new(&a.topics)?;
    let (captures, truth) = session::expand_inputs(&a.inputs, &a.truth).map_err(common::session_error)?;
    let mut inputs: Vec<PathBuf> = a.inputs.clone();
    inputs.extend(captures.iter().map(|c| c.path.clone()));
    inputs.extend(truth.iter().cloned());
    let row_format = matches!(a.format, OutFormat::Csv | OutFormat::Jsonl | OutFormat::Parquet);
    if let Some(o) = &a.output {
        common::check_not_input(o, &inputs)?;
    }
    let mut outputs: Vec<common::Output> = vec![];
    let mut main_rows: Option<RecordWriter<LatencyRow>> = if row_format {
        let (w, o) = common::open_output(a.output.as_deref(), a.format, &inputs)?;
        outputs.push(o);
        Some(RecordWriter::new(a.format.into(), w, &[])?)
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
            let (w, o) = common::open_output(Some(p), f, &inputs)?;
            outputs.push(o);
            Some(RecordWriter::new(Format::from(f), w, &[])?)
        }
        None => None,
    };
    let opts = options(&a.offsets, a.estimate_offset, a.period, a.window, a.level);
    let mut io_err: Option<std::io::Error> = None;
    let run = common::run_session("latency", captures, &truth, &opts, &mut |r| {
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
    for o in outputs {
        o.commit()?;
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
    session::check_correlated(&run).map_err(common::session_error)?;
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
            "flows": flows,
            "correlation": run.correlator.stats,
            "warnings": run.correlator.warnings(),
        });
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
        out.flush()?;
        drop(out);
        output.commit()?;
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
    output.commit()?;
    Ok(0)
}
