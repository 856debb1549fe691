//! Shards and the merged view (docs/scale-out.md).
//!
//! A `serve` shard exposes its per-flow statistics in a mergeable form at
//! [`SUMMARIES_PATH`]: counters, and every latency distribution as its HDR
//! histogram buckets with the Welford moments ([`DistParts`]). A front
//! (`serve --federate SHARD_URL…`) polls every shard, adds the counters,
//! merges the histograms bucket by bucket and serves the merged view with
//! the same `/api/state` document (and so the same dashboard) as one `serve`.
//!
//! Exact: counts, delivered, lost, incomplete, retransmissions, and per
//! layer count, min, max and every percentile (the same buckets added up);
//! mean and standard deviation are merged with Chan's formula (floating
//! point: equal to a single server's to ~1e-12 relative). Not
//! decomposable by shard and so not merged: jitter (consecutive samples of a
//! writer land on different shards) and the inferred publication period
//! with in-time/late (inferred from consecutive sequence numbers); the
//! merged view leaves them out and says so in `federation.not_merged`.

use ddscope_core::latency::stats::{Dist, DistParts};
use ddscope_core::latency::{Correlator, FlowSummary};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const SUMMARIES_PATH: &str = "/api/v1/summaries";
/// Lost sequence numbers kept per merged flow (as a single server keeps).
const LOST_EXAMPLES: usize = 20;
/// Largest shard answer read.
const MAX_ANSWER: u64 = 64 << 20;
/// Shards a front polls.
pub const MAX_SHARDS: usize = 64;

/// One flow's statistics at one shard, mergeable.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FlowParts {
    pub topic: String,
    /// The topic's DDS domain (null when discovery did not tell); flows of different domains stay apart.
    #[serde(default)]
    pub domain: Option<u32>,
    #[serde(default)]
    pub topic_raw: Option<(String, String)>,
    pub sender: String,
    pub receiver: String,
    pub samples: u64,
    pub delivered: u64,
    pub lost: u64,
    pub incomplete: u64,
    pub retransmitted_samples: u64,
    pub retransmitted_frags: u64,
    pub retransmitted_bytes: u64,
    pub layers: Vec<(String, DistParts)>,
    pub repaired: DistParts,
    pub clean: DistParts,
    pub lost_examples: Vec<i64>,
    pub sender_nodes: Vec<String>,
    pub receiver_nodes: Vec<String>,
}

/// Every flow of a correlator, mergeable.
pub fn flow_parts(corr: &Correlator) -> Vec<FlowParts> {
    let names = corr.capture_names();
    corr.flows()
        .into_iter()
        .map(|((topic, domain, s, r), f)| FlowParts {
            topic: topic.clone(),
            domain: *domain,
            topic_raw: f.names.as_ref().map(|n| (n.topic_raw.clone(), n.type_raw.clone())),
            sender: names.get(*s).map(|n| n.to_string()).unwrap_or_default(),
            receiver: names.get(*r).map(|n| n.to_string()).unwrap_or_default(),
            samples: f.samples,
            delivered: f.delivered,
            lost: f.lost,
            incomplete: f.incomplete,
            retransmitted_samples: f.retransmitted_samples,
            retransmitted_frags: f.retransmitted_frags,
            retransmitted_bytes: f.retransmitted_bytes,
            layers: f.layers.iter().filter(|(_, d)| d.count() > 0).map(|(l, d)| (l.as_str().to_string(), d.to_parts())).collect(),
            repaired: f.repaired.to_parts(),
            clean: f.clean.to_parts(),
            lost_examples: f.lost_examples.clone(),
            sender_nodes: f.sender_nodes.iter().map(|n| n.to_string()).collect(),
            receiver_nodes: f.receiver_nodes.iter().map(|n| n.to_string()).collect(),
        })
        .collect()
}

