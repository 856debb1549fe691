//! Latency statistics in bounded memory: exact count, mean, standard
//! deviation, min and max (Welford), percentiles as an HDR histogram with
//! three significant digits (0.1 % relative error) computes them, and jitter
//! (Bosk et al. Eq. 10: d(X) − d(X−1), signed and absolute).
//!
//! A dense HDR histogram of latencies in nanoseconds costs 100–200 KB
//! whatever it holds, and a correlation keeps several per flow and writer.
//! So a [`Dist`] starts *sparse*: one (bucket, count) pair per distinct
//! histogram bucket seen, bucketed exactly as `hdrhistogram` buckets, and
//! becomes a dense `hdrhistogram::Histogram` only once that would be
//! smaller. Both answer every query with the same numbers (a property test
//! checks it against a plain histogram), so results do not depend on the
//! representation; a flow with a handful of samples costs a few hundred bytes.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// Significant digits of every latency histogram.
const SIGFIG: u8 = 3;
/// A sparse store never holds more distinct buckets than this (64 KiB);
/// beyond it, or once a dense histogram would be smaller, it becomes dense.
const MAX_SPARSE_BUCKETS: usize = 4096;

/// An empty histogram whose only use is its bucket arithmetic
/// (`lowest_equivalent`, `highest_equivalent`), which does not depend on counts.
fn buckets() -> &'static Histogram<u64> {
    static T: OnceLock<Histogram<u64>> = OnceLock::new();
    T.get_or_init(|| Histogram::new(SIGFIG).expect("3 significant digits is valid"))
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new(SIGFIG).expect("3 significant digits is valid")
}

/// Entries of a dense histogram able to hold values up to `max`: 1024
/// counters per power of two above 2048, plus the first 2048.
fn dense_len(max: u64) -> usize {
    let bits = 64 - (max | 2047).leading_zeros() as usize;
    (bits - 11 + 2) * 1024
}

/// Values of one sign of a [`Dist`] (the non-negative ones, or the magnitudes
/// of the negative ones), counted per histogram bucket.
#[derive(Clone)]
enum Store {
    /// (lowest value of the bucket, count), sorted by bucket.
    Sparse(Vec<(u64, u64)>),
    Dense(Box<Histogram<u64>>),
}

/// One sign's values: the store and the largest value recorded (for when a
/// sparse store becomes dense, and the histogram's top bucket).
#[derive(Clone)]
struct Side {
    store: Store,
    len: u64,
    max: u64,
}

impl Default for Side {
    fn default() -> Self {
        Side { store: Store::Sparse(Vec::new()), len: 0, max: 0 }
    }
}

impl Side {
    /// Counts `n` values in the bucket of `v`.
    fn add(&mut self, v: u64, n: u64) {
        self.len = self.len.saturating_add(n);
        self.max = self.max.max(v);
        match &mut self.store {
            Store::Dense(h) => {
                // Any u64 fits an auto-resizing histogram.
                let _ = h.record_n(v, n);
            }
            Store::Sparse(s) => {
                let key = buckets().lowest_equivalent(v);
                match s.binary_search_by_key(&key, |e| e.0) {
                    Ok(i) => s[i].1 = s[i].1.saturating_add(n),
                    Err(i) => {
                        if s.len() == s.capacity() {
                            // Grow by a quarter: the store stays within 25 % of its contents.
                            s.reserve_exact((s.len() / 4).max(4));
                        }
                        s.insert(i, (key, n));
                        if s.len() > MAX_SPARSE_BUCKETS.min(dense_len(self.max) / 2) {
                            self.densify();
                        }
                    }
                }
            }
        }
    }

    fn densify(&mut self) {
        if let Store::Sparse(s) = &self.store {
            let mut h = new_histogram();
            for &(key, n) in s {
                let _ = h.record_n(key, n);
            }
            self.store = Store::Dense(Box::new(h));
        }
    }

