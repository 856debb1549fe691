//! CDR primitives: a cursor over a byte slice with a byte order and
//! alignment relative to the start of the encapsulated data.

use crate::error::WireError;

#[derive(Debug, Clone)]
pub struct CdrReader<'a> {
    buf: &'a [u8],
    pos: usize,
    little_endian: bool,
}

/// Longest string the decoder accepts (topic and type names are far shorter);
/// guards against lengths taken from corrupt data.
pub const MAX_STRING: usize = 64 * 1024;

impl<'a> CdrReader<'a> {
    pub fn new(buf: &'a [u8], little_endian: bool) -> Self {
        CdrReader { buf, pos: 0, little_endian }
    }
    pub fn position(&self) -> usize {
        self.pos
    }
    pub fn remaining(&self) -> &'a [u8] {
        &self.buf[self.pos.min(self.buf.len())..]
    }
    pub fn little_endian(&self) -> bool {
        self.little_endian
    }
    /// Moves to the next multiple of `n` (relative to the buffer start).
    pub fn align(&mut self, n: usize) {
        let r = self.pos % n;
        if r != 0 {
            self.pos += n - r;
        }
    }
    pub fn skip(&mut self, n: usize, what: &'static str) -> Result<(), WireError> {
        self.bytes(n, what).map(|_| ())
    }
    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(WireError::truncated(what, self.pos.saturating_add(n), self.buf.len())),
        }
    }
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], WireError> {
        Ok(self.bytes(N, what)?.try_into().expect("length checked"))
    }
    pub fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(self.bytes(1, what)?[0])
    }
    pub fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        let b = self.array::<2>(what)?;
        Ok(if self.little_endian { u16::from_le_bytes(b) } else { u16::from_be_bytes(b) })
    }
    pub fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        let b = self.array::<4>(what)?;
        Ok(if self.little_endian { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) })
    }
    pub fn i32(&mut self, what: &'static str) -> Result<i32, WireError> {
        Ok(self.u32(what)? as i32)
    }
    /// Aligned reads, as CDR lays out struct members.
    pub fn a_u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        self.align(2);
        self.u16(what)
    }
    pub fn a_u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        self.align(4);
        self.u32(what)
    }
    pub fn a_i32(&mut self, what: &'static str) -> Result<i32, WireError> {
        self.align(4);
        self.i32(what)
    }
    /// RTPS SequenceNumber_t: high (int32) then low (uint32).
    pub fn sequence_number(&mut self, what: &'static str) -> Result<i64, WireError> {
        let high = self.i32(what)? as i64;
        let low = self.u32(what)? as i64;
        Ok((high << 32) | low)
    }
    /// CDR string: uint32 length including the terminating NUL, then the bytes.
    /// Returns the text without the NUL; invalid UTF-8 is replaced.
    pub fn string(&mut self, what: &'static str) -> Result<String, WireError> {
        self.string_bytes(what).map(|b| String::from_utf8_lossy(b).into_owned())
    }
    /// The bytes of a CDR string up to its NUL, not copied (for callers that
    /// keep only part of a long value).
    pub fn string_bytes(&mut self, what: &'static str) -> Result<&'a [u8], WireError> {
        let len = self.a_u32(what)? as usize;
        if len > MAX_STRING {
            return Err(WireError::malformed(what, "string length over 64 KiB"));
        }
        let b = self.bytes(len, what)?;
        Ok(match b.iter().position(|&c| c == 0) {
            Some(nul) => &b[..nul],
            None => b,
        })
    }
}

/// The writing twin of [`CdrReader`]: a cursor over the caller's buffer with
/// a byte order and alignment relative to the buffer's start. Every write
/// that would run past the end fails with `Truncated` and writes nothing.
#[derive(Debug)]
pub struct CdrWriter<'b> {
    buf: &'b mut [u8],
    pos: usize,
    little_endian: bool,
}