#[derive(Default)]
struct Acc {
    topic_raw: Option<(String, String)>,
    samples: u64,
    delivered: u64,
    lost: u64,
    incomplete: u64,
    retransmitted_samples: u64,
    retransmitted_frags: u64,
    retransmitted_bytes: u64,
    layers: BTreeMap<String, Dist>,
    repaired: Dist,
    clean: Dist,
    lost_examples: Vec<i64>,
    sender_nodes: Vec<String>,
    receiver_nodes: Vec<String>,
}

fn add_dist(to: &mut Dist, p: &DistParts, bad: &mut u64) {
    match Dist::from_parts(p) {
        Ok(d) => to.merge(&d),
        Err(_) => *bad += 1,
    }
}

/// Merges the flows of all shards: per (topic, domain, sender, receiver), counters
/// added, histograms merged. Returns the summaries in topic order and the
/// number of distributions refused as inconsistent.
pub fn merge_flows<'a>(shards: impl IntoIterator<Item = &'a FlowParts>) -> (Vec<FlowSummary>, u64) {
    let mut m: BTreeMap<(String, Option<u32>, String, String), Acc> = BTreeMap::new();
    let mut bad = 0u64;
    for f in shards {
        let a = m.entry((f.topic.clone(), f.domain, f.sender.clone(), f.receiver.clone())).or_default();
        if a.topic_raw.is_none() {
            a.topic_raw = f.topic_raw.clone();
        }
        a.samples += f.samples;
        a.delivered += f.delivered;
        a.lost += f.lost;
        a.incomplete += f.incomplete;
        a.retransmitted_samples += f.retransmitted_samples;
        a.retransmitted_frags += f.retransmitted_frags;
        a.retransmitted_bytes += f.retransmitted_bytes;
        for (l, p) in &f.layers {
            add_dist(a.layers.entry(l.clone()).or_default(), p, &mut bad);
        }
        add_dist(&mut a.repaired, &f.repaired, &mut bad);
        add_dist(&mut a.clean, &f.clean, &mut bad);
        a.lost_examples.extend(&f.lost_examples);
        for (from, to) in [(&f.sender_nodes, &mut a.sender_nodes), (&f.receiver_nodes, &mut a.receiver_nodes)] {
            for n in from {
                if !to.contains(n) && to.len() < ddscope_core::latency::MAX_FLOW_NODES {
                    to.push(n.clone());
                }
            }
        }
    }
    let out = m
        .into_iter()
        .map(|((topic, domain, sender, receiver), mut a)| {
            a.lost_examples.sort_unstable();
            a.lost_examples.dedup();
            a.lost_examples.truncate(LOST_EXAMPLES);
            FlowSummary {
                topic,
                domain,
                names: a.topic_raw.as_ref().map(|(t, ty)| Arc::new(ddscope_core::discovery::TopicNames::new(t, ty).in_domain(domain))),
                sender,
                receiver,
                samples: a.samples,
                delivered: a.delivered,
                lost: a.lost,
                incomplete: a.incomplete,
                retransmitted_samples: a.retransmitted_samples,
                retransmitted_frags: a.retransmitted_frags,
                retransmitted_bytes: a.retransmitted_bytes,
                period_ms: None,
                in_time: 0,
                late: 0,
                layers: a.layers.iter().filter(|(_, d)| d.count() > 0).map(|(l, d)| (l.clone(), d.summary())).collect(),
                jitter: Default::default(),
                jitter_abs: Default::default(),
                repaired: a.repaired.summary(),
                clean: a.clean.summary(),
                lost_examples: a.lost_examples,
                sender_nodes: a.sender_nodes,
                receiver_nodes: a.receiver_nodes,
            }
        })
        .collect();
    (out, bad)
}

