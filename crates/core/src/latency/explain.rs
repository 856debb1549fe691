//! "Why was this message late?": incidents and their verdicts (issue 27).
//!
//! Every per-sample row of a run (message level) is kept in a compact form
//! (bounded, `max_samples`; what is over the cap is counted). At the end each
//! flow (topic, sender, receiver) gets its typical value per layer (the
//! median of its delivered samples), and every sample that is an *incident*
//! — over its topic's budget, lost or incomplete, late against its period,
//! an outlier of its own flow, or with a layer that cannot be negative
//! measured negative — is attributed:
//!
//! * the **layer** that took the excess: the layer whose value is furthest
//!   above that layer's typical value, of the decomposition the sample has
//!   (ROS 2 layers from traces, else the application's stacks from ground
//!   truth, else the wire alone: first fragment out → first in, then the
//!   rest of the sample);
//! * the **cause** the evidence supports, or `unknown`: never a cause without
//!   the evidence printed beside it. See docs/latency.md ("Why was it late").

use super::cpuload::CpuLoad;
use super::layers::{Level, Status, Timing};
use super::rows::LatencyRow;
use crate::pipeline::LinkLoad;
use ddscope_wire::Guid;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;

/// A budget's value: given, or derived per flow from the run itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// A duration (ns).
    Fixed(i64),
    /// The flow's publication period (the median interval between its samples at the sender).
    Period,
    /// The flow's own end-to-end percentile over its delivered samples (0 < p < 100).
    Percentile(f64),
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Fixed(ns) => write!(f, "{}", fmt_ms(*ns)),
            Limit::Period => write!(f, "period"),
            Limit::Percentile(p) => write!(f, "p{p}"),
        }
    }
}

/// A latency budget for the topics matching a glob (`/image`, `/camera/*`).
#[derive(Debug, Clone)]
pub struct Budget {
    pub pattern: String,
    pub limit: Limit,
    /// The end-to-end measure it judges (`ros_e2e`, `application`, `wire`); `None`: whichever the
    /// flow has (`latency --budget`). `serve` ties each of its `TOPIC:LAYER` budgets to the measure
    /// that layer is.
    pub measure: Option<&'static str>,
    matcher: globset::GlobMatcher,
}

impl Budget {
    pub fn new(pattern: &str, ns: i64) -> Result<Budget, String> {
        Budget::with_limit(pattern, Limit::Fixed(ns))
    }

    pub fn with_limit(pattern: &str, limit: Limit) -> Result<Budget, String> {
        match limit {
            Limit::Fixed(ns) if ns <= 0 => return Err(format!("budget of {pattern}: must be more than 0")),
            Limit::Percentile(p) if !(p > 0.0 && p < 100.0) => return Err(format!("budget of {pattern}: a percentile is between 0 and 100 (p99, p99.9)")),
            _ => {}
        }
        let g = globset::Glob::new(pattern).map_err(|e| format!("budget topic pattern {pattern:?}: {e}"))?;
        Ok(Budget { pattern: pattern.to_string(), limit, measure: None, matcher: g.compile_matcher() })
    }

    /// The budget judges only flows whose end to end is `measure` (`ros_e2e`, `application`, `wire`).
    pub fn for_measure(mut self, measure: &'static str) -> Budget {
        self.measure = Some(measure);
        self
    }
    /// Whether this budget applies to `topic` (its name, or its glob).
    pub fn matches(&self, topic: &str) -> bool {
        self.pattern == topic || self.matcher.is_match(topic)
    }
}

/// What makes a sample an incident and what is kept.
#[derive(Debug, Clone)]
pub struct ExplainOptions {
    /// Per-topic budgets (the first matching one applies).
    pub budgets: Vec<Budget>,
    /// Samples kept for the analysis; beyond it samples are counted, not judged.
    pub max_samples: usize,
    /// Flows (topic, sender, receiver) kept; samples of further flows are counted.
    pub max_flows: usize,
    /// An outlier: more than `outlier_factor` × the flow's median above it, and at least `outlier_floor_ns` above.
    pub outlier_factor: f64,
    pub outlier_floor_ns: i64,
    /// A layer this far below zero is impossible on correct clocks.
    pub negative_tolerance_ns: i64,
    /// Worst examples printed.
    pub examples: usize,
    /// The capture points' link rate (bit/s) for the link-queueing evidence; `None`: each
    /// capture's busiest `link_peak_span_ns` stands for it.
    pub link_rate_bps: Option<f64>,
    /// Where `link_rate_bps` came from (said in the evidence).
    pub link_rate_from: &'static str,
    pub link_peak_span_ns: i64,
    /// A link carrying at least this share of its rate while a sample waited was busy enough to queue it.
    pub link_busy_share: f64,
    /// A process other than the waiting node keeping at least this many cores busy while the sample
    /// waited (per-process load) took the CPU from it.
    pub cpu_busy_cores: f64,
}

impl Default for ExplainOptions {
    fn default() -> Self {
        ExplainOptions {
            budgets: vec![],
            max_samples: 1_000_000,
            max_flows: 16_384,
            outlier_factor: 3.0,
            outlier_floor_ns: 2_000_000,
            negative_tolerance_ns: 50_000,
            examples: 10,
            link_rate_bps: None,
            link_rate_from: "the link rate given",
            link_peak_span_ns: 1_000_000,
            link_busy_share: 0.8,
            cpu_busy_cores: 0.3,
        }
    }
}

/// The layers a sample's end-to-end latency is split into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    SenderStack,
    RosPublish,
    DdsSend,
    /// First DATA/DATA_FRAG out at the sender → first in at the receiver.
    WireFirst,
    /// First in at the receiver → the sample complete there (further fragments, repairs).
    WireRest,
    DdsLocal,
    DdsRemote,
    DdsReceive,
    ReceiverStack,
    Executor,
}
const NL: usize = 10;
const LAYERS: [Layer; NL] = [
    Layer::SenderStack,
    Layer::RosPublish,
    Layer::DdsSend,
    Layer::WireFirst,
    Layer::WireRest,
    Layer::DdsLocal,
    Layer::DdsRemote,
    Layer::DdsReceive,
    Layer::ReceiverStack,
    Layer::Executor,
];

