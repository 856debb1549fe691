//! rmw_zenoh's conventions on top of Zenoh (ros2/rmw_zenoh `docs/design.md`
//! and `rmw_zenoh_cpp/src/detail/{liveliness_utils,attachment_helpers,qos}.cpp`,
//! Jazzy 0.2.x, Kilted 0.6.x, Rolling; Humble 0.1.x is the same):
//!
//! - a topic's data key expression `<domain>/<fully qualified name without the
//!   leading slash>/<DDS type name>/<type hash>`, e.g.
//!   `0/chatter/std_msgs::msg::dds_::String_/RIHS01_df66…`;
//! - the attachment of every published sample: sequence number, source
//!   timestamp and the publisher's 16-byte gid. Since rmw_zenoh #601
//!   (Jazzy 0.2.x, Kilted, Rolling; backported to Humble 0.1.2) it is
//!   positional, as zenoh's ext serializer writes `(i64, i64, [u8; 16])`:
//!   8 bytes little-endian, 8 bytes little-endian, a length byte (16), 16
//!   bytes; before it, the same values keyed by the strings
//!   `"sequence_number"`, `"source_timestamp"`, `"source_gid"`; and before
//!   that, with zenoh-c 0.11 (protocol 0x08, rmw_zenoh_cpp of 2024:
//!   `create_map_and_set_sequence_num` in `rmw_zenoh.cpp`), a `z_bytes_map`:
//!   key/value pairs each a length-prefixed slice, in the map's (hash) order,
//!   the two numbers as decimal text (`"%" PRId64`) and the gid as 16 bytes;
//! - liveliness tokens `@ros2_lv/<domain>/<zid>/<nid>/<eid>/<kind>/<enclave>/
//!   <namespace>/<node>[/<topic>/<type>/<hash>/<qos>]`, names with `/`
//!   written as `%`; kinds NN (node), MP (publisher), MS (subscription), SS
//!   (service server), SC (service client);
//! - an entity's gid: XXH3-128 of its liveliness key expression, the low
//!   64 bits then the high 64 bits, little-endian (`Entity::Entity`).

/// rmw_zenoh's liveliness admin space.
pub const ADMIN_SPACE: &str = "@ros2_lv";

/// A topic's names read from a data key expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataKey<'a> {
    pub domain: u32,
    /// The fully qualified name with its leading slash, `/robot1/chatter`.
    pub topic: String,
    /// As on the wire, `std_msgs::msg::dds_::String_`.
    pub type_raw: &'a str,
    pub type_hash: &'a str,
}

/// Reads `<domain>/<name…>/<type>/<hash>`; `None` for other key expressions.
pub fn parse_data_key(key: &str) -> Option<DataKey<'_>> {
    let (domain, rest) = key.split_once('/')?;
    if domain.is_empty() || domain.len() > 9 || !domain.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (rest, hash) = rest.rsplit_once('/')?;
    let (name, type_raw) = rest.rsplit_once('/')?;
    if name.is_empty() || hash.is_empty() || !type_raw.contains("::") || name.starts_with('@') {
        return None;
    }
    Some(DataKey { domain: domain.parse().ok()?, topic: format!("/{name}"), type_raw, type_hash: hash })
}

/// The data key expression rmw_zenoh builds for a topic (`TopicInfo::TopicInfo`).
pub fn data_key(domain: u32, topic: &str, type_raw: &str, type_hash: &str) -> String {
    format!("{domain}/{}/{type_raw}/{type_hash}", topic.trim_matches('/'))
}

/// Which of rmw_zenoh's attachment layouts a sample carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachmentLayout {
    /// rmw_zenoh ≥ #601: `(i64, i64, [u8; 16])` as zenoh's ext serializer writes it.
    Positional,
    /// Before #601: the keys, each number as 8 bytes little-endian.
    Keyed,
    /// zenoh-c 0.11's bytes map (rmw_zenoh_cpp of 2024, protocol 0x08):
    /// (key, value) slices in any order, the numbers as decimal text.
    DecimalMap,
}

/// What a sample's attachment says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attachment {
    pub sequence_number: i64,
    pub source_timestamp: i64,
    pub gid: [u8; 16],
    /// A keyed layout (rmw_zenoh before #601: [`AttachmentLayout::Keyed`] or [`AttachmentLayout::DecimalMap`]).
    pub keyed: bool,
    pub layout: AttachmentLayout,
}

