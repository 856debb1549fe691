//! Turning babeltrace2 event objects into [`Ros2Event`]s.
//!
//! Looking fields up by name for every event would cost more than the rest of
//! the read, so each event class gets a [`ClassDecoder`] once (member indices
//! and integer signedness of the fields it needs), kept in a bounded table.

use std::ffi::CStr;
use std::sync::Arc;

use crate::event::{Gid, Ros2Event, GID_SIZE};
use crate::ffi::*;

/// Which `ros2:*` event an event class is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    RclInit,
    RclNodeInit,
    RmwPublisherInit,
    RclPublisherInit,
    RclcppPublish,
    RclPublish,
    RmwPublish,
    RmwSubscriptionInit,
    RclSubscriptionInit,
    RclcppSubscriptionInit,
    RclcppSubscriptionCallbackAdded,
    RmwTake,
    RclTake,
    RclcppTake,
    RclTimerInit,
    RclcppTimerCallbackAdded,
    RclcppTimerLinkNode,
    RclcppCallbackRegister,
    CallbackStart,
    CallbackEnd,
    RclcppIntraPublish,
    RclServiceInit,
    RclcppServiceCallbackAdded,
    RclClientInit,
    RmwClientInit,
    RmwSendRequest,
    RmwTakeRequest,
    RmwSendResponse,
    RmwTakeResponse,
    RclcppExecutorGetNextReady,
    RclcppExecutorWaitForWork,
    RclcppExecutorExecute,
    DispatchSubscriptionCallback,
    DispatchIntraProcessSubscriptionCallback,
    RclcppIpbToSubscription,
    RclcppBufferToIpb,
    RclcppRingBufferEnqueue,
    RclcppRingBufferDequeue,
    CaretDdsWrite,
    CaretDdsBindAddrToStamp,
    CaretDdsBindAddrToAddr,
    CaretOnDataAvailable,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    Int,
    Str,
    Gid,
}

/// (field name, type, required)
type Spec = &'static [(&'static str, Want, bool)];

