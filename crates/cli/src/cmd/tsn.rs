//! `ddscope tsn …`: predict, simulate and configure Time-Sensitive Networking.

use ddscope_tsn::cbs::{self, CbsClassInput};
use ddscope_tsn::config;
use ddscope_tsn::frame::{Framing, RtpsOptions};
use ddscope_tsn::scenario::{self, Scenario, TaprioMode};
use ddscope_tsn::sr::SrClass;
use ddscope_tsn::tas::{self, TasInput};
use anyhow::{anyhow, Context};
use clap::{Args, Subcommand, ValueEnum};
use ddscope_traffic::{Bytes, Nanos, Percent, Rate};
use std::fmt::Write;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(
    about = "TSN models, simulator and configuration generators",
    long_about = "Predict DDS message latency under a Time-Aware Shaper (thesis Eq. 3.4 and a frame-level model), \
simulate TAS / CBS / strict-priority ports with DDS samples, iperf3 bursts and IVN traffic, compute CBS parameters \
(Bosk et al. Eq. 2-6), and generate tc, Cyclone DDS and linuxptp configuration.\n\n\
The thesis: Tai-You Kuo, \"Performance Profiling and Online Monitoring on Autonomous Vehicle Systems with \
Time-Sensitive Networking\", Master's thesis, National Taiwan University, 2026. Bosk et al.: Bosk, Rezabek et al., \
\"Methodology and Infrastructure for TSN-Based Reproducible Network Experiments\", IEEE Access, 2022.",
    after_help = "Examples:\n  \
ddscope tsn tas --link-rate 2.5G --cycle 500us --open 50% --message-bytes 2764800\n  \
ddscope tsn simulate examples/tsn/thesis-tas50-95.toml --seed 3\n  \
ddscope tsn cbs --port-rate 1G --max-frame-bytes 1542 --class A:reserved=89.152M,max-frame=1500 \\\n      --class B:reserved=12.82M,max-frame=1250\n  \
ddscope tsn config examples/tsn/thesis-tas50-40.toml --emit tc\n  \
ddscope tsn tas --calibrate lab-out/run --table-4-6\n  \
ddscope tsn plan lab-out/run/pc1.pcapng --link-rate 2.5G --out /tmp/plan\n  \
ddscope tsn sr-classes"
)]
pub struct TsnArgs {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Thesis formula (Eq. 3.4) vs frame-level prediction for one message under TAS
    #[command(after_help = "Examples:\n  \
ddscope tsn tas                                # thesis image: 2.5G, 500us, 50%, 2764848 B\n  \
ddscope tsn tas --open 20% --message-bytes 2.76MiB   # the X of Table 4.6's T_arrive column\n  \
ddscope tsn tas --cycle 100us --format json\n  \
ddscope tsn tas --calibrate lab-out/run --table-4-6   # host times from a no-gate lab run")]
    Tas(TasArgs),
    /// Frame-level discrete-event simulation of a scenario file
    #[command(after_help = "Examples:\n  \
ddscope tsn simulate examples/tsn/thesis-baseline-95.toml\n  \
ddscope tsn simulate examples/tsn/ivn-usecase-cbs.toml --seed 7 --format json\n  \
ddscope tsn simulate examples/tsn/thesis-tas50-40.toml --duration 2s\n\n\
Durations are at most 24h; a simulation that would release more than 2e7 messages or send more than
5e8 frames (frames x hops) is refused before it starts, naming the busiest flow (docs/robustness.md).")]
    Simulate(SimArgs),
    /// CBS idleslope/sendslope/hicredit/locredit by Bosk et al. Eq. 2-6, and the tc line
    #[command(after_help = "Examples:\n  \
ddscope tsn cbs --port-rate 1G --max-frame-bytes 1542 --class A:reserved=100M,max-frame=1250\n  \
ddscope tsn cbs --port-rate 1G --max-frame-bytes 1542 --class A:reserved=89.152M,max-frame=1500 \\\n      --class B:reserved=12.82M,max-frame=1250 --dev eth0")]
    Cbs(CbsArgs),
    /// Generate tc (taprio/mqprio/cbs/etf), DDS priority mapping, or linuxptp configuration
    #[command(after_help = "Examples:\n  \
ddscope tsn config examples/tsn/thesis-tas50-40.toml --emit tc\n  \
ddscope tsn config examples/tsn/thesis-tas50-40.toml --emit tc --taprio-mode txtime-assist\n  \
ddscope tsn config examples/tsn/thesis-tas50-40.toml --emit dds --out /tmp/dds\n  \
ddscope tsn config examples/tsn/ivn-usecase-cbs.toml --emit ptp\n\n\
The scripts are meant to run as root: interface names from the scenario (port.interface,
ptp.follower, ptp.grandmaster) must be Linux interface names (1-15 bytes, no '/', ':' or
whitespace), multicast addresses IPv4 multicast addresses, and every value is quoted for the shell.")]
    Config(ConfigArgs),
    /// Print the SR classes of Bosk et al. Table 1
    SrClasses(FormatArg),
    /// Check captures against a TSN configuration: PCP per topic, gate windows, SR-class latency and jitter
    #[command(after_help = "Examples:\n  \
ddscope tsn check examples/tsn/lab-tagged.toml lab-out/tagged        # a lab run directory\n  \
ddscope tsn check examples/tsn/lab-tagged.toml pc1.pcapng pc2.pcapng --judge p99\n  \
ddscope tsn check examples/tsn/thesis-tas50-40.toml pc1.pcapng pc2.pcapng --clock-offset 37s \\\n      --gate-tolerance 2us\n\n\
One verdict line per topic and capture (PCP), per gated port and topic (windows) and per SR class\n\
(max latency and jitter against Bosk et al. Table 1, end to end over paths of up to 7 hops).\n\
Exit code 0: every check passed; 1: a violation; 2: an input could not be read or used; 64: a wrong command line.")]
    Check(CheckArgs),
    /// Propose a TAS configuration from measured traffic, predict per-topic latency, emit tc/DDS/PTP and the scenario
    /// (exit code 3 when a topic cannot meet its deadline)
    #[command(after_help = "Examples:\n  \
ddscope tsn plan lab-out/run/pc1.pcapng --link-rate 2.5G\n  \
ddscope tsn plan lab-out/run/pc1.pcapng --link-rate 1G --emit tc\n  \
ddscope tsn plan lab-out/run/pc1.pcapng --link-rate 2.5G --out /tmp/plan   # plan.toml, tc.sh…")]
    Plan(PlanArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
enum JudgeArg {
    /// Every sample (Table 1's max latency and max jitter)
    Max,
    /// The 99th percentile (Bosk et al.'s measurement tables)
    P99,
}

#[derive(Args, Debug)]
struct CheckArgs {
    /// TSN scenario file (format: docs/tsn.md): topics with pcp, path and sr_class, ports with gate control lists
    configuration: PathBuf,
    /// Capture files or run directories; name the capture at a gated port's egress like the port
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Added to capture timestamps to get the gate schedule's clock (taprio: CLOCK_TAI), e.g. 37s
    #[arg(long, value_name = "±DURATION", default_value = "0s", allow_hyphen_values = true, value_parser = signed_ns)]
    clock_offset: i64,
    /// A frame may leave this long before its window opens or after it closes (capture timestamp precision)
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = crate::args::duration_ns)]
    gate_tolerance: i64,
    /// Statistic judged against the class bounds
    #[arg(long, value_enum, default_value = "max")]
    judge: JudgeArg,
    /// Clock offset t_o of a capture point for the latency (Bosk et al. Eq. 9): pc2=+37s
    #[arg(long = "offset", value_name = "NAME=±DURATION", value_parser = crate::args::offset)]
    offsets: Vec<crate::args::Offset>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    #[command(flatten)]
    limits: super::limit_args::LimitArgs,
}

