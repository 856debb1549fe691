//! Live capture with libpcap: a large ring buffer in immediate mode,
//! nanosecond timestamps (adapter timestamps when the NIC offers them, with a
//! clear fallback message), kernel drop counters, an optional BPF filter and
//! snap length (header-only mode), and reopening when the interface goes
//! down and comes back. Optionally an in-kernel filter (eBPF, see
//! [`crate::kfilter`]) leaves out the IP fragments that carry nothing the
//! analyses read; they are handed over as header-only frames rebuilt from
//! what the kernel reported, so every count stays that of the full capture.

use crate::kfilter::{FilterCounters, KernelFilter, LeftOut};
use anyhow::Context;
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
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
    /// Attach the in-kernel filter (falls back to plain capture, with a
    /// note, when it cannot be loaded).
    pub kernel_filter: bool,
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
    /// The in-kernel filter's counters, when it is attached.
    pub filter: Option<FilterCounters>,
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
    /// What timestamping is in effect, for the user (and whether the
    /// in-kernel filter is attached, when it was asked for).
    pub timestamp_note: String,
    /// The in-kernel filter's state in one line (empty when not asked for).
    pub filter_note: String,
    /// Set while the interface is gone and being reopened.
    down_since: Option<Instant>,
    last_attempt: Instant,
    notes: Vec<String>,
    kf: Option<KernelFilter>,
    /// The filter's counters when it was given up.
    kf_base: FilterCounters,
    /// User-space side of the filter (orphaned and evicted fragments).
    kf_user: FilterCounters,
    /// Datagrams whose first fragment was delivered and that are not complete.
    started: FxHashMap<DgramKey, Started>,
    started_order: VecDeque<(DgramKey, u64)>,
    started_gen: u64,
    /// Left-out fragments waiting for their datagram's first fragment.
    held: VecDeque<(DgramKey, LeftOut)>,
    /// Capture time of the last frame handed over.
    last_ts: i64,
}

/// IPv4 source, destination, identification.
type DgramKey = (u32, u32, u16);

struct Started {
    covered: u32,
    total: u32,
    gen: u64,
}

/// Datagrams tracked at once for the in-kernel filter (like its own table).
const MAX_STARTED: usize = 4096;
/// Left-out fragments waiting for their first fragment (45 per 64 KB datagram).
const MAX_HELD: usize = 16384;

