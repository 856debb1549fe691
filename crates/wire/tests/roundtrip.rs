//! Parse and emit checked against each other (oracle: the other half of the
//! wire layer; tshark is the external oracle in `tshark_oracle.rs`):
//! - every representation survives emit → parse unchanged (both byte orders
//!   where the format has two);
//! - parsing arbitrary bytes never panics, whatever the parser;
//! - emitting into a buffer shorter than the header is a `Truncated` error;
//! - values the wire format cannot carry are refused by the emitters, as the
//!   parsers refuse them.

use ddscope_wire::cdr::{CdrReader, CdrWriter};
use ddscope_wire::ip::{self, Ipv4Repr, Ipv6FragmentRepr, Ipv6Repr, EXT_FRAGMENT, PROTO_UDP};
use ddscope_wire::link::{self, emit_ethernet, EthernetRepr, LinkType, NullRepr, Sll2Repr, SllRepr, VlanRepr, VlanTag};
use ddscope_wire::locator::Locator;
use ddscope_wire::plist::{self, Param, ParamIter, ParamListWriter};
use ddscope_wire::rtps::{self, *};
use ddscope_wire::udp::{self, UdpRepr};
use ddscope_wire::{Emit, EntityId, Guid, GuidPrefix, WireError};
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// emit → parse gives the representation back, and emitting into every
/// shorter buffer fails with `Truncated`.
fn check_header<R: Emit + PartialEq + std::fmt::Debug>(repr: &R, parse: impl Fn(&[u8]) -> Result<R, WireError>) {
    let mut out = vec![];
    let n = repr.emit_vec(&mut out).expect("emit");
    assert_eq!(n, repr.buffer_len());
    assert_eq!(out.len(), n);
    assert_eq!(&parse(&out).expect("parse"), repr);
    for short in 0..n {
        let mut buf = vec![0u8; short];
        assert!(matches!(repr.emit(&mut buf), Err(WireError::Truncated { .. })), "emit into {short} of {n} bytes");
    }
}

fn arb_ipv4() -> impl Strategy<Value = Ipv4Addr> {
    any::<[u8; 4]>().prop_map(Ipv4Addr::from)
}
fn arb_ipv6() -> impl Strategy<Value = Ipv6Addr> {
    any::<[u8; 16]>().prop_map(Ipv6Addr::from)
}
fn arb_entity() -> impl Strategy<Value = EntityId> {
    any::<[u8; 4]>().prop_map(EntityId)
}
fn arb_prefix() -> impl Strategy<Value = GuidPrefix> {
    any::<[u8; 12]>().prop_map(GuidPrefix)
}
fn arb_locator() -> impl Strategy<Value = Locator> {
    (any::<i32>(), any::<u32>(), any::<[u8; 16]>()).prop_map(|(kind, port, address)| Locator { kind, port, address })
}

prop_compose! {
    fn arb_ipv4_repr()(src in arb_ipv4(), dst in arb_ipv4(), protocol in any::<u8>(), ident in any::<u16>(),
                       dont_fragment in any::<bool>(), more_fragments in any::<bool>(), off in 0u16..8192,
                       ttl in any::<u8>(), dscp_ecn in any::<u8>(), payload_len in 0u16..2000) -> Ipv4Repr {
        Ipv4Repr { src, dst, protocol, ident, dont_fragment, more_fragments, frag_offset: off * 8, ttl, dscp_ecn, payload_len }
    }
}

prop_compose! {
    fn arb_ipv6_repr()(src in arb_ipv6(), dst in arb_ipv6(), next_header in any::<u8>(), hop_limit in any::<u8>(),
                       traffic_class in any::<u8>(), flow_label in 0u32..(1 << 20), payload_len in 0u16..2000) -> Ipv6Repr {
        Ipv6Repr { src, dst, next_header, hop_limit, traffic_class, flow_label, payload_len }
    }
}

/// A number set as the wire carries it: base, numBits, the words numBits needs.
fn arb_set(sequence: bool) -> impl Strategy<Value = (i64, u32, Vec<u32>)> {
    let base = if sequence { any::<i64>().boxed() } else { (0..=u32::MAX as i64).boxed() };
    (base, 0u32..=256).prop_flat_map(|(b, n)| (Just(b), Just(n), proptest::collection::vec(any::<u32>(), n.div_ceil(32) as usize)))
}

/// An inline QoS list (encoded in `le` at view time): (raw pid, value words).
fn arb_qos() -> impl Strategy<Value = Option<Vec<(u16, Vec<u8>)>>> {
    proptest::option::of(proptest::collection::vec(
        (any::<u16>().prop_filter("not the sentinel", |p| *p != plist::PID_SENTINEL), (0usize..5).prop_flat_map(|w| proptest::collection::vec(any::<u8>(), w * 4))),
        0..4,
    ))
}

fn encode_qos(q: &Option<Vec<(u16, Vec<u8>)>>, le: bool) -> Option<Vec<u8>> {
    q.as_ref().map(|params| {
        let mut out = vec![];
        let mut w = ParamListWriter::new(&mut out, le);
        for (pid, v) in params {
            w.raw(*pid, v).expect("param");
        }
        w.finish();
        out
    })
}