fn signed_ns(s: &str) -> Result<i64, String> {
    ddscope_traffic::units::parse_signed_nanos(s).map_err(|e| format!("{s:?}: {e}"))
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
enum PlanEmit {
    Scenario,
    Tc,
    Dds,
    Ptp,
}

#[derive(Args, Debug)]
struct PlanArgs {
    /// Capture files (pcap/pcapng, optionally .gz) of the traffic to plan for
    #[arg(required = true)]
    captures: Vec<PathBuf>,
    /// Link rate of the egress port
    #[arg(long)]
    link_rate: Rate,
    /// Longest cycle to propose
    #[arg(long, default_value = "500us")]
    max_cycle: Nanos,
    /// Headroom factor on the bulk window (1.25 = 25 % more than the tightest deadline needs)
    #[arg(long, default_value = "1.25")]
    margin: f64,
    /// Egress interface for the generated tc/DDS lines
    #[arg(long, default_value = "eth0")]
    interface: String,
    /// IP MTU
    #[arg(long, default_value = "1500")]
    mtu: Bytes,
    /// Simulated time for the prediction
    #[arg(long, default_value = "2s")]
    duration: Nanos,
    /// Print only this: the scenario file, the tc lines, the DDS files or the PTP files
    #[arg(long, value_enum)]
    emit: Option<PlanEmit>,
    /// Write plan.toml, tc.sh, the DDS and PTP files into this directory
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    #[command(flatten)]
    limits: super::limit_args::LimitArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
enum Format {
    Table,
    Json,
}

#[derive(Args, Debug)]
struct FormatArg {
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

#[derive(Args, Debug)]
struct TasArgs {
    /// Physical link rate R
    #[arg(long, default_value = "2.5G")]
    link_rate: Rate,
    /// Cycle period P
    #[arg(long, default_value = "500us")]
    cycle: Nanos,
    /// Share D of the cycle the DDS class's gate is open
    #[arg(long, default_value = "50%")]
    open: Percent,
    /// Serialized DDS sample X (CDR incl. encapsulation and ROS header; default: the thesis image,
    /// 2764800 pixel bytes + 48 bytes of sensor_msgs/Image header)
    #[arg(long, default_value = "2764848")]
    message_bytes: Bytes,
    /// IP MTU
    #[arg(long, default_value = "1500")]
    mtu: Bytes,
    /// DATA_FRAG payload size (thesis: 64 KB = 64000; Cyclone's default is 1344)
    #[arg(long, default_value = "64000")]
    dds_fragment_bytes: Bytes,
    /// Largest RTPS message (UDP payload); default: one fragment per datagram up to 65507
    #[arg(long)]
    max_message_bytes: Option<Bytes>,
    /// Untagged frames (the thesis used VLAN interfaces: tagged is the default)
    #[arg(long)]
    no_vlan: bool,
    /// Leave INFO_TS out of each RTPS message
    #[arg(long)]
    no_info_ts: bool,
    /// Add INFO_DST to each RTPS message (unicast to one reader)
    #[arg(long)]
    info_dst: bool,
    /// Gate phases at which the message is released (evenly spread over the cycle)
    #[arg(long, default_value = "1000")]
    phases: u32,
    /// Fit the host parameters (stack time before the first frame, writer pacing, receiver completion)
    /// and the DDS layout from a measured no-gate lab run directory (captures + ground truth), and
    /// predict with and without them
    #[arg(long, value_name = "RUN_DIR")]
    calibrate: Option<PathBuf>,
    /// With --calibrate: the topic to fit (default: the largest samples crossing hosts)
    #[arg(long, requires = "calibrate")]
    topic: Option<String>,
    /// With --calibrate: the writer's socket send buffer (default 212992, Linux net.core.wmem_default)
    #[arg(long, requires = "calibrate")]
    socket_buffer: Option<Bytes>,
    /// With --calibrate: predict every configuration of thesis Table 4.6 instead of --cycle/--open
    #[arg(long, requires = "calibrate")]
    table_4_6: bool,
    /// With --calibrate: check the calibration out of sample on other no-gate lab runs (another
    /// link rate, say): each run's mean DDS layer and write -> take latency, measured and predicted
    /// from the calibrated host times with that run's own link and layout
    #[arg(long, requires = "calibrate", value_name = "RUN_DIR")]
    validate: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Caps for reading the --calibrate run's captures
    #[command(flatten)]
    limits: super::limit_args::LimitArgs,
}

#[derive(Args, Debug)]
struct SimArgs {
    /// Scenario TOML file (format: docs/tsn.md)
    scenario: PathBuf,
    /// Seed for the random phases of flows without `offset` (default: the file's `seed`, else 1)
    #[arg(long)]
    seed: Option<u64>,
    /// Override the scenario's duration
    #[arg(long)]
    duration: Option<Nanos>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

#[derive(Args, Debug)]
struct CbsArgs {
    /// Port transmit rate (PTR)
    #[arg(long)]
    port_rate: Rate,
    /// Largest frame on the port, incl. preamble and IFG (MFS_0; 1542 for MTU 1500 + VLAN)
    #[arg(long)]
    max_frame_bytes: Bytes,
    /// NAME:reserved=RATE,max-frame=BYTES; repeat, most urgent class first
    #[arg(long = "class", required = true)]
    classes: Vec<String>,
    /// Device for the printed tc lines (a Linux interface name; quoted for the shell)
    #[arg(long, default_value = "eth0")]
    dev: String,
    /// mqprio handle (1-4 hex digits); class i (0-based, in the order given) gets parent HANDLE:(i+1)
    #[arg(long, default_value = "100")]
    handle: String,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
enum Emit {
    Tc,
    Dds,
    Ptp,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq)]
enum ModeArg {
    Software,
    TxtimeAssist,
    FullOffload,
}

#[derive(Args, Debug)]
struct ConfigArgs {
    scenario: PathBuf,
    #[arg(long, value_enum)]
    emit: Emit,
    /// taprio mode for every port with a gate control list (default: each port's `gcl.mode`)
    #[arg(long, value_enum)]
    taprio_mode: Option<ModeArg>,
    /// Write the files into this directory instead of printing them
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(args: TsnArgs) -> anyhow::Result<i32> {
    match args.cmd {
        Cmd::Tas(a) => tas_cmd(a),
        Cmd::Simulate(a) => sim_cmd(a),
        Cmd::Cbs(a) => cbs_cmd(a),
        Cmd::Config(a) => config_cmd(a),
        Cmd::SrClasses(f) => sr_cmd(f.format),
        Cmd::Check(a) => check_cmd(a),
        Cmd::Plan(a) => plan_cmd(a),
    }
}

fn check_cmd(a: CheckArgs) -> anyhow::Result<i32> {
    use ddscope_core::session;
    use ddscope_tsn::check::{self, CheckOptions, Judge};
    let sc = Scenario::load(&a.configuration).map_err(|e| crate::common::input(format!("{e:#}")))?;
    let found = session::expand_run(&a.inputs, &[]).map_err(crate::common::session_error)?;
    let mut latency = session::LatencyOptions { offsets: a.offsets.iter().map(|o| (o.name.clone(), o.ns)).collect(), ..Default::default() };
    latency.submessage_rows = false;
    super::limit_args::apply(&a.limits.resolve()?, &mut latency);
    let opts = CheckOptions {
        clock_offset_ns: a.clock_offset,
        gate_tolerance_ns: a.gate_tolerance as u64,
        judge: match a.judge {
            JudgeArg::Max => Judge::Max,
            JudgeArg::P99 => Judge::P99,
        },
        latency,
    };
    let report = check::check(&sc, found.captures, &found.truth, &opts).map_err(|e| match e {
        session::SessionError::UnknownCapture { .. } => crate::common::usage(format!("--offset: {e}")),
        e => crate::common::session_error(e),
    })?;
    for n in &report.notes {
        eprintln!("tsn check: {n}");
    }
    match a.format {
        Format::Json => {
            println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "ok": report.ok(), "report": &report }))?);
        }
        Format::Table => {
            for l in report.lines() {
                println!("{l}");
            }
            println!("{}", if report.ok() { "tsn check: PASS" } else { "tsn check: FAIL" });
        }
    }
    Ok(if report.ok() { 0 } else { 1 })
}

fn print_json<T: serde::Serialize>(v: &T) -> anyhow::Result<i32> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(0)
}

