"""Coverage-guided fuzzing of leadline's readers with atheris (libFuzzer for Python).

    python tests/fuzz/run.py TARGET [--seconds S] [--runs N] [--work DIR] [-- LIBFUZZER_FLAGS]
    python tests/fuzz/run.py TARGET --replay FILE...   (run inputs once, e.g. a crasher)

TARGET is one of targets.TARGETS (decoder, capture, pprof, collapsed, pyroscope) or ``all``
(each in turn, the time or run budget given to each).  The first time, the seed corpus is
recorded into WORK/seeds (seeds.py); the corpus the fuzzer grows lives in WORK/corpus/TARGET
and what it finds in WORK/findings/TARGET, all outside the repository (WORK defaults to
$LEADLINE_FUZZ_DIR, else ~/.cache/leadline-fuzz).  Each input gets at most --timeout seconds and
the process at most --rss-mb of memory; past either, libFuzzer reports the input as a finding.

Exit status: 0 when no target found anything, 1 otherwise.  A finding is a file of the
findings folder: minimise it (``-- -minimize_crash=1 -runs=10000 FILE``), fix the reader, and
keep it under tests/fuzz/crashers/TARGET/ where the regression tests replay it.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import atheris  # noqa: E402

# Everything leadline is imported (and so instrumented for coverage) here, including the modules
# the commands import lazily, which instrument_imports would otherwise miss.
with atheris.instrument_imports(include=["leadline", "targets"]):
    import pkgutil

    import leadline
    import targets

    for _m in pkgutil.walk_packages(leadline.__path__, "leadline."):
        if _m.name not in ("leadline.__main__",):
            __import__(_m.name)

from leadline.capture.reader import CHUNK, HEADER  # noqa: E402

DEFAULT_WORK = Path(os.environ.get("LEADLINE_FUZZ_DIR") or Path.home() / ".cache/leadline-fuzz")
MAX_LEN = {"capture": 16384, "report": 16384, "decoder": 4096, "pprof": 4096, "collapsed": 4096, "pyroscope": 4096}


def fix_checksums(data: bytes) -> bytes:
    """The capture with each whole chunk's CRC made right: mutants that pass the checksum reach
    the decoders (a wrong CRC stops the reader at once, which seeds already cover)."""
    out = bytearray(data)
    pos = HEADER.size
    while pos + CHUNK.size <= len(out):
        length = int.from_bytes(out[pos + 8 : pos + 12], "little")
        start = pos + CHUNK.size
        if start + length > len(out):
            break
        out[pos + 12 : pos + 16] = zlib.crc32(out[start : start + length]).to_bytes(4, "little")
        pos = start + length
    return bytes(out)


def capture_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    mutated = atheris.Mutate(data, max_size)
    # Nine mutants in ten keep valid checksums; the tenth tests the checksum path itself.
    return mutated if random.Random(seed).random() < 0.1 else fix_checksums(mutated)


def fuzz_one(target: str, args: argparse.Namespace, extra: list[str]) -> None:
    """In this process: atheris on one target; libFuzzer exits the process when done."""
    work: Path = args.work
    corpus = work / "corpus" / target
    findings = work / "findings" / target
    corpus.mkdir(parents=True, exist_ok=True)
    findings.mkdir(parents=True, exist_ok=True)
    seeds = work / "seeds" / ("capture" if target == "report" else target)
    flags = [
        f"-timeout={args.timeout}",
        f"-rss_limit_mb={args.rss_mb}",
        f"-max_len={MAX_LEN[target]}",
        f"-artifact_prefix={findings}/",
        "-print_final_stats=1",
    ]
    if args.seconds:
        flags.append(f"-max_total_time={args.seconds}")
    if args.runs:
        flags.append(f"-runs={args.runs}")
    dirs = [str(corpus), *([str(seeds)] if seeds.is_dir() else [])]
    argv = [sys.argv[0], *flags, *extra, *dirs]
    kwargs = {"custom_mutator": capture_mutator} if target in ("capture", "report") else {}
    atheris.Setup(argv, targets.TARGETS[target], **kwargs)
    atheris.Fuzz()


def replay(target: str, files: list[str]) -> int:
    """Each file once through the target's oracle: 0 if all pass, 1 if any fails."""
    failed = 0
    for name in files:
        try:
            targets.TARGETS[target](Path(name).read_bytes())
        except Exception as e:
            failed += 1
            print(f"{name}: {type(e).__name__}: {e}", file=sys.stderr)
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description="Fuzz leadline's readers (atheris).")
    ap.add_argument("target", choices=[*targets.TARGETS, "all"])
    ap.add_argument("--seconds", type=int, default=0, help="time per target (0: no limit)")
    ap.add_argument("--runs", type=int, default=0, help="inputs per target (0: no limit)")
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK, help="seeds, corpus, findings")
    ap.add_argument("--timeout", type=int, default=20, help="seconds per input")
    ap.add_argument("--rss-mb", type=int, default=2048, help="memory limit of the fuzzer")
    ap.add_argument("--replay", nargs="+", metavar="FILE", help="run these inputs once")
    args, extra = ap.parse_known_args()
    extra = [a for a in extra if a != "--"]
    if args.replay:
        return replay(args.target, args.replay)
    if not (args.work / "seeds").is_dir():
        print(f"recording the seed corpus into {args.work / 'seeds'}", file=sys.stderr)
        subprocess.run(
            [sys.executable, str(HERE / "seeds.py"), str(args.work / "seeds")], check=True
        )
    if args.target != "all":
        fuzz_one(args.target, args, extra)
        return 0  # not reached: libFuzzer exits
    # Each target in its own process: libFuzzer owns the process it runs in.
    status = 0
    campaign_start = time.time()
    for target in targets.TARGETS:
        started = time.monotonic()
        cmd = [sys.executable, __file__, target, "--work", str(args.work)]
        cmd += [f"--seconds={args.seconds}", f"--runs={args.runs}", f"--timeout={args.timeout}"]
        cmd += [f"--rss-mb={args.rss_mb}", "--", *extra]
        r = subprocess.run(cmd)
        took = time.monotonic() - started
        print(f"=== fuzz {target}: exit {r.returncode} after {took:.0f} s", file=sys.stderr)
        status = status or (1 if r.returncode else 0)
    findings = sorted(
        p
        for p in (args.work / "findings").rglob("*")
        if p.is_file() and p.stat().st_mtime >= campaign_start
    )
    if findings:
        print(f"findings ({len(findings)}):", *findings, sep="\n  ", file=sys.stderr)
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
