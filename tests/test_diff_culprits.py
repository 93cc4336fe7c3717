"""`leadline diff`'s culprits (where the new cost enters the call tree, and whose code that is)
and its whole-program comparison: on profiles built by hand, then through the real CLI on a
program whose library changed between two runs."""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from browser import render_in_chromium
from diffsides import side_of
from htmlpage import assert_clean
from support import at_hook_kind_ends, leadline, run

from leadline.analyse.culprits import PROGRAM, STDLIB, fold_recursion, owner_of
from leadline.analyse.diff import (
    Func,
    Settings,
    Side,
    _fold_values,
    compare,
    fail_reasons,
    merge_runs,
    to_json,
)
from leadline.render.diff_text import whole_line

SITE = "/venv/lib/python3.12/site-packages"
STD = "/usr/lib/python3.12"


def fn(name: str, file: str, line: int = 1) -> Func:
    return Func(name, file, line)


MAIN = fn("main", "/home/u/bench.py")


def side(
    stacks: dict[tuple[Func, ...], float],
    argv: list[str] | None = None,
    rate: float = 1000.0,
    version: str = "3.12.1",
) -> Side:
    """A cpu-mode sampling side of these stacks (outermost first) and sample counts."""
    return side_of(
        stacks, rate=rate, meta={"argv": argv or ["bench.py"], "python_version": version}
    )


def names(result: Any) -> list[tuple[str, str | None]]:
    """Each culprit as (function, what it now calls or None)."""
    fs = result.functions
    return [
        (fs[c.func].func.name, None if c.into is None else fs[c.into].func.name)
        for c in result.culprits
    ]


def test_owners_of_files() -> None:
    assert owner_of(f"{SITE}/mylib/plugins.py") == "mylib"
    assert owner_of(f"{SITE}/six.py") == "six"
    assert owner_of("/opt/venv/lib/python3.13t/site-packages/pkg/a.py") == "pkg"
    assert owner_of(f"{STD}/importlib/metadata/__init__.py") == STDLIB
    assert owner_of("<frozen importlib._bootstrap>") == STDLIB
    assert owner_of("/home/u/bench.py") == PROGRAM
    assert owner_of("/usr/lib/python3/dist-packages/yaml/constructor.py") == "yaml"


def plugins_case(plugin_line: int) -> tuple[Side, Side]:
    """`find_plugins` (mylib) now calls `entry_points` (standard library), which reads files:
    the self cost grows in the standard library's leaf."""
    find = fn("find_plugins", f"{SITE}/mylib/plugins.py", 40)
    find_v2 = fn("find_plugins", f"{SITE}/mylib/plugins.py", plugin_line)
    load = fn("load", f"{SITE}/mylib/core.py", 10)
    eps = fn("entry_points", f"{STD}/importlib/metadata/__init__.py", 1020)
    read = fn("read_text", f"{STD}/pathlib.py", 1050)
    work = fn("work", "/home/u/bench.py", 5)
    base = side({(MAIN, work): 6000, (MAIN, load): 3000, (MAIN, find): 100})
    new = side(
        {
            (MAIN, work): 6000,
            (MAIN, load): 3000,
            (MAIN, find_v2): 100,
            (MAIN, find_v2, eps): 600,
            (MAIN, find_v2, eps, read): 5400,
        }
    )
    return base, new


def test_the_caller_of_a_standard_library_leaf_is_the_culprit() -> None:
    base, new = plugins_case(plugin_line=47)
    r = compare(base, new)
    assert r.functions[0].func.name == "read_text"  # the table ranks the leaf...
    assert names(r)[0] == ("find_plugins", "entry_points")  # ...the culprit is the caller
    top = r.culprits[0]
    assert top.owner == "mylib"
    # The same command, 9.1 s -> 15.1 s per run: compared per run, and the culprit's figure is
    # all that came through its new call (600 + 5400 samples at 1 kHz).
    assert r.by_run and r.unit == "s"
    assert top.base == 0.0 and top.new == pytest.approx(6.0)
    doc = to_json(r)
    assert doc["culprits"][0]["name"] == "find_plugins"
    assert doc["culprits"][0]["line"] == 47
    assert doc["culprits"][0]["into"]["name"] == "entry_points"
    assert doc["culprits"][0]["rank"] == 1
    reasons = fail_reasons(r, 20)
    assert (
        reasons
        and "most likely cause: find_plugins (mylib/plugins.py:47), now calls " in (reasons[0])
    )


