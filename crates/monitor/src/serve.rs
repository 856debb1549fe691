//! The central view: agents POST their batches here; the same correlator as
//! `ddscope latency` joins them; a web dashboard (assets built into the
//! binary) shows per-topic latency, sizes, bandwidth, CPU, loss and repairs.

use crate::protocol::{self, Batch, MetricSample, INGEST_PATH};
use ddscope_core::latency::app::AppTruth;
use ddscope_core::latency::{Correlator, CorrelatorConfig, Level, LatencyRow};
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SERIES_POINTS: usize = 2000;
const HISTORY_POINTS: usize = 600;
const MAX_BODY: usize = 64 << 20;

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    pub token: Option<String>,
    pub window_ns: i64,
    /// An agent silent this long no longer holds back judgement.
    pub idle: Duration,
}

#[derive(Default)]
struct SystemHistory {
    last_cpu: Option<(f64, f64, f64)>,
    last_net: BTreeMap<String, (f64, f64, f64)>,
    cpu: VecDeque<(f64, f64)>,
    mem: VecDeque<(f64, f64)>,
    net: BTreeMap<String, VecDeque<(f64, f64, f64)>>,
}

fn push<T>(q: &mut VecDeque<T>, v: T, cap: usize) {
    if q.len() >= cap {
        q.pop_front();
    }
    q.push_back(v);
}

impl SystemHistory {
    /// Turns node_exporter counters into CPU utilisation and per-interface Mbit/s.
    fn add(&mut self, t: f64, samples: &[MetricSample]) {
        let label = |s: &MetricSample, k: &str| s.labels.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let (mut idle, mut total) = (0.0, 0.0);
        let mut mem_total = None;
        let mut mem_avail = None;
        let mut net: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for s in samples {
            match s.name.as_str() {
                "node_cpu_seconds_total" => {
                    total += s.value;
                    if matches!(label(s, "mode").as_deref(), Some("idle") | Some("iowait")) {
                        idle += s.value;
                    }
                }
                "node_memory_MemTotal_bytes" => mem_total = Some(s.value),
                "node_memory_MemAvailable_bytes" => mem_avail = Some(s.value),
                "node_network_receive_bytes_total" => {
                    net.entry(label(s, "device").unwrap_or_default()).or_default().0 = s.value;
                }
                "node_network_transmit_bytes_total" => {
                    net.entry(label(s, "device").unwrap_or_default()).or_default().1 = s.value;
                }
                _ => {}
            }
        }
        if total > 0.0 {
            if let Some((pt, pi, ptot)) = self.last_cpu {
                let dt = total - ptot;
                if dt > 0.0 && t > pt {
                    push(&mut self.cpu, (t, 100.0 * (1.0 - (idle - pi) / dt)), HISTORY_POINTS);
                }
            }
            self.last_cpu = Some((t, idle, total));
        }
        if let (Some(tot), Some(av)) = (mem_total, mem_avail) {
            push(&mut self.mem, (t, (tot - av) / 1e6), HISTORY_POINTS);
        }
        for (dev, (rx, tx)) in net {
            if let Some((pt, prx, ptx)) = self.last_net.get(&dev).copied() {
                if t > pt {
                    let rate = |a: f64, b: f64| ((a - b).max(0.0) * 8.0 / (t - pt)) / 1e6;
                    push(self.net.entry(dev.clone()).or_default(), (t, rate(rx, prx), rate(tx, ptx)), HISTORY_POINTS);
                }
            }
            self.last_net.insert(dev, (t, rx, tx));
        }
    }
}

struct Agent {
    idx: usize,
    last_seen: Instant,
    last_seq: u64,
    batches: u64,
    items: u64,
    seq_gaps: u64,
    dropped_items: u64,
    topics: Value,
    counters: Value,
    system: SystemHistory,
    ended: bool,
}

#[derive(Default)]
struct FlowSeries {
    message: VecDeque<(f64, f64)>,
    submessage: VecDeque<(f64, f64)>,
    size: VecDeque<(f64, f64)>,
}

pub struct Central {
    cfg: ServeConfig,
    corr: Correlator,
    decoder: protocol::Decoder,
    agents: BTreeMap<String, Agent>,
    series: BTreeMap<(String, String, String), FlowSeries>,
    rejected: u64,
    bad_items: u64,
    started: Instant,
}

fn on_row(series: &mut BTreeMap<(String, String, String), FlowSeries>, r: LatencyRow) {
    let topic = r.topic.as_ref().map(|t| t.topic_name.clone()).unwrap_or_else(|| format!("writer {}", r.writer_id));
    let s = series.entry((topic, r.sender.to_string(), r.receiver.to_string())).or_default();
    let t = r.sender_first_ts_ns as f64 / 1e9;
    if let Some(l) = r.latency_ns {
        match r.level {
            Level::Message => {
                push(&mut s.message, (t, l as f64 / 1e6), SERIES_POINTS);
                if let Some(sz) = r.sample_size {
                    push(&mut s.size, (t, sz as f64), SERIES_POINTS);
                }
            }
            Level::Submessage => push(&mut s.submessage, (t, l as f64 / 1e6), SERIES_POINTS),
        }
    }
}

