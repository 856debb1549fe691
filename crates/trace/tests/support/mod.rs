//! Shared by the integration tests: real LTTng traces made with the lab's
//! ros2_tracing replica (lab/build/ddslab-tracegen, lab/tracegen/record.sh).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

pub fn tracegen() -> PathBuf {
    let p = repo_root().join("lab/build/ddslab-tracegen");
    assert!(
        p.is_file(),
        "{} missing: build the lab first (cmake -S lab -B lab/build && cmake --build lab/build; needs liblttng-ust-dev)",
        p.display()
    );
    p
}

pub fn record_script() -> PathBuf {
    repo_root().join("lab/tracegen/record.sh")
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A session name unique to this test process and call.
pub fn session_name(tag: &str) -> String {
    format!("ddscope-test-{tag}-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed))
}

/// What one tracegen node process reported it emitted.
#[derive(Debug, Clone)]
pub struct Emitted {
    pub pid: i64,
    pub events: BTreeMap<String, u64>,
    pub total: u64,
}

pub fn parse_emitted(stdout: &str) -> Vec<Emitted> {
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("tracegen json");
            Emitted {
                pid: v["pid"].as_i64().expect("pid"),
                events: v["events"]
                    .as_object()
                    .expect("events")
                    .iter()
                    .map(|(k, n)| (k.clone(), n.as_u64().expect("count")))
                    .collect(),
                total: v["total"].as_u64().expect("total"),
            }
        })
        .collect()
}

/// Records `ddslab-tracegen --distro DISTRO ARGS` into `out` (record.sh options
/// in `rec_opts`); returns what tracegen says it emitted.
pub fn record(out: &Path, rec_opts: &[&str], distro: &str, args: &[&str]) -> Vec<Emitted> {
    let session = session_name(distro);
    let mut cmd = Command::new(record_script());
    cmd.arg(out).args(["--session", &session]).args(rec_opts).arg("--");
    cmd.arg(tracegen()).args(["--distro", distro]).args(args);
    let o = cmd.output().expect("run record.sh");
    assert!(
        o.status.success(),
        "record.sh failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(&o.stdout)
    );
    parse_emitted(&String::from_utf8_lossy(&o.stdout))
}

/// The UST trace directory under a session directory.
pub fn ust_trace(session_dir: &Path) -> PathBuf {
    let p = session_dir.join("ust/uid/0/64-bit");
    assert!(p.join("metadata").is_file(), "no UST trace in {}", session_dir.display());
    p
}

/// babeltrace2's own reading (python3-bt2) of `inputs`, one JSON value per event.
pub fn bt2_events(inputs: &[&str]) -> Vec<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/bt2_jsonl.py");
    let o = Command::new("/usr/bin/python3").arg(script).args(inputs).output().expect("run bt2_jsonl.py");
    assert!(o.status.success(), "bt2_jsonl.py failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("bt2 json line"))
        .collect()
}

/// Our reading of a trace through the dump example's JSON format.
pub fn dump_example() -> PathBuf {
    // Built by `cargo test` (examples are compiled for integration tests).
    let exe = std::env::current_exe().expect("test exe");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let p = dir.join("examples/dump");
    assert!(p.is_file(), "{} missing (cargo test builds examples)", p.display());
    p
}

pub fn tempdir() -> tempfile::TempDir {
    let base = repo_root().join("target/tmp");
    std::fs::create_dir_all(&base).expect("target/tmp");
    tempfile::Builder::new().prefix("trace-test-").tempdir_in(base).expect("tempdir")
}

pub fn ncpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("mkdir");
    for e in std::fs::read_dir(src).expect("read_dir") {
        let e = e.expect("entry");
        let to = dst.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).expect("copy");
        }
    }
}

/// Events babeltrace2 (python3-bt2) reports discarded by the tracer.
pub fn bt2_discarded(inputs: &[&str]) -> u64 {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/bt2_jsonl.py");
    let o = Command::new("/usr/bin/python3").arg(script).args(inputs).output().expect("run bt2_jsonl.py");
    assert!(o.status.success(), "bt2_jsonl.py failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .find_map(|l| l.strip_prefix("discarded_events=").and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

/// Runs the dump example on `input` with a time limit; returns (success, stderr).
pub fn dump_with_timeout(input: &Path, secs: u32) -> (bool, String) {
    let o = Command::new("timeout")
        .arg(secs.to_string())
        .arg(dump_example())
        .args(["--format", "count"])
        .arg(input)
        .output()
        .expect("run dump");
    assert_ne!(o.status.code(), Some(124), "reading {} did not finish in {secs} s", input.display());
    assert!(o.status.code().is_some(), "dump killed by a signal on {}: {}", input.display(), String::from_utf8_lossy(&o.stderr));
    (o.status.success(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A record in the JSON form of bt2_jsonl.py / `dump --format jsonl`.
pub fn record_json(r: &ddscope_trace::Record) -> serde_json::Value {
    use ddscope_trace::FieldValue;
    let mut fields = serde_json::Map::new();
    for (k, v) in r.event.fields() {
        let v = match v {
            FieldValue::Hex(x) | FieldValue::Unsigned(x) => serde_json::Value::from(x),
            FieldValue::Signed(x) => serde_json::Value::from(x),
            FieldValue::Str(s) => serde_json::Value::from(s),
            FieldValue::Bytes(b) => b.iter().map(|&x| serde_json::Value::from(x)).collect(),
        };
        fields.insert(k.to_string(), v);
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
}
