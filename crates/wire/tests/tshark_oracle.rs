//! External oracle for the emitters: tshark 4.0's dissectors (Ethernet,
//! 802.1Q/802.1ad, Linux SLL/SLL2, NULL, IPv4/IPv6 with reassembly, UDP with
//! checksum verification, RTPS) must read every field of frames written by
//! this crate's emitters as the values they were written from. One datagram
//! per submessage kind, both byte orders, over every link layer the tests
//! build; IPv4 and IPv6 fragmentation; checksums verified by tshark.
//!
//! tshark is required: the test fails (it does not skip) when it is missing.
//! `tshark -T json --no-duplicate-keys` turns repeated keys into arrays; the
//! submessages of a message are the parallel arrays `rtps.sm.id` /
//! `rtps.sm.id_tree` (see ../shared/DESIGN.md, "Facts measured on this machine").

use ddscope_wire::ip::{Ipv4Repr, Ipv6FragmentRepr, Ipv6Repr, EXT_FRAGMENT, PROTO_UDP};
use ddscope_wire::link::{emit_ethernet, NullRepr, Sll2Repr, SllRepr, VlanTag, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_QINQ, ETHERTYPE_VLAN};
use ddscope_wire::locator::Locator;
use ddscope_wire::plist::{self, ParamListWriter};
use ddscope_wire::rtps::*;
use ddscope_wire::udp::{self, UdpRepr};
use ddscope_wire::{Emit, EntityId, GuidPrefix};
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

const PREFIX: GuidPrefix = GuidPrefix([0x01, 0x0f, 0x44, 0x55, 0x66, 0x77, 1, 2, 3, 4, 5, 6]);
const DST_PREFIX: GuidPrefix = GuidPrefix([0x01, 0x10, 0xaa, 0xbb, 0xcc, 0xdd, 9, 8, 7, 6, 5, 4]);
const VENDOR: u16 = 0x010f;
const READER: EntityId = EntityId([0, 0, 0x12, 0x04]);
const WRITER: EntityId = EntityId([0, 0, 0x12, 0x03]);
const SRC4: Ipv4Addr = Ipv4Addr::new(10, 1, 2, 3);
const DST4: Ipv4Addr = Ipv4Addr::new(10, 1, 2, 4);

fn src6() -> Ipv6Addr {
    "fd00::1:2".parse().unwrap()
}
fn dst6() -> Ipv6Addr {
    "fd00::1:3".parse().unwrap()
}

/// How one datagram is carried.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Carrier {
    Ethernet,
    Dot1q,
    QinQ,
    Ipv6,
    /// IPv4 fragments of at most 600 bytes of payload each.
    Ipv4Frag,
    /// IPv6 fragments (fragment header) of at most 600 bytes each.
    Ipv6Frag,
}