impl Central {
    pub fn new(cfg: ServeConfig) -> Self {
        let corr = Correlator::new(
            CorrelatorConfig {
                captures: vec![],
                offsets_ns: vec![],
                window_ns: cfg.window_ns,
                period_ns: None,
                message_rows: true,
                submessage_rows: true,
                ..Default::default()
            },
            Arc::new(AppTruth::default()),
        );
        Central {
            cfg,
            corr,
            decoder: protocol::Decoder::default(),
            agents: BTreeMap::new(),
            series: BTreeMap::new(),
            rejected: 0,
            bad_items: 0,
            started: Instant::now(),
        }
    }

    /// Takes one batch from an agent.
    pub fn ingest(&mut self, b: Batch) -> Result<(), String> {
        if b.agent.is_empty() || b.agent.len() > 64 {
            return Err("agent name must be 1 to 64 characters".into());
        }
        let idx = match self.agents.get(&b.agent) {
            Some(a) => a.idx,
            None => {
                if self.agents.len() >= 64 {
                    return Err("at most 64 agents".into());
                }
                let idx = self.corr.add_capture(&b.agent, 0);
                self.agents.insert(
                    b.agent.clone(),
                    Agent {
                        idx,
                        last_seen: Instant::now(),
                        last_seq: 0,
                        batches: 0,
                        items: 0,
                        seq_gaps: 0,
                        dropped_items: 0,
                        topics: Value::Null,
                        counters: Value::Null,
                        system: SystemHistory::default(),
                        ended: false,
                    },
                );
                idx
            }
        };
        let series = &mut self.series;
        let a = self.agents.get_mut(&b.agent).expect("inserted");
        a.last_seen = Instant::now();
        if b.seq > a.last_seq + 1 && a.last_seq > 0 {
            a.seq_gaps += b.seq - a.last_seq - 1;
        }
        a.last_seq = a.last_seq.max(b.seq);
        a.batches += 1;
        a.items += b.items.len() as u64;
        a.dropped_items = b.dropped_items;
        if let Some(t) = b.topics {
            a.topics = t;
        }
        if let Some(c) = b.counters {
            a.counters = c;
        }
        if !b.system.is_empty() {
            a.system.add(b.sent_ns as f64 / 1e9, &b.system);
        }
        let was_ended = a.ended;
        a.ended = b.last;
        let name: Arc<str> = Arc::from(b.agent.as_str());
        if was_ended && !b.last {
            self.corr.set_ended(idx, false, &mut |r| on_row(series, r));
        }
        for w in b.items {
            match self.decoder.item(&name, w) {
                Ok(item) => self.corr.push(idx, item, &mut |r| on_row(series, r)),
                Err(_) => self.bad_items += 1,
            }
        }
        if b.last {
            self.corr.set_ended(idx, true, &mut |r| on_row(series, r));
        }
        Ok(())
    }

    /// Agents silent for too long stop holding back judgement.
    pub fn tick(&mut self) {
        let idle = self.cfg.idle;
        let series = &mut self.series;
        for a in self.agents.values_mut() {
            if !a.ended && a.last_seen.elapsed() > idle {
                a.ended = true;
                self.corr.set_ended(a.idx, true, &mut |r| on_row(series, r));
            }
        }
    }

