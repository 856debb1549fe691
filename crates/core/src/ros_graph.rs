//! ROS 2 node names from the wire: the `ros_discovery_info` topic.
//!
//! Every DDS-based rmw (rmw_cyclonedds, rmw_fastrtps, rmw_connextdds) keeps
//! the ROS graph on one DDS topic, `ros_discovery_info`, type
//! `rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_`: each participant
//! publishes, whenever one of its nodes creates or destroys a publisher or
//! subscription, the whole list of its nodes and of the reader and writer
//! GUIDs ("gids") each node owns (keep-last 1, transient-local). The message
//! definitions, from ros2/rmw_dds_common (`msg/`):
//!
//! ```text
//! ParticipantEntitiesInfo:  Gid gid
//!                           NodeEntitiesInfo[] node_entities_info_seq
//! NodeEntitiesInfo:         string<=256 node_namespace
//!                           string<=256 node_name
//!                           Gid[] reader_gid_seq
//!                           Gid[] writer_gid_seq
//! Gid:                      char[24] data   (rmw_dds_common < 2.0: Foxy … Humble)
//!                           char[16] data   (rmw_dds_common >= 2.0, ros2/rmw_dds_common#68: Iron, Jazzy, …)
//! ```
//!
//! A gid's first 16 bytes are the DDS GUID of the entity (the 24-byte form
//! pads with zeros). The Gid's size is not on the wire (a fixed array), so
//! [`parse_participant_entities`] tries both layouts with strict bounds: the
//! sample must be consumed exactly (up to the 0–3 bytes of CDR end padding),
//! every string NUL-terminated within its bound. A message that parses both
//! ways cannot be built from a real one: a Humble message read as 16-byte
//! gids leaves its 8 pad bytes (and more) unread, an Iron message read as
//! 24-byte gids takes the node count from the namespace string.
//!
//! Encodings: XCDR1 (`CDR_LE`/`CDR_BE`, what rmw_cyclonedds and rmw_fastrtps
//! send in Humble … Jazzy, checked on the shared captures) and XCDR2, plain
//! (`CDR2_*`: a DHEADER before each sequence of structs) and delimited
//! (`D_CDR2_*`, appendable types: a DHEADER before every struct too),
//! checked against Cyclone DDS's Python serializer.
//!
//! The graph ([`RosGraph`]) maps participant → nodes → gids and gid → node;
//! a later sample of a participant replaces its earlier state (the topic is
//! keep-last per participant). Both tables are [`BoundedMap`]s: least
//! recently announced first out, every eviction counted.

use crate::bounded::BoundedMap;
use ddscope_wire::cdr::CdrReader;
use ddscope_wire::rtps::{Encapsulation, PayloadHeader};
use ddscope_wire::{EntityId, Guid, GuidPrefix};
use serde::Serialize;
use std::fmt;
use std::sync::Arc;

/// The DDS topic of the ROS graph (not mangled: it is not a ROS topic).
pub const ROS_DISCOVERY_TOPIC: &str = "ros_discovery_info";
/// Its DDS type name.
pub const ROS_DISCOVERY_TYPE: &str = "rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_";
/// Longest node namespace and name the message type allows (`string<=256`).
pub const MAX_NAME_BYTES: usize = 256;

/// A ROS 2 node as its participant announces it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct RosNode {
    /// `/` or `/robot1/sensors`, as announced.
    pub namespace: String,
    pub name: String,
    /// The fully qualified name: `/talker`, `/robot1/sensors/lidar`.
    pub fq_name: String,
}

impl RosNode {
    /// A node of `namespace` named `name`, each cut at the default name cap
    /// (`ros_discovery_info` bounds them to 256 bytes by its IDL type already).
    pub fn new(namespace: &str, name: &str) -> Self {
        Self::capped(namespace, name, &mut crate::names::NameCap::default())
    }

    /// A node whose names come from the wire, each cut by `cap` (the fully
    /// qualified name is at most the two cut names and a `/`).
    pub fn capped(namespace: &str, name: &str, cap: &mut crate::names::NameCap) -> Self {
        let (namespace, name) = (cap.cap(namespace), cap.cap(name));
        let fq_name = if namespace.ends_with('/') {
            format!("{namespace}{name}")
        } else if namespace.is_empty() {
            format!("/{name}")
        } else {
            format!("{namespace}/{name}")
        };
        RosNode { namespace, name, fq_name }
    }
}

