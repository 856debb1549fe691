//! IPv4/IPv6 fragment reassembly with bounded state.
//!
//! Large DDS samples travel as UDP datagrams of up to 64 KB split into IP
//! fragments; the RTPS submessages can only be read from the whole datagram.
//! The reassembler also keeps what the thesis measures: how many fragments a
//! datagram had and when its first and last fragment were captured.
//! State is bounded by a timeout (capture time) and by capacity: datagrams,
//! and bytes counted as the memory really held (buffer capacity, the lists
//! of received ranges and a fixed cost per datagram), so the byte cap holds
//! against any fragment pattern. Whatever is dropped is counted.

use crate::bounded::BoundedMap;
use std::net::IpAddr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub protocol: u8,
    pub ident: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct ReassemblyLimits {
    /// A datagram whose first fragment is older than this (capture time) is dropped.
    pub timeout_ns: i64,
    /// Datagrams being reassembled at once; the oldest is dropped first.
    pub max_datagrams: usize,
    /// Memory all datagrams being reassembled may hold together (buffers,
    /// range lists, per-datagram overhead); the oldest are dropped first.
    pub max_bytes: usize,
}

impl Default for ReassemblyLimits {
    fn default() -> Self {
        // Linux keeps fragments 30 s (ipfrag_time); on a capture, 5 s of silence
        // means the rest was lost. 64 MiB holds ~1000 full-size datagrams in flight.
        ReassemblyLimits { timeout_ns: 5_000_000_000, max_datagrams: 4096, max_bytes: 64 << 20 }
    }
}

/// Counters reported at the end of a run.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ReassemblyStats {
    pub fragments: u64,
    pub datagrams_completed: u64,
    /// Dropped because the rest did not arrive within the timeout.
    pub datagrams_timed_out: u64,
    /// Dropped to stay within the capacity limits.
    pub datagrams_evicted: u64,
    /// Still incomplete when the capture ended.
    pub datagrams_incomplete_at_end: u64,
    /// Fragments that repeated bytes already received (exact duplicates).
    pub duplicate_fragments: u64,
    /// Fragments that partly overlapped received bytes.
    pub overlapping_fragments: u64,
    /// Fragments that would make a datagram longer than 65535 bytes.
    pub oversized_fragments: u64,
    /// Datagrams dropped because their fragments left more than
    /// [`MAX_RANGES`] separate pieces (no real sender fragments like that).
    pub datagrams_too_fragmented: u64,
    /// Peak memory held by datagrams in reassembly, as accounted against `max_bytes`.
    pub peak_bytes: u64,
}

/// A datagram put back together.
#[derive(Debug)]
pub struct Reassembled<M> {
    /// The datagram's bytes from offset 0 as far as the capture holds them
    /// (all of it unless fragments were cut by a snap length).
    pub data: Vec<u8>,
    /// The datagram's length on the wire.
    pub total_len: u32,
    pub fragments: u16,
    pub first_ts_ns: i64,
    pub last_ts_ns: i64,
    pub first_frame: u64,
    /// Metadata of the first-captured fragment (link layer, interface).
    pub meta: M,
    /// Metadata of each fragment in capture order, the first
    /// [`MAX_LISTED_FRAGMENTS`] of them (`fragments` counts them all;
    /// duplicates are neither listed nor counted). Give it back with
    /// [`Reassembler::recycle_frames`].
    pub frames: Vec<M>,
}

struct Pending<M> {
    data: Vec<u8>,
    /// Received byte ranges (as the IP headers declare them), sorted and disjoint.
    have: Vec<(u32, u32)>,
    /// Byte ranges whose bytes the capture holds.
    captured: Vec<(u32, u32)>,
    total: Option<u32>,
    fragments: u16,
    /// Capture time of the datagram's first fragment to arrive (expiry).
    arrived_ns: i64,
    first_ts_ns: i64,
    last_ts_ns: i64,
    first_frame: u64,
    meta: M,
    /// Metadata of the fragments received, at most [`MAX_LISTED_FRAGMENTS`].
    frames: Vec<M>,
}

/// Fragments of one datagram whose metadata is listed in [`Reassembled::frames`]:
/// a 64 KB datagram at MTU 1500 has 45; more are counted, not listed.
pub const MAX_LISTED_FRAGMENTS: usize = 64;

/// Separate received pieces a datagram may have before it is dropped: a
/// 64 KB datagram in 1480-byte fragments has 45, and reordering leaves far
/// fewer holes; a flood of tiny fragments with gaps would otherwise cost
/// memory and time per fragment.
pub const MAX_RANGES: usize = 128;

/// Memory of one pending datagram beyond its buffers: the entry, its key
/// twice (index and slot) and the range lists' headers.
const PENDING_OVERHEAD: usize = 192;

