//! Emulated hosts: one network namespace per host, joined by veth pairs
//! (point to point for two hosts, through a bridge in its own namespace for
//! more), with the scenario's MTU, an optional token-bucket rate limit on
//! every egress of the link, and a multicast route for DDS discovery.
//!
//! Everything is created with `ip` / `tc` and named `ddsl-<pid>-<random>-…`,
//! so concurrent runs never collide and leftovers of a killed run can be
//! recognised (the pid is in the name). [`Lab`] removes what it created when
//! it is dropped.

use anyhow::{bail, Context, Result};
use ddscope_traffic::{Bytes, Rate};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

use crate::addr::parse_subnet;
use crate::scenario::Scenario;

/// Prefix of every namespace the lab creates.
pub const NS_PREFIX: &str = "ddsl-";
/// Interface name of a host's link inside its namespace.
pub const HOST_IF: &str = "eth0";

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct HostNet {
    pub name: String,
    pub netns: String,
    pub iface: String,
    pub ip: Ipv4Addr,
    pub mac: String,
    /// Management link to the root namespace (monitoring traffic off the
    /// workload link): this host's address and the root side's.
    pub mgmt: Option<(Ipv4Addr, Ipv4Addr)>,
}

/// Name of the management interface inside each host.
pub const MGMT_IF: &str = "mgmt0";

/// The network of one lab; removed on drop.
#[derive(Debug)]
pub struct Lab {
    pub id: String,
    pub hosts: Vec<HostNet>,
    /// The bridge namespace (more than two hosts).
    pub switch_ns: Option<String>,
    pub prefix_len: u8,
    created: Vec<String>,
    keep: bool,
}

/// A short id unique to this run: the pid plus 16 random bits.
pub fn new_run_id() -> String {
    let mut b = [0u8; 2];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    format!("{}-{:02x}{:02x}", std::process::id(), b[0], b[1])
}

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

impl Lab {
    /// Creates the hosts of `sc`. On error, whatever was created is removed again.
    pub fn up(sc: &Scenario, id: &str) -> Result<Lab> {
        let (base, len) = parse_subnet(&sc.network.subnet, sc.hosts.len())?;
        let mut lab = Lab { id: id.to_string(), hosts: vec![], switch_ns: None, prefix_len: len, created: vec![], keep: false };
        for (i, h) in sc.hosts.iter().enumerate() {
            let netns = format!("{NS_PREFIX}{id}-{}", h.name);
            lab.add_ns(&netns)?;
            lab.hosts.push(HostNet {
                name: h.name.clone(),
                netns,
                iface: HOST_IF.to_string(),
                ip: Ipv4Addr::from(u32::from(base) + i as u32 + 1),
                mac: String::new(),
                mgmt: None,
            });
        }
        let mtu = sc.network.mtu.to_string();
        if lab.hosts.len() == 2 {
            let (a, b) = (lab.hosts[0].netns.clone(), lab.hosts[1].netns.clone());
            run_cmd(&["ip", "link", "add", HOST_IF, "netns", &a, "mtu", &mtu, "type", "veth", "peer", "name", HOST_IF, "netns", &b, "mtu", &mtu])?;
        } else {
            let sw = format!("{NS_PREFIX}{id}-sw");
            lab.add_ns(&sw)?;
            lab.switch_ns = Some(sw.clone());
            run_cmd(&["ip", "-n", &sw, "link", "add", "br0", "mtu", &mtu, "type", "bridge"])?;
            run_cmd(&["ip", "-n", &sw, "link", "set", "br0", "up"])?;
            for (i, h) in lab.hosts.iter().enumerate() {
                let port = format!("p{i}");
                run_cmd(&["ip", "link", "add", HOST_IF, "netns", &h.netns, "mtu", &mtu, "type", "veth", "peer", "name", &port, "netns", &sw, "mtu", &mtu])?;
                run_cmd(&["ip", "-n", &sw, "link", "set", &port, "master", "br0"])?;
                run_cmd(&["ip", "-n", &sw, "link", "set", &port, "up"])?;
            }
        }
        let cidr = |ip: &Ipv4Addr| format!("{ip}/{len}");
        for h in &mut lab.hosts {
            // IPv4 only: no IPv6 neighbour discovery or MLD noise in the captures
            run_cmd(&[
                "ip", "netns", "exec", &h.netns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])?;
            run_cmd(&["ip", "-n", &h.netns, "link", "set", "lo", "up"])?;
            run_cmd(&["ip", "-n", &h.netns, "addr", "add", &cidr(&h.ip), "dev", HOST_IF])?;
            run_cmd(&["ip", "-n", &h.netns, "link", "set", HOST_IF, "up"])?;
            // DDS discovery (SPDP) goes to 239.255.0.1: send multicast out of the link
            run_cmd(&["ip", "-n", &h.netns, "route", "add", "224.0.0.0/4", "dev", HOST_IF])?;
            let link = run_cmd(&["ip", "-n", &h.netns, "-o", "link", "show", HOST_IF])?;
            h.mac = link.split("link/ether ").nth(1).and_then(|s| s.split_whitespace().next()).unwrap_or("").to_string();
        }
        if let Some(rate) = sc.network.rate {
            let burst = sc.network.tbf_burst.unwrap_or_else(|| default_burst(rate, sc.network.mtu));
            let latency = format!("{}us", sc.network.tbf_latency.0 / 1000);
            let rate_s = format!("{}bit", rate.0);
            let burst_s = burst.0.to_string();
            let mut egresses: Vec<(String, String)> = lab.hosts.iter().map(|h| (h.netns.clone(), HOST_IF.to_string())).collect();
            if let Some(sw) = &lab.switch_ns {
                egresses.extend((0..lab.hosts.len()).map(|i| (sw.clone(), format!("p{i}"))));
            }
            for (ns, dev) in egresses {
                run_cmd(&["tc", "-n", &ns, "qdisc", "add", "dev", &dev, "root", "tbf", "rate", &rate_s, "burst", &burst_s, "latency", &latency])?;
            }
        }
        Ok(lab)
    }

