//! Configuration generated from a scenario: `tc` (taprio, mqprio + cbs,
//! etf), how DDS traffic gets its priority (Cyclone DDS network partitions,
//! iptables/nft classification, VLAN egress-qos-map), and linuxptp.
//!
//! Every `tc` line produced here is run through the real iproute2 parser in
//! the tests (tests/tc_parse.rs). Every value from the scenario is quoted for
//! the shell ([`crate::shell::quote`]); interface names were checked against
//! the kernel's rules when the scenario was read.

use crate::cbs::CbsClassParams;
use crate::shell::quote;
use crate::scenario::{FlowKind, Port, Scenario, TaprioMode};
use std::fmt::Write;

/// skb->priority 0..15 → traffic class, as taprio/mqprio `map` takes it:
/// priorities 0..7 follow the PCP map (the classification below sets
/// skb->priority = PCP), 8..15 go where priority 0 goes.
fn prio_map(p: &Port) -> String {
    (0..16).map(|i| p.pcp_to_tc[if i < 8 { i } else { 0 }].to_string()).collect::<Vec<_>>().join(" ")
}

fn queues(p: &Port, all_on_zero: bool) -> String {
    (0..p.num_tc).map(|tc| if all_on_zero { "1@0".to_string() } else { format!("1@{tc}") }).collect::<Vec<_>>().join(" ")
}

/// The `tc` lines for every port that needs them. `mode` overrides each port's taprio mode.
pub fn tc(sc: &Scenario, mode: Option<TaprioMode>) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# ddscope tsn config --emit tc — scenario {:?} ({})", sc.name, sc.file);
    let _ = writeln!(o, "# One hardware queue per traffic class (TC n -> queue n); skb->priority = PCP (see --emit dds).");
    for p in &sc.ports {
        if p.gcl.is_none() && p.cbs.is_empty() {
            continue;
        }
        let dev = quote(&p.interface);
        let pcps: Vec<String> = (0..8).filter(|&q| p.pcp_to_tc[q] != 0).map(|q| format!("PCP {q} -> TC {}", p.pcp_to_tc[q])).collect();
        let _ = writeln!(o, "\n# port {:?}: {} at {}, {} traffic classes ({}others -> TC {})", p.name, dev, p.rate, p.num_tc, if pcps.is_empty() { String::new() } else { pcps.join(", ") + ", " }, p.pcp_to_tc[0]);
        match &p.gcl {
            Some(g) => {
                let mode = mode.clone().unwrap_or(g.mode.clone());
                let txtime = mode == TaprioMode::TxtimeAssist;
                let entries: String = g
                    .gcl
                    .entries
                    .iter()
                    .map(|e| format!(" sched-entry S {:02x} {}", e.mask, e.duration_ps / 1000))
                    .collect();
                let tail = match mode {
                    TaprioMode::Software => " clockid CLOCK_TAI".to_string(),
                    TaprioMode::TxtimeAssist => format!(" flags 0x1 txtime-delay {} clockid CLOCK_TAI", g.txtime_delay_ns),
                    TaprioMode::FullOffload => " flags 0x2".to_string(),
                };
                let _ = writeln!(
                    o,
                    "# taprio ({}), cycle {} ns; base-time {} ns (CLOCK_TAI; a past base-time starts at the next cycle boundary)",
                    match mode {
                        TaprioMode::Software => "software",
                        TaprioMode::TxtimeAssist => "txtime-assist: taprio sets each packet's txtime, etf launches it",
                        TaprioMode::FullOffload => "full offload: the NIC runs the gate control list",
                    },
                    g.gcl.cycle_ps / 1000,
                    g.base_time_ns
                );
                let _ = writeln!(
                    o,
                    "tc qdisc replace dev {dev} parent root handle 100 taprio num_tc {} map {} queues {} base-time {}{entries}{tail}",
                    p.num_tc,
                    prio_map(p),
                    queues(p, txtime),
                    g.base_time_ns
                );
                if txtime {
                    let _ = writeln!(o, "# etf under taprio's queue: skip_sock_check, because taprio (not the socket) set the txtime");
                    let _ = writeln!(
                        o,
                        "tc qdisc replace dev {dev} parent 100:1 etf skip_sock_check offload delta {} clockid CLOCK_TAI",
                        g.etf_delta_ns
                    );
                }
            }
            None => {
                let _ = writeln!(o, "# mqprio: strict priority between traffic classes, one queue each");
                let _ = writeln!(
                    o,
                    "tc qdisc replace dev {dev} parent root handle 100 mqprio num_tc {} map {} queues {} hw 0",
                    p.num_tc,
                    prio_map(p),
                    queues(p, false)
                );
            }
        }
        for (tc, c, off) in &p.cbs {
            let _ = writeln!(
                o,
                "# cbs for TC {tc}: {} kbit/s reserved (Bosk et al. Eq. 2-6 or as given)",
                c.idleslope_kbps
            );
            let params = CbsClassParams {
                name: format!("tc{tc}"),
                reserved_bps: c.idleslope_kbps as u64 * 1000,
                max_frame_bytes: 0,
                idleslope: c.idleslope_kbps,
                sendslope: c.sendslope_kbps,
                hicredit: c.hicredit_bytes,
                locredit: c.locredit_bytes,
                exact_hicredit_bytes: c.hicredit_bytes as f64,
                exact_locredit_bytes: c.locredit_bytes as f64,
                interference_us: 0.0,
            };
            let _ = writeln!(o, "{}", crate::cbs::tc_line(&p.interface, &format!("100:{}", tc + 1), &params, *off));
        }
    }
    o
}

