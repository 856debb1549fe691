//! What each process on a host used of the CPU over time: the evidence of a
//! CPU hog (`cpu_contention` in "why was it late").
//!
//! The input is a per-process load file in the columns the lab writes
//! (`load.csv`, see docs/lab.md) and any sampler of `/proc/PID/stat` can
//! produce: `t_ns,process,pid,cpu_user_s,cpu_system_s,…` with cumulative
//! CPU seconds per process, and optionally `cpu_run_ns` (the scheduler's
//! ns, `/proc/PID/task/*/schedstat`), read instead of the 10 ms ticks where
//! a line has it. Which host a process ran on is the caller's to
//! say (a lab run's node list, a `PROCESS_on_HOST` name, or `--load
//! HOST=FILE`). Bounded: at most `max_processes` processes and `max_points`
//! readings in all; what is beyond either, and every line that cannot be
//! read, is counted.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// One process's readings: (time, cumulative CPU ns), in time order.
#[derive(Debug, Clone)]
struct Process {
    host: Arc<str>,
    name: String,
    points: Vec<(i64, i64)>,
}

/// A competing process's use of the CPU over a span of time.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuUse {
    pub host: Arc<str>,
    pub process: String,
    /// CPU time it used between the two readings around the span.
    pub cpu_ns: i64,
    /// The readings' span (the span asked for, widened to the readings around it).
    pub span_ns: i64,
}

impl CpuUse {
    /// Cores it kept busy on average over the readings' span.
    pub fn cores(&self) -> f64 {
        self.cpu_ns as f64 / self.span_ns.max(1) as f64
    }
}

/// Per-process CPU time of one or more hosts.
#[derive(Debug, Clone, Default)]
pub struct CpuLoad {
    procs: Vec<Process>,
    index: HashMap<(Arc<str>, String, i64), usize>,
    /// The files read (for the closing line).
    pub files: Vec<String>,
    pub lines: u64,
    /// Lines that could not be read (wrong column count, a value not a number, time going back).
    pub bad_lines: u64,
    /// Readings of processes beyond `max_processes`, or beyond `max_points` in all.
    pub not_kept: u64,
    /// The first bad line: file, line number and why.
    pub first_problem: Option<String>,
    max_processes: usize,
    max_points: usize,
    points: usize,
}

impl CpuLoad {
    pub fn new(max_processes: usize, max_points: usize) -> CpuLoad {
        CpuLoad { max_processes, max_points, ..Default::default() }
    }

    /// Reads a load file; `host_of(process name)` says which host each process
    /// ran on (`None`: the process is skipped, counted in `not_kept`).
    pub fn read_csv(&mut self, path: &Path, host_of: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
        let text = ddscope_traffic::fsio::read_bounded_text(path, ddscope_traffic::fsio::MAX_LOAD_BYTES, "load file").map_err(|e| e.to_string())?;
        self.add_csv(&path.display().to_string(), &text, host_of)
    }

