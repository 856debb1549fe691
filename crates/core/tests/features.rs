//! Decoder semantics on the synthetic feature capture (`ddscope_testkit::feature_frames`).
//! Oracle: the values the frames were built with (the same capture also agrees
//! with tshark 4.0 field by field in tests/test_oracle_tshark.py).

use ddscope_core::source::Packet;
use ddscope_core::decode::{Decoder, DecoderConfig};
use ddscope_core::events::{SubmsgEvent, TrafficType};
use ddscope_core::samples::{SampleConfig, SampleRecord, SampleTracker};
use ddscope_testkit::{self as testkit, feature::*};
use ddscope_wire::link::LinkType;
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::Guid;

fn decode() -> (Decoder, Vec<SubmsgEvent>, Vec<SampleRecord>) {
    let mut dec = Decoder::new("feat", DecoderConfig::default());
    let mut tracker = SampleTracker::new(SampleConfig::default());
    let mut events = vec![];
    let mut samples = vec![];
    for (i, (ts, f)) in testkit::feature_frames().into_iter().enumerate() {
        let p = Packet { frame: i as u64 + 1, ts_ns: ts, interface: 0, link: LinkType::Ethernet, data: &f, orig_len: f.len() as u32 };
        dec.packet(&p, &mut |e| {
            events.push(e.clone());
            tracker.on_event(e, &mut |r| samples.push(r));
        });
    }
    dec.finish();
    tracker.finish(&mut |r| samples.push(r));
    (dec, events, samples)
}

#[test]
fn discovery_names_user_traffic() {
    let (dec, events, _) = decode();
    let p = &dec.discovery.participants[&PREFIX_A];
    assert_eq!(p.vendor_id, Some(VENDOR_A));
    assert_eq!(p.entity_name.as_deref(), Some("pc1"));
    assert_eq!(p.lease_duration_ns, Some(20_000_000_000));
    let image = dec.discovery.endpoint(&Guid::new(PREFIX_A, IMAGE_WRITER)).unwrap();
    assert_eq!(image.names.topic_name, "/image");
    assert_eq!(image.names.type_name, "sensor_msgs/msg/Image");
    let reader = dec.discovery.endpoint(&Guid::new(PREFIX_B, IMAGE_READER)).unwrap();
    assert_eq!(reader.names.topic_raw, "rt/image", "big-endian SEDP subscription");
    // SEDP that arrived as two DATA_FRAGs.
    let long = dec.discovery.endpoint(&Guid::new(PREFIX_A, BIG_SEDP_WRITER)).unwrap();
    assert_eq!(long.names.topic_name, "/long");
    // Its 337-byte type name is over the name cap (256 bytes): kept cut, with the marker.
    assert!(long.names.type_raw.starts_with("pkg::msg::dds_::VeryLongVeryLong"), "{}", long.names.type_raw);
    assert!(long.names.type_raw.ends_with("…[truncated, 337 bytes]"), "{}", long.names.type_raw);
    assert_eq!(dec.stats.discovery.names_truncated, 1);
    // Every user DATA/DATA_FRAG/HEARTBEAT of a discovered writer carries its topic.
    for e in events.iter().filter(|e| e.traffic_type == TrafficType::User) {
        if matches!(e.kind, SubmsgKind::Data | SubmsgKind::DataFrag | SubmsgKind::Heartbeat) {
            let w = e.writer_id.unwrap();
            if w.prefix == PREFIX_A {
                assert!(e.topic.is_some(), "frame {} {:?} lacks a topic", e.frame, e.kind);
            }
        }
    }
}

#[test]
fn dispose_marks_the_endpoint() {
    let (dec, events, _) = decode();
    let drive = dec.discovery.endpoint(&Guid::new(PREFIX_A, DRIVE_WRITER)).unwrap();
    assert!(drive.disposed);
    let d = events.iter().find(|e| e.status_info == Some(3)).expect("dispose event");
    assert_eq!(d.key_hash.map(|k| Guid::from_slice(&k).unwrap()), Some(Guid::new(PREFIX_A, DRIVE_WRITER)));
}

