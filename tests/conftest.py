"""Shared fixtures for the end-to-end tests.

The tests drive the real `ddscope` binary (built by scripts/setup.sh into
target/release) against real captures, real DDS processes and real servers.
Set DDSCOPE_BIN to test another build.
"""
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


def _shared_captures_dir() -> pathlib.Path:
    """Where the public test captures live: $DDSCOPE_SHARED_CAPTURES, else
    ../shared/captures beside the checkout, else /work/shared/captures."""
    candidates = [os.environ.get("DDSCOPE_SHARED_CAPTURES"), REPO.parent / "shared" / "captures", "/work/shared/captures"]
    for c in candidates:
        if c and pathlib.Path(c).is_dir():
            return pathlib.Path(c)
    return pathlib.Path(candidates[1])


SHARED_CAPTURES = _shared_captures_dir()


def _tshark_prefers_heuristics() -> None:
    """Every tshark the tests run tries its heuristic dissectors (RTPS's among
    them) before the dissectors registered on UDP ports. A lab participant
    binds an ephemeral port; one that happens to be registered to another
    protocol (41170, MANOLITO, in one of 25 lab runs here) made tshark read
    that participant's RTPS as MANOLITO and the oracle lose its samples. The
    user's own Wireshark profile is left alone: a private configuration
    directory holds just this preference."""
    if os.environ.get("WIRESHARK_CONFIG_DIR"):
        return
    import atexit
    import tempfile
    d = pathlib.Path(tempfile.mkdtemp(prefix="ddscope-tshark-prefs-"))
    atexit.register(shutil.rmtree, d, True)
    (d / "preferences").write_text("udp.try_heuristic_first: TRUE\n")
    os.environ["WIRESHARK_CONFIG_DIR"] = str(d)


_tshark_prefers_heuristics()


def ddscope_bin() -> str:
    env = os.environ.get("DDSCOPE_BIN")
    if env:
        return env
    for profile in ("release", "debug"):
        p = REPO / "target" / profile / "ddscope"
        if p.exists():
            return str(p)
    raise RuntimeError("ddscope binary not found: run scripts/setup.sh or set DDSCOPE_BIN")


@pytest.fixture(scope="session")
def ddscope():
    """Returns a function that runs `ddscope ARGS…` and returns the CompletedProcess."""
    exe = ddscope_bin()

    def run(*args, check=True, timeout=600, **kw):
        cp = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=timeout, **kw)
        if check and cp.returncode != 0:
            raise AssertionError(f"ddscope {' '.join(map(str, args))} exited {cp.returncode}:\n{cp.stderr}")
        return cp

    return run


@pytest.fixture(scope="session")
def repo():
    return REPO


@pytest.fixture(scope="session")
def shared_captures():
    """The public RTPS captures of ../shared/captures (never copied into the repo)."""
    if not SHARED_CAPTURES.is_dir():
        raise AssertionError(f"public captures not found at {SHARED_CAPTURES}: set DDSCOPE_SHARED_CAPTURES")
    return SHARED_CAPTURES


def have_root() -> bool:
    return os.geteuid() == 0


@pytest.fixture
def needs_root():
    """Fails (never skips) a test that needs root: namespaces, capture. CI runs as root."""
    assert have_root(), "this test needs root (network namespaces, packet capture); run the tests as root, as CI does"


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise AssertionError(f"{name} is not installed: scripts/setup.sh installs it")
    return path


def browser_inspect(url, screenshot, wait_ms=1500, texts=(), width=1400):
    """Loads `url` in Debian's headless Chromium (tests/browser/inspect.mjs,
    playwright-core) and returns what the page shows: per chart canvas the
    number of marks drawn and the share of inked pixels, page errors, and
    whether each of `texts` appears."""
    import json as _json
    node = require_tool("node")
    script = REPO / "tests" / "browser" / "inspect.mjs"
    if not (REPO / "tests" / "browser" / "node_modules" / "playwright-core").is_dir():
        raise AssertionError("playwright-core is not installed: scripts/setup.sh runs npm ci in tests/browser")
    cp = subprocess.run([node, str(script), url, str(screenshot), str(wait_ms), *texts], capture_output=True, text=True, timeout=180,
                        env=dict(os.environ, VIEWPORT_WIDTH=str(width)))
    if cp.returncode != 0:
        raise AssertionError(f"browser inspection failed: {cp.stderr[-3000:]}")
    return _json.loads(cp.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def artifacts():
    """Directory for screenshots and reports the tests leave for humans."""
    d = pathlib.Path(os.environ.get("DDSCOPE_TEST_ARTIFACTS", REPO / "target" / "test-artifacts"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def wait_healthz(url: str, timeout: float = 20) -> None:
    """Waits until a `serve` at `url` answers /healthz (or `timeout` passes; the caller's next
    request then says why)."""
    import urllib.request
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1)
            return
        except OSError:
            time.sleep(0.2)


def wait_agent(url: str, name: str, timeout: float = 20) -> None:
    """Waits until `serve` at `url` lists the agent `name` (the first agent serve hears from is
    its reference clock)."""
    import json as _json
    import urllib.request
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(a["name"] == name for a in _json.loads(urllib.request.urlopen(url + "/api/state", timeout=5).read())["agents"]):
            return
        time.sleep(0.05)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that the kernel reports free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def processes():
    """Processes a test started: interrupted (SIGINT, then killed after 10 s) when it ends."""
    procs = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


class ForeignLoad:
    """How busy the machine was with work that is not the lab's, over a stretch of time: the CPU time
    all processes used (/proc/stat) less what the lab's own processes used (its load.csv, read by the
    caller), in cores. A test that needs a quiet machine measures this around its run and says so
    instead of failing on another job's noise (CI may run beside leftovers)."""

    @staticmethod
    def _busy_s() -> tuple[float, float]:
        with open("/proc/stat") as f:
            cpu = [int(x) for x in f.readline().split()[1:]]
        ticks = os.sysconf("SC_CLK_TCK")
        idle = cpu[3] + cpu[4]  # idle + iowait
        return (sum(cpu[:8]) - idle) / ticks, time.monotonic()

    def __enter__(self):
        self.start = self._busy_s()
        return self

    def __exit__(self, *exc):
        self.end = self._busy_s()
        return False

    def cores(self, lab_cpu_s: float = 0.0) -> float:
        busy = self.end[0] - self.start[0] - lab_cpu_s
        return max(0.0, busy / max(1e-9, self.end[1] - self.start[1]))


def lab_cpu_seconds(run_dir) -> float:
    """CPU seconds the lab's processes used over a run (the last reading of each process in load.csv)."""
    import csv
    last = {}
    p = pathlib.Path(run_dir) / "load.csv"
    if not p.exists():
        return 0.0
    with open(p) as f:
        for r in csv.DictReader(f):
            try:
                last[(r["process"], r["pid"])] = float(r["cpu_user_s"]) + float(r["cpu_system_s"])
            except (KeyError, ValueError):
                continue
    return sum(last.values())
