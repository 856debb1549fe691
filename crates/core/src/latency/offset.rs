//! Clock offset between two capture points, estimated from traffic in both
//! directions (Bosk et al. Eq. 9: d = t_R − t_S − t_o).
//!
//! The same submessage seen at captures A and B gives δ = t_B − t_A. Sent
//! A→B it equals t_o + d (d ≥ 0); sent B→A it equals t_o − d. So every
//! participant on A's side has all its δ above t_o and every participant on
//! B's side below it. Sorting participants by δ and finding the split where
//! the two groups do not overlap tells which side each participant is on —
//! without trusting either clock — and bounds the offset:
//! max δ(B side) ≤ t_o ≤ min δ(A side). The estimate is the midpoint
//! (symmetric minimum one-way delays, as PTP assumes), the uncertainty half
//! the width.

use crate::events::SubmsgEvent;
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::{Guid, GuidPrefix};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::net::SocketAddr;

/// Identifies one transmission of one submessage, the same at every capture point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubmsgKey {
    kind: u8,
    writer: Option<Guid>,
    reader: Option<Guid>,
    a: i64,
    b: i64,
    dst: SocketAddr,
}

impl SubmsgKey {
    /// A key for submessages that identify themselves (sequence numbers or counts).
    pub fn of(e: &SubmsgEvent) -> Option<SubmsgKey> {
        let (kind, a, b) = match e.kind {
            SubmsgKind::Data => (1, e.sn?, 0),
            SubmsgKind::DataFrag => (2, e.sn?, e.fragment_starting_num? as i64),
            SubmsgKind::Heartbeat => (3, e.count? as i64, e.hb_last_sn?),
            SubmsgKind::AckNack => (4, e.count? as i64, e.set_base?),
            SubmsgKind::HeartbeatFrag => (5, e.sn?, e.count? as i64),
            SubmsgKind::NackFrag => (6, e.sn?, e.count? as i64),
            SubmsgKind::Gap => (7, e.gap_start?, e.set_base?),
            _ => return None,
        };
        Some(SubmsgKey { kind, writer: e.writer_id, reader: e.reader_id, a, b, dst: e.dst })
    }
}

/// First sighting of each key at one capture point; keys seen twice are dropped
/// (a retransmission cannot be paired reliably).
#[derive(Default)]
pub struct KeyTimes {
    map: FxHashMap<SubmsgKey, (i64, GuidPrefix, std::net::IpAddr, bool)>,
    limit: usize,
}

impl KeyTimes {
    pub fn with_limit(limit: usize) -> Self {
        KeyTimes { map: FxHashMap::default(), limit }
    }
    pub fn is_full(&self) -> bool {
        self.map.len() >= self.limit
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn add(&mut self, e: &SubmsgEvent) {
        let Some(k) = SubmsgKey::of(e) else { return };
        if let Some(v) = self.map.get_mut(&k) {
            v.3 = true;
            return;
        }
        if !self.is_full() {
            // The sending participant (the RTPS header's) and its host's address.
            self.map.insert(k, (e.ip_first_ts_ns, e.guid_prefix, e.src.ip(), false));
        }
    }
}

/// Result of comparing two capture points.
#[derive(Debug, Clone, Serialize)]
pub struct OffsetEstimate {
    /// Estimated t_o of capture B relative to capture A, ns (B's clock minus A's).
    pub offset_ns: i64,
    /// Half-width of the interval the offset certainly lies in, ns.
    pub uncertainty_ns: i64,
    /// Submessages seen at both captures.
    pub matched: usize,
    /// Participants whose traffic flows A→B and B→A.
    pub a_side: Vec<String>,
    pub b_side: Vec<String>,
    /// The same participants as prefixes.
    #[serde(skip)]
    pub a_prefixes: Vec<GuidPrefix>,
    #[serde(skip)]
    pub b_prefixes: Vec<GuidPrefix>,
    /// Minimum one-way delays implied by the estimate (A→B, B→A), ns.
    pub min_delay_ab_ns: i64,
    pub min_delay_ba_ns: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OffsetError {
    NoCommonTraffic,
    OneDirection { participants: usize },
    Overlapping,
}

impl std::fmt::Display for OffsetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OffsetError::NoCommonTraffic => f.write_str("no submessage was seen at both capture points"),
            OffsetError::OneDirection { participants } => write!(
                f,
                "all common traffic comes from one host address ({participants} participant(s)): an offset needs traffic in both directions (reliable topics' ACKNACKs suffice)"
            ),
            OffsetError::Overlapping => {
                f.write_str("the two directions overlap in time: the captures are not two ends of one path")
            }
        }
    }
}

