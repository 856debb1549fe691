"""End-to-end checks of `ddscope tsn` through the real binary.

Oracles: thesis Table 4.6 (T_arrive column, given in the thesis), Bosk et al.'s
CBS worked example, and the CLI contract (exit code != 0 with a one-line
reason naming the file and field)."""
import json
import os
import resource
import subprocess
import time

import pytest


def test_tas_formula_reproduces_table_4_6_with_2_76_mib(ddscope):
    cp = ddscope("tsn", "tas", "--link-rate", "2.5G", "--cycle", "500us", "--open", "50%",
                 "--message-bytes", "2.76MiB", "--format", "json")
    r = json.loads(cp.stdout)
    assert r["formula_ms"] == 19.5
    assert r["predicted_min_ms"] <= r["predicted_mean_ms"] <= r["predicted_max_ms"]
    assert r["wire"]["wire_bytes"] > r["message_bytes"]


def test_cbs_seed_004_example(ddscope):
    cp = ddscope("tsn", "cbs", "--port-rate", "1G", "--max-frame-bytes", "1542",
                 "--class", "A:reserved=100M,max-frame=1250", "--format", "json")
    a = json.loads(cp.stdout)["classes"][0]
    assert (a["idleslope"], a["sendslope"], a["hicredit"], a["locredit"]) == (100000, -900000, 155, -1125)


def test_simulate_is_deterministic_for_a_seed(ddscope, repo):
    f = repo / "examples/tsn/thesis-tas50-40.toml"
    a = ddscope("tsn", "simulate", f, "--seed", "5", "--duration", "1s", "--format", "json").stdout
    b = ddscope("tsn", "simulate", f, "--seed", "5", "--duration", "1s", "--format", "json").stdout
    assert a == b
    flows = {x["name"]: x for x in json.loads(a)["flows"]}
    assert flows["/image"]["delivered"] == 10


def test_bad_scenario_is_a_one_line_error(ddscope, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[port]]\nname = "p"\nlink_rate = "1G"\n[[topic]]\ntopic = "/x"\nsample_bytes = 10\nrate_hz = 1\nratee = 3\npath = ["p"]\n')
    cp = ddscope("tsn", "simulate", bad, check=False)
    assert cp.returncode != 0
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1, cp.stderr
    assert str(bad) in lines[0] and "ratee" in lines[0] and "topic[0]" in lines[0]


# ---- generated root scripts are data-safe (issue 23, 4) ----------------------------------

# Valid Linux interface names (at most 15 bytes; no '/', ':' or whitespace) that
# a shell would run as commands if written unquoted: each creates the file M in
# the script's working directory.
HOSTILE_IFNAMES = ["$(touch${IFS}M)", "`touch${IFS}M`", "x;touch${IFS}M"]


def hostile_scenario(ifname: str, extra: str = "") -> str:
    return f"""name = "hostile"
duration = "1s"
[[port]]
name = "p"
interface = '{ifname}'
link_rate = "1G"
num_tc = 2
pcp_to_tc = [0, 0, 0, 0, 0, 1, 0, 0]
[[port.cbs]]
tc = 1
reserved = "100M"
[[topic]]
topic = "/image"
sample_bytes = 3000
rate_hz = 10
pcp = 5
path = ["p"]
{extra}
[ptp]
grandmaster = "p"
follower = '{ifname}'
"""


@pytest.fixture
def scratch_ns(needs_root):
    """A network namespace of our own (deleted afterwards)."""
    name = f"ddtsn-{os.getpid() % 100000}-{os.urandom(2).hex()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    yield name
    subprocess.run(["ip", "netns", "del", name], capture_output=True)


