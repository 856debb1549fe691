//! A writer's sample rate, the one ROS 2 users know from `ros2 topic hz`:
//! from the samples' own times, (n − 1) / (last − first). Used by `topics`,
//! `live`, the agent's metrics, `report` and the lab's checks
//! (docs/events.md, "Rates").
//!
//! Only the samples' times count: not when the capture started or stopped, so
//! two capture points that saw the same samples give the same rate (to the
//! jitter of the first and last sample's latency). A topic's rate is the sum
//! of its steady writers' rates (concurrent writers add up, as a subscriber
//! receiving all of them would count).
//!
//! A rate is only given where it describes the stream: with fewer than
//! [`MIN_SAMPLES`] samples it is [`RateKind::Few`]; when the intervals between
//! consecutive samples vary more than a random (Poisson) stream's would —
//! standard deviation above the mean — or the samples were a burst followed by
//! silence — they span less than [`BURST_SHARE`] of the time observed from the
//! first one on — it is [`RateKind::Bursty`] (`/parameter_events`, graph
//! updates at a node's start, a publisher that stalled): samples and span are
//! shown instead of a Hz that would mislead. Only that last test looks past the
//! last sample; the rate itself never does.

use serde::Serialize;

/// Fewer samples than this give no rate (three intervals cannot tell a burst from a period).
pub const MIN_SAMPLES: u64 = 5;

/// Samples spanning less than this share of the time observed from the first one
/// on were a burst, then silence (10 samples in 80 ms of a 7 s capture).
pub const BURST_SHARE: f64 = 0.1;

/// What a stream of sample times is, for its rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RateKind {
    /// Regular enough for one number: rate = (n − 1) / (last − first).
    Steady,
    /// Intervals vary more than a random stream's (std > mean): no rate.
    Bursty,
    /// Fewer than [`MIN_SAMPLES`] samples: no rate.
    Few,
    /// No samples (`no_samples`).
    #[serde(rename = "no_samples")]
    None,
    /// A topic whose writers are of different kinds: the rate sums the steady ones.
    Mixed,
}

impl RateKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RateKind::Steady => "steady",
            RateKind::Bursty => "bursty",
            RateKind::Few => "few",
            RateKind::None => "no_samples",
            RateKind::Mixed => "mixed",
        }
    }

    /// The kind of a row of several writers (the kinds of its writers with samples).
    pub fn combine(kinds: impl IntoIterator<Item = RateKind>) -> RateKind {
        let mut out = RateKind::None;
        for k in kinds {
            out = match (out, k) {
                (_, RateKind::None) => out,
                (RateKind::None, k) => k,
                (a, b) if a == b => a,
                _ => RateKind::Mixed,
            };
        }
        out
    }
}

impl std::fmt::Display for RateKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Samples whose intervals wait in a small window, so that records arriving out of their
/// first-sighting order (a large sample repaired while the next ones complete) are put back in
/// order before their intervals count.
const REORDER: usize = 8;

/// The times of one writer's samples (each sample's first DATA/DATA_FRAG at
/// this capture point), in arrival order; O(1) memory, mergeable (the live
/// view keeps one per second and merges the last few).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SampleTimes {
    pub n: u64,
    pub first_ns: i64,
    pub last_ns: i64,
    /// The latest sample's time whose interval was counted (intervals are taken from it).
    latest_ns: i64,
    /// Samples whose intervals were counted.
    counted: u64,
    /// Σ interval² over consecutive counted samples, in s².
    sum_sq_s2: f64,
    /// The latest samples, sorted, not counted yet (the first `held_n`).
    held: [i64; REORDER],
    held_n: u8,
}