    /// [`CpuLoad::read_csv`] on text already read; `file` names it in errors.
    pub fn add_csv(&mut self, file: &str, text: &str, host_of: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
        let mut lines = text.lines().enumerate();
        let header = lines.next().map(|(_, l)| l).unwrap_or("");
        let cols: Vec<&str> = header.split(',').collect();
        let col = |name: &str| cols.iter().position(|c| c.trim() == name).ok_or_else(|| format!("{file}: line 1: no column {name:?} in \"{}\" (the columns are t_ns,process,pid,cpu_user_s,cpu_system_s,…)", ddscope_traffic::text::excerpt(header, ddscope_traffic::text::EXCERPT_CHARS)));
        let (ct, cp, cpid, cu, cs) = (col("t_ns")?, col("process")?, col("pid")?, col("cpu_user_s")?, col("cpu_system_s")?);
        // The scheduler's ns where the file has them (ticks are 10 ms).
        let crun = cols.iter().position(|c| c.trim() == "cpu_run_ns");
        self.files.push(file.to_string());
        let mut hosts: HashMap<String, Option<Arc<str>>> = HashMap::new();
        for (n, line) in lines {
            if line.trim().is_empty() {
                continue;
            }
            self.lines += 1;
            let f: Vec<&str> = line.split(',').collect();
            let parsed = (|| {
                // A field is quoted in a message at most EXCERPT_CHARS long.
                let q = |v: &str| ddscope_traffic::text::excerpt(v, ddscope_traffic::text::EXCERPT_CHARS);
                let get = |i: usize| f.get(i).map(|s| s.trim()).ok_or_else(|| format!("{} columns, the header has {}", f.len(), cols.len()));
                let t: i64 = get(ct)?.parse().map_err(|_| format!("t_ns \"{}\" is not a number", q(get(ct).unwrap_or(""))))?;
                let pid: i64 = get(cpid)?.parse().map_err(|_| "pid is not a number".to_string())?;
                let secs = |i: usize, what: &str| -> Result<f64, String> {
                    let v: f64 = get(i)?.parse().map_err(|_| format!("{what} \"{}\" is not a number", q(get(i).unwrap_or(""))))?;
                    if v.is_finite() && v >= 0.0 {
                        Ok(v)
                    } else {
                        Err(format!("{what} {v} is not a CPU time"))
                    }
                };
                let cpu_ns = match crun.and_then(|i| f.get(i)).map(|v| v.trim()).filter(|v| !v.is_empty()) {
                    Some(v) => v.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| format!("cpu_run_ns \"{}\" is not a CPU time in ns", q(v)))?,
                    None => (1e9 * (secs(cu, "cpu_user_s")? + secs(cs, "cpu_system_s")?)).round() as i64,
                };
                Ok::<_, String>((t, get(cp)?.to_string(), pid, cpu_ns))
            })();
            let (t, name, pid, cpu_ns) = match parsed {
                Ok(v) => v,
                Err(why) => {
                    self.bad(file, n + 1, &why);
                    continue;
                }
            };
            // The name → host cache is as bounded as the processes kept: past it, `host_of` is asked each time.
            let host = match hosts.get(&name) {
                Some(h) => h.clone(),
                None => {
                    let h = host_of(&name).map(Arc::from);
                    if hosts.len() < self.max_processes {
                        hosts.insert(name.clone(), h.clone());
                    }
                    h
                }
            };
            let Some(host) = host else {
                self.not_kept += 1;
                continue;
            };
            let key = (host.clone(), name.clone(), pid);
            let i = match self.index.get(&key) {
                Some(i) => *i,
                None if self.procs.len() >= self.max_processes => {
                    self.not_kept += 1;
                    continue;
                }
                None => {
                    self.procs.push(Process { host, name, points: vec![] });
                    self.index.insert(key, self.procs.len() - 1);
                    self.procs.len() - 1
                }
            };
            if self.points >= self.max_points {
                self.not_kept += 1;
                continue;
            }
            let p = &mut self.procs[i].points;
            if p.last().is_some_and(|(lt, lc)| t <= *lt || cpu_ns < *lc) {
                self.bad(file, n + 1, "time or CPU time going back for its process");
                continue;
            }
            p.push((t, cpu_ns));
            self.points += 1;
        }
        Ok(())
    }

    fn bad(&mut self, file: &str, line: usize, why: &str) {
        self.bad_lines += 1;
        self.first_problem.get_or_insert_with(|| format!("{file}: line {line}: {why}"));
    }

    pub fn is_empty(&self) -> bool {
        self.points == 0
    }

    /// The hosts with readings.
    pub fn hosts(&self) -> Vec<Arc<str>> {
        let mut h: Vec<Arc<str>> = self.procs.iter().map(|p| p.host.clone()).collect();
        h.sort();
        h.dedup();
        h
    }

    /// The process of `host` (other than those named in `except`) that used the
    /// most CPU over `[from, to]`, measured between the last reading at or
    /// before `from` and the first at or after `to`. Only readings close
    /// enough to say something about the span count: the two must lie at most
    /// `slack_ns` outside it on each side.
    pub fn busiest(&self, host: &str, except: &[&str], from: i64, to: i64, slack_ns: i64) -> Option<CpuUse> {
        self.procs
            .iter()
            .filter(|p| &*p.host == host && !except.iter().any(|e| same_process(e, &p.name)))
            .filter_map(|p| {
                let after = p.points.partition_point(|(t, _)| *t < to);
                let before = p.points.partition_point(|(t, _)| *t <= from).checked_sub(1)?;
                let (ta, ca) = p.points[before];
                let (tb, cb) = *p.points.get(after)?;
                (from - ta <= slack_ns && tb - to <= slack_ns && tb > ta).then(|| CpuUse { host: p.host.clone(), process: p.name.clone(), cpu_ns: cb - ca, span_ns: tb - ta })
            })
            .max_by(|a, b| a.cores().total_cmp(&b.cores()).then_with(|| b.process.cmp(&a.process)))
    }

    /// The median interval between a process's readings (the evidence's resolution).
    pub fn interval_ns(&self) -> Option<i64> {
        let mut d: Vec<i64> = self.procs.iter().flat_map(|p| p.points.windows(2).map(|w| w[1].0 - w[0].0)).collect();
        if d.is_empty() {
            return None;
        }
        let mid = d.len() / 2;
        Some(*d.select_nth_unstable(mid).1)
    }
}

