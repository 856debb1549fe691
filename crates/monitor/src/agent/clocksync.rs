//! What the host's time daemons say about its clock, followed by the agent
//! (docs/latency.md "Clocks", docs/online.md): chrony (`chronyc -c tracking`)
//! and linuxptp (`pmc`), read by [`ddscope_sysstat::clocksync`].
//!
//! The agent restricts its own system calls (no `execve`) and drops its
//! privileges once it runs, and the daemons' sockets are root's: the clients
//! are run by a child started before that — `ddscope clock-probe`, this very
//! binary, which asks the daemons every `--every` and prints one JSON line
//! each time — and its lines are read here on a thread. The child dies with
//! the agent (`PR_SET_PDEATHSIG`) and when its output is no longer read.

use ddscope_sysstat::clocksync::ClockSync;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// One reading of the daemons: `ddscope clock-probe`'s output line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClockReading {
    /// CLOCK_REALTIME of the reading (ns).
    pub t_ns: i64,
    /// The daemons that answered.
    pub sources: Vec<ClockSync>,
    /// One line per daemon that did not answer.
    pub errors: Vec<String>,
}

impl ClockReading {
    /// The tightest bound a synchronised daemon claims for this host's clock (ns), if any.
    pub fn claim(&self) -> Option<&ClockSync> {
        self.sources.iter().filter(|s| s.synchronised && s.bound_ns.is_some()).min_by_key(|s| s.bound_ns)
    }
}

/// Where the daemons listen (default: chronyc's and linuxptp's own defaults).
#[derive(Debug, Clone)]
pub struct ClockProbeConfig {
    pub every: Duration,
    pub chronyc_socket: Option<PathBuf>,
    pub ptp_uds: Option<PathBuf>,
    pub ptp_domain: Option<u8>,
}

/// The probe child and the latest reading it printed.
pub struct ClockSyncFollower {
    child: Child,
    latest: Arc<Mutex<Option<ClockReading>>>,
    reader: Option<JoinHandle<()>>,
}

/// A probe line of at most this many bytes is read (a reading is a few hundred).
const MAX_LINE: u64 = 64 * 1024;

impl ClockSyncFollower {
    /// Starts `exe clock-probe …` (call it before privileges are dropped and system calls restricted).
    pub fn start(exe: &std::path::Path, cfg: &ClockProbeConfig) -> std::io::Result<ClockSyncFollower> {
        let mut cmd = Command::new(exe);
        cmd.arg("clock-probe").arg("--every").arg(format!("{}ms", cfg.every.as_millis().max(1)));
        if let Some(s) = &cfg.chronyc_socket {
            cmd.arg("--chronyc-socket").arg(s);
        }
        if let Some(s) = &cfg.ptp_uds {
            cmd.arg("--ptp-uds").arg(s);
        }
        if let Some(d) = cfg.ptp_domain {
            cmd.arg("--ptp-domain").arg(d.to_string());
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null());
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0);
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        let out = child.stdout.take().ok_or_else(|| std::io::Error::other("clock-probe: no stdout"))?;
        let latest: Arc<Mutex<Option<ClockReading>>> = Arc::new(Mutex::new(None));
        let l = latest.clone();
        let reader = std::thread::Builder::new().name("clock-sync".into()).spawn(move || {
            let mut r = BufReader::new(out);
            loop {
                let mut line = String::new();
                match (&mut r).take(MAX_LINE).read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if let Ok(v) = serde_json::from_str::<ClockReading>(line.trim()) {
                            *l.lock().unwrap_or_else(|p| p.into_inner()) = Some(v);
                        }
                    }
                }
            }
        })?;
        Ok(ClockSyncFollower { child, latest, reader: Some(reader) })
    }

    /// The latest reading, if the probe has printed one.
    pub fn latest(&self) -> Option<ClockReading> {
        self.latest.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The reading as Prometheus families (`ddscope_host_clock_*{source}`): what the host's time daemons
/// say, beside what the traffic says (serve's `ddscope_clock_estimate_offset_seconds`).
pub fn families(r: &ClockReading) -> Vec<ddscope_sysstat::promtext::Family> {
    use ddscope_sysstat::promtext::{Family, Kind, Sample};
    let l = |s: &ClockSync| vec![("source".to_string(), s.source.clone()), ("reference".to_string(), s.reference.clone())];
    let fam = |name: &str, help: &str, f: &dyn Fn(&ClockSync) -> Option<f64>| Family {
        name: name.into(),
        help: help.into(),
        kind: Kind::Gauge,
        samples: r.sources.iter().filter_map(|s| Some(Sample::new(name, l(s), f(s)?))).collect(),
    };
    vec![
        fam("ddscope_host_clock_synchronised", "1 when the host's time daemon (chrony, ptp4l) says its clock is synchronised to its reference.", &|s| Some(s.synchronised as u8 as f64)),
        fam("ddscope_host_clock_offset_seconds", "The time daemon's latest offset of this host from its reference (host minus reference).", &|s| s.offset_ns.map(|o| o as f64 / 1e9)),
        fam("ddscope_host_clock_bound_seconds", "How far the host may be from true time by the daemon's own account (chrony: |offset| + root dispersion + root delay/2; ptp4l: |master offset| + mean path delay).", &|s| s.bound_ns.map(|o| o as f64 / 1e9)),
    ]
}

impl Drop for ClockSyncFollower {
    /// Never waits: the child runs as root while the agent has dropped its privileges (a kill is
    /// refused), and it sleeps between readings. It ends on its own — at its next line, whose pipe
    /// is closed here, or with the agent (`PR_SET_PDEATHSIG`) — and the reader thread with the process.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.try_wait();
        drop(self.child.stdout.take());
        drop(self.reader.take());
    }
}

/// `ddscope clock-probe`: asks the daemons every `every` and prints one JSON line per reading,
/// until its output is closed.
pub fn probe_loop(cfg: &ClockProbeConfig) -> i32 {
    use std::io::Write;
    let probe = ddscope_sysstat::clocksync::Probe {
        chronyc_socket: cfg.chronyc_socket.clone(),
        ptp_uds: cfg.ptp_uds.clone(),
        ptp_domain: cfg.ptp_domain,
        timeout: Duration::from_secs(2),
    };
    let stdout = std::io::stdout();
    loop {
        let mut r = ClockReading { t_ns: now_ns(), ..Default::default() };
        for x in probe.read() {
            match x {
                Ok(s) => r.sources.push(s),
                Err(e) => r.errors.push(e),
            }
        }
        let line = serde_json::to_string(&r).unwrap_or_default();
        let mut out = stdout.lock();
        if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
            return 0;
        }
        drop(out);
        std::thread::sleep(cfg.every);
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}
