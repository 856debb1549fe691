//! `ddscope dissect`: one row per RTPS submessage.

use crate::common::{self, OutFormat, TopicFilter};
use crate::progress::Progress;
use anyhow::Context;
use clap::Args;
use ddscope_core::decode::{decode_file, DecoderConfig};
use ddscope_core::events::{SubmsgEvent, TrafficType};
use ddscope_core::output::RecordWriter;
use ddscope_wire::rtps::SubmsgKind;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  ddscope dissect examples/captures/simple/pc1.pcapng.gz
  ddscope dissect pc2.pcapng --topic /image --kind DATA_FRAG --format csv -o image.csv
  ddscope dissect pc1.pcapng --format parquet -o pc1.parquet   # read with polars/pandas/DuckDB
  ddscope dissect pc2.pcapng --records samples --topic /image   # one row per sample: completion, fragments, repairs

With --records samples, an unfragmented sample's row is written as soon as it is
seen; a later datagram carrying it again adds a supplement row (closed_by =
\"retransmission\" towards the same destination, \"copy\" towards another reader)
that is not a new sample. docs/events.md lists the sample columns.

Columns (CSV/JSONL/Parquet carry all of them): capture, frame, ts_ns, interface,
src, dst, vlan_id, pcp, ip_id, ip_frags, ip_first_ts_ns, ip_last_ts_ns, rtps_len,
vendor_id, guid_prefix, submsg_index, kind, flags, submsg_len, traffic_type,
writer_id, reader_id, sn, fragment_starting_num, frags_in_submsg, fragment_size,
sample_size, payload_size, source_ts_ns, topic_name, type_name, topic_raw,
type_raw, hb_first_sn, hb_last_sn, count, set_base, set_num_bits, set,
gap_start, last_fragment_num, final_flag, status_info, key_hash, endpoint_id,
endpoint_kind, endpoint_topic_raw, endpoint_type_raw.
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
    /// Only these submessage kinds (DATA, DATA_FRAG, HEARTBEAT, ACKNACK, …; comma-separated, repeatable)
    #[arg(long = "kind", value_delimiter = ',')]
    pub kinds: Vec<String>,
    /// Only this traffic type: user, discovery, builtin, security (repeatable)
    #[arg(long = "traffic")]
    pub traffic: Vec<String>,
    /// Capture-point name written in the `capture` column (default: file name)
    #[arg(long)]
    pub name: Option<String>,
    /// What one row is: a submessage, or a sample (one completion record per writer and sequence number)
    #[arg(long, value_enum, default_value = "submessages")]
    pub records: Records,
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
];

