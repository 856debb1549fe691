//! System metrics beside the DDS traffic (thesis 3.1.1: node_exporter next
//! to ddshark): CPU per core, memory and per-interface counters sampled from
//! `/proc`, under node_exporter's metric names and labels where they mean
//! the same (`node_cpu_seconds_total{cpu,mode}`, `node_memory_*_bytes`,
//! `node_network_{receive,transmit}_*_total{device}`, `node_load1`…), so
//! dashboards and queries work with either source.
//!
//! Users who already run node_exporter point [`SystemSource::NodeExporter`]
//! at it instead: its samples are scraped and forwarded (filtered to the
//! same families), so there is one sampler per host, not two.

use crate::promtext::{self, Family, Kind, Sample};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Clock ticks per second of `/proc/stat` (USER_HZ). Linux fixes it at 100
/// on every architecture ddscope runs on; node_exporter makes the same assumption.
const USER_HZ: f64 = 100.0;

pub use crate::error::SystemError;

fn read(path: PathBuf) -> Result<String, SystemError> {
    std::fs::read_to_string(&path).map_err(|error| SystemError::Read { path, error })
}

fn lbl(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// `/proc/stat` → `node_cpu_seconds_total{cpu,mode}` (plus guest time as
/// `node_cpu_guest_seconds_total`, as node_exporter does).
pub fn parse_proc_stat(text: &str, path: &Path) -> Result<Vec<Family>, SystemError> {
    const MODES: [&str; 8] = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"];
    let mut cpu = Family { name: "node_cpu_seconds_total".into(), help: "Seconds the CPUs spent in each mode.".into(), kind: Kind::Counter, samples: vec![] };
    let mut guest = Family {
        name: "node_cpu_guest_seconds_total".into(),
        help: "Seconds the CPUs spent in guests (VMs) for each mode.".into(),
        kind: Kind::Counter,
        samples: vec![],
    };
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let Some(name) = it.next() else { continue };
        // Per-core lines only ("cpu" alone is the sum, which node_exporter does not export).
        let Some(n) = name.strip_prefix("cpu").filter(|n| !n.is_empty()) else { continue };
        if n.parse::<u32>().is_err() {
            continue;
        }
        let vals: Vec<u64> = it.map(|v| v.parse::<u64>()).collect::<Result<_, _>>().map_err(|e| SystemError::Format {
            path: path.to_path_buf(),
            detail: format!("{name}: {e}"),
        })?;
        if vals.len() < 8 {
            return Err(SystemError::Format { path: path.to_path_buf(), detail: format!("{name}: {} columns, expected at least 8", vals.len()) });
        }
        for (i, mode) in MODES.iter().enumerate() {
            cpu.samples.push(Sample::new("node_cpu_seconds_total", lbl(&[("cpu", n), ("mode", mode)]), vals[i] as f64 / USER_HZ));
        }
        for (i, mode) in [(8usize, "user"), (9, "nice")] {
            if let Some(v) = vals.get(i) {
                guest.samples.push(Sample::new("node_cpu_guest_seconds_total", lbl(&[("cpu", n), ("mode", mode)]), *v as f64 / USER_HZ));
            }
        }
    }
    if cpu.samples.is_empty() {
        return Err(SystemError::Format { path: path.to_path_buf(), detail: "no cpuN lines".into() });
    }
    Ok(vec![cpu, guest])
}

/// `/proc/meminfo` → `node_memory_<Field>_bytes` gauges (node_exporter's
/// naming: `(`→`_`, `)` dropped, `_bytes` for kB values).
pub fn parse_meminfo(text: &str, path: &Path) -> Result<Vec<Family>, SystemError> {
    let mut out = vec![];
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else { continue };
        let mut it = rest.split_whitespace();
        let Some(v) = it.next() else { continue };
        let v: f64 = v.parse::<u64>().map_err(|e| SystemError::Format { path: path.to_path_buf(), detail: format!("{key}: {e}") })? as f64;
        let key = key.replace('(', "_").replace(')', "");
        let (name, value) = match it.next() {
            Some("kB") => (format!("node_memory_{key}_bytes"), v * 1024.0),
            _ => (format!("node_memory_{key}"), v),
        };
        if !promtext::valid_metric_name(&name) {
            continue;
        }
        out.push(Family {
            help: format!("Memory information field {key}."),
            kind: Kind::Gauge,
            samples: vec![Sample::new(name.clone(), vec![], value)],
            name,
        });
    }
    if !out.iter().any(|f| f.name == "node_memory_MemTotal_bytes") {
        return Err(SystemError::Format { path: path.to_path_buf(), detail: "no MemTotal".into() });
    }
    Ok(out)
}

