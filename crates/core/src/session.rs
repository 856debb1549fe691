//! A latency session: what `ddscope latency` and `ddscope report` share —
//! finding the captures and ground truth of a run, setting clock offsets,
//! correlating the captures, and checking that there was something to
//! correlate. Options arrive typed (nanoseconds, names); wording them for the
//! user (flag names) is the command line's job.

use crate::decode::DecoderConfig;
use crate::latency::app::AppTruth;
use crate::latency::files::{correlate_inputs, estimate_offsets, CaptureInput, CaptureOutcome, FileDecoding};
use crate::latency::offset;
use crate::latency::ClockTrust;
use crate::ros2::{ChainRow, TraceInput, TraceOutcome};
use crate::latency::offset::OffsetEstimate;
use crate::latency::correlator::{Correlator, CorrelatorConfig};
use crate::latency::layers::Layer;
use crate::latency::rows::LatencyRow;
use crate::samples::SampleConfig;
use crate::sink::RowSink;
use crate::source::CaptureError;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// How long after a sample was first seen it is judged, by default.
pub const DEFAULT_WINDOW_NS: i64 = crate::window::Window::DEFAULT.ns();
/// How much of the first capture `estimate_offset` reads.
pub const OFFSET_ESTIMATE_SPAN_NS: i64 = 2_000_000_000;
/// At most this many submessages per capture go into the offset estimate.
pub const OFFSET_ESTIMATE_MAX_KEYS: usize = 50_000;

/// The sample tracker's settings when its records feed a correlation with
/// time window `window_ns`: an incomplete sample is closed after 2/5 of the
/// window without activity (2 s for the default 5 s), so that its record
/// reaches the correlator before the window judges the sample. The same rule
/// serves files (`latency`, `report`) and agents (whose records `serve` judges).
pub fn correlation_samples(window_ns: i64) -> SampleConfig {
    SampleConfig { timeout_ns: crate::window::sample_timeout_ns(window_ns), ..SampleConfig::default() }
}

/// A session's options, already typed.
#[derive(Debug, Clone)]
pub struct LatencyOptions {
    /// t_o per capture-point name (Bosk et al. Eq. 9), subtracted from its timestamps.
    pub offsets: Vec<(String, i64)>,
    /// Estimate each capture's offset against the first from two-way traffic.
    pub estimate_offset: bool,
    /// Publication period for in time / late; `None` infers it per writer.
    pub period_ns: Option<i64>,
    pub window_ns: i64,
    pub message_rows: bool,
    pub submessage_rows: bool,
    pub decoder: DecoderConfig,
    /// The sample tracker's caps (its inactivity timeout follows the window:
    /// [`correlation_samples`]).
    pub samples: SampleConfig,
    /// The correlator's caps (captures, offsets, window, period and row
    /// levels are taken from the fields above).
    pub correlator: CorrelatorConfig,
    /// The trace assembler's caps (its open-state timeout follows the window).
    pub assemble: crate::ros2::AssembleConfig,
    /// The chain to measure end to end (topics in order), with traces.
    pub path: Option<Vec<String>>,
    /// Emit one chain row per hop of every instance of `path`.
    pub chain_rows: bool,
    /// Keep each capture's link load (`--explain`'s link-queueing evidence).
    pub link_load: Option<crate::pipeline::LinkLoadConfig>,
}

impl Default for LatencyOptions {
    fn default() -> Self {
        LatencyOptions {
            offsets: vec![],
            estimate_offset: false,
            period_ns: None,
            window_ns: DEFAULT_WINDOW_NS,
            message_rows: true,
            submessage_rows: false,
            decoder: DecoderConfig::default(),
            samples: SampleConfig::default(),
            correlator: CorrelatorConfig::default(),
            assemble: Default::default(),
            path: None,
            chain_rows: false,
            link_load: None,
        }
    }
}

