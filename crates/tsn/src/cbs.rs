//! Credit-based shaper parameters, Bosk et al. Eq. 2–6 (IEEE 802.1Q Annex L):
//!
//! ```text
//! idleSlope_X = B_X · PTR                                   (2)
//! sendSlope_X = idleSlope_X − PTR                           (3)
//! loCredit_X  = MFS_X · sendSlope_X / PTR                   (4)
//! hiCredit_X  = idleSlope_X · (MFS_0 / PTR + IF_X)          (5)
//! IF_X        = Σ_{Y more urgent than X} (hiCredit_Y / −sendSlope_Y + MFS_Y / PTR)   (6)
//! ```
//!
//! Classes are given most urgent first (A before B). Linux `tc cbs` takes
//! slopes in kbit/s and credits in bytes, all integers: idleSlope is rounded
//! up to whole kbit/s (never reserve less than asked), sendSlope follows from
//! the rounded idleSlope, hiCredit is rounded up and loCredit down (away
//! from zero), so the rounding never shrinks the credit range the equations
//! ask for. Eq. 6 uses the unrounded hiCredit of the more urgent classes.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq)]
pub struct CbsClassInput {
    pub name: String,
    /// Reserved bandwidth B_X · PTR, bit/s.
    pub reserved_bps: u64,
    /// MFS_X, bytes (the class's largest frame, as Bosk et al. count it).
    pub max_frame_bytes: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CbsClassParams {
    pub name: String,
    pub reserved_bps: u64,
    pub max_frame_bytes: u64,
    /// kbit/s, as `tc cbs` takes them.
    pub idleslope: i64,
    pub sendslope: i64,
    /// bytes, as `tc cbs` takes them.
    pub hicredit: i64,
    pub locredit: i64,
    /// Unrounded values (bits/s and bytes).
    pub exact_hicredit_bytes: f64,
    pub exact_locredit_bytes: f64,
    /// IF_X of Eq. 6, microseconds.
    pub interference_us: f64,
}

pub fn compute(port_rate_bps: u64, mfs0_bytes: u64, classes: &[CbsClassInput]) -> Result<Vec<CbsClassParams>, String> {
    if port_rate_bps == 0 {
        return Err("port rate must be positive".into());
    }
    let ptr = port_rate_bps as f64;
    let mut out: Vec<CbsClassParams> = Vec::new();
    let mut total = 0u64;
    for c in classes {
        if c.reserved_bps == 0 {
            return Err(format!("class {}: reserved bandwidth must be positive", c.name));
        }
        total += c.reserved_bps;
        if total >= port_rate_bps {
            return Err(format!(
                "class {}: the reservations add up to {} bit/s, not below the port rate {port_rate_bps} bit/s",
                c.name, total
            ));
        }
        let idle_kbps = c.reserved_bps.div_ceil(1000) as i64;
        let send_kbps = idle_kbps - port_rate_bps.div_ceil(1000) as i64;
        let idle = idle_kbps as f64 * 1000.0;
        let send = send_kbps as f64 * 1000.0;
        // IF_X in seconds; hiCredit_Y in bytes -> bits for the division by a bit rate.
        let interference: f64 =
            out.iter().map(|y| y.exact_hicredit_bytes * 8.0 / (-(y.sendslope as f64) * 1000.0) + y.max_frame_bytes as f64 * 8.0 / ptr).sum();
        let hi_bytes = idle * (mfs0_bytes as f64 * 8.0 / ptr + interference) / 8.0;
        let lo_bytes = c.max_frame_bytes as f64 * send / ptr;
        out.push(CbsClassParams {
            name: c.name.clone(),
            reserved_bps: c.reserved_bps,
            max_frame_bytes: c.max_frame_bytes,
            idleslope: idle_kbps,
            sendslope: send_kbps,
            hicredit: (hi_bytes - 1e-9).ceil() as i64,
            locredit: (lo_bytes + 1e-9).floor() as i64,
            exact_hicredit_bytes: hi_bytes,
            exact_locredit_bytes: lo_bytes,
            interference_us: interference * 1e6 + 0.0,
        });
    }
    Ok(out)
}

/// `tc qdisc replace dev DEV parent PARENT cbs …` for one class.
/// The `tc` line of one CBS class; `dev` and `parent` are quoted for the shell.
pub fn tc_line(dev: &str, parent: &str, p: &CbsClassParams, offload: bool) -> String {
    let (dev, parent) = (crate::shell::quote(dev), crate::shell::quote(parent));
    format!(
        "tc qdisc replace dev {dev} parent {parent} cbs idleslope {} sendslope {} hicredit {} locredit {} offload {}",
        p.idleslope,
        p.sendslope,
        p.hicredit,
        p.locredit,
        if offload { 1 } else { 0 }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, bps: u64, mfs: u64) -> CbsClassInput {
        CbsClassInput { name: name.into(), reserved_bps: bps, max_frame_bytes: mfs }
    }

    /// Oracle: Bosk et al. II-C3 / VI-A2 worked example — 1250-byte frames at
    /// 100 Mbit/s on a 1 Gbit/s port, 1542-byte max frame: idleSlope 100000,
    /// sendSlope −900000, hiCredit 155, loCredit −1125.
    #[test]
    fn seed_004_class_a_example() {
        let p = compute(1_000_000_000, 1542, &[class("A", 100_000_000, 1250)]).unwrap();
        assert_eq!((p[0].idleslope, p[0].sendslope, p[0].hicredit, p[0].locredit), (100_000, -900_000, 155, -1125));
    }

    /// Oracle: Bosk et al. VI-A3 — class B with the same traffic, its
    /// interference including class A's: hiCredit_B = 297, other values as A.
    #[test]
    fn seed_004_class_b_includes_class_a_interference() {
        let p = compute(1_000_000_000, 1542, &[class("A", 100_000_000, 1250), class("B", 100_000_000, 1250)]).unwrap();
        assert_eq!((p[1].idleslope, p[1].sendslope, p[1].hicredit, p[1].locredit), (100_000, -900_000, 297, -1125));
    }

    /// Oracle: the tc-cbs(8) man page example — idleslope 20 Mbit/s on
    /// 1 Gbit/s, 1500-byte frames: "locredit -1470 hicredit 30 sendslope
    /// -980000 idleslope 20000".
    #[test]
    fn tc_cbs_man_page_example() {
        let p = compute(1_000_000_000, 1500, &[class("A", 20_000_000, 1500)]).unwrap();
        assert_eq!((p[0].idleslope, p[0].sendslope, p[0].hicredit, p[0].locredit), (20_000, -980_000, 30, -1470));
        assert_eq!(
            tc_line("eth0", "100:4", &p[0], false),
            "tc qdisc replace dev eth0 parent 100:4 cbs idleslope 20000 sendslope -980000 hicredit 30 locredit -1470 offload 0"
        );
    }

    #[test]
    fn over_reservation_is_an_error() {
        let e = compute(1_000_000_000, 1542, &[class("A", 600_000_000, 1500), class("B", 500_000_000, 1500)]).unwrap_err();
        assert!(e.contains("class B"), "{e}");
    }
}
