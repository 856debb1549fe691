//! Errors: one line each, naming the trace (path or live URL) they are about.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{}: no such trace directory", path.display())]
    NotFound { path: PathBuf },

    #[error("{}: no LTTng trace here (no CTF `metadata` file in this directory or below it)", path.display())]
    NoTrace { path: PathBuf },

    #[error("{}: kernel-only LTTng trace; ros2_tracing events are userspace events and there is no ust/ trace here", path.display())]
    KernelOnly { path: PathBuf },

    /// A directory holding several recording sessions (`~/.ros/tracing`): babeltrace2 reads one
    /// trace (one UUID) at a time.
    #[error("{}: holds {} trace sessions ({}): give one of them, e.g. {}", path.display(), sessions.len(), sessions.join(", "), path.join(&sessions[0]).display())]
    Sessions { path: PathBuf, sessions: Vec<String> },

    #[error("{origin}: not a ros2_tracing trace: {detail}")]
    Foreign { origin: String, detail: String },

    /// babeltrace2 could not read the trace (truncated or corrupted stream,
    /// bad metadata, unreachable relay daemon, ...); `message` is its root cause.
    #[error("{origin}: {message}")]
    Read { origin: String, message: String },

    #[error("babeltrace2 plugin `{plugin}` not found (Debian package babeltrace2 installs it)")]
    PluginMissing { plugin: String },

    #[error("{origin}: {message}")]
    Setup { origin: String, message: String },
}
