//! `tsn check`: what the wire shows against a TSN configuration.
//!
//! Three checks, each from the captures alone, with ddscope's own decoder
//! and latency correlator (`ddscope-core`):
//!
//! - **PCP**: every frame carrying a sample of a configured topic (its DATA
//!   and DATA_FRAG submessages, every IP fragment of their datagrams) carries
//!   the topic's PCP in an 802.1Q tag, at every capture point.
//! - **Gates**: at the capture of a port with a gate control list (the
//!   capture named like the port or its interface: the sender's egress), a
//!   frame of a topic must start and end inside an open window of its traffic
//!   class. Capture time + the clock offset = the schedule's clock (CLOCK_TAI
//!   for taprio); the base time comes from the configuration.
//! - **SR classes**: per class (Bosk et al. Table 1) the measured DDS message
//!   latency from sender to each receiver and the jitter, the difference in
//!   latency between two subsequent samples of a flow (Bosk et al. Section II),
//!   against the class's bounds. Bosk et al. states the bounds "over 7 network
//!   hops" and judges each measured path of 1 to 7 hops end to end against the
//!   unscaled bounds (Section VII, Tables 9 and 10); so does this check. A
//!   path of more than 7 hops is outside what Table 1 bounds and is noted. A
//!   sample that never arrived fails the latency bound.

use crate::scenario::{FlowKind, Scenario};
use crate::sr::{SrClass, TABLE1_HOPS};
use ddscope_core::events::{SubmsgEvent, TrafficType};
use ddscope_core::latency::files::CaptureInput;
use ddscope_core::latency::{Level, LatencyRow, Status};
use ddscope_core::pipeline::{run_file, Analysis, Datagram};
use ddscope_core::session::{self, LatencyOptions, SessionError};
use ddscope_core::source::Packet;
use ddscope_wire::link::LinkType;
use ddscope_wire::rtps::SubmsgKind;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Fragments checked per datagram (a 64 KiB datagram at MTU 1500 has 45):
/// those the decoder lists with each datagram; more are counted in a note.
pub const MAX_FRAGMENTS_PER_DATAGRAM: usize = ddscope_core::ipfrag::MAX_LISTED_FRAGMENTS;
/// Frames listed per violation kind in the report (all are counted).
pub const MAX_EXAMPLES: usize = 5;

/// Which statistic is judged against the class bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Judge {
    /// Table 1's "Max Latency" / "Max Jitter": every sample.
    Max,
    /// The 99th percentile, as Bosk et al.'s measurement tables report.
    P99,
}

#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// Added to capture timestamps to get the gate schedule's clock (ns).
    pub clock_offset_ns: i64,
    /// A frame may leave this much before its window opens or after it closes.
    pub gate_tolerance_ns: u64,
    pub judge: Judge,
    /// Offsets between capture clocks, caps, decoder settings.
    pub latency: LatencyOptions,
}

/// One topic at one capture point: its frames and their PCPs.
#[derive(Debug, Clone, Serialize)]
pub struct PcpRow {
    pub capture: String,
    pub topic: String,
    pub expected_pcp: u8,
    pub frames: u64,
    pub correct: u64,
    pub untagged: u64,
    /// Of the untagged or wrongly tagged frames, those sent to a unicast
    /// address: a mapping by multicast address (one network partition per
    /// PCP) does not reach a writer's repairs to one reader, nor unicast readers.
    pub violations_to_unicast: u64,
    /// Frames per wrong PCP value.
    pub wrong: BTreeMap<u8, u64>,
    /// Frame numbers of the first violations.
    pub examples: Vec<u64>,
}

impl PcpRow {
    pub fn ok(&self) -> bool {
        self.frames > 0 && self.correct == self.frames
    }
}

/// One topic at the capture of one gated port.
#[derive(Debug, Clone, Serialize)]
pub struct GateRow {
    pub capture: String,
    pub port: String,
    pub topic: String,
    pub traffic_class: usize,
    pub frames: u64,
    pub outside: u64,
    pub examples: Vec<u64>,
}