impl fmt::Display for RosNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.fq_name)
    }
}

/// Size of `rmw_dds_common/msg/Gid` on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GidLayout {
    /// `char[24]`: rmw_dds_common before 2.0 (Foxy … Humble).
    Bytes24,
    /// `char[16]`: rmw_dds_common 2.0 and later (Iron, Jazzy, …).
    Bytes16,
}

impl GidLayout {
    pub fn len(self) -> usize {
        match self {
            GidLayout::Bytes24 => 24,
            GidLayout::Bytes16 => 16,
        }
    }
    fn other(self) -> Self {
        match self {
            GidLayout::Bytes24 => GidLayout::Bytes16,
            GidLayout::Bytes16 => GidLayout::Bytes24,
        }
    }
}

/// Which CDR the sample uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Xcdr {
    V1,
    /// XCDR2 of final types: DHEADER before sequences of structs.
    V2Plain,
    /// XCDR2 of appendable types: DHEADER before sequences of structs and before every struct.
    V2Delimited,
}

/// One node of a [`ParticipantEntities`] sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEntities {
    pub node: RosNode,
    pub readers: Vec<Guid>,
    pub writers: Vec<Guid>,
}

/// One decoded `ros_discovery_info` sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParticipantEntities {
    /// The announcing participant's GUID.
    pub gid: Guid,
    pub layout: GidLayout,
    pub nodes: Vec<NodeEntities>,
}

/// Why a `ros_discovery_info` sample was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RosGraphError {
    /// Not a valid ParticipantEntitiesInfo in any layout.
    Malformed(String),
    /// Valid so far, but more nodes or gids than the caps allow.
    OverLimit(String),
}

impl fmt::Display for RosGraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RosGraphError::Malformed(m) => write!(f, "malformed ParticipantEntitiesInfo: {m}"),
            RosGraphError::OverLimit(m) => write!(f, "ParticipantEntitiesInfo over the caps: {m}"),
        }
    }
}

impl std::error::Error for RosGraphError {}

/// Caps of the ROS graph (see [`RosGraph`]).
#[derive(Debug, Clone, Copy)]
pub struct RosGraphLimits {
    /// Participants whose nodes are remembered; the least recently announced is forgotten first.
    pub max_participants: usize,
    /// Reader and writer gids mapped to their node (all participants together);
    /// the least recently announced is forgotten first. ~80 bytes each.
    pub max_entities: usize,
    /// Bytes the participants' node lists may hold together.
    pub max_bytes: usize,
    /// Nodes in one sample; a sample with more is refused (counted).
    pub max_nodes_per_participant: usize,
    /// Reader gids, and writer gids, of one node; a sample with more is refused (counted).
    pub max_gids_per_node: usize,
}

impl Default for RosGraphLimits {
    fn default() -> Self {
        RosGraphLimits {
            max_participants: 1 << 14,
            max_entities: 1 << 18,
            max_bytes: 64 << 20,
            max_nodes_per_participant: 4096,
            max_gids_per_node: 16_384,
        }
    }
}

fn malformed(pos: usize, m: impl Into<String>) -> (usize, RosGraphError) {
    (pos, RosGraphError::Malformed(m.into()))
}

/// A cursor for one layout attempt; errors carry how far the attempt got.
struct Reader<'a> {
    r: CdrReader<'a>,
    len: usize,
    xcdr: Xcdr,
    gid_len: usize,
}

type Attempt<T> = Result<T, (usize, RosGraphError)>;

impl<'a> Reader<'a> {
    fn pos(&self) -> usize {
        self.r.position()
    }

    fn u32(&mut self, what: &'static str) -> Attempt<u32> {
        let pos = self.pos();
        self.r.a_u32(what).map_err(|e| malformed(pos, e.to_string()))
    }

    /// An XCDR2 DHEADER: returns where the delimited object ends.
    fn dheader(&mut self, what: &'static str) -> Attempt<usize> {
        let n = self.u32(what)? as usize;
        let end = self.pos().checked_add(n).filter(|&e| e <= self.len);
        end.ok_or_else(|| malformed(self.pos(), format!("{what}: DHEADER of {n} bytes runs past the end of the sample")))
    }

