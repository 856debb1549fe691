//! Link layers a capture can carry DDS traffic over, down to the network
//! layer's first byte.

use crate::emit::Emit;
use crate::error::{slice, slice_mut, WireError};

/// Link-layer header types (pcap `LINKTYPE_*` values) that ddscope decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkType {
    /// LINKTYPE_ETHERNET (1).
    Ethernet,
    /// LINKTYPE_NULL (0): 4-byte address family in the capturing host's byte order.
    Null,
    /// LINKTYPE_LOOP (108): 4-byte address family in network byte order.
    Loop,
    /// LINKTYPE_RAW (101, and DLT_RAW 12/14 on some systems): IPv4 or IPv6 by version nibble.
    RawIp,
    /// LINKTYPE_IPV4 (228).
    Ipv4,
    /// LINKTYPE_IPV6 (229).
    Ipv6,
    /// LINKTYPE_LINUX_SLL (113): Linux "cooked" capture, v1.
    LinuxSll,
    /// LINKTYPE_LINUX_SLL2 (276): Linux "cooked" capture, v2 (`tcpdump -i any`).
    LinuxSll2,
    /// Anything else; frames are counted and skipped.
    Other(u32),
}

impl LinkType {
    pub fn from_linktype(v: u32) -> LinkType {
        match v {
            0 => LinkType::Null,
            1 => LinkType::Ethernet,
            12 | 14 | 101 => LinkType::RawIp,
            108 => LinkType::Loop,
            113 => LinkType::LinuxSll,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            276 => LinkType::LinuxSll2,
            other => LinkType::Other(other),
        }
    }
    pub fn linktype(&self) -> u32 {
        match self {
            LinkType::Null => 0,
            LinkType::Ethernet => 1,
            LinkType::RawIp => 101,
            LinkType::Loop => 108,
            LinkType::LinuxSll => 113,
            LinkType::Ipv4 => 228,
            LinkType::Ipv6 => 229,
            LinkType::LinuxSll2 => 276,
            LinkType::Other(v) => *v,
        }
    }
}

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
pub const ETHERTYPE_VLAN: u16 = 0x8100;
pub const ETHERTYPE_QINQ: u16 = 0x88a8;
pub const ETHERTYPE_QINQ_OLD: u16 = 0x9100;

/// An IEEE 802.1Q tag (C-tag or, with 802.1ad, S-tag) as the decoder reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag {
    pub tpid: u16,
    /// Priority code point (0–7): the TSN traffic class selector.
    pub pcp: u8,
    pub dei: bool,
    pub vid: u16,
}

impl VlanTag {
    fn from_tci(tpid: u16, tci: u16) -> Self {
        VlanTag { tpid, pcp: (tci >> 13) as u8, dei: tci & 0x1000 != 0, vid: tci & 0x0fff }
    }
    /// The tag control information word (PCP, DEI, VID).
    pub fn tci(&self) -> u16 {
        ((self.pcp as u16 & 7) << 13) | if self.dei { 0x1000 } else { 0 } | (self.vid & 0x0fff)
    }
}

fn mac(b: &[u8]) -> [u8; 6] {
    [b[0], b[1], b[2], b[3], b[4], b[5]]
}

/// Ethernet II header: destination, source, EtherType (14 bytes). With VLAN
/// tags the EtherType is the first tag's TPID and a [`VlanRepr`] follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub ethertype: u16,
}

impl EthernetRepr {
    pub const LEN: usize = 14;

    /// The header and the bytes after it.
    #[inline]
    pub fn parse(frame: &[u8]) -> Result<(EthernetRepr, &[u8]), WireError> {
        let h = slice(frame, 0, Self::LEN, "Ethernet header")?;
        let repr = EthernetRepr { dst: mac(&h[0..6]), src: mac(&h[6..12]), ethertype: u16::from_be_bytes([h[12], h[13]]) };
        Ok((repr, &frame[Self::LEN..]))
    }
}

