//! The ids every host computes alike, whatever its build: a DDS sample's
//! trace id from (writer GUID, sequence number) — the agents' per-submessage
//! spans (`otlp.rs`), `serve`'s traces per sample (`traces.rs`) and the
//! scale-out sightings all put one sample in one trace with it — and the
//! FNV-1a hash it is made with.

use ddscope_wire::Guid;

/// FNV-1a, 64 bit: a hash every agent computes alike (std's hashers may change between Rust releases).
pub(crate) fn fnv1a(seed: u64, data: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Trace id of a DDS sample: the same at every capture point.
pub fn sample_trace_id(writer: &Guid, sn: i64) -> [u8; 16] {
    let mut key = [0u8; 24];
    key[..16].copy_from_slice(&writer.to_bytes());
    key[16..].copy_from_slice(&sn.to_be_bytes());
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&fnv1a(1, &key).to_be_bytes());
    id[8..].copy_from_slice(&fnv1a(2, &key).to_be_bytes());
    if id == [0; 16] {
        id[15] = 1;
    }
    id
}
