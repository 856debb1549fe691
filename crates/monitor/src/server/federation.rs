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
use ddscope_core::latency::{Correlator, FlowSummary, Layer};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const SUMMARIES_PATH: &str = "/api/v1/summaries";
/// Lost sequence numbers kept per merged flow (as a single server keeps).
const LOST_EXAMPLES: usize = 20;
/// Largest shard answer read.
const MAX_ANSWER: u64 = 32 << 20;
/// Memory all shards' decoded answers may hold (each shard gets an equal share).
const MEMORY_BUDGET: u64 = 512 << 20;
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
    /// Per layer, named as `Layer::as_str` spells it: a shard's answer is read
    /// whatever it holds, and a name this build does not know is refused when
    /// merged (counted with the bad distributions).
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
    layers: BTreeMap<Layer, Dist>,
    repaired: Dist,
    clean: Dist,
    lost_examples: Vec<i64>,
    sender_nodes: Vec<String>,
    receiver_nodes: Vec<String>,
}

/// What merging found wrong in the shards' numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeProblems {
    /// Distributions refused as inconsistent (their counts do not add up).
    pub bad_distributions: u64,
    /// Sums that would pass 2^64 − 1: saturated there (counters) or not merged (distributions).
    pub saturated: u64,
}

/// `a += b`, saturating at u64::MAX (counted): shards are trusted with nothing, not even adding up.
fn add_sat(a: &mut u64, b: u64, saturated: &mut u64) {
    match a.checked_add(b) {
        Some(v) => *a = v,
        None => {
            *a = u64::MAX;
            *saturated += 1;
        }
    }
}

fn add_dist(to: &mut Dist, p: &DistParts, problems: &mut MergeProblems) {
    match Dist::from_parts(p) {
        // Counts that would overflow are not merged (the distribution's counts must add up).
        Ok(d) if to.count().checked_add(d.count()).is_none() => problems.saturated += 1,
        Ok(d) => to.merge(&d),
        Err(_) => problems.bad_distributions += 1,
    }
}

/// Merges the flows of all shards: per (topic, domain, sender, receiver), counters
/// added (saturating, counted), histograms merged. Returns the summaries in
/// topic order and what was wrong in the shards' numbers.
pub fn merge_flows<'a>(shards: impl IntoIterator<Item = &'a FlowParts>) -> (Vec<FlowSummary>, MergeProblems) {
    let mut m: BTreeMap<(String, Option<u32>, String, String), Acc> = BTreeMap::new();
    let mut pr = MergeProblems::default();
    for f in shards {
        let a = m.entry((f.topic.clone(), f.domain, f.sender.clone(), f.receiver.clone())).or_default();
        if a.topic_raw.is_none() {
            a.topic_raw = f.topic_raw.clone();
        }
        let sat = &mut pr.saturated;
        add_sat(&mut a.samples, f.samples, sat);
        add_sat(&mut a.delivered, f.delivered, sat);
        add_sat(&mut a.lost, f.lost, sat);
        add_sat(&mut a.incomplete, f.incomplete, sat);
        add_sat(&mut a.retransmitted_samples, f.retransmitted_samples, sat);
        add_sat(&mut a.retransmitted_frags, f.retransmitted_frags, sat);
        add_sat(&mut a.retransmitted_bytes, f.retransmitted_bytes, sat);
        for (l, p) in &f.layers {
            // A layer this build does not know is a distribution it cannot merge.
            match Layer::parse(l) {
                Some(l) => add_dist(a.layers.entry(l).or_default(), p, &mut pr),
                None => pr.bad_distributions += 1,
            }
        }
        add_dist(&mut a.repaired, &f.repaired, &mut pr);
        add_dist(&mut a.clean, &f.clean, &mut pr);
        a.lost_examples.extend(f.lost_examples.iter().take(LOST_EXAMPLES));
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
                layers: {
                    // in the order of their names, as shards name them
                    let mut v: Vec<_> = a.layers.iter().filter(|(_, d)| d.count() > 0).map(|(l, d)| (*l, d.summary())).collect();
                    v.sort_by_key(|(l, _)| l.as_str());
                    v
                },
                jitter: Default::default(),
                jitter_abs: Default::default(),
                repaired: a.repaired.summary(),
                clean: a.clean.summary(),
                lost_examples: a.lost_examples,
                sender_nodes: a.sender_nodes,
                receiver_nodes: a.receiver_nodes,
                // Live captures' clocks are not estimated (docs/latency.md, "Clocks").
                sender_from: "time order",
                clock: "unchecked",
                clock_uncertainty_ns: None,
            }
        })
        .collect();
    (out, pr)
}

