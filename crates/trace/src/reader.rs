//! The babeltrace2 graph behind [`TraceReader`]:
//!
//! ```text
//! source.ctf.fs (trace directory)      ─┐
//!   or source.ctf.lttng-live (net://…) ─┴─> filter.utils.muxer ─> simple sink (this crate)
//! ```
//!
//! The two sources differ only in the component class and its parameters;
//! the muxer orders the per-CPU streams by time, as the `babeltrace2` CLI does.
//! Each `bt_graph_run_once` lets the sink take one batch of messages from the
//! muxer; the sink decodes them into a small queue that `poll` drains, so
//! memory stays bounded by one batch whatever the trace size.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::CString;
use std::os::raw::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::decode::{cstr_lossy, member_index, ClassDecoder};
use crate::event::{EventContext, EventTime, ProcName, Record};
use crate::ffi::*;
use crate::TraceError;

/// A NUL-terminated C string literal (`c"..."` needs a newer Rust than the workspace's 1.75).
macro_rules! cstr {
    ($s:literal) => {
        concat!($s, "\0").as_ptr() as *const std::os::raw::c_char
    };
}

/// Where the events come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A trace directory as `ros2 trace` / `lttng` write it (the session
    /// directory, its `ust/` subtree, or one `ust/uid/<uid>/64-bit/` trace).
    Directory(PathBuf),
    /// A live LTTng session served by lttng-relayd:
    /// `net://HOST[:PORT]/host/TRACED_HOST/SESSION`.
    Live { url: String, session_not_found: SessionNotFound },
}

/// What the live source does while the named session does not exist
/// (lttng-live's `session-not-found-action`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionNotFound {
    /// Keep trying until the session appears (an agent following a host).
    Continue,
    /// End the read without events.
    End,
    /// Fail with an error.
    Fail,
}

/// Caps and behaviour of a reader.
#[derive(Clone, Debug)]
pub struct ReaderOptions {
    /// Distinct non-decoded event names counted individually; further names
    /// are counted together in [`ReadStats::unknown_names_overflow`].
    pub max_unknown_names: usize,
    /// Event classes whose decoder is kept (ros2_tracing has ~40; a trace
    /// declaring more is decoded slower, never wrongly).
    pub max_event_classes: usize,
    /// Distinct trace environments remembered in [`ReadStats::traces`] (and clocks in [`ReadStats::clocks`]).
    pub max_traces: usize,
    /// At the end of a read with no `ros2:*` event at all, fail with
    /// [`TraceError::Foreign`] (default) or just report it in the stats.
    pub require_ros2: bool,
    /// Read a trace directory once in a child process first (see
    /// [`check_in_child`]): babeltrace2 aborts the process on some damaged
    /// traces, and GLib aborts when an allocation fails; in the child that
    /// costs the child, and this reader refuses the trace in one line.
    pub contain: bool,
    /// Memory the child may allocate beyond what the process holds already (its data segment limit).
    pub check_memory_bytes: u64,
    /// The child is stopped when it read no event for this long (more for a large metadata file).
    pub check_stall: Duration,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            max_unknown_names: 256,
            max_event_classes: 1024,
            max_traces: 64,
            require_ros2: true,
            contain: true,
            check_memory_bytes: 1 << 30,
            check_stall: Duration::from_secs(30),
        }
    }
}

/// The clock of a trace as its metadata declares it. For LTTng:
/// name `monotonic`, frequency 1 GHz, the raw value is CLOCK_MONOTONIC, and
/// the offset is (CLOCK_REALTIME − CLOCK_MONOTONIC) sampled when the session
/// was created, with `origin_is_unix_epoch`: so `ns_from_origin` is close to
/// realtime but drifts from it if the realtime clock is stepped or slewed
/// during the session (docs/tracing.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockInfo {
    pub name: String,
    pub description: String,
    pub frequency: u64,
    pub offset_seconds: i64,
    pub offset_cycles: u64,
    pub precision: u64,
    pub origin_is_unix_epoch: bool,
    pub uuid: Option<[u8; 16]>,
}

/// One trace's LTTng environment (`env` block of its metadata).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceInfo {
    pub hostname: Option<String>,
    /// `ust` or `kernel`.
    pub domain: Option<String>,
    pub tracer_name: Option<String>,
    pub trace_name: Option<String>,
}

/// The two ros2_tracing layouts that matter for joining with the wire,
/// named after the ROS 2 distro that writes them (`humble`, `jazzy`: the
/// agent's trace counters, the lab's `tracing` setting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `rmw_publish` records only `message` (Humble, Iron: tracetools < 8).
    RmwPublishWithoutTimestamp,
    /// `rmw_publish` records `rmw_publisher_handle`, `message`, `timestamp` (Jazzy on: tracetools ≥ 8).
    RmwPublishWithTimestamp,
}

impl Layout {
    pub const ALL: [Layout; 2] = [Layout::RmwPublishWithoutTimestamp, Layout::RmwPublishWithTimestamp];

    pub fn as_str(self) -> &'static str {
        match self {
            Layout::RmwPublishWithoutTimestamp => "humble",
            Layout::RmwPublishWithTimestamp => "jazzy",
        }
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Layout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Layout::ALL.into_iter().find(|l| l.as_str() == s).ok_or_else(|| format!("unknown ros2_tracing layout {s:?}: expected humble or jazzy"))
    }
}

/// What a read saw besides the decoded events: nothing is dropped silently.
#[derive(Clone, Debug, Default)]
pub struct ReadStats {
    /// Event messages seen (decoded or not).
    pub events: u64,
    /// `ros2:*` events decoded into [`crate::Ros2Event`].
    pub ros2_events: u64,
    /// Events not decoded, per full name (`ros2:rcl_service_init`, `sched_switch`, ...).
    pub unknown_by_name: BTreeMap<String, u64>,
    /// Events of names beyond `max_unknown_names`.
    pub unknown_names_overflow: u64,
    /// `ros2:*` events whose layout is not ros2_tracing's, per name, with the reason.
    pub malformed_by_name: BTreeMap<String, (u64, String)>,
    /// Events dropped because they carry no clock value or it overflows i64 ns.
    pub untimed_events: u64,
    /// Events LTTng reported lost (discard-mode ring buffers were full).
    pub discarded_events: u64,
    /// Packets LTTng reported lost.
    pub discarded_packets: u64,
    /// Event classes decoded without a cached decoder (more than `max_event_classes`).
    pub uncached_event_classes: u64,
    /// Kernel traces found under the directory and not read.
    pub skipped_kernel_traces: Vec<PathBuf>,
    /// Distinct traces seen (environment), up to `max_traces`.
    pub traces: Vec<TraceInfo>,
    /// Clock classes seen.
    pub clocks: Vec<ClockInfo>,
    /// Layout of `rmw_publish`, once one was seen.
    pub layout: Option<Layout>,
    /// Times a following live reader (`SessionNotFound::Continue`) lost its
    /// session or relay and reconnected; events around a reconnection may be
    /// missed or repeated.
    pub live_reconnects: u64,
    /// The error that caused the last reconnection.
    pub last_live_error: Option<String>,
}