impl Layer {
    pub fn name(self) -> &'static str {
        match self {
            Layer::SenderStack => "sender_stack",
            Layer::RosPublish => "ros_publish",
            Layer::DdsSend => "dds_send",
            Layer::WireFirst => "wire_first",
            Layer::WireRest => "wire_rest",
            Layer::DdsLocal => "dds_local",
            Layer::DdsRemote => "dds_remote",
            Layer::DdsReceive => "dds_receive",
            Layer::ReceiverStack => "receiver_stack",
            Layer::Executor => "executor",
        }
    }
    fn wire(self) -> bool {
        matches!(self, Layer::WireFirst | Layer::WireRest)
    }
    fn sender(self) -> bool {
        matches!(self, Layer::SenderStack | Layer::RosPublish | Layer::DdsSend)
    }
    fn receiver(self) -> bool {
        matches!(self, Layer::DdsReceive | Layer::ReceiverStack | Layer::Executor)
    }
}

/// Why a sample is an incident.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// End to end over its topic's budget.
    OverBudget,
    /// Never complete at the receiver (lost, or fragments missing).
    Lost,
    /// Late against its publication period (seed 003's in time / late).
    Late,
    /// Far above its own flow's median.
    Outlier,
    /// A layer measured negative: impossible on correct clocks.
    Impossible,
}

/// The verdict's cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Fragments or samples retransmitted (NACK/ACKNACK → repair) and the wire took the excess.
    Repair,
    /// Never completed at the receiver.
    Loss,
    /// A previous sample of the same writer was still arriving at the receiver when this one was sent.
    HeadOfLine,
    /// The writer sent a burst just before this sample.
    SenderBurst,
    /// The receiving node's previous callback of the same subscription was still running (took longer than it typically does).
    CallbackOverrun,
    /// The receiving node's executor was busy with another callback when the sample arrived.
    ExecutorBusy,
    /// The link was busy (near its rate) while the sample waited: queued behind other traffic.
    LinkQueueing,
    /// Another process on the host kept a CPU busy while the sample waited in a stack (a CPU hog).
    CpuContention,
    /// A layer is negative: the capture points' (or hosts') clocks disagree by at least that much.
    ClockOffset,
    /// The evidence does not decide.
    Unknown,
}

impl Cause {
    /// Every cause, in the order of the enum.
    pub const ALL: [Cause; 10] = [
        Cause::Repair,
        Cause::Loss,
        Cause::HeadOfLine,
        Cause::SenderBurst,
        Cause::CallbackOverrun,
        Cause::ExecutorBusy,
        Cause::LinkQueueing,
        Cause::CpuContention,
        Cause::ClockOffset,
        Cause::Unknown,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Cause::Repair => "repair",
            Cause::Loss => "loss",
            Cause::HeadOfLine => "head_of_line",
            Cause::SenderBurst => "sender_burst",
            Cause::CallbackOverrun => "callback_overrun",
            Cause::ExecutorBusy => "executor_busy",
            Cause::LinkQueueing => "link_queueing",
            Cause::CpuContention => "cpu_contention",
            Cause::ClockOffset => "clock_offset",
            Cause::Unknown => "unknown",
        }
    }
}

/// One sample as kept for the analysis.
#[derive(Debug, Clone)]
struct Sample {
    flow: u32,
    writer: Guid,
    sn: i64,
    /// Delivered (on the wire or traced), lost or incomplete.
    status: Status,
    late: bool,
    /// End to end and what it measures (ros_e2e, application, wire).
    e2e: Option<i64>,
    e2e_kind: &'static str,
    layers: [Option<i64>; NL],
    /// Other values that can be negative only on wrong clocks.
    extra_checks: [Option<i64>; 2],
    sender_first: i64,
    /// The first IP fragment of the first datagram at the sender (its first byte on the wire).
    sender_first_ip: i64,
    /// The sample's own bytes on the wire, at most (payload and headers; unknown size: all RTPS bytes may be its own).
    own_bytes: f64,
    receiver_first: Option<i64>,
    receiver_last: Option<i64>,
    /// When the sample was ready to be taken: complete at the receiver's capture point, or (trace to trace) its rmw_publish.
    ready: Option<i64>,
    retransmitted: u32,
    duplicates: u32,
    repaired: bool,
    frags: Option<u32>,
    take: Option<i64>,
    callback: Option<(i64, i64)>,
    receiver_node: Option<Arc<str>>,
    sender_node: Option<Arc<str>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FlowKey {
    pub topic: String,
    pub domain: Option<u32>,
    pub sender: Arc<str>,
    pub receiver: Arc<str>,
}

/// One incident and its verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Incident {
    pub topic: String,
    pub domain: Option<u32>,
    pub sender: Arc<str>,
    pub receiver: Arc<str>,
    pub writer_id: String,
    /// The writer (the sample's trace id with `sn`).
    #[serde(skip)]
    pub writer: Guid,
    pub sn: i64,
    pub kinds: Vec<Kind>,
    pub sender_first_ts_ns: i64,
    /// End to end (what `e2e_measure` says) and the flow's typical (median) one.
    pub e2e_ns: Option<i64>,
    pub e2e_measure: &'static str,
    pub typical_e2e_ns: Option<i64>,
    pub budget_ns: Option<i64>,
    /// The layer that took the excess and by how much (over that layer's typical value).
    pub layer: Option<Layer>,
    pub layer_ns: Option<i64>,
    pub layer_typical_ns: Option<i64>,
    pub cause: Cause,
    pub evidence: String,
}

impl Incident {
    /// The latency above the flow's typical end to end (0 for lost samples and where unknown).
    pub fn excess_ns(&self) -> i64 {
        match (self.e2e_ns, self.typical_e2e_ns) {
            (Some(v), Some(t)) => (v - t).max(0),
            _ => 0,
        }
    }
}

/// Per cause: how many incidents and their share of the total excess.
#[derive(Debug, Clone, Serialize)]
pub struct CauseRow {
    pub cause: Cause,
    pub incidents: u64,
    pub over_budget: u64,
    pub lost: u64,
    pub excess_ms: f64,
    pub share_of_excess_pct: f64,
    /// The layer most incidents of this cause were attributed to.
    pub layer: Option<Layer>,
}

