//! Sweeps: one base scenario, a matrix of scenario keys (dotted paths into
//! the scenario's TOML, `generate[0].sizes`, `interference[0].load`, …) and
//! lists of values; every combination (a cell) is run `repeats` times with
//! [`crate::run::run`], each into its own directory under one sweep
//! directory, and `sweep.json` records every cell's parameters and every
//! run's status. The grid is resumable: a run whose `run.json` was written is
//! never repeated; one that was cut short is redone from the start.
//!
//! Keys are applied to the base scenario's TOML value before it is parsed, so
//! any key the scenario format has (now or later) can be swept without
//! changes here; a key the format does not know, or a value of the wrong
//! type, is an error naming the key before anything runs.

use anyhow::{anyhow, bail, Context, Result};
use ddscope_traffic::Nanos;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::procs;
use crate::run::{self, RunOptions};
use crate::scenario::{self, Overrides};

pub const FORMAT: &str = "ddscope-lab-sweep/1";
/// Cells in one sweep at most (the product of the matrix plus explicit cells).
pub const MAX_CELLS: usize = 10_000;
pub const MAX_REPEATS: u32 = 100;

/// The sweep file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepDoc {
    name: String,
    #[serde(default)]
    description: String,
    /// Base scenario, relative to the sweep file.
    scenario: String,
    #[serde(default = "one")]
    repeats: u32,
    /// Publication time of every run (overrides the scenario's `duration`).
    #[serde(default)]
    duration: Option<Nanos>,
    /// KEY -> list of values; the grid is their cartesian product.
    #[serde(default)]
    matrix: toml::Table,
    /// Combinations left out: every table removes the cells whose values equal all of its keys'.
    #[serde(default)]
    exclude: Vec<toml::Table>,
    /// Extra cells given explicitly (KEY -> value), run after the grid.
    #[serde(default)]
    cells: Vec<toml::Table>,
    /// Charts of the report; defaults are chosen from the matrix when none is given.
    #[serde(default)]
    plot: Vec<PlotSpec>,
}

fn one() -> u32 {
    1
}

/// One chart of the sweep report: `y` (a table column) over `x` (a table
/// column or a matrix key), one line per combination of the `series` keys.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PlotSpec {
    #[serde(default)]
    pub title: String,
    pub x: String,
    pub y: String,
    /// Matrix keys whose values make the lines (default: every other key that varies).
    #[serde(default)]
    pub series: Option<Vec<String>>,
    #[serde(default)]
    pub log_x: bool,
    #[serde(default)]
    pub log_y: bool,
}

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// Parses `generate[0].sizes`, `dds.domain_id`, `nodes[2].publish[0].rate_hz`.
pub fn parse_path(path: &str) -> Result<Vec<Seg>> {
    let mut segs = vec![];
    if path.is_empty() {
        bail!("empty key");
    }
    for part in path.split('.') {
        let (name, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            bail!("{path:?}: {part:?} is not a key (write keys.like[0].this)");
        }
        segs.push(Seg::Key(name.to_string()));
        while !rest.is_empty() {
            let close = rest.find(']').ok_or_else(|| anyhow!("{path:?}: unclosed '['"))?;
            let idx: usize = rest[1..close].parse().map_err(|_| anyhow!("{path:?}: {:?} is not an index", &rest[1..close]))?;
            segs.push(Seg::Index(idx));
            rest = &rest[close + 1..];
            if !rest.is_empty() && !rest.starts_with('[') {
                bail!("{path:?}: unexpected {rest:?} after an index");
            }
        }
    }
    Ok(segs)
}

/// Sets `path` in `root` to `value`. Missing tables on the way are created;
/// array elements must exist. A scalar given for a key whose current value is
/// an array becomes a one-element array (`generate[0].sizes = "1KiB"`).
pub fn apply(root: &mut toml::Table, path: &str, value: &toml::Value) -> Result<()> {
    let mut v = toml::Value::Table(std::mem::take(root));
    let r = apply_value(&mut v, path, value);
    if let toml::Value::Table(t) = v {
        *root = t;
    }
    r
}

