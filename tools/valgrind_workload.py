"""A short program that exercises every part of the native core, run under valgrind by
tools/valgrind_check.py: hooks with C calls, a second thread, the writer, the sampler, the
allocator hooks, the stack sampler, then reading the captures back (decoder and aggregator)."""

import os
import sys
import threading
import time

import leadline
from leadline import _native
from leadline.analyse.trace import analyse
from leadline.capture.reader import Capture


def f(n: int) -> list[bytes]:
    return [bytes(100) for _ in range(n)]


def worker() -> None:
    f(200)


path = sys.argv[1]
with leadline.trace(path, c_calls=True):
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    f(500)
with leadline.trace(path, rss_trigger=-1, previous=True, max_depth=3):
    f(100)
with Capture(path) as cap:
    profile = analyse(cap)
    assert profile.events > 0 and profile.nodes
    assert sum(1 for _ in cap.events_by_time()) == profile.recorded
# The stack sampler, in this process at a high rate, with a second thread and memory.  It runs
# for at least a second: valgrind runs one thread at a time, and on a loaded host the sampler's
# thread may wait long for its turn.
started = time.monotonic()
with leadline.profile(path + ".s", rate=2000, memory=True) as sampler:
    t = threading.Thread(target=worker)
    t.start()
    for _ in range(20):
        f(300)
    t.join()
    while time.monotonic() - started < 1.0:
        f(300)
result = sampler.stop()
with Capture(path + ".s") as cap:
    from leadline.analyse.samples import load_profile

    sampled = load_profile(cap)
    assert sampled.samples > 0, f"no samples: {result}"
print("ok", profile.events, sampled.samples, flush=True)
# A block allocated by the native reader that is still reachable when valgrind looks: it proves
# to valgrind_check.py that its filter recognises leadline's frames.  os._exit skips the
# interpreter's finalisation, which would free it.
canary = _native.Aggregator(bytes(8), bytes(8))
os._exit(0)
