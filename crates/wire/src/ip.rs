//! IPv4 and IPv6 headers, including the fragment information the
//! reassembly in `ddscope-core` needs.

use crate::checksum;
use crate::emit::Emit;
use crate::error::{be16, slice, slice_mut, WireError};
use crate::link::{self, LinkType, VlanTag, ETHERTYPE_IPV4};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const PROTO_UDP: u8 = 17;

/// An IP packet (or fragment) reduced to what the decoder needs.
#[derive(Debug, Clone, Copy)]
pub struct IpPacket<'a> {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// Upper-layer protocol (after IPv6 extension headers).
    pub protocol: u8,
    /// IPv4 identification or IPv6 fragment-header identification.
    pub ident: u32,
    /// Byte offset of this fragment within the original datagram's payload.
    pub frag_offset: u32,
    /// More-fragments flag.
    pub more_fragments: bool,
    /// True when this packet is one fragment of a larger datagram.
    pub is_fragment: bool,
    /// Upper-layer bytes carried by this packet (the fragment's data).
    pub payload: &'a [u8],
    /// Bytes the header announced that the capture does not hold (snaplen).
    pub missing: usize,
}

/// An IPv4 header (without options) as plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: u8,
    /// Identification (groups the fragments of one datagram).
    pub ident: u16,
    pub dont_fragment: bool,
    pub more_fragments: bool,
    /// Byte offset of this fragment in the datagram; a multiple of 8.
    pub frag_offset: u16,
    pub ttl: u8,
    /// The DSCP and ECN byte (formerly type of service).
    pub dscp_ecn: u8,
    /// Bytes after the header that the total length announces.
    pub payload_len: u16,
}

impl Ipv4Repr {
    /// Header length without options (what `emit` writes).
    pub const LEN: usize = 20;

    /// Parses the header (options are skipped) and returns the payload: the
    /// bytes up to the total length, or fewer when the capture cut the
    /// packet (`payload_len - payload.len()` bytes are missing). Ethernet
    /// padding after the total length is not part of the payload.
    #[inline]
    pub fn parse(buf: &[u8]) -> Result<(Ipv4Repr, &[u8]), WireError> {
        let h = slice(buf, 0, Self::LEN, "IPv4 header")?;
        let b0 = h[0];
        if b0 >> 4 != 4 {
            return Err(WireError::malformed("IPv4 header", "version is not 4"));
        }
        let ihl = ((b0 & 0x0f) as usize) * 4;
        if ihl < Self::LEN {
            return Err(WireError::malformed("IPv4 header", "header length below 20"));
        }
        slice(buf, 0, ihl, "IPv4 options")?;
        let total = be16(buf, 2, "IPv4 total length")? as usize;
        if total < ihl {
            return Err(WireError::malformed("IPv4 total length", "smaller than the header"));
        }
        let ff = u16::from_be_bytes([h[6], h[7]]);
        let repr = Ipv4Repr {
            src: Ipv4Addr::new(h[12], h[13], h[14], h[15]),
            dst: Ipv4Addr::new(h[16], h[17], h[18], h[19]),
            protocol: h[9],
            ident: u16::from_be_bytes([h[4], h[5]]),
            dont_fragment: ff & IPV4_DF != 0,
            more_fragments: ff & IPV4_MF != 0,
            frag_offset: (ff & 0x1fff) << 3,
            ttl: h[8],
            dscp_ecn: h[1],
            payload_len: (total - ihl) as u16,
        };
        let end = total.min(buf.len());
        Ok((repr, &buf[ihl..end.max(ihl)]))
    }

    /// True when the header checksum of the IPv4 header at the start of
    /// `buf` is right (the decoder does not check it: captures taken on the
    /// sending host often carry checksums the NIC fills in later).
    pub fn checksum_ok(buf: &[u8]) -> bool {
        let ihl = buf.first().map_or(0, |b| ((b & 0x0f) as usize) * 4);
        ihl >= Self::LEN && buf.len() >= ihl && checksum::internet(&buf[..ihl]) == 0
    }
}

