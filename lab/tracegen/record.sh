#!/usr/bin/env bash
# Records an LTTng trace of a command the way `ros2 trace` does: a UST session
# with the ros2:* events and the vpid, vtid and procname contexts.
#
#   record.sh OUT_DIR [options] -- COMMAND [ARGS...]
#     --session NAME     session name (default: ddscope-<pid>)
#     --live URL         live session streamed to lttng-relayd at URL
#                        (net://HOST[:CTRL_PORT[:DATA_PORT]]); OUT_DIR is then unused
#                        and the trace is read at net://HOST[:VIEWER_PORT]/host/$(hostname)/NAME
#     --events PATTERN   UST events to enable (default 'ros2:*')
#     --lossy            keep LTTng's default discard mode (default: the channel
#                        blocks the traced program instead of losing events)
#     --subbuf-size S    sub-buffer size (default 4M), --num-subbuf N (default 8)
#
# Starts a root session daemon (`lttng-sessiond --daemonize --no-kernel`) if
# none runs. Prints the trace directory (OUT_DIR) on success.
set -euo pipefail

die() { echo "record.sh: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: record.sh OUT_DIR [options] -- COMMAND [ARGS...]"
out=$1; shift
session="ddscope-$$"
live=""
events="ros2:*"
blocking=1
subbuf=4M
nsubbuf=8
while [ $# -gt 0 ]; do
  case "$1" in
    --session) session=$2; shift 2 ;;
    --live) live=$2; shift 2 ;;
    --events) events=$2; shift 2 ;;
    --lossy) blocking=0; shift ;;
    --subbuf-size) subbuf=$2; shift 2 ;;
    --num-subbuf) nsubbuf=$2; shift 2 ;;
    --) shift; break ;;
    *) die "unknown option $1" ;;
  esac
done
[ $# -ge 1 ] || die "no command given after --"
command -v lttng >/dev/null || die "lttng not found (Debian: lttng-tools)"

if ! lttng list >/dev/null 2>&1; then
  lttng-sessiond --daemonize --no-kernel >/dev/null 2>&1 || true
  for _ in $(seq 50); do lttng list >/dev/null 2>&1 && break; sleep 0.1; done
  lttng list >/dev/null 2>&1 || die "cannot reach an LTTng session daemon"
fi

# A UST session records the enabled events of every traced process of the
# user, so two recordings at once would see each other's events: serialize.
exec 9>"${TMPDIR:-/tmp}/ddscope-lttng-record.lock"
flock 9

cleanup() { lttng destroy "$session" >/dev/null 2>&1 || true; }
trap cleanup EXIT

if [ -n "$live" ]; then
  lttng create "$session" --live=100000 --set-url="$live" >/dev/null
else
  mkdir -p "$(dirname "$out")"
  lttng create "$session" --output="$out" >/dev/null
fi
chan_opts=(--userspace --session="$session" --subbuf-size="$subbuf" --num-subbuf="$nsubbuf")
if [ "$blocking" = 1 ]; then chan_opts+=(--blocking-timeout=inf); fi
lttng enable-channel "${chan_opts[@]}" ros2 >/dev/null
lttng enable-event --userspace --session="$session" --channel=ros2 "$events" >/dev/null
lttng add-context --userspace --session="$session" --channel=ros2 -t vpid -t vtid -t procname >/dev/null
lttng start "$session" >/dev/null
set +e
LTTNG_UST_ALLOW_BLOCKING=$blocking "$@"
rc=$?
set -e
lttng stop "$session" >/dev/null
lttng destroy "$session" >/dev/null
trap - EXIT
[ $rc -eq 0 ] || die "command exited with status $rc"
[ -n "$live" ] || echo "$out"
