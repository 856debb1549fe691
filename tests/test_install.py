"""What a user installing ddscope relies on (issue 38): the workspace's `rust-version` is true.

Two checks, cargo-msrv style, without a second toolchain (none can be fetched here): every
dependency in the locked graph for this target declares a `rust-version` no newer than ours
(cargo metadata, cargo's own resolution, is the oracle), and clippy's `incompatible_msrv` lint
(which knows when each standard library API was stabilised) finds no use of an API newer than
it in any crate of the workspace."""
from __future__ import annotations

import json
import pathlib
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


def test_the_deb_names_its_libraries_installs_and_runs(tmp_path):
    """scripts/package-deb.sh builds a .deb (cargo-deb) whose Depends dpkg-shlibdeps found from the
    binary: libpcap0.8 and libbabeltrace2-0 (the package says why in its description). dpkg
    accepts it for installation here (`dpkg --no-act -i`, dependencies checked), and the binary it
    carries, unpacked, dissects the bundled capture exactly as the built one does (oracle: the
    release binary's own output)."""
    cp = subprocess.run([str(REPO / "scripts" / "package-deb.sh")], capture_output=True, text=True, timeout=1800)
    assert cp.returncode == 0, cp.stderr[-2000:]
    deb = pathlib.Path(cp.stdout.strip().splitlines()[-1])
    assert deb.is_file() and deb.suffix == ".deb", cp.stdout
    field = lambda f: subprocess.run(["dpkg-deb", "-f", str(deb), f], capture_output=True, text=True, check=True).stdout.strip()
    depends = field("Depends")
    assert "libbabeltrace2-0" in depends and "libpcap0.8" in depends, depends
    assert "libbabeltrace2" in field("Description") and field("Package") == "ddscope", field("Description")
    cp = subprocess.run(["dpkg", "--no-act", "-i", str(deb)], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert {"usr/bin/ddscope", "usr/share/doc/ddscope/README.md", "usr/share/doc/ddscope/docs/latency.md"} <= files, sorted(files)
    capture = REPO / "examples" / "captures" / "ros2-two-hosts" / "pc1.pcapng.gz"
    ours = subprocess.run([str(root / "usr/bin/ddscope"), "dissect", str(capture), "--format", "csv"], capture_output=True, text=True, check=True).stdout
    built = subprocess.run([str(REPO / "target/release/ddscope"), "dissect", str(capture), "--format", "csv"], capture_output=True, text=True, check=True).stdout
    assert ours == built and ours.count("\n") > 1000


COLCON = ["colcon-core==0.21.3", "colcon-cargo==0.2.0", "colcon-recursive-crawl==0.2.3", "colcon-package-information==0.4.1",
          "colcon-bash==0.5.0"]


def test_colcon_builds_ddscope_in_a_ros_workspace(tmp_path):
    """A ROS 2 user puts the repository in a colcon workspace: colcon (with colcon-cargo, from PyPI;
    the oracle is colcon's own package discovery and build) finds one package, `ddscope` (the
    workspace's other crates, the lab's own ROS 2 packages, fuzzing and tests carry COLCON_IGNORE),
    builds it and installs `ddscope` into the workspace's install/ with the setup scripts that put
    it on PATH; the installed binary dissects the bundled capture exactly as the built one does."""
    venv = tmp_path / "venv"
    subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
    cp = subprocess.run([str(venv / "bin/pip"), "install", "--quiet", *COLCON], capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, cp.stderr[-2000:]
    colcon = str(venv / "bin/colcon")
    ws = tmp_path / "ws"
    ws.mkdir()
    listed = subprocess.run([colcon, "list", "--base-paths", str(REPO)], cwd=ws, capture_output=True, text=True, check=True).stdout
    assert [l.split("\t")[0] for l in listed.splitlines()] == ["ddscope"], listed
    cp = subprocess.run([colcon, "build", "--base-paths", str(REPO), "--cargo-args", "--profile", "release"], cwd=ws,
                        capture_output=True, text=True, timeout=2400)
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    binary = ws / "install" / "ddscope" / "bin" / "ddscope"
    assert binary.is_file(), sorted(str(p.relative_to(ws)) for p in (ws / "install").rglob("*"))[:40]
    # sourcing the workspace puts it on PATH, as for any colcon package
    which = subprocess.run(["bash", "-c", f". {ws}/install/setup.bash && command -v ddscope"], capture_output=True, text=True)
    assert which.stdout.strip() == str(binary), which.stdout + which.stderr
    capture = REPO / "examples" / "captures" / "ros2-two-hosts" / "pc1.pcapng.gz"
    ours = subprocess.run([str(binary), "dissect", str(capture), "--format", "csv"], capture_output=True, text=True, check=True).stdout
    built = subprocess.run([str(REPO / "target/release/ddscope"), "dissect", str(capture), "--format", "csv"], capture_output=True, text=True, check=True).stdout
    assert ours == built and ours.count("\n") > 1000
