//! Things every subcommand shares: output files, formats, errors with exit codes.

use anyhow::Context;
use ddscope_core::output::{Format, RecordWriter};
use ddscope_core::record::Record;
use ddscope_core::sink::{RowSink, RowWriter, TopicSelect};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub use ddscope_core::session::capture_name;
use crate::progress::Progress;
use ddscope_core::latency::files::CaptureInput;
use ddscope_core::latency::LatencyRow;
use ddscope_core::ros2::{ChainRow, TraceInput};
use ddscope_core::session::{self, LatencyOptions, LatencyRun};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutFormat {
    Table,
    Csv,
    Jsonl,
    Json,
    Parquet,
}

impl OutFormat {
    /// CSV, JSON Lines and Parquet carry per-row records; the table and JSON a summary.
    pub fn writes_rows(self) -> bool {
        matches!(self, OutFormat::Csv | OutFormat::Jsonl | OutFormat::Parquet)
    }
}

impl From<OutFormat> for Format {
    fn from(f: OutFormat) -> Format {
        match f {
            OutFormat::Table => Format::Table,
            OutFormat::Csv => Format::Csv,
            OutFormat::Jsonl => Format::Jsonl,
            OutFormat::Json => Format::Json,
            OutFormat::Parquet => Format::Parquet,
        }
    }
}

/// Exit codes (README, `--help`): what a script or CI job can tell apart.
pub mod exit {
    /// A check or verdict failed (`--fail-on-incidents`, `tsn check`, a lab run's checks).
    pub const VERDICT: i32 = 1;
    /// An input could not be read or used (missing, unreadable, not a capture, a malformed file
    /// given as input, captures that do not correlate).
    pub const INPUT: i32 = 2;
    /// The command line is wrong (an option or value, options that conflict): sysexits' EX_USAGE.
    pub const USAGE: i32 = 64;
    /// Anything else stopped the run (an output that cannot be written, a port that cannot be
    /// bound, missing privileges, an internal error): sysexits' EX_SOFTWARE.
    pub const FAILURE: i32 = 70;
}

/// A usage error (exit 64): the command line, not the inputs or the run.
pub fn usage(message: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(ExitError { code: exit::USAGE, message: message.to_string() })
}

/// An input that cannot be read or used (exit 2).
pub fn input(message: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(ExitError { code: exit::INPUT, message: message.to_string() })
}

/// A failed verdict (exit 1).
pub fn verdict(message: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(ExitError { code: exit::VERDICT, message: message.to_string() })
}

/// An error that maps to a specific exit code ([`exit`]).
#[derive(Debug)]
pub struct ExitError {
    pub code: i32,
    pub message: String,
}

impl std::fmt::Display for ExitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExitError {}

pub fn input_error(e: ddscope_core::source::CaptureError) -> anyhow::Error {
    anyhow::Error::new(ExitError { code: e.exit_code(), message: e.to_string() })
}

pub fn session_error(e: ddscope_core::session::SessionError) -> anyhow::Error {
    anyhow::Error::new(ExitError { code: e.exit_code(), message: e.to_string() })
}

/// Temporary files being written, removed if the process is interrupted.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn pending() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    PENDING.lock().unwrap_or_else(|p| p.into_inner())
}

/// For the file commands: Ctrl-C (SIGINT), SIGTERM and SIGHUP remove the
/// temporary files of outputs not yet complete (the final names never hold a
/// partial file, and no hidden `.NAME.ddscope-RANDOM.tmp` stays behind) and exit 130.
pub fn remove_partial_outputs_on_interrupt() {
    let _ = ctrlc::set_handler(|| {
        for p in pending().drain(..) {
            let _ = std::fs::remove_file(p);
        }
        std::process::exit(130);
    });
}

/// An output file written under a temporary name next to its final name and
/// renamed into place by [`Output::commit`]: an interrupted or failed run
/// never leaves a partial Parquet/JSON file under the name the user gave.
pub struct Output {
    tmp: Option<(PathBuf, PathBuf)>,
    /// The temporary file's device and inode, checked before the rename.
    id: Option<(u64, u64)>,
}

