"""leadline: where a Python program's time and memory go.

with leadline.trace("run.lead"):        # every call, with time and memory
    work()

@leadline.traced("f.lead")               # the same, around each call of a function
def f(): ...

with leadline.profile("run.lead"):      # sample every thread's stack at 100 Hz
    work()

leadline.mark("cache.miss", key=k)      # a tracepoint: a few ns when nothing records

leadline.start_agent("http://pyroscope:4040", service="api", labels={"version": "2"})
"""

__version__ = "0.1.0"

import sys
from typing import TYPE_CHECKING, Any

if "t" in getattr(sys, "abiflags", ""):
    # A free-threaded interpreter (python3.13t, 3.14t) that finds a leadline built for the default
    # one: its native core would not load, and could not read this build's frames if it did.
    raise ImportError(
        "leadline does not support free-threaded CPython builds (Py_GIL_DISABLED): "
        "use the default build of this Python version"
    )

from .errors import LeadlineError
from .record.marks import mark, span

if TYPE_CHECKING:
    from .fleet.agent import start_agent, stop_agent
    from .record.mark_handler import MarkHandler
    from .record.profiler import ProfileOptions, Profiler, ProfileResult, profile
    from .record.tracer import TraceOptions, Tracer, TraceResult, trace, traced

# Loaded on first use, not by `import leadline`, which every program that marks its code pays at
# start-up (it loads `mark` and `span`: 14 ms on 3.12 here, against 48 ms when it loaded
# everything): the module of each other name.  The agent brings HTTP, TLS and pprof encoding,
# MarkHandler `logging`, the recorders dataclasses, pathlib, hashing and the capture format.
_LAZY = {
    "start_agent": "fleet.agent",
    "stop_agent": "fleet.agent",
    "MarkHandler": "record.mark_handler",
    **dict.fromkeys(("ProfileOptions", "Profiler", "ProfileResult", "profile"), "record.profiler"),
    **dict.fromkeys(("TraceOptions", "Tracer", "TraceResult", "trace", "traced"), "record.tracer"),
}


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'leadline' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext leadline`` in IPython or Jupyter: the magics of leadline.notebook."""
    from .notebook import load_ipython_extension as load

    load(ipython)


__all__ = [
    "LeadlineError",
    "MarkHandler",
    "ProfileOptions",
    "ProfileResult",
    "Profiler",
    "TraceOptions",
    "TraceResult",
    "Tracer",
    "__version__",
    "mark",
    "profile",
    "span",
    "start_agent",
    "stop_agent",
    "trace",
    "traced",
]


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
