//! `ddscope serve` under slow, malformed and unauthorised clients (issue 10,
//! items 1, 2 and 7). Oracle: a real server (the crate's own, started on a
//! loopback port) driven over real TCP connections by hand-written HTTP, and
//! the server's own counters in `/api/state`.

use ddscope_monitor::stream::protocol::{Batch, StreamItem, StreamSample, AGENT_HEADER, INGEST_PATH};
use ddscope_monitor::server::{HttpLimits, ServeConfig, Server};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn start(f: impl FnOnce(&mut ServeConfig)) -> Server {
    let mut cfg = ServeConfig::new("127.0.0.1:0".parse().unwrap());
    f(&mut cfg);
    Server::start(cfg).expect("server starts")
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Sends `raw` on a fresh connection and reads the answer until the server closes it (or 10 s).
fn exchange(addr: SocketAddr, raw: &[u8]) -> String {
    let mut s = connect(addr);
    let _ = s.write_all(raw);
    read_all(&mut s)
}

fn read_all(s: &mut TcpStream) -> String {
    let mut out = vec![];
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).to_string()
}

fn status(answer: &str) -> u16 {
    answer.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// One request with `Connection: close`; returns (status, head, body).
fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String, String) {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        raw += &format!("{k}: {v}\r\n");
    }
    raw += "\r\n";
    let mut bytes = raw.into_bytes();
    bytes.extend_from_slice(body);
    let a = exchange(addr, &bytes);
    let (head, body) = a.split_once("\r\n\r\n").unwrap_or((&a, ""));
    (status(&a), head.to_ascii_lowercase(), body.to_string())
}

fn state(addr: SocketAddr, token: Option<&str>) -> Value {
    let auth = token.map(|t| format!("Bearer {t}"));
    let h: Vec<(&str, &str)> = auth.as_deref().map(|a| vec![("Authorization", a)]).unwrap_or_default();
    let (code, _, body) = request(addr, "GET", "/api/state", &h, b"");
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).expect("state is JSON")
}

fn batch(agent: &str, seq: u64, items: Vec<StreamItem>) -> Vec<u8> {
    serde_json::to_vec(&Batch {
        agent: agent.into(),
        seq,
        sent_ns: 0,
        items,
        dropped_items: 0,
        topics: None,
        system: vec![],
        counters: None,
        last: false,
    })
    .unwrap()
}

fn post_batch(addr: SocketAddr, agent: &str, token: Option<&str>, body: &[u8]) -> u16 {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut h = vec![(AGENT_HEADER, agent), ("Content-Type", "application/json")];
    if let Some(a) = &auth {
        h.push(("Authorization", a));
    }
    request(addr, "POST", INGEST_PATH, &h, body).0
}

fn healthz_ms(addr: SocketAddr) -> f64 {
    let t0 = Instant::now();
    let (code, _, body) = request(addr, "GET", "/healthz", &[], b"");
    assert_eq!((code, body.as_str()), (200, "ok\n"));
    t0.elapsed().as_secs_f64() * 1e3
}

#[test]
fn healthz_answers_within_100ms_while_1000_slow_clients_hold_connections() {
    let srv = start(|_| {});
    let addr = srv.addr();
    let mut held = vec![];
    for i in 0..1000 {
        let mut s = connect(addr);
        if i % 2 == 0 {
            // Half-sent headers (slowloris).
            s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nX-Slow: 1").unwrap();
        } else {
            // A complete POST header and half a body.
            let head = format!("POST {INGEST_PATH} HTTP/1.1\r\nHost: t\r\n{AGENT_HEADER}: slow{i}\r\nContent-Length: 100000\r\n\r\n{{\"agent\":");
            s.write_all(head.as_bytes()).unwrap();
        }
        held.push(s);
    }
    // Every slow client is connected and holds its connection.
    let t0 = Instant::now();
    while srv.stats().connections_open.load(std::sync::atomic::Ordering::Relaxed) < 1000 {
        assert!(t0.elapsed() < Duration::from_secs(10), "the server did not take the 1000 connections");
        std::thread::sleep(Duration::from_millis(20));
    }
    let times: Vec<f64> = (0..20).map(|_| healthz_ms(addr)).collect();
    let worst = times.iter().cloned().fold(0.0, f64::max);
    assert!(worst < 100.0, "/healthz took up to {worst:.1} ms with 1000 slow clients: {times:?}");
    eprintln!("/healthz with 1000 slow clients: worst {worst:.2} ms of {}", times.len());
    // The dashboard and a real agent's batch go through too.
    let (code, head, _) = request(addr, "GET", "/", &[], b"");
    assert_eq!(code, 200);
    assert!(head.contains("content-security-policy: default-src 'none'; script-src 'self'"), "{head}");
    assert_eq!(post_batch(addr, "pc1", None, &batch("pc1", 1, vec![StreamItem::Watermark { t: 1 }])), 204);
    let s = state(addr, None);
    assert!(s["server"]["connections_open"].as_u64().unwrap() >= 1000, "{}", s["server"]);
    assert_eq!(s["agents"][0]["name"], "pc1");
    drop(held);
}

