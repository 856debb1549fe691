//! OTLP/gRPC for `serve --otlp-grpc ADDR`: the two unary calls the
//! Collector's OTLP exporters make (`TraceService/Export`, `LogsService/Export`),
//! served with hyper's HTTP/2 (cleartext, prior knowledge) — the
//! load-balancing exporter of the Collector speaks only gRPC, and these two
//! calls need no more than gRPC's message framing and its status trailers,
//! so no gRPC framework is pulled in. Bounded like the HTTP side: the same
//! connection permits, body size cap and timeouts, the same shared receive
//! budget (each message reserves its declared length before it is read, each
//! connection its flow-control window), decode budget and ingest slots (an
//! answer `UNAVAILABLE` when busy, which the Collector retries).

use crate::server::http::{authorized, otlp_ingest, otlp_prepare, Ctx, OpenGuard, OtlpOutcome, Refusal, Watched};
use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

pub const TRACES_METHOD: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
pub const LOGS_METHOD: &str = "/opentelemetry.proto.collector.logs.v1.LogsService/Export";

/// A unary gRPC answer: one message (if any), then the status trailers.
pub(crate) struct GrpcBody {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl Body for GrpcBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(d) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(d))));
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }
}

fn status_trailers(code: u32, msg: &str) -> HeaderMap {
    let mut t = HeaderMap::new();
    t.insert("grpc-status", HeaderValue::from(code));
    let clean: String = msg.chars().filter(|c| c.is_ascii() && !c.is_ascii_control()).take(200).collect();
    if let Ok(v) = HeaderValue::from_str(&clean.replace('%', "%25")) {
        if !clean.is_empty() {
            t.insert("grpc-message", v);
        }
    }
    t
}

fn answer(message: Option<Bytes>, code: u32, msg: &str) -> Response<GrpcBody> {
    let data = message.map(|m| {
        let mut b = BytesMut::with_capacity(5 + m.len());
        b.put_u8(0);
        b.put_u32(m.len() as u32);
        b.put_slice(&m);
        b.freeze()
    });
    let mut r = Response::new(GrpcBody { data, trailers: Some(status_trailers(code, msg)) });
    *r.status_mut() = StatusCode::OK;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    r
}

// gRPC status codes used here.
const OK: u32 = 0;
const INVALID_ARGUMENT: u32 = 3;
const RESOURCE_EXHAUSTED: u32 = 8;
const UNIMPLEMENTED: u32 = 12;
const INTERNAL: u32 = 13;
const UNAVAILABLE: u32 = 14;
const UNAUTHENTICATED: u32 = 16;

/// Flow-control windows of a gRPC connection and of each of its streams:
/// what a client can make the server buffer before the handler reads (and
/// reserves) a body. Each connection reserves its window from the shared
/// receive budget for as long as it is open.
const GRPC_CONN_WINDOW: u32 = 256 << 10;
const GRPC_STREAM_WINDOW: u32 = 256 << 10;

/// Reads one unary gRPC message: its 5-byte prefix first, then room for the
/// length it declares is reserved from the shared receive budget (the same
/// as HTTP bodies: `ingest_buffer_bytes`) before the rest is read. Returns
/// (compressed, message).
async fn read_message(body: Incoming, ctx: &Ctx) -> Result<(bool, Bytes), (u32, String)> {
    let l = &ctx.limits;
    let mut body = body;
    let mut buf = BytesMut::new();
    let mut room: Option<OwnedSemaphorePermit> = None;
    let mut want: Option<usize> = None;
    loop {
        if want.is_none() && buf.len() >= 5 {
            let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
            if len > l.max_body_bytes {
                ctx.stats.too_large.fetch_add(1, Relaxed);
                return Err((RESOURCE_EXHAUSTED, format!("message larger than {} bytes", l.max_body_bytes)));
            }
            let Ok(Ok(r)) = tokio::time::timeout(l.ingest_wait, ctx.buffer.clone().acquire_many_owned(crate::server::http::kib(len + 5))).await else {
                ctx.stats.busy.fetch_add(1, Relaxed);
                ctx.stats.otlp_busy.fetch_add(1, Relaxed);
                return Err((UNAVAILABLE, "busy: too many requests being received".into()));
            };
            room = Some(r);
            want = Some(len + 5);
            buf.reserve((len + 5).saturating_sub(buf.len()));
        }
        if want.is_some_and(|w| buf.len() > w) {
            return Err((INVALID_ARGUMENT, "one unary message expected, more bytes came".into()));
        }
        match body.frame().await {
            None => break,
            Some(Err(_)) => {
                ctx.stats.bad_http.fetch_add(1, Relaxed);
                return Err((INVALID_ARGUMENT, "cannot read the body".into()));
            }
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    if want.is_none() && buf.len() + d.len() > l.max_body_bytes + 5 {
                        ctx.stats.too_large.fetch_add(1, Relaxed);
                        return Err((RESOURCE_EXHAUSTED, format!("message larger than {} bytes", l.max_body_bytes)));
                    }
                    buf.extend_from_slice(&d);
                }
            }
        }
    }
    drop(room);
    if buf.len() < 5 {
        return Err((INVALID_ARGUMENT, "a gRPC message needs its 5-byte prefix".into()));
    }
    let len = buf.len() - 5;
    if want != Some(buf.len()) {
        return Err((INVALID_ARGUMENT, format!("one unary message of {} bytes expected, got {len} bytes", want.unwrap_or(5) - 5)));
    }
    let compressed = buf[0] == 1;
    Ok((compressed, buf.freeze().slice(5..)))
}

