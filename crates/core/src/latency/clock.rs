//! Each capture point's clock against the first one's, tracked over the whole
//! run while it is correlated (one decode, no second pass): offset and drift,
//! re-fitted where the clock stepped.
//!
//! Every submessage that identifies itself ([`SubmsgKey`]: DATA, HEARTBEAT,
//! ACKNACK, GAP, …) seen at the reference capture (0) and at capture c gives
//! δ = t_c − t_0 = o(t) ± d: + for traffic sent from the reference's side, −
//! for traffic sent from c's side (d ≥ 0, the one-way delay between the two
//! capture points). So o(t) lies above every δ of c's side and below every δ
//! of the reference's side, whatever the clocks do.
//!
//! * **Sides** are found per sending host (its source address) in 100 ms
//!   slices, where drift is negligible: within a slice the hosts of one
//!   direction lie apart from the other's by the two delays. Each slice votes
//!   once, at the first fit whose window holds it;
//!   a host goes with its majority. A participant is on its host's side: that
//!   is where its writers send from ([`Correlator`](super::Correlator)'s
//!   placement, not time order).
//! * **The clock line** around time t is the line o(t) = α + β (t − t_c) that
//!   leaves the widest gap between the two point sets over the ±2 s around t
//!   (the gap is concave in β: ternary search over ±1000 ppm; α is the
//!   gap's middle, as PTP assumes symmetric minimum delays). The error bar is
//!   half the gap plus what the slopes still compatible with the points could
//!   move the line at t.
//! * **Steps**: a window the two sets overlap in for every slope holds a step
//!   (or a clock slewed faster than a line follows). It is first read as one
//!   step, located between the two lines that fit the points before and after
//!   it ([`locate_step`]); where no single step explains it, the window is cut
//!   to the side of t that fits, down to 200 ms; where none fits the error bar
//!   covers the overlap and the fit is counted as a step.
//!
//! Fits are made per 100 ms of corrected time, when the correlator judges the
//! first sample in it: by then the capture has been read a window (5 s by
//! default) further, so the fit sees the exchanges on both sides of t.
//!
//! Bounded: keys awaiting their other sighting (per capture, oldest evicted,
//! counted), 10 ms slots of extreme δ per host (older than the history
//! evicted), hosts and participants per host capped.

use super::offset::SubmsgKey;
use crate::events::SubmsgEvent;
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::{EntityId, GuidPrefix};
use rustc_hash::{FxHashMap, FxHasher};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;

/// One self-identifying submessage at one capture point (its own clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    /// Hash of the [`SubmsgKey`]: the same at every capture point.
    pub key: u64,
    pub ts_ns: i64,
    pub src: IpAddr,
    pub prefix: GuidPrefix,
}

impl Exchange {
    /// Submessages in one frame only (a fragmented datagram's time is its last fragment's at one
    /// capture point and may be its first's at another); DATA_FRAG is left out (its fragments are
    /// many and bring nothing the HEARTBEATs and ACKNACKs of the same writer do not).
    pub fn of(e: &SubmsgEvent) -> Option<Exchange> {
        if e.kind == SubmsgKind::DataFrag || e.ip_first_ts_ns != e.ts_ns {
            return None;
        }
        // SPDP announcements are sent again and again with the same sequence number: a capture that
        // missed one pairs the next with it, a period apart.
        let spdp = [EntityId::SPDP_PARTICIPANT_WRITER, EntityId::SPDP_PARTICIPANT_SECURE_WRITER];
        if e.kind == SubmsgKind::Data && e.writer_id.is_some_and(|w| spdp.contains(&w.entity)) {
            return None;
        }
        let k = SubmsgKey::of(e)?;
        let mut h = FxHasher::default();
        k.hash(&mut h);
        Some(Exchange { key: h.finish(), ts_ns: e.ts_ns, src: e.src.ip(), prefix: e.guid_prefix })
    }
}

/// Caps of the clock tracker.
#[derive(Debug, Clone, Copy)]
pub struct ClockLimits {
    /// Keys awaiting their sighting at the other capture, per capture.
    pub max_keys: usize,
    /// How long a key waits for its other sighting (capture time).
    pub key_wait_ns: i64,
    /// Sending hosts tracked per capture pair.
    pub max_hosts: usize,
    /// Participants remembered per host (for placement).
    pub max_prefixes_per_host: usize,
    /// δ slots kept (per pair, all hosts), oldest first out.
    pub max_slots: usize,
}

impl Default for ClockLimits {
    fn default() -> Self {
        ClockLimits { max_keys: 262_144, key_wait_ns: 10_000_000_000, max_hosts: 256, max_prefixes_per_host: 64, max_slots: 200_000 }
    }
}

const SLOT_NS: i64 = 10_000_000;
const SLICE_NS: i64 = 100_000_000;
const BUCKET_NS: i64 = 100_000_000;
const HALF_WINDOW_NS: i64 = 2_000_000_000;
const MIN_HALF_WINDOW_NS: i64 = 200_000_000;
/// The farthest a line reaches for exchanges when there are none nearer.
const MAX_REACH_NS: i64 = 8_000_000_000;
const MAX_DRIFT: f64 = 1e-3;
/// How fast the drift may move, per second between one line and the next (a quartz's drift changes
/// with temperature by about 1 ppm per °C; a board heating up gains a few °C a minute), and the
/// least it may move however close the lines: per second, not per line, so that a chain of lines
/// no point constrains (sparse traffic) widens no faster than a clock can change. Faster changes
/// (a daemon slewing after a step) are steps to the model (see the module's comment).
const MAX_DRIFT_CHANGE_PER_S: f64 = 5e-6;
const MIN_DRIFT_CHANGE: f64 = 1e-6;
/// The most points a step is located among (4 per host per 10 ms: 20 hosts' ±2 s); a window with
/// more (hundreds of sending hosts, or a flood of them) is cut at its bucket's edges instead, at the
/// cost of one line fit rather than the two dozen a location takes.
const MAX_STEP_POINTS: usize = 32_000;

/// The extreme δ of one host in one 10 ms slot (reference time).
#[derive(Debug, Clone, Copy)]
struct Slot {
    host: u16,
    /// (t, δ) of the smallest and largest δ.
    min: (i64, i64),
    max: (i64, i64),
    /// (t, δ) of the slot's first and last sightings: a step inside the slot is located to the
    /// sighting, not to the slot.
    first: (i64, i64),
    last: (i64, i64),
}

/// A fitted line around one bucket of time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    pub at_ns: i64,
    pub offset_ns: f64,
    /// ns per ns (1e-6 = 1 ppm).
    pub drift: f64,
    /// The slopes the window's points still allow (`drift` lies between): the next line's drift is
    /// searched near this interval, not near the one slope chosen.
    pub drift_lo: f64,
    pub drift_hi: f64,
    pub uncertainty_ns: i64,
    /// The window held a step (no line fitted the whole ±2 s).
    pub cut: bool,
    /// No line fits even the smallest window: the error bar covers the overlap.
    pub overlapping: bool,
    /// A step located inside the bucket: from its instant on, this line (evaluated at `at_ns` too).
    pub step: Option<StepTo>,
}

/// The line after a step located inside a fit's bucket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepTo {
    /// The step's instant (reference time): instants from it on read this line.
    pub at_ns: i64,
    pub offset_ns: f64,
    pub drift: f64,
}

