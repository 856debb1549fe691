//! `ddscope serve` exports what it correlates (issue 26): `/metrics` on the
//! listening address under the token rules of `/api`, and one OTLP trace per
//! sample. Oracles: the sightings the test sends (each sample's latency is
//! known), and a small OTLP/HTTP receiver written here that decodes what
//! serve's OTLP sink POSTs with the protobuf definitions of
//! opentelemetry-proto (not with ddscope's encoder).

use ddscope_export::ids::sample_trace_id;
use ddscope_monitor::stream::protocol::{Batch, StreamItem, StreamSample, AGENT_HEADER, INGEST_PATH};
use ddscope_monitor::server::{ServeConfig, Server};
use ddscope_wire::Guid;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const WRITER: &str = "0110aaaa010203040506070800001203";
const S: i64 = 1_000_000_000;

/// (host.name of the resource, span) for every span received.
type Received = Arc<Mutex<Vec<(String, Span)>>>;

/// An OTLP/HTTP receiver: answers every POST 200 and keeps the spans of `/v1/traces`.
fn otlp_receiver() -> (SocketAddr, Received) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let got: Received = Arc::default();
    let g = got.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let g = g.clone();
            std::thread::spawn(move || serve_otlp(s, &g));
        }
    });
    (addr, got)
}

fn serve_otlp(s: TcpStream, got: &Received) {
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let (mut len, mut gzip) = (0usize, false);
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end().to_ascii_lowercase();
            if h.is_empty() {
                break;
            }
            if let Some(v) = h.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap();
            }
            if h.starts_with("content-encoding:") && h.contains("gzip") {
                gzip = true;
            }
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body).unwrap();
        if gzip {
            let mut out = vec![];
            flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut out).unwrap();
            body = out;
        }
        if path == "/v1/traces" {
            let req = ExportTraceServiceRequest::decode(&body[..]).expect("serve sent a valid ExportTraceServiceRequest");
            let mut g = got.lock().unwrap();
            for rs in req.resource_spans {
                let host = rs
                    .resource
                    .iter()
                    .flat_map(|r| r.attributes.iter())
                    .find(|a| a.key == "host.name")
                    .and_then(|a| match a.value.as_ref()?.value.as_ref()? {
                        any_value::Value::StringValue(s) => Some(s.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
                for ss in rs.scope_spans {
                    for sp in ss.spans {
                        g.push((host.clone(), sp));
                    }
                }
            }
        }
        let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n");
    }
}

fn sample(sn: i64, t: i64) -> StreamItem {
    StreamItem::Sample(StreamSample {
        w: WRITER.into(),
        sn,
        topic: Some(("rt/image".into(), "sensor_msgs::msg::dds_::Image_".into())),
        tt: 1,
        first: t,
        first_ip: t,
        last: t,
        complete: true,
        size: 100,
        fsize: None,
        fexp: 1,
        fseen: 1,
        ipf: 1,
        retx: 0,
        retx_bytes: 0,
        pcp: None,
        vendor: 0x0110,
        supp: 0,
        sts: None,
        z: None,
    })
}

/// One request with `Connection: close`; returns (status, body).
fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        raw += &format!("{k}: {v}\r\n");
    }
    raw += "\r\n";
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let code = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

fn post(addr: SocketAddr, agent: &str, seq: u64, items: Vec<StreamItem>) {
    let b = Batch { agent: agent.into(), seq, sent_ns: 0, items, dropped_items: 0, topics: None, system: vec![], counters: None, last: false };
    let body = serde_json::to_vec(&b).unwrap();
    let h = [(AGENT_HEADER, agent), ("Content-Type", "application/json"), ("Authorization", "Bearer tok")];
    assert_eq!(request(addr, "POST", INGEST_PATH, &h, &body).0, 204);
}

/// A metric's value in an exposition, by name and labels.
fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, v) = l.rsplit_once(' ')?;
        let (n, rest) = series.split_once('{').unwrap_or((series, ""));
        (n == name && labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))).then(|| v.parse().ok())?
    })
}

