//! Fuzzes the capture-file reader (pcap and pcapng parsing, gzip sniffing)
//! and the decoder behind it with whole files.
#![no_main]

use ddscope_core::decode::{Decoder, DecoderConfig};
use ddscope_core::source::CaptureReader;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let mut dec = Decoder::new("fuzz", DecoderConfig::default());
    if let Ok(mut r) = CaptureReader::from_reader(Box::new(std::io::Cursor::new(data.to_vec())), Path::new("fuzz.pcapng")) {
        while r.read(64, &mut |p| dec.packet(p, &mut |_| {})) {}
    }
    dec.finish();
});