pub fn run(a: DissectArgs) -> anyhow::Result<i32> {
    let kinds: Vec<SubmsgKind> = a
        .kinds
        .iter()
        .map(|k| {
            SubmsgKind::parse_name(k).with_context(|| {
                format!(
                    "unknown --kind {k:?}: use DATA, DATA_FRAG, HEARTBEAT, HEARTBEAT_FRAG, ACKNACK, NACK_FRAG, GAP, \
                     INFO_TS, INFO_SRC, INFO_DST, INFO_REPLY, INFO_REPLY_IP4, PAD, SEC_BODY, SEC_PREFIX, SEC_POSTFIX, \
                     SRTPS_PREFIX, SRTPS_POSTFIX or VENDOR(0xNN)"
                )
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let traffic: Vec<TrafficType> = a
        .traffic
        .iter()
        .map(|t| match t.as_str() {
            "user" => Ok(TrafficType::User),
            "discovery" => Ok(TrafficType::Discovery),
            "builtin" => Ok(TrafficType::Builtin),
            "security" => Ok(TrafficType::Security),
            other => anyhow::bail!("unknown --traffic {other:?}: use user, discovery, builtin or security"),
        })
        .collect::<anyhow::Result<_>>()?;
    let filter = TopicFilter::new(&a.topics)?;
    if a.records == Records::Samples {
        if !kinds.is_empty() {
            anyhow::bail!("--kind selects submessages; it does not apply to --records samples");
        }
        return samples(&a, &filter, &traffic);
    }
    let out = common::open_output(a.output.as_deref(), a.format)?;
    let mut writer: RecordWriter<SubmsgEvent> = RecordWriter::new(a.format.into(), out, TABLE_COLUMNS)?;
    let name = a.name.clone().unwrap_or_else(|| common::capture_name(&a.capture));
    let progress = Progress::start(&name, common::file_size(&a.capture));
    let mut io_error: Option<std::io::Error> = None;
    let result = decode_file(&a.capture, &name, DecoderConfig::default(), Some(progress.counter.clone()), &mut |e| {
        if io_error.is_some() {
            return;
        }
        if !kinds.is_empty() && !kinds.contains(&e.kind) {
            return;
        }
        if !traffic.is_empty() && !traffic.contains(&e.traffic_type) {
            return;
        }
        if filter.is_active() && !filter.matches(e.topic.as_deref()) {
            return;
        }
        if let Err(err) = writer.write(e) {
            io_error = Some(err);
        }
    });
    progress.finish();
    let (dec, summary) = result.map_err(common::input_error)?;
    let Some(rows) = finish_output(writer, io_error)? else {
        return Ok(0); // the reader went away (e.g. `| head`)
    };
    crate::report::print_summary("dissect", &a.capture, &summary, &dec, &format!("{rows} rows written"));
    Ok(0)
}

/// `--records samples`: one sample-completion record per (writer, sn), plus
/// supplement records (`retransmission`, `copy`) for unfragmented samples seen again.
fn samples(a: &DissectArgs, filter: &TopicFilter, traffic: &[TrafficType]) -> anyhow::Result<i32> {
    use ddscope_core::pipeline::analyse_file;
    use ddscope_core::samples::{SampleConfig, SampleRecord};
    let out = common::open_output(a.output.as_deref(), a.format)?;
    let mut writer: RecordWriter<SampleRecord> = RecordWriter::new(a.format.into(), out, SAMPLE_TABLE_COLUMNS)?;
    let name = a.name.clone().unwrap_or_else(|| common::capture_name(&a.capture));
    let progress = Progress::start(&name, common::file_size(&a.capture));
    let mut io_error: Option<std::io::Error> = None;
    let result = analyse_file(
        &a.capture,
        &name,
        DecoderConfig::default(),
        SampleConfig::default(),
        Some(progress.counter.clone()),
        &mut |_| {},
        &mut |r| {
            if io_error.is_some()
                || (!traffic.is_empty() && !traffic.contains(&r.traffic_type))
                || (filter.is_active() && !filter.matches(r.topic.as_deref()))
            {
                return;
            }
            if let Err(e) = writer.write(&r) {
                io_error = Some(e);
            }
        },
    );
    progress.finish();
    let res = result.map_err(common::input_error)?;
    let Some(rows) = finish_output(writer, io_error)? else {
        return Ok(0); // the reader went away (e.g. `| head`)
    };
    crate::report::print_summary("dissect", &a.capture, &res.summary, &res.decoder, &format!("{rows} sample records written"));
    if let Some(l) = res.samples.problem_line() {
        eprintln!("dissect: {}: {l}", a.capture.display());
    }
    Ok(0)
}

/// Closes the output after the run: the number of rows written, or `None` when
/// the reader closed the pipe (not an error for a command piped into `head`).
fn finish_output<R: ddscope_core::record::Record>(writer: RecordWriter<R>, io_error: Option<std::io::Error>) -> anyhow::Result<Option<u64>> {
    let broken = |e: &std::io::Error| e.kind() == std::io::ErrorKind::BrokenPipe;
    if let Some(e) = io_error {
        return if broken(&e) { Ok(None) } else { Err(e).context("writing output") };
    }
    let rows = writer.rows();
    match writer.finish() {
        Err(e) if broken(&e) => Ok(None),
        r => r.map(|()| Some(rows)).context("writing output"),
    }
}
