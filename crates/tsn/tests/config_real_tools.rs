//! Generated configuration checked by the real tools:
//! - every `tc` line by iproute2's `tc` parser, inside a throw-away network
//!   namespace with a veth pair (this kernel has no taprio/mqprio/cbs/etf:
//!   the kernel's "unknown qdisc kind" / "cannot find parent qdisc" answers
//!   mean the arguments were parsed; usage text or "illegal"/"invalid"
//!   messages fail the test, naming the line);
//! - the Cyclone DDS XML by starting `ddsperf` with it (it refuses bad configs);
//! - the linuxptp files by `ptp4l -f` (it refuses unknown options).

use ddscope_tsn::config;
use ddscope_tsn::scenario::{Scenario, TaprioMode};
use std::path::PathBuf;
use std::process::{Command, Output};

fn examples() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/tsn");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "toml")).collect();
    v.sort();
    v
}

/// A network namespace that is deleted when dropped, also on panic.
struct Netns(String);
impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("ddtsn-{tag}-{}-{}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos());
        let st = Command::new("ip").args(["netns", "add", &name]).status().expect("ip netns add (needs root and iproute2)");
        assert!(st.success(), "ip netns add {name} failed (root needed)");
        Netns(name)
    }
    fn exec(&self, args: &[&str]) -> Output {
        Command::new("ip").args(["netns", "exec", &self.0]).args(args).output().unwrap()
    }
    fn ok(&self, args: &[&str]) {
        let o = self.exec(args);
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
}
impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Kernel answers after a successful parse (established on this machine).
const PARSED: &[&str] = &["Error: Specified qdisc kind is unknown.", "Error: Failed to find specified qdisc.", "Operation not supported"];

fn check_tc_lines(ns: &Netns, dev_in_ns: &str, script: &str, what: &str) -> usize {
    let mut n = 0;
    for line in script.lines().filter(|l| l.starts_with("tc ")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let mut args: Vec<String> = words[1..].iter().map(|s| s.to_string()).collect();
        let i = args.iter().position(|a| a == "dev").expect("dev") + 1;
        args[i] = dev_in_ns.to_string();
        let mut cmd = vec!["tc"];
        cmd.extend(args.iter().map(|s| s.as_str()));
        let o = ns.exec(&cmd);
        let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
        let parsed = o.status.success() || PARSED.iter().any(|p| err == *p || err.ends_with(p));
        assert!(parsed, "{what}: tc rejected the arguments of\n  {line}\nwith: {err}");
        n += 1;
    }
    n
}

