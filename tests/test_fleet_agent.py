"""The fleet agent end to end, without a Pyroscope server: a real program pushes to a real TCP
peer on 127.0.0.1 that misbehaves on purpose (tools/ingest_peers.py: slow to connect, silent,
trickling, a half-sent answer, answering 500, or absent), through `leadline run --push` and
through the LEADLINE_PUSH start-up hook.  Whatever the server does, the program's exit is held
at most for the flush deadline, what was not delivered is in the spool and reaches the next
server that answers; a spool that cannot be written costs profiles, never delivery; an agent
that cannot start says so in one line.  The soak at the end runs bench/agent_soak.py briefly.

No test here times the exit: a busy machine stretches it.  Each checks what only an exit by the
deadline does: the request still waiting is abandoned or cut short with a line that says so,
not ended by its own 10 s socket timeout, and the profile it carried is in the spool (the old
code lost it).  bench/agent_soak.py measures the delay."""

from __future__ import annotations

import itertools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import HOOK_KIND_ENDS, PY, ROOT, run, write

sys.path.insert(0, str(ROOT / "tools"))

from ingest_peers import Peer, agent_summary

from leadline.capture.foreign import read_pprof
from leadline.fleet.delivery import Upload

FLUSH_S = 1.0  # LEADLINE_PUSH_FLUSH in these tests
# What the agent says when the flush deadline, not the server, ended a request still waiting:
# abandoned, blocked in a socket operation begun before the exit ...
ABANDONED = f"no answer within the {FLUSH_S:g} s given at exit"
# ... or cut at its next socket operation (a server trickling its answer).
CUT = "no complete answer in the time a request has"

PROGRAM = """
    import sys, time

    def work(n):
        return sum(i * i for i in range(n))

    t, cpu = time.time(), time.thread_time()
    while time.time() - t < float(sys.argv[1]):
        work(5000)
    print("END", repr(time.time()), repr(time.thread_time()), repr(cpu), flush=True)
"""


def summary(stderr: str) -> dict[str, int]:
    counts = agent_summary(stderr)
    assert counts is not None, stderr
    return counts


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEADLINE_")}
    env.update(
        {
            "LEADLINE_SPOOL": str(tmp_path / "spool"),
            "LEADLINE_PUSH_FLUSH": f"{FLUSH_S:g}",
            "NO_COLOR": "1",
            **extra,
        }
    )
    return env


def push_run(
    tmp_path: Path, url: str, seconds: float, service: str = "exit", **env: str
) -> subprocess.CompletedProcess[str]:
    write(tmp_path, "prog.py", PROGRAM)
    cmd = [
        PY, "-m", "leadline", "run", "--push", url, "--push-interval", "0.5",
        "--service", service, "prog.py", str(seconds),
    ]  # fmt: skip
    return run(cmd, cwd=tmp_path, env=clean_env(tmp_path, **env))


def spooled(spool: Path) -> list[Upload]:
    files = sorted(p for p in spool.iterdir()) if spool.is_dir() else []
    assert all(p.name.endswith(".upload") for p in files), [p.name for p in files]
    return [Upload.from_bytes(p.read_bytes()) for p in files]


def samples_in(bodies: list[bytes]) -> int:
    return round(sum(sum(w for _, w in read_pprof("p", b, "samples").stacks) for b in bodies))


# -- exit: the program never waits on the network beyond the flush deadline --------------------


@HOOK_KIND_ENDS
@pytest.mark.parametrize("behaviour", ["backlog", "silent", "trickle", "half", "late"])
def test_exit_is_not_held_by_a_slow_server(tmp_path: Path, behaviour: str) -> None:
    """A request is in flight (a 10 s socket timeout) when the 4 s program ends: the flush
    deadline abandons it, and every sample the program made, the abandoned request's too, is in
    the spool."""
    with Peer(behaviour, delay=30.0 if behaviour == "late" else 0.2) as peer:
        r = push_run(tmp_path, peer.url, 4.0)
        if behaviour != "backlog":
            assert peer.connections >= 1  # the agent did reach the server
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("END "), r.stdout
    s = summary(r.stderr)
    assert s["pushed"] == 0 and s["dropped"] == 0, s
    uploads = spooled(tmp_path / "spool")
    assert len(uploads) == s["spooled"] >= 2, (s, len(uploads))
    assert samples_in([u.body for u in uploads]) == s["samples"] > 0
    [line] = [x for x in r.stderr.splitlines() if "cannot push profiles to" in x]
    assert line.startswith(f"leadline: cannot push profiles to {peer.url} ("), line
    assert f"({ABANDONED}); {s['spooled']} left in the spool" in line or f"({CUT})" in line, line
    assert "Traceback" not in r.stderr


