//! Reading capture files: pcap (µs and ns), pcapng (several interfaces, any
//! `if_tsresol`, `if_tsoffset`), optionally gzip-compressed. Packets are
//! streamed to a callback with constant memory; a corrupt or truncated tail
//! ends the stream with a reported error while everything before it counts.

use ddscope_wire::link::LinkType;
use pcap_parser::pcapng::Block;
use pcap_parser::{PcapBlockOwned, PcapError};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One captured frame.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// 1-based frame number within the capture, as tshark numbers frames.
    pub frame: u64,
    /// Capture time, nanoseconds since the Unix epoch.
    pub ts_ns: i64,
    /// pcapng interface index (0 for pcap).
    pub interface: u32,
    pub link: LinkType,
    pub data: &'a [u8],
    /// Length of the frame on the wire (may exceed `data.len()` with a snap length).
    pub orig_len: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("cannot open {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("{path}: not a pcap or pcapng file ({detail})")]
    Format { path: PathBuf, detail: String },
}

impl CaptureError {
    /// Exit code convention: 2 for files that cannot be read at all.
    pub fn exit_code(&self) -> i32 {
        2
    }
}

/// One capture interface (pcapng IDB, or the single link of a pcap file).
#[derive(Debug, Clone)]
pub struct InterfaceInfo {
    pub link: LinkType,
    pub name: Option<String>,
    /// Timestamp units per second.
    pub units_per_sec: u64,
    /// Seconds added to every timestamp (pcapng `if_tsoffset`).
    pub offset_sec: i64,
    pub snaplen: u32,
}

/// What reading a capture found besides the packets.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CaptureSummary {
    pub path: String,
    pub format: &'static str,
    pub compressed: bool,
    pub frames: u64,
    pub bytes: u64,
    /// Frames captured shorter than on the wire (snap length).
    pub snapped_frames: u64,
    /// Frames skipped because they name an interface the file never described.
    pub frames_unknown_interface: u64,
    /// Kernel drops reported by pcapng interface statistics blocks (isb_ifdrop), summed over interfaces.
    pub kernel_drops: Option<u64>,
    pub interfaces: usize,
    pub first_ts_ns: Option<i64>,
    pub last_ts_ns: Option<i64>,
    /// Set when the file ends in a truncated or corrupt block: reading stopped there.
    pub error: Option<String>,
}

/// A `Read` adapter that counts bytes read from the underlying file (for progress).
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

const INITIAL_BUFFER: usize = 1 << 20;
const MAX_BUFFER: usize = 64 << 20;
const ISB_IFDROP: u16 = 5;
const IDB_NAME: u16 = 2;

fn units_per_sec(tsresol: u8) -> Option<u64> {
    if tsresol & 0x80 == 0 {
        (tsresol <= 19).then(|| 10u64.pow(tsresol as u32))
    } else {
        let e = tsresol & 0x7f;
        (e <= 63).then(|| 1u64 << e)
    }
}

fn to_ns(ticks: u64, units_per_sec: u64, offset_sec: i64) -> i64 {
    let ns = if units_per_sec == 1_000_000_000 {
        ticks as i128
    } else {
        (ticks as i128 * 1_000_000_000) / units_per_sec as i128
    };
    (ns + offset_sec as i128 * 1_000_000_000) as i64
}

