//! A run's timeline for Perfetto (and chrome://tracing): every host a process,
//! on it a track per topic and direction on the wire (each sample's first to
//! last frame at that capture point) and a track per traced thread (publish,
//! take and callback slices), and a flow per sample and receiver linking its
//! instants across hosts: publish → first frame out → first frame in → take →
//! callback. The instants are the latency rows' own, on the correlator's clock
//! (the clock offsets and the clock tracker applied), so a slice starts where
//! its row says, to the nanosecond.
//!
//! Written as Chrome's JSON trace event format, which Perfetto's trace
//! processor, the Perfetto UI and chrome://tracing all read. Its timestamps are
//! microseconds that readers parse as doubles: written absolute (1.7·10¹⁵ µs
//! since 1970) they would lose up to a few hundred ns, so they are written from
//! a base (the run's first instant, down to the second) with three decimals,
//! exact to the ns for runs up to a day. The base is in `otherData`
//! (`base_ns`, and as UTC text).
//!
//! Slices of one track that overlap without nesting (a repair of sample n sent
//! after sample n+1's first frame) go to a second lane of the track ("(2)"),
//! because a thread track must nest. Rows are kept up to
//! [`TimelineConfig::max_rows`] (the first ones); later rows are counted, not drawn.

use crate::latency::{LatencyRow, Level, Status};
use crate::sink::RowSink;
use ddscope_wire::Guid;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::sync::Arc;

/// The timeline's caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineConfig {
    /// Rows (a sample at a receiver) drawn; later rows are counted, not drawn. About 300 bytes of
    /// memory and 1 KB of file each.
    pub max_rows: usize,
    /// The latest rows `serve` keeps for `/api/timeline` (the oldest forgotten first, counted).
    pub serve_rows: usize,
}

impl Default for TimelineConfig {
    fn default() -> Self {
        TimelineConfig { max_rows: 200_000, serve_rows: 20_000 }
    }
}

/// What the timeline drew and left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimelineStats {
    /// Message rows seen.
    pub rows: u64,
    /// Rows over `max_rows`, not drawn.
    pub rows_not_drawn: u64,
    /// Rows drawn by the last write (in its time range).
    pub drawn_rows: u64,
    /// Slices and flows written.
    pub slices: u64,
    pub flows: u64,
    /// Arrows split where a sample's next slice ended before the previous one's time (the clocks put a
    /// receive before its send by more than the receive lasted).
    pub flows_split: u64,
    /// Samples lost at a receiver (an instant at the time they were sent, on the receiver's track).
    pub lost: u64,
    /// Tracks that needed a second lane (slices that overlap without nesting).
    pub extra_lanes: u64,
}

impl TimelineStats {
    /// One line for the closing report: what was drawn, what was not and why.
    pub fn summary_line(&self, max_rows: usize) -> String {
        let mut s = format!("{} slices, {} flows from {} rows", self.slices, self.flows, self.drawn_rows);
        if self.rows_not_drawn > 0 {
            s.push_str(&format!(
                "; {} rows not drawn (over --limit timeline.max_rows={max_rows})",
                self.rows_not_drawn
            ));
        }
        if self.flows_split > 0 {
            s.push_str(&format!("; {} arrows split where the clocks put a receive before its send", self.flows_split));
        }
        s
    }
}

/// What a row contributes: its instants and names.
#[derive(Debug, Clone)]
struct Kept {
    topic: Arc<str>,
    writer: Guid,
    sn: i64,
    sender: Arc<str>,
    receiver: Arc<str>,
    status: Status,
    size: Option<u32>,
    frags: Option<u32>,
    retransmitted_frags: u32,
    duplicate_frags: u32,
    repaired: bool,
    sender_first: i64,
    sender_last: Option<i64>,
    receiver_first: Option<i64>,
    receiver_last: Option<i64>,
    latency: Option<i64>,
    clock_error: Option<i64>,
    join: &'static str,
    ros: Option<Box<crate::latency::RosColumns>>,
}