/// Adds JSON documents field by field: numbers summed (whole numbers
/// saturating at 2^64 − 1, each saturation counted in `saturated`), objects
/// recursively; other values from the first document.
pub fn sum_json(acc: &mut Value, v: &Value, saturated: &mut u64) {
    match (acc, v) {
        (Value::Number(a), Value::Number(b)) => {
            if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
                let mut sum = x;
                add_sat(&mut sum, y, saturated);
                *a = sum.into();
            } else if let (Some(x), Some(y)) = (a.as_f64(), b.as_f64()) {
                if let Some(n) = serde_json::Number::from_f64(x + y) {
                    *a = n;
                }
            }
        }
        (Value::Object(a), Value::Object(b)) => {
            for (k, bv) in b {
                match a.get_mut(k) {
                    Some(av) => sum_json(av, bv, saturated),
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
    doc: Option<ShardDoc>,
}

/// What the front keeps of a shard's answer: typed, so that no shard's
/// numbers or sizes are taken on trust and nothing is parsed again per
/// `/api/state` (the fields the merged view does not use are not kept).
#[derive(Debug, Default, Deserialize)]
struct ShardDoc {
    #[serde(default)]
    flows: Vec<FlowParts>,
    #[serde(default)]
    correlation: Value,
    #[serde(default)]
    pending: Value,
    #[serde(default)]
    counters: Value,
    #[serde(default)]
    otlp_hold: Value,
    #[serde(default)]
    window_s: Value,
    #[serde(default)]
    warnings: Vec<Value>,
    #[serde(default)]
    agents: Vec<Value>,
}

/// Caps of what the front takes from its shards.
#[derive(Debug, Clone, Copy)]
pub struct FederationCaps {
    /// Largest shard answer read (bytes on the wire).
    pub max_answer_bytes: u64,
    /// Memory all shards' decoded answers may hold; each shard gets an equal
    /// share, and an answer estimated (before parsing) over its share is refused.
    pub memory_bytes: u64,
}

impl Default for FederationCaps {
    fn default() -> Self {
        FederationCaps { max_answer_bytes: MAX_ANSWER, memory_bytes: MEMORY_BUDGET }
    }
}

/// The front's view of its shards, refreshed by a poller thread.
pub struct Federation {
    shards: Mutex<Vec<Shard>>,
    started: Instant,
}

impl Federation {
    /// Starts polling `urls` (each `http://host:port` of a shard) every `every`.
    pub fn start(urls: Vec<String>, token: Option<String>, every: Duration) -> Result<Arc<Federation>, String> {
        Federation::start_with(urls, token, every, FederationCaps::default())
    }

    /// [`start`](Self::start) with other caps.
    pub fn start_with(urls: Vec<String>, token: Option<String>, every: Duration, caps: FederationCaps) -> Result<Arc<Federation>, String> {
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
                // A redirect is never followed: the token goes only to the shards named on the command line.
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .timeout_global(Some(every.max(Duration::from_secs(2))))
                    .http_status_as_error(false)
                    .max_redirects(0)
                    .build()
                    .into();
                let share = caps.memory_bytes / urls.len().max(1) as u64;
                loop {
                    for (i, u) in urls.iter().enumerate() {
                        let url = format!("{}{SUMMARIES_PATH}", u.trim_end_matches('/'));
                        let got = fetch(&agent, &url, token.as_deref(), caps.max_answer_bytes, share);
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

    fn put(&self, i: usize, got: Result<ShardDoc, String>) {
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
                // A refused answer (too large, not JSON, a redirect) leaves nothing of it; the last good one stays.
            }
        }
    }

    /// The merged `/api/state` document (same shape as one server's).
    pub fn state(&self, server: Value, max_flows: usize) -> Value {
        let shards = self.lock();
        let mut parts: Vec<&FlowParts> = vec![];
        let mut saturated = 0u64;
        let mut correlation = Value::Null;
        let mut pending = Value::Null;
        let mut counters = Value::Null;
        let mut hold = crate::stream::otlp::HoldStats::default();
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
            parts.extend(d.flows.iter());
            sum_json(&mut correlation, &d.correlation, &mut saturated);
            sum_json(&mut pending, &d.pending, &mut saturated);
            sum_json(&mut counters, &d.counters, &mut saturated);
            hold.add(&crate::stream::otlp::HoldStats::from_json(&d.otlp_hold["totals"]));
            add_sat(&mut held_now, d.otlp_hold["held_now"].as_u64().unwrap_or(0), &mut saturated);
            if window.is_null() {
                window = d.window_s.clone();
            }
            for w in &d.warnings {
                if let Some(w) = w.as_str() {
                    let w = format!("{}: {w}", sh.status.url);
                    if warnings.len() < 50 && !warnings.contains(&w) {
                        warnings.push(w);
                    }
                }
            }
            // Every shard knows every agent (its batches are broadcast): keep the freshest view.
            for a in &d.agents {
                let Some(n) = a["name"].as_str() else { continue };
                if !agents.contains_key(n) && agents.len() >= crate::server::config::MAX_AGENTS {
                    continue;
                }
                let items = |v: &Value| v["items"].as_u64().unwrap_or(0);
                let newer = agents.get(n).is_none_or(|o| a["batches"].as_u64() > o["batches"].as_u64());
                if newer {
                    let mut a = a.clone();
                    if let Some(o) = agents.get(n) {
                        let mut sum = items(&a);
                        add_sat(&mut sum, items(o), &mut saturated);
                        a["items"] = json!(sum);
                    }
                    agents.insert(n.to_string(), a);
                } else if let Some(o) = agents.get_mut(n) {
                    let mut sum = items(o);
                    add_sat(&mut sum, items(a), &mut saturated);
                    o["items"] = json!(sum);
                }
            }
        }
        let (mut summaries, problems) = merge_flows(parts.into_iter());
        drop(shards);
        let saturated = saturated + problems.saturated + hold.saturated;
        if saturated > 0 {
            warnings.push(format!(
                "{saturated} sums of the shards' counters would pass 2^64 − 1: shown saturated at 18446744073709551615 (or, for distributions, not merged); a shard reports impossible numbers"
            ));
        }
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
                "bad_documents": 0,
                "bad_distributions": problems.bad_distributions,
                "counters_saturated": saturated,
                "not_merged": ["jitter", "period_ms", "in_time", "late", "latency series over time", "writer roles", "ROS 2 layers"],
            },
        })
    }
}