/// The analysis' result.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Explanation {
    pub samples: u64,
    pub samples_not_kept: u64,
    pub flows_not_kept: u64,
    pub incidents: Vec<Incident>,
    pub by_cause: Vec<CauseRow>,
    pub by_kind: Vec<(Kind, u64)>,
    /// Incidents that break a budget (over it, or lost on a budgeted topic).
    pub budget_broken: u64,
    /// The budgets given: topic pattern and value (a duration, `period` or `pNN`).
    pub budgets: Vec<(String, String)>,
    /// The capture points' link timelines the queueing evidence was read from.
    pub links: Vec<LinkInfo>,
    /// The per-process load the CPU evidence was read from.
    pub cpu_load: Option<CpuLoadInfo>,
}

/// The per-process load as the analysis used it.
#[derive(Debug, Clone, Serialize)]
pub struct CpuLoadInfo {
    pub files: Vec<String>,
    pub hosts: Vec<Arc<str>>,
    /// The median interval between a process's readings: waits shorter than it are not judged.
    pub interval_ns: Option<i64>,
    pub lines: u64,
    pub bad_lines: u64,
    pub not_kept: u64,
    pub first_problem: Option<String>,
}

/// A capture point's link timeline as the analysis used it.
#[derive(Debug, Clone, Serialize)]
pub struct LinkInfo {
    pub capture: Arc<str>,
    /// Bin width in the end (it doubles when a capture outgrows the bins).
    pub bin_ns: i64,
    pub merges: u32,
    /// Frames before the timeline's start (time going back), not counted.
    pub frames_before_start: u64,
    /// The rate a busy link is measured against, and where it came from.
    pub rate_bps: f64,
    pub rate_from: &'static str,
}

/// Collects rows, then judges them.
pub struct Explainer {
    opts: ExplainOptions,
    links: HashMap<Arc<str>, LinkLoad>,
    cpu: Option<CpuLoad>,
    flows: Vec<FlowKey>,
    flow_ids: HashMap<(String, Option<u32>, Arc<str>, Arc<str>), u32>,
    samples: Vec<Sample>,
    seen: u64,
    not_kept: u64,
    flows_not_kept: u64,
}

fn median(v: &mut [i64]) -> Option<i64> {
    if v.is_empty() {
        return None;
    }
    let m = v.len() / 2;
    let (_, x, _) = v.select_nth_unstable(m);
    Some(*x)
}

/// The explainer looks at every row of a run (through a topic [`Select`](crate::sink::Select) when the
/// command has one).
impl crate::sink::RowSink<LatencyRow> for Explainer {
    fn row(&mut self, r: &LatencyRow) {
        self.add(r)
    }
}

impl Explainer {
    pub fn new(opts: ExplainOptions) -> Explainer {
        Explainer { opts, links: HashMap::new(), cpu: None, flows: vec![], flow_ids: HashMap::new(), samples: vec![], seen: 0, not_kept: 0, flows_not_kept: 0 }
    }

    /// What a capture point's link carried over time (the link-queueing evidence).
    pub fn add_link(&mut self, capture: &str, load: LinkLoad) {
        self.links.insert(Arc::from(capture), load);
    }

    /// What each process on the hosts used of the CPU over time (the CPU-contention evidence).
    pub fn add_cpu_load(&mut self, load: CpuLoad) {
        self.cpu = Some(load);
    }

    /// Takes one per-sample row (submessage rows are ignored).
    pub fn add(&mut self, r: &LatencyRow) {
        if r.level != Level::Message {
            return;
        }
        self.seen += 1;
        if self.samples.len() >= self.opts.max_samples {
            self.not_kept += 1;
            return;
        }
        let topic = r.topic.as_ref().map(|t| t.topic_name.clone()).unwrap_or_else(|| format!("writer {}", r.writer_id));
        let key = (topic, r.topic.as_ref().and_then(|t| t.domain), r.sender.clone(), r.receiver.clone());
        let flow = match self.flow_ids.get(&key) {
            Some(f) => *f,
            None => {
                if self.flows.len() >= self.opts.max_flows {
                    self.flows_not_kept += 1;
                    self.not_kept += 1;
                    return;
                }
                let id = self.flows.len() as u32;
                self.flows.push(FlowKey { topic: key.0.clone(), domain: key.1, sender: key.2.clone(), receiver: key.3.clone() });
                self.flow_ids.insert(key, id);
                id
            }
        };
        let ros = r.ros.as_deref();
        let mut layers = [None; NL];
        let (e2e, e2e_kind) = if let Some(e) = ros.and_then(|c| c.ros_e2e_ns) {
            let c = ros.unwrap();
            layers[1] = c.ros_publish_ns;
            layers[2] = c.dds_send_ns;
            layers[5] = c.dds_local_ns;
            layers[6] = c.dds_remote_ns;
            layers[7] = c.dds_receive_ns;
            layers[9] = c.executor_ns;
            if c.dds_local_ns.is_none() && c.dds_remote_ns.is_none() {
                (layers[3], layers[4]) = wire_split(r);
            }
            (Some(e), "ros_e2e")
        } else if let Some(e) = r.app_latency_ns {
            layers[0] = r.sender_stack_ns;
            (layers[3], layers[4]) = wire_split(r);
            layers[8] = r.receiver_stack_ns;
            (Some(e), "application")
        } else {
            (layers[3], layers[4]) = wire_split(r);
            (r.latency_ns, "wire")
        };
        let status = match r.status {
            Status::Delivered | Status::SameHost | Status::Traced => Status::Delivered,
            s => s,
        };
        self.samples.push(Sample {
            flow,
            writer: r.writer_id,
            sn: r.sn,
            status,
            late: r.timing == Some(Timing::Late),
            e2e,
            e2e_kind,
            layers,
            extra_checks: [r.latency_ns, r.last_last_ns],
            sender_first: r.sender_first_ts_ns,
            sender_first_ip: r.sender_first_ip_ts_ns,
            own_bytes: r.sample_size.map_or(f64::INFINITY, |n| OWN_BYTES_FACTOR * n as f64),
            receiver_first: r.receiver_first_ts_ns,
            receiver_last: r.receiver_last_ts_ns,
            ready: r.receiver_last_ts_ns.or_else(|| ros.filter(|c| c.dds_local_ns.is_some() || c.dds_remote_ns.is_some()).and_then(|c| c.rmw_publish_ts_ns)),
            retransmitted: r.sender_retransmitted_frags,
            duplicates: r.receiver_duplicate_frags,
            repaired: r.repaired,
            frags: r.frags_expected,
            take: ros.and_then(|c| c.rmw_take_ts_ns),
            callback: ros.and_then(|c| Some((c.callback_start_ts_ns?, c.callback_end_ts_ns?))),
            receiver_node: ros.and_then(|c| c.receiver_node.clone()),
            sender_node: ros.and_then(|c| c.sender_node.clone()),
        });
    }