fn tas_cmd(a: TasArgs) -> anyhow::Result<i32> {
    let inp = TasInput {
        rate_bps: a.link_rate.0,
        cycle_ns: a.cycle.0,
        open: a.open.0,
        message_bytes: a.message_bytes.0,
        framing: Framing { vlan: !a.no_vlan, mtu: a.mtu.0 },
        rtps: RtpsOptions {
            fragment_bytes: Some(a.dds_fragment_bytes.0),
            max_message_bytes: a.max_message_bytes.map(|b| b.0),
            info_ts: !a.no_info_ts,
            info_dst: a.info_dst,
        },
        phases: a.phases,
    };
    if let Some(dir) = &a.calibrate {
        return tas_calibrated(&a, &inp, dir);
    }
    let r = tas::predict(&inp).map_err(crate::common::usage)?;
    if a.format == Format::Json {
        return print_json(&r);
    }
    let w = &r.wire;
    let mut o = String::new();
    let _ = writeln!(o, "TAS prediction: {} bytes at {}, cycle {}, open {}", r.message_bytes, a.link_rate, a.cycle, a.open);
    let _ = writeln!(o, "\nThesis Eq. 3.4 (X = {} bytes, no overheads)", r.message_bytes);
    let _ = writeln!(o, "  bandwidth R*D          {:.3} Mbit/s", r.formula.bandwidth_bps / 1e6);
    let _ = writeln!(o, "  T_transmit             {:.3} ms", r.formula.t_transmit_ms);
    let _ = writeln!(o, "  N_cycles               {}", r.formula.n_cycles);
    let _ = writeln!(o, "  T_arrive               {:.2} ms", r.formula_ms);
    let _ = writeln!(o, "\nFrame-level model (first fragment handed to the NIC -> last bit received)");
    let _ = writeln!(o, "  predicted mean         {:.3} ms  over {} gate phases", r.predicted_mean_ms, r.phases);
    let _ = writeln!(o, "  predicted min / max    {:.3} / {:.3} ms  (worst phase {} ns after the window opens)", r.predicted_min_ms, r.predicted_max_ms, r.worst_phase_ns);
    let _ = writeln!(o, "  released at window open {:.3} ms, {} windows, {:.3} ms lost to guard bands", r.at_window_open.latency_ms, r.at_window_open.windows_used, r.at_window_open.guard_band_lost_ms);
    let _ = writeln!(o, "  mean windows used      {:.2}", r.mean_windows_used);
    let _ = writeln!(o, "  mean guard-band loss   {:.3} ms", r.mean_guard_band_lost_ms);
    let _ = writeln!(o, "  no gates (back to back) {:.3} ms", r.serialisation_ms);
    let _ = writeln!(o, "\nWire breakdown (MTU {}, {}, DATA_FRAG {} B)", r.mtu, if r.vlan { "VLAN-tagged" } else { "untagged" }, r.dds_fragment_bytes);
    let _ = writeln!(o, "  sample (payload)       {:>10} B", w.payload_bytes);
    let _ = writeln!(o, "  RTPS overhead          {:>10} B  ({} datagrams, {} submessages; header 20, INFO_TS 12, DATA_FRAG 36 each)", w.rtps_overhead_bytes, w.datagrams, w.rtps_submessages);
    let _ = writeln!(o, "  UDP headers            {:>10} B", w.udp_header_bytes);
    let _ = writeln!(o, "  IPv4 headers           {:>10} B  ({} fragments)", w.ip_header_bytes, w.frames);
    let _ = writeln!(o, "  Ethernet overhead      {:>10} B  (preamble+SFD 8, MAC 14, VLAN 4, FCS 4, IFG 12 per frame)", w.ethernet_overhead_bytes);
    let _ = writeln!(o, "  padding                {:>10} B", w.padding_bytes);
    let _ = writeln!(o, "  on the wire            {:>10} B  (+{:.2} % over the sample)", w.wire_bytes, (w.wire_bytes as f64 / w.payload_bytes as f64 - 1.0) * 100.0);
    print!("{o}");
    Ok(0)
}

