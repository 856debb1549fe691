//! Live capture with libpcap: a large ring buffer in immediate mode,
//! nanosecond timestamps (adapter timestamps when the NIC offers them, with a
//! clear fallback message), kernel drop counters, an optional BPF filter and
//! snap length (header-only mode), and reopening when the interface goes
//! down and comes back.

use anyhow::Context;
use ddscope_core::source::{Packet, PacketSource, Poll};
use ddscope_wire::link::LinkType;
use pcap::{Capture, Precision, TimestampType};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tstamp {
    Host,
    Adapter,
    AdapterUnsynced,
}

#[derive(Debug, Clone)]
pub struct LiveConfig {
    pub interface: String,
    pub filter: Option<String>,
    /// 0 = whole frames.
    pub snaplen: i32,
    pub tstamp: Tstamp,
    pub buffer_mb: i32,
    /// Deliver every packet as it arrives (one wakeup per packet) instead of
    /// in blocks retired every 100 ms: faster display, more load on the host.
    pub immediate: bool,
}

/// Kernel and libpcap counters (cumulative since the capture opened, over reopenings).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct CaptureCounters {
    pub received: u64,
    /// Dropped because the ring buffer was full (the counter users must watch).
    pub dropped: u64,
    /// Dropped by the interface or driver.
    pub if_dropped: u64,
    pub reopened: u64,
}

pub struct LiveCapture {
    cfg: LiveConfig,
    cap: Capture<pcap::Active>,
    /// Header-only mode: discovery traffic in full on a second handle.
    disc: Option<Capture<pcap::Active>>,
    link: LinkType,
    frame: u64,
    base: CaptureCounters,
    last: CaptureCounters,
    /// What timestamping is in effect, for the user.
    pub timestamp_note: String,
    /// Set while the interface is gone and being reopened.
    down_since: Option<Instant>,
    last_attempt: Instant,
    notes: Vec<String>,
}

/// RTPS's default port mapping sends discovery (metatraffic) to even UDP
/// ports and user data to odd ones. libpcap's `udp[…]` only matches the first
/// fragment of a datagram, so later fragments always go to the main handle.
const DISCOVERY_BPF: &str = "udp and udp[2:2] & 1 = 0";

fn combine(user: &Option<String>, ours: &str) -> String {
    match user {
        Some(u) => format!("({u}) and ({ours})"),
        None => ours.to_string(),
    }
}

/// Header-only mode: a snap length shorter than any DDS datagram.
fn header_only(cfg: &LiveConfig) -> bool {
    cfg.snaplen > 0 && cfg.snaplen < 1500
}

/// Opens the capture handle(s), non-blocking: we wait with poll() ourselves.
/// (libpcap's own read timeout does not return on an idle interface with
/// TPACKET_V3, which would leave a stop request unnoticed.)
fn open_pair(cfg: &LiveConfig) -> anyhow::Result<(Capture<pcap::Active>, Option<Capture<pcap::Active>>, String)> {
    if !header_only(cfg) {
        let (c, note) = open(cfg)?;
        return Ok((c.setnonblock().context("non-blocking capture")?, None, note));
    }
    let main_cfg = LiveConfig { filter: Some(combine(&cfg.filter, &format!("not ({DISCOVERY_BPF})"))), ..cfg.clone() };
    let disc_cfg = LiveConfig { filter: Some(combine(&cfg.filter, DISCOVERY_BPF)), snaplen: 0, ..cfg.clone() };
    let (main, note) = open(&main_cfg)?;
    let (disc, _) = open(&disc_cfg)?;
    let main = main.setnonblock().context("non-blocking capture")?;
    let disc = disc.setnonblock().context("non-blocking capture")?;
    Ok((main, Some(disc), format!("{note}; header-only: {} bytes per frame, discovery (even RTPS ports) in full", cfg.snaplen)))
}

fn open(cfg: &LiveConfig) -> anyhow::Result<(Capture<pcap::Active>, String)> {
    let base = || -> anyhow::Result<Capture<pcap::Inactive>> {
        let mut c = Capture::from_device(cfg.interface.as_str())
            .with_context(|| format!("cannot capture on {}", cfg.interface))?
            .immediate_mode(cfg.immediate)
            .timeout(100)
            .buffer_size(cfg.buffer_mb.saturating_mul(1 << 20))
            .precision(Precision::Nano)
            .promisc(false);
        if cfg.snaplen > 0 {
            c = c.snaplen(cfg.snaplen);
        }
        Ok(c)
    };
    let wanted = match cfg.tstamp {
        Tstamp::Host => None,
        Tstamp::Adapter => Some(TimestampType::Adapter),
        Tstamp::AdapterUnsynced => Some(TimestampType::AdapterUnsynced),
    };
    let (cap, note) = match wanted {
        None => (base()?.open(), "host timestamps (kernel, software)".to_string()),
        Some(t) => match base()?.tstamp_type(t).open() {
            Ok(c) => (Ok(c), format!("hardware timestamps from the NIC ({:?})", cfg.tstamp)),
            Err(e) => (
                base()?.open(),
                format!("{} offers no hardware timestamps ({e}); falling back to host timestamps", cfg.interface),
            ),
        },
    };
    let mut cap = cap.map_err(|e| explain_open_error(&cfg.interface, e))?;
    if let Some(f) = &cfg.filter {
        cap.filter(f, true).with_context(|| format!("bad capture filter {f:?}"))?;
    }
    Ok((cap, note))
}

