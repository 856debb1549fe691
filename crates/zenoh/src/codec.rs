//! The primitives of Zenoh's wire codec (the `Zenoh080` codec of
//! eclipse-zenoh's `zenoh-codec` 1.x): variable-length integers, length-
//! prefixed byte slices and strings, and message extensions.
//!
//! Everything borrows the input and nothing allocates; every read that
//! would run past the end returns [`ZError::Truncated`].

use std::fmt;

/// Why a message could not be decoded. Static strings only: the hot path
/// never allocates, the caller adds frame numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZError {
    /// The bytes end before `what` does.
    Truncated { what: &'static str },
    /// `what` has a value the protocol does not allow.
    Malformed { what: &'static str, detail: &'static str },
}

impl ZError {
    pub fn what(&self) -> &'static str {
        match self {
            ZError::Truncated { what } | ZError::Malformed { what, .. } => what,
        }
    }
    pub fn is_truncated(&self) -> bool {
        matches!(self, ZError::Truncated { .. })
    }
}

impl fmt::Display for ZError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZError::Truncated { what } => write!(f, "truncated {what}"),
            ZError::Malformed { what, detail } => write!(f, "malformed {what}: {detail}"),
        }
    }
}

impl std::error::Error for ZError {}

pub type ZResult<T> = Result<T, ZError>;

fn truncated<T>(what: &'static str) -> ZResult<T> {
    Err(ZError::Truncated { what })
}

pub(crate) fn malformed<T>(what: &'static str, detail: &'static str) -> ZResult<T> {
    Err(ZError::Malformed { what, detail })
}

/// The protocol version whose layouts a session's messages are read with:
/// the transport messages of the two are the same; some network and Zenoh
/// messages differ (see [`crate::network`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Proto {
    /// Zenoh 1.x: protocol version 0x09, as zenoh-codec 1.0–1.10 writes it.
    #[default]
    V09,
    /// Zenoh 0.11: protocol version 0x08, as zenoh-codec 0.11.0-dev writes it
    /// (the zenoh-c that rmw_zenoh_cpp of 2024 vendored).
    V08,
}

impl Proto {
    /// The layouts of a protocol version an Init or Join names; `None` for
    /// versions ddscope does not decode.
    pub fn of_version(v: u8) -> Option<Proto> {
        match v {
            0x09 => Some(Proto::V09),
            0x08 => Some(Proto::V08),
            _ => None,
        }
    }

    /// The version byte of Init and Join.
    pub fn version(self) -> u8 {
        match self {
            Proto::V09 => 0x09,
            Proto::V08 => 0x08,
        }
    }
}

/// Message header: the low five bits are the message id, the high three its flags.
pub const fn mid(header: u8) -> u8 {
    header & 0x1f
}

pub const fn has(header: u8, flag: u8) -> bool {
    header & flag != 0
}

/// The extension flag (`Z`) every message header shares.
pub const FLAG_Z: u8 = 0x80;

/// A cursor over borrowed bytes.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The byte at the cursor, not consumed.
    pub fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    pub fn u8(&mut self, what: &'static str) -> ZResult<u8> {
        match self.buf.get(self.pos) {
            Some(b) => {
                self.pos += 1;
                Ok(*b)
            }
            None => truncated(what),
        }
    }

    pub fn bytes(&mut self, n: usize, what: &'static str) -> ZResult<&'a [u8]> {
        if n > self.remaining() {
            return truncated(what);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    /// A variable-length integer: 7 bits per byte, least significant first,
    /// the high bit set on every byte but the last; the ninth byte, if any,
    /// carries 8 bits (as zenoh-codec writes and reads them).
    pub fn vle(&mut self, what: &'static str) -> ZResult<u64> {
        let mut b = self.u8(what)?;
        let mut v: u64 = 0;
        let mut shift = 0u32;
        while b & 0x80 != 0 && shift != 56 {
            v |= ((b & 0x7f) as u64) << shift;
            b = self.u8(what)?;
            shift += 7;
        }
        v |= (b as u64) << shift;
        Ok(v)
    }

    /// A variable-length integer that must fit `max` (zenoh-codec's bounded codecs).
    pub fn vle_max(&mut self, max: u64, what: &'static str) -> ZResult<u64> {
        let v = self.vle(what)?;
        if v > max {
            return malformed(what, "out of range");
        }
        Ok(v)
    }

    /// A length-prefixed slice (the length a variable-length integer bounded by `u32`).
    pub fn zslice(&mut self, what: &'static str) -> ZResult<&'a [u8]> {
        let n = self.vle_max(u32::MAX as u64, what)?;
        if n > self.remaining() as u64 {
            return truncated(what);
        }
        self.bytes(n as usize, what)
    }

    /// A length-prefixed slice that may be cut short by the end of the bytes
    /// (a message of which only the head was kept): the declared length and
    /// what is present.
    pub fn zslice_cut(&mut self, what: &'static str) -> ZResult<(u64, &'a [u8])> {
        let n = self.vle_max(u32::MAX as u64, what)?;
        let have = (self.remaining() as u64).min(n) as usize;
        Ok((n, self.bytes(have, what)?))
    }
}

/// How an extension's body is encoded (bits 5–6 of its header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtBody<'a> {
    Unit,
    Z64(u64),
    ZBuf(&'a [u8]),
}

/// One message extension: id (low four bits), mandatory flag, body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ext<'a> {
    pub id: u8,
    pub mandatory: bool,
    pub body: ExtBody<'a>,
}

pub const EXT_ENC_UNIT: u8 = 0x00;
pub const EXT_ENC_Z64: u8 = 0x20;
pub const EXT_ENC_ZBUF: u8 = 0x40;
pub const EXT_MANDATORY: u8 = 0x10;

impl<'a> Ext<'a> {
    pub fn z64(&self) -> Option<u64> {
        match self.body {
            ExtBody::Z64(v) => Some(v),
            _ => None,
        }
    }
    pub fn zbuf(&self) -> Option<&'a [u8]> {
        match self.body {
            ExtBody::ZBuf(b) => Some(b),
            _ => None,
        }
    }
    pub fn is_unit(&self) -> bool {
        matches!(self.body, ExtBody::Unit)
    }
}

/// Reads the extensions that follow a header whose `Z` flag is `present`.
/// Every extension says how long it is, so unknown ones (mandatory or not)
/// are skipped; `visit` sees each one.
pub fn read_exts<'a>(r: &mut Reader<'a>, present: bool, what: &'static str, visit: &mut dyn FnMut(Ext<'a>)) -> ZResult<()> {
    let mut more = present;
    while more {
        let h = r.u8(what)?;
        more = has(h, FLAG_Z);
        let body = match h & 0x60 {
            EXT_ENC_UNIT => ExtBody::Unit,
            EXT_ENC_Z64 => ExtBody::Z64(r.vle(what)?),
            EXT_ENC_ZBUF => ExtBody::ZBuf(r.zslice(what)?),
            _ => return malformed(what, "extension of a reserved encoding"),
        };
        visit(Ext { id: h & 0x0f, mandatory: has(h, EXT_MANDATORY), body });
    }
    Ok(())
}