/// Why a session could not run, in terms of its inputs.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error("cannot read {path}: {source}")]
    Dir { path: PathBuf, source: std::io::Error },
    #[error("{0}: no capture files (*.pcapng, *.pcapng.gz, *.pcap) in this directory")]
    NoCaptures(PathBuf),
    #[error("cannot open {0}: no such file")]
    Missing(PathBuf),
    #[error("latency needs two or more capture points (one at the sender, one per receiver); got {n}: {paths}")]
    TooFewCaptures { n: usize, paths: String },
    #[error("{0} and {1} are the same file: give each capture point once")]
    SameFile(PathBuf, PathBuf),
    #[error("two captures are both named {name:?} ({a} and {b}): rename one (names come from file names)")]
    SameName { name: String, a: PathBuf, b: PathBuf },
    #[error("no capture point named {name:?} (have {known})")]
    UnknownCapture { name: String, known: String },
    #[error("trace {path}: no capture point named {host:?} for its host (have {known}); name the trace after its host's capture")]
    UnknownTraceHost { host: String, path: PathBuf, known: String },
    #[error("{0} is given twice as a trace")]
    SameTrace(PathBuf),
    #[error("two traces for host {host:?} ({a} and {b}): give one trace per host (a session directory holds every process of the host)")]
    SameTraceHost { host: String, a: PathBuf, b: PathBuf },
    /// A trace that cannot be read (the text names it).
    #[error("{0}")]
    Trace(String),
    /// A ground-truth file that cannot be read (the text names the file and line).
    #[error("{0}")]
    Truth(String),
    #[error(
        "no writer's samples were seen at two capture points, so nothing can be correlated ({writers} writers in all;{per_capture}): \
         are these captures of the same system at the same time, on both ends of the link?"
    )]
    NothingCorrelated { writers: usize, per_capture: String },
    #[error("the traces hold no callback and no joined sample:{traces}")]
    NothingTraced { traces: String },
    #[error(
        "{sender} and {receiver} saw every sample of {topic} at exactly the same instants: they look like two copies of one capture point, not sender and receiver"
    )]
    SameCapturePoint { sender: String, receiver: String, topic: String },
}

impl SessionError {
    /// 64 when the command line is wrong (too few captures, one given twice, names that collide or
    /// match nothing), 2 when an input could not be read or used (ddscope's exit codes: README).
    pub fn exit_code(&self) -> i32 {
        match self {
            SessionError::TooFewCaptures { .. }
            | SessionError::SameFile(..)
            | SessionError::SameName { .. }
            | SessionError::UnknownCapture { .. }
            | SessionError::UnknownTraceHost { .. }
            | SessionError::SameTrace(_)
            | SessionError::SameTraceHost { .. } => 64,
            _ => 2,
        }
    }
}

/// Capture-point name: the file name without `.pcap`, `.pcapng`, `.gz`
/// (`stdin` for `-`).
pub fn capture_name(path: &Path) -> String {
    if path == Path::new("-") {
        return "stdin".into();
    }
    let mut name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "capture".into());
    for ext in [".gz", ".pcapng", ".pcap", ".cap"] {
        if let Some(s) = name.strip_suffix(ext) {
            name = s.to_string();
        }
    }
    name
}

/// Expands run directories into captures (`*.pcapng[.gz]`, `*.pcap[.gz]`)
/// and ground-truth files (`*.truth.jsonl`); files are taken as captures.
pub fn expand_inputs(inputs: &[PathBuf], extra_truth: &[PathBuf]) -> Result<(Vec<CaptureInput>, Vec<PathBuf>), SessionError> {
    expand_run(inputs, extra_truth).map(|r| (r.captures, r.truth))
}

/// What a run's inputs expand to.
#[derive(Debug, Clone, Default)]
pub struct RunInputs {
    pub captures: Vec<CaptureInput>,
    pub truth: Vec<PathBuf>,
    /// `HOST.lttng/` trace directories found in run directories.
    pub traces: Vec<TraceInput>,
}

/// [`expand_inputs`], and the ros2_tracing traces of run directories
/// (`HOST.lttng/` beside `HOST.pcapng[.gz]`).
pub fn expand_run(inputs: &[PathBuf], extra_truth: &[PathBuf]) -> Result<RunInputs, SessionError> {
    let mut caps = vec![];
    let mut traces = vec![];
    let mut truth: Vec<PathBuf> = extra_truth.to_vec();
    for p in inputs {
        if p.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|source| SessionError::Dir { path: p.clone(), source })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            entries.sort();
            let before = caps.len();
            for e in entries {
                let n = e.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
                if n.ends_with(".pcapng") || n.ends_with(".pcapng.gz") || n.ends_with(".pcap") || n.ends_with(".pcap.gz") {
                    caps.push(CaptureInput { name: capture_name(&e), path: e });
                } else if n.ends_with(".truth.jsonl") {
                    truth.push(e);
                } else if let Some(host) = n.strip_suffix(".lttng").filter(|h| !h.is_empty() && e.is_dir()) {
                    traces.push(TraceInput { host: host.to_string(), path: e.clone() });
                }
            }
            if caps.len() == before {
                return Err(SessionError::NoCaptures(p.clone()));
            }
        } else {
            if p != Path::new("-") && !p.exists() {
                return Err(SessionError::Missing(p.clone()));
            }
            caps.push(CaptureInput { name: capture_name(p), path: p.clone() });
        }
    }
    Ok(RunInputs { captures: caps, truth, traces })
}

