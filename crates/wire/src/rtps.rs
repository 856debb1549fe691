//! RTPS messages: header, submessage iteration and typed views of every
//! standard submessage (RTPS 2.5, section 9.4.5), both byte orders.

use crate::cdr::{CdrReader, CdrWriter};
use crate::emit::{room, Emit};
use crate::error::{slice, slice_mut, WireError};
use crate::guid::{EntityId, GuidPrefix};
use crate::locator::Locator;
use crate::plist;
use std::marker::PhantomData;

pub const MAGIC: &[u8; 4] = b"RTPS";
pub const HEADER_LEN: usize = 20;

// Submessage ids.
pub const PAD: u8 = 0x01;
pub const ACKNACK: u8 = 0x06;
pub const HEARTBEAT: u8 = 0x07;
pub const GAP: u8 = 0x08;
pub const INFO_TS: u8 = 0x09;
pub const INFO_SRC: u8 = 0x0c;
pub const INFO_REPLY_IP4: u8 = 0x0d;
pub const INFO_DST: u8 = 0x0e;
pub const INFO_REPLY: u8 = 0x0f;
pub const NACK_FRAG: u8 = 0x12;
pub const HEARTBEAT_FRAG: u8 = 0x13;
pub const DATA: u8 = 0x15;
pub const DATA_FRAG: u8 = 0x16;
pub const SEC_BODY: u8 = 0x30;
pub const SEC_PREFIX: u8 = 0x31;
pub const SEC_POSTFIX: u8 = 0x32;
pub const SRTPS_PREFIX: u8 = 0x33;
pub const SRTPS_POSTFIX: u8 = 0x34;

/// The EndiannessFlag (same as [`flags::E`]).
pub const FLAG_E: u8 = flags::E;

/// Submessage flag bits as RTPS 2.5 (section 9.4.5) names them. Bit 0 is the
/// EndiannessFlag `E` in every submessage (set: little-endian); the other
/// bits mean something different in each submessage, hence one module per
/// submessage. Submessages not listed here (HEARTBEAT_FRAG, NACK_FRAG,
/// INFO_SRC, INFO_DST, PAD) have only `E`.
pub mod flags {
    /// EndiannessFlag: the submessage is little-endian.
    pub const E: u8 = 0x01;

    /// DATA (9.4.5.3).
    pub mod data {
        /// InlineQosFlag: an inline QoS parameter list follows the fixed fields.
        pub const Q: u8 = 0x02;
        /// DataFlag: the serialized payload is data.
        pub const D: u8 = 0x04;
        /// KeyFlag: the serialized payload is a key.
        pub const K: u8 = 0x08;
        /// NonStandardPayloadFlag: the payload is not formatted as RTPS 10 says.
        pub const N: u8 = 0x10;
    }
    /// DATA_FRAG (9.4.5.4).
    pub mod data_frag {
        /// InlineQosFlag.
        pub const Q: u8 = 0x02;
        /// KeyFlag: the fragments are of a serialized key.
        pub const K: u8 = 0x04;
        /// NonStandardPayloadFlag.
        pub const N: u8 = 0x08;
    }
    /// HEARTBEAT (9.4.5.7).
    pub mod heartbeat {
        /// FinalFlag: the reader need not answer.
        pub const F: u8 = 0x02;
        /// LivelinessFlag: the writer asserts its liveliness.
        pub const L: u8 = 0x04;
        /// GroupInfoFlag: group sequence numbers follow the count.
        pub const G: u8 = 0x08;
    }
    /// ACKNACK (9.4.5.2).
    pub mod acknack {
        /// FinalFlag: the writer need not answer.
        pub const F: u8 = 0x02;
    }
    /// GAP (9.4.5.5).
    pub mod gap {
        /// GroupInfoFlag: gapStartGSN and gapEndGSN follow the gap list.
        pub const G: u8 = 0x02;
        /// FilteredCountFlag: a filteredCount follows.
        pub const F: u8 = 0x04;
    }
    /// INFO_TS (9.4.5.9).
    pub mod info_ts {
        /// InvalidateFlag: no timestamp; later submessages have none.
        pub const I: u8 = 0x02;
    }
    /// INFO_REPLY (9.4.5.11).
    pub mod info_reply {
        /// MulticastFlag: a multicast locator list follows the unicast one.
        pub const M: u8 = 0x02;
    }
    /// INFO_REPLY_IP4 (9.4.5.12).
    pub mod info_reply_ip4 {
        /// MulticastFlag: a multicast locator follows the unicast one.
        pub const M: u8 = 0x02;
    }
}

/// The kind of a submessage, as users name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SubmsgKind {
    Pad,
    AckNack,
    Heartbeat,
    Gap,
    InfoTs,
    InfoSrc,
    InfoReplyIp4,
    InfoDst,
    InfoReply,
    NackFrag,
    HeartbeatFrag,
    Data,
    DataFrag,
    SecBody,
    SecPrefix,
    SecPostfix,
    SrtpsPrefix,
    SrtpsPostfix,
    /// Vendor-specific id (0x80–0xff).
    Vendor(u8),
    /// An id below 0x80 that the standard does not define.
    Unknown(u8),
    /// Not RTPS: a Zenoh message (its own name is in the event's Zenoh
    /// fields). A Zenoh message that carries a ROS 2 sample is a `Data`.
    Zenoh,
}

impl SubmsgKind {
    pub fn from_id(id: u8) -> SubmsgKind {
        match id {
            PAD => SubmsgKind::Pad,
            ACKNACK => SubmsgKind::AckNack,
            HEARTBEAT => SubmsgKind::Heartbeat,
            GAP => SubmsgKind::Gap,
            INFO_TS => SubmsgKind::InfoTs,
            INFO_SRC => SubmsgKind::InfoSrc,
            INFO_REPLY_IP4 => SubmsgKind::InfoReplyIp4,
            INFO_DST => SubmsgKind::InfoDst,
            INFO_REPLY => SubmsgKind::InfoReply,
            NACK_FRAG => SubmsgKind::NackFrag,
            HEARTBEAT_FRAG => SubmsgKind::HeartbeatFrag,
            DATA => SubmsgKind::Data,
            DATA_FRAG => SubmsgKind::DataFrag,
            SEC_BODY => SubmsgKind::SecBody,
            SEC_PREFIX => SubmsgKind::SecPrefix,
            SEC_POSTFIX => SubmsgKind::SecPostfix,
            SRTPS_PREFIX => SubmsgKind::SrtpsPrefix,
            SRTPS_POSTFIX => SubmsgKind::SrtpsPostfix,
            v if v >= 0x80 => SubmsgKind::Vendor(v),
            v => SubmsgKind::Unknown(v),
        }
    }

