//! Batches written by the real rmw_zenoh_cpp of 2024 (the rolling snapshot of
//! 2024-08-20 with the zenoh-c/zenoh 0.11.0-dev it vendored: Zenoh protocol
//! 0x08), captured with tcpdump on this machine's loopback while the lab's
//! rclcpp node (lab/ros2, `ddslab-ros2`) ran a talker and a listener through
//! `rmw_zenohd` (the commands are in docs/zenoh.md). These are the bytes after
//! each TCP batch's 2-byte length, copied from the capture unchanged.
//!
//! Oracles, none of them written here: the nodes' ground truth (the
//! publisher's rmw gid, its sequence numbers, the source timestamps the
//! listener's `rmw_message_info` reported, the serialised size), the router's
//! own log line "Using ZID: 7252e13c3aa69531af8380f3fedeff7e", the node names
//! and QoS the nodes were started with (`--node talker`, default depth 10,
//! reliable), and the image's CDR `header.stamp` the talker logged as
//! `stamp_ns`. `tests/test_zenoh08.py` checks whole captures the same way.

use ddscope_zenoh::codec::{Proto, Reader, ZError};
use ddscope_zenoh::network::{self, Declaration, NetworkMsg, PushBody};
use ddscope_zenoh::rmw;
use ddscope_zenoh::transport::{self, FrameMsgs, TransportMsg, WhatAmI};

fn hex(parts: &[&str]) -> Vec<u8> {
    let s: String = parts.concat();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// The network messages of a batch holding one Frame, read as 0x08.
fn frame_msgs(b: &[u8], proto: Proto) -> Vec<NetworkMsg<'_>> {
    let mut r = Reader::new(b);
    let TransportMsg::Frame(_) = transport::read_v(&mut r, proto).unwrap() else { panic!("not a Frame") };
    let msgs: Vec<_> = FrameMsgs::with_proto(&mut r, proto).map(|m| m.unwrap().1).collect();
    assert!(r.is_empty(), "the Frame's messages end the batch");
    msgs
}

fn suffix<'a>(m: &NetworkMsg<'a>) -> &'a str {
    match m {
        NetworkMsg::Declare { body: Declaration::KeyExpr { wire, .. }, .. } => std::str::from_utf8(wire.suffix).unwrap(),
        _ => "",
    }
}

const INIT_SYN_TALKER: &[&str] = &[
    "8108f1bfb7dd4f6453d26df8fd0f34d2bbb4bc01",
];

const INIT_ACK_ROUTER: &[&str] = &[
    "a108f07effdefef38083af3195a63a3ce1527231309f0dace94a830f8b9294f2130dbd48021dc684b74fe8470c2a72f1",
    "ab99886cb8b69f05fef51bfcef61a8a00d4452d37901",
];

const NN_TOKEN: &[&str] = &[
    "25a38bd5389e210d20010049402f6c6976656c696e6573732f40726f73325f6c762f302f626362346262643233346666",
    "646638366464323533363434666464623762662f302f302f4e4e2f252f252f74616c6b65729e210d420001",
];