impl ReadStats {
    /// Events read but not returned, in total.
    pub fn not_decoded(&self) -> u64 {
        self.unknown_by_name.values().sum::<u64>()
            + self.unknown_names_overflow
            + self.malformed_by_name.values().map(|(n, _)| n).sum::<u64>()
            + self.untimed_events
    }
}

/// What one [`TraceReader::poll`] produced.
#[derive(Debug)]
pub enum Poll {
    Record(Record),
    /// No event available yet (live source); poll again later.
    Again,
    /// The trace (or the live session) ended.
    End,
}

struct CtxSlots {
    class: *const bt_field_class,
    vpid: Option<(u64, bool)>,
    vtid: Option<(u64, bool)>,
    procname: Option<u64>,
}

struct SinkState {
    queue: VecDeque<Record>,
    opts: ReaderOptions,
    stats: ReadStats,
    classes: Vec<(*const bt_event_class, ClassDecoder)>,
    last_class: usize,
    ctx_slots: Vec<CtxSlots>,
    packet_slots: Vec<(*const bt_field_class, Option<u64>)>,
    last_clock: *const bt_clock_class,
    last_trace: *const bt_trace,
    panicked: bool,
}

/// Streams [`Record`]s from a trace directory or a live session.
///
/// Reads are bounded in memory: one babeltrace2 message batch is decoded at a
/// time, and every table keyed by something from the trace (event classes,
/// unknown names, traces) is capped with its overflow counted in [`ReadStats`].
pub struct TraceReader {
    origin: String,
    class_name: &'static str,
    params: Value,
    /// Null between a failed live reconnection and the next attempt.
    graph: *mut bt_graph,
    sink: Box<SinkState>,
    ended: bool,
    live: bool,
    /// A live reader with `SessionNotFound::Continue`: it survives session
    /// restarts and relay errors by reconnecting.
    follow: bool,
    retry_at: Option<Instant>,
    backoff: Duration,
}

// The graph is owned by the reader and only touched through `&mut self`, one
// thread at a time; libbabeltrace2 objects are not tied to the creating thread
// (its per-thread error is taken right after the call that set it).
unsafe impl Send for TraceReader {}

impl Drop for TraceReader {
    fn drop(&mut self) {
        if !self.graph.is_null() {
            let _bt = bt_lock();
            unsafe { bt_graph_put_ref(self.graph) };
        }
    }
}

/// Held (shared) by every thread while it is inside babeltrace2, and taken
/// exclusively around the `fork` of [`check_in_child`]: so no thread of
/// this process is inside babeltrace2 or GLib, holding one of their locks,
/// when the child is made (a child that inherited such a lock would wait for
/// it forever).
static BT: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn bt_lock() -> std::sync::RwLockReadGuard<'static, ()> {
    BT.read().unwrap_or_else(|p| p.into_inner())
}

fn cstring(s: &str, origin: &str) -> Result<CString, TraceError> {
    CString::new(s).map_err(|_| TraceError::Setup {
        origin: origin.to_string(),
        message: "contains a NUL byte".into(),
    })
}

/// Takes babeltrace2's current-thread error and keeps its root cause (the
/// innermost, most specific message) on one line.
fn take_bt_error(origin: &str, fallback: &str) -> TraceError {
    unsafe {
        let err = bt_current_thread_take_error();
        if err.is_null() {
            return TraceError::Read { origin: origin.to_string(), message: fallback.to_string() };
        }
        let n = bt_error_get_cause_count(err);
        let mut msgs = Vec::new();
        for i in 0..n {
            let c = bt_error_borrow_cause_by_index(err, i);
            let m = cstr_lossy(bt_error_cause_get_message(c));
            let m = m.split_whitespace().collect::<Vec<_>>().join(" ");
            if !m.is_empty() {
                msgs.push(m);
            }
        }
        bt_error_release(err);
        let message = match msgs.first() {
            Some(root) => root.clone(),
            None => fallback.to_string(),
        };
        TraceError::Read { origin: origin.to_string(), message }
    }
}

/// Trace directories (those holding a CTF `metadata` file) at or below `root`.
fn find_traces(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), 0u32)];
    while let Some((dir, depth)) = stack.pop() {
        if dir.join("metadata").is_file() {
            out.push(dir);
            continue;
        }
        if depth >= 8 {
            continue;
        }
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    stack.push((e.path(), depth + 1));
                }
            }
        }
    }
    out.sort();
    out
}

fn is_kernel_trace(root: &Path, trace: &Path) -> bool {
    trace.strip_prefix(root).map(|rel| rel.components().any(|c| c.as_os_str() == "kernel")).unwrap_or(false)
        || trace.file_name().map(|n| n == "kernel").unwrap_or(false)
}

/// Metadata files larger than this are refused (LTTng's are kilobytes to a few MB).
const MAX_METADATA_BYTES: u64 = 256 << 20;

/// The trace UUIDs of `traces` (one LTTng session's per-uid and per-pid traces share it) name one
/// session; several are refused, each named by the folder under `root` that holds its traces.
fn one_session(root: &Path, traces: &[PathBuf], uuids: &[Option<String>]) -> Result<(), TraceError> {
    let mut groups: std::collections::BTreeMap<&str, Vec<&Path>> = std::collections::BTreeMap::new();
    for (t, u) in traces.iter().zip(uuids) {
        groups.entry(u.as_deref().unwrap_or("")).or_default().push(t);
    }
    if groups.len() < 2 {
        return Ok(());
    }
    // per session, the leading folders every one of its traces shares
    let commons: Vec<Vec<std::path::Component>> = groups
        .values()
        .map(|dirs| {
            let rel: Vec<Vec<std::path::Component>> = dirs.iter().map(|d| d.strip_prefix(root).unwrap_or(d).components().collect()).collect();
            let mut common = rel[0].clone();
            for r in &rel[1..] {
                let n = common.iter().zip(r).take_while(|(a, b)| a == b).count();
                common.truncate(n);
            }
            common
        })
        .collect();
    // named by the shallowest folders that tell them apart (`session-20250101…`, not its ust/uid/…)
    let deepest = commons.iter().map(Vec::len).max().unwrap_or(0);
    let name_at = |k: usize| -> Vec<String> {
        commons
            .iter()
            .map(|c| {
                let p: PathBuf = c[..k.min(c.len())].iter().collect();
                if p.as_os_str().is_empty() { ".".to_string() } else { p.display().to_string() }
            })
            .collect()
    };
    let mut sessions = name_at(deepest);
    for k in 1..=deepest {
        let names = name_at(k);
        let distinct: std::collections::BTreeSet<&String> = names.iter().collect();
        if distinct.len() == names.len() {
            sessions = names;
            break;
        }
    }
    sessions.sort();
    Err(TraceError::Sessions { path: root.to_path_buf(), sessions })
}

