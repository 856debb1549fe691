//! `ddscope tsn tas`: the thesis formula next to a frame-level prediction.
//!
//! The prediction walks the message's frames through one port whose gate
//! control list opens the DDS class for `open × cycle` at the start of each
//! cycle and the other class for the rest (thesis Fig. 2.2). Each frame
//! starts as early as the link is free *and* its gate stays open until its
//! last bit has left. The message is released at every gate phase in turn
//! (the sample rate is not locked to the cycle), giving the mean, best and
//! worst case over phase. The link is otherwise idle: interference in other
//! classes cannot delay a frame whose window is exclusive.

use crate::formula::{self, ThesisFormula};
use crate::frame::{bytes_to_ps, busy_bytes, tx_bytes, Framing, MessageFrames, RtpsOptions, WireBreakdown};
use crate::sim::HostTiming;
use crate::gcl::{GateEntry, Gcl};
use serde::Serialize;

#[derive(Debug, Clone)]
pub struct TasInput {
    pub rate_bps: u64,
    pub cycle_ns: u64,
    pub open: f64,
    pub message_bytes: u64,
    pub framing: Framing,
    pub rtps: RtpsOptions,
    pub phases: u32,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Walk {
    pub latency_ms: f64,
    /// Gate windows in which at least one frame of the message was sent.
    pub windows_used: u64,
    /// Open time left unused at the end of each window but the last,
    /// because the next frame would not have finished before the gate closed.
    pub guard_band_lost_ms: f64,
    /// Time from release to the first frame's start (gate closed or too little left).
    pub initial_wait_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TasReport {
    pub link_rate_bps: u64,
    pub cycle_ns: u64,
    pub open_fraction: f64,
    pub message_bytes: u64,
    pub mtu: u64,
    pub vlan: bool,
    pub dds_fragment_bytes: u64,
    pub formula: ThesisFormula,
    /// Thesis Eq. 3.4 with X = message_bytes.
    pub formula_ms: f64,
    /// Mean over gate phase of the frame-level latency (first frame handed to the NIC → last bit received).
    pub predicted_mean_ms: f64,
    pub predicted_min_ms: f64,
    pub predicted_max_ms: f64,
    pub phases: u32,
    pub mean_windows_used: f64,
    pub mean_guard_band_lost_ms: f64,
    /// Released exactly when the window opens, and at the worst phase.
    pub at_window_open: Walk,
    pub worst_phase: Walk,
    pub worst_phase_ns: u64,
    /// The whole message back to back at full link rate (no gates).
    pub serialisation_ms: f64,
    pub wire: WireBreakdown,
}

pub fn gcl_for(cycle_ps: u64, open: f64) -> Result<Gcl, String> {
    if !(open > 0.0 && open <= 1.0) {
        return Err(format!("open share {open} must be in (0, 1]"));
    }
    let open_ps = (cycle_ps as f64 * open).round() as u64;
    let mut entries = vec![GateEntry { mask: 0b10, duration_ps: open_ps }];
    if open_ps < cycle_ps {
        entries.push(GateEntry { mask: 0b01, duration_ps: cycle_ps - open_ps });
    }
    Gcl::new(entries, 0, 2)
}

/// Walks the frames (MAC bytes each) from `start_ps` through class `tc` of `gcl`.
pub fn walk(gcl: &Gcl, tc: usize, frames: &[u32], rate: u64, start_ps: u64) -> Result<Walk, String> {
    let mut t = start_ps;
    let mut window: Option<u64> = None;
    let mut windows = 0;
    let mut guard = 0u64;
    let mut last_busy_end = start_ps;
    let mut last_rx = start_ps;
    let mut initial_wait = 0;
    for (i, &l2) in frames.iter().enumerate() {
        let need = bytes_to_ps(tx_bytes(l2 as u64), rate);
        let busy = bytes_to_ps(busy_bytes(l2 as u64), rate);
        let s = gcl
            .next_fit(tc, t, need)
            .ok_or_else(|| format!("a {l2}-byte frame does not fit the {:.3} us window", gcl.longest_open(tc) as f64 / 1e6))?;
        let we = gcl.window_end(tc, s).expect("open at a fitting start");
        if window != Some(we) {
            if let Some(prev) = window {
                guard += prev.saturating_sub(last_busy_end);
            }
            windows += 1;
            window = Some(we);
        }
        if i == 0 {
            initial_wait = s - start_ps;
        }
        last_rx = s + need;
        last_busy_end = s + busy;
        t = s + busy;
    }
    Ok(Walk {
        latency_ms: (last_rx - start_ps) as f64 / 1e9,
        windows_used: windows,
        guard_band_lost_ms: guard as f64 / 1e9,
        initial_wait_ms: initial_wait as f64 / 1e9,
    })
}

/// Frame steps (phases × frames of the message) one prediction may walk.
pub const MAX_WALK_FRAMES: u128 = 100_000_000;

pub fn predict(inp: &TasInput) -> Result<TasReport, String> {
    inp.framing.validate()?;
    if inp.rate_bps == 0 || inp.cycle_ns == 0 {
        return Err("link rate and cycle must be positive".into());
    }
    if inp.message_bytes == 0 {
        return Err("message size must be positive".into());
    }
    let msg = MessageFrames::dds_sample(&inp.framing, &inp.rtps, inp.message_bytes)?;
    // Each phase walks every frame: bounded work, refused before it starts.
    let work = inp.phases.max(1) as u128 * msg.l2.len() as u128;
    if work > MAX_WALK_FRAMES {
        return Err(format!(
            "{} phases × {} frames = {work} frame steps, over the limit of {MAX_WALK_FRAMES}: use fewer phases or a smaller message",
            inp.phases.max(1),
            msg.l2.len()
        ));
    }
    let formula = formula::t_arrive(inp.rate_bps, inp.open, inp.cycle_ns, inp.message_bytes)?;
    let cycle_ps = inp.cycle_ns * 1000;
    let gcl = gcl_for(cycle_ps, inp.open)?;
    let phases = inp.phases.max(1);
    let mut sum = 0.0;
    let mut sum_w = 0.0;
    let mut sum_g = 0.0;
    let mut min = f64::MAX;
    let mut worst: Option<(Walk, u64)> = None;
    let base = 1_000 * cycle_ps; // well after time zero
    for k in 0..phases {
        let ph = cycle_ps * k as u64 / phases as u64;
        let w = walk(&gcl, 1, &msg.l2, inp.rate_bps, base + ph)?;
        sum += w.latency_ms;
        sum_w += w.windows_used as f64;
        sum_g += w.guard_band_lost_ms;
        min = min.min(w.latency_ms);
        if worst.as_ref().map_or(true, |(b, _)| w.latency_ms > b.latency_ms) {
            worst = Some((w, ph));
        }
    }
    let (worst, worst_ph) = worst.expect("at least one phase");
    let at_open = walk(&gcl, 1, &msg.l2, inp.rate_bps, base)?;
    let serial: u64 = msg.l2.iter().map(|&b| bytes_to_ps(busy_bytes(b as u64), inp.rate_bps)).sum::<u64>()
        - bytes_to_ps(crate::frame::IFG, inp.rate_bps);
    Ok(TasReport {
        link_rate_bps: inp.rate_bps,
        cycle_ns: inp.cycle_ns,
        open_fraction: inp.open,
        message_bytes: inp.message_bytes,
        mtu: inp.framing.mtu,
        vlan: inp.framing.vlan,
        dds_fragment_bytes: inp.rtps.fragment_bytes.unwrap_or(crate::frame::CYCLONE_FRAGMENT),
        formula_ms: formula.t_arrive_ms,
        formula,
        predicted_mean_ms: sum / phases as f64,
        predicted_min_ms: min,
        predicted_max_ms: worst.latency_ms,
        phases,
        mean_windows_used: sum_w / phases as f64,
        mean_guard_band_lost_ms: sum_g / phases as f64,
        at_window_open: at_open,
        worst_phase: worst,
        worst_phase_ns: worst_ph / 1000,
        serialisation_ms: serial as f64 / 1e9,
        wire: msg.breakdown,
    })
}

/// Latency over gate phase of one message with host times: release (the
/// write call) → the reader has it. The message is released at `phases`
/// evenly spread gate phases into one port whose gates open the DDS class for
/// `open × cycle` per cycle (`open` = 1: no gate); the writer hands its
/// datagrams at its calibrated pace while its socket buffer has room.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HostPrediction {
    pub mean_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub phases: u32,
}

pub fn predict_with_host(
    rate_bps: u64,
    cycle_ns: u64,
    open: f64,
    frames: &MessageFrames,
    host: HostTiming,
    socket_buffer: u64,
    phases: u32,
    shaper_burst: Option<u64>,
) -> Result<HostPrediction, String> {
    use crate::sim::*;
    let cycle_ps = cycle_ns * 1000;
    let gcl = if open >= 1.0 { None } else { Some(gcl_for(cycle_ps, open)?) };
    if let Some(g) = &gcl {
        let longest = frames.l2.iter().map(|&b| bytes_to_ps(tx_bytes(b as u64), rate_bps)).max().unwrap_or(0);
        if g.longest_open(1) < longest {
            return Err(format!("a frame needs {:.3} us, longer than the {:.3} us window", longest as f64 / 1e6, g.longest_open(1) as f64 / 1e6));
        }
    }
    let phases = phases.max(1);
    let base = 1_000 * cycle_ps;
    let (mut sum, mut min, mut max) = (0.0, f64::MAX, 0.0f64);
    for k in 0..phases {
        let offset = base + cycle_ps * k as u64 / phases as u64;
        let port = PortSpec {
            name: "p".into(),
            rate_bps,
            propagation_ps: 0,
            processing_ps: 0,
            num_tc: 2,
            pcp_to_tc: [0, 0, 0, 0, 0, 1, 0, 0],
            queue_limit: usize::MAX,
            priority_order: vec![1, 0],
            gcl: gcl.clone(),
            cbs: vec![None, None],
            shaper_burst,
        };
        let src = SourceSpec {
            group: 0,
            path: vec![0],
            pcp: 5,
            period_ps: u64::MAX / 4,
            offset_ps: offset,
            msgs_per_release: 1,
            frames: frames.clone(),
            socket_buffer,
            host,
        };
        let r = run(&SimInput { ports: vec![port], sources: vec![src], groups: 1, duration_ps: offset + 1, drain_ps: 3_600_000_000_000_000 });
        let l = *r.groups[0].latencies_ps.first().ok_or("the simulated message was not delivered")? as f64 / 1e9;
        sum += l;
        min = min.min(l);
        max = max.max(l);
    }
    Ok(HostPrediction { mean_ms: sum / phases as f64, min_ms: min, max_ms: max, phases })
}

/// One row of thesis Table 4.6's kind, predicted three ways.
#[derive(Debug, Clone, Serialize)]
pub struct CalibratedRow {
    pub configuration: String,
    pub cycle_ns: u64,
    pub open_fraction: f64,
    /// Eq. 3.4 with X = the run's sample.
    pub formula_ms: f64,
    /// The frame model in the layout given by the flags (the uncalibrated `tsn tas`).
    pub uncalibrated_mean_ms: f64,
    /// The frame model in the run's layout, ideal host.
    pub run_layout_mean_ms: f64,
    /// DDS layer (thesis 3.2.5: first frame at the sender → last frame at
    /// the receiver): the run's layout plus the fitted writer pacing and socket buffer.
    pub calibrated: HostPrediction,
    /// Write call → take: also the fitted stack time before the first frame and receiver completion.
    pub calibrated_write_to_take: HostPrediction,
}

/// Thesis Table 4.6's configurations: (name, cycle ns, open share).
pub const TABLE_4_6: [(&str, u64, f64); 8] = [
    ("TAS-20%-500us", 500_000, 0.20),
    ("TAS-40%-500us", 500_000, 0.40),
    ("TAS-60%-500us", 500_000, 0.60),
    ("TAS-80%-500us", 500_000, 0.80),
    ("TAS-50%-100us", 100_000, 0.50),
    ("TAS-50%-250us", 250_000, 0.50),
    ("TAS-50%-500us", 500_000, 0.50),
    ("TAS-50%-1000us", 1_000_000, 0.50),
];

/// Predicts `configs` uncalibrated (flags' layout in `inp`) and calibrated by `cal`.
pub fn calibrated_rows(
    inp: &TasInput,
    cal: &crate::calibrate::Calibration,
    configs: &[(String, u64, f64)],
) -> Result<Vec<CalibratedRow>, String> {
    let run_frames = cal.frames()?;
    let mut rows = vec![];
    for (name, cycle_ns, open) in configs {
        let mut i = inp.clone();
        i.cycle_ns = *cycle_ns;
        i.open = *open;
        let plain = predict(&i)?;
        // Ethernet ports at the configuration's rate (the lab's shaper is the run's link only)
        let ideal = predict_with_host(inp.rate_bps, *cycle_ns, *open, &run_frames, HostTiming::default(), 0, inp.phases, None)?;
        let calibrated = predict_with_host(inp.rate_bps, *cycle_ns, *open, &run_frames, cal.dds_layer_host(), cal.socket_buffer_bytes, inp.phases, None)?;
        let calibrated_write_to_take = predict_with_host(inp.rate_bps, *cycle_ns, *open, &run_frames, cal.host, cal.socket_buffer_bytes, inp.phases, None)?;
        rows.push(CalibratedRow {
            configuration: name.clone(),
            cycle_ns: *cycle_ns,
            open_fraction: *open,
            formula_ms: formula::t_arrive(inp.rate_bps, *open, *cycle_ns, cal.layout.sample_bytes)?.t_arrive_ms,
            uncalibrated_mean_ms: plain.predicted_mean_ms,
            run_layout_mean_ms: ideal.mean_ms,
            calibrated,
            calibrated_write_to_take,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thesis(cycle_ns: u64, open: f64) -> TasInput {
        TasInput {
            rate_bps: 2_500_000_000,
            cycle_ns,
            open,
            message_bytes: 2_764_848,
            framing: Framing::default(),
            rtps: RtpsOptions { fragment_bytes: Some(64_000), ..Default::default() },
            phases: 200,
        }
    }

    /// Oracle: hand derivation. 1901 frames (see frame.rs); with a 250 us
    /// window 50 full frames fit (sim.rs derivation), so a message released
    /// at the window start needs ⌈1901 / 50⌉ = 39 windows — unless the
    /// shorter frames at datagram ends let a 51st frame in. Every window
    /// then loses less than one full frame's time to the guard band.
    #[test]
    fn thesis_image_at_50_percent_uses_about_38_windows() {
        let r = predict(&thesis(500_000, 0.5)).unwrap();
        assert_eq!(r.wire.frames, 1901);
        let w = &r.at_window_open;
        assert!((38..=39).contains(&w.windows_used), "{w:?}");
        let per_window_guard = w.guard_band_lost_ms / (w.windows_used - 1) as f64;
        assert!(per_window_guard < 4.9344e-3, "{per_window_guard}");
        // Latency at window open: (windows − 1) cycles plus part of the last window.
        let lo = (w.windows_used - 1) as f64 * 0.5;
        assert!(w.latency_ms > lo && w.latency_ms < lo + 0.25, "{w:?}");
        assert!(r.predicted_min_ms <= r.predicted_mean_ms && r.predicted_mean_ms <= r.predicted_max_ms);
        // The worst phase is at most one cycle later than the best.
        assert!(r.predicted_max_ms - r.predicted_min_ms <= 0.5 + 1e-9);
    }

    /// Always-open gate = plain serialisation: the walk must equal the sum
    /// of frame times (no IFG after the last frame).
    #[test]
    fn full_open_equals_serialisation() {
        let r = predict(&thesis(500_000, 1.0)).unwrap();
        assert!((r.predicted_mean_ms - r.serialisation_ms).abs() < 1e-12);
        assert_eq!(r.at_window_open.windows_used, 1);
        assert_eq!(r.at_window_open.guard_band_lost_ms, 0.0);
    }

    /// The walk and the simulator are two implementations of the same gate
    /// semantics: they must agree frame for frame.
    #[test]
    fn walk_agrees_with_simulator() {
        use crate::sim::*;
        let inp = thesis(250_000, 0.4);
        let msg = MessageFrames::dds_sample(&inp.framing, &inp.rtps, 300_000).unwrap();
        let gcl = gcl_for(250_000_000, 0.4).unwrap();
        for offset in [0u64, 37_000_000, 99_999_000, 123_456_789] {
            let w = walk(&gcl, 1, &msg.l2, inp.rate_bps, offset).unwrap();
            let port = PortSpec {
                name: "p".into(),
                rate_bps: inp.rate_bps,
                propagation_ps: 0,
                processing_ps: 0,
                num_tc: 2,
                pcp_to_tc: [0, 0, 0, 0, 0, 1, 0, 0],
                queue_limit: usize::MAX,
                priority_order: vec![1, 0],
                gcl: Some(gcl.clone()),
                cbs: vec![None, None],
                shaper_burst: None,
            };
            let src = SourceSpec {
                group: 0,
                path: vec![0],
                pcp: 5,
                period_ps: 1_000_000_000_000,
                offset_ps: offset,
                msgs_per_release: 1,
                frames: msg.clone(),
                socket_buffer: 0,
                host: HostTiming::default(),
            };
            let r = run(&SimInput { ports: vec![port], sources: vec![src], groups: 1, duration_ps: offset + 1, drain_ps: 1_000_000_000_000 });
            assert_eq!(r.groups[0].latencies_ps[0] as f64 / 1e9, w.latency_ms);
        }
    }
}