    /// The first budget matching the topic that judges the flow's end-to-end measure.
    fn budget(&self, topic: &str, measure: Option<&'static str>) -> Option<Limit> {
        self.opts.budgets.iter().find(|b| b.matches(topic) && (b.measure.is_none() || b.measure == measure)).map(|b| b.limit)
    }

    /// Judges every kept sample.
    pub fn finish(mut self) -> Explanation {
        let nf = self.flows.len();
        // Typical values per flow: medians over delivered samples.
        let mut typical_e2e: Vec<Option<i64>> = vec![None; nf];
        let mut typical: Vec<[Option<i64>; NL]> = vec![[None; NL]; nf];
        let mut typical_cb: Vec<Option<i64>> = vec![None; nf];
        let mut period: Vec<Option<i64>> = vec![None; nf];
        let mut flow_budget: Vec<Option<i64>> = vec![None; nf];
        {
            let mut by_flow: Vec<Vec<usize>> = vec![vec![]; nf];
            for (i, s) in self.samples.iter().enumerate() {
                by_flow[s.flow as usize].push(i);
            }
            let mut buf = vec![];
            for (f, idx) in by_flow.iter().enumerate() {
                let ok = || idx.iter().map(|&i| &self.samples[i]).filter(|s| s.status == Status::Delivered);
                buf.clear();
                buf.extend(ok().filter_map(|s| s.e2e));
                typical_e2e[f] = median(&mut buf);
                for l in 0..NL {
                    buf.clear();
                    buf.extend(ok().filter_map(|s| s.layers[l]));
                    typical[f][l] = median(&mut buf);
                }
                buf.clear();
                buf.extend(ok().filter_map(|s| s.callback.map(|(a, b)| b - a)));
                typical_cb[f] = median(&mut buf);
                // Publication period: median interval between the flow's first sightings.
                let mut t: Vec<i64> = idx.iter().map(|&i| self.samples[i].sender_first).collect();
                t.sort_unstable();
                buf.clear();
                buf.extend(t.windows(2).map(|w| w[1] - w[0]).filter(|d| *d > 0));
                period[f] = median(&mut buf);
                // The flow's budget: given, or derived from the flow itself (its period, a percentile of its end to end).
                // The flow's end-to-end measure: that of most of its samples (traced, ground truth, wire).
                let mut measures: Vec<&'static str> = idx.iter().map(|&i| self.samples[i].e2e_kind).collect();
                measures.sort_unstable();
                let measure = measures.chunk_by(|a, b| a == b).max_by_key(|c| c.len()).map(|c| c[0]);
                flow_budget[f] = match self.budget(&self.flows[f].topic, measure) {
                    None => None,
                    Some(Limit::Fixed(ns)) => Some(ns),
                    Some(Limit::Period) => period[f],
                    Some(Limit::Percentile(p)) => {
                        buf.clear();
                        buf.extend(ok().filter_map(|s| s.e2e));
                        buf.sort_unstable();
                        // Nearest rank: the smallest value with at least p % of the samples at or below it.
                        let rank = ((p / 100.0) * buf.len() as f64).ceil() as usize;
                        buf.get(rank.max(1) - 1).copied()
                    }
                };
            }
        }
        // Per receiving node: its callbacks (start, end, sample index) in start order, for the executor's evidence.
        let mut node_callbacks: HashMap<(Arc<str>, Arc<str>), Vec<(i64, i64, usize)>> = HashMap::new();
        for (i, s) in self.samples.iter().enumerate() {
            if let (Some(n), Some((a, b))) = (&s.receiver_node, s.callback) {
                node_callbacks.entry((self.flows[s.flow as usize].receiver.clone(), n.clone())).or_default().push((a, b, i));
            }
        }
        for v in node_callbacks.values_mut() {
            v.sort_unstable();
        }
        // Per writer and receiver: samples in send order, for head-of-line and bursts.
        let mut by_writer: HashMap<(Guid, Arc<str>), Vec<(i64, usize)>> = HashMap::new();
        for (i, s) in self.samples.iter().enumerate() {
            by_writer.entry((s.writer, self.flows[s.flow as usize].receiver.clone())).or_default().push((s.sender_first, i));
        }
        for v in by_writer.values_mut() {
            v.sort_unstable();
        }
        // The links' rates, and a test of "the link was busy while the sample waited in [from, to)".
        let mut links: Vec<LinkInfo> = self
            .links
            .iter()
            .map(|(c, l)| {
                let (rate_bps, rate_from) = match self.opts.link_rate_bps {
                    Some(r) => (r, self.opts.link_rate_from),
                    None => (l.peak_bps(self.opts.link_peak_span_ns), "the capture's busiest 1 ms"),
                };
                LinkInfo { capture: c.clone(), bin_ns: l.bin_ns, merges: l.merges, frames_before_start: l.frames_before_start, rate_bps, rate_from }
            })
            .collect();
        links.sort_by(|a, b| a.capture.cmp(&b.capture));
        // Busy with other traffic than the sample itself: its own bytes (RTPS, at most its size with
        // headers) may be in the window too and are taken out first.
        let busy_link = |capture: &Arc<str>, from: i64, to: i64, before: &str, own: f64| -> Option<String> {
            let l = self.links.get(capture)?;
            let info = links.iter().find(|i| &i.capture == capture)?;
            // Bins wider than the wait cannot say whether the link was busy during it.
            if info.rate_bps <= 0.0 || to - from < l.bin_ns {
                return None;
            }
            let (all, rtps) = l.bytes_between(from, to);
            let bps = all * 8.0 * 1e9 / (to - from) as f64;
            let others = (all - rtps.min(own)) * 8.0 * 1e9 / (to - from) as f64;
            (others >= self.opts.link_busy_share * info.rate_bps).then(|| {
                format!(
                    "{capture}'s link carried {:.0} kB in the {:.3} ms before {before} ({}, {:.0} % of {}, {}); {:.0} % of it not RTPS",
                    all / 1e3,
                    (to - from) as f64 / 1e6,
                    rate_text(bps),
                    100.0 * bps / info.rate_bps,
                    rate_text(info.rate_bps),
                    info.rate_from,
                    100.0 * (all - rtps) / all.max(1.0)
                )
            })
        };
        // Another process on `host` than the waiting node kept a CPU busy while the sample waited in
        // [from, to) (`what`): between the readings around the wait (at most one interval outside it on
        // each side) it kept at least `cpu_busy_cores` busy and ran at least 60 % as long as the wait (the rest: the
        // host waking the node once the CPU was free, which a loaded host takes longer to do).
        // The readings that bracket a wait may lie a little more than one interval from it: a
        // sampler's period jitters (a lab run's 10 ms readings came 10.0–13.1 ms apart, p99 10.4 ms;
        // a bracket 10.26 ms before the wait left 22 of 26 CPU-hog incidents `unknown`).
        let cpu_interval = self.cpu.as_ref().and_then(|c| c.interval_ns());
        let cpu_slack = cpu_interval.map(|i| i + i / 2);
        let cpu_hog = |host: &Arc<str>, node: &Arc<str>, from: i64, to: i64, what: &str| -> Option<String> {
            let (cpu, step) = (self.cpu.as_ref()?, cpu_slack?);
            let u = cpu.busiest(host, &[node], from, to, step)?;
            (u.cores() >= self.opts.cpu_busy_cores && 5 * u.cpu_ns >= 3 * (to - from)).then(|| {
                format!(
                    "on {host}, {} used {:.1} ms of CPU in the {:.1} ms of readings around the {:.3} ms {what} ({:.0} % of a core)",
                    u.process,
                    u.cpu_ns as f64 / 1e6,
                    u.span_ns as f64 / 1e6,
                    (to - from) as f64 / 1e6,
                    100.0 * u.cores()
                )
            })
        };
        let mut incidents = vec![];
        let mut budget_broken = 0u64;
        for (i, s) in self.samples.iter().enumerate() {
            let f = s.flow as usize;
            let fk = &self.flows[f];
            let budget = flow_budget[f];
            let mut kinds = vec![];
            let negative = s
                .layers
                .iter()
                .enumerate()
                .filter_map(|(l, v)| v.map(|v| (LAYERS[l].name(), v)))
                .chain(s.extra_checks.iter().zip(["message", "last_last"]).filter_map(|(v, n)| v.map(|v| (n, v))))
                .filter(|(_, v)| *v < -self.opts.negative_tolerance_ns)
                .min_by_key(|(_, v)| *v);
            if s.status != Status::Delivered {
                kinds.push(Kind::Lost);
            }
            if let (Some(b), Some(e)) = (budget, s.e2e) {
                if e > b {
                    kinds.push(Kind::OverBudget);
                }
            }
            if s.late {
                kinds.push(Kind::Late);
            }
            if let (Some(e), Some(t)) = (s.e2e, typical_e2e[f]) {
                if e - t > ((t.max(0) as f64 * self.opts.outlier_factor) as i64).max(self.opts.outlier_floor_ns) {
                    kinds.push(Kind::Outlier);
                }
            }
            if negative.is_some() {
                kinds.push(Kind::Impossible);
            }
            if kinds.is_empty() {
                continue;
            }
            if budget.is_some() && (kinds.contains(&Kind::OverBudget) || kinds.contains(&Kind::Lost)) {
                budget_broken += 1;
            }
            // The layer with the largest excess over its typical value.
            let mut layer: Option<(Layer, i64, i64)> = None;
            for l in 0..NL {
                if let (Some(v), Some(t)) = (s.layers[l], typical[f][l]) {
                    if layer.map_or(true, |(_, lv, lt)| v - t > lv - lt) {
                        layer = Some((LAYERS[l], v, t));
                    }
                }
            }
            let layer = layer.filter(|(_, v, t)| v > t);
            let ms = |ns: i64| format!("{:.3} ms", ns as f64 / 1e6);
            let (cause, evidence) = if let Some((n, v)) = negative {
                (Cause::ClockOffset, format!("{n} = {}: negative, so the receiver's clock is behind the sender's by at least that much (check --offset and the clock lines)", ms(v)))
            } else if s.status != Status::Delivered {
                let why = if s.status == Status::Lost { "no frame of it reached the receiver's capture point".to_string() } else { format!("incomplete at the receiver ({} fragments expected)", s.frags.unwrap_or(1)) };
                let rt = if s.retransmitted > 0 { format!("; the writer retransmitted {} fragment(s) of it", s.retransmitted) } else { String::new() };
                (Cause::Loss, format!("{why}{rt}"))
            } else {
                match layer {
                    Some((l, v, t)) if l.wire() && (s.repaired || s.retransmitted > 0) => (
                        Cause::Repair,
                        format!(
                            "{} DATA/DATA_FRAG retransmitted by the writer, {} duplicate(s) at the receiver; {} took {} (typical {})",
                            s.retransmitted,
                            s.duplicates,
                            l.name(),
                            ms(v),
                            ms(t)
                        ),
                    ),
                    Some((l, v, t)) if l.wire() => {
                        // Head of line: the writer's previous sample was still arriving at the receiver when this one went out.
                        let w = &by_writer[&(s.writer, fk.receiver.clone())];
                        let pos = w.binary_search(&(s.sender_first, i)).unwrap_or(0);
                        let prev = pos.checked_sub(1).map(|p| &self.samples[w[p].1]);
                        match prev.and_then(|p| Some((p, p.receiver_last?))) {
                            Some((p, last)) if last > s.sender_first + typical[f][3].unwrap_or(0) => (
                                Cause::HeadOfLine,
                                format!(
                                    "the writer's previous sample sn {} was complete at the receiver only {} after this one was sent{}; {} took {} (typical {})",
                                    p.sn,
                                    ms(last - s.sender_first),
                                    if p.repaired || p.retransmitted > 0 { " (it was being repaired)" } else { "" },
                                    l.name(),
                                    ms(v),
                                    ms(t)
                                ),
                            ),
                            _ => {
                                // Queued between the capture points (a switch port towards the receiver): the
                                // receiver's link was busy while the sample's first (or last) fragment was due.
                                // The first datagram's own IP fragments arrive over about the time they took to leave.
                                let own = s.sender_first - s.sender_first_ip;
                                let at = if l == Layer::WireFirst { s.receiver_first.map(|r| r - own) } else { s.receiver_last };
                                let what = if l == Layer::WireFirst { "the sample's first fragment arrived" } else { "the sample was complete" };
                                // Else the receiving host's kernel was slow to take the frames in: another process
                                // kept its CPU (the capture point sees a frame once the host has processed it).
                                let kernel = "wait for the frames to be taken in by the receiving host";
                                match at.and_then(|at| busy_link(&fk.receiver, at - (v - t), at, what, s.own_bytes)) {
                                    Some(ev) => (Cause::LinkQueueing, format!("{ev}; {} took {} (typical {})", l.name(), ms(v), ms(t))),
                                    None => match at.and_then(|at| cpu_hog(&fk.receiver, s.receiver_node.as_ref().unwrap_or(&fk.receiver), at - (v - t), at, kernel)) {
                                        Some(ev) => (Cause::CpuContention, format!("{ev}; {} took {} (typical {})", l.name(), ms(v), ms(t))),
                                        None => (
                                            Cause::Unknown,
                                            format!("{} took {} (typical {}); no repair, no earlier sample of the writer in the way, the link not busy, no other process busy on the CPU", l.name(), ms(v), ms(t)),
                                        ),
                                    },
                                }
                            }
                        }
                    }
                    Some((l, v, t)) if l.sender() => {
                        let w = &by_writer[&(s.writer, fk.receiver.clone())];
                        let pos = w.binary_search(&(s.sender_first, i)).unwrap_or(0);
                        let p = period[f].unwrap_or(0);
                        let burst = w[..pos].iter().rev().take_while(|(t0, _)| p > 0 && s.sender_first - t0 < p / 2).count();
                        if burst > 0 {
                            (Cause::SenderBurst, format!("the writer sent {burst} other sample(s) in the {} before this one (period {}); {} took {} (typical {})", ms(p / 2), ms(p), l.name(), ms(v), ms(t)))
                        } else if let Some(ev) = busy_link(&fk.sender, s.sender_first_ip - (v - t), s.sender_first_ip, "the sample's first byte left", s.own_bytes) {
                            // Queued in the sender's egress (its qdisc and NIC come before the capture point).
                            (Cause::LinkQueueing, format!("{ev}; {} took {} (typical {})", l.name(), ms(v), ms(t)))
                        } else if let Some(ev) = s.sender_node.as_ref().and_then(|n| cpu_hog(&fk.sender, n, s.sender_first_ip - (v - t), s.sender_first_ip, &format!("wait in {n}'s stack"))) {
                            (Cause::CpuContention, format!("{ev}; {} took {} (typical {})", l.name(), ms(v), ms(t)))
                        } else {
                            (Cause::Unknown, format!("{} took {} (typical {}); no burst of the writer before it, the link not busy, no other process busy on the CPU", l.name(), ms(v), ms(t)))
                        }
                    }
                    Some((l, v, t)) if l.receiver() => {
                        let ready = s.ready;
                        // Held by in-order delivery: the writer's previous sample was complete at the receiver only after this one.
                        let w = &by_writer[&(s.writer, fk.receiver.clone())];
                        let pos = w.binary_search(&(s.sender_first, i)).unwrap_or(0);
                        let prev = pos.checked_sub(1).map(|p| &self.samples[w[p].1]);
                        let held = match (prev, ready) {
                            (Some(p), Some(a)) => p.ready.filter(|pr| *pr > a + (v - t) / 2).map(|pr| (p, pr)),
                            _ => None,
                        };
                        // Executor: the callback of the receiving node that overlapped [ready, take] the most.
                        let busy = match (&s.receiver_node, ready, s.take) {
                            (Some(n), Some(a), Some(take)) => node_callbacks.get(&(fk.receiver.clone(), n.clone())).and_then(|cbs| {
                                cbs.iter()
                                    .filter(|(_, _, j)| *j != i)
                                    .map(|&(cs, ce, j)| (ce.min(take) - cs.max(a), cs, ce, j))
                                    .filter(|(o, ..)| *o > 0)
                                    .max_by_key(|(o, ..)| *o)
                            }),
                            _ => None,
                        };
                        match (held, busy) {
                            (Some((p, pr)), _) => (
                                Cause::HeadOfLine,
                                format!(
                                    "in-order delivery held it: the writer's previous sample sn {} was complete at the receiver {} after this one{}; {} took {} (typical {})",
                                    p.sn,
                                    ms(pr - ready.unwrap_or(pr)),
                                    if p.repaired || p.retransmitted > 0 { " (it was being repaired)" } else { "" },
                                    l.name(),
                                    ms(v),
                                    ms(t)
                                ),
                            ),
                            (None, Some((overlap, cs, ce, j))) if 2 * overlap >= v - t => {
                                let o = &self.samples[j];
                                let of = o.flow as usize;
                                let took = ce - cs;
                                let usual = typical_cb[of].unwrap_or(0);
                                let what = format!("{} sn {}", self.flows[of].topic, o.sn);
                                let cause = if of == f { Cause::CallbackOverrun } else { Cause::ExecutorBusy };
                                let whose = if of == f { "the previous callback of this subscription" } else { "the node's callback" };
                                (
                                    cause,
                                    format!(
                                        "{whose} ({what}) ran {} (typical {}) and kept the executor {} of the time between the sample's arrival and its take; {} took {} (typical {})",
                                        ms(took),
                                        ms(usual),
                                        ms(overlap),
                                        l.name(),
                                        ms(v),
                                        ms(t)
                                    ),
                                )
                            }
                            _ => match ready.zip(s.receiver_node.as_ref()).and_then(|(a, n)| cpu_hog(&fk.receiver, n, a, s.take.unwrap_or(a + v), &format!("wait in {n}'s stack"))) {
                                Some(ev) => (Cause::CpuContention, format!("{ev}; {} took {} (typical {})", l.name(), ms(v), ms(t))),
                                None => (
                                    Cause::Unknown,
                                    format!("{} took {} (typical {}); no earlier sample in the way, no callback of the node running and no other process busy on the CPU (or no trace, no load)", l.name(), ms(v), ms(t)),
                                ),
                            },
                        }
                    }
                    Some((l, v, t)) => (Cause::Unknown, format!("{} took {} (typical {})", l.name(), ms(v), ms(t))),
                    None => (Cause::Unknown, "no layer above its typical value".to_string()),
                }
            };
            incidents.push(Incident {
                topic: fk.topic.clone(),
                domain: fk.domain,
                sender: fk.sender.clone(),
                receiver: fk.receiver.clone(),
                // A sample joined trace to trace without a declared DDS writer has no GUID to name.
                writer_id: if s.writer == Guid::default() { String::new() } else { s.writer.to_string() },
                writer: s.writer,
                sn: s.sn,
                kinds,
                sender_first_ts_ns: s.sender_first,
                e2e_ns: s.e2e,
                e2e_measure: s.e2e_kind,
                typical_e2e_ns: typical_e2e[f],
                budget_ns: budget,
                layer: layer.map(|x| x.0),
                layer_ns: layer.map(|x| x.1),
                layer_typical_ns: layer.map(|x| x.2),
                cause,
                evidence,
            });
        }
        let (by_cause, by_kind) = summarize(&incidents);
        let budgets = std::mem::take(&mut self.opts.budgets).into_iter().map(|b| (b.pattern, b.limit.to_string())).collect();
        let cpu_load = self.cpu.as_ref().map(|c| CpuLoadInfo {
            files: c.files.clone(),
            hosts: c.hosts(),
            interval_ns: cpu_interval,
            lines: c.lines,
            bad_lines: c.bad_lines,
            not_kept: c.not_kept,
            first_problem: c.first_problem.clone(),
        });
        Explanation { samples: self.seen, samples_not_kept: self.not_kept, flows_not_kept: self.flows_not_kept, incidents, by_cause, by_kind, budget_broken, budgets, links, cpu_load }
    }
}

