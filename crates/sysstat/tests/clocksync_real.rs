//! `clocksync::Probe` against REAL time daemons, never against text we wrote:
//! chronyd (chrony 4.3) and ptp4l (linuxptp 3.1) run in two network
//! namespaces joined by a veth pair, and the probe talks to them through
//! their command sockets, as it would on a host.
//!
//! Nothing here may move this machine's clock (namespaces share
//! CLOCK_REALTIME): every chronyd runs with `-x` (no clock control; its log
//! must say "Disabled control of system clock"), every ptp4l with
//! `free_running 1` (its slave port then stays UNCALIBRATED, which the test
//! checks). Every daemon is a child of the test, killed by its pid and
//! reaped when the test ends, failed or not, and checked gone; the
//! namespaces (which take the veth pair with them) and the temporary
//! directory are deleted too. Names carry the test's pid.
//!
//! Oracles: the daemons themselves. chrony: the client's reference must be
//! the server's address and its offset within 1 ms (both namespaces read the
//! same clock); a second client told that its source's offsets are 5 ms
//! larger (`offset 0.005`, chrony.conf(5)) must come out at −5 ms, which
//! checks the sign (host minus reference). ptp4l: the slave's reference must
//! be the clock identity the master reports for itself, its offset within
//! 1 ms; a slave configured with `delayAsymmetry 5000000` (ptp4l(8): it
//! takes Sync messages to travel 5 ms longer than they do, so it believes
//! it is 5 ms behind) must come out at −5 ms.
//!
//! Skipped, with the reason printed, when not run as root or when `ip`,
//! chrony or linuxptp is missing (scripts/setup.sh installs them).

use ddscope_sysstat::clocksync::{find_tool, ClockSync, Probe};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

/// The tools, or why the test is skipped.
fn tools(names: &[&str]) -> Result<Vec<PathBuf>, String> {
    if !is_root() {
        return Err("not root (network namespaces need it)".into());
    }
    names
        .iter()
        .map(|n| find_tool(n).ok_or_else(|| format!("{n} is not installed (scripts/setup.sh installs it)")))
        .collect()
}

/// Two namespaces `a` and `b` joined by a veth pair (10.233.N.1 in a,
/// 10.233.N.2 in b), a private directory, and the daemons started in them.
/// `Drop` kills the daemons (by pid), deletes the namespaces and the
/// directory, whatever state the set-up reached.
struct Lab {
    ns: [String; 2],
    veth: [String; 2],
    net: u8,
    dir: PathBuf,
    children: Vec<(String, Child)>,
    ip: PathBuf,
}

impl Lab {
    fn new(tag: &str, net: u8, ip: &Path) -> Lab {
        let pid = std::process::id();
        let dir = std::env::temp_dir().join(format!("ddscope-clocksync-{tag}-{pid}"));
        let lab = Lab {
            ns: [format!("ddscope-cs{tag}-{pid}-a"), format!("ddscope-cs{tag}-{pid}-b")],
            veth: [format!("dcs{tag}{pid}a"), format!("dcs{tag}{pid}b")],
            net,
            dir,
            children: Vec::new(),
            ip: ip.to_path_buf(),
        };
        lab.setup();
        lab
    }

    fn addr(&self, side: usize) -> String {
        format!("10.233.{}.{}", self.net, side + 1)
    }