/// One SR class's measurement and verdict.
#[derive(Debug, Clone, Serialize)]
pub struct ClassRow {
    pub class: SrClass,
    pub pcp: u8,
    pub topics: Vec<String>,
    pub max_hops: u32,
    pub samples: u64,
    pub lost: u64,
    pub max_latency_ns: Option<i64>,
    pub p99_latency_ns: Option<i64>,
    pub max_jitter_ns: Option<i64>,
    pub p99_jitter_ns: Option<i64>,
    pub latency_bound_ns: Option<u64>,
    pub jitter_bound_ns: Option<u64>,
    /// "pass", "fail", "n/a" (no bound) or "not measured".
    pub verdict: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub configuration: String,
    pub judge: Judge,
    pub clock_offset_ns: i64,
    pub pcp: Vec<PcpRow>,
    pub gates: Vec<GateRow>,
    pub classes: Vec<ClassRow>,
    /// What the user should know: checks that could not run, evictions, skipped input.
    pub notes: Vec<String>,
}

impl CheckReport {
    pub fn ok(&self) -> bool {
        self.pcp.iter().all(|r| r.ok()) && self.gates.iter().all(|g| g.outside == 0) && self.classes.iter().all(|c| c.verdict != "fail")
    }

    /// The verdict lines: one per topic and capture for PCP, per gated port
    /// and topic, and one per SR class.
    pub fn lines(&self) -> Vec<String> {
        let mut o = vec![];
        for r in &self.pcp {
            let mut bad = vec![];
            if r.untagged > 0 {
                bad.push(format!("{} untagged", r.untagged));
            }
            for (p, n) in &r.wrong {
                bad.push(format!("{n} with PCP {p}"));
            }
            if r.violations_to_unicast > 0 {
                let all = r.untagged + r.wrong.values().sum::<u64>();
                bad.push(if r.violations_to_unicast == all {
                    "all to unicast addresses".to_string()
                } else {
                    format!("{} of them to unicast addresses", r.violations_to_unicast)
                });
            }
            let detail = if r.frames == 0 {
                "no frames of the topic in this capture".to_string()
            } else if bad.is_empty() {
                format!("{} of {} frames", r.correct, r.frames)
            } else {
                format!("{} of {} frames; {} (frames {})", r.correct, r.frames, bad.join(", "), list(&r.examples))
            };
            o.push(format!("pcp {} {}: PCP {}: {detail}: {}", r.capture, r.topic, r.expected_pcp, if r.ok() { "PASS" } else { "FAIL" }));
        }
        for g in &self.gates {
            let detail = if g.outside == 0 {
                format!("all {} frames inside TC {}'s windows", g.frames, g.traffic_class)
            } else {
                format!("{} of {} frames outside TC {}'s windows (frames {})", g.outside, g.frames, g.traffic_class, list(&g.examples))
            };
            o.push(format!("gate {} (port {}) {}: {detail}: {}", g.capture, g.port, g.topic, if g.outside == 0 { "PASS" } else { "FAIL" }));
        }
        let ms = |n: Option<i64>| n.map(|v| format!("{:.3} ms", v as f64 / 1e6)).unwrap_or_else(|| "-".into());
        let us = |n: Option<i64>| n.map(|v| format!("{:.1} us", v as f64 / 1e3)).unwrap_or_else(|| "-".into());
        for c in &self.classes {
            let (lat, jit) = match self.judge {
                Judge::Max => (c.max_latency_ns, c.max_jitter_ns),
                Judge::P99 => (c.p99_latency_ns, c.p99_jitter_ns),
            };
            let what = match self.judge {
                Judge::Max => "max",
                Judge::P99 => "p99",
            };
            let bounds = match (c.latency_bound_ns, c.jitter_bound_ns) {
                (Some(l), Some(j)) => format!(" (bounds {} ms, {} us over <= {TABLE1_HOPS} hops)", l as f64 / 1e6, j as f64 / 1e3),
                _ => " (no bounds)".to_string(),
            };
            o.push(format!(
                "class {} (PCP {}, {}): {} samples, {} lost, {what} latency {}, {what} jitter {}{bounds}, longest path {} hops: {}",
                c.class.name(),
                c.pcp,
                c.topics.join(" "),
                c.samples,
                c.lost,
                ms(lat),
                us(jit),
                c.max_hops,
                c.verdict.to_uppercase()
            ));
        }
        o
    }
}