impl Output {
    /// Renames the finished file into place (nothing to do for stdout).
    pub fn commit(mut self) -> anyhow::Result<()> {
        if let Some((tmp, fin)) = self.tmp.take() {
            pending().retain(|p| p != &tmp);
            // The name must still hold the file written (not a symlink or
            // another file put there meanwhile by whoever can write the directory).
            let now = std::fs::symlink_metadata(&tmp).ok().filter(|m| m.file_type().is_file()).map(|m| (m.dev(), m.ino()));
            if now.is_none() || now != self.id {
                anyhow::bail!("{}: the temporary file was replaced while it was written (is the directory writable by others?): not moving it to {}", tmp.display(), fin.display());
            }
            std::fs::rename(&tmp, &fin).with_context(|| format!("cannot move {} to {}", tmp.display(), fin.display()))?;
        }
        Ok(())
    }
}

impl Output {
    /// The temporary and the final name, for a caller that renames (or
    /// removes) the file some other way (`live --write` as root, through a
    /// helper that keeps the right to): this `Output` no longer does either.
    pub fn hand_over(mut self) -> Option<(PathBuf, PathBuf)> {
        let t = self.tmp.take()?;
        pending().retain(|p| p != &t.0);
        Some(t)
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        // Not committed: the run failed; the partial file goes away.
        if let Some((tmp, _)) = self.tmp.take() {
            pending().retain(|p| p != &tmp);
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// True when `a` and `b` name the same existing file (device and inode).
fn same_inode(a: &Path, b: &Path) -> bool {
    ddscope_core::session::same_file(a, b)
}

/// The directory `path` would be created in, resolved.
fn parent_dir(path: &Path) -> Option<PathBuf> {
    let p = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    p.canonicalize().ok()
}

/// Refuses an output path that is one of the inputs (the same file, by
/// inode), or a capture/ground-truth file inside an input run directory
/// (the next run would read it as an input).
pub fn check_not_input(output: &Path, inputs: &[PathBuf]) -> anyhow::Result<()> {
    let name = output.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let looks_like_input = [".pcapng", ".pcap", ".pcapng.gz", ".pcap.gz", ".truth.jsonl"].iter().any(|s| name.ends_with(s));
    for i in inputs {
        if same_inode(output, i) {
            return Err(usage(format!("{} is an input of this run: refusing to overwrite it (choose another output file)", output.display())));
        }
        if i.is_dir() && looks_like_input && parent_dir(output).is_some() && parent_dir(output) == i.canonicalize().ok() {
            return Err(usage(format!("{} would be read as an input of {}: choose an output outside it", output.display(), i.display())));
        }
    }
    Ok(())
}

/// Checks, before any work, that `path` can be written: not an input, not a directory, and its
/// directory exists and takes a new file (a temporary one, removed at once). Stdout (`-`) passes.
/// For outputs written only at the end of a run (`report --html`, `latency -o` with a table or
/// JSON), so that a typo in the path fails in a second, not after the whole analysis.
pub fn check_writable(path: &Path, inputs: &[PathBuf]) -> anyhow::Result<()> {
    if path == Path::new("-") {
        return Ok(());
    }
    check_not_input(path, inputs)?;
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return Err(usage(format!("cannot write {}: it is a directory", path.display()))),
        Ok(m) if !m.is_file() => return Ok(()), // a device or FIFO: written directly
        _ => {}
    }
    let (f, tmp) = ddscope_traffic::fsio::create_private_tmp(path).with_context(|| format!("cannot create {}", path.display()))?;
    drop(f);
    let _ = std::fs::remove_file(tmp);
    Ok(())
}

/// Opens `path` for writing (or stdout for none or `-`) after checking it is
/// not one of `inputs`. Parquet needs a file.
pub fn open_output(path: Option<&Path>, format: OutFormat, inputs: &[PathBuf]) -> anyhow::Result<(Box<dyn Write + Send>, Output)> {
    match path {
        Some(p) if p != Path::new("-") => {
            let (f, out) = create_file(p, inputs)?;
            Ok((Box::new(BufWriter::with_capacity(1 << 20, f)), out))
        }
        _ => {
            if format == OutFormat::Parquet {
                return Err(usage("--format parquet needs an output file: add -o FILE.parquet"));
            }
            Ok((Box::new(BufWriter::with_capacity(1 << 16, io::stdout())), Output { tmp: None, id: None }))
        }
    }
}

/// Creates `path`'s temporary sibling; the returned [`Output`] renames it into place.
/// An existing path that is not a regular file (`/dev/null`, a FIFO, a
/// terminal, a socket) is written to directly: renaming a file over it would
/// replace the device node (as root, `-o /dev/null` would leave a regular file
/// at /dev/null).
pub fn create_file(path: &Path, inputs: &[PathBuf]) -> anyhow::Result<(File, Output)> {
    check_not_input(path, inputs)?;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.is_dir() {
            return Err(usage(format!("cannot write {}: it is a directory", path.display())));
        }
        if !meta.is_file() {
            let f = File::options().write(true).open(path).with_context(|| format!("cannot open {} for writing", path.display()))?;
            return Ok((f, Output { tmp: None, id: None }));
        }
    }
    // A random name created with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0666 less
    // the umask: nothing planted at a predictable name is followed or reused.
    let (f, tmp) = ddscope_traffic::fsio::create_private_tmp(path).with_context(|| format!("cannot create {}", path.display()))?;
    let id = f.metadata().ok().map(|m| (m.dev(), m.ino()));
    pending().push(tmp.clone());
    Ok((f, Output { tmp: Some((tmp, path.to_path_buf())), id }))
}

/// Writes `bytes` to `path` through a temporary file (see [`Output`]).
/// Writes a run's timeline to `path` (replaced only once written) and says what it drew.
pub fn write_timeline(verb: &str, t: &ddscope_core::timeline::Timeline, path: &Path, inputs: &[PathBuf]) -> anyhow::Result<()> {
    let (f, out) = create_file(path, inputs)?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let stats = t.write(&mut w).and_then(|s| w.flush().map(|_| s)).with_context(|| format!("cannot write {}", path.display()))?;
    drop(w);
    out.commit()?;
    eprintln!("{verb}: timeline: wrote {} ({})", path.display(), stats.summary_line(t.config().max_rows));
    Ok(())
}

pub fn write_file(path: &Path, bytes: &[u8], inputs: &[PathBuf]) -> anyhow::Result<()> {
    let (mut f, out) = create_file(path, inputs)?;
    f.write_all(bytes).and_then(|_| f.flush()).with_context(|| format!("cannot write {}", path.display()))?;
    drop(f);
    out.commit()
}

pub fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// The `--topic` globs and `--domain` of a command, as the stage that selects rows.
pub fn topic_select(patterns: &[String], domain: Option<u32>) -> anyhow::Result<TopicSelect> {
    TopicSelect::new(patterns, domain).map_err(|e| match e.pattern {
        Some(p) => usage(format!("bad --topic pattern {p:?}: {}", e.source)),
        None => usage(e.source),
    })
}

/// The row writers the options ask for: `-o` (stdout without it) when `format`
/// writes rows, and `--rows FILE` in the format its extension names.
pub fn row_writers<R: Record>(format: OutFormat, output: Option<&Path>, rows: Option<&Path>, inputs: &[PathBuf]) -> anyhow::Result<(Vec<RowWriter<R>>, Vec<Output>)> {
    let mut outputs = vec![];
    let mut writers = vec![];
    if format.writes_rows() {
        let (w, o) = open_output(output, format, inputs)?;
        outputs.push(o);
        writers.push(RowWriter::new(RecordWriter::new(format.into(), w, &[])?));
    }
    if let Some(p) = rows {
        let f = match p.extension().and_then(|e| e.to_str()) {
            Some("parquet") => OutFormat::Parquet,
            Some("jsonl") => OutFormat::Jsonl,
            Some("csv") => OutFormat::Csv,
            _ => return Err(usage(format!("--rows {}: use a .csv, .jsonl or .parquet file name", p.display()))),
        };
        let (w, o) = open_output(Some(p), f, inputs)?;
        outputs.push(o);
        writers.push(RowWriter::new(RecordWriter::new(f.into(), w, &[])?));
    }
    Ok((writers, outputs))
}

/// The traces of a run: those found in run directories (`HOST.lttng/`),
/// replaced per host by those given with `--trace HOST=DIR`.
pub fn traces(found: Vec<TraceInput>, given: &[crate::args::TraceArg]) -> Vec<TraceInput> {
    let mut v: Vec<TraceInput> = found.into_iter().filter(|t| !given.iter().any(|g| g.host == t.host)).collect();
    v.extend(given.iter().map(|g| TraceInput { host: g.host.clone(), path: g.dir.clone() }));
    v
}

/// Closing lines about the traces and the join (`verb: …` on stderr).
/// One line per capture after the first: what the traffic said of its clock against the first's
/// (docs/latency.md, "Clocks"), and whether the latencies were corrected by it.
/// An error bar for people: µs below a millisecond (a ns count would look exact).
pub fn error_bar(ns: i64) -> String {
    if ns.unsigned_abs() < 1_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{:.3} ms", ns as f64 / 1e6)
    }
}