#[test]
fn tc_parser_accepts_every_generated_line() {
    let ns = Netns::new("tc");
    ns.ok(&["ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1"]);
    ns.ok(&["ip", "link", "set", "v0", "up"]);
    // The oracle itself: a malformed taprio line must be refused, a good one parsed.
    let bad = ns.exec(&["tc", "qdisc", "replace", "dev", "v0", "parent", "root", "handle", "100", "taprio", "num_tc", "2", "sched-entry", "S", "zz", "1000"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("Usage"), "bad line not refused");
    let mut lines = 0;
    for f in examples() {
        let sc = Scenario::load(&f).unwrap();
        for mode in [TaprioMode::Software, TaprioMode::TxtimeAssist, TaprioMode::FullOffload] {
            lines += check_tc_lines(&ns, "v0", &config::tc(&sc, Some(mode.clone())), &format!("{} ({mode:?})", f.display()));
        }
    }
    // CBS lines of `ddscope tsn cbs` (Bosk et al. and man-page examples).
    let p = ddscope_tsn::cbs::compute(
        1_000_000_000,
        1542,
        &[
            ddscope_tsn::cbs::CbsClassInput { name: "A".into(), reserved_bps: 89_152_000, max_frame_bytes: 1500 },
            ddscope_tsn::cbs::CbsClassInput { name: "B".into(), reserved_bps: 12_820_000, max_frame_bytes: 1250 },
        ],
    )
    .unwrap();
    let script: String = p.iter().enumerate().map(|(i, c)| ddscope_tsn::cbs::tc_line("eth0", &format!("100:{}", i + 1), c, false) + "\n").collect();
    lines += check_tc_lines(&ns, "v0", &script, "cbs command");
    assert!(lines >= 30, "only {lines} tc lines checked");
}

#[test]
fn cyclone_dds_accepts_the_generated_xml() {
    let ddsperf = which("ddsperf").expect("ddsperf (cyclonedds-tools) is not installed: scripts/setup.sh installs it");
    for f in examples() {
        let sc = Scenario::load(&f).unwrap();
        let xml = config::cyclone_xml(&sc);
        // Run in a namespace holding an interface named as the scenario's, so Cyclone can bind it.
        let ns = Netns::new("dds");
        let iface = xml.split("NetworkInterface name=\"").nth(1).unwrap().split('"').next().unwrap().to_string();
        ns.ok(&["ip", "link", "add", &iface, "type", "veth", "peer", "name", "peer0"]);
        ns.ok(&["ip", "addr", "add", "10.77.0.1/24", "dev", &iface]);
        ns.ok(&["ip", "link", "set", &iface, "up"]);
        ns.ok(&["ip", "link", "set", "peer0", "up"]);
        ns.ok(&["ip", "link", "set", "lo", "up"]);
        let path = std::env::temp_dir().join(format!("ddtsn-cyclone-{}.xml", std::process::id()));
        std::fs::write(&path, &xml).unwrap();
        let o = Command::new("ip")
            .args(["netns", "exec", &ns.0, "timeout", "20", &ddsperf, "-D1", "pub"])
            .env("CYCLONEDDS_URI", format!("file://{}", path.display()))
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&path);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{}: Cyclone DDS rejected the config:\n{err}\n{xml}", f.display());
        assert!(!err.contains("config:"), "{}: {err}", f.display());
    }
}

#[test]
fn ptp4l_parses_the_generated_config() {
    let Some(ptp4l) = which("ptp4l") else {
        panic!("ptp4l (linuxptp) is not installed: scripts/setup.sh installs it");
    };
    let sc = Scenario::load(&examples()[0]).unwrap();
    let ns = Netns::new("ptp");
    for (name, body) in config::ptp(&sc).iter().filter(|(n, _)| n.ends_with(".cfg")) {
        let iface = body.lines().last().unwrap().trim_matches(|c| c == '[' || c == ']').to_string();
        let _ = ns.exec(&["ip", "link", "add", &iface, "type", "veth", "peer", "name", &format!("p-{}", &iface[..iface.len().min(10)])]);
        let path = std::env::temp_dir().join(format!("ddtsn-{}-{name}", std::process::id()));
        std::fs::write(&path, body).unwrap();
        let o = ns.exec(&["timeout", "2", &ptp4l, "-f", path.to_str().unwrap(), "-m", "-q"]);
        let _ = std::fs::remove_file(&path);
        let out = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
        assert!(!out.contains("failed to parse configuration file") && !out.contains("unknown option"), "{name}: ptp4l refused it:\n{out}\n{body}");
        // The oracle refuses what it should.
    }
    let bad = std::env::temp_dir().join(format!("ddtsn-{}-bad.cfg", std::process::id()));
    std::fs::write(&bad, "[global]\nno_such_option 1\n").unwrap();
    let o = ns.exec(&["timeout", "2", &ptp4l, "-f", bad.to_str().unwrap(), "-m", "-q"]);
    let _ = std::fs::remove_file(&bad);
    assert!(String::from_utf8_lossy(&o.stderr).contains("failed to parse configuration file"));
}

fn which(name: &str) -> Option<String> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| format!("{d}/{name}")).find(|p| std::path::Path::new(p).exists())
}
