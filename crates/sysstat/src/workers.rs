//! Worker threads whose end by a panic is noticed. A thread started with
//! [`spawn`] that panics is recorded (its name and the panic's message);
//! [`stopped`] lists those, so that the process running them (the agent)
//! can report it and stop instead of running on without that part.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread::JoinHandle;

/// Names a worker thread that panics as soon as it starts (fault injection,
/// for the tests of what the agent does then).
pub const PANIC_ENV: &str = "DDSCOPE_TEST_PANIC_THREAD";

/// A worker thread that ended by a panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub thread: String,
    pub why: String,
}

/// At most this many are kept (a thread ends once; the rest are counted in `more`).
const MAX_KEPT: usize = 32;

static ANY: AtomicBool = AtomicBool::new(false);
static STOPPED: Mutex<(Vec<Stopped>, u64)> = Mutex::new((Vec::new(), 0));

/// Starts a named worker thread; a panic in `f` is recorded for [`stopped`]
/// (the default panic hook has printed it already).
pub fn spawn<F: FnOnce() + Send + 'static>(name: &str, f: F) -> std::io::Result<JoinHandle<()>> {
    let name = name.to_string();
    std::thread::Builder::new().name(name.clone()).spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if std::env::var(PANIC_ENV).is_ok_and(|v| v == name) {
                panic!("{PANIC_ENV}={name}: fault injected");
            }
            f()
        }));
        if let Err(p) = r {
            let why = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            let mut s = STOPPED.lock().unwrap_or_else(|e| e.into_inner());
            if s.0.len() < MAX_KEPT {
                s.0.push(Stopped { thread: name, why });
            } else {
                s.1 += 1;
            }
            ANY.store(true, Ordering::Release);
        }
    })
}

/// Whether any worker thread has ended by a panic (cheap: one atomic load).
pub fn any_stopped() -> bool {
    ANY.load(Ordering::Acquire)
}

/// The worker threads that ended by a panic, in that order, and how many
/// more did beyond those kept.
pub fn stopped() -> (Vec<Stopped>, u64) {
    if !any_stopped() {
        return (vec![], 0);
    }
    STOPPED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_worker_is_recorded_with_its_message_and_a_clean_one_is_not() {
        spawn("worker-ok", || {}).unwrap().join().unwrap();
        assert!(stopped().0.iter().all(|s| s.thread != "worker-ok"));
        let h = spawn("worker-bad", || panic!("queue state {} broken", 7)).unwrap();
        // The panic is caught inside the thread: join succeeds.
        h.join().unwrap();
        assert!(any_stopped());
        let (s, _) = stopped();
        assert!(s.contains(&Stopped { thread: "worker-bad".into(), why: "queue state 7 broken".into() }), "{s:?}");
        spawn("worker-str", || panic!("plain")).unwrap().join().unwrap();
        assert!(stopped().0.contains(&Stopped { thread: "worker-str".into(), why: "plain".into() }));
    }
}
