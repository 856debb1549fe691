//! Application ground truth: every node writes one JSON line per sample it
//! publishes or receives (format in docs/lab.md). After a run the per-node
//! files are merged into one file per host, ordered by time, and every
//! published sample is accounted for at every reader that should get it:
//! received (once or more) or lost.

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;

use crate::scenario::Scenario;

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Record {
    pub event: String,
    pub t_ns: i64,
    pub host: String,
    pub node: String,
    pub topic: String,
    pub writer_guid: String,
    pub seq: i64,
    pub size: u64,
    #[serde(default)]
    pub src_writer_guid: Option<String>,
    #[serde(default)]
    pub src_seq: Option<i64>,
    #[serde(default)]
    pub source_ts_ns: Option<i64>,
    /// The real ROS 2 node's records: the message's header.stamp (its publisher wrote it; a
    /// receive whose seq the node could not read is found by it, [`resolve_seq_by_stamp`]).
    #[serde(default)]
    pub stamp_ns: Option<i64>,
    /// A real ROS 2 receive delivered by rclcpp intra-process (composable nodes in one process):
    /// no rmw take, no source timestamp.
    #[serde(default)]
    pub intra_process: bool,
    /// With tracing: CLOCK_MONOTONIC instants read right before the tracepoints
    /// they mirror (the CLOCK_REALTIME ones, `*_ns`, are not needed here) and
    /// the thread that ran them.
    #[serde(default)]
    pub rclcpp_publish_mono_ns: Option<i64>,
    #[serde(default)]
    pub rmw_publish_mono_ns: Option<i64>,
    #[serde(default)]
    pub rmw_take_mono_ns: Option<i64>,
    #[serde(default)]
    pub callback_start_mono_ns: Option<i64>,
    #[serde(default)]
    pub callback_end_mono_ns: Option<i64>,
    #[serde(default)]
    pub tid: Option<i64>,
}

/// Receives whose sequence number the node could not read (`seq` -1: a real ROS 2 node on
/// rmw_cyclonedds_cpp, which gives no publication sequence number, taking a message type without a
/// byte array to carry the lab's counter) get their publisher's, found by (writer, header.stamp):
/// the publisher wrote that stamp into exactly one of its samples. The host files in `files` (host,
/// path) are rewritten with the sequence numbers found; returns how many receives were resolved
/// and how many could not be.
pub fn resolve_seq_by_stamp(records: &mut [Record], files: &[(String, std::path::PathBuf)]) -> Result<(u64, u64)> {
    if !records.iter().any(|r| r.event == "receive" && r.seq < 0) {
        return Ok((0, 0));
    }
    let by_stamp: HashMap<(String, i64), i64> =
        records.iter().filter(|r| r.event == "publish").filter_map(|r| Some(((r.writer_guid.clone(), r.stamp_ns?), r.seq))).collect();
    let (mut resolved, mut unresolved) = (0, 0);
    let mut hosts = HashSet::new();
    for r in records.iter_mut().filter(|r| r.event == "receive" && r.seq < 0) {
        match r.stamp_ns.and_then(|s| by_stamp.get(&(r.writer_guid.clone(), s))) {
            Some(seq) => {
                r.seq = *seq;
                resolved += 1;
                hosts.insert(r.host.clone());
            }
            None => unresolved += 1,
        }
    }
    for (host, path) in files.iter().filter(|(h, _)| hosts.contains(h)) {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let mut out = String::with_capacity(text.len());
        for line in text.lines() {
            let mut v: serde_json::Value = serde_json::from_str(line).with_context(|| format!("{}: not JSON", path.display()))?;
            let key = (v["writer_guid"].as_str().unwrap_or("").to_string(), v["stamp_ns"].as_i64().unwrap_or(i64::MIN));
            if v["event"] == "receive" && v["seq"].as_i64().is_some_and(|s| s < 0) {
                if let Some(seq) = by_stamp.get(&key) {
                    v["seq"] = serde_json::json!(seq);
                }
            }
            out.push_str(&serde_json::to_string(&v)?);
            out.push('\n');
        }
        ddscope_traffic::fsio::write_atomic(path, out.as_bytes()).with_context(|| format!("cannot write {} ({host})", path.display()))?;
    }
    Ok((resolved, unresolved))
}