impl Kept {
    /// Whether any of the row's instants lies in `[from, to]`, or its span covers it.
    fn overlaps(&self, from: i64, to: i64) -> bool {
        let r = self.ros.as_deref();
        let all = [
            Some(self.sender_first),
            self.sender_last,
            self.receiver_first,
            self.receiver_last,
            r.and_then(|r| r.rclcpp_publish_ts_ns),
            r.and_then(|r| r.rmw_publish_ts_ns),
            r.and_then(|r| r.rmw_take_ts_ns),
            r.and_then(|r| r.callback_end_ts_ns),
        ];
        let first = all.iter().flatten().min().copied().unwrap_or(self.sender_first);
        let last = all.iter().flatten().max().copied().unwrap_or(self.sender_first);
        last >= from && first <= to
    }
}

/// Collects the message rows of a run (a [`RowSink`]) and writes them as a timeline.
#[derive(Debug)]
pub struct Timeline {
    cfg: TimelineConfig,
    rows: std::collections::VecDeque<Kept>,
    /// Keep the latest rows (serve), else the first ones.
    latest: bool,
    stats: TimelineStats,
}

impl RowSink<LatencyRow> for Timeline {
    fn row(&mut self, r: &LatencyRow) {
        if r.level != Level::Message {
            return;
        }
        self.stats.rows += 1;
        if self.rows.len() >= self.cfg.max_rows.max(1) {
            self.stats.rows_not_drawn += 1;
            if !self.latest {
                return;
            }
            self.rows.pop_front();
        }
        self.rows.push_back(Kept {
            topic: r.topic.as_ref().map_or_else(|| Arc::from(r.writer_id.to_string()), |t| Arc::from(t.topic_name.as_str())),
            writer: r.writer_id,
            sn: r.sn,
            sender: r.sender.clone(),
            receiver: r.receiver.clone(),
            status: r.status,
            size: r.sample_size,
            frags: r.frags_expected,
            retransmitted_frags: r.sender_retransmitted_frags,
            duplicate_frags: r.receiver_duplicate_frags,
            repaired: r.repaired,
            sender_first: r.sender_first_ts_ns,
            sender_last: r.sender_last_ts_ns,
            receiver_first: r.receiver_first_ts_ns,
            receiver_last: r.receiver_last_ts_ns,
            latency: r.latency_ns,
            clock_error: r.clock_error_ns,
            join: r.join().as_str(),
            ros: r.ros.clone(),
        });
    }
}

/// Where a slice is drawn: a host's wire track of a topic, or one of its traced threads.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Track {
    /// (host, topic, false = out / true = in)
    Wire(Arc<str>, Arc<str>, bool),
    /// (host, vpid, vtid); -1 where the trace had no thread
    Thread(Arc<str>, i64, i64),
}

impl Track {
    fn host(&self) -> &Arc<str> {
        match self {
            Track::Wire(h, ..) | Track::Thread(h, ..) => h,
        }
    }
}

