//! "Why was it late", online (`serve`): the [`Explainer`] judged per window
//! of sample time instead of once over a whole run.
//!
//! Rows arrive as the correlator judges them: a delivered sample soon after it
//! is complete, a lost one once every capture point is `window` past it. Each
//! row goes to the window of its first sighting at the sender
//! (`sender_first_ts_ns`); a window is judged (medians, budgets, verdicts, as
//! `latency --explain` does over a run) once rows `grace_ns` past its end have
//! been seen, when more than `max_open` windows would be open (the oldest is
//! judged early), or on [`WindowedExplainer::flush`] (the caller's idle rule,
//! shutdown). A row of a window already judged is counted (`late_rows`), not
//! judged. Memory: at most `max_open` windows of at most `max_samples` samples
//! each, the last `feed` incidents (older ones evicted and counted) and one
//! counter per (topic, cause) up to `max_flows` topics.

use super::explain::{Cause, Explainer, ExplainOptions, Explanation, Incident, Kind};
use super::layers::Level;
use super::rows::LatencyRow;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// How the online explainer windows and what it keeps.
#[derive(Debug, Clone)]
pub struct LiveExplainOptions {
    /// What makes an incident, the caps of one window (as offline).
    pub explain: ExplainOptions,
    /// Sample time judged together (the medians' span).
    pub window_ns: i64,
    /// How long after a window's end its rows may still arrive (the correlator's window and some slack).
    pub grace_ns: i64,
    /// Windows open at once; opening one more judges the oldest early.
    pub max_open: usize,
    /// Incidents kept for the feed (newest last).
    pub feed: usize,
}

impl Default for LiveExplainOptions {
    fn default() -> Self {
        LiveExplainOptions { explain: ExplainOptions { max_samples: 200_000, examples: 0, ..ExplainOptions::default() }, window_ns: 10_000_000_000, grace_ns: 3_000_000_000, max_open: 4, feed: 500 }
    }
}

/// Totals of one cause since the start.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CauseTotal {
    pub incidents: u64,
    pub over_budget: u64,
    pub lost: u64,
    pub excess_ms: f64,
}

/// What the online explainer did since the start.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LiveExplainStats {
    pub windows_judged: u64,
    /// Windows judged before their grace was over (more than `max_open` open).
    pub windows_judged_early: u64,
    pub samples: u64,
    pub samples_not_kept: u64,
    pub flows_not_kept: u64,
    /// Rows of a window already judged: counted, not judged.
    pub late_rows: u64,
    pub incidents: u64,
    pub budget_broken: u64,
    /// Incidents that left the feed for newer ones (their counts stay).
    pub feed_evicted: u64,
    /// Incidents of topics beyond the per-topic counters' cap (in the totals by cause, not per topic).
    pub topics_not_counted: u64,
}

/// The incidents of serve's rows, judged per window of sample time.
pub struct WindowedExplainer {
    opts: LiveExplainOptions,
    open: BTreeMap<i64, Explainer>,
    /// Windows below this index are judged.
    judged_below: i64,
    latest_ns: i64,
    feed: VecDeque<Incident>,
    by_cause: BTreeMap<Cause, CauseTotal>,
    by_kind: BTreeMap<Kind, u64>,
    by_topic: BTreeMap<(String, Option<u32>, Cause), u64>,
    pub stats: LiveExplainStats,
}

impl WindowedExplainer {
    pub fn new(opts: LiveExplainOptions) -> WindowedExplainer {
        assert!(opts.window_ns > 0 && opts.max_open > 0, "a window is longer than 0 and at least one is open");
        WindowedExplainer {
            opts,
            open: BTreeMap::new(),
            judged_below: i64::MIN,
            latest_ns: i64::MIN,
            feed: VecDeque::new(),
            by_cause: BTreeMap::new(),
            by_kind: BTreeMap::new(),
            by_topic: BTreeMap::new(),
            stats: LiveExplainStats::default(),
        }
    }

    pub fn options(&self) -> &LiveExplainOptions {
        &self.opts
    }

