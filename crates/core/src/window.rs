//! The correlation window: how long after it was sent a sample (or, for
//! `flows`, a packet) is judged, and called lost if it has not arrived. One
//! type owns its bounds, its default and every interval derived from it, so
//! `latency`, `report`, `flows`, `serve` and `agent` agree.

use ddscope_traffic::units::Nanos;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Window(i64);

impl Window {
    /// Shortest window: below 1 ms no sample completes in time.
    pub const MIN_NS: i64 = 1_000_000;
    /// Longest window: above an hour, state would be held for longer than any
    /// capture a window is meant for.
    pub const MAX_NS: i64 = 3_600_000_000_000;
    /// 5 s: long enough for repairs of a large sample on a loaded link.
    pub const DEFAULT: Window = Window(5_000_000_000);

    /// A window of `ns` nanoseconds, within [`Self::MIN_NS`, `Self::MAX_NS`].
    pub fn from_ns(ns: i64) -> Result<Window, String> {
        if (Self::MIN_NS..=Self::MAX_NS).contains(&ns) {
            Ok(Window(ns))
        } else {
            Err(format!("{}: the window must be between 1ms and 1h", Nanos(ns.max(0) as u64)))
        }
    }

    pub const fn ns(self) -> i64 {
        self.0
    }

    /// See [`sample_timeout_ns`].
    pub fn sample_timeout_ns(self) -> i64 {
        sample_timeout_ns(self.0)
    }
}

// The intervals derived from a window, for configurations that carry the
// window as nanoseconds (checked by [`Window`] where the user gave it).

/// How long an incomplete sample waits without activity before its record
/// is closed: 2/5 of the window (2 s for 5 s), so that the record reaches
/// the correlator before the window judges the sample.
pub fn sample_timeout_ns(window_ns: i64) -> i64 {
    (window_ns / 5 * 2).max(1)
}

/// How long a chain waits for its next hop after a take: three windows
/// (the next hop's publish, its wire sample and its take each get one).
pub fn chain_wait_ns(window_ns: i64) -> i64 {
    window_ns.saturating_mul(3)
}

/// How far behind the watermarks a chain's inputs are kept: two waits.
pub fn chain_keep_ns(window_ns: i64) -> i64 {
    window_ns.saturating_mul(6)
}

impl Default for Window {
    fn default() -> Self {
        Window::DEFAULT
    }
}

impl FromStr for Window {
    type Err = String;

    /// `5s`, `250ms`, `1h`: a duration between 1 ms and 1 h.
    fn from_str(s: &str) -> Result<Window, String> {
        let n: Nanos = s.parse().map_err(|e| format!("{e}"))?;
        let ns = i64::try_from(n.0).map_err(|_| format!("{s:?}: too large (at most {} s)", i64::MAX / 1_000_000_000))?;
        Window::from_ns(ns).map_err(|_| format!("{s:?}: the window must be between 1ms and 1h"))
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Nanos(self.0 as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_default_and_derived_intervals() {
        assert_eq!("5s".parse::<Window>(), Ok(Window::DEFAULT));
        assert_eq!(Window::DEFAULT.to_string(), "5s");
        assert_eq!("1ms".parse::<Window>().map(Window::ns), Ok(1_000_000));
        assert_eq!("1h".parse::<Window>().map(Window::ns), Ok(3_600_000_000_000));
        assert!("0s".parse::<Window>().unwrap_err().contains("between 1ms and 1h"));
        assert!("999us".parse::<Window>().unwrap_err().contains("between 1ms and 1h"));
        assert!("100000000000s".parse::<Window>().unwrap_err().contains("too large"));
        assert!("5 parsecs".parse::<Window>().is_err());
        assert!(Window::from_ns(-1).is_err());
        assert_eq!(Window::DEFAULT.sample_timeout_ns(), 2_000_000_000);
        assert_eq!(Window::from_ns(Window::MIN_NS).unwrap().sample_timeout_ns(), 400_000);
        assert_eq!(chain_wait_ns(Window::DEFAULT.ns()), 15_000_000_000);
        assert_eq!(chain_keep_ns(Window::DEFAULT.ns()), 30_000_000_000);
        // every window prints as a duration that parses back to itself
        for ns in [Window::MIN_NS, 1_500_000, 250_000_000, 5_000_000_000, 90_000_000_000, Window::MAX_NS] {
            let w = Window::from_ns(ns).unwrap();
            assert_eq!(w.to_string().parse::<Window>(), Ok(w), "{w}");
        }
    }
}