/// Owned content of one submessage; [`Spec::view`] borrows it as a `Submessage`.
#[derive(Debug, Clone)]
enum Spec {
    Data { ids: (EntityId, EntityId), sn: i64, qos: Option<Vec<(u16, Vec<u8>)>>, payload: Option<Vec<u8>>, key: bool, n: bool },
    DataFrag { ids: (EntityId, EntityId), sn: i64, start: u32, count: u16, size: u16, sample: u32, qos: Option<Vec<(u16, Vec<u8>)>>, payload: Vec<u8>, key: bool, n: bool },
    Heartbeat(Heartbeat),
    HeartbeatFrag(HeartbeatFrag),
    AckNack { ids: (EntityId, EntityId), set: (i64, u32, Vec<u32>), count: i32, fin: bool },
    NackFrag { ids: (EntityId, EntityId), sn: i64, set: (i64, u32, Vec<u32>), count: i32 },
    Gap { ids: (EntityId, EntityId), start: i64, set: (i64, u32, Vec<u32>) },
    InfoTs(Option<Time>),
    InfoSrc { version: (u8, u8), vendor_id: u16, prefix: GuidPrefix },
    InfoDst(GuidPrefix),
    InfoReply { unicast: Vec<Locator>, multicast: Option<Vec<Locator>> },
    InfoReplyIp4 { unicast: (u32, u32), multicast: Option<(u32, u32)> },
    Pad,
}

/// Bytes a `Spec` view borrows, encoded for one byte order.
struct Storage {
    qos: Option<Vec<u8>>,
    unicast: Vec<u8>,
    multicast: Option<Vec<u8>>,
}

impl Spec {
    fn storage(&self, le: bool) -> Storage {
        let mut st = Storage { qos: None, unicast: vec![], multicast: None };
        match self {
            Spec::Data { qos, .. } | Spec::DataFrag { qos, .. } => st.qos = encode_qos(qos, le),
            Spec::InfoReply { unicast, multicast } => {
                LocatorList::encode(unicast, le, &mut st.unicast).unwrap();
                st.multicast = multicast.as_ref().map(|m| {
                    let mut v = vec![];
                    LocatorList::encode(m, le, &mut v).unwrap();
                    v
                });
            }
            _ => {}
        }
        st
    }

    fn view<'a>(&'a self, st: &'a Storage, le: bool) -> Submessage<'a> {
        let set = |s: &(i64, u32, Vec<u32>)| NumberSet::from_words(s.0, s.1, &s.2).unwrap();
        match self {
            Spec::Data { ids, sn, payload, key, n, .. } => Submessage::Data(Data {
                reader_id: ids.0,
                writer_id: ids.1,
                writer_sn: *sn,
                inline_qos: st.qos.as_deref(),
                payload: payload.as_deref(),
                payload_len: payload.as_ref().map_or(0, Vec::len),
                key_flag: *key && payload.is_some(),
                non_standard_payload: *n,
            }),
            Spec::DataFrag { ids, sn, start, count, size, sample, payload, key, n, .. } => Submessage::DataFrag(DataFrag {
                reader_id: ids.0,
                writer_id: ids.1,
                writer_sn: *sn,
                fragment_starting_num: *start,
                fragments_in_submessage: *count,
                fragment_size: *size,
                sample_size: *sample,
                inline_qos: st.qos.as_deref(),
                payload,
                payload_len: payload.len(),
                key_flag: *key,
                non_standard_payload: *n,
            }),
            Spec::Heartbeat(h) => Submessage::Heartbeat(*h),
            Spec::HeartbeatFrag(h) => Submessage::HeartbeatFrag(*h),
            Spec::AckNack { ids, set: s, count, fin } => {
                Submessage::AckNack(AckNack { reader_id: ids.0, writer_id: ids.1, reader_sn_state: set(s), count: *count, final_flag: *fin })
            }
            Spec::NackFrag { ids, sn, set: s, count } => Submessage::NackFrag(NackFrag {
                reader_id: ids.0,
                writer_id: ids.1,
                writer_sn: *sn,
                fragment_number_state: set(s),
                count: *count,
            }),
            Spec::Gap { ids, start, set: s } => Submessage::Gap(Gap { reader_id: ids.0, writer_id: ids.1, gap_start: *start, gap_list: set(s) }),
            Spec::InfoTs(t) => Submessage::InfoTs(*t),
            Spec::InfoSrc { version, vendor_id, prefix } => Submessage::InfoSrc { version: *version, vendor_id: *vendor_id, guid_prefix: *prefix },
            Spec::InfoDst(p) => Submessage::InfoDst { guid_prefix: *p },
            Spec::InfoReply { .. } => Submessage::InfoReply {
                unicast: LocatorList::new(&st.unicast, le).unwrap(),
                multicast: st.multicast.as_deref().map(|m| LocatorList::new(m, le).unwrap()),
            },
            Spec::InfoReplyIp4 { unicast, multicast } => Submessage::InfoReplyIp4 { unicast: *unicast, multicast: *multicast },
            Spec::Pad => Submessage::Pad,
        }
    }
}

fn arb_ids() -> impl Strategy<Value = (EntityId, EntityId)> {
    (arb_entity(), arb_entity())
}
fn arb_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