    fn heap_bytes(&self) -> usize {
        match &self.store {
            Store::Sparse(s) => s.capacity() * std::mem::size_of::<(u64, u64)>(),
            Store::Dense(h) => h.distinct_values() * 8 + std::mem::size_of::<Histogram<u64>>(),
        }
    }

    /// How many values are at most `v` (histogram resolution).
    fn count_at_most(&self, v: u64) -> u64 {
        if self.len == 0 {
            return 0;
        }
        match &self.store {
            Store::Dense(h) => h.count_between(0, v.min(h.max())),
            Store::Sparse(s) => {
                let t = buckets();
                // The histogram's max is the top of the bucket of the largest value.
                let hmax = t.highest_equivalent(self.max);
                let lim = t.lowest_equivalent(v.min(hmax));
                s.iter().take_while(|e| e.0 <= lim).map(|e| e.1).fold(0u64, |a, b| a.saturating_add(b))
            }
        }
    }

    /// `Histogram::value_at_percentile` over the buckets, whatever the store.
    fn value_at_percentile(&self, percentile: f64) -> u64 {
        match &self.store {
            Store::Dense(h) => h.value_at_percentile(percentile),
            Store::Sparse(s) => {
                // The same steps as hdrhistogram's value_at_quantile.
                let quantile = percentile / 100.0;
                let quantile = if quantile > 1.0 { 1.0 } else { quantile };
                let total: u64 = s.iter().map(|e| e.1).fold(0u64, |a, b| a.saturating_add(b));
                let mut count_at_quantile = (quantile * total as f64).ceil() as u64;
                if count_at_quantile == 0 {
                    count_at_quantile = 1;
                }
                let mut acc = 0u64;
                for &(key, n) in s {
                    acc = acc.saturating_add(n);
                    if acc >= count_at_quantile {
                        return if quantile == 0.0 { key } else { buckets().highest_equivalent(key) };
                    }
                }
                0
            }
        }
    }

    fn merge(&mut self, other: &Side) {
        match &other.store {
            Store::Sparse(s) => {
                for &(key, c) in s {
                    self.add(key, c);
                }
            }
            Store::Dense(h) => {
                self.densify();
                self.len = self.len.saturating_add(other.len);
                self.max = self.max.max(other.max);
                if let Store::Dense(mine) = &mut self.store {
                    let _ = mine.add(&**h);
                }
            }
        }
    }

    /// (lowest value of the bucket, count) of the non-empty buckets.
    fn buckets(&self) -> Vec<(u64, u64)> {
        match &self.store {
            Store::Sparse(s) => s.clone(),
            Store::Dense(h) => h.iter_recorded().map(|v| (buckets().lowest_equivalent(v.value_iterated_to()), v.count_at_value())).collect(),
        }
    }
}

/// Distribution of one latency layer for one flow (values in ns). Negative
/// values (a jitter, a layer across unsynchronised clocks) are kept in a
/// histogram of their own, by magnitude, so every percentile is the value of
/// its rank whatever the sign.
#[derive(Clone, Default)]
pub struct Dist {
    count: u64,
    mean: f64,
    m2: f64,
    min: i64,
    max: i64,
    /// The non-negative values.
    pos: Side,
    /// The magnitudes of the negative values.
    neg: Side,
}

/// Summary numbers of a [`Dist`], in milliseconds for humans and JSON.
#[derive(Debug, Clone, Copy, Serialize, Default, PartialEq)]
pub struct DistSummary {
    pub count: u64,
    pub mean_ms: f64,
    pub std_ms: f64,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub negative: u64,
}

