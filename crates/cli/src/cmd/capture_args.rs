//! Live-capture options shared by `ddscope live` and `ddscope agent`.

use clap::Args;
use ddscope_monitor::capture::{LiveConfig, Tstamp};
use ddscope_traffic::units::Nanos;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct CaptureArgs {
    /// Interface to capture on
    #[arg(short = 'i', long = "interface")]
    pub interface: String,
    /// BPF capture filter (tcpdump syntax)
    #[arg(long)]
    pub filter: Option<String>,
    /// Bytes captured per frame (0 = whole frames). Small values give header-only mode.
    #[arg(long, default_value_t = 0)]
    pub snaplen: i32,
    /// Timestamp source: host, adapter (NIC hardware, synchronised) or adapter_unsynced
    #[arg(long, default_value = "host")]
    pub tstamp: String,
    /// Kernel ring buffer size
    #[arg(long, default_value_t = 64)]
    pub buffer_mb: i32,
    /// Stop after this long (e.g. 30s)
    #[arg(long)]
    pub duration: Option<String>,
}

impl CaptureArgs {
    /// The capture configuration; `immediate` as the command decides.
    pub fn config(&self, immediate: bool) -> anyhow::Result<LiveConfig> {
        let tstamp: Tstamp = self.tstamp.parse()?;
        Ok(LiveConfig {
            interface: self.interface.clone(),
            filter: self.filter.clone(),
            snaplen: self.snaplen,
            tstamp,
            buffer_mb: self.buffer_mb,
            immediate,
        })
    }

    pub fn duration(&self) -> anyhow::Result<Option<Duration>> {
        self.duration
            .as_deref()
            .map(|d| d.parse::<Nanos>().map(|n| n.as_duration()).map_err(|e| anyhow::anyhow!("--duration: {e}")))
            .transpose()
    }
}
