//! `ddscope serve`, put together: the state ([`Central`], `central.rs`)
//! behind the HTTP server (`http.rs`) and, when asked for, OTLP/gRPC
//! (`grpc.rs`), on a small tokio runtime of its own. Its configuration and
//! caps are in `config.rs`; this file only starts and stops the pieces, so
//! the files below it never refer back to it.

use crate::server::http::{self, Ctx, HttpStats};
use anyhow::Context as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

pub use crate::server::central::Central;
pub use crate::server::config::{HttpLimits, ServeConfig, StateCaps, MAX_AGENTS};

/// A running server; dropping it stops it (connections are closed).
pub struct Server {
    rt: Option<tokio::runtime::Runtime>,
    addr: SocketAddr,
    grpc_addr: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    ctx: Arc<Ctx>,
}

impl Server {
    /// Binds `cfg.listen` and starts serving on a runtime of its own.
    pub fn start(cfg: ServeConfig) -> anyhow::Result<Server> {
        tune_allocator();
        let mut limits = cfg.limits.clone();
        let fds = raise_open_file_limit();
        // Leave room for the listener, the runtime and the process's own files.
        limits.max_connections = limits.max_connections.clamp(1, fds.saturating_sub(64).max(16) as usize);
        let std_listener = std::net::TcpListener::bind(cfg.listen).with_context(|| format!("cannot listen on {}", cfg.listen))?;
        std_listener.set_nonblocking(true).context("cannot make the listening socket non-blocking")?;
        let addr = std_listener.local_addr().context("cannot read the listening address")?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(limits.max_concurrent_ingest.max(1) + 4)
            .thread_name("ddscope-serve")
            .enable_io()
            .enable_time()
            .build()
            .context("cannot start the server's runtime")?;
        if !cfg.federate.is_empty() && !cfg.export.is_empty() {
            anyhow::bail!("--export with --federate: a front correlates nothing; export from the shards (their sums equal one serve)");
        }
        let central = Central::start(cfg.clone()).map_err(|e| anyhow::anyhow!("--export: {e}"))?;
        let metrics_addr = central.metrics_addr();
        let ctx = http::context(central, &cfg, limits)?;
        let listener = {
            let _guard = rt.enter();
            TcpListener::from_std(std_listener).context("cannot register the listening socket")?
        };
        rt.spawn(http::accept_loop(listener, ctx.clone(), http::connection));
        let mut grpc_addr = None;
        if let Some(a) = cfg.otlp_grpc {
            let l = std::net::TcpListener::bind(a).with_context(|| format!("cannot listen for OTLP/gRPC on {a}"))?;
            l.set_nonblocking(true).context("cannot make the OTLP/gRPC socket non-blocking")?;
            grpc_addr = l.local_addr().ok();
            let l = {
                let _guard = rt.enter();
                TcpListener::from_std(l).context("cannot register the OTLP/gRPC socket")?
            };
            rt.spawn(http::accept_loop(l, ctx.clone(), crate::server::grpc::connection));
        }
        let c = ctx.clone();
        rt.spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(500));
            loop {
                every.tick().await;
                let c = c.clone();
                let tick = move || {
                    let http = c.stats.families();
                    let mut central = c.central();
                    central.tick();
                    central.refresh_metrics(http);
                };
                if tokio::task::spawn_blocking(tick).await.is_err() {
                    // The panic poisoned the lock; the next tick recovers it.
                }
            }
        });
        Ok(Server { rt: Some(rt), addr, grpc_addr, metrics_addr, ctx })
    }

    /// Where `--export prometheus=ADDR` serves `/metrics` (besides `/metrics` on the listening address).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Hands what was judged so far to the exporters and waits up to `timeout` for the push sinks to
    /// deliver; returns their counters (what they dropped is in there). Samples not judged yet stay
    /// pending (`ddscope_serve_correlation{what="pending_samples"}`); the incident windows open are judged.
    pub fn flush_export(&self, timeout: Duration) -> Vec<(&'static str, ddscope_export::SinkStatsSnapshot)> {
        let mut c = self.ctx.central();
        c.tick();
        // The incident windows still open are judged now: their counts and spans go out with the rest.
        c.flush_incidents();
        c.refresh_metrics(self.ctx.stats.families());
        c.flush_export(timeout);
        c.export_stats()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where OTLP/gRPC is accepted, if asked for.
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        self.grpc_addr
    }

    /// The effective limits (`max_connections` lowered to the open-file limit).
    pub fn limits(&self) -> &HttpLimits {
        &self.ctx.limits
    }

    pub fn stats(&self) -> &HttpStats {
        &self.ctx.stats
    }

    /// Blocks until the process ends.
    pub fn wait(self) {
        loop {
            std::thread::park();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// Serves until the process ends. Calls `on_ready` with the bound address
/// and the effective limits once listening.
pub fn serve(cfg: ServeConfig, on_ready: impl FnOnce(SocketAddr, Option<SocketAddr>, &HttpLimits)) -> anyhow::Result<()> {
    let server = Server::start(cfg)?;
    on_ready(server.addr(), server.grpc_addr(), server.limits());
    server.wait();
    Ok(())
}

/// Keeps what decoding a request allocated from staying resident after it.
/// glibc's allocator gives each thread that allocates an arena of its own
/// (up to 8 per core) and raises its mmap threshold to the largest block
/// freed so far, so the tens of MB one large request decodes into stayed
/// in the arena of whichever blocking thread decoded it: under a flood of
/// 10 MB OTLP requests `serve` held 276 MB, of which ~100 MB were free
/// blocks. Two arenas and a fixed 256 KiB threshold (large buffers mapped
/// and unmapped whole) keep it to what is live.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before the runtime's threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
    }
}

/// Raises the soft limit on open files to the hard limit (many connections
/// need many descriptors); returns the soft limit in force.
fn raise_open_file_limit() -> u64 {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain syscalls with a valid, initialised struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 1024;
        }
        if r.rlim_cur < r.rlim_max {
            let want = libc::rlimit { rlim_cur: r.rlim_max, rlim_max: r.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                r.rlim_cur = r.rlim_max;
            }
        }
    }
    r.rlim_cur
}

