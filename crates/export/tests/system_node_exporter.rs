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

mod support;

use ddscope_export::promtext::Family;
use ddscope_export::system::{sample_proc, scrape, SystemSampler, SystemSource, DEFAULT_FORWARD_PREFIXES};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{node_exporter, wait_for};

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
    let ne = node_exporter();
    let url = format!("{}/metrics", ne.url());
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
    let mut ne = node_exporter();
    let got = Arc::new(Mutex::new(vec![]));
    let g2 = got.clone();
    let mut sampler = SystemSampler::start("pc1", SystemSource::node_exporter(&format!("{}/metrics", ne.url())), Duration::from_millis(200), move |s| {
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
