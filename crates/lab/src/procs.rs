//! Child processes of a lab run (workload nodes, tcpdump, iperf3) and the
//! signals that end a run early.
//!
//! Every child runs inside a host namespace (`ip netns exec`, which execs
//! the program, so the pid is the program's), in its own process group so a
//! Ctrl-C on the terminal reaches only `ddscope`, which then stops the run in
//! order, and with a parent-death signal so nothing survives a `ddscope`
//! that is killed outright. [`Procs`] terminates whatever is still running
//! when it is dropped.

use anyhow::{bail, Context, Result};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

/// Runs a one-shot command (`ip`, `tc`) to its end: its standard output,
/// or an error with its standard error when it fails.
pub fn run_cmd(args: &[&str]) -> Result<String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", args[0]))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!("`{}` failed: {}", args.join(" "), err.trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Routes SIGINT, SIGTERM and SIGHUP to a flag that the run loop polls.
pub fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The signal that interrupted the run, if any.
pub fn interrupted() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// A `Command` that runs `prog args…` inside network namespace `ns`.
pub fn in_netns(ns: &str, prog: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, prog]);
    c.process_group(0);
    unsafe {
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
            Ok(())
        });
    }
    c
}

/// Makes `cmd`'s process (and every thread it starts) run on `cpus` only
/// (none: anywhere) and, with `realtime`, under `SCHED_FIFO` at that
/// priority; set in the child before it execs, so the wrappers (`ip netns
/// exec`, `nsenter`) pass both on to the program. A refusal fails the spawn
/// with the kernel's error.
pub fn schedule(cmd: &mut Command, cpus: &[usize], realtime: Option<u8>) {
    if cpus.is_empty() && realtime.is_none() {
        return;
    }
    let cpus = cpus.to_vec();
    unsafe {
        cmd.pre_exec(move || {
            if !cpus.is_empty() {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                for c in &cpus {
                    libc::CPU_SET(*c, &mut set);
                }
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(p) = realtime {
                let param = libc::sched_param { sched_priority: p as libc::c_int };
                if libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// A `Command` that runs `prog args…` in the network, mount and UTS
/// namespaces of process `pid` (`nsenter`, which execs the program: the pid
/// is the program's). A traced host's processes join its session daemon's
/// namespaces this way, where the host's private `/var/run/lttng` lives.
pub fn in_ns_of(pid: i32, prog: &str) -> Command {
    let mut c = Command::new("nsenter");
    c.args(["--target", &pid.to_string(), "--mount", "--net", "--uts", "--no-fork"]);
    // entering a mount namespace resets the working directory to its root
    if let Ok(cwd) = std::env::current_dir() {
        c.arg(format!("--wd={}", cwd.display()));
    }
    c.args(["--", prog]);
    c.process_group(0);
    unsafe {
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
            Ok(())
        });
    }
    c
}

pub struct Proc {
    pub name: String,
    pub child: Child,
    pub status: Option<ExitStatus>,
    /// User + system CPU seconds of the process, known once it has exited.
    pub cpu_s: Option<f64>,
}

impl Proc {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
    /// Exit status if it has exited (polls). Reaps with wait4 to learn the CPU time.
    pub fn poll(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.reap(libc::WNOHANG);
        }
        self.status
    }
    fn reap(&mut self, flags: i32) {
        let mut status = 0;
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(self.pid(), &mut status, flags, &mut ru) };
        if r == self.pid() {
            use std::os::unix::process::ExitStatusExt;
            self.status = Some(ExitStatus::from_raw(status));
            let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
            self.cpu_s = Some(t(ru.ru_utime) + t(ru.ru_stime));
        } else if r < 0 {
            // not our child any more (cannot happen unless reaped elsewhere): treat as gone
            use std::os::unix::process::ExitStatusExt;
            self.status = Some(ExitStatus::from_raw(0));
        }
    }
    pub fn signal(&self, sig: i32) {
        if self.status.is_none() {
            unsafe { libc::kill(self.pid(), sig) };
        }
    }
    /// Waits up to `timeout`; then SIGKILL. Returns the exit status.
    pub fn wait_timeout(&mut self, timeout: Duration) -> ExitStatus {
        let end = Instant::now() + timeout;
        loop {
            if let Some(s) = self.poll() {
                return s;
            }
            if Instant::now() >= end {
                self.signal(libc::SIGKILL);
                self.reap(0);
                return self.status.expect("a killed child is reaped");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Every process a run started; whatever still runs is terminated on drop.
#[derive(Default)]
pub struct Procs {
    pub list: Vec<Proc>,
}

impl Procs {
    pub fn spawn(&mut self, name: &str, mut cmd: Command) -> Result<usize> {
        let child = cmd.spawn().with_context(|| format!("cannot start {name}"))?;
        self.list.push(Proc { name: name.to_string(), child, status: None, cpu_s: None });
        Ok(self.list.len() - 1)
    }

    pub fn get(&mut self, i: usize) -> &mut Proc {
        &mut self.list[i]
    }

    /// SIGTERM to every running process, then SIGKILL after `grace`.
    pub fn terminate_all(&mut self, grace: Duration) {
        for p in &mut self.list {
            if p.poll().is_none() {
                p.signal(libc::SIGTERM);
            }
        }
        let end = Instant::now() + grace;
        for p in &mut self.list {
            let left = end.saturating_duration_since(Instant::now());
            p.wait_timeout(left);
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        self.terminate_all(Duration::from_secs(3));
    }
}

/// Every workload process sampled every `interval` from `/proc` (CPU user and
/// system, RSS, context switches; see `ddscope_sysstat::procload`), one CSV line
/// per process and round into the run directory:
/// `t_ns,process,pid,cpu_user_s,cpu_system_s,rss_bytes,ctx_voluntary,ctx_involuntary,threads,cpu_run_ns`
/// (counters are cumulative since the process started; `cpu_user_s` and
/// `cpu_system_s` come in 10 ms ticks, `cpu_run_ns` is the scheduler's own
/// account of the threads' time on a CPU in ns, empty where the kernel keeps
/// no schedstats). At most `max`
/// processes; more are counted in [`LoadStats::not_sampled`].
pub struct LoadSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<LoadStats>>,
}

/// What a [`LoadSampler`] did.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct LoadStats {
    pub file: String,
    pub interval_ms: u64,
    pub processes: u64,
    /// Processes beyond the cap, not sampled.
    pub not_sampled: u64,
    pub rounds: u64,
    pub lines: u64,
    /// Readings that failed (a process that had exited, an unreadable /proc file).
    pub read_errors: u64,
    /// Rounds that started more than one interval late (a busy machine).
    pub late_rounds: u64,
    /// The first write error, if writing the file failed (sampling then stops).
    pub write_error: Option<String>,
}

pub const LOAD_CSV_HEADER: &str = "t_ns,process,pid,cpu_user_s,cpu_system_s,rss_bytes,ctx_voluntary,ctx_involuntary,threads,cpu_run_ns";
/// The header of load.csv files written before `cpu_run_ns` was added.
pub const LOAD_CSV_HEADER_V1: &str = "t_ns,process,pid,cpu_user_s,cpu_system_s,rss_bytes,ctx_voluntary,ctx_involuntary,threads";

impl LoadSampler {
    pub fn start(path: &std::path::Path, procs: Vec<(String, i32)>, interval: Duration, max: usize) -> Result<LoadSampler> {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?);
        writeln!(f, "{LOAD_CSV_HEADER}").with_context(|| format!("cannot write {}", path.display()))?;
        let not_sampled = procs.len().saturating_sub(max) as u64;
        let procs: Vec<(String, i32)> = procs.into_iter().take(max).collect();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let st = stop.clone();
        let file = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        let thread = std::thread::Builder::new().name("lab-load".into()).spawn(move || {
            let mut s = LoadStats { file, interval_ms: interval.as_millis() as u64, processes: procs.len() as u64, not_sampled, ..Default::default() };
            let root = std::path::Path::new("/proc");
            let mut gone = vec![false; procs.len()];
            let mut ctx = vec![ddscope_sysstat::procload::CtxCounter::default(); procs.len()];
            let mut run = vec![ddscope_sysstat::procload::RunCounter::default(); procs.len()];
            let mut next = Instant::now();
            loop {
                s.rounds += 1;
                for (k, (name, pid)) in procs.iter().enumerate() {
                    if gone[k] {
                        continue;
                    }
                    // Each process stamped as it is read: a round over 66 processes on a busy
                    // machine took long enough that a round-start stamp ran 20 ms of a node's CPU
                    // ahead of its reading (a CI failure of test_load_series_every_200ms_and_matches_proc).
                    let t_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0);
                    match ddscope_sysstat::procload::read_process(root, *pid) {
                        Ok(p) => {
                            let (vol, invol) = ctx[k].update(&p);
                            let run_ns = run[k].update(&p).map_or(String::new(), |n| n.to_string());
                            let line = format!("{t_ns},{name},{pid},{:.2},{:.2},{},{vol},{invol},{},{run_ns}", p.cpu_user_s, p.cpu_system_s, p.rss_bytes, p.threads);
                            if let Err(e) = writeln!(f, "{line}") {
                                s.write_error.get_or_insert(e.to_string());
                            } else {
                                s.lines += 1;
                            }
                        }
                        Err(_) => {
                            // exited (or a zombie not yet reaped): stop sampling it
                            s.read_errors += 1;
                            gone[k] = true;
                        }
                    }
                }
                if s.write_error.is_some() || st.load(Ordering::SeqCst) {
                    break;
                }
                next += interval;
                let now = Instant::now();
                if now > next + interval {
                    s.late_rounds += 1;
                    next = now;
                }
                while !st.load(Ordering::SeqCst) && Instant::now() < next {
                    std::thread::sleep((next - Instant::now()).min(Duration::from_millis(20)));
                }
                if st.load(Ordering::SeqCst) {
                    break;
                }
            }
            if let Err(e) = f.flush() {
                s.write_error.get_or_insert(e.to_string());
            }
            s
        })?;
        Ok(LoadSampler { stop, thread: Some(thread) })
    }

    /// Stops sampling (after the round in progress) and returns what was done.
    pub fn finish(mut self) -> LoadStats {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

impl Drop for LoadSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
