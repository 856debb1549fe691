//! Child processes of a lab run (workload nodes, tcpdump, iperf3) and the
//! signals that end a run early.
//!
//! Every child runs inside a host namespace (`ip netns exec`, which execs
//! the program, so the pid is the program's), in its own process group so a
//! Ctrl-C on the terminal reaches only `ddscope`, which then stops the run in
//! order, and with a parent-death signal so nothing survives a `ddscope`
//! that is killed outright. [`Procs`] terminates whatever is still running
//! when it is dropped.

use anyhow::{Context, Result};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
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
