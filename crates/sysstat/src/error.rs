//! What reading the host's state can fail with (both samplers share it).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    /// `error` is in the message; naming it `source` would make it the
    /// error's source too, and an error chain would print it twice.
    #[error("cannot read {path}: {error}")]
    Read { path: PathBuf, error: std::io::Error },
    #[error("{path}: unexpected format: {detail}")]
    Format { path: PathBuf, detail: String },
    #[error("scraping {url}: {detail}")]
    Scrape { url: String, detail: String },
}
