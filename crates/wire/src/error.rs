use std::fmt;

/// Why a view could not be built. Carries only static strings so that the hot
/// path never allocates; the caller adds frame numbers and file names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// The buffer ends before `what` does.
    Truncated { what: &'static str, need: usize, have: usize },
    /// `what` has a value the protocol does not allow.
    Malformed { what: &'static str, detail: &'static str },
}

impl WireError {
    pub fn truncated(what: &'static str, need: usize, have: usize) -> Self {
        WireError::Truncated { what, need, have }
    }
    pub fn malformed(what: &'static str, detail: &'static str) -> Self {
        WireError::Malformed { what, detail }
    }
    /// The field or structure the error is about.
    pub fn what(&self) -> &'static str {
        match self {
            WireError::Truncated { what, .. } | WireError::Malformed { what, .. } => what,
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated { what, need, have } => {
                write!(f, "truncated {what}: needs {need} bytes, {have} present")
            }
            WireError::Malformed { what, detail } => write!(f, "malformed {what}: {detail}"),
        }
    }
}

impl std::error::Error for WireError {}

/// Returns `buf[range]` or a `Truncated` error naming `what`.
#[inline]
pub(crate) fn slice<'a>(buf: &'a [u8], start: usize, len: usize, what: &'static str) -> Result<&'a [u8], WireError> {
    match start.checked_add(len) {
        Some(end) if end <= buf.len() => Ok(&buf[start..end]),
        _ => Err(WireError::truncated(what, start.saturating_add(len), buf.len())),
    }
}

#[inline]
pub(crate) fn be16(buf: &[u8], at: usize, what: &'static str) -> Result<u16, WireError> {
    let b = slice(buf, at, 2, what)?;
    Ok(u16::from_be_bytes([b[0], b[1]]))
}

#[inline]
pub(crate) fn be32(buf: &[u8], at: usize, what: &'static str) -> Result<u32, WireError> {
    let b = slice(buf, at, 4, what)?;
    Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// `buf[start..start + len]` to write into, or a `Truncated` error naming
/// `what` (the output buffer is too short).
#[inline]
pub(crate) fn slice_mut<'a>(buf: &'a mut [u8], start: usize, len: usize, what: &'static str) -> Result<&'a mut [u8], WireError> {
    match start.checked_add(len) {
        Some(end) if end <= buf.len() => Ok(&mut buf[start..end]),
        _ => Err(WireError::truncated(what, start.saturating_add(len), buf.len())),
    }
}
