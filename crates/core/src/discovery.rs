//! Discovery state of one capture point: participants (SPDP) and endpoints
//! (SEDP publications and subscriptions), learned from the builtin DATA and
//! DATA_FRAG samples, so that every user submessage can be named by topic and
//! type.

use crate::bounded::BoundedMap;
use crate::names::NameCap;
use crate::ros;
use crate::ros_graph::{RosGraph, RosGraphLimits, RosGraphStats, RosNode};
use ddscope_wire::cdr::CdrReader;
use ddscope_wire::locator::Locator;
use ddscope_wire::plist::{self, ParamIter};
use ddscope_wire::rtps::encapsulation;
use ddscope_wire::{Guid, GuidPrefix, WireError};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::sync::Arc;

/// Topic and type names of an endpoint, as on the wire and as ROS 2 users know them.
///
/// Every value is a name from the wire and is cut at a name cap (see
/// [`crate::names`]): the constructors cut, and outside this crate a
/// `TopicNames` cannot be built any other way (`non_exhaustive`), so a new
/// protocol's decoder cannot keep an uncut name by forgetting to cut it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub struct TopicNames {
    pub topic_raw: String,
    pub type_raw: String,
    /// De-mangled ROS 2 name (`/chatter`, `/add_two_ints [request]`), or the raw name.
    pub topic_name: String,
    /// De-mangled ROS 2 type (`std_msgs/msg/String`), or the raw name.
    pub type_name: String,
    /// DDS domain of the endpoint's participant (see [`domain_of_port`]), when known.
    /// Topics of different domains are different topics: rows are keyed by (domain, topic).
    pub domain: Option<u32>,
}

impl TopicNames {
    /// The names of (topic, type) as on the wire, each cut at the default name cap.
    pub fn new(topic_raw: &str, type_raw: &str) -> Self {
        Self::capped(topic_raw, type_raw, &mut NameCap::default())
    }

    /// The names of (topic, type) as on the wire, each cut by `cap` (counted there).
    pub fn capped(topic_raw: &str, type_raw: &str, cap: &mut NameCap) -> Self {
        let (topic_raw, type_raw) = (cap.cap(topic_raw), cap.cap(type_raw));
        let (topic_name, type_name) = (ros::demangle_topic(&topic_raw).display(), ros::demangle_type(&type_raw));
        Self::from_parts(topic_raw, type_raw, topic_name, type_name, None, cap)
    }

    /// Names whose ROS 2 forms were derived elsewhere (an rmw_zenoh data key
    /// expression, a trace's topic), each cut by `cap`.
    pub fn from_parts(topic_raw: String, type_raw: String, topic_name: String, type_name: String, domain: Option<u32>, cap: &mut NameCap) -> Self {
        let mut n = TopicNames { topic_raw, type_raw, topic_name, type_name, domain };
        for v in [&mut n.topic_raw, &mut n.type_raw, &mut n.topic_name, &mut n.type_name] {
            cap.cap_in_place(v);
        }
        n
    }

    /// The same names in `domain`.
    pub fn in_domain(mut self, domain: Option<u32>) -> Self {
        self.domain = domain;
        self
    }

    /// Bytes these names hold (for the byte budgets of the tables that keep them).
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.topic_raw.capacity()
            + self.type_raw.capacity()
            + self.topic_name.capacity()
            + self.type_name.capacity()
    }
}

/// RTPS default port mapping (DDSI-RTPS 2.5, 9.6.1.1): port = PB + DG·domain + offset,
/// PB = 7400, DG = 250; offset d0 = 0 (SPDP multicast), d1 = 10 (metatraffic unicast,
/// + PG·participant id, PG = 2), d2 = 1 (user multicast), d3 = 11 (user unicast + PG·id).
pub const PORT_BASE: u16 = 7400;
pub const DOMAIN_GAIN: u16 = 250;
/// Highest domain whose ports fit in 16 bits (7400 + 250·232 + 1 < 65536).
pub const MAX_DOMAIN: u32 = 232;
/// Unicast ports at or above this are taken as ephemeral (the Linux and Windows
/// dynamic ranges start at 32768 / 49152): Cyclone DDS, for one, binds its unicast
/// sockets to kernel-chosen ports, which must not be read as a domain.
pub const EPHEMERAL_PORT_START: u16 = 32768;

/// The DDS domain a port belongs to under the default mapping, or None when the
/// port does not fit it: below 7400; an offset of 2..=9 within its domain's block;
/// unicast at or above [`EPHEMERAL_PORT_START`]; unicast offsets 10+ and multicast
/// offsets 0/1 only.
pub fn domain_of_port(port: u16, multicast: bool) -> Option<u32> {
    let rel = port.checked_sub(PORT_BASE)?;
    let (domain, offset) = ((rel / DOMAIN_GAIN) as u32, rel % DOMAIN_GAIN);
    if domain > MAX_DOMAIN {
        return None;
    }
    let ok = if multicast { offset <= 1 } else { port < EPHEMERAL_PORT_START && (offset <= 1 || offset >= 10) };
    ok.then_some(domain)
}

/// The domain a datagram's destination belongs to ([`domain_of_port`] of its port).
pub fn domain_of_destination(dst: &std::net::SocketAddr) -> Option<u32> {
    domain_of_port(dst.port(), dst.ip().is_multicast())
}

/// Where a participant's domain came from (`domain_from` in JSON); strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DomainSource {
    /// PID_DOMAIN_ID in the SPDP data.
    PidDomainId,
    /// The port of an announced multicast locator.
    MulticastLocator,
    /// The multicast destination port of the SPDP datagram.
    SpdpDestination,
    /// The port of an announced unicast locator (below the ephemeral range).
    UnicastLocator,
    /// The unicast destination port of the SPDP datagram.
    UnicastDestination,
}

