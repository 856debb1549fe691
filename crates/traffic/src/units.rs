//! Quantities with units, parsed from the strings people type.
//!
//! - [`Rate`]: bits per second. `"2.5G"`, `"1Gbit"`, `"89.152M"`, `"100mbit"`,
//!   `"1000000"` (plain number = bit/s). Decimal prefixes, as link rates are.
//! - [`Bytes`]: `"1500"`, `"64KiB"` (binary), `"64KB"`/`"64k"` (decimal), `"2.76MB"`.
//! - [`Nanos`]: `"500us"`, `"15ms"`, `"10s"`, `"250ns"`, `"1.5s"`, `"2m"`.
//! - [`Percent`]: `"50%"` or a fraction `0.5`.
//!
//! Each type deserialises from a string or a number, and prints back in a form
//! its parser accepts.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read {input:?} as {what}: {reason}")]
pub struct ParseUnitError {
    pub input: String,
    pub what: &'static str,
    pub reason: String,
}

fn err(input: &str, what: &'static str, reason: impl Into<String>) -> ParseUnitError {
    ParseUnitError { input: input.to_string(), what, reason: reason.into() }
}

/// `v × mult` as a whole number. A value of 2^64 or more is refused (a
/// float-to-integer cast would saturate silently at 2^64 − 1).
fn whole(input: &str, what: &'static str, v: f64, mult: f64) -> Result<u64, ParseUnitError> {
    let x = (v * mult).round();
    if !x.is_finite() || x >= 18_446_744_073_709_551_616.0 {
        return Err(err(input, what, "too large (at most 2^64 - 1)"));
    }
    Ok(x as u64)
}

/// Splits `"2.5Gbit"` into `(2.5, "gbit")` (suffix lower-cased, trimmed).
fn split_number(s: &str, what: &'static str) -> Result<(f64, String), ParseUnitError> {
    let t = s.trim();
    let end = t
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == '_'))
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(end);
    let num = num.replace('_', "");
    if num.is_empty() {
        return Err(err(s, what, "no number"));
    }
    let v: f64 = num.parse().map_err(|_| err(s, what, "bad number"))?;
    if !v.is_finite() {
        return Err(err(s, what, "not a finite number"));
    }
    Ok((v, suffix.trim().to_ascii_lowercase()))
}

/// A bit rate in bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rate(pub u64);

impl Rate {
    pub fn bits_per_sec(self) -> u64 {
        self.0
    }
    pub fn from_mbit(m: f64) -> Self {
        Rate((m * 1e6).round() as u64)
    }
    /// Nanoseconds needed to serialise `bytes` at this rate (exact rational, rounded up).
    pub fn tx_time_ns(self, bytes: u64) -> u64 {
        assert!(self.0 > 0, "zero link rate");
        let bits = bytes as u128 * 8 * 1_000_000_000;
        bits.div_ceil(self.0 as u128) as u64
    }
}

impl FromStr for Rate {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const W: &str = "a bit rate";
        let (v, suf) = split_number(s, W)?;
        let bare = suf.is_empty();
        let suf = suf.trim_end_matches("/s").trim_end_matches("ps");
        let suf = suf.trim_end_matches("bit").trim_end_matches("bits").trim_end_matches('b');
        let mult = match suf {
            // 2500 what? Bits per second are almost never meant: refused, with a hint.
            "" if bare && v != 0.0 => return Err(err(s, W, format!("{} what? e.g. {0}M (bit/s: {0}bit)", s.trim()))),
            "" => 1.0,
            "k" => 1e3,
            "m" => 1e6,
            "g" => 1e9,
            "t" => 1e12,
            other => return Err(err(s, W, format!("unknown unit {other:?} (use k, M, G)"))),
        };
        if v < 0.0 {
            return Err(err(s, W, "negative"));
        }
        whole(s, W, v, mult).map(Rate)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (div, p) in [(1_000_000_000_000u64, "T"), (1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")] {
            if b >= div && b % (div / 1000) == 0 {
                let v = b as f64 / div as f64;
                return write!(f, "{}{p}bit", trim_float(v));
            }
        }
        write!(f, "{b}bit")
    }
}

/// A size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Bytes(pub u64);

impl FromStr for Bytes {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const W: &str = "a byte size";
        let (v, suf) = split_number(s, W)?;
        let mult = match suf.as_str() {
            "" | "b" | "byte" | "bytes" => 1.0,
            "k" | "kb" => 1e3,
            "m" | "mb" => 1e6,
            "g" | "gb" => 1e9,
            "kib" | "ki" => 1024.0,
            "mib" | "mi" => 1024.0 * 1024.0,
            "gib" | "gi" => 1024.0 * 1024.0 * 1024.0,
            other => return Err(err(s, W, format!("unknown unit {other:?} (use B, KB, KiB, MB, MiB)"))),
        };
        if v < 0.0 {
            return Err(err(s, W, "negative"));
        }
        whole(s, W, v, mult).map(Bytes)
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A duration in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Nanos(pub u64);

impl Nanos {
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    pub fn from_secs_f64(s: f64) -> Self {
        Nanos((s * 1e9).round() as u64)
    }
    pub fn as_duration(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0)
    }
}

