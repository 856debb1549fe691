//! Network messages (zenoh-protocol 1.x `network`) and the Zenoh messages
//! they carry (`zenoh`: Put, Del, Query, Reply, Err): Push, Declare,
//! Interest, Request, Response, ResponseFinal and OAM.
//!
//! Zenoh 0.11 (protocol 0x08, [`Proto::V08`]) differs here, as its
//! zenoh-codec 0.11.0-dev reads them: no Interest message (interests are
//! declarations, ids 0x08–0x0A) and no DeclareFinal; a Declare has no
//! interest id; an undeclaration's wire-expression extension sets bit 1 for
//! the *receiver's* mapping; an encoding is a prefix and a suffix string; a
//! Query's flags are P (0x20) only, its consolidation an extension; a Reply
//! is a message of its own (timestamp, encoding, extensions — attachment
//! 0x4 — and payload), beside Err (a code), Ack and Put; a Request may carry
//! a Put, Del or Pull; request ids are 32-bit. Liveliness tokens are
//! subscribers on `@/liveliness/<key>` ([`LIVELINESS_PREFIX_V08`]).
//!
//! Key expressions travel as a *wire expression*: a numeric scope (0, or an
//! id an earlier Declare KeyExpr gave a string) and an optional suffix. The
//! M flag says whose declarations the scope refers to: the sender's (M=1)
//! or the receiver's (M=0). Resolving them needs the session's state
//! (`ddscope-core`); here they are returned as they are.

use crate::codec::{has, malformed, mid, read_exts, Proto, Reader, ZResult, ZenohId, FLAG_Z};

pub const OAM: u8 = 0x1f;
pub const DECLARE: u8 = 0x1e;
pub const PUSH: u8 = 0x1d;
pub const REQUEST: u8 = 0x1c;
pub const RESPONSE: u8 = 0x1b;
pub const RESPONSE_FINAL: u8 = 0x1a;
pub const INTEREST: u8 = 0x19;

/// Zenoh message ids (inside Push, Request and Response).
pub const Z_PUT: u8 = 0x01;
pub const Z_DEL: u8 = 0x02;
pub const Z_QUERY: u8 = 0x03;
pub const Z_REPLY: u8 = 0x04;
pub const Z_ERR: u8 = 0x05;
/// Zenoh 0.11 only: Ack (in a Response) and Pull (in a Request).
pub const Z_ACK_V08: u8 = 0x06;
pub const Z_PULL_V08: u8 = 0x07;

/// Declaration ids.
pub const D_KEYEXPR: u8 = 0x00;
pub const U_KEYEXPR: u8 = 0x01;
pub const D_SUBSCRIBER: u8 = 0x02;
pub const U_SUBSCRIBER: u8 = 0x03;
pub const D_QUERYABLE: u8 = 0x04;
pub const U_QUERYABLE: u8 = 0x05;
pub const D_TOKEN: u8 = 0x06;
pub const U_TOKEN: u8 = 0x07;
pub const D_FINAL: u8 = 0x1a;
/// Zenoh 0.11's interest declarations.
pub const D_INTEREST_V08: u8 = 0x08;
pub const F_INTEREST_V08: u8 = 0x09;
pub const U_INTEREST_V08: u8 = 0x0a;

/// Zenoh 0.11 declares a liveliness token as a subscriber on this prefix
/// followed by the token's key (zenoh 0.11 `net/routing/mod.rs`,
/// `PREFIX_LIVELINESS`; `Session::declare_liveliness_inner`).
pub const LIVELINESS_PREFIX_V08: &str = "@/liveliness/";

const FLAG_N: u8 = 0x20;
const FLAG_M: u8 = 0x40;

/// Whether `id` is a network message id of Zenoh 1.x.
pub fn is_network(id: u8) -> bool {
    (INTEREST..=OAM).contains(&id)
}

/// Whether `id` is a network message id of protocol `proto` (0.11 has no Interest).
pub fn is_network_v(id: u8, proto: Proto) -> bool {
    match proto {
        Proto::V09 => is_network(id),
        Proto::V08 => (RESPONSE_FINAL..=OAM).contains(&id),
    }
}

/// A key expression as sent: scope id, suffix, and whose declarations the scope refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireExpr<'a> {
    pub scope: u16,
    pub suffix: &'a [u8],
    /// M flag: the scope is one the sender declared (else one the receiver declared).
    pub sender_mapping: bool,
}

fn wire_expr<'a>(r: &mut Reader<'a>, named: bool, sender_mapping: bool, what: &'static str) -> ZResult<WireExpr<'a>> {
    let scope = r.vle_max(u16::MAX as u64, what)? as u16;
    let suffix = if named { r.zslice(what)? } else { &[] };
    Ok(WireExpr { scope, suffix, sender_mapping })
}