/// Merges the per-node files (`parts`) into `dst`, ordered by `t_ns`
/// (stable: equal times keep file order). Returns the records and what was
/// wrong with the parts: a missing file (the node died before writing) or an
/// unterminated last line (the node was killed mid-write) is skipped and reported.
pub fn merge(parts: &[std::path::PathBuf], dst: &Path) -> Result<(Vec<Record>, Vec<String>)> {
    let mut lines: Vec<(i64, String)> = vec![];
    let mut problems = vec![];
    for p in parts {
        let Ok(f) = File::open(p) else {
            problems.push(format!("ground truth {} missing", p.display()));
            continue;
        };
        let mut r = BufReader::new(f);
        let mut i = 0;
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).with_context(|| format!("cannot read {}", p.display()))? == 0 {
                break;
            }
            i += 1;
            if !line.ends_with('\n') {
                problems.push(format!("ground truth {} ends in an unterminated line {i}", p.display()));
                break;
            }
            let line = line.trim_end().to_string();
            if line.is_empty() {
                continue;
            }
            let t = t_of(&line).ok_or_else(|| anyhow!("{}:{i}: not a ground-truth record", p.display()))?;
            lines.push((t, line));
        }
    }
    lines.sort_by_key(|(t, _)| *t);
    let mut w = BufWriter::new(File::create(dst).with_context(|| format!("cannot write {}", dst.display()))?);
    let mut out = Vec::with_capacity(lines.len());
    for (_, line) in &lines {
        writeln!(w, "{line}")?;
        out.push(serde_json::from_str::<Record>(line).map_err(|e| anyhow!("{}: bad record {line:?}: {e}", dst.display()))?);
    }
    w.flush()?;
    Ok((out, problems))
}

