//! ros2_tracing events as typed values, with their time and context.
//!
//! Field names and types are ros2_tracing's (`tracetools/tp_call.h`): handles
//! are the `ctf_integer_hex(const void *)` fields (u64), `queue_depth` is a
//! `size_t` (u64), `taken`/`is_intra_process` are `int` (i32, as recorded),
//! timestamps are `int64_t` nanoseconds.

use std::fmt;

/// ros2_tracing's `TRACETOOLS_GID_STORAGE_SIZE`: the recorded gid is 24 bytes.
pub const GID_SIZE: usize = 24;

/// An rmw gid as recorded by `rmw_publisher_init` / `rmw_subscription_init`.
///
/// For rmw_cyclonedds and rmw_fastrtps the first 16 bytes are the DDS
/// endpoint GUID (12-byte prefix, 4-byte entity id, wire order). Bytes 16..24
/// are zero on Humble (rmw's gid storage is 24 bytes there); from Iron on rmw
/// stores 16 bytes and the tracepoint still copies 24, so bytes 16..24 are
/// whatever follows in memory: use [`Gid::guid`] to join.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gid(pub [u8; GID_SIZE]);

impl Gid {
    /// The DDS GUID part (prefix + entity id).
    pub fn guid(&self) -> [u8; 16] {
        let mut g = [0u8; 16];
        g.copy_from_slice(&self.0[..16]);
        g
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i == 12 || i == 16 {
                f.write_str(".")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// One `ros2:*` event with its fields exactly as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ros2Event {
    RclInit { context_handle: u64, version: String },
    RclNodeInit { node_handle: u64, rmw_handle: u64, node_name: String, namespace: String },
    RmwPublisherInit { rmw_publisher_handle: u64, gid: Gid },
    RclPublisherInit {
        publisher_handle: u64,
        node_handle: u64,
        rmw_publisher_handle: u64,
        topic_name: String,
        queue_depth: u64,
    },
    RclcppPublish { message: u64 },
    RclPublish { publisher_handle: u64, message: u64 },
    /// Humble/Iron record only `message`; Jazzy adds the rmw handle and the
    /// sample's source timestamp (`None` when the trace's layout lacks them).
    RmwPublish { rmw_publisher_handle: Option<u64>, message: u64, timestamp: Option<i64> },
    RmwSubscriptionInit { rmw_subscription_handle: u64, gid: Gid },
    RclSubscriptionInit {
        subscription_handle: u64,
        node_handle: u64,
        rmw_subscription_handle: u64,
        topic_name: String,
        queue_depth: u64,
    },
    RclcppSubscriptionInit { subscription_handle: u64, subscription: u64 },
    RclcppSubscriptionCallbackAdded { subscription: u64, callback: u64 },
    /// `source_timestamp` is the DDS sample's source timestamp (0 when nothing was taken).
    RmwTake { rmw_subscription_handle: u64, message: u64, source_timestamp: i64, taken: i32 },
    RclTake { message: u64 },
    RclcppTake { message: u64 },
    RclTimerInit { timer_handle: u64, period: i64 },
    RclcppTimerCallbackAdded { timer_handle: u64, callback: u64 },
    RclcppTimerLinkNode { timer_handle: u64, node_handle: u64 },
    RclcppCallbackRegister { callback: u64, symbol: String },
    CallbackStart { callback: u64, is_intra_process: i32 },
    CallbackEnd { callback: u64 },
}

/// The `ros2:*` events this crate decodes (event names without the provider).
pub const DECODED_EVENTS: &[&str] = &[
    "rcl_init",
    "rcl_node_init",
    "rmw_publisher_init",
    "rcl_publisher_init",
    "rclcpp_publish",
    "rcl_publish",
    "rmw_publish",
    "rmw_subscription_init",
    "rcl_subscription_init",
    "rclcpp_subscription_init",
    "rclcpp_subscription_callback_added",
    "rmw_take",
    "rcl_take",
    "rclcpp_take",
    "rcl_timer_init",
    "rclcpp_timer_callback_added",
    "rclcpp_timer_link_node",
    "rclcpp_callback_register",
    "callback_start",
    "callback_end",
];

/// A field value, for printing an event generically (the dump example, the oracle test).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldValue {
    /// An unsigned integer shown in hex by babeltrace2 (`ctf_integer_hex`).
    Hex(u64),
    Unsigned(u64),
    Signed(i64),
    Str(String),
    Bytes(Vec<u8>),
}

impl Ros2Event {
    /// The event name without the `ros2:` provider prefix.
    pub fn name(&self) -> &'static str {
        use Ros2Event::*;
        match self {
            RclInit { .. } => "rcl_init",
            RclNodeInit { .. } => "rcl_node_init",
            RmwPublisherInit { .. } => "rmw_publisher_init",
            RclPublisherInit { .. } => "rcl_publisher_init",
            RclcppPublish { .. } => "rclcpp_publish",
            RclPublish { .. } => "rcl_publish",
            RmwPublish { .. } => "rmw_publish",
            RmwSubscriptionInit { .. } => "rmw_subscription_init",
            RclSubscriptionInit { .. } => "rcl_subscription_init",
            RclcppSubscriptionInit { .. } => "rclcpp_subscription_init",
            RclcppSubscriptionCallbackAdded { .. } => "rclcpp_subscription_callback_added",
            RmwTake { .. } => "rmw_take",
            RclTake { .. } => "rcl_take",
            RclcppTake { .. } => "rclcpp_take",
            RclTimerInit { .. } => "rcl_timer_init",
            RclcppTimerCallbackAdded { .. } => "rclcpp_timer_callback_added",
            RclcppTimerLinkNode { .. } => "rclcpp_timer_link_node",
            RclcppCallbackRegister { .. } => "rclcpp_callback_register",
            CallbackStart { .. } => "callback_start",
            CallbackEnd { .. } => "callback_end",
        }
    }

