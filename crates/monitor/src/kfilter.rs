//! The in-kernel capture filter (bpf/capture.c): loading it with aya,
//! attaching it to the capture socket, reading the fragments it left out and
//! its counters. See docs/online.md, "In-kernel filter".

use aya::maps::{Map, MapData, RingBuf};
use aya::programs::SocketFilter;
use aya::Ebpf;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

/// The object built by build.rs (empty when clang was missing at build time).
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/capture.bpf.o"));
/// Why the object is empty, from build.rs.
const BUILD_NOTE: &str = env!("DDSCOPE_BPF_NOTE");

/// Set to make loading fail (tests of the fallback).
pub const FORCE_FAIL_ENV: &str = "DDSCOPE_KFILTER_FAIL";

/// The filter's counters (cumulative since it was attached, over reopenings).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FilterCounters {
    /// Frames the program examined.
    pub frames: u64,
    /// IP fragments left out of the capture (their headers reported instead).
    pub left_out: u64,
    /// Frame bytes not copied to user space (left out or cut).
    pub bytes_saved: u64,
    /// Fragments passed (headers only) because the report ring was full.
    pub ring_full: u64,
    /// Fragments of datagrams the program did not follow (first fragment
    /// unseen, or its entry pushed out of the bounded table), passed whole.
    pub not_followed: u64,
    /// Datagrams given up and passed whole (a header split across two
    /// fragments, IP options, more headers in a fragment than one walk reads).
    pub given_up: u64,
    /// Fragmented RTPS datagrams followed to their last byte.
    pub completed: u64,
    /// Left-out fragments user space had to discard: the capture never
    /// delivered their datagram's first fragment (ring overflow), or more
    /// were waiting than the bounded queue holds.
    pub orphaned: u64,
    /// Datagrams user space stopped tracking to stay within its bound.
    pub evicted: u64,
}

impl FilterCounters {
    pub fn add(&mut self, o: &FilterCounters) {
        self.frames += o.frames;
        self.left_out += o.left_out;
        self.bytes_saved += o.bytes_saved;
        self.ring_full += o.ring_full;
        self.not_followed += o.not_followed;
        self.given_up += o.given_up;
        self.completed += o.completed;
        self.orphaned += o.orphaned;
        self.evicted += o.evicted;
    }
}

/// The closing report's line about the filter.
pub fn closing_line(f: &FilterCounters) -> String {
    format!(
        "in-kernel filter: {} frames examined, {} fragments left out, {} bytes not copied; {} datagrams followed to the end, \
         {} given up, {} fragments not followed (passed whole), {} passed for a full report ring, {} orphaned, {} untracked",
        f.frames, f.left_out, f.bytes_saved, f.completed, f.given_up, f.not_followed, f.ring_full, f.orphaned, f.evicted
    )
}

pub struct KernelFilter {
    ebpf: Ebpf,
    dropped: RingBuf<MapData>,
    /// STATS, memory-mapped (read without system calls).
    stats: *const u64,
    _stats_map: Map,
}

// SAFETY: `stats` points into a shared mapping owned by this struct (unmapped on drop), read only.
unsafe impl Send for KernelFilter {}

/// Counters in STATS (bpf/capture.c).
const STATS_N: usize = 7;
const STATS_BYTES: usize = 4096;

impl Drop for KernelFilter {
    fn drop(&mut self) {
        // SAFETY: mapped in `attach` with this length; nothing reads it after this.
        unsafe { libc::munmap(self.stats as *mut libc::c_void, STATS_BYTES) };
    }
}

/// One left-out fragment: its frame's headers and length on the wire.
pub struct LeftOut {
    pub headers: [u8; 40],
    pub hdr_len: usize,
    pub orig_len: u32,
}

