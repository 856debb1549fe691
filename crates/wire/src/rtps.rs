//! RTPS messages: header, submessage iteration and typed views of every
//! standard submessage (RTPS 2.5, section 9.4.5), both byte orders.

use crate::cdr::CdrReader;
use crate::error::{slice, WireError};
use crate::guid::{EntityId, GuidPrefix};
use crate::locator::Locator;
use crate::plist;

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

// Flags.
pub const FLAG_E: u8 = 0x01;

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
    Ok(Header {
        version_major: h[4],
        version_minor: h[5],
        vendor_id: u16::from_be_bytes([h[6], h[7]]),
        guid_prefix: GuidPrefix::from_slice(&h[8..20]).expect("12 bytes"),
    })
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
    pub fn kind(&self) -> SubmsgKind {
        SubmsgKind::from_id(self.id)
    }
    pub fn little_endian(&self) -> bool {
        self.flags & FLAG_E != 0
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

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.msg.len() {
            return None;
        }
        let rest = &self.msg[self.pos..];
        if rest.len() < 4 {
            self.done = true;
            return Some(Err(WireError::truncated("submessage header", 4, rest.len())));
        }
        let (id, flags) = (rest[0], rest[1]);
        let raw_len = if flags & FLAG_E != 0 {
            u16::from_le_bytes([rest[2], rest[3]])
        } else {
            u16::from_be_bytes([rest[2], rest[3]])
        } as usize;
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

/// SequenceNumberSet or FragmentNumberSet: base, number of bits, bitmap.
#[derive(Debug, Clone, Copy)]
pub struct NumberSet<'a> {
    pub base: i64,
    pub num_bits: u32,
    bitmap: &'a [u8],
    little_endian: bool,
}

impl<'a> NumberSet<'a> {
    fn read(r: &mut CdrReader<'a>, sequence: bool, what: &'static str) -> Result<Self, WireError> {
        let base = if sequence { r.sequence_number(what)? } else { r.u32(what)? as i64 };
        let num_bits = r.u32(what)?;
        if num_bits > 256 {
            return Err(WireError::malformed(what, "more than 256 bits"));
        }
        let words = num_bits.div_ceil(32) as usize;
        let bitmap = r.bytes(words * 4, what)?;
        Ok(NumberSet { base, num_bits, bitmap, little_endian: r.little_endian() })
    }
    /// Whether bit `i` (number `base + i`) is set.
    pub fn contains_bit(&self, i: u32) -> bool {
        if i >= self.num_bits {
            return false;
        }
        let w = (i / 32) as usize * 4;
        let b = &self.bitmap[w..w + 4];
        let word = if self.little_endian {
            u32::from_le_bytes([b[0], b[1], b[2], b[3]])
        } else {
            u32::from_be_bytes([b[0], b[1], b[2], b[3]])
        };
        word & (1 << (31 - (i % 32))) != 0
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
}

#[derive(Debug, Clone, Copy)]
pub struct Data<'a> {
    pub reader_id: EntityId,
    pub writer_id: EntityId,
    pub writer_sn: i64,
    pub inline_qos: Option<&'a [u8]>,
    /// Serialized payload (data or key), if the D or K flag is set (as captured).
    pub payload: Option<&'a [u8]>,
    /// Payload length on the wire (larger than `payload` when the capture cut it).
    pub payload_len: usize,
    pub key_flag: bool,
}

#[derive(Debug, Clone, Copy)]
pub struct DataFrag<'a> {
    pub reader_id: EntityId,
    pub writer_id: EntityId,
    pub writer_sn: i64,
    pub fragment_starting_num: u32,
    pub fragments_in_submessage: u16,
    pub fragment_size: u16,
    pub sample_size: u32,
    pub inline_qos: Option<&'a [u8]>,
    /// The fragment bytes carried by this submessage (as captured).
    pub payload: &'a [u8],
    /// Fragment bytes on the wire (larger than `payload` when the capture cut them).
    pub payload_len: usize,
    pub key_flag: bool,
}

#[derive(Debug, Clone, Copy)]
pub struct Heartbeat {
    pub reader_id: EntityId,
    pub writer_id: EntityId,
    pub first_sn: i64,
    pub last_sn: i64,
    pub count: i32,
    pub final_flag: bool,
    pub liveliness_flag: bool,
}

#[derive(Debug, Clone, Copy)]
pub struct HeartbeatFrag {
    pub reader_id: EntityId,
    pub writer_id: EntityId,
    pub writer_sn: i64,
    pub last_fragment_num: u32,
    pub count: i32,
}

#[derive(Debug, Clone, Copy)]
pub struct AckNack<'a> {
    pub reader_id: EntityId,
    pub writer_id: EntityId,
    pub reader_sn_state: NumberSet<'a>,
    pub count: i32,
    pub final_flag: bool,
}

#[derive(Debug, Clone, Copy)]
pub struct NackFrag<'a> {
    pub reader_id: EntityId,
    pub writer_id: EntityId,
    pub writer_sn: i64,
    pub fragment_number_state: NumberSet<'a>,
    pub count: i32,
}

