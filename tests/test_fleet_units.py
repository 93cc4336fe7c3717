"""The fleet path's parts without a server: the disk spool, delivery when nothing answers, the
Pyroscope names and URLs, the agent's configuration, and the live capture stream.  The
end-to-end tests against a real Pyroscope server are in fleet/ (`make test-fleet`)."""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import ROOT, burn_cpu, pprof_strings

import leadline
from leadline.analyse.samples import load_profile
from leadline.capture.foreign import read_pprof
from leadline.capture.reader import Capture, CaptureStream
from leadline.errors import LeadlineError
from leadline.fleet import agent as agent_module
from leadline.fleet.agent import Agent, AgentConfig
from leadline.fleet.delivery import (
    Delivery,
    Endpoint,
    HTTPFailure,
    Spool,
    Upload,
    request,
    safe_url,
)
from leadline.fleet.pyroscope import app_name, ingest_params, parse_fleet_url, parse_time
from leadline.render.encode import to_pprof

sys.path.insert(0, str(ROOT / "tools"))

from ingest_peers import Peer


def upload(i: int, size: int = 100) -> Upload:
    return Upload({"name": f"svc{{n={i}}}"}, bytes([i % 256]) * size, created_ns=1_000 + i)


def test_upload_round_trip() -> None:
    u = upload(7)
    assert Upload.from_bytes(u.to_bytes()) == u


def test_spool_keeps_order_drops_oldest_beyond_cap_and_hands_over(tmp_path: Path) -> None:
    spool = Spool(tmp_path, cap_bytes=3 * 160)
    for i in (3, 1, 2):
        spool.put(upload(i))
    head = spool.oldest()
    assert head is not None and head[1] == upload(1)  # by creation time, not arrival
    spool.put(upload(4))  # over the cap: the oldest goes
    assert spool.dropped == 1 and len(spool) == 3
    spool.release()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 3 and all(n.endswith(".upload") for n in names)
    again = Spool(tmp_path, cap_bytes=1 << 20)  # the next process adopts them
    got = []
    while (head := again.oldest()) is not None:
        got.append(head[1].params["name"])
        again.done(head[0])
    assert got == ["svc{n=2}", "svc{n=3}", "svc{n=4}"]
    assert not list(tmp_path.iterdir())