fn apply_value(root: &mut toml::Value, path: &str, value: &toml::Value) -> Result<()> {
    let segs = parse_path(path)?;
    let mut cur: &mut toml::Value = root;
    let mut walked = String::new();
    for (i, seg) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        match seg {
            Seg::Key(k) => {
                let t = cur.as_table_mut().ok_or_else(|| anyhow!("{walked} is not a table"))?;
                if last {
                    let v = match (t.get(k), value) {
                        (Some(toml::Value::Array(_)), v) if !v.is_array() => toml::Value::Array(vec![v.clone()]),
                        _ => value.clone(),
                    };
                    t.insert(k.clone(), v);
                    return Ok(());
                }
                if !t.contains_key(k) {
                    match segs[i + 1] {
                        Seg::Key(_) => {
                            t.insert(k.clone(), toml::Value::Table(toml::Table::new()));
                        }
                        Seg::Index(_) => bail!("{}{k} is not in the base scenario (an index needs an existing list)", dot(&walked)),
                    }
                }
                if !walked.is_empty() {
                    walked.push('.');
                }
                walked.push_str(k);
                cur = t.get_mut(k).ok_or_else(|| anyhow!("{walked} vanished"))?;
            }
            Seg::Index(n) => {
                let a = cur.as_array_mut().ok_or_else(|| anyhow!("{walked} is not a list"))?;
                let len = a.len();
                let el = a.get_mut(*n).ok_or_else(|| anyhow!("{walked}[{n}]: the base scenario has {len} entries"))?;
                walked.push_str(&format!("[{n}]"));
                if last {
                    *el = value.clone();
                    return Ok(());
                }
                cur = el;
            }
        }
    }
    Ok(())
}

fn dot(s: &str) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!("{s}.")
    }
}

/// The value at `path` in `root`, if there is one.
pub fn lookup<'a>(root: &'a toml::Value, path: &str) -> Option<&'a toml::Value> {
    let segs = parse_path(path).ok()?;
    let mut cur = root;
    for s in &segs {
        cur = match s {
            Seg::Key(k) => cur.as_table()?.get(k)?,
            Seg::Index(i) => cur.as_array()?.get(*i)?,
        };
    }
    Some(cur)
}

/// A value as the user wrote it (strings without quotes).
pub fn show(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Array(a) => format!("[{}]", a.iter().map(show).collect::<Vec<_>>().join(", ")),
        other => other.to_string(),
    }
}

/// A cell: one combination of values.
#[derive(Debug, Clone)]
pub struct Cell {
    pub id: String,
    pub params: Vec<(String, toml::Value)>,
}

impl Cell {
    pub fn label(&self) -> String {
        self.params.iter().map(|(k, v)| format!("{k}={}", show(v))).collect::<Vec<_>>().join(" ")
    }
}

/// A checked sweep, ready to run.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub file: PathBuf,
    pub name: String,
    pub description: String,
    pub scenario_file: PathBuf,
    pub scenario_text: String,
    /// The sweep file as read (copied into the output directory).
    pub text: String,
    pub repeats: u32,
    pub duration: Option<Nanos>,
    /// Matrix keys in the order of the file, then keys only explicit cells set.
    pub keys: Vec<String>,
    pub cells: Vec<Cell>,
    pub plots: Vec<PlotSpec>,
    /// Cells the `exclude` tables removed.
    pub excluded: usize,
}

