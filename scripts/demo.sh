#!/usr/bin/env bash
# The main job on the example data bundled in the repository: installs what
# the build needs and builds ddscope (scripts/setup-core.sh; the tests' set-up
# is scripts/setup.sh), then runs ddscope on the captures the lab made of the
# thesis's simple robotic application (examples/captures: two hosts, real
# Cyclone DDS and Fast DDS traffic, 1 s each):
#   1. ddscope topics   — what is on the wire, per topic, at each host
#   2. ddscope dissect  — every RTPS submessage of /drive
#   3. ddscope latency  — where each message's latency went: application,
#                         sender stack, wire (DDS message/submessage), receiver stack
#   4. ddscope report   — the same as one offline HTML file
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-core.sh
BIN=target/release/ddscope
EX=examples/captures
OUT=${DDSCOPE_DEMO_OUT:-target/demo}
mkdir -p "$OUT"

section() { printf '\n=== %s ===\n' "$*"; }

section "ddscope topics $EX/simple-robotic-cyclone/pc1.pcapng.gz $EX/simple-robotic-cyclone/pc2.pcapng.gz"
"$BIN" topics "$EX/simple-robotic-cyclone/pc1.pcapng.gz" "$EX/simple-robotic-cyclone/pc2.pcapng.gz"

section "ddscope topics $EX/simple-robotic-fastdds/pc1.pcapng.gz --by writer"
"$BIN" topics "$EX/simple-robotic-fastdds/pc1.pcapng.gz" --by writer

section "ddscope dissect $EX/simple-robotic-cyclone/pc2.pcapng.gz --topic /drive (first 15 rows)"
"$BIN" dissect "$EX/simple-robotic-cyclone/pc2.pcapng.gz" --topic /drive | head -n 17

section "ddscope latency $EX/simple-robotic-cyclone"
"$BIN" latency "$EX/simple-robotic-cyclone" --rows "$OUT/latency-rows.parquet"

section "ddscope report $EX/simple-robotic-cyclone --compare fastdds=$EX/simple-robotic-fastdds"
"$BIN" report "$EX/simple-robotic-cyclone" --name cyclone --compare "fastdds=$EX/simple-robotic-fastdds" \
  --title "Simple robotic application: Cyclone DDS vs Fast DDS publishers" --html "$OUT/report.html"
echo "open $OUT/report.html in a browser; per-sample rows are in $OUT/latency-rows.parquet"