impl Fit {
    pub fn offset_at(&self, t: i64) -> i64 {
        let (o, d) = match self.step {
            Some(s) if t >= s.at_ns => (s.offset_ns, s.drift),
            _ => (self.offset_ns, self.drift),
        };
        (o + d * (t - self.at_ns) as f64).round() as i64
    }
}

#[derive(Default)]
struct HostState {
    /// Votes of the 100 ms slices: (reference side, capture c's side).
    votes: (u64, u64),
    prefixes: Vec<GuidPrefix>,
}

/// The pair (reference, capture c).
#[derive(Default)]
struct Pair {
    hosts: Vec<HostState>,
    host_index: FxHashMap<IpAddr, u16>,
    slots: VecDeque<Slot>,
    /// (slot index, host) → position in `slots` offset by `slots_popped`.
    open: FxHashMap<(i64, u16), u64>,
    slots_popped: u64,
    fits: BTreeMap<i64, Option<Fit>>,
    matched: u64,
    first_fit: Option<Fit>,
    last_fit: Option<Fit>,
    max_uncertainty: i64,
    cut_fits: u64,
    overlapping_fits: u64,
    fits_made: u64,
    sum_abs_correction: f64,
    /// Lines asked for (one per sighting judged) and the sum of their error bars.
    queries: u64,
    sum_uncertainty: f64,
    /// The last slice that voted: each votes once, at the first fit whose window holds it.
    voted_through: Option<i64>,
    /// Drift of the lines that fitted their whole window (no step): sum, count.
    drift_sum: f64,
    drift_fits: u64,
}

/// What the tracker counted, per capture against the reference.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClockSummary {
    pub capture: String,
    /// Submessages seen at both captures.
    pub matched: u64,
    /// Fits made (one per 100 ms with samples judged).
    pub fits: u64,
    pub first_offset_ns: Option<i64>,
    pub last_offset_ns: Option<i64>,
    pub first_at_ns: Option<i64>,
    pub last_at_ns: Option<i64>,
    /// The mean drift of the lines that fitted their whole window (steps left out), ppm.
    pub drift_ppm: Option<f64>,
    /// The error bar of the last fit (at `last_at_ns`): what `last_offset_ns` is worth.
    pub last_uncertainty_ns: Option<i64>,
    /// The largest error bar of any fit.
    pub max_uncertainty_ns: i64,
    /// The mean error bar of the lines over the sightings they corrected.
    pub mean_uncertainty_ns: Option<i64>,
    /// Fits whose ±2 s held a step (cut to one side).
    pub step_fits: u64,
    /// Fits where no line fits (error bar covers the overlap).
    pub overlapping_fits: u64,
    /// Hosts by side: at the reference, at this capture.
    pub hosts_at_reference: usize,
    pub hosts_here: usize,
    /// Instants (capture and trace times of the samples judged) the line moved, and those it left
    /// as read because the offset already applied lies within its error bar.
    pub instants_corrected: u64,
    pub instants_within_bar: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ClockStats {
    pub keys_evicted: u64,
    pub keys_expired: u64,
    pub hosts_refused: u64,
    pub slots_evicted: u64,
}

/// A key's first sighting at one capture.
#[derive(Debug, Clone, Copy)]
struct Sighting {
    t: i64,
    ip: IpAddr,
    prefix: GuidPrefix,
    /// Paired already: at capture c ≥ 1, with the reference; at the reference, a bit per capture
    /// (captures 64 and above are not marked). A key pairs once: a copy sent again later (after the
    /// first sighting expired at one capture) is not paired with the other's first.
    paired: u64,
}

/// The per-capture clock tracker (see the module's comment).
pub struct ClockTracker {
    limits: ClockLimits,
    /// Per capture: key → its first sighting, and the keys' arrival order.
    keys: Vec<(FxHashMap<u64, Sighting>, VecDeque<(i64, u64)>)>,
    /// Per capture: the latest sighting pushed (keys older than the wait before it are stale even
    /// where that capture has not expired them yet: captures are read some way apart).
    latest: Vec<i64>,
    /// Per capture: read to its end.
    ended: Vec<bool>,
    /// Per capture: the offset its keys are paired by (the one applied to it, the first 2 s's or
    /// --offset's, else the first 2 s's coarse one), so that a key sighted a wait apart is told from
    /// clocks seconds apart.
    applied: Vec<i64>,
    /// Per capture c ≥ 1: the pair (0, c); index 0 unused.
    pairs: Vec<Pair>,
    pub stats: ClockStats,
}

impl ClockTracker {
    pub fn new(captures: usize, limits: ClockLimits) -> ClockTracker {
        ClockTracker {
            limits,
            keys: (0..captures).map(|_| Default::default()).collect(),
            latest: vec![i64::MIN; captures],
            ended: vec![false; captures],
            applied: vec![0; captures],
            pairs: (0..captures).map(|_| Pair::default()).collect(),
            stats: ClockStats::default(),
        }
    }

    /// Captures tracked (the reference included).
    pub fn captures(&self) -> usize {
        self.keys.len()
    }

    /// Forgets what capture `c` saw (a new host took its slot): its keys and its line; the
    /// reference's keys and every line when `c` is the reference.
    pub fn reset_capture(&mut self, c: usize) {
        if c >= self.keys.len() {
            return;
        }
        self.keys[c] = Default::default();
        self.latest[c] = i64::MIN;
        self.ended[c] = false;
        self.applied[c] = 0;
        if c == 0 {
            for p in self.pairs.iter_mut() {
                *p = Pair::default();
            }
        } else {
            self.pairs[c] = Pair::default();
        }
    }

    pub fn add_capture(&mut self) {
        self.keys.push(Default::default());
        self.latest.push(i64::MIN);
        self.ended.push(false);
        self.applied.push(0);
        self.pairs.push(Pair::default());
    }

    /// The offset capture `c`'s keys are paired by (its line is still fitted to raw times).
    pub fn set_pairing_offset(&mut self, c: usize, ns: i64) {
        if let Some(a) = self.applied.get_mut(c) {
            *a = ns;
        }
    }

