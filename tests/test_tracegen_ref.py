"""ddslab-tracegen's realistic scenarios against an independent reference join.

The generator (`ddslab-tracegen --scenario NAME`, lab/tracegen/scenario.c) behaves like
rclcpp / rcl / rmw of Humble and Jazzy and writes a ground truth of what it did (every
publish and take). Each scenario is recorded like `ros2 trace` (lab/tracegen/record.sh),
joined by tests/ros2ref/refjoin.py (Python + babeltrace2's bt2, written from the
tracepoint definitions only), and judged against the truth by tests/ros2ref/truthcheck.py:
  * every take refjoin joins is joined to the right publish (publisher pid, node, topic,
    and the publisher's N-th publish); none to a /rosout or rmw-internal publish;
  * ambiguous only where the truth shows two publishers' windows overlapping, and every
    other take joined (but Humble's intra-process takes, whose publish is not traced);
  * publishes by class, rmw-internal takes, takes without callback and every event
    count equal to the generator's.
And on the real CARET traces of ../shared/traces/caret-galactic (never copied here): the
publishes and callbacks the CARET authors' notebooks show.

Needs root (an LTTng UST session), lttng-tools, python3-bt2 (Debian's /usr/bin/python3)
and the lab build (cmake -S lab -B lab/build && cmake --build lab/build); skips with the
reason otherwise. The CARET tests need only python3-bt2 and the shared traces.
"""
from __future__ import annotations

import collections
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, have_root

SYSTEM_PYTHON = "/usr/bin/python3"  # python3-bt2 is installed for Debian's interpreter
TRACEGEN = REPO / "lab" / "build" / "ddslab-tracegen"
RECORD = REPO / "lab" / "tracegen" / "record.sh"
REFJOIN = REPO / "tests" / "ros2ref" / "refjoin.py"
sys.path.insert(0, str(REPO / "tests" / "ros2ref"))
import truthcheck  # noqa: E402


def _shared_traces() -> pathlib.Path:
    for c in (os.environ.get("DDSCOPE_SHARED_TRACES"), REPO.parent / "shared" / "traces", "/work/shared/traces"):
        if c and pathlib.Path(c).is_dir():
            return pathlib.Path(c)
    return REPO.parent / "shared" / "traces"


CARET = _shared_traces() / "caret-galactic"


def _bt2_missing() -> str | None:
    if not pathlib.Path(SYSTEM_PYTHON).exists():
        return f"{SYSTEM_PYTHON} not found (python3-bt2 is installed for Debian's interpreter)"
    cp = subprocess.run([SYSTEM_PYTHON, "-c", "import bt2"], capture_output=True, text=True)
    if cp.returncode != 0:
        return "python3-bt2 is not importable by /usr/bin/python3 (Debian: apt install python3-bt2)"
    return None


def _recording_missing() -> str | None:
    why = _bt2_missing()
    if why:
        return why
    if not have_root():
        return "recording needs root (an LTTng UST session; CI runs as root)"
    if shutil.which("lttng") is None or shutil.which("lttng-sessiond") is None:
        return "lttng-tools is not installed (Debian: apt install lttng-tools liblttng-ust-dev)"
    libs = [REPO / "lab" / "build" / f"libddslab-ros2tp-{d}.so" for d in ("humble", "jazzy")]
    if not TRACEGEN.exists() or not all(p.exists() for p in libs):
        return "the lab is not built: cmake -S lab -B lab/build -DCMAKE_BUILD_TYPE=Release && cmake --build lab/build"
    return None


def _build_missing() -> str | None:
    if not TRACEGEN.exists():
        return "the lab is not built: cmake -S lab -B lab/build -DCMAKE_BUILD_TYPE=Release && cmake --build lab/build"
    return None


needs_build = pytest.mark.skipif(_build_missing() is not None, reason=str(_build_missing()))
needs_recording = pytest.mark.skipif(_recording_missing() is not None, reason=str(_recording_missing()))
needs_bt2 = pytest.mark.skipif(_bt2_missing() is not None, reason=str(_bt2_missing()))


