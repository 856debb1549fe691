//! The agent's one entry point: parse `--export KIND=TARGET` options, start
//! the sinks, and fan every event, sample record and latency row out to them.

use crate::health::CaptureHealth;
use crate::influx::InfluxConfig;
use crate::otlp::OtlpConfig;
use crate::prometheus::{MetricsServer, Registry, RegistryConfig, DEFAULT_ADDR};
use crate::push::PushSink;
use ddscope_sysstat::system::{now_ns, SystemSampler, SystemSource};
use crate::SinkStatsSnapshot;
use ddscope_core::events::SubmsgEvent;
use ddscope_core::latency::explain::Incident;
use ddscope_core::latency::LatencyRow;
use ddscope_core::ros2::chain::ChainRow;
use ddscope_core::samples::SampleRecord;
use ddscope_core::topics::TopicRow;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// One kind of push sink: the names `--export` knows it by, how its target
/// is checked when the option is parsed, and how it is started.
pub struct SinkKind {
    pub names: &'static [&'static str],
    /// What the target looks like, for error messages.
    pub target: &'static str,
    pub check: fn(&str) -> Result<(), String>,
    pub start: fn(target: &str, host: &str, opts: &ExportOptions) -> Result<Box<dyn PushSink>, String>,
}

/// The registry of push sinks (Prometheus is not one: it is served, not pushed).
pub const PUSH_SINKS: &[SinkKind] = &[
    SinkKind { names: &["influx", "influxdb"], target: "http://HOST:PORT[/DB]", check: crate::influx::check_target, start: |t, _, o| crate::influx::start_sink(t, o.influx) },
    SinkKind { names: &["otlp"], target: "http://HOST:PORT", check: crate::otlp::check_target, start: |t, host, o| crate::otlp::start_sink(t, host, o.sample_traces.clone(), o.otlp) },
];

/// One `--export` option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportSpec {
    /// `prometheus[=ADDR]`: serve `/metrics` (default 127.0.0.1:9464).
    Prometheus(String),
    /// `KIND=TARGET` of a push sink in [`PUSH_SINKS`] (`kind` is its first name).
    Push { kind: &'static str, target: String },
}