    /// Name used in every output (`DATA_FRAG`, `VENDOR(0x80)`, …).
    pub fn name(&self) -> std::borrow::Cow<'static, str> {
        use std::borrow::Cow::Borrowed;
        match self {
            SubmsgKind::Pad => Borrowed("PAD"),
            SubmsgKind::AckNack => Borrowed("ACKNACK"),
            SubmsgKind::Heartbeat => Borrowed("HEARTBEAT"),
            SubmsgKind::Gap => Borrowed("GAP"),
            SubmsgKind::InfoTs => Borrowed("INFO_TS"),
            SubmsgKind::InfoSrc => Borrowed("INFO_SRC"),
            SubmsgKind::InfoReplyIp4 => Borrowed("INFO_REPLY_IP4"),
            SubmsgKind::InfoDst => Borrowed("INFO_DST"),
            SubmsgKind::InfoReply => Borrowed("INFO_REPLY"),
            SubmsgKind::NackFrag => Borrowed("NACK_FRAG"),
            SubmsgKind::HeartbeatFrag => Borrowed("HEARTBEAT_FRAG"),
            SubmsgKind::Data => Borrowed("DATA"),
            SubmsgKind::DataFrag => Borrowed("DATA_FRAG"),
            SubmsgKind::SecBody => Borrowed("SEC_BODY"),
            SubmsgKind::SecPrefix => Borrowed("SEC_PREFIX"),
            SubmsgKind::SecPostfix => Borrowed("SEC_POSTFIX"),
            SubmsgKind::SrtpsPrefix => Borrowed("SRTPS_PREFIX"),
            SubmsgKind::SrtpsPostfix => Borrowed("SRTPS_POSTFIX"),
            SubmsgKind::Vendor(v) => std::borrow::Cow::Owned(format!("VENDOR(0x{v:02x})")),
            SubmsgKind::Unknown(v) => std::borrow::Cow::Owned(format!("UNKNOWN(0x{v:02x})")),
            SubmsgKind::Zenoh => Borrowed("ZENOH"),
        }
    }

    /// Parses a name as printed by [`SubmsgKind::name`] (case-insensitive).
    pub fn parse_name(s: &str) -> Option<SubmsgKind> {
        let u = s.trim().to_ascii_uppercase();
        let hex_in = |prefix: &str| -> Option<u8> {
            let inner = u.strip_prefix(prefix)?.strip_suffix(')')?;
            u8::from_str_radix(inner.trim_start_matches("0X"), 16).ok()
        };
        if let Some(v) = hex_in("VENDOR(") {
            return Some(SubmsgKind::Vendor(v));
        }
        if let Some(v) = hex_in("UNKNOWN(") {
            return Some(SubmsgKind::Unknown(v));
        }
        if u == "ZENOH" {
            return Some(SubmsgKind::Zenoh);
        }
        (0u8..0x80).map(SubmsgKind::from_id).find(|k| k.name() == u.as_str())
    }

    pub fn is_security(&self) -> bool {
        matches!(
            self,
            SubmsgKind::SecBody
                | SubmsgKind::SecPrefix
                | SubmsgKind::SecPostfix
                | SubmsgKind::SrtpsPrefix
                | SubmsgKind::SrtpsPostfix
        )
    }
}

/// The 20-byte RTPS message header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub version_major: u8,
    pub version_minor: u8,
    pub vendor_id: u16,
    pub guid_prefix: GuidPrefix,
}

impl Header {
    /// A version 2.3 header (what the synthetic traffic and most vendors write).
    pub fn new(vendor_id: u16, guid_prefix: GuidPrefix) -> Header {
        Header { version_major: 2, version_minor: 3, vendor_id, guid_prefix }
    }
    pub fn parse(buf: &[u8]) -> Result<Header, WireError> {
        parse_header(buf)
    }
}

impl Emit for Header {
    fn buffer_len(&self) -> usize {
        HEADER_LEN
    }
    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = slice_mut(buf, 0, HEADER_LEN, "RTPS header")?;
        h[..4].copy_from_slice(MAGIC);
        h[4] = self.version_major;
        h[5] = self.version_minor;
        h[6..8].copy_from_slice(&self.vendor_id.to_be_bytes());
        h[8..20].copy_from_slice(&self.guid_prefix.0);
        Ok(HEADER_LEN)
    }
}

/// True when `payload` starts with an RTPS version-2 header. DDS traffic is
/// recognised by content, never by port.
pub fn is_rtps(payload: &[u8]) -> bool {
    payload.len() >= HEADER_LEN && &payload[..4] == MAGIC && payload[4] == 2
}

pub fn parse_header(buf: &[u8]) -> Result<Header, WireError> {
    let h = slice(buf, 0, HEADER_LEN, "RTPS header")?;
    if &h[..4] != MAGIC {
        return Err(WireError::malformed("RTPS header", "no RTPS magic"));
    }
    let mut prefix = [0u8; 12];
    prefix.copy_from_slice(&h[8..20]);
    Ok(Header { version_major: h[4], version_minor: h[5], vendor_id: u16::from_be_bytes([h[6], h[7]]), guid_prefix: GuidPrefix(prefix) })
}

/// The 4-byte submessage header: id, flags, octetsToNextHeader (in the byte
/// order the E flag gives).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmessageHeader {
    pub id: u8,
    pub flags: u8,
    pub octets_to_next_header: u16,
}

impl SubmessageHeader {
    pub const LEN: usize = 4;

    #[inline]
    pub fn little_endian(&self) -> bool {
        self.flags & flags::E != 0
    }

    #[inline]
    pub fn parse(buf: &[u8]) -> Result<SubmessageHeader, WireError> {
        let h = slice(buf, 0, Self::LEN, "submessage header")?;
        let (id, flags) = (h[0], h[1]);
        let octets_to_next_header =
            if flags & flags::E != 0 { u16::from_le_bytes([h[2], h[3]]) } else { u16::from_be_bytes([h[2], h[3]]) };
        Ok(SubmessageHeader { id, flags, octets_to_next_header })
    }
}

impl Emit for SubmessageHeader {
    fn buffer_len(&self) -> usize {
        Self::LEN
    }
    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = slice_mut(buf, 0, Self::LEN, "submessage header")?;
        h[0] = self.id;
        h[1] = self.flags;
        let n = self.octets_to_next_header;
        h[2..4].copy_from_slice(&if self.little_endian() { n.to_le_bytes() } else { n.to_be_bytes() });
        Ok(Self::LEN)
    }
}

/// One submessage as framed by its header, not yet interpreted.
#[derive(Debug, Clone, Copy)]
pub struct RawSubmessage<'a> {
    pub id: u8,
    pub flags: u8,
    /// Byte offset of the submessage header within the RTPS message.
    pub offset: usize,
    /// Submessage body (after the 4-byte header); shorter than
    /// `declared_len` when the capture cut the message (snap length).
    pub body: &'a [u8],
    /// Body length the header announces (octetsToNextHeader, resolved).
    pub declared_len: usize,
}

impl<'a> RawSubmessage<'a> {
    /// A submessage to emit as it is: any id, flags (E included) and body.
    pub fn new(id: u8, flags: u8, body: &'a [u8]) -> Self {
        RawSubmessage { id, flags, offset: 0, body, declared_len: body.len() }
    }
    pub fn kind(&self) -> SubmsgKind {
        SubmsgKind::from_id(self.id)
    }
    pub fn little_endian(&self) -> bool {
        self.flags & flags::E != 0
    }
    /// True when the capture holds only part of this submessage.
    pub fn is_cut(&self) -> bool {
        self.body.len() < self.declared_len
    }
    fn reader(&self) -> CdrReader<'a> {
        CdrReader::new(self.body, self.little_endian())
    }
    /// Interprets the body according to the submessage id.
    pub fn parse(&self) -> Result<Submessage<'a>, WireError> {
        parse_body(self)
    }
}

impl Emit for RawSubmessage<'_> {
    fn buffer_len(&self) -> usize {
        SubmessageHeader::LEN + self.body.len()
    }
    /// Writes the header (octetsToNextHeader = the body's length) and the body.
    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = u16::try_from(self.body.len()).map_err(|_| WireError::malformed("submessage body", "over 65535 bytes"))?;
        room(buf, self.buffer_len(), "submessage")?;
        SubmessageHeader { id: self.id, flags: self.flags, octets_to_next_header: len }.emit(buf)?;
        buf[SubmessageHeader::LEN..self.buffer_len()].copy_from_slice(self.body);
        Ok(self.buffer_len())
    }
}

/// Iterates the submessages of one RTPS message (the bytes after the header).
/// After an error (a length that runs past the message) iteration stops: the
/// lengths no longer say where the next submessage starts.
#[derive(Debug, Clone)]
pub struct SubmessageIter<'a> {
    msg: &'a [u8],
    pos: usize,
    done: bool,
    /// The message was cut by the capture: a submessage running past the end
    /// is returned as cut instead of as an error.
    cut: bool,
}

impl<'a> SubmessageIter<'a> {
    /// `msg` is the whole RTPS message including its 20-byte header.
    pub fn new(msg: &'a [u8]) -> Self {
        SubmessageIter { msg, pos: HEADER_LEN, done: msg.len() < HEADER_LEN, cut: false }
    }