    /// One sighting at capture `c`.
    pub fn push(&mut self, c: usize, x: Exchange) {
        if c >= self.keys.len() {
            return;
        }
        self.latest[c] = self.latest[c].max(x.ts_ns);
        // Expire keys that waited too long for every other capture (a capture read ahead of another,
        // by up to a batch of the merge — seconds where traffic is sparse — keeps its keys until the
        // one behind has read past them); evict the oldest over the cap.
        let horizon = self.horizon(c, x.ts_ns);
        {
            let (map, order) = &mut self.keys[c];
            while let Some(&(t, k)) = order.front() {
                if t > horizon.saturating_sub(self.limits.key_wait_ns) && map.len() < self.limits.max_keys {
                    break;
                }
                order.pop_front();
                if map.get(&k).is_some_and(|v| v.t == t) {
                    map.remove(&k);
                    if map.len() + 1 >= self.limits.max_keys {
                        self.stats.keys_evicted += 1;
                    } else {
                        self.stats.keys_expired += 1;
                    }
                }
            }
            match map.get(&x.key) {
                // A second sighting within the wait (a retransmission): the first one counts.
                Some(o) if o.t > x.ts_ns.saturating_sub(self.limits.key_wait_ns) => return,
                // A copy sent again a wait later, while the first is kept for a capture read
                // behind this one: the copy is this key's sighting from now on.
                Some(_) => {}
                None => {}
            }
            map.insert(x.key, Sighting { t: x.ts_ns, ip: x.src, prefix: x.prefix, paired: 0 });
            order.push_back((x.ts_ns, x.key));
        }
        let wait = self.limits.key_wait_ns;
        // The other's first sighting, where it lies within the wait of this one (a copy sent again
        // later is not that sighting's pair, however far apart the captures are read) and is not
        // paired with this pair yet.
        let here = x.ts_ns.saturating_sub(self.applied[c]);
        let usable = |o: &Sighting, applied: i64, bit: u64| o.paired & bit == 0 && o.t.saturating_sub(applied).abs_diff(here) <= wait as u64;
        if c == 0 {
            for o in 1..self.keys.len() {
                let applied = self.applied[o];
                let Some(tc) = self.keys[o].0.get_mut(&x.key).filter(|s| usable(s, applied, 1)).map(|s| {
                    s.paired = 1;
                    s.t
                }) else {
                    continue;
                };
                if let Some(s0) = self.keys[0].0.get_mut(&x.key) {
                    s0.paired |= 1u64.checked_shl(o as u32).unwrap_or(0);
                }
                self.pair_point(o, x.ts_ns, tc, x.src, x.prefix);
            }
        } else {
            let bit = 1u64.checked_shl(c as u32).unwrap_or(0);
            let applied = self.applied[0];
            let Some((t0, ip, prefix)) = self.keys[0].0.get_mut(&x.key).filter(|s| usable(s, applied, bit)).map(|s| {
                s.paired |= bit;
                (s.t, s.ip, s.prefix)
            }) else {
                return;
            };
            if let Some(sc) = self.keys[c].0.get_mut(&x.key) {
                sc.paired = 1;
            }
            self.pair_point(c, t0, x.ts_ns, ip, prefix);
        }
    }

    /// How far every capture has read, on capture `c`'s clock (by the offsets keys are paired by),
    /// with `c` itself at `now`: a key of `c` older than the wait before it can pair with nothing.
    fn horizon(&self, c: usize, now: i64) -> i64 {
        let mut h = now;
        for (o, &l) in self.latest.iter().enumerate() {
            if o != c && !self.ended.get(o).copied().unwrap_or(false) {
                h = h.min(l.saturating_sub(self.applied[o]).saturating_add(self.applied[c]));
            }
        }
        h
    }

    /// Capture `c` has ended (it no longer holds back the others' keys), or runs again.
    pub fn set_ended(&mut self, c: usize, ended: bool) {
        if let Some(e) = self.ended.get_mut(c) {
            *e = ended;
        }
    }

    fn pair_point(&mut self, c: usize, t0: i64, tc: i64, ip: IpAddr, prefix: GuidPrefix) {
        let limits = self.limits;
        let p = &mut self.pairs[c];
        let h = match p.host_index.get(&ip) {
            Some(h) => *h,
            None if p.hosts.len() < limits.max_hosts => {
                p.hosts.push(HostState::default());
                let h = (p.hosts.len() - 1) as u16;
                p.host_index.insert(ip, h);
                h
            }
            None => {
                self.stats.hosts_refused += 1;
                return;
            }
        };
        let hs = &mut p.hosts[h as usize];
        if !hs.prefixes.contains(&prefix) && hs.prefixes.len() < limits.max_prefixes_per_host {
            hs.prefixes.push(prefix);
        }
        p.matched += 1;
        let d = tc.saturating_sub(t0);
        let slot = t0.div_euclid(SLOT_NS);
        match p.open.get(&(slot, h)).and_then(|&i| i.checked_sub(p.slots_popped)).and_then(|i| p.slots.get_mut(i as usize)) {
            Some(s) => {
                if d < s.min.1 {
                    s.min = (t0, d);
                }
                if d > s.max.1 {
                    s.max = (t0, d);
                }
                if t0 >= s.last.0 {
                    s.last = (t0, d);
                }
                if t0 < s.first.0 {
                    s.first = (t0, d);
                }
            }
            None => {
                if p.slots.len() >= limits.max_slots {
                    p.slots.pop_front();
                    p.slots_popped += 1;
                    self.stats.slots_evicted += 1;
                }
                p.open.insert((slot, h), p.slots_popped + p.slots.len() as u64);
                p.slots.push_back(Slot { host: h, min: (t0, d), max: (t0, d), first: (t0, d), last: (t0, d) });
                if p.open.len() > 4 * limits.max_slots {
                    let popped = p.slots_popped;
                    p.open.retain(|_, i| *i >= popped);
                }
            }
        }
    }

    /// Forgets what lies before `t` (reference time) less the history a fit needs.
    pub fn forget_before(&mut self, t: i64) {
        let keep = t.saturating_sub(2 * MAX_REACH_NS);
        for p in self.pairs.iter_mut().skip(1) {
            while p.slots.front().is_some_and(|s| s.max.0.max(s.min.0) < keep) {
                p.slots.pop_front();
                p.slots_popped += 1;
            }
            let popped = p.slots_popped;
            if p.open.len() > 1024 {
                p.open.retain(|_, i| *i >= popped);
            }
            while p.fits.first_key_value().is_some_and(|(b, _)| (b + 1) * BUCKET_NS < keep) {
                p.fits.pop_first();
            }
        }
    }

    /// The line [`fit`](Self::fit) gives, without counting it as one that corrected an instant
    /// (the mean error bar stays the one of the lines that corrected).
    pub fn peek(&mut self, c: usize, t: i64) -> Option<Fit> {
        let b = t.div_euclid(BUCKET_NS);
        if let Some(f) = self.pairs.get(c).filter(|_| c > 0).and_then(|p| p.fits.get(&b)) {
            return *f;
        }
        let before = self.pairs.get(c).map(|p| (p.queries, p.sum_uncertainty));
        let f = self.fit(c, t);
        if let (Some((q, s)), Some(p)) = (before, self.pairs.get_mut(c)) {
            (p.queries, p.sum_uncertainty) = (q, s);
        }
        f
    }

    /// The clock line of capture `c` around reference time `t` (None: no two-way traffic there).
    pub fn fit(&mut self, c: usize, t: i64) -> Option<Fit> {
        let p = self.pairs.get_mut(c).filter(|_| c > 0)?;
        let b = t.div_euclid(BUCKET_NS);
        if let Some(f) = p.fits.get(&b) {
            if let Some(f) = f {
                p.queries += 1;
                p.sum_uncertainty += f.uncertainty_ns as f64;
            }
            return *f;
        }
        let centre = b * BUCKET_NS + BUCKET_NS / 2;
        let f = fit_around(p, centre);
        if let Some(f) = f {
            p.fits_made += 1;
            if p.first_fit.is_none() {
                p.first_fit = Some(f);
            }
            if p.last_fit.is_none_or(|l| l.at_ns < f.at_ns) {
                p.last_fit = Some(f);
            }
            p.max_uncertainty = p.max_uncertainty.max(f.uncertainty_ns);
            p.cut_fits += (f.cut && !f.overlapping) as u64;
            p.overlapping_fits += f.overlapping as u64;
            p.sum_abs_correction += f.offset_ns.abs();
            if !f.cut {
                p.drift_sum += f.drift;
                p.drift_fits += 1;
            }
            p.queries += 1;
            p.sum_uncertainty += f.uncertainty_ns as f64;
        }
        p.fits.insert(b, f);
        f
    }

    /// Fits made so far, all pairs.
    pub fn fits_made(&self) -> u64 {
        self.pairs.iter().map(|p| p.fits_made).sum()
    }

