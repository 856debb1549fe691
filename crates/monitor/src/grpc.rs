//! OTLP/gRPC for `serve --otlp-grpc ADDR`: the two unary calls the
//! Collector's OTLP exporters make (`TraceService/Export`, `LogsService/Export`),
//! served with hyper's HTTP/2 (cleartext, prior knowledge) — the
//! load-balancing exporter of the Collector speaks only gRPC, and these two
//! calls need no more than gRPC's message framing and its status trailers,
//! so no gRPC framework is pulled in. Bounded like the HTTP side: the same
//! connection permits, body size cap and timeouts, and ingest slots (an
//! answer `UNAVAILABLE` when busy, which the Collector retries).

use crate::http::{authorized, gunzip, otlp_ingest, Ctx, OpenGuard, OtlpOutcome, Watched};
use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsPartialSuccess, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTracePartialSuccess, ExportTraceServiceResponse};
use prost::Message;
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

/// The protobuf answer to an export, with OTLP's partial success when items were refused.
pub(crate) fn export_response(logs: bool, refused: u64, why: Option<String>) -> Bytes {
    let msg = why.unwrap_or_default();
    let v = if logs {
        ExportLogsServiceResponse {
            partial_success: (refused > 0).then(|| ExportLogsPartialSuccess { rejected_log_records: refused as i64, error_message: msg }),
        }
        .encode_to_vec()
    } else {
        ExportTraceServiceResponse {
            partial_success: (refused > 0).then(|| ExportTracePartialSuccess { rejected_spans: refused as i64, error_message: msg }),
        }
        .encode_to_vec()
    };
    Bytes::from(v)
}

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

/// The message of a unary request body (5-byte gRPC prefix), inflated if compressed.
fn unframe(body: &[u8], gzip_ok: bool, max: usize) -> Result<Bytes, (u32, String)> {
    if body.len() < 5 {
        return Err((INVALID_ARGUMENT, "a gRPC message needs its 5-byte prefix".into()));
    }
    let compressed = body[0] == 1;
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    if body.len() != 5 + len {
        return Err((INVALID_ARGUMENT, format!("one unary message of {len} bytes expected, got {} bytes", body.len() - 5)));
    }
    let m = &body[5..];
    if !compressed {
        return Ok(Bytes::copy_from_slice(m));
    }
    if !gzip_ok {
        return Err((UNIMPLEMENTED, "compressed message without grpc-encoding: gzip".into()));
    }
    gunzip(m, max).map_err(|e| (INVALID_ARGUMENT, e))
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
    let body = match tokio::time::timeout(l.body_timeout, Limited::new(req.into_body(), l.max_body_bytes + 5).collect()).await {
        Err(_) => {
            ctx.stats.body_timeouts.fetch_add(1, Relaxed);
            return answer(None, UNAVAILABLE, "body not complete in time");
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            ctx.stats.too_large.fetch_add(1, Relaxed);
            return answer(None, RESOURCE_EXHAUSTED, &format!("message larger than {} bytes", l.max_body_bytes));
        }
        Ok(Err(_)) => {
            ctx.stats.bad_http.fetch_add(1, Relaxed);
            return answer(None, INVALID_ARGUMENT, "cannot read the body");
        }
        Ok(Ok(c)) => c.to_bytes(),
    };
    let msg = match unframe(&body, gzip_ok, l.max_body_bytes) {
        Ok(m) => m,
        Err((code, e)) => {
            ctx.stats.otlp_bad_requests.fetch_add(1, Relaxed);
            return answer(None, code, &e);
        }
    };
    match otlp_ingest(&ctx, msg, logs).await {
        OtlpOutcome::Done { refused, why } => answer(Some(export_response(logs, refused, why)), OK, ""),
        OtlpOutcome::Bad(e) => answer(None, INVALID_ARGUMENT, &e),
        OtlpOutcome::Busy => answer(None, UNAVAILABLE, "busy: ingest slots taken"),
        OtlpOutcome::Internal => answer(None, INTERNAL, "internal error"),
    }
}

pub(crate) async fn connection(stream: TcpStream, ctx: Arc<Ctx>, _permit: OwnedSemaphorePermit) {
    ctx.stats.connections_open.fetch_add(1, Relaxed);
    ctx.stats.grpc_connections.fetch_add(1, Relaxed);
    let _open = OpenGuard(ctx.clone());
    let _ = stream.set_nodelay(true);
    let last = Arc::new(AtomicU64::new(ctx.now_ms()));
    let io = TokioIo::new(Watched { inner: stream, last: last.clone(), epoch: ctx.epoch });
    let mut b = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    b.timer(TokioTimer::new())
        .max_concurrent_streams(16)
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
