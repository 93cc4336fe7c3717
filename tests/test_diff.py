"""`leadline diff`: matching, normalisation, noise and ranking on profiles built by hand, then
through the real CLI on captures, pprof files and collapsed stacks of real runs."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import math
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import htmlpage
import pytest
from diffsides import named, side_of
from support import HOOK_KIND_ENDS, at_hook_kind_ends, flagged_rows, leadline, run, write

from leadline.analyse.diff import (
    Func,
    Settings,
    Side,
    compare,
    fail_reasons,
    fleet_side,
    match_functions,
    module_path,
    parse_per,
)
from leadline.analyse.model import Frame, SampleProfile, Stack, Thread, row_spread
from leadline.capture.foreign import parse_frame_label, read_collapsed, read_pprof
from leadline.capture.reader import Capture
from leadline.errors import LeadlineError
from leadline.fleet.pyroscope import FLEET_CPU_METRICS, FleetQuery, parse_fleet_url
from leadline.render.base import RenderOptions, get_renderer, renderers
from leadline.render.encode import to_collapsed, to_pprof

# ---------------------------------------------------------------------------------------------
# Profiles built by hand


def side(
    stacks: dict[tuple[str, ...], float],
    *,
    measure: str = "cpu",
    files: dict[str, str] | None = None,
    kind: str = "sample",
    rate: float = 1000.0,
) -> Side:
    """A sampled side: stacks of function names (outermost first) with sample counts."""
    files = files or {}
    default = "/venv/lib/python3.12/site-packages/app/{}.py"
    return side_of(
        named(stacks, lambda n: files.get(n, default.format(n))),
        path=f"{kind}.lead",
        kind=kind,
        measure=measure,
        rate=rate,
    )


def fifty(slow: int = -1, factor: float = 3.0, scale: float = 1.0) -> dict[tuple[str, ...], float]:
    """`main` calling 50 functions of 100 samples each (times `scale`); one `factor` slower."""
    return {
        ("main", f"f{i:02d}"): 100.0 * scale * (factor if i == slow else 1.0) for i in range(50)
    }


def by_name(result: Any) -> dict[str, Any]:
    return {fd.func.name: fd for fd in result.functions}


def read_side(stacks: dict[tuple[str, ...], float], read: float) -> Side:
    """A sampling capture's side whose reads weigh `read` each (what its sampler's evidence
    is: a run whose reads were mostly deferred has fewer, heavier ones)."""
    s = side(stacks)
    s.squares, s.quantum = True, read
    s.node_var = [w * read for w in s.weight]
    return s


def test_a_stacks_weight_varies_as_the_reads_it_came_from() -> None:
    # 60 records of 0.26 ms, all but one weight given to that one read: it is one draw of
    # 15.6 ms, not 60 of 0.26.
    given = Stack((), 1, samples=60, cpu_ns=15_600_000, cpu_sq=60 * 260_000.0**2, reads=1)
    assert row_spread(given, 15.6e6, given.cpu_sq, idle=False) == 15.6e6**2
    # Every record a read: the records' own squares.
    reads = Stack((), 1, samples=60, cpu_ns=15_600_000, cpu_sq=60 * 260_000.0**2, reads=60)
    assert row_spread(reads, 15.6e6, reads.cpu_sq, idle=False) == 60 * 260_000.0**2
    # Reads that found the thread idle are no evidence of where its time went (unless asked).
    idle = Stack((), 1, samples=4, idle=2, cpu_ns=4_000_000, reads=4, idle_reads=2)
    assert row_spread(idle, 4e6, 4e12, idle=False) == 8e12
    assert row_spread(idle, 4e6, 4e12, idle=True) == 4e12
    # No read at all (weight given to a stack read at an idle moment): one draw.
    assert row_spread(Stack((), 1, samples=3, cpu_ns=3), 3.0, 3.0, idle=False) == 9.0


def agent_push(stacks: list[Stack]) -> SampleProfile:
    """What the fleet agent folds from one period: cpu mode, 100 Hz, functions a and b."""
    return SampleProfile(
        mode="cpu", rate_hz=100.0, duration_ns=10**9, start_unix_ns=0, samples=40, ticks=100,
        missed=0, torn=0, memory=False, threads=[Thread(1, 7, 7, "MainThread")],
        frames=[Frame("a", "svc.py", 3, 1), Frame("b", "svc.py", 9, 7)], stacks=stacks,
    )  # fmt: skip


def test_a_fleet_side_is_as_sure_as_the_reads_the_agent_pushed() -> None:
    """The agent pushes each stack's spread (cpu_spread) beside its CPU time and records; the
    fleet side's noise is that spread, at least what the records give (pushes without one)."""
    ms = 1_000_000
    push = agent_push([
        # 100 ms from two fair reads of 50 ms (a busy machine), written as 10 records...
        Stack((0,), 1, samples=10, cpu_ns=100 * ms, cpu_sq=10 * (10.0 * ms) ** 2, reads=2),
        # ...and 100 ms from ten reads of 10 ms each.
        Stack((1,), 1, samples=10, cpu_ns=100 * ms, cpu_sq=10 * (10.0 * ms) ** 2, reads=10),
    ])  # fmt: skip
    # Each metric's pprof, by its sample type's name (the second field of a profile type).
    answers: dict[str, bytes] = {
        m: gzip.decompress(to_pprof(push, (m,), ())) for m in FLEET_CPU_METRICS
    }

    def fetch(q: FleetQuery) -> bytes:
        name = q.profile_type.split(":")[1]
        if name not in answers:
            raise LeadlineError(f"{q.shown}: the query failed (no such profile type)")
        return answers[name]

    query = parse_fleet_url("pyroscope://127.0.0.1:4040/svc?from=now-10m")
    side = fleet_side(query, fetch)
    assert side.total == 200 * ms and side.squares
    var = {side.funcs[side.tree.key[n]].name: v for n, v in enumerate(side.node_var) if n}
    assert var == {
        "a": pytest.approx(2 * (50.0 * ms) ** 2),
        "b": pytest.approx(10 * (10.0 * ms) ** 2),
    }
    assert side.quantum == pytest.approx((5e15 + 1e15) / (200 * ms))  # 30 ms, not 10

    # An older agent's pushes (no spread) or another profiler's: one record, one read.
    del answers["cpu_spread"]
    side = fleet_side(query, fetch)
    assert not side.squares and side.quantum == pytest.approx(10 * ms)

    # A hostile server's negative spread is none: each stack keeps what its records give it.
    negative = [dataclasses.replace(st, rss_bytes=-(10**12)) for st in push.stacks]
    answers["cpu_spread"] = gzip.decompress(
        to_pprof(dataclasses.replace(push, stacks=negative, memory=True), ("memory",), ())
    )
    side = fleet_side(query, fetch)
    assert side.quantum == pytest.approx(10 * ms)