#[test]
fn slow_headers_bodies_and_idle_connections_are_timed_out_and_counted() {
    let srv = start(|c| {
        c.limits.header_timeout = Duration::from_millis(300);
        c.limits.body_timeout = Duration::from_millis(300);
        c.limits.idle_timeout = Duration::from_millis(600);
    });
    let addr = srv.addr();
    let t0 = Instant::now();
    let mut head = connect(addr);
    head.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n").unwrap();
    let mut body = connect(addr);
    body.write_all(format!("POST {INGEST_PATH} HTTP/1.1\r\nHost: t\r\n{AGENT_HEADER}: pc1\r\nContent-Length: 1000\r\n\r\n{{").as_bytes()).unwrap();
    let mut silent = connect(addr);
    let a = read_all(&mut head);
    assert!(a.is_empty() || status(&a) == 408, "{a}");
    assert_eq!(status(&read_all(&mut body)), 408);
    assert_eq!(read_all(&mut silent), "", "a connection that never sends is closed");
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let s = state(addr, None)["server"].clone();
    assert!(s["header_timeouts"].as_u64().unwrap() >= 2, "half-sent head and silent connection: {s}");
    assert_eq!(s["body_timeouts"], 1, "{s}");
}

#[test]
fn malformed_http_is_refused_and_counted() {
    let srv = start(|c| c.limits.max_body_bytes = 64 << 10);
    let addr = srv.addr();
    // Garbage instead of a request line.
    assert_eq!(status(&exchange(addr, b"\x16\x03\x01\x00\xa5garbage\r\n\r\n")), 400);
    // A head larger than the limit.
    let huge = format!("GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n", "a".repeat(100_000));
    assert_eq!(status(&exchange(addr, huge.as_bytes())), 431);
    // Too many header fields.
    let many: String = (0..200).map(|i| format!("X-H{i}: v\r\n")).collect();
    assert_eq!(status(&exchange(addr, format!("GET / HTTP/1.1\r\nHost: t\r\n{many}\r\n").as_bytes())), 431);
    // Content-Length that is not a number, and two that disagree.
    assert_eq!(status(&exchange(addr, format!("POST {INGEST_PATH} HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n").as_bytes())), 400);
    assert_eq!(
        status(&exchange(addr, format!("POST {INGEST_PATH} HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!").as_bytes())),
        400
    );
    // A declared body over the limit is refused before it is read.
    let t0 = Instant::now();
    let a = exchange(addr, format!("POST {INGEST_PATH} HTTP/1.1\r\nHost: t\r\n{AGENT_HEADER}: pc1\r\nContent-Length: 99999999\r\n\r\n").as_bytes());
    assert_eq!(status(&a), 413, "{a}");
    assert!(t0.elapsed() < Duration::from_secs(2));
    // A chunked body that grows over the limit.
    let mut s = connect(addr);
    s.write_all(format!("POST {INGEST_PATH} HTTP/1.1\r\nHost: t\r\n{AGENT_HEADER}: pc1\r\nTransfer-Encoding: chunked\r\n\r\n").as_bytes()).unwrap();
    for _ in 0..80 {
        if s.write_all(format!("400\r\n{}\r\n", "x".repeat(1024)).as_bytes()).is_err() {
            break;
        }
    }
    assert_eq!(status(&read_all(&mut s)), 413);
    // A body shorter than declared, then the client closes: nothing is ingested.
    let mut s = connect(addr);
    s.write_all(format!("POST {INGEST_PATH} HTTP/1.1\r\nHost: t\r\n{AGENT_HEADER}: pc1\r\nContent-Length: 500\r\n\r\n{{\"agent\"").as_bytes()).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let _ = read_all(&mut s);
    // Valid HTTP, invalid batches.
    assert_eq!(post_batch(addr, "pc1", None, b"{not json"), 400);
    assert_eq!(post_batch(addr, "pc1", None, &batch("pc2", 1, vec![])), 400, "the body must name the agent of the header");
    let long = "x".repeat(65);
    assert_eq!(post_batch(addr, &long, None, &batch(&long, 1, vec![])), 400, "names over 64 characters");
    let st = state(addr, None);
    let s = &st["server"];
    assert!(s["bad_http"].as_u64().unwrap() >= 5, "{s}");
    assert_eq!(s["too_large"], 2, "{s}");
    assert_eq!(s["bad_batches"], 3, "{s}");
    assert_eq!(st["agents"].as_array().unwrap().len(), 0, "nothing was ingested: {}", st["agents"]);
    // Still serving.
    assert!(healthz_ms(addr) < 1000.0);
}