    /// The end of a delimited object: later members an appendable type may
    /// have gained are skipped; reading past the end is malformed.
    fn end_of(&mut self, end: usize, what: &'static str, exact: bool) -> Attempt<()> {
        let pos = self.pos();
        if pos > end || (exact && pos != end) {
            return Err(malformed(pos, format!("{what}: {pos} bytes read, DHEADER says {end}")));
        }
        self.r.skip(end - pos, what).map_err(|e| malformed(pos, e.to_string()))
    }

    fn gid(&mut self, what: &'static str) -> Attempt<Guid> {
        if self.xcdr == Xcdr::V2Delimited {
            let start = self.pos();
            let end = self.dheader(what)?;
            if end - start - 4 != self.gid_len {
                return Err(malformed(start, format!("{what}: a {}-byte Gid, not {}", end - start - 4, self.gid_len)));
            }
        }
        let pos = self.pos();
        let b = self.r.bytes(self.gid_len, what).map_err(|e| malformed(pos, e.to_string()))?;
        Guid::from_slice(&b[..16]).ok_or_else(|| malformed(pos, format!("{what}: not a GUID")))
    }

    fn name(&mut self, what: &'static str) -> Attempt<String> {
        let pos = self.pos();
        let n = self.u32(what)? as usize;
        if n > MAX_NAME_BYTES + 1 {
            return Err(malformed(pos, format!("{what}: a {n}-byte string, over the type's bound of {MAX_NAME_BYTES} characters")));
        }
        let b = self.r.bytes(n, what).map_err(|e| malformed(pos, e.to_string()))?;
        // CDR strings end with one NUL (length 0 is tolerated as the empty string).
        let text = match b.split_last() {
            None => &b[..0],
            Some((0, t)) => t,
            Some(_) => return Err(malformed(pos, format!("{what}: string not NUL-terminated"))),
        };
        if text.iter().any(|&c| c < 0x20 || c == 0x7f) {
            return Err(malformed(pos, format!("{what}: control characters in the name")));
        }
        std::str::from_utf8(text).map(str::to_string).map_err(|_| malformed(pos, format!("{what}: not UTF-8")))
    }

    /// `sequence<Gid>`.
    fn gids(&mut self, what: &'static str, limits: &RosGraphLimits) -> Attempt<Vec<Guid>> {
        let seq_end = if self.xcdr != Xcdr::V1 { Some(self.dheader(what)?) } else { None };
        let pos = self.pos();
        let n = self.u32(what)? as usize;
        let each = self.gid_len + if self.xcdr == Xcdr::V2Delimited { 4 } else { 0 };
        if n.saturating_mul(each) > self.len - self.pos() {
            return Err(malformed(pos, format!("{what}: {n} gids do not fit in the {} bytes left", self.len - self.pos())));
        }
        if n > limits.max_gids_per_node {
            return Err((pos, RosGraphError::OverLimit(format!("{what}: {n} gids, cap {}", limits.max_gids_per_node))));
        }
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.gid(what)?);
        }
        if let Some(end) = seq_end {
            self.end_of(end, what, true)?;
        }
        Ok(v)
    }
}

/// Smallest NodeEntitiesInfo: two strings and two sequences, each at least
/// its 4-byte length (XCDR2 adds DHEADERs, so this bounds every encoding).
const MIN_NODE_BYTES: usize = 16;

fn parse_layout(body: &[u8], le: bool, xcdr: Xcdr, layout: GidLayout, limits: &RosGraphLimits) -> Attempt<ParticipantEntities> {
    let mut r = Reader { r: CdrReader::new(body, le), len: body.len(), xcdr, gid_len: layout.len() };
    let top_end = if xcdr == Xcdr::V2Delimited { Some(r.dheader("ParticipantEntitiesInfo")?) } else { None };
    let gid = r.gid("gid")?;
    let seq_end = if xcdr != Xcdr::V1 { Some(r.dheader("node_entities_info_seq")?) } else { None };
    let pos = r.pos();
    let n = r.u32("node_entities_info_seq")? as usize;
    if n.saturating_mul(MIN_NODE_BYTES) > r.len - r.pos() {
        return Err(malformed(pos, format!("node_entities_info_seq: {n} nodes do not fit in the {} bytes left", r.len - r.pos())));
    }
    if n > limits.max_nodes_per_participant {
        return Err((pos, RosGraphError::OverLimit(format!("{n} nodes, cap {}", limits.max_nodes_per_participant))));
    }
    let mut nodes = Vec::with_capacity(n);
    for _ in 0..n {
        let node_end = if xcdr == Xcdr::V2Delimited { Some(r.dheader("NodeEntitiesInfo")?) } else { None };
        let namespace = r.name("node_namespace")?;
        let name = r.name("node_name")?;
        let readers = r.gids("reader_gid_seq", limits)?;
        let writers = r.gids("writer_gid_seq", limits)?;
        if let Some(end) = node_end {
            r.end_of(end, "NodeEntitiesInfo", false)?;
        }
        nodes.push(NodeEntities { node: RosNode::new(&namespace, &name), readers, writers });
    }
    if let Some(end) = seq_end {
        r.end_of(end, "node_entities_info_seq", true)?;
    }
    if let Some(end) = top_end {
        r.end_of(end, "ParticipantEntitiesInfo", false)?;
    }
    let left = r.len - r.pos();
    if left > 3 {
        return Err(malformed(r.pos(), format!("{left} bytes left after the message")));
    }
    Ok(ParticipantEntities { gid, layout, nodes })
}

