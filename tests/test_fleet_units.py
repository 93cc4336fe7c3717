"""The fleet path's parts without a server: the disk spool, delivery when nothing answers, the
Pyroscope names and URLs, the agent's configuration, and the live capture stream.  The
end-to-end tests against a real Pyroscope server are in fleet/ (`make test-fleet`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import leadline
from leadline.analyse.samples import load_profile
from leadline.capture.foreign import read_pprof
from leadline.capture.reader import Capture, CaptureStream
from leadline.errors import LeadlineError
from leadline.fleet.agent import AgentConfig
from leadline.fleet.delivery import Delivery, Endpoint, Spool, Upload, safe_url
from leadline.fleet.pyroscope import app_name, ingest_params, parse_fleet_url, parse_time
from leadline.render.encode import to_pprof


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
    """A local HTTP server that answers POSTs with the statuses given, then 200, and records
    the `name` of each profile it accepted."""

    def __init__(self, answers: list[tuple[int, bytes]]) -> None:
        import http.server
        import threading
        import urllib.parse

        self.answers = list(answers)
        self.accepted: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status, body = outer.answers.pop(0) if outer.answers else (200, b"")
                if status == 200:
                    query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
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
        t = time.thread_time()  # CPU time: a busy machine's queueing adds no samples in cpu mode
        while time.thread_time() - t < 0.3:
            sum(i * i for i in range(1000))
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
        sum(i * i for i in range(200_000))
    with Capture(path) as cap:
        p = load_profile(cap)
    raw = to_pprof(p, ("samples", "cpu"), ())
    assert b"thread" not in __import__("gzip").decompress(raw)
    prof = read_pprof("x.pb.gz", raw, "cpu")
    assert prof.unit == "nanoseconds" and prof.stacks
    os.environ.pop("LEADLINE_PUSH", None)
