//! Reading pcap and pcapng, pulled frame batch by frame batch.
//!
//! The input is opened once and sniffed from a buffer (gzip, then pcap or
//! pcapng), so pipes, FIFOs and `-` (stdin) work like regular files. A corrupt
//! or truncated tail ends the stream with a short reported error while
//! everything before it counts.

use ddscope_wire::link::LinkType;
use pcap_parser::pcapng::Block;
use pcap_parser::traits::PcapReaderIterator;
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
    /// Interfaces described (and kept).
    pub interfaces: usize,
    /// Interface description blocks not kept: over [`MAX_INTERFACES`] or
    /// [`MAX_INTERFACE_BYTES`] in one section.
    pub interfaces_skipped: u64,
    /// Frames skipped because their interface was one of those not kept.
    pub frames_skipped_interface: u64,
    /// Interface names longer than [`MAX_INTERFACE_NAME_BYTES`], kept cut with a marker.
    pub interface_names_truncated: u64,
    pub first_ts_ns: Option<i64>,
    pub last_ts_ns: Option<i64>,
    /// Set when the file ends in a truncated or corrupt block: reading stopped there.
    pub error: Option<String>,
}

impl CaptureSummary {
    /// Frames and blocks of the file that were not handed on or not kept
    /// whole (never silent): `None` when everything was.
    pub fn skipped_line(&self) -> Option<String> {
        let mut parts = vec![];
        if self.frames_unknown_interface > 0 {
            parts.push(format!("{} packet blocks name an interface the file never described (skipped)", self.frames_unknown_interface));
        }
        if self.interfaces_skipped > 0 {
            parts.push(format!(
                "{} interface descriptions over the cap of {MAX_INTERFACES} interfaces or {} KiB per section skipped, with their {} packet blocks",
                self.interfaces_skipped,
                MAX_INTERFACE_BYTES >> 10,
                self.frames_skipped_interface
            ));
        }
        if self.interface_names_truncated > 0 {
            parts.push(format!("{} interface names over {MAX_INTERFACE_NAME_BYTES} bytes truncated", self.interface_names_truncated));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// The file's own problems in a few words (a corrupt or truncated end,
    /// frames or interfaces skipped), for lines that summarise decoding.
    pub fn problems(&self) -> Option<String> {
        let mut parts = vec![];
        if self.error.is_some() {
            parts.push("reading stopped at a corrupt or truncated block".to_string());
        }
        if let Some(l) = self.skipped_line() {
            parts.push(l);
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Interfaces kept per pcapng section; further interface description blocks
/// are counted and skipped, and so are the packets that name them (real
/// captures have a handful; 10^8 forged ones once took 7 GB).
pub const MAX_INTERFACES: usize = 4096;
/// Bytes the interfaces of one section may hold together (names included).
pub const MAX_INTERFACE_BYTES: usize = 1 << 20;
/// Longest interface name kept; longer ones are cut with a marker
/// (`…[truncated, N bytes]`) and counted.
pub const MAX_INTERFACE_NAME_BYTES: usize = 256;

/// `raw` cut to `max` bytes at a character boundary, with the marker of
/// `ddscope_core::names` (this crate sits below core).
fn cap_name(raw: &[u8], max: usize) -> (String, bool) {
    let text = String::from_utf8_lossy(raw);
    let text = text.trim_end_matches('\0');
    if text.len() <= max {
        return (text.to_string(), false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut cut = format!("{}…[truncated, {} bytes]", &text[..end], text.len());
    cut.shrink_to_fit();
    (cut, true)
}

impl InterfaceInfo {
    fn bytes(&self) -> usize {
        std::mem::size_of::<Self>() + std::mem::size_of::<Option<u64>>() + self.name.as_ref().map_or(0, String::capacity)
    }
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
/// Bytes read ahead before deciding what the input is: enough for any
/// section header, few enough not to wait long on a slow pipe.
const SNIFF: usize = 4096;
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
    (ns + offset_sec as i128 * 1_000_000_000).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Reads up to `SNIFF` bytes (fewer at end of input) so the format can be
/// told from the first bytes even when a pipe hands them over in pieces.
fn sniff(mut r: Box<dyn Read + Send>) -> io::Result<(Vec<u8>, Box<dyn Read + Send>)> {
    let mut head = vec![0u8; SNIFF];
    let mut n = 0;
    while n < SNIFF {
        match r.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    head.truncate(n);
    Ok((head, r))
}

/// A few bytes in hex, for messages about corrupt data (never the whole block).
fn hex_prefix(bytes: &[u8]) -> String {
    let shown: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let more = if bytes.len() > 8 { format!(" … ({} bytes)", bytes.len()) } else { String::new() };
    format!("{}{more}", shown.join(" "))
}

/// A short description of a parser error (pcap-parser's own Display prints
/// the raw bytes of the block, which can be megabytes).
fn describe(e: &PcapError<&[u8]>) -> String {
    match e {
        PcapError::Eof => "end of file".into(),
        PcapError::ReadError => "read error".into(),
        PcapError::Incomplete(n) => format!("incomplete block ({n} more bytes needed)"),
        PcapError::HeaderNotRecognized => "header not recognised".into(),
        PcapError::NomError(b, k) => format!("{k:?} in block starting {}", hex_prefix(b)),
        PcapError::OwnedNomError(b, k) => format!("{k:?} in block starting {}", hex_prefix(b)),
        PcapError::BufferTooSmall => "block larger than the read buffer".into(),
        PcapError::UnexpectedEof => "unexpected end of file".into(),
    }
}

/// Block-by-block state of a capture being read.
struct Blocks {
    summary: CaptureSummary,
    interfaces: Vec<InterfaceInfo>,
    legacy_link: LinkType,
    legacy_units: u64,
    drops_by_if: Vec<Option<u64>>,
    /// Interface description blocks of the current section (kept or not): ids
    /// below it that were not kept name a skipped interface, not an unknown one.
    described: u64,
    /// Bytes the current section's interfaces hold.
    interface_bytes: usize,
}

impl Blocks {
    fn new(path: &Path) -> Self {
        Blocks {
            summary: CaptureSummary { path: path.display().to_string(), ..Default::default() },
            interfaces: Vec::new(),
            legacy_link: LinkType::Other(u32::MAX),
            legacy_units: 1_000_000,
            drops_by_if: Vec::new(),
            described: 0,
            interface_bytes: 0,
        }
    }

    /// A packet block named an interface that is not in the table.
    fn no_interface(&mut self, if_id: u32) {
        if (if_id as u64) < self.described {
            self.summary.frames_skipped_interface += 1;
        } else {
            self.summary.frames_unknown_interface += 1;
        }
    }

    /// Handles one block; true when it was a frame handed to `on_packet`.
    fn block(&mut self, block: PcapBlockOwned<'_>, on_packet: &mut dyn FnMut(&Packet<'_>)) -> bool {
        let summary = &mut self.summary;
        let mut deliver = |frame_data: &[u8], ts_ns: i64, interface: u32, link: LinkType, orig_len: u32| {
            summary.frames += 1;
            summary.bytes += frame_data.len() as u64;
            if (orig_len as usize) > frame_data.len() {
                summary.snapped_frames += 1;
            }
            summary.first_ts_ns.get_or_insert(ts_ns);
            summary.last_ts_ns = Some(ts_ns);
            on_packet(&Packet { frame: summary.frames, ts_ns, interface, link, data: frame_data, orig_len });
            true
        };
        match block {
            PcapBlockOwned::LegacyHeader(h) => {
                self.summary.format = "pcap";
                self.legacy_link = LinkType::from_linktype(h.network.0 as u32);
                self.legacy_units = if h.is_nanosecond_precision() { 1_000_000_000 } else { 1_000_000 };
                // The one interface of a pcap file, for `interfaces()`.
                self.interfaces = vec![InterfaceInfo {
                    link: self.legacy_link,
                    name: None,
                    units_per_sec: self.legacy_units,
                    offset_sec: 0,
                    snaplen: h.snaplen,
                }];
                self.summary.interfaces = 1;
            }
            PcapBlockOwned::Legacy(b) => {
                let ticks = (b.ts_sec as u64).saturating_mul(self.legacy_units).saturating_add(b.ts_usec as u64);
                let ts = to_ns(ticks, self.legacy_units, 0);
                let caplen = (b.caplen as usize).min(b.data.len());
                return deliver(&b.data[..caplen], ts, 0, self.legacy_link, b.origlen);
            }
            PcapBlockOwned::NG(Block::SectionHeader(_)) => {
                self.summary.format = "pcapng";
                // Interface ids are per section.
                self.interfaces.clear();
                self.drops_by_if.clear();
                self.described = 0;
                self.interface_bytes = 0;
            }
            PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                self.described += 1;
                // Ids are positions: once one interface is not kept, none after it is.
                if self.interfaces.len() as u64 + 1 < self.described || self.interfaces.len() >= MAX_INTERFACES {
                    self.summary.interfaces_skipped += 1;
                    return false;
                }
                let named = idb.options.iter().find(|o| o.code.0 == IDB_NAME).map(|o| cap_name(&o.value, MAX_INTERFACE_NAME_BYTES));
                let cut = named.as_ref().is_some_and(|n| n.1);
                let name = named.map(|n| n.0);
                let ifc = InterfaceInfo {
                    link: LinkType::from_linktype(idb.linktype.0 as u32),
                    name,
                    units_per_sec: units_per_sec(idb.if_tsresol).unwrap_or(1_000_000),
                    offset_sec: idb.if_tsoffset,
                    snaplen: idb.snaplen,
                };
                if self.interface_bytes + ifc.bytes() > MAX_INTERFACE_BYTES {
                    self.summary.interfaces_skipped += 1;
                    return false;
                }
                self.interface_bytes += ifc.bytes();
                self.summary.interface_names_truncated += cut as u64;
                self.interfaces.push(ifc);
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
                None => self.no_interface(epb.if_id),
            },
            PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                // No timestamp in a simple packet block; it belongs to interface 0.
                if let Some(ifc) = self.interfaces.first() {
                    let snap = if ifc.snaplen == 0 { usize::MAX } else { ifc.snaplen as usize };
                    let caplen = (spb.origlen as usize).min(snap).min(spb.data.len());
                    let link = ifc.link;
                    return deliver(&spb.data[..caplen], 0, 0, link, spb.origlen);
                }
                self.no_interface(0);
            }
            PcapBlockOwned::NG(Block::InterfaceStatistics(isb)) => {
                if let Some(o) = isb.options.iter().find(|o| o.code.0 == ISB_IFDROP) {
                    if let Some(v) = o.value.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
                        if let Some(slot) = self.drops_by_if.get_mut(isb.if_id as usize) {
                            // Statistics blocks are cumulative: keep the latest per interface.
                            *slot = Some(u64::from_le_bytes(v));
                        }
                    }
                }
            }
            PcapBlockOwned::NG(_) => {}
        }
        false
    }

    fn finish(&mut self) {
        if self.drops_by_if.iter().any(Option::is_some) {
            self.summary.kernel_drops = Some(self.drops_by_if.iter().flatten().sum());
        }
        if self.summary.format.is_empty() {
            self.summary.format = "pcap";
        }
    }
}

/// A capture being read: call [`CaptureReader::read`] until it returns false.
pub struct CaptureReader {
    reader: Box<dyn PcapReaderIterator + Send>,
    blocks: Blocks,
    buffer_size: usize,
    path: PathBuf,
    ended: bool,
}

impl CaptureReader {
    /// Opens `path` (a file, a FIFO, or `-` for stdin), once. `progress`, when
    /// given, is updated with the number of input bytes read.
    pub fn open(path: &Path, progress: Option<Arc<AtomicU64>>) -> Result<CaptureReader, CaptureError> {
        let open_err = |source| CaptureError::Open { path: path.to_path_buf(), source };
        let raw: Box<dyn Read + Send> = if path == Path::new("-") {
            Box::new(io::stdin())
        } else {
            let f = File::open(path).map_err(open_err)?;
            if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
                return Err(CaptureError::Format { path: path.to_path_buf(), detail: "it is a directory".into() });
            }
            Box::new(f)
        };
        let counted = Counting { inner: raw, count: progress.unwrap_or_default() };
        CaptureReader::from_reader(Box::new(counted), path)
    }

    /// Reads a pcap/pcapng stream (gzip-compressed or not); `path` names it in errors.
    pub fn from_reader(source: Box<dyn Read + Send>, path: &Path) -> Result<CaptureReader, CaptureError> {
        let io_err = |source| CaptureError::Open { path: path.to_path_buf(), source };
        let (head, rest) = sniff(source).map_err(io_err)?;
        let compressed = head.starts_with(&[0x1f, 0x8b]);
        let (head, rest) = if compressed {
            let gz = flate2::read::MultiGzDecoder::new(io::BufReader::with_capacity(1 << 16, io::Cursor::new(head).chain(rest)));
            sniff(Box::new(gz)).map_err(|e| CaptureError::Format { path: path.to_path_buf(), detail: format!("gzip stream unreadable: {e}") })?
        } else {
            (head, rest)
        };
        let magic: Vec<u8> = head.iter().take(4).copied().collect();
        let input: Box<dyn Read + Send> = Box::new(io::Cursor::new(head).chain(rest));
        let format_err = |detail: String| CaptureError::Format { path: path.to_path_buf(), detail };
        let reader: Box<dyn PcapReaderIterator + Send> = match magic.as_slice() {
            [] => return Err(format_err("file is empty".into())),
            [0x0a, 0x0d, 0x0d, 0x0a] => match pcap_parser::PcapNGReader::new(INITIAL_BUFFER, input) {
                Ok(r) => Box::new(r),
                Err(e) => return Err(format_err(describe(&e))),
            },
            [0xa1, 0xb2, 0xc3, 0xd4] | [0xd4, 0xc3, 0xb2, 0xa1] | [0xa1, 0xb2, 0x3c, 0x4d] | [0x4d, 0x3c, 0xb2, 0xa1] => {
                match pcap_parser::LegacyPcapReader::new(INITIAL_BUFFER, input) {
                    Ok(r) => Box::new(r),
                    Err(e) => return Err(format_err(describe(&e))),
                }
            }
            other => return Err(format_err(format!("header not recognised: starts with {}", hex_prefix(other)))),
        };
        let mut blocks = Blocks::new(path);
        blocks.summary.compressed = compressed;
        Ok(CaptureReader { reader, blocks, buffer_size: INITIAL_BUFFER, path: path.to_path_buf(), ended: false })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Hands up to `max_frames` frames to `on_packet`, in file order; false
    /// once the capture has ended (end of file, or a corrupt block, which is
    /// recorded in the summary's `error`).
    pub fn read(&mut self, max_frames: usize, on_packet: &mut dyn FnMut(&Packet<'_>)) -> bool {
        let mut frames = 0;
        while !self.ended && frames < max_frames {
            match self.reader.next() {
                Ok((offset, block)) => {
                    if self.blocks.block(block, on_packet) {
                        frames += 1;
                    }
                    self.reader.consume(offset);
                }
                Err(PcapError::Eof) => self.end(None),
                Err(PcapError::Incomplete(_)) => {
                    if self.reader.refill().is_err() {
                        let f = self.blocks.summary.frames;
                        self.end(Some(format!("read error after frame {f}")));
                    }
                }
                Err(PcapError::BufferTooSmall) => {
                    let f = self.blocks.summary.frames;
                    if self.buffer_size >= MAX_BUFFER || !self.reader.grow(self.buffer_size * 2) {
                        self.end(Some(format!("block after frame {f} is larger than {} MiB", MAX_BUFFER >> 20)));
                    } else {
                        self.buffer_size *= 2;
                        if self.reader.refill().is_err() {
                            self.end(Some(format!("read error after frame {f}")));
                        }
                    }
                }
                Err(PcapError::UnexpectedEof) => {
                    let f = self.blocks.summary.frames;
                    self.end(Some(format!("file is truncated: the block after frame {f} ends early")));
                }
                Err(e) => {
                    let msg = format!("corrupt block after frame {}: {}", self.blocks.summary.frames, describe(&e));
                    self.end(Some(msg));
                }
            }
        }
        !self.ended
    }

    fn end(&mut self, error: Option<String>) {
        self.ended = true;
        self.blocks.summary.error = error;
        self.blocks.finish();
    }

    /// The interfaces described so far (the current section's, for pcapng;
    /// the file's one link, for pcap).
    pub fn interfaces(&self) -> &[InterfaceInfo] {
        &self.blocks.interfaces
    }

    /// What was read so far (complete once `read` has returned false).
    pub fn summary(&self) -> &CaptureSummary {
        &self.blocks.summary
    }

    pub fn into_summary(mut self) -> CaptureSummary {
        if !self.ended {
            self.blocks.finish();
        }
        self.blocks.summary
    }

    /// Reads the whole capture (a convenience for tests and small tools).
    pub fn read_all(path: &Path, mut on_packet: impl FnMut(&Packet<'_>)) -> Result<CaptureSummary, CaptureError> {
        let mut r = CaptureReader::open(path, None)?;
        while r.read(usize::MAX, &mut on_packet) {}
        Ok(r.into_summary())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    pub(crate) fn pcap_file(nanos: bool, frames: &[(u32, u32, &[u8])]) -> Vec<u8> {
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

    /// A reader that hands over one byte per call, like a slow pipe.
    struct Trickle(Vec<u8>, usize);
    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.1 >= self.0.len() || buf.is_empty() {
                return Ok(0);
            }
            buf[0] = self.0[self.1];
            self.1 += 1;
            Ok(1)
        }
    }

    fn collect_from(src: Box<dyn Read + Send>) -> Result<(Vec<(u64, i64, usize)>, CaptureSummary), CaptureError> {
        let mut out = vec![];
        let mut r = CaptureReader::from_reader(src, Path::new("mem"))?;
        while r.read(3, &mut |p| out.push((p.frame, p.ts_ns, p.data.len()))) {}
        Ok((out, r.into_summary()))
    }

    fn collect(bytes: &[u8]) -> (Vec<(u64, i64, usize)>, CaptureSummary) {
        collect_from(Box::new(io::Cursor::new(bytes.to_vec()))).unwrap()
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
    fn batches_are_bounded_and_complete() {
        let frames: Vec<(u32, u32, &[u8])> = (0..10).map(|i| (i, 0, &[1u8, 2][..])).collect();
        let mut r = CaptureReader::from_reader(Box::new(io::Cursor::new(pcap_file(false, &frames))), Path::new("mem")).unwrap();
        let mut sizes = vec![];
        loop {
            let mut n = 0;
            let more = r.read(4, &mut |_| n += 1);
            sizes.push(n);
            if !more {
                break;
            }
        }
        assert_eq!(sizes.iter().sum::<usize>(), 10);
        assert!(sizes.iter().all(|&n| n <= 4), "{sizes:?}");
    }

    #[test]
    fn a_pipe_delivering_one_byte_at_a_time_reads_like_a_file() {
        let raw = pcap_file(true, &[(3, 7, &[9; 100]), (4, 0, &[1; 10])]);
        let (p, s) = collect_from(Box::new(Trickle(raw.clone(), 0))).unwrap();
        assert_eq!(p, collect(&raw).0);
        assert_eq!(s.frames, 2);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&raw).unwrap();
        let (p2, s2) = collect_from(Box::new(Trickle(gz.finish().unwrap(), 0))).unwrap();
        assert_eq!(p2, p);
        assert!(s2.compressed);
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
    fn garbage_is_a_format_error_and_a_missing_file_an_open_error() {
        let e = collect_from(Box::new(io::Cursor::new(b"this is not a capture file at all".to_vec()))).unwrap_err();
        assert!(matches!(e, CaptureError::Format { .. }), "{e}");
        assert!(matches!(CaptureReader::open(Path::new("/nonexistent/x.pcap"), None), Err(CaptureError::Open { .. })));
        let e = collect_from(Box::new(io::Cursor::new(Vec::new()))).unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
    }

    #[test]
    fn tsresol_units() {
        assert_eq!(units_per_sec(6), Some(1_000_000));
        assert_eq!(units_per_sec(9), Some(1_000_000_000));
        assert_eq!(units_per_sec(0x80 | 10), Some(1024));
        assert_eq!(to_ns(1536, 1024, 0), 1_500_000_000);
        assert_eq!(to_ns(5, 1_000_000_000, 37), 37_000_000_005);
        assert_eq!(to_ns(u64::MAX, 1, i64::MAX), i64::MAX);
    }

    #[test]
    fn error_text_is_short() {
        let big = vec![0xabu8; 100_000];
        let s = describe(&PcapError::OwnedNomError(big, pcap_parser::nom::error::ErrorKind::Verify));
        assert!(s.len() < 100, "{s}");
        assert!(s.contains("ab ab"), "{s}");
    }
}
