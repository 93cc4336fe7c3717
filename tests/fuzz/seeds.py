"""The seed corpus of every fuzz target, made from real recordings.

``python tests/fuzz/seeds.py DIR`` records small captures with the real CLI (a trace with C
calls, threads and marks; sampling captures in wall, cpu and memory mode with threads; a probe
capture), exports them (pprof, collapsed), and writes one folder per target under DIR:

- ``capture/``: the capture files themselves;
- ``decoder/``: their RSS and EVENTS payloads, in the decoder target's layout;
- ``pprof/``: the pprof exports, gzip-compressed as written and raw (the fuzzer mutates a raw
  protobuf far better than a compressed one);
- ``collapsed/``: the collapsed exports and a hand-written file in py-spy's style;
- ``pyroscope/``: Pyroscope-like answers (a merged CPU-time profile and its sample counts).

The same procedure gives the same set of seeds every time; the bytes differ with timings, which
the fuzzer does not mind.  Seeds go where they are asked to (a cache folder), never into the
repository.
"""

from __future__ import annotations

import argparse
import gzip
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from targets import SEPARATOR  # noqa: E402

from leadline.capture.reader import CHUNK, EVENTS, HEADER, RSS  # noqa: E402
from leadline.render.encode import protobuf_message  # noqa: E402

TRACED = """
    import threading
    import leadline

    class Cache:
        def __init__(self):
            self.data = {}

        def get(self, key):
            if key in self.data:
                return self.data[key]
            self.data[key] = value = [key] * 64
            return value

    @leadline.span("work", kind="loop")
    def work(cache, n):
        total = 0
        for i in range(n):
            total += len(cache.get(i % 7))
        leadline.mark("done", total=total, note="ok")
        return total

    cache = Cache()
    t = threading.Thread(target=work, args=(Cache(), 20), name="helper")
    t.start()
    work(cache, 30)
    t.join()
"""

SAMPLED = """
    import threading
    import time
    import leadline

    def spin(seconds):
        end = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < end:
            n += 1
        return n

    def grow(k):
        return [bytearray(4096) for _ in range(k)]

    def worker():
        spin(0.05)
        time.sleep(0.03)

    t = threading.Thread(target=worker, name="worker")
    t.start()
    kept = grow(200)
    leadline.mark("grown", pages=len(kept))
    spin(0.08)
    t.join()
"""

PROBED = """
    def lookup(table, key):
        if key in table:
            return table[key]
        table[key] = key * 2
        return table[key]

    table = {}
    for i in range(50):
        lookup(table, i % 9)
"""


