"""The pytest plugin: ``pytest --leadline-baseline DIR`` profiles every test and fails a test
whose profile regressed against the one stored for it.

The first run (or ``--leadline-update``) stores each test's profile as ``DIR/<test>.lead``.
Later runs profile the test again, into ``DIR/latest/<test>.lead``, and compare the two with
``leadline diff``'s rules: a test fails when one of its functions costs more than
``--leadline-fail-above`` percent (default 25) more than in the baseline, beyond noise.  Costs
are shares of the test's samples by default, which the speed of a shared CI machine does not
change; ``--leadline-per-run`` compares time per run of the test instead, which also sees a
test that became uniformly slower but is only as steady as the machine.
``leadline diff DIR/<test>.lead DIR/latest/<test>.lead --html`` shows why.

The plugin is installed with leadline and does nothing unless ``--leadline-baseline`` is given.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from .analyse.diff import DEFAULT_SIGMA, Settings, compare, fail_reasons, load_side
from .errors import LeadlineError
from .record.profiler import ProfileOptions, Profiler

LATEST = "latest"
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
        self.short: list[str] = []


_KEY = pytest.StashKey[_Session]()


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("leadline_baseline", None):
        session = _Session(config)
        try:
            session.options.validate()
            (session.dir / LATEST).mkdir(parents=True, exist_ok=True)
        except (LeadlineError, OSError) as e:
            raise pytest.UsageError(f"--leadline-baseline: {e}") from None
        config.stash[_KEY] = session


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    session = item.config.stash.get(_KEY, None)
    if session is None:
        return (yield)
    name = profile_name(baseline_key(item.path, item.nodeid, item.config.invocation_params.dir))
    baseline = session.dir / name
    store = session.update or not baseline.exists()
    target = baseline if store else session.dir / LATEST / name
    profiler = Profiler(target, session.options, argv=[item.nodeid])
    profiler.start()
    try:
        result = yield
    finally:
        profiler.stop()
    if store:
        session.stored.append(item.nodeid)
        return result
    try:
        sides = [load_side(str(p)) for p in (baseline, target)]
        if min(side.total for side in sides) <= 0:
            session.short.append(item.nodeid)  # too short to be sampled: nothing to compare
            return result
        # Shares unless asked for time per run: a baseline may come from another machine.
        settings = Settings(per=session.per, sigma=DEFAULT_SIGMA, tree=False, by_run=False)
        diff = compare(sides[0], sides[1], settings)
        error = ""
    except LeadlineError as e:
        error = str(e)
    if error:
        pytest.fail(f"leadline: cannot compare with the baseline: {error}", pytrace=False)
    session.compared.append(item.nodeid)
    reasons = fail_reasons(diff, session.fail_above)
    if reasons:
        session.regressed.append(item.nodeid)
        lines = "\n".join(f"  {r}" for r in reasons[:5])
        pytest.fail(
            f"leadline: this test's profile regressed against {baseline}:\n{lines}\n"
            f"  see: leadline diff {baseline} {target}" + (" --per 1" if session.per else ""),
            pytrace=False,
        )
    return result


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    session = config.stash.get(_KEY, None)
    if session is None:
        return
    terminalreporter.write_line(
        f"leadline: {len(session.compared)} tests compared with their baseline "
        f"({len(session.regressed)} regressed), {len(session.stored)} baselines stored in "
        f"{session.dir}" + (f", {len(session.short)} too short to sample" if session.short else "")
    )
