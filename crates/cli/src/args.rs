//! What the user typed, turned into types once, at the edge: clap calls
//! these parsers, so every command receives nanoseconds, names and enums —
//! no other module sees option strings. Bounds are checked here with a
//! one-line reason.

use ddscope_core::window::Window;
use ddscope_traffic::units::{parse_signed_nanos, Nanos};

/// A non-negative duration in nanoseconds that fits an `i64`.
pub fn duration_ns(s: &str) -> Result<i64, String> {
    let n: Nanos = s.parse().map_err(|e| format!("{e}"))?;
    i64::try_from(n.0).map_err(|_| format!("{s:?}: too large (at most {} s)", i64::MAX / 1_000_000_000))
}

/// The correlation window, one option for every command that judges samples
/// or packets (`latency`, `report`, `flows`, `serve`, `agent`): its bounds,
/// default and derived intervals are `ddscope_core::window::Window`'s.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct WindowArg {
    /// How long after it was sent a sample (flows: a packet) is judged, and called lost if it has not arrived; 1ms to 1h
    #[arg(long = "window", value_name = "DURATION", default_value_t = Window::DEFAULT)]
    pub window: Window,
}

/// A duration that must be positive (timeouts, run lengths).
pub fn positive_duration(s: &str) -> Result<std::time::Duration, String> {
    let v = duration_ns(s)?;
    if v == 0 {
        return Err(format!("{s:?}: must be longer than 0"));
    }
    Ok(std::time::Duration::from_nanos(v as u64))
}

/// `auto` or a positive duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    Auto,
    Fixed(i64),
}

impl Period {
    pub fn ns(self) -> Option<i64> {
        match self {
            Period::Auto => None,
            Period::Fixed(n) => Some(n),
        }
    }
}

pub fn period(s: &str) -> Result<Period, String> {
    if s == "auto" {
        return Ok(Period::Auto);
    }
    let v = duration_ns(s)?;
    if v == 0 {
        return Err(format!("{s:?}: a period must be longer than 0 (or auto)"));
    }
    Ok(Period::Fixed(v))
}

/// `NAME=±DURATION`: the clock offset t_o of one capture point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offset {
    pub name: String,
    pub ns: i64,
}

/// The highest DDS domain id: the RTPS port mapping (7400 + 250·d + …) leaves a valid UDP port up to 232.
pub const MAX_DOMAIN: u32 = 232;

/// `--domain N` of every verb: a DDS domain id, 0 to 232.
pub fn domain(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(d) if d <= MAX_DOMAIN => Ok(d),
        _ => Err(format!("not a DDS domain id: {s:?} (0 to {MAX_DOMAIN}: the RTPS port mapping, 7400 + 250 × domain, ends there)")),
    }
}

pub fn offset(s: &str) -> Result<Offset, String> {
    let (name, dur) = s.split_once('=').ok_or_else(|| format!("{s:?}: write NAME=±DURATION, e.g. pc2=+37s"))?;
    if name.is_empty() {
        return Err(format!("{s:?}: the capture-point name is missing"));
    }
    let ns = parse_signed_nanos(dur).map_err(|e| format!("{s:?}: {e}"))?;
    Ok(Offset { name: name.to_string(), ns })
}

/// `TOPIC=DURATION|period|pNN`: a latency budget for the topics matching TOPIC (a glob),
/// given or derived per flow (its publication period, a percentile of its own end to end).
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetArg {
    pub topic: String,
    pub limit: ddscope_core::latency::explain::Limit,
}

pub fn budget(s: &str) -> Result<BudgetArg, String> {
    use ddscope_core::latency::explain::{Budget, Limit};
    // The argument quoted once, at most 200 characters (a 100 KB topic is not echoed back).
    let q = format!("\"{}\"", ddscope_traffic::text::excerpt(s, ddscope_traffic::text::EXCERPT_CHARS));
    let (topic, value) = s.rsplit_once('=').ok_or_else(|| format!("{q}: write TOPIC=DURATION (or TOPIC=period, TOPIC=p99), e.g. /image=20ms"))?;
    if topic.is_empty() {
        return Err(format!("{q}: the topic is missing"));
    }
    let value = value.trim();
    let limit = if value == "period" {
        Limit::Period
    } else if let Some(p) = value.strip_prefix('p').filter(|p| p.starts_with(|c: char| c.is_ascii_digit())) {
        Limit::Percentile(p.parse::<f64>().map_err(|_| format!("{q}: a percentile is written p99 or p99.9"))?)
    } else {
        let ns = duration_ns(value).map_err(|e| format!("{q}: {e} (or period, or a percentile such as p99)"))?;
        if ns == 0 {
            return Err(format!("{q}: a budget must be longer than 0"));
        }
        Limit::Fixed(ns)
    };
    Budget::with_limit(topic, limit).map_err(|e| {
        // A long pattern is quoted once, above; the reason names it without repeating it.
        let e = if topic.len() > ddscope_traffic::text::EXCERPT_CHARS { e.replace(topic, "(the pattern)") } else { e };
        format!("{q}: {}", ddscope_traffic::text::excerpt(&e, ddscope_traffic::text::EXCERPT_CHARS))
    })?;
    Ok(BudgetArg { topic: topic.to_string(), limit })
}

