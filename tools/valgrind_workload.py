"""A short program that drives every C file of the native core (src/leadline/_native/*.c), run
under valgrind by tools/valgrind_check.py.  Each part asserts that its mechanism really ran
(events recorded, samples taken, marks written, probes counted), so that a part which silently
does nothing fails here instead of passing valgrind unseen:

  trace     tracer.c, memory.c, capture.c: C calls, a second thread, the RSS sampler and the
            allocator hooks, --rss-trigger with --previous, max depth, exact RSS, filters, a
            fork() while recording (the writer and sampler threads joined and restarted)
  read      reader.c: the event decoder, the aggregator, the RSS timeline decoder, and damaged
            payloads fed to each
  sample    sampler.c, stackwalk.c, procmem.c, tasks.c, locals.c, pyobjects.c, native.c:
            leadline.profile in this process (with memory, a thread and a fork), asyncio
            tasks taking turns (--async all), the same with --subprocesses finding a child
            Python, `attach` to another Python process (inspect_process, the ELF symbol
            lookup, remote reads) and a snapshot of it with its local variables (dump
            --locals) and its threads' names, and one with its C frames (dump --native),
            line tables and _Py_DebugOffsets tables, good and damaged
  marks     marks.c: mark/span/MarkHandler with nothing listening, then into a trace, a profile
            and a probe capture (Journal); long fields, long names, a full chunk
  probe     probe.c: Probes/ProbeRecorder counting line and function-entry probes (3.10/3.11:
            the C trace function, in two threads; 3.12+: sys.monitoring), more probes than the
            first watch table holds

It prints one line, "ok {json}", with what each part counted; tools/valgrind_check.py prints
it and also requires every C file of the directory to have run under valgrind."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import leadline
from leadline import _native
from leadline.analyse.samples import load_profile
from leadline.analyse.trace import analyse
from leadline.capture.reader import Capture
from leadline.record.probe import ProbeRecorder, Probes, parse_count
from leadline.record.profiler import ProfileOptions, Profiler, attach, inspect_process

OUT = Path(sys.argv[1])
OUT.mkdir(parents=True, exist_ok=True)
ran: dict[str, Any] = {}


def f(n: int) -> list[bytes]:
    return [bytes(100) for _ in range(n)]


def g(n: int) -> int:
    return sum(len(b) for b in f(n))


def worker() -> None:
    f(200)
    g(50)


@leadline.span()
def spanned(n: int) -> int:
    return g(n)


def big() -> int:
    block = bytearray(2 << 20)  # a large block: the next event reads RSS exactly
    return len(block)


def fork_and_wait() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def make_marks() -> None:
    leadline.mark("vg.plain")
    leadline.mark(
        "vg.fields",
        i=7,
        big=2**70,
        x=1.5,
        nan=float("nan"),
        s='q"\\\n\x01',
        n=None,
        t=True,
        o=object(),
    )
    leadline.mark("vg.long", blob="x" * 20000)  # over the record limit: its fields become {}
    leadline.mark("n" * 2000)  # a name cut to 1024 bytes
    leadline.mark(12345)  # not a str: its str()
    spanned(5)
    logging.getLogger("vg").warning("logged %d", 3)


# -- marks with nothing listening: the fast path ------------------------------------------------
logging.getLogger("vg").addHandler(leadline.MarkHandler())
logging.getLogger("vg").propagate = False
assert not _native.marks_active()
make_marks()
_native.mark_at(0, "vg.at", __file__, 1, {"k": 1})

# -- trace ------------------------------------------------------------------------------------
trace_path = OUT / "trace.lead"
with leadline.trace(trace_path, c_calls=True) as tr:
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    f(500)
    big()
    make_marks()
    for _ in range(600):  # enough marks to fill a chunk
        leadline.mark("vg.many", k="v" * 100)
    fork_and_wait()
    g(100)
with leadline.trace(
    OUT / "trigger.lead", rss_trigger=-1, previous=True, max_depth=3, coarse_time=True
) as tr2:
    f(100)
    big()
    g(200)
with leadline.trace(OUT / "exact.lead", exact_rss=True, exclude=("*threading*",)) as tr3:
    g(100)
# Calls alone (the pytest plugin's work record): no RSS read, no thread for it, a size limit.
work = leadline.Tracer(
    OUT / "work.lead", leadline.TraceOptions(heap=False, memory=False, max_size=1 << 20)
)
with work:
    g(100)
    f(10)
assert work.result is not None and work.result.recorded > 0, work.result
assert tr.result is not None and tr.result.recorded > 1000, tr.result
assert tr2.result is not None and tr2.result.events > 0, tr2.result
ran["trace_events"] = tr.result.recorded

# -- read: decoder, aggregator, RSS timeline --------------------------------------------------
with Capture(trace_path) as cap:
    profile = analyse(cap)
    decoded = sum(1 for _ in cap.events_by_time())
    assert profile.events > 1000 and profile.nodes, profile.events
    assert decoded == profile.recorded, (decoded, profile.recorded)
    assert len(cap.timeline_t) > 0
    names = [m.name for m in cap.marks]
    assert "vg.at" not in names  # made while nothing listened: recorded nowhere
    assert "vg.fields" in names and "vg.many" in names and "log.warning" in names, names[:20]
    assert sum(m.kind == 1 for m in cap.marks) >= 1  # a span's BEGIN
    payloads = [p for _, p in cap.event_payloads()]
    ran["read_events"] = decoded
    ran["trace_marks"] = len(cap.marks)
with Capture(OUT / "trigger.lead") as cap:
    ran["trigger_recorded"] = analyse(cap).recorded
# Damaged payloads: every decoder must refuse them cleanly (ValueError), never read past them.
rng = random.Random(1)
refused = 0
for i in range(300):
    p = bytearray(rng.choice(payloads)[: rng.randrange(1, 400)])
    for _ in range(rng.randrange(1, 6)):
        p[rng.randrange(len(p))] = rng.randrange(256)
    data = bytes(p)
    for decode in (_native.decode_events, _native.decode_rss):
        try:
            decode(data)
        except ValueError:
            refused += 1
    try:
        _native.Aggregator(data[:64], data[64:128]).feed(i % 3, data)
    except ValueError:
        refused += 1
agg = _native.Aggregator(b"", b"")
agg.feed(1, payloads[0])
agg.finish()


def varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    return bytes(out) + bytes([v])


def zigzag(v: int) -> int:
    return ((v << 1) ^ (v >> 63)) & (2**64 - 1)


# A well-formed payload with extreme values: RSS that swings by 2^62 pages between a call and
# its return, so that the aggregator's sums go past 2^63 (they wrap; they must not overflow).
extreme = varint(0) * 4
for sign in (1, -1, 1, -1, 1, -1):
    extreme += bytes([0]) + varint(1) + varint(1)  # CALL
    extreme += bytes([1 | 0x08]) + varint(1) + varint(1) + varint(zigzag(sign * 2**62))
    extreme += bytes([0 | 0x08]) + varint(2) + varint(2**63) + varint(zigzag(-sign * 2**62))
    extreme += bytes([1]) + varint(2) + varint(1)  # RETURN
crafted = _native.Aggregator(b"", b"")
assert crafted.feed(1, extreme) == 24
crafted.finish()
_native.decode_events(extreme)
ran["read_damaged_refused"] = refused


# -- sample: in this process ------------------------------------------------------------------
# valgrind runs one thread at a time, and on a loaded host the sampler's thread may wait long for
# its turn: the profile runs for at least a second.
def sampled_body() -> None:
    t = threading.Thread(target=worker)
    t.start()
    for _ in range(20):
        f(300)
    make_marks()
    t.join()
    fork_and_wait()


sample_path = OUT / "sample.lead"
prof = leadline.profile(sample_path, rate=2000, memory=True)
started = time.monotonic()
with prof:
    sampled_body()
    while time.monotonic() - started < 1.0:
        f(300)
with Capture(sample_path) as cap:
    sampled = load_profile(cap)
    assert sampled.samples > 0, f"no samples: {prof.result}"
    assert any(m.name == "vg.fields" for m in cap.marks)
ran["sample_samples"] = sampled.samples


# -- sample: asyncio tasks (tasks.c) ------------------------------------------------------------
# Two named tasks taking turns for a second: the running task found (3.11-3.13: through
# sys.modules and _asyncio's dict of running tasks; 3.14+: the thread state), named, and with
# --async all (3.14+) the waiting one read too.  Each turn blocks a moment in the task: valgrind
# runs one thread at a time, and a loop that never blocks left the sampler no tick.
async def task_turns(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        f(100)
        time.sleep(0.002)
        await asyncio.sleep(0)


async def two_tasks() -> None:
    await asyncio.gather(
        *(asyncio.create_task(task_turns(1.0), name=f"vg-task-{i}") for i in range(2))
    )


tasks_path = OUT / "tasks.lead"
with Profiler(tasks_path, ProfileOptions(rate_hz=2000, async_tasks="all")):
    asyncio.run(two_tasks())
with Capture(tasks_path) as cap:
    task_names = {fn.name for fn in cap.functions.values() if fn.kind == "task"}
    if sys.version_info >= (3, 11):
        assert task_names & {"vg-task-0", "vg-task-1"}, f"no task read: {task_names}"
ran["task_functions"] = len(task_names)

# -- sample: --subprocesses, then attach to another Python ----------------------------------------
CHILD = textwrap.dedent(
    """\
    import sys, threading, time

    # A named thread whose name the snapshot reads from threading._active (pyobjects.c).
    threading.Thread(target=time.sleep, args=(60,), name="vg-named-thread", daemon=True).start()

    def child_spin(seconds):
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            n += sum(range(100))
        return n

    print("ready", flush=True)
    child_spin(float(sys.argv[1]))
    """
)
child_py = OUT / "child.py"
child_py.write_text(CHILD)


def child(seconds: float) -> subprocess.Popen[str]:
    # The child runs at native speed: valgrind does not follow exec (no --trace-children).
    p = subprocess.Popen(
        [sys.executable, str(child_py), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


sub = Profiler(OUT / "sub.lead", ProfileOptions(rate_hz=200, subprocesses=True))
with sub:
    c = child(30)
    time.sleep(3.0)  # the sampler looks for children every 100 ms; valgrind runs it meanwhile
    c.kill()
    c.wait()
with Capture(OUT / "sub.lead") as cap:
    subprofile = load_profile(cap)
pids = {t.pid for t in subprofile.threads}
assert len(pids) >= 2, f"--subprocesses sampled no child: {subprofile.threads}"
ran["subprocess_pids"] = len(pids)

c = child(30)
info = inspect_process(c.pid)
assert info["minor"] == sys.version_info[1], info
attached = attach(c.pid, OUT / "attach.lead", ProfileOptions(rate_hz=500, memory=True), 1.5)
# A snapshot with the local variables of every frame (dump --locals: locals.c).
attach(c.pid, OUT / "dump.lead", ProfileOptions(ticks=1, locals=64), 5.0)
c.kill()
c.wait()
with Capture(OUT / "attach.lead") as cap:
    remote = load_profile(cap)
remote_names = {fr.name for fr in remote.frames}
assert remote.samples > 0 and any("child_spin" in n for n in remote_names), remote_names
ran["attach_samples"] = remote.samples
with Capture(OUT / "dump.lead") as cap:
    variables = {v["name"]: v["repr"] for v in cap.end.get("locals") or []}
assert {"seconds", "end", "n"} <= set(variables) and variables["seconds"] == "30.0", variables
ran["dump_locals"] = len(variables)
# A snapshot with each thread's C frames (dump --native: native.c, libdw loaded).
c = child(30)
attach(c.pid, OUT / "native.lead", ProfileOptions(ticks=1, native=True), 5.0)
c.kill()
c.wait()
with Capture(OUT / "native.lead") as cap:
    c_functions = {f.name for f in cap.functions.values() if f.kind == "c"}
assert "Py_BytesMain" in c_functions or "Py_RunMain" in c_functions, c_functions
ran["native_functions"] = len(c_functions)
with Capture(OUT / "dump.lead") as cap:
    thread_names = set((cap.end.get("threads") or {}).values())
assert {"MainThread", "vg-named-thread"} <= thread_names, thread_names
ran["dump_thread_names"] = len(thread_names)
ran["attach_layout"] = info["layout_source"]

# Line tables and debug-offset tables (what the sampler decodes from another process).
table_points = 0
for code in (f.__code__, g.__code__, worker.__code__, make_marks.__code__):
    raw = code.co_linetable
    table_points += len(_native.line_table(sys.version_info[1], code.co_firstlineno, raw))
    for _ in range(20):
        noisy = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
        _native.line_table(sys.version_info[1], code.co_firstlineno, noisy)
        _native.line_table(10, code.co_firstlineno, noisy)
# Line deltas of up to 2^59 (3.11+ long-form entries), summed past 2^63: they wrap.
huge = (bytes([0x80 | (14 << 3)]) + bytes([0x7F] * 9 + [0x3E]) + bytes(3)) * 40
_native.line_table(11, 1, huge)
for minor in (13, 14, 15, 16):
    for n in (0, 8, 600, 1000):
        table = b"xdebugpy" + bytes(rng.randrange(256) for _ in range(n))
        try:
            _native.layout_from_debug_offsets(table, minor)
        except ValueError:
            pass
ran["line_table_points"] = table_points
assert table_points > 0

# -- probes (and marks into a probe capture) ---------------------------------------------------
# A module imported after the probes start: one probed function entry, then a probed line in
# each of 20 functions (more watches than the first table holds).
mod_dir = OUT / "mods"
mod_dir.mkdir(exist_ok=True)
lines = ["def entry(n):", "    return n + 1", ""]
line_of: dict[int, int] = {}
for i in range(20):
    lines += [f"def line_{i}(n):", "    x = n * 2"]
    line_of[i] = len(lines)
    lines += ["    return x", ""]
(mod_dir / "vg_probed.py").write_text("\n".join(lines) + "\n")
sys.path.insert(0, str(mod_dir))
specs = [parse_count("entry=vg_probed:entry")]
specs += [parse_count(f"l{i}={mod_dir / 'vg_probed.py'}:{line_of[i]}") for i in range(20)]
probe_rec = ProbeRecorder(OUT / "probe.lead", Probes(specs))
with probe_rec:
    import vg_probed  # type: ignore[import-not-found]

    def probe_calls() -> None:
        for k in range(5):
            vg_probed.entry(k)
            for i in range(20):
                getattr(vg_probed, f"line_{i}")(k)

    probe_calls()
    t = threading.Thread(target=probe_calls)
    t.start()
    t.join()
    make_marks()
counts = probe_rec.result.counts if probe_rec.result else {}
assert counts == {"entry": 10, **{f"l{i}": 10 for i in range(20)}}, counts
with Capture(OUT / "probe.lead") as cap:
    assert any(m.name == "vg.fields" for m in cap.marks)
    ran["probe_marks"] = len(cap.marks)
ran["probe_counts"] = sum(counts.values())
ran["probe_mechanism"] = probe_rec.result.mechanism if probe_rec.result else ""

print("ok", json.dumps(ran), flush=True)
# A block allocated by the native reader that is still reachable when valgrind looks: it proves
# to valgrind_check.py that its filter recognises leadline's frames in the log.  os._exit skips
# the interpreter's finalisation, which would free it.
canary = _native.Aggregator(bytes(8), bytes(8))
os._exit(0)