fn arb_spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        (arb_ids(), 1i64.., arb_qos(), proptest::option::of(arb_bytes(300)), any::<bool>(), any::<bool>())
            .prop_map(|(ids, sn, qos, payload, key, n)| Spec::Data { ids, sn, qos, payload, key, n }),
        (arb_ids(), 1i64.., (1u32.., any::<u16>(), any::<u16>(), any::<u32>()), arb_qos(), arb_bytes(300), any::<bool>(), any::<bool>()).prop_map(
            |(ids, sn, (start, count, size, sample), qos, payload, key, n)| Spec::DataFrag { ids, sn, start, count, size, sample, qos, payload, key, n }
        ),
        (arb_ids(), any::<i64>(), any::<i64>(), any::<i32>(), any::<bool>(), any::<bool>()).prop_map(|(ids, first_sn, last_sn, count, f, l)| {
            Spec::Heartbeat(Heartbeat { reader_id: ids.0, writer_id: ids.1, first_sn, last_sn, count, final_flag: f, liveliness_flag: l })
        }),
        (arb_ids(), any::<i64>(), any::<u32>(), any::<i32>()).prop_map(|(ids, writer_sn, last_fragment_num, count)| {
            Spec::HeartbeatFrag(HeartbeatFrag { reader_id: ids.0, writer_id: ids.1, writer_sn, last_fragment_num, count })
        }),
        (arb_ids(), arb_set(true), any::<i32>(), any::<bool>()).prop_map(|(ids, set, count, fin)| Spec::AckNack { ids, set, count, fin }),
        (arb_ids(), any::<i64>(), arb_set(false), any::<i32>()).prop_map(|(ids, sn, set, count)| Spec::NackFrag { ids, sn, set, count }),
        (arb_ids(), any::<i64>(), arb_set(true)).prop_map(|(ids, start, set)| Spec::Gap { ids, start, set }),
        proptest::option::of((any::<u32>(), any::<u32>()).prop_map(|(seconds, fraction)| Time { seconds, fraction })).prop_map(Spec::InfoTs),
        (any::<(u8, u8)>(), any::<u16>(), arb_prefix()).prop_map(|(version, vendor_id, prefix)| Spec::InfoSrc { version, vendor_id, prefix }),
        arb_prefix().prop_map(Spec::InfoDst),
        (proptest::collection::vec(arb_locator(), 0..4), proptest::option::of(proptest::collection::vec(arb_locator(), 0..4)))
            .prop_map(|(unicast, multicast)| Spec::InfoReply { unicast, multicast }),
        (any::<(u32, u32)>(), proptest::option::of(any::<(u32, u32)>())).prop_map(|(unicast, multicast)| Spec::InfoReplyIp4 { unicast, multicast }),
        Just(Spec::Pad),
    ]
}

/// One parsed submessage of a message holding only `sm`.
fn emit_and_parse(sm: &Submessage<'_>, le: bool) -> Vec<u8> {
    let mut msg = vec![];
    Header::new(0x0110, GuidPrefix([1; 12])).emit_vec(&mut msg).unwrap();
    let n = sm.emit_vec(le, &mut msg).expect("emit");
    assert_eq!(n, sm.buffer_len());
    msg
}

const LINKS: [LinkType; 9] = [
    LinkType::Ethernet,
    LinkType::Null,
    LinkType::Loop,
    LinkType::RawIp,
    LinkType::Ipv4,
    LinkType::Ipv6,
    LinkType::LinuxSll,
    LinkType::LinuxSll2,
    LinkType::Other(147),
];

const SUBMESSAGE_IDS: [u8; 19] = [
    PAD, ACKNACK, HEARTBEAT, GAP, INFO_TS, INFO_SRC, INFO_REPLY_IP4, INFO_DST, INFO_REPLY, NACK_FRAG, HEARTBEAT_FRAG, DATA, DATA_FRAG,
    SEC_BODY, SEC_PREFIX, SEC_POSTFIX, SRTPS_PREFIX, SRTPS_POSTFIX, 0x80,
];

