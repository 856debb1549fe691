//! `ddscope live`: what is on the wire right now, per topic.

use crate::common::{self, capture_name};
use anyhow::Context;
use super::capture_args::CaptureArgs;
use clap::Args;
use crossterm::event::{self, Event, KeyCode, KeyModifiers};
use crossterm::{cursor, execute, terminal};
use ddscope_core::decode::Decoder;
use ddscope_core::pipeline::{wall_clock_ns, CapturePoint, DomainFilter, FrameWriter};
use ddscope_core::source::{open_interface, InterfaceOptions, PacketSource, PcapngWriter};
use ddscope_monitor::agent::capture::{CaptureCounters, Libpcap};
use ddscope_monitor::agent::privileges::drop_privileges;
use ddscope_monitor::agent::view::{LiveRow, LiveTopics, WINDOW_S};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  sudo ddscope live -i eth0
  sudo ddscope live -i eth0 --filter 'udp portrange 7400-7600' --write now.pcapng
  sudo ddscope live -i eth0 --snaplen 200    # header-only: docs/online.md says what stays exact
  sudo setcap cap_net_raw,cap_net_admin=eip $(command -v ddscope); ddscope live -i eth0

Keys: q or Ctrl-C quits. Without a terminal (piped output) a table is printed
every 2 s and at the end. Kernel drop counters are always shown: `dropped` is
the ring buffer overflowing (raise --buffer-mb), `if_dropped` the driver.")]
pub struct LiveArgs {
    #[command(flatten)]
    pub capture: CaptureArgs,
    /// Also write every captured frame to this pcapng file
    #[arg(long)]
    pub write: Option<PathBuf>,
    /// Take packets in blocks (retired every 100 ms) instead of one by one:
    /// less load on a busy host, the view lags by up to 100 ms
    #[arg(long)]
    pub batched: bool,
    /// Only topics of this DDS domain (the writer's, else the destination port's; see
    /// docs/events.md); what is left out is counted on the closing line
    #[arg(long, value_parser = crate::args::domain)]
    pub domain: Option<u32>,
    #[command(flatten)]
    pub limits: super::limit_args::LimitArgs,
}

/// How the capture file gets its name at the end.
enum Finish {
    /// Renamed into place by this process.
    Output(common::Output),
    /// Renamed by a helper that stayed root (this process drops to `nobody`).
    Helper(ddscope_monitor::agent::privileges::RenameHelper),
    /// Written in place (a device or FIFO).
    Direct,
}

#[derive(Default, Clone)]
struct Snapshot {
    rows: Vec<LiveRow>,
    counters: CaptureCounters,
    frames: u64,
    events: u64,
    skipped: String,
    notes: Vec<String>,
}

fn fmt_bps(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.2} Gb/s", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.2} Mb/s", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kb/s", b / 1e3)
    } else {
        format!("{:.0} b/s", b)
    }
}

fn render(s: &Snapshot, iface: &str, note: &str, elapsed: Duration) -> Vec<String> {
    let c = &s.counters;
    let mut out = vec![
        format!(
            "ddscope live — {iface} — {:.0} s — {} frames, {} submessages — kernel: received {}, dropped {}, if_dropped {}{}",
            elapsed.as_secs_f64(),
            s.frames,
            s.events,
            c.received,
            c.dropped,
            c.if_dropped,
            if c.reopened > 0 { format!(", reopened {}", c.reopened) } else { String::new() }
        ),
        format!("{note}; Hz and bandwidth over the last {WINDOW_S} s (Hz as ros2 topic hz: (n-1)/(last-first) per writer; bursty/few: no Hz); q quits"),
        String::new(),
        format!(
            "{:<36} {:>4} {:>7} {:>11} {:>10} {:>9} {:>6} {:>6} {:>8} {:>7} {:>6} {:>6} {:>6} {:>7} {:>6} {:>5}",
            "topic", "dom", "Hz", "bandwidth", "mean B", "max B", "frags", "ipfrg", "samples", "incompl", "retx", "sn gap", "HB", "ACKNACK", "NACKF", "GAP"
        ),
    ];
    for r in &s.rows {
        let t = &r.totals;
        // Names from the wire: control characters escaped before anything reaches the terminal.
        let mut name = ddscope_core::names::for_terminal(&r.label).into_owned();
        if name.chars().count() > 36 {
            name = format!("…{}", name.chars().rev().take(35).collect::<Vec<_>>().into_iter().rev().collect::<String>());
        }
        out.push(format!(
            "{:<36} {:>4} {:>7} {:>11} {:>10.0} {:>9} {:>6.1} {:>6.1} {:>8} {:>7} {:>6} {:>6} {:>6} {:>7} {:>6} {:>5}",
            name,
            t.domain.map_or("?".to_string(), |d| d.to_string()),
            // steady (or mixed: the steady writers' sum) as a number, else what the stream is
            r.rate_now_hz.map_or_else(|| r.rate_now_kind.to_string(), |hz| format!("{hz:.2}")),
            fmt_bps(r.bandwidth_now_bps),
            t.per_sample(t.bytes).unwrap_or(0.0),
            t.max_sample_size,
            t.per_sample(t.rtps_frags).unwrap_or(0.0),
            t.per_sample(t.ip_frags).unwrap_or(0.0),
            t.samples,
            t.incomplete_samples,
            t.retransmitted_fragments,
            t.sn_gaps,
            t.heartbeats,
            t.acknacks,
            t.nack_frags,
            t.gaps
        ));
    }
    if s.rows.is_empty() {
        out.push("(no DDS user traffic seen yet)".into());
    }
    out.push(String::new());
    out.push(s.skipped.clone());
    for n in s.notes.iter().rev().take(3) {
        out.push(n.clone());
    }
    // Notes and counters may quote names too: every line is made safe for the terminal.
    out.into_iter().map(|l| ddscope_core::names::for_terminal(&l).into_owned()).collect()
}

