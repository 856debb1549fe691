#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs every test: Rust unit and integration
# tests, then the Python end-to-end tests (oracle comparisons with tshark,
# lab runs, real servers, browser).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cargo test --release --locked --workspace -q
python3 -m pytest -q tests "$@"
