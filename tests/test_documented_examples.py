"""Every example command in `--help`, the README and docs/ runs (issue 38): collected from the
`Examples:` section of every subcommand's --help and from every fenced code block of README.md
and docs/*.md (lines starting `ddscope` or `sudo ddscope`, continuation lines joined), with the
files they name mapped to bundled data (examples/captures/ros2-two-hosts: a real two-host ROS 2
run with both hosts' captures and traces; the paths below), and run in a fresh folder:

  * commands that read files run to the end and must exit 0 (1 where the example itself says
    "exit 1 on a violation"); outputs go to the folder;
  * commands that capture, serve, or run a lab (root, interfaces, minutes) are checked by their
    command line: the same arguments with `--help` appended must parse (clap checks every option
    and value before it prints help), and a scenario they name under examples/ must pass
    `ddscope lab check`.

The oracle is the binary itself refusing a stale option, a missing file or a wrong value; a
line naming a file the mapping does not know fails, so a new example comes with bundled data
or a mapping here. Lines of diagrams inside code blocks (`ddscope live ── …`) are counted and
left out."""
from __future__ import annotations

import os
import re
import shlex
import subprocess

import pytest

from conftest import REPO, ddscope_bin

EX = "examples/captures/ros2-two-hosts"
CARET = REPO.parent / "shared" / "traces" / "caret-galactic" / "end_to_end_sample"

# files the examples name -> bundled data (relative to the run folder, where `examples` is linked)
INPUTS = {
    "pc1.pcapng": f"{EX}/pc1.pcapng.gz", "pc2.pcapng": f"{EX}/pc2.pcapng.gz",
    "big.pcapng": f"{EX}/pc1.pcapng.gz", "CAPTURE": f"{EX}/pc1.pcapng.gz",
    "pub.pcap": f"{EX}/pc1.pcapng.gz", "sub.pcap": f"{EX}/pc2.pcapng.gz",
    "/tmp/simple/pc1.pcapng": f"{EX}/pc1.pcapng.gz", "lab-out/run/pc1.pcapng": f"{EX}/pc1.pcapng.gz",
    "lab-out/run/pc2.pcapng": f"{EX}/pc2.pcapng.gz", "/tmp/sr/pc1.pcapng": f"{EX}/pc1.pcapng.gz",
    "~/.ros/tracing/s1": f"{EX}/pc1.lttng", "s1-pc1": f"{EX}/pc1.lttng", "s1-pc2": f"{EX}/pc2.lttng",
    "pc2-s1": f"{EX}/pc2.lttng",
    # CARET's own sample (../shared/traces)
    "end_to_end_sample/cyclonedds": str(CARET / "cyclonedds"),
    "end_to_end_sample/architecture_modified.yaml": str(CARET / "architecture_modified.yaml"),
}
RUN_DIRS = ["lab-out/run1", "lab-out/run", "out/run1", "out/traced-run", "lab-out/load0", "lab-out/load40", "lab-out/load95",
            "out/baseline-0", "out/baseline-40", "out/baseline-95", "lab-out/overload", "lab-out/tagged", "RUN",
            "/tmp/sr-1g", "/tmp/sr", "/tmp/doc25", "/tmp/doc1g", "/tmp/simple"]
# commands that capture, serve or run a lab: checked by their command line
LONG = re.compile(r"^ddscope (serve|live|agent|lab (run|up|down)|lab sweep (?!.*--list))")


def help_texts() -> list[tuple[list[str], str]]:
    """Every (sub)command's --help as a 100-column terminal shows it (clap wraps longer lines)."""
    b = ddscope_bin()
    out, todo = [], [[]]
    while todo:
        c = todo.pop()
        h = subprocess.run([b, *c, "--help"], capture_output=True, text=True, check=True, env=dict(os.environ, COLUMNS="100")).stdout
        out.append((c, h))
        if "Commands:" in h:
            subs = re.findall(r"^  (\w[\w-]*)\s", h.split("Commands:")[1].split("\n\n")[0], re.M)
            todo += [c + [s] for s in subs if s != "help"]
    return out


