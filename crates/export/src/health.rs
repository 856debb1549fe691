//! Capture health as the agent knows it: what the kernel dropped, what the
//! decoder skipped, what was evicted to stay within memory caps. All values
//! are counters since the capture started; the agent passes a fresh
//! snapshot whenever it likes (e.g. once a second).

use ddscope_core::decode::DecodeStats;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaptureHealth {
    /// Capture-point name (the `capture` label).
    pub capture: String,
    /// Packets the capture delivered (libpcap `ps_recv`).
    pub packets_received: u64,
    /// Packets dropped because the capture buffer was full (`ps_drop`).
    pub kernel_dropped: u64,
    /// Packets dropped by the interface or driver (`ps_ifdrop`).
    pub interface_dropped: u64,
    /// Bytes captured.
    pub bytes: u64,
    /// Frames, datagrams or submessages the decoder skipped, by reason.
    pub decode_skipped: BTreeMap<String, u64>,
    /// State dropped to stay within a memory cap, by what.
    pub evicted: BTreeMap<String, u64>,
    /// The live ros2_tracing session followed by the agent (`--trace-live`), by what
    /// (`events`, `items`, `dropped_queue_full`, `late`, `reconnects`, `discarded_events`); empty without one.
    pub trace: BTreeMap<String, u64>,
}

impl CaptureHealth {
    pub fn new(capture: impl Into<String>) -> Self {
        CaptureHealth { capture: capture.into(), ..Default::default() }
    }

    /// Fills `decode_skipped` and `evicted` from the decoder's counters
    /// (reasons named like the fields of [`DecodeStats`]).
    pub fn with_decode_stats(mut self, s: &DecodeStats) -> Self {
        let mut skip = |k: &str, v: u64| {
            self.decode_skipped.insert(k.to_string(), v);
        };
        skip("unsupported_link_frames", s.unsupported_link_frames);
        skip("bad_headers", s.bad_headers);
        skip("non_ip_frames", s.non_ip_frames);
        skip("non_udp_packets", s.non_udp_packets);
        skip("non_rtps_datagrams", s.non_rtps_datagrams);
        skip("rtps_other_version", s.rtps_other_version);
        skip("snapped_datagrams", s.snapped_datagrams);
        skip("truncated_submessages", s.truncated_submessages);
        skip("malformed_submessages", s.malformed_submessages);
        skip("vendor_submessages", s.vendor_submessages.values().sum());
        skip("unknown_submessages", s.unknown_submessages);
        skip("bad_discovery_samples", s.bad_discovery_samples);
        skip("discovery_fragments_dropped", s.discovery_fragments_dropped);
        skip("ip_datagrams_timed_out", s.ip.datagrams_timed_out);
        skip("ip_oversized_fragments", s.ip.oversized_fragments);
        self.evicted.insert("ip_datagrams".into(), s.ip.datagrams_evicted);
        self.evicted.insert("ip_datagrams_too_fragmented".into(), s.ip.datagrams_too_fragmented);
        self.evicted.insert("discovery_participants".into(), s.discovery.participants_evicted);
        self.evicted.insert("discovery_endpoints".into(), s.discovery.endpoints_evicted);
        // Not evicted but cut: names over discovery.max_name_bytes, kept with a marker.
        self.evicted.insert("discovery_names_truncated".into(), s.discovery.names_truncated);
        self
    }

    /// Adds the sample tracker's evictions (open samples, fragment-bitmap memory, destinations).
    pub fn with_sample_stats(mut self, s: &ddscope_core::samples::SampleStats) -> Self {
        self.evicted.insert("samples".into(), s.evicted);
        self.evicted.insert("samples_for_fragment_memory".into(), s.evicted_for_memory);
        self.evicted.insert("sample_destinations".into(), s.untracked_destinations);
        self.evicted.insert("repeat_window".into(), s.repeat_window_full);
        self
    }
}
