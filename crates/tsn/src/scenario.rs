//! The TOML scenario format (documented in docs/tsn.md) and its translation
//! into a simulation.
//!
//! Traffic entries reuse the lab's descriptions: each `[[topic]]` table is a
//! [`ddscope_traffic::TopicFlow`] and each `[[burst]]` a
//! [`ddscope_traffic::BurstFlow`], plus simulator fields (`path`, `offset`,
//! …) that are split off before the shared type parses the rest, so a typo
//! in either part is reported with the field's name.

use crate::cbs::{self, CbsClassInput};
use crate::frame::{busy_bytes, Framing, MessageFrames, RtpsOptions};
use crate::gcl::{GateEntry, Gcl};
use crate::sim::{self, CbsConfig, PortSpec, SimInput, SourceSpec};
use crate::sr::{self, SrClass, SrVerdict};
use crate::stats::{self, JitterStats, LatencyStats};
use ddscope_traffic::{BurstFlow, Bytes, Nanos, Rate, TopicFlow};
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    description: Option<String>,
    #[serde(default = "default_duration")]
    duration: Nanos,
    drain: Option<Nanos>,
    seed: Option<u64>,
    mtu: Option<Bytes>,
    vlan: Option<bool>,
    #[serde(default)]
    port: Vec<RawPort>,
    #[serde(default)]
    topic: Vec<toml::Table>,
    #[serde(default)]
    burst: Vec<toml::Table>,
    #[serde(default)]
    pattern: Vec<toml::Table>,
    ptp: Option<PtpSpec>,
    dds: Option<DdsSpec>,
}

fn default_duration() -> Nanos {
    Nanos(10_000_000_000)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPort {
    name: String,
    interface: Option<String>,
    link_rate: Rate,
    propagation: Option<Nanos>,
    processing: Option<Nanos>,
    num_tc: Option<usize>,
    pcp_to_tc: Option<Vec<u8>>,
    queue_limit: Option<usize>,
    priority: Option<String>,
    max_frame_bytes: Option<Bytes>,
    gcl: Option<RawGcl>,
    #[serde(default)]
    cbs: Vec<RawCbs>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGcl {
    base_time: Option<u64>,
    entries: Vec<RawEntry>,
    mode: Option<String>,
    txtime_delay: Option<Nanos>,
    etf_delta: Option<Nanos>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    gates: Vec<usize>,
    duration: Nanos,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCbs {
    tc: usize,
    reserved: Option<Rate>,
    max_frame: Option<Bytes>,
    idleslope: Option<i64>,
    sendslope: Option<i64>,
    hicredit: Option<i64>,
    locredit: Option<i64>,
    offload: Option<bool>,
}

/// Simulator fields common to all traffic entries.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FlowExtra {
    path: Vec<String>,
    offset: Option<Nanos>,
    deadline: Option<Nanos>,
    sr_class: Option<String>,
    socket_buffer: Option<Bytes>,
    // DDS only
    max_message_bytes: Option<Bytes>,
    info_ts: Option<bool>,
    info_dst: Option<bool>,
    multicast: Option<String>,
    // UDP flows: destination port (classification in generated config)
    dst_port: Option<u16>,
}
const EXTRA_KEYS: &[&str] = &[
    "path",
    "offset",
    "deadline",
    "sr_class",
    "socket_buffer",
    "max_message_bytes",
    "info_ts",
    "info_dst",
    "multicast",
    "dst_port",
];

/// An IVN traffic pattern (Bosk et al. Table 3 / Table 7): `streams` periodic
/// single-frame UDP streams.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PatternFlow {
    pub name: Option<String>,
    /// Row of Bosk et al. Table 3 supplying defaults for the other fields.
    pub table3_row: Option<u8>,
    /// MAC frame size (destination address through FCS), as Table 3 counts.
    pub frame_bytes: Option<Bytes>,
    /// Frame size including preamble and IFG, as Table 7 and Eq. 7 count (MAC + 20).
    pub phy_frame_bytes: Option<Bytes>,
    pub period: Option<Nanos>,
    pub streams: Option<u32>,
    pub pcp: Option<u8>,
}

/// Bosk et al. Table 3: (name, streams, PCP (first listed), period us, frame bytes).
pub const TABLE3: [(&str, u32, u8, u64, u64); 16] = [
    ("C&C", 6, 3, 1000, 1024),
    ("C&C", 6, 3, 6000, 1024),
    ("Video ADAS", 2, 3, 600, 1500),
    ("Video ADAS", 6, 3, 400, 1500),
    ("Audio", 8, 5, 10000, 256),
    ("Lidar", 3, 3, 2500, 1500),
    ("Radar", 6, 3, 2500, 1250),
    ("Ultrasound", 3, 2, 20000, 512),
    ("GPS", 1, 0, 10000, 256),
    ("Audio SR C", 3, 5, 1451, 256),
    ("Audio SR D", 3, 5, 1333, 256),
    ("BE", 4, 0, 200, 64),
    ("File transfer", 5, 0, 200, 64),
    ("Diagnostics", 5, 0, 200, 64),
    ("BE/FT", 3, 0, 200, 512),
    ("BE/FT", 3, 0, 200, 1500),
];

#[derive(Debug, Clone, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PtpSpec {
    /// Port name (or interface) of the grandmaster's NIC, and of the follower's.
    pub grandmaster: Option<String>,
    pub follower: Option<String>,
    /// "L2" (gPTP, default) or "UDPv4".
    pub transport: Option<String>,
    /// log2 of the Sync interval in seconds (Bosk et al.: -3).
    pub log_sync_interval: Option<i32>,
}

