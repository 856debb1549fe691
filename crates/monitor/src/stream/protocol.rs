//! What agents send to the central `ddscope serve`: batches of correlation
//! items (sample records, DATA_FRAG sightings, watermarks) — exactly what the
//! offline correlator consumes — plus the agent's topic table, system metrics
//! and capture counters. JSON over HTTP POST to `/api/v1/ingest`.

use ddscope_core::discovery::TopicNames;
use ddscope_core::events::TrafficType;
use ddscope_core::latency::{FragSighting, Item};
use ddscope_core::ros2::{PublishRec, TakeRec, TraceItem};
use ddscope_core::samples::SampleRecord;
use ddscope_wire::Guid;
use ddscope_core::bounded::BoundedMap;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub const INGEST_PATH: &str = "/api/v1/ingest";
/// The agent's name, also sent as a header so that the server can check it
/// and apply the agent's rate limit before reading the body.
pub const AGENT_HEADER: &str = "x-ddscope-agent";

/// A sample record on the wire between agent and server.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StreamSample {
    pub w: String,
    pub sn: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<(String, String)>,
    pub tt: u8,
    pub first: i64,
    pub first_ip: i64,
    pub last: i64,
    pub complete: bool,
    pub size: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsize: Option<u16>,
    pub fexp: u32,
    pub fseen: u32,
    pub ipf: u32,
    pub retx: u32,
    pub retx_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcp: Option<u8>,
    pub vendor: u16,
    /// A supplement, not a sample: 1 = repair (`closed_by = "retransmission"`),
    /// 2 = copy to another reader (`closed_by = "copy"`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub supp: u8,
    /// The sample's source timestamp (INFO_TS), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sts: Option<i64>,
    /// Zenoh: the keys of the Zenoh ids of the session that sent this sighting and of the one
    /// that received it ([`ddscope_core::samples::zid_key`]), which the router hop is found by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub z: Option<(u64, u64)>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StreamFrag {
    pub w: String,
    pub sn: i64,
    pub frag: u32,
    pub first_ip: i64,
    pub last: i64,
    /// (topic, type) as on the wire; only over OTLP (a shard may know no earlier record of the writer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<(String, String)>,
}

/// A publish from the host's ros2_tracing trace (times on the trace clock, ns).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StreamPublish {
    pub pid: i64,
    pub tid: i64,
    /// The DDS writer GUID (hex), when the trace declared the publisher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rclcpp: Option<i64>,
    /// `rmw_publish` (CARET: `dds_write`); absent for intra-process publishes and Galactic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rmw: Option<i64>,
    /// The source timestamp when the trace records it (`rmw_publish.timestamp`, Jazzy on; CARET).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sts: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<u64>,
    /// The take (its `seq`) whose callback made this publish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<u64>,
    /// The publish's number in its trace (intra-process takes name it).
    #[serde(default)]
    pub seq: u64,
    /// The rcl publisher handle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ph: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcl: Option<i64>,
    /// Humble/Iron: the trace-clock window of the source timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub win: Option<(i64, i64)>,
    /// The latest takes (topic, seq) of the publishing node when its callback started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<(String, u64)>,
    /// The callback the publish was made in started here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cbs: Option<i64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub intra: bool,
}

/// A take from the host's ros2_tracing trace, with its callback.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StreamTake {
    pub seq: u64,
    pub pid: i64,
    pub tid: i64,
    /// The DDS reader GUID (hex), when the trace declared the subscription.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `rmw_take.source_timestamp` (absent for intra-process deliveries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sts: Option<i64>,
    pub take: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cbs: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cbe: Option<i64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub intra: bool,
    /// The intra-process publish (its `seq`) this delivery came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<u64>,
    /// The subscription's history depth (takes without source timestamp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qd: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum StreamItem {
    Sample(StreamSample),
    Frag(StreamFrag),
    Watermark { t: i64 },
    /// Trace side (the agent's `--trace-live`): publishes, takes and the trace's watermark.
    Publish(StreamPublish),
    Take(StreamTake),
    TraceWatermark { t: i64 },
    /// A self-identifying submessage seen at the agent's capture point (clock evidence: `serve`'s
    /// clock tracker pairs it with its sighting at another agent, docs/latency.md "Clocks").
    Exchange(StreamExchange),
}

