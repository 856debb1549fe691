//! The ros2_tracing layout of a trace: which events it holds
//! ([`LayoutSeen`], counted by the assembler) and the name ddscope gives that
//! layout in its outputs ([`TraceLayout`]: `jazzy+`, `humble/iron`,
//! `galactic`, `foxy`, `no publish events`, and for an rmw that fires no
//! `rmw_*` tracepoint (rmw_zenoh_cpp) under Humble-or-later rcl
//! `jazzy+ (no rmw events)` / `humble/iron (no rmw events)`, each with
//! `+caret` when CARET's events are there too), which decides the joins that
//! are possible.

use serde::{Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// Which generation of ros2_tracing's publish events a trace holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BaseLayout {
    /// `rmw_publish` carries the source timestamp (Jazzy on: tracetools ≥ 8).
    JazzyPlus,
    /// `rmw_publish` without the source timestamp, or `rmw_take` only (Humble, Iron).
    HumbleIron,
    /// `rcl_publish` and no rmw events, from Jazzy-or-later rcl (tracetools ≥ 8): an rmw that
    /// fires no `rmw_*` tracepoint (rmw_zenoh_cpp).
    JazzyNoRmw,
    /// The same from Humble or Iron rcl (tracetools 4.x–7.x).
    HumbleIronNoRmw,
    /// `rcl_publish` but no rmw events (Galactic).
    Galactic,
    /// No publish events, tracetools 1.x (Foxy).
    Foxy,
    /// No publish events at all.
    NoPublishEvents,
}

impl BaseLayout {
    pub const ALL: [BaseLayout; 7] = [
        BaseLayout::JazzyPlus,
        BaseLayout::HumbleIron,
        BaseLayout::JazzyNoRmw,
        BaseLayout::HumbleIronNoRmw,
        BaseLayout::Galactic,
        BaseLayout::Foxy,
        BaseLayout::NoPublishEvents,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BaseLayout::JazzyPlus => "jazzy+",
            BaseLayout::HumbleIron => "humble/iron",
            BaseLayout::JazzyNoRmw => "jazzy+ (no rmw events)",
            BaseLayout::HumbleIronNoRmw => "humble/iron (no rmw events)",
            BaseLayout::Galactic => "galactic",
            BaseLayout::Foxy => "foxy",
            BaseLayout::NoPublishEvents => "no publish events",
        }
    }
}

/// The layout of a trace as ddscope names it (`TraceOutcome::layout`, the
/// closing lines, the JSON of `latency`/`report`): a [`BaseLayout`], `+caret`
/// when the trace also holds CARET's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceLayout {
    pub base: BaseLayout,
    pub caret: bool,
}

impl Default for TraceLayout {
    /// The layout of a trace that held nothing.
    fn default() -> Self {
        LayoutSeen::default().name()
    }
}

impl fmt::Display for TraceLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.base.as_str())?;
        if self.caret {
            f.write_str("+caret")?;
        }
        Ok(())
    }
}

impl FromStr for TraceLayout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (base, caret) = s.strip_suffix("+caret").map_or((s, false), |b| (b, true));
        match BaseLayout::ALL.into_iter().find(|b| b.as_str() == base) {
            Some(base) => Ok(TraceLayout { base, caret }),
            None => {
                let known: Vec<&str> = BaseLayout::ALL.iter().map(|b| b.as_str()).collect();
                Err(format!("unknown trace layout {s:?}: expected {}, each optionally with +caret", known.join(", ")))
            }
        }
    }
}

impl Serialize for TraceLayout {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Which events a trace holds: the layout decides which joins are possible.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LayoutSeen {
    /// `rcl_init.version` (the tracetools version), the first one seen.
    pub tracetools: Option<String>,
    pub rmw_publish: u64,
    pub rmw_publish_with_ts: u64,
    pub rmw_take: u64,
    pub rcl_publish: u64,
    pub caret: u64,
    pub dispatch: u64,
    pub intra_publish: u64,
    pub ring_buffer: u64,
}

/// The major version of a tracetools version string (`"8.2.2"` → 8).
pub fn tracetools_major(v: &str) -> Option<u32> {
    v.trim().split('.').next()?.parse().ok()
}

impl LayoutSeen {
    /// The tracetools major version of the trace's `rcl_init`, when recorded.
    pub fn tracetools_major(&self) -> Option<u32> {
        self.tracetools.as_deref().and_then(tracetools_major)
    }

