//! A progress bar for long file reads: appears only after a second, only on
//! a terminal, and never mixes with data written to stdout.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct Progress {
    pub counter: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Progress {
    /// Tracks `total` bytes of `label`.
    pub fn start(label: &str, total: u64) -> Progress {
        let counter = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let handle = if std::io::stderr().is_terminal() && std::env::var_os("DDSCOPE_NO_PROGRESS").is_none() {
            let (c, d, label) = (counter.clone(), done.clone(), label.to_string());
            Some(std::thread::spawn(move || {
                let start = Instant::now();
                let mut bar: Option<ProgressBar> = None;
                while !d.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    if bar.is_none() && start.elapsed() >= Duration::from_secs(1) {
                        let b = ProgressBar::new(total);
                        b.set_style(
                            ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
                                .expect("valid template")
                                .progress_chars("=> "),
                        );
                        b.set_message(label.clone());
                        bar = Some(b);
                    }
                    if let Some(b) = &bar {
                        b.set_position(c.load(Ordering::Relaxed));
                    }
                }
                if let Some(b) = bar {
                    b.finish_and_clear();
                }
            }))
        } else {
            None
        };
        Progress { counter, done, handle }
    }

    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}
