"""Drive headless Chromium for the HTML report's tests, with nothing beyond the stdlib.

Chromium is started with ``--remote-debugging-pipe``: the DevTools protocol then speaks
NUL-terminated JSON messages over file descriptors 3 (to the browser) and 4 (from it), so no
websocket client is needed.  One call loads a page, optionally runs a few JavaScript snippets
against it (to click, type, hover), and returns the serialized DOM, everything the page logged
as an error, every request it made and the snippets' results.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
)

REPO = Path(__file__).resolve().parents[1]
ENSURE_TOOLS = REPO / "tools" / "ensure-test-tools"


class BrowserError(RuntimeError):
    """Chromium could not be started, or it did not answer in time."""


def find_chromium() -> str | None:
    """The Chromium binary to use: $CHROMIUM, Debian's /usr/bin/chromium, or one on PATH."""
    env = os.environ.get("CHROMIUM")
    if env:
        return env
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


def ensure_chromium() -> tuple[str | None, str]:
    """Find Chromium, installing it with tools/ensure-test-tools if needed.

    Returns the binary (or None) and, when there is none, why.
    """
    found = find_chromium()
    if found:
        return found, ""
    try:
        proc = subprocess.run(
            ["bash", str(ENSURE_TOOLS)],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"tools/ensure-test-tools could not run: {exc}"
    found = find_chromium()
    if found:
        return found, ""
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return None, "chromium is not installed and could not be installed: " + " / ".join(tail)


@dataclass
class BrowserResult:
    """What one page load produced."""

    dom: str
    console_errors: list[str] = field(default_factory=list)
    console_messages: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)

    def element_attrs(self, element_id: str) -> dict[str, str]:
        """The attributes of the element with this id in the dumped DOM ({} if absent)."""
        finder = _Finder(element_id)
        finder.feed(self.dom)
        return finder.attrs

    def element_text(self, element_id: str) -> str:
        """The text content of the element with this id in the dumped DOM."""
        finder = _Finder(element_id)
        finder.feed(self.dom)
        return "".join(finder.text)

    def state(self) -> dict[str, str]:
        """The page's machine-readable state: the data-* attributes of #ll-state."""
        return {
            k[len("data-") :]: v
            for k, v in self.element_attrs("ll-state").items()
            if k.startswith("data-")
        }

    def tags(self, name: str) -> int:
        """How many elements with this tag name the dumped DOM has."""
        counter = _TagCounter(name)
        counter.feed(self.dom)
        return counter.count

    def body_text(self) -> str:
        """All text inside <body>, outside <script> and <style>."""
        collector = _TextCollector()
        collector.feed(self.dom)
        return "".join(collector.text)


class _Finder(HTMLParser):
    VOID = frozenset("area base br col embed hr img input link meta source track wbr".split())

    def __init__(self, element_id: str) -> None:
        super().__init__(convert_charrefs=True)
        self.element_id = element_id
        self.attrs: dict[str, str] = {}
        self.text: list[str] = []
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._depth:
            if tag not in self.VOID:
                self._depth += 1
            return
        values = {k: v or "" for k, v in attrs}
        if values.get("id") == self.element_id and not self.attrs:
            self.attrs = values
            if tag not in self.VOID:
                self._depth = 1

    def handle_endtag(self, tag: str) -> None:
        if self._depth:
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._depth:
            self.text.append(data)


class _TagCounter(HTMLParser):
    def __init__(self, name: str) -> None:
        super().__init__(convert_charrefs=True)
        self.name = name
        self.count = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == self.name:
            self.count += 1


class _TextCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self._in_body = False
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "body":
            self._in_body = True
        elif tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if self._in_body and not self._skip:
            self.text.append(data)


