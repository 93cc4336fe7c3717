"""Delivery of the agent's profiles to Grafana Pyroscope: a bounded queue, a disk spool, retries.

The agent (:mod:`leadline.fleet.agent`) hands each finished profile to :meth:`Delivery.submit`,
which never blocks and never raises. A background thread POSTs profiles in the order they were made
to Pyroscope's ``/ingest``. When the server cannot be reached, times out, answers 5xx or 429, or
says it is not ready (a Pyroscope that is starting answers 422 "empty ring"), profiles go to a spool
directory on disk, bounded by a size cap, and are retried with exponential backoff and full jitter
until the server is back; then the spool is delivered oldest first before anything newer. Nothing
within the cap is lost; beyond it the oldest profiles are dropped and counted. At exit, whatever
could not be sent within a short deadline stays in the spool, and the next agent that uses the same
spool directory delivers it.

Spool files are owned by one process at a time: a process names its files ``*.p<PID>`` and, on
start, adopts the unowned ones (``*.upload``, left by a process that exited cleanly) and those of
processes that no longer exist (a crash).  Delivery is at-least-once: a request whose answer was
lost is sent again.

Credentials (a bearer token, a password in the URL) are sent, never printed: messages name the
server by scheme, host and port only.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import errno
import functools
import http.client
import io
import json
import os
import random
import re
import socket
import ssl
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__

USER_AGENT = f"leadline/{__version__}"


@dataclass(frozen=True)
class Upload:
    """One profile for Pyroscope's ``/ingest``: its query parameters and the pprof body."""

    params: dict[str, str]
    body: bytes
    created_ns: int = field(default_factory=time.time_ns)

    def to_bytes(self) -> bytes:
        head = json.dumps({"params": self.params, "created_ns": self.created_ns})
        return head.encode() + b"\n" + self.body

    @staticmethod
    def from_bytes(raw: bytes) -> Upload:
        head, _, body = raw.partition(b"\n")
        meta = json.loads(head)
        params = {str(k): str(v) for k, v in dict(meta["params"]).items()}
        return Upload(params, body, int(meta["created_ns"]))


@dataclass(frozen=True)
class Endpoint:
    """Where and how to push: the server's base URL and its credentials."""

    url: str  # http(s)://[user:password@]host:port[/prefix]
    token: str | None = None  # sent as "Authorization: Bearer"
    ca_file: str | None = None  # extra CA certificates for HTTPS
    tenant: str | None = None  # X-Scope-OrgID, for a multi-tenant server
    timeout_s: float = 10.0

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http:// or https:// URL: {safe_url(self.url)}")

    @property
    def shown(self) -> str:
        return safe_url(self.url)


def safe_url(url: str) -> str:
    """`url` without its credentials or query, fit for a message."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<an unreadable URL>"
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}{port}{parts.path.rstrip('/')}"


class HTTPFailure(Exception):
    """A request that did not succeed: `status` is the HTTP status, or 0 when no answer came."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason

    @property
    def try_again(self) -> bool:
        """The server answered that it cannot serve this now: a server error or too many
        requests (5xx, 429)."""
        return self.status >= 500 or self.status == 429

    @property
    def retryable(self) -> bool:
        """Worth sending again later: no answer, a server error, credentials (which may be
        fixed), too early or too many, or a server that is still starting.  Other 4xx answers
        mean the profile itself was refused."""
        if self.status == 0 or self.try_again or self.status in (401, 403, 408, 425):
            return True
        return bool(_NOT_READY.search(self.reason))


# What a Pyroscope (or another Cortex-style) distributor says with a 4xx status while its
# ingesters are still joining the ring after a start: "empty ring", "too many unhealthy
# instances in the ring".  The profile was fine; the server was not ready for it.
_NOT_READY = re.compile(r"\bempty ring\b|unhealthy instances|\bin the ring\b|not ready", re.I)


