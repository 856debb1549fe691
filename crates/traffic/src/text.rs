//! Text from outside (a scenario or limits file, a name from the wire)
//! quoted back in a message: control characters escaped, length bounded.

use std::borrow::Cow;

/// Whether `c` must not reach a terminal as is: C0 and C1 controls (ESC,
/// CSI, OSC, CR, LF, BEL, …), DEL, and the bidirectional overrides and
/// isolates that make text display in another order than it is read.
pub fn is_control(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with control characters escaped as `ls` and tshark show them (`\n`,
/// `\r`, `\t`, `\x1b`, `\u{202e}`); everything else unchanged.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_control(c) && (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if is_control(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Most characters of input a message quotes.
pub const EXCERPT_CHARS: usize = 200;

/// `s` for a one-line message: whitespace runs as one space, control
/// characters escaped, and at most `max_chars` characters of it followed by
/// `… (N bytes)` when longer (a 200 KB line is not echoed back).
pub fn excerpt(s: &str, max_chars: usize) -> String {
    // Lazily: only the quoted head is collapsed and escaped (a 200 MB field
    // costs no copy of itself).
    let mut out = String::new();
    let mut n = 0;
    for (i, word) in s.split_whitespace().enumerate() {
        for c in (i > 0).then_some(' ').into_iter().chain(word.chars()) {
            if n == max_chars {
                out.push_str(&format!("… ({} bytes)", s.len()));
                return out;
            }
            let mut b = [0u8; 4];
            out.push_str(&escape_controls(c.encode_utf8(&mut b)));
            n += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_quote_input_short_and_escaped() {
        assert_eq!(excerpt("unknown field `a\x1b[2Jb`", 200), "unknown field `a\\x1b[2Jb`");
        let long = format!("key_{}", "x".repeat(200_000));
        let e = excerpt(&long, 50);
        assert!(e.len() < 80 && e.ends_with("… (200004 bytes)"), "{e}");
        assert_eq!(excerpt("a\n  b\tc", 200), "a b c");
        assert_eq!(escape_controls("a\u{202e}b\u{9b}"), "a\\u{202e}b\\x9b");
    }
}

/// The UTC calendar date and time of day of `secs` since 1970: [year, month, day, hour, minute,
/// second] (civil date from days, Howard Hinnant's algorithm; proleptic Gregorian).
pub fn utc_fields(secs: i64) -> [i64; 6] {
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    [y, m, d, sod / 3600, sod % 3600 / 60, sod % 60]
}