#[derive(Debug, Clone, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct DdsSpec {
    /// How DDS traffic gets its PCP: "vlan" (egress-qos-map), "iptables", "nft" or "cgroup".
    pub priority_via: Option<String>,
    /// VLAN id per PCP-tagged interface (default 10 + PCP... see docs).
    pub vlan_id: Option<u16>,
    pub domain_id: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaprioMode {
    Software,
    TxtimeAssist,
    FullOffload,
}

#[derive(Debug, Clone)]
pub struct GclSpec {
    pub gcl: Gcl,
    pub base_time_ns: u64,
    pub mode: TaprioMode,
    pub txtime_delay_ns: u64,
    pub etf_delta_ns: u64,
}

#[derive(Debug, Clone)]
pub struct Port {
    pub name: String,
    pub interface: String,
    pub rate: Rate,
    pub propagation: Nanos,
    pub processing: Nanos,
    pub num_tc: usize,
    pub pcp_to_tc: [u8; 8],
    pub queue_limit: usize,
    pub priority_order: Vec<usize>,
    pub max_frame_bytes: u64,
    pub gcl: Option<GclSpec>,
    /// (tc, parameters, offload, reserved bit/s if given that way)
    pub cbs: Vec<(usize, CbsConfig, bool)>,
}

#[derive(Debug, Clone)]
pub enum FlowKind {
    Topic(TopicFlow),
    Burst(BurstFlow),
    Pattern(PatternFlow),
}

#[derive(Debug, Clone)]
pub struct Flow {
    pub name: String,
    pub kind: FlowKind,
    pub path: Vec<usize>,
    pub pcp: u8,
    pub offset: Option<Nanos>,
    pub period_ns: u64,
    pub deadline_ns: u64,
    pub sr_class: Option<SrClass>,
    pub socket_buffer: u64,
    pub msgs_per_release: u64,
    pub streams: u32,
    pub frames: MessageFrames,
    pub multicast: Option<String>,
    pub dst_port: Option<u16>,
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub file: String,
    pub name: String,
    pub description: String,
    pub duration: Nanos,
    pub drain: Nanos,
    pub seed: u64,
    pub framing: Framing,
    pub ports: Vec<Port>,
    pub flows: Vec<Flow>,
    pub ptp: PtpSpec,
    pub dds: DdsSpec,
}

/// Linux's default socket send buffer (net.core.wmem_default).
pub const DEFAULT_SOCKET_BUFFER: u64 = 212_992;

impl Scenario {
    pub fn load(path: &Path) -> anyhow::Result<Scenario> {
        let text = ddscope_traffic::fsio::read_bounded_text(path, ddscope_traffic::fsio::MAX_CONFIG_BYTES, "scenario file")?;
        Scenario::parse(&text, &path.display().to_string()).map_err(|e| anyhow::anyhow!("{e}"))
    }

    pub fn parse(text: &str, file: &str) -> Result<Scenario, String> {
        let raw: RawScenario = toml::from_str(text).map_err(|e| {
            // The message and the line are input: short and escaped (a 200 KB
            // line or raw control bytes are not echoed back).
            use ddscope_traffic::text::{excerpt, EXCERPT_CHARS};
            let msg = excerpt(e.message(), EXCERPT_CHARS);
            match e.span() {
                Some(r) => {
                    let start = r.start.min(text.len());
                    let line_no = text[..start].matches('\n').count() + 1;
                    let line = excerpt(text.lines().nth(line_no - 1).unwrap_or(""), 80);
                    format!("{file}: line {line_no} ({line}): {msg}")
                }
                None => format!("{file}: {msg}"),
            }
        })?;
        build(raw, file).map_err(|e| format!("{file}: {e}"))
    }

    pub fn port_index(&self, name: &str) -> Option<usize> {
        self.ports.iter().position(|p| p.name == name || p.interface == name)
    }

    /// What simulating this scenario costs: messages released, frame
    /// transmissions (frames × hops) and model frames held by the sources,
    /// over all flows; and the flow that releases the most messages.
    pub fn sim_cost(&self) -> SimCost {
        let mut c = SimCost::default();
        for f in &self.flows {
            let releases = (self.duration.0 as u128).div_ceil(f.period_ns.max(1) as u128);
            let messages = releases * f.msgs_per_release as u128 * f.streams as u128;
            let frames = f.frames.l2.len() as u128;
            c.messages += messages;
            c.frame_hops += messages * frames * f.path.len() as u128;
            c.model_frames += frames * f.streams as u128;
            if c.largest.as_ref().is_none_or(|(_, m)| messages > *m) {
                c.largest = Some((f.name.clone(), messages));
            }
        }
        c
    }

