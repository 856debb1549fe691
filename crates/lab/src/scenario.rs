//! Scenario files: hosts, link, DDS workload, interference, capture and the
//! fidelity the run must reach. The format is documented in `docs/lab.md`;
//! topic and interference descriptions are the shared [`TopicFlow`] and
//! [`BurstFlow`] (the TSN simulator reads the same ones).
//!
//! Loading happens in two steps: [`load`] parses and checks the file, then
//! [`Scenario::resolve`] expands generated workloads, fills in subscriber
//! types, QoS and the number of peers every endpoint must discover, and
//! applies command-line overrides. The resolved scenario is what a run uses
//! and what it writes next to its captures.

use anyhow::{anyhow, bail, Result};
use ddscope_trace::Layout;
use ddscope_traffic::{BurstFlow, Bytes, Nanos, Percent, Rate, Reliability, TopicFlow};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// How long periodic publishers publish (`--duration` overrides).
    #[serde(default = "default_duration")]
    pub duration: Nanos,
    /// Time every node gets to discover its peers before the run starts.
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout: Nanos,
    /// Time after the last periodic publication for samples in flight to arrive.
    #[serde(default = "default_linger")]
    pub linger: Nanos,
    /// Synthetic payload bytes: a gradient (`pattern`, compresses well), `zeros` or `random`.
    #[serde(default)]
    pub content: Content,
    /// ros2_tracing tracepoints in the nodes (layout of that ROS 2 distro) and one LTTng
    /// session per host; a node's own `tracing` overrides it.
    #[serde(default, skip_serializing_if = "Tracing::is_off")]
    pub tracing: Tracing,
    #[serde(default)]
    pub network: Network,
    #[serde(default)]
    pub dds: DdsConfig,
    /// The middleware of every node (`cyclone`, `fastdds` or `zenoh`); a node or
    /// `[[generate]]` block that names another `vendor` is refused. Unset: each node's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub middleware: Option<Vendor>,
    /// How the Zenoh nodes meet (docs/lab.md, "Zenoh").
    #[serde(default, skip_serializing_if = "ZenohConfig::is_default")]
    pub zenoh: ZenohConfig,
    #[serde(default)]
    pub capture: CaptureConfig,
    #[serde(default)]
    pub fidelity: FidelityConfig,
    pub hosts: Vec<Host>,
    #[serde(default)]
    pub nodes: Vec<Node>,
    /// Parameterised workloads, expanded into `nodes` by [`Scenario::resolve`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generate: Vec<Generate>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interference: Vec<Interference>,
}

fn default_duration() -> Nanos {
    Nanos(10_000_000_000)
}
fn default_ready_timeout() -> Nanos {
    Nanos(30_000_000_000)
}
fn default_linger() -> Nanos {
    Nanos(1_000_000_000)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Content {
    #[default]
    Pattern,
    Zeros,
    Random,
}

impl Content {
    pub fn as_str(self) -> &'static str {
        match self {
            Content::Pattern => "pattern",
            Content::Zeros => "zeros",
            Content::Random => "random",
        }
    }
}

/// Which ros2_tracing layout the nodes emit (docs/tracing.md): Humble's
/// `rmw_publish` records only the message, Jazzy's also the source timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Tracing {
    #[default]
    Off,
    Humble,
    Jazzy,
}

impl Tracing {
    pub fn is_off(&self) -> bool {
        *self == Tracing::Off
    }
    /// The ros2_tracing layout the nodes emit (`None`: no tracing).
    pub fn layout(self) -> Option<Layout> {
        match self {
            Tracing::Off => None,
            Tracing::Humble => Some(Layout::RmwPublishWithoutTimestamp),
            Tracing::Jazzy => Some(Layout::RmwPublishWithTimestamp),
        }
    }
    /// `off`, or the layout's name (`humble`, `jazzy`).
    pub fn as_str(self) -> &'static str {
        self.layout().map_or("off", Layout::as_str)
    }
}

impl std::str::FromStr for Tracing {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "off" | "none" => Ok(Tracing::Off),
            _ => match s.parse::<Layout>() {
                Ok(Layout::RmwPublishWithoutTimestamp) => Ok(Tracing::Humble),
                Ok(Layout::RmwPublishWithTimestamp) => Ok(Tracing::Jazzy),
                Err(_) => bail!("unknown tracing {s:?} (use off, humble or jazzy)"),
            },
        }
    }
}

impl std::fmt::Display for Tracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    #[serde(default = "default_mtu")]
    pub mtu: u32,
    /// Link rate, enforced with a token bucket (TBF) on every egress of the link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// TBF bucket size; default: 1 ms worth of `rate`, at least 16 full frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tbf_burst: Option<Bytes>,
    /// TBF queue length in time at `rate`.
    #[serde(default = "default_tbf_latency")]
    pub tbf_latency: Nanos,
    /// IPv4 subnet of the link; host i gets address .i+1.
    #[serde(default = "default_subnet")]
    pub subnet: String,
    /// VLAN id of the 802.1Q tags of topics with a `pcp` (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan_id: Option<u16>,
    /// Packet loss on the link (an eBPF program on the switch's egress ports; docs/lab.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossSpec>,
    /// Attach lab/bpf/tc_probe.c at clsact ingress and egress of every host's
    /// interface: the floor cost of capturing from a tc hook (bench/overhead.py).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tc_probe: bool,
}

/// Packet loss on the link: a Gilbert-Elliott channel per switch port
/// (lab/bpf/tc_loss.c). Without bursts it is Bernoulli loss of `probability`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossSpec {
    /// Loss probability per frame outside bursts (the good state).
    #[serde(default)]
    pub probability: f64,
    /// Per frame, the probability that a burst starts (good -> bad); 0: no bursts.
    #[serde(default)]
    pub enter_burst: f64,
    /// Per frame, the probability that a burst ends (bad -> good); the mean burst lasts 1/leave_burst frames.
    #[serde(default = "one_f64")]
    pub leave_burst: f64,
    /// Loss probability per frame in a burst (the bad state).
    #[serde(default = "one_f64")]
    pub burst_loss: f64,
    /// Only frames towards these hosts are dropped (default: towards every host).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
}

fn one_f64() -> f64 {
    1.0
}

impl LossSpec {
    pub fn check(&self) -> Result<()> {
        for (name, v) in [("probability", self.probability), ("enter_burst", self.enter_burst), ("leave_burst", self.leave_burst), ("burst_loss", self.burst_loss)] {
            if !(v.is_finite() && (0.0..=1.0).contains(&v)) {
                bail!("network.loss.{name} {v}: must lie between 0 and 1");
            }
        }
        if self.enter_burst > 0.0 && self.leave_burst == 0.0 {
            bail!("network.loss: leave_burst 0 with enter_burst > 0 would never end a burst");
        }
        Ok(())
    }

    /// The long-run loss rate: the stationary share of the bad state times its loss, plus the good state's.
    pub fn mean_loss(&self) -> f64 {
        if self.enter_burst == 0.0 {
            return self.probability;
        }
        let bad = self.enter_burst / (self.enter_burst + self.leave_burst);
        bad * self.burst_loss + (1.0 - bad) * self.probability
    }
}