    fn ip(&self, args: &[&str]) {
        let o = Command::new(&self.ip).args(args).output().expect("run ip");
        assert!(o.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&o.stderr).trim());
    }

    fn setup(&self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::create_dir_all(&self.dir).expect("create the temporary directory");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700)).expect("chmod 700");
        for ns in &self.ns {
            self.ip(&["netns", "add", ns]);
        }
        self.ip(&["link", "add", &self.veth[0], "type", "veth", "peer", "name", &self.veth[1]]);
        for side in 0..2 {
            let (ns, veth) = (&self.ns[side], &self.veth[side]);
            self.ip(&["link", "set", veth, "netns", ns]);
            self.ip(&["-n", ns, "addr", "add", &format!("{}/24", self.addr(side)), "dev", veth]);
            self.ip(&["-n", ns, "link", "set", veth, "up"]);
            self.ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn write(&self, name: &str, body: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, body).expect("write a daemon's configuration");
        p
    }

    /// Starts `args` in namespace `side` (`ip netns exec` execs it: the
    /// child's pid is the daemon's), its output in `NAME.log`.
    fn spawn(&mut self, name: &str, side: usize, args: &[&str]) {
        let log = File::create(self.path(&format!("{name}.log"))).expect("create a log");
        let child = Command::new(&self.ip)
            .args(["netns", "exec", &self.ns[side]])
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup the log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        self.children.push((name.to_string(), child));
    }

    /// Stops one daemon now (kill by pid, reap).
    fn stop(&mut self, name: &str) {
        if let Some(i) = self.children.iter().position(|(n, _)| n == name) {
            let (_, mut child) = self.children.remove(i);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(&format!("{name}.log"))).unwrap_or_default()
    }

    /// Fails the test with the daemon's log if it has exited.
    fn check_alive(&mut self, name: &str) {
        let exited = self.children.iter_mut().find(|(n, _)| n == name).map(|(_, c)| c.try_wait().ok().flatten());
        if let Some(Some(st)) = exited {
            panic!("{name} exited ({st}); its log:\n{}", self.log(name));
        }
    }

    fn pids(&self) -> Vec<u32> {
        self.children.iter().map(|(_, c)| c.id()).collect()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for ns in &self.ns {
            let _ = Command::new(&self.ip).args(["netns", "del", ns]).stderr(Stdio::null()).status();
        }
        // Still in the root namespace when the set-up stopped before moving it.
        let _ = Command::new(&self.ip).args(["link", "del", &self.veth[0]]).stderr(Stdio::null()).status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// No process with these pids is left (they were children of this test and
/// reaped, so a pid still there would be a daemon that survived).
fn assert_gone(pids: &[u32], what: &str) {
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(!stat.contains(what), "a {what} of the test (pid {pid}) survived it: {stat}");
    }
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t0.elapsed() < WAIT, "timed out after {WAIT:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The probe's answer from one tool (`chronyc` or `pmc`), which must be there.
fn answer(results: &[Result<ClockSync, String>], source: &str, tool: &str) -> Result<ClockSync, String> {
    results
        .iter()
        .find(|r| match r {
            Ok(c) => c.source == source,
            Err(e) => e.starts_with(&format!("{tool}:")),
        })
        .cloned()
        .unwrap_or_else(|| panic!("the probe gave no answer from {tool}: {results:?}"))
}

// ---------------------------------------------------------------- chrony

/// `chronyc -h SOCKET -c -n tracking`, split on commas (read here without
/// the module's parser: the test's own view of what chronyd says).
fn chronyc_tracking(chronyc: &Path, sock: &Path) -> Option<Vec<String>> {
    let o = Command::new(chronyc).args(["-c", "-n", "-h"]).arg(sock).arg("tracking").output().ok()?;
    let line = String::from_utf8_lossy(&o.stdout).lines().next()?.to_string();
    Some(line.split(',').map(str::to_string).collect())
}

#[test]
fn chrony_in_two_namespaces() {
    let [ip, chronyd, chronyc] = match tools(&["ip", "chronyd", "chronyc"]).map(|v| <[PathBuf; 3]>::try_from(v).unwrap()) {
        Ok(t) => t,
        Err(why) => {
            eprintln!("SKIP chrony_in_two_namespaces: {why}");
            return;
        }
    };
    let mut lab = Lab::new("c", 61, &ip);
    let server = lab.addr(0);
    let chronyd = chronyd.to_str().unwrap().to_string();
    let conf = |lab: &Lab, name: &str, lines: &str| {
        let sock = lab.path(&format!("{name}.sock"));
        let pid = lab.path(&format!("{name}.pid"));
        let body = format!("{lines}\ncmdport 0\nbindcmdaddress {}\npidfile {}\n", sock.display(), pid.display());
        (lab.write(&format!("{name}.conf"), &body), sock)
    };
    // The server: its own clock at stratum 8, serving anyone.
    let (a_conf, a_sock) = conf(&lab, "a", "local stratum 8\nallow");
    // Two clients polling it 64 times a second; the second believes the
    // server's time is 5 ms ahead of what it measures. `port 0`: no NTP
    // server socket, so both fit in one namespace.
    let (b_conf, b_sock) = conf(&lab, "b", &format!("server {server} iburst minpoll -6 maxpoll -6\nport 0"));
    let (o_conf, o_sock) = conf(&lab, "b5ms", &format!("server {server} iburst minpoll -6 maxpoll -6 offset 0.005\nport 0"));
    for (name, side, cfg) in [("a", 0, &a_conf), ("b", 1, &b_conf), ("b5ms", 1, &o_conf)] {
        // -x: never touch the system clock; -d: foreground, log to stderr;
        // -u root: no privilege drop (the sockets are in a root-only directory).
        lab.spawn(name, side, &[&chronyd, "-x", "-d", "-u", "root", "-f", cfg.to_str().unwrap()]);
    }

    for (name, sock) in [("b", &b_sock), ("b5ms", &o_sock)] {
        wait_for(&format!("chronyd {name} to synchronise to {server}"), || {
            lab.check_alive("a");
            lab.check_alive(name);
            let f = chronyc_tracking(&chronyc, sock)?;
            (f.len() == 14 && f[1] == server && f[13] == "Normal").then_some(())
        });
    }
    for name in ["a", "b", "b5ms"] {
        let log = lab.log(name);
        assert!(log.contains("Disabled control of system clock"), "chronyd {name} controls the clock? its log:\n{log}");
    }

    let probe = |sock: &Path| Probe {
        chronyc_socket: Some(sock.to_path_buf()),
        ptp_uds: Some(lab.path("no-ptp4l-here")),
        ptp_domain: None,
        timeout: Duration::from_secs(5),
    };

    // The client.
    let results = probe(&b_sock).read();
    assert_eq!(results.len(), 1, "only chrony answers (no ptp4l socket): {results:?}");
    let c = answer(&results, "chrony", "chronyc").expect("chrony answer");
    assert!(c.synchronised, "{c:?}");
    assert_eq!(c.reference, server, "{c:?}");
    let off = c.offset_ns.expect("an offset");
    assert!(off.abs() < 1_000_000, "offset {off} ns between two namespaces of one clock: {c:?}");
    let bound = c.bound_ns.expect("a bound");
    assert!(bound >= off.abs() && bound < 1_000_000, "{c:?}");
    eprintln!("client: {}", c.detail);
    assert!(c.detail.starts_with(&format!("chrony: stratum 9, synchronised to {server}")), "{}", c.detail);

    // The client told the server is 5 ms ahead: this host is 5 ms behind.
    let c5 = answer(&probe(&o_sock).read(), "chrony", "chronyc").expect("chrony answer");
    assert!(c5.synchronised, "{c5:?}");
    eprintln!("client with offset 0.005: {}", c5.detail);
    let off5 = c5.offset_ns.unwrap();
    assert!((-6_000_000..-4_000_000).contains(&off5), "offset {off5} ns, expected about -5 ms: {c5:?}");
    assert!(c5.bound_ns.unwrap() >= off5.abs(), "{c5:?}");

    // The server: synchronised to its local clock (reference ID 127.127.1.1).
    let a = answer(&probe(&a_sock).read(), "chrony", "chronyc").expect("chrony answer");
    eprintln!("server: {}", a.detail);
    assert!(a.synchronised && a.reference == "7F7F0101", "{a:?}");

    // A socket no chronyd listens on: a one-line error from chronyc.
    let e = answer(&probe(&lab.path("nobody.sock")).read(), "chrony", "chronyc").unwrap_err();
    eprintln!("no daemon: {e}");
    assert!(e.starts_with("chronyc: ") && !e.contains('\n'), "{e}");

    let pids = lab.pids();
    drop(lab);
    assert_gone(&pids, "chronyd");
}

// ---------------------------------------------------------------- ptp4l

/// The probe's ptp4l answer once it says synchronised (a few reads at most:
/// the test's own pmc reading already saw an offset, but ptp4l may measure
/// exactly 0 ns once, which the module reads as "not measured yet").
fn ptp_synchronised(probe: &Probe) -> ClockSync {
    let mut last = None;
    for _ in 0..10 {
        let c = answer(&probe.read(), "ptp4l", "pmc").expect("ptp4l answer");
        if c.synchronised {
            return c;
        }
        last = Some(c);
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("the probe never saw ptp4l synchronised: {last:?}");
}

/// `key value` pairs of a pmc answer (the test's own reading).
fn pmc_fields(pmc: &Path, uds: &Path) -> Vec<(String, String)> {
    let o = Command::new(pmc)
        .args(["-u", "-b", "0", "-s"])
        .arg(uds)
        .args(["GET TIME_STATUS_NP", "GET CURRENT_DATA_SET", "GET PORT_DATA_SET"])
        .output();
    let Ok(o) = o else { return Vec::new() };
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.starts_with("\t\t"))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_string(), w.collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

fn field<'a>(f: &'a [(String, String)], k: &str) -> Option<&'a str> {
    f.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str())
}

