//! Network messages (zenoh-protocol 1.x `network`) and the Zenoh messages
//! they carry (`zenoh`: Put, Del, Query, Reply, Err): Push, Declare,
//! Interest, Request, Response, ResponseFinal and OAM.
//!
//! Key expressions travel as a *wire expression*: a numeric scope (0, or an
//! id an earlier Declare KeyExpr gave a string) and an optional suffix. The
//! M flag says whose declarations the scope refers to: the sender's (M=1)
//! or the receiver's (M=0). Resolving them needs the session's state
//! (`ddscope-core`); here they are returned as they are.

use crate::codec::{has, malformed, mid, read_exts, Reader, ZResult, ZenohId, FLAG_Z};

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

const FLAG_N: u8 = 0x20;
const FLAG_M: u8 = 0x40;

pub fn is_network(id: u8) -> bool {
    (INTEREST..=OAM).contains(&id)
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

/// The `WireExprExt` of an undeclaration: flags (bit 0 named, bit 1 sender
/// mapping), scope, and the suffix as the rest of the extension.
fn wire_expr_ext(b: &[u8]) -> ZResult<WireExpr<'_>> {
    let mut r = Reader::new(b);
    let flags = r.u8("WireExpr extension")?;
    let scope = r.vle_max(u16::MAX as u64, "WireExpr extension")? as u16;
    let suffix = if has(flags, 1) { r.rest() } else { &[] };
    Ok(WireExpr { scope, suffix, sender_mapping: has(flags, 2) })
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseBody<'a> {
    Reply(PushBody<'a>),
    Err { payload_len: u64 },
}

/// One network message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkMsg<'a> {
    Push { wire: WireExpr<'a>, body: PushBody<'a> },
    Declare { interest_id: Option<u32>, body: Declaration<'a> },
    Interest { id: u32, mode: u8, options: u8, wire: Option<WireExpr<'a>> },
    Request { id: u64, wire: WireExpr<'a>, body: Query<'a> },
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
            NetworkMsg::Request { .. } => "QUERY",
            NetworkMsg::Response { body: ResponseBody::Reply(PushBody::Put(_)), .. } => "REPLY",
            NetworkMsg::Response { body: ResponseBody::Reply(PushBody::Del { .. }), .. } => "REPLY_DEL",
            NetworkMsg::Response { body: ResponseBody::Err { .. }, .. } => "REPLY_ERR",
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
                | Declaration::Token { wire, .. } => Some(*wire),
                Declaration::UndeclareSubscriber { wire, .. }
                | Declaration::UndeclareQueryable { wire, .. }
                | Declaration::UndeclareToken { wire, .. } => *wire,
                _ => None,
            },
            _ => None,
        }
    }
}

/// Reads one network message. `allow_cut`: the bytes are the head of a
/// longer message (a fragmented message of which only the head is kept);
/// the last payload may end early.
pub fn read<'a>(r: &mut Reader<'a>, allow_cut: bool) -> ZResult<NetworkMsg<'a>> {
    let h = r.u8("network header")?;
    read_with_header(r, h, allow_cut)
}