def test_fail_above_sees_a_culprit_that_base_never_sampled() -> None:
    """BASE's `find_plugins` was too cheap to be sampled, so NEW's is a new function, called
    by the program's root, whose total share cannot grow (what `compare --runs 2` met on a
    loaded host, test_compare.py): the culprit's new cost is 29% of the program, at least 17%
    beyond noise (less 4 sigma of the 10% floor on its 29%), so it fails `--fail-above 15`,
    not 20; before, nothing failed however large it was."""
    find = fn("find_plugins", f"{SITE}/mylib/plugins.py", 4)
    load = fn("load", f"{SITE}/mylib/plugins.py", 8)
    eps = fn("entry_points", f"{STD}/importlib/metadata/__init__.py", 900)
    read = fn("mtime", f"{STD}/importlib/metadata/__init__.py", 695)
    base = side({(MAIN, load): 9000}, argv=["a.py"])
    new = side({(MAIN, load): 9000, (MAIN, find, eps): 600, (MAIN, find, eps, read): 3000})
    r = compare(base, new)
    assert r.whole is None and r.unit == "share"  # not the same command: shares
    assert names(r)[0] == ("find_plugins", "entry_points")
    assert next(f for f in r.functions if f.func.name == "find_plugins").status == "new"
    reasons = fail_reasons(r, 15)
    assert reasons == [
        "find_plugins (mylib/plugins.py:4), now calls entry_points "
        "(importlib/metadata/__init__.py:900): added 29% of the program's cost (at least "
        "17% beyond noise)"
    ], reasons  # the line is the culprit's own: no "most likely cause" after it
    assert fail_reasons(r, 20) == []
    assert fail_reasons(compare(base, side({(MAIN, load): 9000}, argv=["b.py"])), 0) == []


def test_a_leaf_in_the_programs_own_code_is_its_own_culprit() -> None:
    fs = [fn(f"f{i}", f"{SITE}/lib/m.py", 10 * i) for i in range(10)]
    base = side({(MAIN, f): 500 for f in fs})
    new = side({(MAIN, f): 1500 if i == 3 else 500 for i, f in enumerate(fs)})
    r = compare(base, new)
    assert names(r) == [("f3", None)]


def test_growth_spread_over_many_callees_enters_at_their_caller() -> None:
    f = fn("render", f"{SITE}/tpl/render.py", 30)
    leaves = [fn(f"helper{i}", f"{STD}/string.py", 10 * i) for i in range(8)]
    other = fn("other", "/home/u/bench.py", 9)
    base = side({(MAIN, other): 6000, **{(MAIN, f, g): 200 for g in leaves}})
    new = side({(MAIN, other): 6000, **{(MAIN, f, g): 600 for g in leaves}})
    r = compare(base, new)
    assert names(r) == [("render", None)]