/// Reads any of the attachment layouts; `None` if it is none of them.
pub fn parse_attachment(b: &[u8]) -> Option<Attachment> {
    if b.len() == 33 && b[16] == 16 {
        let sn = i64::from_le_bytes(b[0..8].try_into().ok()?);
        let ts = i64::from_le_bytes(b[8..16].try_into().ok()?);
        let gid: [u8; 16] = b[17..33].try_into().ok()?;
        return Some(Attachment { sequence_number: sn, source_timestamp: ts, gid, keyed: false, layout: AttachmentLayout::Positional });
    }
    parse_attachment_keyed(b).or_else(|| parse_attachment_map(b))
}

fn parse_attachment_keyed(b: &[u8]) -> Option<Attachment> {
    let mut r = crate::codec::Reader::new(b);
    let key = |r: &mut crate::codec::Reader<'_>, want: &[u8]| -> Option<()> { (r.zslice("key").ok()? == want).then_some(()) };
    key(&mut r, b"sequence_number")?;
    let sn = i64::from_le_bytes(r.bytes(8, "sn").ok()?.try_into().ok()?);
    key(&mut r, b"source_timestamp")?;
    let ts = i64::from_le_bytes(r.bytes(8, "ts").ok()?.try_into().ok()?);
    key(&mut r, b"source_gid")?;
    let gid: [u8; 16] = r.zslice("gid").ok()?.try_into().ok()?;
    r.is_empty().then_some(Attachment { sequence_number: sn, source_timestamp: ts, gid, keyed: true, layout: AttachmentLayout::Keyed })
}

/// A decimal number as rmw_zenoh's `get_int64_from_attachment` accepts it:
/// 1 to 19 bytes, `strtol` base 10 with nothing after the digits (an
/// optional sign; leading white space as `strtol` skips it).
fn decimal_i64(v: &[u8]) -> Option<i64> {
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    let s = std::str::from_utf8(v).ok()?.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.strip_prefix('+').unwrap_or(s).parse().ok()
}

/// zenoh-c 0.11's bytes map as rmw_zenoh_cpp of 2024 fills it: pairs of
/// length-prefixed slices to the end, in any order; the first pair of each
/// key counts (as `z_attachment_get` finds it), other keys are skipped.
fn parse_attachment_map(b: &[u8]) -> Option<Attachment> {
    let mut r = crate::codec::Reader::new(b);
    let (mut sn, mut ts, mut gid) = (None, None, None);
    while !r.is_empty() {
        let k = r.zslice("attachment key").ok()?;
        let v = r.zslice("attachment value").ok()?;
        match k {
            b"sequence_number" if sn.is_none() => sn = Some(decimal_i64(v)?),
            b"source_timestamp" if ts.is_none() => ts = Some(decimal_i64(v)?),
            b"source_gid" if gid.is_none() => gid = Some(<[u8; 16]>::try_from(v).ok()?),
            _ => {}
        }
    }
    Some(Attachment { sequence_number: sn?, source_timestamp: ts?, gid: gid?, keyed: true, layout: AttachmentLayout::DecimalMap })
}

/// The bytes map attachment of zenoh-c 0.11, as rmw_zenoh_cpp of 2024 writes
/// it, with its pairs in `order` (0 sequence number, 1 source timestamp, 2 gid).
pub fn attachment_map(sn: i64, source_timestamp: i64, gid: &[u8; 16], order: [usize; 3]) -> Vec<u8> {
    let (sn, ts) = (sn.to_string(), source_timestamp.to_string());
    let pairs: [(&[u8], &[u8]); 3] = [(b"sequence_number", sn.as_bytes()), (b"source_timestamp", ts.as_bytes()), (b"source_gid", gid)];
    let mut a = vec![];
    for i in order {
        let (k, v) = pairs[i % 3];
        crate::emit::zslice(&mut a, k);
        crate::emit::zslice(&mut a, v);
    }
    a
}

/// The positional attachment (rmw_zenoh ≥ #601).
pub fn attachment(sn: i64, source_timestamp: i64, gid: &[u8; 16]) -> [u8; 33] {
    let mut a = [0u8; 33];
    a[0..8].copy_from_slice(&sn.to_le_bytes());
    a[8..16].copy_from_slice(&source_timestamp.to_le_bytes());
    a[16] = 16;
    a[17..].copy_from_slice(gid);
    a
}