const MP_TOKEN: &[&str] = &[
    "25a68bd5389e210d2011008501302f706172616d657465725f6576656e74732f72636c5f696e74657266616365733a3a",
    "6d73673a3a6464735f3a3a506172616d657465724576656e745f2f5249485330315f3034336536323737383066636164",
    "383761323264323235626332613033373336316462613731336663613661366239663462383639613561613033393332",
    "30349e210dc2001121019e210d2012009a02402f6c6976656c696e6573732f40726f73325f6c762f302f626362346262",
    "643233346666646638366464323533363434666464623762662f302f392f4d532f252f252f74616c6b65722f25706172",
    "616d657465725f6576656e74732f72636c5f696e74657266616365733a3a6d73673a3a6464735f3a3a506172616d6574",
    "65724576656e745f2f5249485330315f3034336536323737383066636164383761323264323235626332613033373336",
    "31646261373133666361366136623966346238363961356161303339333230342f313a323a312c313030303a39323233",
    "3337323033362c3835343737353830373a393232333337323033362c3835343737353830373a312c3932323333373230",
    "33362c3835343737353830379e210d4200129e210d201400a101302f74616c6b65722f6765745f747970655f64657363",
    "72697074696f6e2f747970655f6465736372697074696f6e5f696e74657266616365733a3a7372763a3a6464735f3a3a",
    "476574547970654465736372697074696f6e5f2f5249485330315f363962396331396331303231343035393834636336",
    "306462626231656463656231343761363533386234313164383132626136616661626565643936326364359e210dc400",
    "1421019e210d201500b502402f6c6976656c696e6573732f40726f73325f6c762f302f62636234626264323334666664",
    "6638366464323533363434666464623762662f302f31302f53532f252f252f74616c6b65722f2574616c6b6572256765",
    "745f747970655f6465736372697074696f6e2f747970655f6465736372697074696f6e5f696e74657266616365733a3a",
    "7372763a3a6464735f3a3a476574547970654465736372697074696f6e5f2f5249485330315f36396239633139633130",
    "323134303539383463633630646262623165646365623134376136353338623431316438313262613661666162656564",
    "3936326364352f313a323a312c31303a393232333337323033362c3835343737353830373a393232333337323033362c",
    "3835343737353830373a312c393232333337323033362c3835343737353830379e210d4200155d11a1e0f9bc80ddf890",
    "8b6b10bfb7dd4f6453d26df8fd0f34d2bbb4bc43530a736f757263655f67696410e6bd7838b6fb5ec470c3b36bdd33cd",
    "280f73657175656e63655f6e756d626572013310736f757263655f74696d657374616d70133137393636323132353338",
    "3132373330363638980100010000c543166b2e2e7130080000002f74616c6b6572000100000035000000716f735f6f76",
    "657272696465732e2f706172616d657465725f6576656e74732e7075626c69736865722e6475726162696c6974790004",
    "006e5f2f52490000000000000000000000000000000009000000766f6c6174696c650062623100000000000000000000",
    "0000000000000000000000000000000000005d11a190ccc080ddf8908b6b10bfb7dd4f6453d26df8fd0f34d2bbb4bc43",
    "530a736f757263655f67696410e6bd7838b6fb5ec470c3b36bdd33cd2810736f757263655f74696d657374616d701331",
    "3739363632313235333831323734353830310f73657175656e63655f6e756d6265720134900100010000c543166b5081",
    "7130080000002f74616c6b6572000100000032000000716f735f6f76657272696465732e2f706172616d657465725f65",
    "76656e74732e7075626c69736865722e686973746f7279000400000000000000000000000000000000000a0000006b65",
    "65705f6c617374000000000000000000000000000000000000000000000000000000000000005d11a1c0f0c280ddf890",
    "8b6b10bfb7dd4f6453d26df8fd0f34d2bbb4bc43530f73657175656e63655f6e756d626572013510736f757263655f74",
    "696d657374616d7013313739363632313235333831323735343633340a736f757263655f67696410e6bd7838b6fb5ec4",
    "70c3b36bdd33cd28880100010000c543166bcba47130080000002f74616c6b6572000100000030000000716f735f6f76",
    "657272696465732e2f706172616d657465725f6576656e74732e7075626c69736865722e64657074680002000400e803",
    "000000000000000000000000000001000000006565700000000000000000000000000000000000000000000000000000",
    "00005d11a1d0a4c480ddf8908b6b10bfb7dd4f6453d26df8fd0f34d2bbb4bc43530f73657175656e63655f6e756d6265",
    "7201360a736f757263655f67696410e6bd7838b6fb5ec470c3b36bdd33cd2810736f757263655f74696d657374616d70",
    "1331373936363231323533383132373630303832980100010000c543166b3bba7130080000002f74616c6b6572000100",
    "000036000000716f735f6f76657272696465732e2f706172616d657465725f6576656e74732e7075626c69736865722e",
    "72656c696162696c697479000400517d0100000000000000000000000000000000000900000072656c6961626c650000",
    "0000000000000000000000000000000000000000000000000000000000009e210d2016008002402f6c6976656c696e65",
    "73732f40726f73325f6c762f302f626362346262643233346666646638366464323533363434666464623762662f302f",
    "31312f4d502f252f252f74616c6b65722f2564726976652f7374645f6d7367733a3a6d73673a3a6464735f3a3a537472",
    "696e675f2f5249485330315f646636363863373430343832626264343866623339643736613730646664346264353964",
    "623132383830323137343335303332353965393438663662316131382f313a323a312c31303a39323233333732303336",
    "2c3835343737353830373a393232333337323033362c3835343737353830373a312c393232333337323033362c383534",
    "3737353830379e210d420016",
];

const PUT_SEQ1: &[&str] = &[
    "25a78bd5381d16a190edebad9bf9908b6b10bfb7dd4f6453d26df8fd0f34d2bbb4bc435310736f757263655f74696d65",
    "7374616d7013313739363632313235373730393837353530390a736f757263655f6769641040eb79fae2913dd66b352a",
    "ba70f08b0e0f73657175656e63655f6e756d6265720131400001000038000000646473636f7065206c61622073746174",
    "75733a206f6b20787878787878787878787878787878787878787878787878787878787878787800",
];

