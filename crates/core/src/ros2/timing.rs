//! In time / late of the samples joined trace to trace (traces alone, or same-host
//! deliveries no capture saw).
//!
//! A wire flow is judged against its writer's period on the wire (the correlator).
//! A flow joined trace to trace has no wire period: it is judged against `--period`
//! DURATION when given, else its topic's publication period on the sending host as the
//! trace shows it
//! ([`CallbackTable::topic_period`](super::callbacks::CallbackTable::topic_period): the period of the timer every publish was made
//! in, else the mean interval of its one publisher's steady publish stream) — in time =
//! ros_e2e (rclcpp_publish → callback_start) at most that period. Where the trace shows
//! no period (a burst, fewer than 5 publishes, publishes outside any traced callback at
//! irregular times, several publishers not all in timers of one period) neither is
//! counted: never every sample late for want of a period.

use crate::latency::{Correlator, FlowSummary, Layer};

/// A flow joined trace to trace: see [`FlowSummary::trace_joined`].
pub fn trace_joined(s: &FlowSummary) -> bool {
    s.trace_joined()
}

/// Whether the flow's in time / late mean anything: see [`FlowSummary::timing_known`].
pub fn timing_known(s: &FlowSummary) -> bool {
    s.timing_known()
}

/// The correlator's flow summaries, with the flows joined trace to trace (traces alone, or
/// same-host deliveries no capture saw) judged in time / late against `given_ns` (`--period`
/// DURATION) when given, else their topic's publication period on the sending host
/// ([`CallbackTable::topic_period`](super::callbacks::CallbackTable::topic_period)): in time = ros_e2e (rclcpp_publish
/// → callback_start) at most the period. Where no period is known both stay 0 and
/// [`timing_known`] is false: neither in time nor late (never all late for want of a period).
pub fn summaries(c: &Correlator, given_ns: Option<i64>) -> Vec<FlowSummary> {
    let mut v = c.summaries();
    let cb = c.callbacks();
    for (s, (key, f)) in v.iter_mut().zip(c.flows()) {
        if !trace_joined(s) || s.period_ms.is_some() {
            continue;
        }
        let period = given_ns.or_else(|| cb.and_then(|cb| cb.topic_period(key.2, &key.0)).map(|(p, _)| p));
        match (period, f.layers.get(&Layer::RosE2e)) {
            (Some(p), Some(e2e)) => {
                s.period_ms = Some(p as f64 / 1e6);
                s.in_time = e2e.count_at_most(p);
                s.late = e2e.count().saturating_sub(s.in_time);
            }
            _ => {
                s.in_time = 0;
                s.late = 0;
            }
        }
    }
    v
}
