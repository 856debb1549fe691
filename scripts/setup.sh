#!/usr/bin/env bash
# Installs everything ddscope needs on a fresh Debian 12 machine and builds it.
# Idempotent: packages already present are not reinstalled.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  # capture, oracle and lab
  tshark tcpdump libpcap-dev iproute2 iperf3 procps linuxptp curl ca-certificates
  # real DDS implementations used by the lab and the oracle tests
  cyclonedds-dev cyclonedds-tools libfastrtps-dev libfastcdr-dev fastddsgen
  # build tools for the lab's workload nodes
  cmake pkg-config g++ make
  # ros2_tracing traces: the LTTng-UST provider replica, the tracer, and the
  # reference CTF reader (libbabeltrace2 is linked by crates/trace; see docs/tracing.md)
  liblttng-ust-dev lttng-tools babeltrace2 libbabeltrace2-dev python3-bt2
  # online monitoring: real servers in tests
  prometheus prometheus-node-exporter influxdb
  # browser tests
  chromium
  # eBPF: the agent's in-kernel capture filter (crates/monitor/bpf, built by crates/monitor/build.rs)
  # and the lab's tc programs (lab/bpf: 802.1Q tagging without 8021q, loss without netem)
  clang-14 libbpf-dev
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
  echo "setup: cargo not found; install Rust (https://rustup.rs) first" >&2
  exit 1
fi

# Python packages used by the tests (oracle comparisons, reading Parquet back).
python3 - <<'PY' || python3 -m pip install -q --disable-pip-version-check pytest polars duckdb pyarrow
import importlib, sys
for m in ("pytest", "polars", "duckdb", "pyarrow"):
    importlib.import_module(m)
PY

# The browser tests drive Debian's Chromium with playwright-core (no browser download).
if ! command -v node >/dev/null; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  (cd tests/browser && npm ci --silent --no-audit --no-fund)
fi

# The lab's workload nodes (C against Cyclone DDS, C++ against Fast DDS).
if [ -f lab/CMakeLists.txt ]; then
  cmake -S lab -B lab/build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build lab/build -j"$(nproc)" >/dev/null
fi

# The lab's tc eBPF programs (clsact egress/ingress, loaded by iproute2).
make -s -C lab/bpf

# The OTLP tests run a real OpenTelemetry Collector, built once with the
# collector builder from the Go module proxy (minutes the first time; cached
# under ~/.cache/ddscope, fetching a Go toolchain there too if needed).
tests/servers/build-otelcol.sh >/dev/null
# The scale-out Collector (contrib load-balancing exporter; docs/scale-out.md),
# built the same way and cached beside it (tens of minutes the first time).
deploy/build-collector.sh >/dev/null

cargo build --release --locked -q -p ddscope