    /// Takes one row; returns the windows this judged (oldest first).
    pub fn row(&mut self, r: &LatencyRow) -> Vec<Explanation> {
        if r.level != Level::Message {
            return vec![];
        }
        let t = r.sender_first_ts_ns;
        let w = t.div_euclid(self.opts.window_ns);
        if w < self.judged_below {
            self.stats.late_rows += 1;
            return vec![];
        }
        let mut out = vec![];
        if !self.open.contains_key(&w) {
            while self.open.len() >= self.opts.max_open {
                let (&oldest, _) = self.open.iter().next().expect("not empty");
                if oldest > w {
                    // Older than every open window while all are taken: judging the newer ones
                    // early for it would lose more than it keeps.
                    self.stats.late_rows += 1;
                    return out;
                }
                self.stats.windows_judged_early += 1;
                out.extend(self.judge_through(oldest));
            }
            self.open.insert(w, Explainer::new(self.opts.explain.clone()));
        }
        self.open.get_mut(&w).expect("opened above").add(r);
        self.latest_ns = self.latest_ns.max(t);
        // Windows whose rows are all in: ended more than the grace before the latest row.
        let settled = (self.latest_ns.saturating_sub(self.opts.grace_ns)).div_euclid(self.opts.window_ns);
        if let Some((&oldest, _)) = self.open.iter().next() {
            if oldest < settled {
                out.extend(self.judge_through(settled - 1));
            }
        }
        out
    }

    /// Judges every open window (idle, shutdown).
    pub fn flush(&mut self) -> Vec<Explanation> {
        match self.open.keys().next_back() {
            Some(&last) => self.judge_through(last),
            None => vec![],
        }
    }

    /// Samples waiting in open windows.
    pub fn pending(&self) -> usize {
        self.open.len()
    }

    /// Judges the open windows up to and including `w`.
    fn judge_through(&mut self, w: i64) -> Vec<Explanation> {
        let later = self.open.split_off(&(w + 1));
        let done = std::mem::replace(&mut self.open, later);
        self.judged_below = self.judged_below.max(w + 1);
        let mut out = vec![];
        for (_, e) in done {
            let x = e.finish();
            self.count(&x);
            out.push(x);
        }
        out
    }

    fn count(&mut self, x: &Explanation) {
        let s = &mut self.stats;
        s.windows_judged += 1;
        s.samples += x.samples;
        s.samples_not_kept += x.samples_not_kept;
        s.flows_not_kept += x.flows_not_kept;
        s.incidents += x.incidents.len() as u64;
        s.budget_broken += x.budget_broken;
        for i in &x.incidents {
            let c = self.by_cause.entry(i.cause).or_default();
            c.incidents += 1;
            c.over_budget += i.kinds.contains(&Kind::OverBudget) as u64;
            c.lost += i.kinds.contains(&Kind::Lost) as u64;
            c.excess_ms += i.excess_ns() as f64 / 1e6;
            for k in &i.kinds {
                *self.by_kind.entry(*k).or_default() += 1;
            }
            let key = (i.topic.clone(), i.domain, i.cause);
            let room = self.by_topic.len() < self.opts.explain.max_flows;
            match self.by_topic.get_mut(&key) {
                Some(n) => *n += 1,
                None if room => {
                    self.by_topic.insert(key, 1);
                }
                None => self.stats.topics_not_counted += 1,
            }
            if self.feed.len() >= self.opts.feed {
                self.feed.pop_front();
                self.stats.feed_evicted += 1;
            }
            if self.opts.feed > 0 {
                self.feed.push_back(i.clone());
            }
        }
    }

    /// The last incidents judged, newest last.
    pub fn feed(&self) -> impl DoubleEndedIterator<Item = &Incident> {
        self.feed.iter()
    }

    pub fn by_cause(&self) -> &BTreeMap<Cause, CauseTotal> {
        &self.by_cause
    }

    pub fn by_kind(&self) -> &BTreeMap<Kind, u64> {
        &self.by_kind
    }

