//! Bounded state against hostile traffic, and arithmetic on wire values.
//!
//! Each table keyed by something on the wire is driven past its cap; the
//! oracle is a count kept by the test itself (how many distinct keys it
//! sent) or a scan of the table. The property tests feed arbitrary 64-bit
//! sequence numbers, timestamps, windows and offsets; their oracle is the
//! same arithmetic done exactly in i128 by the test (release builds wrap
//! silently on overflow, so a wrap shows up as a wrong number, not a panic).

use ddscope_core::source::Packet;
use ddscope_core::decode::{Decoder, DecoderConfig};
use ddscope_core::discovery::{DiscoveryLimits, EndpointKind};
use ddscope_core::events::{SubmsgEvent, TrafficType};
use ddscope_core::ipfrag::{FragKey, ReassemblyLimits, Reassembler, MAX_RANGES};
use ddscope_core::latency::app::AppTruth;
use ddscope_core::latency::{Correlator, CorrelatorConfig, Item, LatencyRow};
use ddscope_core::samples::{SampleConfig, SampleRecord, SampleTracker};
use ddscope_testkit::{self as synth, FrameOptions, RtpsBuilder};
use ddscope_core::topics::{TopicsAnalysis, TopicsConfig};
use ddscope_wire::link::LinkType;
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::{EntityId, Guid, GuidPrefix};
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

fn writer(i: u32) -> Guid {
    let mut p = [0u8; 12];
    p[..4].copy_from_slice(&i.to_be_bytes());
    Guid::new(GuidPrefix(p), EntityId([0, 0, 1, 3]))
}

fn dst(i: u32) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0x0a01_0000 + i)), 7411)
}

fn event(kind: SubmsgKind, w: Guid, sn: i64, ts: i64) -> SubmsgEvent {
    let mut e = SubmsgEvent::blank(Arc::from("cap"));
    e.kind = kind;
    e.traffic_type = TrafficType::User;
    e.writer_id = Some(w);
    e.sn = Some(sn);
    e.ts_ns = ts;
    e.ip_first_ts_ns = ts;
    e.frame = 1;
    e.dst = dst(0);
    e.ip_frags = 1;
    e
}

fn data(w: Guid, sn: i64, ts: i64) -> SubmsgEvent {
    let mut e = event(SubmsgKind::Data, w, sn, ts);
    e.sample_size = Some(16);
    e.payload_size = Some(16);
    e
}

#[allow(clippy::too_many_arguments)]
fn frag(w: Guid, sn: i64, ts: i64, start: u32, n: u16, fsize: u16, sample: u32, to: SocketAddr) -> SubmsgEvent {
    let mut e = event(SubmsgKind::DataFrag, w, sn, ts);
    e.fragment_starting_num = Some(start);
    e.frags_in_submsg = Some(n);
    e.fragment_size = Some(fsize);
    e.sample_size = Some(sample);
    e.payload_size = Some(fsize as u32 * n as u32);
    e.dst = to;
    e
}

fn packet(frame: u64, ts: i64, f: &[u8]) -> Packet<'_> {
    Packet { frame, ts_ns: ts, interface: 0, link: LinkType::Ethernet, data: f, orig_len: f.len() as u32 }
}

fn correlator(cfg: CorrelatorConfig) -> Correlator {
    Correlator::new(cfg, Arc::new(AppTruth::default()))
}

fn two_captures() -> CorrelatorConfig {
    CorrelatorConfig { captures: vec!["pc1".into(), "pc2".into()], offsets_ns: vec![0, 0], ..Default::default() }
}

// ---- issue 10 item 15: one state per sample ------------------------------------

