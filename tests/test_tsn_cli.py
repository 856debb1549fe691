"""End-to-end checks of `ddscope tsn` through the real binary.

Oracles: thesis Table 4.6 (T_arrive column, given in the seed), seed 004's
CBS worked example, and the CLI contract (exit code != 0 with a one-line
reason naming the file and field)."""
import json
import subprocess


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