/// `/proc/net/dev` → `node_network_{receive,transmit}_<counter>_total{device}`.
pub fn parse_net_dev(text: &str, path: &Path) -> Result<Vec<Family>, SystemError> {
    const RX: [&str; 8] = ["bytes", "packets", "errs", "drop", "fifo", "frame", "compressed", "multicast"];
    const TX: [&str; 8] = ["bytes", "packets", "errs", "drop", "fifo", "colls", "carrier", "compressed"];
    let mut fams: Vec<Family> = RX
        .iter()
        .map(|c| ("receive", c))
        .chain(TX.iter().map(|c| ("transmit", c)))
        .map(|(dir, c)| Family {
            name: format!("node_network_{dir}_{c}_total"),
            help: format!("Network device statistic {dir}_{c}."),
            kind: Kind::Counter,
            samples: vec![],
        })
        .collect();
    for line in text.lines().skip(2) {
        let Some((dev, rest)) = line.split_once(':') else { continue };
        let dev = dev.trim();
        let vals: Vec<u64> = rest.split_whitespace().map(|v| v.parse::<u64>()).collect::<Result<_, _>>().map_err(|e| SystemError::Format {
            path: path.to_path_buf(),
            detail: format!("{dev}: {e}"),
        })?;
        if vals.len() != 16 {
            return Err(SystemError::Format { path: path.to_path_buf(), detail: format!("{dev}: {} columns, expected 16", vals.len()) });
        }
        for (i, f) in fams.iter_mut().enumerate() {
            f.samples.push(Sample::new(f.name.clone(), lbl(&[("device", dev)]), vals[i] as f64));
        }
    }
    Ok(fams)
}

/// `/proc/loadavg` → `node_load1`, `node_load5`, `node_load15`.
pub fn parse_loadavg(text: &str, path: &Path) -> Result<Vec<Family>, SystemError> {
    let vals: Vec<f64> = text.split_whitespace().take(3).map(|v| v.parse::<f64>()).collect::<Result<_, _>>().map_err(|e| SystemError::Format {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    if vals.len() != 3 {
        return Err(SystemError::Format { path: path.to_path_buf(), detail: "expected three load averages".into() });
    }
    Ok(["1", "5", "15"]
        .iter()
        .zip(vals)
        .map(|(n, v)| Family { name: format!("node_load{n}"), help: format!("{n}m load average."), kind: Kind::Gauge, samples: vec![Sample::new(format!("node_load{n}"), vec![], v)] })
        .collect())
}

/// The agent's own CPU and memory under the Prometheus client conventions
/// (`process_cpu_seconds_total`, `process_resident_memory_bytes`).
pub fn parse_self(stat: &str, status: &str, path: &Path) -> Result<Vec<Family>, SystemError> {
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th fields.
    let after = stat.rsplit_once(')').map(|x| x.1).ok_or_else(|| SystemError::Format { path: path.to_path_buf(), detail: "no ')' in stat".into() })?;
    let f: Vec<&str> = after.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).ok_or_else(|| SystemError::Format { path: path.to_path_buf(), detail: format!("stat field {}", i + 3) });
    let cpu = (num(11)? + num(12)?) as f64 / USER_HZ;
    let rss_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| SystemError::Format { path: path.to_path_buf(), detail: "no VmRSS in status".into() })?;
    Ok(vec![
        Family { name: "process_cpu_seconds_total".into(), help: "User and system CPU time of the ddscope process.".into(), kind: Kind::Counter, samples: vec![Sample::new("process_cpu_seconds_total", vec![], cpu)] },
        Family {
            name: "process_resident_memory_bytes".into(),
            help: "Resident memory of the ddscope process.".into(),
            kind: Kind::Gauge,
            samples: vec![Sample::new("process_resident_memory_bytes", vec![], rss_kb as f64 * 1024.0)],
        },
    ])
}

/// One sample of every system family from `proc_root` (normally `/proc`).
pub fn sample_proc(proc_root: &Path, include_process: bool) -> Result<Vec<Family>, SystemError> {
    let mut fams = vec![];
    let p = proc_root.join("stat");
    fams.extend(parse_proc_stat(&read(p.clone())?, &p)?);
    let p = proc_root.join("meminfo");
    fams.extend(parse_meminfo(&read(p.clone())?, &p)?);
    let p = proc_root.join("net/dev");
    fams.extend(parse_net_dev(&read(p.clone())?, &p)?);
    let p = proc_root.join("loadavg");
    fams.extend(parse_loadavg(&read(p.clone())?, &p)?);
    if include_process {
        let p = proc_root.join("self/stat");
        let stat = read(p.clone())?;
        let status = read(proc_root.join("self/status"))?;
        fams.extend(parse_self(&stat, &status, &p)?);
    }
    Ok(fams)
}