/// The keyed attachment (rmw_zenoh before #601).
pub fn attachment_keyed(sn: i64, source_timestamp: i64, gid: &[u8; 16]) -> Vec<u8> {
    let mut a = vec![];
    for (k, v) in [(&b"sequence_number"[..], sn.to_le_bytes()), (&b"source_timestamp"[..], source_timestamp.to_le_bytes())] {
        crate::emit::zslice(&mut a, k);
        a.extend_from_slice(&v);
    }
    crate::emit::zslice(&mut a, b"source_gid");
    crate::emit::zslice(&mut a, gid);
    a
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntityKind {
    Node,
    Publisher,
    Subscription,
    ServiceServer,
    ServiceClient,
}

impl EntityKind {
    pub fn code(self) -> &'static str {
        match self {
            EntityKind::Node => "NN",
            EntityKind::Publisher => "MP",
            EntityKind::Subscription => "MS",
            EntityKind::ServiceServer => "SS",
            EntityKind::ServiceClient => "SC",
        }
    }
}

/// An rmw_time_t: seconds and nanoseconds, as rmw_zenoh writes them (unsigned decimals).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmwTime {
    pub sec: u64,
    pub nsec: u64,
}

/// `RMW_DURATION_INFINITE` (rmw/time.h): `{9223372036, 854775807}`, i.e. i64::MAX ns.
pub const DURATION_INFINITE: RmwTime = RmwTime { sec: 9_223_372_036, nsec: 854_775_807 };

impl RmwTime {
    pub fn is_infinite(&self) -> bool {
        *self == DURATION_INFINITE
    }

    /// In nanoseconds, `None` for `RMW_DURATION_INFINITE` (and anything longer than i64 ns).
    pub fn ns(&self) -> Option<i64> {
        if self.is_infinite() {
            return None;
        }
        let ns = (self.sec as i128) * 1_000_000_000 + self.nsec as i128;
        i64::try_from(ns).ok()
    }
}

/// QoS as rmw_zenoh writes it in a publisher's or subscription's liveliness
/// token (ros2/rmw_zenoh `rmw_zenoh_cpp/src/detail/liveliness_utils.cpp`,
/// `qos_to_keyexpr` and `keyexpr_to_qos`, Jazzy/Kilted/Rolling):
///
/// `<reliability>:<durability>:<history>,<depth>:<deadline s>,<deadline ns>:<lifespan s>,<lifespan ns>:<liveliness>,<lease s>,<lease ns>`
///
/// each field empty when it equals rmw_zenoh's default (`qos.cpp`,
/// `QoS::QoS`: reliable, volatile, keep last 42, deadline and lifespan
/// infinite, liveliness automatic with an infinite lease). Policies are rmw's
/// enum numbers (rmw/types.h): reliability 1 reliable, 2 best effort;
/// durability 1 transient local, 2 volatile; history 1 keep last, 2 keep
/// all; liveliness 1 automatic, 3 manual by topic (0 is system default and
/// the unknown values are accepted as `keyexpr_to_qos` accepts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Qos {
    /// rmw_qos_reliability_policy_e: 0 system default, 1 reliable, 2 best effort, 3 unknown.
    pub reliability: u32,
    /// rmw_qos_durability_policy_e: 0 system default, 1 transient local, 2 volatile, 3 unknown.
    pub durability: u32,
    /// rmw_qos_history_policy_e: 0 system default, 1 keep last, 2 keep all, 3 unknown.
    pub history: u32,
    pub depth: u64,
    pub deadline: RmwTime,
    pub lifespan: RmwTime,
    /// rmw_qos_liveliness_policy_e: 0 system default, 1 automatic, 3 manual by topic, 4 unknown, 5 best available.
    pub liveliness: u32,
    pub liveliness_lease: RmwTime,
}

/// rmw_zenoh's defaults (`qos.cpp`, `QoS::QoS`).
pub const DEFAULT_QOS: Qos = Qos {
    reliability: 1,
    durability: 2,
    history: 1,
    depth: 42,
    deadline: DURATION_INFINITE,
    lifespan: DURATION_INFINITE,
    liveliness: 1,
    liveliness_lease: DURATION_INFINITE,
};

/// Why a token's QoS field is not rmw_zenoh's format (names the part).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QosError(pub String);

