//! The one delivery queue of ddscope: every push sink (InfluxDB, OTLP) and
//! the agent's stream to the central `ddscope serve` hand their records to a
//! [`Delivery`]. Records are encoded into batches on the caller's thread,
//! sealed batches wait in a bounded queue, and one background thread POSTs
//! them in order, retrying with exponential backoff while the endpoint is down.
//!
//! **Drop policy: drop oldest.** The capture must never wait for a server,
//! so adding never blocks. When a sealed batch does not fit (the queue is
//! capped in bytes and, optionally, in records), the oldest queued batches
//! are dropped to make room and counted (`dropped_queue_full` records,
//! `dropped_batches` batches). For monitoring data the newest state is what
//! matters once the endpoint is back: after an outage the dashboard and the
//! database get the last minutes, not the minutes the outage began with
//! (Vector's and Fluent Bit's "drop oldest" buffers do the same). The batch
//! being sent is never dropped; a batch larger than the whole queue is
//! dropped on its own. `flush` waits for everything accepted so far; dropping
//! the sink flushes with the configured shutdown timeout and counts what
//! could not be sent. A batch the endpoint refuses (4xx other than 408/429)
//! is not retried: it is counted as `rejected` records and a refused batch.

use std::collections::VecDeque;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Batching, queueing and retry settings shared by the push sinks.
#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    /// A batch is sealed when its encoded body reaches this size…
    pub batch_max_bytes: usize,
    /// …or holds this many records…
    pub batch_max_records: usize,
    /// …or its first record is this old.
    pub batch_max_age: Duration,
    /// Bytes of sealed batches kept while the endpoint is slow or down.
    pub queue_max_bytes: usize,
    /// Records of sealed batches kept (`u64::MAX`: bytes alone bound the queue).
    pub queue_max_records: u64,
    /// Compress request bodies (`Content-Encoding: gzip`).
    pub gzip: bool,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// Connect + request + response limit for one POST.
    pub request_timeout: Duration,
    /// How long `Drop` keeps trying to deliver what is queued.
    pub shutdown_timeout: Duration,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        DeliveryConfig {
            batch_max_bytes: 512 * 1024,
            batch_max_records: 5000,
            batch_max_age: Duration::from_secs(1),
            queue_max_bytes: 64 * 1024 * 1024,
            queue_max_records: u64::MAX,
            gzip: false,
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(5),
        }
    }
}

impl DeliveryConfig {
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.batch_max_bytes == 0 || self.batch_max_records == 0 {
            return Err("batch limits must be positive".into());
        }
        if self.queue_max_bytes < self.batch_max_bytes {
            return Err(format!(
                "queue_max_bytes ({}) must be at least batch_max_bytes ({})",
                self.queue_max_bytes, self.batch_max_bytes
            ));
        }
        if self.queue_max_records == 0 {
            return Err("queue_max_records must be positive".into());
        }
        if self.backoff_initial.is_zero() || self.backoff_max < self.backoff_initial {
            return Err("backoff_initial must be positive and not above backoff_max".into());
        }
        Ok(())
    }
}

/// Counters of one sink; shared with the Prometheus registry so that every
/// drop is visible (`ddscope_export_*{sink=…}`).
#[derive(Debug, Default)]
pub struct SinkStats {
    /// Records handed to the sink.
    pub accepted: AtomicU64,
    /// Records the endpoint acknowledged.
    pub delivered: AtomicU64,
    /// Records dropped because the queue was full (the oldest go first).
    pub dropped_queue_full: AtomicU64,
    /// Batches dropped because the queue was full.
    pub dropped_batches: AtomicU64,
    /// Records the endpoint refused (4xx other than 408/429, OTLP partial success); not retried.
    pub rejected: AtomicU64,
    /// Batches the endpoint refused whole (bad token, too large, bad request).
    pub refused_batches: AtomicU64,
    /// Records still queued when the sink was shut down and the timeout ran out.
    pub dropped_at_shutdown: AtomicU64,
    /// Records the encoder could not represent (no timestamp, no fields…).
    pub unencodable: AtomicU64,
    /// Keys the encoder forgot to stay within its cap (InfluxDB: the
    /// (writer, sn, fragment) keys of the `copy` tag, `max_copy_keys`).
    pub evicted_keys: AtomicU64,
    pub batches_sent: AtomicU64,
    /// Failed attempts (connection refused, timeout, 5xx, 429); each is retried.
    pub failed_attempts: AtomicU64,
    pub bytes_sent: AtomicU64,
    /// Encoded bytes currently queued.
    pub queued_bytes: AtomicU64,
    pub queued_records: AtomicU64,
    /// 1 while the last attempt succeeded (or nothing was tried yet).
    pub up: AtomicBool,
    pub last_error: Mutex<Option<String>>,
}