impl Dist {
    pub fn record(&mut self, v: i64) {
        if self.count == 0 {
            (self.min, self.max) = (v, v);
        }
        self.count += 1;
        let d = v as f64 - self.mean;
        self.mean += d / self.count as f64;
        self.m2 += d * (v as f64 - self.mean);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        if v < 0 {
            self.neg.add(v.unsigned_abs(), 1);
        } else {
            self.pos.add(v as u64, 1);
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Heap bytes held (for memory budgets).
    pub fn heap_bytes(&self) -> usize {
        self.pos.heap_bytes() + self.neg.heap_bytes()
    }

    /// Whether the values are still counted sparsely (few distinct buckets).
    pub fn is_sparse(&self) -> bool {
        matches!(self.pos.store, Store::Sparse(_)) && matches!(self.neg.store, Store::Sparse(_))
    }

    /// How many recorded values are at most `v` (histogram resolution: 0.1 %).
    pub fn count_at_most(&self, v: i64) -> u64 {
        if v < 0 {
            // Negative values at most v: magnitudes at least |v|.
            let m = v.unsigned_abs();
            return self.neg.len - self.neg.count_at_most(m - 1).min(self.neg.len);
        }
        self.neg.len + self.pos.count_at_most(v as u64)
    }

    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Percentile q in [0, 100]: the value of nearest rank ⌈q/100 · n⌉ (at least
    /// the first), at the histogram's resolution (0.1 %), whatever its sign.
    pub fn percentile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let (lo, hi) = (self.min as f64, self.max as f64);
        let rank = q / 100.0 * self.count as f64;
        let negative = self.neg.len;
        if negative > 0 && rank <= negative as f64 {
            // The k-th smallest value is negative: the (negative − k + 1)-th smallest magnitude.
            let k = (rank.ceil() as u64).clamp(1, negative);
            if k == 1 {
                return Some(lo); // the first rank is the minimum, exactly
            }
            let nth = negative - k + 1;
            // Half a rank below it, so that float rounding cannot reach the next one.
            let pct = ((nth as f64 - 0.5) / negative as f64 * 100.0).clamp(0.0, 100.0);
            // The bucket's edge towards zero: like a non-negative value's upper edge, at or above the value.
            let m = buckets().lowest_equivalent(self.neg.value_at_percentile(pct));
            return Some((-(m as f64)).clamp(lo, hi));
        }
        if self.pos.len == 0 {
            return Some(hi);
        }
        let q_pos = ((rank - negative as f64) / self.pos.len as f64 * 100.0).clamp(0.0, 100.0);
        Some((self.pos.value_at_percentile(q_pos) as f64).clamp(lo, hi))
    }

    pub fn summary(&self) -> DistSummary {
        if self.count == 0 {
            return DistSummary::default();
        }
        let ms = |v: f64| v / 1e6;
        let std = if self.count > 1 { (self.m2 / (self.count - 1) as f64).sqrt() } else { 0.0 };
        DistSummary {
            count: self.count,
            mean_ms: ms(self.mean),
            std_ms: ms(std),
            min_ms: ms(self.min as f64),
            p50_ms: ms(self.percentile(50.0).unwrap_or(0.0)),
            p90_ms: ms(self.percentile(90.0).unwrap_or(0.0)),
            p99_ms: ms(self.percentile(99.0).unwrap_or(0.0)),
            max_ms: ms(self.max as f64),
            negative: self.neg.len,
        }
    }

    pub fn merge(&mut self, other: &Dist) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            (self.min, self.max) = (other.min, other.max);
        }
        let n = self.count + other.count;
        let delta = other.mean - self.mean;
        self.m2 += other.m2 + delta * delta * self.count as f64 * other.count as f64 / n as f64;
        self.mean += delta * other.count as f64 / n as f64;
        self.count = n;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.pos.merge(&other.pos);
        self.neg.merge(&other.neg);
    }
}

/// A [`Dist`] taken apart for shipping (a `serve` shard's mergeable summary):
/// the Welford moments, extremes and the non-empty histogram buckets as
/// (lowest value of the bucket, count). Rebuilt with [`Dist::from_parts`],
/// it answers every query as the original, and merges exactly.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct DistParts {
    pub count: u64,
    pub mean: f64,
    pub m2: f64,
    pub min: i64,
    pub max: i64,
    pub negative: u64,
    pub buckets: Vec<(u64, u64)>,
    /// The negative values' buckets, by magnitude (lowest magnitude of the bucket, count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub negative_buckets: Vec<(u64, u64)>,
}

