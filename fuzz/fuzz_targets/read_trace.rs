//! Fuzzes the trace reader (ddscope-trace over libbabeltrace2's CTF decoder)
//! with whole traces, written as a trace directory and read to the end. Any
//! outcome but a panic, a crash, a hang or unbounded memory in this process
//! is fine (errors are expected; babeltrace2 crashing in the reader's check
//! child is an error here, see reader.rs `check_in_child`).
//!
//! Input: `mode (u8) | metadata length (u16 LE) | metadata | one stream file`.
//! The mode's low bits say what the metadata bytes are, so that mutations
//! reach the TSDL parser and not only the packet framing:
//! - 0: the metadata file as is (packets or text, as recorded);
//! - 1: TSDL text, which the target cuts into LTTng metadata packets
//!   (37-byte headers, byte order from bit 2 of the mode) — every mutation
//!   of the text survives the framing check;
//! - 2: TSDL text written as a plain-text metadata file.
//!
//! Seed it from a real trace (see docs/tracing.md), one seed per mode:
//!   python3 fuzz/seed_trace.py TRACE_DIR fuzz/corpus/read_trace
#![no_main]

use ddscope_trace::{ReaderOptions, Source, TraceReader};
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

fn trace_dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("ddscope-fuzz-trace-{}", std::process::id()));
        std::fs::create_dir_all(d.join("ust/uid/0/64-bit")).expect("fuzz dir");
        d
    })
}

const MAGIC: u32 = 0x75D1_1D57;
const HEADER: usize = 37;
const PACKET_TEXT: usize = 4096 - HEADER;

/// TSDL text as LTTng metadata packets (CTF 1.8 §7.1), each padded to 4 KiB.
fn packetize(text: &[u8], le: bool) -> Vec<u8> {
    let w = |v: u32| if le { v.to_le_bytes() } else { v.to_be_bytes() };
    let mut out = Vec::with_capacity(text.len() + text.len() / PACKET_TEXT * HEADER + 4096);
    for chunk in text.chunks(PACKET_TEXT) {
        let start = out.len();
        out.extend_from_slice(&w(MAGIC));
        out.extend_from_slice(&[0u8; 16]); // uuid
        out.extend_from_slice(&w(0)); // checksum
        out.extend_from_slice(&w(((HEADER + chunk.len()) * 8) as u32)); // content size, bits
        out.extend_from_slice(&w((4096 * 8) as u32)); // packet size, bits
        out.extend_from_slice(&[0, 0, 0, 1, 8]); // compression, encryption, checksum scheme, major 1, minor 8
        out.extend_from_slice(chunk);
        out.resize(start + 4096, 0);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let mode = data[0];
    let len = u16::from_le_bytes([data[1], data[2]]) as usize;
    let rest = &data[3..];
    let (meta, stream) = rest.split_at(len.min(rest.len()));
    let meta = match mode & 3 {
        1 => packetize(meta, mode & 4 == 0),
        _ => meta.to_vec(),
    };
    let root = trace_dir();
    let t = root.join("ust/uid/0/64-bit");
    if std::fs::write(t.join("metadata"), &meta).is_err() || std::fs::write(t.join("ros2_0"), stream).is_err() {
        return;
    }
    // A bounded child: libFuzzer's own -rss_limit_mb watches this process.
    let opts = ReaderOptions { require_ros2: false, check_memory_bytes: 512 << 20, check_stall: std::time::Duration::from_secs(10), ..Default::default() };
    if let Ok(mut r) = TraceReader::new(Source::Directory(root.clone()), opts) {
        let mut n = 0u32;
        while let Ok(Some(_)) = r.next_record() {
            n += 1;
            if n > 1_000_000 {
                break;
            }
        }
    }
});
