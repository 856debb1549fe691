//! Emulated hosts: one network namespace per host, joined by veth pairs
//! (point to point for two hosts, through a bridge in its own namespace for
//! more), with the scenario's MTU, an optional token-bucket rate limit on
//! every egress of the link, and a multicast route for DDS discovery.
//!
//! Topics with a `pcp` leave their host 802.1Q-tagged and packet loss is
//! emulated, both with tc eBPF programs (`lab/bpf/`, [`crate::tcbpf`]):
//! this kernel has neither the 8021q module nor netem.
//!
//! Everything is created with `ip` / `tc` and named `ddsl-<pid>-<random>-…`,
//! so concurrent runs never collide and leftovers of a killed run can be
//! recognised (the pid is in the name). [`Lab`] removes what it created when
//! it is dropped.

use anyhow::{anyhow, bail, Context, Result};
use ddscope_traffic::{Bytes, Rate};
use std::net::Ipv4Addr;

use crate::addr::parse_subnet;
use crate::procs::run_cmd;
use crate::scenario::{LossSpec, Scenario};
use crate::tcbpf::{self, Attached};
use serde::{Deserialize, Serialize};

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
    /// The switch's own address on its bridge (the last of the subnet), where the Zenoh router
    /// listens when it runs on the switch.
    pub switch_ip: Option<Ipv4Addr>,
    /// The switch's management link (its address, the root side's), when [`Lab::add_management`]
    /// ran and there is a switch: agents on the Zenoh router's links reach `serve` through it.
    pub switch_mgmt: Option<(Ipv4Addr, Ipv4Addr)>,
    pub prefix_len: u8,
    created: Vec<String>,
    keep: bool,
    /// The eBPF programs attached to the lab's devices, and what they were given.
    ebpf: Ebpf,
}

