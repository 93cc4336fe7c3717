"""Deep call trees: `leadline diff` (and the reports) of a 3 x 50,000-deep recursion, traced and
sampled, in memory and time bounded by the capture's size, not by its depth squared.

A stack of depth d shares its first d-1 frames with its caller's stack; written out as one tuple
of frames per distinct stack, or keyed by its whole path, a 50,000-deep recursion is 50,000^2 / 2
frames: `leadline diff A A` of its 1.5 MB trace grew to 24 GB, `diff --html` of a 100 KB
sampling capture of it took 1 GB.  These tests run the real CLI on such captures under an
address-space limit far below that, and check what it says.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import htmlpage
import pytest
from support import HOOK_KIND_ENDS, PY, at_hook_kind_ends, run, write

from leadline.analyse.diff import Func, Settings, Side, compare, to_json
from leadline.analyse.samples import call_tree, func_key, function_rows, load_profile, selected
from leadline.analyse.stacktree import StackTree, TreePath
from leadline.capture.reader import Capture

DEPTH = 50_000
# Python calls recurse in C too before 3.11: the deep part runs in a thread with a large stack.
IN_A_THREAD = """

    if sys.version_info >= (3, 11):
        main()
    else:
        threading.stack_size(512 << 20)
        t = threading.Thread(target=main)
        t.start()
        t.join()
"""
# 3 x 50,000 levels of one function that works a little at each level.
DEEP = (
    """
    import sys
    import threading

    sys.setrecursionlimit(200_000)


    def down(n):
        s = 0
        for k in range(60):
            s += k
        if n:
            return down(n - 1) + s
        return s


    def main():
        for _ in range(3):
            down(50_000)
"""
    + IN_A_THREAD
)
# 10,000 levels, then work and short sleeps in 300 functions at the bottom: hundreds of
# distinct stacks, each 10,000 frames deep, that share all but their last frame or two.  The
# sleeps make them distinct whatever the machine's load: a sleeping thread's sample counts where
# it was found, while a running thread's on a busy machine often only adds weight to its last
# fair samples (docs/run.md, "Busy machines"; seen: 63 and 112 distinct stacks from work alone).
WIDE = (
    """
    import sys
    import threading
    import time

    sys.setrecursionlimit(200_000)
    source = "".join(
        f"def leaf_{i}(n):\\n    s = 0\\n    for k in range(n):\\n"
        f"        s += k * {i}\\n    time.sleep(0.005)\\n    return s\\n"
        for i in range(300)
    )
    exec(compile(source, "leaves.py", "exec"))
    leaves = [globals()[f"leaf_{i}"] for i in range(300)]


    def down(n):
        if n:
            return down(n - 1)
        for _ in range(1):
            for f in leaves:
                f(300)


    def main():
        for _ in range(3):
            down(10_000)
"""
    + IN_A_THREAD
)
# The address space a command may use: a few times what leadline needs for these captures
# (under 200 MB), far below what a quadratic representation of them takes (gigabytes).
LIMIT_BYTES = 600 << 20
TIME_LIMIT_S = 180  # seconds per command on a busy machine (each takes a few when quiet)


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI under the address-space and time limits; a failure shows its stderr."""
    env = {**os.environ, "NO_COLOR": "1", "PYTHONIOENCODING": "utf-8"}
    r = run(
        [PY, "-m", "leadline", *map(str, args)],
        cwd=cwd,
        env=env,
        timeout=TIME_LIMIT_S,
        preexec_fn=limited,
    )
    assert r.returncode == 0, (args, r.returncode, r.stderr[-3000:])
    return r


