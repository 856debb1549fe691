//! The closing lines every file command prints on stderr: what was read,
//! what was skipped or malformed, and the first problems with frame numbers.

use ddscope_core::source::CaptureSummary;
use ddscope_core::decode::Decoder;
use std::path::Path;

const SHOWN_DIAGNOSTICS: usize = 5;

pub fn print_summary(verb: &str, path: &Path, summary: &CaptureSummary, dec: &Decoder, result: &str) {
    let s = &dec.stats;
    eprintln!(
        "{verb}: {}: {} frames, {} RTPS messages, {} submessages{}; {result}",
        path.display(),
        summary.frames,
        s.rtps_messages,
        s.submessages,
        zenoh_counts(&s.zenoh)
    );
    if let Some(err) = &summary.error {
        eprintln!("{verb}: {}: {err} (everything before it was analysed)", path.display());
    }
    if let Some(l) = summary.skipped_line() {
        eprintln!("{verb}: {}: {l}", path.display());
    }
    if let Some(d) = summary.kernel_drops.filter(|d| *d > 0) {
        eprintln!("{verb}: {}: the capture reports {d} packets dropped by the kernel", path.display());
    }
    eprintln!("{verb}: {}: {}", path.display(), s.summary_line());
    for d in dec.diagnostics.iter().take(SHOWN_DIAGNOSTICS) {
        eprintln!("{verb}: {}: frame {}: {}", path.display(), d.frame, ddscope_core::names::for_terminal(&d.message));
    }
    let more = (s.truncated_submessages + s.malformed_submessages + s.bad_headers + s.bad_discovery_samples + s.unknown_submessages)
        .saturating_sub(SHOWN_DIAGNOSTICS as u64);
    if dec.diagnostics.len() > SHOWN_DIAGNOSTICS && more > 0 {
        eprintln!("{verb}: {}: … and {more} more problems", path.display());
    }
}

/// ", N Zenoh batches (M messages, K ROS 2 samples)" when the capture had Zenoh.
pub fn zenoh_counts(z: &ddscope_core::zenoh::ZenohStats) -> String {
    if z.batches == 0 {
        return String::new();
    }
    let msgs: u64 = z.messages.values().sum();
    format!(", {} Zenoh batches ({msgs} messages, {} ROS 2 samples)", z.batches, z.ros_samples)
}
