//! Live capture with libpcap: a large ring buffer in immediate mode,
//! nanosecond timestamps (adapter timestamps when the NIC offers them, with a
//! clear fallback message), kernel drop counters, an optional BPF filter and
//! snap length (header-only mode), and reopening when the interface goes
//! down and comes back. Optionally an in-kernel filter (eBPF, see
//! [`crate::agent::kfilter`]) leaves out the IP fragments that carry nothing the
//! analyses read; they are handed over as header-only frames rebuilt from
//! what the kernel reported, so every count stays that of the full capture.

use crate::agent::kfilter::{FilterCounters, KernelFilter, LeftOut, Mode, Record};
use anyhow::Context;
use ddscope_core::bounded::BoundedMap;
use std::collections::VecDeque;
pub use ddscope_core::source::{InterfaceSpec, Tstamp};
use ddscope_core::source::{LiveInterfaces, Packet, PacketSource, Poll};
use ddscope_wire::link::LinkType;
use pcap::{Capture, Precision, TimestampType};
use std::time::{Duration, Instant};

/// Opens live interfaces with libpcap: what [`ddscope_core::source::SourceSpec::open`]
/// is given for [`ddscope_core::source::SourceSpec::Interface`] (`ddscope live`, `ddscope agent`).
pub struct Libpcap;

impl LiveInterfaces for Libpcap {
    type Capture = LiveCapture;
    fn open(&self, spec: &InterfaceSpec) -> anyhow::Result<LiveCapture> {
        LiveCapture::open(spec.clone())
    }
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
    cfg: InterfaceSpec,
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
    /// Datagrams whose first fragment was delivered and that are not
    /// complete, oldest first sighting first (evictions in `kf_user.evicted`).
    started: BoundedMap<DgramKey, Started>,
    /// Left-out fragments waiting for their datagram's first fragment.
    held: VecDeque<(DgramKey, LeftOut)>,
    /// Capture time of the last frame handed over.
    last_ts: i64,
    /// Records mode: records read from the kernel, waiting for the frames
    /// passed to the socket before them (with when they were read).
    pending: VecDeque<(Record, Instant)>,
    /// Records mode: frames read from the socket since the program was attached.
    socket_seen: u64,
    /// Records mode: a socket asking for timestamps, so that the kernel stamps
    /// every frame (skb->tstamp) while the capture runs.
    _stamp: Option<std::os::fd::OwnedFd>,
    /// Records mode: the frame being rebuilt.
    rebuilt: Vec<u8>,
    /// Records mode: frames without a kernel timestamp when last noted.
    no_tstamp_noted: u64,
    /// The program's run-time statistics (runs, ns) and when they were read.
    runtime: (u64, u64),
    runtime_at: Option<Instant>,
}

/// Records waiting for the frames passed before them (then handed over regardless, counted).
const MAX_PENDING: usize = 65536;
/// How long a record waits for the frames passed before it.
const MERGE_WAIT: Duration = Duration::from_secs(2);

/// A UDP socket with SO_TIMESTAMPNS: while one is open the kernel stamps
/// every frame on receive and on the transmit copy for packet sockets
/// (netstamp_needed), the stamp records carry.
fn stamp_socket() -> Result<std::os::fd::OwnedFd, String> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket(2); the descriptor is owned by the OwnedFd below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(format!("cannot open a socket for timestamps: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    // SAFETY: `one` lives for the call; the length is its size.
    let r = unsafe {
        libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &one as *const libc::c_int as *const libc::c_void, std::mem::size_of::<libc::c_int>() as libc::socklen_t)
    };
    if r < 0 {
        return Err(format!("cannot ask for timestamps (SO_TIMESTAMPNS): {}", std::io::Error::last_os_error()));
    }
    Ok(owned)
}

/// IPv4 source, destination, identification.
type DgramKey = (u32, u32, u16);

struct Started {
    covered: u32,
    total: u32,
}