    /// Incidents per (topic, domain, cause) since the start.
    pub fn by_topic(&self) -> &BTreeMap<(String, Option<u32>, Cause), u64> {
        &self.by_topic
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::explain::Budget;
    use crate::latency::layers::Status;
    use crate::discovery::TopicNames;
    use ddscope_wire::Guid;
    use std::sync::Arc;

    fn row(sn: i64, t: i64, lat: Option<i64>) -> LatencyRow {
        let topic = Arc::new(TopicNames::new("rt/image", "sensor_msgs::msg::dds_::Image_"));
        let status = if lat.is_some() { Status::Delivered } else { Status::Lost };
        let mut r = LatencyRow::new(Level::Message, Some(topic), Guid::default(), sn, "pc1".into(), "pc2".into(), status, t);
        r.latency_ns = lat;
        r.first_first_ns = lat;
        r.receiver_last_ts_ns = lat.map(|l| t + l);
        r
    }

    /// 10 samples per second, 1 ms each; every 25th takes 30 ms, sn 40 is lost.
    fn rows(n: i64) -> Vec<LatencyRow> {
        (0..n).map(|sn| row(sn, 1_000_000_000 + sn * 100_000_000, if sn == 40 { None } else if sn % 25 == 7 { Some(30_000_000) } else { Some(1_000_000) })).collect()
    }

    fn opts() -> LiveExplainOptions {
        LiveExplainOptions { window_ns: 5_000_000_000, grace_ns: 1_000_000_000, ..Default::default() }
    }

    #[test]
    fn windows_are_judged_as_offline_judges_the_same_rows() {
        let rs = rows(200);
        let mut live = WindowedExplainer::new(opts());
        let mut judged = vec![];
        for r in &rs {
            judged.extend(live.row(r));
        }
        judged.extend(live.flush());
        // Offline: the same rows cut at the same 5 s boundaries, each run through the Explainer.
        let mut offline = vec![];
        for w in rs.chunk_by(|a, b| a.sender_first_ts_ns / 5_000_000_000 == b.sender_first_ts_ns / 5_000_000_000) {
            let mut e = Explainer::new(opts().explain);
            w.iter().for_each(|r| e.add(r));
            offline.push(e.finish());
        }
        let key = |x: &Vec<Explanation>| x.iter().flat_map(|e| e.incidents.iter().map(|i| (i.sn, i.cause, i.kinds.clone()))).collect::<Vec<_>>();
        assert_eq!(key(&judged), key(&offline));
        assert_eq!(live.stats.windows_judged, offline.len() as u64);
        assert_eq!(live.stats.samples, 200);
        let slow: Vec<i64> = judged.iter().flat_map(|e| e.incidents.iter()).filter(|i| i.kinds.contains(&Kind::Outlier)).map(|i| i.sn).collect();
        assert_eq!(slow, (0..200).filter(|sn| sn % 25 == 7).collect::<Vec<_>>());
        assert_eq!(live.by_cause().get(&Cause::Loss).map(|c| c.incidents), Some(1));
        assert_eq!(live.by_topic().values().sum::<u64>(), live.stats.incidents);
    }

    #[test]
    fn a_window_is_judged_once_its_grace_is_over_and_later_rows_are_counted() {
        let mut live = WindowedExplainer::new(opts());
        // Sent 1.0 s .. 6.9 s: window 0 (0-5 s) and the first of window 1 (grace 1 s).
        let rs = rows(60);
        let mut judged = vec![];
        for r in &rs[..50] {
            judged.extend(live.row(r));
        }
        assert!(judged.is_empty(), "up to 5.9 s: window 0 is still within its grace");
        for r in &rs[50..] {
            judged.extend(live.row(r));
        }
        assert_eq!(judged.len(), 1, "6.0 s and later: window 0 is judged");
        assert_eq!(judged[0].samples, 40);
        // A straggler of window 0 arrives after it was judged.
        assert!(live.row(&row(3, 1_300_000_000, Some(1_000_000))).is_empty());
        assert_eq!(live.stats.late_rows, 1);
        assert_eq!(live.flush().len(), 1);
        assert_eq!(live.stats.samples, 60);
    }

    #[test]
    fn open_windows_feed_and_topics_are_capped_and_counted() {
        let mut o = opts();
        o.max_open = 2;
        o.grace_ns = 1_000_000_000_000; // never settled: only the cap closes windows
        o.feed = 3;
        let mut live = WindowedExplainer::new(o);
        let mut judged = 0;
        for r in rows(200) {
            judged += live.row(&r).len();
        }
        assert_eq!(judged, 3, "20 s of rows in 5 s windows, two open: the first three judged early");
        assert_eq!(live.stats.windows_judged_early, 3);
        // An old row while both open windows are newer: counted, nothing judged for it.
        assert!(live.row(&row(1, 0, Some(1))).is_empty());
        assert_eq!(live.stats.late_rows, 1);
        live.flush();
        assert_eq!(live.feed().count(), 3);
        assert_eq!(live.stats.feed_evicted, live.stats.incidents - 3);
    }

    #[test]
    fn serve_budgets_judge_only_the_measure_they_name() {
        let mut o = opts();
        o.explain.budgets = vec![Budget::new("*", 5_000_000).unwrap().for_measure("ros_e2e")];
        let mut live = WindowedExplainer::new(o);
        for r in rows(50) {
            live.row(&r);
        }
        live.flush();
        assert_eq!(live.stats.budget_broken, 0, "a ros_e2e budget does not judge wire-only rows");
        let mut o = opts();
        o.explain.budgets = vec![Budget::new("*", 5_000_000).unwrap().for_measure("wire")];
        let mut live = WindowedExplainer::new(o);
        for r in rows(50) {
            live.row(&r);
        }
        live.flush();
        assert_eq!(live.stats.budget_broken, 3, "sn 7 and 32 over 5 ms, sn 40 lost");
    }
}
