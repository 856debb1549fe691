//! Stateful decoding at one capture point: frames → IP (with fragment
//! reassembly) → UDP → RTPS messages → one [`SubmsgEvent`] per submessage,
//! with INFO_TS/INFO_SRC/INFO_DST context applied and discovery tracked so
//! that user traffic is named by topic and type.

use crate::bounded::BoundedMap;
use crate::source::Packet;
use crate::discovery::{self, Announcement, Discovery, DiscoveryLimits, DiscoveryStats, EndpointKind};
use crate::events::{SubmsgEvent, TrafficType};
use crate::ipfrag::{FragKey, Reassembler, ReassemblyLimits, ReassemblyStats};
use crate::ros_graph::{self, RosGraphError, RosGraphLimits, RosNode};
use ddscope_wire::ip::{self, PROTO_UDP};
use ddscope_wire::link::{self, LinkType, VlanTag, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use ddscope_wire::rtps::{self, Submessage, SubmessageIter, SubmsgKind};
use ddscope_wire::{tcp, udp, EntityId, Guid, GuidPrefix, WireError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

#[derive(Debug, Clone, Copy)]
pub struct DecoderConfig {
    pub reassembly: ReassemblyLimits,
    /// Largest discovery sample reassembled from DATA_FRAG.
    pub max_discovery_sample: u32,
    /// Discovery samples being reassembled at once; the least recently
    /// active set is dropped first (counted in `discovery_fragments_dropped`).
    pub max_discovery_pending: usize,
    /// Bytes all discovery samples being reassembled may hold together
    /// (buffers and fragment bitmaps); over it the least recently active
    /// sets are dropped first.
    pub max_discovery_bytes: usize,
    /// Caps of the participant and endpoint tables.
    pub discovery: DiscoveryLimits,
    /// Caps of the ROS graph (`ros_discovery_info`: nodes and their gids).
    pub ros_graph: RosGraphLimits,
    /// Problems kept with their frame number for the report (all are counted).
    pub max_diagnostics: usize,
    /// Caps of the Zenoh tables (streams, key expressions, fragments, tokens).
    pub zenoh: crate::zenoh::ZenohLimits,
}

impl Default for DecoderConfig {
    fn default() -> Self {
        DecoderConfig {
            reassembly: ReassemblyLimits::default(),
            max_discovery_sample: 1 << 20,
            max_discovery_pending: 256,
            max_discovery_bytes: 16 << 20,
            discovery: DiscoveryLimits::default(),
            ros_graph: RosGraphLimits::default(),
            max_diagnostics: 50,
            zenoh: crate::zenoh::ZenohLimits::default(),
        }
    }
}

/// Everything that was skipped, dropped or malformed, by reason. Nothing is
/// lost silently: each frame ends up decoded or in one of these counters.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DecodeStats {
    pub frames: u64,
    pub rtps_messages: u64,
    pub submessages: u64,
    /// Frames of a link type ddscope does not decode.
    pub unsupported_link_frames: u64,
    /// Link/IP/UDP headers cut short or invalid.
    pub bad_headers: u64,
    /// Frames that are not IPv4/IPv6 (ARP, LLDP, PTP over Ethernet…).
    pub non_ip_frames: u64,
    /// IP packets that are neither UDP nor TCP of a Zenoh session (other TCP, ICMP, IGMP…).
    pub non_udp_packets: u64,
    /// UDP datagrams that are neither RTPS 2.x nor Zenoh (by content and port).
    pub non_rtps_datagrams: u64,
    /// Datagrams with the RTPS magic but another major version.
    pub rtps_other_version: u64,
    /// Datagrams only partly captured (snap length): decoded as far as they go.
    pub snapped_datagrams: u64,
    /// Submessages cut by the snap length before their fixed fields ended (not decoded).
    pub snapped_submessages: u64,
    /// Submessages whose length runs past the end of the message (decoding of that message stops).
    pub truncated_submessages: u64,
    /// Submessages whose content violates the protocol (skipped, decoding continues).
    pub malformed_submessages: u64,
    /// Vendor-specific submessages (id >= 0x80) skipped by length, by "vendor_id/submessage id".
    pub vendor_submessages: BTreeMap<String, u64>,
    /// Submessage ids below 0x80 that the standard does not define.
    pub unknown_submessages: u64,
    /// Discovery samples that could not be parsed.
    pub bad_discovery_samples: u64,
    /// Discovery DATA_FRAG samples dropped (too large, capacity, or never completed);
    /// `ros_discovery_info` samples arriving as DATA_FRAG are reassembled the same way and counted here too.
    pub discovery_fragments_dropped: u64,
    /// `ros_discovery_info` samples that are not a valid ParticipantEntitiesInfo (or were cut by the snap length).
    pub bad_ros_discovery_samples: u64,
    /// `ros_discovery_info` samples refused for announcing more nodes or gids than the caps.
    pub ros_discovery_over_limits: u64,
    pub ip: ReassemblyStats,
    /// Zenoh: what was decoded, skipped and evicted (see [`crate::zenoh`]).
    pub zenoh: crate::zenoh::ZenohStats,
    /// Sizes of the discovery tables and what they evicted.
    pub discovery: DiscoveryStats,
    /// The capture file's own problems (a corrupt or truncated end, packet
    /// blocks of undescribed or skipped interfaces), set once the file is
    /// read ([`DecodeStats::note_capture`]): the summary line never says
    /// "nothing skipped" about a file that had them.
    pub capture_problems: Option<String>,
}

impl DecodeStats {
    /// Takes note of the capture file's own problems (see `capture_problems`).
    pub fn note_capture(&mut self, summary: &crate::source::CaptureSummary) {
        self.capture_problems = summary.problems();
    }

    /// Total of everything skipped or malformed (for the summary line).
    pub fn skipped_total(&self) -> u64 {
        self.unsupported_link_frames
            + self.bad_headers
            + self.non_ip_frames
            + self.non_udp_packets
            + self.non_rtps_datagrams
            + self.rtps_other_version
            + self.truncated_submessages
            + self.malformed_submessages
            + self.vendor_submessages.values().sum::<u64>()
            + self.unknown_submessages
            + self.bad_discovery_samples
            + self.discovery_fragments_dropped
            + self.bad_ros_discovery_samples
            + self.ros_discovery_over_limits
            + self.ip.datagrams_timed_out
            + self.ip.datagrams_evicted
            + self.ip.datagrams_incomplete_at_end
            + self.ip.oversized_fragments
            + self.ip.datagrams_too_fragmented
            + self.zenoh.skipped_total()
    }

    /// One line: what was skipped or malformed, non-zero counters only, in three
    /// groups: traffic that is not DDS (skipped, as expected on a shared link),
    /// submessages not decoded (vendor-specific, unknown), and real problems.
    pub fn summary_line(&self) -> String {
        fn group(items: &[(u64, String)]) -> Vec<String> {
            items.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")).collect()
        }
        let not_dds = group(&[
            (self.non_ip_frames, "non-IP frames".into()),
            (self.non_udp_packets, "non-UDP packets".into()),
            (self.non_rtps_datagrams, "non-RTPS datagrams".into()),
            (self.zenoh.scouting_datagrams, "Zenoh scouting datagrams".into()),
            (self.rtps_other_version, "RTPS datagrams of another major version".into()),
            (self.unsupported_link_frames, "frames of an unsupported link type".into()),
        ]);
        let vendor: u64 = self.vendor_submessages.values().sum();
        let detail: Vec<String> = self.vendor_submessages.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let not_decoded = group(&[
            (vendor, format!("vendor-specific submessages ({})", detail.join(", "))),
            (self.unknown_submessages, "unknown submessages".into()),
        ]);
        let problems = group(&[
            (self.bad_headers, "bad link/IP/UDP headers".into()),
            (self.snapped_datagrams, "datagrams cut by the snap length".into()),
            (self.snapped_submessages, "submessages cut before their fixed fields".into()),
            (self.truncated_submessages, "truncated submessages".into()),
            (self.malformed_submessages, "malformed submessages".into()),
            (self.bad_discovery_samples, "unparsable discovery samples".into()),
            (self.discovery_fragments_dropped, "discovery fragment sets dropped".into()),
            (self.bad_ros_discovery_samples, "malformed ros_discovery_info samples".into()),
            (self.ros_discovery_over_limits, "ros_discovery_info samples over the node/gid caps".into()),
            (self.ip.datagrams_timed_out, "IP datagrams timed out in reassembly".into()),
            (self.ip.datagrams_evicted, "IP datagrams evicted from reassembly".into()),
            (self.ip.datagrams_incomplete_at_end, "IP datagrams incomplete at end of capture".into()),
            (self.ip.oversized_fragments, "oversized IP fragments".into()),
            (self.ip.duplicate_fragments, "duplicate IP fragments".into()),
            (self.ip.overlapping_fragments, "overlapping IP fragments".into()),
            (self.ip.datagrams_too_fragmented, "IP datagrams dropped with too many holes".into()),
        ]);
        let mut problems = problems;
        problems.extend(self.zenoh.problems());
        let mut parts: Vec<String> = vec![];
        for (label, g) in [("not DDS, skipped", not_dds), ("not decoded", not_decoded), ("malformed or cut", problems)] {
            if !g.is_empty() {
                parts.push(format!("{label}: {}", g.join(", ")));
            }
        }
        let line = match (parts.is_empty(), &self.capture_problems) {
            (true, None) => "nothing skipped or malformed".to_string(),
            (true, Some(c)) => format!("nothing else skipped or malformed in the frames read (the capture file: {c})"),
            (false, None) => parts.join("; "),
            (false, Some(c)) => format!("{} (and the capture file: {c})", parts.join("; ")),
        };
        let mut evictions: Vec<String> = self.discovery.eviction_line().into_iter().collect();
        evictions.extend(self.zenoh.evictions());
        let line = if evictions.is_empty() { line } else { format!("{line}; evicted (caps): {}", evictions.join(", ")) };
        let mut cuts: Vec<String> = self.discovery.truncation_line().into_iter().collect();
        if self.zenoh.names_truncated > 0 {
            cuts.push(format!("{} Zenoh names cut at discovery.max_name_bytes (key expressions at twice that; marked …[truncated, N bytes])", self.zenoh.names_truncated));
        }
        if cuts.is_empty() {
            line
        } else {
            format!("{line}; {}", cuts.join("; "))
        }
    }
}

/// One reported problem.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnostic {
    pub frame: u64,
    pub message: String,
}