impl<M> Pending<M> {
    fn cost(&self) -> usize {
        self.data.capacity() + (self.have.capacity() + self.captured.capacity()) * 8 + self.frames.capacity() * std::mem::size_of::<M>() + PENDING_OVERHEAD
    }
}

pub struct Reassembler<M> {
    limits: ReassemblyLimits,
    /// In arrival order of each datagram's first fragment (never touched), weighted by memory.
    pending: BoundedMap<FragKey, Pending<M>>,
    pool: Vec<Vec<u8>>,
    /// Fragment lists given back, for reuse (at most 64).
    frame_pool: Vec<Vec<M>>,
    pub stats: ReassemblyStats,
}

/// Keeps the buffers of a datagram that was dropped for reuse.
fn keep<M>(pool: &mut Vec<Vec<u8>>, frame_pool: &mut Vec<Vec<M>>, gone: Pending<M>) {
    if pool.len() < 64 {
        let mut b = gone.data;
        b.clear();
        pool.push(b);
    }
    if frame_pool.len() < 64 {
        let mut f = gone.frames;
        f.clear();
        frame_pool.push(f);
    }
}

const MAX_DATAGRAM: u32 = 65535;

impl<M: Copy> Reassembler<M> {
    pub fn new(limits: ReassemblyLimits) -> Self {
        Reassembler {
            limits,
            pending: BoundedMap::new(limits.max_datagrams).with_max_weight(limits.max_bytes),
            pool: Vec::new(),
            frame_pool: Vec::new(),
            stats: ReassemblyStats::default(),
        }
    }

