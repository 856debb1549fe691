//! Synthetic two-host traffic with a known answer: a sender capture and a
//! receiver capture of the same RTPS traffic (SPDP/SEDP, a fragmented
//! `/image` topic, a small `/drive` topic, every DATA with INFO_TS), with
//! known per-datagram delays, one lost sample per topic and one repaired
//! sample (a datagram lost on the way and retransmitted). Written as
//! nanosecond pcap files, decoded by ddscope like any capture.

use ddscope_testkit::{sedp_endpoint, spdp_participant, udp_frames, FrameOptions, RtpsBuilder};
use ddscope_wire::{EntityId, Guid, GuidPrefix};
use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub const T0: i64 = 1_700_000_000_000_000_000;
pub const VENDOR: u16 = 0x0110;
pub const PREFIX_A: GuidPrefix = GuidPrefix([0x01, 0x10, 0xaa, 0xaa, 9, 8, 7, 6, 5, 4, 3, 2]);
pub const PREFIX_B: GuidPrefix = GuidPrefix([0x01, 0x10, 0xbb, 0xbb, 9, 8, 7, 6, 5, 4, 3, 2]);
pub const IMAGE_WRITER: EntityId = EntityId([0, 0, 0x12, 0x03]);
pub const DRIVE_WRITER: EntityId = EntityId([0, 0, 0x13, 0x03]);
pub const IMAGE_READER: EntityId = EntityId([0, 0, 0x14, 0x04]);
pub const IMAGE_SAMPLE: u32 = 20_000;
pub const IMAGE_FRAG: u16 = 1344;
/// Fragments per DATA_FRAG submessage (one submessage per datagram).
pub const FRAGS_PER_DATAGRAM: u32 = 5;
pub const IMAGE_SAMPLES: i64 = 20;
pub const DRIVE_SAMPLES: i64 = 40;
pub const DRIVE_SIZE: usize = 64;
pub const LOST_IMAGE: i64 = 7;
pub const LOST_DRIVE: i64 = 13;
/// Image sample whose second datagram is lost before the receiver and retransmitted.
pub const REPAIRED_IMAGE: i64 = 12;
const IP_FRAG_GAP_NS: i64 = 10_000;

/// What the generator knows about each sample.
#[derive(Debug, Clone)]
pub struct SampleTruth {
    pub topic: &'static str,
    pub sn: i64,
    pub source_ts_ns: i64,
    /// First DATA/DATA_FRAG at the sender: completion of its first datagram.
    pub sender_first_ns: i64,
    /// Sample complete at the receiver (last new fragment), None when lost.
    pub receiver_complete_ns: Option<i64>,
    /// Per DATA_FRAG (fragment_starting_num): first IP fragment at the sender, last at the receiver.
    pub frags: BTreeMap<u32, (i64, Option<i64>)>,
    pub payload_bytes: u64,
}

