//! The emitting half of the wire layer: every header the project writes has
//! a plain-data representation (a `…Repr` struct, or the typed submessage
//! views of [`crate::rtps`]) whose `parse` reads it and whose `emit` writes
//! it back. Emitting writes into the caller's buffer and fails with
//! [`WireError::Truncated`] when the buffer is too short; nothing is written
//! past `buffer_len()`.

use crate::error::WireError;

/// A header that can be written into a caller's buffer.
pub trait Emit {
    /// Bytes [`Emit::emit`] writes.
    fn buffer_len(&self) -> usize;

    /// Writes the header at the start of `buf` and returns the bytes written
    /// (`buffer_len()`). A buffer shorter than that is a `Truncated` error;
    /// a representation the wire format cannot carry (a 13-bit field over
    /// its range, …) is a `Malformed` error.
    fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError>;

    /// Appends the header to `out`. On error `out` is left as it was.
    fn emit_vec(&self, out: &mut Vec<u8>) -> Result<usize, WireError> {
        let at = out.len();
        out.resize(at + self.buffer_len(), 0);
        match self.emit(&mut out[at..]) {
            Ok(n) => {
                out.truncate(at + n);
                Ok(n)
            }
            Err(e) => {
                out.truncate(at);
                Err(e)
            }
        }
    }
}

/// Fails with `Truncated { what, need, have }` unless `buf` holds `need` bytes.
#[inline]
pub(crate) fn room(buf: &[u8], need: usize, what: &'static str) -> Result<(), WireError> {
    if buf.len() < need {
        Err(WireError::truncated(what, need, buf.len()))
    } else {
        Ok(())
    }
}
