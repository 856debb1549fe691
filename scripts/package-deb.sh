#!/usr/bin/env bash
# Builds target/debian/ddscope_VERSION-1_ARCH.deb: the stripped release binary, the README and
# docs/, with Depends found by dpkg-shlibdeps (libpcap0.8, libbabeltrace2-0, libc6). Uses
# cargo-deb (crates.io), installed once under ~/.cache/ddscope/cargo-deb. Install the package
# with `sudo apt install ./target/debian/ddscope_*.deb` (apt fetches the two libraries).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${DDSCOPE_CACHE:-$HOME/.cache/ddscope}
tool="$cache/cargo-deb"
if [ ! -x "$tool/bin/cargo-deb" ]; then
  cargo install --locked --quiet --version 3.8.0 --root "$tool" cargo-deb
fi
command -v dpkg-shlibdeps >/dev/null || { echo "package-deb: dpkg-shlibdeps is needed (apt-get install dpkg-dev)" >&2; exit 1; }
"$tool/bin/cargo-deb" --locked -p ddscope "$@" | tail -1