@pytest.mark.parametrize("ifname", HOSTILE_IFNAMES)
def test_generated_scripts_run_no_command_from_a_scenario(ddscope, tmp_path, scratch_ns, ifname):
    """Scripts generated from a scenario whose interface names are shell code
    are run with /bin/sh in a scratch namespace, where a device of that very
    name exists: the marker file the code would create never appears
    (oracle: /bin/sh, which reads each quoted word back as the value)."""
    assert len(ifname.encode()) <= 15
    sc = tmp_path / "hostile.toml"
    sc.write_text(hostile_scenario(ifname))
    subprocess.run(["ip", "-n", scratch_ns, "link", "add", ifname, "type", "veth", "peer", "name", "peer0"], check=True)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    scripts = []
    for emit in ("tc", "dds", "ptp"):
        out = tmp_path / emit
        ddscope("tsn", "config", sc, "--emit", emit, "--out", out)
        scripts += [p for p in out.iterdir() if p.suffix == ".sh"]
    assert {p.name for p in scripts} == {"tc.sh", "dds-priority.sh", "ptp-commands.sh"}
    tc_line = ddscope("tsn", "cbs", "--port-rate", "1G", "--max-frame-bytes", "1542", "--class", "A:reserved=100M,max-frame=1250", "--dev", ifname).stdout
    (tmp_path / "cbs.sh").write_text("\n".join(l for l in tc_line.splitlines() if l.startswith("tc ")) + "\n")
    scripts.append(tmp_path / "cbs.sh")
    for script in scripts:
        text = script.read_text()
        # ptp-commands.sh starts daemons: only the words are checked there, not run.
        body = text if script.name != "ptp-commands.sh" else "\n".join(
            f"printf '%s\\n' {l.split(' -s ', 1)[1].split(' ', 1)[0]}" for l in text.splitlines() if l.startswith("phc2sys"))
        cp = subprocess.run(["ip", "netns", "exec", scratch_ns, "timeout", "20", "/bin/sh", "-c", body], cwd=run_dir, capture_output=True, text=True)
        assert not (run_dir / "M").exists(), f"{script.name} ran a command from the scenario:\n{text}\n{cp.stderr}"
        if script.name == "ptp-commands.sh":
            # phc2sys -s gets the grandmaster's and the follower's interface as one word each.
            assert cp.stdout.splitlines() == [ifname, ifname], cp.stdout
    # The tc lines reached the device of that name (tc's own error, not the shell's).
    cp = subprocess.run(["ip", "netns", "exec", scratch_ns, "/bin/sh", str(tmp_path / "cbs.sh")], cwd=run_dir, capture_output=True, text=True)
    assert "Cannot find device" not in cp.stderr, cp.stderr


@pytest.mark.parametrize("field,value,message", [
    ("interface", "enp1s0; touch /tmp/x #", "port[0] (\"p\"): interface: \"enp1s0; touch /tmp/x #\" is not a Linux interface name"),
    ("interface", "sixteen-bytes-xx", "longer than 15 bytes"),
    ("interface", "a/b", "'/', ':', whitespace"),
    ("interface", "..", "are not interface names"),
    ("follower", "eth0\nrm", "ptp.follower"),
])
def test_scenario_with_an_invalid_interface_name_is_refused(ddscope, tmp_path, field, value, message):
    text = hostile_scenario("eth0")
    text = text.replace("interface = 'eth0'", f"interface = {value!r}".replace("'", '"') if "\n" not in value else "interface = \"eth0\"")
    if field == "follower":
        text = text.replace("follower = 'eth0'", 'follower = "eth0\\nrm"')
    sc = tmp_path / "bad.toml"
    sc.write_text(text)
    for verb in (["config", sc, "--emit", "tc"], ["simulate", sc]):
        cp = ddscope("tsn", *verb, check=False)
        assert cp.returncode != 0 and message in cp.stderr and cp.stderr.count("\n") == 1, cp.stderr


def test_multicast_address_and_cbs_dev_are_refused_when_not_what_they_claim(ddscope, tmp_path):
    sc = tmp_path / "mc.toml"
    sc.write_text(hostile_scenario("eth0", 'multicast = "239.255.0.1; touch M"'))
    cp = ddscope("tsn", "config", sc, "--emit", "dds", check=False)
    assert cp.returncode != 0 and 'multicast "239.255.0.1; touch M": not an IPv4 multicast address' in cp.stderr, cp.stderr
    cp = ddscope("tsn", "cbs", "--port-rate", "1G", "--max-frame-bytes", "1542", "--class", "A:reserved=100M,max-frame=1250", "--dev", "eth0 x", check=False)
    assert cp.returncode != 0 and "--dev: \"eth0 x\" is not a Linux interface name" in cp.stderr, cp.stderr
    cp = ddscope("tsn", "cbs", "--port-rate", "1G", "--max-frame-bytes", "1542", "--class", "A:reserved=100M,max-frame=1250", "--handle", "1;id", check=False)
    assert cp.returncode != 0 and "--handle" in cp.stderr, cp.stderr


