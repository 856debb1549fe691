//! UDP header, with the checksum over the IPv4/IPv6 pseudo-header.

use crate::checksum;
use crate::emit::Emit;
use crate::error::{be16, slice_mut, WireError};
use crate::ip::PROTO_UDP;
use std::net::IpAddr;

#[derive(Debug, Clone, Copy)]
pub struct UdpDatagram<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    /// Payload bytes (the RTPS message).
    pub payload: &'a [u8],
}

/// The 8-byte UDP header as plain data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    /// Payload bytes the length field announces (length − 8).
    pub payload_len: u16,
}

impl UdpRepr {
    pub const LEN: usize = 8;

    /// Parses a complete (reassembled) datagram: the header and the payload
    /// its length field announces.
    #[inline]
    pub fn parse(buf: &[u8]) -> Result<(UdpRepr, &[u8]), WireError> {
        let src_port = be16(buf, 0, "UDP header")?;
        let dst_port = be16(buf, 2, "UDP header")?;
        let len = be16(buf, 4, "UDP header")? as usize;
        be16(buf, 6, "UDP header")?;
        if len < Self::LEN {
            return Err(WireError::malformed("UDP length", "below 8"));
        }
        if len > buf.len() {
            return Err(WireError::truncated("UDP payload", len, buf.len()));
        }
        Ok((UdpRepr { src_port, dst_port, payload_len: (len - Self::LEN) as u16 }, &buf[Self::LEN..len]))
    }
}

impl Emit for UdpRepr {
    fn buffer_len(&self) -> usize {
        Self::LEN
    }
    /// Writes the header with checksum 0 ("not computed", allowed over
    /// IPv4); [`fill_checksum`] computes it once the payload is in place.
    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        if self.payload_len as usize > u16::MAX as usize - Self::LEN {
            return Err(WireError::malformed("UDP length", "over 65535"));
        }
        let h = slice_mut(buf, 0, Self::LEN, "UDP header")?;
        h[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        h[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        h[4..6].copy_from_slice(&(self.payload_len + Self::LEN as u16).to_be_bytes());
        h[6..8].copy_from_slice(&[0, 0]);
        Ok(Self::LEN)
    }
}

/// Parses a complete (reassembled) UDP datagram.
#[inline]
pub fn parse(buf: &[u8]) -> Result<UdpDatagram<'_>, WireError> {
    let (udp, payload) = UdpRepr::parse(buf)?;
    Ok(UdpDatagram { src_port: udp.src_port, dst_port: udp.dst_port, payload })
}

/// One's-complement sum of the pseudo-header and `datagram` (header and
/// payload, checksum field included), folded and complemented.
fn pseudo_checksum(src: IpAddr, dst: IpAddr, datagram: &[u8]) -> Result<u16, WireError> {
    let len = datagram.len();
    let mut s = 0u32;
    match (src, dst) {
        (IpAddr::V4(s4), IpAddr::V4(d4)) => {
            if len > u16::MAX as usize {
                return Err(WireError::malformed("UDP length", "over 65535"));
            }
            s = checksum::sum(&s4.octets(), s);
            s = checksum::sum(&d4.octets(), s);
            s = checksum::sum(&[0, PROTO_UDP], s);
            s = checksum::sum(&(len as u16).to_be_bytes(), s);
        }
        (IpAddr::V6(s6), IpAddr::V6(d6)) => {
            s = checksum::sum(&s6.octets(), s);
            s = checksum::sum(&d6.octets(), s);
            s = checksum::sum(&(len as u32).to_be_bytes(), s);
            s = checksum::sum(&[0, 0, 0, PROTO_UDP], s);
        }
        _ => return Err(WireError::malformed("UDP pseudo-header", "source and destination of different IP versions")),
    }
    Ok(checksum::finish(checksum::sum(datagram, s)))
}

/// Computes the UDP checksum of `datagram` (8-byte header then payload) sent
/// from `src` to `dst` and writes it into the header.
pub fn fill_checksum(src: IpAddr, dst: IpAddr, datagram: &mut [u8]) -> Result<(), WireError> {
    let h = slice_mut(datagram, 6, 2, "UDP header")?;
    h.copy_from_slice(&[0, 0]);
    let c = match pseudo_checksum(src, dst, datagram)? {
        0 => 0xffff, // 0 means "no checksum"; a computed 0 is sent as all ones
        c => c,
    };
    datagram[6..8].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// True when the checksum of `datagram` is right, or absent (0) over IPv4.
pub fn checksum_ok(src: IpAddr, dst: IpAddr, datagram: &[u8]) -> bool {
    let Ok(field) = be16(datagram, 6, "UDP header") else { return false };
    if field == 0 {
        return src.is_ipv4();
    }
    pseudo_checksum(src, dst, datagram) == Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths() {
        let d = [0x1c, 0xe8, 0x1c, 0xe9, 0, 10, 0, 0, 1, 2, 3];
        let u = super::parse(&d).unwrap();
        assert_eq!((u.src_port, u.dst_port), (7400, 7401));
        assert_eq!(u.payload, &[1, 2]);
        assert!(super::parse(&d[..9]).is_err());
        assert!(super::parse(&[0, 0, 0, 0, 0, 4, 0, 0]).is_err());
    }

    #[test]
    fn checksum_known_value() {
        // 10.0.0.1:7410 -> 10.0.0.2:7411, payload "RTPS": checksum worked out by hand
        // (pseudo-header 0a00 0001 0a00 0002 0011 000c, header 1cf2 1cf3 000c, data 5254 5053).
        let src: IpAddr = "10.0.0.1".parse().unwrap();
        let dst: IpAddr = "10.0.0.2".parse().unwrap();
        let mut d = vec![0u8; 8];
        UdpRepr { src_port: 7410, dst_port: 7411, payload_len: 4 }.emit(&mut d).unwrap();
        d.extend_from_slice(b"RTPS");
        fill_checksum(src, dst, &mut d).unwrap();
        let words: u32 = [0x0a00u32, 0x0001, 0x0a00, 0x0002, 0x0011, 0x000c, 0x1cf2, 0x1cf3, 0x000c, 0x5254, 0x5053].iter().sum();
        let folded = (words & 0xffff) + (words >> 16);
        assert_eq!(u16::from_be_bytes([d[6], d[7]]), !(folded as u16));
        assert!(checksum_ok(src, dst, &d));
        d[9] ^= 1;
        assert!(!checksum_ok(src, dst, &d));
    }
}