/// Touches everything a parsed submessage exposes (iterators included).
fn consume(sm: &Submessage<'_>) -> usize {
    match sm {
        Submessage::AckNack(a) => a.reader_sn_state.iter().count() + a.reader_sn_state.words().len(),
        Submessage::NackFrag(n) => n.fragment_number_state.iter().count(),
        Submessage::Gap(g) => g.gap_list.len(),
        Submessage::InfoReply { unicast, multicast } => unicast.iter().count() + multicast.map_or(0, |m| m.iter().count()),
        Submessage::Data(d) => d.inline_qos.map_or(0, |q| ParamIter::new(q, true).count()) + d.payload.map_or(0, |p| p.len()),
        Submessage::DataFrag(d) => d.payload.len(),
        _ => 0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    // ---- link layer ------------------------------------------------------------

    #[test]
    fn ethernet_round_trip(dst in any::<[u8; 6]>(), src in any::<[u8; 6]>(), ethertype in any::<u16>()) {
        check_header(&EthernetRepr { dst, src, ethertype }, |b| EthernetRepr::parse(b).map(|r| r.0));
    }

    #[test]
    fn vlan_round_trip(pcp in 0u8..8, dei in any::<bool>(), vid in 0u16..4096, ethertype in any::<u16>()) {
        check_header(&VlanRepr { pcp, dei, vid, ethertype }, |b| VlanRepr::parse(b).map(|r| r.0));
    }

    #[test]
    fn sll_round_trip(packet_type in any::<u16>(), arphrd_type in any::<u16>(), addr_len in any::<u16>(), addr in any::<[u8; 8]>(), protocol in any::<u16>()) {
        check_header(&SllRepr { packet_type, arphrd_type, addr_len, addr, protocol }, |b| SllRepr::parse(b).map(|r| r.0));
    }

    #[test]
    fn sll2_round_trip(protocol in any::<u16>(), if_index in any::<u32>(), arphrd_type in any::<u16>(), packet_type in any::<u8>(), addr_len in any::<u8>(), addr in any::<[u8; 8]>()) {
        check_header(&Sll2Repr { protocol, if_index, arphrd_type, packet_type, addr_len, addr }, |b| Sll2Repr::parse(b).map(|r| r.0));
    }

    #[test]
    fn null_round_trip(family in 1u32..=0xffff, little_endian in any::<bool>()) {
        // Families are small numbers: the parser recovers the byte order from the value.
        check_header(&NullRepr { family, little_endian }, |b| NullRepr::parse(b).map(|r| r.0));
        let mut out = vec![];
        NullRepr { family, little_endian: false }.emit_vec(&mut out).unwrap();
        prop_assert_eq!(NullRepr::parse_loop(&out).unwrap().0.family, family);
    }

    /// Ethernet with any stack of tags, read back by the decoder's link parser.
    #[test]
    fn tagged_frame_through_link_parse(
        tags in proptest::collection::vec((prop_oneof![Just(link::ETHERTYPE_VLAN), Just(link::ETHERTYPE_QINQ), Just(link::ETHERTYPE_QINQ_OLD)], 0u8..8, any::<bool>(), 0u16..4096), 0..5),
        payload in arb_bytes(64),
    ) {
        let tags: Vec<VlanTag> = tags.into_iter().map(|(tpid, pcp, dei, vid)| VlanTag { tpid, pcp, dei, vid }).collect();
        let mut f = vec![];
        emit_ethernet(&mut f, [2; 6], [4; 6], &tags, link::ETHERTYPE_IPV6).unwrap();
        f.extend_from_slice(&payload);
        let n = link::parse(LinkType::Ethernet, &f).unwrap();
        prop_assert_eq!(n.ethertype, link::ETHERTYPE_IPV6);
        prop_assert_eq!(n.vlan_tags as usize, tags.len());
        prop_assert_eq!(n.outer_vlan, tags.first().copied());
        prop_assert_eq!(n.inner_vlan, tags.get(1).copied());
        prop_assert_eq!(n.payload, &payload[..]);
    }

    // ---- IP and UDP ------------------------------------------------------------

    #[test]
    fn ipv4_round_trip(repr in arb_ipv4_repr(), fill in any::<u8>()) {
        check_header(&repr, |b| Ipv4Repr::parse(b).map(|r| r.0));
        let mut p = vec![];
        repr.emit_vec(&mut p).unwrap();
        prop_assert!(Ipv4Repr::checksum_ok(&p));
        p.resize(Ipv4Repr::LEN + repr.payload_len as usize, fill);
        let ip = ip::parse_ipv4(&p).unwrap();
        prop_assert_eq!((ip.ident, ip.frag_offset, ip.more_fragments), (repr.ident as u32, repr.frag_offset as u32, repr.more_fragments));
        prop_assert_eq!(ip.payload.len(), repr.payload_len as usize);
        prop_assert_eq!(ip.missing, 0);
        p[12] ^= 0x40;
        prop_assert!(!Ipv4Repr::checksum_ok(&p));
    }

    #[test]
    fn ipv6_round_trip(repr in arb_ipv6_repr()) {
        check_header(&repr, |b| Ipv6Repr::parse(b).map(|r| r.0));
    }

    #[test]
    fn ipv6_fragment_round_trip(next_header in any::<u8>(), off in 0u16..8192, more_fragments in any::<bool>(), ident in any::<u32>(), data in arb_bytes(100)) {
        let frag = Ipv6FragmentRepr { next_header, frag_offset: off * 8, more_fragments, ident };
        check_header(&frag, |b| Ipv6FragmentRepr::parse(b).map(|r| r.0));
        // Through the decoder's IPv6 parser, behind a fixed header.
        let mut p = vec![];
        let fixed = Ipv6Repr { src: Ipv6Addr::LOCALHOST, dst: Ipv6Addr::LOCALHOST, next_header: EXT_FRAGMENT, hop_limit: 1, traffic_class: 0, flow_label: 0, payload_len: (8 + data.len()) as u16 };
        fixed.emit_vec(&mut p).unwrap();
        Ipv6FragmentRepr { next_header: PROTO_UDP, ..frag }.emit_vec(&mut p).unwrap();
        p.extend_from_slice(&data);
        let ip = ip::parse_ipv6(&p).unwrap();
        prop_assert_eq!((ip.protocol, ip.ident, ip.frag_offset, ip.more_fragments), (PROTO_UDP, ident, frag.frag_offset as u32, more_fragments));
        prop_assert_eq!(ip.payload, &data[..]);
    }

    #[test]
    fn udp_round_trip_and_checksums(src_port in any::<u16>(), dst_port in any::<u16>(), payload in arb_bytes(600),
                                    v4 in (arb_ipv4(), arb_ipv4()), v6 in (arb_ipv6(), arb_ipv6()), flip in any::<usize>()) {
        let repr = UdpRepr { src_port, dst_port, payload_len: payload.len() as u16 };
        check_header(&repr, |b| {
            let mut whole = b.to_vec();
            whole.extend_from_slice(&payload);
            UdpRepr::parse(&whole).map(|r| r.0)
        });
        for (s, d) in [(IpAddr::V4(v4.0), IpAddr::V4(v4.1)), (IpAddr::V6(v6.0), IpAddr::V6(v6.1))] {
            let mut dg = vec![];
            repr.emit_vec(&mut dg).unwrap();
            dg.extend_from_slice(&payload);
            prop_assert_eq!(udp::checksum_ok(s, d, &dg), s.is_ipv4(), "checksum 0 is valid over IPv4 only");
            udp::fill_checksum(s, d, &mut dg).unwrap();
            prop_assert!(udp::checksum_ok(s, d, &dg));
            prop_assert_ne!(&dg[6..8], &[0, 0]);
            let u = udp::parse(&dg).unwrap();
            prop_assert_eq!((u.src_port, u.dst_port, u.payload), (src_port, dst_port, &payload[..]));
            let i = flip % dg.len();
            dg[i] ^= 0x01;
            prop_assert!(!udp::checksum_ok(s, d, &dg), "a flipped bit at {} goes unnoticed", i);
        }
    }

    // ---- RTPS ---------------------------------------------------------------------

    #[test]
    fn rtps_header_round_trip(version_major in any::<u8>(), version_minor in any::<u8>(), vendor_id in any::<u16>(), prefix in arb_prefix()) {
        check_header(&Header { version_major, version_minor, vendor_id, guid_prefix: prefix }, Header::parse);
    }

    #[test]
    fn submessage_header_round_trip(id in any::<u8>(), flags in any::<u8>(), octets_to_next_header in any::<u16>()) {
        check_header(&SubmessageHeader { id, flags, octets_to_next_header }, SubmessageHeader::parse);
    }

    #[test]
    fn raw_submessage_round_trip(id in any::<u8>(), flags in any::<u8>(), body in arb_bytes(300)) {
        let raw = RawSubmessage::new(id, flags, &body);
        let mut msg = vec![];
        Header::new(0x010f, GuidPrefix([2; 12])).emit_vec(&mut msg).unwrap();
        raw.emit_vec(&mut msg).unwrap();
        let subs: Vec<_> = SubmessageIter::new(&msg).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(subs.len(), 1);
        prop_assert_eq!((subs[0].id, subs[0].flags, subs[0].body, subs[0].declared_len, subs[0].offset), (id, flags, &body[..], body.len(), HEADER_LEN));
        for short in 0..raw.buffer_len() {
            prop_assert!(matches!(raw.emit(&mut vec![0; short]), Err(WireError::Truncated { .. })), "emit into {} bytes", short);
        }
    }

    /// Every typed submessage, both byte orders: emit → iterate → parse gives it back.
    #[test]
    fn submessage_round_trip(spec in arb_spec(), le in any::<bool>()) {
        let st = spec.storage(le);
        let sm = spec.view(&st, le);
        let msg = emit_and_parse(&sm, le);
        let raws: Vec<_> = SubmessageIter::new(&msg).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(raws.len(), 1);
        let raw = raws[0];
        prop_assert_eq!(raw.little_endian(), le);
        prop_assert_eq!(raw.flags, sm.flags() | if le { flags::E } else { 0 });
        prop_assert_eq!(Some(raw.id), sm.id());
        prop_assert_eq!(raw.parse().unwrap(), sm);
        // Too short a buffer: Truncated, for every length.
        for short in 0..sm.buffer_len() {
            prop_assert!(matches!(sm.emit(le, &mut vec![0; short]), Err(WireError::Truncated { .. })), "{} of {} bytes", short, sm.buffer_len());
        }
    }

    /// Several submessages in one message, mixed byte orders.
    #[test]
    fn message_round_trip(specs in proptest::collection::vec((arb_spec(), any::<bool>()), 1..6)) {
        let stores: Vec<Storage> = specs.iter().map(|(s, le)| s.storage(*le)).collect();
        let views: Vec<Submessage<'_>> = specs.iter().zip(&stores).map(|((s, le), st)| s.view(st, *le)).collect();
        let mut msg = vec![];
        Header::new(0x0110, GuidPrefix([3; 12])).emit_vec(&mut msg).unwrap();
        for (v, (_, le)) in views.iter().zip(&specs) {
            v.emit_vec(*le, &mut msg).unwrap();
        }
        let parsed: Vec<Submessage<'_>> = SubmessageIter::new(&msg).map(|r| r.unwrap().parse().unwrap()).collect();
        prop_assert_eq!(parsed, views);
    }

    #[test]
    fn number_set_members(base in -1000i64..1000, offsets in proptest::collection::btree_set(0i64..256, 0..40)) {
        let members: Vec<i64> = offsets.iter().map(|o| base + o).collect();
        let set = NumberSet::from_members(base, &members).unwrap();
        prop_assert_eq!(set.iter().collect::<Vec<_>>(), members.clone());
        prop_assert_eq!(set.num_bits as i64, offsets.iter().next_back().map_or(0, |o| o + 1));
        prop_assert!(NumberSet::from_members(base, &[base + 256]).is_err());
        prop_assert!(NumberSet::from_members(base, &[base - 1]).is_err());
    }

    #[test]
    fn time_round_trip(ns in 0i64..(u32::MAX as i64 * 1_000_000_000)) {
        prop_assert_eq!(Time::from_unix_nanos(ns).to_unix_nanos(), ns);
    }

    // ---- parameter lists, locators, CDR ----------------------------------------------

    #[test]
    fn param_round_trip(pid in 0u16..0x4000, vendor_specific in any::<bool>(), must_understand in any::<bool>(),
                        words in 0usize..20, fill in any::<u8>(), le in any::<bool>()) {
        let value = vec![fill; words * 4];
        let p = Param { pid, vendor_specific, must_understand, value: &value };
        prop_assume!(p.raw_pid() != plist::PID_SENTINEL);
        let mut buf = vec![0u8; p.buffer_len() + 4];
        let n = p.emit(le, &mut buf).unwrap();
        buf[n..].copy_from_slice(&if le { [1, 0, 0, 0] } else { [0, 1, 0, 0] });
        let got: Vec<Param<'_>> = ParamIter::new(&buf, le).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(got, vec![p]);
        prop_assert_eq!(plist::list_len(&buf, le).unwrap(), buf.len());
        for short in 0..n {
            prop_assert!(matches!(p.emit(le, &mut vec![0; short]), Err(WireError::Truncated { .. })), "emit into {} bytes", short);
        }
    }

    #[test]
    fn typed_params_round_trip(topic in "[^\u{0}]{0,80}", v in any::<u32>(), g in any::<[u8; 16]>(), loc in arb_locator(), le in any::<bool>()) {
        let guid = Guid::from_slice(&g).unwrap();
        let mut out = vec![];
        let mut w = ParamListWriter::new(&mut out, le);
        w.string(plist::PID_TOPIC_NAME, &topic).unwrap().u32(plist::PID_DOMAIN_ID, v).unwrap();
        w.guid(plist::PID_ENDPOINT_GUID, guid).unwrap().locator(plist::PID_UNICAST_LOCATOR, &loc).unwrap();
        w.finish();
        let ps: Vec<Param<'_>> = ParamIter::new(&out, le).collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(ps.len(), 4);
        prop_assert_eq!(ps.iter().map(|p| p.pid).collect::<Vec<_>>(), vec![plist::PID_TOPIC_NAME, plist::PID_DOMAIN_ID, plist::PID_ENDPOINT_GUID, plist::PID_UNICAST_LOCATOR]);
        prop_assert!(ps.iter().all(|p| p.value.len() % 4 == 0));
        prop_assert_eq!(ps[0].as_string(le).unwrap(), topic);
        prop_assert_eq!(ps[1].as_u32(le).unwrap(), v);
        prop_assert_eq!(ps[2].as_guid().unwrap(), guid);
        prop_assert_eq!(ps[3].as_locator(le).unwrap(), loc);
    }

    #[test]
    fn payload_header_round_trip(id in any::<u16>(), options in any::<u16>()) {
        let h = PayloadHeader { encapsulation: Encapsulation::from_id(id), options };
        prop_assert_eq!(h.encapsulation.id(), id);
        check_header(&h, |b| PayloadHeader::parse(b).map(|r| r.0));
    }

    #[test]
    fn cdr_round_trip(ops in proptest::collection::vec(cdr_op(), 0..20), le in any::<bool>()) {
        let mut buf = vec![0u8; 4096];
        let mut w = CdrWriter::new(&mut buf, le);
        for op in &ops {
            op.write(&mut w).unwrap();
        }
        let n = w.position();
        let mut r = CdrReader::new(&buf[..n], le);
        for op in &ops {
            prop_assert_eq!(&op.read(&mut r).unwrap(), op);
        }
        prop_assert!(r.remaining().is_empty());
        // The same writes into a buffer one byte short fail with Truncated somewhere.
        if n > 0 {
            let mut short = vec![0u8; n - 1];
            let mut w = CdrWriter::new(&mut short, le);
            let res: Result<(), WireError> = ops.iter().try_for_each(|op| op.write(&mut w));
            prop_assert!(matches!(res, Err(WireError::Truncated { .. })), "{:?}", res);
        }
    }

    // ---- arbitrary bytes never panic ------------------------------------------------

    #[test]
    fn link_and_ip_parsers_never_panic(data in arb_bytes(200)) {
        for l in LINKS {
            let _ = link::parse(l, &data);
        }
        let _ = EthernetRepr::parse(&data);
        let _ = VlanRepr::parse(&data);
        let _ = SllRepr::parse(&data);
        let _ = Sll2Repr::parse(&data);
        let _ = NullRepr::parse(&data);
        let _ = NullRepr::parse_loop(&data);
        let _ = Ipv4Repr::parse(&data);
        let _ = Ipv4Repr::checksum_ok(&data);
        let _ = ip::parse_ipv4(&data);
        let _ = Ipv6Repr::parse(&data);
        let _ = Ipv6FragmentRepr::parse(&data);
        let _ = ip::parse_ipv6(&data);
        let _ = UdpRepr::parse(&data);
        let _ = udp::parse(&data);
        let a = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let b = IpAddr::V6(Ipv6Addr::LOCALHOST);
        let _ = udp::checksum_ok(a, a, &data);
        let _ = udp::checksum_ok(b, b, &data);
        let _ = udp::checksum_ok(a, b, &data);
    }

    #[test]
    fn ipv6_with_random_extension_chain_never_panics(next in any::<u8>(), plen in any::<u16>(), rest in arb_bytes(120)) {
        let mut p = vec![0x60, 0, 0, 0];
        p.extend_from_slice(&plen.to_be_bytes());
        p.extend_from_slice(&[next, 64]);
        p.extend_from_slice(&[0; 32]);
        p.extend_from_slice(&rest);
        let _ = ip::parse_ipv6(&p);
    }

    #[test]
    fn rtps_parsers_never_panic(data in arb_bytes(300), le in any::<bool>()) {
        let _ = rtps::parse_header(&data);
        let _ = rtps::is_rtps(&data);
        let _ = rtps::encapsulation(&data);
        let _ = PayloadHeader::parse(&data);
        let _ = SubmessageHeader::parse(&data);
        for it in [SubmessageIter::new(&data), SubmessageIter::new_cut(&data)] {
            for raw in it.flatten() {
                if let Ok(sm) = raw.parse() {
                    consume(&sm);
                }
            }
        }
        for p in ParamIter::new(&data, le).flatten() {
            let _ = (p.as_string(le), p.as_u32(le), p.as_guid(), p.as_locator(le));
        }
        let _ = plist::list_len(&data, le);
        let _ = LocatorList::new(&data, le).map(|l| l.iter().count());
        let _ = Locator::read(&mut CdrReader::new(&data, le));
        let mut r = CdrReader::new(&data, le);
        while r.string("s").is_ok() || r.a_u32("n").is_ok() {}
    }

    /// Random bodies under every known submessage id: what parses re-emits to itself.
    #[test]
    fn parsed_submessages_re_emit_identically(subs in proptest::collection::vec((0usize..SUBMESSAGE_IDS.len(), any::<u8>(), arb_bytes(160)), 1..6)) {
        let mut msg = vec![];
        Header::new(0x0110, GuidPrefix([6; 12])).emit_vec(&mut msg).unwrap();
        for (i, flags, body) in &subs {
            RawSubmessage::new(SUBMESSAGE_IDS[*i], *flags, body).emit_vec(&mut msg).unwrap();
        }
        re_emit(&msg);
    }

    /// Valid submessages with flipped flags, flipped body bytes and trailing
    /// bytes (octetsToInlineQos, set sizes, extra fields): what still
    /// parses re-emits to itself.
    #[test]
    fn mutated_submessages_re_emit_identically(spec in arb_spec(), le in any::<bool>(), flag_xor in any::<u8>(),
                                               flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), extra in arb_bytes(24)) {
        let st = spec.storage(le);
        let sm = spec.view(&st, le);
        let mut one = vec![];
        sm.emit_vec(le, &mut one).unwrap();
        let (id, flags) = (one[0], one[1] ^ (flag_xor & !flags::E));
        let mut body = one[SubmessageHeader::LEN..].to_vec();
        for (at, x) in &flips {
            if !body.is_empty() {
                let n = body.len();
                body[at % n] ^= x;
            }
        }
        body.extend_from_slice(&extra);
        let mut msg = vec![];
        Header::new(0x0110, GuidPrefix([6; 12])).emit_vec(&mut msg).unwrap();
        RawSubmessage::new(id, flags, &body).emit_vec(&mut msg).unwrap();
        re_emit(&msg);
        // Unmutated, every typed submessage re-emits.
        let mut msg = vec![];
        Header::new(0x0110, GuidPrefix([6; 12])).emit_vec(&mut msg).unwrap();
        msg.extend_from_slice(&one);
        prop_assert_eq!(re_emit(&msg), 1);
    }

    /// Random bodies under every known submessage id reach the typed parsers.
    #[test]
    fn typed_parsers_never_panic(subs in proptest::collection::vec((0usize..SUBMESSAGE_IDS.len(), any::<u8>(), arb_bytes(120)), 1..6), cut in any::<usize>()) {
        let mut msg = vec![];
        Header::new(0x0110, GuidPrefix([5; 12])).emit_vec(&mut msg).unwrap();
        for (i, flags, body) in &subs {
            RawSubmessage::new(SUBMESSAGE_IDS[*i], *flags, body).emit_vec(&mut msg).unwrap();
        }
        let cut = HEADER_LEN + cut % (msg.len() - HEADER_LEN + 1);
        for m in [&msg[..], &msg[..cut]] {
            for it in [SubmessageIter::new(m), SubmessageIter::new_cut(m)] {
                for raw in it.flatten() {
                    if let Ok(sm) = raw.parse() {
                        consume(&sm);
                    }
                }
            }
        }
    }
}

