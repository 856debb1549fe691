//! Reader fairness: which reader got a sample when (Kouril et al.'s 1-N and N-1
//! topologies). A flow (topic, sender capture, receiver capture) splits into
//! its readers as far as the inputs tell them apart:
//!
//! - **on the wire**, by the UDP destination of the copy that reached the
//!   receiver capture: with unicast delivery every reader participant has a
//!   locator of its own (IP and port), so each is a row; with multicast all
//!   readers of the group share one datagram and one row (the wire cannot
//!   tell them apart). The latency is the copy's arrival at the receiver
//!   capture minus the sample's first sighting at the sender. Copies of
//!   fragmented samples are not split per destination (their first
//!   destination only). The DATA's readerId is not used: on multicast and in
//!   most unicast traffic it is ENTITYID_UNKNOWN.
//! - **from the ground truth** (lab runs), by reader node: its receive time
//!   minus the publish time (the application latency per reader), every
//!   reader named exactly.
//!
//! Rows are capped ([`MAX_READERS`], least recently updated evicted and
//! counted), and so are the destinations remembered per pending sample.

use super::stats::{Dist, DistSummary};
use crate::bounded::BoundedMap;
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::Arc;

/// Reader rows kept at most.
pub const MAX_READERS: usize = 4096;
/// Destinations remembered per pending sample and capture point.
pub const MAX_COPIES_PER_SAMPLE: usize = 128;

/// How a reader is identified.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReaderId {
    /// The UDP destination of the copies it received (wire).
    Locator(SocketAddr),
    /// The reader node that recorded the receive (ground truth).
    Node(Arc<str>),
}

impl std::fmt::Display for ReaderId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReaderId::Locator(a) => write!(f, "{a}"),
            ReaderId::Node(n) => write!(f, "node {n}"),
        }
    }
}

/// (topic key, sender capture, receiver capture, reader)
pub type ReaderKey = (String, usize, usize, ReaderId);

#[derive(Default, Clone)]
pub struct ReaderStats {
    /// Samples of the flow judged while this reader was known.
    pub latency: Dist,
    /// Earliest and latest first-arrival offsets of this reader relative to the
    /// flow's first reader of the same sample (ns): how far behind it was.
    pub behind_first: Dist,
}

/// The per-reader table of a correlator.
pub struct ReaderTable {
    pub rows: BoundedMap<ReaderKey, ReaderStats>,
    /// Copies of a sample beyond [`MAX_COPIES_PER_SAMPLE`] (not split per reader).
    pub copies_dropped: u64,
    /// Copies seen after their sample was judged (not matched).
    pub copies_late: u64,
}

impl Default for ReaderTable {
    fn default() -> Self {
        ReaderTable { rows: BoundedMap::new(MAX_READERS), copies_dropped: 0, copies_late: 0 }
    }
}

/// One row of the table, for output.
#[derive(Debug, Clone, Serialize)]
pub struct ReaderRow {
    pub topic: String,
    pub sender: String,
    pub receiver: String,
    /// "wire" (destination locator) or "truth" (ground-truth reader node).
    pub source: &'static str,
    pub reader: String,
    pub samples: u64,
    pub latency: DistSummary,
    /// How long after the first reader of the same sample (on the same source) this one got it.
    pub behind_first: DistSummary,
}

impl ReaderTable {
    /// Records one sample's arrivals per reader: `(reader, latency_ns)`; all of one flow and source.
    pub fn record(&mut self, topic: &str, sender: usize, receiver: usize, arrivals: &[(ReaderId, i64)]) {
        let Some(first) = arrivals.iter().map(|a| a.1).min() else { return };
        for (id, lat) in arrivals {
            let row = self.rows.get_or_insert_with((topic.to_string(), sender, receiver, id.clone()), ReaderStats::default, &mut |_, _| {});
            row.latency.record(*lat);
            row.behind_first.record(lat - first);
        }
    }

    pub fn evicted(&self) -> u64 {
        self.rows.evicted()
    }

    /// Rows sorted by topic, sender, receiver, source and reader.
    pub fn rows(&self, names: &[Arc<str>]) -> Vec<ReaderRow> {
        let mut v: Vec<(&ReaderKey, &ReaderStats)> = self.rows.iter().collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v.into_iter()
            .map(|((topic, s, r, id), st)| ReaderRow {
                topic: topic.clone(),
                sender: names.get(*s).map(|n| n.to_string()).unwrap_or_default(),
                receiver: names.get(*r).map(|n| n.to_string()).unwrap_or_default(),
                source: match id {
                    ReaderId::Locator(_) => "wire",
                    ReaderId::Node(_) => "truth",
                },
                reader: match id {
                    ReaderId::Locator(a) => a.to_string(),
                    ReaderId::Node(n) => n.to_string(),
                },
                samples: st.latency.count(),
                latency: st.latency.summary(),
                behind_first: st.behind_first.summary(),
            })
            .collect()
    }

    /// What the table had to give up, if anything.
    pub fn problem_line(&self) -> Option<String> {
        let mut parts = vec![];
        if self.evicted() > 0 {
            parts.push(format!("{} reader rows evicted (more than {MAX_READERS}; least recently updated first)", self.evicted()));
        }
        if self.copies_dropped > 0 {
            parts.push(format!("{} sample copies beyond {MAX_COPIES_PER_SAMPLE} destinations not split per reader", self.copies_dropped));
        }
        if self.copies_late > 0 {
            parts.push(format!("{} sample copies seen after their sample was judged (not split per reader)", self.copies_late));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_per_reader_with_offsets_to_the_first() {
        let mut t = ReaderTable::default();
        let a: SocketAddr = "10.0.0.2:7411".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:7413".parse().unwrap();
        t.record("/t", 0, 1, &[(ReaderId::Locator(a), 100_000), (ReaderId::Locator(b), 300_000)]);
        t.record("/t", 0, 1, &[(ReaderId::Locator(a), 200_000), (ReaderId::Locator(b), 200_000)]);
        let names: Vec<Arc<str>> = vec![Arc::from("pc1"), Arc::from("pc2")];
        let rows = t.rows(&names);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].reader.as_str(), rows[0].samples, rows[0].source), ("10.0.0.2:7411", 2, "wire"));
        assert!((rows[0].latency.mean_ms - 0.15).abs() < 1e-9);
        assert_eq!(rows[0].behind_first.max_ms, 0.0);
        assert!((rows[1].behind_first.max_ms - 0.2).abs() < 1e-9, "{:?}", rows[1].behind_first);
        assert!(t.problem_line().is_none());
    }
}