impl Emit for EthernetRepr {
    fn buffer_len(&self) -> usize {
        Self::LEN
    }
    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = slice_mut(buf, 0, Self::LEN, "Ethernet header")?;
        h[0..6].copy_from_slice(&self.dst);
        h[6..12].copy_from_slice(&self.src);
        h[12..14].copy_from_slice(&self.ethertype.to_be_bytes());
        Ok(Self::LEN)
    }
}

/// The four bytes an IEEE 802.1Q / 802.1ad tag adds after its TPID (which is
/// the EtherType of the header before it): tag control information and the
/// next EtherType.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanRepr {
    /// Priority code point, 0–7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 0–4095.
    pub vid: u16,
    /// EtherType of what follows the tag.
    pub ethertype: u16,
}

impl VlanRepr {
    pub const LEN: usize = 4;

    #[inline]
    pub fn parse(buf: &[u8]) -> Result<(VlanRepr, &[u8]), WireError> {
        let b = slice(buf, 0, Self::LEN, "VLAN tag")?;
        let tag = VlanTag::from_tci(0, u16::from_be_bytes([b[0], b[1]]));
        let repr = VlanRepr { pcp: tag.pcp, dei: tag.dei, vid: tag.vid, ethertype: u16::from_be_bytes([b[2], b[3]]) };
        Ok((repr, &buf[Self::LEN..]))
    }

    /// The decoder's view of this tag, introduced by `tpid`.
    pub fn tag(&self, tpid: u16) -> VlanTag {
        VlanTag { tpid, pcp: self.pcp, dei: self.dei, vid: self.vid }
    }
}

impl Emit for VlanRepr {
    fn buffer_len(&self) -> usize {
        Self::LEN
    }
    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        if self.pcp > 7 {
            return Err(WireError::malformed("VLAN tag", "PCP over 7"));
        }
        if self.vid > 0x0fff {
            return Err(WireError::malformed("VLAN tag", "VID over 4095"));
        }
        let b = slice_mut(buf, 0, Self::LEN, "VLAN tag")?;
        let tci = self.tag(0).tci();
        b[0..2].copy_from_slice(&tci.to_be_bytes());
        b[2..4].copy_from_slice(&self.ethertype.to_be_bytes());
        Ok(Self::LEN)
    }
}

/// Appends an Ethernet header with `tags` (outermost first, each introduced
/// by its own TPID) and the final `ethertype` to `out`.
pub fn emit_ethernet(out: &mut Vec<u8>, dst: [u8; 6], src: [u8; 6], tags: &[VlanTag], ethertype: u16) -> Result<usize, WireError> {
    let at = out.len();
    let first = tags.first().map_or(ethertype, |t| t.tpid);
    let res = (|| {
        EthernetRepr { dst, src, ethertype: first }.emit_vec(out)?;
        for (i, t) in tags.iter().enumerate() {
            let next = tags.get(i + 1).map_or(ethertype, |n| n.tpid);
            VlanRepr { pcp: t.pcp, dei: t.dei, vid: t.vid, ethertype: next }.emit_vec(out)?;
        }
        Ok(out.len() - at)
    })();
    if res.is_err() {
        out.truncate(at);
    }
    res
}

/// Linux "cooked" capture header, version 1 (LINKTYPE_LINUX_SLL, 16 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SllRepr {
    /// 0 to us, 1 broadcast, 2 multicast, 3 to someone else, 4 sent by us.
    pub packet_type: u16,
    /// ARPHRD_ type of the interface (1 = Ethernet, 772 = loopback).
    pub arphrd_type: u16,
    /// Bytes of `addr` that are the link-layer address.
    pub addr_len: u16,
    pub addr: [u8; 8],
    /// EtherType of the payload.
    pub protocol: u16,
}

impl SllRepr {
    pub const LEN: usize = 16;

