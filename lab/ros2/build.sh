#!/usr/bin/env bash
# Builds the lab's real ROS 2 node (ddslab_ros2, with the autoware_auto_vehicle_msgs stand-in) into
# lab/ros2/install, against the ROS 2 Jazzy stack scripts/ros2-build.sh builds from
# ../shared/ros2 (cached in ~/.cache/ddscope; ~25 min the first time). colcon rebuilds what changed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
stack=$("$here/../../scripts/ros2-build.sh" | tail -1)
cache=${DDSCOPE_CACHE:-$HOME/.cache/ddscope}
venv="$cache/ros2-venv"
cd "$here"
(
  export PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv"
  # the stack's environment as its setup script sets it (ament index, CMake and Python paths)
  set +u
  . "$stack/setup.sh"
  set -u
  colcon --log-base log build --base-paths . --build-base build --install-base install --merge-install \
    --parallel-workers 2 --event-handlers console_cohesion- console_direct- status- \
    --cmake-args -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release
) >"$here/build.log" 2>&1 || { echo "lab/ros2/build.sh: the build failed; the end of lab/ros2/build.log:" >&2; tail -30 "$here/build.log" >&2; exit 70; }
echo "$stack" >"$here/install/ddscope-ros2-stack"
echo "$here/install"
