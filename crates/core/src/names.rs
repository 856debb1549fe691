//! Names that come from outside — topic and type names, partitions, entity
//! and node names from discovery, pcapng interface names — are attacker-chosen
//! bytes: each value is capped in length where it is read, and every name
//! shown on a terminal is stripped of control characters.
//!
//! A 59 KB topic name is legal CDR; 20 000 SEDP announcements of such names
//! took `topics` to 8 GB before values were capped. Real systems stay far
//! below the cap: ROS 2 limits a topic name to 255 characters
//! (`RMW_TOPIC_MAX_NAME_LENGTH`), DDS type names of generated code are a few
//! dozen.

use std::borrow::Cow;

/// Default cap of one name from the wire, in bytes (`discovery.max_name_bytes`).
pub const DEFAULT_MAX_NAME_BYTES: usize = 256;

/// Where a cut name ends: `rt/aaaa…[truncated, 59000 bytes]`. Visible in every
/// output, and the original length tells two cut names apart.
fn marker(total: usize) -> String {
    format!("…[truncated, {total} bytes]")
}

/// `raw` (UTF-8, invalid sequences replaced) cut to at most `max` bytes at a
/// character boundary, with a marker naming the original length when cut.
/// Returns the name and whether it was cut. Only the kept part is converted:
/// a long value costs nothing beyond the cap.
pub fn cap_bytes(raw: &[u8], max: usize) -> (String, bool) {
    if raw.len() <= max {
        return (String::from_utf8_lossy(raw).into_owned(), false);
    }
    let head = &raw[..max];
    // A multi-byte character cut in half at the end is left out, not replaced.
    let head = match std::str::from_utf8(head) {
        Err(e) if e.error_len().is_none() => &head[..e.valid_up_to()],
        _ => head,
    };
    // Invalid bytes become U+FFFD (3 bytes each): cut again to stay within `max`.
    let lossy = String::from_utf8_lossy(head);
    let (kept, marker) = (cap_str_at(&lossy, max), marker(raw.len()));
    let mut out = String::with_capacity(kept.len() + marker.len());
    out.push_str(kept);
    out.push_str(&marker);
    (out, true)
}

/// The longest prefix of `s` of at most `max` bytes ending at a character boundary.
fn cap_str_at(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// [`cap_bytes`] for a value that is already a string. A value already cut
/// at `max` (its kept part and the marker) is returned unchanged, so names
/// pass through every stage that caps them without being cut twice.
pub fn cap_str(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max || is_cut(s, max) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(format!("{}{}", cap_str_at(s, max), marker(s.len())))
}

/// Whether `s` is a name already cut at `max`: at most [`capped_len`] bytes,
/// ending in the marker placed at or before byte `max`. A forged name that
/// looks cut is bounded all the same.
pub fn is_cut(s: &str, max: usize) -> bool {
    s.len() <= capped_len(max) && s.ends_with(" bytes]") && s.rfind("…[truncated, ").is_some_and(|i| i <= max)
}

/// Longest a capped name can be: the cap and the marker.
pub fn capped_len(max: usize) -> usize {
    max + marker(usize::MAX).len()
}

/// A label or tag value for an exporter (`/metrics`): names the decoder
/// already capped (at most [`capped_len`] of the default cap) pass unchanged;
/// a longer value — one that reached the exporter another way, or under a
/// raised `discovery.max_name_bytes` — is cut at the default cap.
pub fn cap_label(v: &str) -> Cow<'_, str> {
    if v.len() <= capped_len(DEFAULT_MAX_NAME_BYTES) {
        return Cow::Borrowed(v);
    }
    cap_str(v, DEFAULT_MAX_NAME_BYTES)
}

/// Counts the names a parser cut.
#[derive(Debug, Clone, Copy)]
pub struct NameCap {
    pub max_bytes: usize,
    pub truncated: u64,
}

impl NameCap {
    pub fn new(max_bytes: usize) -> Self {
        NameCap { max_bytes: max_bytes.max(1), truncated: 0 }
    }

