//! Host parameters of the TAS model, fitted from a measured no-gate lab run.
//!
//! The frame-level model ([`crate::tas`]) times the link only. A DDS sample's
//! latency (write call → the reader has it) also holds:
//!
//! - **host stack before the first frame** (`pre`): serialisation, the
//!   writer's path to `sendmsg`, the kernel down to the NIC;
//! - **writer pacing** (`datagram`): the writer produces one RTPS message
//!   (UDP datagram) after the other; when it is slower than the link the
//!   link idles between datagrams;
//! - **the fragment/datagram layout of the DDS implementation** (Cyclone:
//!   DATA_FRAGs of 1344 bytes, ~10 per 14 720-byte message; Fast DDS: one
//!   64 000-byte DATA_FRAG per datagram): frames, headers, padding;
//! - **receiver completion** (`post`): last frame received → the sample
//!   taken by the reader (reassembly, the reader's wake-up);
//! - the writer's **socket buffer**: how far the writer can run ahead of a
//!   link that a closed gate holds back.
//!
//! [`calibrate`] measures each of them on a lab run directory (captures on
//! both hosts plus the ground truth, docs/lab.md) with `ddscope-core`'s
//! decoder and sample tracker, per sample of one topic: the publish instant
//! (ground truth), the first and last frame on the sender's capture, the
//! last frame on the receiver's capture, the receive instant (ground truth),
//! and every datagram's first/last IP fragment (the inter-frame and
//! inter-datagram gaps). `pre` and `post` are the means of their
//! per-sample values; `datagram` is fitted so that the simulator, fed the
//! run's layout at the run's link rate, reproduces the mean first→last frame
//! span. The socket buffer is not identifiable without gates (the queue
//! never builds up): it is the Linux default unless given.

use crate::frame::{bytes_to_ps, tx_bytes, Framing, MessageFrames, RtpsOptions};
use crate::sim::{self, HostTiming, PortSpec, SimInput, SourceSpec};
use ddscope_core::decode::DecoderConfig;
use ddscope_core::events::{SubmsgEvent, TrafficType};
use ddscope_core::latency::app::AppTruth;
use ddscope_core::pipeline::analyse_file;
use ddscope_core::samples::{SampleConfig, SampleRecord};
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::Guid;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// A measured span less than this fraction above the link-only span is the
/// link's pace plus host jitter, not a writer slower than the link: any
/// pacing up to the link's time per datagram would fit it, so none is fitted
/// (a 1 Gbit/s lab run of the simple robotic workload: 0.13 % above; at
/// 2.5 Gbit/s, where Cyclone's writer is the slower one: 3.3 %).
pub const PACING_NOISE_FLOOR: f64 = 0.01;

/// Linux `net.core.wmem_default`: a socket's send buffer unless the writer sets SO_SNDBUF.
pub const LINUX_WMEM_DEFAULT: u64 = 212_992;

#[derive(Debug, Clone, Default)]
pub struct CalibrateOptions {
    /// ROS 2 topic (`/image`); default: the largest samples that cross hosts.
    pub topic: Option<String>,
    /// Link rate of the run; default: run.json's `network.rate`.
    pub link_rate_bps: Option<u64>,
    /// Writer socket buffer for the prediction (not measurable without gates).
    pub socket_buffer: Option<u64>,
    /// Caps of the decoder and the sample tracker (`--limits`).
    pub decoder: DecoderConfig,
    pub samples: SampleConfig,
}

/// The DDS layout the run's captures show.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Layout {
    pub sample_bytes: u64,
    pub fragment_bytes: u64,
    /// Largest RTPS message (UDP payload) seen.
    pub max_message_bytes: u64,
    /// Fragments per datagram (the model's RTPS message limit is set to hold exactly these).
    pub fragments_per_datagram: u64,
    pub model_max_message_bytes: u64,
    pub datagrams_per_sample: f64,
    pub frames_per_sample: f64,
    pub mtu: u64,
    pub vlan: bool,
    pub vendor: String,
    /// The same layout through the wire model: datagrams and frames (must match the capture's).
    pub model_datagrams: u64,
    pub model_frames: u64,
    /// The RTPS messages (UDP payload bytes) of one sample as the capture
    /// shows them, run-length coded `[bytes, count]`: the most common
    /// sequence among the samples used. The model sends exactly these.
    pub messages: Vec<[u64; 2]>,
    /// Samples whose message sequence was that one.
    pub messages_share: f64,
}

