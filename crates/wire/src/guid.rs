//! RTPS identities: GUID prefix (participant), entity id, GUID.

use std::fmt;

/// 12-byte participant identifier.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GuidPrefix(pub [u8; 12]);

/// 4-byte entity identifier: 3-byte key + 1-byte kind.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EntityId(pub [u8; 4]);

/// 16-byte GUID of a participant, writer or reader.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Guid {
    pub prefix: GuidPrefix,
    pub entity: EntityId,
}

impl GuidPrefix {
    pub const UNKNOWN: GuidPrefix = GuidPrefix([0; 12]);
    pub fn from_slice(b: &[u8]) -> Option<Self> {
        Some(GuidPrefix(b.get(..12)?.try_into().ok()?))
    }
    pub fn is_unknown(&self) -> bool {
        self.0 == [0; 12]
    }
}

impl EntityId {
    pub const UNKNOWN: EntityId = EntityId([0, 0, 0, 0]);
    pub const PARTICIPANT: EntityId = EntityId([0, 0, 1, 0xc1]);
    pub const SEDP_TOPICS_WRITER: EntityId = EntityId([0, 0, 2, 0xc2]);
    pub const SEDP_TOPICS_READER: EntityId = EntityId([0, 0, 2, 0xc7]);
    pub const SEDP_PUBLICATIONS_WRITER: EntityId = EntityId([0, 0, 3, 0xc2]);
    pub const SEDP_PUBLICATIONS_READER: EntityId = EntityId([0, 0, 3, 0xc7]);
    pub const SEDP_SUBSCRIPTIONS_WRITER: EntityId = EntityId([0, 0, 4, 0xc2]);
    pub const SEDP_SUBSCRIPTIONS_READER: EntityId = EntityId([0, 0, 4, 0xc7]);
    pub const SPDP_PARTICIPANT_WRITER: EntityId = EntityId([0, 1, 0, 0xc2]);
    pub const SPDP_PARTICIPANT_READER: EntityId = EntityId([0, 1, 0, 0xc7]);
    pub const P2P_PARTICIPANT_MESSAGE_WRITER: EntityId = EntityId([0, 2, 0, 0xc2]);
    pub const P2P_PARTICIPANT_MESSAGE_READER: EntityId = EntityId([0, 2, 0, 0xc7]);
    // DDS-Security builtin endpoints.
    pub const SEDP_PUBLICATIONS_SECURE_WRITER: EntityId = EntityId([0xff, 0, 3, 0xc2]);
    pub const SEDP_PUBLICATIONS_SECURE_READER: EntityId = EntityId([0xff, 0, 3, 0xc7]);
    pub const SEDP_SUBSCRIPTIONS_SECURE_WRITER: EntityId = EntityId([0xff, 0, 4, 0xc2]);
    pub const SEDP_SUBSCRIPTIONS_SECURE_READER: EntityId = EntityId([0xff, 0, 4, 0xc7]);
    pub const SPDP_PARTICIPANT_SECURE_WRITER: EntityId = EntityId([0xff, 1, 1, 0xc2]);
    pub const SPDP_PARTICIPANT_SECURE_READER: EntityId = EntityId([0xff, 1, 1, 0xc7]);

    pub fn from_slice(b: &[u8]) -> Option<Self> {
        Some(EntityId(b.get(..4)?.try_into().ok()?))
    }
    pub fn kind(&self) -> u8 {
        self.0[3]
    }
    pub fn as_u32(&self) -> u32 {
        u32::from_be_bytes(self.0)
    }
    /// Built-in entities have the two top bits of the kind set (0xc0).
    pub fn is_builtin(&self) -> bool {
        self.kind() & 0xc0 == 0xc0
    }
    /// Vendor-specific entity kinds have top bits 01.
    pub fn is_vendor_specific(&self) -> bool {
        self.kind() & 0xc0 == 0x40
    }
    pub fn is_writer(&self) -> bool {
        matches!(self.kind() & 0x3f, 0x02 | 0x03)
    }
    pub fn is_reader(&self) -> bool {
        matches!(self.kind() & 0x3f, 0x04 | 0x07)
    }
    /// SPDP and SEDP endpoints (plain and secure).
    pub fn is_discovery(&self) -> bool {
        matches!(self.0[1..3], [0, 2] | [0, 3] | [0, 4] | [1, 0] | [1, 1]) && self.is_builtin() && matches!(self.0[0], 0 | 0xff)
    }
    /// DDS-Security builtin endpoints (key byte 0 = 0xff) and their stateless/volatile channels.
    pub fn is_security(&self) -> bool {
        self.is_builtin() && self.0[0] == 0xff
    }
}