def test_spool_adopts_the_files_of_a_dead_process(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    pid = int(dead.stdout)
    (tmp_path / f"{1:020d}-{pid}-000001.p{pid}").write_bytes(upload(1).to_bytes())
    (tmp_path / f"{2:020d}-1-000001.p1").write_bytes(upload(2).to_bytes())  # pid 1 is alive
    spool = Spool(tmp_path, cap_bytes=1 << 20)
    assert len(spool) == 1
    head = spool.oldest()
    assert head is not None and head[1] == upload(1)


def test_delivery_spools_when_nothing_answers(tmp_path: Path) -> None:
    warnings: list[str] = []
    d = Delivery(
        Endpoint("http://user:pw@127.0.0.1:1", token="tok-secret", timeout_s=2.0),
        tmp_path / "spool",
        warn=warnings.append,
        backoff_s=(5.0, 10.0),  # the next retry would be 2.5 to 5 s away
    )
    for i in range(3):
        d.submit(upload(i))
    time.sleep(0.5)
    t0 = time.monotonic()
    stats = d.close(10.0)
    assert time.monotonic() - t0 < 1.0  # known to be down: spooled at once, no waiting
    assert (stats.delivered, stats.spooled, stats.dropped) == (0, 3, 0)
    assert stats.failures >= 1
    assert len(list((tmp_path / "spool").glob("*.upload"))) == 3
    assert len(warnings) == 1 and "cannot push profiles to http://127.0.0.1:1" in warnings[0]
    assert "tok-secret" not in warnings[0] and "pw" not in warnings[0]


class _Ingest:
    """A local HTTP server that answers POSTs with the statuses given, then 200 with `ok`,
    counts the POSTs (`seen`), and records the `name` of each profile it accepted."""

    def __init__(self, answers: list[tuple[int, bytes]], ok: bytes = b"") -> None:
        import http.server
        import threading
        import urllib.parse

        self.answers = list(answers)
        self.accepted: list[str] = []
        self.seen = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status, body = outer.answers.pop(0) if outer.answers else (200, ok)
                outer.seen += 1
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                if status == 200 and "name" in query:  # an ingest (a query has no name)
                    outer.accepted.append(query["name"][0])
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(
    "status, body, kept",
    [
        # Pyroscope just restarted: its distributor has no ingesters in the ring yet.
        (422, b'{"code":"unknown","message":"pushing IngestInput-pprof failed: empty ring"}', 1),
        (429, b"slow down", 1),
        (503, b"unavailable", 1),
        (400, b"malformed profile", 0),  # the profile itself was refused: dropped
    ],
)
def test_delivery_retries_a_server_that_is_not_ready(
    tmp_path: Path, status: int, body: bytes, kept: int
) -> None:
    server = _Ingest([(status, body)] * (2 if kept else 1))  # refused twice, or once
    warnings: list[str] = []
    d = Delivery(
        Endpoint(server.url), tmp_path / "spool", warn=warnings.append, backoff_s=(0.05, 0.1)
    )
    try:
        for i in range(3):
            d.submit(upload(i))
        deadline = time.monotonic() + 10
        while len(server.accepted) < 2 + kept and time.monotonic() < deadline:
            time.sleep(0.05)
        stats = d.close(2.0)
    finally:
        server.close()
    names = [f"svc{{n={i}}}" for i in range(3)]
    assert server.accepted == (names if kept else names[1:])  # in order, nothing else lost
    assert (stats.delivered, stats.spooled, stats.dropped) == (2 + kept, 0, 1 - kept)
    assert len(warnings) == (2 if kept else 1), warnings
    if kept:
        assert "spooling them and retrying" in warnings[0] and "reachable again" in warnings[1]
    else:
        assert "refused a profile (HTTP 400" in warnings[0] and "dropped" in warnings[0]


def test_safe_url_hides_credentials() -> None:
    assert (
        safe_url("https://me:secret@host.example:4040/p/?token=x") == "https://host.example:4040/p"
    )


def test_pyroscope_names() -> None:
    assert app_name("my svc", {"version": "1,2", "host": "a{b}"}) == "my_svc{host=a_b_,version=1_2}"
    p = ingest_params("api", {"host": "h"}, 100.2, 100.4, 100.0)
    assert p == {
        "name": "api{host=h}",
        "from": "100",
        "until": "101",
        "format": "pprof",
        "sampleRate": "100",
        "spyName": "leadline",
    }


def test_fleet_urls() -> None:
    now = 1_700_000_000.0
    q = parse_fleet_url("pyroscope://h:4040/api?version=2&from=now-2h&until=now-1h", now)
    assert q.endpoint.url == "http://h:4040" and q.service == "api"
    assert q.labels == {"version": "2"}
    assert (q.start_ms, q.end_ms) == (int((now - 7200) * 1000), int((now - 3600) * 1000))
    assert q.profile_type == "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
    assert q.selector == '{service_name="api",version="2"}'
    t = parse_fleet_url(
        "pyroscope+https://h/api?type=memory&from=2026-01-01T00:00:00&until=2026-01-02", now
    )
    assert t.endpoint.url.startswith("https://") and t.profile_type.startswith("rss:")
    assert t.start_ms == 1767225600000
    for bad, why in (
        ("pyroscope://h:4040/?from=now-1h", "expected pyroscope://HOST:PORT/SERVICE"),
        ("pyroscope://h/api?from=tomorrow", "bad time"),
        ("pyroscope://h/api?from=now&until=now-1h", "'until' must be after 'from'"),
        ("pyroscope://h/api?__name__=x", "bad label name"),
    ):
        with pytest.raises(LeadlineError, match=why):
            parse_fleet_url(bad, now)
    assert parse_time("1700000000000") == 1_700_000_000.0  # milliseconds


def test_agent_config_from_environment(tmp_path: Path) -> None:
    assert AgentConfig.from_env({}) is None
    token = tmp_path / "token"
    token.write_text("abc\n")
    c = AgentConfig.from_env(
        {
            "LEADLINE_PUSH": "https://p:4040",
            "LEADLINE_SERVICE": "api",
            "LEADLINE_LABELS": "env=prod, region=eu",
            "LEADLINE_VERSION": "7",
            "LEADLINE_PUSH_INTERVAL": "5",
            "LEADLINE_PUSH_TOKEN_FILE": str(token),
        }
    )
    assert c is not None and c.service == "api" and c.interval_s == 5.0
    assert c.labels == {"env": "prod", "region": "eu", "version": "7"}
    assert c.endpoint is not None and c.endpoint.token == "abc"
    with pytest.raises(LeadlineError, match="LEADLINE_PUSH_INTERVAL='soon' is not a number"):
        AgentConfig.from_env({"LEADLINE_PUSH": "http://p", "LEADLINE_PUSH_INTERVAL": "soon"})
    with pytest.raises(LeadlineError, match="bad label"):
        AgentConfig.from_env({"LEADLINE_PUSH": "http://p", "LEADLINE_LABELS": "novalue"})
    with pytest.raises(LeadlineError, match="not an http"):
        AgentConfig.from_env({"LEADLINE_PUSH": "ftp://p"})


def test_start_agent_needs_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEADLINE_PUSH", raising=False)
    with pytest.raises(LeadlineError, match="no Pyroscope URL"):
        leadline.start_agent()


def test_capture_stream_reads_a_capture_fed_in_pieces(tmp_path: Path) -> None:
    path = tmp_path / "s.lead"
    with leadline.profile(path, rate=500, mode="cpu"):
        burn_cpu(0.3)
    data = path.read_bytes()
    stream = CaptureStream()
    for i in range(0, len(data), 97):
        stream.feed(data[i : i + 97])
    assert stream.damage is None and stream.bytes_read == len(data)
    with Capture(path) as cap:
        expected = list(cap.samples())
        assert stream.take() == len(expected) > 50
        assert list(stream.samples()) == expected
        a, b = load_profile(stream), load_profile(cap)
    assert sorted((s.samples, s.cpu_ns) for s in a.stacks) == sorted(
        (s.samples, s.cpu_ns) for s in b.stacks
    )
    half = expected[len(expected) // 2][0]
    stream2 = CaptureStream()
    stream2.feed(data)
    assert stream2.take(before=half) == sum(1 for s in expected if s[0] < half)
    corrupt = CaptureStream()
    corrupt.feed(b"NOTACAPTURE" * 3)
    assert corrupt.damage == "not a leadline capture"


def test_pprof_without_sample_labels(tmp_path: Path) -> None:
    path = tmp_path / "s.lead"
    with leadline.profile(path, rate=500, mode="cpu"):
        burn_cpu(0.1)  # 15 ms of work gave no samples when the sampler waited for a CPU
    with Capture(path) as cap:
        p = load_profile(cap)
    raw = to_pprof(p, ("samples", "cpu"), ())
    # No label key in the string table (the thread label's would be "thread"; a file name such
    # as threading.py, from a thread of the test runner, may well be there).
    assert "thread" not in pprof_strings(raw)
    prof = read_pprof("x.pb.gz", raw, "cpu")
    assert prof.unit == "nanoseconds" and prof.stacks
    os.environ.pop("LEADLINE_PUSH", None)


# -- a request's deadline, close()'s deadline ---------------------------------------------------


def wait_until(predicate: object, timeout: float = 30.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


@pytest.mark.parametrize("behaviour", ["backlog", "silent", "trickle", "half"])
def test_a_request_ends_by_its_deadline(behaviour: str) -> None:
    """Socket timeouts are per operation: a server that trickles its answer, or sends half of
    it, would hold a request for ever without an overall deadline.  The reason says which of
    the two ended it: the deadline (0.5 s away), not the socket timeout (60 s)."""
    with Peer(behaviour, delay=0.05) as peer:
        start = time.monotonic()
        with pytest.raises(HTTPFailure) as failure:
            request(
                Endpoint(peer.url, timeout_s=60.0), "POST", "/ingest", b"profile", {},
                deadline=lambda: start + 0.5,
            )  # fmt: skip
    assert failure.value.status == 0 and failure.value.retryable
    assert failure.value.reason == "no complete answer in the time a request has"


def test_a_request_with_a_deadline_still_gets_a_late_answer() -> None:
    with Peer("late", delay=0.3) as peer:
        start = time.monotonic()
        got = request(
            Endpoint(peer.url, timeout_s=60.0), "POST", "/ingest", b"p", {},
            deadline=lambda: start + 60.0,
        )  # fmt: skip
        assert got == b"" and peer.connections == 1


def test_close_returns_by_its_deadline_and_spools_what_was_in_flight(tmp_path: Path) -> None:
    """The delivery thread is in a request (a 60 s socket timeout) to a server that never
    answers: close() returns by its deadline, abandoning the request (the warning names the
    deadline, not the socket timeout), and the profile in flight is in the spool with the
    others, oldest first, for the next process."""
    warnings: list[str] = []
    with Peer("silent") as peer:
        d = Delivery(Endpoint(peer.url, timeout_s=60.0), tmp_path / "spool", warn=warnings.append)
        d.submit(upload(0))
        wait_until(lambda: peer.connections >= 1)  # upload 0 is in flight
        d.submit(upload(1))
        d.submit(upload(2))
        stats = d.close(0.5)
        assert d._thread.is_alive()  # still in its request: abandoned, not waited for
    assert (stats.delivered, stats.spooled, stats.dropped) == (0, 3, 0)
    again = Spool(tmp_path / "spool", 1 << 20)
    names = []
    while (head := again.oldest()) is not None:
        names.append(head[1].params["name"])
        again.done(head[0])
    assert names == ["svc{n=0}", "svc{n=1}", "svc{n=2}"]
    assert len(warnings) == 1 and "no answer within the 0.5 s given at exit" in warnings[0]
    assert "3 left in the spool" in warnings[0]


def test_profiles_waiting_in_memory_are_bounded(tmp_path: Path) -> None:
    """While the thread is stuck in a request, at most `queue_cap` profiles wait in memory;
    beyond, the oldest of them is dropped and counted."""
    with Peer("silent") as peer:
        d = Delivery(Endpoint(peer.url), tmp_path / "spool", queue_cap=4, warn=lambda _: None)
        d.submit(upload(0))
        wait_until(lambda: peer.connections >= 1)
        for i in range(1, 10):
            d.submit(upload(i))
        stats = d.close(0.3)
    assert (stats.spooled, stats.dropped) == (5, 5)
    kept = sorted(Upload.from_bytes(p.read_bytes()).params["name"]
                  for p in (tmp_path / "spool").iterdir())  # fmt: skip
    assert kept == [f"svc{{n={i}}}" for i in (0, 6, 7, 8, 9)]


# -- a spool that cannot be written -------------------------------------------------------------


def test_a_spool_write_that_fails_leaves_nothing(tmp_path: Path) -> None:
    """A write cut short (here by the file size limit: EFBIG after 64 bytes, as ENOSPC on a
    full disk) leaves no partial file and says why; the next write, once it can succeed,
    does."""
    spool = Spool(tmp_path, 1 << 20)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, hard))
    try:
        stored = spool.put(upload(1))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert not stored and len(spool) == 0
    assert spool.error is not None and spool.error.errno == errno.EFBIG and not spool.full
    assert list(tmp_path.iterdir()) == []
    assert spool.put(upload(2)) and spool.error is None and len(spool) == 1


def test_a_spool_directory_that_goes_and_comes_back(tmp_path: Path) -> None:
    where = tmp_path / "spool"
    spool = Spool(where, 1 << 20)
    where.rmdir()
    where.write_text("not a directory")
    assert not spool.put(upload(1)) and spool.error is not None
    where.unlink()
    assert spool.put(upload(2)) and len(spool) == 1  # made again, at the next write


def test_adopting_removes_partial_files_of_dead_processes(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    pid = int(dead.stdout)
    partial = tmp_path / f".{1:020d}-{pid}-000001.p{pid}.tmp"
    partial.write_bytes(b"half a prof")
    live = tmp_path / f".{2:020d}-1-000001.p1.tmp"  # pid 1 is alive: it may be writing
    live.write_bytes(b"being written")
    Spool(tmp_path, 1 << 20)
    assert not partial.exists() and live.exists()


def test_files_named_with_our_own_pid_are_an_earlier_process_s(tmp_path: Path) -> None:
    """A container's program has the same PID every time: what a crashed run of it left is
    adopted by the next, although a process with that PID (itself) is alive."""
    me = os.getpid()
    (tmp_path / f"{1:020d}-{me}-000001.p{me}").write_bytes(upload(1).to_bytes())
    (tmp_path / f".{2:020d}-{me}-000002.p{me}.tmp").write_bytes(b"half")
    spool = Spool(tmp_path, 1 << 20)
    head = spool.oldest()
    assert len(spool) == 1 and head is not None and head[1] == upload(1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{1:020d}-{me}-000001.p{me}"]


def test_delivery_goes_on_when_the_spool_cannot_be_written(tmp_path: Path) -> None:
    """The spool's path is a file: while the server fails, profiles wait in memory (one
    warning); the thread goes on, and delivers them, in order, once the server answers."""
    (tmp_path / "spool").write_text("in the way")
    warnings: list[str] = []
    with Peer("status", status=500) as peer:
        d = Delivery(
            Endpoint(peer.url), tmp_path / "spool", warn=warnings.append, backoff_s=(0.05, 0.1)
        )
        for i in range(3):
            d.submit(upload(i))
        wait_until(lambda: peer.connections >= 3)  # retried, and refused, again and again
        peer.behaviour = "ok"
        for i in range(3, 5):
            d.submit(upload(i))
        wait_until(lambda: len(peer.received) == 5)
        stats = d.close(1.0)
        received = [q["name"] for q, _ in peer.received]
    assert received == [f"svc{{n={i}}}" for i in range(5)]
    assert (stats.delivered, stats.spooled, stats.dropped) == (5, 0, 0)
    assert [w.split(" (")[0] for w in warnings] == [
        f"leadline: cannot push profiles to {peer.url}",
        f"leadline: cannot write to the spool {tmp_path / 'spool'}",
        f"leadline: {peer.url} is reachable again; delivering",
    ], warnings


def test_without_a_spool_memory_keeps_the_latest(tmp_path: Path) -> None:
    """No spool and no server: the latest `queue_cap` profiles wait in memory, the older are
    dropped and counted; what waits is lost at exit, counted too."""
    (tmp_path / "spool").write_text("in the way")
    with Peer("status", status=500) as peer:
        d = Delivery(
            Endpoint(peer.url), tmp_path / "spool", queue_cap=2, warn=lambda _: None,
            backoff_s=(0.05, 0.1),
        )  # fmt: skip
        for i in range(5):
            d.submit(upload(i))
        wait_until(lambda: peer.connections >= 3)
        peer.behaviour = "ok"
        wait_until(lambda: len(peer.received) == 2)
        assert [q["name"] for q, _ in peer.received] == ["svc{n=3}", "svc{n=4}"]
        assert d.stats.dropped == 3
        peer.behaviour = "status"
        d.submit(upload(5))
        wait_until(lambda: peer.connections >= 5)
        stats = d.close(0.5)
    assert (stats.delivered, stats.spooled, stats.dropped) == (2, 0, 4)


# -- an agent that cannot start ------------------------------------------------------------------


def test_an_agent_whose_start_failed_is_not_kept(tmp_path: Path) -> None:
    with leadline.profile(tmp_path / "p.lead"):
        with pytest.raises(LeadlineError, match="another leadline profile is already running"):
            leadline.start_agent("http://127.0.0.1:9", service="x", spool_dir=tmp_path / "s")
    assert agent_module._agent is None
    assert leadline.stop_agent() is None
    never = Agent(AgentConfig(url="http://127.0.0.1:9", service="x", spool_dir=tmp_path / "s"))
    assert never.stop() is None  # nothing to stop, nothing raised


def test_the_start_up_hook_runs_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LEADLINE_PUSH", "http://127.0.0.1:9")
    monkeypatch.setenv("LEADLINE_PUSH_INTERVAL", "soon")
    monkeypatch.setattr(agent_module, "_autostarted", False)
    agent_module.autostart()
    agent_module.autostart()  # site-packages read twice, as a 3.11 venv does
    assert capsys.readouterr().err == (
        "leadline: the profiling agent did not start: "
        "LEADLINE_PUSH_INTERVAL='soon' is not a number\n"
    )


def test_release_at_exit_is_bounded_in_time(tmp_path: Path) -> None:
    """At exit the spool's files are renamed for the next process only while close() has time:
    those left with this process's name are adopted all the same."""
    spool = Spool(tmp_path, 1 << 20)
    for i in range(5):
        spool.put(upload(i))
    spool.release(until=time.monotonic())  # no time left: nothing renamed
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 5 and all(n.endswith(f".p{os.getpid()}") for n in names)
    again = Spool(tmp_path, 1 << 20)
    assert len(again) == 5
    again.release()
    assert all(p.name.endswith(".upload") for p in tmp_path.iterdir())


def test_a_query_is_asked_again_while_the_server_says_try_again() -> None:
    """A Pyroscope server that had just restarted answered a query with HTTP 500 ("canceled:
    stream error", CI's fleet stage): a 5xx or 429 is asked again, after 0.5, 1 and 2 s; a 4xx
    other than 429 is the answer at once, and so is the fourth failure."""
    from leadline.fleet.pyroscope import QUERY_RETRY_WAITS_S, select_merge_profile

    assert QUERY_RETRY_WAITS_S == (0.5, 1.0, 2.0)
    canceled = (500, b'{"code":"unknown","message":"canceled: stream error"}')
    httpd = _Ingest([canceled, (429, b"slow down")], ok=b"merged")
    try:
        port = httpd.server.server_address[1]
        q = parse_fleet_url(f"pyroscope://127.0.0.1:{port}/svc?from=now-10m")
        t = time.monotonic()
        assert select_merge_profile(q) == b"merged"
        assert httpd.seen == 3 and 1.4 < time.monotonic() - t < 10
        httpd.answers = [(400, b"bad selector")]
        with pytest.raises(LeadlineError, match=r"the query failed \(HTTP 400 .*bad selector"):
            select_merge_profile(q)
        assert httpd.seen == 4
        httpd.answers = [canceled] * 4
        with pytest.raises(LeadlineError, match=r"HTTP 500 .*canceled: stream error"):
            select_merge_profile(q)
        assert httpd.seen == 8
    finally:
        httpd.close()
