//! RTPS Locator_t: kind, port, 16-byte address.

use crate::cdr::{CdrReader, CdrWriter};
use crate::error::WireError;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

pub const LOCATOR_KIND_UDPV4: i32 = 1;
pub const LOCATOR_KIND_UDPV6: i32 = 2;
pub const LOCATOR_KIND_TCPV4: i32 = 4;
pub const LOCATOR_KIND_TCPV6: i32 = 8;
pub const LOCATOR_KIND_SHM: i32 = 16;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Locator {
    pub kind: i32,
    pub port: u32,
    pub address: [u8; 16],
}

impl Locator {
    /// Bytes of a Locator_t on the wire.
    pub const LEN: usize = 24;

    /// A UDPv4 locator (the address in the last four bytes).
    pub fn udpv4(addr: Ipv4Addr, port: u32) -> Locator {
        let mut address = [0u8; 16];
        address[12..].copy_from_slice(&addr.octets());
        Locator { kind: LOCATOR_KIND_UDPV4, port, address }
    }
    pub fn udpv6(addr: Ipv6Addr, port: u32) -> Locator {
        Locator { kind: LOCATOR_KIND_UDPV6, port, address: addr.octets() }
    }
    /// Writes kind, port and address (kind aligned to 4).
    pub fn write(&self, w: &mut CdrWriter<'_>) -> Result<(), WireError> {
        w.a_i32(self.kind, "locator kind")?;
        w.u32(self.port, "locator port")?;
        w.bytes(&self.address, "locator address")
    }
    pub fn read(r: &mut CdrReader<'_>) -> Result<Locator, WireError> {
        let kind = r.a_i32("locator kind")?;
        let port = r.u32("locator port")?;
        let address = r.array::<16>("locator address")?;
        Ok(Locator { kind, port, address })
    }
}

impl fmt::Display for Locator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.address;
        match self.kind {
            LOCATOR_KIND_UDPV4 | LOCATOR_KIND_TCPV4 => {
                let proto = if self.kind == LOCATOR_KIND_UDPV4 { "udpv4" } else { "tcpv4" };
                write!(f, "{proto}:{}:{}", Ipv4Addr::new(a[12], a[13], a[14], a[15]), self.port)
            }
            LOCATOR_KIND_UDPV6 | LOCATOR_KIND_TCPV6 => {
                let proto = if self.kind == LOCATOR_KIND_UDPV6 { "udpv6" } else { "tcpv6" };
                write!(f, "{proto}:[{}]:{}", Ipv6Addr::from(*a), self.port)
            }
            LOCATOR_KIND_SHM => write!(f, "shm:{}", self.port),
            k => write!(f, "kind{k}:{}", self.port),
        }
    }
}

impl fmt::Debug for Locator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Locator({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udpv4() {
        let mut d = vec![1, 0, 0, 0, 0xe9, 0x1c, 0, 0];
        d.extend_from_slice(&[0; 12]);
        d.extend_from_slice(&[239, 255, 0, 1]);
        let l = Locator::read(&mut CdrReader::new(&d, true)).unwrap();
        assert_eq!(l.to_string(), "udpv4:239.255.0.1:7401");
        let mut out = [0u8; 24];
        Locator::udpv4(Ipv4Addr::new(239, 255, 0, 1), 7401).write(&mut CdrWriter::new(&mut out, true)).unwrap();
        assert_eq!(&out[..], &d[..]);
    }
}
