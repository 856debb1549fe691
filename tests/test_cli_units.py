"""Numbers that look exact and are not (issue 36, item 6): a duration or rate without a unit is
refused with a one-line hint, a percentage is accepted as 50% and 50, and a budget or --topic that
matches no flow is said (and fails --fail-on-incidents) instead of passing CI as "0 broken".
Oracle: the bundled example's own topics (/drive, /image), and the tsn formula's result for 50 %
being the one for 50% (the same command, typed both ways)."""
import subprocess

import pytest

from conftest import REPO, ddscope_bin

EXAMPLE = REPO / "examples" / "captures" / "simple-robotic-fastdds"


def ddscope(*args):
    return subprocess.run([ddscope_bin(), *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args, hint", [
    (["latency", EXAMPLE, "--budget", "/image=12"], "12 what? e.g. 12ms or 12s"),
    (["latency", EXAMPLE, "--window", "5"], "5 what? e.g. 5ms or 5s"),
    (["latency", EXAMPLE, "--period", "100"], "100 what? e.g. 100ms or 100s"),
    (["latency", EXAMPLE, "--offset", "pc2=37"], "37 what? e.g. 37ms or 37s"),
    (["tsn", "tas", "--link-rate", "2.5G", "--cycle", "500", "--open", "50%", "--message-bytes", "2764800"], "500 what?"),
    (["tsn", "tas", "--link-rate", "2500", "--cycle", "500us", "--open", "50%", "--message-bytes", "2764800"], "2500 what? e.g. 2500M"),
])
def test_a_number_without_its_unit_is_refused_with_a_hint(args, hint):
    cp = ddscope(*args)
    assert cp.returncode != 0 and hint in cp.stderr, cp.stderr
    assert len([line for line in cp.stderr.splitlines() if "what?" in line]) == 1, cp.stderr


def test_a_percentage_reads_the_same_with_and_without_its_sign():
    base = ["tsn", "tas", "--link-rate", "2.5G", "--cycle", "500us", "--message-bytes", "2764800"]
    with_sign, without = ddscope(*base, "--open", "50%"), ddscope(*base, "--open", "50")
    assert with_sign.returncode == 0 and without.returncode == 0, without.stderr
    assert with_sign.stdout == without.stdout and with_sign.stdout.strip()
    one = ddscope(*base, "--open", "1")
    assert one.returncode != 0 and "1% or 100%" in one.stderr, one.stderr


def test_a_budget_or_topic_matching_no_flow_is_said_and_fails_ci():
    typo = ddscope("latency", EXAMPLE, "--budget", "/imgae=12ms", "--fail-on-incidents")
    assert typo.returncode == 1, typo.stderr
    assert "--budget /imgae matches no flow" in typo.stderr and "/drive, /image" in typo.stderr, typo.stderr
    assert "FAIL: --budget /imgae judged nothing" in typo.stderr, typo.stderr
    # Without --fail-on-incidents: a warning, exit 0.
    warned = ddscope("latency", EXAMPLE, "--budget", "/imgae=12ms")
    assert warned.returncode == 0 and "matches no flow" in warned.stderr, warned.stderr
    # A glob that matches is fine.
    ok = ddscope("latency", EXAMPLE, "--budget", "/im*=50ms", "--fail-on-incidents")
    assert ok.returncode == 0 and "matches no flow" not in ok.stderr, ok.stderr
    topic = ddscope("latency", EXAMPLE, "--topic", "/nothing")
    assert "--topic /nothing matches no flow" in topic.stderr, topic.stderr