/// The `uuid` of a TSDL metadata text's `trace` block.
fn trace_uuid(text: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(text).ok()?;
    let mut rest = text;
    while let Some(i) = rest.find("trace") {
        let after = rest[i + 5..].trim_start();
        if after.starts_with('{') && (i == 0 || !rest.as_bytes()[i - 1].is_ascii_alphanumeric()) {
            let block = &after[..after.find('}').unwrap_or(after.len())];
            let j = block.find("uuid")?;
            let v = block[j + 4..].trim_start().strip_prefix('=')?.trim_start().strip_prefix('"')?;
            return Some(v[..v.find('"')?].to_string());
        }
        rest = &rest[i + 5..];
    }
    None
}

/// Checks a trace's metadata and stream framing; returns its trace UUID where it names one.
fn check_metadata(path: &Path) -> Result<Option<String>, TraceError> {
    let origin = path.display().to_string();
    let err = |message: String| TraceError::Read { origin: origin.clone(), message };
    let len = std::fs::metadata(path).map_err(|e| err(e.to_string()))?.len();
    if len > MAX_METADATA_BYTES {
        return Err(err(format!("metadata is {len} bytes, more than the {MAX_METADATA_BYTES} accepted")));
    }
    // A FIFO, device or socket among the stream files: babeltrace2 would open
    // and read it (a FIFO blocks, a device never ends). Refused, named.
    if let Some(dir) = path.parent() {
        let rd = std::fs::read_dir(dir).map_err(|e| err(e.to_string()))?;
        for entry in rd.flatten() {
            let Ok(ft) = entry.file_type() else { continue };
            if !ft.is_file() && !ft.is_dir() && !ft.is_symlink() {
                return Err(TraceError::Read {
                    origin: entry.path().display().to_string(),
                    message: "not a regular file (a FIFO, device or socket) in a trace directory, which holds only stream files: refused".into(),
                });
            }
            if ft.is_symlink() && !entry.path().is_file() && !entry.path().is_dir() {
                return Err(TraceError::Read {
                    origin: entry.path().display().to_string(),
                    message: "a symbolic link to something other than a regular file or directory in a trace directory: refused".into(),
                });
            }
        }
    }
    if !std::fs::metadata(path).map(|m| m.is_file()).unwrap_or(false) {
        return Err(err("metadata is not a regular file: refused".into()));
    }
    let bytes = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let text = crate::metadata::tsdl_text(&bytes).map_err(err)?;
    let uuid = trace_uuid(&text);
    // Stream files of a standard LTTng-UST trace: check their packet framing.
    let (Some(le), Some(dir)) = (crate::metadata::lttng_byte_order(&text), path.parent()) else {
        return Ok(uuid);
    };
    let rd = std::fs::read_dir(dir).map_err(|e| err(e.to_string()))?;
    for entry in rd.flatten() {
        let p = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !p.is_file() || name == "metadata" || name.starts_with('.') {
            continue;
        }
        let origin = p.display().to_string();
        let mut f = std::fs::File::open(&p).map_err(|e| TraceError::Read { origin: origin.clone(), message: e.to_string() })?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        crate::metadata::check_lttng_stream(&mut f, len, le)
            .map_err(|message| TraceError::Read { origin: origin.clone(), message })?;
    }
    Ok(uuid)
}