/// Decodes a `ros_discovery_info` sample (the serialized payload, from its
/// encapsulation header on). `first` is the Gid layout to try first (the one
/// this writer used before); the other is tried if it fails. The error is
/// an over-the-caps one if either attempt found one, else the one of the
/// attempt that got further into the sample.
pub fn parse_participant_entities(payload: &[u8], limits: &RosGraphLimits, first: GidLayout) -> Result<ParticipantEntities, RosGraphError> {
    let (h, body) = PayloadHeader::parse(payload).map_err(|e| RosGraphError::Malformed(e.to_string()))?;
    let (le, xcdr) = match h.encapsulation {
        Encapsulation::CdrLe => (true, Xcdr::V1),
        Encapsulation::CdrBe => (false, Xcdr::V1),
        Encapsulation::Cdr2Le => (true, Xcdr::V2Plain),
        Encapsulation::Cdr2Be => (false, Xcdr::V2Plain),
        Encapsulation::DCdr2Le => (true, Xcdr::V2Delimited),
        Encapsulation::DCdr2Be => (false, Xcdr::V2Delimited),
        other => return Err(RosGraphError::Malformed(format!("encapsulation 0x{:04x} is not CDR", other.id()))),
    };
    let a = parse_layout(body, le, xcdr, first, limits);
    let (pa, ea) = match a {
        Ok(p) => return Ok(p),
        Err(e) => e,
    };
    match parse_layout(body, le, xcdr, first.other(), limits) {
        Ok(p) => Ok(p),
        // A count over a cap was read where the payload holds that many
        // elements: the stronger evidence of the layout.
        Err((_, eb @ RosGraphError::OverLimit(_))) if !matches!(ea, RosGraphError::OverLimit(_)) => Err(eb),
        Err(_) if matches!(ea, RosGraphError::OverLimit(_)) => Err(ea),
        Err((pb, eb)) => Err(if pb > pa { eb } else { ea }),
    }
}

/// Whether a payload of a writer whose topic is unknown (its SEDP was not
/// captured) starts like a ParticipantEntitiesInfo of participant `src`:
/// CDR, and the participant's own GUID as the first gid. Only then is a full
/// decode tried ([`RosGraph`] counts such finds as `recognised_by_content`).
pub fn looks_like_participant_entities(payload: &[u8], src: &GuidPrefix) -> bool {
    let Ok((h, body)) = PayloadHeader::parse(payload) else { return false };
    let off = match h.encapsulation {
        Encapsulation::CdrLe | Encapsulation::CdrBe | Encapsulation::Cdr2Le | Encapsulation::Cdr2Be => 0,
        Encapsulation::DCdr2Le | Encapsulation::DCdr2Be => 8,
        _ => return false,
    };
    body.len() >= off + 20 && body[off..off + 12] == src.0 && body[off + 12..off + 16] == EntityId::PARTICIPANT.0
}

/// Reader or writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntityRole {
    Reader,
    Writer,
}

/// Who owns a gid.
#[derive(Debug, Clone)]
pub struct GidOwner {
    pub node: Arc<RosNode>,
    pub participant: Guid,
    pub role: EntityRole,
}

/// A participant's nodes as last announced.
#[derive(Debug, Clone, Serialize)]
pub struct ParticipantNodes {
    #[serde(serialize_with = "ser_display")]
    pub participant: Guid,
    pub gid_layout: GidLayout,
    /// Samples of this participant seen (each replaced the previous state).
    pub updates: u64,
    pub nodes: Vec<NodeState>,
    /// Gids the participant listed before and no longer does (destroyed entities): they keep
    /// their names, and go with the participant when it is evicted.
    #[serde(skip)]
    pub retired: Vec<Guid>,
}

