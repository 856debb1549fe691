//! IPv4 and IPv6 headers, including the fragment information the
//! reassembly in `ddscope-core` needs.

use crate::error::{be16, be32, slice, WireError};
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

/// Parses an IPv4 header. A capture cut short by the snap length is not an
/// error: `missing` says how many payload bytes were not captured.
pub fn parse_ipv4(buf: &[u8]) -> Result<IpPacket<'_>, WireError> {
    let b0 = slice(buf, 0, 20, "IPv4 header")?[0];
    if b0 >> 4 != 4 {
        return Err(WireError::malformed("IPv4 header", "version is not 4"));
    }
    let ihl = ((b0 & 0x0f) as usize) * 4;
    if ihl < 20 {
        return Err(WireError::malformed("IPv4 header", "header length below 20"));
    }
    slice(buf, 0, ihl, "IPv4 options")?;
    let total = be16(buf, 2, "IPv4 total length")? as usize;
    if total < ihl {
        return Err(WireError::malformed("IPv4 total length", "smaller than the header"));
    }
    let ident = be16(buf, 4, "IPv4 identification")? as u32;
    let ff = be16(buf, 6, "IPv4 fragment offset")?;
    let more_fragments = ff & 0x2000 != 0;
    let frag_offset = ((ff & 0x1fff) as u32) * 8;
    let protocol = buf[9];
    let src = Ipv4Addr::new(buf[12], buf[13], buf[14], buf[15]);
    let dst = Ipv4Addr::new(buf[16], buf[17], buf[18], buf[19]);
    // Ethernet pads short frames: the payload ends at total length, not at the buffer's end.
    let end = total.min(buf.len());
    Ok(IpPacket {
        src: IpAddr::V4(src),
        dst: IpAddr::V4(dst),
        protocol,
        ident,
        frag_offset,
        more_fragments,
        is_fragment: more_fragments || frag_offset != 0,
        payload: &buf[ihl..end],
        missing: total - end,
    })
}

const EXT_HOP_BY_HOP: u8 = 0;
const EXT_ROUTING: u8 = 43;
const EXT_FRAGMENT: u8 = 44;
const EXT_DEST_OPTS: u8 = 60;
const EXT_MOBILITY: u8 = 135;

/// Parses an IPv6 header and walks the extension headers up to the upper
/// layer, picking up the fragment header when present.
pub fn parse_ipv6(buf: &[u8]) -> Result<IpPacket<'_>, WireError> {
    let h = slice(buf, 0, 40, "IPv6 header")?;
    if h[0] >> 4 != 6 {
        return Err(WireError::malformed("IPv6 header", "version is not 6"));
    }
    let payload_len = be16(buf, 4, "IPv6 payload length")? as usize;
    let mut next = h[6];
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(&h[8..24]).expect("16 bytes"));
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&h[24..40]).expect("16 bytes"));
    let total = 40 + payload_len;
    let end = total.min(buf.len());
    let mut at = 40usize;
    let mut frag = None;
    for _ in 0..16 {
        match next {
            EXT_HOP_BY_HOP | EXT_ROUTING | EXT_DEST_OPTS | EXT_MOBILITY => {
                let e = slice(buf, at, 2, "IPv6 extension header")?;
                next = e[0];
                at += (e[1] as usize + 1) * 8;
            }
            EXT_FRAGMENT => {
                let e = slice(buf, at, 8, "IPv6 fragment header")?;
                next = e[0];
                let off = be16(e, 2, "IPv6 fragment header")?;
                let id = be32(e, 4, "IPv6 fragment header")?;
                frag = Some(((off & 0xfff8) as u32, off & 1 != 0, id));
                at += 8;
            }
            _ => break,
        }
    }
    if at > end {
        return Err(WireError::truncated("IPv6 extension headers", at, end));
    }
    let (frag_offset, more_fragments, ident) = frag.unwrap_or((0, false, 0));
    Ok(IpPacket {
        src: IpAddr::V6(src),
        dst: IpAddr::V6(dst),
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

    #[test]
    fn v4_bad_ihl() {
        let mut p = ipv4(1, false, 0, PROTO_UDP, &[]);
        p[0] = 0x44;
        assert!(parse_ipv4(&p).is_err());
    }
}