#[derive(serde::Serialize)]
struct CalibratedReport<'a> {
    calibration: &'a ddscope_tsn::calibrate::Calibration,
    link_rate_bps: u64,
    /// The run itself (no gate): measured mean vs the three predictions.
    no_gate: NoGate,
    rows: Vec<tas::CalibratedRow>,
    /// `--validate`: other runs predicted with this calibration's host times.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    validation: Vec<Validation>,
}

/// Another run's no-gate means, measured and predicted out of sample.
#[derive(serde::Serialize)]
struct Validation {
    run: String,
    link_rate_bps: u64,
    shaper_burst_bytes: Option<u64>,
    samples_used: u64,
    /// Errors are against the medians; the means are shown beside.
    measured_dds_layer_median_ms: f64,
    measured_write_to_take_median_ms: f64,
    measured_dds_layer_ms: f64,
    predicted_dds_layer_ms: f64,
    dds_layer_error_pct: f64,
    measured_write_to_take_ms: f64,
    predicted_write_to_take_ms: f64,
    write_to_take_error_pct: f64,
    /// The hosts' share of write -> take (median write -> take minus median DDS layer) in this run
    /// and in the calibration's run. No model fitted on one run knows the other's: the write -> take
    /// error is the DDS-layer error plus about their difference.
    stack_median_ms: f64,
    calibration_stack_median_ms: f64,
}

/// DDS layer (thesis 3.2.5) and write -> take, each measured and predicted.
#[derive(serde::Serialize)]
struct NoGate {
    /// Errors are against the medians (calibrate.rs `Measured`); the means are shown beside.
    measured_dds_layer_median_ms: f64,
    measured_write_to_take_median_ms: f64,
    measured_dds_layer_ms: f64,
    uncalibrated_ms: f64,
    run_layout_ms: f64,
    calibrated_dds_layer_ms: f64,
    calibrated_dds_layer_error_pct: f64,
    measured_write_to_take_ms: f64,
    calibrated_write_to_take_ms: f64,
    calibrated_write_to_take_error_pct: f64,
}