/// A participant's domain: PID_DOMAIN_ID when announced; else the ports of its
/// multicast locators; else the SPDP datagram's multicast destination port; else
/// its unicast locators' ports; else the datagram's unicast destination port
/// (each through [`domain_of_port`]).
pub fn infer_domain(p: &ParticipantInfo, spdp_dst: Option<&std::net::SocketAddr>) -> Option<(u32, DomainSource)> {
    if let Some(d) = p.domain_id {
        return Some((d, DomainSource::PidDomainId));
    }
    let udp_port = |l: &Locator| {
        let udp = l.kind == ddscope_wire::locator::LOCATOR_KIND_UDPV4 || l.kind == ddscope_wire::locator::LOCATOR_KIND_UDPV6;
        u16::try_from(l.port).ok().filter(|_| udp)
    };
    let port_of = |ls: &[Locator], mc: bool| ls.iter().find_map(|l| udp_port(l).and_then(|port| domain_of_port(port, mc)));
    if let Some(d) = port_of(&p.metatraffic_multicast, true).or_else(|| port_of(&p.default_multicast, true)) {
        return Some((d, DomainSource::MulticastLocator));
    }
    if let Some(d) = spdp_dst.filter(|a| a.ip().is_multicast()).and_then(domain_of_destination) {
        return Some((d, DomainSource::SpdpDestination));
    }
    if let Some(d) = port_of(&p.metatraffic_unicast, false).or_else(|| port_of(&p.default_unicast, false)) {
        return Some((d, DomainSource::UnicastLocator));
    }
    spdp_dst.and_then(domain_of_destination).map(|d| (d, DomainSource::UnicastDestination))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndpointKind {
    Writer,
    Reader,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reliability {
    BestEffort,
    Reliable,
    Other(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    Volatile,
    TransientLocal,
    Transient,
    Persistent,
    Other(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum History {
    KeepLast(i32),
    KeepAll,
    Other(u32),
}

/// A QoS duration (deadline, lifespan, liveliness lease): finite or infinite (the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QosDuration {
    Infinite,
    Ns(i64),
}

impl QosDuration {
    /// From nanoseconds, i64::MAX (what [`read_duration_ns`] gives DURATION_INFINITE) being infinite.
    pub fn from_ns(ns: i64) -> Self {
        if ns == i64::MAX {
            QosDuration::Infinite
        } else {
            QosDuration::Ns(ns)
        }
    }
}

/// The liveliness policy: kind and lease duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Liveliness {
    pub kind: LivelinessKind,
    pub lease: QosDuration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LivelinessKind {
    Automatic,
    ManualByParticipant,
    ManualByTopic,
    Other(u32),
}

/// The defaults of DDS (and of rmw_zenoh): infinite deadline and lifespan, automatic liveliness with an infinite lease.
pub const LIVELINESS_DEFAULT: Liveliness = Liveliness { kind: LivelinessKind::Automatic, lease: QosDuration::Infinite };

impl std::fmt::Display for QosDuration {
    /// `infinite`, or seconds (`0.1s`, `2s`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QosDuration::Infinite => f.write_str("infinite"),
            QosDuration::Ns(ns) => write!(f, "{}s", *ns as f64 / 1e9),
        }
    }
}
impl std::fmt::Display for Liveliness {
    /// `automatic` (infinite lease), `manual_by_topic(1.5s)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            LivelinessKind::Automatic => f.write_str("automatic")?,
            LivelinessKind::ManualByParticipant => f.write_str("manual_by_participant")?,
            LivelinessKind::ManualByTopic => f.write_str("manual_by_topic")?,
            LivelinessKind::Other(v) => write!(f, "unknown({v})")?,
        }
        match self.lease {
            QosDuration::Infinite => Ok(()),
            l => write!(f, "({l})"),
        }
    }
}
impl std::fmt::Display for Reliability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reliability::BestEffort => f.write_str("best_effort"),
            Reliability::Reliable => f.write_str("reliable"),
            Reliability::Other(v) => write!(f, "unknown({v})"),
        }
    }
}
impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Durability::Volatile => f.write_str("volatile"),
            Durability::TransientLocal => f.write_str("transient_local"),
            Durability::Transient => f.write_str("transient"),
            Durability::Persistent => f.write_str("persistent"),
            Durability::Other(v) => write!(f, "unknown({v})"),
        }
    }
}
impl std::fmt::Display for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            History::KeepLast(d) => write!(f, "keep_last({d})"),
            History::KeepAll => f.write_str("keep_all"),
            History::Other(v) => write!(f, "unknown({v})"),
        }
    }
}

/// A participant as announced by SPDP.
#[derive(Debug, Clone, Serialize)]
pub struct ParticipantInfo {
    #[serde(serialize_with = "ser_display")]
    pub guid_prefix: GuidPrefix,
    pub vendor_id: Option<u16>,
    pub protocol_version: Option<(u8, u8)>,
    /// PID_DOMAIN_ID as announced (absent from many vendors' SPDP data).
    pub domain_id: Option<u32>,
    /// The participant's effective domain ([`infer_domain`]).
    pub domain: Option<u32>,
    pub domain_from: Option<DomainSource>,
    pub lease_duration_ns: Option<i64>,
    pub entity_name: Option<String>,
    #[serde(serialize_with = "ser_locators")]
    pub default_unicast: Vec<Locator>,
    #[serde(serialize_with = "ser_locators")]
    pub default_multicast: Vec<Locator>,
    #[serde(serialize_with = "ser_locators")]
    pub metatraffic_unicast: Vec<Locator>,
    #[serde(serialize_with = "ser_locators")]
    pub metatraffic_multicast: Vec<Locator>,
    pub builtin_endpoints: Option<u32>,
    pub disposed: bool,
}

/// A writer or reader as announced by SEDP.
#[derive(Debug, Clone, Serialize)]
pub struct EndpointInfo {
    #[serde(serialize_with = "ser_display")]
    pub guid: Guid,
    pub kind: EndpointKind,
    #[serde(flatten)]
    pub names: Arc<TopicNames>,
    /// Effective reliability: the announced value, or the DDS default for the
    /// endpoint kind (writers reliable, readers best effort) when absent.
    pub reliability: Reliability,
    pub reliability_announced: bool,
    /// Effective durability (default volatile).
    pub durability: Durability,
    /// History is not part of the standard SEDP data; some vendors send it.
    pub history: Option<History>,
    /// Effective deadline, lifespan and liveliness (default infinite, infinite, automatic with an infinite lease).
    pub deadline: QosDuration,
    pub lifespan: QosDuration,
    pub liveliness: Liveliness,
    pub partitions: Vec<String>,
    #[serde(serialize_with = "ser_locators")]
    pub unicast: Vec<Locator>,
    #[serde(serialize_with = "ser_locators")]
    pub multicast: Vec<Locator>,
    pub vendor_id: Option<u16>,
    pub disposed: bool,
}

fn ser_display<T: std::fmt::Display, S: serde::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}
fn ser_locators<S: serde::Serializer>(v: &[Locator], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|l| l.to_string()))
}

/// What a discovery sample turned out to be.
#[derive(Debug, Clone)]
pub enum Announcement {
    Participant(GuidPrefix),
    Endpoint(Arc<EndpointInfo>),
    /// Dispose/unregister of a participant or endpoint (by key hash).
    Disposed(Guid),
}

/// Opens a PL_CDR payload: returns the byte order and the parameter bytes.
fn parameter_list(payload: &[u8]) -> Result<(bool, &[u8]), WireError> {
    let (enc, body) = encapsulation(payload)?;
    match enc.is_parameter_list() {
        Some(le) => Ok((le, body)),
        None => Err(WireError::malformed("discovery payload", "not a PL_CDR encapsulation")),
    }
}

fn read_duration_ns(v: &[u8], le: bool, what: &'static str) -> Result<i64, WireError> {
    let mut r = CdrReader::new(v, le);
    let sec = r.i32(what)? as i64;
    let frac = r.u32(what)? as i64;
    if sec == 0x7fff_ffff {
        return Ok(i64::MAX); // infinite
    }
    Ok(sec * 1_000_000_000 + ((frac * 1_000_000_000) >> 32))
}

/// A CDR string, capped at the name cap (longer values cut with a marker and counted).
fn read_string(v: &[u8], le: bool, what: &'static str, names: &mut NameCap) -> Result<String, WireError> {
    CdrReader::new(v, le).string_bytes(what).map(|b| names.name(b))
}