pub struct Truth {
    pub image_writer: Guid,
    pub drive_writer: Guid,
    pub samples: Vec<SampleTruth>,
    /// (capture time, payload bytes, topic) of every user DATA/DATA_FRAG at the sender, retransmissions included.
    pub sender_payloads: Vec<(i64, u64, &'static str)>,
}

struct Capture {
    frames: Vec<(i64, Vec<u8>)>,
}

impl Capture {
    /// Adds a datagram whose IP fragments are captured from `t` on; returns (first, last) capture time.
    fn add(&mut self, t: i64, src: SocketAddr, dst: SocketAddr, ident: u32, msg: &[u8]) -> (i64, i64) {
        let frames = udp_frames(src, dst, ident, msg, &FrameOptions::default());
        let n = frames.len() as i64;
        for (k, f) in frames.into_iter().enumerate() {
            self.frames.push((t + k as i64 * IP_FRAG_GAP_NS, f));
        }
        (t, t + (n - 1) * IP_FRAG_GAP_NS)
    }
}

pub fn write_pcap(path: &Path, frames: &mut [(i64, Vec<u8>)]) {
    frames.sort_by_key(|f| f.0);
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("create pcap"));
    // Nanosecond pcap: magic a1b23c4d, v2.4, snaplen 262144, Ethernet.
    out.write_all(&0xa1b2_3c4du32.to_le_bytes()).unwrap();
    out.write_all(&2u16.to_le_bytes()).unwrap();
    out.write_all(&4u16.to_le_bytes()).unwrap();
    out.write_all(&[0; 8]).unwrap();
    out.write_all(&262_144u32.to_le_bytes()).unwrap();
    out.write_all(&1u32.to_le_bytes()).unwrap();
    for (ts, f) in frames.iter() {
        out.write_all(&((ts / 1_000_000_000) as u32).to_le_bytes()).unwrap();
        out.write_all(&((ts % 1_000_000_000) as u32).to_le_bytes()).unwrap();
        out.write_all(&(f.len() as u32).to_le_bytes()).unwrap();
        out.write_all(&(f.len() as u32).to_le_bytes()).unwrap();
        out.write_all(f).unwrap();
    }
    out.flush().unwrap();
}

fn image_delay(sn: i64, j: u32) -> i64 {
    400_000 + sn * 1_000 + j as i64 * 3_000
}
fn drive_delay(sn: i64) -> i64 {
    150_000 + sn * 500
}