pub fn print_clock_lines(verb: &str, run: &LatencyRun) {
    let Some(first) = run.captures.first() else { return };
    for (name, e) in &run.estimates {
        let Ok(e) = e else { continue };
        let c = run.captures.iter().position(|x| &x.name == name).unwrap_or(0);
        let applied = run.offsets_ns.get(c).copied().unwrap_or(0);
        let what = if applied == 0 && e.offset_ns.unsigned_abs() <= e.uncertainty_ns as u64 {
            "consistent with synchronised clocks: not corrected".to_string()
        } else if applied == e.offset_ns {
            "corrected by it".to_string()
        } else {
            format!("the given {:+.3} ms used", applied as f64 / 1e6)
        };
        eprintln!(
            "{verb}: clock of {name} against {}: {:+.3} ms ± {} (from {} submessages seen both ways; {} participants at {}, {} at {name}); {what}",
            first.name,
            e.offset_ns as f64 / 1e6,
            error_bar(e.uncertainty_ns),
            e.matched,
            e.a_side.len(),
            first.name,
            e.b_side.len(),
        );
    }
}

/// The clock tracker's account over the run, one line per capture against the first.
/// What the tracked line did to the instants it was asked about.
/// `offset_ns`: the constant already applied to the capture (the first 2 s's estimate or --offset).
fn applied(moved: u64, left: u64, offset_ns: i64) -> String {
    match (moved, left) {
        (0, 0) => "no sample to correct".into(),
        (0, _) if offset_ns != 0 => {
            format!("within its error bar of the {:+.3} ms already applied at every instant: that offset stands", offset_ns as f64 / 1e6)
        }
        (0, _) => "within its error bar at every instant: not corrected (synchronised clocks)".into(),
        (_, 0) => format!("applied to every instant ({moved})"),
        _ => format!("applied to {moved} instants, {left} left as read (the offset already applied lies within the error bar)"),
    }
}

