//! The HTTP server of `ddscope serve`: hyper's HTTP/1.1 connection driver on
//! a small tokio runtime, in front of the synchronous [`Central`].
//!
//! A slow or hostile client must not freeze the server, so every connection
//! is a cheap task bounded in time and number:
//! - at most [`HttpLimits::max_connections`] at once; one more is answered
//!   `503` and closed at once (counted), so the kernel's backlog never fills;
//! - request headers must arrive within `header_timeout` (hyper closes the
//!   connection otherwise, also on an idle keep-alive connection), a request
//!   body within `body_timeout`, and a connection that moves no byte in
//!   either direction for `idle_timeout` is closed (a client that never
//!   reads its answer);
//! - headers are capped in size and number (`431`), bodies at `max_body_bytes`
//!   (`413`, from `Content-Length` before reading, or while reading a chunked one).
//!
//! Ingest is authenticated from the headers alone: the token, the agent's
//! name (`X-Ddscope-Agent`) and its rate limit are checked before a single
//! byte of the body is read; a refused request is answered with
//! `Connection: close`, so its body is never read at all. Bodies being
//! received reserve their size from a shared budget (`ingest_buffer_bytes`),
//! and at most `max_concurrent_ingest` batches are decoded at once; the
//! correlator runs on tokio's blocking pool behind a mutex (a poisoned lock
//! is recovered and counted), so `/healthz` and the pages never wait for it.
//! Every answer carries a Content-Security-Policy that allows scripts and
//! styles from the server only (no inline script), plus `nosniff`,
//! `no-referrer` and `frame-ancestors 'none'`.

use crate::server::assets;
use crate::stream::protocol::{Batch, AGENT_HEADER, INGEST_PATH};
use ddscope_core::bounded::BoundedMap;
use crate::server::central::Central;
use crate::server::config::{HttpLimits, ServeConfig};
use crate::stream::protocol::check_agent_name;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, AUTHORIZATION, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER, TRANSFER_ENCODING};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rustc_hash::FxHashMap;
use serde_json::json;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};


/// Counters of the HTTP layer (`/api/state` → `server`).
#[derive(Debug, Default)]
pub struct HttpStats {
    pub connections_accepted: AtomicU64,
    pub connections_open: AtomicU64,
    /// Closed at once because `max_connections` were open.
    pub connections_refused: AtomicU64,
    /// `accept` failed (e.g. out of file descriptors).
    pub accept_errors: AtomicU64,
    /// Headers not complete within `header_timeout` (includes idle keep-alive connections).
    pub header_timeouts: AtomicU64,
    pub body_timeouts: AtomicU64,
    /// No byte moved for `idle_timeout` (e.g. an answer never read).
    pub idle_closed: AtomicU64,
    /// Requests hyper could not parse (garbage, bad Content-Length, headers too large).
    pub bad_http: AtomicU64,
    pub unauthorized: AtomicU64,
    pub rate_limited: AtomicU64,
    pub too_large: AtomicU64,
    /// Ingest requests turned away because `ingest_buffer_bytes` were reserved by bodies being received.
    pub busy: AtomicU64,
    /// Batches refused after reading (bad JSON, agent name, agent cap).
    pub bad_batches: AtomicU64,
    pub batches_ingested: AtomicU64,
    /// Rate-limit entries forgotten to stay within `stream.max_rate_entries`.
    pub rate_entries_evicted: AtomicU64,
    /// The central state's lock was poisoned by a panic and recovered.
    pub poisoned_lock_recoveries: AtomicU64,
    /// Handlers that failed internally (a panic on the blocking pool).
    pub internal_errors: AtomicU64,
    /// OTLP export requests taken (HTTP and gRPC), spans/log records taken and refused.
    pub otlp_requests: AtomicU64,
    pub otlp_items: AtomicU64,
    pub otlp_refused_items: AtomicU64,
    /// OTLP requests refused whole (undecodable, too large, busy: the Collector retries those answered busy).
    pub otlp_bad_requests: AtomicU64,
    pub otlp_busy: AtomicU64,
    pub grpc_connections: AtomicU64,
    /// Requests refused before decoding: estimated over `decode_budget_bytes`, `otlp_max_items` or `otlp_max_attributes`.
    pub decode_refused: AtomicU64,
    /// Requests answered busy because the decode budget had no room within `ingest_wait`.
    pub decode_busy: AtomicU64,
    /// gRPC connections closed at once because the receive budget had no room for their flow-control window.
    pub grpc_refused: AtomicU64,
}

impl HttpStats {
    /// The counters as metric families for `/metrics` (`ddscope_serve_http_total{what}`, open connections as a gauge).
    pub fn families(&self) -> Vec<ddscope_sysstat::promtext::Family> {
        use ddscope_sysstat::promtext::{Family, Kind, Sample};
        let mut counters = vec![];
        let mut open = vec![];
        if let serde_json::Value::Object(m) = self.json() {
            for (k, v) in m {
                let v = v.as_f64().unwrap_or(0.0);
                if k == "connections_open" {
                    open.push(Sample::new("ddscope_serve_http_connections_open", vec![], v));
                } else {
                    counters.push(Sample::new("ddscope_serve_http_total", vec![("what".to_string(), k)], v));
                }
            }
        }
        vec![
            Family { name: "ddscope_serve_http_total".into(), help: "serve's HTTP layer (/api/state → server): connections, requests refused and why, batches and OTLP items taken.".into(), kind: Kind::Counter, samples: counters },
            Family { name: "ddscope_serve_http_connections_open".into(), help: "Connections open now.".into(), kind: Kind::Gauge, samples: open },
        ]
    }

