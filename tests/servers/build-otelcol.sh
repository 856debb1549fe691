#!/usr/bin/env bash
# Builds a small OpenTelemetry Collector (OTLP receiver, debug exporter) with the collector builder (ocb) from the Go module proxy, for
# the OTLP export tests. Idempotent: does nothing when the binary exists.
#
#   tests/servers/build-otelcol.sh            # prints the binary's path
#   DDSCOPE_OTELCOL_DIR=/somewhere tests/servers/build-otelcol.sh
#
# Output (outside the repository): $DDSCOPE_OTELCOL_DIR, default
# ${XDG_CACHE_HOME:-~/.cache}/ddscope/otelcol-$VERSION, binary ddscope-otelcol.
# Needs Go >= 1.24 and network access to proxy.golang.org. Only core modules
# are used: the contrib file exporter v0.150.0 is not served by the proxy
# here (403), so the tests read the debug exporter's detailed output; the
# http(s) config providers are left out for the same reason.
set -euo pipefail

VERSION=0.150.0
# confmap providers are versioned 1.x beside the 0.x components.
PROVIDERS=1.56.0
OUT="${DDSCOPE_OTELCOL_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ddscope/otelcol-$VERSION}"
BIN="$OUT/ddscope-otelcol"

if [ -x "$BIN" ] && "$BIN" components >/dev/null 2>&1; then
  echo "$BIN"
  exit 0
fi
if ! command -v go >/dev/null; then
  for g in /usr/local/go/bin/go /usr/lib/go/bin/go; do
    [ -x "$g" ] && PATH="$(dirname "$g"):$PATH" && break
  done
fi
command -v go >/dev/null || { echo "build-otelcol: go not found (install Go >= 1.24)" >&2; exit 1; }

mkdir -p "$OUT"
export GOBIN="$OUT/bin"
start=$(date +%s)
echo "build-otelcol: installing builder v$VERSION" >&2
go install "go.opentelemetry.io/collector/cmd/builder@v$VERSION"

cat >"$OUT/manifest.yaml" <<YAML
dist:
  name: ddscope-otelcol
  description: OpenTelemetry Collector for ddscope's OTLP export tests
  output_path: $OUT/src
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v$VERSION
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter v$VERSION
providers:
  - gomod: go.opentelemetry.io/collector/confmap/provider/envprovider v$PROVIDERS
  - gomod: go.opentelemetry.io/collector/confmap/provider/fileprovider v$PROVIDERS
  - gomod: go.opentelemetry.io/collector/confmap/provider/yamlprovider v$PROVIDERS
YAML

echo "build-otelcol: building the collector in $OUT/src (takes minutes)" >&2
"$GOBIN/builder" --config="$OUT/manifest.yaml" >"$OUT/build.log" 2>&1 || {
  tail -30 "$OUT/build.log" >&2
  exit 1
}
cp "$OUT/src/ddscope-otelcol" "$BIN"
echo "build-otelcol: built in $(( $(date +%s) - start )) s" >&2
echo "$BIN"
