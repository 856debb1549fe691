//! Stateful decoding of Zenoh at one capture point: TCP streams put back in
//! order and cut into batches, UDP datagrams taken as batches, fragmented
//! messages joined, key expressions resolved through the sessions'
//! declarations, rmw_zenoh's liveliness tokens remembered, and one
//! [`SubmsgEvent`] per Zenoh message.
//!
//! A `PUT` on an rmw_zenoh data key expression whose attachment is rmw_zenoh's
//! is a ROS 2 sample: it becomes a `DATA` event with `writer_id` = the
//! attachment's 16-byte gid and `sn` = its sequence number, so samples,
//! topics and cross-capture latency treat it exactly like an RTPS sample
//! (writer GUID, sn). Its first-seen time is the capture time of the frame
//! that carried the message's first byte (a TCP segment, or the first
//! fragment), its completion the frame that carried its last byte.
//!
//! Every table here is keyed by values from the wire and capped, with the
//! least recently used entry evicted first and every eviction counted in
//! [`ZenohStats`]. Bytes that cannot be decoded are counted, never silent:
//! a TCP gap (a segment missing from the capture) drops the direction's
//! partial batch and waits for a segment that starts a batch again.

use crate::bounded::BoundedMap;
use crate::discovery::{Durability, EndpointInfo, EndpointKind, History, Liveliness, LivelinessKind, QosDuration, Reliability, TopicNames};
use crate::events::{SubmsgEvent, TrafficType, ZenohInfo};
use crate::names::NameCap;
use crate::ros;
use crate::ros_graph::RosNode;
use ddscope_wire::link::VlanTag;
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::tcp::Segment;
use ddscope_wire::{EntityId, Guid, GuidPrefix};
use ddscope_zenoh::codec::{mid, Proto, Reader, ZError};
use ddscope_zenoh::network::{self, Declaration, NetworkMsg, PushBody, WireExpr};
use ddscope_zenoh::transport::{self, FrameMsgs, TransportMsg};
use ddscope_zenoh::{rmw, ZenohId};
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

/// Caps of the Zenoh tables (see docs/robustness.md and `ddscope limits`).
#[derive(Debug, Clone, Copy)]
pub struct ZenohLimits {
    /// TCP stream directions followed at once (least recently active dropped first).
    pub max_streams: usize,
    /// Memory of the partial batches of all streams.
    pub max_stream_bytes: usize,
    /// Key expressions declared by the sessions (least recently used forgotten first).
    pub max_keyexprs: usize,
    /// Memory of the declared key expressions.
    pub max_keyexpr_bytes: usize,
    /// Fragmented messages being joined at once (least recently active dropped first).
    pub max_fragmented: usize,
    /// Bytes kept of each fragmented message: its head (key expression,
    /// attachment, the start of the payload); the rest is counted, not kept.
    pub max_fragment_head: usize,
    /// rmw_zenoh liveliness tokens remembered (gid → node, topic, type, QoS).
    pub max_tokens: usize,
    /// Memory of the remembered tokens (their names, each already cut at `max_name_bytes`).
    pub max_token_bytes: usize,
    /// Zenoh sessions whose Zenoh ids are remembered.
    pub max_sessions: usize,
    /// Longest name kept from a key expression or token (topic, type, type
    /// hash, node, namespace, enclave, Zenoh id, QoS): the decoder's
    /// `discovery.max_name_bytes`, the same cut as SEDP names. A whole key
    /// expression is kept up to twice that ([`key_cap`]).
    pub max_name_bytes: usize,
}

/// Longest whole key expression kept (on events, `dissect`'s `key_expr`, a
/// Zenoh topic's raw name): twice the name cap, 512 bytes by default. A key
/// expression is several names: an rmw_zenoh data key of the longest topic
/// ROS 2 allows (255 bytes) with its type and its 71-byte RIHS01 hash fits,
/// so a real key is never cut; longer ones are cut with the marker.
pub fn key_cap(max_name_bytes: usize) -> usize {
    max_name_bytes.saturating_mul(2)
}

impl Default for ZenohLimits {
    fn default() -> Self {
        ZenohLimits {
            max_streams: 4096,
            max_stream_bytes: 64 << 20,
            max_keyexprs: 65536,
            max_keyexpr_bytes: 16 << 20,
            max_fragmented: 1024,
            max_fragment_head: 64 << 10,
            max_tokens: 65536,
            max_token_bytes: 16 << 20,
            max_sessions: 4096,
            max_name_bytes: crate::names::DEFAULT_MAX_NAME_BYTES,
        }
    }
}

/// What was decoded, skipped and evicted. Every batch ends up decoded or in
/// one of these counters.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ZenohStats {
    /// TCP segments of streams taken as Zenoh.
    pub tcp_segments: u64,
    /// UDP datagrams taken as Zenoh batches.
    pub udp_datagrams: u64,
    /// Multicast scouting datagrams (port 7446): counted, not decoded.
    pub scouting_datagrams: u64,
    pub batches: u64,
    /// Messages decoded, by name (`PUT`, `DECLARE_TOKEN`, `INIT_SYN`, `FRAGMENT`, …).
    pub messages: BTreeMap<&'static str, u64>,
    /// PUTs whose payload is in shared memory (only a descriptor on the wire; size unknown).
    pub shm_puts: u64,
    /// PUTs that carry an rmw_zenoh attachment: ROS 2 samples.
    pub ros_samples: u64,
    /// PUTs whose key expression is an rmw_zenoh data key but whose attachment is missing or not rmw_zenoh's.
    pub ros_puts_without_attachment: u64,
    /// Messages whose key expression refers to a declaration not seen (capture started late, or evicted).
    pub unresolved_keyexprs: u64,
    /// Batches that did not decode to the end (the rest of the batch is skipped).
    pub malformed_batches: u64,
    /// Batches cut short (snap length, or the stream was lost mid-batch).
    pub truncated_batches: u64,
    /// InitSyn/InitAck/Join of a protocol version other than 1.x (0x09) and 0.11 (0x08): the session is not decoded.
    pub other_version_sessions: u64,
    /// InitSyn/InitAck/Join of protocol version 0x08 (Zenoh 0.11, rmw_zenoh_cpp of 2024): decoded with 0.11's layouts.
    pub v08_sessions: u64,
    /// rmw_zenoh_cpp of 2024 (protocol 0x08) gives a publisher a random gid, not the hash of its
    /// token: sample gids tied to the only publisher token of their data key expression.
    pub ros_gids_bound: u64,
    /// Sample gids of a 0x08 session whose data key has publisher tokens of several nodes: not tied, no node named.
    pub ros_gids_ambiguous: u64,
    /// Batches of a session that negotiated compression or authentication: not decoded.
    pub undecodable_batches: u64,
    /// Bytes a TCP stream skipped: gaps in the capture, or bytes before a batch boundary was found.
    pub tcp_bytes_skipped: u64,
    /// Gaps (segments missing from the capture) in TCP streams.
    pub tcp_gaps: u64,
    /// Retransmitted TCP bytes (already seen, not decoded twice).
    pub tcp_retransmitted_bytes: u64,
    /// Segments captured ahead of the bytes before them, put back in order (not gaps).
    pub tcp_reordered_segments: u64,
    /// Partial batches left when a stream closed or the capture ended.
    pub tcp_incomplete_batches: u64,
    /// Fragmented messages abandoned (a fragment missing, a new first fragment, or never finished).
    pub fragmented_dropped: u64,
    /// Fragmented messages longer than the kept head (decoded from the head; the length counted).
    pub fragmented_over_head: u64,
    pub streams_evicted: u64,
    pub keyexprs_evicted: u64,
    pub fragmented_evicted: u64,
    pub tokens_evicted: u64,
    /// Entries of the 0x08 tie tables (publishers of a data key, sample gid → token) evicted at
    /// zenoh.max_tokens: a later sample of such a gid is not tied to its node.
    pub ros_ties_evicted: u64,
    pub sessions_evicted: u64,
    /// rmw_zenoh liveliness tokens read (nodes, publishers, subscriptions, services, clients).
    pub ros_tokens: u64,
    /// `@ros2_lv` tokens that are not rmw_zenoh's layout.
    pub bad_ros_tokens: u64,
    /// Publisher and subscription tokens whose QoS field is not rmw_zenoh's format
    /// (`keyexpr_to_qos` refuses it, and so rmw_zenoh's graph): node named, no endpoint recorded.
    pub bad_ros_qos: u64,
    /// Names from key expressions and tokens cut at `max_name_bytes` (key
    /// expressions at twice that), kept with the `…[truncated, N bytes]` marker.
    pub names_truncated: u64,
    /// Bytes held by the remembered tokens (within `max_token_bytes`).
    pub token_bytes: u64,
}

impl ZenohStats {
    pub fn is_empty(&self) -> bool {
        self.batches == 0 && self.scouting_datagrams == 0 && self.tcp_bytes_skipped == 0
    }

    /// Everything skipped or malformed.
    pub fn skipped_total(&self) -> u64 {
        self.malformed_batches
            + self.truncated_batches
            + self.undecodable_batches
            + self.tcp_gaps
            + self.tcp_incomplete_batches
            + self.fragmented_dropped
            + self.unresolved_keyexprs
            + self.bad_ros_tokens
            + self.bad_ros_qos
            + self.ros_puts_without_attachment
    }

    /// The non-zero problem counters, for the summary line.
    pub fn problems(&self) -> Vec<String> {
        [
            (self.malformed_batches, "malformed Zenoh batches"),
            (self.truncated_batches, "truncated Zenoh batches"),
            (self.undecodable_batches, "Zenoh batches of compressed/authenticated sessions"),
            (self.other_version_sessions, "Zenoh sessions of another protocol version"),
            (self.ros_gids_ambiguous, "rmw_zenoh 0x08 publisher gids not tied to a node (several publishers' tokens on their topic)"),
            (self.tcp_gaps, "gaps in Zenoh TCP streams"),
            (self.tcp_bytes_skipped, "Zenoh TCP bytes skipped"),
            (self.tcp_incomplete_batches, "Zenoh batches incomplete at stream end"),
            (self.fragmented_dropped, "fragmented Zenoh messages dropped"),
            (self.unresolved_keyexprs, "Zenoh key expressions not resolved"),
            (self.ros_puts_without_attachment, "rmw_zenoh PUTs without an rmw_zenoh attachment"),
            (self.bad_ros_tokens, "malformed @ros2_lv tokens"),
            (self.bad_ros_qos, "rmw_zenoh tokens with a QoS field not in rmw_zenoh's format"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, w)| format!("{n} {w}"))
        .collect()
    }

    /// Evictions, for the summary line.
    pub fn evictions(&self) -> Vec<String> {
        [
            (self.streams_evicted, "Zenoh TCP streams"),
            (self.keyexprs_evicted, "Zenoh key expressions"),
            (self.fragmented_evicted, "fragmented Zenoh messages"),
            (self.tokens_evicted, "rmw_zenoh tokens (count or byte cap)"),
            (self.ros_ties_evicted, "rmw_zenoh 0x08 publisher ties (zenoh.max_tokens)"),
            (self.sessions_evicted, "Zenoh sessions"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, w)| format!("{n} {w}"))
        .collect()
    }
}

/// One direction of a TCP connection or UDP flow: (sender, receiver).
type Dir = (SocketAddr, SocketAddr);

fn reverse(d: Dir) -> Dir {
    (d.1, d.0)
}

/// Whose declarations a numeric key-expression scope refers to. A Zenoh
/// session (transport) may run over several links: peers that connect to
/// each other at once both finish the handshake and keep both TCP
/// connections, and one side may declare a key expression on one connection
/// and the other side send the PUTs that refer to it on the other (seen in a
/// lab run: a subscriber's declaration on the connection the publisher had
/// opened, the publisher's samples on the one the subscriber had opened). So a
/// declaration belongs to the session direction (sender's Zenoh id → the
/// receiver's) once both ends' Init of the link were captured, and only to
/// the link direction when they were not (capture started late, UDP
/// multicast).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum DeclScope {
    Session(ZenohId, ZenohId),
    Link(Dir),
}

/// A TCP stream direction being cut into batches.
struct Stream {
    next_seq: Option<u32>,
    /// Bytes after the last complete batch.
    buf: Vec<u8>,
    /// Where each segment's bytes start in `buf`, with its capture time and
    /// frame: the first byte of a batch is timed by the segment that carried it.
    marks: Vec<(usize, i64, u64)>,
    /// At a batch boundary (else looking for one in `buf`: [`resync_at`]).
    synced: bool,
    /// Out of step: offsets of `buf` below this are known not to start a batch.
    scanned: usize,
    /// Segments captured ahead of the bytes before them, held until those come.
    held: Vec<HeldSegment>,
    held_bytes: usize,
}

