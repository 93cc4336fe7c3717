"""Exports of sampling profiles (pprof, speedscope, collapsed stacks), checked by their consumers:
`go tool pprof` reads the pprof file, speedscope's own JSON schema validates the speedscope file,
and the folded lines are parsed back.  Profiles are built by hand (no sampler involved)."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from support import HOOK_KIND_ENDS, PY, Fields, decode, read_varint, run

from leadline import cli
from leadline.analyse.model import Frame, Metric, SampleProfile, Stack, Thread
from leadline.analyse.samples import load_profile
from leadline.analyse.samples import to_json as sampling_json
from leadline.capture.foreign import read_pprof
from leadline.capture.reader import Capture
from leadline.errors import LeadlineError
from leadline.render.encode import (
    NO_FRAMES,
    SPEEDSCOPE_SCHEMA,
    period_ns,
    to_collapsed,
    to_pprof,
    to_speedscope,
)

# What these test is version-independent logic (support.HOOK_KIND_ENDS).
pytestmark = HOOK_KIND_ENDS

REPO = Path(__file__).resolve().parent.parent
DEEP = 5000
MAIN, WORKER = 1, 2
PID = 4242


def sample_profile(memory: bool = True) -> SampleProfile:
    frames = [
        Frame("<module>", "app.py", 30, 1),  # 0
        Frame("Worker.compute", "app.py", 20, 18),  # 1
        Frame("Worker.compute", "app.py", 22, 18),  # 2: same function, another line
        Frame("naïve_函数", "módulo/ünï.py", 5, 4),  # 3
        Frame("weird;name", "dir;x/y.py", 3, 1),  # 4: ';' separates folded frames
        Frame("recurse", "deep.py", 7, 6),  # 5
        Frame("Thread.run", "threading.py", 1010, 1000),  # 6
    ]
    threads = [Thread(MAIN, PID, 100, "MainThread"), Thread(WORKER, PID, 101, "wörker-2")]
    ms = 1_000_000
    stacks = [
        Stack((0, 1), MAIN, samples=10, cpu_ns=90 * ms, rss_bytes=4096),
        Stack((0, 2), MAIN, samples=5, cpu_ns=40 * ms, rss_bytes=-8192),
        Stack((0,) + (5,) * (DEEP - 1), MAIN, samples=2, cpu_ns=20 * ms, rss_bytes=12288),
        Stack((6, 3), WORKER, samples=7, idle=2, cpu_ns=50 * ms, rss_bytes=1 << 20),
        Stack((6, 4), WORKER, samples=3, idle=3),
        Stack((0, 1), WORKER, samples=4, cpu_ns=10 * ms),  # the same frames as MainThread's
        Stack((6,), WORKER),  # weighs nothing: left out everywhere
    ]
    if not memory:
        for s in stacks:
            s.rss_bytes = 0
    return SampleProfile(
        mode="wall",
        rate_hz=100.0,
        duration_ns=3_000_000_000,
        start_unix_ns=1_700_000_000_123_456_789,
        samples=31,
        ticks=20,
        missed=1,
        torn=0,
        memory=memory,
        frames=frames,
        threads=threads,
        stacks=stacks,
        meta={"argv": ["app.py", "--fast"], "mode": "sample"},
    )


def thread_totals(profile: SampleProfile, metric: Metric) -> dict[int, int]:
    out: dict[int, int] = defaultdict(int)
    for s in profile.stacks:
        out[s.thread] += max(s.weight(metric), 0)
    return dict(out)


# -- pprof: a small protobuf decoder ----------------------------------------------------------
def packed(data: bytes, signed: bool = True) -> list[int]:
    out, pos = [], 0
    while pos < len(data):
        v, pos = read_varint(data, pos)
        out.append(v - (1 << 64) if signed and v >= 1 << 63 else v)
    return out


def scalar(fields: Fields, number: int) -> int:
    return int(fields[number][0]) if fields.get(number) else 0


def test_pprof_protobuf_layout() -> None:
    profile = sample_profile()
    top = decode(gzip.decompress(to_pprof(profile)))
    strings = [s.decode("utf-8") for s in top[6]]
    assert strings[0] == ""
    assert len(set(strings)) == len(strings)
    types_ = [decode(m) for m in top[1]]
    assert [(strings[scalar(t, 1)], strings[scalar(t, 2)]) for t in types_] == [
        ("samples", "count"),
        ("cpu", "nanoseconds"),
        ("wall", "nanoseconds"),
        ("rss", "bytes"),
    ]
    period_type = decode(top[11][0])
    assert (strings[scalar(period_type, 1)], strings[scalar(period_type, 2)]) == (
        "wall",
        "nanoseconds",
    )
    assert scalar(top, 12) == 10_000_000 == period_ns(profile)
    assert scalar(top, 9) == profile.start_unix_ns
    assert scalar(top, 10) == profile.duration_ns
    assert strings[scalar(top, 14)] == "wall"

    functions = {scalar(f, 1): f for f in map(decode, top[5])}
    function_names = {strings[scalar(f, 2)] for f in functions.values()}
    assert function_names == {f.name for f in profile.frames}  # Worker.compute once
    assert len(functions) == len(profile.frames) - 1
    assert not any(f.get(3) for f in functions.values())  # no system_name: nothing to demangle
    locations = {scalar(loc, 1): decode(loc[4][0]) for loc in map(decode, top[4])}
    assert len(locations) == len(profile.frames)  # one per (function, line)

    def frame_of(loc_id: int) -> tuple[str, int]:
        line = locations[loc_id]
        return strings[scalar(functions[scalar(line, 1)], 2)], scalar(line, 2)

    samples = [decode(s) for s in top[2]]
    assert len(samples) == len(profile.stacks) - 1  # the stack weighing nothing is left out
    for sample, stack in zip(samples, profile.stacks, strict=False):
        leaf_first = [frame_of(i) for i in packed(sample[1][0], signed=False)]
        expected = [(profile.frames[i].name, profile.frames[i].line) for i in stack.frames]
        assert leaf_first == expected[::-1]
        assert packed(sample[2][0]) == [
            stack.samples,
            stack.cpu_ns,
            stack.samples * 10_000_000,
            stack.rss_bytes,  # negative values survive (two's complement varints)
        ]
        labels = {strings[scalar(lab, 1)]: lab for lab in map(decode, sample[3])}
        assert strings[scalar(labels["thread"], 2)] == profile.thread(stack.thread).name
        assert scalar(labels["pid"], 3) == PID


def test_pprof_sample_types_follow_the_profile() -> None:
    top = decode(gzip.decompress(to_pprof(sample_profile(memory=False))))
    strings = [s.decode("utf-8") for s in top[6]]
    assert [strings[scalar(decode(t), 1)] for t in top[1]] == ["samples", "cpu", "wall"]
    top = decode(gzip.decompress(to_pprof(sample_profile(), metric_set=["cpu", "samples"])))
    strings = [s.decode("utf-8") for s in top[6]]
    assert [strings[scalar(decode(t), 1)] for t in top[1]] == ["samples", "cpu"]
    with pytest.raises(LeadlineError, match="no memory"):
        to_pprof(sample_profile(memory=False), metric_set=["memory"])


# -- pprof: go tool pprof reads it ------------------------------------------------------------
def go_pprof(*args: str | Path, tmp_path: Path) -> str:
    go = shutil.which("go")
    assert go is not None, "tests using go_pprof are marked @pytest.mark.go"
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "", "PPROF_TMPDIR": str(tmp_path)}
    if not (env.get("GOCACHE") or env.get("XDG_CACHE_HOME") or env.get("HOME")):
        env["GOCACHE"] = str(tmp_path / "go-cache")
    # The first run may build pprof from the Go distribution's sources (half a minute).
    r = subprocess.run(
        [go, "tool", "pprof", *map(str, args)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


SAMPLE_LINE = re.compile(r"^\s*(-?\d+(?:\s+-?\d+)*):((?:\s+\d+)*)\s*$")
LABEL_LINE = re.compile(r"^\s+(\w+):\[(.*)\]$")
# `s=START(SYSTEM_NAME)`: the export leaves the system name empty
LOCATION_LINE = re.compile(r"^\s*(\d+): 0x[0-9a-f]+ M=\d+ (.+) (\S*):(\d+):\d+ s=\d+\(\)$")


def parse_raw(text: str) -> tuple[list[str], list[dict[str, Any]], dict[int, tuple[str, str, int]]]:
    """`go tool pprof -raw`: the sample types, the samples (values, locations, labels) and the
    locations (function, file, line)."""
    lines = text.splitlines()
    start = lines.index("Samples:")
    header = lines[start + 1].split()
    samples: list[dict[str, Any]] = []
    locations: dict[int, tuple[str, str, int]] = {}
    section = "samples"
    for line in lines[start + 2 :]:
        if line in ("Locations", "Mappings"):
            section = line
        elif section == "samples" and (m := SAMPLE_LINE.match(line)):
            values = [int(v) for v in m[1].split()]
            samples.append({"values": values, "locs": [int(i) for i in m[2].split()], "labels": {}})
        elif section == "samples" and (m := LABEL_LINE.match(line)):
            samples[-1]["labels"][m[1]] = m[2]
        elif section == "Locations" and (m := LOCATION_LINE.match(line)):
            locations[int(m[1])] = (m[2], m[3], int(m[4]))
        elif section == "samples":
            raise AssertionError(f"unexpected line in pprof -raw: {line!r}")
    return header, samples, locations


@pytest.mark.go
def test_go_tool_pprof_reads_the_export(tmp_path: Path) -> None:
    profile = sample_profile()
    path = tmp_path / "profile.pb.gz"
    path.write_bytes(to_pprof(profile))

    header, samples, locations = parse_raw(go_pprof("-raw", path, tmp_path=tmp_path))
    assert header == ["samples/count", "cpu/nanoseconds", "wall/nanoseconds[dflt]", "rss/bytes"]
    totals = [sum(s["values"][i] for s in samples) for i in range(4)]
    assert totals == [
        profile.total("samples"),
        profile.total("cpu"),
        profile.total("samples") * 10_000_000,
        profile.total("memory"),
    ]
    names = {name for name, _file, _line in locations.values()}
    assert names == {f.name for f in profile.frames}  # unicode and ';' intact
    assert ("naïve_函数", "módulo/ünï.py", 5) in locations.values()
    deep = [s for s in samples if len(s["locs"]) == DEEP]
    assert len(deep) == 1
    assert [locations[i][0] for i in deep[0]["locs"]] == ["recurse"] * (DEEP - 1) + ["<module>"]
    per_thread = Counter[str]()
    for s in samples:
        assert s["labels"]["pid"] == str(PID)
        per_thread[s["labels"]["thread"]] += s["values"][0]
    assert per_thread == {"MainThread": 17, "wörker-2": 14}

    top = go_pprof(
        "-top", "-sample_index=cpu", "-unit=ns", "-nodecount=1000", path, tmp_path=tmp_path
    )
    total = profile.total("cpu")
    assert f"Showing nodes accounting for {total}ns, 100% of {total}ns total" in top
    flat = {}
    for line in top.splitlines():
        m = re.match(r"^\s*(\d+)(?:ns)?\s+[\d.]+%\s+[\d.]+%\s+\S+\s+[\d.]+%\s+(.+)$", line)
        if m:
            flat[m[2]] = int(m[1])
    assert sum(flat.values()) == total
    assert flat["Worker.compute"] == 140_000_000  # two lines, two threads, one function
    assert flat["naïve_函数"] == 50_000_000
    assert flat["<module>"] == 0


def test_pprof_keeps_a_sample_without_frames(tmp_path: Path) -> None:
    """A thread sampled while it ran no Python code (start-up, shutdown) keeps its weight under
    one location of its own: Pyroscope's ingest drops a Sample without locations, and its
    pushed total came out one short of the agent's count."""
    profile = sample_profile()
    profile.stacks.append(Stack((), WORKER, samples=2, cpu_ns=7_000_000))
    path = tmp_path / "profile.pb.gz"
    path.write_bytes(to_pprof(profile))
    _header, samples, locations = parse_raw(go_pprof("-raw", path, tmp_path=tmp_path))
    assert all(s["locs"] for s in samples)
    assert sum(s["values"][0] for s in samples) == profile.total("samples") == 33
    bare = [s for s in samples if [locations[i][0] for i in s["locs"]] == [NO_FRAMES]]
    assert [(s["values"][:2], s["labels"]["thread"]) for s in bare] == [
        ([2, 7_000_000], "wörker-2")
    ]
    back = read_pprof("profile.pb.gz", path.read_bytes())
    assert [w for frames, w in back.stacks if [f.name for f in frames] == [NO_FRAMES]] == [2.0]