#[test]
fn a_wrong_token_is_refused_before_the_body_is_read() {
    let srv = start(|c| c.token = Some("s3cret".into()));
    let addr = srv.addr();
    // Headers announce a 10 MB body that never comes: the answer must not wait for it.
    for auth in ["Bearer wrong", ""] {
        let t0 = Instant::now();
        let mut s = connect(addr);
        let mut head = format!("POST {INGEST_PATH} HTTP/1.1\r\nHost: t\r\n{AGENT_HEADER}: pc1\r\nContent-Length: 10000000\r\n");
        if !auth.is_empty() {
            head += &format!("Authorization: {auth}\r\n");
        }
        s.write_all(format!("{head}\r\n").as_bytes()).unwrap();
        let a = read_all(&mut s);
        assert_eq!(status(&a), 401, "{a}");
        assert!(a.to_ascii_lowercase().contains("connection: close"), "{a}");
        assert!(t0.elapsed() < Duration::from_secs(2), "refused in {:?}", t0.elapsed());
    }
    // The right token in the header or the query.
    assert_eq!(post_batch(addr, "pc1", Some("s3cret"), &batch("pc1", 1, vec![])), 204);
    assert_eq!(request(addr, "GET", "/api/state?token=s3cret", &[], b"").0, 200);
    assert_eq!(request(addr, "GET", "/api/state", &[], b"").0, 401);
    // The page and its scripts hold no data and need no token; all carry the CSP.
    for p in ["/", "/assets/dashboard.js", "/assets/charts.js", "/assets/dashboard.css", "/healthz", "/api/state", "/nope"] {
        let (_, head, _) = request(addr, "GET", p, &[], b"");
        assert!(head.contains("content-security-policy:") && head.contains("x-content-type-options: nosniff"), "{p}: {head}");
    }
    std::thread::sleep(Duration::from_millis(300)); // past the state cache
    let s = state(addr, Some("s3cret"))["server"].clone();
    assert_eq!(s["unauthorized"], 4, "two ingests, two /api/state without the token: {s}");
}

