//! Text from outside (a name from the wire) shown on a terminal: control
//! characters escaped.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape_controls("unknown field `a\x1b[2Jb`"), "unknown field `a\\x1b[2Jb`");
        assert_eq!(escape_controls("a\u{202e}b\u{9b}"), "a\\u{202e}b\\x9b");
        assert_eq!(escape_controls("plain/name"), "plain/name");
    }
}