impl Default for Network {
    fn default() -> Self {
        Network {
            mtu: default_mtu(),
            rate: None,
            tbf_burst: None,
            tbf_latency: default_tbf_latency(),
            subnet: default_subnet(),
            vlan_id: None,
            loss: None,
            tc_probe: false,
        }
    }
}
fn default_mtu() -> u32 {
    1500
}
fn default_tbf_latency() -> Nanos {
    Nanos(50_000_000)
}
fn default_subnet() -> String {
    "10.77.0.0/24".to_string()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Multicast {
    /// Multicast for participant discovery only; user data and SEDP go unicast.
    #[default]
    Spdp,
    /// Cyclone DDS decides (may send data to a multicast group).
    Default,
    /// No multicast at all (discovery then needs peers; not supported by the lab).
    False,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DdsConfig {
    #[serde(default)]
    pub domain_id: u32,
    /// Cyclone DDS `General/AllowMulticast`.
    #[serde(default)]
    pub multicast: Multicast,
    /// Cyclone DDS `Internal/SocketReceiveBufferSize` (min); the kernel caps it at net.core.rmem_max.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_receive_buffer: Option<Bytes>,
    /// Cyclone DDS `General/FragmentSize`: DATA_FRAG payload (default 1344 B). The thesis used 64 KB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fragment_size: Option<Bytes>,
    /// Cyclone DDS `General/MaxMessageSize`: largest RTPS message in one UDP datagram (default 14720 B, at most 65500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_size: Option<Bytes>,
}

impl Default for DdsConfig {
    fn default() -> Self {
        DdsConfig { domain_id: 0, multicast: Multicast::Spdp, socket_receive_buffer: None, fragment_size: None, max_message_size: None }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureConfig {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Kernel capture buffer (tcpdump -B); the default one drops at 2.76 MB x 10 Hz.
    #[serde(default = "default_capture_buffer")]
    pub buffer: Bytes,
    #[serde(default = "default_snaplen")]
    pub snaplen: u32,
    /// A run whose captures lost packets in the kernel fails unless this is true.
    #[serde(default)]
    pub allow_drops: bool,
    /// How often every workload process's CPU time is read into load.csv (5 ms to 10 s).
    #[serde(default = "default_load_interval")]
    pub load_interval: Nanos,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        CaptureConfig { enabled: true, buffer: default_capture_buffer(), snaplen: default_snaplen(), allow_drops: false, load_interval: default_load_interval() }
    }
}
fn default_load_interval() -> Nanos {
    Nanos(200_000_000)
}
fn yes() -> bool {
    true
}
fn default_capture_buffer() -> Bytes {
    Bytes(64 * 1024 * 1024)
}
fn default_snaplen() -> u32 {
    262_144
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FidelityConfig {
    /// Largest relative deviation of a topic's achieved rate (from the capture) from nominal.
    #[serde(default = "default_rate_tolerance")]
    pub rate_tolerance: Percent,
    /// Fail the run when a fidelity check fails (otherwise only report it).
    #[serde(default = "yes")]
    pub enforce: bool,
    /// Reliable samples may be lost without failing the run.
    #[serde(default)]
    pub allow_loss: bool,
}

impl Default for FidelityConfig {
    fn default() -> Self {
        FidelityConfig { rate_tolerance: default_rate_tolerance(), enforce: true, allow_loss: false }
    }
}
fn default_rate_tolerance() -> Percent {
    Percent(0.02)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    pub name: String,
    /// The host's clock, warped (offset, drift, step) as an unsynchronised host's would read
    /// (crate::clockwarp); the first host's is the reference and cannot be warped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<crate::clockwarp::ClockSpec>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Vendor {
    #[default]
    Cyclone,
    Fastdds,
    /// rmw_zenoh's conventions on eclipse-zenoh (lab/zenoh/ddslab_zenoh.py).
    Zenoh,
    /// A real ROS 2 Jazzy node (rclcpp, lab/ros2/ddslab_ros2) on rmw_cyclonedds_cpp.
    #[serde(rename = "rmw_cyclonedds_cpp")]
    RmwCyclonedds,
    /// A real ROS 2 Jazzy node on rmw_fastrtps_cpp (Fast DDS 2.14).
    #[serde(rename = "rmw_fastrtps_cpp")]
    RmwFastrtps,
    /// A real ROS 2 Jazzy node on rmw_zenoh_cpp (the bundle's snapshot: Zenoh protocol 0x08), with
    /// rmw_zenoh's own router (rmw_zenohd).
    #[serde(rename = "rmw_zenoh_cpp")]
    RmwZenoh,
}

impl Vendor {
    pub fn as_str(self) -> &'static str {
        match self {
            Vendor::Cyclone => "cyclone",
            Vendor::Fastdds => "fastdds",
            Vendor::Zenoh => "zenoh",
            Vendor::RmwCyclonedds => "rmw_cyclonedds_cpp",
            Vendor::RmwFastrtps => "rmw_fastrtps_cpp",
            Vendor::RmwZenoh => "rmw_zenoh_cpp",
        }
    }
    /// RTPS vendor id on the wire (Zenoh: ddscope's marker for its samples, docs/zenoh.md).
    pub fn vendor_id(self) -> &'static str {
        match self {
            Vendor::Cyclone | Vendor::RmwCyclonedds => "0x0110",
            Vendor::Fastdds | Vendor::RmwFastrtps => "0x010f",
            Vendor::Zenoh | Vendor::RmwZenoh => "0x5a00",
        }
    }
    /// A real ROS 2 node (rclcpp on an rmw), not the lab's emulation of one.
    pub fn is_ros2(self) -> bool {
        matches!(self, Vendor::RmwCyclonedds | Vendor::RmwFastrtps | Vendor::RmwZenoh)
    }
    /// Speaks Zenoh (needs a router).
    pub fn is_zenoh(self) -> bool {
        matches!(self, Vendor::Zenoh | Vendor::RmwZenoh)
    }
    /// Nodes of one family can share a topic: RTPS (every DDS vendor, emulated or real), Zenoh 1.x
    /// (the lab's rmw_zenoh emulation on eclipse-zenoh), and the real rmw_zenoh_cpp of the bundle
    /// (Zenoh protocol 0x08, which Zenoh 1.x does not speak).
    pub fn family(self) -> &'static str {
        match self {
            Vendor::Zenoh => "zenoh",
            Vendor::RmwZenoh => "rmw_zenoh_cpp",
            _ => "dds",
        }
    }
}

/// How the lab's Zenoh nodes meet: every node is a session of its own (an rmw_zenoh context)
/// and one Zenoh router runs where `router` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZenohConfig {
    /// `client`: every node is a client of the router, all data goes through it (the router in
    /// the middle); `peer`: rmw_zenoh's session default, peers that learn of each other through
    /// the router's gossip and send data to each other directly.
    #[serde(default)]
    pub mode: ZenohMode,
    /// Where the router runs: `switch` (default; the bridge namespace between the hosts, so each
    /// host's capture holds its own link to the router) or the name of a host.
    #[serde(default = "default_router")]
    pub router: String,
    /// The router's TCP port (rmw_zenoh's default 7447).
    #[serde(default = "default_zenoh_port")]
    pub port: u16,
    /// With the router on the switch: capture the router's link to every host at the switch's
    /// port towards it (`router-HOST.pcapng`), so `ddscope latency RUN` times the router's hop as
    /// its own row (default true).
    #[serde(default = "yes")]
    pub capture_router: bool,
}

impl Default for ZenohConfig {
    fn default() -> Self {
        ZenohConfig { mode: ZenohMode::default(), router: default_router(), port: default_zenoh_port(), capture_router: true }
    }
}

impl ZenohConfig {
    pub fn is_default(&self) -> bool {
        *self == ZenohConfig::default()
    }
}

fn default_router() -> String {
    "switch".to_string()
}
fn default_zenoh_port() -> u16 {
    7447
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ZenohMode {
    #[default]
    Client,
    Peer,
}

impl ZenohMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ZenohMode::Client => "client",
            ZenohMode::Peer => "peer",
        }
    }
}

impl std::str::FromStr for Vendor {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "cyclone" | "cyclonedds" => Ok(Vendor::Cyclone),
            "fastdds" | "fastrtps" => Ok(Vendor::Fastdds),
            "zenoh" | "rmw_zenoh" => Ok(Vendor::Zenoh),
            "rmw_cyclonedds_cpp" => Ok(Vendor::RmwCyclonedds),
            "rmw_fastrtps_cpp" => Ok(Vendor::RmwFastrtps),
            "rmw_zenoh_cpp" => Ok(Vendor::RmwZenoh),
            _ => bail!("unknown middleware {s:?} (use cyclone, fastdds or zenoh, or a real ROS 2 rmw: rmw_cyclonedds_cpp, rmw_fastrtps_cpp, rmw_zenoh_cpp)"),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub name: String,
    pub host: String,
    #[serde(default)]
    pub vendor: Vendor,
    /// The node's DDS domain (its participant's); default `dds.domain_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<u32>,
    /// Overrides the scenario's `tracing` for this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracing: Option<Tracing>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub publish: Vec<TopicFlow>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subscribe: Vec<Subscribe>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relay: Vec<Relay>,
    /// Pins the node's process (every thread) to these CPUs (`sched_setaffinity`); empty: anywhere.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<usize>,
    /// Runs the node under `SCHED_FIFO` at this priority (1 to 99): it takes its CPUs from every
    /// normal process whenever it is runnable. With `cpus` and a spinning relay it is a CPU hog at
    /// known moments (its callbacks; docs/latency.md, "Why was it late").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realtime: Option<u8>,
    /// Sender bursts injected into the node's publishers (docs/latency.md, "Why was it late").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub burst: Vec<Burst>,
    /// A real ROS 2 node's executor: rclcpp's `single` threaded (default) or `multi` threaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<Executor>,
    /// A real ROS 2 node with rclcpp's intra-process communication on (`use_intra_process_comms`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub intra_process: bool,
    /// A real rmw_fastrtps_cpp node with Fast DDS's default transports, shared memory
    /// beside UDPv4 (the lab otherwise gives Fast DDS UDPv4 only): two such nodes of one host
    /// exchange their samples through shared memory, and nothing reaches the capture. The lab's
    /// hosts are namespaces of one kernel (one /dev/shm): only nodes of one host may have it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared_memory: bool,
    /// A real ROS 2 node whose periodic publishers publish from rclcpp wall timers on its executor
    /// (`create_wall_timer`, as most applications do: the publish runs inside a timer callback),
    /// not from a thread of their own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timers: bool,
    /// Service calls a real ROS 2 node makes: every rclcpp node serves its parameters, and this
    /// node calls `/<node>/get_parameters` of another real ROS 2 node of the scenario (on the same
    /// rmw) at `rate_hz`, through a real rclcpp client (rq/…Request and rr/…Reply on DDS).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub call: Vec<Call>,
    /// Real ROS 2 nodes with the same `container` run as composable nodes in one process (as a
    /// component container runs them): one rclcpp context and executor, each node its own
    /// `rclcpp::Node`; with `intra_process` on both ends, rclcpp delivers between them
    /// intra-process (nothing reaches the rmw). Its members share host, rmw, domain, executor,
    /// `cpus`, `realtime`, `shared_memory` and tracing; its log is `logs/<container>.log`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
}

/// A periodic service call (`[[nodes.call]]`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// `/<node>/get_parameters` of a real ROS 2 node of the scenario.
    pub service: String,
    pub rate_hz: f64,
}

/// rclcpp's executors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Executor {
    Single,
    Multi,
}

/// A fault injected at known samples: every `every`-th period the publisher of
/// `topic` publishes `count` samples back to back (sequence numbers
/// `k·every + 1 … k·every + count`) and skips the periods of the `count - 1`
/// extra ones, so its mean rate stays the topic's.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Burst {
    pub topic: String,
    pub every: u64,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subscribe {
    pub topic: String,
    /// Defaults to the type of the topic's publishers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub type_name: Option<String>,
    /// Defaults to the publishers' reliability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reliability: Option<Reliability>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_depth: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ComputeMode {
    /// The node sleeps for the compute time (does not load the CPU).
    #[default]
    Sleep,
    /// The node busy-waits for the compute time (loads one CPU like real processing).
    Spin,
}

/// Receives `input`, computes for `compute`, publishes the output topic. The
/// output's `rate_hz` is what the relay achieves: at most the input's rate; a
/// lower rate forwards that fraction of the input samples.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Relay {
    pub input: String,
    #[serde(default)]
    pub compute: Nanos,
    #[serde(default)]
    pub compute_mode: ComputeMode,
    /// A fault to inject at known samples: every input sample whose sequence
    /// number is a multiple of `slow_every` computes `slow_compute` instead
    /// of `compute` (0: never). The callback overruns and what arrives
    /// meanwhile waits in the executor (docs/latency.md, "Why was it late").
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub slow_every: u64,
    #[serde(default)]
    pub slow_compute: Nanos,
    /// Publish the output in this DDS domain (a bridge: the input is received in
    /// the node's domain); default the node's domain. Cyclone DDS nodes only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_domain: Option<u32>,
    #[serde(flatten)]
    pub output: TopicFlow,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generate {
    /// Topic name prefix; each generated topic is PREFIX/<size>B_<rate>hz_<qos>.
    #[serde(default = "default_prefix")]
    pub prefix: String,
    #[serde(default = "default_gen_type")]
    pub type_name: String,
    pub sizes: Vec<Bytes>,
    pub rates_hz: Vec<f64>,
    #[serde(default = "default_reliabilities")]
    pub reliability: Vec<Reliability>,
    #[serde(default = "default_depth")]
    pub history_depth: u32,
    /// How publishers, subscribers and topics relate (Kouril et al.'s topologies);
    /// `shared` (the default): every publisher publishes every generated topic and
    /// every subscriber subscribes to all of them.
    #[serde(default, skip_serializing_if = "GenTopology::is_shared")]
    pub topology: GenTopology,
    /// Publisher nodes (1 to 64).
    #[serde(default = "one")]
    pub publishers: u32,
    /// Subscriber nodes (1 to 64).
    #[serde(default = "one")]
    pub subscribers: u32,
    /// Hosts the publisher nodes are placed on, round robin.
    pub publisher_hosts: Vec<String>,
    /// Hosts the subscriber nodes are placed on, round robin.
    pub subscriber_hosts: Vec<String>,
    #[serde(default)]
    pub vendor: Vendor,
}

