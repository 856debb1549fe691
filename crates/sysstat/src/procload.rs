//! Load of single processes from `/proc` (Betz et al. samples it every 200 ms):
//! CPU time (user, system), resident memory and context switches
//! (voluntary, involuntary) of a process and all its threads.
//!
//! Used by the lab (every workload process of a run, a time series in the run
//! directory) and by `agent --process NAME` (Prometheus families with a
//! `process` label). Sources and their limits:
//! - CPU: `/proc/PID/stat` fields 14 and 15 (utime, stime in USER_HZ ticks),
//!   which include the threads that have already exited;
//! - RSS: `VmRSS` of `/proc/PID/status`;
//! - context switches: the sum of `voluntary_ctxt_switches` and
//!   `nonvoluntary_ctxt_switches` over `/proc/PID/task/*/status` (the
//!   process's own status only counts its main thread); switches of threads
//!   that have exited are not in `/proc` and are missed.

use crate::promtext::{Family, Kind, Sample};
use crate::error::SystemError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// USER_HZ of `/proc/PID/stat` (fixed at 100 on Linux, as in [`crate::system`]).
const USER_HZ: f64 = 100.0;

/// Most processes sampled per round; more matches are counted, not sampled.
pub const DEFAULT_MAX_PROCESSES: usize = 64;

/// One reading of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcLoad {
    pub pid: i32,
    /// `comm` of the process (`/proc/PID/stat`, at most 15 characters).
    pub comm: String,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    pub rss_bytes: u64,
    pub ctx_voluntary: u64,
    pub ctx_involuntary: u64,
    pub threads: u64,
    /// (tid, voluntary, involuntary) of every live thread.
    pub tasks: Vec<(i32, u64, u64)>,
    /// (tid, ns on a CPU by the scheduler's account, `/proc/PID/task/TID/schedstat`) of every live
    /// thread whose schedstat could be read (kernels without schedstats have none).
    pub task_run_ns: Vec<(i32, u64)>,
}

/// A process's time on a CPU in ns (the scheduler's account, not ticks) made
/// cumulative across thread exits, as [`CtxCounter`] does for switches: a
/// thread's last reading is kept when it disappears.
#[derive(Debug, Default, Clone)]
pub struct RunCounter {
    last: BTreeMap<i32, u64>,
    exited: u64,
}

impl RunCounter {
    /// ns on a CPU so far, never decreasing; `None` when no thread's schedstat was read.
    pub fn update(&mut self, p: &ProcLoad) -> Option<u64> {
        if p.task_run_ns.is_empty() {
            return None;
        }
        let now: BTreeMap<i32, u64> = p.task_run_ns.iter().copied().collect();
        for (tid, v) in &self.last {
            if !now.contains_key(tid) {
                self.exited += v;
            }
        }
        self.last = now;
        Some(self.exited + self.last.values().sum::<u64>())
    }
}

/// Context switches of one process made cumulative across thread exits: a
/// thread's last reading is kept when it disappears (switches it made between
/// that reading and its exit are still missed).
#[derive(Debug, Default, Clone)]
pub struct CtxCounter {
    last: BTreeMap<i32, (u64, u64)>,
    exited: (u64, u64),
}

impl CtxCounter {
    /// (voluntary, involuntary) so far, never decreasing.
    pub fn update(&mut self, p: &ProcLoad) -> (u64, u64) {
        if p.tasks.is_empty() {
            return (p.ctx_voluntary.max(self.exited.0), p.ctx_involuntary.max(self.exited.1));
        }
        let now: BTreeMap<i32, (u64, u64)> = p.tasks.iter().map(|t| (t.0, (t.1, t.2))).collect();
        for (tid, v) in &self.last {
            if !now.contains_key(tid) {
                self.exited.0 += v.0;
                self.exited.1 += v.1;
            }
        }
        self.last = now;
        let (v, i) = self.last.values().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        (self.exited.0 + v, self.exited.1 + i)
    }
}