/// Oracle: the test's own schedule — the receiver's capture ends after half
/// of the fragments, so the sample is in flight: incomplete, and not lost.
#[test]
fn sample_in_flight_at_the_end_is_incomplete_and_nothing_else() {
    let w = writer(1);
    let mut sender = SampleTracker::new(SampleConfig::default());
    let mut receiver = SampleTracker::new(SampleConfig::default());
    let (mut snd, mut rcv) = (vec![], vec![]);
    for i in 0..10u32 {
        sender.on_event(&frag(w, 1, 1_000 + i as i64, i + 1, 1, 100, 1000, dst(0)), &mut |r| snd.push(r));
        if i < 5 {
            receiver.on_event(&frag(w, 1, 2_000 + i as i64, i + 1, 1, 100, 1000, dst(0)), &mut |r| rcv.push(r));
        }
    }
    // Sample 2 never reaches the receiver at all: lost.
    sender.on_event(&frag(w, 2, 3_000, 1, 10, 100, 1000, dst(0)), &mut |r| snd.push(r));
    // Sample 3 arrives whole: delivered.
    sender.on_event(&frag(w, 3, 4_000, 1, 10, 100, 1000, dst(0)), &mut |r| snd.push(r));
    receiver.on_event(&frag(w, 3, 5_000, 1, 10, 100, 1000, dst(0)), &mut |r| rcv.push(r));
    sender.finish(&mut |r| snd.push(r));
    receiver.finish(&mut |r| rcv.push(r));
    // The tracker: every sample closed once, complete or incomplete.
    for t in [&sender, &receiver] {
        assert_eq!(t.stats.samples, t.stats.complete + t.stats.incomplete, "{:?}", t.stats);
    }
    let in_flight = rcv.iter().find(|r| r.sn == 1).unwrap();
    assert_eq!((in_flight.complete, in_flight.closed_by), (false, ddscope_core::samples::ClosedBy::End));

    let mut c = correlator(two_captures());
    let mut rows: Vec<LatencyRow> = vec![];
    for r in snd {
        c.push(0, Item::Sample(r), &mut |x| rows.push(x));
    }
    for r in rcv {
        c.push(1, Item::Sample(r), &mut |x| rows.push(x));
    }
    c.finish(&mut |x| rows.push(x));
    let status = |sn: i64| rows.iter().find(|r| r.sn == sn).unwrap().status.as_str();
    assert_eq!((status(1), status(2), status(3)), ("incomplete", "lost", "delivered"));
    let f = &c.summaries()[0];
    assert_eq!((f.samples, f.delivered, f.lost, f.incomplete), (3, 1, 1, 1));
    assert_eq!(f.samples, f.delivered + f.lost + f.incomplete);
    assert_eq!(f.lost_examples, vec![2]);
}

/// Oracle: the order the test sent the samples in. A receiver's sighting
/// does not move a sample in the judgement queue: rows come out in
/// first-sighting order, so jitter and period see consecutive samples.
#[test]
fn samples_are_judged_in_first_sighting_order() {
    let mut c = correlator(CorrelatorConfig { window_ns: 1000, ..two_captures() });
    let w = writer(5);
    let rec = |cap: &str, sn: i64, t: i64| SampleRecord {
        capture: Arc::from(cap), writer_id: w, sn, topic: None, node: None, traffic_type: TrafficType::User,
        first_ts_ns: t, first_ip_ts_ns: t, last_ts_ns: t, complete: true, first_frame: 1, last_frame: 1,
        sample_size: 16, fragment_size: None, frags_expected: 1, frags_seen: 1, submsgs: 1, ip_frags: 1,
        bytes: 16, retransmitted_frags: 0, retransmitted_bytes: 0, destinations: 1, nack_frags: 0, pcp: None,
        vendor_id: 0, closed_by: ddscope_core::samples::ClosedBy::Complete, source_ts_ns: None, dst: None, zenoh_zids: None,
    };
    let mut rows: Vec<LatencyRow> = vec![];
    for sn in 1..=5 {
        c.push(0, Item::Sample(rec("pc1", sn, sn * 100)), &mut |r| rows.push(r));
    }
    // The receiver reports them in reverse.
    for sn in (1..=5).rev() {
        c.push(1, Item::Sample(rec("pc2", sn, sn * 100 + 10)), &mut |r| rows.push(r));
    }
    c.push(0, Item::Watermark(10_000), &mut |r| rows.push(r));
    c.push(1, Item::Watermark(10_000), &mut |r| rows.push(r));
    assert_eq!(rows.iter().map(|r| r.sn).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);
    assert_eq!(rows.iter().filter(|r| r.jitter_ns == Some(0)).count(), 4);
}

// ---- issue 10 item 11: wire arithmetic never wraps ----------------------------