impl Dist {
    pub fn to_parts(&self) -> DistParts {
        DistParts {
            count: self.count,
            mean: self.mean,
            m2: self.m2,
            min: self.min,
            max: self.max,
            negative: self.neg.len,
            buckets: self.pos.buckets(),
            negative_buckets: self.neg.buckets(),
        }
    }

    /// Rebuilds a distribution; buckets are re-bucketed (so foreign input
    /// cannot break the store's order) and counts must add up.
    pub fn from_parts(p: &DistParts) -> Result<Dist, String> {
        let sum = |b: &[(u64, u64)]| b.iter().try_fold(0u64, |a, b| a.checked_add(b.1)).ok_or("bucket counts overflow");
        let (in_hist, in_neg) = (sum(&p.buckets)?, sum(&p.negative_buckets)?);
        if in_hist.checked_add(p.negative) != Some(p.count) || in_neg != p.negative {
            return Err(format!("histograms hold {in_hist} + {in_neg} negative values, count says {} ({} negative)", p.count, p.negative));
        }
        if p.count == 0 {
            return Ok(Dist::default());
        }
        if p.min > p.max || p.buckets.iter().any(|b| b.0 > i64::MAX as u64) || p.negative_buckets.iter().any(|b| b.0 > 1 << 63 || b.0 == 0) {
            return Err("min above max, a bucket beyond i64 or a negative bucket of magnitude 0".into());
        }
        let mut d = Dist { count: p.count, mean: p.mean, m2: p.m2, min: p.min, max: p.max, ..Dist::default() };
        for &(k, n) in p.buckets.iter().filter(|b| b.1 > 0) {
            d.pos.add(k, n);
        }
        for &(k, n) in p.negative_buckets.iter().filter(|b| b.1 > 0) {
            d.neg.add(k, n);
        }
        Ok(d)
    }
}

/// What a box plot draws (ms): whiskers at p1/p99, box p25–p75, median, mean, extremes.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct BoxStats {
    pub count: u64,
    pub min: f64,
    pub p1: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Dist {
    pub fn box_stats(&self) -> BoxStats {
        let q = |p: f64| self.percentile(p).unwrap_or(0.0) / 1e6;
        if self.count == 0 {
            return BoxStats::default();
        }
        BoxStats {
            count: self.count,
            min: self.min as f64 / 1e6,
            p1: q(1.0),
            p25: q(25.0),
            p50: q(50.0),
            p75: q(75.0),
            p99: q(99.0),
            max: self.max as f64 / 1e6,
            mean: self.mean / 1e6,
        }
    }

    /// Up to `n` points (latency ms, cumulative fraction) of the CDF.
    pub fn cdf(&self, n: usize) -> Vec<(f64, f64)> {
        if self.count == 0 {
            return vec![];
        }
        (0..=n).map(|i| {
            let q = i as f64 / n as f64 * 100.0;
            (self.percentile(q).unwrap_or(0.0) / 1e6, q / 100.0)
        }).collect()
    }
}

/// The previous sample of a stream, for jitter: d(X) − d(X−1) needs only
/// the last (sn, latency) pair.
#[derive(Clone, Copy, Default)]
pub struct JitterTrack {
    last: Option<(i64, i64)>,
}

impl JitterTrack {
    /// Takes the latency `d` of sample `sn`; returns d(X) − d(X−1) when the
    /// previous sample (sn − 1) was the last one taken. Saturates instead of
    /// wrapping on absurd values.
    pub fn next(&mut self, sn: i64, d: i64) -> Option<i64> {
        let j = match self.last {
            Some((prev_sn, prev_d)) if prev_sn.checked_add(1) == Some(sn) => Some(d.saturating_sub(prev_d)),
            _ => None,
        };
        if self.last.is_none_or(|(s, _)| sn > s) {
            self.last = Some((sn, d));
        }
        j
    }
}

