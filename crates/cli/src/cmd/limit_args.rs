//! The caps options every analysing command shares (`--limits FILE`,
//! `--limit KEY=N`, `--max-writers N`) and `ddscope limits`, which prints
//! the caps in effect as a limits file.

use clap::Args;
use ddscope_core::limits::{Limits, KEYS};
use std::path::PathBuf;

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Limits (caps of the tables keyed by the wire; see docs/robustness.md)")]
pub struct LimitArgs {
    /// Caps from a TOML limits file (`ddscope limits` prints one with every key)
    #[arg(long = "limits", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// One cap, SECTION.KEY=N (e.g. samples.max_open=10000, samples.max_fragment_bytes=8MiB); repeatable, applied after --limits
    #[arg(long = "limit", value_name = "KEY=N", value_parser = key_value)]
    pub set: Vec<(String, String)>,
    /// Writers remembered (topics.max_writers and correlation.max_writers); applied last
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_writers: Option<u64>,
}

fn key_value(s: &str) -> Result<(String, String), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("{s:?}: expected SECTION.KEY=N"))?;
    if !KEYS.iter().any(|key| key.name() == k.trim()) {
        let known: Vec<String> = KEYS.iter().map(|k| k.name()).collect();
        return Err(format!("unknown cap {:?} (known: {})", k.trim(), known.join(", ")));
    }
    Ok((k.trim().to_string(), v.trim().to_string()))
}

impl LimitArgs {
    /// The caps in effect: defaults, then the file, then `--limit`, then `--max-writers`.
    pub fn resolve(&self) -> anyhow::Result<Limits> {
        let mut l = Limits::default();
        if let Some(f) = &self.file {
            let text = ddscope_traffic::fsio::read_bounded_text(f, ddscope_traffic::fsio::MAX_CONFIG_BYTES, "limits file").map_err(|e| crate::common::input(format!("--limits: {e:#}")))?;
            l.apply_toml(&text).map_err(|e| crate::common::input(format!("--limits {}: {e}", f.display())))?;
        }
        for (k, v) in &self.set {
            let (section, key) = k.split_once('.').unwrap_or(("", k));
            // The value is parsed as the file would parse it (sizes take units).
            let doc = format!("[{section}]\n{key} = {}\n", toml_value(v));
            l.apply_toml(&doc).map_err(|e| crate::common::usage(format!("--limit {k}={v}: {e}")))?;
        }
        if let Some(n) = self.max_writers {
            l.set("topics.max_writers", n).map_err(|e| crate::common::usage(format!("--max-writers {n}: {e}")))?;
            l.set("correlation.max_writers", n).map_err(|e| crate::common::usage(format!("--max-writers {n}: {e}")))?;
        }
        Ok(l)
    }
}

/// Puts the caps into a latency session's options.
pub fn apply(l: &Limits, o: &mut ddscope_core::session::LatencyOptions) {
    o.decoder = l.decoder;
    o.samples = l.samples;
    o.correlator = l.correlator(o.correlator.clone());
    o.assemble = l.assembler(o.assemble.max_open_ns);
}

/// A number as a TOML integer, anything else as a TOML string.
fn toml_value(v: &str) -> String {
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
        v.to_string()
    } else {
        format!("{:?}", v)
    }
}

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  ddscope limits > limits.toml          # every cap with its default and meaning
  ddscope limits --limits limits.toml --limit samples.max_open=10000
  ddscope topics big.pcapng --limits limits.toml")]
pub struct LimitsCmdArgs {
    #[command(flatten)]
    pub limits: LimitArgs,
}

pub fn run(a: LimitsCmdArgs) -> anyhow::Result<i32> {
    let l = a.limits.resolve()?;
    print!("# ddscope limits: the caps of every table keyed by the wire.\n# Counts are entries; sizes are bytes (a limits file may also write \"64MiB\").\n\n{}", l.to_toml());
    Ok(0)
}