/// Reads and checks a sweep file: every key and value against the base
/// scenario, then every cell as a whole. Errors are one line naming the file and the key.
pub fn load(path: &Path) -> Result<Sweep> {
    let text = ddscope_traffic::fsio::read_bounded_text(path, ddscope_traffic::fsio::MAX_CONFIG_BYTES, "sweep file")?;
    parse(path, &text).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// One line of a message that may quote the input: whitespace collapsed,
/// control characters escaped, at most 200 characters of it.
fn one_line(s: &str) -> String {
    ddscope_traffic::text::excerpt(s, ddscope_traffic::text::EXCERPT_CHARS)
}

fn parse(path: &Path, text: &str) -> Result<Sweep> {
    let doc: SweepDoc = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        match line {
            Some(l) => anyhow!("line {l}: {}", one_line(e.message())),
            None => anyhow!("{}", one_line(e.message())),
        }
    })?;
    if doc.name.is_empty() || !doc.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') || doc.name.len() > 64 {
        bail!("name {:?}: use letters, digits, '-' and '_'", doc.name);
    }
    if doc.repeats == 0 || doc.repeats > MAX_REPEATS {
        bail!("repeats {}: must lie between 1 and {MAX_REPEATS}", doc.repeats);
    }
    let base_dir = path.parent().unwrap_or(Path::new("."));
    let scenario_file = base_dir.join(&doc.scenario);
    let scenario_text = ddscope_traffic::fsio::read_bounded_text(&scenario_file, ddscope_traffic::fsio::MAX_CONFIG_BYTES, "scenario file").map_err(|e| anyhow!("scenario {e}"))?;
    let base: toml::Table = toml::from_str(&scenario_text).map_err(|e| anyhow!("scenario {}: {}", scenario_file.display(), one_line(e.message())))?;
    // the base itself must be a valid scenario
    check_scenario(&base, doc.duration).map_err(|e| anyhow!("scenario {}: {e}", scenario_file.display()))?;

    if doc.matrix.is_empty() && doc.cells.is_empty() {
        bail!("the matrix is empty: give [matrix] with KEY = [values, ...] (or [[cells]])");
    }
    // Matrix keys in the order they appear in the file (toml tables are sorted).
    let mut keys: Vec<String> = doc.matrix.keys().cloned().collect();
    keys.sort_by_key(|k| text.find(&format!("\"{k}\"")).or_else(|| text.find(k.as_str())).unwrap_or(usize::MAX));
    let mut axes: Vec<(String, Vec<toml::Value>)> = vec![];
    for k in &keys {
        let vals = match &doc.matrix[k] {
            toml::Value::Array(a) => a.clone(),
            other => bail!("matrix key {k}: give a list of values, e.g. {k} = [{}]", other),
        };
        if vals.is_empty() {
            bail!("matrix key {k}: the list of values is empty");
        }
        for (i, v) in vals.iter().enumerate() {
            if vals[..i].contains(v) {
                bail!("matrix key {k}: value {} is given twice", show(v));
            }
            check_key(&base, k, v, doc.duration)?;
        }
        axes.push((k.clone(), vals));
    }
    for (i, ex) in doc.exclude.iter().enumerate() {
        if ex.is_empty() {
            bail!("exclude[{i}] is empty (it would remove every cell)");
        }
        for k in ex.keys() {
            if !keys.contains(k) {
                bail!("exclude[{i}]: key {k} is not in the matrix (matrix keys: {})", keys.join(", "));
            }
        }
    }
    for (i, c) in doc.cells.iter().enumerate() {
        if c.is_empty() {
            bail!("cells[{i}] is empty");
        }
        for (k, v) in c {
            check_key(&base, k, v, doc.duration).map_err(|e| anyhow!("cells[{i}]: {e}"))?;
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    // the grid
    let mut combos: Vec<Vec<(String, toml::Value)>> = vec![];
    if !axes.is_empty() {
        let n: usize = axes.iter().try_fold(1usize, |acc, (_, v)| acc.checked_mul(v.len())).unwrap_or(usize::MAX);
        if n > MAX_CELLS {
            bail!("the matrix has {n} cells, more than {MAX_CELLS}");
        }
        combos.push(vec![]);
        for (k, vals) in &axes {
            let mut next = Vec::with_capacity(combos.len() * vals.len());
            for c in &combos {
                for v in vals {
                    let mut c2 = c.clone();
                    c2.push((k.clone(), v.clone()));
                    next.push(c2);
                }
            }
            combos = next;
        }
    }
    let before = combos.len();
    combos.retain(|c| !doc.exclude.iter().any(|ex| ex.iter().all(|(k, v)| c.iter().any(|(ck, cv)| ck == k && cv == v))));
    let excluded = before - combos.len();
    for c in &doc.cells {
        let params: Vec<(String, toml::Value)> = keys.iter().filter_map(|k| c.get(k).map(|v| (k.clone(), v.clone()))).collect();
        combos.push(params);
    }
    if combos.is_empty() {
        bail!("no cells left: exclude removes all {before}");
    }
    if combos.len() > MAX_CELLS {
        bail!("{} cells, more than {MAX_CELLS}", combos.len());
    }
    let width = combos.len().to_string().len().max(3);
    let mut cells = vec![];
    for (i, params) in combos.into_iter().enumerate() {
        let id = format!("c{:0width$}", i + 1);
        if cells.iter().any(|c: &Cell| c.params == params) {
            bail!("cell {} ({}) is given twice", id, Cell { id: id.clone(), params }.label());
        }
        let cell = Cell { id, params };
        let table = cell_table(&base, &cell)?;
        check_scenario(&table, doc.duration).map_err(|e| anyhow!("cell {} ({}): {e}", cell.id, cell.label()))?;
        cells.push(cell);
    }
    for (i, p) in doc.plot.iter().enumerate() {
        for s in p.series.iter().flatten() {
            if !keys.contains(s) {
                bail!("plot[{i}].series: {s} is not a matrix key (have {})", keys.join(", "));
            }
        }
    }
    Ok(Sweep {
        file: path.to_path_buf(),
        name: doc.name,
        description: doc.description,
        scenario_file,
        scenario_text,
        text: text.to_string(),
        repeats: doc.repeats,
        duration: doc.duration,
        keys,
        cells,
        plots: doc.plot,
        excluded,
    })
}

/// The base scenario with a cell's values set.
pub fn cell_table(base: &toml::Table, cell: &Cell) -> Result<toml::Table> {
    let mut t = base.clone();
    for (k, v) in &cell.params {
        apply(&mut t, k, v).map_err(|e| anyhow!("key {k}: {e}"))?;
    }
    Ok(t)
}

/// One key with one value on the base: the key must exist in the scenario
/// format and the value must have its type.
fn check_key(base: &toml::Table, key: &str, value: &toml::Value, duration: Option<Nanos>) -> Result<()> {
    let mut t = base.clone();
    apply(&mut t, key, value).map_err(|e| anyhow!("key {key}: {e}"))?;
    let sc = check_scenario(&t, duration).map_err(|e| anyhow!("key {key} = {}: {e}", show(value)))?;
    // Fields the format does not know are rejected by the scenario's parser
    // where it denies them; this also catches tables that ignore extra keys.
    let known = toml::Value::try_from(&sc).map_err(|e| anyhow!("key {key}: {e}"))?;
    if lookup(&known, key).is_none() {
        bail!("key {key}: the scenario format has no such key");
    }
    Ok(())
}

fn check_scenario(t: &toml::Table, duration: Option<Nanos>) -> Result<scenario::Scenario> {
    let text = toml::to_string(t).map_err(|e| anyhow!("{e}"))?;
    let sc = scenario::parse(&text)?;
    sc.clone().resolve_with(&Overrides { duration, ..Overrides::default() })?;
    Ok(sc)
}

/// The status of one run of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not started yet.
    Pending,
    /// Started; if the manifest still says so, the sweep was killed during it.
    Running,
    /// run.json written, every check passed.
    Done,
    /// run.json written, some check failed (loss, rate, drops): the run is complete and reported.
    Failed,
    /// The run stopped without run.json (it is redone on resume).
    Error,
    /// Stopped by a signal (redone on resume).
    Interrupted,
}