/// Budgets from a file: one `TOPIC = DURATION` per line (`#` comments, blank lines).
pub fn budget_file(path: &std::path::Path) -> Result<Vec<BudgetArg>, String> {
    const MAX_BYTES: u64 = 1 << 20;
    let text = ddscope_traffic::fsio::read_bounded_text(path, MAX_BYTES, "budget file").map_err(|e| e.to_string())?;
    let mut out = vec![];
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let (t, d) = line.rsplit_once('=').ok_or_else(|| format!("{}:{}: write TOPIC = DURATION, e.g. /image = 20ms", path.display(), n + 1))?;
        let t = t.trim().trim_matches('"');
        out.push(budget(&format!("{t}={}", d.trim().trim_matches('"'))).map_err(|e| format!("{}:{}: {}", path.display(), n + 1, e))?);
    }
    Ok(out)
}

/// `NAME=DIR`: another run to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedRun {
    pub name: String,
    pub dir: std::path::PathBuf,
}

pub fn named_run(s: &str) -> Result<NamedRun, String> {
    match s.split_once('=') {
        Some((n, d)) if !n.is_empty() && !d.is_empty() => Ok(NamedRun { name: n.to_string(), dir: d.into() }),
        _ => Err(format!("{s:?}: write NAME=DIR")),
    }
}

/// `HOST=DIR`: the ros2_tracing trace of one host (named after its capture point).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceArg {
    pub host: String,
    pub dir: std::path::PathBuf,
}

pub fn trace(s: &str) -> Result<TraceArg, String> {
    match s.split_once('=') {
        Some((h, d)) if !h.is_empty() && !d.is_empty() && !h.contains('/') => Ok(TraceArg { host: h.to_string(), dir: d.into() }),
        Some((h, _)) if !h.contains('/') => {
            Err(format!("{s:?}: write HOST=DIR (HOST = the capture-point name of the traced host, e.g. pc1=~/.ros/tracing/session-1) or DIR alone"))
        }
        _ => {
            // DIR alone: the host is named after the directory (traces without captures).
            let dir = std::path::PathBuf::from(s);
            let host = dir
                .file_name()
                .map(|n| n.to_string_lossy().trim_end_matches(".lttng").to_string())
                .filter(|n| !n.is_empty())
                .ok_or_else(|| format!("{s:?}: not a trace directory (write HOST=DIR or DIR)"))?;
            Ok(TraceArg { host, dir })
        }
    }
}

/// `auto` (list the chains found) or topics in order: `/raw_image,/image,/actuator`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathArg {
    Auto,
    Topics(Vec<String>),
}

pub fn path(s: &str) -> Result<PathArg, String> {
    if s == "auto" {
        return Ok(PathArg::Auto);
    }
    // A CARET architecture file (FILE.yaml or FILE.yaml:PATH_NAME): its path's topics.
    let (file, name) = match s.rsplit_once(':') {
        Some((f, n)) if f.ends_with(".yaml") || f.ends_with(".yml") => (f, Some(n)),
        _ => (s, None),
    };
    if file.ends_with(".yaml") || file.ends_with(".yml") {
        let paths = ddscope_core::ros2::caret_arch::read_paths(std::path::Path::new(file))?;
        let p = ddscope_core::ros2::caret_arch::select(paths, name)?;
        return Ok(PathArg::Topics(p.topics));
    }
    let topics: Vec<String> = s.split(',').map(|t| t.trim().to_string()).collect();
    if topics.len() < 2 || topics.iter().any(|t| t.is_empty()) {
        return Err(format!("{s:?}: give two or more topics in order, comma-separated (/raw_image,/image,/actuator), or auto"));
    }
    if let Some(t) = topics.iter().find(|t| !t.starts_with('/')) {
        return Err(format!("{s:?}: {t:?} is not a ROS 2 topic name (they start with /)"));
    }
    Ok(PathArg::Topics(topics))
}