#[derive(Debug, Default)]
struct Ebpf {
    rules: Vec<VlanRule>,
    /// (host, egress program, ingress program)
    vlan: Vec<(String, Attached, Attached)>,
    loss: Option<(LossSpec, Vec<(String, Attached)>)>,
    /// (host, egress probe, ingress probe)
    probe: Vec<(String, Attached, Attached)>,
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

impl Lab {
    /// Creates the hosts of `sc`. On error, whatever was created is removed again.
    pub fn up(sc: &Scenario, id: &str) -> Result<Lab> {
        let (base, len) = parse_subnet(&sc.network.subnet, sc.hosts.len())?;
        let mut lab = Lab { id: id.to_string(), hosts: vec![], switch_ns: None, switch_ip: None, switch_mgmt: None, prefix_len: len, created: vec![], keep: false, ebpf: Ebpf::default() };
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
        // Loss is dropped on the switch's egress ports, between the sender's and the
        // receiver's capture: two hosts with loss are joined through the switch too.
        // So is the Zenoh router when it runs on the switch (between the hosts: every host's
        // capture then holds its own link to it).
        if lab.hosts.len() == 2 && sc.network.loss.is_none() && !sc.zenoh_router_on_switch() {
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
            if sc.zenoh_router_on_switch() {
                // the last address of the subnet: hosts count up from the first
                let last = Ipv4Addr::from(u32::from(base) + (1u32 << (32 - len)) - 2);
                if u32::from(last) <= u32::from(base) + lab.hosts.len() as u32 {
                    bail!("network.subnet {}: no address left for the Zenoh router on the switch", sc.network.subnet);
                }
                run_cmd(&[
                    "ip", "netns", "exec", &sw, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ])?;
                run_cmd(&["ip", "-n", &sw, "link", "set", "lo", "up"])?;
                run_cmd(&["ip", "-n", &sw, "addr", "add", &format!("{last}/{len}"), "dev", "br0"])?;
                lab.switch_ip = Some(last);
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
            let burst = tbf_burst(&sc.network, rate);
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
        lab.attach_ebpf(sc)?;
        Ok(lab)
    }

    /// Tags (and untags) the topics with a PCP on every host's link; drops
    /// frames on the switch ports towards the hosts of `network.loss`.
    fn attach_ebpf(&mut self, sc: &Scenario) -> Result<()> {
        let rules = vlan_rules(sc);
        if rules.is_empty() && sc.network.loss.is_none() && !sc.network.tc_probe {
            return Ok(());
        }
        let dir = tcbpf::object_dir()?;
        if sc.network.tc_probe {
            let obj = dir.join("tc_probe.o");
            for h in &self.hosts {
                let eg = tcbpf::attach(&h.netns, &h.iface, "egress", &obj, "tc_probe")?;
                let ing = tcbpf::attach(&h.netns, &h.iface, "ingress", &obj, "tc_probe")?;
                self.ebpf.probe.push((h.name.clone(), eg, ing));
            }
        }
        if !rules.is_empty() {
            let obj = dir.join("tc_vlan.o");
            for h in &self.hosts {
                let eg = tcbpf::attach(&h.netns, &h.iface, "egress", &obj, "tc_vlan_egress")?;
                let ing = tcbpf::attach(&h.netns, &h.iface, "ingress", &obj, "tc_vlan_ingress")?;
                let map = eg.map("vlan_rules")?;
                for r in &rules {
                    map.update(&r.key(), &r.value())?;
                }
                self.ebpf.vlan.push((h.name.clone(), eg, ing));
            }
            self.ebpf.rules = rules;
        }
        if let Some(loss) = &sc.network.loss {
            let sw = self.switch_ns.clone().ok_or_else(|| anyhow!("internal: loss without a switch"))?;
            let obj = dir.join("tc_loss.o");
            let mut ports = vec![];
            for (i, h) in self.hosts.iter().enumerate() {
                if !loss.hosts.is_empty() && !loss.hosts.contains(&h.name) {
                    continue;
                }
                let prog = tcbpf::attach(&sw, &format!("p{i}"), "egress", &obj, "tc_loss_egress")?;
                prog.map("loss_cfg")?.update(&0u32.to_ne_bytes(), &loss.map_value())?;
                ports.push((h.name.clone(), prog));
            }
            self.ebpf.loss = Some((loss.clone(), ports));
        }
        Ok(())
    }

    /// What the eBPF programs did so far (read before [`Lab::down`]); `None`
    /// when the run uses none.
    pub fn ebpf_report(&self) -> Result<Option<EbpfReport>> {
        let e = &self.ebpf;
        if e.vlan.is_empty() && e.loss.is_none() && e.probe.is_empty() {
            return Ok(None);
        }
        let mut vlan = None;
        if !e.vlan.is_empty() {
            let mut hosts = vec![];
            for (host, eg, ing) in &e.vlan {
                let st = eg.map("vlan_stats")?;
                let si = ing.map("vlan_stats")?;
                hosts.push(VlanCounters {
                    host: host.clone(),
                    tagged: st.counter(0)?,
                    untagged: st.counter(1)?,
                    popped: si.counter(2)?,
                    received_untagged: si.counter(3)?,
                    errors: st.counter(4)? + si.counter(4)?,
                });
            }
            vlan = Some(VlanReport { rules: e.rules.clone(), hosts });
        }
        let mut loss = None;
        if let Some((spec, ports)) = &e.loss {
            let mut out = vec![];
            for (host, p) in ports {
                let m = p.map("loss_stats")?;
                out.push(LossCounters { towards: host.clone(), frames: m.counter(0)?, dropped: m.counter(1)?, dropped_in_bursts: m.counter(2)?, bursts: m.counter(3)? });
            }
            loss = Some(LossReport { spec: spec.clone(), mean_loss: spec.mean_loss(), ports: out });
        }
        let mut probe = vec![];
        for (host, eg, ing) in &e.probe {
            for (hook, p) in [("egress", eg), ("ingress", ing)] {
                let m = p.map("probe_stats")?;
                probe.push(ProbeCounters {
                    host: host.clone(),
                    hook: hook.to_string(),
                    frames: m.counter(0)?,
                    bytes: m.counter(1)?,
                    ipv4_udp: m.counter(2)?,
                    ipv4_later_fragments: m.counter(3)?,
                });
            }
        }
        Ok(Some(EbpfReport { vlan, loss, probe }))
    }

    /// What the kernel dropped on the workload link's devices so far (read
    /// before [`Lab::down`]): every host's interface, and the switch's ports
    /// and bridge. Frames the lab's loss program drops are not in these
    /// counters (tc drops after the device's statistics are taken are counted
    /// by the program itself); these are the drops nobody asked for — a full
    /// receive backlog, a shaper's queue limit.
    pub fn kernel_drops(&self) -> Result<Vec<DeviceDrops>> {
        let mut devs: Vec<(String, String, String)> = self.hosts.iter().map(|h| (h.name.clone(), h.netns.clone(), h.iface.clone())).collect();
        if let Some(sw) = &self.switch_ns {
            devs.push(("switch".into(), sw.clone(), "br0".into()));
            devs.extend((0..self.hosts.len()).map(|i| ("switch".to_string(), sw.clone(), format!("p{i}"))));
        }
        let mut out = vec![];
        for (owner, ns, dev) in devs {
            let link = run_cmd(&["ip", "-n", &ns, "-s", "-j", "link", "show", "dev", &dev])?;
            let qdisc = run_cmd(&["tc", "-n", &ns, "-s", "-j", "qdisc", "show", "dev", &dev])?;
            out.push(DeviceDrops::parse(&owner, &dev, &link, &qdisc).with_context(|| format!("reading the counters of {dev} in {ns}"))?);
        }
        Ok(out)
    }

    /// Adds a management link from every host to the root namespace, as the
    /// thesis kept monitoring data off the workload link (3.1.1): a veth pair
    /// per host with a /30 out of a subnet derived from the run id, so that
    /// parallel runs do not collide. Deleting a host namespace removes its link.
    pub fn add_management(&mut self) -> Result<()> {
        let h = self.id.bytes().fold(0xcbf29ce484222325u64, |a, b| (a ^ b as u64).wrapping_mul(0x100000001b3));
        let (o2, o3) = (200 + (h % 50) as u8, (h >> 8) as u8);
        // the hosts, then the switch (when there is one) as the last
        let mut namespaces: Vec<String> = self.hosts.iter().map(|h| h.netns.clone()).collect();
        namespaces.extend(self.switch_ns.clone());
        if namespaces.len() > 63 {
            bail!("a management network supports at most 63 namespaces (hosts and the switch)");
        }
        for (i, ns) in namespaces.iter().enumerate() {
            let root_if = format!("dm{:06x}{i:02}", (h >> 16) & 0xff_ffff);
            let gw = Ipv4Addr::new(10, o2, o3, (4 * i + 1) as u8);
            let ip = Ipv4Addr::new(10, o2, o3, (4 * i + 2) as u8);
            run_cmd(&["ip", "link", "add", &root_if, "type", "veth", "peer", "name", MGMT_IF, "netns", ns])?;
            run_cmd(&["ip", "addr", "add", &format!("{gw}/30"), "dev", &root_if])?;
            run_cmd(&["ip", "link", "set", &root_if, "up"])?;
            run_cmd(&["ip", "-n", ns, "addr", "add", &format!("{ip}/30"), "dev", MGMT_IF])?;
            run_cmd(&["ip", "-n", ns, "link", "set", MGMT_IF, "up"])?;
            match self.hosts.get_mut(i) {
                Some(host) => host.mgmt = Some((ip, gw)),
                None => self.switch_mgmt = Some((ip, gw)),
            }
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

/// The VLAN id of tagged topics when the scenario does not name one.
pub const DEFAULT_VLAN_ID: u16 = 10;

/// One topic -> 802.1Q mapping rule of the tagging program: frames to
/// `address` (any port when `port` is None) leave with VID `vid`, PCP `pcp`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VlanRule {
    pub address: Ipv4Addr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    pub vid: u16,
    pub pcp: u8,
    /// The topics the rule carries.
    pub topics: Vec<String>,
}

impl VlanRule {
    /// `struct vlan_key` of lab/bpf/tc_vlan.c (address and port in network byte order).
    fn key(&self) -> [u8; 8] {
        let mut k = [0u8; 8];
        k[0..4].copy_from_slice(&self.address.octets());
        k[4..6].copy_from_slice(&self.port.unwrap_or(0).to_be_bytes());
        k
    }
    /// `struct vlan_val`.
    fn value(&self) -> [u8; 4] {
        let v = self.vid.to_ne_bytes();
        [v[0], v[1], self.pcp, 0]
    }
}

/// The lab's topic -> VLAN/PCP mapping: the mapping `ddscope tsn config
/// --emit dds` writes. Each PCP is a Cyclone DDS network partition with its
/// own multicast address ([`ddscope_tsn::config::partition_address`]); the
/// topic's readers listen there and its writers send there
/// ([`cyclone_partitioning`]), so the program tags by destination address.
pub fn vlan_rules(sc: &Scenario) -> Vec<VlanRule> {
    let vid = sc.network.vlan_id.unwrap_or(DEFAULT_VLAN_ID);
    let mut rules: Vec<VlanRule> = vec![];
    for n in &sc.nodes {
        let flows = n.publish.iter().chain(n.relay.iter().map(|r| &r.output));
        for f in flows {
            let Some(pcp) = f.pcp else { continue };
            let address: Ipv4Addr = match ddscope_tsn::config::partition_address(pcp).parse() {
                Ok(a) => a,
                Err(_) => continue,
            };
            match rules.iter_mut().find(|r| r.pcp == pcp) {
                Some(r) => {
                    if !r.topics.contains(&f.topic) {
                        r.topics.push(f.topic.clone())
                    }
                }
                None => rules.push(VlanRule { address, port: None, vid, pcp, topics: vec![f.topic.clone()] }),
            }
        }
    }
    rules
}

/// Cyclone DDS `<Partitioning>` for the topics with a PCP (empty when none):
/// one network partition per PCP, as `ddscope tsn config --emit dds` writes it.
pub fn cyclone_partitioning(sc: &Scenario) -> String {
    let rules = vlan_rules(sc);
    if rules.is_empty() {
        return String::new();
    }
    let mut parts = String::new();
    let mut maps = String::new();
    for r in &rules {
        parts.push_str(&format!("<NetworkPartition Name=\"pcp{}\" Address=\"{}\"/>", r.pcp, r.address));
        for t in &r.topics {
            maps.push_str(&format!("<PartitionMapping DCPSPartitionTopic=\"*.rt/{}\" NetworkPartition=\"pcp{}\"/>", t.trim_start_matches('/'), r.pcp));
        }
    }
    format!("<Partitioning><NetworkPartitions>{parts}</NetworkPartitions><PartitionMappings>{maps}</PartitionMappings></Partitioning>")
}

// The map value of a LossSpec belongs to the program that reads it.
impl LossSpec {
    /// `struct loss_cfg` of lab/bpf/tc_loss.c: probabilities as x * 2^32.
    fn map_value(&self) -> [u8; 40] {
        let fx = |p: f64| -> u64 { (p * 4_294_967_296.0).round().clamp(0.0, 4_294_967_296.0) as u64 };
        let mut v = [0u8; 40];
        for (i, x) in [fx(self.enter_burst), fx(self.leave_burst), fx(self.probability), fx(self.burst_loss), 1].iter().enumerate() {
            v[i * 8..i * 8 + 8].copy_from_slice(&x.to_ne_bytes());
        }
        v
    }
}

/// What the eBPF programs of a run did (run.json `network.ebpf`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EbpfReport {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<VlanReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossReport>,
    /// `network.tc_probe`: what the probe saw per host and hook.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probe: Vec<ProbeCounters>,
}

/// Frames seen by lab/bpf/tc_probe.c on one host's hook.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProbeCounters {
    pub host: String,
    pub hook: String,
    pub frames: u64,
    pub bytes: u64,
    pub ipv4_udp: u64,
    pub ipv4_later_fragments: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VlanReport {
    pub rules: Vec<VlanRule>,
    pub hosts: Vec<VlanCounters>,
}

/// Per host: frames tagged / left untagged on egress, tags popped / frames
/// without a tag on ingress, helper failures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VlanCounters {
    pub host: String,
    pub tagged: u64,
    pub untagged: u64,
    pub popped: u64,
    pub received_untagged: u64,
    pub errors: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LossReport {
    pub spec: LossSpec,
    /// The long-run loss rate the parameters give.
    pub mean_loss: f64,
    pub ports: Vec<LossCounters>,
}

/// Per switch port (towards one host): IPv4 frames seen and dropped.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LossCounters {
    pub towards: String,
    pub frames: u64,
    pub dropped: u64,
    pub dropped_in_bursts: u64,
    pub bursts: u64,
}

/// The kernel's drop counters of one lab device at the end of a run
/// (run.json `network.kernel_drops`; `ip -s link` and `tc -s qdisc`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceDrops {
    /// The host owning the device, or `switch`.
    pub owner: String,
    pub device: String,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_over_errors: u64,
    /// Drops of the device's queueing qdiscs (a shaper's queue limit).
    pub qdisc_dropped: u64,
    /// Frames the lab's own tc programs dropped on purpose (the clsact
    /// hook's count, kept by the kernel apart from the program's maps).
    pub clsact_dropped: u64,
}

impl DeviceDrops {
    fn parse(owner: &str, device: &str, link_json: &str, qdisc_json: &str) -> Result<DeviceDrops> {
        let link: serde_json::Value = serde_json::from_str(link_json).context("`ip -s -j link` output")?;
        let st = link.get(0).and_then(|l| l.get("stats64")).ok_or_else(|| anyhow!("no stats64 in `ip -s -j link` output"))?;
        let n = |dir: &str, k: &str| st.get(dir).and_then(|d| d.get(k)).and_then(|v| v.as_u64()).unwrap_or(0);
        let qdisc: serde_json::Value = serde_json::from_str(qdisc_json).context("`tc -s -j qdisc` output")?;
        let (mut qdisc_dropped, mut clsact_dropped) = (0, 0);
        for q in qdisc.as_array().map(|a| a.as_slice()).unwrap_or(&[]) {
            let drops = q.get("drops").and_then(|v| v.as_u64()).unwrap_or(0);
            match q.get("kind").and_then(|k| k.as_str()) {
                Some("clsact") | Some("ingress") => clsact_dropped += drops,
                _ => qdisc_dropped += drops,
            }
        }
        Ok(DeviceDrops {
            owner: owner.to_string(),
            device: device.to_string(),
            rx_packets: n("rx", "packets"),
            tx_packets: n("tx", "packets"),
            rx_dropped: n("rx", "dropped"),
            tx_dropped: n("tx", "dropped"),
            rx_over_errors: n("rx", "over_errors"),
            qdisc_dropped,
            clsact_dropped,
        })
    }

