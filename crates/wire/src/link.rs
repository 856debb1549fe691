//! Link layers a capture can carry DDS traffic over, down to the network
//! layer's first byte.

use crate::error::{be16, slice, WireError};

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

/// An IEEE 802.1Q tag (C-tag or, with 802.1ad, S-tag).
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

/// Strips VLAN tags starting at `at` where the EtherType `ethertype` was read.
fn strip_tags<'a>(frame: &'a [u8], mut at: usize, mut ethertype: u16) -> Result<NetworkLayer<'a>, WireError> {
    let mut outer = None;
    let mut inner = None;
    let mut n = 0u8;
    while matches!(ethertype, ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_OLD) {
        if n == MAX_TAGS {
            return Err(WireError::malformed("VLAN tag stack", "more than 8 tags"));
        }
        let tci = be16(frame, at, "VLAN tag")?;
        let tag = VlanTag::from_tci(ethertype, tci);
        match n {
            0 => outer = Some(tag),
            1 => inner = Some(tag),
            _ => {}
        }
        n += 1;
        ethertype = be16(frame, at + 2, "VLAN tag")?;
        at += 4;
    }
    Ok(NetworkLayer { ethertype, outer_vlan: outer, inner_vlan: inner, vlan_tags: n, payload: &frame[at..] })
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
        2 => ETHERTYPE_IPV4,
        10 | 24 | 28 | 30 => ETHERTYPE_IPV6,
        _ => 0,
    }
}

/// Parses the link layer of `frame` and returns the network layer.
pub fn parse(link: LinkType, frame: &[u8]) -> Result<NetworkLayer<'_>, WireError> {
    let plain = |ethertype: u16, at: usize| -> Result<NetworkLayer<'_>, WireError> {
        let payload = frame.get(at..).ok_or(WireError::truncated("link header", at, frame.len()))?;
        Ok(NetworkLayer { ethertype, outer_vlan: None, inner_vlan: None, vlan_tags: 0, payload })
    };
    match link {
        LinkType::Ethernet => {
            let ethertype = be16(frame, 12, "Ethernet header")?;
            strip_tags(frame, 14, ethertype)
        }
        LinkType::LinuxSll => {
            let ethertype = be16(frame, 14, "Linux SLL header")?;
            strip_tags(frame, 16, ethertype)
        }
        LinkType::LinuxSll2 => {
            let ethertype = be16(frame, 0, "Linux SLL2 header")?;
            slice(frame, 0, 20, "Linux SLL2 header")?;
            strip_tags(frame, 20, ethertype)
        }
        LinkType::Null => {
            let b = slice(frame, 0, 4, "NULL/loopback header")?;
            let le = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let be = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            // Host byte order of the capturing machine: the small value is the right one.
            plain(af_to_ethertype(le.min(be)), 4)
        }
        LinkType::Loop => {
            let af = crate::error::be32(frame, 0, "LOOP header")?;
            plain(af_to_ethertype(af), 4)
        }
        LinkType::RawIp => plain(ethertype_from_ip_version(frame)?, 0),
        LinkType::Ipv4 => plain(ETHERTYPE_IPV4, 0),
        LinkType::Ipv6 => plain(ETHERTYPE_IPV6, 0),
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
