//! Throughput of each sink, events from a real capture (Cyclone DDS
//! DATA_FRAG traffic, repeated). Prints a Markdown table for BENCHMARKS.md.
//!
//!     CARGO_TARGET_DIR=/work/target-export cargo bench -p ddscope-export --bench sinks
//!
//! - registry: `Registry::on_event` + `on_sample` on the caller's thread, and one `/metrics` render;
//! - InfluxDB / OTLP: the caller's cost per event (encoding into batches), and
//!   end to end until a real InfluxDB 1.6.7 / OpenTelemetry Collector
//!   (debug exporter, basic verbosity) acknowledged everything.

#[path = "../tests/support/mod.rs"]
mod support;

use ddscope_core::decode::DecoderConfig;
use ddscope_core::events::SubmsgEvent;
use ddscope_core::pipeline::analyse_file;
use ddscope_core::samples::{SampleConfig, SampleRecord};
use ddscope_export::influx::{InfluxConfig, InfluxSink};
use ddscope_export::otlp::{OtlpConfig, OtlpSink};
use ddscope_export::prometheus::{Registry, RegistryConfig};
use ddscope_export::{DeliveryConfig, SinkStatsSnapshot};
use std::time::{Duration, Instant};

/// Feeds a push sink `reps` times and waits until the server has everything:
/// (time the caller spent, total time, bytes sent per record).
fn push_all<S>(reps: usize, sink: S, feed: impl Fn(&S), shutdown: impl FnOnce(S) -> SinkStatsSnapshot) -> (Duration, Duration, f64) {
    let t = Instant::now();
    for _ in 0..reps {
        feed(&sink);
    }
    let caller = t.elapsed();
    let st = shutdown(sink);
    assert_eq!(st.delivered, st.accepted, "{st:?}");
    (caller, t.elapsed(), st.bytes_sent as f64 / st.accepted as f64)
}

fn main() {
    let path = support::shared_captures().join("cyclone-datafrag.pcapng");
    let mut events: Vec<SubmsgEvent> = vec![];
    let mut samples: Vec<SampleRecord> = vec![];
    analyse_file(&path, "pc1", DecoderConfig::default(), SampleConfig::default(), None, &mut |e| events.push(e.clone()), &mut |r| samples.push(r)).expect("decode");
    let target = 300_000usize;
    let reps = target.div_ceil(events.len());
    let n_events = reps * events.len();
    eprintln!("{} events, {} samples per pass; {reps} passes", events.len(), samples.len());
    let best = |f: &mut dyn FnMut() -> Duration| (0..3).map(|_| f()).min().unwrap();
    let rows: &mut Vec<String> = &mut vec![];

    // Registry.
    let d = best(&mut || {
        let r = Registry::new(RegistryConfig::default()).unwrap();
        let t = Instant::now();
        for _ in 0..reps {
            for e in &events {
                r.on_event(e);
            }
            for s in &samples {
                r.on_sample(s);
            }
        }
        t.elapsed()
    });
    rows.push(format!("| Prometheus registry (`on_event`/`on_sample`, caller thread) | {n_events} | {:.0} | {:.2} | — |", n_events as f64 / d.as_secs_f64(), d.as_secs_f64() * 1e9 / n_events as f64 / 1000.0));
    let r = Registry::new(RegistryConfig::default()).unwrap();
    r.on_events(events.iter());
    let t = Instant::now();
    let text = r.render();
    rows.push(format!("| `/metrics` render ({} bytes) | — | — | {:.1} (per scrape) | — |", text.len(), t.elapsed().as_secs_f64() * 1e6));

    let delivery = DeliveryConfig { queue_max_bytes: 2 << 30, shutdown_timeout: Duration::from_secs(600), ..Default::default() };

    // InfluxDB.
    let server = support::influxdb();
    let (caller, total, bytes) = {
        let mut cfg = InfluxConfig::new(&server.url(), "bench");
        cfg.delivery = delivery.clone();
        push_all(reps, InfluxSink::start(cfg).unwrap(), |s| s.on_events(events.iter()), |mut s| s.shutdown(Duration::from_secs(600)))
    };
    rows.push(format!(
        "| InfluxDB line protocol (`ddscope_submsg` + `ddscope_data`) | {n_events} | {:.0} | {:.2} | {:.0} events/s, {bytes:.0} B/point |",
        n_events as f64 / caller.as_secs_f64(),
        caller.as_secs_f64() * 1e9 / n_events as f64 / 1000.0,
        n_events as f64 / total.as_secs_f64()
    ));
    drop(server);

    // OTLP.
    let collector = support::otelcol_with("basic");
    let (caller, total, bytes) = {
        let mut cfg = OtlpConfig::new(&collector.url(), "pc1");
        cfg.delivery = delivery.clone();
        push_all(reps, OtlpSink::start(cfg).unwrap(), |s| s.on_events(events.iter()), |mut s| s.shutdown(Duration::from_secs(600)))
    };
    rows.push(format!(
        "| OTLP/HTTP spans (protobuf) | {n_events} | {:.0} | {:.2} | {:.0} events/s, {bytes:.0} B/span |",
        n_events as f64 / caller.as_secs_f64(),
        caller.as_secs_f64() * 1e9 / n_events as f64 / 1000.0,
        n_events as f64 / total.as_secs_f64()
    ));

    println!("| sink | events | events/s (caller) | µs/event (caller) | end to end (real server) |");
    println!("|---|---|---|---|---|");
    for r in rows.iter() {
        println!("{r}");
    }
}
