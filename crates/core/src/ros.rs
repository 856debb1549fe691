//! ROS 2 name mangling as rmw implementations put it on the wire.
//!
//! Topics: `rt/chatter` → `/chatter`; services: `rq/add_two_intsRequest` →
//! `/add_two_ints` (request), `rr/add_two_intsReply` → `/add_two_ints` (reply);
//! also `rs/` (ROS actions' status over services) and `rp/`/`ra/` parameter-ish
//! prefixes are left alone unless they match these forms.
//! Types: `std_msgs::msg::dds_::String_` → `std_msgs/msg/String`.

/// What a DDS topic name means in ROS 2 terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RosTopic {
    Topic(String),
    ServiceRequest(String),
    ServiceReply(String),
    /// Not a ROS 2 mangled name: shown as is.
    Plain(String),
}

impl RosTopic {
    pub fn display(&self) -> String {
        match self {
            RosTopic::Topic(n) | RosTopic::Plain(n) => n.clone(),
            RosTopic::ServiceRequest(n) => format!("{n} [request]"),
            RosTopic::ServiceReply(n) => format!("{n} [reply]"),
        }
    }
}

pub fn demangle_topic(raw: &str) -> RosTopic {
    if let Some(rest) = raw.strip_prefix("rt/") {
        return RosTopic::Topic(format!("/{rest}"));
    }
    if let Some(rest) = raw.strip_prefix("rq/") {
        if let Some(svc) = rest.strip_suffix("Request") {
            return RosTopic::ServiceRequest(format!("/{svc}"));
        }
    }
    if let Some(rest) = raw.strip_prefix("rr/") {
        if let Some(svc) = rest.strip_suffix("Reply") {
            return RosTopic::ServiceReply(format!("/{svc}"));
        }
    }
    RosTopic::Plain(raw.to_string())
}

/// `pkg::msg::dds_::Name_` → `pkg/msg/Name` (also `srv`, `action`); other names unchanged.
pub fn demangle_type(raw: &str) -> String {
    let parts: Vec<&str> = raw.split("::").collect();
    if let Some(i) = parts.iter().position(|p| *p == "dds_") {
        if i >= 1 && i + 1 < parts.len() && !parts[parts.len() - 1].is_empty() {
            let last = parts[parts.len() - 1];
            let last = last.strip_suffix('_').unwrap_or(last);
            let mut out: Vec<&str> = parts[..i].to_vec();
            out.extend_from_slice(&parts[i + 1..parts.len() - 1]);
            out.push(last);
            return out.join("/");
        }
    }
    raw.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics() {
        assert_eq!(demangle_topic("rt/chatter"), RosTopic::Topic("/chatter".into()));
        assert_eq!(demangle_topic("rt/sensing/lidar/top/pointcloud_raw").display(), "/sensing/lidar/top/pointcloud_raw");
        assert_eq!(demangle_topic("rq/add_two_intsRequest"), RosTopic::ServiceRequest("/add_two_ints".into()));
        assert_eq!(demangle_topic("rr/add_two_intsReply").display(), "/add_two_ints [reply]");
        assert_eq!(demangle_topic("DCPSParticipant"), RosTopic::Plain("DCPSParticipant".into()));
        assert_eq!(demangle_topic("rq/odd"), RosTopic::Plain("rq/odd".into()));
    }

    #[test]
    fn types() {
        assert_eq!(demangle_type("std_msgs::msg::dds_::String_"), "std_msgs/msg/String");
        assert_eq!(demangle_type("sensor_msgs::msg::dds_::Image_"), "sensor_msgs/msg/Image");
        assert_eq!(demangle_type("example_interfaces::srv::dds_::AddTwoInts_Request_"), "example_interfaces/srv/AddTwoInts_Request");
        assert_eq!(demangle_type("KeyedSeq"), "KeyedSeq");
        assert_eq!(demangle_type("a::dds_::"), "a::dds_::");
    }
}