impl SampleTimes {
    pub fn add(&mut self, ts_ns: i64) {
        if self.n == 0 {
            self.first_ns = ts_ns;
            self.last_ns = ts_ns;
        }
        self.n += 1;
        self.first_ns = self.first_ns.min(ts_ns);
        self.last_ns = self.last_ns.max(ts_ns);
        // Held in order: a record a few samples late (a large sample repaired while the next
        // ones complete: Fast DDS's 2.7 MB images, 1 804 fragments repaired in 8 s) takes its
        // place; counted one at a time, oldest first, once the window is full.
        let n = self.held_n as usize;
        let at = self.held[..n].partition_point(|&t| t <= ts_ns);
        if n == REORDER {
            if at == 0 {
                self.count(ts_ns);
                return;
            }
            let oldest = self.held[0];
            self.held.copy_within(1..at, 0);
            self.held[at - 1] = ts_ns;
            self.count(oldest);
        } else {
            self.held.copy_within(at..n, at + 1);
            self.held[at] = ts_ns;
            self.held_n += 1;
        }
    }

    /// Counts one sample's interval from the latest counted one. A sample still behind it
    /// (later than the window) adds none: the forward jump already spans its interval.
    fn count(&mut self, ts_ns: i64) {
        if self.counted > 0 {
            let d = ts_ns.saturating_sub(self.latest_ns).max(0) as f64 / 1e9;
            self.sum_sq_s2 += d * d;
            self.latest_ns = self.latest_ns.max(ts_ns);
        } else {
            self.latest_ns = ts_ns;
        }
        self.counted += 1;
    }

    /// Every held sample counted: what the statistics read.
    fn settled(&self) -> SampleTimes {
        let mut s = *self;
        for i in 0..s.held_n as usize {
            let t = s.held[i];
            s.count(t);
        }
        s.held_n = 0;
        s
    }

    /// `self` followed by `later` (samples seen after all of `self`'s): as if every
    /// sample had been added to one.
    pub fn merge(&self, later: &SampleTimes) -> SampleTimes {
        if self.n == 0 {
            return *later;
        }
        if later.n == 0 {
            return *self;
        }
        let (a, b) = (self.settled(), later.settled());
        let d = b.first_ns.saturating_sub(a.latest_ns).max(0) as f64 / 1e9;
        SampleTimes {
            n: a.n + b.n,
            first_ns: a.first_ns.min(b.first_ns),
            last_ns: a.last_ns.max(b.last_ns),
            latest_ns: b.latest_ns.max(a.latest_ns),
            counted: a.counted + b.counted,
            sum_sq_s2: a.sum_sq_s2 + b.sum_sq_s2 + d * d,
            held: [0; REORDER],
            held_n: 0,
        }
    }

    /// First to last sample, ns (0 for one sample).
    pub fn span_ns(&self) -> i64 {
        if self.n == 0 { 0 } else { self.last_ns.saturating_sub(self.first_ns) }
    }

    /// Coefficient of variation of the intervals (std / mean), when there are two or more.
    pub fn interval_cv(&self) -> Option<f64> {
        let k = self.n.checked_sub(1).filter(|&k| k >= 2)? as f64;
        let mean = self.span_ns() as f64 / 1e9 / k;
        if mean <= 0.0 {
            return None;
        }
        let var = (self.settled().sum_sq_s2 / k - mean * mean).max(0.0);
        Some(var.sqrt() / mean)
    }

    /// The stream's kind from its samples alone.
    pub fn kind(&self) -> RateKind {
        match self.n {
            0 => RateKind::None,
            n if n < MIN_SAMPLES => RateKind::Few,
            _ if self.span_ns() <= 0 => RateKind::Bursty,
            _ => match self.interval_cv() {
                Some(cv) if cv > 1.0 => RateKind::Bursty,
                _ => RateKind::Steady,
            },
        }
    }

    /// The kind, with the capture point observing until `observed_until_ns`: samples
    /// spanning less than [`BURST_SHARE`] of the time from the first one on were a burst.
    pub fn kind_until(&self, observed_until_ns: Option<i64>) -> RateKind {
        match (self.kind(), observed_until_ns) {
            (RateKind::Steady, Some(end)) if (self.span_ns() as f64) < BURST_SHARE * end.saturating_sub(self.first_ns) as f64 => RateKind::Bursty,
            (k, _) => k,
        }
    }

