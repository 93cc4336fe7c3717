"""The fleet agent over a long run against a server that is down, slow or failing: its memory and
descriptors must stay flat.

For each behaviour a real program (a service handling requests: 24 handlers passing them on to
one another, a JSON document built, encoded and decoded at the end, a 5 ms sleep between
requests; 96 different stacks) runs under ``leadline run --push`` for ``--seconds``,
pushing a profile every ``--interval`` seconds to a 127.0.0.1 peer (tools/ingest_peers.py):

- ``down``: nothing listens (every connection refused);
- ``slow``: accepts, reads the request and answers only after 15 s, past the agent's 10 s;
- ``silent``: accepts, reads the request and never answers;
- ``500``: answers HTTP 500 at once.

Every ``--every`` seconds the program's ``/proc/PID/status`` (VmRSS, Threads) and ``/proc/PID/fd``
(sockets and other descriptors apart) are read, and the spool directory's size.  The report
gives, per behaviour, start (once the warm-up is over), end, max and slope of each, the agent's
own summary line, the requests the peer saw, and how long after its last line the program was
gone.  A behaviour fails when what the design bounds is exceeded:

- sockets: at most one open at any moment (one delivery thread, one request at a time);
- other descriptors: never more than one above the count at the start (a spool file being
  written), and back to it at the end: in each of the last three readings, so that a descriptor
  open for a moment (a spool file being written as one reading is taken) is not taken for one
  left open;
- threads: never more than at the start (an abandoned request thread is one per exit, not one
  per attempt);
- spool: within its cap (``--spool-cap-mb``, small by default so that the cap is reached);
- memory: the growth after the warm-up within the in-memory queue (32 profiles of the largest
  size seen) plus ``--rss-margin-mb``, and levelled off: the second half's slope, over the
  second half, within half that margin;
- exit: within the flush deadline plus 1 s of the program's last line (``late_exit``, apart
  from the other ``failures``: a bound in time, which the test suite's short soak does not
  assert).

    python bench/agent_soak.py [--seconds 600] [--behaviours down,slow,500] [--parallel]
                               [--interval 1] [--every 1] [--spool-cap-mb 0.25] [--python PATH]
                               [--json PATH] [--name NAME] [--no-save]

Results: ``bench/results/agent-soak-<seconds>s-py<X.Y>-<date>.md`` and ``.json``.  Exit status 1
if a behaviour failed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import common

sys.path.insert(0, str(common.REPO / "tools"))

from ingest_peers import Peer, agent_summary

BEHAVIOURS: dict[str, tuple[str, dict[str, Any]]] = {
    "down": ("down", {}),
    "slow": ("late", {"delay": 15.0}),
    "silent": ("silent", {}),
    "500": ("status", {"status": 500}),
}
QUEUE_CAP = 32  # profiles waiting in memory at most (leadline.fleet.delivery.Delivery)
FLUSH_S = 1.0  # LEADLINE_PUSH_FLUSH of the runs
EXIT_SLACK_S = 1.0

PROGRAM = """
    import json, random, sys, time

    def leaf(i):
        doc = {"id": i, "items": [{"k": j, "v": str(j) * 3} for j in range(1000)]}
        return len(json.loads(json.dumps(doc))["items"])

    # 24 handlers, each passing the request on to another, 0 to 3 deep: a service with many
    # endpoints, whose profiles hold 96 different stacks, a fixed set.
    exec("".join(
        f"def handler_{n}(i, depth):\\n"
        f"    return leaf(i) if depth == 0 else ROUTES[{(n * 5 + 1) % 24}](i, depth - 1)\\n"
        for n in range(24)
    ))
    ROUTES = [globals()[f"handler_{n}"] for n in range(24)]

    rng = random.Random(1)
    end = time.time() + float(sys.argv[1])
    i = 0
    while time.time() < end:
        ROUTES[rng.randrange(24)](i, rng.randrange(4))
        i += 1
        time.sleep(0.005)
    print("END", repr(time.time()), flush=True)