#[derive(Debug, Clone, Copy)]
pub struct Gap<'a> {
    pub reader_id: EntityId,
    pub writer_id: EntityId,
    pub gap_start: i64,
    pub gap_list: NumberSet<'a>,
}

/// A typed submessage.
#[derive(Debug, Clone, Copy)]
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
    InfoReply { unicast: [Option<Locator>; 2], unicast_count: u32, multicast_count: u32 },
    InfoReplyIp4 { unicast: (u32, u32), multicast: Option<(u32, u32)> },
    Pad,
    /// SEC_* / SRTPS_* submessages: opaque (encrypted or MACs).
    Security,
    /// Vendor-specific or unknown id: skipped by length.
    Opaque,
}

fn entity(r: &mut CdrReader<'_>, what: &'static str) -> Result<EntityId, WireError> {
    Ok(EntityId(r.array::<4>(what)?))
}

/// Splits DATA/DATA_FRAG bodies at inline QoS and payload.
/// `fixed` = bytes from the start of the body to where octetsToInlineQos counts from (4).
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
            let (q, d, k) = (f & 0x02 != 0, f & 0x04 != 0, f & 0x08 != 0);
            let (inline_qos, at) = inline_qos_and_payload(sm.body, otiq, q, le, 20, W)?;
            let payload = if d || k { Some(&sm.body[at..]) } else { None };
            let payload_len = if d || k { sm.declared_len.saturating_sub(at) } else { 0 };
            Submessage::Data(Data { reader_id, writer_id, writer_sn, inline_qos, payload, payload_len, key_flag: k })
        }
        DATA_FRAG => {
            const W: &str = "DATA_FRAG submessage";
            r.u16(W)?;
            let otiq = r.u16(W)?;
            let reader_id = entity(&mut r, W)?;
            let writer_id = entity(&mut r, W)?;
            let writer_sn = r.sequence_number(W)?;
            let fragment_starting_num = r.u32(W)?;
            let fragments_in_submessage = r.u16(W)?;
            let fragment_size = r.u16(W)?;
            let sample_size = r.u32(W)?;
            let (q, k) = (f & 0x02 != 0, f & 0x04 != 0);
            let (inline_qos, at) = inline_qos_and_payload(sm.body, otiq, q, le, 32, W)?;
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
                final_flag: f & 0x02 != 0,
                liveliness_flag: f & 0x04 != 0,
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
            Submessage::AckNack(AckNack { reader_id, writer_id, reader_sn_state, count, final_flag: f & 0x02 != 0 })
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
            if f & 0x02 != 0 {
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
            Submessage::InfoSrc {
                version: (v[0], v[1]),
                vendor_id: u16::from_be_bytes(vendor),
                guid_prefix: GuidPrefix(prefix),
            }
        }
        INFO_DST => Submessage::InfoDst { guid_prefix: GuidPrefix(r.array::<12>("INFO_DST submessage")?) },
        INFO_REPLY => {
            const W: &str = "INFO_REPLY locator list";
            let mut unicast = [None, None];
            let unicast_count = r.u32(W)?;
            if unicast_count > 1024 {
                return Err(WireError::malformed(W, "more than 1024 locators"));
            }
            for i in 0..unicast_count {
                let l = Locator::read(&mut r)?;
                if (i as usize) < unicast.len() {
                    unicast[i as usize] = Some(l);
                }
            }
            let mut multicast_count = 0;
            if f & 0x02 != 0 {
                multicast_count = r.u32(W)?;
                if multicast_count > 1024 {
                    return Err(WireError::malformed(W, "more than 1024 locators"));
                }
                for _ in 0..multicast_count {
                    Locator::read(&mut r)?;
                }
            }
            Submessage::InfoReply { unicast, unicast_count, multicast_count }
        }
        INFO_REPLY_IP4 => {
            const W: &str = "INFO_REPLY_IP4 submessage";
            let unicast = (r.u32(W)?, r.u32(W)?);
            let multicast = if f & 0x02 != 0 { Some((r.u32(W)?, r.u32(W)?)) } else { None };
            Submessage::InfoReplyIp4 { unicast, multicast }
        }
        PAD => Submessage::Pad,
        SEC_BODY | SEC_PREFIX | SEC_POSTFIX | SRTPS_PREFIX | SRTPS_POSTFIX => Submessage::Security,
        _ => Submessage::Opaque,
    })
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
    /// Parameter-list encodings (discovery data).
    pub fn is_parameter_list(&self) -> Option<bool> {
        match self {
            Encapsulation::PlCdrLe | Encapsulation::PlCdr2Le => Some(true),
            Encapsulation::PlCdrBe | Encapsulation::PlCdr2Be => Some(false),
            _ => None,
        }
    }
}

/// Splits a serialized payload into its encapsulation and body.
pub fn encapsulation(payload: &[u8]) -> Result<(Encapsulation, &[u8]), WireError> {
    let h = slice(payload, 0, 4, "serialized payload header")?;
    Ok((Encapsulation::from_id(u16::from_be_bytes([h[0], h[1]])), &payload[4..]))
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
