//! A small table abstraction shared by every sink: a record type lists its
//! columns once, and hands out typed values; table, CSV, JSON Lines, JSON and
//! Parquet writers work on any record type.

use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::{Guid, GuidPrefix};
use std::fmt::Write as _;
use std::net::SocketAddr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColType {
    U64,
    I64,
    F64,
    Bool,
    Str,
}

#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub name: &'static str,
    pub ty: ColType,
}

pub const fn col(name: &'static str, ty: ColType) -> Column {
    Column { name, ty }
}

/// One cell. Structured variants are formatted by the sink without allocating.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    Null,
    U(u64),
    I(i64),
    F(f64),
    B(bool),
    S(&'a str),
    Guid(Guid),
    Prefix(GuidPrefix),
    Addr(SocketAddr),
    Kind(SubmsgKind),
    /// Numbers of a sequence/fragment set: base and a 256-bit map.
    Set(i64, [u32; 8], u32),
    /// Vendor id as `0x0110`.
    Vendor(u16),
    /// Bit set of PCP values 0–7, printed as a list.
    Pcps(u8),
    /// A list of strings (space-separated in text, an array in JSON).
    Strs(&'a [String]),
    /// Vendor ids, as `Vendor` each, in a list as `Strs`.
    Vendors(&'a [u16]),
    /// A typed value written as its `Display` text (a string in JSON).
    Text(&'a dyn Text),
}

/// What [`Value::Text`] holds: a value with a text form.
pub trait Text: std::fmt::Display + std::fmt::Debug {}
impl<T: std::fmt::Display + std::fmt::Debug> Text for T {}

impl Value<'_> {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// Text of this kind of value may hold a comma, quote or newline (CSV must quote it).
    pub fn may_need_quoting(&self) -> bool {
        matches!(self, Value::S(_) | Value::Strs(_) | Value::Text(_))
    }

    /// Appends the textual form (CSV / table) to `out`.
    pub fn write_text(&self, out: &mut String) {
        match *self {
            Value::Null => {}
            Value::U(v) => out.push_str(itoa::Buffer::new().format(v)),
            Value::I(v) => out.push_str(itoa::Buffer::new().format(v)),
            Value::F(v) => {
                if v.is_finite() {
                    let _ = write!(out, "{}", round_sig(v));
                }
            }
            Value::B(v) => out.push_str(if v { "true" } else { "false" }),
            Value::S(s) => out.push_str(s),
            Value::Guid(g) => {
                push_hex(out, &g.prefix.0);
                push_hex(out, &g.entity.0);
            }
            Value::Prefix(p) => push_hex(out, &p.0),
            Value::Addr(SocketAddr::V4(a)) => {
                // Same text as SocketAddr's Display, without the formatting machinery.
                let mut b = itoa::Buffer::new();
                for (i, o) in a.ip().octets().iter().enumerate() {
                    if i > 0 {
                        out.push('.');
                    }
                    out.push_str(b.format(*o));
                }
                out.push(':');
                out.push_str(b.format(a.port()));
            }
            Value::Addr(a) => {
                let _ = write!(out, "{a}");
            }
            Value::Kind(k) => out.push_str(&k.name()),
            Value::Set(base, bits, n) => {
                let mut first = true;
                for i in 0..n.min(256) {
                    if bits[(i / 32) as usize] & (1 << (31 - i % 32)) != 0 {
                        if !first {
                            out.push(' ');
                        }
                        first = false;
                        let _ = write!(out, "{}", base + i as i64);
                    }
                }
            }
            Value::Vendor(v) => {
                let _ = write!(out, "0x{v:04x}");
            }
            Value::Pcps(m) => {
                let mut first = true;
                for p in 0..8 {
                    if m & (1 << p) != 0 {
                        if !first {
                            out.push(' ');
                        }
                        first = false;
                        let _ = write!(out, "{p}");
                    }
                }
            }
            Value::Strs(v) => out.push_str(&v.join(" ")),
            Value::Vendors(v) => {
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    Value::Vendor(*x).write_text(out);
                }
            }
            Value::Text(t) => {
                let _ = write!(out, "{t}");
            }
        }
    }

    /// Appends the JSON form to `out`.
    pub fn write_json(&self, out: &mut String) {
        match *self {
            Value::Null => out.push_str("null"),
            Value::U(_) | Value::I(_) | Value::B(_) => self.write_text(out),
            Value::F(v) => {
                if v.is_finite() {
                    let _ = write!(out, "{v}");
                } else {
                    out.push_str("null");
                }
            }
            Value::S(s) => json_string(out, s),
            Value::Set(base, bits, n) => {
                out.push('[');
                let mut first = true;
                for i in 0..n.min(256) {
                    if bits[(i / 32) as usize] & (1 << (31 - i % 32)) != 0 {
                        if !first {
                            out.push(',');
                        }
                        first = false;
                        let _ = write!(out, "{}", base + i as i64);
                    }
                }
                out.push(']');
            }
            Value::Pcps(m) => {
                out.push('[');
                let mut first = true;
                for p in 0..8 {
                    if m & (1 << p) != 0 {
                        if !first {
                            out.push(',');
                        }
                        first = false;
                        let _ = write!(out, "{p}");
                    }
                }
                out.push(']');
            }
            Value::Strs(v) => {
                out.push('[');
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    json_string(out, x);
                }
                out.push(']');
            }
            Value::Vendors(v) => {
                out.push('[');
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    Value::Vendor(*x).write_json(out);
                }
                out.push(']');
            }
            Value::Text(t) => json_string(out, &t.to_string()),
            _ => {
                out.push('"');
                self.write_text(out);
                out.push('"');
            }
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::U(v) => Some(v as f64),
            Value::I(v) => Some(v as f64),
            Value::F(v) => Some(v),
            _ => None,
        }
    }
}

