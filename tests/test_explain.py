"""`ddscope latency --explain` ("why was this message late?", tracker issue 27)
scored against faults injected at known samples.

Each lab run injects one cause; what each sample went through is known
from sources that are not ddscope's analysis:
  * loss (examples/lab/explain-loss.toml, the lab's eBPF loss on the switch
    port towards pc2): tshark on both capture points — a DATA_FRAG datagram
    (IP source, IP id) that pc1 sent and pc2 never reassembled was dropped
    on the link; the sequence numbers it carried were hit. Their repair
    makes them late (expected verdict `repair`), and the next sample of the
    writer waits for them in the reader (reliable in-order delivery:
    expected `head_of_line`);
  * a slow callback (examples/lab/explain-slow-callback.toml): the node's own
    ground truth (HOST.truth.jsonl: callback_start/end of every sample as the
    node stamped them) gives each 70 ms callback's interval; the /image
    sample taken right after it waited for its own subscription's callback
    (expected `callback_overrun`), the /scan samples published before it
    ended and taken after it began waited for another callback of the same
    executor (expected `executor_busy`);
  * link queueing (examples/lab/explain-interference.toml: bursty iperf3 UDP
    sharing pc1's 100 Mbit/s egress with the images): tshark on pc1's capture
    gives when iperf3's datagrams and each image's first byte left; an image
    published while a burst was leaving (iperf3 frames on the wire within
    1 ms after its publish, by the node's ground truth) that left late waited
    in the egress queue behind it (expected `link_queueing`), and a
    `link_queueing` verdict on an image no iperf3 frame overlapped (publish to
    receive) is a wrong one;
  * a CPU hog (examples/lab/explain-cpu-hog.toml: a SCHED_FIFO node on pc2
    spinning 40 ms 3.7 times a second on the CPU the /image subscriber is
    pinned to): the hog's own ground truth (its callbacks' start and end)
    says when it spun; an image due at the subscriber while it spun waited
    for the end of the spin (expected `cpu_contention`), and a `cpu_contention`
    verdict on an image whose life no spin overlapped is a wrong one;
  * a sender burst (examples/lab/explain-sender-burst.toml: every 10th
    period the camera publishes 4 images of 64 kB at once on a 100 Mbit/s
    link): the node's ground truth gives each image's publish and receive
    time and its sequence number says whether it was the 2nd to 4th of a
    burst (expected `sender_burst`: it waited behind the writer's own
    samples); a `sender_burst` verdict on any other image is a wrong one;
  * a wrong clock offset (`--offset pc2=+20ms` on the clean run): every
    sample's wire layer turns negative (expected `clock_offset`);
  * the clean run (explain-loss.toml without its loss): no fault, so every
    incident there is the machine's own noise, and it is counted.
A sample is an *injected incident* when the truth says the fault delayed
it by more than the outlier floor (2 ms). Per class: >= 90 % of the injected
incidents get the injected cause, <= 5 % a wrong cause (the rest: unknown);
a by-product class with fewer than 10 injected incidents (head_of_line after
a random loss) may leave one of them unknown, none wrong.
Needs root (network namespaces); CI runs as root.
"""
from __future__ import annotations

import collections
import json
import pathlib
import re
import subprocess

import pytest

from conftest import REPO, ForeignLoad, have_root, lab_cpu_seconds

LOSS = REPO / "examples" / "lab" / "explain-loss.toml"
SLOW = REPO / "examples" / "lab" / "explain-slow-callback.toml"
QUEUE = REPO / "examples" / "lab" / "explain-interference.toml"
HOG = REPO / "examples" / "lab" / "explain-cpu-hog.toml"
BURST = REPO / "examples" / "lab" / "explain-sender-burst.toml"
FLOOR_NS = 2_000_000  # ExplainOptions::outlier_floor_ns
# Cores busy with work that is not the lab's while the clean run ran (ForeignLoad).
CLEAN_FOREIGN_CORES: list[float] = []
# Above this the clean run's count of outliers measures the other jobs, not ddscope.
QUIET_CORES = 0.25
# The same for every run: a fault's samples delayed past the floor by other jobs too are not all
# the fault's to explain (score).
FOREIGN_CORES: dict[str, float] = {}