impl std::fmt::Display for QosError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Qos {
    /// Reads the QoS field as `keyexpr_to_qos` does: at least 6 `:`-parts,
    /// history and deadline and lifespan of at least 2 `,`-parts, liveliness of
    /// at least 3; an empty value is the default; the policies must be one of
    /// the values rmw_zenoh's tables (`str_to_qos_*`) hold; numbers are
    /// unsigned decimals (`strtoul` with nothing after the digits).
    pub fn parse(s: &str) -> Result<Qos, QosError> {
        let err = |m: String| Err(QosError(m));
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() < 6 {
            return err(format!("{} ':'-separated parts, rmw_zenoh writes 6", parts.len()));
        }
        let sub = |i: usize, name: &str, n: usize| -> Result<Vec<&str>, QosError> {
            let v: Vec<&str> = parts[i].split(',').collect();
            if v.len() < n {
                return Err(QosError(format!("{name} {:?}: {} ','-separated values, rmw_zenoh writes {n}", parts[i], v.len())));
            }
            Ok(v)
        };
        let hist = sub(2, "history", 2)?;
        let deadline = sub(3, "deadline", 2)?;
        let lifespan = sub(4, "lifespan", 2)?;
        let live = sub(5, "liveliness", 3)?;
        let d = DEFAULT_QOS;
        let policy = |v: &str, name: &str, allowed: &[u32], default: u32| -> Result<u32, QosError> {
            if v.is_empty() {
                return Ok(default);
            }
            match v.parse::<u32>() {
                Ok(n) if allowed.contains(&n) && v.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
                _ => Err(QosError(format!("{name} {v:?} is not one of rmw's values {allowed:?}"))),
            }
        };
        let num = |v: &str, name: &str, default: u64| -> Result<u64, QosError> {
            if v.is_empty() {
                return Ok(default);
            }
            if !v.bytes().all(|b| b.is_ascii_digit()) {
                return Err(QosError(format!("{name} {v:?} is not an unsigned decimal")));
            }
            v.parse::<u64>().map_err(|_| QosError(format!("{name} {v:?} overflows")))
        };
        let time = |v: &[&str], name: &str, default: RmwTime| -> Result<RmwTime, QosError> {
            Ok(RmwTime { sec: num(v[0], &format!("{name} seconds"), default.sec)?, nsec: num(v[1], &format!("{name} nanoseconds"), default.nsec)? })
        };
        Ok(Qos {
            reliability: policy(parts[0], "reliability", &[0, 1, 2, 3], d.reliability)?,
            durability: policy(parts[1], "durability", &[0, 1, 2, 3], d.durability)?,
            history: policy(hist[0], "history", &[0, 1, 2, 3], d.history)?,
            depth: num(hist[1], "depth", d.depth)?,
            deadline: time(&deadline, "deadline", d.deadline)?,
            lifespan: time(&lifespan, "lifespan", d.lifespan)?,
            liveliness: policy(live[0], "liveliness", &[0, 1, 3, 4, 5], d.liveliness)?,
            liveliness_lease: time(&live[1..], "liveliness lease", d.liveliness_lease)?,
        })
    }

    /// The token form, as `qos_to_keyexpr` writes it (defaults left empty).
    pub fn to_key(&self) -> String {
        let d = DEFAULT_QOS;
        let f = |v: u64, dv: u64| if v == dv { String::new() } else { v.to_string() };
        let t = |v: RmwTime, dv: RmwTime| format!("{},{}", f(v.sec, dv.sec), f(v.nsec, dv.nsec));
        format!(
            "{}:{}:{},{}:{}:{}:{},{}",
            f(self.reliability as u64, d.reliability as u64),
            f(self.durability as u64, d.durability as u64),
            f(self.history as u64, d.history as u64),
            f(self.depth, d.depth),
            t(self.deadline, d.deadline),
            t(self.lifespan, d.lifespan),
            f(self.liveliness as u64, d.liveliness as u64),
            t(self.liveliness_lease, d.liveliness_lease),
        )
    }
}

/// A liveliness token read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub domain: u32,
    pub zid: String,
    pub node_id: String,
    pub entity_id: String,
    pub kind: EntityKind,
    pub enclave: String,
    /// `/` for the root namespace.
    pub namespace: String,
    pub node: String,
    /// Publishers, subscriptions, services, clients.
    pub topic: Option<TokenTopic>,
    /// XXH3-128 of the token's key expression.
    pub gid: [u8; 16],
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenTopic {
    /// Fully qualified, `/chatter`.
    pub name: String,
    pub type_raw: String,
    pub type_hash: String,
    /// `Err` when the QoS field is not rmw_zenoh's format (rmw_zenoh refuses such a token).
    pub qos: Result<Qos, QosError>,
    /// The QoS field as on the wire.
    pub qos_raw: String,
}