/// Adds JSON documents field by field: numbers summed, objects recursively; other values from the first document.
pub fn sum_json(acc: &mut Value, v: &Value) {
    match (acc, v) {
        (Value::Number(a), Value::Number(b)) => {
            if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
                *a = (x.saturating_add(y)).into();
            } else if let (Some(x), Some(y)) = (a.as_f64(), b.as_f64()) {
                if let Some(n) = serde_json::Number::from_f64(x + y) {
                    *a = n;
                }
            }
        }
        (Value::Object(a), Value::Object(b)) => {
            for (k, bv) in b {
                match a.get_mut(k) {
                    Some(av) => sum_json(av, bv),
                    None => {
                        a.insert(k.clone(), bv.clone());
                    }
                }
            }
        }
        (a @ Value::Null, b) => *a = b.clone(),
        _ => {}
    }
}

/// What the front knows of one shard.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ShardStatus {
    pub url: String,
    pub ok: bool,
    pub polls: u64,
    pub failures: u64,
    pub last_error: Option<String>,
    pub age_s: Option<f64>,
}

struct Shard {
    status: ShardStatus,
    at: Option<Instant>,
    doc: Option<Value>,
}

/// The front's view of its shards, refreshed by a poller thread.
pub struct Federation {
    shards: Mutex<Vec<Shard>>,
    started: Instant,
}