def refjoin(trace, *args, timeout=600) -> list[dict]:
    cp = subprocess.run([SYSTEM_PYTHON, str(REFJOIN), str(trace), *args], capture_output=True, text=True,
                        timeout=timeout)
    assert cp.returncode == 0, f"refjoin.py {trace} {' '.join(args)} exited {cp.returncode}:\n{cp.stderr}"
    return [json.loads(l) for l in cp.stdout.splitlines() if l.strip()]


def summary_of(lines):
    return next(l["summary"] for l in lines if "summary" in l)


class Run:
    def __init__(self, trace, truth, stdout, scenario, distro, rmw):
        self.trace, self.truth, self.stdout = trace, truth, stdout
        self.scenario, self.distro, self.rmw = scenario, distro, rmw
        self._ref = None
        self._report = None

    @property
    def ref(self):
        if self._ref is None:
            self._ref = refjoin(self.trace)
        return self._ref

    @property
    def report(self):
        if self._report is None:
            tg = [l for l in self.stdout if "events" in l]
            self._report = truthcheck.check(self.truth, self.ref, tg)
        return self._report

    def takes(self, **match):
        return [t for t in self.ref if "summary" not in t and all(t.get(k) == v for k, v in match.items())]

    def chains(self, path):
        return [c for c in refjoin(self.trace, "--path", ",".join(path)) if "summary" not in c]


_RUNS: dict = {}


def record(tmp_path_factory, scenario, distro, rmw, *extra) -> Run:
    key = (scenario, distro, rmw, extra)
    if key not in _RUNS:
        d = tmp_path_factory.mktemp(f"{scenario}-{distro}-{rmw}")
        trace, truth = d / "trace", d / "truth.jsonl"
        cp = subprocess.run([str(RECORD), str(trace), "--", str(TRACEGEN), "--scenario", scenario, "--distro",
                             distro, "--rmw", rmw, "--truth", str(truth), *extra],
                            capture_output=True, text=True, timeout=300)
        assert cp.returncode == 0, f"recording {key} failed:\n{cp.stdout}\n{cp.stderr}"
        out = [json.loads(l) for l in cp.stdout.splitlines() if l.startswith("{")]
        _RUNS[key] = Run(trace, truthcheck.load_jsonl(str(truth)), out, scenario, distro, rmw)
    return _RUNS[key]


def assert_clean(run: Run):
    rep = run.report
    assert not rep["errors"], (f"{run.scenario} {run.distro} {run.rmw}: {len(rep['errors'])} errors:\n"
                               + "\n".join(rep["errors"][:20]) + f"\npairs: {rep['pairs']}")
    print(f"{run.scenario} {run.distro} {run.rmw}: truth {rep['truth']} refjoin {rep['refjoin']} pairs {rep['pairs']}")
    return rep


CASES = [
    ("relay3", "humble", "fastrtps"), ("relay3", "jazzy", "cyclonedds"),
    ("pingpong", "humble", "cyclonedds"), ("pingpong", "jazzy", "fastrtps"),
    ("multipub", "humble", "fastrtps"), ("multipub", "jazzy", "cyclonedds"),
    ("intra", "humble", "fastrtps"), ("intra", "jazzy", "fastrtps"),
    ("service", "humble", "cyclonedds"), ("service", "jazzy", "fastrtps"),
    ("killed", "humble", "fastrtps"), ("killed", "jazzy", "cyclonedds"),
    ("all", "humble", "fastrtps"), ("all", "humble", "cyclonedds"),
    ("all", "jazzy", "fastrtps"), ("all", "jazzy", "cyclonedds"),
]