/// Up to 6 significant decimals after the point, trailing zeros trimmed.
/// Lower-case hex of `bytes`, as the wire crate's Display prints GUIDs.
fn push_hex(out: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
}

fn round_sig(v: f64) -> String {
    let v = if v == 0.0 { 0.0 } else { v }; // no "-0"
    let s = if v.abs() >= 1e15 || (v != 0.0 && v.abs() < 1e-6) { format!("{v:e}") } else { format!("{v:.6}") };
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

pub fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A row type with a fixed list of columns.
pub trait Record {
    fn columns() -> &'static [Column];
    fn value(&self, column: usize) -> Value<'_>;
}

/// Declares a type's columns once: name, type and how the value is read,
/// generating [`Record::columns`] and [`Record::value`] from the one list
/// (so a column can never be listed without a value, or in another order).
///
/// ```
/// use ddscope_core::record::{record_json, Record, Value};
/// struct MyRow { topic: String, samples: u64 }
/// ddscope_core::record!(MyRow, r, {
///     topic_name: Str => Value::S(&r.topic),
///     samples: U64 => Value::U(r.samples),
/// });
/// assert_eq!(MyRow::columns()[1].name, "samples");
/// let mut json = String::new();
/// record_json(&MyRow { topic: "/chatter".into(), samples: 3 }, &mut json);
/// assert_eq!(json, r#"{"topic_name":"/chatter","samples":3}"#);
/// ```
///
/// Values that share a computation may name it first, in a `let { … }` block
/// evaluated before the column's value (it sees the row as `$r`):
///
/// ```
/// use ddscope_core::record::{Record, Value};
/// struct Hop { ms: Option<f64>, n: u64 }
/// ddscope_core::record!(Hop, r, let { let f = |v: f64| if r.n > 0 { Value::F(v) } else { Value::Null }; }, {
///     mean_ms: F64 => r.ms.map_or(Value::Null, f),
///     n: U64 => Value::U(r.n),
/// });
/// assert!(matches!(Hop { ms: Some(1.5), n: 0 }.value(0), Value::Null));
/// ```
#[macro_export]
macro_rules! record {
    ($ty:ty, $r:ident, { $($name:ident : $ct:ident => $val:expr),* $(,)? }) => {
        $crate::record!($ty, $r, let {}, { $($name : $ct => $val),* });
    };
    ($ty:ty, $r:ident, let { $($pre:stmt;)* }, { $($name:ident : $ct:ident => $val:expr),* $(,)? }) => {
        const _: () = {
            #[allow(non_camel_case_types)]
            #[derive(Clone, Copy)]
            enum Col { $($name),* }
            const ORDER: &[Col] = &[$(Col::$name),*];
            const COLUMNS: &[$crate::record::Column] =
                &[$($crate::record::col(stringify!($name), $crate::record::ColType::$ct)),*];
            impl $crate::record::Record for $ty {
                fn columns() -> &'static [$crate::record::Column] {
                    COLUMNS
                }
                #[inline]
                fn value(&self, column: usize) -> $crate::record::Value<'_> {
                    let $r = self;
                    $($pre)*
                    match ORDER.get(column) {
                        $(Some(Col::$name) => $val,)*
                        None => $crate::record::Value::Null,
                    }
                }
            }
        };
    };
}

/// `Value::U` of an optional unsigned number, `Null` when absent.
pub fn opt_u<T: Into<u64>>(v: Option<T>) -> Value<'static> {
    v.map_or(Value::Null, |v| Value::U(v.into()))
}

/// `Value::I` of an optional signed number, `Null` when absent.
pub fn opt_i<T: Into<i64>>(v: Option<T>) -> Value<'static> {
    v.map_or(Value::Null, |v| Value::I(v.into()))
}

/// Writes one record as a JSON object (all columns, nulls included).
pub fn record_json<R: Record>(r: &R, out: &mut String) {
    out.push('{');
    for (i, c) in R::columns().iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_string(out, c.name);
        out.push(':');
        r.value(i).write_json(out);
    }
    out.push('}');
}

/// A record as a serde map of its columns (name → value, nulls included), for
/// serde sinks such as `serde_json::Value`: the same columns and values as
/// [`record_json`], numbers as numbers of their column's type.
pub struct Serde<'a, R>(pub &'a R);

