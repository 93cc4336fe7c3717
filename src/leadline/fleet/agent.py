"""The fleet agent: continuous in-process sampling, pushed to Grafana Pyroscope every N seconds.

Started by ``leadline.start_agent(url, service=..., labels={...})``, by ``leadline run --push
URL``, or, for a program that is not modified at all, by the ``LEADLINE_PUSH`` environment
variable (leadline installs a start-up hook that starts the agent in every Python process that
has it set; see docs/fleet.md for every variable).

The sampler is the one of ``leadline run`` (``_native/sampler.c``, CPU mode): a native thread
that never takes the GIL.  It writes its capture into a pipe instead of a file; the agent's
reader thread folds what arrives (:class:`~leadline.capture.reader.CaptureStream`), and at
the end of each period (by the samples' own timestamps, so a period holds what was sampled in
it) turns the period's samples into a pprof with ``render.encode.to_pprof`` and hands it to
:class:`~leadline.fleet.delivery.Delivery`, which sends it, or spools it when the server is away.
Nothing here runs on the program's threads except start and stop.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import itertools
import os
import select
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analyse.model import SampleProfile, Stack
from ..analyse.samples import load_profile
from ..capture.reader import CaptureStream
from ..errors import LeadlineError
from ..record.profiler import ProfileOptions, Profiler
from ..record.recorder import CaptureFile, signals_blocked, thread_names
from ..render.encode import to_pprof
from .delivery import Delivery, Endpoint, Upload, safe_url
from .pyroscope import (
    FLEET_CPU_METRICS,
    check_labels,
    endpoint_from_env,
    ingest_params,
    parse_labels,
)

FLUSH_GRACE_S = 1.5  # the sampler hands a partly filled chunk over within 1 s
ENV_PREFIX = "LEADLINE_"


def default_spool_dir(service: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "leadline" / "spool" / service


@dataclass(frozen=True)
class AgentConfig:
    url: str
    service: str
    labels: dict[str, str] = field(default_factory=dict)  # besides host (and version if given)
    interval_s: float = 10.0
    rate_hz: float = 100.0
    memory: bool = False  # also push an RSS-growth profile
    thread_labels: bool = False  # a `thread` label on every sample
    spool_dir: Path | None = None  # default: ~/.cache/leadline/spool/SERVICE
    spool_cap_mb: float = 64.0
    flush_s: float = 3.0  # at exit, how long to try delivering before spooling the rest
    backoff_max_s: float = 30.0  # the longest wait between retries while the server is away
    endpoint: Endpoint | None = None  # default: from `url` and the environment

    def validate(self) -> None:
        if not 0.5 <= self.interval_s <= 3600:
            raise LeadlineError("the push interval must be between 0.5 and 3600 seconds")
        if not 1 <= self.rate_hz <= 1000:
            raise LeadlineError("the agent's sampling rate must be between 1 and 1000 Hz")
        if not 0.1 <= self.backoff_max_s <= 3600:
            raise LeadlineError("the longest retry wait must be between 0.1 and 3600 seconds")
        if self.spool_cap_mb <= 0:
            raise LeadlineError("the spool cap must be positive")
        if not self.service.strip():
            raise LeadlineError("the service name is empty")
        check_labels(self.labels)

    @staticmethod
    def from_env(environ: dict[str, str] | os._Environ[str] | None = None) -> AgentConfig | None:
        """The configuration the LEADLINE_PUSH* variables give, or None if LEADLINE_PUSH is
        unset.  LeadlineError if a variable is malformed."""
        env = dict(os.environ if environ is None else environ)
        url = env.get("LEADLINE_PUSH", "").strip()
        if not url:
            return None

        def number(name: str, default: float) -> float:
            raw = env.get(ENV_PREFIX + name, "").strip()
            if not raw:
                return default
            try:
                return float(raw)
            except ValueError:
                raise LeadlineError(f"{ENV_PREFIX}{name}={raw!r} is not a number") from None

        labels = parse_labels(env.get("LEADLINE_LABELS", ""))
        if env.get("LEADLINE_VERSION"):
            labels["version"] = env["LEADLINE_VERSION"]
        spool = env.get("LEADLINE_SPOOL", "").strip()
        return AgentConfig(
            url=url,
            service=env.get("LEADLINE_SERVICE", "").strip() or _program_name(),
            labels=labels,
            interval_s=number("PUSH_INTERVAL", 10.0),
            rate_hz=number("PUSH_RATE", 100.0),
            memory=env.get("LEADLINE_PUSH_MEMORY", "") not in ("", "0"),
            thread_labels=env.get("LEADLINE_PUSH_THREADS", "") not in ("", "0"),
            spool_dir=Path(spool) if spool else None,
            spool_cap_mb=number("SPOOL_MAX_MB", 64.0),
            flush_s=number("PUSH_FLUSH", 3.0),
            backoff_max_s=number("PUSH_BACKOFF_MAX", 30.0),
            endpoint=endpoint_from_env(url, env),
        )

    def to_env(self) -> dict[str, str]:
        """The variables that start the same agent in a child process."""
        env = {
            "LEADLINE_PUSH": self.url,
            "LEADLINE_SERVICE": self.service,
            "LEADLINE_LABELS": ",".join(f"{k}={v}" for k, v in sorted(self.labels.items())),
            "LEADLINE_PUSH_INTERVAL": f"{self.interval_s:g}",
            "LEADLINE_PUSH_RATE": f"{self.rate_hz:g}",
            "LEADLINE_PUSH_MEMORY": "1" if self.memory else "0",
            "LEADLINE_PUSH_THREADS": "1" if self.thread_labels else "0",
            "LEADLINE_SPOOL_MAX_MB": f"{self.spool_cap_mb:g}",
            "LEADLINE_PUSH_FLUSH": f"{self.flush_s:g}",
            "LEADLINE_PUSH_BACKOFF_MAX": f"{self.backoff_max_s:g}",
        }
        if self.spool_dir is not None:
            env["LEADLINE_SPOOL"] = str(self.spool_dir)
        return env


def _program_name() -> str:
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    stem = name[:-3] if name.endswith(".py") else name
    return stem or "python"


class Agent(Profiler):
    """Samples this process continuously and pushes a profile every `interval_s`."""

    mode = "sample"
    keep_sources = False  # its capture is a pipe, folded as it comes: END is never reported

    def __init__(self, config: AgentConfig) -> None:
        config.validate()
        options = ProfileOptions(rate_hz=config.rate_hz, mode="cpu", memory=config.memory)
        super().__init__(f"<agent pushing to {_shown(config)}>", options)
        self.config = config
        self.endpoint = config.endpoint or endpoint_from_env(config.url)
        self.labels = {"host": socket.gethostname(), **config.labels}
        self.stream = CaptureStream("<agent>")
        self.periods = 0
        self.pushed_samples = 0
        self._pipe_r = -1
        self._reader: threading.Thread | None = None
        self._delivery: Delivery | None = None
        self._period_start_ns = 0
        self._stop_event = threading.Event()
        self._lock = threading.Lock()

    # -- the capture goes into a pipe ---------------------------------------------------
    def _open_output(self) -> CaptureFile:
        r, w = os.pipe()
        with contextlib.suppress(OSError):  # a bigger pipe rides out a busy reader
            fcntl.fcntl(w, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
        os.set_inheritable(r, False)
        os.set_inheritable(w, False)
        self._pipe_r = r
        return CaptureFile(w)

    def _start(self) -> None:
        spool = self.config.spool_dir or default_spool_dir(self.config.service)
        # A spool that cannot be written (a read-only file system, a full disk, a directory
        # that cannot be made) does not stop the agent: profiles still go to the server, and
        # a write that fails is reported when it happens (delivery.Delivery._put).  The
        # agent's threads, like the sampler's, never take a signal meant for the program.
        with signals_blocked():
            self._delivery = Delivery(
                self.endpoint,
                spool,
                int(self.config.spool_cap_mb * 2**20),
                backoff_s=(min(0.5, self.config.backoff_max_s), self.config.backoff_max_s),
            )
        try:
            super()._start()
        except BaseException:
            self._delivery.close(0.0)
            self._delivery = None
            raise
        self._period_start_ns = time.time_ns()
        self._reader = threading.Thread(target=self._read, name="leadline-agent", daemon=True)
        with signals_blocked():
            self._reader.start()

    # -- the reader thread ------------------------------------------------------------------
    def _read(self) -> None:
        period_ns = int(self.config.interval_s * 1e9)
        try:
            while True:
                ready, _, _ = select.select([self._pipe_r], [], [], 0.25)
                if ready:
                    data = os.read(self._pipe_r, 1 << 16)
                    if not data:
                        break  # the sampler closed the capture
                    self.stream.feed(data)
                now = time.time_ns()
                boundary = self._period_start_ns + period_ns
                if now >= boundary + FLUSH_GRACE_S * 1e9 and not self._stop_event.is_set():
                    self._push_period(boundary)
        except Exception as e:  # the agent stops; the program must not notice
            why = f"{type(e).__name__}: {e}"
            print(f"leadline: the profiling agent stopped: {why}", file=sys.stderr)
        finally:
            with contextlib.suppress(OSError):
                os.close(self._pipe_r)

    def _push_period(self, boundary_ns: int | None) -> None:
        """Fold the samples taken before `boundary_ns` (all, if None) into this period's
        profiles and submit them."""
        with self._lock:
            start_ns = self._period_start_ns
            end_ns = boundary_ns if boundary_ns is not None else time.time_ns()
            if boundary_ns is None:
                n = self.stream.take()
            else:
                n = self.stream.take(self._ticks_at(boundary_ns))
            self._period_start_ns = end_ns
        self.periods += 1
        if n == 0 or not self.stream.meta:
            return
        self.stream.end = {"threads": {**self._thread_names, **thread_names()}}
        profile = _without_threads(load_profile(self.stream), self._own_tids())
        self.stream.end = None
        profile = dataclasses.replace(
            profile, start_unix_ns=start_ns, duration_ns=max(end_ns - start_ns, 0)
        )
        labels = ("thread",) if self.config.thread_labels else ()
        assert self._delivery is not None
        cpu = _running_only(profile)
        self.pushed_samples += sum(st.samples for st in cpu.stacks)
        if cpu.stacks:
            body = to_pprof(cpu, FLEET_CPU_METRICS, labels)
            self._delivery.submit(self._upload(body, start_ns, end_ns))
        if self.config.memory:
            growth = _growth_only(profile)
            if growth.stacks:
                body = to_pprof(growth, ("memory",), labels)
                self._delivery.submit(self._upload(body, start_ns, end_ns))

    def _own_tids(self) -> set[int]:
        """The kernel's ids of the agent's own threads: the reader and the delivery thread."""
        ids = (
            self._reader.native_id if self._reader is not None else None,
            self._delivery.native_id if self._delivery is not None else None,
        )
        return {i for i in ids if i}

    def _upload(self, body: bytes, start_ns: int, end_ns: int) -> Upload:
        params = ingest_params(
            self.config.service, self.labels, start_ns / 1e9, end_ns / 1e9, self.config.rate_hz
        )
        return Upload(params, body)

    def _ticks_at(self, unix_ns: int) -> int:
        meta = self.stream.meta
        tick_ns = float(meta.get("tick_ns") or 1.0)
        return int(meta.get("t_start", 0)) + int((unix_ns - int(meta["start_unix_ns"])) / tick_ns)

    # -- stop ---------------------------------------------------------------------------
    def stop(self) -> Any:
        if self.record is not None:
            return self.record
        if self._delivery is None:  # never started (its start failed): nothing to stop
            return None
        if os.getpid() != self.pid:  # a forked child: its parent's threads are not here
            with contextlib.suppress(OSError):
                os.close(self._pipe_r)  # or the parent's reader never sees the pipe's end
            return super().stop()
        self._stop_event.set()
        result = super().stop()  # the sampler writes END and closes the pipe
        if self._reader is not None:
            self._reader.join(5.0)
        self._push_period(None)
        if self._delivery is not None:
            self._delivery.close(self.config.flush_s)
        return result

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {"periods": self.periods, "samples": self.pushed_samples}
        if self._delivery is not None:
            out.update(self._delivery.snapshot())
        return out


def _shown(config: AgentConfig) -> str:
    return safe_url(config.url)


def _without_threads(p: SampleProfile, tids: set[int]) -> SampleProfile:
    """The profile without the samples of the threads `tids` (kernel ids): the agent's own
    threads run in the program's process and are sampled with it, but what they do (reading the
    sampler's pipe, folding, pushing: seen, 12 of 645 samples of a 6 s program, and a request's
    `getaddrinfo` ranked second in a fleet diff) is not the program's work."""
    own = {t.serial for t in p.threads if t.tid in tids}
    if not own:
        return p
    return dataclasses.replace(
        p,
        threads=[t for t in p.threads if t.serial not in own],
        stacks=[s for s in p.stacks if s.thread not in own],
    )


