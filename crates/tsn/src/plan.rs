//! Closed loop: a TAS configuration proposed from measured traffic.
//!
//! [`measure`] reads captures with `ddscope-core` (decoder + sample
//! tracker) and, per DDS writer of an application topic, takes the
//! publication period (median interval between samples' first frames), the
//! sample size, the frames and datagrams per sample (IP fragments and RTPS
//! messages: the burst a sample puts on the link) and the DATA_FRAG layout.
//! A writer seen in several captures is counted once (the capture where its
//! samples appear first, i.e. the sender's).
//!
//! [`propose`] turns that into one egress port with three traffic classes:
//!
//! - **TC2 (PCP 6), control**: topics whose sample is one datagram. They get
//!   a window at the start of every cycle, long enough for every control
//!   topic's sample plus one full frame; their worst wait is the rest of the
//!   cycle, so the cycle is at most a tenth of the shortest control deadline
//!   (and at most 500 µs, the thesis's cycle).
//! - **TC1 (PCP 5), bulk DDS**: fragmented samples. Their share D of the
//!   cycle must carry the bulk wire rate, and each sample must finish within
//!   its deadline (= its period): D ≥ wire time / (deadline − cycle) for
//!   every bulk topic; the plan takes the largest requirement times a
//!   margin (default 1.25), at least the bulk utilisation times the margin.
//! - **TC0, everything else** (best effort: iperf3 and other traffic) gets
//!   the rest. If nothing is left, the plan says which topics cannot meet
//!   their deadline at this link rate.
//!
//! The plan is written as a `tsn` scenario (docs/tsn.md), parsed back with
//! [`Scenario::parse`] (so it is valid for `tsn simulate`, `tsn config` and
//! `tsn check`) and simulated: the per-topic latency the simulator predicts
//! is compared with each deadline.

use crate::frame::{bytes_to_ps, busy_bytes, Framing, MessageFrames, RtpsOptions};
use crate::scenario::{self, Scenario};
use ddscope_core::decode::DecoderConfig;
use ddscope_core::events::{SubmsgEvent, TrafficType};
use ddscope_core::pipeline::analyse_file;
use ddscope_core::samples::{SampleConfig, SampleRecord};
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::Guid;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::path::PathBuf;