#[test]
fn rate_limits_per_agent_are_enforced_and_counted() {
    let srv = start(|c| {
        c.limits.agent_rate = 0.5;
        c.limits.agent_burst = 3.0;
    });
    let addr = srv.addr();
    let codes: Vec<u16> = (1..=10).map(|i| post_batch(addr, "pc1", None, &batch("pc1", i, vec![]))).collect();
    assert_eq!(codes.iter().filter(|c| **c == 204).count(), 3, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 429).count(), 7, "{codes:?}");
    // Another agent has its own bucket.
    assert_eq!(post_batch(addr, "pc2", None, &batch("pc2", 1, vec![])), 204);
    let st = state(addr, None);
    assert_eq!(st["server"]["rate_limited"], 7);
    let pc1 = st["agents"].as_array().unwrap().iter().find(|a| a["name"] == "pc1").unwrap();
    assert_eq!(pc1["rate_limited"], 7);
    assert_eq!(pc1["batches"], 3);
}

#[test]
fn connections_over_the_limit_are_answered_503_and_closed() {
    let srv = start(|c| c.limits.max_connections = 50);
    let addr = srv.addr();
    let held: Vec<TcpStream> = (0..50).map(|_| connect(addr)).collect();
    let t0 = Instant::now();
    while srv.stats().connections_open.load(std::sync::atomic::Ordering::Relaxed) < 50 {
        assert!(t0.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(10));
    }
    let a = exchange(addr, b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(status(&a), 503, "{a}");
    drop(held);
    let t0 = Instant::now();
    while srv.stats().connections_open.load(std::sync::atomic::Ordering::Relaxed) > 0 {
        assert!(t0.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(healthz_ms(addr) < 1000.0);
    assert!(srv.stats().connections_refused.load(std::sync::atomic::Ordering::Relaxed) >= 1);
}

fn sample(w: &str, sn: i64, t: i64) -> StreamItem {
    StreamItem::Sample(StreamSample {
        w: w.into(),
        sn,
        topic: None,
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

#[test]
fn state_answers_and_latency_series_stay_bounded_with_many_flows() {
    let srv = start(|c| {
        c.window_ns = 1_000_000;
        c.caps.max_series = 20;
        c.caps.state_flows = 10;
        c.caps.state_writers = 15;
    });
    let addr = srv.addr();
    // 100 writers (one flow each, named by writer): sent at pc1, received at pc2 1 ms later.
    let writers: Vec<String> = (0..100).map(|i| format!("0110aaaa01020304050607{i:02x}00001203")).collect();
    let tx: Vec<StreamItem> = writers.iter().enumerate().map(|(i, w)| sample(w, 1, 1_000_000_000 + i as i64 * 1000)).collect();
    let rx: Vec<StreamItem> = writers.iter().enumerate().map(|(i, w)| sample(w, 1, 1_001_000_000 + i as i64 * 1000)).collect();
    assert_eq!(post_batch(addr, "pc1", None, &batch("pc1", 1, tx)), 204);
    assert_eq!(post_batch(addr, "pc2", None, &batch("pc2", 1, rx)), 204);
    let wm = |a: &str| batch(a, 2, vec![StreamItem::Watermark { t: 5_000_000_000 }]);
    assert_eq!(post_batch(addr, "pc1", None, &wm("pc1")), 204);
    assert_eq!(post_batch(addr, "pc2", None, &wm("pc2")), 204);
    std::thread::sleep(Duration::from_millis(300)); // past the state cache
    let st = state(addr, None);
    let l = &st["limits"];
    assert_eq!(st["correlation"]["samples_judged"], 100, "{}", st["correlation"]);
    assert_eq!(l["flows_total"], 100, "{l}");
    assert_eq!(st["flows"].as_array().unwrap().len(), 10);
    assert_eq!(l["flows_shown"], 10);
    assert_eq!(l["series"], 20);
    assert_eq!(l["series_evicted"], 80, "{l}");
    assert_eq!(st["writers"].as_array().unwrap().len(), 15);
    assert_eq!(l["writers_total"], 100);
    let size = serde_json::to_vec(&st).unwrap().len();
    assert!(size < 200_000, "{size} bytes");
}

#[test]
fn default_limits_are_sane() {
    let l = HttpLimits::default();
    assert!(l.max_connections > 1000, "1000 slow clients must not lock out /healthz");
    assert!(l.header_timeout <= Duration::from_secs(30) && l.body_timeout <= Duration::from_secs(60));
    assert!(l.ingest_buffer_bytes >= l.max_body_bytes);
}
