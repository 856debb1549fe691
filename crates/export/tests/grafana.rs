//! The Grafana dashboard and provisioning files, checked structurally
//! (Grafana itself is not installable here). Oracles: Prometheus 2.42's
//! `promtool check rules` and a running Prometheus for every PromQL
//! expression, a running InfluxDB 1.6.7 for every InfluxQL query (each must
//! be accepted and return data once ddscope's sinks have fed the servers),
//! and grafana/make_dashboard.py (the committed JSON is what it generates
//! from docs/queries/).

mod support;

use ddscope_core::decode::DecoderConfig;
use ddscope_core::latency::app::AppTruth;
use ddscope_core::latency::files::{correlate_files, CaptureInput, FileDecoding};
use ddscope_core::session::correlation_samples;
use ddscope_core::latency::{Correlator, CorrelatorConfig, LatencyRow};
use ddscope_core::pipeline::analyse_file;
use ddscope_core::samples::SampleConfig;
use ddscope_export::influx::{InfluxConfig, InfluxSink};
use ddscope_export::prometheus::{MetricsServer, Registry, RegistryConfig};
use ddscope_sysstat::system::{sample_proc, SystemSnapshot};
use ddscope_export::{CaptureHealth, DeliveryConfig, SinkStats};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use support::traffic::{self, T0};
use support::{influx_query, influxdb, prometheus, promql, repo_root, wait_for, which, TempDir};

fn dashboard() -> Value {
    let p = repo_root().join("grafana/dashboards/ddscope.json");
    serde_json::from_str(&std::fs::read_to_string(&p).expect("dashboard")).unwrap_or_else(|e| panic!("{}: invalid JSON: {e}", p.display()))
}