/// Datagrams tracked at once for the in-kernel filter: the size of its own
/// table (`max_entries` of the fragment map in bpf/capture.c), not a setting.
const MAX_STARTED: usize = 4096;
/// Left-out fragments waiting for their first fragment (45 per 64 KB datagram).
const MAX_HELD: usize = 16384;

/// An IPv4 fragment of a UDP datagram in a frame of link type `link`: key,
/// offset, payload length declared (by the total length, after the header and
/// its options), and the UDP length when it is the first fragment and the
/// capture holds it. None for anything else, a cut header included.
fn ipv4_fragment(link: LinkType, f: &[u8]) -> Option<(DgramKey, u32, u32, Option<u32>)> {
    let p = ddscope_wire::ip::ipv4_in_frame(link, f).ok()??;
    if p.header.protocol != ddscope_wire::ip::PROTO_UDP || !p.is_fragment() {
        return None;
    }
    let h = &p.header;
    let key = (u32::from(h.src), u32::from(h.dst), h.ident);
    Some((key, h.frag_offset as u32, h.payload_len as u32, p.udp_len().map(u32::from)))
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
fn header_only(cfg: &InterfaceSpec) -> bool {
    cfg.snaplen > 0 && cfg.snaplen < 1500
}

/// Opens the capture handle(s), non-blocking: we wait with poll() ourselves.
/// (libpcap's own read timeout does not return on an idle interface with
/// TPACKET_V3, which would leave a stop request unnoticed.)
fn open_pair(cfg: &InterfaceSpec) -> anyhow::Result<(Capture<pcap::Active>, Option<Capture<pcap::Active>>, String)> {
    if !header_only(cfg) || cfg.kernel_filter || cfg.kernel_records {
        let (c, note) = open(cfg)?;
        return Ok((c.setnonblock().context("non-blocking capture")?, None, note));
    }
    let main_cfg = InterfaceSpec { filter: Some(combine(&cfg.filter, &format!("not ({DISCOVERY_BPF})"))), ..cfg.clone() };
    let disc_cfg = InterfaceSpec { filter: Some(combine(&cfg.filter, DISCOVERY_BPF)), snaplen: 0, ..cfg.clone() };
    let (main, note) = open(&main_cfg)?;
    let (disc, _) = open(&disc_cfg)?;
    let main = main.setnonblock().context("non-blocking capture")?;
    let disc = disc.setnonblock().context("non-blocking capture")?;
    Ok((main, Some(disc), format!("{note}; header-only: {} bytes per frame, discovery (even RTPS ports) in full", cfg.snaplen)))
}

fn open(cfg: &InterfaceSpec) -> anyhow::Result<(Capture<pcap::Active>, String)> {
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
fn attach_filter(cfg: &InterfaceSpec, cap: &Capture<pcap::Active>) -> (Option<KernelFilter>, String) {
    use std::os::unix::io::AsRawFd;
    if !cfg.kernel_filter && !cfg.kernel_records {
        return (None, String::new());
    }
    let (mode, what) = if cfg.kernel_records { (Mode::Records, "in-kernel records") } else { (Mode::Filter, "in-kernel filter") };
    if cap.get_datalink() != pcap::Linktype::ETHERNET {
        return (None, format!("{what} not used: {} is not Ethernet; capturing every frame", cfg.interface));
    }
    if mode == Mode::Records && cfg.tstamp != Tstamp::Host {
        return (None, format!("{what} not used: records carry the kernel's software timestamps, not the NIC's; capturing every frame"));
    }
    match KernelFilter::attach(cap.as_raw_fd(), mode) {
        Ok(k) if mode == Mode::Records => (
            Some(k),
            format!("{what} attached: the socket receives discovery and non-RTPS frames, every other frame comes as a record of the bytes the analyses read"),
        ),
        Ok(k) => (Some(k), format!("{what} attached: fragments that carry nothing the analyses read are left out")),
        Err(e) => (None, format!("{what} not used ({e}); capturing every frame")),
    }
}

impl LiveCapture {
    /// Opened through [`Libpcap`] only.
    fn open(cfg: InterfaceSpec) -> anyhow::Result<LiveCapture> {
        if (cfg.kernel_filter || cfg.kernel_records) && cfg.filter.is_some() {
            anyhow::bail!("the in-kernel filter replaces the capture filter: use one of them");
        }
        if cfg.kernel_filter && cfg.kernel_records {
            anyhow::bail!("the in-kernel filter and in-kernel records are two modes: use one of them");
        }
        // Records mode: the kernel must stamp frames before the program reads the stamps.
        let mut stamp = None;
        let mut stamp_note = None;
        if cfg.kernel_records {
            match stamp_socket() {
                Ok(s) => stamp = Some(s),
                Err(e) => stamp_note = Some(format!("in-kernel records not used ({e}); capturing every frame")),
            }
        }
        let mut cfg = cfg;
        if stamp_note.is_some() {
            cfg.kernel_records = false;
        }
        let (cap, disc, mut timestamp_note) = open_pair(&cfg)?;
        let link = LinkType::from_linktype(cap.get_datalink().0 as u32);
        let (kf, mut kf_note) = attach_filter(&cfg, &cap);
        if let Some(n) = stamp_note {
            kf_note = n;
        }
        // Without the filter the capture is the ordinary one throughout (no counters of it).
        cfg.kernel_filter = kf.is_some();
        cfg.kernel_records &= kf.is_some();
        if !cfg.kernel_records {
            stamp = None;
        }
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
            started: BoundedMap::new(MAX_STARTED),
            held: VecDeque::new(),
            last_ts: 0,
            pending: VecDeque::new(),
            socket_seen: 0,
            _stamp: stamp,
            rebuilt: Vec::new(),
            no_tstamp_noted: 0,
            runtime: (0, 0),
            runtime_at: None,
        })
    }

    /// Whether the in-kernel filter is attached.
    pub fn kernel_filter(&self) -> bool {
        self.kf.is_some()
    }

    fn filter_counters(&mut self) -> Option<FilterCounters> {
        if !self.cfg.kernel_filter {
            return None;
        }
        let mut c = self.kf_base;
        if let Some(k) = &self.kf {
            // The program's run time: a file read, so at most once a second.
            if self.runtime_at.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                if let Some((ns, runs)) = k.program_runtime() {
                    self.runtime = (runs, ns);
                }
                self.runtime_at = Some(Instant::now());
            }
            let mut k = k.counters();
            (k.program_runs, k.program_ns) = self.runtime;
            c.add(&k);
        }
        c.add(&self.kf_user);
        if c.records_mode {
            // Every frame the program saw was passed to the socket or reported as a record.
            c.frames = c.records + c.passed;
        }
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
                // Frames the old socket still held are gone with it: records
                // wait only for frames the new one will deliver.
                if let Some(k) = &self.kf {
                    self.socket_seen = k.passed();
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
            let evicted = &mut self.kf_user.evicted;
            self.started.get_or_insert_keep_order(key, || Started { covered: 0, total }, &mut |_, _| *evicted += 1);
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
            let Some((key, _, plen, _)) = ipv4_fragment(self.link, &lo.headers[..lo.hdr_len]) else {
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
            if let Some((_, _, plen, _)) = ipv4_fragment(self.link, &lo.headers[..lo.hdr_len]) {
                self.frame += 1;
                on_packet(&left_out_packet(self.frame, self.last_ts, self.link, &lo));
                *delivered += 1;
                self.track(k, plen, None);
            }
        }
    }
}