/// Families forwarded from a node_exporter (the ones the dashboards use).
pub const DEFAULT_FORWARD_PREFIXES: &[&str] = &["node_cpu_seconds_total", "node_cpu_guest_seconds_total", "node_memory_", "node_network_", "node_load"];

/// Scrapes a Prometheus text endpoint once and keeps the families whose
/// name starts with one of `prefixes` (all when empty).
pub fn scrape(url: &str, timeout: Duration, prefixes: &[String]) -> Result<Vec<Family>, SystemError> {
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(timeout)).http_status_as_error(false).build().into();
    let err = |detail: String| SystemError::Scrape { url: url.to_string(), detail };
    let mut resp = agent.get(url).header("Accept", "text/plain;version=0.0.4").call().map_err(|e| err(e.to_string()))?;
    let status = resp.status().as_u16();
    let text = resp.body_mut().with_config().limit(64 << 20).read_to_string().map_err(|e| err(e.to_string()))?;
    if status != 200 {
        return Err(err(format!("HTTP {status}: {}", text.chars().take(200).collect::<String>())));
    }
    let fams = promtext::parse(&text).map_err(|e| err(format!("invalid exposition: {e}")))?;
    Ok(fams.into_iter().filter(|f| prefixes.is_empty() || prefixes.iter().any(|p| f.name.starts_with(p.as_str()))).collect())
}

/// Where system metrics come from.
#[derive(Debug, Clone)]
pub enum SystemSource {
    /// Sample `/proc` (or another proc root, for tests) directly; with `processes`, also the
    /// load of the processes of those names ([`crate::procload`], at most `max_processes`).
    Proc { root: PathBuf, include_process: bool, processes: Vec<String>, max_processes: usize },
    /// Scrape a node_exporter (e.g. `http://127.0.0.1:9100/metrics`) and forward these families.
    NodeExporter { url: String, prefixes: Vec<String> },
}

impl SystemSource {
    pub fn proc() -> Self {
        SystemSource::Proc { root: PathBuf::from("/proc"), include_process: true, processes: vec![], max_processes: crate::procload::DEFAULT_MAX_PROCESSES }
    }

    /// `/proc`, plus the load of the processes called `names` (`agent --process`).
    pub fn proc_with_processes(names: &[String], max: usize) -> Self {
        SystemSource::Proc { root: PathBuf::from("/proc"), include_process: true, processes: names.to_vec(), max_processes: max }
    }

    pub fn node_exporter(url: &str) -> Self {
        SystemSource::NodeExporter { url: url.to_string(), prefixes: DEFAULT_FORWARD_PREFIXES.iter().map(|s| s.to_string()).collect() }
    }

    /// Takes one sample.
    pub fn sample(&self, timeout: Duration) -> Result<Vec<Family>, SystemError> {
        match self {
            SystemSource::Proc { root, include_process, processes, max_processes } => {
                let mut f = sample_proc(root, *include_process)?;
                if !processes.is_empty() {
                    f.extend(crate::procload::process_families(root, processes, *max_processes));
                }
                Ok(f)
            }
            SystemSource::NodeExporter { url, prefixes } => scrape(url, timeout, prefixes),
        }
    }
}

/// One round of system metrics.
#[derive(Debug, Clone)]
pub struct SystemSnapshot {
    /// Host (agent) name: a label in InfluxDB, the `source` key in the registry.
    pub host: String,
    pub ts_ns: i64,
    /// Empty when this round failed (see `last_error`): stale values are not repeated.
    pub families: Vec<Family>,
    /// Failed rounds so far.
    pub errors_total: u64,
    pub last_error: Option<String>,
}

impl SystemSnapshot {
    /// The families plus `ddscope_system_sample_errors_total{host}`.
    pub fn families_with_errors(&self) -> Vec<Family> {
        let mut f = self.families.clone();
        f.push(Family {
            name: "ddscope_system_sample_errors_total".into(),
            help: "Rounds of system metrics that could not be sampled or scraped.".into(),
            kind: Kind::Counter,
            samples: vec![Sample::new("ddscope_system_sample_errors_total", lbl(&[("host", &self.host)]), self.errors_total as f64)],
        });
        f
    }
}

