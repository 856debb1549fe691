"""The Prometheus rules we ship (deploy/prometheus/ddscope-rules.yml, issue 26).

Oracles:
  * Prometheus's own `promtool check rules` (syntax, PromQL) and `promtool test rules` over
    tests/prometheus/ddscope-rules.test.yml, whose expected quantiles, ratios and alerts follow by hand
    from the series it feeds;
  * a real `ddscope serve --budget …`: every ddscope metric the rules read is one serve or an agent
    exposes (names from serve's live /metrics, and the agent's registry in crates/export).
"""
import re
import shutil
import subprocess
import time
import urllib.request

from conftest import ddscope_bin, free_port, require_tool

RULES = "deploy/prometheus/ddscope-rules.yml"
TESTS = "tests/prometheus/ddscope-rules.test.yml"


def test_promtool_checks_and_unit_tests_the_rules(repo):
    promtool = require_tool("promtool")
    cp = subprocess.run([promtool, "check", "rules", str(repo / RULES)], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "SUCCESS: 11 rules found" in cp.stdout, cp.stdout
    cp = subprocess.run([promtool, "test", "rules", str(repo / TESTS)], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_the_unit_tests_catch_a_wrong_rule(repo, tmp_path):
    """The rules' tests can fail: a budget alert that ignores the "*" budget, and a loss threshold of 5 %, are caught."""
    promtool = require_tool("promtool")
    (tmp_path / "deploy/prometheus").mkdir(parents=True)
    (tmp_path / "tests/prometheus").mkdir(parents=True)
    shutil.copy(repo / TESTS, tmp_path / TESTS)
    text = (repo / RULES).read_text()
    for broken in (re.sub(r"\n\s*or\n\s*\(\(ddscope:latency_seconds:p99_5m unless.*?\}\)\)\n", "\n", text, flags=re.S),
                   text.replace("loss_ratio_5m > 0.01", "loss_ratio_5m > 0.05")):
        assert broken != text
        (tmp_path / RULES).write_text(broken)
        cp = subprocess.run([promtool, "test", "rules", str(tmp_path / TESTS)], capture_output=True, text=True)
        assert cp.returncode != 0 and "FAILED" in cp.stdout + cp.stderr, cp.stdout + cp.stderr


def test_every_metric_the_rules_read_exists(repo):
    exe = ddscope_bin()
    port = free_port()
    serve = subprocess.Popen([exe, "serve", "--listen", f"127.0.0.1:{port}", "--budget", "/image=20ms", "--budget", "*=50ms"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        text = None
        for _ in range(100):
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert text, "serve's /metrics did not answer"
    finally:
        serve.terminate()
        serve.wait(10)
    served = set(re.findall(r"^# TYPE (\S+) ", text, flags=re.M))
    assert 'ddscope_latency_budget_seconds{topic="/image",layer="message"} 0.02' in text, text[:3000]
    assert 'ddscope_latency_budget_seconds{topic="*",layer="message"} 0.05' in text
    # The agent's families (capture health) are in its registry's source.
    agent_src = (repo / "crates/export/src/prometheus.rs").read_text()
    rules = (repo / RULES).read_text()
    used = set(re.findall(r"(?<![:\w])(ddscope_[a-z_]+)", "\n".join(l for l in rules.splitlines() if not l.lstrip().startswith("#"))))
    assert len(used) == 10, sorted(used)
    for m in sorted(used):
        base = re.sub(r"_(bucket|sum|count)$", "", m)
        assert base in served or f'"{base}"' in agent_src, f"the rules read {m}, which neither serve nor an agent exports"