/// The publisher-subscriber relation of a `[[generate]]` block (Kouril et al., Fig. 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum GenTopology {
    /// Every publisher publishes every topic, every subscriber subscribes to every topic.
    #[default]
    #[serde(rename = "shared")]
    Shared,
    /// One publisher node, one subscriber node.
    #[serde(rename = "1-1")]
    OneOne,
    /// One publisher node; N subscriber nodes, one subscription each per topic.
    #[serde(rename = "1-n")]
    OneN,
    /// N publisher nodes, each on its own topics; one subscriber node subscribing to all N.
    #[serde(rename = "n-1")]
    NOne,
    /// N publisher nodes, each on its own topics; N subscriber nodes, the i-th subscribing
    /// to the i-th publisher's topics.
    #[serde(rename = "n-n")]
    NN,
}

impl GenTopology {
    /// The name scenario files use.
    pub fn as_str(self) -> &'static str {
        match self {
            GenTopology::Shared => "shared",
            GenTopology::OneOne => "1-1",
            GenTopology::OneN => "1-n",
            GenTopology::NOne => "n-1",
            GenTopology::NN => "n-n",
        }
    }
}

impl GenTopology {
    pub fn is_shared(&self) -> bool {
        *self == GenTopology::Shared
    }
    /// Whether every publisher gets topics of its own (`PREFIX/p<i>/...`).
    fn own_topics(self) -> bool {
        matches!(self, GenTopology::NOne | GenTopology::NN)
    }
}

/// Most publisher or subscriber nodes one `[[generate]]` block makes (Kouril et al. goes to 64).
pub const MAX_GENERATED_NODES: u32 = 64;
/// Nodes in one scenario, generated ones included: each is a process with
/// its own DDS participant (the load sampler follows at most 256 processes).
pub const MAX_NODES: usize = 256;
/// CPUs a `nodes[].cpus` may name (a `cpu_set_t` holds 1024).
pub const MAX_CPU: usize = 1024;
/// Fastest emulated link (`network.rate`): 400 Gbit/s, the fastest Ethernet.
pub const MAX_LINK_RATE_BPS: u64 = 400_000_000_000;

fn default_prefix() -> String {
    "/bench".to_string()
}
fn default_gen_type() -> String {
    "std_msgs/msg/UInt8MultiArray".to_string()
}
fn default_reliabilities() -> Vec<Reliability> {
    vec![Reliability::Reliable]
}
fn default_depth() -> u32 {
    10
}
fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}
fn one() -> u32 {
    1
}

/// iperf3 UDP traffic from one host to another (thesis 4.2.2).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Interference {
    pub from: String,
    pub to: String,
    /// Offered load as a share of `network.rate`; sets the flow's `rate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<Percent>,
    #[serde(flatten)]
    pub flow: BurstFlow,
}

/// Command-line overrides of a scenario.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub duration: Option<Nanos>,
    pub vendors: Vec<(String, Vendor)>,
    /// Offered load of every interference flow, as a share of network.rate.
    pub load: Option<Percent>,
    /// Tracing of every node (replaces the scenario's and the nodes' own setting).
    pub tracing: Option<Tracing>,
}

/// What one node publishes or relays, with what a run needs to know about it.
#[derive(Debug, Clone, Serialize)]
pub struct Writer {
    pub node: String,
    pub host: String,
    pub vendor: Vendor,
    pub flow: TopicFlow,
    /// `Some` for a relay: the input topic.
    pub input: Option<String>,
    /// Readers in the scenario that match this writer.
    pub readers: usize,
}

/// Readers and writers per topic of a scenario ([`Scenario::topic_counts`]).
#[derive(Debug, Clone, Default)]
pub struct TopicCounts {
    readers: BTreeMap<String, usize>,
    writers: BTreeMap<String, usize>,
}

impl TopicCounts {
    pub fn readers_of(&self, topic: &str) -> usize {
        self.readers.get(topic).copied().unwrap_or(0)
    }
    pub fn writers_of(&self, topic: &str) -> usize {
        self.writers.get(topic).copied().unwrap_or(0)
    }
}

/// A reader of one topic in one node.
#[derive(Debug, Clone, Serialize)]
pub struct Reader {
    pub node: String,
    pub host: String,
    pub topic: String,
    pub type_name: String,
    pub reliability: Reliability,
    pub history_depth: u32,
    pub writers: usize,
}

/// Reads and checks a scenario file. Errors are one line and name the file and the field.
pub fn load(path: &Path) -> Result<Scenario> {
    let text = ddscope_traffic::fsio::read_bounded_text(path, ddscope_traffic::fsio::MAX_CONFIG_BYTES, "scenario file")?;
    parse(&text).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// Parses scenario TOML (see [`load`]).
pub fn parse(text: &str) -> Result<Scenario> {
    let mut value: toml::Table = toml::from_str(text).map_err(|e| anyhow!("{}", toml_error(text, &e)))?;
    fill_interference_rates(&mut value)?;
    check_middleware_conflicts(&value)?;
    let sc: Scenario = Scenario::deserialize(toml::Value::Table(value)).map_err(|e| anyhow!("{}", one_line(&e.to_string())))?;
    sc.check()?;
    Ok(sc)
}

/// `middleware` sets every node's vendor: a node or generate block that names another is refused
/// (read from the file, where an explicit `vendor = "cyclone"` differs from none).
fn check_middleware_conflicts(v: &toml::Table) -> Result<()> {
    let Some(m) = v.get("middleware").and_then(|m| m.as_str()) else { return Ok(()) };
    let m: Vendor = m.parse().map_err(|e| anyhow!("middleware: {e}"))?;
    for section in ["nodes", "generate"] {
        let Some(list) = v.get(section).and_then(|l| l.as_array()) else { continue };
        for (i, n) in list.iter().enumerate() {
            if let Some(vendor) = n.get("vendor").and_then(|x| x.as_str()) {
                let vendor: Vendor = vendor.parse().map_err(|e| anyhow!("{section}[{i}].vendor: {e}"))?;
                if vendor != m {
                    bail!("{section}[{i}].vendor = {:?} contradicts middleware = {:?} (which sets every node's)", vendor.as_str(), m.as_str());
                }
            }
        }
    }
    Ok(())
}

/// `load = "40%"` is a share of the link rate: compute the flow's `rate` before the
/// shared BurstFlow type (which requires it) reads the table.
fn fill_interference_rates(v: &mut toml::Table) -> Result<()> {
    let link = match v.get("network").and_then(|n| n.get("rate")) {
        Some(r) => Some(Rate::deserialize(r.clone()).map_err(|e| anyhow!("network.rate: {e}"))?),
        None => None,
    };
    if let Some(toml::Value::Array(items)) = v.get_mut("interference") {
        for (i, item) in items.iter_mut().enumerate() {
            let Some(t) = item.as_table_mut() else { continue };
            let Some(load) = t.get("load") else { continue };
            let load = Percent::deserialize(load.clone()).map_err(|e| anyhow!("interference[{i}].load: {e}"))?;
            let Some(link) = link else {
                bail!("interference[{i}].load: a load needs network.rate (the link rate it is a share of)");
            };
            let rate = Rate((link.0 as f64 * load.0).round() as u64);
            if let Some(given) = t.get("rate") {
                // a resolved scenario carries both; they must agree
                let given = Rate::deserialize(given.clone()).map_err(|e| anyhow!("interference[{i}].rate: {e}"))?;
                if given.0.abs_diff(rate.0) > rate.0 / 1_000_000 + 1 {
                    bail!("interference[{i}]: rate {given} is not load {load} of network.rate {link}; give one of them");
                }
            }
            t.insert("rate".into(), toml::Value::String(rate.to_string()));
        }
    }
    Ok(())
}

fn toml_error(text: &str, e: &toml::de::Error) -> String {
    // The message may quote the input (a key, a value): short and escaped.
    let msg = one_line(e.message());
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("line {line}: {msg}")
        }
        None => msg,
    }
}

/// One line of a message that may quote the input: whitespace collapsed,
/// control characters escaped, at most 200 characters of it.
fn one_line(s: &str) -> String {
    ddscope_traffic::text::excerpt(s, ddscope_traffic::text::EXCERPT_CHARS)
}

fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// ROS 2 topic names: absolute, segments of letters, digits and underscores.
fn valid_topic(s: &str) -> bool {
    s.len() > 1
        && s.starts_with('/')
        && !s.ends_with('/')
        && !s.contains("//")
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/')
}

impl Scenario {
    /// Each warped host's clock (crate::clockwarp), by host name.
    pub fn clock_warps(&self) -> BTreeMap<String, crate::clockwarp::Warp> {
        self.hosts
            .iter()
            .filter_map(|h| Some((h.name.clone(), h.clock.as_ref()?.warp(&h.name).ok().filter(|w| !w.is_identity())?)))
            .collect()
    }

