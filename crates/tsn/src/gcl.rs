//! IEEE 802.1Qbv gate control list with taprio semantics.
//!
//! A list of entries (gate mask, duration) repeats every cycle (the sum of
//! the durations) from `base_time`; the schedule is taken to have been
//! running forever (taprio starts a past base-time at the next cycle
//! boundary, which is the same phase). A frame of class `tc` may start at
//! `t` only if the gate of `tc` stays open from `t` until the frame's last
//! bit has left ("length-aware" guard band: taprio drops the head-of-line
//! frame from consideration when it would overrun the gate close).

/// One `sched-entry S <mask> <interval>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateEntry {
    /// Bit n set = traffic class n may transmit.
    pub mask: u32,
    pub duration_ps: u64,
}

#[derive(Debug, Clone)]
pub struct Gcl {
    pub entries: Vec<GateEntry>,
    pub base_ps: u64,
    pub cycle_ps: u64,
    /// Per class: open intervals `[start, end)` relative to the cycle start,
    /// sorted; an interval that runs over the cycle end into the next
    /// cycle's first entries has `end > cycle_ps`.
    open: Vec<Vec<(u64, u64)>>,
    /// Per class: longest open interval.
    longest: Vec<u64>,
}

impl Gcl {
    pub fn new(entries: Vec<GateEntry>, base_ps: u64, num_tc: usize) -> Result<Self, String> {
        if entries.is_empty() {
            return Err("the gate control list has no entries".into());
        }
        if let Some(i) = entries.iter().position(|e| e.duration_ps == 0) {
            return Err(format!("gate control list entry {i} has zero duration"));
        }
        for (i, e) in entries.iter().enumerate() {
            if num_tc < 32 && e.mask >> num_tc != 0 {
                return Err(format!(
                    "gate control list entry {i} opens gate mask {:#x}, but the port has only {num_tc} traffic classes",
                    e.mask
                ));
            }
        }
        let cycle_ps: u64 = entries.iter().map(|e| e.duration_ps).sum();
        let mut open = vec![Vec::new(); num_tc];
        let mut longest = vec![0; num_tc];
        for (tc, iv) in open.iter_mut().enumerate() {
            let bit = 1u32 << tc;
            let mut t = 0;
            let mut cur: Option<(u64, u64)> = None;
            for e in &entries {
                if e.mask & bit != 0 {
                    cur = Some(match cur {
                        Some((s, _)) => (s, t + e.duration_ps),
                        None => (t, t + e.duration_ps),
                    });
                } else if let Some(c) = cur.take() {
                    iv.push(c);
                }
                t += e.duration_ps;
            }
            if let Some(c) = cur {
                iv.push(c);
            }
            if iv.len() == 1 && iv[0] == (0, cycle_ps) {
                // Always open.
                longest[tc] = u64::MAX;
                continue;
            }
            // An interval ending at the cycle end continues into one starting at 0.
            if iv.len() >= 2 && iv[0].0 == 0 && iv.last().unwrap().1 == cycle_ps {
                let first_end = iv[0].1;
                iv.last_mut().unwrap().1 = cycle_ps + first_end;
            }
            longest[tc] = iv.iter().map(|&(s, e)| e - s).max().unwrap_or(0);
        }
        Ok(Gcl { entries, base_ps, cycle_ps, open, longest })
    }

    pub fn num_tc(&self) -> usize {
        self.open.len()
    }

    /// Longest time the gate of `tc` stays open (`u64::MAX` = always open).
    pub fn longest_open(&self, tc: usize) -> u64 {
        self.longest[tc]
    }

    pub fn always_open(&self, tc: usize) -> bool {
        self.longest[tc] == u64::MAX
    }

    /// Fraction of the cycle during which the gate of `tc` is open.
    pub fn open_fraction(&self, tc: usize) -> f64 {
        if self.always_open(tc) {
            return 1.0;
        }
        let open: u64 = self.entries.iter().filter(|e| e.mask & (1 << tc) != 0).map(|e| e.duration_ps).sum();
        open as f64 / self.cycle_ps as f64
    }

    /// Cycle-relative phase of absolute time `t`.
    pub fn phase(&self, t: u64) -> u64 {
        let off = self.base_ps % self.cycle_ps;
        (t + self.cycle_ps - off) % self.cycle_ps
    }

