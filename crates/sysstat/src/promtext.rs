//! The Prometheus text exposition format (version 0.0.4): a parser (to
//! forward a node_exporter's samples, and for tests) and the writing helpers
//! the registry uses.

use std::fmt::Write as _;

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

impl Kind {
    pub fn as_str(&self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
            Kind::Summary => "summary",
            Kind::Untyped => "untyped",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "counter" => Kind::Counter,
            "gauge" => Kind::Gauge,
            "histogram" => Kind::Histogram,
            "summary" => Kind::Summary,
            "untyped" => Kind::Untyped,
            _ => return None,
        })
    }
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Full sample name (`x_bucket`, `x_sum`… for histograms).
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    pub fn new(name: impl Into<String>, labels: Vec<(String, String)>, value: f64) -> Self {
        Sample { name: name.into(), labels, value, timestamp_ms: None }
    }

    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// A metric family: `# HELP`, `# TYPE` and its samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: String,
    pub help: String,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {msg}")]
pub struct ParseError {
    pub line: usize,
    pub msg: String,
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

pub fn valid_metric_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(is_name_start) && c.all(is_name_char)
}

pub fn valid_label_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse::<f64>().ok().filter(|v| v.is_finite()),
    }
}

/// Parses an exposition. Samples are grouped under the family their
/// `# TYPE` line announced (histogram `_bucket`/`_sum`/`_count` included).
pub fn parse(text: &str) -> Result<Vec<Family>, ParseError> {
    let mut fams: Vec<Family> = vec![];
    let mut helps: Vec<(String, String)> = vec![];
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let err = |msg: String| ParseError { line: line_no, msg };
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let rest = rest.trim_start();
            if let Some(r) = rest.strip_prefix("HELP ") {
                let (name, help) = r.split_once(' ').unwrap_or((r, ""));
                let help = unescape_help(help);
                match fams.iter_mut().find(|f| f.name == name) {
                    Some(f) => f.help = help,
                    None => helps.push((name.to_string(), help)),
                }
            } else if let Some(r) = rest.strip_prefix("TYPE ") {
                let mut it = r.split_whitespace();
                let (Some(name), Some(kind)) = (it.next(), it.next()) else {
                    return Err(err(format!("malformed TYPE line: {line}")));
                };
                let kind = Kind::parse(kind).ok_or_else(|| err(format!("unknown metric type {kind:?}")))?;
                if !valid_metric_name(name) {
                    return Err(err(format!("invalid metric name {name:?}")));
                }
                let help = helps.iter().position(|(n, _)| n == name).map(|p| helps.swap_remove(p).1).unwrap_or_default();
                fams.push(Family { name: name.to_string(), help, kind, samples: vec![] });
            }
            continue;
        }
        let sample = parse_sample(line).map_err(err)?;
        let fam = fams.iter().rposition(|f| {
            f.name == sample.name
                || match f.kind {
                    Kind::Histogram => sample.name.strip_prefix(f.name.as_str()).is_some_and(|s| matches!(s, "_bucket" | "_sum" | "_count")),
                    Kind::Summary => sample.name.strip_prefix(f.name.as_str()).is_some_and(|s| matches!(s, "_sum" | "_count")),
                    _ => false,
                }
        });
        match fam {
            Some(i) => fams[i].samples.push(sample),
            None => fams.push(Family { name: sample.name.clone(), help: String::new(), kind: Kind::Untyped, samples: vec![sample] }),
        }
    }
    Ok(fams)
}

fn unescape_help(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('n') => out.push('\n'),
                Some('\\') => out.push('\\'),
                Some(o) => {
                    out.push('\\');
                    out.push(o);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(|c: char| !is_name_char(c)).unwrap_or(line.len());
    let name = &line[..name_end];
    if !valid_metric_name(name) {
        return Err(format!("invalid metric name in {line:?}"));
    }
    let mut rest = &line[name_end..];
    let mut labels = vec![];
    if let Some(r) = rest.strip_prefix('{') {
        let mut chars = r.char_indices().peekable();
        loop {
            // skip spaces and commas
            while let Some(&(_, c)) = chars.peek() {
                if c == ' ' || c == ',' {
                    chars.next();
                } else {
                    break;
                }
            }
            let Some(&(start, c)) = chars.peek() else { return Err("unterminated label set".into()) };
            if c == '}' {
                chars.next();
                rest = &r[start + 1..];
                break;
            }
            let mut end = start;
            while let Some(&(i, c)) = chars.peek() {
                if c.is_ascii_alphanumeric() || c == '_' {
                    end = i + c.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let lname = &r[start..end];
            if !valid_label_name(lname) {
                return Err(format!("invalid label name near {:?}", &r[start..]));
            }
            while chars.peek().is_some_and(|&(_, c)| c == ' ') {
                chars.next();
            }
            if chars.next().map(|x| x.1) != Some('=') {
                return Err(format!("expected '=' after label {lname}"));
            }
            while chars.peek().is_some_and(|&(_, c)| c == ' ') {
                chars.next();
            }
            if chars.next().map(|x| x.1) != Some('"') {
                return Err(format!("expected '\"' for label {lname}"));
            }
            let mut val = String::new();
            loop {
                match chars.next() {
                    None => return Err(format!("unterminated value of label {lname}")),
                    Some((_, '"')) => break,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, 'n')) => val.push('\n'),
                        Some((_, '\\')) => val.push('\\'),
                        Some((_, '"')) => val.push('"'),
                        Some((_, o)) => {
                            val.push('\\');
                            val.push(o);
                        }
                        None => return Err(format!("unterminated value of label {lname}")),
                    },
                    Some((_, c)) => val.push(c),
                }
            }
            labels.push((lname.to_string(), val));
        }
    }
    let mut it = rest.split_whitespace();
    let v = it.next().ok_or_else(|| format!("no value in {line:?}"))?;
    let value = parse_value(v).ok_or_else(|| format!("invalid value {v:?}"))?;
    let timestamp_ms = match it.next() {
        Some(t) => Some(t.parse::<i64>().map_err(|_| format!("invalid timestamp {t:?}"))?),
        None => None,
    };
    if it.next().is_some() {
        return Err(format!("trailing text in {line:?}"));
    }
    Ok(Sample { name: name.to_string(), labels, value, timestamp_ms })
}

