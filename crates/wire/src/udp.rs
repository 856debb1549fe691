//! UDP header.

use crate::error::{be16, WireError};

#[derive(Debug, Clone, Copy)]
pub struct UdpDatagram<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    /// Payload bytes (the RTPS message).
    pub payload: &'a [u8],
}

/// Parses a complete (reassembled) UDP datagram.
pub fn parse(buf: &[u8]) -> Result<UdpDatagram<'_>, WireError> {
    let src_port = be16(buf, 0, "UDP header")?;
    let dst_port = be16(buf, 2, "UDP header")?;
    let len = be16(buf, 4, "UDP header")? as usize;
    be16(buf, 6, "UDP header")?;
    if len < 8 {
        return Err(WireError::malformed("UDP length", "below 8"));
    }
    if len > buf.len() {
        return Err(WireError::truncated("UDP payload", len, buf.len()));
    }
    Ok(UdpDatagram { src_port, dst_port, payload: &buf[8..len] })
}

#[cfg(test)]
mod tests {
    #[test]
    fn lengths() {
        let d = [0x1c, 0xe8, 0x1c, 0xe9, 0, 10, 0, 0, 1, 2, 3];
        let u = super::parse(&d).unwrap();
        assert_eq!((u.src_port, u.dst_port), (7400, 7401));
        assert_eq!(u.payload, &[1, 2]);
        assert!(super::parse(&d[..9]).is_err());
        assert!(super::parse(&[0, 0, 0, 0, 0, 4, 0, 0]).is_err());
    }
}
