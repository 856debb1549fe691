//! Transport messages (zenoh-protocol 1.x `transport`): the session
//! handshake (InitSyn/InitAck, OpenSyn/OpenAck), Close, KeepAlive, Join
//! (multicast), OAM, and the Frame and Fragment messages that carry network
//! messages. A *batch* is what one link write carries: a UDP datagram, or
//! on TCP the bytes after a 16-bit little-endian length. Its messages follow
//! each other with no length of their own: a Frame's network messages run
//! until the next byte that is not a network-message header, a Fragment's
//! payload to the end of the batch.
//!
//! Zenoh 0.11 (protocol 0x08) writes these messages the same way
//! (zenoh-codec 0.11.0-dev `transport/`), except that a Fragment has no
//! First/Drop extensions; [`read_v`] reads the network messages that follow
//! with the version's layouts.

use crate::codec::{has, mid, oam_body, read_exts, Ext, Proto, Reader, ZResult, ZenohId, FLAG_Z};
use crate::network::{self, NetworkMsg};

pub const OAM: u8 = 0x00;
pub const INIT: u8 = 0x01;
pub const OPEN: u8 = 0x02;
pub const CLOSE: u8 = 0x03;
pub const KEEP_ALIVE: u8 = 0x04;
pub const FRAME: u8 = 0x05;
pub const FRAGMENT: u8 = 0x06;
pub const JOIN: u8 = 0x07;

/// The protocol version Zenoh 1.x sends in InitSyn/InitAck/Join.
pub const VERSION_1X: u8 = 0x09;
/// The protocol version Zenoh 0.11 sends (zenoh-protocol 0.11.0-dev `VERSION`).
pub const VERSION_0_11: u8 = 0x08;

/// Init/Open flags.
pub const FLAG_A: u8 = 0x20;
pub const FLAG_S: u8 = 0x40;
pub const FLAG_T: u8 = 0x40;
/// Frame/Fragment flags.
pub const FLAG_R: u8 = 0x20;
pub const FLAG_M: u8 = 0x40;

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WhatAmI {
    Router,
    Peer,
    Client,
}

impl WhatAmI {
    pub fn as_str(self) -> &'static str {
        match self {
            WhatAmI::Router => "router",
            WhatAmI::Peer => "peer",
            WhatAmI::Client => "client",
        }
    }
}

/// InitSyn or InitAck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Init<'a> {
    pub ack: bool,
    pub version: u8,
    pub whatami: WhatAmI,
    pub zid: ZenohId,
    /// Resolution byte and batch size, when the S flag sent them.
    pub resolution: Option<u8>,
    pub batch_size: Option<u16>,
    /// InitAck only.
    pub cookie: &'a [u8],
    pub qos: bool,
    pub lowlatency: bool,
    pub compression: bool,
    pub auth: bool,
    pub shm: bool,
    pub patch: u64,
    pub unknown_mandatory_exts: u8,
}

/// OpenSyn or OpenAck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    pub ack: bool,
    pub lease_ms: u64,
    pub initial_sn: u64,
    pub cookie_len: usize,
    pub lowlatency: bool,
    pub compression: bool,
    pub auth: bool,
}

/// A Frame's header; its network messages are read with [`FrameMsgs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub reliable: bool,
    pub sn: u64,
    /// The QoS extension's priority (0 = control … 7 = background), 5 (data) when absent.
    pub priority: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fragment<'a> {
    pub reliable: bool,
    /// More fragments of the same message follow.
    pub more: bool,
    pub sn: u64,
    pub priority: u8,
    /// Extension `First` (patch ≥ 1): the first fragment of a message.
    pub first: bool,
    /// Extension `Drop` (patch ≥ 1): the message being fragmented was dropped.
    pub drop: bool,
    pub payload: &'a [u8],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Join {
    pub version: u8,
    pub whatami: WhatAmI,
    pub zid: ZenohId,
    pub lease_ms: u64,
}