def request(
    endpoint: Endpoint,
    method: str,
    path: str,
    body: bytes,
    headers: dict[str, str],
    query: dict[str, str] | None = None,
    deadline: Callable[[], float] | None = None,
) -> bytes:
    """One HTTP(S) request to the endpoint; the answer's body, or HTTPFailure.

    Each socket operation waits at most ``endpoint.timeout_s``.  With `deadline` (a function
    giving a ``time.monotonic()`` instant, asked again before every operation so that it may
    move nearer) the whole request ends by then too: a server that trickles its answer a byte at
    a time, or sends half of it and stops, would otherwise hold it for ever."""
    parts = urllib.parse.urlsplit(endpoint.url)
    target = parts.path.rstrip("/") + path
    if query:
        target += "?" + urllib.parse.urlencode(query)
    all_headers = {"User-Agent": USER_AGENT, **headers}
    if endpoint.token:
        all_headers["Authorization"] = f"Bearer {endpoint.token}"
    elif parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        pair = base64.b64encode(f"{user}:{password}".encode()).decode()
        all_headers["Authorization"] = f"Basic {pair}"
    if endpoint.tenant:
        all_headers["X-Scope-OrgID"] = endpoint.tenant
    clock = _Clock(endpoint.timeout_s, deadline)
    conn: http.client.HTTPConnection
    try:
        if parts.scheme == "https":
            conn = _HTTPS(parts.hostname or "", parts.port, clock, _tls(endpoint.ca_file))
        else:
            conn = _HTTP(parts.hostname or "", parts.port, clock)
        try:
            conn.request(method, target, body=body, headers=all_headers)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
    except ssl.SSLError as e:
        raise HTTPFailure(0, f"TLS failed ({e.reason or e})") from None
    except (OSError, http.client.HTTPException) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e) or type(e).__name__
        if isinstance(e, socket.timeout | TimeoutError):
            why = clock.why()
        raise HTTPFailure(0, why) from None
    if not 200 <= resp.status < 300:
        text = data[:200].decode("utf-8", "replace").strip().replace("\n", " ")
        raise HTTPFailure(resp.status, f"HTTP {resp.status} {resp.reason}: {text}".rstrip(": "))
    return data


@functools.lru_cache(maxsize=4)
def _tls(ca_file: str | None) -> ssl.SSLContext:
    """One TLS context per CA file: loading the system's certificates takes milliseconds and
    memory, which a request every few seconds should not pay again and again."""
    return ssl.create_default_context(cafile=ca_file)


class _Clock:
    """The time a request has left: each socket operation gets the per-operation timeout or
    what remains of the request's deadline, whichever is shorter."""

    def __init__(self, op_timeout_s: float, deadline: Callable[[], float] | None) -> None:
        self.op_timeout_s = op_timeout_s
        self.deadline = deadline
        self.cut = False  # the last operation was shortened by the deadline

    def next_timeout(self) -> float:
        if self.deadline is None:
            return self.op_timeout_s
        left = self.deadline() - time.monotonic()
        if left <= 0:
            self.cut = True
            raise TimeoutError("the request's time is up")
        self.cut = left < self.op_timeout_s
        return min(self.op_timeout_s, left)

    def why(self) -> str:
        if self.cut:
            return "no complete answer in the time a request has"
        return f"no answer within {self.op_timeout_s:g} s"


class _TimedReader(io.RawIOBase):
    """The socket as the response reads it: its timeout set again before every read.  It
    reads through the socket's own file object, which keeps the socket open until the
    response is read even when the connection is closed first (an HTTP/1.0 answer)."""

    def __init__(self, sock: socket.socket, clock: _Clock) -> None:
        super().__init__()
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)
        self._clock = clock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        self._sock.settimeout(self._clock.next_timeout())
        return self._raw.readinto(buffer)

    def close(self) -> None:
        self._raw.close()
        super().close()


class _TimedSocket:
    """What ``http.client.HTTPResponse`` is given instead of the socket: it only calls
    ``makefile("rb")``, and gets a reader that keeps to the request's deadline."""

    def __init__(self, sock: socket.socket, clock: _Clock) -> None:
        self._sock = sock
        self._clock = clock

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_TimedReader(self._sock, self._clock))


class _Timed(http.client.HTTPConnection):
    """An HTTP connection whose every connect, send and read keeps to a `_Clock`.  (A TLS
    handshake, as the standard library does it, waits at most the socket's timeout in all.)"""

    _clock: _Clock

    def connect(self) -> None:
        self.timeout = self._clock.next_timeout()
        super().connect()

    def send(self, data: Any) -> None:
        if self.sock is not None:
            self.sock.settimeout(self._clock.next_timeout())
        super().send(data)

    def _timed_response(self, sock: socket.socket, *args: Any, **kwargs: Any) -> Any:
        return http.client.HTTPResponse(_TimedSocket(sock, self._clock), *args, **kwargs)  # type: ignore[arg-type]