/// Parses a signed duration such as `"-37s"` or `"+1.5ms"` into nanoseconds.
pub fn parse_signed_nanos(s: &str) -> Result<i64, ParseUnitError> {
    let t = s.trim();
    let (neg, rest) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let n: Nanos = rest.parse()?;
    let v = i64::try_from(n.0).map_err(|_| err(s, "a duration", "too large"))?;
    Ok(if neg { -v } else { v })
}

impl FromStr for Nanos {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const W: &str = "a duration";
        let (v, suf) = split_number(s, W)?;
        let mult = match suf.as_str() {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            // 12 what? Seconds, milliseconds and microseconds are all plausible: refused, with a hint.
            "" if v != 0.0 => return Err(err(s, W, format!("{} what? e.g. {0}ms or {0}s", s.trim()))),
            "" => 0.0,
            "m" | "min" => 60e9,
            "h" => 3600e9,
            other => return Err(err(s, W, format!("unknown unit {other:?} (use ns, us, ms, s, m, h)"))),
        };
        if v < 0.0 {
            return Err(err(s, W, "negative"));
        }
        let ns = (v * mult).round();
        if !ns.is_finite() || ns >= u64::MAX as f64 {
            return Err(err(s, W, "too large"));
        }
        Ok(Nanos(ns as u64))
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (div, u) in [(3_600_000_000_000u64, "h"), (1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
            if n >= div && n % (div / 1000).max(1) == 0 {
                return write!(f, "{}{u}", trim_float(n as f64 / div as f64));
            }
        }
        write!(f, "{n}ns")
    }
}

/// A share of something, stored as a fraction in [0, 1].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Percent(pub f64);

impl Percent {
    pub fn fraction(self) -> f64 {
        self.0
    }
}

impl FromStr for Percent {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        const W: &str = "a percentage";
        let (v, suf) = split_number(s, W)?;
        let f = match suf.as_str() {
            "%" => v / 100.0,
            // 50 is 50 %, 0.4 is 40 %; 1 could be either.
            "" if v == 1.0 => return Err(err(s, W, "1 what? write 1% or 100%")),
            "" if v > 1.0 => v / 100.0,
            "" => v,
            other => return Err(err(s, W, format!("unknown unit {other:?} (write 50%, 50 or 0.5)"))),
        };
        if !(0.0..=1.0).contains(&f) {
            return Err(err(s, W, "must lie between 0% and 100%"));
        }
        Ok(Percent(f))
    }
}

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", trim_float(self.0 * 100.0))
    }
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

macro_rules! serde_via_str {
    ($t:ty, $num:expr) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                #[derive(Deserialize)]
                #[serde(untagged)]
                enum Raw {
                    S(String),
                    I(u64),
                    F(f64),
                }
                let from_num: fn(f64) -> Result<$t, String> = $num;
                match Raw::deserialize(d)? {
                    Raw::S(s) => s.parse().map_err(serde::de::Error::custom),
                    Raw::I(i) => from_num(i as f64).map_err(serde::de::Error::custom),
                    Raw::F(f) => from_num(f).map_err(serde::de::Error::custom),
                }
            }
        }
    };
}

