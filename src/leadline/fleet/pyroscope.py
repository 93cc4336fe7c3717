"""Grafana Pyroscope: the names and parameters of its ingest API, and its query API for diffs.

Ingest (``POST /ingest``, the agent's path): ``name=SERVICE{label=value,...}``, ``from`` and
``until`` in Unix seconds, ``format=pprof``, ``sampleRate``, ``spyName``; the body is the pprof.
Pyroscope turns SERVICE into the ``service_name`` label and names the profile type after the
pprof's sample types (``cpu`` -> ``process_cpu``).

Query (``leadline diff pyroscope://...``): ``SelectMergeProfile`` of the querier's Connect API
returns every matching profile of a time range merged into one pprof.  The request is a small
protobuf, encoded by the same codec as the pprof exporter; the answer is read by the pprof
importer.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import time
import urllib.parse
from dataclasses import dataclass

from ..errors import LeadlineError
from ..render.encode import PPROF_SAMPLE_TYPES, PprofMetric, protobuf_message
from .delivery import Endpoint, HTTPFailure, request

LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def companion_type(profile_type: str, metric: PprofMetric) -> str:
    """The profile type that holds `metric` of the same pushes as `profile_type` (a CPU type:
    its samples count, its spread)."""
    name, _, _, *period = profile_type.split(":")
    return ":".join((name, *PPROF_SAMPLE_TYPES[metric], *period))


CPU_TYPE = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
RSS_TYPE = "rss:rss:bytes:cpu:nanoseconds"
PROFILE_TYPES = {"cpu": CPU_TYPE, "samples": companion_type(CPU_TYPE, "samples")}
PROFILE_TYPES["memory"] = RSS_TYPE
# The pprof sample types of the agent's CPU profile: Pyroscope keeps each as a profile type of
# its own (NAME:TYPE:UNIT:PERIOD_TYPE:PERIOD_UNIT), which companion_type names.
FLEET_CPU_METRICS: tuple[PprofMetric, ...] = ("samples", "cpu", "cpu_spread")
SCHEMES = {"pyroscope": "http", "pyroscope+http": "http", "pyroscope+https": "https"}


def label_value(value: str) -> str:
    """A label value Pyroscope's ``name`` parser accepts: no ``{},=`` and no spaces."""
    return re.sub(r"[{},=\s\"]", "_", value)[:200] or "_"


def check_labels(labels: dict[str, str]) -> dict[str, str]:
    for name in labels:
        if not LABEL_NAME.match(name) or name.startswith("__"):
            raise LeadlineError(
                f"bad label name {name!r}: letters, digits, '_' and '.', not starting with a "
                "digit or '__'"
            )
    return {k: label_value(v) for k, v in labels.items()}


def app_name(service: str, labels: dict[str, str]) -> str:
    """``SERVICE{k=v,...}``, the ``name`` parameter of ``/ingest``."""
    inner = ",".join(f"{k}={label_value(v)}" for k, v in sorted(labels.items()))
    return f"{label_value(service)}{{{inner}}}"


def ingest_params(
    service: str, labels: dict[str, str], start_s: float, end_s: float, rate_hz: float
) -> dict[str, str]:
    return {
        "name": app_name(service, labels),
        "from": str(int(start_s)),
        "until": str(max(int(end_s), int(start_s) + 1)),
        "format": "pprof",
        "sampleRate": str(round(rate_hz)),
        "spyName": "leadline",
    }


def parse_labels(text: str) -> dict[str, str]:
    """``k=v,k=v`` (environment variables, ``--label`` given once with commas)."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, eq, value = part.partition("=")
        if not eq or not name.strip():
            raise LeadlineError(f"bad label {part!r}: expected NAME=VALUE")
        out[name.strip()] = value.strip()
    return check_labels(out)


# -- the query side -------------------------------------------------------------------------
@dataclass(frozen=True)
class FleetQuery:
    """``pyroscope://HOST:PORT/SERVICE?from=...&until=...&label=value&type=...``."""

    endpoint: Endpoint
    service: str
    labels: dict[str, str]
    start_ms: int
    end_ms: int
    profile_type: str

    @property
    def selector(self) -> str:
        pairs = [("service_name", self.service), *sorted(self.labels.items())]
        inner = ",".join(f'{k}="{_quote(v)}"' for k, v in pairs)
        return "{" + inner + "}"

    @property
    def shown(self) -> str:
        labels = "".join(f",{k}={v}" for k, v in sorted(self.labels.items()))
        return f"{self.endpoint.shown} {self.service}{{{labels.lstrip(',')}}}"


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def is_fleet_url(text: str) -> bool:
    return text.split("://", 1)[0] in SCHEMES and "://" in text


