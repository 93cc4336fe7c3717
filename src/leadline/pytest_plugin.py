"""The pytest plugin: ``pytest --leadline-baseline DIR`` records every test and fails a test
whose record regressed against the one stored for it.

Each test is recorded one way, never two at once (a tracer's hooks would weigh on samples):

- by its calls (a trace, ``DIR/<test>.calls.lead``, up to WORK_OPTIONS' size, with a digest of
  its calls beside it): calls do not depend on the machine's speed or load, so a test too short
  for a single sample is still compared, and fails when a function's calls (or the calls made
  under it) grew more than ``--leadline-fail-above`` percent (default 25), naming the code that
  makes the new calls (``leadline diff --calls``);
- by samples (``DIR/<test>.lead``), once its calls overran that record (``DIR/<test>.long``):
  it fails when a function's cost grew more than the same percentage beyond noise.  Costs are
  shares of the test's samples by default, which the speed of a shared CI machine does not
  change; ``--leadline-per-run`` compares time per run of the test instead, which also sees a
  test that became uniformly slower but is only as steady as the machine.
  ``--leadline-runs N`` runs such a test N times (its function called again with the same
  fixtures) into ``DIR/<test>.runs/``, and compares N runs a side as ``leadline diff`` does:
  from 5, the noise is measured from the runs' spread instead of assumed.

The first run (or ``--leadline-update``) stores the baselines; later runs record into
``DIR/latest/`` and compare.  The plugin is installed with leadline and does nothing unless
``--leadline-baseline`` is given.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .analyse.diff import (
    DEFAULT_SIGMA,
    Settings,
    Side,
    compare,
    expand_inputs,
    fail_reasons,
    load_side,
    merge_runs,
    work_settings,
    work_side,
    work_signature,
)
from .errors import LeadlineError
from .record.profiler import ProfileOptions, Profiler
from .record.tracer import TraceOptions, Tracer

LATEST = "latest"
MAX_RUNS = 100  # --leadline-runs
# A test's work record: its calls, up to this size (a test with more calls than that, about
# 300,000, runs long enough for its samples to speak for it).
WORK_OPTIONS = TraceOptions(heap=False, memory=False, max_size=4 << 20)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-\[\]]+")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("leadline", "leadline: fail tests whose profile regressed")
    group.addoption(
        "--leadline-baseline",
        metavar="DIR",
        help="profile each test and compare it with its stored profile in DIR "
        "(stored there on the first run)",
    )
    group.addoption(
        "--leadline-update",
        action="store_true",
        help="store this run's profiles as the baseline instead of comparing",
    )
    group.addoption(
        "--leadline-fail-above",
        metavar="PCT",
        type=float,
        default=25.0,
        help="fail a test when a function's cost grew more than PCT%% beyond noise (default 25)",
    )
    group.addoption(
        "--leadline-per-run",
        action="store_true",
        help="compare time per run of the test, not shares of its samples",
    )
    group.addoption(
        "--leadline-rate",
        metavar="HZ",
        type=float,
        default=1000.0,
        help="sampling rate (default 1000 Hz)",
    )
    group.addoption(
        "--leadline-runs",
        metavar="N",
        type=int,
        default=1,
        help="run each sampled test N times and compare N runs a side (from 5, noise is "
        "measured from their spread); tests compared by their calls run once",
    )
    group.addoption(
        "--leadline-mode",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu (default: time on CPU, steadier) or wall (time waiting counts too)",
    )


def profile_name(nodeid: str) -> str:
    """A file name for a test id: readable, unique for distinct ids, no directories."""
    name = _UNSAFE.sub("_", nodeid.replace("::", "__").replace("/", "_")).strip("._")
    if len(name) > 150:
        import hashlib

        name = name[:130] + "-" + hashlib.sha1(nodeid.encode()).hexdigest()[:16]
    return name + ".lead"


# Files and folders that mark the top of a project.
_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "tox.ini", "pytest.ini", ".git")


def baseline_key(path: Path, nodeid: str, invocation_dir: Path) -> str:
    """The name a test's baseline is kept under: its file relative to the top of its project
    (the nearest folder above it with one of _PROJECT_MARKERS; failing that, the folder pytest
    was started in, or the file's own absolute path), then the node id's part after the file.
    Not the node id itself: that is relative to pytest's rootdir, which moves when DIR outside
    the project starts to exist (pytest takes the common ancestor of the command line's paths,
    the option's value among them), so the second run would store a second set under other
    names instead of comparing."""
    path = path.resolve()
    top = next((d for d in path.parents if any((d / m).exists() for m in _PROJECT_MARKERS)), None)
    if top is None and path.is_relative_to(invocation_dir.resolve()):
        top = invocation_dir.resolve()
    where = path.relative_to(top).as_posix() if top is not None else path.as_posix()
    _, sep, rest = nodeid.partition("::")
    return where + sep + rest


class _Session:
    def __init__(self, config: pytest.Config) -> None:
        self.dir = Path(config.getoption("leadline_baseline"))
        self.update: bool = config.getoption("leadline_update")
        self.fail_above: float = config.getoption("leadline_fail_above")
        self.per: tuple[float, float] | None = (
            (1.0, 1.0) if config.getoption("leadline_per_run") else None
        )
        self.options = ProfileOptions(
            rate_hz=config.getoption("leadline_rate"), mode=config.getoption("leadline_mode")
        )
        self.stored: list[str] = []
        self.compared: list[str] = []
        self.regressed: list[str] = []
        self.short: list[str] = []  # sampled, but a side has no sample: not compared
        self.by_calls: list[str] = []  # compared by their calls
        self.marked_long: list[str] = []  # too many calls to count: sampled from the next run
        self.runs: int = config.getoption("leadline_runs")
        self.fewer: list[str] = []  # failed when run again: fewer runs than asked
        # Their calls changed, and not when traced again: calls that hang on timing.
        self.unrepeated: list[str] = []


_KEY = pytest.StashKey[_Session]()


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("leadline_baseline", None):
        session = _Session(config)
        try:
            if not 1 <= session.runs <= MAX_RUNS:
                raise LeadlineError(f"--leadline-runs must be between 1 and {MAX_RUNS}")
            session.options.validate()
            (session.dir / LATEST).mkdir(parents=True, exist_ok=True)
        except (LeadlineError, OSError) as e:
            raise pytest.UsageError(f"--leadline-baseline: {e}") from None
        config.stash[_KEY] = session


def work_name(name: str) -> str:
    """The file of a test's work record beside its profile `name` (``x.lead``: ``x.calls.lead``)."""
    return name[: -len(".lead")] + ".calls.lead"


def runs_name(name: str) -> str:
    """The folder of a sampled test's runs (``--leadline-runs``) beside its profile `name`."""
    return name[: -len(".lead")] + ".runs"


def long_mark(name: str) -> str:
    """The file that says a test made too many calls for a work record: it is sampled."""
    return name[: -len(".lead")] + ".long"


@dataclass
class _Plan:
    """How one test is recorded this run, and where to."""

    trace: bool  # its calls (a short test) or its samples (a long one)
    store: bool  # as its baseline, or into LATEST to compare
    path: Path  # a capture, or with `runs`, the folder of its runs
    runs: int = 1


def _plan(session: _Session, name: str) -> _Plan:
    """Each test is recorded one way, never two at once (a tracer's hooks would weigh on the
    samples): by its calls until it proves too long for a work record, by samples from then on.
    The first run stores work records; a test whose calls overran its record is marked long,
    and the next run stores its samples."""
    d = session.dir
    if (d / long_mark(name)).exists():
        # Several runs are a folder of captures, one run a capture: asking for another number
        # of runs than the baseline's stores a baseline of that many.
        sampled = name if session.runs == 1 else runs_name(name)
        store = session.update or not (d / sampled).exists()
        return _Plan(False, store, (d if store else d / LATEST) / sampled, session.runs)
    store = session.update or not (d / work_name(name)).exists()
    return _Plan(True, store, (d if store else d / LATEST) / work_name(name))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    session = item.config.stash.get(_KEY, None)
    if session is None:
        return (yield)
    name = profile_name(baseline_key(item.path, item.nodeid, item.config.invocation_params.dir))
    plan = _plan(session, name)
    first = plan.path
    if plan.runs > 1 and not plan.trace:
        _empty_runs(plan.path)
        first = plan.path / _run_file(1)
    recorder = _recorder(item, session, first, plan.trace)
    recorder.start()
    try:
        result = yield
    finally:
        recorder.stop()
    for i in range(2, plan.runs + 1):
        if not _run_again(item, session, plan.path / _run_file(i)):
            session.fewer.append(item.nodeid)
            break
    if plan.store:
        if plan.trace:
            _store_work(session, item.nodeid, name, plan.path)
        else:
            session.stored.append(item.nodeid)
        return result
    baseline = session.dir / (work_name(name) if plan.trace else plan.path.name)
    try:
        if plan.trace:
            # Calls, which the machine's speed and load do not change.  A record cut short
            # holds the calls of the test's start: what grew there grew.
            new = work_side(load_side(str(plan.path)))
            if new.complete and work_signature(new) == _stored_signature(baseline):
                session.compared.append(item.nodeid)  # the very same calls
                session.by_calls.append(item.nodeid)
                return result
            base = work_side(load_side(str(baseline)))
            settings = work_settings(base, tree=False)
            see = f"leadline diff --calls {baseline} {plan.path}"
        else:
            sides = _sampled_sides(baseline, plan.path)
            if sides is None:
                session.short.append(item.nodeid)  # too short for a sample: nothing to compare
                return result
            base, new = sides
            # Shares unless asked for time per run: a baseline may come from another machine.
            settings = Settings(per=session.per, sigma=DEFAULT_SIGMA, tree=False, by_run=False)
            see = f"leadline diff {baseline} {plan.path}" + (" --per 1" if session.per else "")
        reasons = fail_reasons(compare(base, new, settings), session.fail_above)
        if (
            reasons
            and plan.trace
            and not _calls_change_again(item, session, plan.path, base, settings)
        ):
            session.unrepeated.append(item.nodeid)
            reasons = []
        error = ""
    except LeadlineError as e:
        error = str(e)
    if error:
        pytest.fail(f"leadline: cannot compare with the baseline: {error}", pytrace=False)
    session.compared.append(item.nodeid)
    if plan.trace:
        session.by_calls.append(item.nodeid)
    if reasons:
        session.regressed.append(item.nodeid)
        lines = "\n".join(f"  {r}" for r in reasons[:5])
        pytest.fail(
            f"leadline: this test's profile regressed against {baseline}:\n{lines}\n  see: {see}",
            pytrace=False,
        )
    return result


def _run_file(i: int) -> str:
    return f"{i:02d}.lead"


def _empty_runs(folder: Path) -> None:
    """The folder of a test's runs, without the runs of an earlier session."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.lead"):
        old.unlink()


def _calls_change_again(
    item: pytest.Item, session: _Session, latest: Path, base: Side, settings: Settings
) -> bool:
    """Whether a test whose calls changed against its baseline changes them again when its
    function is traced once more.  A change of code does; calls that hang on timing need not
    (more-itertools' `callback_iter` polls a queue with a 0.1 s timeout while a thread fills
    it: on a busy host the thread can be that late, and the poll runs once more).  A test that
    cannot run twice keeps its verdict."""
    path = latest.with_suffix(".again.lead")
    try:
        if not _run_again(item, session, path, trace=True):
            return True
        new = work_side(load_side(str(path)))
        return bool(fail_reasons(compare(base, new, settings), session.fail_above))
    finally:
        path.unlink(missing_ok=True)


def _recorder(item: pytest.Item, session: _Session, path: Path, trace: bool) -> Tracer | Profiler:
    """The test's recorder into `path`: of its calls (`trace`), or sampled."""
    recorder: Tracer | Profiler
    if trace:
        recorder = Tracer(path, WORK_OPTIONS, argv=[item.nodeid])
        recorder.warn = False  # a record cut short marks the test long (pytest_runtest_call)
    else:
        recorder = Profiler(path, session.options, argv=[item.nodeid])
    recorder.keep_sources = False  # compared by its figures, never shown with its source
    return recorder


def _run_again(item: pytest.Item, session: _Session, path: Path, trace: bool = False) -> bool:
    """Calls the test's function again (its fixtures as they are), sampled (or, `trace`, its
    calls recorded) into `path`; False, and no capture, when it does not pass again (a test
    that cannot run twice)."""
    recorder = _recorder(item, session, path, trace)
    recorder.start()
    try:
        item.runtest()
        passed = True
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:  # a failure, an error or a skip of the repeat: not this run's outcome
        passed = False
    finally:
        recorder.stop()
    if not passed:
        path.unlink(missing_ok=True)
    return passed


def _sampled_sides(baseline: Path, latest: Path) -> tuple[Side, Side] | None:
    """The baseline's samples and this run's: a capture each, or folders of runs (a side of
    several runs, as `leadline diff` makes of a folder); None when a run has no sample."""
    sides = []
    for where in (baseline, latest):
        runs = [load_side(p) for p in expand_inputs([str(where)])]
        if min(r.total for r in runs) <= 0:
            return None
        sides.append(merge_runs(runs, str(where)))
    return sides[0], sides[1]


def _store_work(session: _Session, nodeid: str, name: str, path: Path) -> None:
    """A test's work record becomes its baseline, with the signature of its calls beside it;
    one cut short (too many calls to count) marks the test long instead."""
    try:
        side = work_side(load_side(str(path)))
    except LeadlineError:
        side = None
    if side is None or not side.complete:
        path.unlink(missing_ok=True)  # sampled from the next run on
        (session.dir / long_mark(name)).touch()
        session.marked_long.append(nodeid)
        return
    path.with_suffix(".sig").write_text(work_signature(side) + "\n")
    session.stored.append(nodeid)


def _stored_signature(baseline: Path) -> str | None:
    try:
        return baseline.with_suffix(".sig").read_text().strip()
    except OSError:
        return None


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = config.stash.get(_KEY, None)
    if session is None:
        return
    terminalreporter.write_line(
        f"leadline: {len(session.compared)} tests compared with their baseline "
        f"({len(session.regressed)} regressed; {len(session.by_calls)} by their calls), "
        f"{len(session.stored)} baselines stored in {session.dir}"
        + (
            f", {len(session.marked_long)} too long to count calls (sampled from the next run)"
            if session.marked_long
            else ""
        )
        + (f", {len(session.short)} too short to sample" if session.short else "")
        + (
            f", {len(session.fewer)} run fewer times than asked (failed when run again)"
            if session.fewer
            else ""
        )
        + (
            f", {len(session.unrepeated)} whose calls changed but not when traced again "
            "(not failed)"
            if session.unrepeated
            else ""
        )
    )