/// One node of [`ParticipantNodes`].
#[derive(Debug, Clone, Serialize)]
pub struct NodeState {
    #[serde(flatten)]
    pub node: Arc<RosNode>,
    #[serde(serialize_with = "ser_guids")]
    pub readers: Vec<Guid>,
    #[serde(serialize_with = "ser_guids")]
    pub writers: Vec<Guid>,
}

fn ser_display<T: fmt::Display, S: serde::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}
fn ser_guids<S: serde::Serializer>(v: &[Guid], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|g| g.to_string()))
}

impl ParticipantNodes {
    fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.retired.len() * std::mem::size_of::<Guid>()
            + self
                .nodes
                .iter()
                .map(|n| {
                    std::mem::size_of::<NodeState>()
                        + std::mem::size_of::<RosNode>()
                        + n.node.namespace.len()
                        + n.node.name.len()
                        + n.node.fq_name.len()
                        + (n.readers.capacity() + n.writers.capacity()) * std::mem::size_of::<Guid>()
                })
                .sum::<usize>()
    }
}

/// Counters of the ROS graph: what it holds and what it had to forget.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct RosGraphStats {
    /// ros_discovery_info samples decoded and applied.
    pub samples: u64,
    /// Of those, found by content from a writer whose SEDP was not captured.
    pub recognised_by_content: u64,
    /// Samples with 24-byte (Humble and older) and 16-byte (Iron and newer) gids.
    pub gid24_samples: u64,
    pub gid16_samples: u64,
    pub participants: usize,
    pub nodes: usize,
    /// Reader and writer gids with a known node.
    pub entities: usize,
    /// Participants forgotten (least recently announced first): their traffic is no longer named by node.
    pub participants_evicted: u64,
    /// Gids forgotten (least recently announced first).
    pub entities_evicted: u64,
}