/// Per cause (counts, share of the excess, the layer most took it in) and per kind, over `incidents`.
fn summarize(incidents: &[Incident]) -> (Vec<CauseRow>, Vec<(Kind, u64)>) {
    let total_excess: i64 = incidents.iter().map(|i| i.excess_ns()).sum();
    let mut causes: HashMap<Cause, (CauseRow, HashMap<Option<Layer>, u64>)> = HashMap::new();
    let mut kinds: HashMap<Kind, u64> = HashMap::new();
    for inc in incidents {
        for k in &inc.kinds {
            *kinds.entry(*k).or_default() += 1;
        }
        let e = causes.entry(inc.cause).or_insert_with(|| {
            (CauseRow { cause: inc.cause, incidents: 0, over_budget: 0, lost: 0, excess_ms: 0.0, share_of_excess_pct: 0.0, layer: None }, HashMap::new())
        });
        e.0.incidents += 1;
        e.0.over_budget += inc.kinds.contains(&Kind::OverBudget) as u64;
        e.0.lost += inc.kinds.contains(&Kind::Lost) as u64;
        e.0.excess_ms += inc.excess_ns() as f64 / 1e6;
        *e.1.entry(inc.layer).or_default() += 1;
    }
    let mut by_cause: Vec<CauseRow> = causes
        .into_values()
        .map(|(mut r, layers)| {
            r.share_of_excess_pct = if total_excess > 0 { 100.0 * r.excess_ms * 1e6 / total_excess as f64 } else { 0.0 };
            r.layer = layers.into_iter().max_by_key(|(l, n)| (*n, std::cmp::Reverse(*l))).and_then(|x| x.0);
            r
        })
        .collect();
    by_cause.sort_by(|a, b| b.incidents.cmp(&a.incidents).then(a.cause.cmp(&b.cause)));
    let mut by_kind: Vec<(Kind, u64)> = kinds.into_iter().collect();
    by_kind.sort();
    (by_cause, by_kind)
}

