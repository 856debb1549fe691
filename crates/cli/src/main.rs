//! `ddscope` — one binary, one verb per task.

mod cmd;
mod common;
mod progress;
mod closing;
mod args;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "ddscope",
    version,
    about = "Top-down latency profiling and online monitoring of distributed ROS 2 / DDS systems",
    long_about = None,
    after_help = "Exit codes: 0 done; 1 a check failed (tsn check, --fail-on-incidents, a lab run's checks); \
                  2 an input could not be read or used; 64 the command line is wrong; 70 anything else stopped the run.",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// One row per RTPS submessage of a capture (table, CSV, JSON Lines, Parquet)
    Dissect(cmd::dissect::DissectArgs),
    /// Per topic (or writer): vendors, QoS, rate, bandwidth, sizes, fragments, repairs
    Topics(cmd::topics::TopicsArgs),
    /// Cross-capture latency per layer, loss, retransmission, jitter, clock offsets
    Latency(cmd::latency::LatencyArgs),
    /// Delay, jitter, loss and reordering of any UDP flow between capture points (Bosk et al.'s two-capture method, Eq. 9-10)
    Flows(cmd::flows::FlowsArgs),
    /// Self-contained HTML report: per-topic tables, box plots per layer, latency over time, CDF, sizes, bandwidth
    Report(cmd::report::ReportArgs),
    /// What is on the wire right now, per topic (live capture)
    Live(cmd::live::LiveArgs),
    /// Per-host capture agent: exporters (Prometheus, InfluxDB, OTLP) and a stream to `serve`
    Agent(cmd::agent::AgentArgs),
    /// Central view: correlates the agents and serves the live dashboard
    Serve(cmd::serve::ServeArgs),
    /// TSN models, simulator and configuration generators
    Tsn(cmd::tsn::TsnArgs),
    /// Emulated multi-host lab with real DDS workloads
    Lab(cmd::lab::LabArgs),
    /// Print the caps of every table keyed by the wire, as a limits file (--limits)
    Limits(cmd::limit_args::LimitsCmdArgs),
    /// Print a shell completion script (bash, zsh, fish)
    Completions(cmd::completions::CompletionsArgs),
    /// The agent's time-daemon probe (started by `agent`): what chrony and ptp4l say, a JSON line every --every
    #[command(hide = true)]
    ClockProbe(ClockProbeArgs),
}

#[derive(clap::Args, Debug)]
struct ClockProbeArgs {
    #[arg(long, default_value = "10s", value_parser = args::positive_duration)]
    every: std::time::Duration,
    #[arg(long)]
    chronyc_socket: Option<std::path::PathBuf>,
    #[arg(long)]
    ptp_uds: Option<std::path::PathBuf>,
    #[arg(long)]
    ptp_domain: Option<u8>,
}

/// Longest error line printed (a safety net: messages that quote input cut it themselves).
const MAX_ERROR_CHARS: usize = 2000;

fn main() -> ExitCode {
    // Exit codes (common::exit): 0 ok, 1 a verdict failed, 2 an input could not be read or used,
    // 64 usage (a bad option value, a missing argument: clap's errors too), 70 anything else.
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) => e.exit(),
        Err(e) => {
            // clap quotes a refused value whole: a 100 KB one is said once, cut.
            use clap::error::{ContextKind, ContextValue};
            let long = match e.get(ContextKind::InvalidValue) {
                Some(ContextValue::String(v)) => v.len() > ddscope_traffic::text::EXCERPT_CHARS,
                _ => false,
            };
            if e.kind() == clap::error::ErrorKind::ValueValidation && long {
                let arg = match e.get(ContextKind::InvalidArg) {
                    Some(ContextValue::String(a)) => a.clone(),
                    _ => "an option".into(),
                };
                let why = std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or_default();
                eprintln!("error: invalid value for '{arg}': {}", ddscope_traffic::text::excerpt(&why, 2 * ddscope_traffic::text::EXCERPT_CHARS));
            } else {
                let _ = e.print();
            }
            return ExitCode::from(common::exit::USAGE as u8);
        }
    };
    if matches!(cli.command, Command::Dissect(_) | Command::Topics(_) | Command::Latency(_) | Command::Flows(_) | Command::Report(_)) {
        common::remove_partial_outputs_on_interrupt();
    }
    let result = match cli.command {
        Command::Dissect(a) => cmd::dissect::run(a),
        Command::Topics(a) => cmd::topics::run(a),
        Command::Latency(a) => cmd::latency::run(a),
        Command::Flows(a) => cmd::flows::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Live(a) => cmd::live::run(a),
        Command::Agent(a) => cmd::agent::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Tsn(a) => cmd::tsn::run(a),
        Command::Lab(a) => cmd::lab::run(a),
        Command::Limits(a) => cmd::limit_args::run(a),
        Command::Completions(a) => cmd::completions::run::<Cli>(a),
        Command::ClockProbe(a) => Ok(ddscope_monitor::agent::clocksync::probe_loop(&ddscope_monitor::agent::clocksync::ClockProbeConfig {
            every: a.every,
            chronyc_socket: a.chronyc_socket,
            ptp_uds: a.ptp_uds,
            ptp_domain: a.ptp_domain,
        })),
    };
    match result {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            let code = e.downcast_ref::<common::ExitError>().map_or(common::exit::FAILURE, |x| x.code);
            // An error may quote input (a name from a capture, a line of a scenario
            // file): no control characters reach the terminal, and no 200 KB line.
            let msg = format!("{e:#}");
            let msg = ddscope_core::names::for_terminal(&msg);
            match msg.char_indices().nth(MAX_ERROR_CHARS) {
                Some((cut, _)) => eprintln!("ddscope: error: {}… ({} more bytes not shown)", &msg[..cut], msg.len() - cut),
                None => eprintln!("ddscope: error: {msg}"),
            }
            ExitCode::from(code.clamp(1, 255) as u8)
        }
    }
}