/// Reads the trace directory `path` to its end in a forked child process
/// under a memory limit (the process's data segment now plus
/// `check_memory_bytes`, 1 GiB), before this process reads it. babeltrace2 2.0.4
/// asserts (SIGABRT) on some damaged streams, and GLib aborts (SIGTRAP) when
/// an allocation fails — a metadata file declaring an event array of 10^9
/// elements made it allocate 8 GB, or, with no limit, grow until the OOM
/// killer came. In the child either only ends the child: the trace is
/// refused with one line naming what happened (babeltrace2's or GLib's own
/// last words, which the child writes to a pipe instead of the terminal).
/// A child that reads no event for `check_stall` is stopped. The read
/// in this process then sees exactly the bytes the child read safely.
///
/// The child only makes system calls and runs the reader (allocation with
/// glibc's fork-safe malloc); readers are opened before their threads start
/// (`ddscope latency --trace`), so no other thread holds a lock of
/// babeltrace2's or GLib's when the process forks.
fn check_in_child(path: &Path, opts: &ReaderOptions) -> Result<(), TraceError> {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let origin = path.display().to_string();
    let fail = |message: String| TraceError::Read { origin: origin.clone(), message };
    let mut meta_bytes = 0u64;
    for t in find_traces(path) {
        meta_bytes += std::fs::metadata(t.join("metadata")).map(|m| m.len()).unwrap_or(0);
    }
    // One more second per 16 MiB of metadata (babeltrace2 reads a comment
    // at tens of MiB/s): 256 MiB of it once bought the child 281 s.
    let stall = opts.check_stall + Duration::from_secs(meta_bytes >> 24);
    // The process's data segment now (heap, anonymous and private writable mappings): the child's
    // limit is relative to it. RLIMIT_DATA, not RLIMIT_AS: babeltrace2 maps the stream files it
    // reads (read-only, not counted), GLib's allocations are counted.
    let data = std::fs::read_to_string("/proc/self/statm").ok().and_then(|s| s.split_whitespace().nth(5)?.parse::<u64>().ok()).unwrap_or(0)
        * 4096;
    let limit = data.saturating_add(opts.check_memory_bytes);
    let (mut progress, mut errors) = ([0 as libc::c_int; 2], [0 as libc::c_int; 2]);
    // SAFETY: plain syscalls with valid arguments.
    unsafe {
        if libc::pipe2(progress.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(fail(format!("cannot check the trace: pipe: {}", std::io::Error::last_os_error())));
        }
        if libc::pipe2(errors.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            libc::close(progress[0]);
            libc::close(progress[1]);
            return Err(fail(format!("cannot check the trace: pipe: {}", std::io::Error::last_os_error())));
        }
    }
    let child_opts = ReaderOptions { contain: false, require_ros2: false, ..opts.clone() };
    let dir = path.to_path_buf();
    let exclusive = BT.write().unwrap_or_else(|p| p.into_inner());
    // SAFETY: see above; the child never returns from this block.
    let pid = unsafe { libc::fork() };
    // In the child this releases its copy of the lock (held by this same thread), in the parent the lock.
    drop(exclusive);
    if pid < 0 {
        return Err(fail(format!("cannot check the trace: fork: {}", std::io::Error::last_os_error())));
    }
    if pid == 0 {
        // SAFETY: the child's own descriptors and limits; it ends with _exit.
        unsafe {
            libc::close(progress[0]);
            libc::close(errors[0]);
            libc::dup2(errors[1], 2);
            let rl = libc::rlimit { rlim_cur: limit, rlim_max: limit };
            libc::setrlimit(libc::RLIMIT_DATA, &rl);
            let out = progress[1];
            let say = |b: &[u8]| {
                libc::write(out, b.as_ptr().cast(), b.len());
            };
            let code = match TraceReader::new(Source::Directory(dir), child_opts) {
                Err(e) => {
                    say(format!("E{e}").as_bytes());
                    1
                }
                Ok(mut r) => {
                    let mut n = 0u64;
                    loop {
                        match r.next_record() {
                            Ok(Some(_)) => {
                                n += 1;
                                if n % 4096 == 0 {
                                    say(b".");
                                }
                            }
                            Ok(None) => break 0,
                            Err(e) => {
                                say(format!("E{e}").as_bytes());
                                break 1;
                            }
                        }
                    }
                }
            };
            libc::_exit(code);
        }
    }
    // SAFETY: closing our copies of the child's ends; the read ends are ours to own.
    let (mut prog, mut errs) = unsafe {
        libc::close(progress[1]);
        libc::close(errors[1]);
        (std::fs::File::from_raw_fd(progress[0]), std::fs::File::from_raw_fd(errors[0]))
    };
    let mut said = Vec::new();
    let mut stderr_tail = Vec::new();
    let mut last = Instant::now();
    let mut open = [true, true];
    let mut stalled = false;
    while open[0] || open[1] {
        let mut fds = [
            libc::pollfd { fd: if open[0] { progress[0] } else { -1 }, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: if open[1] { errors[0] } else { -1 }, events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: valid pollfd array.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, 500) };
        if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            break;
        }
        let mut buf = [0u8; 4096];
        for (i, f) in [&mut prog, &mut errs].into_iter().enumerate() {
            if fds[i].revents == 0 {
                continue;
            }
            match f.read(&mut buf) {
                Ok(0) | Err(_) => open[i] = false,
                Ok(k) => {
                    if i == 0 {
                        last = Instant::now();
                        let text: Vec<u8> = buf[..k].iter().copied().filter(|&b| b != b'.').collect();
                        if said.len() < 4096 {
                            said.extend_from_slice(&text);
                        }
                    } else {
                        stderr_tail.extend_from_slice(&buf[..k]);
                        if stderr_tail.len() > 8192 {
                            stderr_tail.drain(..stderr_tail.len() - 4096);
                        }
                    }
                }
            }
        }
        if last.elapsed() > stall {
            // SAFETY: our child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            stalled = true;
            break;
        }
    }
    let mut status = 0;
    // SAFETY: our child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if stalled {
        return Err(fail(format!("reading the trace made no progress for {} s (checked in a child process, stopped)", stall.as_secs())));
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        return Ok(());
    }
    if libc::WIFEXITED(status) {
        // The reader's own error, as this process would have met it.
        let said = String::from_utf8_lossy(&said);
        let msg = said.strip_prefix('E').unwrap_or(&said).to_string();
        let msg = msg.strip_prefix(&format!("{origin}: ")).unwrap_or(&msg).to_string();
        return Err(fail(one_line(&msg, "the trace cannot be read")));
    }
    let sig = if libc::WIFSIGNALED(status) { libc::WTERMSIG(status) } else { 0 };
    let name = match sig {
        libc::SIGABRT => "SIGABRT",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGKILL => "SIGKILL",
        libc::SIGFPE => "SIGFPE",
        _ => "a signal",
    };
    let last_words = String::from_utf8_lossy(&stderr_tail).lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").to_string();
    Err(fail(format!(
        "damaged or hostile trace, refused: babeltrace2 crashed reading it ({name} in the child process that checks traces{})",
        if last_words.is_empty() { String::new() } else { format!(": {}", one_line(&last_words, "")) }
    )))
}

/// `s` on one line, printable, at most 300 characters (or `fallback` when empty).
fn one_line(s: &str, fallback: &str) -> String {
    let t: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let t: String = t.chars().filter(|c| !c.is_control()).take(300).collect();
    if t.is_empty() {
        fallback.to_string()
    } else {
        t
    }
}

struct Plugin(*const bt_plugin);
impl Drop for Plugin {
    fn drop(&mut self) {
        unsafe { bt_plugin_put_ref(self.0) };
    }
}

fn find_plugin(name: &str) -> Result<Plugin, TraceError> {
    let c = CString::new(name).map_err(|_| TraceError::PluginMissing { plugin: name.into() })?;
    let mut p: *const bt_plugin = std::ptr::null();
    let st = unsafe { bt_plugin_find(c.as_ptr(), 1, 0, 1, 1, 0, &mut p) };
    unsafe { bt_current_thread_clear_error() };
    if st != STATUS_OK || p.is_null() {
        return Err(TraceError::PluginMissing { plugin: name.into() });
    }
    Ok(Plugin(p))
}

struct Value(*mut bt_value);
impl Drop for Value {
    fn drop(&mut self) {
        unsafe { bt_value_put_ref(self.0) };
    }
}

