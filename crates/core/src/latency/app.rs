//! Application-level ground truth: per-sample publish and receive times
//! recorded by the workload nodes (the lab's JSONL files, docs/lab.md):
//! `{"event":"publish"|"receive","t_ns":…,"host":…,"node":…,"topic":…,
//!   "writer_guid":…,"seq":n,"size":…[,"src_writer_guid":…,"src_seq":…]}`.
//! `seq` equals the RTPS writer sequence number, so the application layer
//! joins the wire layer on (writer GUID, sn).

use ddscope_wire::Guid;
use rustc_hash::FxHashMap;
use serde::Deserialize;
use std::io::{BufRead, BufReader};
use std::path::Path;

#[derive(Debug, Deserialize)]
struct Line {
    event: String,
    t_ns: i64,
    host: String,
    #[serde(default)]
    node: String,
    #[serde(default)]
    topic: String,
    writer_guid: String,
    seq: i64,
    #[serde(default)]
    src_writer_guid: Option<String>,
    #[serde(default)]
    src_seq: Option<i64>,
}

#[derive(Debug, Clone)]
pub struct Publish {
    pub t_ns: i64,
    pub host: String,
    pub node: String,
    pub topic: String,
    /// The input sample a relay node republished, if any.
    pub source: Option<(Guid, i64)>,
}

#[derive(Debug, Clone)]
pub struct Receive {
    pub t_ns: i64,
    pub host: String,
    pub node: String,
}

/// Publish and receive times of every sample the nodes recorded.
#[derive(Debug, Default)]
pub struct AppTruth {
    pub publish: FxHashMap<(Guid, i64), Publish>,
    pub receive: FxHashMap<(Guid, i64), Vec<Receive>>,
    pub files: Vec<String>,
    pub lines: u64,
}

impl AppTruth {
    /// Reads one ground-truth file; errors name the file and line.
    pub fn load(&mut self, path: &Path) -> anyhow::Result<()> {
        let f = std::fs::File::open(path).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        for (i, line) in BufReader::new(f).lines().enumerate() {
            let line = line.map_err(|e| anyhow::anyhow!("{}: line {}: {e}", path.display(), i + 1))?;
            if line.trim().is_empty() {
                continue;
            }
            let l: Line = serde_json::from_str(&line).map_err(|e| anyhow::anyhow!("{}: line {}: {e}", path.display(), i + 1))?;
            let guid = Guid::parse_hex(&l.writer_guid)
                .ok_or_else(|| anyhow::anyhow!("{}: line {}: writer_guid {:?} is not 32 hex digits", path.display(), i + 1, l.writer_guid))?;
            self.lines += 1;
            match l.event.as_str() {
                "publish" => {
                    let source = match (l.src_writer_guid.as_deref().and_then(Guid::parse_hex), l.src_seq) {
                        (Some(g), Some(s)) => Some((g, s)),
                        _ => None,
                    };
                    self.publish.insert((guid, l.seq), Publish { t_ns: l.t_ns, host: l.host, node: l.node, topic: l.topic, source });
                }
                "receive" => self.receive.entry((guid, l.seq)).or_default().push(Receive { t_ns: l.t_ns, host: l.host, node: l.node }),
                other => anyhow::bail!("{}: line {}: unknown event {other:?} (publish or receive)", path.display(), i + 1),
            }
        }
        self.files.push(path.display().to_string());
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.publish.is_empty() && self.receive.is_empty()
    }

    /// Earliest receive of (writer, sn) on `host`.
    pub fn receive_on(&self, writer: Guid, sn: i64, host: &str) -> Option<&Receive> {
        self.receive.get(&(writer, sn))?.iter().filter(|r| r.host == host).min_by_key(|r| r.t_ns)
    }
}