impl KernelFilter {
    /// Loads the program and attaches it to the packet socket `fd`
    /// (libpcap's, Ethernet link layer). The error is one line.
    pub fn attach(fd: RawFd) -> Result<KernelFilter, String> {
        if std::env::var_os(FORCE_FAIL_ENV).is_some() {
            return Err(format!("loading disabled by {FORCE_FAIL_ENV}"));
        }
        if OBJECT.is_empty() {
            return Err(format!("the eBPF object was not built ({BUILD_NOTE})"));
        }
        let mut ebpf = Ebpf::load(OBJECT).map_err(|e| format!("cannot load the eBPF object: {e}"))?;
        let prog: &mut SocketFilter = ebpf
            .program_mut("ddscope_capture")
            .ok_or("the eBPF object has no program ddscope_capture")?
            .try_into()
            .map_err(|e| format!("ddscope_capture is not a socket filter: {e}"))?;
        prog.load().map_err(|e| format!("the kernel refused the eBPF program: {e}"))?;
        Self::attach_prog(prog, fd)?;
        let dropped = ebpf.take_map("DROPPED").ok_or("the eBPF object has no map DROPPED")?;
        let dropped = RingBuf::try_from(dropped).map_err(|e| format!("DROPPED: {e}"))?;
        let stats_map = ebpf.take_map("STATS").ok_or("the eBPF object has no map STATS")?;
        let Map::Array(data) = &stats_map else { return Err("STATS is not an array".into()) };
        let sfd = data.fd().as_fd().as_raw_fd();
        // SAFETY: a read-only shared mapping of the BPF_F_MMAPABLE array map (7 u64 values) at offset 0.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), STATS_BYTES, libc::PROT_READ, libc::MAP_SHARED, sfd, 0) };
        if p == libc::MAP_FAILED {
            return Err(format!("cannot map the filter's counters: {}", std::io::Error::last_os_error()));
        }
        Ok(KernelFilter { ebpf, dropped, stats: p as *const u64, _stats_map: stats_map })
    }

    fn attach_prog(prog: &mut SocketFilter, fd: RawFd) -> Result<(), String> {
        // SAFETY: `fd` is the open capture socket; it outlives this call.
        let sock = unsafe { BorrowedFd::borrow_raw(fd) };
        prog.attach(sock).map_err(|e| format!("cannot attach the eBPF program to the capture socket: {e}"))?;
        Ok(())
    }

    /// Attaches the loaded program to a new capture socket (after the
    /// interface came back): setsockopt only, no bpf() call.
    pub fn reattach(&mut self, fd: RawFd) -> Result<(), String> {
        let prog: &mut SocketFilter = self
            .ebpf
            .program_mut("ddscope_capture")
            .ok_or("the eBPF object has no program ddscope_capture")?
            .try_into()
            .map_err(|e| format!("ddscope_capture is not a socket filter: {e}"))?;
        Self::attach_prog(prog, fd)

    }

    /// The next left-out fragment the kernel reported, if any.
    pub fn next_left_out(&mut self) -> Option<LeftOut> {
        let item = self.dropped.next()?;
        if item.len() < 8 {
            return None;
        }
        let orig_len = u32::from_ne_bytes([item[0], item[1], item[2], item[3]]);
        let hdr_len = (u32::from_ne_bytes([item[4], item[5], item[6], item[7]]) as usize).min(40).min(item.len() - 8);
        let mut headers = [0u8; 40];
        headers[..hdr_len].copy_from_slice(&item[8..8 + hdr_len]);
        Some(LeftOut { headers, hdr_len, orig_len })
    }

    /// The kernel side's counters.
    pub fn counters(&self) -> FilterCounters {
        // SAFETY: `stats` maps STATS_N u64 values; the kernel updates them atomically.
        let get = |i: usize| -> u64 { if i < STATS_N { unsafe { std::ptr::read_volatile(self.stats.add(i)) } } else { 0 } };
        FilterCounters {
            frames: get(0),
            left_out: get(1),
            bytes_saved: get(2),
            ring_full: get(3),
            not_followed: get(4),
            given_up: get(5),
            completed: get(6),
            orphaned: 0,
            evicted: 0,
        }
    }
}