/// One transport message of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportMsg<'a> {
    Init(Init<'a>),
    Open(Open),
    Close { reason: u8, session: bool },
    KeepAlive,
    /// A Frame: its header; the network messages follow in the batch.
    Frame(Frame),
    Fragment(Fragment<'a>),
    Join(Join),
    Oam { id: u64 },
    /// A network message outside any Frame: sessions that negotiated
    /// low latency send them so.
    Network(NetworkMsg<'a>),
}

impl TransportMsg<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            TransportMsg::Init(i) if i.ack => "INIT_ACK",
            TransportMsg::Init(_) => "INIT_SYN",
            TransportMsg::Open(o) if o.ack => "OPEN_ACK",
            TransportMsg::Open(_) => "OPEN_SYN",
            TransportMsg::Close { .. } => "CLOSE",
            TransportMsg::KeepAlive => "KEEP_ALIVE",
            TransportMsg::Frame(_) => "FRAME",
            TransportMsg::Fragment(_) => "FRAGMENT",
            TransportMsg::Join(_) => "JOIN",
            TransportMsg::Oam { .. } => "OAM",
            TransportMsg::Network(n) => n.name(),
        }
    }
}

fn whatami(flags: u8) -> ZResult<WhatAmI> {
    match flags & 0b11 {
        0b00 => Ok(WhatAmI::Router),
        0b01 => Ok(WhatAmI::Peer),
        0b10 => Ok(WhatAmI::Client),
        _ => crate::codec::malformed("whatami", "reserved value 3"),
    }
}

fn zid(r: &mut Reader<'_>, flags: u8, what: &'static str) -> ZResult<ZenohId> {
    let len = 1 + (flags >> 4) as usize;
    let b = r.bytes(len, what)?;
    ZenohId::from_wire(b).map_or_else(|| crate::codec::malformed(what, "bad length"), Ok)
}

fn qos_priority(e: &Ext<'_>) -> Option<u8> {
    (e.id == 0x1).then(|| e.z64().map(|v| (v & 0x07) as u8)).flatten()
}

/// Reads the transport message at the reader's position. A Frame's header
/// only: the caller reads its network messages next ([`FrameMsgs`]).
pub fn read<'a>(r: &mut Reader<'a>) -> ZResult<TransportMsg<'a>> {
    read_v(r, Proto::V09)
}

