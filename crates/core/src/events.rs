//! The event schema: one record per RTPS submessage seen at one capture
//! point. Field names are part of the interface (DESIGN.md, thesis Table 3.1);
//! every sink and analysis reads these.

use crate::discovery::{EndpointInfo, TopicNames};
use crate::record::{opt_i, opt_u, Value};
use crate::ros_graph::RosNode;
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::{Guid, GuidPrefix};
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TrafficType {
    /// SPDP and SEDP.
    Discovery,
    /// Application topics (what a topic is unless its writers say otherwise).
    #[default]
    User,
    /// Other builtin endpoints (participant messages / liveliness, type lookup, vendor entities).
    Builtin,
    /// DDS-Security endpoints and SEC_*/SRTPS_* submessages.
    Security,
}

impl TrafficType {
    pub fn as_str(&self) -> &'static str {
        match self {
            TrafficType::Discovery => "discovery",
            TrafficType::User => "user",
            TrafficType::Builtin => "builtin",
            TrafficType::Security => "security",
        }
    }
}

/// One RTPS submessage at one capture point.
#[derive(Debug, Clone)]
pub struct SubmsgEvent {
    /// Capture-point name (file stem or agent name).
    pub capture: Arc<str>,
    /// 1-based frame number at which the UDP datagram was complete.
    pub frame: u64,
    /// Capture time of that frame (ns since the Unix epoch).
    pub ts_ns: i64,
    pub interface: u32,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub vlan_id: Option<u16>,
    pub pcp: Option<u8>,
    pub ip_id: u32,
    /// IP fragments of the datagram (1 when not fragmented).
    pub ip_frags: u16,
    /// Capture times of the datagram's first and last IP fragment.
    pub ip_first_ts_ns: i64,
    pub ip_last_ts_ns: i64,
    /// Length of the RTPS message (UDP payload) in bytes.
    pub rtps_len: u32,
    pub vendor_id: u16,
    /// Source participant in force (RTPS header or INFO_SRC).
    pub guid_prefix: GuidPrefix,
    /// 0-based position of the submessage within its RTPS message.
    pub submsg_index: u16,
    pub kind: SubmsgKind,
    pub flags: u8,
    /// Submessage body length (octetsToNextHeader).
    pub submsg_len: u32,
    pub traffic_type: TrafficType,
    pub writer_id: Option<Guid>,
    pub reader_id: Option<Guid>,
    pub sn: Option<i64>,
    pub fragment_starting_num: Option<u32>,
    pub frags_in_submsg: Option<u16>,
    pub fragment_size: Option<u16>,
    /// Serialized sample size: DATA_FRAG's sampleSize, or DATA's payload length.
    pub sample_size: Option<u32>,
    /// Serialized payload bytes this submessage carries.
    pub payload_size: Option<u32>,
    /// INFO_TS in force, ns since the Unix epoch.
    pub source_ts_ns: Option<i64>,
    /// The writer's topic, once discovery has been seen.
    pub topic: Option<Arc<TopicNames>>,
    /// The ROS 2 node owning the writer, once its participant's `ros_discovery_info` has been seen.
    pub writer_node: Option<Arc<RosNode>>,
    /// The ROS 2 node owning the reader (a specific reader: ACKNACK, NACK_FRAG, directed DATA/HEARTBEAT).
    pub reader_node: Option<Arc<RosNode>>,
    pub hb_first_sn: Option<i64>,
    pub hb_last_sn: Option<i64>,
    pub count: Option<i32>,
    pub set_base: Option<i64>,
    pub set_num_bits: Option<u32>,
    /// Members of the ACKNACK/NACK_FRAG/GAP set (bitmap relative to `set_base`).
    pub set_bits: [u32; 8],
    pub gap_start: Option<i64>,
    pub last_fragment_num: Option<u32>,
    /// F flag of HEARTBEAT/ACKNACK.
    pub final_flag: Option<bool>,
    /// PID_STATUS_INFO of DATA (1 = disposed, 2 = unregistered).
    pub status_info: Option<u32>,
    pub key_hash: Option<[u8; 16]>,
    /// On SEDP DATA (or the DATA_FRAG that completes an SEDP sample): what it announces.
    pub endpoint: Option<Arc<EndpointInfo>>,
    /// Events decoded from Zenoh: the Zenoh message and its key expression
    /// (None for RTPS). See [`crate::zenoh`].
    pub zenoh: Option<Box<ZenohInfo>>,
}