fn tas_calibrated(a: &TasArgs, inp: &TasInput, dir: &std::path::Path) -> anyhow::Result<i32> {
    use ddscope_tsn::calibrate::{self, CalibrateOptions};
    let limits = a.limits.resolve()?;
    let opt = CalibrateOptions { topic: a.topic.clone(), link_rate_bps: None, socket_buffer: a.socket_buffer.map(|b| b.0), decoder: limits.decoder, samples: limits.samples };
    let cal = calibrate::calibrate(dir, &opt).map_err(crate::common::input)?;
    let configs: Vec<(String, u64, f64)> = if a.table_4_6 {
        tas::TABLE_4_6.iter().map(|(n, c, o)| (n.to_string(), *c, *o)).collect()
    } else {
        vec![(format!("TAS-{}-{}", a.open, a.cycle), a.cycle.0, a.open.0)]
    };
    let rows = tas::calibrated_rows(inp, &cal, &configs).map_err(|e| anyhow!(e))?;
    // The run itself at its own rate, without gates.
    let run_frames = cal.frames().map_err(|e| anyhow!(e))?;
    let mut at_run = inp.clone();
    at_run.rate_bps = cal.link_rate_bps;
    at_run.open = 1.0;
    let unc = tas::predict(&at_run).map_err(|e| anyhow!(e))?.predicted_mean_ms;
    // the run's own link: the lab's shaper when run.json names one
    let sb = cal.shaper_burst_bytes;
    let ideal = tas::predict_with_host(cal.link_rate_bps, inp.cycle_ns, 1.0, &run_frames, Default::default(), 0, 1, sb).map_err(|e| anyhow!(e))?;
    let calp = tas::predict_with_host(cal.link_rate_bps, inp.cycle_ns, 1.0, &run_frames, cal.dds_layer_host(), cal.socket_buffer_bytes, 1, sb).map_err(|e| anyhow!(e))?;
    let calw = tas::predict_with_host(cal.link_rate_bps, inp.cycle_ns, 1.0, &run_frames, cal.host, cal.socket_buffer_bytes, 1, sb).map_err(|e| anyhow!(e))?;
    let m = cal.measured.dds_layer_mean_ms;
    let mw = cal.measured.latency_mean_ms;
    let rep = CalibratedReport {
        calibration: &cal,
        link_rate_bps: inp.rate_bps,
        no_gate: NoGate {
            measured_dds_layer_median_ms: cal.measured.dds_layer_median_ms,
            measured_write_to_take_median_ms: cal.measured.latency_median_ms,
            measured_dds_layer_ms: m,
            uncalibrated_ms: unc,
            run_layout_ms: ideal.mean_ms,
            calibrated_dds_layer_ms: calp.mean_ms,
            calibrated_dds_layer_error_pct: (calp.mean_ms - cal.measured.dds_layer_median_ms) / cal.measured.dds_layer_median_ms * 100.0,
            measured_write_to_take_ms: mw,
            calibrated_write_to_take_ms: calw.mean_ms,
            calibrated_write_to_take_error_pct: (calw.mean_ms - cal.measured.latency_median_ms) / cal.measured.latency_median_ms * 100.0,
        },
        rows,
        validation: vec![],
    };
    let mut rep = rep;
    for other in &a.validate {
        // the other run's link and layout (as measured there); the host times of this calibration
        let o = calibrate::calibrate(other, &CalibrateOptions { topic: Some(cal.topic.clone()), link_rate_bps: None, ..opt.clone() })
            .map_err(|e| anyhow!(e))?;
        let frames = o.frames().map_err(|e| anyhow!(e))?;
        let (rate, sb) = (o.link_rate_bps, o.shaper_burst_bytes);
        let dds = tas::predict_with_host(rate, inp.cycle_ns, 1.0, &frames, cal.dds_layer_host(), cal.socket_buffer_bytes, 1, sb).map_err(|e| anyhow!(e))?;
        let w2t = tas::predict_with_host(rate, inp.cycle_ns, 1.0, &frames, cal.host, cal.socket_buffer_bytes, 1, sb).map_err(|e| anyhow!(e))?;
        let (md, mw) = (o.measured.dds_layer_median_ms, o.measured.latency_median_ms);
        rep.validation.push(Validation {
            run: o.run.clone(),
            link_rate_bps: rate,
            shaper_burst_bytes: sb,
            samples_used: o.samples_used,
            measured_dds_layer_median_ms: md,
            measured_write_to_take_median_ms: mw,
            measured_dds_layer_ms: o.measured.dds_layer_mean_ms,
            predicted_dds_layer_ms: dds.mean_ms,
            dds_layer_error_pct: (dds.mean_ms - md) / md * 100.0,
            measured_write_to_take_ms: o.measured.latency_mean_ms,
            predicted_write_to_take_ms: w2t.mean_ms,
            write_to_take_error_pct: (w2t.mean_ms - mw) / mw * 100.0,
            stack_median_ms: mw - md,
            calibration_stack_median_ms: cal.measured.latency_median_ms - cal.measured.dds_layer_median_ms,
        });
    }
    if a.format == Format::Json {
        return print_json(&rep);
    }
    let c = &cal;
    let l = &c.layout;
    let me = &c.measured;
    let mut o = String::new();
    let _ = writeln!(o, "Calibration from {} ({} {} -> {}, {} samples used)", c.run, c.topic, c.sender, c.receiver, c.samples_used);
    for (why, n) in &c.excluded {
        let _ = writeln!(o, "  excluded: {n} {why}");
    }
    let _ = writeln!(o, "  link rate {}, layout: {} B samples, {} B fragments, {} per RTPS message (<= {} B seen; {}), {:.1} datagrams / {:.1} frames per sample (model {} / {})",
        Rate(c.link_rate_bps), l.sample_bytes, l.fragment_bytes, l.fragments_per_datagram, l.max_message_bytes, l.vendor, l.datagrams_per_sample, l.frames_per_sample, l.model_datagrams, l.model_frames);
    let _ = writeln!(o, "\nMeasured (means per sample)");
    let _ = writeln!(o, "  latency publish -> receive  {:.3} ms  (std {:.3}, min {:.3}, max {:.3})", me.latency_mean_ms, me.latency_std_ms, me.latency_min_ms, me.latency_max_ms);
    let _ = writeln!(o, "  publish -> first frame      {:.3} ms", me.pre_mean_ms);
    let _ = writeln!(o, "  first -> last frame         {:.3} ms  (min {:.3}; the link alone: {:.3})", me.span_mean_ms, me.span_min_ms, c.link_span_ms);
    let _ = writeln!(o, "  DDS layer (3.2.5)           {:.3} ms  (first frame at the sender -> last at the receiver)", me.dds_layer_mean_ms);
    let _ = writeln!(o, "  sender -> receiver capture  {:.3} ms", me.transit_mean_ms);
    let _ = writeln!(o, "  last frame -> receive       {:.3} ms", me.post_mean_ms);
    let _ = writeln!(o, "  gap between IP fragments    {:.2} us  (a full frame at the link rate: {:.2} us)", me.frame_gap_mean_us, me.frame_wire_us);
    let _ = writeln!(o, "  gap between datagrams       {:.2} us mean, {:.2} us median; datagram period {:.2} us", me.datagram_gap_mean_us, me.datagram_gap_p50_us, me.datagram_period_mean_us);
    let _ = writeln!(o, "\nFitted host parameters");
    let _ = writeln!(o, "  stack before first frame    {:.3} ms", c.pre_ms);
    let _ = writeln!(o, "  writer pacing               {:.2} us per datagram{}", c.datagram_us, c.writer_rate_bps.map(|r| format!(" ({:.2} Gbit/s of wire bytes)", r / 1e9)).unwrap_or_default());
    let _ = writeln!(o, "  receiver completion         {:.3} ms", c.post_ms);
    let _ = writeln!(o, "  socket buffer               {} B (not identifiable without gates)", c.socket_buffer_bytes);
    for n in &c.notes {
        let _ = writeln!(o, "  note: {n}");
    }
    let ng = &rep.no_gate;
    let md = ng.measured_dds_layer_median_ms;
    let _ = writeln!(o, "\nThe run itself (no gate, {}), DDS layer: measured {:.3} ms median ({:.3} mean); uncalibrated {:.3} ms ({:+.1} %), run layout {:.3} ms ({:+.1} %), calibrated {:.3} ms ({:+.2} %)",
        Rate(c.link_rate_bps), md, m, ng.uncalibrated_ms, (ng.uncalibrated_ms - md) / md * 100.0, ng.run_layout_ms, (ng.run_layout_ms - md) / md * 100.0, ng.calibrated_dds_layer_ms, ng.calibrated_dds_layer_error_pct);
    let _ = writeln!(o, "  write -> take: measured {:.3} ms median ({:.3} mean), calibrated {:.3} ms ({:+.2} %)", ng.measured_write_to_take_median_ms, mw, ng.calibrated_write_to_take_ms, ng.calibrated_write_to_take_error_pct);
    let _ = writeln!(o, "\nPredicted DDS latency at {} (ms; mean over {} gate phases)", a.link_rate, inp.phases);
    let _ = writeln!(o, "{:<16} {:>8} {:>13} {:>11} {:>11} {:>17} {:>14}", "configuration", "Eq. 3.4", "uncalibrated", "run layout", "calibrated", "calibrated min-max", "write->take");
    for r in &rep.rows {
        let _ = writeln!(o, "{:<16} {:>8.2} {:>13.3} {:>11.3} {:>11.3} {:>8.3}-{:<8.3} {:>14.3}", r.configuration, r.formula_ms, r.uncalibrated_mean_ms, r.run_layout_mean_ms, r.calibrated.mean_ms, r.calibrated.min_ms, r.calibrated.max_ms, r.calibrated_write_to_take.mean_ms);
    }
    let _ = writeln!(o, "\nEq. 3.4 with X = the run's sample; uncalibrated: the flags' layout ({} B DATA_FRAGs), ideal host; run layout: the run's layout, ideal host; \
calibrated: the run's layout and writer pacing (DDS layer, thesis 3.2.5); write->take: plus the stack time before the first frame and receiver completion", inp.rtps.fragment_bytes.unwrap_or(0));
    if !rep.validation.is_empty() {
        let _ = writeln!(o, "\nOut of sample (other no-gate runs, their own link and layout, this calibration's host times)");
        for v in &rep.validation {
            let _ = writeln!(o, "  {} ({}{}; {} samples): DDS layer measured {:.3} ms median ({:.3} mean), predicted {:.3} ms ({:+.2} %); \
write -> take measured {:.3} ms median ({:.3} mean), predicted {:.3} ms ({:+.2} %); \
the hosts' stack time {:.3} ms median there, {:.3} ms in the calibration's run",
                v.run, Rate(v.link_rate_bps), v.shaper_burst_bytes.map(|b| format!(", tbf bucket {b} B")).unwrap_or_default(), v.samples_used,
                v.measured_dds_layer_median_ms, v.measured_dds_layer_ms, v.predicted_dds_layer_ms, v.dds_layer_error_pct,
                v.measured_write_to_take_median_ms, v.measured_write_to_take_ms, v.predicted_write_to_take_ms, v.write_to_take_error_pct,
                v.stack_median_ms, v.calibration_stack_median_ms);
        }
    }
    print!("{o}");
    Ok(0)
}

