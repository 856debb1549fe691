//! `ddscope lab sweep`: runs a sweep (crates/lab/src/sweep.rs) and writes its
//! comparison report: for every run and every cross-host flow, ddscope's own
//! figures from the run's captures (the same session `ddscope latency` runs,
//! with its defaults) beside the ground truth; the runs of a cell aggregated
//! (median and spread of the repeats); charts in the shapes of the papers'
//! figures (latency vs payload size per vendor, loss vs load). Output: one
//! self-contained HTML file, the table as CSV and JSON.

use crate::common;
use anyhow::{anyhow, bail, Context};
use ddscope_core::latency::{Layer, Level, LatencyRow};
use ddscope_core::session::{self, LatencyOptions};
use ddscope_lab::sweep::{self, Manifest, PlotSpec, Status, TruthFlow};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Columns of a flow row (per run) that are numbers, in table order.
pub const METRICS: &[(&str, &str)] = &[
    ("payload_bytes", "mean payload of the delivered samples (bytes, ground truth)"),
    ("samples", "samples ddscope saw the writer send (captures)"),
    ("delivered", "samples complete at the receiver (captures)"),
    ("lost", "samples not complete at the receiver within the window (captures)"),
    ("loss_pct", "lost / samples, % (captures)"),
    ("msg_mean_ms", "message latency, mean (captures)"),
    ("msg_p50_ms", "message latency, median (captures)"),
    ("msg_p99_ms", "message latency, p99 (captures)"),
    ("msg_max_ms", "message latency, max (captures)"),
    ("router_mean_ms", "Zenoh router hop, mean (captures on the router's links)"),
    ("router_p50_ms", "Zenoh router hop, median (captures on the router's links)"),
    ("app_mean_ms", "application latency publish -> receive, mean (ddscope with the ground truth)"),
    ("app_p99_ms", "application latency, p99 (ddscope with the ground truth)"),
    ("throughput_mbps", "payload of the delivered samples / publication time, Mbit/s (captures)"),
    ("truth_published", "samples published (ground truth)"),
    ("truth_expected", "published x readers on the receiver (ground truth)"),
    ("truth_received", "receptions (ground truth)"),
    ("truth_lost", "expected - received (ground truth)"),
    ("truth_loss_pct", "truth_lost / truth_expected, % (ground truth)"),
    ("truth_mean_ms", "publish -> receive, mean (ground truth)"),
    ("truth_p50_ms", "publish -> receive, median, nearest rank (ground truth)"),
    ("truth_p99_ms", "publish -> receive, p99, nearest rank (ground truth)"),
    ("truth_max_ms", "publish -> receive, max (ground truth)"),
    ("truth_throughput_mbps", "payload received / publication time, Mbit/s (ground truth)"),
    ("interference_mbps", "iperf3 interference the run achieved, all flows, Mbit/s (iperf3's report)"),
    ("interference_loss_pct", "datagrams of the interference lost, % (iperf3's report)"),
];

/// Metrics whose spread over the repeats (min and max) goes into the CSV table.
const SPREAD: &[&str] = &["msg_mean_ms", "msg_p99_ms", "truth_mean_ms", "truth_p99_ms", "loss_pct", "truth_loss_pct", "throughput_mbps"];

/// One run of one cell, analysed.
struct RunResult {
    cell: String,
    repeat: u32,
    status: Status,
    error: Option<String>,
    analysis_error: Option<String>,
    flows: Vec<Map<String, Value>>,
    tools: Option<Value>,
}

fn put(m: &mut Map<String, Value>, k: &str, v: Option<f64>) {
    m.insert(k.to_string(), v.filter(|x| x.is_finite()).map(Value::from).unwrap_or(Value::Null));
}

