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
import contextlib
import http.client
import json
import os
import queue
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
    def retryable(self) -> bool:
        """Worth sending again later: no answer, a server error, credentials (which may be
        fixed), too early or too many, or a server that is still starting.  Other 4xx answers
        mean the profile itself was refused."""
        if self.status == 0 or self.status >= 500 or self.status in (401, 403, 408, 425, 429):
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
) -> bytes:
    """One HTTP(S) request to the endpoint; the answer's body, or HTTPFailure."""
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
    conn: http.client.HTTPConnection
    try:
        if parts.scheme == "https":
            context = ssl.create_default_context(cafile=endpoint.ca_file)
            conn = http.client.HTTPSConnection(
                parts.hostname or "", parts.port, timeout=endpoint.timeout_s, context=context
            )
        else:
            conn = http.client.HTTPConnection(
                parts.hostname or "", parts.port, timeout=endpoint.timeout_s
            )
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
            why = f"no answer within {endpoint.timeout_s:g} s"
        raise HTTPFailure(0, why) from None
    if not 200 <= resp.status < 300:
        text = data[:200].decode("utf-8", "replace").strip().replace("\n", " ")
        raise HTTPFailure(resp.status, f"HTTP {resp.status} {resp.reason}: {text}".rstrip(": "))
    return data


class Spool:
    """Profiles waiting on disk, oldest first, within `cap_bytes`."""

    SUFFIX_FREE = ".upload"

    def __init__(self, directory: Path, cap_bytes: int) -> None:
        self.dir = directory
        self.cap = cap_bytes
        self.pid = os.getpid()
        self.own = f".p{self.pid}"
        self.dropped = 0
        self._n = 0
        self.dir.mkdir(parents=True, exist_ok=True)
        self._files: list[tuple[str, int]] = []  # (name, size), oldest first
        self.adopt()

    def adopt(self) -> None:
        """Take over unowned files and those of processes that are gone."""
        for entry in os.scandir(self.dir):
            name = entry.name
            base, dot, owner = name.rpartition(".")
            if not dot:
                continue
            if name.endswith(self.SUFFIX_FREE) or (
                owner.startswith("p") and owner[1:].isdigit() and not _alive(int(owner[1:]))
            ):
                new = f"{base}{self.own}"
                with contextlib.suppress(OSError):  # another process took it first
                    os.rename(self.dir / name, self.dir / new)
                    self._files.append((new, (self.dir / new).stat().st_size))
        self._files.sort()

    def __len__(self) -> int:
        return len(self._files)

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self._files)

    def put(self, upload: Upload) -> None:
        data = upload.to_bytes()
        while self._files and self.bytes + len(data) > self.cap:
            self._remove(self._files[0][0])
            self.dropped += 1
        if len(data) > self.cap:
            self.dropped += 1
            return
        self._n += 1
        name = f"{upload.created_ns:020d}-{self.pid}-{self._n:06d}{self.own}"
        tmp = self.dir / f".{name}.tmp"
        tmp.write_bytes(data)
        os.rename(tmp, self.dir / name)
        self._files.append((name, len(data)))
        self._files.sort()

    def oldest(self) -> tuple[str, Upload] | None:
        while self._files:
            name = self._files[0][0]
            try:
                return name, Upload.from_bytes((self.dir / name).read_bytes())
            except (OSError, ValueError, KeyError):
                self._remove(name)  # unreadable: nothing to deliver
        return None

    def _remove(self, name: str) -> None:
        self._files = [(n, s) for n, s in self._files if n != name]
        with contextlib.suppress(OSError):
            os.unlink(self.dir / name)

    def done(self, name: str) -> None:
        self._remove(name)

    def release(self) -> None:
        """Leave the files to whoever delivers next (this process is exiting)."""
        for name, _ in self._files:
            base = name[: -len(self.own)]
            with contextlib.suppress(OSError):
                os.rename(self.dir / name, self.dir / f"{base}{self.SUFFIX_FREE}")
        self._files = []


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
    dropped: int = 0  # profiles lost: beyond the spool's cap, or refused as malformed
    spooled: int = 0  # profiles in the spool now
    last_error: str | None = None


class Delivery:
    """Sends uploads in order from a background thread; see the module's documentation."""

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
        self._queue: queue.Queue[Upload] = queue.Queue(maxsize=queue_cap)
        self._overflow: list[Upload] = []  # the queue was full: spooled by the thread
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._deadline = float("inf")
        self._backoff = backoff_s
        self._delay = 0.0
        self._retry_at = 0.0
        self._warn = warn or _stderr
        self._warned: set[int] = set()
        self._down = False
        self._thread = threading.Thread(target=self._run, name="leadline-delivery", daemon=True)
        self._thread.start()

    # -- producer side -------------------------------------------------------
    def submit(self, upload: Upload) -> None:
        """Queue a profile; never blocks, never raises."""
        try:
            self._queue.put_nowait(upload)
        except queue.Full:
            with self._lock:
                self._overflow.append(upload)
        self._wake.set()

    def close(self, deadline_s: float = 3.0) -> DeliveryStats:
        """Deliver what can be within `deadline_s`, spool the rest, stop the thread.  When the
        server is already known to be down, everything is spooled at once, without waiting."""
        self._deadline = time.monotonic() + deadline_s
        self._stopping = True
        self._wake.set()
        self._thread.join(deadline_s + self.endpoint.timeout_s + 1.0)
        return self.stats

    # -- the thread ----------------------------------------------------------
    def _next_new(self) -> Upload | None:
        with self._lock:
            if self._overflow:
                return self._overflow.pop(0)
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as e:  # never let the thread die silently with profiles in memory
            self._warn(f"leadline: profile delivery stopped: {type(e).__name__}: {e}")
        finally:
            self._spool_everything()  # counts what stays in the spool
            self.spool.release()

    def _loop(self) -> None:
        while True:
            now = time.monotonic()
            if self._stopping and now >= self._deadline:
                return
            waiting = now < self._retry_at
            # Oldest first: once anything is spooled, newer profiles join the spool's end.
            if len(self.spool) or waiting:
                new = self._next_new()
                while new is not None:
                    self.spool.put(new)
                    new = self._next_new()
                self._sync_stats()
            if waiting:
                if self._stopping:
                    return  # the server is down: the program does not wait for it at exit
                self._wake.wait(max(self._retry_at - now, 0.0))
                self._wake.clear()
                continue
            head = self.spool.oldest()
            if head is not None:
                name, upload = head
                if self._send(upload):
                    self.spool.done(name)
                self._sync_stats()
                continue
            upload_new = self._next_new()
            if upload_new is not None:
                if not self._send(upload_new):
                    self.spool.put(upload_new)
                self._sync_stats()
                continue
            if self._stopping:
                return
            self._wake.wait(1.0)
            self._wake.clear()

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
            )
        except HTTPFailure as e:
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

    def _spool_everything(self) -> None:
        new = self._next_new()
        while new is not None:
            self.spool.put(new)
            new = self._next_new()
        self._sync_stats()

    def _sync_stats(self) -> None:
        self.stats.spooled = len(self.spool)
        self.stats.dropped = max(self.stats.dropped, 0) + self.spool.dropped
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
