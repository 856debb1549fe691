//! A structural check of a CTF `metadata` file before babeltrace2 sees it.
//!
//! LTTng writes the metadata as a sequence of packets (CTF 1.8 §7.1: a 37-byte
//! header with magic 0x75D11D57, then TSDL text). babeltrace2 2.0.4 loops
//! forever on a metadata file whose last packet is cut short (a copy
//! interrupted mid-write, a full disk); checking the packet framing first
//! turns that into an error. Text (non-packetized) metadata is left to
//! babeltrace2.

const MAGIC: u32 = 0x75D1_1D57;
const HEADER: usize = 37;

/// `Ok` when `bytes` is text metadata or a sequence of complete metadata
/// packets; otherwise a one-line reason.
pub(crate) fn check(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 4 {
        return Err(format!("metadata is {} bytes long: truncated", bytes.len()));
    }
    let le = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let be = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let read: fn([u8; 4]) -> u32 = if le == MAGIC {
        u32::from_le_bytes
    } else if be == MAGIC {
        u32::from_be_bytes
    } else {
        return Ok(()); // text TSDL
    };
    let mut off = 0usize;
    let mut packets = 0u64;
    while off < bytes.len() {
        let rest = &bytes[off..];
        if rest.len() < HEADER {
            return Err(format!(
                "metadata truncated: packet #{packets} at byte {off} has {} of its {HEADER} header bytes",
                rest.len()
            ));
        }
        let word = |at: usize| read([rest[at], rest[at + 1], rest[at + 2], rest[at + 3]]);
        if word(0) != MAGIC {
            return Err(format!("metadata packet #{packets} at byte {off} has no CTF magic"));
        }
        let content_bits = word(24) as usize;
        let packet_bits = word(28) as usize;
        if packet_bits & 7 != 0 || packet_bits / 8 < HEADER || content_bits > packet_bits || content_bits < HEADER * 8 {
            return Err(format!(
                "metadata packet #{packets} at byte {off} has an invalid size (content {content_bits} bits, packet {packet_bits} bits)"
            ));
        }
        let size = packet_bits / 8;
        if size > rest.len() {
            return Err(format!(
                "metadata truncated: packet #{packets} at byte {off} claims {size} bytes, the file has {} left",
                rest.len()
            ));
        }
        off += size;
        packets += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(text: &[u8], size: usize) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&MAGIC.to_le_bytes());
        p.extend_from_slice(&[0u8; 16]);
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&(((HEADER + text.len()) * 8) as u32).to_le_bytes());
        p.extend_from_slice(&((size * 8) as u32).to_le_bytes());
        p.extend_from_slice(&[0, 0, 0, 1, 8]);
        p.extend_from_slice(text);
        p.resize(size, 0);
        p
    }

    #[test]
    fn complete_packets_and_text_pass() {
        let mut m = packet(b"/* CTF 1.8 */", 64);
        m.extend(packet(b"event {};", 128));
        assert_eq!(check(&m), Ok(()));
        assert_eq!(check(b"/* CTF 1.8 */ trace { };"), Ok(()));
    }

    #[test]
    fn every_cut_of_a_packet_is_reported() {
        let mut m = packet(b"/* CTF 1.8 */", 64);
        m.extend(packet(b"event {};", 128));
        for cut in 0..m.len() {
            if cut == 64 {
                assert_eq!(check(&m[..cut]), Ok(()), "a packet boundary is a complete file");
                continue;
            }
            let e = check(&m[..cut]).expect_err("cut inside a packet");
            assert!(e.contains("truncated") || e.contains("magic"), "{cut}: {e}");
        }
    }
}