    fn check(&self) -> Result<()> {
        if !valid_name(&self.name) {
            bail!("name {:?}: use letters, digits, '-' and '_'", self.name);
        }
        if self.duration.0 == 0 || self.duration.0 > 3_600_000_000_000 {
            bail!("duration {}: must lie between 0 and 1h", self.duration);
        }
        if self.hosts.len() < 2 {
            bail!("hosts: a lab needs at least two hosts (it has {})", self.hosts.len());
        }
        if self.hosts.len() > 32 {
            bail!("hosts: at most 32 hosts");
        }
        let mut hosts = BTreeSet::new();
        for (i, h) in self.hosts.iter().enumerate() {
            // A host name reaches `hostname` and `--name` arguments: an RFC 1123
            // label (plus '_'), so never one that reads as an option (`-h`).
            let label = h.name.starts_with(|c: char| c.is_ascii_alphanumeric()) && !h.name.ends_with(['-', '_']);
            if !valid_name(&h.name) || h.name.len() > 12 || !label {
                bail!("hosts[{i}].name {:?}: use up to 12 letters, digits, '-' and '_', starting with a letter or digit and not ending with '-' or '_'", one_line(&h.name));
            }
            if !hosts.insert(h.name.as_str()) {
                bail!("hosts[{i}].name {:?}: duplicate host", h.name);
            }
            if let Some(c) = &h.clock {
                let w = c.warp(&h.name)?;
                if i == 0 && !w.is_identity() {
                    bail!("hosts[0] ({}): clock: the first host's clock is the reference the others are measured against (ddscope's first capture); warp another host's", h.name);
                }
            }
        }
        if !(576..=65535).contains(&self.network.mtu) {
            bail!("network.mtu {}: must lie between 576 and 65535", self.network.mtu);
        }
        if let Some(r) = self.network.rate {
            if r.0 < 1_000_000 {
                bail!("network.rate {r}: below 1 Mbit/s");
            }
            if r.0 > MAX_LINK_RATE_BPS {
                bail!("network.rate {r}: above 400 Gbit/s, the fastest link the lab emulates");
            }
        }
        if self.nodes.len() > MAX_NODES {
            bail!("nodes: {} nodes; a lab runs at most {MAX_NODES} (each is a process with its own DDS participant)", self.nodes.len());
        }
        crate::addr::parse_subnet(&self.network.subnet, self.hosts.len() + 1).map_err(|e| anyhow!("network.subnet: {e}"))?;
        if self.dds.multicast == Multicast::False {
            bail!("dds.multicast = false: the lab discovers peers by multicast SPDP; use spdp or default");
        }
        if let Some(m) = self.dds.max_message_size {
            if !(1024..=65500).contains(&m.0) {
                bail!("dds.max_message_size {m}: must lie between 1024 and 65500 bytes");
            }
        }
        if let Some(f) = self.dds.fragment_size {
            let max = self.dds.max_message_size.map(|m| m.0).unwrap_or(14720);
            if f.0 < 256 || f.0 + 100 > max {
                bail!("dds.fragment_size {f}: must lie between 256 and max_message_size - 100 ({max} - 100); raise dds.max_message_size too");
            }
        }
        if self.dds.domain_id > 232 {
            bail!("dds.domain_id {}: must be at most 232", self.dds.domain_id);
        }
        let li = self.capture.load_interval.0;
        if !(5_000_000..=10_000_000_000).contains(&li) {
            bail!("capture.load_interval {}: must lie between 5ms and 10s", self.capture.load_interval);
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(d) = n.domain.filter(|d| *d > 232) {
                bail!("nodes[{i}] ({}).domain {d}: must be at most 232", n.name);
            }
            for (j, r) in n.relay.iter().enumerate() {
                if let Some(d) = r.output_domain.filter(|d| *d > 232) {
                    bail!("nodes[{i}] ({}).relay[{j}].output_domain {d}: must be at most 232", n.name);
                }
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if !valid_name(&n.name) {
                bail!("nodes[{i}].name {:?}: use letters, digits, '-' and '_'", n.name);
            }
            if !hosts.contains(n.host.as_str()) {
                bail!("nodes[{i}] ({}): host {:?} is not in hosts", n.name, n.host);
            }
            if let Some(c) = n.cpus.iter().find(|c| **c >= MAX_CPU) {
                bail!("nodes[{i}] ({}).cpus: CPU {c} is beyond the {MAX_CPU} a CPU set holds", n.name);
            }
            for (j, b) in n.burst.iter().enumerate() {
                if !n.publish.iter().any(|p| p.topic == b.topic) {
                    bail!("nodes[{i}] ({}).burst[{j}]: the node does not publish {:?}", n.name, b.topic);
                }
                if b.count < 2 || b.count > b.every {
                    bail!("nodes[{i}] ({}).burst[{j}]: count {} must lie between 2 and every ({})", n.name, b.count, b.every);
                }
            }
            if let Some(p) = n.realtime.filter(|p| !(1..=99).contains(p)) {
                bail!("nodes[{i}] ({}).realtime {p}: a SCHED_FIFO priority lies between 1 and 99", n.name);
            }
            for (j, p) in n.publish.iter().enumerate() {
                check_flow(p).map_err(|e| anyhow!("nodes[{i}] ({}).publish[{j}]: {e}", n.name))?;
            }
            for (j, r) in n.relay.iter().enumerate() {
                check_flow(&r.output).map_err(|e| anyhow!("nodes[{i}] ({}).relay[{j}]: {e}", n.name))?;
                if !valid_topic(&r.input) {
                    bail!("nodes[{i}] ({}).relay[{j}].input {:?}: not a ROS 2 topic name", n.name, r.input);
                }
                if r.slow_compute.0 > 10_000_000_000 {
                    bail!("nodes[{i}] ({}).relay[{j}].slow_compute {}: at most 10s", n.name, r.slow_compute);
                }
                if r.compute.0 > 10_000_000_000 {
                    bail!("nodes[{i}] ({}).relay[{j}].compute {}: at most 10s", n.name, r.compute);
                }
            }
            for (j, s) in n.subscribe.iter().enumerate() {
                if !valid_topic(&s.topic) {
                    bail!("nodes[{i}] ({}).subscribe[{j}].topic {:?}: not a ROS 2 topic name", n.name, s.topic);
                }
            }
            if n.publish.len() + n.subscribe.len() + 2 * n.relay.len() > 64 {
                bail!("nodes[{i}] ({}): more than 64 endpoints in one node", n.name);
            }
        }
        check_ebpf_options(self)?;
        for (i, g) in self.generate.iter().enumerate() {
            if g.sizes.is_empty() || g.rates_hz.is_empty() || g.reliability.is_empty() {
                bail!("generate[{i}]: sizes, rates_hz and reliability must not be empty");
            }
            if g.publishers == 0 || g.subscribers == 0 || g.publishers > MAX_GENERATED_NODES || g.subscribers > MAX_GENERATED_NODES {
                bail!("generate[{i}]: publishers and subscribers must lie between 1 and {MAX_GENERATED_NODES}");
            }
            let (np, ns) = (g.publishers, g.subscribers);
            let shape_ok = match g.topology {
                GenTopology::Shared => true,
                GenTopology::OneOne => np == 1 && ns == 1,
                GenTopology::OneN => np == 1,
                GenTopology::NOne => ns == 1,
                GenTopology::NN => np == ns,
            };
            if !shape_ok {
                let want = match g.topology {
                    GenTopology::OneOne => "publishers = 1 and subscribers = 1",
                    GenTopology::OneN => "publishers = 1",
                    GenTopology::NOne => "subscribers = 1",
                    _ => "publishers = subscribers",
                };
                bail!("generate[{i}]: topology {:?} needs {want} (it has {np} publishers and {ns} subscribers)", g.topology.as_str());
            }
            let combos = g.sizes.len() * g.rates_hz.len() * g.reliability.len();
            let per_sub = if g.topology == GenTopology::NOne { combos * np as usize } else { combos };
            if combos > 64 || per_sub > 64 {
                bail!(
                    "generate[{i}]: {} topics in one node (sizes x rates x reliability{}); a node holds at most 64 endpoints",
                    per_sub,
                    if per_sub > combos { " x publishers" } else { "" }
                );
            }
            if !valid_topic(&g.prefix) {
                bail!("generate[{i}].prefix {:?}: not a ROS 2 topic name", g.prefix);
            }
            for h in g.publisher_hosts.iter().chain(&g.subscriber_hosts) {
                if !hosts.contains(h.as_str()) {
                    bail!("generate[{i}]: host {h:?} is not in hosts");
                }
            }
            if g.publisher_hosts.is_empty() || g.subscriber_hosts.is_empty() {
                bail!("generate[{i}]: publisher_hosts and subscriber_hosts must not be empty");
            }
            for r in &g.rates_hz {
                if !(r.is_finite() && *r > 0.0 && *r <= 100_000.0) {
                    bail!("generate[{i}].rates_hz: {r} is not a rate between 0 and 100 kHz");
                }
            }
        }
        for (i, it) in self.interference.iter().enumerate() {
            if !hosts.contains(it.from.as_str()) || !hosts.contains(it.to.as_str()) {
                bail!("interference[{i}]: hosts {:?} -> {:?} must both be in hosts", it.from, it.to);
            }
            if it.from == it.to {
                bail!("interference[{i}]: from and to are the same host");
            }
            if it.flow.payload_bytes.0 == 0 || it.flow.payload_bytes.0 > 65_507 {
                bail!("interference[{i}].payload_bytes {}: must lie between 1 and 65507", it.flow.payload_bytes);
            }
            if it.flow.pacing.0 < 1_000 {
                bail!("interference[{i}].pacing {}: at least 1us", it.flow.pacing);
            }
        }
        Ok(())
    }

    /// Expands `generate`, applies overrides and checks the workload as a whole.
    pub fn resolve(self, duration: Option<Nanos>, vendors: &[(String, Vendor)]) -> Result<Scenario> {
        self.resolve_with(&Overrides { duration, vendors: vendors.to_vec(), load: None, tracing: None })
    }

    /// [`Scenario::resolve`] with every command-line override.
    pub fn resolve_with(mut self, o: &Overrides) -> Result<Scenario> {
        let vendors = &o.vendors;
        if let Some(d) = o.duration {
            if d.0 == 0 || d.0 > 3_600_000_000_000 {
                bail!("duration {d}: must lie between 0 and 1h");
            }
            self.duration = d;
        }
        if let Some(load) = o.load {
            if self.interference.is_empty() {
                bail!("load {load}: the scenario has no interference to set");
            }
            let Some(link) = self.network.rate else {
                bail!("load {load}: the scenario needs network.rate (the link rate the load is a share of)");
            };
            for it in &mut self.interference {
                it.load = Some(load);
                it.flow.rate = Rate((link.0 as f64 * load.0).round() as u64);
            }
        }
        let generated = std::mem::take(&mut self.generate);
        for (gi, g) in generated.iter().enumerate() {
            let mut topics = Vec::new();
            // N-1 and N-N: every publisher on topics of its own
            let prefixes: Vec<String> = if g.topology.own_topics() {
                (0..g.publishers).map(|p| format!("{}/p{p}", g.prefix)).collect()
            } else {
                vec![g.prefix.clone()]
            };
            for prefix in &prefixes {
            for size in &g.sizes {
                for rate in &g.rates_hz {
                    for rel in &g.reliability {
                        let rel_name = match rel {
                            Reliability::Reliable => "reliable",
                            Reliability::BestEffort => "best_effort",
                        };
                        let rate_name = format!("{rate}").replace('.', "p");
                        topics.push(TopicFlow {
                            topic: format!("{}/s{}B_{}hz_{}", prefix, size.0, rate_name, rel_name),
                            type_name: g.type_name.clone(),
                            sample_bytes: *size,
                            rate_hz: *rate,
                            pcp: None,
                            reliability: *rel,
                            dds_fragment_bytes: None,
                            history_depth: g.history_depth,
                        });
                    }
                }
            }
            }
            for t in &topics {
                check_flow(t).map_err(|e| anyhow!("generate[{gi}]: {e}"))?;
            }
            let per_prefix = topics.len() / prefixes.len();
            // the topics of publisher p (all of them when they are shared)
            let own = |p: usize| -> Vec<TopicFlow> {
                if g.topology.own_topics() {
                    topics[p * per_prefix..(p + 1) * per_prefix].to_vec()
                } else {
                    topics.clone()
                }
            };
            for p in 0..g.publishers as usize {
                self.nodes.push(Node {
                    name: format!("gen{gi}_pub{p}"),
                    host: g.publisher_hosts[p % g.publisher_hosts.len()].clone(),
                    vendor: g.vendor,
                    domain: None,
                    tracing: None,
                    publish: own(p),
                    subscribe: vec![],
                    relay: vec![],
                    cpus: vec![],
                    realtime: None,
                    burst: vec![],
                    executor: None,
                    intra_process: false,
                    shared_memory: false,
                    timers: false,
                    call: vec![],
                    container: None,
                });
            }
            for s in 0..g.subscribers as usize {
                self.nodes.push(Node {
                    name: format!("gen{gi}_sub{s}"),
                    host: g.subscriber_hosts[s % g.subscriber_hosts.len()].clone(),
                    // Zenoh nodes only talk to Zenoh nodes
                    vendor: if g.vendor.family() == "dds" { Vendor::Cyclone } else { g.vendor },
                    domain: None,
                    tracing: None,
                    publish: vec![],
                    subscribe: if g.topology == GenTopology::NN { own(s) } else { topics.clone() }
                        .iter()
                        .map(|t| Subscribe { topic: t.topic.clone(), type_name: None, reliability: None, history_depth: None })
                        .collect(),
                    relay: vec![],
                    cpus: vec![],
                    realtime: None,
                    burst: vec![],
                    executor: None,
                    intra_process: false,
                    shared_memory: false,
                    timers: false,
                    call: vec![],
                    container: None,
                });
            }
        }
        if let Some(t) = o.tracing {
            self.tracing = t;
            for n in &mut self.nodes {
                n.tracing = None;
            }
        }
        if let Some(m) = self.middleware {
            for n in &mut self.nodes {
                n.vendor = m;
            }
        }
        for (node, vendor) in vendors {
            let n = self.nodes.iter_mut().find(|n| &n.name == node).ok_or_else(|| anyhow!("vendor for {node}: the scenario has no node of that name"))?;
            n.vendor = *vendor;
        }
        if self.nodes.len() > MAX_NODES {
            bail!(
                "nodes: {} nodes with the generated ones; a lab runs at most {MAX_NODES} (each is a process with its own DDS participant)",
                self.nodes.len()
            );
        }
        let mut names = BTreeSet::new();
        for n in &self.nodes {
            if !names.insert(n.name.clone()) {
                bail!("nodes: duplicate node name {:?}", n.name);
            }
        }
        // Real ROS 2's options on nodes that are not real ROS 2 nodes would be ignored: refused.
        let mut shm_host: Option<&str> = None;
        for n in &self.nodes {
            if !n.vendor.is_ros2() && (n.executor.is_some() || n.intra_process || n.shared_memory || n.timers || !n.call.is_empty() || n.container.is_some()) {
                bail!("node {}: executor, intra_process, shared_memory, timers, call and container are options of real ROS 2 nodes (vendor rmw_*), not of vendor {:?}", n.name, n.vendor.as_str());
            }
            for c in &n.call {
                let server = c.service.strip_prefix('/').and_then(|x| x.strip_suffix("/get_parameters"));
                let Some(server) = server.and_then(|x| self.nodes.iter().find(|m| m.name == x)) else {
                    bail!("node {}: call {:?}: the lab calls `/<node>/get_parameters` of a node of the scenario (every rclcpp node serves it)", n.name, c.service);
                };
                if server.name == n.name {
                    bail!("node {}: call {:?}: a node calling its own service goes through no network; call another node's", n.name, c.service);
                }
                if server.vendor != n.vendor {
                    bail!("node {}: call {:?}: the server runs {}, the caller {}: the lab's calls stay on one rmw", n.name, c.service, server.vendor.as_str(), n.vendor.as_str());
                }
                if !(c.rate_hz > 0.0 && c.rate_hz <= 1000.0) {
                    bail!("node {}: call {:?}: rate_hz {} must lie in (0, 1000]", n.name, c.service, c.rate_hz);
                }
            }
            if n.shared_memory {
                if n.vendor != Vendor::RmwFastrtps {
                    bail!("node {}: shared_memory is Fast DDS's transport (vendor rmw_fastrtps_cpp), not {:?}'s", n.name, n.vendor.as_str());
                }
                match shm_host {
                    Some(h) if h != n.host => bail!(
                        "node {}: shared_memory on hosts {h} and {}: the lab's hosts share one kernel's /dev/shm, and Fast DDS would pass samples between them through it (give it to the nodes of one host)",
                        n.name, n.host
                    ),
                    _ => shm_host = Some(&n.host),
                }
            }
        }
        self.check_containers()?;
        if self.nodes.is_empty() {
            bail!("nodes: the scenario has no workload (no nodes, no generate)");
        }
        // every relay input is subscribed
        for n in &mut self.nodes {
            for r in n.relay.clone() {
                if !n.subscribe.iter().any(|s| s.topic == r.input) {
                    n.subscribe.push(Subscribe { topic: r.input.clone(), type_name: None, reliability: None, history_depth: None });
                }
            }
        }
        // one type, size and reliability per topic
        let mut by_topic: BTreeMap<String, (String, TopicFlow)> = BTreeMap::new();
        for n in &self.nodes {
            for f in n.publish.iter().chain(n.relay.iter().map(|r| &r.output)) {
                if let Some((other, g)) = by_topic.get(&f.topic) {
                    if g.type_name != f.type_name || g.sample_bytes != f.sample_bytes || g.reliability != f.reliability {
                        bail!(
                            "topic {}: nodes {other} and {} publish it with different type, size or reliability",
                            f.topic,
                            n.name
                        );
                    }
                } else {
                    by_topic.insert(f.topic.clone(), (n.name.clone(), f.clone()));
                }
            }
        }
        let resolved: Vec<(usize, usize, Subscribe)> = self
            .nodes
            .iter()
            .enumerate()
            .flat_map(|(i, n)| n.subscribe.iter().enumerate().map(move |(j, s)| (i, j, s.clone())))
            .collect();
        for (i, j, s) in resolved {
            let node = self.nodes[i].name.clone();
            let Some((_, w)) = by_topic.get(&s.topic) else {
                bail!("node {node}: topic {} has no publisher in the scenario", s.topic);
            };
            if let Some(t) = &s.type_name {
                if t != &w.type_name {
                    bail!("node {node}: subscribes to {} as {t} but it is published as {}", s.topic, w.type_name);
                }
            }
            if s.reliability == Some(Reliability::Reliable) && w.reliability == Reliability::BestEffort {
                bail!("node {node}: a reliable reader of {} cannot match its best-effort writers", s.topic);
            }
            let sub = &mut self.nodes[i].subscribe[j];
            sub.type_name = Some(w.type_name.clone());
            sub.reliability = Some(s.reliability.unwrap_or(w.reliability));
            sub.history_depth = Some(s.history_depth.unwrap_or(w.history_depth));
        }
        self.check_domains()?;
        self.check_zenoh()?;
        // relay rates: at most the rate of their input (relays of relays resolve in order)
        let nominal = self.nominal_rates()?;
        for n in &self.nodes {
            for r in &n.relay {
                let input = nominal.get(&r.input).copied().unwrap_or(0.0);
                if r.output.rate_hz > input * (1.0 + 1e-9) {
                    bail!(
                        "node {}: relay {} -> {} at {} Hz exceeds its input rate {} Hz",
                        n.name,
                        r.input,
                        r.output.topic,
                        r.output.rate_hz,
                        input
                    );
                }
            }
        }
        Ok(self)
    }

    /// The DDS domain of a node's participant.
    pub fn node_domain(&self, n: &Node) -> u32 {
        n.domain.unwrap_or(self.dds.domain_id)
    }

    /// Each topic lives in one domain (the lab keys topics by name): its writers'
    /// domain; every reader of it (subscriber or relay input) must be in that domain.
    pub fn topic_domains(&self) -> Result<BTreeMap<String, u32>> {
        let mut out: BTreeMap<String, u32> = BTreeMap::new();
        for n in &self.nodes {
            let nd = self.node_domain(n);
            let flows = n.publish.iter().map(|p| (&p.topic, nd)).chain(n.relay.iter().map(|r| (&r.output.topic, r.output_domain.unwrap_or(nd))));
            for (topic, d) in flows {
                if let Some(old) = out.insert(topic.clone(), d) {
                    if old != d {
                        bail!("topic {topic} is published in domains {old} and {d}: a lab topic lives in one domain (name them apart)");
                    }
                }
            }
        }
        Ok(out)
    }

    fn check_domains(&self) -> Result<()> {
        let domains = self.topic_domains()?;
        for n in &self.nodes {
            let nd = self.node_domain(n);
            let inputs = n.subscribe.iter().map(|s| &s.topic).chain(n.relay.iter().map(|r| &r.input));
            for t in inputs {
                if let Some(d) = domains.get(t).filter(|d| **d != nd) {
                    bail!("node {} (domain {nd}) reads {t}, which is published in domain {d}: readers must be in the writers' domain", n.name);
                }
            }
            if n.vendor == Vendor::Fastdds && n.relay.iter().any(|r| r.output_domain.is_some_and(|d| d != nd)) {
                bail!("node {}: a relay output in another domain (a bridge) needs vendor cyclone", n.name);
            }
        }
        Ok(())
    }

    /// Whether any node runs on Zenoh (the run then starts a Zenoh router).
    pub fn has_zenoh(&self) -> bool {
        self.nodes.iter().any(|n| n.vendor.is_zenoh())
    }

    /// Nodes on the real rmw_zenoh_cpp: the router is rmw_zenoh's own (rmw_zenohd).
    pub fn has_rmw_zenoh(&self) -> bool {
        self.nodes.iter().any(|n| n.vendor == Vendor::RmwZenoh)
    }

    /// Nodes that are real ROS 2 (rclcpp on an rmw).
    pub fn has_ros2(&self) -> bool {
        self.nodes.iter().any(|n| n.vendor.is_ros2())
    }

    /// The Zenoh router runs in the switch namespace (which the lab then creates even for two hosts).
    pub fn zenoh_router_on_switch(&self) -> bool {
        self.has_zenoh() && self.zenoh.router == "switch"
    }

    /// The capture points on the Zenoh router's links (`zenoh.capture_router`, with the router on
    /// the switch and captures on): per host, its index and the point's name, `router-HOST`.
    pub fn zenoh_router_captures(&self) -> Vec<(usize, String)> {
        if !(self.capture.enabled && self.zenoh_router_on_switch() && self.zenoh.capture_router) {
            return vec![];
        }
        self.hosts.iter().enumerate().map(|(i, h)| (i, format!("router-{}", h.name))).collect()
    }

    /// What Zenoh nodes cannot do is refused, naming the field: ros2_tracing in Humble's layout (the
    /// Zenoh node emits rmw_zenoh_cpp's tracepoints, Jazzy's layout); topics shared between Zenoh and
    /// DDS nodes (no bridge is emulated).
    /// PCP topics are refused for every non-Cyclone node by the eBPF checks.
    fn check_zenoh(&self) -> Result<()> {
        if self.zenoh.router != "switch" && self.host_index(&self.zenoh.router).is_none() {
            bail!("zenoh.router {:?}: neither \"switch\" nor a host of the scenario", self.zenoh.router);
        }
        if self.zenoh.port == 0 {
            bail!("zenoh.port: 0 is not a port");
        }
        for (_, name) in self.zenoh_router_captures() {
            if self.host_index(&name).is_some() {
                bail!("host {name}: the name of the capture point on the Zenoh router's link to a host (rename the host or set zenoh.capture_router = false)");
            }
        }
        let tagged: BTreeSet<&str> = self
            .nodes
            .iter()
            .flat_map(|n| n.publish.iter().chain(n.relay.iter().map(|r| &r.output)))
            .filter(|f| f.pcp.is_some())
            .map(|f| f.topic.as_str())
            .collect();
        let mut family: BTreeMap<&str, (&str, Vendor)> = BTreeMap::new();
        for n in &self.nodes {
            let t = self.tracing_of(n);
            // rmw_zenoh_cpp records ros2_tracing's Jazzy layout (rmw_publish with the source timestamp it puts
            // in the attachment); the lab does not reproduce rmw_zenoh on Humble
            if n.vendor == Vendor::Zenoh && t == Tracing::Humble {
                bail!(
                    "node {}: tracing humble: the Zenoh node emits rmw_zenoh_cpp's tracepoints in Jazzy's layout only (set nodes[].tracing, the scenario's tracing or --tracing to jazzy or off for it)",
                    n.name
                );
            }
            if n.vendor.is_ros2() && t == Tracing::Humble {
                bail!(
                    "node {} ({}): tracing humble: a real ROS 2 node runs the Jazzy stack the lab builds, whose ros2_tracing records Jazzy's layout (set tracing to jazzy or off for it)",
                    n.name,
                    n.vendor.as_str()
                );
            }
            let topics = n
                .publish
                .iter()
                .map(|f| f.topic.as_str())
                .chain(n.relay.iter().flat_map(|r| [r.input.as_str(), r.output.topic.as_str()]))
                .chain(n.subscribe.iter().map(|s| s.topic.as_str()));
            let zenoh = n.vendor.is_zenoh();
            for t in topics {
                if zenoh && tagged.contains(t) {
                    bail!(
                        "node {} (zenoh): topic {t} has a pcp, which the lab applies through Cyclone DDS network partitions; Zenoh nodes cannot carry it (remove pcp or use vendor cyclone)",
                        n.name
                    );
                }
                match family.get(t) {
                    Some((other, v)) if v.family() != n.vendor.family() => bail!(
                        "topic {t}: node {} ({}) and node {other} ({}) cannot talk: DDS, Zenoh 1.x and the real rmw_zenoh_cpp (Zenoh 0x08) nodes share no topic (no bridge is emulated; set their vendor alike)",
                        n.name,
                        n.vendor.as_str(),
                        v.as_str()
                    ),
                    Some(_) => {}
                    None => {
                        family.insert(t, (n.name.as_str(), n.vendor));
                    }
                }
            }
        }
        Ok(())
    }

    /// Nominal publication rate of every topic: the sum over its writers.
    pub fn nominal_rates(&self) -> Result<BTreeMap<String, f64>> {
        let mut rates: BTreeMap<String, f64> = BTreeMap::new();
        for n in &self.nodes {
            for p in &n.publish {
                *rates.entry(p.topic.clone()).or_default() += p.rate_hz;
            }
        }
        // relays: their configured output rate (checked against the input by resolve)
        for n in &self.nodes {
            for r in &n.relay {
                *rates.entry(r.output.topic.clone()).or_default() += r.output.rate_hz;
            }
        }
        Ok(rates)
    }

    /// Readers (subscriptions) and writers (publications and relay outputs)
    /// per topic, in one pass: checks and node arguments look counts up here
    /// instead of scanning every node per endpoint (1 000 nodes once took 10 s).
    pub fn topic_counts(&self) -> TopicCounts {
        let mut c = TopicCounts::default();
        for n in &self.nodes {
            for s in &n.subscribe {
                *c.readers.entry(s.topic.clone()).or_default() += 1;
            }
            for t in n.publish.iter().map(|p| &p.topic).chain(n.relay.iter().map(|r| &r.output.topic)) {
                *c.writers.entry(t.clone()).or_default() += 1;
            }
        }
        c
    }

    /// Every writer of the resolved scenario, with how many readers match it.
    pub fn writers(&self) -> Vec<Writer> {
        let counts = self.topic_counts();
        let readers_of = |topic: &str| counts.readers_of(topic);
        let mut out = Vec::new();
        for n in &self.nodes {
            for p in &n.publish {
                out.push(Writer {
                    node: n.name.clone(),
                    host: n.host.clone(),
                    vendor: n.vendor,
                    flow: p.clone(),
                    input: None,
                    readers: readers_of(&p.topic),
                });
            }
            for r in &n.relay {
                out.push(Writer {
                    node: n.name.clone(),
                    host: n.host.clone(),
                    vendor: n.vendor,
                    flow: r.output.clone(),
                    input: Some(r.input.clone()),
                    readers: readers_of(&r.output.topic),
                });
            }
        }
        out
    }

    /// Every reader of the resolved scenario, with how many writers match it.
    pub fn readers(&self) -> Vec<Reader> {
        let counts = self.topic_counts();
        let mut out = Vec::new();
        for n in &self.nodes {
            for s in &n.subscribe {
                out.push(Reader {
                    node: n.name.clone(),
                    host: n.host.clone(),
                    topic: s.topic.clone(),
                    type_name: s.type_name.clone().unwrap_or_default(),
                    reliability: s.reliability.unwrap_or_default(),
                    history_depth: s.history_depth.unwrap_or(10),
                    writers: counts.writers_of(&s.topic),
                })
            }
        }
        out
    }

    /// The ros2_tracing layout `node` emits (its own setting, else the scenario's).
    pub fn tracing_of(&self, node: &Node) -> Tracing {
        node.tracing.unwrap_or(self.tracing)
    }

    /// The containers (composable nodes in one process), each with its members in scenario order.
    pub fn containers(&self) -> BTreeMap<&str, Vec<&Node>> {
        let mut out: BTreeMap<&str, Vec<&Node>> = BTreeMap::new();
        for n in &self.nodes {
            if let Some(c) = &n.container {
                out.entry(c.as_str()).or_default().push(n);
            }
        }
        out
    }

    /// A container's members share what one process has once: host, rmw, domain, executor,
    /// CPUs, realtime priority, transports and tracing. Its name names its log.
    fn check_containers(&self) -> Result<()> {
        for (c, members) in self.containers() {
            if c.is_empty() || c.len() > 64 || !c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-') {
                bail!("container {c:?}: a container name is 1 to 64 letters, digits, '_' or '-' (it names logs/<container>.log)");
            }
            if let Some(n) = self.nodes.iter().find(|n| n.name == c) {
                bail!("container {c:?}: node {} has that name too (both would write logs/{c}.log)", n.name);
            }
            let first = members[0];
            for n in &members[1..] {
                let differs = if n.host != first.host {
                    Some(("host", first.host.clone(), n.host.clone()))
                } else if n.vendor != first.vendor {
                    Some(("rmw", first.vendor.as_str().to_string(), n.vendor.as_str().to_string()))
                } else if n.domain.unwrap_or(self.dds.domain_id) != first.domain.unwrap_or(self.dds.domain_id) {
                    Some(("domain", first.domain.unwrap_or(self.dds.domain_id).to_string(), n.domain.unwrap_or(self.dds.domain_id).to_string()))
                } else if n.executor.unwrap_or(Executor::Single) != first.executor.unwrap_or(Executor::Single) {
                    Some(("executor", format!("{:?}", first.executor.unwrap_or(Executor::Single)), format!("{:?}", n.executor.unwrap_or(Executor::Single))))
                } else if n.cpus != first.cpus {
                    Some(("cpus", format!("{:?}", first.cpus), format!("{:?}", n.cpus)))
                } else if n.realtime != first.realtime {
                    Some(("realtime", format!("{:?}", first.realtime), format!("{:?}", n.realtime)))
                } else if n.shared_memory != first.shared_memory {
                    Some(("shared_memory", first.shared_memory.to_string(), n.shared_memory.to_string()))
                } else if self.tracing_of(n) != self.tracing_of(first) {
                    Some(("tracing", self.tracing_of(first).as_str().to_string(), self.tracing_of(n).as_str().to_string()))
                } else {
                    None
                };
                if let Some((what, a, b)) = differs {
                    bail!("container {c}: nodes {} and {} differ in {what} ({a} and {b}); the nodes of one process share it", first.name, n.name);
                }
            }
        }
        Ok(())
    }