/// A plain copy of [`SinkStats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SinkStatsSnapshot {
    pub accepted: u64,
    pub delivered: u64,
    pub dropped_queue_full: u64,
    pub dropped_batches: u64,
    pub rejected: u64,
    pub refused_batches: u64,
    pub dropped_at_shutdown: u64,
    pub unencodable: u64,
    pub evicted_keys: u64,
    pub batches_sent: u64,
    pub failed_attempts: u64,
    pub bytes_sent: u64,
    pub queued_bytes: u64,
    pub queued_records: u64,
    pub up: bool,
    pub last_error: Option<String>,
}

impl SinkStats {
    pub fn snapshot(&self) -> SinkStatsSnapshot {
        SinkStatsSnapshot {
            accepted: self.accepted.load(Relaxed),
            delivered: self.delivered.load(Relaxed),
            dropped_queue_full: self.dropped_queue_full.load(Relaxed),
            dropped_batches: self.dropped_batches.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            refused_batches: self.refused_batches.load(Relaxed),
            dropped_at_shutdown: self.dropped_at_shutdown.load(Relaxed),
            unencodable: self.unencodable.load(Relaxed),
            evicted_keys: self.evicted_keys.load(Relaxed),
            batches_sent: self.batches_sent.load(Relaxed),
            failed_attempts: self.failed_attempts.load(Relaxed),
            bytes_sent: self.bytes_sent.load(Relaxed),
            queued_bytes: self.queued_bytes.load(Relaxed),
            queued_records: self.queued_records.load(Relaxed),
            up: self.up.load(Relaxed),
            last_error: self.last_error.lock().map(|e| e.clone()).unwrap_or(None),
        }
    }

    /// Records that never reached the endpoint: dropped (queue full or at shutdown) or refused.
    pub fn lost_records(&self) -> u64 {
        self.dropped_queue_full.load(Relaxed) + self.dropped_at_shutdown.load(Relaxed) + self.rejected.load(Relaxed)
    }

    fn set_error(&self, e: String) {
        if let Ok(mut g) = self.last_error.lock() {
            *g = Some(e);
        }
    }
}

/// One sealed, encoded request body.
#[derive(Debug)]
pub struct Batch {
    pub body: Vec<u8>,
    pub records: u64,
    /// Index into the sink's endpoint list (OTLP: traces or metrics).
    pub endpoint: usize,
}

/// The sink-specific part: turns records into request bodies.
pub trait Encoder: Send + 'static {
    /// Records buffered and not sealed yet.
    fn pending_records(&self) -> u64;
    /// Encoded (or estimated) bytes buffered.
    fn pending_bytes(&self) -> usize;
    /// Seals everything buffered into batches.
    fn seal(&mut self, out: &mut Vec<Batch>);
}

/// What one POST came to.
pub enum Outcome {
    Delivered,
    /// The endpoint took the batch but refused `n` of its records.
    Partial(u64, String),
    /// Not retried (bad request, auth, too large…).
    Rejected(String),
    /// Connection failures, timeouts, 429 and 5xx.
    Retry(String),
}

/// The transport-specific part: sends one body.
pub trait Transport: Send + 'static {
    fn send(&mut self, batch: &Batch, body: &[u8], gzip: bool) -> Outcome;
}

struct Queue {
    batches: VecDeque<Batch>,
    /// Bytes and records of the queued batches and of the one in flight.
    bytes: usize,
    records: u64,
    /// A batch is being sent (it left `batches`).
    in_flight: bool,
    stop: bool,
}

/// The encoder and when its oldest unsealed record arrived.
struct Buffered<E> {
    enc: E,
    since: Option<Instant>,
}