/// IPv4 flag bits in the flags/fragment-offset word.
pub const IPV4_DF: u16 = 0x4000;
pub const IPV4_MF: u16 = 0x2000;

impl Emit for Ipv4Repr {
    fn buffer_len(&self) -> usize {
        Self::LEN
    }
    /// Writes a 20-byte header with its checksum.
    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        if self.frag_offset % 8 != 0 {
            return Err(WireError::malformed("IPv4 fragment offset", "not a multiple of 8"));
        }
        let total = Self::LEN + self.payload_len as usize;
        if total > u16::MAX as usize {
            return Err(WireError::malformed("IPv4 total length", "over 65535"));
        }
        let h = slice_mut(buf, 0, Self::LEN, "IPv4 header")?;
        h[0] = 0x45;
        h[1] = self.dscp_ecn;
        h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        h[4..6].copy_from_slice(&self.ident.to_be_bytes());
        let ff = (self.frag_offset >> 3)
            | if self.more_fragments { IPV4_MF } else { 0 }
            | if self.dont_fragment { IPV4_DF } else { 0 };
        h[6..8].copy_from_slice(&ff.to_be_bytes());
        h[8] = self.ttl;
        h[9] = self.protocol;
        h[10..12].copy_from_slice(&[0, 0]);
        h[12..16].copy_from_slice(&self.src.octets());
        h[16..20].copy_from_slice(&self.dst.octets());
        let c = checksum::internet(h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        Ok(Self::LEN)
    }
}

/// Parses an IPv4 header. A capture cut short by the snap length is not an
/// error: `missing` says how many payload bytes were not captured.
#[inline]
pub fn parse_ipv4(buf: &[u8]) -> Result<IpPacket<'_>, WireError> {
    let (ip, payload) = Ipv4Repr::parse(buf)?;
    let frag_offset = ip.frag_offset as u32;
    Ok(IpPacket {
        src: IpAddr::V4(ip.src),
        dst: IpAddr::V4(ip.dst),
        protocol: ip.protocol,
        ident: ip.ident as u32,
        frag_offset,
        more_fragments: ip.more_fragments,
        is_fragment: ip.more_fragments || frag_offset != 0,
        payload,
        missing: ip.payload_len as usize - payload.len(),
    })
}

/// The IPv4 packet one captured frame carries, as tools that look at single
/// frames need it (no reassembly): the frame's outermost VLAN tag, the IPv4
/// header and the bytes after it.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4InFrame<'a> {
    /// The frame's outermost 802.1Q / 802.1ad tag (PCP, VID); None: untagged.
    pub outer_vlan: Option<VlanTag>,
    pub header: Ipv4Repr,
    /// Bytes after the header (options skipped) up to the total length, as
    /// far as the capture holds them.
    pub payload: &'a [u8],
}

impl Ipv4InFrame<'_> {
    /// True when the packet is one fragment of a larger datagram.
    pub fn is_fragment(&self) -> bool {
        self.header.more_fragments || self.header.frag_offset != 0
    }

    /// The UDP length field (header and payload of the whole datagram) of a
    /// UDP packet or of a datagram's first fragment, when the capture holds it.
    pub fn udp_len(&self) -> Option<u16> {
        if self.header.protocol != PROTO_UDP || self.header.frag_offset != 0 {
            return None;
        }
        be16(self.payload, 4, "UDP length").ok()
    }
}

/// The IPv4 packet in `frame`, a frame of link type `link`: `Ok(None)` when
/// the frame carries another network protocol, an error when its link or
/// IPv4 header is cut short or invalid.
pub fn ipv4_in_frame(link: LinkType, frame: &[u8]) -> Result<Option<Ipv4InFrame<'_>>, WireError> {
    let net = link::parse(link, frame)?;
    if net.ethertype != ETHERTYPE_IPV4 {
        return Ok(None);
    }
    let (header, payload) = Ipv4Repr::parse(net.payload)?;
    Ok(Some(Ipv4InFrame { outer_vlan: net.outer_vlan, header, payload }))
}