impl Guid {
    pub fn new(prefix: GuidPrefix, entity: EntityId) -> Self {
        Guid { prefix, entity }
    }
    pub fn from_slice(b: &[u8]) -> Option<Self> {
        Some(Guid { prefix: GuidPrefix::from_slice(b.get(..12)?)?, entity: EntityId::from_slice(b.get(12..16)?)? })
    }
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..12].copy_from_slice(&self.prefix.0);
        out[12..].copy_from_slice(&self.entity.0);
        out
    }
    /// Parses 32 hex digits (separators `.`, `:`, `-`, spaces are ignored).
    pub fn parse_hex(s: &str) -> Option<Self> {
        let digits: Vec<u8> = s.bytes().filter(|c| !matches!(c, b'.' | b':' | b'-' | b' ')).collect();
        if digits.len() != 32 {
            return None;
        }
        let mut out = [0u8; 16];
        for (i, pair) in digits.chunks(2).enumerate() {
            let hi = (pair[0] as char).to_digit(16)?;
            let lo = (pair[1] as char).to_digit(16)?;
            out[i] = (hi * 16 + lo) as u8;
        }
        Guid::from_slice(&out)
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    let mut buf = [0u8; 32];
    for (i, b) in bytes.iter().enumerate() {
        buf[2 * i] = HEX[(b >> 4) as usize];
        buf[2 * i + 1] = HEX[(b & 15) as usize];
    }
    f.write_str(std::str::from_utf8(&buf[..bytes.len() * 2]).expect("hex is ascii"))
}

impl fmt::Display for GuidPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}
impl fmt::Debug for GuidPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GuidPrefix({self})")
    }
}
impl fmt::Display for EntityId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}
impl fmt::Debug for EntityId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EntityId({self})")
    }
}
impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.prefix.0)?;
        write_hex(f, &self.entity.0)
    }
}
impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guid({self})")
    }
}

/// Name of a DDS vendor by its RTPS vendor id (OMG's registry).
pub fn vendor_name(id: u16) -> &'static str {
    match id {
        0x0101 => "RTI Connext DDS",
        0x0102 => "OpenSplice DDS",
        0x0103 => "OpenDDS",
        0x0104 => "Mil-DDS",
        0x0105 => "InterCOM DDS",
        0x0106 => "CoreDX DDS",
        0x0107 => "Lakota DDS",
        0x0108 => "ICOUP DDS",
        0x0109 => "Diamond DDS",
        0x010a => "RTI Connext Micro",
        0x010b => "Vortex Cafe",
        0x010c => "PrismTech Gateway",
        0x010d => "Vortex Lite",
        0x010e => "Qeo",
        0x010f => "eProsima Fast DDS",
        0x0110 => "Eclipse Cyclone DDS",
        0x0111 => "GurumDDS",
        0x0112 => "RustDDS",
        0x0113 => "Zhenrong DDS",
        0x0114 => "Dust DDS",
        // Not an RTPS vendor: ddscope's marker for traffic decoded from Zenoh (ddscope_zenoh::VENDOR_MARKER).
        0x5a00 => "Eclipse Zenoh (rmw_zenoh)",
        _ => "unknown vendor",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let g = Guid::parse_hex("01100f0a0b0c0d0e0f101112.00000103").unwrap();
        assert_eq!(g.to_string(), "01100f0a0b0c0d0e0f10111200000103");
        assert_eq!(g.entity.kind(), 0x03);
        assert!(g.entity.is_writer());
        assert!(!g.entity.is_builtin());
        assert!(Guid::parse_hex("zz").is_none());
    }

    #[test]
    fn builtin_classes() {
        assert!(EntityId::SEDP_PUBLICATIONS_WRITER.is_discovery());
        assert!(EntityId::SPDP_PARTICIPANT_WRITER.is_discovery());
        assert!(EntityId::SPDP_PARTICIPANT_SECURE_WRITER.is_discovery());
        assert!(!EntityId::P2P_PARTICIPANT_MESSAGE_WRITER.is_discovery());
        assert!(EntityId::P2P_PARTICIPANT_MESSAGE_WRITER.is_builtin());
        assert!(EntityId::SEDP_SUBSCRIPTIONS_READER.is_reader());
        assert!(EntityId([0xff, 0x02, 0x02, 0xc3]).is_security());
    }
}
