//! Real servers for the export tests: each test starts its own Prometheus,
//! InfluxDB or OpenTelemetry Collector on 127.0.0.1 with a
//! free port and a temporary directory, and `Drop` stops it (by the pid of
//! the child it started) and removes the directory, also when the test fails.

#![allow(dead_code)]

pub mod traffic;

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let base = std::env::temp_dir();
        for i in 0..1000u32 {
            let p = base.join(format!("ddscope-export-{tag}-{}-{i}", std::process::id()));
            if std::fs::create_dir(&p).is_ok() {
                return TempDir(p);
            }
        }
        panic!("cannot create a temporary directory in {}", base.display());
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A port that was free a moment ago (the server binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0").local_addr().expect("local addr").port()
}

pub fn which(name: &str) -> PathBuf {
    for dir in std::env::var("PATH").unwrap_or_default().split(':').chain(["/usr/bin", "/usr/sbin", "/usr/local/bin"]) {
        let p = Path::new(dir).join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("{name} is not installed: scripts/setup.sh installs it (apt: prometheus, prometheus-node-exporter, influxdb)");
}

/// GET; Ok((status, body)) for any HTTP answer.
pub fn http_get(url: &str) -> Result<(u16, String), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(10))).http_status_as_error(false).build().into();
    let mut r = agent.get(url).call().map_err(|e| e.to_string())?;
    let status = r.status().as_u16();
    let body = r.body_mut().with_config().limit(256 << 20).read_to_string().map_err(|e| e.to_string())?;
    Ok((status, body))
}

pub fn http_post_form(url: &str, form: &[(&str, &str)]) -> Result<(u16, String), String> {
    let agent: ureq::Agent = ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(30))).http_status_as_error(false).build().into();
    let mut r = agent.post(url).send_form(form.iter().copied()).map_err(|e| e.to_string())?;
    let status = r.status().as_u16();
    let body = r.body_mut().with_config().limit(256 << 20).read_to_string().map_err(|e| e.to_string())?;
    Ok((status, body))
}

pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Builds the command that starts a server in its directory on its port.
type StartFn = Box<dyn Fn(&Path, u16) -> Command + Send>;

pub struct Server {
    pub name: &'static str,
    pub port: u16,
    child: Option<Child>,
    pub dir: TempDir,
    pub log: PathBuf,
    start: StartFn,
    ready: Box<dyn Fn(u16) -> bool + Send>,
}