def lab(ddscope, scenario: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    assert have_root(), "the lab tests need root (network namespaces); CI runs as root"
    cp = ddscope("lab", "run", scenario, "--tracing", "jazzy", "--out", out, check=False, timeout=600)
    assert cp.returncode == 0, f"lab run failed ({cp.returncode}):\n{cp.stdout}\n{cp.stderr}"
    return out


@pytest.fixture(scope="module")
def runs(ddscope, tmp_path_factory):
    base = tmp_path_factory.mktemp("explain")
    clean_toml = base / "explain-clean.toml"
    text = LOSS.read_text()
    clean = re.sub(r"^\[network\.loss\]\n(?:(?!\[)[^\n]*\n)*", "", text, flags=re.M).replace('name = "explain-loss"', 'name = "explain-clean"')
    assert "probability" not in clean
    clean_toml.write_text(clean)
    out = {}
    for name, scenario in (("loss", LOSS), ("slow", SLOW), ("clean", clean_toml), ("queue", QUEUE), ("hog", HOG), ("burst", BURST)):
        with ForeignLoad() as load:
            out[name] = lab(ddscope, scenario, base / name)
        FOREIGN_CORES[name] = load.cores(lab_cpu_seconds(out[name]))
    CLEAN_FOREIGN_CORES.append(FOREIGN_CORES["clean"])
    return out


def explain(ddscope, run: pathlib.Path, *extra) -> dict:
    cp = ddscope("latency", run, "--explain", "--format", "json", *extra)
    return json.loads(cp.stdout)["incidents"]


def truth(run: pathlib.Path, event: str) -> list[dict]:
    out = []
    for f in sorted(run.glob("*.truth.jsonl")):
        out += [r for r in map(json.loads, f.read_text().splitlines()) if r.get("event") == event]
    return out


def tshark_datagrams(pcap: pathlib.Path) -> dict:
    """(ip.src, ip.dst, ip.id) -> the writerSN of the DATA_FRAG datagrams tshark reassembled. Cyclone DDS
    puts the fragments of one sample per datagram, after INFO_TS/INFO_DST and before a HEARTBEAT(_FRAG)
    whose sequence numbers tshark lists in the same field: the DATA_FRAG's is the first."""
    cp = subprocess.run(["tshark", "-r", str(pcap), "-Y", "rtps.sm.id == 0x16", "-T", "fields",
                         "-e", "ip.src", "-e", "ip.dst", "-e", "ip.id", "-e", "rtps.sm.id", "-e", "rtps.sm.seqNumber"],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    out = {}
    for line in cp.stdout.splitlines():
        src, dst, ipid, ids, sns = line.split("\t")
        first = next(i for i in ids.split(",") if i not in ("0x09", "0x0e"))
        if first == "0x16":
            out[(src, dst, ipid)] = int(sns.split(",")[0])
    return out


def score(name: str, expected: dict, incidents: dict, delayed: set, required: tuple, run: str = "") -> None:
    """expected: sample key -> injected cause; delayed: keys the truth says the fault delayed past the floor.
    Where other jobs kept the machine busy during the run (ForeignLoad, more than QUIET_CORES), a
    sample they delayed too may rightly be `unknown` (their CPU is no evidence ddscope sees): the
    verdicts must still never be wrong, and at least half right."""
    foreign = FOREIGN_CORES.get(run, 0.0)
    quiet = foreign <= QUIET_CORES
    matrix = collections.Counter()
    missed = []
    for k in sorted(delayed):
        got = incidents.get(k)
        if got is None:
            missed.append(k)
            matrix[(expected[k], "(no incident)")] += 1
        else:
            matrix[(expected[k], got["cause"])] += 1
    print(f"\n{name}: confusion (injected cause, verdict) -> count")
    for (want, got), n in sorted(matrix.items()):
        print(f"  {want:18} {got:18} {n}")
    for cause in sorted(set(expected[k] for k in delayed) | set(required)):
        total = sum(n for (w, _), n in matrix.items() if w == cause)
        right = matrix[(cause, cause)]
        wrong = sum(n for (w, g), n in matrix.items() if w == cause and g not in (cause, "unknown"))
        assert total >= 3 or cause not in required, f"{name}: only {total} injected {cause} incidents; the injection did not take"
        if total < 3:
            continue  # a by-product class seen once or twice: shown in the matrix, too few to score
        # 90 % of fewer than 10 is all of them: a small class may leave one sample unknown (never wrong).
        need = (total - 1 if total < 10 else 0.9 * total) if quiet else 0.5 * total
        assert right >= need, f"{name}: {cause}: {right} of {total} right; {dict(matrix)} ({foreign:.2f} cores busy with other work)"
        if not quiet and right < (total - 1 if total < 10 else 0.9 * total):
            print(f"{name}: {cause}: {right} of {total} right with {foreign:.2f} cores busy with other work (needs a quiet machine for 90 %)")
        assert wrong <= 0.05 * total, f"{name}: {cause}: {wrong} of {total} attributed to a wrong cause; {dict(matrix)}"


def test_loss_is_explained_as_repair_and_head_of_line(runs, ddscope):
    run = runs["loss"]
    sent = tshark_datagrams(run / "pc1.pcapng")
    got = tshark_datagrams(run / "pc2.pcapng")
    hit = {sn for key, sn in sent.items() if key not in got}
    assert hit, "the eBPF loss dropped no DATA_FRAG datagram"
    pub = {(r["writer_guid"], r["seq"]): r["t_ns"] for r in truth(run, "publish") if r["topic"] == "/image"}
    rcv = {(r["writer_guid"], r["seq"]): r["t_ns"] for r in truth(run, "receive") if r["topic"] == "/image"}
    delay = {k: rcv[k] - pub[k] for k in rcv if k in pub}
    base = sorted(delay.values())[len(delay) // 2]
    expected, delayed = {}, set()
    for (w, sn), d in delay.items():
        if sn in hit:
            expected[(w, sn)] = "repair"
        elif (w, sn - 1) in rcv and sn - 1 in hit and rcv[(w, sn - 1)] > pub[(w, sn)] + FLOOR_NS:
            # The previous sample, hit, was delivered only after this one was published (and had arrived).
            expected[(w, sn)] = "head_of_line"
        else:
            continue
        if d - base > FLOOR_NS + 1_000_000:
            delayed.add((w, sn))
    x = explain(ddscope, run, "--budget", "/image=5ms")
    incidents = {(i["writer_id"], i["sn"]): i for i in x["incidents"] if i["topic"] == "/image"}
    score("loss", expected, incidents, delayed, ("repair",), "loss")
    # Every repair verdict carries its evidence: the retransmissions.
    for i in x["incidents"]:
        if i["cause"] == "repair":
            assert re.match(r"[1-9]\d* DATA/DATA_FRAG retransmitted", i["evidence"]), i
            assert i["layer"] in ("wire_first", "wire_rest"), i
    assert any(c["cause"] == "repair" and c["share_of_excess_pct"] > 50 for c in x["by_cause"]), x["by_cause"]


def test_slow_callbacks_are_explained_as_overrun_and_busy_executor(runs, ddscope):
    run = runs["slow"]
    rcv = [r for r in truth(run, "receive") if r["node"] == "fusion"]
    slow = [(r["callback_start_ns"], r["callback_end_ns"]) for r in rcv if r["topic"] == "/image" and r["seq"] % 10 == 0]
    assert len(slow) >= 10 and all(e - s > 60_000_000 for s, e in slow), slow[:3]
    pub = {(r["writer_guid"], r["seq"]): r["t_ns"] for r in truth(run, "publish")}
    expected, delayed = {}, set()
    for r in rcv:
        k = (r["writer_guid"], r["seq"])
        take = r["rmw_take_ns"]
        for s, e in slow:
            if s < take and pub[k] < e and not (r["topic"] == "/image" and r["seq"] % 10 == 0):
                expected[k] = "callback_overrun" if r["topic"] == "/image" else "executor_busy"
                if take - pub[k] > FLOOR_NS + 1_000_000:
                    delayed.add(k)
    x = explain(ddscope, run)
    incidents = {(i["writer_id"], i["sn"]): i for i in x["incidents"] if i["receiver"] == "pc2"}
    score("slow callback", expected, incidents, delayed, ("callback_overrun", "executor_busy"), "slow")
    for i in x["incidents"]:
        if i["cause"] in ("callback_overrun", "executor_busy"):
            assert i["layer"] in ("dds_receive", "executor"), i
            assert "/image sn " in i["evidence"], i


def tshark_times(pcap: pathlib.Path, display_filter: str) -> list[int]:
    """Capture times (ns) of the frames tshark's display filter selects, in order."""
    import decimal
    cp = subprocess.run(["tshark", "-r", str(pcap), "-Y", display_filter, "-T", "fields", "-e", "frame.time_epoch"],
                        capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    return sorted(int(decimal.Decimal(t) * 1_000_000_000) for t in cp.stdout.split())


def test_bursty_interference_is_explained_as_link_queueing(runs, ddscope):
    import bisect
    run = runs["queue"]
    pc1 = json.loads((run / "run.json").read_text())["network"]["hosts"][0]
    assert pc1["name"] == "pc1"
    cap = run / "pc1.pcapng"
    iperf = tshark_times(cap, f"ip.src == {pc1['ip']} && udp.dstport == 5201")
    assert len(iperf) > 10_000, "iperf3 sent nothing"
    # Where each image's first byte left pc1: its first datagram is IP-fragmented (Cyclone's 14 kB datagrams),
    # so it starts with the first IP fragment of a datagram to the DDS ports.
    starts = tshark_times(cap, f"ip.src == {pc1['ip']} && ip.flags.mf == 1 && ip.frag_offset == 0 && !(udp.dstport == 5201)")
    pub = {(r["writer_guid"], r["seq"]): r["t_ns"] for r in truth(run, "publish") if r["topic"] == "/image"}
    rcv = {(r["writer_guid"], r["seq"]): r["t_ns"] for r in truth(run, "receive") if r["topic"] == "/image"}
    departure = {}
    for k, t in pub.items():
        i = bisect.bisect_left(starts, t)
        if i < len(starts) and starts[i] - t < 40_000_000:
            departure[k] = starts[i] - t
    assert len(departure) >= 0.9 * len(pub), (len(departure), len(pub))
    free = sorted(departure.values())[len(departure) // 10]  # an image that found the link free
    def iperf_between(a, b):
        i = bisect.bisect_left(iperf, a)
        return i < len(iperf) and iperf[i] < b
    # Injected: the image left more than the outlier floor (+1 ms) later than on a free link, and iperf3's frames
    # were leaving when it was published (it waited behind a burst).
    expected, delayed = {}, set()
    for k, d in departure.items():
        if iperf_between(pub[k], pub[k] + 1_000_000):
            expected[k] = "link_queueing"
            if d - free > FLOOR_NS + 1_000_000:
                delayed.add(k)
    assert len(delayed) >= 10, (len(delayed), len(departure))
    # A 64 kB image takes 5.3 ms on 100 Mbit/s: 6.5 ms leaves the images that found the link free within budget.
    x = explain(ddscope, run, "--budget", "/image=6.5ms")
    incidents = {(i["writer_id"], i["sn"]): i for i in x["incidents"] if i["topic"] == "/image"}
    score("link queueing", expected, incidents, delayed, ("link_queueing",), "queue")
    # Precision: every link_queueing verdict is on an image whose life (publish -> receive, ground truth) iperf3's
    # frames overlapped on pc1's link, with its evidence; the rate is the lab run's (run.json).
    verdicts = [i for i in x["incidents"] if i["cause"] == "link_queueing"]
    wrong = [i for i in verdicts if not iperf_between(pub[(i["writer_id"], i["sn"])], rcv[(i["writer_id"], i["sn"])])]
    print(f"link_queueing verdicts: {len(verdicts)}, on images no iperf3 frame overlapped: {len(wrong)}")
    assert len(wrong) <= 0.05 * len(verdicts), [(i["sn"], i["evidence"]) for i in wrong[:5]]
    # Queued in pc1's egress before the first byte left (a sender layer), or, once it had started, its
    # remaining fragments behind a burst (the wire, seen as pc2's link busy until the sample was complete).
    for i in verdicts:
        where = "pc1" if i["layer"] in ("dds_send", "sender_stack", "ros_publish") else "pc2"
        assert where == "pc1" or i["layer"] in ("wire_first", "wire_rest"), i
        m = re.match(r"(pc\d)'s link carried \d+ kB in the [\d.]+ ms before the sample(?:'s first byte left|'s first fragment arrived| was complete) "
                     r"\(\d+ Mbit/s, \d+ % of 100 Mbit/s, the lab run's network.rate\); \d+ % of it not RTPS", i["evidence"])
        assert m and m.group(1) == where, (i["layer"], i["evidence"])
    assert {l["capture"]: l["rate_bps"] for l in x["links"]} == {"pc1": 1e8, "pc2": 1e8}, x["links"]


def test_cpu_hog_is_explained_as_cpu_contention(runs, ddscope):
    run = runs["hog"]
    spins = sorted((r["callback_start_ns"], r["callback_end_ns"]) for r in truth(run, "receive") if r["node"] == "hog")
    assert len(spins) >= 30 and all(38_000_000 <= e - s <= 80_000_000 for s, e in spins), spins[:3]
    pub = {(r["writer_guid"], r["seq"]): r["t_ns"] for r in truth(run, "publish") if r["topic"] == "/image"}
    rcv = {(r["writer_guid"], r["seq"]): r["t_ns"] for r in truth(run, "receive") if r["topic"] == "/image"}
    # Injected: an image due at fusion (published + the images' median publish -> receive) while the hog spun,
    # more than the floor (+1 ms) before the spin ended.
    import statistics
    due = statistics.median(rcv[k] - t for k, t in pub.items() if k in rcv)
    expected, delayed = {}, set()
    for k, t in pub.items():
        for s, e in spins:
            if s <= t + due < e:
                expected[k] = "cpu_contention"
                if e - (t + due) > FLOOR_NS + 1_000_000:
                    delayed.add(k)
    assert len(delayed) >= 15, (len(delayed), len(pub))
    x = explain(ddscope, run)
    incidents = {(i["writer_id"], i["sn"]): i for i in x["incidents"] if i["topic"] == "/image"}
    score("cpu hog", expected, incidents, delayed, ("cpu_contention",), "hog")
    # Precision: every cpu_contention verdict is on an image whose life (publish -> receive) a spin overlapped,
    # and its evidence names the hog on pc2; the waits are in pc2's stack or its kernel taking the frames in.
    verdicts = [i for i in x["incidents"] if i["cause"] == "cpu_contention"]
    wrong = [i for i in verdicts if not any(s < rcv[(i["writer_id"], i["sn"])] and pub[(i["writer_id"], i["sn"])] < e for s, e in spins)]
    print(f"cpu_contention verdicts: {len(verdicts)}, on images no spin overlapped: {len(wrong)}")
    assert len(wrong) <= 0.05 * len(verdicts), [(i["sn"], i["evidence"]) for i in wrong[:5]]
    for i in verdicts:
        assert i["layer"] in ("dds_receive", "executor", "wire_first", "wire_rest"), i
        assert re.match(r"on pc2, hog used [\d.]+ ms of CPU in the [\d.]+ ms of readings around the [\d.]+ ms ", i["evidence"]), i["evidence"]
    # The evidence's source: the run's load.csv, read every 10 ms (capture.load_interval), with the scheduler's ns.
    c = x["cpu_load"]
    assert c["hosts"] == ["pc1", "pc2"] and c["bad_lines"] == 0 and c["not_kept"] == 0, c
    assert 8_000_000 <= c["interval_ns"] <= 15_000_000, c
    # The same load given by hand (`--load HOST=FILE`, every process of the file on pc2) to the run's files: the
    # same verdicts.
    by_hand = json.loads(ddscope("latency", run / "pc1.pcapng", run / "pc2.pcapng", "--trace", f"pc1={run / 'pc1.lttng'}",
                                 "--trace", f"pc2={run / 'pc2.lttng'}", "--truth", run / "pc1.truth.jsonl", "--truth",
                                 run / "pc2.truth.jsonl", "--load", f"pc2={run / 'load.csv'}", "--explain", "--format", "json").stdout)["incidents"]
    assert by_hand["cpu_load"]["hosts"] == ["pc2"], by_hand["cpu_load"]
    assert {(i["sn"], i["cause"]) for i in by_hand["incidents"]} == {(i["sn"], i["cause"]) for i in x["incidents"]}
    cp = ddscope("latency", run, "--explain", "--load", "pc2=/nonexistent/load.csv", check=False)
    assert cp.returncode != 0 and "--load /nonexistent/load.csv" in cp.stderr, cp.stderr


def test_bad_load_lines_are_counted_and_named(runs, ddscope, tmp_path):
    """A load.csv line that cannot be read is skipped, counted and named by `latency` and by `report`, never silent."""
    run = runs["hog"]
    bad = tmp_path / "hog"
    bad.mkdir()
    for f in run.iterdir():
        if f.name != "load.csv":
            (bad / f.name).symlink_to(f)
    lines = (run / "load.csv").read_text().splitlines()
    n = len(lines)
    (bad / "load.csv").write_text("\n".join(lines + ["123,hog,x,1,2"]) + "\n")
    cp = ddscope("latency", bad, "--budget", "/image=20ms", "--explain", "--format", "json")
    c = json.loads(cp.stdout)["incidents"]["cpu_load"]
    assert c["bad_lines"] == 1 and c["first_problem"] == f"{bad / 'load.csv'}: line {n + 1}: pid is not a number", c
    assert f"latency: warning: per-process load: 1 line(s) not read" in cp.stderr, cp.stderr
    cp = ddscope("report", bad, "--budget", "/image=20ms", "--html", tmp_path / "r.html")
    warned = [l for l in cp.stderr.splitlines() if "warning" in l]
    assert any("per-process load: 1 line(s) not read" in l and f"line {n + 1}" in l for l in warned), cp.stderr
    assert any("1 line(s) of the per-process load not drawn" in l and f"line {n + 1}" in l for l in warned), cp.stderr


def test_sender_burst_is_explained_as_sender_burst(runs, ddscope):
    import statistics
    run = runs["burst"]
    pub = {(r["writer_guid"], r["seq"]): r["t_ns"] for r in truth(run, "publish") if r["topic"] == "/image"}
    rcv = {(r["writer_guid"], r["seq"]): r["t_ns"] for r in truth(run, "receive") if r["topic"] == "/image"}
    e2e = {k: rcv[k] - t for k, t in pub.items() if k in rcv}
    typical = statistics.median(e2e.values())
    # Injected: the 2nd to 4th sample of each burst (sequence numbers 10k+2 … 10k+4), published together with
    # the one before it (the truth says so), and delayed past the floor (+1 ms) by it.
    in_burst = {k for k in pub if (k[1] - 1) % 10 in (1, 2, 3)}
    # At once: each right after the one before returned (a write may block while the socket's buffer drains), far
    # inside the 50 ms period.
    gaps = [pub[k] - pub[(k[0], k[1] - 1)] for k in in_burst if (k[0], k[1] - 1) in pub]
    assert gaps and max(gaps) < 20_000_000, ("the bursts were not published at once", sorted(gaps)[-3:])
    expected = {k: "sender_burst" for k in in_burst}
    delayed = {k for k in in_burst if k in e2e and e2e[k] - typical > FLOOR_NS + 1_000_000}
    assert len(delayed) >= 30, (len(delayed), len(in_burst), typical)
    # A 64 kB image takes 5.3 ms on 100 Mbit/s: 8 ms leaves one alone within budget.
    x = explain(ddscope, run, "--budget", "/image=8ms")
    incidents = {(i["writer_id"], i["sn"]): i for i in x["incidents"] if i["topic"] == "/image"}
    score("sender burst", expected, incidents, delayed, ("sender_burst",), "burst")
    verdicts = [i for i in x["incidents"] if i["cause"] == "sender_burst"]
    wrong = [i for i in verdicts if (i["writer_id"], i["sn"]) not in in_burst]
    print(f"sender_burst verdicts: {len(verdicts)}, on images not in a burst: {len(wrong)}")
    assert len(wrong) <= 0.05 * len(verdicts), [(i["sn"], i["evidence"]) for i in wrong[:5]]
    for i in verdicts:
        assert i["layer"] in ("dds_send", "ros_publish", "sender_stack"), i
        assert re.match(r"the writer sent [123] other sample\(s\) in the [\d.]+ ms before this one \(period (?:49|50)\.\d+ ms\)", i["evidence"]), i["evidence"]


def test_wrong_clock_offset_is_explained_as_clock_offset(runs, ddscope):
    x = explain(ddscope, runs["clean"], "--offset", "pc2=+20ms")
    causes = collections.Counter(i["cause"] for i in x["incidents"])
    n = sum(1 for _ in truth(runs["clean"], "receive"))
    assert causes["clock_offset"] >= 0.9 * n, (causes, n)
    assert sum(v for c, v in causes.items() if c not in ("clock_offset", "unknown")) <= 0.05 * n, causes
    i = next(i for i in x["incidents"] if i["cause"] == "clock_offset")
    assert "negative" in i["evidence"] and "offset" in i["evidence"], i


def test_clean_run_has_few_incidents_and_fail_on_incidents(runs, ddscope):
    x = explain(ddscope, runs["clean"], "--budget", "/image=12ms")
    print(f"\nclean run: {x['summary']}")
    assert x["samples"] > 100
    # Without a fault, what remains is this machine's scheduling noise (outliers of a few ms): never
    # given a cause (no evidence for one), and few where the machine was quiet. A loaded 2-core
    # machine (three busy loops beside the lab) left 38 to 102 of 400 samples outliers, all of them
    # unknown: the count is then the other jobs' (said, not failed).
    foreign = CLEAN_FOREIGN_CORES[-1] if CLEAN_FOREIGN_CORES else 0.0
    print(f"clean run: {foreign:.2f} cores busy with other work")
    if foreign <= QUIET_CORES:
        assert len(x["incidents"]) <= 0.1 * x["samples"], (x["summary"], f"{foreign:.2f} cores busy with other work")
    assert all(i["cause"] == "unknown" for i in x["incidents"]), [(i["cause"], i["evidence"]) for i in x["incidents"]]
    # 30 ms: this 2-core machine, loaded, leaves a receiving process unscheduled for tens of ms now
    # and then (the clean run's own outliers); the repairs of the loss run take 50-100 ms.
    cp = ddscope("latency", runs["clean"], "--budget", "/image=30ms", "--fail-on-incidents", check=False)
    assert cp.returncode == 0, cp.stderr
    cp = ddscope("latency", runs["loss"], "--budget", "/image=30ms", "--fail-on-incidents", "--explain", check=False)
    assert cp.returncode == 1, cp.stderr
    fail = [l for l in cp.stderr.splitlines() if "FAIL:" in l]
    assert len(fail) == 1 and "broke their budget" in fail[0], cp.stderr
    assert re.search(r"^repair\s+\d+", cp.stdout, re.M), cp.stdout
    assert "worst incidents:" in cp.stdout
    cp = ddscope("latency", runs["clean"], "--fail-on-incidents", check=False)
    assert cp.returncode != 0 and "needs a budget" in cp.stderr, cp.stderr


def test_derived_budgets_period_and_percentile(runs, ddscope, tmp_path):
    """`--budget /image=p90`: each flow's own 90th percentile of its end to end (nearest rank over its delivered
    samples, as the rows give them); `=period`: its publication period (50 ms, the loss scenario's 20 Hz)."""
    import csv
    import math
    rows_csv = tmp_path / "rows.csv"
    ddscope("latency", runs["clean"], "--format", "csv", "-o", rows_csv)
    with open(rows_csv) as f:
        e2e = sorted(int(r["ros_e2e_ns"]) for r in csv.DictReader(f)
                     if r["topic_name"] == "/image" and r["level"] == "message" and r["status"] == "delivered" and r["ros_e2e_ns"])
    assert len(e2e) > 100
    p90 = e2e[math.ceil(0.9 * len(e2e)) - 1]
    x = explain(ddscope, runs["clean"], "--budget", "/image=p90")
    over = [i for i in x["incidents"] if "over_budget" in i["kinds"]]
    assert len(over) == sum(1 for v in e2e if v > p90), (len(over), p90)
    assert over and all(i["budget_ns"] == p90 for i in over), {i["budget_ns"] for i in over}
    assert "budgets /image=p90: " in x["summary"], x["summary"]
    # The loss run's repairs make incidents whatever the budget: each carries its flow's period.
    x = explain(ddscope, runs["loss"], "--budget", "/image=period")
    judged = [i for i in x["incidents"] if i["budget_ns"] is not None]
    assert judged and all(abs(i["budget_ns"] - 50_000_000) < 1_000_000 for i in judged), {i["budget_ns"] for i in judged}
    cp = ddscope("latency", runs["clean"], "--budget", "/image=p100", check=False)
    assert cp.returncode != 0 and "between 0 and 100" in cp.stderr, cp.stderr


def test_report_shows_the_incidents(runs, ddscope, tmp_path, artifacts):
    """`report --budget` carries the same verdicts as `latency --explain`, drawn in headless Chromium."""
    from conftest import browser_inspect
    html = tmp_path / "loss.html"
    cp = ddscope("report", runs["loss"], "--budget", "/image=5ms", "--html", html)
    line = next(l for l in cp.stderr.splitlines() if "incidents:" in l)
    x = explain(ddscope, runs["loss"], "--budget", "/image=5ms")
    assert x["summary"] in line, (line, x["summary"])
    seen = browser_inspect(html.as_uri(), artifacts / "report-incidents.png", 1500, ["Incidents — loss", "Worst incidents", "repair"])
    assert not seen["errors"], seen["errors"]
    assert all(seen["found"].values()), seen["found"]
    timeline = [c for c in seen["charts"] if "incidents" in (c.get("section") or "").lower() or "incidents" in (c.get("title") or "").lower()]
    assert timeline and all(c["points"] > 0 for c in timeline), seen["charts"]