impl LiveCapture {
    /// The poll's answer; a read that failed starts the reopening (noted once, counters kept).
    fn poll_result(&mut self, delivered: usize, failure: Option<pcap::Error>) -> Poll {
        if let Some(e) = failure {
            self.notes.push(format!("capture on {} stopped: {e}; reopening", self.cfg.interface));
            self.counters();
            self.down_since = Some(Instant::now());
            self.last_attempt = Instant::now();
        }
        if delivered > 0 {
            Poll::Frames(delivered)
        } else {
            Poll::Idle
        }
    }

    /// Records mode: moves the kernel's records into `pending`.
    fn drain_records(&mut self) {
        let Some(k) = self.kf.as_mut() else { return };
        while let Some(item) = k.next_record() {
            // The program counts no records itself (no per-frame atomics): they are counted here.
            self.kf_user.records += 1;
            match Record::parse(&item) {
                Ok(r) => self.pending.push_back((r, Instant::now())),
                Err(e) => {
                    if self.kf_user.bad_records == 0 {
                        self.notes.push(format!("in-kernel records: bad record ({e}); counted and skipped"));
                    }
                    self.kf_user.bad_records += 1;
                }
            }
        }
    }

    /// Records mode: hands over the waiting records that came before the
    /// `upto`-th frame the socket delivered (all of them with `force`), in
    /// the kernel's order; those that waited too long, or beyond the bound,
    /// go regardless (counted).
    fn emit_records(&mut self, upto: u64, force: bool, on_packet: &mut dyn FnMut(&Packet<'_>), delivered: &mut usize) {
        while let Some((r, at)) = self.pending.front() {
            let due = r.passed_before < upto || force;
            let late = self.pending.len() > MAX_PENDING || at.elapsed() > MERGE_WAIT;
            if !due && !late {
                break;
            }
            let Some((r, _)) = self.pending.pop_front() else { break };
            if !due {
                self.kf_user.merge_forced += 1;
            }
            let mut buf = std::mem::take(&mut self.rebuilt);
            match r.rebuild(&mut buf) {
                Ok(()) => {
                    self.frame += 1;
                    on_packet(&Packet { frame: self.frame, ts_ns: r.ts_ns, interface: 0, link: self.link, data: &buf, orig_len: r.wire_len });
                    self.last_ts = r.ts_ns;
                    *delivered += 1;
                }
                Err(e) => {
                    if self.kf_user.bad_records == 0 {
                        self.notes.push(format!("in-kernel records: bad record ({e}); counted and skipped"));
                    }
                    self.kf_user.bad_records += 1;
                }
            }
            self.rebuilt = buf;
        }
    }

    /// Records mode: the frames the socket received and the records, merged
    /// in the kernel's order (each record says how many frames were passed
    /// to the socket before it). Waits up to ~100 ms when nothing is there;
    /// the records ring wakes nobody (BPF_RB_NO_WAKEUP): it is read on
    /// this cadence.
    fn poll_records(&mut self, on_packet: &mut dyn FnMut(&Packet<'_>)) -> anyhow::Result<Poll> {
        let mut delivered = 0;
        let mut waited = false;
        let mut failure: Option<pcap::Error> = None;
        loop {
            self.drain_records();
            let mut got = false;
            while delivered < LIVE_BATCH * 64 {
                match self.cap.next_packet() {
                    Ok(p) => {
                        self.socket_seen += 1;
                        let ts = (p.header.ts.tv_sec as i64).saturating_mul(1_000_000_000).saturating_add(p.header.ts.tv_usec as i64);
                        let (data, len) = (p.data.to_vec(), p.header.len);
                        self.emit_records(self.socket_seen, false, on_packet, &mut delivered);
                        self.frame += 1;
                        on_packet(&Packet { frame: self.frame, ts_ns: ts, interface: 0, link: self.link, data: &data, orig_len: len });
                        self.last_ts = ts;
                        delivered += 1;
                        got = true;
                    }
                    Err(pcap::Error::TimeoutExpired) => break,
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            // Records after the last frame the socket delivered.
            self.drain_records();
            self.emit_records(self.socket_seen + 1, failure.is_some(), on_packet, &mut delivered);
            if failure.is_some() || got || delivered > 0 || waited {
                break;
            }
            self.wait();
            waited = true;
        }
        if let Some(k) = &self.kf {
            let c = k.counters();
            if c.no_tstamp > 0 && self.no_tstamp_noted == 0 {
                self.notes.push(format!(
                    "in-kernel records: {} frames without a kernel timestamp passed whole (the kernel stamps frames only while a socket asks for timestamps)",
                    c.no_tstamp
                ));
                self.no_tstamp_noted = c.no_tstamp;
            }
        }
        Ok(self.poll_result(delivered, failure))
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
        // (Also once the program is gone after a reopening: the records read before still go out.)
        if self.cfg.kernel_records && (self.kf.is_some() || !self.pending.is_empty()) {
            return self.poll_records(on_packet);
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
                            if let Some((key, _, plen, udp_len)) = ipv4_fragment(self.link, p.data) {
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
        Ok(self.poll_result(delivered, failure))
    }

    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ddscope_wire::ip::{Ipv4Repr, PROTO_UDP};
    use ddscope_wire::link::{emit_ethernet, VlanTag, ETHERTYPE_IPV4, ETHERTYPE_QINQ, ETHERTYPE_VLAN};
    use ddscope_wire::Emit;
    use std::net::Ipv4Addr;

    fn ip(protocol: u8, more_fragments: bool, frag_offset: u16, payload_len: u16) -> Ipv4Repr {
        Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(239, 255, 0, 1),
            protocol,
            ident: 0x1234,
            dont_fragment: false,
            more_fragments,
            frag_offset,
            ttl: 64,
            dscp_ecn: 0,
            payload_len,
        }
    }

    fn frame(tags: &[VlanTag], h: Ipv4Repr, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![];
        emit_ethernet(&mut f, [1; 6], [2; 6], tags, ETHERTYPE_IPV4).unwrap();
        h.emit_vec(&mut f).unwrap();
        f.extend_from_slice(payload);
        f
    }

    /// Oracle: the fields the frames were built with.
    #[test]
    fn fragments_are_read_through_the_wire_parser() {
        let key = (0x0a00_0001, 0xefff_0001, 0x1234);
        let c_tag = VlanTag { tpid: ETHERTYPE_VLAN, pcp: 5, dei: false, vid: 10 };
        let s_tag = VlanTag { tpid: ETHERTYPE_QINQ, pcp: 3, dei: false, vid: 100 };
        // first fragment, one 802.1Q tag: the UDP length (3008) comes from its header
        let udp = [0x1c, 0xe8, 0x1c, 0xe9, 0x0b, 0xc0, 0, 0, 1, 2, 3, 4];
        let first = frame(&[c_tag], ip(PROTO_UDP, true, 0, 12), &udp);
        assert_eq!(ipv4_fragment(LinkType::Ethernet, &first), Some((key, 0, 12, Some(3008))));
        // header only (as the in-kernel filter reports left-out fragments): no UDP length
        assert_eq!(ipv4_fragment(LinkType::Ethernet, &first[..38]), Some((key, 0, 12, None)));
        // a later fragment behind 802.1ad + 802.1Q (the old parser stopped at one tag)
        let later = frame(&[s_tag, c_tag], ip(PROTO_UDP, true, 1480, 24), &[0; 24]);
        assert_eq!(ipv4_fragment(LinkType::Ethernet, &later[..42]), Some((key, 1480, 24, None)));
        // IP options (IHL 6: the old parser refused them): the declared payload excludes them
        let opts: Vec<u8> = [
            &[0u8; 12][..],
            &[0x08, 0x00, 0x46, 0, 0, 32, 0x12, 0x34, 0x00, 0xb9, 64, 17, 0, 0, 10, 0, 0, 1, 239, 255, 0, 1, 1, 1, 1, 1],
            &[0; 8],
        ]
        .concat();
        assert_eq!(ipv4_fragment(LinkType::Ethernet, &opts), Some((key, 1480, 8, None)));
        // not a fragment, not UDP, or a cut header: none
        assert_eq!(ipv4_fragment(LinkType::Ethernet, &frame(&[], ip(PROTO_UDP, false, 0, 12), &udp)), None);
        assert_eq!(ipv4_fragment(LinkType::Ethernet, &frame(&[], ip(6, true, 0, 12), &udp)), None);
        assert_eq!(ipv4_fragment(LinkType::Ethernet, &first[..30]), None);
    }
}
