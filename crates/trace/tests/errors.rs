//! Bad input: missing, empty, kernel-only, foreign, truncated and corrupted
//! traces give a one-line error naming the path (or are counted), never a
//! panic or a hang; lost events are reported. Oracles: the traces are real
//! LTTng traces (lab replica); babeltrace2 (python3-bt2) counts the events a
//! foreign trace holds and the events LTTng discarded.

mod support;

use std::path::Path;

use ddscope_trace::{ReaderOptions, Source, TraceError, TraceReader};
use support::*;

fn read_all(path: &Path, require_ros2: bool) -> Result<(u64, TraceReader), TraceError> {
    let opts = ReaderOptions { require_ros2, ..Default::default() };
    let mut r = TraceReader::new(Source::Directory(path.to_path_buf()), opts)?;
    let mut n = 0;
    while r.next_record()?.is_some() {
        n += 1;
    }
    Ok((n, r))
}

fn one_line(e: &TraceError, path: &Path) -> String {
    let s = e.to_string();
    assert!(!s.contains('\n'), "one line: {s}");
    assert!(s.contains(&path.display().to_string()), "names {}: {s}", path.display());
    s
}

#[test]
fn missing_and_empty_directories() {
    let dir = tempdir();
    let missing = dir.path().join("nope");
    let e = TraceReader::open(&missing).err().expect("missing dir");
    assert!(matches!(e, TraceError::NotFound { .. }));
    one_line(&e, &missing);
    let e = TraceReader::open(dir.path()).err().expect("empty dir");
    assert!(matches!(e, TraceError::NoTrace { .. }), "{e}");
    one_line(&e, dir.path());
}

#[test]
fn kernel_traces_are_skipped_and_a_kernel_only_directory_is_an_error() {
    let dir = tempdir();
    let session = dir.path().join("s");
    record(&session, &[], "jazzy", &["--messages", "20"]);
    // `ros2 trace` writes <session>/kernel/ next to <session>/ust/ when it
    // records kernel events; LTTng's layout is what tells them apart.
    let kernel_only = dir.path().join("k");
    copy_dir(&session.join("ust/uid/0/64-bit"), &kernel_only.join("kernel"));
    let e = TraceReader::open(&kernel_only).err().expect("kernel only");
    assert!(matches!(e, TraceError::KernelOnly { .. }), "{e}");
    one_line(&e, &kernel_only);

    copy_dir(&session.join("ust/uid/0/64-bit"), &session.join("kernel"));
    let (n, r) = read_all(&session, true).expect("ust part read");
    assert_eq!(n, 20 * 13 + 2 + 15);
    assert_eq!(r.stats().skipped_kernel_traces, vec![session.join("kernel")]);
}

#[test]
fn a_trace_of_another_provider_is_reported_as_foreign() {
    let dir = tempdir();
    let session = dir.path().join("s");
    // A real UST trace without ros2 events: only LTTng-UST's own statedump events.
    record(&session, &["--events", "lttng_ust_statedump:*"], "humble", &["--messages", "5"]);
    let ust = ust_trace(&session);
    let theirs = bt2_events(&[ust.to_str().expect("utf8")]);
    assert!(!theirs.is_empty(), "the statedump wrote events");
    let e = read_all(&session, true).err().expect("foreign");
    assert!(matches!(e, TraceError::Foreign { .. }), "{e}");
    let msg = one_line(&e, &session);
    assert!(msg.contains("lttng_ust_statedump:"), "{msg}");
    // Reported, not failed, when asked: every event counted by name.
    let (n, r) = read_all(&session, false).expect("counted");
    assert_eq!(n, 0);
    assert_eq!(r.stats().events, theirs.len() as u64);
    let mut by_name = std::collections::BTreeMap::new();
    for ev in &theirs {
        *by_name.entry(ev["name"].as_str().expect("name").to_string()).or_insert(0u64) += 1;
    }
    assert_eq!(r.stats().unknown_by_name, by_name);
}