/// The capture each participant sends from, from the estimates of captures 1.. against capture 0
/// ([`estimate_offsets`](super::files::estimate_offsets)): clock-independent, since a participant's
/// side of a pair follows from the order of its δ among all participants', not from its sign. A
/// participant on capture i's side of pair (0, i) and on no other capture's side is at capture i;
/// one on capture 0's side of every pair that saw it is at capture 0; any other (on two captures'
/// sides: behind both, or seen by one pair only wrongly) is left to time order.
pub fn place_participants(estimates: &[Result<OffsetEstimate, OffsetError>]) -> Vec<(GuidPrefix, usize)> {
    // Per participant: the captures whose side it is on (0 = the reference's side of a pair).
    let mut sides: FxHashMap<GuidPrefix, (u64, bool)> = FxHashMap::default();
    for (i, e) in estimates.iter().enumerate() {
        let Ok(e) = e else { continue };
        for p in &e.a_prefixes {
            sides.entry(*p).or_default().0 |= 1;
        }
        for p in &e.b_prefixes {
            let s = sides.entry(*p).or_default();
            if i + 1 < 64 {
                s.0 |= 1 << (i + 1);
            } else {
                s.1 = true;
            }
        }
    }
    let mut out: Vec<(GuidPrefix, usize)> = sides
        .into_iter()
        .filter_map(|(p, (mask, over))| {
            let others = mask & !1;
            match (over, others.count_ones()) {
                (false, 0) => Some((p, 0)),
                (false, 1) => Some((p, others.trailing_zeros() as usize)),
                _ => None,
            }
        })
        .collect();
    out.sort();
    out
}

/// An IPv4 fragment on Ethernet (optionally VLAN-tagged): skipped by the estimate's reading.
pub fn is_ip_fragment(p: &crate::source::Packet<'_>) -> bool {
    if p.link != ddscope_wire::link::LinkType::Ethernet {
        return false;
    }
    let d = p.data;
    let mut off = 12;
    while d.len() >= off + 2 && matches!(u16::from_be_bytes([d[off], d[off + 1]]), 0x8100 | 0x88a8) {
        off += 4;
    }
    if d.len() < off + 2 + 8 || u16::from_be_bytes([d[off], d[off + 1]]) != 0x0800 {
        return false;
    }
    let ip = off + 2;
    let frag = u16::from_be_bytes([d[ip + 6], d[ip + 7]]);
    frag & 0x3fff != 0
}

/// Participants remembered per sending host (the placement of writers; more go by time order).
pub const MAX_PARTICIPANTS_PER_HOST: usize = 4096;

/// The offset of `b` against `a` from the keys seen at both. Clocks that drift apart widen each
/// direction's spread (30 ppm: 60 µs over 2 s, more than a LAN's two one-way delays), so where the
/// whole window's directions overlap, the estimate is tried again on shorter prefixes of it
/// (a quarter, a sixteenth, a sixty-fourth of what `a` saw), the first that separates them taken.
pub fn estimate(a: &KeyTimes, b: &KeyTimes) -> Result<OffsetEstimate, OffsetError> {
    let first = estimate_until(a, b, i64::MAX);
    if !matches!(first, Err(OffsetError::Overlapping)) {
        return first;
    }
    let (Some(lo), Some(hi)) = (a.map.values().map(|v| v.0).min(), a.map.values().map(|v| v.0).max()) else { return first };
    let span = hi.saturating_sub(lo);
    for div in [4, 16, 64] {
        match estimate_until(a, b, lo.saturating_add(span / div)) {
            Ok(e) => return Ok(e),
            Err(OffsetError::Overlapping) => continue,
            Err(_) => break,
        }
    }
    first
}

/// The median of `t_B − t_A` over the keys seen once at both: the clocks' difference to within the
/// one-way delays and the window's drift, where [`estimate`] cannot split the two directions
/// (delays below the captures' time resolution, drift). Good enough to pair the clock tracker's keys
/// (within seconds), never applied to a latency.
pub fn coarse_offset(a: &KeyTimes, b: &KeyTimes) -> Option<i64> {
    let mut d: Vec<i64> = a
        .map
        .iter()
        .filter(|(_, v)| !v.3)
        .filter_map(|(k, (ta, ..))| b.map.get(k).filter(|v| !v.3).map(|(tb, ..)| tb.saturating_sub(*ta)))
        .collect();
    if d.is_empty() {
        return None;
    }
    let mid = d.len() / 2;
    Some(*d.select_nth_unstable(mid).1)
}