    fn json(&self) -> serde_json::Value {
        let g = |a: &AtomicU64| a.load(Relaxed);
        json!({
            "connections_accepted": g(&self.connections_accepted),
            "connections_open": g(&self.connections_open),
            "connections_refused": g(&self.connections_refused),
            "accept_errors": g(&self.accept_errors),
            "header_timeouts": g(&self.header_timeouts),
            "body_timeouts": g(&self.body_timeouts),
            "idle_closed": g(&self.idle_closed),
            "bad_http": g(&self.bad_http),
            "unauthorized": g(&self.unauthorized),
            "rate_limited": g(&self.rate_limited),
            "too_large": g(&self.too_large),
            "busy": g(&self.busy),
            "bad_batches": g(&self.bad_batches),
            "batches_ingested": g(&self.batches_ingested),
            "rate_entries_evicted": g(&self.rate_entries_evicted),
            "poisoned_lock_recoveries": g(&self.poisoned_lock_recoveries),
            "internal_errors": g(&self.internal_errors),
            "otlp_requests": g(&self.otlp_requests),
            "otlp_items": g(&self.otlp_items),
            "otlp_refused_items": g(&self.otlp_refused_items),
            "otlp_bad_requests": g(&self.otlp_bad_requests),
            "otlp_busy": g(&self.otlp_busy),
            "grpc_connections": g(&self.grpc_connections),
            "decode_refused": g(&self.decode_refused),
            "decode_busy": g(&self.decode_busy),
            "grpc_refused": g(&self.grpc_refused),
        })
    }
}

/// A token bucket per agent name, at most `cap` names (least recently seen forgotten).
/// A token bucket per agent name, at most `stream.max_rate_entries` of them
/// (the least recently seen forgotten first, counted in `rate_entries_evicted`).
struct RateLimits {
    buckets: BoundedMap<String, Bucket>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
    limited: u64,
}

impl RateLimits {
    fn new(max_entries: usize) -> Self {
        RateLimits { buckets: BoundedMap::new(max_entries.max(1)) }
    }

    /// Takes one token for `agent`; false when its bucket is empty.
    fn allow(&mut self, agent: &str, l: &HttpLimits, stats: &HttpStats) -> bool {
        let now = Instant::now();
        let burst = l.agent_burst.max(1.0);
        let b = self.buckets.get_or_insert_with(agent.to_string(), || Bucket { tokens: burst, at: now, limited: 0 }, &mut |_, _| {
            stats.rate_entries_evicted.fetch_add(1, Relaxed);
        });
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * l.agent_rate).min(burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            b.limited += 1;
            false
        }
    }
}

pub(crate) struct Ctx {
    pub(crate) central: Mutex<Central>,
    pub(crate) token: Option<String>,
    pub(crate) limits: HttpLimits,
    pub(crate) stats: HttpStats,
    rates: Mutex<RateLimits>,
    pub(crate) ingest: Arc<Semaphore>,
    /// `ingest_buffer_bytes` in KiB permits.
    pub(crate) buffer: Arc<Semaphore>,
    /// `decode_budget_bytes` in KiB permits.
    pub(crate) decode: Arc<Semaphore>,
    pub(crate) connections: Arc<Semaphore>,
    /// The last `/api/state` answer; the async mutex makes concurrent requests wait for one build.
    pub(crate) state: tokio::sync::Mutex<Option<(Instant, Bytes)>>,
    pub(crate) epoch: Instant,
    /// A front merging shards (`serve --federate`) instead of correlating.
    pub(crate) federation: Option<Arc<crate::server::federation::Federation>>,
    pub(crate) max_state_flows: usize,
}

impl Ctx {
    pub(crate) fn central(&self) -> MutexGuard<'_, Central> {
        match self.central.lock() {
            Ok(g) => g,
            Err(p) => {
                // A panic while ingesting: the state may miss part of one
                // batch, which is better than a server that stops answering.
                self.stats.poisoned_lock_recoveries.fetch_add(1, Relaxed);
                self.central.clear_poison();
                p.into_inner()
            }
        }
    }

    fn rates(&self) -> MutexGuard<'_, RateLimits> {
        self.rates.lock().unwrap_or_else(|p| {
            self.rates.clear_poison();
            p.into_inner()
        })
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

/// The shared context of every connection, around a started [`Central`]
/// (`limits` are the effective ones: `max_connections` lowered to the open-file limit).
pub(crate) fn context(central: Central, cfg: &ServeConfig, limits: HttpLimits) -> anyhow::Result<Arc<Ctx>> {
    Ok(Arc::new(Ctx {
        central: Mutex::new(central),
        token: cfg.token.clone().filter(|t| !t.is_empty()),
        ingest: Arc::new(Semaphore::new(limits.max_concurrent_ingest.max(1))),
        buffer: Arc::new(Semaphore::new(kib(limits.ingest_buffer_bytes.max(limits.max_body_bytes)) as usize)),
        decode: Arc::new(Semaphore::new(kib(limits.decode_budget_bytes.max(limits.max_body_bytes)) as usize)),
        connections: Arc::new(Semaphore::new(limits.max_connections)),
        limits,
        stats: HttpStats::default(),
        rates: Mutex::new(RateLimits::new(cfg.stream.max_rate_entries)),
        state: tokio::sync::Mutex::new(None),
        epoch: Instant::now(),
        federation: match cfg.federate.is_empty() {
            true => None,
            false => Some(
                crate::server::federation::Federation::start(cfg.federate.clone(), cfg.token.clone(), Duration::from_secs(1)).map_err(|e| anyhow::anyhow!("--federate: {e}"))?,
            ),
        },
        max_state_flows: cfg.caps.state_flows,
    }))
}