/// Whatever a submessage parses into is emitted again and parses into the
/// same thing (the parse → emit direction; emit → parse is tested above).
fn re_emit(msg: &[u8]) -> usize {
    let mut checked = 0;
    for raw in SubmessageIter::new(msg).flatten() {
        let Ok(sm) = raw.parse() else { continue };
        let mut out = vec![];
        match sm.emit_vec(raw.little_endian(), &mut out) {
            Ok(_) => {
                let whole = [&msg[..HEADER_LEN], &out[..]].concat();
                let again = SubmessageIter::new(&whole).next().unwrap().unwrap();
                assert_eq!(again.parse().unwrap(), sm, "re-emitted {:?}", raw.kind());
                checked += 1;
            }
            Err(e) => assert!(
                matches!(sm, Submessage::Security | Submessage::Opaque) || sm.body_len() > u16::MAX as usize,
                "{:?} parsed but cannot be emitted: {e}",
                raw.kind()
            ),
        }
    }
    checked
}

/// One CDR primitive, written and read back.
#[derive(Debug, Clone, PartialEq)]
enum CdrOp {
    U8(u8),
    U16(u16),
    U32(u32),
    AU16(u16),
    AU32(u32),
    AI32(i32),
    Sn(i64),
    Str(String),
}

fn cdr_op() -> impl Strategy<Value = CdrOp> {
    prop_oneof![
        any::<u8>().prop_map(CdrOp::U8),
        any::<u16>().prop_map(CdrOp::U16),
        any::<u32>().prop_map(CdrOp::U32),
        any::<u16>().prop_map(CdrOp::AU16),
        any::<u32>().prop_map(CdrOp::AU32),
        any::<i32>().prop_map(CdrOp::AI32),
        any::<i64>().prop_map(CdrOp::Sn),
        "[^\u{0}]{0,40}".prop_map(CdrOp::Str),
    ]
}