async fn handle(req: Request<Incoming>, ctx: Arc<Ctx>) -> Response<GrpcBody> {
    let logs = match req.uri().path() {
        TRACES_METHOD => false,
        LOGS_METHOD => true,
        p => return answer(None, UNIMPLEMENTED, &format!("{p}: only OTLP trace and logs export")),
    };
    if !authorized(&req, &ctx.token) {
        ctx.stats.unauthorized.fetch_add(1, Relaxed);
        return answer(None, UNAUTHENTICATED, "missing or wrong token");
    }
    let gzip_ok = req.headers().get("grpc-encoding").and_then(|v| v.to_str().ok()) == Some("gzip");
    let l = &ctx.limits;
    let (compressed, msg) = match tokio::time::timeout(l.body_timeout, read_message(req.into_body(), &ctx)).await {
        Err(_) => {
            ctx.stats.body_timeouts.fetch_add(1, Relaxed);
            return answer(None, UNAVAILABLE, "body not complete in time");
        }
        Ok(Err((code, e))) => {
            if code == INVALID_ARGUMENT {
                ctx.stats.otlp_bad_requests.fetch_add(1, Relaxed);
            }
            return answer(None, code, &e);
        }
        Ok(Ok(m)) => m,
    };
    if compressed && !gzip_ok {
        ctx.stats.otlp_bad_requests.fetch_add(1, Relaxed);
        return answer(None, UNIMPLEMENTED, "compressed message without grpc-encoding: gzip");
    }
    let (msg, room) = match otlp_prepare(&ctx, msg, compressed, logs).await {
        Ok(x) => x,
        Err(Refusal::TooLarge(e)) => return answer(None, RESOURCE_EXHAUSTED, &e),
        Err(Refusal::Bad(e)) => return answer(None, INVALID_ARGUMENT, &e),
        Err(Refusal::Busy) => return answer(None, UNAVAILABLE, "busy: the decode budget is taken by other requests"),
    };
    match otlp_ingest(&ctx, msg, logs, room).await {
        OtlpOutcome::Done { refused, why } => answer(Some(crate::stream::otlp::export_response(logs, refused, why)), OK, ""),
        OtlpOutcome::Bad(e) => answer(None, INVALID_ARGUMENT, &e),
        OtlpOutcome::Busy => answer(None, UNAVAILABLE, "busy: ingest slots taken"),
        OtlpOutcome::Internal => answer(None, INTERNAL, "internal error"),
    }
}

pub(crate) async fn connection(stream: TcpStream, ctx: Arc<Ctx>, _permit: OwnedSemaphorePermit) {
    // What the client may make hyper buffer unread on this connection is counted in the receive budget.
    let Ok(_window) = ctx.buffer.clone().try_acquire_many_owned(crate::server::http::kib(GRPC_CONN_WINDOW as usize)) else {
        ctx.stats.grpc_refused.fetch_add(1, Relaxed);
        return;
    };
    ctx.stats.connections_open.fetch_add(1, Relaxed);
    ctx.stats.grpc_connections.fetch_add(1, Relaxed);
    let _open = OpenGuard(ctx.clone());
    let _ = stream.set_nodelay(true);
    let last = Arc::new(AtomicU64::new(ctx.now_ms()));
    let io = TokioIo::new(Watched { inner: stream, last: last.clone(), epoch: ctx.epoch });
    let mut b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    b.timer(TokioTimer::new())
        .max_concurrent_streams(16)
        .initial_connection_window_size(GRPC_CONN_WINDOW)
        .initial_stream_window_size(GRPC_STREAM_WINDOW)
        .max_header_list_size(ctx.limits.max_header_bytes.max(8192) as u32)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
    let c2 = ctx.clone();
    let svc = hyper::service::service_fn(move |req| {
        let c = c2.clone();
        async move { Ok::<_, Infallible>(handle(req, c).await) }
    });
    let conn = b.serve_connection(io, svc);
    let idle = ctx.limits.idle_timeout;
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
            if r.is_err() {
                ctx.stats.bad_http.fetch_add(1, Relaxed);
            }
        }
        _ = watchdog => {
            ctx.stats.idle_closed.fetch_add(1, Relaxed);
        }
    }
}