fn list(v: &[u64]) -> String {
    v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
}

/// A topic of the configuration as the check needs it.
#[derive(Debug, Clone)]
struct TopicCfg {
    name: String,
    pcp: u8,
    /// (port name, port interface, traffic class, link rate bit/s, gcl index) of gated ports on the path.
    gated: Vec<(String, String, usize, u64, usize)>,
    class: Option<SrClass>,
    hops: u32,
}

fn topics_of(sc: &Scenario) -> Vec<TopicCfg> {
    let mut out = vec![];
    for f in &sc.flows {
        let FlowKind::Topic(t) = &f.kind else { continue };
        let gated = f
            .path
            .iter()
            .filter_map(|&i| {
                let p = &sc.ports[i];
                p.gcl.as_ref().map(|_| (p.name.clone(), p.interface.clone(), p.pcp_to_tc[f.pcp as usize & 7] as usize, p.rate.0, i))
            })
            .collect();
        out.push(TopicCfg { name: t.topic.clone(), pcp: f.pcp, gated, class: f.sr_class, hops: f.path.len() as u32 });
    }
    out
}

/// One frame of an IP datagram as the capture saw it.
#[derive(Debug, Clone, Copy)]
struct FrameSeen {
    frame: u64,
    ts_ns: i64,
    wire_bytes: u32,
    /// None: untagged.
    pcp: Option<u8>,
}

/// The per-capture pass: datagrams (for the tags of their frames) and
/// events (for their topics).
struct WirePass<'a> {
    capture: String,
    topics: &'a [TopicCfg],
    sc: &'a Scenario,
    opts: &'a CheckOptions,
    /// The frame that completed the last IPv4 datagram (its events carry it;
    /// 0: none), its Ethernet frames, and its fragments not listed.
    datagram_frame: u64,
    frames: Vec<FrameSeen>,
    unlisted: u64,
    /// Fragments of the topics' datagrams beyond the listed ones: not checked.
    fragments_dropped: u64,
    /// The frame being decoded: for submessages that come in no UDP datagram
    /// (Zenoh over TCP), checked as their own frame.
    segment: FrameSeen,
    segment_on_ethernet: bool,
    last_counted: u64,
    pcp: BTreeMap<String, PcpRow>,
    gates: BTreeMap<(String, String), GateRow>,
}

