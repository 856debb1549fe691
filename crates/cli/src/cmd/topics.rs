//! `ddscope topics`: per topic (or writer) — who, how often, how big, how
//! fragmented, how much repair traffic.

use super::limit_args::LimitArgs;
use crate::common::{self, OutFormat};
use crate::progress::Progress;
use anyhow::Context;
use clap::{Args, ValueEnum};
use ddscope_core::events::TrafficType;
use ddscope_core::output::RecordWriter;
use ddscope_core::pipeline::run_file;
use ddscope_core::record::{json_string, record_json};
use ddscope_core::topics::{TopicRow, TopicsAnalysis};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum By {
    Topic,
    Writer,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  ddscope topics examples/captures/simple-robotic-cyclone/pc1.pcapng.gz
  ddscope topics pc1.pcapng pc2.pcapng --by writer
  ddscope topics pc1.pcapng --format json | jq '.topics[] | {topic_name, rate_hz}'

A topic row is keyed by (domain, topic): the same topic name in two DDS domains
is two rows. domain comes from the participant's SPDP data (PID_DOMAIN_ID, else
the ports of its locators under the RTPS port mapping 7400 + 250*domain + d),
else the ports its traffic went to; null when nothing tells.
rate_hz is what `ros2 topic hz` computes, from the samples' own times (each
sample's first DATA/DATA_FRAG here): per writer (n-1)/(t_last-t_first), summed
over the topic's writers; the capture's start and end do not matter, so every
capture point that saw the same samples shows the same rate. rate_kind says
whether that number describes the stream: steady; bursty (the intervals vary
more than a random stream's: standard deviation above their mean, or a burst
then silence: the samples span less than a tenth of the time observed from the
first one on; e.g. /parameter_events) or few (fewer than 5 samples), both
without a rate (samples and span_s tell what there was); mixed (the rate sums
the steady writers only; --by writer shows each); no_samples (none here).
bandwidth is rate x mean sample size. writer_nodes/reader_nodes (writer_node with --by writer)
are the ROS 2 nodes owning the writers and readers, as their participants
announce them on ros_discovery_info, or rmw_zenoh's liveliness tokens (empty
without ROS 2 or when those were not captured); reliability, durability,
history, deadline, lifespan and liveliness come from SEDP, or for rmw_zenoh
from the QoS field of the publisher's token, and readers counts SEDP readers
or rmw_zenoh subscriptions; sizes are serialized payload sizes (CDR incl. the 4-byte
encapsulation header); rtps_frags_per_sample counts DATA_FRAG fragments
(0 for unfragmented samples); ip_frags_per_sample counts IP fragments of the
datagrams carrying the sample; sn_gaps counts sequence numbers skipped in the
writer's stream as captured.")]
pub struct TopicsArgs {
    /// Capture files (pcap or pcapng, optionally .gz); one set of rows per capture
    #[arg(required = true)]
    pub captures: Vec<PathBuf>,
    /// One row per topic or per writer
    #[arg(long, value_enum, default_value = "topic")]
    pub by: By,
    /// Output format (json: one document with captures, topics and skipped counters)
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutFormat,
    /// Output file (default: stdout)
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Only topics matching (ROS 2 or DDS name; glob, repeatable)
    #[arg(long = "topic")]
    pub topics: Vec<String>,
    /// Only topics of this DDS domain (from SPDP/SEDP or the RTPS ports; see docs/events.md)
    #[arg(long, value_parser = crate::args::domain)]
    pub domain: Option<u32>,
    /// Include discovery (SPDP/SEDP), builtin and security writers
    #[arg(long)]
    pub all: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
}

const TABLE_COLUMNS: &[&str] = &[
    "topic_name",
    "domain",
    "type_name",
    "writer_nodes",
    "reader_nodes",
    "vendors",
    "reliability",
    "writers",
    "readers",
    "samples",
    "span_s",
    "rate_hz",
    "rate_kind",
    "bandwidth_bps",
    "mean_sample_size",
    "max_sample_size",
    "rtps_frags_per_sample",
    "ip_frags_per_sample",
    "retransmitted_fragments",
    "sn_gaps",
    "heartbeats",
    "acknacks",
    "nack_frags",
    "gaps",
    "pcp",
];