    /// Hosts with at least one traced node, with the layouts their nodes emit.
    pub fn traced_hosts(&self) -> BTreeMap<String, BTreeSet<Tracing>> {
        let mut out: BTreeMap<String, BTreeSet<Tracing>> = BTreeMap::new();
        for n in &self.nodes {
            let t = self.tracing_of(n);
            if !t.is_off() {
                out.entry(n.host.clone()).or_default().insert(t);
            }
        }
        out
    }

    pub fn host_index(&self, host: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == host)
    }

    pub fn to_toml(&self) -> Result<String> {
        Ok(toml::to_string_pretty(self)?)
    }
}

/// Scenario checks of the eBPF options (part of [`Scenario::check`]).
fn check_ebpf_options(sc: &Scenario) -> Result<()> {
    if let Some(v) = sc.network.vlan_id {
        if !(1..=4094).contains(&v) {
            bail!("network.vlan_id {v}: must lie between 1 and 4094");
        }
    }
    if let Some(l) = &sc.network.loss {
        l.check()?;
        for h in &l.hosts {
            if sc.host_index(h).is_none() {
                bail!("network.loss.hosts: {h:?} is not in hosts");
            }
        }
    }
    // Tagging follows the Cyclone DDS network partitions: every endpoint of a tagged topic must be Cyclone.
    let tagged: Vec<&str> = sc
        .nodes
        .iter()
        .flat_map(|n| n.publish.iter().chain(n.relay.iter().map(|r| &r.output)))
        .filter(|f| f.pcp.is_some())
        .map(|f| f.topic.as_str())
        .collect();
    for n in &sc.nodes {
        if n.vendor == Vendor::Cyclone {
            continue;
        }
        let uses = n
            .publish
            .iter()
            .map(|f| f.topic.as_str())
            .chain(n.relay.iter().flat_map(|r| [r.input.as_str(), r.output.topic.as_str()]))
            .chain(n.subscribe.iter().map(|s| s.topic.as_str()))
            .find(|t| tagged.contains(t));
        if let Some(t) = uses {
            bail!("node {} ({}): topic {t} has a pcp, which the lab applies through Cyclone DDS network partitions; use vendor cyclone for its endpoints", n.name, n.vendor.as_str());
        }
    }
    Ok(())
}