    /// For a message the capture cut short (snap length): the submessage that
    /// runs past the end is returned with its available bytes (`is_cut`).
    pub fn new_cut(msg: &'a [u8]) -> Self {
        SubmessageIter { msg, pos: HEADER_LEN, done: msg.len() < HEADER_LEN, cut: true }
    }
}

impl<'a> Iterator for SubmessageIter<'a> {
    type Item = Result<RawSubmessage<'a>, WireError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.msg.len() {
            return None;
        }
        let rest = &self.msg[self.pos..];
        let h = match SubmessageHeader::parse(rest) {
            Ok(h) => h,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        let (id, flags) = (h.id, h.flags);
        let raw_len = h.octets_to_next_header as usize;
        // octetsToNextHeader == 0 means "to the end of the message", except for
        // PAD and INFO_TS whose bodies can legitimately be empty.
        let len = if raw_len == 0 && id != PAD && id != INFO_TS { rest.len() - 4 } else { raw_len };
        if 4 + len > rest.len() {
            self.done = true;
            if self.cut {
                return Some(Ok(RawSubmessage { id, flags, offset: self.pos, body: &rest[4..], declared_len: len }));
            }
            return Some(Err(WireError::truncated("submessage body", 4 + len, rest.len())));
        }
        let sm = RawSubmessage { id, flags, offset: self.pos, body: &rest[4..4 + len], declared_len: len };
        self.pos += 4 + len;
        Some(Ok(sm))
    }
}

/// Most bits a SequenceNumberSet or FragmentNumberSet may have.
pub const MAX_SET_BITS: u32 = 256;

/// SequenceNumberSet or FragmentNumberSet: base, number of bits, bitmap
/// (bit i, counted from the most significant bit of the first word, stands
/// for number `base + i`). The bitmap is copied out of the message (at most
/// 32 bytes), so the set can also be built to be emitted; the lifetime
/// parameter is unused and kept so that code written against the borrowed
/// view (`NumberSet<'_>`) compiles unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumberSet<'a> {
    pub base: i64,
    pub num_bits: u32,
    words: [u32; 8],
    _message: PhantomData<&'a [u8]>,
}

impl<'a> NumberSet<'a> {
    /// An empty set of `num_bits` bits (at most 256).
    pub fn new(base: i64, num_bits: u32) -> Result<Self, WireError> {
        if num_bits > MAX_SET_BITS {
            return Err(WireError::malformed("number set", "more than 256 bits"));
        }
        Ok(NumberSet { base, num_bits, words: [0; 8], _message: PhantomData })
    }

    /// The set of `members`, with as many bits as the largest member needs
    /// (none when `members` is empty). Every member must lie in
    /// `base..base + 256`.
    pub fn from_members(base: i64, members: &[i64]) -> Result<Self, WireError> {
        let mut num_bits = 0u32;
        for &m in members {
            let i = m.checked_sub(base).filter(|i| (0..MAX_SET_BITS as i64).contains(i));
            let Some(i) = i else { return Err(WireError::malformed("number set", "member outside base..base+256")) };
            num_bits = num_bits.max(i as u32 + 1);
        }
        let mut set = NumberSet::new(base, num_bits)?;
        for &m in members {
            set.words[((m - base) / 32) as usize] |= 1 << (31 - (m - base) % 32);
        }
        Ok(set)
    }

    /// A set with the given bitmap words (as many as `num_bits` needs).
    pub fn from_words(base: i64, num_bits: u32, words: &[u32]) -> Result<Self, WireError> {
        let mut set = NumberSet::new(base, num_bits)?;
        if words.len() != set.word_count() {
            return Err(WireError::malformed("number set", "bitmap word count does not match numBits"));
        }
        set.words[..words.len()].copy_from_slice(words);
        Ok(set)
    }

    fn word_count(&self) -> usize {
        self.num_bits.div_ceil(32) as usize
    }

    /// The bitmap words on the wire (bits past `num_bits` in the last word
    /// are kept as they were sent).
    pub fn words(&self) -> &[u32] {
        &self.words[..self.word_count()]
    }

    /// Bytes the set takes on the wire: a SequenceNumberSet (`sequence`)
    /// has an 8-byte base, a FragmentNumberSet a 4-byte one.
    pub fn wire_len(&self, sequence: bool) -> usize {
        (if sequence { 8 } else { 4 }) + 4 + 4 * self.word_count()
    }

    #[inline]
    fn read(r: &mut CdrReader<'a>, sequence: bool, what: &'static str) -> Result<Self, WireError> {
        let base = if sequence { r.sequence_number(what)? } else { r.u32(what)? as i64 };
        let num_bits = r.u32(what)?;
        if num_bits > MAX_SET_BITS {
            return Err(WireError::malformed(what, "more than 256 bits"));
        }
        let mut set = NumberSet { base, num_bits, words: [0; 8], _message: PhantomData };
        for w in 0..set.word_count() {
            set.words[w] = r.u32(what)?;
        }
        Ok(set)
    }

    fn write(&self, w: &mut CdrWriter<'_>, sequence: bool, what: &'static str) -> Result<(), WireError> {
        if sequence {
            w.sequence_number(self.base, what)?;
        } else {
            let base = u32::try_from(self.base).map_err(|_| WireError::malformed(what, "fragment number base outside 0..2^32"))?;
            w.u32(base, what)?;
        }
        if self.num_bits > MAX_SET_BITS {
            return Err(WireError::malformed(what, "more than 256 bits"));
        }
        w.u32(self.num_bits, what)?;
        for &word in self.words() {
            w.u32(word, what)?;
        }
        Ok(())
    }

    /// Whether bit `i` (number `base + i`) is set.
    #[inline]
    pub fn contains_bit(&self, i: u32) -> bool {
        i < self.num_bits && self.words[(i / 32) as usize] & (1 << (31 - (i % 32))) != 0
    }
    /// Numbers in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        (0..self.num_bits).filter(|&i| self.contains_bit(i)).map(move |i| self.base + i as i64)
    }
    pub fn len(&self) -> usize {
        (0..self.num_bits).filter(|&i| self.contains_bit(i)).count()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// RTPS Time_t as carried by INFO_TS: seconds and 2^-32 fractions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Time {
    pub seconds: u32,
    pub fraction: u32,
}

