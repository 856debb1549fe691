//! Online monitoring, in three rooms: the capture side (`agent`: live
//! capture, the `live` view, the agent loop and its link to `serve`), the
//! server side (`server`: `serve`, its correlator state, HTTP and gRPC, the
//! federation front, the dashboard) and the stream between them (`stream`:
//! batches, the OTLP codec), which both sides use. Neither side imports the
//! other.

pub mod agent;
pub mod server;
pub mod stream;
