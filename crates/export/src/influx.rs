//! InfluxDB 1.x line protocol over HTTP (`POST /write?db=…&precision=ns`).
//!
//! Measurements (schema in `docs/export.md`):
//! - `ddscope_submsg`: every RTPS submessage (thesis Table 3.1). Tags are the
//!   low-cardinality attributes (capture, kind, traffic_type, topic_name,
//!   writer_id, pcp); sn, fragment_starting_num, payload_size… are fields.
//! - `ddscope_data`: user DATA/DATA_FRAG keyed for the database-side
//!   latency queries: the point time is the writer's source timestamp
//!   (INFO_TS), identical at every capture point, so InfluxQL can join
//!   two captures with `GROUP BY time(1ns), writer_id` without a
//!   per-sample tag (InfluxQL groups by tags and time only).
//! - `ddscope_incident`: one point per incident `serve` judged (tags: topic, cause, layer).
//! - `ddscope_sample`, `ddscope_latency`, `ddscope_topic`, `ddscope_capture`
//!   and one measurement per system family (`node_cpu_seconds_total`…, field `value`).
//!
//! Points of one series with the same timestamp overwrite each other in
//! InfluxDB; where the capture time is the point time, timestamps are made
//! unique per series by adding a few nanoseconds, and the exact capture time
//! is kept in the `ts_ns` field.

use crate::delivery::{Batch, Delivery, DeliveryConfig, Encoder, Http, Outcome, SinkStats, SinkStatsSnapshot, Transport};
use crate::health::CaptureHealth;
use crate::push::PushSink;
use ddscope_sysstat::promtext::Family;
use ddscope_sysstat::system::SystemSnapshot;
use ddscope_core::events::{SubmsgEvent, TrafficType};
use ddscope_core::latency::explain::Incident;
use ddscope_core::latency::LatencyRow;
use ddscope_core::ros2::chain::ChainRow;
use ddscope_core::samples::SampleRecord;
use ddscope_core::topics::TopicRow;
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::Guid;
use ddscope_core::bounded::BoundedMap;
use rustc_hash::{FxHashMap, FxHasher};
use std::fmt::Write as _;
use std::hash::Hasher;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct InfluxConfig {
    /// Base URL of the InfluxDB 1.x HTTP API, e.g. `http://127.0.0.1:8086`.
    pub url: String,
    pub database: String,
    pub retention_policy: Option<String>,
    /// Basic-auth credentials, when the server requires them.
    pub auth: Option<(String, String)>,
    /// Create the database when the server says it does not exist.
    pub create_database: bool,
    /// Write `ddscope_submsg` (one point per submessage).
    pub submessages: bool,
    /// Write `ddscope_data` (keys for the database-side latency queries).
    pub data_keys: bool,
    /// How long (capture time) copies of a (writer, sn, fragment) are remembered for the `copy` tag.
    pub copy_window: Duration,
    /// At most this many (writer, sn, fragment) keys are remembered.
    pub max_copy_keys: usize,
    pub delivery: DeliveryConfig,
}

impl InfluxConfig {
    pub fn new(url: &str, database: &str) -> Self {
        InfluxConfig {
            url: url.trim_end_matches('/').to_string(),
            database: database.to_string(),
            retention_policy: None,
            auth: None,
            create_database: true,
            submessages: true,
            data_keys: true,
            copy_window: Duration::from_secs(30),
            max_copy_keys: 1 << 18,
            delivery: DeliveryConfig::default(),
        }
    }

