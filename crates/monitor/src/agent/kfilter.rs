//! The in-kernel capture filter (bpf/capture.c): loading it with aya,
//! attaching it to the capture socket, reading the fragments it left out and
//! its counters. See docs/online.md, "In-kernel filter".

use aya::maps::{Map, MapData, RingBuf};
use aya::programs::SocketFilter;
use aya::{Ebpf, EbpfLoader};
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
    /// Records mode ([`Mode::Records`]): the counters below are its own.
    pub records_mode: bool,
    /// Frames reported as records (the socket received nothing of them).
    pub records: u64,
    /// Frames passed whole to the socket.
    pub passed: u64,
    /// Frames passed whole because the kernel had not stamped them (no
    /// socket had asked for timestamps yet, or a monotonic delivery time).
    pub no_tstamp: u64,
    /// Records user space could not rebuild (malformed; none expected).
    pub bad_records: u64,
    /// Records handed over before the passed frames that preceded them had
    /// come (waited longer than the merge bound, or too many waiting).
    pub merge_forced: u64,
    /// Runs of the program and the time they took (ns), when the kernel
    /// measures it (`sysctl kernel.bpf_stats_enabled=1`; 0 otherwise).
    pub program_runs: u64,
    pub program_ns: u64,
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
        self.records_mode |= o.records_mode;
        self.records += o.records;
        self.passed += o.passed;
        self.no_tstamp += o.no_tstamp;
        self.bad_records += o.bad_records;
        self.merge_forced += o.merge_forced;
        self.program_runs += o.program_runs;
        self.program_ns += o.program_ns;
    }
}

/// The closing report's line about the filter.
pub fn closing_line(f: &FilterCounters) -> String {
    let mut line = if f.records_mode {
        format!(
            "in-kernel records: {} frames examined, {} rebuilt from records, {} passed whole ({} without a kernel timestamp, \
             {} for a full record ring, {} datagrams given up, {} fragments not followed); {} bad records, {} merged out of order",
            f.frames, f.records, f.passed, f.no_tstamp, f.ring_full, f.given_up, f.not_followed, f.bad_records, f.merge_forced
        )
    } else {
        format!(
            "in-kernel filter: {} frames examined, {} fragments left out, {} bytes not copied; {} datagrams followed to the end, \
             {} given up, {} fragments not followed (passed whole), {} passed for a full report ring, {} orphaned, {} untracked",
            f.frames, f.left_out, f.bytes_saved, f.completed, f.given_up, f.not_followed, f.ring_full, f.orphaned, f.evicted
        )
    };
    if f.program_runs > 0 {
        line += &format!(
            "; program: {:.0} ns per frame over {} frames (kernel.bpf_stats_enabled)",
            f.program_ns as f64 / f.program_runs as f64,
            f.program_runs
        );
    }
    line
}

/// `run_time_ns` and `run_cnt` of a BPF program fd, from /proc/self/fdinfo
/// (counted by the kernel while `kernel.bpf_stats_enabled` is 1).
fn program_stats(fd: RawFd) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
    };
    Some((field("run_time_ns:")?, field("run_cnt:")?))
}

/// A verifier refusal in one line: aya's message up to the log, and the
/// log's last statement of what was wrong.
fn one_line(e: &str) -> String {
    let mut lines = e.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("");
    let first = first.split(" Verifier output:").next().unwrap_or(first).to_string();
    let why = e
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with(';')
                && !l.starts_with("verification time")
                && !l.starts_with("stack depth")
                && !l.starts_with("processed ")
                && !l.starts_with(')')
                && !l.chars().next().is_some_and(|c| c.is_ascii_digit())
        })
        .last()
        .unwrap_or("");
    if why.is_empty() || why == first { first } else { format!("{first} … {why}") }
}

/// What the program attached to the capture socket does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `ddscope_capture`: leaves out or cuts IP fragments (header reports in DROPPED).
    Filter,
    /// `ddscope_records`: passes only what must pass whole; one record per other frame in RECORDS.
    Records,
}

