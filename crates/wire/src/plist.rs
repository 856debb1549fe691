//! RTPS ParameterList: (pid, length, value) triples ending with PID_SENTINEL,
//! used for inline QoS and for discovery data (PL_CDR).

use crate::cdr::{CdrReader, CdrWriter};
use crate::error::WireError;
use crate::guid::Guid;
use crate::locator::Locator;

pub const PID_PAD: u16 = 0x0000;
pub const PID_SENTINEL: u16 = 0x0001;
pub const PID_PARTICIPANT_LEASE_DURATION: u16 = 0x0002;
pub const PID_TOPIC_NAME: u16 = 0x0005;
pub const PID_TYPE_NAME: u16 = 0x0007;
pub const PID_DOMAIN_ID: u16 = 0x000f;
pub const PID_PROTOCOL_VERSION: u16 = 0x0015;
pub const PID_VENDOR_ID: u16 = 0x0016;
pub const PID_RELIABILITY: u16 = 0x001a;
pub const PID_LIVELINESS: u16 = 0x001b;
pub const PID_DURABILITY: u16 = 0x001d;
pub const PID_OWNERSHIP: u16 = 0x001f;
pub const PID_DEADLINE: u16 = 0x0023;
pub const PID_LATENCY_BUDGET: u16 = 0x0027;
pub const PID_PARTITION: u16 = 0x0029;
pub const PID_LIFESPAN: u16 = 0x002b;
pub const PID_UNICAST_LOCATOR: u16 = 0x002f;
pub const PID_MULTICAST_LOCATOR: u16 = 0x0030;
pub const PID_DEFAULT_UNICAST_LOCATOR: u16 = 0x0031;
pub const PID_METATRAFFIC_UNICAST_LOCATOR: u16 = 0x0032;
pub const PID_METATRAFFIC_MULTICAST_LOCATOR: u16 = 0x0033;
pub const PID_HISTORY: u16 = 0x0040;
pub const PID_DEFAULT_MULTICAST_LOCATOR: u16 = 0x0048;
pub const PID_TRANSPORT_PRIORITY: u16 = 0x0049;
pub const PID_PARTICIPANT_GUID: u16 = 0x0050;
pub const PID_GROUP_GUID: u16 = 0x0052;
pub const PID_BUILTIN_ENDPOINT_SET: u16 = 0x0058;
pub const PID_PROPERTY_LIST: u16 = 0x0059;
pub const PID_ENDPOINT_GUID: u16 = 0x005a;
pub const PID_ENTITY_NAME: u16 = 0x0062;
pub const PID_KEY_HASH: u16 = 0x0070;
pub const PID_STATUS_INFO: u16 = 0x0071;
pub const PID_DATA_REPRESENTATION: u16 = 0x0073;
pub const PID_TYPE_INFORMATION: u16 = 0x0075;

/// Flags of PID_STATUS_INFO's last byte (RTPS 2.5, 9.6.4.9).
pub const STATUS_INFO_DISPOSED: u32 = 0x1;
pub const STATUS_INFO_UNREGISTERED: u32 = 0x2;
pub const STATUS_INFO_FILTERED: u32 = 0x4;

/// Bits of the raw parameter id.
pub const PID_MUST_UNDERSTAND: u16 = 0x4000;
pub const PID_VENDOR_SPECIFIC: u16 = 0x8000;

/// One parameter of a ParameterList.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param<'a> {
    /// Parameter id without the must-understand (0x4000) bit.
    pub pid: u16,
    /// The vendor-specific bit (0x8000) was set: meaning depends on the vendor.
    pub vendor_specific: bool,
    pub must_understand: bool,
    pub value: &'a [u8],
}

/// Iterates the parameters of a ParameterList; stops after PID_SENTINEL.
#[derive(Debug, Clone)]
pub struct ParamIter<'a> {
    buf: &'a [u8],
    pos: usize,
    little_endian: bool,
    done: bool,
}