impl Analysis for WirePass<'_> {
    fn frame(&mut self, p: &Packet<'_>) {
        // Its PCP comes with its submessages (from the decoder's parse); no parsing here.
        self.segment = FrameSeen { frame: p.frame, ts_ns: p.ts_ns, wire_bytes: p.orig_len, pcp: None };
        self.segment_on_ethernet = p.link == LinkType::Ethernet;
    }

    fn datagram(&mut self, d: &Datagram<'_>) {
        self.frames.clear();
        // IPv4 only; of its frames, the Ethernet ones (linktype 1: the PCP is in the frame).
        self.datagram_frame = if d.src.is_ipv4() { d.frame } else { 0 };
        if self.datagram_frame == 0 {
            return;
        }
        let seen = d.frames.iter().filter(|f| f.link == LinkType::Ethernet);
        self.frames.extend(seen.map(|f| FrameSeen { frame: f.frame, ts_ns: f.ts_ns, wire_bytes: f.wire_len, pcp: f.vlan.map(|v| v.pcp) }));
        self.unlisted = (d.fragments as u64).saturating_sub(d.frames.len() as u64);
    }

    fn wants_datagrams(&self) -> bool {
        true
    }

    fn event(&mut self, e: &SubmsgEvent) {
        if e.traffic_type != TrafficType::User || !matches!(e.kind, SubmsgKind::Data | SubmsgKind::DataFrag) {
            return;
        }
        let Some(names) = &e.topic else { return };
        let Some(t) = self.topics.iter().find(|t| t.name == names.topic_name || t.name == names.topic_raw) else { return };
        if self.last_counted == e.frame {
            return; // another submessage of a datagram already counted
        }
        self.last_counted = e.frame;
        let segment;
        let frames: &[FrameSeen] = if self.datagram_frame == e.frame {
            // The datagram the decoder handed over just before its submessages.
            self.fragments_dropped += self.unlisted;
            &self.frames
        } else if self.segment.frame == e.frame && self.segment_on_ethernet && e.src.is_ipv4() && e.ip_frags == 1 {
            // No datagram (a TCP segment): the frame itself, with the PCP of its tag.
            segment = [FrameSeen { pcp: e.pcp, ..self.segment }];
            &segment
        } else {
            return;
        };
        if frames.is_empty() {
            return;
        }
        let row = self.pcp.entry(t.name.clone()).or_insert_with(|| PcpRow {
            capture: self.capture.clone(),
            topic: t.name.clone(),
            expected_pcp: t.pcp,
            frames: 0,
            correct: 0,
            untagged: 0,
            violations_to_unicast: 0,
            wrong: BTreeMap::new(),
            examples: vec![],
        });
        let to_unicast = match e.dst {
            std::net::SocketAddr::V4(a) => !a.ip().is_multicast(),
            std::net::SocketAddr::V6(a) => !a.ip().is_multicast(),
        };
        for f in frames {
            row.frames += 1;
            match f.pcp {
                Some(p) if p == t.pcp => row.correct += 1,
                other => {
                    match other {
                        None => row.untagged += 1,
                        Some(p) => *row.wrong.entry(p).or_default() += 1,
                    }
                    row.violations_to_unicast += to_unicast as u64;
                    if row.examples.len() < MAX_EXAMPLES {
                        row.examples.push(f.frame);
                    }
                }
            }
        }
        for (pname, iface, tc, rate, port_idx) in &t.gated {
            if &self.capture != pname && &self.capture != iface {
                continue;
            }
            let Some(g) = self.sc.ports[*port_idx].gcl.as_ref() else { continue };
            let row = self.gates.entry((pname.clone(), t.name.clone())).or_insert_with(|| GateRow {
                capture: self.capture.clone(),
                port: pname.clone(),
                topic: t.name.clone(),
                traffic_class: *tc,
                frames: 0,
                outside: 0,
                examples: vec![],
            });
            for f in frames {
                row.frames += 1;
                // on the wire: the frame (with FCS), preamble and inter-frame gap
                let tx_ps = (f.wire_bytes as u64 + 4 + 20) * 8 * 1_000_000_000_000 / (*rate).max(1);
                if !inside(g, *tc, f.ts_ns, tx_ps, self.opts) {
                    row.outside += 1;
                    if row.examples.len() < MAX_EXAMPLES {
                        row.examples.push(f.frame);
                    }
                }
            }
        }
    }
}

/// True when a frame captured at `ts_ns` (start of transmission) and
/// lasting `tx_ps` lies inside an open window of `tc`, within the tolerance.
fn inside(g: &crate::scenario::GclSpec, tc: usize, ts_ns: i64, tx_ps: u64, o: &CheckOptions) -> bool {
    let sched_ns = ts_ns.saturating_add(o.clock_offset_ns);
    if sched_ns < 0 {
        return false;
    }
    let tol_ps = o.gate_tolerance_ns.saturating_mul(1000);
    let t_ps = (sched_ns as u64).saturating_mul(1000);
    // the window of `tc` open at the start (allowed to open up to `tol` late) must
    // stay open until the frame has left (allowed to close up to `tol` early)
    let end = g.gcl.window_end(tc, t_ps).or_else(|| g.gcl.window_end(tc, t_ps.saturating_add(tol_ps)));
    match end {
        Some(end) => end.saturating_add(tol_ps) >= t_ps.saturating_add(tx_ps),
        None => false,
    }
}