/// Bytes in KiB semaphore permits (rounded up, at least one).
pub(crate) fn kib(bytes: usize) -> u32 {
    bytes.div_ceil(1024).clamp(1, u32::MAX as usize >> 4) as u32
}

const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 37\r\nConnection: close\r\nRetry-After: 1\r\n\r\ntoo many connections, try again later\n";

/// Accepts connections for `serve` (HTTP, or gRPC with grpc.rs's
/// `connection`): each takes a permit of the connection limit or is refused
/// with `BUSY` (counted); accept errors are counted and waited out.
pub(crate) async fn accept_loop<F, Fut>(listener: TcpListener, ctx: Arc<Ctx>, serve: F)
where
    F: Fn(TcpStream, Arc<Ctx>, OwnedSemaphorePermit) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                ctx.stats.connections_accepted.fetch_add(1, Relaxed);
                match ctx.connections.clone().try_acquire_owned() {
                    Ok(permit) => {
                        tokio::spawn(serve(stream, ctx.clone(), permit));
                    }
                    Err(_) => {
                        ctx.stats.connections_refused.fetch_add(1, Relaxed);
                        // Best effort, never waits: the socket buffer of a fresh connection has room.
                        let _ = stream.try_write(BUSY);
                    }
                }
            }
            Err(_) => {
                // Out of descriptors or a connection reset before accept: wait a little, go on.
                ctx.stats.accept_errors.fetch_add(1, Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A TCP stream that notes when it last moved a byte.
pub(crate) struct Watched {
    pub(crate) inner: TcpStream,
    pub(crate) last: Arc<AtomicU64>,
    pub(crate) epoch: Instant,
}

impl Watched {
    fn moved(&self, n: usize) {
        if n > 0 {
            self.last.store(self.epoch.elapsed().as_millis() as u64, Relaxed);
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.moved(n);
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            self.moved(*n);
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Decrements the open-connection gauge when the connection task ends (however it ends).
pub(crate) struct OpenGuard(pub(crate) Arc<Ctx>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.stats.connections_open.fetch_sub(1, Relaxed);
    }
}

pub(crate) async fn connection(stream: TcpStream, ctx: Arc<Ctx>, _permit: OwnedSemaphorePermit) {
    ctx.stats.connections_open.fetch_add(1, Relaxed);
    let _open = OpenGuard(ctx.clone());
    let _ = stream.set_nodelay(true);
    let last = Arc::new(AtomicU64::new(ctx.now_ms()));
    let io = TokioIo::new(Watched { inner: stream, last: last.clone(), epoch: ctx.epoch });
    let l = &ctx.limits;
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(l.header_timeout)
        .max_buf_size(l.max_header_bytes.max(8192))
        .max_headers(l.max_headers.max(8))
        .keep_alive(true);
    let c2 = ctx.clone();
    let svc = hyper::service::service_fn(move |req| {
        let c = c2.clone();
        async move { Ok::<_, Infallible>(handle(req, c).await) }
    });
    let conn = b.serve_connection(io, svc);
    let idle = l.idle_timeout;
    let watchdog = async {
        loop {
            let since = Duration::from_millis(ctx.now_ms().saturating_sub(last.load(Relaxed)));
            if since >= idle {
                return;
            }
            tokio::time::sleep(idle - since).await;
        }
    };
    tokio::select! {
        r = conn => {
            if let Err(e) = r {
                if e.is_timeout() {
                    ctx.stats.header_timeouts.fetch_add(1, Relaxed);
                } else if e.is_parse() || e.is_parse_too_large() || e.is_parse_status() {
                    ctx.stats.bad_http.fetch_add(1, Relaxed);
                }
            }
        }
        _ = watchdog => {
            ctx.stats.idle_closed.fetch_add(1, Relaxed);
        }
    }
}

type Resp = Response<Full<Bytes>>;

fn respond(code: StatusCode, ctype: &'static str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = code;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    r
}

fn text(code: StatusCode, msg: impl Into<String>) -> Resp {
    respond(code, "text/plain; charset=utf-8", msg.into())
}

/// Scripts and styles from this server only; no inline script or style, no
/// plugins, no framing, nothing sent anywhere else.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn secure(mut r: Resp) -> Resp {
    let h = r.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("cache-control", HeaderValue::from_static("no-store"));
    r
}

fn close(mut r: Resp) -> Resp {
    r.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Compares without an early exit (the token must not leak through timing).
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'%' if i + 2 < b.len() => {
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    out
}

pub(crate) fn authorized<B>(req: &Request<B>, token: &Option<String>) -> bool {
    let Some(t) = token else { return true };
    let want = format!("Bearer {t}");
    let header_ok = req.headers().get_all(AUTHORIZATION).iter().any(|v| ct_eq(v.as_bytes(), want.as_bytes()));
    let query_ok = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').filter_map(|kv| kv.strip_prefix("token=")).any(|v| ct_eq(&percent_decode(v), t.as_bytes())));
    header_ok || query_ok
}

fn has_body<B>(req: &Request<B>) -> bool {
    req.headers().contains_key(TRANSFER_ENCODING)
        || req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.trim() != "0")
}

async fn handle(req: Request<Incoming>, ctx: Arc<Ctx>) -> Resp {
    let body_sent = has_body(&req);
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let (resp, body_read) = match (&method, path.as_str()) {
        (&Method::GET | &Method::HEAD, "/healthz") => (text(StatusCode::OK, "ok\n"), false),
        (&Method::GET | &Method::HEAD, "/" | "/index.html") => (respond(StatusCode::OK, "text/html; charset=utf-8", assets::DASHBOARD_HTML), false),
        (&Method::GET | &Method::HEAD, "/assets/charts.js") => (respond(StatusCode::OK, "text/javascript; charset=utf-8", assets::CHARTS_JS), false),
        (&Method::GET | &Method::HEAD, "/assets/dashboard.js") => (respond(StatusCode::OK, "text/javascript; charset=utf-8", assets::DASHBOARD_JS), false),
        (&Method::GET | &Method::HEAD, "/assets/dashboard.css") => (respond(StatusCode::OK, "text/css; charset=utf-8", assets::DASHBOARD_CSS), false),
        (&Method::GET | &Method::HEAD, "/metrics") => {
            // The agent's /metrics rules: with a token, only with it (serve refuses a non-loopback address without one).
            if !authorized(&req, &ctx.token) {
                ctx.stats.unauthorized.fetch_add(1, Relaxed);
                let mut r = text(StatusCode::UNAUTHORIZED, "missing or wrong token\n");
                r.headers_mut().insert("www-authenticate", HeaderValue::from_static("Bearer"));
                (r, false)
            } else {
                (metrics(&ctx).await, false)
            }
        }
        (_, crate::stream::otlp::TRACES_PATH | crate::stream::otlp::LOGS_PATH) => {
            if !authorized(&req, &ctx.token) {
                ctx.stats.unauthorized.fetch_add(1, Relaxed);
                (text(StatusCode::UNAUTHORIZED, "missing or wrong token\n"), false)
            } else if method != Method::POST {
                (text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"), false)
            } else {
                otlp_http(req, &ctx, path == crate::stream::otlp::LOGS_PATH).await
            }
        }
        (_, p) if p.starts_with("/api/") => {
            if !authorized(&req, &ctx.token) {
                ctx.stats.unauthorized.fetch_add(1, Relaxed);
                let mut r = text(StatusCode::UNAUTHORIZED, "missing or wrong token\n");
                r.headers_mut().insert("www-authenticate", HeaderValue::from_static("Bearer"));
                (r, false)
            } else {
                match (&method, p) {
                    (&Method::POST, INGEST_PATH) => ingest(req, &ctx).await,
                    (&Method::GET, "/api/state") => (state(&ctx).await, false),
                    (&Method::GET, INCIDENTS_PATH) => (incidents(&ctx).await, false),
                    (&Method::GET, TIMELINE_PATH) => (timeline(&ctx, req.uri().query()).await, false),
                    (&Method::GET, crate::server::federation::SUMMARIES_PATH) => (summaries(&ctx).await, false),
                    (_, INGEST_PATH | "/api/state" | TIMELINE_PATH) => (text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"), false),
                    _ => (text(StatusCode::NOT_FOUND, "not found\n"), false),
                }
            }
        }
        (&Method::GET | &Method::HEAD, _) => (text(StatusCode::NOT_FOUND, "not found\n"), false),
        _ => (text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n"), false),
    };
    // A body left unread is never drained: the connection ends with the answer.
    let resp = if body_sent && !body_read { close(resp) } else { resp };
    secure(resp)
}

/// `POST /api/v1/ingest`, already authorised. Returns the answer and whether the body was read.
async fn ingest(req: Request<Incoming>, ctx: &Arc<Ctx>) -> (Resp, bool) {
    let l = &ctx.limits;
    let agent = match req.headers().get(AGENT_HEADER).map(|v| v.to_str()) {
        Some(Ok(a)) => a.to_string(),
        Some(Err(_)) => {
            ctx.stats.bad_batches.fetch_add(1, Relaxed);
            return (text(StatusCode::BAD_REQUEST, format!("the {AGENT_HEADER} header is not text\n")), false);
        }
        None => {
            ctx.stats.bad_batches.fetch_add(1, Relaxed);
            return (text(StatusCode::BAD_REQUEST, format!("missing {AGENT_HEADER} header (the agent's name)\n")), false);
        }
    };
    if let Err(e) = check_agent_name(&agent) {
        ctx.stats.bad_batches.fetch_add(1, Relaxed);
        return (text(StatusCode::BAD_REQUEST, format!("{e}\n")), false);
    }
    if !ctx.rates().allow(&agent, l, &ctx.stats) {
        ctx.stats.rate_limited.fetch_add(1, Relaxed);
        let mut r = text(StatusCode::TOO_MANY_REQUESTS, format!("agent {agent} sends more than {} batches per second\n", l.agent_rate));
        r.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
        return (r, false);
    }
    let body = match read_body(req, ctx, ("batch", "batches"), false).await {
        Ok(b) => b,
        Err(r) => return (r, false),
    };
    // What the batch decodes to, reserved before it is decoded.
    let estimate = crate::server::prescan::json_batch(&body);
    let room = match reserve_decode(ctx, estimate.bytes, None).await {
        Ok(r) => r,
        Err(e) => {
            ctx.stats.bad_batches.fetch_add(1, Relaxed);
            return (refusal(e), true);
        }
    };
    // The body is in memory: wait for a decoding slot (bounded by the blocking pool).
    let Ok(permit) = ctx.ingest.clone().acquire_owned().await else {
        ctx.stats.internal_errors.fetch_add(1, Relaxed);
        return (text(StatusCode::INTERNAL_SERVER_ERROR, "ingest closed\n"), true);
    };
    let c = ctx.clone();
    let done = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let _room = room;
        let b: Batch = serde_json::from_slice(&body).map_err(|e| format!("bad batch: {e}"))?;
        if b.agent != agent {
            return Err(format!("the batch names agent {:?}, the {AGENT_HEADER} header {agent:?}", b.agent));
        }
        let mut central = c.central();
        central.ingest(b).inspect_err(|_| central.rejected += 1)
    })
    .await;
    let resp = match done {
        Ok(Ok(())) => {
            ctx.stats.batches_ingested.fetch_add(1, Relaxed);
            respond(StatusCode::NO_CONTENT, "text/plain", Bytes::new())
        }
        Ok(Err(e)) => {
            ctx.stats.bad_batches.fetch_add(1, Relaxed);
            text(StatusCode::BAD_REQUEST, format!("{e}\n"))
        }
        Err(_) => {
            ctx.stats.internal_errors.fetch_add(1, Relaxed);
            text(StatusCode::INTERNAL_SERVER_ERROR, "internal error while ingesting the batch\n")
        }
    };
    (resp, true)
}

/// Who scrapes serve's own `/metrics`, for the registry's zero-first rule (apart from `--export prometheus=`'s).
const SERVE_METRICS_ENDPOINT: &str = "serve";

/// `GET /metrics`: what `serve` correlates and its own counters, in Prometheus's text format.
async fn metrics(ctx: &Arc<Ctx>) -> Resp {
    let c = ctx.clone();
    let built = tokio::task::spawn_blocking(move || {
        let http = c.stats.families();
        let registry = {
            let central = c.central();
            central.refresh_metrics(http);
            central.registry()
        };
        registry.map(|r| r.render_for(SERVE_METRICS_ENDPOINT))
    })
    .await;
    match built {
        Ok(Some(body)) => respond(StatusCode::OK, ddscope_sysstat::promtext::CONTENT_TYPE, body),
        Ok(None) => text(StatusCode::NOT_FOUND, "metrics are off\n"),
        Err(_) => {
            ctx.stats.internal_errors.fetch_add(1, Relaxed);
            text(StatusCode::INTERNAL_SERVER_ERROR, "internal error while rendering the metrics\n")
        }
    }
}

async fn state(ctx: &Arc<Ctx>) -> Resp {
    let mut cache = ctx.state.lock().await;
    let fresh = cache.as_ref().filter(|(at, _)| at.elapsed() < ctx.limits.state_cache).map(|(_, b)| b.clone());
    let body = match fresh {
        Some(b) => b,
        None => {
            let c = ctx.clone();
            let built = tokio::task::spawn_blocking(move || {
                let limited: FxHashMap<String, u64> = c.rates().buckets.iter().map(|(k, b)| (k.clone(), b.limited)).collect();
                let counters = c.stats.json();
                let doc = match &c.federation {
                    Some(f) => f.state(counters, c.max_state_flows),
                    None => c.central().state(counters, &|n| limited.get(n).copied().unwrap_or(0)),
                };
                serde_json::to_vec(&doc).map(Bytes::from)
            })
            .await;
            match built {
                Ok(Ok(b)) => {
                    *cache = Some((Instant::now(), b.clone()));
                    b
                }
                _ => {
                    ctx.stats.internal_errors.fetch_add(1, Relaxed);
                    return text(StatusCode::INTERNAL_SERVER_ERROR, "internal error while building the state\n");
                }
            }
        }
    };
    respond(StatusCode::OK, "application/json", body)
}

/// `GET /api/v1/summaries`: this shard's mergeable statistics (built on the blocking pool).
/// The live incident feed, whole (`/api/state` has its newest entries).
pub const INCIDENTS_PATH: &str = "/api/incidents";

/// `GET /api/incidents`: the incident totals and the whole feed (newest first).
async fn incidents(ctx: &Arc<Ctx>) -> Resp {
    if ctx.federation.is_some() {
        return text(StatusCode::NOT_FOUND, "a front has no incident feed of its own: ask its shards\n");
    }
    let c = ctx.clone();
    let built = tokio::task::spawn_blocking(move || serde_json::to_vec(&c.central().incidents(usize::MAX)).map(Bytes::from)).await;
    match built {
        Ok(Ok(b)) => respond(StatusCode::OK, "application/json", b),
        _ => {
            ctx.stats.internal_errors.fetch_add(1, Relaxed);
            text(StatusCode::INTERNAL_SERVER_ERROR, "internal error while building the incident feed\n")
        }
    }
}

pub const TIMELINE_PATH: &str = "/api/timeline";

/// `from` and `to` of `/api/timeline`'s query: ns since 1970, or seconds with a fraction (`1796687943.5`).
fn timeline_range(query: Option<&str>) -> Result<(i64, i64), String> {
    let (mut from, mut to) = (i64::MIN, i64::MAX);
    for kv in query.unwrap_or("").split('&').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let slot = match k {
            "from" => &mut from,
            "to" => &mut to,
            _ => continue,
        };
        let v = String::from_utf8_lossy(&percent_decode(v)).into_owned();
        *slot = if let Ok(ns) = v.parse::<i64>() {
            if ns.unsigned_abs() < 100_000_000_000 { ns.saturating_mul(1_000_000_000) } else { ns }
        } else {
            match v.parse::<f64>() {
                Ok(s) if s.is_finite() && s.abs() < 1e11 => (s * 1e9).round() as i64,
                _ => return Err(format!("{k}={:?}: not a time (ns or seconds since 1970)", v.chars().take(40).collect::<String>())),
            }
        };
    }
    if from > to {
        return Err("from is after to".to_string());
    }
    Ok((from, to))
}

/// `GET /api/timeline?from=…&to=…`: the latest rows as a Perfetto-readable timeline (Chrome JSON).
async fn timeline(ctx: &Arc<Ctx>, query: Option<&str>) -> Resp {
    if ctx.federation.is_some() {
        return text(StatusCode::NOT_FOUND, "a front has no timeline of its own: ask its shards\n");
    }
    let (from, to) = match timeline_range(query) {
        Ok(r) => r,
        Err(e) => return text(StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    let c = ctx.clone();
    let built = tokio::task::spawn_blocking(move || {
        let mut out = vec![];
        c.central().timeline(&mut out, from, to).map(|_| Bytes::from(out))
    })
    .await;
    match built {
        Ok(Ok(b)) => {
            let mut r = respond(StatusCode::OK, "application/json", b);
            r.headers_mut().insert("content-disposition", HeaderValue::from_static("attachment; filename=\"ddscope-timeline.json\""));
            r
        }
        _ => {
            ctx.stats.internal_errors.fetch_add(1, Relaxed);
            text(StatusCode::INTERNAL_SERVER_ERROR, "internal error while building the timeline\n")
        }
    }
}

async fn summaries(ctx: &Arc<Ctx>) -> Resp {
    if ctx.federation.is_some() {
        return text(StatusCode::NOT_FOUND, "a front has no summaries of its own: ask its shards\n");
    }
    let c = ctx.clone();
    let built = tokio::task::spawn_blocking(move || {
        let limited: FxHashMap<String, u64> = c.rates().buckets.iter().map(|(k, b)| (k.clone(), b.limited)).collect();
        let counters = c.stats.json();
        let doc = c.central().mergeable(counters, &|n| limited.get(n).copied().unwrap_or(0));
        serde_json::to_vec(&doc).map(Bytes::from)
    })
    .await;
    match built {
        Ok(Ok(b)) => respond(StatusCode::OK, "application/json", b),
        _ => {
            ctx.stats.internal_errors.fetch_add(1, Relaxed);
            text(StatusCode::INTERNAL_SERVER_ERROR, "internal error while building the summaries\n")
        }
    }
}

/// How an OTLP export request ended (HTTP and gRPC answer it each their way).
pub(crate) enum OtlpOutcome {
    /// Taken; the items refused (not ddscope's, malformed) with the first reason.
    Done { refused: u64, why: Option<String> },
    Bad(String),
    Busy,
    Internal,
}

/// Why a request is not decoded (each side answers it its way).
pub(crate) enum Refusal {
    /// Over a cap: not retried (`413`, `RESOURCE_EXHAUSTED`).
    TooLarge(String),
    /// Malformed (`400`, `INVALID_ARGUMENT`).
    Bad(String),
    /// No room now: retry (`503`, `UNAVAILABLE`).
    Busy,
}

fn refusal(r: Refusal) -> Resp {
    match r {
        Refusal::TooLarge(e) => text(StatusCode::PAYLOAD_TOO_LARGE, format!("{e}\n")),
        Refusal::Bad(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
        Refusal::Busy => {
            let mut r = text(StatusCode::SERVICE_UNAVAILABLE, "busy: the decode budget is taken by other requests, retry\n");
            r.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
            r
        }
    }
}

/// Reserves `bytes` of the decode budget, on top of what `held` already
/// holds (returned grown, or trimmed to `bytes`). Over the whole budget:
/// refused (counted); no room within `ingest_wait`: busy (counted).
pub(crate) async fn reserve_decode(ctx: &Ctx, bytes: u64, held: Option<OwnedSemaphorePermit>) -> Result<OwnedSemaphorePermit, Refusal> {
    let l = &ctx.limits;
    if bytes > l.decode_budget_bytes as u64 {
        ctx.stats.decode_refused.fetch_add(1, Relaxed);
        return Err(Refusal::TooLarge(format!(
            "the request would take about {} MiB to decode, more than the {} MiB decode budget",
            bytes.div_ceil(1 << 20),
            l.decode_budget_bytes >> 20
        )));
    }
    let need = kib(bytes as usize) as usize;
    let have = held.as_ref().map_or(0, |p| p.num_permits());
    if have >= need {
        if let Some(mut h) = held {
            drop(h.split(have - need));
            return Ok(h);
        }
    }
    match tokio::time::timeout(l.ingest_wait, ctx.decode.clone().acquire_many_owned((need - have) as u32)).await {
        Ok(Ok(more)) => Ok(match held {
            Some(mut h) => {
                h.merge(more);
                h
            }
            None => more,
        }),
        _ => {
            ctx.stats.decode_busy.fetch_add(1, Relaxed);
            Err(Refusal::Busy)
        }
    }
}

/// Inflates an OTLP body (gzip), counts it (`crate::server::prescan`) against the
/// request caps and reserves what decoding it will hold; the permit goes
/// with the body to [`otlp_ingest`].
pub(crate) async fn otlp_prepare(ctx: &Arc<Ctx>, body: Bytes, gzip: bool, logs: bool) -> Result<(Bytes, OwnedSemaphorePermit), Refusal> {
    let l = &ctx.limits;
    let mut held = None;
    let body = if gzip {
        // Room for the inflated body first: it may be up to the body cap.
        held = Some(reserve_decode(ctx, l.max_body_bytes as u64, None).await?);
        let max = l.max_body_bytes;
        match tokio::task::spawn_blocking(move || gunzip(&body, max)).await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                ctx.stats.otlp_bad_requests.fetch_add(1, Relaxed);
                return Err(Refusal::Bad(e));
            }
            Err(_) => {
                ctx.stats.internal_errors.fetch_add(1, Relaxed);
                return Err(Refusal::Bad("internal error while inflating".into()));
            }
        }
    } else {
        body
    };
    let caps = crate::server::prescan::RequestCaps {
        max_items: l.otlp_max_items as u64,
        max_attributes: l.otlp_max_attributes as u64,
        max_bytes: l.decode_budget_bytes as u64,
    };
    let b = body.clone();
    let estimate = match tokio::task::spawn_blocking(move || crate::server::prescan::otlp(&b, logs, &caps)).await {
        Ok(Ok(e)) => e,
        Ok(Err(crate::server::prescan::ScanError::OverCap(e))) => {
            ctx.stats.decode_refused.fetch_add(1, Relaxed);
            return Err(Refusal::TooLarge(e));
        }
        Ok(Err(crate::server::prescan::ScanError::Malformed(e))) => {
            ctx.stats.otlp_bad_requests.fetch_add(1, Relaxed);
            return Err(Refusal::Bad(e));
        }
        Err(_) => {
            ctx.stats.internal_errors.fetch_add(1, Relaxed);
            return Err(Refusal::Bad("internal error while counting the request".into()));
        }
    };
    let room = reserve_decode(ctx, estimate.bytes, held).await?;
    Ok((body, room))
}

/// Decodes an OTLP traces or logs request (its decode cost reserved in
/// `room`) and feeds the correlator, on the blocking pool behind the same
/// ingest slots as agents' batches.
pub(crate) async fn otlp_ingest(ctx: &Arc<Ctx>, body: Bytes, logs: bool, room: OwnedSemaphorePermit) -> OtlpOutcome {
    ctx.stats.otlp_requests.fetch_add(1, Relaxed);
    if ctx.federation.is_some() {
        ctx.stats.otlp_bad_requests.fetch_add(1, Relaxed);
        return OtlpOutcome::Bad("a front takes no data: send it to the shards".into());
    }
    let Ok(Ok(permit)) = tokio::time::timeout(ctx.limits.ingest_wait, ctx.ingest.clone().acquire_owned()).await else {
        ctx.stats.otlp_busy.fetch_add(1, Relaxed);
        return OtlpOutcome::Busy;
    };
    let c = ctx.clone();
    let done = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let _room = room;
        let d = if logs {
            let r: opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest = crate::stream::otlp::parse(&body, "logs")?;
            crate::stream::otlp::decode_logs(&r)
        } else {
            crate::stream::otlp::decode_traces(&body)?
        };
        let mut refused = d.bad_spans;
        let mut why = d.first_error;
        let mut taken = 0u64;
        let mut central = c.central();
        for b in d.batches {
            let n = if logs { 1 } else { b.items.len() as u64 };
            match central.ingest_otlp(b, logs) {
                Ok((bad, e)) => {
                    // Items refused one by one inside the batch (bad_items) are refused to the sender too.
                    let bad = bad.min(n);
                    taken += n - bad;
                    refused += bad;
                    if let Some(e) = e {
                        why.get_or_insert(e);
                    }
                }
                Err(e) => {
                    central.rejected += 1;
                    refused += n;
                    why.get_or_insert(e);
                }
            }
        }
        Ok::<_, String>((taken, refused, why))
    })
    .await;
    match done {
        Ok(Ok((taken, refused, why))) => {
            ctx.stats.otlp_items.fetch_add(taken, Relaxed);
            ctx.stats.otlp_refused_items.fetch_add(refused, Relaxed);
            OtlpOutcome::Done { refused, why }
        }
        Ok(Err(e)) => {
            ctx.stats.otlp_bad_requests.fetch_add(1, Relaxed);
            OtlpOutcome::Bad(e)
        }
        Err(_) => {
            ctx.stats.internal_errors.fetch_add(1, Relaxed);
            OtlpOutcome::Internal
        }
    }
}

/// Inflates a gzip body, at most `max` bytes.
pub(crate) fn gunzip(b: &[u8], max: usize) -> Result<Bytes, String> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b).take(max as u64 + 1).read_to_end(&mut out).map_err(|e| format!("bad gzip body: {e}"))?;
    if out.len() > max {
        return Err(format!("body larger than {max} bytes once inflated"));
    }
    Ok(Bytes::from(out))
}

