//! The real ROS 2 nodes' run-time configuration: rmw_zenoh_cpp's session and router files.
//!
//! rmw_zenoh_cpp reads its Zenoh configuration from `ZENOH_SESSION_CONFIG_URI` (nodes) and
//! `ZENOH_ROUTER_CONFIG_URI` (rmw_zenohd). The lab starts from the defaults the stack installs
//! (`share/rmw_zenoh_cpp/config/DEFAULT_RMW_ZENOH_*_CONFIG.json5`, the bundle's own) and changes
//! only where the router listens and where a node connects and listens: the lab's hosts are
//! namespaces whose `localhost` is their own, and the router runs on the switch or on a host.

use anyhow::{anyhow, bail, Result};

use crate::scenario::ZenohMode;
use crate::workload::Ros2Install;

fn default_config(ros2: &Ros2Install, which: &str) -> Result<String> {
    let p = ros2.stack.join("share").join("rmw_zenoh_cpp").join("config").join(format!("DEFAULT_RMW_ZENOH_{which}_CONFIG.json5"));
    std::fs::read_to_string(&p).map_err(|e| anyhow!("{}: {e} (rmw_zenoh_cpp's default configuration)", p.display()))
}

/// Replaces the one occurrence of `from` in `text` (the default's value the lab sets), refusing a
/// default that does not read as expected (another rmw_zenoh version).
fn replace_once(text: &str, from: &str, to: &str, what: &str) -> Result<String> {
    match text.matches(from).count() {
        1 => Ok(text.replacen(from, to, 1)),
        n => bail!("rmw_zenoh_cpp's default {what} configuration holds {from} {n} times (expected once): another rmw_zenoh version?"),
    }
}

/// rmw_zenohd's configuration: the default, listening on `port` on every address.
pub fn router_config(ros2: &Ros2Install, port: u16) -> Result<String> {
    let d = default_config(ros2, "ROUTER")?;
    replace_once(&d, "\"tcp/[::]:7447\"", &format!("\"tcp/[::]:{port}\""), "router")
}

/// A node's session: the default with its mode (`peer`, rmw_zenoh's default, or `client`), the
/// router it connects to (`tcp/IP:PORT`) and its host's own address to listen on.
pub fn session_config(ros2: &Ros2Install, mode: ZenohMode, router: &str, host_ip: &str) -> Result<String> {
    let d = default_config(ros2, "SESSION")?;
    let d = replace_once(&d, "mode: \"peer\"", &format!("mode: \"{}\"", mode.as_str()), "session")?;
    let d = replace_once(&d, "\"tcp/localhost:7447\"", &format!("\"{router}\""), "session")?;
    let listen = match mode {
        ZenohMode::Peer => format!("\"tcp/{host_ip}:0\""),
        // a client listens on nothing: every sample goes through the router
        ZenohMode::Client => String::new(),
    };
    replace_once(&d, "\"tcp/localhost:0\"", &listen, "session")
}