/// The `WireExprExt` of an undeclaration: flags (bit 0 named, bit 1 the
/// mapping: the sender's in 1.x, the receiver's in 0.11), scope, and the
/// suffix as the rest of the extension.
fn wire_expr_ext(b: &[u8], proto: Proto) -> ZResult<WireExpr<'_>> {
    let mut r = Reader::new(b);
    let flags = r.u8("WireExpr extension")?;
    let scope = r.vle_max(u16::MAX as u64, "WireExpr extension")? as u16;
    let suffix = if has(flags, 1) { r.rest() } else { &[] };
    let sender_mapping = match proto {
        Proto::V09 => has(flags, 2),
        Proto::V08 => !has(flags, 2),
    };
    Ok(WireExpr { scope, suffix, sender_mapping })
}

/// The source of a sample (SourceInfo extension): entity and its sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceInfo {
    pub zid: ZenohId,
    pub eid: u32,
    pub sn: u32,
}

fn source_info(b: &[u8]) -> ZResult<SourceInfo> {
    let mut r = Reader::new(b);
    let flags = r.u8("SourceInfo")?;
    let zid = ZenohId::from_wire(r.bytes(1 + (flags >> 4) as usize, "SourceInfo zid")?).ok_or(crate::codec::ZError::Malformed {
        what: "SourceInfo zid",
        detail: "bad length",
    })?;
    let eid = r.vle_max(u32::MAX as u64, "SourceInfo eid")? as u32;
    let sn = r.vle_max(u32::MAX as u64, "SourceInfo sn")? as u32;
    Ok(SourceInfo { zid, eid, sn })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Put<'a> {
    /// uhlc NTP64 time of the sample's timestamp, if it carries one.
    pub timestamp: Option<u64>,
    pub encoding: Option<u32>,
    pub source_info: Option<SourceInfo>,
    pub attachment: Option<&'a [u8]>,
    /// The payload travels in shared memory: the wire carries descriptors.
    pub shm: bool,
    /// Descriptors of shared-memory buffers among the payload's slices.
    pub shm_slices: u32,
    /// Declared payload length (with shared memory: the raw bytes on the wire only).
    pub payload_len: u64,
    /// The payload bytes present (all of them unless the message was cut).
    pub payload: &'a [u8],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushBody<'a> {
    Put(Put<'a>),
    Del { timestamp: Option<u64>, attachment: Option<&'a [u8]> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declaration<'a> {
    KeyExpr { id: u16, wire: WireExpr<'a> },
    UndeclareKeyExpr { id: u16 },
    Subscriber { id: u32, wire: WireExpr<'a> },
    UndeclareSubscriber { id: u32, wire: Option<WireExpr<'a>> },
    Queryable { id: u32, wire: WireExpr<'a> },
    UndeclareQueryable { id: u32, wire: Option<WireExpr<'a>> },
    Token { id: u32, wire: WireExpr<'a> },
    UndeclareToken { id: u32, wire: Option<WireExpr<'a>> },
    Final,
    /// Zenoh 0.11: an interest in the declarations (`interest` flags) on a key expression.
    Interest { id: u32, wire: WireExpr<'a>, interest: u8 },
    /// Zenoh 0.11: the current declarations of an interest were all sent.
    InterestFinal { id: u32 },
    /// Zenoh 0.11.
    UndeclareInterest { id: u32, wire: Option<WireExpr<'a>> },
}

impl Declaration<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            Declaration::KeyExpr { .. } => "DECLARE_KEYEXPR",
            Declaration::UndeclareKeyExpr { .. } => "UNDECLARE_KEYEXPR",
            Declaration::Subscriber { .. } => "DECLARE_SUBSCRIBER",
            Declaration::UndeclareSubscriber { .. } => "UNDECLARE_SUBSCRIBER",
            Declaration::Queryable { .. } => "DECLARE_QUERYABLE",
            Declaration::UndeclareQueryable { .. } => "UNDECLARE_QUERYABLE",
            Declaration::Token { .. } => "DECLARE_TOKEN",
            Declaration::UndeclareToken { .. } => "UNDECLARE_TOKEN",
            Declaration::Final => "DECLARE_FINAL",
            Declaration::Interest { .. } => "DECLARE_INTEREST",
            Declaration::InterestFinal { .. } => "FINAL_INTEREST",
            Declaration::UndeclareInterest { .. } => "UNDECLARE_INTEREST",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Query<'a> {
    pub parameters: &'a [u8],
    pub attachment: Option<&'a [u8]>,
    /// Bytes of the query's body (its payload), if it has one.
    pub body_len: Option<usize>,
}

/// What a Request carries: a Query; Zenoh 0.11 also has Put, Del and Pull.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestBody<'a> {
    Query(Query<'a>),
    /// Zenoh 0.11: a Put or Del sent as a request.
    Push(PushBody<'a>),
    /// Zenoh 0.11: a pull subscriber's Pull.
    Pull,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseBody<'a> {
    /// A reply's sample (1.x: a Reply around a Put or Del; 0.11: a Reply,
    /// or a Put answering a Pull, read as a Put).
    Reply(PushBody<'a>),
    Err { payload_len: u64 },
    /// Zenoh 0.11: a queryable's Ack.
    Ack,
}

/// One network message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkMsg<'a> {
    Push { wire: WireExpr<'a>, body: PushBody<'a> },
    Declare { interest_id: Option<u32>, body: Declaration<'a> },
    Interest { id: u32, mode: u8, options: u8, wire: Option<WireExpr<'a>> },
    Request { id: u64, wire: WireExpr<'a>, body: RequestBody<'a> },
    Response { rid: u64, wire: WireExpr<'a>, body: ResponseBody<'a> },
    ResponseFinal { rid: u64 },
    Oam { id: u64 },
}

impl NetworkMsg<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            NetworkMsg::Push { body: PushBody::Put(p), .. } if p.shm_slices > 0 => "PUT_SHM",
            NetworkMsg::Push { body: PushBody::Put(_), .. } => "PUT",
            NetworkMsg::Push { body: PushBody::Del { .. }, .. } => "DEL",
            NetworkMsg::Declare { body, .. } => body.name(),
            NetworkMsg::Interest { mode: 0, .. } => "INTEREST_FINAL",
            NetworkMsg::Interest { .. } => "INTEREST",
            NetworkMsg::Request { body: RequestBody::Query(_), .. } => "QUERY",
            NetworkMsg::Request { body: RequestBody::Push(PushBody::Put(_)), .. } => "REQUEST_PUT",
            NetworkMsg::Request { body: RequestBody::Push(PushBody::Del { .. }), .. } => "REQUEST_DEL",
            NetworkMsg::Request { body: RequestBody::Pull, .. } => "PULL",
            NetworkMsg::Response { body: ResponseBody::Reply(PushBody::Put(_)), .. } => "REPLY",
            NetworkMsg::Response { body: ResponseBody::Reply(PushBody::Del { .. }), .. } => "REPLY_DEL",
            NetworkMsg::Response { body: ResponseBody::Err { .. }, .. } => "REPLY_ERR",
            NetworkMsg::Response { body: ResponseBody::Ack, .. } => "REPLY_ACK",
            NetworkMsg::ResponseFinal { .. } => "RESPONSE_FINAL",
            NetworkMsg::Oam { .. } => "NETWORK_OAM",
        }
    }

    /// The message's own wire expression (not a declared one's).
    pub fn wire(&self) -> Option<WireExpr<'_>> {
        match self {
            NetworkMsg::Push { wire, .. } | NetworkMsg::Request { wire, .. } | NetworkMsg::Response { wire, .. } => Some(*wire),
            NetworkMsg::Interest { wire, .. } => *wire,
            NetworkMsg::Declare { body, .. } => match body {
                Declaration::KeyExpr { wire, .. }
                | Declaration::Subscriber { wire, .. }
                | Declaration::Queryable { wire, .. }
                | Declaration::Token { wire, .. }
                | Declaration::Interest { wire, .. } => Some(*wire),
                Declaration::UndeclareSubscriber { wire, .. }
                | Declaration::UndeclareQueryable { wire, .. }
                | Declaration::UndeclareToken { wire, .. }
                | Declaration::UndeclareInterest { wire, .. } => *wire,
                _ => None,
            },
            _ => None,
        }
    }
}

/// Reads one network message of Zenoh 1.x. `allow_cut`: the bytes are the
/// head of a longer message (a fragmented message of which only the head is
/// kept); the last payload may end early.
pub fn read<'a>(r: &mut Reader<'a>, allow_cut: bool) -> ZResult<NetworkMsg<'a>> {
    read_v(r, allow_cut, Proto::V09)
}

/// Reads one network message with the layouts of `proto`.
pub fn read_v<'a>(r: &mut Reader<'a>, allow_cut: bool, proto: Proto) -> ZResult<NetworkMsg<'a>> {
    let h = r.u8("network header")?;
    read_with_header(r, h, allow_cut, proto)
}

pub(crate) fn read_with_header<'a>(r: &mut Reader<'a>, h: u8, allow_cut: bool, proto: Proto) -> ZResult<NetworkMsg<'a>> {
    let z = has(h, FLAG_Z);
    match mid(h) {
        PUSH => {
            let wire = wire_expr(r, has(h, FLAG_N), has(h, FLAG_M), "Push key expression")?;
            read_exts(r, z, "Push extension", &mut |_| {})?;
            let body = push_body(r, allow_cut, "Push body", proto)?;
            Ok(NetworkMsg::Push { wire, body })
        }
        DECLARE => {
            // 0.11 has no interest id (its bits 5 and 6 are reserved).
            let interest_id = if proto == Proto::V09 && has(h, 0x20) {
                Some(r.vle_max(u32::MAX as u64, "Declare interest id")? as u32)
            } else {
                None
            };
            read_exts(r, z, "Declare extension", &mut |_| {})?;
            let body = declaration(r, proto)?;
            Ok(NetworkMsg::Declare { interest_id, body })
        }
        INTEREST if proto == Proto::V09 => {
            let id = r.vle_max(u32::MAX as u64, "Interest id")? as u32;
            let mode = (h >> 5) & 0b11;
            let (mut options, mut wire) = (0, None);
            if mode != 0 {
                options = r.u8("Interest options")?;
                if has(options, 0x10) {
                    wire = Some(wire_expr(r, has(options, 0x20), has(options, 0x40), "Interest key expression")?);
                }
            }
            read_exts(r, z, "Interest extension", &mut |_| {})?;
            Ok(NetworkMsg::Interest { id, mode, options, wire })
        }
        REQUEST => {
            let id = match proto {
                Proto::V09 => r.vle("Request id")?,
                Proto::V08 => r.vle_max(u32::MAX as u64, "Request id")?,
            };
            let wire = wire_expr(r, has(h, FLAG_N), has(h, FLAG_M), "Request key expression")?;
            read_exts(r, z, "Request extension", &mut |_| {})?;
            let qh = r.u8("Query header")?;
            let body = match (mid(qh), proto) {
                (Z_QUERY, _) => RequestBody::Query(query(r, qh, proto)?),
                (Z_PUT | Z_DEL, Proto::V08) => RequestBody::Push(push_body_with_header(r, qh, allow_cut, "Request body", proto)?),
                (Z_PULL_V08, Proto::V08) => {
                    read_exts(r, has(qh, FLAG_Z), "Pull extension", &mut |_| {})?;
                    RequestBody::Pull
                }
                _ => return malformed("Request body", "not a Query"),
            };
            Ok(NetworkMsg::Request { id, wire, body })
        }
        RESPONSE => {
            let rid = match proto {
                Proto::V09 => r.vle("Response request id")?,
                Proto::V08 => r.vle_max(u32::MAX as u64, "Response request id")?,
            };
            let wire = wire_expr(r, has(h, FLAG_N), has(h, FLAG_M), "Response key expression")?;
            read_exts(r, z, "Response extension", &mut |_| {})?;
            let bh = r.u8("Response body header")?;
            let body = match proto {
                Proto::V09 => response_body_v09(r, bh, allow_cut)?,
                Proto::V08 => response_body_v08(r, bh, allow_cut)?,
            };
            Ok(NetworkMsg::Response { rid, wire, body })
        }
        RESPONSE_FINAL => {
            let rid = match proto {
                Proto::V09 => r.vle("ResponseFinal request id")?,
                Proto::V08 => r.vle_max(u32::MAX as u64, "ResponseFinal request id")?,
            };
            read_exts(r, z, "ResponseFinal extension", &mut |_| {})?;
            Ok(NetworkMsg::ResponseFinal { rid })
        }
        OAM => {
            let id = r.vle("network OAM id")?;
            read_exts(r, z, "network OAM extension", &mut |_| {})?;
            crate::codec::oam_body(r, h)?;
            Ok(NetworkMsg::Oam { id })
        }
        _ => malformed("network header", "unknown message id"),
    }
}

/// A Query (after its header `qh`): 1.x has a consolidation byte (C, 0x20)
/// and parameters (P, 0x40); 0.11 parameters only (P, 0x20), its
/// consolidation an extension. Attachment extension 0x5, body 0x3, in both.
fn query<'a>(r: &mut Reader<'a>, qh: u8, proto: Proto) -> ZResult<Query<'a>> {
    let params_flag = match proto {
        Proto::V09 => {
            if has(qh, 0x20) {
                r.vle("Query consolidation")?;
            }
            0x40
        }
        Proto::V08 => 0x20,
    };
    let parameters = if has(qh, params_flag) { r.zslice("Query parameters")? } else { &[] };
    let (mut attachment, mut body_len) = (None, None);
    read_exts(r, has(qh, FLAG_Z), "Query extension", &mut |e| match e.id {
        0x5 => attachment = e.zbuf(),
        0x3 => body_len = e.zbuf().map(<[u8]>::len),
        _ => {}
    })?;
    Ok(Query { parameters, attachment, body_len })
}

fn response_body_v09<'a>(r: &mut Reader<'a>, bh: u8, allow_cut: bool) -> ZResult<ResponseBody<'a>> {
    Ok(match mid(bh) {
        Z_REPLY => {
            if has(bh, 0x20) {
                r.vle("Reply consolidation")?;
            }
            read_exts(r, has(bh, FLAG_Z), "Reply extension", &mut |_| {})?;
            ResponseBody::Reply(push_body(r, allow_cut, "Reply body", Proto::V09)?)
        }
        Z_ERR => {
            if has(bh, 0x40) {
                encoding(r, Proto::V09)?;
            }
            read_exts(r, has(bh, FLAG_Z), "Err extension", &mut |_| {})?;
            let (payload_len, _) = payload(r, allow_cut, "Err payload")?;
            ResponseBody::Err { payload_len }
        }
        _ => return malformed("Response body", "neither Reply nor Err"),
    })
}

/// Zenoh 0.11's response bodies (zenoh-codec 0.11 `zenoh/{reply,err,ack,put}.rs`).
fn response_body_v08<'a>(r: &mut Reader<'a>, bh: u8, allow_cut: bool) -> ZResult<ResponseBody<'a>> {
    Ok(match mid(bh) {
        // Reply: a Put's layout with its own extension ids (shm 0x3, attachment 0x4).
        Z_REPLY => ResponseBody::Reply(PushBody::Put(put(r, bh, allow_cut, PutExts::REPLY_V08, Proto::V08)?)),
        Z_PUT => ResponseBody::Reply(PushBody::Put(put(r, bh, allow_cut, PutExts::PUT, Proto::V08)?)),
        Z_ERR => {
            r.vle_max(u16::MAX as u64, "Err code")?;
            if has(bh, 0x20) {
                timestamp(r)?;
            }
            // The body is an extension (0x2: encoding and payload; 0x3: shared memory).
            let mut body = None;
            read_exts(r, has(bh, FLAG_Z), "Err extension", &mut |e| {
                if e.id == 0x2 {
                    body = e.zbuf();
                }
            })?;
            let payload_len = match body {
                Some(b) => {
                    let mut br = Reader::new(b);
                    encoding(&mut br, Proto::V08)?;
                    br.remaining() as u64
                }
                None => 0,
            };
            ResponseBody::Err { payload_len }
        }
        Z_ACK_V08 => {
            if has(bh, 0x20) {
                timestamp(r)?;
            }
            read_exts(r, has(bh, FLAG_Z), "Ack extension", &mut |_| {})?;
            ResponseBody::Ack
        }
        _ => return malformed("Response body", "neither Reply, Err, Ack nor Put"),
    })
}

