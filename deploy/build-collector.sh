#!/usr/bin/env bash
# Builds the scale-out OpenTelemetry Collector (docs/scale-out.md) with the
# collector builder (ocb) from the Go module proxy: core OTLP receiver, OTLP
# (gRPC) and OTLP/HTTP exporters, debug exporter, and the contrib
# load-balancing exporter that routes by trace id to the `ddscope serve`
# shards. Idempotent: does nothing when the binary exists and lists the
# load-balancing exporter.
#
#   deploy/build-collector.sh            # prints the binary's path
#   DDSCOPE_LB_OTELCOL_DIR=/somewhere deploy/build-collector.sh
#
# Output (outside the repository): $DDSCOPE_LB_OTELCOL_DIR, default
# ${XDG_CACHE_HOME:-~/.cache}/ddscope/otelcol-lb-$VERSION, binary
# ddscope-otelcol-lb. Needs Go >= 1.25 (the contrib module's go line) and the
# Go module proxy; builds niced (the machine is shared).
set -euo pipefail

# Pinned: collector core 0.150.0 (its confmap providers are 1.56.0) and the
# contrib loadbalancingexporter of the same release, all served by the proxy.
VERSION=0.150.0
PROVIDERS=1.56.0
OUT="${DDSCOPE_LB_OTELCOL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ddscope/otelcol-lb-$VERSION}"
BIN="$OUT/ddscope-otelcol-lb"

if [ -x "$BIN" ] && "$BIN" components 2>/dev/null | grep -q loadbalancing; then
  echo "$BIN"
  exit 0
fi
GO_FALLBACK=1.25.5
go_ok() { # go binary new enough?
  local v
  v=$("$1" env GOVERSION 2>/dev/null) || return 1
  v=${v#go}
  [ "$(printf '%s\n' 1.25 "${v%%[-+ ]*}" | sort -V | head -1)" = 1.25 ]
}
GO=""
for g in "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go/bin/go; do
  if [ -n "$g" ] && [ -x "$g" ] && go_ok "$g"; then GO=$g; break; fi
done
if [ -z "$GO" ]; then
  # The official toolchain, as the Go module proxy serves it to `go` itself.
  TC="${XDG_CACHE_HOME:-$HOME/.cache}/ddscope/go$GO_FALLBACK"
  if [ ! -x "$TC/bin/go" ]; then
    echo "build-collector: fetching Go $GO_FALLBACK from the Go module proxy" >&2
    mkdir -p "$TC.tmp"
    curl -fsSL -o "$TC.tmp/go.zip" "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$GO_FALLBACK.linux-amd64.zip"
    python3 - "$TC.tmp" <<'PY'
import os, sys, zipfile
d = sys.argv[1]
with zipfile.ZipFile(os.path.join(d, "go.zip")) as z:
    for m in z.infolist():
        parts = m.filename.split("/")
        at = next((i for i, p in enumerate(parts) if "@" in p), None)
        rel = "/".join(parts[at + 1:]) if at is not None else ""
        if not rel or m.is_dir():
            continue
        dst = os.path.join(d, "root", rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with z.open(m) as src, open(dst, "wb") as out:
            out.write(src.read())
        if rel.startswith("bin/") or rel.startswith("pkg/tool/"):
            os.chmod(dst, 0o755)
PY
    rm -rf "$TC"
    mv "$TC.tmp/root" "$TC"
    rm -rf "$TC.tmp"
  fi
  GO="$TC/bin/go"
  go_ok "$GO" || { echo "build-collector: no usable Go >= 1.25 (tried $GO)" >&2; exit 1; }
fi
PATH="$(dirname "$GO"):$PATH"
export GOTOOLCHAIN=local
export GOPROXY=https://proxy.golang.org

mkdir -p "$OUT"
export GOBIN="$OUT/bin"
start=$(date +%s)
echo "build-collector: installing builder v$VERSION" >&2
nice -n 19 go install "go.opentelemetry.io/collector/cmd/builder@v$VERSION"

cat >"$OUT/manifest.yaml" <<YAML
dist:
  name: ddscope-otelcol-lb
  description: OpenTelemetry Collector routing ddscope agents' sightings to serve shards by trace id
  output_path: $OUT/src
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v$VERSION
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/otlpexporter v$VERSION
  - gomod: go.opentelemetry.io/collector/exporter/otlphttpexporter v$VERSION
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter v$VERSION
  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter v$VERSION
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider v$PROVIDERS
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider v$PROVIDERS
  - gomod: go.opentelemetry.io/collector/confmap/provider/yamlprovider v$PROVIDERS
YAML

echo "build-collector: building the collector in $OUT/src (takes many minutes)" >&2
# The builder's own module step runs a strict `go mod tidy`, which also loads
# the tests of every component; one test-only module of this release
# (collector/otelcol/otelcoltest v0.150.0) is not served by the proxy. So the
# builder only generates the sources, and the module list is tidied with -e
# (tolerating that test-only module) before a plain build.
nice -n 19 "$GOBIN/builder" --config="$OUT/manifest.yaml" --skip-compilation --skip-get-modules >"$OUT/build.log" 2>&1 || {
  tail -30 "$OUT/build.log" >&2
  exit 1
}
(
  cd "$OUT/src"
  nice -n 19 go mod tidy -e >>"$OUT/build.log" 2>&1
  nice -n 19 go build -trimpath -ldflags="-s -w" -o ddscope-otelcol-lb . >>"$OUT/build.log" 2>&1
) || {
  tail -30 "$OUT/build.log" >&2
  exit 1
}
cp "$OUT/src/ddscope-otelcol-lb" "$BIN"
echo "build-collector: built in $(( $(date +%s) - start )) s" >&2
echo "$BIN"
