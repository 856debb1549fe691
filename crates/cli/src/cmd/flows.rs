//! `ddscope flows`: one-way delay, jitter, loss, duplicates and reordering of
//! any UDP flow between capture points (Bosk et al.'s two-PCAP method, Eq. 9–10).

use super::limit_args::LimitArgs;
use crate::args::{self, Offset};
use crate::common::{self, ExitError, OutFormat};
use anyhow::Context;
use clap::Args;
use ddscope_core::flows::{self, FlowConfig, FlowError, FlowInput, FlowPacketRow, FlowStats};
use ddscope_core::output::{Format, RecordWriter};
use ddscope_core::session;
use ddscope_core::sink::RowSink;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Inputs are capture files (pcap/pcapng, optionally .gz) or lab run directories
(their HOST.pcapng[.gz] captures); each capture point is named after its file
(pc1.pcapng -> pc1). Every UDP datagram (IP fragments reassembled) is matched
across capture points by content: 5-tuple, IP identification, UDP payload
length and a CRC-32 of the payload. RTPS datagrams are left out unless --all.

Per flow (5-tuple) the capture point that saw its first packet first is the
sender; every other capture point that sees the flow is a receiver.
  delay   d(X) = t_R(X) - t_S(X) - t_o        (Bosk et al. Eq. 9)
  jitter  j(X) = d(X) - d(X-1)                (Bosk et al. Eq. 10; X-1 = the packet
          sent just before X in the flow; undefined when it was lost)
  lost: seen at the sender, not at the receiver within --window;
  reordered: reached the receiver after a packet sent after it;
  duplicates: extra copies at the receiver.
t_S/t_R are the times of the frames that complete the datagram (tshark's
frame); t_o = offset(receiver) - offset(sender), given with --offset.
Bosk et al.: Bosk, Rezabek et al., 'Methodology and Infrastructure for
TSN-Based Reproducible Network Experiments', IEEE Access, 2022.

Examples:
  ddscope flows pc1.pcapng pc2.pcapng
  ddscope flows lab-out/run1 --format csv -o packets.csv
  ddscope flows pc1.pcapng pc2.pcapng --offset pc2=+37s   # pc2 is TAI, pc1 UTC
  ddscope flows pc1.pcapng pc2.pcapng --all --rows packets.parquet")]