impl<'b> CdrWriter<'b> {
    pub fn new(buf: &'b mut [u8], little_endian: bool) -> Self {
        CdrWriter { buf, pos: 0, little_endian }
    }
    /// Bytes written so far.
    pub fn position(&self) -> usize {
        self.pos
    }
    /// Size of the buffer written into.
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }
    pub fn little_endian(&self) -> bool {
        self.little_endian
    }
    fn take(&mut self, n: usize, what: &'static str) -> Result<&mut [u8], WireError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &mut self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(WireError::truncated(what, self.pos.saturating_add(n), self.buf.len())),
        }
    }
    /// Pads with zeros to the next multiple of `n`.
    pub fn align(&mut self, n: usize, what: &'static str) -> Result<(), WireError> {
        let r = self.pos % n;
        if r != 0 {
            self.zeros(n - r, what)?;
        }
        Ok(())
    }
    pub fn zeros(&mut self, n: usize, what: &'static str) -> Result<(), WireError> {
        self.take(n, what)?.fill(0);
        Ok(())
    }
    pub fn bytes(&mut self, b: &[u8], what: &'static str) -> Result<(), WireError> {
        self.take(b.len(), what)?.copy_from_slice(b);
        Ok(())
    }
    pub fn u8(&mut self, v: u8, what: &'static str) -> Result<(), WireError> {
        self.take(1, what)?[0] = v;
        Ok(())
    }
    pub fn u16(&mut self, v: u16, what: &'static str) -> Result<(), WireError> {
        let b = if self.little_endian { v.to_le_bytes() } else { v.to_be_bytes() };
        self.bytes(&b, what)
    }
    pub fn u32(&mut self, v: u32, what: &'static str) -> Result<(), WireError> {
        let b = if self.little_endian { v.to_le_bytes() } else { v.to_be_bytes() };
        self.bytes(&b, what)
    }
    pub fn i32(&mut self, v: i32, what: &'static str) -> Result<(), WireError> {
        self.u32(v as u32, what)
    }
    /// Aligned writes, as CDR lays out struct members.
    pub fn a_u16(&mut self, v: u16, what: &'static str) -> Result<(), WireError> {
        self.align(2, what)?;
        self.u16(v, what)
    }
    pub fn a_u32(&mut self, v: u32, what: &'static str) -> Result<(), WireError> {
        self.align(4, what)?;
        self.u32(v, what)
    }
    pub fn a_i32(&mut self, v: i32, what: &'static str) -> Result<(), WireError> {
        self.align(4, what)?;
        self.i32(v, what)
    }
    /// RTPS SequenceNumber_t: high (int32) then low (uint32).
    pub fn sequence_number(&mut self, sn: i64, what: &'static str) -> Result<(), WireError> {
        self.i32((sn >> 32) as i32, what)?;
        self.u32(sn as u32, what)
    }
    /// CDR string: aligned uint32 length including the terminating NUL, the
    /// bytes, the NUL. Strings over [`MAX_STRING`] are refused, as on reading.
    pub fn string(&mut self, s: &str, what: &'static str) -> Result<(), WireError> {
        if s.len() + 1 > MAX_STRING {
            return Err(WireError::malformed(what, "string length over 64 KiB"));
        }
        self.a_u32((s.len() + 1) as u32, what)?;
        self.bytes(s.as_bytes(), what)?;
        self.u8(0, what)
    }
}

/// Bytes [`CdrWriter::string`] writes for `s` at a 4-aligned position.
pub fn string_len(s: &str) -> usize {
    4 + s.len() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_alignment() {
        // "ab" (len 3 incl. NUL), pad 1, then u32 7 LE
        let d = [3, 0, 0, 0, b'a', b'b', 0, 0, 7, 0, 0, 0];
        let mut r = CdrReader::new(&d, true);
        assert_eq!(r.string("s").unwrap(), "ab");
        assert_eq!(r.a_u32("n").unwrap(), 7);
        assert!(r.u8("x").is_err());
    }

    #[test]
    fn big_endian_and_sn() {
        let d = [0, 0, 0, 1, 0, 0, 0, 2];
        let mut r = CdrReader::new(&d, false);
        assert_eq!(r.sequence_number("sn").unwrap(), (1i64 << 32) | 2);
        let mut r = CdrReader::new(&[0xff, 0xff, 0xff, 0x7f], true);
        assert!(r.string("s").is_err());
    }

    #[test]
    fn writer_mirrors_reader() {
        for le in [true, false] {
            let mut buf = [0u8; 40];
            let mut w = CdrWriter::new(&mut buf, le);
            w.u8(9, "a").unwrap();
            w.string("ab", "s").unwrap();
            w.a_u16(7, "n").unwrap();
            w.sequence_number(-5, "sn").unwrap();
            w.a_i32(-2, "i").unwrap();
            let n = w.position();
            let mut r = CdrReader::new(&buf[..n], le);
            assert_eq!(r.u8("a").unwrap(), 9);
            assert_eq!(r.string("s").unwrap(), "ab");
            assert_eq!(r.a_u16("n").unwrap(), 7);
            assert_eq!(r.sequence_number("sn").unwrap(), -5);
            assert_eq!(r.a_i32("i").unwrap(), -2);
            assert!(r.remaining().is_empty());
        }
        let mut small = [0u8; 3];
        let mut w = CdrWriter::new(&mut small, true);
        assert_eq!(w.u32(1, "x"), Err(WireError::truncated("x", 4, 3)));
        assert_eq!(w.position(), 0);
    }
}