    /// Every frame this device lost that the lab did not drop on purpose.
    pub fn dropped(&self) -> u64 {
        self.rx_dropped + self.tx_dropped + self.rx_over_errors + self.qdisc_dropped
    }
}

/// The bucket of the lab's tbf shapers: the scenario's, else the default.
pub fn tbf_burst(net: &crate::scenario::Network, rate: Rate) -> Bytes {
    net.tbf_burst.unwrap_or_else(|| default_burst(rate, net.mtu))
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
    fn device_drops_keep_the_labs_own_drops_apart() {
        // the shapes iproute2 6.1 prints for a switch port with a tbf shaper and the loss program
        let link = r#"[{"ifname":"p1","stats64":{"rx":{"bytes":1,"packets":10,"errors":0,"dropped":2,"over_errors":1,"multicast":0},"tx":{"bytes":1,"packets":900,"errors":0,"dropped":3,"carrier_errors":0,"collisions":0}}}]"#;
        let qdisc = r#"[{"kind":"tbf","handle":"8001:","root":true,"drops":4},{"kind":"clsact","handle":"ffff:","parent":"ffff:fff1","drops":9}]"#;
        let d = DeviceDrops::parse("switch", "p1", link, qdisc).unwrap();
        assert_eq!((d.rx_packets, d.tx_packets, d.rx_dropped, d.tx_dropped, d.rx_over_errors), (10, 900, 2, 3, 1));
        assert_eq!((d.qdisc_dropped, d.clsact_dropped), (4, 9));
        assert_eq!(d.dropped(), 2 + 3 + 1 + 4);
        let err = DeviceDrops::parse("switch", "p1", "[{}]", "[]").unwrap_err();
        assert!(format!("{err:#}").contains("stats64"), "{err:#}");
    }

    const TAGGED: &str = r#"
name = "t"
[network]
vlan_id = 20
[[hosts]]
name = "pc1"
[[hosts]]
name = "pc2"
[[nodes]]
name = "cam"
host = "pc1"
[[nodes.publish]]
topic = "/image"
sample_bytes = 1000
rate_hz = 10
pcp = 5
[[nodes]]
name = "sub"
host = "pc2"
vendor = "VENDOR"
[[nodes.subscribe]]
topic = "/image"
"#;

    #[test]
    fn tagged_topics_become_rules_and_partitions() {
        let sc = crate::scenario::parse(&TAGGED.replace("VENDOR", "cyclone")).unwrap();
        let r = vlan_rules(&sc);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].address, r[0].port, r[0].vid, r[0].pcp), ("239.255.10.5".parse().unwrap(), None, 20, 5));
        // struct vlan_key: address and port in network byte order
        assert_eq!(r[0].key(), [239, 255, 10, 5, 0, 0, 0, 0]);
        assert_eq!(r[0].value()[2], 5);
        let x = cyclone_partitioning(&sc);
        assert!(x.contains("<NetworkPartition Name=\"pcp5\" Address=\"239.255.10.5\"/>"), "{x}");
        assert!(x.contains("DCPSPartitionTopic=\"*.rt/image\""), "{x}");
        // the lab applies the mapping through Cyclone DDS partitions only
        let e = crate::scenario::parse(&TAGGED.replace("VENDOR", "fastdds")).unwrap_err().to_string();
        assert!(e.contains("node sub (fastdds): topic /image has a pcp"), "{e}");
        let e = crate::scenario::parse(&TAGGED.replace("pcp = 5", "pcp = 9").replace("VENDOR", "cyclone")).unwrap_err().to_string();
        assert!(e.contains("pcp 9 must lie between 0 and 7"), "{e}");
    }

    #[test]
    fn loss_rates() {
        let b = LossSpec { probability: 0.01, enter_burst: 0.0, leave_burst: 1.0, burst_loss: 1.0, hosts: vec![] };
        assert_eq!(b.mean_loss(), 0.01);
        let v = b.map_value();
        assert_eq!(u64::from_ne_bytes(v[16..24].try_into().unwrap()), 42_949_673);
        let ge = LossSpec { probability: 0.0, enter_burst: 0.01, leave_burst: 0.24, burst_loss: 0.5, hosts: vec![] };
        assert!((ge.mean_loss() - 0.02).abs() < 1e-12);
        assert!(LossSpec { probability: 1.5, ..b }.check().is_err());
    }

    #[test]
    fn bursts() {
        assert_eq!(default_burst(Rate(2_500_000_000), 1500), Bytes(312_500));
        assert_eq!(default_burst(Rate(10_000_000), 1500), Bytes(16 * 1514));
    }
}