def test_a_function_missing_from_a_side_is_as_unsure_as_that_sides_reads() -> None:
    """An import at 5% of a run seen in its twin not at all: beyond noise when the twin read
    as often, within it when the twin's reads were ten times fewer and heavier (a sampler that
    deferred most of its reads), which can miss a phase of 50 ms altogether."""
    base = {("main", "work"): 950.0, ("main", "imports"): 50.0}
    again = {("main", "work"): 1000.0}
    dense = by_name(compare(read_side(base, 1.0), read_side(again, 1.0)))["imports"]
    assert dense.total.sig == -1 and dense.self_.sig == -1
    thin = by_name(compare(read_side(base, 1.0), read_side(again, 10.0)))["imports"]
    assert thin.total.sig == 0 and thin.self_.sig == 0
    # Counting noise at the shared 2.5%, with each side's read (1 and 10 of 1000), and the
    # run-to-run floor of BASE's 5% (10% of it).
    assert thin.total.noise == pytest.approx(math.sqrt(0.025 * 0.975 * 0.011 + 0.005**2))
    assert dense.total.noise == pytest.approx(math.sqrt(0.025 * 0.975 * 0.002 + 0.005**2))


def test_module_path_ignores_where_a_package_is_installed() -> None:
    assert module_path("/a/venv1/lib/python3.11/site-packages/pkg/mod.py") == "pkg/mod.py"
    assert module_path("/b/.venv/lib64/python3.13/site-packages/pkg/mod.py") == "pkg/mod.py"
    assert module_path("/usr/lib/python3/dist-packages/pkg/mod.py") == "pkg/mod.py"
    assert module_path("/root/.pyenv/versions/3.12.1/lib/python3.12/json/decoder.py") == (
        "json/decoder.py"
    )
    assert module_path("/srv/app/main.py") == "/srv/app/main.py"


def test_matching_survives_line_changes_installs_and_moves() -> None:
    base = Side(
        "b",
        "sample",
        "cpu",
        "samples",
        1,
        1e-3,
        [
            Func("Parser.parse", "/v1/lib/python3.11/site-packages/pkg/parser.py", 10),
            Func("helper", "/v1/lib/python3.11/site-packages/pkg/util.py", 5),
            Func("<module>", "/v1/lib/python3.11/site-packages/pkg/a.py", 1),
            Func("<module>", "/v1/lib/python3.11/site-packages/pkg/b.py", 1),
            Func("only_base", "/v1/x.py", 1),
        ],
        [],
    )
    new = Side(
        "n",
        "sample",
        "cpu",
        "samples",
        1,
        1e-3,
        [
            Func(
                "Parser.parse", "/v2/lib/python3.11/site-packages/pkg/parser.py", 40
            ),  # lines moved
            Func(
                "helper", "/v2/lib/python3.11/site-packages/pkg/_impl/helpers.py", 5
            ),  # file moved
            Func("<module>", "/v2/lib/python3.11/site-packages/pkg/b.py", 1),
            Func("<module>", "/v2/lib/python3.11/site-packages/pkg/c.py", 1),
            Func("only_new", "/v2/y.py", 1),
        ],
        [],
    )
    funcs, bmap, nmap = match_functions(base, new)
    assert bmap[0] == nmap[0]
    assert bmap[1] == nmap[1]  # matched by its unique name when its file moved
    assert bmap[3] == nmap[2]  # <module> of pkg/b.py
    assert bmap[2] != nmap[3]  # two different modules' <module> are never matched by name
    assert len(funcs) == 7 and len(set(bmap) | set(nmap)) == 7


def test_the_slower_function_ranks_first_and_nothing_else_is_flagged() -> None:
    r = compare(side(fifty()), side(fifty(slow=17)))
    first = r.functions[0]
    assert first.func.name == "f17" and first.rank == 1
    assert first.self_.sig == 1
    assert first.self_.ratio == pytest.approx(3 * 5000 / 5200)
    assert first.self_.base == pytest.approx(0.02)
    assert first.self_.new == pytest.approx(300 / 5200)
    # Every other function lost share (the total grew), by less than the noise allows.
    assert [fd.func.name for fd in r.grew] == ["f17"]
    assert r.shrank == []
    # main's total share is 100% on both sides: no change.
    assert by_name(r)["main"].total.delta == pytest.approx(0)
    # Its caller is main, carrying all of the growth.
    ((index, rows),) = r.callers
    assert r.functions[index].func.name == "f17"
    assert r.functions[rows[0][0]].func.name == "main"
    assert rows[0][1].delta == pytest.approx(first.self_.delta)


def test_identical_runs_flag_nothing_and_noise_is_poisson() -> None:
    r = compare(side(fifty()), side(fifty(scale=1.1)), Settings(floor=0.0))
    assert r.grew == [] and r.shrank == []
    f = by_name(r)["f03"]
    # Shares of 100/5000 and 110/5500: equal; the noise is the two binomial terms.
    assert f.self_.delta == pytest.approx(0)
    p = 0.02
    assert f.self_.noise == pytest.approx((p * (1 - p) / 5000 + p * (1 - p) / 5500) ** 0.5)
    # Per unit of work a count is Poisson: 100 samples of 1 ms, 110 of 1 ms in 1.1 units.
    r = compare(side(fifty()), side(fifty(scale=1.1)), Settings(per=(1, 1.1), floor=0.0))
    f = by_name(r)["f03"]
    assert f.self_.noise == pytest.approx((100 * 1e-6 + 110 * 1e-6 / 1.21) ** 0.5)


def test_small_counts_are_within_noise() -> None:
    base = {("main", "a"): 1000.0, ("main", "rare"): 2.0}
    new = {("main", "a"): 1000.0, ("main", "rare"): 6.0}
    r = compare(side(base), side(new))
    assert by_name(r)["rare"].self_.ratio == pytest.approx(6 * 1002 / 2 / 1006)
    assert r.grew == []  # x3 of 2 samples is well within counting noise