    /// Refuses a simulation that cannot be computed in bounded memory and
    /// time (see [`MAX_SIM_MESSAGES`], [`MAX_SIM_FRAME_HOPS`],
    /// [`MAX_SIM_MODEL_FRAMES`]), naming the limit, before anything is allocated.
    pub fn check_sim_budget(&self) -> Result<(), String> {
        let c = self.sim_cost();
        let (flow, most) = c.largest.clone().unwrap_or_default();
        let hint = format!("the busiest flow, {flow:?}, releases {most} messages in {}; shorten duration or lengthen its period/pacing", self.duration);
        if c.messages > MAX_SIM_MESSAGES {
            return Err(format!("simulation too large: {} messages over the limit of {MAX_SIM_MESSAGES} (each keeps its latency); {hint}", c.messages));
        }
        if c.frame_hops > MAX_SIM_FRAME_HOPS {
            return Err(format!("simulation too long: {} frame transmissions over the limit of {MAX_SIM_FRAME_HOPS} (about 40 s of simulation); {hint}", c.frame_hops));
        }
        if c.model_frames > MAX_SIM_MODEL_FRAMES {
            return Err(format!("simulation too large: its flows' messages are {} frames in all (streams × frames per message), over the limit of {MAX_SIM_MODEL_FRAMES}", c.model_frames));
        }
        Ok(())
    }

    /// The simulator input, with random phases drawn from `seed` for flows without `offset`.
    pub fn sim_input(&self, seed: u64) -> SimInput {
        let mut rng = SplitMix64(seed);
        let ports = self
            .ports
            .iter()
            .map(|p| PortSpec {
                name: p.name.clone(),
                rate_bps: p.rate.0,
                propagation_ps: p.propagation.0 * 1000,
                processing_ps: p.processing.0 * 1000,
                num_tc: p.num_tc,
                pcp_to_tc: p.pcp_to_tc,
                queue_limit: p.queue_limit,
                priority_order: p.priority_order.clone(),
                gcl: p.gcl.as_ref().map(|g| g.gcl.clone()),
                cbs: (0..p.num_tc).map(|tc| p.cbs.iter().find(|c| c.0 == tc).map(|c| c.1)).collect(),
                shaper_burst: None,
            })
            .collect();
        let mut sources = Vec::new();
        for (g, f) in self.flows.iter().enumerate() {
            for _ in 0..f.streams {
                let period_ps = f.period_ns * 1000;
                let offset_ps = match f.offset {
                    Some(o) => o.0 * 1000,
                    None => rng.below(period_ps.max(1)),
                };
                sources.push(SourceSpec {
                    group: g,
                    path: f.path.clone(),
                    pcp: f.pcp,
                    period_ps,
                    offset_ps,
                    msgs_per_release: f.msgs_per_release,
                    frames: f.frames.clone(),
                    socket_buffer: f.socket_buffer,
                    host: Default::default(),
                });
            }
        }
        SimInput {
            ports,
            sources,
            groups: self.flows.len(),
            duration_ps: self.duration.0 * 1000,
            drain_ps: self.drain.0 * 1000,
        }
    }
}

/// Deterministic PRNG (SplitMix64) for phases.
struct SplitMix64(u64);
impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

fn split(t: &toml::Table) -> (toml::Table, toml::Table) {
    let mut own = toml::Table::new();
    let mut rest = toml::Table::new();
    for (k, v) in t {
        if EXTRA_KEYS.contains(&k.as_str()) {
            own.insert(k.clone(), v.clone());
        } else {
            rest.insert(k.clone(), v.clone());
        }
    }
    (own, rest)
}

fn de<T: serde::de::DeserializeOwned>(t: toml::Table) -> Result<T, String> {
    toml::Value::Table(t).try_into::<T>().map_err(|e| ddscope_traffic::text::excerpt(&e.to_string(), ddscope_traffic::text::EXCERPT_CHARS))
}