/// Writes `sender.pcap` and `receiver.pcap` into `dir`.
pub fn two_captures(dir: &Path) -> (PathBuf, PathBuf, Truth) {
    let a: SocketAddr = "10.0.0.1:7410".parse().unwrap();
    let b: SocketAddr = "10.0.0.2:7411".parse().unwrap();
    let mc: SocketAddr = "239.255.0.1:7400".parse().unwrap();
    let mut snd = Capture { frames: vec![] };
    let mut rcv = Capture { frames: vec![] };
    let mut ident = 1u32;
    let mut next_ident = || {
        ident += 1;
        ident
    };
    // Discovery, seen by both hosts (100 µs on the wire).
    let disc = [
        RtpsBuilder::new(VENDOR, PREFIX_A)
            .data(EntityId::SPDP_PARTICIPANT_READER, EntityId::SPDP_PARTICIPANT_WRITER, 1, None, &spdp_participant(PREFIX_A, VENDOR, "pc1"))
            .build(),
        RtpsBuilder::new(VENDOR, PREFIX_A)
            .data(
                EntityId::SEDP_PUBLICATIONS_READER,
                EntityId::SEDP_PUBLICATIONS_WRITER,
                1,
                None,
                &sedp_endpoint(Guid::new(PREFIX_A, IMAGE_WRITER), "rt/image", "sensor_msgs::msg::dds_::Image_", true),
            )
            .data(
                EntityId::SEDP_PUBLICATIONS_READER,
                EntityId::SEDP_PUBLICATIONS_WRITER,
                2,
                None,
                &sedp_endpoint(Guid::new(PREFIX_A, DRIVE_WRITER), "rt/drive", "geometry_msgs::msg::dds_::Twist_", false),
            )
            .build(),
    ];
    for (i, m) in disc.iter().enumerate() {
        let t = T0 + i as i64 * 1_000_000;
        let id = next_ident();
        snd.add(t, a, if i == 0 { mc } else { b }, id, m);
        rcv.add(t + 100_000, a, if i == 0 { mc } else { b }, id, m);
    }
    let mut samples = vec![];
    let mut sender_payloads = vec![];
    let nfr = IMAGE_SAMPLE.div_ceil(IMAGE_FRAG as u32);
    for sn in 1..=IMAGE_SAMPLES {
        let src_ts = T0 + 100_000_000 * sn;
        let mut truth = SampleTruth { topic: "/image", sn, source_ts_ns: src_ts, sender_first_ns: i64::MAX, receiver_complete_ns: None, frags: BTreeMap::new(), payload_bytes: 0 };
        let mut start = 1u32;
        let mut j = 0u32;
        let mut rcv_last = i64::MIN;
        while start <= nfr {
            let count = FRAGS_PER_DATAGRAM.min(nfr - start + 1);
            let first = (start - 1) as usize * IMAGE_FRAG as usize;
            let last = ((start - 1 + count) as usize * IMAGE_FRAG as usize).min(IMAGE_SAMPLE as usize);
            let payload = vec![(sn as u8) ^ 0x5a; last - first];
            let m = RtpsBuilder::new(VENDOR, PREFIX_A)
                .info_ts(src_ts)
                .data_frag(IMAGE_READER, IMAGE_WRITER, sn, start, count as u16, IMAGE_FRAG, IMAGE_SAMPLE, &payload)
                .build();
            let id = next_ident();
            let t = src_ts + 50_000 + j as i64 * 200_000;
            let (s_first, s_last) = snd.add(t, a, b, id, &m);
            sender_payloads.push((s_last, payload.len() as u64, "/image"));
            truth.sender_first_ns = truth.sender_first_ns.min(s_last);
            truth.payload_bytes += payload.len() as u64;
            let mut r_last = None;
            let lost_here = sn == LOST_IMAGE || (sn == REPAIRED_IMAGE && j == 1);
            if !lost_here {
                let (_, rl) = rcv.add(t + image_delay(sn, j), a, b, id, &m);
                r_last = Some(rl);
                rcv_last = rcv_last.max(rl);
            }
            if sn == REPAIRED_IMAGE && j == 1 {
                // Retransmitted 20 ms later; this copy reaches the receiver.
                let id2 = next_ident();
                let t2 = t + 20_000_000;
                let (_, s2_last) = snd.add(t2, a, b, id2, &m);
                sender_payloads.push((s2_last, payload.len() as u64, "/image"));
                let (_, rl) = rcv.add(t2 + image_delay(sn, j), a, b, id2, &m);
                r_last = Some(rl);
                rcv_last = rcv_last.max(rl);
            }
            truth.frags.insert(start, (s_first, r_last));
            start += count;
            j += 1;
        }
        if sn != LOST_IMAGE {
            truth.receiver_complete_ns = Some(rcv_last);
        }
        samples.push(truth);
    }
    for sn in 1..=DRIVE_SAMPLES {
        let src_ts = T0 + 7_000_000 + 40_000_000 * sn;
        let m = RtpsBuilder::new(VENDOR, PREFIX_A).info_ts(src_ts).data(EntityId::UNKNOWN, DRIVE_WRITER, sn, None, &[sn as u8; DRIVE_SIZE]).build();
        let id = next_ident();
        let t = src_ts + 30_000;
        let (_, s_last) = snd.add(t, a, b, id, &m);
        sender_payloads.push((s_last, DRIVE_SIZE as u64, "/drive"));
        let mut truth = SampleTruth {
            topic: "/drive",
            sn,
            source_ts_ns: src_ts,
            sender_first_ns: s_last,
            receiver_complete_ns: None,
            frags: BTreeMap::new(),
            payload_bytes: DRIVE_SIZE as u64,
        };
        if sn != LOST_DRIVE {
            let (_, rl) = rcv.add(t + drive_delay(sn), a, b, id, &m);
            truth.receiver_complete_ns = Some(rl);
        }
        samples.push(truth);
    }
    let sp = dir.join("sender.pcap");
    let rp = dir.join("receiver.pcap");
    write_pcap(&sp, &mut snd.frames);
    write_pcap(&rp, &mut rcv.frames);
    (
        sp,
        rp,
        Truth { image_writer: Guid::new(PREFIX_A, IMAGE_WRITER), drive_writer: Guid::new(PREFIX_A, DRIVE_WRITER), samples, sender_payloads },
    )
}
