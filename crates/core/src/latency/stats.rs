//! Latency statistics in bounded memory: exact count, mean, standard
//! deviation, min and max (Welford), percentiles from an HDR histogram with
//! three significant digits (0.1 % relative error), and jitter
//! (seed 004 Eq. 10: d(X) − d(X−1), signed and absolute).

use hdrhistogram::Histogram;
use serde::Serialize;

/// Distribution of one latency layer for one flow (values in ns).
#[derive(Clone)]
pub struct Dist {
    count: u64,
    mean: f64,
    m2: f64,
    min: i64,
    max: i64,
    /// Negative values cannot go into the histogram: counted apart.
    negative: u64,
    hist: Histogram<u64>,
}

impl Default for Dist {
    fn default() -> Self {
        Dist {
            count: 0,
            mean: 0.0,
            m2: 0.0,
            min: i64::MAX,
            max: i64::MIN,
            negative: 0,
            hist: Histogram::new(3).expect("3 significant digits is valid"),
        }
    }
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
        self.count += 1;
        let d = v as f64 - self.mean;
        self.mean += d / self.count as f64;
        self.m2 += d * (v as f64 - self.mean);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        if v < 0 {
            self.negative += 1;
        } else {
            // Saturate absurd values rather than fail.
            let _ = self.hist.record(v as u64);
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// How many recorded values are at most `v` (histogram resolution: 0.1 %).
    pub fn count_at_most(&self, v: i64) -> u64 {
        if v < 0 {
            return 0;
        }
        let max = self.hist.max();
        self.negative + if self.hist.is_empty() { 0 } else { self.hist.count_between(0, (v as u64).min(max)) }
    }

    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Percentile q in [0, 100]; negative values count as below every recorded one.
    pub fn percentile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = q / 100.0 * self.count as f64;
        if rank <= self.negative as f64 && self.negative > 0 {
            return Some(self.min as f64);
        }
        if self.hist.is_empty() {
            return Some(self.max as f64);
        }
        let q_pos = ((rank - self.negative as f64) / self.hist.len() as f64 * 100.0).clamp(0.0, 100.0);
        Some((self.hist.value_at_percentile(q_pos) as f64).clamp(self.min as f64, self.max as f64))
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
            negative: self.negative,
        }
    }

    pub fn merge(&mut self, other: &Dist) {
        if other.count == 0 {
            return;
        }
        let n = self.count + other.count;
        let delta = other.mean - self.mean;
        self.m2 += other.m2 + delta * delta * self.count as f64 * other.count as f64 / n as f64;
        self.mean += delta * other.count as f64 / n as f64;
        self.count = n;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.negative += other.negative;
        let _ = self.hist.add(&other.hist);
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

/// Jitter of a flow: consecutive-sample latency differences.
#[derive(Clone, Default)]
pub struct Jitter {
    last: Option<(i64, i64)>,
    pub signed: Dist,
    pub absolute: Dist,
}

impl Jitter {
    /// Records the latency `d` of sample `sn`; returns d(X) − d(X−1) when the
    /// previous sample (sn − 1) was the last one recorded.
    pub fn record(&mut self, sn: i64, d: i64) -> Option<i64> {
        let j = match self.last {
            Some((prev_sn, prev_d)) if sn == prev_sn + 1 => Some(d - prev_d),
            _ => None,
        };
        if let Some(j) = j {
            self.signed.record(j);
            self.absolute.record(j.abs());
        }
        if self.last.is_none_or(|(s, _)| sn > s) {
            self.last = Some((sn, d));
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
}