impl Status {
    /// The run left a complete run directory.
    pub fn complete(self) -> bool {
        matches!(self, Status::Done | Status::Failed)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunEntry {
    pub repeat: u32,
    /// Run directory, relative to the sweep directory.
    pub dir: String,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Times this run was started (more than 1 after a resume redid it).
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellEntry {
    pub id: String,
    /// KEY -> value as TOML text (`"fastdds"`, `["1KiB"]`, `40`).
    pub params: BTreeMap<String, String>,
    /// The cell's scenario (the base with the cell's values), relative to the sweep directory.
    pub scenario: String,
    pub runs: Vec<RunEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub name: String,
    pub description: String,
    pub sweep_file: String,
    pub scenario_file: String,
    /// FNV-1a of the base scenario, keys, cells, repeats and duration: a resume must match it.
    pub digest: String,
    pub keys: Vec<String>,
    pub repeats: u32,
    pub duration: Option<String>,
    pub excluded: usize,
    pub plots: Vec<PlotSpec>,
    pub cells: Vec<CellEntry>,
    /// Times the sweep was started in this directory.
    pub sessions: u32,
    pub finished: bool,
}

impl Manifest {
    pub fn read(dir: &Path) -> Result<Manifest> {
        let p = dir.join("sweep.json");
        let text = fs::read_to_string(&p).map_err(|e| anyhow!("{}: cannot read: {e}", p.display()))?;
        let m: Manifest = serde_json::from_str(&text).map_err(|e| anyhow!("{}: {e}", p.display()))?;
        if m.format != FORMAT {
            bail!("{}: format {:?}, expected {FORMAT}", p.display(), m.format);
        }
        Ok(m)
    }

    /// Writes sweep.json atomically (a kill never leaves half a manifest).
    pub fn write(&self, dir: &Path) -> Result<()> {
        let p = dir.join("sweep.json");
        ddscope_traffic::fsio::write_atomic(&p, (serde_json::to_string_pretty(self)? + "\n").as_bytes()).with_context(|| format!("cannot write {}", p.display()))?;
        Ok(())
    }

    pub fn count(&self, s: Status) -> usize {
        self.cells.iter().flat_map(|c| &c.runs).filter(|r| r.status == s).count()
    }
}

fn fnv(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The manifest in `dir` for `sweep` (same digest), with the sweep file's
/// current charts, for rewriting the report without running.
pub fn refresh_manifest(sweep: &Sweep, dir: &Path) -> Result<Manifest> {
    let m = Manifest::read(dir)?;
    if m.digest != sweep.digest() {
        bail!("{} holds a different sweep ({}): other cells, repeats, duration or base scenario", dir.display(), m.name);
    }
    let m = Manifest { plots: sweep.plots.clone(), ..m };
    m.write(dir)?;
    Ok(m)
}

impl Sweep {
    pub fn digest(&self) -> String {
        let mut s = format!("{}\n{}\n{:?}\n", self.scenario_text, self.repeats, self.duration.map(|d| d.0));
        for c in &self.cells {
            s.push_str(&format!("{}: {}\n", c.id, c.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(";")));
        }
        fnv(&s)
    }

    fn manifest(&self) -> Manifest {
        Manifest {
            format: FORMAT.to_string(),
            name: self.name.clone(),
            description: self.description.clone(),
            sweep_file: self.file.display().to_string(),
            scenario_file: self.scenario_file.display().to_string(),
            digest: self.digest(),
            keys: self.keys.clone(),
            repeats: self.repeats,
            duration: self.duration.map(|d| d.to_string()),
            excluded: self.excluded,
            plots: self.plots.clone(),
            cells: self
                .cells
                .iter()
                .map(|c| CellEntry {
                    id: c.id.clone(),
                    params: c.params.iter().map(|(k, v)| (k.clone(), v.to_string())).collect(),
                    scenario: format!("scenarios/{}.toml", c.id),
                    runs: (1..=self.repeats)
                        .map(|r| RunEntry { repeat: r, dir: format!("runs/{}-r{r}", c.id), status: Status::Pending, error: None, attempts: 0, wall_s: None })
                        .collect(),
                })
                .collect(),
            sessions: 0,
            finished: false,
        }
    }
}

pub struct SweepOptions {
    pub out: PathBuf,
    pub gzip: bool,
    pub quiet: bool,
    /// Called after every run with the manifest as it stands.
    pub on_progress: Option<Box<dyn FnMut(&Manifest)>>,
}

/// Runs every cell `repeats` times (repeat by repeat, so that slow drifts of
/// a shared machine spread over all cells), resuming what `out` holds.
/// Returns the manifest; runs whose checks failed are complete and counted,
/// not errors. An interruption stops the sweep (Err) with the manifest saved.
pub fn run(sweep: &Sweep, opts: &mut SweepOptions) -> Result<Manifest> {
    let out = &opts.out;
    let mut m = if out.join("sweep.json").exists() {
        let old = Manifest::read(out)?;
        if old.digest != sweep.digest() {
            bail!(
                "{} holds a different sweep ({} with other cells, repeats, duration or base scenario); choose another output directory",
                out.display(),
                old.name
            );
        }
        // charts are not part of the digest: the file's current ones apply
        Manifest { plots: sweep.plots.clone(), ..old }
    } else {
        if out.exists() && fs::read_dir(out).map(|mut d| d.next().is_some()).unwrap_or(false) {
            bail!("{}: not empty and holds no sweep (sweep.json); choose another output directory", out.display());
        }
        sweep.manifest()
    };
    fs::create_dir_all(out.join("scenarios")).with_context(|| format!("cannot create {}", out.display()))?;
    fs::create_dir_all(out.join("runs"))?;
    let write = |p: PathBuf, b: &[u8]| ddscope_traffic::fsio::write_atomic(&p, b).with_context(|| format!("cannot write {}", p.display()));
    write(out.join("sweep.toml"), sweep.text.as_bytes())?;
    write(out.join("base-scenario.toml"), sweep.scenario_text.as_bytes())?;
    let base: toml::Table = toml::from_str(&sweep.scenario_text)?;
    for c in &sweep.cells {
        let t = cell_table(&base, c)?;
        let mut text = format!("# sweep {} cell {}: {}\n", sweep.name, c.id, c.label());
        text.push_str(&toml::to_string(&t)?);
        write(out.join(format!("scenarios/{}.toml", c.id)), text.as_bytes())?;
    }
    m.sessions += 1;
    m.finished = false;
    // what a killed session left half done is redone
    for c in &mut m.cells {
        for r in &mut c.runs {
            let complete = out.join(&r.dir).join("run.json").exists();
            if r.status.complete() && !complete {
                r.status = Status::Pending;
            } else if !r.status.complete() && r.status != Status::Pending {
                r.status = Status::Pending;
            }
        }
    }
    m.write(out)?;
    procs::install_signal_handlers();
    let total = m.cells.len() * m.repeats as usize;
    let mut n = 0;
    for repeat in 1..=m.repeats {
        for ci in 0..m.cells.len() {
            n += 1;
            let ri = (repeat - 1) as usize;
            if m.cells[ci].runs[ri].status.complete() {
                continue;
            }
            if let Some(sig) = procs::interrupted() {
                m.write(out)?;
                bail!("interrupted by {}; resume with the same command", procs::signal_name(sig));
            }
            let cell = &sweep.cells[ci];
            let dir = out.join(&m.cells[ci].runs[ri].dir);
            if !opts.quiet {
                eprintln!("sweep: [{n}/{total}] {} repeat {repeat}: {}", cell.id, cell.label());
            }
            {
                let r = &mut m.cells[ci].runs[ri];
                r.status = Status::Running;
                r.attempts += 1;
                r.error = None;
            }
            m.write(out)?;
            let started = Instant::now();
            let res = run::run(&RunOptions {
                scenario: out.join(&m.cells[ci].scenario),
                overrides: Overrides { duration: sweep.duration, ..Overrides::default() },
                out: Some(dir.clone()),
                gzip: opts.gzip,
                force: true,
                quiet: opts.quiet,
                agent_args: None,
                management: false,
            });
            let r = &mut m.cells[ci].runs[ri];
            r.wall_s = Some(started.elapsed().as_secs_f64());
            let has_report = dir.join("run.json").exists();
            match res {
                Ok(_) if has_report => r.status = Status::Done,
                Ok(_) => {
                    r.status = Status::Error;
                    r.error = Some("the run wrote no run.json".into());
                }
                Err(e) => {
                    let msg = one_line(&format!("{e:#}"));
                    r.status = if procs::interrupted().is_some() {
                        Status::Interrupted
                    } else if has_report {
                        Status::Failed
                    } else {
                        Status::Error
                    };
                    if !opts.quiet || r.status != Status::Failed {
                        eprintln!("sweep: {} repeat {repeat}: {msg}", cell.id);
                    }
                    r.error = Some(msg);
                }
            }
            let interrupted = r.status == Status::Interrupted;
            m.write(out)?;
            if let Some(cb) = opts.on_progress.as_mut() {
                cb(&m);
            }
            if interrupted {
                let sig = procs::interrupted().map(procs::signal_name).unwrap_or("a signal");
                bail!("interrupted by {sig} during {} repeat {repeat}; resume with the same command", cell.id);
            }
        }
    }
    m.finished = true;
    m.write(out)?;
    Ok(m)
}

/// Ground truth of one flow (a topic from the writers on one host to the
/// readers on another), from the run's `HOST.truth.jsonl` files.
#[derive(Debug, Clone, Serialize)]
pub struct TruthFlow {
    pub topic: String,
    pub sender: String,
    pub receiver: String,
    /// Samples the topic's writers on `sender` published.
    pub published: u64,
    /// published x readers of the topic on `receiver`.
    pub expected: u64,
    /// Distinct (reader, sample) receptions on `receiver`.
    pub received: u64,
    pub lost: u64,
    /// Payload bytes received (distinct receptions).
    pub received_bytes: u64,
    /// receive - publish of every distinct reception, milliseconds (one clock: the lab's hosts share the kernel's).
    pub latency: Option<Quantiles>,
}

/// Mean and nearest-rank quantiles of a sample of values (ms).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Quantiles {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Quantiles {
    pub fn of(v: &mut [f64]) -> Option<Quantiles> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let rank = |p: f64| v[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        Some(Quantiles { count: n as u64, mean: v.iter().sum::<f64>() / n as f64, p50: rank(0.5), p99: rank(0.99), max: v[n - 1] })
    }
}

/// Every cross-host flow of the scenario's topics in a finished run directory.
pub fn truth_flows(run_dir: &Path) -> Result<Vec<TruthFlow>> {
    let sc_path = run_dir.join("scenario.toml");
    let sc = scenario::load(&sc_path)?;
    let sc = sc.resolve_with(&Overrides::default()).map_err(|e| anyhow!("{}: {e}", sc_path.display()))?;
    let mut records: Vec<crate::truth::Record> = vec![];
    for h in &sc.hosts {
        let p = run_dir.join(format!("{}.truth.jsonl", h.name));
        let f = fs::File::open(&p).map_err(|e| anyhow!("{}: cannot read: {e}", p.display()))?;
        for (i, line) in std::io::BufRead::lines(std::io::BufReader::new(f)).enumerate() {
            let line = line.map_err(|e| anyhow!("{}: {e}", p.display()))?;
            if line.trim().is_empty() {
                continue;
            }
            records.push(serde_json::from_str(&line).map_err(|e| anyhow!("{} line {}: {e}", p.display(), i + 1))?);
        }
    }
    let writers = sc.writers();
    let readers = sc.readers();
    let mut flows = vec![];
    let mut topics: Vec<&str> = writers.iter().map(|w| w.flow.topic.as_str()).collect();
    topics.sort();
    topics.dedup();
    for topic in topics {
        let mut hosts_w: Vec<&str> = writers.iter().filter(|w| w.flow.topic == topic).map(|w| w.host.as_str()).collect();
        hosts_w.sort();
        hosts_w.dedup();
        let mut hosts_r: Vec<&str> = readers.iter().filter(|r| r.topic == topic).map(|r| r.host.as_str()).collect();
        hosts_r.sort();
        hosts_r.dedup();
        for s in &hosts_w {
            let pubs: std::collections::HashMap<(&str, i64), i64> = records
                .iter()
                .filter(|r| r.event == "publish" && r.topic == topic && r.host == *s)
                .map(|r| ((r.writer_guid.as_str(), r.seq), r.t_ns))
                .collect();
            for rh in hosts_r.iter().filter(|h| *h != s) {
                let n_readers = readers.iter().filter(|r| r.topic == topic && r.host == *rh).count() as u64;
                let mut seen = std::collections::HashSet::new();
                let mut lat = vec![];
                let mut bytes = 0u64;
                for r in records.iter().filter(|r| r.event == "receive" && r.topic == topic && r.host == *rh) {
                    let Some(t0) = pubs.get(&(r.writer_guid.as_str(), r.seq)) else { continue };
                    if seen.insert((r.node.as_str(), r.writer_guid.as_str(), r.seq)) {
                        lat.push((r.t_ns - t0) as f64 / 1e6);
                        bytes += r.size;
                    }
                }
                let published = pubs.len() as u64;
                let expected = published * n_readers;
                let received = seen.len() as u64;
                flows.push(TruthFlow {
                    topic: topic.to_string(),
                    sender: s.to_string(),
                    receiver: rh.to_string(),
                    published,
                    expected,
                    received,
                    lost: expected.saturating_sub(received),
                    received_bytes: bytes,
                    latency: Quantiles::of(&mut lat),
                });
            }
        }
    }
    Ok(flows)
}

fn param_value(toml_text: &str) -> Option<toml::Value> {
    toml::from_str::<toml::Table>(&format!("v = {toml_text}")).ok().and_then(|mut t| t.remove("v"))
}

/// A parameter of sweep.json (TOML text) as the user wrote it.
pub fn param_shown(toml_text: &str) -> String {
    param_value(toml_text).map(|v| show(&v)).unwrap_or_else(|| toml_text.to_string())
}

/// A parameter of sweep.json (TOML text) as a number ([`numeric`]).
pub fn param_number(toml_text: &str) -> Option<f64> {
    param_value(toml_text).and_then(|v| numeric(&v))
}

/// Median of values (mean of the middle two for an even count).
pub fn median(v: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// A matrix value as a number for a chart axis: numbers as they are, sizes
/// in bytes, percentages in percent, rates in bit/s, durations in ms; a
/// one-element list as its element. None: not a number.
pub fn numeric(v: &toml::Value) -> Option<f64> {
    use std::str::FromStr;
    match v {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        toml::Value::Array(a) if a.len() == 1 => numeric(&a[0]),
        toml::Value::String(s) => {
            let s = s.trim();
            if let Some(p) = s.strip_suffix('%') {
                return p.trim().parse::<f64>().ok();
            }
            if let Ok(b) = ddscope_traffic::Bytes::from_str(s) {
                return Some(b.0 as f64);
            }
            if let Ok(r) = ddscope_traffic::Rate::from_str(s) {
                return Some(r.0 as f64);
            }
            if let Ok(d) = Nanos::from_str(s) {
                return Some(d.0 as f64 / 1e6);
            }
            s.parse::<f64>().ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
name = "b"
duration = "2s"
[[hosts]]
name = "pc1"
[[hosts]]
name = "pc2"
[[generate]]
sizes = ["1KiB"]
rates_hz = [10]
publisher_hosts = ["pc1"]
subscriber_hosts = ["pc2"]
"#;

    fn sweep(body: &str) -> Result<Sweep> {
        let dir = std::env::temp_dir().join(format!("ddscope-sweep-test-{}-{}", std::process::id(), fnv(body)));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("base.toml"), BASE).unwrap();
        let p = dir.join("s.toml");
        fs::write(&p, format!("name = \"s\"\nscenario = \"base.toml\"\n{body}")).unwrap();
        let r = load(&p);
        let _ = fs::remove_dir_all(&dir);
        r
    }

    #[test]
    fn quantiles_and_numbers() {
        let q = Quantiles::of(&mut [4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((q.count, q.mean, q.p50, q.p99, q.max), (4, 2.5, 2.0, 4.0, 4.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0]), Some(2.5));
        assert_eq!(numeric(&toml::Value::String("1KiB".into())), Some(1024.0));
        assert_eq!(numeric(&toml::Value::String("40%".into())), Some(40.0));
        assert_eq!(numeric(&toml::Value::Array(vec![toml::Value::Integer(7)])), Some(7.0));
        assert_eq!(numeric(&toml::Value::String("fastdds".into())), None);
    }

    #[test]
    fn paths() {
        assert_eq!(parse_path("generate[0].sizes").unwrap(), vec![Seg::Key("generate".into()), Seg::Index(0), Seg::Key("sizes".into())]);
        assert!(parse_path("a..b").is_err());
        assert!(parse_path("a[x]").is_err());
        assert!(parse_path("a[0").is_err());
    }

    #[test]
    fn grid_and_exclude() {
        let s = sweep(
            "repeats = 2\n[matrix]\n\"generate[0].vendor\" = [\"cyclone\", \"fastdds\"]\n\"generate[0].sizes\" = [\"1KiB\", \"64KiB\", \"1MiB\"]\n\
             [[exclude]]\n\"generate[0].vendor\" = \"fastdds\"\n\"generate[0].sizes\" = \"1MiB\"\n",
        )
        .unwrap();
        assert_eq!(s.keys, vec!["generate[0].vendor", "generate[0].sizes"]);
        assert_eq!(s.cells.len(), 5);
        assert_eq!(s.excluded, 1);
        assert_eq!(s.cells[0].label(), "generate[0].vendor=cyclone generate[0].sizes=1KiB");
        // the scalar became a one-element list in the cell's scenario
        let base: toml::Table = toml::from_str(BASE).unwrap();
        let t = cell_table(&base, &s.cells[1]).unwrap();
        assert_eq!(lookup(&toml::Value::Table(t), "generate[0].sizes").unwrap().as_array().unwrap().len(), 1);
    }

    #[test]
    fn new_table_keys_and_explicit_cells() {
        let s = sweep("[matrix]\n\"network.rate\" = [\"100M\", \"1G\"]\n[[cells]]\n\"network.rate\" = \"10M\"\n\"dds.domain_id\" = 5\n").unwrap();
        assert_eq!(s.cells.len(), 3);
        assert_eq!(s.keys, vec!["network.rate", "dds.domain_id"]);
    }

    #[test]
    fn errors_name_the_key() {
        let e = sweep("[matrix]\n\"generate[0].sizez\" = [\"1KiB\"]\n").unwrap_err().to_string();
        assert!(e.contains("generate[0].sizez") && !e.contains('\n'), "{e}");
        let e = sweep("[matrix]\n\"generate[0].subscribers\" = [\"many\"]\n").unwrap_err().to_string();
        assert!(e.contains("generate[0].subscribers = many"), "{e}");
        let e = sweep("[matrix]\n").unwrap_err().to_string();
        assert!(e.contains("matrix is empty"), "{e}");
        let e = sweep("[matrix]\n\"dds.domain_id\" = []\n").unwrap_err().to_string();
        assert!(e.contains("dds.domain_id") && e.contains("empty"), "{e}");
        let e = sweep("[matrix]\n\"generate[3].sizes\" = [\"1KiB\"]\n").unwrap_err().to_string();
        assert!(e.contains("generate[3]") && e.contains("1 entries"), "{e}");
        let e = sweep("[matrix]\n\"interference[0].load\" = [\"40%\"]\n").unwrap_err().to_string();
        assert!(e.contains("interference"), "{e}");
    }
}
