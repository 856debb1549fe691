//! The capture side: a live interface ([`capture`], with the in-kernel
//! filter of [`kfilter`]), the live per-topic view ([`view`], a pipeline
//! stage through [`stages`]), the agent loop ([`run`]) and what it sends to
//! `serve` ([`upstream`]), the host's live trace session ([`trace`]) and the
//! privileges the capture gives up ([`privileges`]). `ddscope live` uses the
//! capture, the view and the privileges; `ddscope agent` all of it.

pub mod capture;
pub mod clocksync;
pub mod kfilter;
pub mod privileges;
pub mod replay;
pub mod stages;
pub mod trace;
pub mod upstream;
pub mod view;
mod run;

pub use run::{run, AgentCapture, AgentConfig, AgentReport, MAX_SENT_TOPIC_ROWS};
