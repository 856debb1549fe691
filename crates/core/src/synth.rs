//! Builds exact RTPS traffic for tests, fuzz seeds and benchmarks: RTPS
//! messages with any submessage in either byte order, SPDP/SEDP payloads,
//! UDP/IPv4/IPv6 datagrams fragmented at an MTU, Ethernet frames with VLAN
//! tags, and pcapng files. Nothing here is used on the decode path.

use ddscope_wire::{EntityId, Guid, GuidPrefix};

use std::net::{IpAddr, SocketAddr};

/// An RTPS message under construction.
pub struct RtpsBuilder {
    buf: Vec<u8>,
    le: bool,
}

fn sn_bytes(sn: i64, le: bool) -> [u8; 8] {
    let (hi, lo) = ((sn >> 32) as i32, sn as u32);
    let mut b = [0u8; 8];
    if le {
        b[..4].copy_from_slice(&hi.to_le_bytes());
        b[4..].copy_from_slice(&lo.to_le_bytes());
    } else {
        b[..4].copy_from_slice(&hi.to_be_bytes());
        b[4..].copy_from_slice(&lo.to_be_bytes());
    }
    b
}

impl RtpsBuilder {
    pub fn new(vendor: u16, prefix: GuidPrefix) -> Self {
        let mut buf = b"RTPS".to_vec();
        buf.extend_from_slice(&[2, 3]);
        buf.extend_from_slice(&vendor.to_be_bytes());
        buf.extend_from_slice(&prefix.0);
        RtpsBuilder { buf, le: true }
    }

    /// Byte order of the submessages added from now on.
    pub fn little_endian(mut self, le: bool) -> Self {
        self.le = le;
        self
    }

    fn u16b(&self, v: u16) -> [u8; 2] {
        if self.le {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        }
    }
    fn u32b(&self, v: u32) -> [u8; 4] {
        if self.le {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        }
    }

    /// Adds a raw submessage (flags get the E bit from the builder's byte order).
    pub fn submessage(mut self, id: u8, flags: u8, body: &[u8]) -> Self {
        let flags = if self.le { flags | 1 } else { flags & !1 };
        self.buf.push(id);
        self.buf.push(flags);
        let len = self.u16b(body.len() as u16);
        self.buf.extend_from_slice(&len);
        self.buf.extend_from_slice(body);
        self
    }

    pub fn info_ts(self, unix_ns: i64) -> Self {
        let secs = (unix_ns / 1_000_000_000) as u32;
        let frac = (((unix_ns % 1_000_000_000) as u64) << 32) / 1_000_000_000;
        let mut b = self.u32b(secs).to_vec();
        b.extend_from_slice(&self.u32b(frac as u32));
        self.submessage(0x09, 0, &b)
    }

    pub fn info_dst(self, prefix: GuidPrefix) -> Self {
        self.submessage(0x0e, 0, &prefix.0)
    }

    pub fn info_src(self, vendor: u16, prefix: GuidPrefix) -> Self {
        let mut b = vec![0, 0, 0, 0, 2, 3];
        b.extend_from_slice(&vendor.to_be_bytes());
        b.extend_from_slice(&prefix.0);
        self.submessage(0x0c, 0, &b)
    }

    pub fn pad(self, n: usize) -> Self {
        self.submessage(0x01, 0, &vec![0; n])
    }