/// Table headers that carry their unit (CSV/JSON/Parquet keep the column names).
const TABLE_HEADERS: &[(&str, &str, f64)] = &[
    ("topic_name", "topic", 1.0),
    ("type_name", "type", 1.0),
    ("bandwidth_bps", "bandwidth_Mbit_s", 1e-6),
    ("mean_sample_size", "mean_size_B", 1.0),
    ("max_sample_size", "max_size_B", 1.0),
    ("rtps_frags_per_sample", "dds_frags_per_sample", 1.0),
    ("retransmitted_fragments", "retransmitted_frags", 1.0),
];

pub fn run(a: TopicsArgs) -> anyhow::Result<i32> {
    let select = common::topic_select(&a.topics, a.domain)?;
    let limits = a.limits.resolve()?;
    if let Some(o) = &a.output {
        common::check_not_input(o, &a.captures)?;
    }
    let traffic: Vec<TrafficType> = if a.all { vec![] } else { vec![TrafficType::User] };
    let mut all_rows: Vec<TopicRow> = vec![];
    // The captures' JSON blocks (--format json only), spooled to an unnamed temporary file.
    let mut spool = if a.format == OutFormat::Json {
        Some(std::io::BufWriter::with_capacity(1 << 20, tempfile::tempfile().context("creating a temporary file for the JSON output")?))
    } else {
        None
    };
    let mut spooled = 0usize;
    let mut skipped_json: Vec<String> = vec![];
    for path in &a.captures {
        let name = common::capture_name(path);
        let mut analysis = TopicsAnalysis::with_config(limits.topics);
        let progress = Progress::start(&name, common::file_size(path));
        let res = run_file(path, &name, limits.decoder, Some(limits.samples), Some(progress.counter.clone()), &mut analysis);
        progress.finish();
        let res = res.map_err(common::input_error)?;
        let topic_stats = analysis.stats();
        let rows: Vec<TopicRow> = analysis
            .rows(&name, &res.decoder.discovery, a.by == By::Writer, &traffic)
            .into_iter()
            .filter(|r| select.matches(r.names.as_deref(), r.domain))
            .collect();
        crate::closing::print_summary("topics", path, &res.summary, &res.decoder, &format!("{} topics", rows.len()));
        if let Some(l) = res.samples.problem_line() {
            eprintln!("topics: {}: {l}", path.display());
        }
        if let Some(l) = topic_stats.problem_line() {
            eprintln!("topics: {}: {l}", path.display());
        }
        if let Some(l) = local_line(&rows) {
            eprintln!("topics: {}: {l}", path.display());
        }
        if let Some(w) = spool.as_mut() {
            // Each capture's block written straight to the spool, never whole in memory
            // (20 000 endpoints of long names made it 80 MB, held twice).
            let part = |w: &mut std::io::BufWriter<std::fs::File>, key: &str, v: &dyn erased::Json| -> anyhow::Result<()> {
                w.write_all(key.as_bytes())?;
                v.write_json(w)
            };
            let w: &mut std::io::BufWriter<std::fs::File> = w;
            let mut head = String::from(if spooled > 0 { ",{\"name\":" } else { "{\"name\":" });
            json_string(&mut head, &name);
            w.write_all(head.as_bytes())?;
            part(w, ",\"capture\":", &res.summary)?;
            part(w, ",\"decode\":", &res.decoder.stats)?;
            part(w, ",\"samples\":", &res.samples)?;
            part(w, ",\"topics_stats\":", &topic_stats)?;
            part(w, ",\"participants\":", &res.decoder.discovery.participants.values().collect::<Vec<_>>())?;
            part(w, ",\"endpoints\":", &res.decoder.discovery.endpoints_with_nodes())?;
            part(w, ",\"ros_nodes\":", &res.decoder.discovery.ros.participants_sorted())?;
            part(w, ",\"diagnostics\":", &res.decoder.diagnostics)?;
            w.write_all(b"}")?;
            spooled += 1;
        }
        let mut s = String::new();
        json_string(&mut s, &name);
        s.push(':');
        s.push_str(&serde_json::to_string(&serde_json::json!({
            "summary": res.decoder.stats.summary_line(),
            "counters": res.decoder.stats,
            "capture_error": res.summary.error,
        }))?);
        skipped_json.push(s);
        all_rows.extend(rows);
    }
    let (mut out, output) = common::open_output(a.output.as_deref(), a.format, &a.captures)?;
    if a.format == OutFormat::Json {
        // Written piece by piece: the document is never whole in memory
        // (20 000 topics of long names made it 74 MB, held twice).
        out.write_all(b"{\"captures\":[").context("writing output")?;
        if let Some(w) = spool.take() {
            use std::io::{Seek, SeekFrom};
            let mut f = w.into_inner().map_err(|e| e.into_error()).context("writing the temporary JSON spool")?;
            f.seek(SeekFrom::Start(0)).context("reading the temporary JSON spool")?;
            std::io::copy(&mut f, &mut out).context("writing output")?;
        }
        out.write_all(b"],\"topics\":[")?;
        let mut row = String::new();
        for (i, r) in all_rows.iter().enumerate() {
            row.clear();
            if i > 0 {
                row.push(',');
            }
            row.push('\n');
            record_json(r, &mut row);
            out.write_all(row.as_bytes()).context("writing output")?;
        }
        out.write_all(b"],\"skipped\":{")?;
        out.write_all(skipped_json.join(",").as_bytes())?;
        out.write_all(b"}}\n").context("writing output")?;
        out.flush()?;
        drop(out);
        output.commit()?;
        return Ok(0);
    }
    let mut cols: Vec<&str> = vec![];
    if a.captures.len() > 1 {
        cols.push("capture");
    }
    if a.by == By::Writer {
        cols.push("writer_id");
        cols.push("writer_node");
        cols.extend(TABLE_COLUMNS.iter().filter(|c| **c != "writer_nodes"));
    } else {
        cols.extend_from_slice(TABLE_COLUMNS);
    }
    let mut w: RecordWriter<TopicRow> = RecordWriter::new(a.format.into(), out, &cols)?
        .empty_reason("writer_nodes", "no ROS 2 node names on the wire: ros_discovery_info not captured, or not ROS 2")
        .empty_reason("writer_node", "no ROS 2 node names on the wire: ros_discovery_info not captured, or not ROS 2")
        .empty_reason("reader_nodes", "no ROS 2 node names on the wire: ros_discovery_info not captured, or not ROS 2")
        .empty_reason("pcp", "no 802.1Q tags")
        .empty_reason("domain", "no participant or port told it");
    for (c, h, scale) in TABLE_HEADERS {
        w = w.table_header(c, h, *scale);
    }
    for r in &all_rows {
        w.write(r)?;
    }
    w.finish()?;
    output.commit()?;
    Ok(0)
}

