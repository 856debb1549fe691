"""Issue 24: what a new user installs and reads — the stripped binary, shell
completions, and the tables the demo prints (units in headers, `-` for no
value, empty columns named with a reason, latency layers explained)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import REPO, ddscope_bin

EXAMPLE = REPO / "examples" / "captures" / "simple-robotic-cyclone"


def test_release_binary_is_stripped():
    """No debug sections and no symbol table in what users install (the profiling profile keeps them)."""
    readelf = shutil.which("readelf")
    assert readelf, "readelf (binutils) is needed"
    sections = subprocess.run([readelf, "-S", "-W", ddscope_bin()], capture_output=True, text=True, check=True).stdout
    assert ".debug_info" not in sections and ".symtab" not in sections, sections


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completions(ddscope, shell, tmp_path):
    cp = ddscope("completions", shell)
    long_by = "-l by" if shell == "fish" else "--by"  # fish names long options without dashes
    assert "ddscope" in cp.stdout and "topics" in cp.stdout and long_by in cp.stdout, cp.stdout[:500]
    if shell == "bash":
        f = tmp_path / "ddscope.bash"
        f.write_text(cp.stdout)
        subprocess.run(["bash", "-n", str(f)], check=True)
        # the script completes a subcommand
        probe = f'source {f}; COMP_WORDS=(ddscope top); COMP_CWORD=1; _ddscope ddscope top ddscope; printf "%s\\n" "${{COMPREPLY[@]}}"'
        out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout.split()
        assert "topics" in out, out
    assert ddscope("completions", "tcsh", check=False).returncode != 0
    # into a pipe closed early: no panic
    p = subprocess.run(f"{ddscope_bin()} completions {shell} | head -n 1", shell=True, capture_output=True, text=True)
    assert "panicked" not in p.stderr, p.stderr


def test_topics_table_reads_for_a_new_user(ddscope):
    cp = ddscope("topics", EXAMPLE / "pc1.pcapng.gz")
    lines = cp.stdout.splitlines()
    header = lines[0].split()
    for h in ("topic", "samples", "span_s", "rate_hz", "rate_kind", "bandwidth_Mbit_s", "mean_size_B", "max_size_B"):
        assert h in header, (h, header)
    # every row has a value in every column (a dash where there is none)
    rows = [l.split() for l in lines[2:] if l.startswith("/")]
    assert rows and all(len(r) == len(header) for r in rows), (header, rows)
    by = {r[0]: dict(zip(header, r)) for r in rows}
    assert by["/drive"]["rate_kind"] == "steady" and abs(float(by["/drive"]["rate_hz"]) - 29.0) < 0.1
    assert by["/raw_image"]["rate_kind"] == "no_samples" and by["/raw_image"]["rate_hz"] == "-"
    # columns without a value anywhere are named, with the reason
    note = lines[-1]
    assert note.startswith("(no value in any row, not shown:") and "writer_nodes" in note and "ros_discovery_info" in note, note
    assert "pcp (no 802.1Q tags)" in note, note


def test_latency_tables_explain_their_layers(ddscope):
    out = ddscope("latency", EXAMPLE).stdout
    assert "layers (times in ms" in out, out
    for layer, words in (("first_first", "first on the wire at the sender -> first at the receiver"),
                         ("last_last", "complete at the sender -> complete at the receiver"),
                         ("message", "DDS message latency")):
        assert any(l.strip().startswith(layer) and words in l for l in out.splitlines()), (layer, out)
    assert "period_ms: median interval" in out and "repaired_mean_ms (no sample was repaired)" in out, out
