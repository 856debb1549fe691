//! Live-capture options shared by `ddscope live` and `ddscope agent`.

use crate::args;
use clap::{Args, ValueEnum};
use ddscope_core::source::{InterfaceSpec, Tstamp};
use std::time::Duration;

/// Where capture timestamps come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum TstampArg {
    /// The kernel's software timestamps
    Host,
    /// The NIC's hardware clock, synchronised to the system clock
    Adapter,
    /// The NIC's hardware clock as it runs
    AdapterUnsynced,
}

#[derive(Args, Debug)]
pub struct CaptureArgs {
    /// Interface to capture on
    #[arg(short = 'i', long = "interface")]
    pub interface: Option<String>,
    /// BPF capture filter (tcpdump syntax)
    #[arg(long)]
    pub filter: Option<String>,
    /// Bytes captured per frame (0 = whole frames). Small values give header-only mode.
    #[arg(long, default_value_t = 0)]
    pub snaplen: i32,
    /// Timestamp source
    #[arg(long, value_enum, default_value = "host")]
    pub tstamp: TstampArg,
    /// Kernel ring buffer size
    #[arg(long, default_value_t = 64)]
    pub buffer_mb: i32,
    /// In-kernel filter (eBPF socket filter): IP fragments that carry nothing the
    /// analyses read are left out of the capture and only counted, every figure
    /// stays exact (docs/online.md). Falls back to whole frames, with a notice,
    /// where it cannot be loaded. Not with --filter or --snaplen
    #[arg(long, conflicts_with_all = ["filter", "snaplen"])]
    pub kernel_filter: bool,
    /// In-kernel records (eBPF socket filter): the capture socket receives only
    /// discovery and non-RTPS frames; of every other frame the kernel reports its
    /// time, length and the bytes the analyses read, rebuilt into a frame of the
    /// original length (zeros elsewhere): every figure stays exact (docs/online.md).
    /// Holds a socket with SO_TIMESTAMPNS open so the kernel stamps frames. Falls
    /// back to whole frames, with a notice, where it cannot be loaded. Host
    /// timestamps only; not with --filter, --snaplen or --kernel-filter
    #[arg(long, conflicts_with_all = ["filter", "snaplen", "kernel_filter"])]
    pub kernel_records: bool,
    /// Stop after this long (e.g. 30s)
    #[arg(long, value_parser = args::positive_duration)]
    pub duration: Option<Duration>,
}

impl CaptureArgs {
    /// The interface source (`SourceSpec::Interface`: `-i NAME` with its capture settings); `immediate` as the command decides.
    /// The interface (`-i`), required where no other source is given.
    pub fn interface(&self) -> anyhow::Result<&str> {
        self.interface.as_deref().ok_or_else(|| crate::common::usage("give the interface to capture on: -i IFACE"))
    }

    pub fn spec(&self, immediate: bool) -> InterfaceSpec {
        let tstamp = match self.tstamp {
            TstampArg::Host => Tstamp::Host,
            TstampArg::Adapter => Tstamp::Adapter,
            TstampArg::AdapterUnsynced => Tstamp::AdapterUnsynced,
        };
        InterfaceSpec {
            interface: self.interface.clone().unwrap_or_default(),
            filter: self.filter.clone(),
            snaplen: self.snaplen,
            tstamp,
            buffer_mb: self.buffer_mb,
            immediate,
            kernel_filter: self.kernel_filter,
            kernel_records: self.kernel_records,
        }
    }
}
