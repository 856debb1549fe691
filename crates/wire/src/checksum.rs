//! The Internet checksum (RFC 1071) used by the IPv4 header and UDP.

/// One's-complement sum of `data` as big-endian 16-bit words (an odd last
/// byte is padded with zero), added to `sum`; not yet folded.
pub fn sum(data: &[u8], mut sum: u32) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum = sum.wrapping_add(u16::from_be_bytes([c[0], c[1]]) as u32);
        if sum & 0x8000_0000 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
    }
    if let [last] = chunks.remainder() {
        sum = sum.wrapping_add((*last as u32) << 8);
    }
    sum
}

/// Folds a running sum to 16 bits and complements it.
pub fn finish(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The Internet checksum of `data`.
pub fn internet(data: &[u8]) -> u16 {
    finish(sum(data, 0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (before complementing).
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(super::internet(&d), !0xddf2);
        // A header with its checksum filled in sums to zero.
        let mut h = [0x45u8, 0, 0, 0x1c, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        let c = super::internet(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(super::internet(&h), 0);
    }
}
