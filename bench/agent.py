"""What the fleet agent costs a program: the call-dense workload alone, and the same unmodified
program started with ``LEADLINE_PUSH`` pointing at a real Grafana Pyroscope server on 127.0.0.1
(the start-up hook starts the agent at its default settings: 100 Hz, a profile every 10 s), and
pointing at a port where nothing answers (every profile goes to the disk spool).

Rounds are interleaved (A B C, A B C, ...); each run is a child process whose CPU time (user +
sys from ``wait4``: the agent's sampler, reader and delivery threads included) and wall time
are measured; the table gives medians and the median of each round's ratio to its baseline run.
After the runs, each agent run's profiles are read back from the server (``SelectMergeProfile``
with the run's own label), so the table also says that what was measured was delivered.

    python bench/agent.py [--python PATH] [--rounds 7] [--scale X] [--quick] [--name agent]

`--scale` multiplies the workload's work (about 4 s at 1): the agent's start-up (importing its
modules, about 0.1 s of CPU) is a fixed cost that a longer run amortises.

The server is built once by tools/build_pyroscope.sh (cached outside the repository) and started
by tools/pyroscope_server.py.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import common

sys.path.insert(0, str(common.REPO / "tools"))

from pyroscope_server import PyroscopeServer, free_port

PACKAGES = ("leadline", "pyperformance")
SERVICE = "bench-agent"

CANDIDATES = {
    "baseline": "the program alone",
    "agent": "LEADLINE_PUSH=<server>: the agent at its defaults, pushing to Pyroscope",
    "agent-down": "LEADLINE_PUSH=<a closed port>: every profile spooled to disk",
}


def candidate_env(name: str, url: str, down_url: str, run_dir: Path, tag: str) -> dict[str, str]:
    if name == "baseline":
        return {"LEADLINE_PUSH": ""}
    return {
        "LEADLINE_PUSH": url if name == "agent" else down_url,
        "LEADLINE_SERVICE": SERVICE,
        "LEADLINE_LABELS": f"bench_run={tag}",
        "LEADLINE_SPOOL": str(run_dir / "spool"),
    }


def delivered(server: PyroscopeServer, tag: str, since: float) -> tuple[int, float] | None:
    """(samples, CPU seconds) the server holds for one agent run, or None if unreadable."""
    from leadline.capture.foreign import read_pprof
    from leadline.fleet.pyroscope import parse_fleet_url, select_merge_profile

    host = server.url.split("://", 1)[1]
    out: list[float] = []
    for ptype in ("samples", "cpu"):
        q = parse_fleet_url(
            f"pyroscope://{host}/{SERVICE}?from={int(since) - 60}&until={int(time.time()) + 60}"
            f"&type={ptype}&bench_run={tag}"
        )
        try:
            prof = read_pprof(q.shown, select_merge_profile(q))
        except Exception as e:  # a bench reports what it could not read; it does not stop
            print(f"agent.py: cannot read back {tag}: {e}", file=sys.stderr)
            return None
        out.append(sum(w for _, w in prof.stacks))
    return round(out[0]), out[1] * 1e-9


def markdown(report: dict[str, Any]) -> str:
    rows = report["rows"]
    lines = [
        f"# The fleet agent on the call-dense workload, Python {report['python']['version']}",
        "",
        f"`{report['command']}`, {report['date']}; {report['rounds']} interleaved rounds; "
        f"{common.cpus_and_load(report['machine'])}.",
        "",
        "| candidate | runs ok | cpu s | cpu/base (range) | wall s | wall/base | "
        "samples in server | server cpu s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['candidate']} | {r['ok']}/{r['runs']} | {common.num(r['cpu'], 3)} | "
            f"{common.num(r['cpu_ratio'], 3)} ({r['cpu_ratio_range']}) | "
            f"{common.num(r['wall'], 3)} | {common.num(r['wall_ratio'], 3)} | "
            f"{r['server_samples']} | {r['server_cpu']} |"
        )
    lines += ["", "| candidate | what |", "|---|---|"]
    lines += [f"| {name} | {what} |" for name, what in CANDIDATES.items()]
    lines += [
        "",
        "cpu s: user + sys of the run (the agent's threads included), median; cpu/base: the "
        "median over the rounds of the run's CPU time over the baseline run's of the same round "
        "(the range: smallest and largest of those ratios).  samples in server: the samples "
        "the server holds for the agent runs (their sum), read back after the runs; server "
        "cpu s: the CPU time those samples account for.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_common_arguments(parser, rounds=7, timeout=600, name_help="agent[-scaleN]")
    parser.add_argument(
        "--scale", type=float, help="calls.py --scale: more work amortises the start-up"
    )
    args = parser.parse_args(argv)
    session = common.Session.start(parser, args, argv or sys.argv[1:], PACKAGES)
    python, work = session.python, session.work
    sizes = common.Sizes(0.2 if args.quick else args.scale, 10, 50)
    workload = common.make_workloads(python, work, sizes)["calls"]
    missing = common.ensure_requirements(python, workload.needs, not args.no_setup, "agent.py")
    if missing:
        print(f"agent.py: {', '.join(missing)} is not installed (bench/setup_env.py)")
        return 1
    server = PyroscopeServer(log=work / "pyroscope.log")
    print(f"starting Pyroscope on {server.url} ...", flush=True)
    server.start()
    down_url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.time()
    runs: dict[str, dict[int, common.Finished]] = {name: {} for name in CANDIDATES}
    tags: dict[int, str] = {}
    try:
        for rnd in range(0, args.rounds + 1):  # round 0: one untimed warm-up of the baseline
            for name in CANDIDATES:
                if rnd == 0 and name != "baseline":
                    continue
                session.announce("calls", rnd, name, 10)
                run_dir = session.run_dir("calls", name, rnd)
                tag = f"{uuid.uuid4().hex[:12]}"
                if name == "agent":
                    tags[rnd] = tag
                cmd = [python, str(workload.script), *workload.args(run_dir)]
                env = candidate_env(name, server.url, down_url, run_dir, tag)
                fin = common.run_once(cmd, run_dir, args.timeout, env)
                spooled = len(list((run_dir / "spool").glob("*"))) if name != "agent" else 0
                status = "ok" if fin.code == 0 else f"failed ({fin.code})"
                if status != "ok":
                    print(f" {status}: {common.tail(run_dir / 'stderr.txt', 2)}")
                else:
                    print(f" cpu {fin.cpu:.3f} s  wall {fin.wall:.3f} s", end="")
                    print(f"  spooled {spooled}" if name == "agent-down" else "")
                if rnd and status == "ok":
                    runs[name][rnd] = fin
                session.done(run_dir)
        time.sleep(2)  # the server makes what it ingested queryable within a second or so
        back = [delivered(server, tag, started) for tag in tags.values()]
    finally:
        server.cleanup()
    base_cpu = {r: f.cpu for r, f in runs["baseline"].items()}
    base_wall = {r: f.wall for r, f in runs["baseline"].items()}
    rows = []
    for name in CANDIDATES:
        cpu = {r: f.cpu for r, f in runs[name].items()}
        wall = {r: f.wall for r, f in runs[name].items()}
        ratios = [cpu[r] / base_cpu[r] for r in cpu if r in base_cpu]
        read = [b for b in back if b is not None] if name == "agent" else []
        rows.append(
            {
                "candidate": name,
                "runs": args.rounds,
                "ok": len(cpu),
                "cpu": common.median(list(cpu.values())),
                "wall": common.median(list(wall.values())),
                "cpu_ratio": common.paired_ratio(cpu, base_cpu),
                "cpu_ratio_range": f"{min(ratios):.3f}-{max(ratios):.3f}" if ratios else "-",
                "wall_ratio": common.paired_ratio(wall, base_wall),
                "cpu_per_round": cpu,
                "server_samples": f"{sum(s for s, _ in read):,}" if read else "-",
                "server_cpu": f"{sum(c for _, c in read):.2f}" if read else "-",
            }
        )
    session.report["rows"] = rows
    text = markdown(session.report)
    print(text)
    if not args.no_save:
        name = "agent" + ("-quick" if args.quick else f"-scale{args.scale:g}" if args.scale else "")
        session.save(args.name or name, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