/// Parses SPDP participant data. `fallback_prefix` names the participant when
/// PID_PARTICIPANT_GUID is absent. Strings are capped by `names`.
pub fn parse_participant(payload: &[u8], fallback_prefix: GuidPrefix, names: &mut NameCap) -> Result<ParticipantInfo, WireError> {
    let (le, body) = parameter_list(payload)?;
    let mut p = ParticipantInfo {
        guid_prefix: fallback_prefix,
        vendor_id: None,
        protocol_version: None,
        domain_id: None,
        domain: None,
        domain_from: None,
        lease_duration_ns: None,
        entity_name: None,
        default_unicast: vec![],
        default_multicast: vec![],
        metatraffic_unicast: vec![],
        metatraffic_multicast: vec![],
        builtin_endpoints: None,
        disposed: false,
    };
    for param in ParamIter::new(body, le) {
        let param = param?;
        if param.vendor_specific {
            continue;
        }
        let v = param.value;
        let loc = || Locator::read(&mut CdrReader::new(v, le));
        match param.pid {
            plist::PID_PARTICIPANT_GUID => {
                if let Some(g) = Guid::from_slice(v) {
                    p.guid_prefix = g.prefix;
                }
            }
            plist::PID_VENDOR_ID if v.len() >= 2 => p.vendor_id = Some(u16::from_be_bytes([v[0], v[1]])),
            plist::PID_PROTOCOL_VERSION if v.len() >= 2 => p.protocol_version = Some((v[0], v[1])),
            plist::PID_DOMAIN_ID => p.domain_id = Some(CdrReader::new(v, le).u32("PID_DOMAIN_ID")?),
            plist::PID_PARTICIPANT_LEASE_DURATION => {
                p.lease_duration_ns = Some(read_duration_ns(v, le, "PID_PARTICIPANT_LEASE_DURATION")?)
            }
            plist::PID_ENTITY_NAME => p.entity_name = Some(read_string(v, le, "PID_ENTITY_NAME", names)?),
            plist::PID_DEFAULT_UNICAST_LOCATOR => p.default_unicast.push(loc()?),
            plist::PID_DEFAULT_MULTICAST_LOCATOR => p.default_multicast.push(loc()?),
            plist::PID_METATRAFFIC_UNICAST_LOCATOR => p.metatraffic_unicast.push(loc()?),
            plist::PID_METATRAFFIC_MULTICAST_LOCATOR => p.metatraffic_multicast.push(loc()?),
            plist::PID_BUILTIN_ENDPOINT_SET => p.builtin_endpoints = Some(CdrReader::new(v, le).u32("PID_BUILTIN_ENDPOINT_SET")?),
            _ => {}
        }
    }
    Ok(p)
}

/// Parses SEDP publication or subscription data. Strings (topic and type
/// names, partitions) are capped by `names`.
pub fn parse_endpoint(payload: &[u8], kind: EndpointKind, key_hash: Option<Guid>, names: &mut NameCap) -> Result<EndpointInfo, WireError> {
    let (le, body) = parameter_list(payload)?;
    let mut guid = key_hash;
    let mut topic = None;
    let mut type_name = None;
    let mut reliability = None;
    let mut durability = None;
    let mut history = None;
    let mut deadline = QosDuration::Infinite;
    let mut lifespan = QosDuration::Infinite;
    let mut liveliness = LIVELINESS_DEFAULT;
    let mut partitions = vec![];
    let mut unicast = vec![];
    let mut multicast = vec![];
    let mut vendor_id = None;
    for param in ParamIter::new(body, le) {
        let param = param?;
        if param.vendor_specific {
            continue;
        }
        let v = param.value;
        match param.pid {
            plist::PID_ENDPOINT_GUID => guid = Guid::from_slice(v).or(guid),
            plist::PID_KEY_HASH if guid.is_none() => guid = Guid::from_slice(v),
            plist::PID_TOPIC_NAME => topic = Some(read_string(v, le, "PID_TOPIC_NAME", names)?),
            plist::PID_TYPE_NAME => type_name = Some(read_string(v, le, "PID_TYPE_NAME", names)?),
            plist::PID_RELIABILITY => {
                let k = CdrReader::new(v, le).u32("PID_RELIABILITY")?;
                reliability = Some(match k {
                    1 => Reliability::BestEffort,
                    2 => Reliability::Reliable,
                    other => Reliability::Other(other),
                });
            }
            plist::PID_DURABILITY => {
                let k = CdrReader::new(v, le).u32("PID_DURABILITY")?;
                durability = Some(match k {
                    0 => Durability::Volatile,
                    1 => Durability::TransientLocal,
                    2 => Durability::Transient,
                    3 => Durability::Persistent,
                    other => Durability::Other(other),
                });
            }
            plist::PID_HISTORY => {
                let mut r = CdrReader::new(v, le);
                let k = r.u32("PID_HISTORY")?;
                let depth = r.i32("PID_HISTORY")?;
                history = Some(match k {
                    0 => History::KeepLast(depth),
                    1 => History::KeepAll,
                    other => History::Other(other),
                });
            }
            plist::PID_DEADLINE => deadline = QosDuration::from_ns(read_duration_ns(v, le, "PID_DEADLINE")?),
            plist::PID_LIFESPAN => lifespan = QosDuration::from_ns(read_duration_ns(v, le, "PID_LIFESPAN")?),
            plist::PID_LIVELINESS => {
                let k = CdrReader::new(v, le).u32("PID_LIVELINESS")?;
                let lease = match v.get(4..) {
                    Some(d) if d.len() >= 8 => QosDuration::from_ns(read_duration_ns(d, le, "PID_LIVELINESS")?),
                    _ => QosDuration::Infinite,
                };
                let kind = match k {
                    0 => LivelinessKind::Automatic,
                    1 => LivelinessKind::ManualByParticipant,
                    2 => LivelinessKind::ManualByTopic,
                    other => LivelinessKind::Other(other),
                };
                liveliness = Liveliness { kind, lease };
            }
            plist::PID_PARTITION => {
                let mut r = CdrReader::new(v, le);
                let n = r.u32("PID_PARTITION")?;
                if n > 1024 {
                    return Err(WireError::malformed("PID_PARTITION", "more than 1024 names"));
                }
                for _ in 0..n {
                    partitions.push(names.name(r.string_bytes("PID_PARTITION")?));
                }
            }
            plist::PID_UNICAST_LOCATOR => unicast.push(Locator::read(&mut CdrReader::new(v, le))?),
            plist::PID_MULTICAST_LOCATOR => multicast.push(Locator::read(&mut CdrReader::new(v, le))?),
            plist::PID_VENDOR_ID if v.len() >= 2 => vendor_id = Some(u16::from_be_bytes([v[0], v[1]])),
            _ => {}
        }
    }
    let guid = guid.ok_or(WireError::malformed("SEDP data", "no PID_ENDPOINT_GUID or key hash"))?;
    let topic = topic.ok_or(WireError::malformed("SEDP data", "no PID_TOPIC_NAME"))?;
    let type_name = type_name.ok_or(WireError::malformed("SEDP data", "no PID_TYPE_NAME"))?;
    let default_rel = match kind {
        EndpointKind::Writer => Reliability::Reliable,
        EndpointKind::Reader => Reliability::BestEffort,
    };
    Ok(EndpointInfo {
        guid,
        kind,
        names: Arc::new(TopicNames::capped(&topic, &type_name, names)),
        reliability: reliability.unwrap_or(default_rel),
        reliability_announced: reliability.is_some(),
        durability: durability.unwrap_or(Durability::Volatile),
        history,
        deadline,
        lifespan,
        liveliness,
        partitions,
        unicast,
        multicast,
        vendor_id,
        disposed: false,
    })
}

/// Reads PID_STATUS_INFO and PID_KEY_HASH from inline QoS.
pub fn inline_status(inline_qos: &[u8], le: bool) -> (Option<u32>, Option<[u8; 16]>) {
    let mut status = None;
    let mut key = None;
    for p in ParamIter::new(inline_qos, le).flatten() {
        match p.pid {
            // Status info is 4 bytes in network order regardless of the submessage's byte order.
            plist::PID_STATUS_INFO if p.value.len() >= 4 => {
                status = Some(u32::from_be_bytes([p.value[0], p.value[1], p.value[2], p.value[3]]))
            }
            plist::PID_KEY_HASH if p.value.len() >= 16 => key = p.value[..16].try_into().ok(),
            _ => {}
        }
    }
    (status, key)
}