#[test]
fn truncated_and_corrupted_traces_fail_cleanly() {
    let dir = tempdir();
    let session = dir.path().join("s");
    record(&session, &[], "jazzy", &["--messages", "300", "--processes", "2"]);
    let ust = session.join("ust/uid/0/64-bit");
    let meta_len = std::fs::metadata(ust.join("metadata")).expect("metadata").len();
    let stream = std::fs::read_dir(&ust)
        .expect("dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("ros2_")))
        .expect("a stream file");
    let stream_name = stream.file_name().expect("name").to_owned();
    let stream_len = std::fs::metadata(&stream).expect("stream").len();

    let mut case = 0;
    let mut fresh = |f: &dyn Fn(&Path)| {
        case += 1;
        let copy = dir.path().join(format!("c{case}"));
        copy_dir(&session, &copy);
        f(&copy.join("ust/uid/0/64-bit"));
        copy
    };
    // Metadata cut anywhere: inside a packet header, inside a packet, at a packet boundary.
    for cut in [0, 3, 20, 37, 500, 4096, meta_len - 1] {
        let copy = fresh(&|t| {
            let f = std::fs::OpenOptions::new().write(true).open(t.join("metadata")).expect("open");
            f.set_len(cut).expect("truncate");
        });
        let (ok, stderr) = dump_with_timeout(&copy, 60);
        assert!(!ok, "metadata cut at {cut} must fail");
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(stderr.contains(&copy.display().to_string()), "{stderr}");
        let e = read_all(&copy, true).err().expect("error");
        one_line(&e, &copy);
    }
    // A stream file cut mid-packet.
    for cut in [1, 100, stream_len / 2, stream_len - 1] {
        let copy = fresh(&|t| {
            let f = std::fs::OpenOptions::new().write(true).open(t.join(&stream_name)).expect("open");
            f.set_len(cut).expect("truncate");
        });
        let (ok, stderr) = dump_with_timeout(&copy, 60);
        assert!(!ok, "stream cut at {cut} must fail: {stderr}");
        let e = read_all(&copy, true).err().expect("error");
        one_line(&e, &copy);
    }
    // A packet size with bit 63 set: babeltrace2 2.0.4 aborts the process on
    // it (found by fuzzing); the reader refuses the file first.
    let copy = fresh(&|t| {
        let p = t.join(&stream_name);
        let mut b = std::fs::read(&p).expect("read");
        b[56..64].copy_from_slice(&0x8000_0000_0000_8000u64.to_le_bytes());
        std::fs::write(&p, b).expect("write");
    });
    let (ok, stderr) = dump_with_timeout(&copy, 60);
    assert!(!ok && stderr.contains("invalid sizes"), "{stderr}");
    let e = read_all(&copy, true).err().expect("error");
    assert!(one_line(&e, &copy).contains(&stream_name.to_string_lossy().into_owned()));

    // Corrupted bytes: decoded or refused, never a panic, a crash or a hang.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for round in 0..12 {
        let copy = fresh(&|t| {
            let p = t.join(&stream_name);
            let mut b = std::fs::read(&p).expect("read");
            let mut s = seed ^ round;
            for _ in 0..(1 + round * 7) {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let i = (s % b.len() as u64) as usize;
                b[i] ^= (s >> 32) as u8 | 1;
            }
            std::fs::write(&p, b).expect("write");
        });
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let (_ok, stderr) = dump_with_timeout(&copy, 60);
        assert!(!stderr.contains("panicked"), "{stderr}");
        if let Err(e) = read_all(&copy, false) {
            one_line(&e, &copy);
        }
    }
}

#[test]
fn events_lost_by_the_tracer_are_counted() {
    let dir = tempdir();
    let session = dir.path().join("s");
    // Discard mode with the smallest buffers, flat out: LTTng drops events.
    let emitted = record(
        &session,
        &["--lossy", "--subbuf-size", "4096", "--num-subbuf", "2"],
        "jazzy",
        &["--messages", "200000", "--miss-every", "0"],
    );
    let sent: u64 = emitted.iter().map(|e| e.total).sum();
    let ust = ust_trace(&session);
    let lost_bt2 = bt2_discarded(&[ust.to_str().expect("utf8")]);
    let (n, r) = read_all(&session, true).expect("read");
    assert!(lost_bt2 > 0, "the tracer discarded events");
    assert_eq!(r.stats().discarded_events, lost_bt2, "same count as babeltrace2");
    assert_eq!(n + r.stats().discarded_events, sent, "read + lost = emitted");
}
