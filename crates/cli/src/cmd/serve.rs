//! `ddscope serve`: the central view over all agents.

use clap::Args;
use ddscope_monitor::serve::{serve, ServeConfig};
use ddscope_traffic::units::Nanos;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  ddscope serve                                   # http://127.0.0.1:8080
  ddscope serve --listen 0.0.0.0:8080 --token $TOKEN
Agents send with `ddscope agent … --send-to http://HOST:8080 [--token …]`.
The dashboard (http://HOST:8080/, add ?token=… when a token is set) shows
per-topic DDS message and submessage latency over time, payload sizes, loss,
repairs, CPU and bandwidth per interface; /api/state has the same as JSON.
Everything is built into the binary; nothing is loaded from the internet.")]
pub struct ServeArgs {
    /// Address to listen on (only loopback without --token)
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Token agents and browsers must present (Authorization: Bearer …, or ?token=…)
    #[arg(long, env = "DDSCOPE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// How long after a sample was sent it is judged (and called lost)
    #[arg(long, default_value = "5s")]
    pub window: String,
    /// An agent silent this long no longer holds back judgement
    #[arg(long, default_value = "10s")]
    pub idle: String,
}

pub fn run(a: ServeArgs) -> anyhow::Result<i32> {
    if !a.listen.ip().is_loopback() && a.token.as_deref().map_or(true, str::is_empty) {
        anyhow::bail!("--listen {} is reachable from other hosts: give a --token (or listen on 127.0.0.1)", a.listen);
    }
    let window = a.window.parse::<Nanos>().map_err(|e| anyhow::anyhow!("--window: {e}"))?.0 as i64;
    let idle = a.idle.parse::<Nanos>().map_err(|e| anyhow::anyhow!("--idle: {e}"))?.as_duration();
    serve(
        ServeConfig { listen: a.listen, token: a.token, window_ns: window, idle: idle.max(Duration::from_secs(1)) },
        |addr| eprintln!("serve: dashboard on http://{addr}/ ; agents send to http://{addr}"),
    )?;
    Ok(0)
}