/// sn 1..=8 sent at pc1 at k s and seen at pc2 k ms later; sn 9 never reaches pc2.
/// Sampling `every=2,lost`: traces for sn 2, 4, 6, 8 and the lost 9; 4 deliveries left out.
#[test]
fn metrics_and_one_trace_per_sample_leave_serve() {
    let (otlp, got) = otlp_receiver();
    let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.token = Some("tok".into());
    cfg.window_ns = S;
    cfg.export = vec![format!("otlp=http://{otlp}").parse().unwrap()];
    cfg.trace_sampling = "every=2,lost".parse().unwrap();
    let srv = Server::start(cfg).expect("serve starts");
    let addr = srv.addr();
    post(addr, "pc1", 1, (1..=9).map(|sn| sample(sn, sn * S)).collect());
    post(addr, "pc2", 1, (1..=8).map(|sn| sample(sn, sn * S + sn * 1_000_000)).collect());
    for a in ["pc1", "pc2"] {
        post(addr, a, 2, vec![StreamItem::Watermark { t: 30 * S }]);
    }

    // /metrics: the token rules of /api.
    assert_eq!(request(addr, "GET", "/metrics", &[], b"").0, 401);
    assert_eq!(request(addr, "GET", "/metrics", &[("Authorization", "Bearer nope")], b"").0, 401);
    let (code, first) = request(addr, "GET", "/metrics?token=tok", &[], b"");
    assert_eq!(code, 200);
    let flow = [("topic", "/image"), ("sender", "pc1"), ("receiver", "pc2"), ("layer", "message")];
    assert_eq!(metric(&first, "ddscope_latency_seconds_count", &flow), Some(8.0), "an endpoint's first scrape shows the counts");
    let (_, text) = request(addr, "GET", "/metrics", &[("Authorization", "Bearer tok")], b"");
    assert_eq!(metric(&text, "ddscope_latency_seconds_count", &flow), Some(8.0), "{text}");
    let sum = metric(&text, "ddscope_latency_seconds_sum", &flow).unwrap();
    assert!((sum - 0.036).abs() < 1e-9, "1 + … + 8 ms: {sum}");
    // Buckets are cumulative (the default bounds have 2.5 ms, 5 ms and 10 ms).
    for (le, n) in [("0.0025", 2.0), ("0.005", 5.0), ("0.01", 8.0)] {
        let mut b = flow.to_vec();
        b.push(("le", le));
        assert_eq!(metric(&text, "ddscope_latency_seconds_bucket", &b), Some(n), "le={le}");
    }
    let fl = [("topic", "/image"), ("sender", "pc1"), ("receiver", "pc2")];
    assert_eq!(metric(&text, "ddscope_latency_samples_total", &[fl[0], fl[1], fl[2], ("status", "delivered")]), Some(8.0));
    assert_eq!(metric(&text, "ddscope_latency_samples_total", &[fl[0], fl[1], fl[2], ("status", "lost")]), Some(1.0));
    assert_eq!(metric(&text, "ddscope_serve_agent_up", &[("agent", "pc1")]), Some(1.0));
    assert_eq!(metric(&text, "ddscope_serve_correlation_total", &[("what", "samples_judged")]), Some(9.0));

    // The traces, once the sink delivered.
    let stats = srv.flush_export(Duration::from_secs(10));
    let (name, s) = &stats[0];
    assert_eq!((*name, s.dropped_queue_full, s.rejected), ("otlp", 0, 0), "{s:?}");
    let spans = got.lock().unwrap().clone();
    let w = Guid::parse_hex(WRITER).unwrap();
    let mut by_trace: BTreeMap<Vec<u8>, Vec<(String, String)>> = BTreeMap::new();
    for (host, sp) in &spans {
        by_trace.entry(sp.trace_id.clone()).or_default().push((host.clone(), sp.name.clone()));
    }
    let want: BTreeSet<Vec<u8>> = [2, 4, 6, 8, 9].iter().map(|sn| sample_trace_id(&w, *sn).to_vec()).collect();
    assert_eq!(by_trace.keys().cloned().collect::<BTreeSet<_>>(), want, "one trace per kept sample, its id from (writer, sn)");
    for sn in [2i64, 4, 6, 8] {
        let t = &by_trace[&sample_trace_id(&w, sn).to_vec()];
        let names: BTreeSet<(&str, &str)> = t.iter().map(|(h, n)| (h.as_str(), n.as_str())).collect();
        assert_eq!(names, BTreeSet::from([("pc1", "publish /image"), ("pc2", "receive /image"), ("pc2", "message")]), "sn {sn}");
        let msg = spans.iter().find(|(_, s)| s.trace_id == sample_trace_id(&w, sn).to_vec() && s.name == "message").unwrap();
        assert_eq!(msg.1.end_time_unix_nano - msg.1.start_time_unix_nano, sn as u64 * 1_000_000, "sn {sn}: the message span is its latency");
    }
    let lost = spans.iter().find(|(_, s)| s.trace_id == sample_trace_id(&w, 9).to_vec() && s.name == "message").unwrap();
    assert_eq!(lost.1.status.as_ref().map(|s| s.code), Some(2), "a lost sample's message span is an error");
    // What sampling left out is counted.
    let (_, text) = request(addr, "GET", "/metrics?token=tok", &[], b"");
    assert_eq!(metric(&text, "ddscope_trace_export_total", &[("what", "deliveries_left_out")]), Some(4.0), "{text}");
    assert_eq!(metric(&text, "ddscope_trace_export_total", &[("what", "samples")]), Some(5.0));
    assert_eq!(metric(&text, "ddscope_trace_export_total", &[("what", "spans")]), Some(spans.len() as f64));
}

#[test]
fn bad_export_options_are_clear_errors() {
    let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.export = vec!["prometheus=0.0.0.0:0".parse().unwrap()];
    let e = Server::start(cfg).err().expect("a non-loopback /metrics without a token is refused");
    assert!(e.to_string().contains("token"), "{e}");
    let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.export = vec!["prometheus=127.0.0.1:0".parse().unwrap()];
    cfg.federate = vec!["http://127.0.0.1:1".into()];
    let e = Server::start(cfg).err().expect("a front exports nothing");
    assert!(e.to_string().contains("--federate"), "{e}");
    // prometheus=ADDR: a second /metrics, the same registry.
    let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.export = vec!["prometheus=127.0.0.1:0".parse().unwrap()];
    let srv = Server::start(cfg).unwrap();
    let m = srv.metrics_addr().expect("bound");
    let (code, text) = request(m, "GET", "/metrics", &[], b"");
    assert_eq!(code, 200);
    assert!(text.contains("# TYPE ddscope_latency_seconds histogram"), "{text}");
}