def _running_only(p: SampleProfile) -> SampleProfile:
    """CPU samples: the samples in which the thread ran (cpu mode marks the others idle)."""
    stacks = [
        Stack(
            s.frames,
            s.thread,
            samples=s.samples - s.idle,
            cpu_ns=s.cpu_ns,
            cpu_sq=s.cpu_sq,
            reads=s.reads,
            idle_reads=s.idle_reads,
        )
        for s in p.stacks
        if s.samples > s.idle or s.cpu_ns > 0
    ]
    return dataclasses.replace(p, stacks=stacks, memory=False)


def _growth_only(p: SampleProfile) -> SampleProfile:
    """RSS growth: the stacks whose resident memory grew over the period (memory given back
    has no width to draw and would cancel growth elsewhere in a merged fleet view)."""
    stacks = [
        Stack(s.frames, s.thread, samples=s.samples, idle=s.idle, rss_bytes=s.rss_bytes)
        for s in p.stacks
        if s.rss_bytes > 0
    ]
    return dataclasses.replace(p, stacks=stacks, memory=True)


# -- the process's agent -------------------------------------------------------------------
_agent: Agent | None = None
_config_for_children: AgentConfig | None = None


def start_agent(
    url: str | None = None,
    service: str | None = None,
    labels: dict[str, str] | None = None,
    *,
    interval: float = 10.0,
    rate: float = 100.0,
    memory: bool = False,
    thread_labels: bool = False,
    spool_dir: str | os.PathLike[str] | None = None,
    spool_cap_mb: float = 64.0,
    version: str | None = None,
) -> Agent:
    """Sample this process continuously and push a profile to Pyroscope every `interval`
    seconds, until the process exits or :func:`stop_agent`.  `url` defaults to LEADLINE_PUSH;
    credentials come from LEADLINE_PUSH_TOKEN / LEADLINE_PUSH_TOKEN_FILE."""
    url = url or os.environ.get("LEADLINE_PUSH", "")
    if not url:
        raise LeadlineError("no Pyroscope URL: pass one or set LEADLINE_PUSH")
    all_labels = dict(labels or {})
    if version is not None:
        all_labels["version"] = version
    config = AgentConfig(
        url=url,
        service=service or _program_name(),
        labels=check_labels(all_labels),
        interval_s=interval,
        rate_hz=rate,
        memory=memory,
        thread_labels=thread_labels,
        spool_dir=Path(spool_dir) if spool_dir is not None else None,
        spool_cap_mb=spool_cap_mb,
    )
    return _start(config)


