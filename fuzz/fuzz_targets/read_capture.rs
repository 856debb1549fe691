//! Fuzzes the capture-file reader (pcap and pcapng parsing) and the decoder
//! behind it with whole files.
#![no_main]

use ddscope_core::capture::read_capture_from;
use ddscope_core::decode::{Decoder, DecoderConfig};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let mut dec = Decoder::new("fuzz", DecoderConfig::default());
    let _ = read_capture_from(Box::new(data), Path::new("fuzz.pcapng"), |p| {
        dec.packet(p, &mut |_| {});
        true
    });
    dec.finish();
});