    /// No rmw event (so far) under Humble-or-later rcl, without CARET: the rmw fires no `rmw_*`
    /// tracepoint (rmw_zenoh_cpp). Publishes then get a window from `rcl_publish` to the thread's
    /// next event, and `rcl_take` makes a take without source timestamp (joined to the wire by
    /// the subscription's queue, [`super::join`]).
    pub fn rcl_only(&self) -> bool {
        self.rmw_publish == 0 && self.rmw_take == 0 && self.caret == 0 && self.dispatch == 0 && self.tracetools_major().is_some_and(|m| m >= 4)
    }

    /// The layout these events make: `jazzy+`, `humble/iron`, `… (no rmw events)`, `galactic`, `foxy`, with `+caret`.
    pub fn name(&self) -> TraceLayout {
        let base = if self.rmw_publish_with_ts > 0 {
            BaseLayout::JazzyPlus
        } else if self.rmw_publish > 0 || self.rmw_take > 0 {
            BaseLayout::HumbleIron
        } else if self.rcl_publish > 0 && self.rcl_only() {
            if self.tracetools_major().is_some_and(|m| m >= 8) {
                BaseLayout::JazzyNoRmw
            } else {
                BaseLayout::HumbleIronNoRmw
            }
        } else if self.rcl_publish > 0 {
            BaseLayout::Galactic
        } else if self.tracetools.as_deref().is_some_and(|v| v.starts_with("1.")) {
            BaseLayout::Foxy
        } else {
            BaseLayout::NoPublishEvents
        };
        TraceLayout { base, caret: self.caret > 0 || self.dispatch > 0 }
    }

    /// What this layout lets ddscope join, in one line.
    pub fn joins(&self) -> &'static str {
        let caret = self.caret > 0 || self.dispatch > 0;
        if self.rmw_publish_with_ts > 0 || caret {
            "exact: publish and take carry the source timestamp"
        } else if self.rmw_publish > 0 && self.rmw_take > 0 {
            "by publish window: the take's source timestamp falls between rmw_publish and the publishing thread's next event"
        } else if self.rcl_publish > 0 && self.rcl_only() {
            "by publish window and take queue: the wire sample's source timestamp falls between rcl_publish and the publishing thread's next event; a take (rcl_take, no source timestamp) gets the oldest sample captured at its host before it in the subscription's queue (rmw without rmw_* tracepoints: rmw_zenoh_cpp)"
        } else if self.rcl_publish > 0 {
            "none between processes: no rmw events and no source timestamps (Galactic/Foxy without CARET); callbacks, publish rates and publishes inside callbacks are measured"
        } else {
            "none: the trace holds no publish events"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back() {
        for base in BaseLayout::ALL {
            for caret in [false, true] {
                let l = TraceLayout { base, caret };
                assert_eq!(l.to_string().parse::<TraceLayout>(), Ok(l));
                assert_eq!(serde_json::to_string(&l).unwrap(), format!("\"{l}\""));
            }
        }
        assert_eq!("humble/iron+caret".parse::<TraceLayout>().unwrap().to_string(), "humble/iron+caret");
        let e = "rolling".parse::<TraceLayout>().unwrap_err();
        assert!(e.contains("\"rolling\"") && e.contains("jazzy+"), "{e}");
        assert_eq!(TraceLayout::default().to_string(), "no publish events");
    }

    #[test]
    fn no_rmw_events_is_named_by_the_rcl_version() {
        let seen = |v: &str| LayoutSeen { tracetools: Some(v.into()), rcl_publish: 3, ..Default::default() };
        assert_eq!(seen("8.2.2").name().to_string(), "jazzy+ (no rmw events)");
        assert_eq!(seen("10.1.0").name().to_string(), "jazzy+ (no rmw events)");
        assert_eq!(seen("4.1.1").name().to_string(), "humble/iron (no rmw events)");
        assert_eq!(seen("2.3.0").name().to_string(), "galactic");
        assert_eq!(LayoutSeen { tracetools: None, rcl_publish: 3, ..Default::default() }.name().to_string(), "galactic");
        assert!(seen("8.2.2").joins().starts_with("by publish window and take queue"));
        assert!(seen("2.3.0").joins().starts_with("none between processes"));
        // Humble with its rmw events stays humble/iron
        let h = LayoutSeen { rmw_publish: 3, rmw_take: 3, ..seen("4.1.1") };
        assert_eq!(h.name().to_string(), "humble/iron");
        let c = LayoutSeen { caret: 3, ..seen("8.2.2") };
        assert_eq!(c.name().to_string(), "galactic+caret");
    }
}