#[test]
fn context_submessages_apply() {
    let (_, events, _) = decode();
    // INFO_SRC switched the source participant to C for the DATA after it.
    let relayed = events.iter().find(|e| e.guid_prefix == PREFIX_C && e.kind == SubmsgKind::Data).unwrap();
    assert_eq!(relayed.writer_id.unwrap().prefix, PREFIX_C);
    assert_eq!(relayed.vendor_id, VENDOR_B);
    // ACKNACK: sent by B's reader to A's writer (INFO_DST).
    let an = events.iter().find(|e| e.kind == SubmsgKind::AckNack).unwrap();
    assert_eq!(an.writer_id.unwrap(), Guid::new(PREFIX_A, IMAGE_WRITER));
    assert_eq!(an.reader_id.unwrap(), Guid::new(PREFIX_B, IMAGE_READER));
    assert_eq!(an.set_base, Some(2));
    assert_eq!(an.topic.as_ref().unwrap().topic_name, "/image");
    // INFO_TS applies to the DATA that follows it.
    let d = events.iter().find(|e| e.kind == SubmsgKind::Data && e.sn == Some(2) && e.topic_name() == Some("/drive")).unwrap();
    assert_eq!(d.source_ts_ns, Some(T0 + 2000));
    assert_eq!(d.pcp, Some(5));
    assert_eq!(d.vlan_id, Some(30));
    // INFO_* take the traffic type of what they qualify.
    let ts = events.iter().find(|e| e.kind == SubmsgKind::InfoTs && e.frame == d.frame).unwrap();
    assert_eq!(ts.traffic_type, TrafficType::User);
    let spdp_ts = events.iter().find(|e| e.kind == SubmsgKind::InfoTs).unwrap();
    assert_eq!(spdp_ts.traffic_type, TrafficType::Discovery);
}

#[test]
fn fragments_and_samples() {
    let (_, events, samples) = decode();
    let first = events.iter().find(|e| e.kind == SubmsgKind::DataFrag && e.topic_name() == Some("/image")).unwrap();
    // 10 x 1344 bytes + RTPS/submessage headers + UDP in 1480-byte IP fragments = 10 fragments.
    assert_eq!(first.ip_frags, 10);
    assert!(first.ip_first_ts_ns < first.ip_last_ts_ns);
    assert_eq!(first.ts_ns, first.ip_last_ts_ns);
    let img = samples.iter().find(|s| s.topic.as_ref().is_some_and(|t| t.topic_name == "/image") && s.sn == 1).unwrap();
    assert!(img.complete);
    assert_eq!(img.frags_expected, IMAGE_SAMPLE.div_ceil(IMAGE_FRAG as u32));
    assert_eq!(img.frags_seen, img.frags_expected);
    assert_eq!(img.retransmitted_frags, 10);
    assert_eq!(img.retransmitted_bytes, 10 * IMAGE_FRAG as u64);
    assert_eq!(img.nack_frags, 1);
    assert_eq!(img.sample_size, IMAGE_SAMPLE);
    assert_eq!(img.pcp, Some(5));
    // Completion is the last new fragment, not the later repair.
    let last_new = events
        .iter()
        .filter(|e| e.kind == SubmsgKind::DataFrag && e.fragment_starting_num == Some(71))
        .map(|e| e.ts_ns)
        .next()
        .unwrap();
    assert_eq!(img.last_ts_ns, last_new);
    assert_eq!(img.first_ts_ns, first.ts_ns);
    assert_eq!(img.first_ip_ts_ns, first.ip_first_ts_ns);
    // The IPv6 DATA: 4000 bytes in three IPv6 fragments.
    let v6 = events.iter().find(|e| e.src.is_ipv6()).unwrap();
    assert_eq!((v6.ip_frags, v6.sample_size), (3, Some(4000)));
    // The drive writer's three DATA samples.
    let drive: Vec<_> = samples.iter().filter(|s| s.writer_id == Guid::new(PREFIX_A, DRIVE_WRITER)).collect();
    assert_eq!(drive.len(), 3);
    assert!(drive.iter().all(|s| s.complete && s.sample_size == 36 && s.frags_expected == 1));
}

#[test]
fn skipped_traffic_is_counted() {
    let (dec, _, _) = decode();
    assert_eq!(dec.stats.non_rtps_datagrams, 1);
    assert_eq!(dec.stats.rtps_other_version, 1);
    assert_eq!(dec.stats.malformed_submessages, 0);
    assert_eq!(dec.stats.ip.datagrams_incomplete_at_end, 0);
    assert_eq!(dec.stats.submessages, 52);
    assert!(dec.stats.summary_line().contains("1 non-RTPS datagrams"));
}
