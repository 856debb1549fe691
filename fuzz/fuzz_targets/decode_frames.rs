//! Fuzzes the whole decode path (link → IP reassembly → UDP → RTPS →
//! discovery → events → sample tracker → topics) with a sequence of frames.
//! Input: repeated [link selector u8][length u16 LE][frame bytes].
#![no_main]

use ddscope_core::source::Packet;
use ddscope_core::decode::{Decoder, DecoderConfig};
use ddscope_core::samples::{SampleConfig, SampleTracker};
use ddscope_core::topics::TopicsAnalysis;
use ddscope_wire::link::LinkType;
use libfuzzer_sys::fuzz_target;

const LINKS: [u32; 9] = [1, 0, 12, 101, 108, 113, 228, 229, 276];

fuzz_target!(|data: &[u8]| {
    let mut dec = Decoder::new("fuzz", DecoderConfig::default());
    let mut tracker = SampleTracker::new(SampleConfig { max_samples: 64, ..Default::default() });
    let mut topics = TopicsAnalysis::new();
    let mut rest = data;
    let mut frame = 0u64;
    while rest.len() >= 3 {
        let link = LinkType::from_linktype(LINKS[rest[0] as usize % LINKS.len()]);
        let len = u16::from_le_bytes([rest[1], rest[2]]) as usize;
        let body = &rest[3..];
        let take = len.min(body.len());
        frame += 1;
        let p = Packet { frame, ts_ns: frame as i64 * 1_000, interface: 0, link, data: &body[..take], orig_len: take as u32 };
        dec.packet(&p, &mut |e| {
            topics.on_event(e);
            tracker.on_event(e, &mut |r| topics.on_sample(&r));
        });
        rest = &body[take..];
    }
    dec.finish();
    tracker.finish(&mut |r| topics.on_sample(&r));
    let _ = topics.rows("fuzz", &dec.discovery, false, &[]);
});
