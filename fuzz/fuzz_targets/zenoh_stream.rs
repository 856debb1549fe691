//! Fuzzes the Zenoh decoder (TCP stream reassembly, batches, fragments, key
//! expression and token tables) with segments and datagrams on Zenoh's port,
//! so every input reaches it. Input: repeated [selector u8][length u16 LE][bytes]:
//! selector bit 0 = UDP (else TCP), bits 1–3 = which of 8 flows, bits 4–5 =
//! TCP flags (SYN, FIN), bit 6 = sequence number jumps (a gap), bit 7 = repeat
//! the previous segment (a retransmission). Tight caps, so evictions run too.
#![no_main]

use ddscope_core::zenoh::{ZenohDecoder, ZenohLimits};
use ddscope_wire::tcp;
use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let cfg = ZenohLimits { max_streams: 4, max_stream_bytes: 256 << 10, max_keyexprs: 16, max_fragmented: 4, max_fragment_head: 4096, max_tokens: 16, max_sessions: 8, ..ZenohLimits::default() };
    let mut d = ZenohDecoder::new(cfg);
    let cap: Arc<str> = Arc::from("fuzz");
    let mut seq = [1u32; 8];
    let mut rest = data;
    let mut frame = 0u64;
    let mut prev: Vec<u8> = vec![];
    while rest.len() >= 3 {
        let sel = rest[0];
        let len = u16::from_le_bytes([rest[1], rest[2]]) as usize;
        let body = &rest[3..];
        let take = len.min(body.len());
        let bytes = &body[..take];
        rest = &body[take..];
        frame += 1;
        let flow = ((sel >> 1) & 7) as usize;
        let src = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1 + (flow & 1) as u8)), 40000 + flow as u16);
        let dst = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9)), ddscope_zenoh::DEFAULT_PORT);
        let (s, t) = if flow & 4 != 0 { (dst, src) } else { (src, dst) };
        if sel & 1 == 1 {
            d.udp(&cap, frame, frame as i64, frame as i64, 0, None, s, t, bytes, false, &mut |_| {});
            continue;
        }
        let mut flags = tcp::ACK;
        if sel & 0x10 != 0 {
            flags |= tcp::SYN;
        }
        if sel & 0x20 != 0 {
            flags |= tcp::FIN;
        }
        if sel & 0x40 != 0 {
            seq[flow] = seq[flow].wrapping_add(1000);
        }
        let payload: &[u8] = if sel & 0x80 != 0 && !prev.is_empty() { &prev } else { bytes };
        let raw = tcp::emit(s.port(), t.port(), seq[flow], 0, flags, payload);
        seq[flow] = seq[flow].wrapping_add(payload.len() as u32);
        let seg = tcp::parse(&raw).expect("emitted header parses");
        d.tcp(&cap, frame, frame as i64, 0, None, s, t, &seg, 0, &mut |_| {});
        prev = bytes.to_vec();
    }
    d.finish();
});
