"""Caps are settable: `--limits FILE`, `--limit KEY=N` and `--max-writers N`
reach the tables of `topics`, `dissect` and `latency`, and `ddscope limits`
prints a file that reads back to the same caps.

Oracles: the generator's own counts (tests/hostile/hostile.py forges exactly
N writers, each with its own topic), so with a cap of C the closing lines
and JSON must report exactly N - C evictions; for the printed file, Python's
own TOML parser (tomllib).
"""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tomllib

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import hostile  # noqa: E402
from conftest import ddscope_bin  # noqa: E402


def run(*args, check=True):
    cp = subprocess.run([ddscope_bin(), *map(str, args)], capture_output=True, text=True, timeout=300)
    assert "panicked" not in cp.stderr, cp.stderr[-3000:]
    if check:
        assert cp.returncode == 0, f"exit {cp.returncode}: {cp.stderr[-3000:]}"
    return cp


@pytest.fixture(scope="module")
def writers_capture(tmp_path_factory):
    d = tmp_path_factory.mktemp("limits")
    a, b = d / "pc1.pcap", d / "pc2.pcap"
    hostile.generate("writers", 500, a, b)
    return a, b


def topics_evicted(cp) -> int:
    doc = json.loads(cp.stdout)
    return sum(c["topics_stats"]["writers_evicted"] for c in doc["captures"])


def test_printed_limits_read_back_and_parse_as_toml(tmp_path):
    text = run("limits").stdout
    doc = tomllib.loads(text)
    assert doc["topics"]["max_writers"] == 100_000 and doc["samples"]["max_open"] == 65_536
    f = tmp_path / "l.toml"
    doc["topics"]["max_writers"] = 7
    doc["samples"]["max_fragment_bytes"] = 12345
    f.write_text("\n".join(f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in t.items()) for s, t in doc.items()))
    again = tomllib.loads(run("limits", "--limits", f).stdout)
    assert again == doc
    # Overrides apply after the file, --max-writers last; sizes take units.
    over = tomllib.loads(run("limits", "--limits", f, "--limit", "samples.max_fragment_bytes=2MiB", "--max-writers", "9").stdout)
    assert over["samples"]["max_fragment_bytes"] == 2 * 1024 * 1024
    assert over["topics"]["max_writers"] == 9 and over["correlation"]["max_writers"] == 9


@pytest.mark.parametrize("args,message", [
    (["--limit", "samples.max_open=0"], "samples.max_open: must be at least 1"),
    (["--limit", "samples.nope=3"], 'unknown cap "samples.nope"'),
    (["--limit", "samples.max_fragments=99999999999"], "samples.max_fragments: 99999999999 is too large"),
    (["--max-writers", "0"], "--max-writers"),
    # Sizes of 2^64 bytes or more are refused, not saturated to 2^64 - 1 (issue 23, 14).
    (["--limit", "samples.max_fragment_bytes=99999999999999999999KiB"], "too large (at most 2^64 - 1)"),
    (["--limit", "samples.max_fragment_bytes=18446744073709551616"], "samples.max_fragment_bytes"),
    (["--limit", "discovery.max_name_bytes=0"], "discovery.max_name_bytes: must be at least 1"),
])
def test_bad_caps_are_refused_with_the_key_named(writers_capture, args, message):
    cp = run("topics", writers_capture[0], *args, check=False)
    assert cp.returncode == 64, cp  # usage (README: exit codes)
    assert message in cp.stderr, cp.stderr
    assert len(cp.stderr.strip().splitlines()) <= 3, cp.stderr


def test_bad_limits_file_names_the_file_and_key(tmp_path, writers_capture):
    f = tmp_path / "bad.toml"
    f.write_text("[topics]\nmax_writer = 3\n")
    cp = run("topics", writers_capture[0], "--limits", f, check=False)
    assert cp.returncode == 2 and str(f) in cp.stderr and "topics.max_writer" in cp.stderr, cp.stderr  # an input file
    cp = run("topics", writers_capture[0], "--limits", tmp_path / "missing.toml", check=False)
    assert cp.returncode == 2 and "missing.toml" in cp.stderr, cp.stderr


def test_hostile_limits_file_is_quoted_short_and_escaped(tmp_path, writers_capture):
    """A limits file with a 200 KB key or value and raw control bytes: the
    error names the file and quotes at most a short, escaped excerpt (issue 23, 14)."""
    long_key = "k" * 200_000
    for text in (f"[topics]\n{long_key} = 3\n", f"[{long_key}]\nx = 1\n", "[topics]\nmax_writers = \"\x1b]0;pwned\x07" + "9" * 200_000 + "\"\n",
                 "[topics]\nmax_writers = 3 \x1b[2J\n" + "x" * 200_000):
        f = tmp_path / "hostile.toml"
        f.write_bytes(text.encode())
        cp = subprocess.run([ddscope_bin(), "topics", str(writers_capture[0]), "--limits", str(f)], capture_output=True, timeout=60)
        assert cp.returncode == 2, cp.stderr[:2000]
        assert len(cp.stderr) < 2000 and b"\x1b" not in cp.stderr and b"\x07" not in cp.stderr, cp.stderr[:3000]
        assert str(f).encode() in cp.stderr, cp.stderr


def test_topics_writer_cap_from_flag_and_file(tmp_path, writers_capture):
    a = writers_capture[0]
    assert topics_evicted(run("topics", a, "--all", "--format", "json")) == 0
    cp = run("topics", a, "--all", "--format", "json", "--max-writers", "100")
    assert topics_evicted(cp) == 400
    assert "400 writers' statistics evicted" in cp.stderr, cp.stderr
    f = tmp_path / "l.toml"
    f.write_text("[topics]\nmax_writers = 250\n")
    assert topics_evicted(run("topics", a, "--all", "--format", "json", "--limits", f)) == 250


def test_discovery_cap_reaches_dissect(tmp_path):
    # 100 topics, each announced by an SEDP publication and a subscription:
    # 200 endpoints; a cap of 50 forgets 150.
    cap = tmp_path / "topics.pcap"
    hostile.generate("topics", 100, cap)
    cp = run("dissect", cap, "--format", "csv", "--limit", "discovery.max_endpoints=50")
    assert "evicted (caps): 150 discovery endpoints" in cp.stderr, cp.stderr[-2000:]
    full = run("dissect", cap, "--format", "csv")
    assert "discovery endpoints" not in full.stderr, full.stderr[-2000:]


def test_latency_flow_cap(writers_capture):
    a, b = writers_capture
    doc = json.loads(run("latency", a, b, "--format", "json").stdout)
    assert doc["correlation"]["flows_evicted"] == 0, doc["correlation"]
    cp = run("latency", a, b, "--format", "json", "--limit", "correlation.max_flows=100")
    doc = json.loads(cp.stdout)
    assert doc["correlation"]["flows_evicted"] == 400, doc["correlation"]
    assert "400 flows evicted" in cp.stderr, cp.stderr[-2000:]