// A bare number for a rate or a duration is refused (which unit?), 0 excepted.
serde_via_str!(Rate, |v| if v == 0.0 { Ok(Rate(0)) } else if v > 0.0 { Err(format!("a bit rate of {v} what? write e.g. \"{v}M\"")) } else { Err("negative rate".into()) });
serde_via_str!(Bytes, |v| if v >= 0.0 { whole("", "a byte size", v, 1.0).map(Bytes).map_err(|e| e.reason) } else { Err("negative size".into()) });
serde_via_str!(Nanos, |v| if v == 0.0 { Ok(Nanos(0)) } else if v > 0.0 { Err(format!("a duration of {v} what? write e.g. \"{v}ms\" or \"{v}s\"")) } else { Err("negative duration".into()) });
// A bare number for a percentage is a fraction (0.5) when < 1, otherwise percent (50); 1 is refused.
serde_via_str!(Percent, |v| {
    if v == 1.0 {
        return Err("a percentage of 1: write \"1%\" or \"100%\"".into());
    }
    let f = if v < 1.0 { v } else { v / 100.0 };
    if (0.0..=1.0).contains(&f) { Ok(Percent(f)) } else { Err("percentage out of range".into()) }
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!("2.5G".parse::<Rate>().unwrap(), Rate(2_500_000_000));
        assert_eq!("1Gbit".parse::<Rate>().unwrap(), Rate(1_000_000_000));
        assert_eq!("89.152M".parse::<Rate>().unwrap(), Rate(89_152_000));
        assert_eq!("100mbit".parse::<Rate>().unwrap(), Rate(100_000_000));
        assert_eq!("12.82Mbps".parse::<Rate>().unwrap(), Rate(12_820_000));
        assert_eq!("1000bit".parse::<Rate>().unwrap(), Rate(1000));
        assert!("5 furlongs".parse::<Rate>().is_err());
        assert_eq!(Rate(2_500_000_000).to_string(), "2.5Gbit");
        assert_eq!(Rate(2_500_000_000).to_string().parse::<Rate>().unwrap(), Rate(2_500_000_000));
    }

    #[test]
    fn tx_time_is_exact() {
        // 1500 bytes at 1 Gbit/s = 12 us.
        assert_eq!(Rate(1_000_000_000).tx_time_ns(1500), 12_000);
        // 1538 bytes at 2.5 Gbit/s = 4921.6 ns -> rounded up.
        assert_eq!(Rate(2_500_000_000).tx_time_ns(1538), 4922);
    }

    #[test]
    fn values_of_2_64_or_more_are_refused_not_saturated() {
        for s in ["18446744073709551616", "99999999999999999999KiB", "1e30", "20000000000000000000B"] {
            assert!(s.parse::<Bytes>().is_err(), "{s}");
        }
        assert_eq!("18446744073709549568".parse::<Bytes>().unwrap(), Bytes(18_446_744_073_709_549_568));
        assert!("100000000000T".parse::<Rate>().unwrap_err().to_string().contains("too large"));
        assert!("6000000000000h".parse::<Nanos>().is_err());
        #[derive(serde::Deserialize)]
        struct T {
            #[allow(dead_code)]
            b: Bytes,
        }
        assert!(toml::from_str::<T>("b = 1e20").is_err());
        assert!(toml::from_str::<T>("b = 9223372036854775807").is_ok());
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!("64KiB".parse::<Bytes>().unwrap(), Bytes(65536));
        assert_eq!("64KB".parse::<Bytes>().unwrap(), Bytes(64000));
        assert_eq!("2.76MB".parse::<Bytes>().unwrap(), Bytes(2_760_000));
        assert_eq!("500us".parse::<Nanos>().unwrap(), Nanos(500_000));
        assert_eq!("15ms".parse::<Nanos>().unwrap(), Nanos(15_000_000));
        assert_eq!("10s".parse::<Nanos>().unwrap(), Nanos(10_000_000_000));
        assert_eq!("1.5s".parse::<Nanos>().unwrap().to_string(), "1.5s");
        assert_eq!(parse_signed_nanos("-37s").unwrap(), -37_000_000_000);
        assert_eq!(parse_signed_nanos("+2ms").unwrap(), 2_000_000);
        assert!("-1s".parse::<Nanos>().is_err());
        // A bare number: which unit? Refused with a hint (0 is 0 in any unit).
        let e = "12".parse::<Nanos>().unwrap_err().to_string();
        assert!(e.contains("12 what? e.g. 12ms or 12s"), "{e}");
        assert!(parse_signed_nanos("37").is_err());
        assert_eq!("0".parse::<Nanos>().unwrap(), Nanos(0));
        let e = "2500".parse::<Rate>().unwrap_err().to_string();
        assert!(e.contains("2500 what? e.g. 2500M"), "{e}");
        assert_eq!("2500bit".parse::<Rate>().unwrap(), Rate(2500));
        assert_eq!("0".parse::<Rate>().unwrap(), Rate(0));
    }

    #[test]
    fn percents() {
        assert_eq!("50%".parse::<Percent>().unwrap(), Percent(0.5));
        assert_eq!("0.4".parse::<Percent>().unwrap(), Percent(0.4));
        assert!("150%".parse::<Percent>().is_err());
        assert_eq!("50".parse::<Percent>().unwrap(), Percent(0.5));
        assert_eq!("100".parse::<Percent>().unwrap(), Percent(1.0));
        assert!("1".parse::<Percent>().is_err(), "1 % or 100 %?");
        assert!("150".parse::<Percent>().is_err());
    }

    #[test]
    fn serde_from_toml() {
        #[derive(Deserialize)]
        struct T {
            a: Rate,
            b: Bytes,
            c: Nanos,
            d: Percent,
            e: Nanos,
            f: Percent,
        }
        let t: T = toml::from_str("a='2.5G'\nb=1500\nc='500us'\nd='95%'\ne=0\nf=40").unwrap();
        assert_eq!(t.a.0, 2_500_000_000);
        assert_eq!(t.b.0, 1500);
        assert_eq!(t.c.0, 500_000);
        assert!((t.d.0 - 0.95).abs() < 1e-12);
        assert_eq!(t.e.0, 0);
        assert!((t.f.0 - 0.4).abs() < 1e-12);
        // A bare duration or rate in a file: which unit? Refused.
        let e = toml::from_str::<T>("a='2.5G'\nb=1500\nc='500us'\nd='95%'\ne=10\nf=40").err().unwrap().to_string();
        assert!(e.contains("10 what?"), "{e}");
        assert!(toml::from_str::<T>("a=2500\nb=1500\nc='500us'\nd='95%'\ne=0\nf=40").is_err());
    }
}