    #[inline]
    pub fn parse(frame: &[u8]) -> Result<(SllRepr, &[u8]), WireError> {
        let h = slice(frame, 0, Self::LEN, "Linux SLL header")?;
        let be = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
        let mut addr = [0u8; 8];
        addr.copy_from_slice(&h[6..14]);
        Ok((SllRepr { packet_type: be(0), arphrd_type: be(2), addr_len: be(4), addr, protocol: be(14) }, &frame[Self::LEN..]))
    }
}

impl Emit for SllRepr {
    fn buffer_len(&self) -> usize {
        Self::LEN
    }
    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = slice_mut(buf, 0, Self::LEN, "Linux SLL header")?;
        h[0..2].copy_from_slice(&self.packet_type.to_be_bytes());
        h[2..4].copy_from_slice(&self.arphrd_type.to_be_bytes());
        h[4..6].copy_from_slice(&self.addr_len.to_be_bytes());
        h[6..14].copy_from_slice(&self.addr);
        h[14..16].copy_from_slice(&self.protocol.to_be_bytes());
        Ok(Self::LEN)
    }
}

/// Linux "cooked" capture header, version 2 (LINKTYPE_LINUX_SLL2, 20 bytes;
/// what `tcpdump -i any` writes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sll2Repr {
    /// EtherType of the payload.
    pub protocol: u16,
    pub if_index: u32,
    pub arphrd_type: u16,
    pub packet_type: u8,
    pub addr_len: u8,
    pub addr: [u8; 8],
}

impl Sll2Repr {
    pub const LEN: usize = 20;

    #[inline]
    pub fn parse(frame: &[u8]) -> Result<(Sll2Repr, &[u8]), WireError> {
        let h = slice(frame, 0, Self::LEN, "Linux SLL2 header")?;
        let mut addr = [0u8; 8];
        addr.copy_from_slice(&h[12..20]);
        let repr = Sll2Repr {
            protocol: u16::from_be_bytes([h[0], h[1]]),
            if_index: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
            arphrd_type: u16::from_be_bytes([h[8], h[9]]),
            packet_type: h[10],
            addr_len: h[11],
            addr,
        };
        Ok((repr, &frame[Self::LEN..]))
    }
}

impl Emit for Sll2Repr {
    fn buffer_len(&self) -> usize {
        Self::LEN
    }
    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = slice_mut(buf, 0, Self::LEN, "Linux SLL2 header")?;
        h[0..2].copy_from_slice(&self.protocol.to_be_bytes());
        h[2..4].copy_from_slice(&[0, 0]); // reserved
        h[4..8].copy_from_slice(&self.if_index.to_be_bytes());
        h[8..10].copy_from_slice(&self.arphrd_type.to_be_bytes());
        h[10] = self.packet_type;
        h[11] = self.addr_len;
        h[12..20].copy_from_slice(&self.addr);
        Ok(Self::LEN)
    }
}

/// BSD address families the NULL/LOOP link types use.
pub const AF_INET: u32 = 2;
/// AF_INET6 on Linux; BSDs use 24, 28 or 30 (all decoded as IPv6).
pub const AF_INET6_LINUX: u32 = 10;

/// NULL/loopback header (4 bytes): the address family, in the capturing
/// host's byte order for LINKTYPE_NULL and big-endian for LINKTYPE_LOOP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NullRepr {
    pub family: u32,
    pub little_endian: bool,
}

impl NullRepr {
    pub const LEN: usize = 4;

    /// LINKTYPE_NULL: the byte order is not recorded; the smaller reading is
    /// the right one (families are small numbers).
    #[inline]
    pub fn parse(frame: &[u8]) -> Result<(NullRepr, &[u8]), WireError> {
        let b = slice(frame, 0, Self::LEN, "NULL/loopback header")?;
        let le = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let be = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let repr = if le <= be { NullRepr { family: le, little_endian: true } } else { NullRepr { family: be, little_endian: false } };
        Ok((repr, &frame[Self::LEN..]))
    }

