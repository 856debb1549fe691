//! Writes synthetic RTPS captures.
//!
//!   synth_capture features OUT.pcapng
//!       every submessage kind, both byte orders, INFO_SRC/INFO_DST, SEDP over
//!       DATA_FRAG, dispose, VLAN PCP, IPv4 and IPv6 fragments, non-RTPS UDP
//!   synth_capture seeds DIR
//!       seed corpora for the fuzz targets (DIR/decode_frames, DIR/read_capture,
//!       DIR/wire_roundtrip)
//!   synth_capture bench OUT.pcapng BYTES [small|large|mixed]
//!       a large capture for throughput benchmarks: `small` = 36-byte samples
//!       with HEARTBEAT/ACKNACK traffic (many small packets), `large` = 2.76 MB
//!       images as 64 KB DATA_FRAG datagrams fragmented at 1500 bytes,
//!       `mixed` = both interleaved.

use ddscope_testkit::{self as testkit, feature, FrameOptions, InterfaceOptions, PcapngWriter, RtpsBuilder};
use ddscope_wire::link::{self, LinkType};
use ddscope_wire::{ip, rtps, udp, EntityId, Guid};
use std::fs::File;
use std::io::BufWriter;
use std::net::SocketAddr;

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: synth_capture features OUT | synth_capture seeds DIR | synth_capture bench OUT BYTES [small|large|mixed]";
    let (Some(mode), Some(out)) = (args.get(1), args.get(2)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    if mode == "seeds" {
        return seeds(std::path::Path::new(out));
    }
    let file = BufWriter::with_capacity(1 << 20, File::create(out)?);
    let mut w = PcapngWriter::new(file, &InterfaceOptions { linktype: 1, ..Default::default() })?;
    match mode.as_str() {
        "features" => {
            for (ts, f) in testkit::feature_frames() {
                w.packet(ts, &f, f.len() as u32)?;
            }
        }
        "bench" => {
            let bytes: u64 = args.get(3).and_then(|b| b.parse().ok()).unwrap_or_else(|| {
                eprintln!("{usage}");
                std::process::exit(2)
            });
            let mix = args.get(4).map(String::as_str).unwrap_or("mixed");
            bench(&mut w, bytes, mix)?;
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
    Ok(())
}

fn bench(w: &mut PcapngWriter<BufWriter<File>>, limit: u64, mix: &str) -> std::io::Result<()> {
    let a: SocketAddr = "10.0.0.1:7410".parse().unwrap();
    let b: SocketAddr = "10.0.0.2:7411".parse().unwrap();
    let opts = FrameOptions { mtu: 1500, vlan: Some((5, 30)) };
    let pa = feature::PREFIX_A;
    let pb = feature::PREFIX_B;
    let drive = feature::DRIVE_WRITER;
    let image = feature::IMAGE_WRITER;
    let reader = feature::IMAGE_READER;
    let mut written = 0u64;
    let mut ts = feature::T0;
    let mut ident = 0u32;
    let mut emit = |w: &mut PcapngWriter<BufWriter<File>>, s: SocketAddr, d: SocketAddr, payload: &[u8], ts: &mut i64, written: &mut u64| -> std::io::Result<()> {
        ident = ident.wrapping_add(1);
        for f in testkit::udp_frames(s, d, ident, payload, &opts) {
            w.packet(*ts, &f, f.len() as u32)?;
            *ts += 2_000;
            *written += f.len() as u64 + 32;
        }
        Ok(())
    };
    // Discovery first, so that the traffic is named.
    for (p, v, n) in [(pa, feature::VENDOR_A, "pc1"), (pb, feature::VENDOR_B, "pc2")] {
        let m = RtpsBuilder::new(v, p)
            .data(EntityId::SPDP_PARTICIPANT_READER, EntityId::SPDP_PARTICIPANT_WRITER, 1, None, &testkit::spdp_participant(p, v, n))
            .build();
        emit(w, a, b, &m, &mut ts, &mut written)?;
    }
    for (e, t, ty) in [(image, "rt/image", "sensor_msgs::msg::dds_::Image_"), (drive, "rt/drive", "autoware_auto_vehicle_msgs::msg::dds_::VelocityReport_")] {
        let m = RtpsBuilder::new(feature::VENDOR_A, pa)
            .data(EntityId::SEDP_PUBLICATIONS_READER, EntityId::SEDP_PUBLICATIONS_WRITER, 1, None, &testkit::sedp_endpoint(Guid::new(pa, e), t, ty, true))
            .build();
        emit(w, a, b, &m, &mut ts, &mut written)?;
    }
    let image_size = 2_764_854u32; // 1280x720 bgr8 Image message as CDR
    let frag = 65_000u16;
    let payload = vec![0x33u8; frag as usize];
    let mut sn_small = 0i64;
    let mut sn_image = 0i64;
    let mut round = 0u64;
    while written < limit {
        round += 1;
        if mix == "small" || mix == "mixed" {
            for _ in 0..50 {
                sn_small += 1;
                let m = RtpsBuilder::new(feature::VENDOR_A, pa)
                    .info_ts(ts)
                    .data(EntityId::UNKNOWN, drive, sn_small, None, &[0u8; 36])
                    .heartbeat(EntityId::UNKNOWN, drive, 1, sn_small, sn_small as i32, false)
                    .build();
                emit(w, a, b, &m, &mut ts, &mut written)?;
                let m = RtpsBuilder::new(feature::VENDOR_B, pb)
                    .info_dst(pa)
                    .acknack(reader, drive, sn_small + 1, &[], sn_small as i32)
                    .build();
                emit(w, b, a, &m, &mut ts, &mut written)?;
            }
        }
        if mix == "large" || (mix == "mixed" && round % 10 == 0) {
            sn_image += 1;
            let n = image_size.div_ceil(frag as u32);
            for i in 1..=n {
                let len = if i == n { (image_size - (n - 1) * frag as u32) as usize } else { frag as usize };
                let m = RtpsBuilder::new(feature::VENDOR_A, pa)
                    .info_ts(ts)
                    .data_frag(EntityId::UNKNOWN, image, sn_image, i, 1, frag, image_size, &payload[..len])
                    .build();
                emit(w, a, b, &m, &mut ts, &mut written)?;
            }
        }
    }
    Ok(())
}

/// Seed corpora: every feature frame alone and the whole sequence, in the
/// decode_frames input format ([link u8][len u16 LE][bytes]), the feature
/// capture as a pcapng file for read_capture, and the RTPS message of every
/// unfragmented feature datagram for wire_roundtrip.
fn seeds(dir: &std::path::Path) -> std::io::Result<()> {
    let frames = testkit::feature_frames();
    let df = dir.join("decode_frames");
    let rc = dir.join("read_capture");
    std::fs::create_dir_all(&df)?;
    std::fs::create_dir_all(&rc)?;
    let enc = |f: &[u8]| {
        let mut v = vec![0u8];
        v.extend_from_slice(&(f.len() as u16).to_le_bytes());
        v.extend_from_slice(f);
        v
    };
    let mut all = vec![];
    for (i, (_, f)) in frames.iter().enumerate() {
        std::fs::write(df.join(format!("frame-{i:03}")), enc(f))?;
        all.extend(enc(f));
    }
    std::fs::write(df.join("all-frames"), all)?;
    let mut w = PcapngWriter::new(Vec::new(), &InterfaceOptions { linktype: 1, ..Default::default() })?;
    for (ts, f) in &frames {
        w.packet(*ts, f, f.len() as u32)?;
    }
    std::fs::write(rc.join("features.pcapng"), w.into_inner())?;
    let wr = dir.join("wire_roundtrip");
    std::fs::create_dir_all(&wr)?;
    for (i, (_, f)) in frames.iter().enumerate() {
        if let Some(rtps) = rtps_message(f) {
            std::fs::write(wr.join(format!("message-{i:03}")), rtps)?;
        }
    }
    Ok(())
}

/// The RTPS message of an Ethernet frame holding a whole UDP datagram.
fn rtps_message(frame: &[u8]) -> Option<&[u8]> {
    let net = link::parse(LinkType::Ethernet, frame).ok()?;
    let ip = match net.ethertype {
        link::ETHERTYPE_IPV4 => ip::parse_ipv4(net.payload).ok()?,
        link::ETHERTYPE_IPV6 => ip::parse_ipv6(net.payload).ok()?,
        _ => return None,
    };
    if ip.is_fragment {
        return None;
    }
    let udp = udp::parse(ip.payload).ok()?;
    rtps::is_rtps(udp.payload).then_some(udp.payload)
}