@HOOK_KIND_ENDS
def test_what_a_silent_server_left_is_delivered_by_the_next_run(tmp_path: Path) -> None:
    with Peer("silent") as silent:
        first = push_run(tmp_path, silent.url, 4.0)
    assert first.returncode == 0 and ABANDONED in first.stderr, first.stderr
    s1 = summary(first.stderr)
    with Peer("ok") as ok:
        second = push_run(tmp_path, ok.url, 1.0)
        received = list(ok.received)
    assert second.returncode == 0, second.stderr
    s2 = summary(second.stderr)
    assert s2["spooled"] == 0 and s2["dropped"] == 0, s2
    assert s2["pushed"] == len(received) >= s1["spooled"] + 1
    # Oldest first: the first run's profiles, then the second's, every sample exactly once.
    starts = [int(q["from"]) for q, _ in received]
    assert starts == sorted(starts)
    assert samples_in([b for _, b in received]) == s1["samples"] + s2["samples"]
    assert not list((tmp_path / "spool").iterdir())


def test_exit_through_the_start_up_hook_is_not_held(tmp_path: Path) -> None:
    """LEADLINE_PUSH in the environment of an unmodified program: the start-up hook starts the
    agent, and at exit (atexit) the same deadline holds."""
    write(tmp_path, "prog.py", PROGRAM)
    with Peer("silent") as peer:
        env = clean_env(
            tmp_path, LEADLINE_PUSH=peer.url, LEADLINE_PUSH_INTERVAL="0.5", LEADLINE_SERVICE="hook"
        )
        r = run([PY, "prog.py", "4"], cwd=tmp_path, env=env)
        assert peer.connections >= 1
    assert r.returncode == 0 and r.stdout.startswith("END "), r.stderr
    uploads = spooled(tmp_path / "spool")
    assert len(uploads) >= 2
    assert all(u.params["name"].startswith("hook{") for u in uploads)
    assert samples_in([u.body for u in uploads]) > 0
    assert r.stderr == (
        f"leadline: cannot push profiles to {peer.url} ({ABANDONED}); "
        f"{len(uploads)} left in the spool\n"
    )


def test_the_start_up_hook_pushes(tmp_path: Path) -> None:
    write(tmp_path, "prog.py", PROGRAM)
    with Peer("ok") as peer:
        env = clean_env(tmp_path, LEADLINE_PUSH=peer.url, LEADLINE_SERVICE="hooked")
        r = run([PY, "prog.py", "1"], cwd=tmp_path, env=env)
        received = list(peer.received)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert len(received) == 1  # one period (10 s by default), pushed at exit
    query, body = received[0]
    assert query["name"].startswith("hooked{") and query["spyName"] == "leadline"
    # The CPU the pushed samples stand for is the main thread's, all of it from the program's
    # first line to its last (and none it did not have): a busy machine makes the sampler miss
    # ticks, and then fewer samples each stand for more (57 samples for 1.21 s of CPU once,
    # beside a loaded suite), so their count says less than their CPU.  What the last samples
    # before the exit did not take up is left out: 0.2-4.7% of it beside four CPU hogs.
    cpu_s, cpu_at_start = map(float, r.stdout.split()[2:4])
    pushed_s = sum(w for _, w in read_pprof("p", body, "cpu").stacks) / 1e9
    assert 0.9 * (cpu_s - cpu_at_start) - 0.03 <= pushed_s <= cpu_s, (cpu_s, cpu_at_start)
    assert samples_in([body]) > 0