/// An IPv4 fragment in an Ethernet frame: key, offset, payload length
/// declared, and the UDP length when it is the first fragment.
fn ipv4_fragment(f: &[u8]) -> Option<(DgramKey, u32, u32, Option<u32>)> {
    let mut l3 = 14;
    let mut et = u16::from_be_bytes([*f.get(12)?, *f.get(13)?]);
    if et == 0x8100 {
        et = u16::from_be_bytes([*f.get(16)?, *f.get(17)?]);
        l3 = 18;
    }
    let ip = f.get(l3..l3 + 20)?;
    if et != 0x0800 || ip[9] != 17 || ip[0] & 0x0f != 5 {
        return None;
    }
    let frag = u16::from_be_bytes([ip[6], ip[7]]);
    let off = (frag & 0x1fff) as u32 * 8;
    if frag & 0x2000 == 0 && off == 0 {
        return None;
    }
    let plen = (u16::from_be_bytes([ip[2], ip[3]]) as u32).checked_sub(20)?;
    let key = (u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]), u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]), u16::from_be_bytes([ip[4], ip[5]]));
    let udp_len = if off == 0 { f.get(l3 + 24..l3 + 26).map(|u| u16::from_be_bytes([u[0], u[1]]) as u32) } else { None };
    Some((key, off, plen, udp_len))
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
    if !header_only(cfg) || cfg.kernel_filter {
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

/// Attaches the in-kernel filter to the capture socket, or says in one line
/// why the capture goes on without it.
fn attach_filter(cfg: &LiveConfig, cap: &Capture<pcap::Active>) -> (Option<KernelFilter>, String) {
    use std::os::unix::io::AsRawFd;
    if !cfg.kernel_filter {
        return (None, String::new());
    }
    if cap.get_datalink() != pcap::Linktype::ETHERNET {
        return (None, format!("in-kernel filter not used: {} is not Ethernet; capturing every frame", cfg.interface));
    }
    match KernelFilter::attach(cap.as_raw_fd()) {
        Ok(k) => (Some(k), "in-kernel filter attached: fragments that carry nothing the analyses read are left out".into()),
        Err(e) => (None, format!("in-kernel filter not used ({e}); capturing every frame")),
    }
}

impl LiveCapture {
    pub fn open(cfg: LiveConfig) -> anyhow::Result<LiveCapture> {
        if cfg.kernel_filter && cfg.filter.is_some() {
            anyhow::bail!("the in-kernel filter replaces the capture filter: use one of them");
        }
        let (cap, disc, mut timestamp_note) = open_pair(&cfg)?;
        let link = LinkType::from_linktype(cap.get_datalink().0 as u32);
        let (kf, kf_note) = attach_filter(&cfg, &cap);
        let mut cfg = cfg;
        // Without the filter the capture is the ordinary one throughout (no counters of it).
        cfg.kernel_filter = kf.is_some();
        if !kf_note.is_empty() {
            timestamp_note = format!("{timestamp_note}; {kf_note}");
        }
        let filter_note = kf_note;
        Ok(LiveCapture {
            cfg,
            cap,
            disc,
            link,
            frame: 0,
            base: CaptureCounters::default(),
            last: CaptureCounters::default(),
            timestamp_note,
            filter_note,
            down_since: None,
            last_attempt: Instant::now(),
            notes: vec![],
            kf,
            kf_base: FilterCounters::default(),
            kf_user: FilterCounters::default(),
            started: FxHashMap::default(),
            started_order: VecDeque::new(),
            started_gen: 0,
            held: VecDeque::new(),
            last_ts: 0,
        })
    }

    /// Whether the in-kernel filter is attached.
    pub fn kernel_filter(&self) -> bool {
        self.kf.is_some()
    }

    fn filter_counters(&self) -> Option<FilterCounters> {
        if !self.cfg.kernel_filter {
            return None;
        }
        let mut c = self.kf_base;
        if let Some(k) = &self.kf {
            c.add(&k.counters());
        }
        c.add(&self.kf_user);
        Some(c)
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
                filter: None,
            };
        }
        self.last.filter = self.filter_counters();
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
                // The program loaded at the start is attached again (no bpf()
                // call: the agent's system-call filter forbids it by now).
                if let Some(k) = &mut self.kf {
                    use std::os::unix::io::AsRawFd;
                    if let Err(e) = k.reattach(cap.as_raw_fd()) {
                        self.notes.push(format!("in-kernel filter not used after reopening ({e}); capturing every frame"));
                        self.kf_base.add(&k.counters());
                        self.kf = None;
                    }
                }
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

/// A left-out fragment as the header-only frame user space would have got.
fn left_out_packet<'a>(frame: u64, ts_ns: i64, link: LinkType, lo: &'a LeftOut) -> Packet<'a> {
    Packet { frame, ts_ns, interface: 0, link, data: &lo.headers[..lo.hdr_len], orig_len: lo.orig_len }
}

impl LiveCapture {
    /// Notes a delivered (or rebuilt) fragment of datagram `key`; forgets
    /// the datagram once all its bytes were seen.
    fn track(&mut self, key: DgramKey, plen: u32, udp_len: Option<u32>) {
        if let Some(total) = udp_len {
            if !self.started.contains_key(&key) {
                self.started_gen += 1;
                let gen = self.started_gen;
                self.started.insert(key, Started { covered: 0, total, gen });
                self.started_order.push_back((key, gen));
                while self.started.len() > MAX_STARTED {
                    let Some((k, g)) = self.started_order.pop_front() else { break };
                    if self.started.get(&k).is_some_and(|s| s.gen == g) {
                        self.started.remove(&k);
                        self.kf_user.evicted += 1;
                    }
                }
                if self.started_order.len() > 4 * MAX_STARTED {
                    let started = &self.started;
                    self.started_order.retain(|(k, g)| started.get(k).is_some_and(|s| s.gen == *g));
                }
            }
        }
        if let Some(st) = self.started.get_mut(&key) {
            st.covered = st.covered.saturating_add(plen);
            if st.covered >= st.total {
                self.started.remove(&key);
            }
        }
    }