pub struct FlowsArgs {
    /// Capture files or lab run directories (two or more capture points)
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Clock offset t_o of a capture point (Bosk et al. Eq. 9), subtracted from its timestamps: pc2=+37s
    #[arg(long = "offset", value_name = "NAME=±DURATION", value_parser = args::offset)]
    pub offsets: Vec<Offset>,
    #[command(flatten)]
    pub window: args::WindowArg,
    /// Also measure RTPS datagrams (by default only non-RTPS UDP)
    #[arg(long)]
    pub all: bool,
    /// table/json: per-flow summary; csv/jsonl/parquet: per-packet rows
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutFormat,
    /// Output file (default: stdout)
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Also write per-packet rows here (.csv, .jsonl or .parquet)
    #[arg(long)]
    pub rows: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

fn flow_error(e: FlowError) -> anyhow::Error {
    let code = match &e {
        FlowError::Capture(c) => c.exit_code(),
        FlowError::TooFewCaptures(_) | FlowError::TooManyCaptures(_) | FlowError::SameName(..) | FlowError::SameFile(..) => common::exit::USAGE,
        FlowError::Stopped(_) => common::exit::FAILURE,
    };
    anyhow::Error::new(ExitError { code, message: e.to_string() })
}

/// The capture points of `inputs` with their offsets.
pub fn flow_inputs(inputs: &[PathBuf], offsets: &[Offset]) -> anyhow::Result<Vec<FlowInput>> {
    let found = session::expand_run(inputs, &[]).map_err(common::session_error)?;
    let mut v: Vec<FlowInput> = found.captures.into_iter().map(|c| FlowInput { name: c.name, path: c.path, offset_ns: 0 }).collect();
    for o in offsets {
        let Some(i) = v.iter_mut().find(|i| i.name == o.name) else {
            let known: Vec<&str> = v.iter().map(|i| i.name.as_str()).collect();
            return Err(common::usage(format!("--offset {}: no capture point named {:?} (have {})", o.name, o.name, known.join(", "))));
        };
        i.offset_ns = o.ns;
    }
    Ok(v)
}

/// Runs the flow analysis over `inputs`; rows go to `out`.
pub fn analyse(inputs: &[FlowInput], cfg: FlowConfig, out: &mut dyn RowSink<FlowPacketRow>) -> anyhow::Result<(flows::FlowMatcher, Vec<flows::FlowCaptureOutcome>)> {
    flows::run_files(inputs, cfg, &[], out).map_err(flow_error)
}

pub fn run(a: FlowsArgs) -> anyhow::Result<i32> {
    let inputs = flow_inputs(&a.inputs, &a.offsets)?;
    let mut paths: Vec<PathBuf> = a.inputs.clone();
    paths.extend(inputs.iter().map(|i| i.path.clone()));
    let row_format = a.format.writes_rows();
    if let Some(o) = &a.output {
        common::check_not_input(o, &paths)?;
    }
    let (mut writers, outputs) = common::row_writers::<FlowPacketRow>(a.format, a.output.as_deref(), a.rows.as_deref(), &paths)?;
    let limits = a.limits.resolve()?;
    let cfg = FlowConfig { window_ns: a.window.window.ns(), include_rtps: a.all, reassembly: limits.decoder.reassembly, ..limits.flows };
    let (m, outcomes) = analyse(&inputs, cfg, &mut writers)?;
    writers.finish().context("writing rows")?;
    for o in outputs {
        o.commit()?;
    }
    for o in &outcomes {
        // Never "nothing skipped" about a file whose end was corrupt or whose frames were skipped.
        let skipped = match (o.tap.skipped_line(), o.capture.problems()) {
            (l, Some(c)) if l == "nothing skipped" => format!("nothing else skipped (the capture file: {c})"),
            (l, Some(c)) => format!("{l} (and the capture file: {c})"),
            (l, None) => l,
        };
        eprintln!(
            "flows: {} = {}: {} frames, {} UDP datagrams, {} measured; {}",
            o.name, o.path, o.tap.frames, o.tap.udp_datagrams, o.tap.measured, skipped
        );
        if let Some(e) = &o.capture.error {
            eprintln!("flows: {}: {e} (everything before it was analysed)", o.path);
        }
    }
    if m.stats.outside_receiver_capture > 0 {
        eprintln!(
            "flows: {} datagrams were sent before a receiving capture point started or after it stopped (not counted as sent or lost)",
            m.stats.outside_receiver_capture
        );
    }
    if let Some(l) = m.stats.problem_line() {
        eprintln!("flows: evicted (caps): {l}");
    }
    let summaries: Vec<FlowStats> = m.summaries();
    let one_point = m.one_point_flows();
    if one_point > 0 {
        eprintln!("flows: {one_point} flows seen at one capture point only ({} datagrams): nothing to measure", m.stats.one_point_packets);
    }
    if summaries.is_empty() {
        let measured: u64 = outcomes.iter().map(|o| o.tap.measured).sum();
        return Err(anyhow::Error::new(ExitError {
            code: common::exit::INPUT,
            message: format!(
                "no UDP flow was seen at two capture points ({measured} datagrams measured{}): are these captures of the same traffic at the same time?",
                if a.all { "" } else { "; RTPS datagrams are left out unless --all" }
            ),
        }));
    }
    if row_format {
        return Ok(0);
    }
    let (mut out, output) = common::open_output(a.output.as_deref(), a.format, &paths)?;
    if a.format == OutFormat::Json {
        let doc = json!({
            "captures": outcomes,
            "flows": summaries.iter().map(|f| {
                let mut v = serde_json::to_value(f).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.insert("loss_pct".into(), json!(f.loss_pct()));
                    o.insert("payload_bps".into(), json!(f.payload_bps()));
                }
                v
            }).collect::<Vec<_>>(),
            "matching": m.stats,
            "one_point_flows": one_point,
        });
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
        out.flush()?;
        drop(out);
        output.commit()?;
        return Ok(0);
    }
    let mut w: RecordWriter<FlowStats> = RecordWriter::new(Format::Table, out, &[])?;
    for f in &summaries {
        w.write(f)?;
    }
    w.finish()?;
    output.commit()?;
    Ok(0)
}