/// An encoding: 1.x an id (shifted, bit 0: a schema of at most 255 bytes
/// follows); 0.11 a prefix (at most 255) and a suffix of at most 255 bytes.
fn encoding(r: &mut Reader<'_>, proto: Proto) -> ZResult<u32> {
    match proto {
        Proto::V09 => {
            let v = r.vle_max(u32::MAX as u64, "encoding")?;
            if v & 1 != 0 {
                // a schema: a string of at most 255 bytes
                let n = r.vle_max(u8::MAX as u64, "encoding schema")?;
                r.bytes(n as usize, "encoding schema")?;
            }
            Ok((v >> 1) as u32)
        }
        Proto::V08 => {
            let prefix = r.vle_max(u8::MAX as u64, "encoding prefix")?;
            let n = r.vle_max(u8::MAX as u64, "encoding suffix")?;
            r.bytes(n as usize, "encoding suffix")?;
            Ok(prefix as u32)
        }
    }
}

fn timestamp(r: &mut Reader<'_>) -> ZResult<u64> {
    let time = r.vle("timestamp")?;
    let n = r.vle_max(16, "timestamp id")?;
    r.bytes(n as usize, "timestamp id")?;
    Ok(time)
}

fn payload<'a>(r: &mut Reader<'a>, allow_cut: bool, what: &'static str) -> ZResult<(u64, &'a [u8])> {
    if allow_cut {
        r.zslice_cut(what)
    } else {
        let p = r.zslice(what)?;
        Ok((p.len() as u64, p))
    }
}

