//! `serve`'s live incident feed (issue 27): every correlated row goes to a
//! [`WindowedExplainer`]; each window it judges hands its incidents to the
//! exporters (counts by cause in `/metrics` and InfluxDB, an `incident` span in
//! the sample's OTLP trace) and to the feed `/api/state` and `/api/incidents`
//! show. A window is judged once rows past its grace arrive, or when no row
//! came for `idle` and the correlator holds no sample (the run ended).

use ddscope_core::latency::explain::{kind_name, Budget as ExplainBudget, Incident};
use ddscope_core::latency::live_explain::{LiveExplainOptions, WindowedExplainer};
use ddscope_core::latency::{LatencyRow, Layer};
use ddscope_export::{Budget, Exporters};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The end-to-end measure a `serve --budget TOPIC:LAYER` judges, for the
/// layers that are one (`latency --budget` judges whichever the flow has):
/// `ros_e2e` (traced), `application` (ground truth), `message` (the wire).
pub fn budget_measure(layer: Layer) -> Option<&'static str> {
    match layer {
        Layer::RosE2e => Some("ros_e2e"),
        Layer::Application => Some("application"),
        Layer::Message => Some("wire"),
        _ => None,
    }
}

/// serve's budgets as the explainer's: a topic's own before `*` (serve's rule:
/// the topic's own wins), each tied to the measure its layer is; budgets of
/// other layers judge no incident (they still count `over_budget` in /metrics).
pub fn explain_budgets(budgets: &[Budget]) -> Vec<ExplainBudget> {
    let mut own: Vec<ExplainBudget> = vec![];
    let mut any: Vec<ExplainBudget> = vec![];
    for b in budgets {
        let Some(m) = budget_measure(b.layer) else { continue };
        // `*` is the explainer's glob for every topic; a topic's own budget matches its name exactly.
        let pattern = if b.topic == "*" { "*".to_string() } else { globset::escape(&b.topic) };
        match ExplainBudget::new(&pattern, b.limit_ns) {
            Ok(e) => {
                let e = e.for_measure(m);
                if b.topic == "*" { any.push(e) } else { own.push(e) }
            }
            Err(_) => continue,
        }
    }
    own.extend(any);
    own
}

/// The online explainer and what it reports.
pub struct Incidents {
    live: WindowedExplainer,
    idle: Duration,
    last_row: Option<Instant>,
}

impl Incidents {
    pub fn new(opts: LiveExplainOptions, idle: Duration) -> Incidents {
        Incidents { live: WindowedExplainer::new(opts), idle, last_row: None }
    }

    /// One correlated row; the windows it completes go to the exporters.
    pub fn row(&mut self, r: &LatencyRow, export: Option<&Exporters>) {
        self.last_row = Some(Instant::now());
        for x in self.live.row(r) {
            if let Some(e) = export {
                e.on_incidents(&x.incidents);
            }
        }
    }

    /// Judges the open windows once no row came for `idle` and the correlator holds no sample
    /// (`settled`): rows still to come (an agent not yet ended) would arrive after their window.
    pub fn tick(&mut self, settled: bool, export: Option<&Exporters>) {
        if settled && self.live.pending() > 0 && self.last_row.is_some_and(|t| t.elapsed() >= self.idle) {
            self.flush(export);
        }
    }

    /// Judges every open window now.
    pub fn flush(&mut self, export: Option<&Exporters>) {
        for x in self.live.flush() {
            if let Some(e) = export {
                e.on_incidents(&x.incidents);
            }
        }
    }

    /// The summary and the newest `feed` incidents (newest first).
    pub fn json(&self, feed: usize) -> Value {
        let o = self.live.options();
        let by_cause: Vec<Value> = self.live.by_cause().iter().map(|(c, t)| json!({"cause": c, "incidents": t.incidents, "over_budget": t.over_budget, "lost": t.lost, "excess_ms": t.excess_ms})).collect();
        let by_kind: Vec<Value> = self.live.by_kind().iter().map(|(k, n)| json!({"kind": kind_name(*k), "incidents": n})).collect();
        let by_topic: Vec<Value> = self.live.by_topic().iter().map(|((t, d, c), n)| json!({"topic": t, "domain": d, "cause": c, "incidents": n})).collect();
        let recent: Vec<&Incident> = self.live.feed().rev().take(feed).collect();
        json!({
            "window_s": o.window_ns as f64 / 1e9,
            "grace_s": o.grace_ns as f64 / 1e9,
            "open_windows": self.live.pending(),
            "budgets": o.explain.budgets.iter().map(|b| json!({"topic": b.pattern, "limit": b.limit.to_string(), "measure": b.measure})).collect::<Vec<_>>(),
            "stats": self.live.stats,
            "by_cause": by_cause,
            "by_kind": by_kind,
            "by_topic": by_topic,
            "recent": recent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_budgets_become_the_explainers_by_measure_and_own_before_any() {
        let b: Vec<Budget> = ["*=50ms", "/image=20ms", "/image:ros_e2e=30ms", "/image:executor=1ms", "/a[b]=5ms"].iter().map(|s| s.parse().unwrap()).collect();
        let e = explain_budgets(&b);
        let got: Vec<(String, Option<&str>, String)> = e.iter().map(|b| (b.pattern.clone(), b.measure, b.limit.to_string())).collect();
        assert_eq!(
            got,
            vec![
                ("/image".into(), Some("wire"), "20ms".into()),
                ("/image".into(), Some("ros_e2e"), "30ms".into()),
                // globset's escape: the topic's own name, matched literally.
                ("/a[[]b[]]".into(), Some("wire"), "5ms".into()),
                ("*".into(), Some("wire"), "50ms".into()),
            ]
        );
    }
}
