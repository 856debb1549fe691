//! What `serve` is told: its address, token and window, and every cap of
//! the HTTP layer ([`HttpLimits`]) and of the state it keeps ([`StateCaps`]).
//! The server's files below it (the state in `central.rs`, HTTP in
//! `http.rs`, gRPC in `grpc.rs`, the front in `federation.rs`) all read it;
//! it reads none of them.

use ddscope_export::traces::TraceSampling;
use ddscope_export::{Budget, ExportSpec};
use std::net::SocketAddr;
use std::time::Duration;

/// Most agents (capture points) the server correlates at once.
pub const MAX_AGENTS: usize = 64;
/// What `serve` keeps and shows, bounded whatever the agents send.
#[derive(Debug, Clone)]
pub struct StateCaps {
    /// (topic, sender, receiver) latency series kept; the least recently
    /// updated is evicted (and counted) to make room for a new one.
    pub max_series: usize,
    /// Points kept per series (message latency, submessage latency, size).
    pub series_points: usize,
    /// Flows one `/api/state` answer carries (those with the most samples);
    /// the total is always given.
    pub state_flows: usize,
    /// Points per series in one answer (evenly thinned, newest kept).
    pub state_points: usize,
    /// Writer roles in one answer.
    pub state_writers: usize,
    /// Topic rows kept per agent.
    pub agent_topic_rows: usize,
    /// Bytes of an agent's topic table / counters (as JSON) kept.
    pub agent_json_bytes: usize,
    /// End-to-end chains (topic sequences) in one answer (those found most often).
    pub state_chains: usize,
    /// Incidents of the live feed in one `/api/state` answer (newest first; `/api/incidents` has the whole feed).
    pub state_incidents: usize,
}