fn spec(kind: Kind) -> Spec {
    use Kind::*;
    use Want::*;
    match kind {
        RclInit => &[("context_handle", Int, true), ("version", Str, true)],
        RclNodeInit => &[
            ("node_handle", Int, true),
            ("rmw_handle", Int, true),
            ("node_name", Str, true),
            ("namespace", Str, true),
        ],
        RmwPublisherInit => &[("rmw_publisher_handle", Int, true), ("gid", Gid, true)],
        RclPublisherInit => &[
            ("publisher_handle", Int, true),
            ("node_handle", Int, true),
            ("rmw_publisher_handle", Int, true),
            ("topic_name", Str, true),
            ("queue_depth", Int, true),
        ],
        RclcppPublish => &[("publisher_handle", Int, false), ("message", Int, true)],
        RclcppIntraPublish => &[("publisher_handle", Int, true), ("message", Int, true)],
        RclPublish => &[("publisher_handle", Int, true), ("message", Int, true)],
        RmwPublish => &[
            ("rmw_publisher_handle", Int, false),
            ("message", Int, true),
            ("timestamp", Int, false),
        ],
        RmwSubscriptionInit => &[("rmw_subscription_handle", Int, true), ("gid", Gid, true)],
        RclSubscriptionInit => &[
            ("subscription_handle", Int, true),
            ("node_handle", Int, true),
            ("rmw_subscription_handle", Int, true),
            ("topic_name", Str, true),
            ("queue_depth", Int, true),
        ],
        RclcppSubscriptionInit => &[("subscription_handle", Int, true), ("subscription", Int, true)],
        RclcppSubscriptionCallbackAdded => &[("subscription", Int, true), ("callback", Int, true)],
        RmwTake => &[
            ("rmw_subscription_handle", Int, true),
            ("message", Int, true),
            ("source_timestamp", Int, true),
            ("taken", Int, true),
        ],
        RclTake | RclcppTake => &[("message", Int, true)],
        RclTimerInit => &[("timer_handle", Int, true), ("period", Int, true)],
        RclcppTimerCallbackAdded => &[("timer_handle", Int, true), ("callback", Int, true)],
        RclcppTimerLinkNode => &[("timer_handle", Int, true), ("node_handle", Int, true)],
        RclcppCallbackRegister => &[("callback", Int, true), ("symbol", Str, true)],
        CallbackStart => &[("callback", Int, true), ("is_intra_process", Int, true)],
        CallbackEnd => &[("callback", Int, true)],
        RclServiceInit => &[
            ("service_handle", Int, true),
            ("node_handle", Int, true),
            ("rmw_service_handle", Int, true),
            ("service_name", Str, true),
        ],
        RclcppServiceCallbackAdded => &[("service_handle", Int, true), ("callback", Int, true)],
        RclClientInit => &[
            ("client_handle", Int, true),
            ("node_handle", Int, true),
            ("rmw_client_handle", Int, true),
            ("service_name", Str, true),
        ],
        RmwClientInit => &[("rmw_client_handle", Int, true), ("gid", Gid, true)],
        RmwSendRequest => &[("rmw_client_handle", Int, true), ("request", Int, true), ("sequence_number", Int, true)],
        RmwTakeRequest => &[
            ("rmw_service_handle", Int, true),
            ("request", Int, true),
            ("client_gid", Gid, true),
            ("sequence_number", Int, true),
            ("taken", Int, true),
        ],
        RmwSendResponse => &[
            ("rmw_service_handle", Int, true),
            ("response", Int, true),
            ("client_gid", Gid, true),
            ("sequence_number", Int, true),
            ("timestamp", Int, true),
        ],
        RmwTakeResponse => &[
            ("rmw_client_handle", Int, true),
            ("response", Int, true),
            ("sequence_number", Int, true),
            ("source_timestamp", Int, true),
            ("taken", Int, true),
        ],
        RclcppExecutorGetNextReady => &[],
        RclcppExecutorWaitForWork => &[("timeout", Int, true)],
        RclcppExecutorExecute => &[("handle", Int, true)],
        DispatchSubscriptionCallback => &[
            ("message", Int, true),
            ("callback", Int, true),
            ("source_stamp", Int, true),
            ("message_timestamp", Int, false),
        ],
        DispatchIntraProcessSubscriptionCallback => &[("message", Int, true), ("callback", Int, true), ("message_timestamp", Int, false)],
        RclcppIpbToSubscription => &[("ipb", Int, true), ("subscription", Int, true)],
        RclcppBufferToIpb => &[("buffer", Int, true), ("ipb", Int, true)],
        RclcppRingBufferEnqueue => &[("buffer", Int, true), ("index", Int, true), ("size", Int, true), ("overwritten", Int, true)],
        RclcppRingBufferDequeue => &[("buffer", Int, true), ("index", Int, true), ("size", Int, true)],
        CaretDdsWrite => &[("message", Int, true)],
        CaretDdsBindAddrToStamp => &[("addr", Int, true), ("source_stamp", Int, true)],
        CaretDdsBindAddrToAddr => &[("addr_from", Int, true), ("addr_to", Int, true)],
        CaretOnDataAvailable => &[("source_stamp", Int, true)],
    }
}

fn kind_of(name: &str) -> Option<Kind> {
    use Kind::*;
    if let Some(n) = name.strip_prefix("ros2_caret:") {
        return Some(match n {
            "dds_write" => CaretDdsWrite,
            "dds_bind_addr_to_stamp" => CaretDdsBindAddrToStamp,
            "dds_bind_addr_to_addr" => CaretDdsBindAddrToAddr,
            "on_data_available" => CaretOnDataAvailable,
            _ => return None,
        });
    }
    let n = name.strip_prefix("ros2:")?;
    Some(match n {
        "rcl_init" => RclInit,
        "rcl_node_init" => RclNodeInit,
        "rmw_publisher_init" => RmwPublisherInit,
        "rcl_publisher_init" => RclPublisherInit,
        "rclcpp_publish" => RclcppPublish,
        "rcl_publish" => RclPublish,
        "rmw_publish" => RmwPublish,
        "rmw_subscription_init" => RmwSubscriptionInit,
        "rcl_subscription_init" => RclSubscriptionInit,
        "rclcpp_subscription_init" => RclcppSubscriptionInit,
        "rclcpp_subscription_callback_added" => RclcppSubscriptionCallbackAdded,
        "rmw_take" => RmwTake,
        "rcl_take" => RclTake,
        "rclcpp_take" => RclcppTake,
        "rcl_timer_init" => RclTimerInit,
        "rclcpp_timer_callback_added" => RclcppTimerCallbackAdded,
        "rclcpp_timer_link_node" => RclcppTimerLinkNode,
        "rclcpp_callback_register" => RclcppCallbackRegister,
        "callback_start" => CallbackStart,
        "callback_end" => CallbackEnd,
        "rclcpp_intra_publish" => RclcppIntraPublish,
        "rcl_service_init" => RclServiceInit,
        "rclcpp_service_callback_added" => RclcppServiceCallbackAdded,
        "rcl_client_init" => RclClientInit,
        "rmw_client_init" => RmwClientInit,
        "rmw_send_request" => RmwSendRequest,
        "rmw_take_request" => RmwTakeRequest,
        "rmw_send_response" => RmwSendResponse,
        "rmw_take_response" => RmwTakeResponse,
        "rclcpp_executor_get_next_ready" => RclcppExecutorGetNextReady,
        "rclcpp_executor_wait_for_work" => RclcppExecutorWaitForWork,
        "rclcpp_executor_execute" => RclcppExecutorExecute,
        "dispatch_subscription_callback" => DispatchSubscriptionCallback,
        "dispatch_intra_process_subscription_callback" => DispatchIntraProcessSubscriptionCallback,
        "rclcpp_ipb_to_subscription" => RclcppIpbToSubscription,
        "rclcpp_buffer_to_ipb" => RclcppBufferToIpb,
        "rclcpp_ring_buffer_enqueue" => RclcppRingBufferEnqueue,
        "rclcpp_ring_buffer_dequeue" => RclcppRingBufferDequeue,
        _ => return None,
    })
}

