"""leadline: where a Python program's time and memory go.

with leadline.trace("run.lead"):        # every call, with time and memory
    work()

@leadline.traced("f.lead")               # the same, around each call of a function
def f(): ...
"""

__version__ = "0.1.0"

from .errors import LeadlineError
from .tracer import TraceOptions, Tracer, TraceResult, trace, traced

__all__ = [
    "LeadlineError",
    "TraceOptions",
    "TraceResult",
    "Tracer",
    "__version__",
    "trace",
    "traced",
]