/// The Zenoh side of an event decoded from Zenoh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZenohInfo {
    /// The Zenoh message: `PUT`, `DECLARE_TOKEN`, `INIT_SYN`, `FRAGMENT`, …
    pub msg: &'static str,
    /// The message's key expression, resolved through the session's declarations.
    pub key_expr: Option<Arc<str>>,
    /// The sending session's Zenoh id, when its handshake was captured.
    pub zid: Option<Arc<str>>,
    /// The receiving session's Zenoh id, when its handshake was captured
    /// (with `zid`: which node a message left and which it reached; the router hop).
    pub peer_zid: Option<Arc<str>>,
    /// Capture time of the frame that carried the message's first byte (on
    /// TCP, a segment; on UDP, the first IP fragment of the first datagram).
    pub first_byte_ts_ns: i64,
}

impl SubmsgEvent {
    pub fn blank(capture: Arc<str>) -> Self {
        let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        SubmsgEvent {
            capture,
            frame: 0,
            ts_ns: 0,
            interface: 0,
            src: any,
            dst: any,
            vlan_id: None,
            pcp: None,
            ip_id: 0,
            ip_frags: 1,
            ip_first_ts_ns: 0,
            ip_last_ts_ns: 0,
            rtps_len: 0,
            vendor_id: 0,
            guid_prefix: GuidPrefix::UNKNOWN,
            submsg_index: 0,
            kind: SubmsgKind::Pad,
            flags: 0,
            submsg_len: 0,
            traffic_type: TrafficType::User,
            writer_id: None,
            reader_id: None,
            sn: None,
            fragment_starting_num: None,
            frags_in_submsg: None,
            fragment_size: None,
            sample_size: None,
            payload_size: None,
            source_ts_ns: None,
            topic: None,
            writer_node: None,
            reader_node: None,
            hb_first_sn: None,
            hb_last_sn: None,
            count: None,
            set_base: None,
            set_num_bits: None,
            set_bits: [0; 8],
            gap_start: None,
            last_fragment_num: None,
            final_flag: None,
            status_info: None,
            key_hash: None,
            endpoint: None,
            zenoh: None,
        }
    }

    /// When the event's message was first seen: the frame completing its
    /// datagram (RTPS, as tshark times it), or the frame carrying its first
    /// byte (Zenoh, whose messages span TCP segments).
    pub fn first_seen_ts_ns(&self) -> i64 {
        self.zenoh.as_ref().map_or(self.ts_ns, |z| z.first_byte_ts_ns)
    }

    /// DATA or DATA_FRAG.
    pub fn is_data(&self) -> bool {
        matches!(self.kind, SubmsgKind::Data | SubmsgKind::DataFrag)
    }

    pub fn topic_name(&self) -> Option<&str> {
        self.topic.as_deref().map(|t| t.topic_name.as_str())
    }

    /// Fragment numbers this submessage carries (1 for DATA).
    pub fn fragment_range(&self) -> (u32, u32) {
        match (self.fragment_starting_num, self.frags_in_submsg) {
            (Some(s), Some(n)) => (s, n as u32),
            _ => (1, 1),
        }
    }
}