/// The body of an OAM message (transport or network), encoded as its
/// header's bits 5–6 say.
pub(crate) fn oam_body(r: &mut Reader<'_>, h: u8) -> ZResult<()> {
    match h & 0x60 {
        0x00 => Ok(()),
        0x20 => r.vle("OAM body").map(|_| ()),
        0x40 => r.zslice("OAM body").map(|_| ()),
        _ => malformed("OAM body", "reserved encoding"),
    }
}

/// A Zenoh id: 1 to 16 bytes, shown as zenoh shows it (lowercase hex of the
/// id's bytes, most significant first, leading zeros dropped).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ZenohId {
    len: u8,
    /// Little-endian bytes as on the wire, zero-padded.
    bytes: [u8; 16],
}

impl ZenohId {
    pub fn from_wire(b: &[u8]) -> Option<ZenohId> {
        if b.is_empty() || b.len() > 16 {
            return None;
        }
        let mut bytes = [0u8; 16];
        bytes[..b.len()].copy_from_slice(b);
        Some(ZenohId { len: b.len() as u8, bytes })
    }

    /// The wire bytes (little-endian).
    pub fn wire(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// The 16 bytes, zero-padded.
    pub fn padded(&self) -> [u8; 16] {
        self.bytes
    }

    pub fn is_set(&self) -> bool {
        self.len > 0
    }
}

impl fmt::Display for ZenohId {
    /// As `zenoh::Id`'s Display (and so rmw_zenoh's liveliness tokens) writes
    /// it: the id as a little-endian 128-bit number in lowercase hex.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = u128::from_le_bytes(self.bytes);
        write!(f, "{v:x}")
    }
}

impl fmt::Debug for ZenohId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ZenohId({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vle_edges() {
        for v in [0u64, 1, 127, 128, 300, 16383, 16384, u32::MAX as u64, u64::MAX >> 1, u64::MAX] {
            let mut b = vec![];
            crate::emit::vle(&mut b, v);
            let mut r = Reader::new(&b);
            assert_eq!(r.vle("x").unwrap(), v, "{v}");
            assert!(r.is_empty());
        }
        assert_eq!(Reader::new(&[0x80]).vle("x"), Err(ZError::Truncated { what: "x" }));
        // nine bytes at most: the ninth carries 8 bits
        let nine = [0xffu8; 9];
        assert_eq!(Reader::new(&nine).vle("x").unwrap(), u64::MAX);
    }

    #[test]
    fn exts_skip_unknown_and_refuse_reserved() {
        let b = [0x80 | 0x41, 2, 9, 9, 0x80 | 0x22, 5, 0x13];
        let mut seen = vec![];
        let mut r = Reader::new(&b);
        read_exts(&mut r, true, "t", &mut |e| seen.push(e)).unwrap();
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[0].zbuf(), Some(&[9u8, 9][..]));
        assert_eq!(seen[1].z64(), Some(5));
        assert!(seen[2].mandatory && seen[2].is_unit());
        assert!(read_exts(&mut Reader::new(&[0x60]), true, "t", &mut |_| {}).is_err());
    }

    #[test]
    fn zid_display() {
        let z = ZenohId::from_wire(&[0x21, 0x7f, 0xe8, 0x57]).unwrap();
        assert_eq!(z.to_string(), "57e87f21");
        assert!(ZenohId::from_wire(&[]).is_none());
        assert!(ZenohId::from_wire(&[0; 17]).is_none());
    }
}