impl Mode {
    fn program(self) -> &'static str {
        match self {
            Mode::Filter => "ddscope_capture",
            Mode::Records => "ddscope_records",
        }
    }
}

pub struct KernelFilter {
    ebpf: Ebpf,
    mode: Mode,
    dropped: RingBuf<MapData>,
    records: RingBuf<MapData>,
    /// STATS, memory-mapped (read without system calls).
    stats: *const u64,
    /// The attached program's fd (its run-time statistics).
    prog_fd: RawFd,
    _stats_map: Map,
}

// SAFETY: `stats` points into a shared mapping owned by this struct (unmapped on drop), read only.
unsafe impl Send for KernelFilter {}

/// Counters in STATS (bpf/capture.c).
const STATS_N: usize = 10;
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
    pub fn attach(fd: RawFd, mode: Mode) -> Result<KernelFilter, String> {
        if std::env::var_os(FORCE_FAIL_ENV).is_some() {
            return Err(format!("loading disabled by {FORCE_FAIL_ENV}"));
        }
        if OBJECT.is_empty() {
            return Err(format!("the eBPF object was not built ({BUILD_NOTE})"));
        }
        // The ring of the mode not used gets one page (a ring's least size).
        let unused = match mode {
            Mode::Filter => "RECORDS",
            Mode::Records => "DROPPED",
        };
        let mut ebpf = EbpfLoader::new()
            .set_max_entries(unused, 4096)
            .load(OBJECT)
            .map_err(|e| format!("cannot load the eBPF object: {e}"))?;
        let name = mode.program();
        let prog: &mut SocketFilter = ebpf
            .program_mut(name)
            .ok_or_else(|| format!("the eBPF object has no program {name}"))?
            .try_into()
            .map_err(|e| format!("{name} is not a socket filter: {e}"))?;
        prog.load().map_err(|e| format!("the kernel refused the eBPF program: {}", one_line(&e.to_string())))?;
        Self::attach_prog(prog, fd)?;
        let prog_fd = prog.fd().map_err(|e| format!("{name}: {e}"))?.as_fd().as_raw_fd();
        let dropped = ebpf.take_map("DROPPED").ok_or("the eBPF object has no map DROPPED")?;
        let dropped = RingBuf::try_from(dropped).map_err(|e| format!("DROPPED: {e}"))?;
        let records = ebpf.take_map("RECORDS").ok_or("the eBPF object has no map RECORDS")?;
        let records = RingBuf::try_from(records).map_err(|e| format!("RECORDS: {e}"))?;
        let stats_map = ebpf.take_map("STATS").ok_or("the eBPF object has no map STATS")?;
        let Map::Array(data) = &stats_map else { return Err("STATS is not an array".into()) };
        let sfd = data.fd().as_fd().as_raw_fd();
        // SAFETY: a read-only shared mapping of the BPF_F_MMAPABLE array map (7 u64 values) at offset 0.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), STATS_BYTES, libc::PROT_READ, libc::MAP_SHARED, sfd, 0) };
        if p == libc::MAP_FAILED {
            return Err(format!("cannot map the filter's counters: {}", std::io::Error::last_os_error()));
        }
        Ok(KernelFilter { ebpf, mode, dropped, records, stats: p as *const u64, prog_fd, _stats_map: stats_map })
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
        let name = self.mode.program();
        let prog: &mut SocketFilter = self
            .ebpf
            .program_mut(name)
            .ok_or_else(|| format!("the eBPF object has no program {name}"))?
            .try_into()
            .map_err(|e| format!("{name} is not a socket filter: {e}"))?;
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
            records_mode: self.mode == Mode::Records,
            records: 0, // counted by user space as it reads them
            passed: get(8),
            no_tstamp: get(9),
            bad_records: 0,
            merge_forced: 0,
            program_runs: 0,
            program_ns: 0,
        }
    }

    /// The program's run time and runs so far (ns, runs), as the kernel
    /// counts them while `kernel.bpf_stats_enabled` is 1: a read of
    /// /proc/self/fdinfo, so not on every poll.
    pub fn program_runtime(&self) -> Option<(u64, u64)> {
        program_stats(self.prog_fd)
    }

    /// Frames the program passed to the socket so far (records mode).
    pub fn passed(&self) -> u64 {
        self.counters().passed
    }

    /// The next record the kernel wrote (records mode), as it came.
    pub fn next_record(&mut self) -> Option<Vec<u8>> {
        let item = self.records.next()?;
        Some(item.to_vec())
    }
}

