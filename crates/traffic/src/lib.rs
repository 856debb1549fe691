//! Units (bit rates, byte sizes, durations, percentages) and the traffic
//! descriptions that the TSN model and the lab share: a periodic DDS topic
//! and an iperf3-like burst source. Both parse from TOML scenario files, where
//! quantities are written the way engineers write them (`"2.5G"`, `"500us"`,
//! `"64KiB"`, `"50%"`).

pub mod flows;
pub mod fsio;
pub mod text;
pub mod units;

pub use flows::{BurstFlow, Reliability, TopicFlow};
pub use units::{Bytes, Nanos, ParseUnitError, Percent, Rate};