const UNDECLARE: &[&str] = &[
    "25a68af749df01210d1c010600030201137463702f3132372e302e302e313a333633363701019e210d83005f0200159e",
    "210d83005f0200129e210d83005f0200119e210d85005f02000e9e210d83005f02000f9e210d85005f02000c9e210d83",
    "005f02000d9e210d85005f02000a9e210d83005f02000b9e210d85005f0200089e210d83005f0200099e210d85005f02",
    "00069e210d83005f0200079e210d85005f0200049e210d83005f0200059e210d83005f0200109e210d85005f0200139e",
    "210d83005f0200149e210d83005f0200039e210d85005f0200029e210d83005f020001",
];

const IMAGE_FRAGMENT_HEAD: &[&str] = &[
    "66d988a37a1d15a1c0c1dba2e984908b6b1076018ae570922a45961063763cd350ff43530a736f757263655f67696410",
    "f568f27917c12510bcba7292892975260f73657175656e63655f6e756d626572013110736f757263655f74696d657374",
    "616d701331373936363230333236353738303632393433b4e0a801000100002640166b676d2d220700000063616d6572",
    "610000d002000000050000050000006267723800000000000f000000302a00010000000000000008090a0b0c0d0e0f10",
    "1112131415161718191a1b1c1d1e1f202122",
];

/// The talker's gid and first sample of the /drive run (std_msgs/msg/String,
/// 64 bytes, 50 Hz), from the nodes' ground truth.
const DRIVE_GID: &str = "40eb79fae2913dd66b352aba70f08b0e";
const DRIVE_SEQ1_SOURCE_TS: i64 = 1796621257709875509;
/// The /image run's first sample (sensor_msgs/msg/Image, 2764852 bytes).
const IMAGE_GID: &str = "f568f27917c12510bcba729289297526";
const IMAGE_SEQ1_SOURCE_TS: i64 = 1796620326578062943;
const IMAGE_SEQ1_STAMP_NS: i64 = 1796620326573402471;

fn gid(s: &str) -> [u8; 16] {
    hex(&[s]).try_into().unwrap()
}

#[test]
fn init_syn_and_ack_carry_version_0x08_and_the_zenoh_ids() {
    let syn = hex(INIT_SYN_TALKER);
    let Ok(TransportMsg::Init(i)) = transport::read(&mut Reader::new(&syn)) else { panic!() };
    assert_eq!((i.ack, i.version, i.whatami, i.qos, i.compression, i.auth), (false, 0x08, WhatAmI::Peer, true, false, false));
    assert_eq!(Proto::of_version(i.version), Some(Proto::V08));
    // rmw_zenoh writes the session's id in its tokens its own way (unpadded bytes):
    // the talker's token (below) names the id its InitSyn carried.
    assert_eq!(rmw::zid_str_2024(&i.zid), "bcb4bbd234ffdf86dd253644fddb7bf");
    let ack = hex(INIT_ACK_ROUTER);
    let Ok(TransportMsg::Init(a)) = transport::read(&mut Reader::new(&ack)) else { panic!() };
    assert_eq!((a.ack, a.version, a.whatami), (true, 0x08, WhatAmI::Router));
    // The router's log: "Using ZID: 7252e13c3aa69531af8380f3fedeff7e".
    assert_eq!(a.zid.to_string(), "7252e13c3aa69531af8380f3fedeff7e");
    assert!(!a.cookie.is_empty());
}

#[test]
fn a_liveliness_token_is_a_subscriber_on_the_liveliness_prefix() {
    let b = hex(NN_TOKEN);
    let msgs = frame_msgs(&b, Proto::V08);
    assert_eq!(msgs.iter().map(|m| m.name()).collect::<Vec<_>>(), ["DECLARE_KEYEXPR", "DECLARE_SUBSCRIBER"]);
    let key = suffix(&msgs[0]);
    let token = key.strip_prefix(network::LIVELINESS_PREFIX_V08).expect(key);
    let t = rmw::parse_token(token).unwrap();
    assert_eq!((t.kind, t.node_fq().as_str(), t.zid.as_str()), (rmw::EntityKind::Node, "/talker", "bcb4bbd234ffdf86dd253644fddb7bf"));
    // The subscriber refers to the key expression just declared, in the sender's mapping.
    let NetworkMsg::Declare { body: Declaration::Subscriber { wire, .. }, interest_id: None } = msgs[1] else { panic!() };
    let NetworkMsg::Declare { body: Declaration::KeyExpr { id, .. }, .. } = msgs[0] else { panic!() };
    assert_eq!((wire.scope, wire.suffix, wire.sender_mapping), (id, &b""[..], true));
}