/// A JSON argument value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Arg {
    I(i64),
    S(Arc<str>),
    B(bool),
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Slice {
    track: Track,
    start: i64,
    end: i64,
    name: String,
    args: Vec<(&'static str, Arg)>,
    /// A zero-length marker written as an instant event (a loss), not a slice.
    instant: bool,
}

impl Timeline {
    /// A timeline of the first `cfg.max_rows` rows (a file's run).
    pub fn new(cfg: TimelineConfig) -> Self {
        Timeline { cfg, rows: Default::default(), latest: false, stats: TimelineStats::default() }
    }

    /// A timeline of the latest `cfg.serve_rows` rows, the oldest forgotten first (counted): serve's.
    pub fn latest(cfg: TimelineConfig) -> Self {
        Timeline { latest: true, ..Timeline::new(TimelineConfig { max_rows: cfg.serve_rows, ..cfg }) }
    }

    pub fn config(&self) -> TimelineConfig {
        self.cfg
    }

    /// Rows kept, drawn by [`write`](Self::write) (the others were counted).
    pub fn kept_rows(&self) -> usize {
        self.rows.len()
    }

    /// Writes the timeline (Chrome JSON trace event format) and says what it drew.
    pub fn write(&self, out: &mut dyn Write) -> io::Result<TimelineStats> {
        self.write_between(out, i64::MIN, i64::MAX)
    }

    /// Writes the rows with an instant in `[from, to]` (ns since 1970, the rows' clock): serve's
    /// `/api/timeline?from=…&to=…`.
    pub fn write_between(&self, out: &mut dyn Write, from: i64, to: i64) -> io::Result<TimelineStats> {
        let mut stats = self.stats;
        let mut slices: BTreeSet<Slice> = BTreeSet::new();
        // Each row's chain of slices, in the order the sample went (publish, out, in, take, callback).
        let mut chains: Vec<(String, Vec<Slice>)> = vec![];
        for k in self.rows.iter().filter(|k| k.overlaps(from, to)) {
            stats.drawn_rows += 1;
            let ros = k.ros.as_deref();
            let topic = &k.topic;
            let name = format!("{topic} #{}", k.sn);
            let mut chain: Vec<Slice> = vec![];
            let sample_args = |extra: Vec<(&'static str, Arg)>| {
                let mut a = vec![("topic", Arg::S(topic.clone())), ("sn", Arg::I(k.sn))];
                if k.writer != Guid::default() {
                    a.push(("writer", Arg::S(Arc::from(k.writer.to_string()))));
                }
                a.extend(extra);
                a
            };
            if let Some(r) = ros {
                if let Some(start) = r.rclcpp_publish_ts_ns.or(r.rmw_publish_ts_ns) {
                    let (pid, tid) = r.sender_thread.unwrap_or((-1, -1));
                    let mut extra = vec![];
                    if let Some(n) = &r.sender_node {
                        extra.push(("node", Arg::S(n.clone())));
                    }
                    chain.push(Slice {
                        track: Track::Thread(k.sender.clone(), pid, tid),
                        start,
                        end: r.rmw_publish_ts_ns.unwrap_or(start).max(start),
                        name: format!("publish {topic}"),
                        args: sample_args(extra),
                        instant: false,
                    });
                }
            }
            let on_wire = matches!(k.status, Status::Delivered | Status::Incomplete | Status::Lost);
            if on_wire {
                let mut extra = vec![];
                if let Some(s) = k.size {
                    extra.push(("size", Arg::I(s as i64)));
                }
                if let Some(f) = k.frags {
                    extra.push(("fragments", Arg::I(f as i64)));
                }
                if k.retransmitted_frags > 0 {
                    extra.push(("retransmitted_fragments", Arg::I(k.retransmitted_frags as i64)));
                }
                chain.push(Slice {
                    track: Track::Wire(k.sender.clone(), topic.clone(), false),
                    start: k.sender_first,
                    end: k.sender_last.unwrap_or(k.sender_first).max(k.sender_first),
                    name: name.clone(),
                    args: sample_args(extra),
                    instant: false,
                });
                match (k.status, k.receiver_first) {
                    (Status::Lost, _) | (_, None) => {
                        stats.lost += 1;
                        chain.push(Slice {
                            track: Track::Wire(k.receiver.clone(), topic.clone(), true),
                            start: k.sender_first,
                            end: k.sender_first,
                            name: format!("{name} lost"),
                            args: sample_args(vec![("from", Arg::S(k.sender.clone())), ("status", Arg::S(Arc::from(k.status.as_str())))]),
                            instant: true,
                        });
                    }
                    (st, Some(first)) => {
                        let mut extra = vec![("from", Arg::S(k.sender.clone())), ("status", Arg::S(Arc::from(st.as_str())))];
                        if let Some(l) = k.latency {
                            extra.push(("latency_ns", Arg::I(l)));
                        }
                        if k.repaired {
                            extra.push(("repaired", Arg::B(true)));
                        }
                        if k.duplicate_frags > 0 {
                            extra.push(("duplicate_fragments", Arg::I(k.duplicate_frags as i64)));
                        }
                        if let Some(e) = k.clock_error {
                            extra.push(("clock_error_ns", Arg::I(e)));
                        }
                        chain.push(Slice {
                            track: Track::Wire(k.receiver.clone(), topic.clone(), true),
                            start: first,
                            end: k.receiver_last.unwrap_or(first).max(first),
                            name: if st == Status::Incomplete { format!("{name} incomplete") } else { name.clone() },
                            args: sample_args(extra),
                            instant: false,
                        });
                    }
                }
            }
            if let Some(r) = ros {
                let (pid, tid) = r.receiver_thread.unwrap_or((-1, -1));
                let track = Track::Thread(k.receiver.clone(), pid, tid);
                let mut node = vec![("join", Arg::S(Arc::from(k.join)))];
                if let Some(n) = &r.receiver_node {
                    node.push(("node", Arg::S(n.clone())));
                }
                if let Some(t) = r.rmw_take_ts_ns {
                    let end = r.callback_start_ts_ns.unwrap_or(t).max(t);
                    chain.push(Slice { track: track.clone(), start: t, end, name: format!("take {topic}"), args: sample_args(node.clone()), instant: false });
                }
                if let Some(s) = r.callback_start_ts_ns {
                    let mut a = node;
                    if let Some(e) = r.ros_e2e_ns {
                        a.push(("ros_e2e_ns", Arg::I(e)));
                    }
                    chain.push(Slice {
                        track,
                        start: s,
                        end: r.callback_end_ts_ns.unwrap_or(s).max(s),
                        name: format!("callback {topic}"),
                        args: sample_args(a),
                        instant: false,
                    });
                }
            }
            for s in &chain {
                slices.insert(s.clone());
            }
            if chain.len() >= 2 {
                chains.push((format!("{name} → {}", k.receiver), chain));
            }
        }
        // The processes (hosts) and their tracks; a track's overlapping slices in lanes.
        let hosts: BTreeSet<Arc<str>> = slices.iter().map(|s| s.track.host().clone()).collect();
        let pid_of: BTreeMap<Arc<str>, usize> = hosts.iter().enumerate().map(|(i, h)| (h.clone(), i + 1)).collect();
        let mut by_track: BTreeMap<Track, Vec<&Slice>> = BTreeMap::new();
        for s in &slices {
            by_track.entry(s.track.clone()).or_default().push(s);
        }
        // The nodes seen on each thread, to name it.
        let mut nodes: BTreeMap<Track, BTreeSet<Arc<str>>> = BTreeMap::new();
        for s in &slices {
            if let (Track::Thread(..), Some((_, Arg::S(n)))) = (&s.track, s.args.iter().find(|(k, _)| *k == "node")) {
                nodes.entry(s.track.clone()).or_default().insert(n.clone());
            }
        }
        let mut lane_of: BTreeMap<&Slice, (usize, usize)> = BTreeMap::new(); // slice → (pid, tid)
        let mut thread_names: Vec<(usize, usize, String)> = vec![];
        let mut next_tid: BTreeMap<usize, usize> = BTreeMap::new();
        for (track, list) in &by_track {
            let pid = pid_of[track.host()];
            let lanes = assign_lanes(list);
            let n_lanes = lanes.iter().copied().max().map_or(0, |m| m + 1);
            stats.extra_lanes += (n_lanes > 1) as u64;
            let base = *next_tid.entry(pid).or_insert(1);
            *next_tid.get_mut(&pid).expect("inserted") += n_lanes;
            let label = match track {
                Track::Wire(_, topic, false) => format!("wire out {topic}"),
                Track::Wire(_, topic, true) => format!("wire in {topic}"),
                Track::Thread(_, vpid, vtid) => {
                    let who = nodes.get(track).map(|n| n.iter().map(|s| &**s).collect::<Vec<_>>().join(", ")).unwrap_or_default();
                    let id = if *vtid >= 0 { format!("thread {vtid} (pid {vpid})") } else { "thread".to_string() };
                    if who.is_empty() { id } else { format!("{who} {id}") }
                }
            };
            for lane in 0..n_lanes {
                thread_names.push((pid, base + lane, if lane == 0 { label.clone() } else { format!("{label} ({})", lane + 1) }));
            }
            for (s, lane) in list.iter().zip(lanes) {
                lane_of.insert(s, (pid, base + lane));
            }
        }
        let base_ns = slices.iter().map(|s| s.start).min().map_or(0, |t| t.div_euclid(1_000_000_000) * 1_000_000_000);
        // ns as µs with three decimals, from the base (exact where a reader parses a double)
        let us = |d: i64| format!("{}.{:03}", d.div_euclid(1000), d.rem_euclid(1000));
        let ts = |t: i64| us(t - base_ns);
        let q = |s: &str| serde_json::to_string(s).expect("a string serialises");
        let mut w = io::BufWriter::new(out);
        writeln!(
            w,
            "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"producer\":{},\"base_ns\":\"{base_ns}\",\"base_utc\":{},\"rows_seen\":{},\"rows_not_drawn\":{},\"clock\":\"the latency rows' instants: capture clock offsets and the clock tracker applied\"}},\"traceEvents\":[",
            q(&format!("ddscope {}", env!("CARGO_PKG_VERSION"))),
            q(&utc_text(base_ns)),
            self.stats.rows,
            self.stats.rows_not_drawn,
        )?;
        let mut first = true;
        let mut sep = |w: &mut io::BufWriter<&mut dyn Write>| -> io::Result<()> {
            if !std::mem::take(&mut first) {
                w.write_all(b",\n")?;
            }
            Ok(())
        };
        for (h, pid) in &pid_of {
            sep(&mut w)?;
            write!(w, "{{\"ph\":\"M\",\"pid\":{pid},\"name\":\"process_name\",\"args\":{{\"name\":{}}}}}", q(h))?;
            sep(&mut w)?;
            write!(w, "{{\"ph\":\"M\",\"pid\":{pid},\"name\":\"process_sort_index\",\"args\":{{\"sort_index\":{pid}}}}}")?;
        }
        for (pid, tid, n) in &thread_names {
            sep(&mut w)?;
            write!(w, "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_name\",\"args\":{{\"name\":{}}}}}", q(n))?;
            sep(&mut w)?;
            write!(w, "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{tid}}}}}")?;
        }
        let args_json = |a: &[(&'static str, Arg)]| {
            let parts: Vec<String> = a
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        Arg::I(i) => i.to_string(),
                        Arg::S(s) => q(s),
                        Arg::B(b) => b.to_string(),
                    };
                    format!("{}:{v}", q(k))
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        };
        let mut ordered: Vec<(&(usize, usize), &Slice)> = lane_of.iter().map(|(s, p)| (p, *s)).collect();
        ordered.sort_by(|a, b| (a.0, a.1.start, std::cmp::Reverse(a.1.end)).cmp(&(b.0, b.1.start, std::cmp::Reverse(b.1.end))));
        for ((pid, tid), s) in ordered {
            sep(&mut w)?;
            stats.slices += 1;
            if s.instant {
                write!(w, "{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{pid},\"tid\":{tid},\"name\":{},\"cat\":\"lost\",\"ts\":{},\"args\":{}}}", q(&s.name), ts(s.start), args_json(&s.args))?;
            } else {
                write!(
                    w,
                    "{{\"ph\":\"X\",\"pid\":{pid},\"tid\":{tid},\"name\":{},\"cat\":\"{}\",\"ts\":{},\"dur\":{},\"args\":{}}}",
                    q(&s.name),
                    if matches!(s.track, Track::Wire(..)) { "wire" } else { "ros2" },
                    ts(s.start),
                    us(s.end - s.start),
                    args_json(&s.args)
                )?;
            }
        }
        // Flows: a sample's instants across hosts, bound to the slices they point at (Chrome's flow
        // events: start, steps, finish, each bound to the slice enclosing its time). Readers sort the
        // events by time, so a flow's times never go back: a step is placed at the previous one's
        // time where its slice begins earlier (a receive the clocks put before its send, within the
        // clock error bar) and still covers it; where it ended before, the arrow is split there.
        let mut id = 0u64;
        for (name, chain) in &chains {
            let parts = flow_parts(chain.iter().filter(|s| !s.instant).map(|s| (s, s.start, s.end)));
            stats.flows_split += parts.len().saturating_sub(1) as u64;
            for part in parts {
                if part.len() < 2 {
                    continue;
                }
                id += 1;
                stats.flows += 1;
                for (i, (s, t)) in part.iter().enumerate() {
                    let (pid, tid) = lane_of[*s];
                    let ph = if i == 0 { "s" } else if i + 1 == part.len() { "f" } else { "t" };
                    sep(&mut w)?;
                    write!(
                        w,
                        "{{\"ph\":\"{ph}\",{}\"pid\":{pid},\"tid\":{tid},\"name\":{},\"cat\":\"sample\",\"id\":{id},\"ts\":{}}}",
                        if ph == "f" { "\"bp\":\"e\"," } else { "" },
                        q(name),
                        ts(*t)
                    )?;
                }
            }
        }
        w.write_all(b"\n]}\n")?;
        w.flush()?;
        Ok(stats)
    }
}

/// A chain of (item, start, end) cut into flows whose times only go forward (readers order a flow's
/// points by time, and points of one time in no defined order): each item at its own start or 1 ns
/// after the previous item's time, whichever is later, while that lies within it; a new flow where
/// it does not (the item ended before).
fn flow_parts<T: Copy>(chain: impl Iterator<Item = (T, i64, i64)>) -> Vec<Vec<(T, i64)>> {
    let mut parts: Vec<Vec<(T, i64)>> = vec![];
    let mut last: Option<i64> = None;
    for (item, start, end) in chain {
        match last {
            Some(t) if start.max(t + 1) <= end => {
                let t = start.max(t + 1);
                parts.last_mut().expect("a part is open").push((item, t));
                last = Some(t);
            }
            _ => {
                parts.push(vec![(item, start)]);
                last = Some(start);
            }
        }
    }
    parts
}

/// Lanes for a track's slices so that each lane nests: a slice goes to the first lane where it
/// starts after the lane's open slices end, or lies within the innermost one.
fn assign_lanes(list: &[&Slice]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..list.len()).collect();
    order.sort_by_key(|&i| (list[i].start, std::cmp::Reverse(list[i].end)));
    let mut stacks: Vec<Vec<i64>> = vec![];
    let mut lane = vec![0; list.len()];
    for i in order {
        let s = list[i];
        let mut placed = None;
        for (l, st) in stacks.iter_mut().enumerate() {
            while st.last().is_some_and(|&e| e <= s.start) {
                st.pop();
            }
            if st.last().is_none_or(|&e| s.end <= e) {
                st.push(s.end);
                placed = Some(l);
                break;
            }
        }
        lane[i] = placed.unwrap_or_else(|| {
            stacks.push(vec![s.end]);
            stacks.len() - 1
        });
    }
    lane
}