/// Where one wanted field sits in the payload structure.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    index: u64,
    signed: bool,
}

/// What to do with events of one class.
#[derive(Clone, Debug)]
pub(crate) enum ClassDecoder {
    Ros2 { kind: Kind, slots: [Option<Slot>; 5] },
    /// A `ros2:*` event this crate does not model, or any other provider's event.
    Unknown { name: Arc<str> },
    /// A modeled `ros2:*` name whose layout is not ros2_tracing's (a field
    /// missing or of another type): its events are counted, not decoded.
    Malformed { name: Arc<str>, reason: String },
}

pub(crate) unsafe fn cstr_lossy(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Index of the member called `name` in a structure field class.
pub(crate) unsafe fn member_index(fc: *const bt_field_class, name: &str) -> Option<u64> {
    if fc.is_null() || bt_field_class_get_type(fc) != BT_FIELD_CLASS_TYPE_STRUCTURE {
        return None;
    }
    let n = bt_field_class_structure_get_member_count(fc);
    (0..n).find(|&i| {
        let m = bt_field_class_structure_borrow_member_by_index_const(fc, i);
        let p = bt_field_class_structure_member_get_name(m);
        !p.is_null() && CStr::from_ptr(p).to_bytes() == name.as_bytes()
    })
}

pub(crate) unsafe fn member_class(fc: *const bt_field_class, index: u64) -> *const bt_field_class {
    let m = bt_field_class_structure_borrow_member_by_index_const(fc, index);
    bt_field_class_structure_member_borrow_field_class_const(m)
}

impl ClassDecoder {
    pub(crate) unsafe fn build(ec: *const bt_event_class) -> ClassDecoder {
        let name: Arc<str> = cstr_lossy(bt_event_class_get_name(ec)).into();
        let Some(kind) = kind_of(&name) else {
            return ClassDecoder::Unknown { name };
        };
        let payload = bt_event_class_borrow_payload_field_class_const(ec);
        let mut slots = [None; 5];
        for (i, &(field, want, required)) in spec(kind).iter().enumerate() {
            let Some(index) = member_index(payload, field) else {
                if required {
                    return ClassDecoder::Malformed { name, reason: format!("no field `{field}`") };
                }
                continue;
            };
            let t = bt_field_class_get_type(member_class(payload, index));
            let ok = match want {
                Want::Int => t & BT_FIELD_CLASS_TYPE_INTEGER == BT_FIELD_CLASS_TYPE_INTEGER,
                Want::Str => t == BT_FIELD_CLASS_TYPE_STRING,
                Want::Gid => t & BT_FIELD_CLASS_TYPE_ARRAY == BT_FIELD_CLASS_TYPE_ARRAY,
            };
            if !ok {
                return ClassDecoder::Malformed {
                    name,
                    reason: format!("field `{field}` has an unexpected type"),
                };
            }
            let signed = t & BT_FIELD_CLASS_TYPE_SIGNED_INTEGER == BT_FIELD_CLASS_TYPE_SIGNED_INTEGER;
            slots[i] = Some(Slot { index, signed });
        }
        ClassDecoder::Ros2 { kind, slots }
    }
}

unsafe fn int_u(payload: *const bt_field, s: Slot) -> u64 {
    let f = bt_field_structure_borrow_member_field_by_index_const(payload, s.index);
    if s.signed {
        bt_field_integer_signed_get_value(f) as u64
    } else {
        bt_field_integer_unsigned_get_value(f)
    }
}

unsafe fn int_i(payload: *const bt_field, s: Slot) -> i64 {
    let f = bt_field_structure_borrow_member_field_by_index_const(payload, s.index);
    if s.signed {
        bt_field_integer_signed_get_value(f)
    } else {
        bt_field_integer_unsigned_get_value(f) as i64
    }
}

unsafe fn string(payload: *const bt_field, s: Slot) -> String {
    let f = bt_field_structure_borrow_member_field_by_index_const(payload, s.index);
    cstr_lossy(bt_field_string_get_value(f))
}

/// The gid array: up to 24 elements copied, each an integer (a shorter array,
/// as a 16-byte gid would be, leaves the rest zero). `None` when an element is
/// not an integer.
unsafe fn gid(payload: *const bt_field, s: Slot) -> Option<Gid> {
    let f = bt_field_structure_borrow_member_field_by_index_const(payload, s.index);
    let n = bt_field_array_get_length(f).min(GID_SIZE as u64);
    let mut g = [0u8; GID_SIZE];
    for i in 0..n {
        let e = bt_field_array_borrow_element_field_by_index_const(f, i);
        let t = bt_field_get_class_type(e);
        if t & BT_FIELD_CLASS_TYPE_INTEGER != BT_FIELD_CLASS_TYPE_INTEGER {
            return None;
        }
        g[i as usize] = if t & BT_FIELD_CLASS_TYPE_SIGNED_INTEGER == BT_FIELD_CLASS_TYPE_SIGNED_INTEGER {
            bt_field_integer_signed_get_value(e) as u8
        } else {
            bt_field_integer_unsigned_get_value(e) as u8
        };
    }
    Some(Gid(g))
}

/// Decodes one event's payload with its class decoder (`Kind` and slots from `build`).
/// `None` only when a gid array holds non-integers (counted as malformed by the caller).
pub(crate) unsafe fn decode(kind: Kind, slots: &[Option<Slot>; 5], payload: *const bt_field) -> Option<Ros2Event> {
    use Kind::*;
    // Required slots are always Some (checked in `build`).
    let u = |i: usize| slots[i].map(|s| int_u(payload, s)).unwrap_or(0);
    let i64_ = |i: usize| slots[i].map(|s| int_i(payload, s)).unwrap_or(0);
    let st = |i: usize| slots[i].map(|s| string(payload, s)).unwrap_or_default();
    Some(match kind {
        RclInit => Ros2Event::RclInit { context_handle: u(0), version: st(1) },
        RclNodeInit => Ros2Event::RclNodeInit {
            node_handle: u(0),
            rmw_handle: u(1),
            node_name: st(2),
            namespace: st(3),
        },
        RmwPublisherInit => Ros2Event::RmwPublisherInit {
            rmw_publisher_handle: u(0),
            gid: gid(payload, slots[1]?)?,
        },
        RclPublisherInit => Ros2Event::RclPublisherInit {
            publisher_handle: u(0),
            node_handle: u(1),
            rmw_publisher_handle: u(2),
            topic_name: st(3),
            queue_depth: u(4),
        },
        RclcppPublish => Ros2Event::RclcppPublish { publisher_handle: slots[0].map(|s| int_u(payload, s)), message: u(1) },
        RclcppIntraPublish => Ros2Event::RclcppIntraPublish { publisher_handle: u(0), message: u(1) },
        RclPublish => Ros2Event::RclPublish { publisher_handle: u(0), message: u(1) },
        RmwPublish => Ros2Event::RmwPublish {
            rmw_publisher_handle: slots[0].map(|s| int_u(payload, s)),
            message: u(1),
            timestamp: slots[2].map(|s| int_i(payload, s)),
        },
        RmwSubscriptionInit => Ros2Event::RmwSubscriptionInit {
            rmw_subscription_handle: u(0),
            gid: gid(payload, slots[1]?)?,
        },
        RclSubscriptionInit => Ros2Event::RclSubscriptionInit {
            subscription_handle: u(0),
            node_handle: u(1),
            rmw_subscription_handle: u(2),
            topic_name: st(3),
            queue_depth: u(4),
        },
        RclcppSubscriptionInit => {
            Ros2Event::RclcppSubscriptionInit { subscription_handle: u(0), subscription: u(1) }
        }
        RclcppSubscriptionCallbackAdded => {
            Ros2Event::RclcppSubscriptionCallbackAdded { subscription: u(0), callback: u(1) }
        }
        RmwTake => Ros2Event::RmwTake {
            rmw_subscription_handle: u(0),
            message: u(1),
            source_timestamp: i64_(2),
            taken: i64_(3) as i32,
        },
        RclTake => Ros2Event::RclTake { message: u(0) },
        RclcppTake => Ros2Event::RclcppTake { message: u(0) },
        RclTimerInit => Ros2Event::RclTimerInit { timer_handle: u(0), period: i64_(1) },
        RclcppTimerCallbackAdded => {
            Ros2Event::RclcppTimerCallbackAdded { timer_handle: u(0), callback: u(1) }
        }
        RclcppTimerLinkNode => Ros2Event::RclcppTimerLinkNode { timer_handle: u(0), node_handle: u(1) },
        RclcppCallbackRegister => Ros2Event::RclcppCallbackRegister { callback: u(0), symbol: st(1) },
        CallbackStart => Ros2Event::CallbackStart { callback: u(0), is_intra_process: i64_(1) as i32 },
        CallbackEnd => Ros2Event::CallbackEnd { callback: u(0) },
        RclServiceInit => Ros2Event::RclServiceInit { service_handle: u(0), node_handle: u(1), rmw_service_handle: u(2), service_name: st(3) },
        RclcppServiceCallbackAdded => Ros2Event::RclcppServiceCallbackAdded { service_handle: u(0), callback: u(1) },
        RclClientInit => Ros2Event::RclClientInit { client_handle: u(0), node_handle: u(1), rmw_client_handle: u(2), service_name: st(3) },
        RmwClientInit => Ros2Event::RmwClientInit { rmw_client_handle: u(0), gid: gid(payload, slots[1]?)? },
        RmwSendRequest => Ros2Event::RmwSendRequest { rmw_client_handle: u(0), request: u(1), sequence_number: i64_(2) },
        RmwTakeRequest => Ros2Event::RmwTakeRequest {
            rmw_service_handle: u(0),
            request: u(1),
            client_gid: gid(payload, slots[2]?)?,
            sequence_number: i64_(3),
            taken: i64_(4) as i32,
        },
        RmwSendResponse => Ros2Event::RmwSendResponse {
            rmw_service_handle: u(0),
            response: u(1),
            client_gid: gid(payload, slots[2]?)?,
            sequence_number: i64_(3),
            timestamp: i64_(4),
        },
        RmwTakeResponse => Ros2Event::RmwTakeResponse {
            rmw_client_handle: u(0),
            response: u(1),
            sequence_number: i64_(2),
            source_timestamp: i64_(3),
            taken: i64_(4) as i32,
        },
        RclcppExecutorGetNextReady => Ros2Event::RclcppExecutorGetNextReady,
        RclcppExecutorWaitForWork => Ros2Event::RclcppExecutorWaitForWork { timeout: i64_(0) },
        RclcppExecutorExecute => Ros2Event::RclcppExecutorExecute { handle: u(0) },
        DispatchSubscriptionCallback => Ros2Event::DispatchSubscriptionCallback {
            message: u(0),
            callback: u(1),
            source_stamp: i64_(2),
            message_timestamp: slots[3].map(|s| int_i(payload, s)),
        },
        DispatchIntraProcessSubscriptionCallback => Ros2Event::DispatchIntraProcessSubscriptionCallback {
            message: u(0),
            callback: u(1),
            message_timestamp: slots[2].map(|s| int_i(payload, s)),
        },
        RclcppIpbToSubscription => Ros2Event::RclcppIpbToSubscription { ipb: u(0), subscription: u(1) },
        RclcppBufferToIpb => Ros2Event::RclcppBufferToIpb { buffer: u(0), ipb: u(1) },
        RclcppRingBufferEnqueue => Ros2Event::RclcppRingBufferEnqueue { buffer: u(0), index: u(1), size: u(2), overwritten: i64_(3) as i32 },
        RclcppRingBufferDequeue => Ros2Event::RclcppRingBufferDequeue { buffer: u(0), index: u(1), size: u(2) },
        CaretDdsWrite => Ros2Event::CaretDdsWrite { message: u(0) },
        CaretDdsBindAddrToStamp => Ros2Event::CaretDdsBindAddrToStamp { addr: u(0), source_stamp: i64_(1) },
        CaretDdsBindAddrToAddr => Ros2Event::CaretDdsBindAddrToAddr { addr_from: u(0), addr_to: u(1) },
        CaretOnDataAvailable => Ros2Event::CaretOnDataAvailable { source_stamp: i64_(0) },
    })
}