/// One record of the records mode (bpf/capture.c, `struct record`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// CLOCK_REALTIME ns: the frame's skb->tstamp.
    pub ts_ns: i64,
    /// The frame's length.
    pub wire_len: u32,
    /// Frames the program passed to the socket before this one.
    pub passed_before: u64,
    /// Segments: (u16 offset, u16 length, bytes) each, offset and length little-endian.
    pub segments: Vec<u8>,
}

/// Bytes before the segments in a record.
const REC_HDR: usize = 24;
/// The largest frame a record may describe (libpcap's largest snap length).
pub const MAX_FRAME: u32 = 262_144;

impl Record {
    /// Reads a record as the kernel wrote it; a one-line error when it is malformed.
    pub fn parse(item: &[u8]) -> Result<Record, String> {
        if item.len() < REC_HDR {
            return Err(format!("record of {} bytes, shorter than its {REC_HDR}-byte header", item.len()));
        }
        let u32_at = |i: usize| u32::from_ne_bytes([item[i], item[i + 1], item[i + 2], item[i + 3]]);
        let ts = u64::from_ne_bytes(item[0..8].try_into().unwrap_or([0; 8]));
        let wire_len = u32_at(8);
        let used = u32_at(12) as usize;
        let passed_before = u64::from_ne_bytes(item[16..24].try_into().unwrap_or([0; 8]));
        if used > item.len() - REC_HDR {
            return Err(format!("record declares {used} segment bytes, holds {}", item.len() - REC_HDR));
        }
        if wire_len == 0 || wire_len > MAX_FRAME {
            return Err(format!("record of a {wire_len}-byte frame"));
        }
        if ts == 0 || ts > i64::MAX as u64 {
            return Err(format!("record with timestamp {ts}"));
        }
        Ok(Record { ts_ns: ts as i64, wire_len, passed_before, segments: item[REC_HDR..REC_HDR + used].to_vec() })
    }