fn plan_cmd(a: PlanArgs) -> anyhow::Result<i32> {
    use ddscope_tsn::plan::{self, PlanOptions};
    if !(a.margin >= 1.0 && a.margin.is_finite()) {
        return Err(crate::common::usage(format!("--margin {} must be at least 1", a.margin)));
    }
    if a.duration.0 == 0 {
        return Err(crate::common::usage("--duration must be positive"));
    }
    let limits = a.limits.resolve()?;
    let m = plan::measure(&a.captures, limits.decoder, limits.samples).map_err(crate::common::input)?;
    let opt = PlanOptions {
        link_rate_bps: a.link_rate.0,
        max_cycle_ns: a.max_cycle.0,
        margin: a.margin,
        port: m.topics.first().map(|t| t.capture.clone()).unwrap_or_else(|| "sender".into()),
        interface: a.interface.clone(),
        mtu: a.mtu.0,
        duration_ns: a.duration.0,
        seed: 1,
    };
    let p = plan::propose(&m, &opt).map_err(|e| anyhow!(e))?;
    let sc = p.scenario.as_ref().ok_or_else(|| anyhow!("the plan has no scenario"))?;
    let tc = config::tc(sc, None);
    let mut files: Vec<(String, String)> = vec![("plan.toml".into(), p.scenario_toml.clone()), ("tc.sh".into(), tc.clone())];
    files.push(("cyclonedds.xml".into(), config::cyclone_xml(sc)));
    files.push(("dds-priority.sh".into(), config::priority_script(sc)));
    files.extend(config::ptp(sc));
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for (name, body) in &files {
            let path = dir.join(name);
            std::fs::write(&path, body).with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    match a.emit {
        Some(PlanEmit::Scenario) => print!("{}", p.scenario_toml),
        Some(PlanEmit::Tc) => print!("{tc}"),
        Some(PlanEmit::Dds) => {
            for (n, b) in files.iter().filter(|(n, _)| n == "cyclonedds.xml" || n == "dds-priority.sh") {
                println!("# ---- {n}\n{b}");
            }
        }
        Some(PlanEmit::Ptp) => {
            for (n, b) in files.iter().filter(|(n, _)| n.starts_with("ptp")) {
                println!("# ---- {n}\n{b}");
            }
        }
        None if a.format == Format::Json => {
            #[derive(serde::Serialize)]
            struct Out<'a> {
                measured: &'a plan::Measurement,
                plan: &'a plan::Plan,
                scenario_toml: &'a str,
                tc: &'a str,
            }
            print_json(&Out { measured: &m, plan: &p, scenario_toml: &p.scenario_toml, tc: &tc })?;
        }
        None => {
            let mut o = String::new();
            let _ = writeln!(o, "Measured traffic ({})", m.captures.join(", "));
            let _ = writeln!(o, "{:<28} {:>9} {:>10} {:>12} {:>8} {:>9} {:>10}", "topic", "rate Hz", "period ms", "bytes/sample", "frames", "datagrams", "fragment");
            for t in &m.topics {
                let _ = writeln!(o, "{:<28} {:>9.3} {:>10.3} {:>12} {:>8} {:>9} {:>10}", truncate(&t.topic, 28), t.rate_hz, t.period_ms, t.sample_bytes, t.frames_per_sample, t.datagrams_per_sample, t.fragment_bytes.map(|f| f.to_string()).unwrap_or_else(|| "-".into()));
            }
            for (why, n) in &m.skipped {
                let _ = writeln!(o, "  skipped: {why}: {n}");
            }
            let _ = writeln!(o, "\nProposed gate control list at {}: cycle {} us", a.link_rate, p.cycle_ns as f64 / 1e3);
            let _ = writeln!(o, "  TC2 (PCP 6, control)   {:>9.3} us   (utilisation {:.4} %)", p.control_window_ns as f64 / 1e3, p.control_utilisation * 100.0);
            let _ = writeln!(o, "  TC1 (PCP 5, bulk DDS)  {:>9.3} us   (utilisation {:.2} %, margin {})", p.bulk_window_ns as f64 / 1e3, p.bulk_utilisation * 100.0, a.margin);
            let _ = writeln!(o, "  TC0 (best effort)      {:>9.3} us", p.best_effort_window_ns as f64 / 1e3);
            let _ = writeln!(o, "\nPredicted by the simulator ({} s)", a.duration.0 as f64 / 1e9);
            let _ = writeln!(o, "{:<28} {:>8} {:>4} {:>12} {:>12} {:>12} {:>8}  verdict", "topic", "class", "pcp", "mean ms", "max ms", "deadline ms", "late");
            for t in &p.topics {
                let _ = writeln!(o, "{:<28} {:>8} {:>4} {:>12.3} {:>12.3} {:>12.3} {:>8}  {}", truncate(&t.topic, 28), t.class, t.pcp, t.predicted_mean_ms, t.predicted_max_ms, t.deadline_ms, t.deadline_misses, if t.meets_deadline { "meets its deadline" } else { "MISSES its deadline" });
            }
            if p.feasible {
                let _ = writeln!(o, "\nEvery topic meets its deadline (= its period).");
            } else {
                let _ = writeln!(o, "\nCannot meet every deadline:");
                for pr in &p.problems {
                    let _ = writeln!(o, "  {pr}");
                }
            }
            let _ = writeln!(o, "\nEmit with --emit scenario|tc|dds|ptp, or write all with --out DIR{}", a.out.as_ref().map(|d| format!(" (written to {})", d.display())).unwrap_or_default());
            print!("{o}");
        }
    }
    Ok(if p.feasible { 0 } else { 3 })
}