def test_the_code_that_changed_is_preferred_to_the_code_it_calls() -> None:
    """mylib.f calls otherpkg.g far more: the self time grows in g, but only mylib's code
    differs between the sides (its lines moved), so f is the culprit, calling g; when it is
    otherpkg's code that moved, g is."""
    g = fn("g", f"{SITE}/otherpkg/g.py", 5)
    other = fn("other", "/home/u/bench.py", 9)

    def case(f_line: int, g_line: int) -> list[tuple[str, str | None]]:
        f1, f2 = fn("f", f"{SITE}/mylib/f.py", 3), fn("f", f"{SITE}/mylib/f.py", f_line)
        g2 = fn("g", f"{SITE}/otherpkg/g.py", g_line)
        base = side({(MAIN, other): 5000, (MAIN, f1): 100, (MAIN, f1, g): 500})
        new = side({(MAIN, other): 5000, (MAIN, f2): 100, (MAIN, f2, g2): 3000})
        return names(compare(base, new))

    assert case(f_line=8, g_line=5)[0] == ("f", "g")
    assert case(f_line=3, g_line=7)[0] == ("g", None)
    assert case(f_line=3, g_line=5)[0] == ("g", None)  # nothing known changed: own code
    # Why mylib counts as changed is in the JSON: its function `f`, from line 3 to line 8.
    base = side({(MAIN, fn("f", f"{SITE}/mylib/f.py", 3)): 100})
    new = side({(MAIN, fn("f", f"{SITE}/mylib/f.py", 8)): 100}, version="3.13.0")
    assert to_json(compare(base, new))["changed"] == [
        {"owner": "mylib", "function": {"name": "f", "module_path": "mylib/f.py"},
         "lines": [3, 8], "python_versions": None},
        {"owner": STDLIB, "function": None, "lines": None,
         "python_versions": ["3.12.1", "3.13.0"]},
    ]  # fmt: skip
    # A function of one name in two files, one on each side, is matched but is no evidence:
    # decorator 4's generated `clamp`, where BASE's samples missed the program's own.
    gen = side({(MAIN, fn("clamp", "<decorator-gen-3>", 1)): 100})
    own = side({(MAIN, fn("clamp", "/home/u/bench.py", 30)): 100})
    assert to_json(compare(gen, own))["changed"] == []
    # Two checkouts of one program are two paths of one file name: its move is evidence.
    v1 = side({(fn("main", "/home/u/v1/app.py", 1), fn("work", "/home/u/v1/app.py", 10)): 100})
    v2 = side({(fn("main", "/home/u/v2/app.py", 1), fn("work", "/home/u/v2/app.py", 14)): 100})
    assert [c["owner"] for c in to_json(compare(v1, v2))["changed"]] == [PROGRAM]


def test_a_traces_spreads_are_summed_not_subtracted_when_folded() -> None:
    """A trace's variance of a call path is the spread of its calls' times, which does not add
    up over a subtree as time does: folded, `a -> b -> a -> b`'s `b` has both `b`s' spreads,
    not the first one's less the second `a`'s."""
    parent, func = [-1, 0, 1, 2, 3], [-1, 1, 2, 1, 2]
    values = [(0.0, 0.0, 0), (10.0, 100.0, 1), (9.0, 90.0, 1), (8.0, 85.0, 1), (7.0, 10.0, 1)]
    folded = fold_recursion(parent, func)
    b = folded.node[2]
    assert folded.node[4] == b
    assert _fold_values(folded, values, traced=True)[b] == (8.0, 100.0, 2)  # 1 + 7 own
    # Sampled, a variance is a sum of squared weights, which adds up as time does.
    assert _fold_values(folded, values, traced=False)[b][1] == pytest.approx(90 - 85 + 10)


def test_identical_sides_have_no_culprit() -> None:
    base, _ = plugins_case(plugin_line=40)
    again, _ = plugins_case(plugin_line=40)
    assert compare(base, again).culprits == []


def hot_constructor(factor: float, argv: list[str] | None = None) -> tuple[Side, Side]:
    """`Model.__init__` is 70% of the program; NEW's does `factor` times the work."""
    init = fn("Model.__init__", f"{SITE}/models/base.py", 12)
    rest = [fn(f"step{i}", "/home/u/bench.py", 20 + i) for i in range(6)]
    base = side({(MAIN, init): 7000, **{(MAIN, r): 500 for r in rest}}, argv)
    new = side({(MAIN, init): 7000 * factor, **{(MAIN, r): 500 for r in rest}}, argv)
    return base, new