pub(crate) fn read_with_header<'a>(r: &mut Reader<'a>, h: u8, allow_cut: bool) -> ZResult<NetworkMsg<'a>> {
    let z = has(h, FLAG_Z);
    match mid(h) {
        PUSH => {
            let wire = wire_expr(r, has(h, FLAG_N), has(h, FLAG_M), "Push key expression")?;
            read_exts(r, z, "Push extension", &mut |_| {})?;
            let body = push_body(r, allow_cut, "Push body")?;
            Ok(NetworkMsg::Push { wire, body })
        }
        DECLARE => {
            let interest_id = if has(h, 0x20) { Some(r.vle_max(u32::MAX as u64, "Declare interest id")? as u32) } else { None };
            read_exts(r, z, "Declare extension", &mut |_| {})?;
            let body = declaration(r)?;
            Ok(NetworkMsg::Declare { interest_id, body })
        }
        INTEREST => {
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
            let id = r.vle("Request id")?;
            let wire = wire_expr(r, has(h, FLAG_N), has(h, FLAG_M), "Request key expression")?;
            read_exts(r, z, "Request extension", &mut |_| {})?;
            let qh = r.u8("Query header")?;
            if mid(qh) != Z_QUERY {
                return malformed("Request body", "not a Query");
            }
            if has(qh, 0x20) {
                r.vle("Query consolidation")?;
            }
            let parameters = if has(qh, 0x40) { r.zslice("Query parameters")? } else { &[] };
            let (mut attachment, mut body_len) = (None, None);
            read_exts(r, has(qh, FLAG_Z), "Query extension", &mut |e| match e.id {
                0x5 => attachment = e.zbuf(),
                0x3 => body_len = e.zbuf().map(<[u8]>::len),
                _ => {}
            })?;
            Ok(NetworkMsg::Request { id, wire, body: Query { parameters, attachment, body_len } })
        }
        RESPONSE => {
            let rid = r.vle("Response request id")?;
            let wire = wire_expr(r, has(h, FLAG_N), has(h, FLAG_M), "Response key expression")?;
            read_exts(r, z, "Response extension", &mut |_| {})?;
            let bh = r.u8("Response body header")?;
            let body = match mid(bh) {
                Z_REPLY => {
                    if has(bh, 0x20) {
                        r.vle("Reply consolidation")?;
                    }
                    read_exts(r, has(bh, FLAG_Z), "Reply extension", &mut |_| {})?;
                    ResponseBody::Reply(push_body(r, allow_cut, "Reply body")?)
                }
                Z_ERR => {
                    if has(bh, 0x40) {
                        encoding(r)?;
                    }
                    read_exts(r, has(bh, FLAG_Z), "Err extension", &mut |_| {})?;
                    let (payload_len, _) = payload(r, allow_cut, "Err payload")?;
                    ResponseBody::Err { payload_len }
                }
                _ => return malformed("Response body", "neither Reply nor Err"),
            };
            Ok(NetworkMsg::Response { rid, wire, body })
        }
        RESPONSE_FINAL => {
            let rid = r.vle("ResponseFinal request id")?;
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

fn encoding(r: &mut Reader<'_>) -> ZResult<u32> {
    let v = r.vle_max(u32::MAX as u64, "encoding")?;
    if v & 1 != 0 {
        // a schema: a string of at most 255 bytes
        let n = r.vle_max(u8::MAX as u64, "encoding schema")?;
        r.bytes(n as usize, "encoding schema")?;
    }
    Ok((v >> 1) as u32)
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

fn push_body<'a>(r: &mut Reader<'a>, allow_cut: bool, what: &'static str) -> ZResult<PushBody<'a>> {
    let h = r.u8(what)?;
    match mid(h) {
        Z_PUT => {
            let timestamp = if has(h, 0x20) { Some(timestamp(r)?) } else { None };
            let encoding = if has(h, 0x40) { Some(encoding(r)?) } else { None };
            let (mut source_info, mut attachment, mut shm, mut bad) = (None, None, false, None);
            read_exts(r, has(h, FLAG_Z), "Put extension", &mut |e| match e.id {
                0x1 => match e.zbuf().map(source_info_checked) {
                    Some(Ok(s)) => source_info = Some(s),
                    Some(Err(err)) => bad = Some(err),
                    None => {}
                },
                0x2 => shm = true,
                0x3 => attachment = e.zbuf(),
                _ => {}
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
                return Ok(PushBody::Put(Put { timestamp, encoding, source_info, attachment, shm, shm_slices, payload_len: raw, payload: &[] }));
            }
            let (payload_len, payload) = payload(r, allow_cut, "Put payload")?;
            Ok(PushBody::Put(Put { timestamp, encoding, source_info, attachment, shm, shm_slices: 0, payload_len, payload }))
        }
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

fn declaration<'a>(r: &mut Reader<'a>) -> ZResult<Declaration<'a>> {
    let h = r.u8("declaration header")?;
    let z = has(h, FLAG_Z);
    let d = match mid(h) {
        D_KEYEXPR => {
            let id = r.vle_max(u16::MAX as u64, "DeclareKeyExpr id")? as u16;
            let wire = wire_expr(r, has(h, FLAG_N), true, "DeclareKeyExpr key expression")?;
            read_exts(r, z, "DeclareKeyExpr extension", &mut |_| {})?;
            Declaration::KeyExpr { id, wire }
        }
        U_KEYEXPR => {
            let id = r.vle_max(u16::MAX as u64, "UndeclareKeyExpr id")? as u16;
            read_exts(r, z, "UndeclareKeyExpr extension", &mut |_| {})?;
            Declaration::UndeclareKeyExpr { id }
        }
        D_SUBSCRIBER | D_QUERYABLE | D_TOKEN => {
            let id = r.vle_max(u32::MAX as u64, "declaration id")? as u32;
            let wire = wire_expr(r, has(h, FLAG_N), has(h, FLAG_M), "declared key expression")?;
            read_exts(r, z, "declaration extension", &mut |_| {})?;
            match mid(h) {
                D_SUBSCRIBER => Declaration::Subscriber { id, wire },
                D_QUERYABLE => Declaration::Queryable { id, wire },
                _ => Declaration::Token { id, wire },
            }
        }
        U_SUBSCRIBER | U_QUERYABLE | U_TOKEN => {
            let id = r.vle_max(u32::MAX as u64, "undeclaration id")? as u32;
            let mut ext = None;
            read_exts(r, z, "undeclaration extension", &mut |e| {
                if e.id == 0x0f {
                    ext = e.zbuf();
                }
            })?;
            let wire = match ext {
                Some(b) => Some(wire_expr_ext(b)?),
                None => None,
            };
            match mid(h) {
                U_SUBSCRIBER => Declaration::UndeclareSubscriber { id, wire },
                U_QUERYABLE => Declaration::UndeclareQueryable { id, wire },
                _ => Declaration::UndeclareToken { id, wire },
            }
        }
        D_FINAL => {
            read_exts(r, z, "DeclareFinal extension", &mut |_| {})?;
            Declaration::Final
        }
        _ => return malformed("declaration header", "unknown declaration id"),
    };
    Ok(d)
}
