//! What a capture point's link carried over time, in fine bins: every
//! frame's bytes on the wire, and how many of them were RTPS. `latency
//! --explain` reads it to tell a sample that waited behind other traffic
//! (a busy link: the queue of the sender's egress, or of the switch port
//! towards the receiver) from one delayed for another reason.
//!
//! Memory is bounded: at most `max_bins` bins; when the capture outgrows
//! them the bins are merged in pairs (the width doubles), so a long capture
//! keeps its whole timeline at a coarser resolution, which is reported.

use super::Analysis;
use crate::decode::Datagram;
use crate::source::Packet;

/// The resolution and memory of the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkLoadConfig {
    /// Width of a bin at the start (it doubles when the capture outgrows `max_bins`).
    pub bin_ns: i64,
    /// Bins kept (16 bytes each).
    pub max_bins: usize,
}

impl Default for LinkLoadConfig {
    fn default() -> Self {
        // 250 µs: a 64 KB sample takes 0.5 ms at 1 Gbit/s; 2 Mi bins = 8.7 minutes before the first merge (32 MiB).
        LinkLoadConfig { bin_ns: 250_000, max_bins: 1 << 21 }
    }
}

/// Bytes on the wire per bin, and of those, the bytes of frames carrying RTPS.
#[derive(Debug, Clone)]
pub struct LinkLoad {
    cfg: LinkLoadConfig,
    /// The current bin width.
    pub bin_ns: i64,
    /// Start of the first bin (None: no frame yet).
    pub start_ns: Option<i64>,
    bins: Vec<[u64; 2]>,
    /// Frames older than the first bin (time going back at the start), not counted.
    pub frames_before_start: u64,
    /// Times the bins were merged in pairs to stay within `max_bins`.
    pub merges: u32,
}

impl LinkLoad {
    pub fn new(cfg: LinkLoadConfig) -> LinkLoad {
        let cfg = LinkLoadConfig { bin_ns: cfg.bin_ns.max(1), max_bins: cfg.max_bins.max(2) };
        LinkLoad { cfg, bin_ns: cfg.bin_ns, start_ns: None, bins: vec![], frames_before_start: 0, merges: 0 }
    }

    fn add(&mut self, ts_ns: i64, bytes: u64, rtps: bool) {
        let start = *self.start_ns.get_or_insert(ts_ns.div_euclid(self.cfg.bin_ns) * self.cfg.bin_ns);
        if ts_ns < start {
            self.frames_before_start += 1;
            return;
        }
        let mut i = ((ts_ns - start) / self.bin_ns) as u128;
        while i >= self.cfg.max_bins as u128 {
            self.merge();
            i = ((ts_ns - start) / self.bin_ns) as u128;
        }
        let i = i as usize;
        if i >= self.bins.len() {
            self.bins.resize(i + 1, [0, 0]);
        }
        let b = &mut self.bins[i];
        b[0] += bytes;
        if rtps {
            b[1] += bytes;
        }
    }

    /// Doubles the bin width: bins 2k and 2k+1 become bin k.
    fn merge(&mut self) {
        let n = self.bins.len().div_ceil(2);
        for k in 0..n {
            let a = self.bins[2 * k];
            let b = self.bins.get(2 * k + 1).copied().unwrap_or([0, 0]);
            self.bins[k] = [a[0] + b[0], a[1] + b[1]];
        }
        self.bins.truncate(n);
        self.bin_ns = self.bin_ns.saturating_mul(2);
        self.merges += 1;
    }

    /// Bytes (all, RTPS) in [from, to): bins partly inside count in proportion.
    pub fn bytes_between(&self, from: i64, to: i64) -> (f64, f64) {
        let Some(start) = self.start_ns else { return (0.0, 0.0) };
        if to <= from {
            return (0.0, 0.0);
        }
        let w = self.bin_ns;
        let first = (from.max(start) - start) / w;
        let last = (to - start - 1).div_euclid(w);
        let (mut all, mut rtps) = (0.0, 0.0);
        let mut i = first.max(0);
        while i <= last && (i as usize) < self.bins.len() {
            let b0 = start + i * w;
            let inside = (to.min(b0 + w) - from.max(b0)).max(0) as f64 / w as f64;
            let b = self.bins[i as usize];
            all += b[0] as f64 * inside;
            rtps += b[1] as f64 * inside;
            i += 1;
        }
        (all, rtps)
    }