def test_a_function_seen_on_one_side_only_is_uncertain_on_both() -> None:
    """Counting noise is taken at the value both sides would share if nothing had changed, as
    a two-sample test does: 30 samples of 3,000 in NEW and none of BASE's 300 are not "0 for
    certain" in BASE, where 300 samples could easily have missed a 1% function."""
    base = {("main", "a"): 300.0}
    new = {("main", "a"): 2970.0, ("main", "appeared"): 30.0}
    r = compare(side(base), side(new), Settings(floor=0.0))
    f = by_name(r)["appeared"].self_
    at = 0.01 / 2
    assert f.noise == pytest.approx((at * (1 - at) * (1 / 300 + 1 / 3000)) ** 0.5)
    # 2.3 sigma: within noise (taken at 0 in BASE and 1% in NEW, it was 5.5 sigma, flagged).
    assert f.sig == 0 and 2 < f.delta / f.noise < 2.5
    # With as many samples on both sides, 1% from nothing is beyond noise.
    r = compare(side({("main", "a"): 3000.0}), side(new), Settings(floor=0.0))
    assert by_name(r)["appeared"].self_.sig == 1


def test_raced_stack_reads_widen_the_floor() -> None:
    """A capture whose sampler had to read a third of its stacks again (the program changed
    them under it) may name callers for the functions that ran: its shares are no surer than
    that.  The same change is beyond noise between two clean captures, not with that one."""
    base = {("main", "caller"): 2000.0, ("main", "caller", "leaf"): 8000.0}
    new = {("main", "caller"): 4000.0, ("main", "caller", "leaf"): 6000.0}
    clean = compare(side(base), side(new))
    assert [fd.func.name for fd in clean.grew] == ["caller"]
    raced = side(new)
    raced.racy = 0.3
    r = compare(side(base), raced)
    assert r.grew == [] and r.shrank == []
    caller = by_name(r)["caller"].self_
    # The raced fraction of the share both sides would have if nothing had changed (30%).
    assert caller.noise > 0.3 * 0.3


def test_per_unit_of_work() -> None:
    # NEW did twice the work in twice the samples: per unit nothing changed.
    r = compare(side(fifty()), side(fifty(scale=2.0)), Settings(per=(100, 200)))
    assert r.unit == "s"
    assert r.settings.floor == 0.15  # machine speed varies between runs: a wider floor
    assert r.grew == [] and r.shrank == []
    f = by_name(r)["f00"]
    assert f.self_.base == pytest.approx(100 / 1000 / 100)  # 1 ms of samples per unit
    assert f.self_.new == pytest.approx(f.self_.base)
    # Told both did the same work, everything doubled: every function grew.
    r = compare(side(fifty(scale=10)), side(fifty(scale=20)), Settings(per=(100, 100), floor=0.03))
    assert len([fd for fd in r.grew if fd.func.name.startswith("f")]) == 50
    # A uniform slowdown that shares cannot see, per unit is seen.
    r = compare(side(fifty()), side(fifty(scale=2.0)))
    assert r.grew == []


def test_fail_reasons_need_growth_beyond_noise() -> None:
    r = compare(side(fifty()), side(fifty(slow=17)))
    f17 = r.functions[0].self_
    # Share 2% -> 5.77%: +188%; less 4 sigma of noise, still +45% (binomial noise of 100 and
    # 300 samples, and the 10% floor on both sides).
    at_least = (f17.delta - 4 * f17.noise) / f17.base * 100
    assert 40 < at_least < 50
    reasons = fail_reasons(r, 40)
    assert reasons == [
        f"f17 (app/f17.py) self cost grew 188% (at least {at_least:.0f}% beyond noise)"
    ]
    assert fail_reasons(r, 50) == []
    quiet = compare(side(fifty()), side(fifty()))
    assert fail_reasons(quiet, 0) == []


def test_incomparable_measures_are_refused() -> None:
    with pytest.raises(LeadlineError, match=r"cannot compare .* wall-mode .* cpu-mode"):
        compare(side(fifty(), measure="wall"), side(fifty(), measure="cpu"))
    trace = side(fifty(), measure="trace", kind="trace")
    with pytest.raises(LeadlineError, match="a trace capture"):
        compare(trace, side(fifty()))
    # Plain samples (collapsed stacks) compare with either mode.
    compare(side(fifty(), measure="samples", kind="collapsed"), side(fifty()))


def test_parse_per() -> None:
    assert parse_per("1000") == (1000, 1000)
    assert parse_per("1000,2000") == (1000, 2000)
    for bad in ("0", "-1", "x", "1,2,3", "nan", ""):
        with pytest.raises(LeadlineError, match="--per"):
            parse_per(bad)


def test_outputs_are_the_renderers_of_kind_diff() -> None:
    """The text, JSON and HTML of a diff are renderers of the registry, as every output is."""
    r = compare(side(fifty()), side(fifty(slow=17)), Settings(tree=True))
    found = renderers()
    assert {f for f, k in found if k == "diff"} == {"text", "json", "html"}
    out = io.StringIO()
    get_renderer("json", "diff").render(r, out, RenderOptions(limit=2))
    data = json.loads(out.getvalue())
    assert data["kind"] == "diff" and data["summary"] == {"grew": 1, "shrank": 0, "functions": 51}
    assert [f["name"] for f in data["functions"]] == ["f17", "f00"]  # ranked; limit 2
    assert data["functions"][0]["ratio_self"] == pytest.approx(3 * 5000 / 5200)
    out = io.StringIO()
    get_renderer("text", "diff").render(r, out, RenderOptions(limit=3))
    text = out.getvalue().splitlines()
    assert text[0].startswith("BASE: sample.lead (a cpu-mode sampling capture)")
    head = text.index(next(ln for ln in text if ln.startswith("#  BASE SELF")))
    rows = [ln.split() for ln in text[head + 1 : head + 4]]
    assert text[head + 4] == ""  # --limit 3: three rows
    assert [row[0] for row in rows] == ["1", "2", "3"]
    assert rows[0][1:5] == ["2.00%", "5.77%", "+3.77", "pp▲"] and "f17" in rows[0]
    assert text[head + 5] == "Callers of #1 f17 (app/f17.py), its total cost 2.00% -> 5.77%:"
    assert text[-1] == "1 function grew beyond noise, 0 shrank."
    out = io.StringIO()
    get_renderer("html", "diff").render(r, out, RenderOptions(limit=2))
    doc = json.loads(htmlpage.embedded_json(out.getvalue()))
    assert len(doc["functions"]) == 51 and doc["functions"][0]["name"] == "f17"  # every one
    assert len(doc["tree"]["parent"]) == 52  # the root, main, and its 50 callees
    # A capture is told which captures a format takes, never that a diff would do.
    with pytest.raises(LeadlineError) as refused:
        get_renderer("html", "probe", "p.lead", "report")
    assert str(refused.value) == (
        "html report needs a sampling capture (leadline run) or a trace capture (leadline "
        "trace); p.lead is a probe capture"
    )


