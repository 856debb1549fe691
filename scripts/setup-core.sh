#!/usr/bin/env bash
# What building and running ddscope needs on a fresh Debian 12 machine, and the
# build: the main job (scripts/demo.sh) runs only this; scripts/setup.sh runs it
# after the test set-up. Idempotent: what is installed already is kept.
#
# The Debian packages are those `cargo build --release -p ddscope` needs
# (read from the build scripts): a C linker and libc headers for rustc;
# libpcap (crates/monitor links it through the pcap crate, which asks
# pkg-config); libbabeltrace2 (crates/trace/build.rs links it: ros2_tracing
# traces); clang-14 and libbpf-dev (crates/monitor/build.rs compiles the
# agent's in-kernel capture filter; without them the binary is built without
# it). Nothing else is needed to build or to run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/steps.sh

CORE_PACKAGES=(gcc libc6-dev pkg-config libpcap-dev libbabeltrace2-dev clang-14 libbpf-dev)

apt_step "packages to build ddscope" "${CORE_PACKAGES[@]}"

if ! command -v cargo >/dev/null; then
  echo "setup: cargo not found; install Rust (https://rustup.rs) first" >&2
  exit 1
fi

if [ "${1:-}" = "--packages-only" ]; then
  exit 0
fi
step build "building target/release/ddscope (cargo build --release; minutes the first time)" \
  cargo build --release --locked -p ddscope
