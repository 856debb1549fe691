//! The rows the correlator writes: one per sample (or submessage) and
//! receiver ([`LatencyRow`], declared once with `record!`), and per flow and
//! layer after the run ([`FlowSummary`], [`LayerRow`], [`WriterRole`]).

use super::layers::{layer_group, Layer, Level, Stack, StackPart, Status, Timing, ROS_STACK_LAYERS};
use super::stats::DistSummary;
use crate::discovery::TopicNames;
use crate::record::{opt_i, opt_u, Value};
use crate::ros2::join::Join;
use ddscope_wire::Guid;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One per-sample (or per-submessage) latency row.
#[derive(Debug, Clone)]
pub struct LatencyRow {
    pub level: Level,
    pub topic: Option<Arc<TopicNames>>,
    pub writer_id: Guid,
    pub sn: i64,
    pub fragment_starting_num: Option<u32>,
    pub sender: Arc<str>,
    pub receiver: Arc<str>,
    pub sample_size: Option<u32>,
    pub frags_expected: Option<u32>,
    /// What became of the sample at this receiver.
    pub status: Status,
    pub sender_first_ts_ns: i64,
    pub sender_first_ip_ts_ns: i64,
    pub sender_last_ts_ns: Option<i64>,
    pub receiver_first_ts_ns: Option<i64>,
    pub receiver_last_ts_ns: Option<i64>,
    pub latency_ns: Option<i64>,
    pub first_first_ns: Option<i64>,
    pub last_last_ns: Option<i64>,
    pub jitter_ns: Option<i64>,
    pub sender_retransmitted_frags: u32,
    pub receiver_duplicate_frags: u32,
    pub repaired: bool,
    /// In time, late or lost against the publication period.
    pub timing: Option<Timing>,
    pub period_ns: Option<i64>,
    pub app_publish_ts_ns: Option<i64>,
    pub app_receive_ts_ns: Option<i64>,
    pub app_latency_ns: Option<i64>,
    pub sender_stack_ns: Option<i64>,
    pub receiver_stack_ns: Option<i64>,
    /// The sample's source timestamp (INFO_TS at its first DATA/DATA_FRAG; the writer's clock).
    pub source_ts_ns: Option<i64>,
    /// INFO_TS → first on the wire at the sender (one host clock; no trace needed).
    pub source_ts_to_wire_ns: Option<i64>,
    /// The ROS 2 layer from traces, when a trace event was joined to this sample.
    pub ros: Option<Box<RosColumns>>,
    /// The error bar of this row's cross-host figures from the clocks (the two captures' clock
    /// lines at its instants, ns): 0 on one clock, None where the clocks were not checked.
    pub clock_error_ns: Option<i64>,
}

/// The ROS 2 columns of a latency row: the trace instants joined to the
/// sample (on the correlator's clock: host offsets applied) and the layers
/// between them. For a wire row ros_publish + dds_send + message +
/// dds_receive + executor = ros_e2e exactly; for a same-host row ros_publish +
/// dds_local + executor = ros_e2e. `sender_node` is also set without a trace,
/// from the ROS graph on the wire (`ros_discovery_info`).
#[derive(Debug, Clone, Default)]
pub struct RosColumns {
    /// How the sender's publish was found (`source_ts`, `publish_time`, `publish_order`, `intra_process`); takes join by source timestamp, or (no source timestamp in the trace: rmw_zenoh_cpp) by the replayed queue, `take_queue` where only the take was found.
    pub join: Option<Join>,
    pub sender_node: Option<Arc<str>>,
    pub receiver_node: Option<Arc<str>>,
    pub rclcpp_publish_ts_ns: Option<i64>,
    pub rmw_publish_ts_ns: Option<i64>,
    pub rmw_take_ts_ns: Option<i64>,
    pub callback_start_ts_ns: Option<i64>,
    pub callback_end_ts_ns: Option<i64>,
    pub ros_publish_ns: Option<i64>,
    pub dds_send_ns: Option<i64>,
    pub dds_local_ns: Option<i64>,
    /// rmw_publish → rmw_take across hosts without a capture (trace to trace).
    pub dds_remote_ns: Option<i64>,
    pub dds_receive_ns: Option<i64>,
    pub executor_ns: Option<i64>,
    pub callback_ns: Option<i64>,
    pub ros_e2e_ns: Option<i64>,
    /// The traced threads (vpid, vtid) of the publish and of the take and callback, for the
    /// timeline's thread tracks (not a column).
    pub sender_thread: Option<(i64, i64)>,
    pub receiver_thread: Option<(i64, i64)>,
}

