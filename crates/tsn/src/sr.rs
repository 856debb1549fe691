//! Stream Reservation classes, Bosk et al. Table 1 (AVNU / IEEE 802.1BA
//! requirements over 7 network hops).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SrClass {
    A,
    B,
    C,
    D,
    #[serde(rename = "BE")]
    Be,
}

/// The hop count the Table 1 bounds refer to.
pub const TABLE1_HOPS: u32 = 7;

impl SrClass {
    pub fn pcp(self) -> u8 {
        match self {
            SrClass::A => 3,
            SrClass::B => 2,
            SrClass::C | SrClass::D => 5,
            SrClass::Be => 0,
        }
    }
    /// (max latency, max jitter) in ns over 7 hops; `None` = no bound.
    pub fn bounds_ns(self) -> Option<(u64, u64)> {
        match self {
            SrClass::A => Some((2_000_000, 125_000)),
            SrClass::B => Some((10_000_000, 1_000_000)),
            SrClass::C | SrClass::D => Some((15_000_000, 500_000)),
            SrClass::Be => None,
        }
    }
    /// Default class of a PCP per Table 1 (PCP 5 is shared by C and D; C is taken).
    pub fn from_pcp(pcp: u8) -> Option<SrClass> {
        match pcp {
            3 => Some(SrClass::A),
            2 => Some(SrClass::B),
            5 => Some(SrClass::C),
            0 => Some(SrClass::Be),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SrClass::A => "A",
            SrClass::B => "B",
            SrClass::C => "C",
            SrClass::D => "D",
            SrClass::Be => "BE",
        }
    }
}

impl std::str::FromStr for SrClass {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_uppercase().as_str() {
            "A" => Ok(SrClass::A),
            "B" => Ok(SrClass::B),
            "C" => Ok(SrClass::C),
            "D" => Ok(SrClass::D),
            "BE" => Ok(SrClass::Be),
            _ => Err(format!("unknown SR class {s:?} (A, B, C, D or BE)")),
        }
    }
}

/// The verdict of one flow against its class's bounds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SrVerdict {
    pub class: SrClass,
    pub hops: u32,
    /// The Table 1 bound scaled to this flow's hops (bound × hops / 7), so
    /// that a path of 7 such hops stays within the class's end-to-end bound.
    pub latency_budget_ms: Option<f64>,
    pub jitter_budget_us: Option<f64>,
    pub latency_ok: bool,
    pub jitter_ok: bool,
    /// "pass", "fail" or "n/a" (best effort: no bound).
    pub verdict: &'static str,
}

pub fn verdict(class: SrClass, hops: u32, max_latency_ns: f64, max_abs_jitter_ns: f64, any_lost: bool) -> SrVerdict {
    match class.bounds_ns() {
        None => SrVerdict {
            class,
            hops,
            latency_budget_ms: None,
            jitter_budget_us: None,
            latency_ok: true,
            jitter_ok: true,
            verdict: "n/a",
        },
        Some((lat, jit)) => {
            let scale = hops as f64 / TABLE1_HOPS as f64;
            let lat_b = lat as f64 * scale;
            let jit_b = jit as f64 * scale;
            let latency_ok = max_latency_ns <= lat_b && !any_lost;
            let jitter_ok = max_abs_jitter_ns <= jit_b;
            SrVerdict {
                class,
                hops,
                latency_budget_ms: Some(lat_b / 1e6),
                jitter_budget_us: Some(jit_b / 1e3),
                latency_ok,
                jitter_ok,
                verdict: if latency_ok && jitter_ok { "pass" } else { "fail" },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Oracle: Bosk et al. Table 1.
    #[test]
    fn table_1() {
        assert_eq!(SrClass::A.bounds_ns(), Some((2_000_000, 125_000)));
        assert_eq!(SrClass::B.bounds_ns(), Some((10_000_000, 1_000_000)));
        assert_eq!(SrClass::D.bounds_ns(), Some((15_000_000, 500_000)));
        assert_eq!(SrClass::Be.bounds_ns(), None);
        assert_eq!(SrClass::from_pcp(3), Some(SrClass::A));
        assert_eq!(SrClass::from_pcp(2), Some(SrClass::B));
        assert_eq!(SrClass::C.pcp(), 5);
    }

    #[test]
    fn budget_scales_with_hops() {
        // Class A over 7 hops: 2 ms; over 1 hop its share is 2/7 ms.
        let v = verdict(SrClass::A, 7, 1_999_000.0, 100_000.0, false);
        assert_eq!(v.verdict, "pass");
        let v = verdict(SrClass::A, 1, 300_000.0, 10_000.0, false);
        assert_eq!(v.verdict, "fail");
        assert!(!v.latency_ok && v.jitter_ok);
        assert_eq!(verdict(SrClass::Be, 3, 1e12, 1e12, true).verdict, "n/a");
    }
}