pub(crate) struct Shared<E: Encoder> {
    cfg: DeliveryConfig,
    encoder: Mutex<Buffered<E>>,
    queue: Mutex<Queue>,
    /// Signals the sender (new batch, stop) and flush waiters (queue drained).
    changed: Condvar,
    pub stats: Arc<SinkStats>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic on another thread must not take the capture down with it.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A running sink: encoder + bounded queue + sender thread.
pub struct Delivery<E: Encoder> {
    shared: Arc<Shared<E>>,
    thread: Option<JoinHandle<()>>,
}

impl<E: Encoder> Delivery<E> {
    pub fn start<T: Transport>(cfg: DeliveryConfig, encoder: E, transport: T, name: &str) -> std::io::Result<Self> {
        let stats = Arc::new(SinkStats::default());
        stats.up.store(true, Relaxed);
        let shared = Arc::new(Shared {
            cfg,
            encoder: Mutex::new(Buffered { enc: encoder, since: None }),
            queue: Mutex::new(Queue { batches: VecDeque::new(), bytes: 0, records: 0, in_flight: false, stop: false }),
            changed: Condvar::new(),
            stats,
        });
        let s2 = shared.clone();
        let thread = ddscope_sysstat::workers::spawn(&format!("ddscope-{name}"), move || sender_loop(s2, transport))?;
        Ok(Delivery { shared, thread: Some(thread) })
    }

    pub fn stats(&self) -> &Arc<SinkStats> {
        &self.shared.stats
    }

    /// Runs `f` on the encoder (adding records), then seals full batches.
    /// `f` returns how many records it accepted.
    pub fn with_encoder<R>(&self, f: impl FnOnce(&mut E) -> (u64, R)) -> R {
        let mut sealed = vec![];
        let r = {
            let mut b = lock(&self.shared.encoder);
            let (n, r) = f(&mut b.enc);
            self.after_add(&mut b, n, &mut sealed);
            r
        };
        self.shared.enqueue(sealed);
        r
    }

    /// Runs `f` on the encoder (adding records) and seals everything it
    /// buffered at once, whatever the batch limits: for callers whose records
    /// already are one request each (the agent's batches to `serve`).
    pub fn add_sealed<R>(&self, f: impl FnOnce(&mut E) -> (u64, R)) -> R {
        let mut sealed = vec![];
        let r = {
            let mut b = lock(&self.shared.encoder);
            let (n, r) = f(&mut b.enc);
            self.shared.stats.accepted.fetch_add(n, Relaxed);
            b.enc.seal(&mut sealed);
            b.since = None;
            r
        };
        self.shared.enqueue(sealed);
        r
    }

    /// Adds many items under one lock, sealing whenever a batch is full.
    pub fn add_each<I>(&self, items: impl IntoIterator<Item = I>, mut f: impl FnMut(&mut E, I) -> u64) {
        let mut sealed = vec![];
        {
            let mut b = lock(&self.shared.encoder);
            for it in items {
                let n = f(&mut b.enc, it);
                self.after_add(&mut b, n, &mut sealed);
            }
        }
        self.shared.enqueue(sealed);
    }

    fn after_add(&self, b: &mut Buffered<E>, n: u64, sealed: &mut Vec<Batch>) {
        if n == 0 {
            return;
        }
        self.shared.stats.accepted.fetch_add(n, Relaxed);
        b.since.get_or_insert_with(Instant::now);
        if b.enc.pending_bytes() >= self.shared.cfg.batch_max_bytes || b.enc.pending_records() >= self.shared.cfg.batch_max_records as u64 {
            b.enc.seal(sealed);
            b.since = None;
        }
    }