fn read(path: PathBuf) -> Result<String, SystemError> {
    std::fs::read_to_string(&path).map_err(|error| SystemError::Read { path, error })
}

fn format_err(path: &Path, detail: String) -> SystemError {
    SystemError::Format { path: path.to_path_buf(), detail }
}

/// Parses `/proc/PID/stat`: (comm, utime ticks, stime ticks, threads).
pub fn parse_stat(text: &str, path: &Path) -> Result<(String, u64, u64, u64), SystemError> {
    let open = text.find('(').ok_or_else(|| format_err(path, "no '(' in stat".into()))?;
    let close = text.rfind(')').ok_or_else(|| format_err(path, "no ')' in stat".into()))?;
    if close < open {
        return Err(format_err(path, "')' before '(' in stat".into()));
    }
    let comm = text[open + 1..close].to_string();
    let f: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // f[0] is field 3 (state): field n is f[n - 3]
    let num = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok()).ok_or_else(|| format_err(path, format!("stat field {n}")));
    Ok((comm, num(14)?, num(15)?, num(20)?))
}

fn status_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| l.strip_prefix(key)).and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse::<u64>().ok())
}

/// Reads one process under `proc_root` (normally `/proc`).
pub fn read_process(proc_root: &Path, pid: i32) -> Result<ProcLoad, SystemError> {
    let dir = proc_root.join(pid.to_string());
    let p = dir.join("stat");
    let (comm, ut, st, threads) = parse_stat(&read(p.clone())?, &p)?;
    let p = dir.join("status");
    let status = read(p.clone())?;
    // kernel threads have no VmRSS: 0
    let rss_kb = status_value(&status, "VmRSS:").unwrap_or(0);
    let (mut vol, mut invol) = (0u64, 0u64);
    let mut tasks = 0;
    let mut per_task = vec![];
    let mut task_run_ns = vec![];
    if let Ok(rd) = std::fs::read_dir(dir.join("task")) {
        for e in rd.flatten() {
            // a thread that ends between the listing and the read is skipped
            if let Ok(t) = std::fs::read_to_string(e.path().join("status")) {
                let (v, i) = (status_value(&t, "voluntary_ctxt_switches:").unwrap_or(0), status_value(&t, "nonvoluntary_ctxt_switches:").unwrap_or(0));
                vol += v;
                invol += i;
                tasks += 1;
                if let Some(tid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) {
                    per_task.push((tid, v, i));
                    let run = std::fs::read_to_string(e.path().join("schedstat")).ok();
                    if let Some(ns) = run.as_deref().and_then(|r| r.split_whitespace().next()).and_then(|v| v.parse::<u64>().ok()) {
                        task_run_ns.push((tid, ns));
                    }
                }
            }
        }
    }
    if tasks == 0 {
        vol = status_value(&status, "voluntary_ctxt_switches:").unwrap_or(0);
        invol = status_value(&status, "nonvoluntary_ctxt_switches:").unwrap_or(0);
    }
    Ok(ProcLoad {
        pid,
        comm,
        cpu_user_s: ut as f64 / USER_HZ,
        cpu_system_s: st as f64 / USER_HZ,
        rss_bytes: rss_kb * 1024,
        ctx_voluntary: vol,
        ctx_involuntary: invol,
        threads,
        tasks: per_task,
        task_run_ns,
    })
}

/// Whether process `pid` is called `name`: its `comm`, or the file name of its `argv[0]`
/// (`comm` is cut at 15 characters).
fn matches(proc_root: &Path, pid: &str, name: &str) -> bool {
    let dir = proc_root.join(pid);
    if let Ok(c) = std::fs::read_to_string(dir.join("comm")) {
        if c.trim_end_matches('\n') == name {
            return true;
        }
    }
    if let Ok(cmd) = std::fs::read(dir.join("cmdline")) {
        let argv0 = cmd.split(|b| *b == 0).next().unwrap_or(&[]);
        let base = argv0.rsplit(|b| *b == b'/').next().unwrap_or(&[]);
        return !base.is_empty() && base == name.as_bytes();
    }
    false
}

