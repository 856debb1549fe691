#!/usr/bin/env bash
# Regenerates the example captures under examples/captures with `ddscope lab`:
# the simple robotic application of the thesis (Fig. 4.3), 1 s, once with
# Cyclone DDS only and once with Fast DDS publishing /image and /drive; and
# ros2-two-hosts (the README's "On your two hosts"): the same application as
# real ROS 2 nodes (rclcpp on rmw_cyclonedds_cpp, lab/ros2/build.sh), 2 s, both
# hosts traced, with 5 Mbit/s of iperf3 UDP beside it.
# Each run directory keeps both hosts' captures (gzip-compressed pcapng), their
# ground truth, the resolved scenario, run.json and the node logs.
# Needs root (network namespaces) and the workload nodes (scripts/setup.sh).
#
#   sudo scripts/make-examples.sh            # DDSCOPE_BIN=... to use another build
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${DDSCOPE_BIN:-target/release/ddscope}
if [ ! -x "$BIN" ]; then
  cargo build --release --locked -q -p ddscope
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "make-examples: the lab needs root (network namespaces): run with sudo" >&2
  exit 1
fi

SCENARIO=examples/lab/simple-robotic.toml
OUT=examples/captures
COMMON=(--duration 1s --gzip --force --quiet)

"$BIN" lab run "$SCENARIO" "${COMMON[@]}" --out "$OUT/simple-robotic-cyclone"
"$BIN" lab run "$SCENARIO" "${COMMON[@]}" --out "$OUT/simple-robotic-fastdds" \
  --vendor filter=fastdds --vendor sensor=fastdds

if [ -x lab/ros2/install/lib/ddslab_ros2/ddslab-ros2 ]; then
  "$BIN" lab run examples/lab/ros2-two-hosts.toml --gzip --force --quiet --out "$OUT/ros2-two-hosts"
else
  echo "make-examples: $OUT/ros2-two-hosts kept: the real ROS 2 node is not built (lab/ros2/build.sh)" >&2
fi

du -ch "$OUT"/*/*.pcapng.gz | tail -1 | sed 's/^/make-examples: captures: /' >&2
