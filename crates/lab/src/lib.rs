//! Emulated multi-host lab: network namespaces joined by veth, real DDS
//! workload nodes (lab/), iperf3 interference, tcpdump capture on every host
//! and application ground truth. See docs/lab.md.
pub mod addr;
pub mod clockwarp;
pub mod lttng;
pub mod net;
pub mod pcapng;
pub mod procs;
pub mod report;
pub mod ros2;
pub mod run;
pub mod scenario;
pub mod sweep;
pub mod tcbpf;
pub mod tracecheck;
pub mod truth;
pub mod workload;
