//! The live source: a real lttng-relayd (started by the test on its own ports)
//! serves a live LTTng session recorded from the lab replica; the reader
//! follows it with `source.ctf.lttng-live`. Oracle: babeltrace2 (python3-bt2)
//! reading the copy relayd writes to disk; the events read live equal it event
//! by event, and their number equals what ddslab-tracegen emitted.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ddscope_trace::{Poll, SessionNotFound, TraceReader};
use ddscope_testkit::lttng::{hostname, start_relayd, Relayd};
use support::*;

/// Starts a live recording of tracegen (after `delay` s) in the background.
fn start_recording(relayd: &Relayd, session: &str, delay: &str, messages: &str) -> Child {
    let script = format!(
        "sleep {delay}; exec {} --distro jazzy --messages {messages} --rate 4000 --processes 2",
        tracegen().display()
    );
    Command::new(record_script())
        .arg("unused")
        .args(["--session", session])
        .args(["--live", &format!("net://localhost:{}:{}", relayd.ctrl, relayd.data)])
        .args(["--", "bash", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("record.sh")
}

fn relayd_copy(out: &Path, session: &str) -> PathBuf {
    let host_dir = out.join(hostname());
    let dir = std::fs::read_dir(&host_dir)
        .expect("relayd output")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(session)))
        .expect("relayd wrote the session");
    dir.join("ust/uid/0/64-bit")
}

#[test]
fn follows_a_live_session_like_babeltrace2_reads_it() {
    let dir = tempdir();
    let out = dir.path().join("relayd");
    let relayd = start_relayd(&out);

    // 1. An agent's way: attach before the session exists and keep following.
    let session = session_name("live");
    let url = format!("net://localhost:{}/host/{}/{}", relayd.viewer, hostname(), session);
    let mut reader = TraceReader::open_live(&url, SessionNotFound::Continue).expect("open live");
    assert!(reader.is_live());
    let mut rec = start_recording(&relayd, &session, "1", "1500");
    let mut records = Vec::new();
    let mut expected = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(Instant::now() < deadline, "live read stalled at {} events (expected {expected:?})", records.len());
        if expected.is_none() {
            if let Some(st) = rec.try_wait().expect("wait record.sh") {
                assert!(st.success(), "record.sh failed");
                let o = rec.wait_with_output().expect("output");
                let emitted = parse_emitted(&String::from_utf8_lossy(&o.stdout));
                expected = Some(emitted.iter().map(|e| e.total).sum::<u64>());
                rec = Command::new("true").spawn().expect("placeholder");
            }
        }
        match reader.poll().expect("live poll") {
            Poll::Record(r) => records.push(r),
            Poll::Again => {
                if expected == Some(records.len() as u64) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Poll::End => panic!("a `continue` live read does not end by itself"),
        }
    }
    let _ = rec.wait();
    assert_eq!(reader.stats().discarded_events, 0);
    let copy = relayd_copy(&out, &session);
    let theirs = bt2_events(&[copy.to_str().expect("utf8")]);
    assert_eq!(records.len(), theirs.len(), "live = relayd's copy");
    for (i, (r, t)) in records.iter().zip(&theirs).enumerate() {
        assert_eq!(&record_json(r), t, "live event #{i}");
    }

    // The traced system restarts its tracing under the same session name: a
    // `continue` reader picks the new session up (new trace, new classes).
    let mut rec = start_recording(&relayd, &session, "0.5", "300");
    let before = records.len() as u64;
    let mut second = None;
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut names_ok = true;
    loop {
        let got = records.len() as u64 - before;
        assert!(Instant::now() < deadline, "second session: {got} of {second:?} events; {:?}", reader.stats().last_live_error);
        if second.is_none() {
            if let Some(st) = rec.try_wait().expect("wait") {
                assert!(st.success());
                let o = rec.wait_with_output().expect("output");
                second = Some(parse_emitted(&String::from_utf8_lossy(&o.stdout)).iter().map(|e| e.total).sum::<u64>());
                rec = Command::new("true").spawn().expect("placeholder");
            }
        }
        if second == Some(got) {
            break;
        }
        match reader.poll().expect("live poll") {
            Poll::Record(r) => {
                names_ok &= !r.event.name().is_empty();
                records.push(r)
            }
            Poll::Again => std::thread::sleep(Duration::from_millis(5)),
            Poll::End => panic!("a `continue` live read does not end by itself"),
        }
    }
    let _ = rec.wait();
    assert_eq!(reader.stats().live_reconnects, 0, "followed without reconnecting");
    let second = second.expect("second count");
    assert!(names_ok);
    assert_eq!(records.len() as u64, before + second, "every event of the second session");

    // A session that starts and ends while the reader is not polled makes
    // babeltrace2's live source fail ("Session id N is unknown"); a following
    // reader reconnects and goes on with the next session, whole.
    let rec = start_recording(&relayd, &session, "0.2", "100");
    assert!(rec.wait_with_output().expect("record.sh").status.success());
    let mut rec = start_recording(&relayd, &session, "1", "300");
    let mut fourth = None;
    let mut phase: Vec<ddscope_trace::Record> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut seen_pids = std::collections::BTreeSet::new();
    loop {
        // Events of the unpolled third session may or may not come; count the fourth's, by process.
        let got = phase.iter().filter(|r| r.context.vpid.is_some_and(|p| seen_pids.contains(&p))).count() as u64;
        assert!(Instant::now() < deadline, "after reconnecting: {got} of {fourth:?}; {:?}", reader.stats().last_live_error);
        if fourth.is_none() {
            if let Some(st) = rec.try_wait().expect("wait") {
                assert!(st.success());
                let o = rec.wait_with_output().expect("output");
                let e = parse_emitted(&String::from_utf8_lossy(&o.stdout));
                seen_pids = e.iter().map(|e| e.pid).collect();
                fourth = Some(e.iter().map(|e| e.total).sum::<u64>());
                rec = Command::new("true").spawn().expect("placeholder");
            }
        }
        if fourth.is_some() && fourth == Some(got) {
            break;
        }
        match reader.poll().expect("live poll") {
            Poll::Record(r) => phase.push(r),
            Poll::Again => std::thread::sleep(Duration::from_millis(5)),
            Poll::End => panic!("a `continue` live read does not end by itself"),
        }
    }
    let _ = rec.wait();
    assert!(reader.stats().live_reconnects >= 1, "reconnected: {:?}", reader.stats());
    drop(reader);

    // 2. Attach to a running session with `end`: the read ends when the session is destroyed.
    let session = session_name("live-end");
    let mut rec = start_recording(&relayd, &session, "2", "800");
    std::thread::sleep(Duration::from_millis(800));
    let url = format!("net://localhost:{}/host/{}/{}", relayd.viewer, hostname(), session);
    let reader = TraceReader::open_live(&url, SessionNotFound::End).expect("open live");
    let mut n = 0u64;
    for r in reader {
        r.expect("live record");
        n += 1;
    }
    let st = rec.wait().expect("record.sh");
    assert!(st.success());
    let mut o = String::new();
    if let Some(mut s) = rec.stdout.take() {
        use std::io::Read;
        s.read_to_string(&mut o).expect("stdout");
    }
    let want: u64 = parse_emitted(&o).iter().map(|e| e.total).sum();
    assert_eq!(n, want, "every event of the session, then the end");
}