impl Federation {
    /// Starts polling `urls` (each `http://host:port` of a shard) every `every`.
    pub fn start(urls: Vec<String>, token: Option<String>, every: Duration) -> Result<Arc<Federation>, String> {
        if urls.is_empty() || urls.len() > MAX_SHARDS {
            return Err(format!("1 to {MAX_SHARDS} shards (got {})", urls.len()));
        }
        for u in &urls {
            if !u.starts_with("http://") {
                return Err(format!("shard {u:?}: only http:// URLs"));
            }
        }
        let f = Arc::new(Federation {
            shards: Mutex::new(
                urls.iter()
                    .map(|u| Shard { status: ShardStatus { url: u.trim_end_matches('/').to_string(), ..Default::default() }, at: None, doc: None })
                    .collect(),
            ),
            started: Instant::now(),
        });
        let me = f.clone();
        std::thread::Builder::new()
            .name("federate".into())
            .spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .timeout_global(Some(every.max(Duration::from_secs(2))))
                    .http_status_as_error(false)
                    .build()
                    .into();
                loop {
                    for (i, u) in urls.iter().enumerate() {
                        let url = format!("{}{SUMMARIES_PATH}", u.trim_end_matches('/'));
                        let got = fetch(&agent, &url, token.as_deref());
                        me.put(i, got);
                    }
                    std::thread::sleep(every);
                }
            })
            .map_err(|e| format!("cannot start the poller: {e}"))?;
        Ok(f)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Shard>> {
        self.shards.lock().unwrap_or_else(|p| {
            self.shards.clear_poison();
            p.into_inner()
        })
    }

    fn put(&self, i: usize, got: Result<Value, String>) {
        let mut s = self.lock();
        let Some(sh) = s.get_mut(i) else { return };
        sh.status.polls += 1;
        match got {
            Ok(v) => {
                sh.status.ok = true;
                sh.status.last_error = None;
                sh.doc = Some(v);
                sh.at = Some(Instant::now());
            }
            Err(e) => {
                sh.status.ok = false;
                sh.status.failures += 1;
                sh.status.last_error = Some(e);
            }
        }
    }

    /// The merged `/api/state` document (same shape as one server's).
    pub fn state(&self, server: Value, max_flows: usize) -> Value {
        let shards = self.lock();
        let mut parts: Vec<FlowParts> = vec![];
        let mut bad_docs = 0u64;
        let mut correlation = Value::Null;
        let mut pending = Value::Null;
        let mut counters = Value::Null;
        let mut hold = crate::otlp::HoldStats::default();
        let mut held_now = 0u64;
        let mut agents: BTreeMap<String, Value> = BTreeMap::new();
        let mut warnings: Vec<String> = vec![];
        let mut window = Value::Null;
        let mut status = vec![];
        for sh in shards.iter() {
            let mut st = sh.status.clone();
            st.age_s = sh.at.map(|t| t.elapsed().as_secs_f64());
            status.push(st);
            let Some(d) = &sh.doc else { continue };
            match serde_json::from_value::<Vec<FlowParts>>(d["flows"].clone()) {
                Ok(f) => parts.extend(f),
                Err(_) => bad_docs += 1,
            }
            sum_json(&mut correlation, &d["correlation"]);
            sum_json(&mut pending, &d["pending"]);
            sum_json(&mut counters, &d["counters"]);
            hold.add(&crate::otlp::HoldStats::from_json(&d["otlp_hold"]["totals"]));
            held_now += d["otlp_hold"]["held_now"].as_u64().unwrap_or(0);
            if window.is_null() {
                window = d["window_s"].clone();
            }
            for w in d["warnings"].as_array().into_iter().flatten() {
                if let Some(w) = w.as_str() {
                    let w = format!("{}: {w}", sh.status.url);
                    if warnings.len() < 50 && !warnings.contains(&w) {
                        warnings.push(w);
                    }
                }
            }
            // Every shard knows every agent (its batches are broadcast): keep the freshest view.
            for a in d["agents"].as_array().into_iter().flatten() {
                let Some(n) = a["name"].as_str() else { continue };
                let newer = agents.get(n).is_none_or(|o| a["batches"].as_u64() > o["batches"].as_u64());
                if newer {
                    let mut a = a.clone();
                    if let Some(o) = agents.get(n) {
                        a["items"] = json!(a["items"].as_u64().unwrap_or(0) + o["items"].as_u64().unwrap_or(0));
                    }
                    agents.insert(n.to_string(), a);
                } else if let Some(o) = agents.get_mut(n) {
                    o["items"] = json!(o["items"].as_u64().unwrap_or(0) + a["items"].as_u64().unwrap_or(0));
                }
            }
        }
        drop(shards);
        let (mut summaries, bad_dists) = merge_flows(parts.iter());
        let flows_total = summaries.len();
        summaries.sort_by(|a, b| b.samples.cmp(&a.samples));
        summaries.truncate(max_flows);
        summaries.sort_by(|a, b| (&a.topic, &a.sender, &a.receiver).cmp(&(&b.topic, &b.sender, &b.receiver)));
        let flows: Vec<Value> = summaries.iter().map(|f| json!({"summary": f, "message": [], "submessage": [], "size": []})).collect();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        json!({
            "now": now,
            "uptime_s": self.started.elapsed().as_secs_f64(),
            "window_s": window,
            "agents": agents.into_values().collect::<Vec<_>>(),
            "flows": flows,
            "writers": [],
            "correlation": correlation,
            "pending": pending,
            "warnings": warnings,
            "ros2": {"join": null, "chains": null},
            "rejected_batches": counters["rejected_batches"],
            "bad_items": counters["bad_items"],
            "otlp_hold": {"held_now": held_now, "totals": hold.to_json()},
            "limits": {"flows_total": flows_total, "flows_shown": flows.len()},
            "server": server,
            "federation": {
                "shards": status,
                "shard_counters": counters,
                "bad_documents": bad_docs,
                "bad_distributions": bad_dists,
                "not_merged": ["jitter", "period_ms", "in_time", "late", "latency series over time", "writer roles", "ROS 2 layers"],
            },
        })
    }
}

fn fetch(agent: &ureq::Agent, url: &str, token: Option<&str>) -> Result<Value, String> {
    let mut req = agent.get(url);
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    let mut resp = req.call().map_err(|e| format!("GET {url}: {e}"))?;
    let status = resp.status().as_u16();
    let body = resp.body_mut().with_config().limit(MAX_ANSWER).read_to_vec().map_err(|e| format!("GET {url}: {e}"))?;
    if status != 200 {
        return Err(format!("GET {url}: HTTP {status}"));
    }
    serde_json::from_slice(&body).map_err(|e| format!("GET {url}: bad JSON: {e}"))
}