    /// The error bar of a mean over capture `c`'s sightings: the mean of the error bars of the
    /// lines that corrected them (None: no line yet).
    pub fn mean_uncertainty(&self, c: usize) -> Option<i64> {
        self.pairs.get(c).filter(|p| c > 0 && p.queries > 0).map(|p| (p.sum_uncertainty / p.queries as f64).ceil() as i64)
    }

    /// The participants placed so far: (prefix, capture), capture 0 for the reference's side.
    pub fn placements(&self) -> Vec<(GuidPrefix, usize)> {
        let mut out = vec![];
        for (c, p) in self.pairs.iter().enumerate().skip(1) {
            for h in &p.hosts {
                let side = match h.votes {
                    (a, b) if a > b => 0,
                    (a, b) if b > a => c,
                    _ => continue,
                };
                out.extend(h.prefixes.iter().map(|x| (*x, side)));
            }
        }
        out
    }

    pub fn summaries(&self, names: &[std::sync::Arc<str>]) -> Vec<ClockSummary> {
        self.pairs
            .iter()
            .enumerate()
            .skip(1)
            .map(|(c, p)| {
                let (f, l) = (p.first_fit, p.last_fit);
                let drift = (p.drift_fits > 0).then(|| p.drift_sum / p.drift_fits as f64 * 1e6);
                ClockSummary {
                    capture: names.get(c).map(|n| n.to_string()).unwrap_or_default(),
                    matched: p.matched,
                    fits: p.fits_made,
                    first_offset_ns: f.map(|f| f.offset_ns.round() as i64),
                    last_offset_ns: l.map(|f| f.offset_ns.round() as i64),
                    first_at_ns: f.map(|f| f.at_ns),
                    last_at_ns: l.map(|f| f.at_ns),
                    drift_ppm: drift,
                    last_uncertainty_ns: l.map(|f| f.uncertainty_ns),
                    max_uncertainty_ns: p.max_uncertainty,
                    mean_uncertainty_ns: (p.queries > 0).then(|| (p.sum_uncertainty / p.queries as f64).ceil() as i64),
                    step_fits: p.cut_fits,
                    overlapping_fits: p.overlapping_fits,
                    hosts_at_reference: p.hosts.iter().filter(|h| h.votes.0 > h.votes.1).count(),
                    hosts_here: p.hosts.iter().filter(|h| h.votes.1 > h.votes.0).count(),
                    instants_corrected: 0,
                    instants_within_bar: 0,
                }
            })
            .collect()
    }
}

/// What two hosts' time daemons claim (each within `bound` of true time) against what the traffic
/// says of their clocks (`offset` ± `uncertainty` apart): the claims cannot both hold when the clocks
/// are further apart than the two bounds allow, beyond the estimate's own error bar.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClaimCheck {
    pub capture: String,
    pub reference: String,
    /// The daemons' bounds (ns): this capture's host, the reference's.
    pub bound_ns: i64,
    pub reference_bound_ns: i64,
    /// The clock tracker's offset of this capture against the reference, and its error bar (ns).
    pub offset_ns: i64,
    pub uncertainty_ns: i64,
    pub contradicted: bool,
    /// One line for the user.
    pub line: String,
}

impl ClaimCheck {
    pub fn new(capture: &str, reference: &str, bound_ns: i64, reference_bound_ns: i64, offset_ns: i64, uncertainty_ns: i64, sources: (&str, &str)) -> ClaimCheck {
        let apart = offset_ns.saturating_abs().saturating_sub(uncertainty_ns.max(0));
        let allowed = bound_ns.max(0).saturating_add(reference_bound_ns.max(0));
        let contradicted = apart > allowed;
        let us = |ns: i64| ns as f64 / 1e3;
        let line = if contradicted {
            format!(
                "{capture}'s {} says its clock is within {:.1} µs of true time and {reference}'s {} says within {:.1} µs, but the traffic puts {capture} {:+.1} µs ± {:.1} µs from {reference}: at least one host's clock is not where its time daemon says",
                sources.0, us(bound_ns), sources.1, us(reference_bound_ns), us(offset_ns), us(uncertainty_ns)
            )
        } else {
            format!(
                "{capture}'s {} (within {:.1} µs) and {reference}'s {} (within {:.1} µs) agree with the traffic ({:+.1} µs ± {:.1} µs)",
                sources.0, us(bound_ns), sources.1, us(reference_bound_ns), us(offset_ns), us(uncertainty_ns)
            )
        };
        ClaimCheck { capture: capture.into(), reference: reference.into(), bound_ns, reference_bound_ns, offset_ns, uncertainty_ns, contradicted, line }
    }
}

/// Sides of the hosts in one slice: per host (min δ, max δ); a valid split puts every host left
/// of it (capture c's side: δ = o − d) below every host right of it (the reference's: δ = o + d).
/// Returns the hosts on the reference's side, or None (one host, or no split).
fn split(hosts: &mut [(u16, i64, i64)]) -> Option<Vec<u16>> {
    if hosts.len() < 2 {
        return None;
    }
    hosts.sort_by_key(|h| (h.1, h.2));
    let mut best: Option<(usize, i64)> = None;
    let mut left_max = i64::MIN;
    for k in 1..hosts.len() {
        left_max = left_max.max(hosts[k - 1].2);
        let right_min = hosts[k..].iter().map(|h| h.1).min()?;
        let gap = right_min.saturating_sub(left_max);
        if gap > 0 && best.is_none_or(|(_, g)| gap > g) {
            best = Some((k, gap));
        }
    }
    let (k, _) = best?;
    Some(hosts[k..].iter().map(|h| h.0).collect())
}

/// The line around `centre` from the ±2 s around it, or, where that holds no exchange of one of the
/// two directions (the start of a run, a pause), from ±4 s or ±8 s: the error bar then covers what
/// the slopes the points allow could do so far from them.
fn fit_around(p: &mut Pair, centre: i64) -> Option<Fit> {
    let mut reach = HALF_WINDOW_NS;
    loop {
        if let Some(f) = fit_within(p, centre, reach) {
            return Some(f);
        }
        if reach >= MAX_REACH_NS {
            return None;
        }
        reach *= 2;
    }
}