unsafe fn connect(
    graph: *mut bt_graph,
    src_class: *const bt_component_class_source,
    mux_class: *const bt_component_class_filter,
    params: *const bt_value,
    user: *mut c_void,
    origin: &str,
) -> Result<(), TraceError> {
    let mut src: *const bt_component_source = std::ptr::null();
    if bt_graph_add_source_component(graph, src_class, cstr!("source"), params, BT_LOGGING_LEVEL_NONE, &mut src) != STATUS_OK {
        return Err(take_bt_error(origin, "cannot open the trace"));
    }
    let mut mux: *const bt_component_filter = std::ptr::null();
    if bt_graph_add_filter_component(graph, mux_class, cstr!("muxer"), std::ptr::null(), BT_LOGGING_LEVEL_NONE, &mut mux)
        != STATUS_OK
    {
        return Err(take_bt_error(origin, "cannot create the muxer"));
    }
    let mut sink: *const bt_component_sink = std::ptr::null();
    if bt_graph_add_simple_sink_component(graph, cstr!("ddscope"), None, consume, None, user, &mut sink) != STATUS_OK {
        return Err(take_bt_error(origin, "cannot create the sink"));
    }
    let n = bt_component_source_get_output_port_count(src);
    if n == 0 {
        return Err(TraceError::NoTrace { path: PathBuf::from(origin) });
    }
    for i in 0..n {
        let out = bt_component_source_borrow_output_port_by_index_const(src, i);
        let free = bt_component_filter_get_input_port_count(mux) - 1;
        let inp = bt_component_filter_borrow_input_port_by_index_const(mux, free);
        if bt_graph_connect_ports(graph, out, inp, std::ptr::null_mut()) != STATUS_OK {
            return Err(take_bt_error(origin, "cannot connect the source to the muxer"));
        }
    }
    let out = bt_component_filter_borrow_output_port_by_index_const(mux, 0);
    let inp = bt_component_sink_borrow_input_port_by_index_const(sink, 0);
    if bt_graph_connect_ports(graph, out, inp, std::ptr::null_mut()) != STATUS_OK {
        return Err(take_bt_error(origin, "cannot connect the muxer to the sink"));
    }
    Ok(())
}

impl TraceReader {
    /// Opens a trace directory (see [`Source::Directory`]).
    pub fn open(path: impl AsRef<Path>) -> Result<TraceReader, TraceError> {
        TraceReader::new(Source::Directory(path.as_ref().to_path_buf()), ReaderOptions::default())
    }

    /// Opens a live session: `net://localhost/host/<traced host>/<session>`
    /// (lttng-relayd's viewer port 5344 unless the URL names another).
    pub fn open_live(url: &str, session_not_found: SessionNotFound) -> Result<TraceReader, TraceError> {
        TraceReader::new(Source::Live { url: url.to_string(), session_not_found }, ReaderOptions::default())
    }

    /// Opens any source with explicit options.
    pub fn new(source: Source, opts: ReaderOptions) -> Result<TraceReader, TraceError> {
        let mut skipped_kernel = Vec::new();
        // babeltrace2 is entered below; a directory is first checked in a child (without the lock).
        let bt_guard;
        let (origin, class_name, params, live) = match &source {
            Source::Directory(path) => {
                let origin = path.display().to_string();
                if !path.is_dir() {
                    return Err(TraceError::NotFound { path: path.clone() });
                }
                let traces = find_traces(path);
                if traces.is_empty() {
                    return Err(TraceError::NoTrace { path: path.clone() });
                }
                let (kernel, ust): (Vec<_>, Vec<_>) = traces.into_iter().partition(|t| is_kernel_trace(path, t));
                if ust.is_empty() {
                    return Err(TraceError::KernelOnly { path: path.clone() });
                }
                skipped_kernel = kernel;
                let mut uuids = Vec::with_capacity(ust.len());
                for t in &ust {
                    uuids.push(check_metadata(&t.join("metadata"))?);
                }
                one_session(path, &ust, &uuids)?;
                if opts.contain {
                    check_in_child(path, &opts)?;
                }
                bt_guard = bt_lock();
                let params = Value(unsafe { bt_value_map_create() });
                let inputs = unsafe { bt_value_array_create() };
                for t in &ust {
                    let c = cstring(&t.display().to_string(), &origin)?;
                    unsafe { bt_value_array_append_string_element(inputs, c.as_ptr()) };
                }
                unsafe {
                    bt_value_map_insert_entry(params.0, cstr!("inputs"), inputs);
                    bt_value_put_ref(inputs);
                }
                (origin, "fs", params, false)
            }
            Source::Live { url, session_not_found } => {
                bt_guard = bt_lock();
                let params = Value(unsafe { bt_value_map_create() });
                let inputs = unsafe { bt_value_array_create() };
                let c = cstring(url, url)?;
                let action = match session_not_found {
                    SessionNotFound::Continue => cstr!("continue"),
                    SessionNotFound::End => cstr!("end"),
                    SessionNotFound::Fail => cstr!("fail"),
                };
                unsafe {
                    bt_value_array_append_string_element(inputs, c.as_ptr());
                    bt_value_map_insert_entry(params.0, cstr!("inputs"), inputs);
                    bt_value_put_ref(inputs);
                    bt_value_map_insert_string_entry(
                        params.0,
                        cstr!("session-not-found-action"),
                        action,
                    );
                }
                (url.clone(), "lttng-live", params, true)
            }
        };

        // Fail early, with a clear message, when the plugins are not installed.
        let ctf = find_plugin("ctf")?;
        let class_c = cstring(class_name, &origin)?;
        if unsafe { bt_plugin_borrow_source_component_class_by_name_const(ctf.0, class_c.as_ptr()) }.is_null() {
            return Err(TraceError::PluginMissing { plugin: format!("ctf (source.ctf.{class_name})") });
        }
        let stats = ReadStats { skipped_kernel_traces: skipped_kernel, ..Default::default() };
        let sink = Box::new(SinkState {
            queue: VecDeque::new(),
            opts,
            stats,
            classes: Vec::new(),
            last_class: 0,
            ctx_slots: Vec::new(),
            packet_slots: Vec::new(),
            last_clock: std::ptr::null(),
            last_trace: std::ptr::null(),
            panicked: false,
        });
        let follow = matches!(source, Source::Live { session_not_found: SessionNotFound::Continue, .. });
        let mut reader = TraceReader {
            origin,
            class_name,
            params,
            graph: std::ptr::null_mut(),
            sink,
            ended: false,
            live,
            follow,
            retry_at: None,
            backoff: Duration::from_millis(100),
        };
        reader.build_graph()?;
        drop(bt_guard);
        Ok(reader)
    }