impl Default for StateCaps {
    fn default() -> Self {
        StateCaps {
            max_series: 256,
            series_points: 2000,
            state_flows: 50,
            state_points: 600,
            state_writers: 200,
            agent_topic_rows: 200,
            agent_json_bytes: 256 * 1024,
            state_chains: 20,
            state_incidents: 20,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub token: Option<String>,
    pub window_ns: i64,
    /// An agent silent this long no longer holds back judgement.
    pub idle: Duration,
    pub limits: HttpLimits,
    pub caps: StateCaps,
    /// Caps of the correlator's tables (pending samples, writers, flows).
    pub correlation: ddscope_core::limits::CorrelationCaps,
    /// The ROS 2 join's and chains' caps (`ddscope limits`, section `trace`).
    pub trace: ddscope_core::limits::TraceCaps,
    /// The stream decoder's name tables and the longest name kept (`ddscope limits`, section `stream`).
    pub stream: ddscope_core::limits::StreamCaps,
    /// An end-to-end chain (topics in order) to measure from the agents' traces; without it the chains found are listed.
    pub chain_path: Option<Vec<String>>,
    /// Also accept OTLP/gRPC (the Collector's load-balancing exporter) on this address (docs/scale-out.md).
    pub otlp_grpc: Option<SocketAddr>,
    /// An agent whose end came over OTLP is ended this much later: its last
    /// sightings travel another Collector pipeline and may still be on the way.
    pub otlp_end_grace: Duration,
    /// An agent's batch record (watermark, end) that came over OTLP takes
    /// effect once a sighting of a later batch of that agent arrived here,
    /// or at the latest this long after it arrived; zero: at once (no hold).
    /// See docs/scale-out.md, "The hold".
    pub otlp_hold: Duration,
    /// Batch records held per agent; beyond it the oldest is folded into the next (counted).
    pub otlp_hold_max: usize,
    /// Run as a front merging these shards (`http://host:port`) instead of correlating.
    pub federate: Vec<String>,
    /// `--export`: the sinks what `serve` correlates goes to (docs/export.md, "What serve exports").
    pub export: Vec<ExportSpec>,
    /// Keep the `/metrics` registry (on unless measuring what it costs).
    pub metrics: bool,
    /// Latency budgets per topic and layer (`--budget`).
    pub budgets: Vec<Budget>,
    /// Which samples get a trace with `--export otlp=…`.
    pub trace_sampling: TraceSampling,
    /// Latency label sets (topic, sender, receiver) and chain hop label sets exported; more are refused and counted.
    pub max_export_series: usize,
    /// The rows kept for `/api/timeline` (`timeline.serve_rows`).
    pub timeline: ddscope_core::timeline::TimelineConfig,
    /// Clock offset t_o per agent (Bosk et al. Eq. 9), subtracted from its timestamps and its trace's.
    pub offsets: Vec<(String, i64)>,
    /// Track every agent's clock against the first agent's from the traffic both see (offset, drift,
    /// error bar; docs/latency.md "Clocks"); off: the agents' clocks are trusted as they are.
    pub track_clocks: bool,
    /// The live incident feed: its window of sample time, caps and feed length (the budgets come
    /// from `budgets`, the grace is at least `window_ns` and a second).
    pub explain: ddscope_core::latency::live_explain::LiveExplainOptions,
}

impl ServeConfig {
    /// Loopback-style defaults: no token, 5 s window, 10 s idle.
    pub fn new(listen: SocketAddr) -> Self {
        ServeConfig {
            listen,
            token: None,
            window_ns: ddscope_core::window::Window::DEFAULT.ns(),
            idle: Duration::from_secs(10),
            limits: HttpLimits::default(),
            caps: StateCaps::default(),
            correlation: Default::default(),
            trace: Default::default(),
            stream: Default::default(),
            chain_path: None,
            otlp_grpc: None,
            otlp_end_grace: Duration::from_secs(2),
            otlp_hold: Duration::from_secs(10),
            otlp_hold_max: 256,
            federate: vec![],
            export: vec![],
            metrics: true,
            budgets: vec![],
            trace_sampling: TraceSampling::default(),
            max_export_series: 2000,
            timeline: Default::default(),
            offsets: vec![],
            track_clocks: true,
            explain: Default::default(),
        }
    }
}

/// Limits of the HTTP layer (all enforced per connection or per agent).
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Connections served at once (further ones get `503` and are closed).
    /// Lowered to what the open-file limit allows.
    pub max_connections: usize,
    /// Time for a request's headers to arrive (also: how long an idle
    /// keep-alive connection is kept).
    pub header_timeout: Duration,
    /// Time for a request's body to arrive, from when reading it starts.
    pub body_timeout: Duration,
    /// A connection that moves no byte either way for this long is closed.
    pub idle_timeout: Duration,
    /// Largest request body (an agent's batch).
    pub max_body_bytes: usize,
    /// Largest request head (request line and headers).
    pub max_header_bytes: usize,
    /// Most header fields in one request.
    pub max_headers: usize,
    /// Batches per second one agent may send, sustained…
    pub agent_rate: f64,
    /// …and in a burst (after an outage the agent sends what it queued).
    pub agent_burst: f64,
    /// Bytes of batch bodies being received at once (each request reserves
    /// its `Content-Length`, or `max_body_bytes` when chunked); a request that
    /// finds no room within `ingest_wait` gets `503`.
    pub ingest_buffer_bytes: usize,
    /// Batches decoded and correlated at the same time (on the blocking pool).
    pub max_concurrent_ingest: usize,
    pub ingest_wait: Duration,
    /// `/api/state` is built at most this often; requests in between get the last answer.
    pub state_cache: Duration,
    /// Heap bytes that requests being decoded may hold at once: inflated
    /// bodies and what they decode to, estimated from the body before
    /// decoding (`crate::server::prescan`). A request estimated over it is refused
    /// (`413`, gRPC `RESOURCE_EXHAUSTED`); one that finds no room within
    /// `ingest_wait` is answered busy (`503`, `UNAVAILABLE`).
    pub decode_budget_bytes: usize,
    /// Spans (or log records) in one OTLP request.
    pub otlp_max_items: usize,
    /// Attributes (and entries of attribute arrays and lists) in one OTLP request.
    pub otlp_max_attributes: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_connections: 4096,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_body_bytes: 16 << 20,
            max_header_bytes: 16 << 10,
            max_headers: 64,
            agent_rate: 20.0,
            agent_burst: 200.0,
            ingest_buffer_bytes: 256 << 20,
            max_concurrent_ingest: 4,
            ingest_wait: Duration::from_secs(2),
            state_cache: Duration::from_millis(250),
            decode_budget_bytes: 128 << 20,
            otlp_max_items: 100_000,
            otlp_max_attributes: 2_000_000,
        }
    }
}