    /// DATA with an optional inline QoS parameter list (already encoded) and payload.
    pub fn data(self, reader: EntityId, writer: EntityId, sn: i64, inline_qos: Option<&[u8]>, payload: &[u8]) -> Self {
        let mut b = vec![0, 0];
        b.extend_from_slice(&self.u16b(16));
        b.extend_from_slice(&reader.0);
        b.extend_from_slice(&writer.0);
        b.extend_from_slice(&sn_bytes(sn, self.le));
        let mut flags = 0x04;
        if let Some(q) = inline_qos {
            b.extend_from_slice(q);
            flags |= 0x02;
        }
        b.extend_from_slice(payload);
        self.submessage(0x15, flags, &b)
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
        let mut b = vec![0, 0];
        b.extend_from_slice(&self.u16b(28));
        b.extend_from_slice(&reader.0);
        b.extend_from_slice(&writer.0);
        b.extend_from_slice(&sn_bytes(sn, self.le));
        b.extend_from_slice(&self.u32b(start));
        b.extend_from_slice(&self.u16b(count));
        b.extend_from_slice(&self.u16b(frag_size));
        b.extend_from_slice(&self.u32b(sample_size));
        b.extend_from_slice(payload);
        self.submessage(0x16, 0, &b)
    }

    pub fn heartbeat(self, reader: EntityId, writer: EntityId, first: i64, last: i64, count: i32, final_flag: bool) -> Self {
        let mut b = reader.0.to_vec();
        b.extend_from_slice(&writer.0);
        b.extend_from_slice(&sn_bytes(first, self.le));
        b.extend_from_slice(&sn_bytes(last, self.le));
        b.extend_from_slice(&self.u32b(count as u32));
        self.submessage(0x07, if final_flag { 2 } else { 0 }, &b)
    }

    pub fn heartbeat_frag(self, reader: EntityId, writer: EntityId, sn: i64, last_frag: u32, count: i32) -> Self {
        let mut b = reader.0.to_vec();
        b.extend_from_slice(&writer.0);
        b.extend_from_slice(&sn_bytes(sn, self.le));
        b.extend_from_slice(&self.u32b(last_frag));
        b.extend_from_slice(&self.u32b(count as u32));
        self.submessage(0x13, 0, &b)
    }

    fn set(&self, base: i64, seq: bool, members: &[i64]) -> Vec<u8> {
        let num_bits = members.iter().map(|m| (m - base + 1) as u32).max().unwrap_or(0);
        let words = num_bits.div_ceil(32) as usize;
        let mut bm = vec![0u32; words];
        for m in members {
            let i = (m - base) as usize;
            bm[i / 32] |= 1 << (31 - i % 32);
        }
        let mut b = if seq { sn_bytes(base, self.le).to_vec() } else { self.u32b(base as u32).to_vec() };
        b.extend_from_slice(&self.u32b(num_bits));
        for w in bm {
            b.extend_from_slice(&self.u32b(w));
        }
        b
    }

    pub fn acknack(self, reader: EntityId, writer: EntityId, base: i64, missing: &[i64], count: i32) -> Self {
        let mut b = reader.0.to_vec();
        b.extend_from_slice(&writer.0);
        b.extend(self.set(base, true, missing));
        b.extend_from_slice(&self.u32b(count as u32));
        self.submessage(0x06, 0, &b)
    }

    pub fn nack_frag(self, reader: EntityId, writer: EntityId, sn: i64, base: u32, missing: &[i64], count: i32) -> Self {
        let mut b = reader.0.to_vec();
        b.extend_from_slice(&writer.0);
        b.extend_from_slice(&sn_bytes(sn, self.le));
        b.extend(self.set(base as i64, false, missing));
        b.extend_from_slice(&self.u32b(count as u32));
        self.submessage(0x12, 0, &b)
    }