    /// Builds source → muxer → sink; on failure no graph is left behind.
    fn build_graph(&mut self) -> Result<(), TraceError> {
        let ctf = find_plugin("ctf")?;
        let utils = find_plugin("utils")?;
        let class_c = cstring(self.class_name, &self.origin)?;
        let src_class = unsafe { bt_plugin_borrow_source_component_class_by_name_const(ctf.0, class_c.as_ptr()) };
        let mux_class = unsafe { bt_plugin_borrow_filter_component_class_by_name_const(utils.0, cstr!("muxer")) };
        if src_class.is_null() {
            return Err(TraceError::PluginMissing { plugin: format!("ctf (source.ctf.{})", self.class_name) });
        }
        if mux_class.is_null() {
            return Err(TraceError::PluginMissing { plugin: "utils (filter.utils.muxer)".into() });
        }
        let graph = unsafe { bt_graph_create(0) };
        if graph.is_null() {
            return Err(TraceError::Setup { origin: self.origin.clone(), message: "cannot create a babeltrace2 graph".into() });
        }
        let user = &mut *self.sink as *mut SinkState as *mut c_void;
        let result = unsafe { connect(graph, src_class, mux_class, self.params.0, user, &self.origin) };
        match result {
            Ok(()) => {
                self.graph = graph;
                Ok(())
            }
            Err(e) => {
                unsafe { bt_graph_put_ref(graph) };
                Err(e)
            }
        }
    }

    /// The path or URL this reader reads (used in its errors).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// What was read and not returned so far, the traces' environments and clocks.
    pub fn stats(&self) -> &ReadStats {
        &self.sink.stats
    }

    /// The first clock class seen (LTTng traces have one per trace).
    pub fn clock(&self) -> Option<&ClockInfo> {
        self.sink.stats.clocks.first()
    }

    /// The next event, or `Again` when a live source has none yet, or `End`.
    pub fn poll(&mut self) -> Result<Poll, TraceError> {
        loop {
            if let Some(r) = self.sink.queue.pop_front() {
                return Ok(Poll::Record(r));
            }
            if self.ended {
                return Ok(Poll::End);
            }
            if self.graph.is_null() {
                if self.retry_at.is_some_and(|t| Instant::now() < t) {
                    return Ok(Poll::Again);
                }
                let built = {
                    let _bt = bt_lock();
                    self.build_graph()
                };
                if let Err(e) = built {
                    self.live_failure(e);
                    return Ok(Poll::Again);
                }
                self.backoff = Duration::from_millis(100);
            }
            let _bt = bt_lock();
            let st = unsafe { bt_graph_run_once(self.graph) };
            if self.sink.panicked {
                self.ended = true;
                return Err(TraceError::Read {
                    origin: self.origin.clone(),
                    message: "internal error while decoding an event".into(),
                });
            }
            match st {
                STATUS_OK => continue,
                STATUS_AGAIN => {
                    if self.sink.queue.is_empty() {
                        return Ok(Poll::Again);
                    }
                }
                STATUS_END => {
                    self.ended = true;
                    if self.sink.queue.is_empty() {
                        self.check_ros2()?;
                        return Ok(Poll::End);
                    }
                }
                _ => {
                    let e = take_bt_error(&self.origin, "reading the trace failed");
                    if !self.follow {
                        self.ended = true;
                        return Err(e);
                    }
                    // babeltrace2's live source gives up when the followed
                    // session is destroyed and another of the same name is
                    // created ("Session id N is unknown") or the relay daemon
                    // goes away; an agent keeps following: reconnect.
                    unsafe { bt_graph_put_ref(self.graph) };
                    self.graph = std::ptr::null_mut();
                    self.sink.forget_classes();
                    self.live_failure(e);
                    if self.sink.queue.is_empty() {
                        return Ok(Poll::Again);
                    }
                }
            }
        }
    }

    fn live_failure(&mut self, e: TraceError) {
        self.sink.stats.live_reconnects += 1;
        self.sink.stats.last_live_error = Some(e.to_string());
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(Duration::from_secs(2));
    }

    /// The next event; waits (sleeping briefly) while a live source has none.
    /// `Ok(None)` at the end of the trace or session.
    pub fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
        let mut idle = Duration::from_millis(1);
        loop {
            match self.poll()? {
                Poll::Record(r) => return Ok(Some(r)),
                Poll::End => return Ok(None),
                Poll::Again => {
                    std::thread::sleep(idle);
                    idle = (idle * 2).min(Duration::from_millis(50));
                }
            }
        }
    }

    /// Whether this reader follows a live session.
    pub fn is_live(&self) -> bool {
        self.live
    }

    fn check_ros2(&self) -> Result<(), TraceError> {
        let s = &self.sink.stats;
        if !self.sink.opts.require_ros2 || s.ros2_events > 0 || !s.malformed_by_name.is_empty() {
            return Ok(());
        }
        if s.events == 0 {
            if self.live {
                return Ok(());
            }
            return Err(TraceError::Foreign { origin: self.origin.clone(), detail: "it contains no events".into() });
        }
        let mut top: Vec<_> = s.unknown_by_name.iter().collect();
        top.sort_by(|a, b| b.1.cmp(a.1));
        let names: Vec<String> = top.iter().take(3).map(|(n, c)| format!("{n} ×{c}")).collect();
        Err(TraceError::Foreign {
            origin: self.origin.clone(),
            detail: format!("no ros2:* event among its {} events ({})", s.events, names.join(", ")),
        })
    }
}

impl Iterator for TraceReader {
    type Item = Result<Record, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

unsafe extern "C" fn consume(it: *mut bt_message_iterator, user: *mut c_void) -> c_int {
    let state = &mut *(user as *mut SinkState);
    let mut msgs: *const *const bt_message = std::ptr::null();
    let mut count: u64 = 0;
    let st = bt_message_iterator_next(it, &mut msgs, &mut count);
    match st {
        STATUS_OK => {}
        STATUS_END => return STATUS_END,
        STATUS_AGAIN => return STATUS_AGAIN,
        other => return other,
    }
    let slice = std::slice::from_raw_parts(msgs, count as usize);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for &m in slice {
            state.handle(m);
        }
    }));
    for &m in slice {
        bt_message_put_ref(m);
    }
    if result.is_err() {
        state.panicked = true;
        return STATUS_ERROR;
    }
    STATUS_OK
}

unsafe fn int_member(field: *const bt_field, slot: (u64, bool)) -> i64 {
    let f = bt_field_structure_borrow_member_field_by_index_const(field, slot.0);
    if slot.1 {
        bt_field_integer_signed_get_value(f)
    } else {
        bt_field_integer_unsigned_get_value(f) as i64
    }
}

