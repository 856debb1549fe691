//! Hostile input never panics and never grows memory without bound.
//! Property tests: random frames on every link type, and real-looking frames
//! (the synthetic feature capture) mutated by bit flips, truncation and
//! splicing; floods of fake fragments and writers stay within the caps.

use ddscope_core::source::Packet;
use ddscope_core::decode::{Decoder, DecoderConfig};
use ddscope_core::ipfrag::ReassemblyLimits;
use ddscope_core::samples::{SampleConfig, SampleTracker};
use ddscope_testkit::{self as testkit, FrameOptions, RtpsBuilder};
use ddscope_core::topics::TopicsAnalysis;
use ddscope_wire::link::LinkType;
use ddscope_wire::{EntityId, GuidPrefix};
use proptest::prelude::*;
use std::net::SocketAddr;

const LINKS: [u32; 9] = [0, 1, 12, 101, 108, 113, 228, 229, 276];

fn run(frames: &[(u32, Vec<u8>)]) -> Decoder {
    let mut dec = Decoder::new("fuzz", DecoderConfig::default());
    let mut tracker = SampleTracker::new(SampleConfig::default());
    let mut topics = TopicsAnalysis::new();
    for (i, (link, data)) in frames.iter().enumerate() {
        let p = Packet {
            frame: i as u64 + 1,
            ts_ns: i as i64 * 1000,
            interface: 0,
            link: LinkType::from_linktype(*link),
            data,
            orig_len: data.len() as u32,
        };
        dec.packet(&p, &mut |e| {
            topics.on_event(e);
            tracker.on_event(e, &mut |r| topics.on_sample(&r));
        });
    }
    dec.finish();
    tracker.finish(&mut |r| topics.on_sample(&r));
    let _ = topics.rows("fuzz", &dec.discovery, false, &[]);
    let _ = topics.rows("fuzz", &dec.discovery, true, &[]);
    dec
}

fn feature_corpus() -> Vec<Vec<u8>> {
    testkit::feature_frames().into_iter().map(|(_, f)| f).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn random_frames_never_panic(frames in proptest::collection::vec((0usize..LINKS.len(), proptest::collection::vec(any::<u8>(), 0..200)), 1..20)) {
        let frames: Vec<(u32, Vec<u8>)> = frames.into_iter().map(|(l, d)| (LINKS[l], d)).collect();
        let dec = run(&frames);
        prop_assert_eq!(dec.stats.frames, frames.len() as u64);
    }

    #[test]
    fn mutated_real_frames_never_panic(
        picks in proptest::collection::vec(0usize..1000, 1..30),
        flips in proptest::collection::vec((0usize..2000, any::<u8>()), 0..12),
        cut in proptest::option::of(0usize..2000),
    ) {
        let corpus = feature_corpus();
        let mut frames: Vec<(u32, Vec<u8>)> = picks.iter().map(|i| (1, corpus[i % corpus.len()].clone())).collect();
        for (k, (pos, val)) in flips.iter().enumerate() {
            let n = frames.len();
            let f = &mut frames[k % n].1;
            if !f.is_empty() {
                let l = f.len();
                f[pos % l] ^= val;
            }
        }
        if let Some(c) = cut {
            let f = &mut frames[0].1;
            let l = f.len();
            f.truncate(c % (l + 1));
        }
        run(&frames);
    }

    #[test]
    fn rtps_with_random_submessages_never_panics(subs in proptest::collection::vec((any::<u8>(), any::<u8>(), proptest::collection::vec(any::<u8>(), 0..80)), 1..8)) {
        let mut b = RtpsBuilder::new(0x0110, GuidPrefix([1; 12]));
        for (id, flags, body) in &subs {
            b = b.little_endian(flags & 1 == 1).submessage(*id, *flags, body);
        }
        let src: SocketAddr = "10.0.0.1:7410".parse().unwrap();
        let dst: SocketAddr = "10.0.0.2:7411".parse().unwrap();
        let frames: Vec<(u32, Vec<u8>)> = testkit::udp_frames(src, dst, 1, &b.build(), &FrameOptions::default()).into_iter().map(|f| (1, f)).collect();
        let dec = run(&frames);
        prop_assert_eq!(dec.stats.rtps_messages, 1);
    }
}

#[test]
fn fragment_flood_stays_bounded() {
    let limits = ReassemblyLimits { timeout_ns: 5_000_000_000, max_datagrams: 256, max_bytes: 1 << 20 };
    let cfg = DecoderConfig { reassembly: limits, ..Default::default() };
    let mut dec = Decoder::new("flood", cfg);
    let src: SocketAddr = "10.0.0.1:7410".parse().unwrap();
    let dst: SocketAddr = "10.0.0.2:7411".parse().unwrap();
    // 20 000 datagrams of which only the first fragment is ever sent.
    for i in 0..20_000u32 {
        let frames = testkit::udp_frames(src, dst, i, &vec![0u8; 3000], &FrameOptions::default());
        let f = &frames[0];
        let p = Packet { frame: i as u64 + 1, ts_ns: i as i64, interface: 0, link: LinkType::Ethernet, data: f, orig_len: f.len() as u32 };
        dec.packet(&p, &mut |_| {});
    }
    dec.finish();
    let ip = dec.stats.ip;
    assert!(ip.datagrams_evicted >= 19_000, "{ip:?}");
    assert_eq!(ip.datagrams_evicted + ip.datagrams_incomplete_at_end, 20_000);
}

#[test]
fn fake_writer_flood_stays_bounded() {
    let cfg = SampleConfig { max_samples: 1000, ..Default::default() };
    let mut tracker = SampleTracker::new(cfg);
    let mut dec = Decoder::new("flood", DecoderConfig::default());
    let src: SocketAddr = "10.0.0.1:7410".parse().unwrap();
    let dst: SocketAddr = "10.0.0.2:7411".parse().unwrap();
    let mut emitted = 0u64;
    for i in 0..50_000u32 {
        // Each message claims a new writer and a huge, never-completed sample.
        let w = EntityId([(i >> 16) as u8, (i >> 8) as u8, i as u8, 0x03]);
        let m = RtpsBuilder::new(0x0110, GuidPrefix([7; 12]))
            .data_frag(EntityId::UNKNOWN, w, 1, 1, 1, 1000, 4_000_000_000, &[0u8; 16])
            .build();
        let f = &testkit::udp_frames(src, dst, i, &m, &FrameOptions::default())[0];
        let p = Packet { frame: i as u64 + 1, ts_ns: i as i64, interface: 0, link: LinkType::Ethernet, data: f, orig_len: f.len() as u32 };
        dec.packet(&p, &mut |e| tracker.on_event(e, &mut |_| emitted += 1));
        assert!(tracker.open_samples() <= 1000);
    }
    assert!(tracker.stats.evicted >= 49_000);
    assert_eq!(emitted, tracker.stats.evicted);
}
