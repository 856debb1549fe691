//! One LTTng session per traced host, recording what `ros2 trace` records
//! (userspace domain, `ros2:*`, contexts vpid / vtid / procname) into
//! `OUT/HOST.lttng/` (docs/lab.md, "Tracing").
//!
//! A userspace session records every registered process of its session
//! daemon, and on a machine every lttng-ust process registers with the root
//! session daemon at `/var/run/lttng`. So each traced host gets its own
//! `lttng-sessiond` in a mount namespace of its own (created by
//! `ip netns exec`, whose `/` is a slave of the root's, so nothing propagates
//! back) with a private tmpfs on `/var/run/lttng`; the host's processes join
//! that mount namespace and its network namespace (`nsenter`), so their
//! lttng-ust registers with the host's daemon only — and never with a root
//! session daemon that something else on the machine may run. A UTS namespace
//! names the host (`hostname` in the trace's environment). The clocks are
//! the machine's (no time namespace): LTTng's CLOCK_MONOTONIC, the captures'
//! and the ground truth's CLOCK_REALTIME are those of one kernel.
//!
//! With `live`, the session is an LTTng *live* session: a `lttng-relayd` of
//! the host (its network and mount namespaces, listening on the host's
//! loopback only, default ports) receives the streams and writes them under
//! `OUT/HOST.lttng/HOST/SESSION-DATE/`, and a reader on the host follows it
//! at `net://localhost/host/HOST/SESSION` (the lab's `{trace_live}`: what
//! `ddscope agent --trace-live` takes). Readers of the trace directory find
//! the trace below it either way.
//!
//! The channel is in discard mode (as `ros2 trace` records) with large
//! buffers, so tracing never stalls the workload; what it loses is counted
//! by the tracer (`lttng list` statistics, read after `lttng stop`) and in
//! the trace (packet headers), and reported.

use anyhow::{anyhow, bail, Context, Result};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::net::HostNet;
use crate::procs::{self, in_netns, in_ns_of, Procs};

/// The channel, events and contexts `ros2 trace` records.
pub const CHANNEL: &str = "ros2";
pub const EVENTS: &str = "ros2:*";
pub const CONTEXTS: [&str; 3] = ["vpid", "vtid", "procname"];
/// Sub-buffer size and count per CPU (per-uid buffers, discard mode): 8 MiB
/// per CPU holds ~100 k events while the consumer daemon writes them out.
pub const SUBBUF_SIZE: u64 = 1 << 20;
pub const NUM_SUBBUF: u64 = 8;

/// The relay daemon's ports of a live session, on the host's own loopback
/// (each host has its network namespace: the defaults never collide).
const RELAYD_CONTROL_PORT: u16 = 5342;
const RELAYD_DATA_PORT: u16 = 5343;
const RELAYD_LIVE_PORT: u16 = 5344;

/// Where a host's private `/var/run/lttng` is mounted (Debian: /var/run -> /run).
const RUNDIR: &str = "/var/run/lttng";

/// The session daemon and the recording session of one host.
#[derive(Debug)]
pub struct HostSession {
    pub host: String,
    /// Index of the session daemon in the run's [`Procs`].
    pub proc_idx: usize,
    pub pid: i32,
    /// `LTTNG_HOME` of the host's lttng commands and processes (keeps
    /// `.lttngrc` and per-user sockets out of root's home).
    pub home: PathBuf,
    pub session: String,
    /// The trace directory, `OUT/HOST.lttng`.
    pub output: PathBuf,
    pub log: PathBuf,
    /// CLOCK_REALTIME when `lttng start` returned.
    pub started_ns: i64,
    /// The host's relay daemon (index in the run's [`Procs`]) of a live session.
    pub relayd: Option<usize>,
}

