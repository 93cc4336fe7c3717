"""Pyroscope stand-ins on 127.0.0.1 that misbehave on purpose, for the agent's tests and its soak
benchmark (bench/agent_soak.py): real TCP servers whose answers to ``POST /ingest`` are chosen.

    with Peer("silent") as peer:       # accepts, reads the request, never answers
        run_the_program(LEADLINE_PUSH=peer.url)

Behaviours (:data:`BEHAVIOURS`):

- ``ok``: answers 200 at once and keeps each profile it got (``peer.received``: query, body);
- ``down``: nothing listens on the port (connections are refused);
- ``status``: answers ``status`` (500 unless told) at once, as a failing server does;
- ``late``: answers 200 after ``delay`` seconds (longer than the agent's timeout);
- ``silent``: accepts the connection, reads the request, never answers;
- ``trickle``: starts a 200 answer and sends it one byte every ``delay`` seconds, forever;
- ``half``: sends the headers and part of the body it announced, then nothing more;
- ``backlog``: listens with a full backlog and never accepts: a connect hangs in SYN.

Every connection is served on its own daemon thread until the client goes away or the peer is
closed; closing the peer closes every connection it holds, so a test leaves nothing open.

:func:`agent_summary` reads the counts of the line ``leadline run --push`` ends with, which the
tests and the benchmark compare with what the peer or the spool got.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import urllib.parse
from types import TracebackType

BEHAVIOURS = ("ok", "down", "status", "late", "silent", "trickle", "half", "backlog")
LOCAL = "127.0.0.1"

# The last line of `leadline run --push` (leadline/commands/run.py).
SUMMARY = re.compile(
    r"leadline: ([\d,]+) samples in (\d+) periods; (\d+) profiles pushed to \S+ "
    r"\(([\d,]+) bytes\), (\d+) spooled, (\d+) dropped"
)
SUMMARY_KEYS = ("samples", "periods", "pushed", "bytes", "spooled", "dropped")


def agent_summary(stderr: str) -> dict[str, int] | None:
    """The counts of the agent's summary line in `stderr`, or None if it has none."""
    m = SUMMARY.search(stderr)
    if m is None:
        return None
    return {k: int(v.replace(",", "")) for k, v in zip(SUMMARY_KEYS, m.groups(), strict=True)}


class Peer:
    def __init__(self, behaviour: str, *, status: int = 500, delay: float = 0.2) -> None:
        if behaviour not in BEHAVIOURS:
            raise ValueError(f"unknown behaviour {behaviour!r}: one of {', '.join(BEHAVIOURS)}")
        self.behaviour = behaviour
        self.status = status
        self.delay = delay
        self.received: list[tuple[dict[str, str], bytes]] = []  # (query, body) of each 200
        self.connections = 0  # accepted so far
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closed = threading.Event()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((LOCAL, 0))
        self.port = int(self._listener.getsockname()[1])
        self._filler: socket.socket | None = None
        if behaviour == "down":
            self._listener.close()  # the port was free a moment ago; nothing listens now
        elif behaviour == "backlog":
            # Linux queues backlog + 1 connections; with that one taken by a connection nobody
            # accepts, every further SYN is dropped and the client's connect waits.
            self._listener.listen(0)
            self._filler = socket.create_connection((LOCAL, self.port), timeout=5)
        else:
            self._listener.listen(64)
            threading.Thread(target=self._accept, name=f"peer-{behaviour}", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://{LOCAL}:{self.port}"

    def __enter__(self) -> Peer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()
        if self._filler is not None:
            self._filler.close()
        with self._lock:
            held = list(self._open)
        for conn in held:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                conn.close()

    # -- serving --------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._open.add(conn)
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                conn.settimeout(60)
                self._answer(conn)
        except OSError:
            pass  # the client gave up, or the peer was closed
        finally:
            with self._lock:
                self._open.discard(conn)

    def _answer(self, conn: socket.socket) -> None:
        while not self._closed.is_set():  # one request after another on the connection
            request = _read_request(conn)
            if request is None:
                return
            target, body = request
            kind = self.behaviour
            if kind == "ok":
                query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(target).query))
                with self._lock:
                    self.received.append((query, body))
                _send(conn, 200, b"")
            elif kind == "status":
                _send(conn, self.status, b"server error\n")
            elif kind == "late":
                if self._closed.wait(self.delay):
                    return
                _send(conn, 200, b"")
            elif kind == "silent":
                while conn.recv(65536):  # until the client hangs up
                    pass
                return
            elif kind == "trickle":
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" * 1000:
                    conn.sendall(bytes([byte]))
                    if self._closed.wait(self.delay):
                        return
                return
            elif kind == "half":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 100)
                while conn.recv(65536):
                    pass
                return


def _read_request(conn: socket.socket) -> tuple[str, bytes] | None:
    """(target, body) of the next request on `conn`, or None when the client hung up."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    target = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else "/"
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return target, body[:length]


def _send(conn: socket.socket, status: int, body: bytes) -> None:
    head = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    conn.sendall(head + body)