/// Caps of the discovery tables (see [`Discovery`]).
#[derive(Debug, Clone, Copy)]
pub struct DiscoveryLimits {
    /// Participants remembered (SPDP); the least recently announced is forgotten first. ~400 bytes each.
    pub max_participants: usize,
    /// Bytes the participants may hold together (names, locator lists); over
    /// it the least recently announced are forgotten first.
    pub max_participant_bytes: usize,
    /// Endpoints remembered (SEDP writers and readers); the least recently
    /// announced or used is forgotten first. ~500 bytes each.
    pub max_endpoints: usize,
    /// Bytes the endpoints may hold together (topic and type names,
    /// partitions, locator lists, the per-topic index); over it the least
    /// recently announced or used are forgotten first.
    pub max_endpoint_bytes: usize,
    /// Longest string kept from SPDP/SEDP data (topic and type names,
    /// partitions, entity names); longer values are cut with a marker
    /// (`…[truncated, N bytes]`) and counted.
    pub max_name_bytes: usize,
}

impl Default for DiscoveryLimits {
    fn default() -> Self {
        DiscoveryLimits {
            max_participants: 1 << 14,
            max_participant_bytes: 16 << 20,
            max_endpoints: 100_000,
            max_endpoint_bytes: 64 << 20,
            max_name_bytes: crate::names::DEFAULT_MAX_NAME_BYTES,
        }
    }
}

/// What discovery had to forget to stay within its caps.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct DiscoveryStats {
    pub participants: usize,
    pub endpoints: usize,
    /// Participants forgotten (least recently announced first).
    pub participants_evicted: u64,
    /// Endpoints forgotten (least recently announced or used first): their
    /// traffic is no longer named by topic.
    pub endpoints_evicted: u64,
    /// Bytes the participant and endpoint tables hold now.
    pub participant_bytes: usize,
    pub endpoint_bytes: usize,
    /// Strings from SPDP/SEDP longer than `max_name_bytes`, kept cut with a marker.
    pub names_truncated: u64,
    /// The ROS graph from `ros_discovery_info` (node names).
    pub ros: RosGraphStats,
}