/// Multicast address of the network partition carrying PCP `pcp`.
pub fn partition_address(pcp: u8) -> String {
    format!("239.255.10.{pcp}")
}

/// The DDS topics of a scenario grouped by PCP: (pcp, multicast address, topics).
fn dds_partitions(sc: &Scenario) -> Vec<(u8, String, Vec<String>)> {
    let mut out: Vec<(u8, String, Vec<String>)> = Vec::new();
    for f in &sc.flows {
        if let FlowKind::Topic(t) = &f.kind {
            if f.pcp == 0 {
                continue;
            }
            let addr = f.multicast.clone().unwrap_or_else(|| partition_address(f.pcp));
            let wire = format!("rt/{}", t.topic.trim_start_matches('/'));
            match out.iter_mut().find(|x| x.0 == f.pcp && x.1 == addr) {
                Some(x) => x.2.push(wire),
                None => out.push((f.pcp, addr, vec![wire])),
            }
        }
    }
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Interface the DDS traffic leaves by: the first port of the first DDS flow.
fn dds_interface(sc: &Scenario) -> String {
    sc.flows
        .iter()
        .find(|f| matches!(f.kind, FlowKind::Topic(_)))
        .map(|f| sc.ports[f.path[0]].interface.clone())
        .unwrap_or_else(|| sc.ports[0].interface.clone())
}

/// Cyclone DDS configuration (schema of Cyclone 0.10): one network partition
/// per PCP with its own multicast address, and a mapping of each ROS 2 topic
/// (`rt/<name>` in any DCPS partition) to it. Readers of a mapped topic
/// listen on, and advertise, the partition address; writers send there, so
/// the traffic of a PCP is recognisable by destination address.
pub fn cyclone_xml(sc: &Scenario) -> String {
    let parts = dds_partitions(sc);
    let iface = dds_interface(sc);
    let mut o = String::new();
    let _ = writeln!(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    let _ = writeln!(o, "<!-- ddscope tsn config --emit dds: scenario {} -->", xml_escape(&sc.name).replace("--", "- -"));
    let _ = writeln!(o, "<!-- Use with CYCLONEDDS_URI=file://$PWD/cyclonedds.xml; priorities: see dds-priority.sh -->");
    let _ = writeln!(o, "<CycloneDDS xmlns=\"https://cdds.io/config\">");
    let _ = writeln!(o, "  <Domain Id=\"{}\">", sc.dds.domain_id.map(|d| d.to_string()).unwrap_or_else(|| "any".into()));
    let _ = writeln!(o, "    <General>");
    let _ = writeln!(o, "      <Interfaces>");
    // prefer_multicast: Cyclone sends to a single reader by unicast otherwise, past the partition address
    let prefer = if parts.is_empty() { "" } else { " prefer_multicast=\"true\"" };
    let _ = writeln!(o, "        <NetworkInterface name=\"{}\" multicast=\"true\"{prefer}/>", xml_escape(&iface));
    let _ = writeln!(o, "      </Interfaces>");
    let _ = writeln!(o, "      <AllowMulticast>true</AllowMulticast>");
    // Large samples: DATA_FRAG size and message size as the scenario models them.
    if let Some(frag) = sc.flows.iter().find_map(|f| match &f.kind {
        FlowKind::Topic(t) => t.dds_fragment_bytes,
        _ => None,
    }) {
        let _ = writeln!(o, "      <FragmentSize>{}B</FragmentSize>", frag.0);
        let _ = writeln!(o, "      <MaxMessageSize>{}B</MaxMessageSize>", crate::frame::MAX_UDP_PAYLOAD);
    }
    let _ = writeln!(o, "    </General>");
    if !parts.is_empty() {
        let _ = writeln!(o, "    <Partitioning>");
        let _ = writeln!(o, "      <NetworkPartitions>");
        for (pcp, addr, _) in &parts {
            let _ = writeln!(o, "        <NetworkPartition Name=\"pcp{pcp}\" Address=\"{addr}\"/>");
        }
        let _ = writeln!(o, "      </NetworkPartitions>");
        let _ = writeln!(o, "      <PartitionMappings>");
        for (pcp, _, topics) in &parts {
            for t in topics {
                let _ = writeln!(o, "        <PartitionMapping DCPSPartitionTopic=\"*.{}\" NetworkPartition=\"pcp{pcp}\"/>", xml_escape(t));
            }
        }
        let _ = writeln!(o, "      </PartitionMappings>");
        let _ = writeln!(o, "    </Partitioning>");
    }
    let _ = writeln!(o, "  </Domain>");
    let _ = writeln!(o, "</CycloneDDS>");
    o
}

/// Shell lines that give each partition's (and each UDP flow's) packets
/// their priority. Cyclone DDS and Fast DDS do not set SO_PRIORITY, so the
/// kernel has to classify them.
pub fn priority_script(sc: &Scenario) -> String {
    let parts = dds_partitions(sc);
    let iface_raw = dds_interface(sc);
    let iface = quote(&iface_raw).into_owned();
    let via = sc.dds.priority_via.clone().unwrap_or_else(|| "iptables".into());
    let mut o = String::new();
    let _ = writeln!(o, "#!/bin/sh");
    let _ = writeln!(o, "# ddscope tsn config --emit dds: how the traffic of scenario {:?} gets its priority.", sc.name);
    let _ = writeln!(o, "# taprio/mqprio pick the traffic class from skb->priority (their `map`); the PCP in a VLAN tag");
    let _ = writeln!(o, "# comes from skb->priority through the VLAN device's egress-qos-map. Cyclone DDS and Fast DDS");
    let _ = writeln!(o, "# never set SO_PRIORITY, so the packets are classified here by destination (partition) address.");
    let _ = writeln!(o, "set -e");
    let mut rules: Vec<(u8, String, Option<u16>)> = parts.iter().map(|(p, a, _)| (*p, a.clone(), None)).collect();
    for f in &sc.flows {
        if !matches!(f.kind, FlowKind::Topic(_)) && f.pcp != 0 {
            if let Some(port) = f.dst_port {
                rules.push((f.pcp, String::new(), Some(port)));
            }
        }
    }
    match via.as_str() {
        "nft" => {
            let _ = writeln!(o, "nft add table inet ddscope");
            let _ = writeln!(o, "nft add chain inet ddscope out '{{ type filter hook output priority mangle; }}'");
            for (pcp, addr, port) in &rules {
                match port {
                    None => {
                        let _ = writeln!(o, "nft add rule inet ddscope out oifname {} ip daddr {} meta l4proto udp meta priority set 0:{pcp}", quote(&format!("\"{iface_raw}\"")), quote(addr));
                    }
                    Some(pt) => {
                        let _ = writeln!(o, "nft add rule inet ddscope out oifname {} udp dport {pt} meta priority set 0:{pcp}", quote(&format!("\"{iface_raw}\"")));
                    }
                }
            }
        }
        "cgroup" => {
            let _ = writeln!(o, "# net_prio exists only on cgroup v1 (Debian 12 and Ubuntu 22.04 boot cgroup v2): per process, not per topic.");
            let _ = writeln!(o, "mkdir -p /sys/fs/cgroup/net_prio && mountpoint -q /sys/fs/cgroup/net_prio || mount -t cgroup -o net_prio none /sys/fs/cgroup/net_prio");
            for (pcp, _, _) in &parts {
                let _ = writeln!(o, "mkdir -p /sys/fs/cgroup/net_prio/ddscope-pcp{pcp}");
                let _ = writeln!(o, "echo {} > /sys/fs/cgroup/net_prio/ddscope-pcp{pcp}/net_prio.ifpriomap", quote(&format!("{iface_raw} {pcp}")));
                let _ = writeln!(o, "# then: echo $PID_OF_THE_PUBLISHER > /sys/fs/cgroup/net_prio/ddscope-pcp{pcp}/cgroup.procs");
            }
        }
        _ => {
            for (pcp, addr, port) in &rules {
                match port {
                    None => {
                        let _ = writeln!(o, "iptables -t mangle -A OUTPUT -o {iface} -p udp -d {} -j CLASSIFY --set-class 0:{pcp}", quote(addr));
                    }
                    Some(pt) => {
                        let _ = writeln!(o, "iptables -t mangle -A OUTPUT -o {iface} -p udp --dport {pt} -j CLASSIFY --set-class 0:{pcp}");
                    }
                }
            }
        }
    }
    if via == "vlan" || sc.framing.vlan {
        let vid = sc.dds.vlan_id.unwrap_or(10);
        let map: String = (0..8).map(|p| format!(" {p}:{p}")).collect();
        let _ = writeln!(o, "# PCP on the wire: a VLAN device whose egress-qos-map copies skb->priority into the PCP,");
        let _ = writeln!(o, "# and routes that send the partition addresses through it (thesis Fig. 4.2 bound partitions to VLAN devices).");
        let vdev = quote(&format!("{iface_raw}.{vid}")).into_owned();
        let _ = writeln!(o, "ip link add link {iface} name {vdev} type vlan id {vid} egress-qos-map{map}");
        let _ = writeln!(o, "ip link set {vdev} up");
        for (_, addr, _) in &parts {
            let _ = writeln!(o, "ip route replace {} dev {vdev}", quote(&format!("{addr}/32")));
        }
        if via != "nft" && via != "cgroup" {
            let _ = writeln!(o, "# CLASSIFY also for packets leaving through the VLAN device");
            for (pcp, addr, _) in &parts {
                let _ = writeln!(o, "iptables -t mangle -A OUTPUT -o {vdev} -p udp -d {} -j CLASSIFY --set-class 0:{pcp}", quote(addr));
            }
        }
    }
    o
}

/// linuxptp files for a grandmaster and a follower (gPTP profile as Bosk et al.'s
/// Listing 1, or UDPv4 E2E), plus the phc2sys commands.
pub fn ptp(sc: &Scenario) -> Vec<(String, String)> {
    let gm = sc.ptp.grandmaster.as_deref().map(|n| sc.port_index(n).map(|i| sc.ports[i].interface.clone()).unwrap_or(n.to_string()));
    let gm = gm.unwrap_or_else(|| sc.ports[0].interface.clone());
    let fo = sc.ptp.follower.clone().unwrap_or_else(|| "eth0".into());
    let l2 = sc.ptp.transport.as_deref().map(|t| t.eq_ignore_ascii_case("l2")).unwrap_or(true);
    let sync = sc.ptp.log_sync_interval.unwrap_or(-3);
    let common = |prio: u8, iface: &str, slave_only: bool| {
        let mut o = String::new();
        let _ = writeln!(o, "# ddscope tsn config --emit ptp: scenario {:?}", sc.name);
        let _ = writeln!(o, "[global]");
        let _ = writeln!(o, "priority1 {prio}");
        let _ = writeln!(o, "priority2 {prio}");
        if slave_only {
            let _ = writeln!(o, "slaveOnly 1");
        }
        let _ = writeln!(o, "logSyncInterval {sync}");
        let _ = writeln!(o, "logAnnounceInterval 0");
        let _ = writeln!(o, "syncReceiptTimeout 3");
        let _ = writeln!(o, "time_stamping hardware");
        if l2 {
            let _ = writeln!(o, "# gPTP (IEEE 802.1AS) profile: layer 2, peer delay, two-step");
            let _ = writeln!(o, "gmCapable 1");
            let _ = writeln!(o, "transportSpecific 0x1");
            let _ = writeln!(o, "ptp_dst_mac 01:80:C2:00:00:0E");
            let _ = writeln!(o, "network_transport L2");
            let _ = writeln!(o, "delay_mechanism P2P");
            let _ = writeln!(o, "assume_two_step 1");
            let _ = writeln!(o, "path_trace_enabled 1");
            let _ = writeln!(o, "follow_up_info 1");
            let _ = writeln!(o, "neighborPropDelayThresh 800");
            let _ = writeln!(o, "min_neighbor_prop_delay -20000000");
        } else {
            let _ = writeln!(o, "network_transport UDPv4");
            let _ = writeln!(o, "delay_mechanism E2E");
        }
        let _ = writeln!(o, "\n[{iface}]");
        o
    };
    let (gmq, foq) = (quote(&gm), quote(&fo));
    let run = format!(
        "# Grandmaster ({gmq}): the NIC clock is the reference; the system clock follows it.\n\
         ptp4l -f ptp4l-grandmaster.cfg -m &\n\
         phc2sys -s {gmq} -c CLOCK_REALTIME -O 0 -w -m &\n\
         # Follower ({foq}): ptp4l disciplines the NIC clock; phc2sys copies it to the system clock\n\
         # (-w takes the TAI-UTC offset, 37 s, from ptp4l: timestamps of the two clocks differ by it).\n\
         ptp4l -f ptp4l-follower.cfg -s -m &\n\
         phc2sys -s {foq} -c CLOCK_REALTIME -w -m &\n\
         # taprio's base-time and etf use CLOCK_TAI: keep the kernel's TAI offset right (phc2sys -w does).\n"
    );
    vec![
        ("ptp4l-grandmaster.cfg".into(), common(128, &gm, false)),
        ("ptp4l-follower.cfg".into(), common(248, &fo, true)),
        ("ptp-commands.sh".into(), run),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thesis() -> Scenario {
        let p = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/tsn/thesis-tas50-40.toml");
        Scenario::load(std::path::Path::new(p)).unwrap()
    }

    #[test]
    fn taprio_line_has_the_schedule() {
        let t = tc(&thesis(), Some(TaprioMode::FullOffload));
        assert!(t.contains("taprio num_tc 2 map 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 queues 1@0 1@1 base-time 0 sched-entry S 02 250000 sched-entry S 01 250000 flags 0x2"), "{t}");
    }

    #[test]
    fn cyclone_maps_topics_to_partitions() {
        let x = cyclone_xml(&thesis());
        assert!(x.contains("<NetworkPartition Name=\"pcp5\" Address=\"239.255.10.5\"/>"), "{x}");
        assert!(x.contains("DCPSPartitionTopic=\"*.rt/image\""), "{x}");
        assert!(x.contains("DCPSPartitionTopic=\"*.rt/drive\""), "{x}");
        // a single reader must still be reached at the partition address
        assert!(x.contains("prefer_multicast=\"true\""), "{x}");
    }
}