crate::record!(SubmsgEvent, r, {
    capture: Str => Value::S(&r.capture),
    frame: U64 => Value::U(r.frame),
    ts_ns: I64 => Value::I(r.ts_ns),
    interface: U64 => Value::U(r.interface as u64),
    src: Str => Value::Addr(r.src),
    dst: Str => Value::Addr(r.dst),
    vlan_id: U64 => opt_u(r.vlan_id),
    pcp: U64 => opt_u(r.pcp),
    ip_id: U64 => Value::U(r.ip_id as u64),
    ip_frags: U64 => Value::U(r.ip_frags as u64),
    ip_first_ts_ns: I64 => Value::I(r.ip_first_ts_ns),
    ip_last_ts_ns: I64 => Value::I(r.ip_last_ts_ns),
    rtps_len: U64 => Value::U(r.rtps_len as u64),
    vendor_id: Str => Value::Vendor(r.vendor_id),
    guid_prefix: Str => Value::Prefix(r.guid_prefix),
    submsg_index: U64 => Value::U(r.submsg_index as u64),
    kind: Str => Value::Kind(r.kind),
    flags: U64 => Value::U(r.flags as u64),
    submsg_len: U64 => Value::U(r.submsg_len as u64),
    traffic_type: Str => Value::S(r.traffic_type.as_str()),
    writer_id: Str => r.writer_id.map_or(Value::Null, Value::Guid),
    reader_id: Str => r.reader_id.map_or(Value::Null, Value::Guid),
    sn: I64 => opt_i(r.sn),
    fragment_starting_num: U64 => opt_u(r.fragment_starting_num),
    frags_in_submsg: U64 => opt_u(r.frags_in_submsg),
    fragment_size: U64 => opt_u(r.fragment_size),
    sample_size: U64 => opt_u(r.sample_size),
    payload_size: U64 => opt_u(r.payload_size),
    source_ts_ns: I64 => opt_i(r.source_ts_ns),
    topic_name: Str => r.topic.as_deref().map_or(Value::Null, |t| Value::S(&t.topic_name)),
    writer_node: Str => r.writer_node.as_deref().map_or(Value::Null, |n| Value::S(&n.fq_name)),
    reader_node: Str => r.reader_node.as_deref().map_or(Value::Null, |n| Value::S(&n.fq_name)),
    type_name: Str => r.topic.as_deref().map_or(Value::Null, |t| Value::S(&t.type_name)),
    topic_raw: Str => r.topic.as_deref().map_or(Value::Null, |t| Value::S(&t.topic_raw)),
    type_raw: Str => r.topic.as_deref().map_or(Value::Null, |t| Value::S(&t.type_raw)),
    hb_first_sn: I64 => opt_i(r.hb_first_sn),
    hb_last_sn: I64 => opt_i(r.hb_last_sn),
    count: I64 => opt_i(r.count),
    set_base: I64 => opt_i(r.set_base),
    set_num_bits: U64 => opt_u(r.set_num_bits),
    set: Str => match (r.set_base, r.set_num_bits) {
            (Some(b), Some(n)) => Value::Set(b, r.set_bits, n),
            _ => Value::Null,
        },
    gap_start: I64 => opt_i(r.gap_start),
    last_fragment_num: U64 => opt_u(r.last_fragment_num),
    final_flag: Bool => r.final_flag.map_or(Value::Null, Value::B),
    status_info: U64 => opt_u(r.status_info),
    key_hash: Str => r.key_hash.and_then(|k| Guid::from_slice(&k)).map_or(Value::Null, Value::Guid),
    endpoint_id: Str => r.endpoint.as_deref().map_or(Value::Null, |e| Value::Guid(e.guid)),
    endpoint_kind: Str => r.endpoint.as_deref().map_or(Value::Null, |e| {
            Value::S(match e.kind {
                crate::discovery::EndpointKind::Writer => "writer",
                crate::discovery::EndpointKind::Reader => "reader",
            })
        }),
    endpoint_topic_raw: Str => r.endpoint.as_deref().map_or(Value::Null, |e| Value::S(&e.names.topic_raw)),
    endpoint_type_raw: Str => r.endpoint.as_deref().map_or(Value::Null, |e| Value::S(&e.names.type_raw)),
    domain: U64 => r.domain().map_or(Value::Null, |d| Value::U(d as u64)),
    protocol: Str => Value::S(if r.zenoh.is_some() { "zenoh" } else { "rtps" }),
    zenoh_msg: Str => r.zenoh.as_deref().map_or(Value::Null, |z| Value::S(z.msg)),
    key_expr: Str => r.zenoh.as_deref().and_then(|z| z.key_expr.as_deref()).map_or(Value::Null, Value::S),
    zenoh_zid: Str => r.zenoh.as_deref().and_then(|z| z.zid.as_deref()).map_or(Value::Null, Value::S),
});

impl SubmsgEvent {
    /// The DDS domain: the writer's (from discovery), else the announced endpoint's,
    /// else that of the destination port (RTPS port mapping, `discovery::domain_of_port`).
    pub fn domain(&self) -> Option<u32> {
        self.topic
            .as_ref()
            .and_then(|t| t.domain)
            .or_else(|| self.endpoint.as_ref().and_then(|e| e.names.domain))
            // RTPS ports say the domain; Zenoh's do not (its key expressions do).
            .or_else(|| if self.zenoh.is_some() { None } else { crate::discovery::domain_of_destination(&self.dst) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Record;

    #[test]
    fn every_column_has_a_value_arm() {
        let e = SubmsgEvent::blank(Arc::from("x"));
        assert_eq!(SubmsgEvent::columns().len(), 55);
        // The last column must be reachable (no silent Null for a listed column).
        let names: Vec<_> = SubmsgEvent::columns().iter().map(|c| c.name).collect();
        let unique: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "duplicate column names");
        assert!(matches!(e.value(0), Value::S("x")));
        assert!(matches!(e.value(16), Value::Kind(SubmsgKind::Pad)));
    }
}