"""


@dataclass
class Reading:
    t: float  # seconds since the program started
    rss_kb: int
    threads: int
    sockets: int
    other_targets: tuple[str, ...]  # what the other descriptors are open on
    spool_bytes: int
    spool_files: int
    largest_profile: int

    @property
    def other_fds(self) -> int:
        return len(self.other_targets)


def read_proc(pid: int) -> tuple[int, int, int, tuple[str, ...]] | None:
    """(VmRSS kB, threads, socket descriptors, what the other descriptors are open on), or None
    once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if "VmRSS" not in fields:  # a zombie: exited, not yet reaped
        return None
    sockets = 0
    others: list[str] = []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            target = "(closed while read)"
        if target.startswith("socket:"):
            sockets += 1
        else:
            others.append(target)
    rss = int(fields["VmRSS"].split()[0])
    return rss, int(fields["Threads"]), sockets, tuple(sorted(others))


def read_spool(spool: Path) -> tuple[int, int, int]:
    """(bytes, files, largest file) of the complete profiles in the spool."""
    sizes = []
    try:
        for entry in os.scandir(spool):
            if not entry.name.endswith(".tmp"):
                try:
                    sizes.append(entry.stat().st_size)
                except OSError:
                    pass  # delivered or dropped meanwhile
    except OSError:
        pass
    return sum(sizes), len(sizes), max(sizes, default=0)


@dataclass
class Soak:
    name: str
    peer: Peer
    work: Path
    proc: subprocess.Popen[str] | None = None
    started: float = 0.0
    readings: list[Reading] = field(default_factory=list)
    largest: int = 0
    stdout: str = ""
    stderr: str = ""
    gone_at: float = 0.0
    waiter: threading.Thread | None = None

    @property
    def spool(self) -> Path:
        return self.work / "spool"

    def start(self, args: argparse.Namespace) -> None:
        program = self.work / "service.py"
        program.write_text(textwrap.dedent(PROGRAM))
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEADLINE_")}
        env.update(
            {
                "LEADLINE_SPOOL": str(self.spool),
                "LEADLINE_SPOOL_MAX_MB": f"{args.spool_cap_mb:g}",
                "LEADLINE_PUSH_FLUSH": f"{FLUSH_S:g}",
                "LEADLINE_PUSH_BACKOFF_MAX": f"{args.backoff_max:g}",
                "NO_COLOR": "1",
            }
        )
        cmd = [
            args.python, "-m", "leadline", "run", "--push", self.peer.url,
            "--push-interval", f"{args.interval:g}", "--service", f"soak-{self.name}",
            str(program), str(args.seconds),
        ]  # fmt: skip
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            cmd,
            cwd=self.work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Its own thread reads the program's output as it comes and notes the moment it is
        # gone, to the millisecond rather than to the next reading.
        self.waiter = threading.Thread(target=self._wait, daemon=True)
        self.waiter.start()

    def _wait(self) -> None:
        assert self.proc is not None
        self.stdout, self.stderr = self.proc.communicate()
        self.gone_at = time.time()

    def sample(self) -> None:
        assert self.proc is not None
        got = read_proc(self.proc.pid)
        if got is None:
            return
        spool_bytes, spool_files, largest = read_spool(self.spool)
        self.largest = max(self.largest, largest)
        self.readings.append(
            Reading(time.monotonic() - self.started, *got, spool_bytes, spool_files, self.largest)
        )

    def running(self) -> bool:
        return self.waiter is not None and self.waiter.is_alive()

    def finish(self) -> None:
        assert self.proc is not None and self.waiter is not None
        if self.proc.poll() is None:
            self.proc.kill()  # it overstayed
        self.waiter.join()


def slope_per_min(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value), per minute."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    if var == 0:
        return None
    return 60 * sum((t - mx) * (v - my) for t, v in points) / var


