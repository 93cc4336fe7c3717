"""One module per subcommand; the CLI is built from these.  A command's module is imported only
when that command runs (or for the full help), so each command starts without the others'
dependencies."""

from __future__ import annotations

import importlib
from types import ModuleType

NAMES = (
    "trace",
    "run",
    "attach",
    "dump",
    "top",
    "probe",
    "sweep",
    "overhead",
    "report",
    "diff",
    "compare",
    "log",
    "export",
)


def load(names: tuple[str, ...] = NAMES) -> list[ModuleType]:
    return [importlib.import_module(f"{__name__}.{name}") for name in names]