    /// Everything the dashboard shows, as one JSON document.
    pub fn state(&self) -> Value {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        let flows: Vec<Value> = self
            .corr
            .summaries()
            .into_iter()
            .map(|f| {
                let key = (f.topic.clone(), f.sender.clone(), f.receiver.clone());
                let s = self.series.get(&key);
                let pts = |q: Option<&VecDeque<(f64, f64)>>| q.map(|q| q.iter().map(|(t, v)| json!([t, v])).collect::<Vec<_>>()).unwrap_or_default();
                json!({
                    "summary": f,
                    "message": pts(s.map(|s| &s.message)),
                    "submessage": pts(s.map(|s| &s.submessage)),
                    "size": pts(s.map(|s| &s.size)),
                })
            })
            .collect();
        let agents: Vec<Value> = self
            .agents
            .iter()
            .map(|(n, a)| {
                json!({
                    "name": n,
                    "last_seen_s": a.last_seen.elapsed().as_secs_f64(),
                    "running": !a.ended,
                    "batches": a.batches,
                    "items": a.items,
                    "lost_batches": a.seq_gaps,
                    "dropped_items": a.dropped_items,
                    "counters": a.counters,
                    "topics": a.topics,
                    "cpu": a.system.cpu.iter().map(|(t, v)| json!([t, v])).collect::<Vec<_>>(),
                    "memory_mb": a.system.mem.iter().map(|(t, v)| json!([t, v])).collect::<Vec<_>>(),
                    "network": a.system.net.iter().map(|(d, q)| json!({
                        "device": d,
                        "rx": q.iter().map(|(t, rx, _)| json!([t, rx])).collect::<Vec<_>>(),
                        "tx": q.iter().map(|(t, _, tx)| json!([t, tx])).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let (ps, pf) = self.corr.pending();
        json!({
            "now": now,
            "uptime_s": self.started.elapsed().as_secs_f64(),
            "window_s": self.cfg.window_ns as f64 / 1e9,
            "agents": agents,
            "flows": flows,
            "writers": self.corr.writer_roles(),
            "correlation": self.corr.stats,
            "pending": {"samples": ps, "submessages": pf},
            "warnings": self.corr.warnings(),
            "rejected_batches": self.rejected,
            "bad_items": self.bad_items,
        })
    }
}

const DASHBOARD_HTML: &str = include_str!("../assets/dashboard.html");
const DASHBOARD_JS: &str = include_str!("../assets/dashboard.js");
const CHARTS_JS: &str = include_str!("../../cli/assets/charts.js");

fn authorized(req: &tiny_http::Request, token: &Option<String>) -> bool {
    let Some(t) = token else { return true };
    let header_ok = req
        .headers()
        .iter()
        .any(|h| h.field.equiv("Authorization") && h.value.as_str() == format!("Bearer {t}"));
    let query_ok = req.url().split_once('?').is_some_and(|(_, q)| q.split('&').any(|kv| kv == format!("token={t}")));
    header_ok || query_ok
}

fn respond(req: tiny_http::Request, code: u16, ctype: &str, body: impl Into<Vec<u8>>) {
    let h = tiny_http::Header::from_bytes("Content-Type", ctype).expect("valid header");
    let _ = req.respond(tiny_http::Response::from_data(body.into()).with_status_code(code).with_header(h));
}

/// Serves until the process ends. Returns the bound address on start via `on_ready`.
pub fn serve(cfg: ServeConfig, on_ready: impl FnOnce(SocketAddr)) -> anyhow::Result<()> {
    let server = tiny_http::Server::http(cfg.listen).map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", cfg.listen))?;
    let addr = server.server_addr().to_ip().ok_or_else(|| anyhow::anyhow!("not an IP listener"))?;
    let central = Arc::new(Mutex::new(Central::new(cfg.clone())));
    {
        let c = central.clone();
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(500));
            c.lock().expect("central lock").tick();
        });
    }
    on_ready(addr);
    let server = Arc::new(server);
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (server, central, token) = (server.clone(), central.clone(), cfg.token.clone());
            std::thread::spawn(move || {
                for mut req in server.incoming_requests() {
                    let path = req.url().split('?').next().unwrap_or("/").to_string();
                    // The page and its scripts hold no data; everything under /api/ needs the token.
                    if path.starts_with("/api/") && !authorized(&req, &token) {
                        respond(req, 401, "text/plain", "missing or wrong token\n");
                        continue;
                    }
                    match (req.method(), path.as_str()) {
                        (tiny_http::Method::Post, INGEST_PATH) => {
                            let mut body = Vec::new();
                            let r = std::io::Read::read_to_end(&mut std::io::Read::take(req.as_reader(), MAX_BODY as u64 + 1), &mut body);
                            if r.is_err() || body.len() > MAX_BODY {
                                central.lock().expect("central lock").rejected += 1;
                                respond(req, 413, "text/plain", "batch too large or unreadable\n");
                                continue;
                            }
                            match serde_json::from_slice::<Batch>(&body) {
                                Ok(b) => match central.lock().expect("central lock").ingest(b) {
                                    Ok(()) => respond(req, 204, "text/plain", Vec::new()),
                                    Err(e) => respond(req, 400, "text/plain", format!("{e}\n")),
                                },
                                Err(e) => {
                                    central.lock().expect("central lock").rejected += 1;
                                    respond(req, 400, "text/plain", format!("bad batch: {e}\n"));
                                }
                            }
                        }
                        (tiny_http::Method::Get, "/api/state") => {
                            let s = central.lock().expect("central lock").state();
                            respond(req, 200, "application/json", serde_json::to_vec(&s).unwrap_or_default());
                        }
                        (tiny_http::Method::Get, "/") | (tiny_http::Method::Get, "/index.html") => {
                            respond(req, 200, "text/html; charset=utf-8", DASHBOARD_HTML)
                        }
                        (tiny_http::Method::Get, "/assets/charts.js") => respond(req, 200, "text/javascript", CHARTS_JS),
                        (tiny_http::Method::Get, "/assets/dashboard.js") => respond(req, 200, "text/javascript", DASHBOARD_JS),
                        (tiny_http::Method::Get, "/healthz") => respond(req, 200, "text/plain", "ok\n"),
                        _ => respond(req, 404, "text/plain", "not found\n"),
                    }
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
    Ok(())
}