fn build(raw: RawScenario, file: &str) -> Result<Scenario, String> {
    let framing = Framing { vlan: raw.vlan.unwrap_or(true), mtu: raw.mtu.map(|b| b.0).unwrap_or(1500) };
    framing.validate().map_err(|e| format!("mtu: {e}"))?;
    if raw.duration.0 == 0 {
        return Err("duration: must be positive".into());
    }
    // Times are picoseconds in 64 bits inside the simulator: keep far from their end.
    if raw.duration.0 > MAX_DURATION_NS {
        return Err(format!("duration {}: at most 24h", raw.duration));
    }
    if raw.drain.is_some_and(|d| d.0 > MAX_DURATION_NS) {
        return Err("drain: at most 24h".into());
    }
    if raw.port.is_empty() {
        return Err("no [[port]] defined".into());
    }
    let mut ports = Vec::new();
    for (i, p) in raw.port.into_iter().enumerate() {
        let ctx = format!("port[{i}] ({:?})", p.name);
        if ports.iter().any(|q: &Port| q.name == p.name) {
            return Err(format!("{ctx}: name: duplicate port name"));
        }
        ports.push(build_port(p, &framing).map_err(|e| format!("{ctx}: {e}"))?);
    }
    // Interface names go into the shell scripts `tsn config` writes: only real names.
    for (i, p) in ports.iter().enumerate() {
        crate::shell::check_ifname(&p.interface).map_err(|e| format!("port[{i}] ({:?}): interface: {e}", p.name))?;
    }
    if let Some(ptp) = &raw.ptp {
        if let Some(f) = &ptp.follower {
            crate::shell::check_ifname(f).map_err(|e| format!("ptp.follower: {e}"))?;
        }
        if let Some(g) = ptp.grandmaster.as_deref().filter(|g| !ports.iter().any(|p| p.name == *g || p.interface == *g)) {
            crate::shell::check_ifname(g).map_err(|e| format!("ptp.grandmaster: {e} (nor a port name)"))?;
        }
    }
    let mut flows = Vec::new();
    for (i, t) in raw.topic.iter().enumerate() {
        let (own, rest) = split(t);
        let name = t.get("topic").and_then(|v| v.as_str()).unwrap_or("?").to_string();
        let ctx = format!("topic[{i}] ({name:?})");
        let tf: TopicFlow = de(rest).map_err(|e| format!("{ctx}: {e}"))?;
        let ex: FlowExtra = de(own).map_err(|e| format!("{ctx}: {e}"))?;
        if !(tf.rate_hz > 0.0 && tf.rate_hz.is_finite()) {
            return Err(format!("{ctx}: rate_hz: must be positive"));
        }
        let rtps = RtpsOptions {
            fragment_bytes: tf.dds_fragment_bytes.map(|b| b.0),
            max_message_bytes: ex.max_message_bytes.map(|b| b.0),
            info_ts: ex.info_ts.unwrap_or(true),
            info_dst: ex.info_dst.unwrap_or(false),
        };
        let frames = MessageFrames::dds_sample(&framing, &rtps, tf.sample_bytes.0).map_err(|e| format!("{ctx}: {e}"))?;
        let period = tf.period().0;
        let pcp = tf.pcp.unwrap_or(0);
        flows.push(finish_flow(&ctx, tf.topic.clone(), FlowKind::Topic(tf), ex, pcp, period, 1, 1, frames, &ports)?);
    }
    for (i, t) in raw.burst.iter().enumerate() {
        let (own, rest) = split(t);
        let ctx = format!("burst[{i}] ({:?})", t.get("name").and_then(|v| v.as_str()).unwrap_or("iperf3"));
        let bf: BurstFlow = de(rest).map_err(|e| format!("{ctx}: {e}"))?;
        let ex: FlowExtra = de(own).map_err(|e| format!("{ctx}: {e}"))?;
        if bf.pacing.0 == 0 {
            return Err(format!("{ctx}: pacing: must be positive"));
        }
        let frames = MessageFrames::udp(&framing, bf.payload_bytes.0).map_err(|e| format!("{ctx}: payload_bytes: {e}"))?;
        let pcp = bf.pcp.unwrap_or(0);
        let n = bf.datagrams_per_burst();
        let period = bf.pacing.0;
        flows.push(finish_flow(&ctx, bf.name.clone(), FlowKind::Burst(bf), ex, pcp, period, n, 1, frames, &ports)?);
    }
    for (i, t) in raw.pattern.iter().enumerate() {
        let (own, rest) = split(t);
        let ctx = format!("pattern[{i}]");
        let pf: PatternFlow = de(rest).map_err(|e| format!("{ctx}: {e}"))?;
        let ex: FlowExtra = de(own).map_err(|e| format!("{ctx}: {e}"))?;
        let row = match pf.table3_row {
            Some(r) => Some(*TABLE3.get(r as usize).ok_or_else(|| format!("{ctx}: table3_row: {r} is not a row of Table 3 (0–15)"))?),
            None => None,
        };
        let name = pf.name.clone().or(row.map(|r| r.0.to_string())).unwrap_or_else(|| format!("pattern{i}"));
        let ctx = format!("pattern[{i}] ({name:?})");
        let mac = match (pf.frame_bytes, pf.phy_frame_bytes, row) {
            (Some(_), Some(_), _) => return Err(format!("{ctx}: give frame_bytes or phy_frame_bytes, not both")),
            (Some(b), None, _) => b.0,
            (None, Some(b), _) => b.0.saturating_sub(crate::frame::PREAMBLE_SFD + crate::frame::IFG),
            (None, None, Some(r)) => r.4,
            (None, None, None) => return Err(format!("{ctx}: frame_bytes: missing (or give table3_row)")),
        };
        let tag = if framing.vlan { crate::frame::VLAN_TAG } else { 0 };
        let hdr = crate::frame::MAC_HEADER + tag + crate::frame::FCS + crate::frame::IPV4_HEADER + crate::frame::UDP_HEADER;
        if mac < crate::frame::MIN_FRAME || mac > framing.mtu + crate::frame::MAC_HEADER + tag + crate::frame::FCS {
            return Err(format!("{ctx}: frame_bytes: a MAC frame of {mac} bytes is outside 64..={} for MTU {}", framing.mtu + 18 + tag, framing.mtu));
        }
        let payload = mac.saturating_sub(hdr);
        let frames = MessageFrames::udp(&framing, payload).map_err(|e| format!("{ctx}: {e}"))?;
        let period = pf.period.map(|p| p.0).or(row.map(|r| r.3 * 1000)).ok_or_else(|| format!("{ctx}: period: missing"))?;
        if period == 0 {
            return Err(format!("{ctx}: period: must be positive"));
        }
        let streams = pf.streams.or(row.map(|r| r.1)).unwrap_or(1);
        if streams == 0 {
            return Err(format!("{ctx}: streams: must be at least 1"));
        }
        let pcp = pf.pcp.or(row.map(|r| r.2)).unwrap_or(0);
        flows.push(finish_flow(&ctx, name, FlowKind::Pattern(pf), ex, pcp, period, 1, streams, frames, &ports)?);
    }
    if flows.is_empty() {
        return Err("no traffic: add [[topic]], [[burst]] or [[pattern]] entries".into());
    }
    // Gate feasibility: every frame of every flow must fit its class's longest window on every port.
    for f in &flows {
        let max_l2 = *f.frames.l2.iter().max().unwrap_or(&0) as u64;
        for &pi in &f.path {
            let p = &ports[pi];
            let tc = p.pcp_to_tc[f.pcp as usize] as usize;
            if let Some(g) = &p.gcl {
                let need = crate::frame::bytes_to_ps(crate::frame::tx_bytes(max_l2), p.rate.0);
                let longest = g.gcl.longest_open(tc);
                if longest == 0 {
                    return Err(format!(
                        "port {:?}: gcl: the gate of traffic class {tc} (flow {:?}, PCP {}) never opens",
                        p.name, f.name, f.pcp
                    ));
                }
                if need > longest {
                    return Err(format!(
                        "port {:?}: gcl: flow {:?} sends {max_l2}-byte frames ({:.3} us at {}) but traffic class {tc} is open \
                         for at most {:.3} us at a time: impossible schedule",
                        p.name,
                        f.name,
                        need as f64 / 1e6,
                        p.rate,
                        longest as f64 / 1e6
                    ));
                }
            }
        }
    }
    Ok(Scenario {
        file: file.to_string(),
        name: raw.name.unwrap_or_else(|| file.to_string()),
        description: raw.description.unwrap_or_default(),
        duration: raw.duration,
        drain: raw.drain.unwrap_or(Nanos(1_000_000_000)),
        seed: raw.seed.unwrap_or(1),
        framing,
        ports,
        flows,
        ptp: raw.ptp.unwrap_or_default(),
        dds: raw.dds.unwrap_or_default(),
    })
}

