//! System metrics against a real node_exporter 1.5 (Debian
//! `prometheus-node-exporter --no-collector.systemd`), started by the test
//! on 127.0.0.1 with a free port.
//!
//! Oracle and tolerance: ddscope samples /proc (A), node_exporter is scraped
//! (B), ddscope samples again (C), back to back. Both read the same kernel
//! counters, so every counter node_exporter reports must lie between
//! ddscope's two readings: A ≤ B ≤ C, exactly (no tolerance needed for
//! counters). Gauges (MemAvailable…) move in both directions; node_exporter's
//! value must lie within the range of ddscope's readings widened by 1 % of
//! MemTotal (what other processes may allocate or free in a few
//! milliseconds on a busy 2-core machine). MemTotal is equal.

use ddscope_sysstat::promtext::Family;
use ddscope_sysstat::system::{sample_proc, scrape, SystemSampler, SystemSource, DEFAULT_FORWARD_PREFIXES};
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// node_exporter with the collectors ddscope mirrors (cpu, meminfo, netdev,
/// loadavg); `Drop` stops it (by the pid of the child this test started).
struct NodeExporter {
    port: u16,
    child: Option<Child>,
}

impl NodeExporter {
    fn start() -> NodeExporter {
        let bin = which("prometheus-node-exporter");
        // A port that was free a moment ago (node_exporter binds it right after).
        let port = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0").local_addr().expect("local addr").port();
        let child = Command::new(&bin)
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--no-collector.systemd")
            .arg("--collector.disable-defaults")
            .args(["--collector.cpu", "--collector.meminfo", "--collector.netdev", "--collector.loadavg"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start node_exporter: {e}"));
        let mut ne = NodeExporter { port, child: Some(child) };
        let t0 = Instant::now();
        while scrape(&ne.metrics_url(), Duration::from_secs(2), &[]).is_err() {
            if let Some(st) = ne.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("node_exporter exited ({st}) before it was ready");
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "node_exporter not ready after 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        ne
    }

    fn metrics_url(&self) -> String {
        format!("http://127.0.0.1:{}/metrics", self.port)
    }

    /// Stops node_exporter (SIGKILL to the child this test started) and waits for it.
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for NodeExporter {
    fn drop(&mut self) {
        self.stop();
    }
}

fn which(name: &str) -> PathBuf {
    for dir in std::env::var("PATH").unwrap_or_default().split(':').chain(["/usr/bin", "/usr/sbin", "/usr/local/bin"]) {
        let p = Path::new(dir).join(name);
        if p.is_file() {
            return p;
        }
    }
    panic!("{name} is not installed: scripts/setup.sh installs it (apt: prometheus-node-exporter)");
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

type Key = (String, Vec<(String, String)>);

fn index(fams: &[Family]) -> BTreeMap<Key, f64> {
    let mut m = BTreeMap::new();
    for f in fams {
        for s in &f.samples {
            let mut l = s.labels.clone();
            l.sort();
            m.insert((s.name.clone(), l), s.value);
        }
    }
    m
}

#[test]
fn proc_sampler_agrees_with_node_exporter() {
    let ne = NodeExporter::start();
    let url = ne.metrics_url();
    let prefixes: Vec<String> = DEFAULT_FORWARD_PREFIXES.iter().map(|s| s.to_string()).collect();
    // Warm up (first requests are slower), then sample A, scrape B, sample C.
    scrape(&url, Duration::from_secs(5), &prefixes).unwrap();
    let a = index(&sample_proc(Path::new("/proc"), false).unwrap());
    let b = index(&scrape(&url, Duration::from_secs(5), &prefixes).unwrap());
    let c = index(&sample_proc(Path::new("/proc"), false).unwrap());

    let mem_total = a[&("node_memory_MemTotal_bytes".to_string(), vec![])];
    assert_eq!(b[&("node_memory_MemTotal_bytes".to_string(), vec![])], mem_total);
    let slack = 0.01 * mem_total;
    let mut compared = BTreeMap::<&str, usize>::new();
    for (key, va) in &a {
        let name = key.0.as_str();
        let Some(vb) = b.get(key) else {
            // Debian's node_exporter leaves out `lo` (--collector.netdev.device-exclude=^lo$).
            assert!(key.1.iter().any(|(k, v)| k == "device" && v == "lo"), "node_exporter has no {key:?}");
            continue;
        };
        let vc = c[key];
        if name.ends_with("_total") {
            assert!(*va <= *vb && *vb <= vc, "{key:?}: ddscope {va} then {vc}, node_exporter {vb} in between");
        } else if name.starts_with("node_memory_") {
            let (lo, hi) = (va.min(vc), va.max(vc));
            assert!(*vb >= lo - slack && *vb <= hi + slack, "{key:?}: ddscope {va}..{vc}, node_exporter {vb}");
        } else {
            // Load averages: updated by the kernel every 5 s.
            assert!((va - vb).abs() <= 0.5 + (va - vc).abs(), "{key:?}: {va} / {vb} / {vc}");
        }
        *compared.entry(if name.starts_with("node_network_") { "network" } else if name.starts_with("node_cpu") { "cpu" } else { "other" }).or_default() += 1;
    }
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    assert!(compared["cpu"] >= 8 * cores, "{compared:?}");
    assert!(compared["network"] >= 16, "at least one interface besides lo: {compared:?}");
    for name in ["node_cpu_seconds_total", "node_memory_MemAvailable_bytes", "node_network_receive_bytes_total", "node_network_transmit_packets_total", "node_network_receive_drop_total", "node_network_transmit_errs_total"] {
        assert!(a.keys().any(|k| k.0 == name) && b.keys().any(|k| k.0 == name), "{name} in both");
    }
}

#[test]
fn node_exporter_source_is_forwarded_and_a_dead_one_is_counted() {
    let mut ne = NodeExporter::start();
    let got = Arc::new(Mutex::new(vec![]));
    let g2 = got.clone();
    let mut sampler = SystemSampler::start("pc1", SystemSource::node_exporter(&ne.metrics_url()), Duration::from_millis(200), move |s| {
        g2.lock().unwrap().push(s.clone());
    })
    .unwrap();
    wait_for("a forwarded snapshot", Duration::from_secs(10), || got.lock().unwrap().iter().any(|s| !s.families.is_empty()));
    {
        let snaps = got.lock().unwrap();
        let s = snaps.iter().find(|s| !s.families.is_empty()).unwrap();
        assert!(s.families.iter().any(|f| f.name == "node_cpu_seconds_total"));
        assert!(s.families.iter().all(|f| DEFAULT_FORWARD_PREFIXES.iter().any(|p| f.name.starts_with(p))), "only the forwarded families");
        assert!(!s.families.iter().any(|f| f.name.starts_with("go_") || f.name.starts_with("promhttp_")));
    }
    ne.stop();
    wait_for("an error snapshot", Duration::from_secs(10), || got.lock().unwrap().last().is_some_and(|s| s.errors_total > 0));
    let last = got.lock().unwrap().last().cloned().unwrap();
    assert!(last.families.is_empty(), "no stale values after a failed scrape");
    assert!(last.last_error.as_deref().is_some_and(|e| e.contains("127.0.0.1")), "{:?}", last.last_error);
    let fams = last.families_with_errors();
    assert_eq!(fams[0].name, "ddscope_system_sample_errors_total");
    sampler.stop();
}