    /// `raw` capped, counted when cut.
    pub fn name(&mut self, raw: &[u8]) -> String {
        let (s, cut) = cap_bytes(raw, self.max_bytes);
        self.truncated += cut as u64;
        s
    }

    /// [`NameCap::name`] for a value that is already a string (one already cut
    /// at this cap is kept as it is and not counted again).
    pub fn cap(&mut self, s: &str) -> String {
        match cap_str(s, self.max_bytes) {
            Cow::Borrowed(b) => b.to_string(),
            Cow::Owned(o) => {
                self.truncated += 1;
                o
            }
        }
    }

    /// [`NameCap::cap`] in place.
    pub fn cap_in_place(&mut self, s: &mut String) {
        if let Cow::Owned(o) = cap_str(s, self.max_bytes) {
            self.truncated += 1;
            *s = o;
        }
    }
}

impl Default for NameCap {
    fn default() -> Self {
        NameCap::new(DEFAULT_MAX_NAME_BYTES)
    }
}

/// `s` safe to print on a terminal: control characters escaped as `ls` and
/// tshark show them (`\n`, `\r`, `\t`, `\x1b`, `\u{202e}`), the rest unchanged
/// (see [`ddscope_traffic::text::escape_controls`]). For human-readable
/// output only: CSV, JSON and Parquet carry names exactly.
pub fn for_terminal(s: &str) -> Cow<'_, str> {
    ddscope_traffic::text::escape_controls(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_kept_long_ones_cut_with_a_marker() {
        assert_eq!(cap_bytes(b"rt/chatter", 256), ("rt/chatter".to_string(), false));
        let long = vec![b'a'; 59_000];
        let (s, cut) = cap_bytes(&long, 256);
        assert!(cut);
        assert_eq!(s, format!("{}…[truncated, 59000 bytes]", "a".repeat(256)));
        assert!(s.len() <= capped_len(256));
        // A cut inside a multi-byte character keeps whole characters only.
        let mixed = "é".repeat(200);
        let (s, cut) = cap_bytes(mixed.as_bytes(), 255);
        assert!(cut && s.starts_with(&"é".repeat(127)) && !s.contains('\u{fffd}'), "{s}");
        assert_eq!(cap_str(&mixed, 255), s);
        assert_eq!(cap_str("abc", 3), "abc");
        let mut cap = NameCap::new(4);
        assert_eq!(cap.name(b"abcd"), "abcd");
        assert_eq!(cap.name(b"abcde"), "abcd…[truncated, 5 bytes]");
        assert_eq!(cap.truncated, 1);
        // A name the decoder cut is not cut again for a label; a longer one is.
        let (decoded, _) = cap_bytes(&long, DEFAULT_MAX_NAME_BYTES);
        assert_eq!(cap_label(&decoded), decoded);
        // Cutting is idempotent: a cut name passes every later cap unchanged and uncounted.
        let mut cap = NameCap::new(256);
        let once = cap.cap(&"b".repeat(1000));
        assert_eq!((cap.cap(&once), cap.truncated), (once.clone(), 1));
        assert!(is_cut(&once, 256) && !is_cut("plain…[truncated, 5 bytes]x", 256));
        let raw = "x".repeat(4 << 20);
        assert_eq!(cap_label(&raw).len(), capped_len(DEFAULT_MAX_NAME_BYTES) - "18446744073709551615".len() + "4194304".len());
    }

    #[test]
    fn control_characters_are_escaped_for_terminals() {
        assert_eq!(for_terminal("/chatter"), "/chatter");
        assert_eq!(for_terminal("a\x1b]0;pwned\x07b\r\nc\td"), "a\\x1b]0;pwned\\x07b\\r\\nc\\td");
        assert_eq!(for_terminal("x\u{9b}2J\u{7f}"), "x\\x9b2J\\x7f");
        assert_eq!(for_terminal("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(for_terminal("ünïcödé/話題"), "ünïcödé/話題");
        assert!(!for_terminal("\x1b[2J").contains('\x1b'));
    }
}