fn push_body<'a>(r: &mut Reader<'a>, allow_cut: bool, what: &'static str, proto: Proto) -> ZResult<PushBody<'a>> {
    let h = r.u8(what)?;
    push_body_with_header(r, h, allow_cut, what, proto)
}

/// The extension ids of a Put-like message: source info, shared memory, attachment.
#[derive(Clone, Copy)]
struct PutExts {
    source_info: u8,
    shm: u8,
    attachment: u8,
}

impl PutExts {
    /// A Put (1.x and 0.11).
    const PUT: PutExts = PutExts { source_info: 0x1, shm: 0x2, attachment: 0x3 };
    /// Zenoh 0.11's Reply (consolidation is 0x2).
    const REPLY_V08: PutExts = PutExts { source_info: 0x1, shm: 0x3, attachment: 0x4 };
}

/// A Put (after its header `h`): T (0x20) timestamp, E (0x40) encoding,
/// extensions, then the payload — a list of slices when shared memory is on.
fn put<'a>(r: &mut Reader<'a>, h: u8, allow_cut: bool, ids: PutExts, proto: Proto) -> ZResult<Put<'a>> {
    let timestamp = if has(h, 0x20) { Some(timestamp(r)?) } else { None };
    let encoding = if has(h, 0x40) { Some(encoding(r, proto)?) } else { None };
    let (mut source_info, mut attachment, mut shm, mut bad) = (None, None, false, None);
    read_exts(r, has(h, FLAG_Z), "Put extension", &mut |e| {
        if e.id == ids.source_info {
            match e.zbuf().map(source_info_checked) {
                Some(Ok(s)) => source_info = Some(s),
                Some(Err(err)) => bad = Some(err),
                None => {}
            }
        } else if e.id == ids.shm {
            shm = true;
        } else if e.id == ids.attachment {
            attachment = e.zbuf();
        }
    })?;
    if let Some(e) = bad {
        return Err(e);
    }
    if shm {
        // Shared memory: the payload is a list of slices, each raw bytes
        // or a descriptor of a buffer in shared memory (zenoh-codec's
        // `Zenoh080Sliced`): only the descriptors travel on the wire.
        let n = r.vle_max(u16::MAX as u64, "Put shared-memory slices")?;
        let (mut raw, mut shm_slices) = (0u64, 0u32);
        for _ in 0..n {
            match r.u8("Put slice kind")? {
                0 => raw += r.zslice("Put raw slice")?.len() as u64,
                1 => {
                    r.zslice("Put shared-memory descriptor")?;
                    shm_slices += 1;
                }
                _ => return malformed("Put slice kind", "neither raw (0) nor shared memory (1)"),
            }
        }
        return Ok(Put { timestamp, encoding, source_info, attachment, shm, shm_slices, payload_len: raw, payload: &[] });
    }
    let (payload_len, payload) = payload(r, allow_cut, "Put payload")?;
    Ok(Put { timestamp, encoding, source_info, attachment, shm, shm_slices: 0, payload_len, payload })
}

