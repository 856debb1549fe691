//! The protobuf wire format, read field by field without decoding into
//! message structures: what both the OTLP decoder (`otlp.rs`, one span at a
//! time) and the request estimate (`prescan.rs`, before any decoding) walk.

fn varint(b: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let Some(&x) = b.get(*at) else { return Err("a varint runs past its message".into()) };
        *at += 1;
        v |= ((x & 0x7f) as u64) << shift;
        if x & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("a varint longer than 10 bytes".into())
}

/// One field: (number, wire type, the bytes of a length-delimited field).
pub(crate) fn next_field<'b>(b: &'b [u8], at: &mut usize) -> Result<(u64, u8, &'b [u8]), String> {
    let tag = varint(b, at)?;
    let (n, wt) = (tag >> 3, (tag & 7) as u8);
    if n == 0 {
        return Err("field number 0".into());
    }
    let skip = |at: &mut usize, k: usize| -> Result<(), String> {
        if b.len() - *at < k {
            return Err("a fixed-size field runs past its message".into());
        }
        *at += k;
        Ok(())
    };
    match wt {
        0 => {
            varint(b, at)?;
        }
        1 => skip(at, 8)?,
        5 => skip(at, 4)?,
        2 => {
            let len = varint(b, at)?;
            if len > (b.len() - *at) as u64 {
                return Err(format!("a field of {len} bytes runs past its message"));
            }
            let s = &b[*at..*at + len as usize];
            *at += len as usize;
            return Ok((n, wt, s));
        }
        other => return Err(format!("wire type {other} (groups) is not OTLP")),
    }
    Ok((n, wt, &[]))
}