/// [`estimate`] on the keys `a` saw at or before `until`.
fn estimate_until(a: &KeyTimes, b: &KeyTimes, until: i64) -> Result<OffsetEstimate, OffsetError> {
    // Per sending host (source address): min and max δ, and its participants. Grouping by address,
    // not by participant, keeps two participants of one host on one side: several participants
    // sending one way only must not pass for the two directions.
    let mut by_host: FxHashMap<std::net::IpAddr, (i64, i64, Vec<GuidPrefix>)> = FxHashMap::default();
    let mut matched = 0;
    for (k, (ta, pa, ip, dup_a)) in &a.map {
        let Some((tb, _, _, dup_b)) = b.map.get(k) else { continue };
        if *dup_a || *dup_b || *ta > until {
            continue;
        }
        matched += 1;
        let d = tb.saturating_sub(*ta);
        let e = by_host.entry(*ip).or_insert((i64::MAX, i64::MIN, vec![]));
        e.0 = e.0.min(d);
        e.1 = e.1.max(d);
        if !e.2.contains(pa) && e.2.len() < MAX_PARTICIPANTS_PER_HOST {
            e.2.push(*pa);
        }
    }
    if matched == 0 {
        return Err(OffsetError::NoCommonTraffic);
    }
    let mut parts: Vec<(Vec<GuidPrefix>, i64, i64)> = by_host.into_values().map(|(lo, hi, p)| (p, lo, hi)).collect();
    if parts.len() < 2 {
        return Err(OffsetError::OneDirection { participants: parts.iter().map(|p| p.0.len()).sum() });
    }
    parts.sort_by_key(|p| (p.1, p.2));
    // Valid splits: everything left of k lies below everything from k on.
    let mut best: Option<(usize, i64)> = None;
    let mut left_max = i64::MIN;
    for k in 1..parts.len() {
        left_max = left_max.max(parts[k - 1].2);
        let right_min = parts[k..].iter().map(|p| p.1).min().expect("non-empty");
        let gap = right_min.saturating_sub(left_max);
        if gap >= 0 && best.is_none_or(|(_, g)| gap > g) {
            best = Some((k, gap));
        }
    }
    let (k, _) = best.ok_or(OffsetError::Overlapping)?;
    let b_max = parts[..k].iter().map(|p| p.2).max().expect("non-empty");
    let a_min = parts[k..].iter().map(|p| p.1).min().expect("non-empty");
    // Midpoint without overflow: the two bounds can be anywhere in i64.
    let offset = (b_max as i128 + (a_min as i128 - b_max as i128) / 2) as i64;
    Ok(OffsetEstimate {
        offset_ns: offset,
        uncertainty_ns: ((a_min as i128 - b_max as i128) / 2).clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        matched,
        a_side: parts[k..].iter().flat_map(|p| &p.0).map(|p| p.to_string()).collect(),
        b_side: parts[..k].iter().flat_map(|p| &p.0).map(|p| p.to_string()).collect(),
        a_prefixes: parts[k..].iter().flat_map(|p| p.0.iter().copied()).collect(),
        b_prefixes: parts[..k].iter().flat_map(|p| p.0.iter().copied()).collect(),
        min_delay_ab_ns: a_min.saturating_sub(offset),
        min_delay_ba_ns: offset.saturating_sub(b_max),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn ev(prefix: u8, kind: SubmsgKind, count: i32, ts: i64) -> SubmsgEvent {
        let mut e = SubmsgEvent::blank(Arc::from("x"));
        e.kind = kind;
        e.guid_prefix = GuidPrefix([prefix; 12]);
        e.writer_id = Some(Guid::new(GuidPrefix([1; 12]), ddscope_wire::EntityId([0, 0, 1, 3])));
        e.reader_id = Some(Guid::new(GuidPrefix([2; 12]), ddscope_wire::EntityId([0, 0, 1, 4])));
        e.count = Some(count);
        e.hb_last_sn = Some(count as i64);
        e.set_base = Some(count as i64);
        e.ip_first_ts_ns = ts;
        e.ts_ns = ts;
        // Participants 1.. on host 10.0.0.1, 2 on 10.0.0.2 unless `on_host` says otherwise.
        e.src = SocketAddr::from(([10, 0, 0, if prefix == 2 { 2 } else { 1 }], 7400));
        e
    }

    #[test]
    fn one_host_sending_one_way_is_not_two_directions() {
        // Two participants of one host, one fast (5..10 µs) and one slow (8..9 ms): their δ do not
        // overlap, and split by participant they passed for the two directions (a bogus 4 ms offset).
        let (mut a, mut b) = (KeyTimes::with_limit(1000), KeyTimes::with_limit(1000));
        for i in 0..20 {
            let t = i as i64 * 1_000_000;
            a.add(&ev(1, SubmsgKind::Heartbeat, i, t));
            b.add(&ev(1, SubmsgKind::Heartbeat, i, t + 5_000 + (i as i64 % 5) * 1_000));
            a.add(&ev(3, SubmsgKind::Heartbeat, 100 + i, t));
            b.add(&ev(3, SubmsgKind::Heartbeat, 100 + i, t + 8_000_000 + (i as i64 % 5) * 200_000));
        }
        assert_eq!(estimate(&a, &b).unwrap_err(), OffsetError::OneDirection { participants: 2 });
    }

    #[test]
    fn participants_are_placed_at_their_side_whatever_the_offset() {
        // B is 12.3 ms ahead: every sample reaches B "before" it left A, and time order would flip
        // the sender; the split still puts participant 1 at capture 0 and 2 at capture 1.
        let off = 12_300_000i64;
        let (mut a, mut b) = (KeyTimes::with_limit(1000), KeyTimes::with_limit(1000));
        for i in 0..10 {
            let t = i as i64 * 1_000_000;
            a.add(&ev(1, SubmsgKind::Heartbeat, i, t));
            b.add(&ev(1, SubmsgKind::Heartbeat, i, t + 5_000 - off));
            b.add(&ev(2, SubmsgKind::AckNack, i, t + 10_000 - off));
            a.add(&ev(2, SubmsgKind::AckNack, i, t + 16_000));
        }
        let e = estimate(&a, &b);
        assert_eq!(e.as_ref().unwrap().offset_ns, -off - 500);
        assert_eq!(place_participants(&[e]), vec![(GuidPrefix([1; 12]), 0), (GuidPrefix([2; 12]), 1)]);
    }

    #[test]
    fn drifting_clocks_are_estimated_on_a_shorter_prefix() {
        // B runs 37 s ahead and 30 ppm slow: over 2 s the offset moves 60 µs, more than the 5 µs and
        // 6 µs one-way delays, so the whole window's directions overlap; its first 125 ms do not.
        let off = 37_000_000_000i64;
        let (mut a, mut b) = (KeyTimes::with_limit(10_000), KeyTimes::with_limit(10_000));
        let at_b = |t: i64| t + off - t * 30 / 1_000_000;
        for i in 0..2000 {
            let t = i as i64 * 1_000_000;
            a.add(&ev(1, SubmsgKind::Heartbeat, i, t));
            b.add(&ev(1, SubmsgKind::Heartbeat, i, at_b(t + 5_000)));
            b.add(&ev(2, SubmsgKind::AckNack, i, at_b(t + 100_000)));
            a.add(&ev(2, SubmsgKind::AckNack, i, t + 106_000));
        }
        assert_eq!(estimate_until(&a, &b, i64::MAX).unwrap_err(), OffsetError::Overlapping);
        let e = estimate(&a, &b).unwrap();
        assert!((e.offset_ns - off).abs() <= e.uncertainty_ns + 10_000, "{e:?}");
        assert!(e.uncertainty_ns < 20_000, "{e:?}");
        assert_eq!((e.a_side.len(), e.b_side.len()), (1, 1));
    }

    #[test]
    fn recovers_offset_and_sides() {
        // B's clock is 37 s ahead; A→B takes 100..300 µs, B→A 120..400 µs.
        let off = 37_000_000_000i64;
        let (mut a, mut b) = (KeyTimes::with_limit(1000), KeyTimes::with_limit(1000));
        for i in 0..50 {
            let t = i as i64 * 1_000_000;
            let d_ab = 100_000 + (i % 5) * 50_000;
            a.add(&ev(1, SubmsgKind::Heartbeat, i as i32, t));
            b.add(&ev(1, SubmsgKind::Heartbeat, i as i32, t + d_ab + off));
            let d_ba = 120_000 + (i % 7) * 40_000;
            b.add(&ev(2, SubmsgKind::AckNack, i as i32, t + off));
            a.add(&ev(2, SubmsgKind::AckNack, i as i32, t + d_ba));
        }
        let e = estimate(&a, &b).unwrap();
        // Bounds: off-120µs .. off+100µs -> midpoint off-10µs, uncertainty 110µs.
        assert_eq!(e.offset_ns, off - 10_000);
        assert_eq!(e.uncertainty_ns, 110_000);
        assert!((e.offset_ns - off).abs() <= e.uncertainty_ns);
        assert_eq!(e.a_side, vec![GuidPrefix([1; 12]).to_string()]);
        assert_eq!(e.matched, 100);
    }

    #[test]
    fn one_way_traffic_is_refused() {
        let (mut a, mut b) = (KeyTimes::with_limit(10), KeyTimes::with_limit(10));
        a.add(&ev(1, SubmsgKind::Heartbeat, 1, 0));
        b.add(&ev(1, SubmsgKind::Heartbeat, 1, 5));
        assert_eq!(estimate(&a, &b).unwrap_err(), OffsetError::OneDirection { participants: 1 });
        assert_eq!(estimate(&a, &KeyTimes::with_limit(1)).unwrap_err(), OffsetError::NoCommonTraffic);
    }
}