impl Time {
    pub fn to_unix_nanos(&self) -> i64 {
        // Round to the nearest nanosecond (one fraction unit is 0.23 ns).
        self.seconds as i64 * 1_000_000_000 + ((self.fraction as u64 * 1_000_000_000 + (1 << 31)) >> 32) as i64
    }
    /// The time of `unix_ns` (0 ≤ unix_ns < 2^32 s), fraction rounded down;
    /// [`Time::to_unix_nanos`] gives `unix_ns` back exactly.
    pub fn from_unix_nanos(unix_ns: i64) -> Time {
        let secs = unix_ns.div_euclid(1_000_000_000);
        let rest = unix_ns.rem_euclid(1_000_000_000) as u64;
        Time { seconds: secs as u32, fraction: ((rest << 32) / 1_000_000_000) as u32 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Data<'a> {
    pub reader_id: EntityId,
    pub writer_id: EntityId,
    pub writer_sn: i64,
    /// The inline QoS ParameterList, sentinel included, in the submessage's byte order.
    pub inline_qos: Option<&'a [u8]>,
    /// Serialized payload (data or key), if the D or K flag is set (as captured).
    pub payload: Option<&'a [u8]>,
    /// Payload length on the wire (larger than `payload` when the capture cut it).
    pub payload_len: usize,
    pub key_flag: bool,
    /// The N flag: the payload is not a standard serialized payload.
    pub non_standard_payload: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataFrag<'a> {
    pub reader_id: EntityId,
    pub writer_id: EntityId,
    pub writer_sn: i64,
    pub fragment_starting_num: u32,
    pub fragments_in_submessage: u16,
    pub fragment_size: u16,
    pub sample_size: u32,
    /// The inline QoS ParameterList, sentinel included, in the submessage's byte order.
    pub inline_qos: Option<&'a [u8]>,
    /// The fragment bytes carried by this submessage (as captured).
    pub payload: &'a [u8],
    /// Fragment bytes on the wire (larger than `payload` when the capture cut them).
    pub payload_len: usize,
    pub key_flag: bool,
    /// The N flag: the payload is not a standard serialized payload.
    pub non_standard_payload: bool,
}

/// HEARTBEAT without the group information of RTPS 2.4+ (the G flag's
/// extra fields are skipped on parsing and never written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    pub reader_id: EntityId,
    pub writer_id: EntityId,
    pub first_sn: i64,
    pub last_sn: i64,
    pub count: i32,
    pub final_flag: bool,
    pub liveliness_flag: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatFrag {
    pub reader_id: EntityId,
    pub writer_id: EntityId,
    pub writer_sn: i64,
    pub last_fragment_num: u32,
    pub count: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckNack<'a> {
    pub reader_id: EntityId,
    pub writer_id: EntityId,
    pub reader_sn_state: NumberSet<'a>,
    pub count: i32,
    pub final_flag: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NackFrag<'a> {
    pub reader_id: EntityId,
    pub writer_id: EntityId,
    pub writer_sn: i64,
    pub fragment_number_state: NumberSet<'a>,
    pub count: i32,
}

/// GAP without the group information and filtered count of RTPS 2.4+ (the
/// G and F flags' extra fields are skipped on parsing and never written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap<'a> {
    pub reader_id: EntityId,
    pub writer_id: EntityId,
    pub gap_start: i64,
    pub gap_list: NumberSet<'a>,
}

/// Most locators a locator list may announce (guards against corrupt counts).
pub const MAX_LOCATORS: u32 = 1024;

/// A LocatorList (INFO_REPLY): a view over the locators as they are on the
/// wire in the given byte order.
#[derive(Clone, Copy)]
pub struct LocatorList<'a> {
    bytes: &'a [u8],
    little_endian: bool,
}

impl<'a> LocatorList<'a> {
    /// A list over `bytes` (whole 24-byte locators in the given byte order).
    pub fn new(bytes: &'a [u8], little_endian: bool) -> Result<Self, WireError> {
        if bytes.len() % Locator::LEN != 0 {
            return Err(WireError::malformed("locator list", "not a whole number of locators"));
        }
        if bytes.len() / Locator::LEN > MAX_LOCATORS as usize {
            return Err(WireError::malformed("locator list", "more than 1024 locators"));
        }
        Ok(LocatorList { bytes, little_endian })
    }
    /// Appends `locators` to `out` in the given byte order (for [`LocatorList::new`]).
    pub fn encode(locators: &[Locator], little_endian: bool, out: &mut Vec<u8>) -> Result<(), WireError> {
        let at = out.len();
        out.resize(at + locators.len() * Locator::LEN, 0);
        let mut w = CdrWriter::new(&mut out[at..], little_endian);
        for l in locators {
            l.write(&mut w)?;
        }
        Ok(())
    }
    pub fn len(&self) -> usize {
        self.bytes.len() / Locator::LEN
    }
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = Locator> + 'a {
        let le = self.little_endian;
        self.bytes.chunks_exact(Locator::LEN).filter_map(move |c| Locator::read(&mut CdrReader::new(c, le)).ok())
    }
    fn wire_len(&self) -> usize {
        4 + self.bytes.len()
    }
    fn read(r: &mut CdrReader<'a>, what: &'static str) -> Result<Self, WireError> {
        let count = r.u32(what)?;
        if count > MAX_LOCATORS {
            return Err(WireError::malformed(what, "more than 1024 locators"));
        }
        let bytes = r.bytes(count as usize * Locator::LEN, what)?;
        Ok(LocatorList { bytes, little_endian: r.little_endian() })
    }
    fn write(&self, w: &mut CdrWriter<'_>, what: &'static str) -> Result<(), WireError> {
        w.u32(self.len() as u32, what)?;
        if self.little_endian == w.little_endian() {
            return w.bytes(self.bytes, what);
        }
        for l in self.iter() {
            l.write(w)?;
        }
        Ok(())
    }
}

/// Two lists are equal when they hold the same locators, whatever their byte order.
impl PartialEq for LocatorList<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}
impl Eq for LocatorList<'_> {}