@needs_recording
@pytest.mark.parametrize("scenario,distro,rmw", CASES, ids=["-".join(c) for c in CASES])
def test_scenario_against_truth(tmp_path_factory, scenario, distro, rmw):
    run = record(tmp_path_factory, scenario, distro, rmw)
    rep = assert_clean(run)
    pairs, summ = rep["pairs"], summary_of(run.ref)
    truth_takes = [t for t in run.truth if t["kind"] == "take" and not t["internal"]]
    assert pairs["takes"] == len(truth_takes) > 0
    # what every scenario has, as real ROS 2 does
    names = summ["events_by_name"]
    for ev in ("rcl_node_init", "rcl_publisher_init", "rcl_service_init", "rclcpp_service_callback_added",
               "rmw_take", "callback_start", "rclcpp_executor_execute"):
        assert names.get(ev, 0) > 0, ev
    assert summ["publishes"]["internal"] > 0 and summ["internal_takes"] > 0
    rosout = summ["publishes"].get("unresolved" if distro == "humble" else "rosout", 0)
    assert rosout > 0
    if distro == "humble":  # rcl's stack copies: no /rosout rcl_publish resolves by its handle
        assert "rosout" not in summ["publishes"]
    fastrtps_internal_inits = names.get("rmw_publisher_init", 0) - names.get("rcl_publisher_init", 0)
    assert fastrtps_internal_inits == (len({t["pid"] for t in run.truth if t["kind"] == "process"})
                                       if rmw == "fastrtps" else 0)
    # joins by distro: exact on Jazzy, by window on Humble
    if distro == "jazzy":
        assert pairs.get("window", 0) == 0 and pairs.get("ambiguous", 0) == 0
    else:
        assert pairs.get("exact", 0) == 0
    # a topic with one publisher: every take joined
    publishers = collections.defaultdict(set)
    for p in run.truth:
        if p["kind"] == "publish" and not p["internal"]:
            publishers[p["topic"]].add((p["pid"], p["node"]))
    for t in run.takes(internal=False):
        if len(publishers[t["topic"]]) == 1 and not (t["intra"] and distro == "humble"):
            assert t["join"] in ("exact", "window", "intra"), t


@needs_recording
def test_multipub_ambiguity(tmp_path_factory):
    """Several publishers of one topic, two of them in one process: on Humble some takes
    are genuinely ambiguous (two publishers' windows contain their source timestamp) and
    are counted as such, never joined; on Jazzy the timestamps join every take exactly."""
    hum = record(tmp_path_factory, "multipub", "humble", "fastrtps")
    jaz = record(tmp_path_factory, "multipub", "jazzy", "cyclonedds")
    h, j = assert_clean(hum)["pairs"], assert_clean(jaz)["pairs"]
    assert h["contested"] > 0 and h.get("ambiguous", 0) > 0
    assert h.get("ambiguous", 0) <= h["contested"]
    assert h.get("wrong", 0) == 0 and j.get("wrong", 0) == 0
    assert j["contested"] > 0 and j.get("exact", 0) == j["takes"]
    publishers = {(t["publisher_pid"], t["publisher_node"]) for t in hum.truth
                  if t["kind"] == "take" and t["topic"] == "/chatter"}
    assert len(publishers) == 4 and len({pid for pid, _ in publishers}) == 3


@needs_recording
def test_intra_process(tmp_path_factory):
    """Humble: the intra-process callback (is_intra_process=1, no rmw_take) has no traced
    publish; the subscription takes the DDS copy too and drops it (no callback). Jazzy:
    rclcpp_intra_publish + the ring buffer join every intra-process take."""
    hum = record(tmp_path_factory, "intra", "humble", "fastrtps")
    jaz = record(tmp_path_factory, "intra", "jazzy", "fastrtps")
    for run in (hum, jaz):
        assert_clean(run)
        t_intra = [t for t in run.truth if t["kind"] == "take" and t["intra"]]
        t_dropped = [t for t in run.truth if t["kind"] == "take" and not t["intra"] and not t["callback"]
                     and not t["internal"]]
        assert len(t_intra) == len(t_dropped) > 0
        r_intra = run.takes(intra=True)
        assert len(r_intra) == len(t_intra)
        dropped = [t for t in run.takes(internal=False, intra=False) if not t["callback"]]
        assert len(dropped) == len(t_dropped) and all(t["node"] == "/intra/consumer" for t in dropped)
        assert all(t["join"] in ("exact", "window") for t in dropped)  # the DDS copy is joined all the same
    assert all(t["join"] == "none" and "not traced" in t["reason"] for t in hum.takes(intra=True))
    assert all(t["join"] == "intra" and t["publish"]["node"] == "/intra/producer" for t in jaz.takes(intra=True))
    n = len(jaz.takes(intra=True))
    # chains through the intra-process hop: only Jazzy can join them
    path = ["/intra/data", "/intra/processed"]
    assert len(jaz.chains(path)) == n
    assert hum.chains(path) == []


