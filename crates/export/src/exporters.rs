//! The agent's one entry point: parse `--export KIND=TARGET` options, start
//! the sinks, and fan every event, sample record and latency row out to them.

use crate::health::CaptureHealth;
use crate::influx::{InfluxConfig, InfluxSink};
use crate::otlp::{OtlpConfig, OtlpSink};
use crate::prometheus::{MetricsServer, Registry, RegistryConfig, DEFAULT_ADDR};
use crate::system::{now_ns, SystemSampler, SystemSource};
use crate::SinkStatsSnapshot;
use ddscope_core::events::SubmsgEvent;
use ddscope_core::latency::LatencyRow;
use ddscope_core::samples::SampleRecord;
use ddscope_core::topics::TopicRow;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// One `--export` option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportSpec {
    /// `prometheus[=ADDR]`: serve `/metrics` (default 127.0.0.1:9464).
    Prometheus(String),
    /// `influx=http://HOST:PORT[/DB]`: InfluxDB 1.x line protocol (database default `ddscope`).
    Influx(String),
    /// `otlp=http://HOST:PORT`: OTLP/HTTP protobuf (`/v1/traces`, `/v1/metrics`).
    Otlp(String),
}

impl FromStr for ExportSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, target) = s.split_once('=').map(|(k, t)| (k, Some(t))).unwrap_or((s, None));
        match (kind, target) {
            ("prometheus", None) => Ok(ExportSpec::Prometheus(DEFAULT_ADDR.into())),
            ("prometheus", Some(a)) => {
                a.parse::<SocketAddr>().map_err(|e| format!("prometheus={a}: not an ADDRESS:PORT ({e})"))?;
                Ok(ExportSpec::Prometheus(a.into()))
            }
            ("influx" | "influxdb", Some(u)) => {
                InfluxConfig::from_url(u)?;
                Ok(ExportSpec::Influx(u.into()))
            }
            ("otlp", Some(u)) => {
                if !(u.starts_with("http://") || u.starts_with("https://")) {
                    return Err(format!("otlp={u}: expected http://HOST:PORT (OTLP/HTTP, usually port 4318)"));
                }
                Ok(ExportSpec::Otlp(u.into()))
            }
            ("influx" | "influxdb" | "otlp", None) => Err(format!("{kind}: needs a URL ({kind}=http://HOST:PORT)")),
            _ => Err(format!("unknown export {s:?}: expected prometheus[=ADDR], influx=URL or otlp=URL")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub registry: RegistryConfig,
    /// Bearer token for `/metrics` (required for a non-loopback address).
    pub metrics_token: Option<String>,
    /// System metrics source; `None` disables them.
    pub system: Option<SystemSource>,
    pub system_interval: Duration,
    /// How often the registry is pushed as OTLP metrics.
    pub otlp_metrics_interval: Duration,
    /// Applied to the InfluxDB sink after parsing its URL.
    pub influx: fn(&mut InfluxConfig),
    /// Applied to the OTLP sink.
    pub otlp: fn(&mut OtlpConfig),
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            registry: RegistryConfig::default(),
            metrics_token: None,
            system: Some(SystemSource::proc()),
            system_interval: Duration::from_secs(1),
            otlp_metrics_interval: Duration::from_secs(10),
            influx: |_| {},
            otlp: |_| {},
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Serve(#[from] crate::prometheus::ServeError),
    /// The I/O error is the source (printed by an error chain), not repeated in the message.
    #[error("cannot start a thread")]
    Thread(#[from] std::io::Error),
}

/// The sinks of one agent.
pub struct Exporters {
    registry: Arc<Registry>,
    server: Option<MetricsServer>,
    influx: Option<Arc<InfluxSink>>,
    otlp: Option<Arc<OtlpSink>>,
    system: Option<SystemSampler>,
    ticker: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Exporters {
    /// Starts every sink in `specs` for the agent `host` (the capture name).
    /// The registry always exists (the built-in dashboard can read it) even
    /// without a `prometheus` spec.
    pub fn start(host: &str, specs: &[ExportSpec], opts: ExportOptions) -> Result<Self, ExportError> {
        let registry = Arc::new(Registry::new(opts.registry.clone()).map_err(ExportError::Config)?);
        let mut ex = Exporters { registry: registry.clone(), server: None, influx: None, otlp: None, system: None, ticker: None };
        for spec in specs {
            match spec {
                ExportSpec::Prometheus(addr) => {
                    if ex.server.is_some() {
                        return Err(ExportError::Config("prometheus given twice".into()));
                    }
                    ex.server = Some(MetricsServer::start(addr, registry.clone(), opts.metrics_token.as_deref())?);
                }
                ExportSpec::Influx(url) => {
                    let mut cfg = InfluxConfig::from_url(url).map_err(ExportError::Config)?;
                    (opts.influx)(&mut cfg);
                    let sink = InfluxSink::start(cfg).map_err(ExportError::Config)?;
                    registry.register_sink("influx", sink.stats().clone());
                    ex.influx = Some(Arc::new(sink));
                }
                ExportSpec::Otlp(url) => {
                    let mut cfg = OtlpConfig::new(url, host);
                    (opts.otlp)(&mut cfg);
                    let sink = OtlpSink::start(cfg).map_err(ExportError::Config)?;
                    registry.register_sink("otlp", sink.stats().clone());
                    ex.otlp = Some(Arc::new(sink));
                }
            }
        }
        if let Some(src) = opts.system.clone() {
            let reg = registry.clone();
            let influx = ex.influx.clone();
            ex.system = Some(SystemSampler::start(host, src, opts.system_interval, move |snap| {
                reg.set_system("system", snap.families_with_errors());
                if let Some(i) = &influx {
                    i.on_system(snap);
                }
            })?);
        }
        if let Some(otlp) = ex.otlp.clone() {
            let stop = Arc::new(AtomicBool::new(false));
            let st = stop.clone();
            let reg = registry.clone();
            let every = opts.otlp_metrics_interval.max(Duration::from_millis(100));
            let t = std::thread::Builder::new().name("ddscope-otlp-metrics".into()).spawn(move || {
                let mut next = std::time::Instant::now() + every;
                while !st.load(Relaxed) {
                    if std::time::Instant::now() >= next {
                        otlp.export_families(&reg.families(), now_ns());
                        next += every;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                // A last round so that the final counts arrive.
                otlp.export_families(&reg.families(), now_ns());
            })?;
            ex.ticker = Some((stop, t));
        }
        Ok(ex)
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Address `/metrics` is served on, when Prometheus export is on.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(|s| s.addr())
    }

    pub fn influx(&self) -> Option<&Arc<InfluxSink>> {
        self.influx.as_ref()
    }

    pub fn otlp(&self) -> Option<&Arc<OtlpSink>> {
        self.otlp.as_ref()
    }

    pub fn on_event(&self, e: &SubmsgEvent) {
        self.registry.on_event(e);
        if let Some(i) = &self.influx {
            i.on_event(e);
        }
        if let Some(o) = &self.otlp {
            o.on_event(e);
        }
    }

    pub fn on_sample(&self, r: &SampleRecord) {
        self.registry.on_sample(r);
        if let Some(i) = &self.influx {
            i.on_sample(r);
        }
    }

    pub fn on_latency(&self, r: &LatencyRow) {
        self.registry.on_latency(r);
        if let Some(i) = &self.influx {
            i.on_latency(r);
        }
    }

    pub fn on_topic_rows(&self, rows: &[TopicRow], ts_ns: i64) {
        if let Some(i) = &self.influx {
            i.on_topic_rows(rows, ts_ns);
        }
    }

    pub fn set_capture_health(&self, h: &CaptureHealth) {
        self.registry.set_capture_health(h);
        if let Some(i) = &self.influx {
            i.on_capture_health(h, now_ns());
        }
    }

    /// Waits up to `timeout` for the push sinks to drain; false if something is still queued.
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let left = || deadline.saturating_duration_since(std::time::Instant::now());
        let a = self.influx.as_ref().is_none_or(|i| i.flush(left()));
        let b = self.otlp.as_ref().is_none_or(|o| o.flush(left()));
        a && b
    }

    /// Stops sampling, flushes the push sinks for up to `timeout` each and
    /// returns their final counters (what was dropped is in there).
    pub fn shutdown(mut self, timeout: Duration) -> Vec<(&'static str, SinkStatsSnapshot)> {
        self.stop_threads();
        let mut out = vec![];
        if let Some(i) = self.influx.take() {
            out.push(("influx", match Arc::try_unwrap(i) {
                Ok(s) => s.shutdown(timeout),
                Err(shared) => {
                    shared.flush(timeout);
                    shared.stats().snapshot()
                }
            }));
        }
        if let Some(o) = self.otlp.take() {
            out.push(("otlp", match Arc::try_unwrap(o) {
                Ok(s) => s.shutdown(timeout),
                Err(shared) => {
                    shared.flush(timeout);
                    shared.stats().snapshot()
                }
            }));
        }
        out
    }

    fn stop_threads(&mut self) {
        if let Some(mut s) = self.system.take() {
            s.stop();
        }
        if let Some((stop, t)) = self.ticker.take() {
            stop.store(true, Relaxed);
            let _ = t.join();
        }
    }
}

impl Drop for Exporters {
    fn drop(&mut self) {
        // Sinks flush in their own Drop (shutdown timeout of their config).
        self.stop_threads();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_clear_errors() {
        assert_eq!("prometheus".parse::<ExportSpec>().unwrap(), ExportSpec::Prometheus("127.0.0.1:9464".into()));
        assert_eq!("prometheus=127.0.0.1:1".parse::<ExportSpec>().unwrap(), ExportSpec::Prometheus("127.0.0.1:1".into()));
        assert!("prometheus=localhost".parse::<ExportSpec>().unwrap_err().contains("ADDRESS:PORT"));
        assert_eq!("influx=http://h:8086/db".parse::<ExportSpec>().unwrap(), ExportSpec::Influx("http://h:8086/db".into()));
        assert!("influx".parse::<ExportSpec>().unwrap_err().contains("needs a URL"));
        assert!("otlp=h:4318".parse::<ExportSpec>().unwrap_err().contains("http://"));
        assert!("kafka=x".parse::<ExportSpec>().unwrap_err().contains("unknown export"));
    }

    #[test]
    fn non_loopback_metrics_need_a_token() {
        let specs = ["prometheus=0.0.0.0:0".parse().unwrap()];
        let e = Exporters::start("t", &specs, ExportOptions { system: None, ..Default::default() }).err().expect("must refuse");
        assert!(e.to_string().contains("needs a token"), "{e}");
    }
}

/// The exporters as a pipeline stage: every submessage and sample record.
impl ddscope_core::pipeline::Analysis for Exporters {
    fn event(&mut self, e: &SubmsgEvent) {
        self.on_event(e);
    }
    fn sample(&mut self, r: &SampleRecord) {
        self.on_sample(r);
    }
}
