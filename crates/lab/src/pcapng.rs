//! tcpdump writes classic pcap only; the lab keeps its captures as pcapng:
//! one section, one interface named after the host (`pc1/eth0`) with
//! nanosecond resolution (`if_tsresol` = 9), every packet as an Enhanced
//! Packet Block, and an Interface Statistics Block carrying tcpdump's
//! received / dropped-by-kernel counters. Optionally gzip-compressed.

use anyhow::{anyhow, bail, Context, Result};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct ConvertStats {
    pub packets: u64,
    pub bytes: u64,
    pub first_ts_ns: Option<u64>,
    pub last_ts_ns: Option<u64>,
    pub nanosecond_source: bool,
}

/// What goes into the interface description and statistics.
pub struct InterfaceInfo<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub received: Option<u64>,
    pub dropped: Option<u64>,
}

fn opt(out: &mut Vec<u8>, code: u16, value: &[u8]) {
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(value);
    while out.len() % 4 != 0 {
        out.push(0);
    }
}

fn block(w: &mut impl Write, kind: u32, body: &[u8]) -> Result<()> {
    let len = (12 + body.len()) as u32;
    w.write_all(&kind.to_le_bytes())?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(body)?;
    w.write_all(&len.to_le_bytes())?;
    Ok(())
}

fn ts_words(ns: u64) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&((ns >> 32) as u32).to_le_bytes());
    b[4..].copy_from_slice(&(ns as u32).to_le_bytes());
    b
}

/// Converts tcpdump's pcap `src` into pcapng `dst` (gzip when `gzip`).
pub fn pcap_to_pcapng(src: &Path, dst: &Path, info: &InterfaceInfo, gzip: bool) -> Result<ConvertStats> {
    let f = File::open(src).with_context(|| format!("cannot open {}", src.display()))?;
    let mut r = BufReader::with_capacity(1 << 20, f);
    let out = File::create(dst).with_context(|| format!("cannot create {}", dst.display()))?;
    let out = BufWriter::with_capacity(1 << 20, out);
    if gzip {
        let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::best());
        let st = convert(&mut r, &mut gz, info)?;
        gz.finish()?.flush()?;
        Ok(st)
    } else {
        let mut out = out;
        let st = convert(&mut r, &mut out, info)?;
        out.flush()?;
        Ok(st)
    }
}