/// A clock tracker's exchange on the wire: the submessage's key (the same at every capture point),
/// its time, the sender's address and participant.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StreamExchange {
    pub key: u64,
    pub t: i64,
    pub src: std::net::IpAddr,
    /// The sending participant's GUID prefix (24 hex digits).
    pub p: String,
}

fn prefix_of(s: &str) -> Option<ddscope_wire::GuidPrefix> {
    let b = s.as_bytes();
    if b.len() != 24 {
        return None;
    }
    let mut out = [0u8; 12];
    for (i, pair) in b.chunks(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(ddscope_wire::GuidPrefix(out))
}

/// Decoded by [`ItemDecoder`]: for the capture side or for the trace side of the correlator.
#[derive(Debug)]
pub enum Decoded {
    Capture(Item),
    Trace(TraceItem),
}

fn tt_code(t: TrafficType) -> u8 {
    match t {
        TrafficType::Discovery => 0,
        TrafficType::User => 1,
        TrafficType::Builtin => 2,
        TrafficType::Security => 3,
    }
}

fn tt_of(c: u8) -> TrafficType {
    match c {
        0 => TrafficType::Discovery,
        2 => TrafficType::Builtin,
        3 => TrafficType::Security,
        _ => TrafficType::User,
    }
}

impl StreamItem {
    pub fn sample(r: &SampleRecord) -> StreamItem {
        StreamItem::Sample(StreamSample {
            w: r.writer_id.to_string(),
            sn: r.sn,
            topic: r.topic.as_ref().map(|t| (t.topic_raw.clone(), t.type_raw.clone())),
            tt: tt_code(r.traffic_type),
            first: r.first_ts_ns,
            first_ip: r.first_ip_ts_ns,
            last: r.last_ts_ns,
            complete: r.complete,
            size: r.sample_size,
            fsize: r.fragment_size,
            fexp: r.frags_expected,
            fseen: r.frags_seen,
            ipf: r.ip_frags,
            retx: r.retransmitted_frags,
            retx_bytes: r.retransmitted_bytes,
            pcp: r.pcp,
            vendor: r.vendor_id,
            supp: match r.closed_by {
                ddscope_core::samples::CLOSED_RETRANSMISSION => 1,
                ddscope_core::samples::CLOSED_COPY => 2,
                _ => 0,
            },
            sts: r.source_ts_ns,
            z: r.zenoh_zids,
        })
    }

    /// A trace item on the wire (`End` travels as the batch's `last` flag).
    pub fn trace(t: &TraceItem) -> Option<StreamItem> {
        let s = |v: &Option<Arc<str>>| v.as_deref().map(str::to_string);
        Some(match t {
            TraceItem::Publish(p) => StreamItem::Publish(StreamPublish {
                pid: p.vpid,
                tid: p.vtid,
                w: p.writer.map(|g| g.to_string()),
                topic: s(&p.topic),
                node: s(&p.node),
                rclcpp: p.rclcpp_ts,
                rmw: p.rmw_ts,
                sts: p.source_ts,
                order: p.order,
                cause: p.cause,
                seq: p.seq,
                ph: p.publisher,
                rcl: p.rcl_ts,
                win: p.window,
                inputs: p.inputs.iter().map(|(t, s)| (t.to_string(), *s)).collect(),
                cbs: p.callback_start,
                intra: p.intra,
            }),
            TraceItem::Take(k) => StreamItem::Take(StreamTake {
                seq: k.seq,
                pid: k.vpid,
                tid: k.vtid,
                r: k.reader.map(|g| g.to_string()),
                topic: s(&k.topic),
                node: s(&k.node),
                sts: k.source_ts,
                take: k.rmw_take_ts,
                cbs: k.callback_start_ts,
                cbe: k.callback_end_ts,
                intra: k.intra,
                ip: k.intra_publish,
                qd: k.queue_depth,
            }),
            TraceItem::Watermark(w) => StreamItem::TraceWatermark { t: *w },
            // Callback durations stay with the agent's own view.
            TraceItem::Callback(_) | TraceItem::End => return None,
        })
    }

    pub fn exchange(x: &ddscope_core::latency::clock::Exchange) -> StreamItem {
        StreamItem::Exchange(StreamExchange { key: x.key, t: x.ts_ns, src: x.src, p: x.prefix.to_string() })
    }

    pub fn frag(f: &FragSighting) -> StreamItem {
        StreamItem::Frag(StreamFrag {
            w: f.writer.to_string(),
            sn: f.sn,
            frag: f.fragment_starting_num,
            first_ip: f.first_ip_ts_ns,
            last: f.last_ts_ns,
            topic: None,
        })
    }
}

/// Topic names and writers remembered per agent stream (least recently
/// seen evicted first; a writer whose entry was evicted is named again by
/// its next sample record, which carries its topic). The defaults of
/// [`StreamCaps`] (`ddscope limits`, section `stream`).
pub const MAX_STREAM_TOPICS: usize = 16_384;
pub const MAX_STREAM_WRITERS: usize = 65_536;

pub use ddscope_core::limits::StreamCaps;

/// `s` cut at `max` bytes with the marker every name cut from the wire gets
/// (`…[truncated, N bytes]`, [`ddscope_core::names`]): a name an agent's
/// decoder already cut passes unchanged, so `serve` names what `latency`
/// names; `cut` counts the names cut here.
pub fn cap_name(s: String, max: usize, cut: &mut u64) -> String {
    match ddscope_core::names::cap_str(&s, max) {
        std::borrow::Cow::Borrowed(_) => s,
        std::borrow::Cow::Owned(o) => {
            *cut += 1;
            o
        }
    }
}

/// Heap bytes one entry of the name tables holds (the names, twice: raw and de-mangled, and the entry).
fn names_weight(n: &TopicNames) -> usize {
    n.topic_raw.capacity() + n.type_raw.capacity() + n.topic_name.capacity() + n.type_name.capacity() + std::mem::size_of::<TopicNames>() + 64
}

/// Turns stream items back into correlator items, sharing topic names.
/// Every name is cut to `max_name_bytes` first; the (topic, type) table and
/// the writers' table are each capped in entries and in bytes, and the
/// ROS node and topic names of trace items are shared through a third
/// table of the same byte cap.
pub struct ItemDecoder {
    caps: StreamCaps,
    names: BoundedMap<(String, String), Arc<TopicNames>>,
    topic_of: BoundedMap<Guid, Arc<TopicNames>>,
    strings: BoundedMap<String, Arc<str>>,
    /// Names cut to `max_name_bytes`.
    pub names_cut: u64,
}

impl Default for ItemDecoder {
    fn default() -> Self {
        ItemDecoder::new(StreamCaps::default())
    }
}

impl ItemDecoder {
    pub fn new(caps: StreamCaps) -> Self {
        ItemDecoder {
            caps,
            names: BoundedMap::new(caps.max_topics).with_max_weight(caps.max_topic_bytes),
            topic_of: BoundedMap::new(caps.max_writers).with_max_weight(caps.max_topic_bytes),
            strings: BoundedMap::new(caps.max_topics).with_max_weight(caps.max_topic_bytes),
            names_cut: 0,
        }
    }

    /// Entries evicted from the name tables (topics, writers; trace strings are counted with the topics).
    pub fn evicted(&self) -> (u64, u64) {
        (self.names.evicted() + self.strings.evicted(), self.topic_of.evicted())
    }

    /// Bytes held by the name tables (topics, writers, trace strings).
    pub fn bytes(&self) -> (usize, usize, usize) {
        (self.names.weight(), self.topic_of.weight(), self.strings.weight())
    }

    /// The shared names of (topic, type), cut to the name cap; remembered as `writer`'s topic.
    fn topic(&mut self, writer: Guid, k: (String, String)) -> Arc<TopicNames> {
        let max = self.caps.max_name_bytes;
        // An rmw_zenoh sample's topic is its data key expression (`0/drive/…/hash`), named as
        // `latency` names it: read from the whole key, then cut (the key at twice the name cap).
        let mut cap = ddscope_core::names::NameCap::new(max);
        let zenoh = ddscope_core::zenoh::names_of_data_key(&k.0, &mut cap);
        self.names_cut += cap.truncated;
        let k = match &zenoh {
            Some(z) => (z.topic_raw.clone(), cap_name(k.1, max, &mut self.names_cut)),
            None => (cap_name(k.0, max, &mut self.names_cut), cap_name(k.1, max, &mut self.names_cut)),
        };
        let t = match self.names.slot(&k) {
            Some(slot) => {
                self.names.touch_at(slot);
                self.names.value_at(slot).map(|t| t.clone())
            }
            None => None,
        };
        let t = match t {
            Some(t) => t,
            None => {
                let t = Arc::new(zenoh.unwrap_or_else(|| TopicNames::capped(&k.0, &k.1, &mut ddscope_core::names::NameCap::new(max))));
                let w = names_weight(&t) + k.0.capacity() + k.1.capacity();
                let slot = self.names.get_or_insert_slot(k, || t.clone(), &mut |_, _| {});
                self.names.set_weight_at(slot, w, &mut |_, _| {});
                t
            }
        };
        let w = names_weight(&t);
        let slot = self.topic_of.get_or_insert_slot(writer, || t.clone(), &mut |_, _| {});
        if let Some(v) = self.topic_of.value_at(slot) {
            *v = t.clone();
        }
        // Counted per writer even when shared: the bound holds if the names table forgot the names.
        self.topic_of.set_weight_at(slot, w, &mut |_, _| {});
        t
    }

    /// A trace item's node or topic name, cut and shared.
    fn string(&mut self, s: Option<String>) -> Option<Arc<str>> {
        let s = cap_name(s?, self.caps.max_name_bytes, &mut self.names_cut);
        if let Some(slot) = self.strings.slot(&s) {
            self.strings.touch_at(slot);
            return self.strings.value_at(slot).map(|v| v.clone());
        }
        let v: Arc<str> = Arc::from(s.as_str());
        let w = s.capacity() * 2 + 64;
        let slot = self.strings.get_or_insert_slot(s, || v.clone(), &mut |_, _| {});
        self.strings.set_weight_at(slot, w, &mut |_, _| {});
        Some(v)
    }

    /// Decodes a capture or trace item.
    pub fn decode(&mut self, capture: &Arc<str>, w: StreamItem) -> Result<Decoded, String> {
        let guid = |s: &Option<String>| match s {
            None => Ok(None),
            Some(s) => Guid::parse_hex(s).map(Some).ok_or_else(|| format!("bad GUID {s:?}")),
        };
        Ok(match w {
            StreamItem::Publish(p) => Decoded::Trace(TraceItem::Publish(PublishRec {
                vpid: p.pid,
                vtid: p.tid,
                writer: guid(&p.w)?,
                topic: self.string(p.topic),
                node: self.string(p.node),
                rclcpp_ts: p.rclcpp,
                rmw_ts: p.rmw,
                source_ts: p.sts,
                order: p.order,
                cause: p.cause,
                seq: p.seq,
                publisher: p.ph,
                rcl_ts: p.rcl,
                window: p.win,
                inputs: p.inputs.into_iter().take(8).map(|(t, s)| (Arc::<str>::from(t.as_str()), s)).collect(),
                callback: None,
                callback_start: p.cbs,
                intra: p.intra,
            })),
            StreamItem::Take(k) => Decoded::Trace(TraceItem::Take(TakeRec {
                seq: k.seq,
                vpid: k.pid,
                vtid: k.tid,
                reader: guid(&k.r)?,
                topic: self.string(k.topic),
                node: self.string(k.node),
                source_ts: k.sts,
                rmw_take_ts: k.take,
                callback_start_ts: k.cbs,
                callback_end_ts: k.cbe,
                intra: k.intra,
                intra_publish: k.ip,
                queue_depth: k.qd,
            })),
            StreamItem::TraceWatermark { t } => Decoded::Trace(TraceItem::Watermark(t)),
            other => Decoded::Capture(self.item(capture, other)?),
        })
    }

    pub fn item(&mut self, capture: &Arc<str>, w: StreamItem) -> Result<Item, String> {
        let guid = |s: &str| Guid::parse_hex(s).ok_or_else(|| format!("bad writer GUID {s:?}"));
        Ok(match w {
            StreamItem::Publish(_) | StreamItem::Take(_) | StreamItem::TraceWatermark { .. } => {
                return Err("a trace item where a capture item was expected".into())
            }
            StreamItem::Watermark { t } => Item::Watermark(t),
            StreamItem::Exchange(x) => Item::Exchange(ddscope_core::latency::clock::Exchange {
                key: x.key,
                ts_ns: x.t,
                src: x.src,
                prefix: prefix_of(&x.p).ok_or_else(|| format!("bad participant prefix {:?}", x.p.chars().take(40).collect::<String>()))?,
            }),
            StreamItem::Frag(f) => {
                let writer = guid(&f.w)?;
                if let Some(k) = f.topic {
                    self.topic(writer, k);
                }
                Item::Frag(FragSighting {
                    writer,
                    sn: f.sn,
                    fragment_starting_num: f.frag,
                    first_ip_ts_ns: f.first_ip,
                    last_ts_ns: f.last,
                    topic: self.topic_of.get_touch(&writer).map(|t| t.clone()),
                })
            }
            StreamItem::Sample(s) => {
                let writer = guid(&s.w)?;
                let topic = match s.topic {
                    Some(k) => Some(self.topic(writer, k)),
                    None => self.topic_of.get_touch(&writer).map(|t| t.clone()),
                };
                Item::Sample(SampleRecord {
                    capture: capture.clone(),
                    writer_id: writer,
                    sn: s.sn,
                    topic,
                    // Node names stay at the agent (its topic table carries them).
                    node: None,
                    traffic_type: tt_of(s.tt),
                    first_ts_ns: s.first,
                    first_ip_ts_ns: s.first_ip,
                    last_ts_ns: s.last,
                    complete: s.complete,
                    first_frame: 0,
                    last_frame: 0,
                    sample_size: s.size,
                    fragment_size: s.fsize,
                    frags_expected: s.fexp,
                    frags_seen: s.fseen,
                    submsgs: 0,
                    ip_frags: s.ipf,
                    bytes: 0,
                    retransmitted_frags: s.retx,
                    retransmitted_bytes: s.retx_bytes,
                    destinations: 1,
                    nack_frags: 0,
                    pcp: s.pcp,
                    vendor_id: s.vendor,
                    closed_by: match s.supp {
                        1 => ddscope_core::samples::CLOSED_RETRANSMISSION,
                        2 => ddscope_core::samples::CLOSED_COPY,
                        _ => ddscope_core::samples::ClosedBy::Agent,
                    },
                    source_ts_ns: s.sts,
                    dst: None,
                    zenoh_zids: s.z,
                })
            }
        })
    }
}

/// One metric sample (node_exporter style): name, labels, value.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MetricSample {
    pub name: String,
    #[serde(default)]
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

/// One POST from an agent.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Batch {
    /// Capture-point name (`--name`).
    pub agent: String,
    /// Batch number, from 1; a jump means batches were lost.
    pub seq: u64,
    /// The agent's wall clock when it sent the batch (ns).
    pub sent_ns: i64,
    pub items: Vec<StreamItem>,
    /// Items the agent dropped because its queue was full.
    pub dropped_items: u64,
    /// The agent's per-topic table (`ddscope live` rows), when it changed.
    #[serde(default)]
    pub topics: Option<serde_json::Value>,
    /// System metrics with node_exporter names.
    #[serde(default)]
    pub system: Vec<MetricSample>,
    /// Capture and decode counters.
    #[serde(default)]
    pub counters: Option<serde_json::Value>,
    /// The agent is shutting down.
    #[serde(default)]
    pub last: bool,
}

