//! Builds exact RTPS traffic for tests, fuzz seeds and benchmarks: RTPS
//! messages with any submessage in either byte order, SPDP/SEDP payloads,
//! UDP/IPv4/IPv6 datagrams fragmented at an MTU, Ethernet frames with VLAN
//! tags, and pcapng files. Every byte is written by the emitters of
//! `ddscope-wire`, the same crate whose parsers the decoder uses; this crate
//! adds only the choices (addresses, identities, what traffic to send).
//!
//! A dev/test-support crate: nothing in ddscope's binary depends on it.

pub mod lttng;

use ddscope_wire::ip::{Ipv4Repr, Ipv6FragmentRepr, Ipv6Repr, EXT_FRAGMENT, PROTO_UDP};
use ddscope_wire::link::{emit_ethernet, VlanTag, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_VLAN};
use ddscope_wire::locator::Locator;
use ddscope_wire::plist::ParamListWriter;
use ddscope_wire::rtps::{
    AckNack, Data, DataFrag, Encapsulation, Gap, Header, Heartbeat, HeartbeatFrag, NackFrag, NumberSet, PayloadHeader,
    RawSubmessage, Submessage, Time, FLAG_E, PAD,
};
use ddscope_wire::udp::UdpRepr;
use ddscope_wire::{EntityId, Emit, Guid, GuidPrefix};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// pcapng output (ddscope-core's writer), re-exported for the generators.
pub use ddscope_core::source::{InterfaceOptions, PcapngWriter};

/// Test traffic is built from values the caller chose; a value the wire
/// format cannot carry is a bug in the test, reported with the wire error.
fn must<T>(r: Result<T, ddscope_wire::WireError>) -> T {
    r.unwrap_or_else(|e| panic!("synthetic traffic cannot be emitted: {e}"))
}

/// An RTPS message under construction.
pub struct RtpsBuilder {
    buf: Vec<u8>,
    le: bool,
}

impl RtpsBuilder {
    /// A version 2.3 header; submessages little-endian until told otherwise.
    pub fn new(vendor: u16, prefix: GuidPrefix) -> Self {
        let mut buf = Vec::with_capacity(256);
        must(Header::new(vendor, prefix).emit_vec(&mut buf));
        RtpsBuilder { buf, le: true }
    }

    /// Byte order of the submessages added from now on.
    pub fn little_endian(mut self, le: bool) -> Self {
        self.le = le;
        self
    }

    /// Adds a typed submessage in the builder's byte order.
    pub fn typed(mut self, sm: Submessage<'_>) -> Self {
        must(sm.emit_vec(self.le, &mut self.buf));
        self
    }

    /// Adds a raw submessage (flags get the E bit from the builder's byte order).
    pub fn submessage(mut self, id: u8, flags: u8, body: &[u8]) -> Self {
        let flags = if self.le { flags | FLAG_E } else { flags & !FLAG_E };
        must(RawSubmessage::new(id, flags, body).emit_vec(&mut self.buf));
        self
    }

    pub fn info_ts(self, unix_ns: i64) -> Self {
        self.typed(Submessage::InfoTs(Some(Time::from_unix_nanos(unix_ns))))
    }

    pub fn info_dst(self, prefix: GuidPrefix) -> Self {
        self.typed(Submessage::InfoDst { guid_prefix: prefix })
    }

    pub fn info_src(self, vendor: u16, prefix: GuidPrefix) -> Self {
        self.typed(Submessage::InfoSrc { version: (2, 3), vendor_id: vendor, guid_prefix: prefix })
    }

    /// A PAD submessage with `n` zero bytes of body.
    pub fn pad(self, n: usize) -> Self {
        if n == 0 {
            return self.typed(Submessage::Pad);
        }
        self.submessage(PAD, 0, &vec![0; n])
    }

    /// DATA with an optional inline QoS parameter list (already encoded in
    /// the builder's byte order) and payload.
    pub fn data(self, reader: EntityId, writer: EntityId, sn: i64, inline_qos: Option<&[u8]>, payload: &[u8]) -> Self {
        self.typed(Submessage::Data(Data {
            reader_id: reader,
            writer_id: writer,
            writer_sn: sn,
            inline_qos,
            payload: Some(payload),
            payload_len: payload.len(),
            key_flag: false,
            non_standard_payload: false,
        }))
    }