/// Per-sample means (and medians) of what the run measured (ms unless
/// named otherwise). The fit uses the medians: one sample that a busy host
/// held back for 100 ms moves a mean of 50 by 2 ms, and no link model
/// predicts it.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Measured {
    pub latency_median_ms: f64,
    pub dds_layer_median_ms: f64,
    pub span_median_ms: f64,
    pub pre_median_ms: f64,
    /// Last frame on the sender's capture → receive (transit + post), median.
    pub completion_median_ms: f64,
    /// Publish (write call) → receive (take), from the ground truth: the DDS latency.
    pub latency_mean_ms: f64,
    pub latency_std_ms: f64,
    pub latency_min_ms: f64,
    pub latency_max_ms: f64,
    /// Publish → first IP fragment on the sender's capture.
    pub pre_mean_ms: f64,
    /// First → last frame on the sender's capture.
    pub span_mean_ms: f64,
    /// The thesis's DDS-layer latency (3.2.5): first frame on the sender's capture → last on the receiver's.
    pub dds_layer_mean_ms: f64,
    pub span_min_ms: f64,
    /// Last frame on the sender's capture → on the receiver's.
    pub transit_mean_ms: f64,
    /// Last frame on the receiver's capture → receive.
    pub post_mean_ms: f64,
    /// Mean gap between IP fragments of one datagram (µs), and what the link needs per full frame.
    pub frame_gap_mean_us: f64,
    pub frame_wire_us: f64,
    /// Last fragment of a datagram → first of the next (µs): mean and median.
    pub datagram_gap_mean_us: f64,
    pub datagram_gap_p50_us: f64,
    /// First fragment of a datagram → first of the next (µs).
    pub datagram_period_mean_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    pub run: String,
    pub topic: String,
    pub sender: String,
    pub receiver: String,
    pub samples_used: u64,
    /// Samples left out, by reason (never silently).
    pub excluded: BTreeMap<String, u64>,
    pub link_rate_bps: u64,
    /// The run's link as the lab shaped it: a token-bucket shaper (Linux
    /// `tbf`) of this many bytes at `link_rate_bps` on a veth, which lets
    /// the first bytes of a message out faster than an Ethernet port at the
    /// same rate would (run.json `network.tbf_burst`). The fit models the
    /// run's link so; the predictions for Ethernet configurations do not.
    pub shaper_burst_bytes: Option<u64>,
    pub layout: Layout,
    pub measured: Measured,
    /// Fitted host times (ps) …
    pub host: HostTiming,
    /// … and the same in ms / µs for reading.
    pub pre_ms: f64,
    pub datagram_us: f64,
    pub post_ms: f64,
    /// Writer pacing as a throughput (bit/s of wire bytes), when the writer, not the link, set the pace.
    pub writer_rate_bps: Option<f64>,
    /// The link alone (no host limit) would take this long for the span.
    pub link_span_ms: f64,
    /// The fit: first→last frame span and the whole latency as the calibrated model gives them for this run.
    pub model_span_ms: f64,
    pub model_latency_ms: f64,
    /// (model − measured median) / measured median of write → take, %.
    pub residual_pct: f64,
    pub socket_buffer_bytes: u64,
    pub notes: Vec<String>,
}

#[derive(Default)]
struct Datagram {
    first: i64,
    last: i64,
    frags: u16,
    rtps_len: u32,
}

#[derive(Default)]
struct SampleWire {
    datagrams: BTreeMap<u64, Datagram>,
    frag_size: Option<u16>,
    max_submsgs: u16,
}

/// Samples whose datagrams are kept per capture; later ones are counted, not timed.
pub const MAX_SAMPLES: usize = 1 << 17;

struct CaptureData {
    /// Samples past [`MAX_SAMPLES`], not kept.
    untracked: u64,
    samples: HashMap<(Guid, i64), SampleRecord>,
    wire: HashMap<(Guid, i64), SampleWire>,
    topic_of: HashMap<Guid, (String, u32)>,
}