def _leadline(*args: str, cwd: Path) -> None:
    env = {**os.environ, "NO_COLOR": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "leadline", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if r.returncode != 0:
        raise SystemExit(f"leadline {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}")


def record(work: Path) -> list[Path]:
    """The captures: trace (plain, with C calls), sampling (wall, cpu, memory), probe."""
    for name, source in (("traced.py", TRACED), ("sampled.py", SAMPLED), ("probed.py", PROBED)):
        (work / name).write_text(textwrap.dedent(source), encoding="utf-8")
    runs: list[tuple[str, list[str]]] = [
        ("trace.lead", ["trace", "-o", "trace.lead", "traced.py"]),
        ("trace-c.lead", ["trace", "--c-calls", "-o", "trace-c.lead", "traced.py"]),
        ("trigger.lead", ["trace", "--rss-trigger", "-1", "--previous", "-o", "trigger.lead",
                          "sampled.py"]),
        ("wall.lead", ["run", "-q", "-r", "400", "-o", "wall.lead", "sampled.py"]),
        ("cpu.lead", ["run", "-q", "-r", "400", "--mode", "cpu", "-o", "cpu.lead", "sampled.py"]),
        ("memory.lead", ["run", "-q", "-r", "400", "--memory", "-o", "memory.lead",
                         "sampled.py"]),
        ("probe.lead", ["probe", "-q", "--count", "hit=probed.py:4", "--count",
                        "miss=probed.py:5", "--ratio", "rate=hit/(hit+miss)", "-o", "probe.lead",
                        "probed.py"]),
    ]  # fmt: skip
    out = []
    for name, args in runs:
        _leadline(*args, cwd=work)
        out.append(work / name)
    return out


def chunks(data: bytes) -> list[tuple[int, bytes]]:
    """(kind, payload) of each whole chunk of a capture."""
    pos, out = HEADER.size, []
    while pos + CHUNK.size <= len(data):
        _magic, kind, _f, _r, length, _crc, _stream = CHUNK.unpack_from(data, pos)
        start = pos + CHUNK.size
        out.append((kind, data[start : start + length]))
        pos = start + length
    return out


def decoder_seed(data: bytes) -> bytes | None:
    parts = chunks(data)
    rss = b"".join(p for k, p in parts if k == RSS)[:512]
    events = [p[:1024] for k, p in parts if k == EVENTS][:4]
    return SEPARATOR.join([rss, *events]) if events else None


def pyroscope_answer(cpu: bool) -> bytes:
    """A profile as Pyroscope's SelectMergeProfile answers: one sample type, functions with
    names and files, a one-second period whatever the sampling rate was."""
    strings: dict[str, int] = {"": 0}

    def s(text: str) -> int:
        return strings.setdefault(text, len(strings))

    kind, unit = ("cpu", "nanoseconds") if cpu else ("samples", "count")
    p = protobuf_message()
    p.message(1, protobuf_message().scalar(1, s(kind)).scalar(2, s(unit)))
    stacks = [([1, 2, 3], 30), ([1, 2], 10), ([1, 4], 5)]
    for locs, count in stacks:
        value = count * 10_000_000 if cpu else count
        p.message(2, protobuf_message().packed(1, reversed(locs)).packed(2, [value]))
    names = {1: ("main", "app.py"), 2: ("work", "app/work.py"), 3: ("leaf", "app/work.py"),
             4: ("other", "lib/other.py")}  # fmt: skip
    for fid, (name, file) in names.items():
        line = protobuf_message().scalar(1, fid).scalar(2, 10 * fid)
        p.message(4, protobuf_message().scalar(1, fid).message(4, line))
        p.message(5, protobuf_message().scalar(1, fid).scalar(2, s(name)).scalar(4, s(file)))
    for text in strings:
        p.raw(6, text.encode())
    p.message(11, protobuf_message().scalar(1, s("cpu")).scalar(2, s("nanoseconds")))
    p.scalar(12, 1_000_000_000)
    p.scalar(10, 600_000_000_000)
    return bytes(p.data)


PY_SPY_COLLAPSED = """\
# folded by hand in py-spy's style
<module> (app.py:1);main (app.py:10);work (app/work.py:20) 30
<module> (app.py:1);main (app.py:10) 10
<module> (app.py:1);main (app.py:10);other (lib/other.py) 5
thread (MainThread);<module> (app.py:1);idle 2.5
"""


def generate(out: Path) -> dict[str, int]:
    """Every target's seeds under `out`; how many each has."""
    work = out / "recordings"
    work.mkdir(parents=True, exist_ok=True)
    dirs = {t: out / t for t in ("capture", "decoder", "pprof", "collapsed", "pyroscope")}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    for cap in record(work):
        data = cap.read_bytes()
        (dirs["capture"] / cap.name).write_bytes(data)
        seed = decoder_seed(data)
        if seed is not None:
            (dirs["decoder"] / f"{cap.stem}.bin").write_bytes(seed)
        if cap.name in ("wall.lead", "cpu.lead", "memory.lead"):
            pb = work / f"{cap.stem}.pb.gz"
            _leadline("export", cap.name, "--format", "pprof", "-o", pb.name, cwd=work)
            (dirs["pprof"] / pb.name).write_bytes(pb.read_bytes())
            (dirs["pprof"] / f"{cap.stem}.pb").write_bytes(gzip.decompress(pb.read_bytes()))
            txt = work / f"{cap.stem}.txt"
            _leadline("export", cap.name, "--format", "collapsed", "-o", txt.name, cwd=work)
            (dirs["collapsed"] / txt.name).write_bytes(txt.read_bytes())
    (dirs["collapsed"] / "py-spy.txt").write_text(PY_SPY_COLLAPSED, encoding="utf-8")
    cpu, counts = pyroscope_answer(cpu=True), pyroscope_answer(cpu=False)
    (dirs["pyroscope"] / "merged.bin").write_bytes(struct.pack("<I", len(cpu)) + cpu + counts)
    (dirs["pyroscope"] / "no-counts.bin").write_bytes(struct.pack("<I", len(cpu)) + cpu)
    (dirs["pprof"] / "pyroscope.pb").write_bytes(cpu)
    return {t: len(list(d.iterdir())) for t, d in dirs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the folder to write the seed folders into")
    args = ap.parse_args()
    counts = generate(args.out)
    print(", ".join(f"{t}: {n} seeds" for t, n in counts.items()))


if __name__ == "__main__":
    main()
