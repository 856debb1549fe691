//! Online export of ddscope's events and metrics (issue 6, the agent's
//! sinks): Prometheus exposition, system metrics under node_exporter's
//! names, InfluxDB 1.x line protocol over HTTP, and OTLP/HTTP (protobuf)
//! traces and metrics. Every sink is independent and tested against the
//! real server; see `docs/export.md`.
//!
//! ```no_run
//! use ddscope_export::{Exporters, ExportOptions, ExportSpec};
//! let specs: Vec<ExportSpec> = ["prometheus=127.0.0.1:9464", "influx=http://127.0.0.1:8086/ddscope"]
//!     .iter().map(|s| s.parse().unwrap()).collect();
//! let ex = Exporters::start("pc1", &specs, ExportOptions::default()).unwrap();
//! // for each decoded event / closed sample / latency row:
//! //     ex.on_event(&e); ex.on_sample(&r); ex.on_latency(&row);
//! let report = ex.shutdown(std::time::Duration::from_secs(5));
//! # let _ = report;
//! ```

pub mod budget;
pub mod delivery;
mod exporters;
pub mod health;
pub mod ids;
pub mod influx;
pub mod otlp;
pub mod prometheus;
mod push;
pub mod traces;

pub use budget::{Budget, Budgets};
pub use delivery::{DeliveryConfig, SinkStats, SinkStatsSnapshot};
pub use exporters::{ExportError, ExportOptions, ExportSpec, Exporters, SinkKind, PUSH_SINKS};
pub use health::CaptureHealth;
pub use push::PushSink;