#[cfg(test)]
mod tests {
    #[test]
    fn domain_ids_are_0_to_232() {
        assert_eq!(super::domain("0"), Ok(0));
        assert_eq!(super::domain("232"), Ok(232));
        for bad in ["233", "999", "-1", "x", ""] {
            assert!(super::domain(bad).unwrap_err().contains("0 to 232"), "{bad}");
        }
    }

    use super::*;

    #[test]
    fn budgets_are_durations_periods_or_percentiles() {
        use ddscope_core::latency::explain::Limit;
        assert_eq!(budget("/image=12ms").unwrap().limit, Limit::Fixed(12_000_000));
        assert_eq!(budget("/camera/*=period").unwrap(), BudgetArg { topic: "/camera/*".into(), limit: Limit::Period });
        assert_eq!(budget("/image=p99.9").unwrap().limit, Limit::Percentile(99.9));
        for (bad, why) in [("/image", "TOPIC=DURATION"), ("=5ms", "topic is missing"), ("/image=0s", "longer than 0"), ("/image=p100", "between 0 and 100"), ("/image=p9x", "p99 or p99.9"), ("/image=soon", "percentile such as p99")] {
            let e = budget(bad).err().unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn the_window_option_is_bounded_with_clear_reasons() {
        #[derive(clap::Parser)]
        struct Cmd {
            #[command(flatten)]
            w: WindowArg,
        }
        use clap::Parser;
        assert_eq!(Cmd::try_parse_from(["x"]).unwrap().w.window, Window::DEFAULT);
        assert_eq!(Cmd::try_parse_from(["x", "--window", "250ms"]).unwrap().w.window.ns(), 250_000_000);
        for (bad, why) in [("0s", "between 1ms and 1h"), ("8000000000s", "between 1ms and 1h"), ("99999999999999999999s", "too large"), ("100000000000s", "too large"), ("1e300s", ""), ("5 parsecs", "")] {
            let e = Cmd::try_parse_from(["x", "--window", bad]).err().unwrap_or_else(|| panic!("{bad} accepted")).to_string();
            assert!(e.contains("--window") && e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn offsets_periods_and_runs() {
        assert_eq!(offset("pc2=+37s"), Ok(Offset { name: "pc2".into(), ns: 37_000_000_000 }));
        assert_eq!(offset("pc2=-1.5ms"), Ok(Offset { name: "pc2".into(), ns: -1_500_000 }));
        assert!(offset("pc2").is_err());
        assert!(offset("=1s").is_err());
        assert_eq!(period("auto"), Ok(Period::Auto));
        assert_eq!(period("100ms"), Ok(Period::Fixed(100_000_000)));
        assert!(period("0s").is_err());
        assert_eq!(named_run("a=b/c").map(|r| r.name), Ok("a".into()));
        assert!(named_run("a=").is_err());
        assert!(positive_duration("0s").is_err());
        assert_eq!(positive_duration("2s"), Ok(std::time::Duration::from_secs(2)));
    }

    #[test]
    fn traces_and_paths() {
        assert_eq!(trace("pc1=/tmp/t").map(|t| t.host), Ok("pc1".into()));
        // DIR alone (traces without captures): the host is the directory's name.
        assert_eq!(trace("/home/u/.ros/tracing/s1").map(|t| (t.host, t.dir)), Ok(("s1".into(), "/home/u/.ros/tracing/s1".into())));
        assert_eq!(trace("pc1.lttng").map(|t| t.host), Ok("pc1".into()));
        assert_eq!(trace("/x/a=b").map(|t| t.host), Ok("a=b".into()));
        assert!(trace("pc1=").unwrap_err().contains("HOST=DIR"));
        assert!(trace("=x").is_err());
        assert_eq!(path("auto"), Ok(PathArg::Auto));
        assert_eq!(path("/a, /b"), Ok(PathArg::Topics(vec!["/a".into(), "/b".into()])));
        assert!(path("/a").unwrap_err().contains("two or more"));
        assert!(path("/a,,/b").is_err());
        assert!(path("/a,b").unwrap_err().contains("not a ROS 2 topic"));
    }
}

/// A clap parser for a duration (`500ms`, `5s`, `2m`) within [min, max].
pub fn duration_between(min: std::time::Duration, max: std::time::Duration) -> impl Fn(&str) -> Result<std::time::Duration, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let d = s.parse::<ddscope_traffic::units::Nanos>().map_err(|e| e.to_string())?.as_duration();
        if d < min || d > max {
            return Err(format!("must be between {} and {}", ddscope_traffic::units::Nanos(min.as_nanos() as u64), ddscope_traffic::units::Nanos(max.as_nanos() as u64)));
        }
        Ok(d)
    }
}

