"""Coverage-guided fuzzing of leadline's readers with atheris (libFuzzer for Python).

    python tests/fuzz/run.py TARGET [--seconds S] [--runs N] [--work DIR] [-- LIBFUZZER_FLAGS]
    python tests/fuzz/run.py TARGET --replay FILE|DIR... [--sanitize]

TARGET is one of targets.TARGETS or ``all`` (each in turn, the time or run budget given to each).
The first time, the seed corpus is recorded into WORK/seeds (seeds.py); the corpus the fuzzer
grows lives in WORK/corpus/TARGET and what it finds in WORK/findings/TARGET, all outside the
repository (WORK defaults to $LEADLINE_FUZZ_DIR, else ~/.cache/leadline-fuzz).  Each input gets
at most --timeout seconds and the process at most --rss-mb of memory; past either, libFuzzer
reports the input as a finding.  The C core is the coverage-instrumented build of native.py
when clang is there, so its branches guide the fuzzer too.

--replay runs inputs once through the target's oracle (a crasher, a whole corpus); with
--sanitize, in a child process whose C core is built with AddressSanitizer and
UndefinedBehaviorSanitizer, which abort on a memory error or undefined behaviour that a plain
build would survive.

Exit status: 0 when nothing was found, 1 otherwise.  A finding is a file of the findings
folder: minimise it (``-- -minimize_crash=1 -runs=10000 FILE``), fix the reader, and keep it
under tests/fuzz/crashers/TARGET/, where the regression tests replay it.
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
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import native  # noqa: E402

DEFAULT_WORK = Path(os.environ.get("LEADLINE_FUZZ_DIR") or Path.home() / ".cache/leadline-fuzz")
NAMES = ("decoder", "reader", "capture", "report", "pprof", "collapsed", "pyroscope")
CAPTURES = ("reader", "capture", "report")  # the targets that read capture files
# Long enough for what only long inputs reach (int() refuses more than 4,300 digits).
MAX_LEN = dict.fromkeys(NAMES, 8192) | dict.fromkeys(CAPTURES, 16384)


def fix_checksums(data: bytes) -> bytes:
    """The capture with each whole chunk's CRC made right: mutants that pass the checksum reach
    the decoders (a wrong CRC stops the reader at once, which the seeds already cover)."""
    from leadline.capture.reader import CHUNK, HEADER

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


def fuzz_one(target: str, args: argparse.Namespace, extra: list[str]) -> None:
    """In this process: atheris on one target; libFuzzer exits the process when done."""
    import atheris

    built = None if args.installed_core else native.build(args.work)
    if built is not None:
        native.load(built)  # before leadline is imported, by the instrumented imports below
    print(f"fuzz {target}: C core {built or 'as installed (no clang: not instrumented)'}")
    # Everything leadline is imported (and so instrumented) here, including the modules the
    # commands import lazily, which instrument_imports would otherwise miss.
    with atheris.instrument_imports(include=["leadline", "targets"]):
        import pkgutil

        import targets

        import leadline

        for m in pkgutil.walk_packages(leadline.__path__, "leadline."):
            if m.name != "leadline.__main__":
                __import__(m.name)

    def capture_mutator(data: bytes, max_size: int, seed: int) -> bytes:
        mutated: bytes = atheris.Mutate(data, max_size)
        # Nine mutants in ten keep valid checksums; the tenth tests the checksum path itself.
        return mutated if random.Random(seed).random() < 0.1 else fix_checksums(mutated)

    work: Path = args.work
    corpus = work / "corpus" / target
    findings = work / "findings" / target
    corpus.mkdir(parents=True, exist_ok=True)
    findings.mkdir(parents=True, exist_ok=True)
    seeds = work / "seeds" / ("capture" if target in CAPTURES else target)
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
    if any(a.startswith("-minimize_crash") for a in extra):
        dirs = []  # the one input to minimise is among the extra arguments
    kwargs: dict[str, Any] = {"custom_mutator": capture_mutator} if target in CAPTURES else {}
    atheris.Setup([sys.argv[0], *flags, *extra, *dirs], targets.TARGETS[target], **kwargs)
    atheris.Fuzz()


def replay(target: str, paths: list[str], sanitize: bool, work: Path) -> int:
    """Each input once through the target's oracle: 0 if all pass, 1 if any fails.  A folder
    given holds inputs, or one folder per target (tests/fuzz/crashers, WORK/corpus)."""
    if sanitize and not os.environ.get("LEADLINE_FUZZ_SANITIZED"):
        built = native.build(work, sanitize=True)
        if built is None:
            print("no clang (tools/ensure-clang): replaying without sanitizers", file=sys.stderr)
        else:
            env = {**native.sanitizer_env(), "LEADLINE_FUZZ_SANITIZED": str(built)}
            cmd = [sys.executable, __file__, target, "--replay", *paths]
            return subprocess.run(cmd, env=env).returncode
    if os.environ.get("LEADLINE_FUZZ_SANITIZED"):
        native.load(Path(os.environ["LEADLINE_FUZZ_SANITIZED"]))
    import targets

    from leadline import _native

    preloaded = os.environ.get("LD_PRELOAD", "")
    print(f"replay: C core {_native.__file__}" + (f" ({preloaded})" if preloaded else ""))

    status = 0
    for name in NAMES if target == "all" else (target,):
        files: list[Path] = []
        for p in map(Path, paths):
            if p.is_file():
                files.append(p)
            elif (p / name).is_dir():
                files += sorted(f for f in (p / name).iterdir() if f.is_file())
            elif p.is_dir() and not any(q.is_dir() for q in p.iterdir()):
                files += sorted(f for f in p.iterdir() if f.is_file())
        failed = 0
        for f in files:
            try:
                targets.TARGETS[name](f.read_bytes())
            except Exception as e:
                failed += 1
                print(f"{f}: {type(e).__name__}: {e}", file=sys.stderr)
        print(f"replay {name}: {len(files)} inputs, {failed} failed", file=sys.stderr)
        status = status or (1 if failed else 0)
    return status


def main() -> int:
    ap = argparse.ArgumentParser(description="Fuzz leadline's readers (atheris).")
    ap.add_argument("target", choices=[*NAMES, "all"])
    ap.add_argument("--seconds", type=int, default=0, help="time per target (0: no limit)")
    ap.add_argument("--runs", type=int, default=0, help="inputs per target (0: no limit)")
    ap.add_argument("--work", type=Path, default=DEFAULT_WORK, help="seeds, corpus, findings")
    ap.add_argument("--timeout", type=int, default=20, help="seconds per input")
    ap.add_argument("--rss-mb", type=int, default=2048, help="memory limit of the fuzzer")
    ap.add_argument("--installed-core", action="store_true", help="no instrumented C build")
    ap.add_argument("--replay", nargs="+", metavar="PATH", help="run these inputs once")
    ap.add_argument("--sanitize", action="store_true", help="--replay under ASan and UBSan")
    args, extra = ap.parse_known_args()
    extra = [a for a in extra if a != "--"]
    if args.replay:
        return replay(args.target, args.replay, args.sanitize, args.work)
    if not (args.work / "seeds").is_dir():
        print(f"recording the seed corpus into {args.work / 'seeds'}", file=sys.stderr)
        subprocess.run(
            [sys.executable, str(HERE / "seeds.py"), str(args.work / "seeds")], check=True
        )
    if args.target != "all":
        fuzz_one(args.target, args, extra)
        return 0  # not reached: libFuzzer exits
    # Each target in a process of its own: libFuzzer owns the process it runs in.
    status = 0
    started_at = time.time()
    for target in NAMES:
        started = time.monotonic()
        cmd = [sys.executable, __file__, target, "--work", str(args.work)]
        cmd += [f"--seconds={args.seconds}", f"--runs={args.runs}", f"--timeout={args.timeout}"]
        cmd += [f"--rss-mb={args.rss_mb}"]
        cmd += ["--installed-core"] if args.installed_core else []
        r = subprocess.run([*cmd, "--", *extra])
        took = time.monotonic() - started
        print(f"=== fuzz {target}: exit {r.returncode} after {took:.0f} s", file=sys.stderr)
        status = status or (1 if r.returncode else 0)
    found = sorted(
        p
        for p in (args.work / "findings").rglob("*")
        if p.is_file() and p.stat().st_mtime >= started_at
    )
    if found:
        print(f"findings ({len(found)}):", *found, sep="\n  ", file=sys.stderr)
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
