//! The server side, `ddscope serve`: [`serve`] starts the pieces; agents'
//! batches arrive over HTTP ([`http`], with limits, and every body estimated
//! before it is decoded: [`prescan`]) or OTLP/gRPC ([`grpc`]) into the state
//! ([`central`]: the correlator, one capture point per agent, and the live incident feed, [`incidents`]), or through the
//! front over shards ([`federation`]); [`config`] holds every cap, [`assets`]
//! the dashboard (and the charts the offline report shares).

pub mod assets;
pub mod central;
pub mod config;
pub mod federation;
pub mod grpc;
pub mod http;
pub mod incidents;
pub mod prescan;
pub mod serve;

pub use serve::{Central, HttpLimits, ServeConfig, Server, StateCaps, MAX_AGENTS};
