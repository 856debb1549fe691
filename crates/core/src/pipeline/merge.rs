//! Several inputs, one merge: every input (a capture file, a trace) is read
//! on its own thread and handed over in batches; the merge always takes the
//! next batch from the input that is furthest behind (lowest watermark), so
//! no input runs ahead of the others by more than a batch and memory stays
//! bounded however long the inputs are. `latency`/`report` (captures and
//! traces into the correlator) and `flows` (captures into the flow matcher)
//! run on it; [`Batcher`] is the one place items are batched with watermarks.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

/// Items per batch handed from an input's thread to the merge.
pub const BATCH: usize = 2048;

/// Batches in flight per input (the channel's bound).
const IN_FLIGHT: usize = 8;

/// What the merged inputs feed: the correlator, the flow matcher.
pub trait Merger<B, O> {
    /// Input `i`'s next batch: each input's batches in its own order, the
    /// inputs interleaved by watermark.
    fn batch(&mut self, i: usize, batch: B);
    /// Input `i`'s outcome, or None when its thread stopped without one.
    fn done(&mut self, i: usize, outcome: Option<O>);
}

/// What an item tells the merge about its input's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// An ordinary item.
    None,
    /// The input has delivered everything up to this time (its own clock).
    Watermark(i64),
    /// The input has ended: nothing more follows but its outcome.
    End,
}

/// An item that can carry its input's progress.
pub trait Marked {
    fn mark(&self) -> Mark;
}

/// How far a batch takes its input: its highest watermark, and whether it
/// ends the input.
pub trait Progress {
    fn progress(&self) -> (Option<i64>, bool);
}

impl<T: Marked> Progress for Vec<T> {
    fn progress(&self) -> (Option<i64>, bool) {
        let mut wm = None;
        let mut ended = false;
        for it in self {
            match it.mark() {
                Mark::Watermark(t) => wm = Some(wm.map_or(t, |w: i64| w.max(t))),
                Mark::End => ended = true,
                Mark::None => {}
            }
        }
        (wm, ended)
    }
}

enum Msg<B, O> {
    Batch(B),
    Done(O),
}

struct Input<T, O> {
    rx: Receiver<Msg<T, O>>,
    handle: Option<JoinHandle<()>>,
    /// Subtracted from the input's watermarks before they are compared
    /// (the input's clock offset), so inputs are merged on one clock.
    lag_ns: i64,
}

/// The merge of several inputs, each read by its own thread.
pub struct Merge<T, O> {
    inputs: Vec<Input<T, O>>,
}

impl<T, O> Default for Merge<T, O> {
    fn default() -> Self {
        Merge { inputs: vec![] }
    }
}

impl<T: Progress + Send + 'static, O: Send + 'static> Merge<T, O> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts an input on a thread of its own: `read` reads it to its end,
    /// handing batches (e.g. a `Vec` of [`Marked`] items) to the sender it is given (which returns false once
    /// the merge no longer listens: `read` should then stop), and returns
    /// the input's outcome. Inputs are numbered in the order they are added.
    pub fn spawn(&mut self, lag_ns: i64, read: impl FnOnce(&mut dyn FnMut(T) -> bool) -> O + Send + 'static) {
        let (tx, rx) = sync_channel::<Msg<T, O>>(IN_FLIGHT);
        let handle = std::thread::spawn(move || {
            let send = |tx: &SyncSender<Msg<T, O>>, m| tx.send(m).is_ok();
            let outcome = read(&mut |batch| send(&tx, Msg::Batch(batch)));
            let _ = tx.send(Msg::Done(outcome));
        });
        self.inputs.push(Input { rx, handle: Some(handle), lag_ns });
    }

    /// Runs the merge to the end of every input into `into`.
    pub fn run(mut self, into: &mut dyn Merger<T, O>) {
        let m = self.inputs.len();
        let mut wm = vec![i64::MIN; m];
        let mut ended = vec![false; m];
        let mut finished = vec![false; m];
        // The input furthest behind goes next (ended inputs last: only their outcome is left).
        while let Some(c) = (0..m).filter(|&c| !finished[c]).min_by_key(|&c| (ended[c], wm[c].saturating_sub(self.inputs[c].lag_ns))) {
            match self.inputs[c].rx.recv() {
                Ok(Msg::Batch(b)) => {
                    let (w, end) = b.progress();
                    if let Some(t) = w {
                        wm[c] = wm[c].max(t);
                    }
                    ended[c] |= end;
                    into.batch(c, b);
                }
                Ok(Msg::Done(o)) => {
                    finished[c] = true;
                    into.done(c, Some(o));
                }
                Err(_) => {
                    finished[c] = true;
                    into.done(c, None);
                }
            }
        }
        for i in &mut self.inputs {
            if let Some(h) = i.handle.take() {
                let _ = h.join();
            }
        }
    }
}