    /// Gives a finished datagram's buffer back for reuse (at most 64 are
    /// kept, each at most 64 KiB: 4 MiB outside the byte cap).
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.pool.len() < 64 && buf.capacity() <= MAX_DATAGRAM as usize + 1 {
            buf.clear();
            self.pool.push(buf);
        }
    }

    /// Gives a finished datagram's fragment list back for reuse.
    pub fn recycle_frames(&mut self, mut frames: Vec<M>) {
        if self.frame_pool.len() < 64 && frames.capacity() <= MAX_LISTED_FRAGMENTS {
            frames.clear();
            self.frame_pool.push(frames);
        }
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Memory held by datagrams in reassembly, as accounted against the byte cap.
    pub fn bytes(&self) -> usize {
        self.pending.weight()
    }

    /// Adds one fragment; returns the datagram when it is complete.
    #[allow(clippy::too_many_arguments)]
    pub fn push(&mut self, key: FragKey, offset: u32, more: bool, data: &[u8], ts_ns: i64, frame: u64, meta: M) -> Option<Reassembled<M>> {
        self.push_declared(key, offset, more, data, data.len(), ts_ns, frame, meta)
    }

    /// Like [`push`](Self::push) for a fragment the capture may have cut:
    /// `declared_len` is its data length per the IP header, `data` what was
    /// captured. Completion follows the declared lengths, so timing and
    /// fragment counts stay exact in header-only captures.
    #[allow(clippy::too_many_arguments)]
    pub fn push_declared(
        &mut self,
        key: FragKey,
        offset: u32,
        more: bool,
        data: &[u8],
        declared_len: usize,
        ts_ns: i64,
        frame: u64,
        meta: M,
    ) -> Option<Reassembled<M>> {
        self.stats.fragments += 1;
        self.expire(ts_ns);
        let data = &data[..data.len().min(declared_len)];
        let end = offset as u64 + declared_len as u64;
        if end > MAX_DATAGRAM as u64 {
            self.stats.oversized_fragments += 1;
            return None;
        }
        let end = end as u32;
        // A recycled buffer for a new datagram (given back below if unused).
        let mut spare = self.pool.pop();
        let mut spare_frames = self.frame_pool.pop();
        let pool = &mut self.pool;
        let frame_pool = &mut self.frame_pool;
        let evicted = &mut self.stats.datagrams_evicted;
        // Kept in order of each datagram's first fragment: expiry and eviction take the oldest.
        let slot = self.pending.get_or_insert_keep_order(
            key,
            || Pending {
                data: spare.take().unwrap_or_default(),
                have: Vec::with_capacity(4),
                captured: Vec::with_capacity(4),
                total: None,
                fragments: 0,
                arrived_ns: ts_ns,
                first_ts_ns: ts_ns,
                last_ts_ns: ts_ns,
                first_frame: frame,
                meta,
                frames: spare_frames.take().unwrap_or_default(),
            },
            &mut |_, gone| {
                *evicted += 1;
                keep(pool, frame_pool, gone);
            },
        );
        if let Some(b) = spare {
            self.pool.push(b);
        }
        if let Some(f) = spare_frames {
            self.frame_pool.push(f);
        }
        let p = self.pending.value_at(slot).expect("slot just returned");
        if !more {
            p.total = Some(end);
        }
        // Classify against what we have.
        let covered = p.have.iter().any(|&(a, b)| a <= offset && end <= b);
        let overlaps = p.have.iter().any(|&(a, b)| offset < b && a < end);
        if covered && declared_len > 0 {
            self.stats.duplicate_fragments += 1;
            return None;
        }
        if overlaps {
            self.stats.overlapping_fragments += 1;
        }
        let cap_end = offset as usize + data.len();
        if p.data.len() < cap_end {
            if p.data.capacity() < cap_end {
                // Grow geometrically, never past the largest datagram (or its known length).
                let limit = p.total.map_or(MAX_DATAGRAM as usize, |t| t as usize).max(cap_end);
                let want = (p.data.capacity() * 2).clamp(cap_end, limit);
                p.data.reserve_exact(want - p.data.len());
            }
            p.data.resize(cap_end, 0);
        }
        p.data[offset as usize..cap_end].copy_from_slice(data);
        insert_range(&mut p.have, offset, end);
        insert_range(&mut p.captured, offset, cap_end as u32);
        p.fragments = p.fragments.saturating_add(1);
        if p.frames.len() < MAX_LISTED_FRAGMENTS {
            p.frames.push(meta);
        }
        p.last_ts_ns = p.last_ts_ns.max(ts_ns);
        p.first_ts_ns = p.first_ts_ns.min(ts_ns);
        if p.have.len() > MAX_RANGES || p.captured.len() > MAX_RANGES {
            if let Some((_, p)) = self.pending.remove_at(slot) {
                keep(&mut self.pool, &mut self.frame_pool, p);
            }
            self.stats.datagrams_too_fragmented += 1;
            return None;
        }
        let complete = matches!(p.total, Some(t) if p.have.len() == 1 && p.have[0] == (0, t));
        if !complete {
            let cost = p.cost();
            let pool = &mut self.pool;
            let frame_pool = &mut self.frame_pool;
            let evicted = &mut self.stats.datagrams_evicted;
            self.pending.set_weight_at(slot, cost, &mut |_, gone| {
                *evicted += 1;
                keep(pool, frame_pool, gone);
            });
            self.stats.peak_bytes = self.stats.peak_bytes.max(self.pending.weight() as u64);
            return None;
        }
        let (_, p) = self.pending.remove_at(slot).expect("present");
        self.stats.datagrams_completed += 1;
        let total = p.total.expect("complete");
        // Keep the bytes captured contiguously from the start.
        let prefix = match p.captured.first() {
            Some(&(0, e)) => e.min(total),
            _ => 0,
        };
        let mut data = p.data;
        data.truncate(prefix as usize);
        Some(Reassembled {
            data,
            total_len: total,
            fragments: p.fragments,
            first_ts_ns: p.first_ts_ns,
            last_ts_ns: p.last_ts_ns,
            first_frame: p.first_frame,
            meta: p.meta,
            frames: p.frames,
        })
    }

    fn expire(&mut self, now_ns: i64) {
        while let Some((_, p)) = self.pending.peek_lru() {
            if now_ns.saturating_sub(p.arrived_ns) <= self.limits.timeout_ns {
                break;
            }
            if let Some((_, p)) = self.pending.pop_lru() {
                self.stats.datagrams_timed_out += 1;
                keep(&mut self.pool, &mut self.frame_pool, p);
            }
        }
    }

    /// Ends the capture: whatever is still pending is counted as incomplete.
    pub fn finish(&mut self) {
        self.stats.datagrams_incomplete_at_end += self.pending.len() as u64;
        self.pending.clear();
    }
}