    #[allow(clippy::too_many_arguments)]
    pub fn data_frag(
        self,
        reader: EntityId,
        writer: EntityId,
        sn: i64,
        start: u32,
        count: u16,
        frag_size: u16,
        sample_size: u32,
        payload: &[u8],
    ) -> Self {
        self.typed(Submessage::DataFrag(DataFrag {
            reader_id: reader,
            writer_id: writer,
            writer_sn: sn,
            fragment_starting_num: start,
            fragments_in_submessage: count,
            fragment_size: frag_size,
            sample_size,
            inline_qos: None,
            payload,
            payload_len: payload.len(),
            key_flag: false,
            non_standard_payload: false,
        }))
    }

    pub fn heartbeat(self, reader: EntityId, writer: EntityId, first: i64, last: i64, count: i32, final_flag: bool) -> Self {
        self.typed(Submessage::Heartbeat(Heartbeat {
            reader_id: reader,
            writer_id: writer,
            first_sn: first,
            last_sn: last,
            count,
            final_flag,
            liveliness_flag: false,
        }))
    }

    pub fn heartbeat_frag(self, reader: EntityId, writer: EntityId, sn: i64, last_frag: u32, count: i32) -> Self {
        self.typed(Submessage::HeartbeatFrag(HeartbeatFrag {
            reader_id: reader,
            writer_id: writer,
            writer_sn: sn,
            last_fragment_num: last_frag,
            count,
        }))
    }

    /// ACKNACK whose readerSNState starts at `base` and has the `missing` bits set.
    pub fn acknack(self, reader: EntityId, writer: EntityId, base: i64, missing: &[i64], count: i32) -> Self {
        let reader_sn_state = must(NumberSet::from_members(base, missing));
        self.typed(Submessage::AckNack(AckNack { reader_id: reader, writer_id: writer, reader_sn_state, count, final_flag: false }))
    }

    pub fn nack_frag(self, reader: EntityId, writer: EntityId, sn: i64, base: u32, missing: &[i64], count: i32) -> Self {
        let fragment_number_state = must(NumberSet::from_members(base as i64, missing));
        self.typed(Submessage::NackFrag(NackFrag { reader_id: reader, writer_id: writer, writer_sn: sn, fragment_number_state, count }))
    }

    pub fn gap(self, reader: EntityId, writer: EntityId, start: i64, list_base: i64, list: &[i64]) -> Self {
        let gap_list = must(NumberSet::from_members(list_base, list));
        self.typed(Submessage::Gap(Gap { reader_id: reader, writer_id: writer, gap_start: start, gap_list }))
    }

    pub fn build(self) -> Vec<u8> {
        self.buf
    }
}

/// PL_CDR_LE payload builder for discovery data.
pub struct ParamListBuilder {
    buf: Vec<u8>,
}

impl Default for ParamListBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl ParamListBuilder {
    pub fn new() -> Self {
        let mut buf = Vec::with_capacity(256);
        must(PayloadHeader { encapsulation: Encapsulation::PlCdrLe, options: 0 }.emit_vec(&mut buf));
        ParamListBuilder { buf }
    }
    fn writer(&mut self) -> ParamListWriter<'_> {
        ParamListWriter::new(&mut self.buf, true)
    }
    pub fn raw(mut self, pid: u16, value: &[u8]) -> Self {
        must(self.writer().raw(pid, value).map(|_| ()));
        self
    }
    pub fn string(mut self, pid: u16, s: &str) -> Self {
        must(self.writer().string(pid, s).map(|_| ()));
        self
    }
    pub fn u32(mut self, pid: u16, v: u32) -> Self {
        must(self.writer().u32(pid, v).map(|_| ()));
        self
    }
    pub fn guid(mut self, pid: u16, g: Guid) -> Self {
        must(self.writer().guid(pid, g).map(|_| ()));
        self
    }
    pub fn udpv4_locator(mut self, pid: u16, addr: [u8; 4], port: u32) -> Self {
        let l = Locator::udpv4(Ipv4Addr::from(addr), port);
        must(self.writer().locator(pid, &l).map(|_| ()));
        self
    }
    pub fn build(mut self) -> Vec<u8> {
        self.writer().finish();
        self.buf
    }
}