def parse_time(text: str, now: float | None = None) -> float:
    """Unix seconds (or milliseconds), an ISO date/time (UTC unless it says), ``now``, or
    ``now-30m`` / ``now-2h`` / ``now-7d``."""
    now = time.time() if now is None else now
    t = text.strip()
    m = re.fullmatch(r"now(?:-(\d+(?:\.\d+)?)([smhdw]))?", t)
    if m:
        if not m.group(1):
            return now
        unit = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]
        return now - float(m.group(1)) * unit
    if re.fullmatch(r"\d+(\.\d+)?", t):
        v = float(t)
        return v / 1000.0 if v > 1e11 else v
    try:
        d = _dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise LeadlineError(
            f"bad time {text!r}: Unix seconds, an ISO date/time, now or now-N(s|m|h|d|w)"
        ) from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    return d.timestamp()


def parse_fleet_url(text: str, now: float | None = None) -> FleetQuery:
    """A BASE or NEW of ``leadline diff`` naming a fleet aggregate; LeadlineError if malformed."""
    scheme, _, rest = text.partition("://")
    http_scheme = SCHEMES.get(scheme)
    if http_scheme is None:
        raise LeadlineError(f"{text}: not a pyroscope:// URL")
    parts = urllib.parse.urlsplit(f"{http_scheme}://{rest}")
    service = urllib.parse.unquote(parts.path.strip("/"))
    if not parts.hostname or not service or "/" in service:
        raise LeadlineError(f"{_shown(text)}: expected pyroscope://HOST:PORT/SERVICE?from=...")
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    labels: dict[str, str] = {}
    start, end, ptype = "now-1h", "now", "cpu"
    for key, value in query:
        if key == "from":
            start = value
        elif key == "until":
            end = value
        elif key == "type":
            ptype = value
        else:
            labels[key] = value
    check_labels(labels)
    now = time.time() if now is None else now
    start_s, end_s = parse_time(start, now), parse_time(end, now)
    if end_s <= start_s:
        raise LeadlineError(f"{_shown(text)}: 'until' must be after 'from'")
    port = f":{parts.port}" if parts.port else ""
    base = f"{http_scheme}://{parts.hostname}{port}"
    if parts.username is not None:
        base = f"{http_scheme}://{parts.netloc}"
    endpoint = endpoint_from_env(base)
    return FleetQuery(
        endpoint,
        service,
        labels,
        int(start_s * 1000),
        int(end_s * 1000),
        PROFILE_TYPES.get(ptype, ptype),
    )


def _shown(text: str) -> str:
    scheme, _, rest = text.partition("://")
    return f"{scheme}://{rest.rsplit('@', 1)[-1]}"


def endpoint_from_env(url: str, environ: dict[str, str] | None = None) -> Endpoint:
    """The endpoint for `url` with the credentials and CA file the environment gives:
    LEADLINE_PUSH_TOKEN or LEADLINE_PUSH_TOKEN_FILE, LEADLINE_PUSH_CA, LEADLINE_PUSH_TENANT."""
    env = os.environ if environ is None else environ
    token = env.get("LEADLINE_PUSH_TOKEN") or None
    token_file = env.get("LEADLINE_PUSH_TOKEN_FILE")
    if token is None and token_file:
        try:
            with open(token_file, encoding="utf-8") as f:
                token = f.read().strip() or None
        except OSError as e:
            raise LeadlineError(f"cannot read the token file {token_file}: {e.strerror}") from None
    try:
        return Endpoint(
            url,
            token=token,
            ca_file=env.get("LEADLINE_PUSH_CA") or None,
            tenant=env.get("LEADLINE_PUSH_TENANT") or None,
        )
    except ValueError as e:
        raise LeadlineError(str(e)) from None


def select_merge_profile(q: FleetQuery) -> bytes:
    """The merged pprof (uncompressed protobuf) of every profile matching `q`."""
    body = (
        protobuf_message()
        .text(1, q.profile_type)
        .text(2, q.selector)
        .scalar(3, q.start_ms)
        .scalar(4, q.end_ms)
    )
    # A server that answers "try again" (5xx, 429: seen, HTTP 500 "canceled: stream error" from
    # a Pyroscope server that had just restarted, its ingester not yet serving queries) is
    # asked again, after 0.5, 1 and 2 s; any other failure, or the fourth, is the answer.
    for wait_s in (*QUERY_RETRY_WAITS_S, None):
        try:
            return request(
                q.endpoint,
                "POST",
                "/querier.v1.QuerierService/SelectMergeProfile",
                bytes(body.data),
                {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"},
            )
        except HTTPFailure as e:
            if wait_s is None or not e.try_again:
                raise LeadlineError(f"{q.shown}: the query failed ({e.reason})") from None
            time.sleep(wait_s)
    raise AssertionError("unreachable")


QUERY_RETRY_WAITS_S = (0.5, 1.0, 2.0)