pub const EXT_HOP_BY_HOP: u8 = 0;
pub const EXT_ROUTING: u8 = 43;
pub const EXT_FRAGMENT: u8 = 44;
pub const EXT_DEST_OPTS: u8 = 60;
pub const EXT_MOBILITY: u8 = 135;

/// The fixed 40-byte IPv6 header as plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Repr {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    /// The first extension header or the upper-layer protocol.
    pub next_header: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    /// 20-bit flow label.
    pub flow_label: u32,
    /// Bytes after the fixed header (extension headers included).
    pub payload_len: u16,
}

fn addr16(b: &[u8]) -> [u8; 16] {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[..16]);
    a
}

impl Ipv6Repr {
    pub const LEN: usize = 40;

    /// Parses the fixed header; returns the bytes after it up to the payload
    /// length (fewer when the capture cut the packet).
    #[inline]
    pub fn parse(buf: &[u8]) -> Result<(Ipv6Repr, &[u8]), WireError> {
        let h = slice(buf, 0, Self::LEN, "IPv6 header")?;
        if h[0] >> 4 != 6 {
            return Err(WireError::malformed("IPv6 header", "version is not 6"));
        }
        let w0 = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        let repr = Ipv6Repr {
            src: Ipv6Addr::from(addr16(&h[8..24])),
            dst: Ipv6Addr::from(addr16(&h[24..40])),
            next_header: h[6],
            hop_limit: h[7],
            traffic_class: (w0 >> 20) as u8,
            flow_label: w0 & 0x000f_ffff,
            payload_len: u16::from_be_bytes([h[4], h[5]]),
        };
        let end = (Self::LEN + repr.payload_len as usize).min(buf.len());
        Ok((repr, &buf[Self::LEN..end]))
    }
}

impl Emit for Ipv6Repr {
    fn buffer_len(&self) -> usize {
        Self::LEN
    }
    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        if self.flow_label > 0x000f_ffff {
            return Err(WireError::malformed("IPv6 flow label", "over 20 bits"));
        }
        let h = slice_mut(buf, 0, Self::LEN, "IPv6 header")?;
        let w0 = (6u32 << 28) | ((self.traffic_class as u32) << 20) | self.flow_label;
        h[0..4].copy_from_slice(&w0.to_be_bytes());
        h[4..6].copy_from_slice(&self.payload_len.to_be_bytes());
        h[6] = self.next_header;
        h[7] = self.hop_limit;
        h[8..24].copy_from_slice(&self.src.octets());
        h[24..40].copy_from_slice(&self.dst.octets());
        Ok(Self::LEN)
    }
}

/// The IPv6 fragment extension header (8 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6FragmentRepr {
    pub next_header: u8,
    /// Byte offset of this fragment in the datagram; a multiple of 8.
    pub frag_offset: u16,
    pub more_fragments: bool,
    pub ident: u32,
}

impl Ipv6FragmentRepr {
    pub const LEN: usize = 8;

    #[inline]
    pub fn parse(buf: &[u8]) -> Result<(Ipv6FragmentRepr, &[u8]), WireError> {
        let e = slice(buf, 0, Self::LEN, "IPv6 fragment header")?;
        let off = u16::from_be_bytes([e[2], e[3]]);
        let repr = Ipv6FragmentRepr {
            next_header: e[0],
            frag_offset: off & 0xfff8,
            more_fragments: off & 1 != 0,
            ident: u32::from_be_bytes([e[4], e[5], e[6], e[7]]),
        };
        Ok((repr, &buf[Self::LEN..]))
    }
}

impl Emit for Ipv6FragmentRepr {
    fn buffer_len(&self) -> usize {
        Self::LEN
    }
    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        if self.frag_offset % 8 != 0 {
            return Err(WireError::malformed("IPv6 fragment offset", "not a multiple of 8"));
        }
        let e = slice_mut(buf, 0, Self::LEN, "IPv6 fragment header")?;
        e[0] = self.next_header;
        e[1] = 0;
        e[2..4].copy_from_slice(&(self.frag_offset | self.more_fragments as u16).to_be_bytes());
        e[4..8].copy_from_slice(&self.ident.to_be_bytes());
        Ok(Self::LEN)
    }
}