fn insert_range(have: &mut Vec<(u32, u32)>, a: u32, b: u32) {
    if a >= b {
        return;
    }
    let mut lo = a;
    let mut hi = b;
    // Merge every range that touches [a, b).
    have.retain(|&(x, y)| {
        if y < lo || x > hi {
            true
        } else {
            lo = lo.min(x);
            hi = hi.max(y);
            false
        }
    });
    let pos = have.partition_point(|&(x, _)| x < lo);
    have.insert(pos, (lo, hi));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn key(id: u32) -> FragKey {
        FragKey { src: IpAddr::V4(Ipv4Addr::LOCALHOST), dst: IpAddr::V4(Ipv4Addr::BROADCAST), protocol: 17, ident: id }
    }

    #[test]
    fn out_of_order_completion_keeps_first_and_last_times() {
        let mut r: Reassembler<()> = Reassembler::new(ReassemblyLimits::default());
        let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        assert!(r.push(key(1), 1480, true, &payload[1480..2960], 20, 2, ()).is_none());
        assert!(r.push(key(1), 2960, false, &payload[2960..], 30, 3, ()).is_none());
        let d = r.push(key(1), 0, true, &payload[..1480], 10, 4, ()).unwrap();
        assert_eq!(d.data, payload);
        assert_eq!((d.fragments, d.first_ts_ns, d.last_ts_ns, d.first_frame), (3, 10, 30, 2));
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn fragments_are_listed_in_capture_order_up_to_the_cap() {
        let mut r: Reassembler<u64> = Reassembler::new(ReassemblyLimits::default());
        // frame numbers as metadata; frame 11 repeats frame 10 (a duplicate: not listed)
        assert!(r.push(key(3), 8, true, &[0; 8], 1, 10, 10).is_none());
        assert!(r.push(key(3), 8, true, &[0; 8], 2, 11, 11).is_none());
        assert!(r.push(key(3), 0, true, &[0; 8], 3, 12, 12).is_none());
        let d = r.push(key(3), 16, false, &[0; 8], 4, 13, 13).unwrap();
        assert_eq!((d.fragments, d.frames.clone(), d.meta), (3, vec![10, 12, 13], 10));
        r.recycle_frames(d.frames);
        // 100 fragments: 64 listed, all counted
        for i in 0..99u32 {
            assert!(r.push(key(4), i * 8, true, &[0; 8], i as i64, i as u64, i as u64).is_none());
        }
        let d = r.push(key(4), 99 * 8, false, &[0; 8], 99, 99, 99).unwrap();
        assert_eq!(d.fragments, 100);
        assert_eq!(d.frames, (0..MAX_LISTED_FRAGMENTS as u64).collect::<Vec<_>>());
    }

    #[test]
    fn duplicates_and_overlaps_are_counted() {
        let mut r: Reassembler<()> = Reassembler::new(ReassemblyLimits::default());
        r.push(key(2), 0, true, &[1; 16], 1, 1, ());
        r.push(key(2), 0, true, &[1; 16], 2, 2, ());
        assert_eq!(r.stats.duplicate_fragments, 1);
        r.push(key(2), 8, true, &[2; 16], 3, 3, ());
        assert_eq!(r.stats.overlapping_fragments, 1);
        let d = r.push(key(2), 24, false, &[3; 8], 4, 4, ()).unwrap();
        assert_eq!(d.data.len(), 32);
        assert_eq!(&d.data[8..24], &[2; 16]);
    }

    #[test]
    fn timeout_and_capacity_are_bounded_and_counted() {
        let limits = ReassemblyLimits { timeout_ns: 100, max_datagrams: 2, max_bytes: 1 << 20 };
        let mut r: Reassembler<()> = Reassembler::new(limits);
        r.push(key(1), 0, true, &[0; 8], 0, 1, ());
        r.push(key(2), 0, true, &[0; 8], 10, 2, ());
        r.push(key(3), 0, true, &[0; 8], 20, 3, ()); // evicts key 1
        assert_eq!(r.stats.datagrams_evicted, 1);
        r.push(key(4), 0, true, &[0; 8], 500, 4, ()); // 2 and 3 time out
        assert_eq!(r.stats.datagrams_timed_out, 2);
        r.finish();
        assert_eq!(r.stats.datagrams_incomplete_at_end, 1);
        // A late fragment of an expired datagram starts a new, incomplete one.
        assert!(r.push(key(1), 8, false, &[0; 8], 600, 5, ()).is_none());
    }

    #[test]
    fn header_only_fragments_complete_by_declared_length() {
        let mut r: Reassembler<()> = Reassembler::new(ReassemblyLimits::default());
        // Three 1480-byte fragments of which the capture holds 100, 0 and 0 bytes.
        assert!(r.push_declared(key(7), 0, true, &[1; 100], 1480, 10, 1, ()).is_none());
        assert!(r.push_declared(key(7), 1480, true, &[], 1480, 20, 2, ()).is_none());
        let d = r.push_declared(key(7), 2960, false, &[], 500, 30, 3, ()).unwrap();
        assert_eq!(d.total_len, 3460);
        assert_eq!(d.data.len(), 100);
        assert_eq!((d.fragments, d.first_ts_ns, d.last_ts_ns), (3, 10, 30));
    }

    #[test]
    fn oversized_is_refused() {
        let mut r: Reassembler<()> = Reassembler::new(ReassemblyLimits::default());
        assert!(r.push(key(9), 65528, false, &[0; 16], 0, 1, ()).is_none());
        assert_eq!(r.stats.oversized_fragments, 1);
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn byte_cap_evicts() {
        let limits = ReassemblyLimits { timeout_ns: i64::MAX, max_datagrams: 100, max_bytes: 20_000 };
        let mut r: Reassembler<()> = Reassembler::new(limits);
        for i in 0..10 {
            r.push(key(i), 0, true, &[0; 8000], i as i64, 1, ());
        }
        assert!(r.stats.datagrams_evicted >= 7);
        assert!(r.pending() <= 3);
    }
}