impl DiscoveryStats {
    /// What was evicted or cut, if anything (for closing lines).
    pub fn problem_line(&self) -> Option<String> {
        let parts: Vec<String> = [self.eviction_line(), self.truncation_line()].into_iter().flatten().collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// Names cut at the name cap, if any.
    pub fn truncation_line(&self) -> Option<String> {
        (self.names_truncated > 0).then(|| {
            format!("{} discovery names cut at discovery.max_name_bytes (marked …[truncated, N bytes])", self.names_truncated)
        })
    }

    /// What was evicted, if anything.
    pub fn eviction_line(&self) -> Option<String> {
        let mut parts = vec![];
        if self.participants_evicted > 0 {
            parts.push(format!("{} discovery participants (count or byte cap)", self.participants_evicted));
        }
        if self.endpoints_evicted > 0 {
            parts.push(format!(
                "{} discovery endpoints (count or byte cap; their traffic is no longer named by topic)",
                self.endpoints_evicted
            ));
        }
        if let Some(l) = self.ros.problem_line() {
            parts.push(l);
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// One line: evictions, or that there were none.
    pub fn summary_line(&self) -> String {
        self.problem_line().map_or_else(|| "nothing evicted".to_string(), |l| format!("evicted: {l}"))
    }
}

/// Participants and endpoints seen so far, capped (least recently seen
/// evicted first), with an index of how many writers and readers each topic
/// has so that per-topic rows cost one lookup, not a scan of every endpoint;
/// and the ROS graph (`ros_discovery_info`: which node owns which endpoint).
#[derive(Debug)]
pub struct Discovery {
    pub participants: BoundedMap<GuidPrefix, ParticipantInfo>,
    pub endpoints: BoundedMap<Guid, Arc<EndpointInfo>>,
    /// (Domain, raw topic name) → (writers, readers) among `endpoints`.
    topic_counts: FxHashMap<(Option<u32>, String), (u32, u32)>,
    /// Endpoints recorded before their participant's domain was known.
    endpoints_without_domain: u64,
    /// The cap of strings read from SPDP/SEDP data, and how many were cut.
    pub names: NameCap,
    /// ROS 2 nodes and the readers/writers they own.
    pub ros: RosGraph,
}

/// An endpoint with the ROS node that owns it (JSON output of `topics`).
#[derive(Debug, Clone, Serialize)]
pub struct EndpointWithNode {
    #[serde(flatten)]
    pub endpoint: Arc<EndpointInfo>,
    /// `{namespace, name, fq_name}`, or null when no `ros_discovery_info` named it.
    pub node: Option<Arc<RosNode>>,
}

/// A topic's writer–reader pairs that never cross a network interface ([`Discovery::local_pairs`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LocalPairs {
    /// Pairs of two participants on one host (shared memory or loopback).
    pub pairs: u64,
    /// Of those, pairs whose participants both announce a shared-memory locator.
    pub shared_memory: u64,
    /// Pairs within one participant.
    pub same_participant: u64,
    /// Hosts with pairs through shared memory, and the lowest one's unicast IPv4 address.
    pub shared_memory_hosts: u32,
    pub shared_memory_host: Option<std::net::Ipv4Addr>,
    /// Hosts with pairs over their loopback, and the lowest one's address.
    pub loopback_hosts: u32,
    pub loopback_host: Option<std::net::Ipv4Addr>,
}

/// A participant's host: the first unicast IPv4 address it announces (metatraffic first),
/// loopback and the unspecified address left out.
fn participant_host(p: &ParticipantInfo) -> Option<[u8; 4]> {
    p.metatraffic_unicast.iter().chain(&p.default_unicast).find_map(|l| {
        let a: [u8; 4] = l.address[12..16].try_into().ok()?;
        (l.kind == ddscope_wire::locator::LOCATOR_KIND_UDPV4 && a[0] != 127 && a != [0; 4]).then_some(a)
    })
}

impl Default for Discovery {
    fn default() -> Self {
        Self::new(DiscoveryLimits::default())
    }
}

/// Bytes a participant holds (its weight in the participant table's budget).
fn participant_bytes(p: &ParticipantInfo) -> usize {
    let locators = p.default_unicast.capacity() + p.default_multicast.capacity() + p.metatraffic_unicast.capacity() + p.metatraffic_multicast.capacity();
    std::mem::size_of::<ParticipantInfo>() + 64 + p.entity_name.as_ref().map_or(0, String::capacity) + locators * std::mem::size_of::<Locator>()
}

/// Bytes an endpoint holds (its weight in the endpoint table's budget): its
/// names (counted per endpoint even where shared, so the budget is an upper
/// bound), partitions, locators, and its share of the per-topic index.
fn endpoint_bytes(e: &EndpointInfo) -> usize {
    let partitions: usize = e.partitions.iter().map(|p| p.capacity() + std::mem::size_of::<String>()).sum();
    let locators = (e.unicast.capacity() + e.multicast.capacity()) * std::mem::size_of::<Locator>();
    let index = std::mem::size_of::<(Option<u32>, String, (u32, u32))>() + e.names.topic_raw.len() + 16;
    std::mem::size_of::<EndpointInfo>() + 64 + e.names.heap_bytes() + partitions + locators + index
}

fn count_change(counts: &mut FxHashMap<(Option<u32>, String), (u32, u32)>, e: &EndpointInfo, add: bool) {
    let key = (e.names.domain, e.names.topic_raw.clone());
    if add {
        let c = counts.entry(key).or_default();
        match e.kind {
            EndpointKind::Writer => c.0 += 1,
            EndpointKind::Reader => c.1 += 1,
        }
    } else if let Some(c) = counts.get_mut(&key) {
        match e.kind {
            EndpointKind::Writer => c.0 = c.0.saturating_sub(1),
            EndpointKind::Reader => c.1 = c.1.saturating_sub(1),
        }
        if *c == (0, 0) {
            counts.remove(&key);
        }
    }
}

impl Discovery {
    pub fn new(limits: DiscoveryLimits) -> Self {
        Discovery {
            participants: BoundedMap::new(limits.max_participants).with_max_weight(limits.max_participant_bytes),
            endpoints: BoundedMap::new(limits.max_endpoints).with_max_weight(limits.max_endpoint_bytes),
            topic_counts: FxHashMap::default(),
            endpoints_without_domain: 0,
            names: NameCap::new(limits.max_name_bytes),
            ros: RosGraph::default(),
        }
    }

    /// With the ROS graph capped by `ros` instead of its defaults.
    pub fn with_ros_limits(mut self, ros: RosGraphLimits) -> Self {
        self.ros = RosGraph::new(ros);
        self
    }

    /// The ROS node owning a reader or writer, if `ros_discovery_info` named it.
    pub fn node_of(&self, guid: &Guid) -> Option<&Arc<RosNode>> {
        self.ros.node_of(guid)
    }

    pub fn endpoint(&self, guid: &Guid) -> Option<&Arc<EndpointInfo>> {
        self.endpoints.get(guid)
    }

    /// Like [`endpoint`](Self::endpoint), and marks the endpoint as in use
    /// (traffic of a known endpoint keeps it from being evicted first).
    pub fn endpoint_in_use(&mut self, guid: &Guid) -> Option<&Arc<EndpointInfo>> {
        self.endpoints.get_touch(guid).map(|e| &*e)
    }

    pub fn vendor_of(&self, prefix: &GuidPrefix) -> Option<u16> {
        self.participants.get(prefix).and_then(|p| p.vendor_id)
    }

    /// The domain of a participant, when known.
    pub fn domain_of(&self, prefix: &GuidPrefix) -> Option<u32> {
        self.participants.get(prefix).and_then(|p| p.domain)
    }

    /// Records a participant whose SPDP data arrived without a datagram (tests, agents).
    pub fn add_participant(&mut self, p: ParticipantInfo) -> GuidPrefix {
        self.add_participant_at(p, None)
    }

    /// Records a participant; `spdp_dst` is the destination of the datagram that
    /// carried its SPDP data, evidence of its domain when the data names none
    /// ([`infer_domain`]). Endpoints recorded before the domain was known get it.
    pub fn add_participant_at(&mut self, mut p: ParticipantInfo, spdp_dst: Option<&std::net::SocketAddr>) -> GuidPrefix {
        let prefix = p.guid_prefix;
        let old = self.participants.get(&prefix).and_then(|o| o.domain.map(|d| (d, o.domain_from)));
        match infer_domain(&p, spdp_dst) {
            // A weaker source (a unicast port) does not override a stronger one seen before.
            Some((d, src)) if old.is_none_or(|(_, os)| os.is_none_or(|os| src <= os)) => {
                p.domain = Some(d);
                p.domain_from = Some(src);
            }
            _ => {
                p.domain = old.map(|o| o.0);
                p.domain_from = old.and_then(|o| o.1);
            }
        }
        let domain = p.domain;
        let bytes = participant_bytes(&p);
        self.participants.insert(prefix, p, &mut |_, _| {});
        self.participants.set_weight(&prefix, bytes, &mut |_, _| {});
        if let Some(d) = domain {
            if old.map(|o| o.0) != domain && self.endpoints_without_domain > 0 {
                self.assign_domain(prefix, d);
            }
        }
        prefix
    }

    /// Gives `domain` to the endpoints of `prefix` recorded without one.
    fn assign_domain(&mut self, prefix: GuidPrefix, domain: u32) {
        let pending: Vec<Guid> = self
            .endpoints
            .iter()
            .filter(|(g, e)| g.prefix == prefix && e.names.domain.is_none())
            .map(|(g, _)| *g)
            .collect();
        for g in pending {
            let Some(e) = self.endpoints.get(&g).cloned() else { continue };
            count_change(&mut self.topic_counts, &e, false);
            let mut e = (*e).clone();
            e.names = Arc::new((*e.names).clone().in_domain(Some(domain)));
            count_change(&mut self.topic_counts, &e, true);
            let bytes = endpoint_bytes(&e);
            if let Some(slot) = self.endpoints.get_mut(&g) {
                *slot = Arc::new(e);
            }
            let counts = &mut self.topic_counts;
            self.endpoints.set_weight(&g, bytes, &mut |_, gone| count_change(counts, &gone, false));
            self.endpoints_without_domain = self.endpoints_without_domain.saturating_sub(1);
        }
    }

    /// Records an endpoint; returns the shared record (reused when unchanged,
    /// so that per-event references stay cheap). Its domain is its participant's.
    pub fn add_endpoint(&mut self, e: EndpointInfo) -> Arc<EndpointInfo> {
        self.add_endpoint_at(e, None)
    }

    /// [`add_endpoint`](Self::add_endpoint); when the participant's domain is not
    /// known (yet), the domain of `sedp_dst` (the SEDP datagram's destination port).
    pub fn add_endpoint_at(&mut self, mut e: EndpointInfo, sedp_dst: Option<&std::net::SocketAddr>) -> Arc<EndpointInfo> {
        // An rmw_zenoh endpoint comes with the domain of its token (no participant, no SEDP datagram).
        let domain = self.domain_of(&e.guid.prefix).or_else(|| sedp_dst.and_then(domain_of_destination)).or(e.names.domain);
        if domain != e.names.domain {
            e.names = Arc::new((*e.names).clone().in_domain(domain));
        }
        if domain.is_none() {
            self.endpoints_without_domain += 1;
        }
        if let Some(old) = self.endpoints.get(&e.guid) {
            if *old.names == *e.names {
                e.names = old.names.clone();
            }
            let old = old.clone();
            count_change(&mut self.topic_counts, &old, false);
        }
        let e = Arc::new(e);
        let bytes = endpoint_bytes(&e);
        let counts = &mut self.topic_counts;
        self.endpoints.insert(e.guid, e.clone(), &mut |_, gone| count_change(counts, &gone, false));
        count_change(&mut self.topic_counts, &e, true);
        let counts = &mut self.topic_counts;
        self.endpoints.set_weight(&e.guid, bytes, &mut |_, gone| count_change(counts, &gone, false));
        e
    }

    /// Forgets an endpoint, as if it had never been announced (rmw_zenoh_cpp of
    /// 2024: a publisher recorded under its token's hash, then found under the
    /// random gid its samples carry, is moved there and counted once).
    pub fn remove_endpoint(&mut self, guid: &Guid) -> Option<Arc<EndpointInfo>> {
        let e = self.endpoints.remove(guid)?;
        count_change(&mut self.topic_counts, &e, false);
        if e.names.domain.is_none() {
            self.endpoints_without_domain = self.endpoints_without_domain.saturating_sub(1);
        }
        Some(e)
    }

    pub fn dispose(&mut self, guid: Guid) {
        if let Some(e) = self.endpoints.get_mut(&guid) {
            Arc::make_mut(e).disposed = true;
        }
        if guid.entity == ddscope_wire::EntityId::PARTICIPANT {
            if let Some(p) = self.participants.get_mut(&guid.prefix) {
                p.disposed = true;
            }
        }
    }

    /// Writers announced for a topic (by domain and raw name), disposed ones included.
    pub fn writers_of(&self, domain: Option<u32>, topic_raw: &str) -> u64 {
        self.topic_counts.get(&(domain, topic_raw.to_string())).map_or(0, |c| c.0 as u64)
    }

    /// Readers announced for a topic (by domain and raw name), disposed ones included.
    pub fn readers_of(&self, domain: Option<u32>, topic_raw: &str) -> u64 {
        self.topic_counts.get(&(domain, topic_raw.to_string())).map_or(0, |c| c.1 as u64)
    }

    pub fn stats(&self) -> DiscoveryStats {
        DiscoveryStats {
            participants: self.participants.len(),
            endpoints: self.endpoints.len(),
            participants_evicted: self.participants.evicted(),
            endpoints_evicted: self.endpoints.evicted(),
            participant_bytes: self.participants.weight(),
            endpoint_bytes: self.endpoints.weight(),
            names_truncated: self.names.truncated,
            ros: self.ros.stats(),
        }
    }

    /// Endpoints sorted by topic then GUID (for stable output).
    pub fn endpoints_sorted(&self) -> Vec<Arc<EndpointInfo>> {
        let mut v: Vec<_> = self.endpoints.values().cloned().collect();
        v.sort_by(|a, b| (a.names.domain, &a.names.topic_raw, a.guid).cmp(&(b.names.domain, &b.names.topic_raw, b.guid)));
        v
    }

    /// Per topic (domain, raw name): its writer–reader pairs whose participants are on one host
    /// (they announce the same unicast IPv4 address), where samples never cross a network
    /// interface: through shared memory where both participants announce a shared-memory locator
    /// (Fast DDS's SHM transport, kind 16: it is used between participants of one host that both
    /// have it), else over the host's loopback; and pairs within one participant (delivered
    /// inside the process). One pass over the endpoints: pairs are counted per host, never listed.
    pub fn local_pairs(&self) -> FxHashMap<(Option<u32>, String), LocalPairs> {
        // (topic, host, participant) -> [writers, readers, whether it announces SHM]
        let mut parts: FxHashMap<(Option<u32>, &str, [u8; 4], GuidPrefix), [u64; 3]> = FxHashMap::default();
        for e in self.endpoints.values() {
            let Some(p) = self.participants.get(&e.guid.prefix) else { continue };
            let Some(host) = participant_host(p) else { continue };
            let shm = p.default_unicast.iter().chain(&p.metatraffic_unicast).any(|l| l.kind == ddscope_wire::locator::LOCATOR_KIND_SHM);
            let q = parts.entry((e.names.domain, e.names.topic_raw.as_str(), host, e.guid.prefix)).or_default();
            q[usize::from(e.kind == EndpointKind::Reader)] += 1;
            q[2] = u64::from(shm);
        }
        // (topic, host) -> [writers, readers, writers with SHM, readers with SHM, pairs in one participant, of them with SHM]
        let mut hosts: FxHashMap<(Option<u32>, &str, [u8; 4]), [u64; 6]> = FxHashMap::default();
        for ((domain, topic, host, _), [w, r, shm]) in parts {
            let h = hosts.entry((domain, topic, host)).or_default();
            h[0] += w;
            h[1] += r;
            h[2] += w * shm;
            h[3] += r * shm;
            h[4] += w * r;
            h[5] += w * r * shm;
        }
        let mut out: FxHashMap<(Option<u32>, String), LocalPairs> = FxHashMap::default();
        for ((domain, topic, host), [w, r, ws, rs, same, same_shm]) in hosts {
            let (pairs, shm) = (w * r - same, ws * rs - same_shm);
            if pairs + same == 0 {
                continue;
            }
            let l = out.entry((domain, topic.to_string())).or_default();
            let ip = std::net::Ipv4Addr::from(host);
            l.pairs += pairs;
            l.shared_memory += shm;
            l.same_participant += same;
            let lowest = |h: Option<std::net::Ipv4Addr>| Some(h.map_or(ip, |h| h.min(ip)));
            if shm > 0 {
                l.shared_memory_hosts += 1;
                l.shared_memory_host = lowest(l.shared_memory_host);
            }
            if pairs > shm {
                l.loopback_hosts += 1;
                l.loopback_host = lowest(l.loopback_host);
            }
        }
        out
    }

    /// [`endpoints_sorted`](Self::endpoints_sorted), each with its ROS node.
    pub fn endpoints_with_nodes(&self) -> Vec<EndpointWithNode> {
        self.endpoints_sorted()
            .into_iter()
            .map(|e| {
                let node = self.ros.node_of(&e.guid).cloned();
                EndpointWithNode { endpoint: e, node }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(out: &mut Vec<u8>, pid: u16, value: &[u8]) {
        out.extend_from_slice(&pid.to_le_bytes());
        let padded = value.len().div_ceil(4) * 4;
        out.extend_from_slice(&(padded as u16).to_le_bytes());
        out.extend_from_slice(value);
        out.resize(out.len() + padded - value.len(), 0);
    }

    fn cdr_string(s: &str) -> Vec<u8> {
        let mut v = ((s.len() + 1) as u32).to_le_bytes().to_vec();
        v.extend_from_slice(s.as_bytes());
        v.push(0);
        v
    }

    #[test]
    fn sedp_publication_le() {
        let mut pl = vec![0, 3, 0, 0];
        let guid: Vec<u8> = (1..=12).chain([0, 0, 0x12, 0x03]).collect();
        param(&mut pl, plist::PID_ENDPOINT_GUID, &guid);
        param(&mut pl, plist::PID_TOPIC_NAME, &cdr_string("rt/chatter"));
        param(&mut pl, plist::PID_TYPE_NAME, &cdr_string("std_msgs::msg::dds_::String_"));
        param(&mut pl, plist::PID_DURABILITY, &1u32.to_le_bytes());
        let mut hist = 0u32.to_le_bytes().to_vec();
        hist.extend_from_slice(&7i32.to_le_bytes());
        param(&mut pl, plist::PID_HISTORY, &hist);
        let mut part = 2u32.to_le_bytes().to_vec();
        part.extend(cdr_string("a"));
        part.extend([0, 0]);
        part.extend(cdr_string("bc"));
        param(&mut pl, plist::PID_PARTITION, &part);
        param(&mut pl, plist::PID_SENTINEL, &[]);
        let e = parse_endpoint(&pl, EndpointKind::Writer, None, &mut NameCap::default()).unwrap();
        assert_eq!(e.guid.to_string(), "0102030405060708090a0b0c00001203");
        assert_eq!(e.names.topic_name, "/chatter");
        assert_eq!(e.names.type_name, "std_msgs/msg/String");
        assert_eq!(e.reliability, Reliability::Reliable);
        assert!(!e.reliability_announced);
        assert_eq!(e.durability, Durability::TransientLocal);
        assert_eq!(e.history, Some(History::KeepLast(7)));
        assert_eq!(e.partitions, vec!["a".to_string(), "bc".to_string()]);
    }

    #[test]
    fn spdp_big_endian() {
        let mut pl = vec![0, 2, 0, 0];
        let mut push = |pid: u16, v: &[u8]| {
            pl.extend_from_slice(&pid.to_be_bytes());
            pl.extend_from_slice(&(v.len() as u16).to_be_bytes());
            pl.extend_from_slice(v);
        };
        let g: Vec<u8> = (20..32).chain([0, 0, 1, 0xc1]).collect();
        push(plist::PID_PARTICIPANT_GUID, &g);
        push(plist::PID_VENDOR_ID, &[1, 0x0f, 0, 0]);
        let mut lease = 20i32.to_be_bytes().to_vec();
        lease.extend_from_slice(&0x8000_0000u32.to_be_bytes());
        push(plist::PID_PARTICIPANT_LEASE_DURATION, &lease);
        let mut loc = 1i32.to_be_bytes().to_vec();
        loc.extend_from_slice(&7410u32.to_be_bytes());
        loc.extend_from_slice(&[0; 12]);
        loc.extend_from_slice(&[10, 0, 0, 1]);
        push(plist::PID_DEFAULT_UNICAST_LOCATOR, &loc);
        push(plist::PID_SENTINEL, &[]);
        let p = parse_participant(&pl, GuidPrefix::UNKNOWN, &mut NameCap::default()).unwrap();
        assert_eq!(p.guid_prefix.0[0], 20);
        assert_eq!(p.vendor_id, Some(0x010f));
        assert_eq!(p.lease_duration_ns, Some(20_500_000_000));
        assert_eq!(p.default_unicast[0].to_string(), "udpv4:10.0.0.1:7410");
    }

    /// Oracle: the RTPS default port mapping (DDSI-RTPS 2.5, 9.6.1.1) worked by hand.
    #[test]
    fn domains_from_ports() {
        assert_eq!(domain_of_port(7400, true), Some(0)); // d0, SPDP multicast
        assert_eq!(domain_of_port(7401, true), Some(0)); // d2, user multicast
        assert_eq!(domain_of_port(7410, false), Some(0)); // d1, participant 0
        assert_eq!(domain_of_port(7413, false), Some(0)); // d3, participant 1
        assert_eq!(domain_of_port(8650, true), Some(5)); // 7400 + 250 * 5
        assert_eq!(domain_of_port(8662, false), Some(5)); // + 10 + 2 * 1
        assert_eq!(domain_of_port(7400 + 250 * 232 + 1, true), Some(232));
        assert_eq!(domain_of_port(7405, false), None); // offsets 2..9 are not used
        assert_eq!(domain_of_port(7410, true), None); // multicast is d0/d2 only
        assert_eq!(domain_of_port(7399, false), None);
        assert_eq!(domain_of_port(58584, false), None); // ephemeral (Cyclone's unicast)
        assert_eq!(domain_of_port(58500, true), None); // domain 204, offset 100: not a multicast port
        assert_eq!(domain_of_port(7400 + 250 * 204, true), Some(204));
        assert_eq!(domain_of_port(65535, true), None);
    }

    /// A participant seen before its SPDP data names a domain: endpoints get it afterwards,
    /// and topic counts follow (oracle: the port mapping, by hand).
    #[test]
    fn endpoints_take_their_participants_domain() {
        let mut d = Discovery::default();
        let prefix = GuidPrefix([7; 12]);
        let e = |n: u8| EndpointInfo {
            guid: Guid::new(prefix, ddscope_wire::EntityId([0, 0, n, 0x03])),
            kind: EndpointKind::Writer,
            names: Arc::new(TopicNames::new("rt/chatter", "T")),
            reliability: Reliability::Reliable,
            reliability_announced: true,
            durability: Durability::Volatile,
            history: None,
            deadline: QosDuration::Infinite,
            lifespan: QosDuration::Infinite,
            liveliness: LIVELINESS_DEFAULT,
            partitions: vec![],
            unicast: vec![],
            multicast: vec![],
            vendor_id: None,
            disposed: false,
        };
        // SEDP to an ephemeral port: no domain yet
        let eph: std::net::SocketAddr = "10.0.0.2:50000".parse().unwrap();
        d.add_endpoint_at(e(1), Some(&eph));
        assert_eq!(d.writers_of(None, "rt/chatter"), 1);
        // SPDP to 239.255.0.1:8650 (domain 5)
        let mut p = parse_participant(&[0, 3, 0, 0, 1, 0, 0, 0], prefix, &mut NameCap::default()).unwrap();
        p.guid_prefix = prefix;
        let spdp: std::net::SocketAddr = "239.255.0.1:8650".parse().unwrap();
        d.add_participant_at(p, Some(&spdp));
        assert_eq!(d.domain_of(&prefix), Some(5));
        assert_eq!(d.participants.get(&prefix).unwrap().domain_from, Some(DomainSource::SpdpDestination));
        assert_eq!(d.writers_of(None, "rt/chatter"), 0);
        assert_eq!(d.writers_of(Some(5), "rt/chatter"), 1);
        // later endpoints get the participant's domain whatever their datagram's port
        let other: std::net::SocketAddr = "10.0.0.2:7410".parse().unwrap();
        assert_eq!(d.add_endpoint_at(e(2), Some(&other)).names.domain, Some(5));
        assert_eq!(d.writers_of(Some(5), "rt/chatter"), 2);
    }

    #[test]
    fn missing_topic_is_an_error() {
        let mut pl = vec![0, 3, 0, 0];
        param(&mut pl, plist::PID_SENTINEL, &[]);
        assert!(parse_endpoint(&pl, EndpointKind::Reader, None, &mut NameCap::default()).is_err());
        assert!(parse_endpoint(&[0, 1, 0, 0], EndpointKind::Reader, None, &mut NameCap::default()).is_err());
    }

    // ---- deadline, lifespan, liveliness (PID_DEADLINE 0x0023, PID_LIFESPAN 0x002b, PID_LIVELINESS 0x001b)
    //
    // Oracle: the OMG DDSI-RTPS 2.x wire format worked by hand. Duration_t is `long seconds` and
    // `unsigned long fraction` (units of 1/2^32 s), DURATION_INFINITE is {0x7fffffff, 0xffffffff};
    // LivelinessQosPolicy is `unsigned long kind` (0 automatic, 1 manual by participant, 2 manual by
    // topic) then the lease Duration_t; each parameter is pid u16 + length u16 + value, in the byte
    // order of the encapsulation (PL_CDR_LE 0x0003, PL_CDR_BE 0x0002).

    /// An SEDP publication (PL_CDR_LE or _BE) with a GUID, topic and type, then `extra` parameters
    /// (values written as given, padded to 4), then the sentinel.
    fn sedp(le: bool, extra: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut pl = vec![0, if le { 3 } else { 2 }, 0, 0];
        let mut push = |pid: u16, v: &[u8]| {
            let padded = v.len().div_ceil(4) * 4;
            if le {
                pl.extend_from_slice(&pid.to_le_bytes());
                pl.extend_from_slice(&(padded as u16).to_le_bytes());
            } else {
                pl.extend_from_slice(&pid.to_be_bytes());
                pl.extend_from_slice(&(padded as u16).to_be_bytes());
            }
            pl.extend_from_slice(v);
            pl.resize(pl.len() + padded - v.len(), 0);
        };
        let u32b = |x: u32| if le { x.to_le_bytes() } else { x.to_be_bytes() };
        let string = |s: &str| {
            let mut v = u32b(s.len() as u32 + 1).to_vec();
            v.extend_from_slice(s.as_bytes());
            v.push(0);
            v
        };
        let guid: Vec<u8> = (1..=12).chain([0, 0, 0x12, 0x03]).collect();
        push(plist::PID_ENDPOINT_GUID, &guid);
        push(plist::PID_TOPIC_NAME, &string("rt/chatter"));
        push(plist::PID_TYPE_NAME, &string("std_msgs::msg::dds_::String_"));
        for (pid, v) in extra {
            push(*pid, v);
        }
        push(plist::PID_SENTINEL, &[]);
        pl
    }

    /// A Duration_t {seconds, fraction} in the given byte order.
    fn duration(le: bool, sec: i32, frac: u32) -> Vec<u8> {
        let mut v = if le { sec.to_le_bytes() } else { sec.to_be_bytes() }.to_vec();
        v.extend_from_slice(&if le { frac.to_le_bytes() } else { frac.to_be_bytes() });
        v
    }

    /// A LivelinessQosPolicy {kind, lease} in the given byte order.
    fn liveliness(le: bool, kind: u32, sec: i32, frac: u32) -> Vec<u8> {
        let mut v = if le { kind.to_le_bytes() } else { kind.to_be_bytes() }.to_vec();
        v.extend(duration(le, sec, frac));
        v
    }

    fn endpoint(pl: &[u8]) -> Result<EndpointInfo, WireError> {
        parse_endpoint(pl, EndpointKind::Writer, None, &mut NameCap::default())
    }

    #[test]
    fn deadline_lifespan_liveliness_both_byte_orders() {
        for le in [true, false] {
            let pl = sedp(le, &[
                // 0.1 s: fraction round(0.1 * 2^32) = 429496730, i.e. 100_000_000.09 ns, floored
                (plist::PID_DEADLINE, duration(le, 0, 429_496_730)),
                // 2.5 s: fraction 2^31
                (plist::PID_LIFESPAN, duration(le, 2, 0x8000_0000)),
                // manual by topic, lease 1.25 s: fraction 2^30
                (plist::PID_LIVELINESS, liveliness(le, 2, 1, 0x4000_0000)),
            ]);
            let e = endpoint(&pl).unwrap();
            assert_eq!(e.names.topic_name, "/chatter", "le={le}");
            assert_eq!(e.deadline, QosDuration::Ns(100_000_000), "le={le}");
            assert_eq!(e.lifespan, QosDuration::Ns(2_500_000_000), "le={le}");
            assert_eq!(e.liveliness, Liveliness { kind: LivelinessKind::ManualByTopic, lease: QosDuration::Ns(1_250_000_000) });
            assert_eq!((e.deadline.to_string(), e.lifespan.to_string()), ("0.1s".into(), "2.5s".into()));
            assert_eq!(e.liveliness.to_string(), "manual_by_topic(1.25s)");
        }
    }

    #[test]
    fn infinite_durations_and_defaults() {
        for le in [true, false] {
            let inf = duration(le, 0x7fff_ffff, 0xffff_ffff);
            let pl = sedp(le, &[
                (plist::PID_DEADLINE, inf.clone()),
                (plist::PID_LIFESPAN, inf),
                (plist::PID_LIVELINESS, liveliness(le, 1, 0x7fff_ffff, 0xffff_ffff)),
            ]);
            let e = endpoint(&pl).unwrap();
            assert_eq!((e.deadline, e.lifespan), (QosDuration::Infinite, QosDuration::Infinite), "le={le}");
            assert_eq!(e.liveliness, Liveliness { kind: LivelinessKind::ManualByParticipant, lease: QosDuration::Infinite });
            assert_eq!(e.liveliness.to_string(), "manual_by_participant");
            // absent: infinite, infinite, automatic with an infinite lease
            let e = endpoint(&sedp(le, &[])).unwrap();
            assert_eq!((e.deadline, e.lifespan, e.liveliness), (QosDuration::Infinite, QosDuration::Infinite, LIVELINESS_DEFAULT));
            assert_eq!((e.deadline.to_string(), e.liveliness.to_string()), ("infinite".into(), "automatic".into()));
        }
    }

    /// Fast DDS and Cyclone DDS announce the defaults explicitly: AUTOMATIC with an INFINITE lease in
    /// a 12-byte PID_LIVELINESS, INFINITE deadline and lifespan (`tshark -V` on
    /// ../shared/captures/fastdds-vlan-pcp-ipfrag.pcapng frame 58 and cyclone-interop.pcapng frame 88:
    /// `Kind: AUTOMATIC_LIVELINESS_QOS (0x00000000)`, `lease_duration: INFINITE`, `seconds: 2147483647`,
    /// `fraction: 4294967295`). And rclcpp's /rosout writer has a 10 s lifespan: tshark decodes
    /// ../shared/captures/cyclone-talker-listener-loopback.pcapng frame 10 (rt/rosout, PL_CDR_LE) as
    /// `PID_LIFESPAN (0x002b)`, `parameterLength: 8`, `seconds: 10`, `fraction: 0`, and `ddscope topics`
    /// on that capture says `lifespan 10s` for /rosout. These are those parameters' bytes.
    #[test]
    fn the_parameters_of_real_captures() {
        let pl = sedp(true, &[
            (plist::PID_LIVELINESS, vec![0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff]),
            (plist::PID_DEADLINE, vec![0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff]),
            (plist::PID_LIFESPAN, vec![10, 0, 0, 0, 0, 0, 0, 0]),
        ]);
        let e = endpoint(&pl).unwrap();
        assert_eq!((e.deadline, e.lifespan, e.liveliness), (QosDuration::Infinite, QosDuration::Ns(10_000_000_000), LIVELINESS_DEFAULT));
        assert_eq!(e.lifespan.to_string(), "10s");
    }

    #[test]
    fn liveliness_without_a_lease_or_of_an_unknown_kind() {
        for le in [true, false] {
            let k = |kind: u32| if le { kind.to_le_bytes() } else { kind.to_be_bytes() }.to_vec();
            // the kind alone: the lease is taken as infinite (the code's convention, not an error)
            let e = endpoint(&sedp(le, &[(plist::PID_LIVELINESS, k(2))])).unwrap();
            assert_eq!(e.liveliness, Liveliness { kind: LivelinessKind::ManualByTopic, lease: QosDuration::Infinite });
            // the kind and half a lease (value of 8 bytes): the same
            let mut half = k(0);
            half.extend(if le { 5i32.to_le_bytes() } else { 5i32.to_be_bytes() });
            let e = endpoint(&sedp(le, &[(plist::PID_LIVELINESS, half)])).unwrap();
            assert_eq!(e.liveliness, LIVELINESS_DEFAULT);
            // a kind DDS does not define is kept as a number
            let e = endpoint(&sedp(le, &[(plist::PID_LIVELINESS, liveliness(le, 7, 3, 0))])).unwrap();
            assert_eq!(e.liveliness, Liveliness { kind: LivelinessKind::Other(7), lease: QosDuration::Ns(3_000_000_000) });
            assert_eq!(e.liveliness.to_string(), "unknown(7)(3s)");
        }
    }

    /// A deadline or lifespan shorter than a Duration_t, or a liveliness without its kind, makes the
    /// sample malformed: parse_endpoint returns the error (the decoder counts it in
    /// bad_discovery_samples and keeps the endpoints it had), never panics.
    #[test]
    fn short_parameters_are_errors() {
        for le in [true, false] {
            for (pid, what) in [(plist::PID_DEADLINE, "PID_DEADLINE"), (plist::PID_LIFESPAN, "PID_LIFESPAN")] {
                for v in [vec![], vec![1, 0, 0, 0]] {
                    let err = endpoint(&sedp(le, &[(pid, v.clone())])).unwrap_err();
                    assert!(matches!(err, WireError::Truncated { what: w, .. } if w == what), "le={le} {what} {v:?}: {err:?}");
                }
            }
            let err = endpoint(&sedp(le, &[(plist::PID_LIVELINESS, vec![])])).unwrap_err();
            assert!(matches!(err, WireError::Truncated { what: "PID_LIVELINESS", .. }), "{err:?}");
        }
        // a parameter whose length runs past the end of the payload
        let mut pl = sedp(true, &[]);
        pl.truncate(pl.len() - 4); // drop the sentinel
        pl.extend_from_slice(&plist::PID_DEADLINE.to_le_bytes());
        pl.extend_from_slice(&8u16.to_le_bytes());
        pl.extend_from_slice(&[0, 0, 0, 0]);
        assert!(matches!(endpoint(&pl), Err(WireError::Truncated { what: "parameter value", .. })));
    }
}
