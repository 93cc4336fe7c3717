"""Two functions in turn, each call a few milliseconds (shorter than a sampler's interval at 100
to 500 Hz): slow_part does SLOW (environment, default 1) times 10,000 squares, fast_part 20,000
sums, for SECONDS (default 4) of wall-clock time.  Given a path, it writes there the CPU time
each took, measured around each call (the truth a profile's shares are judged against).  At
SLOW=3 a turn takes about 4 ms, 70% of it in slow_part.  The test suite's support.ALTERNATING
is this file; bench/busy_accuracy.py runs it beside CPU hogs."""

import json
import os
import sys
import time

SLOW = int(os.environ.get("SLOW", "1"))
SECONDS = float(os.environ.get("SECONDS", "4"))


def slow_part(n):
    s = 0
    for i in range(n * SLOW):
        s += i * i
    return s


def fast_part(n):
    s = 0
    for i in range(n):
        s += i
    return s


spent = {"slow_part": 0, "fast_part": 0}
t = time.time()
while time.time() - t < SECONDS:
    c0 = time.thread_time_ns()
    slow_part(10000)
    c1 = time.thread_time_ns()
    fast_part(20000)
    spent["slow_part"] += c1 - c0
    spent["fast_part"] += time.thread_time_ns() - c1
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as f:
        json.dump(spent, f)
print("done")