    /// Hands over the fragments the kernel left out so far: those of
    /// datagrams whose first fragment was delivered at once (time: the last
    /// frame's, which lies between the datagram's first and last fragment),
    /// the others when their first fragment comes.
    fn drain_left_out(&mut self, on_packet: &mut dyn FnMut(&Packet<'_>), delivered: &mut usize) {
        loop {
            let Some(lo) = self.kf.as_mut().and_then(|k| k.next_left_out()) else { break };
            let Some((key, _, plen, _)) = ipv4_fragment(&lo.headers[..lo.hdr_len]) else {
                self.kf_user.orphaned += 1;
                continue;
            };
            if self.started.contains_key(&key) {
                self.frame += 1;
                on_packet(&left_out_packet(self.frame, self.last_ts, self.link, &lo));
                *delivered += 1;
                self.track(key, plen, None);
            } else {
                self.held.push_back((key, lo));
                if self.held.len() > MAX_HELD {
                    self.held.pop_front();
                    self.kf_user.orphaned += 1;
                }
            }
        }
    }

    /// After the first fragment of `key` was delivered: its left-out fragments that were waiting.
    fn release_held(&mut self, key: DgramKey, on_packet: &mut dyn FnMut(&Packet<'_>), delivered: &mut usize) {
        if !self.held.iter().any(|(k, _)| *k == key) {
            return;
        }
        let held = std::mem::take(&mut self.held);
        for (k, lo) in held {
            if k != key {
                self.held.push_back((k, lo));
                continue;
            }
            if let Some((_, _, plen, _)) = ipv4_fragment(&lo.headers[..lo.hdr_len]) {
                self.frame += 1;
                on_packet(&left_out_packet(self.frame, self.last_ts, self.link, &lo));
                *delivered += 1;
                self.track(k, plen, None);
            }
        }
    }
}

impl PacketSource for LiveCapture {
    /// Hands over what the kernel has (up to a batch, alternating between the
    /// main and the discovery handle in header-only mode), waiting up to
    /// ~100 ms when nothing is there. When the interface goes away the
    /// capture is reopened (every second, for up to an hour) and the gap is
    /// reported as a note. With the in-kernel filter, the fragments it left
    /// out are handed over (as header-only frames) before each frame read:
    /// the kernel reported them before that frame reached the ring.
    fn poll(&mut self, on_packet: &mut dyn FnMut(&Packet<'_>)) -> anyhow::Result<Poll> {
        if self.down_since.is_some() {
            self.try_reopen()?;
            return Ok(Poll::Idle);
        }
        let mut delivered = 0;
        let mut failure: Option<pcap::Error> = None;
        let mut waited = false;
        let filtered = self.kf.is_some();
        loop {
            let mut got = false;
            for h in 0..2 {
                if h == 0 && filtered {
                    self.drain_left_out(on_packet, &mut delivered);
                }
                let mut first_of: Option<DgramKey> = None;
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
                        self.last_ts = ts;
                        delivered += 1;
                        got = true;
                        if filtered {
                            if let Some((key, _, plen, udp_len)) = ipv4_fragment(p.data) {
                                self.track(key, plen, udp_len);
                                if udp_len.is_some() {
                                    first_of = Some(key);
                                }
                            }
                        }
                    }
                    Err(pcap::Error::TimeoutExpired) => {}
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
                if let Some(key) = first_of {
                    self.release_held(key, on_packet, &mut delivered);
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