/// Longest agent name (`--name`) accepted.
pub const MAX_AGENT_NAME: usize = 64;

/// Agent names are 1 to [`MAX_AGENT_NAME`] characters without control characters.
pub fn check_agent_name(name: &str) -> Result<(), String> {
    let n = name.chars().count();
    if n == 0 || n > MAX_AGENT_NAME {
        return Err(format!("agent name must be 1 to {MAX_AGENT_NAME} characters (got {n})"));
    }
    if name.chars().any(char::is_control) {
        return Err("agent name must not contain control characters".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_round_trip() {
        let r = SampleRecord {
            capture: Arc::from("pc1"),
            writer_id: Guid::parse_hex("0110aaaa0102030405060708000012 03".replace(' ', "").as_str()).unwrap(),
            sn: 7,
            topic: Some(Arc::new(TopicNames::new("rt/image", "sensor_msgs::msg::dds_::Image_"))),
            node: None,
            traffic_type: TrafficType::User,
            first_ts_ns: 10,
            first_ip_ts_ns: 9,
            last_ts_ns: 20,
            complete: true,
            first_frame: 1,
            last_frame: 2,
            sample_size: 100,
            fragment_size: Some(10),
            frags_expected: 10,
            frags_seen: 10,
            submsgs: 1,
            ip_frags: 3,
            bytes: 100,
            retransmitted_frags: 1,
            retransmitted_bytes: 10,
            destinations: 1,
            nack_frags: 0,
            pcp: Some(5),
            vendor_id: 0x0110,
            closed_by: ddscope_core::samples::ClosedBy::Complete,
            source_ts_ns: Some(5),
            dst: None,
            zenoh_zids: None,
        };
        let json = serde_json::to_string(&StreamItem::sample(&r)).unwrap();
        let back: StreamItem = serde_json::from_str(&json).unwrap();
        let mut d = ItemDecoder::default();
        match d.item(&Arc::from("pc1"), back).unwrap() {
            Item::Sample(s) => {
                assert_eq!((s.writer_id, s.sn, s.last_ts_ns, s.sample_size, s.pcp), (r.writer_id, 7, 20, 100, Some(5)));
                assert_eq!(s.topic.unwrap().topic_name, "/image");
            }
            other => panic!("{other:?}"),
        }
        assert!(d.item(&Arc::from("pc1"), StreamItem::Frag(StreamFrag { w: "zz".into(), sn: 1, frag: 1, first_ip: 0, last: 0, topic: None })).is_err());
        // An rmw_zenoh sample: its topic is the data key expression, named as the agent's decoder names it.
        let key = "0/drive/autoware_auto_vehicle_msgs::msg::dds_::VelocityReport_/TypeHashNotSupported";
        let z = SampleRecord { topic: ddscope_core::zenoh::names_of_data_key(key, &mut Default::default()).map(Arc::new), sn: 8, ..r };
        let back: StreamItem = serde_json::from_str(&serde_json::to_string(&StreamItem::sample(&z)).unwrap()).unwrap();
        match d.item(&Arc::from("pc1"), back).unwrap() {
            Item::Sample(s) => {
                let t = s.topic.unwrap();
                assert_eq!((t.topic_name.as_str(), t.type_name.as_str(), t.domain), ("/drive", "autoware_auto_vehicle_msgs/msg/VelocityReport", Some(0)));
            }
            other => panic!("{other:?}"),
        }
    }
}

fn is_zero(v: &u8) -> bool {
    *v == 0
}
