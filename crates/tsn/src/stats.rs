//! Latency and jitter summaries (thesis Table 4.5 statistics; Bosk et al.
//! Eq. 10 jitter, signed and absolute).

use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LatencyStats {
    pub count: u64,
    pub mean_ms: f64,
    pub std_ms: f64,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct JitterStats {
    pub count: u64,
    /// Mean of d(X) − d(X−1); ~0 unless latency drifts.
    pub mean_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub mean_abs_us: f64,
    pub p50_abs_us: f64,
    pub p99_abs_us: f64,
    pub max_abs_us: f64,
}

/// Nearest-rank percentile of sorted data.
fn pct<T: Copy>(sorted: &[T], q: f64) -> T {
    let n = sorted.len();
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    sorted[rank - 1]
}

pub fn latency(ps: &[u64]) -> LatencyStats {
    if ps.is_empty() {
        return LatencyStats::default();
    }
    let mut v = ps.to_vec();
    v.sort_unstable();
    let n = v.len() as f64;
    let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    let ms = |x: f64| x / 1e9;
    LatencyStats {
        count: v.len() as u64,
        mean_ms: ms(mean),
        std_ms: ms(var.sqrt()),
        min_ms: ms(v[0] as f64),
        p50_ms: ms(pct(&v, 0.5) as f64),
        p99_ms: ms(pct(&v, 0.99) as f64),
        max_ms: ms(*v.last().unwrap() as f64),
    }
}

pub fn jitter(ps: &[i64]) -> JitterStats {
    if ps.is_empty() {
        return JitterStats::default();
    }
    let n = ps.len() as f64;
    let us = |x: f64| x / 1e6;
    let mut abs: Vec<u64> = ps.iter().map(|x| x.unsigned_abs()).collect();
    abs.sort_unstable();
    JitterStats {
        count: ps.len() as u64,
        mean_us: us(ps.iter().map(|&x| x as f64).sum::<f64>() / n),
        min_us: us(*ps.iter().min().unwrap() as f64),
        max_us: us(*ps.iter().max().unwrap() as f64),
        mean_abs_us: us(abs.iter().map(|&x| x as f64).sum::<f64>() / n),
        p50_abs_us: us(pct(&abs, 0.5) as f64),
        p99_abs_us: us(pct(&abs, 0.99) as f64),
        max_abs_us: us(*abs.last().unwrap() as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Oracle: hand computation on small data.
    #[test]
    fn summaries() {
        let l = latency(&[3_000_000_000, 1_000_000_000, 2_000_000_000, 4_000_000_000]);
        assert_eq!((l.count, l.mean_ms, l.min_ms, l.max_ms), (4, 2.5, 1.0, 4.0));
        assert_eq!(l.p50_ms, 2.0);
        assert_eq!(l.p99_ms, 4.0);
        assert!((l.std_ms - 1.118033988749895).abs() < 1e-12);
        let j = jitter(&[-2_000_000, 1_000_000, 4_000_000]);
        assert_eq!((j.min_us, j.max_us, j.max_abs_us), (-2.0, 4.0, 4.0));
        assert!((j.mean_abs_us - 7.0 / 3.0).abs() < 1e-12);
        assert_eq!(latency(&[]).count, 0);
    }
}
