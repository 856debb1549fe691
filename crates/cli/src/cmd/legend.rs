//! What the columns and layers of `ddscope latency`'s tables mean, printed under
//! them for the reader (the table format only; docs/latency.md says the same).

use std::io::{self, Write};

/// The layers, from where to where (docs/latency.md, "Layers").
const LAYERS: &[(&str, &str)] = &[
    ("application", "publish -> receive, from the ground truth"),
    ("sender_stack", "publish -> first DATA/DATA_FRAG of the sample on the wire at the sender (ground truth)"),
    ("source_ts_to_wire", "the sample's source timestamp (INFO_TS) -> first on the wire at the sender (one clock, no trace needed)"),
    ("message", "DDS message latency: first on the wire at the sender -> sample complete at the receiver (thesis 3.2.5)"),
    ("first_first", "first fragment to first fragment: first on the wire at the sender -> first at the receiver"),
    ("last_last", "last fragment to last fragment: complete at the sender -> complete at the receiver"),
    ("submessage", "per DATA_FRAG: its first IP fragment at the sender -> its last IP fragment at the receiver"),
    ("receiver_stack", "complete on the wire at the receiver -> receive (ground truth)"),
    ("ros_publish", "rclcpp_publish -> rmw_publish (sender trace)"),
    ("dds_send", "rmw_publish -> first on the wire at the sender"),
    ("dds_receive", "complete on the wire at the receiver -> rmw_take (receiver trace)"),
    ("dds_local", "rmw_publish -> rmw_take on one host (no wire)"),
    ("executor", "rmw_take -> callback_start"),
    ("callback", "callback_start -> callback_end"),
    ("ros_e2e", "rclcpp_publish -> callback_start, end to end"),
    ("node", "in a chain: callback_start of a hop -> rclcpp_publish of the next"),
    ("router", "Zenoh router hop: complete on the router's inbound link -> first byte on its outbound link (sender/receiver: those two capture points)"),
];

/// One line per layer that `layers` holds, in the table's order of first appearance.
pub fn write_layers<'a>(out: &mut dyn Write, layers: impl IntoIterator<Item = &'a str>) -> io::Result<()> {
    let mut seen: Vec<&str> = vec![];
    for l in layers {
        if !seen.contains(&l) {
            seen.push(l);
        }
    }
    if seen.is_empty() {
        return Ok(());
    }
    let w = seen.iter().map(|l| l.len()).max().unwrap_or(0);
    writeln!(out, "layers (times in ms; count = samples measured):")?;
    for l in seen {
        if let Some((_, what)) = LAYERS.iter().find(|(n, _)| *n == l) {
            writeln!(out, "  {l:w$}  {what}")?;
        }
    }
    Ok(())
}

/// What the flow table's less obvious columns mean.
pub fn write_flow_columns(out: &mut dyn Write) -> io::Result<()> {
    for l in [
        "samples = delivered + lost + incomplete; clean/repaired_mean_ms: message latency of the samples sent once / repaired",
        "(a fragment sent again); jitter: d(X) - d(X-1) of consecutive samples (Bosk et al., IEEE Access 2022, Eq. 10);",
        "period_ms: median interval between the sender's consecutive samples; in_time/late: message latency within/over",
        "that period (Kouril et al., VEHITS 2024)",
    ] {
        writeln!(out, "{l}")?;
    }
    Ok(())
}