/// One shard answer: at most `max_bytes` on the wire, a redirect refused
/// (never followed, so the token goes nowhere else), its decoded size
/// estimated before parsing (`crate::server::prescan`) and refused over `share`,
/// then parsed into the typed form the front keeps.
fn fetch(agent: &ureq::Agent, url: &str, token: Option<&str>, max_bytes: u64, share: u64) -> Result<ShardDoc, String> {
    let mut req = agent.get(url);
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    let mut resp = req.call().map_err(|e| format!("GET {url}: {e}"))?;
    let status = resp.status().as_u16();
    if (300..400).contains(&status) {
        let to = resp.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or("?").chars().take(200).collect::<String>();
        return Err(format!("GET {url}: HTTP {status} redirect to {to:?} not followed (give the shard's own address)"));
    }
    if status != 200 {
        return Err(format!("GET {url}: HTTP {status}"));
    }
    let body = resp
        .body_mut()
        .with_config()
        .limit(max_bytes)
        .read_to_vec()
        .map_err(|e| format!("GET {url}: {e} (answers are read up to {} MiB)", max_bytes >> 20))?;
    let cost = crate::server::prescan::json_value_cost(&body);
    if cost > share {
        return Err(format!(
            "GET {url}: an answer of {} MiB would take about {} MiB to decode, more than this shard's share ({} MiB) of the front's memory budget",
            body.len() >> 20,
            cost >> 20,
            share >> 20
        ));
    }
    serde_json::from_slice(&body).map_err(|e| format!("GET {url}: bad JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(samples: u64, latency_count: u64) -> FlowParts {
        let mut d = Dist::default();
        for _ in 0..latency_count.min(3) {
            d.record(1000);
        }
        let mut p = d.to_parts();
        if latency_count > 3 {
            // A shard claiming more values than it holds buckets for: counts made to add up, near the limit.
            p.count = latency_count;
            p.buckets = vec![(p.buckets[0].0, latency_count)];
        }
        FlowParts {
            topic: "/t".into(),
            domain: None,
            topic_raw: None,
            sender: "pc1".into(),
            receiver: "pc2".into(),
            samples,
            delivered: samples,
            lost: 0,
            incomplete: 0,
            retransmitted_samples: 0,
            retransmitted_frags: 0,
            retransmitted_bytes: 0,
            layers: vec![("message".into(), p)],
            repaired: DistParts::default(),
            clean: DistParts::default(),
            lost_examples: vec![],
            sender_nodes: vec![],
            receiver_nodes: vec![],
        }
    }

    /// Oracle: u64 arithmetic done here in u128. Two shards whose counters add up past 2^64 − 1 give
    /// 2^64 − 1 (never a small wrapped number) and the saturations are counted; a distribution whose
    /// count would overflow is left out, not merged into garbage.
    #[test]
    fn shard_counters_saturate_and_are_flagged() {
        let big = u64::MAX - 10;
        let (m, pr) = merge_flows([&parts(big, big), &parts(100, big)]);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].samples as u128, (big as u128 + 100).min(u64::MAX as u128));
        assert_eq!(m[0].samples, u64::MAX);
        assert_eq!(m[0].delivered, u64::MAX);
        assert_eq!(pr.saturated, 3, "samples, delivered and the message distribution");
        let count = |m: &[FlowSummary]| m[0].layers.iter().find(|(l, _)| l == "message").map(|(_, d)| d.count);
        assert_eq!(count(&m), Some(big), "the second distribution is not merged");
        // Ordinary numbers are exact.
        let (m, pr) = merge_flows([&parts(5, 2), &parts(7, 3)]);
        assert_eq!((m[0].samples, count(&m), pr), (12, Some(5), MergeProblems::default()));

        let mut acc = serde_json::json!({"a": big, "b": {"c": 1}});
        let mut sat = 0;
        sum_json(&mut acc, &serde_json::json!({"a": 100, "b": {"c": u64::MAX}}), &mut sat);
        assert_eq!((acc["a"].as_u64(), acc["b"]["c"].as_u64(), sat), (Some(u64::MAX), Some(u64::MAX), 2));
    }
}
