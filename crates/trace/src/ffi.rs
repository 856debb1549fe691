//! The few libbabeltrace2 2.0 C functions this crate needs, declared by hand
//! from `/usr/include/babeltrace2` (see docs/tracing.md for why not a -sys crate).
#![allow(non_camel_case_types, dead_code)]

use std::os::raw::{c_char, c_int, c_void};

macro_rules! opaque {
    ($($name:ident),* $(,)?) => {
        $(#[repr(C)] pub struct $name { _private: [u8; 0] })*
    };
}

opaque!(
    bt_graph,
    bt_plugin,
    bt_component_class_source,
    bt_component_class_filter,
    bt_component_source,
    bt_component_filter,
    bt_component_sink,
    bt_port_output,
    bt_port_input,
    bt_connection,
    bt_value,
    bt_message_iterator,
    bt_message,
    bt_event,
    bt_event_class,
    bt_field,
    bt_field_class,
    bt_field_class_structure_member,
    bt_packet,
    bt_stream,
    bt_stream_class,
    bt_trace,
    bt_clock_snapshot,
    bt_clock_class,
    bt_error,
    bt_error_cause,
    bt_interrupter,
);

pub type bt_bool = c_int;

// func-status.h
pub const STATUS_OK: c_int = 0;
pub const STATUS_END: c_int = 1;
pub const STATUS_NOT_FOUND: c_int = 2;
pub const STATUS_INTERRUPTED: c_int = 4;
pub const STATUS_AGAIN: c_int = 11;
pub const STATUS_ERROR: c_int = -1;
pub const STATUS_MEMORY_ERROR: c_int = -12;

// logging.h
pub const BT_LOGGING_LEVEL_WARNING: c_int = 4;
pub const BT_LOGGING_LEVEL_NONE: c_int = 0xff;

// graph/message.h
pub const BT_MESSAGE_TYPE_STREAM_BEGINNING: c_int = 1 << 0;
pub const BT_MESSAGE_TYPE_STREAM_END: c_int = 1 << 1;
pub const BT_MESSAGE_TYPE_EVENT: c_int = 1 << 2;
pub const BT_MESSAGE_TYPE_PACKET_BEGINNING: c_int = 1 << 3;
pub const BT_MESSAGE_TYPE_PACKET_END: c_int = 1 << 4;
pub const BT_MESSAGE_TYPE_DISCARDED_EVENTS: c_int = 1 << 5;
pub const BT_MESSAGE_TYPE_DISCARDED_PACKETS: c_int = 1 << 6;
pub const BT_MESSAGE_TYPE_MESSAGE_ITERATOR_INACTIVITY: c_int = 1 << 7;

// trace-ir/field-class.h (bt_field_class_type is a 64-bit flag set)
pub const BT_FIELD_CLASS_TYPE_BOOL: u64 = 1 << 0;
pub const BT_FIELD_CLASS_TYPE_BIT_ARRAY: u64 = 1 << 1;
pub const BT_FIELD_CLASS_TYPE_INTEGER: u64 = 1 << 2;
pub const BT_FIELD_CLASS_TYPE_UNSIGNED_INTEGER: u64 = (1 << 3) | BT_FIELD_CLASS_TYPE_INTEGER;
pub const BT_FIELD_CLASS_TYPE_SIGNED_INTEGER: u64 = (1 << 4) | BT_FIELD_CLASS_TYPE_INTEGER;
pub const BT_FIELD_CLASS_TYPE_ENUMERATION: u64 = 1 << 5;
pub const BT_FIELD_CLASS_TYPE_REAL: u64 = 1 << 6;
pub const BT_FIELD_CLASS_TYPE_STRING: u64 = 1 << 9;
pub const BT_FIELD_CLASS_TYPE_STRUCTURE: u64 = 1 << 10;
pub const BT_FIELD_CLASS_TYPE_ARRAY: u64 = 1 << 11;
pub const BT_FIELD_CLASS_TYPE_OPTION: u64 = 1 << 16;
pub const BT_FIELD_CLASS_TYPE_VARIANT: u64 = 1 << 23;

// value.h
pub const BT_VALUE_TYPE_INTEGER: c_int = 1 << 2;
pub const BT_VALUE_TYPE_UNSIGNED_INTEGER: c_int = (1 << 3) | BT_VALUE_TYPE_INTEGER;
pub const BT_VALUE_TYPE_SIGNED_INTEGER: c_int = (1 << 4) | BT_VALUE_TYPE_INTEGER;
pub const BT_VALUE_TYPE_STRING: c_int = 1 << 6;

// types.h
pub const BT_PROPERTY_AVAILABILITY_AVAILABLE: c_int = 1;

pub type ConsumeFn = unsafe extern "C" fn(*mut bt_message_iterator, *mut c_void) -> c_int;
pub type InitFn = unsafe extern "C" fn(*mut bt_message_iterator, *mut c_void) -> c_int;
pub type FinalizeFn = unsafe extern "C" fn(*mut c_void);

#[link(name = "babeltrace2")]
extern "C" {
    // graph
    pub fn bt_graph_create(mip_version: u64) -> *mut bt_graph;
    pub fn bt_graph_put_ref(graph: *const bt_graph);
    pub fn bt_graph_add_source_component(
        graph: *mut bt_graph,
        class: *const bt_component_class_source,
        name: *const c_char,
        params: *const bt_value,
        logging_level: c_int,
        component: *mut *const bt_component_source,
    ) -> c_int;
    pub fn bt_graph_add_filter_component(
        graph: *mut bt_graph,
        class: *const bt_component_class_filter,
        name: *const c_char,
        params: *const bt_value,
        logging_level: c_int,
        component: *mut *const bt_component_filter,
    ) -> c_int;
    pub fn bt_graph_add_simple_sink_component(
        graph: *mut bt_graph,
        name: *const c_char,
        init: Option<InitFn>,
        consume: ConsumeFn,
        finalize: Option<FinalizeFn>,
        user_data: *mut c_void,
        component: *mut *const bt_component_sink,
    ) -> c_int;
    pub fn bt_graph_connect_ports(
        graph: *mut bt_graph,
        upstream: *const bt_port_output,
        downstream: *const bt_port_input,
        connection: *mut *const bt_connection,
    ) -> c_int;
    pub fn bt_graph_run_once(graph: *mut bt_graph) -> c_int;
    pub fn bt_graph_borrow_default_interrupter(graph: *mut bt_graph) -> *mut bt_interrupter;
    pub fn bt_interrupter_set(interrupter: *mut bt_interrupter);

    // plugins and components
    pub fn bt_plugin_find(
        name: *const c_char,
        find_in_std_env_var: bt_bool,
        find_in_user_dir: bt_bool,
        find_in_sys_dir: bt_bool,
        find_in_static: bt_bool,
        fail_on_load_error: bt_bool,
        plugin: *mut *const bt_plugin,
    ) -> c_int;
    pub fn bt_plugin_put_ref(plugin: *const bt_plugin);
    pub fn bt_plugin_borrow_source_component_class_by_name_const(
        plugin: *const bt_plugin,
        name: *const c_char,
    ) -> *const bt_component_class_source;
    pub fn bt_plugin_borrow_filter_component_class_by_name_const(
        plugin: *const bt_plugin,
        name: *const c_char,
    ) -> *const bt_component_class_filter;
    pub fn bt_component_source_get_output_port_count(c: *const bt_component_source) -> u64;
    pub fn bt_component_source_borrow_output_port_by_index_const(
        c: *const bt_component_source,
        index: u64,
    ) -> *const bt_port_output;
    pub fn bt_component_filter_get_input_port_count(c: *const bt_component_filter) -> u64;
    pub fn bt_component_filter_borrow_input_port_by_index_const(
        c: *const bt_component_filter,
        index: u64,
    ) -> *const bt_port_input;
    pub fn bt_component_filter_borrow_output_port_by_index_const(
        c: *const bt_component_filter,
        index: u64,
    ) -> *const bt_port_output;
    pub fn bt_component_sink_borrow_input_port_by_index_const(
        c: *const bt_component_sink,
        index: u64,
    ) -> *const bt_port_input;

    // values (component parameters, trace environment)
    pub fn bt_value_map_create() -> *mut bt_value;
    pub fn bt_value_array_create() -> *mut bt_value;
    pub fn bt_value_put_ref(v: *const bt_value);
    pub fn bt_value_array_append_string_element(v: *mut bt_value, s: *const c_char) -> c_int;
    pub fn bt_value_map_insert_entry(
        v: *mut bt_value,
        key: *const c_char,
        entry: *mut bt_value,
    ) -> c_int;
    pub fn bt_value_map_insert_string_entry(
        v: *mut bt_value,
        key: *const c_char,
        s: *const c_char,
    ) -> c_int;
    pub fn bt_value_get_type(v: *const bt_value) -> c_int;
    pub fn bt_value_string_get(v: *const bt_value) -> *const c_char;
    pub fn bt_value_integer_signed_get(v: *const bt_value) -> i64;
    pub fn bt_value_integer_unsigned_get(v: *const bt_value) -> u64;

    // message iterator and messages
    pub fn bt_message_iterator_next(
        it: *mut bt_message_iterator,
        messages: *mut *const *const bt_message,
        count: *mut u64,
    ) -> c_int;
    pub fn bt_message_get_type(m: *const bt_message) -> c_int;
    pub fn bt_message_put_ref(m: *const bt_message);
    pub fn bt_message_event_borrow_event_const(m: *const bt_message) -> *const bt_event;
    pub fn bt_message_event_borrow_default_clock_snapshot_const(
        m: *const bt_message,
    ) -> *const bt_clock_snapshot;
    pub fn bt_message_stream_beginning_borrow_stream_const(m: *const bt_message) -> *const bt_stream;
    pub fn bt_message_discarded_events_get_count(m: *const bt_message, count: *mut u64) -> c_int;
    pub fn bt_message_discarded_packets_get_count(m: *const bt_message, count: *mut u64) -> c_int;
    pub fn bt_message_discarded_events_borrow_stream_const(m: *const bt_message) -> *const bt_stream;
    pub fn bt_message_discarded_packets_borrow_stream_const(m: *const bt_message) -> *const bt_stream;

    // trace IR
    pub fn bt_stream_borrow_trace_const(s: *const bt_stream) -> *const bt_trace;
    pub fn bt_stream_borrow_class_const(s: *const bt_stream) -> *const bt_stream_class;
    pub fn bt_stream_class_borrow_default_clock_class_const(
        sc: *const bt_stream_class,
    ) -> *const bt_clock_class;
    pub fn bt_event_class_borrow_payload_field_class_const(
        ec: *const bt_event_class,
    ) -> *const bt_field_class;
    pub fn bt_stream_class_get_event_class_count(sc: *const bt_stream_class) -> u64;
    pub fn bt_stream_class_borrow_event_class_by_index_const(
        sc: *const bt_stream_class,
        index: u64,
    ) -> *const bt_event_class;
    pub fn bt_trace_borrow_environment_entry_value_by_name_const(
        t: *const bt_trace,
        name: *const c_char,
    ) -> *const bt_value;
    pub fn bt_event_borrow_class_const(e: *const bt_event) -> *const bt_event_class;
    pub fn bt_event_class_get_name(ec: *const bt_event_class) -> *const c_char;
    pub fn bt_event_borrow_payload_field_const(e: *const bt_event) -> *const bt_field;
    pub fn bt_event_borrow_common_context_field_const(e: *const bt_event) -> *const bt_field;
    pub fn bt_event_borrow_specific_context_field_const(e: *const bt_event) -> *const bt_field;
    pub fn bt_event_borrow_packet_const(e: *const bt_event) -> *const bt_packet;
    pub fn bt_event_borrow_stream_const(e: *const bt_event) -> *const bt_stream;
    pub fn bt_packet_borrow_context_field_const(p: *const bt_packet) -> *const bt_field;

    pub fn bt_field_get_class_type(f: *const bt_field) -> u64;
    pub fn bt_field_borrow_class_const(f: *const bt_field) -> *const bt_field_class;
    pub fn bt_field_structure_borrow_member_field_by_index_const(
        f: *const bt_field,
        index: u64,
    ) -> *const bt_field;
    pub fn bt_field_class_structure_get_member_count(fc: *const bt_field_class) -> u64;
    pub fn bt_field_class_structure_borrow_member_by_index_const(
        fc: *const bt_field_class,
        index: u64,
    ) -> *const bt_field_class_structure_member;
    pub fn bt_field_class_structure_member_get_name(
        m: *const bt_field_class_structure_member,
    ) -> *const c_char;
    pub fn bt_field_class_structure_member_borrow_field_class_const(
        m: *const bt_field_class_structure_member,
    ) -> *const bt_field_class;
    pub fn bt_field_class_get_type(fc: *const bt_field_class) -> u64;
    pub fn bt_field_integer_unsigned_get_value(f: *const bt_field) -> u64;
    pub fn bt_field_integer_signed_get_value(f: *const bt_field) -> i64;
    pub fn bt_field_bool_get_value(f: *const bt_field) -> bt_bool;
    pub fn bt_field_real_double_precision_get_value(f: *const bt_field) -> f64;
    pub fn bt_field_string_get_value(f: *const bt_field) -> *const c_char;
    pub fn bt_field_string_get_length(f: *const bt_field) -> u64;
    pub fn bt_field_array_get_length(f: *const bt_field) -> u64;
    pub fn bt_field_array_borrow_element_field_by_index_const(
        f: *const bt_field,
        index: u64,
    ) -> *const bt_field;

    pub fn bt_clock_snapshot_get_value(cs: *const bt_clock_snapshot) -> u64;
    pub fn bt_clock_snapshot_get_ns_from_origin(cs: *const bt_clock_snapshot, ns: *mut i64) -> c_int;
    pub fn bt_clock_snapshot_borrow_clock_class_const(
        cs: *const bt_clock_snapshot,
    ) -> *const bt_clock_class;
    pub fn bt_clock_class_get_name(cc: *const bt_clock_class) -> *const c_char;
    pub fn bt_clock_class_get_description(cc: *const bt_clock_class) -> *const c_char;
    pub fn bt_clock_class_get_frequency(cc: *const bt_clock_class) -> u64;
    pub fn bt_clock_class_get_offset(cc: *const bt_clock_class, seconds: *mut i64, cycles: *mut u64);
    pub fn bt_clock_class_get_precision(cc: *const bt_clock_class) -> u64;
    pub fn bt_clock_class_origin_is_unix_epoch(cc: *const bt_clock_class) -> bt_bool;
    pub fn bt_clock_class_get_uuid(cc: *const bt_clock_class) -> *const u8;

    // error reporting
    pub fn bt_current_thread_take_error() -> *const bt_error;
    pub fn bt_current_thread_clear_error();
    pub fn bt_error_release(e: *const bt_error);
    pub fn bt_error_get_cause_count(e: *const bt_error) -> u64;
    pub fn bt_error_borrow_cause_by_index(e: *const bt_error, index: u64) -> *const bt_error_cause;
    pub fn bt_error_cause_get_message(c: *const bt_error_cause) -> *const c_char;
    pub fn bt_error_cause_get_module_name(c: *const bt_error_cause) -> *const c_char;
}