    /// LINKTYPE_LOOP: always big-endian.
    #[inline]
    pub fn parse_loop(frame: &[u8]) -> Result<(NullRepr, &[u8]), WireError> {
        let family = crate::error::be32(frame, 0, "LOOP header")?;
        Ok((NullRepr { family, little_endian: false }, &frame[Self::LEN..]))
    }

    /// EtherType equivalent of the family (0 when it is not IP).
    pub fn ethertype(&self) -> u16 {
        af_to_ethertype(self.family)
    }
}

impl Emit for NullRepr {
    fn buffer_len(&self) -> usize {
        Self::LEN
    }
    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let b = slice_mut(buf, 0, Self::LEN, "NULL/loopback header")?;
        b.copy_from_slice(&if self.little_endian { self.family.to_le_bytes() } else { self.family.to_be_bytes() });
        Ok(Self::LEN)
    }
}

/// What is left of a frame after the link layer: the network protocol and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct NetworkLayer<'a> {
    /// EtherType of the payload (0x0800 IPv4, 0x86dd IPv6, or anything else).
    pub ethertype: u16,
    /// Outermost VLAN tag, if any.
    pub outer_vlan: Option<VlanTag>,
    /// Second (inner) VLAN tag with 802.1ad / QinQ.
    pub inner_vlan: Option<VlanTag>,
    /// Number of VLAN tags on the frame (more than two are skipped over).
    pub vlan_tags: u8,
    pub payload: &'a [u8],
}

const MAX_TAGS: u8 = 8;

/// Strips the VLAN tags of `rest`, whose EtherType `ethertype` was just read.
#[inline]
fn strip_tags(mut rest: &[u8], mut ethertype: u16) -> Result<NetworkLayer<'_>, WireError> {
    let mut outer = None;
    let mut inner = None;
    let mut n = 0u8;
    while matches!(ethertype, ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_OLD) {
        if n == MAX_TAGS {
            return Err(WireError::malformed("VLAN tag stack", "more than 8 tags"));
        }
        let (tag, after) = VlanRepr::parse(rest)?;
        match n {
            0 => outer = Some(tag.tag(ethertype)),
            1 => inner = Some(tag.tag(ethertype)),
            _ => {}
        }
        n += 1;
        ethertype = tag.ethertype;
        rest = after;
    }
    Ok(NetworkLayer { ethertype, outer_vlan: outer, inner_vlan: inner, vlan_tags: n, payload: rest })
}

fn ethertype_from_ip_version(payload: &[u8]) -> Result<u16, WireError> {
    let v = slice(payload, 0, 1, "IP version")?[0] >> 4;
    Ok(match v {
        4 => ETHERTYPE_IPV4,
        6 => ETHERTYPE_IPV6,
        _ => 0,
    })
}

/// BSD address families that mean IPv6 on the systems that write NULL/LOOP captures.
fn af_to_ethertype(af: u32) -> u16 {
    match af {
        AF_INET => ETHERTYPE_IPV4,
        10 | 24 | 28 | 30 => ETHERTYPE_IPV6,
        _ => 0,
    }
}

#[inline]
fn plain(ethertype: u16, payload: &[u8]) -> NetworkLayer<'_> {
    NetworkLayer { ethertype, outer_vlan: None, inner_vlan: None, vlan_tags: 0, payload }
}

