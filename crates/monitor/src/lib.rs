//! Online monitoring: live capture, the per-host agent, the central
//! correlation server and its web dashboard.

pub mod capture;
pub mod kfilter;
pub mod view;
pub mod stages;
pub mod protocol;
pub mod serve;
pub mod central;
pub mod config;
pub mod http;
pub mod assets;
pub mod agent;
pub mod privileges;
pub mod upstream;
pub mod trace;
pub mod otlp;
pub mod grpc;
pub mod federation;
pub mod prescan;
mod protobuf;