# -- speedscope -------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def speedscope_schema() -> dict[str, Any]:
    """speedscope's JSON schema of its file format, from its npm package (cached outside the
    repository by tools/ensure-speedscope-schema, which `make test` runs first)."""
    r = subprocess.run(
        [str(REPO / "tools" / "ensure-speedscope-schema")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    schema: dict[str, Any] = json.loads(Path(r.stdout.strip()).read_text(encoding="utf-8"))
    return schema


def declared(schema: dict[str, Any], definition: str) -> set[str]:
    return set(schema["definitions"][definition]["properties"])


@pytest.mark.parametrize("metric", ["samples", "cpu", "memory"])
def test_speedscope_matches_the_schema(metric: Metric, speedscope_schema: dict[str, Any]) -> None:
    profile = sample_profile()
    doc = json.loads(json.dumps(to_speedscope(profile, metric)))
    jsonschema.Draft7Validator(speedscope_schema).validate(doc)
    # the schema allows any extra key: check that ours are all keys it knows
    assert set(doc) <= declared(speedscope_schema, "FileFormat.File")
    assert doc["$schema"] == SPEEDSCOPE_SCHEMA
    assert doc["exporter"].startswith("leadline ")
    frame_keys = declared(speedscope_schema, "FileFormat.Frame")
    assert all(set(f) <= frame_keys for f in doc["shared"]["frames"])
    assert [f["name"] for f in doc["shared"]["frames"]] == [f.name for f in profile.frames]

    unit = {"samples": "none", "cpu": "nanoseconds", "memory": "bytes"}[metric]
    totals = thread_totals(profile, metric)
    names = {"MainThread (tid 100)": MAIN, "wörker-2 (tid 101)": WORKER}
    assert [p["name"] for p in doc["profiles"]] == list(names)
    for p in doc["profiles"]:
        assert set(p) <= declared(speedscope_schema, "FileFormat.SampledProfile")
        assert p["type"] == "sampled" and p["unit"] == unit
        assert sum(p["weights"]) == p["endValue"] == totals[names[p["name"]]]
        assert len(p["samples"]) == len(p["weights"])
        assert all(w > 0 for w in p["weights"])
    main = doc["profiles"][0]
    assert main["samples"][0] == [0, 1]  # outermost first
    if metric != "memory":  # the memory view leaves out the stack that gave memory back
        assert main["samples"][2] == [0] + [5] * (DEEP - 1)
    heaviest = max(doc["profiles"], key=lambda p: p["endValue"])
    assert doc["profiles"][doc["activeProfileIndex"]] is heaviest


def test_speedscope_refuses_memory_without_rss() -> None:
    with pytest.raises(LeadlineError, match="no memory"):
        to_speedscope(sample_profile(memory=False), "memory")


# -- collapsed stacks -------------------------------------------------------------------------
def parse_collapsed(text: str) -> list[tuple[list[str], int]]:
    assert text.endswith("\n")
    out = []
    for line in text.splitlines():
        stack, _, weight = line.rpartition(" ")
        out.append((stack.split(";"), int(weight)))
    return out


@pytest.mark.parametrize("metric", ["samples", "cpu", "memory"])
def test_collapsed_parses_back(metric: Metric) -> None:
    profile = sample_profile()
    rows = parse_collapsed(to_collapsed(profile, metric))
    assert sum(w for _, w in rows) == sum(thread_totals(profile, metric).values())
    assert all(w > 0 for _, w in rows)
    assert len({tuple(f) for f, _ in rows}) == len(rows)  # identical stacks merged
    by_stack = dict((tuple(f), w) for f, w in rows)
    assert by_stack[("<module> (app.py:30)", "Worker.compute (app.py:20)")] == sum(
        s.weight(metric) for s in profile.stacks if s.frames == (0, 1)
    )
    if metric != "memory":
        deep = by_stack[("<module> (app.py:30)",) + ("recurse (deep.py:7)",) * (DEEP - 1)]
        assert deep == profile.stacks[2].weight(metric)


def test_collapsed_threads_and_untrusted_names() -> None:
    profile = sample_profile()
    profile.frames.append(Frame("two\nlines", "a;b\r.py", 1, 1))
    profile.stacks.append(Stack((6, 7), WORKER, samples=1))
    profile.stacks.append(Stack((), WORKER, samples=2))
    rows = parse_collapsed(to_collapsed(profile, "samples", threads=True))
    assert rows[0] == (
        ["thread (MainThread)", "<module> (app.py:30)", "Worker.compute (app.py:20)"],
        10,
    )
    frames = {f for stack, _ in rows for f in stack}
    assert "weird:name (dir:x/y.py:3)" in frames
    assert "two lines (a:b .py:1)" in frames
    assert "naïve_函数 (módulo/ünï.py:5)" in frames
    assert (["thread (wörker-2)"], 2) in rows  # a stack without frames keeps its weight
    per_thread = Counter[str]()
    for stack, weight in rows:
        per_thread[stack[0]] += weight
    assert per_thread == {"thread (MainThread)": 17, "thread (wörker-2)": 17}
    assert ([NO_FRAMES], 2) in parse_collapsed(to_collapsed(profile, "samples"))


# -- the renderers behind `leadline export`, on real captures ------------------------------
TRACE_PROGRAM = "import leadline.record.tracer as t\nr = t.Tracer({path!r}).start()\n"
TRACE_PROGRAM += "sum(range(100))\nr.stop()\n"
# a: 2.4 s, b: 0.8 s (truth 3.0).  On a busy machine a thread held off its CPU, or a sampler
# held up, for a stretch near the end of a has half that stretch counted in b (docs/run.md,
# "Busy machines"): a > 2 b holds unless one such stretch is longer than 0.53 s.  At 0.3 s and
# 0.1 s it took 33 ms (under AddressSanitizer on a busy machine a run came out 130 to 66); at
# 0.9 s and 0.3 s, 0.2 s, and a quiet CI stage's run came out 375 to 229 (a stretch of 0.3 s).
SAMPLED_PROGRAM = """
import time
def spin(s):
    t = time.time()
    while time.time() - t < s:
        pass
def a():
    spin(2.4)
def b():
    spin(0.8)
a(); b()
"""


def capture(tmp_path: Path, mode: str) -> Path:
    """A real capture: a trace, or a sampling profile recorded by `leadline run`."""
    path = tmp_path / f"{mode}.lead"
    if mode == "trace":
        code = TRACE_PROGRAM.format(path=str(path))
        run([PY, "-c", code], check=True, cwd=tmp_path, timeout=120)
    else:
        script = tmp_path / "prog.py"
        script.write_text(SAMPLED_PROGRAM)
        run(
            [PY, "-m", "leadline", "run", "-q", "--rate", "500", "-o", str(path), str(script)],
            check=True,
            cwd=tmp_path,
            timeout=120,
        )
    return path


@pytest.fixture
def sampled(tmp_path: Path) -> tuple[Path, SampleProfile]:
    cap = capture(tmp_path, "sample")
    with Capture(cap) as c:
        return cap, load_profile(c)


@pytest.mark.statistical
@pytest.mark.go
def test_export_command_writes_each_format(
    tmp_path: Path, sampled: tuple[Path, SampleProfile], capsys: pytest.CaptureFixture[str]
) -> None:
    cap, profile = sampled
    assert cli.main(["export", str(cap), "--format", "pprof"]) == 0
    pprof = tmp_path / "sample.pprof.pb.gz"
    assert pprof.read_bytes() == to_pprof(profile)
    _, samples, _ = parse_raw(go_pprof("-raw", pprof, tmp_path=tmp_path))
    assert len(samples) == len([s for s in profile.stacks if s.samples])
    # The same totals as leadline's own report.
    top = go_pprof("-top", "-sample_index=samples", pprof, tmp_path=tmp_path)
    assert f"of {profile.total('samples')} total" in top.replace(",", "")
    report = sampling_json(profile, idle=True)
    rows = {f["name"]: f for f in report["functions"]}
    assert rows["a"]["total"] > 2 * rows["b"]["total"] > 0

    out = tmp_path / "s.json"
    assert cli.main(["export", str(cap), "--format", "speedscope", "-o", str(out)]) == 0
    assert json.loads(out.read_text("utf-8")) == to_speedscope(profile, "samples")
    out = tmp_path / "c.txt"
    args = ["export", str(cap), "--format", "collapsed", "--metric", "cpu", "-o", str(out)]
    assert cli.main(args) == 0
    assert out.read_text("utf-8") == to_collapsed(profile, "cpu")
    assert capsys.readouterr().err == ""


class FakeStdout(io.TextIOWrapper):
    def __init__(self, tty: bool) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8")
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_binary_export_to_stdout(
    tmp_path: Path,
    sampled: tuple[Path, SampleProfile],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cap, profile = sampled
    piped = FakeStdout(tty=False)
    monkeypatch.setattr(sys, "stdout", piped)
    assert cli.main(["export", str(cap), "--format", "pprof", "-o", "-"]) == 0
    assert piped.buffer.getvalue() == to_pprof(profile)  # type: ignore[attr-defined]

    terminal = FakeStdout(tty=True)
    monkeypatch.setattr(sys, "stdout", terminal)
    assert cli.main(["export", str(cap), "--format", "pprof", "-o", "-"]) == 2
    assert terminal.buffer.getvalue() == b""  # type: ignore[attr-defined]
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "leadline: error: binary output is not written to a terminal: "
        "use -o FILE or redirect stdout"
    ]


@pytest.mark.parametrize("fmt", ["pprof", "speedscope", "collapsed"])
def test_trace_capture_is_refused(tmp_path: Path, fmt: str) -> None:
    cap = capture(tmp_path, "trace")
    out = tmp_path / "out"
    r = run(
        [PY, "-m", "leadline", "export", str(cap), "--format", fmt, "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        f"leadline: error: {fmt} export needs a sampling capture (leadline run); "
        f"{cap} is a trace capture"
    ]
    assert not out.exists()  # no empty or half-written output left behind