def help_examples() -> list[tuple[str, str]]:
    out = []
    for c, h in HELP:
        if "Examples:" in h:
            out += [(" ".join(["ddscope", *c, "--help"]), l) for l in joined(h.split("Examples:", 1)[1].split("\n\n")[0].splitlines())]
    return out


def joined(lines) -> list[str]:
    out, cur = [], ""
    for l in lines:
        s = re.sub(r"^\$ ", "", l.strip())
        if cur:
            cur += " " + s
        elif re.match(r"(sudo )?ddscope ", s):
            cur = s
        else:
            continue
        if cur.endswith("\\"):
            cur = cur[:-1].rstrip()
            continue
        out.append(cur)
        cur = ""
    return out


DIAGRAM = re.compile(r"[│└┌┐┘├─►▼]")


def doc_examples() -> list[tuple[str, str]]:
    """Commands of the fenced code blocks; a block drawn with box characters is a diagram."""
    out = []
    for f in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        block: list[str] | None = None
        for l in f.read_text().splitlines():
            if l.strip().startswith("```"):
                if block is not None and not any(DIAGRAM.search(b) for b in block):
                    out += [(f.relative_to(REPO).as_posix(), c) for c in joined(block)]
                block = None if block is not None else []
            elif block is not None:
                block.append(l)
    return out


def strip_comment(cmd: str) -> tuple[str, str]:
    """The command and its trailing `# comment` (a `#` inside quotes is kept)."""
    lex = shlex.shlex(cmd, posix=True, punctuation_chars=False)
    lex.commenters = ""
    quote, out = None, []
    for i, ch in enumerate(cmd):
        if ch in "'\"" and (quote is None or quote == ch):
            quote = None if quote else ch
        if ch == "#" and quote is None and (i == 0 or cmd[i - 1] == " "):
            return cmd[:i].rstrip(), cmd[i + 1:].strip()
    return cmd, ""


def mapped(cmd: str, warped: dict[str, str]) -> str:
    cmd = re.sub(r"^sudo ", "", cmd)
    cmd = cmd.split(" | ")[0].replace(" &", "")  # a pipe into jq, a job in the background
    cmd = cmd.replace("$E", EX).replace('"$TOKEN"', "$TOKEN")
    cmd, _, redirect = cmd.partition(" > ")
    words = shlex.split(cmd)
    out = []
    for w in words:
        key, eq, val = w.partition("=")
        for src, dst in list(warped.items()) + list(INPUTS.items()) + [(d, EX) for d in RUN_DIRS]:
            if w == src:
                w = dst
                break
            if eq and val == src:
                w = f"{key}={dst}"
                break
            if w.startswith(src + ":"):  # architecture.yaml:end_to_end
                w = dst + w[len(src):]
                break
        out.append(w)
    line = shlex.join(out).replace("'$TOKEN'", '"$TOKEN"')
    return line + (" > " + redirect.strip() if redirect else "")


HELP = help_texts()
EXAMPLES = help_examples() + doc_examples()


def test_help_examples_fit_a_100_column_terminal():
    """clap wraps --help at the terminal's width (100 columns without one): an example line
    longer than that breaks in the middle of an option, and the copy a user pastes fails.
    Long examples continue with `\\` instead."""
    long = [(" ".join(c), l) for c, h in HELP if "Examples:" in h
            for l in h.split("Examples:", 1)[1].split("\n\n")[0].splitlines() if len(l) > 99]
    assert not long, long
    # and no example is cut by a wrap: every line of an Examples block is a command or its continuation
    for c, h in HELP:
        if "Examples:" not in h:
            continue
        lines = h.split("Examples:", 1)[1].split("\n\n")[0].splitlines()
        lines = [l for l in lines if l.startswith("  ")]  # the examples are indented, prose after them is not
        for prev, l in zip([""] + lines, lines):
            assert re.search(r"(^|[\s(])ddscope ", l) or prev.rstrip().endswith("\\"), (" ".join(c), l)


def test_the_examples_are_found():
    # the sources all hold examples (a change that hides them from this test fails here)
    sources = {s.split()[1] if s.startswith("ddscope") else s for s, _ in EXAMPLES}
    for s in ("latency", "dissect", "topics", "report", "flows", "tsn", "lab", "serve", "agent", "live", "README.md", "docs/latency.md", "docs/tsn.md"):
        assert s in sources, (s, sorted(sources))
    assert len(EXAMPLES) > 150, len(EXAMPLES)


