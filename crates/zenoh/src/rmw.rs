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
//!   `"sequence_number"`, `"source_timestamp"`, `"source_gid"`;
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

/// What a sample's attachment says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attachment {
    pub sequence_number: i64,
    pub source_timestamp: i64,
    pub gid: [u8; 16],
    /// The keyed layout of rmw_zenoh before #601.
    pub keyed: bool,
}

/// Reads either attachment layout; `None` if it is neither.
pub fn parse_attachment(b: &[u8]) -> Option<Attachment> {
    if b.len() == 33 && b[16] == 16 {
        let sn = i64::from_le_bytes(b[0..8].try_into().ok()?);
        let ts = i64::from_le_bytes(b[8..16].try_into().ok()?);
        let gid: [u8; 16] = b[17..33].try_into().ok()?;
        return Some(Attachment { sequence_number: sn, source_timestamp: ts, gid, keyed: false });
    }
    let mut r = crate::codec::Reader::new(b);
    let key = |r: &mut crate::codec::Reader<'_>, want: &[u8]| -> Option<()> { (r.zslice("key").ok()? == want).then_some(()) };
    key(&mut r, b"sequence_number")?;
    let sn = i64::from_le_bytes(r.bytes(8, "sn").ok()?.try_into().ok()?);
    key(&mut r, b"source_timestamp")?;
    let ts = i64::from_le_bytes(r.bytes(8, "ts").ok()?.try_into().ok()?);
    key(&mut r, b"source_gid")?;
    let gid: [u8; 16] = r.zslice("gid").ok()?.try_into().ok()?;
    r.is_empty().then_some(Attachment { sequence_number: sn, source_timestamp: ts, gid, keyed: true })
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

/// QoS as rmw_zenoh encodes it in a token (`qos_to_keyexpr`): values equal
/// to rmw_zenoh's defaults are left empty. Numbers are rmw's enums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Qos {
    /// rmw_qos_reliability_policy_e: 1 reliable, 2 best effort.
    pub reliability: u32,
    /// rmw_qos_durability_policy_e: 1 transient local, 2 volatile.
    pub durability: u32,
    /// rmw_qos_history_policy_e: 1 keep last, 2 keep all.
    pub history: u32,
    pub depth: u64,
}

/// rmw_zenoh's defaults (`qos.cpp`): reliable, volatile, keep last 42.
pub const DEFAULT_QOS: Qos = Qos { reliability: 1, durability: 2, history: 1, depth: 42 };

impl Qos {
    /// Reads `rel:dur:hist,depth:dl_s,dl_ns:ls_s,ls_ns:lv,lv_s,lv_ns`.
    pub fn parse(s: &str) -> Option<Qos> {
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() < 6 {
            return None;
        }
        let num = |p: &str, default: u64| -> Option<u64> { if p.is_empty() { Some(default) } else { p.parse().ok() } };
        let (hist, depth) = parts[2].split_once(',')?;
        let d = DEFAULT_QOS;
        Some(Qos {
            reliability: num(parts[0], d.reliability as u64)?.try_into().ok()?,
            durability: num(parts[1], d.durability as u64)?.try_into().ok()?,
            history: num(hist, d.history as u64)?.try_into().ok()?,
            depth: num(depth, d.depth)?,
        })
    }

    /// The token form of a profile whose deadline, lifespan and liveliness are the defaults.
    pub fn to_key(&self) -> String {
        let d = DEFAULT_QOS;
        let f = |v: u64, dv: u64| if v == dv { String::new() } else { v.to_string() };
        format!(
            "{}:{}:{},{}:,:,:,,",
            f(self.reliability as u64, d.reliability as u64),
            f(self.durability as u64, d.durability as u64),
            f(self.history as u64, d.history as u64),
            f(self.depth, d.depth)
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
    pub qos: Qos,
    /// The raw QoS chunk when it did not parse.
    pub qos_raw: Option<String>,
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

/// The gid rmw_zenoh gives the entity whose liveliness key expression is `key`.
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
        let qos = Qos::parse(parts[12]);
        Some(TokenTopic {
            name: demangle(parts[9]),
            type_raw: demangle(parts[10]),
            type_hash: demangle(parts[11]),
            qos: qos.unwrap_or(DEFAULT_QOS),
            qos_raw: qos.is_none().then(|| parts[12].to_string()),
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
        assert_eq!((tt.name.as_str(), tt.qos), ("/chatter", Qos { depth: 7, ..DEFAULT_QOS }));
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
    fn gid_is_xxh3_128_low_then_high() {
        // XXH3-128 of the empty input: 99aa06d3014798d86001c324468d497f (high 64, low 64)
        let g = gid_of("");
        assert_eq!(&g[..8], &0x6001c324468d497fu64.to_le_bytes());
        assert_eq!(&g[8..], &0x99aa06d3014798d8u64.to_le_bytes());
    }
}
