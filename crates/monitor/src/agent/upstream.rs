//! The agent's link to the central `ddscope serve`: the agent's batches go
//! through the same delivery queue as every other sink
//! ([`ddscope_export::delivery::Delivery`]: bounded, drop oldest, in order,
//! retried with exponential backoff), so what the agent drops while the
//! server is unreachable is counted like any sink's and shows in `/metrics`
//! (`ddscope_export_*{sink="serve"}`).
//!
//! A batch the server refuses for good (wrong token, bad agent name, too
//! large) is dropped and counted at once, and the server's reason is handed
//! to the agent as a note the first time it appears, so a misconfigured
//! agent says so instead of sending into the void until it exits.

use crate::stream::protocol::{Batch, StreamItem, AGENT_HEADER, INGEST_PATH};
use ddscope_export::delivery::{self, Delivery, DeliveryConfig, Encoder, Http, Outcome, Transport};
use ddscope_export::{SinkStats, SinkStatsSnapshot};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the agent talks to the central server.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// `http://host:port` of `ddscope serve`.
    pub url: String,
    pub token: Option<String>,
    /// Correlation items kept while the server is unreachable (the oldest batches go first).
    pub max_queued_items: usize,
    /// Send OTLP/HTTP to an OpenTelemetry Collector (`url` is its base, e.g.
    /// `http://collector:4318`) instead of the JSON stream to `serve`: the
    /// sightings as spans to `/v1/traces`, then the batch record (watermark,
    /// counters, end) as a log record to `/v1/logs` (see [`crate::stream::otlp`]).
    pub otlp: bool,
}

/// The sink name of the agent's stream in `/metrics`.
pub const SINK_NAME: &str = "serve";
/// The sink name of the agent's OTLP feed to a Collector (`agent --send-otlp`).
pub const SINK_NAME_OTLP: &str = "serve-otlp";
/// Distinct refusal reasons logged; later new ones are only counted.
const MAX_LOGGED_REASONS: usize = 16;

pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0)
}

/// Encodes each agent batch as one JSON request body.
struct BatchEncoder {
    pending: Vec<Batch>,
    otlp: bool,
    memo: crate::stream::otlp::TopicMemo,
}

impl Encoder for BatchEncoder {
    fn pending_records(&self) -> u64 {
        self.pending.iter().map(|b| b.items.len() as u64).sum()
    }
    fn pending_bytes(&self) -> usize {
        0
    }
    fn seal(&mut self, out: &mut Vec<delivery::Batch>) {
        for b in self.pending.drain(..) {
            if self.otlp {
                // Sightings first, then the record whose watermark covers them.
                let (traces, logs, _) = crate::stream::otlp::encode_bodies(&b, &mut self.memo);
                let spans = b.items.iter().filter(|i| matches!(i, StreamItem::Sample(_) | StreamItem::Frag(_))).count() as u64;
                if spans > 0 {
                    out.push(delivery::Batch { body: traces, records: spans, endpoint: 0 });
                }
                out.push(delivery::Batch { body: logs, records: b.items.len() as u64 - spans, endpoint: 1 });
                continue;
            }
            // Serialising plain structs into memory cannot fail; a failure would be a bug, not lost data to hide.
            if let Ok(body) = serde_json::to_vec(&b) {
                out.push(delivery::Batch { body, records: b.items.len() as u64, endpoint: 0 });
            }
        }
    }
}

/// Notes for the agent's log, shared between the sender thread and the agent loop.
type Notes = Arc<Mutex<Vec<String>>>;

struct ServeTransport {
    http: Http,
    /// Per endpoint (JSON stream: one; OTLP: traces, logs).
    urls: Vec<String>,
    content_type: &'static str,
    headers: Vec<(String, String)>,
    notes: Notes,
    logged: BTreeSet<String>,
}

/// The first line of a server's answer, printable and short.
fn reason(body: &[u8]) -> String {
    let t = String::from_utf8_lossy(body);
    let line = t.lines().next().unwrap_or("").trim();
    let clean: String = line.chars().filter(|c| !c.is_control()).take(200).collect();
    if clean.is_empty() {
        "no reason given".into()
    } else {
        clean
    }
}