#[test]
fn the_publishers_token_names_topic_type_and_the_qos_the_node_asked_for() {
    let b = hex(MP_TOKEN);
    let msgs = frame_msgs(&b, Proto::V08);
    let tokens: Vec<_> =
        msgs.iter().filter_map(|m| suffix(m).strip_prefix(network::LIVELINESS_PREFIX_V08)).map(|k| rmw::parse_token(k).unwrap()).collect();
    let mp = tokens.iter().find(|t| t.kind == rmw::EntityKind::Publisher && t.topic.as_ref().unwrap().name == "/drive").unwrap();
    let topic = mp.topic.as_ref().unwrap();
    assert_eq!((mp.node_fq().as_str(), topic.type_raw.as_str()), ("/talker", "std_msgs::msg::dds_::String_"));
    // rmw_zenoh of 2024 writes every QoS field (qos_to_keyexpr without defaults left out):
    // reliable, volatile, keep last 10 (the node's defaults), the rest infinite / automatic.
    assert_eq!(topic.qos_raw, "1:2:1,10:9223372036,854775807:9223372036,854775807:1,9223372036,854775807");
    let q = topic.qos.as_ref().unwrap();
    assert_eq!((q.reliability, q.durability, q.history, q.depth), (1, 2, 1, 10));
    assert!(q.deadline.is_infinite() && q.lifespan.is_infinite() && q.liveliness_lease.is_infinite());
    // Its data key is the key the samples (below) are put on.
    assert_eq!(mp.data_key().unwrap(), "0/drive/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18");
    // rmw_zenoh of 2024 gives the publisher a random gid, not the hash of its token:
    // the samples' gid is not the token's.
    assert_ne!(mp.gid, gid(DRIVE_GID));
    // The same batch also carries /parameter_events samples and the other tokens; none fails.
    assert!(msgs.iter().filter(|m| m.name() == "PUT").count() >= 1);
    assert!(tokens.len() >= 3);
}

#[test]
fn a_put_with_the_decimal_map_attachment_is_the_sample_the_nodes_logged() {
    let b = hex(PUT_SEQ1);
    let msgs = frame_msgs(&b, Proto::V08);
    assert_eq!(msgs.len(), 1);
    let NetworkMsg::Push { wire, body: PushBody::Put(p) } = msgs[0] else { panic!() };
    // The listener declared the key expression: the receiver's mapping (M=0).
    assert!(!wire.sender_mapping && wire.suffix.is_empty());
    assert!(p.timestamp.is_some() && !p.shm);
    assert_eq!(p.payload_len, 64);
    let a = rmw::parse_attachment(p.attachment.unwrap()).unwrap();
    assert_eq!(a.layout, rmw::AttachmentLayout::DecimalMap);
    assert_eq!((a.sequence_number, a.source_timestamp, a.gid), (1, DRIVE_SEQ1_SOURCE_TS, gid(DRIVE_GID)));
}

#[test]
fn the_first_fragment_of_an_image_holds_its_attachment_and_header() {
    // The head of a 65535-byte batch: a Fragment (reliable, more) whose payload
    // starts the Push of the 2764852-byte image.
    let b = hex(IMAGE_FRAGMENT_HEAD);
    let mut r = Reader::new(&b);
    let Ok(TransportMsg::Fragment(f)) = transport::read_v(&mut r, Proto::V08) else { panic!() };
    assert!(f.reliable && f.more && !f.first && !f.drop);
    let m = network::read_v(&mut Reader::new(f.payload), true, Proto::V08).unwrap();
    let NetworkMsg::Push { body: PushBody::Put(p), .. } = m else { panic!() };
    assert_eq!(p.payload_len, 2764852);
    let a = rmw::parse_attachment(p.attachment.unwrap()).unwrap();
    assert_eq!((a.sequence_number, a.source_timestamp, a.gid), (1, IMAGE_SEQ1_SOURCE_TS, gid(IMAGE_GID)));
    // The CDR payload: encapsulation, then header.stamp (sec, nanosec) as the talker logged it.
    let sec = u32::from_le_bytes(p.payload[4..8].try_into().unwrap()) as i64;
    let nsec = u32::from_le_bytes(p.payload[8..12].try_into().unwrap()) as i64;
    assert_eq!(sec * 1_000_000_000 + nsec, IMAGE_SEQ1_STAMP_NS);
}