fn exact_sn_gaps(sns: &[i64]) -> u64 {
    let mut max: Option<i128> = None;
    let mut gaps: u128 = 0;
    for &sn in sns {
        let sn = sn as i128;
        if let Some(m) = max {
            if sn > m {
                gaps += (sn - m - 1) as u128;
            }
        }
        max = Some(max.map_or(sn, |m| m.max(sn)));
    }
    gaps.min(u64::MAX as u128) as u64
}

fn sat(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

fn edge_i64() -> impl Strategy<Value = i64> {
    prop_oneof![any::<i64>(), Just(i64::MAX), Just(i64::MIN), Just(0), Just(-1), Just(1), Just(i64::MAX - 1), Just(i64::MIN + 1)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    /// sn_gaps of a writer whose sequence numbers jump anywhere in the i64
    /// range equals the exact count (saturated at u64::MAX).
    #[test]
    fn sn_gaps_are_exact_for_any_sequence_numbers(sns in proptest::collection::vec(edge_i64(), 1..40)) {
        let w = writer(7);
        let mut t = TopicsAnalysis::new();
        for (i, &sn) in sns.iter().enumerate() {
            t.on_event(&data(w, sn, i as i64));
        }
        let rows = t.rows("cap", &Default::default(), true, &[]);
        prop_assert_eq!(rows.len(), 1);
        prop_assert_eq!(rows[0].sn_gaps, exact_sn_gaps(&sns));
    }

    /// The sample tracker takes any sequence number, fragment numbers and
    /// sizes, and any timestamps: every sample ends in exactly one state.
    #[test]
    fn tracker_accounts_every_sample_once(
        evs in proptest::collection::vec((edge_i64(), edge_i64(), any::<u32>(), any::<u16>(), any::<u16>(), any::<u32>(), any::<bool>()), 1..60)
    ) {
        let mut t = SampleTracker::new(SampleConfig { max_samples: 16, max_fragment_bytes: 4096, ..Default::default() });
        let mut out: Vec<SampleRecord> = vec![];
        for (sn, ts, start, n, fsize, size, fragmented) in evs {
            let w = writer((sn & 3) as u32);
            let e = if fragmented { frag(w, sn, ts, start, n, fsize, size, dst(0)) } else { data(w, sn, ts) };
            t.on_event(&e, &mut |r| out.push(r));
            prop_assert!(t.open_samples() <= 16);
        }
        t.finish(&mut |r| out.push(r));
        prop_assert_eq!(t.stats.samples, t.stats.complete + t.stats.incomplete);
        prop_assert!(out.iter().all(|r| r.frags_seen <= r.frags_expected.max(1)));
    }

    /// Latencies, first-first and last-last with any timestamps, offsets and
    /// windows: exactly the i128 differences, saturated; every judged sample
    /// is delivered, lost or incomplete, and the flow's counts add up.
    #[test]
    fn latency_arithmetic_saturates_instead_of_wrapping(
        samples in proptest::collection::vec((edge_i64(), edge_i64(), edge_i64(), edge_i64(), 0u8..3), 1..20),
        window in edge_i64(),
        offset in edge_i64(),
    ) {
        let cfg = CorrelatorConfig { window_ns: window, offsets_ns: vec![0, offset], ..two_captures() };
        let mut c = correlator(cfg);
        let mut rows: Vec<LatencyRow> = vec![];
        let w = writer(3);
        let rec = |cap: &str, sn: i64, first: i64, last: i64, complete: bool| SampleRecord {
            capture: Arc::from(cap), writer_id: w, sn, topic: None, node: None, traffic_type: TrafficType::User,
            first_ts_ns: first, first_ip_ts_ns: first, last_ts_ns: last, complete, first_frame: 1, last_frame: 1,
            sample_size: 16, fragment_size: None, frags_expected: 1, frags_seen: u32::from(complete), submsgs: 1,
            ip_frags: 1, bytes: 16, retransmitted_frags: 0, retransmitted_bytes: 0, destinations: 1, nack_frags: 0,
            pcp: None, vendor_id: 0, closed_by: ddscope_core::samples::ClosedBy::Complete, source_ts_ns: None, dst: None, zenoh_zids: None,
        };
        let mut expect = vec![];
        for (i, &(t_snd, t_rcv_first, t_rcv_last, wm, fate)) in samples.iter().enumerate() {
            let sn = i as i64;
            // Sent at t_snd by pc1 (sorted first so pc1 is the sender).
            c.push(0, Item::Sample(rec("pc1", sn, i64::MIN + i as i64, t_snd, true)), &mut |x| rows.push(x));
            if fate > 0 {
                c.push(1, Item::Sample(rec("pc2", sn, t_rcv_first, t_rcv_last, fate == 2)), &mut |x| rows.push(x));
            }
            c.push(0, Item::Watermark(wm), &mut |x| rows.push(x));
            c.push(1, Item::Watermark(wm), &mut |x| rows.push(x));
            let first_rcv = sat(t_rcv_first as i128 - offset as i128);
            let last_rcv = sat(t_rcv_last as i128 - offset as i128);
            expect.push((sn, i64::MIN + i as i64, t_snd, first_rcv, last_rcv, fate));
        }
        c.finish(&mut |x| rows.push(x));
        for r in &rows {
            prop_assert!(["delivered", "lost", "incomplete"].contains(&r.status.as_str()));
            let Some(&(_, s_first, s_last, r_first, r_last, fate)) = expect.iter().find(|e| e.0 == r.sn) else { continue };
            if &*r.sender != "pc1" {
                continue;
            }
            if r.status == "delivered" {
                prop_assert_eq!(fate, 2);
                prop_assert_eq!(r.latency_ns, Some(sat(r_last as i128 - s_first as i128)));
                prop_assert_eq!(r.first_first_ns, Some(sat(r_first as i128 - s_first as i128)));
                prop_assert_eq!(r.last_last_ns, Some(sat(r_last as i128 - s_last as i128)));
            }
        }
        for f in c.summaries() {
            prop_assert_eq!(f.samples, f.delivered + f.lost + f.incomplete);
        }
    }
}

// ---- caps: every table evicts least recently seen and counts it --------------------

/// Oracle: 1 000 distinct endpoints sent, cap 100; the per-topic counts are
/// checked against a scan of the endpoint table.
#[test]
fn discovery_tables_are_capped_and_the_topic_index_follows() {
    let limits = DiscoveryLimits { max_participants: 10, max_endpoints: 100, ..Default::default() };
    let mut dec = Decoder::new("disc", DecoderConfig { discovery: limits, ..Default::default() });
    let src: SocketAddr = "10.0.0.1:7410".parse().unwrap();
    let to: SocketAddr = "239.255.0.1:7400".parse().unwrap();
    for i in 0..1000u32 {
        let prefix = GuidPrefix([(i % 50) as u8; 12]);
        let (w, r) = if i % 2 == 0 {
            (EntityId::SEDP_PUBLICATIONS_WRITER, EntityId::SEDP_PUBLICATIONS_READER)
        } else {
            (EntityId([0, 0, 4, 0xc2]), EntityId([0, 0, 4, 0xc7]))
        };
        let ep = Guid::new(prefix, EntityId([(i >> 8) as u8, i as u8, 0, if i % 2 == 0 { 3 } else { 4 }]));
        let payload = synth::sedp_endpoint(ep, &format!("rt/t{}", i % 37), "T", true);
        let spdp = synth::spdp_participant(prefix, 0x0110, "p");
        let m = RtpsBuilder::new(0x0110, prefix)
            .data(EntityId([0, 1, 0, 0xc7]), EntityId::SPDP_PARTICIPANT_WRITER, 1, None, &spdp)
            .data(r, w, i as i64 + 1, None, &payload)
            .build();
        for f in synth::udp_frames(src, to, i, &m, &FrameOptions::default()) {
            dec.packet(&packet(i as u64 + 1, i as i64, &f), &mut |_| {});
        }
    }
    dec.finish();
    let d = &dec.discovery;
    assert_eq!(d.endpoints.len(), 100);
    assert_eq!(dec.stats.discovery.endpoints_evicted, 900);
    assert_eq!(d.participants.len(), 10);
    // 50 participants announced in turn through a table of 10: every announcement misses.
    assert_eq!(dec.stats.discovery.participants_evicted, 1000 - 10);
    for t in 0..37 {
        let topic = format!("rt/t{t}");
        // The index is per (domain, topic): compare it per domain the endpoints are in.
        let domains: std::collections::BTreeSet<Option<u32>> = d.endpoints.values().map(|e| e.names.domain).collect();
        for dom in domains {
            let scan = |k: EndpointKind| d.endpoints.values().filter(|e| e.kind == k && e.names.topic_raw == topic && e.names.domain == dom).count() as u64;
            assert_eq!(d.writers_of(dom, &topic), scan(EndpointKind::Writer), "{topic} in {dom:?}");
            assert_eq!(d.readers_of(dom, &topic), scan(EndpointKind::Reader), "{topic} in {dom:?}");
        }
    }
    // The most recent announcements survived.
    let last = Guid::new(GuidPrefix([(999 % 50) as u8; 12]), EntityId([3, 231, 0, 4]));
    assert!(d.endpoint(&last).is_some());
    let line = dec.stats.summary_line();
    assert!(line.contains("900 discovery endpoints") && line.contains("990 discovery participants"), "{line}");
}

/// Oracle: the test's own counts. 300 endpoints each announce a 59 000-byte
/// topic name and a 5 000-byte type name, and 40 participants a 59 000-byte
/// entity name: every one of those strings is cut at `max_name_bytes` (with
/// the marker naming its length), and the endpoint and participant tables
/// stay within their byte budgets, evicting (and counting) the rest.
#[test]
fn long_discovery_names_are_cut_and_the_tables_stay_within_their_bytes() {
    let limits = DiscoveryLimits { max_endpoint_bytes: 200 << 10, max_participant_bytes: 16 << 10, ..Default::default() };
    let mut dec = Decoder::new("names", DecoderConfig { discovery: limits, ..Default::default() });
    let src: SocketAddr = "10.0.0.1:7410".parse().unwrap();
    let to: SocketAddr = "239.255.0.1:7400".parse().unwrap();
    let long_topic = format!("rt/{}", "n".repeat(59_000 - 3));
    let long_type = "T".repeat(5_000);
    let mut frame = 0u64;
    for i in 0..300u32 {
        let prefix = GuidPrefix([(i % 40) as u8 + 1; 12]);
        let ep = Guid::new(prefix, EntityId([(i >> 8) as u8, i as u8, 0, 3]));
        let payload = synth::sedp_endpoint(ep, &long_topic, &long_type, true);
        let mut msgs = vec![];
        if i < 40 {
            let spdp = synth::spdp_participant(prefix, 0x0110, &"p".repeat(59_000));
            msgs.push(RtpsBuilder::new(0x0110, prefix).data(EntityId([0, 1, 0, 0xc7]), EntityId::SPDP_PARTICIPANT_WRITER, 1, None, &spdp).build());
        }
        msgs.push(RtpsBuilder::new(0x0110, prefix).data(EntityId::SEDP_PUBLICATIONS_READER, EntityId::SEDP_PUBLICATIONS_WRITER, i as i64 + 1, None, &payload).build());
        for (k, m) in msgs.iter().enumerate() {
            for f in synth::udp_frames(src, to, 2 * i + k as u32, m, &FrameOptions::default()) {
                frame += 1;
                dec.packet(&packet(frame, i as i64, &f), &mut |_| {});
            }
        }
    }
    dec.finish();
    let st = &dec.stats.discovery;
    assert_eq!(st.names_truncated, 300 * 2 + 40, "{st:?}");
    assert!(st.endpoint_bytes <= 200 << 10 && st.participant_bytes <= 16 << 10, "{st:?}");
    assert_eq!(st.endpoints as u64 + st.endpoints_evicted, 300, "{st:?}");
    assert!(st.endpoints_evicted > 0 && st.endpoints > 50, "{st:?}");
    assert_eq!(st.participants as u64 + st.participants_evicted, 40, "{st:?}");
    let cap = ddscope_core::names::capped_len(limits.max_name_bytes);
    for e in dec.discovery.endpoints.values() {
        assert!(e.names.topic_raw.len() <= cap && e.names.topic_raw.ends_with("…[truncated, 59000 bytes]"), "{}", e.names.topic_raw);
        assert!(e.names.type_raw.len() <= cap && e.names.type_raw.ends_with("…[truncated, 5000 bytes]"));
    }
    let line = dec.stats.summary_line();
    assert!(line.contains("640 discovery names cut at discovery.max_name_bytes") && line.contains("discovery endpoints (count or byte cap"), "{line}");
}

/// Oracle: 1 000 writers sent, cap 50.
#[test]
fn topic_writers_are_capped_and_counted() {
    let mut t = TopicsAnalysis::with_config(TopicsConfig { max_writers: 50, ..Default::default() });
    for i in 0..1000u32 {
        t.on_event(&data(writer(i), 1, i as i64));
    }
    let s = t.stats();
    assert_eq!((s.writers, s.writers_evicted), (50, 950));
    let rows = t.rows("cap", &Default::default(), true, &[]);
    assert_eq!(rows.len(), 50);
    // The least recently seen went: the survivors are the last 50.
    assert!(rows.iter().all(|r| r.writer_id.is_some_and(|w| (950..1000).any(|i| writer(i) == w))));
    assert!(s.problem_line().unwrap().contains("950 writers"));
}

/// Oracle: one sample sent to 10 000 destinations; at most 64 are tracked.
#[test]
fn one_sample_to_many_destinations_is_bounded() {
    let mut t = SampleTracker::new(SampleConfig::default());
    let w = writer(1);
    let mut out = vec![];
    for i in 0..10_000u32 {
        // Announces 2^20 fragments of 64 bytes; sends the last one.
        t.on_event(&frag(w, 1, i as i64, 1 << 20, 1, 64, 64 << 20, dst(i)), &mut |r| out.push(r));
        let mut copy = data(w, 2, i as i64);
        copy.dst = dst(i);
        t.on_event(&copy, &mut |r| out.push(r));
    }
    t.finish(&mut |r| out.push(r));
    let s = t.stats;
    // 10 000 - 64 fragmented copies and 10 000 - 64 unfragmented ones not remembered.
    assert_eq!(s.untracked_destinations, 2 * (10_000 - 64));
    assert_eq!(out.iter().find(|r| r.sn == 1).unwrap().destinations, 64);
    // 64 bitmaps of 2^20 bits.
    assert!(s.peak_fragment_bytes <= 64 * (1 << 17) + (16 << 10), "{}", s.peak_fragment_bytes);
    assert!(s.problem_line().unwrap().contains("beyond the per-sample cap"));
}

/// Oracle: 5 000 samples whose last fragment alone needs a 128 KiB bitmap,
/// against a 4 MiB budget.
#[test]
fn fragment_bitmaps_stay_within_their_budget() {
    let budget = 4 << 20;
    let mut t = SampleTracker::new(SampleConfig { max_fragment_bytes: budget, ..Default::default() });
    let mut emitted = 0u64;
    for sn in 0..5_000i64 {
        t.on_event(&frag(writer(2), sn, sn, 1 << 20, 1, 64, 64 << 20, dst(0)), &mut |_| emitted += 1);
    }
    let s = t.stats;
    assert!(s.peak_fragment_bytes <= budget as u64, "{s:?}");
    assert!(s.evicted_for_memory >= 5_000 - 32, "{s:?}");
    assert_eq!(emitted, s.evicted);
    // A sample announcing 2^20 fragments but sending only the first costs one word, not 128 KiB.
    let mut small = SampleTracker::new(SampleConfig::default());
    for sn in 0..1000 {
        small.on_event(&frag(writer(3), sn, sn, 1, 1, 64, 64 << 20, dst(0)), &mut |_| {});
    }
    assert_eq!(small.stats.peak_fragment_bytes, 0, "inline bitmaps only");
}

/// Oracle: the reassembler's own accounting, checked against the capacity
/// of every buffer it could hold (cap + one datagram).
#[test]
fn ip_reassembly_holds_its_byte_cap_against_any_pattern() {
    let limits = ReassemblyLimits { timeout_ns: i64::MAX, max_datagrams: 4096, max_bytes: 4 << 20 };
    let mut r: Reassembler<()> = Reassembler::new(limits);
    let key = |i: u32| FragKey { src: IpAddr::V4(Ipv4Addr::new(10, 0, (i >> 8) as u8, i as u8)), dst: IpAddr::V4(Ipv4Addr::LOCALHOST), protocol: 17, ident: i };
    // In-order fragments, never the last one: buffers grow to ~48 KB each.
    for i in 0..2000u32 {
        for k in 0..33u32 {
            r.push(key(i), k * 1480, true, &[0u8; 1480], i as i64, 1, ());
        }
        assert!(r.bytes() <= (4 << 20) + 70_000, "{}", r.bytes());
    }
    assert!(r.stats.datagrams_evicted > 1500, "{:?}", r.stats);
    assert!(r.stats.peak_bytes <= (4 << 20) + 70_000);
    // Tiny fragments with holes: a datagram is dropped once it has too many pieces.
    let mut r: Reassembler<()> = Reassembler::new(limits);
    for k in 0..(MAX_RANGES as u32 + 1) {
        r.push(key(1), k * 16, true, &[0u8; 8], 0, 1, ());
    }
    assert_eq!(r.stats.datagrams_too_fragmented, 1);
    assert_eq!(r.pending(), 0);
}

/// Oracle: 10 000 writers each sending one sample seen at both captures;
/// caps of 100 writers, 50 flows and 1 000 pending samples.
#[test]
fn correlator_tables_are_capped_and_counted() {
    let cfg = CorrelatorConfig { max_writers: 100, max_flows: 50, max_pending_samples: 1000, ..two_captures() };
    let mut c = correlator(cfg);
    let mut rows = 0u64;
    let w = |i: u32| writer(i);
    let rec = |cap: &str, i: u32, t: i64| SampleRecord {
        capture: Arc::from(cap), writer_id: w(i), sn: 1, topic: None, node: None, traffic_type: TrafficType::User,
        first_ts_ns: t, first_ip_ts_ns: t, last_ts_ns: t, complete: true, first_frame: 1, last_frame: 1,
        sample_size: 16, fragment_size: None, frags_expected: 1, frags_seen: 1, submsgs: 1, ip_frags: 1,
        bytes: 16, retransmitted_frags: 0, retransmitted_bytes: 0, destinations: 1, nack_frags: 0, pcp: None,
        vendor_id: 0, closed_by: ddscope_core::samples::ClosedBy::Complete, source_ts_ns: None, dst: None, zenoh_zids: None,
    };
    for i in 0..10_000u32 {
        let t = i as i64 * 1000;
        c.push(0, Item::Sample(rec("pc1", i, t)), &mut |_| rows += 1);
        c.push(1, Item::Sample(rec("pc2", i, t + 500)), &mut |_| rows += 1);
        assert!(c.pending().0 <= 1000);
    }
    c.finish(&mut |_| rows += 1);
    let s = &c.stats;
    assert!(s.samples_judged_early >= 9_000, "{s:?}");
    assert!(s.writers_evicted >= 9_900, "{s:?}");
    assert_eq!(s.flows, 50);
    assert_eq!(s.flows_evicted, 10_000 - 50);
    assert_eq!(s.flow_samples_evicted, 10_000 - 50);
    assert_eq!(rows, 10_000);
    assert_eq!(c.summaries().len(), 50);
    let line = s.summary_line();
    assert!(line.contains("writers forgotten") && line.contains("flows evicted"), "{line}");
}

/// Oracle: 1 000 discovery samples announced as 1 MiB DATA_FRAG sets with
/// only their first fragment sent; none completes, every one is counted.
#[test]
fn discovery_fragment_sets_are_bounded() {
    let cfg = DecoderConfig { max_discovery_pending: 64, max_discovery_bytes: 256 << 10, ..Default::default() };
    let mut dec = Decoder::new("disc", cfg);
    let src: SocketAddr = "10.0.0.1:7410".parse().unwrap();
    let to: SocketAddr = "239.255.0.1:7400".parse().unwrap();
    for i in 0..1000u32 {
        let prefix = GuidPrefix([1, 2, 3, 4, 5, 6, 7, 8, (i >> 16) as u8, (i >> 8) as u8, i as u8, 9]);
        let mut payload = vec![0, 3, 0, 0];
        payload.resize(1024, 0);
        let m = RtpsBuilder::new(0x0110, prefix)
            .data_frag(EntityId::SEDP_PUBLICATIONS_READER, EntityId::SEDP_PUBLICATIONS_WRITER, 1, 1, 1, 1024, 1 << 20, &payload)
            .build();
        for f in synth::udp_frames(src, to, i, &m, &FrameOptions::default()) {
            dec.packet(&packet(i as u64 + 1, i as i64, &f), &mut |_| {});
        }
    }
    dec.finish();
    assert_eq!(dec.stats.discovery_fragments_dropped, 1000);
}