    /// Parses `http://host:port/DB` or `http://host:port?db=DB` (default database `ddscope`).
    pub fn from_url(spec: &str) -> Result<Self, String> {
        let (scheme, rest) = spec.split_once("://").ok_or_else(|| format!("{spec:?}: expected http://host:port[/database]"))?;
        if scheme != "http" && scheme != "https" {
            return Err(format!("{spec:?}: scheme must be http or https"));
        }
        let (hostpart, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (host, path) = hostpart.split_once('/').unwrap_or((hostpart, ""));
        if host.is_empty() {
            return Err(format!("{spec:?}: no host"));
        }
        let mut db = path.trim_matches('/').to_string();
        for kv in query.split('&').filter(|s| !s.is_empty()) {
            match kv.split_once('=') {
                Some(("db", v)) => db = v.to_string(),
                _ => return Err(format!("{spec:?}: unknown parameter {kv:?} (only db=)")),
            }
        }
        if db.is_empty() {
            db = "ddscope".into();
        }
        Ok(InfluxConfig::new(&format!("{scheme}://{host}"), &db))
    }

    fn write_url(&self) -> String {
        let mut u = format!("{}/write?db={}&precision=ns", self.url, url_encode(&self.database));
        if let Some(rp) = &self.retention_policy {
            u.push_str("&rp=");
            u.push_str(&url_encode(rp));
        }
        u
    }
}

pub(crate) fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Appends `s` escaped for a measurement name (commas, spaces).
pub fn escape_measurement(out: &mut String, s: &str) {
    escape_with(out, s, &[',', ' ']);
}

/// Appends `s` escaped for a tag key, tag value or field key (commas, equals signs, spaces).
pub fn escape_key(out: &mut String, s: &str) {
    escape_with(out, s, &[',', '=', ' ']);
}

fn escape_with(out: &mut String, s: &str, special: &[char]) {
    // InfluxDB 1.x cannot parse a key or tag value that ends in a backslash
    // (it escapes the separator after it); such a backslash becomes U+29F5 (⧵).
    let (body, trailing) = match s.strip_suffix('\\') {
        Some(b) => (b.trim_end_matches('\\'), s.len() - b.trim_end_matches('\\').len()),
        None => (s, 0),
    };
    for c in body.chars() {
        match c {
            // Line protocol has no escape for a control character (a tab or
            // a newline ends the key; others are refused or kept invisibly):
            // each is written as the text `ls` and tshark show (`\t`, `\n`,
            // `\x1b`), which InfluxDB keeps as it is (a backslash before
            // anything but the separators is itself).
            c if c.is_control() => {
                let mut b = [0u8; 4];
                out.push_str(&ddscope_traffic::text::escape_controls(c.encode_utf8(&mut b)));
            }
            c if special.contains(&c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    for _ in 0..trailing {
        out.push('\u{29F5}');
    }
}

/// Appends a string field value: double quotes and backslashes escaped.
pub fn escape_string_field(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Builds one line: `measurement,tags fields timestamp`.
pub struct Line<'a> {
    out: &'a mut String,
    start: usize,
    fields: usize,
    in_fields: bool,
    /// For values formatted before escaping (one allocation per line at most).
    scratch: String,
}

impl<'a> Line<'a> {
    pub fn new(out: &'a mut String, measurement: &str) -> Self {
        let start = out.len();
        escape_measurement(out, measurement);
        Line { out, start, fields: 0, in_fields: false, scratch: String::new() }
    }

    /// Adds a tag (skipped when the value is empty: InfluxDB has no empty tags).
    pub fn tag(&mut self, k: &str, v: &str) -> &mut Self {
        debug_assert!(!self.in_fields, "tags before fields");
        if !v.is_empty() {
            self.out.push(',');
            escape_key(self.out, k);
            self.out.push('=');
            escape_key(self.out, v);
        }
        self
    }

    /// A tag from any `Display` value (GUIDs, numbers, addresses).
    pub fn tag_fmt(&mut self, k: &str, v: impl std::fmt::Display) -> &mut Self {
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        let _ = write!(s, "{v}");
        self.tag(k, &s);
        self.scratch = s;
        self
    }

    /// A string field from any `Display` value.
    pub fn string_fmt(&mut self, k: &str, v: impl std::fmt::Display) -> &mut Self {
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        let _ = write!(s, "{v}");
        self.string(k, &s);
        self.scratch = s;
        self
    }

    fn field_key(&mut self, k: &str) {
        self.out.push(if self.in_fields { ',' } else { ' ' });
        self.in_fields = true;
        self.fields += 1;
        escape_key(self.out, k);
        self.out.push('=');
    }

    pub fn int(&mut self, k: &str, v: i64) -> &mut Self {
        self.field_key(k);
        let _ = write!(self.out, "{v}i");
        self
    }

    pub fn opt_int<T: Into<i64>>(&mut self, k: &str, v: Option<T>) -> &mut Self {
        if let Some(v) = v {
            self.int(k, v.into());
        }
        self
    }

    pub fn float(&mut self, k: &str, v: f64) -> &mut Self {
        // NaN and infinities are not representable: the field is left out.
        if v.is_finite() {
            self.field_key(k);
            if v.fract() == 0.0 && v.abs() < 1e15 {
                let _ = write!(self.out, "{v:.1}");
            } else {
                let _ = write!(self.out, "{v}");
            }
        }
        self
    }

    pub fn boolean(&mut self, k: &str, v: bool) -> &mut Self {
        self.field_key(k);
        self.out.push_str(if v { "true" } else { "false" });
        self
    }

    pub fn string(&mut self, k: &str, v: &str) -> &mut Self {
        self.field_key(k);
        escape_string_field(self.out, v);
        self
    }

    /// Hash of `measurement,tags` written so far (the series key).
    pub fn series_hash(&self) -> u64 {
        debug_assert!(!self.in_fields, "series_hash before the fields");
        let mut h = FxHasher::default();
        h.write(&self.out.as_bytes()[self.start..]);
        h.finish()
    }

    /// Ends the line; returns false (and removes it) when it has no field.
    pub fn finish(self, ts_ns: i64) -> bool {
        if self.fields == 0 {
            self.out.truncate(self.start);
            return false;
        }
        let _ = writeln!(self.out, " {ts_ns}");
        true
    }
}

/// Keeps the point times of each series unique (a later point with the same
/// series and time would overwrite the earlier one).
#[derive(Default)]
struct UniqueTimes {
    last: FxHashMap<u64, i64>,
}

/// Beyond this many series, the memory is reset (a collision can then happen once per series).
const MAX_TIME_SERIES: usize = 100_000;
/// Only points this close behind the series' last point are moved.
const NUDGE_WINDOW_NS: i64 = 1_000;

impl UniqueTimes {
    fn get(&mut self, series: u64, ts: i64) -> i64 {
        if self.last.len() >= MAX_TIME_SERIES {
            self.last.clear();
        }
        let e = self.last.entry(series).or_insert(i64::MIN);
        let t = if ts <= *e && *e - ts < NUDGE_WINDOW_NS { *e + 1 } else { ts };
        *e = (*e).max(t);
        t
    }
}

/// Counts copies of each (capture, writer, sn, fragment) for the `copy` tag
/// of `ddscope_data`, over a bounded window: keys in order of their first
/// copy (the oldest forgotten first, by age or by the cap), each with the
/// time of its first copy and the copies so far.
struct Copies {
    counts: BoundedMap<(u64, Guid, i64, u32), (i64, u32)>,
    window_ns: i64,
}

impl Copies {
    /// How many copies of `key` came before this one; a key forgotten to
    /// stay within the cap is counted in `evicted`.
    fn next(&mut self, key: (u64, Guid, i64, u32), ts: i64, evicted: &mut dyn FnMut()) -> u32 {
        while self.counts.peek_lru().is_some_and(|(_, (t, _))| ts.saturating_sub(*t) > self.window_ns) {
            self.counts.pop_lru();
        }
        let slot = self.counts.get_or_insert_keep_order(key, || (ts, 0), &mut |_, _| evicted());
        let c = &mut self.counts.value_at(slot).expect("inserted above").1;
        let n = *c;
        *c += 1;
        n
    }
}

pub(crate) struct LineEncoder {
    cfg: InfluxConfig,
    buf: String,
    records: u64,
    times: UniqueTimes,
    copies: Copies,
    pub no_source_ts: u64,
    stats: Option<Arc<SinkStats>>,
}

fn capture_hash(c: &str) -> u64 {
    let mut h = FxHasher::default();
    h.write(c.as_bytes());
    h.finish()
}

fn kind_str(k: SubmsgKind) -> std::borrow::Cow<'static, str> {
    k.name()
}

impl LineEncoder {
    fn new(cfg: InfluxConfig) -> Self {
        let copies = Copies { counts: BoundedMap::new(cfg.max_copy_keys.max(1)), window_ns: cfg.copy_window.as_nanos() as i64 };
        LineEncoder { cfg, buf: String::with_capacity(1 << 16), records: 0, times: UniqueTimes::default(), copies, no_source_ts: 0, stats: None }
    }

    fn unencodable(&self) {
        if let Some(s) = &self.stats {
            s.unencodable.fetch_add(1, Relaxed);
        }
    }

    fn done(&mut self, ok: bool) -> u64 {
        if ok {
            self.records += 1;
            1
        } else {
            self.unencodable();
            0
        }
    }

    /// `ddscope_submsg` (+ `ddscope_data` for user DATA/DATA_FRAG).
    pub fn event(&mut self, e: &SubmsgEvent) -> u64 {
        let mut n = 0;
        if self.cfg.submessages {
            n += self.submsg_line(e);
        }
        if self.cfg.data_keys && e.is_data() && e.traffic_type == TrafficType::User {
            n += self.data_line(e);
        }
        n
    }

    fn submsg_line(&mut self, e: &SubmsgEvent) -> u64 {
        let mut l = Line::new(&mut self.buf, "ddscope_submsg");
        l.tag("capture", &e.capture).tag("kind", &kind_str(e.kind)).tag("traffic_type", e.traffic_type.as_str());
        if let Some(t) = e.topic_name() {
            l.tag("topic_name", t);
        }
        if let Some(d) = e.topic.as_deref().and_then(|t| t.domain) {
            l.tag_fmt("domain", d);
        }
        if let Some(w) = e.writer_id {
            l.tag_fmt("writer_id", w);
        }
        if let Some(p) = e.pcp {
            l.tag_fmt("pcp", p);
        }
        let ts = self.times.get(l.series_hash(), e.ts_ns);
        l.opt_int("sn", e.sn)
            .opt_int("fragment_starting_num", e.fragment_starting_num.map(i64::from))
            .opt_int("frags_in_submsg", e.frags_in_submsg)
            .opt_int("payload_size", e.payload_size.map(i64::from))
            .opt_int("sample_size", e.sample_size.map(i64::from))
            .int("ts_ns", e.ts_ns)
            .int("ip_first_ts_ns", e.ip_first_ts_ns)
            .int("ip_frags", e.ip_frags as i64)
            .int("frame", e.frame as i64)
            .int("submsg_index", e.submsg_index as i64)
            .string_fmt("src", e.src)
            .string_fmt("dst", e.dst)
            .string_fmt("vendor_id", format_args!("0x{:04x}", e.vendor_id))
            .opt_int("vlan_id", e.vlan_id)
            .opt_int("source_ts_ns", e.source_ts_ns)
            .opt_int("hb_first_sn", e.hb_first_sn)
            .opt_int("hb_last_sn", e.hb_last_sn)
            .opt_int("count", e.count)
            .opt_int("set_base", e.set_base)
            .opt_int("set_num_bits", e.set_num_bits.map(i64::from))
            .opt_int("gap_start", e.gap_start)
            .opt_int("last_fragment_num", e.last_fragment_num.map(i64::from));
        if let Some(r) = e.reader_id {
            l.string_fmt("reader_id", r);
        }
        if let Some(t) = e.topic.as_deref() {
            l.string("type_name", &t.type_name);
        }
        let ok = l.finish(ts);
        self.done(ok)
    }

    fn data_line(&mut self, e: &SubmsgEvent) -> u64 {
        let (Some(w), Some(sn), Some(src_ts)) = (e.writer_id, e.sn, e.source_ts_ns) else {
            // Without INFO_TS there is no key both captures share.
            self.no_source_ts += 1;
            self.unencodable();
            return 0;
        };
        let frag = if e.kind == SubmsgKind::DataFrag { e.fragment_starting_num } else { None };
        let stats = &self.stats;
        let copy = self.copies.next((capture_hash(&e.capture), w, sn, frag.unwrap_or(0)), e.ts_ns, &mut || {
            if let Some(s) = stats {
                s.evicted_keys.fetch_add(1, Relaxed);
            }
        });
        let mut l = Line::new(&mut self.buf, "ddscope_data");
        l.tag("capture", &e.capture).tag("kind", &kind_str(e.kind));
        if let Some(t) = e.topic_name() {
            l.tag("topic_name", t);
        }
        if let Some(d) = e.topic.as_deref().and_then(|t| t.domain) {
            l.tag_fmt("domain", d);
        }
        l.tag_fmt("writer_id", w);
        if let Some(f) = frag {
            l.tag_fmt("frag", f);
        }
        l.tag_fmt("copy", copy);
        l.int("sn", sn)
            .int("ts_ns", e.ts_ns)
            .int("ip_first_ts_ns", e.ip_first_ts_ns)
            .opt_int("payload_size", e.payload_size.map(i64::from))
            .opt_int("sample_size", e.sample_size.map(i64::from))
            .opt_int("frags_in_submsg", e.frags_in_submsg)
            .opt_int("pcp", e.pcp);
        let ok = l.finish(src_ts);
        self.done(ok)
    }

    pub fn sample(&mut self, r: &SampleRecord) -> u64 {
        let mut l = Line::new(&mut self.buf, "ddscope_sample");
        l.tag("capture", &r.capture).tag("traffic_type", r.traffic_type.as_str());
        if let Some(t) = r.topic.as_deref() {
            l.tag("topic_name", &t.topic_name);
            if let Some(d) = t.domain {
                l.tag_fmt("domain", d);
            }
        }
        l.tag_fmt("writer_id", r.writer_id).tag("complete", if r.complete { "true" } else { "false" });
        if let Some(n) = r.node.as_deref() {
            // One node per writer: no more series than writer_id makes.
            l.tag("node", &n.fq_name);
        }
        let ts = self.times.get(l.series_hash(), r.first_ts_ns);
        l.int("sn", r.sn)
            .int("sample_size", r.sample_size as i64)
            .int("first_ts_ns", r.first_ts_ns)
            .int("first_ip_ts_ns", r.first_ip_ts_ns)
            .int("last_ts_ns", r.last_ts_ns)
            .int("duration_ns", r.last_ts_ns - r.first_ip_ts_ns)
            .int("frags_expected", r.frags_expected as i64)
            .int("frags_seen", r.frags_seen as i64)
            .int("submsgs", r.submsgs as i64)
            .int("ip_frags", r.ip_frags as i64)
            .int("bytes", r.bytes as i64)
            .int("retransmitted_frags", r.retransmitted_frags as i64)
            .int("retransmitted_bytes", r.retransmitted_bytes as i64)
            .int("destinations", r.destinations as i64)
            .int("nack_frags", r.nack_frags as i64)
            .opt_int("pcp", r.pcp)
            .string("closed_by", r.closed_by.as_str());
        let ok = l.finish(ts);
        self.done(ok)
    }

    pub fn latency(&mut self, r: &LatencyRow) -> u64 {
        let mut l = Line::new(&mut self.buf, "ddscope_latency");
        let topic = r.topic.as_deref().map(|t| t.topic_name.clone()).unwrap_or_else(|| format!("writer {}", r.writer_id));
        l.tag("topic_name", &topic);
        if let Some(d) = r.topic.as_deref().and_then(|t| t.domain) {
            l.tag_fmt("domain", d);
        }
        l.tag("sender", &r.sender)
            .tag("receiver", &r.receiver)
            .tag("level", r.level.as_str())
            .tag("status", r.status.as_str());
        let ts = self.times.get(l.series_hash(), r.sender_first_ts_ns);
        l.string_fmt("writer_id", r.writer_id)
            .int("sn", r.sn)
            .opt_int("fragment_starting_num", r.fragment_starting_num.map(i64::from))
            .opt_int("latency_ns", r.latency_ns)
            .opt_int("first_first_ns", r.first_first_ns)
            .opt_int("last_last_ns", r.last_last_ns)
            .opt_int("jitter_ns", r.jitter_ns)
            .opt_int("sample_size", r.sample_size.map(i64::from))
            .int("sender_first_ts_ns", r.sender_first_ts_ns)
            .opt_int("receiver_last_ts_ns", r.receiver_last_ts_ns)
            .int("sender_retransmitted_frags", r.sender_retransmitted_frags as i64)
            .int("receiver_duplicate_frags", r.receiver_duplicate_frags as i64)
            .boolean("repaired", r.repaired)
            .opt_int("app_latency_ns", r.app_latency_ns)
            .opt_int("receiver_first_ts_ns", r.receiver_first_ts_ns)
            .opt_int("sender_last_ts_ns", r.sender_last_ts_ns)
            .opt_int("source_ts_ns", r.source_ts_ns)
            .opt_int("source_ts_to_wire_ns", r.source_ts_to_wire_ns)
            .opt_int("period_ns", r.period_ns)
            .opt_int("sender_stack_ns", r.sender_stack_ns)
            .opt_int("receiver_stack_ns", r.receiver_stack_ns);
        if let Some(t) = r.timing {
            l.string("timing", t.as_str());
        }
        if let Some(c) = r.ros.as_deref() {
            // The ROS 2 layer (docs/latency.md): the trace instants and the layers between them.
            l.opt_int("rclcpp_publish_ts_ns", c.rclcpp_publish_ts_ns)
                .opt_int("rmw_publish_ts_ns", c.rmw_publish_ts_ns)
                .opt_int("rmw_take_ts_ns", c.rmw_take_ts_ns)
                .opt_int("callback_start_ts_ns", c.callback_start_ts_ns)
                .opt_int("callback_end_ts_ns", c.callback_end_ts_ns)
                .opt_int("ros_publish_ns", c.ros_publish_ns)
                .opt_int("dds_send_ns", c.dds_send_ns)
                .opt_int("dds_local_ns", c.dds_local_ns)
                .opt_int("dds_remote_ns", c.dds_remote_ns)
                .opt_int("dds_receive_ns", c.dds_receive_ns)
                .opt_int("executor_ns", c.executor_ns)
                .opt_int("callback_ns", c.callback_ns)
                .opt_int("ros_e2e_ns", c.ros_e2e_ns);
            if let Some(j) = c.join {
                l.string("join", j.as_str());
            }
            if let Some(n) = c.sender_node.as_deref() {
                l.string("sender_node", n);
            }
            if let Some(n) = c.receiver_node.as_deref() {
                l.string("receiver_node", n);
            }
        }
        let ok = l.finish(ts);
        self.done(ok)
    }

    /// One hop of one instance of a measured chain (`serve --path`).
    pub fn chain(&mut self, r: &ChainRow) -> u64 {
        let h = &r.h;
        let mut l = Line::new(&mut self.buf, "ddscope_chain");
        l.tag("chain", &r.chain).tag_fmt("hop", r.hop);
        if let Some(t) = h.topic.as_deref() {
            l.tag("topic_name", t);
        }
        l.tag("sender", &h.sender).tag("receiver", &h.receiver).tag("delivery", h.level.as_str());
        let at = h.rclcpp_ts.or(h.callback_start_ts).unwrap_or(h.take_ts);
        let ts = self.times.get(l.series_hash(), at);
        l.int("instance", r.instance as i64)
            .opt_int("sn", h.sn)
            .opt_int("source_ts_ns", h.source_ts)
            .opt_int("rclcpp_publish_ts_ns", h.rclcpp_ts)
            .int("rmw_take_ts_ns", h.take_ts)
            .opt_int("callback_start_ts_ns", h.callback_start_ts)
            .opt_int("ros_publish_ns", h.layers.ros_publish)
            .opt_int("dds_send_ns", h.layers.dds_send)
            .opt_int("message_ns", h.layers.message)
            .opt_int("dds_receive_ns", h.layers.dds_receive)
            .opt_int("dds_local_ns", h.layers.dds_local)
            .opt_int("dds_remote_ns", h.layers.dds_remote)
            .opt_int("executor_ns", h.layers.executor)
            .opt_int("callback_ns", h.layers.callback)
            .opt_int("ros_e2e_ns", h.layers.ros_e2e)
            .opt_int("node_ns", r.node_ns)
            .opt_int("chain_start_ts_ns", r.chain_start_ts_ns)
            .opt_int("chain_e2e_ns", r.chain_e2e_ns)
            .string("join", h.join.as_str());
        if let Some(w) = h.writer {
            l.string_fmt("writer_id", w);
        }
        if let Some(n) = h.sender_node.as_deref() {
            l.string("sender_node", n);
        }
        if let Some(n) = h.receiver_node.as_deref() {
            l.string("receiver_node", n);
        }
        let ok = l.finish(ts);
        self.done(ok)
    }

    /// One incident `serve` judged: tags topic, sender, receiver, cause, layer; at the sample's
    /// first sighting at the sender (unique per series like the latency points).
    pub fn incident(&mut self, i: &Incident) -> u64 {
        let mut l = Line::new(&mut self.buf, "ddscope_incident");
        l.tag("topic_name", &i.topic);
        if let Some(d) = i.domain {
            l.tag_fmt("domain", d);
        }
        l.tag("sender", &i.sender).tag("receiver", &i.receiver).tag("cause", i.cause.name());
        if let Some(layer) = i.layer {
            l.tag("layer", layer.name());
        }
        let ts = self.times.get(l.series_hash(), i.sender_first_ts_ns);
        let kinds: Vec<&str> = i.kinds.iter().map(|k| ddscope_core::latency::explain::kind_name(*k)).collect();
        l.string("writer_id", &i.writer_id)
            .int("sn", i.sn)
            .int("sender_first_ts_ns", i.sender_first_ts_ns)
            .string("kinds", &kinds.join(","))
            .opt_int("e2e_ns", i.e2e_ns)
            .string("e2e_measure", i.e2e_measure)
            .opt_int("typical_e2e_ns", i.typical_e2e_ns)
            .int("excess_ns", i.excess_ns())
            .opt_int("budget_ns", i.budget_ns)
            .opt_int("layer_ns", i.layer_ns)
            .opt_int("layer_typical_ns", i.layer_typical_ns)
            .string("evidence", &i.evidence);
        let ok = l.finish(ts);
        self.done(ok)
    }

    pub fn topic_row(&mut self, r: &TopicRow, ts_ns: i64) -> u64 {
        /// The ROS nodes of a topic row as one tag value: at most 8 names, then `+N`.
        fn node_list(nodes: &[String]) -> Option<String> {
            if nodes.is_empty() {
                return None;
            }
            let mut s = nodes.iter().take(8).cloned().collect::<Vec<_>>().join(",");
            if nodes.len() > 8 {
                s.push_str(&format!(",+{}", nodes.len() - 8));
            }
            Some(s)
        }
        let mut l = Line::new(&mut self.buf, "ddscope_topic");
        l.tag("capture", &r.capture).tag("traffic_type", r.traffic_type.as_str());
        if let Some(n) = r.names.as_deref() {
            l.tag("topic_name", &n.topic_name).tag("type_name", &n.type_name);
        }
        if let Some(d) = r.domain {
            l.tag_fmt("domain", d);
        }
        if let Some(w) = r.writer_id {
            l.tag_fmt("writer_id", w);
        }
        if let Some(n) = node_list(&r.writer_nodes) {
            l.tag("writer_nodes", &n);
        }
        if let Some(n) = node_list(&r.reader_nodes) {
            l.tag("reader_nodes", &n);
        }
        l.int("writers", r.writers as i64)
            .int("readers", r.readers as i64)
            .int("samples", r.samples as i64)
            .int("incomplete_samples", r.incomplete_samples as i64)
            .int("bytes", r.bytes as i64)
            .opt_int("min_sample_size", r.min_sample_size.map(i64::from))
            .int("max_sample_size", r.max_sample_size as i64)
            .int("rtps_frags", r.rtps_frags as i64)
            .int("ip_frags", r.ip_frags as i64)
            .int("retransmitted_fragments", r.retransmitted_fragments as i64)
            .int("retransmitted_bytes", r.retransmitted_bytes as i64)
            .int("sn_gaps", r.sn_gaps as i64)
            .int("heartbeats", r.heartbeats as i64)
            .int("acknacks", r.acknacks as i64)
            .int("nack_frags", r.nack_frags as i64)
            .int("gaps", r.gaps as i64);
        if let Some(v) = r.rate_hz {
            l.float("rate_hz", v);
        }
        if let Some(k) = r.rate_kind {
            l.string("rate_kind", k.as_str());
        }
        if let Some(v) = r.bandwidth_bps {
            l.float("bandwidth_bps", v);
        }
        let ok = l.finish(ts_ns);
        self.done(ok)
    }

    pub fn health(&mut self, h: &CaptureHealth, ts_ns: i64) -> u64 {
        let mut l = Line::new(&mut self.buf, "ddscope_capture");
        l.tag("capture", &h.capture)
            .int("packets_received", h.packets_received as i64)
            .int("kernel_dropped", h.kernel_dropped as i64)
            .int("interface_dropped", h.interface_dropped as i64)
            .int("bytes", h.bytes as i64);
        for (k, v) in &h.decode_skipped {
            l.int(&format!("skipped_{k}"), *v as i64);
        }
        for (k, v) in &h.evicted {
            l.int(&format!("evicted_{k}"), *v as i64);
        }
        let ok = l.finish(ts_ns);
        self.done(ok)
    }

    /// One measurement per family, tags = labels + `host`, field `value`.
    /// Histogram and summary families are written sample by sample
    /// (`x_bucket` with an `le` tag, `x_sum`, `x_count`), as InfluxDB's own
    /// Prometheus endpoints do.
    pub fn families(&mut self, host: &str, fams: &[Family], ts_ns: i64) -> u64 {
        let mut n = 0;
        for f in fams {
            for s in &f.samples {
                let mut l = Line::new(&mut self.buf, &s.name);
                if !host.is_empty() && !s.labels.iter().any(|(k, _)| k == "host") {
                    l.tag("host", host);
                }
                let mut labels: Vec<&(String, String)> = s.labels.iter().collect();
                // Tags in key order (InfluxDB's preferred order).
                labels.sort();
                for (k, v) in labels {
                    l.tag(k, v);
                }
                l.float("value", s.value);
                let ok = l.finish(ts_ns);
                n += self.done(ok);
            }
        }
        n
    }
}

impl Encoder for LineEncoder {
    fn pending_records(&self) -> u64 {
        self.records
    }
    fn pending_bytes(&self) -> usize {
        self.buf.len()
    }
    fn seal(&mut self, out: &mut Vec<Batch>) {
        if self.records > 0 {
            let body = std::mem::replace(&mut self.buf, String::with_capacity(1 << 16)).into_bytes();
            out.push(Batch { body, records: std::mem::take(&mut self.records), endpoint: 0 });
        }
    }
}

struct InfluxTransport {
    http: Http,
    write_url: String,
    query_url: String,
    database: String,
    create_database: bool,
    headers: Vec<(String, String)>,
}

/// Points an InfluxDB partial-write error lost: its `dropped=N` (points
/// refused after parsing: type conflicts, retention) plus one per line it
/// could not parse (`unable to parse '…'`, which InfluxDB 1.x leaves out of
/// `dropped`: a refused line was once counted as delivered).
fn partial_dropped(body: &str) -> Option<u64> {
    let i = body.find("dropped=")?;
    let dropped: u64 = body[i + 8..].chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().ok()?;
    Some(dropped + body.matches("unable to parse '").count() as u64)
}

impl InfluxTransport {
    fn create_database(&self) -> Result<(), String> {
        let q = format!("CREATE DATABASE \"{}\"", self.database.replace('\\', "\\\\").replace('"', "\\\""));
        match self.http.post_form(&self.query_url, &[("q", q.as_str())]) {
            Ok((200, body)) => {
                let text = String::from_utf8_lossy(&body);
                if text.contains("\"error\"") {
                    Err(format!("CREATE DATABASE {}: {}", self.database, text.trim()))
                } else {
                    Ok(())
                }
            }
            Ok((status, body)) => Err(format!("CREATE DATABASE {}: HTTP {status}: {}", self.database, String::from_utf8_lossy(&body).trim())),
            Err(e) => Err(e),
        }
    }
}

impl Transport for InfluxTransport {
    fn send(&mut self, batch: &Batch, body: &[u8], gzip: bool) -> Outcome {
        let mut created = false;
        loop {
            let (status, resp) = match self.http.post(&self.write_url, "text/plain; charset=utf-8", &self.headers, body, gzip) {
                Ok(x) => x,
                Err(e) => return Outcome::Retry(e),
            };
            let text = String::from_utf8_lossy(&resp);
            let text = text.trim();
            return match status {
                200..=299 => Outcome::Delivered,
                404 if self.create_database && !created && text.contains("database not found") => {
                    if let Err(e) = self.create_database() {
                        return Outcome::Retry(e);
                    }
                    created = true;
                    continue;
                }
                400 => match partial_dropped(text) {
                    Some(n) => Outcome::Partial(n, format!("InfluxDB partial write ({n} of {} points refused): {}", batch.records, ddscope_traffic::text::excerpt(text, ddscope_traffic::text::EXCERPT_CHARS))),
                    None => Outcome::Rejected(format!("InfluxDB refused a batch of {} points: {}", batch.records, ddscope_traffic::text::excerpt(text, ddscope_traffic::text::EXCERPT_CHARS))),
                },
                429 | 500..=599 => Outcome::Retry(format!("InfluxDB HTTP {status}: {text}")),
                _ => Outcome::Rejected(format!("InfluxDB HTTP {status}: {text}")),
            };
        }
    }
}

/// The InfluxDB sink. Every method takes `&self` and never blocks on the network.
pub struct InfluxSink {
    delivery: Delivery<LineEncoder>,
}

impl InfluxSink {
    pub fn start(cfg: InfluxConfig) -> Result<Self, String> {
        cfg.delivery.validate()?;
        if cfg.database.is_empty() {
            return Err("InfluxDB database name is empty".into());
        }
        if cfg.url.starts_with("https://") && !cfg!(feature = "tls") {
            return Err(format!("{}: https needs ddscope built with the `tls` feature", cfg.url));
        }
        let mut headers = vec![];
        if let Some((u, p)) = &cfg.auth {
            headers.push(("Authorization".to_string(), format!("Basic {}", base64(&format!("{u}:{p}")))));
        }
        let transport = InfluxTransport {
            http: Http::new(cfg.delivery.request_timeout),
            write_url: cfg.write_url(),
            query_url: format!("{}/query", cfg.url),
            database: cfg.database.clone(),
            create_database: cfg.create_database,
            headers,
        };
        let delivery = Delivery::start(cfg.delivery.clone(), LineEncoder::new(cfg), transport, "influx").map_err(|e| format!("cannot start the InfluxDB sender thread: {e}"))?;
        let stats = delivery.stats().clone();
        delivery.with_encoder(|enc| {
            enc.stats = Some(stats);
            (0, ())
        });
        Ok(InfluxSink { delivery })
    }

    pub fn stats(&self) -> &Arc<SinkStats> {
        self.delivery.stats()
    }

    pub fn on_event(&self, e: &SubmsgEvent) {
        self.delivery.with_encoder(|enc| (enc.event(e), ()));
    }

    pub fn on_events<'a>(&self, es: impl IntoIterator<Item = &'a SubmsgEvent>) {
        self.delivery.add_each(es, |enc, e| enc.event(e));
    }

    pub fn on_sample(&self, r: &SampleRecord) {
        self.delivery.with_encoder(|enc| (enc.sample(r), ()));
    }

    pub fn on_latency(&self, r: &LatencyRow) {
        self.delivery.with_encoder(|enc| (enc.latency(r), ()));
    }

    pub fn on_chain_row(&self, r: &ChainRow) {
        self.delivery.with_encoder(|enc| (enc.chain(r), ()));
    }

    pub fn on_incidents(&self, incidents: &[Incident]) {
        self.delivery.add_each(incidents, |enc, i| enc.incident(i));
    }

    /// Writes a per-topic snapshot (`ddscope topics` rows) at `ts_ns`.
    pub fn on_topic_rows(&self, rows: &[TopicRow], ts_ns: i64) {
        self.delivery.add_each(rows, |enc, r| enc.topic_row(r, ts_ns));
    }

    pub fn on_capture_health(&self, h: &CaptureHealth, ts_ns: i64) {
        self.delivery.with_encoder(|enc| (enc.health(h, ts_ns), ()));
    }

    pub fn on_system(&self, s: &SystemSnapshot) {
        let fams = s.families_with_errors();
        self.delivery.add_each(&fams, |enc, f| enc.families(&s.host, std::slice::from_ref(f), s.ts_ns));
    }

    /// Data events skipped for `ddscope_data` because no INFO_TS was in force.
    pub fn data_without_source_ts(&self) -> u64 {
        self.delivery.with_encoder(|enc| (0, enc.no_source_ts))
    }

    /// Seals the current batch and waits up to `timeout` for the queue to drain.
    pub fn flush(&self, timeout: Duration) -> bool {
        self.delivery.flush(timeout)
    }

    /// Flushes for up to `timeout` and stops; what is left is counted as dropped.
    pub fn shutdown(&mut self, timeout: Duration) -> SinkStatsSnapshot {
        self.delivery.shutdown(timeout)
    }
}

/// `influx=URL` is checked when the option is parsed.
pub(crate) fn check_target(url: &str) -> Result<(), String> {
    InfluxConfig::from_url(url).map(|_| ())
}

/// Starts the sink of `influx=URL`, `tweak` applied (`ExportOptions`'s).
pub(crate) fn start_sink(url: &str, tweak: fn(&mut InfluxConfig)) -> Result<Box<dyn PushSink>, String> {
    let mut cfg = InfluxConfig::from_url(url)?;
    tweak(&mut cfg);
    Ok(Box::new(InfluxSink::start(cfg)?))
}

impl PushSink for InfluxSink {
    fn on_event(&self, e: &SubmsgEvent) {
        InfluxSink::on_event(self, e)
    }
    fn on_sample(&self, r: &SampleRecord) {
        InfluxSink::on_sample(self, r)
    }
    fn on_latency(&self, r: &LatencyRow) {
        InfluxSink::on_latency(self, r)
    }
    fn on_chain_row(&self, r: &ChainRow) {
        InfluxSink::on_chain_row(self, r)
    }
    fn on_incidents(&self, i: &[Incident]) {
        InfluxSink::on_incidents(self, i)
    }
    fn on_topic_rows(&self, rows: &[TopicRow], ts_ns: i64) {
        InfluxSink::on_topic_rows(self, rows, ts_ns)
    }
    fn on_capture_health(&self, h: &CaptureHealth, ts_ns: i64) {
        InfluxSink::on_capture_health(self, h, ts_ns)
    }
    fn on_system(&self, s: &SystemSnapshot) {
        InfluxSink::on_system(self, s)
    }
    fn stats(&self) -> &Arc<SinkStats> {
        InfluxSink::stats(self)
    }
    fn flush(&self, timeout: Duration) -> bool {
        InfluxSink::flush(self, timeout)
    }
    fn shutdown(&mut self, timeout: Duration) -> SinkStatsSnapshot {
        InfluxSink::shutdown(self, timeout)
    }
}

fn base64(s: &str) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = s.as_bytes();
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_the_line_protocol() {
        let mut s = String::new();
        let mut l = Line::new(&mut s, "m e,a");
        l.tag("topic name", "/a b,c=d\"e").tag("empty", "").string("f=x", "say \"hi\" \\ there").int("n", -3).float("x", 2.0).boolean("b", true);
        assert!(l.finish(7));
        assert_eq!(s, "m\\ e\\,a,topic\\ name=/a\\ b\\,c\\=d\"e f\\=x=\"say \\\"hi\\\" \\\\ there\",n=-3i,x=2.0,b=true 7\n");
        let mut s = String::new();
        escape_key(&mut s, "a\\b\\,c\\\\");
        assert_eq!(s, "a\\b\\\\,c\u{29F5}\u{29F5}");
        // Control characters never reach the line as themselves: a tab once
        // became an unescaped space and InfluxDB refused the line.
        let mut s = String::new();
        escape_key(&mut s, "/a\tb\nc\x1bd\u{7f}e\u{9b}");
        assert_eq!(s, "/a\\tb\\nc\\x1bd\\x7fe\\x9b");
        assert!(!s.chars().any(|c| c.is_control()));
    }

    #[test]
    fn lines_without_fields_are_removed() {
        let mut s = String::from("keep\n");
        let mut l = Line::new(&mut s, "m");
        l.tag("a", "b").float("nan", f64::NAN);
        assert!(!l.finish(1));
        assert_eq!(s, "keep\n");
    }

    #[test]
    fn same_series_same_time_gets_distinct_times() {
        let mut u = UniqueTimes::default();
        assert_eq!(u.get(1, 100), 100);
        assert_eq!(u.get(1, 100), 101);
        assert_eq!(u.get(1, 100), 102);
        assert_eq!(u.get(2, 100), 100);
        assert_eq!(u.get(1, 5000), 5000);
        // Far out of order: left alone.
        assert_eq!(u.get(1, 10), 10);
    }

    #[test]
    fn urls_and_specs() {
        let c = InfluxConfig::from_url("http://127.0.0.1:8086/my db").unwrap();
        assert_eq!(c.url, "http://127.0.0.1:8086");
        assert_eq!(c.write_url(), "http://127.0.0.1:8086/write?db=my%20db&precision=ns");
        assert_eq!(InfluxConfig::from_url("http://h:1?db=x").unwrap().database, "x");
        assert_eq!(InfluxConfig::from_url("http://h:1").unwrap().database, "ddscope");
        assert!(InfluxConfig::from_url("h:1").is_err());
        assert!(InfluxConfig::from_url("ftp://h:1").is_err());
        assert!(InfluxConfig::from_url("http://h:1?x=1").is_err());
        assert_eq!(base64("user:pass"), "dXNlcjpwYXNz");
        assert_eq!(partial_dropped(r#"{"error":"partial write: field type conflict dropped=3"}"#), Some(3));
        // InfluxDB 1.6.7's answer to two unparseable lines in a batch of four (the other two stored).
        let two = "{\"error\":\"partial write: unable to parse 'm,a=b c v=2 2': invalid field format\\nunable to parse 'm,a=b d v=2 2': invalid field format dropped=0\"}";
        assert_eq!(partial_dropped(two), Some(2));
    }
}
