#!/usr/bin/env bash
# Makes fresh RTPS captures with real Cyclone DDS processes, for the tshark oracle.
#
#   tests/oracle/make_capture.sh OUTDIR [small|large|repair|all]     (needs root)
#
# For each variant: two network namespaces joined by a veth pair, `ddsperf pub`
# (Debian cyclonedds-tools) in one and `ddsperf sub` in the other, tcpdump on
# the publisher's veth end. Writes OUTDIR/ddsperf-VARIANT.pcap (tcpdump's
# nanosecond pcap) and OUTDIR/ddsperf-VARIANT.pcapng (the same packets through
# editcap), then checks with tshark that the capture holds what the variant
# is for:
#   small  64-byte samples at 50 Hz: DATA, HEARTBEAT, ACKNACK, SPDP/SEDP
#   large  200 KiB samples at 5 Hz: DATA_FRAG (1344-byte fragments, ~10 per
#          datagram) and IP fragments (veth MTU 1500)
#   repair 200 KiB samples at 20 Hz, keep-last-1, into a 16 kB socket receive
#          buffer at the subscriber: NACK_FRAG and retransmitted DATA_FRAG
#          (this machine has no netem/iptables to drop packets otherwise)
# Environment: DURATION (seconds of publishing, default 4).
# Everything is uniquely named and always removed (trap), and only the
# processes this script started are stopped, by pid.
set -euo pipefail

usage() { echo "usage: $0 OUTDIR [small|large|repair|all]" >&2; exit 2; }
[ $# -ge 1 ] || usage
OUTDIR=$1
WHICH=${2:-all}
DURATION=${DURATION:-4}
case $WHICH in small|large|repair|all) ;; *) usage ;; esac
[ "$(id -u)" -eq 0 ] || { echo "make_capture: needs root (network namespaces, tcpdump)" >&2; exit 1; }
for tool in ip ddsperf tcpdump editcap tshark; do
  command -v "$tool" >/dev/null || { echo "make_capture: $tool is not installed (scripts/setup.sh)" >&2; exit 1; }
done
mkdir -p "$OUTDIR"

ID=$(printf '%x%04x' $$ $((RANDOM)))
WORK=$(mktemp -d "/tmp/ddscope-oracle-$ID.XXXX")
NS_PUB="ddso-$ID-pub"; NS_SUB="ddso-$ID-sub"
IF_PUB="do${ID}p"; IF_SUB="do${ID}s"          # <= 15 characters
PIDS=()