    /// The payload fields in trace order, with their ros2_tracing names.
    pub fn fields(&self) -> Vec<(&'static str, FieldValue)> {
        use FieldValue::*;
        use Ros2Event::*;
        let s = |v: &String| Str(v.clone());
        match self {
            RclInit { context_handle, version } => {
                vec![("context_handle", Hex(*context_handle)), ("version", s(version))]
            }
            RclNodeInit { node_handle, rmw_handle, node_name, namespace } => vec![
                ("node_handle", Hex(*node_handle)),
                ("rmw_handle", Hex(*rmw_handle)),
                ("node_name", s(node_name)),
                ("namespace", s(namespace)),
            ],
            RmwPublisherInit { rmw_publisher_handle, gid } => vec![
                ("rmw_publisher_handle", Hex(*rmw_publisher_handle)),
                ("gid", Bytes(gid.0.to_vec())),
            ],
            RclPublisherInit {
                publisher_handle,
                node_handle,
                rmw_publisher_handle,
                topic_name,
                queue_depth,
            } => vec![
                ("publisher_handle", Hex(*publisher_handle)),
                ("node_handle", Hex(*node_handle)),
                ("rmw_publisher_handle", Hex(*rmw_publisher_handle)),
                ("topic_name", s(topic_name)),
                ("queue_depth", Unsigned(*queue_depth)),
            ],
            RclcppPublish { message } => vec![("message", Hex(*message))],
            RclPublish { publisher_handle, message } => {
                vec![("publisher_handle", Hex(*publisher_handle)), ("message", Hex(*message))]
            }
            RmwPublish { rmw_publisher_handle, message, timestamp } => {
                let mut v = Vec::with_capacity(3);
                if let Some(h) = rmw_publisher_handle {
                    v.push(("rmw_publisher_handle", Hex(*h)));
                }
                v.push(("message", Hex(*message)));
                if let Some(t) = timestamp {
                    v.push(("timestamp", Signed(*t)));
                }
                v
            }
            RmwSubscriptionInit { rmw_subscription_handle, gid } => vec![
                ("rmw_subscription_handle", Hex(*rmw_subscription_handle)),
                ("gid", Bytes(gid.0.to_vec())),
            ],
            RclSubscriptionInit {
                subscription_handle,
                node_handle,
                rmw_subscription_handle,
                topic_name,
                queue_depth,
            } => vec![
                ("subscription_handle", Hex(*subscription_handle)),
                ("node_handle", Hex(*node_handle)),
                ("rmw_subscription_handle", Hex(*rmw_subscription_handle)),
                ("topic_name", s(topic_name)),
                ("queue_depth", Unsigned(*queue_depth)),
            ],
            RclcppSubscriptionInit { subscription_handle, subscription } => vec![
                ("subscription_handle", Hex(*subscription_handle)),
                ("subscription", Hex(*subscription)),
            ],
            RclcppSubscriptionCallbackAdded { subscription, callback } => {
                vec![("subscription", Hex(*subscription)), ("callback", Hex(*callback))]
            }
            RmwTake { rmw_subscription_handle, message, source_timestamp, taken } => vec![
                ("rmw_subscription_handle", Hex(*rmw_subscription_handle)),
                ("message", Hex(*message)),
                ("source_timestamp", Signed(*source_timestamp)),
                ("taken", Signed(i64::from(*taken))),
            ],
            RclTake { message } => vec![("message", Hex(*message))],
            RclcppTake { message } => vec![("message", Hex(*message))],
            RclTimerInit { timer_handle, period } => {
                vec![("timer_handle", Hex(*timer_handle)), ("period", Signed(*period))]
            }
            RclcppTimerCallbackAdded { timer_handle, callback } => {
                vec![("timer_handle", Hex(*timer_handle)), ("callback", Hex(*callback))]
            }
            RclcppTimerLinkNode { timer_handle, node_handle } => {
                vec![("timer_handle", Hex(*timer_handle)), ("node_handle", Hex(*node_handle))]
            }
            RclcppCallbackRegister { callback, symbol } => {
                vec![("callback", Hex(*callback)), ("symbol", s(symbol))]
            }
            CallbackStart { callback, is_intra_process } => vec![
                ("callback", Hex(*callback)),
                ("is_intra_process", Signed(i64::from(*is_intra_process))),
            ],
            CallbackEnd { callback } => vec![("callback", Hex(*callback))],
        }
    }
}

