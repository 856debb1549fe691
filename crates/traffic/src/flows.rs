//! Traffic descriptions shared by the TSN simulator and the lab.
//!
//! A [`TopicFlow`] is one periodic DDS topic as the wire sees it (sample size,
//! rate, priority, DDS fragment size); a [`BurstFlow`] is iperf3-like UDP
//! background traffic (thesis 4.2.2: 1400-byte payloads sent in a burst every
//! pacing interval). Users of these types that need more fields (a lab node's
//! host, a simulator flow's path) wrap them with `#[serde(flatten)]`.

use crate::units::{Bytes, Nanos, Rate};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Reliability {
    /// ROS 2 default.
    #[default]
    Reliable,
    BestEffort,
}

/// One periodic DDS topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicFlow {
    /// ROS 2 topic name as users write it (`/image`); on the wire it is `rt/image`.
    pub topic: String,
    /// ROS 2 type name (`sensor_msgs/msg/Image`); on the wire `sensor_msgs::msg::dds_::Image_`.
    #[serde(default = "default_type")]
    pub type_name: String,
    /// Serialized sample size (the CDR payload a DATA/DATA_FRAG carries).
    pub sample_bytes: Bytes,
    /// Publication rate.
    pub rate_hz: f64,
    /// VLAN priority code point the traffic is mapped to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcp: Option<u8>,
    #[serde(default)]
    pub reliability: Reliability,
    /// DDS fragment size (DATA_FRAG payload per submessage); `None` = vendor default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dds_fragment_bytes: Option<Bytes>,
    /// History depth (KEEP_LAST n); ROS 2 default is 10.
    #[serde(default = "default_depth")]
    pub history_depth: u32,
}

fn default_type() -> String {
    "std_msgs/msg/UInt8MultiArray".to_string()
}
fn default_depth() -> u32 {
    10
}

impl TopicFlow {
    pub fn period(&self) -> Nanos {
        Nanos::from_secs_f64(1.0 / self.rate_hz)
    }
    /// Mean application bit rate (payload only, no protocol overhead).
    pub fn payload_rate(&self) -> Rate {
        Rate((self.sample_bytes.0 as f64 * 8.0 * self.rate_hz).round() as u64)
    }
}

/// iperf3-like UDP background traffic: `payload_bytes` datagrams, sent in a
/// burst every `pacing` so that the mean rate is `rate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BurstFlow {
    #[serde(default = "default_burst_name")]
    pub name: String,
    /// UDP payload per datagram (iperf3 `-l`); thesis: 1400.
    #[serde(default = "default_payload")]
    pub payload_bytes: Bytes,
    /// Burst interval (iperf3 `--pacing-timer`); thesis: 15 ms.
    #[serde(default = "default_pacing")]
    pub pacing: Nanos,
    /// Mean offered rate (iperf3 `-b`).
    pub rate: Rate,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcp: Option<u8>,
}

fn default_burst_name() -> String {
    "iperf3".to_string()
}
fn default_payload() -> Bytes {
    Bytes(1400)
}
fn default_pacing() -> Nanos {
    Nanos(15_000_000)
}

impl BurstFlow {
    /// Datagrams sent in each burst so that the mean rate is met (rounded up).
    pub fn datagrams_per_burst(&self) -> u64 {
        let bits_per_burst = self.rate.0 as u128 * self.pacing.0 as u128 / 1_000_000_000;
        let per = self.payload_bytes.0 as u128 * 8;
        if per == 0 {
            return 0;
        }
        bits_per_burst.div_ceil(per) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_from_toml() {
        let t: TopicFlow = toml::from_str(
            "topic='/image'\ntype_name='sensor_msgs/msg/Image'\nsample_bytes=2764800\nrate_hz=10\npcp=5\ndds_fragment_bytes='64KiB'",
        )
        .unwrap();
        assert_eq!(t.period(), Nanos(100_000_000));
        assert_eq!(t.reliability, Reliability::Reliable);
        assert_eq!(t.history_depth, 10);
        assert_eq!(t.dds_fragment_bytes, Some(Bytes(65536)));
        assert!(toml::from_str::<TopicFlow>("topic='/x'\nsample_bytes=1\nrate_hz=1\nbogus=1").is_err());
    }

    #[test]
    fn burst_sizes() {
        // 1 Gbit/s in 15 ms bursts of 1400-byte payloads: 15e6 bits / 11200 = 1339.3 -> 1340.
        let b: BurstFlow = toml::from_str("rate='1G'").unwrap();
        assert_eq!(b.payload_bytes, Bytes(1400));
        assert_eq!(b.pacing, Nanos(15_000_000));
        assert_eq!(b.datagrams_per_burst(), 1340);
    }
}
