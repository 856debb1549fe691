//! Writing pcapng: one section, one interface with nanosecond timestamps
//! (`if_tsresol` = 9), every frame as an Enhanced Packet Block with its
//! original length, and Interface Statistics Blocks carrying the capture's
//! received / dropped counters (what tshark shows as drops).

use std::io::{self, Write};

/// What goes into the interface description block.
#[derive(Debug, Clone, Default)]
pub struct InterfaceOptions<'a> {
    /// pcap LINKTYPE of the frames.
    pub linktype: u16,
    /// 0 = unlimited (written as 262144, tcpdump's default).
    pub snaplen: u32,
    pub name: Option<&'a str>,
    pub description: Option<&'a str>,
}

pub struct PcapngWriter<W: Write> {
    out: W,
    packets: u64,
    buf: Vec<u8>,
}

const SHB: u32 = 0x0a0d_0d0a;
const IDB: u32 = 1;
const ISB: u32 = 5;
const EPB: u32 = 6;
const OPT_END: u16 = 0;

fn option(buf: &mut Vec<u8>, code: u16, value: &[u8]) {
    buf.extend_from_slice(&code.to_le_bytes());
    buf.extend_from_slice(&(value.len() as u16).to_le_bytes());
    buf.extend_from_slice(value);
    buf.resize(buf.len() + (4 - value.len() % 4) % 4, 0);
}

fn end_of_options(buf: &mut Vec<u8>) {
    option(buf, OPT_END, &[]);
}

/// pcapng timestamps: high and low 32-bit words of nanoseconds since the epoch.
fn ts_words(ts_ns: i64) -> [u8; 8] {
    let t = ts_ns.max(0) as u64;
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&((t >> 32) as u32).to_le_bytes());
    b[4..].copy_from_slice(&(t as u32).to_le_bytes());
    b
}

impl<W: Write> PcapngWriter<W> {
    pub fn new(mut out: W, iface: &InterfaceOptions<'_>) -> io::Result<Self> {
        let mut buf = Vec::with_capacity(1 << 16);
        let mut shb = vec![];
        shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
        shb.extend_from_slice(&1u16.to_le_bytes());
        shb.extend_from_slice(&0u16.to_le_bytes());
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        option(&mut shb, 4, format!("ddscope {}", env!("CARGO_PKG_VERSION")).as_bytes()); // shb_userappl
        end_of_options(&mut shb);
        block(&mut out, &mut buf, SHB, &shb)?;
        let mut idb = vec![];
        idb.extend_from_slice(&iface.linktype.to_le_bytes());
        idb.extend_from_slice(&0u16.to_le_bytes());
        idb.extend_from_slice(&(if iface.snaplen == 0 { 262_144 } else { iface.snaplen }).to_le_bytes());
        if let Some(n) = iface.name {
            option(&mut idb, 2, n.as_bytes()); // if_name
        }
        if let Some(d) = iface.description {
            option(&mut idb, 3, d.as_bytes()); // if_description
        }
        option(&mut idb, 9, &[9]); // if_tsresol: nanoseconds
        end_of_options(&mut idb);
        block(&mut out, &mut buf, IDB, &idb)?;
        Ok(PcapngWriter { out, packets: 0, buf })
    }

    /// One frame: `data` as captured, `orig_len` its length on the wire.
    pub fn packet(&mut self, ts_ns: i64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let total = 32 + data.len() + (4 - data.len() % 4) % 4;
        self.buf.clear();
        self.buf.extend_from_slice(&EPB.to_le_bytes());
        self.buf.extend_from_slice(&(total as u32).to_le_bytes());
        self.buf.extend_from_slice(&0u32.to_le_bytes());
        self.buf.extend_from_slice(&ts_words(ts_ns));
        self.buf.extend_from_slice(&(data.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&orig_len.max(data.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(data);
        self.buf.resize(total - 4, 0);
        self.buf.extend_from_slice(&(total as u32).to_le_bytes());
        self.packets += 1;
        self.out.write_all(&self.buf)
    }

    /// Interface statistics at `ts_ns`: packets received and dropped
    /// (isb_ifrecv, isb_ifdrop), and the capture's first and last frame times.
    pub fn statistics(&mut self, ts_ns: i64, received: Option<u64>, dropped: Option<u64>, span: Option<(i64, i64)>) -> io::Result<()> {
        let mut b = vec![];
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&ts_words(ts_ns));
        if let Some((start, end)) = span {
            option(&mut b, 2, &ts_words(start)); // isb_starttime
            option(&mut b, 3, &ts_words(end)); // isb_endtime
        }
        if let Some(n) = received {
            option(&mut b, 4, &n.to_le_bytes());
        }
        if let Some(n) = dropped {
            option(&mut b, 5, &n.to_le_bytes());
        }
        end_of_options(&mut b);
        let mut scratch = std::mem::take(&mut self.buf);
        let r = block(&mut self.out, &mut scratch, ISB, &b);
        self.buf = scratch;
        r
    }

    pub fn packets(&self) -> u64 {
        self.packets
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

fn block(out: &mut impl Write, scratch: &mut Vec<u8>, kind: u32, body: &[u8]) -> io::Result<()> {
    let total = (12 + body.len()) as u32;
    scratch.clear();
    scratch.extend_from_slice(&kind.to_le_bytes());
    scratch.extend_from_slice(&total.to_le_bytes());
    scratch.extend_from_slice(body);
    scratch.extend_from_slice(&total.to_le_bytes());
    out.write_all(scratch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CaptureReader;
    use std::path::Path;

    #[test]
    fn round_trip_with_statistics() {
        let iface = InterfaceOptions { linktype: 1, snaplen: 0, name: Some("eth0"), description: Some("pc1") };
        let mut w = PcapngWriter::new(Vec::new(), &iface).unwrap();
        w.packet(1_700_000_000_123_456_789, &[1, 2, 3, 4, 5], 60).unwrap();
        w.packet(1_700_000_000_223_456_789, &[9; 64], 64).unwrap();
        w.statistics(1_700_000_001_000_000_000, Some(2), Some(7), Some((1_700_000_000_123_456_789, 1_700_000_000_223_456_789))).unwrap();
        let bytes = w.into_inner();
        // Every block's length is a multiple of 4 and repeated at its end.
        let mut off = 0;
        let mut kinds = vec![];
        while off < bytes.len() {
            let kind = u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap());
            let len = u32::from_le_bytes(bytes[off + 4..off + 8].try_into().unwrap()) as usize;
            assert_eq!(len % 4, 0);
            assert_eq!(u32::from_le_bytes(bytes[off + len - 4..off + len].try_into().unwrap()) as usize, len);
            kinds.push(kind);
            off += len;
        }
        assert_eq!(kinds, vec![SHB, IDB, EPB, EPB, ISB]);
        let mut seen = vec![];
        let mut r = CaptureReader::from_reader(Box::new(std::io::Cursor::new(bytes)), Path::new("mem")).unwrap();
        while r.read(10, &mut |p| seen.push((p.ts_ns, p.data.len(), p.orig_len))) {}
        let s = r.into_summary();
        assert_eq!(seen, vec![(1_700_000_000_123_456_789, 5, 60), (1_700_000_000_223_456_789, 64, 64)]);
        assert_eq!(s.kernel_drops, Some(7));
        assert_eq!(s.snapped_frames, 1);
        assert_eq!(s.format, "pcapng");
    }
}
