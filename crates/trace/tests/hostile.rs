//! A damaged or hostile trace directory gives a one-line error and never
//! takes the process (or the host) down (issue 23, item 6): the metadata
//! is checked whitespace-insensitively and its static arrays capped, and
//! whatever still makes babeltrace2 abort does so in the child process that
//! checks every trace directory first, under a memory limit.
//!
//! Each hostile trace is made here from a real LTTng trace (the lab's
//! ros2_tracing replica) by editing its metadata text. Oracles: babeltrace2
//! itself (the same edits make the `babeltrace2` CLI abort), the exit status
//! and stderr of the dump example (never killed by a signal, one line), and
//! the kernel's accounting of this process's and its children's peak memory.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use ddscope_trace::{ReaderOptions, Source, TraceError, TraceReader};
use support::*;

/// The TSDL text of a (packetized, little-endian) LTTng metadata file.
fn tsdl_text(meta: &[u8]) -> Vec<u8> {
    assert_eq!(&meta[..4], &0x75D1_1D57u32.to_le_bytes(), "a packetized little-endian metadata file");
    let mut out = vec![];
    let mut off = 0;
    while off + 37 <= meta.len() {
        let w = |at: usize| u32::from_le_bytes(meta[off + at..off + at + 4].try_into().unwrap()) as usize;
        let (content, size) = (w(24), w(28));
        out.extend_from_slice(&meta[off + 37..off + content / 8]);
        off += size / 8;
    }
    out
}

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    session: PathBuf,
    events: u64,
}

fn fixture() -> Fixture {
    let dir = tempdir();
    let session = dir.path().join("s");
    let emitted = record(&session, &[], "jazzy", &["--messages", "50"]);
    let events = emitted.iter().map(|e| e.total).sum();
    Fixture { root: dir.path().to_path_buf(), session, _dir: dir, events }
}

/// A copy of the trace with its metadata as text, edited by `edit` (and its first stream by `stream`).
fn variant(f: &Fixture, name: &str, edit: &dyn Fn(String) -> String, stream: &dyn Fn(&mut Vec<u8>)) -> PathBuf {
    let copy = f.root.join(name);
    copy_dir(&f.session, &copy);
    let t = ust_trace(&copy);
    let text = String::from_utf8(tsdl_text(&std::fs::read(t.join("metadata")).unwrap())).unwrap();
    let edited = edit(text.clone());
    assert_ne!(edited, text, "{name}: the edit changed nothing");
    std::fs::write(t.join("metadata"), edited).unwrap();
    let s = t.join("ros2_0");
    let mut b = std::fs::read(&s).unwrap();
    stream(&mut b);
    std::fs::write(&s, b).unwrap();
    copy
}

fn no_stream_change(_: &mut Vec<u8>) {}

/// Packet size with bit 63 set in the first packet of the stream (babeltrace2 2.0.4 asserts on it).
fn packet_size_2_63(b: &mut Vec<u8>) {
    b[56..64].copy_from_slice(&0x8000_0000_0000_8000u64.to_le_bytes());
}

const GID: &str = "integer { size = 8; align = 8; signed = 0; encoding = none; base = 10; } _gid[24];";

fn read_all(path: &Path) -> Result<u64, TraceError> {
    let mut r = TraceReader::new(Source::Directory(path.to_path_buf()), ReaderOptions { require_ros2: false, ..Default::default() })?;
    let mut n = 0;
    while r.next_record()?.is_some() {
        n += 1;
    }
    Ok(n)
}

/// babeltrace2's own CLI on `path`: killed by a signal (it aborted)?
fn babeltrace2_aborts(path: &Path) -> bool {
    let o = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 4000000; exec timeout 120 babeltrace2 \"$0\" > /dev/null 2>&1")
        .arg(path)
        .output()
        .expect("babeltrace2");
    // `sh` reports a child killed by signal N as 128 + N.
    matches!(o.status.code(), Some(c) if c > 128 && c != 124) || o.status.code().is_none()
}

fn one_line_error(e: &TraceError, path: &Path) -> String {
    let s = e.to_string();
    assert!(!s.contains('\n'), "one line: {s}");
    assert!(s.contains(&path.display().to_string()), "names {}: {s}", path.display());
    s
}

fn max_rss_mb(who: libc::c_int) -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out pointer.
    unsafe { libc::getrusage(who, &mut u) };
    u.ru_maxrss as f64 / 1024.0
}