/// Parses the link layer of `frame` and returns the network layer.
pub fn parse(link: LinkType, frame: &[u8]) -> Result<NetworkLayer<'_>, WireError> {
    match link {
        LinkType::Ethernet => {
            let (eth, rest) = EthernetRepr::parse(frame)?;
            strip_tags(rest, eth.ethertype)
        }
        LinkType::LinuxSll => {
            let (sll, rest) = SllRepr::parse(frame)?;
            strip_tags(rest, sll.protocol)
        }
        LinkType::LinuxSll2 => {
            let (sll, rest) = Sll2Repr::parse(frame)?;
            strip_tags(rest, sll.protocol)
        }
        LinkType::Null => {
            let (null, rest) = NullRepr::parse(frame)?;
            Ok(plain(null.ethertype(), rest))
        }
        LinkType::Loop => {
            let (null, rest) = NullRepr::parse_loop(frame)?;
            Ok(plain(null.ethertype(), rest))
        }
        LinkType::RawIp => Ok(plain(ethertype_from_ip_version(frame)?, frame)),
        LinkType::Ipv4 => Ok(plain(ETHERTYPE_IPV4, frame)),
        LinkType::Ipv6 => Ok(plain(ETHERTYPE_IPV6, frame)),
        LinkType::Other(_) => Err(WireError::malformed("link type", "not decoded by ddscope")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth(tags: &[(u16, u16)], ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        for (tpid, tci) in tags {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn ethernet_with_qinq() {
        let f = eth(&[(ETHERTYPE_QINQ, (3 << 13) | 100), (ETHERTYPE_VLAN, (5 << 13) | 30)], ETHERTYPE_IPV4, &[0x45]);
        let n = parse(LinkType::Ethernet, &f).unwrap();
        assert_eq!(n.ethertype, ETHERTYPE_IPV4);
        assert_eq!(n.vlan_tags, 2);
        assert_eq!(n.outer_vlan.unwrap().pcp, 3);
        assert_eq!(n.outer_vlan.unwrap().vid, 100);
        assert_eq!(n.inner_vlan.unwrap().pcp, 5);
        assert_eq!(n.inner_vlan.unwrap().vid, 30);
        assert_eq!(n.payload, &[0x45]);
    }

    #[test]
    fn truncated_tag_is_an_error() {
        let mut f = eth(&[], ETHERTYPE_VLAN, &[]);
        f.push(0xa0);
        assert!(matches!(parse(LinkType::Ethernet, &f), Err(WireError::Truncated { .. })));
    }

    #[test]
    fn null_both_byte_orders() {
        let le = [2u8, 0, 0, 0, 0x45];
        let be = [0u8, 0, 0, 2, 0x45];
        assert_eq!(parse(LinkType::Null, &le).unwrap().ethertype, ETHERTYPE_IPV4);
        assert_eq!(parse(LinkType::Null, &be).unwrap().ethertype, ETHERTYPE_IPV4);
        let v6 = [30u8, 0, 0, 0, 0x60];
        assert_eq!(parse(LinkType::Null, &v6).unwrap().ethertype, ETHERTYPE_IPV6);
    }

    #[test]
    fn sll_and_sll2() {
        let mut sll = vec![0u8; 14];
        sll.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        sll.push(0x60);
        assert_eq!(parse(LinkType::LinuxSll, &sll).unwrap().ethertype, ETHERTYPE_IPV6);
        let mut sll2 = ETHERTYPE_IPV4.to_be_bytes().to_vec();
        sll2.extend_from_slice(&[0u8; 18]);
        sll2.push(0x45);
        let n = parse(LinkType::LinuxSll2, &sll2).unwrap();
        assert_eq!(n.ethertype, ETHERTYPE_IPV4);
        assert_eq!(n.payload, &[0x45]);
    }

    #[test]
    fn raw_ip_by_version() {
        assert_eq!(parse(LinkType::RawIp, &[0x45]).unwrap().ethertype, ETHERTYPE_IPV4);
        assert_eq!(parse(LinkType::RawIp, &[0x60]).unwrap().ethertype, ETHERTYPE_IPV6);
        assert_eq!(parse(LinkType::RawIp, &[0x10]).unwrap().ethertype, 0);
        assert!(parse(LinkType::RawIp, &[]).is_err());
    }
}