/// SEDP publication (or subscription) data for one endpoint.
pub fn sedp_endpoint(guid: Guid, topic: &str, type_name: &str, reliable: bool) -> Vec<u8> {
    use ddscope_wire::plist::*;
    ParamListBuilder::new()
        .guid(PID_ENDPOINT_GUID, guid)
        .string(PID_TOPIC_NAME, topic)
        .string(PID_TYPE_NAME, type_name)
        .raw(PID_RELIABILITY, &[if reliable { 2 } else { 1 }, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
        .build()
}

/// SPDP participant data.
pub fn spdp_participant(prefix: GuidPrefix, vendor: u16, name: &str) -> Vec<u8> {
    use ddscope_wire::plist::*;
    let mut vend = vendor.to_be_bytes().to_vec();
    vend.extend_from_slice(&[0, 0]);
    ParamListBuilder::new()
        .guid(PID_PARTICIPANT_GUID, Guid::new(prefix, EntityId::PARTICIPANT))
        .raw(PID_VENDOR_ID, &vend)
        .raw(PID_PARTICIPANT_LEASE_DURATION, &[20, 0, 0, 0, 0, 0, 0, 0])
        .string(PID_ENTITY_NAME, name)
        .udpv4_locator(PID_DEFAULT_UNICAST_LOCATOR, [10, 0, 0, 1], 7411)
        .build()
}

/// Link-level options of the frames built.
#[derive(Debug, Clone, Copy)]
pub struct FrameOptions {
    /// IP MTU: datagrams larger than this are fragmented.
    pub mtu: usize,
    /// 802.1Q tag (pcp, vid).
    pub vlan: Option<(u8, u16)>,
}

impl Default for FrameOptions {
    fn default() -> Self {
        FrameOptions { mtu: 1500, vlan: None }
    }
}

/// Source and destination MAC addresses of every synthetic frame.
pub const MAC_DST: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
pub const MAC_SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];

/// An Ethernet frame (one 802.1Q tag when `opts.vlan` is set) padded to the
/// 60-byte minimum.
fn ethernet(opts: &FrameOptions, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(18 + payload.len().max(46));
    let tags: &[VlanTag] = &match opts.vlan {
        Some((pcp, vid)) => vec![VlanTag { tpid: ETHERTYPE_VLAN, pcp, dei: false, vid }],
        None => vec![],
    };
    must(emit_ethernet(&mut f, MAC_DST, MAC_SRC, tags, ethertype));
    f.extend_from_slice(payload);
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

/// Ethernet frames carrying one UDP datagram (IP-fragmented at the MTU). The
/// UDP checksum is left at 0 (not computed); the IPv4 header checksum is set.
pub fn udp_frames(src: SocketAddr, dst: SocketAddr, ident: u32, payload: &[u8], opts: &FrameOptions) -> Vec<Vec<u8>> {
    let mut udp = Vec::with_capacity(payload.len() + UdpRepr::LEN);
    must(UdpRepr { src_port: src.port(), dst_port: dst.port(), payload_len: u16::try_from(payload.len()).unwrap_or(u16::MAX) }.emit_vec(&mut udp));
    udp.extend_from_slice(payload);
    let mut frames = vec![];
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let max = (opts.mtu - Ipv4Repr::LEN) / 8 * 8;
            let mut off = 0;
            loop {
                let end = (off + max).min(udp.len());
                let more = end < udp.len();
                let ip = Ipv4Repr {
                    src: s,
                    dst: d,
                    protocol: PROTO_UDP,
                    ident: ident as u16,
                    dont_fragment: false,
                    more_fragments: more,
                    frag_offset: off as u16,
                    ttl: 64,
                    dscp_ecn: 0,
                    payload_len: (end - off) as u16,
                };
                let mut h = Vec::with_capacity(Ipv4Repr::LEN + end - off);
                must(ip.emit_vec(&mut h));
                h.extend_from_slice(&udp[off..end]);
                frames.push(ethernet(opts, ETHERTYPE_IPV4, &h));
                if !more {
                    break;
                }
                off = end;
            }
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let whole = Ipv6Repr::LEN + udp.len() <= opts.mtu;
            let max = (opts.mtu - Ipv6Repr::LEN - Ipv6FragmentRepr::LEN) / 8 * 8;
            let mut off = 0;
            loop {
                let end = if whole { udp.len() } else { (off + max).min(udp.len()) };
                let more = end < udp.len();
                let ext = if whole { 0 } else { Ipv6FragmentRepr::LEN };
                let ip = Ipv6Repr {
                    src: s,
                    dst: d,
                    next_header: if whole { PROTO_UDP } else { EXT_FRAGMENT },
                    hop_limit: 64,
                    traffic_class: 0,
                    flow_label: 0,
                    payload_len: (end - off + ext) as u16,
                };
                let mut h = Vec::with_capacity(Ipv6Repr::LEN + ext + end - off);
                must(ip.emit_vec(&mut h));
                if !whole {
                    let frag = Ipv6FragmentRepr { next_header: PROTO_UDP, frag_offset: off as u16, more_fragments: more, ident };
                    must(frag.emit_vec(&mut h));
                }
                h.extend_from_slice(&udp[off..end]);
                frames.push(ethernet(opts, ETHERTYPE_IPV6, &h));
                if !more {
                    break;
                }
                off = end;
            }
        }
        _ => panic!("source and destination must be the same IP version"),
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragmentation_sizes() {
        let src: SocketAddr = "10.0.0.1:7410".parse().unwrap();
        let dst: SocketAddr = "10.0.0.2:7411".parse().unwrap();
        let f = udp_frames(src, dst, 1, &vec![0; 65000], &FrameOptions::default());
        // 65008 bytes of UDP in 1480-byte pieces: 44 fragments.
        assert_eq!(f.len(), 44);
        let f = udp_frames(src, dst, 1, &[0; 100], &FrameOptions::default());
        assert_eq!(f.len(), 1);
    }
}
/// The participants, endpoints and frames of [`feature_frames`], for assertions.
pub mod feature {
    use super::*;
    pub const VENDOR_A: u16 = 0x0110;
    pub const VENDOR_B: u16 = 0x010f;
    pub const PREFIX_A: GuidPrefix = GuidPrefix([0x01, 0x10, 0xaa, 0xaa, 1, 2, 3, 4, 5, 6, 7, 8]);
    pub const PREFIX_B: GuidPrefix = GuidPrefix([0x01, 0x0f, 0xbb, 0xbb, 1, 2, 3, 4, 5, 6, 7, 8]);
    pub const PREFIX_C: GuidPrefix = GuidPrefix([0x01, 0x0f, 0xcc, 0xcc, 1, 2, 3, 4, 5, 6, 7, 8]);
    pub const IMAGE_WRITER: EntityId = EntityId([0, 0, 0x12, 0x03]);
    pub const DRIVE_WRITER: EntityId = EntityId([0, 0, 0x13, 0x03]);
    pub const IMAGE_READER: EntityId = EntityId([0, 0, 0x14, 0x04]);
    pub const BIG_SEDP_WRITER: EntityId = EntityId([0, 0, 0x15, 0x03]);
    pub const IMAGE_SAMPLE: u32 = 100_000;
    pub const IMAGE_FRAG: u16 = 1344;
    pub const T0: i64 = 1_700_000_000_000_000_000;
}

/// Frames exercising every decoder feature; timestamps start at `feature::T0`
/// and advance by 10 µs per frame.
pub fn feature_frames() -> Vec<(i64, Vec<u8>)> {
    use feature::*;
    let a: SocketAddr = "10.0.0.1:7410".parse().expect("addr");
    let b: SocketAddr = "10.0.0.2:7411".parse().expect("addr");
    let mc: SocketAddr = "239.255.0.1:7400".parse().expect("addr");
    let a6: SocketAddr = "[fd00::1]:7412".parse().expect("addr");
    let b6: SocketAddr = "[fd00::2]:7413".parse().expect("addr");
    let plain = FrameOptions::default();
    let vlan = FrameOptions { mtu: 1500, vlan: Some((5, 30)) };
    let mut datagrams: Vec<(SocketAddr, SocketAddr, FrameOptions, Vec<u8>)> = vec![];

    // SPDP of A (LE) and B (LE).
    for (p, v, n) in [(PREFIX_A, VENDOR_A, "pc1"), (PREFIX_B, VENDOR_B, "pc2")] {
        let m = RtpsBuilder::new(v, p)
            .info_ts(T0)
            .data(EntityId::SPDP_PARTICIPANT_READER, EntityId::SPDP_PARTICIPANT_WRITER, 1, None, &spdp_participant(p, v, n))
            .build();
        datagrams.push((a, mc, plain, m));
    }
    // SEDP: A announces two writers (LE), B announces a reader (big-endian submessage).
    let m = RtpsBuilder::new(VENDOR_A, PREFIX_A)
        .info_dst(PREFIX_B)
        .data(
            EntityId::SEDP_PUBLICATIONS_READER,
            EntityId::SEDP_PUBLICATIONS_WRITER,
            1,
            None,
            &sedp_endpoint(Guid::new(PREFIX_A, IMAGE_WRITER), "rt/image", "sensor_msgs::msg::dds_::Image_", true),
        )
        .data(
            EntityId::SEDP_PUBLICATIONS_READER,
            EntityId::SEDP_PUBLICATIONS_WRITER,
            2,
            None,
            &sedp_endpoint(Guid::new(PREFIX_A, DRIVE_WRITER), "rt/drive", "autoware_auto_vehicle_msgs::msg::dds_::VelocityReport_", false),
        )
        .build();
    datagrams.push((a, b, plain, m));
    let m = RtpsBuilder::new(VENDOR_B, PREFIX_B)
        .little_endian(false)
        .data(
            EntityId::SEDP_SUBSCRIPTIONS_READER,
            EntityId::SEDP_SUBSCRIPTIONS_WRITER,
            1,
            None,
            &sedp_endpoint(Guid::new(PREFIX_B, IMAGE_READER), "rt/image", "sensor_msgs::msg::dds_::Image_", true),
        )
        .build();
    datagrams.push((b, a, plain, m));
    // An SEDP publication that arrives as two DATA_FRAGs (big-endian), with a long type name.
    let long_type = format!("pkg::msg::dds_::{}_", "VeryLong".repeat(40));
    let sedp = sedp_endpoint(Guid::new(PREFIX_A, BIG_SEDP_WRITER), "rt/long", &long_type, true);
    let half = 256u16;
    let total = sedp.len() as u32;
    let m1 = RtpsBuilder::new(VENDOR_A, PREFIX_A)
        .little_endian(false)
        .data_frag(EntityId::SEDP_PUBLICATIONS_READER, EntityId::SEDP_PUBLICATIONS_WRITER, 3, 1, 1, half, total, &sedp[..half as usize])
        .build();
    let rest = (total as usize - half as usize).min(half as usize);
    let m2 = RtpsBuilder::new(VENDOR_A, PREFIX_A)
        .little_endian(false)
        .data_frag(
            EntityId::SEDP_PUBLICATIONS_READER,
            EntityId::SEDP_PUBLICATIONS_WRITER,
            3,
            2,
            1,
            half,
            total,
            &sedp[half as usize..half as usize + rest],
        )
        .build();
    datagrams.push((a, b, plain, m1));
    datagrams.push((a, b, plain, m2));

    // User DATA (big-endian), drive at 36 bytes, with INFO_TS and PCP 5.
    for sn in 1..=3i64 {
        let m = RtpsBuilder::new(VENDOR_A, PREFIX_A)
            .little_endian(false)
            .info_ts(T0 + sn * 1000)
            .data(EntityId::UNKNOWN, DRIVE_WRITER, sn, None, &[0u8; 36])
            .build();
        datagrams.push((a, b, vlan, m));
    }
    // A 100 000-byte image sample as DATA_FRAGs, 10 per datagram (IP-fragmented), VLAN PCP 5.
    let nfrags = IMAGE_SAMPLE.div_ceil(IMAGE_FRAG as u32);
    let mut start = 1u32;
    while start <= nfrags {
        let count = 10.min(nfrags - start + 1) as u16;
        let first = (start - 1) as usize * IMAGE_FRAG as usize;
        let last = ((start - 1 + count as u32) as usize * IMAGE_FRAG as usize).min(IMAGE_SAMPLE as usize);
        let payload = vec![0x5a; last - first];
        let m = RtpsBuilder::new(VENDOR_A, PREFIX_A)
            .info_dst(PREFIX_B)
            .data_frag(IMAGE_READER, IMAGE_WRITER, 1, start, count, IMAGE_FRAG, IMAGE_SAMPLE, &payload)
            .heartbeat_frag(IMAGE_READER, IMAGE_WRITER, 1, start + count as u32 - 1, start as i32)
            .build();
        datagrams.push((a, b, vlan, m));
        start += count as u32;
    }
    // Retransmission of fragments 11..20 of the image (repair).
    let m = RtpsBuilder::new(VENDOR_A, PREFIX_A)
        .data_frag(IMAGE_READER, IMAGE_WRITER, 1, 11, 10, IMAGE_FRAG, IMAGE_SAMPLE, &vec![0x5a; 10 * IMAGE_FRAG as usize])
        .build();
    datagrams.push((a, b, vlan, m));
    // Reliability traffic: HEARTBEAT, ACKNACK and NACK_FRAG from B (reader side), GAP, PAD.
    let m = RtpsBuilder::new(VENDOR_A, PREFIX_A)
        .heartbeat(IMAGE_READER, IMAGE_WRITER, 1, 1, 7, true)
        .gap(IMAGE_READER, DRIVE_WRITER, 4, 6, &[7, 9])
        .pad(8)
        .build();
    datagrams.push((a, b, plain, m));
    let m = RtpsBuilder::new(VENDOR_B, PREFIX_B)
        .info_dst(PREFIX_A)
        .acknack(IMAGE_READER, IMAGE_WRITER, 2, &[2, 4], 3)
        .nack_frag(IMAGE_READER, IMAGE_WRITER, 1, 11, &[11, 12, 20], 1)
        .build();
    datagrams.push((b, a, plain, m));
    // INFO_SRC: a relay speaks for participant C in the middle of a message.
    let m = RtpsBuilder::new(VENDOR_B, PREFIX_B)
        .heartbeat(EntityId::UNKNOWN, EntityId::SEDP_SUBSCRIPTIONS_WRITER, 1, 1, 9, false)
        .info_src(VENDOR_B, PREFIX_C)
        .data(EntityId::UNKNOWN, DRIVE_WRITER, 1, None, &[1u8; 12])
        .build();
    datagrams.push((b, a, plain, m));
    // Dispose of the drive writer's SEDP entry (inline QoS: key hash + status info).
    let key = Guid::new(PREFIX_A, DRIVE_WRITER).to_bytes();
    let mut qos = vec![0x70, 0x00, 16, 0];
    qos.extend_from_slice(&key);
    qos.extend_from_slice(&[0x71, 0x00, 4, 0, 0, 0, 0, 3, 0x01, 0x00, 0, 0]);
    let m = RtpsBuilder::new(VENDOR_A, PREFIX_A)
        .data(EntityId::SEDP_PUBLICATIONS_READER, EntityId::SEDP_PUBLICATIONS_WRITER, 4, Some(&qos), &[])
        .build();
    datagrams.push((a, b, plain, m));
    // IPv6: an image-writer DATA of 4000 bytes, fragmented at 1500.
    let m = RtpsBuilder::new(VENDOR_A, PREFIX_A)
        .data(EntityId::UNKNOWN, IMAGE_WRITER, 2, None, &vec![7u8; 4000])
        .build();
    datagrams.push((a6, b6, plain, m));
    // Not RTPS: a UDP datagram with other content, and RTPS version 1.
    datagrams.push((a, b, plain, b"hello, not rtps at all".to_vec()));
    let mut v1 = RtpsBuilder::new(VENDOR_A, PREFIX_A).build();
    v1[4] = 1;
    datagrams.push((a, b, plain, v1));

    let mut frames = vec![];
    let mut ts = T0;
    for (i, (s, d, o, payload)) in datagrams.into_iter().enumerate() {
        for f in udp_frames(s, d, 1000 + i as u32, &payload, &o) {
            frames.push((ts, f));
            ts += 10_000;
        }
    }
    frames
}
