//! `ddscope dissect`: one row per RTPS submessage.

use super::limit_args::LimitArgs;
use crate::common::{self, OutFormat};
use ddscope_core::sink::TopicSelect;
use crate::progress::Progress;
use anyhow::Context;
use clap::Args;
use ddscope_core::events::{SubmsgEvent, TrafficType};
use ddscope_core::output::RecordWriter;
use ddscope_core::pipeline::{run_file, Analysis};
use ddscope_core::record::Record;
use ddscope_core::samples::SampleRecord;
use ddscope_wire::rtps::SubmsgKind;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  ddscope dissect examples/captures/simple-robotic-cyclone/pc1.pcapng.gz
  ddscope dissect pc2.pcapng --topic /image --kind DATA_FRAG --format csv -o image.csv
  ddscope dissect pc1.pcapng --format parquet -o pc1.parquet   # read with polars/pandas/DuckDB
  ddscope dissect pc2.pcapng --records samples --topic /image   # one row per sample

With --records samples, an unfragmented sample's row is written as soon as it is
seen; a later datagram carrying it again adds a supplement row (closed_by =
\"retransmission\" towards the same destination, \"copy\" towards another reader)
that is not a new sample. docs/events.md lists the sample columns.

Columns (CSV/JSONL/Parquet carry all of them): capture, frame, ts_ns, interface,
src, dst, vlan_id, pcp, ip_id, ip_frags, ip_first_ts_ns, ip_last_ts_ns, rtps_len,
vendor_id, guid_prefix, submsg_index, kind, flags, submsg_len, traffic_type,
writer_id, reader_id, sn, fragment_starting_num, frags_in_submsg, fragment_size,
sample_size, payload_size, source_ts_ns, topic_name, writer_node, reader_node,
type_name, topic_raw, type_raw, hb_first_sn, hb_last_sn, count, set_base, set_num_bits, set,
gap_start, last_fragment_num, final_flag, status_info, key_hash, endpoint_id,
endpoint_kind, endpoint_topic_raw, endpoint_type_raw, domain.
domain is the writer's DDS domain (from its participant's SPDP data), else the
domain of the destination port under the RTPS port mapping; null when neither
tells (e.g. Cyclone DDS's kernel-chosen unicast ports).
writer_node/reader_node are the ROS 2 nodes (/namespace/name) owning the writer
and the reader, as their participants announce them on ros_discovery_info.
`frame` is the frame at which the UDP datagram is complete (tshark's numbering
with IP reassembly); ip_first_ts_ns/ip_last_ts_ns are the capture times of the
datagram's first and last IP fragment.")]
pub struct DissectArgs {
    /// Capture file (pcap or pcapng, optionally .gz)
    pub capture: PathBuf,
    /// Output format
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutFormat,
    /// Output file (default: stdout)
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Only submessages of writers whose topic matches (ROS 2 or DDS name; glob, repeatable)
    #[arg(long = "topic")]
    pub topics: Vec<String>,
    /// Only submessages (or samples) of this DDS domain (the writer's, else the destination port's; see docs/events.md)
    #[arg(long, value_parser = crate::args::domain)]
    pub domain: Option<u32>,
    /// Only these submessage kinds (DATA, DATA_FRAG, HEARTBEAT, ACKNACK, …; comma-separated, repeatable)
    #[arg(long = "kind", value_delimiter = ',', value_parser = kind)]
    pub kinds: Vec<SubmsgKind>,
    /// Only this traffic type (repeatable)
    #[arg(long = "traffic", value_enum)]
    pub traffic: Vec<Traffic>,
    /// Capture-point name written in the `capture` column (default: file name)
    #[arg(long)]
    pub name: Option<String>,
    /// What one row is: a submessage, or a sample (one completion record per writer and sequence number)
    #[arg(long, value_enum, default_value = "submessages")]
    pub records: Records,
    #[command(flatten)]
    pub limits: LimitArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Traffic {
    User,
    Discovery,
    Builtin,
    Security,
}

impl From<Traffic> for TrafficType {
    fn from(t: Traffic) -> TrafficType {
        match t {
            Traffic::User => TrafficType::User,
            Traffic::Discovery => TrafficType::Discovery,
            Traffic::Builtin => TrafficType::Builtin,
            Traffic::Security => TrafficType::Security,
        }
    }
}

fn kind(k: &str) -> Result<SubmsgKind, String> {
    SubmsgKind::parse_name(k).ok_or_else(|| {
        format!(
            "unknown kind {k:?}: use DATA, DATA_FRAG, HEARTBEAT, HEARTBEAT_FRAG, ACKNACK, NACK_FRAG, GAP, INFO_TS, INFO_SRC, \
             INFO_DST, INFO_REPLY, INFO_REPLY_IP4, PAD, SEC_BODY, SEC_PREFIX, SEC_POSTFIX, SRTPS_PREFIX, SRTPS_POSTFIX or VENDOR(0xNN)"
        )
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Records {
    Submessages,
    Samples,
}

const SAMPLE_TABLE_COLUMNS: &[&str] = &[
    "writer_id",
    "sn",
    "topic_name",
    "domain",
    "writer_node",
    "first_ts_ns",
    "last_ts_ns",
    "complete",
    "sample_size",
    "frags_expected",
    "frags_seen",
    "ip_frags",
    "retransmitted_frags",
    "closed_by",
];

const TABLE_COLUMNS: &[&str] = &[
    "frame",
    "ts_ns",
    "kind",
    "zenoh_msg",
    "key_expr",
    "traffic_type",
    "writer_id",
    "sn",
    "fragment_starting_num",
    "frags_in_submsg",
    "sample_size",
    "payload_size",
    "ip_frags",
    "pcp",
    "topic_name",
    "domain",
    "writer_node",
];

/// Which rows a dissection keeps.
struct Selection {
    kinds: Vec<SubmsgKind>,
    traffic: Vec<TrafficType>,
    topics: TopicSelect,
}

impl Selection {
    fn event(&self, e: &SubmsgEvent) -> bool {
        (self.kinds.is_empty() || self.kinds.contains(&e.kind))
            && (self.traffic.is_empty() || self.traffic.contains(&e.traffic_type))
            && self.topics.matches(e.topic.as_deref(), e.domain())
    }
    fn sample(&self, r: &SampleRecord) -> bool {
        (self.traffic.is_empty() || self.traffic.contains(&r.traffic_type))
            && self.topics.matches(r.topic.as_deref(), r.topic.as_ref().and_then(|t| t.domain))
    }
}

/// The row sink of `dissect`: selected submessages or sample records, written
/// as they come; the first write error stops writing and is reported at the end.
struct Rows<R: Record> {
    select: Selection,
    writer: RecordWriter<R>,
    error: Option<std::io::Error>,
}

impl<R: Record> Rows<R> {
    fn write(&mut self, r: &R) {
        if self.error.is_none() {
            if let Err(e) = self.writer.write(r) {
                self.error = Some(e);
            }
        }
    }
}

impl Analysis for Rows<SubmsgEvent> {
    fn event(&mut self, e: &SubmsgEvent) {
        if self.select.event(e) {
            self.write(e);
        }
    }
}

/// `--records samples`: one sample-completion record per (writer, sn), plus
/// supplement records (`retransmission`, `copy`) for unfragmented samples seen again.
impl Analysis for Rows<SampleRecord> {
    fn sample(&mut self, r: &SampleRecord) {
        if self.select.sample(r) {
            self.write(r);
        }
    }
}

pub fn run(a: DissectArgs) -> anyhow::Result<i32> {
    let select = Selection { kinds: a.kinds.clone(), traffic: a.traffic.iter().map(|t| (*t).into()).collect(), topics: common::topic_select(&a.topics, a.domain)? };
    if a.records == Records::Samples && !a.kinds.is_empty() {
        return Err(common::usage("--kind selects submessages; it does not apply to --records samples"));
    }
    let limits = a.limits.resolve()?;
    let inputs = [a.capture.clone()];
    let (out, output) = common::open_output(a.output.as_deref(), a.format, &inputs)?;
    let name = a.name.clone().unwrap_or_else(|| common::capture_name(&a.capture));
    let progress = Progress::start(&name, common::file_size(&a.capture));
    let counter = Some(progress.counter.clone());
    match a.records {
        Records::Submessages => {
            let mut rows = Rows::<SubmsgEvent> { select, writer: RecordWriter::new(a.format.into(), out, TABLE_COLUMNS)?
                    .empty_reason("zenoh_msg", "no Zenoh traffic")
                    .empty_reason("key_expr", "no Zenoh traffic"), error: None };
            let res = run_file(&a.capture, &name, limits.decoder, None, counter, &mut rows);
            progress.finish();
            let res = res.map_err(common::input_error)?;
            let Some(n) = finish_output(rows.writer, rows.error, output)? else {
                return Ok(0); // the reader went away (e.g. `| head`)
            };
            crate::closing::print_summary("dissect", &a.capture, &res.summary, &res.decoder, &format!("{n} rows written"));
        }
        Records::Samples => {
            let mut rows =
                Rows::<SampleRecord> { select, writer: RecordWriter::new(a.format.into(), out, SAMPLE_TABLE_COLUMNS)?, error: None };
            let res = run_file(&a.capture, &name, limits.decoder, Some(limits.samples), counter, &mut rows);
            progress.finish();
            let res = res.map_err(common::input_error)?;
            let Some(n) = finish_output(rows.writer, rows.error, output)? else {
                return Ok(0);
            };
            crate::closing::print_summary("dissect", &a.capture, &res.summary, &res.decoder, &format!("{n} sample records written"));
            if let Some(l) = res.samples.problem_line() {
                eprintln!("dissect: {}: {l}", a.capture.display());
            }
        }
    }
    Ok(0)
}

/// Closes the output after the run: the number of rows written, or `None` when
/// the reader closed the pipe (not an error for a command piped into `head`).
fn finish_output<R: Record>(writer: RecordWriter<R>, io_error: Option<std::io::Error>, output: common::Output) -> anyhow::Result<Option<u64>> {
    let broken = |e: &std::io::Error| e.kind() == std::io::ErrorKind::BrokenPipe;
    if let Some(e) = io_error {
        return if broken(&e) { Ok(None) } else { Err(e).context("writing output") };
    }
    let rows = writer.rows();
    match writer.finish() {
        Err(e) if broken(&e) => Ok(None),
        Err(e) => Err(e).context("writing output"),
        Ok(()) => {
            output.commit()?;
            Ok(Some(rows))
        }
    }
}
