"""What the fleet tests share: Pyroscope's query API called with JSON, and an authenticating
TLS proxy (Pyroscope has no authentication of its own: operators put one in front of it)."""

from __future__ import annotations

import http.client
import http.server
import json
import ssl
import subprocess
import threading
import urllib.request
from pathlib import Path
from typing import Any


def connect_json(url: str, method: str, body: dict[str, Any]) -> dict[str, Any]:
    """A call of Pyroscope's Connect API with a JSON body."""
    req = urllib.request.Request(
        f"{url}/querier.v1.QuerierService/{method}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        result: dict[str, Any] = json.loads(r.read())
    return result


class AuthProxy:
    """HTTPS on 127.0.0.1 that forwards to Pyroscope only with `Authorization: Bearer TOKEN`,
    answering 401 otherwise; a self-signed certificate made with openssl."""

    def __init__(self, upstream: str, token: str, workdir: Path) -> None:
        self.cert = workdir / "cert.pem"
        key = workdir / "key.pem"
        subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                "-keyout", str(key), "-out", str(self.cert),
            ],
            check=True,
            capture_output=True,
        )  # fmt: skip
        up = upstream.split("://", 1)[1]
        host, port = up.split(":")
        seen = self.seen = {"authorized": 0, "refused": 0}

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Authorization") != f"Bearer {token}":
                    seen["refused"] += 1
                    self.send_response(401)
                    self.send_header("Content-Length", "12")
                    self.end_headers()
                    self.wfile.write(b"unauthorized")
                    return
                seen["authorized"] += 1
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
                conn.request("POST", self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(self.cert), str(key))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