/// Appends a label value with the format's escapes (`\\`, `\"`, `\n`).
pub fn escape_label_value(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Appends a value the way Prometheus' Go client formats floats.
pub fn write_value(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

pub fn write_header(out: &mut String, name: &str, help: &str, kind: Kind) {
    out.push_str("# HELP ");
    out.push_str(name);
    out.push(' ');
    for c in help.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push_str("\n# TYPE ");
    out.push_str(name);
    out.push(' ');
    out.push_str(kind.as_str());
    out.push('\n');
}

/// Appends `{k="v",…}` (nothing for no labels).
pub fn write_labels(out: &mut String, labels: &[(String, String)]) {
    if labels.is_empty() {
        return;
    }
    out.push('{');
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        escape_label_value(out, v);
        out.push('"');
    }
    out.push('}');
}

/// Writes a whole family (header + samples).
pub fn write_family(out: &mut String, f: &Family) {
    write_header(out, &f.name, &f.help, f.kind);
    for s in &f.samples {
        out.push_str(&s.name);
        write_labels(out, &s.labels);
        out.push(' ');
        write_value(out, s.value);
        if let Some(t) = s.timestamp_ms {
            let _ = write!(out, " {t}");
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_node_exporter_style_text() {
        let text = r#"# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} 1.23456e+06
node_cpu_seconds_total{cpu="0",mode="user"} 42.5
# HELP x_seconds A histogram with \\ and \n escapes.
# TYPE x_seconds histogram
x_seconds_bucket{le="0.1"} 1
x_seconds_bucket{le="+Inf"} 2
x_seconds_sum 0.3
x_seconds_count 2
weird{a="q\"uote",b="back\\slash",c="new\nline"} NaN 1700000000000
"#;
        let f = parse(text).unwrap();
        assert_eq!(f.len(), 3);
        assert_eq!(f[0].name, "node_cpu_seconds_total");
        assert_eq!(f[0].kind, Kind::Counter);
        assert_eq!(f[0].samples[0].value, 1_234_560.0);
        assert_eq!(f[0].samples[1].label("mode"), Some("user"));
        assert_eq!(f[1].help, "A histogram with \\ and \n escapes.");
        assert_eq!(f[1].samples.len(), 4);
        assert_eq!(f[1].samples[1].value, f64::INFINITY.min(2.0));
        assert_eq!(f[2].kind, Kind::Untyped);
        let w = &f[2].samples[0];
        assert_eq!(w.label("a"), Some("q\"uote"));
        assert_eq!(w.label("b"), Some("back\\slash"));
        assert_eq!(w.label("c"), Some("new\nline"));
        assert!(w.value.is_nan());
        assert_eq!(w.timestamp_ms, Some(1_700_000_000_000));
    }

    #[test]
    fn round_trips_through_the_writer() {
        let fam = Family {
            name: "ddscope_x_total".into(),
            help: "help with \\ and\nnewline".into(),
            kind: Kind::Counter,
            samples: vec![Sample::new("ddscope_x_total", vec![("topic".into(), "a \"b\"\\c\nd, e=f".into())], 3.0)],
        };
        let mut out = String::new();
        write_family(&mut out, &fam);
        let back = parse(&out).unwrap();
        assert_eq!(back, vec![fam]);
    }

    #[test]
    fn bad_input_gives_errors_not_panics() {
        for bad in ["1abc 3", "x{a=\"1\" 3", "x{1a=\"1\"} 3", "x 3 4 5", "x abc", "# TYPE x nonsense", "x{a=1} 2", "x{a=\"\\"] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.line, 1, "{bad}: {e}");
        }
    }
}
