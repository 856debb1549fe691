//! The agent's link to the central `ddscope serve`: a sender thread that keeps
//! batches in order, retries with exponential backoff, and bounds what it
//! keeps while the server is unreachable (oldest dropped first, counted).

use crate::protocol::{Batch, INGEST_PATH};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the agent talks to the central server.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// `http://host:port` of `ddscope serve`.
    pub url: String,
    pub token: Option<String>,
    /// Items kept while the server is unreachable.
    pub max_queued_items: usize,
}

/// Counters of the upstream link.
#[derive(Debug, Default)]
pub struct UpstreamStats {
    pub batches_sent: AtomicU64,
    pub items_sent: AtomicU64,
    pub items_dropped: AtomicU64,
    pub send_failures: AtomicU64,
    pub connected: AtomicBool,
}

pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// The sender thread: keeps batches in order, retries with exponential backoff.
pub fn sender(up: Upstream, rx: Receiver<Batch>, stats: Arc<UpstreamStats>) {
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(5))).build().into();
    let url = format!("{}{}", up.url.trim_end_matches('/'), INGEST_PATH);
    let mut queue: std::collections::VecDeque<Batch> = Default::default();
    let mut queued_items = 0usize;
    let mut backoff = Duration::from_millis(250);
    let mut next_try = Instant::now();
    let mut closed = false;
    loop {
        // Take everything that is waiting (block briefly when idle).
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(b) => {
                queued_items += b.items.len();
                queue.push_back(b);
                while let Ok(b) = rx.try_recv() {
                    queued_items += b.items.len();
                    queue.push_back(b);
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => closed = true,
        }
        // Bound memory: drop the oldest batches' items (keep their counters).
        while queued_items > up.max_queued_items && queue.len() > 1 {
            let b = queue.pop_front().expect("non-empty");
            queued_items -= b.items.len();
            stats.items_dropped.fetch_add(b.items.len() as u64, Ordering::Relaxed);
        }
        while let Some(b) = queue.front_mut() {
            if Instant::now() < next_try && !closed {
                break;
            }
            b.dropped_items = stats.items_dropped.load(Ordering::Relaxed);
            let body = match serde_json::to_vec(&*b) {
                Ok(v) => v,
                Err(_) => {
                    queue.pop_front();
                    continue;
                }
            };
            let mut req = agent.post(&url).header("Content-Type", "application/json");
            if let Some(t) = &up.token {
                req = req.header("Authorization", &format!("Bearer {t}"));
            }
            match req.send(&body[..]) {
                Ok(_) => {
                    let b = queue.pop_front().expect("non-empty");
                    queued_items -= b.items.len();
                    stats.batches_sent.fetch_add(1, Ordering::Relaxed);
                    stats.items_sent.fetch_add(b.items.len() as u64, Ordering::Relaxed);
                    stats.connected.store(true, Ordering::Relaxed);
                    backoff = Duration::from_millis(250);
                }
                Err(ureq::Error::StatusCode(code)) if (400..500).contains(&code) && code != 408 && code != 429 => {
                    // The server refused this batch for good (bad token, too large): drop it.
                    let b = queue.pop_front().expect("non-empty");
                    queued_items -= b.items.len();
                    stats.items_dropped.fetch_add(b.items.len() as u64, Ordering::Relaxed);
                    stats.send_failures.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    stats.send_failures.fetch_add(1, Ordering::Relaxed);
                    stats.connected.store(false, Ordering::Relaxed);
                    if closed {
                        // Shutting down: one last try was made; give up on the rest.
                        let lost: usize = queue.iter().map(|b| b.items.len()).sum();
                        stats.items_dropped.fetch_add(lost as u64, Ordering::Relaxed);
                        return;
                    }
                    next_try = Instant::now() + backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                    break;
                }
            }
        }
        if closed && queue.is_empty() {
            return;
        }
    }
}