/// Processes matching the names, lowest pid first, at most `max` in all.
#[derive(Debug, Clone, Default)]
pub struct Matched {
    /// (name asked for, pid)
    pub pids: Vec<(String, i32)>,
    /// Per name: processes that matched (sampled or not).
    pub matched: BTreeMap<String, u64>,
    /// Processes that matched beyond `max` and are not sampled.
    pub not_sampled: u64,
}

pub fn find_processes(proc_root: &Path, names: &[String], max: usize) -> Matched {
    let mut out = Matched::default();
    for n in names {
        out.matched.insert(n.clone(), 0);
    }
    let mut pids: Vec<i32> = match std::fs::read_dir(proc_root) {
        Ok(rd) => rd.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok())).collect(),
        Err(_) => return out,
    };
    pids.sort_unstable();
    for pid in pids {
        let ps = pid.to_string();
        for n in names {
            if matches(proc_root, &ps, n) {
                *out.matched.entry(n.clone()).or_default() += 1;
                if out.pids.len() < max {
                    out.pids.push((n.clone(), pid));
                } else {
                    out.not_sampled += 1;
                }
                break;
            }
        }
    }
    out
}

/// Prometheus families of the processes called `names` (see the module doc):
/// `ddscope_process_cpu_seconds_total{process,pid,mode}`,
/// `ddscope_process_resident_memory_bytes{process,pid}`,
/// `ddscope_process_context_switches_total{process,pid,kind}`,
/// `ddscope_process_matched{process}` and `ddscope_processes_not_sampled`.
pub fn process_families(proc_root: &Path, names: &[String], max: usize) -> Vec<Family> {
    let m = find_processes(proc_root, names, max);
    let mut cpu = Family {
        name: "ddscope_process_cpu_seconds_total".into(),
        help: "User and system CPU time of a monitored process (all its threads).".into(),
        kind: Kind::Counter,
        samples: vec![],
    };
    let mut rss = Family {
        name: "ddscope_process_resident_memory_bytes".into(),
        help: "Resident memory of a monitored process.".into(),
        kind: Kind::Gauge,
        samples: vec![],
    };
    let mut ctx = Family {
        name: "ddscope_process_context_switches_total".into(),
        help: "Context switches of a monitored process's live threads.".into(),
        kind: Kind::Counter,
        samples: vec![],
    };
    let mut matched = Family {
        name: "ddscope_process_matched".into(),
        help: "Processes that match a --process name (sampled or not).".into(),
        kind: Kind::Gauge,
        samples: vec![],
    };
    let l = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
    for (name, pid) in &m.pids {
        // a process that exits between listing and reading is not reported this round
        let Ok(p) = read_process(proc_root, *pid) else { continue };
        let ps = pid.to_string();
        cpu.samples.push(Sample::new(&cpu.name, l(&[("process", name), ("pid", &ps), ("mode", "user")]), p.cpu_user_s));
        cpu.samples.push(Sample::new(&cpu.name, l(&[("process", name), ("pid", &ps), ("mode", "system")]), p.cpu_system_s));
        rss.samples.push(Sample::new(&rss.name, l(&[("process", name), ("pid", &ps)]), p.rss_bytes as f64));
        ctx.samples.push(Sample::new(&ctx.name, l(&[("process", name), ("pid", &ps), ("kind", "voluntary")]), p.ctx_voluntary as f64));
        ctx.samples.push(Sample::new(&ctx.name, l(&[("process", name), ("pid", &ps), ("kind", "involuntary")]), p.ctx_involuntary as f64));
    }
    for (name, n) in &m.matched {
        matched.samples.push(Sample::new(&matched.name, l(&[("process", name)]), *n as f64));
    }
    let not_sampled = Family {
        name: "ddscope_processes_not_sampled".into(),
        help: "Processes that matched a --process name beyond the cap and were not sampled.".into(),
        kind: Kind::Gauge,
        samples: vec![Sample::new("ddscope_processes_not_sampled", vec![], m.not_sampled as f64)],
    };
    vec![cpu, rss, ctx, matched, not_sampled]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_and_parens_in_comm() {
        let s = "1234 (a b) c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 7 0 12345 1000 200 18446744073709551615";
        let (comm, ut, st, th) = parse_stat(s, Path::new("/proc/1234/stat")).unwrap();
        assert_eq!((comm.as_str(), ut, st, th), ("a b) c)", 250, 75, 7));
        let e = parse_stat("1 (x) S 1", Path::new("/proc/1/stat")).unwrap_err().to_string();
        assert!(e.contains("/proc/1/stat") && e.contains("field 14"), "{e}");
    }

    #[test]
    fn context_switches_survive_thread_exits() {
        let p = |tasks: Vec<(i32, u64, u64)>| ProcLoad {
            pid: 1,
            comm: "x".into(),
            cpu_user_s: 0.0,
            cpu_system_s: 0.0,
            rss_bytes: 0,
            ctx_voluntary: tasks.iter().map(|t| t.1).sum(),
            ctx_involuntary: tasks.iter().map(|t| t.2).sum(),
            threads: tasks.len() as u64,
            task_run_ns: tasks.iter().map(|t| (t.0, 1000 * t.1)).collect(),
            tasks,
        };
        let mut c = CtxCounter::default();
        let mut r = RunCounter::default();
        let a = p(vec![(1, 10, 1), (2, 100, 50)]);
        assert_eq!(c.update(&a), (110, 51));
        assert_eq!(r.update(&a), Some(110_000));
        // thread 2 exits, thread 3 starts: its 100 and 50 stay counted
        let b = p(vec![(1, 12, 1), (3, 5, 0)]);
        assert_eq!(c.update(&b), (117, 51));
        assert_eq!(r.update(&b), Some(117_000));
        assert_eq!(r.update(&ProcLoad { task_run_ns: vec![], ..b }), None);
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id() as i32;
        let before = read_process(Path::new("/proc"), me).unwrap();
        // Spin until this thread has run 300 ms on a CPU by the scheduler's own account
        // (/proc/thread-self/schedstat, ns; not the ticks read_process reads), however long
        // that takes on a busy machine: the process's CPU time grows by at least about that much.
        let ran_ns = || -> u64 {
            let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
            s.split_whitespace().next().and_then(|v| v.parse().ok()).expect("schedstat runtime")
        };
        let (start, deadline) = (ran_ns(), std::time::Instant::now() + std::time::Duration::from_secs(60));
        let mut x = 0u64;
        while ran_ns() - start < 300_000_000 {
            assert!(std::time::Instant::now() < deadline, "this thread did not get 300 ms of CPU in 60 s");
            for _ in 0..10_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
        }
        std::hint::black_box(x);
        let p = read_process(Path::new("/proc"), me).unwrap();
        let grew = (p.cpu_user_s + p.cpu_system_s) - (before.cpu_user_s + before.cpu_system_s);
        // 10 ms ticks; other test threads may add CPU time of their own
        assert!(grew >= 0.27, "{before:?} -> {p:?}");
        assert!(p.rss_bytes > 1 << 20 && p.threads >= 1 && p.ctx_voluntary + p.ctx_involuntary > 0, "{p:?}");
        let fams = process_families(Path::new("/proc"), &[p.comm.clone()], 10_000);
        let pid = me.to_string();
        assert!(fams[0].samples.iter().any(|s| s.labels.iter().any(|(k, v)| k == "pid" && v == &pid)), "{:?}", fams[0]);
        assert!(fams[3].samples[0].value >= 1.0);
        // the cap: one process at most, the rest counted
        let m = find_processes(Path::new("/proc"), &[p.comm.clone(), "ddscope-no-such-process".into()], 0);
        assert!(m.pids.is_empty() && m.not_sampled >= 1 && m.matched["ddscope-no-such-process"] == 0);
    }
}
