//! Things every subcommand shares: output files, formats, errors with exit codes.

use anyhow::Context;
use ddscope_core::output::Format;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutFormat {
    Table,
    Csv,
    Jsonl,
    Json,
    Parquet,
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

/// An error that maps to a specific exit code (2: input missing or unreadable).
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

pub fn input_error(e: ddscope_core::capture::CaptureError) -> anyhow::Error {
    anyhow::Error::new(ExitError { code: e.exit_code(), message: e.to_string() })
}

/// Opens `-o FILE` (or stdout). Parquet needs a file.
pub fn open_output(path: Option<&Path>, format: OutFormat) -> anyhow::Result<Box<dyn Write + Send>> {
    match path {
        Some(p) if p != Path::new("-") => {
            let f = File::create(p).with_context(|| format!("cannot create {}", p.display()))?;
            Ok(Box::new(BufWriter::with_capacity(1 << 20, f)))
        }
        _ => {
            if format == OutFormat::Parquet {
                anyhow::bail!("--format parquet needs an output file: add -o FILE.parquet");
            }
            Ok(Box::new(BufWriter::with_capacity(1 << 16, io::stdout())))
        }
    }
}

/// Capture-point name: the file name without `.pcap`, `.pcapng`, `.gz`.
pub fn capture_name(path: &Path) -> String {
    let mut name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "capture".into());
    for ext in [".gz", ".pcapng", ".pcap", ".cap"] {
        if let Some(s) = name.strip_suffix(ext) {
            name = s.to_string();
        }
    }
    name
}

pub fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Topic filter: glob patterns matched against the ROS 2 name and the raw DDS name.
pub struct TopicFilter {
    set: Option<globset::GlobSet>,
}

impl TopicFilter {
    pub fn new(patterns: &[String]) -> anyhow::Result<Self> {
        if patterns.is_empty() {
            return Ok(TopicFilter { set: None });
        }
        let mut b = globset::GlobSetBuilder::new();
        for p in patterns {
            let g = globset::GlobBuilder::new(p)
                .literal_separator(false)
                .build()
                .with_context(|| format!("bad --topic pattern {p:?}"))?;
            b.add(g);
        }
        Ok(TopicFilter { set: Some(b.build()?) })
    }

    pub fn is_active(&self) -> bool {
        self.set.is_some()
    }

    pub fn matches(&self, names: Option<&ddscope_core::discovery::TopicNames>) -> bool {
        match (&self.set, names) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(s), Some(n)) => s.is_match(&n.topic_name) || s.is_match(&n.topic_raw),
        }
    }
}

