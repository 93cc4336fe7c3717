"""A real terminal for the tests of what leadline shows on one: tmux runs a command in a window
of its own server, send-keys types, capture-pane reads the screen."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path


class Terminal:
    """A tmux window of its own server, 80x24, running one command."""

    def __init__(self, tmp_path: Path, command: str) -> None:
        self.socket = f"leadline-test-{os.getpid()}-{time.monotonic_ns()}"
        env = {**os.environ, "TERM": "xterm-256color"}
        env.pop("NO_COLOR", None)
        self._tmux(
            "new-session",
            "-d",
            "-x",
            "80",
            "-y",
            "24",
            "-c",
            str(tmp_path),
            f"{command}; echo EXIT=$?; sleep 600",
            env=env,
        )

    def _tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        r = subprocess.run(
            ["tmux", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
            check=True,
        )
        return r.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p")

    def keys(self, keys: str) -> None:
        self._tmux("send-keys", keys)

    def wait_for(self, pattern: str, timeout: float = 60.0) -> str:
        end = time.monotonic() + timeout
        while True:
            text = self.screen()
            if re.search(pattern, text):
                return text
            if time.monotonic() > end:
                raise AssertionError(f"{pattern!r} not on the screen within {timeout:g} s:\n{text}")
            time.sleep(0.2)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)