/// One frame of a UDP datagram as the capture saw it (carried through IP
/// reassembly for each fragment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramFrame {
    pub frame: u64,
    pub ts_ns: i64,
    /// The frame's length on the wire.
    pub wire_len: u32,
    pub interface: u32,
    pub link: LinkType,
    /// The frame's outermost VLAN tag (None: untagged).
    pub vlan: Option<VlanTag>,
}

/// One UDP datagram as the decoder completed it: a whole IP packet, or one
/// put back together from its IP fragments. Every UDP datagram is handed
/// over (RTPS, Zenoh or anything else), before the submessages it carries,
/// with its UDP header not yet checked.
#[derive(Debug, Clone, Copy)]
pub struct Datagram<'a> {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IPv4 identification or IPv6 fragment identification (0 for an
    /// unfragmented IPv6 packet).
    pub ip_id: u32,
    /// The UDP header and payload as captured.
    pub udp: &'a [u8],
    /// Bytes of the datagram the capture does not hold (snap length).
    pub missing: usize,
    /// The frame that completed the datagram (its submessages carry this
    /// frame number) and its capture time.
    pub frame: u64,
    pub ts_ns: i64,
    /// Capture times of its first and last IP fragment (`ts_ns` when whole).
    pub first_ts_ns: i64,
    pub last_ts_ns: i64,
    /// IP fragments it came in (1 when whole; duplicates not counted).
    pub fragments: u16,
    /// Its frames in capture order: the first
    /// [`MAX_LISTED_FRAGMENTS`](crate::ipfrag::MAX_LISTED_FRAGMENTS) of them
    /// (`fragments` counts them all).
    pub frames: &'a [DatagramFrame],
}

