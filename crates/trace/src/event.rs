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
    /// Upstream records only `message`; CARET's fork also records `publisher_handle`.
    RclcppPublish { publisher_handle: Option<u64>, message: u64 },
    /// Iron on (and CARET's fork): a publish handed to intra-process subscriptions.
    RclcppIntraPublish { publisher_handle: u64, message: u64 },
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
    RclServiceInit { service_handle: u64, node_handle: u64, rmw_service_handle: u64, service_name: String },
    RclcppServiceCallbackAdded { service_handle: u64, callback: u64 },
    RclClientInit { client_handle: u64, node_handle: u64, rmw_client_handle: u64, service_name: String },
    /// Kilted on: the client's gid (16 bytes there).
    RmwClientInit { rmw_client_handle: u64, gid: Gid },
    /// Kilted on: a request sent by a client.
    RmwSendRequest { rmw_client_handle: u64, request: u64, sequence_number: i64 },
    /// Kilted on: a request taken by a service (`client_gid`, `sequence_number` identify it).
    RmwTakeRequest { rmw_service_handle: u64, request: u64, client_gid: Gid, sequence_number: i64, taken: i32 },
    /// Kilted on: a response sent by a service.
    RmwSendResponse { rmw_service_handle: u64, response: u64, client_gid: Gid, sequence_number: i64, timestamp: i64 },
    /// Kilted on: a response taken by a client.
    RmwTakeResponse { rmw_client_handle: u64, response: u64, sequence_number: i64, source_timestamp: i64, taken: i32 },
    RclcppExecutorGetNextReady,
    RclcppExecutorWaitForWork { timeout: i64 },
    /// The executor runs the executable of `handle` (the rcl handle of a subscription, timer, service or client).
    RclcppExecutorExecute { handle: u64 },
    /// Iron on: an intra-process buffer (`ipb`) serves `subscription` (an rclcpp subscription object).
    RclcppIpbToSubscription { ipb: u64, subscription: u64 },
    /// Iron on: ring buffer `buffer` belongs to intra-process buffer `ipb`.
    RclcppBufferToIpb { buffer: u64, ipb: u64 },
    /// Iron on: a message was put into slot `index` of ring buffer `buffer` (on the publishing thread).
    RclcppRingBufferEnqueue { buffer: u64, index: u64, size: u64, overwritten: i32 },
    /// Iron on: slot `index` of ring buffer `buffer` was taken out (before the intra-process callback).
    RclcppRingBufferDequeue { buffer: u64, index: u64, size: u64 },
    /// CARET's fork: a sample handed to a subscription callback, with its source timestamp.
    DispatchSubscriptionCallback { message: u64, callback: u64, source_stamp: i64, message_timestamp: Option<i64> },
    /// CARET's fork: an intra-process message handed to a subscription callback.
    DispatchIntraProcessSubscriptionCallback { message: u64, callback: u64, message_timestamp: Option<i64> },
    /// CARET (`ros2_caret:dds_write`): the DDS write of `message` starts.
    CaretDdsWrite { message: u64 },
    /// CARET (`ros2_caret:dds_bind_addr_to_stamp`): the sample written from `addr` got `source_stamp`.
    CaretDdsBindAddrToStamp { addr: u64, source_stamp: i64 },
    /// CARET (`ros2_caret:dds_bind_addr_to_addr`): the message at `addr_from` continues at `addr_to` (a copy or conversion).
    CaretDdsBindAddrToAddr { addr_from: u64, addr_to: u64 },
    /// CARET (`ros2_caret:on_data_available`): a DDS reader was notified of the sample with `source_stamp`.
    CaretOnDataAvailable { source_stamp: i64 },
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
    "rclcpp_intra_publish",
    "rcl_service_init",
    "rclcpp_service_callback_added",
    "rcl_client_init",
    "rmw_client_init",
    "rmw_send_request",
    "rmw_take_request",
    "rmw_send_response",
    "rmw_take_response",
    "rclcpp_executor_get_next_ready",
    "rclcpp_executor_wait_for_work",
    "rclcpp_executor_execute",
    "dispatch_subscription_callback",
    "dispatch_intra_process_subscription_callback",
    "rclcpp_ipb_to_subscription",
    "rclcpp_buffer_to_ipb",
    "rclcpp_ring_buffer_enqueue",
    "rclcpp_ring_buffer_dequeue",
];