#[test]
fn hostile_metadata_never_takes_the_process_down() {
    let f = fixture();
    assert_eq!(read_all(&f.session).expect("the real trace reads"), f.events, "checked in a child, then read: every event");

    // 1. The whitespace change: `uint32_t magic ;` made the stream framing check skip the trace,
    //    and babeltrace2 aborted on a packet size of 2^63. Now the framing check still applies.
    let magic = variant(&f, "magic", &|t| t.replace("uint32_t magic;", "uint32_t magic ;"), &packet_size_2_63);
    assert!(babeltrace2_aborts(&magic), "oracle: babeltrace2 itself aborts on this trace");
    let e = read_all(&magic).expect_err("refused");
    assert!(one_line_error(&e, &magic).contains("invalid sizes"), "{e}");

    // 2. An event array of 10^9 elements: GLib aborted allocating 8 GB. Refused from the metadata.
    let array = variant(&f, "array", &|t| t.replace(GID, &GID.replace("[24]", "[1000000000]")), &no_stream_change);
    let e = read_all(&array).expect_err("refused");
    assert!(one_line_error(&e, &array).contains("1000000000 elements"), "{e}");

    // 3. The same allocation made of arrays each under the cap (30 000 × 30 000 bytes): the metadata
    //    check multiplies through the structure and refuses it (babeltrace2 ran out of memory in the check child).
    let nested = variant(
        &f,
        "nested",
        &|t| t.replace(GID, "struct { integer { size = 8; align = 8; signed = 0; encoding = none; base = 10; } b[30000]; } _gid[30000];"),
        &no_stream_change,
    );
    let e = read_all(&nested).expect_err("refused");
    let msg = one_line_error(&e, &nested);
    assert!(msg.contains("900000000 elements"), "{msg}");

    // 4. A layout that is not LTTng-UST's (no fixed-offset framing check applies) with the same bad packet
    //    size: babeltrace2's assertion fires in the check child.
    let other = variant(
        &f,
        "other",
        &|t| t.replace("uint64_t packet_seq_num;", "uint64_t packet_seq_num2;"),
        &packet_size_2_63,
    );
    assert!(babeltrace2_aborts(&other), "oracle: babeltrace2 itself aborts on this trace");
    let e = read_all(&other).expect_err("refused");
    let msg = one_line_error(&e, &other);
    assert!(msg.contains("SIGABRT"), "{msg}");

    // The dump example (a program built on the reader): one line on stderr, an exit status, never a signal.
    for t in [&magic, &array, &nested, &other] {
        let (ok, stderr) = dump_with_timeout(t, 120);
        assert!(!ok && stderr.trim().lines().count() == 1, "{}: {stderr}", t.display());
    }
    // Memory: this process never held the abort's allocation; the check child was bounded (1 GiB data limit).
    let (me, children) = (max_rss_mb(libc::RUSAGE_SELF), max_rss_mb(libc::RUSAGE_CHILDREN));
    eprintln!("peak RSS: this process {me:.0} MB, largest child {children:.0} MB");
    assert!(me < 256.0, "{me} MB");
    assert!(children < 1300.0, "{children} MB");
}

/// A FIFO or a device node among a trace's stream files was skipped without a
/// note (issue 23, item 14); babeltrace2 would open it (a FIFO blocks its
/// reader until a writer comes). Now the directory is refused at once with one
/// line naming the file. Oracle: the file types as stat(2) reports them.
#[test]
fn fifo_or_device_in_a_trace_directory_is_refused_by_name() {
    use std::os::unix::fs::FileTypeExt;
    let f = fixture();
    for (name, make) in [("fifo", 0), ("device", 1)] {
        let copy = f.root.join(format!("with-{name}"));
        copy_dir(&f.session, &copy);
        let node = ust_trace(&copy).join(format!("ros2_{name}"));
        let c = std::ffi::CString::new(node.display().to_string()).unwrap();
        // SAFETY: a valid C path; mkfifo/mknod(2) only create the node (the device is /dev/null's, 1:3).
        let rc = unsafe {
            if make == 0 {
                libc::mkfifo(c.as_ptr(), 0o600)
            } else {
                libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(1, 3))
            }
        };
        assert_eq!(rc, 0, "{name}: {}", std::io::Error::last_os_error());
        let ft = std::fs::symlink_metadata(&node).unwrap().file_type();
        assert!(ft.is_fifo() || ft.is_char_device(), "{name}: the node is what it should be");
        let started = std::time::Instant::now();
        let e = read_all(&copy).expect_err("refused");
        let msg = one_line_error(&e, &node);
        assert!(msg.contains("not a regular file"), "{msg}");
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "refused at once, not after a stall");
    }
}
