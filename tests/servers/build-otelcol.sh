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
# A Go >= 1.24: on PATH, in the usual places, or else the official toolchain
# fetched from the Go module proxy (Debian 12's golang is 1.19).
GO_FALLBACK=1.24.13
go_ok() { # go binary new enough?
  local v
  v=$("$1" env GOVERSION 2>/dev/null) || return 1
  v=${v#go}
  [ "$(printf '%s\n' 1.24 "${v%%[-+ ]*}" | sort -V | head -1)" = 1.24 ]
}
GO=""
for g in "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go/bin/go; do
  if [ -n "$g" ] && [ -x "$g" ] && go_ok "$g"; then GO=$g; break; fi
done
if [ -z "$GO" ]; then
  TC="${XDG_CACHE_HOME:-$HOME/.cache}/ddscope/go$GO_FALLBACK"
  if [ ! -x "$TC/bin/go" ]; then
    echo "build-otelcol: fetching Go $GO_FALLBACK from proxy.golang.org" >&2
    mkdir -p "$TC.tmp"
    curl -fsSL -o "$TC.tmp/go.zip" "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$GO_FALLBACK.linux-amd64.zip"
    python3 - "$TC.tmp" <<'PY'
import os, sys, zipfile
d = sys.argv[1]
with zipfile.ZipFile(os.path.join(d, "go.zip")) as z:
    for m in z.infolist():
        # golang.org/toolchain@v0.0.1-goX.linux-amd64/<path>
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
  go_ok "$GO" || { echo "build-otelcol: no usable Go >= 1.24 (tried $GO)" >&2; exit 1; }
fi
PATH="$(dirname "$GO"):$PATH"
export GOTOOLCHAIN=local

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