/// A ROS node name (`/ns/fusion`, `fusion`) and a process name (`fusion`,
/// `fusion_on_pc2`) name the same process.
fn same_process(node: &str, process: &str) -> bool {
    let node = node.rsplit('/').next().unwrap_or(node);
    !node.is_empty() && (process == node || process.strip_prefix(node).is_some_and(|r| r.starts_with("_on_")))
}

/// The host a lab process name says (`tcpdump_on_pc2` → `pc2`).
pub fn host_in_name(process: &str) -> Option<&str> {
    process.rsplit_once("_on_").map(|(_, h)| h).filter(|h| !h.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "t_ns,process,pid,cpu_user_s,cpu_system_s,rss_bytes,ctx_voluntary,ctx_involuntary,threads
1000000000,fusion,10,0.00,0.00,1,0,0,1
1000000000,hog,11,0.00,0.00,1,0,0,1
1000000000,tcpdump_on_pc1,12,0.00,0.00,1,0,0,1
1010000000,fusion,10,0.00,0.00,1,0,0,1
1010000000,hog,11,0.01,0.00,1,0,0,1
1020000000,hog,11,0.02,0.00,1,0,0,1
1020000000,fusion,10,0.00,0.00,1,0,0,1
1030000000,hog,11,0.02,0.00,1,0,0,1
1030000000,fusion,10,x,0.00,1,0,0,1
1040000000,hog,11,0.01,0.00,1,0,0,1
";

    fn load() -> CpuLoad {
        let mut l = CpuLoad::new(16, 1000);
        l.add_csv("load.csv", CSV, &|p| Some(host_in_name(p).unwrap_or("pc2").to_string())).unwrap();
        l
    }

    #[test]
    fn the_busiest_other_process_over_a_span() {
        let l = load();
        assert_eq!(l.lines, 10);
        assert_eq!(l.bad_lines, 2, "a CPU time not a number, and one going back");
        assert_eq!(l.first_problem.as_deref(), Some("load.csv: line 10: cpu_user_s \"x\" is not a number"));
        assert_eq!(l.hosts().iter().map(|h| &**h).collect::<Vec<_>>(), ["pc1", "pc2"]);
        // hog ran the whole 20 ms between its readings at 1.00 s and 1.02 s
        let u = l.busiest("pc2", &["/fusion"], 1_002_000_000, 1_015_000_000, 10_000_000).unwrap();
        assert_eq!((u.process.as_str(), u.cpu_ns, u.span_ns), ("hog", 20_000_000, 20_000_000));
        assert!((u.cores() - 1.0).abs() < 1e-9);
        // readings too far from the span say nothing
        assert_eq!(l.busiest("pc2", &["fusion"], 1_002_000_000, 1_015_000_000, 1_000_000), None);
        // the receiving node itself is not its own competitor
        assert_eq!(l.busiest("pc2", &["hog", "fusion"], 1_002_000_000, 1_015_000_000, 10_000_000), None);
        assert_eq!(l.busiest("pc1", &[], 1_002_000_000, 1_015_000_000, 10_000_000), None, "no reading after the span");
        assert_eq!(l.interval_ns(), Some(10_000_000));
    }

    #[test]
    fn scheduler_nanoseconds_win_over_ticks() {
        let csv = "t_ns,process,pid,cpu_user_s,cpu_system_s,cpu_run_ns\n0,hog,1,0.00,0.00,100\n4000000,hog,1,0.00,0.00,3000100\n8000000,hog,1,0.01,0.00,\n";
        let mut l = CpuLoad::new(4, 100);
        l.add_csv("l.csv", csv, &|_| Some("h".into())).unwrap();
        // ns where given (3 ms in 4 ms), ticks where the column is empty (10 ms - 3 ms in the next 4 ms)
        let u = l.busiest("h", &[], 1, 3_999_999, 1_000).unwrap();
        assert_eq!((u.cpu_ns, u.span_ns), (3_000_000, 4_000_000));
        let u = l.busiest("h", &[], 4_000_001, 7_999_999, 1_000).unwrap();
        assert_eq!(u.cpu_ns, 10_000_000 - 3_000_100);
    }

    #[test]
    fn bounded_and_errors_name_the_file() {
        let mut l = CpuLoad::new(1, 2);
        l.add_csv("a.csv", CSV, &|_| Some("h".into())).unwrap();
        assert_eq!(l.procs.len(), 1);
        assert!(l.not_kept > 0);
        let e = CpuLoad::new(1, 1).add_csv("b.csv", "time,process\n", &|_| None).unwrap_err();
        assert!(e.starts_with("b.csv: line 1: no column \"t_ns\""), "{e}");
        assert!(same_process("/perception/fusion", "fusion_on_pc2"));
        assert!(!same_process("fusion", "fusion2"));
    }
}
