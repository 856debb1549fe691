//! A structural check of a CTF `metadata` file before babeltrace2 sees it.
//!
//! LTTng writes the metadata as a sequence of packets (CTF 1.8 §7.1: a 37-byte
//! header with magic 0x75D11D57, then TSDL text). babeltrace2 2.0.4 loops
//! forever on a metadata file whose last packet is cut short (a copy
//! interrupted mid-write, a full disk); checking the packet framing first
//! turns that into an error. Then a few facts of the TSDL text that
//! babeltrace2 2.0.4 asserts on (it aborts the process: found by fuzzing,
//! fuzz/fuzz_targets/read_trace.rs) are checked; the rest of the TSDL is left
//! to babeltrace2.

const MAGIC: u32 = 0x75D1_1D57;
const HEADER: usize = 37;

/// `Ok` when `bytes` is text metadata or a sequence of complete metadata
/// packets; otherwise a one-line reason.
#[cfg(test)]
pub(crate) fn check(bytes: &[u8]) -> Result<(), String> {
    tsdl_text(bytes).map(|_| ())
}

/// The TSDL text of a metadata file, after checking its framing and the
/// facts below.
pub(crate) fn tsdl_text(bytes: &[u8]) -> Result<Vec<u8>, String> {
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
        return check_tsdl(bytes).map(|_| bytes.to_vec()); // text TSDL
    };
    let mut text = Vec::new();
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
        text.extend_from_slice(&rest[HEADER..content_bits / 8]);
        off += size;
        packets += 1;
    }
    check_tsdl(&text)?;
    Ok(text)
}

/// The LTTng-UST 2.x 64-bit packet header and context, as lttng-ust writes
/// them (whitespace-normalized). When a trace's metadata declares exactly
/// these, its stream files' packet framing can be checked at fixed offsets.
const LTTNG_DECLS: &[&str] = &[
    "typealias integer { size = 8; align = 8; signed = false; } := uint8_t;",
    "typealias integer { size = 32; align = 8; signed = false; } := uint32_t;",
    "typealias integer { size = 64; align = 8; signed = false; } := uint64_t;",
    "typealias integer { size = 64; align = 8; signed = false; } := unsigned long;",
    "packet.header := struct { uint32_t magic; uint8_t uuid[16]; uint32_t stream_id; uint64_t stream_instance_id; };",
    "struct packet_context { uint64_clock_monotonic_t timestamp_begin; uint64_clock_monotonic_t timestamp_end; uint64_t content_size; uint64_t packet_size; uint64_t packet_seq_num; unsigned long events_discarded; uint32_t cpu_id; };",
];