/// ddscope's figures and the ground truth of every flow of one run directory.
fn analyse_run(dir: &Path) -> anyhow::Result<(Vec<Map<String, Value>>, Value)> {
    let run_json: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).with_context(|| format!("{}/run.json", dir.display()))?)
        .with_context(|| format!("{}/run.json", dir.display()))?;
    let duration_s = run_json["timing"]["duration_s"].as_f64().filter(|d| *d > 0.0).ok_or_else(|| anyhow!("{}/run.json: no timing.duration_s", dir.display()))?;
    let truth = sweep::truth_flows(dir)?;
    // exactly what `ddscope latency DIR` does with its defaults
    let found = session::expand_run(&[dir.to_path_buf()], &[]).map_err(common::session_error)?;
    let traces = common::traces(found.traces, &[]);
    // `ddscope latency` checks the clocks by default (the lab's hosts share one: the check must find
    // nothing to correct, and the numbers must be the same as latency's)
    let mut opts = LatencyOptions { estimate_offset: true, ..LatencyOptions::default() };
    super::limit_args::apply(&super::limit_args::LimitArgs::default().resolve()?, &mut opts);
    let mut bytes: BTreeMap<(String, String, String), (u64, u64)> = BTreeMap::new();
    let run = common::run_session(
        "sweep",
        found.captures,
        &found.truth,
        traces,
        &opts,
        &mut |r: LatencyRow| {
            if r.level != Level::Message || r.latency_ns.is_none() {
                return;
            }
            let topic = r.topic.as_ref().map(|t| t.topic_name.clone()).unwrap_or_else(|| format!("writer {}", r.writer_id));
            let e = bytes.entry((topic, r.sender.to_string(), r.receiver.to_string())).or_default();
            e.0 += r.sample_size.unwrap_or(0) as u64;
            e.1 += 1;
        },
        &mut |_| {},
    )?;
    session::check_correlated(&run).map_err(common::session_error)?;
    let scenario_topics: Vec<&str> = truth.iter().map(|t| t.topic.as_str()).collect();
    // the Zenoh router's links as capture points (`router-HOST`): their router hop goes into the
    // row of the hosts' flow; their other flows are not flows between hosts
    let router_points: Vec<String> =
        run_json["zenoh_router"]["captures"].as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()).unwrap_or_default();
    let host_of = |p: &str| router_points.iter().any(|r| r == p).then(|| p.trim_start_matches("router-").to_string());
    let summaries = run.correlator.summaries();
    let mut router_hops: BTreeMap<(String, String, String), ddscope_core::latency::stats::DistSummary> = BTreeMap::new();
    for f in &summaries {
        if let (Some(s), Some(r), Some(d)) = (host_of(&f.sender), host_of(&f.receiver), f.layer(Layer::Router).filter(|d| d.count > 0)) {
            let topic = f.names.as_ref().map(|n| n.topic_name.clone()).unwrap_or_else(|| f.topic.clone());
            router_hops.insert((topic, s, r), d.clone());
        }
    }
    let mut rows = vec![];
    let mut matched = vec![false; truth.len()];
    for f in summaries {
        let topic = f.names.as_ref().map(|n| n.topic_name.clone()).unwrap_or_else(|| f.topic.clone());
        if !scenario_topics.contains(&topic.as_str()) {
            continue; // discovery, ROS 2 housekeeping: not the workload's
        }
        if host_of(&f.sender).is_some() || host_of(&f.receiver).is_some() {
            continue;
        }
        let hop = router_hops.get(&(topic.clone(), f.sender.clone(), f.receiver.clone()));
        let ti = truth.iter().position(|t| t.topic == topic && t.sender == f.sender && t.receiver == f.receiver);
        if let Some(i) = ti {
            matched[i] = true;
        }
        let msg = f.layer(Layer::Message).cloned();
        let app = f.layer(Layer::Application).cloned();
        let (b, _) = bytes.get(&(topic.clone(), f.sender.clone(), f.receiver.clone())).copied().unwrap_or((0, 0));
        let mut m = Map::new();
        m.insert("topic".into(), json!(topic));
        m.insert("sender".into(), json!(f.sender));
        m.insert("receiver".into(), json!(f.receiver));
        m.insert("samples".into(), json!(f.samples));
        m.insert("delivered".into(), json!(f.delivered));
        m.insert("lost".into(), json!(f.lost));
        put(&mut m, "loss_pct", (f.samples > 0).then(|| f.lost as f64 * 100.0 / f.samples as f64));
        let count = |d: &Option<ddscope_core::latency::stats::DistSummary>| d.as_ref().filter(|d| d.count > 0).cloned();
        let msg = count(&msg);
        let app = count(&app);
        put(&mut m, "msg_mean_ms", msg.as_ref().map(|d| d.mean_ms));
        put(&mut m, "msg_p50_ms", msg.as_ref().map(|d| d.p50_ms));
        put(&mut m, "msg_p99_ms", msg.as_ref().map(|d| d.p99_ms));
        put(&mut m, "msg_max_ms", msg.as_ref().map(|d| d.max_ms));
        put(&mut m, "router_mean_ms", hop.map(|d| d.mean_ms));
        put(&mut m, "router_p50_ms", hop.map(|d| d.p50_ms));
        put(&mut m, "app_mean_ms", app.as_ref().map(|d| d.mean_ms));
        put(&mut m, "app_p99_ms", app.as_ref().map(|d| d.p99_ms));
        put(&mut m, "throughput_mbps", Some(b as f64 * 8.0 / 1e6 / duration_s));
        truth_cols(&mut m, ti.map(|i| &truth[i]), duration_s);
        interference_cols(&mut m, &run_json);
        rows.push(m);
    }
    // flows the ground truth has but ddscope did not see at all
    for (i, t) in truth.iter().enumerate().filter(|(i, _)| !matched[*i]) {
        let _ = i;
        let mut m = Map::new();
        m.insert("topic".into(), json!(t.topic));
        m.insert("sender".into(), json!(t.sender));
        m.insert("receiver".into(), json!(t.receiver));
        for k in ["samples", "delivered", "lost", "loss_pct", "msg_mean_ms", "msg_p50_ms", "msg_p99_ms", "msg_max_ms", "router_mean_ms", "router_p50_ms", "app_mean_ms", "app_p99_ms", "throughput_mbps"] {
            m.insert(k.into(), Value::Null);
        }
        truth_cols(&mut m, Some(t), duration_s);
        interference_cols(&mut m, &run_json);
        rows.push(m);
    }
    rows.sort_by(|a, b| (a["topic"].as_str(), a["sender"].as_str(), a["receiver"].as_str()).cmp(&(b["topic"].as_str(), b["sender"].as_str(), b["receiver"].as_str())));
    Ok((rows, run_json["tools"].clone()))
}