/// Points of a delay-over-time series kept per flow in the report.
const REPORT_POINTS: usize = 2000;

/// Delay over time per flow and receiver (by source, destination, receiver).
#[derive(Default)]
struct DelaySeries(std::collections::BTreeMap<(String, String, String), Thinned>);

impl RowSink<FlowPacketRow> for DelaySeries {
    fn row(&mut self, r: &FlowPacketRow) {
        if let (Some(d), Some(t)) = (r.delay_ns, r.send_ts_ns) {
            self.0.entry((r.src.to_string(), r.dst.to_string(), r.receiver.to_string())).or_default().push(t, d as f64 / 1e6);
        }
    }
}

/// Delay over time of one flow, thinned evenly to at most [`REPORT_POINTS`].
#[derive(Default)]
struct Thinned {
    stride: u64,
    seen: u64,
    points: Vec<(i64, f64)>,
}

impl Thinned {
    fn push(&mut self, t: i64, v: f64) {
        self.stride = self.stride.max(1);
        if self.seen % self.stride == 0 {
            self.points.push((t, v));
            if self.points.len() >= REPORT_POINTS {
                let mut i = 0;
                self.points.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
            }
        }
        self.seen += 1;
    }
}

/// The report's "UDP flows" section of one run: every non-RTPS UDP flow seen
/// at two capture points (the lab's iperf3 interference), per receiver: the
/// summary and delay over time. No flow is an empty list, not an error.
pub fn report_section(inputs: &[PathBuf], offsets: &[Offset], window_ns: i64, limits: &ddscope_core::limits::Limits, start_ns: i64) -> anyhow::Result<serde_json::Value> {
    let inputs = flow_inputs(inputs, offsets)?;
    if inputs.len() < 2 {
        return Ok(json!({"flows": [], "note": "one capture point: no flow can be measured"}));
    }
    let cfg = FlowConfig { window_ns, reassembly: limits.decoder.reassembly, ..limits.flows };
    let mut series = DelaySeries::default();
    let (m, outcomes) = analyse(&inputs, cfg, &mut series)?;
    let mut series = series.0;
    let off: std::collections::HashMap<&str, i64> = inputs.iter().map(|i| (i.name.as_str(), i.offset_ns)).collect();
    let flows: Vec<serde_json::Value> = m
        .summaries()
        .into_iter()
        .map(|f| {
            let o = off.get(f.sender.as_str()).copied().unwrap_or(0);
            let pts = series
                .remove(&(f.src.to_string(), f.dst.to_string(), f.receiver.clone()))
                .map(|s| s.points)
                .unwrap_or_default()
                .into_iter()
                .map(|(t, v)| json!([(t - o - start_ns) as f64 / 1e9, v]))
                .collect::<Vec<_>>();
            json!({"summary": f, "loss_pct": f.loss_pct(), "payload_mbps": f.payload_bps() / 1e6, "delay_series": pts})
        })
        .collect();
    Ok(json!({
        "flows": flows,
        "matching": m.stats,
        "captures": outcomes.iter().map(|o| json!({"name": o.name, "measured": o.tap.measured, "skipped": o.tap.skipped_line()})).collect::<Vec<_>>(),
    }))
}