impl CdrOp {
    fn write(&self, w: &mut CdrWriter<'_>) -> Result<(), WireError> {
        match self {
            CdrOp::U8(v) => w.u8(*v, "u8"),
            CdrOp::U16(v) => w.u16(*v, "u16"),
            CdrOp::U32(v) => w.u32(*v, "u32"),
            CdrOp::AU16(v) => w.a_u16(*v, "a_u16"),
            CdrOp::AU32(v) => w.a_u32(*v, "a_u32"),
            CdrOp::AI32(v) => w.a_i32(*v, "a_i32"),
            CdrOp::Sn(v) => w.sequence_number(*v, "sn"),
            CdrOp::Str(s) => w.string(s, "string"),
        }
    }
    fn read(&self, r: &mut CdrReader<'_>) -> Result<CdrOp, WireError> {
        Ok(match self {
            CdrOp::U8(_) => CdrOp::U8(r.u8("u8")?),
            CdrOp::U16(_) => CdrOp::U16(r.u16("u16")?),
            CdrOp::U32(_) => CdrOp::U32(r.u32("u32")?),
            CdrOp::AU16(_) => CdrOp::AU16(r.a_u16("a_u16")?),
            CdrOp::AU32(_) => CdrOp::AU32(r.a_u32("a_u32")?),
            CdrOp::AI32(_) => CdrOp::AI32(r.a_i32("a_i32")?),
            CdrOp::Sn(_) => CdrOp::Sn(r.sequence_number("sn")?),
            CdrOp::Str(_) => CdrOp::Str(r.string("string")?),
        })
    }
}