impl Transport for ServeTransport {
    fn send(&mut self, batch: &delivery::Batch, body: &[u8], _gzip: bool) -> Outcome {
        let url = self.urls.get(batch.endpoint).unwrap_or(&self.urls[0]);
        let (status, answer) = match self.http.post(url, self.content_type, &self.headers, body, false) {
            Ok(r) => r,
            Err(e) => return Outcome::Retry(e),
        };
        match status {
            200..=299 => Outcome::Delivered,
            408 | 429 | 500..=599 => Outcome::Retry(format!("HTTP {status} from {url}: {}", reason(&answer))),
            _ => {
                let why = format!("HTTP {status}: {}", reason(&answer));
                if self.logged.len() < MAX_LOGGED_REASONS && self.logged.insert(why.clone()) {
                    let note = format!(
                        "the server refused a batch of {} items ({why}); refused batches are dropped and counted \
                         (ddscope_export_refused_batches_total{{sink=\"{SINK_NAME}\"}}), this reason is not logged again",
                        batch.records
                    );
                    if let Ok(mut n) = self.notes.lock() {
                        n.push(note);
                    }
                }
                Outcome::Rejected(why)
            }
        }
    }
}

/// The running link: batches in, counters and notes out.
pub struct UpstreamLink {
    delivery: Delivery<BatchEncoder>,
    notes: Notes,
}