    /// Seals what is buffered and waits until every accepted record was
    /// delivered, rejected or dropped, or `timeout` passes. Returns false on timeout.
    pub fn flush(&self, timeout: Duration) -> bool {
        self.shared.seal_now();
        let deadline = Instant::now() + timeout;
        let mut q = lock(&self.shared.queue);
        while !q.batches.is_empty() || q.in_flight {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            q = self.shared.changed.wait_timeout(q, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
        }
        true
    }

    /// Flushes for up to `timeout`, stops the sender, and counts what is left
    /// as `dropped_at_shutdown`. A request in progress may add up to
    /// `request_timeout`. Returns the final counters.
    pub fn shutdown(&mut self, timeout: Duration) -> SinkStatsSnapshot {
        if self.thread.is_some() {
            self.flush(timeout);
            lock(&self.shared.queue).stop = true;
            self.shared.changed.notify_all();
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
            // Records accepted after the flush started are still in the encoder.
            self.shared.seal_now();
            let mut q = lock(&self.shared.queue);
            let left: u64 = q.batches.iter().map(|b| b.records).sum();
            q.batches.clear();
            q.bytes = 0;
            q.records = 0;
            self.shared.stats.dropped_at_shutdown.fetch_add(left, Relaxed);
            self.shared.stats.queued_bytes.store(0, Relaxed);
            self.shared.stats.queued_records.store(0, Relaxed);
        }
        self.shared.stats.snapshot()
    }
}

impl<E: Encoder> Drop for Delivery<E> {
    fn drop(&mut self) {
        let t = self.shared.cfg.shutdown_timeout;
        self.shutdown(t);
    }
}

impl<E: Encoder> Shared<E> {
    fn seal_now(&self) {
        let mut sealed = vec![];
        {
            let mut b = lock(&self.encoder);
            b.enc.seal(&mut sealed);
            b.since = None;
        }
        self.enqueue(sealed);
    }

    /// Queues sealed batches, dropping the oldest queued ones when a batch
    /// does not fit (see the module's drop policy).
    fn enqueue(&self, batches: Vec<Batch>) {
        if batches.is_empty() {
            return;
        }
        let (max_bytes, max_records) = (self.cfg.queue_max_bytes, self.cfg.queue_max_records);
        let mut q = lock(&self.queue);
        for b in batches {
            if b.body.len() > max_bytes || b.records > max_records {
                self.stats.dropped_queue_full.fetch_add(b.records, Relaxed);
                self.stats.dropped_batches.fetch_add(1, Relaxed);
                continue;
            }
            while q.bytes + b.body.len() > max_bytes || q.records + b.records > max_records {
                let Some(old) = q.batches.pop_front() else { break };
                q.bytes -= old.body.len();
                q.records -= old.records;
                self.stats.queued_bytes.fetch_sub(old.body.len() as u64, Relaxed);
                self.stats.queued_records.fetch_sub(old.records, Relaxed);
                self.stats.dropped_queue_full.fetch_add(old.records, Relaxed);
                self.stats.dropped_batches.fetch_add(1, Relaxed);
            }
            q.bytes += b.body.len();
            q.records += b.records;
            self.stats.queued_bytes.fetch_add(b.body.len() as u64, Relaxed);
            self.stats.queued_records.fetch_add(b.records, Relaxed);
            q.batches.push_back(b);
        }
        drop(q);
        self.changed.notify_all();
    }