/// `POST /v1/traces` or `/v1/logs` (OTLP/HTTP, protobuf), already authorised.
/// Reads a request body within the server's limits (batches and OTLP
/// requests alike): a declared length over `max_body_bytes` is refused, room
/// for the body is reserved in the shared receive buffer (busy: 503 with
/// Retry-After), the body must arrive within `body_timeout` and stay under
/// the limit. Each refusal is counted; `what` (singular, plural) names the body in the answer.
async fn read_body(req: Request<Incoming>, ctx: &Arc<Ctx>, (what, whats): (&str, &str), otlp: bool) -> Result<bytes::Bytes, Resp> {
    let l = &ctx.limits;
    let too_large = || text(StatusCode::PAYLOAD_TOO_LARGE, format!("{what} larger than {} bytes\n", l.max_body_bytes));
    let declared = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > l.max_body_bytes as u64) {
        ctx.stats.too_large.fetch_add(1, Relaxed);
        return Err(too_large());
    }
    let reserve = kib(declared.map_or(l.max_body_bytes, |n| n as usize));
    let Ok(Ok(room)) = tokio::time::timeout(l.ingest_wait, ctx.buffer.clone().acquire_many_owned(reserve)).await else {
        ctx.stats.busy.fetch_add(1, Relaxed);
        if otlp {
            ctx.stats.otlp_busy.fetch_add(1, Relaxed);
        }
        let mut r = text(StatusCode::SERVICE_UNAVAILABLE, format!("busy: too many {whats} being received, retry\n"));
        r.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
        return Err(r);
    };
    let body = match tokio::time::timeout(l.body_timeout, Limited::new(req.into_body(), l.max_body_bytes).collect()).await {
        Err(_) => {
            ctx.stats.body_timeouts.fetch_add(1, Relaxed);
            return Err(text(StatusCode::REQUEST_TIMEOUT, format!("body not complete within {:?}\n", l.body_timeout)));
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            ctx.stats.too_large.fetch_add(1, Relaxed);
            return Err(too_large());
        }
        Ok(Err(e)) => {
            ctx.stats.bad_http.fetch_add(1, Relaxed);
            return Err(text(StatusCode::BAD_REQUEST, format!("cannot read the body: {e}\n")));
        }
        Ok(Ok(c)) => c.to_bytes(),
    };
    drop(room);
    Ok(body)
}