def _start(config: AgentConfig) -> Agent:
    _check_none_running()
    agent = Agent(config)
    agent.start()  # registered once started: one that failed leaves nothing to stop at exit
    register(agent)
    return agent


def _check_none_running() -> None:
    if _agent is not None and _agent.record is None:
        raise LeadlineError("a leadline agent is already running in this process")


def register(agent: Agent) -> None:
    """Make `agent` this process's agent: stopped at exit, restarted in forked children."""
    global _agent, _config_for_children
    _check_none_running()
    _agent = agent
    _config_for_children = agent.config


def stop_agent() -> dict[str, Any] | None:
    """Stop this process's agent, delivering (or spooling) its last profiles; its stats."""
    global _agent
    agent, _agent = _agent, None
    if agent is None:
        return None
    agent.stop()
    return agent.stats()


def _after_fork_in_child() -> None:
    """A forked worker (a pre-fork server's) gets an agent of its own."""
    global _agent
    if _config_for_children is None:
        return
    _agent = None
    with contextlib.suppress(Exception):
        _start(_config_for_children)


def _stop_at_exit() -> None:
    """The exit handler: an exit handler's exception is a traceback on the program's stderr,
    which the agent must never add."""
    try:
        stop_agent()
    except Exception as e:
        with contextlib.suppress(Exception):
            print(f"leadline: the profiling agent did not stop cleanly: {e}", file=sys.stderr)


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_stop_at_exit)


def _is_leadline_cli() -> bool:
    """leadline's own command line (`leadline run --push` starts the agent for its target)."""
    argv0 = os.path.basename(sys.argv[0]) if sys.argv else ""
    orig = list(getattr(sys, "orig_argv", []))
    pairs = itertools.pairwise(orig)
    as_module = any(a == "-m" and b.split(".")[0] == "leadline" for a, b in pairs)
    return argv0 == "leadline" or as_module


_autostarted = False


def autostart() -> None:
    """The start-up hook: start the agent if LEADLINE_PUSH is set.  Never raises: a service
    must start even if its profiling cannot.  Runs once per process: the interpreter may read
    the same site-packages, and so the hook, twice (3.11's venv start-up does)."""
    global _autostarted
    if _autostarted or _agent is not None or _is_leadline_cli():
        return
    _autostarted = True
    try:
        config = AgentConfig.from_env()
        if config is not None:
            _start(config)
    except LeadlineError as e:
        print(f"leadline: the profiling agent did not start: {e}", file=sys.stderr)
    except Exception as e:
        print(
            f"leadline: the profiling agent did not start: {type(e).__name__}: {e}",
            file=sys.stderr,
        )