/// Data sources of the provisioning file: (uid, type), read with a small
/// line reader (list items `- name:` with `uid:` and `type:` keys).
fn provisioned_datasources() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo_root().join("grafana/provisioning/datasources/ddscope.yaml")).expect("provisioning");
    assert!(text.lines().any(|l| l.trim() == "apiVersion: 1"), "apiVersion: 1");
    let mut out = vec![];
    let mut cur: BTreeMap<String, String> = BTreeMap::new();
    let mut in_list = false;
    for line in text.lines().map(|l| l.split(" #").next().unwrap_or(l)) {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if line.starts_with("datasources:") {
            in_list = true;
            continue;
        }
        if !in_list {
            continue;
        }
        let t = line.trim_start();
        let indent = line.len() - t.len();
        if let Some(rest) = t.strip_prefix("- ") {
            if !cur.is_empty() {
                out.push(cur.clone());
                cur.clear();
            }
            if let Some((k, v)) = rest.split_once(':') {
                cur.insert(k.trim().into(), v.trim().into());
            }
        } else if indent == 4 {
            if let Some((k, v)) = t.split_once(':') {
                cur.insert(k.trim().into(), v.trim().into());
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out.into_iter().map(|m| (m.get("uid").cloned().expect("uid"), m.get("type").cloned().expect("type"))).collect()
}

enum Query {
    Prom(String),
    Influx(String),
}

/// Every query of the dashboard (panels, their targets, template variables).
fn queries(d: &Value, sources: &BTreeMap<String, String>) -> Vec<(String, Query)> {
    let mut out = vec![];
    let mut ids = BTreeSet::new();
    let panels = d["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10);
    for p in panels {
        let title = p["title"].as_str().expect("title").to_string();
        assert!(ids.insert(p["id"].as_i64().expect("id")), "duplicate panel id in {title}");
        let g = &p["gridPos"];
        assert!(g["w"].as_i64().is_some_and(|w| (1..=24).contains(&w)) && g["h"].as_i64().is_some() && g["x"].as_i64().is_some(), "{title}: gridPos");
        if p["type"] == "row" {
            continue;
        }
        let ds = &p["datasource"];
        let uid = ds["uid"].as_str().unwrap_or_else(|| panic!("{title}: no datasource"));
        assert_eq!(sources.get(uid).map(String::as_str), ds["type"].as_str(), "{title}: datasource {uid} is not provisioned with that type");
        let targets = p["targets"].as_array().unwrap_or_else(|| panic!("{title}: no targets"));
        assert!(!targets.is_empty(), "{title}: no targets");
        let mut refs = BTreeSet::new();
        for t in targets {
            assert!(refs.insert(t["refId"].as_str().expect("refId").to_string()), "{title}: duplicate refId");
            let tuid = t["datasource"]["uid"].as_str().unwrap_or(uid);
            assert!(sources.contains_key(tuid), "{title}: target datasource {tuid} not provisioned");
            match sources[tuid].as_str() {
                "prometheus" => out.push((title.clone(), Query::Prom(t["expr"].as_str().expect("expr").to_string()))),
                "influxdb" => {
                    assert_eq!(t["rawQuery"], true, "{title}: raw InfluxQL");
                    out.push((title.clone(), Query::Influx(t["query"].as_str().expect("query").to_string())))
                }
                other => panic!("{title}: unexpected datasource type {other}"),
            }
        }
    }
    for v in d["templating"]["list"].as_array().expect("templating") {
        let name = v["name"].as_str().unwrap().to_string();
        let uid = v["datasource"]["uid"].as_str().expect("variable datasource");
        match sources[uid].as_str() {
            "prometheus" => {
                // Grafana's label_values(SELECTOR, label): the selector is PromQL.
                let q = v["query"]["query"].as_str().expect("query");
                let sel = q.strip_prefix("label_values(").and_then(|r| r.rsplit_once(',')).map(|(s, _)| s.trim().to_string()).unwrap_or_else(|| panic!("{name}: {q}"));
                out.push((format!("variable {name}"), Query::Prom(sel)));
            }
            _ => out.push((format!("variable {name}"), Query::Influx(v["query"].as_str().expect("query").to_string()))),
        }
    }
    out
}

fn prom_vars(e: &str) -> String {
    e.replace("$__rate_interval", "1m").replace("$capture", ".*").replace("$topic", ".*")
}

#[test]
fn dashboard_is_what_the_generator_makes_from_the_documented_queries() {
    let dir = TempDir::new("grafana-gen");
    let out = dir.path().join("ddscope.json");
    let st = Command::new("python3").arg(repo_root().join("grafana/make_dashboard.py")).arg("--out").arg(&out).status().expect("python3");
    assert!(st.success());
    let gen: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(gen, dashboard(), "grafana/dashboards/ddscope.json is stale: run python3 grafana/make_dashboard.py");
}

#[test]
fn dashboard_structure_and_promql_syntax() {
    let d = dashboard();
    assert!(d["schemaVersion"].as_i64().unwrap() >= 36);
    assert!(!d["uid"].as_str().unwrap().is_empty());
    let sources: BTreeMap<String, String> = provisioned_datasources().into_iter().collect();
    assert_eq!(sources.values().cloned().collect::<BTreeSet<_>>(), BTreeSet::from(["prometheus".to_string(), "influxdb".to_string()]));
    let qs = queries(&d, &sources);
    let dash_prov = std::fs::read_to_string(repo_root().join("grafana/provisioning/dashboards/ddscope.yaml")).unwrap();
    assert!(dash_prov.contains("apiVersion: 1") && dash_prov.contains("type: file") && dash_prov.contains("path:"));

    // promtool check rules: every expression as a recording rule.
    let dir = TempDir::new("grafana-promtool");
    let mut rules = String::from("groups:\n  - name: ddscope-dashboard\n    rules:\n");
    let mut n = 0;
    for (_, q) in &qs {
        if let Query::Prom(e) = q {
            n += 1;
            rules.push_str(&format!("      - record: ddscope:dashboard:expr{n}\n        expr: {}\n", serde_json::to_string(&prom_vars(e)).unwrap()));
        }
    }
    assert!(n >= 15, "{n} PromQL expressions");
    let good = dir.path().join("rules.yml");
    std::fs::write(&good, &rules).unwrap();
    let promtool = which("promtool");
    let o = Command::new(&promtool).args(["check", "rules"]).arg(&good).output().unwrap();
    assert!(o.status.success(), "promtool: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("{n} rules found")));
    // The check can fail: a broken expression is refused.
    let bad = dir.path().join("bad.yml");
    std::fs::write(&bad, "groups:\n  - name: x\n    rules:\n      - record: x:y\n        expr: \"rate(ddscope_samples_total[1m]\"\n").unwrap();
    assert!(!Command::new(&promtool).args(["check", "rules"]).arg(&bad).output().unwrap().status.success());
}

fn feed(path: &Path, name: &str, reg: &Registry, influx: &InfluxSink) -> ddscope_core::decode::DecodeStats {
    let res = analyse_file(
        path,
        name,
        DecoderConfig::default(),
        SampleConfig { timeout_ns: 2_000_000_000, ..SampleConfig::default() },
        None,
        &mut |e| {
            reg.on_event(e);
            influx.on_event(e);
        },
        &mut |r| {
            reg.on_sample(&r);
            influx.on_sample(&r);
        },
    )
    .expect("decode");
    res.decoder.stats
}

fn correlate(sender: PathBuf, receiver: PathBuf) -> Vec<LatencyRow> {
    let cfg = CorrelatorConfig { captures: vec!["pc1".into(), "pc2".into()], offsets_ns: vec![0, 0], window_ns: 2_000_000_000, period_ns: None, message_rows: true, submessage_rows: true, ..Default::default() };
    let mut c = Correlator::new(cfg, Arc::new(AppTruth::default()));
    let mut rows = vec![];
    correlate_files(&[CaptureInput { path: sender, name: "pc1".into() }, CaptureInput { path: receiver, name: "pc2".into() }], FileDecoding { samples: correlation_samples(5_000_000_000), ..FileDecoding::default() }, &mut c, &[], &mut |r| rows.push(r)).unwrap();
    c.finish(&mut |r| rows.push(r));
    rows
}

/// Panels whose data only `serve` makes from traced agents (ROS 2 layers,
/// chains, timing against the period, budgets, clock offsets): this test's
/// untraced rows leave them empty; tests/test_serve_export.py runs a traced
/// lab through serve and Prometheus and requires data from every panel.
const SERVE_TRACED_PANELS: &[&str] = &[
    "In time, late and over budget",
    "Latency jitter and clock offsets",
    "Where a message's time goes: p50 per layer",
    "ROS 2 end to end per topic (p50, p99)",
    "Chain end to end (p50, p99)",
    "Chain hops: p50 per hop and layer",
];

#[test]
fn every_dashboard_query_runs_on_real_servers_and_returns_data() {
    let d = dashboard();
    let sources: BTreeMap<String, String> = provisioned_datasources().into_iter().collect();
    let qs = queries(&d, &sources);
    for t in SERVE_TRACED_PANELS {
        assert!(qs.iter().any(|(title, _)| title == t), "SERVE_TRACED_PANELS names {t:?}, which the dashboard no longer has");
    }

    // Feed both servers the way an agent and `ddscope serve` would.
    let dir = TempDir::new("grafana-data");
    let (snd, rcv, _) = traffic::two_captures(dir.path());
    let registry = Arc::new(Registry::new(RegistryConfig::default()).unwrap());
    let influx_server = influxdb();
    let mut icfg = InfluxConfig::new(&influx_server.url(), "ddscope");
    icfg.delivery = DeliveryConfig { batch_max_age: Duration::from_millis(100), ..Default::default() };
    let influx = InfluxSink::start(icfg).unwrap();
    let stats = feed(&snd, "pc1", &registry, &influx);
    feed(&rcv, "pc2", &registry, &influx);
    for r in correlate(snd, rcv) {
        registry.on_latency(&r);
        influx.on_latency(&r);
    }
    registry.set_capture_health(&CaptureHealth::new("pc1").with_decode_stats(&stats));
    registry.register_sink("influx", influx.stats().clone());
    registry.register_sink("otlp", Arc::new(SinkStats::default()));
    let sys = sample_proc(Path::new("/proc"), true).unwrap();
    registry.set_system("system", sys.clone());
    for i in 0..3 {
        influx.on_system(&SystemSnapshot { host: "pc1".into(), ts_ns: T0 + i * 1_000_000_000, families: sample_proc(Path::new("/proc"), false).unwrap(), errors_total: 0, last_error: None });
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(influx.flush(Duration::from_secs(30)));
    assert_eq!(influx.stats().snapshot().rejected, 0);

    let server = MetricsServer::start("127.0.0.1:0", registry.clone(), None).unwrap();
    let prom = prometheus(&[server.addr().to_string()], "");
    // rate() needs two scrapes inside its window.
    wait_for("three scrapes", Duration::from_secs(30), || {
        promql(&prom, "count_over_time(up{job=\"ddscope\"}[1m])").first().is_some_and(|r| r["value"][1].as_str().unwrap_or("0").parse::<f64>().unwrap_or(0.0) >= 3.0)
    });

    let time_filter = format!("time >= {} AND time <= {}", T0 - 1_000_000_000, T0 + 10_000_000_000);
    let mut prom_n = 0;
    let mut influx_n = 0;
    for (title, q) in &qs {
        match q {
            Query::Prom(e) => {
                let e = prom_vars(e);
                let res = promql(&prom, &e);
                if res.is_empty() && SERVE_TRACED_PANELS.contains(&title.as_str()) {
                    continue;
                }
                assert!(!res.is_empty(), "{title}: `{e}` returned nothing");
                prom_n += 1;
            }
            Query::Influx(q) => {
                let q = q.replace("$timeFilter", &time_filter).replace("$sender", "pc1").replace("$receiver", "pc2");
                let v = influx_query(&influx_server, "ddscope", &q);
                let r = &v["results"][0];
                assert!(r.get("error").is_none(), "{title}: InfluxDB refused `{q}`: {r}");
                let series = r["series"].as_array().map(|a| a.len()).unwrap_or(0);
                assert!(series > 0, "{title}: `{q}` returned no data");
                influx_n += 1;
            }
        }
    }
    assert!(prom_n >= 15 && influx_n >= 7, "{prom_n} PromQL, {influx_n} InfluxQL queries checked");
    // The check can fail: InfluxDB refuses a malformed query.
    let (status, body) = support::http_post_form(&format!("{}/query", influx_server.url()), &[("db", "ddscope"), ("q", "SELECT max(\"rx\" FROM \"ddscope_data\"")]).unwrap();
    assert!(status == 400 && body.contains("error"), "{status} {body}");
}