    pub fn gap(self, reader: EntityId, writer: EntityId, start: i64, list_base: i64, list: &[i64]) -> Self {
        let mut b = reader.0.to_vec();
        b.extend_from_slice(&writer.0);
        b.extend_from_slice(&sn_bytes(start, self.le));
        b.extend(self.set(list_base, true, list));
        self.submessage(0x08, 0, &b)
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
        ParamListBuilder { buf: vec![0x00, 0x03, 0x00, 0x00] }
    }
    pub fn raw(mut self, pid: u16, value: &[u8]) -> Self {
        let padded = value.len().div_ceil(4) * 4;
        self.buf.extend_from_slice(&pid.to_le_bytes());
        self.buf.extend_from_slice(&(padded as u16).to_le_bytes());
        self.buf.extend_from_slice(value);
        self.buf.resize(self.buf.len() + padded - value.len(), 0);
        self
    }
    pub fn string(self, pid: u16, s: &str) -> Self {
        let mut v = ((s.len() + 1) as u32).to_le_bytes().to_vec();
        v.extend_from_slice(s.as_bytes());
        v.push(0);
        self.raw(pid, &v)
    }
    pub fn u32(self, pid: u16, v: u32) -> Self {
        self.raw(pid, &v.to_le_bytes())
    }
    pub fn guid(self, pid: u16, g: Guid) -> Self {
        self.raw(pid, &g.to_bytes())
    }
    pub fn udpv4_locator(self, pid: u16, addr: [u8; 4], port: u32) -> Self {
        let mut v = 1i32.to_le_bytes().to_vec();
        v.extend_from_slice(&port.to_le_bytes());
        v.extend_from_slice(&[0; 12]);
        v.extend_from_slice(&addr);
        self.raw(pid, &v)
    }
    pub fn build(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(&[0x01, 0x00, 0x00, 0x00]);
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

fn ethernet(opts: &FrameOptions, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    if let Some((pcp, vid)) = opts.vlan {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&(((pcp as u16) << 13) | (vid & 0x0fff)).to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    while f.len() < 60 {
        f.push(0);
    }
    f
}

fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in h.chunks(2) {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Ethernet frames carrying one UDP datagram (IP-fragmented at the MTU).
pub fn udp_frames(src: SocketAddr, dst: SocketAddr, ident: u32, payload: &[u8], opts: &FrameOptions) -> Vec<Vec<u8>> {
    let mut udp = Vec::with_capacity(payload.len() + 8);
    udp.extend_from_slice(&src.port().to_be_bytes());
    udp.extend_from_slice(&dst.port().to_be_bytes());
    udp.extend_from_slice(&((payload.len() + 8) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let mut frames = vec![];
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let max = (opts.mtu - 20) / 8 * 8;
            let mut off = 0;
            loop {
                let end = (off + max).min(udp.len());
                let more = end < udp.len();
                let mut h = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0];
                h[2..4].copy_from_slice(&((20 + end - off) as u16).to_be_bytes());
                h[4..6].copy_from_slice(&(ident as u16).to_be_bytes());
                let ff = ((off / 8) as u16) | if more { 0x2000 } else { 0 };
                h[6..8].copy_from_slice(&ff.to_be_bytes());
                h.extend_from_slice(&s.octets());
                h.extend_from_slice(&d.octets());
                let c = ipv4_checksum(&h);
                h[10..12].copy_from_slice(&c.to_be_bytes());
                h.extend_from_slice(&udp[off..end]);
                frames.push(ethernet(opts, 0x0800, &h));
                if !more {
                    break;
                }
                off = end;
            }
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let whole = 40 + udp.len() <= opts.mtu;
            let max = (opts.mtu - 48) / 8 * 8;
            let mut off = 0;
            loop {
                let end = if whole { udp.len() } else { (off + max).min(udp.len()) };
                let more = end < udp.len();
                let mut h = vec![0x60, 0, 0, 0, 0, 0, if whole { 17 } else { 44 }, 64];
                let plen = end - off + if whole { 0 } else { 8 };
                h[4..6].copy_from_slice(&(plen as u16).to_be_bytes());
                h.extend_from_slice(&s.octets());
                h.extend_from_slice(&d.octets());
                if !whole {
                    h.extend_from_slice(&[17, 0]);
                    h.extend_from_slice(&((off as u16) | more as u16).to_be_bytes());
                    h.extend_from_slice(&ident.to_be_bytes());
                }
                h.extend_from_slice(&udp[off..end]);
                frames.push(ethernet(opts, 0x86dd, &h));
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

/// pcapng output, re-exported for the generators.
pub use crate::source::{InterfaceOptions, PcapngWriter};

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