/// A TCP segment held for its place in the stream.
struct HeldSegment {
    seq: u32,
    payload: Vec<u8>,
    /// Bytes the snap length cut from it.
    missing: usize,
    ts_ns: i64,
    frame: u64,
}

/// Segments (and bytes) a stream holds while it waits for the bytes before them; more, and the
/// missing ones are taken as lost from the capture. A segment lost on the path comes again by fast
/// retransmit after the segments in flight behind it (a CI lab run: 10 of TSO's 64 KB segments,
/// 651 KB, before the retransmission; the old hold of 8 read it as a gap and lost one /image
/// sample); 4 MiB is 64 of them, 13 ms at 2.5 Gbit/s. All streams' holds together stay within the
/// streams' memory budget (`max_stream_bytes`: the least recently active stream goes first,
/// counted).
const HELD_SEGMENTS: usize = 64;
const HELD_BYTES: usize = 4 << 20;

impl Stream {
    fn weight(&self) -> usize {
        self.buf.capacity() + self.marks.capacity() * 24 + self.held_bytes + self.held.capacity() * 48 + 64
    }
}

/// The publisher tokens of one data key expression (for rmw_zenoh_cpp of
/// 2024, whose publisher gids are random: see [`ZenohStats::ros_gids_bound`]).
#[derive(Clone, Copy)]
struct PubOfKey {
    /// The first publisher token's gid (the hash of its key expression).
    token: [u8; 16],
    /// Another publisher token on the same key was seen.
    several: bool,
    /// ... and it names another node (or the same node name in another session).
    other_node: bool,
    /// The sample gid its endpoint was moved to, once one was tied to it.
    bound: Option<[u8; 16]>,
    /// A hash of the first token's Zenoh id and node name.
    node: u64,
}

fn guid_of(b: &[u8; 16]) -> Guid {
    Guid::new(GuidPrefix(b[..12].try_into().expect("12 bytes")), EntityId(b[12..].try_into().expect("4 bytes")))
}

/// A fragmented message being joined.
struct Joining {
    next_sn: u64,
    head: Vec<u8>,
    total: u64,
    first_ts: i64,
    fragments: u32,
}

/// What an rmw_zenoh token says about the entity whose gid it hashes to.
#[derive(Debug, Clone)]
pub struct ZenohEntity {
    pub node: Arc<RosNode>,
    pub token: Arc<rmw::Token>,
}

/// A publisher (`MP`) or subscription (`MS`) token as a discovery endpoint:
/// what `topics` counts and shows like an SEDP writer or reader.
#[derive(Debug, Clone)]
pub struct ZenohEndpoint {
    pub endpoint: EndpointInfo,
    pub node: Arc<RosNode>,
    /// A stand-in for the owner's participant: the session's Zenoh id folded into a GUID.
    pub participant: Guid,
    /// The endpoint recorded before under this GUID is this one (rmw_zenoh_cpp of
    /// 2024: a publisher first recorded under its token's hash, then under the gid
    /// its samples carry): it is forgotten, so the publisher counts once.
    pub replaces: Option<Guid>,
}

impl ZenohEndpoint {
    /// Records it in `d`: the endpoint, and its node in the ROS graph (as SEDP
    /// and ros_discovery_info record a DDS writer or reader).
    pub fn record(self, d: &mut crate::discovery::Discovery) {
        let role = match self.endpoint.kind {
            EndpointKind::Writer => crate::ros_graph::EntityRole::Writer,
            EndpointKind::Reader => crate::ros_graph::EntityRole::Reader,
        };
        let guid = self.endpoint.guid;
        if let Some(old) = self.replaces.filter(|o| *o != guid) {
            d.remove_endpoint(&old);
            d.ros.remove_entity(&old);
        }
        d.add_endpoint(self.endpoint);
        d.ros.add_entity(guid, self.node, self.participant, role);
    }
}

/// rmw's enum numbers (rmw/types.h) on the discovery enums the DDS rows use;
/// values rmw_zenoh resolves before it declares a token (system default,
/// unknown) keep their rmw number as `unknown(N)`.
pub fn endpoint_qos(q: &rmw::Qos) -> (Reliability, Durability, History, QosDuration, QosDuration, Liveliness) {
    let dur = |t: rmw::RmwTime| t.ns().map_or(QosDuration::Infinite, QosDuration::Ns);
    (
        match q.reliability {
            1 => Reliability::Reliable,
            2 => Reliability::BestEffort,
            v => Reliability::Other(v),
        },
        match q.durability {
            1 => Durability::TransientLocal,
            2 => Durability::Volatile,
            v => Durability::Other(v),
        },
        match q.history {
            1 => History::KeepLast(q.depth.min(i32::MAX as u64) as i32),
            2 => History::KeepAll,
            v => History::Other(v),
        },
        dur(q.deadline),
        dur(q.lifespan),
        Liveliness {
            kind: match q.liveliness {
                1 => LivelinessKind::Automatic,
                3 => LivelinessKind::ManualByTopic,
                v => LivelinessKind::Other(v),
            },
            lease: dur(q.liveliness_lease),
        },
    )
}

/// The names of an rmw_zenoh data key expression, as events and endpoints
/// carry them (`serve` names an agent's Zenoh samples with it too): read from
/// the whole key, then each cut by `cap` (the raw name, the key itself, at
/// [`key_cap`]), counted there.
pub fn names_of_data_key(key: &str, cap: &mut NameCap) -> Option<TopicNames> {
    let k = rmw::parse_data_key(key)?;
    let topic_raw = cap_key(key, cap);
    let (type_raw, topic_name) = (cap.cap(k.type_raw), cap.cap(&k.topic));
    let type_name = ros::demangle_type(&type_raw);
    Some(TopicNames::from_parts(topic_raw, type_raw, topic_name, type_name, Some(k.domain), &mut NameCap::new(usize::MAX)))
}

/// A whole key expression cut at [`key_cap`] of `cap`'s name cap (counted in `cap`).
pub fn cap_key(key: &str, cap: &mut NameCap) -> String {
    let mut wide = NameCap::new(key_cap(cap.max_bytes));
    let k = wide.cap(key);
    cap.truncated += wide.truncated;
    k
}

/// Every name of a token cut by `cap`; its gid (a hash of the whole key) is kept.
fn cap_token(mut t: rmw::Token, cap: &mut NameCap) -> rmw::Token {
    for v in [&mut t.zid, &mut t.node_id, &mut t.entity_id, &mut t.enclave, &mut t.namespace, &mut t.node] {
        cap.cap_in_place(v);
    }
    if let Some(tt) = t.topic.as_mut() {
        for v in [&mut tt.name, &mut tt.type_raw, &mut tt.type_hash, &mut tt.qos_raw] {
            cap.cap_in_place(v);
        }
        if let Err(e) = &mut tt.qos {
            cap.cap_in_place(&mut e.0);
        }
    }
    t
}

/// Bytes a remembered token holds (for `max_token_bytes`).
fn token_weight(t: &rmw::Token, node: &RosNode) -> usize {
    let mut w = t.zid.capacity() + t.node_id.capacity() + t.entity_id.capacity() + t.enclave.capacity() + t.namespace.capacity() + t.node.capacity();
    if let Some(tt) = &t.topic {
        w += tt.name.capacity() + tt.type_raw.capacity() + tt.type_hash.capacity() + tt.qos_raw.capacity();
        if let Err(e) = &tt.qos {
            w += e.0.capacity();
        }
    }
    w + node.namespace.capacity() + node.name.capacity() + node.fq_name.capacity() + std::mem::size_of::<rmw::Token>() + 128
}

/// A session's negotiated options that change how its batches read.
#[derive(Debug, Clone, Copy, Default)]
struct SessionInfo {
    zid: Option<ZenohId>,
    /// Compression or authentication negotiated, or another protocol version.
    undecodable: bool,
    /// The layouts its messages are read with (from its Init or Join).
    proto: Proto,
}

/// Where a batch came from.
#[derive(Clone, Copy)]
struct BatchCtx<'c> {
    capture: &'c Arc<str>,
    frame: u64,
    ts_ns: i64,
    first_ts_ns: i64,
    interface: u32,
    vlan: Option<VlanTag>,
    dir: Dir,
    len: usize,
    /// From a TCP stream (its connection's SYN resets its session), not a datagram.
    stream: bool,
}

pub struct ZenohDecoder {
    cfg: ZenohLimits,
    /// Ports whose TCP streams and UDP datagrams are taken as Zenoh without
    /// seeing their session start (others are recognised by an InitSyn).
    ports: Vec<u16>,
    streams: BoundedMap<Dir, Stream>,
    /// Directions known to carry Zenoh (an Init seen, or a Zenoh port), with the sender's session facts.
    sessions: BoundedMap<Dir, SessionInfo>,
    keyexprs: BoundedMap<(DeclScope, u16), Arc<str>>,
    joining: BoundedMap<(Dir, bool, u8), Joining>,
    tokens: BoundedMap<[u8; 16], ZenohEntity>,
    /// Publisher tokens by (a hash of) their data key expression, and the sample
    /// gids of 0x08 sessions tied to a token (`None`: ambiguous, counted once).
    pubs_by_key: BoundedMap<u64, PubOfKey>,
    gid_alias: BoundedMap<[u8; 16], Option<[u8; 16]>>,
    /// A key expression's names, by (the key cut at [`key_cap`], a hash of
    /// the whole key under this process's random keys): two long keys that
    /// cut alike keep their own names, and no entry holds a whole key.
    topic_names: BoundedMap<(Arc<str>, u64), Option<Arc<TopicNames>>>,
    key_hasher: ahash::RandomState,
    /// Cuts every name read from a key expression or a token.
    names: NameCap,
    /// Publishers and subscriptions announced since the caller last took them
    /// ([`take_endpoints`](Self::take_endpoints), after every packet: bounded by what one packet holds).
    endpoints: Vec<ZenohEndpoint>,
    pub stats: ZenohStats,
    /// Problems with their frame number (the caller keeps a bounded list).
    pub problems: Vec<(u64, String)>,
}

impl ZenohDecoder {
    pub fn new(cfg: ZenohLimits) -> Self {
        ZenohDecoder {
            cfg,
            ports: vec![ddscope_zenoh::DEFAULT_PORT],
            streams: BoundedMap::new(cfg.max_streams).with_max_weight(cfg.max_stream_bytes),
            sessions: BoundedMap::new(cfg.max_sessions),
            keyexprs: BoundedMap::new(cfg.max_keyexprs).with_max_weight(cfg.max_keyexpr_bytes),
            joining: BoundedMap::new(cfg.max_fragmented),
            tokens: BoundedMap::new(cfg.max_tokens).with_max_weight(cfg.max_token_bytes),
            pubs_by_key: BoundedMap::new(cfg.max_tokens),
            gid_alias: BoundedMap::new(cfg.max_tokens),
            topic_names: BoundedMap::new(4096),
            key_hasher: ahash::RandomState::new(),
            names: NameCap::new(cfg.max_name_bytes),
            endpoints: Vec::new(),
            stats: ZenohStats::default(),
            problems: Vec::new(),
        }
    }

    /// The rmw_zenoh entity a gid belongs to, once its token was seen (for
    /// rmw_zenoh_cpp of 2024, once a sample tied the gid to its token).
    pub fn entity(&self, gid: &[u8; 16]) -> Option<&ZenohEntity> {
        self.tokens.get(gid).or_else(|| self.gid_alias.get(gid).copied().flatten().and_then(|t| self.tokens.get(&t)))
    }

    /// The publishers and subscriptions whose tokens were read since the last call.
    pub fn take_endpoints(&mut self) -> Vec<ZenohEndpoint> {
        std::mem::take(&mut self.endpoints)
    }

    fn problem(&mut self, frame: u64, msg: impl FnOnce() -> String) {
        if self.problems.len() < 64 {
            self.problems.push((frame, msg()));
        }
    }

    fn known(&self, dir: Dir) -> bool {
        self.ports.contains(&dir.0.port()) || self.ports.contains(&dir.1.port()) || self.sessions.contains_key(&dir) || self.sessions.contains_key(&reverse(dir))
    }

    /// Whether `payload` (a UDP datagram, or a TCP segment after the 2-byte
    /// length) starts with an InitSyn of Zenoh 1.x or 0.11: a session starting.
    fn starts_session(b: &[u8]) -> bool {
        b.len() >= 4 && mid(b[0]) == transport::INIT && b[0] & transport::FLAG_A == 0 && Proto::of_version(b[1]).is_some()
    }

    /// The layouts of the session a direction belongs to: its own Init's, else
    /// the other direction's; 1.x when neither was captured.
    fn proto_of(&self, dir: Dir) -> Proto {
        self.sessions.get(&dir).or_else(|| self.sessions.get(&reverse(dir))).map_or(Proto::V09, |s| s.proto)
    }

