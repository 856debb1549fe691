//! tcpdump writes classic pcap only; the lab keeps its captures as pcapng:
//! one section, one interface named after the host (`pc1/eth0`) with
//! nanosecond resolution, every packet as an Enhanced Packet Block, and an
//! Interface Statistics Block carrying tcpdump's received / dropped-by-kernel
//! counters. Optionally gzip-compressed. Reading and writing are ddscope's
//! one capture reader and writer (crate `ddscope-pcapfile`).

use anyhow::{Context, Result};
use ddscope_pcapfile::{CaptureReader, InterfaceOptions, PcapngWriter};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct ConvertStats {
    pub packets: u64,
    pub bytes: u64,
    pub first_ts_ns: Option<i64>,
    pub last_ts_ns: Option<i64>,
    pub nanosecond_source: bool,
    /// Why reading stopped early (tcpdump stopped mid-write leaves a cut last record).
    pub read_error: Option<String>,
}

/// What goes into the interface description and statistics.
pub struct InterfaceInfo<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub received: Option<u64>,
    pub dropped: Option<u64>,
}

/// Converts tcpdump's pcap `src` into pcapng `dst` (gzip when `gzip`).
pub fn pcap_to_pcapng(src: &Path, dst: &Path, info: &InterfaceInfo, gzip: bool) -> Result<ConvertStats> {
    pcap_to_pcapng_at(src, dst, info, gzip, &|t| t)
}

/// [`pcap_to_pcapng`] with every time stamp read through `clock` (a host whose clock the scenario
/// warps: crate::clockwarp), the statistics block's too.
pub fn pcap_to_pcapng_at(src: &Path, dst: &Path, info: &InterfaceInfo, gzip: bool, clock: &dyn Fn(i64) -> i64) -> Result<ConvertStats> {
    let out = File::create(dst).with_context(|| format!("cannot create {}", dst.display()))?;
    let out = BufWriter::with_capacity(1 << 20, out);
    if gzip {
        let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::best());
        let st = convert(src, &mut gz, info, clock)?;
        gz.finish()?.flush()?;
        Ok(st)
    } else {
        let mut out = out;
        let st = convert(src, &mut out, info, clock)?;
        out.flush()?;
        Ok(st)
    }
}

fn convert(src: &Path, w: &mut impl Write, info: &InterfaceInfo, clock: &dyn Fn(i64) -> i64) -> Result<ConvertStats> {
    let mut r = CaptureReader::open(src, None)?;
    let mut st = ConvertStats::default();
    let mut writer: Option<PcapngWriter<&mut dyn Write>> = None;
    let mut first_error: Option<std::io::Error> = None;
    let mut w: Option<&mut dyn Write> = Some(w);
    loop {
        let more = r.read(1024, &mut |p| {
            if writer.is_none() {
                let iface = InterfaceOptions {
                    linktype: p.link.linktype() as u16,
                    snaplen: 0,
                    name: Some(info.name),
                    description: Some(info.description),
                };
                match w.take().map(|w| PcapngWriter::new(w, &iface)) {
                    Some(Ok(x)) => writer = Some(x),
                    Some(Err(e)) => {
                        first_error.get_or_insert(e);
                        return;
                    }
                    None => return,
                }
            }
            if let Some(x) = writer.as_mut() {
                if let Err(e) = x.packet(clock(p.ts_ns), p.data, p.orig_len) {
                    first_error.get_or_insert(e);
                }
            }
        });
        if let Some(e) = first_error.take() {
            return Err(e).with_context(|| format!("writing the pcapng of {}", src.display()));
        }
        if !more {
            break;
        }
    }
    st.nanosecond_source = r.interfaces().first().is_some_and(|i| i.units_per_sec == 1_000_000_000);
    let summary = r.into_summary();
    st.packets = summary.frames;
    st.bytes = summary.bytes;
    st.first_ts_ns = summary.first_ts_ns;
    st.last_ts_ns = summary.last_ts_ns;
    st.read_error = summary.error;
    let mut writer = match (writer, w) {
        (Some(x), _) => x,
        // No packet at all: still a valid pcapng with its interface and statistics.
        (None, Some(w)) => PcapngWriter::new(w, &InterfaceOptions { linktype: 1, snaplen: 0, name: Some(info.name), description: Some(info.description) })?,
        (None, None) => return Ok(st),
    };
    let span = st.first_ts_ns.zip(st.last_ts_ns).map(|(a, b)| (clock(a), clock(b)));
    writer.statistics(st.last_ts_ns.map(clock).unwrap_or(0), info.received, info.dropped, span)?;
    writer.flush()?;
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
        let dir = std::env::temp_dir().join(format!("ddscope-lab-pcapng-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (src, dst) = (dir.join("in.pcap"), dir.join("out.pcapng"));
        let ts = 1_795_325_588_764_282_589i64;
        let raw = pcap_ns(&[(ts as u64, &[1, 2, 3]), (ts as u64 + 7, &[4; 60])]);
        std::fs::write(&src, &raw).unwrap();
        let info = InterfaceInfo { name: "pc1/eth0", description: "d", received: Some(2), dropped: Some(0) };
        let st = pcap_to_pcapng(&src, &dst, &info, false).unwrap();
        assert_eq!((st.packets, st.first_ts_ns, st.last_ts_ns), (2, Some(ts), Some(ts + 7)));
        assert!(st.nanosecond_source && st.read_error.is_none());
        let mut seen = vec![];
        let summary = CaptureReader::read_all(&dst, |p| seen.push((p.ts_ns, p.data.len()))).unwrap();
        assert_eq!(seen, vec![(ts, 3), (ts + 7, 60)]);
        assert_eq!((summary.format, summary.kernel_drops), ("pcapng", Some(0)));
        // A cut last record (tcpdump stopped mid-write) is reported, the rest kept.
        std::fs::write(&src, &raw[..raw.len() - 10]).unwrap();
        let st = pcap_to_pcapng(&src, &dst, &info, true).unwrap();
        assert_eq!(st.packets, 1);
        assert!(st.read_error.unwrap().contains("truncated"));
        std::fs::write(&src, b"nonsense-nonsense-nonsense").unwrap();
        assert!(pcap_to_pcapng(&src, &dst, &info, false).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