/// The run's iperf3 interference as iperf3 reported it (none: empty).
fn interference_cols(m: &mut Map<String, Value>, run_json: &Value) {
    let its = run_json["interference"].as_array().cloned().unwrap_or_default();
    let achieved: Vec<f64> = its.iter().filter_map(|i| i["achieved_bps"].as_f64()).collect();
    put(m, "interference_mbps", (!achieved.is_empty()).then(|| achieved.iter().sum::<f64>() / 1e6));
    let packets: u64 = its.iter().filter_map(|i| i["packets"].as_u64()).sum();
    let lost: u64 = its.iter().filter_map(|i| i["lost_packets"].as_u64()).sum();
    put(m, "interference_loss_pct", (packets > 0).then(|| lost as f64 * 100.0 / packets as f64));
}

fn truth_cols(m: &mut Map<String, Value>, t: Option<&TruthFlow>, duration_s: f64) {
    let q = t.and_then(|t| t.latency);
    put(m, "payload_bytes", t.filter(|t| t.received > 0).map(|t| t.received_bytes as f64 / t.received as f64));
    put(m, "truth_published", t.map(|t| t.published as f64));
    put(m, "truth_expected", t.map(|t| t.expected as f64));
    put(m, "truth_received", t.map(|t| t.received as f64));
    put(m, "truth_lost", t.map(|t| t.lost as f64));
    put(m, "truth_loss_pct", t.filter(|t| t.expected > 0).map(|t| t.lost as f64 * 100.0 / t.expected as f64));
    put(m, "truth_mean_ms", q.map(|q| q.mean));
    put(m, "truth_p50_ms", q.map(|q| q.p50));
    put(m, "truth_p99_ms", q.map(|q| q.p99));
    put(m, "truth_max_ms", q.map(|q| q.max));
    put(m, "truth_throughput_mbps", t.map(|t| t.received_bytes as f64 * 8.0 / 1e6 / duration_s));
}

