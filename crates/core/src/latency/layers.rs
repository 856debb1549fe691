//! The vocabulary of the rows: the level of a row, what became of a sample
//! (status, timing), the latency layers and the stacked bars they add up to.

use super::stats::DistSummary;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Message,
    Submessage,
    /// A Zenoh router's hop: complete on its inbound link → first byte on its outbound link.
    Router,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Message => "message",
            Level::Submessage => "submessage",
            Level::Router => "router",
        }
    }
}

/// What became of a sample at one receiver (the rows' `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Complete at the receiver's capture point.
    Delivered,
    /// Some fragments arrived, not all.
    Incomplete,
    /// None arrived within the window.
    Lost,
    /// Delivered on the publisher's own host without the wire (shared memory,
    /// loopback, intra-process), joined trace to trace: a publish and a take on one host.
    SameHost,
    /// Delivered to another host, joined trace to trace (no capture saw it).
    Traced,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Delivered => "delivered",
            Status::Incomplete => "incomplete",
            Status::Lost => "lost",
            Status::SameHost => "same_host",
            Status::Traced => "traced",
        }
    }
}

impl std::str::FromStr for Status {
    type Err = String;

    /// A status by its name in outputs: `delivered`, `incomplete`, `lost`, `same_host`, `traced`.
    fn from_str(s: &str) -> Result<Status, String> {
        [Status::Delivered, Status::Incomplete, Status::Lost, Status::SameHost, Status::Traced]
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| format!("{s:?}: not a status (delivered, incomplete, lost, same_host, traced)"))
    }
}

/// A row's status compares with its name as written in outputs (`"lost"`).
impl PartialEq<&str> for Status {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// In time / late against the publication period (Kouril et al.); lost samples are `Lost`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Timing {
    InTime,
    Late,
    Lost,
}

impl Timing {
    pub fn as_str(self) -> &'static str {
        match self {
            Timing::InTime => "in_time",
            Timing::Late => "late",
            Timing::Lost => "lost",
        }
    }
}

/// A row's timing compares with its name as written in outputs (`"late"`).
impl PartialEq<&str> for Timing {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Latency layers, in the order reports show them (docs/latency.md defines each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// rclcpp_publish → callback_start at the subscriber (traces).
    RosE2e,
    /// publish → receive (lab ground truth).
    Application,
    /// rclcpp_publish → rmw_publish (sender trace).
    RosPublish,
    /// publish (ground truth) → first on the wire.
    SenderStack,
    /// INFO_TS (source timestamp) → first on the wire at the sender: one host clock, no trace needed.
    SourceTsToWire,
    /// rmw_publish → first on the wire at the sender.
    DdsSend,
    /// First DATA/DATA_FRAG at the sender → sample complete at the receiver (thesis 3.2.5).
    Message,
    FirstFirst,
    LastLast,
    /// Per DATA_FRAG: first IP fragment at the sender → last at the receiver.
    Submessage,
    /// Complete on the wire at the receiver → rmw_take.
    DdsReceive,
    /// rmw_publish → rmw_take on one host (same-host delivery, no wire).
    DdsLocal,
    /// rmw_publish → rmw_take on another host, joined trace to trace without a
    /// capture (dds_send + message + dds_receive unsplit; needs synchronised clocks).
    DdsRemote,
    /// Complete on the wire → receive (ground truth).
    ReceiverStack,
    /// rmw_take → callback_start.
    Executor,
    /// callback_start → callback_end.
    Callback,
    /// In a chain: callback_start of a hop → rclcpp_publish of the next (the relay node's own time).
    Node,
    /// Through a Zenoh router: complete on the router's inbound link → first byte on its outbound link.
    Router,
}

impl Layer {
    /// True for layers whose two ends are time-stamped on different hosts' clocks when the flow
    /// crosses hosts (their figures carry the clocks' error bar); the others are one host's clock.
    pub fn crosses_clocks(self) -> bool {
        matches!(
            self,
            Layer::RosE2e | Layer::Application | Layer::Message | Layer::FirstFirst | Layer::LastLast | Layer::Submessage | Layer::DdsRemote
        )
    }

    pub const ALL: [Layer; 18] = [
        Layer::RosE2e,
        Layer::Application,
        Layer::RosPublish,
        Layer::SenderStack,
        Layer::SourceTsToWire,
        Layer::DdsSend,
        Layer::Message,
        Layer::FirstFirst,
        Layer::LastLast,
        Layer::Submessage,
        Layer::DdsReceive,
        Layer::DdsLocal,
        Layer::DdsRemote,
        Layer::ReceiverStack,
        Layer::Executor,
        Layer::Callback,
        Layer::Node,
        Layer::Router,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Layer::RosE2e => "ros_e2e",
            Layer::Application => "application",
            Layer::RosPublish => "ros_publish",
            Layer::SenderStack => "sender_stack",
            Layer::SourceTsToWire => "source_ts_to_wire",
            Layer::DdsSend => "dds_send",
            Layer::Message => "message",
            Layer::FirstFirst => "first_first",
            Layer::LastLast => "last_last",
            Layer::Submessage => "submessage",
            Layer::DdsReceive => "dds_receive",
            Layer::DdsLocal => "dds_local",
            Layer::DdsRemote => "dds_remote",
            Layer::ReceiverStack => "receiver_stack",
            Layer::Executor => "executor",
            Layer::Callback => "callback",
            Layer::Node => "node",
            Layer::Router => "router",
        }
    }

    pub fn parse(s: &str) -> Option<Layer> {
        Layer::ALL.into_iter().find(|l| l.as_str() == s)
    }
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Layer {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Layer {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// One segment of a stacked latency bar (thesis Fig. 4.4: end-to-end split
/// into the ROS 2, DDS and wire layers): the mean of one layer.
#[derive(Debug, Clone, Serialize)]
pub struct StackPart {
    /// The chain hop this segment belongs to (chains only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hop: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    pub layer: String,
    /// `ros2`, `dds`, `wire` or `node` (a relay node's own time, chains only); `e2e` for end-to-end layers.
    pub group: &'static str,
    pub count: u64,
    pub mean_ms: f64,
}

/// A stacked bar: the parts in order and the end-to-end layer they add up to.
#[derive(Debug, Clone, Serialize)]
pub struct Stack {
    pub total_layer: String,
    pub total: DistSummary,
    pub parts: Vec<StackPart>,
    /// Every part has as many values as the total: the means add up to the total's mean.
    pub adds_up: bool,
}

/// The layers that add up to `ros_e2e`, in order from publish to callback.
pub const ROS_STACK_LAYERS: [Layer; 7] = [Layer::RosPublish, Layer::DdsSend, Layer::DdsLocal, Layer::DdsRemote, Layer::Message, Layer::DdsReceive, Layer::Executor];

/// The layer group of the thesis' hierarchy a layer belongs to.
pub fn layer_group(l: Layer) -> &'static str {
    match l {
        Layer::RosE2e | Layer::Application => "e2e",
        Layer::RosPublish | Layer::Executor | Layer::Callback => "ros2",
        Layer::DdsSend | Layer::DdsReceive | Layer::DdsLocal | Layer::DdsRemote | Layer::SenderStack | Layer::ReceiverStack | Layer::SourceTsToWire => "dds",
        Layer::Node | Layer::Router => "node",
        _ => "wire",
    }
}