    /// A UDP datagram that is not RTPS: true if taken as Zenoh (decoded or counted here).
    #[allow(clippy::too_many_arguments)]
    pub fn udp(
        &mut self,
        capture: &Arc<str>,
        frame: u64,
        first_ts_ns: i64,
        ts_ns: i64,
        interface: u32,
        vlan: Option<VlanTag>,
        src: SocketAddr,
        dst: SocketAddr,
        payload: &[u8],
        snapped: bool,
        emit: &mut dyn FnMut(&SubmsgEvent),
    ) -> bool {
        if dst.port() == ddscope_zenoh::SCOUTING_PORT {
            self.stats.scouting_datagrams += 1;
            return true;
        }
        let dir = (src, dst);
        if !self.known(dir) && !Self::starts_session(payload) {
            return false;
        }
        self.stats.udp_datagrams += 1;
        let ctx = BatchCtx { capture, frame, ts_ns, first_ts_ns, interface, vlan, dir, len: payload.len(), stream: false };
        self.batch(&ctx, payload, snapped, emit);
        true
    }

    /// A TCP segment: true if its stream is taken as Zenoh.
    #[allow(clippy::too_many_arguments)]
    pub fn tcp(
        &mut self,
        capture: &Arc<str>,
        frame: u64,
        ts_ns: i64,
        interface: u32,
        vlan: Option<VlanTag>,
        src: SocketAddr,
        dst: SocketAddr,
        seg: &Segment<'_>,
        missing: usize,
        emit: &mut dyn FnMut(&SubmsgEvent),
    ) -> bool {
        let dir = (src, dst);
        let starts = seg.payload.len() > 2 && Self::starts_session(&seg.payload[2..]);
        if !self.streams.contains_key(&dir) && !self.known(dir) && !starts && !seg.syn() {
            return false;
        }
        if seg.syn() && !self.known(dir) {
            // A connection to a port that is not a Zenoh port: follow it only
            // if its first bytes turn out to be an InitSyn (below).
            return false;
        }
        self.stats.tcp_segments += 1;
        let stats = &mut self.stats;
        let slot = self.streams.get_or_insert_slot(
            dir,
            || Stream { next_seq: None, buf: Vec::new(), marks: Vec::new(), synced: false, scanned: 0, held: Vec::new(), held_bytes: 0 },
            &mut |_, s: Stream| {
                stats.streams_evicted += 1;
                stats.tcp_bytes_skipped += s.held_bytes as u64;
                if !s.buf.is_empty() {
                    stats.tcp_incomplete_batches += 1;
                }
            },
        );
        let mut s = match self.streams.remove_at(slot) {
            Some((_, s)) => s,
            None => return true,
        };
        if seg.syn() {
            // A new connection: its session is the one its Init will open.
            self.sessions.remove(&dir);
            s.next_seq = Some(seg.seq.wrapping_add(1));
            s.buf.clear();
            s.marks.clear();
            s.synced = true;
        }
        if !seg.payload.is_empty() {
            let next = *s.next_seq.get_or_insert(seg.seq);
            let ahead = seg.seq.wrapping_sub(next) as i32 > 0;
            let seg_bytes = HeldSegment { seq: seg.seq, payload: seg.payload.to_vec(), missing, ts_ns, frame };
            if ahead {
                // Ahead of the bytes seen: held until those before it come (a capture point's
                // queues reorder TSO segments: tshark's "out-of-order segment"); a gap only when
                // the hold is full, or at the connection's end.
                s.held_bytes += seg_bytes.payload.len();
                s.held.push(seg_bytes);
                if s.held.len() > HELD_SEGMENTS || s.held_bytes > HELD_BYTES {
                    self.flush_held(&mut s, capture, interface, vlan, dir, emit);
                }
            } else {
                self.segment_bytes(&mut s, &seg_bytes, capture, interface, vlan, dir, emit);
            }
            self.place_held(&mut s, capture, interface, vlan, dir, emit);
        }
        if (seg.fin() || seg.rst()) && !s.held.is_empty() {
            self.flush_held(&mut s, capture, interface, vlan, dir, emit);
        }
        if seg.fin() || seg.rst() {
            if !s.buf.is_empty() {
                self.stats.tcp_incomplete_batches += 1;
            }
            return true;
        }
        let w = s.weight();
        let stats = &mut self.stats;
        let slot = self.streams.get_or_insert_slot(dir, || s, &mut |_, gone: Stream| {
            stats.streams_evicted += 1;
            stats.tcp_bytes_skipped += gone.held_bytes as u64;
            if !gone.buf.is_empty() {
                stats.tcp_incomplete_batches += 1;
            }
        });
        self.streams.set_weight_at(slot, w, &mut |_, gone: Stream| {
            stats.streams_evicted += 1;
            stats.tcp_bytes_skipped += gone.held_bytes as u64;
            if !gone.buf.is_empty() {
                stats.tcp_incomplete_batches += 1;
            }
        });
        true
    }

    /// One segment's bytes in sequence order: retransmitted bytes skipped, a gap before them
    /// counted (the stream then looks for a batch boundary), batches cut.
    #[allow(clippy::too_many_arguments)]
    fn segment_bytes(&mut self, s: &mut Stream, h: &HeldSegment, capture: &Arc<str>, interface: u32, vlan: Option<VlanTag>, dir: Dir, emit: &mut dyn FnMut(&SubmsgEvent)) {
        let (frame, ts_ns, missing) = (h.frame, h.ts_ns, h.missing);
        let (src, dst) = dir;
        let mut p: &[u8] = &h.payload;
        if !p.is_empty() {
            let next = *s.next_seq.get_or_insert(h.seq);
            let diff = h.seq.wrapping_sub(next) as i32;
            if diff < 0 {
                // Bytes already seen (a retransmission, or overlapping segments).
                let dup = (-(diff as i64)) as usize;
                let skip = dup.min(p.len());
                self.stats.tcp_retransmitted_bytes += skip as u64;
                p = &p[skip..];
            } else if diff > 0 {
                self.stats.tcp_gaps += 1;
                self.stats.tcp_bytes_skipped += diff as u64 + s.buf.len() as u64;
                self.problem(frame, || format!("Zenoh TCP stream {src} → {dst}: {diff} bytes missing from the capture before this segment"));
                s.buf.clear();
                s.marks.clear();
                s.synced = false;
                s.scanned = 0;
            }
            if !p.is_empty() {
                let start_seq = h.seq.wrapping_add((h.payload.len() - p.len()) as u32);
                s.next_seq = Some(start_seq.wrapping_add(p.len() as u32).wrapping_add(missing as u32));
                s.marks.push((s.buf.len(), ts_ns, frame));
                s.buf.extend_from_slice(p);
                if !s.synced {
                    // Joined mid-stream or after a gap: a batch boundary is where a batch that
                    // decodes to its last byte is followed by the start of another (segments
                    // of a busy stream, TSO's 64 KB ones, rarely start at one).
                    let proto = self.proto_of(dir);
                    let found = if s.scanned == 0 && whole_batches(&s.buf, proto) { Resync::At(0) } else { resync_at(&s.buf, s.scanned, proto) };
                    match found {
                        Resync::At(o) => {
                            self.stats.tcp_bytes_skipped += o as u64;
                            drop_front(s, o);
                            s.synced = true;
                        }
                        Resync::Wait(scanned) => {
                            s.scanned = scanned;
                            if s.buf.len() > RESYNC_BYTES {
                                // Nothing found in the window: its first half is given up.
                                let o = s.buf.len() - RESYNC_BYTES / 2;
                                self.stats.tcp_bytes_skipped += o as u64;
                                drop_front(s, o);
                                s.scanned = s.scanned.saturating_sub(o);
                            }
                        }
                    }
                }
                if s.synced {
                    self.cut_batches(s, capture, frame, ts_ns, interface, vlan, dir, emit);
                }
                if missing > 0 {
                    // The segment was cut by the snap length: the rest of the stream is out of step.
                    self.stats.tcp_gaps += 1;
                    self.stats.tcp_bytes_skipped += missing as u64 + s.buf.len() as u64;
                    if !s.buf.is_empty() {
                        self.stats.truncated_batches += 1;
                    }
                    s.buf.clear();
                    s.marks.clear();
                    s.synced = false;
                    s.scanned = 0;
                }
            }
        }
    }

    /// Held segments that now follow on from the stream's bytes, in order.
    fn place_held(&mut self, s: &mut Stream, capture: &Arc<str>, interface: u32, vlan: Option<VlanTag>, dir: Dir, emit: &mut dyn FnMut(&SubmsgEvent)) {
        while let Some(next) = s.next_seq {
            let Some(i) = s.held.iter().position(|h| h.seq.wrapping_sub(next) as i32 <= 0) else { break };
            let h = s.held.swap_remove(i);
            s.held_bytes -= h.payload.len();
            self.stats.tcp_reordered_segments += 1;
            self.segment_bytes(s, &h, capture, interface, vlan, dir, emit);
        }
    }