/// `2026-12-08T02:53:26Z` of ns since 1970 (UTC).
fn utc_text(ns: i64) -> String {
    let [y, m, d, hh, mm, ss] = ddscope_traffic::text::utc_fields(ns.div_euclid(1_000_000_000));
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(start: i64, end: i64) -> Slice {
        Slice { track: Track::Wire(Arc::from("h"), Arc::from("/t"), false), start, end, name: String::new(), args: vec![], instant: false }
    }

    #[test]
    fn lanes_nest_and_overlaps_move_to_a_second_lane() {
        let s = [slice(0, 10), slice(2, 5), slice(5, 9), slice(8, 12), slice(12, 20), slice(12, 12)];
        let list: Vec<&Slice> = s.iter().collect();
        // (8,12) overlaps (0,10) without nesting: second lane; (12,20) starts as (0,10)'s lane is free.
        assert_eq!(assign_lanes(&list), vec![0, 0, 0, 1, 0, 0]);
    }

    #[test]
    fn flows_never_go_back_in_time() {
        // a receive put 1 ns before its send, lasting 54 ns: the step moves just after the send's time
        let p = flow_parts([(1, 100, 150), (2, 99, 154), (3, 160, 170)].into_iter());
        assert_eq!(p, vec![vec![(1, 100), (2, 101), (3, 160)]]);
        // a step at the same time as the previous one moves 1 ns on
        let p = flow_parts([(1, 100, 150), (2, 100, 154)].into_iter());
        assert_eq!(p, vec![vec![(1, 100), (2, 101)]]);
        // a one-frame receive before the send: the arrow is split there
        let p = flow_parts([(1, 100, 150), (2, 99, 99), (3, 160, 170)].into_iter());
        assert_eq!(p, vec![vec![(1, 100)], vec![(2, 99), (3, 160)]]);
    }

    #[test]
    fn utc_text_of_known_instants() {
        assert_eq!(utc_text(0), "1970-01-01T00:00:00Z");
        // date -u -d @1796698406
        assert_eq!(utc_text(1_796_698_406_000_000_000), "2026-12-08T02:53:26Z");
        assert_eq!(utc_text(951_782_400_000_000_000), "2000-02-29T00:00:00Z");
    }
}