    /// Adds a management link from every host to the root namespace, as the
    /// thesis kept monitoring data off the workload link (3.1.1): a veth pair
    /// per host with a /30 out of a subnet derived from the run id, so that
    /// parallel runs do not collide. Deleting a host namespace removes its link.
    pub fn add_management(&mut self) -> Result<()> {
        let h = self.id.bytes().fold(0xcbf29ce484222325u64, |a, b| (a ^ b as u64).wrapping_mul(0x100000001b3));
        let (o2, o3) = (200 + (h % 50) as u8, (h >> 8) as u8);
        for (i, host) in self.hosts.iter_mut().enumerate() {
            if i >= 63 {
                bail!("a management network supports at most 63 hosts");
            }
            let root_if = format!("dm{:06x}{i:02}", (h >> 16) & 0xff_ffff);
            let gw = Ipv4Addr::new(10, o2, o3, (4 * i + 1) as u8);
            let ip = Ipv4Addr::new(10, o2, o3, (4 * i + 2) as u8);
            run_cmd(&["ip", "link", "add", &root_if, "type", "veth", "peer", "name", MGMT_IF, "netns", &host.netns])?;
            run_cmd(&["ip", "addr", "add", &format!("{gw}/30"), "dev", &root_if])?;
            run_cmd(&["ip", "link", "set", &root_if, "up"])?;
            run_cmd(&["ip", "-n", &host.netns, "addr", "add", &format!("{ip}/30"), "dev", MGMT_IF])?;
            run_cmd(&["ip", "-n", &host.netns, "link", "set", MGMT_IF, "up"])?;
            host.mgmt = Some((ip, gw));
        }
        Ok(())
    }

    fn add_ns(&mut self, name: &str) -> Result<()> {
        run_cmd(&["ip", "netns", "add", name])?;
        self.created.push(name.to_string());
        Ok(())
    }

    pub fn host(&self, name: &str) -> Option<&HostNet> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// Leaves the namespaces in place when dropped (`ddscope lab up`).
    pub fn keep(mut self) -> Vec<String> {
        self.keep = true;
        std::mem::take(&mut self.created)
    }

    /// Removes the namespaces now (also what Drop does).
    pub fn down(&mut self) -> Result<()> {
        let mut errors = vec![];
        for ns in self.created.drain(..).rev() {
            if let Err(e) = delete_netns(&ns) {
                errors.push(e.to_string());
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            bail!("{}", errors.join("; "))
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if !self.keep {
            if let Err(e) = self.down() {
                eprintln!("ddscope: lab: cleanup: {e}");
            }
        }
    }
}

/// Kills whatever still runs in the namespace (only lab processes can: the
/// name is unique to one run) and deletes it.
pub fn delete_netns(ns: &str) -> Result<()> {
    for _ in 0..20 {
        let pids = run_cmd(&["ip", "netns", "pids", ns]).unwrap_or_default();
        let pids: Vec<i32> = pids.split_whitespace().filter_map(|p| p.parse().ok()).collect();
        if pids.is_empty() {
            break;
        }
        for p in pids {
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    run_cmd(&["ip", "netns", "del", ns]).map(|_| ())
}

/// Bucket of 1 ms at the link rate, at least 16 full frames: small enough
/// to shape like a link, large enough for TBF to reach the rate.
fn default_burst(rate: Rate, mtu: u32) -> Bytes {
    Bytes((rate.0 / 8 / 1000).max(16 * (mtu as u64 + 14)))
}

/// Lists the lab namespaces on this machine: (name, owning pid, alive).
pub fn list_lab_namespaces() -> Result<Vec<(String, Option<i32>, bool)>> {
    let out = run_cmd(&["ip", "netns", "list"])?;
    let mut v = vec![];
    for line in out.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        if let Some(rest) = name.strip_prefix(NS_PREFIX) {
            let pid = rest.split('-').next().and_then(|p| p.parse::<i32>().ok());
            let alive = pid.map(|p| std::path::Path::new(&format!("/proc/{p}")).exists()).unwrap_or(false);
            v.push((name.to_string(), pid, alive));
        }
    }
    Ok(v)
}

pub fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts() {
        assert_eq!(default_burst(Rate(2_500_000_000), 1500), Bytes(312_500));
        assert_eq!(default_burst(Rate(10_000_000), 1500), Bytes(16 * 1514));
    }
}