// ---- the emitters refuse what the parsers refuse ---------------------------------------

#[test]
fn emitters_refuse_what_the_wire_cannot_carry() {
    let mut buf = [0u8; 64];
    let malformed = |r: Result<usize, WireError>| matches!(r, Err(WireError::Malformed { .. }));
    assert!(malformed(VlanRepr { pcp: 8, dei: false, vid: 1, ethertype: 0x0800 }.emit(&mut buf)));
    assert!(malformed(VlanRepr { pcp: 1, dei: false, vid: 4096, ethertype: 0x0800 }.emit(&mut buf)));
    let v4 = Ipv4Repr {
        src: Ipv4Addr::LOCALHOST,
        dst: Ipv4Addr::LOCALHOST,
        protocol: PROTO_UDP,
        ident: 1,
        dont_fragment: false,
        more_fragments: true,
        frag_offset: 12,
        ttl: 1,
        dscp_ecn: 0,
        payload_len: 8,
    };
    assert!(malformed(v4.emit(&mut buf)), "fragment offset not a multiple of 8");
    assert!(malformed(Ipv4Repr { frag_offset: 0, payload_len: 65520, ..v4 }.emit(&mut buf)), "total length over 65535");
    assert!(malformed(UdpRepr { src_port: 1, dst_port: 2, payload_len: 65530 }.emit(&mut buf)));
    let e = EntityId([0, 0, 1, 2]);
    let frag0 = DataFrag {
        reader_id: e,
        writer_id: e,
        writer_sn: 1,
        fragment_starting_num: 0,
        fragments_in_submessage: 1,
        fragment_size: 4,
        sample_size: 4,
        inline_qos: None,
        payload: &[1, 2, 3, 4],
        payload_len: 4,
        key_flag: false,
        non_standard_payload: false,
    };
    // The parser refuses fragment number 0, so the emitter does too.
    assert!(malformed(Submessage::DataFrag(frag0).emit(true, &mut buf)));
    assert!(malformed(Submessage::DataFrag(DataFrag { fragment_starting_num: 1, payload_len: 9, ..frag0 }).emit(true, &mut buf)), "cut payload");
    let data = Data { reader_id: e, writer_id: e, writer_sn: 1, inline_qos: Some(&[0x70, 0, 4, 0]), payload: None, payload_len: 0, key_flag: false, non_standard_payload: false };
    assert!(malformed(Submessage::Data(data).emit(true, &mut buf)), "inline QoS without sentinel");
    assert!(malformed(Submessage::Data(Data { inline_qos: None, key_flag: true, ..data }).emit(true, &mut buf)), "key flag without key");
    // RTPS 2.5 8.3.7.2.3 / 8.3.7.3.3: writerSN 0 or negative makes DATA and DATA_FRAG invalid.
    for sn in [0, -1, i64::MIN] {
        let d = Data { inline_qos: None, writer_sn: sn, ..data };
        assert!(malformed(Submessage::Data(d).emit(true, &mut buf)), "DATA writerSN {sn}");
        let f = DataFrag { fragment_starting_num: 1, writer_sn: sn, ..frag0 };
        assert!(malformed(Submessage::DataFrag(f).emit(true, &mut buf)), "DATA_FRAG writerSN {sn}");
        // The same bytes, written by hand with the number: the parser refuses them.
        let mut msg = emit_and_parse(&Submessage::Data(Data { inline_qos: None, writer_sn: 1, ..data }), true);
        // writerSN: after the submessage header (4), extraFlags + octetsToInlineQos (4) and the two entity ids (8).
        let at = HEADER_LEN + 4 + 12;
        msg[at..at + 4].copy_from_slice(&((sn >> 32) as i32).to_le_bytes());
        msg[at + 4..at + 8].copy_from_slice(&(sn as u32).to_le_bytes());
        let raw = SubmessageIter::new(&msg).next().unwrap().unwrap();
        let err = raw.parse().unwrap_err();
        assert!(err.to_string().contains("writerSN"), "{err}");
    }
    assert!(malformed(Submessage::Security.emit(true, &mut buf)));
    assert!(malformed(Submessage::Opaque.emit(true, &mut buf)));
    let set = NumberSet::new(-1, 0).unwrap();
    let nf = NackFrag { reader_id: e, writer_id: e, writer_sn: 1, fragment_number_state: set, count: 1 };
    assert!(malformed(Submessage::NackFrag(nf).emit(true, &mut buf)), "fragment numbers are unsigned 32-bit");
    assert!(NumberSet::new(0, 257).is_err());
    assert!(NumberSet::from_words(0, 33, &[1]).is_err());
    assert!(LocatorList::new(&[0; 23], true).is_err());
}