impl Token {
    /// `/namespace/name`.
    pub fn node_fq(&self) -> String {
        if self.namespace == "/" {
            format!("/{}", self.node)
        } else {
            format!("{}/{}", self.namespace.trim_end_matches('/'), self.node)
        }
    }

    /// The data key expression of the entity's topic.
    pub fn data_key(&self) -> Option<String> {
        self.topic.as_ref().map(|t| data_key(self.domain, &t.name, &t.type_raw, &t.type_hash))
    }
}

fn demangle(s: &str) -> String {
    s.replace('%', "/")
}

fn mangle(s: &str) -> String {
    s.replace('/', "%")
}

/// A Zenoh id as rmw_zenoh_cpp of 2024 writes it in its liveliness tokens
/// (`zid_to_str` in `liveliness_utils.cpp`): each of the 16 bytes of the
/// little-endian id, most significant first, in hex without zero padding.
pub fn zid_str_2024(zid: &crate::ZenohId) -> String {
    let b = zid.padded();
    b.iter().rev().map(|x| format!("{x:x}")).collect()
}

/// The gid rmw_zenoh gives the entity whose liveliness key expression is `key`
/// (since rmw_zenoh 0.2 (Jazzy); rmw_zenoh_cpp of 2024 gave publishers a
/// random gid instead, `generate_random_gid`, unrelated to the token).
pub fn gid_of(key: &str) -> [u8; 16] {
    let h = xxhash_rust::xxh3::xxh3_128(key.as_bytes());
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&(h as u64).to_le_bytes());
    g[8..].copy_from_slice(&((h >> 64) as u64).to_le_bytes());
    g
}

/// Reads a liveliness token's key expression; `None` if it is not one of rmw_zenoh's.
pub fn parse_token(key: &str) -> Option<Token> {
    let parts: Vec<&str> = key.split('/').collect();
    if parts.len() < 9 || parts[0] != ADMIN_SPACE || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let kind = match parts[5] {
        "NN" => EntityKind::Node,
        "MP" => EntityKind::Publisher,
        "MS" => EntityKind::Subscription,
        "SS" => EntityKind::ServiceServer,
        "SC" => EntityKind::ServiceClient,
        _ => return None,
    };
    let domain: u32 = parts[1].parse().ok()?;
    let topic = if kind == EntityKind::Node {
        if parts.len() != 9 {
            return None;
        }
        None
    } else {
        if parts.len() != 13 {
            return None;
        }
        Some(TokenTopic {
            name: demangle(parts[9]),
            type_raw: demangle(parts[10]),
            type_hash: demangle(parts[11]),
            qos: Qos::parse(parts[12]),
            qos_raw: parts[12].to_string(),
        })
    };
    Some(Token {
        domain,
        zid: parts[2].to_string(),
        node_id: parts[3].to_string(),
        entity_id: parts[4].to_string(),
        kind,
        enclave: demangle(parts[6]),
        namespace: demangle(parts[7]),
        node: demangle(parts[8]),
        topic,
        gid: gid_of(key),
    })
}