fn convert(r: &mut impl Read, w: &mut impl Write, info: &InterfaceInfo) -> Result<ConvertStats> {
    let mut hdr = [0u8; 24];
    r.read_exact(&mut hdr).map_err(|_| anyhow!("not a pcap file (too short)"))?;
    let magic = u32::from_le_bytes(hdr[0..4].try_into().unwrap());
    let (swap, nano) = match magic {
        0xa1b2c3d4 => (false, false),
        0xa1b23c4d => (false, true),
        0xd4c3b2a1 => (true, false),
        0x4d3cb2a1 => (true, true),
        _ => bail!("not a pcap file (magic {magic:#x})"),
    };
    let rd = |b: &[u8]| {
        let v = u32::from_le_bytes(b.try_into().unwrap());
        if swap {
            v.swap_bytes()
        } else {
            v
        }
    };
    let snaplen = rd(&hdr[16..20]);
    let linktype = rd(&hdr[20..24]);

    // Section Header Block
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1A2B3C4Du32.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    opt(&mut shb, 4, format!("ddscope lab {}", env!("CARGO_PKG_VERSION")).as_bytes()); // shb_userappl
    opt(&mut shb, 0, &[]);
    block(w, 0x0A0D0D0A, &shb)?;

    // Interface Description Block
    let mut idb = Vec::new();
    idb.extend_from_slice(&(linktype as u16).to_le_bytes());
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&snaplen.to_le_bytes());
    opt(&mut idb, 2, info.name.as_bytes()); // if_name
    opt(&mut idb, 3, info.description.as_bytes()); // if_description
    opt(&mut idb, 9, &[9]); // if_tsresol: 10^-9 s
    opt(&mut idb, 0, &[]);
    block(w, 1, &idb)?;

    let mut st = ConvertStats { nanosecond_source: nano, ..Default::default() };
    let mut rec = [0u8; 16];
    let mut data = vec![0u8; 1 << 16];
    let mut epb = Vec::with_capacity(1 << 16);
    loop {
        match r.read_exact(&mut rec) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e.into()),
        }
        let sec = rd(&rec[0..4]) as u64;
        let frac = rd(&rec[4..8]) as u64;
        let caplen = rd(&rec[8..12]) as usize;
        let origlen = rd(&rec[12..16]);
        if caplen > 16 * 1024 * 1024 {
            bail!("corrupt pcap record ({caplen} bytes)");
        }
        if data.len() < caplen {
            data.resize(caplen, 0);
        }
        match r.read_exact(&mut data[..caplen]) {
            Ok(()) => {}
            // tcpdump killed mid-write leaves a truncated last record: drop it
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e.into()),
        }
        let ts = sec * 1_000_000_000 + if nano { frac } else { frac * 1000 };
        epb.clear();
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&ts_words(ts));
        epb.extend_from_slice(&(caplen as u32).to_le_bytes());
        epb.extend_from_slice(&origlen.to_le_bytes());
        epb.extend_from_slice(&data[..caplen]);
        while epb.len() % 4 != 0 {
            epb.push(0);
        }
        block(w, 6, &epb)?;
        st.packets += 1;
        st.bytes += caplen as u64;
        st.first_ts_ns.get_or_insert(ts);
        st.last_ts_ns = Some(ts);
    }

    // Interface Statistics Block with the capture's counters
    let mut isb = Vec::new();
    isb.extend_from_slice(&0u32.to_le_bytes());
    isb.extend_from_slice(&ts_words(st.last_ts_ns.unwrap_or(0)));
    if let Some(t) = st.first_ts_ns {
        opt(&mut isb, 2, &ts_words(t)); // isb_starttime
    }
    if let Some(t) = st.last_ts_ns {
        opt(&mut isb, 3, &ts_words(t)); // isb_endtime
    }
    if let Some(n) = info.received {
        opt(&mut isb, 4, &n.to_le_bytes()); // isb_ifrecv
    }
    if let Some(n) = info.dropped {
        opt(&mut isb, 5, &n.to_le_bytes()); // isb_ifdrop
    }
    opt(&mut isb, 0, &[]);
    block(w, 5, &isb)?;
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pcap_ns(packets: &[(u64, &[u8])]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&0xa1b23c4du32.to_le_bytes());
        v.extend_from_slice(&2u16.to_le_bytes());
        v.extend_from_slice(&4u16.to_le_bytes());
        v.extend_from_slice(&[0; 8]);
        v.extend_from_slice(&262144u32.to_le_bytes());
        v.extend_from_slice(&1u32.to_le_bytes());
        for (ts, d) in packets {
            v.extend_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
            v.extend_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
            v.extend_from_slice(&(d.len() as u32).to_le_bytes());
            v.extend_from_slice(&(d.len() as u32).to_le_bytes());
            v.extend_from_slice(d);
        }
        v
    }

    #[test]
    fn converts_with_ns_timestamps_and_counters() {
        let ts = 1_795_325_588_764_282_589u64;
        let src = pcap_ns(&[(ts, &[1, 2, 3]), (ts + 7, &[4; 60])]);
        let mut out = Vec::new();
        let info = InterfaceInfo { name: "pc1/eth0", description: "d", received: Some(2), dropped: Some(0) };
        let st = convert(&mut &src[..], &mut out, &info).unwrap();
        assert_eq!(st.packets, 2);
        assert_eq!(st.first_ts_ns, Some(ts));
        assert_eq!(st.last_ts_ns, Some(ts + 7));
        // walk the blocks: SHB, IDB, EPB, EPB, ISB; every block length repeated at its end
        let mut off = 0;
        let mut kinds = vec![];
        while off < out.len() {
            let kind = u32::from_le_bytes(out[off..off + 4].try_into().unwrap());
            let len = u32::from_le_bytes(out[off + 4..off + 8].try_into().unwrap()) as usize;
            assert_eq!(len % 4, 0);
            assert_eq!(u32::from_le_bytes(out[off + len - 4..off + len].try_into().unwrap()) as usize, len);
            if kind == 6 {
                let hi = u32::from_le_bytes(out[off + 12..off + 16].try_into().unwrap()) as u64;
                let lo = u32::from_le_bytes(out[off + 16..off + 20].try_into().unwrap()) as u64;
                assert!(hi << 32 | lo == ts || hi << 32 | lo == ts + 7);
            }
            kinds.push(kind);
            off += len;
        }
        assert_eq!(kinds, vec![0x0A0D0D0A, 1, 6, 6, 5]);
        // a truncated last record is dropped, not an error
        let mut cut = src.clone();
        cut.truncate(src.len() - 10);
        let st = convert(&mut &cut[..], &mut Vec::new(), &info).unwrap();
        assert_eq!(st.packets, 1);
        assert!(convert(&mut &b"nonsense-nonsense-nonsense"[..], &mut Vec::new(), &info).is_err());
    }
}