# -- an agent that cannot start: one line, once ------------------------------------------------


def test_an_agent_that_cannot_start_says_so_once_in_one_line(tmp_path: Path) -> None:
    write(tmp_path, "prog.py", PROGRAM)
    env = clean_env(tmp_path, LEADLINE_PUSH="http://127.0.0.1:9", LEADLINE_PUSH_INTERVAL="soon")
    r = run([PY, "prog.py", "0.1"], cwd=tmp_path, env=env)
    assert r.returncode == 0 and r.stdout.startswith("END "), r.stderr
    assert r.stderr == (
        "leadline: the profiling agent did not start: "
        "LEADLINE_PUSH_INTERVAL='soon' is not a number\n"
    )


def test_a_refused_start_agent_leaves_nothing_at_exit(tmp_path: Path) -> None:
    """start_agent while another profile runs is refused with LeadlineError; the process must
    then exit as if it had never been called (no traceback from an exit handler)."""
    write(
        tmp_path,
        "prog.py",
        """
        import leadline
        with leadline.profile("p.lead"):
            try:
                leadline.start_agent("http://127.0.0.1:9", service="x", spool_dir="spool")
            except leadline.LeadlineError as e:
                print("refused:", e)
        print("done")
        """,
    )
    r = run([PY, "prog.py"], cwd=tmp_path, env=clean_env(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "refused: another leadline profile is already running\ndone\n"
    assert r.stderr == ""


# -- a spool that cannot be written costs profiles, never delivery -----------------------------


def file_size_limit(limit: int) -> Callable[[], None]:
    """A child's limit on the size of the files it writes (RLIMIT_FSIZE): a write past it
    fails with EFBIG after writing what fits, as on a full disk, and for root too."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@HOOK_KIND_ENDS
def test_unwritable_spool_while_the_server_fails(tmp_path: Path) -> None:
    """Every spool write fails part-way (the file size limit is 64 bytes) while the server
    answers 500: profiles wait in memory, one warning, no partial file; once the server
    answers, all of them are delivered.  The old code stopped delivering for good at the first
    failed write, and left a partial file."""
    write(tmp_path, "prog.py", PROGRAM)
    with Peer("status", status=500) as peer:
        cmd = [
            PY, "-m", "leadline", "run", "--push", peer.url, "--push-interval", "0.5",
            "--service", "full", "prog.py", "6",
        ]  # fmt: skip
        # A generous flush deadline: the last profiles go to a server that answers at once.
        env = clean_env(tmp_path, LEADLINE_PUSH_BACKOFF_MAX="0.5", LEADLINE_PUSH_FLUSH="10")
        proc = subprocess.Popen(
            cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, preexec_fn=file_size_limit(64),
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while peer.connections < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            peer.behaviour = "ok"  # the server is back
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        received = list(peer.received)
    assert proc.returncode == 0 and out.startswith("END "), err
    assert "delivery stopped" not in err and "Traceback" not in err, err
    assert err.count("cannot write to the spool") == 1 and "(File too large)" in err, err
    assert "is reachable again; delivering" in err
    s = summary(err)
    assert s["pushed"] == len(received) >= 2 and s["dropped"] == 0 and s["spooled"] == 0, s
    assert samples_in([b for _, b in received]) == s["samples"]  # nothing lost
    starts = [int(q["from"]) for q, _ in received]
    assert starts == sorted(starts)
    assert not list((tmp_path / "spool").iterdir())  # no partial file left behind


def test_unwritable_spool_while_the_server_is_down(tmp_path: Path) -> None:
    """Nothing can be delivered or kept: the profiles are dropped at exit, counted, with one
    warning and no partial file; the exit is not held."""
    write(tmp_path, "prog.py", PROGRAM)
    with Peer("down") as peer:
        cmd = [
            PY, "-m", "leadline", "run", "--push", peer.url, "--push-interval", "0.5",
            "--service", "full", "prog.py", "3",
        ]  # fmt: skip
        r = run(cmd, cwd=tmp_path, env=clean_env(tmp_path), preexec_fn=file_size_limit(64))
    assert r.returncode == 0 and r.stdout.startswith("END "), r.stderr
    assert r.stderr.count("cannot write to the spool") == 1, r.stderr
    s = summary(r.stderr)
    # Each period with samples is one profile, dropped: how many periods a 3 s program gets
    # depends on how soon the agent's thread runs (a busy CI host: 3 periods, one of them empty).
    assert s["pushed"] == 0 and s["spooled"] == 0 and 1 <= s["dropped"] <= s["periods"], s
    assert s["samples"] > 100, s
    assert not list((tmp_path / "spool").iterdir())


def test_a_spool_path_that_cannot_be_a_directory_does_not_stop_the_agent(tmp_path: Path) -> None:
    (tmp_path / "spool").write_text("a file where the spool would be\n")
    with Peer("ok") as peer:
        r = push_run(tmp_path, peer.url, 1.0)
        received = list(peer.received)
    assert r.returncode == 0, r.stderr
    s = summary(r.stderr)
    assert s["pushed"] == len(received) >= 1 and s["dropped"] == 0, r.stderr
    assert samples_in([b for _, b in received]) == s["samples"] > 0
    assert r.stderr.count("\n") == 1, r.stderr  # the summary alone


def _mount_namespace() -> list[str] | None:
    """The `unshare` prefix that runs a command in a mount namespace of its own (as root, or
    as root of a user namespace), or None where this machine does not allow one."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe_dir = tempfile.mkdtemp(prefix="leadline-mount-probe-")
    try:
        for prefix in ([unshare, "-m"], [unshare, "-r", "-m"]):
            probe = [*prefix, "mount", "-t", "tmpfs", "leadline-probe", probe_dir]
            if subprocess.run(probe, capture_output=True).returncode == 0:
                return prefix
    finally:
        os.rmdir(probe_dir)
    return None


# Inside the namespace: mount the spool's file system, run the command, then copy out what the
# spool holds (the tmpfs goes with the namespace) and list it.
INSIDE = """
    spool=$1; options=$2; shift 2
    mount -t tmpfs -o "$options" leadline-spool "$spool" || exit 97
    "$@"
    status=$?
    ls -a "$spool" > "$spool.listing"
    cp "$spool"/* "$spool.copy/" 2>/dev/null
    exit $status
"""


@HOOK_KIND_ENDS
@pytest.mark.parametrize("options", ["size=16k", "size=1m,ro"])
def test_spool_on_a_full_or_read_only_file_system(tmp_path: Path, options: str) -> None:
    """The spool on a real file system of its own: a 16 KB tmpfs that fills after a few
    profiles, or a read-only one.  Full: the oldest profiles give way to the newest, as beyond
    the cap.  Read-only: every profile is dropped.  Either way one warning, no partial file,
    and the program exits as usual."""
    prefix = _mount_namespace()
    if prefix is None:
        pytest.skip("no mount namespace here (unshare -m, or -r -m, is refused)")
    write(tmp_path, "prog.py", PROGRAM)
    inside = write(tmp_path, "inside.sh", INSIDE)
    spool = tmp_path / "spool"
    spool.mkdir()
    (tmp_path / "spool.copy").mkdir()
    with Peer("down") as peer:
        cmd = [
            *prefix, "sh", str(inside), str(spool), options,
            PY, "-m", "leadline", "run", "--push", peer.url, "--push-interval", "0.5",
            "--service", "disk", "prog.py", "5",
        ]  # fmt: skip
        r = run(cmd, cwd=tmp_path, env=clean_env(tmp_path))
    assert r.returncode == 0 and r.stdout.startswith("END "), r.stderr
    assert "delivery stopped" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    s = summary(r.stderr)
    listing = (tmp_path / "spool.listing").read_text().split()
    assert not [n for n in listing if n.endswith(".tmp")], listing  # no partial file
    kept = sorted((tmp_path / "spool.copy").iterdir())
    assert len(kept) == s["spooled"]
    if "ro" in options.split(","):
        assert r.stderr.count("cannot write to the spool") == 1, r.stderr
        assert "Read-only file system" in r.stderr
        assert s["spooled"] == 0 and s["dropped"] >= 5, s
        return
    assert r.stderr.count("is on a full disk (No space left on device)") == 1, r.stderr
    assert s["spooled"] >= 1 and s["dropped"] >= 1, s
    # What stayed is the newest: consecutive periods up to the one the program ended in.
    uploads = [Upload.from_bytes(p.read_bytes()) for p in kept]
    spans = [(int(u.params["from"]), int(u.params["until"])) for u in uploads]
    assert spans == sorted(spans)
    assert all(a[1] >= b[0] for a, b in itertools.pairwise(spans)), spans
    assert spans[-1][1] >= int(float(r.stdout.split()[1]))


# -- a long run, briefly: memory, descriptors and the spool stay bounded -----------------------


@HOOK_KIND_ENDS
def test_soak_briefly(tmp_path: Path) -> None:
    """bench/agent_soak.py for 20 s per behaviour, all at once (the full run is 10 minutes
    each): the program's descriptors, threads, memory and spool stay within what the design
    bounds, against a server that is down, slow (answers after the agent's 10 s timeout) or
    failing (HTTP 500).  The exit's delay, a time, is the benchmark's to judge."""
    out = tmp_path / "soak.json"
    # 3 KB: three of the largest profiles (about 1 KB).  Only periods with samples make a
    # profile, and a busy host gives the program fewer: beside CI's other workers a 10 KB cap
    # held all 19 or so profiles of a behaviour (159 samples), and nothing was dropped.
    cap_mb = 0.003
    r = run(
        [
            PY, str(ROOT / "bench" / "agent_soak.py"), "--seconds", "20", "--parallel",
            "--interval", "0.5", "--every", "0.5", "--warm", "5", "--spool-cap-mb", str(cap_mb),
            "--python", PY, "--no-save", "--json", str(out),
        ],
        cwd=tmp_path,
        timeout=300,
    )  # fmt: skip
    report = json.loads(out.read_text())
    results = {b["behaviour"]: b for b in report["behaviours"]}
    assert sorted(results) == ["500", "down", "slow"], r.stdout
    for name, b in results.items():
        assert b["failures"] == [], (name, b["failures"], b["stderr"])
        assert b["returncode"] == 0 and b["readings"] >= 20, (name, b)
        # One delivery thread, one request at a time; nothing else of the agent's stays open.
        assert b["sockets"]["max"] <= 1, (name, b["sockets"])
        fds = b["other_fds"]
        # Back to the start's count at the end, in each of the last three readings (one reading
        # can find a spool file being written); nothing left open.
        assert b["other_fds_at_end"] == fds["min"] and fds["max"] <= fds["min"] + 1, (name, b)
        assert b["fds_left_open"] == [], (name, b["fds_left_open"])
        assert b["threads"]["max"] <= b["threads"]["start"], (name, b["threads"])
        assert b["spool_bytes"]["max"] <= cap_mb * 2**20, (name, b["spool_bytes"])
        growth_kb = b["rss_kb"]["max"] - b["rss_kb"]["start"]
        assert growth_kb <= 32 * b["largest_profile"] / 1024 + 4096, (name, b["rss_kb"])
        assert b["agent"]["pushed"] == 0, (name, b["agent"])
    assert results["down"]["requests"] == 0
    assert results["500"]["requests"] >= 5  # retried all along, at most 2 s apart
    assert results["slow"]["requests"] >= 1
    for name in ("down", "500"):  # the spool reached its cap: the oldest were dropped
        b = results[name]
        assert b["agent"]["dropped"] > 0, (name, b["agent"], b["spool_bytes"], b["largest_profile"])


def test_soak_tells_a_descriptor_left_open_from_one_open_for_a_moment(tmp_path: Path) -> None:
    """The soak's verdict on descriptors: one that a single reading finds open (a spool file
    being written as the last reading was taken: the test above once failed so) is no leak; one
    open in each of the last readings is, and is named."""
    import argparse
    from types import SimpleNamespace

    sys.path.insert(0, str(ROOT / "bench"))
    import agent_soak

    base = ("/dev/null", "pipe:[1]", "pipe:[2]")
    spool = f"{tmp_path}/spool/.0001.upload.tmp"

    def verdict(extra: dict[int, str]) -> dict[str, Any]:
        soak = agent_soak.Soak("down", SimpleNamespace(connections=0), tmp_path)  # type: ignore[arg-type]
        for i in range(20):
            targets = base + ((extra[i],) if i in extra else ())
            soak.readings.append(agent_soak.Reading(i * 0.5, 10_000, 4, 0, targets, 0, 0, 1000))
        args = argparse.Namespace(seconds=10.0, spool_cap_mb=0.01, rss_margin_mb=2.0)
        return dict(agent_soak.verdict(soak, args, warm_s=1.0))

    def fd_failures(b: dict[str, Any]) -> list[str]:
        return [f for f in b["failures"] if f.startswith("descriptors")]

    moment = verdict({19: spool, 7: spool})  # in the last reading, and once before
    assert moment["other_fds"]["end"] == 4 and moment["other_fds_at_end"] == 3
    assert moment["fds_left_open"] == [] and fd_failures(moment) == []
    left = verdict({17: spool, 18: spool, 19: spool})  # open from then on
    assert left["other_fds_at_end"] == 4 and left["fds_left_open"] == [spool]
    assert fd_failures(left) == [
        f"descriptors: 3 at the start, 4 in each of the last 3 readings (left open: {spool})"
    ]


def test_what_the_agent_pushes_keeps_each_stacks_weights() -> None:
    """The CPU profile keeps each stack's CPU time and running samples, the memory profile its
    growth (a field added to stacks once shifted them, and the agent pushed no CPU time)."""
    from leadline.analyse.model import SampleProfile, Stack
    from leadline.fleet.agent import _growth_only, _running_only

    stacks = [
        Stack((0, 1), 1, samples=5, idle=2, reads=3, cpu_ns=7_000, rss_bytes=4096),
        Stack((0, 2), 1, samples=4, idle=4, reads=4, idle_reads=4),
    ]
    profile = SampleProfile(
        mode="cpu", rate_hz=100.0, duration_ns=10**9, start_unix_ns=0, samples=9, ticks=9,
        missed=0, torn=0, memory=True, frames=[], threads=[], stacks=stacks,
    )  # fmt: skip
    cpu = _running_only(profile).stacks
    assert [(s.frames, s.samples, s.idle, s.cpu_ns, s.rss_bytes) for s in cpu] == [
        ((0, 1), 3, 0, 7_000, 0)
    ]
    grown = _growth_only(profile).stacks
    assert [(s.frames, s.samples, s.idle, s.cpu_ns, s.rss_bytes) for s in grown] == [
        ((0, 1), 5, 2, 0, 4096)
    ]


def test_the_agents_own_threads_are_not_pushed(tmp_path: Path) -> None:
    """The agent's reader and delivery threads run in the program's process and the sampler
    reads them with it; what they do (reading the sampler's pipe, folding, connecting, writing
    the spool) is not the program's work: every pushed stack is the program's (12 of 645
    samples of a 6 s program were the agent's, and a fleet diff ranked a request's
    `getaddrinfo` second). The program's main thread at its exit, in threading._shutdown, is
    the program's, and so are its garbage collections (a <GC> leaf above its own line: CI on
    3.10 once sampled one)."""
    r = push_run(tmp_path, "http://127.0.0.1:9", 4.0)  # nothing listens: all of it is spooled
    assert r.returncode == 0, r.stderr
    s = summary(r.stderr)
    bodies = [u.body for u in spooled(tmp_path / "spool")]
    assert samples_in(bodies) == s["samples"] > 100, s
    prog = str(tmp_path / "prog.py")
    others = []
    for body in bodies:
        for frames, w in read_pprof("p", body, "samples").stacks:
            # The program's own collections are its work: the sampler shows them as a <GC>
            # frame (module gc) above the line that triggered them.
            if {f.file for f in frames if (f.name, f.file) != ("<GC>", "gc")} == {prog}:
                continue
            # The main thread's own way out: after its last line, the interpreter runs
            # threading._shutdown on it (a busy host can leave it there for a tick).
            if frames[0].name == "_shutdown" and {Path(f.file).name for f in frames} == {
                "threading.py"
            }:
                continue
            others.append(([f.label for f in frames], w))
    assert not others, others


def test_leadline_s_own_calls_into_the_standard_library_are_not_the_program_s() -> None:
    """A sample of the program's main thread while leadline itself works on it (the agent's
    start blocking signals while it starts its threads: signal.pthread_sigmask under
    contextlib, seen pushed by CI under load) is left out like the launcher's own frames; the
    program's code that the runner calls (its module, its sys.excepthook), and a standard
    library call of the program's, are kept, without the launcher's frames."""
    from types import SimpleNamespace

    from leadline.analyse.samples import _StackResolver
    from leadline.capture.reader import Function

    pkg = "/site/leadline/"
    funcs = {
        1: Function(1, "py", "/venv/bin/leadline", "<module>", 1),
        2: Function(2, "py", pkg + "cli.py", "main", 1),
        3: Function(3, "py", pkg + "fleet/agent.py", "Agent._start", 1),
        4: Function(4, "py", "/lib/contextlib.py", "_GeneratorContextManager.__exit__", 1),
        5: Function(5, "py", "/lib/signal.py", "pthread_sigmask", 1),
        6: Function(6, "py", pkg + "record/runner.py", "execute", 1),
        7: Function(7, "py", "/tmp/prog.py", "<module>", 1),
        8: Function(8, "py", "/tmp/prog.py", "hook", 1),
    }
    # stack id: (parent id, function, offset)
    stacks = {
        1: (0, 1, 0), 2: (1, 2, 0), 3: (2, 3, 0), 4: (3, 4, 0), 5: (4, 5, 0),
        6: (2, 6, 0), 7: (6, 7, 0), 8: (7, 4, 0), 9: (7, 5, 0), 10: (6, 8, 0),
    }  # fmt: skip
    cap = SimpleNamespace(meta={"package_dir": pkg}, functions=funcs, stacks=stacks)
    resolver = _StackResolver(cap)  # type: ignore[arg-type]

    def names(sid: int) -> list[str] | None:
        node = resolver.resolve(sid)
        if node < 0:
            return None
        return [resolver.frames[i].name for i in resolver.tree.path(node)]

    # leadline's own work: the agent's start, and its calls out of the package.
    assert [names(s) for s in (5, 4, 3, 2)] == [None] * 4
    # The program, entered by the runner; its own calls into the standard library.
    assert names(7) == ["<module>"]
    assert names(9) == ["<module>", "pthread_sigmask"]
    assert names(8) == ["<module>", "_GeneratorContextManager.__exit__"]
    assert names(10) == ["hook"]


def test_the_agent_leaves_out_the_threads_it_is_told() -> None:
    """_without_threads drops the stacks and the entries of the threads with the given kernel
    ids, and nothing else."""
    from leadline.analyse.model import SampleProfile, Stack, Thread
    from leadline.fleet.agent import _without_threads

    threads = [Thread(1, 10, 100, "MainThread"), Thread(2, 10, 101, "leadline-agent")]
    stacks = [Stack((0,), 1, samples=3), Stack((1,), 2, samples=2), Stack((0, 1), 1, samples=1)]
    profile = SampleProfile(
        mode="cpu", rate_hz=100.0, duration_ns=10**9, start_unix_ns=0, samples=6, ticks=6,
        missed=0, torn=0, memory=False, frames=[], threads=threads, stacks=stacks,
    )  # fmt: skip
    kept = _without_threads(profile, {101, 555})
    assert [t.name for t in kept.threads] == ["MainThread"]
    assert [(s.frames, s.thread, s.samples) for s in kept.stacks] == [((0,), 1, 3), ((0, 1), 1, 1)]
    assert _without_threads(profile, {555}) is profile