/// Reads `path` and calls `on_packet` for every frame, in file order.
/// `progress`, when given, is updated with the number of file bytes read.
pub fn read_capture(
    path: &Path,
    progress: Option<Arc<AtomicU64>>,
    mut on_packet: impl FnMut(&Packet<'_>),
) -> Result<CaptureSummary, CaptureError> {
    read_capture_while(path, progress, |p| {
        on_packet(p);
        true
    })
}

/// Like [`read_capture`], but stops as soon as `on_packet` returns false.
pub fn read_capture_while(
    path: &Path,
    progress: Option<Arc<AtomicU64>>,
    on_packet: impl FnMut(&Packet<'_>) -> bool,
) -> Result<CaptureSummary, CaptureError> {
    let open_err = |source| CaptureError::Open { path: path.to_path_buf(), source };
    let mut file = File::open(path).map_err(open_err)?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).map_err(open_err)?;
    drop(file);
    let file = File::open(path).map_err(open_err)?;
    let counted = Counting { inner: file, count: progress.unwrap_or_default() };
    let compressed = n == 2 && magic == [0x1f, 0x8b];
    let source: Box<dyn Read> = if compressed {
        Box::new(flate2::read::MultiGzDecoder::new(io::BufReader::with_capacity(1 << 16, counted)))
    } else {
        Box::new(counted)
    };
    let mut summary = read_capture_from(source, path, on_packet)?;
    summary.compressed = compressed;
    Ok(summary)
}

/// Block-by-block state of a capture being read.
struct Blocks {
    summary: CaptureSummary,
    interfaces: Vec<InterfaceInfo>,
    legacy_link: LinkType,
    legacy_units: u64,
    drops_by_if: Vec<Option<u64>>,
}

impl Blocks {
    fn new(path: &Path) -> Self {
        Blocks {
            summary: CaptureSummary { path: path.display().to_string(), ..Default::default() },
            interfaces: Vec::new(),
            legacy_link: LinkType::Other(u32::MAX),
            legacy_units: 1_000_000,
            drops_by_if: Vec::new(),
        }
    }

    /// Handles one block; false when `on_packet` asked to stop.
    fn block(&mut self, block: PcapBlockOwned<'_>, on_packet: &mut impl FnMut(&Packet<'_>) -> bool) -> bool {
        let summary = &mut self.summary;
        let mut deliver = |frame_data: &[u8], ts_ns: i64, interface: u32, link: LinkType, orig_len: u32| {
            summary.frames += 1;
            summary.bytes += frame_data.len() as u64;
            if (orig_len as usize) > frame_data.len() {
                summary.snapped_frames += 1;
            }
            summary.first_ts_ns.get_or_insert(ts_ns);
            summary.last_ts_ns = Some(ts_ns);
            on_packet(&Packet { frame: summary.frames, ts_ns, interface, link, data: frame_data, orig_len })
        };
        match block {
            PcapBlockOwned::LegacyHeader(h) => {
                self.summary.format = "pcap";
                self.legacy_link = LinkType::from_linktype(h.network.0 as u32);
                self.legacy_units = if h.is_nanosecond_precision() { 1_000_000_000 } else { 1_000_000 };
            }
            PcapBlockOwned::Legacy(b) => {
                let ts = to_ns(b.ts_sec as u64 * self.legacy_units + b.ts_usec as u64, self.legacy_units, 0);
                let caplen = (b.caplen as usize).min(b.data.len());
                return deliver(&b.data[..caplen], ts, 0, self.legacy_link, b.origlen);
            }
            PcapBlockOwned::NG(Block::SectionHeader(_)) => {
                self.summary.format = "pcapng";
                // Interface ids are per section.
                self.interfaces.clear();
            }
            PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                let name = idb
                    .options
                    .iter()
                    .find(|o| o.code.0 == IDB_NAME)
                    .map(|o| String::from_utf8_lossy(&o.value).trim_end_matches('\0').to_string());
                self.interfaces.push(InterfaceInfo {
                    link: LinkType::from_linktype(idb.linktype.0 as u32),
                    name,
                    units_per_sec: units_per_sec(idb.if_tsresol).unwrap_or(1_000_000),
                    offset_sec: idb.if_tsoffset,
                    snaplen: idb.snaplen,
                });
                self.summary.interfaces += 1;
                self.drops_by_if.push(None);
            }
            PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => match self.interfaces.get(epb.if_id as usize) {
                Some(ifc) => {
                    let ticks = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
                    let ts = to_ns(ticks, ifc.units_per_sec, ifc.offset_sec);
                    let caplen = (epb.caplen as usize).min(epb.data.len());
                    let link = ifc.link;
                    return deliver(&epb.data[..caplen], ts, epb.if_id, link, epb.origlen);
                }
                None => self.summary.frames_unknown_interface += 1,
            },
            PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                // No timestamp in a simple packet block; it belongs to interface 0.
                if let Some(ifc) = self.interfaces.first() {
                    let snap = if ifc.snaplen == 0 { usize::MAX } else { ifc.snaplen as usize };
                    let caplen = (spb.origlen as usize).min(snap).min(spb.data.len());
                    let link = ifc.link;
                    return deliver(&spb.data[..caplen], 0, 0, link, spb.origlen);
                }
                self.summary.frames_unknown_interface += 1;
            }
            PcapBlockOwned::NG(Block::InterfaceStatistics(isb)) => {
                if let Some(o) = isb.options.iter().find(|o| o.code.0 == ISB_IFDROP) {
                    if o.value.len() >= 8 {
                        let v = u64::from_le_bytes(o.value[..8].try_into().expect("8 bytes"));
                        if let Some(slot) = self.drops_by_if.get_mut(isb.if_id as usize) {
                            // Statistics blocks are cumulative: keep the latest per interface.
                            *slot = Some(v);
                        }
                    }
                }
            }
            PcapBlockOwned::NG(_) => {}
        }
        true
    }

    fn finish(mut self) -> CaptureSummary {
        if self.drops_by_if.iter().any(Option::is_some) {
            self.summary.kernel_drops = Some(self.drops_by_if.iter().flatten().sum());
        }
        if self.summary.format.is_empty() {
            self.summary.format = "pcap";
        }
        self.summary
    }
}