pub fn print_clock_tracking_lines(verb: &str, run: &LatencyRun) {
    let Some(first) = run.captures.first() else { return };
    for s in run.correlator.clock_summaries() {
        if s.fits == 0 {
            if s.matched > 0 {
                eprintln!(
                    "{verb}: clock of {} against {} over the run: {} submessages seen at both, all sent one way: not tracked",
                    s.capture, first.name, s.matched
                );
            }
            continue;
        }
        let ms = |v: Option<i64>| v.map(|v| format!("{:+.3} ms", v as f64 / 1e6)).unwrap_or_default();
        let span = match (s.first_at_ns, s.last_at_ns) {
            (Some(a), Some(b)) => (b - a) as f64 / 1e9,
            _ => 0.0,
        };
        eprintln!(
            "{verb}: clock of {} against {} over the run: {} → {} in {:.1} s (drift {}), error bar {} on average, ≤ {}, {} fits ({} cut at a step, {} overlapping) from {} submessages seen at both; {}",
            s.capture,
            first.name,
            ms(s.first_offset_ns),
            ms(s.last_offset_ns),
            span,
            s.drift_ppm.map(|d| format!("{d:+.2} ppm")).unwrap_or_else(|| "unknown".into()),
            error_bar(s.mean_uncertainty_ns.unwrap_or(0)),
            error_bar(s.max_uncertainty_ns),
            s.fits,
            s.step_fits,
            s.overlapping_fits,
            s.matched,
            applied(s.instants_corrected, s.instants_within_bar, run.captures.iter().position(|x| x.name == s.capture).and_then(|c| run.offsets_ns.get(c)).copied().unwrap_or(0))
        );
    }
}