fn explain_open_error(iface: &str, e: pcap::Error) -> anyhow::Error {
    let s = e.to_string();
    if s.contains("ermission") || s.contains("Operation not permitted") {
        anyhow::anyhow!(
            "cannot capture on {iface}: {s}. Run as root, or give the binary CAP_NET_RAW once: \
             sudo setcap cap_net_raw,cap_net_admin=eip $(command -v ddscope)"
        )
    } else if s.contains("No such device") || s.contains("doesn't exist") {
        anyhow::anyhow!("cannot capture on {iface}: no such interface (see `ip link`)")
    } else {
        anyhow::anyhow!("cannot capture on {iface}: {s}")
    }
}

impl LiveCapture {
    pub fn open(cfg: LiveConfig) -> anyhow::Result<LiveCapture> {
        let (cap, disc, timestamp_note) = open_pair(&cfg)?;
        let link = LinkType::from_linktype(cap.get_datalink().0 as u32);
        Ok(LiveCapture {
            cfg,
            cap,
            disc,
            link,
            frame: 0,
            base: CaptureCounters::default(),
            last: CaptureCounters::default(),
            timestamp_note,
            down_since: None,
            last_attempt: Instant::now(),
            notes: vec![],
        })
    }

    pub fn link(&self) -> LinkType {
        self.link
    }

    /// Counters so far (libpcap's and the kernel's), across reopenings.
    pub fn counters(&mut self) -> CaptureCounters {
        if let Ok(s) = self.cap.stats() {
            let d = self.disc.as_mut().and_then(|d| d.stats().ok());
            let (dr, dd, di) = d.map_or((0, 0, 0), |d| (d.received as u64, d.dropped as u64, d.if_dropped as u64));
            self.last = CaptureCounters {
                received: self.base.received + s.received as u64 + dr,
                dropped: self.base.dropped + s.dropped as u64 + dd,
                if_dropped: self.base.if_dropped + s.if_dropped as u64 + di,
                reopened: self.base.reopened,
            };
        }
        self.last
    }

    /// Waits up to 100 ms until a handle has a packet.
    fn wait(&mut self) {
        use std::os::unix::io::AsRawFd;
        let mut fds = [
            libc::pollfd { fd: self.cap.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: self.disc.as_ref().map_or(-1, |d| d.as_raw_fd()), events: libc::POLLIN, revents: 0 },
        ];
        // SAFETY: `fds` is a valid array of two pollfd structs for the duration of the call.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, 100) };
    }

    /// While the interface is gone: one reopening attempt per second.
    fn try_reopen(&mut self) -> anyhow::Result<()> {
        let Some(since) = self.down_since else { return Ok(()) };
        std::thread::sleep(Duration::from_millis(100));
        if self.last_attempt.elapsed() < Duration::from_secs(1) {
            return Ok(());
        }
        self.last_attempt = Instant::now();
        match open_pair(&self.cfg) {
            Ok((cap, disc, _)) => {
                let c = self.last;
                self.base = CaptureCounters { reopened: c.reopened + 1, ..c };
                self.cap = cap;
                self.disc = disc;
                self.down_since = None;
                self.notes.push(format!("capture on {} reopened after {:.1} s", self.cfg.interface, since.elapsed().as_secs_f64()));
                Ok(())
            }
            Err(err) if since.elapsed() > Duration::from_secs(3600) => Err(err),
            Err(_) => Ok(()),
        }
    }
}

/// Frames per poll of a live capture.
const LIVE_BATCH: usize = 256;

impl PacketSource for LiveCapture {
    /// Hands over what the kernel has (up to a batch, alternating between the
    /// main and the discovery handle in header-only mode), waiting up to
    /// ~100 ms when nothing is there. When the interface goes away the
    /// capture is reopened (every second, for up to an hour) and the gap is
    /// reported as a note.
    fn poll(&mut self, on_packet: &mut dyn FnMut(&Packet<'_>)) -> anyhow::Result<Poll> {
        if self.down_since.is_some() {
            self.try_reopen()?;
            return Ok(Poll::Idle);
        }
        let mut delivered = 0;
        let mut failure: Option<pcap::Error> = None;
        let mut waited = false;
        loop {
            let mut got = false;
            for h in 0..2 {
                let cap = match h {
                    0 => &mut self.cap,
                    _ => match self.disc.as_mut() {
                        Some(d) => d,
                        None => continue,
                    },
                };
                match cap.next_packet() {
                    Ok(p) => {
                        self.frame += 1;
                        let ts = (p.header.ts.tv_sec as i64).saturating_mul(1_000_000_000).saturating_add(p.header.ts.tv_usec as i64);
                        on_packet(&Packet { frame: self.frame, ts_ns: ts, interface: 0, link: self.link, data: p.data, orig_len: p.header.len });
                        delivered += 1;
                        got = true;
                    }
                    Err(pcap::Error::TimeoutExpired) => {}
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            if failure.is_some() || delivered >= LIVE_BATCH {
                break;
            }
            if !got {
                if delivered > 0 || waited {
                    break;
                }
                self.wait();
                waited = true;
            }
        }
        if let Some(e) = failure {
            self.notes.push(format!("capture on {} stopped: {e}; reopening", self.cfg.interface));
            self.counters();
            self.down_since = Some(Instant::now());
            self.last_attempt = Instant::now();
        }
        Ok(if delivered > 0 { Poll::Frames(delivered) } else { Poll::Idle })
    }

    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }
}