#[allow(clippy::too_many_arguments)]
fn finish_flow(
    ctx: &str,
    name: String,
    kind: FlowKind,
    ex: FlowExtra,
    pcp: u8,
    period_ns: u64,
    msgs_per_release: u64,
    streams: u32,
    frames: MessageFrames,
    ports: &[Port],
) -> Result<Flow, String> {
    if pcp > 7 {
        return Err(format!("{ctx}: pcp: {pcp} is not a PCP (0–7)"));
    }
    if period_ns == 0 {
        return Err(format!("{ctx}: the period is zero"));
    }
    if period_ns > MAX_DURATION_NS || ex.offset.is_some_and(|o| o.0 > MAX_DURATION_NS) || ex.deadline.is_some_and(|d| d.0 > MAX_DURATION_NS) {
        return Err(format!("{ctx}: period, offset and deadline must each be at most 24h"));
    }
    if ex.path.is_empty() {
        return Err(format!("{ctx}: path: give the ports the flow crosses, e.g. path = [\"{}\"]", ports[0].name));
    }
    let mut path = Vec::new();
    for name in &ex.path {
        let i = ports
            .iter()
            .position(|p| &p.name == name)
            .ok_or_else(|| format!("{ctx}: path: no port named {name:?} (ports: {})", ports.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")))?;
        if path.contains(&i) {
            return Err(format!("{ctx}: path: port {name:?} appears twice"));
        }
        path.push(i);
    }
    let sr_class = match ex.sr_class.as_deref() {
        Some("none") => None,
        Some(s) => Some(s.parse::<SrClass>().map_err(|e| format!("{ctx}: sr_class: {e}"))?),
        None => SrClass::from_pcp(pcp),
    };
    Ok(Flow {
        name,
        kind,
        path,
        pcp,
        offset: ex.offset,
        period_ns,
        deadline_ns: ex.deadline.map(|d| d.0).unwrap_or(period_ns),
        sr_class,
        socket_buffer: ex.socket_buffer.map(|b| b.0).unwrap_or(DEFAULT_SOCKET_BUFFER),
        msgs_per_release,
        streams,
        frames,
        multicast: match ex.multicast {
            // Goes into routes and firewall rules of the generated scripts: an address, nothing else.
            Some(m) => match m.parse::<std::net::Ipv4Addr>() {
                Ok(a) if a.is_multicast() => Some(a.to_string()),
                _ => return Err(format!("{ctx}: multicast {:?}: not an IPv4 multicast address", ddscope_traffic::text::excerpt(&m, 60))),
            },
            None => None,
        },
        dst_port: ex.dst_port,
    })
}

fn build_port(p: RawPort, framing: &Framing) -> Result<Port, String> {
    if p.link_rate.0 == 0 {
        return Err("link_rate: must be positive".into());
    }
    let map: [u8; 8] = match &p.pcp_to_tc {
        None => [0; 8],
        Some(v) if v.len() == 8 || v.len() == 16 => {
            let mut m = [0u8; 8];
            m.copy_from_slice(&v[..8]);
            m
        }
        Some(v) => return Err(format!("pcp_to_tc: needs 8 entries (one per PCP 0..7), got {}", v.len())),
    };
    let max_tc = *map.iter().max().unwrap() as usize;
    let gcl_tc = p.gcl.as_ref().map(|g| g.entries.iter().flat_map(|e| e.gates.iter().copied()).max().unwrap_or(0)).unwrap_or(0);
    let num_tc = p.num_tc.unwrap_or((max_tc.max(gcl_tc) + 1).max(p.cbs.iter().map(|c| c.tc + 1).max().unwrap_or(1)));
    if !(1..=16).contains(&num_tc) {
        return Err(format!("num_tc: {num_tc} is outside 1..=16"));
    }
    if max_tc >= num_tc {
        return Err(format!("pcp_to_tc: maps a PCP to traffic class {max_tc}, but num_tc is {num_tc}"));
    }
    let priority_order: Vec<usize> = match p.priority.as_deref() {
        None | Some("highest-tc-first") => (0..num_tc).rev().collect(),
        Some("lowest-tc-first") => (0..num_tc).collect(),
        Some(o) => return Err(format!("priority: {o:?} is not \"highest-tc-first\" or \"lowest-tc-first\"")),
    };
    let tag = if framing.vlan { crate::frame::VLAN_TAG } else { 0 };
    // MFS_0 as Bosk et al. counts it: the largest frame incl. preamble and IFG (1542 for MTU 1500 + VLAN).
    let max_frame = p
        .max_frame_bytes
        .map(|b| b.0)
        .unwrap_or(busy_bytes(framing.mtu + crate::frame::MAC_HEADER + tag + crate::frame::FCS));
    let gcl = match p.gcl {
        None => None,
        Some(g) => {
            let mut entries = Vec::new();
            for (i, e) in g.entries.iter().enumerate() {
                let mut mask = 0u32;
                for &tc in &e.gates {
                    if tc >= num_tc {
                        return Err(format!("gcl.entries[{i}].gates: traffic class {tc} does not exist (num_tc = {num_tc})"));
                    }
                    mask |= 1 << tc;
                }
                if e.duration.0 == 0 || e.duration.0 > MAX_DURATION_NS {
                    return Err(format!("gcl.entries[{i}].duration: must lie between 0 and 24h"));
                }
                entries.push(GateEntry { mask, duration_ps: e.duration.0 * 1000 });
            }
            let base = g.base_time.unwrap_or(0);
            let cycle_ps = entries.iter().try_fold(0u64, |a, e| a.checked_add(e.duration_ps).filter(|c| *c <= MAX_DURATION_NS * 1000));
            let cycle_ps = cycle_ps.ok_or("gcl: the cycle (the sum of the entries) is longer than 24h")?.max(1);
            // Only the phase of base-time matters (taprio starts a past base-time at a cycle boundary).
            let base_ps = (base as u128 * 1000 % cycle_ps as u128) as u64;
            let gc = Gcl::new(entries, base_ps, num_tc).map_err(|e| format!("gcl: {e}"))?;
            let mode = match g.mode.as_deref() {
                None | Some("full-offload") => TaprioMode::FullOffload,
                Some("software") => TaprioMode::Software,
                Some("txtime-assist") => TaprioMode::TxtimeAssist,
                Some(o) => return Err(format!("gcl.mode: {o:?} is not \"software\", \"txtime-assist\" or \"full-offload\"")),
            };
            let delta = g.etf_delta.map(|d| d.0).unwrap_or(175_000);
            let txd = g.txtime_delay.map(|d| d.0).unwrap_or(200_000);
            if mode == TaprioMode::TxtimeAssist && txd <= delta {
                return Err(format!("gcl.txtime_delay: {txd} ns must exceed etf_delta {delta} ns (taprio(8))"));
            }
            Some(GclSpec { gcl: gc, base_time_ns: base, mode, txtime_delay_ns: txd, etf_delta_ns: delta })
        }
    };
    // CBS: explicit tc values, or computed from reservations (Eq. 2–6, classes ordered by priority).
    let mut cbs = Vec::new();
    let mut computed_inputs = Vec::new();
    for (i, c) in p.cbs.iter().enumerate() {
        if c.tc >= num_tc {
            return Err(format!("cbs[{i}].tc: traffic class {} does not exist (num_tc = {num_tc})", c.tc));
        }
        if cbs.iter().any(|x: &(usize, CbsConfig, bool)| x.0 == c.tc) || computed_inputs.iter().any(|x: &(usize, CbsClassInput, bool)| x.0 == c.tc) {
            return Err(format!("cbs[{i}].tc: traffic class {} has two CBS entries", c.tc));
        }
        match (c.reserved, c.idleslope, c.sendslope, c.hicredit, c.locredit) {
            (Some(r), None, None, None, None) => {
                let mf = c.max_frame.map(|b| b.0).unwrap_or(max_frame);
                computed_inputs.push((c.tc, CbsClassInput { name: format!("tc{}", c.tc), reserved_bps: r.0, max_frame_bytes: mf }, c.offload.unwrap_or(false)));
            }
            (None, Some(i1), Some(s), Some(h), Some(l)) => {
                if i1 <= 0 || s >= 0 || h < 0 || l >= 0 {
                    return Err(format!("cbs[{i}]: need idleslope > 0, sendslope < 0, hicredit >= 0, locredit < 0"));
                }
                cbs.push((c.tc, CbsConfig { idleslope_kbps: i1, sendslope_kbps: s, hicredit_bytes: h, locredit_bytes: l }, c.offload.unwrap_or(false)));
            }
            _ => return Err(format!("cbs[{i}]: give either `reserved` (and optionally `max_frame`) or all of idleslope, sendslope, hicredit, locredit")),
        }
    }
    if !computed_inputs.is_empty() {
        computed_inputs.sort_by_key(|(tc, _, _)| priority_order.iter().position(|t| t == tc).unwrap());
        let inputs: Vec<CbsClassInput> = computed_inputs.iter().map(|x| x.1.clone()).collect();
        let params = cbs::compute(p.link_rate.0, max_frame, &inputs).map_err(|e| format!("cbs: {e}"))?;
        for ((tc, _, off), pr) in computed_inputs.iter().zip(params) {
            cbs.push((
                *tc,
                CbsConfig { idleslope_kbps: pr.idleslope, sendslope_kbps: pr.sendslope, hicredit_bytes: pr.hicredit, locredit_bytes: pr.locredit },
                *off,
            ));
        }
    }
    cbs.sort_by_key(|c| c.0);
    Ok(Port {
        interface: p.interface.clone().unwrap_or_else(|| p.name.clone()),
        name: p.name,
        rate: p.link_rate,
        propagation: p.propagation.unwrap_or_default(),
        processing: p.processing.unwrap_or_default(),
        num_tc,
        pcp_to_tc: map,
        queue_limit: p.queue_limit.unwrap_or(1000),
        priority_order,
        max_frame_bytes: max_frame,
        gcl,
        cbs,
    })
}

// ---------------------------------------------------------------- report

#[derive(Debug, Clone, Serialize)]
pub struct FlowReport {
    pub name: String,
    pub kind: &'static str,
    pub pcp: u8,
    pub traffic_class: usize,
    pub hops: u32,
    pub streams: u32,
    pub frames_per_message: u64,
    pub wire_bytes_per_message: u64,
    pub offered_wire_rate_bps: f64,
    pub released: u64,
    pub delivered: u64,
    pub lost: u64,
    pub unfinished: u64,
    pub dropped_frames: u64,
    pub latency: LatencyStats,
    pub jitter: JitterStats,
    pub deadline_ms: f64,
    pub deadline_misses: u64,
    pub sr: Option<SrVerdict>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PortReport {
    pub name: String,
    pub link_rate_bps: u64,
    pub utilisation: f64,
    pub frames: u64,
    pub drops: u64,
    pub max_queue_frames: Vec<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: String,
    pub file: String,
    pub seed: u64,
    pub duration_s: f64,
    pub events: u64,
    pub flows: Vec<FlowReport>,
    pub ports: Vec<PortReport>,
}

/// Longest `duration` (and `drain`) a scenario may give.
pub const MAX_DURATION_NS: u64 = 24 * 3_600_000_000_000;

/// Messages one simulation may release: each keeps its latency and jitter
/// (2·10^7 messages peak at ~240 MB).
pub const MAX_SIM_MESSAGES: u128 = 20_000_000;
/// Frame transmissions (frames × hops) one simulation may do: about 40 s on
/// one core of the benchmark machine (~12 million per second).
pub const MAX_SIM_FRAME_HOPS: u128 = 500_000_000;
/// Frames the sources of one simulation hold (streams × frames per message).
pub const MAX_SIM_MODEL_FRAMES: u128 = 8_000_000;

/// What a simulation costs ([`Scenario::sim_cost`]).
#[derive(Debug, Clone, Default)]
pub struct SimCost {
    pub messages: u128,
    pub frame_hops: u128,
    pub model_frames: u128,
    pub largest: Option<(String, u128)>,
}

/// [`simulate`] after [`Scenario::check_sim_budget`]: what the CLI runs.
pub fn try_simulate(sc: &Scenario, seed: u64) -> Result<Report, String> {
    sc.check_sim_budget()?;
    Ok(simulate(sc, seed))
}

/// Simulates the scenario (unchecked: see [`try_simulate`]).
pub fn simulate(sc: &Scenario, seed: u64) -> Report {
    let inp = sc.sim_input(seed);
    let res = sim::run(&inp);
    let dur_s = sc.duration.0 as f64 / 1e9;
    let flows = sc
        .flows
        .iter()
        .zip(&res.groups)
        .map(|(f, g)| {
            let lat = stats::latency(&g.latencies_ps);
            let jit = stats::jitter(&g.jitter_ps);
            let deadline_ps = f.deadline_ns * 1000;
            let misses = g.latencies_ps.iter().filter(|&&d| d > deadline_ps).count() as u64;
            let hops = f.path.len() as u32;
            let sr = f.sr_class.map(|c| sr::verdict(c, hops, lat.max_ms * 1e6, jit.max_abs_us * 1e3, g.lost > 0));
            let wire: u64 = f.frames.l2.iter().map(|&b| busy_bytes(b as u64)).sum();
            FlowReport {
                name: f.name.clone(),
                kind: match f.kind {
                    FlowKind::Topic(_) => "dds",
                    FlowKind::Burst(_) => "burst",
                    FlowKind::Pattern(_) => "pattern",
                },
                pcp: f.pcp,
                traffic_class: sc.ports[f.path[0]].pcp_to_tc[f.pcp as usize] as usize,
                hops,
                streams: f.streams,
                frames_per_message: f.frames.l2.len() as u64,
                wire_bytes_per_message: wire,
                offered_wire_rate_bps: wire as f64 * 8.0 * f.msgs_per_release as f64 * f.streams as f64 * 1e9 / f.period_ns as f64,
                released: g.released,
                delivered: g.delivered,
                lost: g.lost,
                unfinished: g.released.saturating_sub(g.delivered + g.lost),
                dropped_frames: g.dropped_frames,
                latency: lat,
                jitter: jit,
                deadline_ms: f.deadline_ns as f64 / 1e6,
                deadline_misses: misses,
                sr,
            }
        })
        .collect();
    let span = res.end_ps.max(1) as f64;
    let ports = sc
        .ports
        .iter()
        .zip(&res.ports)
        .map(|(p, r)| PortReport {
            name: p.name.clone(),
            link_rate_bps: p.rate.0,
            utilisation: r.busy_ps as f64 / span,
            frames: r.frames,
            drops: r.drops,
            max_queue_frames: r.max_queue.clone(),
        })
        .collect();
    Report { scenario: sc.name.clone(), file: sc.file.clone(), seed, duration_s: dur_s, events: res.events, flows, ports }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: &str = r#"
[[port]]
name = "p"
link_rate = "1G"
pcp_to_tc = [0,0,0,1,0,0,0,0]
[[topic]]
topic = "/x"
sample_bytes = 100
rate_hz = 10
pcp = 3
path = ["p"]
"#;

    #[test]
    fn minimal_scenario_parses() {
        let s = Scenario::parse(MIN, "min.toml").unwrap();
        assert_eq!(s.ports[0].num_tc, 2);
        assert_eq!(s.flows[0].sr_class, Some(SrClass::A));
        assert_eq!(s.flows[0].period_ns, 100_000_000);
    }

    fn err(text: &str) -> String {
        Scenario::parse(text, "bad.toml").unwrap_err()
    }

    #[test]
    fn errors_name_file_and_field() {
        let e = err(&MIN.replace("rate_hz = 10", "rate_hz = 10\nbogus = 1"));
        assert!(e.starts_with("bad.toml: topic[0] (\"/x\"): unknown field `bogus`"), "{e}");
        let e = err(&MIN.replace("path = [\"p\"]", "path = [\"q\"]"));
        assert!(e.contains("path: no port named \"q\""), "{e}");
        let e = err(&MIN.replace("link_rate = \"1G\"", "link_rate = \"1 furlong\""));
        assert!(e.starts_with("bad.toml: ") && e.contains("link_rate"), "{e}");
        let e = err(&(MIN.to_string() + "[port.gcl]\nentries = [{ gates = [0], duration = \"10us\" }]\n"));
        assert!(e.contains("gate of traffic class 1") && e.contains("never opens"), "{e}");
        let e = err(&(MIN.to_string() + "[port.gcl]\nentries = [{ gates = [1], duration = \"1us\" }, { gates = [0], duration = \"9us\" }]\n"));
        assert!(e.contains("impossible schedule"), "{e}");
        let fixed = MIN.replace("pcp_to_tc", "num_tc = 2\npcp_to_tc");
        let e = err(&(fixed + "[port.gcl]\nentries = [{ gates = [5], duration = \"1us\" }]\n"));
        assert!(e.contains("gcl.entries[0].gates: traffic class 5 does not exist"), "{e}");
        let e = err("[[port]\n");
        assert!(e.starts_with("bad.toml: "), "{e}");
        let e = err(&MIN.replace("[[topic]]", "speed = 3\n[[topic]]"));
        assert!(e.contains("unknown field `speed`"), "{e}");
    }

    #[test]
    fn table3_row_fills_defaults() {
        let s = Scenario::parse(
            "[[port]]\nname='p'\nlink_rate='1G'\n[[pattern]]\ntable3_row = 0\npath=['p']\n",
            "t.toml",
        )
        .unwrap();
        let f = &s.flows[0];
        assert_eq!((f.name.as_str(), f.streams, f.pcp, f.period_ns), ("C&C", 6, 3, 1_000_000));
        assert_eq!(f.frames.l2, vec![1024]);
    }

    #[test]
    fn same_seed_same_result_other_seed_other_phases() {
        let text = MIN.to_string() + "[[burst]]\nrate='100M'\npath=['p']\n";
        let s = Scenario::parse(&text, "s.toml").unwrap();
        let a = serde_json::to_string(&simulate(&s, 7)).unwrap();
        let b = serde_json::to_string(&simulate(&s, 7)).unwrap();
        assert_eq!(a, b);
        assert_ne!(s.sim_input(7).sources[0].offset_ps, s.sim_input(8).sources[0].offset_ps);
    }
}