fn sim_cmd(a: SimArgs) -> anyhow::Result<i32> {
    let mut sc = Scenario::load(&a.scenario).map_err(|e| crate::common::input(format!("{e:#}")))?;
    if let Some(d) = a.duration {
        if d.0 == 0 || d.0 > scenario::MAX_DURATION_NS {
            return Err(crate::common::usage(format!("--duration {d}: must lie between 0 and 24h")));
        }
        sc.duration = d;
    }
    let seed = a.seed.unwrap_or(sc.seed);
    let r = scenario::try_simulate(&sc, seed).map_err(|e| crate::common::input(format!("{}: {e}", a.scenario.display())))?;
    if a.format == Format::Json {
        return print_json(&r);
    }
    let mut o = String::new();
    let _ = writeln!(o, "Scenario {:?} ({}), {} s simulated, seed {}, {} events", r.scenario, r.file, r.duration_s, r.seed, r.events);
    let _ = writeln!(
        o,
        "\n{:<16} {:>3} {:>2} {:>4} {:>7} {:>7} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}  {}",
        "flow", "pcp", "tc", "hops", "sent", "recv", "lost", "mean ms", "std ms", "p50 ms", "p99 ms", "max ms", "|jit| p99", "|jit| max", "misses", "SR verdict"
    );
    for f in &r.flows {
        let sr = match &f.sr {
            None => "-".to_string(),
            Some(v) => match (v.latency_budget_ms, v.jitter_budget_us) {
                (Some(l), Some(j)) => format!("{} {} (<= {:.3} ms, <= {:.1} us over {} hop{})", v.class.name(), v.verdict, l, j, v.hops, if v.hops == 1 { "" } else { "s" }),
                _ => format!("{} {}", v.class.name(), v.verdict),
            },
        };
        let _ = writeln!(
            o,
            "{:<16} {:>3} {:>2} {:>4} {:>7} {:>7} {:>5} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>6.1} us {:>6.1} us {:>6}  {}",
            truncate(&f.name, 16),
            f.pcp,
            f.traffic_class,
            f.hops,
            f.released,
            f.delivered,
            f.lost,
            f.latency.mean_ms,
            f.latency.std_ms,
            f.latency.p50_ms,
            f.latency.p99_ms,
            f.latency.max_ms,
            f.jitter.p99_abs_us,
            f.jitter.max_abs_us,
            f.deadline_misses,
            sr
        );
    }
    let _ = writeln!(o, "\n{:<16} {:>10} {:>8} {:>10} {:>7}  max queue (frames per TC)", "port", "rate", "util", "frames", "drops");
    for p in &r.ports {
        let _ = writeln!(
            o,
            "{:<16} {:>10} {:>7.1}% {:>10} {:>7}  {:?}",
            truncate(&p.name, 16),
            Rate(p.link_rate_bps).to_string(),
            p.utilisation * 100.0,
            p.frames,
            p.drops,
            p.max_queue_frames
        );
    }
    let _ = writeln!(o, "\nlatency: first frame handed to the first port -> last bit at the end of the path; jitter: |d(X) - d(X-1)| (Bosk et al. Eq. 10); misses: latency > deadline (default: the period)");
    print!("{o}");
    Ok(0)
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

fn parse_class(s: &str) -> anyhow::Result<CbsClassInput> {
    let (name, rest) = s.split_once(':').ok_or_else(|| crate::common::usage(format!("--class {s:?}: expected NAME:reserved=RATE,max-frame=BYTES")))?;
    let mut reserved = None;
    let mut mfs = None;
    for kv in rest.split(',') {
        let (k, v) = kv.split_once('=').ok_or_else(|| crate::common::usage(format!("--class {s:?}: {kv:?} is not key=value")))?;
        match k.trim() {
            "reserved" => reserved = Some(v.parse::<Rate>().with_context(|| format!("--class {s:?}: reserved"))?),
            "max-frame" | "max_frame" => mfs = Some(v.parse::<Bytes>().with_context(|| format!("--class {s:?}: max-frame"))?),
            other => return Err(crate::common::usage(format!("--class {s:?}: unknown key {other:?} (reserved, max-frame)"))),
        }
    }
    Ok(CbsClassInput {
        name: name.to_string(),
        reserved_bps: reserved.ok_or_else(|| crate::common::usage(format!("--class {s:?}: reserved=RATE missing")))?.0,
        max_frame_bytes: mfs.ok_or_else(|| crate::common::usage(format!("--class {s:?}: max-frame=BYTES missing")))?.0,
    })
}

fn cbs_cmd(a: CbsArgs) -> anyhow::Result<i32> {
    // The printed lines are run as root: a real interface name and a tc handle, nothing else.
    ddscope_tsn::shell::check_ifname(&a.dev).map_err(|e| crate::common::usage(format!("--dev: {e}")))?;
    if a.handle.is_empty() || a.handle.len() > 4 || !a.handle.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(crate::common::usage(format!("--handle {:?}: a tc major handle is 1 to 4 hexadecimal digits", ddscope_traffic::text::excerpt(&a.handle, 40))));
    }
    let classes = a.classes.iter().map(|c| parse_class(c)).collect::<anyhow::Result<Vec<_>>>()?;
    let params = cbs::compute(a.port_rate.0, a.max_frame_bytes.0, &classes).map_err(crate::common::usage)?;
    let lines: Vec<String> =
        params.iter().enumerate().map(|(i, p)| cbs::tc_line(&a.dev, &format!("{}:{}", a.handle, i + 1), p, false)).collect();
    if a.format == Format::Json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            port_rate_bps: u64,
            max_frame_bytes: u64,
            classes: &'a [cbs::CbsClassParams],
            tc: &'a [String],
        }
        return print_json(&Out { port_rate_bps: a.port_rate.0, max_frame_bytes: a.max_frame_bytes.0, classes: &params, tc: &lines });
    }
    println!("CBS on a {} port, largest frame {} B (Bosk et al. Eq. 2-6; classes most urgent first)", a.port_rate, a.max_frame_bytes.0);
    println!("{:<6} {:>12} {:>12} {:>10} {:>10}   {:>14} {:>12}", "class", "idleslope", "sendslope", "hicredit", "locredit", "interference", "exact hi/lo");
    println!("{:<6} {:>12} {:>12} {:>10} {:>10}   {:>14} {:>12}", "", "kbit/s", "kbit/s", "bytes", "bytes", "us (Eq. 6)", "bytes");
    for p in &params {
        println!(
            "{:<6} {:>12} {:>12} {:>10} {:>10}   {:>14.3} {:>6.2}/{:.2}",
            p.name, p.idleslope, p.sendslope, p.hicredit, p.locredit, p.interference_us, p.exact_hicredit_bytes, p.exact_locredit_bytes
        );
    }
    println!("\n# under mqprio (e.g. tc qdisc replace dev {} parent root handle {}: mqprio num_tc … hw 0):", a.dev, a.handle);
    for l in lines {
        println!("{l}");
    }
    Ok(0)
}