pub fn run(a: LiveArgs) -> anyhow::Result<i32> {
    // Before any thread is spawned, so every thread inherits the cleared bounding set.
    ddscope_monitor::agent::privileges::clear_bounding_set()?;
    let limits = a.limits.resolve()?;
    let iface_name = a.capture.interface()?.to_string();
    let duration = a.capture.duration;
    let mut cap = open_interface(a.capture.spec(!a.batched), &Libpcap)?;
    let mut output = None;
    let writer = match &a.write {
        Some(p) => {
            let (f, o) = common::create_file(p, &[])?;
            // As root the rename into place would run after the drop to `nobody`, which may not write
            // the directory: a helper forked now (still root, no thread yet) renames it when asked.
            output = Some(if unsafe { libc::geteuid() } == 0 {
                match o.hand_over() {
                    Some((tmp, fin)) => Finish::Helper(ddscope_monitor::agent::privileges::RenameHelper::spawn(&tmp, &fin)?),
                    None => Finish::Direct,
                }
            } else {
                Finish::Output(o)
            });
            let iface = InterfaceOptions { linktype: cap.link().linktype() as u16, name: Some(iface_name.as_str()), ..Default::default() };
            Some(PcapngWriter::new(std::io::BufWriter::with_capacity(1 << 20, f), &iface)?)
        }
        None => None,
    };
    let priv_note = drop_privileges()?;
    let note = cap.timestamp_note.clone();
    if !cap.filter_note.is_empty() {
        eprintln!("live: {}", cap.filter_note);
    }
    let name = capture_name(std::path::Path::new(&iface_name));
    let stop = Arc::new(AtomicBool::new(false));
    let snapshot = Arc::new(Mutex::new(Snapshot::default()));
    let tty = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    // SIGINT, SIGTERM and SIGHUP stop the capture the same way (with a
    // terminal in raw mode, Ctrl-C arrives as a key instead): the closing
    // lines are printed and `--write` is completed, never left as a hidden temporary file.
    {
        let s = stop.clone();
        ctrlc::set_handler(move || s.store(true, Ordering::Relaxed)).context("installing the Ctrl-C handler")?;
    }
    let started = Instant::now();
    // Capture and decode on a worker thread; render on this one.
    let worker = {
        let stop = stop.clone();
        let snapshot = snapshot.clone();
        let name = name.clone();
        let domain = a.domain;
        std::thread::spawn(move || -> anyhow::Result<(Decoder, LiveTopics, CaptureCounters, Option<u64>, (u64, u64))> {
            let mut point = CapturePoint::new(&name, limits.decoder, Some(limits.samples));
            let mut view = LiveTopics::new(limits.topics);
            view.domain = domain;
            let mut stage = DomainFilter::new(domain, (view, FrameWriter::new(writer)));
            let mut notes: Vec<String> = priv_note.into_iter().collect();
            let mut last_pub = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let poll = point.step(&mut cap, &mut stage)?;
                notes.extend(cap.take_notes());
                let (view, frames) = &mut stage.inner;
                if let Some(e) = frames.take_error() {
                    notes.push(format!("writing the capture file failed: {e}; no longer writing"));
                }
                if poll == ddscope_core::source::Poll::Idle || last_pub.elapsed() >= Duration::from_millis(500) {
                    last_pub = Instant::now();
                    let snap = Snapshot {
                        rows: view.rows(&name, &point.decoder, wall_clock_ns()),
                        counters: cap.counters(),
                        frames: point.decoder.stats.frames,
                        events: view.events,
                        skipped: point.decoder.stats.summary_line(),
                        notes: notes.clone(),
                    };
                    *snapshot.lock().unwrap_or_else(|p| p.into_inner()) = snap;
                }
            }
            point.finish(&mut stage);
            let left_out = (stage.events_left_out, stage.samples_left_out);
            let (view, mut frames) = stage.inner;
            let counters = cap.counters();
            let mut written = None;
            if let Some(mut w) = frames.writer.take() {
                w.statistics(wall_clock_ns(), Some(counters.received), Some(counters.dropped + counters.if_dropped), None)?;
                w.flush()?;
                written = Some(w.packets());
            }
            Ok((point.decoder, view, counters, written, left_out))
        })
    };
    let mut last_print = Instant::now();
    if tty {
        terminal::enable_raw_mode()?;
        execute!(std::io::stdout(), terminal::EnterAlternateScreen, cursor::Hide)?;
    }
    let ui = (|| -> anyhow::Result<()> {
        while !stop.load(Ordering::Relaxed) && !worker.is_finished() {
            if duration.is_some_and(|d| started.elapsed() >= d) {
                break;
            }
            if tty {
                if event::poll(Duration::from_millis(250))? {
                    if let Event::Key(k) = event::read()? {
                        let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                        if k.code == KeyCode::Char('q') || k.code == KeyCode::Esc || ctrl_c {
                            break;
                        }
                    }
                }
                let s = snapshot.lock().unwrap_or_else(|p| p.into_inner()).clone();
                let (w, h) = terminal::size().unwrap_or((160, 40));
                let mut out = std::io::stdout();
                execute!(out, cursor::MoveTo(0, 0), terminal::Clear(terminal::ClearType::All))?;
                for (i, line) in render(&s, &iface_name, &note, started.elapsed()).iter().enumerate().take(h as usize) {
                    let line: String = line.chars().take(w as usize).collect();
                    execute!(out, cursor::MoveTo(0, i as u16))?;
                    write!(out, "{line}")?;
                }
                out.flush()?;
            } else {
                std::thread::sleep(Duration::from_millis(200));
                if last_print.elapsed() >= Duration::from_secs(2) {
                    last_print = Instant::now();
                    let s = snapshot.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    println!("{}\n", render(&s, &iface_name, &note, started.elapsed()).join("\n"));
                }
            }
        }
        Ok(())
    })();
    stop.store(true, Ordering::Relaxed);
    if tty {
        let _ = execute!(std::io::stdout(), cursor::Show, terminal::LeaveAlternateScreen);
        let _ = terminal::disable_raw_mode();
    }
    ui?;
    let (dec, view, counters, written, left_out) = worker.join().map_err(|_| anyhow::anyhow!("capture thread panicked"))??;
    let now = view.now_ns.max(1);
    let final_snap = Snapshot {
        rows: view.rows(&name, &dec, now + 1_000_000_000),
        counters,
        frames: dec.stats.frames,
        events: view.events,
        skipped: dec.stats.summary_line(),
        notes: vec![],
    };
    println!("{}", render(&final_snap, &iface_name, &note, started.elapsed()).join("\n"));
    if let (Some(p), Some(n), Some(o)) = (&a.write, written, output) {
        match o {
            Finish::Output(o) => o.commit()?,
            Finish::Helper(h) => h.commit()?,
            Finish::Direct => {}
        }
        eprintln!("live: wrote {n} frames to {}", p.display());
    }
    eprintln!(
        "live: {}: {} frames; kernel: received {}, dropped {}, if_dropped {}; {}",
        iface_name,
        dec.stats.frames,
        counters.received,
        counters.dropped,
        counters.if_dropped,
        dec.stats.summary_line()
    );
    if let Some(f) = &counters.filter {
        eprintln!("live: {}: {}", iface_name, ddscope_monitor::agent::kfilter::closing_line(f));
    }
    if let Some(d) = a.domain {
        eprintln!("live: --domain {d}: left out {} submessages and {} samples of other or unknown domains", left_out.0, left_out.1);
    }
    Ok(0)
}