/// What the captures show for one writer.
#[derive(Debug, Clone, Serialize)]
pub struct MeasuredTopic {
    pub topic: String,
    pub type_name: String,
    pub writer: String,
    pub capture: String,
    pub samples: u64,
    pub period_ms: f64,
    pub rate_hz: f64,
    pub sample_bytes: u64,
    /// IP fragments per sample (max over samples): the burst a sample is on the link.
    pub frames_per_sample: u64,
    pub datagrams_per_sample: u64,
    /// DATA_FRAG payload size, if fragmented.
    pub fragment_bytes: Option<u64>,
    /// Largest RTPS message (UDP payload).
    pub max_message_bytes: u64,
    pub vlan: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Measurement {
    pub captures: Vec<String>,
    pub topics: Vec<MeasuredTopic>,
    /// Writers left out, by reason.
    pub skipped: BTreeMap<String, u64>,
}

#[derive(Default)]
struct WriterAcc {
    topic: String,
    type_name: String,
    first_ts: Vec<i64>,
    sample_bytes: u64,
    frames: u64,
    frag: Option<u64>,
    vlan: bool,
    capture: String,
    earliest: i64,
    datagrams: u64,
    max_rtps: u64,
}

#[derive(Default)]
struct DgramAcc {
    per_sample: HashMap<i64, std::collections::HashSet<u64>>,
    max_rtps: u64,
}

/// Writers tracked per capture; samples of further writers are counted in `skipped`.
pub const MAX_WRITERS: usize = 4096;
/// Samples per writer whose datagrams are counted (for datagrams per sample)
/// and whose times are kept (for the period); later ones are counted in `skipped`.
pub const MAX_SAMPLES_PER_WRITER: usize = 1 << 16;
/// Datagrams counted per sample (an 8 MB sample in 13.5 KB messages has ~620).
pub const MAX_DATAGRAMS_PER_SAMPLE: usize = 4096;

/// Reads the captures (module docs).
pub fn measure(captures: &[PathBuf], decoder: DecoderConfig, samples: SampleConfig) -> Result<Measurement, String> {
    if captures.is_empty() {
        return Err("no capture given".into());
    }
    let mut writers: HashMap<Guid, WriterAcc> = HashMap::new();
    let mut m = Measurement::default();
    for path in captures {
        let name = ddscope_core::session::capture_name(path);
        let mut local: HashMap<Guid, WriterAcc> = HashMap::new();
        let mut dgrams: HashMap<Guid, DgramAcc> = HashMap::new();
        let mut over_cap = 0u64;
        let (mut ev_writers_over, mut ev_samples_over, mut ev_dgrams_over, mut times_over) = (0u64, 0u64, 0u64, 0u64);
        let mut on_event = |e: &SubmsgEvent| {
            if e.traffic_type != TrafficType::User || !matches!(e.kind, SubmsgKind::Data | SubmsgKind::DataFrag) {
                return;
            }
            let (Some(w), Some(sn)) = (e.writer_id, e.sn) else { return };
            if dgrams.len() >= MAX_WRITERS && !dgrams.contains_key(&w) {
                ev_writers_over += 1;
                return;
            }
            let d = dgrams.entry(w).or_default();
            if d.per_sample.len() < MAX_SAMPLES_PER_WRITER || d.per_sample.contains_key(&sn) {
                let frames = d.per_sample.entry(sn).or_default();
                if frames.len() < MAX_DATAGRAMS_PER_SAMPLE || frames.contains(&e.frame) {
                    frames.insert(e.frame);
                } else {
                    ev_dgrams_over += 1;
                }
            } else {
                ev_samples_over += 1;
            }
            d.max_rtps = d.max_rtps.max(e.rtps_len as u64);
        };
        let mut on_sample = |r: SampleRecord| {
            if r.traffic_type != TrafficType::User || r.is_supplement() {
                return;
            }
            let Some(t) = &r.topic else { return };
            if local.len() >= MAX_WRITERS && !local.contains_key(&r.writer_id) {
                over_cap += 1;
                return;
            }
            let a = local.entry(r.writer_id).or_insert_with(|| WriterAcc { earliest: i64::MAX, ..Default::default() });
            a.topic = t.topic_name.clone();
            a.type_name = t.type_name.clone();
            if a.first_ts.len() < MAX_SAMPLES_PER_WRITER {
                a.first_ts.push(r.first_ts_ns);
            } else {
                times_over += 1;
            }
            a.earliest = a.earliest.min(r.first_ts_ns);
            a.sample_bytes = a.sample_bytes.max(r.sample_size as u64);
            a.frames = a.frames.max(r.ip_frags as u64);
            a.frag = r.fragment_size.map(|f| f as u64).or(a.frag);
            a.vlan |= r.pcp.is_some();
            a.capture = name.clone();
        };
        let res = analyse_file(path, &name, decoder, samples, None, &mut on_event, &mut on_sample)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(err) = &res.summary.error {
            return Err(format!("{}: {err}", path.display()));
        }
        m.captures.push(path.display().to_string());
        // what the decoder's and the sample tracker's caps (`--limits`) gave up
        if let Some(l) = res.samples.problem_line() {
            *m.skipped.entry(format!("{name}: sample tracker: {l}")).or_default() += res.samples.evicted + res.samples.untracked_large_samples;
        }
        if res.decoder.stats.ip.datagrams_evicted > 0 {
            *m.skipped.entry(format!("{name}: IP datagrams dropped from reassembly by its caps (ip_reassembly.*)")).or_default() += res.decoder.stats.ip.datagrams_evicted;
        }
        for (n, why) in [
            (over_cap, format!("samples of writers past the first {MAX_WRITERS} in {name}")),
            (ev_writers_over, format!("submessages of writers past the first {MAX_WRITERS} in {name} (datagram counts)")),
            (ev_samples_over, format!("submessages of samples past a writer's first {MAX_SAMPLES_PER_WRITER} in {name} (datagram counts)")),
            (ev_dgrams_over, format!("submessages in datagrams past a sample's first {MAX_DATAGRAMS_PER_SAMPLE} in {name}")),
            (times_over, format!("samples past a writer's first {MAX_SAMPLES_PER_WRITER} in {name} (period)")),
        ] {
            if n > 0 {
                *m.skipped.entry(why).or_default() += n;
            }
        }
        for (w, mut a) in local {
            let d = dgrams.get(&w);
            a.frames = a.frames.max(1);
            // Median datagrams per sample (a retransmission adds datagrams to a few samples).
            a.datagrams = d
                .map(|d| {
                    let mut v: Vec<u64> = d.per_sample.values().map(|s| s.len() as u64).collect();
                    v.sort_unstable();
                    v.get(v.len() / 2).copied().unwrap_or(1)
                })
                .unwrap_or(1);
            a.max_rtps = d.map(|d| d.max_rtps).unwrap_or(0);
            // Keep the capture that saw the writer's first sample earliest (its sender).
            match writers.get(&w) {
                Some(prev) if prev.earliest <= a.earliest => {}
                _ => {
                    writers.insert(w, a);
                }
            }
        }
    }
    let mut topics = vec![];
    // the end of the observation: the last sample any writer was seen with
    let observed_until = writers.values().flat_map(|a| a.first_ts.iter().copied()).max();
    for (w, mut a) in writers {
        if a.first_ts.len() < 3 {
            *m.skipped.entry("writers with fewer than 3 samples (no period)".into()).or_default() += 1;
            continue;
        }
        a.first_ts.sort();
        // only a steady stream has a period to plan a deadline from: a burst (/parameter_events at a
        // node's start, graph updates) has a median interval of microseconds, which would set the
        // cycle; `topics` gives such writers no rate either (docs/events.md, "Rates")
        let mut times = ddscope_core::rate::SampleTimes::default();
        for &t in &a.first_ts {
            times.add(t);
        }
        let kind = times.kind_until(observed_until);
        if kind != ddscope_core::rate::RateKind::Steady {
            *m.skipped.entry(format!("writers without a steady period ({kind}: `topics` gives them no rate), left to best effort")).or_default() += 1;
            continue;
        }
        let mut iv: Vec<i64> = a.first_ts.windows(2).map(|p| p[1] - p[0]).collect();
        iv.sort();
        let period = iv[iv.len() / 2];
        if period <= 0 {
            *m.skipped.entry("writers with no positive interval between samples".into()).or_default() += 1;
            continue;
        }
        topics.push(MeasuredTopic {
            topic: a.topic,
            type_name: a.type_name,
            writer: w.to_string(),
            capture: a.capture,
            samples: a.first_ts.len() as u64,
            period_ms: period as f64 / 1e6,
            rate_hz: 1e9 / period as f64,
            sample_bytes: a.sample_bytes,
            frames_per_sample: a.frames,
            datagrams_per_sample: a.datagrams,
            fragment_bytes: a.frag,
            max_message_bytes: a.max_rtps,
            vlan: a.vlan,
        });
    }
    topics.sort_by(|x, y| x.topic.cmp(&y.topic).then(x.writer.cmp(&y.writer)));
    m.topics = topics;
    if m.topics.is_empty() {
        return Err(format!("{}: no application topic with a period (at least 3 samples of a discovered writer)", m.captures.join(", ")));
    }
    Ok(m)
}

#[derive(Debug, Clone)]
pub struct PlanOptions {
    pub link_rate_bps: u64,
    /// Longest cycle allowed (default 500 µs).
    pub max_cycle_ns: u64,
    /// Headroom on the bulk window (default 1.25).
    pub margin: f64,
    pub port: String,
    pub interface: String,
    pub mtu: u64,
    pub duration_ns: u64,
    pub seed: u64,
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            link_rate_bps: 1_000_000_000,
            max_cycle_ns: 500_000,
            margin: 1.25,
            port: "sender".into(),
            interface: "eth0".into(),
            mtu: 1500,
            duration_ns: 2_000_000_000,
            seed: 1,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PlannedTopic {
    pub topic: String,
    pub class: &'static str,
    pub pcp: u8,
    pub traffic_class: usize,
    pub rate_hz: f64,
    pub sample_bytes: u64,
    pub frames_per_sample: u64,
    pub wire_bytes_per_sample: u64,
    pub deadline_ms: f64,
    pub predicted_mean_ms: f64,
    pub predicted_max_ms: f64,
    pub deadline_misses: u64,
    pub delivered: u64,
    pub released: u64,
    pub meets_deadline: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub link_rate_bps: u64,
    pub cycle_ns: u64,
    pub control_window_ns: u64,
    pub bulk_window_ns: u64,
    pub best_effort_window_ns: u64,
    pub bulk_utilisation: f64,
    pub control_utilisation: f64,
    pub topics: Vec<PlannedTopic>,
    /// One line per topic that cannot meet its deadline, or why the plan is infeasible.
    pub problems: Vec<String>,
    pub feasible: bool,
    #[serde(skip)]
    pub scenario_toml: String,
    #[serde(skip)]
    pub scenario: Option<Scenario>,
}

/// The RTPS message limit that makes the wire model pack the fragments per
/// datagram the capture shows (Cyclone puts several fragments into one
/// DATA_FRAG submessage, so the largest message seen is smaller than the
/// model's one-submessage-per-fragment layout would need).
fn model_max_message(t: &MeasuredTopic) -> u64 {
    match t.fragment_bytes {
        Some(f) if f > 0 => {
            let k = (t.sample_bytes.div_ceil(f) as f64 / t.datagrams_per_sample.max(1) as f64).round().max(1.0) as u64;
            (20 + 12 + k * (36 + f)).min(65_507)
        }
        _ => t.max_message_bytes.max(1),
    }
}

fn wire_frames(t: &MeasuredTopic, mtu: u64) -> Result<MessageFrames, String> {
    let framing = Framing { vlan: true, mtu };
    let rtps = RtpsOptions {
        fragment_bytes: t.fragment_bytes,
        max_message_bytes: t.fragment_bytes.map(|_| model_max_message(t)),
        ..Default::default()
    };
    MessageFrames::dds_sample(&framing, &rtps, t.sample_bytes)
}

fn toml_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Proposes the GCL, writes it as a scenario and simulates it (module docs).
pub fn propose(m: &Measurement, opt: &PlanOptions) -> Result<Plan, String> {
    let rate = opt.link_rate_bps;
    if rate == 0 {
        return Err("the link rate must be positive".into());
    }
    let mut frames = vec![];
    for t in &m.topics {
        frames.push(wire_frames(t, opt.mtu).map_err(|e| format!("topic {}: {e}", t.topic))?);
    }
    let wire_ps = |f: &MessageFrames| -> u64 { f.l2.iter().map(|&b| bytes_to_ps(busy_bytes(b as u64), rate)).sum() };
    let control: Vec<usize> = (0..m.topics.len()).filter(|&i| frames[i].datagram_ends.len() <= 1).collect();
    let bulk: Vec<usize> = (0..m.topics.len()).filter(|&i| frames[i].datagram_ends.len() > 1).collect();
    let full_frame_ps = bytes_to_ps(busy_bytes(Framing { vlan: true, mtu: opt.mtu }.l2_bytes(opt.mtu)), rate);
    // Cycle: ≤ a tenth of the shortest control deadline, ≤ the maximum; whole µs.
    let min_ctrl_deadline_ns = control.iter().map(|&i| (m.topics[i].period_ms * 1e6) as u64).min();
    let mut cycle_ns = opt.max_cycle_ns;
    if let Some(d) = min_ctrl_deadline_ns {
        cycle_ns = cycle_ns.min(d / 10);
    }
    cycle_ns = (cycle_ns / 1000).max(1) * 1000;
    let cycle_ps = cycle_ns * 1000;
    let ctrl_ps: u64 = control.iter().map(|&i| wire_ps(&frames[i])).sum::<u64>() + full_frame_ps;
    let control_window_ns = if control.is_empty() { 0 } else { ctrl_ps.div_ceil(1_000_000) * 1000 };
    let mut problems = vec![];
    let bulk_util: f64 = bulk.iter().map(|&i| wire_ps(&frames[i]) as f64 / 1e12 * m.topics[i].rate_hz).sum();
    let control_util: f64 = control.iter().map(|&i| wire_ps(&frames[i]) as f64 / 1e12 * m.topics[i].rate_hz).sum();
    let mut need = bulk_util * opt.margin;
    for &i in &bulk {
        let dl_ps = (m.topics[i].period_ms * 1e9) as u64;
        let w = wire_ps(&frames[i]) as f64;
        if dl_ps <= cycle_ps {
            problems.push(format!("{}: its deadline ({:.3} ms) is not longer than the cycle", m.topics[i].topic, m.topics[i].period_ms));
            continue;
        }
        need = need.max(w / (dl_ps - cycle_ps) as f64 * opt.margin);
    }
    let avail_ns = cycle_ns.saturating_sub(control_window_ns);
    let mut bulk_window_ns = if bulk.is_empty() { 0 } else { ((need * cycle_ns as f64).ceil() as u64).div_ceil(1000) * 1000 };
    if !bulk.is_empty() {
        bulk_window_ns = bulk_window_ns.max(full_frame_ps.div_ceil(1_000_000) * 1000);
    }
    if bulk_window_ns > avail_ns {
        for &i in &bulk {
            let w = wire_ps(&frames[i]) as f64 / 1e9;
            let best = w / (avail_ns as f64 / cycle_ns as f64);
            if best + cycle_ns as f64 / 1e6 > m.topics[i].period_ms {
                problems.push(format!(
                    "{}: even the whole rest of the cycle ({:.1} %) needs ~{:.3} ms per sample at {} bit/s, over its {:.3} ms deadline",
                    m.topics[i].topic,
                    avail_ns as f64 / cycle_ns as f64 * 100.0,
                    best,
                    rate,
                    m.topics[i].period_ms
                ));
            }
        }
        bulk_window_ns = avail_ns;
    }
    if !bulk.is_empty() && bulk_window_ns == 0 {
        // the control window fills the cycle: TC1 still gets a window (a gate that never opens is
        // no plan), one full frame after it, and the cycle grows by as much
        bulk_window_ns = full_frame_ps.div_ceil(1_000_000) * 1000;
        cycle_ns = control_window_ns + bulk_window_ns;
        problems.push(format!(
            "the control topics' window ({control_window_ns} ns) fills the cycle their shortest deadline allows: the bulk topics get one frame's window after it, a cycle of {cycle_ns} ns"
        ));
    }
    let best_effort_window_ns = cycle_ns.saturating_sub(control_window_ns + bulk_window_ns);
    // The scenario file.
    let mut o = String::new();
    let _ = writeln!(o, "# Generated by `ddscope tsn plan` from {}", m.captures.join(", "));
    let _ = writeln!(o, "# Measured per topic: rate, bytes and frames per sample; deadline = publication period.");
    let _ = writeln!(o, "# TC2 (PCP 6): single-datagram topics; TC1 (PCP 5): fragmented samples; TC0: the rest.");
    let _ = writeln!(o, "name = \"plan\"\ndescription = \"TAS plan at {rate} bit/s, cycle {cycle_ns} ns\"");
    let _ = writeln!(o, "duration = \"{}ns\"\nseed = {}\nmtu = {}\nvlan = true\n", opt.duration_ns, opt.seed, opt.mtu);
    let _ = writeln!(o, "[[port]]\nname = {}\ninterface = {}\nlink_rate = \"{rate}bit\"", toml_str(&opt.port), toml_str(&opt.interface));
    let _ = writeln!(o, "num_tc = 3\npcp_to_tc = [0, 0, 0, 0, 0, 1, 2, 0]\n[port.gcl]\nbase_time = 0\nmode = \"full-offload\"\nentries = [");
    for (gates, d) in [("[2]", control_window_ns), ("[1]", bulk_window_ns), ("[0]", best_effort_window_ns)] {
        if d > 0 {
            let _ = writeln!(o, "  {{ gates = {gates}, duration = \"{d}ns\" }},");
        }
    }
    let _ = writeln!(o, "]\n");
    for (i, t) in m.topics.iter().enumerate() {
        let is_ctrl = control.contains(&i);
        let _ = writeln!(o, "[[topic]]\ntopic = {}\ntype_name = {}", toml_str(&t.topic), toml_str(&t.type_name));
        let _ = writeln!(o, "sample_bytes = {}\nrate_hz = {:.6}\npcp = {}", t.sample_bytes, t.rate_hz, if is_ctrl { 6 } else { 5 });
        if let Some(f) = t.fragment_bytes.filter(|_| !is_ctrl) {
            let _ = writeln!(o, "dds_fragment_bytes = {f}");
            let _ = writeln!(o, "max_message_bytes = {}", model_max_message(t));
        }
        let _ = writeln!(o, "deadline = \"{}ns\"\npath = [{}]\nsr_class = \"none\"\n", (t.period_ms * 1e6).round() as u64, toml_str(&opt.port));
    }
    let sc = Scenario::parse(&o, "plan.toml").map_err(|e| format!("the generated plan does not load: {e}"))?;
    let rep = scenario::try_simulate(&sc, opt.seed).map_err(|e| format!("the generated plan cannot be simulated: {e}"))?;
    let mut topics = vec![];
    for (i, t) in m.topics.iter().enumerate() {
        let f = &rep.flows[i];
        let ok = f.deadline_misses == 0 && f.lost == 0 && f.unfinished == 0 && f.delivered > 0;
        if !ok {
            problems.push(format!(
                "{}: predicted max {:.3} ms against its {:.3} ms deadline ({} of {} late, {} lost, {} unfinished)",
                t.topic, f.latency.max_ms, t.period_ms, f.deadline_misses, f.released, f.lost, f.unfinished
            ));
        }
        topics.push(PlannedTopic {
            topic: t.topic.clone(),
            class: if control.contains(&i) { "control" } else { "bulk" },
            pcp: f.pcp,
            traffic_class: f.traffic_class,
            rate_hz: t.rate_hz,
            sample_bytes: t.sample_bytes,
            frames_per_sample: t.frames_per_sample,
            wire_bytes_per_sample: f.wire_bytes_per_message,
            deadline_ms: f.deadline_ms,
            predicted_mean_ms: f.latency.mean_ms,
            predicted_max_ms: f.latency.max_ms,
            deadline_misses: f.deadline_misses,
            delivered: f.delivered,
            released: f.released,
            meets_deadline: ok,
        });
    }
    Ok(Plan {
        link_rate_bps: rate,
        cycle_ns,
        control_window_ns,
        bulk_window_ns,
        best_effort_window_ns,
        bulk_utilisation: bulk_util,
        control_utilisation: control_util,
        feasible: problems.is_empty(),
        problems,
        topics,
        scenario_toml: o,
        scenario: Some(sc),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(name: &str, bytes: u64, hz: f64, frag: Option<u64>, dgrams: u64) -> MeasuredTopic {
        MeasuredTopic {
            topic: name.into(),
            type_name: "t".into(),
            writer: "w".into(),
            capture: "pc1".into(),
            samples: 100,
            period_ms: 1e3 / hz,
            rate_hz: hz,
            sample_bytes: bytes,
            frames_per_sample: 1,
            datagrams_per_sample: dgrams,
            fragment_bytes: frag,
            max_message_bytes: 0,
            vlan: false,
        }
    }

    fn measured(topics: Vec<MeasuredTopic>) -> Measurement {
        Measurement { captures: vec!["x".into()], topics, skipped: Default::default() }
    }

    /// Oracle: hand derivation. /drive (40 B) is one 146-byte tagged frame:
    /// 8 + 146 + 12 = 166 B busy = 0.5312 us at 2.5G; a full 1522-byte frame
    /// busy 1542 B = 4.9344 us; the control window rounds their sum up to 6 us.
    /// The cycle is min(500 us, 34.48 ms / 10) = 500 us. At 100 Mbit/s the
    /// image (2.9 MB on the wire) cannot finish within 100 ms.
    #[test]
    fn windows_and_infeasibility() {
        let m = measured(vec![topic("/drive", 40, 29.0, None, 1), topic("/image", 2_764_852, 10.0, Some(1344), 206)]);
        let p = propose(&m, &PlanOptions { link_rate_bps: 2_500_000_000, duration_ns: 500_000_000, ..Default::default() }).unwrap();
        assert_eq!(p.cycle_ns, 500_000);
        assert_eq!(p.control_window_ns, 6_000);
        assert_eq!(p.control_window_ns + p.bulk_window_ns + p.best_effort_window_ns, p.cycle_ns);
        assert!(p.feasible, "{:?}", p.problems);
        assert!(p.topics.iter().all(|t| t.predicted_max_ms <= t.deadline_ms));
        // The scenario keeps Cyclone's 10 fragments per datagram: 206 datagrams.
        let sc = p.scenario.as_ref().unwrap();
        assert_eq!(sc.flows[1].frames.datagram_ends.len(), 206);
        let slow = propose(&m, &PlanOptions { link_rate_bps: 100_000_000, duration_ns: 500_000_000, ..Default::default() }).unwrap();
        assert!(!slow.feasible);
        assert!(slow.problems.iter().any(|l| l.starts_with("/image:")), "{:?}", slow.problems);
        assert!(!slow.problems.iter().any(|l| l.starts_with("/drive:")), "{:?}", slow.problems);
    }

    /// A control topic with a 50 µs period sets a 5 µs cycle, which its own frame and one full
    /// frame (6 µs) already fill: the bulk topic still gets a window (a gate that never opens made
    /// the generated plan unloadable, an internal error), the cycle grows by it, and the plan says
    /// so and is infeasible.
    #[test]
    fn a_control_window_that_fills_the_cycle_leaves_the_bulk_a_window_and_says_so() {
        let m = measured(vec![topic("/fast", 40, 20_000.0, None, 1), topic("/image", 2_764_852, 10.0, Some(1344), 206)]);
        let p = propose(&m, &PlanOptions { link_rate_bps: 2_500_000_000, duration_ns: 50_000_000, ..Default::default() }).unwrap();
        assert_eq!(p.control_window_ns, 6_000);
        assert_eq!(p.bulk_window_ns, 5_000);
        assert_eq!(p.cycle_ns, 11_000);
        assert!(!p.feasible);
        assert!(p.problems.iter().any(|l| l.starts_with("the control topics' window (6000 ns) fills the cycle")), "{:?}", p.problems);
    }
}
