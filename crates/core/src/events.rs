//! The event schema: one record per RTPS submessage seen at one capture
//! point. Field names are part of the interface (DESIGN.md, thesis Table 3.1);
//! every sink and analysis reads these.

use crate::discovery::{EndpointInfo, TopicNames};
use crate::record::{col, ColType::*, Column, Record, Value};
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::{Guid, GuidPrefix};
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrafficType {
    /// SPDP and SEDP.
    Discovery,
    /// Application topics.
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
        }
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

const COLUMNS: &[Column] = &[
    col("capture", Str),
    col("frame", U64),
    col("ts_ns", I64),
    col("interface", U64),
    col("src", Str),
    col("dst", Str),
    col("vlan_id", U64),
    col("pcp", U64),
    col("ip_id", U64),
    col("ip_frags", U64),
    col("ip_first_ts_ns", I64),
    col("ip_last_ts_ns", I64),
    col("rtps_len", U64),
    col("vendor_id", Str),
    col("guid_prefix", Str),
    col("submsg_index", U64),
    col("kind", Str),
    col("flags", U64),
    col("submsg_len", U64),
    col("traffic_type", Str),
    col("writer_id", Str),
    col("reader_id", Str),
    col("sn", I64),
    col("fragment_starting_num", U64),
    col("frags_in_submsg", U64),
    col("fragment_size", U64),
    col("sample_size", U64),
    col("payload_size", U64),
    col("source_ts_ns", I64),
    col("topic_name", Str),
    col("type_name", Str),
    col("topic_raw", Str),
    col("type_raw", Str),
    col("hb_first_sn", I64),
    col("hb_last_sn", I64),
    col("count", I64),
    col("set_base", I64),
    col("set_num_bits", U64),
    col("set", Str),
    col("gap_start", I64),
    col("last_fragment_num", U64),
    col("final_flag", Bool),
    col("status_info", U64),
    col("key_hash", Str),
    col("endpoint_id", Str),
    col("endpoint_kind", Str),
    col("endpoint_topic_raw", Str),
    col("endpoint_type_raw", Str),
];

fn opt_u<T: Into<u64>>(v: Option<T>) -> Value<'static> {
    v.map_or(Value::Null, |v| Value::U(v.into()))
}
fn opt_i<T: Into<i64>>(v: Option<T>) -> Value<'static> {
    v.map_or(Value::Null, |v| Value::I(v.into()))
}

impl Record for SubmsgEvent {
    fn columns() -> &'static [Column] {
        COLUMNS
    }

    fn value(&self, column: usize) -> Value<'_> {
        match column {
            0 => Value::S(&self.capture),
            1 => Value::U(self.frame),
            2 => Value::I(self.ts_ns),
            3 => Value::U(self.interface as u64),
            4 => Value::Addr(self.src),
            5 => Value::Addr(self.dst),
            6 => opt_u(self.vlan_id),
            7 => opt_u(self.pcp),
            8 => Value::U(self.ip_id as u64),
            9 => Value::U(self.ip_frags as u64),
            10 => Value::I(self.ip_first_ts_ns),
            11 => Value::I(self.ip_last_ts_ns),
            12 => Value::U(self.rtps_len as u64),
            13 => Value::Vendor(self.vendor_id),
            14 => Value::Prefix(self.guid_prefix),
            15 => Value::U(self.submsg_index as u64),
            16 => Value::Kind(self.kind),
            17 => Value::U(self.flags as u64),
            18 => Value::U(self.submsg_len as u64),
            19 => Value::S(self.traffic_type.as_str()),
            20 => self.writer_id.map_or(Value::Null, Value::Guid),
            21 => self.reader_id.map_or(Value::Null, Value::Guid),
            22 => opt_i(self.sn),
            23 => opt_u(self.fragment_starting_num),
            24 => opt_u(self.frags_in_submsg),
            25 => opt_u(self.fragment_size),
            26 => opt_u(self.sample_size),
            27 => opt_u(self.payload_size),
            28 => opt_i(self.source_ts_ns),
            29 => self.topic.as_deref().map_or(Value::Null, |t| Value::S(&t.topic_name)),
            30 => self.topic.as_deref().map_or(Value::Null, |t| Value::S(&t.type_name)),
            31 => self.topic.as_deref().map_or(Value::Null, |t| Value::S(&t.topic_raw)),
            32 => self.topic.as_deref().map_or(Value::Null, |t| Value::S(&t.type_raw)),
            33 => opt_i(self.hb_first_sn),
            34 => opt_i(self.hb_last_sn),
            35 => opt_i(self.count),
            36 => opt_i(self.set_base),
            37 => opt_u(self.set_num_bits),
            38 => match (self.set_base, self.set_num_bits) {
                (Some(b), Some(n)) => Value::Set(b, self.set_bits, n),
                _ => Value::Null,
            },
            39 => opt_i(self.gap_start),
            40 => opt_u(self.last_fragment_num),
            41 => self.final_flag.map_or(Value::Null, Value::B),
            42 => opt_u(self.status_info),
            43 => self.key_hash.and_then(|k| Guid::from_slice(&k)).map_or(Value::Null, Value::Guid),
            44 => self.endpoint.as_deref().map_or(Value::Null, |e| Value::Guid(e.guid)),
            45 => self.endpoint.as_deref().map_or(Value::Null, |e| {
                Value::S(match e.kind {
                    crate::discovery::EndpointKind::Writer => "writer",
                    crate::discovery::EndpointKind::Reader => "reader",
                })
            }),
            46 => self.endpoint.as_deref().map_or(Value::Null, |e| Value::S(&e.names.topic_raw)),
            47 => self.endpoint.as_deref().map_or(Value::Null, |e| Value::S(&e.names.type_raw)),
            _ => Value::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_column_has_a_value_arm() {
        let e = SubmsgEvent::blank(Arc::from("x"));
        assert_eq!(COLUMNS.len(), 48);
        // The last column must be reachable (no silent Null for a listed column).
        let names: Vec<_> = COLUMNS.iter().map(|c| c.name).collect();
        let unique: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "duplicate column names");
        assert!(matches!(e.value(0), Value::S("x")));
        assert!(matches!(e.value(16), Value::Kind(SubmsgKind::Pad)));
    }
}

