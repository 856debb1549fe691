//! Batches written by real Zenoh processes (eclipse-zenoh 1.6.2 from PyPI,
//! lab/zenoh/rmw_node.py, captured with tcpdump on this machine): the bytes
//! after the TCP stream's 2-byte length. Oracle: what the processes logged
//! for these samples (sequence number, source timestamp, gid, payload size).

use ddscope_zenoh::codec::Reader;
use ddscope_zenoh::network::{NetworkMsg, PushBody};
use ddscope_zenoh::rmw;
use ddscope_zenoh::transport::{self, FrameMsgs, TransportMsg};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn one_put(batch: &[u8]) -> (u64, bool, ddscope_zenoh::network::Put<'_>, u16, bool) {
    let mut r = Reader::new(batch);
    let TransportMsg::Frame(f) = transport::read(&mut r).unwrap() else { panic!("not a Frame") };
    let msgs: Vec<_> = FrameMsgs::new(&mut r).collect();
    assert!(r.is_empty());
    assert_eq!(msgs.len(), 1);
    let (_, m) = msgs.into_iter().next().unwrap().unwrap();
    let NetworkMsg::Push { wire, body: PushBody::Put(p) } = m else { panic!("not a Put") };
    (f.sn, f.reliable, p, wire.scope, wire.sender_mapping)
}

#[test]
fn put_with_rmw_attachment_as_zenoh_wrote_it() {
    // The publisher logged: sn 1, source timestamp 1795777069059477242, gid 789184b8…fb4c, 64 bytes.
    // Frame (reliable, sn b4d2c65e), Push scope 1, Put with an attachment
    // extension (0x43, 33 bytes, as the subscriber logged it), 64-byte payload.
    let mut b = hex("25b4d2c65e1d01814321");
    b.extend(hex("0100000000000000fa0e15d9bae1eb1810789184b824432d5483b9be8f9a81fb4c"));
    b.push(0x40);
    b.extend_from_slice(&[1u8; 64]);
    let (sn, reliable, p, scope, mapping) = one_put(&b);
    assert!(reliable && sn > 0);
    // The subscriber declared the key expression: scope 1 in the receiver's mapping.
    assert_eq!((scope, mapping), (1, false));
    assert_eq!((p.payload_len, p.shm, p.shm_slices), (64, false, 0));
    let a = rmw::parse_attachment(p.attachment.unwrap()).unwrap();
    assert_eq!((a.sequence_number, a.source_timestamp, a.keyed), (1, 1795777069059477242, false));
    assert_eq!(a.gid, <[u8; 16]>::try_from(hex("789184b824432d5483b9be8f9a81fb4c")).unwrap());
}

#[test]
fn put_in_shared_memory_carries_a_descriptor() {
    // A 20000-byte sample between two processes on one host: zenoh put it in
    // shared memory; the wire has the attachment and a 7-byte descriptor.
    let b = hex("25cbeef0051d01819243210400000000000000954dc29906e3eb1810764e8d73939276c3091116d984eadf04010107f09309954d0000");
    let (_, _, p, _, _) = one_put(&b);
    assert!(p.shm);
    assert_eq!((p.shm_slices, p.payload_len), (1, 0));
    let a = rmw::parse_attachment(p.attachment.unwrap()).unwrap();
    assert_eq!(a.sequence_number, 4);
}

#[test]
fn declare_keyexpr_with_qos_extensions() {
    // The subscriber's first declarations: a Frame with a QoS extension
    // (priority 0, control), a Declare with a QoS extension, DeclareKeyExpr id 1.
    let key = "0/chatter/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
    // Frame header a5, sn aae69768, QoS extension 31 00; Declare 9e with QoS
    // extension 21 08; D_KEYEXPR|N 20, id 01, scope 00, the key's length and bytes.
    let mut b = hex("a5aae69768");
    b.extend(hex("3100"));
    b.extend(hex("9e2108200100"));
    b.push(key.len() as u8);
    b.extend_from_slice(key.as_bytes());
    let mut r = Reader::new(&b);
    let TransportMsg::Frame(f) = transport::read(&mut r).unwrap() else { panic!() };
    assert_eq!(f.priority, 0);
    let (_, m) = FrameMsgs::new(&mut r).next().unwrap().unwrap();
    match m {
        NetworkMsg::Declare { body: ddscope_zenoh::network::Declaration::KeyExpr { id, wire }, .. } => {
            assert_eq!((id, wire.scope, wire.suffix), (1, 0, key.as_bytes()));
        }
        other => panic!("{other:?}"),
    }
}