impl std::fmt::Debug for LocatorList<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A typed submessage: what parsing a [`RawSubmessage`] gives, and what
/// [`Submessage::emit`] writes back (with the byte order given there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submessage<'a> {
    Data(Data<'a>),
    DataFrag(DataFrag<'a>),
    Heartbeat(Heartbeat),
    HeartbeatFrag(HeartbeatFrag),
    AckNack(AckNack<'a>),
    NackFrag(NackFrag<'a>),
    Gap(Gap<'a>),
    /// `None` when the invalidate flag is set.
    InfoTs(Option<Time>),
    InfoSrc { version: (u8, u8), vendor_id: u16, guid_prefix: GuidPrefix },
    InfoDst { guid_prefix: GuidPrefix },
    /// Multicast locators are present when the M flag is set.
    InfoReply { unicast: LocatorList<'a>, multicast: Option<LocatorList<'a>> },
    InfoReplyIp4 { unicast: (u32, u32), multicast: Option<(u32, u32)> },
    /// Emitted with an empty body; a PAD with a body is a [`RawSubmessage`].
    Pad,
    /// SEC_* / SRTPS_* submessages: opaque (encrypted or MACs); emitted as [`RawSubmessage`].
    Security,
    /// Vendor-specific or unknown id: skipped by length; emitted as [`RawSubmessage`].
    Opaque,
}

fn entity(r: &mut CdrReader<'_>, what: &'static str) -> Result<EntityId, WireError> {
    Ok(EntityId(r.array::<4>(what)?))
}

/// Splits DATA/DATA_FRAG bodies at inline QoS and payload.
/// `min_start` = first byte after the fixed fields; octetsToInlineQos counts from byte 4.
#[inline]
fn inline_qos_and_payload<'a>(
    body: &'a [u8],
    octets_to_inline_qos: u16,
    has_qos: bool,
    le: bool,
    min_start: usize,
    what: &'static str,
) -> Result<(Option<&'a [u8]>, usize), WireError> {
    let start = 4 + octets_to_inline_qos as usize;
    if start < min_start {
        return Err(WireError::malformed(what, "octetsToInlineQos points inside the fixed fields"));
    }
    if start > body.len() {
        return Err(WireError::truncated(what, start, body.len()));
    }
    if has_qos {
        let len = plist::list_len(&body[start..], le)?;
        Ok((Some(&body[start..start + len]), start + len))
    } else {
        Ok((None, start))
    }
}

/// RTPS 2.5 8.3.7.2.3 (DATA) and 8.3.7.3.3 (DATA_FRAG): the submessage is
/// invalid when writerSN is not strictly positive (0 and negative numbers,
/// SEQUENCENUMBER_UNKNOWN among them). Such a submessage is not a sample.
fn check_writer_sn(sn: i64, what: &'static str) -> Result<(), WireError> {
    if sn <= 0 {
        return Err(WireError::malformed(what, "not strictly positive (RTPS 2.5 8.3.7.2.3: the submessage is invalid)"));
    }
    Ok(())
}

#[inline]
fn parse_body<'a>(sm: &RawSubmessage<'a>) -> Result<Submessage<'a>, WireError> {
    let le = sm.little_endian();
    let f = sm.flags;
    let mut r = sm.reader();
    Ok(match sm.id {
        DATA => {
            const W: &str = "DATA submessage";
            r.u16(W)?; // extraFlags
            let otiq = r.u16(W)?;
            let reader_id = entity(&mut r, W)?;
            let writer_id = entity(&mut r, W)?;
            let writer_sn = r.sequence_number(W)?;
            check_writer_sn(writer_sn, "DATA writerSN")?;
            let (q, d, k) = (f & flags::data::Q != 0, f & flags::data::D != 0, f & flags::data::K != 0);
            let (inline_qos, at) = inline_qos_and_payload(sm.body, otiq, q, le, DATA_FIXED_LEN, W)?;
            let payload = if d || k { Some(&sm.body[at..]) } else { None };
            let payload_len = if d || k { sm.declared_len.saturating_sub(at) } else { 0 };
            Submessage::Data(Data {
                reader_id,
                writer_id,
                writer_sn,
                inline_qos,
                payload,
                payload_len,
                key_flag: k,
                non_standard_payload: f & flags::data::N != 0,
            })
        }
        DATA_FRAG => {
            const W: &str = "DATA_FRAG submessage";
            r.u16(W)?;
            let otiq = r.u16(W)?;
            let reader_id = entity(&mut r, W)?;
            let writer_id = entity(&mut r, W)?;
            let writer_sn = r.sequence_number(W)?;
            check_writer_sn(writer_sn, "DATA_FRAG writerSN")?;
            let fragment_starting_num = r.u32(W)?;
            let fragments_in_submessage = r.u16(W)?;
            let fragment_size = r.u16(W)?;
            let sample_size = r.u32(W)?;
            let (q, k) = (f & flags::data_frag::Q != 0, f & flags::data_frag::K != 0);
            let (inline_qos, at) = inline_qos_and_payload(sm.body, otiq, q, le, DATA_FRAG_FIXED_LEN, W)?;
            if fragment_starting_num == 0 {
                return Err(WireError::malformed("DATA_FRAG fragmentStartingNum", "fragment numbers start at 1"));
            }
            Submessage::DataFrag(DataFrag {
                reader_id,
                writer_id,
                writer_sn,
                fragment_starting_num,
                fragments_in_submessage,
                fragment_size,
                sample_size,
                inline_qos,
                payload: &sm.body[at..],
                payload_len: sm.declared_len.saturating_sub(at),
                key_flag: k,
                non_standard_payload: f & flags::data_frag::N != 0,
            })
        }
        HEARTBEAT => {
            const W: &str = "HEARTBEAT submessage";
            Submessage::Heartbeat(Heartbeat {
                reader_id: entity(&mut r, W)?,
                writer_id: entity(&mut r, W)?,
                first_sn: r.sequence_number(W)?,
                last_sn: r.sequence_number(W)?,
                count: r.i32(W)?,
                final_flag: f & flags::heartbeat::F != 0,
                liveliness_flag: f & flags::heartbeat::L != 0,
            })
        }
        HEARTBEAT_FRAG => {
            const W: &str = "HEARTBEAT_FRAG submessage";
            Submessage::HeartbeatFrag(HeartbeatFrag {
                reader_id: entity(&mut r, W)?,
                writer_id: entity(&mut r, W)?,
                writer_sn: r.sequence_number(W)?,
                last_fragment_num: r.u32(W)?,
                count: r.i32(W)?,
            })
        }
        ACKNACK => {
            const W: &str = "ACKNACK submessage";
            let reader_id = entity(&mut r, W)?;
            let writer_id = entity(&mut r, W)?;
            let reader_sn_state = NumberSet::read(&mut r, true, "ACKNACK readerSNState")?;
            let count = r.i32(W)?;
            Submessage::AckNack(AckNack { reader_id, writer_id, reader_sn_state, count, final_flag: f & flags::acknack::F != 0 })
        }
        NACK_FRAG => {
            const W: &str = "NACK_FRAG submessage";
            let reader_id = entity(&mut r, W)?;
            let writer_id = entity(&mut r, W)?;
            let writer_sn = r.sequence_number(W)?;
            let fragment_number_state = NumberSet::read(&mut r, false, "NACK_FRAG fragmentNumberState")?;
            let count = r.i32(W)?;
            Submessage::NackFrag(NackFrag { reader_id, writer_id, writer_sn, fragment_number_state, count })
        }
        GAP => {
            const W: &str = "GAP submessage";
            let reader_id = entity(&mut r, W)?;
            let writer_id = entity(&mut r, W)?;
            let gap_start = r.sequence_number(W)?;
            let gap_list = NumberSet::read(&mut r, true, "GAP gapList")?;
            Submessage::Gap(Gap { reader_id, writer_id, gap_start, gap_list })
        }
        INFO_TS => {
            if f & flags::info_ts::I != 0 {
                Submessage::InfoTs(None)
            } else {
                const W: &str = "INFO_TS timestamp";
                Submessage::InfoTs(Some(Time { seconds: r.u32(W)?, fraction: r.u32(W)? }))
            }
        }
        INFO_SRC => {
            const W: &str = "INFO_SRC submessage";
            r.u32(W)?; // unused
            let v = r.array::<2>(W)?;
            let vendor = r.array::<2>(W)?;
            let prefix = r.array::<12>(W)?;
            Submessage::InfoSrc { version: (v[0], v[1]), vendor_id: u16::from_be_bytes(vendor), guid_prefix: GuidPrefix(prefix) }
        }
        INFO_DST => Submessage::InfoDst { guid_prefix: GuidPrefix(r.array::<12>("INFO_DST submessage")?) },
        INFO_REPLY => {
            const W: &str = "INFO_REPLY locator list";
            let unicast = LocatorList::read(&mut r, W)?;
            let multicast = if f & flags::info_reply::M != 0 { Some(LocatorList::read(&mut r, W)?) } else { None };
            Submessage::InfoReply { unicast, multicast }
        }
        INFO_REPLY_IP4 => {
            const W: &str = "INFO_REPLY_IP4 submessage";
            let unicast = (r.u32(W)?, r.u32(W)?);
            let multicast = if f & flags::info_reply_ip4::M != 0 { Some((r.u32(W)?, r.u32(W)?)) } else { None };
            Submessage::InfoReplyIp4 { unicast, multicast }
        }
        PAD => Submessage::Pad,
        SEC_BODY | SEC_PREFIX | SEC_POSTFIX | SRTPS_PREFIX | SRTPS_POSTFIX => Submessage::Security,
        _ => Submessage::Opaque,
    })
}

/// Bytes of DATA's fixed fields (extraFlags … writerSN).
const DATA_FIXED_LEN: usize = 20;
/// Bytes of DATA_FRAG's fixed fields (extraFlags … sampleSize).
const DATA_FRAG_FIXED_LEN: usize = 32;

/// A ParameterList given as inline QoS must be exactly one list in the
/// submessage's byte order.
fn check_inline_qos(q: Option<&[u8]>, le: bool, what: &'static str) -> Result<(), WireError> {
    match q {
        Some(q) if plist::list_len(q, le).ok() != Some(q.len()) => {
            Err(WireError::malformed(what, "inline QoS is not one parameter list ending with PID_SENTINEL in the submessage's byte order"))
        }
        _ => Ok(()),
    }
}

impl<'a> Submessage<'a> {
    /// The submessage id; `None` for [`Submessage::Security`] and
    /// [`Submessage::Opaque`], which do not record theirs.
    pub fn id(&self) -> Option<u8> {
        Some(match self {
            Submessage::Data(_) => DATA,
            Submessage::DataFrag(_) => DATA_FRAG,
            Submessage::Heartbeat(_) => HEARTBEAT,
            Submessage::HeartbeatFrag(_) => HEARTBEAT_FRAG,
            Submessage::AckNack(_) => ACKNACK,
            Submessage::NackFrag(_) => NACK_FRAG,
            Submessage::Gap(_) => GAP,
            Submessage::InfoTs(_) => INFO_TS,
            Submessage::InfoSrc { .. } => INFO_SRC,
            Submessage::InfoDst { .. } => INFO_DST,
            Submessage::InfoReply { .. } => INFO_REPLY,
            Submessage::InfoReplyIp4 { .. } => INFO_REPLY_IP4,
            Submessage::Pad => PAD,
            Submessage::Security | Submessage::Opaque => return None,
        })
    }

    /// The flag bits the content implies, without the E (endianness) flag.
    pub fn flags(&self) -> u8 {
        let on = |b: bool, f: u8| if b { f } else { 0 };
        match self {
            Submessage::Data(d) => {
                on(d.inline_qos.is_some(), flags::data::Q)
                    | on(d.payload.is_some() && !d.key_flag, flags::data::D)
                    | on(d.key_flag, flags::data::K)
                    | on(d.non_standard_payload, flags::data::N)
            }
            Submessage::DataFrag(d) => {
                on(d.inline_qos.is_some(), flags::data_frag::Q)
                    | on(d.key_flag, flags::data_frag::K)
                    | on(d.non_standard_payload, flags::data_frag::N)
            }
            Submessage::Heartbeat(h) => on(h.final_flag, flags::heartbeat::F) | on(h.liveliness_flag, flags::heartbeat::L),
            Submessage::AckNack(a) => on(a.final_flag, flags::acknack::F),
            Submessage::InfoTs(t) => on(t.is_none(), flags::info_ts::I),
            Submessage::InfoReply { multicast, .. } => on(multicast.is_some(), flags::info_reply::M),
            Submessage::InfoReplyIp4 { multicast, .. } => on(multicast.is_some(), flags::info_reply_ip4::M),
            _ => 0,
        }
    }

    /// Bytes of the body [`Submessage::emit`] writes (after the 4-byte header).
    pub fn body_len(&self) -> usize {
        let qos = |q: Option<&[u8]>| q.map_or(0, <[u8]>::len);
        match self {
            Submessage::Data(d) => DATA_FIXED_LEN + qos(d.inline_qos) + d.payload.map_or(0, <[u8]>::len),
            Submessage::DataFrag(d) => DATA_FRAG_FIXED_LEN + qos(d.inline_qos) + d.payload.len(),
            Submessage::Heartbeat(_) => 28,
            Submessage::HeartbeatFrag(_) => 24,
            Submessage::AckNack(a) => 8 + a.reader_sn_state.wire_len(true) + 4,
            Submessage::NackFrag(n) => 16 + n.fragment_number_state.wire_len(false) + 4,
            Submessage::Gap(g) => 16 + g.gap_list.wire_len(true),
            Submessage::InfoTs(t) => t.map_or(0, |_| 8),
            Submessage::InfoSrc { .. } => 20,
            Submessage::InfoDst { .. } => 12,
            Submessage::InfoReply { unicast, multicast } => unicast.wire_len() + multicast.map_or(0, |m| m.wire_len()),
            Submessage::InfoReplyIp4 { multicast, .. } => 8 + multicast.map_or(0, |_| 8),
            Submessage::Pad | Submessage::Security | Submessage::Opaque => 0,
        }
    }

    /// Bytes [`Submessage::emit`] writes: header and body.
    pub fn buffer_len(&self) -> usize {
        SubmessageHeader::LEN + self.body_len()
    }

    /// Checks that the content can be written so that parsing gives it back.
    fn check(&self, le: bool) -> Result<u8, WireError> {
        let Some(id) = self.id() else {
            return Err(WireError::malformed("submessage", "security and vendor submessages are opaque: emit them as RawSubmessage"));
        };
        match self {
            Submessage::Data(d) => {
                check_writer_sn(d.writer_sn, "DATA writerSN")?;
                check_inline_qos(d.inline_qos, le, "DATA submessage")?;
                match d.payload {
                    Some(p) if p.len() != d.payload_len => {
                        return Err(WireError::malformed("DATA payload", "cut by the capture (payload_len is over the bytes held)"))
                    }
                    None if d.key_flag || d.payload_len != 0 => {
                        return Err(WireError::malformed("DATA payload", "a key or a payload length needs payload bytes"))
                    }
                    _ => {}
                }
            }
            Submessage::DataFrag(d) => {
                check_writer_sn(d.writer_sn, "DATA_FRAG writerSN")?;
                check_inline_qos(d.inline_qos, le, "DATA_FRAG submessage")?;
                if d.payload.len() != d.payload_len {
                    return Err(WireError::malformed("DATA_FRAG payload", "cut by the capture (payload_len is over the bytes held)"));
                }
                if d.fragment_starting_num == 0 {
                    return Err(WireError::malformed("DATA_FRAG fragmentStartingNum", "fragment numbers start at 1"));
                }
            }
            _ => {}
        }
        if self.body_len() > u16::MAX as usize {
            return Err(WireError::malformed("submessage body", "over 65535 bytes"));
        }
        Ok(id)
    }

    /// Writes the submessage (header with the E flag for `little_endian`,
    /// then the body in that byte order) at the start of `buf`. DATA and
    /// DATA_FRAG are written with octetsToInlineQos = 16 / 28 (inline QoS
    /// right after the fixed fields) and extraFlags 0.
    pub fn emit(&self, little_endian: bool, buf: &mut [u8]) -> Result<usize, WireError> {
        let id = self.check(little_endian)?;
        let body_len = self.body_len();
        let n = SubmessageHeader::LEN + body_len;
        room(buf, n, "submessage")?;
        let flags = self.flags() | if little_endian { flags::E } else { 0 };
        SubmessageHeader { id, flags, octets_to_next_header: body_len as u16 }.emit(buf)?;
        let mut w = CdrWriter::new(&mut buf[SubmessageHeader::LEN..n], little_endian);
        self.write_body(&mut w)?;
        debug_assert_eq!(w.position(), body_len);
        Ok(n)
    }

    /// Appends the submessage to `out` (see [`Submessage::emit`]).
    pub fn emit_vec(&self, little_endian: bool, out: &mut Vec<u8>) -> Result<usize, WireError> {
        let at = out.len();
        out.resize(at + self.buffer_len(), 0);
        let res = self.emit(little_endian, &mut out[at..]);
        out.truncate(at + *res.as_ref().unwrap_or(&0));
        res
    }

    fn write_body(&self, w: &mut CdrWriter<'_>) -> Result<(), WireError> {
        match self {
            Submessage::Data(d) => {
                const W: &str = "DATA submessage";
                w.u16(0, W)?;
                w.u16((DATA_FIXED_LEN - 4) as u16, W)?;
                w.bytes(&d.reader_id.0, W)?;
                w.bytes(&d.writer_id.0, W)?;
                w.sequence_number(d.writer_sn, W)?;
                w.bytes(d.inline_qos.unwrap_or(&[]), W)?;
                w.bytes(d.payload.unwrap_or(&[]), W)
            }
            Submessage::DataFrag(d) => {
                const W: &str = "DATA_FRAG submessage";
                w.u16(0, W)?;
                w.u16((DATA_FRAG_FIXED_LEN - 4) as u16, W)?;
                w.bytes(&d.reader_id.0, W)?;
                w.bytes(&d.writer_id.0, W)?;
                w.sequence_number(d.writer_sn, W)?;
                w.u32(d.fragment_starting_num, W)?;
                w.u16(d.fragments_in_submessage, W)?;
                w.u16(d.fragment_size, W)?;
                w.u32(d.sample_size, W)?;
                w.bytes(d.inline_qos.unwrap_or(&[]), W)?;
                w.bytes(d.payload, W)
            }
            Submessage::Heartbeat(h) => {
                const W: &str = "HEARTBEAT submessage";
                w.bytes(&h.reader_id.0, W)?;
                w.bytes(&h.writer_id.0, W)?;
                w.sequence_number(h.first_sn, W)?;
                w.sequence_number(h.last_sn, W)?;
                w.i32(h.count, W)
            }
            Submessage::HeartbeatFrag(h) => {
                const W: &str = "HEARTBEAT_FRAG submessage";
                w.bytes(&h.reader_id.0, W)?;
                w.bytes(&h.writer_id.0, W)?;
                w.sequence_number(h.writer_sn, W)?;
                w.u32(h.last_fragment_num, W)?;
                w.i32(h.count, W)
            }
            Submessage::AckNack(a) => {
                const W: &str = "ACKNACK submessage";
                w.bytes(&a.reader_id.0, W)?;
                w.bytes(&a.writer_id.0, W)?;
                a.reader_sn_state.write(w, true, "ACKNACK readerSNState")?;
                w.i32(a.count, W)
            }
            Submessage::NackFrag(n) => {
                const W: &str = "NACK_FRAG submessage";
                w.bytes(&n.reader_id.0, W)?;
                w.bytes(&n.writer_id.0, W)?;
                w.sequence_number(n.writer_sn, W)?;
                n.fragment_number_state.write(w, false, "NACK_FRAG fragmentNumberState")?;
                w.i32(n.count, W)
            }
            Submessage::Gap(g) => {
                const W: &str = "GAP submessage";
                w.bytes(&g.reader_id.0, W)?;
                w.bytes(&g.writer_id.0, W)?;
                w.sequence_number(g.gap_start, W)?;
                g.gap_list.write(w, true, "GAP gapList")
            }
            Submessage::InfoTs(t) => match t {
                Some(t) => {
                    w.u32(t.seconds, "INFO_TS timestamp")?;
                    w.u32(t.fraction, "INFO_TS timestamp")
                }
                None => Ok(()),
            },
            Submessage::InfoSrc { version, vendor_id, guid_prefix } => {
                const W: &str = "INFO_SRC submessage";
                w.u32(0, W)?;
                w.bytes(&[version.0, version.1], W)?;
                w.bytes(&vendor_id.to_be_bytes(), W)?;
                w.bytes(&guid_prefix.0, W)
            }
            Submessage::InfoDst { guid_prefix } => w.bytes(&guid_prefix.0, "INFO_DST submessage"),
            Submessage::InfoReply { unicast, multicast } => {
                const W: &str = "INFO_REPLY locator list";
                unicast.write(w, W)?;
                match multicast {
                    Some(m) => m.write(w, W),
                    None => Ok(()),
                }
            }
            Submessage::InfoReplyIp4 { unicast, multicast } => {
                const W: &str = "INFO_REPLY_IP4 submessage";
                w.u32(unicast.0, W)?;
                w.u32(unicast.1, W)?;
                if let Some(m) = multicast {
                    w.u32(m.0, W)?;
                    w.u32(m.1, W)?;
                }
                Ok(())
            }
            Submessage::Pad | Submessage::Security | Submessage::Opaque => Ok(()),
        }
    }
}

/// Serialized payload encapsulation (representation identifier), RTPS 10.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encapsulation {
    CdrBe,
    CdrLe,
    PlCdrBe,
    PlCdrLe,
    Cdr2Be,
    Cdr2Le,
    DCdr2Be,
    DCdr2Le,
    PlCdr2Be,
    PlCdr2Le,
    Xml,
    Other(u16),
}