def test_a_uniform_slowdown_of_the_same_command_is_seen_per_run() -> None:
    base, new = hot_constructor(factor=1.43)  # the program 1.3x slower
    shares = compare(base, new, Settings(by_run=False))
    assert not shares.grew  # every share moved a few points: nothing is beyond noise there
    r = compare(base, new)
    assert r.whole is not None and r.whole.sig == 1
    assert r.whole.base == pytest.approx(10.0) and r.whole.new == pytest.approx(13.01)
    assert r.by_run and r.unit == "s"
    assert r.functions[0].func.name == "Model.__init__"
    assert names(r)[0] == ("Model.__init__", None)
    assert r.culprits[0].delta == pytest.approx(3.01)
    doc = to_json(r)
    assert doc["normalization"]["by"] == "run"
    assert doc["whole"]["sig"] == 1 and doc["whole"]["ratio"] == pytest.approx(1.301)
    assert any("whole program's time per run grew 30%" in x for x in fail_reasons(r, 5))
    # Asked for shares (the pytest plugin's default), a uniform slowdown fails nothing: the
    # machine's speed changes the time per run, not the shares.
    assert shares.whole is not None and shares.whole.sig == 1 and not shares.by_run
    assert fail_reasons(shares, 5) == []
    per = compare(base, new, Settings(per=(1.0, 1.0), by_run=False))
    assert any("whole program's time per run grew 30%" in x for x in fail_reasons(per, 5))


def test_the_whole_program_is_compared_only_for_the_same_command() -> None:
    base, _ = hot_constructor(1.0, ["bench.py", "--small"])
    _, new = hot_constructor(1.43, ["bench.py", "--large"])
    r = compare(base, new)
    assert r.whole is None and not r.by_run and r.unit == "share"
    base, new = hot_constructor(1.1)  # 1.07x: within a whole run's noise
    r = compare(base, new)
    assert r.whole is not None and r.whole.sig == 0 and not r.by_run
    # One run a side: the line says that its noise is assumed, and how to measure it.
    line = whole_line(r) or ""
    assert line.startswith("Whole program: 10.00 s -> 10.70 s per run")
    assert "(assuming runs of one command vary by 5%; 5 runs a side measure it)" in line
    five = compare(merge_runs([base] * 5, "base"), merge_runs([new] * 5, "new"))
    assert five.whole is not None and "assuming" not in (whole_line(five) or "")


def test_culprits_of_a_deep_recursion_cost_the_trees_size() -> None:
    """50,000 frames deep on both sides, the new cost at the bottom: found in one pass."""
    rec = [fn("rec", f"{SITE}/deep/r.py", 3)] * 50_000
    leaf = fn("leaf", f"{SITE}/deep/r.py", 9)
    base = side({(MAIN, *rec, leaf): 1000, (MAIN,): 1000})
    new = side({(MAIN, *rec, leaf): 3000, (MAIN,): 1000})
    t = time.process_time()
    r = compare(base, new)
    assert time.process_time() - t < 30  # quadratic in the depth would be hours
    assert names(r) == [("leaf", None)]


# ---------------------------------------------------------------------------------------------
# Through the real CLI: a library installed in a site-packages folder of its own, two versions

LIB_V1 = """
    import importlib.metadata

    def find_plugins(n):
        return [n % 7 for _ in range(3)]

    def load(n):
        s = 0
        for k in range(2000):
            s += k * n
        return s
"""

# Version 2 looks its plugins up in the installed distributions each time: the new cost is in
# the standard library (importlib.metadata and what it reads), called by find_plugins.
LIB_V2 = """
    import importlib.metadata

    def find_plugins(n):
        eps = importlib.metadata.entry_points(group="mylib.plugins")
        return [n % 7 for _ in range(3)] + list(eps)

    def load(n):
        s = 0
        for k in range(2000):
            s += k * n
        return s
"""

PROGRAM_SRC = """
    import mylib.plugins as p

    def main():
        for i in range(ROUNDS):
            p.load(i)
            p.find_plugins(i)

    main()
"""