# ---- TSN inputs beyond what can be computed (issue 23, 10) -------------------------------

def run_bounded(args, seconds=20, mem_mb=512):
    """ddscope ARGS under an address-space limit, killed after `seconds`: (exit code, stderr, elapsed s)."""
    from conftest import ddscope_bin

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))

    t = time.monotonic()
    cp = subprocess.run([ddscope_bin(), *map(str, args)], capture_output=True, text=True, timeout=seconds, preexec_fn=limit)
    return cp.returncode, cp.stderr, time.monotonic() - t


@pytest.mark.parametrize("name,scenario_extra,args,message", [
    ("1h of a 1G burst", '[[burst]]\nname = "iperf3"\nrate = "1G"\npayload_bytes = 1400\npacing = "15ms"\npath = ["p"]\n', ["--duration", "1h"], "simulation too"),
    ("1 ns pacing", '[[burst]]\nname = "iperf3"\nrate = "1G"\npayload_bytes = 1400\npacing = "1ns"\npath = ["p"]\n', [], "simulation too"),
    ("10^15-byte sample", '[[topic]]\ntopic = "/huge"\nsample_bytes = 1000000000000000\nrate_hz = 1\npath = ["p"]\n', [], "over the model's limit of 1073741824 bytes"),
    ("10 days", "", ["--duration", "240h"], "--duration 240h: must lie between 0 and 24h"),
])
def test_simulate_refuses_what_it_cannot_compute(tmp_path, name, scenario_extra, args, message):
    """Before the limits, these aborted ("memory allocation failed") or ran for
    17 minutes. Now each is refused within seconds and a 512 MB address-space
    limit, with the limit named."""
    sc = tmp_path / "big.toml"
    sc.write_text(hostile_scenario("eth0").replace("[ptp]", scenario_extra + "\n[ptp]"))
    code, err, secs = run_bounded(["tsn", "simulate", sc, *args])
    assert code != 0 and message in err and err.count("\n") == 1, err
    assert secs < 10, secs
    if "sample" in name:
        code, err, _ = run_bounded(["tsn", "config", sc, "--emit", "tc"])
        assert code != 0 and message in err, err


def test_tas_and_config_refuse_huge_messages_and_config_takes_an_hour(tmp_path):
    code, err, secs = run_bounded(["tsn", "tas", "--message-bytes", "1000000000000000"])
    assert code != 0 and "over the model's limit of 1073741824 bytes" in err and secs < 10, err
    code, err, _ = run_bounded(["tsn", "tas", "--message-bytes", "1GiB", "--phases", "1000"])
    assert code != 0 and "frame steps, over the limit of 100000000" in err, err
    # config does not simulate: an hour-long scenario is fine for it.
    sc = tmp_path / "hour.toml"
    sc.write_text(hostile_scenario("eth0").replace('duration = "1s"', 'duration = "1h"'))
    code, err, secs = run_bounded(["tsn", "config", sc, "--emit", "tc"])
    assert code == 0 and secs < 10, err


def test_toml_errors_quote_input_short_and_escaped(tmp_path):
    """A scenario line of 200 KB or with raw control bytes is not echoed back
    (issue 23, 14): one line, short, no ESC or BEL byte."""
    from conftest import ddscope_bin
    for text in ('name = "x"\nduration = 1 ' + "z" * 200_000 + "\n", 'name = "\x1b]0;pwned\x07\x1b[2J"\nbogus\x1b[2J = 1\n',
                 "k" * 200_000 + " = 1\n", '[[port]]\nname = "p"\nlink_rate = "1G"\nfield_' + "q" * 200_000 + " = 1\n"):
        f = tmp_path / "bad.toml"
        f.write_bytes(text.encode())
        cp = subprocess.run([ddscope_bin(), "tsn", "simulate", str(f)], capture_output=True, timeout=60)
        assert cp.returncode != 0 and len(cp.stderr) < 1000 and cp.stderr.count(b"\n") == 1, cp.stderr[:3000]
        assert b"\x1b" not in cp.stderr and b"\x07" not in cp.stderr, cp.stderr