/// The token key expression rmw_zenoh declares for an entity (`Entity::Entity`).
#[allow(clippy::too_many_arguments)]
pub fn token_key(domain: u32, zid: &str, nid: u32, eid: u32, kind: EntityKind, namespace: &str, node: &str, topic: Option<(&str, &str, &str, Qos)>) -> String {
    let mut k = format!("{ADMIN_SPACE}/{domain}/{zid}/{nid}/{eid}/{}/%/{}/{}", kind.code(), mangle(namespace), mangle(node));
    if let Some((name, ty, hash, qos)) = topic {
        k.push_str(&format!("/{}/{}/{}/{}", mangle(name), mangle(ty), mangle(hash), qos.to_key()));
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn design_doc_examples() {
        let k = parse_data_key("0/robot1/chatter/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18").unwrap();
        assert_eq!((k.domain, k.topic.as_str(), k.type_raw), (0, "/robot1/chatter", "std_msgs::msg::dds_::String_"));
        assert!(parse_data_key("@ros2_lv/0/x/y/z").is_none());
        assert!(parse_data_key("demo/example/zenoh").is_none());
        let t = parse_token("@ros2_lv/2/8b20917502ee955ac4476e0266340d5c/0/10/MP/%/%/talker/%chatter/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18/::,7:,:,:,,").unwrap();
        assert_eq!(t.kind, EntityKind::Publisher);
        assert_eq!(t.node_fq(), "/talker");
        let tt = t.topic.as_ref().unwrap();
        assert_eq!((tt.name.as_str(), &tt.qos), ("/chatter", &Ok(Qos { depth: 7, ..DEFAULT_QOS })));
        assert_eq!(t.data_key().unwrap(), "2/chatter/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18");
        let n = parse_token("@ros2_lv/2/aac3178e146ba6f1fc6e6a4085e77f21/0/0/NN/%/%/listener").unwrap();
        assert_eq!((n.kind, n.node.as_str(), n.namespace.as_str()), (EntityKind::Node, "listener", "/"));
        assert!(parse_token("@ros2_lv/2/z/0/0/XX/%/%/listener").is_none());
        assert!(parse_token("@ros2_lv/2/z/0/0/MP/%/%/listener").is_none());
        let best_effort = Qos::parse("2::,7:,:,:,,").unwrap();
        assert_eq!(best_effort.reliability, 2);
        assert_eq!(best_effort.to_key(), "2::,7:,:,:,,");
    }

    #[test]
    fn qos_field_as_rmw_zenoh_writes_and_reads_it() {
        // Oracle: rmw_zenoh_cpp/src/detail/liveliness_utils.cpp, `qos_to_keyexpr`
        // (each field empty when equal to `QoS::default_qos()`, qos.cpp) and
        // `keyexpr_to_qos`; the defaults-only string is the one in docs/design.md's
        // token examples (`::,7:,:,:,,` is keep last 7).
        assert_eq!(Qos::parse("::,:,:,:,,").unwrap(), DEFAULT_QOS);
        assert_eq!(DEFAULT_QOS.to_key(), "::,:,:,:,,");
        // rclcpp's SensorDataQoS (rmw_qos_profile_sensor_data: best effort, keep last 5).
        let sensor = Qos { reliability: 2, depth: 5, ..DEFAULT_QOS };
        assert_eq!(sensor.to_key(), "2::,5:,:,:,,");
        assert_eq!(Qos::parse("2::,5:,:,:,,").unwrap(), sensor);
        // /tf_static, /robot_description: reliable, transient local, keep last 1.
        let latched = Qos { durability: 1, depth: 1, ..DEFAULT_QOS };
        assert_eq!(latched.to_key(), ":1:,1:,:,:,,");
        assert_eq!(Qos::parse(":1:,1:,:,:,,").unwrap(), latched);
        // Keep all; deadline 100 ms, lifespan 2 s, manual by topic with a 1.5 s lease: every field set.
        let all = Qos {
            history: 2,
            deadline: RmwTime { sec: 0, nsec: 100_000_000 },
            lifespan: RmwTime { sec: 2, nsec: 0 },
            liveliness: 3,
            liveliness_lease: RmwTime { sec: 1, nsec: 500_000_000 },
            ..DEFAULT_QOS
        };
        assert_eq!(all.to_key(), "::2,:0,100000000:2,0:3,1,500000000");
        assert_eq!(Qos::parse(&all.to_key()).unwrap(), all);
        assert_eq!((all.deadline.ns(), all.lifespan.ns(), DEFAULT_QOS.deadline.ns()), (Some(100_000_000), Some(2_000_000_000), None));
        // What keyexpr_to_qos refuses, refused with the part named: the pre-1.0
        // three-part form of the same file's older docstring ("1:2:1,10"), a
        // policy outside rmw's tables (reliability 4 is BEST_AVAILABLE, resolved
        // before a token is made; liveliness 2 is the deprecated MANUAL_BY_NODE),
        // junk after a number, too few history or liveliness values.
        for (bad, says) in [
            ("1:2:1,10", "parts"),
            ("4::,:,:,:,,", "reliability"),
            ("::,:,:,:2,,", "liveliness"),
            ("::,5x:,:,:,,", "depth"),
            ("::-1,:,:,:,,", "history"),
            ("::5:,:,:,,", "history"),
            ("::,:,:,:,", "liveliness"),
            ("::,:,:,:,,99999999999999999999999", "overflows"),
        ] {
            let e = Qos::parse(bad).expect_err(bad);
            assert!(e.0.contains(says), "{bad}: {e}");
        }
        // A token with a bad QoS field still names its node and topic; the QoS is the error.
        let t = parse_token("@ros2_lv/0/z/0/10/MP/%/%/talker/%chatter/std_msgs::msg::dds_::String_/RIHS01_x/1:2:1,10").unwrap();
        let tt = t.topic.unwrap();
        assert!(tt.qos.is_err() && tt.qos_raw == "1:2:1,10");
    }

    #[test]
    fn attachments_both_layouts() {
        let gid = [7u8; 16];
        let a = parse_attachment(&attachment(42, 1_700_000_000_000_000_000, &gid)).unwrap();
        assert_eq!((a.sequence_number, a.source_timestamp, a.gid, a.keyed), (42, 1_700_000_000_000_000_000, gid, false));
        let k = parse_attachment(&attachment_keyed(5, 9, &gid)).unwrap();
        assert_eq!((k.sequence_number, k.source_timestamp, k.keyed), (5, 9, true));
        assert!(parse_attachment(&[0; 32]).is_none());
        assert!(parse_attachment(b"").is_none());
    }

    #[test]
    fn decimal_map_in_any_order_as_rmw_zenoh_of_2024_reads_it() {
        // Oracle: rmw_zenoh_cpp of 2024, `create_map_and_set_sequence_num` (decimal text
        // by "%" PRId64) and `get_int64_from_attachment` (1-19 bytes, strtol base 10,
        // nothing after the digits); zenoh-c 0.11's map is a hash map: any order.
        let gid = [5u8; 16];
        for order in [[0, 1, 2], [2, 0, 1], [1, 2, 0], [2, 1, 0]] {
            let a = parse_attachment(&attachment_map(17, 1_796_620_326_578_062_943, &gid, order)).unwrap();
            assert_eq!((a.sequence_number, a.source_timestamp, a.gid, a.layout), (17, 1_796_620_326_578_062_943, gid, AttachmentLayout::DecimalMap));
            assert!(a.keyed);
        }
        assert_eq!(decimal_i64(b"-42"), Some(-42));
        assert_eq!(decimal_i64(b"+7"), Some(7));
        assert_eq!(decimal_i64(b" 9"), Some(9));
        for bad in [&b""[..], b"x", b"1 ", b"12345678901234567890", b"9223372036854775808", b"--1"] {
            assert_eq!(decimal_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        // A pair missing, or a gid of another length: not an attachment.
        let mut a = vec![];
        for (k, v) in [(&b"sequence_number"[..], &b"1"[..]), (b"source_timestamp", b"2")] {
            crate::emit::zslice(&mut a, k);
            crate::emit::zslice(&mut a, v);
        }
        assert!(parse_attachment(&a).is_none());
        crate::emit::zslice(&mut a, b"source_gid");
        crate::emit::zslice(&mut a, &[1; 15]);
        assert!(parse_attachment(&a).is_none());
    }

    #[test]
    fn zid_as_rmw_zenoh_of_2024_writes_it() {
        // The talker's InitSyn carried bf b7 dd 4f 64 53 d2 6d f8 fd 0f 34 d2 bb b4 bc; its
        // tokens named "bcb4bbd234ffdf86dd253644fddb7bf" (tests/real_batches_v08.rs).
        let z = crate::ZenohId::from_wire(&[0xbf, 0xb7, 0xdd, 0x4f, 0x64, 0x53, 0xd2, 0x6d, 0xf8, 0xfd, 0x0f, 0x34, 0xd2, 0xbb, 0xb4, 0xbc]).unwrap();
        assert_eq!(zid_str_2024(&z), "bcb4bbd234ffdf86dd253644fddb7bf");
        assert_eq!(z.to_string(), "bcb4bbd2340ffdf86dd253644fddb7bf");
    }

    #[test]
    fn gid_is_xxh3_128_low_then_high() {
        // XXH3-128 of the empty input: 99aa06d3014798d86001c324468d497f (high 64, low 64)
        let g = gid_of("");
        assert_eq!(&g[..8], &0x6001c324468d497fu64.to_le_bytes());
        assert_eq!(&g[8..], &0x99aa06d3014798d8u64.to_le_bytes());
    }
}