# ---------------------------------------------------------------------------------------------
# Reading pprof and collapsed stacks


def sample_profile() -> SampleProfile:
    frames = [
        Frame("main", "/app/main.py", 3, 1),
        Frame("Parser.parse", "/app/p.py", 12, 10),
        Frame("Parser.parse", "/app/p.py", 14, 10),
        Frame("tok; en", "/app/t.py", 7, 5),
    ]
    stacks = [
        Stack((0, 1), 1, samples=30, cpu_ns=30_000_000),
        Stack((0, 2, 3), 1, samples=12, cpu_ns=12_000_000),
        Stack((0,), 2, samples=5, cpu_ns=5_000_000),
    ]
    return SampleProfile(
        mode="cpu",
        rate_hz=1000.0,
        duration_ns=47_000_000,
        start_unix_ns=1,
        samples=47,
        ticks=47,
        missed=0,
        torn=0,
        memory=False,
        frames=frames,
        threads=[Thread(1, 9, 9, "MainThread"), Thread(2, 9, 10, "w")],
        stacks=stacks,
        meta={},
    )


def test_pprof_reads_back_what_export_wrote() -> None:
    data = to_pprof(sample_profile())
    prof = read_pprof("x.pb.gz", data)
    assert (prof.sample_type, prof.unit, prof.period, prof.period_type) == (
        "samples",
        "count",
        1_000_000,
        "cpu",
    )
    got = {tuple(f"{f.name}:{f.line}" for f in frames): w for frames, w in prof.stacks}
    assert got == {
        ("main:3", "Parser.parse:12"): 30,
        ("main:3", "Parser.parse:14", "tok; en:7"): 12,
        ("main:3",): 5,
    }
    cpu = read_pprof("x.pb.gz", data, "cpu")
    assert sorted(w for _, w in cpu.stacks) == [5_000_000, 12_000_000, 30_000_000]
    assert read_pprof("raw.pb", gzip.decompress(data)).stacks == prof.stacks
    with pytest.raises(LeadlineError, match=r"no sample type .heap.*samples, cpu, wall"):
        read_pprof("x.pb.gz", data, "heap")
    with pytest.raises(LeadlineError, match=r"x\.pb\.gz: not a readable pprof profile"):
        read_pprof("x.pb.gz", data[:40])


def test_collapsed_reads_back_what_export_wrote() -> None:
    text = to_collapsed(sample_profile())
    prof = read_collapsed("x.txt", text)
    got = {tuple(f.name for f in frames): w for frames, w in prof.stacks}
    assert got == {
        ("main", "Parser.parse"): 30,
        ("main", "Parser.parse", "tok: en"): 12,
        ("main",): 5,
    }
    assert parse_frame_label("f (a/b.py:12)") == Frame("f", "a/b.py", 12, 0)
    assert parse_frame_label("f (a/b.py)") == Frame("f", "a/b.py", 0, 0)
    assert parse_frame_label("perf_func") == Frame("perf_func", "", 0, 0)
    with pytest.raises(LeadlineError, match=r"x\.txt: line 2 is not a folded stack"):
        read_collapsed("x.txt", "a;b 3\nnot a stack\n")


# ---------------------------------------------------------------------------------------------
# Through the real CLI

SYNTH = """
    import os
    SLOW = float(os.environ.get("SLOW", "1"))
    WORK = int(os.environ.get("WORK", "1"))
    source = "".join(
        f"def func_{i:02d}(n):\\n    s = 0\\n    for k in range(n):\\n"
        "        s += k\\n    return s\\n"
        for i in range(50)
    )
    exec(compile(source, os.path.join(os.path.dirname(__file__), "funcs.py"), "exec"))
    funcs = [globals()[f"func_{i:02d}"] for i in range(50)]

    def run(iterations):
        for _ in range(iterations):
            for i, f in enumerate(funcs):
                f(int(1500 * (SLOW if i == 17 else 1)))

    run(ITERATIONS * WORK)
"""
# 1,500 iterations at 4 kHz: 6,000 samples or more even when a busy host holds the sampler up
# (at 1,000 and 2 kHz, 2,000 to 3,000, and func_17's x3 sat at 4.4 sigma, in 8 pairs of 100
# below 4).
ITERATIONS = 1500