/// The flag constants are where RTPS 2.5 puts them, and the parser reads
/// each one from its own bit.
#[test]
fn flag_constants_drive_the_parser() {
    assert_eq!((flags::data::Q, flags::data::D, flags::data::K, flags::data::N), (0x02, 0x04, 0x08, 0x10));
    assert_eq!((flags::data_frag::Q, flags::data_frag::K, flags::data_frag::N), (0x02, 0x04, 0x08));
    assert_eq!((flags::heartbeat::F, flags::heartbeat::L, flags::heartbeat::G), (0x02, 0x04, 0x08));
    assert_eq!((flags::acknack::F, flags::gap::G, flags::gap::F, flags::info_ts::I), (0x02, 0x02, 0x04, 0x02));
    assert_eq!((flags::info_reply::M, flags::info_reply_ip4::M, flags::E, FLAG_E), (0x02, 0x02, 0x01, 0x01));
    let e = EntityId([0, 0, 1, 2]);
    let hb = Heartbeat { reader_id: e, writer_id: e, first_sn: 1, last_sn: 2, count: 3, final_flag: false, liveliness_flag: true };
    let msg = emit_and_parse(&Submessage::Heartbeat(hb), false);
    assert_eq!(msg[HEADER_LEN + 1], flags::heartbeat::L);
    let key = Data { reader_id: e, writer_id: e, writer_sn: 1, inline_qos: None, payload: Some(&[0, 1, 0, 0]), payload_len: 4, key_flag: true, non_standard_payload: true };
    let msg = emit_and_parse(&Submessage::Data(key), true);
    assert_eq!(msg[HEADER_LEN + 1], flags::E | flags::data::K | flags::data::N);
}