    /// (n − 1) / (last − first) in Hz, for a steady stream only ([`kind_until`](Self::kind_until)).
    pub fn rate_hz(&self, observed_until_ns: Option<i64>) -> Option<f64> {
        (self.kind_until(observed_until_ns) == RateKind::Steady).then(|| (self.n - 1) as f64 / (self.span_ns() as f64 / 1e9))
    }

    /// (n − 1) / (last − first) whatever the kind (what `ros2 topic hz` would print), with two samples or more.
    pub fn mean_rate_hz(&self) -> Option<f64> {
        (self.n >= 2 && self.span_ns() > 0).then(|| (self.n - 1) as f64 / (self.span_ns() as f64 / 1e9))
    }
}

/// The rate of several writers (a topic): the sum of the steady writers'
/// rates, and the kind of the whole.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TopicRate {
    pub hz: Option<f64>,
    pub kind: Option<RateKind>,
}

impl TopicRate {
    /// `observed_until_ns`: the end of the capture point's observation (its last RTPS
    /// event, or the live window's end), for [`SampleTimes::kind_until`].
    pub fn of<'a>(writers: impl IntoIterator<Item = &'a SampleTimes>, observed_until_ns: Option<i64>) -> TopicRate {
        let mut hz: Option<f64> = None;
        let mut kinds = vec![];
        for w in writers {
            kinds.push(w.kind_until(observed_until_ns));
            if let Some(r) = w.rate_hz(observed_until_ns) {
                *hz.get_or_insert(0.0) += r;
            }
        }
        TopicRate { hz, kind: Some(RateKind::combine(kinds)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(ts: &[i64]) -> SampleTimes {
        let mut s = SampleTimes::default();
        for &t in ts {
            s.add(t);
        }
        s
    }

    const MS: i64 = 1_000_000;

    /// Oracle: (n − 1) / (last − first) worked by hand.
    #[test]
    fn a_periodic_writer_is_steady_and_its_rate_ignores_the_tail() {
        // 29 samples 34.5 ms apart (jittered ±1 ms): 28 / (last − first)
        let ts: Vec<i64> = (0..29).map(|i| i * 34_500_000 + if i % 2 == 0 { MS } else { -MS }).collect();
        let s = times(&ts);
        assert_eq!(s.kind(), RateKind::Steady);
        let want = 28.0 / ((ts[28] - ts[0]) as f64 / 1e9);
        assert!((s.rate_hz(None).unwrap() - want).abs() < 1e-9);
        // the same samples seen 120 µs later at another capture point: the same rate
        let later = times(&ts.iter().map(|t| t + 120_000).collect::<Vec<_>>());
        assert_eq!(later.rate_hz(None), s.rate_hz(None));
        // a capture that runs on after the last sample: the same rate (7 s of silence after 1 s)
        assert_eq!(s.rate_hz(Some(ts[28] + 7_000_000_000)), s.rate_hz(None));
    }

    /// Large samples repaired while the next completes: records arrive out of their
    /// first-sighting order; still one steady 10 Hz stream (oracle: the sorted times).
    #[test]
    fn records_out_of_order_are_still_steady() {
        let mut ts: Vec<i64> = (0..30).map(|i| i * 100 * MS).collect();
        for k in (1..29).step_by(4) {
            ts.swap(k, k + 1);
        }
        let s = times(&ts);
        assert_eq!(s.kind(), RateKind::Steady);
        assert!((s.rate_hz(None).unwrap() - 29.0 / 2.9).abs() < 1e-9);
    }

    #[test]
    fn bursts_and_few_samples_have_no_rate() {
        // /parameter_events: 3 samples 1 ms apart, 800 ms of silence, 3 more
        let s = times(&[0, MS, 2 * MS, 802 * MS, 803 * MS, 804 * MS]);
        assert_eq!(s.kind(), RateKind::Bursty);
        assert_eq!(s.rate_hz(None), None);
        assert!((s.mean_rate_hz().unwrap() - 5.0 / 0.804).abs() < 1e-9);
        // four samples: too few to tell
        assert_eq!(times(&[0, 100 * MS, 200 * MS, 300 * MS]).kind(), RateKind::Few);
        assert_eq!(times(&[]).kind(), RateKind::None);
        // five at once (same capture time): bursty, not infinitely fast
        assert_eq!(times(&[7; 5]).kind(), RateKind::Bursty);
        // ten samples 9 ms apart (regular), then 7 s of silence: a burst
        let s = times(&(0..10).map(|i| i * 9 * MS).collect::<Vec<_>>());
        assert_eq!(s.kind(), RateKind::Steady);
        assert_eq!(s.kind_until(Some(7_000 * MS)), RateKind::Bursty);
        assert_eq!(s.rate_hz(Some(7_000 * MS)), None);
        assert_eq!(s.kind_until(Some(810 * MS)), RateKind::Steady); // 81 ms of 810: still a tenth
        // Poisson-like variation stays steady: intervals 50, 150, 100, 80, 120 ms
        let s = times(&[0, 50 * MS, 200 * MS, 300 * MS, 380 * MS, 500 * MS]);
        assert_eq!(s.kind(), RateKind::Steady);
        assert!((s.rate_hz(None).unwrap() - 10.0).abs() < 1e-9);
    }

    #[test]
    fn records_a_few_samples_late_are_put_back_in_order() {
        // A real Fast DDS 2.14 run (rmw_fastrtps_cpp, the lab's 2.7 MB /image at 10 Hz, 1 804
        // fragments repaired in 8 s): samples are recorded as they complete, so a repaired one
        // comes after the next ones; counted as they came, 80 samples 100 ± 9 ms apart read as
        // bursty (std of the intervals above their mean) and the lab's run check failed.
        let mut ts: Vec<i64> = (0..80).map(|i| i * 100 * MS + (i % 7) * 3 * MS).collect();
        for i in (0..76).step_by(4) {
            ts.swap(i, i + 2); // two samples overtaken by two, every four
        }
        let s = times(&ts);
        assert_eq!(s.kind(), RateKind::Steady);
        // (n − 1) / (last − first): 79 intervals in 7.906 s
        assert!((s.rate_hz(None).unwrap() - 79.0 / 7.906).abs() < 1e-9, "{:?}", s.rate_hz(None));
        assert!(s.interval_cv().unwrap() < 0.2, "{:?}", s.interval_cv());
        // the same times in order give the same figures
        let mut sorted = ts.clone();
        sorted.sort();
        let o = times(&sorted);
        assert!((o.settled().sum_sq_s2 - s.settled().sum_sq_s2).abs() < 1e-12);
    }

    #[test]
    fn merging_equals_adding() {
        let ts: Vec<i64> = vec![3, 40 * MS, 90 * MS, 95 * MS, 300 * MS, 310 * MS, 999 * MS];
        let all = times(&ts);
        for cut in 0..=ts.len() {
            let m = times(&ts[..cut]).merge(&times(&ts[cut..]));
            assert_eq!(m.n, all.n);
            assert_eq!((m.first_ns, m.last_ns), (all.first_ns, all.last_ns));
            assert!((m.settled().sum_sq_s2 - all.settled().sum_sq_s2).abs() < 1e-12, "{cut}");
        }
    }

    #[test]
    fn a_topic_sums_its_steady_writers() {
        let a = times(&(0..11).map(|i| i * 100 * MS).collect::<Vec<_>>()); // 10 Hz
        let b = times(&(0..21).map(|i| i * 50 * MS + 7).collect::<Vec<_>>()); // 20 Hz
        let burst = times(&[0, MS, 2 * MS, 900 * MS, 901 * MS, 902 * MS]);
        let r = TopicRate::of([&a, &b], None);
        assert!((r.hz.unwrap() - 30.0).abs() < 1e-9);
        assert_eq!(r.kind, Some(RateKind::Steady));
        let r = TopicRate::of([&a, &burst], None);
        assert!((r.hz.unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(r.kind, Some(RateKind::Mixed));
        let r = TopicRate::of([&burst], None);
        assert_eq!((r.hz, r.kind), (None, Some(RateKind::Bursty)));
        assert_eq!(TopicRate::of([&SampleTimes::default()], None).kind, Some(RateKind::None));
    }
}