impl<'a> ParamIter<'a> {
    pub fn new(buf: &'a [u8], little_endian: bool) -> Self {
        ParamIter { buf, pos: 0, little_endian, done: false }
    }
    /// Bytes consumed so far (after the iteration ends: the list's length incl. sentinel).
    pub fn consumed(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for ParamIter<'a> {
    type Item = Result<Param<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let hdr = match self.buf.get(self.pos..self.pos + 4) {
            Some(h) => h,
            None => {
                self.done = true;
                return Some(Err(WireError::truncated("parameter list", self.pos + 4, self.buf.len())));
            }
        };
        let (raw_pid, len) = if self.little_endian {
            (u16::from_le_bytes([hdr[0], hdr[1]]), u16::from_le_bytes([hdr[2], hdr[3]]))
        } else {
            (u16::from_be_bytes([hdr[0], hdr[1]]), u16::from_be_bytes([hdr[2], hdr[3]]))
        };
        let start = self.pos + 4;
        let end = start + len as usize;
        if raw_pid == PID_SENTINEL {
            self.done = true;
            self.pos = start;
            return None;
        }
        let value = match self.buf.get(start..end) {
            Some(v) => v,
            None => {
                self.done = true;
                return Some(Err(WireError::truncated("parameter value", end, self.buf.len())));
            }
        };
        self.pos = end;
        Some(Ok(Param {
            pid: raw_pid & 0x3fff,
            vendor_specific: raw_pid & PID_VENDOR_SPECIFIC != 0,
            must_understand: raw_pid & PID_MUST_UNDERSTAND != 0,
            value,
        }))
    }
}

impl<'a> Param<'a> {
    /// The parameter id as written on the wire (with the vendor-specific and
    /// must-understand bits).
    pub fn raw_pid(&self) -> u16 {
        self.pid
            | if self.vendor_specific { PID_VENDOR_SPECIFIC } else { 0 }
            | if self.must_understand { PID_MUST_UNDERSTAND } else { 0 }
    }
    /// Bytes [`Param::emit`] writes: header and value padded to 4.
    pub fn buffer_len(&self) -> usize {
        4 + self.value.len().div_ceil(4) * 4
    }
    /// Writes the parameter (value padded with zeros to a multiple of 4, the
    /// length field counting the padding) at the start of `buf`.
    pub fn emit(&self, little_endian: bool, buf: &mut [u8]) -> Result<usize, WireError> {
        if self.pid > 0x3fff {
            return Err(WireError::malformed("parameter id", "over 0x3fff (the top bits are flags)"));
        }
        if self.raw_pid() == PID_SENTINEL {
            return Err(WireError::malformed("parameter id", "PID_SENTINEL ends the list; it is not a parameter"));
        }
        let n = self.buffer_len();
        if n - 4 > u16::MAX as usize {
            return Err(WireError::malformed("parameter value", "over 65535 bytes"));
        }
        if buf.len() < n {
            return Err(WireError::truncated("parameter", n, buf.len()));
        }
        let mut w = CdrWriter::new(buf, little_endian);
        w.u16(self.raw_pid(), "parameter")?;
        w.u16((n - 4) as u16, "parameter")?;
        w.bytes(self.value, "parameter value")?;
        w.zeros(n - 4 - self.value.len(), "parameter value")?;
        Ok(n)
    }
    /// A CDR string value (PID_TOPIC_NAME, PID_TYPE_NAME, PID_ENTITY_NAME, …).
    pub fn as_string(&self, little_endian: bool) -> Result<String, WireError> {
        CdrReader::new(self.value, little_endian).string("string parameter")
    }
    pub fn as_u32(&self, little_endian: bool) -> Result<u32, WireError> {
        CdrReader::new(self.value, little_endian).u32("uint32 parameter")
    }
    /// A GUID value (PID_PARTICIPANT_GUID, PID_ENDPOINT_GUID, …).
    pub fn as_guid(&self) -> Result<Guid, WireError> {
        Guid::from_slice(self.value).ok_or(WireError::truncated("GUID parameter", 16, self.value.len()))
    }
    /// A locator value (PID_*_LOCATOR).
    pub fn as_locator(&self, little_endian: bool) -> Result<Locator, WireError> {
        Locator::read(&mut CdrReader::new(self.value, little_endian))
    }
}

/// Appends a ParameterList to a caller's vector: parameters in the order
/// given, each padded to 4 bytes, then PID_SENTINEL from [`ParamListWriter::finish`].
#[derive(Debug)]
pub struct ParamListWriter<'v> {
    out: &'v mut Vec<u8>,
    little_endian: bool,
}