/// Jitter of a flow: consecutive-sample latency differences.
#[derive(Clone, Default)]
pub struct Jitter {
    track: JitterTrack,
    pub signed: Dist,
    pub absolute: Dist,
}

impl Jitter {
    /// Records the latency `d` of sample `sn`; returns d(X) − d(X−1) when the
    /// previous sample (sn − 1) was the last one recorded.
    pub fn record(&mut self, sn: i64, d: i64) -> Option<i64> {
        let j = self.track.next(sn, d);
        if let Some(j) = j {
            self.signed.record(j);
            self.absolute.record(j.saturating_abs());
        }
        j
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_and_percentiles() {
        let mut d = Dist::default();
        for v in 1..=1000i64 {
            d.record(v * 1_000_000); // 1..1000 ms
        }
        let s = d.summary();
        assert_eq!(s.count, 1000);
        assert!((s.mean_ms - 500.5).abs() < 1e-9);
        assert!((s.std_ms - 288.8194360957494).abs() < 1e-6);
        assert_eq!((s.min_ms, s.max_ms), (1.0, 1000.0));
        assert!((s.p50_ms - 500.0).abs() / 500.0 < 0.002, "{}", s.p50_ms);
        assert!((s.p99_ms - 990.0).abs() / 990.0 < 0.002, "{}", s.p99_ms);
    }

    #[test]
    fn negatives_are_kept_apart() {
        let mut d = Dist::default();
        for v in [-5, -3, 10, 20] {
            d.record(v);
        }
        assert_eq!(d.summary().negative, 2);
        assert_eq!(d.percentile(10.0), Some(-5.0));
        assert_eq!(d.percentile(50.0), Some(-3.0));
        assert_eq!(d.percentile(75.0), Some(10.0));
        assert_eq!(d.percentile(100.0), Some(20.0));
    }

    #[test]
    fn merge_equals_single_pass() {
        let (mut a, mut b, mut all) = (Dist::default(), Dist::default(), Dist::default());
        for v in 0..100 {
            all.record(v * 7);
            if v % 3 == 0 { a.record(v * 7) } else { b.record(v * 7) }
        }
        a.merge(&b);
        let (x, y) = (a.summary(), all.summary());
        assert!((x.mean_ms - y.mean_ms).abs() < 1e-12 && (x.std_ms - y.std_ms).abs() < 1e-12);
    }

    #[test]
    fn jitter_needs_consecutive_samples() {
        let mut j = Jitter::default();
        assert_eq!(j.record(1, 100), None);
        assert_eq!(j.record(2, 130), Some(30));
        assert_eq!(j.record(3, 110), Some(-20));
        assert_eq!(j.record(5, 110), None); // sample 4 missing
        assert_eq!(j.signed.count(), 2);
        assert_eq!(j.absolute.summary().max_ms, 30.0 / 1e6);
    }

    /// Plain auto-resizing histograms (one of the non-negative values, one of the negative
    /// values' magnitudes) asked as hdrhistogram is asked.
    struct Reference {
        count: u64,
        min: i64,
        max: i64,
        hist: Histogram<u64>,
        neg: Histogram<u64>,
    }

    impl Reference {
        fn new() -> Self {
            Reference { count: 0, min: i64::MAX, max: i64::MIN, hist: new_histogram(), neg: new_histogram() }
        }
        fn record(&mut self, v: i64) {
            self.count += 1;
            self.min = self.min.min(v);
            self.max = self.max.max(v);
            if v < 0 {
                let _ = self.neg.record(v.unsigned_abs());
            } else {
                let _ = self.hist.record(v as u64);
            }
        }
        fn percentile(&self, q: f64) -> Option<f64> {
            if self.count == 0 {
                return None;
            }
            let rank = q / 100.0 * self.count as f64;
            let negative = self.neg.len();
            if negative > 0 && rank <= negative as f64 {
                let k = (rank.ceil() as u64).clamp(1, negative);
                if k == 1 {
                    return Some(self.min as f64);
                }
                let pct = (((negative - k + 1) as f64 - 0.5) / negative as f64 * 100.0).clamp(0.0, 100.0);
                let m = self.neg.lowest_equivalent(self.neg.value_at_percentile(pct));
                return Some((-(m as f64)).clamp(self.min as f64, self.max as f64));
            }
            if self.hist.is_empty() {
                return Some(self.max as f64);
            }
            let q_pos = ((rank - negative as f64) / self.hist.len() as f64 * 100.0).clamp(0.0, 100.0);
            Some((self.hist.value_at_percentile(q_pos) as f64).clamp(self.min as f64, self.max as f64))
        }
        fn count_at_most(&self, v: i64) -> u64 {
            let n = self.neg.len();
            if v < 0 {
                let m = v.unsigned_abs();
                return n - if n == 0 { 0 } else { self.neg.count_between(0, (m - 1).min(self.neg.max())) };
            }
            let max = self.hist.max();
            n + if self.hist.is_empty() { 0 } else { self.hist.count_between(0, (v as u64).min(max)) }
        }
    }

    /// Oracle: the nearest-rank percentile of the sorted values themselves. Every percentile of a
    /// signed distribution (a jitter: half its values negative) is its rank's value to 0.1 %,
    /// negative ranks included (it used to answer the minimum for any rank among the negatives).
    #[test]
    fn signed_percentiles_are_the_values_of_their_ranks() {
        let vals: Vec<i64> = (0..4_001).map(|i: i64| ((i * 7919) % 4_001 - 2_100) * 311).collect();
        let mut d = Dist::default();
        for v in &vals {
            d.record(*v);
        }
        let mut sorted = vals.clone();
        sorted.sort();
        for q in [0.0, 0.1, 1.0, 10.0, 25.0, 33.3, 50.0, 52.0, 75.0, 90.0, 99.0, 100.0] {
            let k = ((q / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            let want = sorted[k - 1] as f64;
            let got = d.percentile(q).unwrap();
            assert!((got - want).abs() <= want.abs() * 0.001 + 1.0, "p{q}: {got}, the rank's value is {want}");
        }
        assert_eq!(d.percentile(0.0), Some(sorted[0] as f64));
        assert!(d.summary().p50_ms < 0.0 && d.summary().p50_ms > d.summary().min_ms, "{:?}", d.summary());
        // Only negative values: the median is the middle one, not the minimum.
        let mut n = Dist::default();
        for v in [-9_000, -7_000, -5_000, -3_000, -1_000] {
            n.record(v);
        }
        assert_eq!(n.percentile(50.0).map(|v| v.round()), Some(-5_000.0));
        assert_eq!(n.percentile(100.0), Some(-1_000.0));
        assert_eq!(n.count_at_most(-5_000), 3);
        assert_eq!(n.count_at_most(-1), 5);
        assert_eq!(n.count_at_most(-10_000), 0);
        // Parts carry the negative buckets: rebuilt, the same answers.
        let back = Dist::from_parts(&d.to_parts()).unwrap();
        assert_eq!(back.summary(), d.summary());
    }

    /// Oracle: the original distribution: parts rebuilt answer alike, and
    /// two halves merged from parts equal one distribution of all values.
    #[test]
    fn parts_round_trip_and_merge_exactly() {
        let vals: Vec<i64> = (0..20_000).map(|i| (i * 7919 % 100_003) * 37 - 5).collect();
        let mut all = Dist::default();
        let (mut a, mut b) = (Dist::default(), Dist::default());
        for (i, v) in vals.iter().enumerate() {
            all.record(*v);
            if i % 3 == 0 { a.record(*v) } else { b.record(*v) }
        }
        assert!(!all.is_sparse());
        let back = Dist::from_parts(&all.to_parts()).unwrap();
        assert_eq!(back.summary(), all.summary());
        let mut m = Dist::from_parts(&a.to_parts()).unwrap();
        m.merge(&Dist::from_parts(&b.to_parts()).unwrap());
        let (x, y) = (m.summary(), all.summary());
        assert_eq!((x.count, x.min_ms, x.max_ms, x.p50_ms, x.p90_ms, x.p99_ms, x.negative), (y.count, y.min_ms, y.max_ms, y.p50_ms, y.p90_ms, y.p99_ms, y.negative));
        assert!((x.mean_ms - y.mean_ms).abs() <= 1e-9 * y.mean_ms.abs().max(1.0));
        assert!((x.std_ms - y.std_ms).abs() <= 1e-9 * y.std_ms.abs().max(1.0));
        let mut bad = a.to_parts();
        bad.count += 1;
        assert!(Dist::from_parts(&bad).is_err());
    }

    const QS: [f64; 12] = [0.0, 0.1, 1.0, 10.0, 25.0, 33.3, 50.0, 75.0, 90.0, 99.0, 99.9, 100.0];

    fn same(d: &Dist, r: &Reference, probes: &[i64]) -> Result<(), proptest::test_runner::TestCaseError> {
        for q in QS {
            prop_assert_eq!(d.percentile(q), r.percentile(q), "percentile {}", q);
        }
        for &v in probes {
            prop_assert_eq!(d.count_at_most(v), r.count_at_most(v), "count_at_most {}", v);
        }
        Ok(())
    }

    fn value() -> impl Strategy<Value = i64> {
        prop_oneof![
            0i64..5_000,
            -1_000_000i64..100_000_000,
            1_000_000i64..1_100_000,
            any::<i64>(),
            Just(i64::MAX),
            Just(0),
        ]
    }

    use proptest::prelude::*;

    proptest! {
        /// Oracle: hdrhistogram itself. Sparse, dense and merged stores give
        /// exactly the percentiles and counts a plain histogram gives.
        #[test]
        fn sparse_and_dense_agree_with_a_histogram(values in proptest::collection::vec(value(), 0..3000), split in 0usize..3000) {
            let mut d = Dist::default();
            let mut r = Reference::new();
            let (mut a, mut b) = (Dist::default(), Dist::default());
            for (i, &v) in values.iter().enumerate() {
                d.record(v);
                r.record(v);
                if i < split { a.record(v) } else { b.record(v) }
            }
            let probes: Vec<i64> = values.iter().take(20).copied().chain([0, 1, 2047, 2048, 1_000_000, i64::MAX, -5, -1, i64::MIN]).collect();
            same(&d, &r, &probes)?;
            a.merge(&b);
            same(&a, &r, &probes)?;
        }
    }

    #[test]
    fn many_distinct_values_become_dense_with_the_same_answers() {
        let mut d = Dist::default();
        let mut r = Reference::new();
        for i in 0..200_000i64 {
            let v = (i * 7919) % 50_000_000;
            d.record(v);
            r.record(v);
        }
        assert!(!d.is_sparse());
        same(&d, &r, &[0, 10_000, 25_000_000, 49_999_999]).unwrap();
        // A flow of a few samples stays small.
        let mut small = Dist::default();
        for v in [2_100_000, 2_200_000, 2_150_000] {
            small.record(v);
        }
        assert!(small.is_sparse() && small.heap_bytes() <= 256, "{}", small.heap_bytes());
        // Dense merged into sparse and the reverse.
        let mut s2 = small.clone();
        s2.merge(&d);
        let mut d2 = d.clone();
        d2.merge(&small);
        assert_eq!(s2.summary(), d2.summary());
    }

    #[test]
    fn jitter_does_not_wrap() {
        let mut j = Jitter::default();
        assert_eq!(j.record(i64::MAX, 5), None);
        // i64::MAX + 1 would wrap to i64::MIN: not consecutive.
        assert_eq!(j.record(i64::MIN, 7), None);
        let mut j = Jitter::default();
        j.record(1, i64::MIN);
        assert_eq!(j.record(2, i64::MAX), Some(i64::MAX));
        assert_eq!(j.record(3, i64::MIN), Some(i64::MIN));
        assert_eq!(j.absolute.summary().max_ms, i64::MAX as f64 / 1e6);
    }
}