impl RosGraphStats {
    /// What was evicted, if anything (for closing lines).
    pub fn problem_line(&self) -> Option<String> {
        let mut parts = vec![];
        if self.participants_evicted > 0 {
            parts.push(format!("{} ROS participants' node lists", self.participants_evicted));
        }
        if self.entities_evicted > 0 {
            parts.push(format!("{} ROS reader/writer gids (their traffic is no longer named by node)", self.entities_evicted));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// participant → nodes → gids, and gid → node, learned from
/// `ros_discovery_info`; capped (see [`RosGraphLimits`]).
#[derive(Debug)]
pub struct RosGraph {
    limits: RosGraphLimits,
    participants: BoundedMap<Guid, ParticipantNodes>,
    entities: BoundedMap<Guid, GidOwner>,
    nodes: usize,
    samples: u64,
    recognised_by_content: u64,
    gid24: u64,
    gid16: u64,
    /// The layout the last sample used: tried first on the next.
    last_layout: GidLayout,
    /// Bumped on every change (lookups cached by the decoder stay valid while it is unchanged).
    generation: u64,
}

impl Default for RosGraph {
    fn default() -> Self {
        Self::new(RosGraphLimits::default())
    }
}

impl RosGraph {
    pub fn new(limits: RosGraphLimits) -> Self {
        RosGraph {
            limits,
            participants: BoundedMap::new(limits.max_participants).with_max_weight(limits.max_bytes),
            entities: BoundedMap::new(limits.max_entities),
            nodes: 0,
            samples: 0,
            recognised_by_content: 0,
            gid24: 0,
            gid16: 0,
            last_layout: GidLayout::Bytes24,
            generation: 0,
        }
    }

    /// Changes whenever the graph changes.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn limits(&self) -> &RosGraphLimits {
        &self.limits
    }

    /// No node known (lookups can be skipped).
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// The node owning a reader or writer, if announced.
    pub fn node_of(&self, gid: &Guid) -> Option<&Arc<RosNode>> {
        self.entities.get(gid).map(|o| &o.node)
    }

    /// Owner of a gid: node, participant and role.
    pub fn owner(&self, gid: &Guid) -> Option<&GidOwner> {
        self.entities.get(gid)
    }

    /// Every gid with its owner (no particular order).
    pub fn entities(&self) -> impl Iterator<Item = (&Guid, &GidOwner)> {
        self.entities.iter()
    }

    /// Participants sorted by GUID (for stable output).
    pub fn participants_sorted(&self) -> Vec<&ParticipantNodes> {
        let mut v: Vec<_> = self.participants.values().collect();
        v.sort_by_key(|p| p.participant);
        v
    }

    /// Decodes a sample and applies it; the caller counts the error.
    pub fn apply_sample(&mut self, payload: &[u8], by_content: bool) -> Result<(), RosGraphError> {
        let p = parse_participant_entities(payload, &self.limits, self.last_layout)?;
        if by_content {
            self.recognised_by_content += 1;
        }
        self.update(p);
        Ok(())
    }

    /// Replaces a participant's nodes with those of `p`.
    pub fn update(&mut self, p: ParticipantEntities) {
        self.samples += 1;
        self.generation += 1;
        self.last_layout = p.layout;
        match p.layout {
            GidLayout::Bytes24 => self.gid24 += 1,
            GidLayout::Bytes16 => self.gid16 += 1,
        }
        let old = self.participants.remove(&p.gid);
        let updates = old.as_ref().map_or(0, |o| o.updates) + 1;
        // A gid the participant no longer lists was destroyed (a publisher gone, a node shut down:
        // a real rmw announces an empty list as its process ends); it keeps naming that entity,
        // whose samples are still being analysed (GUIDs are never reused), until the entities'
        // cap evicts it. Only evicted participants forget their gids.
        let listed: std::collections::HashSet<Guid> = p.nodes.iter().flat_map(|n| n.readers.iter().chain(&n.writers)).copied().collect();
        let mut retired: Vec<Guid> = vec![];
        let old_nodes: Vec<Arc<RosNode>> = match old {
            Some(o) => {
                self.nodes -= o.nodes.len();
                retired = o.retired;
                retired.extend(o.nodes.iter().flat_map(|n| n.readers.iter().chain(&n.writers)).filter(|g| !listed.contains(g)));
                retired.retain(|g| !listed.contains(g));
                o.nodes.into_iter().map(|n| n.node).collect()
            }
            None => vec![],
        };
        let mut nodes = Vec::with_capacity(p.nodes.len());
        for n in p.nodes {
            // The same node keeps its Arc across updates (cheap comparisons downstream).
            let node = old_nodes.iter().find(|o| ***o == n.node).cloned().unwrap_or_else(|| Arc::new(n.node));
            for (gids, role) in [(&n.readers, EntityRole::Reader), (&n.writers, EntityRole::Writer)] {
                for g in gids {
                    let owner = GidOwner { node: node.clone(), participant: p.gid, role };
                    self.entities.insert(*g, owner, &mut |_, _| {});
                }
            }
            nodes.push(NodeState { node, readers: n.readers, writers: n.writers });
        }
        self.nodes += nodes.len();
        let state = ParticipantNodes { participant: p.gid, gid_layout: p.layout, updates, nodes, retired };
        let bytes = state.bytes();
        let entities = &mut self.entities;
        let node_count = &mut self.nodes;
        let mut gone = |k: Guid, v: ParticipantNodes| {
            *node_count -= v.nodes.len();
            Self::forget_in(entities, &k, &v);
        };
        self.participants.insert(p.gid, state, &mut gone);
        self.participants.set_weight(&p.gid, bytes, &mut gone);
    }

    /// Records one entity's node without a participant's list: rmw_zenoh
    /// announces each publisher and subscription by its own liveliness token
    /// (`participant` is the owner's stand-in, e.g. derived from its Zenoh id).
    /// Capped like the rest (least recently announced forgotten first, counted).
    pub fn add_entity(&mut self, gid: Guid, node: Arc<RosNode>, participant: Guid, role: EntityRole) {
        self.generation += 1;
        self.entities.insert(gid, GidOwner { node, participant, role }, &mut |_, _| {});
    }

    /// Forgets one entity recorded by [`add_entity`](Self::add_entity).
    pub fn remove_entity(&mut self, gid: &Guid) {
        if self.entities.remove(gid).is_some() {
            self.generation += 1;
        }
    }

    /// Removes a participant's gids (those another participant has not claimed since).
    fn forget_in(entities: &mut BoundedMap<Guid, GidOwner>, participant: &Guid, state: &ParticipantNodes) {
        for g in state.nodes.iter().flat_map(|n| n.readers.iter().chain(&n.writers)).chain(&state.retired) {
            if entities.get(g).is_some_and(|o| o.participant == *participant) {
                entities.remove(g);
            }
        }
    }

    pub fn stats(&self) -> RosGraphStats {
        RosGraphStats {
            samples: self.samples,
            recognised_by_content: self.recognised_by_content,
            gid24_samples: self.gid24,
            gid16_samples: self.gid16,
            participants: self.participants.len(),
            nodes: self.nodes,
            entities: self.entities.len(),
            participants_evicted: self.participants.evicted(),
            entities_evicted: self.entities.evicted(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serializes a ParticipantEntitiesInfo by hand (XCDR1), the layout read
    /// off the shared Cyclone capture (frame 58 in `tshark -x`).
    pub(crate) fn xcdr1(le: bool, gid_len: usize, participant: [u8; 16], nodes: &[(&str, &str, Vec<[u8; 16]>, Vec<[u8; 16]>)]) -> Vec<u8> {
        let mut b: Vec<u8> = vec![0, if le { 1 } else { 0 }, 0, 0];
        let u32w = |b: &mut Vec<u8>, v: u32| {
            while (b.len() - 4) % 4 != 0 {
                b.push(0);
            }
            b.extend_from_slice(&if le { v.to_le_bytes() } else { v.to_be_bytes() });
        };
        let gid = |b: &mut Vec<u8>, g: &[u8; 16]| {
            b.extend_from_slice(g);
            b.resize(b.len() + gid_len - 16, 0);
        };
        gid(&mut b, &participant);
        u32w(&mut b, nodes.len() as u32);
        for (ns, name, readers, writers) in nodes {
            for s in [ns, name] {
                u32w(&mut b, s.len() as u32 + 1);
                b.extend_from_slice(s.as_bytes());
                b.push(0);
            }
            for seq in [readers, writers] {
                u32w(&mut b, seq.len() as u32);
                for g in seq {
                    gid(&mut b, g);
                }
            }
        }
        b
    }

    fn guid(prefix: u8, entity: [u8; 4]) -> [u8; 16] {
        let mut g = [prefix; 16];
        g[12..].copy_from_slice(&entity);
        g
    }

    #[test]
    fn both_layouts_both_byte_orders() {
        let p = guid(7, [0, 0, 1, 0xc1]);
        let w = guid(7, [0, 0, 0x15, 0x03]);
        let r = guid(7, [0, 0, 0x08, 0x04]);
        for le in [true, false] {
            for gl in [24, 16] {
                let bytes = xcdr1(le, gl, p, &[("/", "talker", vec![r], vec![w]), ("/ns", "b", vec![], vec![])]);
                for first in [GidLayout::Bytes24, GidLayout::Bytes16] {
                    let got = parse_participant_entities(&bytes, &RosGraphLimits::default(), first).unwrap();
                    assert_eq!(got.layout.len(), gl);
                    assert_eq!(got.gid, Guid::from_slice(&p).unwrap());
                    assert_eq!(got.nodes.len(), 2);
                    assert_eq!(got.nodes[0].node.fq_name, "/talker");
                    assert_eq!(got.nodes[1].node.fq_name, "/ns/b");
                    assert_eq!(got.nodes[0].writers, vec![Guid::from_slice(&w).unwrap()]);
                    assert_eq!(got.nodes[0].readers, vec![Guid::from_slice(&r).unwrap()]);
                }
            }
        }
    }

    #[test]
    fn empty_participant_in_both_layouts() {
        let p = guid(3, [0, 0, 1, 0xc1]);
        for gl in [24, 16] {
            let bytes = xcdr1(true, gl, p, &[]);
            let got = parse_participant_entities(&bytes, &RosGraphLimits::default(), GidLayout::Bytes16).unwrap();
            assert_eq!((got.layout.len(), got.nodes.len()), (gl, 0));
        }
    }

    #[test]
    fn hostile_lengths_are_refused_without_allocating() {
        let p = guid(3, [0, 0, 1, 0xc1]);
        let mut bytes = xcdr1(true, 16, p, &[]);
        bytes.truncate(4 + 16);
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        let e = parse_participant_entities(&bytes, &RosGraphLimits::default(), GidLayout::Bytes16).unwrap_err();
        assert!(matches!(e, RosGraphError::Malformed(ref m) if m.contains("do not fit")), "{e}");
        // A string whose length runs past the end.
        let mut b = xcdr1(true, 16, p, &[("/", "x", vec![], vec![])]);
        b.truncate(4 + 16 + 4 + 4 + 2);
        assert!(parse_participant_entities(&b, &RosGraphLimits::default(), GidLayout::Bytes16).is_err());
        // More nodes than the cap.
        let many: Vec<_> = (0..5).map(|_| ("/", "n", vec![], vec![])).collect();
        let b = xcdr1(true, 16, p, &many);
        let lim = RosGraphLimits { max_nodes_per_participant: 4, ..Default::default() };
        assert!(matches!(parse_participant_entities(&b, &lim, GidLayout::Bytes16), Err(RosGraphError::OverLimit(_))));
        // A name over the type's bound.
        let long = "n".repeat(300);
        let b = xcdr1(true, 16, p, &[("/", &long, vec![], vec![])]);
        assert!(parse_participant_entities(&b, &RosGraphLimits::default(), GidLayout::Bytes16).is_err());
        // Not CDR.
        assert!(parse_participant_entities(&[0, 3, 0, 0, 1, 2], &RosGraphLimits::default(), GidLayout::Bytes16).is_err());
        assert!(parse_participant_entities(&[], &RosGraphLimits::default(), GidLayout::Bytes16).is_err());
    }

    #[test]
    fn later_sample_replaces_and_eviction_is_counted() {
        let mut g = RosGraph::new(RosGraphLimits { max_participants: 2, ..Default::default() });
        let w = |p: u8, e: u8| guid(p, [0, 0, e, 0x03]);
        let part = |p: u8| guid(p, [0, 0, 1, 0xc1]);
        g.apply_sample(&xcdr1(true, 24, part(1), &[("/", "a", vec![], vec![w(1, 1), w(1, 2)])]), false).unwrap();
        let a = g.node_of(&Guid::from_slice(&w(1, 1)).unwrap()).unwrap().clone();
        assert_eq!(a.fq_name, "/a");
        // The node drops writer 2 (destroyed): it still names its past samples; the node keeps its Arc.
        g.apply_sample(&xcdr1(true, 24, part(1), &[("/", "a", vec![], vec![w(1, 1)])]), false).unwrap();
        assert_eq!(g.node_of(&Guid::from_slice(&w(1, 2)).unwrap()).map(|n| n.fq_name.as_str()), Some("/a"));
        assert!(Arc::ptr_eq(&a, g.node_of(&Guid::from_slice(&w(1, 1)).unwrap()).unwrap()));
        // Its process ends: a real rmw announces the participant with no node at all (rmw_cyclonedds
        // 2.2 on a lab run); the gids keep their names for the capture's analysis.
        g.apply_sample(&xcdr1(true, 24, part(1), &[]), false).unwrap();
        assert_eq!(g.node_of(&Guid::from_slice(&w(1, 1)).unwrap()).map(|n| n.fq_name.as_str()), Some("/a"));
        g.apply_sample(&xcdr1(true, 24, part(2), &[("/", "b", vec![], vec![w(2, 1)])]), false).unwrap();
        g.apply_sample(&xcdr1(true, 24, part(3), &[("/", "c", vec![], vec![w(3, 1)])]), false).unwrap();
        let s = g.stats();
        assert_eq!((s.participants, s.participants_evicted, s.nodes, s.entities, s.samples), (2, 1, 2, 2, 5));
        assert!(g.node_of(&Guid::from_slice(&w(1, 1)).unwrap()).is_none(), "evicted participant's gids are gone");
        assert!(s.problem_line().unwrap().contains("1 ROS participants"));
    }

    #[test]
    fn content_check() {
        let p = guid(9, [0, 0, 1, 0xc1]);
        let b = xcdr1(true, 24, p, &[]);
        assert!(looks_like_participant_entities(&b, &GuidPrefix([9; 12])));
        assert!(!looks_like_participant_entities(&b, &GuidPrefix([8; 12])));
        assert!(!looks_like_participant_entities(&b[..10], &GuidPrefix([9; 12])));
    }

    #[test]
    fn fq_names() {
        assert_eq!(RosNode::new("/", "talker").fq_name, "/talker");
        assert_eq!(RosNode::new("/robot1", "lidar").fq_name, "/robot1/lidar");
        assert_eq!(RosNode::new("", "x").fq_name, "/x");
    }
}