impl Explanation {
    /// Windows judged one by one (`serve`'s feed, `latency --explain-window`) as one explanation:
    /// their incidents in order, counts summed, causes and kinds summed again.
    pub fn merge(parts: Vec<Explanation>) -> Explanation {
        let mut x = Explanation::default();
        for p in parts {
            x.samples += p.samples;
            x.samples_not_kept += p.samples_not_kept;
            x.flows_not_kept += p.flows_not_kept;
            x.budget_broken += p.budget_broken;
            x.incidents.extend(p.incidents);
            if x.budgets.is_empty() {
                x.budgets = p.budgets;
            }
        }
        (x.by_cause, x.by_kind) = summarize(&x.incidents);
        x
    }
}

/// A sample's bytes on the wire per byte of it, at most: RTPS, UDP, IP and
/// Ethernet headers of 1500-byte frames add under 5 %.
const OWN_BYTES_FACTOR: f64 = 1.05;

/// `1.00 Gbit/s`, `250 Mbit/s`.
fn rate_text(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.0} Mbit/s", bps / 1e6)
    } else {
        format!("{:.0} kbit/s", bps / 1e3)
    }
}

/// The wire of a row split at the first fragment's arrival.
fn wire_split(r: &LatencyRow) -> (Option<i64>, Option<i64>) {
    match (r.first_first_ns, r.latency_ns) {
        (Some(ff), Some(l)) => (Some(ff), Some(l - ff)),
        (ff, _) => (ff, None),
    }
}