pub fn print_trace_lines(verb: &str, run: &LatencyRun) {
    for t in &run.traces {
        eprintln!(
            "{verb}: trace {} = {}: {} events ({} ros2, {} not decoded, {} lost by LTTng), layout {}; {} publishes, {} takes, {} callbacks",
            t.host,
            t.path,
            t.events,
            t.ros2_events,
            t.not_decoded,
            t.discarded_events,
            t.layout,
            t.assemble.publishes,
            t.assemble.takes,
            t.assemble.callbacks
        );
        eprintln!("{verb}: trace {}: joins {}", t.host, t.joins);
        if let Some(e) = &t.error {
            eprintln!("{verb}: trace {}: {e} (everything before it was used)", t.host);
        }
        for l in t.assemble.notes() {
            eprintln!("{verb}: trace {}: {l}", t.host);
        }
        for u in t.unresolved.iter().filter(|u| u.reason == ddscope_core::ros2::Unresolved::Undeclared || u.reason == ddscope_core::ros2::Unresolved::TraceStartedLate).take(5) {
            eprintln!(
                "{verb}: trace {}: unresolved {} {} in process {} ({}): {} events{}",
                t.host,
                u.what,
                u.handle,
                u.vpid,
                crate::common::printable(&u.procname),
                u.count,
                u.gid.as_deref().map(|g| format!(", DDS GUID {g}")).unwrap_or_default()
            );
        }
        if let Some(l) = t.drift_line() {
            eprintln!("{verb}: trace {}: {l}", t.host);
        }
        if t.discarded_events > 0 {
            eprintln!("{verb}: trace {}: LTTng lost events: the publishes, takes and callbacks around the losses may be missing or unjoined", t.host);
        }
    }
    if let Some(j) = run.correlator.join_stats() {
        eprintln!(
            "{verb}: ros2 join: wire samples joined to their publish: {} by source timestamp, {} by publish window, {} by publish order; takes joined: {} to wire samples, {} same-host and {} across hosts trace to trace ({} by source timestamp, {} by publish window, {} intra-process); not joined: {} takes ambiguous, {} takes without a traced publish, {} publishes taken by no traced subscription",
            j.joined_source_ts,
            j.joined_publish_time,
            j.joined_publish_order,
            j.takes_joined_wire,
            j.takes_same_host,
            j.takes_traces,
            j.takes_source_ts,
            j.takes_publish_time,
            j.takes_intra,
            j.takes_ambiguous,
            j.takes_unjoined,
            j.publishes_unjoined
        );
        if j.window_offsets.count > 0 {
            eprintln!(
                "{verb}: ros2 join: source timestamp − rmw_publish of the samples joined by publish window ({} samples): min {:+.3} µs, median {:+.3} µs, max {:+.3} µs (the DDS write stamps after rmw_publish; negative values mean the trace clock runs behind CLOCK_REALTIME)",
                j.window_offsets.count,
                j.window_offsets.min_ms * 1e3,
                j.window_offsets.p50_ms * 1e3,
                j.window_offsets.max_ms * 1e3
            );
        }
        for l in j.notes() {
            eprintln!("{verb}: ros2 join: {l}");
        }
        if j.extra_takes > 0 {
            eprintln!("{verb}: ros2 join: {} samples were taken by more than one subscription on a host: rows use the first take", j.extra_takes);
        }
    }
    if let Some(c) = run.correlator.chains() {
        let s = &c.stats;
        if s.hops_evicted > 0 || s.paths_evicted > 0 {
            eprintln!("{verb}: chains: {} hops and {} paths evicted (caps; least recent first)", s.hops_evicted, s.paths_evicted);
        }
    }
}

/// `s` with control characters escaped (`\x1b`), for terminal lines.
pub fn printable(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            o.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            o.push(c);
        }
    }
    o
}

/// Correlates a run with progress bars and the notes printed as `verb: …`
/// (shared by `latency` and `report`).
pub fn run_session(
    verb: &str,
    captures: Vec<CaptureInput>,
    truth: &[PathBuf],
    traces: Vec<TraceInput>,
    opts: &LatencyOptions,
    out: &mut dyn RowSink<LatencyRow>,
    chain_out: &mut dyn RowSink<ChainRow>,
) -> anyhow::Result<LatencyRun> {
    let progress: Vec<Progress> = captures.iter().map(|c| Progress::start(&c.name, file_size(&c.path))).collect();
    let counters: Vec<_> = progress.iter().map(|p| p.counter.clone()).collect();
    let run = session::run_latency_traced(captures, truth, traces, opts, &counters, &mut |n| eprintln!("{verb}: {n}"), out, chain_out);
    for p in progress {
        p.finish();
    }
    run.map_err(|e| match e {
        session::SessionError::UnknownCapture { .. } => usage(format!("--offset: {e}")),
        e => session_error(e),
    })
}