/// Parses an IPv6 header and walks the extension headers up to the upper
/// layer, picking up the fragment header when present.
#[inline]
pub fn parse_ipv6(buf: &[u8]) -> Result<IpPacket<'_>, WireError> {
    let (ip, _) = Ipv6Repr::parse(buf)?;
    let mut next = ip.next_header;
    let total = Ipv6Repr::LEN + ip.payload_len as usize;
    let end = total.min(buf.len());
    let mut at = Ipv6Repr::LEN;
    let mut frag = None;
    for _ in 0..16 {
        match next {
            EXT_HOP_BY_HOP | EXT_ROUTING | EXT_DEST_OPTS | EXT_MOBILITY => {
                let e = slice(buf, at, 2, "IPv6 extension header")?;
                next = e[0];
                at += (e[1] as usize + 1) * 8;
            }
            EXT_FRAGMENT => {
                let (f, _) = Ipv6FragmentRepr::parse(buf.get(at..).unwrap_or(&[]))?;
                next = f.next_header;
                frag = Some(f);
                at += Ipv6FragmentRepr::LEN;
            }
            _ => break,
        }
    }
    if at > end {
        return Err(WireError::truncated("IPv6 extension headers", at, end));
    }
    let (frag_offset, more_fragments, ident) = frag.map_or((0, false, 0), |f| (f.frag_offset as u32, f.more_fragments, f.ident));
    Ok(IpPacket {
        src: IpAddr::V6(ip.src),
        dst: IpAddr::V6(ip.dst),
        protocol: next,
        ident,
        frag_offset,
        more_fragments,
        is_fragment: frag.is_some() && (more_fragments || frag_offset != 0),
        payload: &buf[at..end],
        missing: total - end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn ipv4(id: u16, mf: bool, off8: u16, proto: u8, payload: &[u8]) -> Vec<u8> {
        let total = 20 + payload.len();
        let mut h = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        h[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        h[4..6].copy_from_slice(&id.to_be_bytes());
        h[6..8].copy_from_slice(&((if mf { 0x2000 } else { 0 }) | off8).to_be_bytes());
        h.extend_from_slice(payload);
        h
    }

    #[test]
    fn v4_fragment_fields() {
        let p = ipv4(0x1234, true, 185, PROTO_UDP, &[1, 2, 3, 4]);
        let ip = parse_ipv4(&p).unwrap();
        assert_eq!(ip.ident, 0x1234);
        assert!(ip.more_fragments && ip.is_fragment);
        assert_eq!(ip.frag_offset, 1480);
        assert_eq!(ip.payload, &[1, 2, 3, 4]);
        assert_eq!(ip.missing, 0);
    }

    #[test]
    fn v4_ethernet_padding_and_snaplen() {
        let mut p = ipv4(1, false, 0, PROTO_UDP, &[9; 8]);
        p.extend_from_slice(&[0; 10]); // trailer padding
        assert_eq!(parse_ipv4(&p).unwrap().payload.len(), 8);
        let p = ipv4(1, false, 0, PROTO_UDP, &[9; 100]);
        let ip = parse_ipv4(&p[..60]).unwrap();
        assert_eq!(ip.payload.len(), 40);
        assert_eq!(ip.missing, 60);
    }

    #[test]
    fn v6_with_fragment_header() {
        let mut p = vec![0x60, 0, 0, 0, 0, 0, EXT_FRAGMENT, 64];
        p.extend_from_slice(&[0u8; 32]);
        let body = [PROTO_UDP, 0, 0x05, 0x01, 0xde, 0xad, 0xbe, 0xef, 7, 7, 7, 7];
        p[4..6].copy_from_slice(&(body.len() as u16).to_be_bytes());
        p.extend_from_slice(&body);
        let ip = parse_ipv6(&p).unwrap();
        assert_eq!(ip.protocol, PROTO_UDP);
        assert_eq!(ip.ident, 0xdeadbeef);
        assert_eq!(ip.frag_offset, 0x0500);
        assert!(ip.more_fragments && ip.is_fragment);
        assert_eq!(ip.payload, &[7, 7, 7, 7]);
    }

    /// `tsn check`'s frame header cases (formerly its own parser's test).
    #[test]
    fn tagged_frame_header() {
        // dst, src, 802.1Q TCI PCP 5 VID 10, IPv4 with MF set, id 0x1234, 10.0.0.1 -> 239.255.10.5
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x81, 0x00, 0xa0, 0x0a, 0x08, 0x00]);
        f.extend_from_slice(&[0x45, 0, 0, 20, 0x12, 0x34, 0x20, 0x00, 64, 17, 0, 0, 10, 0, 0, 1, 239, 255, 10, 5]);
        let p = ipv4_in_frame(LinkType::Ethernet, &f).unwrap().unwrap();
        assert_eq!(p.outer_vlan.map(|v| (v.pcp, v.vid)), Some((5, 10)));
        assert_eq!((u32::from(p.header.src), u32::from(p.header.dst), p.header.ident), (0x0a000001, 0xefff0a05, 0x1234));
        assert!(p.is_fragment());
        // untagged, not a fragment
        let mut g = vec![0u8; 12];
        g.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 20, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        let p = ipv4_in_frame(LinkType::Ethernet, &g).unwrap().unwrap();
        assert_eq!((p.outer_vlan, p.is_fragment()), (None, false));
    }

    #[test]
    fn ipv4_in_frame_options_qinq_udp_len_and_others() {
        // QinQ (outer PCP 3), IPv4 with 4 bytes of options, first fragment of a 3000-byte UDP datagram
        let mut ip = ipv4(7, true, 0, PROTO_UDP, &[]);
        ip[0] = 0x46;
        ip.extend_from_slice(&[1, 1, 1, 1]); // options (NOPs)
        ip.extend_from_slice(&[0x1c, 0xe8, 0x1c, 0xe9, 0x0b, 0xb8, 0, 0, 0xaa, 0xbb]);
        let total = ip.len() as u16;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x88, 0xa8, 0x60, 0x64, 0x81, 0x00, 0xa0, 0x1e, 0x08, 0x00]);
        f.extend_from_slice(&ip);
        let p = ipv4_in_frame(LinkType::Ethernet, &f).unwrap().unwrap();
        assert_eq!(p.outer_vlan.map(|v| (v.pcp, v.vid)), Some((3, 100)));
        assert_eq!((p.header.payload_len, p.payload.len()), (10, 10));
        assert_eq!(p.udp_len(), Some(3000));
        assert!(p.is_fragment());
        // header-only capture: the UDP length is not there
        assert_eq!(ipv4_in_frame(LinkType::Ethernet, &f[..f.len() - 8]).unwrap().unwrap().udp_len(), None);
        // a later fragment has no UDP header
        let later = ipv4(7, false, 185, PROTO_UDP, &[0; 16]);
        let p = ipv4_in_frame(LinkType::RawIp, &later).unwrap().unwrap();
        assert_eq!((p.header.frag_offset, p.udp_len(), p.is_fragment()), (1480, None, true));
        // ARP: not IPv4; a cut IPv4 header: an error
        let mut arp = vec![0u8; 12];
        arp.extend_from_slice(&[0x08, 0x06, 0, 1]);
        assert!(ipv4_in_frame(LinkType::Ethernet, &arp).unwrap().is_none());
        assert!(ipv4_in_frame(LinkType::Ethernet, &f[..30]).is_err());
    }

    #[test]
    fn v4_bad_ihl() {
        let mut p = ipv4(1, false, 0, PROTO_UDP, &[]);
        p[0] = 0x44;
        assert!(parse_ipv4(&p).is_err());
    }
}