pub fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// Samples a [`SystemSource`] every `interval` on its own thread and hands
/// each snapshot to a callback (typically: registry and InfluxDB sink).
pub struct SystemSampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SystemSampler {
    pub fn start(
        host: &str,
        source: SystemSource,
        interval: Duration,
        mut on_snapshot: impl FnMut(&SystemSnapshot) + Send + 'static,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let host = host.to_string();
        let interval = interval.max(Duration::from_millis(10));
        let thread = crate::workers::spawn("ddscope-system", move || {
            let mut errors = 0u64;
            let mut last_error = None;
            let mut next = std::time::Instant::now();
            while !st.load(Relaxed) {
                let ts_ns = now_ns();
                let families = match source.sample(interval.max(Duration::from_secs(2))) {
                    Ok(f) => f,
                    Err(e) => {
                        errors += 1;
                        last_error = Some(e.to_string());
                        vec![]
                    }
                };
                on_snapshot(&SystemSnapshot { host: host.clone(), ts_ns, families, errors_total: errors, last_error: last_error.clone() });
                next += interval;
                let now = std::time::Instant::now();
                if next < now {
                    next = now;
                }
                // Sleep in small steps so that stop() is prompt.
                while !st.load(Relaxed) {
                    let now = std::time::Instant::now();
                    if now >= next {
                        break;
                    }
                    std::thread::sleep((next - now).min(Duration::from_millis(50)));
                }
            }
        })?;
        Ok(SystemSampler { stop, thread: Some(thread) })
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SystemSampler {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_per_core_in_seconds() {
        let t = "cpu  10 0 0 0 0 0 0 0 0 0\ncpu0 100 2 30 4000 5 6 7 8 9 10\ncpu1 1 1 1 1 1 1 1 1 0 0\nintr 1 2\n";
        let f = parse_proc_stat(t, Path::new("stat")).unwrap();
        let cpu = &f[0];
        assert_eq!(cpu.samples.len(), 16);
        let idle0 = cpu.samples.iter().find(|s| s.label("cpu") == Some("0") && s.label("mode") == Some("idle")).unwrap();
        assert_eq!(idle0.value, 40.0);
        assert_eq!(f[1].samples[0].value, 0.09);
        assert!(parse_proc_stat("cpu0 1 2\n", Path::new("stat")).is_err());
        assert!(parse_proc_stat("nothing\n", Path::new("stat")).is_err());
    }

    #[test]
    fn meminfo_names_follow_node_exporter() {
        let t = "MemTotal:       24000000 kB\nMemAvailable:   20000000 kB\nActive(anon):     100 kB\nHugePages_Total:       0\n";
        let f = parse_meminfo(t, Path::new("meminfo")).unwrap();
        let names: Vec<_> = f.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["node_memory_MemTotal_bytes", "node_memory_MemAvailable_bytes", "node_memory_Active_anon_bytes", "node_memory_HugePages_Total"]);
        assert_eq!(f[0].samples[0].value, 24_000_000.0 * 1024.0);
        assert!(parse_meminfo("MemTotal: x kB\n", Path::new("m")).is_err());
    }

    #[test]
    fn net_dev_columns() {
        let t = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo: 1000 10 1 2 3 4 5 6 2000 20 7 8 9 10 11 12\n";
        let f = parse_net_dev(t, Path::new("dev")).unwrap();
        let get = |n: &str| f.iter().find(|f| f.name == n).unwrap().samples[0].value;
        assert_eq!(get("node_network_receive_bytes_total"), 1000.0);
        assert_eq!(get("node_network_receive_drop_total"), 2.0);
        assert_eq!(get("node_network_transmit_packets_total"), 20.0);
        assert_eq!(get("node_network_transmit_errs_total"), 7.0);
        assert_eq!(f[0].samples[0].label("device"), Some("lo"));
        assert!(parse_net_dev("a\nb\n lo: 1 2 3\n", Path::new("dev")).is_err());
    }

    #[test]
    fn this_machine_has_the_families_the_dashboard_uses() {
        let f = sample_proc(Path::new("/proc"), true).unwrap();
        for n in ["node_cpu_seconds_total", "node_memory_MemAvailable_bytes", "node_memory_MemTotal_bytes", "node_network_receive_bytes_total", "process_cpu_seconds_total"] {
            assert!(f.iter().any(|f| f.name == n && !f.samples.is_empty()), "{n}");
        }
        let e = sample_proc(Path::new("/nonexistent-proc"), false).unwrap_err();
        assert!(e.to_string().contains("/nonexistent-proc/stat"), "{e}");
    }
}