fn config_cmd(a: ConfigArgs) -> anyhow::Result<i32> {
    let sc = Scenario::load(&a.scenario).map_err(|e| crate::common::input(format!("{e:#}")))?;
    let mode = a.taprio_mode.map(|m| match m {
        ModeArg::Software => TaprioMode::Software,
        ModeArg::TxtimeAssist => TaprioMode::TxtimeAssist,
        ModeArg::FullOffload => TaprioMode::FullOffload,
    });
    let files: Vec<(String, String)> = match a.emit {
        Emit::Tc => vec![("tc.sh".into(), config::tc(&sc, mode))],
        Emit::Dds => vec![("cyclonedds.xml".into(), config::cyclone_xml(&sc)), ("dds-priority.sh".into(), config::priority_script(&sc))],
        Emit::Ptp => config::ptp(&sc),
    };
    match a.out {
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
            for (name, body) in &files {
                let p = dir.join(name);
                std::fs::write(&p, body).with_context(|| format!("{}: cannot write", p.display()))?;
                eprintln!("wrote {}", p.display());
            }
        }
        None => {
            for (i, (name, body)) in files.iter().enumerate() {
                if files.len() > 1 {
                    println!("{}# ==> {name} <==", if i > 0 { "\n" } else { "" });
                }
                print!("{body}");
            }
        }
    }
    Ok(0)
}

fn sr_cmd(format: Format) -> anyhow::Result<i32> {
    let classes = [SrClass::A, SrClass::B, SrClass::C, SrClass::D, SrClass::Be];
    if format == Format::Json {
        let v: Vec<serde_json::Value> = classes
            .iter()
            .map(|c| {
                let b = c.bounds_ns();
                serde_json::json!({"class": c.name(), "pcp": c.pcp(), "max_latency_ms": b.map(|b| b.0 as f64 / 1e6),
                    "max_jitter_us": b.map(|b| b.1 as f64 / 1e3), "hops": ddscope_tsn::sr::TABLE1_HOPS})
            })
            .collect();
        return print_json(&v);
    }
    println!("SR classes, Bosk et al. Table 1 (bounds over {} hops)", ddscope_tsn::sr::TABLE1_HOPS);
    println!("{:<6} {:>4} {:>12} {:>12}", "class", "PCP", "latency", "jitter");
    for c in classes {
        match c.bounds_ns() {
            Some((l, j)) => println!("{:<6} {:>4} {:>9} ms {:>9} us", c.name(), c.pcp(), l as f64 / 1e6, j as f64 / 1e3),
            None => println!("{:<6} {:>4} {:>12} {:>12}", c.name(), c.pcp(), "none", "none"),
        }
    }
    Ok(0)
}