/// Runs the three checks of `sc` over `captures` (a run's captures; ground
/// truth files are not needed). `on_note` hears notes as they happen.
pub fn check(sc: &Scenario, captures: Vec<CaptureInput>, truth: &[PathBuf], o: &CheckOptions) -> Result<CheckReport, SessionError> {
    let topics = topics_of(sc);
    let mut notes = vec![];
    let mut pcp = vec![];
    let mut gates = vec![];
    for c in &captures {
        let mut pass = WirePass {
            capture: c.name.clone(),
            topics: &topics,
            sc,
            opts: o,
            datagram_frame: 0,
            frames: Vec::new(),
            unlisted: 0,
            fragments_dropped: 0,
            segment: FrameSeen { frame: 0, ts_ns: 0, wire_bytes: 0, pcp: None },
            segment_on_ethernet: false,
            last_counted: 0,
            pcp: BTreeMap::new(),
            gates: BTreeMap::new(),
        };
        let res = run_file(&c.path, &c.name, o.latency.decoder, None, None, &mut pass)?;
        // IP datagrams the decoder could not complete (evicted, timed out, …) are in its summary line below.
        if pass.fragments_dropped > 0 {
            notes.push(format!("{}: {} fragments beyond {MAX_FRAGMENTS_PER_DATAGRAM} per datagram not checked", c.name, pass.fragments_dropped));
        }
        let skipped = res.decoder.stats.skipped_total();
        if skipped > 0 {
            notes.push(format!("{}: {}", c.name, res.decoder.stats.summary_line()));
        }
        for t in &topics {
            let row = pass.pcp.remove(&t.name).unwrap_or_else(|| PcpRow {
                capture: c.name.clone(),
                topic: t.name.clone(),
                expected_pcp: t.pcp,
                frames: 0,
                correct: 0,
                untagged: 0,
                violations_to_unicast: 0,
                wrong: BTreeMap::new(),
                examples: vec![],
            });
            pcp.push(row);
        }
        gates.extend(pass.gates.into_values());
    }
    for t in &topics {
        for (pname, iface, ..) in &t.gated {
            if !captures.iter().any(|c| &c.name == pname || &c.name == iface) {
                notes.push(format!("{}: port {pname} has a gate control list but no capture is named {pname} or {iface}: its gates were not checked", t.name));
            }
        }
    }

    // SR classes: the DDS message latency of every sample, sender to each receiver.
    let mut classes: Vec<(SrClass, Vec<&TopicCfg>)> = vec![];
    for t in &topics {
        if let Some(c) = t.class {
            match classes.iter_mut().find(|x| x.0 == c) {
                Some(x) => x.1.push(t),
                None => classes.push((c, vec![t])),
            }
        }
    }
    classes.sort_by_key(|x| x.0.name());
    // (topic, writer, receiver) -> [(sn, latency or None when lost)]
    let mut flows: BTreeMap<(String, String, String), Vec<(i64, Option<i64>)>> = BTreeMap::new();
    if !classes.is_empty() && captures.len() >= 2 {
        let mut lo = o.latency.clone();
        lo.message_rows = true;
        lo.submessage_rows = false;
        let mut on_note = |n: String| notes.push(n);
        let mut on_row = |r: LatencyRow| {
            if r.level != Level::Message {
                return;
            }
            let Some(names) = &r.topic else { return };
            let Some(t) = topics.iter().find(|t| t.name == names.topic_name || t.name == names.topic_raw) else { return };
            if t.class.is_none() {
                return;
            }
            let lat = match r.status {
                Status::Delivered => r.latency_ns,
                Status::Lost | Status::Incomplete => None,
                Status::SameHost | Status::Traced => return,
            };
            flows.entry((t.name.clone(), r.writer_id.to_string(), r.receiver.to_string())).or_default().push((r.sn, lat));
        };
        session::run_latency(captures.clone(), truth, &lo, &[], &mut on_note, &mut on_row)?;
    } else if !classes.is_empty() {
        notes.push("SR classes not measured: latency needs a capture at the sender and one per receiver".into());
    }
    let mut class_rows = vec![];
    for (class, ts) in classes {
        let mut lat = vec![];
        let mut jit = vec![];
        let mut lost = 0u64;
        let mut samples = 0u64;
        for ((topic, _, _), v) in flows.iter_mut() {
            if !ts.iter().any(|t| &t.name == topic) {
                continue;
            }
            v.sort_by_key(|x| x.0);
            let mut prev: Option<(i64, i64)> = None;
            for &(sn, l) in v.iter() {
                samples += 1;
                match l {
                    Some(l) => {
                        lat.push(l);
                        // jitter: subsequent samples only (a lost one in between breaks the pair)
                        if let Some((psn, pl)) = prev {
                            if sn == psn + 1 {
                                jit.push((l - pl).abs());
                            }
                        }
                        prev = Some((sn, l));
                    }
                    None => {
                        lost += 1;
                        prev = None;
                    }
                }
            }
        }
        lat.sort_unstable();
        jit.sort_unstable();
        let p99 = |v: &[i64]| if v.is_empty() { None } else { Some(v[((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1]) };
        let bounds = class.bounds_ns();
        let max_hops = ts.iter().map(|t| t.hops).max().unwrap_or(0);
        let (l_j, j_j) = match o.judge {
            Judge::Max => (lat.last().copied(), jit.last().copied()),
            Judge::P99 => (p99(&lat), p99(&jit)),
        };
        let verdict = match bounds {
            None => "n/a",
            Some(_) if samples == 0 => "not measured",
            Some((lb, jb)) => {
                let lat_ok = lost == 0 && l_j.map(|x| x as u64 <= lb).unwrap_or(false);
                let jit_ok = j_j.map(|x| x as u64 <= jb).unwrap_or(true);
                if lat_ok && jit_ok {
                    "pass"
                } else {
                    "fail"
                }
            }
        };
        if max_hops > TABLE1_HOPS {
            notes.push(format!("class {}: a path of {max_hops} hops is longer than the {TABLE1_HOPS} hops Table 1 bounds", class.name()));
        }
        if bounds.is_some() && samples == 0 && captures.len() >= 2 {
            notes.push(format!("class {}: no sample of {} was seen at a sender and a receiver", class.name(), ts.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ")));
        }
        class_rows.push(ClassRow {
            class,
            pcp: ts.first().map(|t| t.pcp).unwrap_or(class.pcp()),
            topics: ts.iter().map(|t| t.name.clone()).collect(),
            max_hops,
            samples,
            lost,
            max_latency_ns: lat.last().copied(),
            p99_latency_ns: p99(&lat),
            max_jitter_ns: jit.last().copied(),
            p99_jitter_ns: p99(&jit),
            latency_bound_ns: bounds.map(|b| b.0),
            jitter_bound_ns: bounds.map(|b| b.1),
            verdict,
        });
    }
    Ok(CheckReport { configuration: sc.file.clone(), judge: o.judge, clock_offset_ns: o.clock_offset_ns, pcp, gates, classes: class_rows, notes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> CheckOptions {
        CheckOptions { clock_offset_ns: 0, gate_tolerance_ns: 0, judge: Judge::Max, latency: LatencyOptions::default() }
    }

    #[test]
    fn gate_windows() {
        // thesis TAS-50%-500us: TC1 open [0, 250 us) of every 500 us
        let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/tsn/thesis-tas50-40.toml");
        let sc = Scenario::load(std::path::Path::new(p)).unwrap();
        let g = sc.ports[0].gcl.as_ref().unwrap();
        let tx = 12_304 * 400; // 1538 bytes at 2.5 Gbit/s: 4.92 us
        assert!(inside(g, 1, 1_000_000_000 + 10_000, tx, &opts()));
        assert!(!inside(g, 1, 1_000_000_000 + 300_000, tx, &opts()));
        // starts 2 us before the window closes: does not fit
        assert!(!inside(g, 1, 1_000_000_000 + 248_000, tx, &opts()));
        // ... unless the tolerance allows 3 us
        assert!(inside(g, 1, 1_000_000_000 + 248_000, tx, &CheckOptions { gate_tolerance_ns: 3_000, ..opts() }));
        // the clock offset moves the frame into the window
        assert!(inside(g, 1, 1_000_000_000 + 300_000, tx, &CheckOptions { clock_offset_ns: 250_000, ..opts() }));
        // starts 2 us before the window opens: outside, unless the tolerance allows 3 us
        assert!(!inside(g, 1, 1_000_000_000 + 498_000, tx, &opts()));
        assert!(inside(g, 1, 1_000_000_000 + 498_000, tx, &CheckOptions { gate_tolerance_ns: 3_000, ..opts() }));
    }
}
