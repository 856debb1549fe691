//! Prints the ros2_tracing events of a trace, as `babeltrace2 --clock-gmt` does.
//!
//!   cargo run --release -p ddscope-trace --example dump -- [--format text|jsonl|count] TRACE_DIR
//!   cargo run --release -p ddscope-trace --example dump -- --live net://localhost/host/HOST/SESSION
//!
//! `text` is babeltrace2's default text line; `jsonl` is the format of the
//! oracle script tests/support/bt2_jsonl.py; `count` prints only the totals
//! (the benchmark). What was read and not printed goes to stderr.

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use ddscope_trace::{FieldValue, Record, SessionNotFound, TraceReader};

fn usage() -> ExitCode {
    eprintln!("usage: dump [--format text|jsonl|count] [--live] [--session-not-found continue|end|fail] INPUT");
    ExitCode::from(2)
}

fn time_of_day(ns: i64) -> String {
    let day = 86_400_000_000_000i64;
    let t = ns.rem_euclid(day);
    let s = t / 1_000_000_000;
    format!("{:02}:{:02}:{:02}.{:09}", s / 3600, s / 60 % 60, s % 60, t % 1_000_000_000)
}

fn text_value(v: &FieldValue) -> String {
    match v {
        FieldValue::Hex(x) => format!("0x{x:X}"),
        FieldValue::Unsigned(x) => x.to_string(),
        FieldValue::Signed(x) => x.to_string(),
        FieldValue::Str(s) => format!("{s:?}"),
        FieldValue::Bytes(b) => {
            let items: Vec<String> = b.iter().enumerate().map(|(i, x)| format!("[{i}] = {x}")).collect();
            format!("[ {} ]", items.join(", "))
        }
    }
}

fn json_value(v: &FieldValue) -> serde_json::Value {
    match v {
        FieldValue::Hex(x) | FieldValue::Unsigned(x) => (*x).into(),
        FieldValue::Signed(x) => (*x).into(),
        FieldValue::Str(s) => s.clone().into(),
        FieldValue::Bytes(b) => b.iter().map(|&x| serde_json::Value::from(x)).collect(),
    }
}

fn text_line(r: &Record, prev: Option<i64>, host: &str) -> String {
    let delta = match prev {
        Some(p) => {
            let d = r.time.ns_from_origin - p;
            format!("+{}.{:09}", d / 1_000_000_000, d % 1_000_000_000)
        }
        None => "+?.?????????".to_string(),
    };
    let mut ctx = Vec::new();
    if let Some(v) = r.context.vpid {
        ctx.push(format!("vpid = {v}"));
    }
    if let Some(v) = r.context.vtid {
        ctx.push(format!("vtid = {v}"));
    }
    if let Some(p) = r.context.procname {
        ctx.push(format!("procname = {:?}", p.to_string_lossy()));
    }
    let fields: Vec<String> =
        r.event.fields().iter().map(|(k, v)| format!("{k} = {}", text_value(v))).collect();
    let mut line = format!("[{}] ({delta}) {host} ros2:{}: ", time_of_day(r.time.ns_from_origin), r.event.name());
    if let Some(c) = r.context.cpu_id {
        line += &format!("{{ cpu_id = {c} }}, ");
    }
    if !ctx.is_empty() {
        line += &format!("{{ {} }}, ", ctx.join(", "));
    }
    line += &format!("{{ {} }}", fields.join(", "));
    line
}

fn json_line(r: &Record) -> String {
    let mut fields = serde_json::Map::new();
    for (k, v) in r.event.fields() {
        fields.insert(k.to_string(), json_value(&v));
    }
    serde_json::json!({
        "name": format!("ros2:{}", r.event.name()),
        "cycles": r.time.cycles,
        "ns": r.time.ns_from_origin,
        "cpu_id": r.context.cpu_id,
        "vpid": r.context.vpid,
        "vtid": r.context.vtid,
        "procname": r.context.procname.map(|p| p.to_string_lossy()),
        "fields": fields,
    })
    .to_string()
}

fn main() -> ExitCode {
    let mut format = "text".to_string();
    let mut live = false;
    let mut not_found = SessionNotFound::End;
    let mut input = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--format" => match args.next() {
                Some(f) if ["text", "jsonl", "count"].contains(&f.as_str()) => format = f,
                _ => return usage(),
            },
            "--live" => live = true,
            "--session-not-found" => {
                not_found = match args.next().as_deref() {
                    Some("continue") => SessionNotFound::Continue,
                    Some("end") => SessionNotFound::End,
                    Some("fail") => SessionNotFound::Fail,
                    _ => return usage(),
                }
            }
            "-h" | "--help" => {
                usage();
                return ExitCode::SUCCESS;
            }
            _ if input.is_none() && !a.starts_with("--") => input = Some(a),
            _ => return usage(),
        }
    }
    let Some(input) = input else { return usage() };
    let reader = if live || input.starts_with("net://") {
        TraceReader::open_live(&input, not_found)
    } else {
        TraceReader::open(&input)
    };
    let mut reader = match reader {
        Ok(r) => r,
        Err(e) => {
            eprintln!("dump: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut prev = None;
    let mut n = 0u64;
    let mut host = String::new();
    loop {
        let r = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                let _ = out.flush();
                eprintln!("dump: {e}");
                return ExitCode::FAILURE;
            }
        };
        n += 1;
        let line = match format.as_str() {
            "text" => {
                if host.is_empty() {
                    host = reader.stats().traces.first().and_then(|t| t.hostname.clone()).unwrap_or_default();
                }
                let l = text_line(&r, prev, &host);
                prev = Some(r.time.ns_from_origin);
                l
            }
            "jsonl" => json_line(&r),
            _ => continue,
        };
        if writeln!(out, "{line}").is_err() {
            return ExitCode::FAILURE;
        }
    }
    if out.flush().is_err() {
        return ExitCode::FAILURE;
    }
    let s = reader.stats();
    eprintln!(
        "dump: {n} ros2 events of {} read; not decoded {} {:?}; malformed {:?}; discarded events {}, packets {}; layout {:?}; clock {:?}",
        s.events,
        s.not_decoded(),
        s.unknown_by_name,
        s.malformed_by_name,
        s.discarded_events,
        s.discarded_packets,
        s.layout,
        reader.clock().map(|c| (&c.name, c.offset_seconds, c.offset_cycles)),
    );
    if format == "count" {
        println!("{n}");
    }
    ExitCode::SUCCESS
}