def install(root: Path, version: str, source: str) -> Path:
    site = root / version / "lib" / "python3" / "site-packages"
    (site / "mylib").mkdir(parents=True)
    (site / "mylib" / "__init__.py").write_text("")
    (site / "mylib" / "plugins.py").write_text(textwrap.dedent(source))
    return site


def record(tmp_path: Path, site: Path, name: str) -> Path:
    out = tmp_path / f"{name}.lead"
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONHASHSEED": "0", "NO_COLOR": "1"}
    r = run(
        [*LEADLINE, "run", "--mode", "cpu", "--rate", "2000", "-o", str(out), "prog.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return out


LEADLINE = [__import__("sys").executable, "-m", "leadline"]


@pytest.fixture(scope="module")
def library_change(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    at_hook_kind_ends()
    d = tmp_path_factory.mktemp("culprits")
    (d / "prog.py").write_text(textwrap.dedent(PROGRAM_SRC).replace("ROUNDS", "1500"))
    v1, v2 = install(d, "v1", LIB_V1), install(d, "v2", LIB_V2)
    return {"dir": d, "base": record(d, v1, "base"), "new": record(d, v2, "new")}


def test_cli_names_the_changed_function_first(library_change: dict[str, Path]) -> None:
    d = library_change["dir"]
    r = leadline("diff", library_change["base"], library_change["new"], "--json", cwd=d)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    first = doc["culprits"][0]
    assert (first["name"], first["module_path"]) == ("find_plugins", "mylib/plugins.py")
    assert first["into"] is not None and first["into"]["module_path"].startswith("importlib")
    assert first["delta"] > 0.2  # most of NEW is the new lookups
    # The table's first row is a standard-library leaf, not the changed function.
    assert doc["functions"][0]["name"] != "find_plugins"

    text = leadline("diff", library_change["base"], library_change["new"], cwd=d).stdout
    causes = [ln for ln in text.splitlines() if ln.startswith("Most likely cause: ")]
    assert causes and causes[0].startswith("Most likely cause: find_plugins (mylib/plugins.py:")
    assert text.index("Most likely cause") < text.index("FUNCTION")  # printed first

    fail = leadline(
        "diff", library_change["base"], library_change["new"], "--fail-above", "20", cwd=d
    )
    assert fail.returncode == 1
    assert "most likely cause: find_plugins (mylib/plugins.py:" in fail.stderr


def test_cli_html_outlines_the_culprits_frames(
    library_change: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "d.html"
    r = leadline(
        "diff", library_change["base"], library_change["new"], "--html", "-o", out, cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    result = render_in_chromium(out, actions=[])
    state = assert_clean(result, out)
    assert int(state["culprit-frames"]) >= 1
    text = result.element_text("ll-culprits")
    assert "Most likely cause: find_plugins (mylib/plugins.py:" in text, text
    assert "now calls" in text


def test_a_new_wrapper_counts_the_new_code_under_it_not_the_moved_work() -> None:
    """decorator 4.x -> 5.x: NEW's per-call wrapper `fun` (found in NEW only) runs the
    decorated function's unchanged work, which BASE ran under a generated wrapper, and now also
    `fix`, which binds the arguments in the standard library.  All of `fun`'s cost is new to
    the tree, but only `fix`'s is new cost: `fix` is the culprit, with its growth."""
    gen = fn("weighted_sum", "<decorator-gen-2>", 1)
    counted = fn("counted", "/home/u/bench.py", 13)
    work = fn("weighted_sum", "/home/u/bench.py", 22)
    fun = fn("decorate.<locals>.fun", f"{SITE}/decorator.py", 229)
    fix = fn("fix", f"{SITE}/decorator.py", 199)
    bind = fn("Signature._bind", f"{STD}/inspect.py", 3076)
    defaults = fn("BoundArguments.apply_defaults", f"{STD}/inspect.py", 2892)
    base = side({(MAIN, gen, counted, work): 9000, (MAIN, gen): 100, (MAIN,): 100})
    new = side(
        {
            (MAIN, fun, counted, work): 9000,
            (MAIN, fun): 300,
            (MAIN, fun, fix): 1100,
            (MAIN, fun, fix, bind): 2000,
            (MAIN, fun, fix, defaults): 1600,
            (MAIN,): 100,
        }
    )
    r = compare(base, new)
    assert r.by_run  # the whole program: 9.2 s -> 14.4 s
    # `fun` holds 5.0 s of new cost (its own 0.3 s, `fix`'s 4.7 s) though its path grew by
    # 14.0 s; `fix` carries most of that, and no callee of `fix` carries half of its.
    assert names(r) == [("fix", None)]
    assert r.culprits[0].delta == pytest.approx(4.7)
    assert (r.culprits[0].base, r.culprits[0].new) == pytest.approx((0.0, 4.7))


def retrying_case(
    host: float, lines: tuple[int, int], added: float = 1000, work: float = 1.0
) -> tuple[Side, Side]:
    """retrying 1.3.4 -> 1.3.7: `wrapped_f` (retrying) calls `Retrying.call` (retrying), which
    runs the program's own `checksum`, and now also a `Retrying.__init__` that adds a logging
    handler on every call (`added` samples of 1 ms of new cost); NEW's host runs everything
    `host` times slower, and NEW's `checksum` does `work` times the work.  `lines`: where
    `Retrying.__init__` starts on each side (it moved when the code changed)."""
    lib = f"{SITE}/retrying.py"
    wrapped = fn("retry.<locals>.wrap.<locals>.wrapped_f", lib, 54)
    call = fn("Retrying.call", lib, 243)
    init = [fn("Retrying.__init__", lib, k) for k in lines]
    checksum = fn("checksum", "/home/u/bench.py", 15)
    add = fn("Logger.addHandler", f"{STD}/logging/__init__.py", 1646)
    base = side({(MAIN, wrapped, call, checksum): 9000, (MAIN, wrapped, init[0]): 100})
    new = side(
        {
            (MAIN, wrapped, call, checksum): 9000 * work * host,
            (MAIN, wrapped, init[1]): 100 * host,
            (MAIN, wrapped, init[1], add): added * host,
        }
    )
    return base, new


def test_the_hosts_speed_is_read_from_the_code_that_did_not_change() -> None:
    """Beside the new cost (1.0 s in `Retrying.__init__`'s call to `Logger.addHandler`), NEW's
    host ran 1.15x slower: the program's unchanged `checksum` grew 1.35 s, more than the new
    cost.  Read at BASE's speed (the ratio of `checksum`'s self cost, code whose owner did not
    change), `Retrying.__init__` carries the growth and is the culprit, with 1.0 s."""
    base, new = retrying_case(host=1.15, lines=(64, 63))
    r = compare(base, new)
    assert r.by_run and r.whole is not None and r.whole.new == pytest.approx(10.1 * 1.15)
    assert names(r)[0] == ("Retrying.__init__", "Logger.addHandler")
    assert r.culprits[0].delta == pytest.approx(1.0)
    assert r.culprits[0].new == pytest.approx(1.0 * 1.15)  # as recorded
    # At NEW's own speed, `Retrying.call`'s growth (1.35 s, the host's) outweighs
    # `Retrying.__init__`'s (1.17 s).  With no owner known to have changed, the host's speed is
    # not read (the program's own `checksum` may have changed), and `checksum` comes first.
    unchanged = retrying_case(host=1.15, lines=(64, 64))
    assert names(compare(*unchanged))[0] == ("checksum", None)


def test_the_hosts_speed_explains_no_more_than_the_whole_programs_noise() -> None:
    """Code whose owner did not change also runs more when changed code calls it more: NEW's
    `Retrying.call` retries, and `checksum` does twice the work on the same host.  Taken for
    the host's speed, that would leave no growth to follow; the host's speed explains at most
    what the whole program's judge counts as noise (3 x 5%), and the retried call is the
    culprit, with the growth beyond it (18 s / 1.15 - 9 s)."""
    base, new = retrying_case(host=1.0, lines=(64, 63), added=0, work=2.0)
    r = compare(base, new)
    assert r.whole is not None and r.whole.ratio == pytest.approx(18.1 / 9.1)
    assert names(r)[0] == ("Retrying.call", "checksum")
    assert r.culprits[0].delta == pytest.approx(18.0 / 1.15 - 9.0)


def test_recursion_is_folded_at_its_first_frame() -> None:
    """main -> a -> b -> a -> c: the second `a` is cut back to the first, so `c` hangs under
    the first `a`; the cost of each sample stays on one folded path."""
    # node:    0   1(main) 2(a) 3(b) 4(a) 5(c) 6(b, under the second a)
    parent = [-1, 0, 1, 2, 3, 4, 4]
    func = [-1, 10, 11, 12, 11, 13, 12]
    f = fold_recursion(parent, func)
    names_of = {10: "main", 11: "a", 12: "b", 13: "c"}
    paths = {
        tuple(names_of[f.func[y]] for y in _path(f.parent, x)) for x in range(1, len(f.parent))
    }
    assert paths == {("main",), ("main", "a"), ("main", "a", "b"), ("main", "a", "c")}
    assert list(f.back) == [0, 0, 0, 0, 1, 0, 0]
    assert f.node[4] == f.node[2] and f.node[6] == f.node[3]
    # Inclusive costs: main 10 (1 its own), a 9, b 8 (2 own), the second a 6 (1 own), c 3,
    # the inner b 2.  Folded: a 9, b 2 + 2 = 4, c 3.
    incl = [0.0, 10.0, 9.0, 8.0, 6.0, 3.0, 2.0]
    folded = f.values(incl)
    by_path = {
        tuple(names_of[f.func[y]] for y in _path(f.parent, x)): folded[x]
        for x in range(1, len(f.parent))
    }
    assert by_path == {
        ("main",): 10.0,
        ("main", "a"): 9.0,
        ("main", "a", "b"): 4.0,
        ("main", "a", "c"): 3.0,
    }


def _path(parent: list[int], x: int) -> list[int]:
    out = []
    while x > 0:
        out.append(x)
        x = parent[x]
    return out[::-1]


def test_new_cost_spread_over_every_level_of_a_recursion_is_one_culprit() -> None:
    """jsonschema 3.2.0 -> 4.0.1: `ref` -> `descend` -> `iter_errors` -> `ref` ... 100 levels
    deep, and at every level `ref` now resolves its reference with `_finditem`, which scans the
    whole schema: a few samples a level, within counting noise on each path, 0.6 s in all.
    Folded at the first `ref`, the levels add up: `_finditem` is the culprit with all of it
    (unfolded, the walk went down the recursion and ended at a `ref` ten levels from its bottom,
    with a tenth of it, as one busy run of the real pair on 3.14 did)."""
    lib = f"{SITE}/jsonschema/validators.py"
    validate = fn("Validator.validate", lib, 300)
    ref = fn("ref", f"{SITE}/jsonschema/_validators.py", 280)
    descend = fn("Validator.descend", lib, 240)
    errors = fn("Validator.iter_errors", lib, 200)
    resolve = fn("RefResolver.resolve", lib, 800)
    finditem = fn("RefResolver._finditem", lib, 700)
    base_stacks: dict[tuple[Func, ...], float] = {(MAIN, validate): 100}
    new_stacks: dict[tuple[Func, ...], float] = {(MAIN, validate): 100}
    level: tuple[Func, ...] = (MAIN, validate, errors)
    for _ in range(100):
        level = (*level, ref)
        base_stacks[(*level, resolve)] = 2
        new_stacks[(*level, resolve)] = 2
        new_stacks[(*level, resolve, finditem)] = 6
        level = (*level, descend, errors)
        base_stacks[level] = 5
        new_stacks[level] = 5
    r = compare(side(base_stacks), side(new_stacks))
    assert r.by_run
    assert names(r)[0] == ("RefResolver._finditem", None)
    assert r.culprits[0].delta == pytest.approx(0.6)