/// Reads a pcap or pcapng stream (already decompressed); `path` names it in
/// errors; stops early when `on_packet` returns false.
pub fn read_capture_from(
    source: Box<dyn Read + '_>,
    path: &Path,
    mut on_packet: impl FnMut(&Packet<'_>) -> bool,
) -> Result<CaptureSummary, CaptureError> {
    let mut reader = match pcap_parser::create_reader(INITIAL_BUFFER, source) {
        Ok(r) => r,
        Err(PcapError::Eof) => {
            return Err(CaptureError::Format { path: path.to_path_buf(), detail: "file is empty".into() })
        }
        Err(e) => return Err(CaptureError::Format { path: path.to_path_buf(), detail: e.to_string() }),
    };
    let mut st = Blocks::new(path);
    let mut buffer_size = INITIAL_BUFFER;
    loop {
        match reader.next() {
            Ok((offset, block)) => {
                let go_on = st.block(block, &mut on_packet);
                reader.consume(offset);
                if !go_on {
                    break;
                }
            }
            Err(PcapError::Eof) => break,
            Err(PcapError::Incomplete(_)) => {
                if reader.refill().is_err() {
                    st.summary.error = Some(format!("read error after frame {}", st.summary.frames));
                    break;
                }
            }
            Err(PcapError::BufferTooSmall) => {
                if buffer_size >= MAX_BUFFER || !reader.grow(buffer_size * 2) {
                    st.summary.error =
                        Some(format!("block after frame {} is larger than {} MiB", st.summary.frames, MAX_BUFFER >> 20));
                    break;
                }
                buffer_size *= 2;
                if reader.refill().is_err() {
                    st.summary.error = Some(format!("read error after frame {}", st.summary.frames));
                    break;
                }
            }
            Err(PcapError::UnexpectedEof) => {
                st.summary.error = Some(format!("file is truncated: the block after frame {} ends early", st.summary.frames));
                break;
            }
            Err(e) => {
                st.summary.error = Some(format!("corrupt block after frame {}: {e}", st.summary.frames));
                break;
            }
        }
    }
    Ok(st.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn pcap_file(nanos: bool, frames: &[(u32, u32, &[u8])]) -> Vec<u8> {
        let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        let mut f = magic.to_le_bytes().to_vec();
        f.extend_from_slice(&2u16.to_le_bytes());
        f.extend_from_slice(&4u16.to_le_bytes());
        f.extend_from_slice(&[0; 8]);
        f.extend_from_slice(&65535u32.to_le_bytes());
        f.extend_from_slice(&1u32.to_le_bytes());
        for (s, sub, d) in frames {
            f.extend_from_slice(&s.to_le_bytes());
            f.extend_from_slice(&sub.to_le_bytes());
            f.extend_from_slice(&(d.len() as u32).to_le_bytes());
            f.extend_from_slice(&(d.len() as u32).to_le_bytes());
            f.extend_from_slice(d);
        }
        f
    }

    fn collect(bytes: &[u8]) -> (Vec<(u64, i64, usize)>, CaptureSummary) {
        let dir = std::env::temp_dir().join(format!("ddscope-cap-{}-{}", std::process::id(), rand_suffix()));
        std::fs::write(&dir, bytes).unwrap();
        let mut out = vec![];
        let s = read_capture(&dir, None, |p| out.push((p.frame, p.ts_ns, p.data.len()))).unwrap();
        std::fs::remove_file(&dir).ok();
        (out, s)
    }

    fn rand_suffix() -> u64 {
        use std::sync::atomic::AtomicU64;
        static N: AtomicU64 = AtomicU64::new(0);
        N.fetch_add(1, Ordering::Relaxed)
    }

    #[test]
    fn pcap_micro_and_nano() {
        let (p, s) = collect(&pcap_file(false, &[(10, 5, &[1, 2, 3]), (11, 0, &[4])]));
        assert_eq!(p, vec![(1, 10_000_005_000, 3), (2, 11_000_000_000, 1)]);
        assert_eq!(s.format, "pcap");
        assert!(s.error.is_none());
        let (p, _) = collect(&pcap_file(true, &[(10, 5, &[1])]));
        assert_eq!(p[0].1, 10_000_000_005);
    }

    #[test]
    fn truncated_tail_is_reported_and_prefix_kept() {
        let f = pcap_file(false, &[(1, 0, &[1, 2, 3, 4]), (2, 0, &[5, 6, 7, 8])]);
        let (p, s) = collect(&f[..f.len() - 2]);
        assert_eq!(p.len(), 1);
        assert!(s.error.unwrap().contains("after frame 1"));
    }

    #[test]
    fn gzip_is_transparent() {
        let raw = pcap_file(true, &[(3, 7, &[9; 100])]);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&raw).unwrap();
        let (p, s) = collect(&gz.finish().unwrap());
        assert_eq!(p, vec![(1, 3_000_000_007, 100)]);
        assert!(s.compressed);
    }

    #[test]
    fn garbage_is_a_format_error() {
        let path = std::env::temp_dir().join(format!("ddscope-garbage-{}", std::process::id()));
        std::fs::write(&path, b"this is not a capture file at all").unwrap();
        let e = read_capture(&path, None, |_| {}).unwrap_err();
        std::fs::remove_file(&path).ok();
        assert!(matches!(e, CaptureError::Format { .. }), "{e}");
        assert!(matches!(read_capture(Path::new("/nonexistent/x.pcap"), None, |_| {}), Err(CaptureError::Open { .. })));
    }

    #[test]
    fn tsresol_units() {
        assert_eq!(units_per_sec(6), Some(1_000_000));
        assert_eq!(units_per_sec(9), Some(1_000_000_000));
        assert_eq!(units_per_sec(0x80 | 10), Some(1024));
        assert_eq!(to_ns(1536, 1024, 0), 1_500_000_000);
        assert_eq!(to_ns(5, 1_000_000_000, 37), 37_000_000_005);
    }
}
