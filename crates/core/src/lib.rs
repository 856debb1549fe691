//! ddscope's engine: capture reading, decoding (IP reassembly, RTPS,
//! discovery), the event schema, analyses and sinks.

pub mod bounded;
pub mod source;
pub mod decode;
pub mod discovery;
pub mod events;
pub mod ipfrag;
pub mod record;
pub mod ros;
pub mod ros_graph;
pub mod output;
pub mod samples;
pub mod rate;
pub mod topics;
pub mod pipeline;
pub mod latency;
pub mod ros2;
pub mod session;
pub mod sink;
pub mod limits;
pub mod names;
pub mod flows;
pub mod zenoh;
pub mod window;
pub mod timeline;
