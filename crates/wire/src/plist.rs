//! RTPS ParameterList: (pid, length, value) triples ending with PID_SENTINEL,
//! used for inline QoS and for discovery data (PL_CDR).

use crate::error::WireError;

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

/// One parameter of a ParameterList.
#[derive(Debug, Clone, Copy)]
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
            vendor_specific: raw_pid & 0x8000 != 0,
            must_understand: raw_pid & 0x4000 != 0,
            value,
        }))
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
}