class _HTTP(_Timed):
    def __init__(self, host: str, port: int | None, clock: _Clock) -> None:
        super().__init__(host, port, timeout=clock.op_timeout_s)
        self._clock = clock
        self.response_class = self._timed_response  # type: ignore[assignment]


class _HTTPS(_Timed, http.client.HTTPSConnection):
    def __init__(self, host: str, port: int | None, clock: _Clock, context: ssl.SSLContext) -> None:
        http.client.HTTPSConnection.__init__(
            self, host, port, timeout=clock.op_timeout_s, context=context
        )
        self._clock = clock
        self.response_class = self._timed_response  # type: ignore[assignment]


class Spool:
    """Profiles waiting on disk, oldest first, within `cap_bytes`.

    Not thread-safe: :class:`Delivery` holds its lock around every call.  A write that fails
    (a full disk, a read-only or vanished directory) leaves no partial file, and `error` says
    why.  On a full disk the oldest file gives way first, as beyond the cap, and the write is
    tried once more."""

    SUFFIX_FREE = ".upload"

    def __init__(self, directory: Path, cap_bytes: int) -> None:
        self.dir = directory
        self.cap = cap_bytes
        self.pid = os.getpid()
        self.own = f".p{self.pid}"
        self.dropped = 0
        self.error: OSError | None = None  # why the last put's first write failed, if it did
        self._n = 0
        self._bytes = 0
        self._files: list[tuple[str, int]] = []  # (name, size), oldest first
        with contextlib.suppress(OSError):  # an unusable directory shows when a write fails
            self.dir.mkdir(parents=True, exist_ok=True)
            self.adopt()

    def adopt(self) -> None:
        """Take over unowned files and those of processes that are gone; remove the partial
        files of processes that died while writing.  Files named with this process's own PID
        are an earlier process's that had the same PID (a container's program is often PID 1
        every time), as this spool has written nothing yet."""
        for entry in os.scandir(self.dir):
            name = entry.name
            base, dot, owner = name.rpartition(".")
            if not dot:
                continue
            if owner == "tmp" and name.startswith("."):
                pid = base.rpartition(".p")[2]
                if pid.isdigit() and self._gone(int(pid)):
                    with contextlib.suppress(OSError):
                        os.unlink(self.dir / name)
            elif name.endswith(self.SUFFIX_FREE) or (
                owner.startswith("p") and owner[1:].isdigit() and self._gone(int(owner[1:]))
            ):
                new = f"{base}{self.own}"
                with contextlib.suppress(OSError):  # another process took it first
                    os.rename(self.dir / name, self.dir / new)
                    size = (self.dir / new).stat().st_size
                    self._files.append((new, size))
                    self._bytes += size
        self._files.sort()

    def _gone(self, pid: int) -> bool:
        return pid == self.pid or not _alive(pid)

    def __len__(self) -> int:
        return len(self._files)

    @property
    def size(self) -> int:
        """Bytes in the spool's files."""
        return self._bytes

    def put(self, upload: Upload) -> bool:
        """Keep `upload` as the newest file.  False if it could not be: larger than the cap
        (counted in `dropped`), or not written (`error` says why; the caller decides)."""
        data = upload.to_bytes()
        if len(data) > self.cap:
            self.dropped += 1
            return False
        while self._files and self._bytes + len(data) > self.cap:
            self._drop_oldest()
        self._n += 1
        name = f"{upload.created_ns:020d}-{self.pid}-{self._n:06d}{self.own}"
        self.error = None
        try:
            self._write(name, data)
        except OSError as e:
            self.error = e
            if not (self.full and self._files):
                return False
            self._drop_oldest()  # a full disk: make room as the cap would
            try:
                self._write(name, data)
            except OSError:
                return False
        self._files.append((name, len(data)))
        self._bytes += len(data)
        if len(self._files) > 1 and self._files[-2][0] > name:
            self._files.sort()  # an adopted file made after this one
        return True

    @property
    def full(self) -> bool:
        """The last write failed for want of space."""
        return self.error is not None and self.error.errno in (errno.ENOSPC, errno.EDQUOT)

    def _write(self, name: str, data: bytes) -> None:
        """Write `data` as `name`, whole or not at all."""
        self.dir.mkdir(parents=True, exist_ok=True)  # it may have been removed since
        tmp = self.dir / f".{name}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.rename(tmp, self.dir / name)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def oldest(self) -> tuple[str, Upload] | None:
        while self._files:
            name = self._files[0][0]
            try:
                return name, Upload.from_bytes((self.dir / name).read_bytes())
            except (OSError, ValueError, KeyError):
                self._remove(name)  # unreadable: nothing to deliver
        return None

    def _drop_oldest(self) -> None:
        self._remove(self._files[0][0])
        self.dropped += 1

    def _remove(self, name: str) -> None:
        for i, (n, size) in enumerate(self._files):
            if n == name:
                del self._files[i]
                self._bytes -= size
                break
        with contextlib.suppress(OSError):
            os.unlink(self.dir / name)

    def done(self, name: str) -> None:
        self._remove(name)

    def release(self, until: float = float("inf")) -> None:
        """Leave the files to whoever delivers next (this process is exiting), renaming them
        until the `time.monotonic()` instant `until`: a full spool is thousands of files, and
        the exit must not wait for them.  Those left with this process's name are adopted as
        soon as it is gone."""
        for name, _ in self._files:
            if time.monotonic() >= until:
                break
            base = name[: -len(self.own)]
            with contextlib.suppress(OSError):
                os.rename(self.dir / name, self.dir / f"{base}{self.SUFFIX_FREE}")
        self._files = []
        self._bytes = 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class DeliveryStats:
    delivered: int = 0
    delivered_bytes: int = 0
    failures: int = 0  # requests that failed (each retry counts)
    dropped: int = 0  # profiles lost: beyond a cap, unwritable spool, or refused as malformed
    spooled: int = 0  # profiles in the spool now
    last_error: str | None = None