def series(readings: list[Reading], key: str, warm_s: float) -> dict[str, Any]:
    after = [r for r in readings if r.t >= warm_s] or readings[-1:]
    values = [(r.t, float(getattr(r, key))) for r in after]
    half = after[0].t + (after[-1].t - after[0].t) / 2
    second = [(t, v) for t, v in values if t >= half]
    return {
        "start": values[0][1],
        "end": values[-1][1],
        "max": max(v for _, v in values),
        "min": min(v for _, v in values),
        "slope_per_min": slope_per_min(values),
        "second_half_slope_per_min": slope_per_min(second),
        "second_half_s": (second[-1][0] - second[0][0]) if second else 0.0,
    }


def verdict(soak: Soak, args: argparse.Namespace, warm_s: float) -> dict[str, Any]:
    r = soak.readings
    out: dict[str, Any] = {
        "behaviour": soak.name,
        "readings": len(r),
        "requests": soak.peer.connections,
        "returncode": soak.proc.returncode if soak.proc else None,
    }
    m = re.search(r"^END (\S+)$", soak.stdout, re.M)
    out["exit_delay_s"] = soak.gone_at - float(m.group(1)) if m else None
    agent = agent_summary(soak.stderr)
    if agent is not None:
        out["agent"] = agent
    out["stderr"] = [line for line in soak.stderr.splitlines() if line.strip()][-6:]
    failures: list[str] = []
    # What the program was while it ran: the exit (sampler stopped, pipe closed, the last
    # profiles spooled) is judged by the exit delay alone.
    r = [x for x in r if x.t <= args.seconds]
    if not r:
        out["failures"] = ["no readings: the program did not run"]
        return out
    for key in ("rss_kb", "threads", "sockets", "other_fds", "spool_bytes"):
        out[key] = series(r, key, warm_s)
    out["largest_profile"] = soak.largest
    cap = int(args.spool_cap_mb * 2**20)
    out["spool_cap"] = cap
    fds0 = out["other_fds"]["min"]  # the start, unless a spool file was open at that reading
    if out["returncode"] != 0:
        failures.append(f"the program exited with {out['returncode']}")
    if max(x.sockets for x in r) > 1:
        failures.append(f"{max(x.sockets for x in r)} sockets open at once (at most 1)")
    if max(x.other_fds for x in r if x.t >= warm_s) > fds0 + 1:
        failures.append(f"descriptors grew: {fds0:g} at the start, max {out['other_fds']['max']:g}")
    # Left open at the end: open in each of the last three readings (a descriptor that one
    # reading finds open may be a spool file being written, or a /proc file the sampler is
    # reading, on a busy machine for a time slice or more; one left open stays open).
    least = min((x for x in r if x.t >= warm_s), key=lambda x: x.other_fds, default=r[-1])
    tail = r[-3:]
    out["other_fds_at_end"] = min(x.other_fds for x in tail)
    kept = set.intersection(*(set(x.other_targets) for x in tail))
    out["fds_left_open"] = sorted(kept - set(least.other_targets))
    if out["other_fds_at_end"] != fds0 or out["fds_left_open"]:
        failures.append(
            f"descriptors: {fds0:g} at the start, {out['other_fds_at_end']:g} in each of the "
            f"last {len(tail)} readings (left open: {', '.join(out['fds_left_open']) or '-'})"
        )
    th = out["threads"]
    if th["max"] > th["start"]:
        failures.append(f"threads: {th['start']:g} at the start, max {th['max']:g}")
    if max(x.spool_bytes for x in r) > cap:
        failures.append(f"spool above its cap: {max(x.spool_bytes for x in r)} > {cap} bytes")
    margin_kb = args.rss_margin_mb * 1024
    bound_kb = QUEUE_CAP * soak.largest / 1024 + margin_kb
    rss = out["rss_kb"]
    out["rss_bound_kb"] = bound_kb
    if rss["max"] - rss["start"] > bound_kb:
        failures.append(
            f"memory grew {rss['max'] - rss['start']:.0f} kB after the warm-up "
            f"(bound {bound_kb:.0f} kB: {QUEUE_CAP} profiles of {soak.largest} bytes + margin)"
        )
    tail_slope = rss["second_half_slope_per_min"]
    if tail_slope is not None and tail_slope * rss["second_half_s"] / 60 > margin_kb / 2:
        failures.append(
            f"memory still growing in the second half: {tail_slope:.0f} kB/min over "
            f"{rss['second_half_s']:.0f} s"
        )
    late = out["exit_delay_s"] is None or out["exit_delay_s"] > FLUSH_S + EXIT_SLACK_S
    out["late_exit"] = None
    if late:
        out["late_exit"] = f"exit took {out['exit_delay_s']} s after the program's end"
    out["failures"] = failures
    out["timeline"] = [
        {"t": round(x.t, 1), "rss_kb": x.rss_kb, "threads": x.threads, "sockets": x.sockets,
         "other_fds": x.other_fds, "spool_bytes": x.spool_bytes, "spool_files": x.spool_files}
        for x in r[:: max(1, len(r) // 60)]
    ]  # fmt: skip
    return out


def problems(b: dict[str, Any]) -> list[str]:
    """What went past its bound in a behaviour's run: resources, then the exit's delay."""
    return [*b["failures"], *([b["late_exit"]] if b.get("late_exit") else [])]


def verdict_text(b: dict[str, Any]) -> str:
    return "FAIL: " + "; ".join(problems(b)) if problems(b) else "ok"


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# The fleet agent's soak: Python {report['python']['version']}",
        "",
        f"`{report['command']}`, {report['date']}; {common.cpus_and_load(report['machine'])}.  "
        f"{report['seconds']:g} s per behaviour "
        f"({'at once' if report['parallel'] else 'one after another'}), "
        f"a profile every {report['interval']:g} s, retries at most {report['backoff_max']:g} s "
        f"apart, spool cap {report['spool_cap_mb']:g} MB, readings every {report['every']:g} s, "
        f"warm-up {report['warm_s']:g} s.",
        "",
        "| behaviour | requests | pushed / spooled / dropped | RSS MB start / end / max | "
        "RSS slope 2nd half kB/min | threads start / max | sockets max | other fds start / "
        "end / max | spool max kB (cap) | exit s | verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for b in report["behaviours"]:
        if "rss_kb" not in b:
            lines.append(f"| {b['behaviour']} |" + " - |" * 9 + f" {b['failures']} |")
            continue
        rss, fds, th = b["rss_kb"], b["other_fds"], b["threads"]
        a = b.get("agent", {})
        slope = rss["second_half_slope_per_min"]
        lines.append(
            f"| {b['behaviour']} | {b['requests']} | {a.get('pushed', '-')} / "
            f"{a.get('spooled', '-')} / {a.get('dropped', '-')} | {rss['start'] / 1024:.1f} / "
            f"{rss['end'] / 1024:.1f} / {rss['max'] / 1024:.1f} | "
            f"{'-' if slope is None else f'{slope:+.1f}'} | {th['start']:g} / {th['max']:g} | "
            f"{b['sockets']['max']:g} | {fds['start']:g} / {fds['end']:g} / {fds['max']:g} | "
            f"{b['spool_bytes']['max'] / 1024:.0f} ({b['spool_cap'] / 1024:.0f}) | "
            f"{common.num(b['exit_delay_s'], 2)} | "
            f"{verdict_text(b)} |"
        )
    lines += [
        "",
        "requests: connections the peer accepted (none when it is down).  pushed / spooled / "
        "dropped: the agent's summary line (spooled: left in the spool at exit; dropped: beyond "
        "the spool's cap).  RSS start: the first reading after the warm-up.  exit s: from the "
        "program's last line to the process being gone (the flush deadline is "
        f"{FLUSH_S:g} s).  Bounds: see bench/agent_soak.py; the .json holds a timeline.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600, help="per behaviour (600)")
    parser.add_argument("--behaviours", default="down,slow,500", help=f"of {', '.join(BEHAVIOURS)}")
    parser.add_argument("--parallel", action="store_true", help="every behaviour at once")
    parser.add_argument("--interval", type=float, default=1.0, help="push interval, s (1)")
    parser.add_argument("--backoff-max", type=float, default=2.0, help="retry wait max, s (2)")
    parser.add_argument("--every", type=float, default=1.0, help="seconds between readings (1)")
    parser.add_argument("--warm", type=float, help="warm-up, s (default: a tenth, 5 to 60)")
    parser.add_argument(
        "--spool-cap-mb", type=float, default=0.25, help="spool cap (0.25 MB: full within minutes)"
    )
    parser.add_argument(
        "--rss-margin-mb",
        type=float,
        default=2.0,
        help="memory allowed above the queue's worth after the warm-up (2 MB), half of it in "
        "the second half",
    )
    parser.add_argument("--python", default=sys.executable, help="default: this Python")
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument("--name", help="results file name (default agent-soak-<seconds>s)")
    parser.add_argument("--no-save", action="store_true", help="write no bench/results files")
    args = parser.parse_args(argv)
    names = [b.strip() for b in args.behaviours.split(",") if b.strip()]
    unknown = [b for b in names if b not in BEHAVIOURS]
    if unknown or not names:
        parser.error(f"unknown behaviour {unknown}: choose from {', '.join(BEHAVIOURS)}")
    warm_s = args.warm if args.warm is not None else min(60.0, max(5.0, args.seconds / 10))
    work = Path(tempfile.mkdtemp(prefix="leadline-soak-"))
    started = datetime.datetime.now(datetime.timezone.utc)
    clean = common.Sanitizer(args.python, work)
    report: dict[str, Any] = {
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": common.machine(),
        "python": common.python_info(args.python, ("leadline",)),
        "command": " ".join(["bench/agent_soak.py", *(clean(a) for a in (argv or sys.argv[1:]))]),
        "seconds": args.seconds,
        "parallel": args.parallel,
        "interval": args.interval,
        "backoff_max": args.backoff_max,
        "every": args.every,
        "warm_s": warm_s,
        "spool_cap_mb": args.spool_cap_mb,
        "behaviours": [],
    }
    groups = [names] if args.parallel else [[n] for n in names]
    try:
        for group in groups:
            soaks = []
            for name in group:
                kind, options = BEHAVIOURS[name]
                (work / name).mkdir()
                soaks.append(Soak(name, Peer(kind, **options), work / name))
            try:
                for soak in soaks:
                    soak.start(args)
                print(f"soak: {', '.join(group)} for {args.seconds:g} s ...", flush=True)
                # Readings until every program is gone; a run that overstays is killed.
                deadline = time.monotonic() + args.seconds + 120
                while any(s.running() for s in soaks) and time.monotonic() < deadline:
                    for soak in soaks:
                        if soak.running():
                            soak.sample()
                    time.sleep(args.every)
                for soak in soaks:
                    soak.finish()
                    result = verdict(soak, args, warm_s)
                    result["stderr"] = [clean(line) for line in result["stderr"]]
                    report["behaviours"].append(result)
                    print(f"  {soak.name}: {verdict_text(result)}")
            finally:
                for soak in soaks:
                    if soak.proc is not None and soak.proc.poll() is None:
                        soak.proc.kill()
                        soak.proc.wait()
                    soak.peer.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["machine"]["load_after"] = os.getloadavg()[0]
    text = markdown(report)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    if not args.no_save:
        version = ".".join(str(report["python"]["version"]).split(".")[:2])
        name = args.name or f"agent-soak-{args.seconds:g}s"
        results = common.BENCH / "results"
        stem = f"{name}-py{version}-{started.strftime('%Y-%m-%d')}"
        (results / f"{stem}.md").write_text(text)
        (results / f"{stem}.json").write_text(json.dumps(report, indent=1) + "\n")
        print(f"results: bench/results/{stem}.md and .json")
    return 1 if any(problems(b) for b in report["behaviours"]) else 0


if __name__ == "__main__":
    sys.exit(main())