impl crate::sink::OnTopic for LatencyRow {
    fn topic_names(&self) -> Option<&TopicNames> {
        self.topic.as_deref()
    }
    fn domain(&self) -> Option<u32> {
        self.topic.as_ref().and_then(|t| t.domain)
    }
}

impl LatencyRow {
    /// A row of `sample` (writer, sn) from `sender` to `receiver` first seen at
    /// `sender_first_ts_ns` (also its first IP fragment's time), with every
    /// measurement empty: callers set what they measured
    /// (`LatencyRow { latency_ns: …, ..LatencyRow::new(…) }`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        level: Level,
        topic: Option<Arc<TopicNames>>,
        writer_id: Guid,
        sn: i64,
        sender: Arc<str>,
        receiver: Arc<str>,
        status: Status,
        sender_first_ts_ns: i64,
    ) -> LatencyRow {
        LatencyRow {
            level,
            topic,
            writer_id,
            sn,
            fragment_starting_num: None,
            sender,
            receiver,
            sample_size: None,
            frags_expected: None,
            status,
            sender_first_ts_ns,
            sender_first_ip_ts_ns: sender_first_ts_ns,
            sender_last_ts_ns: None,
            receiver_first_ts_ns: None,
            receiver_last_ts_ns: None,
            latency_ns: None,
            first_first_ns: None,
            last_last_ns: None,
            jitter_ns: None,
            sender_retransmitted_frags: 0,
            receiver_duplicate_frags: 0,
            repaired: false,
            timing: None,
            period_ns: None,
            app_publish_ts_ns: None,
            app_receive_ts_ns: None,
            app_latency_ns: None,
            sender_stack_ns: None,
            receiver_stack_ns: None,
            source_ts_ns: None,
            source_ts_to_wire_ns: None,
            ros: None,
            clock_error_ns: None,
        }
    }

    /// The join used for this row (`none` without traces).
    pub fn join(&self) -> Join {
        self.ros.as_ref().and_then(|r| r.join).unwrap_or(Join::None)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct WriterRole {
    pub writer_id: String,
    pub topic: Option<String>,
    pub sender: String,
    pub receivers: Vec<String>,
    pub first_seen_votes: BTreeMap<String, u64>,
}

/// Summary of one flow (topic × sender → receiver).
#[derive(Debug, Clone, Serialize)]
pub struct FlowSummary {
    pub topic: String,
    /// The topic's DDS domain (null when discovery did not tell).
    pub domain: Option<u32>,
    #[serde(skip)]
    pub names: Option<Arc<TopicNames>>,
    pub sender: String,
    pub receiver: String,
    pub samples: u64,
    pub delivered: u64,
    pub lost: u64,
    pub incomplete: u64,
    pub retransmitted_samples: u64,
    pub retransmitted_frags: u64,
    pub retransmitted_bytes: u64,
    pub period_ms: Option<f64>,
    pub in_time: u64,
    pub late: u64,
    /// Per layer: application, sender_stack, message, first_first, last_last, submessage, receiver_stack.
    pub layers: Vec<(Layer, DistSummary)>,
    pub jitter: DistSummary,
    pub jitter_abs: DistSummary,
    pub repaired: DistSummary,
    pub clean: DistSummary,
    /// The first lost sequence numbers.
    pub lost_examples: Vec<i64>,
    /// ROS nodes that sent / received the flow's samples (from traces, or the sender's from the wire's ROS graph).
    pub sender_nodes: Vec<String>,
    pub receiver_nodes: Vec<String>,
    /// How the sender capture was found: `wire` (the writer's participant placed by the traffic's two
    /// directions) or `time order` (the capture that saw the samples first; wrong when the clocks are
    /// offset by more than the one-way delay).
    pub sender_from: &'static str,
    /// The two capture clocks' agreement: `checked` (estimated from two-way traffic, or the same
    /// clock), `given` (--offset, unchecked) or `unchecked`.
    pub clock: &'static str,
    /// The error bar of every cross-capture figure of the flow (its latencies and their percentiles):
    /// the true value lies within ± this many ns of the printed one; null unless `clock` is `checked`.
    pub clock_uncertainty_ns: Option<i64>,
}

// The per-sample row's columns, in output order (docs/latency.md lists them).
crate::record!(LatencyRow, r, {
    level: Str => Value::S(r.level.as_str()),
    topic_name: Str => r.topic.as_deref().map_or(Value::Null, |t| Value::S(&t.topic_name)),
    type_name: Str => r.topic.as_deref().map_or(Value::Null, |t| Value::S(&t.type_name)),
    topic_raw: Str => r.topic.as_deref().map_or(Value::Null, |t| Value::S(&t.topic_raw)),
    // A row joined trace to trace whose trace declared no DDS writer (CARET's Galactic traces have no
    // rmw_publisher_init, Galactic rcl none of the gid) has no GUID: null, never the all-zero GUID_UNKNOWN.
    writer_id: Str => if r.writer_id == Guid::default() { Value::Null } else { Value::Guid(r.writer_id) },
    sn: I64 => Value::I(r.sn),
    fragment_starting_num: U64 => opt_u(r.fragment_starting_num),
    sender: Str => Value::S(&r.sender),
    receiver: Str => Value::S(&r.receiver),
    sample_size: U64 => opt_u(r.sample_size),
    frags_expected: U64 => opt_u(r.frags_expected),
    status: Str => Value::S(r.status.as_str()),
    sender_first_ts_ns: I64 => Value::I(r.sender_first_ts_ns),
    sender_first_ip_ts_ns: I64 => Value::I(r.sender_first_ip_ts_ns),
    sender_last_ts_ns: I64 => opt_i(r.sender_last_ts_ns),
    receiver_first_ts_ns: I64 => opt_i(r.receiver_first_ts_ns),
    receiver_last_ts_ns: I64 => opt_i(r.receiver_last_ts_ns),
    latency_ns: I64 => opt_i(r.latency_ns),
    first_first_ns: I64 => opt_i(r.first_first_ns),
    last_last_ns: I64 => opt_i(r.last_last_ns),
    jitter_ns: I64 => opt_i(r.jitter_ns),
    sender_retransmitted_frags: U64 => Value::U(r.sender_retransmitted_frags as u64),
    receiver_duplicate_frags: U64 => Value::U(r.receiver_duplicate_frags as u64),
    repaired: Bool => Value::B(r.repaired),
    timing: Str => r.timing.map_or(Value::Null, |t| Value::S(t.as_str())),
    period_ns: I64 => opt_i(r.period_ns),
    app_publish_ts_ns: I64 => opt_i(r.app_publish_ts_ns),
    app_receive_ts_ns: I64 => opt_i(r.app_receive_ts_ns),
    app_latency_ns: I64 => opt_i(r.app_latency_ns),
    sender_stack_ns: I64 => opt_i(r.sender_stack_ns),
    receiver_stack_ns: I64 => opt_i(r.receiver_stack_ns),
    source_ts_ns: I64 => opt_i(r.source_ts_ns),
    source_ts_to_wire_ns: I64 => opt_i(r.source_ts_to_wire_ns),
    join: Str => Value::S(r.join().as_str()),
    sender_node: Str => r.ros.as_deref().and_then(|x| x.sender_node.as_deref()).map_or(Value::Null, Value::S),
    receiver_node: Str => r.ros.as_deref().and_then(|x| x.receiver_node.as_deref()).map_or(Value::Null, Value::S),
    rclcpp_publish_ts_ns: I64 => opt_i(r.ros.as_deref().and_then(|x| x.rclcpp_publish_ts_ns)),
    rmw_publish_ts_ns: I64 => opt_i(r.ros.as_deref().and_then(|x| x.rmw_publish_ts_ns)),
    rmw_take_ts_ns: I64 => opt_i(r.ros.as_deref().and_then(|x| x.rmw_take_ts_ns)),
    callback_start_ts_ns: I64 => opt_i(r.ros.as_deref().and_then(|x| x.callback_start_ts_ns)),
    callback_end_ts_ns: I64 => opt_i(r.ros.as_deref().and_then(|x| x.callback_end_ts_ns)),
    ros_publish_ns: I64 => opt_i(r.ros.as_deref().and_then(|x| x.ros_publish_ns)),
    dds_send_ns: I64 => opt_i(r.ros.as_deref().and_then(|x| x.dds_send_ns)),
    dds_local_ns: I64 => opt_i(r.ros.as_deref().and_then(|x| x.dds_local_ns)),
    dds_receive_ns: I64 => opt_i(r.ros.as_deref().and_then(|x| x.dds_receive_ns)),
    executor_ns: I64 => opt_i(r.ros.as_deref().and_then(|x| x.executor_ns)),
    callback_ns: I64 => opt_i(r.ros.as_deref().and_then(|x| x.callback_ns)),
    ros_e2e_ns: I64 => opt_i(r.ros.as_deref().and_then(|x| x.ros_e2e_ns)),
    domain: U64 => opt_u(r.topic.as_deref().and_then(|t| t.domain)),
    dds_remote_ns: I64 => opt_i(r.ros.as_deref().and_then(|x| x.dds_remote_ns)),
    clock_error_ns: I64 => opt_i(r.clock_error_ns),
});

/// One line of the per-layer summary table.
#[derive(Debug, Clone)]
pub struct LayerRow {
    pub topic: String,
    pub domain: Option<u32>,
    pub sender: String,
    pub receiver: String,
    pub layer: Layer,
    pub s: DistSummary,
    /// `one clock` (both ends time-stamped on one host), else the flow's [`FlowSummary::clock`].
    pub clock: &'static str,
    /// The error bar of the layer's figures from the clocks, ns (0 on one clock; null when unchecked).
    pub clock_error_ns: Option<i64>,
}

impl LayerRow {
    /// True when the clocks' error bar is at least the size of the layer's mean: the figure says
    /// nothing about the layer (docs/latency.md, "Clocks").
    pub fn untrusted(&self) -> bool {
        self.s.count > 0 && self.clock_error_ns.is_some_and(|u| u > 0 && u as f64 / 1e6 >= self.s.mean_ms.abs())
    }
}

crate::record!(LayerRow, r, {
    topic: Str => Value::S(&r.topic),
    sender: Str => Value::S(&r.sender),
    receiver: Str => Value::S(&r.receiver),
    layer: Str => Value::S(r.layer.as_str()),
    count: U64 => Value::U(r.s.count),
    mean_ms: F64 => Value::F(r.s.mean_ms),
    std_ms: F64 => Value::F(r.s.std_ms),
    min_ms: F64 => Value::F(r.s.min_ms),
    p50_ms: F64 => Value::F(r.s.p50_ms),
    p90_ms: F64 => Value::F(r.s.p90_ms),
    p99_ms: F64 => Value::F(r.s.p99_ms),
    max_ms: F64 => Value::F(r.s.max_ms),
    clock: Str => Value::S(r.clock),
    clock_error_ms: F64 => r.clock_error_ns.map_or(Value::Null, |u| Value::F(u as f64 / 1e6)),
    domain: U64 => r.domain.map_or(Value::Null, |d| Value::U(d as u64)),
});

crate::record!(FlowSummary, r, let { let f = |s: &DistSummary, v: f64| if s.count > 0 { Value::F(v) } else { Value::Null }; }, {
    topic: Str => Value::S(&r.topic),
    domain: U64 => r.domain.map_or(Value::Null, |d| Value::U(d as u64)),
    sender: Str => Value::S(&r.sender),
    receiver: Str => Value::S(&r.receiver),
    sender_nodes: Str => Value::Strs(&r.sender_nodes),
    receiver_nodes: Str => Value::Strs(&r.receiver_nodes),
    samples: U64 => Value::U(r.samples),
    delivered: U64 => Value::U(r.delivered),
    lost: U64 => Value::U(r.lost),
    incomplete: U64 => Value::U(r.incomplete),
    retransmitted_samples: U64 => Value::U(r.retransmitted_samples),
    retransmitted_frags: U64 => Value::U(r.retransmitted_frags),
    retransmitted_bytes: U64 => Value::U(r.retransmitted_bytes),
    clean_mean_ms: F64 => f(&r.clean, r.clean.mean_ms),
    repaired_mean_ms: F64 => f(&r.repaired, r.repaired.mean_ms),
    jitter_mean_ms: F64 => f(&r.jitter, r.jitter.mean_ms),
    jitter_abs_mean_ms: F64 => f(&r.jitter_abs, r.jitter_abs.mean_ms),
    jitter_abs_p99_ms: F64 => f(&r.jitter_abs, r.jitter_abs.p99_ms),
    jitter_abs_max_ms: F64 => f(&r.jitter_abs, r.jitter_abs.max_ms),
    period_ms: F64 => r.period_ms.map_or(Value::Null, Value::F),
    // A flow joined trace to trace whose publication period the traces do not show is neither
    // in time nor late (FlowSummary::timing_known): empty, never every sample late.
    in_time: U64 => if r.timing_known() { Value::U(r.in_time) } else { Value::Null },
    late: U64 => if r.timing_known() { Value::U(r.late) } else { Value::Null },
});

impl crate::sink::OnTopic for FlowSummary {
    fn topic_names(&self) -> Option<&TopicNames> {
        self.names.as_deref()
    }
    fn domain(&self) -> Option<u32> {
        self.domain
    }
}

impl FlowSummary {
    /// A flow joined trace to trace (a ROS 2 end-to-end latency and no wire message latency):
    /// its in time / late come from the traces (`ros2::timing`).
    pub fn trace_joined(&self) -> bool {
        self.layer(Layer::Message).is_none() && self.layer(Layer::RosE2e).is_some()
    }

    /// Whether the flow's in time / late mean anything: a wire flow's always; a flow joined trace
    /// to trace only where its publication period is known (`ros2::timing::summaries`).
    pub fn timing_known(&self) -> bool {
        !self.trace_joined() || self.period_ms.is_some()
    }

    /// The summary of layer `l`, when the flow has samples of it.
    pub fn layer(&self, l: Layer) -> Option<&DistSummary> {
        self.layers.iter().find(|(n, _)| *n == l).map(|(_, s)| s)
    }

    /// The flow's `ros_e2e` split into its layers (needs traces at both ends, or one host).
    pub fn ros_stack(&self) -> Option<Stack> {
        let get = |l: Layer| self.layer(l).copied();
        let total = get(Layer::RosE2e)?;
        let parts: Vec<StackPart> = ROS_STACK_LAYERS
            .iter()
            .filter_map(|&l| {
                let s = get(l)?;
                Some(StackPart { hop: None, topic: None, layer: l.as_str().to_string(), group: layer_group(l), count: s.count, mean_ms: s.mean_ms })
            })
            .collect();
        let adds_up = !parts.is_empty() && parts.iter().all(|p| p.count == total.count);
        Some(Stack { total_layer: Layer::RosE2e.as_str().to_string(), total, parts, adds_up })
    }

    pub fn layer_rows(&self) -> Vec<LayerRow> {
        self.layers
            .iter()
            .map(|(l, s)| {
                let (clock, clock_error_ns) = if l.crosses_clocks() && self.sender != self.receiver {
                    (self.clock, self.clock_uncertainty_ns)
                } else {
                    ("one clock", Some(0))
                };
                LayerRow { topic: self.topic.clone(), domain: self.domain, sender: self.sender.clone(), receiver: self.receiver.clone(), layer: *l, s: *s, clock, clock_error_ns }
            })
            .collect()
    }
}