    /// The highest rate (bit/s) the link carried over any `span_ns` (whole bins).
    pub fn peak_bps(&self, span_ns: i64) -> f64 {
        let k = (span_ns / self.bin_ns).max(1) as usize;
        if self.bins.is_empty() {
            return 0.0;
        }
        let k = k.min(self.bins.len());
        let mut sum: u64 = self.bins[..k].iter().map(|b| b[0]).sum();
        let mut best = sum;
        for i in k..self.bins.len() {
            sum = sum + self.bins[i][0] - self.bins[i - k][0];
            best = best.max(sum);
        }
        best as f64 * 8.0 * 1e9 / (k as i64 * self.bin_ns) as f64
    }

    /// Memory held by the bins.
    pub fn bytes_held(&self) -> usize {
        self.bins.capacity() * std::mem::size_of::<[u64; 2]>()
    }
}

impl Analysis for LinkLoad {
    fn frame(&mut self, p: &Packet<'_>) {
        self.add(p.ts_ns, p.orig_len as u64, false);
    }

    /// The frames of an RTPS datagram are counted again as RTPS.
    fn datagram(&mut self, d: &Datagram<'_>) {
        let rtps = ddscope_wire::udp::UdpRepr::parse(d.udp).is_ok_and(|(_, payload)| ddscope_wire::rtps::is_rtps(payload));
        if rtps {
            for f in d.frames {
                if let Some(start) = self.start_ns {
                    if f.ts_ns >= start {
                        let i = ((f.ts_ns - start) / self.bin_ns) as usize;
                        if let Some(b) = self.bins.get_mut(i) {
                            b[1] += f.wire_len as u64;
                        }
                    }
                }
            }
        }
    }

    fn wants_datagrams(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(bin_ns: i64, max_bins: usize, frames: &[(i64, u64)]) -> LinkLoad {
        let mut l = LinkLoad::new(LinkLoadConfig { bin_ns, max_bins });
        for &(t, b) in frames {
            l.add(t, b, false);
        }
        l
    }

    #[test]
    fn bytes_in_a_window_count_partial_bins_in_proportion() {
        let l = load(1000, 100, &[(0, 100), (1500, 200), (2999, 300)]);
        assert_eq!(l.bytes_between(0, 3000).0, 600.0);
        assert_eq!(l.bytes_between(1000, 2000).0, 200.0);
        assert_eq!(l.bytes_between(500, 1500).0, 150.0); // half of bin 0, half of bin 1
        assert_eq!(l.bytes_between(5000, 9000).0, 0.0);
        assert_eq!(l.bytes_between(-5000, 1000).0, 100.0);
    }

    #[test]
    fn outgrowing_the_bins_doubles_their_width_and_keeps_every_byte() {
        let l = load(1000, 4, &[(0, 1), (1000, 2), (2000, 4), (3000, 8), (4000, 16), (9000, 32)]);
        assert_eq!(l.merges, 2);
        assert_eq!(l.bin_ns, 4000);
        assert!(l.bins.len() <= 4);
        assert_eq!(l.bytes_between(0, 12_000).0, 63.0);
        assert_eq!(l.bytes_between(0, 4000).0, 15.0);
    }

    #[test]
    fn peak_rate_over_a_span() {
        // 125 000 bytes in one 1 ms bin = 1 Gbit/s.
        let l = load(1_000_000, 100, &[(0, 1000), (5_000_000, 125_000), (9_000_000, 10)]);
        assert_eq!(l.peak_bps(1_000_000), 1e9);
        assert_eq!(l.peak_bps(2_000_000), 0.5e9);
    }

    #[test]
    fn time_going_back_before_the_first_bin_is_counted_not_binned() {
        let l = load(1000, 10, &[(5000, 1), (4000, 1), (6000, 1)]);
        assert_eq!(l.frames_before_start, 1);
        assert_eq!(l.bytes_between(0, 10_000).0, 2.0);
    }
}