#[test]
fn undeclarations_name_their_key_in_the_senders_mapping_with_bit_1_clear() {
    // 0.11 sets bit 1 of the wire-expression extension for the *receiver's*
    // mapping (1.x for the sender's): the talker's undeclarations at exit refer
    // to its own declarations.
    let b = hex(UNDECLARE);
    let msgs = frame_msgs(&b, Proto::V08);
    let undecl: Vec<_> = msgs
        .iter()
        .filter_map(|m| match m {
            NetworkMsg::Declare { body: Declaration::UndeclareSubscriber { wire, .. } | Declaration::UndeclareQueryable { wire, .. }, .. } => *wire,
            _ => None,
        })
        .collect();
    assert_eq!(undecl.len(), 21);
    assert!(undecl.iter().all(|w| w.sender_mapping && w.suffix.is_empty() && w.scope > 0));
    // Read with 1.x's layouts the same bytes would point at the receiver's declarations.
    let as_1x = frame_msgs(&b, Proto::V09);
    assert!(as_1x.iter().filter_map(|m| m.wire()).all(|w| !w.sender_mapping));
}

#[test]
fn every_cut_of_the_real_batches_is_truncated_never_a_panic() {
    for parts in [INIT_SYN_TALKER, INIT_ACK_ROUTER, NN_TOKEN, MP_TOKEN, PUT_SEQ1, UNDECLARE] {
        let b = hex(parts);
        for n in 0..b.len() {
            let cut = &b[..n];
            let mut r = Reader::new(cut);
            match transport::read_v(&mut r, Proto::V08) {
                Ok(TransportMsg::Frame(_)) => {
                    for m in FrameMsgs::with_proto(&mut r, Proto::V08) {
                        if let Err(e) = m {
                            assert!(e.is_truncated() || matches!(e, ZError::Malformed { .. }), "{e}");
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => assert!(e.is_truncated(), "cut at {n}: {e}"),
            }
        }
    }
}

#[test]
fn huge_lengths_are_refused_without_allocating() {
    // The Put's attachment extension length (0x53 = 83 after the 0x43 header)
    // made 2^32 - 1: truncated, not a 4 GiB read.
    let mut b = hex(PUT_SEQ1);
    let at = b.windows(2).position(|w| w == [0x43, 0x53]).unwrap() + 1;
    b.splice(at..at + 1, [0xff, 0xff, 0xff, 0xff, 0x0f]);
    let mut r = Reader::new(&b);
    transport::read_v(&mut r, Proto::V08).unwrap();
    let e = FrameMsgs::with_proto(&mut r, Proto::V08).next().unwrap().unwrap_err();
    assert!(e.is_truncated(), "{e}");
    // A length past u32: malformed.
    let mut b = hex(PUT_SEQ1);
    b.splice(at..at + 1, [0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    let mut r = Reader::new(&b);
    transport::read_v(&mut r, Proto::V08).unwrap();
    assert!(matches!(FrameMsgs::with_proto(&mut r, Proto::V08).next().unwrap(), Err(ZError::Malformed { .. })));
    // An attachment map whose pairs claim more bytes than there are, or whose numbers
    // are not rmw_zenoh's decimals, is not an rmw_zenoh attachment.
    let gid = [7u8; 16];
    let good = rmw::attachment_map(5, 1_700_000_000_000_000_000, &gid, [2, 0, 1]);
    assert_eq!(rmw::parse_attachment(&good).map(|a| (a.sequence_number, a.gid)), Some((5, gid)));
    let mut long = good.clone();
    long[0] = 0xff;
    assert!(rmw::parse_attachment(&long).is_none());
    let map = |sn: &str| {
        let mut a = vec![];
        for (k, v) in [(&b"sequence_number"[..], sn.as_bytes()), (b"source_timestamp", b"1700000000000000000"), (b"source_gid", &gid)] {
            ddscope_zenoh::emit::zslice(&mut a, k);
            ddscope_zenoh::emit::zslice(&mut a, v);
        }
        a
    };
    assert_eq!(rmw::parse_attachment(&map("42")).map(|a| a.sequence_number), Some(42));
    for bad in ["", "12x", "99999999999999999999", "1.5", " ", "-"] {
        assert!(rmw::parse_attachment(&map(bad)).is_none(), "{bad:?}");
    }
}