/// TSDL as tokens separated by one space: comments removed, punctuation
/// split from identifiers, whitespace collapsed. Two texts that differ only
/// in where whitespace and comments go normalise to the same string (so
/// `uint32_t magic ;` cannot slip past the framing check any more than
/// `uint32_t magic;`). String literals are kept whole.
pub(crate) fn normalize(text: &[u8]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut i = 0usize;
    let mut word = false;
    let sep = |out: &mut String| {
        if !out.is_empty() && !out.ends_with(' ') {
            out.push(' ');
        }
    };
    while i < text.len() {
        let c = text[i];
        if c == b'/' && text.get(i + 1) == Some(&b'*') {
            i = text[i + 2..].windows(2).position(|w| w == b"*/").map_or(text.len(), |p| i + 2 + p + 2);
            sep(&mut out);
            word = false;
            continue;
        }
        if c == b'/' && text.get(i + 1) == Some(&b'/') {
            i = text[i..].iter().position(|&b| b == b'\n').map_or(text.len(), |p| i + p + 1);
            sep(&mut out);
            word = false;
            continue;
        }
        if c == b'"' {
            let start = i;
            i += 1;
            while i < text.len() && text[i] != b'"' {
                i += if text[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(text.len());
            sep(&mut out);
            out.push_str(&String::from_utf8_lossy(&text[start..i]));
            out.push(' ');
            word = false;
            continue;
        }
        if c.is_ascii_whitespace() {
            sep(&mut out);
            word = false;
        } else if c.is_ascii_alphanumeric() || c == b'_' || c == b'.' {
            // `.` belongs to names such as `packet.header` and to numbers.
            if !word {
                sep(&mut out);
            }
            out.push(c as char);
            word = true;
        } else {
            sep(&mut out);
            // `:=` is one token.
            if c == b':' && text.get(i + 1) == Some(&b'=') {
                out.push_str(":=");
                i += 1;
            } else {
                out.push(c as char);
            }
            out.push(' ');
            word = false;
        }
        i += 1;
    }
    out.trim_end().to_string()
}

/// Byte order of an LTTng-UST 64-bit trace whose metadata declares the
/// standard packet header and context (`None`: another layout).
pub(crate) fn lttng_byte_order(text: &[u8]) -> Option<bool> {
    let norm = normalize(text);
    let decls: Vec<String> = LTTNG_DECLS.iter().map(|d| normalize(d.as_bytes())).collect();
    if !decls.iter().all(|d| norm.contains(d.as_str())) || norm.matches("packet.context :=").count() == 0 {
        return None;
    }
    // Every stream must use that context.
    if norm.matches("packet.context :=").count() != norm.matches("packet.context := struct packet_context ;").count() {
        return None;
    }
    match (norm.contains("byte_order = le ;"), norm.contains("byte_order = be ;")) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

const PACKET_MAGIC: u32 = 0xC1FC_1FC1;
/// header 32 bytes + context up to cpu_id: 84 bytes.
const LTTNG_PACKET_MIN: u64 = 84;

/// Walks the packets of an LTTng-UST stream file: magic, sizes in range,
/// content within packet, packet within file. babeltrace2 2.0.4 aborts on a
/// packet size or content size of 2^63 or more (msg-iter.c:1111), found by
/// fuzzing; this refuses such files first.
pub(crate) fn check_lttng_stream<F: std::io::Read + std::io::Seek>(file: &mut F, len: u64, le: bool) -> Result<(), String> {
    use std::io::Read;
    let mut off = 0u64;
    let mut packets = 0u64;
    let mut head = [0u8; LTTNG_PACKET_MIN as usize];
    let mut reader = std::io::BufReader::with_capacity(4096, file);
    let u32_at = |b: &[u8], at: usize| {
        let w = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        if le { u32::from_le_bytes(w) } else { u32::from_be_bytes(w) }
    };
    let u64_at = |b: &[u8], at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        if le { u64::from_le_bytes(w) } else { u64::from_be_bytes(w) }
    };
    while off < len {
        if len - off < LTTNG_PACKET_MIN {
            return Err(format!("packet #{packets} at byte {off} truncated ({} bytes left)", len - off));
        }
        reader.read_exact(&mut head).map_err(|e| e.to_string())?;
        if u32_at(&head, 0) != PACKET_MAGIC {
            return Err(format!("packet #{packets} at byte {off} has no CTF magic"));
        }
        let content = u64_at(&head, 48);
        let size = u64_at(&head, 56);
        if size % 8 != 0 || size / 8 < LTTNG_PACKET_MIN || content > size || content < LTTNG_PACKET_MIN * 8 || size >= 1 << 62 {
            return Err(format!("packet #{packets} at byte {off} has invalid sizes (content {content} bits, packet {size} bits)"));
        }
        let bytes = size / 8;
        if bytes > len - off {
            return Err(format!("packet #{packets} at byte {off} claims {bytes} bytes, the file has {} left: truncated", len - off));
        }
        let skip = bytes - LTTNG_PACKET_MIN;
        reader.seek_relative(skip as i64).map_err(|e| e.to_string())?;
        off += bytes;
        packets += 1;
    }
    Ok(())
}

/// Most elements one static array of the metadata may declare (nested
/// arrays multiply). ros2_tracing's largest is a 24-byte gid; babeltrace2
/// allocates a field per element when it decodes the event, so a declared
/// length of 10^9 made GLib abort allocating 8 GB (or, with no memory limit,
/// grow to 24 GB until the OOM killer came).
pub(crate) const MAX_ARRAY_ELEMENTS: u64 = 1 << 16;

/// An array length as TSDL writes a constant: decimal, `0x` hex or `0`
/// octal, with an optional `u`/`l` suffix, inside any parentheses and after
/// any unary `+` (`[+1e9]`, `[(1000000000)]` once went past this check).
/// `Ok(None)`: a sequence (its length field's name); `Err`: anything else.
fn array_length(toks: &[&str]) -> Result<Option<u64>, String> {
    let shown = || toks.join(" ");
    if !toks.is_empty() && toks.iter().all(|t| t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')) {
        return Ok(None);
    }
    let core: Vec<&str> = toks.iter().copied().filter(|t| !matches!(*t, "(" | ")" | "+")).collect();
    match core.as_slice() {
        [t] if t.starts_with(|c: char| c.is_ascii_digit()) => {
            let t = t.trim_end_matches(['u', 'U', 'l', 'L']);
            let n = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                u64::from_str_radix(h, 16).ok()
            } else if t.len() > 1 && t.starts_with('0') {
                u64::from_str_radix(&t[1..], 8).ok()
            } else {
                t.parse::<u64>().ok()
            };
            match n {
                Some(n) => Ok(Some(n)),
                // Digits too many for 64 bits: the largest; anything else (`1e9`): not a constant.
                None if t.bytes().all(|b| b.is_ascii_hexdigit() || b == b'x' || b == b'X') => Ok(Some(u64::MAX)),
                None => Err(format!("array length [{}] is not an integer constant", shown())),
            }
        }
        _ => Err(format!("array length [{}] is not an integer constant", shown())),
    }
}

/// One brace block being read by [`check_arrays`].
struct Block {
    /// `struct` or `variant` (fields count), else another block (integer, event, env…).
    fields: Option<bool>,
    /// The name after `struct`/`variant`, recorded with its weight at `}`.
    name: Option<String>,
    /// Elements of the fields so far (a variant: its largest field).
    total: u64,
    /// The statement being read at this level.
    stmt: Stmt,
}

#[derive(Default)]
struct Stmt {
    /// Identifiers outside brackets, in order.
    idents: Vec<String>,
    /// Elements of a type body closed in this statement (`struct { … }`).
    body: Option<u64>,
    /// Product of the array lengths after the declarator.
    mult: u64,
    /// Where `:=` came (a typealias: what follows is the alias's name).
    alias_at: Option<usize>,
}

/// Refuses metadata whose any field, array or structure would hold more
/// than [`MAX_ARRAY_ELEMENTS`] elements, counting what babeltrace2 would
/// allocate: array lengths multiply (`[N][M]`), a structure is the sum of
/// its fields, a variant its largest, and a name given to a type
/// (`typealias … := NAME`, `typedef … NAME`, `struct NAME { … }`) weighs
/// what it names wherever it is used.
fn check_arrays(norm: &str) -> Result<(), String> {
    use std::collections::HashMap;
    let toks: Vec<&str> = norm.split(' ').filter(|t| !t.is_empty()).collect();
    let mut named: HashMap<String, u64> = HashMap::new();
    let new_stmt = || Stmt { mult: 1, ..Default::default() };
    let mut stack = vec![Block { fields: None, name: None, total: 0, stmt: new_stmt() }];
    let too_many = |n: u64, what: &str| {
        Err(format!(
            "metadata declares {what} of {} elements, more than the {MAX_ARRAY_ELEMENTS} accepted",
            if n == u64::MAX { "more than 2^64".to_string() } else { n.to_string() }
        ))
    };
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i];
        let top = stack.len() - 1;
        match t {
            "[" => {
                let close = toks[i + 1..].iter().position(|t| *t == "]").map(|p| i + 1 + p).ok_or("metadata: an array length without `]`")?;
                if let Some(n) = array_length(&toks[i + 1..close])? {
                    let st = &mut stack[top].stmt;
                    st.mult = st.mult.saturating_mul(n);
                    if st.mult > MAX_ARRAY_ELEMENTS {
                        return too_many(st.mult, &format!("an array ([{}])", toks[i + 1..close].join(" ")));
                    }
                }
                i = close + 1;
                continue;
            }
            "{" => {
                if stack.len() > 1024 {
                    return Err("metadata nests structures more than 1024 deep".into());
                }
                let st = &stack[top].stmt;
                let kw = st.idents.iter().rposition(|w| w == "struct" || w == "variant");
                // `struct NAME {` or `struct {` (the keyword last or last but one).
                let fields = kw.filter(|k| *k + 2 >= st.idents.len()).map(|k| st.idents[k] == "variant");
                let name = kw.and_then(|k| st.idents.get(k + 1)).map(|n| format!("{} {n}", st.idents[kw.unwrap_or(0)]));
                stack.push(Block { fields, name, total: 0, stmt: new_stmt() });
            }
            "}" => {
                if stack.len() > 1 {
                    let b = stack.pop().expect("more than one");
                    let w = if b.fields.is_some() { b.total.max(1) } else { 1 };
                    if w > MAX_ARRAY_ELEMENTS {
                        return too_many(w, "a structure");
                    }
                    if let Some(n) = b.name {
                        named.insert(n, w);
                    }
                    let last = stack.len() - 1;
                    let st = &mut stack[last].stmt;
                    st.body = Some(st.body.unwrap_or(1).max(w));
                }
            }
            ":=" => {
                let st = &mut stack[top].stmt;
                st.alias_at = Some(st.idents.len());
            }
            ";" => {
                let st = std::mem::replace(&mut stack[top].stmt, new_stmt());
                // The type's weight: its body, or the largest named type it mentions.
                let type_end = st.alias_at.unwrap_or(st.idents.len().saturating_sub(1));
                let mut w = st.body.unwrap_or(1);
                for k in 0..type_end.min(st.idents.len()) {
                    if let Some(n) = named.get(&st.idents[k]) {
                        w = w.max(*n);
                    }
                    if let Some(n) = st.idents.get(k + 1).and_then(|n| named.get(&format!("{} {n}", st.idents[k]))) {
                        w = w.max(*n);
                    }
                }
                let field = w.saturating_mul(st.mult);
                if field > MAX_ARRAY_ELEMENTS {
                    return too_many(field, "a field");
                }
                if let Some(at) = st.alias_at.filter(|_| st.idents.first().map(String::as_str) == Some("typealias")) {
                    named.insert(st.idents[at..].join(" "), field);
                } else if st.idents.first().map(String::as_str) == Some("typedef") {
                    if let Some(n) = st.idents.last() {
                        named.insert(n.clone(), field);
                    }
                } else if let Some(variant) = stack[top].fields {
                    let b = &mut stack[top];
                    b.total = if variant { b.total.max(field) } else { b.total.saturating_add(field) };
                    if b.total > MAX_ARRAY_ELEMENTS {
                        return too_many(b.total, "a structure");
                    }
                }
            }
            t if t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') => stack[top].stmt.idents.push(t.to_string()),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// babeltrace2 2.0.4 aborts (msg-iter.c, `set_current_packet_content_sizes`)
/// when a structure declares one of `content_size` / `packet_size` without
/// the other; refuse such metadata. Scans identifiers per brace block,
/// skipping comments and string literals. Static arrays are capped too
/// ([`MAX_ARRAY_ELEMENTS`]).
fn check_tsdl(text: &[u8]) -> Result<(), String> {
    check_arrays(&normalize(text))?;
    let mut stack: Vec<(bool, bool, usize)> = vec![(false, false, 0)];
    let mut i = 0usize;
    while i < text.len() {
        let c = text[i];
        if c == b'/' && text.get(i + 1) == Some(&b'*') {
            i = text[i + 2..].windows(2).position(|w| w == b"*/").map_or(text.len(), |p| i + 2 + p + 2);
            continue;
        }
        if c == b'/' && text.get(i + 1) == Some(&b'/') {
            i = text[i..].iter().position(|&b| b == b'\n').map_or(text.len(), |p| i + p + 1);
            continue;
        }
        if c == b'"' {
            let mut j = i + 1;
            while j < text.len() && text[j] != b'"' {
                j += if text[j] == b'\\' { 2 } else { 1 };
            }
            i = j + 1;
            continue;
        }
        if c == b'{' {
            if stack.len() > 1024 {
                return Err("metadata nests structures more than 1024 deep".into());
            }
            stack.push((false, false, i));
        } else if c == b'}' {
            if let Some((content, packet, at)) = stack.pop() {
                if content != packet {
                    return Err(format!(
                        "metadata declares `{}` without `{}` in the structure at byte {at} of its text",
                        if content { "content_size" } else { "packet_size" },
                        if content { "packet_size" } else { "content_size" }
                    ));
                }
            }
            if stack.is_empty() {
                stack.push((false, false, i));
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < text.len() && (text[i].is_ascii_alphanumeric() || text[i] == b'_') {
                i += 1;
            }
            let top = stack.len() - 1;
            match &text[start..i] {
                b"content_size" => stack[top].0 = true,
                b"packet_size" => stack[top].1 = true,
                _ => {}
            }
            continue;
        }
        i += 1;
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
    fn a_packet_context_with_one_size_field_is_refused() {
        let ok = b"struct packet_context { uint64_t content_size; /* packet_size */ uint64_t packet_size; };";
        assert_eq!(check_tsdl(ok), Ok(()));
        let bad = b"struct packet_context { uint64_t content_size; uint64_t pXcket_size; }; // packet_size";
        assert!(check_tsdl(bad).expect_err("one size").contains("content_size"));
        let m = packet(b"struct s { uint64_t packet_size; };", 128);
        assert!(check(&m).is_err());
    }

    /// The standard LTTng-UST declarations in the layout lttng writes them, for the tests below.
    fn lttng_text(sep: &str) -> String {
        let mut t = String::from("/* CTF 1.8 */\ntrace { byte_order = le; };\n");
        for d in LTTNG_DECLS {
            t.push_str(&d.replace(' ', sep));
            t.push('\n');
        }
        t.push_str("stream { packet.context := struct packet_context; };\n");
        t
    }

    #[test]
    fn the_framing_check_does_not_depend_on_whitespace_or_comments() {
        assert_eq!(lttng_byte_order(lttng_text(" ").as_bytes()), Some(true));
        // The case: one space before a semicolon skipped the stream check (and babeltrace2 aborted).
        let spaced = lttng_text(" ").replace("uint32_t magic;", "uint32_t magic ;");
        assert_eq!(lttng_byte_order(spaced.as_bytes()), Some(true));
        let odd = lttng_text("\n\t /* x */ ").replace(":=", " /* y */ :=").replace("= le;", "=le ;");
        assert_eq!(lttng_byte_order(odd.as_bytes()), Some(true));
        // Another layout is still another layout.
        let other = lttng_text(" ").replace("uint64_t packet_size;", "uint32_t packet_size;");
        assert_eq!(lttng_byte_order(other.as_bytes()), None);
        assert_eq!(normalize(b"a:=b;/*c*/ d[ 24 ]\"s ;\""), "a := b ; d [ 24 ] \"s ;\"");
    }

    #[test]
    fn huge_static_arrays_are_refused() {
        assert_eq!(check_tsdl(b"event { fields := struct { integer { size = 8; } _gid[24]; }; };"), Ok(()));
        let e = check_tsdl(b"event { fields := struct { integer { size = 8; } _gid[1000000000]; }; };").unwrap_err();
        assert!(e.contains("1000000000 elements"), "{e}");
        let e = check_tsdl(b"struct { uint8_t m[1000][1000]; };").unwrap_err();
        assert!(e.contains("1000000 elements"), "{e}");
        // Unary signs, parentheses, a float: refused or counted, never passed over.
        for bad in ["[+1000000000]", "[(1000000000)]", "[(+(1000000000))]", "[1e9]", "[-1]", "[1000000000 * 1]"] {
            let text = format!("struct {{ uint8_t m{bad}; }};");
            assert!(check_tsdl(text.as_bytes()).is_err(), "{bad} passed");
        }
        assert_eq!(check_tsdl(b"struct { uint8_t m[(24)]; uint8_t k[0x10u]; };"), Ok(()));
        // Names given to types weigh what they name: aliases, typedefs, structures, nested.
        let alias = b"typealias integer { size = 8; } := uint8_t; typealias struct { uint8_t a[60000]; } := big; event { fields := struct { big x[60000]; }; };";
        assert!(check_tsdl(alias).unwrap_err().contains("elements"));
        let typedef = b"typedef uint8_t row[60000]; struct s { row r[2]; };";
        assert!(check_tsdl(typedef).is_err());
        let named = b"struct inner { uint8_t a[40000]; }; struct outer { struct inner x; struct inner y; };";
        assert!(check_tsdl(named).unwrap_err().contains("structure"));
        let nested = b"struct { struct { uint8_t a[300]; } b[300]; };";
        assert!(check_tsdl(nested).is_err());
        // A variant holds one of its fields: its largest, not their sum.
        assert_eq!(check_tsdl(b"variant v { uint8_t a[40000]; uint8_t b[40000]; };"), Ok(()));
        assert!(check_tsdl(b"struct { uint8_t m[0x7fffffff]; }").is_err());
        assert!(check_tsdl(b"struct { uint8_t m[99999999999999999999999]; };").unwrap_err().contains("more than 2^64"));
        // Sequences take their length from the data (checked there by babeltrace2 against the packet).
        assert_eq!(check_tsdl(b"struct { uint32_t n; uint8_t s[n]; }"), Ok(()));
        // In a comment or a string it is no declaration.
        assert_eq!(check_tsdl(b"/* x[1000000000] */ env { a = \"[1000000000]\"; };"), Ok(()));
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