class _Pipe:
    """The DevTools protocol over Chromium's debugging pipe."""

    def __init__(self, write_fd: int, read_fd: int, deadline: float) -> None:
        self.write_fd = write_fd
        self.read_fd = read_fd
        self.deadline = deadline
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, session: str = "") -> int:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            written = os.write(self.write_fd, data)
            data = data[written:]
        return self.next_id

    def _read_message(self) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("chromium did not answer in time")
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise BrowserError("chromium closed the debugging pipe")
            self.buffer += chunk
        raw, _, self.buffer = self.buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(
        self, method: str, params: dict[str, Any] | None = None, session: str = ""
    ) -> dict[str, Any]:
        """Send a command and wait for its answer, keeping the events that come meanwhile."""
        wanted = self.send(method, params, session)
        while True:
            message = self._read_message()
            if message.get("id") == wanted:
                if "error" in message:
                    raise BrowserError(f"{method} failed: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self.events.append(message)

    def wait_event(self, method: str, session: str = "") -> dict[str, Any]:
        """Wait for an event (or return one already received)."""
        for event in self.events:
            if event["method"] == method and (not session or event.get("sessionId") == session):
                return event
        while True:
            message = self._read_message()
            if "method" in message:
                self.events.append(message)
                if message["method"] == method and (
                    not session or message.get("sessionId") == session
                ):
                    return message


def _remote_object_text(obj: dict[str, Any]) -> str:
    if "value" in obj:
        value = obj["value"]
        return value if isinstance(value, str) else json.dumps(value)
    return str(obj.get("description") or obj.get("unserializableValue") or obj.get("type", ""))


def _collect_console(pipe: _Pipe, result: BrowserResult) -> None:
    for event in pipe.events:
        method = event["method"]
        params = event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(_remote_object_text(a) for a in params.get("args", []))
            kind = params.get("type", "log")
            result.console_messages.append(f"{kind}: {text}")
            if kind in ("error", "assert"):
                result.console_errors.append(text)
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            exc = details.get("exception") or {}
            text = exc.get("description") or details.get("text", "exception")
            result.console_messages.append(f"exception: {text}")
            result.console_errors.append(str(text))
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            text = str(entry.get("text", ""))
            result.console_messages.append(f"{entry.get('level', 'log')}: {text}")
            if entry.get("level") == "error":
                result.console_errors.append(text)
        elif method == "Network.requestWillBeSent":
            result.requests.append(str(params.get("request", {}).get("url", "")))


def render_in_chromium(
    html_path: Path,
    hash: str = "",
    actions: Sequence[str] = (),
    *,
    screenshot: Path | None = None,
    width: int = 1400,
    height: int = 1000,
    timeout: float = 60.0,
) -> BrowserResult:
    """Load ``html_path`` (with ``#hash`` if given) in headless Chromium.

    After the load event each of ``actions`` (a JavaScript expression; a promise is awaited)
    is evaluated in order and its JSON-able value appended to ``results``.  Then the DOM is
    serialized, and ``screenshot`` (if given) written as a PNG of the whole page.
    """
    binary, why = ensure_chromium()
    if binary is None:
        raise BrowserError(why)
    url = html_path.resolve().as_uri()
    if hash:
        url += "#" + hash.lstrip("#")
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix="leadline-chromium-") as profile:
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # The child must find the pipe ends at fds 3 and 4, whatever numbers they have here.
        # Copies above 10 cannot collide with 3 and 4 while being moved there.
        child_read = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
        child_write = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)

        def place_fds() -> None:
            os.dup2(child_read, 3)
            os.dup2(child_write, 4)

        cmd = [
            binary,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            "--remote-debugging-pipe",
            f"--window-size={width},{height}",
            "--hide-scrollbars",
            "about:blank",
        ]
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(3, 4, child_read, child_write),
                preexec_fn=place_fds,
            )
        finally:
            for fd in (to_browser_r, from_browser_w, child_read, child_write):
                os.close(fd)
        pipe = _Pipe(to_browser_w, from_browser_r, deadline)
        try:
            return _drive(pipe, url, actions, screenshot, width, height)
        except BrowserError as exc:
            raise BrowserError(f"{exc} (chromium: {' '.join(cmd)})") from None
        finally:
            try:
                pipe.send("Browser.close")
            except OSError:
                pass
            os.close(to_browser_w)
            os.close(from_browser_r)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stderr is not None:
                proc.stderr.close()


def _drive(
    pipe: _Pipe,
    url: str,
    actions: Sequence[str],
    screenshot: Path | None,
    width: int,
    height: int,
) -> BrowserResult:
    target = str(pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"])
    attached = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})
    session = str(attached["sessionId"])
    for domain in ("Runtime", "Log", "Page", "Network"):
        pipe.call(f"{domain}.enable", {}, session)
    pipe.call(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        session,
    )
    pipe.events.clear()
    pipe.call("Page.navigate", {"url": url}, session)
    pipe.wait_event("Page.loadEventFired", session)
    result = BrowserResult(dom="")
    for expression in actions:
        answer = pipe.call(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            session,
        )
        if "exceptionDetails" in answer:
            details = answer["exceptionDetails"]
            exc = details.get("exception") or {}
            raise BrowserError(
                f"action {expression!r} threw: {exc.get('description') or details.get('text')}"
            )
        result.results.append(answer.get("result", {}).get("value"))
    answer = pipe.call(
        "Runtime.evaluate",
        {"expression": "document.documentElement.outerHTML", "returnByValue": True},
        session,
    )
    result.dom = "<!DOCTYPE html>\n" + str(answer["result"]["value"])
    if screenshot is not None:
        metrics = pipe.call("Page.getLayoutMetrics", {}, session)
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        shot = pipe.call(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {
                    "x": 0,
                    "y": 0,
                    "width": max(width, size["width"]),
                    "height": min(size["height"], 8000),
                    "scale": 1,
                },
            },
            session,
        )
        screenshot.write_bytes(base64.b64decode(shot["data"]))
    _collect_console(pipe, result)
    return result
