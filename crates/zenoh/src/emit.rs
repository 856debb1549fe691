//! Writing Zenoh messages: what tests, the fuzz seeds and the hostile-traffic
//! generator send. Byte layouts as zenoh-codec 1.x writes them (checked
//! against it in `tests/zenoh_codec.rs`); the `*_v08` writers as zenoh-codec
//! 0.11.0-dev writes Zenoh 0.11's (protocol 0x08) messages where they differ
//! (checked against batches real rmw_zenoh_cpp of 2024 wrote in
//! `tests/real_batches_v08.rs`).

use crate::network::{D_TOKEN, DECLARE, PUSH, U_TOKEN, Z_PUT};
use crate::transport::{FRAGMENT, FRAME, INIT, KEEP_ALIVE, OPEN, VERSION_1X};

pub fn vle(out: &mut Vec<u8>, mut v: u64) {
    let mut n = 0;
    while v & !0x7f != 0 && n < 8 {
        out.push((v as u8) | 0x80);
        v >>= 7;
        n += 1;
    }
    out.push(v as u8);
}

pub fn zslice(out: &mut Vec<u8>, b: &[u8]) {
    vle(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// whatami code: 0 router, 1 peer, 2 client.
pub fn init(out: &mut Vec<u8>, ack: bool, whatami: u8, zid: &[u8], cookie: &[u8]) {
    init_version(out, ack, whatami, zid, cookie, VERSION_1X)
}

/// [`init`] naming protocol `version` (0x08: Zenoh 0.11, whose Init is laid out the same).
pub fn init_version(out: &mut Vec<u8>, ack: bool, whatami: u8, zid: &[u8], cookie: &[u8], version: u8) {
    let mut h = INIT | 0x40; // S: resolution and batch size
    if ack {
        h |= 0x20;
    }
    out.push(h | 0x80); // one extension (QoS) follows
    out.push(version);
    out.push((whatami & 0b11) | (((zid.len() as u8).saturating_sub(1) & 0x0f) << 4));
    out.extend_from_slice(zid);
    out.push(0x0a);
    out.extend_from_slice(&65535u16.to_le_bytes());
    if ack {
        zslice(out, cookie);
    }
    out.push(0x01); // QoS, unit, last
}

pub fn open(out: &mut Vec<u8>, ack: bool, lease_ms: u64, initial_sn: u64, cookie: &[u8]) {
    out.push(OPEN | if ack { 0x20 } else { 0 });
    vle(out, lease_ms);
    vle(out, initial_sn);
    if !ack {
        zslice(out, cookie);
    }
}

pub fn keep_alive(out: &mut Vec<u8>) {
    out.push(KEEP_ALIVE);
}

pub fn frame_header(out: &mut Vec<u8>, reliable: bool, sn: u64) {
    out.push(FRAME | if reliable { 0x20 } else { 0 });
    vle(out, sn);
}

pub fn fragment(out: &mut Vec<u8>, reliable: bool, more: bool, sn: u64, payload: &[u8]) {
    out.push(FRAGMENT | if reliable { 0x20 } else { 0 } | if more { 0x40 } else { 0 });
    vle(out, sn);
    out.extend_from_slice(payload);
}

/// A Push of a Put on `key` (named, scope 0) with an optional attachment.
pub fn push_put(out: &mut Vec<u8>, key: &str, attachment: Option<&[u8]>, payload: &[u8]) {
    push_put_scoped(out, 0, key, false, attachment, payload)
}

/// A Push of a Put on (scope, suffix); `sender_mapping` sets the M flag.
pub fn push_put_scoped(out: &mut Vec<u8>, scope: u16, suffix: &str, sender_mapping: bool, attachment: Option<&[u8]>, payload: &[u8]) {
    let mut h = PUSH;
    if !suffix.is_empty() {
        h |= 0x20;
    }
    if sender_mapping {
        h |= 0x40;
    }
    out.push(h);
    vle(out, scope as u64);
    if !suffix.is_empty() {
        zslice(out, suffix.as_bytes());
    }
    match attachment {
        Some(a) => {
            out.push(Z_PUT | 0x80);
            out.push(0x43); // Attachment: id 3, zbuf, last
            zslice(out, a);
        }
        None => out.push(Z_PUT),
    }
    zslice(out, payload);
}

/// A Declare of a key expression id (scope 0, suffix `key`).
pub fn declare_keyexpr(out: &mut Vec<u8>, id: u16, key: &str) {
    out.push(DECLARE);
    out.push(crate::network::D_KEYEXPR | 0x20);
    vle(out, id as u64);
    vle(out, 0);
    zslice(out, key.as_bytes());
}

/// A Declare of a liveliness token on `key`.
pub fn declare_token(out: &mut Vec<u8>, id: u32, key: &str) {
    out.push(DECLARE);
    out.push(D_TOKEN | 0x20);
    vle(out, id as u64);
    vle(out, 0);
    zslice(out, key.as_bytes());
}

pub fn undeclare_token(out: &mut Vec<u8>, id: u32) {
    out.push(DECLARE);
    out.push(U_TOKEN);
    vle(out, id as u64);
}

/// Prefixes a batch with its 16-bit little-endian length (TCP and other stream links).
pub fn stream_batch(batch: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(batch.len() + 2);
    out.extend_from_slice(&(batch.len().min(u16::MAX as usize) as u16).to_le_bytes());
    out.extend_from_slice(batch);
    out
}

/// A Declare of a subscriber on the sender's key expression `scope` (M=1) with an optional suffix.
pub fn declare_subscriber(out: &mut Vec<u8>, id: u32, scope: u16, suffix: &str) {
    out.push(DECLARE);
    out.push(crate::network::D_SUBSCRIBER | 0x40 | if suffix.is_empty() { 0 } else { 0x20 });
    vle(out, id as u64);
    vle(out, scope as u64);
    if !suffix.is_empty() {
        zslice(out, suffix.as_bytes());
    }
}

/// Zenoh 0.11's liveliness token: a subscriber on `@/liveliness/<key>` (scope 0, named).
pub fn declare_token_v08(out: &mut Vec<u8>, id: u32, key: &str) {
    declare_subscriber(out, id, 0, &format!("{}{key}", crate::network::LIVELINESS_PREFIX_V08));
}

/// Zenoh 0.11's undeclaration of a subscriber by its key expression (the
/// extension's bit 1 set for the receiver's mapping, as 0.11 writes it).
pub fn undeclare_subscriber_v08(out: &mut Vec<u8>, id: u32, scope: u16, suffix: &str, sender_mapping: bool) {
    out.push(DECLARE);
    out.push(crate::network::U_SUBSCRIBER | 0x80);
    vle(out, id as u64);
    let mut ext = vec![u8::from(!suffix.is_empty()) | if sender_mapping { 0 } else { 2 }];
    vle(&mut ext, scope as u64);
    ext.extend_from_slice(suffix.as_bytes());
    out.push(0x5f); // WireExpr extension: id 0xf, mandatory, zbuf, last
    zslice(out, &ext);
}

/// Zenoh 0.11's encoding: a prefix and a suffix string.
pub fn encoding_v08(out: &mut Vec<u8>, prefix: u8, suffix: &str) {
    vle(out, prefix as u64);
    zslice(out, suffix.as_bytes());
}

/// A Response carrying Zenoh 0.11's Reply (key `key`, scope 0): encoding
/// (E), an optional attachment (extension 0x4), the payload.
pub fn response_reply_v08(out: &mut Vec<u8>, rid: u32, key: &str, attachment: Option<&[u8]>, payload: &[u8]) {
    out.push(crate::network::RESPONSE | 0x20);
    vle(out, rid as u64);
    vle(out, 0);
    zslice(out, key.as_bytes());
    out.push(crate::network::Z_REPLY | 0x40 | if attachment.is_some() { 0x80 } else { 0 });
    encoding_v08(out, 0, "cdr");
    if let Some(a) = attachment {
        out.push(0x44); // Attachment: id 4, zbuf, last
        zslice(out, a);
    }
    zslice(out, payload);
}

/// A Request carrying Zenoh 0.11's Query: parameters (P, 0x20), an attachment (0x5).
pub fn request_query_v08(out: &mut Vec<u8>, id: u32, key: &str, parameters: &str, attachment: Option<&[u8]>) {
    out.push(crate::network::REQUEST | 0x20);
    vle(out, id as u64);
    vle(out, 0);
    zslice(out, key.as_bytes());
    let mut h = crate::network::Z_QUERY;
    if !parameters.is_empty() {
        h |= 0x20;
    }
    if attachment.is_some() {
        h |= 0x80;
    }
    out.push(h);
    if !parameters.is_empty() {
        zslice(out, parameters.as_bytes());
    }
    if let Some(a) = attachment {
        out.push(0x45);
        zslice(out, a);
    }
}