cleanup() {
  local rc=$?
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  PIDS=()
  ip netns del "$NS_PUB" 2>/dev/null || true
  ip netns del "$NS_SUB" 2>/dev/null || true
  rm -rf "$WORK"
  return $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

setup_net() {
  ip netns add "$NS_PUB"
  ip netns add "$NS_SUB"
  ip link add "$IF_PUB" type veth peer name "$IF_SUB"
  ip link set "$IF_PUB" netns "$NS_PUB"
  ip link set "$IF_SUB" netns "$NS_SUB"
  ip -n "$NS_PUB" addr add 10.231.0.1/24 dev "$IF_PUB"
  ip -n "$NS_SUB" addr add 10.231.0.2/24 dev "$IF_SUB"
  for pair in "$NS_PUB:$IF_PUB" "$NS_SUB:$IF_SUB"; do
    ns=${pair%%:*}; dev=${pair#*:}
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$dev" mtu 1500 up
    # SPDP discovery is multicast: route it over the veth.
    ip -n "$ns" route add 224.0.0.0/4 dev "$dev"
  done
}

teardown_net() {
  ip netns del "$NS_PUB" 2>/dev/null || true
  ip netns del "$NS_SUB" 2>/dev/null || true
}

cyclone_uri() {  # pin Cyclone DDS to the veth end of its namespace; $2: extra <Domain> XML
  echo "<CycloneDDS><Domain><General><Interfaces><NetworkInterface name=\"$1\"/></Interfaces></General>${2:-}</Domain></CycloneDDS>"
}

forget_pid() {
  local keep=() p
  for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}

# Stops one process this script started and forgets it.
stop_pid() {
  local pid=$1 sig=${2:-TERM}
  kill -"$sig" "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  forget_pid "$pid"
}

SUB_XML=""  # extra Cyclone configuration for the subscriber of the next variant

capture_variant() {
  local variant=$1; shift
  local pcap="$WORK/ddsperf-$variant.pcap"
  setup_net
  ip netns exec "$NS_PUB" tcpdump -i "$IF_PUB" -n --time-stamp-precision=nano -B 65536 -s 0 \
      -w "$pcap" udp >"$WORK/tcpdump-$variant.log" 2>&1 &
  local tcpdump_pid=$!; PIDS+=("$tcpdump_pid")
  for _ in $(seq 100); do
    grep -q "listening on" "$WORK/tcpdump-$variant.log" && break
    kill -0 "$tcpdump_pid" 2>/dev/null || { cat "$WORK/tcpdump-$variant.log" >&2; return 1; }
    sleep 0.1
  done

  ip netns exec "$NS_SUB" env CYCLONEDDS_URI="$(cyclone_uri "$IF_SUB" "$SUB_XML")" \
      ddsperf -D $((DURATION + 2)) sub >"$WORK/sub-$variant.log" 2>&1 &
  local sub_pid=$!; PIDS+=("$sub_pid")
  ip netns exec "$NS_PUB" env CYCLONEDDS_URI="$(cyclone_uri "$IF_PUB")" \
      ddsperf -D "$DURATION" "$@" >"$WORK/pub-$variant.log" 2>&1 &
  local pub_pid=$!; PIDS+=("$pub_pid")

  local rc=0
  wait "$pub_pid" || rc=$?
  forget_pid "$pub_pid"
  if [ "$rc" -ne 0 ]; then
    echo "make_capture: ddsperf $* exited $rc:" >&2; cat "$WORK/pub-$variant.log" >&2; return 1
  fi
  sleep 0.5
  if ! kill -0 "$sub_pid" 2>/dev/null; then
    echo "make_capture: the ddsperf subscriber ended early:" >&2; cat "$WORK/sub-$variant.log" >&2; return 1
  fi
  stop_pid "$sub_pid"
  stop_pid "$tcpdump_pid" INT
  teardown_net

  editcap -F pcapng "$pcap" "$WORK/ddsperf-$variant.pcapng"
  cp "$pcap" "$WORK/ddsperf-$variant.pcapng" "$OUTDIR/"
  echo "make_capture: $OUTDIR/ddsperf-$variant.pcapng ($(tshark -r "$pcap" 2>/dev/null | wc -l) frames)" >&2
}

count() {  # frames of capture $1 matching display filter $2
  tshark -r "$1" -Y "$2" -T fields -e frame.number 2>/dev/null | wc -l
}

require() {  # capture, display filter, what it means
  local n; n=$(count "$1" "$2")
  if [ "$n" -eq 0 ]; then
    echo "make_capture: $1 has no frame matching '$2' ($3)" >&2
    return 1
  fi
  echo "make_capture:   $n frames with $3" >&2
}

if [ "$WHICH" = small ] || [ "$WHICH" = all ]; then
  capture_variant small pub 50Hz size 64
  f="$OUTDIR/ddsperf-small.pcapng"
  require "$f" "rtps.sm.id == 0x15 && rtps.sm.wrEntityId == 0x000003c2" "SEDP publication DATA"
  require "$f" "rtps.sm.id == 0x15 && !(rtps.sm.wrEntityId & 0xc0)" "user DATA"
  require "$f" "rtps.sm.id == 0x07" "HEARTBEAT"
  require "$f" "rtps.sm.id == 0x06" "ACKNACK"
fi
if [ "$WHICH" = large ] || [ "$WHICH" = all ]; then
  capture_variant large pub 5Hz size 200KiB
  f="$OUTDIR/ddsperf-large.pcapng"
  require "$f" "rtps.sm.id == 0x16" "DATA_FRAG"
  require "$f" "ip.flags.mf == 1" "IP fragments"
  require "$f" "rtps && ip.fragment.count > 1" "RTPS in reassembled IP datagrams"
fi
if [ "$WHICH" = repair ] || [ "$WHICH" = all ]; then
  # A 16 KB socket receive buffer at the subscriber drops most of each 15-datagram
  # burst, so the reader asks for repairs (NACK_FRAG, ACKNACK with bits set)
  # and the writer retransmits fragments.
  SUB_XML='<Internal><SocketReceiveBufferSize min="16kB" max="16kB"/></Internal>'
  capture_variant repair -k 1 pub 20Hz size 200KiB
  SUB_XML=""
  f="$OUTDIR/ddsperf-repair.pcapng"
  require "$f" "rtps.sm.id == 0x12" "NACK_FRAG"
  require "$f" "rtps.sm.id == 0x16" "DATA_FRAG"
fi