fn t_of(line: &str) -> Option<i64> {
    let i = line.find("\"t_ns\":")? + 7;
    let rest = &line[i..];
    let end = rest.find(|c: char| c != '-' && !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Latency {
    pub samples: usize,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    fn of(mut v: Vec<f64>) -> Option<Latency> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
        Some(Latency { samples: v.len(), mean_ms: v.iter().sum::<f64>() / v.len() as f64, p50_ms: q(0.5), p99_ms: q(0.99), max_ms: q(1.0) })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WriterTruth {
    pub node: String,
    pub host: String,
    pub writer_guid: String,
    pub published: u64,
    /// (n - 1) / (t_last - t_first) over this writer's publish times.
    pub rate_hz: Option<f64>,
    pub first_seq: i64,
    pub last_seq: i64,
    /// Sequence numbers are 1, 2, ..., n with no gap or repeat.
    pub seq_contiguous: bool,
    pub sizes: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReaderTruth {
    pub node: String,
    pub host: String,
    /// Samples it should have received: everything its topic's writers published.
    pub expected: u64,
    pub received: u64,
    pub lost: u64,
    pub duplicates: u64,
    /// The first lost samples, "guid:seq".
    pub lost_examples: Vec<String>,
    /// Publish -> receive (application layer), over the samples received.
    pub latency: Option<Latency>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TopicTruth {
    pub topic: String,
    pub writers: Vec<WriterTruth>,
    pub readers: Vec<ReaderTruth>,
    pub published: u64,
    /// Sum over writers of their rate.
    pub rate_hz: Option<f64>,
    pub expected_deliveries: u64,
    pub received: u64,
    pub lost: u64,
    pub duplicates: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Accounting {
    pub topics: Vec<TopicTruth>,
    /// Receptions of samples no node recorded publishing (must be 0).
    pub unknown_receptions: u64,
    pub unknown_examples: Vec<String>,
    /// Relay publications whose source sample was never received by the relay (must be 0).
    pub unlinked_relays: u64,
}

/// Accounts for every published sample at every reader of its topic.
pub fn account(sc: &Scenario, records: &[Record]) -> Accounting {
    let mut acc = Accounting::default();
    // writer guid -> (topic, node, host)
    let mut pub_t: HashMap<(&str, i64), i64> = HashMap::new();
    let mut writers: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.event == "publish") {
        pub_t.insert((r.writer_guid.as_str(), r.seq), r.t_ns);
        writers.entry(r.writer_guid.as_str()).or_default().push(r);
    }
    let mut recv: HashMap<(&str, &str, i64), Vec<i64>> = HashMap::new(); // (reader node, guid, seq) -> receive times
    let mut relay_inputs: HashSet<(&str, &str, i64)> = HashSet::new();
    for r in records.iter().filter(|r| r.event == "receive") {
        if !pub_t.contains_key(&(r.writer_guid.as_str(), r.seq)) {
            acc.unknown_receptions += 1;
            if acc.unknown_examples.len() < 10 {
                acc.unknown_examples.push(format!("{} {} {}:{}", r.node, r.topic, r.writer_guid, r.seq));
            }
        }
        recv.entry((r.node.as_str(), r.writer_guid.as_str(), r.seq)).or_default().push(r.t_ns);
        relay_inputs.insert((r.node.as_str(), r.writer_guid.as_str(), r.seq));
    }
    for r in records.iter().filter(|r| r.event == "publish") {
        if let (Some(g), Some(s)) = (&r.src_writer_guid, r.src_seq) {
            if !relay_inputs.contains(&(r.node.as_str(), g.as_str(), s)) {
                acc.unlinked_relays += 1;
            }
        }
    }
    let mut topics: Vec<String> = sc.writers().iter().map(|w| w.flow.topic.clone()).collect();
    topics.sort();
    topics.dedup();
    for topic in topics {
        let mut t = TopicTruth {
            topic: topic.clone(),
            writers: vec![],
            readers: vec![],
            published: 0,
            rate_hz: None,
            expected_deliveries: 0,
            received: 0,
            lost: 0,
            duplicates: 0,
        };
        let topic_writers: Vec<(&str, &Vec<&Record>)> =
            writers.iter().filter(|(_, v)| v[0].topic == topic).map(|(g, v)| (*g, v)).collect();
        let mut rate_sum = 0.0;
        let mut have_rate = false;
        for (guid, recs) in &topic_writers {
            let mut seqs: Vec<i64> = recs.iter().map(|r| r.seq).collect();
            seqs.sort();
            let contiguous = seqs.iter().enumerate().all(|(i, s)| *s == i as i64 + 1);
            let mut sizes: Vec<u64> = recs.iter().map(|r| r.size).collect();
            sizes.sort();
            sizes.dedup();
            let first = recs.iter().map(|r| r.t_ns).min().unwrap();
            let last = recs.iter().map(|r| r.t_ns).max().unwrap();
            let rate = if recs.len() > 1 && last > first { Some((recs.len() - 1) as f64 * 1e9 / (last - first) as f64) } else { None };
            if let Some(r) = rate {
                rate_sum += r;
                have_rate = true;
            }
            t.published += recs.len() as u64;
            t.writers.push(WriterTruth {
                node: recs[0].node.clone(),
                host: recs[0].host.clone(),
                writer_guid: guid.to_string(),
                published: recs.len() as u64,
                rate_hz: rate,
                first_seq: *seqs.first().unwrap(),
                last_seq: *seqs.last().unwrap(),
                seq_contiguous: contiguous,
                sizes,
            });
        }
        t.rate_hz = have_rate.then_some(rate_sum);
        for rd in sc.readers().iter().filter(|r| r.topic == topic) {
            let mut rt = ReaderTruth {
                node: rd.node.clone(),
                host: rd.host.clone(),
                expected: 0,
                received: 0,
                lost: 0,
                duplicates: 0,
                lost_examples: vec![],
                latency: None,
            };
            let mut lat = vec![];
            for (guid, recs) in &topic_writers {
                for p in recs.iter() {
                    rt.expected += 1;
                    match recv.get(&(rd.node.as_str(), *guid, p.seq)) {
                        Some(times) => {
                            rt.received += 1;
                            rt.duplicates += times.len() as u64 - 1;
                            lat.push((times[0] - p.t_ns) as f64 / 1e6);
                        }
                        None => {
                            rt.lost += 1;
                            if rt.lost_examples.len() < 10 {
                                rt.lost_examples.push(format!("{guid}:{}", p.seq));
                            }
                        }
                    }
                }
            }
            rt.latency = Latency::of(lat);
            t.expected_deliveries += rt.expected;
            t.received += rt.received;
            t.lost += rt.lost;
            t.duplicates += rt.duplicates;
            t.readers.push(rt);
        }
        acc.topics.push(t);
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_time_without_parsing() {
        assert_eq!(t_of(r#"{"event":"publish","t_ns":1795325589173423640,"host":"pc1"}"#), Some(1795325589173423640));
        assert_eq!(t_of(r#"{"event":"x"}"#), None);
    }

    #[test]
    fn merge_orders_by_time_and_reports_broken_parts() {
        let dir = std::env::temp_dir().join(format!("ddscope-truth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let line = |t: i64, seq: i64| {
            format!(r#"{{"event":"publish","t_ns":{t},"host":"h","node":"n","topic":"/x","writer_guid":"00","seq":{seq},"size":8}}"#)
        };
        std::fs::write(dir.join("a"), format!("{}\n{}\n", line(30, 2), line(10, 1))).unwrap();
        std::fs::write(dir.join("b"), format!("{}\n{{\"event\":\"pub", line(20, 1))).unwrap();
        let (recs, problems) =
            merge(&[dir.join("a"), dir.join("b"), dir.join("missing")], &dir.join("out.jsonl")).unwrap();
        assert_eq!(recs.iter().map(|r| r.t_ns).collect::<Vec<_>>(), vec![10, 20, 30]);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].contains("unterminated") && problems[1].contains("missing"));
        assert_eq!(std::fs::read_to_string(dir.join("out.jsonl")).unwrap().lines().count(), 3);
        std::fs::write(dir.join("c"), "garbage\n").unwrap();
        assert!(merge(&[dir.join("c")], &dir.join("out2.jsonl")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn accounts_received_lost_and_duplicates() {
        let sc = crate::scenario::parse(
            r#"
name = "t"
[[hosts]]
name = "a"
[[hosts]]
name = "b"
[[nodes]]
name = "p"
host = "a"
[[nodes.publish]]
topic = "/x"
sample_bytes = 16
rate_hz = 10
[[nodes]]
name = "s"
host = "b"
[[nodes.subscribe]]
topic = "/x"
"#,
        )
        .unwrap()
        .resolve(None, &[])
        .unwrap();
        let rec = |ev: &str, t: i64, node: &str, seq: i64| Record {
            event: ev.into(),
            t_ns: t,
            host: if node == "p" { "a".into() } else { "b".into() },
            node: node.into(),
            topic: "/x".into(),
            writer_guid: "g".into(),
            seq,
            size: 16,
            src_writer_guid: None,
            src_seq: None,
            source_ts_ns: None,
            ..Record::default()
        };
        let recs = vec![
            rec("publish", 0, "p", 1),
            rec("publish", 100_000_000, "p", 2),
            rec("publish", 200_000_000, "p", 3),
            rec("receive", 1_000_000, "s", 1),
            rec("receive", 201_000_000, "s", 3),
            rec("receive", 202_000_000, "s", 3),
            rec("receive", 5, "s", 9),
        ];
        let acc = account(&sc, &recs);
        let t = &acc.topics[0];
        assert_eq!(t.published, 3);
        assert!((t.rate_hz.unwrap() - 10.0).abs() < 1e-9);
        assert_eq!((t.received, t.lost, t.duplicates), (2, 1, 1));
        assert_eq!(t.readers[0].lost_examples, vec!["g:2".to_string()]);
        assert!(t.writers[0].seq_contiguous);
        assert_eq!(acc.unknown_receptions, 1);
        assert!((t.readers[0].latency.as_ref().unwrap().max_ms - 1.0).abs() < 1e-9);
    }
}