def profiled(tmp_path: Path, name: str, **env: str) -> Path:
    script = tmp_path / "synth.py"
    if not script.exists():
        write(tmp_path, "synth.py", SYNTH.replace("ITERATIONS", str(ITERATIONS)))
    out = tmp_path / f"{name}.lead"
    r = run(
        [*leadline_cmd(), "run", "--mode", "cpu", "--rate", "4000", "-o", str(out), "synth.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "NO_COLOR": "1", **env},
    )
    assert r.returncode == 0, r.stderr
    return out


def leadline_cmd() -> list[str]:
    import sys

    return [sys.executable, "-m", "leadline"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    at_hook_kind_ends()
    d = tmp_path_factory.mktemp("diffruns")
    return {
        "base": profiled(d, "base"),
        "again": profiled(d, "again"),
        "slow": profiled(d, "slow", SLOW="3"),
        "twice": profiled(d, "twice", WORK="2"),
    }


def diff_json(*args: str | Path, cwd: Path) -> dict[str, Any]:
    r = leadline("diff", *args, "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    data: dict[str, Any] = json.loads(r.stdout)
    return data


def flagged(data: dict[str, Any]) -> list[str]:
    return [f["name"] for f in data["functions"] if f["sig_self"] > 0 or f["sig_total"] > 0]


def lines_of(cap: Any, stack: int) -> tuple[tuple[int, int], ...]:
    """A capture's stack id as its (function id, line) pairs, innermost first."""
    out = []
    while stack:
        stack, func, offset = cap.stacks[stack]
        out.append((func, cap.functions[func].line_at(offset)))
    return tuple(out)


def test_cpu_mode_is_weighed_in_cpu_time(runs: dict[str, Path], tmp_path: Path) -> None:
    """A cpu-mode capture's samples weigh the CPU time each stands for (what `report` shows
    in cpu mode), up to 8 sampling periods each, and one sample weighs sum w^2 / sum w of its
    reads: the counting noise of unequal weights, where a distinct stack's records that are no
    reads of their own (flag 8: weight given to earlier reads) make its reads no lighter than
    equal parts of its weight."""
    from leadline.analyse.diff import load_side
    from leadline.capture.reader import SAMPLE_GIVEN, SAMPLE_IDLE, Capture

    data = diff_json(runs["base"], runs["base"], cwd=tmp_path)
    report_data = json.loads(
        leadline("report", runs["base"], "--json", cwd=tmp_path, check=True).stdout
    )
    assert report_data["metric"] == "cpu"
    # At most 8 sampling periods (2 ms at 4 kHz) of CPU time per sample.
    # (thread, stack as lines): weight, squares, reads.  A stack is its functions and lines (as
    # the profile has it): ids that differ in an instruction offset on one line are one stack.
    rows: dict[tuple[int, tuple[tuple[int, int], ...]], list[float]] = {}
    with Capture(runs["base"]) as cap:
        assert cap.meta["options"]["rate_hz"] == 4000
        samples = list(cap.samples())
        end = cap.end or {}
    whole = [float(sample[4]) for sample in samples]
    cpu = [min(w, 8 * 1e9 / 4000) for w in whole]
    for (_, thread, flags, stack, _, _), w in zip(samples, cpu, strict=True):
        row = rows.setdefault((thread, lines_of(cap, stack)), [0.0, 0.0, 0.0])
        row[0] += w
        row[1] += w * w
        row[2] += not flags & (SAMPLE_GIVEN | SAMPLE_IDLE)
    assert data["base"]["unit"] == "ns"
    # (less the few samples of leadline's own launcher, which no report shows)
    assert 0.95 * sum(cpu) < data["base"]["total"] <= sum(cpu)
    # The report weighs the same samples in full: it has what the cap took from them, and no
    # more than the cap took from all of them (on a busy host, a stalled sampler's next sample
    # carries many periods: 12% of the CPU time of one run beside two CPU hogs).
    over = sum(w - c for w, c in zip(whole, cpu, strict=True))
    assert data["base"]["total"] <= report_data["total"] <= data["base"]["total"] + over
    spread = sum(max(sq, w * w / n) if n else w * w for w, sq, n in rows.values())
    quantum = spread / sum(cpu)
    assert quantum >= sum(w * w for w in cpu) / sum(cpu)
    # Within the weight of leadline's own launcher's stacks, which the diff leaves out (at most
    # 5% of the total, above) and this sum has.
    assert data["base"]["quantum"] == pytest.approx(quantum, rel=0.05)
    # The stack reads that raced with the program: read again, or dropped (torn).
    raced = (end["retried"] + end["torn"]) / (len(whole) + end["torn"])
    assert data["base"]["raced"] == pytest.approx(raced) and 0 <= raced <= 1
    assert load_side(str(runs["base"])).quantum == data["base"]["quantum"]
    # A sample stands for about one period of CPU time (more when ticks were late).
    assert 0.2e6 < quantum <= 2e6


def test_a_sample_counts_spread_is_its_reads(runs: dict[str, Path]) -> None:
    """A wall-mode sample count varies as the reads it came from: a read written as four
    records (three given to it at its tick: a late tick, or the pool's weight) is one draw of
    4, whose square is 16, not four draws of 1; a record given at another tick counts alone.
    Seen beside CPU hogs: a 2.5 s exception-mode run's 150 kept reads were 35 reads' worth of
    evidence, and a function's share 8.5 points sure where equal weights said 6."""
    from leadline.analyse.diff import _from_sampling
    from leadline.analyse.samples import load_profile
    from leadline.capture.reader import SAMPLE_GIVEN, SAMPLE_IDLE, Progress, Sample

    with Capture(runs["base"]) as real:
        first = next(r for r in real.samples() if not r[2] & (SAMPLE_GIVEN | SAMPLE_IDLE))
    t, thread, flags, stack, cpu, _ = first
    records: list[Sample] = [
        (t, thread, flags, stack, cpu, 0),  # a read that stands for four ticks
        (t, thread, flags | SAMPLE_GIVEN, stack, 0, 0),
        (t, thread, flags | SAMPLE_GIVEN, stack, 0, 0),
        (t, thread, flags | SAMPLE_GIVEN, stack, 0, 0),
        (t + 10, thread, flags, stack, cpu, 0),  # a read of its own
        (t + 20, thread, flags | SAMPLE_GIVEN, stack, 0, 0),  # given at another tick
        (t + 30, thread, flags | SAMPLE_IDLE, stack, 0, 0),  # idle, at a tick of its own
        (t + 30, thread, flags | SAMPLE_IDLE | SAMPLE_GIVEN, stack, 0, 0),
    ]

    class Made(Capture):
        def samples(self, progress: Progress | None = None) -> Iterator[Sample]:
            return iter(records)

    with Made(runs["base"]) as cap:
        cap.meta["options"]["mode"] = "wall"
        (row,) = load_profile(cap).stacks
        assert (row.samples, row.reads, row.idle, row.idle_reads) == (8, 3, 2, 1)
        assert (row.samples_sq, row.idle_sq) == (16 + 1 + 1 + 4, 4)
        # The diff's weights: busy records, their spread, one read's worth on average.
        side = _from_sampling(str(runs["base"]), cap, idle=False)
        assert side.total == 6 and sum(side.node_var) == 18 and side.quantum == 3


@HOOK_KIND_ENDS
@pytest.mark.statistical
def test_three_times_slower_among_fifty_ranks_first(tmp_path: Path) -> None:
    """Recorded anew at each attempt: in CI (3.10, two tests at a time) a pair of runs in which
    BASE's sampler deferred 41% of its reads and NEW's 7% came out 5.48 s and 4.34 s of CPU time
    per run for more work: the whole program was judged faster beyond its 5% floor, the table
    compared time per run against the 15% floor, and func_17's x2.5 was not beyond it.  That
    verdict is wrong (a loaded host's CPU time per unit of work moves more than the floor
    allows: an open question for the whole-program noise model, noted); the claim here is the
    ranking, judged on a second pair when the first was recorded in such a phase."""
    runs = {"base": profiled(tmp_path, "base"), "slow": profiled(tmp_path, "slow", SLOW="3")}
    data = diff_json(runs["base"], runs["slow"], cwd=tmp_path)
    first = data["functions"][0]
    assert first["name"] == "func_17" and first["rank"] == 1
    assert first["file"].endswith("funcs.py")
    assert first["sig_self"] == 1, (first, data["whole"], data["normalization"])
    assert 2.0 < first["ratio_self"] < 4.5  # 3x the time, in a total that grew by 4%
    # None of the 49 others is flagged (its callers may be: the loop that calls it).
    assert [n for n in flagged(data) if n.startswith("func_")] == ["func_17"]
    assert set(flagged(data)) <= {"func_17", "run", "<module>"}
    callers = data["callers"][0]
    assert data["functions"][callers["function"]]["name"] == "func_17"
    assert data["functions"][callers["callers"][0]["function"]]["name"] == "run"
    # The text form: the same function first, then its callers.
    text = leadline("diff", runs["base"], runs["slow"], cwd=tmp_path).stdout
    rows = [ln for ln in text.splitlines() if ln.lstrip().startswith("1 ")]
    assert "func_17" in rows[0] and "grew" in rows[0]
    assert "Callers of #1 func_17" in text


def flags(data: dict[str, Any]) -> list[str]:
    """What a diff found beyond noise: its function rows, and the whole program's time per run
    (one run a side is judged against an assumed 5%, which a disturbed run breaks: docs/diff.md,
    "The whole program")."""
    whole = data["whole"]
    return flagged_rows(data) + ([f"whole x{whole['ratio']:.2f}"] if whole and whole["sig"] else [])


def test_two_runs_of_the_same_program_flag_nothing(runs: dict[str, Path], tmp_path: Path) -> None:
    """On this shared host a whole run sometimes differs from its twin beyond what any one run
    can show: `run`, whose self time is the loop between 75,000 calls (a few hundred
    nanoseconds each), had 0.41-0.94% of the CPU time in 27 of 39 runs of this program and
    1.0-1.8% in the other 12, in phases that last minutes (five runs in a row at 1.1-1.9%, then
    three at 0.5%); 118 of the 741 pairs of those runs flagged it, and one pair another
    function.  Pinned to one CPU with the sampler it had 0.31-0.48% in 9 runs, and the program
    alone spends at most 0.41-0.87% there (its calls timed without a profiler): part of it is
    the sampler disturbing the program from the other CPU (docs/diff.md, "What the noise model
    cannot see").  A disturbed run makes `run` look smaller against its twin as readily as
    larger (the first two runs being in different phases either way round; seen in CI beside two
    hogs, one function flagged as shrunk and none grown), so a flag in either direction is
    checked the same way, and so is the whole program's time per run, which one run a side
    judges against an assumed 5% (seen in CI with two workers: `--fail-above 10` failed on it,
    "at least 18% beyond noise", with no function flagged).  The host's phases move that time
    far more: 10 quiet runs in a row took 3.24 to 4.55 s of CPU time for the same work, and
    beside a compiler on both cores (CI's loaded stage) 24 runs took 2.86 to 4.06 s, 16 of their
    276 pairs judged changed, every one on the whole program's time.  As in
    tests/test_diff_real.py, more identical runs tell a disturbed run from a noise model that
    flags too much: each new run is paired with every run before it, and one of those pairs must
    be quiet.  One more run was not always enough evidence: in CI's loaded stage a third run
    flagged beside both of the first two (with `run` at 1.57%, 0.62% and 1.76%), so up to
    three more are recorded (ten pairs); a noise model that flags too much flags them all."""
    pair = (runs["base"], runs["again"])
    data = diff_json(*pair, cwd=tmp_path)
    seen = [f"{pair[0].stem} {pair[1].stem}: {flags(data)}"]
    earlier = list(pair)
    while flags(data) and len(earlier) < 5:  # grown or shrunk, a function or the whole program
        extra = profiled(tmp_path, f"more{len(earlier)}")
        for before in earlier:
            tried = diff_json(before, extra, cwd=tmp_path)
            found = flags(tried)
            seen.append(f"{before.stem} {extra.stem}: {found}")
            if not found:
                pair, data = (before, extra), tried
                break
        earlier.append(extra)
    # A string, so that the report shows every pair's verdict in full.
    assert flags(data) == [], "\n".join(seen)
    assert data["summary"] == {
        "grew": 0,
        "shrank": 0,
        "functions": data["summary"]["functions"],
    }
    r = leadline("diff", *pair, "--fail-above", "10", cwd=tmp_path)
    assert r.returncode == 0 and "No function changed beyond noise." in r.stdout


def test_twice_the_work_is_no_regression_per_unit(runs: dict[str, Path], tmp_path: Path) -> None:
    per = f"{ITERATIONS},{2 * ITERATIONS}"
    base, twice = runs["base"], runs["twice"]
    for attempt in range(3):
        data = diff_json(base, twice, "--per", per, cwd=tmp_path)
        run = {f["name"]: f for f in data["functions"]}["run"]
        # Per iteration the two runs did the same: the machine ran them at about the same
        # speed, unless the shared host was busy during one of them (seen at 0.56x while
        # other jobs ran), or one of them was in the phase that gives `run`'s loop between
        # calls twice its share (test_two_runs_of_the_same_program_flag_nothing: 118 of 741
        # pairs of identical runs flag it; CI's loaded stage flagged it here once): then both
        # are recorded again, interleaved, at most twice more.
        ratio = run["new_total"] / run["base_total"]
        if (0.8 < ratio < 1.25 and not flagged(data)) or attempt == 2:
            break
        base = profiled(tmp_path, f"base{attempt}")
        twice = profiled(tmp_path, f"twice{attempt}", WORK="2")
    assert data["normalization"] == {"by": "per", "unit": "s"}
    assert flagged(data) == []
    assert data["new"]["units_of_work"] == 2 * data["base"]["units_of_work"]


def test_fail_above_exits_1_with_a_one_line_reason(runs: dict[str, Path], tmp_path: Path) -> None:
    """The gate is the growth that is left once sigma standard deviations of noise are taken
    off; how much is left of func_17's 3x depends on how busy the host was (seen from 30% to
    130%), so the thresholds are put just below and just above what this pair gives.  The
    reason names the function that grew most beyond noise: func_17, unless a run of the pair was
    disturbed (the loop between calls, `run`, grows beyond noise between some identical runs:
    test_two_runs_of_the_same_program_flag_nothing; a quiet 3.13 CI stage had it grow 251%, 73%
    beyond noise, against func_17's 54%).  As there, such a pair is judged with another run of
    BASE, recorded at most twice; so is a pair whose first culprit is `run` (its own cost grew
    more than func_17's while the table flagged func_17 alone: a 3.13 CI stage, once)."""
    base, slow = runs["base"], runs["slow"]
    for attempt in range(3):
        data = diff_json(base, slow, cwd=tmp_path)
        grown = [f["name"] for f in data["functions"] if f["sig_self"] > 0 and f["delta_self"] > 0]
        culprits = [c["name"] for c in data["culprits"]]
        if (grown == ["func_17"] and culprits[:1] in ([], ["func_17"])) or attempt == 2:
            break
        base = profiled(tmp_path, f"base-again{attempt}")
    f17 = data["functions"][0]
    assert f17["name"] == "func_17" and f17["sig_self"] == 1
    grew = f17["delta_self"] / f17["base_self"] * 100
    beyond = (f17["delta_self"] - data["sigma"] * f17["noise_self"]) / f17["base_self"] * 100
    assert 0 < beyond < grew
    below = max(beyond - 5, 0.5)
    r = leadline("diff", base, slow, "--fail-above", f"{below:.2f}", cwd=tmp_path)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    reason = (
        f"leadline: regression: func_17 ({f17['file']}) self cost grew {grew:.0f}% "
        f"(at least {beyond:.0f}% beyond noise)"
    )
    # A pair still disturbed after the runs above names its other culprit after the reason, as
    # the gate does whenever the most likely cause is not the function it names (a loaded 3.12
    # stage: `run` first in all three recordings of BASE).
    culprit = [c["name"] for c in data["culprits"]][:1]
    cause = "" if culprit in ([], ["func_17"]) else f"; most likely cause: {culprit[0]} ("
    assert lines[0].startswith(reason + cause), (lines, flagged_rows(data))
    assert lines[0] == reason or cause, (lines, flagged_rows(data))
    r = leadline("diff", base, slow, "--fail-above", "100000", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == ""


def test_pprof_and_collapsed_inputs(runs: dict[str, Path], tmp_path: Path) -> None:
    for name in ("base", "slow"):
        leadline(
            "export",
            runs[name],
            "--format",
            "pprof",
            "-o",
            tmp_path / f"{name}.pb.gz",
            cwd=tmp_path,
            check=True,
        )
        leadline(
            "export",
            runs[name],
            "--format",
            "collapsed",
            "--metric",
            "samples",
            "-o",
            tmp_path / f"{name}.txt",
            cwd=tmp_path,
            check=True,
        )
    for a, b in (
        ("base.pb.gz", "slow.pb.gz"),
        ("base.txt", "slow.txt"),
        (runs["base"], "slow.txt"),
    ):
        data = diff_json(a, b, cwd=tmp_path)
        assert data["functions"][0]["name"] == "func_17"
        assert data["functions"][0]["sig_self"] == 1


@HOOK_KIND_ENDS
@pytest.mark.statistical
def test_trace_captures(tmp_path: Path) -> None:
    """`c` three times slower, traced: ranked first, and nothing else flagged.

    A trace times every call by the wall clock, so on a busy host a call that is preempted
    takes a time slice longer (tens of milliseconds at a load of 14 on two cores): the per-call
    spread says so, and a run of 60 ms (3,000 x 3 calls of 3 us, as this test once was) cannot
    tell `c` x3 from where the preemptions fell.  Each run does about a second of work instead.
    When the host is so busy that even that is within the noise the captures show, the pair
    is recorded again, at most three times in all; no attempt may flag anything but `c` (a
    function called once, `_Environ.__getitem__` of `os.environ.get`, was once ranked first:
    its single call had been preempted, and one call has no spread)."""
    write(
        tmp_path,
        "t.py",
        """
        import os
        SLOW = int(os.environ.get("SLOW", "1"))
        def a(n):
            return sum(range(n))
        def b(n):
            return sum(range(n))
        def c(n):
            return sum(range(n * SLOW))
        for _ in range(10000):
            a(3000); b(3000); c(3000)
    """,
    )
    for _attempt in range(3):
        for name, slow in (("t1", "1"), ("t3", "3")):
            run(
                [*leadline_cmd(), "trace", "-o", f"{name}.lead", "t.py"],
                cwd=tmp_path,
                env={**__import__("os").environ, "SLOW": slow},
                check=True,
                capture_output=True,
                timeout=300,
            )
        data = diff_json("t1.lead", "t3.lead", cwd=tmp_path)
        assert data["base"]["kind"] == "trace" and data["base"]["unit"] == "ns"
        assert set(flagged(data)) <= {"c"}, [
            (f["name"], f["delta_self"], f["noise_self"]) for f in data["functions"][:4]
        ]
        funcs = {f["name"]: f for f in data["functions"]}
        assert funcs["c"]["delta_self"] > 0  # beyond noise or not, it grew
        if flagged(data):
            break
    first = data["functions"][0]
    assert first["name"] == "c" and first["sig_self"] == 1, data["functions"][:3]
    # The noise of a trace comes from its per-call times (and the host's disturbance of them).
    assert 0 < first["noise_self"] < first["delta_self"] / 4
    assert flagged(data)[0] == "c"


DELAYED = """
    import os
    import time

    SETUP_DELAY = float(os.environ.get("SETUP_DELAY", "0"))


    def setup():
        time.sleep(SETUP_DELAY)


    def work(n, held=0.0):
        if held:
            time.sleep(held)
        return sum(range(n))


    setup()
    for i in range(20000):
        work(300, 0.02 if i == 10000 else 0.0)
"""


def test_a_call_held_up_once_is_within_a_traces_noise(tmp_path: Path) -> None:
    """What a busy host does to a trace, made deterministic: in both runs one call of `work`
    (of 20,000) is held up for 20 ms, as a preempted call is; in NEW, `setup`, called once, is
    held up for 20 ms too.  A single call has no per-call spread, but the captures show that
    one call can take 20 ms longer for reasons of its host, so `setup` is not beyond noise (it
    used to be flagged, and ranked first).  Held up for two seconds, several times the run, it
    is beyond noise even on a busy host (where the captures show preemptions of tens of ms,
    and a call as long as that could be preempted several times)."""
    write(tmp_path, "delayed.py", DELAYED)
    import os

    for name, delay in (("base", "0"), ("held", "0.02"), ("slow", "2")):
        run(
            [*leadline_cmd(), "trace", "-o", f"{name}.lead", "delayed.py"],
            cwd=tmp_path,
            env={**os.environ, "SETUP_DELAY": delay},
            check=True,
            capture_output=True,
        )
    data = diff_json("base.lead", "held.lead", cwd=tmp_path)
    setup = {f["name"]: f for f in data["functions"]}["setup"]
    # 20 ms of a run of 0.1 to 1 s (as busy as the host is): well above --min-delta, and with
    # no spread of its own, once far beyond noise.
    assert setup["delta_self"] > 5 * data["min_delta"]
    assert flagged(data) == [], data["functions"][:3]
    assert data["base"]["disturbance_ns"] > 15e6 and data["new"]["disturbance_ns"] > 15e6
    data = diff_json("base.lead", "slow.lead", cwd=tmp_path)
    assert flagged(data)[:1] == ["setup"], (
        [data[k]["disturbance_ns"] for k in ("base", "new")],
        [data[k]["total"] for k in ("base", "new")],
        [(f["name"], f["delta_self"], f["noise_self"]) for f in data["functions"][:3]],
    )


def test_disturbance_of_a_trace_from_its_calls() -> None:
    """The rate (variance per ns of time, over call paths called twice or more) and the jump
    (the largest excess one call can have had) of hand-made call-tree nodes."""
    from leadline.analyse.diff import _disturbance
    from leadline.analyse.trace import Node

    def node(calls: int, times: list[int]) -> Node:
        total = sum(times)
        return Node(
            0,
            -1,
            0,
            1,
            calls,
            total,
            total,
            0,
            0,
            0,
            0,
            0,
            0,
            0.0,
            float(sum(t * t for t in times)),
        )

    steady = node(1000, [1000] * 1000)  # 1 us each: no spread
    held = node(1000, [1000] * 999 + [20_001_000])  # one call 20 ms late
    once = node(1, [50_000_000])  # a single call: no spread to see
    rate, jump = _disturbance([steady, once])
    assert rate == 0 and jump == 0
    rate, jump = _disturbance([steady, held, once])
    assert jump == pytest.approx(20e6, rel=0.01)
    assert rate == pytest.approx(20e6**2 * (1 - 1 / 1000) / (2000 * 1000 + 20e6), rel=0.01)

    # Timed by the RSS sampler's clock (1 ms on average): 1,000 calls of 40 us each read 0 or a
    # whole gap; the 40 that caught one make a spread that is the clock's, not a disturbance's.
    from leadline.analyse.diff import clock_step_ns

    def trace(options: dict[str, Any], end: dict[str, Any] | None = None) -> Any:
        return SimpleNamespace(meta={"options": options}, end=end, ns=lambda t: t)

    step = clock_step_ns(trace({"coarse_time": True, "rss_period_us": 1000}))
    assert step == pytest.approx(1000e3 * 13 / 12)
    assert clock_step_ns(trace({"coarse_time": True}, {"coarse_from": 20_000_000})) == step
    # A program that ended while the events still read the counter: every call timed.
    assert clock_step_ns(trace({"coarse_time": True}, {"coarse_from": None})) == 0
    assert clock_step_ns(trace({"coarse_time": False, "rss_period_us": 1000})) == 0
    assert clock_step_ns(SimpleNamespace(meta={}, end=None)) == 0
    rounded = node(1000, [1_000_000] * 40 + [0] * 960)
    rate, jump = _disturbance([rounded], step)
    assert jump == 0
    assert rate == pytest.approx((40 * 1e12 - 40e6**2 / 1000) / 40e6, rel=0.01)  # kept: noise
    # the same paths read by the counter: the spread would count as one 6 ms disturbance
    assert _disturbance([rounded])[1] == pytest.approx(6.2e6, rel=0.01)
    # a call held 20 ms stands out of the clock's spread
    late = node(1000, [1_000_000] * 40 + [0] * 959 + [20_000_000])
    assert _disturbance([late], step)[1] > 15e6


def one_line_error(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("leadline: error: ")
    return lines[0]


def test_bad_inputs(runs: dict[str, Path], tmp_path: Path) -> None:
    base = runs["base"]
    assert "missing.lead: no such file" in one_line_error(
        leadline("diff", base, "missing.lead", cwd=tmp_path)
    )
    (tmp_path / "junk.bin").write_bytes(b"\x00\x01garbage\xff" * 10)
    assert "junk.bin: not a leadline capture, a pprof profile or collapsed stacks" in (
        one_line_error(leadline("diff", "junk.bin", base, cwd=tmp_path))
    )
    (tmp_path / "bad.pb.gz").write_bytes(gzip.compress(b"\x0a\xff\xff\xff"))
    assert "bad.pb.gz: not a readable pprof profile" in one_line_error(
        leadline("diff", base, "bad.pb.gz", cwd=tmp_path)
    )
    (tmp_path / "empty.txt").write_text("")
    assert "empty.txt: an empty file" in one_line_error(
        leadline("diff", base, "empty.txt", cwd=tmp_path)
    )
    (tmp_path / "head.lead").write_bytes(base.read_bytes()[:12])
    assert "head.lead" in one_line_error(leadline("diff", "head.lead", base, cwd=tmp_path))
    # A wall-mode capture and a cpu-mode one measure different things.
    write(tmp_path, "w.py", "sum(range(10**6))\n")
    leadline("run", "--mode", "wall", "-o", "wall.lead", "w.py", cwd=tmp_path, check=True)
    msg = one_line_error(leadline("diff", "wall.lead", base, cwd=tmp_path))
    assert "cannot compare wall.lead (a wall-mode sampling capture) with" in msg
    assert "--per" in one_line_error(leadline("diff", base, base, "--per", "0", cwd=tmp_path))
    assert "--fail-above" in one_line_error(
        leadline("diff", base, base, "--fail-above", "lots", cwd=tmp_path)
    )


def test_truncated_capture_is_compared_with_a_warning(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    # Cut in the middle of the last SAMPLES chunk, as a writer stopped there would leave it: the
    # chunks before it stay readable.  (A cut at three quarters of the file once left none: the
    # sampler flushes its chunk each second, and a quiet 3.15 CI run of the 1.3 s `slow` program
    # wrote 38 KB of its 55 KB in the first.)  The run of twice the work lasts over 2 s.
    with Capture(runs["twice"]) as c:
        chunks = c.sample_chunks
    assert len(chunks) >= 2, chunks
    raw = runs["twice"].read_bytes()
    cut = tmp_path / "cut.lead"
    cut.write_bytes(raw[: chunks[-1].offset + chunks[-1].length // 2])
    r = leadline("diff", runs["base"], cut, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["new"]["total"] > 0
    assert "warning: " in r.stderr and "cut.lead" in r.stderr
