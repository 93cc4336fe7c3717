"""`leadline probe`: exact counts of lines and function entries in an unmodified program, on
whichever Python runs the tests (CI runs 3.10 to 3.15), and its one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import pytest
from support import leadline, write

from leadline.errors import LeadlineError
from leadline.record.probe import evaluate, parse_count, parse_ratio

# An LRU cache with hits on line 11 and misses on line 13; `get` is entered once per lookup.
CACHE = """\
from collections import OrderedDict


class LRU:
    def __init__(self, size):
        self.size = size
        self.data = OrderedDict()

    def get(self, key):
        if key in self.data:
            self.data.move_to_end(key)  # line 11: a hit
            return self.data[key]
        value = key * 2  # line 13: a miss
        self.data[key] = value
        if len(self.data) > self.size:
            self.data.popitem(last=False)
        return value
"""

# The program: a fixed key sequence through a cache of CACHE_SIZE entries, in a module that is
# imported after the probe starts, from two threads one after the other.
APP = """\
import os
import threading

import lrucache


def keys():
    return [(i * 7 + (i // 13)) % 23 for i in range(3000)]


def run(cache):
    for k in keys():
        cache.get(k)


cache = lrucache.LRU(int(os.environ.get("CACHE_SIZE", "8")))
t = threading.Thread(target=run, args=(cache,))
t.start()
t.join()
run(cache)
print("done")
"""


def expected(size: int) -> tuple[int, int]:
    """Hits and misses of the same sequence through an LRU of `size`, simulated here."""
    keys = [(i * 7 + (i // 13)) % 23 for i in range(3000)] * 2
    data: OrderedDict[int, None] = OrderedDict()
    hits = 0
    for k in keys:
        if k in data:
            hits += 1
            data.move_to_end(k)
        else:
            data[k] = None
            if len(data) > size:
                data.popitem(last=False)
    return hits, len(keys) - hits


def app(tmp_path: Path) -> Path:
    write(tmp_path, "lrucache.py", CACHE)
    return write(tmp_path, "app.py", APP)


def probe_json(tmp_path: Path, *args: str, env_size: int = 8) -> dict[str, object]:
    out = tmp_path / "probe.json"
    os.environ["CACHE_SIZE"] = str(env_size)
    try:
        r = leadline("probe", "--json-output", out, *args, cwd=tmp_path)
    finally:
        os.environ.pop("CACHE_SIZE", None)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"  # the program's own output, untouched
    data: dict[str, object] = json.loads(out.read_text())
    return data


@pytest.mark.parametrize("size", [4, 16, 23])
def test_probe_counts_hits_and_misses_exactly(tmp_path: Path, size: int) -> None:
    app(tmp_path)
    hits, misses = expected(size)
    data = probe_json(
        tmp_path,
        "--count",
        "hit=lrucache.py:11",
        "--count",
        "miss=lrucache.py:13",
        "--count",
        "lookups=lrucache:LRU.get",
        "--ratio",
        "hit_rate=hit/(hit+miss)",
        "app.py",
        env_size=size,
    )
    assert data["counts"] == {"hit": hits, "miss": misses, "lookups": 6000}
    ratios = data["ratios"]
    assert isinstance(ratios, dict)
    assert ratios["hit_rate"] == pytest.approx(hits / 6000)
    probes = data["probes"]
    assert isinstance(probes, list)
    assert probes[0]["where"].endswith("lrucache.py:11")
    assert probes[2]["where"].startswith("LRU.get (")


def test_probe_table_on_stderr(tmp_path: Path) -> None:
    app(tmp_path)
    r = leadline(
        "probe",
        "--count",
        "hit=lrucache.py:11",
        "--count",
        "miss=lrucache.py:13",
        "--ratio",
        "hit/(hit+miss)",
        "app.py",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    hits, misses = expected(8)
    lines = r.stderr.splitlines()
    assert any(ln.split()[:2] == ["hit", f"{hits:,}"] for ln in lines), r.stderr
    assert any(ln.split()[:2] == ["miss", f"{misses:,}"] for ln in lines), r.stderr
    assert f"hit/(hit+miss) = {hits / 6000:.6g}" in r.stderr


def test_probe_function_entries_generators_and_main(tmp_path: Path) -> None:
    """An entry is counted once per call: a generator's resumptions are not entries.  A probe
    on the program's own file counts its lines too."""
    write(
        tmp_path,
        "gen.py",
        """\
def numbers(n):
    for i in range(n):
        yield i


total = 0
for _ in range(7):
    for x in numbers(5):
        total += x
print(total)
""",
    )
    out = tmp_path / "p.json"
    r = leadline(
        "probe",
        "--json-output",
        out,
        "--count",
        "calls=__main__:numbers",
        "--count",
        "adds=gen.py:9",
        "gen.py",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "70\n"
    assert json.loads(out.read_text())["counts"] == {"calls": 7, "adds": 35}


def test_probe_many_probed_functions(tmp_path: Path) -> None:
    """More probed code objects than the native watch table first holds (it grows while they
    are registered, once for a probed line's own entry and once for its function's marker): every
    counter still counts its own probe.  Under `make sanitize` this is also the test of that
    growth's memory safety."""
    n = 40
    lines = ["def entry(k):", "    return k", ""]
    probed: list[int] = []
    for i in range(n):
        lines += [f"def f{i}(k):", f"    x = k + {i}"]
        probed.append(len(lines))
        lines += ["    return x", ""]
    write(tmp_path, "many.py", "\n".join(lines) + "\n")
    write(
        tmp_path,
        "run_many.py",
        f"import many\n\nfor k in range(3):\n    many.entry(k)\n"
        f"    for i in range({n}):\n        if i % 2 == 0 or k == 0:\n"
        "            getattr(many, f'f{i}')(k)\nprint('done')\n",
    )
    counts = ["--count", "entry=many:entry"]
    for i, line in enumerate(probed):
        counts += ["--count", f"f{i}=many.py:{line}"]
    out = tmp_path / "p.json"
    r = leadline("probe", "--json-output", out, *counts, "run_many.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    expected_counts = {"entry": 3, **{f"f{i}": 3 if i % 2 == 0 else 1 for i in range(n)}}
    assert json.loads(out.read_text())["counts"] == expected_counts


def test_probe_keeps_exit_status_and_exceptions(tmp_path: Path) -> None:
    write(tmp_path, "fail.py", "def f():\n    return 1\nf()\nraise SystemExit(3)\n")
    r = leadline("probe", "--count", "f=fail.py:2", "fail.py", cwd=tmp_path)
    assert r.returncode == 3
    assert "f  " in r.stderr or "f " in r.stderr


def test_probe_capture_holds_counts_and_marks(tmp_path: Path) -> None:
    write(
        tmp_path,
        "m.py",
        """\
import leadline


def step(i):
    if i % 3 == 0:
        leadline.mark("third", i=i)
    return i


for i in range(30):
    step(i)
""",
    )
    cap = tmp_path / "p.lead"
    r = leadline("probe", "-o", cap, "--count", "steps=__main__:step", "m.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rep = leadline("report", cap, "--json", cwd=tmp_path, check=True)
    data = json.loads(rep.stdout)
    assert data["kind"] == "probe"
    assert data["counts"] == {"steps": 30}
    marks = data["marks"]
    assert marks["total"] == 10
    assert [e["fields"]["i"] for e in marks["events"]] == list(range(0, 30, 3))
    assert {(e["file"].endswith("m.py"), e["line"]) for e in marks["events"]} == {(True, 6)}
    text = leadline("report", cap, cwd=tmp_path, check=True).stdout
    assert "steps" in text and "third" in text


def test_probe_duration_stops_counting_while_the_program_runs_on(tmp_path: Path) -> None:
    write(
        tmp_path,
        "long.py",
        """\
import time


def tick():
    return 1


end = time.monotonic() + 1.5
n = 0
while time.monotonic() < end:
    n += tick()
    time.sleep(0.001)
print("ticks", n > 0)
""",
    )
    out = tmp_path / "p.json"
    r = leadline(
        "probe",
        "--duration",
        "0.3",
        "--json-output",
        out,
        "--count",
        "t=__main__:tick",
        "long.py",
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ticks True\n"
    data = json.loads(out.read_text())
    assert 0.25 < data["seconds"] < 1.2
    assert 0 < data["counts"]["t"] < 1400  # at most 1 ms apart, over well under 1.5 s


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--count", "x=lrucache.py:2"], "lrucache.py:2 is not an executable line"),
        (["--count", "x=lrucache.py:3"], "is not an executable line (the next one is line 4)"),
        (["--count", "x=nothere.py:3"], "nothere.py: no such file"),
        (["--count", "x=no_such_module_abc:f"], "no module named 'no_such_module_abc'"),
        (["--count", "x=lrucache:LRU.put"], "defines no function 'LRU.put'"),
        (["--count", "x"], "expected NAME=FILE:LINE or NAME=module:qualname"),
        (["--count", "x=lrucache.py:11", "--ratio", "x/y"], "no probe named 'y'"),
        (["--count", "x=lrucache.py:11", "--ratio", "__import__('os')"], "only probe names"),
        (
            ["--count", "x=lrucache.py:11", "--pid", "1"],
            "needs code loaded into it" if sys.version_info < (3, 14) else "give no program to run",
        ),
        ([], "nothing to count"),
    ],
)
def test_probe_errors_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    app(tmp_path)
    r = leadline("probe", *args, "app.py", cwd=tmp_path)
    assert r.returncode == 2
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr


# A program already running when the probe starts: lrucache is imported and `cache` made; it
# runs the key sequence (two threads, as APP) once `go` exists, and ends once `stop` exists.
RUNNING = """\
import os
import sys
import threading
import time

import lrucache


def keys():
    return [(i * 7 + (i // 13)) % 23 for i in range(3000)]


def run(cache):
    for k in keys():
        cache.get(k)


def wait_for(name):
    while not os.path.exists(name):
        time.sleep(0.005)


cache = lrucache.LRU(8)
print("ready", flush=True)
wait_for("go")
t = threading.Thread(target=run, args=(cache,))
t.start()
t.join()
run(cache)
print("done", flush=True)
if sys.argv[1:] == ["wait"]:
    wait_for("stop")
print("bye", flush=True)
"""

REMOTE = pytest.mark.skipif(sys.version_info < (3, 14), reason="sys.remote_exec is 3.14+")


def _start_running(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    write(tmp_path, "lrucache.py", CACHE)
    script = write(tmp_path, "running.py", RUNNING)
    p = subprocess.Popen(
        [sys.executable, str(script), *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None and p.stdout.readline() == "ready\n"
    return p


def _probe_pid(tmp_path: Path, pid: int, *opts: str) -> subprocess.Popen[str]:
    counts = ["--count", "hit=lrucache.py:11", "--count", "miss=lrucache.py:13"]
    counts += ["--count", "get=lrucache:LRU.get", "--ratio", "hit/(hit+miss)"]
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(tmp_path)}
    p = subprocess.Popen(
        [sys.executable, "-m", "leadline", "probe", "--pid", str(pid), *counts, "--json", *opts],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert p.stderr is not None
    line = p.stderr.readline()
    assert line.startswith(f"leadline: counting in process {pid}"), line + p.stderr.read()
    return p


@REMOTE
def test_probe_pid_counts_exactly_in_a_running_process(tmp_path: Path) -> None:
    target = _start_running(tmp_path, "wait")
    try:
        probe = _probe_pid(tmp_path, target.pid, "--duration", "3")
        (tmp_path / "go").touch()
        assert target.stdout is not None and target.stdout.readline() == "done\n"
        out, err = probe.communicate(timeout=60)
        assert probe.returncode == 0, err
        (tmp_path / "stop").touch()
        t_out, t_err = target.communicate(timeout=30)
    finally:
        target.kill()
        target.wait()
    data = json.loads(out)
    hits, misses = expected(8)
    assert data["counts"] == {"hit": hits, "miss": misses, "get": hits + misses}
    assert data["ratios"]["hit/(hit+miss)"] == pytest.approx(hits / (hits + misses))
    assert data["mechanism"] == "sys.monitoring local events"
    assert 2.5 < data["seconds"] < 10
    assert "hit" in err and "Traceback" not in err
    # The program saw nothing: its own output only, and it ran on after the probe.
    assert (t_out, t_err, target.returncode) == ("bye\n", "", 0)


@REMOTE
def test_probe_pid_reads_the_counts_a_program_leaves_at_exit(tmp_path: Path) -> None:
    target = _start_running(tmp_path)
    try:
        probe = _probe_pid(tmp_path, target.pid)  # until the program ends
        (tmp_path / "go").touch()
        out, err = probe.communicate(timeout=60)
        t_out, t_err = target.communicate(timeout=30)
    finally:
        target.kill()
        target.wait()
    assert probe.returncode == 0, err
    hits, misses = expected(8)
    assert json.loads(out)["counts"] == {"hit": hits, "miss": misses, "get": hits + misses}
    assert (t_out, t_err, target.returncode) == ("done\nbye\n", "", 0)


@REMOTE
def test_probe_pid_errors_are_one_line(tmp_path: Path) -> None:
    app(tmp_path)
    base = ["probe", "--count", "x=lrucache.py:11", "--pid"]
    r = leadline(*base, "999999999", cwd=tmp_path)
    assert r.returncode == 2 and "no such process" in r.stderr
    r = leadline(*base, "1", cwd=tmp_path)  # init: not a Python process
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    # A Python whose main thread never runs Python code again: told why, in one line.
    blocked = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; print(flush=True); sys.stdin.read(); sum(range(9))",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert blocked.stdout is not None
        blocked.stdout.readline()
        r = leadline(*base, str(blocked.pid), cwd=tmp_path, timeout=60)
        # When it does run Python again, the late script does nothing: no output, status 0.
        out, err = blocked.communicate(b"", timeout=30)
        assert (out, err, blocked.returncode) == (b"", b"", 0)
    finally:
        blocked.kill()
        blocked.wait()
    assert r.returncode == 2, r.stderr
    assert "did not run leadline's code" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_parse_count_and_ratio_units(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app(tmp_path)
    monkeypatch.chdir(tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        line = parse_count("hit=lrucache.py:11")
        assert (line.name, line.line, line.qualname) == ("hit", 11, "")
        func = parse_count("g=lrucache:LRU.get")
        assert (func.qualname, func.def_line) == ("LRU.get", 9)
        with pytest.raises(LeadlineError, match="must be an identifier"):
            parse_count("a b=lrucache.py:11")
    finally:
        sys.path.remove(str(tmp_path))
    r = parse_ratio("rate=hit/(hit+miss)", {"hit", "miss"})
    assert r.name == "rate"
    assert evaluate(r.tree, {"hit": 3, "miss": 1}) == 0.75
    assert evaluate(r.tree, {"hit": 0, "miss": 0}) is None
    assert evaluate(parse_ratio("-hit*2", {"hit"}).tree, {"hit": 4}) == -8