impl<R: Record> serde::Serialize for Serde<'_, R> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let cols = R::columns();
        let mut m = s.serialize_map(Some(cols.len()))?;
        for (i, c) in cols.iter().enumerate() {
            m.serialize_entry(c.name, &self.0.value(i))?;
        }
        m.end()
    }
}

/// A value as serde sees it: what [`Value::write_json`] writes, a finite float as a float.
impl serde::Serialize for Value<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Value::Null => s.serialize_none(),
            Value::U(v) => s.serialize_u64(v),
            Value::I(v) => s.serialize_i64(v),
            Value::F(v) if v.is_finite() => s.serialize_f64(v),
            Value::F(_) => s.serialize_none(),
            Value::B(v) => s.serialize_bool(v),
            Value::S(v) => s.serialize_str(v),
            Value::Strs(v) => s.collect_seq(v),
            Value::Vendors(v) => s.collect_seq(v.iter().map(|x| format!("0x{x:04x}"))),
            Value::Text(t) => s.collect_str(t),
            Value::Set(base, bits, n) => s.collect_seq((0..n.min(256)).filter(|i| bits[(i / 32) as usize] & (1 << (31 - i % 32)) != 0).map(|i| base + i as i64)),
            Value::Pcps(m) => s.collect_seq((0..8u8).filter(|p| m & (1 << p) != 0)),
            _ => {
                let mut text = String::new();
                self.write_text(&mut text);
                s.serialize_str(&text)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_paths_print_like_display() {
        // Oracle: the standard library's and the wire crate's Display.
        let g = Guid { prefix: GuidPrefix([0x01, 0x0f, 0xab, 0, 9, 0x10, 0xff, 0x7e, 1, 2, 3, 4]), entity: ddscope_wire::EntityId([0, 0, 0x12, 0xc2]) };
        for v in [Value::Guid(g), Value::Prefix(g.prefix)] {
            let mut s = String::new();
            v.write_text(&mut s);
            let want = match v {
                Value::Guid(g) => g.to_string(),
                Value::Prefix(p) => p.to_string(),
                _ => unreachable!(),
            };
            assert_eq!(s, want);
        }
        for a in ["0.0.0.0:0", "255.255.255.255:65535", "10.1.20.3:7411", "[fe80::1]:7400", "[::ffff:10.0.0.1]:1"] {
            let a: SocketAddr = a.parse().unwrap();
            let mut s = String::new();
            Value::Addr(a).write_text(&mut s);
            assert_eq!(s, a.to_string());
        }
        for (u, i) in [(0u64, 0i64), (u64::MAX, i64::MIN), (42, -7), (1_000_000, i64::MAX)] {
            let (mut a, mut b) = (String::new(), String::new());
            Value::U(u).write_text(&mut a);
            Value::I(i).write_text(&mut b);
            assert_eq!((a, b), (u.to_string(), i.to_string()));
        }
    }

    #[test]
    fn text_and_json() {
        let mut s = String::new();
        Value::F(1.5).write_text(&mut s);
        assert_eq!(s, "1.5");
        s.clear();
        Value::F(2.0).write_text(&mut s);
        assert_eq!(s, "2");
        s.clear();
        Value::S("a\"b").write_json(&mut s);
        assert_eq!(s, "\"a\\\"b\"");
        s.clear();
        let mut bits = [0u32; 8];
        bits[0] = 0x8000_0000 | 0x2000_0000;
        Value::Set(10, bits, 32).write_json(&mut s);
        assert_eq!(s, "[10,12]");
        s.clear();
        Value::Pcps(0b1010_0000).write_text(&mut s);
        assert_eq!(s, "5 7");
        s.clear();
        Value::Vendor(0x0110).write_json(&mut s);
        assert_eq!(s, "\"0x0110\"");
    }

    #[test]
    fn serde_writes_what_record_json_writes() {
        struct Row {
            name: String,
            n: u64,
            f: f64,
            list: Vec<String>,
            pcps: u8,
            nothing: Option<i64>,
        }
        crate::record!(Row, r, {
            name: Str => Value::S(&r.name),
            n: U64 => Value::U(r.n),
            f: F64 => Value::F(r.f),
            list: Str => Value::Strs(&r.list),
            pcp: Str => Value::Pcps(r.pcps),
            vendor: Str => Value::Vendor(0x0110),
            vendors: Str => Value::Vendors(&[0x0110, 0x010f]),
            text: Str => Value::Text(&r.f),
            nothing: I64 => r.nothing.map_or(Value::Null, Value::I),
        });
        let r = Row { name: "/t".into(), n: 3, f: 2.5, list: vec!["a".into(), "b".into()], pcps: 0b1010_0000, nothing: None };
        let mut json = String::new();
        record_json(&r, &mut json);
        let want: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(serde_json::to_value(Serde(&r)).unwrap(), want);
        assert!(json.contains(r#""vendors":["0x0110","0x010f"],"text":"2.5""#), "{json}");
        // a float stays a float, as serde writes it
        assert_eq!(serde_json::to_string(&Value::F(2.0)).unwrap(), "2.0");
    }
}