/// Collects items into batches of a fixed size and hands each full batch to
/// `deliver`; watermarks go in at most once per interval of their clock.
pub struct Batcher<T, F: FnMut(Vec<T>)> {
    batch: Vec<T>,
    size: usize,
    last_watermark: i64,
    deliver: F,
}

impl<T, F: FnMut(Vec<T>)> Batcher<T, F> {
    pub fn new(size: usize, deliver: F) -> Self {
        let size = size.max(1);
        Batcher { batch: Vec::with_capacity(size), size, last_watermark: i64::MIN, deliver }
    }

    /// Adds an item; a full batch is delivered at once.
    pub fn push(&mut self, item: T) {
        self.batch.push(item);
        if self.batch.len() >= self.size {
            self.flush();
        }
    }

    /// True (and the interval restarts) when a watermark at `t` is due: at
    /// least `every` after the last one. The caller then pushes its watermark item.
    pub fn watermark_due(&mut self, t: i64, every: i64) -> bool {
        if t.saturating_sub(self.last_watermark) >= every {
            self.last_watermark = t;
            true
        } else {
            false
        }
    }

    /// Hands over what is collected, even if the batch is not full.
    pub fn flush(&mut self) {
        if !self.batch.is_empty() {
            let b = std::mem::replace(&mut self.batch, Vec::with_capacity(self.size));
            (self.deliver)(b);
        }
    }

    /// Items collected and not yet delivered.
    pub fn pending(&self) -> usize {
        self.batch.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum It {
        V(u32),
        W(i64),
        End,
    }

    impl Marked for It {
        fn mark(&self) -> Mark {
            match self {
                It::V(_) => Mark::None,
                It::W(t) => Mark::Watermark(*t),
                It::End => Mark::End,
            }
        }
    }

    #[derive(Default)]
    struct Record {
        items: Vec<(usize, It)>,
        done: Vec<(usize, Option<usize>)>,
    }

    impl Merger<Vec<It>, usize> for Record {
        fn batch(&mut self, i: usize, batch: Vec<It>) {
            self.items.extend(batch.into_iter().map(|it| (i, it)));
        }
        fn done(&mut self, i: usize, outcome: Option<usize>) {
            self.done.push((i, outcome));
        }
    }

    fn input(times: Vec<i64>) -> impl FnOnce(&mut dyn FnMut(Vec<It>) -> bool) -> usize + Send + 'static {
        move |send| {
            let n = times.len();
            for t in times {
                if !send(vec![It::V(t as u32), It::W(t)]) {
                    return 0;
                }
            }
            send(vec![It::End]);
            n
        }
    }

    #[test]
    fn the_input_furthest_behind_goes_next() {
        let mut m = Merge::new();
        m.spawn(0, input(vec![10, 20, 30, 40]));
        m.spawn(0, input(vec![15, 25, 35]));
        // the third input's clock runs 100 ahead: its 112 is 12 on the others' clock
        m.spawn(100, input(vec![112, 122]));
        let mut r = Record::default();
        m.run(&mut r);
        let seen: Vec<(usize, i64)> = r.items.iter().filter_map(|(c, it)| match it {
            It::V(v) => Some((*c, *v as i64 - if *c == 2 { 100 } else { 0 })),
            _ => None,
        }).collect();
        let mut outcomes = vec![None; 3];
        for (c, o) in r.done {
            outcomes[c] = o;
        }
        // each batch is taken from the input with the lowest watermark so far (on one clock); an
        // input that has not delivered yet counts as furthest behind
        let times: Vec<i64> = seen.iter().map(|s| s.1).collect();
        assert_eq!(times, vec![10, 15, 12, 20, 22, 25, 30, 35, 40]);
        assert_eq!(outcomes, vec![Some(4), Some(3), Some(2)]);
    }

    #[test]
    fn a_stopped_thread_is_reported_without_outcome() {
        let mut m: Merge<Vec<It>, usize> = Merge::new();
        m.spawn(0, input(vec![1, 2]));
        m.spawn(0, |_send| panic!("reader failed"));
        let mut r = Record::default();
        m.run(&mut r);
        let mut outcomes = r.done;
        outcomes.sort();
        assert_eq!(outcomes, vec![(0, Some(2)), (1, None)]);
    }

    #[test]
    fn batches_are_full_or_flushed_and_watermarks_spaced() {
        let mut got = vec![];
        let mut b = Batcher::new(3, |v: Vec<u32>| got.push(v));
        let mut marks = 0;
        for i in 0..7u32 {
            b.push(i);
            if b.watermark_due(i as i64 * 4, 10) {
                marks += 1;
            }
        }
        assert_eq!(b.pending(), 1);
        b.flush();
        drop(b);
        assert_eq!(got, vec![vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
        // times 0, 4, 8, 12, 16, 20, 24: due at 0, 12, 24
        assert_eq!(marks, 3);
    }
}