impl Server {
    fn launch(
        name: &'static str,
        dir: TempDir,
        port: u16,
        start: impl Fn(&Path, u16) -> Command + Send + 'static,
        ready: impl Fn(u16) -> bool + Send + 'static,
    ) -> Server {
        let log = dir.path().join(format!("{name}.log"));
        let mut s = Server { name, port, child: None, dir, log, start: Box::new(start), ready: Box::new(ready) };
        s.restart();
        s
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn log_text(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Starts the server (again, same port and data) and waits until it answers.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "{} is running", self.name);
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = (self.start)(self.dir.path(), self.port)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.name));
        self.child = Some(child);
        let t0 = Instant::now();
        loop {
            if (self.ready)(self.port) {
                return;
            }
            if let Some(st) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("{} exited ({st}) before it was ready:\n{}", self.name, self.log_text());
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "{} not ready after 30 s:\n{}", self.name, self.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server (SIGKILL to the child this test started) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Prometheus 2.x scraping `targets` every second (`scrape_extra` is appended
/// to the job, e.g. an `authorization:` block).
pub fn prometheus(targets: &[String], scrape_extra: &str) -> Server {
    let bin = which("prometheus");
    let dir = TempDir::new("prometheus");
    let targets = targets.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
    let cfg = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: ddscope\n    scrape_interval: 1s\n    scrape_timeout: 1s\n{scrape_extra}    static_configs:\n      - targets: [{targets}]\n"
    );
    std::fs::write(dir.path().join("prometheus.yml"), cfg).expect("write config");
    Server::launch(
        "prometheus",
        dir,
        free_port(),
        move |d, port| {
            let mut c = Command::new(&bin);
            c.arg(format!("--config.file={}", d.join("prometheus.yml").display()))
                .arg(format!("--storage.tsdb.path={}", d.join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .arg("--log.level=warn");
            c
        },
        |port| http_get(&format!("http://127.0.0.1:{port}/-/ready")).is_ok_and(|(s, _)| s == 200),
    )
}

/// InfluxDB 1.x with everything in a temporary directory, reporting off.
pub fn influxdb() -> Server {
    let bin = which("influxd");
    let dir = TempDir::new("influxdb");
    let rpc = free_port();
    let http = free_port();
    let d = dir.path().display().to_string();
    let cfg = format!(
        "reporting-enabled = false\nbind-address = \"127.0.0.1:{rpc}\"\n[meta]\n  dir = \"{d}/meta\"\n[data]\n  dir = \"{d}/data\"\n  wal-dir = \"{d}/wal\"\n  query-log-enabled = false\n[monitor]\n  store-enabled = false\n[http]\n  bind-address = \"127.0.0.1:{http}\"\n  log-enabled = false\n[subscriber]\n  enabled = false\n[continuous_queries]\n  enabled = false\n"
    );
    std::fs::write(dir.path().join("influxdb.conf"), cfg).expect("write config");
    Server::launch(
        "influxd",
        dir,
        http,
        move |d, _| {
            let mut c = Command::new(&bin);
            c.arg("-config").arg(d.join("influxdb.conf"));
            c
        },
        |port| http_get(&format!("http://127.0.0.1:{port}/ping")).is_ok_and(|(s, _)| s == 204),
    )
}

/// Runs one InfluxQL statement; returns the parsed JSON (panics on HTTP errors).
pub fn influx_query(server: &Server, db: &str, q: &str) -> serde_json::Value {
    let (status, body) = http_post_form(&format!("{}/query", server.url()), &[("db", db), ("q", q), ("epoch", "ns")]).expect("query");
    assert_eq!(status, 200, "InfluxQL {q}\n→ HTTP {status}: {body}");
    serde_json::from_str(&body).expect("JSON")
}

/// The collector built by tests/servers/build-otelcol.sh.
pub fn otelcol_binary() -> PathBuf {
    if let Ok(p) = std::env::var("DDSCOPE_OTELCOL") {
        return PathBuf::from(p);
    }
    let cache = std::env::var("XDG_CACHE_HOME").map(PathBuf::from).unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache"));
    let p = cache.join("ddscope/otelcol-0.150.0/ddscope-otelcol");
    assert!(p.is_file(), "OpenTelemetry Collector not built: run tests/servers/build-otelcol.sh (or set DDSCOPE_OTELCOL); expected {}", p.display());
    p
}

/// An OpenTelemetry Collector: OTLP/HTTP receiver on a free port, debug exporter (detailed) into the log.
pub fn otelcol() -> Server {
    otelcol_with("detailed")
}

/// Same with another debug-exporter verbosity (`basic` for benchmarks).
pub fn otelcol_with(verbosity: &str) -> Server {
    let bin = otelcol_binary();
    let dir = TempDir::new("otelcol");
    let port = free_port();
    let cfg = format!(
        "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{port}\nexporters:\n  debug:\n    verbosity: {verbosity}\nservice:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n    traces:\n      receivers: [otlp]\n      exporters: [debug]\n    metrics:\n      receivers: [otlp]\n      exporters: [debug]\n"
    );
    std::fs::write(dir.path().join("otelcol.yaml"), cfg).expect("write config");
    Server::launch(
        "otelcol",
        dir,
        port,
        move |d, _| {
            let mut c = Command::new(&bin);
            c.arg(format!("--config=file:{}", d.join("otelcol.yaml").display()));
            c
        },
        // The receiver answers 405 to GET when it is up.
        |port| http_get(&format!("http://127.0.0.1:{port}/v1/traces")).is_ok(),
    )
}

/// Instant PromQL query; returns `data.result` (panics unless status is success).
pub fn promql(server: &Server, q: &str) -> Vec<serde_json::Value> {
    let (status, body) = http_post_form(&format!("{}/api/v1/query", server.url()), &[("query", q)]).expect("query");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{q}: {e}: {body}"));
    assert_eq!(status, 200, "PromQL {q} → {body}");
    assert_eq!(v["status"], "success", "PromQL {q} → {body}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// Repository root (for docs/ and grafana/).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

/// The public captures (../shared/captures beside the checkout, or $DDSCOPE_SHARED_CAPTURES).
pub fn shared_captures() -> PathBuf {
    let root = repo_root();
    for c in [std::env::var("DDSCOPE_SHARED_CAPTURES").ok().map(PathBuf::from), Some(root.join("../shared/captures")), Some(PathBuf::from("/work/shared/captures"))]
        .into_iter()
        .flatten()
    {
        if c.is_dir() {
            return c;
        }
    }
    panic!("public captures not found: set DDSCOPE_SHARED_CAPTURES");
}