/// One line naming the topics some of whose writer–reader pairs are on one host or in one
/// participant (shared memory, loopback, in-process): samples no network capture sees.
fn local_line(rows: &[TopicRow]) -> Option<String> {
    const SHOWN: usize = 6;
    let mut groups: [(&str, Vec<String>); 3] = [("through shared memory", vec![]), ("over a host's loopback", vec![]), ("inside one participant", vec![])];
    for r in rows {
        let (Some(l), Some(n)) = (r.local, r.names.as_deref()) else { continue };
        let name = ddscope_core::names::for_terminal(&n.topic_name);
        let on = |hosts: u32, host: Option<std::net::Ipv4Addr>| match (hosts, host) {
            (1, Some(h)) => format!(" on {h}"),
            (n, _) if n > 1 => format!(" on {n} hosts"),
            _ => String::new(),
        };
        let kinds = [
            (l.shared_memory, on(l.shared_memory_hosts, l.shared_memory_host)),
            (l.pairs - l.shared_memory, on(l.loopback_hosts, l.loopback_host)),
            (l.same_participant, String::new()),
        ];
        for (i, (k, host)) in kinds.into_iter().enumerate() {
            if k > 0 {
                groups[i].1.push(format!("{name} ({k} pair{}{host})", if k == 1 { "" } else { "s" }));
            }
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(how, v)| {
            let more = v.len().saturating_sub(SHOWN);
            let list = v[..v.len().min(SHOWN)].join(", ");
            if more > 0 { format!("{how}: {list} and {more} more") } else { format!("{how}: {list}") }
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "writers and readers on one host (by their announced addresses), whose samples no network capture sees — {} (same_host_pairs, shared_memory_pairs, same_participant_pairs in CSV/JSON; a host's trace still measures them: docs/tracing.md)",
            parts.join("; ")
        )
    })
}

/// Serialising a value of any `Serialize` type through a `&dyn` (the capture blocks' parts).
mod erased {
    pub trait Json {
        fn write_json(&self, w: &mut std::io::BufWriter<std::fs::File>) -> anyhow::Result<()>;
    }
    impl<T: serde::Serialize> Json for T {
        fn write_json(&self, w: &mut std::io::BufWriter<std::fs::File>) -> anyhow::Result<()> {
            serde_json::to_writer(w, self).map_err(|e| anyhow::anyhow!("writing the temporary JSON spool: {e}"))
        }
    }
}