/// The `ros2_caret:*` events (CARET's tracer, LD_PRELOAD hooks into the DDS layer) this crate decodes.
pub const DECODED_CARET_EVENTS: &[&str] = &["dds_write", "dds_bind_addr_to_stamp", "dds_bind_addr_to_addr", "on_data_available"];

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
            RclcppIntraPublish { .. } => "rclcpp_intra_publish",
            RclServiceInit { .. } => "rcl_service_init",
            RclcppServiceCallbackAdded { .. } => "rclcpp_service_callback_added",
            RclClientInit { .. } => "rcl_client_init",
            RmwClientInit { .. } => "rmw_client_init",
            RmwSendRequest { .. } => "rmw_send_request",
            RmwTakeRequest { .. } => "rmw_take_request",
            RmwSendResponse { .. } => "rmw_send_response",
            RmwTakeResponse { .. } => "rmw_take_response",
            RclcppExecutorGetNextReady => "rclcpp_executor_get_next_ready",
            RclcppExecutorWaitForWork { .. } => "rclcpp_executor_wait_for_work",
            RclcppExecutorExecute { .. } => "rclcpp_executor_execute",
            RclcppIpbToSubscription { .. } => "rclcpp_ipb_to_subscription",
            RclcppBufferToIpb { .. } => "rclcpp_buffer_to_ipb",
            RclcppRingBufferEnqueue { .. } => "rclcpp_ring_buffer_enqueue",
            RclcppRingBufferDequeue { .. } => "rclcpp_ring_buffer_dequeue",
            DispatchSubscriptionCallback { .. } => "dispatch_subscription_callback",
            DispatchIntraProcessSubscriptionCallback { .. } => "dispatch_intra_process_subscription_callback",
            CaretDdsWrite { .. } => "dds_write",
            CaretDdsBindAddrToStamp { .. } => "dds_bind_addr_to_stamp",
            CaretDdsBindAddrToAddr { .. } => "dds_bind_addr_to_addr",
            CaretOnDataAvailable { .. } => "on_data_available",
        }
    }

    /// The event's provider: `ros2_caret` for CARET's DDS-layer hooks, `ros2` otherwise.
    pub fn provider(&self) -> &'static str {
        use Ros2Event::*;
        match self {
            CaretDdsWrite { .. } | CaretDdsBindAddrToStamp { .. } | CaretDdsBindAddrToAddr { .. } | CaretOnDataAvailable { .. } => "ros2_caret",
            _ => "ros2",
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
            RclcppPublish { publisher_handle, message } => {
                let mut v = Vec::with_capacity(2);
                if let Some(h) = publisher_handle {
                    v.push(("publisher_handle", Hex(*h)));
                }
                v.push(("message", Hex(*message)));
                v
            }
            RclcppIntraPublish { publisher_handle, message } => {
                vec![("publisher_handle", Hex(*publisher_handle)), ("message", Hex(*message))]
            }
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
            RclServiceInit { service_handle, node_handle, rmw_service_handle, service_name } => vec![
                ("service_handle", Hex(*service_handle)),
                ("node_handle", Hex(*node_handle)),
                ("rmw_service_handle", Hex(*rmw_service_handle)),
                ("service_name", s(service_name)),
            ],
            RclcppServiceCallbackAdded { service_handle, callback } => {
                vec![("service_handle", Hex(*service_handle)), ("callback", Hex(*callback))]
            }
            RclClientInit { client_handle, node_handle, rmw_client_handle, service_name } => vec![
                ("client_handle", Hex(*client_handle)),
                ("node_handle", Hex(*node_handle)),
                ("rmw_client_handle", Hex(*rmw_client_handle)),
                ("service_name", s(service_name)),
            ],
            RmwClientInit { rmw_client_handle, gid } => {
                vec![("rmw_client_handle", Hex(*rmw_client_handle)), ("gid", Bytes(gid.0.to_vec()))]
            }
            RmwSendRequest { rmw_client_handle, request, sequence_number } => vec![
                ("rmw_client_handle", Hex(*rmw_client_handle)),
                ("request", Hex(*request)),
                ("sequence_number", Signed(*sequence_number)),
            ],
            RmwTakeRequest { rmw_service_handle, request, client_gid, sequence_number, taken } => vec![
                ("rmw_service_handle", Hex(*rmw_service_handle)),
                ("request", Hex(*request)),
                ("client_gid", Bytes(client_gid.0.to_vec())),
                ("sequence_number", Signed(*sequence_number)),
                ("taken", Signed(i64::from(*taken))),
            ],
            RmwSendResponse { rmw_service_handle, response, client_gid, sequence_number, timestamp } => vec![
                ("rmw_service_handle", Hex(*rmw_service_handle)),
                ("response", Hex(*response)),
                ("client_gid", Bytes(client_gid.0.to_vec())),
                ("sequence_number", Signed(*sequence_number)),
                ("timestamp", Signed(*timestamp)),
            ],
            RmwTakeResponse { rmw_client_handle, response, sequence_number, source_timestamp, taken } => vec![
                ("rmw_client_handle", Hex(*rmw_client_handle)),
                ("response", Hex(*response)),
                ("sequence_number", Signed(*sequence_number)),
                ("source_timestamp", Signed(*source_timestamp)),
                ("taken", Signed(i64::from(*taken))),
            ],
            RclcppExecutorGetNextReady => vec![],
            RclcppExecutorWaitForWork { timeout } => vec![("timeout", Signed(*timeout))],
            RclcppExecutorExecute { handle } => vec![("handle", Hex(*handle))],
            RclcppIpbToSubscription { ipb, subscription } => vec![("ipb", Hex(*ipb)), ("subscription", Hex(*subscription))],
            RclcppBufferToIpb { buffer, ipb } => vec![("buffer", Hex(*buffer)), ("ipb", Hex(*ipb))],
            RclcppRingBufferEnqueue { buffer, index, size, overwritten } => vec![
                ("buffer", Hex(*buffer)),
                ("index", Unsigned(*index)),
                ("size", Unsigned(*size)),
                ("overwritten", Signed(i64::from(*overwritten))),
            ],
            RclcppRingBufferDequeue { buffer, index, size } => {
                vec![("buffer", Hex(*buffer)), ("index", Unsigned(*index)), ("size", Unsigned(*size))]
            }
            DispatchSubscriptionCallback { message, callback, source_stamp, message_timestamp } => {
                let mut v = vec![("message", Hex(*message)), ("callback", Hex(*callback)), ("source_stamp", Signed(*source_stamp))];
                if let Some(t) = message_timestamp {
                    v.push(("message_timestamp", Signed(*t)));
                }
                v
            }
            DispatchIntraProcessSubscriptionCallback { message, callback, message_timestamp } => {
                let mut v = vec![("message", Hex(*message)), ("callback", Hex(*callback))];
                if let Some(t) = message_timestamp {
                    v.push(("message_timestamp", Signed(*t)));
                }
                v
            }
            CaretDdsWrite { message } => vec![("message", Hex(*message))],
            CaretDdsBindAddrToStamp { addr, source_stamp } => vec![("addr", Hex(*addr)), ("source_stamp", Signed(*source_stamp))],
            CaretDdsBindAddrToAddr { addr_from, addr_to } => vec![("addr_from", Hex(*addr_from)), ("addr_to", Hex(*addr_to))],
            CaretOnDataAvailable { source_stamp } => vec![("source_stamp", Signed(*source_stamp))],
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