impl FromStr for ExportSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, target) = s.split_once('=').map(|(k, t)| (k, Some(t))).unwrap_or((s, None));
        if kind == "prometheus" {
            return match target {
                None => Ok(ExportSpec::Prometheus(DEFAULT_ADDR.into())),
                Some(a) => {
                    a.parse::<SocketAddr>().map_err(|e| format!("prometheus={a}: not an ADDRESS:PORT ({e})"))?;
                    Ok(ExportSpec::Prometheus(a.into()))
                }
            };
        }
        let Some(k) = PUSH_SINKS.iter().find(|k| k.names.contains(&kind)) else {
            let known: Vec<String> = PUSH_SINKS.iter().map(|k| format!("{}={}", k.names[0], k.target)).collect();
            return Err(format!("unknown export {s:?}: expected prometheus[=ADDR], {}", known.join(" or ")));
        };
        match target {
            None => Err(format!("{kind}: needs a target ({kind}={})", k.target)),
            Some(t) => {
                (k.check)(t)?;
                Ok(ExportSpec::Push { kind: k.names[0], target: t.into() })
            }
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
    /// The OTLP sink makes one trace per DDS sample from the correlated rows
    /// (`serve`) instead of one span per submessage (the agent).
    pub sample_traces: Option<crate::traces::TraceSampling>,
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
            sample_traces: None,
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

/// A started push sink with its name.
struct Started {
    name: &'static str,
    sink: Arc<dyn PushSink>,
}

/// The sinks of one agent.
pub struct Exporters {
    registry: Arc<Registry>,
    server: Option<MetricsServer>,
    sinks: Vec<Started>,
    system: Option<SystemSampler>,
    ticker: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Exporters {
    /// Starts every sink in `specs` for the agent `host` (the capture name).
    /// The registry always exists (the built-in dashboard can read it) even
    /// without a `prometheus` spec.
    pub fn start(host: &str, specs: &[ExportSpec], opts: ExportOptions) -> Result<Self, ExportError> {
        let registry = Arc::new(Registry::new(opts.registry.clone()).map_err(ExportError::Config)?);
        let mut ex = Exporters { registry: registry.clone(), server: None, sinks: vec![], system: None, ticker: None };
        for spec in specs {
            match spec {
                ExportSpec::Prometheus(addr) => {
                    if ex.server.is_some() {
                        return Err(ExportError::Config("prometheus given twice".into()));
                    }
                    ex.server = Some(MetricsServer::start(addr, registry.clone(), opts.metrics_token.as_deref())?);
                }
                ExportSpec::Push { kind, target } => {
                    let k = PUSH_SINKS
                        .iter()
                        .find(|k| k.names[0] == *kind)
                        .ok_or_else(|| ExportError::Config(format!("unknown export kind {kind}")))?;
                    let sink: Arc<dyn PushSink> = Arc::from((k.start)(target, host, &opts).map_err(ExportError::Config)?);
                    registry.register_sink(kind, sink.stats().clone());
                    if let Some(t) = sink.trace_stats() {
                        registry.register_trace_stats(t);
                    }
                    ex.sinks.push(Started { name: kind, sink });
                }
            }
        }
        if let Some(src) = opts.system.clone() {
            let reg = registry.clone();
            let sinks: Vec<Arc<dyn PushSink>> = ex.sinks.iter().map(|s| s.sink.clone()).collect();
            ex.system = Some(SystemSampler::start(host, src, opts.system_interval, move |snap| {
                reg.set_system("system", snap.families_with_errors());
                for s in &sinks {
                    s.on_system(snap);
                }
            })?);
        }
        let metric_sinks: Vec<Arc<dyn PushSink>> = ex.sinks.iter().filter(|s| s.sink.wants_metrics()).map(|s| s.sink.clone()).collect();
        if !metric_sinks.is_empty() {
            let stop = Arc::new(AtomicBool::new(false));
            let st = stop.clone();
            let reg = registry.clone();
            let every = opts.otlp_metrics_interval.max(Duration::from_millis(100));
            let t = ddscope_sysstat::workers::spawn("ddscope-export-metrics", move || {
                let mut next = std::time::Instant::now() + every;
                let push = || {
                    let fams = reg.families();
                    for s in &metric_sinks {
                        s.on_metrics(&fams, now_ns());
                    }
                };
                while !st.load(Relaxed) {
                    if std::time::Instant::now() >= next {
                        push();
                        next += every;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                // A last round so that the final counts arrive.
                push();
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

    pub fn on_event(&self, e: &SubmsgEvent) {
        self.registry.on_event(e);
        for s in &self.sinks {
            s.sink.on_event(e);
        }
    }

    pub fn on_sample(&self, r: &SampleRecord) {
        self.registry.on_sample(r);
        for s in &self.sinks {
            s.sink.on_sample(r);
        }
    }

    pub fn on_latency(&self, r: &LatencyRow) {
        self.registry.on_latency(r);
        for s in &self.sinks {
            s.sink.on_latency(r);
        }
    }

    /// The incidents of a window `serve` judged (counts by cause, their points and spans).
    pub fn on_incidents(&self, incidents: &[Incident]) {
        if incidents.is_empty() {
            return;
        }
        self.registry.on_incidents(incidents);
        for s in &self.sinks {
            s.sink.on_incidents(incidents);
        }
    }

    pub fn on_chain_row(&self, r: &ChainRow) {
        self.registry.on_chain_row(r);
        for s in &self.sinks {
            s.sink.on_chain_row(r);
        }
    }

    /// The clock offsets in use per capture point (`ddscope_clock_offset_seconds`).
    pub fn set_clock_offsets(&self, offsets: &[(String, i64)]) {
        self.registry.set_clock_offsets(offsets);
    }

    /// The push sinks with their names (for their counters).
    pub fn sink_stats(&self) -> Vec<(&'static str, SinkStatsSnapshot)> {
        self.sinks.iter().map(|s| (s.name, s.sink.stats().snapshot())).collect()
    }

    pub fn on_topic_rows(&self, rows: &[TopicRow], ts_ns: i64) {
        self.registry.set_topic_nodes(rows);
        for s in &self.sinks {
            s.sink.on_topic_rows(rows, ts_ns);
        }
    }

    /// The topics' current rates (the live table's): the `ddscope_topic_rate_hz` gauges.
    pub fn set_topic_rates(&self, rates: &[crate::prometheus::TopicRate]) {
        self.registry.set_topic_rates(rates);
    }

    pub fn set_capture_health(&self, h: &CaptureHealth) {
        self.registry.set_capture_health(h);
        let now = now_ns();
        for s in &self.sinks {
            s.sink.on_capture_health(h, now);
        }
    }

    /// Waits up to `timeout` for the push sinks to drain; false if something is still queued.
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let left = || deadline.saturating_duration_since(std::time::Instant::now());
        self.sinks.iter().fold(true, |ok, s| s.sink.flush(left()) && ok)
    }

    /// Stops sampling, flushes the push sinks for up to `timeout` each and
    /// returns their final counters (what was dropped is in there).
    pub fn shutdown(mut self, timeout: Duration) -> Vec<(&'static str, SinkStatsSnapshot)> {
        self.stop_threads();
        let mut out = vec![];
        for mut s in std::mem::take(&mut self.sinks) {
            let snap = match Arc::get_mut(&mut s.sink) {
                Some(sink) => sink.shutdown(timeout),
                None => {
                    // Still shared (a thread that did not stop): flush and report.
                    s.sink.flush(timeout);
                    s.sink.stats().snapshot()
                }
            };
            out.push((s.name, snap));
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
        assert_eq!("influx=http://h:8086/db".parse::<ExportSpec>().unwrap(), ExportSpec::Push { kind: "influx", target: "http://h:8086/db".into() });
        assert_eq!("influxdb=http://h:8086".parse::<ExportSpec>().unwrap(), ExportSpec::Push { kind: "influx", target: "http://h:8086".into() });
        assert!("influx".parse::<ExportSpec>().unwrap_err().contains("needs a target"));
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
