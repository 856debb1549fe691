"""What a user installing ddscope relies on (issue 38): the workspace's `rust-version` is true.

Two checks, cargo-msrv style, without a second toolchain (none can be fetched here): every
dependency in the locked graph for this target declares a `rust-version` no newer than ours
(cargo metadata, cargo's own resolution, is the oracle), and clippy's `incompatible_msrv` lint
(which knows when each standard library API was stabilised) finds no use of an API newer than
it in any crate of the workspace."""
from __future__ import annotations

import json
import shutil
import subprocess
import tomllib

import pytest

from conftest import REPO


def version(s: str) -> tuple[int, ...]:
    return tuple(int(x) for x in s.split("."))


def test_rust_version_covers_the_locked_dependencies_and_every_crate_declares_it():
    ours = tomllib.loads((REPO / "Cargo.toml").read_text())["workspace"]["package"]["rust-version"]
    host = subprocess.run(["rustc", "-vV"], capture_output=True, text=True, check=True).stdout
    target = next(l.split(": ", 1)[1] for l in host.splitlines() if l.startswith("host: "))
    meta = json.loads(subprocess.run(["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", target],
                                     cwd=REPO, capture_output=True, text=True, check=True).stdout)
    used = {n["id"] for n in meta["resolve"]["nodes"]}
    needs = sorted((version(p["rust_version"]), p["name"], p["version"]) for p in meta["packages"]
                   if p["id"] in used and p.get("rust_version"))
    assert needs and needs[-1][0] <= version(ours), f"rust-version {ours}, but {needs[-1][1]} {needs[-1][2]} needs {needs[-1][0]}"
    members = [p for p in meta["packages"] if p["id"] in meta["workspace_members"]]
    assert members and all(p.get("rust_version") == ours for p in members), [(p["name"], p.get("rust_version")) for p in members]


def test_no_standard_library_api_newer_than_rust_version():
    if subprocess.run(["cargo", "clippy", "--version"], capture_output=True).returncode != 0:
        pytest.fail("cargo clippy is needed (rustup component add clippy)")
    cp = subprocess.run(["cargo", "clippy", "--release", "--locked", "--workspace", "--all-targets", "--message-format", "short", "--",
                         "-A", "clippy::all", "-W", "clippy::incompatible_msrv"],
                        cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert cp.returncode == 0, cp.stderr[-3000:]
    newer = [l for l in cp.stderr.splitlines() if "incompatible_msrv" in l or "is stable since" in l]
    assert not newer, "\n".join(newer[:20])