@pytest.mark.parametrize("source,example", EXAMPLES, ids=[f"{s}:{e[:70]}" for s, e in EXAMPLES])
def test_documented_example_runs(source, example, tmp_path):
    cmd, comment = strip_comment(example)
    if "──" in cmd or "─►" in cmd:
        pytest.skip("a diagram, not a command")
    if "end_to_end_sample/" in cmd and not CARET.is_dir():
        pytest.skip("the shared CARET traces are not here")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    (tmp_path / "budgets.txt").write_text("/image=12ms\n")
    env = dict(os.environ, TOKEN="t0ken", E=EX, HOME=str(tmp_path))
    for d in (".local/share/bash-completion/completions", ".zfunc", ".config/fish/completions"):
        (tmp_path / d).mkdir(parents=True)
    # "pc2 is TAI, pc1 UTC": a copy of pc2's capture 37 s ahead makes the example's premise true
    warped = {}
    if re.search(r"--(clock-)?offset (pc2=\+)?37s", cmd):
        (tmp_path / "tai").mkdir()
        tai = tmp_path / "tai" / "pc2.pcapng"  # the capture keeps its name, pc2
        subprocess.run(["editcap", "-t", "37", str(REPO / INPUTS["pc2.pcapng"]), str(tai)], check=True, capture_output=True)
        warped["pc2.pcapng"] = str(tai)
    line = mapped(cmd, warped)
    unknown = [w for w in shlex.split(line)[1:] if re.fullmatch(r"[\w./~-]+\.(pcapng|pcap|gz|toml|yaml|txt)", w)
               and not w.startswith(("examples/", "/")) and not (tmp_path / w).exists()
               and not re.search(r"(^|\s)(-o|--html|--rows|--out|--write|>)\s+" + re.escape(w), line) and "limits.toml" not in w]
    assert not unknown, f"{source}: `{example}` names {unknown}: map them to bundled data in this test"
    bin_ = ddscope_bin()
    if LONG.match(line):
        # the command line parses (every option and value), the scenario it names is valid
        args = shlex.split(line)[1:]
        cp = subprocess.run([bin_, *args, "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert cp.returncode == 0, f"{source}: `{example}` does not parse: {cp.stderr.strip()[-800:]}"
        for s in (a for a in args if a.startswith("examples/lab/") and a.endswith(".toml")):
            check = ["lab", "sweep", s, "--list"] if args[:2] == ["lab", "sweep"] else ["lab", "check", s]
            cp = subprocess.run([bin_, *check], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
            assert cp.returncode == 0, f"{source}: `{example}`: {s}: {cp.stderr.strip()[-800:]}"
        return
    if "limits.toml" in line and not line.startswith("ddscope limits >"):
        subprocess.run(f"{bin_} limits > limits.toml", shell=True, cwd=tmp_path, check=True)
    shell = line.replace("ddscope", f"'{bin_}'", 1)
    cp = subprocess.run(["bash", "-c", shell], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    # exit 1 is the verdict of a check: where the example says so, `tsn check` (a violation) and
    # --fail-on-incidents (a broken budget) on data they were not written for
    ok = {0, 1} if "exit 1" in comment or line.startswith("ddscope tsn check") or "--fail-on-incidents" in line else {0}
    assert cp.returncode in ok, f"{source}: `{example}` ({shell}) exited {cp.returncode}: {cp.stderr.strip()[-1500:]}"
    for m in re.finditer(r"(?:-o|--html|--rows|>)\s+(\S+)", line):
        out = m[1] if m[1].startswith("/") else str(tmp_path / os.path.expanduser(m[1]).replace(str(tmp_path) + "/", ""))
        p = os.path.expanduser(m[1]) if m[1].startswith("~") else out
        p = p.replace(os.path.expanduser("~"), str(tmp_path)) if m[1].startswith("~") else p
        assert os.path.exists(p.replace("~", str(tmp_path))) or os.path.exists(os.path.join(tmp_path, m[1].replace("~/", ""))), f"{source}: `{example}` wrote no {m[1]}"