/// A thread name as LTTng's `procname` context records it (at most 16 bytes),
/// stored inline so reading a million events a second allocates nothing.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ProcName {
    bytes: [u8; 16],
    len: u8,
}

impl ProcName {
    pub fn new(s: &[u8]) -> ProcName {
        let len = s.len().min(16);
        let mut bytes = [0u8; 16];
        bytes[..len].copy_from_slice(&s[..len]);
        ProcName { bytes, len: len as u8 }
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
    /// Lossy UTF-8 view (thread names are normally ASCII).
    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(self.as_bytes()).into_owned()
    }
}

impl fmt::Debug for ProcName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string_lossy())
    }
}

/// Where an event happened: LTTng's context fields (`ros2 trace` adds vpid,
/// vtid and procname) and the CPU of the per-CPU stream (packet context `cpu_id`).
/// A field the trace does not carry is `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventContext {
    pub vpid: Option<i64>,
    pub vtid: Option<i64>,
    pub procname: Option<ProcName>,
    pub cpu_id: Option<u64>,
}

/// When an event happened, on the trace's clock (see [`crate::ClockInfo`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct EventTime {
    /// The raw clock value (cycles of the clock class; LTTng: ns of CLOCK_MONOTONIC).
    pub cycles: u64,
    /// Nanoseconds from the clock's origin: `cycles` converted with the clock
    /// class frequency and offset (LTTng: the Unix epoch, i.e. ≈ CLOCK_REALTIME
    /// as sampled when the session was created).
    pub ns_from_origin: i64,
}

/// One event read from a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub event: Ros2Event,
    pub time: EventTime,
    pub context: EventContext,
}
