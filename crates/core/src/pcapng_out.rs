//! Writing pcapng: one section, one interface (nanosecond timestamps),
//! enhanced packet blocks with their original lengths, and an interface
//! statistics block with the kernel's drop counter at the end.

use std::io::{self, Write};

pub struct PcapngWriter<W: Write> {
    out: W,
    packets: u64,
}

fn option(buf: &mut Vec<u8>, code: u16, value: &[u8]) {
    buf.extend_from_slice(&code.to_le_bytes());
    buf.extend_from_slice(&(value.len() as u16).to_le_bytes());
    buf.extend_from_slice(value);
    buf.resize(buf.len() + (4 - value.len() % 4) % 4, 0);
}

fn block(out: &mut impl Write, kind: u32, body: &[u8]) -> io::Result<()> {
    let total = (12 + body.len()) as u32;
    let mut b = Vec::with_capacity(total as usize);
    b.extend_from_slice(&kind.to_le_bytes());
    b.extend_from_slice(&total.to_le_bytes());
    b.extend_from_slice(body);
    b.extend_from_slice(&total.to_le_bytes());
    out.write_all(&b)
}

impl<W: Write> PcapngWriter<W> {
    /// `linktype` is the pcap LINKTYPE of the frames; `if_name` goes into the interface block.
    pub fn new(mut out: W, linktype: u16, if_name: Option<&str>) -> io::Result<Self> {
        let mut shb = vec![];
        shb.extend_from_slice(&0x1a2b3c4du32.to_le_bytes());
        shb.extend_from_slice(&1u16.to_le_bytes());
        shb.extend_from_slice(&0u16.to_le_bytes());
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        option(&mut shb, 4, format!("ddscope {}", env!("CARGO_PKG_VERSION")).as_bytes()); // shb_userappl
        shb.extend_from_slice(&[0, 0, 0, 0]);
        block(&mut out, 0x0a0d0d0a, &shb)?;
        let mut idb = vec![];
        idb.extend_from_slice(&linktype.to_le_bytes());
        idb.extend_from_slice(&0u16.to_le_bytes());
        idb.extend_from_slice(&262144u32.to_le_bytes());
        if let Some(n) = if_name {
            option(&mut idb, 2, n.as_bytes()); // if_name
        }
        option(&mut idb, 9, &[9]); // if_tsresol: nanoseconds
        idb.extend_from_slice(&[0, 0, 0, 0]);
        block(&mut out, 1, &idb)?;
        Ok(PcapngWriter { out, packets: 0 })
    }

    pub fn packet(&mut self, ts_ns: i64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let mut b = Vec::with_capacity(20 + data.len() + 3);
        b.extend_from_slice(&0u32.to_le_bytes());
        let ts = ts_ns as u64;
        b.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        b.extend_from_slice(&(ts as u32).to_le_bytes());
        b.extend_from_slice(&(data.len() as u32).to_le_bytes());
        b.extend_from_slice(&orig_len.max(data.len() as u32).to_le_bytes());
        b.extend_from_slice(data);
        b.resize(b.len() + (4 - data.len() % 4) % 4, 0);
        self.packets += 1;
        block(&mut self.out, 6, &b)
    }

    /// Interface statistics: packets received and dropped (isb_ifrecv, isb_ifdrop).
    pub fn statistics(&mut self, ts_ns: i64, received: u64, dropped: u64) -> io::Result<()> {
        let mut b = vec![];
        b.extend_from_slice(&0u32.to_le_bytes());
        let ts = ts_ns as u64;
        b.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        b.extend_from_slice(&(ts as u32).to_le_bytes());
        option(&mut b, 4, &received.to_le_bytes());
        option(&mut b, 5, &dropped.to_le_bytes());
        b.extend_from_slice(&[0, 0, 0, 0]);
        block(&mut self.out, 5, &b)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::read_capture_from;
    use std::path::Path;

    #[test]
    fn round_trip_with_statistics() {
        let mut w = PcapngWriter::new(Vec::new(), 1, Some("eth0")).unwrap();
        w.packet(1_700_000_000_123_456_789, &[1, 2, 3, 4, 5], 60).unwrap();
        w.packet(1_700_000_000_223_456_789, &[9; 64], 64).unwrap();
        w.statistics(1_700_000_001_000_000_000, 2, 7).unwrap();
        let bytes = w.into_inner();
        let mut seen = vec![];
        let s = read_capture_from(Box::new(&bytes[..]), Path::new("mem"), |p| {
            seen.push((p.ts_ns, p.data.len(), p.orig_len));
            true
        })
        .unwrap();
        assert_eq!(seen, vec![(1_700_000_000_123_456_789, 5, 60), (1_700_000_000_223_456_789, 64, 64)]);
        assert_eq!(s.kernel_drops, Some(7));
        assert_eq!(s.snapped_frames, 1);
    }
}
