//! What a capture point hands the correlator: sample records, DATA_FRAG
//! sightings and how far it has read (watermarks, the end).

use crate::discovery::TopicNames;
use crate::events::{SubmsgEvent, TrafficType};
use crate::samples::SampleRecord;
use ddscope_wire::rtps::SubmsgKind;
use ddscope_wire::Guid;
use std::sync::Arc;

/// One DATA_FRAG submessage at one capture point.
#[derive(Debug, Clone)]
pub struct FragSighting {
    pub writer: Guid,
    pub sn: i64,
    pub fragment_starting_num: u32,
    pub first_ip_ts_ns: i64,
    pub last_ts_ns: i64,
    pub topic: Option<Arc<TopicNames>>,
}

impl FragSighting {
    pub fn of(e: &SubmsgEvent) -> Option<FragSighting> {
        if e.kind != SubmsgKind::DataFrag || e.traffic_type != TrafficType::User {
            return None;
        }
        Some(FragSighting {
            writer: e.writer_id?,
            sn: e.sn?,
            fragment_starting_num: e.fragment_starting_num?,
            first_ip_ts_ns: e.ip_first_ts_ns,
            last_ts_ns: e.ts_ns,
            topic: e.topic.clone(),
        })
    }
}

/// What a capture point contributes to the correlation.
#[derive(Debug, Clone)]
pub enum Item {
    Sample(SampleRecord),
    Frag(FragSighting),
    /// A self-identifying submessage (its own clock): the clock tracker's evidence.
    Exchange(super::clock::Exchange),
    /// The capture has seen everything up to this time (its own clock).
    Watermark(i64),
    /// The capture has ended.
    End,
}

impl crate::pipeline::Marked for Item {
    fn mark(&self) -> crate::pipeline::Mark {
        match self {
            Item::Watermark(t) => crate::pipeline::Mark::Watermark(*t),
            Item::End => crate::pipeline::Mark::End,
            _ => crate::pipeline::Mark::None,
        }
    }
}