impl Explanation {
    /// The worst incidents by excess (lost ones after those with a value).
    pub fn worst(&self, n: usize) -> Vec<&Incident> {
        let mut v: Vec<&Incident> = self.incidents.iter().collect();
        v.sort_by_key(|i| (std::cmp::Reverse(i.kinds.contains(&Kind::OverBudget)), std::cmp::Reverse(i.excess_ns()), i.sn));
        v.truncate(n);
        v
    }

    /// One line: how many incidents, of what kinds.
    pub fn summary_line(&self) -> String {
        let kinds: Vec<String> = self.by_kind.iter().map(|(k, n)| format!("{n} {}", kind_name(*k))).collect();
        let budgets: Vec<String> = self.budgets.iter().map(|(p, l)| format!("{p}={l}")).collect();
        let mut s = format!(
            "{} incidents in {} samples{}{}",
            self.incidents.len(),
            self.samples,
            if kinds.is_empty() { String::new() } else { format!(" ({})", kinds.join(", ")) },
            if budgets.is_empty() { String::new() } else { format!("; budgets {}: {} broken", budgets.join(" "), self.budget_broken) }
        );
        if self.samples_not_kept > 0 {
            s.push_str(&format!("; {} samples not judged (over the cap of kept samples or flows)", self.samples_not_kept));
        }
        s
    }
}

pub fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::OverBudget => "over budget",
        Kind::Lost => "lost",
        Kind::Late => "late",
        Kind::Outlier => "outliers",
        Kind::Impossible => "with a negative layer",
    }
}