/// Everything a latency session produced.
pub struct LatencyRun {
    pub correlator: Correlator,
    pub outcomes: Vec<CaptureOutcome>,
    pub estimates: Vec<(String, Result<OffsetEstimate, String>)>,
    pub offsets_ns: Vec<i64>,
    pub captures: Vec<CaptureInput>,
    pub truth: Arc<AppTruth>,
    /// What each trace held (in the order given).
    pub traces: Vec<TraceOutcome>,
}

/// True when `a` and `b` are the same file (device and inode).
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

fn names(c: &[CaptureInput]) -> String {
    c.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// Correlates `captures`; rows go to `out` as they are judged. `progress`
/// holds one byte counter per capture (may be empty). `on_note` hears what
/// the user should know but that does not stop the run.
pub fn run_latency(
    captures: Vec<CaptureInput>,
    truth_files: &[PathBuf],
    o: &LatencyOptions,
    progress: &[Arc<AtomicU64>],
    on_note: &mut dyn FnMut(String),
    out: &mut dyn RowSink<LatencyRow>,
) -> Result<LatencyRun, SessionError> {
    run_latency_traced(captures, truth_files, vec![], o, progress, on_note, out, &mut |_: ChainRow| {})
}

/// [`run_latency`] with ros2_tracing traces, one per host (each named after
/// its host's capture point); chain rows (with [`LatencyOptions::path`]) go to `chain_out`.
#[allow(clippy::too_many_arguments)]
pub fn run_latency_traced(
    captures: Vec<CaptureInput>,
    truth_files: &[PathBuf],
    traces: Vec<TraceInput>,
    o: &LatencyOptions,
    progress: &[Arc<AtomicU64>],
    on_note: &mut dyn FnMut(String),
    out: &mut dyn RowSink<LatencyRow>,
    chain_out: &mut dyn RowSink<ChainRow>,
) -> Result<LatencyRun, SessionError> {
    // Traces alone: every traced host is a point of the correlation without a capture.
    let trace_only = captures.is_empty() && !traces.is_empty();
    if captures.len() < 2 && !trace_only {
        return Err(SessionError::TooFewCaptures {
            n: captures.len(),
            paths: captures.iter().map(|c| c.path.display().to_string()).collect::<Vec<_>>().join(", "),
        });
    }
    let mut hosts: Vec<String> = captures.iter().map(|c| c.name.clone()).collect();
    if trace_only {
        for t in &traces {
            if !hosts.contains(&t.host) {
                hosts.push(t.host.clone());
            }
        }
    }
    // The same file twice, or two names for one capture point.
    for i in 0..captures.len() {
        for j in i + 1..captures.len() {
            let (a, b) = (&captures[i], &captures[j]);
            if same_file(&a.path, &b.path) {
                return Err(SessionError::SameFile(a.path.clone(), b.path.clone()));
            }
            if a.name == b.name {
                return Err(SessionError::SameName { name: a.name.clone(), a: a.path.clone(), b: b.path.clone() });
            }
        }
    }
    let mut offsets = vec![0i64; hosts.len()];
    let mut estimates = vec![];
    let mut given = vec![None; hosts.len()];
    for (name, off) in &o.offsets {
        let idx = hosts.iter().position(|h| h == name).ok_or_else(|| SessionError::UnknownCapture { name: name.clone(), known: hosts.join(", ") })?;
        given[idx] = Some(*off);
    }
    // Without a check, every capture's clock is as it came (or as given).
    let mut clocks: Vec<ClockTrust> = given.iter().map(|g| if g.is_some() { ClockTrust::Given } else { ClockTrust::Unchecked }).collect();
    if let Some(c) = clocks.first_mut() {
        *c = ClockTrust::Reference;
    }
    let mut participant_capture = vec![];
    // Per capture: the coarse offset of the first 2 s (None for the first, or not estimated).
    let mut pairing: Vec<Option<i64>> = vec![];
    let mut unchecked: Vec<(usize, String)> = vec![];
    if o.estimate_offset && captures.len() >= 2 {
        let (est, coarse): (Vec<_>, Vec<_>) = estimate_offsets(&captures, o.decoder, OFFSET_ESTIMATE_SPAN_NS, OFFSET_ESTIMATE_MAX_KEYS)?.into_iter().unzip();
        participant_capture = offset::place_participants(&est);
        pairing = std::iter::once(None).chain(coarse).collect();
        let coarse_of = |c: usize| pairing.get(c).copied().flatten();
        for (i, e) in est.into_iter().enumerate() {
            let (c, name) = (i + 1, captures[i + 1].name.clone());
            match (&e, given[c]) {
                // Clocks the traffic finds consistent with synchronised ones (0 inside the interval) are left
                // as they are, their error bar widened to cover the whole interval; others are corrected.
                (Ok(e), None) if e.offset_ns.unsigned_abs() <= e.uncertainty_ns as u64 => {
                    clocks[c] = ClockTrust::Estimated(e.uncertainty_ns.saturating_add(e.offset_ns.abs()));
                }
                (Ok(e), None) => {
                    offsets[c] = e.offset_ns;
                    clocks[c] = ClockTrust::Estimated(e.uncertainty_ns);
                }
                (Ok(e), Some(g)) if g.abs_diff(e.offset_ns) <= e.uncertainty_ns as u64 => {
                    // Both lie in the interval the traffic allows: the given one is off by at most its width.
                    clocks[c] = ClockTrust::Estimated(e.uncertainty_ns.saturating_mul(2));
                }
                (Ok(e), Some(g)) => on_note(format!(
                    "warning: --offset {name}={:+.3}ms contradicts the traffic, which puts {name}'s clock at {:+.3} ms ± {:.3} ms against {} \
                     (from {} submessages seen both ways); the given offset is used and {name}'s cross-host figures are unchecked",
                    g as f64 / 1e6,
                    e.offset_ns as f64 / 1e6,
                    e.uncertainty_ns as f64 / 1e6,
                    captures[0].name,
                    e.matched
                )),
                // Two-way traffic whose directions overlap (delays below the captures' time resolution,
                // clocks that drift): the median difference bounds the offset to within the delays and the
                // drift, enough to read the captures side by side (clocks seconds apart otherwise read one
                // after the other, and no sample meets its sender); the tracker refines it per instant.
                // Within a millisecond they are left as read (the tracker pairs by the median anyway):
                // synchronised clocks on one kernel overlap too, and stay exactly as captured.
                (Err(offset::OffsetError::Overlapping), None) if coarse_of(c).is_some_and(|m| m.unsigned_abs() > 1_000_000) => {
                    let m = coarse_of(c).unwrap_or(0);
                    offsets[c] = m;
                    on_note(format!(
                        "clock of {name} against {}: the first 2 s's two directions overlap in time (delays below the time stamps' \
                         resolution, or clocks that drift); {:+.3} ms, the median difference of the submessages seen at both, applied \
                         for the run's clock line to refine",
                        captures[0].name,
                        m as f64 / 1e6
                    ));
                    unchecked.push((c, format!(
                        "warning: the clocks of {name} and {} could not be checked: the two directions overlap in time, and no clock \
                         line was found over the run; {:+.3} ms (their median difference) applied, and the latencies between them \
                         are unchecked",
                        captures[0].name,
                        m as f64 / 1e6
                    )));
                }
                // Not yet: the tracker may find two-way traffic later in the run (warned after it if not).
                (Err(err), _) => unchecked.push((c, format!(
                    "warning: the clocks of {name} and {} could not be checked: {err}; {}, and the latencies between them are unchecked",
                    captures[0].name,
                    match given[c] {
                        Some(_) => "the given offset is used".to_string(),
                        None => "their offset is taken as 0 (give --offset NAME=±DURATION if they are not synchronised)".to_string(),
                    }
                ))),
            }
            estimates.push((name, e.map_err(|x| x.to_string())));
        }
    }
    for (c, g) in given.iter().enumerate() {
        if let Some(g) = g {
            offsets[c] = *g;
        }
    }
    let mut truth = AppTruth::default();
    for t in truth_files {
        truth.load(t).map_err(|e| SessionError::Truth(format!("{e:#}")))?;
    }
    let truth = Arc::new(truth);
    // Traces: each belongs to a capture point's host; open them all before starting.
    let mut readers = vec![];
    for (i, t) in traces.iter().enumerate() {
        if traces[..i].iter().any(|u| same_file(&u.path, &t.path)) {
            return Err(SessionError::SameTrace(t.path.clone()));
        }
        if traces[..i].iter().any(|u| u.host == t.host) {
            return Err(SessionError::SameTraceHost { host: t.host.clone(), a: traces[..i].iter().find(|u| u.host == t.host).map(|u| u.path.clone()).unwrap_or_default(), b: t.path.clone() });
        }
        let host = hosts
            .iter()
            .position(|h| *h == t.host)
            .ok_or_else(|| SessionError::UnknownTraceHost { host: t.host.clone(), path: t.path.clone(), known: names(&captures) })?;
        let reader = crate::ros2::source::open(t).map_err(|e| SessionError::Trace(e.to_string()))?;
        readers.push((host, t.clone(), reader));
    }
    let mut ros = o.correlator.ros.clone();
    ros.chain.path = o.path.clone();
    ros.chain.rows = o.chain_rows;
    let cfg = CorrelatorConfig {
        captures: hosts.clone(),
        offsets_ns: offsets.clone(),
        // Where an offset is applied (estimated or given) the tracker pairs by it; elsewhere by the coarse one.
        pairing_offsets_ns: (0..hosts.len()).map(|c| if offsets[c] != 0 || given[c].is_some() { offsets[c] } else { pairing.get(c).copied().flatten().unwrap_or(0) }).collect(),
        window_ns: o.window_ns,
        period_ns: o.period_ns,
        message_rows: o.message_rows,
        submessage_rows: o.submessage_rows,
        ros,
        clocks,
        participant_capture,
        track_clocks: o.estimate_offset,
        ..o.correlator.clone()
    };
    let mut correlator = Correlator::new(cfg, truth.clone());
    if trace_only {
        // No capture input: the hosts' capture slots never hold the correlation back.
        for c in 0..hosts.len() {
            correlator.set_ended(c, true, &mut |_: LatencyRow| {});
        }
    }
    let mut opened = vec![];
    for (host, t, reader) in readers {
        correlator.add_trace(host);
        opened.push((t, reader));
    }
    let decoding = FileDecoding { decoder: o.decoder, samples: SampleConfig { timeout_ns: correlation_samples(o.window_ns).timeout_ns, ..o.samples }, window_ns: o.window_ns, assemble: o.assemble, link_load: o.link_load };
    let (outcomes, traces) = correlate_inputs(&captures, opened, decoding, &mut correlator, progress, out, chain_out)?;
    let tracked = correlator.clock_summaries();
    for (c, warning) in unchecked {
        if !tracked.get(c.wrapping_sub(1)).is_some_and(|s| s.fits > 0) {
            on_note(warning);
        }
    }
    Ok(LatencyRun { correlator, outcomes, estimates, offsets_ns: offsets, captures, truth, traces })
}

/// Checks that the run found something to correlate; explains why not.
pub fn check_correlated(run: &LatencyRun) -> Result<(), SessionError> {
    if run.captures.is_empty() {
        // Traces alone: the callbacks are measured whatever the layout; samples only where it joins.
        let callbacks = run.correlator.callbacks().map_or(0, |c| c.rows(run.correlator.capture_names()).len());
        if run.correlator.flows().is_empty() && callbacks == 0 {
            let what = run.traces.iter().map(|t| format!(" {} ({} ros2 events, layout {})", t.host, t.ros2_events, t.layout)).collect::<Vec<_>>().join(";");
            return Err(SessionError::NothingTraced { traces: what });
        }
        return Ok(());
    }
    if run.correlator.flows().is_empty() {
        let roles = run.correlator.writer_roles();
        let mut per_capture = String::new();
        for (i, c) in run.captures.iter().enumerate() {
            let n = run.outcomes[i].decode.rtps_messages;
            per_capture.push_str(&format!(" {} ({} RTPS messages);", c.name, n));
        }
        return Err(SessionError::NothingCorrelated { writers: roles.len(), per_capture: per_capture.trim_end_matches(';').to_string() });
    }
    // All message latencies exactly zero: two captures of one point.
    for f in run.correlator.summaries() {
        if let Some(m) = f.layer(Layer::Message) {
            if m.count >= 3 && m.min_ms == 0.0 && m.max_ms == 0.0 {
                return Err(SessionError::SameCapturePoint { sender: f.sender.clone(), receiver: f.receiver.clone(), topic: f.topic.clone() });
            }
        }
    }
    Ok(())
}