/// What the tracer reported when the session stopped.
#[derive(Debug, Clone, Default)]
pub struct StopStats {
    /// `Discarded events` of the session's channels (discard mode: events that found the buffers full).
    pub lost_events: u64,
    /// `Lost packets` (overwrite mode; 0 here).
    pub lost_packets: u64,
    /// CLOCK_REALTIME when `lttng stop` returned (all buffers flushed to disk).
    pub stopped_ns: i64,
}

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// Runs `cmd` with a time limit; returns its stdout, or its stderr's last line as the error.
fn run_limited(mut cmd: Command, what: &str, limit: Duration) -> Result<String> {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().with_context(|| format!("cannot run {what}"))?;
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(out) => out.with_context(|| format!("{what} failed"))?,
        Err(_) => {
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = rx.recv_timeout(Duration::from_secs(2));
            bail!("{what} did not finish within {limit:?}");
        }
    };
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
        bail!("{what} failed ({}): {line}", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `lttng --version`, e.g. "lttng (LTTng Trace Control) 2.13.9 - Nordicité".
pub fn version() -> Option<String> {
    let out = Command::new("lttng").arg("--version").output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().next().map(|l| l.trim().to_string())
}

impl HostSession {
    /// Starts the host's session daemon and a recording session writing to
    /// `output`, active before this returns (start the host's processes after it).
    /// With `live`, a relay daemon of the host takes the streams and writes
    /// them to `output` (see the module's documentation).
    /// `env`: what the daemon runs with besides (a warped host's clock, crate::clockwarp: the
    /// session's clock offset is measured by the daemon).
    #[allow(clippy::too_many_arguments)]
    pub fn start(procs: &mut Procs, h: &HostNet, run_id: &str, output: &Path, home: &Path, log: &Path, live: bool, env: &[(&str, String)]) -> Result<HostSession> {
        fs::create_dir_all(home).with_context(|| format!("cannot create {}", home.display()))?;
        let logf = File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
        // its own UTS namespace too, named after the host: the trace's `hostname` is the host's
        let mut cmd = in_netns(&h.netns, "unshare");
        cmd.args(["--uts", "sh", "-c"])
            .arg(format!(
                "hostname {} && mkdir -p {RUNDIR} && mount -t tmpfs -o mode=0755 ddscope-lttng {RUNDIR} && exec lttng-sessiond --no-kernel",
                h.name
            ))
            .env("LTTNG_HOME", home)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(logf.try_clone()?)
            .stderr(logf);
        let proc_idx = procs.spawn(&format!("lttng-sessiond on {}", h.name), cmd)?;
        let pid = procs.get(proc_idx).pid();
        let mut s = HostSession {
            host: h.name.clone(),
            proc_idx,
            pid,
            home: home.to_path_buf(),
            session: format!("ddscope-{run_id}-{}", h.name),
            output: output.to_path_buf(),
            log: log.to_path_buf(),
            started_ns: 0,
            relayd: None,
        };
        s.wait_ready(procs)?;
        if live {
            s.start_relayd(procs)?;
        }
        let sess = format!("--session={}", s.session);
        let out_arg = format!("--output={}", output.display());
        let subbuf = format!("--subbuf-size={SUBBUF_SIZE}");
        let nsubbuf = format!("--num-subbuf={NUM_SUBBUF}");
        let chan = format!("--channel={CHANNEL}");
        if live {
            s.create_live()?;
        } else {
            s.lttng(&["create", &s.session, &out_arg])?;
        }
        s.lttng(&["enable-channel", "--userspace", &sess, &subbuf, &nsubbuf, CHANNEL])?;
        s.lttng(&["enable-event", "--userspace", &sess, &chan, EVENTS])?;
        let mut ctx: Vec<&str> = vec!["add-context", "--userspace", &sess, &chan];
        for c in CONTEXTS {
            ctx.extend(["-t", c]);
        }
        s.lttng(&ctx)?;
        s.lttng(&["start", &s.session])?;
        s.started_ns = now_ns();
        Ok(s)
    }

    /// `net://localhost/host/HOST/SESSION`: the live session as a reader on the host reaches it.
    pub fn live_url(&self) -> Option<String> {
        self.relayd.map(|_| format!("net://localhost:{RELAYD_LIVE_PORT}/host/{}/{}", self.host, self.session))
    }

    /// Starts the host's relay daemon (loopback only: nothing of it reaches
    /// the workload link), writing the session under `output`.
    fn start_relayd(&mut self, procs: &mut Procs) -> Result<()> {
        let log = self.log.with_file_name(format!("lttng-relayd-{}.log", self.host));
        let logf = File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
        let mut cmd = self.command("lttng-relayd");
        cmd.arg(format!("--control-port=tcp://127.0.0.1:{RELAYD_CONTROL_PORT}"))
            .arg(format!("--data-port=tcp://127.0.0.1:{RELAYD_DATA_PORT}"))
            .arg(format!("--live-port=tcp://127.0.0.1:{RELAYD_LIVE_PORT}"))
            .arg(format!("--output={}", self.output.display()))
            .stdin(Stdio::null())
            .stdout(logf.try_clone()?)
            .stderr(logf);
        self.relayd = Some(procs.spawn(&format!("lttng-relayd on {}", self.host), cmd)?);
        Ok(())
    }

    /// `lttng create SESSION --live`, retried while the relay daemon is not
    /// listening yet (it answers within a second of its start).
    fn create_live(&self) -> Result<()> {
        let url = format!("--set-url=net://127.0.0.1:{RELAYD_CONTROL_PORT}:{RELAYD_DATA_PORT}");
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            match self.lttng(&["create", &self.session, "--live", &url]) {
                Ok(_) => return Ok(()),
                Err(_) if Instant::now() < end => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => return Err(e.context(format!("the relay daemon on {} (see {})", self.host, self.log.with_file_name(format!("lttng-relayd-{}.log", self.host)).display()))),
            }
        }
    }

    /// Waits until the daemon answers on the host's private socket: its pid
    /// file there (seen through /proc/PID/root, i.e. in its mount namespace)
    /// names it, and `lttng list` succeeds.
    fn wait_ready(&self, procs: &mut Procs) -> Result<()> {
        // /proc/PID/root does not follow absolute symlinks (/var/run -> /run) in the process's
        // view: resolve them here (the host shares this file system apart from its mounts)
        let rundir = Path::new(RUNDIR)
            .parent()
            .and_then(|p| fs::canonicalize(p).ok())
            .map(|p| p.join("lttng"))
            .unwrap_or_else(|| PathBuf::from(RUNDIR));
        let pidfile = PathBuf::from(format!("/proc/{}/root{}/lttng-sessiond.pid", self.pid, rundir.display()));
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let ours = fs::read_to_string(&pidfile).map(|s| s.trim() == self.pid.to_string()).unwrap_or(false);
            if ours && self.lttng(&["list"]).is_ok() {
                return Ok(());
            }
            if let Some(st) = procs.get(self.proc_idx).poll() {
                let log = fs::read_to_string(&self.log).unwrap_or_default();
                bail!("lttng-sessiond on {} exited ({st}): {}", self.host, log.lines().last().unwrap_or("").trim());
            }
            if let Some(sig) = procs::interrupted() {
                bail!("interrupted by {}; everything the run started was removed", procs::signal_name(sig));
            }
            if Instant::now() > end {
                bail!("lttng-sessiond on {} did not answer within 10 s (see {})", self.host, self.log.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `lttng ARGS` against the host's session daemon.
    fn lttng(&self, args: &[&str]) -> Result<String> {
        let mut cmd = Command::new("nsenter");
        cmd.args(["--target", &self.pid.to_string(), "--mount", "--net", "--uts", "--no-fork", "--", "lttng"]).args(args).env("LTTNG_HOME", &self.home);
        let what = format!("lttng {} (host {})", args.first().copied().unwrap_or(""), self.host);
        run_limited(cmd, &what, Duration::from_secs(30))
    }

    /// A command run as a process of this host: its network namespace, the
    /// session daemon's mount namespace, the host's `LTTNG_HOME`.
    pub fn command(&self, prog: &str) -> Command {
        let mut c = in_ns_of(self.pid, prog);
        c.env("LTTNG_HOME", &self.home);
        c
    }

    /// Stops the session (flushing every buffer to `output`), reads the
    /// tracer's loss counters, destroys the session and ends the daemon.
    pub fn stop(&self, procs: &mut Procs) -> Result<StopStats> {
        let result = (|| -> Result<StopStats> {
            self.lttng(&["stop", &self.session])?;
            let stopped_ns = now_ns();
            let listing = self.lttng(&["list", &self.session])?;
            let (lost_events, lost_packets) = parse_statistics(&listing)
                .ok_or_else(|| anyhow!("lttng list {}: no channel statistics in its output", self.session))?;
            self.lttng(&["destroy", &self.session])?;
            Ok(StopStats { lost_events, lost_packets, stopped_ns })
        })();
        let p = procs.get(self.proc_idx);
        p.signal(libc::SIGTERM);
        p.wait_timeout(Duration::from_secs(10));
        // the relay daemon has written every stream once the session is destroyed
        if let Some(i) = self.relayd {
            let r = procs.get(i);
            r.signal(libc::SIGTERM);
            r.wait_timeout(Duration::from_secs(10));
        }
        result
    }
}

/// Sums `Discarded events: N` and `Lost packets: N` over the channels of an `lttng list SESSION` output.
pub fn parse_statistics(listing: &str) -> Option<(u64, u64)> {
    let mut found = false;
    let (mut events, mut packets) = (0u64, 0u64);
    for line in listing.lines() {
        let line = line.trim();
        if let Some(v) = line.strip_prefix("Discarded events:") {
            events += v.trim().parse::<u64>().ok()?;
            found = true;
        } else if let Some(v) = line.strip_prefix("Lost packets:") {
            packets += v.trim().parse::<u64>().ok()?;
            found = true;
        }
    }
    found.then_some((events, packets))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_of_lttng_list() {
        let listing = "Recording session s: [inactive]\n    Trace output: /tmp/x\n\n=== Domain: User space ===\n\nChannels:\n-------------\n- ros2: [enabled]\n\n    Statistics:\n      Discarded events: 12\n      Lost packets: 1\n";
        assert_eq!(parse_statistics(listing), Some((12, 1)));
        assert_eq!(parse_statistics("Recording session s: [inactive]\n"), None);
        assert_eq!(parse_statistics("      Discarded events: many\n"), None);
    }
}
