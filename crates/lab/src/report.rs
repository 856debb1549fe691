//! The typed documents of a lab run: `run.json` ([`RunReport`], format
//! `ddscope-lab-run/1`, fields documented in docs/lab.md) and what the run
//! reads from other programs — `ddscope topics --format json` ([`TopicsDoc`])
//! and iperf3's `-J` report ([`IperfReport`]). Reading them is strict where the
//! run depends on a field (a missing or mistyped field is an error naming
//! it) and tolerant of fields the run does not use.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::net::HostNet;
use crate::pcapng::ConvertStats;
use crate::scenario::{DdsConfig, FidelityConfig, Tracing, Vendor};
use crate::truth::TopicTruth;
use ddscope_traffic::Reliability;

/// `format` of run.json.
pub const FORMAT: &str = "ddscope-lab-run/1";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunReport {
    pub format: String,
    pub ok: bool,
    /// One line each; empty when `ok`.
    pub failures: Vec<String>,
    pub scenario: String,
    pub scenario_file: String,
    /// The resolved scenario in the run directory (`scenario.toml`).
    pub resolved_scenario: String,
    pub run_id: String,
    pub tools: Tools,
    pub timing: Timing,
    pub network: NetworkReport,
    pub dds: DdsConfig,
    pub fidelity: FidelityConfig,
    pub captures: Vec<CaptureReport>,
    pub truth: Vec<TruthFile>,
    pub nodes: Vec<NodeReport>,
    pub topics: Vec<TopicReport>,
    pub interference: Vec<InterferenceReport>,
    pub agents: Vec<AgentReport>,
    pub cpu: CpuReport,
    pub unknown_receptions: u64,
    pub wire_checks_skipped: Vec<String>,
    /// The LTTng traces of the run; null when no node traced.
    #[serde(default)]
    pub tracing: Option<TracingReport>,
    /// The per-process load series (`load.csv`, every 200 ms); null in runs before it existed.
    #[serde(default)]
    pub load: Option<crate::procs::LoadStats>,
    /// The Zenoh router (runs with Zenoh nodes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zenoh_router: Option<ZenohRouterReport>,
    /// Hosts whose clock the scenario warped (crate::clockwarp): the true warp, the ground truth a
    /// clock estimate is checked against. Empty in ordinary runs (one kernel clock).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clocks: Vec<ClockReport>,
    /// What this machine's time daemons (chrony, ptp4l) said of its clock when the run started — the
    /// clock every host of the lab shares — and one line per daemon that did not answer.
    #[serde(default)]
    pub clock_sync: Vec<ddscope_sysstat::clocksync::ClockSync>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clock_sync_errors: Vec<String>,
}

/// One warped host's clock: its time stamps (capture, trace, ground truth) read
/// `w(t) = t + offset + (t − ref)·drift + (t ≥ ref + step_at ? step : 0)` at true time t.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClockReport {
    pub host: String,
    #[serde(flatten)]
    pub warp: crate::clockwarp::Warp,
    /// True CLOCK_REALTIME of the run's start (ns).
    pub ref_ns: i64,
    /// The host's capture on the true clock (relative to the run directory).
    pub true_clock_capture: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tools {
    pub ddscope: String,
    pub cyclonedds: Option<String>,
    pub fastdds: Option<String>,
    pub tcpdump: Option<String>,
    pub iperf3: Option<String>,
    pub iproute2: Option<String>,
    pub kernel: Option<String>,
    pub cpus: Option<usize>,
    /// `lttng --version` (tracing runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lttng: Option<String>,
    /// `babeltrace2 --version` (tracing runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub babeltrace2: Option<String>,
    /// eclipse-zenoh's version under the Zenoh nodes (runs with Zenoh nodes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zenoh: Option<String>,
}

