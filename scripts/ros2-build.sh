#!/usr/bin/env bash
# Builds the real ROS 2 Jazzy stack the lab runs (rclcpp, ros2_tracing, rmw_cyclonedds_cpp,
# rmw_fastrtps_cpp with Fast DDS 2.14, rmw_zenoh_cpp with zenoh-c) from the bundle in
# ../shared/ros2/ (its README: versions, licences, the edits a Debian 12 build needs), and
# nothing else: no network but the package registries (Debian, PyPI; zenoh-c's crates are
# vendored in the bundle).
#
# Cached: the install lands in ~/.cache/ddscope/ros2-jazzy-<the bundle's sha256, 12 digits>/install
# (a fixed place: installed CMake files hold absolute paths), marked complete only when the whole
# build succeeded; a second run finds it and returns at once. The sources and the build tree are
# removed after a successful build (the install is ~84 MB, the build tree gigabytes).
#
# Prints the install directory on its last line. Output of the build: ROOT/build.log.
#   DDSCOPE_ROS2_BUNDLE   the bundle (default: ../shared/ros2/ros2-jazzy-src.tar.zst beside the
#                         checkout, else /work/shared/ros2/…)
#   DDSCOPE_CACHE         the cache directory (default ~/.cache/ddscope)
#   DDSCOPE_ROS2_JOBS     parallel packages (default: the number of CPUs, at most 4)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

bundle=${DDSCOPE_ROS2_BUNDLE:-}
if [ -z "$bundle" ]; then
  for c in "$repo/../shared/ros2/ros2-jazzy-src.tar.zst" /work/shared/ros2/ros2-jazzy-src.tar.zst; do
    if [ -f "$c" ]; then bundle=$c; break; fi
  done
fi
if [ -z "$bundle" ] || [ ! -f "$bundle" ]; then
  echo "ros2-build: the ROS 2 bundle (ros2-jazzy-src.tar.zst) is not in ../shared/ros2/ nor /work/shared/ros2/ (set DDSCOPE_ROS2_BUNDLE)" >&2
  exit 2
fi
hash=$(sha256sum "$bundle" | cut -c1-12)
cache=${DDSCOPE_CACHE:-$HOME/.cache/ddscope}
root="$cache/ros2-jazzy-$hash"
if [ -f "$root/install/.ddscope-complete" ]; then
  echo "$root/install"
  exit 0
fi

say() { echo "ros2-build: $*" >&2; }
t0=$(date +%s)

# The Debian packages the bundle's README lists (Cyclone DDS 0.10.2 is Debian's; Fast DDS is built).
pkgs=(cmake g++ make pkg-config python3-venv python3-dev libyaml-dev libspdlog-dev cyclonedds-dev
      libasio-dev libtinyxml2-dev libfoonathan-memory-dev libssl-dev liblttng-ust-dev lttng-tools
      babeltrace2 zstd)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null || { say "cargo (Rust) is needed for zenoh-c: install it with rustup"; exit 70; }

# colcon and the rosidl generators' Python modules, in a venv of their own.
venv="$cache/ros2-venv"
if [ ! -x "$venv/bin/colcon" ]; then
  say "colcon and the generators' modules into $venv (PyPI)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check colcon-common-extensions "empy==3.3.4" lark catkin_pkg pyyaml
fi

say "unpacking $(basename "$bundle") into $root (sha256 $hash…)"
rm -rf "$root"
mkdir -p "$root"
tar --use-compress-program=unzstd -xf "$bundle" -C "$root"

jobs=${DDSCOPE_ROS2_JOBS:-$(nproc)}
[ "$jobs" -gt 4 ] && jobs=4
say "colcon build (rclcpp, tracetools, three rmw; ~20 min on 2 cores, log in $root/build.log)"
(
  cd "$root"  # zenoh-c's cargo finds the bundle's .cargo/config.toml (vendored crates, offline) from here
  export PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv" MAKEFLAGS="-j$jobs"
  colcon --log-base log build \
    --base-paths src --build-base build --install-base install --merge-install \
    --parallel-workers "$jobs" --event-handlers console_cohesion- console_direct- status- \
    --packages-up-to rclcpp tracetools rmw_implementation rmw_cyclonedds_cpp rmw_fastrtps_cpp rmw_zenoh_cpp \
      std_msgs sensor_msgs geometry_msgs builtin_interfaces rosidl_default_generators \
    --cmake-args -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release \
      -DRMW_IMPLEMENTATION_DISABLE_RUNTIME_SELECTION=OFF \
      -DSQLITE3_SUPPORT=OFF -DCOMPILE_TOOLS=OFF -DSECURITY=OFF
) >"$root/build.log" 2>&1 || {
  say "the build failed after $(( $(date +%s) - t0 )) s; the end of $root/build.log:"
  tail -40 "$root/build.log" >&2
  exit 70
}
rm -rf "$root/build" "$root/src"
date -u +%FT%TZ >"$root/install/.ddscope-complete"
say "built in $(( $(date +%s) - t0 )) s: $(du -sh "$root/install" | cut -f1) installed"
echo "$root/install"
