"""A real Grafana Pyroscope server on 127.0.0.1, for the fleet tests and benchmarks.

    python tools/pyroscope_server.py          # build if needed, run until Ctrl-C, print its URL

The binary comes from tools/build_pyroscope.sh (v1.8.0, cached outside the repository).  Every
listen and ring address is pinned to 127.0.0.1, on free ports, with its data in a temporary
directory: otherwise the server advertises and dials a non-loopback address.  The same data
directory survives :meth:`PyroscopeServer.restart`, as a real server's disk survives a restart.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCAL = "127.0.0.1"


def binary() -> Path:
    """The server's binary, built on first use (minutes) and cached."""
    out = subprocess.run(
        ["sh", str(HERE / "build_pyroscope.sh")], check=True, stdout=subprocess.PIPE, text=True
    )
    path = Path(out.stdout.strip().splitlines()[-1])
    if not path.is_file():
        raise RuntimeError(f"the Pyroscope build did not produce {path}")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOCAL, 0))
        return int(s.getsockname()[1])


class PyroscopeServer:
    def __init__(self, data_dir: Path | None = None, log: Path | None = None) -> None:
        self.binary = binary()
        self._own_dir = data_dir is None
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix="pyroscope-"))
        self.log_path = log or self.data_dir / "server.log"
        self.http_port = free_port()
        self.grpc_port = free_port()
        self.memberlist_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{LOCAL}:{self.http_port}"

    def args(self) -> list[str]:
        d = self.data_dir
        flags = {
            "server.http-listen-address": LOCAL,
            "server.http-listen-port": self.http_port,
            "server.grpc-listen-address": LOCAL,
            "server.grpc-listen-port": self.grpc_port,
            "memberlist.bind-addr": LOCAL,
            "memberlist.bind-port": self.memberlist_port,
            "memberlist.advertise-addr": LOCAL,
            "memberlist.advertise-port": self.memberlist_port,
            "ingester.lifecycler.addr": LOCAL,
            "query-frontend.instance-addr": LOCAL,
            "compactor.ring.instance-addr": LOCAL,
            "distributor.ring.instance-addr": LOCAL,
            "overrides-exporter.ring.instance-addr": LOCAL,
            "query-scheduler.ring.instance-addr": LOCAL,
            "store-gateway.sharding-ring.instance-addr": LOCAL,
            "self-profiling.disable-push": "true",
            "usage-stats.enabled": "false",
            "tracing.enabled": "false",
            "storage.backend": "filesystem",
            "storage.filesystem.dir": d / "storage",
            "pyroscopedb.data-path": d / "data",
            "compactor.data-dir": d / "compactor",
        }
        return [str(self.binary)] + [f"-{k}={v}" for k, v in flags.items()]

    def start(self, timeout: float = 90.0) -> None:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.args(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.data_dir,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Pyroscope exited ({self.proc.returncode}): {self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"Pyroscope was not ready within {timeout:g} s: {self.tail()}")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        """An outage: the server dies at once (SIGKILL)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def restart(self, timeout: float = 90.0) -> None:
        self.stop()
        self.start(timeout)

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def cleanup(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def main() -> int:
    server = PyroscopeServer()
    try:
        server.start()
        print(f"Pyroscope is ready at {server.url} (data in {server.data_dir}); Ctrl-C stops it")
        sys.stdout.flush()
        while server.proc is not None and server.proc.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