/// Reads every complete run of the sweep in `dir` and writes report.html,
/// sweep-table.csv, sweep-runs.csv and sweep-table.json there.
pub fn write_report(dir: &Path, quiet: bool) -> anyhow::Result<ReportSummary> {
    let m = Manifest::read(dir)?;
    let mut results = vec![];
    for c in &m.cells {
        for r in &c.runs {
            let mut res = RunResult { cell: c.id.clone(), repeat: r.repeat, status: r.status, error: r.error.clone(), analysis_error: None, flows: vec![], tools: None };
            if let Some(sig) = ddscope_lab::procs::interrupted() {
                bail!("interrupted by {} while analysing; the runs are kept: write the report with --report-only", ddscope_lab::procs::signal_name(sig));
            }
            if r.status.complete() {
                if !quiet {
                    eprintln!("sweep: analysing {} repeat {} ({})", c.id, r.repeat, r.dir);
                }
                match analyse_run(&dir.join(&r.dir)) {
                    Ok((flows, tools)) => {
                        res.flows = flows;
                        res.tools = Some(tools);
                    }
                    Err(e) => res.analysis_error = Some(format!("{e:#}").split_whitespace().collect::<Vec<_>>().join(" ")),
                }
            }
            results.push(res);
        }
    }
    let params_of = |id: &str| m.cells.iter().find(|c| c.id == id).map(|c| c.params.clone()).unwrap_or_default();
    // per-run rows
    let mut run_rows: Vec<Map<String, Value>> = vec![];
    for r in &results {
        for f in &r.flows {
            let mut row = Map::new();
            row.insert("cell".into(), json!(r.cell));
            row.insert("repeat".into(), json!(r.repeat));
            for k in &m.keys {
                row.insert(k.clone(), json!(params_of(&r.cell).get(k).map(|v| shown(v)).unwrap_or_default()));
            }
            for (k, v) in f {
                row.insert(k.clone(), v.clone());
            }
            run_rows.push(row);
        }
    }
    // aggregate: one row per cell and flow, median (and spread) over repeats
    let mut groups: BTreeMap<(String, String, String, String), Vec<&Map<String, Value>>> = BTreeMap::new();
    for r in &run_rows {
        let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
        groups.entry((s("cell"), s("topic"), s("sender"), s("receiver"))).or_default().push(r);
    }
    let mut agg_rows: Vec<Map<String, Value>> = vec![];
    for ((cell, topic, sender, receiver), rows) in &groups {
        let mut a = Map::new();
        a.insert("cell".into(), json!(cell));
        for k in &m.keys {
            a.insert(k.clone(), rows[0][k].clone());
        }
        a.insert("topic".into(), json!(topic));
        a.insert("sender".into(), json!(sender));
        a.insert("receiver".into(), json!(receiver));
        a.insert("repeats".into(), json!(rows.len()));
        let mut spread = Map::new();
        for (k, _) in METRICS {
            let vals: Vec<f64> = rows.iter().filter_map(|r| r[*k].as_f64()).collect();
            put(&mut a, k, sweep::median(&vals));
            if !vals.is_empty() {
                let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                spread.insert(k.to_string(), json!({"min": lo, "max": hi, "values": vals}));
            }
        }
        a.insert("spread".into(), Value::Object(spread));
        agg_rows.push(a);
    }
    let plots = plots(&m, &agg_rows, &run_rows);
    let tools = results.iter().find_map(|r| r.tools.clone()).unwrap_or(Value::Null);
    let doc = json!({
        "title": format!("ddscope sweep {}", m.name),
        "generated_by": format!("ddscope {}", env!("CARGO_PKG_VERSION")),
        "sweep": {
            "name": m.name, "description": m.description, "keys": m.keys, "repeats": m.repeats, "duration": m.duration,
            "cells": m.cells.len(), "excluded": m.excluded, "sessions": m.sessions, "finished": m.finished,
            "sweep_file": m.sweep_file, "scenario_file": m.scenario_file,
        },
        "machine": tools,
        "metrics": METRICS.iter().map(|(k, d)| json!({"key": k, "meaning": d})).collect::<Vec<_>>(),
        "runs": results.iter().map(|r| json!({
            "cell": r.cell, "repeat": r.repeat, "params": params_of(&r.cell).iter().map(|(k, v)| (k.clone(), json!(shown(v)))).collect::<Map<_, _>>(),
            "status": r.status, "error": r.error, "analysis_error": r.analysis_error, "flows": r.flows.len(),
        })).collect::<Vec<_>>(),
        "table": agg_rows,
        "run_rows": run_rows,
        "plots": plots,
    });
    std::fs::write(dir.join("sweep-table.json"), serde_json::to_string_pretty(&json!({"keys": m.keys, "metrics": doc["metrics"], "table": doc["table"], "run_rows": doc["run_rows"], "runs": doc["runs"]}))? + "\n")?;
    let mut agg_cols: Vec<String> = vec!["cell".into()];
    agg_cols.extend(m.keys.iter().cloned());
    agg_cols.extend(["topic", "sender", "receiver", "repeats"].iter().map(|s| s.to_string()));
    for (k, _) in METRICS {
        agg_cols.push(k.to_string());
        if SPREAD.contains(k) {
            agg_cols.push(format!("{k}_min"));
            agg_cols.push(format!("{k}_max"));
        }
    }
    write_csv(&dir.join("sweep-table.csv"), &agg_cols, &agg_rows, |row, c| {
        if let Some(base) = c.strip_suffix("_min").filter(|b| SPREAD.contains(b)) {
            row["spread"].get(base).map(|s| s["min"].clone())
        } else if let Some(base) = c.strip_suffix("_max").filter(|b| SPREAD.contains(b)) {
            row["spread"].get(base).map(|s| s["max"].clone())
        } else {
            row.get(c).cloned()
        }
    })?;
    let mut run_cols: Vec<String> = vec!["cell".into(), "repeat".into()];
    run_cols.extend(m.keys.iter().cloned());
    run_cols.extend(["topic", "sender", "receiver"].iter().map(|s| s.to_string()));
    run_cols.extend(METRICS.iter().map(|(k, _)| k.to_string()));
    write_csv(&dir.join("sweep-runs.csv"), &run_cols, &run_rows, |row, c| row.get(c).cloned())?;
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>{css}</style></head>\n\
         <body><header><h1>{title}</h1><p>{gen}</p></header><main></main>\n\
         <script>window.DDSCOPE_SWEEP = {data};</script>\n<script>{charts}</script>\n<script>{js}</script>\n</body></html>\n",
        title = html_escape(doc["title"].as_str().unwrap_or("sweep")),
        css = include_str!("../../assets/report.css"),
        gen = html_escape(&format!("generated by ddscope {} from {}", env!("CARGO_PKG_VERSION"), dir.display())),
        data = script_safe(&serde_json::to_string(&doc)?),
        charts = ddscope_monitor::server::assets::CHARTS_JS,
        js = include_str!("../../assets/sweep.js"),
    );
    std::fs::write(dir.join("report.html"), html).with_context(|| format!("cannot write {}", dir.join("report.html").display()))?;
    Ok(ReportSummary {
        runs: results.len(),
        analysed: results.iter().filter(|r| r.analysis_error.is_none() && r.status.complete()).count(),
        analysis_errors: results.iter().filter_map(|r| r.analysis_error.as_ref().map(|e| format!("{} repeat {}: {e}", r.cell, r.repeat))).collect(),
        rows: agg_rows.len(),
    })
}