fn push_body_with_header<'a>(r: &mut Reader<'a>, h: u8, allow_cut: bool, what: &'static str, proto: Proto) -> ZResult<PushBody<'a>> {
    match mid(h) {
        Z_PUT => Ok(PushBody::Put(put(r, h, allow_cut, PutExts::PUT, proto)?)),
        Z_DEL => {
            let timestamp = if has(h, 0x20) { Some(timestamp(r)?) } else { None };
            let mut attachment = None;
            read_exts(r, has(h, FLAG_Z), "Del extension", &mut |e| {
                if e.id == 0x2 {
                    attachment = e.zbuf();
                }
            })?;
            Ok(PushBody::Del { timestamp, attachment })
        }
        _ => malformed(what, "neither Put nor Del"),
    }
}

fn source_info_checked(b: &[u8]) -> ZResult<SourceInfo> {
    source_info(b)
}

fn declaration<'a>(r: &mut Reader<'a>, proto: Proto) -> ZResult<Declaration<'a>> {
    let h = r.u8("declaration header")?;
    let z = has(h, FLAG_Z);
    let undeclared_wire = |r: &mut Reader<'a>| -> ZResult<Option<WireExpr<'a>>> {
        let mut ext = None;
        read_exts(r, z, "undeclaration extension", &mut |e| {
            if e.id == 0x0f {
                ext = e.zbuf();
            }
        })?;
        ext.map(|b| wire_expr_ext(b, proto)).transpose()
    };
    let d = match (mid(h), proto) {
        (D_KEYEXPR, _) => {
            let id = r.vle_max(u16::MAX as u64, "DeclareKeyExpr id")? as u16;
            let wire = wire_expr(r, has(h, FLAG_N), true, "DeclareKeyExpr key expression")?;
            read_exts(r, z, "DeclareKeyExpr extension", &mut |_| {})?;
            Declaration::KeyExpr { id, wire }
        }
        (U_KEYEXPR, _) => {
            let id = r.vle_max(u16::MAX as u64, "UndeclareKeyExpr id")? as u16;
            read_exts(r, z, "UndeclareKeyExpr extension", &mut |_| {})?;
            Declaration::UndeclareKeyExpr { id }
        }
        (D_SUBSCRIBER | D_QUERYABLE | D_TOKEN, _) => {
            let id = r.vle_max(u32::MAX as u64, "declaration id")? as u32;
            let wire = wire_expr(r, has(h, FLAG_N), has(h, FLAG_M), "declared key expression")?;
            read_exts(r, z, "declaration extension", &mut |_| {})?;
            match mid(h) {
                D_SUBSCRIBER => Declaration::Subscriber { id, wire },
                D_QUERYABLE => Declaration::Queryable { id, wire },
                _ => Declaration::Token { id, wire },
            }
        }
        (U_SUBSCRIBER | U_QUERYABLE | U_TOKEN, _) => {
            let id = r.vle_max(u32::MAX as u64, "undeclaration id")? as u32;
            let wire = undeclared_wire(r)?;
            match mid(h) {
                U_SUBSCRIBER => Declaration::UndeclareSubscriber { id, wire },
                U_QUERYABLE => Declaration::UndeclareQueryable { id, wire },
                _ => Declaration::UndeclareToken { id, wire },
            }
        }
        (D_FINAL, Proto::V09) => {
            read_exts(r, z, "DeclareFinal extension", &mut |_| {})?;
            Declaration::Final
        }
        (D_INTEREST_V08, Proto::V08) => {
            let id = r.vle_max(u32::MAX as u64, "DeclareInterest id")? as u32;
            let wire = wire_expr(r, has(h, FLAG_N), has(h, FLAG_M), "DeclareInterest key expression")?;
            let interest = r.u8("DeclareInterest flags")?;
            read_exts(r, z, "DeclareInterest extension", &mut |_| {})?;
            Declaration::Interest { id, wire, interest }
        }
        (F_INTEREST_V08, Proto::V08) => {
            let id = r.vle_max(u32::MAX as u64, "FinalInterest id")? as u32;
            read_exts(r, z, "FinalInterest extension", &mut |_| {})?;
            Declaration::InterestFinal { id }
        }
        (U_INTEREST_V08, Proto::V08) => {
            let id = r.vle_max(u32::MAX as u64, "UndeclareInterest id")? as u32;
            let wire = undeclared_wire(r)?;
            Declaration::UndeclareInterest { id, wire }
        }
        _ => return malformed("declaration header", "unknown declaration id"),
    };
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emit;

    // Oracle: the layouts of zenoh-codec 0.11.0-dev (the zenoh rmw_zenoh_cpp of
    // 2024 vendored): `zenoh/{reply,err,ack,query}.rs`, `network/declare.rs`,
    // `core/encoding.rs`. Shapes the real captures (tests/real_batches_v08.rs)
    // did not carry: rmw_zenoh's service calls and zenoh's interests.

    #[test]
    fn reply_of_0_11_is_a_put_with_its_own_extension_ids() {
        let att = crate::rmw::attachment_map(3, 77, &[9; 16], [0, 1, 2]);
        let mut b = vec![];
        emit::response_reply_v08(&mut b, 12, "0/add_two_ints/x/RIHS01_y", Some(&att), b"payload");
        let m = read_v(&mut Reader::new(&b), false, Proto::V08).unwrap();
        let NetworkMsg::Response { rid, body: ResponseBody::Reply(PushBody::Put(p)), .. } = m else { panic!("{m:?}") };
        assert_eq!((rid, p.payload, p.encoding), (12, &b"payload"[..], Some(0)));
        assert_eq!(crate::rmw::parse_attachment(p.attachment.unwrap()).unwrap().sequence_number, 3);
        assert_eq!(m.name(), "REPLY");
        // 1.x reads the same bytes differently (an encoding of 1.x, then a Put header): not this reply.
        assert_ne!(read_v(&mut Reader::new(&b), false, Proto::V09).ok(), Some(m));
    }

    #[test]
    fn err_ack_and_requests_of_0_11() {
        // Err: code 2, T flag with a timestamp, the body extension 0x2 (encoding + payload).
        let mut body = vec![];
        emit::encoding_v08(&mut body, 1, "");
        body.extend_from_slice(b"oops");
        let mut b = vec![RESPONSE, 7, 0];
        b.push(Z_ERR | 0x20 | 0x80);
        emit::vle(&mut b, 2);
        emit::vle(&mut b, 123);
        emit::zslice(&mut b, &[1; 16]);
        b.push(0x42);
        emit::zslice(&mut b, &body);
        let m = read_v(&mut Reader::new(&b), false, Proto::V08).unwrap();
        assert!(matches!(m, NetworkMsg::Response { body: ResponseBody::Err { payload_len: 4 }, .. }), "{m:?}");
        // Ack.
        let b = [RESPONSE, 7, 0, Z_ACK_V08];
        assert_eq!(read_v(&mut Reader::new(&b), false, Proto::V08).unwrap().name(), "REPLY_ACK");
        assert!(read_v(&mut Reader::new(&b), false, Proto::V09).is_err());
        // Query with parameters and an attachment.
        let mut b = vec![];
        emit::request_query_v08(&mut b, 5, "0/srv", "a=b", Some(b"att"));
        let NetworkMsg::Request { id, body: RequestBody::Query(q), .. } = read_v(&mut Reader::new(&b), false, Proto::V08).unwrap() else { panic!() };
        assert_eq!((id, q.parameters, q.attachment), (5, &b"a=b"[..], Some(&b"att"[..])));
        // Pull and a Put sent as a request.
        let b = [REQUEST, 1, 0, Z_PULL_V08];
        assert_eq!(read_v(&mut Reader::new(&b), false, Proto::V08).unwrap().name(), "PULL");
        let mut b = vec![REQUEST, 1, 0];
        b.push(Z_PUT);
        emit::zslice(&mut b, b"x");
        assert_eq!(read_v(&mut Reader::new(&b), false, Proto::V08).unwrap().name(), "REQUEST_PUT");
        // Request ids are 32-bit in 0.11.
        let mut b = vec![REQUEST];
        emit::vle(&mut b, 1 << 33);
        b.extend_from_slice(&[0, Z_PULL_V08]);
        assert!(read_v(&mut Reader::new(&b), false, Proto::V08).is_err());
        assert!(read_v(&mut Reader::new(&b), false, Proto::V09).is_err(), "1.x has no Pull either");
    }

    #[test]
    fn interests_are_declarations_in_0_11_and_messages_in_1x() {
        // DeclareInterest id 4 on "a/**" (scope 0, named), flags 0x7f; FinalInterest; UndeclareInterest.
        let mut b = vec![DECLARE, D_INTEREST_V08 | 0x20, 4, 0];
        emit::zslice(&mut b, b"a/**");
        b.push(0x7f);
        let m = read_v(&mut Reader::new(&b), false, Proto::V08).unwrap();
        assert_eq!((m.name(), m.wire().map(|w| w.suffix)), ("DECLARE_INTEREST", Some(&b"a/**"[..])));
        assert!(read_v(&mut Reader::new(&b), false, Proto::V09).is_err());
        let b = [DECLARE, F_INTEREST_V08, 4];
        assert_eq!(read_v(&mut Reader::new(&b), false, Proto::V08).unwrap().name(), "FINAL_INTEREST");
        let b = [DECLARE, U_INTEREST_V08 | 0x80, 4, 0x5f, 2, 2, 9];
        let m = read_v(&mut Reader::new(&b), false, Proto::V08).unwrap();
        assert_eq!((m.name(), m.wire().map(|w| (w.scope, w.sender_mapping))), ("UNDECLARE_INTEREST", Some((9, false))));
        // 1.x's Interest message and DeclareFinal do not exist in 0.11.
        assert!(!is_network_v(INTEREST, Proto::V08) && is_network_v(INTEREST, Proto::V09));
        assert!(read_v(&mut Reader::new(&[INTEREST, 1]), false, Proto::V08).is_err());
        assert!(read_v(&mut Reader::new(&[DECLARE, D_FINAL]), false, Proto::V08).is_err());
        assert!(read_v(&mut Reader::new(&[DECLARE, D_FINAL]), false, Proto::V09).is_ok());
        // 0.11's Declare has no interest id: bit 5 is reserved, nothing more is read.
        let b = [DECLARE | 0x20, D_SUBSCRIBER | 0x40, 3, 1];
        let m = read_v(&mut Reader::new(&b), false, Proto::V08).unwrap();
        assert!(matches!(m, NetworkMsg::Declare { interest_id: None, body: Declaration::Subscriber { id: 3, .. } }), "{m:?}");
    }

    #[test]
    fn encodings_of_0_11_are_bounded() {
        // Put with E: prefix 0 and a 255-byte suffix reads; a suffix length of 256 is malformed.
        let put = |suffix_len: u64| {
            let mut b = vec![PUSH | 0x20, 0];
            emit::zslice(&mut b, b"k");
            b.push(Z_PUT | 0x40);
            emit::vle(&mut b, 0);
            emit::vle(&mut b, suffix_len);
            b.extend(std::iter::repeat_n(b'x', suffix_len.min(300) as usize));
            emit::zslice(&mut b, b"p");
            b
        };
        assert!(read_v(&mut Reader::new(&put(255)), false, Proto::V08).is_ok());
        assert!(matches!(read_v(&mut Reader::new(&put(256)), false, Proto::V08), Err(crate::ZError::Malformed { .. })));
        assert!(read_v(&mut Reader::new(&put(1 << 40)), false, Proto::V08).is_err());
    }
}
