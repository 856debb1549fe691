//! TCP header view (RFC 9293): ports, sequence number, flags and the
//! segment's payload. Only what stream reassembly needs; options are
//! skipped by the data offset. Checksums are not verified (captures on the
//! sending host carry offloaded, unfinished checksums).

use crate::error::{be16, be32, slice};
use crate::WireError;

/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const ACK: u8 = 0x10;

/// A parsed TCP segment; `payload` borrows the captured bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub payload: &'a [u8],
}

impl Segment<'_> {
    pub fn syn(&self) -> bool {
        self.flags & SYN != 0
    }
    pub fn fin(&self) -> bool {
        self.flags & FIN != 0
    }
    pub fn rst(&self) -> bool {
        self.flags & RST != 0
    }
}

/// Parses a TCP header at the start of `buf` (the IP payload as captured).
pub fn parse(buf: &[u8]) -> Result<Segment<'_>, WireError> {
    let src_port = be16(buf, 0, "TCP source port")?;
    let dst_port = be16(buf, 2, "TCP destination port")?;
    let seq = be32(buf, 4, "TCP sequence number")?;
    let ack = be32(buf, 8, "TCP acknowledgment number")?;
    let off_flags = slice(buf, 12, 2, "TCP data offset")?;
    let data_offset = ((off_flags[0] >> 4) as usize) * 4;
    if data_offset < 20 {
        return Err(WireError::malformed("TCP data offset", "below 5 words"));
    }
    let window = be16(buf, 14, "TCP window")?;
    let _ = slice(buf, 0, data_offset, "TCP options")?;
    Ok(Segment { src_port, dst_port, seq, ack, flags: off_flags[1], window, payload: &buf[data_offset..] })
}

/// Writes a 20-byte TCP header (no options, checksum zero) followed by `payload`.
pub fn emit(src_port: u16, dst_port: u16, seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(20 + payload.len());
    out.extend_from_slice(&src_port.to_be_bytes());
    out.extend_from_slice(&dst_port.to_be_bytes());
    out.extend_from_slice(&seq.to_be_bytes());
    out.extend_from_slice(&ack.to_be_bytes());
    out.push(5 << 4);
    out.push(flags);
    out.extend_from_slice(&65535u16.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bad_offsets() {
        let b = emit(40000, 7447, 1000, 7, ACK, b"abc");
        let s = parse(&b).unwrap();
        assert_eq!((s.src_port, s.dst_port, s.seq, s.ack, s.flags), (40000, 7447, 1000, 7, ACK));
        assert_eq!(s.payload, b"abc");
        let mut bad = b.clone();
        bad[12] = 4 << 4;
        assert!(parse(&bad).is_err());
        bad[12] = 15 << 4; // 60 bytes of header, 23 present
        assert!(parse(&bad).is_err());
        assert!(parse(&b[..19]).is_err());
    }
}
