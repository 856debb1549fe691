//! `ddscope agent --read FILE`: a capture file replayed as if it were being captured now — frames
//! handed over when their time comes (at `--speed`), their own time stamps kept — so that a
//! recorded run (a lab run, a field capture, a host whose clock was off) reaches `serve` and its
//! dashboard as live agents would send it.

use super::capture::CaptureCounters;
use super::run::AgentCapture;
use ddscope_core::source::{CaptureError, CaptureReader, Packet, PacketSource, Poll};
use std::path::Path;
use std::time::{Duration, Instant};

/// How fast a file is replayed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    /// `speed` times real time (1.0: as it was captured).
    Times(f64),
    /// As fast as the agent reads.
    Max,
}

/// A frame read ahead of its time.
struct Held {
    frame: u64,
    ts_ns: i64,
    interface: u32,
    link: ddscope_wire::link::LinkType,
    data: Vec<u8>,
    orig_len: u32,
}

pub struct FileReplay {
    reader: CaptureReader,
    speed: Speed,
    /// The wall-clock instant of the first frame, and its capture time.
    start: Option<(Instant, i64)>,
    held: Option<Held>,
    ended: bool,
    frames: u64,
    note: String,
    notes: Vec<String>,
}

/// Frames handed over per poll at most.
const BATCH: usize = 256;

impl FileReplay {
    pub fn open(path: &Path, speed: Speed) -> Result<FileReplay, CaptureError> {
        let reader = CaptureReader::open(path, None)?;
        let note = match speed {
            Speed::Max => format!("the frames of {} as fast as they are read, with their own time stamps", path.display()),
            Speed::Times(s) => format!("the frames of {} at {s}x their pace, with their own time stamps", path.display()),
        };
        Ok(FileReplay { reader, speed, start: None, held: None, ended: false, frames: 0, note, notes: vec![] })
    }

    /// When a frame captured at `ts` is due.
    fn due(&self, ts: i64) -> Option<Instant> {
        let (t0, ts0) = self.start?;
        match self.speed {
            Speed::Max => None,
            Speed::Times(s) => Some(t0 + Duration::from_nanos(((ts.saturating_sub(ts0)).max(0) as f64 / s) as u64)),
        }
    }
}

impl PacketSource for FileReplay {
    fn poll(&mut self, on_packet: &mut dyn FnMut(&Packet<'_>)) -> anyhow::Result<Poll> {
        if self.ended && self.held.is_none() {
            return Ok(Poll::Ended);
        }
        let mut n = 0;
        while n < BATCH {
            let h = match self.held.take() {
                Some(h) => h,
                None => {
                    let mut got: Option<Held> = None;
                    let more = self.reader.read(1, &mut |p| {
                        got = Some(Held { frame: p.frame, ts_ns: p.ts_ns, interface: p.interface, link: p.link, data: p.data.to_vec(), orig_len: p.orig_len });
                    });
                    match got {
                        Some(h) => h,
                        None if more => continue,
                        None => {
                            self.ended = true;
                            if let Some(e) = self.reader.summary().error.clone() {
                                self.notes.push(format!("reading stopped: {e} (the frames before it were replayed)"));
                            }
                            break;
                        }
                    }
                }
            };
            if self.start.is_none() {
                self.start = Some((Instant::now(), h.ts_ns));
            }
            if let Some(due) = self.due(h.ts_ns) {
                let now = Instant::now();
                if due > now {
                    self.held = Some(h);
                    if n == 0 {
                        std::thread::sleep((due - now).min(Duration::from_millis(5)));
                    }
                    return Ok(Poll::Frames(n));
                }
            }
            on_packet(&Packet { frame: h.frame, ts_ns: h.ts_ns, interface: h.interface, link: h.link, data: &h.data, orig_len: h.orig_len });
            self.frames += 1;
            n += 1;
        }
        Ok(if n == 0 && self.ended { Poll::Ended } else { Poll::Frames(n) })
    }

    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }
}

impl AgentCapture for FileReplay {
    fn counters(&mut self) -> CaptureCounters {
        CaptureCounters { received: self.frames, ..Default::default() }
    }
    fn timestamp_note(&self) -> String {
        self.note.clone()
    }
}
