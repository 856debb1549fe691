//! Clocks that disagree on purpose: a host's clock warped by an offset, a drift and a step
//! (`[hosts.clock]` in a scenario, docs/lab.md "Clocks that disagree").
//!
//! The lab's hosts are network namespaces of one kernel and share its clocks; a real unsynchronised
//! host reads its own. Every process the lab starts on a warped host runs with
//! `libddslab-warpclock.so` preloaded (lab/common/warpclock.c): what it reads from CLOCK_REALTIME
//! (DDS source timestamps, the nodes' ground truth) and CLOCK_MONOTONIC (LTTng's trace clock) reads
//! as the warped host's clock would. tcpdump's time stamps come from the kernel: the host's capture
//! is rewritten here with the same function when it is converted to pcapng. The function, for a true
//! CLOCK_REALTIME instant t (ns):
//!
//! ```text
//! w(t) = t + offset + (t − ref) · drift + (t ≥ step_at ? step : 0)
//! ```
//!
//! `ref` is the run's start (when the first process of the run was started), `step_at` counted from
//! it. The monotonic clock drifts alike and never steps (a trace keeps counting through a realtime
//! step, as on a real host).

use anyhow::{bail, Result};
use ddscope_traffic::units::parse_signed_nanos;
use ddscope_traffic::Nanos;
use serde::{Deserialize, Serialize};

/// The furthest a warp may drift: 1000 ppm (a quartz is within ±100; the clock tracker searches ±1000).
pub const MAX_DRIFT_PPM: f64 = 1000.0;

/// A host's clock as the scenario warps it (`clock = { offset = "3ms", drift = "100ppm", step = "2ms", step_at = "6s" }`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ClockSpec {
    /// Signed duration: how far the host's clock is ahead of the true one at the run's start.
    #[serde(default)]
    pub offset: Option<String>,
    /// Signed rate in ppm (`"100ppm"`, `"-60ppm"`): how fast it gains on the true clock.
    #[serde(default)]
    pub drift: Option<String>,
    /// Signed duration the realtime clock jumps by at `step_at` (NTP stepping it).
    #[serde(default)]
    pub step: Option<String>,
    /// When the step happens, counted from the run's start.
    #[serde(default)]
    pub step_at: Option<String>,
}

/// A [`ClockSpec`] read: nanoseconds and parts per billion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Warp {
    pub offset_ns: i64,
    pub drift_ppb: i64,
    pub step_ns: i64,
    /// From the run's start.
    pub step_at_ns: i64,
}

impl ClockSpec {
    /// Reads the spec; errors name the host and the field.
    pub fn warp(&self, host: &str) -> Result<Warp> {
        let signed = |field: &str, v: &Option<String>| -> Result<i64> {
            match v {
                None => Ok(0),
                Some(s) => parse_signed_nanos(s).map_err(|e| anyhow::anyhow!("host {host}: clock.{field}: {e}")),
            }
        };
        let offset_ns = signed("offset", &self.offset)?;
        let step_ns = signed("step", &self.step)?;
        let step_at_ns = match &self.step_at {
            None if step_ns != 0 => bail!("host {host}: clock.step needs clock.step_at (when, from the run's start: e.g. \"6s\")"),
            None => 0,
            Some(s) => {
                let n: Nanos = s.parse().map_err(|e| anyhow::anyhow!("host {host}: clock.step_at: {e}"))?;
                i64::try_from(n.0).map_err(|_| anyhow::anyhow!("host {host}: clock.step_at: {s:?} is too large"))?
            }
        };
        if self.step_at.is_some() && step_ns == 0 {
            bail!("host {host}: clock.step_at without clock.step (how far the clock jumps: e.g. \"2ms\")");
        }
        let drift_ppb = match &self.drift {
            None => 0,
            Some(s) => {
                let t = s.trim();
                let Some(num) = t.strip_suffix("ppm") else {
                    bail!("host {host}: clock.drift: {t:?} what? a drift is in ppm (e.g. \"100ppm\", \"-60ppm\")");
                };
                let v: f64 = num.trim().parse().map_err(|_| anyhow::anyhow!("host {host}: clock.drift: {t:?} is not a number of ppm"))?;
                if !v.is_finite() || v.abs() > MAX_DRIFT_PPM {
                    bail!("host {host}: clock.drift: {t:?} is not within ±{MAX_DRIFT_PPM} ppm");
                }
                (v * 1000.0).round() as i64
            }
        };
        // An hour-long offset is a time zone, not a clock error: far beyond what the clock tracker pairs.
        const MAX_OFFSET_NS: i64 = 3_600_000_000_000;
        for (field, v) in [("offset", offset_ns), ("step", step_ns)] {
            if v.abs() > MAX_OFFSET_NS {
                bail!("host {host}: clock.{field}: more than an hour");
            }
        }
        Ok(Warp { offset_ns, drift_ppb, step_ns, step_at_ns })
    }
}