impl UpstreamLink {
    /// Starts the sender thread for `agent` (its name goes into a header, so
    /// the server can check it and rate-limit before reading a body).
    /// A name the server would refuse on every batch is refused here, at once.
    pub fn start(up: &Upstream, agent: &str) -> std::io::Result<Self> {
        crate::stream::protocol::check_agent_name(agent).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("the central server refuses this agent: {e}")))?;
        let cfg = DeliveryConfig {
            batch_max_bytes: 64 << 20,
            batch_max_records: usize::MAX,
            batch_max_age: Duration::from_millis(250),
            queue_max_bytes: 512 << 20,
            queue_max_records: up.max_queued_items.max(1) as u64,
            gzip: false,
            backoff_initial: Duration::from_millis(250),
            backoff_max: Duration::from_secs(10),
            request_timeout: Duration::from_secs(5),
            shutdown_timeout: Duration::from_secs(5),
        };
        let mut headers = vec![(AGENT_HEADER.to_string(), agent.to_string())];
        if let Some(t) = &up.token {
            headers.push(("Authorization".into(), format!("Bearer {t}")));
        }
        let notes: Notes = Arc::default();
        let base = up.url.trim_end_matches('/');
        let transport = ServeTransport {
            http: Http::new(cfg.request_timeout),
            urls: match up.otlp {
                false => vec![format!("{base}{INGEST_PATH}")],
                true => vec![format!("{base}{}", crate::stream::otlp::TRACES_PATH), format!("{base}{}", crate::stream::otlp::LOGS_PATH)],
            },
            content_type: if up.otlp { "application/x-protobuf" } else { "application/json" },
            headers,
            notes: notes.clone(),
            logged: BTreeSet::new(),
        };
        let delivery = Delivery::start(cfg, BatchEncoder { pending: vec![], otlp: up.otlp, memo: Default::default() }, transport, "upstream")?;
        Ok(UpstreamLink { delivery, notes })
    }

    /// Queues one batch; never blocks. Its `dropped_items` is set to what the
    /// link has lost so far (dropped when full, refused, given up at shutdown).
    pub fn send(&self, mut b: Batch) {
        b.dropped_items = self.delivery.stats().lost_records();
        let n = b.items.len() as u64;
        self.delivery.add_sealed(|e| {
            e.pending.push(b);
            (n, ())
        });
    }

    /// The link's counters (register them with the agent's Prometheus registry).
    pub fn stats(&self) -> &Arc<SinkStats> {
        self.delivery.stats()
    }

    /// Notes (refusal reasons) not handed out yet.
    pub fn take_notes(&self) -> Vec<String> {
        self.notes.lock().map(|mut n| std::mem::take(&mut *n)).unwrap_or_default()
    }

    /// Sends what is queued for up to `timeout`, then stops; what is left is counted as dropped at shutdown.
    pub fn shutdown(&mut self, timeout: Duration) -> SinkStatsSnapshot {
        self.delivery.shutdown(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    fn batch(agent: &str, seq: u64) -> Batch {
        Batch {
            agent: agent.into(),
            seq,
            sent_ns: 0,
            items: vec![StreamItem::Watermark { t: 1 }, StreamItem::Watermark { t: 2 }],
            dropped_items: 0,
            topics: None,
            system: vec![],
            counters: None,
            last: false,
        }
    }

    /// A one-thread HTTP server answering every request with `status` and `text` (oracle: the bytes it was sent).
    fn fake_server(status: u16, text: &'static str) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let h = std::thread::spawn(move || {
            let mut heads = vec![];
            l.set_nonblocking(false).unwrap();
            for _ in 0..3 {
                let (mut s, _) = l.accept().unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut buf = vec![0u8; 65536];
                let mut got = 0;
                // Read the head and the body (Content-Length).
                loop {
                    let n = s.read(&mut buf[got..]).unwrap();
                    got += n;
                    let t = String::from_utf8_lossy(&buf[..got]).to_string();
                    if let Some(i) = t.find("\r\n\r\n") {
                        let len: usize = t
                            .lines()
                            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap()))
                            .unwrap_or(0);
                        if got >= i + 4 + len {
                            heads.push(t[..i].to_string());
                            break;
                        }
                    }
                    if n == 0 {
                        break;
                    }
                }
                let _ = write!(s, "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}", text.len());
            }
            heads
        });
        (url, h)
    }

    #[test]
    fn refusals_are_counted_at_once_and_logged_once_with_the_reason() {
        let (url, server) = fake_server(401, "missing or wrong token\n");
        let link = UpstreamLink::start(&Upstream { url, token: Some("bad".into()), max_queued_items: 1000, otlp: false }, "pc1").unwrap();
        for seq in 1..=3 {
            link.send(batch("pc1", seq));
        }
        let heads = server.join().unwrap();
        assert!(heads.iter().all(|h| h.contains("x-ddscope-agent: pc1") && h.contains("authorization: Bearer bad")), "{heads:?}");
        let t0 = std::time::Instant::now();
        while link.stats().snapshot().refused_batches < 3 {
            assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", link.stats().snapshot());
            std::thread::sleep(Duration::from_millis(10));
        }
        let s = link.stats().snapshot();
        assert_eq!((s.refused_batches, s.rejected, s.delivered), (3, 6, 0));
        let notes = link.take_notes();
        assert_eq!(notes.len(), 1, "one note per distinct reason: {notes:?}");
        assert!(notes[0].contains("HTTP 401: missing or wrong token"), "{notes:?}");
        assert!(link.take_notes().is_empty());
        let mut link = link;
        let end = link.shutdown(Duration::from_millis(100));
        assert_eq!(end.refused_batches, 3);
    }

    #[test]
    fn a_name_the_server_would_refuse_is_refused_at_start() {
        let up = Upstream { url: "http://127.0.0.1:9".into(), token: None, max_queued_items: 10, otlp: false };
        let e = UpstreamLink::start(&up, &"n".repeat(65)).err().expect("refused");
        assert!(e.to_string().contains("1 to 64 characters"), "{e}");
    }

    #[test]
    fn the_item_cap_drops_the_oldest_batches() {
        // Nothing listens on this port: every attempt fails and is retried.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        drop(l);
        let link = UpstreamLink::start(&Upstream { url, token: None, max_queued_items: 5, otlp: false }, "pc1").unwrap();
        for seq in 1..=10 {
            link.send(batch("pc1", seq));
        }
        let s = link.stats().snapshot();
        // Two items per batch, five items kept: the queue holds two batches (plus one in flight).
        assert!(s.dropped_batches >= 7, "{s:?}");
        assert_eq!(s.dropped_queue_full, 2 * s.dropped_batches);
        let mut link = link;
        let end = link.shutdown(Duration::from_millis(50));
        assert_eq!(end.accepted, 20);
        assert_eq!(end.dropped_queue_full + end.dropped_at_shutdown, 20, "{end:?}");
    }
}