    /// The frame as the packet socket would have delivered it: `wire_len`
    /// bytes, the segments at their offsets, zeros elsewhere. Every segment
    /// must lie inside the frame.
    pub fn rebuild(&self, out: &mut Vec<u8>) -> Result<(), String> {
        out.clear();
        out.resize(self.wire_len as usize, 0);
        let s = &self.segments;
        let mut i = 0;
        while i < s.len() {
            if i + 4 > s.len() {
                return Err(format!("segment header cut at byte {i} of {}", s.len()));
            }
            let off = u16::from_le_bytes([s[i], s[i + 1]]) as usize;
            let len = u16::from_le_bytes([s[i + 2], s[i + 3]]) as usize;
            let data = s.get(i + 4..i + 4 + len).ok_or_else(|| format!("segment at frame offset {off} declares {len} bytes, the record ends first"))?;
            let dst = out
                .get_mut(off..off + len)
                .ok_or_else(|| format!("segment [{off}, {}) outside the {}-byte frame", off + len, self.wire_len))?;
            dst.copy_from_slice(data);
            i += 4 + len;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as bpf/capture.c writes it (native header, little-endian segment heads).
    fn item(ts: u64, wire_len: u32, passed_before: u64, segs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = vec![];
        for (off, b) in segs {
            body.extend_from_slice(&off.to_le_bytes());
            body.extend_from_slice(&(b.len() as u16).to_le_bytes());
            body.extend_from_slice(b);
        }
        let mut v = vec![];
        v.extend_from_slice(&ts.to_ne_bytes());
        v.extend_from_slice(&wire_len.to_ne_bytes());
        v.extend_from_slice(&(body.len() as u32).to_ne_bytes());
        v.extend_from_slice(&passed_before.to_ne_bytes());
        v.extend_from_slice(&body);
        v
    }

    #[test]
    fn record_rebuilds_a_frame_of_its_length_with_segments_at_their_offsets() {
        let hdr: Vec<u8> = (1..=42u8).collect();
        let sub = [0x16u8, 0x01, 0x30, 0x05];
        let it = item(1_700_000_000_123_456_789, 1514, 3, &[(0, &hdr), (100, &sub), (1510, &[9, 9, 9, 9])]);
        let r = Record::parse(&it).unwrap();
        assert_eq!((r.ts_ns, r.wire_len, r.passed_before), (1_700_000_000_123_456_789, 1514, 3));
        let mut out = vec![7u8; 3]; // reused buffers are cleared
        r.rebuild(&mut out).unwrap();
        assert_eq!(out.len(), 1514);
        assert_eq!(&out[..42], &hdr[..]);
        assert!(out[42..100].iter().all(|&b| b == 0));
        assert_eq!(&out[100..104], &sub);
        assert!(out[104..1510].iter().all(|&b| b == 0));
        assert_eq!(&out[1510..], &[9, 9, 9, 9]);
    }

    #[test]
    fn records_out_of_bounds_are_refused_with_one_line() {
        // A segment beyond the frame's end.
        let r = Record::parse(&item(5, 60, 0, &[(58, &[1, 2, 3, 4])])).unwrap();
        let e = r.rebuild(&mut vec![]).unwrap_err();
        assert_eq!(e, "segment [58, 62) outside the 60-byte frame");
        // Segment bytes declared beyond what the record holds.
        let mut it = item(5, 60, 0, &[(0, &[1, 2, 3, 4])]);
        it.truncate(it.len() - 2);
        it[12..16].copy_from_slice(&6u32.to_ne_bytes());
        let e = Record::parse(&it).unwrap().rebuild(&mut vec![]).unwrap_err();
        assert_eq!(e, "segment at frame offset 0 declares 4 bytes, the record ends first");
        // A header that says more than the item holds, a frame too large, no timestamp, too short.
        let mut it = item(5, 60, 0, &[]);
        it[12..16].copy_from_slice(&1u32.to_ne_bytes());
        assert_eq!(Record::parse(&it).unwrap_err(), "record declares 1 segment bytes, holds 0");
        assert_eq!(Record::parse(&item(5, MAX_FRAME + 1, 0, &[])).unwrap_err(), "record of a 262145-byte frame");
        assert_eq!(Record::parse(&item(0, 60, 0, &[])).unwrap_err(), "record with timestamp 0");
        assert!(Record::parse(&[0u8; 10]).unwrap_err().contains("shorter than"));
        // A cut segment head.
        let mut it = item(5, 60, 0, &[]);
        it.extend_from_slice(&[0, 0]);
        it[12..16].copy_from_slice(&2u32.to_ne_bytes());
        assert_eq!(Record::parse(&it).unwrap().rebuild(&mut vec![]).unwrap_err(), "segment header cut at byte 0 of 2");
    }

    #[test]
    fn verifier_refusals_fit_one_line() {
        let e = "the BPF_PROG_LOAD syscall failed. Verifier output: 0: R1=ctx() R10=fp0\n; int f(void) @ c.c:1\n1: (85) call x\ninvalid access to map value\nprocessed 3 insns\n";
        assert_eq!(one_line(e), "the BPF_PROG_LOAD syscall failed. … invalid access to map value");
    }
}