/// What the test expects tshark to read for one submessage.
#[derive(Debug)]
struct Expect {
    kind: &'static str,
    flags: u8,
    octets: usize,
    /// (tshark field in the submessage's subtree, expected value as tshark prints it).
    fields: Vec<(&'static str, String)>,
}

struct Datagram {
    carrier: Carrier,
    le: bool,
    udp_src: u16,
    rtps: Vec<u8>,
    subs: Vec<Expect>,
}

fn hex_entity(e: EntityId) -> String {
    format!("0x{:08x}", e.as_u32())
}

fn prefix_colons(p: GuidPrefix) -> String {
    p.0.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The inline QoS the DATA carries: PID_KEY_HASH and PID_STATUS_INFO (disposed).
fn inline_qos(le: bool) -> Vec<u8> {
    let mut q = vec![];
    let mut w = ParamListWriter::new(&mut q, le);
    w.raw(plist::PID_KEY_HASH, &[7; 16]).unwrap();
    w.raw(plist::PID_STATUS_INFO, &[0, 0, 0, 1]).unwrap();
    w.finish();
    q
}

/// An SEDP-like publication parameter list (PL_CDR in `le`).
fn sedp_payload(le: bool) -> Vec<u8> {
    let mut p = vec![];
    let enc = if le { Encapsulation::PlCdrLe } else { Encapsulation::PlCdrBe };
    PayloadHeader { encapsulation: enc, options: 0 }.emit_vec(&mut p).unwrap();
    let mut w = ParamListWriter::new(&mut p, le);
    w.string(plist::PID_TOPIC_NAME, "rt/oracle_topic").unwrap();
    w.string(plist::PID_TYPE_NAME, "std_msgs::msg::dds_::String_").unwrap();
    w.locator(plist::PID_UNICAST_LOCATOR, &Locator::udpv4(Ipv4Addr::new(192, 0, 2, 7), 7411)).unwrap();
    w.u32(plist::PID_DOMAIN_ID, 42).unwrap();
    w.finish();
    p
}

/// One message per submessage kind, in byte order `le`.
fn datagrams(le: bool) -> Vec<Datagram> {
    let mut out = vec![];
    let mut add = |carrier: Carrier, subs: Vec<(Submessage<'_>, Vec<(&'static str, String)>)>| {
        let mut rtps = vec![];
        Header::new(VENDOR, PREFIX).emit_vec(&mut rtps).unwrap();
        let mut exp = vec![];
        for (sm, fields) in subs {
            sm.emit_vec(le, &mut rtps).unwrap();
            let kind = SubmsgKind::from_id(sm.id().unwrap()).name().into_owned();
            let kind: &'static str = Box::leak(kind.into_boxed_str());
            exp.push(Expect { kind, flags: sm.flags() | if le { flags::E } else { 0 }, octets: sm.body_len(), fields });
        }
        let udp_src = 7400 + out.len() as u16;
        out.push(Datagram { carrier, le, udp_src, rtps, subs: exp });
    };
    let f = |k: &'static str, v: String| (k, v);
    let qos = inline_qos(le);
    let user = [0u8, if le { 1 } else { 0 }, 0, 0, 0xde, 0xad, 0xbe, 0xef];
    let sedp = sedp_payload(le);
    let big = vec![0x5au8; 1800];
    let ts = Time::from_unix_nanos(1_700_000_000_250_000_000);

    // INFO_TS + DATA with inline QoS and user payload, 802.1Q tagged.
    add(
        Carrier::Dot1q,
        vec![
            (Submessage::InfoTs(Some(ts)), vec![f("rtps.info_ts.timestamp", "Nov 14, 2023 22:13:20.250000000 UTC".into())]),
            (
                Submessage::Data(Data {
                    reader_id: READER,
                    writer_id: WRITER,
                    writer_sn: 0x1_0000_0005,
                    inline_qos: Some(&qos),
                    payload: Some(&user),
                    payload_len: user.len(),
                    key_flag: false,
                    non_standard_payload: false,
                }),
                vec![
                    f("rtps.sm.rdEntityId", hex_entity(READER)),
                    f("rtps.sm.wrEntityId", hex_entity(WRITER)),
                    f("rtps.sm.seqNumber", (0x1_0000_0005i64).to_string()),
                    f("rtps.octets_to_inline_qos", "16".into()),
                ],
            ),
        ],
    );
    // DATA carrying a serialized key, 802.1ad + 802.1Q.
    add(
        Carrier::QinQ,
        vec![(
            Submessage::Data(Data {
                reader_id: EntityId::UNKNOWN,
                writer_id: WRITER,
                writer_sn: 6,
                inline_qos: None,
                payload: Some(&user),
                payload_len: user.len(),
                key_flag: true,
                non_standard_payload: false,
            }),
            vec![f("rtps.sm.wrEntityId", hex_entity(WRITER)), f("rtps.sm.seqNumber", "6".into())],
        )],
    );
    // SEDP publication in one DATA (tshark decodes the parameter list).
    add(
        Carrier::Ethernet,
        vec![(
            Submessage::Data(Data {
                reader_id: EntityId::SEDP_PUBLICATIONS_READER,
                writer_id: EntityId::SEDP_PUBLICATIONS_WRITER,
                writer_sn: 1,
                inline_qos: None,
                payload: Some(&sedp),
                payload_len: sedp.len(),
                key_flag: false,
                non_standard_payload: false,
            }),
            vec![f("rtps.sm.wrEntityId", hex_entity(EntityId::SEDP_PUBLICATIONS_WRITER)), f("rtps.sm.seqNumber", "1".into())],
        )],
    );
    // DATA_FRAG over IPv6.
    add(
        Carrier::Ipv6,
        vec![(
            Submessage::DataFrag(DataFrag {
                reader_id: READER,
                writer_id: WRITER,
                writer_sn: 9,
                fragment_starting_num: 3,
                fragments_in_submessage: 2,
                fragment_size: 100,
                sample_size: 1000,
                inline_qos: None,
                payload: &big[..200],
                payload_len: 200,
                key_flag: false,
                non_standard_payload: false,
            }),
            vec![
                f("rtps.sm.wrEntityId", hex_entity(WRITER)),
                f("rtps.sm.seqNumber", "9".into()),
                f("rtps.data_frag.number", "3".into()),
                f("rtps.data_frag.num_fragments", "2".into()),
                f("rtps.data_frag.size", "100".into()),
                f("rtps.data_frag.sample_size", "1000".into()),
            ],
        )],
    );
    // HEARTBEAT (final + liveliness) and HEARTBEAT_FRAG.
    add(
        Carrier::Ethernet,
        vec![
            (
                Submessage::Heartbeat(Heartbeat {
                    reader_id: READER,
                    writer_id: WRITER,
                    first_sn: 2,
                    last_sn: 0x2_0000_0001,
                    count: 77,
                    final_flag: true,
                    liveliness_flag: true,
                }),
                vec![f("rtps.sm.wrEntityId", hex_entity(WRITER)), f("rtps.heartbeat_count", "77".into())],
            ),
            (
                Submessage::HeartbeatFrag(HeartbeatFrag { reader_id: READER, writer_id: WRITER, writer_sn: 9, last_fragment_num: 10, count: 4 }),
                vec![
                    f("rtps.sm.seqNumber", "9".into()),
                    f("rtps.heartbeat_frag.number", "10".into()),
                    f("rtps.heartbeat_frag.count", "4".into()),
                ],
            ),
        ],
    );
    // INFO_DST + ACKNACK + NACK_FRAG (reader side).
    add(
        Carrier::Dot1q,
        vec![
            (Submessage::InfoDst { guid_prefix: DST_PREFIX }, vec![f("rtps.guidPrefix.dst", prefix_colons(DST_PREFIX))]),
            (
                Submessage::AckNack(AckNack {
                    reader_id: READER,
                    writer_id: WRITER,
                    reader_sn_state: NumberSet::from_members(40, &[40, 41, 75, 100]).unwrap(),
                    count: 12,
                    final_flag: true,
                }),
                vec![f("rtps.acknack.count", "12".into())],
            ),
            (
                Submessage::NackFrag(NackFrag {
                    reader_id: READER,
                    writer_id: WRITER,
                    writer_sn: 9,
                    fragment_number_state: NumberSet::from_members(3, &[3, 5, 34]).unwrap(),
                    count: 2,
                }),
                vec![f("rtps.sm.seqNumber", "9".into()), f("rtps.nack_frag.count", "2".into())],
            ),
        ],
    );
    // GAP, INFO_SRC, PAD.
    add(
        Carrier::Ethernet,
        vec![
            (
                Submessage::Gap(Gap { reader_id: READER, writer_id: WRITER, gap_start: 3, gap_list: NumberSet::from_members(10, &[10, 12]).unwrap() }),
                vec![f("rtps.sm.wrEntityId", hex_entity(WRITER))],
            ),
            (
                Submessage::InfoSrc { version: (2, 4), vendor_id: 0x0110, guid_prefix: DST_PREFIX },
                vec![f("rtps.guidPrefix.src", prefix_colons(DST_PREFIX)), f("rtps.vendorId", "0x0110".into()), f("rtps.version", "0x0204".into())],
            ),
            (Submessage::Pad, vec![]),
        ],
    );
    // INFO_TS invalidated, INFO_REPLY with multicast, INFO_REPLY_IP4 with multicast, over IPv6.
    let mut uni = vec![];
    let locs = [Locator::udpv4(Ipv4Addr::new(192, 0, 2, 1), 7410), Locator::udpv6("fd00::9".parse().unwrap(), 7412)];
    LocatorList::encode(&locs, le, &mut uni).unwrap();
    let mut multi = vec![];
    LocatorList::encode(&[Locator::udpv4(Ipv4Addr::new(239, 255, 0, 1), 7400)], le, &mut multi).unwrap();
    add(
        Carrier::Ipv6,
        vec![
            (Submessage::InfoTs(None), vec![]),
            (
                Submessage::InfoReply {
                    unicast: LocatorList::new(&uni, le).unwrap(),
                    multicast: Some(LocatorList::new(&multi, le).unwrap()),
                },
                vec![],
            ),
            (Submessage::InfoReplyIp4 { unicast: (0xc0000201, 7410), multicast: Some((0xefff0001, 7400)) }, vec![]),
        ],
    );
    // A DATA large enough to be IP-fragmented, over IPv4 and over IPv6.
    for carrier in [Carrier::Ipv4Frag, Carrier::Ipv6Frag] {
        add(
            carrier,
            vec![(
                Submessage::Data(Data {
                    reader_id: EntityId::UNKNOWN,
                    writer_id: WRITER,
                    writer_sn: 100,
                    inline_qos: None,
                    payload: Some(&big),
                    payload_len: big.len(),
                    key_flag: false,
                    non_standard_payload: false,
                }),
                vec![f("rtps.sm.seqNumber", "100".into())],
            )],
        );
    }
    out
}

fn ethernet_frame(tags: &[VlanTag], ethertype: u16, ip: &[u8]) -> Vec<u8> {
    let mut fr = vec![];
    emit_ethernet(&mut fr, [0x02, 0, 0, 0, 0, 0x22], [0x02, 0, 0, 0, 0, 0x11], tags, ethertype).unwrap();
    fr.extend_from_slice(ip);
    fr
}

fn udp_datagram(src: IpAddr, dst: IpAddr, src_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut d = vec![];
    UdpRepr { src_port, dst_port: 7411, payload_len: payload.len() as u16 }.emit_vec(&mut d).unwrap();
    d.extend_from_slice(payload);
    udp::fill_checksum(src, dst, &mut d).unwrap();
    d
}

/// IPv4 packets carrying `l4`, fragmented at `max` payload bytes.
fn ipv4_packets(ident: u16, l4: &[u8], max: usize) -> Vec<Vec<u8>> {
    let mut out = vec![];
    let mut off = 0;
    loop {
        let end = (off + max).min(l4.len());
        let more = end < l4.len();
        let mut p = vec![];
        Ipv4Repr {
            src: SRC4,
            dst: DST4,
            protocol: PROTO_UDP,
            ident,
            dont_fragment: false,
            more_fragments: more,
            frag_offset: off as u16,
            ttl: 17,
            dscp_ecn: 0xb8,
            payload_len: (end - off) as u16,
        }
        .emit_vec(&mut p)
        .unwrap();
        p.extend_from_slice(&l4[off..end]);
        out.push(p);
        if !more {
            return out;
        }
        off = end;
    }
}

fn ipv6_packets(ident: u32, l4: &[u8], frag: Option<usize>) -> Vec<Vec<u8>> {
    let fixed = |next_header: u8, len: usize| Ipv6Repr {
        src: src6(),
        dst: dst6(),
        next_header,
        hop_limit: 33,
        traffic_class: 0x28,
        flow_label: 0xbeef5,
        payload_len: len as u16,
    };
    let Some(max) = frag else {
        let mut p = vec![];
        fixed(PROTO_UDP, l4.len()).emit_vec(&mut p).unwrap();
        p.extend_from_slice(l4);
        return vec![p];
    };
    let mut out = vec![];
    let mut off = 0;
    loop {
        let end = (off + max).min(l4.len());
        let more = end < l4.len();
        let mut p = vec![];
        fixed(EXT_FRAGMENT, 8 + end - off).emit_vec(&mut p).unwrap();
        Ipv6FragmentRepr { next_header: PROTO_UDP, frag_offset: off as u16, more_fragments: more, ident }.emit_vec(&mut p).unwrap();
        p.extend_from_slice(&l4[off..end]);
        out.push(p);
        if !more {
            return out;
        }
        off = end;
    }
}

/// Classic pcap (microseconds) with one link type.
fn write_pcap(path: &Path, linktype: u32, frames: &[Vec<u8>]) {
    let mut out = vec![];
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&linktype.to_le_bytes());
    for (i, f) in frames.iter().enumerate() {
        out.extend_from_slice(&1_700_000_000u32.to_le_bytes());
        out.extend_from_slice(&(i as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    std::fs::write(path, out).unwrap();
}

fn tshark() -> String {
    let path = std::env::var("TSHARK").unwrap_or_else(|_| "tshark".into());
    match Command::new(&path).arg("--version").output() {
        Ok(o) if o.status.success() => path,
        _ => panic!("tshark is required for the wire oracle test and was not found ({path}); apt-get install tshark"),
    }
}

/// tshark's packets (`_source.layers` of each), checksums verified.
fn tshark_packets(pcap: &Path) -> Vec<Value> {
    let out = Command::new(tshark())
        .args(["-r"])
        .arg(pcap)
        .args(["-T", "json", "--no-duplicate-keys", "-J", "frame eth sll vlan ieee8021ad null ip ipv6 udp rtps"])
        .args(["-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE"])
        .output()
        .expect("run tshark");
    assert!(out.status.success(), "tshark failed on {}: {}", pcap.display(), String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("tshark JSON");
    v.as_array().expect("tshark JSON is an array").iter().map(|p| p["_source"]["layers"].clone()).collect()
}

/// A value that --no-duplicate-keys may have made an array: its items.
fn items(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(a) => a.iter().collect(),
        Value::Null => vec![],
        other => vec![other],
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn one<'a>(v: &'a Value, key: &str, ctx: &str) -> &'a Value {
    let got = items(&v[key]);
    assert_eq!(got.len(), 1, "{ctx}: {key} occurs {} times: {v}", got.len());
    got[0]
}

fn tmp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ddscope-wire-oracle-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Checks the RTPS layer of one tshark packet against the datagram it carries.
fn check_rtps(layers: &Value, d: &Datagram, ctx: &str) {
    let rtps = &layers["rtps"];
    assert!(!rtps.is_null(), "{ctx}: tshark found no RTPS layer: {layers}");
    assert_eq!(text(one(rtps, "rtps.vendorId", ctx)), format!("0x{VENDOR:04x}"), "{ctx}: vendor");
    assert_eq!(text(one(rtps, "rtps.guidPrefix.src", ctx)), prefix_colons(PREFIX), "{ctx}: GUID prefix");
    let ids = items(&rtps["rtps.sm.id"]);
    let trees = items(&rtps["rtps.sm.id_tree"]);
    assert_eq!(ids.len(), d.subs.len(), "{ctx}: submessage count");
    assert_eq!(trees.len(), d.subs.len(), "{ctx}: submessage trees");
    for (i, (exp, tree)) in d.subs.iter().zip(trees).enumerate() {
        let ctx = format!("{ctx} submessage {i} ({})", exp.kind);
        let id = u8::from_str_radix(text(ids[i]).trim_start_matches("0x"), 16).unwrap();
        assert_eq!(SubmsgKind::from_id(id).name(), exp.kind, "{ctx}: id");
        let flags = u8::from_str_radix(text(one(tree, "rtps.sm.flags", &ctx)).trim_start_matches("0x"), 16).unwrap();
        assert_eq!(flags, exp.flags, "{ctx}: flags");
        assert_eq!(text(one(tree, "rtps.sm.octetsToNextHeader", &ctx)), exp.octets.to_string(), "{ctx}: octetsToNextHeader");
        for (key, want) in &exp.fields {
            let got = items(&tree[*key]).into_iter().map(text).collect::<Vec<_>>();
            assert!(got.contains(want), "{ctx}: {key} = {got:?}, expected {want}");
        }
        check_kind_specific(tree, exp, d.le, &ctx);
    }
}

/// Every value of `key` anywhere under `v` (tshark nests parameters and
/// locators in subtrees whose own keys carry their values as text).
fn find(v: &Value, key: &str) -> Vec<String> {
    let mut out = vec![];
    match v {
        Value::Object(m) => {
            for (k, val) in m {
                if k == key {
                    out.extend(items(val).into_iter().map(text));
                } else {
                    out.extend(find(val, key));
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| out.extend(find(x, key))),
        _ => {}
    }
    out
}

/// serde_json (without its preserve_order feature) sorts object keys, so
/// the order of sibling parameters is not tshark's; compare them as sets.
fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// The subtree whose key starts with `prefix` (tshark puts counts and
/// summaries into some subtree names).
fn subtree<'a>(tree: &'a Value, prefix: &str, ctx: &str) -> &'a Value {
    let m = tree.as_object().expect("submessage tree");
    let hits: Vec<_> = m.iter().filter(|(k, _)| k.starts_with(prefix)).collect();
    assert_eq!(hits.len(), 1, "{ctx}: {} subtrees named {prefix}…: {tree}", hits.len());
    hits[0].1
}

fn encap(le: bool, pl: bool) -> String {
    format!("0x{:04x}", (pl as u16) * 2 + le as u16)
}

/// Fields whose place in tshark's tree differs by submessage.
fn check_kind_specific(tree: &Value, exp: &Expect, le: bool, ctx: &str) {
    let seqs = |v: &Value| items(&v["rtps.sm.seqNumber"]).into_iter().map(text).collect::<Vec<_>>();
    let s = |v: &str| v.to_string();
    match exp.kind {
        "HEARTBEAT" => assert_eq!(seqs(tree), vec![s("2"), (0x2_0000_0001i64).to_string()], "{ctx}: first/last SN"),
        "ACKNACK" => {
            let st = &tree["readerSNState"];
            assert_eq!(seqs(st), vec!["40"], "{ctx}: bitmap base");
            assert_eq!(text(one(st, "rtps.bitmap.num_bits", ctx)), "61", "{ctx}: numBits");
            assert_eq!(tshark_bits(st, 40, le), vec![40, 41, 75, 100], "{ctx}: bitmap");
        }
        "NACK_FRAG" => {
            let st = &tree["fragmentNumberState"];
            assert_eq!(text(one(st, "rtps.fragment_number.base32", ctx)), "3", "{ctx}: bitmap base");
            assert_eq!(text(one(st, "rtps.fragment_number.num_bits", ctx)), "32", "{ctx}: numBits");
            assert_eq!(tshark_bits(st, 3, le), vec![3, 5, 34], "{ctx}: bitmap");
        }
        "GAP" => {
            assert_eq!(seqs(tree), vec!["3"], "{ctx}: gapStart");
            let gl = &tree["gapList"];
            assert_eq!(seqs(gl), vec!["10"], "{ctx}: gapList base");
            assert_eq!(text(one(gl, "rtps.bitmap.num_bits", ctx)), "3", "{ctx}: numBits");
            assert_eq!(tshark_bits(gl, 10, le), vec![10, 12], "{ctx}: gapList bitmap");
        }
        "DATA" if exp.flags & flags::data::Q != 0 => {
            let qos = &tree["inlineQos:"];
            assert_eq!(sorted(find(qos, "rtps.param.id")), vec!["0x0001", "0x0070", "0x0071"], "{ctx}: inline QoS parameters");
            assert_eq!(find(qos, "rtps.guid"), vec![vec!["07"; 16].join(":")], "{ctx}: key hash");
            assert_eq!(find(qos, "rtps.param.status_info"), vec!["0x00000001"], "{ctx}: status info");
            let data = &tree["serializedData"];
            assert_eq!(text(one(data, "rtps.param.serialize.encap_kind", ctx)), encap(le, false), "{ctx}: encapsulation");
            assert_eq!(text(one(data, "rtps.issueData", ctx)), "de:ad:be:ef", "{ctx}: payload");
        }
        "DATA" if exp.flags & flags::data::K != 0 => {
            let key = &tree["serializedKey"];
            assert!(tree["serializedData"].is_null(), "{ctx}: K flag read as data: {tree}");
            assert_eq!(text(one(key, "rtps.param.serialize.encap_kind", ctx)), encap(le, false), "{ctx}: key encapsulation");
            assert_eq!(text(one(key, "rtps.issueData", ctx)), "de:ad:be:ef", "{ctx}: key bytes");
        }
        "DATA" if exp.fields.iter().any(|(_, v)| v == &hex_entity(EntityId::SEDP_PUBLICATIONS_WRITER)) => {
            let data = &tree["serializedData"];
            assert_eq!(text(one(data, "rtps.param.serialize.encap_kind", ctx)), encap(le, true), "{ctx}: PL_CDR encapsulation");
            assert_eq!(sorted(find(data, "rtps.param.id")), vec!["0x0001", "0x0005", "0x0007", "0x000f", "0x002f"], "{ctx}: parameter ids");
            assert_eq!(find(data, "rtps.param.topicName"), vec!["rt/oracle_topic"], "{ctx}");
            assert_eq!(find(data, "rtps.param.typeName"), vec!["std_msgs::msg::dds_::String_"], "{ctx}");
            assert_eq!(find(data, "rtps.locator.ipv4"), vec!["192.0.2.7"], "{ctx}");
            assert_eq!(find(data, "rtps.locator.port"), vec!["7411"], "{ctx}");
            assert_eq!(find(data, "rtps.parameter_data"), vec![if le { "2a:00:00:00" } else { "00:00:00:2a" }], "{ctx}: domain id");
        }
        "INFO_REPLY" => {
            let uni = subtree(tree, "unicastReplyLocatorList", ctx);
            assert_eq!(find(uni, "rtps.locator.kind"), vec!["0x00000001", "0x00000002"], "{ctx}: unicast kinds");
            assert_eq!(find(uni, "rtps.locator.ipv4"), vec!["192.0.2.1"], "{ctx}");
            assert_eq!(find(uni, "rtps.locator.ipv6"), vec!["fd00::9"], "{ctx}");
            assert_eq!(find(uni, "rtps.locator.port"), vec!["7410", "7412"], "{ctx}");
            let multi = subtree(tree, "multicastReplyLocatorList", ctx);
            assert_eq!(find(multi, "rtps.locator.ipv4"), vec!["239.255.0.1"], "{ctx}");
            assert_eq!(find(multi, "rtps.locator.port"), vec!["7400"], "{ctx}");
        }
        "INFO_REPLY_IP4" => {
            // tshark 4.0 prints the address field in place of the port too; the address is the check.
            assert_eq!(find(&tree["unicastReplyLocator"], "rtps.locator_udp_v4.ip"), vec!["192.0.2.1"], "{ctx}");
            assert_eq!(find(&tree["multicastReplyLocator"], "rtps.locator_udp_v4.ip"), vec!["239.255.0.1"], "{ctx}");
        }
        _ => {}
    }
}

/// The members of a bitmap as tshark shows it (`rtps.bitmap`: the raw bytes,
/// 32-bit words in the submessage's byte order, most significant bit first).
fn tshark_bits(set: &Value, base: i64, le: bool) -> Vec<i64> {
    let bytes: Vec<u8> = text(&set["rtps.bitmap"]).split(':').map(|b| u8::from_str_radix(b, 16).unwrap()).collect();
    let mut out = vec![];
    for (w, c) in bytes.chunks(4).enumerate() {
        let c: [u8; 4] = c.try_into().unwrap();
        let word = if le { u32::from_le_bytes(c) } else { u32::from_be_bytes(c) };
        for bit in 0..32 {
            if word & (1 << (31 - bit)) != 0 {
                out.push(base + (w * 32 + bit) as i64);
            }
        }
    }
    out
}

#[test]
fn tshark_reads_what_the_emitters_write_over_ethernet_and_ip() {
    let dir = tmp_dir("ip");
    let mut frames = vec![];
    // (index of the frame that completes each datagram, datagram)
    let mut expect: Vec<(usize, Datagram)> = vec![];
    let mut ident = 0x4000u16;
    for le in [true, false] {
        for d in datagrams(le) {
            ident += 1;
            let v4 = (IpAddr::V4(SRC4), IpAddr::V4(DST4));
            let v6 = (IpAddr::V6(src6()), IpAddr::V6(dst6()));
            let (tags, packets, ethertype): (Vec<VlanTag>, Vec<Vec<u8>>, u16) = match d.carrier {
                Carrier::Ethernet => (vec![], ipv4_packets(ident, &udp_datagram(v4.0, v4.1, d.udp_src, &d.rtps), 1480), ETHERTYPE_IPV4),
                Carrier::Dot1q => (
                    vec![VlanTag { tpid: ETHERTYPE_VLAN, pcp: 5, dei: false, vid: 30 }],
                    ipv4_packets(ident, &udp_datagram(v4.0, v4.1, d.udp_src, &d.rtps), 1480),
                    ETHERTYPE_IPV4,
                ),
                Carrier::QinQ => (
                    vec![VlanTag { tpid: ETHERTYPE_QINQ, pcp: 3, dei: true, vid: 100 }, VlanTag { tpid: ETHERTYPE_VLAN, pcp: 6, dei: false, vid: 31 }],
                    ipv4_packets(ident, &udp_datagram(v4.0, v4.1, d.udp_src, &d.rtps), 1480),
                    ETHERTYPE_IPV4,
                ),
                Carrier::Ipv6 => (vec![], ipv6_packets(ident as u32, &udp_datagram(v6.0, v6.1, d.udp_src, &d.rtps), None), ETHERTYPE_IPV6),
                Carrier::Ipv4Frag => (vec![], ipv4_packets(ident, &udp_datagram(v4.0, v4.1, d.udp_src, &d.rtps), 600), ETHERTYPE_IPV4),
                Carrier::Ipv6Frag => {
                    (vec![], ipv6_packets(0x7000_0000 | ident as u32, &udp_datagram(v6.0, v6.1, d.udp_src, &d.rtps), Some(600)), ETHERTYPE_IPV6)
                }
            };
            if matches!(d.carrier, Carrier::Ipv4Frag | Carrier::Ipv6Frag) {
                assert!(packets.len() >= 3, "the large DATA must be fragmented");
            }
            for p in &packets {
                frames.push(ethernet_frame(&tags, ethertype, p));
            }
            expect.push((frames.len() - 1, d));
        }
    }
    let pcap = dir.join("emitted.pcap");
    write_pcap(&pcap, 1, &frames);
    let packets = tshark_packets(&pcap);
    assert_eq!(packets.len(), frames.len(), "tshark packet count");
    let mut kinds = std::collections::BTreeSet::new();
    let mut orders = std::collections::BTreeSet::new();
    for (i, layers) in packets.iter().enumerate() {
        let ctx = format!("frame {}", i + 1);
        let Some((_, d)) = expect.iter().find(|(at, _)| *at == i) else {
            assert!(layers["rtps"].is_null(), "{ctx}: RTPS on a frame that does not complete a datagram");
            continue;
        };
        // Link layer.
        let eth = &layers["eth"];
        assert_eq!(text(one(eth, "eth.src", &ctx)), "02:00:00:00:00:11", "{ctx}");
        assert_eq!(text(one(eth, "eth.dst", &ctx)), "02:00:00:00:00:22", "{ctx}");
        match d.carrier {
            Carrier::Dot1q => {
                assert_eq!(text(one(&layers["vlan"], "vlan.priority", &ctx)), "5", "{ctx}");
                assert_eq!(text(one(&layers["vlan"], "vlan.id", &ctx)), "30", "{ctx}");
            }
            Carrier::QinQ => {
                let ad = &layers["ieee8021ad"];
                assert_eq!(text(one(ad, "ieee8021ad.priority", &ctx)), "3", "{ctx}: S-tag PCP");
                assert_eq!(text(one(ad, "ieee8021ad.dei", &ctx)), "1", "{ctx}: S-tag DEI");
                assert_eq!(text(one(ad, "ieee8021ad.id", &ctx)), "100", "{ctx}: S-tag VID");
                let q = items(&layers["vlan"]);
                assert_eq!(q.len(), 1, "{ctx}: one C-tag");
                assert_eq!(text(one(q[0], "vlan.priority", &ctx)), "6", "{ctx}: C-tag PCP");
                assert_eq!(text(one(q[0], "vlan.id", &ctx)), "31", "{ctx}: C-tag VID");
            }
            _ => assert!(layers["vlan"].is_null(), "{ctx}: untagged"),
        }
        // Network layer: addresses, TTL/hop limit, identification, checksum verified good.
        match d.carrier {
            Carrier::Ipv6 | Carrier::Ipv6Frag => {
                let ip6 = &layers["ipv6"];
                assert_eq!(text(one(ip6, "ipv6.src", &ctx)), src6().to_string(), "{ctx}");
                assert_eq!(text(one(ip6, "ipv6.dst", &ctx)), dst6().to_string(), "{ctx}");
                assert_eq!(text(one(ip6, "ipv6.hlim", &ctx)), "33", "{ctx}: hop limit");
                let hex = |k: &str| u32::from_str_radix(text(one(ip6, k, &ctx)).trim_start_matches("0x"), 16).unwrap();
                assert_eq!(hex("ipv6.flow"), 0xbeef5, "{ctx}: flow label");
                assert_eq!(hex("ipv6.tclass"), 0x28, "{ctx}: traffic class");
                if d.carrier == Carrier::Ipv6Frag {
                    let s = ip6.to_string();
                    assert!(s.contains("ipv6.fragment.id") || s.contains("ipv6.reassembled"), "{ctx}: no fragment header/reassembly: {s}");
                }
            }
            _ => {
                let ip4 = &layers["ip"];
                assert_eq!(text(one(ip4, "ip.src", &ctx)), SRC4.to_string(), "{ctx}");
                assert_eq!(text(one(ip4, "ip.dst", &ctx)), DST4.to_string(), "{ctx}");
                assert_eq!(text(one(ip4, "ip.ttl", &ctx)), "17", "{ctx}");
                assert_eq!(text(one(ip4, "ip.dsfield", &ctx)), "0xb8", "{ctx}");
                assert_eq!(text(one(ip4, "ip.checksum.status", &ctx)), "1", "{ctx}: IPv4 header checksum not good: {ip4}");
                if d.carrier == Carrier::Ipv4Frag {
                    assert!(ip4.to_string().contains("ip.fragment.count"), "{ctx}: no reassembly: {ip4}");
                }
            }
        }
        let udp = &layers["udp"];
        assert_eq!(text(one(udp, "udp.srcport", &ctx)), d.udp_src.to_string(), "{ctx}");
        assert_eq!(text(one(udp, "udp.dstport", &ctx)), "7411", "{ctx}");
        assert_eq!(text(one(udp, "udp.length", &ctx)), (8 + d.rtps.len()).to_string(), "{ctx}");
        assert_eq!(text(one(udp, "udp.checksum.status", &ctx)), "1", "{ctx}: UDP checksum not good: {udp}");
        check_rtps(layers, d, &ctx);
        kinds.extend(d.subs.iter().map(|s| s.kind));
        orders.insert(d.le);
    }
    let all = [
        "DATA", "DATA_FRAG", "HEARTBEAT", "HEARTBEAT_FRAG", "ACKNACK", "NACK_FRAG", "GAP", "INFO_TS", "INFO_DST", "INFO_SRC", "INFO_REPLY",
        "INFO_REPLY_IP4", "PAD",
    ];
    for k in all {
        assert!(kinds.contains(k), "no {k} checked");
    }
    assert_eq!(orders.len(), 2, "both byte orders checked");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn tshark_reads_the_cooked_and_null_link_headers() {
    let dir = tmp_dir("links");
    let rtps = {
        let mut m = vec![];
        Header::new(VENDOR, PREFIX).emit_vec(&mut m).unwrap();
        Submessage::InfoDst { guid_prefix: DST_PREFIX }.emit_vec(true, &mut m).unwrap();
        m
    };
    let ip = ipv4_packets(9, &udp_datagram(IpAddr::V4(SRC4), IpAddr::V4(DST4), 7400, &rtps), 1480).remove(0);
    let with = |hdr: &dyn Emit| {
        let mut f = vec![];
        hdr.emit_vec(&mut f).unwrap();
        f.extend_from_slice(&ip);
        f
    };
    let sll = SllRepr { packet_type: 4, arphrd_type: 1, addr_len: 6, addr: [2, 0, 0, 0, 0, 0x11, 0, 0], protocol: ETHERTYPE_IPV4 };
    let sll2 = Sll2Repr { protocol: ETHERTYPE_IPV4, if_index: 7, arphrd_type: 1, packet_type: 4, addr_len: 6, addr: [2, 0, 0, 0, 0, 0x11, 0, 0] };
    let null = NullRepr { family: 2, little_endian: true };
    let cases: [(&str, u32, Vec<u8>, Vec<(&str, &str, &str)>); 3] = [
        ("sll", 113, with(&sll), vec![("sll", "sll.pkttype", "4"), ("sll", "sll.hatype", "1"), ("sll", "sll.src.eth", "02:00:00:00:00:11"), ("sll", "sll.etype", "0x0800")]),
        ("sll2", 276, with(&sll2), vec![("sll", "sll.ifindex", "7"), ("sll", "sll.pkttype", "4"), ("sll", "sll.src.eth", "02:00:00:00:00:11"), ("sll", "sll.etype", "0x0800")]),
        ("null", 0, with(&null), vec![("null", "null.family", "2")]),
    ];
    for (name, linktype, frame, fields) in cases {
        let pcap = dir.join(format!("{name}.pcap"));
        write_pcap(&pcap, linktype, &[frame]);
        let packets = tshark_packets(&pcap);
        assert_eq!(packets.len(), 1);
        let l = &packets[0];
        for (layer, key, want) in fields {
            assert_eq!(text(one(&l[layer], key, name)), want, "{name}: {key} in {}", l[layer]);
        }
        assert_eq!(text(one(&l["ip"], "ip.checksum.status", name)), "1", "{name}: IPv4 checksum");
        assert_eq!(text(one(&l["rtps"], "rtps.guidPrefix.src", name)), prefix_colons(PREFIX), "{name}: RTPS");
        let tree = &items(&l["rtps"]["rtps.sm.id_tree"])[0];
        assert_eq!(text(one(tree, "rtps.guidPrefix.dst", name)), prefix_colons(DST_PREFIX), "{name}: INFO_DST");
    }
    std::fs::remove_dir_all(&dir).ok();
}