/// Where the decoder puts what it completes.
pub trait DecodeSink {
    /// A UDP datagram, before the submessages it carries.
    fn datagram(&mut self, _d: &Datagram<'_>) {}
    /// A submessage (RTPS, or a Zenoh message as a [`SubmsgEvent`]).
    fn event(&mut self, e: &SubmsgEvent);
}

/// A sink of events only.
struct EventsOnly<'a>(&'a mut dyn FnMut(&SubmsgEvent));

impl DecodeSink for EventsOnly<'_> {
    fn event(&mut self, e: &SubmsgEvent) {
        (self.0)(e)
    }
}

/// A discovery sample arriving as DATA_FRAG, put back together. Buffers
/// grow as fragments arrive, so a forged announcement of a large sample
/// costs only what was sent.
struct DiscoveryFrags {
    sample_size: u32,
    /// Bytes from the start of the sample up to the furthest fragment received.
    data: Vec<u8>,
    /// One bit per fragment received.
    have: Vec<u64>,
    missing: usize,
    fragment_size: u16,
}

impl DiscoveryFrags {
    fn bytes(&self) -> usize {
        self.data.capacity() + self.have.capacity() * 8 + std::mem::size_of::<Self>()
    }
}

/// Context that INFO_* submessages set for the rest of the message.
#[derive(Debug, Clone, Copy)]
struct MessageContext {
    src_prefix: GuidPrefix,
    dst_prefix: GuidPrefix,
    vendor_id: u16,
    source_ts_ns: Option<i64>,
}

pub struct Decoder {
    capture: Arc<str>,
    cfg: DecoderConfig,
    ipfrag: Reassembler<DatagramFrame>,
    pub discovery: Discovery,
    /// Touched on every fragment: the least recently active set goes first.
    discovery_frags: BoundedMap<(Guid, i64), DiscoveryFrags>,
    pub stats: DecodeStats,
    pub diagnostics: Vec<Diagnostic>,
    /// Events of the message being decoded (traffic types of INFO_* are fixed up per message).
    msg_events: Vec<SubmsgEvent>,
    /// The last writer and reader looked up in the ROS graph, and the graph
    /// generation the answers belong to: consecutive submessages mostly share them.
    node_cache: NodeCache,
    /// Zenoh sessions (TCP streams, UDP flows) at this capture point.
    pub zenoh: crate::zenoh::ZenohDecoder,
    /// Whether the sink of the frame being decoded takes datagrams.
    datagrams: bool,
}

#[derive(Default)]
struct NodeCache {
    generation: u64,
    writer: Option<(Guid, Option<Arc<RosNode>>)>,
    reader: Option<(Guid, Option<Arc<RosNode>>)>,
}

impl NodeCache {
    fn lookup(slot: &mut Option<(Guid, Option<Arc<RosNode>>)>, graph: &crate::ros_graph::RosGraph, g: Guid) -> Option<Arc<RosNode>> {
        match slot {
            Some((k, n)) if *k == g => n.clone(),
            _ => {
                let n = graph.node_of(&g).cloned();
                *slot = Some((g, n.clone()));
                n
            }
        }
    }
}

impl Decoder {
    pub fn new(capture: &str, cfg: DecoderConfig) -> Self {
        Decoder {
            capture: Arc::from(capture),
            cfg,
            ipfrag: Reassembler::new(cfg.reassembly),
            discovery: Discovery::new(cfg.discovery).with_ros_limits(cfg.ros_graph),
            discovery_frags: BoundedMap::new(cfg.max_discovery_pending).with_max_weight(cfg.max_discovery_bytes),
            stats: DecodeStats::default(),
            diagnostics: Vec::new(),
            msg_events: Vec::with_capacity(64),
            node_cache: NodeCache::default(),
            // One name cap for every protocol: Zenoh's names are cut as SEDP's are.
            zenoh: crate::zenoh::ZenohDecoder::new(crate::zenoh::ZenohLimits { max_name_bytes: cfg.discovery.max_name_bytes, ..cfg.zenoh }),
            datagrams: false,
        }
    }

    pub fn capture_name(&self) -> &Arc<str> {
        &self.capture
    }

    fn diag(&mut self, frame: u64, message: impl FnOnce() -> String) {
        if self.diagnostics.len() < self.cfg.max_diagnostics {
            self.diagnostics.push(Diagnostic { frame, message: message() });
        }
    }