pub struct ReportSummary {
    pub runs: usize,
    pub analysed: usize,
    pub analysis_errors: Vec<String>,
    pub rows: usize,
}

fn shown(toml_text: &str) -> String {
    sweep::param_shown(toml_text)
}

fn csv_field(v: Option<Value>) -> String {
    let s = match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s,
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => other.to_string(),
    };
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn write_csv(path: &Path, cols: &[String], rows: &[Map<String, Value>], get: impl Fn(&Map<String, Value>, &str) -> Option<Value>) -> anyhow::Result<()> {
    let mut out = cols.iter().map(|c| csv_field(Some(json!(c)))).collect::<Vec<_>>().join(",");
    out.push('\n');
    for r in rows {
        out.push_str(&cols.iter().map(|c| csv_field(get(r, c))).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    std::fs::write(path, out).with_context(|| format!("cannot write {}", path.display()))
}

/// The charts: those of the sweep file, or defaults chosen from the matrix.
fn plots(m: &Manifest, agg: &[Map<String, Value>], runs: &[Map<String, Value>]) -> Vec<Value> {
    let varying: Vec<String> = m
        .keys
        .iter()
        .filter(|k| {
            let mut vals: Vec<&String> = m.cells.iter().filter_map(|c| c.params.get(*k)).collect();
            vals.sort();
            vals.dedup();
            vals.len() > 1
        })
        .cloned()
        .collect();
    let specs: Vec<PlotSpec> = if !m.plots.is_empty() {
        m.plots.clone()
    } else {
        let is_size = |k: &str| k.contains("size") || k.contains("bytes");
        let is_load = |k: &str| k.contains("load") || k.contains("interference");
        let mut v = vec![];
        let others: Vec<String> = varying.iter().filter(|k| !is_size(k)).cloned().collect();
        v.push(PlotSpec { title: "Latency vs payload size (ddscope, message layer, mean)".into(), x: "payload_bytes".into(), y: "msg_mean_ms".into(), series: Some(others.clone()), log_x: true, log_y: true });
        v.push(PlotSpec { title: "Latency vs payload size (ground truth, publish -> receive, mean)".into(), x: "payload_bytes".into(), y: "truth_mean_ms".into(), series: Some(others.clone()), log_x: true, log_y: true });
        v.push(PlotSpec { title: "Throughput vs payload size (ground truth)".into(), x: "payload_bytes".into(), y: "truth_throughput_mbps".into(), series: Some(others), log_x: true, log_y: false });
        for k in varying.iter().filter(|k| is_load(k)) {
            let rest: Vec<String> = varying.iter().filter(|o| *o != k).cloned().collect();
            v.push(PlotSpec { title: format!("Loss vs {k} (ground truth)"), x: k.clone(), y: "truth_loss_pct".into(), series: Some(rest.clone()), log_x: false, log_y: false });
            v.push(PlotSpec { title: format!("Interference loss vs {k} (iperf3)"), x: k.clone(), y: "interference_loss_pct".into(), series: Some(rest), log_x: false, log_y: false });
        }
        v
    };
    let x_of = |row: &Map<String, Value>, x: &str, cell: &str| -> Option<f64> {
        if m.keys.iter().any(|k| k == x) {
            m.cells.iter().find(|c| c.id == cell).and_then(|c| c.params.get(x)).and_then(|t| sweep::param_number(t))
        } else {
            row.get(x).and_then(|v| v.as_f64())
        }
    };
    let mut out = vec![];
    for p in specs {
        let series_keys: Vec<String> = p.series.clone().unwrap_or_else(|| varying.iter().filter(|k| **k != p.x).cloned().collect());
        let name_of = |row: &Map<String, Value>| -> String {
            let mut parts: Vec<String> = series_keys.iter().map(|k| format!("{}={}", short_key(k), row.get(k).and_then(|v| v.as_str()).unwrap_or("?"))).collect();
            // several flows per cell: one line per topic too
            if agg.iter().filter(|r| r["cell"] == row["cell"]).count() > 1 {
                parts.push(row["topic"].as_str().unwrap_or("").to_string());
            }
            if parts.is_empty() {
                "all".to_string()
            } else {
                parts.join(" ")
            }
        };
        let mut lines: BTreeMap<String, (Vec<(f64, f64)>, Vec<(f64, f64)>)> = BTreeMap::new();
        for r in agg {
            let cell = r["cell"].as_str().unwrap_or("");
            if let (Some(x), Some(y)) = (x_of(r, &p.x, cell), r.get(&p.y).and_then(|v| v.as_f64())) {
                lines.entry(name_of(r)).or_default().0.push((x, y));
            }
        }
        for r in runs {
            let cell = r["cell"].as_str().unwrap_or("");
            if let (Some(x), Some(y)) = (x_of(r, &p.x, cell), r.get(&p.y).and_then(|v| v.as_f64())) {
                lines.entry(name_of(r)).or_default().1.push((x, y));
            }
        }
        let series: Vec<Value> = lines
            .into_iter()
            .map(|(name, (mut med, reps))| {
                med.sort_by(|a, b| a.0.total_cmp(&b.0));
                json!({"name": name, "median": med.iter().map(|p| json!([p.0, p.1])).collect::<Vec<_>>(), "repeats": reps.iter().map(|p| json!([p.0, p.1])).collect::<Vec<_>>()})
            })
            .collect();
        let label = |k: &str| METRICS.iter().find(|(m, _)| *m == k).map(|(m, d)| format!("{m}: {d}")).unwrap_or_else(|| k.to_string());
        out.push(json!({
            "title": if p.title.is_empty() { format!("{} vs {}", p.y, p.x) } else { p.title.clone() },
            "x": p.x, "y": p.y, "xLabel": label(&p.x), "yLabel": p.y, "yMeaning": label(&p.y),
            "xLog": p.log_x, "yLog": p.log_y, "series": series,
        }));
    }
    out
}

/// `generate[0].vendor` -> `vendor` for legends.
fn short_key(k: &str) -> &str {
    k.rsplit('.').next().unwrap_or(k)
}

fn script_safe(s: &str) -> String {
    s.replace("</", "<\\/").replace("<!--", "<\\!--")
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Checks a plot's axes against the columns before anything runs.
pub fn check_plots(sw: &sweep::Sweep) -> anyhow::Result<()> {
    for (i, p) in sw.plots.iter().enumerate() {
        let col = |c: &str| METRICS.iter().any(|(k, _)| *k == c);
        if !col(&p.x) && !sw.keys.contains(&p.x) {
            bail!("{}: plot[{i}].x: {} is neither a matrix key nor a column ({})", sw.file.display(), p.x, METRICS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", "));
        }
        if !col(&p.y) {
            bail!("{}: plot[{i}].y: {} is not a column ({})", sw.file.display(), p.y, METRICS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", "));
        }
        if sw.keys.contains(&p.x) {
            for c in &sw.cells {
                if let Some((_, v)) = c.params.iter().find(|(k, _)| k == &p.x) {
                    if sweep::numeric(v).is_none() {
                        bail!("{}: plot[{i}].x: {} = {} is not a number (sizes, percentages, rates and durations are)", sw.file.display(), p.x, sweep::show(v));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Default output directory: the same for every invocation, so that running
/// the same command again resumes.
pub fn default_out(sw: &sweep::Sweep) -> PathBuf {
    PathBuf::from("lab-out").join(format!("sweep-{}", sw.name))
}