/// The Zenoh router of a run with Zenoh nodes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ZenohRouterReport {
    /// `client` (all data through the router) or `peer` (the router for discovery).
    pub mode: String,
    /// `switch` or the host it ran on.
    pub runs_on: String,
    /// Where it listened, `tcp/10.77.0.254:7447`.
    pub endpoint: String,
    pub pid: Option<i32>,
    pub exit_code: Option<i32>,
    pub log: String,
    /// The capture points on its links (`router-HOST`, one per host; `zenoh.capture_router`).
    #[serde(default)]
    pub captures: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timing {
    /// START time of the periodic publishers (CLOCK_REALTIME ns).
    pub t0_ns: i64,
    pub tstop_ns: i64,
    pub duration_s: f64,
    pub linger_s: f64,
    /// Wall time of the whole run (setup, workload, analysis).
    pub wall_s: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Topology {
    #[serde(rename = "point-to-point")]
    PointToPoint,
    #[serde(rename = "bridge")]
    Bridge,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NetworkReport {
    pub mtu: u32,
    pub rate: Option<String>,
    /// Bytes of the tbf shapers' buckets (with `rate`): the first bytes of a
    /// burst leave faster than the rate (`ddscope tsn tas --calibrate` models it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tbf_burst: Option<u64>,
    pub topology: Topology,
    pub hosts: Vec<HostNet>,
    /// What the lab's eBPF programs did: 802.1Q tagging of topics with a PCP, emulated loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebpf: Option<crate::net::EbpfReport>,
    /// The kernel's drop counters of the workload link's devices at the end
    /// of the run (frames lost that no scenario asked to lose).
    #[serde(default)]
    pub kernel_drops: Vec<crate::net::DeviceDrops>,
}

/// tcpdump's counters of one capture (it prints them on exit).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct CaptureStats {
    pub captured: Option<u64>,
    pub received_by_filter: Option<u64>,
    pub dropped_by_kernel: Option<u64>,
    pub dropped_by_interface: Option<u64>,
}

impl CaptureStats {
    /// Frames the kernel placed in tcpdump's ring that tcpdump never wrote:
    /// it stops on SIGINT without reading a ring block the kernel has not
    /// handed over yet (libpcap's TPACKET_V3 blocks are handed over when full
    /// or after its 1 s timeout).
    pub fn undelivered_at_stop(&self) -> u64 {
        let (Some(r), Some(c)) = (self.received_by_filter, self.captured) else { return 0 };
        r.saturating_sub(c).saturating_sub(self.dropped_by_kernel.unwrap_or(0))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaptureReport {
    pub host: String,
    pub file: String,
    pub packets: u64,
    pub bytes: u64,
    pub read_error: Option<String>,
    pub first_ts_ns: Option<i64>,
    pub last_ts_ns: Option<i64>,
    pub tcpdump: CaptureStats,
    pub file_bytes: u64,
}

impl CaptureReport {
    pub fn new(host: &str, file: &str, cs: &ConvertStats, tcpdump: CaptureStats, file_bytes: u64) -> CaptureReport {
        CaptureReport {
            host: host.to_string(),
            file: file.to_string(),
            packets: cs.packets,
            bytes: cs.bytes,
            read_error: cs.read_error.clone(),
            first_ts_ns: cs.first_ts_ns,
            last_ts_ns: cs.last_ts_ns,
            tcpdump,
            file_bytes,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TruthFile {
    pub host: String,
    pub file: String,
    pub records: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeReport {
    pub name: String,
    pub host: String,
    pub vendor: Vendor,
    pub exit_code: Option<i32>,
    pub log: String,
    /// The node's closing lines (published / received counts).
    pub summary: Option<Vec<String>>,
    /// Process id (the `vpid` of its events in the host's trace).
    #[serde(default)]
    pub pid: Option<i32>,
    /// The ros2_tracing layout it emitted.
    #[serde(default)]
    pub tracing: Tracing,
    /// The container (one process of composable nodes) it ran in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

/// Which checks a topic passed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TopicChecks {
    pub truth_rate_within_tolerance: Option<bool>,
    pub truth_sizes_exact: bool,
    pub truth_seq_contiguous: bool,
    pub delivery: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TopicReport {
    pub topic: String,
    pub type_name: String,
    pub type_raw: String,
    pub sample_bytes: u64,
    pub reliability: Reliability,
    pub history_depth: u32,
    pub nominal_rate_hz: f64,
    pub crosses_link: bool,
    pub truth: TopicTruth,
    pub wire: Vec<WireCheck>,
    pub checks: TopicChecks,
}

/// A topic on the capture of a host that sends it to another host, from `ddscope topics`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireCheck {
    pub host: String,
    pub nominal_rate_hz: f64,
    /// `ddscope topics`' rate_hz (per writer (n − 1) / (last − first), summed; docs/events.md).
    pub rate_hz: Option<f64>,
    /// `ddscope topics`' rate_kind: steady, bursty, few, no_samples or mixed (no rate unless steady or mixed).
    #[serde(default)]
    pub rate_kind: Option<String>,
    pub samples: u64,
    pub published: u64,
    pub min_sample_size: Option<u64>,
    pub max_sample_size: Option<u64>,
    pub mean_sample_size: Option<f64>,
    pub type_raw: Option<String>,
    pub vendors: Vec<String>,
    pub writers: u64,
    pub readers: u64,
    pub rtps_frags_per_sample: Option<f64>,
    pub ip_frags_per_sample: Option<f64>,
    pub retransmitted_fragments: u64,
    pub sn_gaps: u64,
    pub heartbeats: u64,
    pub acknacks: u64,
    pub nack_frags: u64,
    pub gaps: u64,
    pub rate_ok: Option<bool>,
    pub size_ok: bool,
    pub samples_ok: bool,
    pub type_ok: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InterferenceReport {
    pub from: String,
    pub to: String,
    pub load: Option<String>,
    pub rate_bps: u64,
    pub payload_bytes: u64,
    pub pacing_ns: u64,
    pub datagrams_per_burst: u64,
    pub achieved_bps: Option<f64>,
    pub below_target: Option<bool>,
    pub packets: Option<u64>,
    pub lost_packets: Option<u64>,
    pub jitter_ms: Option<f64>,
    pub log: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentReport {
    pub host: String,
    pub exit_code: Option<i32>,
    pub log: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CpuReport {
    /// User + system CPU seconds per process, from wait4 (null: not known).
    pub processes_s: BTreeMap<String, Option<f64>>,
    pub total_s: f64,
    pub cpus: Option<usize>,
    pub mean_cores_busy: f64,
    pub note: String,
}

/// How the traces were recorded, and what each host's trace holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TracingReport {
    /// The layouts the nodes emitted.
    pub distros: Vec<Tracing>,
    pub channel: ChannelReport,
    pub hosts: Vec<HostTraceReport>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChannelReport {
    pub name: String,
    pub events: String,
    pub contexts: Vec<String>,
    /// `discard`: a full buffer drops the event (counted), the traced program never waits.
    pub mode: String,
    /// `per-uid`, as `ros2 trace` records.
    pub buffers: String,
    pub subbuf_size: u64,
    pub num_subbuf: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HostTraceReport {
    pub host: String,
    /// The trace directory in the run directory, `HOST.lttng`.
    pub dir: String,
    /// The layouts this host's nodes emitted (one, unless nodes override it).
    pub distros: Vec<Tracing>,
    pub session: String,
    /// CLOCK_REALTIME when the session was started (before the host's nodes)
    /// and stopped (after they exited).
    pub started_ns: i64,
    pub stopped_ns: Option<i64>,
    /// Events in the trace, as the project's reader (libbabeltrace2) counts them.
    pub events: u64,
    pub ros2_events: u64,
    pub by_name: BTreeMap<String, u64>,
    /// Events the tracer discarded (`lttng list`: Discarded events; discard mode).
    pub lost_events: Option<u64>,
    /// Packets the tracer lost (`lttng list`: Lost packets).
    pub lost_packets: Option<u64>,
    /// Discarded events and packets the trace itself records (packet headers).
    pub discarded_events: u64,
    pub discarded_packets: u64,
    /// `rmw_take` with taken = 0.
    pub empty_takes: u64,
    /// The processes whose events the trace holds.
    pub processes: Vec<TraceProcess>,
    /// Per traced node: the trace against its ground truth.
    pub nodes: Vec<TraceNodeCheck>,
    /// Trace event times minus the ground truth's CLOCK_MONOTONIC instants of
    /// the same tracepoints (the time between the node's clock read and LTTng's).
    pub instant_gaps: Option<GapStats>,
    /// Why the trace could not be read.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TraceProcess {
    pub vpid: i64,
    pub procname: Option<String>,
    /// `rcl_node_init.node_name` (a container's: its nodes', comma-separated).
    pub node: Option<String>,
    pub events: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TraceNodeCheck {
    pub node: String,
    pub pid: Option<i32>,
    pub tracing: Tracing,
    /// Ground truth: samples published and received.
    pub published: u64,
    pub received: u64,
    /// The trace.
    pub rclcpp_publish: u64,
    /// `rclcpp_intra_publish` (rclcpp's intra-process publishes: no rmw_publish when every
    /// subscription is intra-process).
    #[serde(default)]
    pub rclcpp_intra_publish: u64,
    pub rmw_publish: u64,
    pub taken: u64,
    /// Ground truth: samples received intra-process (no rmw_take).
    #[serde(default)]
    pub received_intra: u64,
    pub empty_takes: u64,
    pub subscription_callbacks: u64,
    pub publishers: u64,
    pub subscriptions: u64,
    /// Every writer GUID of the ground truth is a `rmw_publisher_init` gid.
    pub writer_gids_ok: bool,
    /// Jazzy: the `rmw_publish` timestamps are the published samples' source timestamps.
    pub publish_timestamps_ok: Option<bool>,
    /// The `rmw_take` source timestamps are the received samples'.
    pub take_timestamps_ok: bool,
    pub ok: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GapStats {
    /// Instants compared (rclcpp_publish, rmw_publish, rmw_take, callback_start, callback_end).
    pub pairs: u64,
    pub min_ns: i64,
    pub median_ns: i64,
    pub p99_ns: i64,
    pub max_ns: i64,
    /// Pairs more than 1 µs apart.
    pub over_1us: u64,
}

impl GapStats {
    pub fn of(mut gaps: Vec<i64>) -> Option<GapStats> {
        if gaps.is_empty() {
            return None;
        }
        gaps.sort_unstable();
        let q = |p: f64| gaps[((gaps.len() - 1) as f64 * p).round() as usize];
        Some(GapStats {
            pairs: gaps.len() as u64,
            min_ns: gaps[0],
            median_ns: q(0.5),
            p99_ns: q(0.99),
            max_ns: gaps[gaps.len() - 1],
            over_1us: gaps.iter().filter(|g| g.abs() > 1_000).count() as u64,
        })
    }
}

/// `ddscope topics CAPTURE --format json`: the part the run reads.
#[derive(Debug, Clone, Deserialize)]
pub struct TopicsDoc {
    pub topics: Vec<TopicsRow>,
}

/// One row of `ddscope topics` (crates/core/src/topics.rs, `TopicRow`'s columns).
#[derive(Debug, Clone, Deserialize)]
pub struct TopicsRow {
    pub topic_name: Option<String>,
    pub type_raw: Option<String>,
    pub rate_hz: Option<f64>,
    #[serde(default)]
    pub rate_kind: Option<String>,
    #[serde(default)]
    pub first_ts_ns: Option<i64>,
    #[serde(default)]
    pub last_ts_ns: Option<i64>,
    pub samples: u64,
    pub min_sample_size: Option<u64>,
    pub max_sample_size: Option<u64>,
    pub mean_sample_size: Option<f64>,
    pub vendors: Vec<String>,
    pub writers: u64,
    pub readers: u64,
    pub rtps_frags_per_sample: Option<f64>,
    pub ip_frags_per_sample: Option<f64>,
    pub retransmitted_fragments: u64,
    pub sn_gaps: u64,
    pub heartbeats: u64,
    pub acknacks: u64,
    pub nack_frags: u64,
    pub gaps: u64,
}

/// iperf3 `-J` output: the totals of a UDP client.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct IperfReport {
    #[serde(default)]
    pub end: IperfEnd,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct IperfEnd {
    #[serde(default)]
    pub sum: IperfSum,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct IperfSum {
    pub bits_per_second: Option<f64>,
    pub packets: Option<u64>,
    pub lost_packets: Option<u64>,
    pub jitter_ms: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_rows_read_the_columns_the_run_uses() {
        let doc: TopicsDoc = serde_json::from_str(
            r#"{"captures":[],"topics":[{"capture":"c","topic_name":"/image","type_raw":"sensor_msgs::msg::dds_::Image_",
               "rate_hz":10.005,"samples":50,"min_sample_size":2764852,"max_sample_size":2764852,"mean_sample_size":2764852,
               "vendors":["0x0110"],"writers":1,"readers":1,"rtps_frags_per_sample":2058,"ip_frags_per_sample":2060.5,
               "retransmitted_fragments":0,"sn_gaps":0,"heartbeats":3,"acknacks":2,"nack_frags":0,"gaps":0,"pcp":null}]}"#,
        )
        .unwrap();
        assert_eq!(doc.topics[0].topic_name.as_deref(), Some("/image"));
        assert_eq!(doc.topics[0].mean_sample_size, Some(2764852.0));
        assert_eq!(doc.topics[0].rate_hz, Some(10.005));
        assert_eq!(doc.topics[0].rate_kind, None); // an older row without it
    }

    #[test]
    fn topics_rows_missing_fields_are_named() {
        // a field the run depends on, missing or mistyped: an error naming it
        let e = serde_json::from_str::<TopicsDoc>(r#"{"topics":[{"topic_name":"/x","samples":"many"}]}"#).unwrap_err();
        assert!(e.to_string().contains("invalid type"), "{e}");
        let e = serde_json::from_str::<TopicsDoc>(r#"{"topics":[{"topic_name":"/x"}]}"#).unwrap_err();
        assert!(e.to_string().contains("missing field `samples`"), "{e}");
    }

    #[test]
    fn iperf_totals_are_optional() {
        let r: IperfReport = serde_json::from_str(r#"{"start":{},"end":{"sum":{"bits_per_second":4.0e7,"packets":100,"lost_packets":0,"jitter_ms":0.1}}}"#).unwrap();
        assert_eq!(r.end.sum.packets, Some(100));
        let r: IperfReport = serde_json::from_str(r#"{"error":"unable to connect"}"#).unwrap();
        assert_eq!(r.end.sum.bits_per_second, None);
    }

    #[test]
    fn gap_statistics() {
        let g = GapStats::of(vec![300, 100, 200, 1_500, -50]).unwrap();
        assert_eq!((g.pairs, g.min_ns, g.median_ns, g.max_ns, g.over_1us), (5, -50, 200, 1_500, 1));
        assert!(GapStats::of(vec![]).is_none());
    }
}