impl Warp {
    pub fn is_identity(&self) -> bool {
        *self == Warp::default()
    }

    /// The host's realtime reading at true realtime `t`, for a run started at `ref_ns`.
    pub fn realtime(&self, ref_ns: i64, t: i64) -> i64 {
        let drift = ((t - ref_ns) as i128 * self.drift_ppb as i128 / 1_000_000_000) as i64;
        let step = if t >= ref_ns.saturating_add(self.step_at_ns) { self.step_ns } else { 0 };
        t + self.offset_ns + drift + step
    }

    /// The true instant a host's reading `x` was taken at (the inverse of [`Warp::realtime`]; within
    /// a negative step's overlap, where two instants read alike, the one after the step).
    pub fn true_time(&self, ref_ns: i64, x: i64) -> i64 {
        let back = |shift: i64| -> i64 {
            let v = (x as i128 - ref_ns as i128 - self.offset_ns as i128 - shift as i128) * 1_000_000_000 / (1_000_000_000 + self.drift_ppb as i128);
            (ref_ns as i128 + v) as i64
        };
        let step_at = ref_ns.saturating_add(self.step_at_ns);
        let after = back(self.step_ns);
        if self.step_ns != 0 && after >= step_at {
            return after;
        }
        back(0)
    }

    /// `DDSLAB_CLOCK_WARP` for libddslab-warpclock.so.
    pub fn env(&self, ref_ns: i64) -> String {
        format!("{},{},{},{},{}", self.offset_ns, self.drift_ppb, self.step_ns, ref_ns.saturating_add(self.step_at_ns), ref_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(o: &str, d: &str, s: &str, at: &str) -> ClockSpec {
        let f = |v: &str| (!v.is_empty()).then(|| v.to_string());
        ClockSpec { offset: f(o), drift: f(d), step: f(s), step_at: f(at) }
    }

    #[test]
    fn offset_drift_and_step_are_applied_from_the_run_start() {
        let w = spec("-0.7ms", "-60ppm", "2ms", "6s").warp("pc2").unwrap();
        assert_eq!(w, Warp { offset_ns: -700_000, drift_ppb: -60_000, step_ns: 2_000_000, step_at_ns: 6_000_000_000 });
        let r = 1_000_000_000_000_000_000;
        assert_eq!(w.realtime(r, r), r - 700_000);
        // 5 s in: -300 µs of drift, no step yet
        assert_eq!(w.realtime(r, r + 5_000_000_000), r + 5_000_000_000 - 700_000 - 300_000);
        // 6 s in: -360 µs of drift and the step
        assert_eq!(w.realtime(r, r + 6_000_000_000), r + 6_000_000_000 - 700_000 - 360_000 + 2_000_000);
        for dt in [0, 1_000_000, 5_999_999_999, 6_000_000_000, 9_000_000_000] {
            assert!((w.true_time(r, w.realtime(r, r + dt)) - (r + dt)).abs() <= 1, "{dt}");
        }
        assert_eq!(w.env(r), format!("-700000,-60000,2000000,{},{r}", r + 6_000_000_000));
    }

    #[test]
    fn bad_specs_are_refused_naming_host_and_field() {
        let e = |s: ClockSpec| s.warp("pc2").unwrap_err().to_string();
        assert!(e(spec("3", "", "", "")).contains("clock.offset"));
        assert!(e(spec("", "100", "", "")).contains("clock.drift") && e(spec("", "100", "", "")).contains("ppm"));
        assert!(e(spec("", "5000ppm", "", "")).contains("±1000"));
        assert!(e(spec("", "", "2ms", "")).contains("clock.step_at"));
        assert!(e(spec("", "", "", "6s")).contains("without clock.step"));
        assert!(e(spec("2h", "", "", "")).contains("more than an hour"));
        assert!(spec("", "", "", "").warp("pc2").unwrap().is_identity());
    }
}