    /// Earliest `s >= t` at which a frame needing `need_ps` of gate time may
    /// start in class `tc`, or `None` if no window of that class is long enough.
    pub fn next_fit(&self, tc: usize, t: u64, need_ps: u64) -> Option<u64> {
        if self.always_open(tc) {
            return Some(t);
        }
        if need_ps > self.longest[tc] {
            return None;
        }
        let rel = self.phase(t);
        for &(s, e) in &self.open[tc] {
            let c = rel.max(s);
            if c < e && c + need_ps <= e {
                return Some(t + (c - rel));
            }
        }
        // Next cycle: the first long-enough window.
        for &(s, e) in &self.open[tc] {
            if e - s >= need_ps {
                return Some(t + (self.cycle_ps - rel) + s);
            }
        }
        None
    }

    /// The end of the open window of `tc` containing `t` (None if closed at `t`).
    pub fn window_end(&self, tc: usize, t: u64) -> Option<u64> {
        if self.always_open(tc) {
            return Some(u64::MAX);
        }
        let rel = self.phase(t);
        for &(s, e) in &self.open[tc] {
            if rel >= s && rel < e {
                return Some(t + (e - rel));
            }
        }
        // The wrapped part of the last interval, seen from the next cycle's start.
        if let Some(&(_, e)) = self.open[tc].last() {
            if e > self.cycle_ps && rel < e - self.cycle_ps {
                return Some(t + (e - self.cycle_ps - rel));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tas(open_ps: u64, cycle_ps: u64) -> Gcl {
        Gcl::new(
            vec![GateEntry { mask: 0b10, duration_ps: open_ps }, GateEntry { mask: 0b01, duration_ps: cycle_ps - open_ps }],
            0,
            2,
        )
        .unwrap()
    }

    #[test]
    fn fits_within_window_or_waits_for_next() {
        let g = tas(250, 500);
        assert_eq!(g.next_fit(1, 0, 100), Some(0));
        assert_eq!(g.next_fit(1, 150, 100), Some(150));
        // Would overrun the close at 250: guard band -> next cycle.
        assert_eq!(g.next_fit(1, 151, 100), Some(500));
        assert_eq!(g.next_fit(0, 10, 100), Some(250));
        assert_eq!(g.next_fit(0, 450, 100), Some(750));
        assert_eq!(g.next_fit(1, 0, 251), None);
        assert_eq!(g.window_end(1, 10), Some(250));
        assert_eq!(g.window_end(1, 300), None);
    }

    #[test]
    fn window_wrapping_the_cycle_end_is_one_window() {
        // TC0 open for [300, 500) and [0, 100): one 300-long window across the boundary.
        let g = Gcl::new(
            vec![
                GateEntry { mask: 0b01, duration_ps: 100 },
                GateEntry { mask: 0b10, duration_ps: 200 },
                GateEntry { mask: 0b01, duration_ps: 200 },
            ],
            0,
            2,
        )
        .unwrap();
        assert_eq!(g.longest_open(0), 300);
        assert_eq!(g.next_fit(0, 350, 250), Some(350));
        assert_eq!(g.window_end(0, 520), Some(600));
        assert_eq!(g.next_fit(0, 560, 100), Some(800));
    }

    #[test]
    fn base_time_shifts_the_phase() {
        let g = Gcl::new(
            vec![GateEntry { mask: 0b10, duration_ps: 250 }, GateEntry { mask: 0b01, duration_ps: 250 }],
            1_000_100,
            2,
        )
        .unwrap();
        // Cycles start at ...100, 600, ...: at t = 0 the phase is 400.
        assert_eq!(g.phase(0), 400);
        assert_eq!(g.next_fit(1, 0, 10), Some(100));
        assert_eq!(g.next_fit(1, 90, 10), Some(100));
        assert_eq!(g.next_fit(0, 100, 10), Some(350));
    }

    #[test]
    fn bad_lists_are_rejected() {
        assert!(Gcl::new(vec![], 0, 2).is_err());
        assert!(Gcl::new(vec![GateEntry { mask: 1, duration_ps: 0 }], 0, 2).is_err());
        let e = Gcl::new(vec![GateEntry { mask: 0b100, duration_ps: 5 }], 0, 2).unwrap_err();
        assert!(e.contains("only 2 traffic classes"), "{e}");
    }
}