fn fit_within(p: &mut Pair, centre: i64, reach: i64) -> Option<Fit> {
    let prior = p.last_fit.map(|f| {
        let change = (MAX_DRIFT_CHANGE_PER_S * (centre - f.at_ns).unsigned_abs() as f64 / 1e9).max(MIN_DRIFT_CHANGE);
        (f.drift, f.drift_lo - change, f.drift_hi + change)
    });
    // Votes of the slices in the widest window (each slice votes once: at the first fit whose ±2 s
    // window holds it, so that the run's first samples find their participants placed).
    let lo = centre - reach;
    let hi = centre + reach;
    let in_window: Vec<Slot> = p.slots.iter().filter(|s| s.min.0.max(s.max.0) >= lo && s.min.0.min(s.max.0) < hi).copied().collect();
    if in_window.is_empty() {
        return None;
    }
    // Sides in this window: slices vote; hosts without votes here keep their majority so far.
    let mut local: FxHashMap<u16, (u64, u64)> = FxHashMap::default();
    let mut slices: BTreeMap<i64, FxHashMap<u16, (i64, i64)>> = BTreeMap::new();
    for s in &in_window {
        let e = slices.entry(s.min.0.div_euclid(SLICE_NS)).or_default().entry(s.host).or_insert((i64::MAX, i64::MIN));
        e.0 = e.0.min(s.min.1);
        e.1 = e.1.max(s.max.1);
    }
    for (slice, hosts) in &slices {
        let mut v: Vec<(u16, i64, i64)> = hosts.iter().map(|(h, (a, b))| (*h, *a, *b)).collect();
        let all: Vec<u16> = v.iter().map(|h| h.0).collect();
        let Some(upper) = split(&mut v) else { continue };
        for h in all {
            let e = local.entry(h).or_default();
            let up = upper.contains(&h);
            if up {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
            if p.voted_through.is_none_or(|v| *slice > v) && reach == HALF_WINDOW_NS {
                let g = &mut p.hosts[h as usize].votes;
                if up {
                    g.0 += 1;
                } else {
                    g.1 += 1;
                }
            }
        }
    }
    if reach == HALF_WINDOW_NS {
        if let Some((&last, _)) = slices.last_key_value() {
            p.voted_through = Some(p.voted_through.map_or(last, |v| v.max(last)));
        }
    }
    let side = |h: u16| -> Option<bool> {
        let (a, b) = local.get(&h).copied().filter(|(a, b)| a != b).unwrap_or(p.hosts[h as usize].votes);
        (a != b).then_some(a > b)
    };
    // Upper bounds (reference's side: the smallest δ) and lower bounds (c's side: the largest).
    let mut upper = vec![];
    let mut lower = vec![];
    for s in &in_window {
        match side(s.host) {
            Some(true) => upper.push(s.min),
            Some(false) => lower.push(s.max),
            None => {}
        }
    }
    let mut half = reach;
    let mut best_overlap: Option<Fit> = None;
    let mut cut = false;
    loop {
        let mut candidates = vec![(centre - half, centre + half)];
        if cut {
            candidates = vec![(centre - half, centre + BUCKET_NS / 2), (centre - BUCKET_NS / 2, centre + half)];
        }
        let mut fits: Vec<Fit> = vec![];
        for (a, b) in candidates {
            let u: Vec<(i64, i64)> = upper.iter().copied().filter(|x| x.0 >= a && x.0 < b).collect();
            let l: Vec<(i64, i64)> = lower.iter().copied().filter(|x| x.0 >= a && x.0 < b).collect();
            if u.is_empty() || l.is_empty() {
                continue;
            }
            if let Some(f) = line(&u, &l, centre, prior) {
                fits.push(Fit { cut, ..f });
            }
        }
        // The widest-gap feasible one, else remember the least overlapping.
        fits.sort_by_key(|f| f.uncertainty_ns);
        if let Some(f) = fits.iter().find(|f| !f.overlapping) {
            return Some(*f);
        }
        if let Some(f) = fits.into_iter().next() {
            if best_overlap.is_none_or(|b| f.uncertainty_ns < b.uncertainty_ns) {
                best_overlap = Some(f);
            }
        }
        if !cut {
            // Every sighting of a host bounds the line from its side: the slot's extreme nearest
            // the line binds a line, the others locate a step inside the slot.
            let (mut all_upper, mut all_lower) = (vec![], vec![]);
            for s in &in_window {
                match side(s.host) {
                    Some(true) => all_upper.extend([s.min, s.max, s.first, s.last]),
                    Some(false) => all_lower.extend([s.max, s.min, s.first, s.last]),
                    None => {}
                }
            }
            if let Some(f) = locate_step(&all_upper, &all_lower, centre, (centre - half, centre + half), prior) {
                return Some(f);
            }
            cut = true;
            continue;
        }
        if half <= MIN_HALF_WINDOW_NS {
            return best_overlap.map(|f| Fit { cut: true, ..f });
        }
        half /= 2;
    }
}

/// Whether one line (any slope within ±[`MAX_DRIFT`]) leaves every upper point (true) above and
/// every lower point below it; trivially where one of the two sets is empty.
fn one_line_fits(pts: &[(i64, i64, bool)]) -> bool {
    let (Some(first), true) = (pts.first(), pts.iter().any(|p| p.2) && pts.iter().any(|p| !p.2)) else { return true };
    let at = first.0;
    let gap = |beta: f64| {
        let (mut top, mut bottom) = (f64::INFINITY, f64::NEG_INFINITY);
        for &(t, d, up) in pts {
            let v = d as f64 - beta * (t - at) as f64;
            if up {
                top = top.min(v);
            } else {
                bottom = bottom.max(v);
            }
        }
        top - bottom
    };
    let (mut a, mut b) = (-MAX_DRIFT, MAX_DRIFT);
    for _ in 0..80 {
        let m1 = a + (b - a) / 3.0;
        let m2 = b - (b - a) / 3.0;
        if gap(m1) < gap(m2) {
            a = m1;
        } else {
            b = m2;
        }
    }
    gap((a + b) / 2.0) >= 0.0
}

/// The window `[lo, hi)` that no line fits, read as one step: the points before it fit a line, the
/// points from it on another. The step lies after the last point only the first line explains and
/// at or before the first only the second explains (the longest prefix and suffix one line fits,
/// found by bisection: a subset of points one line fits is fitted too); between them (points both
/// lines explain: a direction without traffic across the step leaves its instant open) it is put
/// where the two lines leave the least one-way delay in all, as a clock step moves every
/// direction's delay at once where traffic does not. The bucket's line is the one on its side, or
/// both where the step falls inside it ([`Fit::step`]). None where no single step explains the
/// window (two steps, a slew): the caller cuts the window instead.
fn locate_step(upper: &[(i64, i64)], lower: &[(i64, i64)], centre: i64, (lo, hi): (i64, i64), prior: Option<(f64, f64, f64)>) -> Option<Fit> {
    let inside = |t: i64| t >= lo && t < hi;
    let mut pts: Vec<(i64, i64, bool)> = upper.iter().filter(|p| inside(p.0)).map(|&(t, d)| (t, d, true)).collect();
    pts.extend(lower.iter().filter(|p| inside(p.0)).map(|&(t, d)| (t, d, false)));
    if pts.len() > MAX_STEP_POINTS {
        return None;
    }
    pts.sort_unstable();
    let n = pts.len();
    if one_line_fits(&pts) {
        return None;
    }
    // The longest prefix one line fits: pts[..m_a].
    let (mut ok, mut bad) = (0, n);
    while bad - ok > 1 {
        let m = (ok + bad) / 2;
        if one_line_fits(&pts[..m]) {
            ok = m;
        } else {
            bad = m;
        }
    }
    let m_a = ok;
    // The longest suffix: pts[m_b..].
    let (mut bad, mut ok) = (0, n);
    while ok - bad > 1 {
        let m = (ok + bad) / 2;
        if one_line_fits(&pts[m..]) {
            ok = m;
        } else {
            bad = m;
        }
    }
    let m_b = ok;
    if m_b > m_a {
        return None;
    }
    let split = |v: &[(i64, i64, bool)]| -> (Vec<(i64, i64)>, Vec<(i64, i64)>) {
        (v.iter().filter(|p| p.2).map(|p| (p.0, p.1)).collect(), v.iter().filter(|p| !p.2).map(|p| (p.0, p.1)).collect())
    };
    let fit_of = |v: &[(i64, i64, bool)]| {
        let (u, l) = split(v);
        if u.is_empty() || l.is_empty() {
            return None;
        }
        line(&u, &l, centre, prior).filter(|f| !f.overlapping)
    };
    // The split k (pts[..k] before the step) in [m_b, m_a] with the least delay in all.
    let k = match (fit_of(&pts[..m_a]), fit_of(&pts[m_b..])) {
        (Some(before), Some(after)) => {
            let delay = |f: &Fit, &(t, d, up): &(i64, i64, bool)| {
                let o = f.offset_ns + f.drift * (t - f.at_ns) as f64;
                if up { d as f64 - o } else { o - d as f64 }
            };
            // cost(k) = Σ_{m_b ≤ i < k} delay_before(i) + Σ_{k ≤ i < m_a} delay_after(i)
            let mut cost: f64 = pts[m_b..m_a].iter().map(|p| delay(&after, p)).sum();
            let (mut best, mut best_cost) = (m_b, cost);
            for i in m_b..m_a {
                cost += delay(&before, &pts[i]) - delay(&after, &pts[i]);
                if cost < best_cost {
                    (best, best_cost) = (i + 1, cost);
                }
            }
            best
        }
        (Some(_), None) => m_a,
        (None, Some(_)) => m_b,
        (None, None) => return None,
    };
    let at = match k {
        0 => lo,
        k if k == n => hi,
        k => pts[k - 1].0 + (pts[k].0 - pts[k - 1].0) / 2,
    };
    let before = fit_of(&pts[..k]);
    let after = fit_of(&pts[k..]);
    let half = BUCKET_NS / 2;
    let f = match (before, after) {
        (_, Some(a)) if at <= centre - half => a,
        (Some(b), _) if at >= centre + half => b,
        (Some(b), Some(a)) => Fit {
            uncertainty_ns: b.uncertainty_ns.max(a.uncertainty_ns),
            step: Some(StepTo { at_ns: at, offset_ns: a.offset_ns, drift: a.drift }),
            ..b
        },
        (Some(f), None) | (None, Some(f)) => f,
        (None, None) => return None,
    };
    Some(Fit { cut: true, ..f })
}

/// The line between upper points (δ ≥ o) and lower points (δ ≤ o) with the widest gap, evaluated at
/// `at`. `overlapping` when every slope leaves the sets overlapping (the error bar then covers it).
/// Slopes are searched within ±[`MAX_DRIFT`], and within the slopes the latest line allowed
/// widened by how far a drift can move since, `prior` = (its drift, lowest, highest) where there is one: a window whose
/// points leave the slope open (a few points, all on one side of `at`) keeps near the drift it had
/// instead of swinging to the limit, and a prior that was itself loose (sparse traffic) constrains
/// no more than its points did.
///
/// The error bar covers every line the points and the slope limits allow, at `at` and within the
/// bucket around it (±50 ms): the highest and lowest offsets any allowed slope leaves at `at` (the
/// upper bound is concave in the slope, the lower convex: each is searched, not only the ends of
/// the slope interval), plus how far the allowed slopes move apart within the bucket.
fn line(upper: &[(i64, i64)], lower: &[(i64, i64)], at: i64, prior: Option<(f64, f64, f64)>) -> Option<Fit> {
    // gap(β) = min_u (δ − β(t − at)) − max_l (δ − β(t − at)), concave in β.
    let bounds = |beta: f64| -> (f64, f64) {
        let top = upper.iter().map(|&(t, d)| d as f64 - beta * (t - at) as f64).fold(f64::INFINITY, f64::min);
        let bottom = lower.iter().map(|&(t, d)| d as f64 - beta * (t - at) as f64).fold(f64::NEG_INFINITY, f64::max);
        (bottom, top)
    };
    let gap = |beta: f64| {
        let (b, t) = bounds(beta);
        t - b
    };
    let (lim_lo, lim_hi) = match prior {
        Some((_, lo, hi)) => (lo.min(hi).max(-MAX_DRIFT), hi.max(lo).min(MAX_DRIFT)),
        None => (-MAX_DRIFT, MAX_DRIFT),
    };
    // The maximum of a concave function of β over [a, b] (ternary search).
    let argmax = |f: &dyn Fn(f64) -> f64, mut a: f64, mut b: f64| {
        for _ in 0..80 {
            let m1 = a + (b - a) / 3.0;
            let m2 = b - (b - a) / 3.0;
            if f(m1) < f(m2) {
                a = m1;
            } else {
                b = m2;
            }
        }
        (a + b) / 2.0
    };
    let widest = argmax(&gap, lim_lo, lim_hi);
    let g = gap(widest);
    if !g.is_finite() {
        return None;
    }
    if g < 0.0 && prior.is_some() {
        // No line within the prior's slopes: the drift changed faster than assumed (a daemon
        // changed the clock's frequency). The points alone decide (a step if they cannot).
        return line(upper, lower, at, None);
    }
    if g < 0.0 {
        let (bottom, top) = bounds(widest);
        return Some(Fit {
            at_ns: at,
            offset_ns: (top + bottom) / 2.0,
            drift: widest,
            drift_lo: widest,
            drift_hi: widest,
            uncertainty_ns: (-g / 2.0).ceil() as i64,
            cut: false,
            overlapping: true,
            step: None,
        });
    }
    // The slopes compatible with the points; of them the one nearest the prior (the widest gap without one).
    let edge = |mut inside: f64, mut outside: f64| {
        for _ in 0..50 {
            let m = (inside + outside) / 2.0;
            if gap(m) >= 0.0 {
                inside = m;
            } else {
                outside = m;
            }
        }
        inside
    };
    let lo_beta = if gap(lim_lo) >= 0.0 { lim_lo } else { edge(widest, lim_lo) };
    let hi_beta = if gap(lim_hi) >= 0.0 { lim_hi } else { edge(widest, lim_hi) };
    let beta = match prior {
        Some((p, _, _)) => p.clamp(lo_beta, hi_beta),
        None => widest,
    };
    let (bottom, top) = bounds(beta);
    let offset = (top + bottom) / 2.0;
    // Every allowed line at `at`: between the lowest lower bound and the highest upper bound over
    // the allowed slopes.
    let highest = bounds(argmax(&|b: f64| bounds(b).1, lo_beta, hi_beta)).1.max(top);
    let lowest = bounds(argmax(&|b: f64| -bounds(b).0, lo_beta, hi_beta)).0.min(bottom);
    let spread = (hi_beta - beta).max(beta - lo_beta) * (BUCKET_NS / 2) as f64;
    let u = (highest - offset).max(offset - lowest) + spread;
    Some(Fit { at_ns: at, offset_ns: offset, drift: beta, drift_lo: lo_beta, drift_hi: hi_beta, uncertainty_ns: u.ceil() as i64, cut: false, overlapping: false, step: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, n])
    }

    /// Two hosts exchanging every 5 ms; capture 1's clock = reference + o(t).
    fn run(o: impl Fn(i64) -> i64, secs: i64) -> ClockTracker {
        let mut k = ClockTracker::new(2, ClockLimits::default());
        let mut key = 0u64;
        let d = 40_000; // 40 µs each way
        for i in 0..secs * 200 {
            let t = 1_000_000_000_000 + i * 5_000_000;
            // host 1 (at the reference) sends: seen at 0 at t, at 1 at t + d (true time) + o
            key += 1;
            k.push(0, Exchange { key, ts_ns: t, src: ip(1), prefix: GuidPrefix([1; 12]) });
            k.push(1, Exchange { key, ts_ns: t + d + o(t + d), src: ip(1), prefix: GuidPrefix([1; 12]) });
            // host 2 (at capture 1) answers 1 ms later
            key += 1;
            let t2 = t + 1_000_000;
            k.push(1, Exchange { key, ts_ns: t2 + o(t2), src: ip(2), prefix: GuidPrefix([2; 12]) });
            k.push(0, Exchange { key, ts_ns: t2 + d, src: ip(2), prefix: GuidPrefix([2; 12]) });
        }
        k
    }

    #[test]
    fn offset_and_drift_are_followed_within_the_error_bar() {
        let t0 = 1_000_000_000_000i64;
        let o = |t: i64| 3_000_000 + ((t - t0) as f64 * 80e-6) as i64; // +3 ms, +80 ppm
        let mut k = run(o, 30);
        for s in [3, 10, 20, 27] {
            let t = t0 + s * 1_000_000_000 + 30_000_000;
            let f = k.fit(1, t).expect("a fit");
            let err = (f.offset_at(t) - o(t)).abs();
            assert!(err <= f.uncertainty_ns, "at {s} s: {} vs {} ± {}", f.offset_at(t), o(t), f.uncertainty_ns);
            assert!(f.uncertainty_ns < 60_000, "{f:?}");
            assert!((f.drift - 80e-6).abs() < 5e-6, "{f:?}");
        }
        let mut p = k.placements();
        p.sort();
        assert_eq!(p, vec![(GuidPrefix([1; 12]), 0), (GuidPrefix([2; 12]), 1)]);
    }

    #[test]
    fn a_step_is_cut_out_of_the_window() {
        let t0 = 1_000_000_000_000i64;
        let step = t0 + 15_000_000_000;
        let o = |t: i64| -700_000 + if t >= step { 2_000_000 } else { 0 };
        let mut k = run(o, 30);
        let mut within = 0;
        let mut n = 0;
        for ms in (1_000..29_000).step_by(100) {
            let t = t0 + ms * 1_000_000 + 50_000_000;
            let f = k.fit(1, t).expect("a fit");
            n += 1;
            if (f.offset_at(t) - o(t)).abs() <= f.uncertainty_ns {
                within += 1;
            }
        }
        assert!(within * 100 >= n * 97, "{within} of {n} within their error bar");
        let s = k.summaries(&["pc1".into(), "pc2".into()]);
        assert!(s[0].step_fits > 0, "{s:?}");
    }

    /// Host 1 (at the reference) sends every 5 ms; host 2 (at capture 1) answers every `answer`
    /// (1 ms after a send) from `answers_from` on; capture 1's clock = reference + o(t); 40 µs each way.
    fn sparse_answers(o: impl Fn(i64) -> i64, secs: i64, answer: i64, answers_from: i64) -> ClockTracker {
        let mut k = ClockTracker::new(2, ClockLimits::default());
        let d = 40_000;
        let t0 = 1_000_000_000_000i64;
        for i in 0..secs * 200 {
            let t = t0 + i * 5_000_000;
            let key = 2 * i as u64;
            k.push(0, Exchange { key, ts_ns: t, src: ip(1), prefix: GuidPrefix([1; 12]) });
            k.push(1, Exchange { key, ts_ns: t + d + o(t + d), src: ip(1), prefix: GuidPrefix([1; 12]) });
            let t2 = t + 1_000_000;
            if t - t0 >= answers_from && (t - t0 - answers_from) % answer == 0 {
                k.push(1, Exchange { key: key + 1, ts_ns: t2 + o(t2), src: ip(2), prefix: GuidPrefix([2; 12]) });
                k.push(0, Exchange { key: key + 1, ts_ns: t2 + d, src: ip(2), prefix: GuidPrefix([2; 12]) });
            }
        }
        k
    }

    #[test]
    fn a_step_inside_a_bucket_is_located_where_one_direction_is_silent() {
        // Capture 1's side answers every 100 ms (at …01 ms): a 2 ms step at 15.037 s leaves the
        // 64 ms after it without a sighting that only the new line explains. The step's own bucket
        // (15.0–15.1 s) reads the old line before it and the new one after it, as the reference's
        // own traffic (every 5 ms, 40 µs late by either line) places it.
        let t0 = 1_000_000_000_000i64;
        let step = t0 + 15_037_000_000;
        let o = |t: i64| -700_000 + if t >= step { 2_000_000 } else { 0 };
        let mut k = sparse_answers(o, 30, 100_000_000, 0);
        for ms in [15_000, 15_030, 15_036, 15_038, 15_040, 15_060, 15_099, 15_100, 15_150, 14_990] {
            let t = t0 + ms * 1_000_000;
            let f = k.fit(1, t).expect("a fit");
            let err = (f.offset_at(t) - o(t)).abs();
            assert!(err <= f.uncertainty_ns.max(5_000), "at {ms} ms: {} vs {} ± {} ({f:?})", f.offset_at(t), o(t), f.uncertainty_ns);
        }
        let f = k.fit(1, t0 + 15_050_000_000).unwrap();
        let s = f.step.expect("the step inside its bucket");
        assert!((s.at_ns - step).abs() <= 5_000_000, "{} ms from the step", (s.at_ns - step) as f64 / 1e6);
    }

    #[test]
    fn the_first_fit_places_both_sides() {
        // No answer in the run's first 300 ms: the first bucket's own slices cannot split the hosts,
        // the later slices of its window can.
        let mut k = sparse_answers(|_| 3_000_000, 10, 5_000_000, 300_000_000);
        assert!(k.fit(1, 1_000_000_000_000 + 10_000_000).is_some());
        let mut p = k.placements();
        p.sort();
        assert_eq!(p, vec![(GuidPrefix([1; 12]), 0), (GuidPrefix([2; 12]), 1)]);
    }

    #[test]
    fn one_way_traffic_fits_nothing() {
        let mut k = ClockTracker::new(2, ClockLimits::default());
        for i in 0..1000 {
            let t = 1_000_000_000 + i * 5_000_000;
            k.push(0, Exchange { key: i as u64, ts_ns: t, src: ip(1), prefix: GuidPrefix([1; 12]) });
            k.push(1, Exchange { key: i as u64, ts_ns: t + 50_000, src: ip(1), prefix: GuidPrefix([1; 12]) });
        }
        assert_eq!(k.fit(1, 2_000_000_000), None);
        assert!(k.placements().is_empty());
    }

    #[test]
    fn a_key_sent_again_pairs_once_and_never_a_wait_apart() {
        // The same key at both captures at 0 s, then again 16 s later (a copy sent again, as SPDP
        // announcements are), capture 1 read ahead of the reference (its sighting of the copy comes
        // first, while the reference's first sighting still lies in its map).
        let mut k = ClockTracker::new(2, ClockLimits::default());
        let x = |key, ts_ns| Exchange { key, ts_ns, src: ip(1), prefix: GuidPrefix([1; 12]) };
        let s = 1_000_000_000i64;
        k.push(0, x(7, 100 * s));
        k.push(1, x(7, 100 * s + 50_000));
        for i in 0..12 {
            k.push(1, x(1000 + i, 101 * s + i as i64 * s)); // capture 1 reads on, expiring its key 7
        }
        k.push(1, x(7, 116 * s + 50_000));
        assert_eq!(k.pairs[1].matched, 1, "the copy 16 s later was paired with the first sighting");
        k.push(0, x(7, 116 * s)); // the reference expires its first sighting, then pairs the copies
        assert_eq!(k.pairs[1].matched, 2);
        k.push(0, x(7, 116 * s + 1)); // a retransmission of the copy: its first sighting counts
        assert_eq!(k.pairs[1].matched, 2);
        let ds: Vec<i64> = k.pairs[1].slots.iter().flat_map(|s| [s.min.1, s.max.1]).collect();
        assert!(ds.iter().all(|d| *d == 50_000), "{ds:?}");
    }

    #[test]
    fn clocks_seconds_apart_pair_by_the_offset_applied() {
        let mut k = ClockTracker::new(2, ClockLimits::default());
        let x = |key, ts_ns| Exchange { key, ts_ns, src: ip(1), prefix: GuidPrefix([1; 12]) };
        let s = 1_000_000_000i64;
        k.push(0, x(1, 100 * s));
        k.push(1, x(1, 137 * s)); // 37 s ahead, nothing applied: a wait apart
        assert_eq!(k.pairs[1].matched, 0);
        k.set_pairing_offset(1, 37 * s);
        k.push(0, x(2, 101 * s));
        k.push(1, x(2, 138 * s + 50_000));
        assert_eq!(k.pairs[1].matched, 1);
    }

    #[test]
    fn spdp_announcements_are_not_exchanges() {
        let e = |entity: EntityId| {
            let mut e = SubmsgEvent::blank(std::sync::Arc::from("cap"));
            e.kind = SubmsgKind::Data;
            e.sn = Some(1);
            e.writer_id = Some(ddscope_wire::Guid { prefix: GuidPrefix([1; 12]), entity });
            e.ip_first_ts_ns = e.ts_ns;
            e
        };
        assert_eq!(Exchange::of(&e(EntityId::SPDP_PARTICIPANT_WRITER)), None);
        assert!(Exchange::of(&e(EntityId([0, 0, 1, 3]))).is_some());
    }

    /// Exchanges of the two directions at the given (reference time, from the reference's side)
    /// instants, one kernel clock (true offset 0), one-way delays of 0.6 to 7 µs.
    fn one_clock(events: &mut Vec<(i64, bool)>) -> Vec<(usize, Exchange)> {
        events.sort();
        let mut out = vec![];
        for (i, &(t, from_ref)) in events.iter().enumerate() {
            let key = i as u64 + 1;
            let d = 600 + (i as i64 * 7919) % 6_500;
            let (src, n) = if from_ref { (ip(1), 1) } else { (ip(2), 2) };
            let (seen0, seen1) = if from_ref { (t, t + d) } else { (t + d, t) };
            out.push((0, Exchange { key, ts_ns: seen0, src, prefix: GuidPrefix([n; 12]) }));
            out.push((1, Exchange { key, ts_ns: seen1, src, prefix: GuidPrefix([n; 12]) }));
        }
        out
    }

    fn fits_leaving_zero_outside(k: &mut ClockTracker, t0: i64, until_ms: i64) -> Vec<(i64, Fit)> {
        let mut bad = vec![];
        for ms in (0..until_ms).step_by(100) {
            let t = t0 + ms * 1_000_000 + 50_000_000;
            if let Some(f) = k.fit(1, t) {
                if f.offset_at(t).abs() > f.uncertainty_ns {
                    bad.push((ms, f));
                }
            }
        }
        bad
    }

    #[test]
    fn sparse_exchanges_never_move_one_clock_out_of_its_error_bar() {
        // A clean lab run on one kernel clock as a loaded CI machine recorded it: a burst of
        // discovery at the start, then exchanges only every 8 s (the builtin writers' heartbeats
        // and their ACKNACKs). A line that reaches 4 s from its points must say how little it
        // knows there; a loose line's slope must not bind the next one (it made the next window
        // look like a step, and moved the clock by 136 µs on a 0 µs offset).
        let t0 = 1_000_000_000_000i64;
        let mut ev = vec![];
        for (ms, from_ref) in [(0, true), (1, false), (6, true), (6, false), (12, false), (16, true), (16, false), (23, false), (24, true), (26, false), (108, false), (113, true), (529, false)] {
            ev.push((t0 + ms * 1_000_000, from_ref));
        }
        for base in [7_983, 15_983] {
            for (ms, from_ref) in [(0, true), (1, false), (11, false), (13, true)] {
                ev.push((t0 + (base + ms) * 1_000_000, from_ref));
            }
        }
        ev.extend([(t0 + 20_657_000_000, true), (t0 + 20_660_000_000, false), (t0 + 21_576_000_000, true)]);
        let mut k = ClockTracker::new(2, ClockLimits::default());
        for (c, x) in one_clock(&mut ev) {
            k.push(c, x);
        }
        let bad = fits_leaving_zero_outside(&mut k, t0, 21_500);
        assert!(bad.is_empty(), "{} fits leave the true offset 0 outside their error bar, first {:?}", bad.len(), bad.first());
        let s = k.summaries(&["pc1".into(), "pc2".into()]);
        assert_eq!(s[0].overlapping_fits, 0, "{s:?}");
    }

    #[test]
    fn a_capture_read_seconds_ahead_still_pairs() {
        // The merge hands over a batch at a time: where traffic is sparse one batch spans seconds,
        // and the reference was read 12.9 s ahead of capture 1 (its keys then expired before
        // capture 1's sightings came: 22 of 95 exchanges paired). Keys wait for the capture behind.
        let t0 = 1_000_000_000_000i64;
        let mut ev: Vec<(i64, bool)> = (0..40).map(|i| (t0 + i * 500_000_000, i % 2 == 0)).collect();
        let xs = one_clock(&mut ev);
        let mut k = ClockTracker::new(2, ClockLimits::default());
        for (c, x) in xs.iter().filter(|(c, _)| *c == 0) {
            k.push(*c, *x);
        }
        for (c, x) in xs.iter().filter(|(c, _)| *c == 1) {
            k.push(*c, *x);
        }
        assert_eq!(k.pairs[1].matched, 40);
        // Once the capture behind has ended, the reference's keys expire again.
        k.set_ended(1, true);
        k.push(0, Exchange { key: 10_000, ts_ns: t0 + 60_000_000_000, src: ip(1), prefix: GuidPrefix([1; 12]) });
        assert_eq!(k.keys[0].0.len(), 1, "{:?}", k.stats);
    }

    #[test]
    fn claims_are_contradicted_only_beyond_both_bounds_and_the_error_bar() {
        // pc2's chrony: within 20 µs; pc1's: within 15 µs; the traffic: 300 ± 10 µs apart.
        let c = ClaimCheck::new("pc2", "pc1", 20_000, 15_000, 300_000, 10_000, ("chrony", "chrony"));
        assert!(c.contradicted && c.line.contains("within 20.0 µs") && c.line.contains("+300.0 µs ± 10.0 µs"), "{}", c.line);
        // 40 ± 10 µs apart: 30 µs at least, within 35 µs of bounds.
        assert!(!ClaimCheck::new("pc2", "pc1", 20_000, 15_000, -40_000, 10_000, ("chrony", "ptp4l")).contradicted);
        assert!(ClaimCheck::new("pc2", "pc1", 20_000, 15_000, -46_000, 10_000, ("chrony", "ptp4l")).contradicted);
    }

    #[test]
    fn keys_are_bounded_and_counted() {
        let mut k = ClockTracker::new(2, ClockLimits { max_keys: 100, ..Default::default() });
        for i in 0..1000u64 {
            k.push(0, Exchange { key: i, ts_ns: i as i64, src: ip(1), prefix: GuidPrefix([1; 12]) });
        }
        assert!(k.keys[0].0.len() <= 100);
        assert!(k.stats.keys_evicted >= 899, "{:?}", k.stats);
    }
}