impl Encapsulation {
    pub fn from_id(id: u16) -> Self {
        match id {
            0x0000 => Encapsulation::CdrBe,
            0x0001 => Encapsulation::CdrLe,
            0x0002 => Encapsulation::PlCdrBe,
            0x0003 => Encapsulation::PlCdrLe,
            0x0006 => Encapsulation::Cdr2Be,
            0x0007 => Encapsulation::Cdr2Le,
            0x0008 => Encapsulation::DCdr2Be,
            0x0009 => Encapsulation::DCdr2Le,
            0x000a => Encapsulation::PlCdr2Be,
            0x000b => Encapsulation::PlCdr2Le,
            0x0004 => Encapsulation::Xml,
            other => Encapsulation::Other(other),
        }
    }
    /// The representation identifier on the wire.
    pub fn id(&self) -> u16 {
        match self {
            Encapsulation::CdrBe => 0x0000,
            Encapsulation::CdrLe => 0x0001,
            Encapsulation::PlCdrBe => 0x0002,
            Encapsulation::PlCdrLe => 0x0003,
            Encapsulation::Cdr2Be => 0x0006,
            Encapsulation::Cdr2Le => 0x0007,
            Encapsulation::DCdr2Be => 0x0008,
            Encapsulation::DCdr2Le => 0x0009,
            Encapsulation::PlCdr2Be => 0x000a,
            Encapsulation::PlCdr2Le => 0x000b,
            Encapsulation::Xml => 0x0004,
            Encapsulation::Other(v) => *v,
        }
    }
    /// Parameter-list encodings (discovery data).
    pub fn is_parameter_list(&self) -> Option<bool> {
        match self {
            Encapsulation::PlCdrLe | Encapsulation::PlCdr2Le => Some(true),
            Encapsulation::PlCdrBe | Encapsulation::PlCdr2Be => Some(false),
            _ => None,
        }
    }
}