async fn otlp_http(req: Request<Incoming>, ctx: &Arc<Ctx>, logs: bool) -> (Resp, bool) {
    let ctype = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    if !ctype.starts_with("application/x-protobuf") {
        ctx.stats.otlp_bad_requests.fetch_add(1, Relaxed);
        return (text(StatusCode::UNSUPPORTED_MEDIA_TYPE, "OTLP/HTTP with Content-Type application/x-protobuf only\n"), false);
    }
    let gz = match req.headers().get("content-encoding").and_then(|v| v.to_str().ok()) {
        None | Some("identity") => false,
        Some("gzip") => true,
        Some(e) => {
            ctx.stats.otlp_bad_requests.fetch_add(1, Relaxed);
            return (text(StatusCode::UNSUPPORTED_MEDIA_TYPE, format!("Content-Encoding {e:?}: gzip or none\n")), false);
        }
    };
    let body = match read_body(req, ctx, ("request", "requests"), true).await {
        Ok(b) => b,
        Err(r) => return (r, false),
    };
    let (body, room) = match otlp_prepare(ctx, body, gz, logs).await {
        Ok(x) => x,
        Err(r) => return (refusal(r), true),
    };
    let resp = match otlp_ingest(ctx, body, logs, room).await {
        OtlpOutcome::Done { refused, why } => respond(StatusCode::OK, "application/x-protobuf", crate::stream::otlp::export_response(logs, refused, why)),
        OtlpOutcome::Bad(e) => text(StatusCode::BAD_REQUEST, format!("{e}\n")),
        OtlpOutcome::Busy => {
            let mut r = text(StatusCode::SERVICE_UNAVAILABLE, "busy: ingest slots taken, retry\n");
            r.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
            r
        }
        OtlpOutcome::Internal => text(StatusCode::INTERNAL_SERVER_ERROR, "internal error while ingesting\n"),
    };
    (resp, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_tokens_are_percent_decoded() {
        assert_eq!(percent_decode("a%2Bb%20c+d"), b"a+b c d");
        assert_eq!(percent_decode("100%"), b"100%");
        assert_eq!(percent_decode("%zz"), b"%zz");
        let req = Request::builder().uri("/api/state?x=1&token=t%26k").body(()).unwrap();
        assert!(authorized(&req, &Some("t&k".into())));
        assert!(!authorized(&req, &Some("t&kk".into())));
        let req = Request::builder().uri("/api/state").header("authorization", "Bearer s3").body(()).unwrap();
        assert!(authorized(&req, &Some("s3".into())));
        assert!(!authorized(&req, &Some("s4".into())));
    }

    #[test]
    fn rate_limit_is_a_token_bucket_per_agent_and_bounded() {
        let l = HttpLimits { agent_rate: 0.001, agent_burst: 3.0, ..HttpLimits::default() };
        let stats = HttpStats::default();
        let mut r = RateLimits::new(2);
        let got: Vec<bool> = (0..5).map(|_| r.allow("a", &l, &stats)).collect();
        assert_eq!(got, [true, true, true, false, false]);
        assert!(r.allow("b", &l, &stats));
        assert_eq!(r.buckets[&"a".to_string()].limited, 2);
        assert!(r.allow("c", &l, &stats), "a third agent evicts the least recently seen (a)");
        assert_eq!(stats.rate_entries_evicted.load(Relaxed), 1);
        assert!(!r.buckets.contains_key(&"a".to_string()));
        assert_eq!(r.buckets.len(), 2);
    }
}