#[test]
fn ptp4l_in_two_namespaces() {
    let [ip, ptp4l, pmc] = match tools(&["ip", "ptp4l", "pmc"]).map(|v| <[PathBuf; 3]>::try_from(v).unwrap()) {
        Ok(t) => t,
        Err(why) => {
            eprintln!("SKIP ptp4l_in_two_namespaces: {why}");
            return;
        }
    };
    let mut lab = Lab::new("p", 62, &ip);
    let ptp4l = ptp4l.to_str().unwrap().to_string();
    // Fast announce, sync and delay requests so the slave settles in seconds.
    let common = "free_running 1\nlogAnnounceInterval -2\nlogSyncInterval -3\nlogMinDelayReqInterval -3";
    let a_uds = lab.path("ptp4l-a");
    let a_cfg = lab.write("a.cfg", &format!("[global]\npriority1 1\n{common}\nuds_address {}\n", a_uds.display()));
    let veth_a = lab.veth[0].clone();
    let veth_b = lab.veth[1].clone();
    // -S: software timestamping (veth supports it: ethtool_op_get_ts_info).
    lab.spawn("a", 0, &[&ptp4l, "-S", "-m", "-i", &veth_a, "-f", a_cfg.to_str().unwrap()]);

    // The master's own clock identity, as it reports it (it is its own grandmaster).
    let master_id = wait_for("ptp4l a to answer", || {
        lab.check_alive("a");
        field(&pmc_fields(&pmc, &a_uds), "gmIdentity").map(str::to_string)
    });

    let slave = |lab: &mut Lab, name: &str, extra: &str| -> PathBuf {
        let uds = lab.path(&format!("ptp4l-{name}"));
        let cfg = lab.write(
            &format!("{name}.cfg"),
            &format!("[global]\nslaveOnly 1\n{common}\nuds_address {}\n[{veth_b}]\n{extra}\n", uds.display()),
        );
        lab.spawn(name, 1, &[&ptp4l, "-S", "-m", "-f", cfg.to_str().unwrap()]);
        wait_for(&format!("ptp4l {name} to measure its offset from {master_id}"), || {
            lab.check_alive("a");
            lab.check_alive(name);
            let f = pmc_fields(&pmc, &uds);
            let ok = field(&f, "gmPresent") == Some("true")
                && field(&f, "gmIdentity") == Some(master_id.as_str())
                && field(&f, "stepsRemoved") == Some("1")
                && field(&f, "ingress_time").is_some_and(|t| t != "0")
                // Set only once a path delay is known, after the first Sync.
                && field(&f, "master_offset").is_some_and(|t| t != "0");
            ok.then_some(())
        });
        uds
    };
    let no_chronyd = lab.path("no-chronyd-here.sock");
    let probe = |uds: &Path, domain: Option<u8>| Probe {
        chronyc_socket: Some(no_chronyd.clone()),
        ptp_uds: Some(uds.to_path_buf()),
        ptp_domain: domain,
        timeout: Duration::from_secs(5),
    };

    // A plain slave.
    let b_uds = slave(&mut lab, "b", "");
    let c = ptp_synchronised(&probe(&b_uds, None));
    assert_eq!(c.reference, master_id, "{c:?}");
    let off = c.offset_ns.expect("an offset");
    assert!(off.abs() < 1_000_000, "offset {off} ns between two namespaces of one clock: {c:?}");
    assert!(c.bound_ns.unwrap() >= off.abs(), "{c:?}");
    eprintln!("slave: {}", c.detail);
    // free_running: the servo never locks, so the port never becomes SLAVE
    // (the clock is not adjusted).
    assert!(c.detail.contains("port UNCALIBRATED"), "{}", c.detail);
    // The same daemon in another domain: no answer, a one-line error.
    let e = answer(&probe(&b_uds, Some(5)).read(), "ptp4l", "pmc").unwrap_err();
    eprintln!("other domain: {e}");
    assert!(e.starts_with("pmc: no answer"), "{e}");
    lab.stop("b");

    // A slave that takes Sync messages to travel 5 ms longer than they do:
    // it believes it is 5 ms behind its master.
    let s_uds = slave(&mut lab, "b5ms", "delayAsymmetry 5000000");
    let c5 = ptp_synchronised(&probe(&s_uds, None));
    eprintln!("slave with delayAsymmetry 5000000: {}", c5.detail);
    let off5 = c5.offset_ns.unwrap();
    assert!((-6_000_000..-4_000_000).contains(&off5), "offset {off5} ns, expected about -5 ms: {c5:?}");

    // The master: its own grandmaster, not synchronised to anything.
    let a = answer(&probe(&a_uds, None).read(), "ptp4l", "pmc").expect("ptp4l answer");
    eprintln!("master: {}", a.detail);
    assert!(!a.synchronised && a.offset_ns.is_none() && a.reference == master_id, "{a:?}");

    let pids = lab.pids();
    drop(lab);
    assert_gone(&pids, "ptp4l");
}