fn fmt_ms(ns: i64) -> String {
    let ms = ns as f64 / 1e6;
    if ms.fract() == 0.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    //! The rules on hand-made rows; the verdicts on real faults are scored in
    //! tests/test_explain.py (injected loss, slow callbacks, a wrong offset).
    use super::*;
    use crate::discovery::TopicNames;

    fn row(sn: i64, t0: i64, wire_first: i64, wire: i64) -> LatencyRow {
        let topic = Arc::new(TopicNames::new("rt/image", "sensor_msgs::msg::dds_::Image_"));
        let mut r = LatencyRow::new(Level::Message, Some(topic), Guid::default(), sn, "pc1".into(), "pc2".into(), Status::Delivered, t0);
        r.first_first_ns = Some(wire_first);
        r.latency_ns = Some(wire);
        r.receiver_last_ts_ns = Some(t0 + wire);
        r
    }

    fn run(rows: &[LatencyRow], budgets: Vec<Budget>) -> Explanation {
        let mut e = Explainer::new(ExplainOptions { budgets, ..Default::default() });
        for r in rows {
            e.add(r);
        }
        e.finish()
    }

    #[test]
    fn repair_head_of_line_and_clean_samples() {
        let period = 50_000_000;
        let mut rows: Vec<LatencyRow> = (1..=40).map(|sn| row(sn, sn * period, 10_000, 300_000)).collect();
        // sn 10: a fragment repaired 60 ms later; sn 11 sent before 10 completed (a burst) sits behind it on the wire.
        rows[9].latency_ns = Some(60_000_000);
        rows[9].receiver_last_ts_ns = Some(10 * period + 60_000_000);
        rows[9].sender_retransmitted_frags = 2;
        rows[10].sender_first_ts_ns = 10 * period + 1_000_000;
        rows[10].first_first_ns = Some(59_500_000);
        rows[10].latency_ns = Some(59_800_000);
        rows[10].receiver_last_ts_ns = Some(rows[10].sender_first_ts_ns + 59_800_000);
        let x = run(&rows, vec![Budget::new("/image", 5_000_000).unwrap()]);
        let by: HashMap<i64, &Incident> = x.incidents.iter().map(|i| (i.sn, i)).collect();
        assert_eq!(x.incidents.len(), 2, "{:?}", x.incidents);
        assert_eq!(by[&10].cause, Cause::Repair);
        assert_eq!(by[&10].layer, Some(Layer::WireRest));
        assert!(by[&10].evidence.starts_with("2 DATA/DATA_FRAG retransmitted"), "{}", by[&10].evidence);
        assert_eq!(by[&11].cause, Cause::HeadOfLine, "{}", by[&11].evidence);
        assert_eq!(by[&11].layer, Some(Layer::WireFirst));
        assert_eq!(x.budget_broken, 2);
        assert!(by[&10].kinds.contains(&Kind::OverBudget) && by[&10].kinds.contains(&Kind::Outlier));
    }

    #[test]
    fn negative_layers_are_clock_offsets_and_lost_samples_loss() {
        let mut rows: Vec<LatencyRow> = (1..=20).map(|sn| row(sn, sn * 10_000_000, 10_000, 300_000)).collect();
        rows[3].latency_ns = Some(-2_000_000);
        rows[3].first_first_ns = Some(-2_100_000);
        rows[7].status = Status::Lost;
        rows[7].latency_ns = None;
        rows[7].first_first_ns = None;
        let x = run(&rows, vec![]);
        let by: HashMap<i64, &Incident> = x.incidents.iter().map(|i| (i.sn, i)).collect();
        assert_eq!(by[&4].cause, Cause::ClockOffset);
        assert!(by[&4].kinds == vec![Kind::Impossible], "{:?}", by[&4].kinds);
        assert_eq!(by[&8].cause, Cause::Loss);
        assert_eq!(x.budget_broken, 0, "no budget given: nothing broken");
        assert_eq!(x.incidents.len(), 2);
    }

    #[test]
    fn derived_budgets_come_from_the_flow_itself() {
        // 100 samples 10 ms apart, wire latencies 1..=100 µs: p90 is the 90th smallest (90 µs), the period 10 ms.
        let rows: Vec<LatencyRow> = (1..=100).map(|sn| row(sn, sn * 10_000_000, 500, sn * 1000)).collect();
        let x = run(&rows, vec![Budget::with_limit("/image", Limit::Percentile(90.0)).unwrap()]);
        let over: Vec<i64> = x.incidents.iter().filter(|i| i.kinds.contains(&Kind::OverBudget)).map(|i| i.sn).collect();
        assert_eq!(over, (91..=100).collect::<Vec<_>>());
        assert!(x.incidents.iter().all(|i| i.budget_ns == Some(90_000)));
        assert_eq!(x.budgets, vec![("/image".to_string(), "p90".to_string())]);
        assert!(x.summary_line().contains("budgets /image=p90: 10 broken"), "{}", x.summary_line());
        // The period: only a sample whose end to end exceeds 10 ms breaks it.
        let mut rows = rows;
        rows[49].latency_ns = Some(12_000_000);
        rows[49].receiver_last_ts_ns = Some(rows[49].sender_first_ts_ns + 12_000_000);
        let x = run(&rows, vec![Budget::with_limit("/image", Limit::Period).unwrap()]);
        let over: Vec<i64> = x.incidents.iter().filter(|i| i.kinds.contains(&Kind::OverBudget)).map(|i| i.sn).collect();
        assert_eq!(over, vec![50]);
        assert_eq!(x.incidents.iter().find(|i| i.sn == 50).unwrap().budget_ns, Some(10_000_000));
        assert!(Budget::with_limit("/x", Limit::Percentile(100.0)).is_err() && Budget::with_limit("/x", Limit::Percentile(0.0)).is_err());
    }

    #[test]
    fn budgets_match_globs_and_caps_are_counted() {
        let b = Budget::new("/camera/*", 1).unwrap();
        assert!(b.matches("/camera/left") && !b.matches("/lidar"));
        assert!(Budget::new("/x", 0).is_err());
        let rows: Vec<LatencyRow> = (1..=10).map(|sn| row(sn, sn * 1000, 1, 2)).collect();
        let mut e = Explainer::new(ExplainOptions { max_samples: 4, ..Default::default() });
        for r in &rows {
            e.add(r);
        }
        let x = e.finish();
        assert_eq!((x.samples, x.samples_not_kept), (10, 6));
        assert!(x.summary_line().contains("6 samples not judged"), "{}", x.summary_line());
    }
}