def record(*args: str | Path, cwd: Path) -> None:
    r = run([PY, "-m", "leadline", *map(str, args)], cwd=cwd, timeout=300)
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def deep(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The captures: a trace of the 3 x 50,000-deep recursion (about 1.5 MB), a sampling capture
    of it at the default --max-depth (about 100 KB), and the 10,000-deep one that works in 300
    functions at the bottom, sampled whole (--max-depth 100000): hundreds of distinct stacks,
    millions of frames if each stack were written out, in under 100 KB."""
    at_hook_kind_ends()
    d = tmp_path_factory.mktemp("deep")
    write(d, "deep.py", DEEP)
    write(d, "wide.py", WIDE)
    # Each call timed: the default clock gives the deepest levels, under a millisecond in all,
    # no time, and a node with none is not drawn.
    record("trace", "--exact-time", "-o", "trace.lead", "deep.py", cwd=d)
    record("run", "-q", "--rate", "1000", "-o", "sampled.lead", "deep.py", cwd=d)
    # At 400 Hz: a walk of 10,000 frames takes the sampler about a millisecond.
    record(
        "run", "-q", "--rate", "400", "--max-depth", "100000", "-o", "whole.lead", "wide.py",
        cwd=d,
    )  # fmt: skip
    return {"dir": d, **{p.stem: p for p in d.glob("*.lead")}}


def by_name(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in data["functions"]}


def tree_depth(tree: dict[str, list[int]]) -> int:
    """The deepest node's depth in a diff's tree (parents come before their children)."""
    depth = [0] * len(tree["parent"])
    for n in range(1, len(depth)):
        depth[n] = depth[tree["parent"][n]] + 1
    return max(depth)


# ---------------------------------------------------------------------------------------------
# Through the real CLI, under the limits


def test_diff_of_a_deep_trace_is_bounded(deep: dict[str, Path]) -> None:
    d, trace = deep["dir"], deep["trace"]
    text = cli("diff", trace, trace, cwd=d).stdout
    assert "No function changed beyond noise." in text
    data = json.loads(cli("diff", trace, trace, "--json", cwd=d).stdout)
    assert data["summary"]["grew"] == data["summary"]["shrank"] == 0
    down, main = by_name(data)["down"], by_name(data)["main"]
    # The recursion's time counts once, not once per level: most of `main`'s, at most all.
    # (Not a share of the program: before 3.11 `main` runs in a thread while the main thread
    # waits for it, and the two threads' times add up, so `down` is just under half of it.)
    assert 0.9 * main["base_total"] < down["base_total"] <= main["base_total"] + 1e-9
    # Most of the program, at most all (on 3.10, of its two threads' times: just under half).
    least = 0.5 if sys.version_info >= (3, 11) else 0.25
    assert least < down["base_total"] <= 1.0 + 1e-9
    assert down["new_total"] == down["base_total"] and down["delta_total"] == 0
    # Every traced call below the first `down` is `down`: its own time is all of its total.
    assert down["base_self"] == pytest.approx(down["base_total"], rel=1e-9)
    assert down["sig_self"] == down["sig_total"] == 0
    assert data["callers"] == [] and len(data["tree"]["parent"]) == 1  # no tree without --html

    cli("diff", trace, trace, "--html", "-o", "trace.diff.html", cwd=d)
    page = (d / "trace.diff.html").read_text(encoding="utf-8")
    doc = json.loads(htmlpage.embedded_json(page))
    tree = doc["tree"]
    # One node per level of the recursion (the three runs share their path), all unchanged.
    assert DEPTH < len(tree["parent"]) < DEPTH + 100
    assert tree_depth(tree) > DEPTH
    assert set(tree["sig"]) == {0} and tree["base"] == tree["new"]
    names = [doc["functions"][f]["name"] for f in tree["func"][1:]]
    assert names.count("down") == DEPTH + 1


def test_diff_of_a_deep_sampling_capture_is_bounded(deep: dict[str, Path]) -> None:
    d = deep["dir"]
    for name in ("sampled", "whole"):
        cap = deep[name]
        data = json.loads(cli("diff", cap, cap, "--json", cwd=d).stdout)
        assert data["summary"]["grew"] == data["summary"]["shrank"] == 0, name
        assert data["base"]["total"] == data["new"]["total"] > 0
        down = by_name(data)["down"]
        assert 0.5 < down["base_total"] <= 1.0 + 1e-9  # once per sample, however deep
        assert down["delta_self"] == down["delta_total"] == 0
        cli("diff", cap, cap, "--html", "-o", f"{name}.diff.html", cwd=d)
        doc = json.loads(htmlpage.embedded_json((d / f"{name}.diff.html").read_text("utf-8")))
        assert set(doc["tree"]["sig"]) == {0}
        assert len(doc["tree"]["parent"]) > 1000  # the sampled recursion's levels


def test_reports_of_deep_captures_are_bounded(deep: dict[str, Path]) -> None:
    d, trace = deep["dir"], deep["trace"]
    data = json.loads(cli("report", trace, "--json", cwd=d).stdout)
    down = next(f for f in data["functions"] if f["name"] == "down")
    assert down["calls"] == 3 * (DEPTH + 1)
    assert 0 < down["incl_ns"] <= data["summary"]["duration_ns"]  # outermost calls only
    assert "down" in cli("report", trace, cwd=d).stdout
    cli("report", trace, "--html", "-o", "trace.html", cwd=d)
    assert (d / "trace.html").stat().st_size > 0

    for name in ("sampled", "whole"):
        cap = deep[name]
        data = json.loads(cli("report", cap, "--json", cwd=d).stdout)
        down = next(f for f in data["functions"] if f["name"] == "down")
        assert 0.5 * data["total"] < down["total"] <= data["total"]
        assert down["self"] <= down["total"]
        text = cli("report", cap, "--callers", "down", cwd=d).stdout
        assert "Callers of down" in text
        text = cli("report", cap, "--callees", "down", cwd=d).stdout
        assert "Callees of down" in text
        cli("report", cap, "--html", "-o", f"{name}.html", cwd=d)
        page = (d / f"{name}.html").read_text(encoding="utf-8")
        nodes = json.loads(htmlpage.embedded_json(page))["nodes"]
        assert len(nodes["parent"]) > 1000
        for fmt, out in (("pprof", "x.pb.gz"), ("speedscope", "x.json"), ("collapsed", "x.txt")):
            cli("export", cap, "--format", fmt, "-o", out, cwd=d)
            assert (d / out).stat().st_size > 0
        rows = [ln.rpartition(" ") for ln in (d / "x.txt").read_text().splitlines()]
        assert sum(int(w) for _, _, w in rows) == sum(s["samples"] for s in data["stacks"])


# ---------------------------------------------------------------------------------------------
# In process: what reading such a capture holds


def peak_bytes(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_distinct_deep_stacks_cost_the_capture_not_their_frames(deep: dict[str, Path]) -> None:
    """Hundreds of distinct stacks, each 10,000 frames deep: the profile holds them as nodes of
    one tree (as large as the capture's stack table), not as a tuple of frames each."""
    cap_path = deep["whole"]
    size = cap_path.stat().st_size

    def analyse() -> None:
        with Capture(cap_path) as cap:
            p = load_profile(cap)
        weighted = selected(p, False, "samples")
        function_rows(p, weighted)
        (down,) = {func_key(f) for f in p.frames if f.name == "down"}
        call_tree(p, weighted, {down}, "callers")
        call_tree(p, weighted, {down}, "callees")

    with Capture(cap_path) as cap:
        p = load_profile(cap)
        records = len(cap.stacks)
    frames = sum(len(s.frames) for s in p.stacks)
    assert len(p.stacks) >= 150 and frames >= 5000 * len(p.stacks)  # what the test needs
    # The stacks are nodes of one tree, no larger than the capture's table of stack records.
    trees = {s.frames.tree for s in p.stacks if isinstance(s.frames, TreePath)}
    assert len(trees) == 1 and len(trees.pop()) <= records + 1
    # A tuple of frames per stack takes 8 bytes a frame (tens of megabytes here); reading the
    # capture, the profile and its function table take a fraction of that.
    peak = peak_bytes(analyse)
    assert peak < 4 * frames, (peak, size, frames, records)


# ---------------------------------------------------------------------------------------------
# The tree and its passes


def test_stack_tree_shares_prefixes_and_sums_up_the_tree() -> None:
    t = StackTree()
    a = t.add([1, 2, 3])
    b = t.add([1, 2, 4])
    c = t.add([1, 5])
    assert len(t) == 6  # root, 1, 2, 3, 4, 5
    assert t.path(a) == [1, 2, 3] and t.path(c) == [1, 5] and t.path(0) == []
    assert t.depth[b] == 3 and t.parent[b] == t.parent[a]
    weights = [0.0] * len(t)
    weights[a], weights[b], weights[c] = 1.0, 2.0, 4.0
    sums = t.subtree_sums(weights)
    assert sums[0] == 7.0 and sums[t.parent[a]] == 3.0 and sums[a] == 1.0
    assert t.reached([n == b for n in range(len(t))]) == [True, True, True, False, True, False]


def test_outermost_counts_a_recursion_once() -> None:
    t = StackTree()
    # main -> f -> g -> f -> f, and main -> g -> f
    deep = t.add([0, 1, 2, 1, 1])
    side = t.add([0, 2, 1])
    outer = t.outermost(t.key)
    on_deep = [n for n in range(len(t)) if n and n in _ancestors(t, deep)]
    assert [outer[n] for n in on_deep] == [True, True, True, False, False]
    assert [outer[n] for n in _ancestors(t, side)[1:]] == [True, True, True]
    # 200,000 levels of one function: one walk, no recursion.
    t = StackTree()
    leaf = t.add([7] * 200_000)
    outer = t.outermost(t.key)
    assert sum(outer) == 1 and outer[1] and t.depth[leaf] == 200_000


def _ancestors(t: StackTree, node: int) -> list[int]:
    out = []
    while node >= 0:
        out.append(node)
        node = t.parent[node]
    return out[::-1]


def test_tree_path_is_the_tuple_it_stands_for() -> None:
    t = StackTree()
    node = t.add([3, 1, 4, 1, 5])
    p = TreePath(t, node)
    assert p == (3, 1, 4, 1, 5) and tuple(p) == (3, 1, 4, 1, 5) and list(p) == [3, 1, 4, 1, 5]
    assert len(p) == 5 and p[0] == 3 and p[-1] == 5 and p[2] == 4 and p[1:3] == (1, 4)
    assert list(reversed(p)) == [5, 1, 4, 1, 3]
    assert hash(p) == hash((3, 1, 4, 1, 5)) and p != (3, 1, 4) and p == TreePath(t, node)
    with pytest.raises(IndexError):
        p[5]
    assert TreePath(t, 0) == () and not TreePath(t, 0)


def deep_side(depth: int, path: str, extra: float = 0.0) -> Side:
    """`main` -> `down` x depth, one sample at every level and `extra` more at the deepest,
    built node by node."""
    funcs = [Func("main", "/app/main.py", 1), Func("down", "/app/deep.py", 4)]
    s = Side(path, "sample", "cpu", "samples", 1.0, 1e-3, funcs)
    node = s.tree.child(0, 0)
    for _ in range(depth):
        node = s.tree.child(node, 1)
        s.add(node, 1.0)
    s.add(node, extra)
    return s


@HOOK_KIND_ENDS
def test_compare_of_a_deep_side_counts_each_stack_once() -> None:
    peak = peak_bytes(
        lambda: compare(deep_side(DEPTH, "a.lead"), deep_side(DEPTH, "b.lead"), Settings())
    )
    assert peak < 200 * DEPTH * 8  # a few hundred bytes a level, not a path per level
    r = compare(deep_side(DEPTH, "a.lead"), deep_side(DEPTH, "b.lead"), Settings())
    funcs = {fd.func.name: fd for fd in r.functions}
    assert funcs["down"].total.base == funcs["down"].total.new == 1.0
    assert funcs["down"].self_.base == 1.0 and funcs["main"].self_.base == 0.0
    assert funcs["main"].total.base == 1.0
    assert r.grew == [] and r.shrank == []
    doc = to_json(r)
    tree = doc["tree"]
    assert len(tree["parent"]) == DEPTH + 2 and tree_depth(tree) == DEPTH + 1
    # A level's path holds every sample at or below it: all of them at the top, one at the end.
    depth = [0] * len(tree["parent"])
    for n in range(1, len(depth)):
        depth[n] = depth[tree["parent"][n]] + 1
    assert tree["base"][depth.index(1)] == 1.0
    assert tree["base"][depth.index(DEPTH + 1)] == pytest.approx(1 / DEPTH)


def test_a_side_given_as_paths_is_the_same_side(tmp_path: Path) -> None:
    """Stacks given as tuples (a side built by hand, collapsed stacks) fold into the same tree."""
    paths = {(0, 1): 3.0, (0, 1, 2): 4.0, (0,): 1.0, (0, 1, 1, 2): 2.0, (): 5.0}
    funcs = [Func(n, f"/app/{n}.py", 1) for n in ("main", "f", "g")]
    a = Side("a", "sample", "cpu", "samples", 1.0, 1e-3, funcs, list(paths.items()))
    assert a.stacks == [] and a.total == 15.0
    b = Side("b", "sample", "cpu", "samples", 1.0, 1e-3, list(funcs))
    for p, w in paths.items():
        b.add(b.tree.add(p), w)
    ra, rb = to_json(compare(a, a)), to_json(compare(b, b))
    ra.pop("base"), ra.pop("new"), rb.pop("base"), rb.pop("new")
    assert ra == rb
    f = by_name(ra)
    # f is on three stacks (3 + 4 + 2, once each though it recurses on one), g on two.
    assert f["f"]["base_total"] == pytest.approx(9 / 15) and f["g"]["base_total"] == 6 / 15
    assert f["main"]["base_total"] == pytest.approx(10 / 15)