/// The 4-byte header of a serialized payload: representation identifier
/// and options (both big-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadHeader {
    pub encapsulation: Encapsulation,
    pub options: u16,
}

impl PayloadHeader {
    pub const LEN: usize = 4;

    pub fn parse(payload: &[u8]) -> Result<(PayloadHeader, &[u8]), WireError> {
        let h = slice(payload, 0, Self::LEN, "serialized payload header")?;
        let repr = PayloadHeader {
            encapsulation: Encapsulation::from_id(u16::from_be_bytes([h[0], h[1]])),
            options: u16::from_be_bytes([h[2], h[3]]),
        };
        Ok((repr, &payload[Self::LEN..]))
    }
}

impl Emit for PayloadHeader {
    fn buffer_len(&self) -> usize {
        Self::LEN
    }
    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let h = slice_mut(buf, 0, Self::LEN, "serialized payload header")?;
        h[0..2].copy_from_slice(&self.encapsulation.id().to_be_bytes());
        h[2..4].copy_from_slice(&self.options.to_be_bytes());
        Ok(Self::LEN)
    }
}

/// Splits a serialized payload into its encapsulation and body.
pub fn encapsulation(payload: &[u8]) -> Result<(Encapsulation, &[u8]), WireError> {
    let (h, body) = PayloadHeader::parse(payload)?;
    Ok((h.encapsulation, body))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds an RTPS message from (id, flags, body) triples (test helper).
    pub fn message(vendor: u16, prefix: [u8; 12], subs: &[(u8, u8, Vec<u8>)]) -> Vec<u8> {
        let mut m = b"RTPS".to_vec();
        m.extend_from_slice(&[2, 3]);
        m.extend_from_slice(&vendor.to_be_bytes());
        m.extend_from_slice(&prefix);
        for (id, flags, body) in subs {
            m.push(*id);
            m.push(*flags);
            let len = body.len() as u16;
            if flags & FLAG_E != 0 {
                m.extend_from_slice(&len.to_le_bytes());
            } else {
                m.extend_from_slice(&len.to_be_bytes());
            }
            m.extend_from_slice(body);
        }
        m
    }

    fn sn_le(sn: i64) -> Vec<u8> {
        let mut v = ((sn >> 32) as i32).to_le_bytes().to_vec();
        v.extend_from_slice(&(sn as u32).to_le_bytes());
        v
    }

    fn sn_be(sn: i64) -> Vec<u8> {
        let mut v = ((sn >> 32) as i32).to_be_bytes().to_vec();
        v.extend_from_slice(&(sn as u32).to_be_bytes());
        v
    }

    #[test]
    fn kinds_round_trip_names() {
        for id in 0..=255u8 {
            let k = SubmsgKind::from_id(id);
            assert_eq!(SubmsgKind::parse_name(&k.name()), Some(k), "id {id:#x}");
        }
        assert_eq!(SubmsgKind::parse_name("data_frag"), Some(SubmsgKind::DataFrag));
    }

    #[test]
    fn data_le_with_inline_qos() {
        let mut body = vec![0, 0, 16, 0];
        body.extend_from_slice(&[0, 0, 0, 0]);
        body.extend_from_slice(&[0, 0, 0x12, 0x03]);
        body.extend_from_slice(&sn_le(7));
        body.extend_from_slice(&[0x71, 0x00, 4, 0, 0, 0, 0, 1, 0x01, 0, 0, 0]); // status info + sentinel
        body.extend_from_slice(&[0, 1, 0, 0, 0xaa, 0xbb]);
        let m = message(0x0110, [1; 12], &[(DATA, FLAG_E | 0x02 | 0x04, body)]);
        let subs: Vec<_> = SubmessageIter::new(&m).collect::<Result<_, _>>().unwrap();
        assert_eq!(subs.len(), 1);
        match subs[0].parse().unwrap() {
            Submessage::Data(d) => {
                assert_eq!(d.writer_sn, 7);
                assert_eq!(d.writer_id, EntityId([0, 0, 0x12, 0x03]));
                assert_eq!(d.inline_qos.unwrap().len(), 12);
                assert_eq!(d.payload.unwrap(), &[0, 1, 0, 0, 0xaa, 0xbb]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn data_frag_be() {
        let mut body = vec![0, 0, 0, 28];
        body.extend_from_slice(&[0, 0, 0, 0, 0, 0, 1, 2]);
        body.extend_from_slice(&sn_be(3));
        body.extend_from_slice(&11u32.to_be_bytes());
        body.extend_from_slice(&10u16.to_be_bytes());
        body.extend_from_slice(&1344u16.to_be_bytes());
        body.extend_from_slice(&65540u32.to_be_bytes());
        body.extend_from_slice(&[5; 40]);
        let m = message(0x0110, [2; 12], &[(DATA_FRAG, 0, body)]);
        let sm = SubmessageIter::new(&m).next().unwrap().unwrap();
        match sm.parse().unwrap() {
            Submessage::DataFrag(d) => {
                assert_eq!((d.writer_sn, d.fragment_starting_num, d.fragments_in_submessage), (3, 11, 10));
                assert_eq!((d.fragment_size, d.sample_size), (1344, 65540));
                assert_eq!(d.payload.len(), 40);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn heartbeat_acknack_gap_nackfrag() {
        let mut hb = vec![0, 0, 0, 0, 0, 0, 1, 2];
        hb.extend(sn_le(1));
        hb.extend(sn_le(9));
        hb.extend(5i32.to_le_bytes());
        let mut an = vec![0, 0, 1, 7, 0, 0, 1, 2];
        an.extend(sn_le(4));
        an.extend(40u32.to_le_bytes());
        an.extend(0x8000_0001u32.to_le_bytes());
        an.extend(0x4000_0000u32.to_le_bytes());
        an.extend(3i32.to_le_bytes());
        let mut gap = vec![0, 0, 0, 0, 0, 0, 1, 2];
        gap.extend(sn_le(2));
        gap.extend(sn_le(4));
        gap.extend(0u32.to_le_bytes());
        let mut nf = vec![0, 0, 1, 7, 0, 0, 1, 2];
        nf.extend(sn_le(6));
        nf.extend(3u32.to_le_bytes());
        nf.extend(2u32.to_le_bytes());
        nf.extend(0xc000_0000u32.to_le_bytes());
        nf.extend(1i32.to_le_bytes());
        let m = message(
            0x010f,
            [3; 12],
            &[(HEARTBEAT, 3, hb), (ACKNACK, 1, an), (GAP, 1, gap), (NACK_FRAG, 1, nf), (INFO_TS, 3, vec![])],
        );
        let subs: Vec<_> = SubmessageIter::new(&m).map(|s| s.unwrap().parse().unwrap()).collect();
        match subs[0] {
            Submessage::Heartbeat(h) => assert_eq!((h.first_sn, h.last_sn, h.count, h.final_flag), (1, 9, 5, true)),
            ref o => panic!("{o:?}"),
        }
        match subs[1] {
            Submessage::AckNack(a) => {
                assert_eq!(a.reader_sn_state.iter().collect::<Vec<_>>(), vec![4, 35, 37]);
                assert_eq!(a.count, 3);
            }
            ref o => panic!("{o:?}"),
        }
        match subs[2] {
            Submessage::Gap(g) => assert_eq!((g.gap_start, g.gap_list.base, g.gap_list.num_bits), (2, 4, 0)),
            ref o => panic!("{o:?}"),
        }
        match subs[3] {
            Submessage::NackFrag(n) => {
                assert_eq!(n.writer_sn, 6);
                assert_eq!(n.fragment_number_state.iter().collect::<Vec<_>>(), vec![3, 4]);
            }
            ref o => panic!("{o:?}"),
        }
        assert!(matches!(subs[4], Submessage::InfoTs(None)));
    }

    #[test]
    fn last_submessage_with_zero_length_extends_to_end() {
        let mut m = message(0x0110, [1; 12], &[(INFO_DST, 1, vec![9; 12])]);
        m.extend_from_slice(&[0x80, 0x01, 0, 0, 1, 2, 3, 4, 5]);
        let subs: Vec<_> = SubmessageIter::new(&m).collect::<Result<_, _>>().unwrap();
        assert_eq!(subs.len(), 2);
        assert_eq!(subs[1].kind(), SubmsgKind::Vendor(0x80));
        assert_eq!(subs[1].body.len(), 5);
    }

    #[test]
    fn overlong_submessage_stops_iteration() {
        let mut m = message(0x0110, [1; 12], &[]);
        m.extend_from_slice(&[DATA, 1, 200, 0, 1, 2]);
        let subs: Vec<_> = SubmessageIter::new(&m).collect();
        assert_eq!(subs.len(), 1);
        assert!(subs[0].is_err());
    }

    #[test]
    fn oversized_bitmap_is_malformed() {
        let mut an = vec![0; 8];
        an.extend(sn_le(1));
        an.extend(1000u32.to_le_bytes());
        let m = message(0x0110, [1; 12], &[(ACKNACK, 1, an)]);
        let sm = SubmessageIter::new(&m).next().unwrap().unwrap();
        assert!(matches!(sm.parse(), Err(WireError::Malformed { .. })));
    }

    #[test]
    fn cut_message_keeps_fixed_fields() {
        let mut body = vec![0, 0, 28, 0];
        body.extend_from_slice(&[0, 0, 0, 0, 0, 0, 1, 2]);
        body.extend(sn_le(9));
        body.extend_from_slice(&21u32.to_le_bytes());
        body.extend_from_slice(&10u16.to_le_bytes());
        body.extend_from_slice(&1344u16.to_le_bytes());
        body.extend_from_slice(&100_000u32.to_le_bytes());
        body.extend_from_slice(&[7; 13440]);
        let m = message(0x0110, [1; 12], &[(DATA_FRAG, 1, body)]);
        let cut = &m[..20 + 4 + 32 + 10];
        assert!(SubmessageIter::new(cut).next().unwrap().is_err());
        let sm = SubmessageIter::new_cut(cut).next().unwrap().unwrap();
        assert!(sm.is_cut());
        match sm.parse().unwrap() {
            Submessage::DataFrag(d) => {
                assert_eq!((d.writer_sn, d.fragment_starting_num, d.fragments_in_submessage, d.sample_size), (9, 21, 10, 100_000));
                assert_eq!((d.payload.len(), d.payload_len), (10, 13440));
            }
            other => panic!("{other:?}"),
        }
        // Cut inside the fixed fields: a truncation error, not a wrong value.
        let sm = SubmessageIter::new_cut(&m[..20 + 4 + 20]).next().unwrap().unwrap();
        assert!(matches!(sm.parse(), Err(WireError::Truncated { .. })));
    }

    #[test]
    fn info_ts_time() {
        let t = Time { seconds: 10, fraction: 1 << 31 };
        assert_eq!(t.to_unix_nanos(), 10_500_000_000);
    }

    #[test]
    fn header_detection() {
        let m = message(0x0110, [7; 12], &[]);
        assert!(is_rtps(&m));
        let h = parse_header(&m).unwrap();
        assert_eq!(h.vendor_id, 0x0110);
        let mut v1 = m.clone();
        v1[4] = 1;
        assert!(!is_rtps(&v1));
        assert!(!is_rtps(&m[..19]));
    }
}