    /// Decodes one captured frame; calls `emit` for every submessage it completes.
    pub fn packet(&mut self, pkt: &Packet<'_>, emit: &mut dyn FnMut(&SubmsgEvent)) {
        self.packet_to(pkt, false, &mut EventsOnly(emit))
    }

    /// Decodes one captured frame into `sink`: every UDP datagram it
    /// completes (when `datagrams`: some analysis takes them), then every
    /// submessage of it.
    pub fn packet_to(&mut self, pkt: &Packet<'_>, datagrams: bool, sink: &mut dyn DecodeSink) {
        self.stats.frames += 1;
        self.datagrams = datagrams;
        if let ddscope_wire::link::LinkType::Other(_) = pkt.link {
            self.stats.unsupported_link_frames += 1;
            return;
        }
        let net = match link::parse(pkt.link, pkt.data) {
            Ok(n) => n,
            Err(e) => {
                self.stats.bad_headers += 1;
                self.diag(pkt.frame, || format!("link layer: {e}"));
                return;
            }
        };
        let parsed = match net.ethertype {
            ETHERTYPE_IPV4 => ip::parse_ipv4(net.payload),
            ETHERTYPE_IPV6 => ip::parse_ipv6(net.payload),
            _ => {
                self.stats.non_ip_frames += 1;
                return;
            }
        };
        let ipp = match parsed {
            Ok(p) => p,
            Err(e) => {
                self.stats.bad_headers += 1;
                self.diag(pkt.frame, || format!("IP header: {e}"));
                return;
            }
        };
        let meta = DatagramFrame {
            frame: pkt.frame,
            ts_ns: pkt.ts_ns,
            wire_len: pkt.orig_len,
            interface: pkt.interface,
            link: pkt.link,
            vlan: net.outer_vlan,
        };
        if ipp.protocol == tcp::PROTO_TCP && !ipp.is_fragment {
            self.tcp(&ipp, pkt, meta, sink);
            return;
        }
        if ipp.protocol != PROTO_UDP {
            self.stats.non_udp_packets += 1;
            return;
        }
        if ipp.is_fragment {
            // A fragment cut by the snap length still counts by its declared
            // length (header-only capture): timing and fragment counts stay exact.
            let key = FragKey { src: ipp.src, dst: ipp.dst, protocol: ipp.protocol, ident: ipp.ident };
            let declared = ipp.payload.len() + ipp.missing;
            if let Some(d) = self.ipfrag.push_declared(
                key,
                ipp.frag_offset,
                ipp.more_fragments,
                ipp.payload,
                declared,
                pkt.ts_ns,
                pkt.frame,
                meta,
            ) {
                self.stats.ip = self.ipfrag.stats;
                let src = ipp.src;
                let dst = ipp.dst;
                let missing = d.total_len as usize - d.data.len();
                self.udp(&d.data, src, dst, ipp.ident, d.fragments, d.first_ts_ns, d.last_ts_ns, pkt, d.meta, &d.frames, missing, sink);
                self.ipfrag.recycle(d.data);
                self.ipfrag.recycle_frames(d.frames);
            }
            self.stats.ip = self.ipfrag.stats;
        } else {
            self.udp(ipp.payload, ipp.src, ipp.dst, ipp.ident, 1, pkt.ts_ns, pkt.ts_ns, pkt, meta, std::slice::from_ref(&meta), ipp.missing, sink);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn udp(
        &mut self,
        datagram: &[u8],
        src: std::net::IpAddr,
        dst: std::net::IpAddr,
        ip_id: u32,
        ip_frags: u16,
        first_ts: i64,
        last_ts: i64,
        pkt: &Packet<'_>,
        meta: DatagramFrame,
        frames: &[DatagramFrame],
        missing: usize,
        sink: &mut dyn DecodeSink,
    ) {
        if self.datagrams {
            sink.datagram(&Datagram {
                src,
                dst,
                ip_id,
                udp: datagram,
                missing,
                frame: pkt.frame,
                ts_ns: pkt.ts_ns,
                first_ts_ns: first_ts,
                last_ts_ns: last_ts,
                fragments: ip_frags,
                frames,
            });
        }
        let (sport, dport, payload) = if missing > 0 {
            // Snapped: take what the capture holds.
            self.stats.snapped_datagrams += 1;
            if datagram.len() < 8 {
                return;
            }
            let sp = u16::from_be_bytes([datagram[0], datagram[1]]);
            let dp = u16::from_be_bytes([datagram[2], datagram[3]]);
            (sp, dp, &datagram[8..])
        } else {
            match udp::parse(datagram) {
                Ok(u) => (u.src_port, u.dst_port, u.payload),
                Err(e) => {
                    self.stats.bad_headers += 1;
                    self.diag(pkt.frame, || format!("UDP header: {e}"));
                    return;
                }
            }
        };
        if !rtps::is_rtps(payload) {
            let (s, d) = (SocketAddr::new(src, sport), SocketAddr::new(dst, dport));
            if !(payload.len() >= 4 && &payload[..4] == rtps::MAGIC)
                && self.zenoh.udp(&self.capture, pkt.frame, first_ts, last_ts, meta.interface, meta.vlan, s, d, payload, missing > 0, &mut |e| sink.event(e))
            {
                self.sync_zenoh();
                return;
            }
            if payload.len() >= 5 && &payload[..4] == rtps::MAGIC {
                self.stats.rtps_other_version += 1;
            } else {
                self.stats.non_rtps_datagrams += 1;
            }
            return;
        }
        let base = {
            let mut e = SubmsgEvent::blank(self.capture.clone());
            e.frame = pkt.frame;
            e.ts_ns = pkt.ts_ns;
            e.interface = meta.interface;
            e.src = SocketAddr::new(src, sport);
            e.dst = SocketAddr::new(dst, dport);
            e.vlan_id = meta.vlan.map(|v| v.vid);
            e.pcp = meta.vlan.map(|v| v.pcp);
            e.ip_id = ip_id;
            e.ip_frags = ip_frags;
            e.ip_first_ts_ns = first_ts;
            e.ip_last_ts_ns = last_ts;
            e.rtps_len = (payload.len() + missing) as u32;
            e
        };
        self.rtps(payload, base, missing > 0, sink);
    }

    /// A TCP segment: Zenoh if its stream is one (by port or by its session
    /// start), else counted with the packets that are not decoded.
    fn tcp(&mut self, ipp: &ip::IpPacket<'_>, pkt: &Packet<'_>, meta: DatagramFrame, sink: &mut dyn DecodeSink) {
        let seg = match tcp::parse(ipp.payload) {
            Ok(s) => s,
            Err(_) if ipp.missing > 0 => {
                self.stats.non_udp_packets += 1;
                return;
            }
            Err(e) => {
                self.stats.bad_headers += 1;
                self.diag(pkt.frame, || format!("TCP header: {e}"));
                return;
            }
        };
        let (s, d) = (SocketAddr::new(ipp.src, seg.src_port), SocketAddr::new(ipp.dst, seg.dst_port));
        if !self.zenoh.tcp(&self.capture, pkt.frame, pkt.ts_ns, meta.interface, meta.vlan, s, d, &seg, ipp.missing, &mut |e| sink.event(e)) {
            self.stats.non_udp_packets += 1;
        }
        self.sync_zenoh();
    }

    /// Copies the Zenoh decoder's counters and problems into the capture's.
    fn sync_zenoh(&mut self) {
        for (frame, msg) in std::mem::take(&mut self.zenoh.problems) {
            self.diag(frame, || msg);
        }
        // rmw_zenoh's publisher and subscription tokens: endpoints and ROS graph entries,
        // as SEDP and ros_discovery_info give them for DDS.
        let endpoints = self.zenoh.take_endpoints();
        if !endpoints.is_empty() {
            for z in endpoints {
                z.record(&mut self.discovery);
            }
            self.stats.discovery = self.discovery.stats();
        }
        self.stats.zenoh.clone_from(&self.zenoh.stats);
    }

    fn rtps(&mut self, msg: &[u8], base: SubmsgEvent, snapped: bool, sink: &mut dyn DecodeSink) {
        let header = match rtps::parse_header(msg) {
            Ok(h) => h,
            Err(e) => {
                self.stats.bad_headers += 1;
                self.diag(base.frame, || format!("RTPS header: {e}"));
                return;
            }
        };
        self.stats.rtps_messages += 1;
        let mut ctx = MessageContext {
            src_prefix: header.guid_prefix,
            dst_prefix: GuidPrefix::UNKNOWN,
            vendor_id: header.vendor_id,
            source_ts_ns: None,
        };
        let frame = base.frame;
        self.msg_events.clear();
        let iter = if snapped { SubmessageIter::new_cut(msg) } else { SubmessageIter::new(msg) };
        for (index, raw) in iter.enumerate() {
            let raw = match raw {
                Ok(r) => r,
                Err(e) => {
                    if !snapped {
                        self.stats.truncated_submessages += 1;
                        self.diag(frame, || format!("submessage {index}: {e}"));
                    }
                    break;
                }
            };
            self.stats.submessages += 1;
            let kind = raw.kind();
            match kind {
                SubmsgKind::Vendor(id) => {
                    *self.stats.vendor_submessages.entry(format!("0x{:04x}/0x{id:02x}", ctx.vendor_id)).or_default() += 1;
                }
                SubmsgKind::Unknown(id) => {
                    self.stats.unknown_submessages += 1;
                    self.diag(frame, || format!("submessage {index}: unknown id 0x{id:02x}"));
                }
                _ => {}
            }
            let sm = match raw.parse() {
                Ok(s) => s,
                Err(_) if raw.is_cut() => {
                    self.stats.snapped_submessages += 1;
                    continue;
                }
                Err(e) => {
                    self.stats.malformed_submessages += 1;
                    self.diag(frame, || format!("submessage {index} ({}): {e}", kind.name()));
                    continue;
                }
            };
            // Built in place: events are a few hundred bytes, copies add up.
            let mut events = std::mem::take(&mut self.msg_events);
            events.push(base.clone());
            let ev = events.last_mut().expect("just pushed");
            ev.vendor_id = ctx.vendor_id;
            ev.submsg_index = index as u16;
            ev.kind = kind;
            ev.flags = raw.flags;
            ev.submsg_len = raw.declared_len as u32;
            self.fill(ev, &sm, &mut ctx, raw.little_endian());
            self.msg_events = events;
        }
        // INFO_* submessages belong to the traffic they qualify: take the type of
        // the next entity-bearing submessage, else of the previous one.
        let has_entity = |e: &SubmsgEvent| e.writer_id.is_some() || e.reader_id.is_some() || e.kind.is_security();
        let mut next: Option<TrafficType> = None;
        for e in self.msg_events.iter_mut().rev() {
            if has_entity(e) {
                next = Some(e.traffic_type);
            } else if let Some(t) = next {
                e.traffic_type = t;
            }
        }
        // Trailing INFO_* (nothing after them): the previous entity's type.
        if let Some(last_entity) = self.msg_events.iter().rposition(has_entity) {
            let t = self.msg_events[last_entity].traffic_type;
            for e in &mut self.msg_events[last_entity + 1..] {
                e.traffic_type = t;
            }
        }
        for e in &self.msg_events {
            sink.event(e);
        }
    }

    fn classify(entity: &EntityId) -> TrafficType {
        if entity.is_discovery() {
            TrafficType::Discovery
        } else if entity.is_security() {
            TrafficType::Security
        } else if entity.is_builtin() || entity.is_vendor_specific() {
            TrafficType::Builtin
        } else {
            TrafficType::User
        }
    }

    fn name_writer(&mut self, ev: &mut SubmsgEvent, writer: Guid) {
        if let Some(ep) = self.discovery.endpoint_in_use(&writer) {
            ev.topic = Some(ep.names.clone());
        }
        let graph = &self.discovery.ros;
        if !graph.is_empty() {
            let c = &mut self.node_cache;
            if c.generation != graph.generation() {
                *c = NodeCache { generation: graph.generation(), writer: None, reader: None };
            }
            ev.writer_node = NodeCache::lookup(&mut c.writer, graph, writer);
            if let Some(r) = ev.reader_id.filter(|r| r.entity != EntityId::UNKNOWN) {
                ev.reader_node = NodeCache::lookup(&mut c.reader, graph, r);
            }
        }
    }

    /// Whether the event's writer publishes the ROS graph (`ros_discovery_info`).
    fn is_ros_discovery(ev: &SubmsgEvent) -> bool {
        ev.topic.as_deref().is_some_and(|t| t.topic_raw == ros_graph::ROS_DISCOVERY_TOPIC)
    }

    /// A complete `ros_discovery_info` sample: update the ROS graph.
    fn ros_discovery_sample(&mut self, ev: &SubmsgEvent, payload: &[u8]) {
        let frame = ev.frame;
        match self.discovery.ros.apply_sample(payload, false) {
            Ok(()) => {}
            Err(e) => {
                match e {
                    RosGraphError::Malformed(_) => self.stats.bad_ros_discovery_samples += 1,
                    RosGraphError::OverLimit(_) => self.stats.ros_discovery_over_limits += 1,
                }
                let w = ev.writer_id;
                self.diag(frame, || match w {
                    Some(w) => format!("ros_discovery_info sample from {w}: {e}"),
                    None => format!("ros_discovery_info sample: {e}"),
                });
            }
        }
        self.stats.discovery = self.discovery.stats();
    }

    fn fill(&mut self, ev: &mut SubmsgEvent, sm: &Submessage<'_>, ctx: &mut MessageContext, le: bool) {
        ev.guid_prefix = ctx.src_prefix;
        ev.source_ts_ns = ctx.source_ts_ns;
        let outgoing = |ctx: &MessageContext, w: EntityId, r: EntityId| {
            (Guid::new(ctx.src_prefix, w), Guid::new(ctx.dst_prefix, r))
        };
        match *sm {
            Submessage::Data(d) => {
                let (w, r) = outgoing(ctx, d.writer_id, d.reader_id);
                ev.writer_id = Some(w);
                ev.reader_id = Some(r);
                ev.traffic_type = Self::classify(&d.writer_id);
                ev.sn = Some(d.writer_sn);
                let psize = d.payload_len as u32;
                ev.payload_size = Some(psize);
                ev.sample_size = Some(psize);
                let mut key_guid = None;
                if let Some(q) = d.inline_qos {
                    let (status, key) = discovery::inline_status(q, le);
                    ev.status_info = status;
                    ev.key_hash = key;
                    key_guid = key.and_then(|k| Guid::from_slice(&k));
                }
                if ev.traffic_type == TrafficType::Discovery {
                    let disposed = ev.status_info.is_some_and(|s| s & (ddscope_wire::plist::STATUS_INFO_DISPOSED | ddscope_wire::plist::STATUS_INFO_UNREGISTERED) != 0);
                    if disposed {
                        if let Some(g) = key_guid {
                            self.discovery.dispose(g);
                            self.announce(ev, Announcement::Disposed(g));
                        }
                    } else if let Some(p) = d.payload {
                        if p.len() < d.payload_len {
                            // Cut by the snap length: the announcement cannot be read.
                            self.stats.bad_discovery_samples += 1;
                        } else if !d.key_flag {
                            self.discovery_sample(ev, d.writer_id, ctx.src_prefix, p, key_guid);
                        }
                    }
                } else {
                    self.name_writer(ev, w);
                    if let (Some(p), false) = (d.payload, d.key_flag) {
                        if Self::is_ros_discovery(ev) {
                            if p.len() < d.payload_len {
                                // Cut by the snap length: the node list cannot be read.
                                self.stats.bad_ros_discovery_samples += 1;
                            } else {
                                self.ros_discovery_sample(ev, p);
                            }
                        } else if ev.topic.is_none()
                            && ev.traffic_type == TrafficType::User
                            && p.len() >= d.payload_len
                            && ros_graph::looks_like_participant_entities(p, &ctx.src_prefix)
                        {
                            // SEDP not captured: recognised by content (the sender's own
                            // GUID comes first). A payload that then does not decode is an
                            // ordinary user sample, not a malformed one.
                            if self.discovery.ros.apply_sample(p, true).is_ok() {
                                self.stats.discovery = self.discovery.stats();
                            }
                        }
                    }
                }
            }
            Submessage::DataFrag(d) => {
                let (w, r) = outgoing(ctx, d.writer_id, d.reader_id);
                ev.writer_id = Some(w);
                ev.reader_id = Some(r);
                ev.traffic_type = Self::classify(&d.writer_id);
                ev.sn = Some(d.writer_sn);
                ev.fragment_starting_num = Some(d.fragment_starting_num);
                ev.frags_in_submsg = Some(d.fragments_in_submessage);
                ev.fragment_size = Some(d.fragment_size);
                ev.sample_size = Some(d.sample_size);
                ev.payload_size = Some(d.payload_len as u32);
                let mut key_guid = None;
                if let Some(q) = d.inline_qos {
                    let (status, key) = discovery::inline_status(q, le);
                    ev.status_info = status;
                    ev.key_hash = key;
                    key_guid = key.and_then(|k| Guid::from_slice(&k));
                }
                if ev.traffic_type == TrafficType::Discovery && !d.key_flag && d.payload.len() < d.payload_len {
                    self.stats.discovery_fragments_dropped += 1;
                } else if ev.traffic_type == TrafficType::Discovery && !d.key_flag {
                    if let Some(sample) = self.discovery_fragment(ev, w, &d) {
                        self.discovery_sample(ev, d.writer_id, ctx.src_prefix, &sample, key_guid);
                    }
                } else if ev.traffic_type != TrafficType::Discovery {
                    self.name_writer(ev, w);
                    if !d.key_flag && Self::is_ros_discovery(ev) {
                        if d.payload.len() < d.payload_len {
                            self.stats.discovery_fragments_dropped += 1;
                        } else if let Some(sample) = self.discovery_fragment(ev, w, &d) {
                            self.ros_discovery_sample(ev, &sample);
                        }
                    }
                }
            }
            Submessage::Heartbeat(h) => {
                let (w, r) = outgoing(ctx, h.writer_id, h.reader_id);
                ev.writer_id = Some(w);
                ev.reader_id = Some(r);
                ev.traffic_type = Self::classify(&h.writer_id);
                ev.hb_first_sn = Some(h.first_sn);
                ev.hb_last_sn = Some(h.last_sn);
                ev.count = Some(h.count);
                ev.final_flag = Some(h.final_flag);
                self.name_writer(ev, w);
            }
            Submessage::HeartbeatFrag(h) => {
                let (w, r) = outgoing(ctx, h.writer_id, h.reader_id);
                ev.writer_id = Some(w);
                ev.reader_id = Some(r);
                ev.traffic_type = Self::classify(&h.writer_id);
                ev.sn = Some(h.writer_sn);
                ev.last_fragment_num = Some(h.last_fragment_num);
                ev.count = Some(h.count);
                self.name_writer(ev, w);
            }
            Submessage::Gap(g) => {
                let (w, r) = outgoing(ctx, g.writer_id, g.reader_id);
                ev.writer_id = Some(w);
                ev.reader_id = Some(r);
                ev.traffic_type = Self::classify(&g.writer_id);
                ev.gap_start = Some(g.gap_start);
                ev.set_base = Some(g.gap_list.base);
                ev.set_num_bits = Some(g.gap_list.num_bits);
                ev.set_bits = bits_of(&g.gap_list);
                self.name_writer(ev, w);
            }
            Submessage::AckNack(a) => {
                // Sent by the reader: the source participant owns the reader.
                let r = Guid::new(ctx.src_prefix, a.reader_id);
                let w = Guid::new(ctx.dst_prefix, a.writer_id);
                ev.writer_id = Some(w);
                ev.reader_id = Some(r);
                ev.traffic_type = Self::classify(&a.writer_id);
                ev.set_base = Some(a.reader_sn_state.base);
                ev.set_num_bits = Some(a.reader_sn_state.num_bits);
                ev.set_bits = bits_of(&a.reader_sn_state);
                ev.count = Some(a.count);
                ev.final_flag = Some(a.final_flag);
                self.name_writer(ev, w);
            }
            Submessage::NackFrag(n) => {
                let r = Guid::new(ctx.src_prefix, n.reader_id);
                let w = Guid::new(ctx.dst_prefix, n.writer_id);
                ev.writer_id = Some(w);
                ev.reader_id = Some(r);
                ev.traffic_type = Self::classify(&n.writer_id);
                ev.sn = Some(n.writer_sn);
                ev.set_base = Some(n.fragment_number_state.base);
                ev.set_num_bits = Some(n.fragment_number_state.num_bits);
                ev.set_bits = bits_of(&n.fragment_number_state);
                ev.count = Some(n.count);
                self.name_writer(ev, w);
            }
            Submessage::InfoTs(t) => {
                ctx.source_ts_ns = t.map(|t| t.to_unix_nanos());
                ev.source_ts_ns = ctx.source_ts_ns;
            }
            Submessage::InfoSrc { vendor_id, guid_prefix, .. } => {
                ctx.src_prefix = guid_prefix;
                ctx.vendor_id = vendor_id;
                ctx.dst_prefix = GuidPrefix::UNKNOWN;
                ctx.source_ts_ns = None;
                ev.guid_prefix = guid_prefix;
                ev.vendor_id = vendor_id;
            }
            Submessage::InfoDst { guid_prefix } => {
                ctx.dst_prefix = guid_prefix;
            }
            Submessage::Security => ev.traffic_type = TrafficType::Security,
            Submessage::InfoReply { .. } | Submessage::InfoReplyIp4 { .. } | Submessage::Pad | Submessage::Opaque => {}
        }
    }

    fn announce(&mut self, ev: &mut SubmsgEvent, a: Announcement) {
        if let Announcement::Endpoint(e) = a {
            ev.endpoint = Some(e);
        }
    }

    /// A complete SPDP/SEDP sample: update discovery and tag the event.
    fn discovery_sample(
        &mut self,
        ev: &mut SubmsgEvent,
        writer: EntityId,
        src_prefix: GuidPrefix,
        payload: &[u8],
        key: Option<Guid>,
    ) {
        let frame = ev.frame;
        let result = if writer == EntityId::SPDP_PARTICIPANT_WRITER || writer == EntityId::SPDP_PARTICIPANT_SECURE_WRITER {
            discovery::parse_participant(payload, src_prefix, &mut self.discovery.names).map(|p| {
                let prefix = self.discovery.add_participant_at(p, Some(&ev.dst));
                Announcement::Participant(prefix)
            })
        } else if writer == EntityId::SEDP_PUBLICATIONS_WRITER || writer == EntityId::SEDP_PUBLICATIONS_SECURE_WRITER {
            discovery::parse_endpoint(payload, EndpointKind::Writer, key, &mut self.discovery.names).map(|e| {
                let mut e = e;
                e.vendor_id = e.vendor_id.or(Some(ev.vendor_id));
                Announcement::Endpoint(self.discovery.add_endpoint_at(e, Some(&ev.dst)))
            })
        } else if writer == EntityId::SEDP_SUBSCRIPTIONS_WRITER || writer == EntityId::SEDP_SUBSCRIPTIONS_SECURE_WRITER {
            discovery::parse_endpoint(payload, EndpointKind::Reader, key, &mut self.discovery.names).map(|e| {
                let mut e = e;
                e.vendor_id = e.vendor_id.or(Some(ev.vendor_id));
                Announcement::Endpoint(self.discovery.add_endpoint_at(e, Some(&ev.dst)))
            })
        } else {
            // SEDP topics writer and others: nothing we track.
            return;
        };
        self.stats.discovery = self.discovery.stats();
        match result {
            Ok(a) => self.announce(ev, a),
            Err(e) => {
                self.stats.bad_discovery_samples += 1;
                self.diag(frame, || format!("discovery sample from {}: {e}", Guid::new(src_prefix, writer)));
            }
        }
    }

    /// Collects a discovery DATA_FRAG; returns the sample once complete.
    fn discovery_fragment(
        &mut self,
        _ev: &SubmsgEvent,
        writer: Guid,
        d: &ddscope_wire::rtps::DataFrag<'_>,
    ) -> Option<Vec<u8>> {
        let key = (writer, d.writer_sn);
        if d.sample_size > self.cfg.max_discovery_sample || d.fragment_size == 0 {
            self.stats.discovery_fragments_dropped += 1;
            return None;
        }
        let dropped = &mut self.stats.discovery_fragments_dropped;
        let set = self.discovery_frags.get_or_insert_with(
            key,
            || {
                let n = (d.sample_size as usize).div_ceil(d.fragment_size as usize);
                DiscoveryFrags {
                    sample_size: d.sample_size,
                    data: Vec::new(),
                    have: vec![0; n.div_ceil(64)],
                    missing: n,
                    fragment_size: d.fragment_size,
                }
            },
            &mut |_, _| *dropped += 1,
        );
        if set.fragment_size != d.fragment_size || set.sample_size != d.sample_size {
            self.discovery_frags.remove(&key);
            self.stats.discovery_fragments_dropped += 1;
            return None;
        }
        let fsz = d.fragment_size as usize;
        let size = set.sample_size as usize;
        for i in 0..d.fragments_in_submessage as usize {
            // Fragment numbers are 1-based; 0 is malformed and ends the loop.
            let Some(idx) = (d.fragment_starting_num as usize + i).checked_sub(1) else { break };
            if idx * fsz >= size {
                break;
            }
            let start = idx * fsz;
            let end = ((idx + 1) * fsz).min(size);
            let src_start = i * fsz;
            let src_end = src_start + (end - start);
            if src_end > d.payload.len() {
                break;
            }
            if set.data.len() < end {
                set.data.resize(end, 0);
            }
            set.data[start..end].copy_from_slice(&d.payload[src_start..src_end]);
            let (w, b) = (idx / 64, idx % 64);
            if set.have[w] & (1 << b) == 0 {
                set.have[w] |= 1 << b;
                set.missing -= 1;
            }
        }
        if set.missing == 0 {
            return self.discovery_frags.remove(&key).map(|s| s.data);
        }
        let bytes = set.bytes();
        let dropped = &mut self.stats.discovery_fragments_dropped;
        self.discovery_frags.set_weight(&key, bytes, &mut |_, _| *dropped += 1);
        if self.discovery_frags.weight() > self.cfg.max_discovery_bytes {
            // This set alone is over the budget: drop it too.
            self.discovery_frags.remove(&key);
            self.stats.discovery_fragments_dropped += 1;
        }
        None
    }

    /// Ends the capture: counts whatever is still incomplete.
    pub fn finish(&mut self) {
        self.ipfrag.finish();
        self.stats.ip = self.ipfrag.stats;
        self.stats.discovery_fragments_dropped += self.discovery_frags.len() as u64;
        self.discovery_frags.clear();
        self.stats.discovery = self.discovery.stats();
        self.zenoh.finish();
        self.sync_zenoh();
    }
}

fn bits_of(set: &ddscope_wire::rtps::NumberSet<'_>) -> [u32; 8] {
    let mut out = [0u32; 8];
    for i in 0..set.num_bits.min(256) {
        if set.contains_bit(i) {
            out[(i / 32) as usize] |= 1 << (31 - i % 32);
        }
    }
    out
}

impl From<WireError> for Diagnostic {
    fn from(e: WireError) -> Self {
        Diagnostic { frame: 0, message: e.to_string() }
    }
}