    /// Gives the queue space of a batch back (sent, refused or given up).
    fn release(&self, batch: &Batch) {
        let mut q = lock(&self.queue);
        q.in_flight = false;
        q.bytes -= batch.body.len();
        q.records -= batch.records;
        self.stats.queued_bytes.fetch_sub(batch.body.len() as u64, Relaxed);
        self.stats.queued_records.fetch_sub(batch.records, Relaxed);
        drop(q);
        self.changed.notify_all();
    }
}

fn gzip(body: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::with_capacity(body.len() / 4 + 64), flate2::Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(body);
    enc.finish().unwrap_or_default()
}

/// Next batch to send; seals the encoder's batch when it gets old. None on stop.
fn next_batch<E: Encoder>(shared: &Shared<E>) -> Option<Batch> {
    let age = shared.cfg.batch_max_age;
    loop {
        let since = lock(&shared.encoder).since;
        let wait = match since {
            Some(t) if t.elapsed() >= age => {
                shared.seal_now();
                Duration::ZERO
            }
            Some(t) => age - t.elapsed(),
            None => age,
        };
        let mut q = lock(&shared.queue);
        if q.stop {
            return None;
        }
        if let Some(b) = q.batches.pop_front() {
            q.in_flight = true;
            return Some(b);
        }
        if !wait.is_zero() {
            // Checked and waited under the queue lock: no wake-up is lost.
            let _ = shared.changed.wait_timeout(q, wait);
        }
    }
}

fn sender_loop<E: Encoder, T: Transport>(shared: Arc<Shared<E>>, mut transport: T) {
    let cfg = shared.cfg.clone();
    let mut backoff = cfg.backoff_initial;
    while let Some(batch) = next_batch(&shared) {
        let gz;
        let body: &[u8] = if cfg.gzip {
            gz = gzip(&batch.body);
            &gz
        } else {
            &batch.body
        };
        loop {
            let outcome = transport.send(&batch, body, cfg.gzip);
            match outcome {
                Outcome::Delivered => shared.stats.delivered.fetch_add(batch.records, Relaxed),
                Outcome::Partial(n, e) => {
                    let n = n.min(batch.records);
                    shared.stats.set_error(e);
                    shared.stats.rejected.fetch_add(n, Relaxed);
                    shared.stats.delivered.fetch_add(batch.records - n, Relaxed)
                }
                Outcome::Rejected(e) => {
                    shared.stats.set_error(e);
                    shared.stats.refused_batches.fetch_add(1, Relaxed);
                    shared.stats.rejected.fetch_add(batch.records, Relaxed)
                }
                Outcome::Retry(e) => {
                    shared.stats.failed_attempts.fetch_add(1, Relaxed);
                    shared.stats.up.store(false, Relaxed);
                    shared.stats.set_error(e);
                    // Back off, waking early on stop; once stopped, give up.
                    let mut q = lock(&shared.queue);
                    if !q.stop {
                        q = shared.changed.wait_timeout(q, backoff).unwrap_or_else(|p| p.into_inner()).0;
                    }
                    let stop = q.stop;
                    drop(q);
                    if stop {
                        shared.stats.dropped_at_shutdown.fetch_add(batch.records, Relaxed);
                        shared.release(&batch);
                        return;
                    }
                    backoff = (backoff * 2).min(cfg.backoff_max);
                    continue;
                }
            };
            break;
        }
        backoff = cfg.backoff_initial;
        shared.stats.up.store(true, Relaxed);
        shared.stats.batches_sent.fetch_add(1, Relaxed);
        shared.stats.bytes_sent.fetch_add(body.len() as u64, Relaxed);
        shared.release(&batch);
    }
}

/// Blocking HTTP POSTs over `ureq`, used on the sender thread.
pub struct Http {
    agent: ureq::Agent,
}

/// Max bytes of a response body read (error texts, OTLP responses).
const RESPONSE_LIMIT: u64 = 1 << 20;

impl Http {
    pub fn new(timeout: Duration) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .timeout_connect(Some(timeout.min(Duration::from_secs(3))))
            .http_status_as_error(false)
            .user_agent(concat!("ddscope/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Http { agent }
    }

    /// POSTs `body`; Ok((status, response body)) for any HTTP answer, Err for
    /// connection-level failures.
    pub fn post(&self, url: &str, content_type: &str, headers: &[(String, String)], body: &[u8], gzip: bool) -> Result<(u16, Vec<u8>), String> {
        let mut req = self.agent.post(url).header("Content-Type", content_type);
        if gzip {
            req = req.header("Content-Encoding", "gzip");
        }
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let mut resp = req.send(body).map_err(|e| format!("POST {url}: {e}"))?;
        let status = resp.status().as_u16();
        let bytes = resp.body_mut().with_config().limit(RESPONSE_LIMIT).read_to_vec().unwrap_or_default();
        Ok((status, bytes))
    }

    /// GET with query parameters (InfluxDB /query).
    pub fn post_form(&self, url: &str, form: &[(&str, &str)]) -> Result<(u16, Vec<u8>), String> {
        let mut resp = self.agent.post(url).send_form(form.iter().copied()).map_err(|e| format!("POST {url}: {e}"))?;
        let status = resp.status().as_u16();
        let bytes = resp.body_mut().with_config().limit(RESPONSE_LIMIT).read_to_vec().unwrap_or_default();
        Ok((status, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Lines {
        buf: Vec<u8>,
        n: u64,
    }
    impl Encoder for Lines {
        fn pending_records(&self) -> u64 {
            self.n
        }
        fn pending_bytes(&self) -> usize {
            self.buf.len()
        }
        fn seal(&mut self, out: &mut Vec<Batch>) {
            if self.n > 0 {
                out.push(Batch { body: std::mem::take(&mut self.buf), records: std::mem::take(&mut self.n), endpoint: 0 });
            }
        }
    }

    /// Fails while `down` is set, records what it got.
    #[derive(Clone, Default)]
    struct Fake {
        down: Arc<AtomicBool>,
        got: Arc<Mutex<Vec<Vec<u8>>>>,
        attempts: Arc<AtomicUsize>,
    }
    impl Transport for Fake {
        fn send(&mut self, _b: &Batch, body: &[u8], _gzip: bool) -> Outcome {
            self.attempts.fetch_add(1, Relaxed);
            if self.down.load(Relaxed) {
                return Outcome::Retry("down".into());
            }
            self.got.lock().unwrap().push(body.to_vec());
            Outcome::Delivered
        }
    }

    fn cfg() -> DeliveryConfig {
        DeliveryConfig {
            batch_max_bytes: 100,
            batch_max_records: 10,
            batch_max_age: Duration::from_millis(20),
            queue_max_bytes: 300,
            backoff_initial: Duration::from_millis(5),
            backoff_max: Duration::from_millis(40),
            shutdown_timeout: Duration::from_millis(200),
            ..Default::default()
        }
    }

    fn add(d: &Delivery<Lines>, line: &str) {
        d.with_encoder(|e| {
            e.buf.extend_from_slice(line.as_bytes());
            e.n += 1;
            (1, ())
        });
    }

    #[test]
    fn delivers_in_order_after_outage_and_counts_drops() {
        let fake = Fake::default();
        fake.down.store(true, Relaxed);
        let d = Delivery::start(cfg(), Lines { buf: vec![], n: 0 }, fake.clone(), "t").unwrap();
        // 100 records of 10 bytes: 10 batches of 100 bytes; the queue keeps 3.
        for i in 0..100 {
            add(&d, &format!("{i:09}\n"));
        }
        assert!(!d.flush(Duration::from_millis(100)), "endpoint down: flush must time out");
        let s = d.stats().snapshot();
        assert_eq!(s.accepted, 100);
        // One batch may be in flight (out of the queue) plus three queued.
        assert!(s.dropped_queue_full >= 60 && s.dropped_queue_full <= 70, "{s:?}");
        assert!(s.failed_attempts >= 2);
        assert!(!s.up);
        fake.down.store(false, Relaxed);
        assert!(d.flush(Duration::from_secs(5)));
        let s = d.stats().snapshot();
        assert_eq!(s.delivered + s.dropped_queue_full, 100, "{s:?}");
        assert_eq!(s.queued_records, 0);
        let got = fake.got.lock().unwrap().concat();
        let got = String::from_utf8(got).unwrap();
        let nums: Vec<u64> = got.lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(nums.len() as u64, s.delivered);
        assert!(nums.windows(2).all(|w| w[0] < w[1]), "kept batches arrive in order");
        assert_eq!(*nums.last().unwrap(), 99, "the newest batch is kept (drop oldest)");
        assert!(nums.contains(&90), "the newest full batch (90..99) is kept: {nums:?}");
        assert_eq!(s.dropped_batches * 10, s.dropped_queue_full, "{s:?}");
    }

    #[test]
    fn record_cap_drops_oldest_and_a_batch_larger_than_the_queue_is_dropped_alone() {
        let fake = Fake::default();
        fake.down.store(true, Relaxed);
        let c = DeliveryConfig { queue_max_bytes: 1 << 20, queue_max_records: 25, ..cfg() };
        let d = Delivery::start(c, Lines { buf: vec![], n: 0 }, fake.clone(), "t").unwrap();
        // One record per sealed batch: at most 25 queued (plus one in flight).
        for i in 0..60 {
            d.add_sealed(|e| {
                e.buf.extend_from_slice(format!("{i:09}\n").as_bytes());
                e.n += 1;
                (1, ())
            });
        }
        let s = d.stats().snapshot();
        assert!(s.queued_records <= 26, "{s:?}");
        assert_eq!(s.dropped_queue_full, s.dropped_batches);
        assert_eq!(s.queued_records + s.dropped_queue_full, 60, "{s:?}");
        // A batch of more records than the queue holds is dropped on its own.
        d.add_sealed(|e| {
            for i in 0..30 {
                e.buf.extend_from_slice(format!("{:09}\n", 1000 + i).as_bytes());
            }
            e.n += 30;
            (30, ())
        });
        let s2 = d.stats().snapshot();
        assert_eq!(s2.dropped_queue_full, s.dropped_queue_full + 30);
        assert_eq!(s2.queued_records, s.queued_records, "nothing else was dropped for it");
        fake.down.store(false, Relaxed);
        assert!(d.flush(Duration::from_secs(5)));
        let got = String::from_utf8(fake.got.lock().unwrap().concat()).unwrap();
        let nums: Vec<u64> = got.lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(*nums.last().unwrap(), 59, "newest kept");
        assert_eq!(nums.len() as u64, 60 - s.dropped_queue_full);
    }

    #[test]
    fn refused_batches_are_counted_and_not_retried() {
        struct Refuse(Arc<AtomicUsize>);
        impl Transport for Refuse {
            fn send(&mut self, _b: &Batch, _body: &[u8], _gzip: bool) -> Outcome {
                self.0.fetch_add(1, Relaxed);
                Outcome::Rejected("401: wrong token".into())
            }
        }
        let attempts = Arc::new(AtomicUsize::new(0));
        let d = Delivery::start(cfg(), Lines { buf: vec![], n: 0 }, Refuse(attempts.clone()), "t").unwrap();
        for i in 0..3 {
            d.add_sealed(|e| {
                e.buf.extend_from_slice(format!("{i}\n").as_bytes());
                e.n += 1;
                (1, ())
            });
        }
        assert!(d.flush(Duration::from_secs(5)));
        let s = d.stats().snapshot();
        assert_eq!((s.refused_batches, s.rejected, s.delivered), (3, 3, 0), "{s:?}");
        assert_eq!(attempts.load(Relaxed), 3, "one attempt per refused batch");
        assert_eq!(s.last_error.as_deref(), Some("401: wrong token"));
    }

    #[test]
    fn old_partial_batches_are_sealed_by_age() {
        let fake = Fake::default();
        let d = Delivery::start(cfg(), Lines { buf: vec![], n: 0 }, fake.clone(), "t").unwrap();
        add(&d, "a\n");
        let t0 = Instant::now();
        while fake.got.lock().unwrap().is_empty() {
            assert!(t0.elapsed() < Duration::from_secs(5), "an old batch must be sent without flush");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(d.stats().snapshot().delivered, 1);
    }

    #[test]
    fn shutdown_counts_what_could_not_be_sent() {
        let fake = Fake::default();
        fake.down.store(true, Relaxed);
        let mut d = Delivery::start(cfg(), Lines { buf: vec![], n: 0 }, fake.clone(), "t").unwrap();
        for i in 0..25 {
            add(&d, &format!("{i:09}\n"));
        }
        let s = d.shutdown(Duration::from_millis(50));
        assert_eq!(s.accepted, 25);
        assert_eq!(s.delivered, 0);
        assert_eq!(s.dropped_queue_full + s.dropped_at_shutdown, 25, "{s:?}");
    }

    #[test]
    fn bulk_adds_respect_the_batch_limits() {
        let fake = Fake::default();
        let d = Delivery::start(DeliveryConfig { queue_max_bytes: 1 << 20, ..cfg() }, Lines { buf: vec![], n: 0 }, fake.clone(), "t").unwrap();
        d.add_each(0..95, |e, i| {
            e.buf.extend_from_slice(format!("{i:04}\n").as_bytes());
            e.n += 1;
            1
        });
        assert!(d.flush(Duration::from_secs(5)));
        let got = fake.got.lock().unwrap();
        // 10 records per batch: nine full batches and the rest.
        assert_eq!(got.len(), 10);
        assert!(got[..9].iter().all(|b| b.len() == 50));
        assert_eq!(d.stats().snapshot().delivered, 95);
    }

    #[test]
    fn config_is_validated() {
        let mut c = cfg();
        c.queue_max_bytes = 10;
        assert!(c.validate().is_err());
        assert!(cfg().validate().is_ok());
    }
}