impl<'v> ParamListWriter<'v> {
    pub fn new(out: &'v mut Vec<u8>, little_endian: bool) -> Self {
        ParamListWriter { out, little_endian }
    }
    /// A parameter with the given id (flag bits included) and raw value.
    pub fn raw(&mut self, raw_pid: u16, value: &[u8]) -> Result<&mut Self, WireError> {
        let p = Param {
            pid: raw_pid & 0x3fff,
            vendor_specific: raw_pid & PID_VENDOR_SPECIFIC != 0,
            must_understand: raw_pid & PID_MUST_UNDERSTAND != 0,
            value,
        };
        let at = self.out.len();
        self.out.resize(at + p.buffer_len(), 0);
        if let Err(e) = p.emit(self.little_endian, &mut self.out[at..]) {
            self.out.truncate(at);
            return Err(e);
        }
        Ok(self)
    }
    /// Writes a value with a CDR writer into a parameter of `len` bytes.
    fn with(&mut self, pid: u16, len: usize, f: impl FnOnce(&mut CdrWriter<'_>) -> Result<(), WireError>) -> Result<&mut Self, WireError> {
        let mut v = vec![0u8; len];
        f(&mut CdrWriter::new(&mut v, self.little_endian))?;
        self.raw(pid, &v)
    }
    pub fn string(&mut self, pid: u16, s: &str) -> Result<&mut Self, WireError> {
        self.with(pid, crate::cdr::string_len(s), |w| w.string(s, "string parameter"))
    }
    pub fn u32(&mut self, pid: u16, v: u32) -> Result<&mut Self, WireError> {
        self.with(pid, 4, |w| w.u32(v, "uint32 parameter"))
    }
    pub fn guid(&mut self, pid: u16, g: Guid) -> Result<&mut Self, WireError> {
        self.raw(pid, &g.to_bytes())
    }
    pub fn locator(&mut self, pid: u16, l: &Locator) -> Result<&mut Self, WireError> {
        self.with(pid, Locator::LEN, |w| l.write(w))
    }
    /// Ends the list with PID_SENTINEL; returns the vector's new length.
    pub fn finish(self) -> usize {
        let s = if self.little_endian { PID_SENTINEL.to_le_bytes() } else { PID_SENTINEL.to_be_bytes() };
        self.out.extend_from_slice(&s);
        self.out.extend_from_slice(&[0, 0]);
        self.out.len()
    }
}

/// Length in bytes of the ParameterList at the start of `buf` (through the sentinel).
pub fn list_len(buf: &[u8], little_endian: bool) -> Result<usize, WireError> {
    let mut it = ParamIter::new(buf, little_endian);
    for p in it.by_ref() {
        p?;
    }
    Ok(it.consumed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iterate_le_and_be() {
        let le = [0x70, 0x00, 4, 0, 1, 2, 3, 4, 0x01, 0x00, 0, 0, 0xee];
        let ps: Vec<_> = ParamIter::new(&le, true).map(|p| p.unwrap()).collect();
        assert_eq!(ps.len(), 1);
        assert_eq!(ps[0].pid, PID_KEY_HASH);
        assert_eq!(ps[0].value, &[1, 2, 3, 4]);
        assert_eq!(list_len(&le, true).unwrap(), 12);
        let be = [0x80, 0x05, 0, 0, 0x00, 0x01, 0, 0];
        let ps: Vec<_> = ParamIter::new(&be, false).map(|p| p.unwrap()).collect();
        assert!(ps[0].vendor_specific);
        assert_eq!(ps[0].pid, PID_TOPIC_NAME);
    }

    #[test]
    fn truncated_value() {
        let d = [0x05, 0x00, 8, 0, 1, 2];
        let r: Vec<_> = ParamIter::new(&d, true).collect();
        assert!(r[0].is_err());
        assert!(list_len(&[0x05, 0x00], true).is_err());
    }

    #[test]
    fn writer_and_typed_values() {
        for le in [true, false] {
            let mut out = vec![];
            let g = Guid::parse_hex("01100f0a0b0c0d0e0f10111200000103").unwrap();
            let loc = Locator::udpv4(std::net::Ipv4Addr::new(10, 0, 0, 1), 7411);
            let mut w = ParamListWriter::new(&mut out, le);
            w.string(PID_TOPIC_NAME, "rt/chatter").unwrap().guid(PID_ENDPOINT_GUID, g).unwrap();
            w.u32(PID_DOMAIN_ID, 7).unwrap().locator(PID_DEFAULT_UNICAST_LOCATOR, &loc).unwrap();
            w.raw(PID_VENDOR_SPECIFIC | 0x0001, &[1, 2, 3]).unwrap();
            w.finish();
            assert_eq!(list_len(&out, le).unwrap(), out.len());
            let ps: Vec<_> = ParamIter::new(&out, le).map(|p| p.unwrap()).collect();
            assert_eq!(ps.len(), 5);
            assert_eq!(ps[0].as_string(le).unwrap(), "rt/chatter");
            assert_eq!(ps[0].value.len(), 16); // 4 + 11, padded
            assert_eq!(ps[1].as_guid().unwrap(), g);
            assert_eq!(ps[2].as_u32(le).unwrap(), 7);
            assert_eq!(ps[3].as_locator(le).unwrap(), loc);
            assert!(ps[4].vendor_specific && ps[4].pid == 1 && ps[4].value == [1, 2, 3, 0]);
        }
        let mut out = vec![];
        assert!(ParamListWriter::new(&mut out, true).raw(PID_SENTINEL, &[]).is_err());
        assert!(out.is_empty());
    }
}
