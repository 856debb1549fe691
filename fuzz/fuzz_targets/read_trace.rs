//! Fuzzes the trace reader (ddscope-trace over libbabeltrace2's CTF decoder)
//! with whole traces: the input is `metadata length (u16 LE) | metadata | one
//! stream file`, written as a trace directory and read to the end. Any outcome
//! but a panic, a crash or a hang is fine (errors are expected).
//!
//! Seed it from a real trace (see docs/tracing.md):
//!   python3 -c 'import sys,struct;m=open(sys.argv[1],"rb").read();s=open(sys.argv[2],"rb").read();
//!   sys.stdout.buffer.write(struct.pack("<H",len(m))+m+s)' TRACE/metadata TRACE/ros2_0 > fuzz/corpus/read_trace/seed
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

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let len = u16::from_le_bytes([data[0], data[1]]) as usize;
    let rest = &data[2..];
    let (meta, stream) = rest.split_at(len.min(rest.len()));
    let root = trace_dir();
    let t = root.join("ust/uid/0/64-bit");
    if std::fs::write(t.join("metadata"), meta).is_err() || std::fs::write(t.join("ros2_0"), stream).is_err() {
        return;
    }
    let opts = ReaderOptions { require_ros2: false, ..Default::default() };
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