@needs_recording
@pytest.mark.parametrize("distro,rmw", [("humble", "fastrtps"), ("jazzy", "cyclonedds")])
def test_chains_relay_and_pingpong(tmp_path_factory, distro, rmw):
    """A publish inside a subscription callback is caused by that callback's take: the
    relay's N-th /topic_b publish follows the source's N-th /topic_a publish."""
    run = record(tmp_path_factory, "relay3", distro, rmw)
    assert_clean(run)
    sink_takes = [t for t in run.truth if t["kind"] == "take" and t["topic"] == "/topic_b"]
    chains = run.chains(["/topic_a", "/topic_b"])
    assert len(chains) == len(sink_takes) == 400
    for c in chains:
        a, b = c["hops"]
        assert a["publish"]["order"] == b["publish"]["order"]
        assert a["publish"]["node"] == "/relay3/source" and b["publish"]["node"] == "/relay3/relay"
        assert b["take"]["node"] == "/relay3/sink"
        assert c["start"] == a["publish"]["rclcpp_publish"] and c["end"] == b["take"]["callback_start"]
        assert 0 < c["e2e_ns"] < 1_000_000_000
    pp = record(tmp_path_factory, "pingpong", distro, "cyclonedds" if distro == "humble" else "fastrtps")
    assert_clean(pp)
    pongs = [t for t in pp.truth if t["kind"] == "take" and t["topic"] == "/pong"]
    chains = pp.chains(["/ping", "/pong"])
    assert len(chains) == len(pongs) > 0
    # ping republishes every other /pong inside its callback: /pong -> /ping chains
    assert len(pp.chains(["/pong", "/ping"])) == len(pongs) // 2


@needs_recording
def test_killed_process(tmp_path_factory):
    """The relay SIGKILLs itself inside a callback: its last callback has no end and its
    last events are missing; the join goes on."""
    for distro, rmw in (("humble", "fastrtps"), ("jazzy", "cyclonedds")):
        run = record(tmp_path_factory, "killed", distro, rmw)
        assert_clean(run)
        assert [p["procname"] for p in run.truth if p["kind"] == "process" and p["killed"]] == ["k_relay"]
        relay = run.takes(node="/killed/relay", topic="/killed/topic_a")
        assert len(relay) == 200  # --kill-after: messages / 2
        assert [t["callback_end"] for t in relay].count(None) == 1 and relay[-1]["callback_end"] is None
        assert relay[-1]["callback_start"] is not None
        assert len(run.takes(topic="/killed/topic_b")) == 199
        published = [p for p in run.truth if p["kind"] == "publish" and p["topic"] == "/killed/topic_a"]
        assert len(published) == 400


@needs_recording
def test_service_and_lifecycle(tmp_path_factory):
    run = record(tmp_path_factory, "service", "jazzy", "fastrtps")
    assert_clean(run)
    names = summary_of(run.ref)["events_by_name"]
    calls = [t for t in run.truth if t["kind"] == "service_call"]
    assert len(calls) == 40
    assert names["rcl_client_init"] == 1 and names["rcl_lifecycle_state_machine_init"] == 1
    assert names["rcl_lifecycle_transition"] == 4
    # 6 parameter services per node, 5 lifecycle services, the service itself
    assert names["rcl_service_init"] == 6 * 2 + 5 + 1
    # service callbacks are not takes
    assert all(t["topic"] != "/service/add_two_ints" for t in run.takes())