unsafe fn int_slot(fc: *const bt_field_class, name: &str) -> Option<(u64, bool)> {
    let i = member_index(fc, name)?;
    let t = bt_field_class_get_type(crate::decode::member_class(fc, i));
    if t & BT_FIELD_CLASS_TYPE_INTEGER != BT_FIELD_CLASS_TYPE_INTEGER {
        return None;
    }
    Some((i, t & BT_FIELD_CLASS_TYPE_SIGNED_INTEGER == BT_FIELD_CLASS_TYPE_SIGNED_INTEGER))
}

impl SinkState {
    /// A trace's classes die with it (a live session that ends and comes back
    /// under the same name gets new ones, possibly at the same addresses):
    /// forget everything keyed by address.
    fn forget_classes(&mut self) {
        self.classes.clear();
        self.last_class = 0;
        self.ctx_slots.clear();
        self.packet_slots.clear();
        self.last_clock = std::ptr::null();
        self.last_trace = std::ptr::null();
    }

    unsafe fn handle(&mut self, m: *const bt_message) {
        match bt_message_get_type(m) {
            BT_MESSAGE_TYPE_EVENT => self.event(m),
            BT_MESSAGE_TYPE_STREAM_BEGINNING => {
                let stream = bt_message_stream_beginning_borrow_stream_const(m);
                self.note_trace(bt_stream_borrow_trace_const(stream));
            }
            BT_MESSAGE_TYPE_STREAM_END => self.forget_classes(),
            BT_MESSAGE_TYPE_DISCARDED_EVENTS => {
                let mut n = 0u64;
                if bt_message_discarded_events_get_count(m, &mut n) == BT_PROPERTY_AVAILABILITY_AVAILABLE {
                    self.stats.discarded_events += n;
                } else {
                    // LTTng always knows the count; an unknown one is still a loss.
                    self.stats.discarded_events += 1;
                }
            }
            BT_MESSAGE_TYPE_DISCARDED_PACKETS => {
                let mut n = 0u64;
                if bt_message_discarded_packets_get_count(m, &mut n) == BT_PROPERTY_AVAILABILITY_AVAILABLE {
                    self.stats.discarded_packets += n;
                } else {
                    self.stats.discarded_packets += 1;
                }
            }
            _ => {}
        }
    }

    unsafe fn note_trace(&mut self, trace: *const bt_trace) {
        if trace.is_null() || trace == self.last_trace {
            return;
        }
        self.last_trace = trace;
        let env = |name: *const std::os::raw::c_char| -> Option<String> {
            let v = bt_trace_borrow_environment_entry_value_by_name_const(trace, name);
            if v.is_null() {
                return None;
            }
            match bt_value_get_type(v) {
                BT_VALUE_TYPE_STRING => Some(cstr_lossy(bt_value_string_get(v))),
                BT_VALUE_TYPE_SIGNED_INTEGER => Some(bt_value_integer_signed_get(v).to_string()),
                BT_VALUE_TYPE_UNSIGNED_INTEGER => Some(bt_value_integer_unsigned_get(v).to_string()),
                _ => None,
            }
        };
        let info = TraceInfo {
            hostname: env(cstr!("hostname")),
            domain: env(cstr!("domain")),
            tracer_name: env(cstr!("tracer_name")),
            trace_name: env(cstr!("trace_name")),
        };
        if !self.stats.traces.contains(&info) && self.stats.traces.len() < self.opts.max_traces {
            self.stats.traces.push(info);
        }
    }

    fn count_unknown(&mut self, name: &str) {
        if let Some(c) = self.stats.unknown_by_name.get_mut(name) {
            *c += 1;
        } else if self.stats.unknown_by_name.len() < self.opts.max_unknown_names {
            self.stats.unknown_by_name.insert(name.to_string(), 1);
        } else {
            self.stats.unknown_names_overflow += 1;
        }
    }

    fn count_malformed(&mut self, name: &str, reason: &str) {
        if let Some(c) = self.stats.malformed_by_name.get_mut(name) {
            c.0 += 1;
        } else if self.stats.malformed_by_name.len() < self.opts.max_unknown_names {
            self.stats.malformed_by_name.insert(name.to_string(), (1, reason.to_string()));
        } else {
            self.stats.unknown_names_overflow += 1;
        }
    }

    /// The decoder of an event class (cached up to `max_event_classes`).
    unsafe fn decoder(&mut self, ec: *const bt_event_class) -> Result<usize, ClassDecoder> {
        if let Some((p, _)) = self.classes.get(self.last_class) {
            if *p == ec {
                return Ok(self.last_class);
            }
        }
        if let Some(i) = self.classes.iter().position(|(p, _)| *p == ec) {
            self.last_class = i;
            return Ok(i);
        }
        let d = ClassDecoder::build(ec);
        if self.classes.len() >= self.opts.max_event_classes {
            self.stats.uncached_event_classes += 1;
            return Err(d);
        }
        self.classes.push((ec, d));
        self.last_class = self.classes.len() - 1;
        Ok(self.last_class)
    }

    unsafe fn event(&mut self, m: *const bt_message) {
        self.stats.events += 1;
        let ev = bt_message_event_borrow_event_const(m);
        let ec = bt_event_borrow_class_const(ev);
        let owned;
        let dec = match self.decoder(ec) {
            Ok(i) => &self.classes[i].1,
            Err(d) => {
                owned = d;
                &owned
            }
        };
        let (kind, slots) = match dec {
            ClassDecoder::Ros2 { kind, slots } => (*kind, *slots),
            ClassDecoder::Unknown { name } => {
                let name: Arc<str> = name.clone();
                self.count_unknown(&name);
                return;
            }
            ClassDecoder::Malformed { name, reason } => {
                let (name, reason) = (name.clone(), reason.clone());
                self.count_malformed(&name, &reason);
                return;
            }
        };
        // Time: events of a stream class without a default clock carry none.
        let stream = bt_event_borrow_stream_const(ev);
        let sc = bt_stream_borrow_class_const(stream);
        if bt_stream_class_borrow_default_clock_class_const(sc).is_null() {
            self.stats.untimed_events += 1;
            return;
        }
        let cs = bt_message_event_borrow_default_clock_snapshot_const(m);
        let cycles = bt_clock_snapshot_get_value(cs);
        let mut ns = 0i64;
        if bt_clock_snapshot_get_ns_from_origin(cs, &mut ns) != STATUS_OK {
            bt_current_thread_clear_error();
            self.stats.untimed_events += 1;
            return;
        }
        let cc = bt_clock_snapshot_borrow_clock_class_const(cs);
        if cc != self.last_clock {
            self.note_clock(cc);
        }
        let payload = bt_event_borrow_payload_field_const(ev);
        let Some(event) = crate::decode::decode(kind, &slots, payload) else {
            let name = cstr_lossy(bt_event_class_get_name(ec));
            self.count_malformed(&name, "gid array holds non-integers");
            return;
        };
        if kind == crate::decode::Kind::RmwPublish && self.stats.layout.is_none() {
            self.stats.layout = Some(if slots[2].is_some() {
                Layout::RmwPublishWithTimestamp
            } else {
                Layout::RmwPublishWithoutTimestamp
            });
        }
        let context = self.context(ev);
        self.stats.ros2_events += 1;
        self.queue.push_back(Record { event, time: EventTime { cycles, ns_from_origin: ns }, context });
    }