    /// Every held segment in sequence order, the gaps between them counted.
    fn flush_held(&mut self, s: &mut Stream, capture: &Arc<str>, interface: u32, vlan: Option<VlanTag>, dir: Dir, emit: &mut dyn FnMut(&SubmsgEvent)) {
        let next = s.next_seq.unwrap_or(0);
        let mut held = std::mem::take(&mut s.held);
        s.held_bytes = 0;
        held.sort_by_key(|h| h.seq.wrapping_sub(next));
        for h in &held {
            self.segment_bytes(s, h, capture, interface, vlan, dir, emit);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn cut_batches(
        &mut self,
        s: &mut Stream,
        capture: &Arc<str>,
        frame: u64,
        ts_ns: i64,
        interface: u32,
        vlan: Option<VlanTag>,
        dir: Dir,
        emit: &mut dyn FnMut(&SubmsgEvent),
    ) {
        let mut off = 0usize;
        while s.buf.len() - off >= 2 {
            let n = u16::from_le_bytes([s.buf[off], s.buf[off + 1]]) as usize;
            if n == 0 {
                self.stats.malformed_batches += 1;
                self.problem(frame, || format!("Zenoh TCP stream {} → {}: batch of length 0; looking for the next batch boundary", dir.0, dir.1));
                self.stats.tcp_bytes_skipped += 2;
                s.synced = false;
                s.scanned = 0;
                off += 2;
                break;
            }
            if s.buf.len() - off < 2 + n {
                break;
            }
            // The batch's first byte: the last segment that starts at or before it.
            let first_ts = s.marks.iter().rev().find(|m| m.0 <= off).map_or(ts_ns, |m| m.1);
            let batch = std::mem::take(&mut s.buf);
            let ctx = BatchCtx { capture, frame, ts_ns, first_ts_ns: first_ts, interface, vlan, dir, len: n, stream: true };
            self.batch(&ctx, &batch[off + 2..off + 2 + n], false, emit);
            s.buf = batch;
            off += 2 + n;
        }
        if off > 0 {
            s.buf.drain(..off.min(s.buf.len()));
            let keep_from = s.marks.iter().rposition(|m| m.0 <= off).unwrap_or(0);
            s.marks.drain(..keep_from);
            for m in &mut s.marks {
                m.0 = m.0.saturating_sub(off);
            }
            if s.buf.is_empty() {
                s.marks.clear();
            }
        }
        if s.buf.capacity() > (1 << 18) && s.buf.len() < (1 << 16) {
            s.buf.shrink_to(1 << 17);
        }
    }

    fn base_event(&self, ctx: &BatchCtx<'_>, index: usize, msg: &'static str, first_ts_ns: i64) -> SubmsgEvent {
        let mut e = SubmsgEvent::blank(ctx.capture.clone());
        e.frame = ctx.frame;
        e.ts_ns = ctx.ts_ns;
        e.interface = ctx.interface;
        e.src = ctx.dir.0;
        e.dst = ctx.dir.1;
        e.vlan_id = ctx.vlan.map(|v| v.vid);
        e.pcp = ctx.vlan.map(|v| v.pcp);
        e.ip_frags = 1;
        e.ip_first_ts_ns = first_ts_ns;
        e.ip_last_ts_ns = ctx.ts_ns;
        e.rtps_len = ctx.len as u32;
        e.vendor_id = ddscope_zenoh::VENDOR_MARKER;
        e.submsg_index = index.min(u16::MAX as usize) as u16;
        e.kind = SubmsgKind::Zenoh;
        e.traffic_type = TrafficType::Builtin;
        let zid = self.sessions.get(&ctx.dir).and_then(|s| s.zid).map(|z| Arc::from(z.to_string()));
        let peer_zid = self.sessions.get(&reverse(ctx.dir)).and_then(|s| s.zid).map(|z| Arc::from(z.to_string()));
        e.zenoh = Some(Box::new(ZenohInfo { msg, key_expr: None, zid, peer_zid, first_byte_ts_ns: first_ts_ns }));
        e
    }

    fn count(&mut self, name: &'static str) {
        *self.stats.messages.entry(name).or_default() += 1;
    }

    /// One batch: its transport messages in order.
    fn batch(&mut self, ctx: &BatchCtx<'_>, b: &[u8], snapped: bool, emit: &mut dyn FnMut(&SubmsgEvent)) {
        self.stats.batches += 1;
        if self.sessions.get(&ctx.dir).is_some_and(|s| s.undecodable) {
            self.stats.undecodable_batches += 1;
            return;
        }
        let proto = self.proto_of(ctx.dir);
        let mut r = Reader::new(b);
        let mut index = 0usize;
        while !r.is_empty() {
            let start = r.pos();
            let m = match transport::read_v(&mut r, proto) {
                Ok(m) => m,
                Err(e) => {
                    self.batch_error(ctx, start, e, snapped);
                    return;
                }
            };
            self.count(m.name());
            match m {
                TransportMsg::Frame(f) => {
                    let mut msgs = FrameMsgs::with_proto(&mut r, proto);
                    let mut failed = None;
                    let mut decoded = vec![];
                    for item in &mut msgs {
                        match item {
                            Ok((_, nm)) => decoded.push(nm),
                            Err(e) => failed = Some(e),
                        }
                    }
                    let _ = f;
                    for nm in decoded {
                        self.network(ctx, index, &nm, ctx.first_ts_ns, proto, emit);
                        index += 1;
                    }
                    if let Some(e) = failed {
                        self.batch_error(ctx, r.pos(), e, snapped);
                        return;
                    }
                }
                TransportMsg::Fragment(f) => {
                    self.fragment(ctx, index, &f, proto, emit);
                    index += 1;
                }
                TransportMsg::Network(nm) => {
                    self.network(ctx, index, &nm, ctx.first_ts_ns, proto, emit);
                    index += 1;
                }
                TransportMsg::Init(i) if ctx.stream && self.sessions.get(&ctx.dir).is_some_and(|s| !s.undecodable) => {
                    // An Init inside a session already open on this connection (read after a gap
                    // in the capture, where a batch boundary was guessed): not a new session.
                    // Garbage that reads as one would otherwise mark the session undecodable.
                    let _ = i;
                    self.stats.malformed_batches += 1;
                    self.problem(ctx.frame, || format!("Zenoh TCP stream {} → {}: an Init inside its open session (after a gap?): the batch is skipped, the session kept", ctx.dir.0, ctx.dir.1));
                    return;
                }
                TransportMsg::Join(_) if ctx.stream => {
                    // Join is a multicast transport's message, never a TCP session's: garbage read
                    // after a gap in the capture (it would otherwise set the session's version).
                    self.stats.malformed_batches += 1;
                    self.problem(ctx.frame, || format!("Zenoh TCP stream {} → {}: a Join (a multicast message) in a TCP stream (after a gap?): the batch is skipped", ctx.dir.0, ctx.dir.1));
                    return;
                }
                TransportMsg::Init(i) => {
                    let version = Proto::of_version(i.version);
                    match version {
                        None => self.stats.other_version_sessions += 1,
                        Some(Proto::V08) => self.stats.v08_sessions += 1,
                        Some(Proto::V09) => {}
                    }
                    if version.is_none() || i.unknown_mandatory_exts > 0 || i.compression || i.auth {
                        self.problem(ctx.frame, || {
                            format!(
                                "Zenoh session {} → {}: version 0x{:02x}{}{}: its batches are counted, not decoded",
                                ctx.dir.0,
                                ctx.dir.1,
                                i.version,
                                if i.compression { ", compression" } else { "" },
                                if i.auth { ", authentication" } else { "" }
                            )
                        });
                    }
                    let undecodable = version.is_none() || i.compression || i.auth;
                    let info = SessionInfo { zid: Some(i.zid), undecodable, proto: version.unwrap_or_default() };
                    let stats = &mut self.stats;
                    self.sessions.insert(ctx.dir, info, &mut |_, _| stats.sessions_evicted += 1);
                    if i.ack && undecodable {
                        // Both directions of a session share its options.
                        let other = reverse(ctx.dir);
                        let o = self.sessions.get(&other).copied().unwrap_or_default();
                        self.sessions.insert(other, SessionInfo { undecodable: true, ..o }, &mut |_, _| stats.sessions_evicted += 1);
                    }
                    let e = self.base_event(ctx, index, m.name(), ctx.first_ts_ns);
                    emit(&e);
                    index += 1;
                }
                TransportMsg::Join(j) => {
                    let version = Proto::of_version(j.version);
                    match version {
                        None => self.stats.other_version_sessions += 1,
                        Some(Proto::V08) => self.stats.v08_sessions += 1,
                        Some(Proto::V09) => {}
                    }
                    let stats = &mut self.stats;
                    let info = SessionInfo { zid: Some(j.zid), undecodable: version.is_none(), proto: version.unwrap_or_default() };
                    self.sessions.insert(ctx.dir, info, &mut |_, _| stats.sessions_evicted += 1);
                    let e = self.base_event(ctx, index, m.name(), ctx.first_ts_ns);
                    emit(&e);
                    index += 1;
                }
                TransportMsg::Open(_) | TransportMsg::Close { .. } | TransportMsg::KeepAlive | TransportMsg::Oam { .. } => {
                    let e = self.base_event(ctx, index, m.name(), ctx.first_ts_ns);
                    emit(&e);
                    index += 1;
                }
            }
        }
    }

    fn batch_error(&mut self, ctx: &BatchCtx<'_>, at: usize, e: ZError, snapped: bool) {
        if e.is_truncated() {
            self.stats.truncated_batches += 1;
            if snapped {
                return;
            }
        } else {
            self.stats.malformed_batches += 1;
        }
        self.problem(ctx.frame, || format!("Zenoh batch {} → {} at byte {at}: {e}; the rest of the batch is skipped", ctx.dir.0, ctx.dir.1));
    }

    fn fragment(&mut self, ctx: &BatchCtx<'_>, index: usize, f: &transport::Fragment<'_>, proto: Proto, emit: &mut dyn FnMut(&SubmsgEvent)) {
        let key = (ctx.dir, f.reliable, f.priority);
        let cap = self.cfg.max_fragment_head;
        let continues = match self.joining.get(&key) {
            Some(j) => j.next_sn == f.sn && !f.first,
            None => false,
        };
        if !continues {
            if self.joining.remove(&key).is_some() {
                self.stats.fragmented_dropped += 1;
            }
        }
        if f.drop {
            // The sender gave up on this message.
            self.joining.remove(&key);
            self.stats.fragmented_dropped += 1;
            return;
        }
        let stats = &mut self.stats;
        let mut on_evict2 = |_, _: Joining| {
            stats.fragmented_evicted += 1;
            stats.fragmented_dropped += 1;
        };
        let j = self.joining.get_or_insert_with(
            key,
            || Joining { next_sn: f.sn, head: Vec::new(), total: 0, first_ts: ctx.first_ts_ns, fragments: 0 },
            &mut on_evict2,
        );
        let room = cap.saturating_sub(j.head.len());
        j.head.extend_from_slice(&f.payload[..room.min(f.payload.len())]);
        j.total += f.payload.len() as u64;
        j.fragments += 1;
        j.next_sn = f.sn.wrapping_add(1);
        if f.more {
            return;
        }
        let Some(j) = self.joining.remove(&key) else { return };
        let cut = j.total > j.head.len() as u64;
        if cut {
            self.stats.fragmented_over_head += 1;
        }
        let mut r = Reader::new(&j.head);
        match network::read_v(&mut r, cut, proto) {
            Ok(nm) => self.network(ctx, index, &nm, j.first_ts, proto, emit),
            Err(e) => {
                if e.is_truncated() {
                    self.stats.truncated_batches += 1;
                } else {
                    self.stats.malformed_batches += 1;
                }
                self.problem(ctx.frame, || {
                    format!("Zenoh message of {} fragments {} → {}: {e}", j.fragments, ctx.dir.0, ctx.dir.1)
                });
            }
        }
    }

    /// The scope of the declarations sent in direction `dir`: its session
    /// direction when both ends' Zenoh ids are known, else the link direction.
    fn decl_scope(&self, dir: Dir) -> DeclScope {
        let zid = |d: Dir| self.sessions.get(&d).and_then(|s| s.zid);
        match (zid(dir), zid(reverse(dir))) {
            (Some(from), Some(to)) => DeclScope::Session(from, to),
            _ => DeclScope::Link(dir),
        }
    }

    /// Resolves a wire expression sent in direction `dir` to its key expression:
    /// through the declarations of its session, on whichever of the session's
    /// links they were sent (see [`DeclScope`]), else of its link.
    fn resolve(&mut self, dir: Dir, w: &WireExpr<'_>) -> Option<String> {
        let suffix = std::str::from_utf8(w.suffix).ok()?;
        if w.scope == 0 {
            return Some(suffix.to_string());
        }
        let declarer = if w.sender_mapping { dir } else { reverse(dir) };
        let scope = self.decl_scope(declarer);
        let mut base = self.keyexprs.get_touch(&(scope, w.scope)).cloned();
        if base.is_none() && scope != DeclScope::Link(declarer) {
            // Declared before the link's handshake was complete in the capture.
            base = self.keyexprs.get_touch(&(DeclScope::Link(declarer), w.scope)).cloned();
        }
        match base {
            Some(base) => Some(format!("{base}{suffix}")),
            None => {
                self.stats.unresolved_keyexprs += 1;
                None
            }
        }
    }

    /// The names of a whole key expression and the key cut as events carry it.
    fn topic_names(&mut self, key: &str) -> (Option<Arc<TopicNames>>, Arc<str>) {
        let cut: Arc<str> = Arc::from(cap_key(key, &mut NameCap::new(self.names.max_bytes)).as_str());
        let id = (cut.clone(), self.key_hasher.hash_one(key));
        if let Some(t) = self.topic_names.get_touch(&id) {
            return (t.clone(), cut);
        }
        // Counted once per distinct key, not per message.
        let truncated = (cut.len() != key.len()) as u64;
        let names = names_of_data_key(key, &mut self.names).map(Arc::new);
        if names.is_none() {
            self.names.truncated += truncated;
        }
        self.topic_names.insert(id, names.clone(), &mut |_, _| {});
        (names, cut)
    }

    fn network(&mut self, ctx: &BatchCtx<'_>, index: usize, nm: &NetworkMsg<'_>, first_ts: i64, proto: Proto, emit: &mut dyn FnMut(&SubmsgEvent)) {
        let name = nm.name();
        self.count(name);
        let mut e = self.base_event(ctx, index, name, first_ts);
        // The whole key, to read names and a token's gid from; events carry it cut.
        let key = nm.wire().and_then(|w| self.resolve(ctx.dir, &w));
        let mut cut_key: Option<Arc<str>> = None;
        match nm {
            NetworkMsg::Push { body: PushBody::Put(p), .. } | NetworkMsg::Response { body: network::ResponseBody::Reply(PushBody::Put(p)), .. } => {
                e.traffic_type = TrafficType::User;
                e.payload_size = Some(p.payload_len.min(u32::MAX as u64) as u32);
                // In shared memory the sample's size is not on the wire.
                e.sample_size = if p.shm_slices > 0 { None } else { e.payload_size };
                if p.shm_slices > 0 {
                    self.stats.shm_puts += 1;
                }
                let names = match key.as_deref() {
                    Some(k) => {
                        let (names, cut) = self.topic_names(k);
                        cut_key = Some(cut);
                        names
                    }
                    None => None,
                };
                let att = p.attachment.and_then(rmw::parse_attachment);
                match (att, matches!(nm, NetworkMsg::Push { .. })) {
                    (Some(a), true) => {
                        self.stats.ros_samples += 1;
                        e.kind = SubmsgKind::Data;
                        let g = Guid::new(
                            GuidPrefix(a.gid[..12].try_into().expect("12 bytes")),
                            EntityId(a.gid[12..].try_into().expect("4 bytes")),
                        );
                        e.writer_id = Some(g);
                        e.sn = Some(a.sequence_number);
                        e.source_ts_ns = Some(a.source_timestamp);
                        e.writer_node = match self.tokens.get(&a.gid) {
                            Some(t) => Some(t.node.clone()),
                            // rmw_zenoh_cpp of 2024: a random gid, tied to its token by the data key.
                            None if proto == Proto::V08 => key.as_deref().and_then(|k| self.tie_gid(a.gid, k)),
                            None => None,
                        };
                    }
                    _ => {
                        if names.is_some() {
                            self.stats.ros_puts_without_attachment += 1;
                        }
                    }
                }
                e.topic = names;
            }
            NetworkMsg::Declare { body, .. } => {
                e.traffic_type = TrafficType::Discovery;
                match body {
                    Declaration::KeyExpr { id, .. } => {
                        if let Some(k) = key.as_deref() {
                            let weight = k.len() + 64;
                            let scope = self.decl_scope(ctx.dir);
                            let stats = &mut self.stats;
                            let slot = self.keyexprs.get_or_insert_slot((scope, *id), || Arc::from(k), &mut |_, _| stats.keyexprs_evicted += 1);
                            if let Some(v) = self.keyexprs.value_at(slot) {
                                *v = Arc::from(k);
                            }
                            self.keyexprs.set_weight_at(slot, weight, &mut |_, _| stats.keyexprs_evicted += 1);
                        }
                    }
                    Declaration::UndeclareKeyExpr { id } => {
                        let scope = self.decl_scope(ctx.dir);
                        self.keyexprs.remove(&(scope, *id));
                        self.keyexprs.remove(&(DeclScope::Link(ctx.dir), *id));
                    }
                    Declaration::Token { .. } | Declaration::Subscriber { .. } => {
                        // Zenoh 0.11 declares a liveliness token as a subscriber on `@/liveliness/<token>`.
                        let token_key = match body {
                            Declaration::Token { .. } => key.as_deref(),
                            _ if proto == Proto::V08 => key.as_deref().and_then(|k| k.strip_prefix(network::LIVELINESS_PREFIX_V08)),
                            _ => None,
                        };
                        if let Some(k) = token_key.filter(|k| k.starts_with(rmw::ADMIN_SPACE)) {
                            match rmw::parse_token(k) {
                                Some(t) => {
                                    self.stats.ros_tokens += 1;
                                    // The gid hashes the whole key; the names are kept cut.
                                    let node = Arc::new(RosNode::capped(&t.namespace, &t.node, &mut self.names));
                                    self.endpoint_of(ctx.frame, &t, &node);
                                    let t = cap_token(t, &mut self.names);
                                    let (gid, w) = (t.gid, token_weight(&t, &node));
                                    let stats = &mut self.stats;
                                    self.tokens.insert(gid, ZenohEntity { node, token: Arc::new(t) }, &mut |_, _| stats.tokens_evicted += 1);
                                    self.tokens.set_weight(&gid, w, &mut |_, _| stats.tokens_evicted += 1);
                                    self.stats.token_bytes = self.tokens.weight() as u64;
                                }
                                None => {
                                    self.stats.bad_ros_tokens += 1;
                                    let quoted = ddscope_traffic::text::excerpt(k, ddscope_traffic::text::EXCERPT_CHARS);
                                    self.problem(ctx.frame, || format!("liveliness token {quoted} is not rmw_zenoh's layout"));
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
            NetworkMsg::Interest { .. } => e.traffic_type = TrafficType::Discovery,
            NetworkMsg::Push { body: PushBody::Del { .. }, .. } | NetworkMsg::Request { .. } | NetworkMsg::Response { .. } => {
                e.traffic_type = TrafficType::User;
            }
            NetworkMsg::ResponseFinal { .. } | NetworkMsg::Oam { .. } => {}
        }
        if let Some(z) = e.zenoh.as_deref_mut() {
            z.key_expr = cut_key.or_else(|| key.map(|k| Arc::from(cap_key(&k, &mut self.names).as_str())));
        }
        self.stats.names_truncated = self.names.truncated;
        emit(&e);
    }

    /// Queues a publisher's or subscription's token as a discovery endpoint;
    /// a QoS field rmw_zenoh would refuse is counted and reported instead.
    fn endpoint_of(&mut self, frame: u64, t: &rmw::Token, node: &Arc<RosNode>) {
        let kind = match t.kind {
            rmw::EntityKind::Publisher => EndpointKind::Writer,
            rmw::EntityKind::Subscription => EndpointKind::Reader,
            _ => return,
        };
        let Some(topic) = &t.topic else { return };
        let q = match &topic.qos {
            Ok(q) => q,
            Err(e) => {
                self.stats.bad_ros_qos += 1;
                // The field once, cut; the reason names the part without quoting the field again.
                let x = |s: &str| ddscope_traffic::text::excerpt(s, 80);
                let (raw, why, node, name) = (x(&topic.qos_raw), x(&e.0), node.fq_name.clone(), x(&topic.name));
                self.problem(frame, || format!("rmw_zenoh token of {} on {name}: QoS field {raw}: not rmw_zenoh's format ({why})", x(&node)));
                return;
            }
        };
        let q = *q;
        let mut guid = t.gid;
        if kind == EndpointKind::Writer {
            // The publishers of each data key (rmw_zenoh_cpp of 2024: see `tie_gid`); a
            // publisher already tied to the gid its samples carry stays recorded under it.
            if let Some(k) = t.data_key() {
                let h = self.key_hasher.hash_one(k.as_str());
                let who = self.key_hasher.hash_one((t.zid.as_str(), node.fq_name.as_str()));
                let stats = &mut self.stats;
                let slot = self.pubs_by_key.get_or_insert_slot(
                    h,
                    || PubOfKey { token: t.gid, several: false, other_node: false, bound: None, node: who },
                    &mut |_, _| stats.ros_ties_evicted += 1,
                );
                if let Some(p) = self.pubs_by_key.value_at(slot) {
                    if p.token != t.gid {
                        p.several = true;
                        p.other_node |= p.node != who;
                    } else if let Some(b) = p.bound {
                        guid = b;
                    }
                }
            }
        }
        if let Some(z) = self.endpoint_info(t, &q, node, guid, None) {
            self.queue_endpoint(z);
        }
    }

    fn queue_endpoint(&mut self, z: ZenohEndpoint) {
        if self.endpoints.len() < 4096 {
            self.endpoints.push(z);
        } else {
            // More than one packet can hold: not reachable from the wire, counted all the same.
            self.stats.tokens_evicted += 1;
        }
    }

    /// A token's endpoint under `guid` (its gid, or the one its samples carry).
    fn endpoint_info(&mut self, t: &rmw::Token, q: &rmw::Qos, node: &Arc<RosNode>, guid: [u8; 16], replaces: Option<[u8; 16]>) -> Option<ZenohEndpoint> {
        let kind = match t.kind {
            rmw::EntityKind::Publisher => EndpointKind::Writer,
            rmw::EntityKind::Subscription => EndpointKind::Reader,
            _ => return None,
        };
        let names = t.data_key().as_deref().and_then(|k| names_of_data_key(k, &mut self.names))?;
        let (reliability, durability, history, deadline, lifespan, liveliness) = endpoint_qos(q);
        let endpoint = EndpointInfo {
            guid: guid_of(&guid),
            kind,
            names: Arc::new(names),
            reliability,
            reliability_announced: true,
            durability,
            history: Some(history),
            deadline,
            lifespan,
            liveliness,
            partitions: vec![],
            unicast: vec![],
            multicast: vec![],
            vendor_id: Some(ddscope_zenoh::VENDOR_MARKER),
            disposed: false,
        };
        let participant = guid_of(&rmw::gid_of(&t.zid));
        Some(ZenohEndpoint { endpoint, node: node.clone(), participant, replaces: replaces.as_ref().map(guid_of) })
    }

    /// rmw_zenoh_cpp of 2024 (protocol 0x08) gives each publisher a random gid
    /// (`generate_random_gid` in `rmw_zenoh.cpp`), not the hash of its token's
    /// key, so a sample's gid names no token. It is tied to the publisher token
    /// of the sample's data key expression when that is the only one, or when
    /// all of them are one node's (same Zenoh id and node name): the sample gets
    /// its node, and (only one token) the publisher's endpoint is moved to the
    /// sample's gid so that `topics` shows its QoS and node. Publishers of
    /// several nodes on one topic are not guessed between: counted once per gid
    /// (`ros_gids_ambiguous`). A gid whose topic has no token yet is tried again
    /// on its next sample.
    fn tie_gid(&mut self, gid: [u8; 16], key: &str) -> Option<Arc<RosNode>> {
        if let Some(t) = self.gid_alias.get_touch(&gid).copied() {
            return t.and_then(|t| self.tokens.get(&t).map(|e| e.node.clone()));
        }
        let h = self.key_hasher.hash_one(key);
        let p = *self.pubs_by_key.get_touch(&h)?;
        let stats = &mut self.stats;
        if p.other_node {
            stats.ros_gids_ambiguous += 1;
            self.gid_alias.insert(gid, None, &mut |_, _| stats.ros_ties_evicted += 1);
            return None;
        }
        stats.ros_gids_bound += 1;
        self.gid_alias.insert(gid, Some(p.token), &mut |_, _| stats.ros_ties_evicted += 1);
        let entity = self.tokens.get(&p.token).cloned()?;
        if !p.several && p.bound.is_none() {
            if let Some(slot) = self.pubs_by_key.slot(&h) {
                if let Some(v) = self.pubs_by_key.value_at(slot) {
                    v.bound = Some(gid);
                }
            }
            if let Some(Ok(q)) = entity.token.topic.as_ref().map(|tt| tt.qos.clone()) {
                if let Some(z) = self.endpoint_info(&entity.token, &q, &entity.node, gid, Some(p.token)) {
                    self.queue_endpoint(z);
                }
            }
        }
        Some(entity.node)
    }

    /// End of the capture: partial batches and messages still open are counted.
    pub fn finish(&mut self) {
        for (_, s) in self.streams.drain_lru() {
            if !s.buf.is_empty() {
                self.stats.tcp_incomplete_batches += 1;
            }
            if !s.held.is_empty() {
                // Segments still waiting for the bytes before them when the capture ended.
                self.stats.tcp_gaps += 1;
                self.stats.tcp_bytes_skipped += s.held_bytes as u64;
            }
        }
        let open = self.joining.drain_lru().len() as u64;
        self.stats.fragmented_dropped += open;
    }
}

/// Whether a stream segment could start a batch: a 16-bit length and a
/// transport (or low-latency network) header of a known id after it.
fn plausible_batch_start(p: &[u8]) -> bool {
    p.len() >= 3 && u16::from_le_bytes([p[0], p[1]]) > 0 && transport::plausible_header(p[2])
}

/// Bytes an out-of-step stream keeps while it looks for a batch boundary (two batches of the
/// largest size and then some).
const RESYNC_BYTES: usize = 1 << 18;

enum Resync {
    /// A batch starts at this offset.
    At(usize),
    /// None found yet; offsets below this are known not to start one.
    Wait(usize),
}

/// Batches in a row that must decode whole before a stream out of step takes the first of them
/// as a boundary (a short run is found by chance in 64 KB of image bytes; three are not).
const RESYNC_CHAIN: usize = 3;

/// Where in `buf` (from `from`) batches start again: the first offset that starts
/// [`RESYNC_CHAIN`] batches in a row, each decoding whole (every transport message, a Frame's
/// network messages, to its last byte). An offset whose run runs past the bytes here is
/// undecided: the earliest of those is where the next look starts.
fn resync_at(buf: &[u8], from: usize, proto: Proto) -> Resync {
    let mut undecided = None;
    let mut o = from;
    while o + 3 <= buf.len() {
        let mut at = o;
        let mut run = 0;
        let decided = loop {
            if run == RESYNC_CHAIN {
                return Resync::At(o);
            }
            if at + 3 > buf.len() {
                break false;
            }
            if !plausible_batch_start(&buf[at..]) {
                break true;
            }
            let n = u16::from_le_bytes([buf[at], buf[at + 1]]) as usize;
            if at + 2 + n > buf.len() {
                break false;
            }
            if !decodes_whole(&buf[at + 2..at + 2 + n], proto) {
                break true;
            }
            at += 2 + n;
            run += 1;
        };
        if !decided && undecided.is_none() {
            undecided = Some(o);
        }
        o += 1;
    }
    Resync::Wait(undecided.unwrap_or(o))
}

/// Whether `buf` is whole batches, each decoding whole, to its last byte (a connection's
/// first segment, or one that starts at a boundary after a gap).
fn whole_batches(buf: &[u8], proto: Proto) -> bool {
    let mut at = 0;
    while at < buf.len() {
        if !plausible_batch_start(&buf[at..]) {
            return false;
        }
        let n = u16::from_le_bytes([buf[at], buf[at + 1]]) as usize;
        if at + 2 + n > buf.len() || !decodes_whole(&buf[at + 2..at + 2 + n], proto) {
            return false;
        }
        at += 2 + n;
    }
    at > 0
}

/// Whether a batch reads to its last byte without an error (nothing is recorded).
fn decodes_whole(b: &[u8], proto: Proto) -> bool {
    let mut r = Reader::new(b);
    while !r.is_empty() {
        match transport::read_v(&mut r, proto) {
            Ok(TransportMsg::Frame(_)) => {
                if FrameMsgs::with_proto(&mut r, proto).any(|m| m.is_err()) {
                    return false;
                }
            }
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    true
}

/// Drops a stream's first `o` buffered bytes and the segment marks before them.
fn drop_front(s: &mut Stream, o: usize) {
    let o = o.min(s.buf.len());
    s.buf.drain(..o);
    let keep_from = s.marks.iter().rposition(|m| m.0 <= o).unwrap_or(0);
    s.marks.drain(..keep_from);
    for m in &mut s.marks {
        m.0 = m.0.saturating_sub(o);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::Discovery;
    use ddscope_zenoh::emit;
    use std::net::{IpAddr, Ipv4Addr};

    fn addr(last: u8, port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)), port)
    }

    const KEY: &str = "0/chatter/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";

    fn seg(seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
        ddscope_wire::tcp::emit(40000, 7447, seq, 0, flags, payload)
    }

    struct Run {
        d: ZenohDecoder,
        events: Vec<SubmsgEvent>,
        frame: u64,
    }

    impl Run {
        fn new() -> Self {
            Run { d: ZenohDecoder::new(ZenohLimits::default()), events: vec![], frame: 0 }
        }
        fn tcp(&mut self, ts: i64, bytes: &[u8]) -> bool {
            self.frame += 1;
            let s = ddscope_wire::tcp::parse(bytes).unwrap();
            let cap: Arc<str> = Arc::from("c");
            let ev = &mut self.events;
            self.d.tcp(&cap, self.frame, ts, 0, None, addr(1, 40000), addr(2, 7447), &s, 0, &mut |e| ev.push(e.clone()))
        }
    }

    /// A batch with a Frame holding a declared key expression, then a Push on it (M=1).
    fn declare_and_put(sn: i64, gid: &[u8; 16], payload: &[u8]) -> Vec<u8> {
        let mut b = vec![];
        emit::frame_header(&mut b, true, 1);
        emit::declare_keyexpr(&mut b, 5, KEY);
        emit::push_put_scoped(&mut b, 5, "", true, Some(&rmw::attachment(sn, 1_000 + sn, gid)), payload);
        emit::stream_batch(&b)
    }

    #[test]
    fn batch_split_over_segments_is_timed_by_its_first_byte() {
        // Oracle: the byte layout zenoh 1.x writes (emit.rs, checked against
        // real zenoh processes in tests/test_zenoh_lab.py); here the timing rule.
        let gid = [3u8; 16];
        let stream = declare_and_put(7, &gid, &[0xaa; 300]);
        let mut r = Run::new();
        assert!(r.tcp(100, &seg(1000, ddscope_wire::tcp::SYN, &[])));
        assert!(r.tcp(200, &seg(1001, ddscope_wire::tcp::ACK, &stream[..50])));
        assert!(r.events.is_empty());
        assert!(r.tcp(300, &seg(1051, ddscope_wire::tcp::ACK, &stream[50..])));
        let data: Vec<_> = r.events.iter().filter(|e| e.kind == SubmsgKind::Data).collect();
        assert_eq!(data.len(), 1);
        let e = data[0];
        assert_eq!((e.sn, e.source_ts_ns, e.ts_ns, e.first_seen_ts_ns()), (Some(7), Some(1007), 300, 200));
        assert_eq!(e.writer_id.unwrap().prefix.0, [3u8; 12]);
        assert_eq!(e.topic.as_ref().unwrap().topic_name, "/chatter");
        assert_eq!(e.topic.as_ref().unwrap().type_name, "std_msgs/msg/String");
        assert_eq!(e.sample_size, Some(300));
        assert_eq!(r.d.stats.ros_samples, 1);
        assert_eq!(r.d.stats.messages.get("DECLARE_KEYEXPR"), Some(&1));
    }

    #[test]
    fn retransmission_is_not_decoded_twice_and_a_gap_resyncs() {
        let gid = [4u8; 16];
        let one = declare_and_put(1, &gid, b"x");
        let mut r = Run::new();
        r.tcp(1, &seg(1000, ddscope_wire::tcp::SYN, &[]));
        r.tcp(2, &seg(1001, 0, &one));
        r.tcp(3, &seg(1001, 0, &one)); // retransmitted
        assert_eq!(r.d.stats.tcp_retransmitted_bytes, one.len() as u64);
        // A segment lost from the capture, then HELD_SEGMENTS + 1 that each start a batch: held
        // while the lost one might still come (a reordering), then taken as a gap once the hold
        // is full.
        let last = HELD_SEGMENTS as i64 + 2;
        let mut at = 1001 + one.len() as u32 + 40;
        for sn in 2..=last {
            let b = declare_and_put(sn, &gid, b"y");
            r.tcp(3 + sn, &seg(at, 0, &b));
            at += b.len() as u32;
        }
        assert_eq!((r.d.stats.tcp_gaps, r.d.stats.tcp_bytes_skipped), (1, 40));
        let sns: Vec<_> = r.events.iter().filter(|e| e.kind == SubmsgKind::Data).map(|e| e.sn.unwrap()).collect();
        assert_eq!(sns, (1..=last).collect::<Vec<_>>());
    }

    #[test]
    fn segments_captured_out_of_order_are_put_back_in_order() {
        // Real rmw_zenoh_cpp through the lab's router (run of 2026-12-07, pc2's capture, tshark:
        // "This frame is a (suspected) out-of-order segment"): frame 3813 carried seq 36304424,
        // frame 3814 the 65160 bytes before it. Read as a gap, the stream fell out of step and
        // 11 356 batches were garbage; /image kept 13 of its 80 samples.
        let gid = [5u8; 16];
        let b: Vec<Vec<u8>> = (1..=3).map(|sn| declare_and_put(sn, &gid, &[0u8; 100])).collect();
        let at = |i: usize| 1001 + b[..i].iter().map(|x| x.len() as u32).sum::<u32>();
        let mut r = Run::new();
        r.tcp(1, &seg(1000, ddscope_wire::tcp::SYN, &[]));
        r.tcp(2, &seg(at(0), 0, &b[0]));
        r.tcp(3, &seg(at(2), 0, &b[2]));
        r.tcp(4, &seg(at(1), 0, &b[1]));
        let data: Vec<_> = r.events.iter().filter(|e| e.kind == SubmsgKind::Data).collect();
        assert_eq!(data.iter().map(|e| e.sn.unwrap()).collect::<Vec<_>>(), vec![1, 2, 3]);
        // each batch timed by the segment that carried its first byte
        assert_eq!(data.iter().map(|e| e.first_seen_ts_ns()).collect::<Vec<_>>(), vec![2, 4, 3]);
        assert_eq!((r.d.stats.tcp_gaps, r.d.stats.tcp_bytes_skipped, r.d.stats.tcp_reordered_segments, r.d.stats.malformed_batches), (0, 0, 1, 0));
    }

    #[test]
    fn a_segment_lost_on_the_path_waits_for_its_fast_retransmission() {
        // The CI run of stop 50 (real rmw_zenoh_cpp, pc2's capture; tshark: frame 19329 "Previous
        // segment(s) not captured", frame 19346 "(suspected) fast retransmission"): the segment at
        // 200500694 came again after the 10 segments behind it.
        let gid = [7u8; 16];
        let b: Vec<Vec<u8>> = (1..=13).map(|sn| declare_and_put(sn, &gid, &[0u8; 100])).collect();
        let at = |i: usize| 1001 + b[..i].iter().map(|x| x.len() as u32).sum::<u32>();
        let mut r = Run::new();
        r.tcp(1, &seg(1000, ddscope_wire::tcp::SYN, &[]));
        r.tcp(2, &seg(at(0), 0, &b[0]));
        for (i, x) in b.iter().enumerate().skip(2) {
            r.tcp(10 + i as i64, &seg(at(i), 0, x));
        }
        r.tcp(30, &seg(at(1), 0, &b[1]));
        let sns: Vec<_> = r.events.iter().filter(|e| e.kind == SubmsgKind::Data).map(|e| e.sn.unwrap()).collect();
        assert_eq!(sns, (1..=13).collect::<Vec<_>>(), "{:?}", r.d.stats);
        assert_eq!((r.d.stats.tcp_gaps, r.d.stats.tcp_bytes_skipped, r.d.stats.tcp_reordered_segments), (0, 0, 11));
    }

    #[test]
    fn after_a_gap_a_batch_boundary_is_found_inside_a_segment() {
        // Segments of a busy stream (TSO's 64 KB ones) rarely start at a batch: after a gap the
        // stream finds the first batch that decodes whole and is followed by another's start.
        let gid = [6u8; 16];
        let mut r = Run::new();
        r.tcp(1, &seg(1000, ddscope_wire::tcp::SYN, &[]));
        let first = declare_and_put(1, &gid, &[0u8; 10]);
        r.tcp(2, &seg(1001, 0, &first));
        let mut rest = vec![];
        let mut starts = vec![];
        // (enough 50-byte segments after the gap to fill the hold: HELD_SEGMENTS of them)
        for sn in 2..=40 {
            starts.push(rest.len());
            rest.extend(declare_and_put(sn, &gid, &[0u8; 120]));
        }
        // batch 2's first 60 bytes lost, then the rest in 50-byte segments
        let lost_to = starts[0] + 60;
        let mut at = 1001 + first.len() + lost_to;
        for (i, c) in rest[lost_to..].chunks(50).enumerate() {
            r.tcp(10 + i as i64, &seg(at as u32, 0, c));
            at += c.len();
        }
        r.d.finish();
        let sns: Vec<_> = r.events.iter().filter(|e| e.kind == SubmsgKind::Data).map(|e| e.sn.unwrap()).collect();
        assert_eq!(sns, [1].into_iter().chain(3..=40).collect::<Vec<_>>(), "{:?} {:?}", r.d.stats, r.d.problems);
        assert_eq!(r.d.stats.tcp_gaps, 1);
        // the lost bytes and the rest of batch 2: all of it
        assert_eq!(r.d.stats.tcp_bytes_skipped, starts[1] as u64, "{:?}", r.d.stats);
        assert_eq!(r.d.stats.malformed_batches, 0);
    }

    /// One TCP connection between two peers, as `tcp` sees its segments.
    struct Conn {
        client: SocketAddr,
        server: SocketAddr,
        seq: [u32; 2],
    }

    impl Conn {
        fn new(client: SocketAddr, server: SocketAddr) -> Self {
            Conn { client, server, seq: [1000, 5000] }
        }
        /// A segment from the client (`from_client`) or the server; false if the decoder did not take it as Zenoh.
        fn send(&mut self, d: &mut ZenohDecoder, evs: &mut Vec<SubmsgEvent>, frame: u64, from_client: bool, flags: u8, payload: &[u8]) -> bool {
            let (src, dst, i) = if from_client { (self.client, self.server, 0) } else { (self.server, self.client, 1) };
            let seq = self.seq[i];
            self.seq[i] = seq.wrapping_add(payload.len() as u32 + u32::from(flags & ddscope_wire::tcp::SYN != 0));
            let b = ddscope_wire::tcp::emit(src.port(), dst.port(), seq, 0, flags, payload);
            let seg = ddscope_wire::tcp::parse(&b).unwrap();
            let cap: Arc<str> = Arc::from("c");
            d.tcp(&cap, frame, frame as i64 * 10, 0, None, src, dst, &seg, 0, &mut |e| evs.push(e.clone()))
        }
        /// SYN, SYN-ACK, then InitSyn/InitAck with the two peers' Zenoh ids, OpenSyn/OpenAck.
        fn handshake(&mut self, d: &mut ZenohDecoder, evs: &mut Vec<SubmsgEvent>, frame: u64, client_zid: &[u8], server_zid: &[u8]) {
            self.handshake_version(d, evs, frame, client_zid, server_zid, transport::VERSION_1X)
        }
        /// [`handshake`](Self::handshake) of protocol `version`.
        fn handshake_version(&mut self, d: &mut ZenohDecoder, evs: &mut Vec<SubmsgEvent>, frame: u64, client_zid: &[u8], server_zid: &[u8], version: u8) {
            use ddscope_wire::tcp::{ACK, SYN};
            // taken as Zenoh at once on a Zenoh port (7447), else from the InitSyn below
            self.send(d, evs, frame, true, SYN, &[]);
            self.send(d, evs, frame + 1, false, SYN | ACK, &[]);
            for (i, (from_client, zid)) in [(true, client_zid), (false, server_zid)].into_iter().enumerate() {
                let mut b = vec![];
                emit::init_version(&mut b, !from_client, 1, zid, b"cookie", version);
                assert!(self.send(d, evs, frame + 2 + i as u64, from_client, ACK, &emit::stream_batch(&b)));
            }
            for (i, from_client) in [true, false].into_iter().enumerate() {
                let mut b = vec![];
                emit::open(&mut b, !from_client, 10_000, 1, b"cookie");
                assert!(self.send(d, evs, frame + 4 + i as u64, from_client, ACK, &emit::stream_batch(&b)));
            }
        }
    }

    #[test]
    fn a_session_over_two_links_resolves_declarations_made_on_the_other() {
        // The shape of a peer-mode lab run (tshark on PC1's capture, run of
        // 2026-11-28): the publisher A and the subscriber B connected to each
        // other at once, both handshakes completed and both connections stayed
        // open as links of one session. B declared the data key expression
        // (id 4) on the connection A had opened; A sent every sample on the
        // connection B had opened, referring to it as the receiver's id 4 (M=0).
        // Keyed by connection the PUTs were unresolved: rows without a topic.
        let (a_zid, b_zid, c_zid) = ([0xa1u8; 16], [0xb2u8; 16], [0xc3u8; 16]);
        let (a, b, c) = (IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1)), IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2)), IpAddr::V4(Ipv4Addr::new(10, 77, 0, 3)));
        let mut d = ZenohDecoder::new(ZenohLimits::default());
        let mut evs = vec![];
        // A → B's listening port, and B → A's, at once.
        let mut ab = Conn::new(SocketAddr::new(a, 57604), SocketAddr::new(b, 37073));
        let mut ba = Conn::new(SocketAddr::new(b, 36968), SocketAddr::new(a, 42827));
        ab.handshake(&mut d, &mut evs, 1, &a_zid, &b_zid);
        ba.handshake(&mut d, &mut evs, 10, &b_zid, &a_zid);
        // B's declaration on the link A opened (B is its server).
        let mut decl = vec![];
        emit::frame_header(&mut decl, true, 2);
        emit::declare_keyexpr(&mut decl, 4, KEY);
        assert!(ab.send(&mut d, &mut evs, 20, false, ddscope_wire::tcp::ACK, &emit::stream_batch(&decl)));
        // A third peer C's session with A declares id 4 as something else: not A–B's.
        let mut ca = Conn::new(SocketAddr::new(c, 41000), SocketAddr::new(a, 42827));
        ca.handshake(&mut d, &mut evs, 30, &c_zid, &a_zid);
        let mut other = vec![];
        emit::frame_header(&mut other, true, 2);
        emit::declare_keyexpr(&mut other, 4, "0/other/std_msgs::msg::dds_::String_/RIHS01_00");
        assert!(ca.send(&mut d, &mut evs, 40, true, ddscope_wire::tcp::ACK, &emit::stream_batch(&other)));
        // A's samples on the link B opened (A is its server), M=0: B's id 4.
        for sn in 1..=3i64 {
            let mut put = vec![];
            emit::frame_header(&mut put, true, 2 + sn as u64);
            emit::push_put_scoped(&mut put, 4, "", false, Some(&rmw::attachment(sn, 1_000 + sn, &[8; 16])), &[0x55; 40]);
            assert!(ba.send(&mut d, &mut evs, 50 + sn as u64, false, ddscope_wire::tcp::ACK, &emit::stream_batch(&put)));
        }
        let data: Vec<_> = evs.iter().filter(|e| e.kind == SubmsgKind::Data).collect();
        assert_eq!(data.len(), 3);
        for (e, sn) in data.iter().zip(1..) {
            assert_eq!((e.sn, e.src, e.dst), (Some(sn), SocketAddr::new(a, 42827), SocketAddr::new(b, 36968)));
            assert_eq!(e.topic.as_ref().map(|t| t.topic_name.as_str()), Some("/chatter"));
            assert_eq!(e.zenoh.as_ref().unwrap().key_expr.as_deref(), Some(KEY));
        }
        assert_eq!((d.stats.unresolved_keyexprs, d.stats.ros_samples, d.stats.malformed_batches), (0, 3, 0));
        // The same PUT from A to C refers to C's id 4, not B's.
        let mut put = vec![];
        emit::frame_header(&mut put, true, 9);
        emit::push_put_scoped(&mut put, 4, "", false, None, b"x");
        assert!(ca.send(&mut d, &mut evs, 60, false, ddscope_wire::tcp::ACK, &emit::stream_batch(&put)));
        assert_eq!(evs.last().unwrap().zenoh.as_ref().unwrap().key_expr.as_deref(), Some("0/other/std_msgs::msg::dds_::String_/RIHS01_00"));
        // A link whose handshake was not captured (a Zenoh port, capture started
        // late) keeps its own declarations, and refers to no other link's.
        let mut late = Conn::new(SocketAddr::new(c, 41001), SocketAddr::new(b, 7447));
        assert!(late.send(&mut d, &mut evs, 70, false, ddscope_wire::tcp::ACK, &emit::stream_batch(&put)));
        assert_eq!(d.stats.unresolved_keyexprs, 1);
        let mut decl7 = vec![];
        emit::frame_header(&mut decl7, true, 3);
        emit::declare_keyexpr(&mut decl7, 4, KEY);
        assert!(late.send(&mut d, &mut evs, 71, true, ddscope_wire::tcp::ACK, &emit::stream_batch(&decl7)));
        assert!(late.send(&mut d, &mut evs, 72, false, ddscope_wire::tcp::ACK, &emit::stream_batch(&put)));
        assert_eq!(evs.last().unwrap().zenoh.as_ref().unwrap().key_expr.as_deref(), Some(KEY));
        assert_eq!(d.stats.unresolved_keyexprs, 1);
    }

    #[test]
    fn receiver_mapping_and_fragments() {
        // The subscriber declares the key expression (direction B → A); the
        // publisher's Push (A → B, M=0) refers to it; the message comes in fragments.
        let mut d = ZenohDecoder::new(ZenohLimits::default());
        let cap: Arc<str> = Arc::from("c");
        let (a, b) = (addr(1, 50000), addr(2, 7447));
        let mut evs = vec![];
        let mut decl = vec![];
        emit::frame_header(&mut decl, true, 1);
        emit::declare_keyexpr(&mut decl, 1, KEY);
        d.udp(&cap, 1, 10, 10, 0, None, b, a, &decl, false, &mut |e| evs.push(e.clone()));
        let mut msg = vec![];
        emit::push_put_scoped(&mut msg, 1, "", false, Some(&rmw::attachment(9, 99, &[1; 16])), &[7u8; 5000]);
        let chunks: Vec<&[u8]> = msg.chunks(1500).collect();
        for (i, c) in chunks.iter().enumerate() {
            let mut f = vec![];
            emit::fragment(&mut f, true, i + 1 < chunks.len(), 40 + i as u64, c);
            d.udp(&cap, 2 + i as u64, 20 + i as i64, 20 + i as i64, 0, None, a, b, &f, false, &mut |e| evs.push(e.clone()));
        }
        let data: Vec<_> = evs.iter().filter(|e| e.kind == SubmsgKind::Data).collect();
        assert_eq!(data.len(), 1);
        assert_eq!((data[0].sn, data[0].first_seen_ts_ns(), data[0].ts_ns), (Some(9), 20, 20 + chunks.len() as i64 - 1));
        assert_eq!(data[0].zenoh.as_ref().unwrap().key_expr.as_deref(), Some(KEY));
        assert_eq!(data[0].sample_size, Some(5000));
        // A missing fragment: the message is dropped and counted.
        for (i, c) in chunks.iter().enumerate().filter(|(i, _)| *i != 1) {
            let mut f = vec![];
            emit::fragment(&mut f, true, i + 1 < chunks.len(), 90 + i as u64, c);
            d.udp(&cap, 20, 30, 30, 0, None, a, b, &f, false, &mut |e| evs.push(e.clone()));
        }
        assert!(d.stats.fragmented_dropped >= 1);
        assert_eq!(evs.iter().filter(|e| e.kind == SubmsgKind::Data).count(), 1);
    }

    fn s<T: std::fmt::Display>(q: &Option<crate::topics::Qos<T>>) -> Option<String> {
        q.as_ref().map(|x| x.to_string())
    }

    #[test]
    fn publisher_and_subscription_tokens_give_endpoints_with_their_qos() {
        // Oracle: the QoS field as rmw_zenoh's qos_to_keyexpr writes it
        // (liveliness_utils.cpp; unit-tested in ddscope_zenoh::rmw), the
        // numbers of rmw/types.h, and the topics row a DDS writer with the same
        // SEDP QoS gets.
        let q = rmw::Qos { reliability: 2, durability: 1, depth: 5, deadline: rmw::RmwTime { sec: 0, nsec: 100_000_000 }, ..rmw::DEFAULT_QOS };
        let topic = |q: &str| Some(("/chatter", "std_msgs::msg::dds_::String_", "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18", q.to_string()));
        let key = |kind, node: &str, eid, qos: Option<String>| {
            let mut k = rmw::token_key(0, "aa", 0, eid, kind, "/", node, None);
            if let Some((n, t, h, q)) = qos.and_then(|q| topic(&q)) {
                k.push_str(&format!("/{}/{}/{}/{q}", n.replace('/', "%"), t, h));
            }
            k
        };
        let mp = key(rmw::EntityKind::Publisher, "talker", 10, Some(q.to_key()));
        let ms = key(rmw::EntityKind::Subscription, "listener", 11, Some(rmw::DEFAULT_QOS.to_key()));
        let bad = key(rmw::EntityKind::Subscription, "old", 12, Some("1:2:1,10".into()));
        let mut b = vec![];
        emit::frame_header(&mut b, true, 1);
        for (i, k) in [&mp, &ms, &bad, &key(rmw::EntityKind::Node, "talker", 0, None)].iter().enumerate() {
            emit::declare_token(&mut b, i as u32, k);
        }
        emit::push_put(&mut b, KEY, Some(&rmw::attachment(1, 5, &rmw::gid_of(&mp))), b"hello");
        let mut d = ZenohDecoder::new(ZenohLimits::default());
        let cap: Arc<str> = Arc::from("c");
        let mut analysis = crate::topics::TopicsAnalysis::new();
        d.udp(&cap, 1, 1, 1, 0, None, addr(1, 7447), addr(2, 7447), &b, false, &mut |e| analysis.on_event(e));
        assert_eq!((d.stats.ros_tokens, d.stats.bad_ros_qos), (4, 1));
        assert!(d.problems.iter().any(|(_, m)| m.contains("/old") && m.contains("1:2:1,10")), "{:?}", d.problems);
        let eps = d.take_endpoints();
        assert_eq!(eps.len(), 2);
        let mut disc = Discovery::default();
        for e in eps {
            e.record(&mut disc);
        }
        let w = disc.endpoint(&Guid::new(GuidPrefix(rmw::gid_of(&mp)[..12].try_into().unwrap()), EntityId(rmw::gid_of(&mp)[12..].try_into().unwrap()))).unwrap();
        assert_eq!((w.reliability, w.durability, w.history), (Reliability::BestEffort, Durability::TransientLocal, Some(History::KeepLast(5))));
        assert_eq!((w.deadline, w.lifespan, w.liveliness), (QosDuration::Ns(100_000_000), QosDuration::Infinite, crate::discovery::LIVELINESS_DEFAULT));
        assert_eq!((w.names.topic_name.as_str(), w.names.domain, w.names.topic_raw.as_str()), ("/chatter", Some(0), KEY));
        assert_eq!((disc.writers_of(Some(0), KEY), disc.readers_of(Some(0), KEY)), (1, 1));
        // The topics row: QoS in the DDS columns, the writer's node, one reader and its node.
        let rows = analysis.rows("c", &disc, false, &[]);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.writers, r.readers, r.reader_nodes.clone(), r.writer_nodes.clone()), (1, 1, vec!["/listener".to_string()], vec!["/talker".to_string()]));
        assert_eq!((s(&r.reliability), s(&r.durability), s(&r.history)), (Some("best_effort".into()), Some("transient_local".into()), Some("keep_last(5)".into())));
        assert_eq!((s(&r.deadline), s(&r.lifespan), s(&r.liveliness)), (Some("0.1s".into()), Some("infinite".into()), Some("automatic".into())));
    }

    #[test]
    fn tables_stay_within_their_caps() {
        let cfg = ZenohLimits { max_streams: 4, max_keyexprs: 8, max_fragmented: 2, max_fragment_head: 128, ..ZenohLimits::default() };
        let mut d = ZenohDecoder::new(cfg);
        let cap: Arc<str> = Arc::from("c");
        let mut n = 0;
        for i in 0..50u16 {
            let src = addr(1, 10000 + i);
            // a stream that never ends: half a batch each
            let s = ddscope_wire::tcp::emit(10000 + i, 7447, 1, 0, 0, &[0xff, 0x7f, 0x05, 0x01]);
            let s = ddscope_wire::tcp::parse(&s).unwrap();
            d.tcp(&cap, i as u64, 1, 0, None, src, addr(2, 7447), &s, 0, &mut |_| n += 1);
            let mut b = vec![];
            emit::frame_header(&mut b, true, 1);
            emit::declare_keyexpr(&mut b, i, "a/b");
            d.udp(&cap, 1, 1, 1, 0, None, addr(3, 7447), addr(4, 9), &b, false, &mut |_| n += 1);
            let mut f = vec![];
            emit::fragment(&mut f, i % 2 == 0, true, 1, &[0u8; 1000]);
            d.udp(&cap, 1, 1, 1, 0, None, addr(5, 20000 + i), addr(6, 7447), &f, false, &mut |_| n += 1);
        }
        assert!(d.streams.len() <= 4 && d.keyexprs.len() <= 8 && d.joining.len() <= 2);
        assert_eq!(d.stats.streams_evicted, 46);
        assert_eq!(d.stats.keyexprs_evicted, 42);
        assert_eq!(d.stats.fragmented_evicted, 48);
        assert!(d.joining.values().all(|j| j.head.len() <= 128));
    }

    #[test]
    fn garbage_never_panics_and_is_counted() {
        let mut d = ZenohDecoder::new(ZenohLimits::default());
        let cap: Arc<str> = Arc::from("c");
        let mut x: u32 = 12345;
        for i in 0..2000 {
            let len = (i % 97) as usize;
            let b: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            d.udp(&cap, i, 1, 1, 0, None, addr(1, 7447), addr(2, 1), &b, false, &mut |_| {});
        }
        assert!(d.stats.malformed_batches + d.stats.truncated_batches > 0);
    }

    /// The tokens rmw_zenoh_cpp of 2024 declares for a node and its publisher of `topic`
    /// (its QoS field written in full, as tests/real_batches_v08.rs shows it does).
    fn tokens_2024(zid: &str, node: &str, eid: u32, topic: &str) -> (String, String) {
        let nn = format!("@ros2_lv/0/{zid}/0/0/NN/%/%/{node}");
        let mp = format!(
            "@ros2_lv/0/{zid}/0/{eid}/MP/%/%/{node}/%{}/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18/2:2:1,5:9223372036,854775807:9223372036,854775807:1,9223372036,854775807",
            topic.trim_start_matches('/')
        );
        (nn, mp)
    }

    /// A 0x08 session A → B over TCP: handshake, then the batches each as one segment.
    fn v08_session(version: u8, batches: &[Vec<u8>]) -> (ZenohDecoder, Vec<SubmsgEvent>) {
        let mut d = ZenohDecoder::new(ZenohLimits::default());
        let mut evs = vec![];
        let mut c = Conn::new(addr(1, 41000), addr(2, 7447));
        c.handshake_version(&mut d, &mut evs, 1, &[0xa1; 16], &[0xb2; 16], version);
        for (i, b) in batches.iter().enumerate() {
            assert!(c.send(&mut d, &mut evs, 10 + i as u64, true, ddscope_wire::tcp::ACK, &emit::stream_batch(b)));
        }
        (d, evs)
    }

    #[test]
    fn a_0x08_session_is_decoded_and_its_random_gids_tied_to_their_publisher() {
        // Oracle: the shapes of tests/real_batches_v08.rs (batches real rmw_zenoh_cpp of
        // 2024 wrote): tokens as subscribers on @/liveliness/, the decimal-map
        // attachment, a random publisher gid that is not the token's hash.
        let (nn, mp) = tokens_2024("a1a1", "talker", 10, "/chatter");
        let gid = [0x42u8; 16];
        let mut decl = vec![];
        emit::frame_header(&mut decl, true, 1);
        emit::declare_token_v08(&mut decl, 1, &nn);
        emit::declare_token_v08(&mut decl, 2, &mp);
        emit::declare_keyexpr(&mut decl, 5, KEY);
        let mut puts = vec![];
        emit::frame_header(&mut puts, true, 2);
        for sn in 1..=3 {
            let att = rmw::attachment_map(sn, 1_000 + sn, &gid, [(sn as usize) % 3, (sn as usize + 1) % 3, (sn as usize + 2) % 3]);
            emit::push_put_scoped(&mut puts, 5, "", true, Some(&att), &[0x55; 64]);
        }
        let (mut d, evs) = v08_session(0x08, &[decl.clone(), puts]);
        assert_eq!((d.stats.v08_sessions, d.stats.other_version_sessions, d.stats.undecodable_batches), (2, 0, 0));
        assert_eq!((d.stats.malformed_batches, d.stats.truncated_batches, d.stats.unresolved_keyexprs), (0, 0, 0));
        assert_eq!((d.stats.ros_tokens, d.stats.ros_samples, d.stats.ros_gids_bound, d.stats.ros_gids_ambiguous), (2, 3, 1, 0));
        let data: Vec<_> = evs.iter().filter(|e| e.kind == SubmsgKind::Data).collect();
        assert_eq!(data.len(), 3);
        for (e, sn) in data.iter().zip(1..) {
            assert_eq!((e.sn, e.source_ts_ns, e.writer_id), (Some(sn), Some(1_000 + sn), Some(guid_of(&gid))));
            assert_eq!(e.topic.as_ref().unwrap().topic_name, "/chatter");
            assert_eq!(e.writer_node.as_ref().unwrap().fq_name, "/talker");
        }
        assert_eq!(d.entity(&gid).unwrap().node.fq_name, "/talker");
        // The publisher: recorded under its token's hash, then moved to the samples' gid.
        let eps = d.take_endpoints();
        assert_eq!(eps.len(), 2);
        let token_gid = rmw::gid_of(&mp);
        assert_eq!((eps[0].endpoint.guid, eps[0].replaces), (guid_of(&token_gid), None));
        assert_eq!((eps[1].endpoint.guid, eps[1].replaces), (guid_of(&gid), Some(guid_of(&token_gid))));
        let mut disc = Discovery::default();
        for e in eps {
            e.record(&mut disc);
        }
        assert!(disc.endpoint(&guid_of(&token_gid)).is_none());
        let w = disc.endpoint(&guid_of(&gid)).unwrap();
        assert_eq!((w.reliability, w.history), (Reliability::BestEffort, Some(History::KeepLast(5))));
        assert_eq!((disc.writers_of(Some(0), KEY), disc.node_of(&guid_of(&gid)).map(|n| n.fq_name.clone())), (1, Some("/talker".into())));
        // The same token declared again (on another link, through the router): still one writer.
        let mut c = Conn::new(addr(3, 41001), addr(2, 7447));
        let mut evs2 = vec![];
        c.handshake_version(&mut d, &mut evs2, 50, &[0xa1; 16], &[0xc3; 16], 0x08);
        assert!(c.send(&mut d, &mut evs2, 60, true, ddscope_wire::tcp::ACK, &emit::stream_batch(&decl)));
        for e in d.take_endpoints() {
            assert_eq!(e.endpoint.guid, guid_of(&gid));
            e.record(&mut disc);
        }
        assert_eq!(disc.writers_of(Some(0), KEY), 1);
    }

    #[test]
    fn publishers_of_several_nodes_on_a_topic_are_not_guessed_between() {
        let (_, mp_a) = tokens_2024("a1a1", "talker", 10, "/chatter");
        let (_, mp_b) = tokens_2024("b2b2", "other", 11, "/chatter");
        let mut b = vec![];
        emit::frame_header(&mut b, true, 1);
        emit::declare_token_v08(&mut b, 1, &mp_a);
        emit::declare_token_v08(&mut b, 2, &mp_b);
        for sn in 1..=3 {
            emit::push_put(&mut b, KEY, Some(&rmw::attachment_map(sn, sn, &[7; 16], [0, 1, 2])), b"x");
        }
        let (mut d, evs) = v08_session(0x08, &[b]);
        assert!(evs.iter().filter(|e| e.kind == SubmsgKind::Data).all(|e| e.writer_node.is_none() && e.sn.is_some()));
        // Counted once per gid, not per sample; both publishers stay recorded under their tokens.
        assert_eq!((d.stats.ros_gids_ambiguous, d.stats.ros_gids_bound), (1, 0));
        assert!(d.stats.problems().iter().any(|p| p.contains("not tied to a node")));
        assert!(d.take_endpoints().iter().all(|e| e.replaces.is_none()));
    }

    #[test]
    fn a_0x09_session_neither_reads_liveliness_subscribers_as_tokens_nor_ties_gids() {
        // 1.x declares tokens as tokens and hashes the gid: a subscriber on
        // @/liveliness/... and a gid not found among the tokens stay as they are.
        let (nn, mp) = tokens_2024("a1a1", "talker", 10, "/chatter");
        let mut b = vec![];
        emit::frame_header(&mut b, true, 1);
        emit::declare_token_v08(&mut b, 1, &nn);
        emit::declare_token(&mut b, 2, &mp);
        emit::push_put(&mut b, KEY, Some(&rmw::attachment_map(1, 1, &[7; 16], [0, 1, 2])), b"x");
        let (d, evs) = v08_session(0x09, &[b]);
        assert_eq!((d.stats.v08_sessions, d.stats.ros_tokens, d.stats.ros_gids_bound), (0, 1, 0));
        let e = evs.iter().find(|e| e.kind == SubmsgKind::Data).unwrap();
        assert_eq!((e.sn, e.writer_node.as_ref()), (Some(1), None));
    }

    #[test]
    fn other_versions_are_still_counted_and_said_why_per_session() {
        let mut b = vec![];
        emit::frame_header(&mut b, true, 1);
        emit::push_put(&mut b, KEY, Some(&rmw::attachment_map(1, 1, &[7; 16], [0, 1, 2])), b"x");
        let (d, evs) = v08_session(0x07, &[b]);
        // the OpenSyn/OpenAck of the 0x07 session and its one data batch
        assert_eq!((d.stats.other_version_sessions, d.stats.v08_sessions, d.stats.undecodable_batches), (2, 0, 3));
        assert!(evs.iter().all(|e| e.kind != SubmsgKind::Data));
        assert!(d.problems.iter().any(|(_, m)| m.contains("version 0x07") && m.contains("counted, not decoded")), "{:?}", d.problems);
    }

    #[test]
    fn hostile_0x08_batches_are_counted_and_the_tie_tables_stay_capped() {
        let cfg = ZenohLimits { max_tokens: 8, ..ZenohLimits::default() };
        let mut d = ZenohDecoder::new(cfg);
        let mut evs = 0usize;
        let mut c = Conn::new(addr(1, 41000), addr(2, 7447));
        let mut sink = vec![];
        c.handshake_version(&mut d, &mut sink, 1, &[0xa1; 16], &[0xb2; 16], 0x08);
        // 200 publishers on 200 topics, each with its own random gid: tables capped at 8.
        for i in 0..200u32 {
            let topic = format!("/t{i}");
            let (_, mp) = tokens_2024("a1a1", "talker", i, &topic);
            let key = format!("0/t{i}/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18");
            let mut b = vec![];
            emit::frame_header(&mut b, true, i as u64);
            emit::declare_token_v08(&mut b, i, &mp);
            let mut g = [0u8; 16];
            g[..4].copy_from_slice(&i.to_le_bytes());
            emit::push_put(&mut b, &key, Some(&rmw::attachment_map(1, 1, &g, [0, 1, 2])), b"x");
            c.send(&mut d, &mut sink, 10 + i as u64, true, ddscope_wire::tcp::ACK, &emit::stream_batch(&b));
        }
        assert!(d.pubs_by_key.len() <= 8 && d.gid_alias.len() <= 8 && d.tokens.len() <= 8);
        assert_eq!(d.stats.ros_gids_bound, 200);
        assert!(d.stats.tokens_evicted >= 192 && d.stats.ros_ties_evicted >= 192, "{:?}", d.stats);
        // Garbage, cut batches and huge lengths in the 0x08 session: counted, never a panic.
        let mut x: u32 = 99;
        for i in 0..3000u64 {
            let len = (i % 61) as usize + 1;
            let mut b: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            // Every third one a Frame whose first message starts plausibly.
            if i % 3 == 0 {
                b[0] = transport::FRAME | 0x20;
                if len > 2 {
                    b[2] = [network::PUSH, network::DECLARE, network::REQUEST, network::RESPONSE][(i / 3 % 4) as usize] | (b[2] & 0xe0);
                }
            }
            c.send(&mut d, &mut sink, 1000 + i, true, ddscope_wire::tcp::ACK, &emit::stream_batch(&b));
            evs += sink.len();
            sink.clear();
        }
        let mut huge = vec![];
        emit::frame_header(&mut huge, true, 1);
        huge.extend_from_slice(&[network::PUSH | 0x20, 0, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        c.send(&mut d, &mut sink, 9000, true, ddscope_wire::tcp::ACK, &emit::stream_batch(&huge));
        // a garbage batch that reads as an Init of another version makes the rest undecodable:
        // every batch is counted either way
        assert!(d.stats.malformed_batches + d.stats.truncated_batches + d.stats.undecodable_batches > 100, "{:?}", d.stats);
        assert!(d.stats.truncated_batches > 0);
        assert!(evs > 0);
        assert!(d.keyexprs.len() <= ZenohLimits::default().max_keyexprs);
    }
}
