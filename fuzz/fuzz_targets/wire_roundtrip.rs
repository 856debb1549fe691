//! Fuzzes the wire layer's two halves against each other: every submessage
//! of the input (taken as an RTPS message) that parses into a typed
//! submessage is emitted again in its byte order and must parse into the
//! same value; parsing never panics.
#![no_main]

use ddscope_wire::rtps::{Submessage, SubmessageIter, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < HEADER_LEN {
        return;
    }
    for raw in SubmessageIter::new(data).flatten() {
        let Ok(sm) = raw.parse() else { continue };
        let mut out = data[..HEADER_LEN].to_vec();
        match sm.emit_vec(raw.little_endian(), &mut out) {
            Ok(_) => {
                let again = SubmessageIter::new(&out).next().expect("one submessage").expect("framed");
                assert_eq!(again.parse().expect("re-parses"), sm);
            }
            Err(e) => assert!(
                matches!(sm, Submessage::Security | Submessage::Opaque) || sm.body_len() > u16::MAX as usize,
                "{:?} parsed but cannot be emitted: {e}",
                raw.kind()
            ),
        }
    }
});
