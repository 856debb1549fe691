//! The real ROS 2 nodes' run-time configuration: rmw_zenoh_cpp's session and router files.
//!
//! rmw_zenoh_cpp reads its Zenoh configuration from `ZENOH_SESSION_CONFIG_URI` (nodes) and
//! `ZENOH_ROUTER_CONFIG_URI` (rmw_zenohd). The lab starts from the defaults the stack installs
//! (`share/rmw_zenoh_cpp/config/DEFAULT_RMW_ZENOH_*_CONFIG.json5`, the bundle's own) and changes
//! only where the router listens and where a node connects and listens (the lab's hosts are
//! namespaces whose `localhost` is their own, and the router runs on the switch or on a host) and,
//! for a node in client mode, time stamps (see [`session_config`]).

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
    // rmw_zenoh_cpp gives transient-local publishers (/rosout, /parameter_events) a publication
    // cache, which zenoh refuses to make without time stamps: the default stamps in routers and
    // peers only, so a client would abort in rcl_init ("unable to create zenoh publisher cache")
    let d = match mode {
        ZenohMode::Client => replace_once(&d, "enabled: { router: true, peer: true, client: false }", "enabled: { router: true, peer: true, client: true }", "session")?,
        ZenohMode::Peer => d,
    };
    match mode {
        ZenohMode::Peer => replace_once(&d, "\"tcp/localhost:0\"", &format!("\"tcp/{host_ip}:0\""), "session"),
        // a client listens on nothing: every sample goes through the router (the entry goes with
        // its comma: `[ , ]` is not JSON5, and rmw_zenoh refuses the whole file)
        ZenohMode::Client if d.contains("\"tcp/localhost:0\",") => replace_once(&d, "\"tcp/localhost:0\",", "", "session"),
        ZenohMode::Client => replace_once(&d, "\"tcp/localhost:0\"", "", "session"),
    }
}