/// [`read`] for a session of protocol `proto` (a network message outside a
/// Frame is read with its layouts).
pub fn read_v<'a>(r: &mut Reader<'a>, proto: Proto) -> ZResult<TransportMsg<'a>> {
    let h = r.u8("transport header")?;
    let z = has(h, FLAG_Z);
    match mid(h) {
        INIT => {
            let ack = has(h, FLAG_A);
            let version = r.u8("Init version")?;
            let flags = r.u8("Init flags")?;
            let whatami = whatami(flags)?;
            let zid = zid(r, flags, "Init zid")?;
            let (mut resolution, mut batch_size) = (None, None);
            if has(h, FLAG_S) {
                resolution = Some(r.u8("Init resolution")?);
                let b = r.bytes(2, "Init batch size")?;
                batch_size = Some(u16::from_le_bytes([b[0], b[1]]));
            }
            let cookie = if ack { r.zslice("InitAck cookie")? } else { &[] };
            let mut m = Init {
                ack,
                version,
                whatami,
                zid,
                resolution,
                batch_size,
                cookie,
                qos: false,
                lowlatency: false,
                compression: false,
                auth: false,
                shm: false,
                patch: 0,
                unknown_mandatory_exts: 0,
            };
            read_exts(r, z, "Init extension", &mut |e| match e.id {
                0x1 => m.qos = true,
                0x2 => m.shm = true,
                0x3 => m.auth = true,
                0x5 => m.lowlatency = true,
                0x6 => m.compression = true,
                0x7 => m.patch = e.z64().unwrap_or(0),
                _ if e.mandatory => m.unknown_mandatory_exts = m.unknown_mandatory_exts.saturating_add(1),
                _ => {}
            })?;
            Ok(TransportMsg::Init(m))
        }
        OPEN => {
            let ack = has(h, FLAG_A);
            let lease = r.vle("Open lease")?;
            let lease_ms = if has(h, FLAG_T) { lease.saturating_mul(1000) } else { lease };
            let initial_sn = r.vle("Open initial sn")?;
            let cookie_len = if ack { 0 } else { r.zslice("OpenSyn cookie")?.len() };
            let mut m = Open { ack, lease_ms, initial_sn, cookie_len, lowlatency: false, compression: false, auth: false };
            read_exts(r, z, "Open extension", &mut |e| match e.id {
                0x3 => m.auth = true,
                0x5 => m.lowlatency = true,
                0x6 => m.compression = true,
                _ => {}
            })?;
            Ok(TransportMsg::Open(m))
        }
        CLOSE => {
            let reason = r.u8("Close reason")?;
            read_exts(r, z, "Close extension", &mut |_| {})?;
            Ok(TransportMsg::Close { reason, session: has(h, 0x20) })
        }
        KEEP_ALIVE => {
            read_exts(r, z, "KeepAlive extension", &mut |_| {})?;
            Ok(TransportMsg::KeepAlive)
        }
        FRAME => {
            let sn = r.vle("Frame sn")?;
            let mut priority = 5;
            read_exts(r, z, "Frame extension", &mut |e| {
                if let Some(p) = qos_priority(&e) {
                    priority = p;
                }
            })?;
            Ok(TransportMsg::Frame(Frame { reliable: has(h, FLAG_R), sn, priority }))
        }
        FRAGMENT => {
            let sn = r.vle("Fragment sn")?;
            let (mut priority, mut first, mut drop) = (5, false, false);
            read_exts(r, z, "Fragment extension", &mut |e| {
                if let Some(p) = qos_priority(&e) {
                    priority = p;
                } else if proto == Proto::V09 && e.id == 0x2 && e.is_unit() {
                    first = true;
                } else if proto == Proto::V09 && e.id == 0x3 && e.is_unit() {
                    drop = true;
                }
            })?;
            let payload = r.rest();
            Ok(TransportMsg::Fragment(Fragment { reliable: has(h, FLAG_R), more: has(h, FLAG_M), sn, priority, first, drop, payload }))
        }
        JOIN => {
            let version = r.u8("Join version")?;
            let flags = r.u8("Join flags")?;
            let whatami = whatami(flags)?;
            let zid = zid(r, flags, "Join zid")?;
            if has(h, FLAG_S) {
                r.bytes(3, "Join resolution and batch size")?;
            }
            let lease = r.vle("Join lease")?;
            let lease_ms = if has(h, 0x20) { lease.saturating_mul(1000) } else { lease };
            r.vle("Join reliable sn")?;
            r.vle("Join best-effort sn")?;
            read_exts(r, z, "Join extension", &mut |_| {})?;
            Ok(TransportMsg::Join(Join { version, whatami, zid, lease_ms }))
        }
        OAM => {
            let id = r.vle("OAM id")?;
            read_exts(r, z, "OAM extension", &mut |_| {})?;
            oam_body(r, h)?;
            Ok(TransportMsg::Oam { id })
        }
        id if network::is_network_v(id, proto) => {
            // A network message outside a Frame (low-latency sessions).
            Ok(TransportMsg::Network(network::read_with_header(r, h, false, proto)?))
        }
        _ => crate::codec::malformed("transport header", "unknown message id"),
    }
}

/// The network messages of a Frame: read until the batch ends or the next
/// byte is a transport header.
pub struct FrameMsgs<'r, 'a> {
    r: &'r mut Reader<'a>,
    failed: bool,
    proto: Proto,
}

impl<'r, 'a> FrameMsgs<'r, 'a> {
    pub fn new(r: &'r mut Reader<'a>) -> Self {
        Self::with_proto(r, Proto::V09)
    }

    /// The network messages of a Frame of a session of protocol `proto`.
    pub fn with_proto(r: &'r mut Reader<'a>, proto: Proto) -> Self {
        FrameMsgs { r, failed: false, proto }
    }
}

impl<'a> Iterator for FrameMsgs<'_, 'a> {
    /// The message with its byte range in the batch.
    type Item = ZResult<(std::ops::Range<usize>, NetworkMsg<'a>)>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let h = self.r.peek()?;
        if !network::is_network_v(mid(h), self.proto) {
            return None;
        }
        let start = self.r.pos();
        match network::read_v(self.r, false, self.proto) {
            Ok(m) => Some(Ok((start..self.r.pos(), m))),
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Whether `b` could start a batch: a transport header (or, low latency, a
/// network header) with a known id. Used to find Zenoh in a stream.
pub fn plausible_header(b: u8) -> bool {
    mid(b) <= JOIN || network::is_network(mid(b))
}