fn read_capture(path: &Path, name: &str, decoder: DecoderConfig, sample_cfg: SampleConfig) -> Result<CaptureData, String> {
    let mut wire: HashMap<(Guid, i64), SampleWire> = HashMap::new();
    let mut samples = HashMap::new();
    let mut topic_of: HashMap<Guid, (String, u32)> = HashMap::new();
    let mut untracked = 0u64;
    let mut on_event = |e: &SubmsgEvent| {
        if e.traffic_type != TrafficType::User || !matches!(e.kind, SubmsgKind::Data | SubmsgKind::DataFrag) {
            return;
        }
        let (Some(w), Some(sn)) = (e.writer_id, e.sn) else { return };
        if wire.len() >= MAX_SAMPLES && !wire.contains_key(&(w, sn)) {
            untracked += 1;
            return;
        }
        let sw = wire.entry((w, sn)).or_default();
        if sw.datagrams.len() >= crate::plan::MAX_DATAGRAMS_PER_SAMPLE && !sw.datagrams.contains_key(&e.frame) {
            untracked += 1;
            return;
        }
        let d = sw.datagrams.entry(e.frame).or_default();
        d.first = e.ip_first_ts_ns;
        d.last = e.ip_last_ts_ns;
        d.frags = e.ip_frags;
        d.rtps_len = e.rtps_len;
        if e.kind == SubmsgKind::DataFrag {
            sw.frag_size = e.fragment_size;
            sw.max_submsgs = sw.max_submsgs.max(e.submsg_index);
        }
    };
    let mut untracked_samples = 0u64;
    let mut on_sample = |r: SampleRecord| {
        if r.traffic_type != TrafficType::User {
            return;
        }
        if let Some(t) = &r.topic {
            if topic_of.len() < MAX_SAMPLES || topic_of.contains_key(&r.writer_id) {
                let e = topic_of.entry(r.writer_id).or_insert_with(|| (t.topic_name.clone(), 0));
                e.1 = e.1.max(r.sample_size);
            }
        }
        if samples.len() < MAX_SAMPLES || samples.contains_key(&(r.writer_id, r.sn)) {
            samples.insert((r.writer_id, r.sn), r);
        } else {
            untracked_samples += 1;
        }
    };
    let res = analyse_file(path, name, decoder, sample_cfg, None, &mut on_event, &mut on_sample)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(err) = res.summary.error.as_ref() {
        return Err(format!("{}: {err}", path.display()));
    }
    Ok(CaptureData { untracked: untracked + untracked_samples, samples, wire, topic_of })
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn run_rate(dir: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join("run.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("network")?.get("rate")?.as_str()?.parse::<ddscope_traffic::Rate>().ok().map(|r| r.0)
}

fn run_tbf_burst(dir: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join("run.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("network")?.get("tbf_burst")?.as_u64()
}

fn run_mtu(dir: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join("run.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("network")?.get("mtu")?.as_u64()
}

/// The simulated first-frame → last-bit span of one message on an ungated
/// port at `rate` (an Ethernet port, or the lab's shaper of `shaper_burst`
/// bytes: [`PortSpec::shaper_burst`]), with the writer handing datagram k at
/// k × `datagram_ps`.
pub fn link_span_ps(frames: &MessageFrames, rate: u64, host: HostTiming, socket_buffer: u64, shaper_burst: Option<u64>) -> Result<u64, String> {
    let port = PortSpec {
        name: "link".into(),
        rate_bps: rate,
        propagation_ps: 0,
        processing_ps: 0,
        num_tc: 1,
        pcp_to_tc: [0; 8],
        queue_limit: usize::MAX,
        priority_order: vec![0],
        gcl: None,
        cbs: vec![None],
        shaper_burst,
    };
    let src = SourceSpec {
        group: 0,
        path: vec![0],
        pcp: 0,
        period_ps: u64::MAX / 4,
        offset_ps: 0,
        msgs_per_release: 1,
        frames: frames.clone(),
        socket_buffer,
        host,
    };
    let r = sim::run(&SimInput { ports: vec![port], sources: vec![src], groups: 1, duration_ps: 1, drain_ps: 3_600_000_000_000_000 });
    r.groups[0].latencies_ps.first().copied().ok_or_else(|| "the simulated message was not delivered".to_string())
}

/// Measures a lab run directory and fits the host parameters (module docs).
pub fn calibrate(dir: &Path, opt: &CalibrateOptions) -> Result<Calibration, String> {
    if !dir.is_dir() {
        return Err(format!("{}: not a lab run directory", dir.display()));
    }
    let mut caps: Vec<(String, PathBuf)> = vec![];
    let mut truth = AppTruth::default();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        let n = p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        if let Some(host) = n.strip_suffix(".pcapng.gz").or_else(|| n.strip_suffix(".pcapng")).or_else(|| n.strip_suffix(".pcap")) {
            caps.push((host.to_string(), p.clone()));
        } else if n.ends_with(".truth.jsonl") {
            truth.load(&p).map_err(|e| e.to_string())?;
        }
    }
    if caps.len() < 2 {
        return Err(format!("{}: needs the captures of the sending and the receiving host (found {})", dir.display(), caps.len()));
    }
    if truth.publish.is_empty() {
        return Err(format!("{}: no ground truth (HOST.truth.jsonl with publish records)", dir.display()));
    }
    let mut data: HashMap<String, CaptureData> = HashMap::new();
    for (host, p) in &caps {
        data.insert(host.clone(), read_capture(p, host, opt.decoder, opt.samples)?);
    }
    // Which writer: the topic asked for, else the one with the largest samples received on another host.
    let mut best: Option<(u32, Guid, String, String, String)> = None;
    for ((w, sn), p) in &truth.publish {
        let Some(cap) = data.get(&p.host) else { continue };
        let Some((topic, size)) = cap.topic_of.get(w) else { continue };
        if opt.topic.as_ref().is_some_and(|t| t != topic) {
            continue;
        }
        let Some(rx) = truth.receive.get(&(*w, *sn)).and_then(|v| v.iter().find(|r| r.host != p.host && data.contains_key(&r.host)))
        else {
            continue;
        };
        if best.as_ref().is_none_or(|b| *size > b.0) {
            best = Some((*size, *w, topic.clone(), p.host.clone(), rx.host.clone()));
        }
    }
    let Some((_, writer, topic, sender, receiver)) = best else {
        return Err(match &opt.topic {
            Some(t) => format!("{}: topic {t} has no sample published on one captured host and received on another", dir.display()),
            None => format!("{}: no topic crosses from one captured host to another", dir.display()),
        });
    };
    let link_rate = opt
        .link_rate_bps
        .or_else(|| run_rate(dir))
        .ok_or_else(|| format!("{}: run.json gives no network.rate; give the link rate", dir.display()))?;
    let mtu = run_mtu(dir).unwrap_or(1500);
    // the lab shapes with tbf only when it limits the rate: a rate given by hand is an Ethernet link
    let shaper_burst = if opt.link_rate_bps.is_none() { run_tbf_burst(dir) } else { None };
    let (tx, rx) = (&data[&sender], &data[&receiver]);
    let mut excluded: BTreeMap<String, u64> = BTreeMap::new();
    let mut notes = vec![];
    for (host, d) in [(&sender, tx), (&receiver, rx)] {
        if d.untracked > 0 {
            notes.push(format!(
                "{host}: {} submessages/samples past the first {MAX_SAMPLES} samples (or past a sample's first {} datagrams) were not kept",
                d.untracked,
                crate::plan::MAX_DATAGRAMS_PER_SAMPLE
            ));
        }
    }
    let (mut lat, mut pre, mut span, mut transit, mut post) = (vec![], vec![], vec![], vec![], vec![]);
    let (mut intra_sum, mut intra_n) = (0f64, 0f64);
    let (mut dgap, mut dper) = (vec![], vec![]);
    let (mut n_dgrams, mut n_frames, mut max_msg, mut frag, mut per_msg, mut sample_bytes) = (vec![], vec![], 0u64, 0u64, 0u16, 0u64);
    let (mut vlan, mut vendor) = (false, 0u16);
    let mut sequences: HashMap<Vec<u64>, u64> = HashMap::new();
    let mut keys: Vec<i64> = truth.publish.keys().filter(|(w, _)| *w == writer).map(|(_, sn)| *sn).collect();
    keys.sort();
    for sn in keys {
        let key = (writer, sn);
        let p = &truth.publish[&key];
        let mut skip = |why: &str| *excluded.entry(why.to_string()).or_default() += 1;
        let Some(r) = truth.receive_on(writer, sn, &receiver) else {
            skip("not received");
            continue;
        };
        let (Some(s), Some(d)) = (tx.samples.get(&key), rx.samples.get(&key)) else {
            skip("not in both captures");
            continue;
        };
        if !s.complete || !d.complete {
            skip("incomplete on the wire");
            continue;
        }
        if s.retransmitted_frags > 0 || d.retransmitted_frags > 0 {
            skip("repaired by retransmission");
            continue;
        }
        let Some(w) = tx.wire.get(&key) else {
            skip("not in both captures");
            continue;
        };
        lat.push((r.t_ns - p.t_ns) as f64 / 1e6);
        pre.push((s.first_ip_ts_ns - p.t_ns) as f64 / 1e6);
        span.push((s.last_ts_ns - s.first_ip_ts_ns) as f64 / 1e6);
        transit.push((d.last_ts_ns - s.last_ts_ns) as f64 / 1e6);
        post.push((r.t_ns - d.last_ts_ns) as f64 / 1e6);
        let dg: Vec<&Datagram> = w.datagrams.values().collect();
        for (i, g) in dg.iter().enumerate() {
            if g.frags > 1 {
                intra_sum += (g.last - g.first) as f64;
                intra_n += (g.frags - 1) as f64;
            }
            if i > 0 {
                dgap.push((g.first - dg[i - 1].last) as f64 / 1e3);
                dper.push((g.first - dg[i - 1].first) as f64 / 1e3);
            }
            max_msg = max_msg.max(g.rtps_len as u64);
        }
        *sequences.entry(dg.iter().map(|g| g.rtps_len as u64).collect()).or_default() += 1;
        n_dgrams.push(dg.len() as f64);
        n_frames.push(dg.iter().map(|g| g.frags as f64).sum());
        if let Some(f) = w.frag_size {
            frag = f as u64;
        }
        per_msg = per_msg.max(w.max_submsgs);
        sample_bytes = s.sample_size as u64;
        vlan = s.pcp.is_some();
        vendor = s.vendor_id;
    }
    if lat.is_empty() {
        return Err(format!("{}: no sample of {topic} could be measured end to end ({excluded:?})", dir.display()));
    }
    let framing = Framing { vlan, mtu };
    // Cyclone packs several fragments into one DATA_FRAG submessage: the
    // model's layout is fixed by fragments per datagram, which the capture gives.
    let frag_bytes = if frag == 0 { sample_bytes.div_ceil(4) * 4 } else { frag };
    let frags_per_dgram = (sample_bytes.div_ceil(frag_bytes) as f64 / mean(&n_dgrams)).round().max(1.0) as u64;
    let model_max_msg = if frag == 0 { max_msg.max(1) } else { 20 + 12 + frags_per_dgram * (36 + frag_bytes) };
    let rtps = RtpsOptions { fragment_bytes: Some(frag_bytes), max_message_bytes: Some(model_max_msg), ..Default::default() };
    // The model sends the messages the capture shows (the most common sequence; ties: the shorter, then the smaller).
    let mut seqs: Vec<(Vec<u64>, u64)> = sequences.into_iter().collect();
    seqs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.len().cmp(&b.0.len())).then(a.0.cmp(&b.0)));
    let (sequence, seq_n) = seqs.first().cloned().unwrap_or_default();
    let messages_share = seq_n as f64 / lat.len() as f64;
    if messages_share < 1.0 {
        notes.push(format!(
            "{} of {} samples went out as the modelled message sequence; the others differ in {} ways",
            seq_n,
            lat.len(),
            seqs.len() - 1
        ));
    }
    let frames = MessageFrames::measured(&framing, sample_bytes, &sequence)?;
    let options_frames = MessageFrames::dds_sample(&framing, &rtps, sample_bytes)?;
    if options_frames.breakdown.wire_bytes != frames.breakdown.wire_bytes {
        notes.push(format!(
            "the capture's messages put {} bytes per sample on the wire, the layout options ({frag_bytes}-byte DATA_FRAGs, {frags_per_dgram} per message, \
             one submessage each) {}: the model sends the capture's",
            frames.breakdown.wire_bytes, options_frames.breakdown.wire_bytes
        ));
    }
    let socket_buffer = opt.socket_buffer.unwrap_or(LINUX_WMEM_DEFAULT);
    // medians: robust against the few samples a busy host holds back (Measured)
    let m_span = median(&mut span.clone());
    let dds_layer: Vec<f64> = span.iter().zip(&transit).map(|(a, b)| a + b).collect();
    let completion: Vec<f64> = transit.iter().zip(&post).map(|(a, b)| a + b).collect();
    let full_frame_ps = bytes_to_ps(tx_bytes(framing.l2_bytes(mtu)) + crate::frame::IFG, link_rate);
    // Sim span = first frame start → last bit received; the capture stamps frame starts
    // (a shaper hands a frame over at once: nothing to take off).
    let last_tx_ps = if shaper_burst.is_some() { 0 } else { bytes_to_ps(tx_bytes(*frames.l2.last().unwrap_or(&0) as u64), link_rate) };
    if let Some(b) = shaper_burst {
        notes.push(format!(
            "the run's link is the lab's shaper (tbf, {b}-byte bucket at the link rate, frames charged without FCS, preamble or gap): \
             the fit models it so; the predictions below are for an Ethernet port at the rate"
        ));
    } else if run_rate(dir).is_some() && opt.link_rate_bps.is_none() {
        notes.push("run.json names no shaper bucket (network.tbf_burst): the run's link is modelled as an Ethernet port".into());
    }
    let span_at = |datagram_ps: u64| -> Result<f64, String> {
        let h = HostTiming { pre_ps: 0, datagram_ps, post_ps: 0 };
        Ok((link_span_ps(&frames, link_rate, h, socket_buffer, shaper_burst)? - last_tx_ps) as f64 / 1e9)
    };
    let link_only = span_at(0)?;
    let datagram_ps = if m_span <= link_only * (1.0 + PACING_NOISE_FLOOR) || frames.datagram_ends.len() < 2 {
        notes.push(format!(
            "the first→last frame span ({m_span:.3} ms) is within {:.0} % of what the link needs ({link_only:.3} ms): the link set the pace; \
             writer pacing is not identifiable from this run (0)",
            PACING_NOISE_FLOOR * 100.0
        ));
        0
    } else {
        // span(h) is monotone in h: bisect to 1 ns.
        let (mut lo, mut hi) = (0u64, 1u64 << 30);
        while span_at(hi * 1000)? < m_span {
            hi *= 2;
            if hi > 1 << 40 {
                return Err("writer pacing does not converge".into());
            }
        }
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if span_at(mid * 1000)? < m_span {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi * 1000
    };
    let m_lat = mean(&lat);
    let med_lat = median(&mut lat.clone());
    let model_span = span_at(datagram_ps)?;
    // `post` closes the median write → take: the medians of the parts do not add up to the
    // median of the whole (a sample slow in one part is not the one slow in another); the
    // measured median of last frame → take stays in `measured.completion_median_ms`
    let pre_ms = median(&mut pre.clone()).max(0.0);
    let post_ms = (med_lat - pre_ms - model_span).max(0.0);
    let host = HostTiming { pre_ps: (pre_ms * 1e9).round() as u64, datagram_ps, post_ps: (post_ms * 1e9).round() as u64 };
    let model_latency = (link_span_ps(&frames, link_rate, host, socket_buffer, shaper_burst)? as f64 - last_tx_ps as f64) / 1e9;
    let sd = (lat.iter().map(|x| (x - m_lat).powi(2)).sum::<f64>() / lat.len().max(2).saturating_sub(1) as f64).sqrt();
    let dgram_wire_bytes: f64 = frames.breakdown.wire_bytes as f64 / frames.datagram_ends.len().max(1) as f64;
    let measured_frames = mean(&n_frames);
    if (measured_frames - frames.l2.len() as f64).abs() > 0.5 {
        notes.push(format!(
            "the capture shows {measured_frames:.1} frames per sample, the wire model {} for the same layout",
            frames.l2.len()
        ));
    }
    let frame_gap = if intra_n > 0.0 { intra_sum / intra_n / 1e3 } else { 0.0 };
    if frame_gap > 0.0 && frame_gap < full_frame_ps as f64 / 1e6 * 0.9 {
        notes.push(format!(
            "IP fragments left {frame_gap:.2} µs apart, faster than a {:.2} µs full frame at the link rate: the shaper releases bursts \
             (token bucket), so per-frame gaps are not the link's; the sample's first→last span is what the fit uses",
            full_frame_ps as f64 / 1e6
        ));
    }
    let mut dgap_sorted = dgap.clone();
    Ok(Calibration {
        run: dir.display().to_string(),
        topic,
        sender,
        receiver,
        samples_used: lat.len() as u64,
        excluded,
        link_rate_bps: link_rate,
        shaper_burst_bytes: shaper_burst,
        layout: Layout {
            sample_bytes,
            fragment_bytes: rtps.fragment_bytes.unwrap_or(0),
            max_message_bytes: max_msg,
            fragments_per_datagram: frags_per_dgram,
            model_max_message_bytes: model_max_msg,
            datagrams_per_sample: mean(&n_dgrams),
            frames_per_sample: measured_frames,
            mtu,
            vlan,
            vendor: match vendor {
                0x0110 => "Cyclone DDS".into(),
                0x010f => "Fast DDS".into(),
                v => format!("vendor 0x{v:04x}"),
            },
            model_datagrams: frames.datagram_ends.len() as u64,
            model_frames: frames.l2.len() as u64,
            messages: run_length(&sequence),
            messages_share,
        },
        measured: Measured {
            latency_median_ms: med_lat,
            dds_layer_median_ms: median(&mut dds_layer.clone()),
            span_median_ms: m_span,
            pre_median_ms: median(&mut pre.clone()),
            completion_median_ms: median(&mut completion.clone()),
            latency_mean_ms: m_lat,
            latency_std_ms: sd,
            latency_min_ms: lat.iter().copied().fold(f64::MAX, f64::min),
            latency_max_ms: lat.iter().copied().fold(f64::MIN, f64::max),
            pre_mean_ms: mean(&pre),
            span_mean_ms: mean(&span),
            dds_layer_mean_ms: mean(&span) + mean(&transit),
            span_min_ms: span.iter().copied().fold(f64::MAX, f64::min),
            transit_mean_ms: mean(&transit),
            post_mean_ms: mean(&post),
            frame_gap_mean_us: frame_gap,
            frame_wire_us: full_frame_ps as f64 / 1e6,
            datagram_gap_mean_us: mean(&dgap),
            datagram_gap_p50_us: median(&mut dgap_sorted),
            datagram_period_mean_us: mean(&dper),
        },
        pre_ms: host.pre_ps as f64 / 1e9,
        datagram_us: host.datagram_ps as f64 / 1e6,
        post_ms: host.post_ps as f64 / 1e9,
        writer_rate_bps: (datagram_ps > 0).then(|| dgram_wire_bytes * 8.0 / (datagram_ps as f64 / 1e12)),
        host,
        link_span_ms: link_only,
        model_span_ms: model_span,
        model_latency_ms: model_latency,
        residual_pct: (model_latency - med_lat) / med_lat * 100.0,
        socket_buffer_bytes: socket_buffer,
        notes,
    })
}

/// `[value, count]` runs of equal consecutive values.
fn run_length(v: &[u64]) -> Vec<[u64; 2]> {
    let mut out: Vec<[u64; 2]> = vec![];
    for &x in v {
        match out.last_mut() {
            Some(r) if r[0] == x => r[1] += 1,
            _ => out.push([x, 1]),
        }
    }
    out
}

impl Calibration {
    /// The run's sample through the wire model, in the run's layout.
    pub fn frames(&self) -> Result<MessageFrames, String> {
        let framing = Framing { vlan: self.layout.vlan, mtu: self.layout.mtu };
        if !self.layout.messages.is_empty() {
            let msgs: Vec<u64> = self.layout.messages.iter().flat_map(|r| std::iter::repeat_n(r[0], r[1] as usize)).collect();
            return MessageFrames::measured(&framing, self.layout.sample_bytes, &msgs);
        }
        let rtps = RtpsOptions {
            fragment_bytes: Some(self.layout.fragment_bytes),
            max_message_bytes: Some(self.layout.model_max_message_bytes.max(1)),
            ..Default::default()
        };
        MessageFrames::dds_sample(&framing, &rtps, self.layout.sample_bytes)
    }
}

impl Calibration {
    /// The host times that fall inside the thesis's DDS-layer latency (first
    /// frame at the sender → last frame at the receiver): the writer's
    /// pacing only. (At least 1 ps of pacing keeps the source paced, so the
    /// latency runs from the release, which is then the first frame's hand-off.)
    pub fn dds_layer_host(&self) -> HostTiming {
        HostTiming { pre_ps: 0, datagram_ps: self.host.datagram_ps.max(1), post_ps: 0 }
    }
}