    unsafe fn note_clock(&mut self, cc: *const bt_clock_class) {
        self.last_clock = cc;
        let mut secs = 0i64;
        let mut cycles = 0u64;
        bt_clock_class_get_offset(cc, &mut secs, &mut cycles);
        let uuid_p = bt_clock_class_get_uuid(cc);
        let uuid = if uuid_p.is_null() {
            None
        } else {
            let mut u = [0u8; 16];
            u.copy_from_slice(std::slice::from_raw_parts(uuid_p, 16));
            Some(u)
        };
        let info = ClockInfo {
            name: cstr_lossy(bt_clock_class_get_name(cc)),
            description: cstr_lossy(bt_clock_class_get_description(cc)),
            frequency: bt_clock_class_get_frequency(cc),
            offset_seconds: secs,
            offset_cycles: cycles,
            precision: bt_clock_class_get_precision(cc),
            origin_is_unix_epoch: bt_clock_class_origin_is_unix_epoch(cc) != 0,
            uuid,
        };
        if !self.stats.clocks.contains(&info) && self.stats.clocks.len() < self.opts.max_traces {
            self.stats.clocks.push(info);
        }
    }

    unsafe fn context(&mut self, ev: *const bt_event) -> EventContext {
        let mut ctx = EventContext::default();
        let common = bt_event_borrow_common_context_field_const(ev);
        if !common.is_null() {
            let fc = bt_field_borrow_class_const(common);
            let i = match self.ctx_slots.iter().position(|s| s.class == fc) {
                Some(i) => i,
                None => {
                    let slots = CtxSlots {
                        class: fc,
                        vpid: int_slot(fc, "vpid"),
                        vtid: int_slot(fc, "vtid"),
                        procname: member_index(fc, "procname").filter(|&i| {
                            bt_field_class_get_type(crate::decode::member_class(fc, i)) == BT_FIELD_CLASS_TYPE_STRING
                        }),
                    };
                    if self.ctx_slots.len() >= self.opts.max_event_classes {
                        self.ctx_slots.remove(0);
                    }
                    self.ctx_slots.push(slots);
                    self.ctx_slots.len() - 1
                }
            };
            let s = &self.ctx_slots[i];
            ctx.vpid = s.vpid.map(|sl| int_member(common, sl));
            ctx.vtid = s.vtid.map(|sl| int_member(common, sl));
            ctx.procname = s.procname.map(|idx| {
                let f = bt_field_structure_borrow_member_field_by_index_const(common, idx);
                let p = bt_field_string_get_value(f);
                let len = bt_field_string_get_length(f) as usize;
                if p.is_null() {
                    ProcName::default()
                } else {
                    ProcName::new(std::slice::from_raw_parts(p as *const u8, len.min(16)))
                }
            });
        }
        let packet = bt_event_borrow_packet_const(ev);
        if !packet.is_null() {
            let pc = bt_packet_borrow_context_field_const(packet);
            if !pc.is_null() {
                let fc = bt_field_borrow_class_const(pc);
                let slot = match self.packet_slots.iter().find(|(c, _)| *c == fc) {
                    Some((_, s)) => *s,
                    None => {
                        let s = int_slot(fc, "cpu_id").map(|(i, _)| i);
                        if self.packet_slots.len() >= self.opts.max_event_classes {
                            self.packet_slots.remove(0);
                        }
                        self.packet_slots.push((fc, s));
                        s
                    }
                };
                ctx.cpu_id = slot.map(|i| {
                    let f = bt_field_structure_borrow_member_field_by_index_const(pc, i);
                    if bt_field_get_class_type(f) & BT_FIELD_CLASS_TYPE_SIGNED_INTEGER == BT_FIELD_CLASS_TYPE_SIGNED_INTEGER {
                        bt_field_integer_signed_get_value(f) as u64
                    } else {
                        bt_field_integer_unsigned_get_value(f)
                    }
                });
            }
        }
        ctx
    }
}

#[cfg(test)]
mod tests {
    /// A folder of several recording sessions (`~/.ros/tracing`) is refused, each session named by
    /// the shallowest folder that tells it apart; one session's per-uid traces (one UUID) are one.
    #[test]
    fn several_sessions_are_named_one_session_is_read() {
        use std::path::PathBuf;
        let root = PathBuf::from("/r");
        let t = |p: &str| root.join(p);
        let traces = [t("s1/ust/uid/1000/64-bit"), t("s1/ust/uid/0/64-bit"), t("s2/ust/uid/1000/64-bit")];
        let u = |s: &str| Some(s.to_string());
        assert!(super::one_session(&root, &traces, &[u("a"), u("a"), u("a")]).is_ok());
        let e = super::one_session(&root, &traces, &[u("a"), u("a"), u("b")]).unwrap_err().to_string();
        assert_eq!(e, "/r: holds 2 trace sessions (s1, s2): give one of them, e.g. /r/s1");
        let tsdl = b"/* CTF 1.8 */\ntypealias integer { size = 8; } := uint8_t;\ntrace {\n\tmajor = 1;\n\tuuid = \"41e465f0-abc4-428f-bb5f-4cf9a1803435\";\n};\n";
        assert_eq!(super::trace_uuid(tsdl).as_deref(), Some("41e465f0-abc4-428f-bb5f-4cf9a1803435"));
        assert_eq!(super::trace_uuid(b"env { tracer = \"x\"; };"), None);
    }

    use super::Layout;

    #[test]
    fn layout_names_read_back() {
        for l in Layout::ALL {
            assert_eq!(l.to_string().parse::<Layout>(), Ok(l));
        }
        assert_eq!(Layout::RmwPublishWithTimestamp.to_string(), "jazzy");
        let e = "iron".parse::<Layout>().unwrap_err();
        assert!(e.contains("\"iron\""), "{e}");
    }
}