# How long before close()'s deadline the delivery thread stops sending, so that it has the time
# to spool what is left itself and close() returns by its deadline.  A thread that does not
# finish by then (blocked in a socket operation that began before close()) is left behind, and
# close() spools what it held.
CLOSE_GRACE_S = 0.1
# How long close() waits for the spool's lock when it takes over: the thread holds it only for
# a file operation, unless the disk itself hangs.
TAKEOVER_WAIT_S = 1.0


class Delivery:
    """Sends uploads in order from a background thread; see the module's documentation.

    Two locks: `_lock` guards what is in memory (the pending profiles, the one being sent) and
    is held only for a moment, so :meth:`submit` never waits on a disk or a network; the spool's
    lock is held around every file operation.  Whoever holds both takes the spool's first."""

    def __init__(
        self,
        endpoint: Endpoint,
        spool_dir: Path,
        spool_cap_bytes: int = 64 << 20,
        queue_cap: int = 32,
        backoff_s: tuple[float, float] = (0.5, 30.0),
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.spool = Spool(spool_dir, spool_cap_bytes)
        self.stats = DeliveryStats()
        self._pending: collections.deque[Upload] = collections.deque()
        self._queue_cap = queue_cap
        self._inflight: Upload | None = None  # being sent, and in memory only
        self._lost = 0  # dropped from memory, or not written to the spool; not yet in stats
        self._lock = threading.Lock()
        self._spool_lock = threading.Lock()
        self._abandoned = False  # close() took over from a thread stuck in a request
        self._wake = threading.Event()
        self._stopping = False
        self._deadline = float("inf")  # no request after this (close's end, less a grace)
        self._end = float("inf")  # close() returns by then
        self._backoff = backoff_s
        self._delay = 0.0
        self._retry_at = 0.0
        self._warn = warn or _stderr
        self._warned: set[int] = set()
        self._down = False
        self._spool_broken = False  # the last write to the spool failed
        self._spool_warned = False  # since the last write that did not fail
        self._thread = threading.Thread(target=self._run, name="leadline-delivery", daemon=True)
        self._thread.start()

    @property
    def native_id(self) -> int | None:
        """The kernel's id of the thread that delivers (its samples are not the program's)."""
        return self._thread.native_id

    # -- producer side -------------------------------------------------------
    def submit(self, upload: Upload) -> None:
        """Queue a profile; never blocks, never raises.  Beyond `queue_cap` profiles waiting in
        memory (the thread is stuck in a request), the oldest is dropped and counted."""
        with self._lock:
            if len(self._pending) >= self._queue_cap:
                self._pending.popleft()
                self._lost += 1
            self._pending.append(upload)
        self._wake.set()

    def close(self, deadline_s: float = 3.0) -> DeliveryStats:
        """Deliver what can be within `deadline_s`, spool the rest, stop.  When the server is
        already known to be down, everything is spooled at once, without waiting.  Returns by
        `deadline_s` (and the time to write what is left) whatever the server does: a thread
        still waiting on it then is left behind (a daemon, it ends with the process) and what
        it held is spooled here."""
        deadline_s = max(deadline_s, 0.0)
        end = self._end = time.monotonic() + deadline_s
        self._deadline = end - min(CLOSE_GRACE_S, deadline_s / 2)
        self._stopping = True
        self._wake.set()
        self._thread.join(max(end - time.monotonic(), 0.0))
        if self._thread.is_alive():
            self._take_over(deadline_s)
        return self.stats

    def _take_over(self, deadline_s: float) -> None:
        """Spool, from the closing thread, what the delivery thread still holds in memory, and
        leave the spool to the next process; the delivery thread does nothing more."""
        if not self._spool_lock.acquire(timeout=TAKEOVER_WAIT_S):
            with self._lock:  # the disk hangs: what is in memory is lost, and counted
                self._abandoned = True
                lost = len(self._pending) + (self._inflight is not None)
                self._pending.clear()
                self._inflight = None
            if lost:
                self.stats.dropped += lost
                self._warn(
                    f"leadline: the spool {self.spool.dir} does not answer; "
                    f"{lost} profile(s) not delivered are lost"
                )
            return
        try:
            with self._lock:
                if self._abandoned:
                    return
                self._abandoned = True
                left = ([self._inflight] if self._inflight is not None else []) + list(
                    self._pending
                )
                self._pending.clear()
                self._inflight = None
            for upload in sorted(left, key=lambda u: u.created_ns):
                self._put(upload, requeue=False)
            self._sync_stats()
            if not self._down and (left or self.stats.spooled):  # else said already, or nothing
                self._warn(
                    f"leadline: cannot push profiles to {self.endpoint.shown} (no answer within "
                    f"the {deadline_s:g} s given at exit); {self.stats.spooled} left in the spool"
                )
            self.spool.release(until=time.monotonic() + CLOSE_GRACE_S)
        finally:
            self._spool_lock.release()

    # -- the thread ----------------------------------------------------------
    def _next_new(self) -> Upload | None:
        with self._lock:
            return self._pending.popleft() if self._pending else None

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as e:  # never let the thread die silently with profiles in memory
            self._warn(f"leadline: profile delivery stopped: {type(e).__name__}: {e}")
        finally:
            with self._spool_lock:
                if not self._abandoned:
                    with self._lock:
                        self._abandoned = True  # finished: nothing left for close() to do
                    self._spool_pending(requeue=False)
                    self.spool.release(until=self._end)

    def _loop(self) -> None:
        while True:
            self._wake.clear()  # before looking, so that a submit from now on wakes the wait
            now = time.monotonic()
            if self._stopping and now >= self._deadline:
                return
            waiting = now < self._retry_at
            # Oldest first: once anything is spooled, newer profiles join the spool's end.  A
            # spool that cannot be written leaves them in memory, sent when the server answers.
            if (waiting or len(self.spool)) and not self._spool_broken:
                with self._spool_lock:
                    if self._abandoned:
                        return
                    self._spool_pending(requeue=True)
            if waiting:
                if self._stopping:
                    return  # the server is down: the program does not wait for it at exit
                self._wake.wait(max(self._retry_at - now, 0.0))
                continue
            with self._spool_lock:
                if self._abandoned:
                    return
                head = self.spool.oldest()
            if head is not None:
                name, upload = head
                done = self._send(upload)
                with self._spool_lock:
                    if self._abandoned:
                        return  # the file was left for the next process: sent again, maybe
                    if done:
                        self.spool.done(name)
                    self._sync_stats()
                continue
            with self._lock:
                new = self._pending.popleft() if self._pending else None
                self._inflight = new
            if new is not None:
                done = self._send(new)
                with self._spool_lock:
                    with self._lock:
                        if self._abandoned:
                            return  # close() spooled it: sent again, maybe
                        self._inflight = None
                    if not done:
                        self._put(new, requeue=True)
                    self._sync_stats()
                continue
            if self._stopping:
                return
            self._wake.wait(1.0)

    def _request_deadline(self) -> Callable[[], float]:
        """A request gets the per-operation timeout in all, and never outlives close()'s
        deadline, which it reads again before each operation (close may come mid-request)."""
        until = time.monotonic() + self.endpoint.timeout_s
        return lambda: min(until, self._deadline)

    def _send(self, upload: Upload) -> bool:
        """True when the upload is done with (delivered, or refused for good)."""
        try:
            request(
                self.endpoint,
                "POST",
                "/ingest",
                upload.body,
                {"Content-Type": "application/octet-stream"},
                upload.params,
                deadline=self._request_deadline(),
            )
        except HTTPFailure as e:
            if self._abandoned:
                return False  # close() has reported and spooled; the process is ending
            self.stats.failures += 1
            self.stats.last_error = e.reason
            if not e.retryable:
                self.stats.dropped += 1
                self._warn_once(
                    e.status,
                    f"leadline: {self.endpoint.shown} refused a profile ({e.reason}); dropped",
                )
                return True
            if e.status in (401, 403):
                self._warn_once(
                    e.status,
                    f"leadline: {self.endpoint.shown} refused the credentials ({e.reason}); "
                    "check LEADLINE_PUSH_TOKEN or LEADLINE_PUSH_TOKEN_FILE; profiles are kept "
                    "in the spool and retried",
                )
            elif not self._down:
                self._warn(
                    f"leadline: cannot push profiles to {self.endpoint.shown} ({e.reason}); "
                    "spooling them and retrying"
                )
            self._down = True
            low, high = self._backoff
            self._delay = min(high, max(low, self._delay * 2))
            self._retry_at = time.monotonic() + random.uniform(self._delay / 2, self._delay)
            return False
        if self._abandoned:
            return False
        if self._down:
            self._warn(f"leadline: {self.endpoint.shown} is reachable again; delivering")
        self._down = False
        self._delay = 0.0
        self.stats.delivered += 1
        self.stats.delivered_bytes += len(upload.body)
        return True

    def _warn_once(self, key: int, text: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self._warn(text)

    def _put(self, upload: Upload, requeue: bool) -> bool:
        """Spool `upload` (the spool's lock held).  If it cannot be written, it goes back to
        the front of the memory queue (`requeue`: it is sent when the server answers) or is
        lost, and counted.  A write that fails is reported once, until one succeeds again: a
        full disk or a read-only directory fails every write."""
        stored = self.spool.put(upload)
        error = self.spool.error
        self._spool_broken = not stored and error is not None
        if self._spool_broken:
            with self._lock:
                if requeue and len(self._pending) < self._queue_cap:
                    self._pending.appendleft(upload)
                else:
                    self._lost += 1  # the oldest in memory, as beyond the queue's cap
        if error is None:
            self._spool_warned = False
        elif not self._spool_warned:
            self._spool_warned = True
            why = error.strerror or str(error)
            if self.spool.full:
                self._warn(
                    f"leadline: the spool {self.spool.dir} is on a full disk ({why}); its "
                    "oldest profiles give way to new ones, as beyond its cap"
                )
            else:
                self._warn(
                    f"leadline: cannot write to the spool {self.spool.dir} ({why}); profiles "
                    f"not yet delivered wait in memory instead (the latest {self._queue_cap}) "
                    "and are lost if the process ends first"
                )
        return stored

    def _spool_pending(self, requeue: bool) -> None:
        """Move the profiles waiting in memory to the spool (the spool's lock held); with
        `requeue`, stop at the first that cannot be written (it stays in memory with the
        rest), else every one is tried."""
        new = self._next_new()
        while new is not None:
            if not self._put(new, requeue) and requeue and self._spool_broken:
                break
            new = self._next_new()
        self._sync_stats()

    def _sync_stats(self) -> None:
        """Bring `stats` up to date (the spool's lock held, not the memory lock)."""
        with self._lock:
            lost, self._lost = self._lost, 0
        self.stats.spooled = len(self.spool)
        self.stats.dropped += self.spool.dropped + lost
        self.spool.dropped = 0

    def snapshot(self) -> dict[str, Any]:
        s = self.stats
        return {
            "delivered": s.delivered,
            "delivered_bytes": s.delivered_bytes,
            "failures": s.failures,
            "dropped": s.dropped,
            "spooled": s.spooled,
            "last_error": s.last_error,
        }


def _stderr(text: str) -> None:
    with contextlib.suppress(Exception):
        print(text, file=sys.stderr, flush=True)