fn check_flow(f: &TopicFlow) -> Result<()> {
    if !valid_topic(&f.topic) {
        bail!("topic {:?}: not a ROS 2 topic name (absolute, letters, digits, '_' and '/')", f.topic);
    }
    if !(f.rate_hz.is_finite() && f.rate_hz > 0.0 && f.rate_hz <= 100_000.0) {
        bail!("{}: rate_hz {} must lie between 0 and 100 kHz", f.topic, f.rate_hz);
    }
    // 0: a DATA with an empty serialized payload (no encapsulation header either)
    if (f.sample_bytes.0 != 0 && f.sample_bytes.0 < 8) || f.sample_bytes.0 > 256 * 1024 * 1024 {
        bail!("{}: sample_bytes {} must be 0 (an empty payload) or lie between 8 and 256 MiB", f.topic, f.sample_bytes);
    }
    if f.history_depth == 0 || f.history_depth > 100_000 {
        bail!("{}: history_depth {} must lie between 1 and 100000", f.topic, f.history_depth);
    }
    if f.dds_fragment_bytes.is_some() {
        bail!("{}: dds_fragment_bytes is not supported by the lab yet (Cyclone DDS sets it per process)", f.topic);
    }
    if let Some(p) = f.pcp {
        if p > 7 {
            bail!("{}: pcp {p} must lie between 0 and 7", f.topic);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIMPLE: &str = r#"
name = "t"
duration = "2s"
[network]
rate = "1G"
[[hosts]]
name = "pc1"
[[hosts]]
name = "pc2"
[[nodes]]
name = "sensor_1"
host = "pc1"
[[nodes.publish]]
topic = "/raw_image"
type_name = "sensor_msgs/msg/Image"
sample_bytes = 2764852
rate_hz = 10
[[nodes]]
name = "filter"
host = "pc1"
[[nodes.relay]]
input = "/raw_image"
topic = "/image"
type_name = "sensor_msgs/msg/Image"
sample_bytes = 2764852
rate_hz = 10
[[nodes]]
name = "msg_driven"
host = "pc2"
[[nodes.subscribe]]
topic = "/image"
[[interference]]
from = "pc1"
to = "pc2"
load = "40%"
"#;

    /// A scenario of `n` nodes: node i publishes /t{i} and subscribes to /t{i-1} and /t0.
    fn many_nodes(n: usize) -> String {
        let mut s = String::from("name = \"many\"\nduration = \"2s\"\n[[hosts]]\nname = \"pc1\"\n[[hosts]]\nname = \"pc2\"\n");
        for i in 0..n {
            s += &format!("[[nodes]]\nname = \"n{i}\"\nhost = \"pc{}\"\n[[nodes.publish]]\ntopic = \"/t{i}\"\ntype_name = \"std_msgs/msg/String\"\nsample_bytes = 64\nrate_hz = 10\n", 1 + i % 2);
            let subs: Vec<usize> = if i == 0 { vec![] } else if i == 1 { vec![0] } else { vec![i - 1, 0] };
            for t in subs {
                s += &format!("[[nodes.subscribe]]\ntopic = \"/t{t}\"\n");
            }
        }
        s
    }

    /// Node count and link rate are bounded with errors naming them; the
    /// per-topic counts are linear and agree with a scan of every node (oracle).
    #[test]
    fn node_count_and_link_rate_are_bounded_and_counts_are_linear() {
        let e = parse(&many_nodes(MAX_NODES + 1)).unwrap_err().to_string();
        assert!(e.contains("nodes: 257 nodes") && e.contains("at most 256"), "{e}");
        let e = parse(&SIMPLE.replace("rate = \"1G\"", "rate = \"1000000000000000000bit\"")).unwrap_err().to_string();
        assert!(e.contains("network.rate") && e.contains("400 Gbit/s"), "{e}");
        let started = std::time::Instant::now();
        let sc = parse(&many_nodes(MAX_NODES)).unwrap().resolve(None, &[]).unwrap();
        let (w, r) = (sc.writers(), sc.readers());
        let facts = crate::workload::ScenarioFacts::of(&sc).unwrap();
        for n in &sc.nodes {
            crate::workload::node_args_with(&facts, &sc, n, Path::new("/dev/null"), "check", None).unwrap();
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
        for x in &w {
            let scan: usize = sc.nodes.iter().map(|n| n.subscribe.iter().filter(|s| s.topic == x.flow.topic).count()).sum();
            assert_eq!(x.readers, scan, "{}", x.flow.topic);
        }
        for x in &r {
            assert_eq!(x.writers, w.iter().filter(|y| y.flow.topic == x.topic).count(), "{}", x.topic);
        }
        assert_eq!(w.iter().find(|x| x.flow.topic == "/t0").unwrap().readers, MAX_NODES - 1);
    }

    /// Real ROS 2 options on a node that is not real ROS 2, and Fast DDS's shared memory on two
    /// of the lab's hosts (one kernel's /dev/shm), are refused with the node named.
    #[test]
    fn real_ros2_options_are_refused_where_they_would_be_ignored() {
        let with = |extra: &str, vendor: &str| {
            let sc = SIMPLE.replace("name = \"msg_driven\"\nhost = \"pc2\"", &format!("name = \"msg_driven\"\nhost = \"pc2\"\n{extra}"));
            let sc = sc.replace("name = \"filter\"\nhost = \"pc1\"", "name = \"filter\"\nhost = \"pc1\"\nshared_memory = true");
            parse(&format!("middleware = \"{vendor}\"\n{sc}")).and_then(|s| s.resolve(None, &[])).map(|_| ()).map_err(|e| e.to_string())
        };
        assert!(with("", "rmw_fastrtps_cpp").is_ok(), "{:?}", with("", "rmw_fastrtps_cpp"));
        let e = with("shared_memory = true", "rmw_fastrtps_cpp").unwrap_err();
        assert!(e.contains("node msg_driven") && e.contains("hosts pc1 and pc2"), "{e}");
        let e = with("", "rmw_cyclonedds_cpp").unwrap_err();
        assert!(e.contains("node filter: shared_memory is Fast DDS's"), "{e}");
        let e = with("", "cyclone").unwrap_err();
        assert!(e.contains("node filter: executor, intra_process, shared_memory, timers, call and container are options of real ROS 2 nodes"), "{e}");
        let timers = |vendor: &str| {
            let sc = SIMPLE.replace("name = \"filter\"\nhost = \"pc1\"", "name = \"filter\"\nhost = \"pc1\"\ntimers = true");
            parse(&format!("middleware = \"{vendor}\"\n{sc}")).and_then(|s| s.resolve(None, &[])).map(|_| ()).map_err(|e| e.to_string())
        };
        assert!(timers("rmw_cyclonedds_cpp").is_ok(), "{:?}", timers("rmw_cyclonedds_cpp"));
        let call = |extra: &str| {
            let sc = SIMPLE.replace("name = \"msg_driven\"\nhost = \"pc2\"", &format!("name = \"msg_driven\"\nhost = \"pc2\"\n{extra}"));
            parse(&format!("middleware = \"rmw_cyclonedds_cpp\"\n{sc}")).and_then(|s| s.resolve(None, &[])).map(|_| ()).map_err(|e| e.to_string())
        };
        let ok = call("call = [{ service = \"/sensor_1/get_parameters\", rate_hz = 5 }]");
        assert!(ok.is_ok(), "{ok:?}");
        for (bad, why) in [
            ("call = [{ service = \"/nobody/get_parameters\", rate_hz = 5 }]", "the lab calls `/<node>/get_parameters` of a node of the scenario"),
            ("call = [{ service = \"/sensor/set_parameters\", rate_hz = 5 }]", "the lab calls `/<node>/get_parameters`"),
            ("call = [{ service = \"/msg_driven/get_parameters\", rate_hz = 5 }]", "a node calling its own service"),
            ("call = [{ service = \"/sensor_1/get_parameters\", rate_hz = 0 }]", "rate_hz 0 must lie in (0, 1000]"),
        ] {
            let e = call(bad).unwrap_err();
            assert!(e.contains("node msg_driven: call") && e.contains(why), "{bad}: {e}");
        }
        let e = timers("fastdds").unwrap_err();
        assert!(e.contains("node filter: executor, intra_process, shared_memory, timers, call and container are options of real ROS 2 nodes"), "{e}");
    }

    /// Composable nodes: the nodes of one container share what one process has once; the
    /// container's name names its log. Anything else is refused, naming the container and nodes.
    #[test]
    fn a_container_holds_nodes_that_can_share_one_process() {
        let with = |sensor_1: &str, filter: &str, vendor: &str| {
            let sc = SIMPLE
                .replace("name = \"sensor_1\"\nhost = \"pc1\"", &format!("name = \"sensor_1\"\nhost = \"pc1\"\n{sensor_1}"))
                .replace("name = \"filter\"\nhost = \"pc1\"", &format!("name = \"filter\"\nhost = \"pc1\"\n{filter}"));
            let head = if vendor.is_empty() { String::new() } else { format!("middleware = \"{vendor}\"\n") };
            parse(&format!("{head}{sc}")).and_then(|s| s.resolve(None, &[])).map_err(|e| e.to_string())
        };
        let sc = with("container = \"camera\"\nintra_process = true", "container = \"camera\"\nintra_process = true", "rmw_cyclonedds_cpp").unwrap();
        let c = sc.containers();
        assert_eq!(c.len(), 1);
        assert_eq!(c["camera"].iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["sensor_1", "filter"]);
        // one member is a container too, and intra_process may differ (rclcpp's per node option)
        assert!(with("container = \"camera\"", "", "rmw_fastrtps_cpp").is_ok());
        for (a, b, vendor, why) in [
            ("container = \"camera\"", "container = \"camera\"\nexecutor = \"multi\"", "rmw_cyclonedds_cpp", "container camera: nodes sensor_1 and filter differ in executor"),
            ("container = \"camera\"", "container = \"camera\"\ncpus = [1]", "rmw_cyclonedds_cpp", "differ in cpus"),
            ("container = \"camera\"", "container = \"camera\"\ndomain = 3", "rmw_cyclonedds_cpp", "differ in domain (0 and 3)"),
            ("container = \"camera\"", "container = \"camera\"\ntracing = \"jazzy\"", "rmw_cyclonedds_cpp", "differ in tracing"),
            ("container = \"camera\"\nvendor = \"rmw_cyclonedds_cpp\"", "container = \"camera\"\nvendor = \"rmw_fastrtps_cpp\"", "", "differ in rmw"),
            ("container = \"filter\"", "", "rmw_cyclonedds_cpp", "node filter has that name too"),
            ("container = \"../x\"", "", "rmw_cyclonedds_cpp", "a container name is 1 to 64 letters"),
            ("container = \"camera\"", "", "cyclone", "call and container are options of real ROS 2 nodes"),
        ] {
            let e = with(a, b, vendor).map(|_| ()).unwrap_err();
            assert!(e.contains(why), "{a} / {b}: {e}");
        }
    }

    #[test]
    fn parses_and_resolves() {
        let sc = parse(SIMPLE).unwrap().resolve(None, &[]).unwrap();
        assert_eq!(sc.duration, Nanos(2_000_000_000));
        assert_eq!(sc.interference[0].flow.rate, Rate(400_000_000));
        let w = sc.writers();
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].readers, 1); // filter's implicit subscription
        assert_eq!(w[1].readers, 1);
        let r = sc.readers();
        assert_eq!(r.iter().find(|r| r.node == "filter").unwrap().type_name, "sensor_msgs/msg/Image");
        assert_eq!(r.iter().find(|r| r.node == "msg_driven").unwrap().writers, 1);
        // the resolved scenario reads back
        let again = parse(&sc.to_toml().unwrap()).unwrap().resolve(None, &[]).unwrap();
        assert_eq!(again.writers().len(), 2);
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse(&SIMPLE.replace("rate_hz = 10\n[[nodes]]\nname = \"filter\"", "rate_hz = 10\nbogus = 1\n[[nodes]]\nname = \"filter\""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("bogus"), "{e}");
        let e = parse(&SIMPLE.replace("host = \"pc2\"", "host = \"pc9\"")).unwrap_err().to_string();
        assert!(e.contains("pc9") && e.contains("msg_driven"), "{e}");
        let e = parse(&SIMPLE.replace("rate = \"1G\"", "")).unwrap_err().to_string();
        assert!(e.contains("interference[0].load"), "{e}");
        let e = parse("name = \"x\"\nhosts = 3").unwrap_err().to_string();
        assert!(e.contains("hosts"), "{e}");
        let e = parse(&SIMPLE.replace("input = \"/raw_image\"", "input = \"/nothing\"")).unwrap().resolve(None, &[]).unwrap_err().to_string();
        assert!(e.contains("/nothing") && e.contains("no publisher"), "{e}");
        let e = parse(&SIMPLE.replacen("rate_hz = 10\n[[nodes]]\nname = \"msg_driven\"", "rate_hz = 20\n[[nodes]]\nname = \"msg_driven\"", 1))
            .unwrap()
            .resolve(None, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("exceeds its input rate"), "{e}");
        // Host names that read as options never reach `hostname` or `--name`.
        for bad in ["-h", "-F", "--all", "pc-", "_x"] {
            let e = parse(&SIMPLE.replace("name = \"pc1\"", &format!("name = \"{bad}\"")).replace("host = \"pc1\"", &format!("host = \"{bad}\""))).unwrap_err().to_string();
            assert!(e.contains("hosts[0].name"), "{bad}: {e}");
        }
        let e = parse(&SIMPLE.replace("rate = \"1G\"\n", "rate = \"1G\"\nsubnet = \"127.0.0.0/24\"\n")).unwrap_err().to_string();
        assert!(e.contains("network.subnet") && e.contains("loopback"), "{e}");
    }

    #[test]
    fn tracing_defaults_overrides_and_reads_back() {
        let sc = parse(&SIMPLE.replace("duration = \"2s\"", "duration = \"2s\"\ntracing = \"jazzy\"").replace(
            "name = \"msg_driven\"\nhost = \"pc2\"",
            "name = \"msg_driven\"\nhost = \"pc2\"\ntracing = \"off\"",
        ))
        .unwrap()
        .resolve(None, &[])
        .unwrap();
        assert_eq!(sc.tracing, Tracing::Jazzy);
        let node = |n: &str| sc.nodes.iter().find(|x| x.name == n).unwrap();
        assert_eq!(sc.tracing_of(node("filter")), Tracing::Jazzy);
        assert_eq!(sc.tracing_of(node("msg_driven")), Tracing::Off);
        assert_eq!(sc.traced_hosts().into_iter().collect::<Vec<_>>(), vec![("pc1".to_string(), [Tracing::Jazzy].into())]);
        let again = parse(&sc.to_toml().unwrap()).unwrap().resolve(None, &[]).unwrap();
        assert_eq!(again.tracing_of(again.nodes.iter().find(|x| x.name == "msg_driven").unwrap()), Tracing::Off);
        // the command line sets every node
        let o = Overrides { tracing: Some(Tracing::Humble), ..Overrides::default() };
        let all = parse(&sc.to_toml().unwrap()).unwrap().resolve_with(&o).unwrap();
        assert!(all.nodes.iter().all(|n| all.tracing_of(n) == Tracing::Humble));
        assert_eq!(all.traced_hosts().len(), 2);
        // off by default, and not written out
        let plain = parse(SIMPLE).unwrap().resolve(None, &[]).unwrap();
        assert!(plain.traced_hosts().is_empty() && !plain.to_toml().unwrap().contains("tracing"));
        let e = parse(&SIMPLE.replace("duration = \"2s\"", "duration = \"2s\"\ntracing = \"rolling\"")).unwrap_err().to_string();
        assert!(e.contains("tracing") || e.contains("rolling"), "{e}");
    }

    #[test]
    fn seed_003_topologies() {
        let base = |topo: &str, p: u32, s: u32| {
            format!(
                "name = \"g\"\n[[hosts]]\nname = \"a\"\n[[hosts]]\nname = \"b\"\n[[generate]]\nsizes = [0, 64]\nrates_hz = [10]\n\
                 topology = \"{topo}\"\npublishers = {p}\nsubscribers = {s}\npublisher_hosts = [\"a\"]\nsubscriber_hosts = [\"b\"]\n"
            )
        };
        // N-1 with 64 publishers of 2 topics each: 128 subscriptions in one node, more than a node holds
        let e = parse(&base("n-1", 64, 1)).unwrap_err().to_string();
        assert!(e.contains("128 topics in one node"), "{e}");
        let sc = parse(&base("n-1", 32, 1)).unwrap().resolve(None, &[]).unwrap();
        let subs: Vec<_> = sc.nodes.iter().filter(|n| !n.subscribe.is_empty()).collect();
        assert_eq!(subs.len(), 1);
        assert_eq!(subs[0].subscribe.len(), 64);
        let r = sc.readers();
        assert!(r.iter().all(|r| r.writers == 1), "every topic has one writer");
        assert!(sc.writers().iter().any(|w| w.flow.topic == "/bench/p31/s0B_10hz_reliable" && w.node == "gen0_pub31"));
        // N-N: reader i reads publisher i only
        let sc = parse(&base("n-n", 64, 64)).unwrap().resolve(None, &[]).unwrap();
        assert_eq!(sc.nodes.len(), 128);
        let sub7 = sc.nodes.iter().find(|n| n.name == "gen0_sub7").unwrap();
        assert!(sub7.subscribe.iter().all(|s| s.topic.starts_with("/bench/p7/")) && sub7.subscribe.len() == 2);
        assert!(sc.writers().iter().all(|w| w.readers == 1));
        // 1-N: 64 readers of one writer
        let sc = parse(&base("1-n", 1, 64)).unwrap().resolve(None, &[]).unwrap();
        assert!(sc.writers().iter().all(|w| w.readers == 64));
        // shapes that do not fit the topology, and the 64 cap
        for (t, p, s) in [("1-n", 2, 3), ("n-1", 2, 2), ("n-n", 2, 3), ("1-1", 1, 2)] {
            let e = parse(&base(t, p, s)).unwrap_err().to_string();
            assert!(e.contains("topology") && e.contains(t), "{e}");
        }
        let e = parse(&base("1-n", 1, 65)).unwrap_err().to_string();
        assert!(e.contains("between 1 and 64"), "{e}");
        // sizes 1..7 are refused; 0 is an empty payload
        let e = parse(&base("1-1", 1, 1).replace("[0, 64]", "[4]")).unwrap().resolve(None, &[]).unwrap_err().to_string();
        assert!(e.contains("must be 0"), "{e}");
        // reads back
        let sc = parse(&base("n-n", 3, 3)).unwrap().resolve(None, &[]).unwrap();
        let again = parse(&sc.to_toml().unwrap()).unwrap().resolve(None, &[]).unwrap();
        assert_eq!(again.readers().len(), sc.readers().len());
    }

    #[test]
    fn generate_expands_topologies() {
        let text = r#"
name = "g"
[[hosts]]
name = "a"
[[hosts]]
name = "b"
[[generate]]
sizes = [64, "4KiB"]
rates_hz = [10, 2.5]
reliability = ["reliable", "best_effort"]
publishers = 3
subscribers = 1
publisher_hosts = ["a"]
subscriber_hosts = ["b"]
"#;
        let sc = parse(text).unwrap().resolve(None, &[("gen0_pub1".into(), Vendor::Fastdds)]).unwrap();
        assert_eq!(sc.nodes.len(), 4);
        assert_eq!(sc.nodes[1].vendor, Vendor::Fastdds);
        let w = sc.writers();
        assert_eq!(w.len(), 3 * 8);
        assert!(w.iter().any(|w| w.flow.topic == "/bench/s4096B_2p5hz_best_effort"));
        let r = sc.readers();
        assert_eq!(r.len(), 8);
        assert!(r.iter().all(|r| r.writers == 3));
        let rates = sc.nominal_rates().unwrap();
        assert_eq!(rates["/bench/s64B_10hz_reliable"], 30.0);
    }
}