@needs_build
def test_default_tracegen_unchanged():
    """Without --scenario the generator does what it always did (the trace crate's oracle
    tests rely on its counts): 13 events per message (+1 per empty take) + 15 at start."""
    cp = subprocess.run([str(TRACEGEN), "--distro", "humble", "--messages", "20", "--processes", "2"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    lines = [json.loads(l) for l in cp.stdout.splitlines()]
    assert len(lines) == 2
    for l in lines:
        assert l["total"] == 13 * 20 + 2 + 15 and l["events"]["rmw_take"] == 22


# --- the real CARET traces (Galactic) ------------------------------------------------


def caret(name):
    p = CARET / name
    if not p.is_dir():
        pytest.skip(f"the public CARET traces are not at {CARET} (set DDSCOPE_SHARED_TRACES)")
    return p


@needs_bt2
@pytest.mark.parametrize("name,takes", [
    ("talker_listener/talker_listener", 18),
    ("multi_talker_listener/multi_talker_listener", 31),
    ("end_to_end_sample/cyclonedds", 359),
    ("end_to_end_sample/fastrtps", 385),
    ("cyclic_pipeline_intra_process/cyclic_pipeline_intra_process", 23),
])
def test_caret_traces_all_joined(name, takes):
    lines = refjoin(caret(name))
    s = summary_of(lines)
    assert s["takes"] == takes and s["joined"] == takes, s
    for t in lines[:-1]:
        assert t["join"] in ("exact", "intra") and t["publish"]["topic"] == t["topic"], t
        assert t["callback_start"] is not None and t["callback_end"] is not None
        assert t["publish"]["topic"] != "/rosout"


@needs_bt2
def test_caret_talker_listener_notebook():
    """talker_listener.ipynb (CARET's authors) shows the /talker timer -> /listener path with
    these rclcpp_publish and listener callback_start timestamps."""
    chains = [c for c in refjoin(caret("talker_listener/talker_listener"), "--path", "/chatter") if "summary" not in c]
    assert [c["start"] for c in chains] == [1631078990289280521, 1631078991288704199, 1631078992288808701,
                                            1631078993288721394, 1631078994288800056]
    assert [c["end"] for c in chains] == [1631078990290029433, 1631078991289088197, 1631078992289240824,
                                          1631078993289141210, 1631078994289306007]
    for i, c in enumerate(chains):
        (hop,) = c["hops"]
        assert hop["publish"]["node"] == "/talker" and hop["take"]["node"] == "/listener"
        assert hop["publish"]["order"] == i + 1 and hop["take"]["join"] == "exact"
        assert hop["publish"]["rcl_publish"] > hop["publish"]["rclcpp_publish"]


@needs_bt2
def test_caret_cyclic_pipeline_notebook():
    """cyclic_pipeline_intra_process.ipynb: the path /pipe1 callback -> /topic2 (intra) ->
    /pipe2 -> /topic1 (intra) -> /pipe1 starts at these pipe1 callbacks."""
    chains = [c for c in refjoin(caret("cyclic_pipeline_intra_process/cyclic_pipeline_intra_process"),
                                 "--path", "/topic2,/topic1") if "summary" not in c]
    starts = [(c["caused_by"]["callback_start"], c["caused_by"]["callback_end"]) for c in chains if c["caused_by"]]
    assert starts[:4] == [(1631078975392383571, 1631078976392680372), (1631078977394216364, 1631078978394476662),
                          (1631078979395404917, 1631078980395647265), (1631078981396823497, 1631078982397121699)]
    for c in chains:
        assert [h["take"]["node"] for h in c["hops"]] == ["/pipe2", "/pipe1"]
        assert all(h["take"]["join"] == "intra" for h in c["hops"])
